//! `nlbctl load`: load a table image into a NIC, atomically.

use crate::common::{self, CliError, Input};
use flowtable_compiler::Symbols;
use crate::progress::{Bar, WindowProgress};
use nlb_driver::loader::{table_depth, LoadError, Loader, LoaderOptions};
use nlb_driver::{discover, open_device};
use nlb_hw::blocks::table as win;
use nlb_hw::enums::Table;
use std::path::PathBuf;

/// Load a table image (or a configuration, compiled on the spot) into a NIC.
///
/// The driver writes only the entries that differ from what the NIC's inactive table bank
/// holds, reads them back, then switches banks with one register write: every packet sees
/// either the old tables or the new ones, never a mixture. If anything fails (or the command
/// is killed) before the switch, the old tables keep serving.
///
/// A configuration loaded over tables the NIC already serves keeps the rule and backend ids
/// the NIC uses (recognised by VIP and port range, and by backend address and MAC), so its
/// established connections keep their backend. An image keeps the ids it was compiled with
/// (`nlbctl compile --previous`); a warning names the backend ids it would give to another
/// backend than the NIC's.
///
/// Examples:
///
///   nlbctl load --device pci:0000:03:00.0 web.img
///
///   nlbctl load --device sim:/tmp/nlb.sock examples/web.yaml --health down.yaml
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The NIC: pci:DDDD:BB:DD.F (bound to vfio-pci) or sim:PATH (an nlb-sim socket).
    #[arg(long, value_name = "SPEC")]
    device: String,
    /// Table image (`nlbctl compile -o`) or configuration file.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Health/weight state, for a configuration (see docs/config.md).
    #[arg(long, value_name = "FILE")]
    health: Option<PathBuf>,
    #[command(flatten)]
    output: common::Output,
}

fn device_error(spec: &str, e: impl std::fmt::Display) -> CliError {
    CliError::internal(format!("error: {spec}: {e}"))
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut dev = open_device(&args.device).map_err(|e| CliError::user(format!("error: {e}")))?;
    let info = discover(dev.as_mut()).map_err(|e| device_error(&args.device, e))?;
    let health = common::health(args.health.as_deref())?;
    // Reading both banks back and writing a whole table take a while on a large profile: a
    // progress bar on a terminal.
    let mut dev = WindowProgress::new(dev.as_mut(), win::CMD, Bar::new("reading", "entries"));
    let depths: u64 = Table::ALL
        .iter()
        .map(|t| u64::from(table_depth(info.profile, *t)))
        .sum();
    dev.phase("reading", 2 * depths);
    let attached = Loader::attach(&mut dev, info.profile, LoaderOptions::default());
    dev.bar.finish();
    let mut loader = attached.map_err(|e| device_error(&args.device, e))?;
    let serving = loader.shadow(loader.active_bank()).clone();
    let serves = loader.generation() != 0;
    let input = Input::open_after(&args.image, &health, info.profile, |config| {
        if serves {
            Symbols::recover(&serving, config)
        } else {
            Symbols::default()
        }
    })?;
    if let (true, Input::Image(image)) = (serves, &input) {
        let moved: Vec<String> = serving
            .backends
            .iter()
            .zip(&image.tables.backends)
            .enumerate()
            .filter(|(_, (now, next))| now.valid && next.valid && now != next)
            .map(|(id, _)| format!("#{id}"))
            .collect();
        if !moved.is_empty() {
            eprintln!(
                "warning: backend ids {} name another backend in {} than on the NIC: established connections on them will reach that backend (compile with --previous, or load the configuration itself)",
                moved.join(", "),
                args.image.display()
            );
        }
    }
    let target = loader.active_bank() ^ 1;
    let writes = loader.shadow(target).diff(input.parts().0).len() + loader.suspect_entries(target);
    dev.phase("writing", writes as u64);
    let result = match &input {
        Input::Image(image) => loader.load_image(&mut dev, image),
        Input::Compiled(c) => loader.load(&mut dev, &c.tables, &c.nic),
    };
    dev.bar.finish();
    let report = result.map_err(|e| match e {
        LoadError::ProfileMismatch { .. }
        | LoadError::ImageRegmap { .. }
        | LoadError::Encode { .. } => {
            CliError::user(format!("error: {}: {e}", args.image.display()))
        }
        e => device_error(
            &args.device,
            format!("{e}; the previous tables still serve"),
        ),
    })?;
    if args.output.json() {
        let tables: serde_json::Map<String, serde_json::Value> = report
            .changed_by_table
            .iter()
            .map(|(t, n)| (t.name().to_ascii_lowercase(), (*n).into()))
            .collect();
        return common::print_json(&serde_json::json!({
            "device": args.device,
            "image": args.image.display().to_string(),
            "bank": report.bank,
            "generation": report.generation,
            "changed_entries": report.changed_entries,
            "changed_by_table": tables,
            "writes": {
                "update": report.update_writes,
                "verify": report.verify_writes,
                "control": report.control_writes,
                "total": report.total_writes(),
            },
            "reads": report.reads,
            "seconds": report.elapsed.as_secs_f64(),
        }));
    }
    let per_table: Vec<String> = report
        .changed_by_table
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(t, n)| format!("{} {n}", t.name().to_ascii_lowercase()))
        .collect();
    outln!(
        "loaded {} into {}: bank {} serving, generation {}",
        args.image.display(),
        args.device,
        report.bank,
        report.generation
    );
    outln!(
        "{} entries changed{}; {} register writes ({} update, {} read-back, {} control) in {:.1} ms",
        report.changed_entries,
        if per_table.is_empty() {
            String::new()
        } else {
            format!(" ({})", per_table.join(", "))
        },
        report.total_writes(),
        report.update_writes,
        report.verify_writes,
        report.control_writes,
        report.elapsed.as_secs_f64() * 1e3
    );
    Ok(())
}
