//! The VFIO backend against a mock of its system layer: no hardware exists here, so sysfs,
//! `/dev/vfio` and the device fd are simulated; BAR 0 holds the words an nlb-offload NIC of
//! the `sim` profile presents (written from `docs/regmap.md`: block headers and firmware ID),
//! or another device's words. An OpenNIC card holds the same words in BAR 2 from 0x200000
//! (the shell's 322 MHz box), with the shell's own registers before it.

use super::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

const ADDR: &str = "0000:03:00.0";
const GROUP: u32 = 12;

/// The register window's contents, shared by the pread path and the mapping: `words` hold
/// the region's bytes from `base` on; every access is logged by its offset in the region.
#[derive(Debug)]
struct Bar {
    words: Vec<u32>,
    /// Region offset of `words[0]`.
    base: u64,
    /// Region offsets accessed, in order.
    log: Vec<u64>,
    /// Fail every access (the device fd returns EIO).
    broken: bool,
}

impl Bar {
    /// The registers of a conforming `sim`-profile NIC that discovery reads.
    fn nlb(size: u64) -> Bar {
        let mut words = vec![0u32; (size / 4) as usize];
        for (i, &(_, base, type_word, version)) in nlb_hw::blocks::ALL.iter().enumerate() {
            let next = nlb_hw::blocks::ALL.get(i + 1).map_or(0, |b| b.1);
            words[base as usize / 4] = type_word;
            words[base as usize / 4 + 1] = version;
            words[base as usize / 4 + 2] = next;
        }
        let p = nlb_hw::Profile::by_name("sim").unwrap();
        let fw: &[u32] = &[
            0x0001_0000, // design_version 1.0
            nlb_hw::REGMAP_VERSION,
            1_700_000_000,
            0xdead_beef,
            0x5100,
            0,
            p.id,
            p.vip_buckets,
            p.vip_ways,
            p.rules,
            p.pools,
            p.maglev_slots,
            p.backends,
            p.ct_buckets,
            p.ct_ways,
            p.queue_depth,
        ];
        words[3..3 + fw.len()].copy_from_slice(fw);
        Bar {
            words,
            base: 0,
            log: Vec::new(),
            broken: false,
        }
    }

    /// The index of the word at region offset `offset`.
    fn index(&mut self, offset: u64) -> io::Result<usize> {
        self.log.push(offset);
        if self.broken {
            return Err(io::Error::from_raw_os_error(5));
        }
        let i = offset
            .checked_sub(self.base)
            .map(|o| (o / 4) as usize)
            .filter(|&i| i < self.words.len());
        // Outside the words the mock holds: the test wanted no access there.
        i.ok_or_else(|| io::Error::other(format!("access at {offset:#x}, outside the window")))
    }

    fn read(&mut self, offset: u64) -> io::Result<u32> {
        let i = self.index(offset)?;
        Ok(self.words[i])
    }

    fn write(&mut self, offset: u64, value: u32) -> io::Result<()> {
        let i = self.index(offset)?;
        self.words[i] = value;
        Ok(())
    }
}

type OpenResult = Box<dyn Fn() -> Option<SysOpenError> + Send + Sync>;

struct MockSys {
    paths: HashSet<PathBuf>,
    links: HashMap<PathBuf, PathBuf>,
    dirs: HashMap<PathBuf, Vec<String>>,
    files: HashMap<PathBuf, String>,
    node_errors: HashMap<PathBuf, i32>,
    open_error: OpenResult,
    /// The device's one region with registers: its index and what the kernel says of it.
    region_index: u32,
    region: Option<RegionInfo>,
    map_fails: bool,
    bar: Arc<Mutex<Bar>>,
    /// Each mmap: (region, offset, length).
    maps: Arc<Mutex<Vec<(u32, u64, u64)>>>,
    iommu: Arc<Mutex<Iommu>>,
}

/// What the container's IOMMU was asked: the live DMA mappings (iova → size, host address),
/// every map and unmap in order, the MSI-X eventfds; an errno for the next map.
#[derive(Debug, Default)]
struct Iommu {
    live: HashMap<u64, (usize, usize)>,
    log: Vec<String>,
    msix: usize,
    map_errno: Option<i32>,
}

