//! The policy runtime of backend services (SPEC R6): the slow path feeds the live connection
//! counts it tracks, and the service LB policy turns them into new Maglev weights.
//!
//! Everything here is pure and clocked by the caller (`now`, seconds on any monotonic origin),
//! so nlbd (wall clock) and the policy simulator (virtual time) run the same state machine.
//! Each call to [`Compiled::rebalance`] is one refresh: per service it records the counts and
//! the time, advances the automatic capacity drain, decides, and rewrites the service's
//! slices only when the decision differs from the one its tables serve by more than the
//! deadband ([`crate::policy::worth_applying`]): the hysteresis that keeps a steady load from
//! moving weights.

use super::{services, Compiled};
use crate::policy::{self, Decision, Locality, Policy, Preference};
use crate::Error;
use nlb_config::health::HealthState;
use nlb_hw::enums::Table;
use std::collections::BTreeMap;

/// Opened and closed connections of one service over the last [`TURNOVER_SECS`] or so, as
/// exponentially decaying counts (so their ratio needs no clock of its own).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Churn {
    /// At least one refresh interval was counted.
    measured: bool,
    /// Connections opened, all backends.
    opened: f64,
    /// Connections closed, per backend.
    closed: BTreeMap<String, f64>,
}

impl Churn {
    /// Adds one refresh interval of `secs`: the counts went from `before` to `after` while
    /// `closed` connections closed, so each backend opened `after - before + closed`.
    ///
    /// One walk over the three maps in name order (they are sorted), with no lookups: a
    /// refresh observes every backend of every service.
    fn observe(
        &mut self,
        before: &BTreeMap<String, u64>,
        after: Option<&BTreeMap<String, u64>>,
        closed: Option<&BTreeMap<String, u64>>,
        secs: f64,
    ) {
        self.measured = true;
        let decay = (-secs / TURNOVER_SECS).exp();
        self.opened *= decay;
        self.closed.retain(|_, c| {
            *c *= decay;
            *c > 1e-6
        });
        let empty = BTreeMap::new();
        let mut before = before.iter().peekable();
        let mut after = after.unwrap_or(&empty).iter().peekable();
        let mut closed = closed.unwrap_or(&empty).iter().peekable();
        loop {
            // The least name still ahead in any of the three.
            let name = [before.peek(), after.peek(), closed.peek()]
                .into_iter()
                .flatten()
                .map(|(n, _)| *n)
                .min();
            let Some(name) = name else { break };
            let take =
                |it: &mut std::iter::Peekable<std::collections::btree_map::Iter<String, u64>>| {
                    match it.peek() {
                        Some((n, &v)) if *n == name => {
                            it.next();
                            v
                        }
                        _ => 0,
                    }
                };
            let (was, now, shut) = (take(&mut before), take(&mut after), take(&mut closed));
            // A count the slow path lost track of (a rescan) cannot open a negative number.
            self.opened += (now + shut).saturating_sub(was) as f64;
            if shut > 0 {
                match self.closed.get_mut(name) {
                    Some(c) => *c += shut as f64,
                    None => {
                        self.closed.insert(name.clone(), shut as f64);
                    }
                }
            }
        }
    }

    /// Closed connections (decayed) of each of `names`, which are in name order (a plan's
    /// members are), by one walk over both.
    pub(super) fn closed_by_member(&self, names: &[&str]) -> Vec<f64> {
        by_member(names, &self.closed)
    }

    /// The turnover of a group whose members closed `closed` connections (decayed, see
    /// [`Churn::closed_by_member`]): their closed connections over the service's opened ones
    /// (at least one: when hardly any connection opens lately, what closes is still room),
    /// the closings counted two standard deviations high (a Poisson count of c has √c of
    /// them) so that a steady load's noise does not read as less room than its share; none
    /// closing is still 0. `None` before a refresh interval was counted.
    pub(super) fn turnover(&self, closed: f64) -> Option<f64> {
        if !self.measured {
            return None;
        }
        Some((closed + TURNOVER_SIGMAS * closed.sqrt()) / self.opened.max(1.0))
    }
}

