//! The controller: configuration and health in, tables in the NIC out (SPEC R3.4, R5).
//!
//! ```text
//! HealthChange batch + HealthSnapshot ──► effective health (per instance)
//!        │                                   │ pools that have a changed backend
//!        │                                   ▼
//!        │                  Compiled::recompile_pool (eligible set, fail open, failover)
//!        │                                   ▼
//!        └─ decided_at ────────────► Loader::load (delta into the inactive bank, flip)
//!                                            └► latency = table active − decided_at
//! ```
//!
//! A configuration reload compiles the new file under the current health first; a file that
//! does not compile is refused with one line saying why and the old tables keep serving.
//!
//! # Health before the first decisions
//! The checker starts every target `Unknown`, which is not healthy. A target present when the
//! controller starts is instead *assumed* to be in the state the device already serves until
//! its own probes decide it: on a device serving this configuration (a restarted `nlbd`),
//! members that hold slots in their pool's slice (and are not in a failed-over pool) are
//! assumed healthy and the others not, so a restart leaves the NIC's choices alone; on a
//! device serving nothing or another configuration, every member is assumed healthy (what fail
//! open gives anyway). Targets a reload adds start `Unknown` and earn traffic by passing their
//! checks, as a new instance does in the public product.

use super::health::{
    targets_from_config, Health, HealthChange, HealthError, HealthSnapshot, HealthTarget,
    LatencyHistogram, TargetKey, TargetStatus,
};
use crate::tracking::{self, KeptBackend, RemovedPair};
use flowtable_compiler::{
    compile_after, CompileOptions, Compiled, Config, HealthState, LiveLoad, Symbols,
};
use nlb_driver::device::Device;
use nlb_driver::discovery::DeviceInfo;
use nlb_driver::loader::{LoadError, LoadReport, Loader, LoaderOptions};
use nlb_hw::enums::Table;
use nlb_hw::Tables;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Bucket bounds (seconds) of the decision-to-table-active histogram (target: 50 ms).
pub const DECISION_BOUNDS_SECONDS: [f64; 12] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
];

