//! `nlbctl fleet status`: the hosts of the fleet, what each serves, and whether hosts on one
//! revision hold identical tables (SPEC R10.4, R11.1).

use crate::common::{self, CliError};
use nlb_control::fleet::{self, HostEntry, Keys, Mismatch, Store};

/// The fleet of hosts sharing a configuration in etcd.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(clap::Subcommand, Debug)]
enum FleetCommand {
    Status(StatusArgs),
}

/// Every host registered in etcd: the revision it serves, its tables digest, its lease.
///
/// Exit status 1 when hosts serving the same revision hold different tables (a digest
/// mismatch: ECMP would send a flow's packets to different backends), or when etcd cannot be
/// reached. Hosts on an older revision are catching up and shown as behind.
#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// etcd endpoints: HOST:PORT or http://HOST:PORT, comma-separated.
    #[arg(long, value_name = "ENDPOINTS")]
    etcd: String,
    /// Prefix of the fleet's keys in etcd.
    #[arg(long, value_name = "P", default_value = fleet::DEFAULT_PREFIX)]
    prefix: String,
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
}


/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let FleetCommand::Status(args) = args.command;
    let endpoints =
        fleet::parse_endpoints(&args.etcd).map_err(|e| CliError::user(format!("error: {e}")))?;
    let keys = Keys::new(&args.prefix).map_err(|e| CliError::user(format!("error: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("internal error: cannot start a runtime: {e}")))?;
    let report = runtime.block_on(async {
        let err = |e: fleet::FleetError| CliError::user(format!("error: {e}"));
        let store = Store::connect(&endpoints, keys).await.map_err(err)?;
        let (live, _) = store.live().await.map_err(err)?;
        let hosts = store.hosts().await.map_err(err)?;
        let records: Vec<_> = hosts.iter().map(|h| h.record.clone()).collect();
        Ok::<_, CliError>(Report {
            prefix: store.keys.prefix().to_string(),
            live_revision: live.as_ref().map(|(r, _)| *r),
            live_file: live.as_ref().map(|(_, p)| p.file.clone()),
            published_tables_digest: live.as_ref().map(|(_, p)| p.tables_digest.clone()),
            hosts,
            mismatches: fleet::digest_mismatches(&records),
        })
    })?;
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
    &digest[..12.min(digest.len())]
}

fn print_text(r: &Report) {
    match (&r.live_revision, &r.live_file, &r.published_tables_digest) {
        (Some(rev), Some(file), Some(d)) => outln!(
            "live revision {rev} under {}: {file} (published tables digest {})",
            r.prefix,
            short(d)
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
            Some(live) if rec.revision < live => format!("behind ({} revisions)", live - rec.revision),
            _ => "serving".to_string(),
        };
        if r.mismatches.iter().any(|m| m.revision == rec.revision) {
            state.push_str(", DIGEST MISMATCH");
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
}