/// The values of `map` for `names` (0 / default when absent). `names` are normally in
/// ascending order (a plan's members are sorted by name), and then this is one walk over
/// both, with no lookups; otherwise each name is looked up.
pub(super) fn by_member<V: Copy + Default>(names: &[&str], map: &BTreeMap<String, V>) -> Vec<V> {
    if !names.windows(2).all(|w| w[0] < w[1]) {
        return names
            .iter()
            .map(|n| map.get(*n).copied().unwrap_or_default())
            .collect();
    }
    let mut out = Vec::with_capacity(names.len());
    let mut entries = map.iter().peekable();
    for &name in names {
        while entries.next_if(|(k, _)| k.as_str() < name).is_some() {}
        out.push(match entries.peek() {
            Some((k, v)) if k.as_str() == name => **v,
            _ => V::default(),
        });
    }
    out
}

/// Shares that move by less than this (absolute, 5 percentage points) are left alone.
pub const DEFAULT_DEADBAND: f64 = 0.05;

/// Seconds over which the runtime counts opened and closed connections for a group's turnover
/// (an exponentially decaying count: a connection `TURNOVER_SECS` ago weighs 1/e): long
/// enough that a steady load's turnover varies by a few per cent, short enough to follow a
/// change of connection lifetimes within a few tens of seconds.
pub const TURNOVER_SECS: f64 = 10.0;

/// Standard deviations (√c of a Poisson count c) by which a group's turnover counts its
/// closings high. A group at capacity takes its turnover instead of its capacity's share only
/// when even the high count frees less: in a steady state both say the same (Little's law),
/// and the capacity's share, from the service's whole live count, is the steadier of the two.
pub const TURNOVER_SIGMAS: f64 = 3.0;

/// Maglev slots one refresh of nlbd refills at most ([`Compiled::rebalance_within`]): 16
/// slices of the largest size, about 40 ms of filling on one core. When more services move
/// at once, the most urgent go first and the others follow at the next refreshes, so no
/// refresh stalls the slow path for the time of every slice at once (100 services of
/// 65,537 slots: about 270 ms).
pub const DEFAULT_REFILL_BUDGET: u64 = 16 * 65_537;

/// Live connections per (pool, backend), as the slow path counts them in its connection table,
/// and, when it counts them, the connections that closed since the previous refresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveLoad {
    pools: BTreeMap<String, BTreeMap<String, u64>>,
    /// `None`: closed connections not counted (a full group is then assumed to free its share).
    closed: Option<BTreeMap<String, BTreeMap<String, u64>>>,
}

impl LiveLoad {
    /// No connections anywhere.
    pub fn new() -> LiveLoad {
        LiveLoad::default()
    }

    /// Counts `n` more connections of `pool` on `backend`.
    pub fn add(&mut self, pool: &str, backend: &str, n: u64) {
        // Names are allocated only when new (a refresh adds tens of thousands of counts).
        let counts = match self.pools.get_mut(pool) {
            Some(p) => p,
            None => self.pools.entry(pool.to_string()).or_default(),
        };
        match counts.get_mut(backend) {
            Some(c) => *c += n,
            None => {
                counts.insert(backend.to_string(), n);
            }
        }
    }

    /// Counts from whole pools at once, each pool once: `(pool, connections per backend)`.
    /// For a whole connection table this is much cheaper than [`LiveLoad::add`] one count
    /// at a time (a map built from sorted names is built in one pass).
    pub fn from_pools(pools: impl IntoIterator<Item = (String, BTreeMap<String, u64>)>) -> Self {
        LiveLoad {
            pools: pools.into_iter().collect(),
            closed: None,
        }
    }

    /// Counts `n` connections of `pool` on `backend` that closed (FIN, RST, idle timeout,
    /// eviction) since the previous refresh. Calling it (even with 0) says closings are
    /// counted, which lets a group at capacity take only what its closing connections free.
    pub fn add_closed(&mut self, pool: &str, backend: &str, n: u64) {
        let pools = self.closed.get_or_insert_with(BTreeMap::new);
        let counts = match pools.get_mut(pool) {
            Some(p) => p,
            None => pools.entry(pool.to_string()).or_default(),
        };
        *counts.entry(backend.to_string()).or_insert(0) += n;
    }

    /// Says that closed connections are counted even when none closed (see
    /// [`LiveLoad::add_closed`]).
    pub fn count_closed(&mut self) {
        self.closed.get_or_insert_with(BTreeMap::new);
    }

