//! `nlbctl reboot`: reload the FPGA from flash and check what comes back.

use crate::cmd_flash::{flash_error, open, SlotArg};
use crate::common::CliError;
use nlb_driver::flash::{reboot, RebootOptions};
use std::time::Duration;

/// Reload the FPGA from its configuration flash, wait for the card to answer again, and check
/// that it is the same board and FPGA, speaks this tool's register map, and runs the requested
/// image (not the fallback). Fails with the boot logic's reason when the fallback came up.
///
/// On real hardware the PCIe link drops while the FPGA reloads; the host must then rescan the
/// device (for VFIO, remove and rescan it under /sys/bus/pci) before this returns.
///
/// Example: nlbctl reboot --device pci:0000:03:00.0
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The card: pci:DDDD:BB:DD.F or sim:PATH.
    #[arg(long, value_name = "SPEC")]
    device: String,
    /// The image to load.
    #[arg(long, value_enum, default_value = "user")]
    slot: SlotArg,
    /// Give up after this many seconds without an answer.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    timeout: u64,
    /// Fail unless the card comes back with this build id (fw_id.build_id, hex).
    #[arg(long, value_name = "HEX", value_parser = parse_hex)]
    expect_build_id: Option<u32>,
}

fn parse_hex(s: &str) -> Result<u32, String> {
    let digits = s.trim_start_matches("0x").trim_start_matches("0X");
    u32::from_str_radix(digits, 16).map_err(|e| format!("`{s}` is not a hex build id: {e}"))
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut dev = open(&args.device)?;
    let opts = RebootOptions {
        slot: args.slot.into(),
        timeout: Duration::from_secs(args.timeout),
        expect_build_id: args.expect_build_id,
        ..RebootOptions::default()
    };
    let r = reboot(dev.as_mut(), &opts).map_err(|e| flash_error(&args.device, e))?;
    outln!(
        "{}: back after {:.2} s; build {:#010x} -> {:#010x}, running the {} image at {:#010x}",
        args.device,
        r.took.as_secs_f64(),
        r.before.build_id,
        r.after.build_id,
        if r.after.boot.fallback {
            "fallback"
        } else {
            "user"
        },
        r.after.boot.image_addr
    );
    Ok(())
}
