//! The service LB policy at run time (SPEC R6): live connection counts in, Maglev weights out.
//!
//! ```text
//! Conntrack::open_counts, take_closed (kept per (rule, backend) as entries change, no scan)
//!        │  every refresh (EngineOptions::policy_refresh, 250 ms by default)
//!        ▼
//! ServiceIndex: (rule, backend) → (backend service, backend name)      LiveLoad
//!        ▼
//! Controller::refresh_policy → Compiled::rebalance (decide, deadband) → delta load
//! ```
//!
//! Each refresh counts the open connections (valid, no FIN or RST seen) of the connection
//! table per backend-service pool and backend, hands them to the policy with the slow path's
//! monotonic time (seconds since the engine started), and loads the table entries whose
//! weights changed through the same loader path as a health change. The policy rewrites a
//! service only when its decision moves by more than the deadband ([`DEFAULT_DEADBAND`],
//! 5 percentage points of a group's share; anything health decides always), so a steady load
//! leaves the tables alone. A failed load leaves the previous tables serving and is retried
//! with the next refresh (or the engine's retry timer), like any other.
//!
//! The connections that closed since the previous refresh go with the counts: they tell the
//! policy how much room a group at capacity frees ([`flowtable_compiler::LiveLoad::add_closed`]).
//!
//! Configurations without backend services skip all of it.
//!
//! **Why 250 ms.** A capacity crossing waits for the next refresh (up to one period), then the
//! recompute and the delta load (about a millisecond for a small service; `cargo bench -p
//! nlb-slowpath --bench policy`). The target is new weights active within 1 s (p99) of the
//! crossing; a 1 s utilisation refresh would spend all of it waiting, so the period is
//! a quarter of that. A refresh with nothing to change costs a walk over the kept counts and one
//! decision per service: well under a millisecond for thousands of backends.

use super::controller::{Controller, LoadOutcome};
use super::health::LatencyHistogram;
use flowtable_compiler::{Compiled, LiveLoad, PoolKind};
use nlb_driver::conntrack::PairCounts;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::time::Duration;

pub use flowtable_compiler::{DEFAULT_DEADBAND, DEFAULT_REFILL_BUDGET};

/// How often the policy is refreshed by default (see the module documentation).
pub const DEFAULT_REFRESH: Duration = Duration::from_millis(250);

/// Bucket bounds (seconds) of the refresh duration histogram.
pub const REFRESH_BOUNDS_SECONDS: [f64; 12] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
];

/// Counters of the policy refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyStats {
    /// Refreshes run (only with backend services).
    pub refreshes: u64,
    /// Weight changes applied: a backend service whose new weights went into the NIC counts
    /// once per refresh that changed it.
    pub weight_changes: u64,
    /// Table entries the weight changes wrote.
    pub entries_changed: u64,
    /// Loads of new weights that failed (retried).
    pub load_errors: u64,
    /// Time of each refresh: counting, deciding, recompiling and loading.
    pub refresh_duration: LatencyHistogram,
    /// The longest refresh.
    pub refresh_duration_max: Duration,
    /// Open connections of backend services at the last refresh.
    pub live_connections: u64,
    /// Services left for a later refresh because one refresh's refill budget was spent.
    pub deferred: u64,
}

impl Default for PolicyStats {
    fn default() -> Self {
        PolicyStats {
            refreshes: 0,
            weight_changes: 0,
            entries_changed: 0,
            load_errors: 0,
            refresh_duration: LatencyHistogram {
                bounds_seconds: &REFRESH_BOUNDS_SECONDS,
                counts: vec![0; REFRESH_BOUNDS_SECONDS.len() + 1],
                sum: Duration::ZERO,
                count: 0,
            },
            refresh_duration_max: Duration::ZERO,
            live_connections: 0,
            deferred: 0,
        }
    }
}

