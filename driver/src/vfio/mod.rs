//! The VFIO backend: a real NIC, opened by PCI address, its register window mapped into this
//! process.
//!
//! Opening checks, in order, what a user gets wrong when handing a PCI device to user space,
//! and says what to type for each: the address names no device; the device is bound to a host
//! driver instead of `vfio-pci`; there is no IOMMU group; `/dev/vfio/N` is not ours to open; a
//! sibling in the IOMMU group is still bound to a host driver; and, once the registers answer,
//! that it is an nlb-offload NIC of the register map version this driver speaks ([`discover`]).
//!
//! Where the registers are comes from the device's ids ([`inventory::KNOWN_CARDS`]): on an
//! OpenNIC shell function, BAR 2 from byte 0x200000 (the shell's 322 MHz user box); on any
//! other device, BAR 0 from byte 0. The window is mmapped when the region allows it (volatile
//! 32-bit accesses); otherwise registers go through `pread`/`pwrite` on the device fd. All
//! kernel access goes through [`VfioSys`]. [`inventory`] lists the cards on the bus and
//! [`bind`] hands one to vfio-pci.

pub mod bind;
pub mod inventory;
pub mod sys;

use crate::device::{Device, DeviceError};
use crate::discovery::{discover, DeviceInfo, DiscoveryError};
use crate::dma::{DmaRegion, IrqLine};
use crate::pcie::{PcieCosts, PcieLedger, PcieStats};
use inventory::{identify, link_name, read_ids, CardIdentity, RegisterWindow};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
pub use sys::{LinuxSys, Mmio, RegionInfo, RootedSys, SysOpenError, VfioDeviceIo, VfioSys};

/// Region index of BAR 0 (`VFIO_PCI_BAR0_REGION_INDEX`).
pub const BAR0: u32 = 0;

/// Bytes of the register window the register map uses: the end of the last register of the
/// last block (from BAR 0 offset 0 on the simulated cards, from BAR 2 + 0x200000 on OpenNIC).
pub fn bar0_span() -> u64 {
    use nlb_hw::blocks::queues;
    let inject_end = u64::from(queues::INJECT_DATA) + 4 * u64::from(queues::INJECT_DATA_COUNT);
    let punt_end = u64::from(queues::PUNT_DATA) + 4 * u64::from(queues::PUNT_DATA_COUNT);
    inject_end.max(punt_end)
}