impl MockSys {
    /// A machine where `ADDR` is bound to vfio-pci, alone in IOMMU group `GROUP`, BAR 0
    /// mappable, and the NIC answers as an nlb-offload device.
    fn healthy() -> MockSys {
        let dev = PathBuf::from(format!("/sys/bus/pci/devices/{ADDR}"));
        let mut m = MockSys {
            paths: HashSet::new(),
            links: HashMap::new(),
            dirs: HashMap::new(),
            files: HashMap::new(),
            node_errors: HashMap::new(),
            open_error: Box::new(|| None),
            region_index: BAR0,
            region: Some(RegionInfo {
                size: 0x10000,
                readable: true,
                writable: true,
                mmap: true,
                sparse_areas: None,
            }),
            map_fails: false,
            bar: Arc::new(Mutex::new(Bar::nlb(0x10000))),
            maps: Arc::new(Mutex::new(Vec::new())),
            iommu: Arc::new(Mutex::new(Iommu::default())),
        };
        for p in [
            dev.clone(),
            "/sys/bus/pci/drivers/vfio-pci".into(),
            format!("/dev/vfio/{GROUP}").into(),
            "/dev/vfio/vfio".into(),
        ] {
            m.paths.insert(p);
        }
        m.links.insert(
            dev.join("driver"),
            "../../../bus/pci/drivers/vfio-pci".into(),
        );
        m.links.insert(
            dev.join("iommu_group"),
            format!("../../../kernel/iommu_groups/{GROUP}").into(),
        );
        m.dirs.insert(
            format!("/sys/kernel/iommu_groups/{GROUP}/devices").into(),
            vec![ADDR.into()],
        );
        m
    }

    /// `healthy()`, the device being an OpenNIC shell function `10ee:DEVICE`: a 4 MiB BAR 2
    /// (and no BAR 0 with registers) whose 322 MHz box, from 0x200000, holds the NIC's
    /// registers.
    fn opennic(device: &str) -> MockSys {
        let mut m = MockSys::healthy();
        let dev = PathBuf::from(format!("/sys/bus/pci/devices/{ADDR}"));
        m.files.insert(dev.join("vendor"), "0x10ee\n".into());
        m.files.insert(dev.join("device"), format!("0x{device}\n"));
        m.files.insert(dev.join("class"), "0x028000\n".into());
        m.region_index = 2;
        m.region.as_mut().unwrap().size = 0x40_0000;
        let mut bar = Bar::nlb(0x10_0000);
        bar.base = 0x20_0000;
        m.bar = Arc::new(Mutex::new(bar));
        m
    }

    fn bind(&mut self, addr: &str, driver: Option<&str>) {
        let link = PathBuf::from(format!("/sys/bus/pci/devices/{addr}/driver"));
        let group_link = PathBuf::from(format!(
            "/sys/kernel/iommu_groups/{GROUP}/devices/{addr}/driver"
        ));
        for l in [link, group_link] {
            match driver {
                Some(d) => {
                    self.links
                        .insert(l, format!("../../../bus/pci/drivers/{d}").into());
                }
                None => {
                    self.links.remove(&l);
                }
            }
        }
    }
}

