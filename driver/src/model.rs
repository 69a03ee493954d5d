//! The `ModelHandle` backend: the firmware-sim device in this process.
//!
//! The device sits behind an `Arc<Mutex<_>>` so that traffic can run through it from another
//! thread (or the `nlb-sim` server) while the driver loads tables: every register access, or
//! every batch, takes the lock once, so packets interleave with the driver's accesses at
//! register granularity, as they do on hardware.

use crate::device::{Device, DeviceError, RegOp};
use crate::dma::{DmaRegion, HostPort, IrqLine};
use crate::pcie::{thread_cpu, PcieCosts, PcieLedger, PcieStats};
use firmware_sim::{ModelDevice, RegError};
use nlb_hw::blocks::dma as dma_regs;
use nlb_hw::Profile;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Register operations done under one lock by [`ModelHandle::run_batch`].
const OPS_PER_LOCK: usize = 256;

/// A shared simulated device.
pub type SharedModel = Arc<Mutex<ModelDevice>>;

/// The in-process simulated NIC. Every register access is counted and charged on the PCIe
/// cost model, and the device's DMA into the host memory mapped for it (its [`HostPort`]) is
/// charged to the same ledger.
#[derive(Debug, Clone)]
pub struct ModelHandle {
    dev: SharedModel,
    name: String,
    ledger: Arc<PcieLedger>,
}

impl ModelHandle {
    /// A fresh device of a profile (after reset: empty banks, pipeline disabled).
    pub fn new(profile: &'static Profile) -> ModelHandle {
        ModelHandle::from_device(ModelDevice::new(profile))
    }

    /// Wraps an existing device.
    pub fn from_device(dev: ModelDevice) -> ModelHandle {
        ModelHandle::from_shared(Arc::new(Mutex::new(dev)))
    }

    /// Another handle on a shared device.
    pub fn from_shared(dev: SharedModel) -> ModelHandle {
        ModelHandle {
            dev,
            name: "sim:in-process".into(),
            ledger: Arc::new(PcieLedger::new(PcieCosts::default())),
        }
    }

    /// The ledger this handle charges (shared by its clones and the device's host port).
    pub fn ledger(&self) -> &Arc<PcieLedger> {
        &self.ledger
    }

    /// Runs `f` on the device's host port, creating it (charging this handle's ledger) on
    /// first use.
    fn with_port<R>(&self, f: impl FnOnce(&mut HostPort) -> R) -> R {
        let mut dev = lock(&self.dev);
        let has_ours = dev
            .dma_port_mut()
            .is_some_and(|p| p.as_any_mut().is::<HostPort>());
        if !has_ours {
            dev.set_dma_port(Some(Box::new(HostPort::new(self.ledger.clone()))));
        }
        let port = dev
            .dma_port_mut()
            .and_then(|p| p.as_any_mut().downcast_mut::<HostPort>());
        match port {
            Some(p) => f(p),
            // Just installed: always there.
            None => f(&mut HostPort::new(self.ledger.clone())),
        }
    }

    /// The shared device, for a traffic thread or a server.
    pub fn shared(&self) -> SharedModel {
        self.dev.clone()
    }

    /// Locks the device (for back-door inspection in tests and tools).
    pub fn lock(&self) -> MutexGuard<'_, ModelDevice> {
        lock(&self.dev)
    }
}

/// Locks a shared device; a panic in another holder does not make the model unusable (every
/// register operation leaves it consistent), so poisoning is ignored.
pub fn lock(dev: &SharedModel) -> MutexGuard<'_, ModelDevice> {
    dev.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a register write may run device work on the host's thread (a doorbell of the
/// inject or command ring).
fn doorbell(offset: u32) -> bool {
    offset == dma_regs::INJECT_HOST || offset == dma_regs::CMD_HOST
}

/// Register access on a locked device, with the driver's error type.
pub fn reg_read(dev: &mut ModelDevice, offset: u32) -> Result<u32, DeviceError> {
    dev.read32(offset).map_err(|e| reg_error(offset, e))
}

/// Register write on a locked device, with the driver's error type.
pub fn reg_write(dev: &mut ModelDevice, offset: u32, value: u32) -> Result<(), DeviceError> {
    dev.write32(offset, value).map_err(|e| reg_error(offset, e))
}

/// A batch on a locked device.
pub fn reg_batch(
    dev: &mut ModelDevice,
    ops: &[RegOp],
    reads: &mut Vec<u32>,
) -> Result<(), DeviceError> {
    for op in ops {
        match *op {
            RegOp::Read(offset) => reads.push(reg_read(dev, offset)?),
            RegOp::Write(offset, value) => reg_write(dev, offset, value)?,
        }
    }
    Ok(())
}

fn reg_error(offset: u32, e: RegError) -> DeviceError {
    DeviceError::BadOffset {
        offset,
        why: match e {
            RegError::Unaligned { .. } => "not 4-byte aligned",
            RegError::OutOfRange { .. } => "beyond BAR 0",
        },
    }
}

impl Device for ModelHandle {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.ledger.mmio_reads(1);
        reg_read(&mut lock(&self.dev), offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.ledger.mmio_writes(1);
        if doorbell(offset) {
            let t = thread_cpu();
            let r = reg_write(&mut lock(&self.dev), offset, value);
            self.ledger.device_cpu(thread_cpu().saturating_sub(t));
            return r;
        }
        reg_write(&mut lock(&self.dev), offset, value)
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        let n_reads = ops.iter().filter(|o| matches!(o, RegOp::Read(_))).count() as u64;
        self.ledger.mmio_reads(n_reads);
        self.ledger.mmio_writes(ops.len() as u64 - n_reads);
        let rings = ops
            .iter()
            .any(|o| matches!(o, RegOp::Write(off, _) if doorbell(*off)));
        let t = rings.then(thread_cpu);
        // Release the lock now and then so traffic from another thread interleaves with a
        // long batch, as it would on hardware.
        for chunk in ops.chunks(OPS_PER_LOCK) {
            reg_batch(&mut lock(&self.dev), chunk, reads)?;
        }
        if let Some(t) = t {
            self.ledger.device_cpu(thread_cpu().saturating_sub(t));
        }
        Ok(())
    }

    /// The model completes every packet within one call, so packets need no time; `d` of
    /// simulated time passes for the flash chip (erase and program durations, reboots) and
    /// the interrupt timers. Then yield so that a traffic thread gets the lock.
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        lock(&self.dev).advance(d);
        std::thread::yield_now();
        Ok(())
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.with_port(|p| p.map(region));
        Ok(())
    }

    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.with_port(|p| p.unmap(region.iova()));
        Ok(())
    }

    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        self.with_port(|p| p.set_interrupts(lines));
        Ok(())
    }

    fn mmio_seen(&self) -> (u64, u64) {
        let s = self.ledger.stats();
        (s.mmio_reads, s.mmio_writes)
    }

    fn pcie(&mut self) -> PcieStats {
        self.ledger.stats()
    }
}
