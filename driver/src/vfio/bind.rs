//! Handing a card to vfio-pci and back to its kernel driver, as DPDK's `dpdk-devbind.py
//! --bind=vfio-pci` does, through the files the kernel documents for it
//! (`Documentation/ABI/testing/sysfs-bus-pci`, `sysfs-bus-platform` for `driver_override`):
//!
//! 1. `/sys/bus/pci/devices/A/driver_override` ← `vfio-pci`: from now on only the driver of
//!    that name may bind the device (an empty write clears it, back to matching by id);
//!    writing it neither unbinds the device nor loads the driver;
//! 2. `/sys/bus/pci/devices/A/driver/unbind` ← `A` (the bound driver's `unbind`): the driver
//!    lets go of the device;
//! 3. `/sys/bus/pci/drivers_probe` ← `A`: the kernel looks for a driver for the device, which
//!    with the override can only be vfio-pci, and binds it.
//!
//! The work is split in a plan ([`plan_bind`], [`plan_unbind`]: every check, then the writes,
//! in order, as [`SysfsWrite`]s) and its execution ([`execute`]: the writes, then the check
//! that the device's `driver` link names the driver wanted). Each refusal names what stands
//! in the way and how to clear it.

use super::inventory::{
    self, group_members, iommu_enabled, read_function, vfio_pci_loaded, GroupMember,
    InventoryError, PciFunction,
};
use super::{PciAddress, VfioSys};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `/sys/bus/pci/drivers_probe`.
pub const DRIVERS_PROBE: &str = "/sys/bus/pci/drivers_probe";

/// One write to a sysfs file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsWrite {
    /// The file.
    pub path: PathBuf,
    /// What is written (no trailing newline; `"\n"` clears `driver_override`).
    pub value: String,
}

impl fmt::Display for SysfsWrite {
    /// The shell command that makes the same write.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value.trim_end_matches('\n');
        if value.is_empty() {
            write!(f, "echo | sudo tee {}", self.path.display())
        } else {
            write!(f, "echo {value} | sudo tee {}", self.path.display())
        }
    }
}

/// The driver a plan hands the device to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// vfio-pci (`nlbctl bind`).
    VfioPci,
    /// Whatever kernel driver matches the device's ids (`nlbctl unbind`).
    Kernel,
}

/// What to do with one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing: the device is already where the plan would take it.
    Done {
        /// Address.
        addr: PciAddress,
        /// Its driver.
        driver: Option<String>,
    },
    /// These writes, in order.
    Change(BindPlan),
}

/// The writes that move one device to another driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindPlan {
    /// Address.
    pub addr: PciAddress,
    /// The driver bound before.
    pub from: Option<String>,
    /// Where the device goes.
    pub to: Target,
    /// The writes, in order.
    pub writes: Vec<SysfsWrite>,
}