impl VfioSys for MockSys {
    fn exists(&self, path: &Path) -> bool {
        self.paths.contains(path)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.links
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.dirs
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn read_file(&self, path: &Path) -> io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn write_file(&self, path: &Path, _contents: &str) -> io::Result<()> {
        panic!(
            "opening a device writes nothing, yet it wrote {}",
            path.display()
        )
    }

    fn check_rw(&self, path: &Path) -> io::Result<()> {
        match self.node_errors.get(path) {
            Some(errno) => Err(io::Error::from_raw_os_error(*errno)),
            None if self.paths.contains(path) => Ok(()),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    fn open_device(&self, sysfs_dev: &Path) -> Result<Box<dyn VfioDeviceIo>, SysOpenError> {
        assert!(self.paths.contains(sysfs_dev));
        if let Some(e) = (self.open_error)() {
            return Err(e);
        }
        Ok(Box::new(MockDevice {
            region_index: self.region_index,
            region: self.region.clone(),
            map_fails: self.map_fails,
            bar: self.bar.clone(),
            maps: self.maps.clone(),
            iommu: self.iommu.clone(),
        }))
    }
}

struct MockDevice {
    region_index: u32,
    region: Option<RegionInfo>,
    map_fails: bool,
    bar: Arc<Mutex<Bar>>,
    maps: Arc<Mutex<Vec<(u32, u64, u64)>>>,
    iommu: Arc<Mutex<Iommu>>,
}

impl VfioDeviceIo for MockDevice {
    fn region(&self, index: u32) -> Option<RegionInfo> {
        (index == self.region_index)
            .then(|| self.region.clone())
            .flatten()
    }

    fn map(&self, index: u32, offset: u64, len: u64) -> io::Result<Box<dyn Mmio>> {
        assert_eq!(index, self.region_index);
        let size = self.region.as_ref().map_or(0, |r| r.size);
        assert!(offset + len <= size, "mapping beyond the region");
        assert_eq!(offset % 4096, 0, "mmap offsets are page aligned");
        if self.map_fails {
            return Err(io::Error::from_raw_os_error(22));
        }
        self.maps.lock().unwrap().push((index, offset, len));
        Ok(Box::new(MockMap {
            offset,
            len,
            bar: self.bar.clone(),
        }))
    }

    fn read_at(&self, index: u32, buf: &mut [u8], offset: u64) -> io::Result<()> {
        assert_eq!((index, buf.len()), (self.region_index, 4));
        let v = self.bar.lock().unwrap().read(offset)?;
        buf.copy_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn write_at(&self, index: u32, buf: &[u8], offset: u64) -> io::Result<()> {
        assert_eq!((index, buf.len()), (self.region_index, 4));
        let v = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        self.bar.lock().unwrap().write(offset, v)
    }

    unsafe fn dma_map(&self, iova: u64, size: usize, vaddr: *mut u8) -> io::Result<()> {
        let mut m = self.iommu.lock().unwrap();
        if let Some(errno) = m.map_errno.take() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        // The kernel refuses overlapping IOVA ranges (EEXIST).
        if m.live
            .iter()
            .any(|(&at, &(len, _))| iova < at + len as u64 && at < iova + size as u64)
        {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        m.live.insert(iova, (size, vaddr as usize));
        m.log.push(format!("map {iova:#x}+{size:#x}"));
        Ok(())
    }

    fn dma_unmap(&self, iova: u64, size: usize) -> io::Result<()> {
        let mut m = self.iommu.lock().unwrap();
        // Unmap must name a mapping exactly (vfio-ioctls checks the size the kernel unmapped).
        match m.live.get(&iova) {
            Some(&(len, _)) if len == size => {
                m.live.remove(&iova);
                m.log.push(format!("unmap {iova:#x}+{size:#x}"));
                Ok(())
            }
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    fn set_msix(&self, fds: &[std::os::fd::BorrowedFd<'_>]) -> io::Result<()> {
        self.iommu.lock().unwrap().msix = fds.len();
        Ok(())
    }
}

/// A mapping of `len` bytes of the region from `offset`.
struct MockMap {
    offset: u64,
    len: u64,
    bar: Arc<Mutex<Bar>>,
}

impl Mmio for MockMap {
    fn mapped_len(&self) -> u64 {
        self.len
    }
    fn read32(&self, offset: u64) -> io::Result<u32> {
        assert!(offset + 4 <= self.len, "read beyond the mapping");
        self.bar.lock().unwrap().read(self.offset + offset)
    }
    fn write32(&self, offset: u64, value: u32) -> io::Result<()> {
        assert!(offset + 4 <= self.len, "write beyond the mapping");
        self.bar.lock().unwrap().write(self.offset + offset, value)
    }
}

fn open(sys: &MockSys) -> Result<Vfio, VfioError> {
    Vfio::open_with(sys, ADDR)
}

#[test]
fn pci_addresses_parse_and_normalise() {
    let a: PciAddress = "0000:03:00.0".parse().unwrap();
    assert_eq!((a.domain, a.bus, a.device, a.function), (0, 3, 0, 0));
    assert_eq!(a.to_string(), "0000:03:00.0");
    let b: PciAddress = "3b:1f.7".parse().unwrap();
    assert_eq!(b.to_string(), "0000:3b:1f.7");
    let c: PciAddress = "10000:00:00.0".parse::<PciAddress>().map_or_else(
        |e| {
            assert!(e.to_string().contains("domain"), "{e}");
            a
        },
        |_| panic!("5-digit domain accepted"),
    );
    assert_eq!(c, a);
    for (bad, why) in [
        ("", "DDDD:BB:DD.F"),
        ("0000:03:00", "DDDD:BB:DD.F"),
        ("0000:03:20.0", "device number"),
        ("0000:03:00.8", "function"),
        ("0000:0g:00.0", "bus"),
        ("a:b:c:d.0", "DDDD:BB:DD.F"),
    ] {
        let e = bad.parse::<PciAddress>().unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn opens_a_healthy_device_mmapped_and_discovers_it() {
    let sys = MockSys::healthy();
    let mut dev = open(&sys).unwrap();
    assert!(dev.is_mmapped());
    assert_eq!(*sys.maps.lock().unwrap(), [(0, 0, 0x10000)], "all of BAR 0");
    let info = dev.info().unwrap().clone();
    assert_eq!(info.profile.name, "sim");
    assert_eq!(info.firmware.git_hash, 0xdead_beef);
    assert_eq!(info.blocks.len(), nlb_hw::blocks::ALL.len());
    assert_eq!(dev.describe(), "pci:0000:03:00.0");
    // Registers go to the BAR: write then read back through the mapping.
    dev.write32(nlb_hw::blocks::ctrl::GENERATION, 7).unwrap();
    assert_eq!(dev.read32(nlb_hw::blocks::ctrl::GENERATION).unwrap(), 7);
    assert_eq!(
        sys.bar.lock().unwrap().words[nlb_hw::blocks::ctrl::GENERATION as usize / 4],
        7
    );
}

#[test]
fn falls_back_to_pread_when_the_region_cannot_be_mapped() {
    for case in ["no mmap flag", "sparse", "map fails"] {
        let mut sys = MockSys::healthy();
        let r = sys.region.as_mut().unwrap();
        match case {
            "no mmap flag" => r.mmap = false,
            // An MSI-X table carved out of the BAR: only part of it may be mapped.
            "sparse" => r.sparse_areas = Some(vec![(0, 0x8000)]),
            _ => sys.map_fails = true,
        }
        let mut dev = open(&sys).unwrap();
        assert!(!dev.is_mmapped(), "{case}");
        assert!(sys.maps.lock().unwrap().is_empty(), "{case}");
        dev.write32(0x1010, 1).unwrap();
        assert_eq!(dev.read32(0x1010).unwrap(), 1, "{case}");
    }
    // A sparse capability that covers the whole BAR still maps.
    let mut sys = MockSys::healthy();
    sys.region.as_mut().unwrap().sparse_areas = Some(vec![(0, 0x10000)]);
    assert!(open(&sys).unwrap().is_mmapped());
}

#[test]
fn bad_offsets_and_io_errors_are_reported() {
    let sys = MockSys::healthy();
    let mut dev = open(&sys).unwrap();
    let e = dev.read32(0x1002).unwrap_err().to_string();
    assert!(e.contains("aligned"), "{e}");
    let e = dev.write32(0x10000, 0).unwrap_err().to_string();
    assert!(e.contains("beyond BAR 0"), "{e}");
    sys.bar.lock().unwrap().broken = true;
    let e = dev.read32(0x1010).unwrap_err().to_string();
    assert!(e.contains("BAR 0 at 0x1010 of pci:0000:03:00.0"), "{e}");
}

#[test]
fn no_such_device() {
    let mut sys = MockSys::healthy();
    sys.paths
        .remove(Path::new("/sys/bus/pci/devices/0000:03:00.0"));
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::NoSuchDevice { .. }));
    assert!(e.to_string().contains("lspci -D"), "{e}");
}

#[test]
fn bound_to_a_host_driver_prints_the_rebind_commands() {
    let mut sys = MockSys::healthy();
    sys.bind(ADDR, Some("xdma"));
    let e = open(&sys).unwrap_err().to_string();
    let expected = "PCI device 0000:03:00.0 is bound to the `xdma` driver, not to vfio-pci; \
                    hand it to vfio-pci with `sudo nlbctl bind 0000:03:00.0` (which checks what \
                    could stand in the way first), or by hand:\n\
                    \x20   echo vfio-pci | sudo tee /sys/bus/pci/devices/0000:03:00.0/driver_override\n\
                    \x20   echo 0000:03:00.0 | sudo tee /sys/bus/pci/devices/0000:03:00.0/driver/unbind\n\
                    \x20   echo 0000:03:00.0 | sudo tee /sys/bus/pci/drivers_probe";
    assert_eq!(e, expected);
}

#[test]
fn unbound_device_without_vfio_pci_loaded() {
    let mut sys = MockSys::healthy();
    sys.bind(ADDR, None);
    sys.paths.remove(Path::new("/sys/bus/pci/drivers/vfio-pci"));
    let e = open(&sys).unwrap_err().to_string();
    assert!(e.contains("is not bound to any driver"), "{e}");
    assert!(e.contains("sudo modprobe vfio-pci"), "{e}");
    assert!(!e.contains("unbind"), "nothing to unbind: {e}");
    assert!(e.contains("drivers_probe"), "{e}");
}

#[test]
fn no_iommu_group() {
    let mut sys = MockSys::healthy();
    sys.links
        .remove(Path::new("/sys/bus/pci/devices/0000:03:00.0/iommu_group"));
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::NoIommuGroup { .. }));
    assert!(e.to_string().contains("intel_iommu=on"), "{e}");
}

#[test]
fn no_iommu_mode_is_refused_with_advice() {
    let mut sys = MockSys::healthy();
    sys.paths.remove(Path::new("/dev/vfio/12"));
    sys.paths.insert("/dev/vfio/noiommu-12".into());
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::NoIommuMode { .. }), "{e}");
    let mut sys = MockSys::healthy();
    sys.paths.remove(Path::new("/dev/vfio/12"));
    let e = open(&sys).unwrap_err();
    assert!(
        matches!(e, VfioError::GroupNodeMissing { group: 12, .. }),
        "{e}"
    );
}

#[test]
fn permission_denied_on_the_group_node() {
    let mut sys = MockSys::healthy();
    sys.node_errors.insert("/dev/vfio/12".into(), 13); // EACCES
    let e = open(&sys).unwrap_err().to_string();
    assert_eq!(
        e,
        "no permission to open /dev/vfio/12 (IOMMU group 12 of 0000:03:00.0): run as root, or \
         give yourself the group with `sudo chown $USER /dev/vfio/12`"
    );
}

#[test]
fn busy_group_and_missing_container() {
    let mut sys = MockSys::healthy();
    sys.node_errors.insert("/dev/vfio/12".into(), 16); // EBUSY
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::GroupBusy { group: 12, .. }), "{e}");
    assert!(e.to_string().contains("fuser -v /dev/vfio/12"), "{e}");

    let mut sys = MockSys::healthy();
    sys.paths.remove(Path::new("/dev/vfio/vfio"));
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::Container { .. }), "{e}");
    assert!(e.to_string().contains("modprobe vfio-pci"), "{e}");
}

