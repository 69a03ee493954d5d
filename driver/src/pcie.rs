//! The PCIe cost model (docs/pcie.md, SPEC R12.1): what every access between the host and
//! the NIC costs on a real card, charged in simulated time by every simulated device and
//! counted by every backend.
//!
//! A register read is a non-posted round trip that stalls the CPU; uncached register writes
//! leave one at a time; DMA moves bulk data at the link's bandwidth after a latency; an IOTLB
//! miss adds to a DMA's latency; an MSI-X interrupt wakes the host. [`PcieCosts`] holds the
//! figures (with their sources in docs/pcie.md), [`PcieLedger`] counts and charges what one
//! device saw (shared, lock-free, between the host side and the device's DMA port), and
//! [`PcieStats`] is a snapshot with the derived times.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The figures of the cost model. Defaults: docs/pcie.md, with the measurement each comes
/// from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcieCosts {
    /// A register (MMIO) read from user space: the CPU stalls for the round trip.
    pub mmio_read_ns: f64,
    /// The gap between two uncached (UC) register writes leaving the CPU.
    pub mmio_write_ns: f64,
    /// One 64-byte write-combined line (one TLP).
    pub wc_line_ns: f64,
    /// DMA read latency (device reads host memory) by transfer size: (bytes, ns) points,
    /// interpolated linearly, extrapolated from the last two.
    pub dma_read_latency: [(u32, f64); 8],
    /// DMA read occupancy of the link by size: (bytes, ns per transfer) at full load.
    pub dma_read_occupancy: [(u32, f64); 6],
    /// DMA write occupancy of the link by size: (bytes, ns per transfer) at full load.
    pub dma_write_occupancy: [(u32, f64); 6],
    /// A DMA write becomes visible to the host after about half a read round trip.
    pub dma_write_latency_ns: f64,
    /// Added to a DMA's latency for every IOTLB miss.
    pub iotlb_miss_ns: f64,
    /// IOTLB entries (pages whose translation is cached).
    pub iotlb_entries: usize,
    /// From the device's MSI-X write to the waiting thread running (an assumption: no
    /// measurement found, see docs/pcie.md).
    pub msix_ns: f64,
}

impl Default for PcieCosts {
    fn default() -> Self {
        PcieCosts {
            mmio_read_ns: 2000.0,
            mmio_write_ns: 150.0,
            wc_line_ns: 150.0,
            // pcie-bench, NFP6000 Gen3 x8, Broadwell: medians of lat_dma_sizes.
            dma_read_latency: [
                (16, 546.0),
                (64, 546.0),
                (128, 573.0),
                (256, 626.0),
                (512, 706.0),
                (1024, 853.0),
                (1520, 986.0),
                (2048, 1133.0),
            ],
            // pcie-bench bw_dma_sz_sweep: 62.3, 42.7, 23.3, 13.4, 6.76, 3.39 M transfers/s.
            dma_read_occupancy: [
                (64, 16.05),
                (128, 23.42),
                (256, 42.92),
                (512, 74.63),
                (1024, 147.93),
                (2048, 294.99),
            ],
            // 47.4, 41.4, 24.7, 12.9, 6.47, 3.24 M transfers/s.
            dma_write_occupancy: [
                (64, 21.10),
                (128, 24.15),
                (256, 40.49),
                (512, 77.52),
                (1024, 154.56),
                (2048, 308.64),
            ],
            dma_write_latency_ns: 273.0,
            iotlb_miss_ns: 300.0,
            iotlb_entries: 64,
            msix_ns: 2000.0,
        }
    }
}

/// Linear interpolation over sorted (x, y) points: the first y below the first point,
/// extrapolated from the last two past the last.
fn interpolate(points: &[(u32, f64)], x: f64) -> f64 {
    let (Some(&(x_first, y_first)), n) = (points.first(), points.len()) else {
        return 0.0;
    };
    if n == 1 || x <= f64::from(x_first) {
        return y_first;
    }
    let k = points
        .windows(2)
        .position(|w| x <= f64::from(w[1].0))
        .unwrap_or(n - 2);
    let ((x0, y0), (x1, y1)) = (points[k], points[k + 1]);
    let (x0, x1) = (f64::from(x0), f64::from(x1));
    y0 + (x - x0) * (y1 - y0) / (x1 - x0)
}