/// A PCI address `DDDD:BB:DD.F` (the domain may be left out: `03:00.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciAddress {
    /// Domain (segment).
    pub domain: u16,
    /// Bus.
    pub bus: u8,
    /// Device, 0..=31.
    pub device: u8,
    /// Function, 0..=7.
    pub function: u8,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciAddress {
    type Err = VfioError;

    fn from_str(s: &str) -> Result<Self, VfioError> {
        let bad = |why: &'static str| VfioError::BadAddress {
            given: s.to_string(),
            why,
        };
        let (head, function) = s
            .rsplit_once('.')
            .ok_or_else(|| bad("expected DDDD:BB:DD.F, e.g. 0000:03:00.0"))?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0000", *b, *v),
            _ => return Err(bad("expected DDDD:BB:DD.F, e.g. 0000:03:00.0")),
        };
        let hex = |text: &str, max_len: usize| -> Option<u32> {
            (!text.is_empty() && text.len() <= max_len)
                .then(|| u32::from_str_radix(text, 16).ok())
                .flatten()
        };
        let domain = hex(domain, 4).ok_or_else(|| bad("the domain is 1 to 4 hex digits"))?;
        let bus = hex(bus, 2).ok_or_else(|| bad("the bus is 1 or 2 hex digits"))?;
        let device = hex(device, 2)
            .filter(|d| *d < 32)
            .ok_or_else(|| bad("the device number is hex 00 to 1f"))?;
        let function = hex(function, 1)
            .filter(|f| *f < 8)
            .ok_or_else(|| bad("the function number is 0 to 7"))?;
        Ok(PciAddress {
            domain: domain as u16,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl PciAddress {
    /// `/sys/bus/pci/devices/<address>`.
    pub fn sysfs_path(&self) -> PathBuf {
        PathBuf::from(format!("/sys/bus/pci/devices/{self}"))
    }
}

/// The shell commands that hand `addr` (currently bound to `driver`, if any) to vfio-pci.
pub fn rebind_commands(addr: &str, driver: Option<&str>, vfio_pci_loaded: bool) -> String {
    let mut lines = Vec::new();
    if !vfio_pci_loaded {
        lines.push("sudo modprobe vfio-pci".to_string());
    }
    lines.push(format!(
        "echo vfio-pci | sudo tee /sys/bus/pci/devices/{addr}/driver_override"
    ));
    if driver.is_some() {
        lines.push(format!(
            "echo {addr} | sudo tee /sys/bus/pci/devices/{addr}/driver/unbind"
        ));
    }
    lines.push(format!("echo {addr} | sudo tee /sys/bus/pci/drivers_probe"));
    lines
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn describe_driver(driver: &Option<String>) -> String {
    match driver {
        Some(d) => format!("bound to the `{d}` driver"),
        None => "not bound to any driver".to_string(),
    }
}

/// Why a VFIO device could not be opened or used; every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum VfioError {
    /// The address does not parse.
    #[error("`{given}` is not a PCI address: {why}")]
    BadAddress {
        /// What was given.
        given: String,
        /// What is wrong.
        why: &'static str,
    },
    /// No such PCI device.
    #[error(
        "there is no PCI device {addr} (no {addr_path}); `lspci -D` lists the devices of this \
         machine",
        addr_path = addr.sysfs_path().display()
    )]
    NoSuchDevice {
        /// Address.
        addr: PciAddress,
    },
    /// Bound to another driver, or to none.
    #[error(
        "PCI device {addr} is {}, not to vfio-pci; hand it to vfio-pci with `sudo nlbctl bind \
         {addr}` (which checks what could stand in the way first), or by hand:\n{commands}",
        describe_driver(driver)
    )]
    NotBound {
        /// Address.
        addr: PciAddress,
        /// The driver it is bound to.
        driver: Option<String>,
        /// Commands to type.
        commands: String,
    },
    /// No IOMMU group: the IOMMU is off.
    #[error(
        "PCI device {addr} has no IOMMU group: the IOMMU is off. Turn on VT-d/AMD-Vi in the \
         firmware setup and boot with `intel_iommu=on iommu=pt` (Intel) or `amd_iommu=on` (AMD) \
         on the kernel command line, then rebind the device"
    )]
    NoIommuGroup {
        /// Address.
        addr: PciAddress,
    },
    /// vfio is in no-IOMMU mode, which vfio-ioctls (Type1 IOMMU only) cannot use.
    #[error(
        "vfio runs in no-IOMMU mode ({path} exists); this driver needs a real IOMMU: turn the \
         IOMMU on (see `intel_iommu=on`/`amd_iommu=on`) and \
         `echo 0 | sudo tee /sys/module/vfio/parameters/enable_unsafe_noiommu_mode`"
    )]
    NoIommuMode {
        /// The no-IOMMU group node.
        path: PathBuf,
    },
    /// The group node does not exist.
    #[error(
        "{path} does not exist although {addr} is bound to vfio-pci in IOMMU group {group}; \
         is udev still creating it? Check `ls -l /dev/vfio/`"
    )]
    GroupNodeMissing {
        /// Address.
        addr: PciAddress,
        /// Group.
        group: u32,
        /// The node.
        path: PathBuf,
    },
    /// Permission denied on a VFIO node.
    #[error(
        "no permission to open {path} (IOMMU group {group} of {addr}): run as root, or give \
         yourself the group with `sudo chown $USER {path}`"
    )]
    NoPermission {
        /// Address.
        addr: PciAddress,
        /// Group.
        group: u32,
        /// The node.
        path: PathBuf,
    },
    /// The group is held by another process.
    #[error(
        "{path} is busy: another process (a VM, another nlbctl or nlbd) holds IOMMU group \
         {group}; `sudo fuser -v {path}` shows which"
    )]
    GroupBusy {
        /// Group.
        group: u32,
        /// The node.
        path: PathBuf,
    },
    /// Other devices in the group are bound to host drivers.
    #[error(
        "IOMMU group {group} of {addr} is not viable: {blockers} still bound to a host driver; \
         hand each to vfio-pci with:\n{commands}"
    )]
    GroupNotViable {
        /// Address.
        addr: PciAddress,
        /// Group.
        group: u32,
        /// The devices that block it, with their drivers.
        blockers: String,
        /// Commands to type.
        commands: String,
    },
    /// The VFIO container is missing or unusable.
    #[error("{source}; load the VFIO modules with `sudo modprobe vfio-pci` and check `ls -l /dev/vfio/vfio`")]
    Container {
        /// What the kernel said.
        #[source]
        source: SysOpenError,
    },
    /// Opening through VFIO failed otherwise.
    #[error("opening {addr} through VFIO failed: {source}")]
    Open {
        /// Address.
        addr: PciAddress,
        /// What the kernel said.
        #[source]
        source: SysOpenError,
    },
    /// The BAR of the registers is missing or not usable.
    #[error("BAR {bar} of {addr}{card} {why}: is this the right function of the card?")]
    Bar {
        /// Address.
        addr: PciAddress,
        /// The BAR.
        bar: u32,
        /// ` (OpenNIC shell (QDMA) PF0, 10ee:903f)` for a known card, else empty.
        card: String,
        /// What is wrong.
        why: String,
    },
    /// BAR 0 answers, but not as an nlb-offload NIC.
    #[error(
        "PCI device {addr} is not an nlb-offload NIC: {source}. Check the address (`lspci -D \
         -nn` lists every device with its vendor:device ids) and that the NIC bitstream is loaded"
    )]
    NotOurDevice {
        /// Address.
        addr: PciAddress,
        /// What discovery saw.
        #[source]
        source: DiscoveryError,
    },
    /// The NIC runs a bitstream of another register map version.
    #[error("PCI device {addr}: {source}")]
    RegmapVersion {
        /// Address.
        addr: PciAddress,
        /// Versions.
        #[source]
        source: DiscoveryError,
    },
    /// Discovery refused the device for another reason.
    #[error("PCI device {addr}: {source}")]
    Discovery {
        /// Address.
        addr: PciAddress,
        /// Why.
        #[source]
        source: DiscoveryError,
    },
}

