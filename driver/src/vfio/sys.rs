//! The system layer under the VFIO backend: sysfs, `/dev/vfio` and the VFIO device itself.
//!
//! Everything the backend asks of the kernel goes through [`VfioSys`], so discovery and every
//! error path run in unit tests against a mock of this layer (the rust-vmm pattern); the
//! production implementation, [`LinuxSys`], is a thin shell over `std::fs`, `vfio-ioctls` and
//! `memmap2`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the kernel says about one region of a VFIO device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegionInfo {
    /// Size in bytes.
    pub size: u64,
    /// Readable through the device fd.
    pub readable: bool,
    /// Writable through the device fd.
    pub writable: bool,
    /// May be mmapped (`VFIO_REGION_INFO_FLAG_MMAP`).
    pub mmap: bool,
    /// Sparse-mmap capability: only these (offset, size) areas may be mapped.
    pub sparse_areas: Option<Vec<(u64, u64)>>,
}

/// Why opening the device through VFIO failed (as the kernel reported it).
#[derive(Debug, thiserror::Error)]
pub enum SysOpenError {
    /// `/dev/vfio/vfio` could not be opened or is unusable.
    #[error("cannot open the VFIO container /dev/vfio/vfio: {0}")]
    Container(#[source] io::Error),
    /// The container lacks the Type1v2 IOMMU (or the API version differs).
    #[error("the VFIO container is unusable: {0}")]
    ContainerUnusable(String),
    /// `/dev/vfio/N` could not be opened.
    #[error("cannot open the VFIO group: {0}")]
    Group(#[source] io::Error),
    /// Some device of the IOMMU group is bound to a host driver.
    #[error("the IOMMU group is not viable")]
    GroupNotViable,
    /// Anything else `vfio-ioctls` reported.
    #[error("{0}")]
    Other(String),
}

/// Memory-mapped registers.
pub trait Mmio: Send {
    /// Mapped length in bytes.
    fn mapped_len(&self) -> u64;
    /// Volatile 32-bit read at a byte offset into the mapping.
    fn read32(&self, offset: u64) -> io::Result<u32>;
    /// Volatile 32-bit write at a byte offset into the mapping.
    fn write32(&self, offset: u64, value: u32) -> io::Result<()>;
}

/// An open VFIO device.
pub trait VfioDeviceIo: Send {
    /// Information about region `index` (0 = BAR 0), `None` if the device has no such region.
    fn region(&self, index: u32) -> Option<RegionInfo>;
    /// Maps `len` bytes of region `index` from byte `offset` of the region (page aligned).
    fn map(&self, index: u32, offset: u64, len: u64) -> io::Result<Box<dyn Mmio>>;
    /// `pread` from region `index` at `offset`.
    fn read_at(&self, index: u32, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// `pwrite` to region `index` at `offset`.
    fn write_at(&self, index: u32, buf: &[u8], offset: u64) -> io::Result<()>;
    /// `VFIO_IOMMU_MAP_DMA` on the container: the device may read and write
    /// `[vaddr, vaddr + size)` at `[iova, iova + size)`.
    ///
    /// # Safety
    /// Until [`VfioDeviceIo::dma_unmap`] with the same `iova` and `size`, the memory must stay
    /// mapped in this process and be accessed only atomically or volatilely (the device
    /// writes it at any time): the contract of `vfio-ioctls`' `vfio_dma_map`.
    unsafe fn dma_map(&self, iova: u64, size: usize, vaddr: *mut u8) -> io::Result<()>;
    /// `VFIO_IOMMU_UNMAP_DMA` of a mapping made by [`VfioDeviceIo::dma_map`].
    fn dma_unmap(&self, iova: u64, size: usize) -> io::Result<()>;
    /// `VFIO_DEVICE_SET_IRQS` for MSI-X: vector i signals `fds[i]` (none: disable).
    fn set_msix(&self, fds: &[BorrowedFd<'_>]) -> io::Result<()>;
}

/// The kernel, as the VFIO backend sees it.
pub trait VfioSys: Send + Sync {
    /// Whether a path exists (sysfs entries, device nodes).
    fn exists(&self, path: &Path) -> bool;
    /// Target of a symbolic link (`.../driver`, `.../iommu_group`).
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// Names of the entries of a directory, sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Contents of a (sysfs attribute) file.
    fn read_file(&self, path: &Path) -> io::Result<String>;
    /// Writes `contents` to a (sysfs attribute) file in one `write`, as `echo X > FILE` does.
    fn write_file(&self, path: &Path, contents: &str) -> io::Result<()>;
    /// Opens `path` read-write and closes it again: what opening a VFIO group needs.
    fn check_rw(&self, path: &Path) -> io::Result<()>;
    /// Opens the device at sysfs path `sysfs_dev` through VFIO (container, group, device fd).
    fn open_device(&self, sysfs_dev: &Path) -> Result<Box<dyn VfioDeviceIo>, SysOpenError>;
}

/// The real kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxSys;

impl VfioSys for LinuxSys {
    fn exists(&self, path: &Path) -> bool {
        path.symlink_metadata().is_ok()
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn read_file(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write_file(&self, path: &Path, contents: &str) -> io::Result<()> {
        // What the shell's `echo X > FILE` does, without creating the file: a sysfs attribute
        // exists or the write is an error (truncation means nothing to sysfs), and the kernel
        // takes the value from this one write.
        use std::io::Write as _;
        let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
        f.write_all(contents.as_bytes())
    }

    fn check_rw(&self, path: &Path) -> io::Result<()> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(drop)
    }

    fn open_device(&self, sysfs_dev: &Path) -> Result<Box<dyn VfioDeviceIo>, SysOpenError> {
        use vfio_ioctls::{VfioContainer, VfioDevice, VfioError};
        let convert = |e: VfioError| match e {
            VfioError::OpenContainer(io) => SysOpenError::Container(io),
            VfioError::VfioApiVersion
            | VfioError::VfioExtension
            | VfioError::VfioInvalidType
            | VfioError::VfioType1V2
            | VfioError::ContainerSetIOMMU(_) => SysOpenError::ContainerUnusable(e.to_string()),
            VfioError::OpenGroup(io, _) => SysOpenError::Group(io),
            VfioError::GroupViable => SysOpenError::GroupNotViable,
            other => SysOpenError::Other(other.to_string()),
        };
        let container = Arc::new(VfioContainer::new(None).map_err(convert)?);
        let device = VfioDevice::new(sysfs_dev, container.clone(), false).map_err(convert)?;
        // Our own handle on the device fd: vfio-ioctls' region_read/region_write only log
        // failures, and the backend must report them.
        // SAFETY: `device` owns this fd and keeps it open while it lives; the borrow ends with
        // the dup below, which gives us an independent descriptor.
        let borrowed = unsafe { BorrowedFd::borrow_raw(device.as_raw_fd()) };
        let file = File::from(
            borrowed
                .try_clone_to_owned()
                .map_err(|e| SysOpenError::Other(format!("cannot dup the device fd: {e}")))?,
        );
        Ok(Box::new(LinuxDevice {
            device,
            container,
            file,
        }))
    }
}

/// The kernel's files under another root directory: `/sys/...` is read and written at
/// `ROOT/sys/...`, `/dev/...` at `ROOT/dev/...`. Root `/` is the live machine ([`LinuxSys`]);
/// another root is a tree a test built (or a copy of a machine's sysfs), where the PCI
/// inventory and the bind plan work but no VFIO device opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootedSys {
    root: PathBuf,
}

impl RootedSys {
    /// The files under `root`.
    pub fn new(root: impl Into<PathBuf>) -> RootedSys {
        RootedSys { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the absolute path `path` (`/sys/bus/pci/...`) is under the root.
    pub fn at(&self, path: &Path) -> PathBuf {
        match path.strip_prefix("/") {
            Ok(rest) if self.root != Path::new("/") => self.root.join(rest),
            _ => path.to_path_buf(),
        }
    }
}

impl VfioSys for RootedSys {
    fn exists(&self, path: &Path) -> bool {
        LinuxSys.exists(&self.at(path))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        LinuxSys.read_link(&self.at(path))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        LinuxSys.list_dir(&self.at(path))
    }

    fn read_file(&self, path: &Path) -> io::Result<String> {
        LinuxSys.read_file(&self.at(path))
    }

    fn write_file(&self, path: &Path, contents: &str) -> io::Result<()> {
        LinuxSys.write_file(&self.at(path), contents)
    }

    fn check_rw(&self, path: &Path) -> io::Result<()> {
        LinuxSys.check_rw(&self.at(path))
    }

    fn open_device(&self, sysfs_dev: &Path) -> Result<Box<dyn VfioDeviceIo>, SysOpenError> {
        if self.root != Path::new("/") {
            return Err(SysOpenError::Other(format!(
                "VFIO devices open only on the live system, not under {}",
                self.root.display()
            )));
        }
        LinuxSys.open_device(sysfs_dev)
    }
}

struct LinuxDevice {
    device: vfio_ioctls::VfioDevice,
    container: Arc<vfio_ioctls::VfioContainer>,
    file: File,
}

fn vfio_io(what: &str, e: vfio_ioctls::VfioError) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

impl LinuxDevice {
    fn region_bounds(&self, index: u32, offset: u64, len: usize) -> io::Result<u64> {
        let size = self.device.get_region_size(index);
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("access at {offset:#x}+{len} beyond region {index} of {size:#x} bytes"),
            ));
        }
        Ok(self.device.get_region_offset(index) + offset)
    }
}

impl VfioDeviceIo for LinuxDevice {
    fn region(&self, index: u32) -> Option<RegionInfo> {
        use vfio_ioctls::VfioRegionInfoCap;
        const FLAG_READ: u32 = 1 << 0;
        const FLAG_WRITE: u32 = 1 << 1;
        const FLAG_MMAP: u32 = 1 << 2;
        let size = self.device.get_region_size(index);
        if size == 0 {
            return None;
        }
        let flags = self.device.get_region_flags(index);
        let sparse_areas =
            self.device
                .get_region_caps(index)
                .into_iter()
                .find_map(|cap| match cap {
                    VfioRegionInfoCap::SparseMmap(s) => {
                        Some(s.areas.iter().map(|a| (a.offset, a.size)).collect())
                    }
                    _ => None,
                });
        Some(RegionInfo {
            size,
            readable: flags & FLAG_READ != 0,
            writable: flags & FLAG_WRITE != 0,
            mmap: flags & FLAG_MMAP != 0,
            sparse_areas,
        })
    }

    fn map(&self, index: u32, offset: u64, len: u64) -> io::Result<Box<dyn Mmio>> {
        let start = self.region_bounds(index, offset, len as usize)?;
        let map = memmap2::MmapOptions::new()
            .offset(start)
            .len(len as usize)
            .map_raw(&self.file)?;
        Ok(Box::new(MappedRegion { map }))
    }

    fn read_at(&self, index: u32, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let at = self.region_bounds(index, offset, buf.len())?;
        self.file.read_exact_at(buf, at)
    }

    fn write_at(&self, index: u32, buf: &[u8], offset: u64) -> io::Result<()> {
        let at = self.region_bounds(index, offset, buf.len())?;
        self.file.write_all_at(buf, at)
    }

    unsafe fn dma_map(&self, iova: u64, size: usize, vaddr: *mut u8) -> io::Result<()> {
        // SAFETY: the caller upholds vfio_dma_map's contract (this method's own).
        unsafe { self.container.vfio_dma_map(iova, size, vaddr) }
            .map_err(|e| vfio_io("VFIO_IOMMU_MAP_DMA", e))
    }

    fn dma_unmap(&self, iova: u64, size: usize) -> io::Result<()> {
        self.container
            .vfio_dma_unmap(iova, size)
            .map_err(|e| vfio_io("VFIO_IOMMU_UNMAP_DMA", e))
    }

    fn set_msix(&self, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        if fds.is_empty() {
            return self
                .device
                .disable_msix()
                .map_err(|e| vfio_io("disabling MSI-X", e));
        }
        let mut events = Vec::new();
        for fd in fds {
            let own = fd.try_clone_to_owned()?;
            // SAFETY: `own` is a fresh duplicate of an eventfd; EventFd takes it over.
            events.push(unsafe { vmm_sys_util::eventfd::EventFd::from_raw_fd(own.into_raw_fd()) });
        }
        self.device
            .enable_msix(events.iter().collect())
            .map_err(|e| vfio_io("VFIO_DEVICE_SET_IRQS (MSI-X)", e))
    }
}

struct MappedRegion {
    map: memmap2::MmapRaw,
}

impl MappedRegion {
    fn check(&self, offset: u64) -> io::Result<usize> {
        let len = self.map.len() as u64;
        if !offset.is_multiple_of(4) || offset.checked_add(4).is_none_or(|end| end > len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MMIO offset {offset:#x} is unaligned or beyond the {len:#x}-byte mapping"),
            ));
        }
        Ok(offset as usize)
    }
}

impl Mmio for MappedRegion {
    fn mapped_len(&self) -> u64 {
        self.map.len() as u64
    }

    fn read32(&self, offset: u64) -> io::Result<u32> {
        let at = self.check(offset)?;
        // SAFETY: `check` proved at..at+4 lies inside the live mapping and is 4-byte aligned
        // (the mapping itself is page aligned); a volatile read is how MMIO must be accessed.
        let raw = unsafe { std::ptr::read_volatile(self.map.as_ptr().add(at).cast::<u32>()) };
        // PCI registers are little-endian.
        Ok(u32::from_le(raw))
    }

    fn write32(&self, offset: u64, value: u32) -> io::Result<()> {
        let at = self.check(offset)?;
        // SAFETY: as in `read32`; the mapping is shared and writable (map_raw maps read-write).
        unsafe {
            std::ptr::write_volatile(self.map.as_mut_ptr().add(at).cast::<u32>(), value.to_le())
        };
        Ok(())
    }
}
