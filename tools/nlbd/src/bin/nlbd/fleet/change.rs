//! Changes of the tables made before they break (SPEC R15.2; docs/fleet.md, "Pinned
//! connections").
//!
//! In a fleet every host loads a new revision, or new health decisions, at about the same
//! time. A connection whose backend the new tables no longer choose stays on it only where a
//! connection table holds it: on the host that tracks it, and on the others once that host
//! has published it and they have installed it as a copy. Loaded at once, the new tables
//! leave a window of tens of milliseconds (a scan, an etcd write, the watch, an install) in
//! which ECMP may move such a connection to a host without its copy (a host drained, back
//! or lost), and that host would choose again. So a change is made before it breaks:
//!
//! 1. the engine prepares the new tables without loading them, and says which of this host's
//!    connections they would pin;
//! 2. this host publishes those beside the ones its tables pin now, and writes the digest of
//!    the tables it prepared into its record;
//! 3. it loads them once every host has prepared the same tables (or serves them already)
//!    and installed every other host's latest write ([`fleet::tables_prepared`]), or after
//!    [`PREPARE_WAIT`] at most.
//!
//! A change that arrives while another waits joins it: the tables are prepared again with
//! both, and the wait goes on from the first.

use super::{
    apply_parsed, refuse, revision_changed, write_pinned, write_record, FleetMetrics, FleetOptions,
    Serving,
};
use crate::Daemon;
use flowtable_compiler::Config;
use nlb_control::fleet::{self, FleetError, HostRecord, PinnedConnection, Published, Store};
use nlbd::engine::Command;
use nlbd::health::{HealthChange, HealthSnapshot};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// The longest a change of the tables waits for the fleet before it loads anyway: a host that
/// stopped answering (until its lease ends), or one whose nlbd does not prepare tables.
pub(super) const PREPARE_WAIT: Duration = Duration::from_secs(2);

/// How often a waiting change is checked besides the watch's deliveries (the hosts' records
/// arrive by the watch; this catches the end of the wait and a retried installation).
pub(super) const CHECK_PERIOD: Duration = Duration::from_millis(50);

/// What a session's change steps need.
pub(super) struct Session<'a> {
    pub daemon: &'a Daemon,
    pub store: &'a Store,
    pub opts: &'a FleetOptions,
    pub metrics: &'a FleetMetrics,
    pub lease: i64,
}

/// A change of the tables prepared and not loaded yet.
pub(super) struct Pending {
    /// The newest revision to apply (parsed), if the change holds one.
    revision: Option<(i64, Published, Config)>,
    /// The revision that waited before `revision` arrived: applied instead if `revision` does
    /// not compile.
    fallback: Option<(i64, Published, Config)>,
    /// Health decisions to apply (their latencies are recorded when they load).
    changes: Vec<HealthChange>,
    /// The fleet's health after those decisions.
    health: Option<HealthSnapshot>,
    /// The digest of the prepared tables (empty until prepared).
    digest: String,
    /// What this host published while the change waited: every set it prepared (a change
    /// that joins another adds to it; the tables of either may serve on other hosts).
    published: BTreeSet<PinnedConnection>,
    /// When the first change of this one arrived.
    since: Instant,
}

impl Pending {
    fn new() -> Pending {
        Pending {
            revision: None,
            fallback: None,
            changes: Vec::new(),
            health: None,
            digest: String::new(),
            published: BTreeSet::new(),
            since: Instant::now(),
        }
    }
}

/// How a change loaded (the metrics' `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every host prepared it.
    Shared,
    /// After [`PREPARE_WAIT`], or when the session with etcd ended.
    WaitedTooLong,
    /// The tables stay the same.
    Unchanged,
}

/// A new revision seen by the watch: prepared (or refused when it does not parse or compile;
/// a revision that waited before it is then applied as it would have been).
pub(super) async fn stage_revision(
    s: &Session<'_>,
    serving: &mut Serving,
    rev: i64,
    published: Result<Published, String>,
) -> Result<(), FleetError> {
    if rev <= serving.revision {
        return Ok(());
    }
    let parsed = published.and_then(|p| super::parse(rev, &p).map(|c| (p, c)));
    let (published, config) = match parsed {
        Ok(pc) => pc,
        Err(e) => {
            refuse(s.opts, serving, s.metrics, rev, e);
            return write_record(s.daemon, s.store, s.opts, serving, s.lease).await;
        }
    };
    info!(host = %s.opts.host, revision = rev, file = %published.file, "preparing revision {rev}");
    let p = serving.pending.get_or_insert_with(Pending::new);
    p.fallback = p.revision.take().or(p.fallback.take());
    p.revision = Some((rev, published, config));
    prepare(s, serving).await
}

/// New health decisions of the fleet: prepared with the change waiting, if any.
pub(super) async fn stage_health(
    s: &Session<'_>,
    serving: &mut Serving,
    changes: Vec<HealthChange>,
    snapshot: HealthSnapshot,
) -> Result<(), FleetError> {
    let p = serving.pending.get_or_insert_with(Pending::new);
    p.changes.extend(changes);
    p.health = Some(snapshot);
    prepare(s, serving).await
}

