//! `nlbctl diff`: how many flows a change moves, per pool, against the least possible.

use crate::common::{self, CliError, Input};
use flowtable_compiler::maglev_movement;
use std::path::PathBuf;

/// Compare two configurations or images: per pool, the share of flows (hash space) whose
/// backend changes, against the theoretical minimum for the new backend shares.
///
/// OLD and NEW may each be a configuration or a table image. `--health` applies to both
/// configurations; `--old-health`/`--new-health` to one side, for example to see what one
/// backend going down does: `nlbctl diff web.yaml web.yaml --new-health down.yaml`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The tables before.
    old: PathBuf,
    /// The tables after.
    new: PathBuf,
    /// Health state for both sides.
    #[arg(long, value_name = "FILE")]
    health: Option<PathBuf>,
    /// Health state for OLD (overrides --health).
    #[arg(long, value_name = "FILE")]
    old_health: Option<PathBuf>,
    /// Health state for NEW (overrides --health).
    #[arg(long, value_name = "FILE")]
    new_health: Option<PathBuf>,
    /// Capacity profile for configurations.
    #[arg(long, default_value = "sim", value_name = "NAME")]
    profile: String,
    #[command(flatten)]
    output: common::Output,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let profile = common::profile(&args.profile)?;
    let old_health = common::health(args.old_health.as_deref().or(args.health.as_deref()))?;
    let new_health = common::health(args.new_health.as_deref().or(args.health.as_deref()))?;
    let old = Input::open(&args.old, &old_health, profile)?;
    let new = Input::open(&args.new, &new_health, profile)?;
    let rows = maglev_movement(old.parts(), new.parts());
    if args.output.json() {
        return common::print_json(&rows);
    }
    outln!(
        "{:<24} {:>8} {:>8} {:>9} {:>9} {:>9}  status",
        "pool",
        "M old",
        "M new",
        "moved",
        "minimum",
        "extra"
    );
    for r in &rows {
        outln!(
            "{:<24} {:>8} {:>8} {:>8.3}% {:>8.3}% {:>8.3}%  {}",
            r.pool,
            r.old_size,
            r.new_size,
            100.0 * r.moved,
            100.0 * r.minimum,
            100.0 * (r.moved - r.minimum),
            r.status
        );
    }
    let changed = rows.iter().filter(|r| r.status != "unchanged").count();
    outln!("{changed} of {} pools changed", rows.len());
    Ok(())
}