enum BarPath {
    Mapped(Box<dyn Mmio>),
    ReadWrite,
}

/// An nlb-offload NIC through VFIO.
pub struct Vfio {
    addr: PciAddress,
    io: Box<dyn VfioDeviceIo>,
    bar: BarPath,
    /// Where register 0 is.
    window: RegisterWindow,
    /// Bytes of registers from there.
    window_len: u64,
    info: Option<DeviceInfo>,
    /// Regions mapped for the device's DMA, kept alive while mapped.
    mapped: Vec<DmaRegion>,
    /// Register accesses, counted (their cost is the card's own).
    ledger: PcieLedger,
}

impl fmt::Debug for Vfio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vfio")
            .field("addr", &self.addr)
            .field("mmapped", &self.is_mmapped())
            .field("window", &self.window)
            .field("window_len", &self.window_len)
            .finish()
    }
}

impl Vfio {
    /// Opens the NIC at `addr` (`0000:03:00.0`) on this machine.
    pub fn open(addr: &str) -> Result<Vfio, VfioError> {
        Vfio::open_with(&LinuxSys, addr)
    }

    /// Opens the NIC at `addr` through the given system layer.
    pub fn open_with(sys: &dyn VfioSys, addr: &str) -> Result<Vfio, VfioError> {
        let addr: PciAddress = addr.parse()?;
        let dev_path = addr.sysfs_path();
        if !sys.exists(&dev_path) {
            return Err(VfioError::NoSuchDevice { addr });
        }
        let driver = link_name(sys, &dev_path.join("driver"));
        if driver.as_deref() != Some("vfio-pci") {
            let loaded = sys.exists(Path::new("/sys/bus/pci/drivers/vfio-pci"));
            return Err(VfioError::NotBound {
                addr,
                commands: rebind_commands(&addr.to_string(), driver.as_deref(), loaded),
                driver,
            });
        }
        let group = link_name(sys, &dev_path.join("iommu_group"))
            .and_then(|g| g.parse::<u32>().ok())
            .ok_or(VfioError::NoIommuGroup { addr })?;
        let group_path = PathBuf::from(format!("/dev/vfio/{group}"));
        if !sys.exists(&group_path) {
            let noiommu = PathBuf::from(format!("/dev/vfio/noiommu-{group}"));
            if sys.exists(&noiommu) {
                return Err(VfioError::NoIommuMode { path: noiommu });
            }
            return Err(VfioError::GroupNodeMissing {
                addr,
                group,
                path: group_path,
            });
        }
        for path in [group_path.clone(), PathBuf::from("/dev/vfio/vfio")] {
            if let Err(e) = sys.check_rw(&path) {
                return Err(classify_node_error(e, addr, group, path));
            }
        }
        let io = match sys.open_device(&dev_path) {
            Ok(io) => io,
            Err(SysOpenError::GroupNotViable) => return Err(not_viable(sys, addr, group)),
            Err(SysOpenError::Group(e)) => {
                return Err(classify_node_error(e, addr, group, group_path))
            }
            Err(e @ (SysOpenError::Container(_) | SysOpenError::ContainerUnusable(_))) => {
                return Err(VfioError::Container { source: e })
            }
            Err(e) => return Err(VfioError::Open { addr, source: e }),
        };
        // Where the registers are: a known card's window, else BAR 0 (unreadable ids, as
        // on a device sysfs cannot describe, count as unknown).
        let card = read_ids(sys, &dev_path)
            .ok()
            .and_then(|(vendor, device)| identify(vendor, device));
        let window = card.map_or(RegisterWindow::BAR0, |c| c.registers);
        let (bar, window_len) = open_window(io.as_ref(), addr, card, window)?;
        let mut vfio = Vfio {
            addr,
            io,
            bar,
            window,
            window_len,
            info: None,
            mapped: Vec::new(),
            ledger: PcieLedger::new(PcieCosts::default()),
        };
        match discover(&mut vfio) {
            Ok(info) => vfio.info = Some(info),
            Err(source @ DiscoveryError::NotOurDevice { .. }) => {
                return Err(VfioError::NotOurDevice { addr, source })
            }
            Err(source @ DiscoveryError::RegmapVersion { .. }) => {
                return Err(VfioError::RegmapVersion { addr, source })
            }
            Err(source) => return Err(VfioError::Discovery { addr, source }),
        }
        Ok(vfio)
    }

