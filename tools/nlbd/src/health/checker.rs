//! The running health checker: one tokio task per distinct probe, fed by any number of
//! targets; health changes go to a coalescing event queue and to snapshots.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use super::config::{HealthError, HealthTarget, ProbeKey, TargetKey};
use super::metrics::{Metrics, ProbeMetrics};
use super::probe::{ProbeFailure, ProbeOutcome, ProbeRequest};
use super::socket::SocketPool;
use super::state::{pool_weights, Health, MemberView, PoolWeights, Tracker, Verdict, WeightReport};

/// How long an ended probe waits for the backend's FIN before closing its own end first.
const FIN_GRACE: Duration = Duration::from_millis(50);

/// Idle probe sockets kept per address family at most.
const IDLE_SOCKETS: usize = 256;

/// Tuning of the checker as a whole (the per-target knobs are in [`Check`](super::Check)).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckerOptions {
    /// Probes running at once at most; more wait for a slot before their deadline starts.
    /// Bounds sockets (file descriptors) when many backends hang until their timeout.
    pub max_in_flight: usize,
    /// Each round starts up to this fraction of the interval after its slot, at random, so
    /// probes that share an interval do not move in lockstep (their first round starts at a
    /// random point of the first interval). 0 disables the per-round part.
    pub jitter: f64,
    /// End every probe connection with a reset (SO_LINGER 0), also when the backend keeps its
    /// end open after the response (it then sees `ECONNRESET`). Off by default: a probe then
    /// ends with a reset only once the backend has closed its end (its application can no
    /// longer see it; no TIME_WAIT socket on either side) and with a FIN otherwise.
    pub close_with_reset: bool,
}

impl Default for CheckerOptions {
    fn default() -> Self {
        CheckerOptions {
            max_in_flight: 4096,
            jitter: 0.1,
            close_with_reset: false,
        }
    }
}

/// One decided change of a target's health or weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    /// Pool and backend.
    pub target: TargetKey,
    /// Backend IP.
    pub ip: IpAddr,
    /// State the consumer saw last (the previous event's `health`, or `Unknown`).
    pub previous: Health,
    /// New state.
    pub health: Health,
    /// Weight report before.
    pub previous_weight: WeightReport,
    /// Weight report now.
    pub weight: WeightReport,
    /// When the deciding probe finished: the start of the decision-to-table-active latency.
    pub decided_at: Instant,
    /// The deciding probe's failure, when it failed.
    pub failure: Option<ProbeFailure>,
}

/// The status of one target at the time of a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetStatus {
    /// The target as configured.
    pub target: HealthTarget,
    /// The probe it shares.
    pub probe: ProbeKey,
    /// Decided health.
    pub health: Health,
    /// Last weight report.
    pub weight: WeightReport,
    /// Consecutive passes this target counted.
    pub consecutive_passes: u32,
    /// Consecutive failures this target counted.
    pub consecutive_failures: u32,
    /// When the last transition was decided.
    pub changed_at: Option<Instant>,
    /// The probe's last result (shared with every target of the probe).
    pub last_probe: Option<ProbeOutcome>,
}

/// Every target's status, sorted by (pool, backend).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthSnapshot {
    /// When it was taken.
    pub taken_at: Instant,
    /// Targets sorted by key.
    pub targets: Vec<TargetStatus>,
}

impl HealthSnapshot {
    /// The status of one target.
    pub fn get(&self, key: &TargetKey) -> Option<&TargetStatus> {
        self.targets
            .binary_search_by(|t| t.target.key.cmp(key))
            .ok()
            .map(|i| &self.targets[i])
    }

    /// The members of one pool, in backend-name order.
    pub fn pool<'a>(&'a self, pool: &'a str) -> impl Iterator<Item = &'a TargetStatus> + 'a {
        self.targets
            .iter()
            .filter(move |t| t.target.key.pool == pool)
    }

    /// New-connection weights of one pool by SPEC R5.4 (`None` for an unknown pool).
    pub fn pool_weights(&self, pool: &str) -> Option<PoolWeights> {
        let members: Vec<&TargetStatus> = self.pool(pool).collect();
        let first = members.first()?;
        let views: Vec<MemberView<'_>> = members
            .iter()
            .map(|t| MemberView {
                backend: &t.target.key.backend,
                health: t.health,
                weight: t.weight,
            })
            .collect();
        Some(pool_weights(first.target.weighted, &views))
    }
}

