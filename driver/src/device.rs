//! The `Device` trait: register access to an nlb-offload NIC, whatever it is made of.
//!
//! The same loader, conntrack manager, flash programmer and slow path run against every
//! backend: VFIO hardware, the in-process golden model, a remote `nlb-sim` over a Unix socket,
//! and the Verilator RTL. Everything the host does goes through 32-bit register accesses at
//! byte offsets of BAR 0, as `docs/regmap.md` defines them; the punt/learn/inject queues are
//! register blocks too, so backends only implement the primitives below.

use crate::dma::{DmaRegion, IrqLine};
use crate::pcie::PcieStats;
use std::time::Duration;

/// Why a register access failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// Offset outside the device's register space or not 4-byte aligned.
    #[error("register offset {offset:#x} is invalid: {why}")]
    BadOffset {
        /// The offset.
        offset: u32,
        /// Why.
        why: &'static str,
    },
    /// The transport to the device failed (socket closed, VFIO region I/O error, ...).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The device answered something the protocol does not allow.
    #[error("device protocol error: {0}")]
    Protocol(String),
    /// The backend cannot do this (DMA on a backend without host memory access).
    #[error("{what} is not supported by {device}")]
    Unsupported {
        /// What was asked.
        what: &'static str,
        /// The backend.
        device: String,
    },
    /// A wait ran out.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
}

/// One register access of a batch ([`Device::run_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegOp {
    /// Read the 32-bit register at this byte offset.
    Read(u32),
    /// Write (offset, value).
    Write(u32, u32),
}

/// A reusable list of register operations, built up and then run with [`Batch::run`].
///
/// Keeping one `Batch` and clearing it between uses avoids an allocation per operation.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    ops: Vec<RegOp>,
    reads: Vec<u32>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Queues a read of the register at `offset`.
    pub fn read(&mut self, offset: u32) -> &mut Self {
        self.ops.push(RegOp::Read(offset));
        self
    }

    /// Queues reads of `count` consecutive registers from `offset`.
    pub fn read_words(&mut self, offset: u32, count: u32) -> &mut Self {
        self.ops
            .extend((0..count).map(|i| RegOp::Read(offset + 4 * i)));
        self
    }

    /// Queues a write.
    pub fn write(&mut self, offset: u32, value: u32) -> &mut Self {
        self.ops.push(RegOp::Write(offset, value));
        self
    }

    /// Queues writes of consecutive registers from `offset`.
    pub fn write_words(&mut self, offset: u32, words: &[u32]) -> &mut Self {
        self.ops.extend(
            words
                .iter()
                .enumerate()
                .map(|(i, w)| RegOp::Write(offset + 4 * i as u32, *w)),
        );
        self
    }

    /// The queued operations.
    pub fn ops(&self) -> &[RegOp] {
        &self.ops
    }

    /// Number of queued operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Queued writes (what a register-write count reports).
    pub fn writes(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| matches!(op, RegOp::Write(..)))
            .count()
    }

    /// Runs the queued operations on `dev` and empties the queue. Returns the values read, in
    /// order; they stay valid until the next `run`.
    pub fn run<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<&[u32], DeviceError> {
        self.reads.clear();
        let result = dev.run_batch(&self.ops, &mut self.reads);
        self.ops.clear();
        result.map(|()| self.reads.as_slice())
    }

    /// Drops the queued operations without running them.
    pub fn clear(&mut self) {
        self.ops.clear();
    }
}

/// Register access to one device.
pub trait Device: Send {
    /// Reads the 32-bit register at byte `offset`.
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError>;

    /// Writes the 32-bit register at byte `offset`.
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError>;

    /// Writes consecutive registers starting at `offset`. Backends with a cheaper path
    /// (one socket message, one mmap copy) override this.
    fn write_bulk(&mut self, offset: u32, words: &[u32]) -> Result<(), DeviceError> {
        for (i, w) in words.iter().enumerate() {
            self.write32(offset + 4 * i as u32, *w)?;
        }
        Ok(())
    }