    /// The PCI address.
    pub fn address(&self) -> PciAddress {
        self.addr
    }

    /// Where its registers are.
    pub fn registers(&self) -> RegisterWindow {
        self.window
    }

    /// Whether the register window is memory-mapped (otherwise `pread`/`pwrite`).
    pub fn is_mmapped(&self) -> bool {
        matches!(self.bar, BarPath::Mapped(_))
    }

    /// What discovery found when the device was opened.
    pub fn info(&self) -> Option<&DeviceInfo> {
        self.info.as_ref()
    }

    fn check(&self, offset: u32) -> Result<u64, DeviceError> {
        let at = u64::from(offset);
        if !offset.is_multiple_of(4) {
            return Err(DeviceError::BadOffset {
                offset,
                why: "not 4-byte aligned",
            });
        }
        if at + 4 > self.window_len {
            return Err(DeviceError::BadOffset {
                offset,
                why: if self.window == RegisterWindow::BAR0 {
                    "beyond BAR 0"
                } else {
                    "beyond the register window"
                },
            });
        }
        Ok(at)
    }

    fn io_error(&self, what: &str, offset: u32, source: io::Error) -> DeviceError {
        let what = if self.window == RegisterWindow::BAR0 {
            format!("{what} BAR 0 at {offset:#x} of pci:{}", self.addr)
        } else {
            format!(
                "{what} register {offset:#x} (BAR {} at {:#x}) of pci:{}",
                self.window.bar,
                self.window.offset + u64::from(offset),
                self.addr
            )
        };
        DeviceError::Io { what, source }
    }
}