#[test]
fn group_not_viable_names_the_siblings_to_rebind() {
    let mut sys = MockSys::healthy();
    sys.dirs.insert(
        "/sys/kernel/iommu_groups/12/devices".into(),
        vec![
            "0000:03:00.0".into(),
            "0000:03:00.1".into(),
            "0000:03:00.2".into(),
        ],
    );
    sys.bind(ADDR, Some("vfio-pci"));
    sys.bind("0000:03:00.1", Some("ixgbe"));
    sys.bind("0000:03:00.2", None);
    sys.open_error = Box::new(|| Some(SysOpenError::GroupNotViable));
    let e = open(&sys).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(
            "IOMMU group 12 of 0000:03:00.0 is not viable: 0000:03:00.1 (ixgbe) still bound"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "echo 0000:03:00.1 | sudo tee /sys/bus/pci/devices/0000:03:00.1/driver/unbind"
        ),
        "{text}"
    );
    assert!(
        !text.contains("0000:03:00.2"),
        "unbound siblings are fine: {text}"
    );
}

#[test]
fn kernel_errors_while_opening_are_classified() {
    let mut sys = MockSys::healthy();
    sys.open_error = Box::new(|| Some(SysOpenError::Group(io::Error::from_raw_os_error(16))));
    assert!(matches!(
        open(&sys).unwrap_err(),
        VfioError::GroupBusy { .. }
    ));
    sys.open_error = Box::new(|| {
        Some(SysOpenError::ContainerUnusable(
            "container doesn't support VfioType1V2 IOMMU driver type".into(),
        ))
    });
    assert!(matches!(
        open(&sys).unwrap_err(),
        VfioError::Container { .. }
    ));
    sys.open_error = Box::new(|| Some(SysOpenError::Other("failed to get vfio device fd".into())));
    let e = open(&sys).unwrap_err().to_string();
    assert!(
        e.contains("opening 0000:03:00.0 through VFIO failed"),
        "{e}"
    );
}

