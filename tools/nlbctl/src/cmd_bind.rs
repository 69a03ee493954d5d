//! `nlbctl bind` and `nlbctl unbind`: hand a card to vfio-pci (what `dpdk-devbind.py
//! --bind=vfio-pci` does) and back to its kernel driver.

use crate::cmd_devices::SysfsRoot;
use crate::common::CliError;
use nlb_driver::vfio::bind::{self, BindPlan, Step, Target};
use nlb_driver::vfio::inventory::read_function;
use nlb_driver::vfio::{PciAddress, VfioSys};
use std::time::Duration;

/// How long the `driver` link may take to show the new driver after `drivers_probe` (the
/// kernel binds during the write unless the driver probes asynchronously).
const SETTLE: Duration = Duration::from_secs(2);

/// Hand a card to vfio-pci so that nlbctl and nlbd can open it (as root).
///
/// For each address: writes `vfio-pci` to the device's driver_override, unbinds its current
/// driver (driver/unbind) and asks the kernel to probe it again (/sys/bus/pci/drivers_probe),
/// then checks that vfio-pci took it. Refuses, saying how to fix it, when: there is no such
/// device; it is not a known card (the OpenNIC shell's QDMA functions; --force takes any
/// device); the IOMMU is off; vfio-pci is not loaded; its IOMMU group holds another device on
/// a host driver (name both to bind them together); a network interface of the device is up.
/// A device already on vfio-pci is left alone.
///
/// Example: sudo nlbctl bind 0000:3b:00.0
#[derive(clap::Args, Debug)]
pub struct Args {
    /// PCI addresses (DDDD:BB:DD.F, as `nlbctl devices` lists them).
    #[arg(value_name = "ADDR", required = true)]
    addrs: Vec<String>,
    /// Bind devices that are not known cards too.
    #[arg(long)]
    force: bool,
    /// Print the writes, make none.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    sysfs: SysfsRoot,
}

/// Parses the addresses.
pub fn addresses(addrs: &[String]) -> Result<Vec<PciAddress>, CliError> {
    addrs
        .iter()
        .map(|a| {
            a.strip_prefix("pci:")
                .unwrap_or(a)
                .parse::<PciAddress>()
                .map_err(|e| CliError::user(format!("error: {e}")))
        })
        .collect()
}

fn user(e: bind::BindError) -> CliError {
    CliError::user(format!("error: {e}"))
}

/// Prints a plan's writes as shell commands.
fn print_plan(plan: &BindPlan) {
    for w in &plan.writes {
        outln!("    {w}");
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let sys = args.sysfs.sys();
    let addrs = addresses(&args.addrs)?;
    let steps = bind::plan_bind(&sys, &addrs, args.force).map_err(user)?;
    run_steps(&sys, &steps, args.dry_run)
}

/// Prints or makes the writes of each step, and says where each device ended up.
pub fn run_steps(sys: &dyn VfioSys, steps: &[Step], dry_run: bool) -> Result<(), CliError> {
    for step in steps {
        match step {
            Step::Done { addr, driver } => match driver.as_deref() {
                Some("vfio-pci") => {
                    outln!("{addr} is already bound to vfio-pci; nothing to do")
                }
                Some(d) => outln!("{addr} is bound to {d}, not to vfio-pci; nothing to do"),
                None => outln!("{addr} is bound to no driver; nothing to do"),
            },
            Step::Change(plan) if dry_run => {
                outln!(
                    "{}: {} -> {}; would write:",
                    plan.addr,
                    plan.from.as_deref().unwrap_or("no driver"),
                    target(plan.to)
                );
                print_plan(plan);
            }
            Step::Change(plan) => {
                let now = bind::execute(sys, plan, SETTLE).map_err(user)?;
                let was = plan.from.as_deref().unwrap_or("no driver");
                match (plan.to, now) {
                    (Target::VfioPci, _) => {
                        let regs = read_function(sys, plan.addr)
                            .ok()
                            .flatten()
                            .map(|f| f.registers().to_string())
                            .unwrap_or_default();
                        outln!(
                            "{}: bound to vfio-pci (was {was}); registers at {regs}; next: \
                             nlbctl fw-info --device pci:{}",
                            plan.addr,
                            plan.addr
                        );
                    }
                    (Target::Kernel, Some(d)) => {
                        outln!("{}: bound to {d} (was {was})", plan.addr)
                    }
                    (Target::Kernel, None) => outln!(
                        "{}: released by {was}, and no kernel driver claimed it: load the \
                         card's driver (OpenNIC's is `onic`, from open-nic-driver) and run \
                         `echo {} | sudo tee /sys/bus/pci/drivers_probe`",
                        plan.addr,
                        plan.addr
                    ),
                }
            }
        }
    }
    Ok(())
}

fn target(t: Target) -> &'static str {
    match t {
        Target::VfioPci => "vfio-pci",
        Target::Kernel => "its kernel driver",
    }
}
