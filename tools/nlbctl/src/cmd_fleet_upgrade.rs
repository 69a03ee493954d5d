//! `nlbctl fleet upgrade --binary FILE` / `--bitstream FILE`: a new nlbd or a new card image on
//! every host of the fleet, one host at a time (docs/fleet.md, "Rolling upgrades", SPEC R15.2).

use crate::cmd_drain::{self, Host};
use crate::common::{self, CliError};
use nlb_control::fleet::{self, HostRecord, Store, UpgradeKind, UpgradeOrder};
use std::time::{Duration, Instant};

/// Replace nlbd (--binary) or the card's bitstream (--bitstream) on every host, one host at a
/// time: drain it (`nlbctl drain`), have it check FILE and take it, wait until it serves the
/// live revision again with the fleet's tables digest and runs FILE, announce it again, then
/// the next host.
///
/// An nlbd executable is checked (its SHA-256 and `FILE --version`) and executed in place of
/// the running nlbd. A bitstream is checked (its SHA-256, its format, the card's FPGA part),
/// written into the card's user flash slot and booted (the card then reports the bitstream's
/// USR_ACCESS word as its build id); the card comes back empty and nlbd starts again, loading
/// the fleet's revision and health.
///
/// FILE must be at the same path on every host. The first host that fails stops the upgrade:
/// a host that refused FILE (nothing changed on it) is announced again; a host that did not
/// come back stays drained; the hosts after it keep what they run and keep serving. Exit
/// status 1 then, naming the host and why.
///
/// Examples: nlbctl fleet upgrade --binary /opt/nlb/nlbd-0.2.0 --etcd 10.0.0.5:2379
///           nlbctl fleet upgrade --bitstream /opt/nlb/nlb_top-au280.bit --etcd 10.0.0.5:2379
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["binary", "bitstream"])))]
pub struct Args {
    /// The new nlbd executable, by the path every host sees it at.
    #[arg(long, value_name = "FILE")]
    binary: Option<std::path::PathBuf>,
    /// The new bitstream (Vivado .bit or raw .bin, with a USR_ACCESS word), by the path every
    /// host sees it at.
    #[arg(long, value_name = "FILE")]
    bitstream: Option<std::path::PathBuf>,
    #[command(flatten)]
    fleet: common::FleetStoreArgs,
    /// Only these hosts, in this order (comma-separated; default: every host, by name).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    hosts: Vec<String>,
    /// Seconds without a packet that count as drained (default: the configuration's
    /// `bgp.drainQuietSec`).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    quiet_sec: Option<u64>,
    /// Do not drain a host before its upgrade: it receives traffic while nlbd restarts or
    /// the card reboots (packets reaching it meanwhile are lost, and connections only it
    /// tracked break unless the other hosts share them). For a fleet that serves nothing, or
    /// to measure what draining saves.
    #[arg(long)]
    no_drain: bool,
    /// How long each step of a host may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    timeout: u64,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let user = |e: &dyn std::fmt::Display| CliError::user(format!("error: {e}"));
    let (kind, given) = match (&args.binary, &args.bitstream) {
        (Some(f), _) => (UpgradeKind::Binary, f),
        (None, Some(f)) => (UpgradeKind::Bitstream, f),
        (None, None) => return Err(user(&"--binary FILE or --bitstream FILE is required")),
    };
    let file =
        std::fs::canonicalize(given).map_err(|e| user(&format!("{}: {e}", given.display())))?;
    let sha256 =
        fleet::file_sha256(&file).map_err(|e| user(&format!("{}: {e}", file.display())))?;
    // A bitstream is checked here before any host is drained: it must parse and carry the
    // build id the cards will report.
    let build_id = match kind {
        UpgradeKind::Binary => None,
        UpgradeKind::Bitstream => Some(bitstream_build_id(&file)?),
    };
    let store = args.fleet.store()?;
    let survey = store.survey().map_err(|e| user(&e))?;
    let live = survey
        .live
        .as_ref()
        .map(|l| l.revision)
        .ok_or_else(|| user(&"nothing is published: no fleet to upgrade"))?;
    let mut hosts: Vec<HostRecord> = survey.hosts.into_iter().map(|(r, _)| r).collect();
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    let order_of_hosts: Vec<HostRecord> = if args.hosts.is_empty() {
        hosts.clone()
    } else {
        args.hosts
            .iter()
            .map(|h| {
                hosts
                    .iter()
                    .find(|r| &r.host == h)
                    .cloned()
                    .ok_or_else(|| user(&format!("{h} is not registered in the fleet")))
            })
            .collect::<Result<_, _>>()?
    };
    // Start only from a fleet that serves: every host on the live revision, none drained.
    for r in &hosts {
        if r.revision != live || r.draining {
            return Err(user(&format!(
                "not starting: {} {} (nlbctl fleet status)",
                r.host,
                if r.draining {
                    "is drained".to_string()
                } else {
                    format!("serves revision {}, the live one is {live}", r.revision)
                }
            )));
        }
    }
    let id = format!("{}-{}", fleet::now_unix_ms(), std::process::id());
    let path = file.display().to_string();
    outln!(
        "upgrading {} host(s) to {path} (SHA-256 {}{})",
        order_of_hosts.len(),
        fleet::short_digest(&sha256),
        build_id.map_or(String::new(), |b| format!(", build {b:#010x}"))
    );
    for (i, before) in order_of_hosts.iter().enumerate() {
        let step = Step {
            store: &store,
            before,
            limit: Duration::from_secs(args.timeout),
            drain: !args.no_drain,
        };
        let order = UpgradeOrder {
            id: id.clone(),
            kind,
            file: path.clone(),
            sha256: sha256.clone(),
            build_id,
            result: None,
        };
        if runs(before, &order) {
            outln!("{}: already runs it", before.host);
            continue;
        }
        if let Err(e) = step.run(&order, args.quiet_sec) {
            let untouched: Vec<&str> = order_of_hosts[i + 1..]
                .iter()
                .map(|r| r.host.as_str())
                .collect();
            return Err(CliError::user(format!(
                "error: {}: {e}; stopped, {} not upgraded and serving",
                before.host,
                if untouched.is_empty() {
                    "no other host".to_string()
                } else {
                    untouched.join(", ")
                }
            )));
        }
    }
    outln!("every host runs {path}");
    Ok(())
}

