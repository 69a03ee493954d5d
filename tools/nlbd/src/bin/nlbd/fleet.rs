//! `nlbd --etcd`: the configuration comes from the fleet's etcd (SPEC R11.1, R11.4;
//! docs/fleet.md).
//!
//! At start nlbd waits for a published revision that parses, and the engine loads it before
//! anything is registered: a host with an empty NIC announces itself only once it serves the
//! live revision. Then one *session* at a time, each on a fresh connection:
//!
//! 1. grant a lease (`--lease-ttl`) and keep it alive;
//! 2. catch up: read the live revision and apply it when it is newer than the one serving;
//! 3. write `hosts/NAME` (revision, tables digest, ...) with the lease;
//! 4. watch the configuration key from the revision read on: each new revision goes through
//!    the same reload path as a file change (parse, compile, delta load); one that does not
//!    apply is refused and logged, the last good one keeps serving (fail static);
//! 5. every half second, compare the tables digest with the one written (health and the
//!    policy change tables) and read the other hosts' records for the mismatch metrics (a
//!    mismatch counts once it lasts 2 s: hosts apply a change a few milliseconds apart).
//!
//! Any etcd error ends the session: the host keeps serving what it has (fail static) and
//! starts a new session after a backoff; step 2 catches up with whatever was published
//! meanwhile (also when etcd compacted the history the watch would have needed). A watch
//! stream that breaks resumes by itself on any member from the next revision; only a watch
//! that cannot resume ends the session.
//!
//! Keys under the prefix that nlbd and nlbctl do not write, and values that do not decode,
//! never end a session: each is logged once, counted (`nlb_fleet_ignored_keys`) and skipped
//! (a host key that holds no record is not a live host; a configuration that is not one is
//! refused like a revision that does not compile).
//!
//! etcd's client is blocking ([`nlb_control::etcd`]): requests run on the runtime's blocking
//! threads, and the watch's own thread feeds a channel.

use crate::shared_health::SharedHealth;
use crate::Daemon;
use flowtable_compiler::Config;
use nlb_control::etcd::{self, WatchMessage};
use nlb_control::fleet::{
    self, Entry, FleetError, HostRecord, KeyKind, KeyProblem, Keys, PinnedConnection,
    PinnedProgress, Published, Refused, Store, UpgradeKind, UpgradeOrder, UpgradeResult,
};
use nlbd::engine::{Command, FlashFailed};
use nlbd::health::TargetKey;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, warn};

mod change;

/// `--etcd`, `--host`, `--etcd-prefix`, `--lease-ttl`.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// How to reach etcd (endpoints, TLS, authentication).
    pub settings: etcd::Settings,
    /// The fleet's keys.
    pub keys: Keys,
    /// This host's name.
    pub host: String,
    /// The lease's TTL in seconds.
    pub lease_ttl: i64,
    /// Hosts probing each backend (0: no shared health).
    pub probers: usize,
}

/// What the fleet task shows the metrics.
#[derive(Debug, Default)]
pub struct FleetMetrics {
    /// The revision serving.
    pub revision: AtomicI64,
    /// The newest revision seen in etcd.
    pub live_revision: AtomicI64,
    /// Whether the current session is up.
    pub etcd_up: AtomicBool,
    /// Whether this host's record is written under a live lease.
    pub registered: AtomicBool,
    /// Whether it ever was since nlbd started (it caught up with the fleet once).
    pub ever_registered: AtomicBool,
    /// Host records seen at the latest read.
    pub hosts: AtomicU64,
    /// Of those, the hosts on this host's revision (this one included).
    pub hosts_on_revision: AtomicU64,
    /// Of those, the hosts whose tables digest differs from this host's.
    pub mismatched_hosts: AtomicU64,
    /// Revisions applied since start (the first included).
    pub applied: AtomicU64,
    /// Revisions refused.
    pub refused: AtomicU64,
    /// Sessions that ended with an etcd error.
    pub session_failures: AtomicU64,
    /// Health-check targets this host probes for the fleet (shared health).
    pub probing: AtomicU64,
    /// Health reports written or deleted by this host.
    pub reports_written: AtomicU64,
    /// Keys under the prefix that are not what nlbctl and nlbd write (as last seen).
    pub ignored_keys: AtomicU64,
    /// Changes of the tables loaded once the fleet prepared them ([`change`]).
    pub changes_shared: AtomicU64,
    /// Changes of the tables loaded after [`change::PREPARE_WAIT`] without the fleet.
    pub changes_timed_out: AtomicU64,
    /// Changes (revisions, health decisions) that needed no other tables.
    pub changes_unchanged: AtomicU64,
    /// How long the last change of the tables waited for the fleet, in microseconds.
    pub change_wait_us: AtomicU64,
}

/// Runs a blocking store request on the runtime's blocking threads.
async fn blocking<T: Send + 'static>(
    store: &Store,
    f: impl FnOnce(&Store) -> Result<T, FleetError> + Send + 'static,
) -> Result<T, FleetError> {
    let store = store.clone();
    let endpoints = store.endpoints().to_string();
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .unwrap_or_else(|e| {
            Err(FleetError::Unreachable {
                endpoints,
                error: format!("the request's thread failed: {e}"),
            })
        })
}

/// The keys under the prefix that are not what nlbctl and nlbd write: each logged once (again
/// only if it changes, or goes and comes back), counted, skipped.
#[derive(Debug, Default)]
struct Ignored {
    /// Key → its problem, as last seen.
    keys: BTreeMap<String, String>,
}

impl Ignored {
    /// A key's state after a put: `problem` (None: it is fine now).
    fn put(&mut self, host: &str, key: &str, problem: Option<String>, metrics: &FleetMetrics) {
        match problem {
            Some(p) => {
                if self.keys.get(key) != Some(&p) {
                    warn!(host = %host, key = %key.escape_debug(), "ignoring etcd key {}: {p}", key.escape_debug());
                    self.keys.insert(key.to_string(), p);
                }
            }
            None => {
                self.keys.remove(key);
            }
        }
        metrics
            .ignored_keys
            .store(self.keys.len() as u64, Ordering::Relaxed);
    }

    /// A fresh read: the problems it found, and only those.
    fn reset(&mut self, host: &str, problems: Vec<KeyProblem>, metrics: &FleetMetrics) {
        let before = std::mem::take(&mut self.keys);
        for p in problems {
            if before.get(&p.key) != Some(&p.problem) {
                warn!(host = %host, key = %p.key.escape_debug(), "ignoring etcd key {}: {}", p.key.escape_debug(), p.problem);
            }
            self.keys.insert(p.key, p.problem);
        }
        metrics
            .ignored_keys
            .store(self.keys.len() as u64, Ordering::Relaxed);
    }
}

