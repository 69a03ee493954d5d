//! The PCI bus as sysfs shows it: which cards this driver runs, where their registers are, and
//! what stands between each and VFIO.
//!
//! A card is recognised by its PCI vendor and device ids alone, from one table,
//! [`KNOWN_CARDS`]: the QDMA physical functions of AMD's OpenNIC shell on Alveo cards. The
//! shell numbers them `0x9<PF><gen><width>`: PF 0..3, PCIe generation 3 or 4, link width
//! `F` = x16 or `8` = x8 (so Gen3 x16 PF0 is `10ee:903f`); all are class `0x028000`
//! (network controller, other). The shell gives user logic two register boxes in **BAR 2**: the
//! 250 MHz box at 0x100000–0x1FFFFF and the 322 MHz box at 0x200000–0x2FFFFF; nlb-offload's
//! register map sits in the 322 MHz box, so for these functions the registers are BAR 2 from
//! byte 0x200000, a 1 MiB window ([`RegisterWindow::OPENNIC_322MHZ_BOX`]). Any other device
//! (the simulated cards, a device opened by address) keeps the map at BAR 0 offset 0.
//!
//! Everything is read through [`VfioSys`] at the kernel's paths (`/sys/bus/pci/devices/*`,
//! their `vendor`, `device`, `class`, `driver`, `driver_override`, `iommu_group`, `net/*`, and
//! `/sys/kernel/iommu_groups/N/devices`), so a [`super::sys::RootedSys`] reads a tree a test
//! built.

use super::{PciAddress, VfioSys};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// `/sys/bus/pci/devices`.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";
/// `/sys/bus/pci/drivers/vfio-pci`: exists once the vfio-pci module is loaded.
pub const VFIO_PCI_DRIVER: &str = "/sys/bus/pci/drivers/vfio-pci";
/// `/sys/kernel/iommu_groups`: one directory per group, none when the IOMMU is off.
pub const IOMMU_GROUPS: &str = "/sys/kernel/iommu_groups";

/// Where the register map lives among a device's BARs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterWindow {
    /// The BAR (VFIO region index: BAR n is region n).
    pub bar: u32,
    /// Byte offset of register 0 in the BAR.
    pub offset: u64,
    /// Bytes of the window; `None`: the rest of the BAR.
    pub size: Option<u64>,
}

impl RegisterWindow {
    /// BAR 0 from offset 0, all of it: the simulated cards and any device not in
    /// [`KNOWN_CARDS`].
    pub const BAR0: RegisterWindow = RegisterWindow {
        bar: 0,
        offset: 0,
        size: None,
    };

    /// The OpenNIC shell's 322 MHz user box: BAR 2, 0x200000–0x2FFFFF.
    pub const OPENNIC_322MHZ_BOX: RegisterWindow = RegisterWindow {
        bar: 2,
        offset: 0x20_0000,
        size: Some(0x10_0000),
    };
}

impl fmt::Display for RegisterWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BAR {} + {:#x}", self.bar, self.offset)
    }
}

/// A PCI function this driver knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CardIdentity {
    /// PCI vendor id.
    pub vendor: u16,
    /// PCI device id.
    pub device: u16,
    /// What it is, for people (`OpenNIC shell (QDMA)`).
    pub kind: &'static str,
    /// Physical function number.
    pub pf: u8,
    /// The PCIe link the shell was built for (`Gen3 x16`).
    pub link: &'static str,
    /// Where nlb-offload's registers are.
    pub registers: RegisterWindow,
}

/// AMD/Xilinx's PCI vendor id.
pub const XILINX_VENDOR: u16 = 0x10ee;

const fn opennic(device: u16, pf: u8, link: &'static str) -> CardIdentity {
    CardIdentity {
        vendor: XILINX_VENDOR,
        device,
        kind: "OpenNIC shell (QDMA)",
        pf,
        link,
        registers: RegisterWindow::OPENNIC_322MHZ_BOX,
    }
}

/// Every card identity this driver recognises: the OpenNIC shell's QDMA physical functions
/// (device id `0x9<PF><gen><width>`; class `0x028000`), registers in BAR 2 at 0x200000.
/// A new board or shell is one line here.
pub const KNOWN_CARDS: &[CardIdentity] = &[
    opennic(0x903f, 0, "Gen3 x16"),
    opennic(0x913f, 1, "Gen3 x16"),
    opennic(0x923f, 2, "Gen3 x16"),
    opennic(0x933f, 3, "Gen3 x16"),
    opennic(0x9038, 0, "Gen3 x8"),
    opennic(0x9138, 1, "Gen3 x8"),
    opennic(0x9238, 2, "Gen3 x8"),
    opennic(0x9338, 3, "Gen3 x8"),
    opennic(0x9048, 0, "Gen4 x8"),
    opennic(0x9148, 1, "Gen4 x8"),
    opennic(0x9248, 2, "Gen4 x8"),
    opennic(0x9348, 3, "Gen4 x8"),
];