/// Checks the BAR of `window` and maps it (or settles for `pread`/`pwrite`): the access path
/// and the window's length.
fn open_window(
    io: &dyn VfioDeviceIo,
    addr: PciAddress,
    card: Option<&CardIdentity>,
    window: RegisterWindow,
) -> Result<(BarPath, u64), VfioError> {
    let bar_error = |why: String| VfioError::Bar {
        addr,
        bar: window.bar,
        card: card.map_or_else(String::new, |c| {
            format!(
                " ({} PF{}, {:04x}:{:04x})",
                c.kind, c.pf, c.vendor, c.device
            )
        }),
        why,
    };
    let region = io
        .region(window.bar)
        .ok_or_else(|| bar_error("does not exist".into()))?;
    let span = bar0_span();
    let need = window.offset + span;
    if region.size < need {
        let why = if window == RegisterWindow::BAR0 {
            format!(
                "is {:#x} bytes, the register map needs {need:#x}",
                region.size
            )
        } else {
            format!(
                "is {:#x} bytes; the register map at {window} needs {need:#x} ({:#x} + \
                 {span:#x}), which the OpenNIC shell's 4 MiB BAR 2 has",
                region.size, window.offset
            )
        };
        return Err(bar_error(why));
    }
    if !(region.readable && region.writable) {
        return Err(bar_error("is not readable and writable".into()));
    }
    let rest = region.size - window.offset;
    let len = window.size.map_or(rest, |s| s.min(rest));
    let bar = if mappable(&region, window.offset, len) {
        // A failed mmap is not fatal: pread/pwrite reach the same registers.
        io.map(window.bar, window.offset, len)
            .map(BarPath::Mapped)
            .unwrap_or(BarPath::ReadWrite)
    } else {
        BarPath::ReadWrite
    };
    Ok((bar, len))
}

/// Whether `[offset, offset + len)` of the region can be mapped: the region has the mmap flag
/// and, if the kernel carved it up (sparse mmap), one area covers all of it.
fn mappable(region: &RegionInfo, offset: u64, len: u64) -> bool {
    if !region.mmap {
        return false;
    }
    match &region.sparse_areas {
        None => true,
        Some(areas) => areas
            .iter()
            .any(|&(off, size)| off <= offset && off.saturating_add(size) >= offset + len),
    }
}

fn classify_node_error(e: io::Error, addr: PciAddress, group: u32, path: PathBuf) -> VfioError {
    match e.kind() {
        io::ErrorKind::PermissionDenied => VfioError::NoPermission { addr, group, path },
        io::ErrorKind::NotFound if path.ends_with("vfio") => VfioError::Container {
            source: SysOpenError::Container(e),
        },
        io::ErrorKind::NotFound => VfioError::GroupNodeMissing { addr, group, path },
        _ if e.raw_os_error() == Some(libc::EBUSY) => VfioError::GroupBusy { group, path },
        _ if path.ends_with("vfio") => VfioError::Container {
            source: SysOpenError::Container(e),
        },
        _ => VfioError::Open {
            addr,
            source: SysOpenError::Group(e),
        },
    }
}