/// Why a device cannot be bound or unbound; every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The address does not parse.
    #[error(transparent)]
    Address(#[from] super::VfioError),
    /// No such device.
    #[error(
        "there is no PCI device {addr} (no {path}); `lspci -D -nn -d 10ee:` lists the \
         AMD/Xilinx devices of this machine and `nlbctl devices` the cards it found",
        path = addr.sysfs_path().display()
    )]
    NoSuchDevice {
        /// Address.
        addr: PciAddress,
    },
    /// sysfs could not be read.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// Not a known card.
    #[error(
        "PCI device {addr} ({ids}) is not a card nlb-offload knows (known: the OpenNIC shell's \
         QDMA functions {known}); check the address with `nlbctl devices` or `lspci -D -nn -d \
         10ee:`, or pass --force to hand it to vfio-pci anyway"
    )]
    UnknownCard {
        /// Address.
        addr: PciAddress,
        /// Its vendor:device ids.
        ids: String,
        /// The known ids.
        known: String,
    },
    /// The IOMMU is on, but not for this device.
    #[error(
        "PCI device {addr} has no IOMMU group although the IOMMU is on (other devices have \
         groups in {groups}): no IOMMU covers it, so vfio-pci cannot give it to user space. \
         `sudo dmesg | grep -i -e DMAR -e IOMMU` says what the IOMMU driver made of it; another \
         slot may be covered",
        groups = inventory::IOMMU_GROUPS
    )]
    NoGroup {
        /// Address.
        addr: PciAddress,
    },
    /// The IOMMU is off.
    #[error(
        "PCI device {addr} has no IOMMU group: the IOMMU is off ({groups} is empty), and \
         vfio-pci gives devices to user space only behind an IOMMU. Turn on VT-d (Intel) or \
         AMD-Vi (AMD) in the firmware setup, boot with `intel_iommu=on iommu=pt` (Intel) or \
         `amd_iommu=on iommu=pt` (AMD) on the kernel command line, and run this again",
        groups = inventory::IOMMU_GROUPS
    )]
    NoIommu {
        /// Address.
        addr: PciAddress,
    },
    /// vfio-pci is not loaded.
    #[error(
        "the vfio-pci driver is not loaded (no {path}); load it with `sudo modprobe vfio-pci` \
         and run this again",
        path = inventory::VFIO_PCI_DRIVER
    )]
    VfioPciNotLoaded,
    /// Other devices of the IOMMU group stay on host drivers.
    #[error(
        "IOMMU group {group} of {addr} also holds {others}: vfio-pci can give the card to user \
         space only when every device of its group is bound to vfio-pci (or to no driver). \
         Bind them together (`sudo nlbctl bind {addr} {addrs}`; --force for a device that is not \
         a card), or move the card to a slot with an IOMMU group of its own (`ls \
         /sys/kernel/iommu_groups/{group}/devices` lists the group)"
    )]
    GroupShared {
        /// Address.
        addr: PciAddress,
        /// Group.
        group: u32,
        /// The blocking members, described.
        others: String,
        /// Their addresses.
        addrs: String,
    },
    /// A network interface of the device is up.
    #[error(
        "PCI device {addr} carries the network interface{plural} {names}, up in the kernel's \
         network stack; binding would pull {them} away under whoever uses {them}. Take {them} \
         down first: {commands}"
    )]
    InterfaceUp {
        /// Address.
        addr: PciAddress,
        /// The interfaces, described.
        names: String,
        /// `s` or nothing.
        plural: &'static str,
        /// `it` or `them`.
        them: &'static str,
        /// `sudo ip link set IF down` for each.
        commands: String,
    },
    /// A write was refused.
    #[error(
        "writing `{value}` to {path} for {addr} failed: {source}{hint}{done}",
        value = write.value.trim_end_matches('\n'),
        path = write.path.display()
    )]
    Write {
        /// Address.
        addr: PciAddress,
        /// The write.
        write: SysfsWrite,
        /// What the kernel said.
        #[source]
        source: io::Error,
        /// What to do about it.
        hint: String,
        /// What was already written.
        done: String,
    },
    /// The device did not end up on the driver wanted.
    #[error(
        "after `{probe}`, PCI device {addr} is {now}, not vfio-pci; `sudo dmesg | tail` says \
         why vfio-pci did not take it. driver_override is left at vfio-pci: `sudo nlbctl \
         unbind {addr}` hands the device back to its kernel driver",
        probe = format!("echo {addr} > {DRIVERS_PROBE}"),
        now = describe(driver)
    )]
    NotBound {
        /// Address.
        addr: PciAddress,
        /// Where it is now.
        driver: Option<String>,
    },
}

fn describe(driver: &Option<String>) -> String {
    match driver {
        Some(d) => format!("bound to {d}"),
        None => "bound to no driver".to_string(),
    }
}

/// The addresses in the order given, each once.
fn unique(addrs: &[PciAddress]) -> Vec<PciAddress> {
    let mut seen = Vec::new();
    for &a in addrs {
        if !seen.contains(&a) {
            seen.push(a);
        }
    }
    seen
}

fn exists_or(sys: &dyn VfioSys, addr: PciAddress) -> Result<PciFunction, BindError> {
    read_function(sys, addr)?.ok_or(BindError::NoSuchDevice { addr })
}

/// The writes that hand `f` to `override_value`'s driver (or back to matching by id).
fn writes(f: &PciFunction, override_value: &str) -> Vec<SysfsWrite> {
    let dev = f.addr.sysfs_path();
    let addr = f.addr.to_string();
    let mut w = vec![SysfsWrite {
        path: dev.join("driver_override"),
        value: override_value.to_string(),
    }];
    if f.driver.is_some() {
        w.push(SysfsWrite {
            path: dev.join("driver").join("unbind"),
            value: addr.clone(),
        });
    }
    w.push(SysfsWrite {
        path: PathBuf::from(DRIVERS_PROBE),
        value: addr,
    });
    w
}

