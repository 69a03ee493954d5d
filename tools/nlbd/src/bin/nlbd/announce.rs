//! Which VIPs this host announces by BGP, and when (SPEC R15.1; docs/fleet.md, "Announcing
//! VIPs by BGP").
//!
//! Every quarter second (and at once when something it watches changes) the task decides: the
//! VIPs of the configuration serving are announced, as host routes, to every neighbour of its
//! `bgp` section, unless one of these holds, and then nothing is (each reason is shown in
//! `nlbctl status`, the metrics and the fleet's host record):
//!
//! - the engine does not answer, or the NIC's counters cannot be read (the NIC is gone);
//! - no tables are loaded;
//! - the host is drained (`nlbctl drain`: through etcd for a fleet host, or the admin socket);
//! - with `--etcd`: the host has not registered in the fleet since it started (it has not
//!   caught up with the live revision and the fleet's health), or etcd holds a newer revision
//!   than the one it serves for more than [`BEHIND_GRACE`] (it refused it, or cannot apply
//!   it). While etcd is unreachable the last revision keeps serving and stays announced (fail
//!   static, SPEC R11.4);
//!
//! Stopping nlbd (SIGTERM, SIGINT) withdraws everything before it exits; a process that dies
//! or replaces itself leaves its routes to the neighbours' graceful restart ([`nlbd::bgp`]).

use crate::Daemon;
use nlb_config::{Bgp, Config};
use nlb_control::admin_proto::BgpData;
use nlb_control::bgp::{Prefix, RestartState};
use nlbd::bgp::{Announcer, NeighborStatus};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tracing::{info, warn};

/// How often the decision is taken again without a change to wake it.
const PERIOD: Duration = Duration::from_millis(250);
/// How long a host may serve an older revision than etcd's before it withdraws: applying a
/// revision takes milliseconds, refusing one is forever.
pub const BEHIND_GRACE: Duration = Duration::from_secs(3);
/// How long stopping waits for the neighbours to take the withdrawal.
pub const STOP_LIMIT: Duration = Duration::from_secs(2);

/// What the configuration serving says about announcing.
#[derive(Debug, Clone, Default, PartialEq)]
struct Served {
    vips: BTreeSet<Prefix>,
    bgp: Option<Bgp>,
}

/// What differs between the hosts of a fleet, which share one configuration (nlbd's
/// `--bgp-router-id`, `--bgp-next-hop`, `--bgp-next-hop-ipv6`).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostBgp {
    /// Instead of `routerId`.
    pub router_id: Option<std::net::Ipv4Addr>,
    /// Instead of `nextHopIpv4`.
    pub next_hop_ipv4: Option<std::net::Ipv4Addr>,
    /// Instead of `nextHopIpv6`.
    pub next_hop_ipv6: Option<std::net::Ipv6Addr>,
}

impl HostBgp {
    fn apply(&self, b: &mut Bgp) {
        if let Some(r) = self.router_id {
            b.router_id = r;
        }
        if let Some(n) = self.next_hop_ipv4 {
            b.next_hop_ipv4 = Some(n);
        }
        if let Some(n) = self.next_hop_ipv6 {
            b.next_hop_ipv6 = Some(n);
        }
    }
}

/// The announcing state the daemon's tasks share.
#[derive(Debug, Default)]
pub struct Announce {
    host: HostBgp,
    /// The NIC served tables when nlbd started: it kept forwarding across a restart.
    kept_forwarding: bool,
    /// Drained on this host alone (the admin socket's `drain`).
    pub local_drain: AtomicBool,
    /// Drained by the fleet (`PREFIX drain/NAME`, `nlbctl drain HOST`).
    pub fleet_drain: AtomicBool,
    served: Mutex<Served>,
    view: Mutex<Option<BgpData>>,
    announcer: tokio::sync::Mutex<Option<Announcer>>,
    /// Wakes the task.
    pub changed: Notify,
}

/// What a configuration says about announcing, taken before the configuration goes to the
/// engine and committed once it serves ([`Announce::serving`]).
#[derive(Debug)]
pub struct Pending(Served);

impl Announce {
    /// Nothing served yet; `host` adjusts every configuration's `bgp` section;
    /// `kept_forwarding`: the NIC served tables when nlbd started.
    pub fn new(host: HostBgp, kept_forwarding: bool) -> Announce {
        Announce {
            host,
            kept_forwarding,
            ..Announce::default()
        }
    }

    /// What `config` would announce.
    pub fn pending(config: &Config) -> Pending {
        let vips = config
            .forwarding_rules
            .iter()
            .map(|r| Prefix::host(r.ip_address))
            .collect();
        Pending(Served {
            vips,
            bgp: config.bgp.clone(),
        })
    }

    /// Takes in the configuration that serves now (at start and after each reload).
    pub fn serving(&self, p: Pending) {
        let mut served = p.0;
        if let Some(b) = &mut served.bgp {
            self.host.apply(b);
        }
        if let Ok(mut s) = self.served.lock() {
            *s = served;
        }
        self.changed.notify_one();
    }

    /// The latest decision (None without a `bgp` section), with the neighbours' sessions as
    /// they are now.
    pub fn view(&self) -> Option<BgpData> {
        let mut view = self.view.lock().ok().and_then(|v| v.clone())?;
        if let Ok(guard) = self.announcer.try_lock() {
            if let Some(an) = guard.as_ref() {
                view.neighbors = an.status();
            }
        }
        Some(view)
    }

