//! The service load-balancing policy of backend services (SPEC R6) as Maglev weights, and the
//! passthrough semantics of the backend services that name no policy.
//!
//! Google Cloud applies the service LB policy in its proxies, request by request. A
//! passthrough NIC only chooses a backend for each *new* connection from its Maglev slice, so
//! here the policy decides what share of new connections each backend group gets, and the
//! shares become the weights of the slice. The "client" of Google Cloud's policy is the NIC
//! itself: it has a region and a zone, and regions have a distance order ([`Locality`]).
//! Capacity is counted in connections: a group's capacity is its `maxConnections` (per group,
//! per instance or per endpoint) times its `capacityScaler`, and its utilisation is the live
//! connections the host tracks on its endpoints divided by that.
//!
//! **Without a policy** ([`Policy::passthrough`]: a backend service without
//! `serviceLbPolicy`, and every Kubernetes Service) the backend service keeps the passthrough
//! load balancer's semantics (SPEC R6, R7.1): new connections spread over the healthy
//! endpoints alike, whatever their group, zone or region, with no tiers, capacity, automatic
//! capacity drain, failover threshold or isolation; only `failoverPolicy` moves them to the
//! failover backends, zonal affinity (SPEC R7.4) keeps them in the NIC's zone, and a group
//! with `capacityScaler: 0` takes none.
//!
//! **With a policy**, one decision ([`decide`]) takes these steps, each reported in the
//! result:
//!
//! 1. **Automatic capacity drain** (R6.3, when enabled): a group with fewer than 25 % of its
//!    endpoints healthy is a drain candidate; every candidate is drained (effective capacity
//!    0) provided candidates are fewer than 50 % of all groups, and none is otherwise (groups
//!    with capacity 0 for other reasons count in the total, not as candidates; a drained group
//!    stays a candidate until it returns). A drained group returns once at least 35 % of its
//!    endpoints have passed health checks for 60 s.
//! 2. **Failover backends** (the backend service's `failoverPolicy`): when fewer than
//!    `failoverRatio` of the primary endpoints are healthy (`<`, as Google Cloud compares it
//!    for backend services, exactly on the written decimal), or, with the ratio 0 (the
//!    default), when no primary endpoint is healthy, and a failover backend has a healthy
//!    endpoint, the failover backends serve instead of the primary ones.
//! 3. **Tiers**: preferred groups first (R6.6), then the default groups in locality order by
//!    the algorithm (R6.1): `SPRAY_TO_WORLD` one tier of everything; `SPRAY_TO_REGION` one tier
//!    per region, the NIC's region first, then by distance; `WATERFALL_BY_REGION` the same,
//!    except that in the NIC's region its own zone comes first (each front end prefers the
//!    zone nearest to it, so at low load the NIC's zone takes everything), then the region's
//!    other zones together; `WATERFALL_BY_ZONE` one tier per zone of the NIC's region (its own
//!    zone first, then the others one at a time), then one per farther region. A group whose
//!    healthy share is below the failover threshold (R6.4, default 70 %) is moved to a last
//!    tier: the others take its traffic while they have room.
//! 4. **Isolation** (R6.5, granularity `REGION`): traffic does not spill to another region for
//!    capacity; `NEAREST` still leaves the nearest region when it has no healthy capacity (a
//!    group below the failover threshold counts as unhealthy), for the next region that has
//!    some, `STRICT` never does (new connections are dropped instead, even when every region
//!    is down).
//! 5. **Shares**: tiers are filled in order. A tier of capacity C gets the share C / N of new
//!    connections, N being the live connections of the whole service (at least 1), and the next
//!    tier the rest: in a steady state of N connections (arrival rate × lifetime) the tier then
//!    holds C, and a load that does not change gives shares that do not change. C / N alone
//!    lets a tier fill past C while N grows (connections it took when N was small stay open),
//!    so a group at its capacity takes only its *turnover*, the share of new connections that
//!    its closing connections free ([`Group::turnover`]): with no connection closing it takes
//!    none, and the rest spills. A group [`PAST_CAPACITY_SIGMAS`] × √C past capacity takes
//!    none at all. What no tier has room for goes to the tiers in use in proportion to their
//!    capacity (overload), or all to the nearest region under isolation. Within a tier, groups
//!    share in proportion to their room (their capacity, unless full); within a group, its
//!    healthy endpoints share equally.
//! 6. **Fail open** (R3.4): when no endpoint anywhere is healthy, every endpoint of the serving
//!    set gets an equal share, unless `dropTrafficIfUnhealthy` (or `STRICT` isolation) asks to
//!    drop.
//!
//! Every decision names the rule that decided it ([`Decision::rule`]): `nlbctl explain`,
//! `nlbctl status` and `nlbctl policy-sim` say it.
//!
//! Everything here is a pure function of its inputs and the [`DrainState`] it updates, so the
//! slow path and the policy simulator get the same decisions for the same inputs.

use nlb_config::model::Ratio;
pub use nlb_config::policy::{Algorithm, Isolation, Locality, Preference};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The policy of one backend service.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `loadBalancingAlgorithm`.
    pub algorithm: Algorithm,
    /// `autoCapacityDrain.enable`.
    pub auto_capacity_drain: bool,
    /// `failoverConfig.failoverHealthThreshold`, percent (1..=99, default 70).
    pub failover_health_threshold: u8,
    /// `isolationConfig`.
    pub isolation: Isolation,
    /// `failoverPolicy.failoverRatio` of the backend service (0..=1, exactly as written);
    /// `None` is 0, Google Cloud's default.
    pub failover_ratio: Option<Ratio>,
    /// `failoverPolicy.dropTrafficIfUnhealthy`.
    pub drop_traffic_if_unhealthy: bool,
    /// Zonal affinity of the passthrough load balancer (`ZONAL_AFFINITY_SPILL_CROSS_ZONE`
    /// with spillover ratio 0, what GKE sets for `trafficDistribution: PreferClose`, SPEC
    /// R7.4): when a group in the NIC's zone has a healthy endpoint, only the NIC zone's
    /// groups serve; otherwise every group does, as without it.
    pub zonal_affinity: bool,
    /// No service LB policy is named (SPEC R6): the passthrough load balancer's semantics, new
    /// connections over the healthy endpoints alike; the algorithm, automatic capacity drain,
    /// failover threshold, isolation, capacities and preferences do not apply
    /// ([`Policy::passthrough`]).
    pub passthrough: bool,
}

impl Policy {
    /// What a backend service without `serviceLbPolicy`, and every Kubernetes Service, gets
    /// (SPEC R6, R7.1): passthrough semantics. Google Cloud offers the service LB policy on
    /// its application and proxy load balancers only; a passthrough backend service spreads
    /// new connections over its healthy backends, and only `failoverPolicy` moves them to
    /// failover backends.
    pub fn passthrough() -> Policy {
        Policy {
            passthrough: true,
            ..Policy::default()
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            algorithm: Algorithm::default(),
            auto_capacity_drain: false,
            failover_health_threshold: 70,
            isolation: Isolation::None,
            failover_ratio: None,
            drop_traffic_if_unhealthy: false,
            zonal_affinity: false,
            passthrough: false,
        }
    }
}

/// One endpoint (instance or network endpoint) of a group, as the host sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Backend (instance) name.
    pub name: String,
    /// Passes the service's health check.
    pub healthy: bool,
    /// Live connections the host tracks to it.
    pub live: u64,
}

/// One backend group (instance group or network endpoint group) of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Name (the `group` reference).
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// `preference`.
    pub preference: Preference,
    /// `failover`: a failover backend of the service's `failoverPolicy`.
    pub failover: bool,
    /// Target capacity in connections: the max connections (per group, or per instance or
    /// endpoint times their number) times `capacityScaler`. 0 is a group with capacity 0.
    pub capacity: f64,
    /// No backend of the service sets a capacity: `capacity` is only a weight (so many
    /// connections per endpoint that the group never fills), and reports say "no capacity
    /// limit" instead of the number.
    pub unlimited: bool,
    /// Its endpoints.
    pub endpoints: Vec<Endpoint>,
    /// How fast its connections close, as a share of the service's new connections (its
    /// closing connections over the service's opened ones, both counted over the last
    /// seconds, from the closed connections the slow path reports with [`crate::LiveLoad::add_closed`]): the share of new connections a full group can take without
    /// growing. `None` when the slow path has not measured it.
    pub turnover: Option<f64>,
}

impl Group {
    fn healthy(&self) -> usize {
        self.endpoints.iter().filter(|e| e.healthy).count()
    }

    fn live(&self) -> u64 {
        self.endpoints.iter().map(|e| e.live).sum()
    }

    /// Healthy endpoints / endpoints (0 without endpoints).
    fn healthy_fraction(&self) -> f64 {
        if self.endpoints.is_empty() {
            0.0
        } else {
            self.healthy() as f64 / self.endpoints.len() as f64
        }
    }
}

/// State kept between decisions: the automatic capacity drain's (R6.3), and which groups hold
/// at their capacity.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DrainState {
    /// Groups drained now.
    pub drained: BTreeSet<String>,
    /// Drained groups that have had at least 35 % healthy since this time (seconds).
    pub recovering_since: BTreeMap<String, f64>,
    /// Groups that came near their capacity (within [`PAST_CAPACITY_SIGMAS`] × √C) and have
    /// not fallen [`FILLING_AGAIN_SIGMAS`] × √C below it since: they take their capacity's
    /// share, not all their tier is left (the hysteresis between filling and holding).
    pub near_capacity: BTreeSet<String>,
    /// Groups that went [`PAST_CAPACITY_SIGMAS`] × √C past their capacity and have not come
    /// back within [`PAST_LEAVE_SIGMAS`] × √C of it since: they take no new connections.
    pub past_capacity: BTreeSet<String>,
}

/// What the decision says about one group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupReport {
    /// Group name.
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// Target capacity (connections), before draining.
    pub capacity: f64,
    /// No capacity limit (`capacity` is only a weight; see [`Group::unlimited`]).
    pub unlimited: bool,
    /// Capacity the shares used (0 when drained or not serving).
    pub effective_capacity: f64,
    /// Live connections.
    pub live: u64,
    /// live / capacity (infinite for capacity 0 with connections; 0 without).
    pub utilisation: f64,
    /// Healthy endpoints.
    pub healthy: usize,
    /// Endpoints.
    pub endpoints: usize,
    /// Drained by automatic capacity drain.
    pub drained: bool,
    /// Its healthy share is below the failover threshold.
    pub below_threshold: bool,
    /// Tier it was placed in (0 first), `None` when it serves nothing.
    pub tier: Option<usize>,
    /// Share of new connections.
    pub share: f64,
    /// Why, in words.
    pub why: String,
}