/// Prepares the waiting change: tables that stay the same load at once; others are published
/// (what they would pin) and wait for the fleet.
async fn prepare(s: &Session<'_>, serving: &mut Serving) -> Result<(), FleetError> {
    let Some(p) = serving.pending.as_mut() else {
        return Ok(());
    };
    let (config, snapshot) = match (&p.revision, &p.health) {
        (Some((_, published, config)), _) => {
            let ids = published.ids.as_ref().map(fleet::Ids::symbols);
            (Some((config.clone(), ids)), s.daemon.snapshot_for(config))
        }
        (None, Some(health)) => (None, health.clone()),
        (None, None) => return Ok(()),
    };
    let prepared = match s.daemon.prepare(config, snapshot).await {
        Ok(t) => t,
        Err(e) => {
            let Some((rev, ..)) = p.revision.take() else {
                // Health alone: the engine reports the same error when it applies them.
                error!(host = %s.opts.host, "preparing the tables for health changes failed: {e}");
                return commit(s, serving, Outcome::WaitedTooLong).await;
            };
            p.revision = p.fallback.take();
            let left = p.revision.is_some() || !p.changes.is_empty();
            refuse(s.opts, serving, s.metrics, rev, e);
            if !left {
                drop_pending(serving);
                return write_record(s.daemon, s.store, s.opts, serving, s.lease).await;
            }
            return Box::pin(prepare(s, serving)).await;
        }
    };
    p.fallback = None;
    if !prepared.changed {
        return commit(s, serving, Outcome::Unchanged).await;
    }
    p.digest = prepared.digest.clone();
    p.published.extend(prepared.pinned);
    let conns: Vec<PinnedConnection> = p.published.iter().cloned().collect();
    let n = conns.len();
    write_pinned(
        s.store,
        s.opts,
        serving,
        s.lease,
        prepared.serving_digest,
        conns,
    )
    .await?;
    let progress = &mut serving.pinned_progress;
    progress.prepared = Some(prepared.digest.clone());
    progress.prepared_revision = progress.written_revision;
    write_record(s.daemon, s.store, s.opts, serving, s.lease).await?;
    info!(
        host = %s.opts.host,
        tables = %fleet::short_digest(&prepared.digest),
        pinned = n,
        "new tables prepared: {n} connections they or the tables serving pin published; loading them once every host has"
    );
    Ok(())
}

/// A waiting change loads once the fleet prepared it, or after [`PREPARE_WAIT`].
pub(super) async fn check(s: &Session<'_>, serving: &mut Serving) -> Result<(), FleetError> {
    if serving.pending.is_none() {
        return Ok(());
    }
    // The record says how far this host installed the others' writes.
    super::write_progress(s.daemon, s.store, s.opts, serving, s.lease).await?;
    // The records as the watch delivered them (this host's own as written).
    let mut records: Vec<HostRecord> = serving
        .records
        .values()
        .filter(|r| r.host != s.opts.host)
        .cloned()
        .collect();
    records.extend(serving.written.clone());
    let Some(p) = &serving.pending else {
        return Ok(());
    };
    let rev = p.revision.as_ref().map_or(serving.revision, |r| r.0);
    match fleet::tables_prepared(&records, &p.digest, rev) {
        Ok(()) => commit(s, serving, Outcome::Shared).await,
        Err(_) if p.since.elapsed() < PREPARE_WAIT => Ok(()),
        Err(why) => {
            warn!(
                host = %s.opts.host,
                "loading new tables although {why} after {} s: connections they pin may break where ECMP moves them now",
                PREPARE_WAIT.as_secs()
            );
            commit(s, serving, Outcome::WaitedTooLong).await
        }
    }
}

/// Loads the waiting change, then publishes what the new tables pin.
async fn commit(
    s: &Session<'_>,
    serving: &mut Serving,
    outcome: Outcome,
) -> Result<(), FleetError> {
    load(s.daemon, s.opts, s.metrics, serving, outcome).await;
    revision_changed(s.daemon, s.store, s.opts, serving, s.lease).await
}

/// When a session ends (etcd lost) or starts: a change that waited loads now; the fleet
/// cannot be waited for without etcd.
pub(super) async fn load_now(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
) {
    load(daemon, opts, metrics, serving, Outcome::WaitedTooLong).await;
}

/// Forgets a waiting change; what it published is replaced at the next publication.
fn drop_pending(serving: &mut Serving) {
    if let Some(p) = serving.pending.take() {
        if !p.published.is_empty() {
            serving.pinned_again = true;
        }
    }
    serving.pinned_progress.prepared = None;
}

async fn load(
    daemon: &Daemon,
    opts: &FleetOptions,
    metrics: &FleetMetrics,
    serving: &mut Serving,
    outcome: Outcome,
) {
    let Some(p) = serving.pending.take() else {
        return;
    };
    let counter = match outcome {
        Outcome::Shared => &metrics.changes_shared,
        Outcome::WaitedTooLong => &metrics.changes_timed_out,
        Outcome::Unchanged => &metrics.changes_unchanged,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    if outcome == Outcome::Unchanged {
        serving.pinned_progress.prepared = None;
    } else {
        let waited = p.since.elapsed();
        metrics
            .change_wait_us
            .store(waited.as_micros() as u64, Ordering::Relaxed);
        info!(
            host = %opts.host,
            tables = %fleet::short_digest(&p.digest),
            waited_ms = waited.as_secs_f64() * 1e3,
            shared = outcome == Outcome::Shared,
            "loading the prepared tables"
        );
    }
    // What the new tables pin is published again even if the engine finds it unchanged (the
    // prepared set held more).
    if !p.published.is_empty() {
        serving.pinned_again = true;
    }
    // The health as it is now: a decision taken while the change waited stays applied.
    let mut health = p.health;
    if let Some((rev, published, config)) = p.revision {
        let snapshot = daemon.snapshot_for(&config);
        health = Some(snapshot.clone());
        apply_parsed(
            daemon,
            opts,
            metrics,
            serving,
            (rev, &published),
            config,
            snapshot,
        )
        .await;
    }
    if let (false, Some(snapshot)) = (p.changes.is_empty(), health) {
        let command = Command::Health {
            changes: p.changes,
            snapshot,
        };
        if let Err(e) = daemon.send(command) {
            error!(host = %opts.host, "health changes not applied: {e}");
        }
    }
}