/// Why the controller could not do what it was asked. The tables serving before stay.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The configuration does not compile (for the device's profile).
    #[error("{0}")]
    Compile(String),
    /// A health target of the configuration is invalid.
    #[error("health check of {0}")]
    Health(#[from] HealthError),
    /// Loading the tables failed.
    #[error("table load failed: {0}")]
    Load(#[from] LoadError),
}

impl ControllerError {
    /// The error on one line (a configuration with several problems lists them with `; `), for
    /// the one log line that refuses a reload.
    pub fn one_line(&self) -> String {
        self.to_string()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn compile_error(e: flowtable_compiler::Error) -> ControllerError {
    ControllerError::Compile(e.to_string())
}

/// How a health change ended.
#[derive(Debug)]
pub enum LoadOutcome {
    /// No table entry changed (for example a pool that stays failed open).
    NotNeeded,
    /// The new tables serve.
    Loaded(LoadReport),
    /// The load failed; the previous tables serve and the load is retried by
    /// [`Controller::retry_pending`].
    Failed(LoadError),
}

/// What [`Controller::apply_health`] did.
#[derive(Debug)]
pub struct Applied {
    /// Pools recompiled.
    pub pools: Vec<String>,
    /// Table entries the recompile changed.
    pub changed_entries: usize,
    /// The load.
    pub load: LoadOutcome,
    /// Per change: deciding probe → new table active (only when loaded).
    pub latencies: Vec<Duration>,
    /// When the new tables became active (the bank flip read back), when loaded.
    pub active_at: Option<Instant>,
    /// (pool id, backend id) pairs that were healthy and are not any more (for the
    /// persistence policy; health belongs to a pool, SPEC R5.5).
    pub turned_unhealthy: Vec<(u16, u16)>,
}

/// What [`Controller::refresh_policy`] did.
#[derive(Debug)]
pub struct PolicyApplied {
    /// Backend services whose weights changed.
    pub pools: Vec<String>,
    /// Table entries the change rewrote.
    pub changed_entries: usize,
    /// The load.
    pub load: LoadOutcome,
    /// Services worth changing that did not fit in the refill budget (the next refresh).
    pub deferred: Vec<String>,
}

/// A configuration accepted by [`Controller::prepare_reload`], not yet serving.
#[derive(Debug)]
pub struct ReloadPlan {
    config: Config,
    targets: Vec<HealthTarget>,
    compiled: Compiled,
    health: HealthState,
    /// Old backend id → new id (`None`: removed).
    pub backend_map: Vec<Option<u16>>,
    /// Old rule id → new id (`None`: removed).
    pub rule_map: Vec<Option<u16>>,
    /// Connections the reload takes out of a backend service: how long they may continue
    /// (old ids; [`tracking::plan_reload_drains`]).
    pub drains: Vec<RemovedPair>,
    /// Deleted instances whose backend entries the new tables keep while they drain.
    kept: Vec<KeptBackend>,
}

impl ReloadPlan {
    /// The health targets of the new configuration (for the checker).
    pub fn targets(&self) -> &[HealthTarget] {
        &self.targets
    }

    /// The new compile.
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// The new compile, the plan given up (tables prepared and not loaded).
    pub fn into_compiled(self) -> Compiled {
        self.compiled
    }

    /// Maps an old backend id.
    pub fn map_backend(&self, id: u16) -> Option<u16> {
        self.backend_map.get(usize::from(id)).copied().flatten()
    }

    /// Maps an old rule id.
    pub fn map_rule(&self, id: u16) -> Option<u16> {
        self.rule_map.get(usize::from(id)).copied().flatten()
    }
}

/// Counters of the controller.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerStats {
    /// Successful loads (start, health changes, reloads, retries).
    pub loads: u64,
    /// Failed loads.
    pub load_errors: u64,
    /// Table entries written by loads.
    pub entries_written: u64,
    /// Register reads the loads made (the control registers; entries go by DMA).
    pub load_reads: u64,
    /// Register writes the loads made (doorbells and control registers).
    pub load_writes: u64,
    /// The last successful load.
    pub last_load: Option<LoadReport>,
    /// Health batches applied.
    pub health_batches: u64,
    /// Health batches that changed no table entry.
    pub health_noops: u64,
    /// Reloads that serve.
    pub reloads: u64,
    /// Reloads refused (did not compile) or failed (did not load).
    pub reloads_refused: u64,
    /// Deciding probe → table active.
    pub decision_latency: LatencyHistogram,
    /// The largest decision latency seen.
    pub decision_latency_max: Duration,
}

impl Default for ControllerStats {
    fn default() -> Self {
        ControllerStats {
            loads: 0,
            load_errors: 0,
            entries_written: 0,
            load_reads: 0,
            load_writes: 0,
            last_load: None,
            health_batches: 0,
            health_noops: 0,
            reloads: 0,
            reloads_refused: 0,
            decision_latency: LatencyHistogram {
                bounds_seconds: &DECISION_BOUNDS_SECONDS,
                counts: vec![0; DECISION_BOUNDS_SECONDS.len() + 1],
                sum: Duration::ZERO,
                count: 0,
            },
            decision_latency_max: Duration::ZERO,
        }
    }
}

impl ControllerStats {
    fn record_latency(&mut self, d: Duration) {
        let h = &mut self.decision_latency;
        let s = d.as_secs_f64();
        let i = h
            .bounds_seconds
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(h.bounds_seconds.len());
        h.counts[i] += 1;
        h.count += 1;
        h.sum += d;
        self.decision_latency_max = self.decision_latency_max.max(d);
    }
}

/// Keeps the NIC's tables in step with the configuration and the health of its backends.
#[derive(Debug)]
pub struct Controller {
    config: Config,
    targets: Vec<HealthTarget>,
    options: CompileOptions,
    compiled: Compiled,
    health: HealthState,
    assumed: HashMap<TargetKey, bool>,
    loader: Loader,
    pending_load: bool,
    stats: ControllerStats,
    /// Instances gone from the configuration whose backend entries stay while their
    /// connections drain.
    kept: Vec<KeptBackend>,
}

impl Controller {
    /// Attaches to the device (rebuilding the loader's shadow from both banks), compiles the
    /// configuration under the health known so far and loads it.
    pub fn start<D: Device + ?Sized>(
        dev: &mut D,
        info: &DeviceInfo,
        config: Config,
        snapshot: &HealthSnapshot,
        loader_options: LoaderOptions,
    ) -> Result<(Controller, LoadReport), ControllerError> {
        let options = CompileOptions {
            profile: info.profile,
        };
        let targets = targets_from_config(&config);
        for t in &targets {
            t.validate()?;
        }
        let loader = Loader::attach(dev, info.profile, loader_options)?;
        let serving = loader.shadow(loader.active_bank());
        // A device that serves tables already (a restarted daemon) keeps its rule and backend
        // ids, whatever history gave them, so its connection table stays right.
        let previous = if loader.generation() != 0 {
            Symbols::recover(serving, &config)
        } else {
            Symbols::default()
        };
        let mut compiled = compile_after(&config, &HealthState::new(), &options, &previous)
            .map_err(compile_error)?;
        let assumed = initial_assumptions(&compiled, serving, loader.generation(), &targets);
        let health = effective_health(&targets, snapshot, &assumed);
        compiled.apply_health(&health).map_err(compile_error)?;
        let mut c = Controller {
            config,
            targets,
            options,
            compiled,
            health,
            assumed,
            loader,
            pending_load: false,
            stats: ControllerStats::default(),
            kept: Vec::new(),
        };
        let report = c.load(dev)?;
        // The other bank too (by DMA), so that the first health change writes only what it
        // changes.
        if let Err(e) = c.loader.sync_inactive(dev, &c.compiled.tables) {
            tracing::warn!(
                error = %e,
                "writing the tables into the bank not serving failed; the next change rewrites it"
            );
        }
        Ok((c, report))
    }

    fn load<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<LoadReport, LoadError> {
        self.load_with(dev, None)
    }

    /// [`Controller::load`], told which entries changed since the last load where that is
    /// known (a recompile's list: the loader then compares only those).
    fn load_with<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        changed: Option<&[(Table, u32)]>,
    ) -> Result<LoadReport, LoadError> {
        let (r0, w0) = dev.mmio_seen();
        let (tables, nic) = (&self.compiled.tables, &self.compiled.nic);
        let result = match changed {
            Some(c) => self.loader.load_changed(dev, tables, nic, c),
            None => self.loader.load(dev, tables, nic),
        };
        let (r1, w1) = dev.mmio_seen();
        self.stats.load_reads += r1.saturating_sub(r0);
        self.stats.load_writes += w1.saturating_sub(w0);
        match result {
            Ok(r) => {
                self.pending_load = false;
                self.stats.loads += 1;
                self.stats.entries_written += r.changed_entries as u64;
                self.stats.last_load = Some(r.clone());
                Ok(r)
            }
            Err(e) => {
                self.pending_load = true;
                self.stats.load_errors += 1;
                Err(e)
            }
        }
    }

    /// The configuration serving.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The compile serving (or waiting for a retried load).
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// The health targets of the configuration.
    pub fn targets(&self) -> &[HealthTarget] {
        &self.targets
    }

    /// The per-instance health the tables were compiled with.
    pub fn health(&self) -> &HealthState {
        &self.health
    }

    /// What the device serves now (the loader's copy of the active bank).
    pub fn serving(&self) -> &Tables {
        self.loader.shadow(self.loader.active_bank())
    }

    /// The loader (bank, generation).
    pub fn loader(&self) -> &Loader {
        &self.loader
    }

    /// Whether a failed load waits to be retried.
    pub fn load_pending(&self) -> bool {
        self.pending_load
    }

    /// Counters.
    pub fn stats(&self) -> &ControllerStats {
        &self.stats
    }

    /// Targets still running on an assumption (not decided by their probes yet).
    pub fn assumed_targets(&self) -> usize {
        self.assumed.len()
    }

    /// Retries a failed load.
    pub fn retry_pending<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
    ) -> Option<Result<LoadReport, LoadError>> {
        self.pending_load.then(|| self.load(dev))
    }

    /// Applies a batch of health changes: recompiles the pools that have a changed backend
    /// (and the pools using them as backup) and loads the result. `snapshot` is the checker's
    /// state after the changes.
    pub fn apply_health<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        changes: &[HealthChange],
        snapshot: &HealthSnapshot,
    ) -> Result<Applied, ControllerError> {
        self.stats.health_batches += 1;
        // Decided targets no longer need their assumption.
        self.assumed
            .retain(|k, _| snapshot.get(k).is_none_or(|s| s.health == Health::Unknown));
        let health = effective_health(&self.targets, snapshot, &self.assumed);
        self.apply_health_state(dev, changes, health)
    }

    /// Applies a per-(pool, instance) health state decided elsewhere than by the checker's
    /// snapshot (a health file; tests of members the checker does not probe), as
    /// [`Controller::apply_health`] does with the state it derives: recompiles the pools whose
    /// members changed and loads the result. `changes` are the decisions behind it, if any
    /// (their pools are recompiled, their latency recorded).
    pub fn apply_health_state<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        changes: &[HealthChange],
        health: HealthState,
    ) -> Result<Applied, ControllerError> {
        let pools = self.changed_pools(changes, &health);
        let mut changed: Vec<(Table, u32)> = Vec::new();
        for p in &pools {
            changed.extend(
                self.compiled
                    .recompile_pool(p, &health)
                    .map_err(compile_error)?,
            );
        }
        let changed_entries = changed.len();
        let symbols = &self.compiled.symbols;
        let mut turned_unhealthy: Vec<(u16, u16)> = Vec::new();
        // Only a recompiled pool has a member whose state changed ([`Controller::changed_pools`]
        // takes in per-pool and instance-wide entries): a pool of 65,536 members among a
        // thousand others costs its own look-ups, not everyone's.
        let look_at = pools.iter().filter_map(|p| symbols.pool_id(p));
        for pool_id in look_at {
            let pool = &symbols.pools[usize::from(pool_id)];
            let (was, now) = (self.health.in_pool(&pool.name), health.in_pool(&pool.name));
            for &b in &pool.members {
                let Some(name) = symbols.backend(b) else {
                    continue;
                };
                if was.get(name).healthy && !now.get(name).healthy {
                    turned_unhealthy.push((pool_id, b));
                }
            }
        }
        turned_unhealthy.sort_unstable();
        self.health = health;
        let mut applied = Applied {
            pools: pools.into_iter().collect(),
            changed_entries,
            load: LoadOutcome::NotNeeded,
            latencies: Vec::new(),
            active_at: None,
            turned_unhealthy,
        };
        if changed_entries == 0 && !self.pending_load {
            self.stats.health_noops += 1;
            return Ok(applied);
        }
        match self.load_with(dev, Some(&changed)) {
            Ok(report) => {
                let active_at = Instant::now();
                for c in changes {
                    let d = active_at.saturating_duration_since(c.decided_at);
                    self.stats.record_latency(d);
                    applied.latencies.push(d);
                }
                applied.active_at = Some(active_at);
                applied.load = LoadOutcome::Loaded(report);
            }
            Err(e) => applied.load = LoadOutcome::Failed(e),
        }
        Ok(applied)
    }

    /// The pools a health change recompiles: those of `changes`, and any pool whose member
    /// state moved without an event of its own in this batch (a snapshot newer than the
    /// events).
    fn changed_pools(&self, changes: &[HealthChange], health: &HealthState) -> BTreeSet<String> {
        let mut pools: BTreeSet<String> = changes.iter().map(|c| c.target.pool.clone()).collect();
        for (key, h) in &health.members {
            if self.health.members.get(key) != Some(h) {
                pools.insert(key.0.clone());
            }
        }
        for key in self.health.members.keys() {
            if !health.members.contains_key(key) {
                pools.insert(key.0.clone());
            }
        }
        // An instance-wide entry (a health file's `INSTANCE:`) holds in every pool of the
        // instance.
        let (was, now) = (&self.health.backends, &health.backends);
        for instance in was.keys().chain(now.keys()) {
            if was.get(instance) != now.get(instance) {
                pools.extend(self.compiled.pools_with_backend(instance));
            }
        }
        let symbols = &self.compiled.symbols;
        pools.retain(|p| symbols.pool_id(p).is_some());
        pools
    }

    /// The compile [`Controller::apply_health`] would load for `snapshot`, without touching
    /// the device or this controller: a fleet shares what those tables would pin before any
    /// host loads them (SPEC R15.2).
    pub fn preview_health(&self, snapshot: &HealthSnapshot) -> Result<Compiled, ControllerError> {
        let mut assumed = self.assumed.clone();
        assumed.retain(|k, _| snapshot.get(k).is_none_or(|s| s.health == Health::Unknown));
        let health = effective_health(&self.targets, snapshot, &assumed);
        let mut compiled = self.compiled.clone();
        for p in self.changed_pools(&[], &health) {
            compiled
                .recompile_pool(&p, &health)
                .map_err(compile_error)?;
        }
        Ok(compiled)
    }

    /// One refresh of the service LB policy (SPEC R6): feeds `live` (open connections per
    /// backend-service pool and backend) and the policy time `now` (seconds, monotonic) to
    /// every backend service ([`Compiled::rebalance`]; shares that move by less than
    /// `deadband` are not applied; at most `refill_budget` Maglev slots refilled, the most
    /// urgent services first, [`Compiled::rebalance_within`]) and loads the entries that
    /// changed, as
    /// [`Controller::apply_health`] does: a failed load keeps the previous tables serving and
    /// is retried (also by the next refresh).
    pub fn refresh_policy<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        live: &LiveLoad,
        now: f64,
        deadband: f64,
        refill_budget: u64,
    ) -> Result<PolicyApplied, ControllerError> {
        let r = self
            .compiled
            .rebalance_within(live, now, &self.health, deadband, refill_budget)
            .map_err(compile_error)?;
        let mut applied = PolicyApplied {
            pools: r.pools,
            changed_entries: r.changed.len(),
            load: LoadOutcome::NotNeeded,
            deferred: r.deferred,
        };
        if applied.changed_entries == 0 && !self.pending_load {
            return Ok(applied);
        }
        applied.load = match self.load_with(dev, Some(&r.changed)) {
            Ok(report) => LoadOutcome::Loaded(report),
            Err(e) => LoadOutcome::Failed(e),
        };
        Ok(applied)
    }

    /// The pool whose health applies to a connection of `rule` on `backend`: the rule's pool
    /// when the backend is one of its members, else its backup pool when the backend is a
    /// member there (the connection was chosen while the pool was failed over).
    pub fn connection_pool(&self, rule: u16, backend: u16) -> Option<u16> {
        let t = &self.compiled.tables;
        let symbols = &self.compiled.symbols;
        let rule = t.rules.get(usize::from(rule)).filter(|r| r.valid)?;
        let member = |pool: u16| {
            symbols
                .pools
                .get(usize::from(pool))
                .is_some_and(|p| p.members.contains(&backend))
        };
        if member(rule.pool) {
            return Some(rule.pool);
        }
        let entry = t.pools.get(usize::from(rule.pool))?;
        (entry.has_backup && member(entry.backup_pool)).then_some(entry.backup_pool)
    }

    /// Checks and compiles a new configuration under the current health, without touching the
    /// device. An error means the configuration is refused and nothing changed.
    pub fn prepare_reload(
        &self,
        config: Config,
        snapshot: &HealthSnapshot,
    ) -> Result<ReloadPlan, ControllerError> {
        self.prepare_reload_with_ids(config, snapshot, None)
    }

    /// [`Controller::prepare_reload`] with the rule and backend ids taken from `ids` (names by
    /// id) rather than from the tables serving: a fleet's publisher assigns them, so hosts
    /// with different histories hold the same tables (docs/fleet.md). Connections are
    /// renumbered to match as for any reload.
    pub fn prepare_reload_with_ids(
        &self,
        config: Config,
        snapshot: &HealthSnapshot,
        ids: Option<&Symbols>,
    ) -> Result<ReloadPlan, ControllerError> {
        let targets = targets_from_config(&config);
        for t in &targets {
            t.validate()?;
        }
        let health = effective_health(&targets, snapshot, &self.assumed);
        // Rules and backends that stay keep their ids (a flow's connection-table entry keeps
        // naming its backend across the flip).
        let previous = ids.unwrap_or(&self.compiled.symbols);
        let mut compiled =
            compile_after(&config, &health, &self.options, previous).map_err(compile_error)?;
        // The backend services that stay keep their live counts, drain state and policy time
        // (SPEC R6.3's 60 s do not restart, and the new tables are filled as loaded as the old).
        compiled
            .adopt_policy_state(&self.compiled, &health)
            .map_err(compile_error)?;
        // Connections the reload takes out of a backend service drain or end; a deleted
        // instance that drains keeps its backend entry (and id), as do the ones still draining
        // from earlier reloads.
        let drains = tracking::plan_reload_drains(&self.config, &self.compiled, &config, &compiled);
        let mut keep = drains.keep;
        for k in &self.kept {
            if !keep.iter().any(|n| n.id == k.id) {
                keep.push(k.clone());
            }
        }
        let kept = tracking::keep_backends(&mut compiled, &keep);
        let old = &self.compiled.symbols;
        let new = &compiled.symbols;
        let index = |names: &[String]| -> HashMap<String, u16> {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as u16))
                .collect()
        };
        let (new_backends, new_rules) = (index(&new.backends), index(&new.rules));
        // Same name but another address or MAC is another backend for the flows on it.
        let backend_map = old
            .backends
            .iter()
            .enumerate()
            .map(|(old_id, n)| {
                let id = *new_backends.get(n)?;
                let before = self.compiled.tables.backends.get(old_id)?;
                let after = compiled.tables.backends.get(usize::from(id))?;
                (before.addr == after.addr && before.mac == after.mac).then_some(id)
            })
            .collect();
        let rule_map = old
            .rules
            .iter()
            .map(|n| new_rules.get(n).copied())
            .collect();
        Ok(ReloadPlan {
            config,
            targets,
            compiled,
            health,
            backend_map,
            rule_map,
            drains: drains.pairs,
            kept,
        })
    }

    /// Loads a prepared configuration. On an error the previous configuration stays (and
    /// serves).
    pub fn commit_reload<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        plan: ReloadPlan,
    ) -> Result<LoadReport, ControllerError> {
        let ReloadPlan {
            config,
            targets,
            compiled,
            health,
            kept,
            ..
        } = plan;
        let previous = std::mem::replace(&mut self.compiled, compiled);
        let was_pending = self.pending_load;
        match self.load(dev) {
            Ok(report) => {
                self.config = config;
                self.health = health;
                let keep: BTreeSet<&TargetKey> = targets.iter().map(|t| &t.key).collect();
                self.assumed.retain(|k, _| keep.contains(k));
                self.targets = targets;
                self.kept = kept;
                self.stats.reloads += 1;
                Ok(report)
            }
            Err(e) => {
                self.compiled = previous;
                self.pending_load = was_pending;
                self.stats.reloads_refused += 1;
                Err(e.into())
            }
        }
    }

    /// Deleted instances whose backend entries stay while their connections drain.
    pub fn kept_backends(&self) -> &[KeptBackend] {
        &self.kept
    }

    /// Takes the kept backends whose connections no longer drain (`draining(id)` false) out of
    /// the tables and loads them; `None` when there is none.
    pub fn release_backends<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        draining: impl Fn(u16) -> bool,
    ) -> Option<Result<LoadReport, LoadError>> {
        let (stay, done): (Vec<KeptBackend>, Vec<KeptBackend>) = std::mem::take(&mut self.kept)
            .into_iter()
            .partition(|k| draining(k.id));
        self.kept = stay;
        if done.is_empty() {
            return None;
        }
        tracking::release_backends(&mut self.compiled, &done);
        Some(self.load(dev))
    }

    /// Counts a reload refused before [`Controller::commit_reload`].
    pub fn note_refused_reload(&mut self) {
        self.stats.reloads_refused += 1;
    }
}