/// The known identity of `vendor:device`, if any.
pub fn identify(vendor: u16, device: u16) -> Option<&'static CardIdentity> {
    KNOWN_CARDS
        .iter()
        .find(|c| c.vendor == vendor && c.device == device)
}

/// `10ee:903f, 10ee:913f, ...`: the known ids, for messages.
pub fn known_ids() -> String {
    KNOWN_CARDS
        .iter()
        .map(|c| format!("{:04x}:{:04x}", c.vendor, c.device))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A network interface the kernel made for a PCI function (`/sys/bus/pci/devices/A/net/IF`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetInterface {
    /// Interface name.
    pub name: String,
    /// `operstate` (RFC 2863: `up`, `down`, `lowerlayerdown`, `unknown`, ...).
    pub operstate: String,
    /// Administratively up (`IFF_UP` in `flags`, what `ip link set IF up/down` changes).
    pub admin_up: bool,
}

impl NetInterface {
    /// Whether the kernel's network stack is using it: administratively up, or
    /// operationally up.
    pub fn is_up(&self) -> bool {
        self.admin_up || self.operstate == "up"
    }
}

/// One PCI function as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciFunction {
    /// Address.
    pub addr: PciAddress,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// Class code (`0x028000`).
    pub class: u32,
    /// The driver bound to it, if any.
    pub driver: Option<String>,
    /// `driver_override`, if set.
    pub driver_override: Option<String>,
    /// IOMMU group; `None` when the IOMMU is off.
    pub iommu_group: Option<u32>,
    /// Its network interfaces.
    pub interfaces: Vec<NetInterface>,
}

impl PciFunction {
    /// Whether vfio-pci is bound.
    pub fn vfio_bound(&self) -> bool {
        self.driver.as_deref() == Some("vfio-pci")
    }

    /// Its entry in [`KNOWN_CARDS`].
    pub fn identity(&self) -> Option<&'static CardIdentity> {
        identify(self.vendor, self.device)
    }

    /// Where its registers are: the identity's window, or BAR 0.
    pub fn registers(&self) -> RegisterWindow {
        self.identity()
            .map_or(RegisterWindow::BAR0, |c| c.registers)
    }

    /// `10ee:903f`.
    pub fn ids(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor, self.device)
    }
}

/// Another device in a function's IOMMU group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// Address, as the group directory names it.
    pub addr: String,
    /// Its driver.
    pub driver: Option<String>,
    /// Its class code, if readable.
    pub class: Option<u32>,
}

impl GroupMember {
    /// Whether it keeps VFIO from using the group. The kernel lets user space own a group
    /// when each member is bound to vfio-pci, to pci-stub, to no driver, or is a PCI bridge
    /// (class 0x0604, bound to `pcieport`); any other driver does DMA of its own.
    pub fn blocks_vfio(&self) -> bool {
        match self.driver.as_deref() {
            None | Some("vfio-pci") | Some("pci-stub") => false,
            Some(_) => self.class.is_none_or(|c| c / 0x100 != 0x0604),
        }
    }

    /// `0000:03:00.1 (bound to onic)`.
    pub fn describe(&self) -> String {
        match &self.driver {
            Some(d) => format!("{} (bound to {d})", self.addr),
            None => format!("{} (no driver)", self.addr),
        }
    }
}

/// A card found on the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// The function.
    pub function: PciFunction,
    /// Its identity.
    pub identity: &'static CardIdentity,
    /// The other members of its IOMMU group.
    pub group_members: Vec<GroupMember>,
}

impl Card {
    /// Group members that keep VFIO from using the group.
    pub fn blockers(&self) -> Vec<&GroupMember> {
        self.group_members
            .iter()
            .filter(|m| m.blocks_vfio())
            .collect()
    }
}

/// What the bus holds for this driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// Whether the IOMMU is on (`/sys/kernel/iommu_groups` has groups).
    pub iommu: bool,
    /// Whether the vfio-pci driver is loaded.
    pub vfio_pci_loaded: bool,
    /// The cards, by address.
    pub cards: Vec<Card>,
}

/// Why the bus could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// A directory could not be listed.
    #[error("cannot list {}: {source} (is sysfs mounted at /sys?)", path.display())]
    List {
        /// The directory.
        path: PathBuf,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
    /// An attribute could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
    /// An attribute holds something else than the kernel writes there.
    #[error("{} holds `{text}`, expected {expected}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it holds.
        text: String,
        /// What it should hold.
        expected: &'static str,
    },
}

/// The final component of a symlink's target (`.../drivers/vfio-pci` → `vfio-pci`).
pub(crate) fn link_name(sys: &dyn VfioSys, path: &Path) -> Option<String> {
    sys.read_link(path)
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn read_attr(sys: &dyn VfioSys, path: &Path) -> Result<String, InventoryError> {
    sys.read_file(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| InventoryError::Read {
            path: path.to_path_buf(),
            source,
        })
}

fn read_hex(sys: &dyn VfioSys, path: &Path, expected: &'static str) -> Result<u32, InventoryError> {
    let text = read_attr(sys, path)?;
    text.strip_prefix("0x")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| InventoryError::Malformed {
            path: path.to_path_buf(),
            text,
            expected,
        })
}