/// What [`HealthChecker::set_targets`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Targets that were not there before.
    pub added: usize,
    /// Targets no longer configured.
    pub removed: usize,
    /// Targets whose check changed (state kept).
    pub changed: usize,
    /// Targets left exactly as they were.
    pub unchanged: usize,
    /// Probe tasks started.
    pub probes_started: usize,
    /// Probe tasks stopped.
    pub probes_stopped: usize,
}

/// Receives the health changes of one [`HealthChecker`], in batches.
///
/// Changes queue per target and coalesce: a consumer that falls behind gets each target's
/// latest state once (with the state it saw before as `previous`), so the queue never holds
/// more than one entry per target and nothing decided is lost.
#[derive(Debug)]
pub struct HealthEvents {
    shared: Arc<Shared>,
}

impl HealthEvents {
    /// Waits for changes and returns all pending ones, oldest decision first; `None` once the
    /// checker is dropped and nothing is pending.
    pub async fn recv(&mut self) -> Option<Vec<HealthChange>> {
        loop {
            // Register interest before looking, so a change pushed in between still wakes us.
            let notified = self.shared.notify.notified();
            {
                let mut pending = lock(&self.shared.pending);
                if !pending.changes.is_empty() {
                    return Some(drain(&mut pending));
                }
                if pending.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// All pending changes without waiting (possibly none).
    pub fn try_recv(&mut self) -> Vec<HealthChange> {
        drain(&mut lock(&self.shared.pending))
    }
}

fn drain(pending: &mut Pending) -> Vec<HealthChange> {
    let mut out: Vec<HealthChange> = pending.changes.drain().map(|(_, c)| c).collect();
    out.sort_by(|a, b| {
        a.decided_at
            .cmp(&b.decided_at)
            .then_with(|| a.target.cmp(&b.target))
    });
    out
}

/// Probes health checks (HTTP, HTTPS, TCP) and decides backend health (SPEC R5).
///
/// Create it inside a tokio runtime, give it targets with [`set_targets`](Self::set_targets)
/// (again on every config reload), and read changes from the [`HealthEvents`] returned with
/// it or poll [`snapshot`](Self::snapshot). Dropping it stops every probe.
#[derive(Debug)]
pub struct HealthChecker {
    shared: Arc<Shared>,
    runtime: Handle,
    registry: Mutex<Registry>,
    own_thread: Option<OwnThread>,
}

/// The thread of a checker made by [`HealthChecker::on_own_thread`]: it runs the runtime
/// until `stop` is dropped.
#[derive(Debug)]
struct OwnThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for OwnThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // Shutting the runtime down only drops the probe tasks: quick. (Never join from
            // the thread itself, should the checker be dropped by one of its own tasks.)
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    metrics: Metrics,
    sockets: SocketPool,
    permits: Semaphore,
    jitter: f64,
    close_with_reset: bool,
    pending: Mutex<Pending>,
    notify: Notify,
}

#[derive(Debug, Default)]
struct Pending {
    changes: HashMap<TargetKey, HealthChange>,
    closed: bool,
}

impl Shared {
    fn publish(&self, change: HealthChange) {
        let mut pending = lock(&self.pending);
        let merged = match pending.changes.remove(&change.target) {
            Some(older) => HealthChange {
                previous: older.previous,
                previous_weight: older.previous_weight,
                ..change
            },
            None => change,
        };
        // A flap the consumer never saw (healthy, unhealthy, healthy again) is no change.
        if merged.previous != merged.health || merged.previous_weight != merged.weight {
            pending.changes.insert(merged.target.clone(), merged);
        }
        drop(pending);
        self.notify.notify_one();
    }
}

#[derive(Debug, Default)]
struct Registry {
    targets: HashMap<TargetKey, ProbeKey>,
    probes: HashMap<ProbeKey, RunningProbe>,
}

#[derive(Debug)]
struct RunningProbe {
    state: Arc<ProbeState>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct ProbeState {
    request: ProbeRequest,
    inner: Mutex<ProbeInner>,
    reconfigured: Notify,
}

#[derive(Debug)]
struct ProbeInner {
    subscribers: BTreeMap<TargetKey, Subscriber>,
    /// Shortest interval of the subscribers: the probe's period.
    interval: Duration,
    /// Longest timeout of the subscribers: the probe's deadline (each target judges with its own).
    timeout: Duration,
    last: Option<ProbeOutcome>,
}

#[derive(Debug)]
struct Subscriber {
    target: HealthTarget,
    tracker: Tracker,
    last_taken: Option<Instant>,
}

impl ProbeInner {
    fn retime(&mut self) {
        let checks = self.subscribers.values().map(|s| &s.target.check);
        self.interval = checks
            .clone()
            .map(|c| c.interval)
            .min()
            .unwrap_or(Duration::from_secs(5));
        self.timeout = checks
            .map(|c| c.timeout)
            .max()
            .unwrap_or(Duration::from_secs(5));
    }
}

impl ProbeState {
    fn timing(&self) -> (Duration, Duration) {
        let inner = lock(&self.inner);
        (inner.interval, inner.timeout)
    }

    /// Feeds one probe result to every subscriber that is due for one.
    fn apply(&self, outcome: &ProbeOutcome, shared: &Shared) {
        let mut inner = lock(&self.inner);
        inner.last = Some(*outcome);
        if let Err(failure) = outcome.result {
            if !failure.is_backend_failure() {
                tracing::warn!(backend = %self.request.addr(), %failure, "health probe not run");
                return;
            }
        }
        let (probe_interval, probe_timeout) = (inner.interval, inner.timeout);
        let at = outcome.finished_at;
        for sub in inner.subscribers.values_mut() {
            // A target with a longer interval than the probe's takes every n-th result.
            let check = &sub.target.check;
            let due = match sub.last_taken {
                None => true,
                Some(last) => {
                    at.saturating_duration_since(last)
                        >= check.interval.saturating_sub(probe_interval / 2)
                }
            };
            if !due {
                continue;
            }
            sub.last_taken = Some(at);
            // The probe ran under the longest timeout of its targets; a target with a shorter
            // one fails a pass that came too late for it.
            let in_time = check.timeout >= probe_timeout || outcome.latency <= check.timeout;
            let verdict = match outcome.result {
                Ok(pass) if in_time => Verdict::Pass(pass.weight),
                _ => Verdict::Fail,
            };
            let previous_weight = sub.tracker.weight();
            if let Some(t) = sub.tracker.observe(verdict, at) {
                let failure = match (verdict, outcome.result) {
                    (Verdict::Fail, Err(f)) => Some(f),
                    _ => None,
                };
                tracing::info!(
                    target_key = %sub.target.key,
                    ip = %sub.target.ip,
                    from = %t.from,
                    to = %t.to,
                    weight = ?t.weight,
                    failure = failure.map(|f| f.to_string()),
                    "health changed"
                );
                shared.publish(HealthChange {
                    target: sub.target.key.clone(),
                    ip: sub.target.ip,
                    previous: t.from,
                    health: t.to,
                    previous_weight,
                    weight: t.weight,
                    decided_at: at,
                    failure,
                });
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind; keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn random_fraction_of(d: Duration, fraction: f64) -> Duration {
    if fraction <= 0.0 || d.is_zero() {
        return Duration::ZERO;
    }
    d.mul_f64(fraction * rand::random_range(0.0..1.0))
}

async fn run_probe(state: Arc<ProbeState>, shared: Arc<Shared>) {
    let (interval, _) = state.timing();
    // The first round at a random point of the first interval spreads probes evenly.
    let mut slot = Instant::now() + random_fraction_of(interval, 1.0);
    let mut last_start: Option<Instant> = None;
    // One timer and one notification registration for the task's whole life, re-armed in
    // place each round.
    let mut sleep = pin!(tokio::time::sleep_until(slot.into()));
    let mut reconfigured = pin!(state.reconfigured.notified());
    loop {
        loop {
            tokio::select! {
                () = &mut sleep => break,
                () = &mut reconfigured => {
                    reconfigured.set(state.reconfigured.notified());
                    // A shorter interval takes effect now rather than after the old one.
                    let (interval, _) = state.timing();
                    let now = Instant::now();
                    let sooner = match last_start {
                        Some(started) => started + interval,
                        None => now + random_fraction_of(interval, 1.0),
                    };
                    if sooner < sleep.deadline().into_std() {
                        slot = sooner.max(now);
                        sleep.as_mut().reset(slot.into());
                    }
                }
            }
        }
        let Ok(permit) = shared.permits.acquire().await else {
            return;
        };
        let (interval, timeout) = state.timing();
        last_start = Some(Instant::now());
        let (outcome, ending) = {
            let _in_flight = shared.metrics.in_flight();
            state.request.run_with(timeout, Some(&shared.sockets)).await
        };
        shared.metrics.probe_finished(&outcome);
        state.apply(&outcome, &shared);
        if let Some(ending) = ending {
            // The backend's FIN normally follows the response at once; give it a moment.
            ending
                .end(Some(&shared.sockets), FIN_GRACE.min(interval / 4))
                .await;
        }
        drop(permit);

        slot += interval;
        if slot < outcome.finished_at {
            // Fell behind (waited for a slot): start again from now instead of bursting.
            slot = outcome.finished_at;
        }
        sleep
            .as_mut()
            .reset((slot + random_fraction_of(interval, shared.jitter)).into());
    }
}

/// What a [`HealthChecker::set_targets`] call changes as it goes.
#[derive(Default)]
struct Reload {
    summary: ReloadSummary,
    /// Probes whose subscribers changed.
    touched: HashSet<ProbeKey>,
    /// The trackers of targets moving to another probe.
    moving: HashMap<TargetKey, Tracker>,
}

/// Probes whose subscribers changed: retimed, and stopped when none is left.
fn retime(registry: &mut Registry, touched: HashSet<ProbeKey>, summary: &mut ReloadSummary) {
    for probe_key in touched {
        let Some(running) = registry.probes.get(&probe_key) else {
            continue;
        };
        let (empty, interval_changed) = {
            let mut inner = lock(&running.state.inner);
            let before = inner.interval;
            inner.retime();
            (inner.subscribers.is_empty(), inner.interval != before)
        };
        if empty {
            if let Some(running) = registry.probes.remove(&probe_key) {
                running.task.abort();
                summary.probes_stopped += 1;
            }
        } else if interval_changed {
            running.state.reconfigured.notify_one();
        }
    }
}

impl HealthChecker {
    /// A checker with no targets, running on the current tokio runtime.
    pub fn new(options: CheckerOptions) -> Result<(Self, HealthEvents), HealthError> {
        let runtime = Handle::try_current().map_err(|e| HealthError::NoRuntime(e.to_string()))?;
        Ok(Self::with_runtime(runtime, options))
    }

    /// A checker with no targets whose probes run on a thread of their own (`nlb-health`),
    /// in a current-thread tokio runtime that stops when the checker is dropped; callable from
    /// anywhere, inside a runtime or not.
    ///
    /// This is the cheapest way to run many probes: a multi-thread runtime's work stealing and
    /// cross-thread wake-ups cost 10–20% more CPU per probe than one thread doing it all (see
    /// the benchmark in `docs/health-checks.md`). [`HealthEvents`] can be awaited on any
    /// runtime.
    pub fn on_own_thread(options: CheckerOptions) -> Result<(Self, HealthEvents), HealthError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HealthError::Thread(e.to_string()))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("nlb-health".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| HealthError::Thread(e.to_string()))?;
        let (mut checker, events) = Self::with_runtime(handle, options);
        checker.own_thread = Some(OwnThread {
            stop: Some(stop),
            thread: Some(thread),
        });
        Ok((checker, events))
    }

    /// A checker with no targets whose probes run on `runtime`.
    pub fn with_runtime(runtime: Handle, options: CheckerOptions) -> (Self, HealthEvents) {
        let shared = Arc::new(Shared {
            metrics: Metrics::new(),
            // Enough for the probes that finish at about the same time; each idle socket
            // holds a descriptor.
            sockets: SocketPool::new(options.max_in_flight.clamp(1, IDLE_SOCKETS)),
            permits: Semaphore::new(options.max_in_flight.clamp(1, Semaphore::MAX_PERMITS)),
            jitter: options.jitter.clamp(0.0, 0.5),
            close_with_reset: options.close_with_reset,
            pending: Mutex::new(Pending::default()),
            notify: Notify::new(),
        });
        let events = HealthEvents {
            shared: Arc::clone(&shared),
        };
        let checker = HealthChecker {
            shared,
            runtime,
            registry: Mutex::new(Registry::default()),
            own_thread: None,
        };
        (checker, events)
    }

    /// Replaces the target set (startup and every config reload).
    ///
    /// The whole set is validated first; on an error nothing changes. Targets that stay keep
    /// their state, counts and probe; a target whose probe key (what goes on the wire) changed
    /// keeps its decided state and weight but counts afresh on the new probe; new targets
    /// start [`Health::Unknown`]. Probes no target needs any more stop; probes of targets that
    /// did not change are not touched.
    pub fn set_targets(&self, targets: Vec<HealthTarget>) -> Result<ReloadSummary, HealthError> {
        let mut seen = HashSet::with_capacity(targets.len());
        for t in &targets {
            t.validate()?;
            if !seen.insert(&t.key) {
                return Err(HealthError::Duplicate(t.key.clone()));
            }
        }
        let mut reload = Reload::default();
        let mut registry = lock(&self.registry);
        let wanted: HashMap<TargetKey, (HealthTarget, ProbeKey)> = targets
            .into_iter()
            .map(|t| {
                let pk = t.probe_key();
                (t.key.clone(), (t, pk))
            })
            .collect();
        self.detach(&mut registry, &wanted, &mut reload);
        for (key, (target, probe_key)) in wanted {
            self.attach(&mut registry, key, target, probe_key, &mut reload)?;
        }
        retime(&mut registry, reload.touched, &mut reload.summary);
        let summary = reload.summary;
        tracing::info!(
            ?summary,
            probes = registry.probes.len(),
            "health targets set"
        );
        Ok(summary)
    }

    /// Removed targets, and targets moving to another probe (their tracker moves along, in
    /// `reload.moving`), leave their probes.
    fn detach(
        &self,
        registry: &mut Registry,
        wanted: &HashMap<TargetKey, (HealthTarget, ProbeKey)>,
        reload: &mut Reload,
    ) {
        let current: Vec<(TargetKey, ProbeKey)> = registry
            .targets
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        for (key, old_probe) in current {
            let stays_on_probe = wanted.get(&key).is_some_and(|(_, pk)| *pk == old_probe);
            if stays_on_probe {
                continue;
            }
            let Some(running) = registry.probes.get(&old_probe) else {
                continue;
            };
            let sub = lock(&running.state.inner).subscribers.remove(&key);
            registry.targets.remove(&key);
            reload.touched.insert(old_probe);
            if wanted.contains_key(&key) {
                if let Some(sub) = sub {
                    reload.moving.insert(key, sub.tracker);
                }
            } else {
                reload.summary.removed += 1;
                lock(&self.shared.pending).changes.remove(&key);
            }
        }
    }

    /// A wanted target on its probe: unchanged, reconfigured in place, or subscribed (with
    /// the tracker it brings from another probe, or a new one), the probe started if it is
    /// not running.
    fn attach(
        &self,
        registry: &mut Registry,
        key: TargetKey,
        target: HealthTarget,
        probe_key: ProbeKey,
        reload: &mut Reload,
    ) -> Result<(), HealthError> {
        let check = &target.check;
        if let Some(running) = registry.probes.get(&probe_key) {
            let mut inner = lock(&running.state.inner);
            if let Some(sub) = inner.subscribers.get_mut(&key) {
                if sub.target == target {
                    reload.summary.unchanged += 1;
                } else {
                    sub.tracker.reconfigure(
                        target.weighted,
                        check.healthy_threshold,
                        check.unhealthy_threshold,
                        false,
                    );
                    sub.target = target;
                    reload.summary.changed += 1;
                    reload.touched.insert(probe_key);
                }
                return Ok(());
            }
        }
        let tracker = match reload.moving.remove(&key) {
            Some(mut tracker) => {
                tracker.reconfigure(
                    target.weighted,
                    check.healthy_threshold,
                    check.unhealthy_threshold,
                    true,
                );
                reload.summary.changed += 1;
                tracker
            }
            None => {
                reload.summary.added += 1;
                Tracker::new(
                    target.weighted,
                    check.healthy_threshold,
                    check.unhealthy_threshold,
                )
            }
        };
        let subscriber = Subscriber {
            target,
            tracker,
            last_taken: None,
        };
        let Some(running) = registry.probes.get(&probe_key) else {
            return self.start_probe(registry, key, probe_key, subscriber, &mut reload.summary);
        };
        lock(&running.state.inner)
            .subscribers
            .insert(key.clone(), subscriber);
        registry.targets.insert(key, probe_key.clone());
        reload.touched.insert(probe_key);
        Ok(())
    }

    /// A new probe with its first subscriber.
    fn start_probe(
        &self,
        registry: &mut Registry,
        key: TargetKey,
        probe_key: ProbeKey,
        subscriber: Subscriber,
        summary: &mut ReloadSummary,
    ) -> Result<(), HealthError> {
        let request =
            ProbeRequest::new(&probe_key).map(|r| r.close_with_reset(self.shared.close_with_reset));
        let Some(request) = request else {
            // validate() accepted path and host, so this cannot happen; refuse rather than
            // panic.
            return Err(HealthError::Invalid {
                target: key,
                field: "requestPath",
                why: "cannot be sent".into(),
            });
        };
        let state = Arc::new(ProbeState {
            request,
            inner: Mutex::new(ProbeInner {
                subscribers: BTreeMap::new(),
                interval: Duration::from_secs(5),
                timeout: Duration::from_secs(5),
                last: None,
            }),
            reconfigured: Notify::new(),
        });
        {
            let mut inner = lock(&state.inner);
            inner.subscribers.insert(key.clone(), subscriber);
            inner.retime();
        }
        let task = self
            .runtime
            .spawn(run_probe(Arc::clone(&state), Arc::clone(&self.shared)));
        summary.probes_started += 1;
        registry.targets.insert(key, probe_key.clone());
        registry
            .probes
            .insert(probe_key, RunningProbe { state, task });
        Ok(())
    }

    /// The status of every target.
    pub fn snapshot(&self) -> HealthSnapshot {
        let registry = lock(&self.registry);
        let mut targets = Vec::with_capacity(registry.targets.len());
        for (probe_key, running) in &registry.probes {
            let inner = lock(&running.state.inner);
            for sub in inner.subscribers.values() {
                targets.push(TargetStatus {
                    target: sub.target.clone(),
                    probe: probe_key.clone(),
                    health: sub.tracker.health(),
                    weight: sub.tracker.weight(),
                    consecutive_passes: sub.tracker.consecutive_passes(),
                    consecutive_failures: sub.tracker.consecutive_failures(),
                    changed_at: sub.tracker.changed_at(),
                    last_probe: inner.last,
                });
            }
        }
        targets.sort_by(|a, b| a.target.key.cmp(&b.target.key));
        HealthSnapshot {
            taken_at: Instant::now(),
            targets,
        }
    }

    /// Counters and the latency histogram.
    pub fn metrics(&self) -> ProbeMetrics {
        let registry = lock(&self.registry);
        self.shared
            .metrics
            .read(registry.probes.len(), registry.targets.len())
    }
}

impl Drop for HealthChecker {
    fn drop(&mut self) {
        for (_, running) in lock(&self.registry).probes.drain() {
            running.task.abort();
        }
        lock(&self.shared.pending).closed = true;
        self.shared.notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, TcpListener};

    use crate::health::{Check, Health};

    /// A backend on a plain thread: answers every connection with 200 and closes.
    fn backend() -> std::net::SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut head = Vec::new();
                let mut buf = [0u8; 512];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            }
        });
        addr
    }

    #[test]
    fn own_thread_checker_runs_without_a_runtime_and_stops_on_drop() {
        let addr = backend();
        // Created and fed from a thread with no runtime at all.
        let (checker, mut events) =
            HealthChecker::on_own_thread(CheckerOptions::default()).unwrap();
        let mut target = HealthTarget::new("web", "vm", addr.ip());
        target.check = Check {
            port: addr.port(),
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(50),
            ..Check::default()
        };
        let key = target.key.clone();
        checker.set_targets(vec![target]).unwrap();
        // The events are read on another runtime than the probes run on.
        let reader = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let change = reader.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    let batch = events.recv().await.expect("checker alive");
                    if let Some(c) = batch.into_iter().find(|c| c.target == key) {
                        return c;
                    }
                }
            })
            .await
            .expect("decided within 5 s")
        });
        assert_eq!(
            (change.previous, change.health),
            (Health::Unknown, Health::Healthy)
        );
        // A passing probe on a backend that closes first gives its socket back.
        assert!(checker.metrics().passes >= 2);
        let pooled = std::time::Instant::now() + Duration::from_secs(5);
        while checker.shared.sockets.idle() == 0 {
            assert!(std::time::Instant::now() < pooled, "no socket reused");
            std::thread::sleep(Duration::from_millis(10));
        }

        let thread = checker
            .own_thread
            .as_ref()
            .and_then(|t| t.thread.as_ref())
            .map(|t| t.thread().name().map(str::to_string));
        assert_eq!(thread, Some(Some("nlb-health".to_string())));
        drop(checker);
        // Dropping joined the thread and closed the event stream.
        assert_eq!(reader.block_on(events.recv()), None);
    }
}