    /// Connections of `pool` on `backend`.
    pub fn get(&self, pool: &str, backend: &str) -> u64 {
        self.pools
            .get(pool)
            .and_then(|p| p.get(backend))
            .copied()
            .unwrap_or(0)
    }
}

/// One backend group of a service, where it is and what it may hold (for `status` and
/// `explain`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceGroup {
    /// The group's name (instance group or network endpoint group).
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its zone (empty when not known).
    pub zone: String,
    /// `preference`.
    pub preference: Preference,
    /// A failover backend (`failover`).
    pub failover: bool,
    /// Target capacity in connections (max connections × `capacityScaler`).
    pub capacity: f64,
    /// No backend of the service gives a capacity (`capacity` is only a weight).
    pub unlimited: bool,
    /// Its endpoints (backend names), in name order.
    pub members: Vec<String>,
}

/// What one refresh changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rebalanced {
    /// Services whose weights changed, by name.
    pub pools: Vec<String>,
    /// Services whose decision is worth applying but did not fit in the refresh's refill
    /// budget: the next refresh decides them again.
    pub deferred: Vec<String>,
    /// Table entries that changed, as the driver's delta load wants them.
    pub changed: Vec<(Table, u32)>,
}

impl Compiled {
    /// Names of the backend-service pools.
    pub fn service_pools(&self) -> Vec<String> {
        self.plans
            .iter()
            .filter(|p| p.service.is_some())
            .map(|p| p.name.clone())
            .collect()
    }

    /// One refresh of the policy at time `now` under `health`: records `live`, advances the
    /// drain state, and rewrites the slices of the services whose decision is worth applying
    /// under `deadband`. The tables then equal a fresh compile fed the same counts, drain
    /// state and time.
    pub fn rebalance(
        &mut self,
        live: &LiveLoad,
        now: f64,
        health: &HealthState,
        deadband: f64,
    ) -> Result<Rebalanced, Error> {
        self.rebalance_within(live, now, health, deadband, u64::MAX)
    }

    /// [`Compiled::rebalance`] refilling at most `max_slots` Maglev slots (at least one
    /// service when any is worth applying): every service is decided, the ones worth applying
    /// are refilled most urgent first ([`policy::urgency`]: health first, then the largest
    /// share move), and those past the budget are left for the next refresh
    /// ([`Rebalanced::deferred`]), their tables still serving the previous decision.
    pub fn rebalance_within(
        &mut self,
        live: &LiveLoad,
        now: f64,
        health: &HealthState,
        deadband: f64,
        max_slots: u64,
    ) -> Result<Rebalanced, Error> {
        let mut out = Rebalanced::default();
        // (urgency, pool name, slots of its slices)
        let mut worth: Vec<(f64, String, u64)> = Vec::new();
        for id in 0..self.plans.len() {
            if self.plans[id].service.is_none() {
                continue;
            }
            let in_pool = health.in_pool(&self.plans[id].name);
            let healthy: Vec<bool> = (0..self.plans[id].members.len())
                .map(|i| self.member_healthy(id, i, &in_pool))
                .collect();
            let plan = &mut self.plans[id];
            let pool_name = plan.name.clone();
            let slots = u64::from(plan.size) + u64::from(plan.failover_size);
            let names: Vec<&str> = plan.members.iter().map(|m| m.0.as_str()).collect();
            let Some(sp) = plan.service.as_deref_mut() else {
                continue;
            };
            if let Some(closed) = &live.closed {
                let new_counts = live.pools.get(&pool_name);
                let closed = closed.get(&pool_name);
                if sp.observed.is_some() && now > sp.now {
                    sp.churn.observe(&sp.live, new_counts, closed, now - sp.now);
                }
            } else {
                sp.churn = Churn::default();
            }
            // (A steady load feeds the same counts again: compared, not copied.)
            match live.pools.get(&pool_name) {
                Some(counts) if *counts == sp.live => {}
                Some(counts) => sp.live = counts.clone(),
                None => sp.live.clear(),
            }
            sp.now = now;
            let groups = services::policy_groups(sp, &names, &healthy, None);
            let next = policy::decide(&sp.policy, &sp.locality, &groups, &mut sp.drain, now);
            let urgency = match &sp.decision {
                None => Some(f64::INFINITY),
                Some(applied) => policy::worth_applying(applied, &next, deadband)
                    .then(|| policy::urgency(applied, &next)),
            };
            sp.observed = Some(next);
            if let Some(u) = urgency {
                worth.push((u, pool_name, slots));
            }
        }
        worth.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut spent = 0u64;
        let mut refill = Vec::new();
        for (_, pool_name, slots) in worth {
            if spent > 0 && spent.saturating_add(slots) > max_slots {
                out.deferred.push(pool_name);
                continue;
            }
            spent = spent.saturating_add(slots);
            refill.push(self.pool_index(&pool_name)?);
            out.pools.push(pool_name);
        }
        // The refills computed side by side, then written one by one.
        let fills = self.service_fills(&refill, health);
        for (id, fill) in refill.into_iter().zip(fills) {
            out.changed
                .extend(self.recompile_pool_with(id, health, fill));
        }
        out.pools.sort_unstable();
        out.deferred.sort_unstable();
        out.changed.sort_by_key(|(t, i)| (t.value(), *i));
        out.changed.dedup();
        Ok(out)
    }

