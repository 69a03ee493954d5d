//! A sysfs tree in a directory, laid out as the kernel lays out the PCI bus, and a small fake
//! "kernel" that reacts to the writes `driver_override`, `unbind` and `drivers_probe` take
//! (Documentation/ABI/testing/sysfs-bus-pci):
//!
//! ```text
//! ROOT/sys/devices/pci0000:00/A/{vendor,device,class,driver_override}
//! ROOT/sys/devices/pci0000:00/A/driver      -> ../../../bus/pci/drivers/D
//! ROOT/sys/devices/pci0000:00/A/iommu_group -> ../../../kernel/iommu_groups/N
//! ROOT/sys/devices/pci0000:00/A/net/IF/{operstate,flags}
//! ROOT/sys/bus/pci/devices/A                -> ../../../devices/pci0000:00/A
//! ROOT/sys/bus/pci/drivers/D/{bind,unbind}, D/A -> ../../../../devices/pci0000:00/A
//! ROOT/sys/bus/pci/drivers_probe
//! ROOT/sys/kernel/iommu_groups/N/devices/A  -> ../../../../devices/pci0000:00/A
//! ```
//!
//! The files are plain files, so a write lands in them and nothing happens until
//! [`FakeSysfs::kernel_step`] plays the kernel: a device location written to a driver's
//! `unbind` unbinds that device from that driver; one written to `drivers_probe` binds an
//! unbound device to the driver its `driver_override` names (only that one, and only if it is
//! loaded) or, with no override, to the driver that matches its ids. `driver_override` reads
//! `(null)` when clear; an empty write (`echo > driver_override`) clears it.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A fake sysfs tree under a root directory.
#[derive(Debug)]
pub struct FakeSysfs {
    root: PathBuf,
    /// The driver each device's ids match (what a reprobe without override binds).
    native: Mutex<HashMap<String, String>>,
}

/// A device to add.
#[derive(Debug, Clone)]
pub struct PciDev<'a> {
    /// `DDDD:BB:DD.F`.
    pub addr: &'a str,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// Class code.
    pub class: u32,
    /// IOMMU group (none: the IOMMU is off).
    pub group: Option<u32>,
    /// The driver bound now.
    pub driver: Option<&'a str>,
    /// The driver its ids match (bound again after an override is cleared).
    pub native: Option<&'a str>,
}