/// The USR_ACCESS word of the bitstream at `file`: the build id a card reports running it.
fn bitstream_build_id(file: &std::path::Path) -> Result<u32, CliError> {
    let path = file.display();
    let bytes = std::fs::read(file)
        .map_err(|e| CliError::user(format!("error: cannot read {path}: {e}")))?;
    let image = nlb_driver::flash::Bitstream::parse(bytes)
        .map_err(|e| CliError::user(format!("error: {path}: {e}")))?;
    image.usr_access.ok_or_else(|| {
        CliError::user(format!(
            "error: {path}: the bitstream carries no USR_ACCESS word, so no card could show \
             that it runs it; build it with USR_ACCESS set (Vivado: set_property \
             BITSTREAM.CONFIG.USR_ACCESS TIMESTAMP [current_design])"
        ))
    })
}

/// Whether the host already runs what `order` names.
fn runs(r: &HostRecord, order: &UpgradeOrder) -> bool {
    match order.kind {
        UpgradeKind::Binary => r.binary_sha256 == order.sha256,
        UpgradeKind::Bitstream => order.build_id.is_some() && r.build_id == order.build_id,
    }
}

/// A drain's error without its `error: `.
fn why(e: CliError) -> String {
    e.message
        .strip_prefix("error: ")
        .unwrap_or(&e.message)
        .to_string()
}

/// One host's upgrade.
struct Step<'a> {
    store: &'a Store,
    before: &'a HostRecord,
    limit: Duration,
    /// Drain the host first (else `--no-drain`).
    drain: bool,
}

