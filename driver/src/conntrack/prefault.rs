//! Zero memory whose pages a thread of its own backs ahead of use.
//!
//! A large buffer allocated zeroed is a mapping new to the process: the kernel backs it a page
//! at a time as each is first touched, a page fault and a zeroing each (two faults when a read
//! comes first: it maps the shared zero page, and the write after it copies). Where such a
//! buffer is written all over soon after it is made (the last-seen times of a connection
//! table, 256 MiB at the `u280` profile, one new connection at a random place after another),
//! the faults land on whoever writes first: on a fresh table about one install in fifteen
//! paid for a page.
//!
//! [`Prefaulted`] backs the pages instead on a thread of its own, started with the buffer:
//! `MADV_POPULATE_WRITE` (Linux 5.14) does for a range what a write to each page would,
//! without changing what the pages hold, so the owner reads and writes the buffer meanwhile as
//! if the thread were not there. The thread works in steps of [`STEP_BYTES`] and stops between
//! two when the buffer is dropped; the drop waits for it (a step at most) before the memory is
//! freed. A kernel that does not know the advice refuses it (`EINVAL`): the thread then stops,
//! and the pages are backed as they are first written, as without it.

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Buffers smaller than this are not worth a thread. Above it the allocation is always a new
/// mapping, untouched (glibc's `malloc` maps anything above its mmap threshold, which it raises
/// at most to 32 MiB; a smaller buffer may be heap memory the process has already touched).
/// Below it, a buffer has at most 8,192 pages to fault in, a few milliseconds in all, spread
/// over its first writes.
pub(crate) const PREFAULT_MIN_BYTES: usize = 32 * MIB;

/// Bytes backed per call: how long a drop may wait for the thread (a few milliseconds: 256 MiB
/// took 0.1-0.4 s here), in few enough calls (32 for 256 MiB).
const STEP_BYTES: usize = 8 * MIB;

const MIB: usize = 1024 * 1024;

/// How far a buffer's memory is backed ahead of use ([`crate::conntrack::Conntrack::prefault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefault {
    /// Too small to be worth a thread (below 32 MiB): its pages are backed as they are first
    /// written.
    Skipped,
    /// A thread is backing its pages.
    Working,
    /// Every page of it is backed.
    Done,
    /// The kernel does not support it (before Linux 5.14): its pages are backed as they are
    /// first written.
    Unsupported,
    /// The kernel could not back every page (short of memory), or no thread could be started:
    /// the rest are backed as they are first written.
    Failed,
}

impl Prefault {
    fn from_u8(v: u8) -> Prefault {
        [
            Prefault::Skipped,
            Prefault::Working,
            Prefault::Done,
            Prefault::Unsupported,
            Prefault::Failed,
        ]
        .into_iter()
        .find(|p| *p as u8 == v)
        .unwrap_or(Prefault::Failed)
    }
}

/// Types whose all-zero bytes are a value (integers, structs of integers).
///
/// # Safety
///
/// All-zero bytes must be a valid value of the type.
pub(crate) unsafe trait Zeroable: Copy {}

// SAFETY: any bit pattern is a `u32`.
unsafe impl Zeroable for u32 {}

/// `len` zero values in memory the allocator gets zeroed (for a large buffer, a new mapping the
/// kernel zeroes a page at a time as it is first touched), not written here.
pub(crate) fn zeroed_vec<T: Zeroable>(len: usize) -> Vec<T> {
    if len == 0 || size_of::<T>() == 0 {
        return Vec::new();
    }
    let layout = Layout::array::<T>(len).unwrap_or_else(|_| capacity_overflow(len));
    // SAFETY: `layout` has a non-zero size (`len > 0`, `T` is not zero-sized).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `len` values of
    // `T` (what a `Vec<T>` of capacity `len` deallocates with), and its `len` values are
    // initialised: all-zero bytes are a `T` (`Zeroable`).
    unsafe { Vec::from_raw_parts(ptr, len, len) }
}

#[cold]
fn capacity_overflow(len: usize) -> ! {
    panic!("a table of {len} entries does not fit in memory")
}

/// What the owner and the thread share.
#[derive(Debug)]
struct Shared {
    /// Set by the owner's drop: the thread stops before its next step.
    stop: AtomicBool,
    /// A [`Prefault`], as `u8`.
    state: AtomicU8,
}

/// The thread backing a buffer's pages.
#[derive(Debug)]
struct Filler {
    shared: Arc<Shared>,
    thread: JoinHandle<()>,
}

/// `len` zero values of `T`, a slice to its owner, whose pages a thread backs ahead of use
/// when there are at least [`PREFAULT_MIN_BYTES`] of them (see the module's doc). The buffer
/// never moves or changes size while it lives (a boxed slice); dropping it stops and joins the
/// thread first. A clone is a copy, its memory written whole by the copying: no thread.
pub(crate) struct Prefaulted<T: Zeroable> {
    values: Box<[T]>,
    filler: Option<Filler>,
    /// The state when there is no thread.
    state: Prefault,
}