#[test]
fn bar0_missing_small_or_read_only() {
    let mut sys = MockSys::healthy();
    sys.region = None;
    assert!(open(&sys)
        .unwrap_err()
        .to_string()
        .contains("does not exist"));
    let mut sys = MockSys::healthy();
    sys.region.as_mut().unwrap().size = 0x4000;
    let e = open(&sys).unwrap_err().to_string();
    assert!(
        e.contains("is 0x4000 bytes, the register map needs 0xe600"),
        "{e}"
    );
    let mut sys = MockSys::healthy();
    sys.region.as_mut().unwrap().writable = false;
    assert!(open(&sys)
        .unwrap_err()
        .to_string()
        .contains("not readable and writable"));
}

#[test]
fn another_vendors_device_is_not_ours() {
    let sys = MockSys::healthy();
    // An Intel NIC's BAR 0 starts with its device control register, not our TYPE word.
    sys.bar.lock().unwrap().words[0] = 0x0814_0248;
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::NotOurDevice { .. }));
    let text = e.to_string();
    assert!(text.contains("offset 0 reads 0x08140248"), "{text}");
    assert!(text.contains("lspci -D -nn"), "{text}");

    sys.bar.lock().unwrap().words.fill(u32::MAX);
    let text = open(&sys).unwrap_err().to_string();
    assert!(text.contains("does not answer"), "{text}");
}