fn not_viable(sys: &dyn VfioSys, addr: PciAddress, group: u32) -> VfioError {
    let loaded = inventory::vfio_pci_loaded(sys);
    let mut blockers = Vec::new();
    let mut commands = Vec::new();
    // The kernel accepts group members bound to vfio-pci or pci-stub, to none, and bridges.
    for member in inventory::group_members(sys, group, "") {
        if !member.blocks_vfio() {
            continue;
        }
        let driver = member.driver.as_deref();
        blockers.push(format!("{} ({})", member.addr, driver.unwrap_or_default()));
        commands.push(rebind_commands(
            &member.addr,
            driver,
            loaded || !commands.is_empty(),
        ));
    }
    if blockers.is_empty() {
        blockers.push("a device".into());
        commands.push(format!(
            "    ls -l /sys/kernel/iommu_groups/{group}/devices/*/driver"
        ));
    }
    VfioError::GroupNotViable {
        addr,
        group,
        blockers: blockers.join(", "),
        commands: commands.join("\n"),
    }
}

impl Device for Vfio {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        let at = self.check(offset)?;
        self.ledger.mmio_reads(1);
        match &self.bar {
            BarPath::Mapped(m) => m
                .read32(at)
                .map_err(|e| self.io_error("reading", offset, e)),
            BarPath::ReadWrite => {
                let mut b = [0u8; 4];
                self.io
                    .read_at(self.window.bar, &mut b, self.window.offset + at)
                    .map_err(|e| self.io_error("reading", offset, e))?;
                Ok(u32::from_le_bytes(b))
            }
        }
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        let at = self.check(offset)?;
        self.ledger.mmio_writes(1);
        match &self.bar {
            BarPath::Mapped(m) => m
                .write32(at, value)
                .map_err(|e| self.io_error("writing", offset, e)),
            BarPath::ReadWrite => self
                .io
                .write_at(
                    self.window.bar,
                    &value.to_le_bytes(),
                    self.window.offset + at,
                )
                .map_err(|e| self.io_error("writing", offset, e)),
        }
    }

    fn describe(&self) -> String {
        format!("pci:{}", self.addr)
    }

    /// `VFIO_IOMMU_MAP_DMA` of the region at its IOVA (read and write for the device).
    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        if self.mapped.iter().any(|r| r.iova() == region.iova()) {
            self.dma_unmap(&region.clone())?;
        }
        // SAFETY: the region stays mapped in this process while `self.mapped` holds a handle
        // (until dma_unmap, or drop, unmaps it from the IOMMU first), and DmaRegion only ever
        // touches its memory with atomic accesses, as vfio_dma_map requires.
        unsafe {
            self.io
                .dma_map(region.iova(), region.len(), region.host_addr())
        }
        .map_err(|e| DeviceError::Io {
            what: format!(
                "mapping {} bytes of host memory at IOVA {:#x} for {} (a memlock limit too low                  shows as ENOMEM: raise `ulimit -l` or LimitMEMLOCK= in the unit)",
                region.len(),
                region.iova(),
                self.addr
            ),
            source: e,
        })?;
        self.mapped.push(region.clone());
        Ok(())
    }

    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        let Some(k) = self.mapped.iter().position(|r| r.iova() == region.iova()) else {
            return Ok(());
        };
        let r = self.mapped.remove(k);
        self.io
            .dma_unmap(r.iova(), r.len())
            .map_err(|e| DeviceError::Io {
                what: format!("unmapping IOVA {:#x} of {}", r.iova(), self.addr),
                source: e,
            })
    }

    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        let fds: Vec<_> = lines.iter().map(|l| l.fd()).collect();
        self.io.set_msix(&fds).map_err(|e| DeviceError::Io {
            what: format!("connecting the MSI-X vectors of {}", self.addr),
            source: e,
        })
    }

    fn mmio_seen(&self) -> (u64, u64) {
        let s = self.ledger.stats();
        (s.mmio_reads, s.mmio_writes)
    }

    fn pcie(&mut self) -> PcieStats {
        self.ledger.stats()
    }
}

impl Drop for Vfio {
    fn drop(&mut self) {
        // The device must stop using the memory before it goes.
        for r in std::mem::take(&mut self.mapped) {
            let _ = self.io.dma_unmap(r.iova(), r.len());
        }
    }
}

#[cfg(test)]
mod tests;