/// The shares of one service.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Share of new connections per endpoint name (sums to 1, or is empty when dropping).
    pub endpoint_shares: BTreeMap<String, f64>,
    /// Per group, in input order.
    pub groups: Vec<GroupReport>,
    /// New connections are dropped (STRICT isolation with nothing in the nearest region, or
    /// `dropTrafficIfUnhealthy` with nothing healthy).
    pub drop: bool,
    /// The failover backends serve instead of the primary ones (`failoverPolicy`).
    pub failover_serves: bool,
    /// The rule that decided the shares, in words with its SPEC number (passthrough, the
    /// service LB policy's algorithm, failover, isolation, zonal affinity, fail open, ...).
    pub rule: String,
    /// The steps, in words.
    pub steps: Vec<String>,
}

impl Decision {
    /// Integer Maglev weights: shares scaled so the largest is `scale` (0 stays 0; any
    /// positive share gets at least 1).
    pub fn weights(&self, scale: u32) -> BTreeMap<String, u32> {
        let max = self
            .endpoint_shares
            .values()
            .copied()
            .fold(0.0f64, f64::max);
        self.endpoint_shares
            .iter()
            .map(|(n, &s)| {
                let w = if s <= 0.0 || max <= 0.0 {
                    0
                } else {
                    ((s / max * f64::from(scale)).round() as u32).max(1)
                };
                (n.clone(), w)
            })
            .collect()
    }
}

/// Fraction healthy below which a group is a drain candidate (R6.3).
pub const DRAIN_BELOW: f64 = 0.25;
/// Fraction healthy at or above which a drained group starts to recover (R6.3).
pub const UNDRAIN_AT: f64 = 0.35;
/// Seconds a drained group must stay at or above [`UNDRAIN_AT`] to return (R6.3).
pub const UNDRAIN_AFTER_SECS: f64 = 60.0;
/// Candidates are drained only while they are under this fraction of all groups; at or above
/// it none is (R6.3).
pub const MAX_DRAINED_FRACTION: f64 = 0.5;

/// A group this many standard deviations of a steady load (√capacity connections, the
/// spread of a Poisson count around its mean) past its capacity takes no new connections at
/// all, whatever its turnover says: the bound on how far a group fills past capacity.
pub const PAST_CAPACITY_SIGMAS: f64 = 3.0;

/// How far below capacity (in √C, a steady load's spread) a group that came near it must fall
/// to take all its tier is left again ([`DrainState::near_capacity`]): past the deadband's
/// reach (its noise band lets a steady mean sit up to about 3√C below C) and a few √C more.
pub const FILLING_AGAIN_SIGMAS: f64 = 6.0;

/// How far past capacity (in √C) a group that went [`PAST_CAPACITY_SIGMAS`] past it must come
/// back to take new connections again ([`DrainState::past_capacity`]).
pub const PAST_LEAVE_SIGMAS: f64 = 2.0;

/// The share of new connections a group has room for, `fair` being its capacity over the
/// service's live connections (step 5), and how full it is. Well below capacity (more than
/// [`PAST_CAPACITY_SIGMAS`] × √C below it, out of a steady load's reach) it takes all it is
/// given; near capacity `fair`, the share that holds C in a steady state; at capacity only
/// what its closing connections free (its turnover), so long-lived connections do not pile
/// up past it; nothing once [`PAST_CAPACITY_SIGMAS`] × √C past it.
///
/// A group that came near capacity goes back to filling only once [`FILLING_AGAIN_SIGMAS`] ×
/// √C below it (`near`): a steady load's count wanders about its mean by √C, and the deadband
/// lets the mean sit a few √C below C, so one threshold would make the spill start and stop.
///
/// Likewise a group past capacity takes new connections again only once back within
/// [`PAST_LEAVE_SIGMAS`] × √C of it (`past`), so that it does not start and stop at one
/// count.
fn room(g: &Group, capacity: f64, fair: f64, near: bool, past: bool) -> (f64, Fullness) {
    let live = g.live() as f64;
    let sigmas = PAST_CAPACITY_SIGMAS * capacity.sqrt();
    if capacity <= 0.0 || g.unlimited {
        return (fair, Fullness::Room);
    }
    let below = if near {
        FILLING_AGAIN_SIGMAS
    } else {
        PAST_CAPACITY_SIGMAS
    };
    if live < capacity - below * capacity.sqrt() {
        return (fair, Fullness::Filling);
    }
    if live < capacity {
        return (fair, Fullness::Room);
    }
    let past_at = if past {
        PAST_LEAVE_SIGMAS * capacity.sqrt()
    } else {
        sigmas
    };
    if live >= capacity + past_at {
        return (0.0, Fullness::Past);
    }
    match g.turnover {
        Some(t) if t < fair => (t, Fullness::Full(t)),
        _ => (fair, Fullness::Room),
    }
}

/// How full a group is (step 5).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fullness {
    /// Well below capacity: takes whatever its tier is left.
    Filling,
    /// Near capacity: takes its capacity's share.
    Room,
    /// At capacity: takes the share its closing connections free.
    Full(f64),
    /// Too far past capacity to take any.
    Past,
}