    /// Whether the host is drained, either way.
    pub fn drained(&self) -> bool {
        self.local_drain.load(Ordering::Relaxed) || self.fleet_drain.load(Ordering::Relaxed)
    }

    /// Withdraws everything and ends the sessions (nlbd stops).
    pub async fn stop(&self, reason: &str) {
        if let Some(a) = self.announcer.lock().await.take() {
            info!("withdrawing the VIPs from the BGP neighbours: {reason}");
            a.stop(reason, STOP_LIMIT).await;
        }
    }

    /// Ends the sessions without withdrawing (nlbd replaces itself: graceful restart).
    pub async fn abandon(&self) {
        if let Some(a) = self.announcer.lock().await.take() {
            a.abandon();
        }
    }
}

/// Runs the decisions until aborted.
pub async fn run(daemon: Arc<Daemon>) {
    let a = daemon.announce.clone();
    let started = Instant::now();
    let mut behind_since: Option<Instant> = None;
    let mut last_withheld: Vec<String> = Vec::new();
    loop {
        let served = a.served.lock().map(|s| s.clone()).unwrap_or_default();
        let mut withheld = Vec::new();
        let status = daemon.engine_status(true).await;
        match &status {
            Err(e) => withheld.push(format!("the engine does not answer: {e}")),
            Ok(s) => {
                if s.counters.is_none() {
                    withheld.push("the NIC does not answer (its counters cannot be read)".into());
                }
                if s.tables_digest.is_empty() || s.generation == 0 {
                    withheld.push("no tables loaded".into());
                }
            }
        }
        if a.drained() {
            withheld.push("drained (nlbctl drain)".into());
        }
        if let Some(f) = &daemon.fleet {
            let revision = f.revision.load(Ordering::Relaxed);
            let live = f.live_revision.load(Ordering::Relaxed);
            if !f.ever_registered.load(Ordering::Relaxed) {
                withheld.push(
                    "not registered in the fleet yet (the live revision and the fleet's health first)"
                        .into(),
                );
                behind_since = None;
            } else if f.etcd_up.load(Ordering::Relaxed) && live > revision {
                let since = *behind_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= BEHIND_GRACE {
                    withheld.push(format!(
                        "revision {live} is live in etcd, this host serves revision {revision}"
                    ));
                }
            } else {
                behind_since = None;
            }
        }
        let wanted: BTreeSet<Prefix> = if withheld.is_empty() {
            served.vips.clone()
        } else {
            BTreeSet::new()
        };
        if withheld != last_withheld {
            if withheld.is_empty() {
                info!(
                    vips = served.vips.len(),
                    "announcing the VIPs this host serves"
                );
            } else {
                warn!("not announcing: {}", withheld.join("; "));
            }
            last_withheld = withheld.clone();
        }
        let view = {
            let mut guard = a.announcer.lock().await;
            match (&served.bgp, guard.as_ref()) {
                (None, Some(_)) => {
                    if let Some(old) = guard.take() {
                        info!("the configuration has no bgp section any more: withdrawing");
                        old.stop("bgp removed from the configuration", STOP_LIMIT)
                            .await;
                    }
                }
                (Some(b), Some(cur)) if cur.config() != b => {
                    // New session settings: the old sessions end without withdrawing, and
                    // the neighbours' graceful restart carries the routes to the new ones.
                    if let Some(old) = guard.take() {
                        info!("the bgp section changed: new sessions");
                        old.abandon();
                    }
                }
                _ => {}
            }
            // The sessions start once there is something to announce, or a reason to
            // announce nothing that will not pass by itself (a drain), or after half the
            // restart time: a restarted nlbd that connected while it still catches up would
            // end the neighbours' graceful restart with nothing (RFC 4724's End-of-RIB) and
            // take the routes away from a NIC that forwards.
            let ready = |b: &Bgp| {
                withheld.is_empty()
                    || a.drained()
                    || started.elapsed() >= Duration::from_secs(u64::from(b.graceful_restart) / 2)
            };
            if let (Some(b), None) = (&served.bgp, guard.as_ref()) {
                if ready(b) {
                    let kept = a.kept_forwarding;
                    *guard = Some(Announcer::start(
                        b,
                        RestartState {
                            restarted: kept,
                            forwarding: kept,
                        },
                    ));
                }
            }
            served.bgp.as_ref().map(|b| {
                let neighbors = match guard.as_ref() {
                    Some(an) => {
                        an.set(wanted.clone());
                        an.status()
                    }
                    // Not started yet: every neighbour waits.
                    None => b
                        .neighbors
                        .iter()
                        .map(|n| NeighborStatus {
                            neighbor: std::net::SocketAddr::new(n.address, n.port).to_string(),
                            asn: n.asn,
                            state: "Idle".into(),
                            last_error: Some(
                                "not connected yet: nlbd connects once it knows what to announce"
                                    .into(),
                            ),
                            ..NeighborStatus::default()
                        })
                        .collect(),
                };
                BgpData {
                    vips: served.vips.iter().map(ToString::to_string).collect(),
                    announcing: wanted.iter().map(ToString::to_string).collect(),
                    withheld: withheld.clone(),
                    draining: a.drained(),
                    drain_quiet_secs: b.drain_quiet,
                    neighbors,
                }
            })
        };
        if let Ok(mut v) = a.view.lock() {
            *v = view;
        }
        tokio::select! {
            () = tokio::time::sleep(PERIOD) => {}
            () = a.changed.notified() => {}
        }
    }
}
