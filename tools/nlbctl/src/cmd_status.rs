//! `nlbctl status`: what the NIC is and what it serves.

use crate::common::{self, CliError};
use nlb_driver::queues::Queues;
use nlb_driver::{discover, open_device, Batch};
use nlb_hw::blocks::{conntrack, ctrl};

struct DeviceArgs {
    device: String,
    json: bool,
}

/// Show what the NIC is (board, design and register map versions, capacity profile, register
/// blocks) and its state: pipeline enabled, serving bank, table generation, connections,
/// queues.
///
/// With --socket, ask the running nlbd instead (its admin socket): configuration, tables,
/// loads and reloads, decision-to-table latency, connections, punts and every pool's serving
/// set.
///
/// Example: nlbctl status --device pci:0000:03:00.0
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The NIC: pci:DDDD:BB:DD.F or sim:PATH.
    #[arg(long, value_name = "SPEC", required_unless_present = "socket")]
    device: Option<String>,
    /// nlbd's admin socket (instead of --device).
    #[arg(long, value_name = "PATH", conflicts_with = "device")]
    socket: Option<std::path::PathBuf>,
    #[command(flatten)]
    output: common::Output,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let Some(device) = args.device else {
        let socket = args.socket.unwrap_or_default();
        return crate::cmd_health::status(&socket, args.output.json());
    };
    let args = DeviceArgs {
        device,
        json: args.output.json(),
    };
    let mut dev = open_device(&args.device).map_err(|e| CliError::user(format!("error: {e}")))?;
    let fail =
        |e: &dyn std::fmt::Display| CliError::internal(format!("error: {}: {e}", args.device));
    let info = discover(dev.as_mut()).map_err(|e| fail(&e))?;
    let mut b = Batch::new();
    let r = b
        .read(ctrl::ENABLE)
        .read(ctrl::ACTIVE_BANK)
        .read(ctrl::GENERATION)
        .read(ctrl::PACKETS_IN_FLIGHT)
        .read(conntrack::COUNT)
        .run(dev.as_mut())
        .map_err(|e| fail(&e))?
        .to_vec();
    let queues = Queues::new().poll(dev.as_mut()).map_err(|e| fail(&e))?;
    let fw = &info.firmware;
    let version = super::cmd_flash::version;
    let enabled = ctrl::Enable::from_word(r[0]).enable;
    let bank = u8::from(ctrl::ActiveBank::from_word(r[1]).bank);
    let connections = r[4];
    let capacity = fw.capacities.ct_buckets * fw.capacities.ct_ways;
    if args.json {
        return common::print_json(&serde_json::json!({
            "device": args.device,
            "board": fw.board_name(),
            "board_id": fw.board_id,
            "design_version": version(fw.design_version),
            "regmap_version": fw.regmap_version,
            "build_id": fw.build_id,
            "git_hash": format!("{:08x}", fw.git_hash),
            "profile": info.profile.name,
            "blocks": info.blocks.iter().map(|b| serde_json::json!({
                "name": b.name, "offset": b.base, "version": b.version,
            })).collect::<Vec<_>>(),
            "enabled": enabled,
            "active_bank": bank,
            "generation": r[2],
            "packets_in_flight": r[3],
            "connections": connections,
            "connection_capacity": capacity,
            "punt_queue": queues.punt,
            "learn_queue": queues.learn,
        }));
    }
    outln!("device       {}", args.device);
    outln!(
        "board        {} ({:#06x}), design {}, regmap v{}, build {} ({:08x})",
        fw.board_name(),
        fw.board_id,
        version(fw.design_version),
        fw.regmap_version,
        fw.build_id,
        fw.git_hash
    );
    outln!("profile      {}", info.profile.name);
    outln!(
        "blocks       {}",
        info.blocks
            .iter()
            .map(|b| format!("{}@{:#x} v{}", b.name, b.base, b.version))
            .collect::<Vec<_>>()
            .join(", ")
    );
    outln!(
        "pipeline     {}",
        if enabled {
            "enabled"
        } else {
            "disabled (every frame passes to the host; load tables to enable)"
        }
    );
    outln!(
        "tables       bank {} serving, generation {}",
        bank,
        r[2]
    );
    outln!("connections  {connections} of {capacity}");
    outln!(
        "queues       {} punted frames, {} learn events waiting",
        queues.punt,
        queues.learn
    );
    Ok(())
}