impl<T: Zeroable> Prefaulted<T> {
    /// `len` zero values, their pages backed ahead of use when they take at least
    /// [`PREFAULT_MIN_BYTES`].
    pub(crate) fn new(len: usize) -> Prefaulted<T> {
        Prefaulted::with_min_bytes(len, PREFAULT_MIN_BYTES)
    }

    /// As [`Prefaulted::new`], from `min_bytes` on.
    pub(crate) fn with_min_bytes(len: usize, min_bytes: usize) -> Prefaulted<T> {
        let values = zeroed_vec::<T>(len).into_boxed_slice();
        let bytes = size_of_val(&*values);
        if bytes == 0 || bytes < min_bytes {
            return Prefaulted {
                values,
                filler: None,
                state: Prefault::Skipped,
            };
        }
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            state: AtomicU8::new(Prefault::Working as u8),
        });
        // The thread holds the buffer's address, never a reference: it only gives the kernel
        // advice about the pages there.
        let (start, theirs) = (values.as_ptr() as usize, Arc::clone(&shared));
        let spawned = std::thread::Builder::new()
            .name("nlb-prefault".into())
            .stack_size(64 * 1024)
            .spawn(move || fill(start, bytes, &theirs));
        match spawned {
            Ok(thread) => Prefaulted {
                values,
                filler: Some(Filler { shared, thread }),
                state: Prefault::Working,
            },
            Err(_) => Prefaulted {
                values,
                filler: None,
                state: Prefault::Failed,
            },
        }
    }

    /// How far its pages are backed.
    pub(crate) fn prefault(&self) -> Prefault {
        match &self.filler {
            Some(f) => Prefault::from_u8(f.shared.state.load(Ordering::Acquire)),
            None => self.state,
        }
    }
}

impl<T: Zeroable> std::ops::Deref for Prefaulted<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.values
    }
}

impl<T: Zeroable> std::ops::DerefMut for Prefaulted<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
}

impl<T: Zeroable> Clone for Prefaulted<T> {
    fn clone(&self) -> Prefaulted<T> {
        let values = self.values.clone();
        let state = match self.prefault() {
            Prefault::Skipped => Prefault::Skipped,
            // Copied into: every page written.
            _ => Prefault::Done,
        };
        Prefaulted {
            values,
            filler: None,
            state,
        }
    }
}

impl<T: Zeroable> std::fmt::Debug for Prefaulted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefaulted")
            .field("len", &self.values.len())
            .field("prefault", &self.prefault())
            .finish()
    }
}

impl<T: Zeroable> Drop for Prefaulted<T> {
    fn drop(&mut self) {
        if let Some(f) = self.filler.take() {
            f.shared.stop.store(true, Ordering::Release);
            // Done with the buffer before `values` is freed, after this. A panic of the thread
            // (there is nothing in it to panic) is not this drop's to raise.
            let _ = f.thread.join();
        }
    }
}

/// The thread's work: backs the whole pages of the `bytes` bytes at `start`, a step at a time,
/// until done, refused, or told to stop.
fn fill(start: usize, bytes: usize, shared: &Shared) {
    let page = page_size();
    let (first, end) = (start.next_multiple_of(page), (start + bytes) / page * page);
    // At the owner's priority: the faults its writes would take anyway, taken earlier (a
    // lower one let any other work on a busy machine hold it back for as long as the flood it
    // is ahead of lasts).
    let mut at = first;
    let mut state = Prefault::Done;
    while at < end {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let n = (end - at).min(STEP_BYTES);
        // SAFETY: `at..at + n` is whole pages inside the buffer, which outlives this thread
        // (its owner's drop joins the thread before freeing it). `MADV_POPULATE_WRITE` neither
        // reads nor changes what the pages hold (it backs them as a write fault would, each
        // page as it is), so the owner's reads and writes meanwhile see only their own.
        let r = unsafe { libc::madvise(at as *mut libc::c_void, n, libc::MADV_POPULATE_WRITE) };
        if r != 0 {
            state = match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINVAL) => Prefault::Unsupported,
                _ => Prefault::Failed,
            };
            break;
        }
        at += n;
    }
    shared.state.store(state as u8, Ordering::Release);
}

