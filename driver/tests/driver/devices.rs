//! Finding cards on the PCI bus and handing them to vfio-pci, against sysfs trees built in a
//! temporary directory as the kernel lays them out (`nlb_testkit::sysfs`). The expectations
//! come from the kernel's sysfs ABI (Documentation/ABI/testing/sysfs-bus-pci and the
//! driver_override text): `driver_override` names the one driver that may bind, an empty write
//! clears it, a device location written to a driver's `unbind` unbinds it, one written to
//! `/sys/bus/pci/drivers_probe` has the kernel bind a driver; and from the OpenNIC shell's
//! numbering of its QDMA functions (`10ee:9<PF><gen><width>`, registers in BAR 2's 322 MHz box
//! at 0x200000).

use nlb_driver::vfio::bind::{self, BindError, Step, SysfsWrite, Target};
use nlb_driver::vfio::inventory::{self, RegisterWindow};
use nlb_driver::vfio::{PciAddress, RootedSys, SysOpenError, VfioDeviceIo, VfioSys};
use nlb_testkit::sysfs::{FakeSysfs, PciDev};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

const CARD: &str = "0000:3b:00.0";
const CARD_PF1: &str = "0000:3b:00.1";
const INTEL: &str = "0000:01:00.0";

fn addr(a: &str) -> PciAddress {
    a.parse().unwrap()
}

/// A machine with the IOMMU on and vfio-pci loaded: an OpenNIC card (Gen3 x16) whose PF0 is
/// on the OpenNIC kernel driver `onic` (interface down) and PF1 on vfio-pci, each alone in its
/// IOMMU group; an Intel NIC on i40e; an AMD/Xilinx function that is no card of ours.
fn machine(dir: &Path) -> FakeSysfs {
    let fs = FakeSysfs::new(dir).unwrap();
    fs.load_driver("vfio-pci").unwrap();
    let dev = |addr, vendor, device, class, group, driver, native| PciDev {
        addr,
        vendor,
        device,
        class,
        group: Some(group),
        driver,
        native,
    };
    fs.add(&dev(
        CARD,
        0x10ee,
        0x903f,
        0x028000,
        40,
        Some("onic"),
        Some("onic"),
    ))
    .unwrap();
    fs.add(&dev(
        CARD_PF1,
        0x10ee,
        0x913f,
        0x028000,
        41,
        Some("vfio-pci"),
        Some("onic"),
    ))
    .unwrap();
    fs.add(&dev(
        INTEL,
        0x8086,
        0x1572,
        0x020000,
        5,
        Some("i40e"),
        Some("i40e"),
    ))
    .unwrap();
    fs.add(&dev(
        "0000:5e:00.0",
        0x10ee,
        0x9031,
        0x058000,
        50,
        None,
        None,
    ))
    .unwrap();
    fs.add_netdev(CARD, "ens1f0", "down", false).unwrap();
    fs.add_netdev(INTEL, "eno1", "up", true).unwrap();
    fs
}

/// The sysfs layer with the fake kernel reacting after every write, each write logged as
/// `PATH <- VALUE` (paths as the kernel names them, under `/`).
struct Kernel<'a> {
    files: RootedSys,
    fs: &'a FakeSysfs,
    log: Mutex<Vec<String>>,
}