/// Runs the automatic capacity drain (R6.3) at time `now` (seconds); returns what changed.
fn drain(groups: &[Group], state: &mut DrainState, now: f64, steps: &mut Vec<String>) {
    // Groups that no longer exist leave the state.
    let names: BTreeSet<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    state.drained.retain(|g| names.contains(g.as_str()));
    state
        .recovering_since
        .retain(|g, _| state.drained.contains(g));
    let drained_now: Vec<&Group> = groups
        .iter()
        .filter(|g| state.drained.contains(&g.name))
        .collect();
    for g in drained_now {
        if g.healthy_fraction() >= UNDRAIN_AT {
            let since = *state.recovering_since.entry(g.name.clone()).or_insert(now);
            if now - since >= UNDRAIN_AFTER_SECS {
                state.drained.remove(&g.name);
                state.recovering_since.remove(&g.name);
                steps.push(format!(
                    "group {}: {:.0} % healthy for {:.0} s: undrained",
                    g.name,
                    100.0 * g.healthy_fraction(),
                    now - since
                ));
            }
        } else {
            state.recovering_since.remove(&g.name);
        }
    }
    // Candidates: groups with members and a capacity of their own (capacity 0 for another
    // reason counts in the total only) under 25 % healthy, and the drained groups that have
    // not returned yet (their capacity is 0 because of the drain).
    let total = groups.len();
    let candidates: Vec<&Group> = groups
        .iter()
        .filter(|g| {
            g.capacity > 0.0
                && !g.endpoints.is_empty()
                && (state.drained.contains(&g.name) || g.healthy_fraction() < DRAIN_BELOW)
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    let count = candidates.len();
    let fraction = count as f64 / total as f64;
    if fraction < MAX_DRAINED_FRACTION {
        for g in candidates {
            if state.drained.insert(g.name.clone()) {
                steps.push(format!(
                    "group {}: {:.0} % healthy (< 25 %): drained (automatic capacity drain, SPEC R6.3; {} of {total} groups are candidates, under 50 %)",
                    g.name,
                    100.0 * g.healthy_fraction(),
                    count
                ));
            }
        }
    } else {
        let names: Vec<&str> = candidates.iter().map(|g| g.name.as_str()).collect();
        steps.push(format!(
            "{count} of {total} groups are drain candidates ({}), {:.0} %, not under 50 %: none is drained (automatic capacity drain, SPEC R6.3)",
            names.join(", "),
            100.0 * fraction
        ));
        for g in candidates {
            state.drained.remove(&g.name);
            state.recovering_since.remove(&g.name);
        }
    }
}

/// Decides the shares of one service at time `now` (seconds, any monotonic origin), updating
/// the drain state.
///
/// The steps of the module's documentation, one function each: `drain_step`,
/// `failover_step`, then, with what those decided, `zonal_affinity`, `tiers`, `isolate`,
/// `fill_tiers` and `spread_remaining` (the shares), `endpoint_shares` and `fail_open`; the
/// reports, the capacity hysteresis and the rule last.
pub fn decide(
    policy: &Policy,
    locality: &Locality,
    groups: &[Group],
    drain_state: &mut DrainState,
    now: f64,
) -> Decision {
    let mut steps = Vec::new();
    drain_step(policy, groups, drain_state, now, &mut steps);
    let DrainState {
        drained,
        near_capacity,
        past_capacity,
        ..
    } = drain_state;
    let (has_failover, serve_failover) = failover_step(policy, groups, &mut steps);
    let mut d = Deciding {
        policy,
        locality,
        groups,
        drained,
        has_failover,
        serve_failover,
        zone_kept: false,
        n_live: groups.iter().map(Group::live).sum(),
        // Without a policy there is no failover threshold (passthrough, SPEC R6).
        threshold: f64::from(policy.failover_health_threshold.clamp(1, 99)) / 100.0,
    };
    d.zone_kept = d.zonal_affinity(&mut steps);
    let (keyed, mut tiers) = d.tiers();
    let isolated_region = d.isolate(&keyed, &mut tiers, &mut steps);
    let mut shares = d.fill_tiers(&tiers, near_capacity, past_capacity, &mut steps);
    d.spread_remaining(&tiers, &mut shares, &mut steps);
    let mut endpoint_shares = d.endpoint_shares(&shares.group);
    let (drop, failed_open) = d.fail_open(&mut endpoint_shares, &mut steps);
    let reports = d.reports(&shares, isolated_region.as_deref());
    d.remember_capacity(&shares, near_capacity, past_capacity);
    let rule = rule_of(
        policy,
        &Outcome {
            drop,
            failed_open,
            failover: serve_failover,
            zone_kept: d.zone_kept,
            isolated: isolated_region.as_deref(),
            nearest: locality.region.as_str(),
            any_drained: !d.drained.is_empty(),
            any_below: reports.iter().any(|r| r.below_threshold && r.healthy > 0),
        },
    );
    Decision {
        endpoint_shares,
        groups: reports,
        drop,
        failover_serves: serve_failover,
        rule,
        steps,
    }
}

/// Step 1: the automatic capacity drain (R6.3) when the policy enables it; otherwise no group
/// is drained.
fn drain_step(
    policy: &Policy,
    groups: &[Group],
    drain_state: &mut DrainState,
    now: f64,
    steps: &mut Vec<String>,
) {
    if policy.auto_capacity_drain && !policy.passthrough {
        drain(groups, drain_state, now, steps);
    } else {
        drain_state.drained.clear();
        drain_state.recovering_since.clear();
    }
}

/// Step 2: which groups serve, the primary ones or the failover ones (`failoverPolicy`).
/// Returns whether the service has failover backends and whether they serve.
fn failover_step(policy: &Policy, groups: &[Group], steps: &mut Vec<String>) -> (bool, bool) {
    let has_failover = groups.iter().any(|g| g.failover);
    let count = |failover: bool, f: fn(&Group) -> usize| -> usize {
        groups
            .iter()
            .filter(|g| g.failover == failover)
            .map(f)
            .sum()
    };
    let (primary_healthy, primary_all) = (
        count(false, Group::healthy),
        count(false, |g| g.endpoints.len()),
    );
    let mut serve_failover = false;
    if has_failover {
        // Google Cloud: with the ratio 0, fail over when no primary endpoint is healthy;
        // otherwise when the healthy share is below the ratio (compared exactly).
        let (below, why) = match &policy.failover_ratio {
            Some(r) if !r.is_zero() => (
                r.above_fraction(primary_healthy as u64, primary_all as u64) || primary_all == 0,
                format!("< failoverRatio {r}"),
            ),
            _ => (
                primary_healthy == 0,
                "none healthy, failoverRatio 0".to_string(),
            ),
        };
        if below && count(true, Group::healthy) > 0 {
            serve_failover = true;
            steps.push(format!(
                "{primary_healthy} of {primary_all} primary endpoints healthy ({why}): the failover backends serve"
            ));
        } else if below {
            steps.push(format!(
                "{primary_healthy} of {primary_all} primary endpoints healthy ({why}), but no failover backend is healthy: the primary backends serve"
            ));
        }
    }
    (has_failover, serve_failover)
}

/// A tier's key; keys order the tiers: (preferred 0 / default 1 / below the threshold 2,
/// region rank, unlisted region name, own zone 0 / other 1, zone name).
type TierKey = (u8, usize, String, usize, String);

/// One decision's inputs and what its first steps decided, for the steps after them.
struct Deciding<'a> {
    policy: &'a Policy,
    locality: &'a Locality,
    groups: &'a [Group],
    /// Groups drained by the automatic capacity drain now.
    drained: &'a BTreeSet<String>,
    has_failover: bool,
    /// The failover backends serve instead of the primary ones.
    serve_failover: bool,
    /// Zonal affinity keeps new connections in the NIC's zone.
    zone_kept: bool,
    /// Live connections of the whole service.
    n_live: u64,
    /// The failover threshold (R6.4) as a fraction.
    threshold: f64,
}

/// The shares step's result, per group in input order, and what no tier took.
struct Shares {
    /// Share of new connections.
    group: Vec<f64>,
    /// The tier it was placed in.
    tier_of: Vec<Option<usize>>,
    /// How full it is.
    fullness: Vec<Fullness>,
    /// Measured against its capacity.
    evaluated: Vec<bool>,
    /// The share no tier's capacity took.
    remaining: f64,
    /// Tiers that got a share, in order.
    used_tiers: Vec<usize>,
}

impl Deciding<'_> {
    fn drained(&self, g: &Group) -> bool {
        self.drained.contains(&g.name)
    }

    fn serving(&self, g: &Group) -> bool {
        g.failover == self.serve_failover || !self.has_failover
    }

    fn in_client_zone(&self, g: &Group) -> bool {
        !self.locality.zone.is_empty() && g.zone == self.locality.zone
    }

    fn outside_zone(&self, g: &Group) -> bool {
        self.zone_kept && !self.in_client_zone(g)
    }

    /// Its healthy share is below the failover threshold (never without a policy).
    fn below(&self, g: &Group) -> bool {
        !self.policy.passthrough && g.healthy_fraction() < self.threshold
    }

    /// The capacity the shares use: 0 when drained.
    fn effective(&self, g: &Group) -> f64 {
        if self.drained(g) {
            0.0
        } else {
            g.capacity
        }
    }

    /// Zonal affinity (SPEC R7.4): the NIC's zone is the client's; with a healthy endpoint
    /// there, the other zones' groups take no new connections (spill ratio 0: they take them
    /// all, as without affinity, only when the zone has none). Returns whether the zone is
    /// kept.
    fn zonal_affinity(&self, steps: &mut Vec<String>) -> bool {
        let (policy, locality) = (self.policy, self.locality);
        let zone_kept = policy.zonal_affinity
            && self
                .groups
                .iter()
                .any(|g| self.serving(g) && self.in_client_zone(g) && g.healthy() > 0);
        if policy.zonal_affinity {
            steps.push(if zone_kept {
                format!(
                    "zonal affinity: zone {} (the NIC's) has a healthy endpoint: only its groups serve",
                    locality.zone
                )
            } else if locality.zone.is_empty() {
                "zonal affinity: the NIC has no zone: every zone serves".to_string()
            } else {
                format!(
                    "zonal affinity: zone {} (the NIC's) has no healthy endpoint: every zone serves (spill ratio 0)",
                    locality.zone
                )
            });
        }
        zone_kept
    }

    /// Step 3: the tiers, as keyed groups (sorted by key) and as groups per tier in order.
    fn tiers(&self) -> (Vec<(TierKey, usize)>, Vec<Vec<usize>>) {
        let (policy, locality) = (self.policy, self.locality);
        let mut keyed: Vec<(TierKey, usize)> = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            if !self.serving(g) || g.healthy() == 0 || self.outside_zone(g) {
                continue;
            }
            let (rank, extra) = locality.region_rank(&g.region);
            let key = if policy.passthrough {
                // One tier of every group that takes new connections (capacityScaler 0: none).
                if g.capacity <= 0.0 {
                    continue;
                }
                (1, 0, String::new(), 0, String::new())
            } else if self.below(g) {
                (2, 0, String::new(), 0, String::new())
            } else if g.preference == Preference::Preferred {
                (0, 0, String::new(), 0, String::new())
            } else {
                match policy.algorithm {
                    Algorithm::SprayToWorld => (1, 0, String::new(), 0, String::new()),
                    Algorithm::SprayToRegion => (1, rank, extra, 0, String::new()),
                    // The NIC, the front end, prefers its own zone; the region's other zones
                    // follow together, by capacity.
                    Algorithm::WaterfallByRegion if rank == 0 => {
                        let own = usize::from(locality.zone.is_empty() || g.zone != locality.zone);
                        (1, 0, String::new(), own, String::new())
                    }
                    Algorithm::WaterfallByRegion => (1, rank, extra, 0, String::new()),
                    Algorithm::WaterfallByZone if rank == 0 => {
                        let own = usize::from(g.zone != locality.zone);
                        (1, 0, String::new(), own, g.zone.clone())
                    }
                    Algorithm::WaterfallByZone => (1, rank, extra, 0, String::new()),
                }
            };
            keyed.push((key, i));
        }
        keyed.sort();
        let mut tiers: Vec<Vec<usize>> = Vec::new();
        let mut last_key = None;
        for (key, i) in &keyed {
            if last_key.as_ref() != Some(key) {
                tiers.push(Vec::new());
                last_key = Some(key.clone());
            }
            if let Some(t) = tiers.last_mut() {
                t.push(*i);
            }
        }
        (keyed, tiers)
    }

    /// Step 4, isolation: keep to the nearest region that has healthy capacity (NEAREST: a
    /// group below the failover threshold counts as unhealthy, as the threshold says when a
    /// backend is unhealthy; only when no region has a group above it do those below it
    /// count) or to the NIC's region (STRICT). Returns the region kept to.
    fn isolate(
        &self,
        keyed: &[(TierKey, usize)],
        tiers: &mut Vec<Vec<usize>>,
        steps: &mut Vec<String>,
    ) -> Option<String> {
        let (policy, locality, groups) = (self.policy, self.locality, self.groups);
        let nearest_region = locality.region.as_str();
        let nearest_with = |healthy_enough: bool| {
            keyed
                .iter()
                .filter(|(k, i)| self.effective(&groups[*i]) > 0.0 && (!healthy_enough || k.0 != 2))
                .map(|(_, i)| &groups[*i])
                .min_by_key(|g| locality.region_rank(&g.region))
                .map(|g| g.region.clone())
        };
        let isolated_region: Option<String> = match policy.isolation {
            _ if policy.passthrough => None,
            Isolation::None => None,
            Isolation::Strict => Some(nearest_region.to_string()),
            Isolation::Nearest => nearest_with(true).or_else(|| nearest_with(false)),
        };
        if let Some(r) = &isolated_region {
            let before = tiers.len();
            for t in tiers.iter_mut() {
                t.retain(|&i| groups[i].region == *r);
            }
            tiers.retain(|t| !t.is_empty());
            if policy.isolation == Isolation::Strict {
                steps.push(format!(
                    "isolation STRICT (SPEC R6.5): only region {r}, the NIC's, serves"
                ));
            } else if *r != nearest_region {
                steps.push(format!(
                    "isolation NEAREST (SPEC R6.5): region {nearest_region} (the NIC's) has no healthy backend with capacity (a group below the failover threshold {} % counts as unhealthy): region {r}, the next nearest with one, serves",
                    policy.failover_health_threshold
                ));
            } else if tiers.len() != before {
                steps.push(format!(
                    "isolation NEAREST (SPEC R6.5): only region {r} serves, full or not"
                ));
            }
        }
        isolated_region
    }

    /// Step 5, the shares of the tiers in order: each tier its capacity's share of the live
    /// connections ([`Deciding::fill_tier`]), or, without a policy, the one tier everything
    /// by healthy endpoints.
    fn fill_tiers(
        &self,
        tiers: &[Vec<usize>],
        near_capacity: &BTreeSet<String>,
        past_capacity: &BTreeSet<String>,
        steps: &mut Vec<String>,
    ) -> Shares {
        let groups = self.groups;
        let mut shares = Shares {
            group: vec![0.0f64; groups.len()],
            tier_of: vec![None; groups.len()],
            fullness: vec![Fullness::Room; groups.len()],
            evaluated: vec![false; groups.len()],
            remaining: 1.0f64,
            used_tiers: Vec::new(),
        };
        for (t, members) in tiers.iter().enumerate() {
            if self.policy.passthrough {
                // Every healthy endpoint alike: a group's share is its healthy endpoints'.
                let healthy: usize = members.iter().map(|&i| groups[i].healthy()).sum();
                for &i in members {
                    shares.group[i] = groups[i].healthy() as f64 / healthy.max(1) as f64;
                    shares.tier_of[i] = Some(t);
                }
                shares.remaining = 0.0;
                shares.used_tiers.push(t);
                steps.push(format!(
                    "no serviceLbPolicy (passthrough, SPEC R6, R7.1): the {healthy} healthy endpoints share new connections alike, whatever their group or zone ({})",
                    tier_places(groups, members)
                ));
                continue;
            }
            self.fill_tier(t, members, near_capacity, past_capacity, &mut shares, steps);
        }
        shares
    }

    /// One tier of a policy: groups near or at capacity get their room (scaled down when the
    /// tier is left less); groups well below it share whatever else the tier is left, by
    /// capacity.
    fn fill_tier(
        &self,
        t: usize,
        members: &[usize],
        near_capacity: &BTreeSet<String>,
        past_capacity: &BTreeSet<String>,
        shares: &mut Shares,
        steps: &mut Vec<String>,
    ) {
        let groups = self.groups;
        let n_live = self.n_live;
        let n = (n_live as f64).max(1.0);
        let cap: f64 = members.iter().map(|&i| self.effective(&groups[i])).sum();
        if cap <= 0.0 || shares.remaining <= 0.0 {
            return;
        }
        let rooms: Vec<f64> = members
            .iter()
            .map(|&i| {
                let c = self.effective(&groups[i]);
                let near = near_capacity.contains(&groups[i].name);
                let past = past_capacity.contains(&groups[i].name);
                let (r, f) = room(&groups[i], c, c / n, near, past);
                shares.fullness[i] = f;
                shares.evaluated[i] = true;
                r
            })
            .collect();
        let fullness = &shares.fullness;
        let filling = |i: usize| fullness[i] == Fullness::Filling;
        let room_sum: f64 = members
            .iter()
            .zip(&rooms)
            .filter(|(&i, _)| !filling(i))
            .map(|(_, r)| r)
            .sum();
        let filling_cap: f64 = members
            .iter()
            .filter(|&&i| filling(i))
            .map(|&i| self.effective(&groups[i]))
            .sum();
        let remaining = shares.remaining;
        let given = remaining.min(room_sum);
        let share = if filling_cap > 0.0 { remaining } else { given };
        for (&i, r) in members.iter().zip(&rooms) {
            shares.group[i] = if filling(i) {
                (share - given) * self.effective(&groups[i]) / filling_cap
            } else if room_sum > 0.0 {
                given * r / room_sum
            } else {
                0.0
            };
            shares.tier_of[i] = Some(t);
        }
        shares.remaining -= share;
        shares.used_tiers.push(t);
        let places = tier_places(groups, members);
        let full = members
            .iter()
            .filter(|&&i| matches!(shares.fullness[i], Fullness::Full(_) | Fullness::Past))
            .count();
        let full_note = if full == 0 {
            String::new()
        } else {
            format!(
                " ({full} of {} groups at capacity: only what their closing connections free)",
                members.len()
            )
        };
        if members.iter().all(|&i| groups[i].unlimited) {
            steps.push(format!(
                "tier {t} ({places}): no capacity limit, {n_live} live connections: share {:.1} %",
                100.0 * share
            ));
        } else {
            steps.push(format!(
                "tier {t} ({places}): capacity {cap:.0} of {n_live} live connections: share {:.1} %{full_note}",
                100.0 * share
            ));
        }
    }

    /// What the tiers' capacity shares leave: to the first tier that still has room (its
    /// C / N is a steady state's share; while it fills it can take more), else, every tier in
    /// use being at capacity, in proportion to capacity over the groups not far past it (over
    /// all of them when every one is). Under isolation only the nearest region's groups are
    /// in the tiers.
    fn spread_remaining(&self, tiers: &[Vec<usize>], shares: &mut Shares, steps: &mut Vec<String>) {
        let groups = self.groups;
        let remaining = shares.remaining;
        let spill = remaining > 1e-12 && !shares.used_tiers.is_empty();
        if !spill {
            return;
        }
        let has_room = |i: usize| {
            self.effective(&groups[i]) > 0.0
                && (groups[i].live() as f64) < self.effective(&groups[i])
        };
        let with_room = shares
            .used_tiers
            .iter()
            .find(|&&t| tiers[t].iter().any(|&i| has_room(i)));
        let (takers, why): (Vec<usize>, String) = match with_room {
            Some(&t) => (
                tiers[t].iter().copied().filter(|&i| has_room(i)).collect(),
                format!("tier {t} has room left: it takes"),
            ),
            None => {
                let in_use: Vec<usize> = shares
                    .used_tiers
                    .iter()
                    .flat_map(|&t| tiers[t].iter().copied())
                    .collect();
                let not_past: Vec<usize> = in_use
                    .iter()
                    .copied()
                    .filter(|&i| {
                        shares.fullness[i] != Fullness::Past && self.effective(&groups[i]) > 0.0
                    })
                    .collect();
                if not_past.is_empty() {
                    (
                        in_use,
                        "every tier in use is at capacity: in proportion to capacity,".to_string(),
                    )
                } else {
                    (
                        not_past,
                        "every tier in use is at capacity: in proportion to the capacity of the groups not far past it,".to_string(),
                    )
                }
            }
        };
        let cap: f64 = takers.iter().map(|&i| self.effective(&groups[i])).sum();
        if cap > 0.0 {
            for &i in &takers {
                shares.group[i] += remaining * self.effective(&groups[i]) / cap;
            }
        }
        steps.push(format!("{why} the other {:.1} %", 100.0 * remaining));
    }

    /// Endpoint shares: within a group, its healthy endpoints share equally. Collected,
    /// sorted and summed (an endpoint may sit in two groups) before the map is built in one
    /// pass: tens of thousands of endpoints are decided every refresh.
    fn endpoint_shares(&self, group_share: &[f64]) -> BTreeMap<String, f64> {
        let mut shares: Vec<(&str, f64)> = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            if group_share[i] <= 0.0 {
                continue;
            }
            let healthy = g.healthy() as f64;
            shares.extend(
                g.endpoints
                    .iter()
                    .filter(|e| e.healthy)
                    .map(|e| (e.name.as_str(), group_share[i] / healthy)),
            );
        }
        shares.sort_by(|a, b| a.0.cmp(b.0));
        shares.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        shares
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect()
    }

    /// Step 6: with no endpoint share, drop (STRICT isolation, `dropTrafficIfUnhealthy`) or
    /// fail open (R3.4) over every endpoint of the serving set. Returns (drop, failed open).
    fn fail_open(
        &self,
        endpoint_shares: &mut BTreeMap<String, f64>,
        steps: &mut Vec<String>,
    ) -> (bool, bool) {
        let policy = self.policy;
        let mut drop = false;
        let mut failed_open = false;
        if !endpoint_shares.is_empty() {
            return (drop, failed_open);
        }
        if policy.isolation == Isolation::Strict && !policy.passthrough {
            // Never another region, not even to fail open (SPEC R6.5).
            drop = true;
            steps.push(format!(
                "STRICT isolation (SPEC R6.5): region {} has no healthy capacity: new connections are dropped, whatever the other regions hold",
                self.locality.region
            ));
        } else if policy.drop_traffic_if_unhealthy {
            drop = true;
            steps.push(
                "no healthy endpoint: dropTrafficIfUnhealthy drops new connections".to_string(),
            );
        } else {
            let all: Vec<&Endpoint> = self
                .groups
                .iter()
                .filter(|g| self.serving(g))
                .flat_map(|g| g.endpoints.iter())
                .collect();
            if !all.is_empty() {
                failed_open = true;
                steps.push(format!(
                    "no healthy endpoint: all {} serve equally (fail open, SPEC R3.4)",
                    all.len()
                ));
                for e in &all {
                    *endpoint_shares.entry(e.name.clone()).or_insert(0.0) += 1.0 / all.len() as f64;
                }
            }
        }
        (drop, failed_open)
    }

    /// What the decision says about each group, in input order.
    fn reports(&self, shares: &Shares, isolated_region: Option<&str>) -> Vec<GroupReport> {
        self.groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let live = g.live();
                let utilisation = if g.capacity > 0.0 {
                    live as f64 / g.capacity
                } else if live > 0 {
                    f64::INFINITY
                } else {
                    0.0
                };
                GroupReport {
                    name: g.name.clone(),
                    region: g.region.clone(),
                    zone: g.zone.clone(),
                    capacity: g.capacity,
                    unlimited: g.unlimited,
                    effective_capacity: if shares.tier_of[i].is_some() {
                        self.effective(g)
                    } else {
                        0.0
                    },
                    live,
                    utilisation,
                    healthy: g.healthy(),
                    endpoints: g.endpoints.len(),
                    drained: self.drained(g),
                    below_threshold: self.below(g),
                    tier: shares.tier_of[i],
                    share: shares.group[i],
                    why: self.why(i, shares, isolated_region),
                }
            })
            .collect()
    }

    /// Why group `i` got its share, in words.
    fn why(&self, i: usize, shares: &Shares, isolated_region: Option<&str>) -> String {
        let (policy, g) = (self.policy, &self.groups[i]);
        let live = g.live();
        let mut why = String::new();
        if !self.serving(g) {
            why.push_str(if g.failover {
                "failover backend, not serving"
            } else {
                "primary backend, the failover backends serve"
            });
        } else if g.healthy() == 0 {
            why.push_str("no healthy endpoint");
        } else if self.outside_zone(g) {
            let _ = write!(
                why,
                "zonal affinity: outside zone {}, which has a healthy endpoint",
                self.locality.zone
            );
        } else if self.drained(g) {
            why.push_str("drained (automatic capacity drain, SPEC R6.3)");
        } else if g.capacity <= 0.0 {
            why.push_str("capacity 0 (capacityScaler 0): no new connections");
        } else if shares.tier_of[i].is_none() && shares.group[i] == 0.0 {
            why.push_str(if isolated_region.is_some_and(|r| *r != g.region) {
                "outside the isolated region (SPEC R6.5)"
            } else {
                "not needed: earlier tiers have room"
            });
        }
        match shares.fullness[i] {
            Fullness::Filling | Fullness::Room => {}
            Fullness::Full(t) => {
                let _ = write!(
                    why,
                    "{}at capacity ({live} live of {:.0}): new connections only as fast as its connections close ({:.1} % of them)",
                    if why.is_empty() { "" } else { "; " },
                    g.capacity,
                    100.0 * t
                );
            }
            Fullness::Past => {
                let _ = write!(
                    why,
                    "{}past capacity ({live} live of {:.0}): no new connections until some close",
                    if why.is_empty() { "" } else { "; " },
                    g.capacity
                );
            }
        }
        if self.below(g) && g.healthy() > 0 && self.serving(g) {
            let _ = write!(
                why,
                "{}{:.0} % healthy, below the failover threshold {} (SPEC R6.4): last tier",
                if why.is_empty() { "" } else { "; " },
                100.0 * g.healthy_fraction(),
                policy.failover_health_threshold
            );
        }
        if g.preference == Preference::Preferred
            && shares.tier_of[i] == Some(0)
            && !policy.passthrough
        {
            why.push_str(if why.is_empty() {
                "preferred: filled first, SPEC R6.6"
            } else {
                "; preferred"
            });
        }
        why
    }

    /// Groups measured against their capacity this time: near it unless filling; past it
    /// when too far past (the hysteresis of [`DrainState::near_capacity`] and
    /// [`DrainState::past_capacity`]).
    fn remember_capacity(
        &self,
        shares: &Shares,
        near_capacity: &mut BTreeSet<String>,
        past_capacity: &mut BTreeSet<String>,
    ) {
        for (i, g) in self.groups.iter().enumerate() {
            let limited = !g.unlimited && self.effective(g) > 0.0;
            if !shares.evaluated[i] || !limited || shares.fullness[i] == Fullness::Filling {
                near_capacity.remove(&g.name);
            } else if !near_capacity.contains(&g.name) {
                near_capacity.insert(g.name.clone());
            }
            if !shares.evaluated[i] || shares.fullness[i] != Fullness::Past {
                past_capacity.remove(&g.name);
            } else if !past_capacity.contains(&g.name) {
                past_capacity.insert(g.name.clone());
            }
        }
    }
}

