//! `nlbctl compile`: configuration → table image, with a one-screen summary.

use crate::common::{self, CliError};
use flowtable_compiler::PoolKind;
use nlb_hw::enums::Table;
use std::path::PathBuf;

/// Compile a configuration into a table image.
///
/// Validates everything first (all problems at once, as file:line:column: field: message);
/// a configuration with any problem produces no image.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON), or Kubernetes manifests: a file, a directory, or `-`
    /// for a `kubectl get -o yaml|json` stream on standard input (docs/kubernetes.md).
    config: PathBuf,
    /// Where to write the image.
    #[arg(short, long, value_name = "IMAGE")]
    output: PathBuf,
    /// Health/weight state: `POOL/INSTANCE` or `INSTANCE` (every pool) → {healthy, weight}
    /// (see docs/config.md).
    #[arg(long, value_name = "FILE")]
    health: Option<PathBuf>,
    /// Capacity profile to compile for.
    #[arg(long, default_value = "sim", value_name = "NAME")]
    profile: String,
    /// Generation number stamped into the image.
    #[arg(long, default_value_t = 1)]
    generation: u64,
    /// The image this one replaces: rules and backends that stay keep its ids, so a NIC's
    /// established connections keep their backend when this image is loaded over it. Without
    /// it, ids follow names.
    #[arg(long, value_name = "IMAGE")]
    previous: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let profile = common::profile(&args.profile)?;
    let health = common::health(args.health.as_deref())?;
    let previous = common::previous_ids(args.previous.as_deref())?;
    let (config, compiled) =
        common::compile_config_with(&args.config, &health, profile, &previous)?;
    let bytes = compiled
        .image(args.generation)
        .write()
        .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
    common::write_atomically(&args.output, &bytes)?;

    let digest: String = compiled.config_digest[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    outln!(
        "compiled {} for profile {} -> {} ({}, config digest {digest}, generation {})",
        args.config.display(),
        profile.name,
        args.output.display(),
        common::human_bytes(bytes.len()),
        args.generation
    );
    let pools = &compiled.pools;
    let count = |kind: PoolKind| pools.iter().filter(|p| p.kind == kind).count();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let services = count(PoolKind::BackendService);
    // Backend services are named only where there are some, so the line of a target-pool
    // configuration reads as it did.
    let services = if services == 0 {
        String::new()
    } else {
        format!(
            ", {}",
            plural(services, "backend service", "backend services")
        )
    };
    outln!(
        "{}, {}, {}{services}, {}",
        plural(compiled.symbols.rule_names().count(), "rule", "rules"),
        plural(count(PoolKind::TargetPool), "target pool", "target pools"),
        plural(
            count(PoolKind::TargetInstance),
            "target instance",
            "target instances"
        ),
        plural(compiled.symbols.backend_names().count(), "backend", "backends")
    );
    outln!();
    outln!("{:<8} {:>10} {:>10} {:>7}", "table", "used", "depth", "use");
    for (table, used, depth) in compiled.occupancy() {
        let unit = if table == Table::Maglev { " slots" } else { "" };
        outln!(
            "{:<8} {:>10} {:>10} {:>6.1}%{unit}",
            table.name(),
            used,
            depth,
            100.0 * f64::from(used) / f64::from(depth.max(1))
        );
    }
    outln!();
    const SHOWN: usize = 12;
    outln!(
        "{:<24} {:>7} {:>7} {:>7}  serving",
        "pool",
        "members",
        "healthy",
        "slots"
    );
    for p in pools.iter().take(SHOWN) {
        let serving = if p.failed_over {
            format!("{} (failed over)", p.serving)
        } else {
            p.serving.clone()
        };
        outln!(
            "{:<24} {:>7} {:>7} {:>7}  {serving}",
            p.name,
            p.members,
            p.healthy,
            p.slice_size
        );
    }
    if pools.len() > SHOWN {
        outln!(
            "... and {} more pools (nlbctl inspect shows all)",
            pools.len() - SHOWN
        );
    }
    for n in &compiled.notes {
        outln!("note: {n}");
    }
    // The process ends right after this command: freeing the compiled tables and names one
    // allocation at a time (millions for a large cluster) would only delay its exit.
    std::mem::forget((config, compiled));
    Ok(())
}