#[test]
fn regmap_version_mismatch() {
    let sys = MockSys::healthy();
    let v = nlb_hw::REGMAP_VERSION;
    sys.bar.lock().unwrap().words[4] = v + 1;
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::RegmapVersion { .. }));
    assert_eq!(
        e.to_string(),
        format!(
            "PCI device 0000:03:00.0: the device speaks regmap version {}, this driver speaks \
             version {v}: load a bitstream built from the same release as this driver (`nlbctl \
             flash`), or use the driver that matches the bitstream",
            v + 1
        )
    );
}

#[test]
fn other_discovery_failures_name_the_device() {
    let sys = MockSys::healthy();
    // The conntrack block claims version 9.
    sys.bar.lock().unwrap().words[0x3004 / 4] = 9;
    let e = open(&sys).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "PCI device 0000:03:00.0: register block `conntrack` at 0x3000 has version 9; this \
             driver supports version {}",
            nlb_hw::blocks::conntrack::VERSION
        )
    );
}

#[test]
fn host_memory_is_mapped_for_the_device_through_the_container() {
    let sys = MockSys::healthy();
    let mut v = open(&sys).unwrap();
    let r = DmaRegion::allocate(3 << 20, 0x1_0000_0000).unwrap();
    v.dma_map(&r).unwrap();
    {
        let m = sys.iommu.lock().unwrap();
        assert_eq!(
            m.live.get(&0x1_0000_0000),
            Some(&(r.len(), r.host_addr() as usize)),
            "the region's own IOVA, size and address"
        );
    }
    // Mapping the same IOVA again replaces the mapping (unmap first: the kernel refuses
    // overlaps).
    v.dma_map(&r).unwrap();
    let lines = [IrqLine::new().unwrap(), IrqLine::new().unwrap()];
    v.set_interrupts(&lines).unwrap();
    assert_eq!(sys.iommu.lock().unwrap().msix, 2);
    v.dma_unmap(&r).unwrap();
    v.dma_unmap(&r).unwrap(); // not mapped: nothing to do
    let len = r.len();
    assert_eq!(
        sys.iommu.lock().unwrap().log,
        [
            format!("map 0x100000000+{len:#x}"),
            format!("unmap 0x100000000+{len:#x}"),
            format!("map 0x100000000+{len:#x}"),
            format!("unmap 0x100000000+{len:#x}"),
        ]
    );
}