impl<'a> Kernel<'a> {
    fn new(fs: &'a FakeSysfs) -> Self {
        Kernel {
            files: RootedSys::new(fs.root()),
            fs,
            log: Mutex::new(Vec::new()),
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl VfioSys for Kernel<'_> {
    fn exists(&self, path: &Path) -> bool {
        self.files.exists(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.files.read_link(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.files.list_dir(path)
    }
    fn read_file(&self, path: &Path) -> io::Result<String> {
        self.files.read_file(path)
    }
    fn write_file(&self, path: &Path, contents: &str) -> io::Result<()> {
        self.files.write_file(path, contents)?;
        self.log
            .lock()
            .unwrap()
            .push(format!("{} <- {contents:?}", path.display()));
        self.fs.kernel_step()?;
        Ok(())
    }
    fn check_rw(&self, path: &Path) -> io::Result<()> {
        self.files.check_rw(path)
    }
    fn open_device(&self, _: &Path) -> Result<Box<dyn VfioDeviceIo>, SysOpenError> {
        Err(SysOpenError::Other("no devices in a test tree".into()))
    }
}

fn bind_all(sys: &dyn VfioSys, addrs: &[&str], force: bool) -> Result<Vec<Step>, BindError> {
    let addrs: Vec<PciAddress> = addrs.iter().map(|a| addr(a)).collect();
    bind::plan_bind(sys, &addrs, force)
}

/// Plans and executes, returning the final drivers.
fn bind_and_run(sys: &dyn VfioSys, addrs: &[&str], force: bool) -> Vec<Option<String>> {
    bind_all(sys, addrs, force)
        .unwrap()
        .into_iter()
        .map(|s| match s {
            Step::Done { driver, .. } => driver,
            Step::Change(p) => bind::execute(sys, &p, Duration::from_secs(1)).unwrap(),
        })
        .collect()
}

/// The files nothing may have written: the probe trigger empty, every override clear.
fn untouched(fs: &FakeSysfs) {
    let probe = std::fs::read_to_string(fs.root().join("sys/bus/pci/drivers_probe")).unwrap();
    assert_eq!(probe, "", "drivers_probe was written");
    for a in [CARD, CARD_PF1, INTEL] {
        let exists = fs.root().join("sys/bus/pci/devices").join(a).exists();
        if exists {
            assert_eq!(fs.driver_override(a), "(null)", "{a}");
        }
    }
}

#[test]
fn the_inventory_finds_the_opennic_functions_and_their_state() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let inv = inventory::scan(&RootedSys::new(dir.path())).unwrap();
    assert!(inv.iommu && inv.vfio_pci_loaded);
    let found: Vec<String> = inv
        .cards
        .iter()
        .map(|c| c.function.addr.to_string())
        .collect();
    assert_eq!(
        found,
        [CARD, CARD_PF1],
        "the Intel NIC and 10ee:9031 are not cards"
    );
    let pf0 = &inv.cards[0];
    assert_eq!((pf0.function.vendor, pf0.function.device), (0x10ee, 0x903f));
    assert_eq!(pf0.function.class, 0x028000);
    assert_eq!((pf0.identity.pf, pf0.identity.link), (0, "Gen3 x16"));
    assert_eq!(pf0.function.iommu_group, Some(40));
    assert_eq!(pf0.function.driver.as_deref(), Some("onic"));
    assert!(!pf0.function.vfio_bound());
    assert_eq!(
        pf0.function.driver_override, None,
        "`(null)` is no override"
    );
    assert_eq!(pf0.function.interfaces.len(), 1);
    assert_eq!(pf0.function.interfaces[0].name, "ens1f0");
    assert!(!pf0.function.interfaces[0].is_up());
    assert!(pf0.group_members.is_empty(), "alone in group 40");
    // Registers: BAR 2 from 0x200000, 1 MiB (the 322 MHz box).
    assert_eq!(
        pf0.identity.registers,
        RegisterWindow {
            bar: 2,
            offset: 0x20_0000,
            size: Some(0x10_0000)
        }
    );
    let pf1 = &inv.cards[1];
    assert_eq!((pf1.identity.pf, pf1.function.iommu_group), (1, Some(41)));
    assert!(pf1.function.vfio_bound());
    drop(fs);
}

#[test]
fn the_table_holds_exactly_the_opennic_qdma_ids() {
    // 0x9<PF><gen><width>: PF 0..3; Gen3 x16 = 3F, Gen3 x8 = 38, Gen4 x8 = 48.
    let mut expected = Vec::new();
    for (gen_width, link) in [("3f", "Gen3 x16"), ("38", "Gen3 x8"), ("48", "Gen4 x8")] {
        for pf in 0..4u8 {
            let device = u16::from_str_radix(&format!("9{pf}{gen_width}"), 16).unwrap();
            expected.push((0x10ee, device, pf, link));
        }
    }
    let mut table: Vec<_> = inventory::KNOWN_CARDS
        .iter()
        .map(|c| (c.vendor, c.device, c.pf, c.link))
        .collect();
    table.sort();
    expected.sort();
    assert_eq!(table, expected);
    assert!(inventory::KNOWN_CARDS
        .iter()
        .all(|c| c.registers == RegisterWindow::OPENNIC_322MHZ_BOX));
}

#[test]
fn group_members_and_their_drivers_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FakeSysfs::new(dir.path()).unwrap();
    fs.load_driver("vfio-pci").unwrap();
    for (a, d, class, driver) in [
        (CARD, 0x903f, 0x028000, Some("onic")),
        (CARD_PF1, 0x913f, 0x028000, Some("onic")),
        ("0000:3a:00.0", 0x0000, 0x060400, Some("pcieport")),
        ("0000:3b:00.2", 0x0000, 0x120000, None),
    ] {
        fs.add(&PciDev {
            addr: a,
            vendor: 0x10ee,
            device: d,
            class,
            group: Some(7),
            driver,
            native: driver,
        })
        .unwrap();
    }
    let inv = inventory::scan(&RootedSys::new(dir.path())).unwrap();
    let pf0 = &inv.cards[0];
    let members: Vec<String> = pf0.group_members.iter().map(|m| m.describe()).collect();
    assert_eq!(
        members,
        [
            "0000:3a:00.0 (bound to pcieport)",
            "0000:3b:00.1 (bound to onic)",
            "0000:3b:00.2 (no driver)"
        ]
    );
    // The kernel lets a group go to user space past bridges and unbound devices only.
    let blockers: Vec<&str> = pf0.blockers().iter().map(|m| m.addr.as_str()).collect();
    assert_eq!(blockers, [CARD_PF1]);
}

#[test]
fn binding_writes_the_documented_sequence_and_ends_on_vfio_pci() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let k = Kernel::new(&fs);
    let steps = bind_all(&k, &[CARD], false).unwrap();
    let [Step::Change(plan)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert_eq!(plan.from.as_deref(), Some("onic"));
    assert_eq!(plan.to, Target::VfioPci);
    // What the kernel's driver_override documentation prescribes, in this order.
    let shell: Vec<String> = plan.writes.iter().map(SysfsWrite::to_string).collect();
    assert_eq!(
        shell,
        [
            "echo vfio-pci | sudo tee /sys/bus/pci/devices/0000:3b:00.0/driver_override",
            "echo 0000:3b:00.0 | sudo tee /sys/bus/pci/devices/0000:3b:00.0/driver/unbind",
            "echo 0000:3b:00.0 | sudo tee /sys/bus/pci/drivers_probe",
        ]
    );
    let now = bind::execute(&k, plan, Duration::from_secs(1)).unwrap();
    assert_eq!(now.as_deref(), Some("vfio-pci"));
    assert_eq!(fs.driver(CARD).as_deref(), Some("vfio-pci"));
    assert_eq!(fs.driver_override(CARD), "vfio-pci");
    assert_eq!(
        k.log(),
        [
            "/sys/bus/pci/devices/0000:3b:00.0/driver_override <- \"vfio-pci\"",
            "/sys/bus/pci/devices/0000:3b:00.0/driver/unbind <- \"0000:3b:00.0\"",
            "/sys/bus/pci/drivers_probe <- \"0000:3b:00.0\"",
        ]
    );
    // The other devices kept their drivers.
    assert_eq!(fs.driver(INTEL).as_deref(), Some("i40e"));
    assert_eq!(fs.driver(CARD_PF1).as_deref(), Some("vfio-pci"));
    // Bound now: a second bind changes nothing.
    assert!(matches!(
        bind_all(&k, &[CARD], false).unwrap().as_slice(),
        [Step::Done { .. }]
    ));
}

#[test]
fn an_unbound_card_needs_no_unbind() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    fs.set_driver(CARD, None).unwrap();
    let k = Kernel::new(&fs);
    assert_eq!(bind_and_run(&k, &[CARD], false), [Some("vfio-pci".into())]);
    assert_eq!(
        k.log(),
        [
            "/sys/bus/pci/devices/0000:3b:00.0/driver_override <- \"vfio-pci\"",
            "/sys/bus/pci/drivers_probe <- \"0000:3b:00.0\"",
        ]
    );
}

#[test]
fn unbind_hands_the_card_back_to_its_kernel_driver() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let k = Kernel::new(&fs);
    bind_and_run(&k, &[CARD], false);
    let steps = bind::plan_unbind(&k, &[addr(CARD)]).unwrap();
    let [Step::Change(plan)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert_eq!(plan.to, Target::Kernel);
    let shell: Vec<String> = plan.writes.iter().map(SysfsWrite::to_string).collect();
    assert_eq!(
        shell,
        [
            "echo | sudo tee /sys/bus/pci/devices/0000:3b:00.0/driver_override",
            "echo 0000:3b:00.0 | sudo tee /sys/bus/pci/devices/0000:3b:00.0/driver/unbind",
            "echo 0000:3b:00.0 | sudo tee /sys/bus/pci/drivers_probe",
        ]
    );
    let now = bind::execute(&k, plan, Duration::from_secs(1)).unwrap();
    assert_eq!(now.as_deref(), Some("onic"));
    assert_eq!(
        fs.driver_override(CARD),
        "(null)",
        "the override is cleared"
    );
    // The Intel NIC is on its own driver with no override: nothing to do.
    assert!(matches!(
        bind::plan_unbind(&k, &[addr(INTEL)]).unwrap().as_slice(),
        [Step::Done { driver: Some(d), .. }] if d == "i40e"
    ));
}

#[test]
fn no_such_device_says_how_to_list_them() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let e = bind_all(&Kernel::new(&fs), &["0000:af:00.0"], false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "there is no PCI device 0000:af:00.0 (no /sys/bus/pci/devices/0000:af:00.0); `lspci -D \
         -nn -d 10ee:` lists the AMD/Xilinx devices of this machine and `nlbctl devices` the \
         cards it found"
    );
    untouched(&fs);
}