impl Step<'_> {
    /// Drain, order, wait for the new nlbd, announce; Err says why not (and what the host
    /// was left as).
    fn run(&self, order: &UpgradeOrder, quiet: Option<u64>) -> Result<(), String> {
        let name = &self.before.host;
        let drain = cmd_drain::Fleet {
            store: self.store.clone(),
            name: name.clone(),
        };
        let start = Instant::now();
        let look = drain.look().map_err(why)?.ok_or("not registered")?;
        let drained_after = if self.drain {
            drain.set(true).map_err(why)?;
            let quiet = quiet.or_else(|| drain.quiet()).unwrap_or(5);
            let report =
                cmd_drain::wait(&drain, look, start, Duration::from_secs(quiet), self.limit)
                    .map_err(|e| format!("{} (it stays drained)", why(e)))?;
            Some(report.drained_after_secs)
        } else {
            None
        };
        let key = self.store.keys.upgrade(name);
        let value = serde_json::to_vec(order).map_err(|e| e.to_string())?;
        self.store.put(&key, &value, 0).map_err(|e| e.to_string())?;
        let ordered = Instant::now();
        let back = self.wait_new(order, &key, &drain);
        let _ = self.store.delete(&key);
        let restarted = back?;
        let restart_secs = ordered.elapsed().as_secs_f64();
        if self.drain {
            drain.set(false).map_err(why)?;
        }
        let announced = Instant::now();
        self.wait_for(name, "announce again", || {
            let r = self.record().ok()??;
            (!r.draining && r.announced == self.before.announced).then_some(())
        })?;
        let running = match order.kind {
            UpgradeKind::Binary => "running the new nlbd".to_string(),
            UpgradeKind::Bitstream => format!(
                "its card running build {:#010x}",
                restarted.build_id.unwrap_or(0)
            ),
        };
        outln!(
            "{name}: upgraded in {:.1} s: {}, {running} on revision {} with tables {} {restart_secs:.1} s after the order, announced again in {:.1} s",
            start.elapsed().as_secs_f64(),
            drained_after.map_or("not drained".to_string(), |d| format!("drained in {d:.1} s")),
            restarted.revision,
            fleet::short_digest(&restarted.tables_digest),
            announced.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// The host's record now.
    fn record(&self) -> Result<Option<HostRecord>, String> {
        let (records, _) = self.store.host_records().map_err(|e| e.to_string())?;
        Ok(records
            .into_iter()
            .map(|(r, _)| r)
            .find(|r| r.host == self.before.host))
    }

    /// Polls `f` until Some, for at most the step's limit.
    fn wait_for<T>(
        &self,
        name: &str,
        what: &str,
        mut f: impl FnMut() -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + self.limit;
        loop {
            if let Some(v) = f() {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{name} did not {what} within {} s",
                    self.limit.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Until the host runs the new nlbd on the live revision with the tables the other hosts
    /// serve on it, or refused the file.
    fn wait_new(
        &self,
        order: &UpgradeOrder,
        key: &str,
        drain: &cmd_drain::Fleet,
    ) -> Result<HostRecord, String> {
        let name = &self.before.host;
        let mut refused: Option<(String, bool)> = None;
        let what = match order.kind {
            UpgradeKind::Binary => "come back running the new nlbd",
            UpgradeKind::Bitstream => "come back with the card running the new bitstream",
        };
        let got = self.wait_for(name, what, || {
            if let Ok(Some(v)) = self.store.get(key) {
                if let Ok(o) = serde_json::from_slice::<UpgradeOrder>(&v) {
                    if let Some(r) = o.result.filter(|r| o.id == order.id && !r.ok) {
                        refused = Some((r.message, r.changed));
                        return Some(None);
                    }
                }
            }
            // The live revision now (one may be published during the upgrade) and the
            // tables the other hosts serve on it: the same revision and health give the same
            // digest everywhere (SPEC R11.1).
            let (Ok((Some(live), _)), Ok((records, _))) =
                (self.store.live(), self.store.host_records())
            else {
                return None;
            };
            let r = records.iter().map(|(r, _)| r).find(|r| r.host == *name)?;
            let others: Vec<&str> = records
                .iter()
                .map(|(r, _)| r)
                .filter(|o| o.host != *name && o.revision == live.revision && !o.draining)
                .map(|o| o.tables_digest.as_str())
                .collect();
            (runs(r, order)
                && r.revision == live.revision
                && (others.is_empty() || others.contains(&r.tables_digest.as_str())))
            .then(|| Some(r.clone()))
        });
        match (got, refused) {
            (Ok(Some(r)), _) => Ok(r),
            (_, Some((why, true))) => Err(format!(
                "failed: {why}; it stays drained (nlbctl fleet status, its nlbd's log)"
            )),
            (_, Some((why, false))) => {
                // Nothing changed on the host: it serves again.
                let _ = drain.set(false);
                Err(match order.kind {
                    UpgradeKind::Binary => format!(
                        "refused the new nlbd ({why}); it keeps its nlbd and is announced again"
                    ),
                    UpgradeKind::Bitstream => format!(
                        "refused the bitstream ({why}); its card keeps its image and it is announced again"
                    ),
                })
            }
            (Err(e), None) => Err(format!(
                "{e}: it stays drained (nlbctl fleet status, its nlbd's log)"
            )),
            (Ok(None), None) => Err("no answer".into()),
        }
    }
}