#[test]
fn dropping_the_device_unmaps_its_memory_first() {
    let sys = MockSys::healthy();
    let mut v = open(&sys).unwrap();
    let r = DmaRegion::allocate(4096, 0x2_0000_0000).unwrap();
    v.dma_map(&r).unwrap();
    drop(v);
    assert!(sys.iommu.lock().unwrap().live.is_empty());
}

#[test]
fn a_refused_map_says_what_to_raise() {
    let sys = MockSys::healthy();
    let mut v = open(&sys).unwrap();
    sys.iommu.lock().unwrap().map_errno = Some(libc::ENOMEM);
    let r = DmaRegion::allocate(4096, 0x3_0000_0000).unwrap();
    let e = v.dma_map(&r).unwrap_err().to_string();
    assert!(e.contains("ulimit -l") && e.contains("0x300000000"), "{e}");
    assert!(sys.iommu.lock().unwrap().live.is_empty());
}

#[test]
fn register_accesses_are_counted_on_the_cost_model() {
    let sys = MockSys::healthy();
    let mut v = open(&sys).unwrap();
    let before = v.pcie();
    v.read32(0).unwrap();
    v.write32(0x1010, 1).unwrap();
    let used = v.pcie().since(&before);
    assert_eq!((used.mmio_reads, used.mmio_writes), (1, 1));
    assert_eq!(used.mmio_stall_ns, 2000.0 + 150.0);
}

#[test]
fn rings_refuse_a_device_without_the_dma_engine() {
    // The mocked BAR has the block headers but no engine behind dma.caps.
    let sys = MockSys::healthy();
    let mut v = open(&sys).unwrap();
    let e = crate::rings::HostRings::attach(&mut v, crate::rings::RingSizes::default(), false)
        .unwrap_err();
    assert!(matches!(e, crate::rings::RingError::NoEngine { .. }), "{e}");
    assert!(sys.iommu.lock().unwrap().log.is_empty(), "nothing mapped");
}

// ---- OpenNIC shell functions: the registers in BAR 2 from 0x200000 ----

/// The OpenNIC shell's QDMA device ids, written out from the shell's numbering
/// (`0x9<PF><gen><width>`), not read from the driver's table.
const OPENNIC_IDS: [&str; 12] = [
    "903f", "913f", "923f", "933f", // Gen3 x16, PF0..3
    "9038", "9138", "9238", "9338", // Gen3 x8
    "9048", "9148", "9248", "9348", // Gen4 x8
];

#[test]
fn an_opennic_card_has_its_registers_in_bar2_at_the_322mhz_box() {
    for id in OPENNIC_IDS {
        let sys = MockSys::opennic(id);
        let mut dev = open(&sys).unwrap_or_else(|e| panic!("10ee:{id}: {e}"));
        assert!(dev.is_mmapped(), "{id}");
        // Mapped: BAR 2 from 0x200000, the 1 MiB of the 322 MHz box.
        assert_eq!(
            *sys.maps.lock().unwrap(),
            [(2, 0x20_0000, 0x10_0000)],
            "{id}"
        );
        assert_eq!(dev.info().unwrap().profile.name, "sim", "{id}");
        assert_eq!(dev.registers().bar, 2);
        assert_eq!(dev.registers().offset, 0x20_0000);
        // Discovery read the firmware-ID block at register 0 = BAR 2 byte 0x200000, and no
        // access left the box.
        let log = std::mem::take(&mut sys.bar.lock().unwrap().log);
        assert_eq!(log.first(), Some(&0x20_0000), "{id}");
        assert!(
            log.iter().all(|&o| (0x20_0000..0x30_0000).contains(&o)),
            "{id}: an access outside the 322 MHz box: {log:x?}"
        );
        // Register GENERATION (0x1010 in the map) is BAR 2 byte 0x201010.
        dev.write32(nlb_hw::blocks::ctrl::GENERATION, 9).unwrap();
        assert_eq!(
            sys.bar.lock().unwrap().log,
            [0x20_0000 + u64::from(nlb_hw::blocks::ctrl::GENERATION)]
        );
        assert_eq!(dev.read32(nlb_hw::blocks::ctrl::GENERATION).unwrap(), 9);
    }
}

