//! `nlbctl fw-info`: what the card runs, why, and what its flash slots hold.

use crate::cmd_flash::{flash_error, open, part, version};
use crate::common::CliError;
use nlb_driver::flash::{fw_info, FwInfo};

/// Bytes in a mebibyte.
const MIB: u64 = 1024 * 1024;

/// Show the card's firmware identity, which image booted (and why the fallback, if it did),
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
    if args.output.json() {
        return crate::common::print_json(&json(&info));
    }
    let id = &info.ident;
    let board = match id.board_id {
        0x0280 => "Alveo U280",
        0x5100 => "simulated",
        _ => "unknown board",
    };
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