fn io_err(what: String, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl FakeSysfs {
    /// An empty PCI bus under `root` (which should exist): no devices, no drivers, no IOMMU
    /// groups.
    pub fn new(root: &Path) -> io::Result<FakeSysfs> {
        let s = FakeSysfs {
            root: root.to_path_buf(),
            native: Mutex::new(HashMap::new()),
        };
        for d in [
            "sys/devices/pci0000:00",
            "sys/bus/pci/devices",
            "sys/bus/pci/drivers",
            "sys/kernel/iommu_groups",
        ] {
            fs::create_dir_all(root.join(d))?;
        }
        fs::write(root.join("sys/bus/pci/drivers_probe"), "")?;
        Ok(s)
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dev_dir(&self, addr: &str) -> PathBuf {
        self.root.join("sys/devices/pci0000:00").join(addr)
    }

    fn driver_dir(&self, name: &str) -> PathBuf {
        self.root.join("sys/bus/pci/drivers").join(name)
    }

    /// Loads driver `name` (its directory with `bind` and `unbind`).
    pub fn load_driver(&self, name: &str) -> io::Result<()> {
        let d = self.driver_dir(name);
        fs::create_dir_all(&d)?;
        for f in ["bind", "unbind", "new_id"] {
            fs::write(d.join(f), "")?;
        }
        Ok(())
    }

    /// Adds a device.
    pub fn add(&self, dev: &PciDev<'_>) -> io::Result<()> {
        let d = self.dev_dir(dev.addr);
        fs::create_dir_all(&d)?;
        fs::write(d.join("vendor"), format!("0x{:04x}\n", dev.vendor))?;
        fs::write(d.join("device"), format!("0x{:04x}\n", dev.device))?;
        fs::write(d.join("class"), format!("0x{:06x}\n", dev.class))?;
        fs::write(d.join("driver_override"), "(null)\n")?;
        symlink(
            format!("../../../devices/pci0000:00/{}", dev.addr),
            self.root.join("sys/bus/pci/devices").join(dev.addr),
        )?;
        if let Some(g) = dev.group {
            let members = self
                .root
                .join(format!("sys/kernel/iommu_groups/{g}/devices"));
            fs::create_dir_all(&members)?;
            symlink(
                format!("../../../../devices/pci0000:00/{}", dev.addr),
                members.join(dev.addr),
            )?;
            symlink(
                format!("../../../kernel/iommu_groups/{g}"),
                d.join("iommu_group"),
            )?;
        }
        if let Some(n) = dev.native {
            self.lock().insert(dev.addr.to_string(), n.to_string());
        }
        self.set_driver(dev.addr, dev.driver)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.native.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Binds `addr` to `driver` (loading it), or unbinds it: both links, as the kernel keeps
    /// them.
    pub fn set_driver(&self, addr: &str, driver: Option<&str>) -> io::Result<()> {
        let link = self.dev_dir(addr).join("driver");
        if let Some(old) = self.driver(addr) {
            let _ = fs::remove_file(self.driver_dir(&old).join(addr));
            fs::remove_file(&link)?;
        }
        if let Some(d) = driver {
            if !self.driver_dir(d).exists() {
                self.load_driver(d)?;
            }
            symlink(format!("../../../bus/pci/drivers/{d}"), &link)?;
            symlink(
                format!("../../../../devices/pci0000:00/{addr}"),
                self.driver_dir(d).join(addr),
            )?;
        }
        Ok(())
    }

    /// Gives `addr` a network interface; `up` sets IFF_UP in `flags`.
    pub fn add_netdev(&self, addr: &str, name: &str, operstate: &str, up: bool) -> io::Result<()> {
        let d = self.dev_dir(addr).join("net").join(name);
        fs::create_dir_all(&d)?;
        fs::write(d.join("operstate"), format!("{operstate}\n"))?;
        fs::write(d.join("flags"), if up { "0x1003\n" } else { "0x1002\n" })
    }

    /// The driver bound to `addr`.
    pub fn driver(&self, addr: &str) -> Option<String> {
        fs::read_link(self.dev_dir(addr).join("driver"))
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    }

    /// `driver_override` of `addr` as the kernel shows it (`(null)` when clear).
    pub fn driver_override(&self, addr: &str) -> String {
        fs::read_to_string(self.dev_dir(addr).join("driver_override"))
            .unwrap_or_default()
            .trim_end()
            .to_string()
    }

    fn take(path: &Path) -> io::Result<Option<String>> {
        let text = fs::read_to_string(path).map_err(|e| io_err(path.display().to_string(), e))?;
        if text.is_empty() {
            return Ok(None);
        }
        fs::write(path, "")?;
        Ok(Some(text.trim().to_string()))
    }

    /// Plays the kernel once: every pending `unbind` (each driver's), then a pending
    /// `drivers_probe`, reading the probed device's `driver_override` as the kernel keeps it
    /// (up to the first newline; nothing left means clear, shown as `(null)`). Safe to run
    /// from a thread while a process writes: `drivers_probe` is taken first, so the writes a
    /// process made before it (override, unbind) are all seen with it. Returns what it did,
    /// one line per action.
    pub fn kernel_step(&self) -> io::Result<Vec<String>> {
        let mut did = Vec::new();
        let probe = Self::take(&self.root.join("sys/bus/pci/drivers_probe"))?;
        let drivers = self.root.join("sys/bus/pci/drivers");
        for entry in fs::read_dir(&drivers)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(addr) = Self::take(&drivers.join(&name).join("unbind"))? {
                if self.driver(&addr).as_deref() == Some(name.as_str()) {
                    self.set_driver(&addr, None)?;
                    did.push(format!("unbind {addr} from {name}"));
                } else {
                    did.push(format!(
                        "unbind {addr} from {name}: ENODEV (not bound to it)"
                    ));
                }
            }
        }
        let Some(addr) = probe else {
            return Ok(did);
        };
        if !self.dev_dir(&addr).exists() {
            did.push(format!("probe {addr}: ENODEV"));
            return Ok(did);
        }
        let path = self.dev_dir(&addr).join("driver_override");
        let text = fs::read_to_string(&path).unwrap_or_default();
        let value = text.split('\n').next().unwrap_or_default().to_string();
        let over = if value.is_empty() || value == "(null)" {
            fs::write(&path, "(null)\n")?;
            None
        } else {
            fs::write(&path, format!("{value}\n"))?;
            Some(value)
        };
        if let Some(d) = self.driver(&addr) {
            did.push(format!("probe {addr}: already bound to {d}"));
            return Ok(did);
        }
        let wanted = over.or_else(|| self.lock().get(&addr).cloned());
        match wanted {
            Some(d) if self.driver_dir(&d).exists() => {
                self.set_driver(&addr, Some(&d))?;
                did.push(format!("probe {addr}: bound to {d}"));
            }
            _ => did.push(format!("probe {addr}: no driver")),
        }
        Ok(did)
    }
}
