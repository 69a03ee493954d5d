//! `nlbctl fw-info`: what the card runs, why, and what its flash slots hold.

use crate::cmd_flash::{flash_error, open, part, version};
use crate::common::CliError;
use nlb_driver::flash::{fw_info, FwInfo};
use nlb_driver::{Batch, Device};
use nlb_hw::blocks::fw_id;

/// Bytes in a mebibyte.
const MIB: u64 = 1024 * 1024;

/// Show the card's firmware identity, its capacities and where its big tables are (connections
/// and Maglev slots: on chip or in HBM), which image booted (and why the fallback, if it did),
/// the configuration flash chip, and the image in each multiboot slot.
///
/// Example: nlbctl fw-info --device pci:0000:03:00.0 --check
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The card: pci:DDDD:BB:DD.F or sim:PATH.
    #[arg(long, value_name = "SPEC")]
    device: String,
    /// Also read each slot's image back and check it against its marker's CRC-32 (reads the
    /// whole image: about 4 s per 16 MiB over PCIe).
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    output: crate::common::Output,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut dev = open(&args.device)?;
    let info = fw_info(dev.as_mut(), args.check).map_err(|e| flash_error(&args.device, e))?;
    let caps = Capacity::read(dev.as_mut())
        .map_err(|e| CliError::internal(format!("error: {}: {e}", args.device)))?;
    if args.output.json() {
        let mut v = json(&info);
        v["capacity"] = caps.json();
        return crate::common::print_json(&v);
    }
    let id = &info.ident;
    let board = nlb_driver::discovery::board_name(id.board_id);
    outln!("device    {}", args.device);
    outln!(
        "board     {board} ({:#06x}), FPGA {}",
        id.board_id,
        part(id.part_id)
    );
    outln!(
        "design    {} (regmap {}), build {:#010x}, git {:08x}, profile id {}",
        version(id.design_version),
        id.regmap_version,
        id.build_id,
        id.git_hash,
        id.profile_id
    );
    outln!("capacity  {}", caps.text());
    if id.boot.fallback {
        outln!(
            "running   FALLBACK image at {:#010x}; the requested image was rejected: {}",
            id.boot.image_addr,
            id.boot.reason()
        );
    } else {
        outln!("running   image at {:#010x}", id.boot.image_addr);
    }
    outln!(
        "flash     {} ({} MiB), two segments of {} MiB",
        info.chip.name,
        info.chip.size / MIB,
        u64::from(info.layout.segment_size()) / MIB
    );
    for s in &info.slots {
        let state = match &s.marker {
            Ok(m) => {
                let design = if m.design.is_empty() {
                    "-"
                } else {
                    m.design.as_str()
                };
                let check = match s.crc_read {
                    Some(crc) if crc == m.image_crc32 => ", read back OK",
                    Some(_) => ", READ BACK DIFFERS from the marker's CRC",
                    None => "",
                };
                format!(
                    "{} bytes, CRC-32 {:08x}, design {design}, USR_ACCESS {}{check}",
                    m.image_len,
                    m.image_crc32,
                    m.usr_access
                        .map_or_else(|| "-".to_string(), |v| format!("{v:#010x}"))
                )
            }
            Err(e) => format!("no complete image ({e})"),
        };
        outln!("slot      {:<8} {:#010x}  {state}", s.slot.name(), s.addr);
    }
    Ok(())
}

/// The capacities of the fw_id block and where the two big tables are (docs/pipeline.md
/// section 14).
struct Capacity {
    ct_entries: u64,
    maglev_slots: u32,
    backends: u32,
    ct_channels: u32,
    maglev_channels: u32,
    slots: u32,
}

impl Capacity {
    fn read(dev: &mut dyn Device) -> Result<Capacity, nlb_driver::DeviceError> {
        let mut b = Batch::new();
        let r = b
            .read(fw_id::CAP_CT_BUCKETS)
            .read(fw_id::CAP_CT_WAYS)
            .read(fw_id::CAP_MAGLEV_SLOTS)
            .read(fw_id::CAP_BACKENDS)
            .read(fw_id::CAP_CT_CHANNELS)
            .read(fw_id::CAP_MAGLEV_CHANNELS)
            .read(fw_id::CAP_MEM_SLOTS)
            .run(dev)?
            .to_vec();
        Ok(Capacity {
            ct_entries: u64::from(r[0]) * u64::from(r[1]),
            maglev_slots: r[2],
            backends: r[3],
            ct_channels: r[4],
            maglev_channels: r[5],
            slots: r[6],
        })
    }

    fn place(channels: u32) -> String {
        if channels == 0 {
            "on chip".to_string()
        } else {
            format!("HBM, {channels} pseudo-channels")
        }
    }

    fn text(&self) -> String {
        format!(
            "{} connections ({}), {} Maglev slots per bank ({}), {} backends, {} table reads in \
             flight per table",
            self.ct_entries,
            Self::place(self.ct_channels),
            self.maglev_slots,
            Self::place(self.maglev_channels),
            self.backends,
            self.slots
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "connections": self.ct_entries,
            "connection_table": Self::place(self.ct_channels),
            "maglev_slots": self.maglev_slots,
            "maglev": Self::place(self.maglev_channels),
            "backends": self.backends,
            "reads_in_flight_per_table": self.slots,
        })
    }
}

fn json(info: &FwInfo) -> serde_json::Value {
    let id = &info.ident;
    let slots: Vec<_> = info
        .slots
        .iter()
        .map(|s| {
            let marker = match &s.marker {
                Ok(m) => serde_json::json!({
                    "image_len": m.image_len,
                    "crc32": format!("{:08x}", m.image_crc32),
                    "idcode": m.idcode,
                    "usr_access": m.usr_access,
                    "written_at": m.written_at,
                    "design": m.design,
                }),
                Err(e) => serde_json::json!({ "error": e.to_string() }),
            };
            serde_json::json!({
                "slot": s.slot.name(),
                "addr": s.addr,
                "complete": s.complete(),
                "crc32_read": s.crc_read.map(|c| format!("{c:08x}")),
                "marker": marker,
            })
        })
        .collect();
    serde_json::json!({
        "design_version": version(id.design_version),
        "regmap_version": id.regmap_version,
        "build_id": id.build_id,
        "git_hash": format!("{:08x}", id.git_hash),
        "board_id": id.board_id,
        "part_id": id.part_id,
        "profile_id": id.profile_id,
        "boot": {
            "fallback": id.boot.fallback,
            "image_addr": id.boot.image_addr,
            "reason": id.boot.reason(),
        },
        "flash": { "chip": info.chip.name, "size": info.chip.size },
        "slots": slots,
    })
}