#[test]
fn an_unknown_device_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    fs.set_driver(INTEL, None).unwrap(); // no interface in the way of --force below
    std::fs::remove_dir_all(
        dir.path()
            .join("sys/devices/pci0000:00")
            .join(INTEL)
            .join("net"),
    )
    .unwrap();
    let k = Kernel::new(&fs);
    let e = bind_all(&k, &[INTEL], false).unwrap_err().to_string();
    assert!(
        e.starts_with("PCI device 0000:01:00.0 (8086:1572) is not a card nlb-offload knows"),
        "{e}"
    );
    assert!(e.contains("10ee:903f"), "names the known ids: {e}");
    assert!(e.contains("--force"), "{e}");
    untouched(&fs);
    assert_eq!(bind_and_run(&k, &[INTEL], true), [Some("vfio-pci".into())]);
}

#[test]
fn no_iommu_says_which_kernel_options_turn_it_on() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FakeSysfs::new(dir.path()).unwrap();
    fs.load_driver("vfio-pci").unwrap();
    fs.add(&PciDev {
        addr: CARD,
        vendor: 0x10ee,
        device: 0x9048,
        class: 0x028000,
        group: None,
        driver: Some("onic"),
        native: Some("onic"),
    })
    .unwrap();
    let k = Kernel::new(&fs);
    let inv = inventory::scan(&k).unwrap();
    assert!(!inv.iommu);
    assert_eq!(inv.cards[0].function.iommu_group, None);
    let e = bind_all(&k, &[CARD], false).unwrap_err().to_string();
    assert!(
        e.contains("the IOMMU is off (/sys/kernel/iommu_groups is empty)"),
        "{e}"
    );
    assert!(e.contains("intel_iommu=on iommu=pt"), "{e}");
    assert!(e.contains("amd_iommu=on iommu=pt"), "{e}");
    untouched(&fs);
}