    /// Reads `out.len()` consecutive registers starting at `offset`.
    fn read_bulk(&mut self, offset: u32, out: &mut [u32]) -> Result<(), DeviceError> {
        for (i, w) in out.iter_mut().enumerate() {
            *w = self.read32(offset + 4 * i as u32)?;
        }
        Ok(())
    }

    /// Executes `ops` in order, appending the value of every [`RegOp::Read`] to `reads`.
    ///
    /// Stops at the first failing operation (the ones before it have taken effect). Backends
    /// with a transport override this to send the whole batch at once (one socket message);
    /// the loader and the conntrack manager build their register traffic as batches.
    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        for op in ops {
            match *op {
                RegOp::Read(offset) => reads.push(self.read32(offset)?),
                RegOp::Write(offset, value) => self.write32(offset, value)?,
            }
        }
        Ok(())
    }

    /// Lets time pass for the device: simulated devices advance their clock (and process
    /// pending traffic) by `d`; hardware backends sleep or wait for an interrupt up to `d`.
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        std::thread::sleep(d);
        Ok(())
    }

    /// A short description for logs and errors (`pci:0000:03:00.0`, `sim:/run/nlb.sock`).
    fn describe(&self) -> String;

    /// Maps host memory for the device's DMA at the region's IOVA: VFIO maps it into the
    /// container's IOMMU; a simulated device's DMA engine reaches it directly (in process) or
    /// through shared memory (`nlb-sim`). Until then every DMA of the device faults.
    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        let _ = region;
        Err(DeviceError::Unsupported {
            what: "DMA",
            device: self.describe(),
        })
    }

    /// Unmaps a region [`Device::dma_map`] mapped (the device must no longer use it).
    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        let _ = region;
        Ok(())
    }

    /// Connects MSI-X vector i to `lines[i]` (`nlb_hw::enums::Ring` values are the vectors).
    /// Without it the host polls the rings' write-back records in host memory.
    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        let _ = lines;
        Ok(())
    }

    /// What this handle saw on the PCIe cost model (docs/pcie.md): register accesses counted
    /// here, the device's DMA where the backend sees it.
    fn pcie(&mut self) -> PcieStats {
        PcieStats::default()
    }

    /// Register reads and writes this handle made so far (cheap, local: for attributing
    /// them to the work that made them).
    fn mmio_seen(&self) -> (u64, u64) {
        (0, 0)
    }

    /// The host rings this handle drives (a `HostRings`, as `Any` so that this trait does not
    /// depend on the rings' module), with the device under them: the loader and the
    /// connection manager move their entries through the command ring when there is one.
    /// Take them typed with `rings::split`.
    fn split_rings(&mut self) -> Option<(&mut dyn Device, &mut dyn std::any::Any)> {
        None
    }
}

impl<D: Device + ?Sized> Device for Box<D> {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        (**self).read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        (**self).write32(offset, value)
    }
    fn write_bulk(&mut self, offset: u32, words: &[u32]) -> Result<(), DeviceError> {
        (**self).write_bulk(offset, words)
    }
    fn read_bulk(&mut self, offset: u32, out: &mut [u32]) -> Result<(), DeviceError> {
        (**self).read_bulk(offset, out)
    }
    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        (**self).run_batch(ops, reads)
    }
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        (**self).wait(d)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        (**self).dma_map(region)
    }
    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        (**self).dma_unmap(region)
    }
    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        (**self).set_interrupts(lines)
    }
    fn pcie(&mut self) -> PcieStats {
        (**self).pcie()
    }
    fn mmio_seen(&self) -> (u64, u64) {
        (**self).mmio_seen()
    }
    fn split_rings(&mut self) -> Option<(&mut dyn Device, &mut dyn std::any::Any)> {
        (**self).split_rings()
    }
}