/// What [`rule_of`] words.
struct Outcome<'a> {
    drop: bool,
    failed_open: bool,
    failover: bool,
    zone_kept: bool,
    isolated: Option<&'a str>,
    nearest: &'a str,
    any_drained: bool,
    any_below: bool,
}

/// The rule that decided a decision, in words with its SPEC number: the first of what
/// overrides the others (drop, fail open, failover), then the rule the shares follow and what
/// shaped them.
fn rule_of(policy: &Policy, o: &Outcome) -> String {
    let mut parts: Vec<String> = Vec::new();
    if o.drop {
        parts.push(if policy.isolation == Isolation::Strict && !policy.passthrough {
            format!("STRICT isolation (SPEC R6.5): nothing healthy in region {}: new connections dropped", o.nearest)
        } else {
            "failoverPolicy.dropTrafficIfUnhealthy: nothing healthy: new connections dropped".to_string()
        });
        return parts.join("; ");
    }
    if o.failed_open {
        parts.push("fail open (SPEC R3.4): no healthy endpoint, every one serves".to_string());
    }
    if o.failover {
        parts.push("failoverPolicy: the failover backends serve".to_string());
    }
    if policy.passthrough {
        if !o.failed_open {
            parts.push(
                "no serviceLbPolicy (passthrough, SPEC R6, R7.1): every healthy endpoint alike"
                    .to_string(),
            );
        }
    } else if !o.failed_open {
        parts.push(format!(
            "serviceLbPolicy {} (SPEC R6.1)",
            policy.algorithm.name()
        ));
        if o.any_drained {
            parts.push("automatic capacity drain (SPEC R6.3)".to_string());
        }
        if o.any_below {
            parts.push(format!(
                "failover threshold {} % (SPEC R6.4)",
                policy.failover_health_threshold
            ));
        }
        match (policy.isolation, o.isolated) {
            (Isolation::Nearest, Some(r)) if r != o.nearest => {
                parts.push(format!("isolation NEAREST (SPEC R6.5): region {r}"))
            }
            (Isolation::Nearest | Isolation::Strict, Some(r)) => parts.push(format!(
                "isolation {} (SPEC R6.5): region {r}",
                if policy.isolation == Isolation::Strict {
                    "STRICT"
                } else {
                    "NEAREST"
                }
            )),
            _ => {}
        }
    }
    if o.zone_kept {
        parts.push("zonal affinity (SPEC R7.4): the NIC's zone alone".to_string());
    }
    parts.join("; ")
}

