//! Host memory for the NIC's DMA (SPEC R12.2): regions the driver allocates and maps for the
//! device, interrupt lines, and the device-side port simulated devices reach them through.
//!
//! A [`DmaRegion`] is a `memfd` mapped shared (in 2 MiB huge pages when the kernel has them,
//! so that the rings and buffers fit the IOMMU's TLB), with the IOVA the device addresses it
//! by. VFIO maps it into the container's IOMMU; the in-process model and the RTL reach it
//! through a [`HostPort`]; `nlb-sim` gets the memfd over its socket and maps it too. Both
//! sides touch it only with atomic accesses (word by word, relaxed) and order them with
//! fences: whoever hands memory over (the device writing a ring index back, the host ringing
//! a doorbell) publishes with a release fence before, the other side reads the index with
//! acquire. That is the contract `vfio-ioctls` states for DMA-mapped memory (no Rust
//! references into it) and what makes the shared memory free of data races.
//!
//! An [`IrqLine`] is an eventfd: what VFIO signals for an MSI-X vector, and what the
//! simulated devices signal for theirs.

use crate::pcie::PcieLedger;
use firmware_sim::dma::{DmaFault, DmaPort};
use std::any::Any;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why host memory for DMA could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    /// The kernel refused the memory.
    #[error("cannot allocate {len} bytes of DMA memory ({what}): {source}")]
    Alloc {
        /// Bytes asked for.
        len: usize,
        /// The call that failed.
        what: &'static str,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// An access beyond the region.
    #[error("access at {offset:#x}+{len} beyond the {size:#x}-byte DMA region")]
    Bounds {
        /// Offset in the region.
        offset: usize,
        /// Bytes.
        len: usize,
        /// Region size.
        size: usize,
    },
}

const HUGE_PAGE: usize = 2 * 1024 * 1024;
const SMALL_PAGE: usize = 4096;