#[test]
fn a_device_outside_every_iommu_group_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    // The IOMMU is on (groups 5, 40, 41 exist), but the card has no group of its own.
    let dev = dir.path().join("sys/devices/pci0000:00").join(CARD);
    std::fs::remove_file(dev.join("iommu_group")).unwrap();
    std::fs::remove_dir_all(dir.path().join("sys/kernel/iommu_groups/40")).unwrap();
    let e = bind_all(&Kernel::new(&fs), &[CARD], false)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "PCI device 0000:3b:00.0 has no IOMMU group although the IOMMU is on (other \
             devices have groups in /sys/kernel/iommu_groups)"
        ),
        "{e}"
    );
    assert!(e.contains("dmesg"), "{e}");
    untouched(&fs);
}

#[test]
fn an_address_named_twice_is_bound_once() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let k = Kernel::new(&fs);
    assert_eq!(
        bind_and_run(&k, &[CARD, "3b:00.0"], false),
        [Some("vfio-pci".into())]
    );
    assert_eq!(k.log().len(), 3, "{:?}", k.log());
}

#[test]
fn vfio_pci_not_loaded_says_modprobe() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    fs.set_driver(CARD_PF1, None).unwrap();
    std::fs::remove_dir_all(dir.path().join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    let k = Kernel::new(&fs);
    let e = bind_all(&k, &[CARD], false).unwrap_err().to_string();
    assert_eq!(
        e,
        "the vfio-pci driver is not loaded (no /sys/bus/pci/drivers/vfio-pci); load it with \
         `sudo modprobe vfio-pci` and run this again"
    );
    untouched(&fs);
}