/// Where a tier's groups are: their zones (or regions when a zone is not known), each once,
/// in the order of the groups.
fn tier_places(groups: &[Group], members: &[usize]) -> String {
    let mut places: Vec<&str> = Vec::new();
    for &i in members {
        let g = &groups[i];
        let place = if g.zone.is_empty() {
            &g.region
        } else {
            &g.zone
        };
        if !place.is_empty() && !places.contains(&place.as_str()) {
            places.push(place);
        }
    }
    if places.is_empty() {
        "no zone given".to_string()
    } else {
        places.join(", ")
    }
}

/// Whether `next` differs enough from `applied` to be worth a table change (the hysteresis of
/// the runtime, SPEC R6): what health decides (failover, drop, a group drained, below the
/// threshold, or with another number of healthy endpoints) always is; a group's share when it
/// moves by more than `deadband` (absolute), also when it starts getting new connections; and
/// a group that stops getting new connections always (a spill no longer needed ends, SPEC
/// R6.1, however small the share the tables still give it). So a spill starts only once its
/// share passes the deadband and ends when the earlier tiers have room again: a load hovering
/// at a tier's capacity, whose spill share flickers between 0 and a few per mille, does not
/// make the weights flap, and a steady load changes nothing.
///
/// The deadband widens with the noise of a share over few connections: a share s decided
/// from N live connections wanders by about s / √N as N does (a Poisson count), so a move
/// counts only past [`NOISE_SIGMAS`] of that as well (at 500 live a share of 0.8 needs 0.15;
/// from about 4,600 live on the 5 points decide).
pub fn worth_applying(applied: &Decision, next: &Decision, deadband: f64) -> bool {
    if applied.drop != next.drop
        || applied.failover_serves != next.failover_serves
        || applied.groups.len() != next.groups.len()
    {
        return true;
    }
    let live: u64 = next.groups.iter().map(|g| g.live).sum();
    let noise = |share: f64| {
        if live == 0 {
            0.0
        } else {
            NOISE_SIGMAS * share / (live as f64).sqrt()
        }
    };
    // Shares add up to one: a group that takes the rest (a spill) moves as much as the
    // group whose share is noisy, so a group that keeps getting new connections moves only
    // past the noise of the service's largest share. A spill that starts needs its own.
    let largest = applied
        .groups
        .iter()
        .chain(&next.groups)
        .map(|g| g.share)
        .fold(0.0f64, f64::max);
    applied.groups.iter().zip(&next.groups).any(|(a, b)| {
        let keeps = a.share > 0.0 && b.share > 0.0;
        let band = deadband.max(noise(if keeps { largest } else { a.share.max(b.share) }));
        a.name != b.name
            || a.drained != b.drained
            || a.below_threshold != b.below_threshold
            || a.healthy != b.healthy
            || a.endpoints != b.endpoints
            || (a.share - b.share).abs() > band
            || (a.share > 0.0 && b.share == 0.0)
    })
}

/// Standard deviations of a share's noise a move must pass to be applied ([`worth_applying`]):
/// three of the move's own, which is the difference of two noisy readings (the applied one and
/// the latest), so √2 times a reading's.
pub const NOISE_SIGMAS: f64 = 3.0 * std::f64::consts::SQRT_2;

