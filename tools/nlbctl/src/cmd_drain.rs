//! `nlbctl drain`: withdraw a host's VIPs from BGP and wait until its NIC sees no more packets
//! for them (docs/fleet.md, "Draining a host").

use crate::admin;
use crate::common::{self, CliError};
use nlb_control::admin_proto as proto;
use nlb_control::etcd::EtcdArgs;
use nlb_control::fleet::{self, DrainRequest, Keys, Store};
use std::time::{Duration, Instant};

/// Drain a host: withdraw its VIPs from its BGP neighbours (the routers stop sending it new
/// flows, and ECMP moves its established ones to the other hosts, whose identical tables send
/// them to the same backends), then wait until its NIC has matched no packet to a forwarding
/// rule for the quiet time (the `bgp` section's `drainQuietSec`, or --quiet-sec), and report.
///
/// A fleet host (HOST with --etcd) is drained through etcd (`PREFIX drain/HOST`): the drain
/// outlives nlbd's restarts until `nlbctl drain HOST --undo`. With --socket, the nlbd of that
/// admin socket alone is drained, until --undo or its restart.
///
/// Exit status 1 when the host does not withdraw, or its packets do not stop, within
/// --timeout (the drain stays in place: undo it or look at the host), 0 once drained.
///
/// Example: nlbctl drain h2 --etcd 10.0.0.5:2379
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The fleet host's name (its nlbd's --host).
    #[arg(value_name = "HOST", required_unless_present = "socket", requires = "etcd")]
    host: Option<String>,
    /// etcd endpoints of the fleet (see nlbctl fleet status).
    #[arg(long, value_name = "ENDPOINTS", conflicts_with = "socket")]
    etcd: Option<String>,
    #[command(flatten)]
    etcd_options: EtcdArgs,
    /// Prefix of the fleet's keys in etcd.
    #[arg(long, value_name = "P", default_value = fleet::DEFAULT_PREFIX)]
    prefix: String,
    /// A single nlbd's admin socket (instead of HOST and --etcd).
    #[arg(long, value_name = "PATH")]
    socket: Option<std::path::PathBuf>,
    /// Announce the host's VIPs again (ends the drain) and return at once.
    #[arg(long)]
    undo: bool,
    /// Seconds without a packet that count as drained (default: the configuration's
    /// `bgp.drainQuietSec`, 5 without one).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    quiet_sec: Option<u64>,
    /// How long to wait in all, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    timeout: u64,
    #[command(flatten)]
    output: common::Output,
}

/// What the host shows at one look.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Look {
    /// It says it is drained.
    pub draining: bool,
    /// Routes its neighbours still have from it.
    pub announced: Vec<String>,
    /// Packets its NIC matched to a forwarding rule (None: not known yet).
    pub packets: Option<u64>,
}

/// Where the host is looked at.
pub(crate) trait Host {
    fn name(&self) -> String;
    fn set(&self, drain: bool) -> Result<(), CliError>;
    fn look(&self) -> Result<Option<Look>, CliError>;
    /// The configuration's quiet time, when it says one.
    fn quiet(&self) -> Option<u64>;
}