impl PolicyStats {
    fn record(&mut self, d: Duration) {
        let h = &mut self.refresh_duration;
        let s = d.as_secs_f64();
        let i = h
            .bounds_seconds
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(h.bounds_seconds.len());
        h.counts[i] += 1;
        h.count += 1;
        h.sum += d;
        self.refresh_duration_max = self.refresh_duration_max.max(d);
    }
}

/// What a connection-table entry's (rule, backend) means to the policy: which backend
/// service's live count it adds to, under which backend name. Built from a compile's symbols
/// (once per configuration, not per refresh), so that a refresh only adds numbers: each
/// member of each service has a slot, and the services' slots hold their members in name
/// order, the order the policy's maps want them in.
#[derive(Debug, Clone, Default)]
pub struct ServiceIndex {
    /// The configuration digest it was built for.
    digest: [u8; 32],
    /// Rule id → the backend-service pool id it targets.
    rule_service: Vec<Option<u16>>,
    /// (pool id, backend id) of every member of a backend service → its slot.
    slot: HashMap<(u16, u16), usize>,
    /// Per backend service: its name and its slots.
    services: Vec<(String, Range<usize>)>,
    /// Backend name of each slot.
    names: Vec<String>,
}

impl ServiceIndex {
    /// The index of compile `c` (the configuration a controller serves).
    pub fn build(c: &Compiled) -> ServiceIndex {
        let symbols = &c.symbols;
        let service = |pool: u16| {
            symbols
                .pools
                .get(usize::from(pool))
                .is_some_and(|p| p.kind == PoolKind::BackendService)
        };
        let rule_service = c
            .tables
            .rules
            .iter()
            .map(|r| (r.valid && service(r.pool)).then_some(r.pool))
            .collect();
        let mut index = ServiceIndex {
            digest: c.config_digest,
            rule_service,
            ..ServiceIndex::default()
        };
        for (id, p) in symbols.pools.iter().enumerate() {
            if p.kind != PoolKind::BackendService {
                continue;
            }
            let mut members: Vec<(&str, u16)> = p
                .members
                .iter()
                .filter_map(|&b| Some((symbols.backend(b)?, b)))
                .collect();
            members.sort_unstable();
            let first = index.names.len();
            for (name, b) in members {
                index.slot.insert((id as u16, b), index.names.len());
                index.names.push(name.to_string());
            }
            index
                .services
                .push((p.name.clone(), first..index.names.len()));
        }
        index
    }

    /// Whether the configuration has a backend service.
    pub fn has_services(&self) -> bool {
        !self.services.is_empty()
    }

    /// The live load of the backend services from open connections per (rule id, backend
    /// id) ([`nlb_driver::conntrack::Conntrack::open_counts`]) and those that closed since
    /// the previous refresh ([`nlb_driver::conntrack::Conntrack::take_closed`]), and the total
    /// open; connections of other pools, and of a backend that is not a member of its rule's
    /// service, are left out.
    pub fn live_load(&self, open: &PairCounts, closed: &PairCounts) -> (LiveLoad, u64) {
        let mut counts = vec![0u64; self.names.len()];
        let mut total = 0;
        for (&(rule, backend), &n) in open {
            let Some(pool) = self.rule_service.get(usize::from(rule)).copied().flatten() else {
                continue;
            };
            if let Some(&s) = self.slot.get(&(pool, backend)) {
                counts[s] += u64::from(n);
                total += u64::from(n);
            }
        }
        let mut live = LiveLoad::from_pools(self.services.iter().map(|(name, slots)| {
            let per_backend: BTreeMap<String, u64> = slots
                .clone()
                .filter(|&s| counts[s] > 0)
                .map(|s| (self.names[s].clone(), counts[s]))
                .collect();
            (name.clone(), per_backend)
        }));
        live.count_closed();
        for (&(rule, backend), &n) in closed {
            let Some(pool) = self.rule_service.get(usize::from(rule)).copied().flatten() else {
                continue;
            };
            if let Some(&s) = self.slot.get(&(pool, backend)) {
                // The services' slot ranges follow each other in order.
                let k = self.services.partition_point(|(_, r)| r.end <= s);
                if let Some((service, _)) = self.services.get(k) {
                    live.add_closed(service, &self.names[s], u64::from(n));
                }
            }
        }
        (live, total)
    }
}