/// How urgent applying `next` over `applied` is, to order the services one refresh refills
/// when it cannot refill them all: what health decides ([`worth_applying`]'s first kind) is
/// infinitely urgent; otherwise the largest move of a group's share.
pub fn urgency(applied: &Decision, next: &Decision) -> f64 {
    if applied.drop != next.drop
        || applied.failover_serves != next.failover_serves
        || applied.groups.len() != next.groups.len()
    {
        return f64::INFINITY;
    }
    let mut most = 0.0f64;
    for (a, b) in applied.groups.iter().zip(&next.groups) {
        if a.name != b.name
            || a.drained != b.drained
            || a.below_threshold != b.below_threshold
            || a.healthy != b.healthy
            || a.endpoints != b.endpoints
        {
            return f64::INFINITY;
        }
        most = most.max((a.share - b.share).abs());
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, region: &str, zone: &str, capacity: f64, healthy: &[bool]) -> Group {
        Group {
            name: name.into(),
            region: region.into(),
            zone: zone.into(),
            preference: Preference::Default,
            failover: false,
            capacity,
            unlimited: false,
            endpoints: healthy
                .iter()
                .enumerate()
                .map(|(i, &h)| Endpoint {
                    name: format!("{name}-{i}"),
                    healthy: h,
                    live: 0,
                })
                .collect(),
            turnover: None,
        }
    }

    fn with_live(mut g: Group, live: u64) -> Group {
        let n = g.endpoints.len() as u64;
        for (i, e) in g.endpoints.iter_mut().enumerate() {
            e.live = live / n + u64::from((i as u64) < live % n);
        }
        g
    }

    fn here() -> Locality {
        Locality {
            region: "r1".into(),
            zone: "r1-a".into(),
            region_order: vec!["r2".into(), "r3".into()],
        }
    }

    fn share(d: &Decision, g: &str) -> f64 {
        d.groups.iter().find(|r| r.name == g).unwrap().share
    }

    #[test]
    fn the_nearest_region_takes_all_until_it_is_full_then_spills() {
        let p = Policy::default();
        let mut s = DrainState::default();
        let near = group("near", "r1", "r1-a", 100.0, &[true, true]);
        let far = group("far", "r2", "r2-a", 100.0, &[true, true]);
        // Quiet: everything to the nearest region.
        let d = decide(&p, &here(), &[near.clone(), far.clone()], &mut s, 0.0);
        assert_eq!((share(&d, "near"), share(&d, "far")), (1.0, 0.0));
        // 150 live connections: the nearest region's capacity is 100 of them.
        let d = decide(
            &p,
            &here(),
            &[with_live(near.clone(), 100), with_live(far.clone(), 50)],
            &mut s,
            1.0,
        );
        assert!((share(&d, "near") - 100.0 / 150.0).abs() < 1e-9);
        assert!((share(&d, "far") - 50.0 / 150.0).abs() < 1e-9);
        // Overload (300 live, 200 of capacity) with both at capacity: C / N each, the rest
        // in proportion to capacity.
        let d = decide(
            &p,
            &here(),
            &[with_live(near.clone(), 100), with_live(far.clone(), 100)],
            &mut s,
            2.0,
        );
        assert!((share(&d, "near") - 0.5).abs() < 1e-9, "{d:?}");
        assert!((share(&d, "far") - 0.5).abs() < 1e-9);
        // `near` 3 √100 = 30 connections past its capacity takes none; `far`, at capacity,
        // all: new connections go to the groups least past capacity.
        let d = decide(
            &p,
            &here(),
            &[with_live(near.clone(), 130), with_live(far.clone(), 100)],
            &mut s,
            3.0,
        );
        assert_eq!((share(&d, "near"), share(&d, "far")), (0.0, 1.0), "{d:?}");
        // Both that far past: in proportion to capacity again.
        let d = decide(
            &p,
            &here(),
            &[with_live(near, 130), with_live(far, 140)],
            &mut s,
            4.0,
        );
        assert_eq!((share(&d, "near"), share(&d, "far")), (0.5, 0.5), "{d:?}");
    }

    fn with_turnover(mut g: Group, turnover: f64) -> Group {
        g.turnover = Some(turnover);
        g
    }

    #[test]
    fn a_group_at_capacity_takes_only_what_its_closing_connections_free() {
        // SPEC R6.1: fill up to capacity, then spill. 150 live, `near` holds its 100.
        let p = Policy::default();
        let mut s = DrainState::default();
        let near = with_live(group("near", "r1", "r1-a", 100.0, &[true, true]), 100);
        let far = with_live(group("far", "r2", "r2-a", 100.0, &[true, true]), 50);
        let decide_with = |t: Option<f64>, s: &mut DrainState| {
            let mut n = near.clone();
            n.turnover = t;
            decide(&p, &here(), &[n, far.clone()], s, 0.0)
        };
        // Long-lived connections: none of near's closes, so it takes no new ones.
        let d = decide_with(Some(0.0), &mut s);
        assert_eq!((share(&d, "near"), share(&d, "far")), (0.0, 1.0), "{d:?}");
        assert!(
            d.groups[0].why.contains("at capacity"),
            "{}",
            d.groups[0].why
        );
        // Its closings free 30 % of the new connections: it takes those 30 %.
        let d = decide_with(Some(0.3), &mut s);
        assert!((share(&d, "near") - 0.3).abs() < 1e-9, "{d:?}");
        assert!((share(&d, "far") - 0.7).abs() < 1e-9);
        // More than its C / N closing (the load is falling): C / N, as without a count.
        for t in [Some(0.9), None] {
            let d = decide_with(t, &mut s);
            assert!(
                (share(&d, "near") - 100.0 / 150.0).abs() < 1e-9,
                "{t:?}: {d:?}"
            );
        }
        // One connection short of capacity: room, whatever the turnover.
        let below = with_turnover(with_live(near.clone(), 99), 0.0);
        let d = decide(&p, &here(), &[below, far.clone()], &mut s, 0.0);
        assert!((share(&d, "near") - 100.0 / 149.0).abs() < 1e-9, "{d:?}");
        // 3 √100 past capacity: nothing, even when connections close fast.
        let past = with_turnover(with_live(near.clone(), 130), 0.9);
        let d = decide(&p, &here(), &[past, far.clone()], &mut s, 0.0);
        assert_eq!(share(&d, "near"), 0.0, "{d:?}");
        assert!(
            d.groups[0].why.contains("past capacity"),
            "{}",
            d.groups[0].why
        );
        // Having been past it, it stays out until back within 2 √100 of capacity.
        let just_under = with_turnover(with_live(near.clone(), 129), 0.9);
        let d = decide(&p, &here(), &[just_under.clone(), far.clone()], &mut s, 0.0);
        assert_eq!(share(&d, "near"), 0.0, "{d:?}");
        let back = with_turnover(with_live(near.clone(), 119), 0.9);
        let d = decide(&p, &here(), &[back, far.clone()], &mut s, 0.0);
        assert!((share(&d, "near") - 100.0 / 169.0).abs() < 1e-9, "{d:?}");
        // Not having been past it, 129 is under the bound.
        let d = decide(
            &p,
            &here(),
            &[just_under, far.clone()],
            &mut DrainState::default(),
            0.0,
        );
        assert!((share(&d, "near") - 100.0 / 179.0).abs() < 1e-9, "{d:?}");
        // Groups without a capacity limit never fill.
        let mut open_ended = with_turnover(with_live(near, 500), 0.0);
        open_ended.unlimited = true;
        let d = decide(&p, &here(), &[open_ended, far], &mut s, 0.0);
        assert!((share(&d, "near") - 100.0 / 550.0).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn waterfall_by_zone_fills_the_own_zone_first() {
        let p = Policy {
            algorithm: Algorithm::WaterfallByZone,
            ..Policy::default()
        };
        let mut s = DrainState::default();
        let own = with_live(group("own", "r1", "r1-a", 50.0, &[true]), 60);
        let other = with_live(group("other", "r1", "r1-b", 50.0, &[true]), 40);
        let d = decide(&p, &here(), &[other.clone(), own.clone()], &mut s, 0.0);
        assert!((share(&d, "own") - 0.5).abs() < 1e-9, "50 of 100 live");
        // WATERFALL_BY_REGION (SPEC R6.1): the NIC prefers its own zone as well; at its
        // capacity it holds its C / N.
        let p = Policy::default();
        let d = decide(&p, &here(), &[other, own], &mut s, 0.0);
        assert!((share(&d, "own") - 0.5).abs() < 1e-9);
        // At low load the own zone takes everything; SPRAY_TO_REGION has no zone preference
        // and shares by capacity.
        let idle = [
            group("own", "r1", "r1-a", 50.0, &[true]),
            group("other", "r1", "r1-b", 150.0, &[true]),
        ];
        let d = decide(&p, &here(), &idle, &mut s, 0.0);
        assert_eq!(share(&d, "own"), 1.0, "{d:?}");
        let spray = Policy {
            algorithm: Algorithm::SprayToRegion,
            ..Policy::default()
        };
        let d = decide(&spray, &here(), &idle, &mut s, 0.0);
        assert!((share(&d, "other") - 0.75).abs() < 1e-9);
        let zone = Policy {
            algorithm: Algorithm::WaterfallByZone,
            ..Policy::default()
        };
        let d = decide(&zone, &here(), &idle, &mut s, 0.0);
        assert_eq!(share(&d, "own"), 1.0);
        // Past the own zone: by region the region's other zones take the spill together, by
        // capacity; by zone one zone at a time.
        let busy = [
            with_live(group("own", "r1", "r1-a", 50.0, &[true]), 80),
            group("b", "r1", "r1-b", 100.0, &[true]),
            group("c", "r1", "r1-c", 300.0, &[true]),
        ];
        let d = decide(&p, &here(), &busy, &mut DrainState::default(), 0.0);
        assert!(
            (share(&d, "b") * 3.0 - share(&d, "c")).abs() < 1e-9,
            "{d:?}"
        );
        assert!(share(&d, "b") > 0.0);
        let d = decide(&zone, &here(), &busy, &mut DrainState::default(), 0.0);
        assert_eq!(share(&d, "c"), 0.0, "{d:?}");
    }

    #[test]
    fn auto_capacity_drain_follows_25_50_35_and_60_seconds() {
        let p = Policy {
            auto_capacity_drain: true,
            ..Policy::default()
        };
        let mut s = DrainState::default();
        // 1 of 5 healthy (20 % < 25 %): a candidate; 1 of 4 groups: drained.
        let sick = group(
            "sick",
            "r1",
            "r1-a",
            100.0,
            &[true, false, false, false, false],
        );
        let ok = |n: &str| group(n, "r1", "r1-b", 100.0, &[true, true]);
        let gs = vec![sick.clone(), ok("b"), ok("c"), ok("d")];
        let d = decide(&p, &here(), &gs, &mut s, 0.0);
        assert!(d.groups[0].drained && d.groups[0].share == 0.0, "{d:?}");
        // Two sick groups of four: candidates are 50 %, not under it: neither is drained
        // (every candidate or none, not the first of them).
        let gs2 = vec![sick.clone(), sick.clone(), ok("c"), ok("d")];
        let mut gs2 = gs2;
        gs2[1].name = "sick2".into();
        let mut s2 = DrainState::default();
        let d = decide(&p, &here(), &gs2, &mut s2, 0.0);
        assert!(s2.drained.is_empty(), "{:?}", d.steps);
        // A drained group stays a candidate until it returns: the second sick group makes
        // 2 of 4, and the first is undrained.
        let mut s3 = DrainState::default();
        decide(&p, &here(), &gs, &mut s3, 0.0);
        assert_eq!(s3.drained.len(), 1);
        let d = decide(&p, &here(), &gs2, &mut s3, 1.0);
        assert!(s3.drained.is_empty(), "{:?}", d.steps);
        // Recovery: 2 of 5 healthy (40 % ≥ 35 %) must last 60 s.
        let mut better = sick.clone();
        better.endpoints[1].healthy = true;
        let gs = vec![better, ok("b"), ok("c"), ok("d")];
        for t in [10.0, 30.0, 69.9] {
            let d = decide(&p, &here(), &gs, &mut s, t);
            assert!(d.groups[0].drained, "at {t}");
        }
        let d = decide(&p, &here(), &gs, &mut s, 70.0);
        assert!(!d.groups[0].drained, "{:?}", d.steps);
        assert!(d.steps.iter().any(|s| s.contains("undrained")));
        // (At 40 % it is below the failover threshold: the others take new connections first.)
        assert!(d.groups[0].below_threshold && d.groups[0].share == 0.0);
        // 30 % (25 ≤ 30 < 35): neither drained again nor recovering.
        let mut mid = group("sick", "r1", "r1-a", 100.0, &[true; 10]);
        for e in &mut mid.endpoints[3..] {
            e.healthy = false;
        }
        let d = decide(&p, &here(), &[mid, ok("b"), ok("c"), ok("d")], &mut s, 80.0);
        assert!(!d.groups[0].drained);
    }

    #[test]
    fn failover_threshold_moves_a_group_to_the_last_tier() {
        let p = Policy::default();
        let mut s = DrainState::default();
        // 6 of 10 healthy (60 % < 70 %): the other region takes the traffic while it has room.
        let mut near = group("near", "r1", "r1-a", 100.0, &[true; 10]);
        for e in &mut near.endpoints[6..] {
            e.healthy = false;
        }
        let far = group("far", "r2", "r2-a", 100.0, &[true, true]);
        let d = decide(&p, &here(), &[near.clone(), far.clone()], &mut s, 0.0);
        assert_eq!((share(&d, "near"), share(&d, "far")), (0.0, 1.0));
        assert!(d.groups[0].below_threshold);
        // 7 of 10 (70 %, not below): the nearest region again.
        near.endpoints[6].healthy = true;
        let d = decide(&p, &here(), &[near, far], &mut s, 0.0);
        assert_eq!(share(&d, "near"), 1.0);
    }

    #[test]
    fn isolation_strict_drops_and_nearest_spills_only_without_healthy_capacity() {
        let mut s = DrainState::default();
        let near = with_live(group("near", "r1", "r1-a", 10.0, &[true]), 100);
        let far = group("far", "r2", "r2-a", 100.0, &[true]);
        for mode in [Isolation::Nearest, Isolation::Strict] {
            let p = Policy {
                isolation: mode,
                ..Policy::default()
            };
            // The nearest region is full but healthy: it keeps everything.
            let d = decide(&p, &here(), &[near.clone(), far.clone()], &mut s, 0.0);
            assert_eq!(share(&d, "near"), 1.0, "{mode:?}");
        }
        let dead = group("near", "r1", "r1-a", 10.0, &[false]);
        let nearest = Policy {
            isolation: Isolation::Nearest,
            ..Policy::default()
        };
        let d = decide(&nearest, &here(), &[dead.clone(), far.clone()], &mut s, 0.0);
        assert_eq!(share(&d, "far"), 1.0);
        let strict = Policy {
            isolation: Isolation::Strict,
            ..Policy::default()
        };
        let d = decide(&strict, &here(), &[dead, far], &mut s, 0.0);
        assert!(d.drop && d.endpoint_shares.is_empty(), "{d:?}");
    }

    #[test]
    fn preferred_groups_fill_first_and_failover_backends_take_over_below_the_ratio() {
        let mut s = DrainState::default();
        let mut pref = with_live(group("pref", "r2", "r2-a", 100.0, &[true]), 50);
        pref.preference = Preference::Preferred;
        let near = group("near", "r1", "r1-a", 100.0, &[true]);
        let d = decide(
            &Policy::default(),
            &here(),
            &[near.clone(), pref.clone()],
            &mut s,
            0.0,
        );
        assert_eq!(share(&d, "pref"), 1.0, "preferred although farther");
        let full = with_live(pref, 100);
        let busy = with_live(near, 100);
        let d = decide(&Policy::default(), &here(), &[busy, full], &mut s, 0.0);
        assert!((share(&d, "pref") - 0.5).abs() < 1e-9, "{d:?}");

        let p = Policy {
            failover_ratio: Ratio::parse("0.5"),
            ..Policy::default()
        };
        let primary = group("primary", "r1", "r1-a", 100.0, &[true, false]);
        let mut standby = group("standby", "r1", "r1-b", 100.0, &[true]);
        standby.failover = true;
        // 1 of 2 healthy: 50 % is not < 0.5: the primary serves.
        let d = decide(
            &p,
            &here(),
            &[primary.clone(), standby.clone()],
            &mut s,
            0.0,
        );
        assert_eq!(share(&d, "primary"), 1.0);
        let mut worse = primary;
        worse.endpoints.push(Endpoint {
            name: "primary-2".into(),
            healthy: false,
            live: 0,
        });
        let d = decide(&p, &here(), &[worse.clone(), standby.clone()], &mut s, 0.0);
        assert_eq!(share(&d, "standby"), 1.0);
        // Nothing healthy anywhere: fail open over the serving set, or drop when asked.
        for e in &mut worse.endpoints {
            e.healthy = false;
        }
        standby.endpoints[0].healthy = false;
        let d = decide(&p, &here(), &[worse.clone(), standby.clone()], &mut s, 0.0);
        assert_eq!(d.endpoint_shares.len(), 3);
        let dropping = Policy {
            drop_traffic_if_unhealthy: true,
            ..p
        };
        let d = decide(&dropping, &here(), &[worse, standby], &mut s, 0.0);
        assert!(d.drop);
    }

    /// Google Cloud's `failoverRatio` (compute v1 BackendServiceFailoverPolicy): 0, the
    /// default, fails over when no primary endpoint is healthy; any other value when the
    /// healthy share is strictly below it, on the written decimal (3 of 10 is not below 0.3).
    #[test]
    fn failover_ratio_zero_means_no_healthy_primary_and_others_are_strict() {
        let mut s = DrainState::default();
        let mut standby = group("standby", "r1", "r1-b", 100.0, &[true]);
        standby.failover = true;
        let primary = |healthy: usize, of: usize| {
            let h: Vec<bool> = (0..of).map(|i| i < healthy).collect();
            group("primary", "r1", "r1-a", 100.0, &h)
        };
        for ratio in [None, Ratio::parse("0"), Ratio::parse("0.0")] {
            let p = Policy {
                failover_ratio: ratio.clone(),
                ..Policy::default()
            };
            let d = decide(&p, &here(), &[primary(1, 10), standby.clone()], &mut s, 0.0);
            assert!(
                !d.failover_serves && share(&d, "primary") == 1.0,
                "{ratio:?}"
            );
            let d = decide(&p, &here(), &[primary(0, 10), standby.clone()], &mut s, 0.0);
            assert!(
                d.failover_serves && share(&d, "standby") == 1.0,
                "{ratio:?}"
            );
        }
        let p = Policy {
            failover_ratio: Ratio::parse("0.3"),
            ..Policy::default()
        };
        let d = decide(&p, &here(), &[primary(3, 10), standby.clone()], &mut s, 0.0);
        assert!(!d.failover_serves, "3/10 is not below 0.3");
        let d = decide(&p, &here(), &[primary(2, 10), standby.clone()], &mut s, 0.0);
        assert!(d.failover_serves, "2/10 is below 0.3");
        // 1/3 is below 0.3334 and not below 0.3333 (a double would round both the same way
        // for longer decimals; the written decimal decides).
        for (ratio, fails_over) in [("0.3333", false), ("0.3334", true)] {
            let p = Policy {
                failover_ratio: Ratio::parse(ratio),
                ..Policy::default()
            };
            let d = decide(&p, &here(), &[primary(1, 3), standby.clone()], &mut s, 0.0);
            assert_eq!(d.failover_serves, fails_over, "{ratio}");
        }
    }

    #[test]
    fn weights_follow_shares_and_small_moves_are_not_applied() {
        let mut s = DrainState::default();
        let near = with_live(group("near", "r1", "r1-a", 100.0, &[true, true]), 100);
        let far = with_live(group("far", "r2", "r2-a", 300.0, &[true]), 100);
        let a = decide(
            &Policy::default(),
            &here(),
            &[near.clone(), far.clone()],
            &mut s,
            0.0,
        );
        let w = a.weights(1000);
        assert_eq!(w["near-0"], 500);
        assert_eq!(w["far-0"], 1000);
        let b = decide(
            &Policy::default(),
            &here(),
            &[with_live(near, 101), far],
            &mut s,
            1.0,
        );
        assert!(!worth_applying(&a, &b, 0.02));
        // A move of half a point at 201 live is inside the noise of a share of 0.5 over 201
        // connections (3√2 × 0.5 / √201 = 15 points) whatever the deadband.
        assert!(!worth_applying(&a, &b, 0.0001));
        // At 20,000 live the noise is 1.5 points: a move of 2.4 points passes a deadband
        // under it, not one of 3 points.
        let near = with_live(group("near", "r1", "r1-a", 10_000.0, &[true, true]), 10_000);
        let far = group("far", "r2", "r2-a", 1e6, &[true]);
        let at = |far_live: u64, s: &mut DrainState| {
            decide(
                &Policy::default(),
                &here(),
                &[near.clone(), with_live(far.clone(), far_live)],
                s,
                2.0,
            )
        };
        let (a, b) = (at(10_000, &mut s), at(11_000, &mut s));
        assert!((share(&a, "near") - share(&b, "near") - (0.5 - 10_000.0 / 21_000.0)).abs() < 1e-9);
        assert!(worth_applying(&a, &b, 0.0001));
        assert!(!worth_applying(&a, &b, 0.03));
    }

    /// A group that came near its capacity holds its capacity's share until it falls
    /// 6 √C below capacity (a steady count wanders by √C; the deadband lets its mean sit up
    /// to about 3 √C below), and only then takes all its tier is left again.
    #[test]
    fn a_group_near_capacity_fills_again_only_well_below_it() {
        let p = Policy::default();
        let at = |live: u64, s: &mut DrainState| {
            let near = with_live(group("near", "r1", "r1-a", 400.0, &[true]), live);
            let far = with_live(group("far", "r2", "r2-a", 400.0, &[true]), 300);
            decide(&p, &here(), &[near, far], s, 0.0)
        };
        // Fresh: 339 is more than 3 √400 = 60 below capacity: filling, all of the tier.
        let d = at(339, &mut DrainState::default());
        assert_eq!(share(&d, "near"), 1.0, "{d:?}");
        // Having been at 400: 339 and 281 hold its capacity's share C / N; 279 fills again.
        let mut s = DrainState::default();
        at(400, &mut s);
        assert!(s.near_capacity.contains("near"));
        for live in [339, 281] {
            let d = at(live, &mut s);
            let fair = 400.0 / (live + 300) as f64;
            assert!((share(&d, "near") - fair).abs() < 1e-9, "{live}: {d:?}");
        }
        let d = at(279, &mut s);
        assert_eq!(share(&d, "near"), 1.0, "{d:?}");
        assert!(!s.near_capacity.contains("near"));
    }

    #[test]
    fn a_load_hovering_at_capacity_does_not_flap() {
        // One tier of capacity 100 and a spill tier: with 99 then 101 live connections the
        // spill share goes 0 -> 1 %, under a 5 % deadband no change to start it; 120 (17 %)
        // is one.
        let mut s = DrainState::default();
        let at = |live: u64, s: &mut DrainState| {
            decide(
                &Policy::default(),
                &here(),
                &[
                    with_live(group("near", "r1", "r1-a", 100.0, &[true]), live),
                    group("far", "r2", "r2-a", 100.0, &[true]),
                ],
                s,
                0.0,
            )
        };
        let below = at(99, &mut s);
        assert_eq!(below.groups[1].share, 0.0);
        let above = at(101, &mut s);
        assert!(above.groups[1].share > 0.0);
        assert!(!worth_applying(&below, &above, 0.05));
        // Tables that spill although the tier has room again stop spilling (which a hovering
        // load never reaches: the spill above did not start).
        assert!(worth_applying(&above, &below, 0.05));
        assert!(worth_applying(&below, &at(120, &mut s), 0.05));
        // Health always counts, whatever the deadband.
        let mut sick = above.clone();
        sick.groups[0].healthy = 0;
        assert!(worth_applying(&above, &sick, 1.0));
    }

    /// A spill that is no longer needed stops, however small it was when last applied (SPEC
    /// R6.1: nothing leaves the nearest tier while it has room). The load falling from 110
    /// to 104 live connections on a tier of 100 leaves a spill of 1 - 100/104 = 3.8 % in the
    /// tables (a move of 5.3 points from 9.1 %); at 60 live the tier is far from full, yet a
    /// move of 3.8 points is under the 5-point deadband, and without this rule the spill stayed
    /// until the load rose again (`nlbctl policy-sim` showed 3.7 % of new connections leaving
    /// a region at 65 % utilisation for good).
    #[test]
    fn a_spill_that_is_no_longer_needed_stops() {
        let mut s = DrainState::default();
        let at = |live: u64, s: &mut DrainState| {
            decide(
                &Policy::default(),
                &here(),
                &[
                    with_live(group("near", "r1", "r1-a", 100.0, &[true]), live),
                    group("far", "r2", "r2-a", 100.0, &[true]),
                ],
                s,
                0.0,
            )
        };
        let mut applied = at(60, &mut s);
        let mut applies = Vec::new();
        for live in [110, 104, 60] {
            let next = at(live, &mut s);
            if worth_applying(&applied, &next, DEADBAND) {
                applied = next;
                applies.push(live);
            }
        }
        // At 104 the spill's move (9 -> 4 points) is inside the noise of the near group's
        // share (3√2 × 0.96 / √104 = 40 points), which the spill mirrors; at 60 it stops.
        assert_eq!(applies, vec![110, 60]);
        assert_eq!(applied.groups[1].share, 0.0);
    }

    /// A load hovering around a tier's capacity moves no weight: a spill starts only beyond
    /// the deadband (here above 100/0.95 = 105.3 live) and stops only when it is not needed.
    #[test]
    fn a_load_hovering_around_capacity_applies_nothing() {
        let mut s = DrainState::default();
        let at = |live: u64, s: &mut DrainState| {
            decide(
                &Policy::default(),
                &here(),
                &[
                    with_live(group("near", "r1", "r1-a", 100.0, &[true]), live),
                    group("far", "r2", "r2-a", 100.0, &[true]),
                ],
                s,
                0.0,
            )
        };
        let mut applied = at(99, &mut s);
        let mut applies = 0;
        for live in [101, 99, 103, 97, 105, 100, 101, 98, 104, 99] {
            let next = at(live, &mut s);
            if worth_applying(&applied, &next, DEADBAND) {
                applied = next;
                applies += 1;
            }
        }
        assert_eq!(applies, 0);
        // Once a spill was needed (110), hovering just under it changes nothing either.
        applied = at(110, &mut s);
        for live in [108, 111, 107, 110, 109] {
            assert!(
                !worth_applying(&applied, &at(live, &mut s), DEADBAND),
                "{live}"
            );
        }
    }

    /// SPEC R7.4 (GKE's zonal affinity, spill ratio 0): the client's zone serves alone
    /// while it has one healthy eligible node; otherwise every node of every zone does.
    #[test]
    fn zonal_affinity_keeps_the_zone_while_one_node_is_healthy_then_spreads_over_all() {
        // A Kubernetes Service: passthrough (no service LB policy), with zonal affinity.
        let p = Policy {
            zonal_affinity: true,
            ..Policy::passthrough()
        };
        let unlimited = |name: &str, zone: &str, healthy: &[bool]| {
            let mut g = group(name, "r1", zone, 1e9 * healthy.len() as f64, healthy);
            g.unlimited = true;
            g
        };
        let mut s = DrainState::default();
        let ep = |d: &Decision, e: &str| d.endpoint_shares.get(e).copied().unwrap_or(0.0);
        // Own zone r1-a with one of two nodes healthy: that node takes every new connection.
        let groups = [
            unlimited("a", "r1-a", &[false, true]),
            unlimited("b", "r1-b", &[true, true]),
            unlimited("c", "r1-c", &[true]),
        ];
        let d = decide(&p, &here(), &groups, &mut s, 0.0);
        assert_eq!(ep(&d, "a-1"), 1.0, "{d:?}");
        assert_eq!(ep(&d, "a-0") + ep(&d, "b-0") + ep(&d, "c-0"), 0.0);
        assert!(d.groups[1].why.contains("zonal affinity"), "{d:?}");
        // Its last node fails: all three healthy nodes of the other zones share equally
        // ("among all", not the next zone alone).
        let groups = [
            unlimited("a", "r1-a", &[false, false]),
            unlimited("b", "r1-b", &[true, true]),
            unlimited("c", "r1-c", &[true]),
        ];
        let d = decide(&p, &here(), &groups, &mut s, 0.0);
        for e in ["b-0", "b-1", "c-0"] {
            assert!((ep(&d, e) - 1.0 / 3.0).abs() < 1e-9, "{e}: {d:?}");
        }
        // WATERFALL_BY_ZONE is not this: it would give one other zone everything.
        let waterfall = Policy {
            algorithm: Algorithm::WaterfallByZone,
            ..Policy::default()
        };
        let d = decide(&waterfall, &here(), &groups, &mut s, 0.0);
        assert_eq!(ep(&d, "c-0"), 0.0, "{d:?}");
        // Nothing healthy anywhere: fail open over every node (SPEC R3.4).
        let groups = [
            unlimited("a", "r1-a", &[false]),
            unlimited("b", "r1-b", &[false]),
        ];
        let d = decide(&p, &here(), &groups, &mut s, 0.0);
        assert_eq!((ep(&d, "a-0"), ep(&d, "b-0")), (0.5, 0.5), "{d:?}");
        // A NIC without a zone: no affinity.
        let nowhere = Locality {
            zone: String::new(),
            ..here()
        };
        let groups = [
            unlimited("a", "r1-a", &[true]),
            unlimited("b", "r1-b", &[true]),
        ];
        let d = decide(&p, &nowhere, &groups, &mut s, 0.0);
        assert_eq!((ep(&d, "a-0"), ep(&d, "b-0")), (0.5, 0.5), "{d:?}");
    }

    /// SPEC R6: without a service LB policy, every healthy endpoint alike, whatever its group,
    /// zone, region, capacity or preference; no drain, threshold or tiers; a group with
    /// capacity 0 (capacityScaler 0) takes none; only failoverPolicy moves traffic.
    #[test]
    fn passthrough_spreads_over_the_healthy_endpoints_alike() {
        let p = Policy {
            auto_capacity_drain: true,
            isolation: Isolation::Strict,
            ..Policy::passthrough()
        };
        let mut s = DrainState::default();
        let mut pref = group("pref", "r2", "r2-a", 5.0, &[true]);
        pref.preference = Preference::Preferred;
        let groups = [
            with_live(
                group(
                    "sick",
                    "r1",
                    "r1-a",
                    1000.0,
                    &[true, false, false, false, false],
                ),
                900,
            ),
            group("far", "r3", "r3-a", 10.0, &[true, true]),
            pref,
            group("off", "r1", "r1-b", 0.0, &[true]),
        ];
        let d = decide(&p, &here(), &groups, &mut s, 0.0);
        for e in ["sick-0", "far-0", "far-1", "pref-0"] {
            assert!((d.endpoint_shares[e] - 0.25).abs() < 1e-9, "{e}: {d:?}");
        }
        assert!(!d.endpoint_shares.contains_key("off-0"), "{d:?}");
        assert!(s.drained.is_empty() && !d.groups[0].below_threshold && !d.drop);
        assert!(d.rule.contains("no serviceLbPolicy"), "{}", d.rule);
        // Nothing healthy: fail open, not STRICT's drop (no policy, no isolation).
        let dead: Vec<Group> = groups
            .iter()
            .map(|g| {
                let mut g = g.clone();
                g.endpoints.iter_mut().for_each(|e| e.healthy = false);
                g
            })
            .collect();
        let d = decide(&p, &here(), &dead, &mut s, 0.0);
        assert!(!d.drop && d.endpoint_shares.len() == 9, "{d:?}");
        assert!(d.rule.contains("fail open"), "{}", d.rule);
        // failoverPolicy: no primary healthy, the failover group serves alone.
        let mut standby = group("standby", "r1", "r1-c", 1.0, &[true, true]);
        standby.failover = true;
        let d = decide(&p, &here(), &[dead[1].clone(), standby], &mut s, 0.0);
        assert!(d.failover_serves, "{d:?}");
        assert_eq!(d.endpoint_shares.len(), 2);
        assert!(d.rule.contains("failoverPolicy"), "{}", d.rule);
    }

    const DEADBAND: f64 = 0.05;
}