#[derive(serde::Serialize)]
pub(crate) struct Report {
    pub host: String,
    pub drained: bool,
    /// Seconds from the drain to the neighbours having no route from the host.
    pub withdrawn_after_secs: Option<f64>,
    /// Seconds from the drain to the last packet change seen.
    pub last_packet_after_secs: Option<f64>,
    pub quiet_secs: u64,
    /// Seconds from the drain to the report.
    pub drained_after_secs: f64,
    /// Packets matched while draining (from the drain on).
    pub packets_since_drain: u64,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let host: Box<dyn Host> = match (&args.socket, &args.host, &args.etcd) {
        (Some(socket), _, _) => Box::new(Local {
            socket: socket.clone(),
        }),
        (None, Some(name), Some(etcd)) => {
            let settings = args
                .etcd_options
                .settings(etcd)
                .map_err(|e| CliError::user(format!("error: {e}")))?;
            let keys =
                Keys::new(&args.prefix).map_err(|e| CliError::user(format!("error: {e}")))?;
            fleet::check_host_name(name).map_err(|e| CliError::user(format!("error: {e}")))?;
            Box::new(Fleet {
                store: Store::new(settings, keys),
                name: name.clone(),
            })
        }
        _ => return Err(CliError::user("error: give HOST with --etcd, or --socket")),
    };
    if args.undo {
        host.set(false)?;
        outln!("{}: undrained: its VIPs are announced again", host.name());
        return Ok(());
    }
    let Some(before) = host.look()? else {
        return Err(CliError::user(format!(
            "error: {} is not registered in the fleet (no live host record): nothing to drain",
            host.name()
        )));
    };
    let quiet = args.quiet_sec.or_else(|| host.quiet()).unwrap_or(5);
    let start = Instant::now();
    host.set(true)?;
    let report = wait(
        host.as_ref(),
        before,
        start,
        Duration::from_secs(quiet),
        Duration::from_secs(args.timeout),
    )?;
    if args.output.json() {
        common::print_json(&report)?;
    } else {
        let last = report.last_packet_after_secs.map_or_else(
            || "no packet after the first reading".to_string(),
            |s| format!("the last packet after {s:.1} s"),
        );
        outln!(
            "{}: drained in {:.1} s: routes withdrawn after {:.1} s, {last}, then none for {} s ({} packets since the drain)",
            report.host,
            report.drained_after_secs,
            report.withdrawn_after_secs.unwrap_or_default(),
            report.quiet_secs,
            report.packets_since_drain
        );
    }
    Ok(())
}