fn page_size() -> usize {
    // SAFETY: `sysconf` reads a system constant; touches no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Well above glibc's largest mmap threshold: always a new mapping, nothing resident.
    const BIG: usize = 64 * MIB;

    /// Resident pages among the whole pages of `values`, by `mincore(2)`: (resident, pages).
    fn resident(values: &[u32]) -> (usize, usize) {
        let page = page_size();
        let start = values.as_ptr() as usize;
        let (first, end) = (
            start.next_multiple_of(page),
            (start + size_of_val(values)) / page * page,
        );
        let mut vec = vec![0u8; (end - first) / page];
        // SAFETY: the range is whole pages of `values`, mapped while the borrow lasts; the
        // kernel writes one byte per page into `vec`, which has room for each.
        let r = unsafe { libc::mincore(first as *mut libc::c_void, end - first, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        // (the low bit of each byte: the page is resident; the others are reserved)
        (vec.iter().filter(|&&b| b % 2 == 1).count(), vec.len())
    }

    /// Waits for the thread to finish (it backs 64 MiB in tens of milliseconds; a minute is a
    /// hang).
    fn settled<T: Zeroable>(p: &Prefaulted<T>) -> Prefault {
        let t0 = Instant::now();
        while p.prefault() == Prefault::Working {
            assert!(t0.elapsed() < Duration::from_secs(60), "still working");
            std::thread::sleep(Duration::from_millis(1));
        }
        p.prefault()
    }

    /// Whether this kernel has `MADV_POPULATE_WRITE` (Linux 5.14, by its release string).
    fn kernel_populates() -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut v = release
            .trim()
            .split(|c: char| !c.is_ascii_digit())
            .map(|s| s.parse::<u32>().unwrap_or(0));
        let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        (major, minor) >= (5, 14)
    }

    #[test]
    fn a_large_buffer_is_resident_once_filled_and_still_zero() {
        // The measure first: a buffer below the threshold is left alone, and a new mapping
        // has (nearly) no page resident.
        let control = Prefaulted::<u32>::with_min_bytes(BIG / 4, BIG + 1);
        assert_eq!(control.prefault(), Prefault::Skipped);
        let (n, pages) = resident(&control);
        assert!(pages >= BIG / page_size() - 1);
        // (The allocator writes its header in the first page, which may be a huge page.)
        assert!(n < pages / 10, "{n} of {pages} pages resident untouched");
        drop(control);

        let mut p = Prefaulted::<u32>::new(BIG / 4);
        let state = settled(&p);
        if !kernel_populates() {
            assert_eq!(state, Prefault::Unsupported);
            return;
        }
        assert_eq!(state, Prefault::Done);
        let (n, pages) = resident(&p);
        assert_eq!(n, pages, "every whole page resident");
        // Backed, not changed: all zero still, and written and read as any memory.
        assert!(p.iter().all(|&v| v == 0));
        for (k, i) in [0, 1, 4095, 4096, BIG / 8, BIG / 4 - 1]
            .into_iter()
            .enumerate()
        {
            p[i] = k as u32 + 7;
        }
        assert_eq!(p[BIG / 8], 11);
        assert_eq!(p.iter().filter(|&&v| v != 0).count(), 6);
        assert_eq!(p.len(), BIG / 4);
    }

    #[test]
    fn small_and_empty_buffers_start_no_thread() {
        for len in [0, 1, 1000, PREFAULT_MIN_BYTES / 4 - 1] {
            let p = Prefaulted::<u32>::new(len);
            assert_eq!((p.len(), p.prefault()), (len, Prefault::Skipped));
            assert!(p.filler.is_none());
            assert!(p.iter().all(|&v| v == 0));
        }
    }

    /// Dropped while the thread works (right after it started, and a little later), the
    /// buffer's drop stops the thread and waits for it: the thread's share is gone after it.
    #[test]
    fn a_drop_while_filling_stops_and_joins_the_thread() {
        for wait in [0, 2] {
            let mut p = Prefaulted::<u32>::new(4 * BIG / 4);
            let shared = Arc::clone(&p.filler.as_ref().expect("a thread").shared);
            std::thread::sleep(Duration::from_millis(wait));
            // Written meanwhile as any memory.
            p[BIG / 2] = 5;
            assert_eq!(p[BIG / 2], 5);
            drop(p);
            assert!(shared.stop.load(Ordering::Acquire));
            assert_eq!(
                Arc::strong_count(&shared),
                1,
                "the thread's share outlived the drop"
            );
        }
    }

    /// A clone made while the thread works is a copy with no thread of its own; both read as
    /// written and drop on their own.
    #[test]
    fn a_clone_while_filling_is_a_copy_without_a_thread() {
        let mut p = Prefaulted::<u32>::new(BIG / 4);
        p[3] = 9;
        let mut c = p.clone();
        assert!(c.filler.is_none());
        assert_eq!(c.prefault(), Prefault::Done);
        c[4] = 10;
        assert_eq!((p[3], p[4], c[3], c[4]), (9, 0, 9, 10));
        drop(p);
        assert_eq!(c.iter().filter(|&&v| v != 0).count(), 2);
        let small = Prefaulted::<u32>::new(10);
        assert_eq!(small.clone().prefault(), Prefault::Skipped);
    }
}