#[test]
fn an_opennic_card_without_mmap_goes_through_pread_at_the_box() {
    for case in ["no mmap flag", "sparse area short of the box", "map fails"] {
        let mut sys = MockSys::opennic("903f");
        let r = sys.region.as_mut().unwrap();
        match case {
            "no mmap flag" => r.mmap = false,
            // Only the 250 MHz box may be mapped.
            "sparse area short of the box" => r.sparse_areas = Some(vec![(0, 0x20_0000)]),
            _ => sys.map_fails = true,
        }
        let mut dev = open(&sys).unwrap();
        assert!(!dev.is_mmapped(), "{case}");
        sys.bar.lock().unwrap().log.clear();
        dev.write32(0x1010, 5).unwrap();
        assert_eq!(dev.read32(0x1010).unwrap(), 5, "{case}");
        assert_eq!(
            sys.bar.lock().unwrap().log,
            [0x20_1010, 0x20_1010],
            "{case}: pwrite and pread at BAR 2 byte 0x201010"
        );
    }
    // A sparse area that covers the box maps just the box.
    let mut sys = MockSys::opennic("903f");
    sys.region.as_mut().unwrap().sparse_areas = Some(vec![(0x10_0000, 0x30_0000)]);
    assert!(open(&sys).unwrap().is_mmapped());
    assert_eq!(*sys.maps.lock().unwrap(), [(2, 0x20_0000, 0x10_0000)]);
}

#[test]
fn an_opennic_bar2_too_small_or_missing_is_named() {
    let mut sys = MockSys::opennic("913f");
    // A 1 MiB BAR 2 ends where the 322 MHz box would begin.
    sys.region.as_mut().unwrap().size = 0x10_0000;
    let e = open(&sys).unwrap_err();
    assert!(matches!(e, VfioError::Bar { bar: 2, .. }), "{e}");
    let need = 0x20_0000 + bar0_span();
    assert_eq!(
        e.to_string(),
        format!(
            "BAR 2 of 0000:03:00.0 (OpenNIC shell (QDMA) PF1, 10ee:913f) is 0x100000 bytes; the \
             register map at BAR 2 + 0x200000 needs {need:#x} (0x200000 + {:#x}), which the \
             OpenNIC shell's 4 MiB BAR 2 has: is this the right function of the card?",
            bar0_span()
        )
    );

    let mut sys = MockSys::opennic("903f");
    sys.region = None;
    let e = open(&sys).unwrap_err().to_string();
    assert_eq!(
        e,
        "BAR 2 of 0000:03:00.0 (OpenNIC shell (QDMA) PF0, 10ee:903f) does not exist: is this \
         the right function of the card?"
    );
}

#[test]
fn registers_beyond_the_box_are_refused_and_errors_name_the_bar() {
    let sys = MockSys::opennic("9048");
    let mut dev = open(&sys).unwrap();
    let e = dev.read32(0x10_0000).unwrap_err().to_string();
    assert!(e.contains("beyond the register window"), "{e}");
    sys.bar.lock().unwrap().broken = true;
    let e = dev.read32(0x1010).unwrap_err().to_string();
    assert!(
        e.contains("reading register 0x1010 (BAR 2 at 0x201010) of pci:0000:03:00.0"),
        "{e}"
    );
}

#[test]
fn other_devices_keep_bar0() {
    // Another AMD/Xilinx function (an XDMA example design) and another vendor's NIC: ids
    // outside the table, so the registers stay at BAR 0 offset 0.
    for (vendor, device) in [
        ("0x10ee", "0x9031"),
        ("0x10ee", "0x903e"),
        ("0x8086", "0x903f"),
    ] {
        let mut sys = MockSys::healthy();
        let dev = PathBuf::from(format!("/sys/bus/pci/devices/{ADDR}"));
        sys.files.insert(dev.join("vendor"), format!("{vendor}\n"));
        sys.files.insert(dev.join("device"), format!("{device}\n"));
        let v = open(&sys).unwrap_or_else(|e| panic!("{vendor}:{device}: {e}"));
        assert_eq!((v.registers().bar, v.registers().offset), (0, 0));
        assert_eq!(*sys.maps.lock().unwrap(), [(0, 0, 0x10000)]);
    }
}