/// A transfer's size as the link carries it: whole 64-byte lines (a transfer just past a
/// line boundary costs the whole next line; docs/pcie.md).
fn lines(bytes: usize) -> f64 {
    (bytes.max(1).div_ceil(64) * 64) as f64
}

impl PcieCosts {
    /// Latency of one DMA read of `bytes`.
    pub fn dma_read_latency_ns(&self, bytes: usize) -> f64 {
        interpolate(&self.dma_read_latency, lines(bytes))
    }

    /// Link occupancy of one DMA read of `bytes`.
    pub fn dma_read_ns(&self, bytes: usize) -> f64 {
        interpolate(&self.dma_read_occupancy, lines(bytes))
    }

    /// Link occupancy of one DMA write of `bytes`.
    pub fn dma_write_ns(&self, bytes: usize) -> f64 {
        interpolate(&self.dma_write_occupancy, lines(bytes))
    }
}

/// What one device saw, counted and charged as it happens. Shared between the host side
/// (register accesses) and the device's DMA port; every counter is an atomic.
#[derive(Debug, Default)]
pub struct PcieLedger {
    costs: PcieCostsCell,
    mmio_reads: AtomicU64,
    mmio_writes: AtomicU64,
    dma_reads: AtomicU64,
    dma_read_bytes: AtomicU64,
    dma_writes: AtomicU64,
    dma_write_bytes: AtomicU64,
    /// Picoseconds, so that sub-nanosecond figures add up.
    dma_read_ps: AtomicU64,
    dma_read_latency_ps: AtomicU64,
    dma_write_ps: AtomicU64,
    interrupts: AtomicU64,
    iotlb_misses: AtomicU64,
    faults: AtomicU64,
    device_cpu_ns: AtomicU64,
}

/// The costs a ledger charges (fixed at creation).
#[derive(Debug, Default)]
struct PcieCostsCell(PcieCosts);

fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round().max(0.0) as u64
}

impl PcieLedger {
    /// A ledger charging `costs`.
    pub fn new(costs: PcieCosts) -> PcieLedger {
        PcieLedger {
            costs: PcieCostsCell(costs),
            ..PcieLedger::default()
        }
    }

    /// The costs it charges.
    pub fn costs(&self) -> &PcieCosts {
        &self.costs.0
    }