/// Checks that each of `addrs` may go to vfio-pci and plans the writes, in the order given.
/// Devices named together may share an IOMMU group. `force` takes devices that are not in
/// [`inventory::KNOWN_CARDS`].
pub fn plan_bind(
    sys: &dyn VfioSys,
    addrs: &[PciAddress],
    force: bool,
) -> Result<Vec<Step>, BindError> {
    let mut steps = Vec::new();
    for &addr in &unique(addrs) {
        let f = exists_or(sys, addr)?;
        if f.vfio_bound() {
            steps.push(Step::Done {
                addr,
                driver: f.driver,
            });
            continue;
        }
        if f.identity().is_none() && !force {
            return Err(BindError::UnknownCard {
                addr,
                ids: f.ids(),
                known: inventory::known_ids(),
            });
        }
        let group = match (f.iommu_group, iommu_enabled(sys)) {
            (Some(g), true) => g,
            (None, true) => return Err(BindError::NoGroup { addr }),
            (_, false) => return Err(BindError::NoIommu { addr }),
        };
        if !vfio_pci_loaded(sys) {
            return Err(BindError::VfioPciNotLoaded);
        }
        let named: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        let blockers: Vec<GroupMember> = group_members(sys, group, &addr.to_string())
            .into_iter()
            .filter(|m| m.blocks_vfio() && !named.contains(&m.addr))
            .collect();
        if !blockers.is_empty() {
            return Err(BindError::GroupShared {
                addr,
                group,
                others: blockers
                    .iter()
                    .map(GroupMember::describe)
                    .collect::<Vec<_>>()
                    .join(", "),
                addrs: blockers
                    .iter()
                    .map(|m| m.addr.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            });
        }
        let up: Vec<_> = f.interfaces.iter().filter(|i| i.is_up()).collect();
        if !up.is_empty() {
            let one = up.len() == 1;
            return Err(BindError::InterfaceUp {
                addr,
                names: up
                    .iter()
                    .map(|i| format!("{} (operstate {})", i.name, i.operstate))
                    .collect::<Vec<_>>()
                    .join(", "),
                plural: if one { "" } else { "s" },
                them: if one { "it" } else { "them" },
                commands: up
                    .iter()
                    .map(|i| format!("`sudo ip link set {} down`", i.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        steps.push(Step::Change(BindPlan {
            addr,
            from: f.driver.clone(),
            to: Target::VfioPci,
            writes: writes(&f, "vfio-pci"),
        }));
    }
    Ok(steps)
}

/// Plans handing each of `addrs` back to the kernel driver that matches its ids: clear
/// `driver_override`, unbind vfio-pci, reprobe. A device that is not on vfio-pci and has no
/// override is left alone.
pub fn plan_unbind(sys: &dyn VfioSys, addrs: &[PciAddress]) -> Result<Vec<Step>, BindError> {
    let mut steps = Vec::new();
    for &addr in &unique(addrs) {
        let f = exists_or(sys, addr)?;
        if !f.vfio_bound() && f.driver_override.is_none() {
            steps.push(Step::Done {
                addr,
                driver: f.driver,
            });
            continue;
        }
        steps.push(Step::Change(BindPlan {
            addr,
            from: f.driver.clone(),
            to: Target::Kernel,
            writes: writes(&f, "\n"),
        }));
    }
    Ok(steps)
}

/// Makes the plan's writes in order, then waits (up to `wait`: a driver may probe
/// asynchronously) for the device's `driver` link to show the outcome. Returns the driver the
/// device ends up bound to: vfio-pci for a bind (anything else is [`BindError::NotBound`]);
/// for an unbind whatever kernel driver claimed it, possibly none.
pub fn execute(
    sys: &dyn VfioSys,
    plan: &BindPlan,
    wait: Duration,
) -> Result<Option<String>, BindError> {
    for (k, w) in plan.writes.iter().enumerate() {
        if let Err(source) = sys.write_file(&w.path, &w.value) {
            let hint = match source.kind() {
                io::ErrorKind::PermissionDenied => {
                    " (writing sysfs takes root: run it with sudo)".to_string()
                }
                io::ErrorKind::NotFound => format!(
                    " (the kernel has no such file: is {} still there? `lspci -D -s {}`)",
                    plan.addr.sysfs_path().display(),
                    plan.addr
                ),
                _ => String::new(),
            };
            let done = if k == 0 {
                "; nothing was changed".to_string()
            } else {
                format!(
                    "; already done: {}",
                    plan.writes[..k]
                        .iter()
                        .map(|w| format!("`{w}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(BindError::Write {
                addr: plan.addr,
                write: w.clone(),
                source,
                hint,
                done,
            });
        }
    }
    let link = plan.addr.sysfs_path().join("driver");
    let deadline = Instant::now() + wait;
    loop {
        let driver = inventory::link_name(sys, &link);
        let settled = match plan.to {
            Target::VfioPci => driver.as_deref() == Some("vfio-pci"),
            Target::Kernel => driver.is_some() && driver.as_deref() != Some("vfio-pci"),
        };
        if settled || Instant::now() >= deadline {
            return match plan.to {
                Target::VfioPci if !settled => Err(BindError::NotBound {
                    addr: plan.addr,
                    driver,
                }),
                _ => Ok(driver),
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