/// Waits until `host` withdrew everything and its packets stood still for `quiet`.
pub(crate) fn wait(
    host: &dyn Host,
    before: Look,
    start: Instant,
    quiet: Duration,
    limit: Duration,
) -> Result<Report, CliError> {
    let mut withdrawn: Option<Duration> = None;
    let mut first: Option<u64> = None;
    let mut last: Option<(u64, Instant)> = None;
    let mut last_change: Option<Duration> = None;
    let mut seen = before;
    loop {
        if let Some(look) = host.look()? {
            if look.draining && look.announced.is_empty() && withdrawn.is_none() {
                withdrawn = Some(start.elapsed());
            }
            if let (true, Some(p)) = (look.draining, look.packets) {
                first.get_or_insert(p);
                match last {
                    Some((q, _)) if q == p => {}
                    _ => {
                        if last.is_some() {
                            last_change = Some(start.elapsed());
                        }
                        last = Some((p, Instant::now()));
                    }
                }
            }
            seen = look;
        }
        if let (Some(w), Some((p, since))) = (withdrawn, last) {
            if since.elapsed() >= quiet {
                return Ok(Report {
                    host: host.name(),
                    drained: true,
                    withdrawn_after_secs: Some(w.as_secs_f64()),
                    last_packet_after_secs: last_change.map(|d| d.as_secs_f64()),
                    quiet_secs: quiet.as_secs(),
                    drained_after_secs: start.elapsed().as_secs_f64(),
                    packets_since_drain: p - first.unwrap_or(p),
                });
            }
        }
        if start.elapsed() >= limit {
            let why = if !seen.draining {
                "it does not say it is drained (is its nlbd running, and does it watch etcd?)"
                    .to_string()
            } else if !seen.announced.is_empty() {
                format!(
                    "its neighbours still have {} from it",
                    seen.announced.join(", ")
                )
            } else {
                "its NIC still matches packets to its forwarding rules (clients sending to this host directly, or a router that still has a route to it)".to_string()
            };
            return Err(CliError::user(format!(
                "error: {} not drained after {} s: {why}; the drain stays in place (nlbctl drain {} --undo ends it)",
                host.name(),
                limit.as_secs(),
                host.name()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A fleet host, through etcd.
pub(crate) struct Fleet {
    pub store: Store,
    pub name: String,
}

/// How long a drain waits for the hosts to share their pinned connections before it goes on
/// anyway (a host whose nlbd is stuck must not make every drain impossible).
const PINNED_SHARED_WAIT: Duration = Duration::from_secs(15);

impl Fleet {
    /// Waits until every host published its pinned connections for the tables it serves and
    /// installed every other host's ([`fleet::pinned_shared`]): a drain moves connections
    /// among all the other hosts (ECMP rehashes), and one pinned to a backend the tables no
    /// longer choose survives only where it was installed (SPEC R15.2). Usually immediate; a
    /// few hundred milliseconds after a change of the tables. After `limit`, warns and
    /// returns.
    fn wait_pinned_shared(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let why = match (self.store.live(), self.store.host_records()) {
                (Ok((live, _)), Ok((records, _))) => {
                    let live = live.map_or(0, |l| l.revision);
                    let records: Vec<_> = records.into_iter().map(|(r, _)| r).collect();
                    match fleet::pinned_shared(&records, live) {
                        Ok(()) => return,
                        Err(e) => e,
                    }
                }
                (Err(e), _) | (_, Err(e)) => e.to_string(),
            };
            if Instant::now() >= deadline {
                eprintln!(
                    "warning: draining {} although {why} after {} s: connections pinned to a backend the tables no longer choose may break",
                    self.name,
                    limit.as_secs()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Host for Fleet {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn set(&self, drain: bool) -> Result<(), CliError> {
        let key = self.store.keys.drain(&self.name);
        let err = |e: fleet::FleetError| CliError::user(format!("error: {e}"));
        if drain {
            self.wait_pinned_shared(PINNED_SHARED_WAIT);
            let request = DrainRequest {
                requested_unix_ms: fleet::now_unix_ms(),
                by: format!(
                    "nlbctl drain ({})",
                    std::env::var("USER").unwrap_or_else(|_| "unknown user".into())
                ),
            };
            let value = serde_json::to_vec(&request)
                .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
            // No lease: the drain outlives the host's restarts.
            self.store.put(&key, &value, 0).map_err(err)
        } else {
            self.store.delete(&key).map_err(err)
        }
    }

    fn look(&self) -> Result<Option<Look>, CliError> {
        let (records, _) = self
            .store
            .host_records()
            .map_err(|e| CliError::user(format!("error: {e}")))?;
        Ok(records
            .into_iter()
            .find(|(r, _)| r.host == self.name)
            .map(|(r, _)| Look {
                draining: r.draining,
                announced: r.announced,
                packets: r.vip_packets,
            }))
    }

    fn quiet(&self) -> Option<u64> {
        let (live, _) = self.store.live().ok()?;
        let p = live?.published.ok()?;
        let (config, _) = nlb_config::parse_config(&p.file, &p.source);
        config.bgp.map(|b| u64::from(b.drain_quiet))
    }
}

/// One nlbd, through its admin socket.
struct Local {
    socket: std::path::PathBuf,
}

impl Host for Local {
    fn name(&self) -> String {
        format!("nlbd at {}", self.socket.display())
    }

    fn set(&self, drain: bool) -> Result<(), CliError> {
        let _: proto::BgpData = admin::ask(&self.socket, &proto::Request::Drain { drain })?;
        Ok(())
    }

    fn look(&self) -> Result<Option<Look>, CliError> {
        let s: proto::StatusData = admin::ask(&self.socket, &proto::Request::Status)?;
        let Some(b) = s.bgp else {
            return Err(CliError::user(format!(
                "error: {} has no bgp section in its configuration: it announces nothing, so nothing drains it",
                self.name()
            )));
        };
        let c: proto::CountersData = admin::ask(&self.socket, &proto::Request::Counters)?;
        let announced: std::collections::BTreeSet<String> = b
            .neighbors
            .iter()
            .flat_map(|n| n.announced.iter().cloned())
            .collect();
        Ok(Some(Look {
            draining: b.draining,
            announced: announced.into_iter().collect(),
            packets: Some(c.rules.iter().map(|r| r.packets).sum()),
        }))
    }

    fn quiet(&self) -> Option<u64> {
        let s: proto::StatusData = admin::ask(&self.socket, &proto::Request::Status).ok()?;
        s.bgp.map(|b| u64::from(b.drain_quiet_secs))
    }
}