fn read_id(sys: &dyn VfioSys, path: &Path) -> Result<u16, InventoryError> {
    let v = read_hex(sys, path, "a 16-bit hex id such as 0x10ee")?;
    u16::try_from(v).map_err(|_| InventoryError::Malformed {
        path: path.to_path_buf(),
        text: format!("{v:#x}"),
        expected: "a 16-bit hex id such as 0x10ee",
    })
}

/// The vendor and device ids of the function at `dev` (its sysfs directory).
pub fn read_ids(sys: &dyn VfioSys, dev: &Path) -> Result<(u16, u16), InventoryError> {
    Ok((
        read_id(sys, &dev.join("vendor"))?,
        read_id(sys, &dev.join("device"))?,
    ))
}

/// `driver_override` as set, `None` when unset (the kernel shows `(null)`) or absent.
fn read_override(sys: &dyn VfioSys, dev: &Path) -> Option<String> {
    let text = sys.read_file(&dev.join("driver_override")).ok()?;
    let text = text.trim();
    (!text.is_empty() && text != "(null)").then(|| text.to_string())
}

fn read_interfaces(sys: &dyn VfioSys, dev: &Path) -> Vec<NetInterface> {
    let net = dev.join("net");
    let names = sys.list_dir(&net).unwrap_or_default();
    names
        .into_iter()
        .map(|name| {
            let dir = net.join(&name);
            let operstate = sys
                .read_file(&dir.join("operstate"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".to_string());
            // `flags` is the interface's IFF_* word in hex; IFF_UP is its lowest bit.
            let admin_up = sys
                .read_file(&dir.join("flags"))
                .ok()
                .and_then(|s| {
                    let t = s.trim();
                    u32::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16).ok()
                })
                .is_some_and(|flags| flags % 2 == 1);
            NetInterface {
                name,
                operstate,
                admin_up,
            }
        })
        .collect()
}

/// The function at `addr`, or `None` if there is no such device.
pub fn read_function(
    sys: &dyn VfioSys,
    addr: PciAddress,
) -> Result<Option<PciFunction>, InventoryError> {
    let dev = addr.sysfs_path();
    if !sys.exists(&dev) {
        return Ok(None);
    }
    let (vendor, device) = read_ids(sys, &dev)?;
    let class = read_hex(sys, &dev.join("class"), "a hex class code such as 0x028000")?;
    Ok(Some(PciFunction {
        addr,
        vendor,
        device,
        class,
        driver: link_name(sys, &dev.join("driver")),
        driver_override: read_override(sys, &dev),
        iommu_group: link_name(sys, &dev.join("iommu_group")).and_then(|g| g.parse().ok()),
        interfaces: read_interfaces(sys, &dev),
    }))
}

/// The members of IOMMU group `group` other than `except`, with their drivers.
pub fn group_members(sys: &dyn VfioSys, group: u32, except: &str) -> Vec<GroupMember> {
    let dir = PathBuf::from(format!("{IOMMU_GROUPS}/{group}/devices"));
    sys.list_dir(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m != except)
        .map(|m| {
            let member = dir.join(&m);
            GroupMember {
                driver: link_name(sys, &member.join("driver")),
                class: read_hex(sys, &member.join("class"), "a class code").ok(),
                addr: m,
            }
        })
        .collect()
}

/// Whether the IOMMU is on: the kernel made at least one IOMMU group.
pub fn iommu_enabled(sys: &dyn VfioSys) -> bool {
    sys.list_dir(Path::new(IOMMU_GROUPS))
        .is_ok_and(|groups| !groups.is_empty())
}

/// Whether the vfio-pci driver is loaded.
pub fn vfio_pci_loaded(sys: &dyn VfioSys) -> bool {
    sys.exists(Path::new(VFIO_PCI_DRIVER))
}

/// Every known card on the bus, by address.
pub fn scan(sys: &dyn VfioSys) -> Result<Inventory, InventoryError> {
    let dir = Path::new(PCI_DEVICES);
    let names = sys.list_dir(dir).map_err(|source| InventoryError::List {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut cards = Vec::new();
    for name in names {
        // The kernel names every entry DDDD:BB:DD.F; anything else is not a function.
        let Ok(addr) = name.parse::<PciAddress>() else {
            continue;
        };
        let (vendor, device) = read_ids(sys, &dir.join(&name))?;
        let Some(identity) = identify(vendor, device) else {
            continue;
        };
        let Some(function) = read_function(sys, addr)? else {
            continue;
        };
        let group_members = function
            .iommu_group
            .map(|g| group_members(sys, g, &name))
            .unwrap_or_default();
        cards.push(Card {
            function,
            identity,
            group_members,
        });
    }
    cards.sort_by_key(|c| c.function.addr.to_string());
    Ok(Inventory {
        iommu: iommu_enabled(sys),
        vfio_pci_loaded: vfio_pci_loaded(sys),
        cards,
    })
}