/// How often the other hosts' pinned connections are handed to the engine even when none
/// changed: a copy evicted here (a reload, a full bucket) or renumbered comes back.
const MIRROR_AGAIN: Duration = Duration::from_secs(10);
/// How often the session compares the tables digest and reads the other hosts.
const STATUS_PERIOD: Duration = Duration::from_millis(500);
/// How long hosts of one revision may disagree on the tables before it counts as a mismatch
/// (metric and log): four status periods, so that a change every host applies at about the
/// same time is not one.
const MISMATCH_GRACE: Duration = Duration::from_secs(2);
/// Backoff between sessions: doubling from the first to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(3));

/// The first configuration: waits (retrying every 500 ms, logging once per cause) until etcd
/// holds a revision that parses. A revision that does not is logged and waited past.
pub async fn first_revision(opts: &FleetOptions) -> (i64, Published, Config) {
    let mut last_problem = String::new();
    let mut note = |problem: String, log: &dyn Fn(&str)| {
        if problem != last_problem {
            log(&problem);
            last_problem = problem;
        }
    };
    let store = Store::new(opts.settings.clone(), opts.keys.clone());
    loop {
        let live = blocking(&store, |s| s.live()).await;
        match live {
            Ok((Some(live), _)) => {
                let rev = live.revision;
                match live.published.and_then(|p| parse(rev, &p).map(|c| (p, c))) {
                    Ok((published, config)) => return (rev, published, config),
                    Err(e) => note(
                        format!("revision {rev} refused: {e}"),
                        &|m| error!(host = %opts.host, "{m}; waiting for the next revision"),
                    ),
                }
            }
            Ok((None, _)) => note(
                format!("nothing published under {}", opts.keys.config()),
                &|m| info!(host = %opts.host, "{m} yet; waiting (nlbctl publish)"),
            ),
            Err(e) => note(
                e.to_string(),
                &|m| warn!(host = %opts.host, "{m}; waiting for etcd before the first load"),
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Parses a published revision (named after the file it was published from, so messages read
/// file:line as `nlbctl publish` printed them).
fn parse(rev: i64, p: &Published) -> Result<Config, String> {
    let (config, diags) = nlb_config::parse_config(&p.file, &p.source);
    match diags.into_result() {
        Ok(()) => Ok(config),
        Err(d) => Err(format!(
            "{} (revision {rev})",
            d.to_string()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

/// What the fleet task keeps across sessions.
struct Serving {
    revision: i64,
    refused: Option<Refused>,
    /// The record last written (to write again only on change).
    written: Option<HostRecord>,
    /// Keys skipped (logged once across sessions).
    ignored: Ignored,
    /// SHA-256 of the nlbd executable running.
    binary_sha256: String,
    /// An upgrade order for this host not answered yet.
    order: Option<UpgradeOrder>,
    /// This host's pinned connections as written under the current lease, one value per part
    /// (None: nothing written under it yet).
    pinned_written: Option<Vec<Vec<u8>>>,
    /// The pinned connections the hosts publish, by (host, part); this host's own only as
    /// found at the session's start (a previous nlbd's, or this card's before a reflash),
    /// until it publishes its own.
    remote_pinned: BTreeMap<(String, u32), Vec<PinnedConnection>>,
    /// `remote_pinned` changed since the engine last took it in.
    mirror_dirty: bool,
    /// When the engine last took it in (it takes it in again every [`MIRROR_AGAIN`]: copies
    /// evicted or renumbered here come back).
    mirrored_at: Option<std::time::Instant>,
    /// This host's own pinned connections as a previous nlbd published them, for the engine
    /// to install again where the card lost them (at a session's start).
    restore_pinned: Vec<PinnedConnection>,
    /// The parts of this host's key a previous nlbd wrote (deleted when not written again).
    own_old_parts: Vec<u32>,
    /// A drain asked for and not applied yet: since when ([`settle_drain`]).
    drain_pending: Option<std::time::Instant>,
    /// What this host's record says of its pinned connections' sharing (`nlbctl drain` waits
    /// on every host's: [`fleet::pinned_shared`]).
    pinned_progress: PinnedProgress,
    /// The newest store revision of a pinned connections' key seen (watch or read).
    pinned_seen_revision: i64,
    /// The next publication writes the set even if the engine found it unchanged (new tables
    /// loaded after a prepared set was published in its place).
    pinned_again: bool,
    /// A change of the tables prepared and waiting for the fleet ([`change`]).
    pending: Option<change::Pending>,
    /// The hosts' records as the session's first read and its watch gave them, by host: what
    /// a waiting change checks, without a read of its own.
    records: BTreeMap<String, HostRecord>,
}

/// Runs the fleet task until aborted; `revision` is what the engine started with.
pub async fn run(
    daemon: Arc<Daemon>,
    opts: FleetOptions,
    start: (i64, Published),
    metrics: Arc<FleetMetrics>,
) {
    let (revision, published) = start;
    // The engine started with ids in name order (an empty NIC) or with those the NIC holds (a
    // restart); the revision's own ids make the tables the fleet's, before anything is
    // registered (connections are renumbered by the reload as needed).
    if let Some(ids) = &published.ids {
        let applied = match parse(revision, &published) {
            Ok(config) => daemon.reload(config, Some(ids.symbols())).await,
            Err(e) => Err(e),
        };
        if let Err(e) = applied {
            error!(host = %opts.host, revision, "the revision's ids could not be applied: {e}");
        }
    }
    metrics.revision.store(revision, Ordering::Relaxed);
    metrics.live_revision.store(revision, Ordering::Relaxed);
    metrics.applied.fetch_add(1, Ordering::Relaxed);
    let binary_sha256 = tokio::task::spawn_blocking(|| {
        std::env::current_exe().and_then(|p| fleet::file_sha256(&p))
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    .unwrap_or_else(|e| {
        warn!(host = %opts.host, "cannot read this nlbd's executable for its digest: {e}");
        String::new()
    });
    let mut serving = Serving {
        revision,
        refused: None,
        written: None,
        ignored: Ignored::default(),
        binary_sha256,
        order: None,
        pinned_written: None,
        remote_pinned: BTreeMap::new(),
        mirror_dirty: false,
        mirrored_at: None,
        restore_pinned: Vec::new(),
        own_old_parts: Vec::new(),
        drain_pending: None,
        pinned_progress: PinnedProgress::default(),
        pinned_seen_revision: 0,
        pinned_again: false,
        pending: None,
        records: BTreeMap::new(),
    };
    let mut backoff = BACKOFF.0;
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        let e = session(&daemon, &opts, &metrics, &mut serving, &mut down_since).await;
        // A change that waited for the fleet loads now: without etcd there is no fleet to
        // wait for.
        change::load_now(&daemon, &opts, &metrics, &mut serving).await;
        metrics.etcd_up.store(false, Ordering::Relaxed);
        metrics.registered.store(false, Ordering::Relaxed);
        metrics.session_failures.fetch_add(1, Ordering::Relaxed);
        serving.written = None;
        serving.pinned_written = None;
        if down_since.is_none() {
            warn!(
                host = %opts.host,
                revision = serving.revision,
                error = %e,
                "lost etcd: serving revision {} until it returns (fail static)",
                serving.revision
            );
            down_since = Some(std::time::Instant::now());
            backoff = BACKOFF.0;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF.1);
    }
}

/// One session; returns why it ended.
async fn session(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    down_since: &mut Option<std::time::Instant>,
) -> FleetError {
    match session_inner(daemon, opts, metrics, serving, down_since).await {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// Never returns Ok: a session ends only with an error.
enum Never {}

async fn session_inner(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    down_since: &mut Option<std::time::Instant>,
) -> Result<Never, FleetError> {
    // A fresh client (fresh connections) per session.
    let store = Store::new(opts.settings.clone(), opts.keys.clone());
    // One read of everything under the prefix (it also finds a member that answers): the
    // live revision, the hosts and the health reports at one store revision, from which the
    // watch continues.
    let survey = blocking(&store, |s| s.survey()).await?;
    let ttl = opts.lease_ttl;
    let lease = blocking(&store, move |s| s.grant(ttl)).await?;
    let (live, pinned, read_at) = take_in(daemon, opts, metrics, serving, survey);

    catch_up(daemon, opts, metrics, serving, live, pinned, read_at).await?;
    write_record(daemon, &store, opts, serving, lease).await?;
    metrics.etcd_up.store(true, Ordering::Relaxed);
    metrics.registered.store(true, Ordering::Relaxed);
    metrics.ever_registered.store(true, Ordering::Relaxed);
    daemon.announce.changed.notify_one();
    if let Some(since) = down_since.take() {
        info!(
            host = %opts.host,
            revision = serving.revision,
            outage_ms = since.elapsed().as_millis() as u64,
            "etcd reachable again: serving revision {} and registered",
            serving.revision
        );
    } else {
        info!(host = %opts.host, revision = serving.revision, lease, "registered in the fleet");
    }
    let session = change::Session {
        daemon,
        store: &store,
        opts,
        metrics,
        lease,
    };
    if let Some(shared) = &daemon.shared {
        shared.host(&opts.host, true);
        shared_step(&session, shared, serving).await?;
    }
    answer_upgrade(daemon, &store, opts, serving).await?;

    // The watch's thread hands its messages over this channel; dropping `_watch` (the session
    // ends) stops it.
    let (tx, mut watched) = tokio::sync::mpsc::unbounded_channel();
    let from = read_at + 1;
    let _watch = blocking(&store, move |s| s.watch(from, move |m| tx.send(m).is_ok())).await?;
    let mut keepalive_tick = tokio::time::interval(Duration::from_millis(
        (opts.lease_ttl as u64 * 1000 / 3).max(200),
    ));
    let mut status_tick = tokio::time::interval(STATUS_PERIOD);
    let mut change_tick = tokio::time::interval(change::CHECK_PERIOD);
    change_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut mismatch_since: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            msg = watched.recv() => {
                let events = match msg {
                    Some(WatchMessage::Events { events, .. }) => events,
                    // For example a revision to resume from that etcd compacted: the next
                    // session reads everything afresh.
                    Some(WatchMessage::Compacted { compact_revision }) => {
                        return Err(FleetError::Unreachable {
                            endpoints: store.endpoints().to_string(),
                            error: format!("the watch's history was compacted (at revision {compact_revision})"),
                        })
                    }
                    Some(WatchMessage::Lost(f)) => return Err(store.error(f)),
                    None => {
                        return Err(FleetError::Unreachable {
                            endpoints: store.endpoints().to_string(),
                            error: "the watch ended".into(),
                        })
                    }
                };
                let (config, view_changed) =
                    watched_events(daemon, opts, metrics, serving, &store.keys, events);
                if view_changed {
                    if let Some(shared) = &daemon.shared {
                        shared_step(&session, shared, serving).await?;
                    }
                }
                for (rev, published) in config {
                    change::stage_revision(&session, serving, rev, published).await?;
                }
                mirror_pinned(daemon, opts, serving).await;
                write_progress(daemon, &store, opts, serving, lease).await?;
                change::check(&session, serving).await?;
                settle_drain(daemon, &store, opts, metrics, serving).await?;
                answer_upgrade(daemon, &store, opts, serving).await?;
            }
            () = async {
                match &daemon.shared {
                    Some(s) => tokio::select! {
                        () = s.local_changed.notified() => {}
                        () = s.view_changed.notified() => {}
                    },
                    None => std::future::pending().await,
                }
            } => {
                if let Some(shared) = &daemon.shared {
                    shared_step(&session, shared, serving).await?;
                }
            }
            _ = keepalive_tick.tick() => {
                blocking(&store, move |s| s.keep_alive(lease)).await?;
            }
            _ = change_tick.tick(), if serving.pending.is_some() => {
                mirror_pinned(daemon, opts, serving).await;
                change::check(&session, serving).await?;
            }
            _ = status_tick.tick() => {
                write_record(daemon, &store, opts, serving, lease).await?;
                publish_pinned(daemon, &store, opts, serving, lease).await?;
                mirror_pinned(daemon, opts, serving).await;
                change::check(&session, serving).await?;
                settle_drain(daemon, &store, opts, metrics, serving).await?;
                compare_with_the_fleet(&store, opts, metrics, serving, &mut mismatch_since).await?;
            }
        }
    }
}

/// What a session's first read says of this host (its drain, an upgrade order) and of the
/// fleet (the hosts, health reports, stray keys), taken in; the rest is returned: the live
/// revision, every host's pinned connections, and the store revision of the read.
fn take_in(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    survey: fleet::Survey,
) -> (
    Option<fleet::Live>,
    Vec<(String, u32, fleet::PinnedChunk)>,
    i64,
) {
    serving.ignored.reset(&opts.host, survey.problems, metrics);
    serving.records = survey
        .hosts
        .iter()
        .map(|(r, _)| (r.host.clone(), r.clone()))
        .collect();
    let drained = survey.drains.iter().any(|(name, _)| *name == opts.host);
    serving.drain_pending = None;
    set_fleet_drain(daemon, opts, drained);
    serving.order = survey
        .upgrades
        .into_iter()
        .find(|(name, o)| *name == opts.host && o.result.is_none())
        .map(|(_, o)| o);
    if let Some(shared) = &daemon.shared {
        let hosts = survey.hosts.iter().map(|(r, _)| r.host.clone());
        let reports = survey
            .reports
            .into_iter()
            .map(|(pool, backend, host, r)| (TargetKey::new(&pool, &backend), host, r))
            .collect();
        shared.reset(hosts, reports);
    }
    (survey.live, survey.pinned, survey.revision)
}

/// A session's catch-up, before this host registers: a change that waited when etcd was lost
/// loads now; the live revision `live` applies when it is newer; the fleet's health and every
/// host's pinned connections (`pinned`, read at store revision `revision`) are installed.
async fn catch_up(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    live: Option<fleet::Live>,
    pinned: Vec<(String, u32, fleet::PinnedChunk)>,
    revision: i64,
) -> Result<(), FleetError> {
    // A change that waited when etcd was lost loads now; then catch up before announcing
    // anything.
    change::load_now(daemon, opts, metrics, serving).await;
    if let Some(live) = live {
        let rev = live.revision;
        metrics.live_revision.store(rev, Ordering::Relaxed);
        if rev > serving.revision && serving.refused.as_ref().map(|r| r.revision) != Some(rev) {
            match live.published {
                Ok(p) => apply(daemon, opts, metrics, serving, rev, &p).await,
                Err(e) => refuse(opts, serving, metrics, rev, e),
            }
        }
    }
    // The fleet's health as read, loaded before the record announces the tables (a host with
    // an empty NIC would otherwise announce tables that assume every backend healthy).
    if let Some(shared) = &daemon.shared {
        load_fleet_health(daemon, shared, opts)?;
    }
    // Every host's pinned connections in this NIC before it serves (SPEC R15.2): ECMP may
    // bring any of them here as soon as the VIP is announced.
    start_pinned(daemon, opts, serving, pinned, revision).await;
    Ok(())
}

/// Every status period: the hosts' records against this host's, for the metrics, and an error
/// logged once when hosts of this revision serve other tables (SPEC R11.1) for longer than
/// [`MISMATCH_GRACE`].
async fn compare_with_the_fleet(
    store: &Store,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &Serving,
    mismatch_since: &mut Option<std::time::Instant>,
) -> Result<(), FleetError> {
    let (records, _) = blocking(store, |s| s.host_records()).await?;
    let mine = serving
        .written
        .as_ref()
        .map(|r| r.tables_digest.clone())
        .unwrap_or_default();
    let same: Vec<_> = records
        .iter()
        .filter(|(r, _)| r.revision == serving.revision)
        .collect();
    metrics.hosts.store(records.len() as u64, Ordering::Relaxed);
    metrics
        .hosts_on_revision
        .store(same.len() as u64, Ordering::Relaxed);
    let mut mismatched = same.iter().filter(|(r, _)| r.tables_digest != mine).count();
    // Hosts apply a health change (or a policy refresh) a few milliseconds apart and rewrite
    // their records within a status period: a mismatch counts once it outlasts MISMATCH_GRACE.
    if mismatched == 0 {
        *mismatch_since = None;
    } else if mismatch_since
        .get_or_insert_with(std::time::Instant::now)
        .elapsed()
        < MISMATCH_GRACE
    {
        mismatched = 0;
    }
    let before = metrics
        .mismatched_hosts
        .swap(mismatched as u64, Ordering::Relaxed);
    if mismatched > 0 && before == 0 {
        let others: Vec<String> = same
            .iter()
            .filter(|(r, _)| r.tables_digest != mine)
            .map(|(r, _)| format!("{} ({})", r.host, fleet::short_digest(&r.tables_digest)))
            .collect();
        error!(
            host = %opts.host,
            revision = serving.revision,
            "hosts on revision {} serve other tables than this one ({}): {}",
            serving.revision,
            fleet::short_digest(&mine),
            others.join(", ")
        );
    }
    Ok(())
}

/// A revision of the configuration seen by the watch: its store revision and what it holds
/// (or why it does not decode).
type NewRevision = (i64, Result<Published, String>);

/// Takes in a batch of watched changes; the revisions of the configuration in it, oldest
/// first, and whether the fleet's view (hosts, health reports) changed.
fn watched_events(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    keys: &Keys,
    events: Vec<etcd::Event>,
) -> (Vec<NewRevision>, bool) {
    let (mut config, mut view_changed) = (Vec::new(), false);
    for event in events {
        let key = String::from_utf8_lossy(&event.kv.key).into_owned();
        if !event.put {
            serving.ignored.put(&opts.host, &key, None, metrics);
            match keys.classify(&key) {
                KeyKind::Config => warn!(
                    host = %opts.host,
                    "{key} was deleted: revision {} keeps serving", serving.revision
                ),
                KeyKind::Host(name) => {
                    serving.records.remove(name);
                    if name == opts.host {
                        // Deleted by hand: written again at the next status period.
                        serving.written = None;
                    }
                    if let Some(shared) = &daemon.shared {
                        shared.host(name, false);
                        view_changed = true;
                    }
                }
                KeyKind::Health {
                    pool,
                    backend,
                    host,
                } => {
                    if let Some(shared) = &daemon.shared {
                        shared.report(TargetKey::new(pool, backend), host, None);
                        view_changed = true;
                    }
                }
                KeyKind::Drain(name) => {
                    if name == opts.host {
                        serving.drain_pending = None;
                        set_fleet_drain(daemon, opts, false);
                    }
                }
                KeyKind::Pinned { host, chunk } => {
                    note_pinned_revision(opts, serving, host, event.kv.mod_revision);
                    if host != opts.host
                        && serving
                            .remote_pinned
                            .remove(&(host.to_string(), chunk))
                            .is_some()
                    {
                        serving.mirror_dirty = true;
                    }
                }
                KeyKind::Upgrade(_) | KeyKind::Other => {}
            }
            continue;
        }
        let entry = keys.entry(&key, &event.kv.value);
        serving
            .ignored
            .put(&opts.host, &key, entry.problem(keys), metrics);
        match entry {
            Entry::Config(published) => {
                let rev = event.kv.mod_revision;
                metrics.live_revision.store(rev, Ordering::Relaxed);
                config.push((rev, published));
            }
            Entry::Host(name, record) => {
                // A value that is no record is no live host; on this host's own key, the
                // record is written again at the next status period.
                if name == opts.host && record.is_err() {
                    serving.written = None;
                }
                match &record {
                    Ok(r) => serving.records.insert(name.to_string(), r.clone()),
                    Err(_) => serving.records.remove(name),
                };
                if let Some(shared) = &daemon.shared {
                    shared.host(name, record.is_ok());
                    view_changed = true;
                }
            }
            Entry::Health {
                pool,
                backend,
                host,
                report,
            } => {
                if let Some(shared) = &daemon.shared {
                    shared.report(TargetKey::new(pool, backend), host, report.ok());
                    view_changed = true;
                }
            }
            Entry::Drain(name, request) => {
                // A value that is no drain request drains nothing (it is reported above).
                // The withdrawal waits until the fleet shares its pinned connections
                // ([`settle_drain`]).
                if name == opts.host {
                    if request.is_ok() {
                        if !daemon.announce.fleet_drain.load(Ordering::Relaxed) {
                            serving
                                .drain_pending
                                .get_or_insert_with(std::time::Instant::now);
                        }
                    } else {
                        serving.drain_pending = None;
                        set_fleet_drain(daemon, opts, false);
                    }
                }
            }
            Entry::Upgrade(name, Ok(order)) => {
                if name == opts.host && order.result.is_none() {
                    serving.order = Some(order);
                }
            }
            Entry::Upgrade(_, Err(_)) => {}
            // This host's own parts are what it wrote; a part that does not decode shares
            // nothing (it is reported above).
            Entry::Pinned { host, chunk, set } => {
                note_pinned_revision(opts, serving, host, event.kv.mod_revision);
                if host != opts.host {
                    let part = (host.to_string(), chunk);
                    match set {
                        Ok(set) => {
                            serving.remote_pinned.insert(part, set.connections);
                        }
                        Err(_) => {
                            serving.remote_pinned.remove(&part);
                        }
                    }
                    serving.mirror_dirty = true;
                }
            }
            Entry::Unknown | Entry::Outside => {}
        }
    }
    (config, view_changed)
}

/// At a session's start: the pinned connections every host published (this one's too, from
/// before a restart or a card's reboot), installed at once; everything is written again under
/// the new lease.
async fn start_pinned(
    daemon: &Daemon,
    opts: &FleetOptions,
    serving: &mut Serving,
    read: Vec<(String, u32, fleet::PinnedChunk)>,
    revision: i64,
) {
    serving.remote_pinned.clear();
    serving.own_old_parts.clear();
    for (host, chunk, set) in read {
        if host == opts.host {
            serving.own_old_parts.push(chunk);
            serving.restore_pinned.extend(set.connections);
        } else {
            serving.remote_pinned.insert((host, chunk), set.connections);
        }
    }
    serving.pinned_written = None;
    serving.mirror_dirty = true;
    serving.pinned_seen_revision = revision;
    serving.pinned_progress.written_revision = 0;
    mirror_pinned(daemon, opts, serving).await;
}

/// Writes this host's pinned connections (SPEC R15.2) where they changed: the parts that
/// differ from what was written under the current lease, with that lease (a host that dies takes them
/// with it), and deletes parts it no longer needs (the first time, also those of a previous
/// nlbd found at the session's start). The record's `written_revision` is the store's revision
/// after the last write.
async fn publish_pinned(
    daemon: &Daemon,
    store: &Store,
    opts: &FleetOptions,
    serving: &mut Serving,
    lease: i64,
) -> Result<(), FleetError> {
    // While new tables are prepared, what is published is what `change` wrote.
    if serving.pending.is_some() {
        return Ok(());
    }
    let first = serving.pinned_written.is_none();
    let again = first || std::mem::take(&mut serving.pinned_again);
    let (digest, conns) = daemon
        .pinned(again)
        .await
        .map_err(|e| FleetError::Unreachable {
            endpoints: "the engine".into(),
            error: e,
        })?;
    // Unchanged since written (the first call of a session always has them).
    let Some(conns) = conns else {
        if !first {
            serving.pinned_progress.tables_digest = digest;
        }
        return Ok(());
    };
    write_pinned(store, opts, serving, lease, digest, conns).await
}

/// Writes `conns` as this host's pinned connections, found for the tables of `digest`: the
/// parts that differ from what was written under the current lease, with that lease, and
/// deletes the parts no longer needed.
async fn write_pinned(
    store: &Store,
    opts: &FleetOptions,
    serving: &mut Serving,
    lease: i64,
    digest: String,
    conns: Vec<PinnedConnection>,
) -> Result<(), FleetError> {
    let first = serving.pinned_written.is_none();
    let own = conns.len() as u64;
    let parts = fleet::pinned_chunks(&opts.host, serving.revision, conns);
    let written = serving.pinned_written.take().unwrap_or_default();
    for (n, value) in parts.iter().enumerate() {
        if written.get(n) != Some(value) || first {
            let key = opts.keys.pinned(&opts.host, n as u32);
            let value = value.clone();
            let rev = blocking(store, move |s| s.put_at(&key, &value, lease)).await?;
            let p = &mut serving.pinned_progress;
            p.written_revision = p.written_revision.max(rev);
        }
    }
    // Parts beyond the new count: the ones written under this lease, or, the first time, any a
    // previous nlbd left (read back, so that none stays to be taken for current).
    let stale: Vec<u32> = if first {
        let old = std::mem::take(&mut serving.own_old_parts);
        old.into_iter()
            .filter(|n| *n as usize >= parts.len())
            .collect()
    } else {
        (parts.len()..written.len()).map(|n| n as u32).collect()
    };
    for n in stale {
        let key = opts.keys.pinned(&opts.host, n);
        blocking(store, move |s| s.delete(&key)).await?;
    }
    serving.pinned_written = Some(parts);
    serving.pinned_progress.own = own;
    serving.pinned_progress.tables_digest = digest;
    Ok(())
}

/// After a new revision (applied or refused): the record written again, the connections the
/// new tables pin shared at once (every host applies the revision at about the same time), and
/// the other hosts' installed again (names and ids may have changed: copies refused or
/// renumbered come back).
async fn revision_changed(
    daemon: &Daemon,
    store: &Store,
    opts: &FleetOptions,
    serving: &mut Serving,
    lease: i64,
) -> Result<(), FleetError> {
    write_record(daemon, store, opts, serving, lease).await?;
    publish_pinned(daemon, store, opts, serving, lease).await?;
    serving.mirror_dirty = true;
    Ok(())
}

/// The longest a drain waits for the fleet to share its pinned connections before this host
/// withdraws anyway.
const DRAIN_WAIT: Duration = Duration::from_secs(15);

/// Applies a pending drain once every host serves the live revision, published its pinned
/// connections for its tables and installed everyone else's ([`fleet::pinned_shared`]):
/// withdrawing moves connections among all the other hosts (ECMP rehashes), and one pinned
/// to a backend the tables no longer choose survives only where it was installed (SPEC
/// R15.2). Usually at once; after a change of the tables, within a status period or two.
/// `nlbctl drain` waits for the same before it writes the drain; this closes the moment
/// between its check and the drain (a revision published in between).
async fn settle_drain(
    daemon: &Daemon,
    store: &Store,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
) -> Result<(), FleetError> {
    let Some(since) = serving.drain_pending else {
        return Ok(());
    };
    let (records, _) = blocking(store, |s| s.host_records()).await?;
    let records: Vec<HostRecord> = records.into_iter().map(|(r, _)| r).collect();
    let live = metrics.live_revision.load(Ordering::Relaxed);
    match fleet::pinned_shared(&records, live) {
        Ok(()) => {}
        Err(_) if since.elapsed() < DRAIN_WAIT => return Ok(()),
        Err(why) => {
            warn!(host = %opts.host, "withdrawing although {why} after {} s: connections pinned to a backend the tables no longer choose may break", DRAIN_WAIT.as_secs());
        }
    }
    serving.drain_pending = None;
    set_fleet_drain(daemon, opts, true);
    Ok(())
}

/// A pinned connections' key changed at store revision `rev`: this host's own write, or one
/// to install.
fn note_pinned_revision(opts: &FleetOptions, serving: &mut Serving, host: &str, rev: i64) {
    serving.pinned_seen_revision = serving.pinned_seen_revision.max(rev);
    if host == opts.host {
        let p = &mut serving.pinned_progress;
        p.written_revision = p.written_revision.max(rev);
    }
}

/// Hands the engine every other host's pinned connections when they changed: it installs the
/// new ones as copies and lets the ones gone lapse. A device error is logged and tried again
/// at the next status period.
async fn mirror_pinned(daemon: &Daemon, opts: &FleetOptions, serving: &mut Serving) {
    let due = serving
        .mirrored_at
        .is_none_or(|t| t.elapsed() >= MIRROR_AGAIN);
    if !serving.mirror_dirty && !due {
        serving.pinned_progress.mirrored_revision = serving.pinned_seen_revision;
        return;
    }
    let all: Vec<PinnedConnection> = serving.remote_pinned.values().flatten().cloned().collect();
    let restore = std::mem::take(&mut serving.restore_pinned);
    match daemon.mirror(all, restore.clone()).await {
        Ok(r) => {
            serving.mirror_dirty = false;
            serving.mirrored_at = Some(std::time::Instant::now());
            serving.pinned_progress.mirrored_revision = serving.pinned_seen_revision;
            if r.installed + r.lapsed + r.restored + r.conflicts + r.bucket_full + r.unknown_names
                > 0
            {
                info!(
                    host = %opts.host,
                    installed = r.installed,
                    lapsed = r.lapsed,
                    restored = r.restored,
                    present = r.present,
                    conflicts = r.conflicts,
                    bucket_full = r.bucket_full,
                    unknown_names = r.unknown_names,
                    "pinned connections of the other hosts: {} installed, {} lapsed; {} of this host's installed again",
                    r.installed,
                    r.lapsed,
                    r.restored
                );
            }
        }
        Err(e) => {
            serving.restore_pinned = restore;
            warn!(host = %opts.host, "installing the other hosts' pinned connections failed: {e}; trying again");
        }
    }
}

/// Answers this host's upgrade order (`nlbctl fleet upgrade`). An nlbd executable
/// (`--binary`): already running it, or it does not verify (its digest, `--version`): the
/// answer goes into the key; it verifies: nlbd stops and executes it, and the new process
/// answers. A bitstream (`--bitstream`): the card already runs its build, or it does not
/// verify (digest, format, the card's FPGA part) or does not flash: the answer goes into the
/// key; it flashed and the card came back running it: the answer goes into the key and nlbd
/// starts again, which loads the fleet's tables into the empty card.
async fn answer_upgrade(
    daemon: &Daemon,
    store: &Store,
    opts: &FleetOptions,
    serving: &mut Serving,
) -> Result<(), FleetError> {
    let Some(mut order) = serving.order.take() else {
        return Ok(());
    };
    let (ok, message, restart) = match order.kind {
        UpgradeKind::Binary => match upgrade_binary(opts, serving, &order).await {
            Some((ok, message)) => (ok, message, false),
            None => {
                // nlbd is replaced by the new executable, whose process answers.
                replace_with(daemon, opts, order.file.clone().into());
                return Ok(());
            }
        },
        UpgradeKind::Bitstream => upgrade_bitstream(daemon, opts, &order).await,
    };
    order.result = Some(UpgradeResult {
        ok,
        // A card rebooted into an image that failed: the host is not as it was.
        changed: !ok && restart,
        message,
        at_unix_ms: fleet::now_unix_ms(),
    });
    let key = opts.keys.upgrade(&opts.host);
    let value = serde_json::to_vec(&order).map_err(|e| FleetError::Malformed {
        key: key.clone(),
        error: e.to_string(),
    })?;
    blocking(store, move |s| s.put(&key, &value, 0)).await?;
    if restart {
        // The card runs the new image, empty: this nlbd's state is the old card's. The same
        // executable starts again and loads the fleet's revision (the host stays drained).
        match std::env::current_exe() {
            Ok(exe) => replace_with(daemon, opts, exe),
            Err(e) => {
                error!(host = %opts.host, "cannot find this nlbd's executable to start again after the card's upgrade: {e}; restart nlbd")
            }
        }
    }
    Ok(())
}

/// Stops this nlbd to execute `exe` in its place.
fn replace_with(daemon: &Daemon, opts: &FleetOptions, exe: std::path::PathBuf) {
    info!(host = %opts.host, executable = %exe.display(), "stopping to execute {}", exe.display());
    if let Ok(mut r) = daemon.replacement.lock() {
        *r = Some(exe);
    }
    daemon.replace.notify_one();
}

/// Whether the card already runs the build a bitstream order names.
async fn running_build(daemon: &Daemon, order: &UpgradeOrder) -> bool {
    match daemon.engine_status(false).await {
        Ok(st) => order.build_id == Some(st.build_id),
        Err(_) => false,
    }
}

/// An nlbd executable: the answer, or None when nlbd is to be replaced by it.
async fn upgrade_binary(
    opts: &FleetOptions,
    serving: &Serving,
    order: &UpgradeOrder,
) -> Option<(bool, String)> {
    if order.sha256 == serving.binary_sha256 {
        return Some((
            true,
            format!(
                "running {} (SHA-256 {})",
                order.file,
                fleet::short_digest(&order.sha256)
            ),
        ));
    }
    let checked = order.clone();
    let verified = tokio::task::spawn_blocking(move || verify_binary(&checked))
        .await
        .unwrap_or_else(|e| Err(format!("the check's thread failed: {e}")));
    match verified {
        Ok(()) => {
            info!(host = %opts.host, binary = %order.file, "upgrade: {} verified; replacing this nlbd with it", order.file);
            None
        }
        Err(e) => {
            error!(host = %opts.host, binary = %order.file, "upgrade refused, this nlbd keeps running: {e}");
            Some((false, e))
        }
    }
}

/// A bitstream: checked, flashed and booted by the engine; the answer, and whether nlbd is to
/// start again (the card came back with the new image).
async fn upgrade_bitstream(
    daemon: &Daemon,
    opts: &FleetOptions,
    order: &UpgradeOrder,
) -> (bool, String, bool) {
    if running_build(daemon, order).await {
        return (
            true,
            format!(
                "the card runs build {:#010x} ({})",
                order.build_id.unwrap_or(0),
                order.file
            ),
            false,
        );
    }
    let checked = order.clone();
    let image = tokio::task::spawn_blocking(move || read_bitstream(&checked))
        .await
        .unwrap_or_else(|e| Err(format!("the check's thread failed: {e}")));
    let flashed = match image {
        Ok(image) => {
            info!(host = %opts.host, bitstream = %order.file, "upgrade: {} verified; flashing the card and rebooting it", order.file);
            daemon.flash(image).await
        }
        Err(message) => Err(FlashFailed {
            card_reset: false,
            message,
        }),
    };
    match flashed {
        Ok(f) => {
            info!(host = %opts.host, bitstream = %order.file, "the card runs build {:#010x} (was {:#010x}): {} bytes flashed in {:.1} s, back {:.1} s after the reboot; starting again to load the fleet's tables", f.build_after, f.build_before, f.bytes, f.flash_secs, f.reboot_secs);
            (
                true,
                format!(
                    "flashed {} ({} bytes in {:.1} s) and rebooted the card into build {:#010x} in {:.1} s",
                    order.file, f.bytes, f.flash_secs, f.build_after, f.reboot_secs
                ),
                true,
            )
        }
        Err(e) => {
            error!(host = %opts.host, bitstream = %order.file, card_reset = e.card_reset, "bitstream upgrade failed: {e}");
            // A card that was rebooted lost this nlbd's tables: start again to load them.
            (false, e.message, e.card_reset)
        }
    }
}

/// The bitstream of an upgrade order, if it is the one ordered (its SHA-256), parses, and
/// carries the build id the order names.
fn read_bitstream(order: &UpgradeOrder) -> Result<nlb_driver::flash::Bitstream, String> {
    let bytes =
        std::fs::read(&order.file).map_err(|e| format!("cannot read {}: {e}", order.file))?;
    let sha = fleet::bytes_sha256(&bytes);
    if sha != order.sha256 {
        return Err(format!(
            "{} has SHA-256 {sha}, the order says {}",
            order.file, order.sha256
        ));
    }
    let image =
        nlb_driver::flash::Bitstream::parse(bytes).map_err(|e| format!("{}: {e}", order.file))?;
    if image.usr_access != order.build_id {
        return Err(format!(
            "{}: its USR_ACCESS is {:?}, the order says {:?}",
            order.file, image.usr_access, order.build_id
        ));
    }
    Ok(image)
}

/// The executable of an upgrade order is the one ordered (its SHA-256) and runs here
/// (`--version` within 10 s).
fn verify_binary(order: &UpgradeOrder) -> Result<(), String> {
    let path = std::path::Path::new(&order.file);
    let sha = fleet::file_sha256(path).map_err(|e| format!("cannot read {}: {e}", order.file))?;
    if sha != order.sha256 {
        return Err(format!(
            "{} has SHA-256 {sha}, the order says {}",
            order.file, order.sha256
        ));
    }
    let mut child = std::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{} does not run here: {e}", order.file))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(format!("`{} --version` failed ({s})", order.file)),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{} --version` did not end within 10 s",
                    order.file
                ));
            }
            Err(e) => return Err(format!("{}: {e}", order.file)),
        }
    }
}

/// This host's drain as `PREFIX drain/NAME` says (`nlbctl drain HOST`): the announcer
/// withdraws the VIPs at once, or announces them again.
fn set_fleet_drain(daemon: &Daemon, opts: &FleetOptions, drained: bool) {
    let was = daemon.announce.fleet_drain.swap(drained, Ordering::Relaxed);
    if was != drained {
        if drained {
            info!(host = %opts.host, "drained by the fleet ({}): withdrawing the VIPs", opts.keys.drain(&opts.host));
        } else {
            info!(host = %opts.host, "undrained by the fleet: announcing the VIPs again");
        }
        daemon.announce.changed.notify_one();
    }
}

/// Applies revision `rev` through the reload path; a revision that does not apply is refused
/// and the one serving stays.
async fn apply(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    rev: i64,
    published: &Published,
) {
    if rev <= serving.revision {
        return;
    }
    let config = match parse(rev, published) {
        Ok(c) => c,
        Err(e) => return refuse(opts, serving, metrics, rev, e),
    };
    let snapshot = daemon.snapshot_for(&config);
    apply_parsed(
        daemon,
        opts,
        metrics,
        serving,
        (rev, published),
        config,
        snapshot,
    )
    .await;
}

/// Applies revision `rev` (published as `published`, parsed as `config`) under the health of
/// `snapshot`; a revision that does not apply is refused and the one serving stays.
async fn apply_parsed(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    (rev, published): (i64, &Published),
    config: Config,
    snapshot: nlbd::health::HealthSnapshot,
) {
    if rev <= serving.revision {
        return;
    }
    info!(host = %opts.host, revision = rev, file = %published.file, "applying revision {rev}");
    match daemon
        .reload_under(
            config,
            published.ids.as_ref().map(fleet::Ids::symbols),
            snapshot,
        )
        .await
    {
        Ok(()) => {
            serving.revision = rev;
            // A newer revision refused while this one waited stays refused.
            if serving.refused.as_ref().is_some_and(|r| r.revision <= rev) {
                serving.refused = None;
            }
            metrics.revision.store(rev, Ordering::Relaxed);
            metrics.applied.fetch_add(1, Ordering::Relaxed);
            info!(host = %opts.host, revision = rev, "serving revision {rev}");
        }
        Err(e) => refuse(opts, serving, metrics, rev, e),
    }
}

fn refuse(
    opts: &FleetOptions,
    serving: &mut Serving,
    metrics: &FleetMetrics,
    rev: i64,
    error: String,
) {
    error!(
        host = %opts.host,
        revision = rev,
        "revision {rev} refused, revision {} keeps serving: {error}",
        serving.revision
    );
    metrics.refused.fetch_add(1, Ordering::Relaxed);
    serving.refused = Some(Refused {
        revision: rev,
        error,
    });
}

/// Writes this host's record with the lease when it changed (or was never written in this
/// session).
async fn write_record(
    daemon: &Daemon,
    store: &Store,
    opts: &FleetOptions,
    serving: &mut Serving,
    lease: i64,
) -> Result<(), FleetError> {
    let bgp = daemon.announce.view();
    let draining = daemon.announce.drained();
    let status = daemon
        .engine_status(draining)
        .await
        .map_err(|e| FleetError::Unreachable {
            endpoints: "the engine".into(),
            error: e,
        })?;
    let mut record = HostRecord {
        host: opts.host.clone(),
        revision: serving.revision,
        tables_digest: status.tables_digest.clone(),
        config_digest: status.config_digest.clone(),
        profile: status.profile.to_string(),
        generation: status.generation,
        probing: daemon.shared.as_ref().map_or(0, |s| s.probing() as u64),
        refused: serving.refused.clone(),
        binary_sha256: serving.binary_sha256.clone(),
        build_id: Some(status.build_id),
        announced: bgp.as_ref().map(announced).unwrap_or_default(),
        withheld: bgp.map(|b| b.withheld).unwrap_or_default(),
        draining,
        // What `nlbctl drain` waits to see stand still.
        vip_packets: status
            .counters
            .as_ref()
            .filter(|_| draining)
            .map(|c| c.rules.iter().map(|(_, v)| v.packets).sum()),
        pinned: Some(serving.pinned_progress.clone()),
        updated_unix_ms: 0,
    };
    if let Some(w) = &serving.written {
        let mut same = w.clone();
        same.updated_unix_ms = 0;
        if same == record {
            return Ok(());
        }
    }
    record.updated_unix_ms = fleet::now_unix_ms();
    let value = serde_json::to_vec(&record).map_err(|e| FleetError::Malformed {
        key: opts.keys.host(&opts.host),
        error: e.to_string(),
    })?;
    let key = opts.keys.host(&opts.host);
    blocking(store, move |s| s.put(&key, &value, lease)).await?;
    serving.written = Some(record);
    Ok(())
}

/// Writes this host's record when its pinned connections' progress changed since it was
/// written (it installed another host's write): drains and changes of the tables wait on it.
async fn write_progress(
    daemon: &Daemon,
    store: &Store,
    opts: &FleetOptions,
    serving: &mut Serving,
    lease: i64,
) -> Result<(), FleetError> {
    let written = serving.written.as_ref().and_then(|r| r.pinned.as_ref());
    if written == Some(&serving.pinned_progress) {
        return Ok(());
    }
    write_record(daemon, store, opts, serving, lease).await
}

/// The routes some neighbour has from this host now.
fn announced(b: &nlb_control::admin_proto::BgpData) -> Vec<String> {
    let all: std::collections::BTreeSet<&String> =
        b.neighbors.iter().flat_map(|n| &n.announced).collect();
    all.into_iter().cloned().collect()
}

/// Shared health, one step (SPEC R11.2): re-derives what this host probes from the live hosts
/// (and gives its checker those targets), loads the fleet's decisions when they changed, and
/// writes this host's reports (its checker's decisions on what it probes) with its lease,
/// deleting those of targets it no longer probes.
async fn shared_step(
    session: &change::Session<'_>,
    shared: &SharedHealth,
    serving: &mut Serving,
) -> Result<(), FleetError> {
    let change::Session {
        daemon,
        store,
        opts,
        metrics,
        lease,
    } = *session;
    if let Some(assigned) = shared.reassign() {
        info!(
            host = %opts.host,
            probing = assigned.len(),
            "probing {} health-check targets for the fleet",
            assigned.len()
        );
        if let Err(e) = daemon.checker.set_targets(assigned) {
            // The targets come from a configuration that compiled; this would be a bug.
            error!(host = %opts.host, error = %e, "the health checker refused this host's targets");
        }
    }
    metrics
        .probing
        .store(shared.probing() as u64, Ordering::Relaxed);
    // The fleet's decisions change the tables make-before-break ([`change`]).
    if let Some((changes, snapshot)) = fleet_health_changes(shared, opts) {
        change::stage_health(session, serving, changes, snapshot).await?;
    }
    let (puts, deletes) = shared.own_reports(&daemon.checker.snapshot());
    if puts.is_empty() && deletes.is_empty() {
        return Ok(());
    }
    let mut writes = Vec::new();
    for (target, report) in &puts {
        let key = opts
            .keys
            .health_report(&target.pool, &target.backend, &opts.host);
        let value = serde_json::to_vec(report).map_err(|e| FleetError::Malformed {
            key: key.clone(),
            error: e.to_string(),
        })?;
        writes.push((key, Some(value)));
    }
    for target in &deletes {
        let key = opts
            .keys
            .health_report(&target.pool, &target.backend, &opts.host);
        writes.push((key, None));
    }
    let n = writes.len() as u64;
    blocking(store, move |s| {
        for (key, value) in writes {
            match value {
                Some(v) => s.put(&key, &v, lease)?,
                None => s.delete(&key)?,
            }
        }
        Ok(())
    })
    .await?;
    metrics.reports_written.fetch_add(n, Ordering::Relaxed);
    // The view holds them at once (the watch echoes them later): no second put meanwhile.
    for (target, report) in puts {
        shared.report(target, &opts.host, Some(report));
    }
    for target in deletes {
        shared.report(target, &opts.host, None);
    }
    Ok(())
}

/// Sends the fleet's health decisions to the engine when they changed (before this host
/// registers: it serves nothing yet).
fn load_fleet_health(
    daemon: &Daemon,
    shared: &SharedHealth,
    opts: &FleetOptions,
) -> Result<(), FleetError> {
    let Some((changes, snapshot)) = fleet_health_changes(shared, opts) else {
        return Ok(());
    };
    daemon
        .send(Command::Health { changes, snapshot })
        .map_err(|e| FleetError::Unreachable {
            endpoints: "the engine".into(),
            error: e,
        })
}

/// The fleet's health decisions when they changed, logged.
fn fleet_health_changes(
    shared: &SharedHealth,
    opts: &FleetOptions,
) -> Option<(
    Vec<nlbd::health::HealthChange>,
    nlbd::health::HealthSnapshot,
)> {
    let (changes, snapshot) = shared.remerge()?;
    for c in &changes {
        info!(
            host = %opts.host,
            target = %c.target,
            from = %c.previous,
            to = %c.health,
            "fleet health changed"
        );
    }
    Some((changes, snapshot))
}
