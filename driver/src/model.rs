//! The `ModelHandle` backend: the firmware-sim device in this process.
//!
//! The device sits behind an `Arc<Mutex<_>>` so that traffic can run through it from another
//! thread (or the `nlb-sim` server) while the driver loads tables: every register access, or
//! every batch, takes the lock once, so packets interleave with the driver's accesses at
//! register granularity, as they do on hardware.

use crate::device::{Device, DeviceError, RegOp};
use firmware_sim::{ModelDevice, RegError};
use nlb_hw::Profile;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Register operations done under one lock by [`ModelHandle::run_batch`].
const OPS_PER_LOCK: usize = 256;

/// A shared simulated device.
pub type SharedModel = Arc<Mutex<ModelDevice>>;

/// The in-process simulated NIC.
#[derive(Debug, Clone)]
pub struct ModelHandle {
    dev: SharedModel,
    name: String,
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
        reg_read(&mut lock(&self.dev), offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        reg_write(&mut lock(&self.dev), offset, value)
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        // Release the lock now and then so traffic from another thread interleaves with a
        // long batch, as it would on hardware.
        for chunk in ops.chunks(OPS_PER_LOCK) {
            reg_batch(&mut lock(&self.dev), chunk, reads)?;
        }
        Ok(())
    }

    /// The model completes every packet within one call, so packets need no time; `d` of
    /// simulated time passes for the flash chip (erase and program durations, reboots). Then
    /// yield so that a traffic thread gets the lock.
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        lock(&self.dev).advance(d);
        std::thread::yield_now();
        Ok(())
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