    /// `n` register reads.
    pub fn mmio_reads(&self, n: u64) {
        self.mmio_reads.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` register writes.
    pub fn mmio_writes(&self, n: u64) {
        self.mmio_writes.fetch_add(n, Ordering::Relaxed);
    }

    /// One DMA read of `bytes` with `misses` IOTLB misses.
    pub fn dma_read(&self, bytes: usize, misses: u32) {
        let c = self.costs();
        self.dma_reads.fetch_add(1, Ordering::Relaxed);
        self.dma_read_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.dma_read_ps
            .fetch_add(ps(c.dma_read_ns(bytes)), Ordering::Relaxed);
        let latency = c.dma_read_latency_ns(bytes) + f64::from(misses) * c.iotlb_miss_ns;
        self.dma_read_latency_ps
            .fetch_add(ps(latency), Ordering::Relaxed);
        self.iotlb_misses
            .fetch_add(u64::from(misses), Ordering::Relaxed);
    }

    /// One DMA write of `bytes` with `misses` IOTLB misses.
    pub fn dma_write(&self, bytes: usize, misses: u32) {
        let c = self.costs();
        self.dma_writes.fetch_add(1, Ordering::Relaxed);
        self.dma_write_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.dma_write_ps
            .fetch_add(ps(c.dma_write_ns(bytes)), Ordering::Relaxed);
        self.iotlb_misses
            .fetch_add(u64::from(misses), Ordering::Relaxed);
    }

    /// One MSI-X interrupt.
    pub fn interrupt(&self) {
        self.interrupts.fetch_add(1, Ordering::Relaxed);
    }

    /// A DMA the IOMMU refused.
    pub fn fault(&self) {
        self.faults.fetch_add(1, Ordering::Relaxed);
    }

    /// CPU time the simulated device spent inside a host call (its own work, not the
    /// host's: benchmarks take it out of the host's CPU time).
    pub fn device_cpu(&self, d: Duration) {
        self.device_cpu_ns.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Adds counts another ledger gathered (a remote device's DMA side).
    pub fn absorb(&self, s: &PcieStats) {
        let add = |a: &AtomicU64, v: u64| {
            a.fetch_add(v, Ordering::Relaxed);
        };
        add(&self.dma_reads, s.dma_reads);
        add(&self.dma_read_bytes, s.dma_read_bytes);
        add(&self.dma_writes, s.dma_writes);
        add(&self.dma_write_bytes, s.dma_write_bytes);
        add(&self.dma_read_ps, ps(s.dma_read_ns));
        add(&self.dma_read_latency_ps, ps(s.dma_read_latency_ns));
        add(&self.dma_write_ps, ps(s.dma_write_ns));
        add(&self.interrupts, s.interrupts);
        add(&self.iotlb_misses, s.iotlb_misses);
        add(&self.faults, s.faults);
        add(&self.device_cpu_ns, s.device_cpu_ns);
        add(&self.mmio_reads, s.mmio_reads);
        add(&self.mmio_writes, s.mmio_writes);
    }

    /// A snapshot.
    pub fn stats(&self) -> PcieStats {
        let c = self.costs();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mmio_reads = get(&self.mmio_reads);
        let mmio_writes = get(&self.mmio_writes);
        let interrupts = get(&self.interrupts);
        PcieStats {
            mmio_reads,
            mmio_writes,
            dma_reads: get(&self.dma_reads),
            dma_read_bytes: get(&self.dma_read_bytes),
            dma_writes: get(&self.dma_writes),
            dma_write_bytes: get(&self.dma_write_bytes),
            interrupts,
            iotlb_misses: get(&self.iotlb_misses),
            faults: get(&self.faults),
            device_cpu_ns: get(&self.device_cpu_ns),
            mmio_stall_ns: mmio_reads as f64 * c.mmio_read_ns
                + mmio_writes as f64 * c.mmio_write_ns,
            dma_read_ns: get(&self.dma_read_ps) as f64 / 1000.0,
            dma_read_latency_ns: get(&self.dma_read_latency_ps) as f64 / 1000.0,
            dma_write_ns: get(&self.dma_write_ps) as f64 / 1000.0,
            interrupt_ns: interrupts as f64 * c.msix_ns,
        }
    }
}

/// CPU time of every thread of this process (what a host spends on work it spreads over
/// threads, such as decoding a whole connection table).
pub fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The part of [`process_cpu`] spent in the kernel, every thread's (`getrusage`): the
/// faults that bring in new memory and the kernel's zeroing of it show here (zero if it
/// cannot be read).
pub fn process_kernel_cpu() -> Duration {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into the valid, exclusively borrowed `ru`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ru.ru_stime.tv_sec as u64, ru.ru_stime.tv_usec as u32 * 1000)
}

/// CPU time of the calling thread (what benchmarks and the simulated devices' own work are
/// measured in: wall time on a shared machine mostly measures the other tenants).
pub fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A CPU-time clock's reading (zero if it cannot be read).
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What a device saw, with the cost model's times. `since` gives the difference of two
/// snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PcieStats {
    /// Register reads.
    pub mmio_reads: u64,
    /// Register writes (doorbells included).
    pub mmio_writes: u64,
    /// DMA reads (the device read host memory).
    pub dma_reads: u64,
    /// Bytes of them.
    pub dma_read_bytes: u64,
    /// DMA writes.
    pub dma_writes: u64,
    /// Bytes of them.
    pub dma_write_bytes: u64,
    /// MSI-X interrupts.
    pub interrupts: u64,
    /// IOTLB misses of the DMAs.
    pub iotlb_misses: u64,
    /// DMAs the IOMMU refused.
    pub faults: u64,
    /// CPU time the simulated device spent on the host's thread (its own work).
    pub device_cpu_ns: u64,
    /// Host CPU stalled on register accesses.
    pub mmio_stall_ns: f64,
    /// Link occupied by DMA reads (host to device).
    pub dma_read_ns: f64,
    /// Sum of the DMA reads' latencies (IOTLB misses included).
    pub dma_read_latency_ns: f64,
    /// Link occupied by DMA writes (device to host).
    pub dma_write_ns: f64,
    /// Interrupt delivery.
    pub interrupt_ns: f64,
}

impl PcieStats {
    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &PcieStats) -> PcieStats {
        PcieStats {
            mmio_reads: self.mmio_reads.saturating_sub(earlier.mmio_reads),
            mmio_writes: self.mmio_writes.saturating_sub(earlier.mmio_writes),
            dma_reads: self.dma_reads.saturating_sub(earlier.dma_reads),
            dma_read_bytes: self.dma_read_bytes.saturating_sub(earlier.dma_read_bytes),
            dma_writes: self.dma_writes.saturating_sub(earlier.dma_writes),
            dma_write_bytes: self.dma_write_bytes.saturating_sub(earlier.dma_write_bytes),
            interrupts: self.interrupts.saturating_sub(earlier.interrupts),
            iotlb_misses: self.iotlb_misses.saturating_sub(earlier.iotlb_misses),
            faults: self.faults.saturating_sub(earlier.faults),
            device_cpu_ns: self.device_cpu_ns.saturating_sub(earlier.device_cpu_ns),
            mmio_stall_ns: (self.mmio_stall_ns - earlier.mmio_stall_ns).max(0.0),
            dma_read_ns: (self.dma_read_ns - earlier.dma_read_ns).max(0.0),
            dma_read_latency_ns: (self.dma_read_latency_ns - earlier.dma_read_latency_ns).max(0.0),
            dma_write_ns: (self.dma_write_ns - earlier.dma_write_ns).max(0.0),
            interrupt_ns: (self.interrupt_ns - earlier.interrupt_ns).max(0.0),
        }
    }

    /// The link's busier direction: the least time the DMA of this work takes on one link.
    pub fn link_ns(&self) -> f64 {
        self.dma_read_ns.max(self.dma_write_ns)
    }

    /// Time of a synchronous operation on the cost model, given the host CPU it took (the
    /// simulated device's own work already taken out): host CPU + register stalls + every
    /// DMA's latency and link time in sequence + interrupt delivery. Conservative: nothing
    /// overlaps.
    pub fn serial_ns(&self, host_cpu_ns: f64) -> f64 {
        host_cpu_ns
            + self.mmio_stall_ns
            + self.dma_read_latency_ns
            + self.dma_read_ns
            + self.dma_write_ns
            + self.interrupt_ns
    }

    /// Per-item time of a stream on the cost model (items flow through a pipeline: the
    /// slower of the host, CPU plus register stalls, and the link bounds the rate).
    pub fn stream_ns_per_item(&self, host_cpu_ns: f64, items: u64) -> f64 {
        let n = items.max(1) as f64;
        ((host_cpu_ns + self.mmio_stall_ns + self.interrupt_ns) / n).max(self.link_ns() / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_follow_the_measurements() {
        let c = PcieCosts::default();
        // At the measured sizes the model gives the measured figure.
        assert_eq!(c.dma_read_latency_ns(64), 546.0);
        assert_eq!(c.dma_read_latency_ns(1024), 853.0);
        assert_eq!(c.dma_read_ns(512), 74.63);
        assert_eq!(c.dma_write_ns(64), 21.10);
        // 65 bytes cost two lines (pcie-bench: 64 B → 31.9 Gb/s, 65 B → 21.9 Gb/s).
        assert!(c.dma_read_ns(65) > c.dma_read_ns(64));
        assert_eq!(c.dma_read_ns(65), c.dma_read_ns(128));
        // Small transfers: no less than a line.
        assert_eq!(c.dma_read_ns(4), c.dma_read_ns(64));
        // Past the table: extrapolated, growing.
        assert!(c.dma_write_ns(9728) > 4.0 * c.dma_write_ns(2048));
    }

    #[test]
    fn a_ledger_charges_what_it_counts() {
        let l = PcieLedger::new(PcieCosts::default());
        l.mmio_reads(3);
        l.mmio_writes(10);
        l.dma_read(64, 1);
        l.dma_write(64, 0);
        l.interrupt();
        let s = l.stats();
        assert_eq!(
            (s.mmio_reads, s.mmio_writes, s.dma_reads, s.dma_writes),
            (3, 10, 1, 1)
        );
        assert_eq!(s.mmio_stall_ns, 3.0 * 2000.0 + 10.0 * 150.0);
        assert_eq!(s.dma_read_latency_ns, 546.0 + 300.0);
        assert_eq!(s.iotlb_misses, 1);
        let later = l.stats();
        assert_eq!(later.since(&s), PcieStats::default());
    }
}