#[test]
fn a_shared_iommu_group_names_the_devices_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FakeSysfs::new(dir.path()).unwrap();
    fs.load_driver("vfio-pci").unwrap();
    // Both PFs of a card without ACS share group 9, with a PCIe bridge.
    for (a, d, class, driver) in [
        (CARD, 0x903f, 0x028000, Some("onic")),
        (CARD_PF1, 0x913f, 0x028000, Some("onic")),
        ("0000:3a:00.0", 0x1234, 0x060400, Some("pcieport")),
    ] {
        fs.add(&PciDev {
            addr: a,
            vendor: if class == 0x060400 { 0x8086 } else { 0x10ee },
            device: d,
            class,
            group: Some(9),
            driver,
            native: driver,
        })
        .unwrap();
    }
    let k = Kernel::new(&fs);
    let e = bind_all(&k, &[CARD], false).unwrap_err().to_string();
    assert_eq!(
        e,
        "IOMMU group 9 of 0000:3b:00.0 also holds 0000:3b:00.1 (bound to onic): vfio-pci can \
         give the card to user space only when every device of its group is bound to vfio-pci \
         (or to no driver). Bind them together (`sudo nlbctl bind 0000:3b:00.0 0000:3b:00.1`; \
         --force for a device that is not a card), or move the card to a slot with an IOMMU \
         group of its own (`ls /sys/kernel/iommu_groups/9/devices` lists the group)"
    );
    untouched(&fs);
    // Named together they go, one after the other; the bridge stays on pcieport.
    assert_eq!(
        bind_and_run(&k, &[CARD, CARD_PF1], false),
        [Some("vfio-pci".into()), Some("vfio-pci".into())]
    );
    assert_eq!(fs.driver("0000:3a:00.0").as_deref(), Some("pcieport"));
}

#[test]
fn an_interface_that_is_up_must_go_down_first() {
    for (operstate, admin_up) in [("up", true), ("down", true), ("up", false)] {
        let dir = tempfile::tempdir().unwrap();
        let fs = machine(dir.path());
        fs.add_netdev(CARD, "ens1f0", operstate, admin_up).unwrap();
        fs.add_netdev(CARD, "ens1f0d1", "down", false).unwrap();
        let e = bind_all(&Kernel::new(&fs), &[CARD], false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "PCI device 0000:3b:00.0 carries the network interface ens1f0 (operstate \
                 {operstate}), up in the kernel's network stack; binding would pull it away \
                 under whoever uses it. Take it down first: `sudo ip link set ens1f0 down`"
            ),
            "{operstate} {admin_up}"
        );
        untouched(&fs);
    }
}

#[test]
fn an_already_bound_card_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let k = Kernel::new(&fs);
    let steps = bind_all(&k, &[CARD_PF1], false).unwrap();
    assert_eq!(
        steps,
        [Step::Done {
            addr: addr(CARD_PF1),
            driver: Some("vfio-pci".into())
        }]
    );
    assert!(k.log().is_empty());
}

/// The files without a kernel behind them: writes land, nothing binds.
#[test]
fn a_probe_that_binds_nothing_is_reported_with_the_way_back() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let sys = RootedSys::new(dir.path());
    let steps = bind_all(&sys, &[CARD], false).unwrap();
    let [Step::Change(plan)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    let e = bind::execute(&sys, plan, Duration::from_millis(50))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "after `echo 0000:3b:00.0 > /sys/bus/pci/drivers_probe`, PCI device 0000:3b:00.0 is \
         bound to onic, not vfio-pci; `sudo dmesg | tail` says why vfio-pci did not take it. \
         driver_override is left at vfio-pci: `sudo nlbctl unbind 0000:3b:00.0` hands the \
         device back to its kernel driver"
    );
    drop(fs);
}

/// Writes refused by the kernel (here: not root) name the file, and what was already done.
struct Refusing<'a> {
    inner: Kernel<'a>,
    refuse: &'static str,
}

impl VfioSys for Refusing<'_> {
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.read_link(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn read_file(&self, path: &Path) -> io::Result<String> {
        self.inner.read_file(path)
    }
    fn write_file(&self, path: &Path, contents: &str) -> io::Result<()> {
        if path.ends_with(self.refuse) {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        self.inner.write_file(path, contents)
    }
    fn check_rw(&self, path: &Path) -> io::Result<()> {
        self.inner.check_rw(path)
    }
    fn open_device(&self, p: &Path) -> Result<Box<dyn VfioDeviceIo>, SysOpenError> {
        self.inner.open_device(p)
    }
}

#[test]
fn a_refused_write_says_to_run_as_root_and_what_was_done() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    for (refuse, done) in [
        ("driver_override", "nothing was changed"),
        (
            "drivers_probe",
            "already done: `echo vfio-pci | sudo tee \
             /sys/bus/pci/devices/0000:3b:00.0/driver_override`, `echo 0000:3b:00.0 | sudo tee \
             /sys/bus/pci/devices/0000:3b:00.0/driver/unbind`",
        ),
    ] {
        let sys = Refusing {
            inner: Kernel::new(&fs),
            refuse,
        };
        let steps = bind_all(&sys, &[CARD], false).unwrap();
        let [Step::Change(plan)] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        let e = bind::execute(&sys, plan, Duration::from_millis(50))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(writing sysfs takes root: run it with sudo)"),
            "{e}"
        );
        assert!(e.ends_with(done), "{e}");
    }
}
