//! `nlbctl status`: what the NIC is and what it serves.

use crate::common::{self, CliError};
use nlb_driver::queues::{read_counters, Queues};
use nlb_driver::{discover, open_device, Batch, Device};
use nlb_hw::blocks::{conntrack, ctrl, fw_id, mem};
use nlb_hw::enums::{CounterKind, Reason};

struct DeviceArgs {
    device: String,
    json: bool,
}

/// Show what the NIC is (board, design and register map versions, capacity profile, register
/// blocks, where its connection table and Maglev slots are) and its state: pipeline enabled,
/// serving bank, table generation, connections, queues, the table memories' reads and
/// latencies, and the frames dropped at the receive side for lack of room; on an OpenNIC card
/// also the plugin's own counters.
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
    let memory = Memory::read(dev.as_mut()).map_err(|e| fail(&e))?;
    let plugin = nlb_driver::opennic::plugin_status(dev.as_mut()).map_err(|e| fail(&e))?;
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
            "memory": memory.json(),
            "opennic_plugin": plugin.map(|p| serde_json::json!({
                "cmac_ports": p.cmac_ports,
                "host_dma": p.host_dma,
                "rx_err_frames": p.rx_err_frames,
                "host_tx_drops": p.host_tx_drops,
                "host_rx_drops": p.host_rx_drops,
                "events_lost": p.events_lost,
            })),
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
            "disabled (no frame is load-balanced: every one takes the PASS verdict; load tables to enable)"
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
    outln!("memory       {}", memory.placement());
    outln!("memory use   {}", memory.usage());
    outln!(
        "no room      {} frames dropped whole at the receive side: {} for the lookup (the table \
         memory slower than the traffic), {} for the buffer (the output stalled)",
        memory.no_room_lookup + memory.no_room_buffer,
        memory.no_room_lookup,
        memory.no_room_buffer
    );
    if let Some(p) = plugin {
        outln!(
            "card         OpenNIC plugin, {} CMAC port(s), host DMA port {}; frames the MAC \
             marked bad {}, host frames dropped {}, frames to the host dropped {}, events with no \
             ring {}",
            p.cmac_ports,
            if p.host_dma {
                "carried"
            } else {
                "not carried (the rings' DMA is refused)"
            },
            p.rx_err_frames,
            p.host_tx_drops,
            p.host_rx_drops,
            p.events_lost
        );
    }
    Ok(())
}

/// Where the connection table and the Maglev slots are, and what their memory ports did
/// (docs/pipeline.md section 14, the `mem` block).
struct Memory {
    ct_channels: u32,
    maglev_channels: u32,
    slots: u32,
    ct_reads: u64,
    ct_latency_sum: u64,
    ct_latency_max: u32,
    maglev_reads: u64,
    maglev_latency_sum: u64,
    maglev_latency_max: u32,
    wait_clocks: u64,
    no_room_lookup: u64,
    no_room_buffer: u64,
}

impl Memory {
    fn read(dev: &mut dyn Device) -> Result<Memory, nlb_driver::DeviceError> {
        let mut b = Batch::new();
        let r = b
            .read(fw_id::CAP_CT_CHANNELS)
            .read(fw_id::CAP_MAGLEV_CHANNELS)
            .read(fw_id::CAP_MEM_SLOTS)
            .read_words(mem::CT_READS_LO, (mem::WAIT_CLOCKS_HI - mem::CT_READS_LO) / 4 + 1)
            .run(dev)?
            .to_vec();
        let w = |reg: u32| r[3 + ((reg - mem::CT_READS_LO) / 4) as usize];
        let wide = |regs: [u32; 2]| mem::ct_reads::join(regs.map(w));
        let drops = read_counters(
            dev,
            CounterKind::Reason,
            [Reason::NoRoomLookup.value(), Reason::NoRoomBuffer.value()],
            false,
        )?;
        Ok(Memory {
            ct_channels: r[0],
            maglev_channels: r[1],
            slots: r[2],
            ct_reads: wide(mem::ct_reads::REGISTERS),
            ct_latency_sum: wide(mem::ct_latency_sum::REGISTERS),
            ct_latency_max: w(mem::CT_LATENCY_MAX),
            maglev_reads: wide(mem::maglev_reads::REGISTERS),
            maglev_latency_sum: wide(mem::maglev_latency_sum::REGISTERS),
            maglev_latency_max: w(mem::MAGLEV_LATENCY_MAX),
            wait_clocks: wide(mem::wait_clocks::REGISTERS),
            no_room_lookup: drops[0].packets,
            no_room_buffer: drops[1].packets,
        })
    }

    fn place(channels: u32) -> String {
        if channels == 0 {
            "on chip".to_string()
        } else {
            format!("HBM ({channels} pseudo-channels)")
        }
    }

    fn placement(&self) -> String {
        format!(
            "connections {}, Maglev slots {}, {} reads in flight per table",
            Self::place(self.ct_channels),
            Self::place(self.maglev_channels),
            self.slots
        )
    }

    fn mean(sum: u64, n: u64) -> f64 {
        if n == 0 {
            0.0
        } else {
            sum as f64 / n as f64
        }
    }

    fn usage(&self) -> String {
        format!(
            "connection-table reads {} (latency mean {:.1} clocks, max {} since the last status), \
             Maglev reads {} (mean {:.1}, max {}), {} clocks the lookup waited for a slot",
            self.ct_reads,
            Self::mean(self.ct_latency_sum, self.ct_reads),
            self.ct_latency_max,
            self.maglev_reads,
            Self::mean(self.maglev_latency_sum, self.maglev_reads),
            self.maglev_latency_max,
            self.wait_clocks
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "connection_table": Self::place(self.ct_channels),
            "maglev_slots": Self::place(self.maglev_channels),
            "reads_in_flight_per_table": self.slots,
            "connection_table_reads": self.ct_reads,
            "connection_table_latency_sum_clocks": self.ct_latency_sum,
            "connection_table_latency_max_clocks": self.ct_latency_max,
            "maglev_reads": self.maglev_reads,
            "maglev_latency_sum_clocks": self.maglev_latency_sum,
            "maglev_latency_max_clocks": self.maglev_latency_max,
            "wait_clocks": self.wait_clocks,
            "dropped_no_room_lookup": self.no_room_lookup,
            "dropped_no_room_buffer": self.no_room_buffer,
        })
    }
}