/// The initial assumption for every target (see the module documentation).
fn initial_assumptions(
    compiled: &Compiled,
    serving: &Tables,
    generation: u32,
    targets: &[HealthTarget],
) -> HashMap<TargetKey, bool> {
    let same_layout = generation != 0
        && serving.backends == compiled.tables.backends
        && serving.rules == compiled.tables.rules
        && serving.vip == compiled.tables.vip;
    let symbols = &compiled.symbols;
    targets
        .iter()
        .map(|t| {
            let assumed = !same_layout || {
                let pool = symbols.pool_id(&t.key.pool).map(usize::from);
                let backend = symbols.backends.iter().position(|n| *n == t.key.backend);
                match (pool, backend) {
                    (Some(p), Some(b)) => {
                        let sym = &symbols.pools[p];
                        let failed_over = serving.pools.get(p).is_some_and(|e| e.failed_over);
                        let start = sym.own_base as usize;
                        let end = start + sym.own_size as usize;
                        !failed_over
                            && serving.maglev.get(start..end).is_some_and(|s| {
                                s.iter().any(|slot| usize::from(slot.backend) == b)
                            })
                    }
                    _ => true,
                }
            };
            (t.key.clone(), assumed)
        })
        .collect()
}

/// The compiler's health state for a configuration's targets: each target's decided health
/// from the snapshot, its assumption while it is `Unknown` (none: not healthy), one entry per
/// (pool, instance) as [`HealthSnapshot::to_health_state`] gives them.
pub fn effective_health(
    targets: &[HealthTarget],
    snapshot: &HealthSnapshot,
    assumed: &HashMap<TargetKey, bool>,
) -> HealthState {
    let mut statuses: Vec<TargetStatus> = targets
        .iter()
        .map(|t| {
            let mut s = match snapshot.get(&t.key) {
                Some(s) => s.clone(),
                None => TargetStatus {
                    target: t.clone(),
                    probe: t.probe_key(),
                    health: Health::Unknown,
                    weight: super::health::WeightReport::Missing,
                    consecutive_passes: 0,
                    consecutive_failures: 0,
                    changed_at: None,
                    last_probe: None,
                },
            };
            if s.health == Health::Unknown && assumed.get(&t.key).copied().unwrap_or(false) {
                s.health = Health::Healthy;
            }
            s
        })
        .collect();
    statuses.sort_by(|a, b| a.target.key.cmp(&b.target.key));
    HealthSnapshot {
        taken_at: snapshot.taken_at,
        targets: statuses,
    }
    .to_health_state()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::health::WeightReport;
    use nlb_driver::discovery::discover;
    use nlb_driver::model::ModelHandle;
    use nlb_hw::Profile;
    use std::net::IpAddr;

    pub(crate) const CONFIG: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
targetPools:
  - {name: web, region: r, instances: [a, b, c], healthChecks: [hc], backupPool: spare, failoverRatio: 0.4}
  - {name: spare, region: r, instances: [d], healthChecks: [hc]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
  - {name: d, ip: 192.0.2.4, zone: z, mac: '02:00:00:00:00:0d'}
httpHealthChecks:
  - {name: hc, checkIntervalSec: 1, timeoutSec: 1}
";

    pub(crate) fn config(text: &str) -> Config {
        let (config, d) = nlb_config::parse_config("t.yaml", text);
        assert!(d.is_empty(), "{d}");
        config
    }

    pub(crate) fn snapshot(config: &Config, states: &[(&str, &str, Health)]) -> HealthSnapshot {
        let mut targets: Vec<TargetStatus> = targets_from_config(config)
            .into_iter()
            .map(|t| {
                let health = states
                    .iter()
                    .find(|(p, b, _)| t.key.pool == *p && t.key.backend == *b)
                    .map_or(Health::Unknown, |s| s.2);
                TargetStatus {
                    probe: t.probe_key(),
                    target: t,
                    health,
                    weight: WeightReport::Missing,
                    consecutive_passes: 0,
                    consecutive_failures: 0,
                    changed_at: None,
                    last_probe: None,
                }
            })
            .collect();
        targets.sort_by(|a, b| a.target.key.cmp(&b.target.key));
        HealthSnapshot {
            taken_at: Instant::now(),
            targets,
        }
    }

    pub(crate) fn change(
        pool: &str,
        backend: &str,
        health: Health,
        decided_at: Instant,
    ) -> HealthChange {
        HealthChange {
            target: TargetKey::new(pool, backend),
            ip: IpAddr::from([192, 0, 2, 1]),
            previous: Health::Healthy,
            health,
            previous_weight: WeightReport::Missing,
            weight: WeightReport::Missing,
            decided_at,
            failure: None,
        }
    }

    /// The backend names in a pool's serving slice of the device's active bank.
    fn serving_backends(sim: &ModelHandle, c: &Controller, pool: &str) -> BTreeSet<String> {
        let dev = sim.lock();
        let ctrl_bank = c.loader().active_bank();
        let t = dev.bank(ctrl_bank);
        let id = c.compiled().symbols.pool_id(pool).unwrap();
        let p = t.pools[usize::from(id)];
        t.maglev[p.maglev_base as usize..(p.maglev_base + p.maglev_size) as usize]
            .iter()
            .map(|s| c.compiled().symbols.backends[usize::from(s.backend)].clone())
            .collect()
    }

    /// The snapshot of [`CONFIG`] where `a` of pool `web` is down and everyone else up.
    fn a_down(c: &Controller) -> HealthSnapshot {
        use Health::*;
        snapshot(
            c.config(),
            &[
                ("web", "a", Unhealthy),
                ("web", "b", Healthy),
                ("web", "c", Healthy),
                ("spare", "d", Healthy),
            ],
        )
    }

    fn names(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn started(text: &str, snap: &[(&str, &str, Health)]) -> (ModelHandle, Controller) {
        let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
        let mut dev = sim.clone();
        let info = discover(&mut dev).unwrap();
        let cfg = config(text);
        let s = snapshot(&cfg, snap);
        let (c, report) =
            Controller::start(&mut dev, &info, cfg, &s, LoaderOptions::default()).unwrap();
        assert_eq!(report.generation, 1);
        (sim, c)
    }

    /// A health change that loads says when its tables became active: the moment each
    /// decision's latency ends.
    #[test]
    fn a_loaded_health_change_says_when_its_tables_became_active() {
        use Health::*;
        let (sim, mut c) = started(CONFIG, &[]);
        let mut dev = sim.clone();
        let s = a_down(&c);
        let t0 = Instant::now();
        let a = c
            .apply_health(&mut dev, &[change("web", "a", Unhealthy, t0)], &s)
            .unwrap();
        assert!(matches!(a.load, LoadOutcome::Loaded(_)), "{a:?}");
        let active = a.active_at.expect("loaded: active at the flip");
        assert!(active >= t0 && a.latencies == vec![active - t0]);
    }

    #[test]
    fn health_changes_reach_the_device_by_the_spec_rules() {
        use Health::*;
        // Fresh device: everyone assumed healthy until decided.
        let (sim, mut c) = started(CONFIG, &[]);
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["a", "b", "c"]));
        let mut dev = sim.clone();
        let t0 = Instant::now();
        let all_up = [
            ("web", "a", Healthy),
            ("web", "b", Healthy),
            ("web", "c", Healthy),
            ("spare", "d", Healthy),
        ];
        let a = c
            .apply_health(&mut dev, &[], &snapshot(c.config(), &all_up))
            .unwrap();
        assert!(
            matches!(a.load, LoadOutcome::NotNeeded),
            "nothing changes: {a:?}"
        );
        assert_eq!(c.assumed_targets(), 0);

        // a down: a's slots move to b and c.
        let s = a_down(&c);
        let a = c
            .apply_health(&mut dev, &[change("web", "a", Unhealthy, t0)], &s)
            .unwrap();
        assert!(matches!(a.load, LoadOutcome::Loaded(_)), "{a:?}");
        assert_eq!(a.pools, vec!["web".to_string()]);
        assert_eq!(a.turned_unhealthy, vec![(1, 0)], "(pool web, backend a)");
        assert_eq!(a.latencies.len(), 1);
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["b", "c"]));

        // b down too: 1 of 3 healthy = 0.33 ≤ 0.4 → the backup serves.
        let s = snapshot(
            c.config(),
            &[
                ("web", "a", Unhealthy),
                ("web", "b", Unhealthy),
                ("web", "c", Healthy),
                ("spare", "d", Healthy),
            ],
        );
        c.apply_health(&mut dev, &[change("web", "b", Unhealthy, t0)], &s)
            .unwrap();
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["d"]));

        // The backup fails as well: the primary serves its healthy member.
        let s = snapshot(
            c.config(),
            &[
                ("web", "a", Unhealthy),
                ("web", "b", Unhealthy),
                ("web", "c", Healthy),
                ("spare", "d", Unhealthy),
            ],
        );
        c.apply_health(&mut dev, &[change("spare", "d", Unhealthy, t0)], &s)
            .unwrap();
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["c"]));

        // Everyone down: fail open over all members of the primary.
        let s = snapshot(
            c.config(),
            &[
                ("web", "a", Unhealthy),
                ("web", "b", Unhealthy),
                ("web", "c", Unhealthy),
                ("spare", "d", Unhealthy),
            ],
        );
        c.apply_health(&mut dev, &[change("web", "c", Unhealthy, t0)], &s)
            .unwrap();
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["a", "b", "c"]));
        assert_eq!(c.stats().decision_latency.count, 4);
        assert_eq!(c.loader().generation(), 5);
    }

    #[test]
    fn a_restart_keeps_what_the_device_serves() {
        use Health::*;
        let (sim, mut c) = started(CONFIG, &[]);
        let mut dev = sim.clone();
        let s = a_down(&c);
        c.apply_health(
            &mut dev,
            &[change("web", "a", Unhealthy, Instant::now())],
            &s,
        )
        .unwrap();
        let before = sim.lock().bank(c.loader().active_bank()).clone();
        drop(c);
        // A new controller on the same device, with nothing decided yet.
        let info = discover(&mut dev).unwrap();
        let cfg = config(CONFIG);
        let s = snapshot(&cfg, &[]);
        let (c, report) =
            Controller::start(&mut dev, &info, cfg, &s, LoaderOptions::default()).unwrap();
        assert_eq!(report.generation, 3);
        assert_eq!(
            sim.lock().bank(c.loader().active_bank()),
            &before,
            "the restart changed the tables"
        );
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["b", "c"]));
    }

    #[test]
    fn a_bad_reload_is_refused_and_a_good_one_keeps_ids() {
        use Health::*;
        let (sim, mut c) = started(CONFIG, &[]);
        let mut dev = sim.clone();
        let s = snapshot(
            c.config(),
            &[
                ("web", "a", Healthy),
                ("web", "b", Healthy),
                ("web", "c", Healthy),
                ("spare", "d", Healthy),
            ],
        );
        c.apply_health(&mut dev, &[], &s).unwrap();
        // A capacity problem the parser cannot see: 17 rules on one VIP and protocol (a VIP
        // entry has 16 port-range slots).
        let mut bad = CONFIG.to_string();
        for i in 1..=16 {
            bad = bad.replace(
                "targetPools:",
                &format!("  - {{name: w{i}, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '{}', target: web}}\ntargetPools:", 8000 + i),
            );
        }
        let err = c.prepare_reload(config(&bad), &s).unwrap_err();
        assert!(matches!(err, ControllerError::Compile(_)), "{err}");
        assert!(!err.one_line().contains('\n'));
        assert_eq!(c.loader().generation(), 1, "nothing loaded");

        // Add instance `ab` (in name order it would come between `a` and `b`, moving b, c and
        // d up by one): the ones that stay keep their ids, `ab` takes the next free one.
        let good = CONFIG
            .replace("instances: [a, b, c]", "instances: [ab, a, b, c]")
            .replace("instances:\n  - {name: a,", "instances:\n  - {name: ab, ip: 192.0.2.9, zone: z, mac: '02:00:00:00:00:09'}\n  - {name: a,");
        let plan = c.prepare_reload(config(&good), &s).unwrap();
        assert_eq!(plan.backend_map, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(plan.rule_map, vec![Some(0)]);
        assert_eq!(plan.compiled().symbols.backends, ["a", "b", "c", "d", "ab"]);
        c.commit_reload(&mut dev, plan).unwrap();
        // The new member is Unknown: it earns traffic by passing its checks.
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["a", "b", "c"]));
        let s = snapshot(
            c.config(),
            &[
                ("web", "ab", Healthy),
                ("web", "a", Healthy),
                ("web", "b", Healthy),
                ("web", "c", Healthy),
                ("spare", "d", Healthy),
            ],
        );
        c.apply_health(
            &mut dev,
            &[change("web", "ab", Healthy, Instant::now())],
            &s,
        )
        .unwrap();
        assert_eq!(
            serving_backends(&sim, &c, "web"),
            names(&["a", "ab", "b", "c"])
        );
    }

    /// The shared instance `a` is in `web` (checked by `hc`), in `api` (checked by `hc-api`)
    /// and in `batch` (no health check).
    const SHARED: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
  - {name: api, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '8080', target: api}
  - {name: batch, IPAddress: 203.0.113.81, IPProtocol: TCP, target: batch}