    /// Carries the runtime state of the services that `previous` also has (live counts, drain
    /// state, time) into this compile and refills them, so a reload does not forget a drain
    /// or fill new tables as if no connection were live.
    pub fn adopt_policy_state(
        &mut self,
        previous: &Compiled,
        health: &HealthState,
    ) -> Result<(), Error> {
        for id in 0..self.plans.len() {
            let name = self.plans[id].name.clone();
            let Some(old) = previous
                .plans
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.service.as_deref())
            else {
                continue;
            };
            let Some(sp) = self.plans[id].service.as_deref_mut() else {
                continue;
            };
            sp.live = old.live.clone();
            sp.churn = old.churn.clone();
            sp.drain = old.drain.clone();
            sp.now = old.now;
            sp.observed = old.observed.clone();
            self.recompile_pool(&name, health)?;
        }
        Ok(())
    }

    /// The service LB policy of a backend service (with its `failoverPolicy`); `None` for
    /// other pools.
    pub fn service_policy(&self, pool: &str) -> Option<&Policy> {
        let sp = self
            .plans
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.service.as_deref())?;
        Some(&sp.policy)
    }

    /// Where the NIC is, as a backend service's policy sees it; `None` for other pools.
    pub fn service_locality(&self, pool: &str) -> Option<&Locality> {
        let sp = self
            .plans
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.service.as_deref())?;
        Some(&sp.locality)
    }

    /// The groups of a backend service, by name; `None` for other pools.
    pub fn service_groups(&self, pool: &str) -> Option<Vec<ServiceGroup>> {
        let plan = self.plans.iter().find(|p| p.name == pool)?;
        let sp = plan.service.as_deref()?;
        Some(
            sp.groups
                .iter()
                .map(|g| ServiceGroup {
                    name: g.name.clone(),
                    region: g.region.clone(),
                    zone: g.zone.clone(),
                    preference: g.preference,
                    failover: g.failover,
                    capacity: g.capacity,
                    unlimited: g.unlimited,
                    members: g
                        .members
                        .iter()
                        .filter_map(|&i| plan.members.get(i).map(|m| m.0.clone()))
                        .collect(),
                })
                .collect(),
        )
    }

    /// Policy time (seconds on the slow path's monotonic clock) of a backend service's latest
    /// refresh: 0 before the first (a compile decides with no live connections).
    pub fn service_refreshed_at(&self, pool: &str) -> Option<f64> {
        let sp = self
            .plans
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.service.as_deref())?;
        Some(sp.now)
    }

    /// Whether the slow path has fed a backend service live counts yet ([`Compiled::rebalance`]
    /// or a reload that carried them): `false` for a fresh compile, which decides as with no
    /// live connection. `None` for other pools.
    pub fn service_fed(&self, pool: &str) -> Option<bool> {
        let sp = self
            .plans
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.service.as_deref())?;
        Some(sp.observed.is_some())
    }

    /// The policy's view of a backend service at the latest refresh (live counts, utilisation,
    /// drained groups, the shares it would give now), which may differ from what the tables
    /// serve ([`Compiled::service_decision`]) by less than the deadband. Before the first
    /// refresh, the served decision. `None` for other pools.
    pub fn service_observed(&self, pool: &str) -> Option<&Decision> {
        let sp = self
            .plans
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.service.as_deref())?;
        sp.observed.as_ref().or(sp.decision.as_ref())
    }
}
