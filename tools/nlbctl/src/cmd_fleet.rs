//! `nlbctl fleet status`: the hosts of the fleet, what each serves, and whether hosts on one
//! revision hold identical tables (SPEC R10.4, R11.1); `nlbctl fleet upgrade --binary`: a new
//! nlbd on every host, one at a time (`cmd_fleet_upgrade.rs`).

use crate::common::{self, CliError};
use nlb_control::fleet::{self, HostEntry, KeyProblem, Mismatch};

/// The fleet of hosts sharing a configuration in etcd.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(clap::Subcommand, Debug)]
enum FleetCommand {
    Status(StatusArgs),
    Upgrade(crate::cmd_fleet_upgrade::Args),
}

/// Every host registered in etcd: the revision it serves, its tables digest, its lease.
///
/// Exit status 1 when hosts serving the same revision hold different tables (a digest
/// mismatch: ECMP would send a flow's packets to different backends), or when etcd cannot be
/// reached. Hosts on an older revision are catching up and shown as behind. Keys under the
/// prefix that nlbctl and nlbd do not write (or whose values do not decode) are listed and
/// otherwise ignored.
#[derive(clap::Args, Debug)]
struct StatusArgs {
    #[command(flatten)]
    fleet: common::FleetStoreArgs,
    #[command(flatten)]
    output: common::Output,
}

#[derive(serde::Serialize)]
struct Report {
    prefix: String,
    live_revision: Option<i64>,
    live_file: Option<String>,
    published_tables_digest: Option<String>,
    hosts: Vec<HostEntry>,
    /// Revisions whose hosts disagree: per digest, its hosts.
    mismatches: Vec<Mismatch>,
    /// Keys under the prefix that are not what nlbctl and nlbd write, skipped.
    ignored_keys: Vec<KeyProblem>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let args = match args.command {
        FleetCommand::Status(a) => a,
        FleetCommand::Upgrade(a) => return crate::cmd_fleet_upgrade::run(a),
    };
    let store = args.fleet.store()?;
    let err = |e: fleet::FleetError| CliError::user(format!("error: {e}"));
    let survey = store.survey().map_err(err)?;
    let hosts = store.with_leases(survey.hosts).map_err(err)?;
    let records: Vec<_> = hosts.iter().map(|h| h.record.clone()).collect();
    let live = survey
        .live
        .as_ref()
        .and_then(|l| Some((l.revision, l.published.as_ref().ok()?)));
    let report = Report {
        prefix: store.keys.prefix().to_string(),
        // The revision of the config key, whatever it holds (hosts refuse what is not a
        // configuration: it shows as refused).
        live_revision: survey.live.as_ref().map(|l| l.revision),
        live_file: live.map(|(_, p)| p.file.clone()),
        published_tables_digest: live.map(|(_, p)| p.tables_digest.clone()),
        hosts,
        mismatches: fleet::digest_mismatches(&records),
        ignored_keys: survey.problems,
    };
    if args.output.json() {
        common::print_json(&report)?;
    } else {
        print_text(&report);
    }
    if report.mismatches.is_empty() {
        Ok(())
    } else {
        let what: Vec<String> = report
            .mismatches
            .iter()
            .map(|m| {
                let each: Vec<String> = m
                    .digests
                    .iter()
                    .map(|d| format!("{} on {}", short(&d.digest), d.hosts.join(", ")))
                    .collect();
                format!("revision {}: {}", m.revision, each.join("; "))
            })
            .collect();
        Err(CliError::user(format!(
            "error: hosts serving the same revision hold different tables (digest mismatch): {}",
            what.join(" | ")
        )))
    }
}

fn short(digest: &str) -> &str {
    fleet::short_digest(digest)
}

fn print_text(r: &Report) {
    match (&r.live_revision, &r.live_file, &r.published_tables_digest) {
        (Some(rev), Some(file), Some(d)) => outln!(
            "live revision {rev} under {}: {file} (published tables digest {})",
            r.prefix,
            short(d)
        ),
        (Some(rev), _, _) => outln!(
            "live revision {rev} under {}: not a configuration nlbctl published (below); hosts refuse it, and publishing replaces it",
            r.prefix
        ),
        _ => outln!("nothing published under {}", r.prefix),
    }
    outln!(
        "{:<20} {:>9} {:<13} {:<8} {:>10} {:>7} {:>11}  state",
        "host",
        "revision",
        "digest",
        "profile",
        "generation",
        "probing",
        "lease"
    );
    for h in &r.hosts {
        let rec = &h.record;
        let lease = match h.lease_ttl {
            Some((left, granted)) => format!("{left}/{granted} s"),
            None => "expired".to_string(),
        };
        let mut state = match r.live_revision {
            Some(live) if rec.revision == live => "serving the live revision".to_string(),
            Some(live) if rec.revision < live => {
                format!("behind ({} revisions)", live - rec.revision)
            }
            _ => "serving".to_string(),
        };
        if r.mismatches.iter().any(|m| m.revision == rec.revision) {
            state.push_str(", DIGEST MISMATCH");
        }
        if rec.draining {
            state.push_str(", drained");
        }
        let prepared = rec.pinned.as_ref().and_then(|p| p.prepared.as_deref());
        if let Some(next) = prepared.filter(|d| *d != rec.tables_digest) {
            state.push_str(&format!(
                ", new tables {} prepared (loading once every host has)",
                short(next)
            ));
        }
        if !rec.announced.is_empty() {
            state.push_str(&format!(", announcing {}", rec.announced.join(" ")));
        } else if !rec.withheld.is_empty() {
            state.push_str(&format!(", announcing nothing: {}", rec.withheld.join("; ")));
        }
        if let Some(refused) = &rec.refused {
            state.push_str(&format!(
                ", refused revision {}: {}",
                refused.revision, refused.error
            ));
        }
        outln!(
            "{:<20} {:>9} {:<13} {:<8} {:>10} {:>7} {:>11}  {state}",
            rec.host,
            rec.revision,
            short(&rec.tables_digest),
            rec.profile,
            rec.generation,
            rec.probing,
            lease
        );
    }
    if r.hosts.is_empty() {
        outln!("(no host registered)");
    }
    if !r.ignored_keys.is_empty() {
        outln!(
            "{} key{} under {} ignored (not what nlbctl and nlbd write):",
            r.ignored_keys.len(),
            if r.ignored_keys.len() == 1 { "" } else { "s" },
            r.prefix
        );
        for k in &r.ignored_keys {
            outln!("  {}: {}", k.key.escape_debug(), k.problem);
        }
    }
}