targetPools:
  - {name: web, region: r, instances: [a, b, c], healthChecks: [hc], backupPool: spare, failoverRatio: 0.4}
  - {name: spare, region: r, instances: [d], healthChecks: [hc]}
  - {name: api, region: r, instances: [a, b], healthChecks: [hc-api]}
  - {name: batch, region: r, instances: [a, b]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
  - {name: d, ip: 192.0.2.4, zone: z, mac: '02:00:00:00:00:0d'}
httpHealthChecks:
  - {name: hc, checkIntervalSec: 1, timeoutSec: 1}
  - {name: hc-api, port: 8080, checkIntervalSec: 1, timeoutSec: 1}
";

    /// SPEC R5.5: failing `api`'s check takes `a` out of `api` only; `web` keeps it and
    /// `batch` (no health check) keeps every member.
    #[test]
    fn health_is_decided_per_pool() {
        use Health::*;
        let (sim, mut c) = started(SHARED, &[]);
        let mut dev = sim.clone();
        let s = snapshot(
            c.config(),
            &[
                ("web", "a", Healthy),
                ("web", "b", Healthy),
                ("web", "c", Healthy),
                ("spare", "d", Healthy),
                ("api", "a", Unhealthy),
                ("api", "b", Healthy),
            ],
        );
        let applied = c
            .apply_health(
                &mut dev,
                &[change("api", "a", Unhealthy, Instant::now())],
                &s,
            )
            .unwrap();
        assert_eq!(applied.pools, vec!["api".to_string()]);
        let api = c.compiled().symbols.pool_id("api").unwrap();
        assert_eq!(applied.turned_unhealthy, vec![(api, 0)]);
        assert_eq!(serving_backends(&sim, &c, "api"), names(&["b"]));
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["a", "b", "c"]));
        assert_eq!(serving_backends(&sim, &c, "batch"), names(&["a", "b"]));
        // A connection of rule `web` on `a` is judged by web's health, one of `api` by api's.
        let rule = |n: &str| {
            c.compiled()
                .symbols
                .rules
                .iter()
                .position(|r| r == n)
                .unwrap() as u16
        };
        let web = c.compiled().symbols.pool_id("web").unwrap();
        assert_eq!(c.connection_pool(rule("web"), 0), Some(web));
        assert_eq!(c.connection_pool(rule("api"), 0), Some(api));
        // d is only reached through web's backup.
        let spare = c.compiled().symbols.pool_id("spare").unwrap();
        assert_eq!(c.connection_pool(rule("web"), 3), Some(spare));
        assert_eq!(c.connection_pool(rule("api"), 3), None);
    }

    /// A reload that adds a serving instance to a new pool leaves its old pools alone while
    /// the new pool's check has not decided: before SPEC R5.5 the undecided target made the
    /// instance unhealthy everywhere and pushed `web` (2 of 3 healthy, ratio 0.4) into failover.
    #[test]
    fn a_new_pool_does_not_move_an_instance_out_of_its_old_pools() {
        use Health::*;
        let (sim, mut c) = started(SHARED, &[]);
        let mut dev = sim.clone();
        let decided = [
            ("web", "a", Healthy),
            ("web", "b", Unhealthy),
            ("web", "c", Healthy),
            ("spare", "d", Healthy),
            ("api", "a", Healthy),
            ("api", "b", Healthy),
        ];
        let s = snapshot(c.config(), &decided);
        c.apply_health(&mut dev, &[], &s).unwrap();
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["a", "c"]));
        let new = config(
            &SHARED
                .replace(
                    "  - {name: batch, region: r, instances: [a, b]}",
                    "  - {name: batch, region: r, instances: [a, b]}\n  - {name: extra, region: r, instances: [a], healthChecks: [hc-api]}",
                )
                .replace(
                    "target: batch}",
                    "target: batch}\n  - {name: extra, IPAddress: 203.0.113.82, IPProtocol: TCP, target: extra}",
                ),
        );
        // The checker's snapshot after the reload: the new target is not decided yet.
        let s = snapshot(&new, &decided);
        let plan = c.prepare_reload(new, &s).unwrap();
        c.commit_reload(&mut dev, plan).unwrap();
        let web = usize::from(c.compiled().symbols.pool_id("web").unwrap());
        assert!(
            !c.compiled().tables.pools[web].failed_over,
            "{}",
            c.compiled().pools[web].why
        );
        assert_eq!(serving_backends(&sim, &c, "web"), names(&["a", "c"]));
        assert_eq!(serving_backends(&sim, &c, "api"), names(&["a", "b"]));
    }

    /// Ids a reload kept (not in name order any more) are recovered from the device by a
    /// restarted controller: the restart rewrites nothing, so the NIC's connection table
    /// keeps naming the right backends.
    #[test]
    fn a_restart_after_reloads_keeps_the_ids_the_device_serves() {
        let (sim, mut c) = started(CONFIG, &[]);
        let mut dev = sim.clone();
        let with_ab = CONFIG
            .replace("instances: [a, b, c]", "instances: [ab, a, b, c]")
            .replace("instances:\n  - {name: a,", "instances:\n  - {name: ab, ip: 192.0.2.9, zone: z, mac: '02:00:00:00:00:09'}\n  - {name: a,");
        let plan = c
            .prepare_reload(config(&with_ab), &snapshot(&config(&with_ab), &[]))
            .unwrap();
        c.commit_reload(&mut dev, plan).unwrap();
        assert_eq!(c.compiled().symbols.backends, ["a", "b", "c", "d", "ab"]);
        let before = sim.lock().bank(c.loader().active_bank()).clone();
        let generation = c.loader().generation();
        drop(c);
        let info = discover(&mut dev).unwrap();
        let cfg = config(&with_ab);
        let s = snapshot(&cfg, &[]);
        let (c, report) =
            Controller::start(&mut dev, &info, cfg, &s, LoaderOptions::default()).unwrap();
        assert_eq!(c.compiled().symbols.backends, ["a", "b", "c", "d", "ab"]);
        // (The load writes the other bank, which still holds the tables before the reload.)
        assert_eq!(report.generation, generation + 1);
        assert_eq!(
            sim.lock().bank(c.loader().active_bank()),
            &before,
            "the restart changed the tables"
        );
    }
}
