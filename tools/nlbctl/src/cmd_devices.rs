//! `nlbctl devices`: the cards on this machine's PCI bus and what to type next for each.

use crate::common::{self, CliError};
use nlb_driver::vfio::inventory::{self, Card, Inventory};
use nlb_driver::vfio::RootedSys;
use std::path::PathBuf;

/// List the cards nlb-offload can run on this machine: the OpenNIC shell's QDMA functions
/// on Alveo cards (PCI ids 10ee:903f, 10ee:913f, ... 10ee:9348), found in sysfs. One line per
/// function: address, which PF, ids, IOMMU group, the driver bound, whether it is vfio-pci,
/// where the registers are (BAR 2 + 0x200000, the shell's 322 MHz box) and the next command
/// to run. Nothing is changed; no root needed.
///
/// Example: nlbctl devices
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    output: common::Output,
    #[command(flatten)]
    sysfs: SysfsRoot,
}

/// Where sysfs is read (and written, for bind): `/` unless a test points elsewhere.
#[derive(clap::Args, Debug)]
pub struct SysfsRoot {
    /// Read /sys under this directory instead of / (for tests; also NLB_SYSFS_ROOT).
    #[arg(long, value_name = "DIR", hide = true)]
    sysfs_root: Option<PathBuf>,
}

impl SysfsRoot {
    /// The sysfs layer: `--sysfs-root`, else `NLB_SYSFS_ROOT`, else `/`.
    pub fn sys(&self) -> RootedSys {
        let root = self
            .sysfs_root
            .clone()
            .or_else(|| std::env::var_os("NLB_SYSFS_ROOT").map(PathBuf::from))
            .filter(|r| !r.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("/"));
        RootedSys::new(root)
    }
}

/// What to type next for a card.
pub fn next_command(inv: &Inventory, card: &Card) -> String {
    let f = &card.function;
    let addr = f.addr.to_string();
    let blockers: Vec<&str> = card.blockers().iter().map(|m| m.addr.as_str()).collect();
    let bind_group = || format!("sudo nlbctl bind {addr} {}", blockers.join(" "));
    if f.vfio_bound() {
        if !blockers.is_empty() {
            return bind_group();
        }
        return format!("nlbctl fw-info --device pci:{addr}");
    }
    if !inv.iommu || f.iommu_group.is_none() {
        return "turn the IOMMU on: boot with intel_iommu=on iommu=pt (Intel) or amd_iommu=on \
                iommu=pt (AMD)"
            .to_string();
    }
    if !inv.vfio_pci_loaded {
        return "sudo modprobe vfio-pci".to_string();
    }
    if let Some(up) = f.interfaces.iter().find(|i| i.is_up()) {
        return format!("sudo ip link set {} down", up.name);
    }
    if !blockers.is_empty() {
        return bind_group();
    }
    format!("sudo nlbctl bind {addr}")
}

/// How `nlbctl devices` says that there is no card.
pub fn none_found() -> String {
    format!(
        "no OpenNIC card found: no PCI function has the ids of the OpenNIC shell's QDMA \
         functions ({}).\nCheck with `lspci -D -nn -d 10ee:`: an Alveo card that shows other \
         ids runs another bitstream (flash the nlb-offload OpenNIC bitstream), and no line at \
         all means the card is not seen on the bus (seated, powered, slot enabled?).",
        inventory::known_ids()
    )
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let sys = args.sysfs.sys();
    let inv = inventory::scan(&sys).map_err(|e| CliError::user(format!("error: {e}")))?;
    if args.output.json() {
        return common::print_json(&json(&inv));
    }
    if inv.cards.is_empty() {
        outln!("{}", none_found());
        return Ok(());
    }
    let rows: Vec<[String; 7]> = inv
        .cards
        .iter()
        .map(|c| {
            let f = &c.function;
            [
                f.addr.to_string(),
                format!("OpenNIC PF{} {}", c.identity.pf, c.identity.link),
                f.ids(),
                f.iommu_group
                    .map_or_else(|| "none".to_string(), |g| g.to_string()),
                f.driver.clone().unwrap_or_else(|| "none".to_string()),
                if f.vfio_bound() { "yes" } else { "no" }.to_string(),
                next_command(&inv, c),
            ]
        })
        .collect();
    let header = [
        "ADDRESS", "CARD", "IDS", "IOMMU", "DRIVER", "VFIO", "NEXT",
    ];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (k, cell) in cells.iter().enumerate() {
            if k + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = widths[k]));
            }
        }
        s
    };
    outln!("{}", line(&header));
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        outln!("{}", line(&cells));
    }
    outln!("registers: BAR 2 + 0x200000 on each (the OpenNIC shell's 322 MHz box)");
    for c in &inv.cards {
        let others = c.blockers();
        if !others.is_empty() {
            outln!(
                "{}: IOMMU group {} also holds {}",
                c.function.addr,
                c.function.iommu_group.unwrap_or_default(),
                others
                    .iter()
                    .map(|m| m.describe())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(())
}

fn json(inv: &Inventory) -> serde_json::Value {
    let cards: Vec<serde_json::Value> = inv
        .cards
        .iter()
        .map(|c| {
            let f = &c.function;
            let r = c.identity.registers;
            serde_json::json!({
                "address": f.addr.to_string(),
                "vendor": format!("{:04x}", f.vendor),
                "device": format!("{:04x}", f.device),
                "class": format!("{:06x}", f.class),
                "card": c.identity.kind,
                "pf": c.identity.pf,
                "link": c.identity.link,
                "registers": { "bar": r.bar, "offset": r.offset, "size": r.size },
                "iommu_group": f.iommu_group,
                "group_members": c.group_members.iter().map(|m| serde_json::json!({
                    "address": m.addr,
                    "driver": m.driver,
                    "blocks_vfio": m.blocks_vfio(),
                })).collect::<Vec<_>>(),
                "driver": f.driver,
                "driver_override": f.driver_override,
                "vfio_pci": f.vfio_bound(),
                "interfaces": f.interfaces.iter().map(|i| serde_json::json!({
                    "name": i.name,
                    "operstate": i.operstate,
                    "up": i.is_up(),
                })).collect::<Vec<_>>(),
                "next": next_command(inv, c),
            })
        })
        .collect();
    serde_json::json!({
        "iommu": inv.iommu,
        "vfio_pci_loaded": inv.vfio_pci_loaded,
        "cards": cards,
    })
}
