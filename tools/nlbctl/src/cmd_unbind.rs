//! `nlbctl unbind`: hand a card back from vfio-pci to its kernel driver.

use crate::cmd_bind::{addresses, run_steps};
use crate::cmd_devices::SysfsRoot;
use crate::common::CliError;
use nlb_driver::vfio::bind;

/// Hand a card back from vfio-pci to the kernel driver that matches its ids (as root): clears
/// its driver_override, unbinds vfio-pci and asks the kernel to probe it again. A device that
/// is not on vfio-pci and has no override is left alone.
///
/// Example: sudo nlbctl unbind 0000:3b:00.0
#[derive(clap::Args, Debug)]
pub struct Args {
    /// PCI addresses (DDDD:BB:DD.F).
    #[arg(value_name = "ADDR", required = true)]
    addrs: Vec<String>,
    /// Print the writes, make none.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    sysfs: SysfsRoot,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let sys = args.sysfs.sys();
    let addrs = addresses(&args.addrs)?;
    let steps = bind::plan_unbind(&sys, &addrs)
        .map_err(|e| CliError::user(format!("error: {e}")))?;
    run_steps(&sys, &steps, args.dry_run)
}