/// What one refresh did.
#[derive(Debug)]
pub struct Refreshed {
    /// Backend services whose weights changed.
    pub pools: Vec<String>,
    /// Table entries that changed.
    pub changed_entries: usize,
    /// The load (not needed when nothing changed and no load was pending).
    pub load: LoadOutcome,
    /// Open connections of backend services counted.
    pub live_connections: u64,
    /// Services worth changing left for the next refresh (past the refill budget).
    pub deferred: Vec<String>,
    /// Counting, deciding, recompiling and loading.
    pub elapsed: Duration,
}

/// The engine's policy refresh: the service index and the counters (the engine keeps the
/// period, [`crate::engine::EngineOptions::policy_refresh`]).
#[derive(Debug, Clone)]
pub struct PolicyRuntime {
    /// Shares that move by less than this are not applied ([`DEFAULT_DEADBAND`]).
    pub deadband: f64,
    /// Maglev slots one refresh refills at most ([`DEFAULT_REFILL_BUDGET`]).
    pub refill_budget: u64,
    index: Option<ServiceIndex>,
    /// Services changed by a refresh whose load failed: counted when a load succeeds.
    unloaded: Vec<String>,
    stats: PolicyStats,
}

impl PolicyRuntime {
    /// A runtime whose refreshes do not apply shares that move by less than `deadband`.
    pub fn new(deadband: f64) -> PolicyRuntime {
        PolicyRuntime {
            deadband,
            refill_budget: DEFAULT_REFILL_BUDGET,
            index: None,
            unloaded: Vec::new(),
            stats: PolicyStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &PolicyStats {
        &self.stats
    }

    /// Forgets the service index (after a reload: rule and backend ids may mean other things).
    pub fn invalidate(&mut self) {
        self.index = None;
    }

    fn index(&mut self, controller: &Controller) -> &ServiceIndex {
        let stale = self
            .index
            .as_ref()
            .is_none_or(|i| i.digest != controller.compiled().config_digest);
        if stale {
            self.index = Some(ServiceIndex::build(controller.compiled()));
        }
        self.index.get_or_insert_with(ServiceIndex::default)
    }

    /// One refresh at policy time `now` (seconds on the engine's monotonic clock): counts,
    /// decides and loads. `None` without backend services.
    pub fn refresh<D: nlb_driver::device::Device + ?Sized>(
        &mut self,
        controller: &mut Controller,
        dev: &mut D,
        open: &PairCounts,
        closed: &PairCounts,
        now: f64,
    ) -> Option<Result<Refreshed, super::controller::ControllerError>> {
        let started = std::time::Instant::now();
        let index = self.index(controller);
        if !index.has_services() {
            return None;
        }
        let (live, live_connections) = index.live_load(open, closed);
        let result = controller.refresh_policy(dev, &live, now, self.deadband, self.refill_budget);
        let elapsed = started.elapsed();
        self.stats.refreshes += 1;
        self.stats.live_connections = live_connections;
        self.stats.record(elapsed);
        Some(result.map(|applied| {
            self.stats.entries_changed += applied.changed_entries as u64;
            self.unloaded.extend(applied.pools.iter().cloned());
            match &applied.load {
                LoadOutcome::Failed(_) => self.stats.load_errors += 1,
                LoadOutcome::Loaded(_) | LoadOutcome::NotNeeded => {}
            }
            if !controller.load_pending() {
                self.unloaded.sort_unstable();
                self.unloaded.dedup();
                self.stats.weight_changes += self.unloaded.len() as u64;
                self.unloaded.clear();
            }
            self.stats.deferred += applied.deferred.len() as u64;
            Refreshed {
                pools: applied.pools,
                changed_entries: applied.changed_entries,
                load: applied.load,
                live_connections,
                deferred: applied.deferred,
                elapsed,
            }
        }))
    }
}