#[derive(Debug)]
struct RegionInner {
    ptr: NonNull<u8>,
    len: usize,
    page: usize,
    iova: u64,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; every access goes through the atomic
// accessors of `DmaRegion` (no references into it are ever created), so it may be used from
// any thread.
unsafe impl Send for RegionInner {}
// SAFETY: as above.
unsafe impl Sync for RegionInner {}

impl Drop for RegionInner {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map_fd`, unmapped once here
        // when the last handle goes.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Host memory the device reaches by DMA at `iova`. Cloning gives another handle on the
/// same memory.
#[derive(Debug, Clone)]
pub struct DmaRegion {
    inner: Arc<RegionInner>,
}

fn map_fd(fd: &OwnedFd, len: usize) -> Result<NonNull<u8>, DmaError> {
    // SAFETY: a fresh shared mapping of a file we own; the result is checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(DmaError::Alloc {
            len,
            what: "mmap",
            source: io::Error::last_os_error(),
        });
    }
    NonNull::new(p.cast::<u8>()).ok_or(DmaError::Alloc {
        len,
        what: "mmap",
        source: io::Error::other("mmap returned null"),
    })
}

fn memfd(flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and plain flags; the fd is checked and then owned.
    let fd = unsafe { libc::memfd_create(c"nlb-dma".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn truncate(fd: &OwnedFd, len: usize) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl DmaRegion {
    /// Allocates `len` bytes (rounded up to pages) at `iova`: 2 MiB huge pages when the
    /// kernel has them free, else 4 KiB pages. The memory starts zeroed.
    pub fn allocate(len: usize, iova: u64) -> Result<DmaRegion, DmaError> {
        let huge = len.div_ceil(HUGE_PAGE) * HUGE_PAGE;
        if let Ok(fd) = memfd(libc::MFD_CLOEXEC | libc::MFD_HUGETLB | libc::MFD_HUGE_2MB) {
            if truncate(&fd, huge).is_ok() {
                if let Ok(ptr) = map_fd(&fd, huge) {
                    // Touch every page now: a huge page pool that runs short shows here, not
                    // as a SIGBUS on a later access.
                    if populate(ptr, huge) {
                        return Ok(DmaRegion::from_parts(ptr, huge, HUGE_PAGE, iova, fd));
                    }
                    // SAFETY: the mapping just made, not used by anyone.
                    unsafe { libc::munmap(ptr.as_ptr().cast(), huge) };
                }
            }
        }
        let small = len.max(1).div_ceil(SMALL_PAGE) * SMALL_PAGE;
        let fd = memfd(libc::MFD_CLOEXEC).map_err(|source| DmaError::Alloc {
            len,
            what: "memfd_create",
            source,
        })?;
        truncate(&fd, small).map_err(|source| DmaError::Alloc {
            len,
            what: "ftruncate",
            source,
        })?;
        let ptr = map_fd(&fd, small)?;
        Ok(DmaRegion::from_parts(ptr, small, SMALL_PAGE, iova, fd))
    }

    /// Maps a region another process allocated (its memfd, received over a socket).
    pub fn from_fd(fd: OwnedFd, len: usize, iova: u64, page: usize) -> Result<DmaRegion, DmaError> {
        let ptr = map_fd(&fd, len)?;
        Ok(DmaRegion::from_parts(
            ptr,
            len,
            page.max(SMALL_PAGE),
            iova,
            fd,
        ))
    }

    fn from_parts(ptr: NonNull<u8>, len: usize, page: usize, iova: u64, fd: OwnedFd) -> DmaRegion {
        DmaRegion {
            inner: Arc::new(RegionInner {
                ptr,
                len,
                page,
                iova,
                fd,
            }),
        }
    }

    /// The address the device uses.
    pub fn iova(&self) -> u64 {
        self.inner.iova
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the region is empty (never: at least a page).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Page size backing it (2 MiB or 4 KiB).
    pub fn page_size(&self) -> usize {
        self.inner.page
    }

    /// The memfd (to pass to another process).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// The mapping's address in this process (for `VFIO_IOMMU_MAP_DMA`).
    pub fn host_addr(&self) -> *mut u8 {
        self.inner.ptr.as_ptr()
    }

    /// Whether `[iova, iova + len)` lies inside; its offset.
    pub fn offset_of(&self, iova: u64, len: usize) -> Option<usize> {
        let off = iova.checked_sub(self.inner.iova)?;
        let end = off.checked_add(len as u64)?;
        (end <= self.inner.len as u64).then_some(off as usize)
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), DmaError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(()),
            _ => Err(DmaError::Bounds {
                offset,
                len,
                size: self.inner.len,
            }),
        }
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: callers checked `offset + 4 <= len` and 4-byte alignment (the mapping is
        // page aligned); the memory lives as long as `self`, and is only ever accessed
        // atomically, so an `&AtomicU32` to it is sound.
        unsafe { AtomicU32::from_ptr(self.inner.ptr.as_ptr().add(offset).cast::<u32>()) }
    }

    fn dword(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: callers checked `offset + 8 <= len` and 8-byte alignment (the mapping is
        // page aligned); as for `word`.
        unsafe { AtomicU64::from_ptr(self.inner.ptr.as_ptr().add(offset).cast::<u64>()) }
    }

    fn byte(&self, offset: usize) -> &AtomicU8 {
        // SAFETY: callers checked `offset < len`; as for `word`.
        unsafe { AtomicU8::from_ptr(self.inner.ptr.as_ptr().add(offset)) }
    }

    /// Copies bytes out (relaxed atomic loads; order them with [`DmaRegion::load_u32`]).
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), DmaError> {
        self.check(offset, buf.len())?;
        let mut i = 0;
        while i < buf.len() && !(offset + i).is_multiple_of(4) {
            buf[i] = self.byte(offset + i).load(Ordering::Relaxed);
            i += 1;
        }
        if !(offset + i).is_multiple_of(8) && i + 4 <= buf.len() {
            let w = self.word(offset + i).load(Ordering::Relaxed);
            buf[i..i + 4].copy_from_slice(&w.to_ne_bytes());
            i += 4;
        }
        for chunk in buf[i..].chunks_exact_mut(8) {
            chunk.copy_from_slice(&self.dword(offset + i).load(Ordering::Relaxed).to_ne_bytes());
            i += 8;
        }
        while i + 4 <= buf.len() {
            let w = self.word(offset + i).load(Ordering::Relaxed);
            buf[i..i + 4].copy_from_slice(&w.to_ne_bytes());
            i += 4;
        }
        while i < buf.len() {
            buf[i] = self.byte(offset + i).load(Ordering::Relaxed);
            i += 1;
        }
        Ok(())
    }

    /// Copies bytes in (relaxed atomic stores; publish them with a release: a doorbell, or
    /// [`DmaRegion::store_u32`]).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), DmaError> {
        self.check(offset, data.len())?;
        let mut i = 0;
        while i < data.len() && !(offset + i).is_multiple_of(4) {
            self.byte(offset + i).store(data[i], Ordering::Relaxed);
            i += 1;
        }
        if !(offset + i).is_multiple_of(8) && i + 4 <= data.len() {
            let w = u32::from_ne_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
            self.word(offset + i).store(w, Ordering::Relaxed);
            i += 4;
        }
        for chunk in data[i..].chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            self.dword(offset + i)
                .store(u64::from_ne_bytes(b), Ordering::Relaxed);
            i += 8;
        }
        while i + 4 <= data.len() {
            let w = u32::from_ne_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
            self.word(offset + i).store(w, Ordering::Relaxed);
            i += 4;
        }
        while i < data.len() {
            self.byte(offset + i).store(data[i], Ordering::Relaxed);
            i += 1;
        }
        Ok(())
    }

    /// Little-endian words in (relaxed).
    pub fn write_words(&self, offset: usize, words: &[u32]) -> Result<(), DmaError> {
        self.check(offset, words.len() * 4)?;
        if !offset.is_multiple_of(4) {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            return self.write(offset, &bytes);
        }
        for (k, w) in words.iter().enumerate() {
            self.word(offset + 4 * k)
                .store(w.to_le(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Little-endian words out (relaxed), `out.len()` of them.
    pub fn read_words(&self, offset: usize, out: &mut [u32]) -> Result<(), DmaError> {
        self.check(offset, out.len() * 4)?;
        if !offset.is_multiple_of(4) {
            let mut bytes = vec![0u8; out.len() * 4];
            self.read(offset, &mut bytes)?;
            for (w, c) in out.iter_mut().zip(bytes.chunks(4)) {
                *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            return Ok(());
        }
        // Two words a load where the offset allows: bulk reads (attach reads the whole
        // connection table) take half the loads.
        let head = if offset.is_multiple_of(8) {
            0
        } else {
            out.len().min(1)
        };
        let (head, rest) = out.split_at_mut(head);
        for w in head.iter_mut() {
            *w = u32::from_le(self.word(offset).load(Ordering::Relaxed));
        }
        let at = offset + 4 * head.len();
        let (pairs, tail) = rest.as_chunks_mut::<2>();
        for (k, pair) in pairs.iter_mut().enumerate() {
            let d = u64::from_le(self.dword(at + 8 * k).load(Ordering::Relaxed));
            *pair = [d as u32, (d >> 32) as u32];
        }
        let at = at + 8 * pairs.len();
        for (k, w) in tail.iter_mut().enumerate() {
            *w = u32::from_le(self.word(at + 4 * k).load(Ordering::Relaxed));
        }
        Ok(())
    }

    /// A little-endian word the other side published (acquire: what it wrote before is
    /// visible after this).
    pub fn load_u32(&self, offset: usize) -> Result<u32, DmaError> {
        self.check(offset, 4)?;
        if !offset.is_multiple_of(4) {
            return Err(DmaError::Bounds {
                offset,
                len: 4,
                size: self.inner.len,
            });
        }
        Ok(u32::from_le(self.word(offset).load(Ordering::Acquire)))
    }

    /// Fills a range with zeros.
    pub fn zero(&self, offset: usize, len: usize) -> Result<(), DmaError> {
        self.check(offset, len)?;
        let zeros = [0u8; 4096];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(zeros.len());
            self.write(offset + at, &zeros[..n])?;
            at += n;
        }
        Ok(())
    }
}

/// Faults every page in now (reading one byte per page), so a short huge-page pool fails
/// here. Returns false if the kernel could not back the mapping.
fn populate(ptr: NonNull<u8>, len: usize) -> bool {
    // MADV_POPULATE_WRITE (Linux 5.14) reports failure instead of raising SIGBUS.
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    // SAFETY: advice on a mapping we own; no memory is accessed by this call.
    unsafe { libc::madvise(ptr.as_ptr().cast(), len, MADV_POPULATE_WRITE) == 0 }
}

/// An interrupt line: an eventfd the device signals for one MSI-X vector.
#[derive(Debug, Clone)]
pub struct IrqLine {
    fd: Arc<OwnedFd>,
}

impl IrqLine {
    /// A fresh line (a non-blocking eventfd).
    pub fn new() -> io::Result<IrqLine> {
        // SAFETY: plain syscall; the fd is checked and then owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(IrqLine {
            // SAFETY: a new descriptor nobody else owns.
            fd: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
        })
    }

    /// A line over an eventfd received from another process.
    pub fn from_fd(fd: OwnedFd) -> IrqLine {
        IrqLine { fd: Arc::new(fd) }
    }

    /// The eventfd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Raises the interrupt.
    pub fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd; a full counter (EAGAIN)
        // means an interrupt is pending anyway.
        unsafe {
            libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len());
        }
    }

    /// Takes the pending interrupts (0 if none).
    pub fn take(&self) -> u64 {
        let mut buf = [0u8; 8];
        // SAFETY: reads 8 bytes into a live buffer from our non-blocking eventfd.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 8 {
            u64::from_ne_bytes(buf)
        } else {
            0
        }
    }

    /// Waits up to `timeout` for the interrupt; takes it. Returns whether it came.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        n > 0 && self.take() > 0
    }
}

/// A small model of the IOMMU's TLB: the last `entries` pages translated.
#[derive(Debug)]
struct Iotlb {
    pages: VecDeque<u64>,
    entries: usize,
}

impl Iotlb {
    /// Misses of an access to `[iova, iova + len)` with pages of `page` bytes.
    fn access(&mut self, iova: u64, len: usize, page: usize) -> u32 {
        let page = page.max(1) as u64;
        let first = iova / page;
        let last = (iova + len.max(1) as u64 - 1) / page;
        let mut misses = 0;
        for p in first..=last {
            if let Some(i) = self.pages.iter().position(|&x| x == p) {
                self.pages.remove(i);
            } else {
                misses += 1;
                if self.pages.len() >= self.entries {
                    self.pages.pop_front();
                }
            }
            self.pages.push_back(p);
        }
        misses
    }
}

/// Host memory as a simulated device's DMA engine sees it: the regions mapped for it (the
/// IOMMU's view; anything else faults), charged on the PCIe cost model.
#[derive(Debug)]
pub struct HostPort {
    regions: Vec<DmaRegion>,
    ledger: Arc<PcieLedger>,
    irqs: Vec<IrqLine>,
    tlb: Iotlb,
}

impl HostPort {
    /// A port charging `ledger`, nothing mapped yet.
    pub fn new(ledger: Arc<PcieLedger>) -> HostPort {
        let entries = ledger.costs().iotlb_entries;
        HostPort {
            regions: Vec::new(),
            ledger,
            irqs: Vec::new(),
            tlb: Iotlb {
                pages: VecDeque::new(),
                entries,
            },
        }
    }

    /// Maps a region (replacing one at the same IOVA).
    pub fn map(&mut self, region: &DmaRegion) {
        self.regions.retain(|r| r.iova() != region.iova());
        self.regions.push(region.clone());
    }

    /// Unmaps the region at `iova`.
    pub fn unmap(&mut self, iova: u64) {
        self.regions.retain(|r| r.iova() != iova);
    }

    /// Connects MSI-X vector i to `lines[i]`.
    pub fn set_interrupts(&mut self, lines: &[IrqLine]) {
        self.irqs = lines.to_vec();
    }

    /// The ledger it charges.
    pub fn ledger(&self) -> &Arc<PcieLedger> {
        &self.ledger
    }

    /// Whether `len` bytes at `iova` lie inside one mapped region (what the IOMMU would let
    /// through), without touching them or charging anything.
    pub fn maps(&self, iova: u64, len: usize) -> bool {
        self.find(iova, len).is_some()
    }

    fn find(&self, iova: u64, len: usize) -> Option<(&DmaRegion, usize)> {
        self.regions
            .iter()
            .find_map(|r| r.offset_of(iova, len).map(|o| (r, o)))
    }
}

impl DmaPort for HostPort {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        // What the host published before ringing the doorbell is visible.
        fence(Ordering::Acquire);
        let fault = DmaFault {
            iova,
            len: buf.len(),
        };
        let Some((r, off)) = self.find(iova, buf.len()) else {
            self.ledger.fault();
            return Err(fault);
        };
        let page = r.page_size();
        r.read(off, buf).map_err(|_| fault)?;
        let misses = self.tlb.access(iova, buf.len(), page);
        self.ledger.dma_read(buf.len(), misses);
        Ok(())
    }

    fn write(&mut self, iova: u64, data: &[u8]) -> Result<(), DmaFault> {
        // Writes land in order: everything written before is visible to whoever sees this.
        fence(Ordering::Release);
        let fault = DmaFault {
            iova,
            len: data.len(),
        };
        let Some((r, off)) = self.find(iova, data.len()) else {
            self.ledger.fault();
            return Err(fault);
        };
        let page = r.page_size();
        r.write(off, data).map_err(|_| fault)?;
        let misses = self.tlb.access(iova, data.len(), page);
        self.ledger.dma_write(data.len(), misses);
        Ok(())
    }

    fn interrupt(&mut self, vector: u16) {
        self.ledger.interrupt();
        if let Some(line) = self.irqs.get(usize::from(vector)) {
            line.signal();
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::PcieCosts;

    #[test]
    fn a_region_reads_back_what_was_written_at_any_alignment() {
        let r = DmaRegion::allocate(10_000, 0x1_0000_0000).unwrap();
        assert!(r.len() >= 10_000);
        let data: Vec<u8> = (0..=255u8).cycle().take(777).collect();
        for off in [0, 1, 2, 3, 4, 4093] {
            r.write(off, &data).unwrap();
            let mut back = vec![0; data.len()];
            r.read(off, &mut back).unwrap();
            assert_eq!(back, data, "offset {off}");
        }
        assert!(r.write(r.len() - 3, &[0; 4]).is_err());
        // Words, read back as the bytes were written (little-endian), at offsets on and off an
        // 8-byte boundary, odd and even counts.
        for off in [0, 4, 8, 12, 4092] {
            for n in [0, 1, 2, 3, 12, 13] {
                r.write(off, &data[..n * 4]).unwrap();
                let mut words = vec![0u32; n];
                r.read_words(off, &mut words).unwrap();
                let want: Vec<u32> = data[..n * 4]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                assert_eq!(words, want, "offset {off}, {n} words");
            }
        }
        assert!(r.read_words(r.len() - 4, &mut [0; 2]).is_err());
        assert_eq!(r.offset_of(0x1_0000_0010, 16), Some(16));
        assert_eq!(r.offset_of(0xFFFF_FFFF, 16), None);
        assert_eq!(r.offset_of(0x1_0000_0000 + r.len() as u64 - 8, 16), None);
    }

    #[test]
    fn the_port_faults_outside_the_mapped_regions_and_counts() {
        let ledger = Arc::new(PcieLedger::new(PcieCosts::default()));
        let mut port = HostPort::new(ledger.clone());
        let r = DmaRegion::allocate(8192, 0x2_0000_0000).unwrap();
        port.map(&r);
        port.write(0x2_0000_0000, &[1, 2, 3, 4]).unwrap();
        let mut b = [0u8; 4];
        port.read(0x2_0000_0000, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        assert!(port.read(0x3_0000_0000, &mut b).is_err());
        port.unmap(0x2_0000_0000);
        assert!(port.write(0x2_0000_0000, &[0]).is_err());
        let s = ledger.stats();
        assert_eq!((s.dma_reads, s.dma_writes, s.faults), (1, 1, 2));
        assert_eq!(s.iotlb_misses, 1, "one page, then a hit");
    }

    #[test]
    fn an_interrupt_line_wakes_a_waiter() {
        let line = IrqLine::new().unwrap();
        assert!(!line.wait(Duration::from_millis(1)));
        let l2 = line.clone();
        let t = std::thread::spawn(move || l2.signal());
        assert!(line.wait(Duration::from_secs(5)));
        t.join().unwrap();
        assert_eq!(line.take(), 0, "taken by the wait");
    }
}
