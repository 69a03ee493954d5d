//! Fault injection over a real device: [`CutAfter`] lets a budget of register accesses
//! through and then fails every access, which is what the device sees of a driver process
//! killed at that point (nothing after it reaches the device). Used by the tests that kill a
//! load at many cut points, and usable against any backend.

use crate::device::{Device, DeviceError, RegOp};
use std::time::Duration;

/// A device whose accesses fail once `budget` of them have gone through.
#[derive(Debug)]
pub struct CutAfter<D> {
    inner: D,
    budget: u64,
    used: u64,
}

impl<D: Device> CutAfter<D> {
    /// Lets `budget` accesses reach `inner`.
    pub fn new(inner: D, budget: u64) -> CutAfter<D> {
        CutAfter {
            inner,
            budget,
            used: 0,
        }
    }

    /// Accesses that reached the device.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The device behind.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn cut(&self) -> DeviceError {
        DeviceError::Io {
            what: format!("access {} to {}", self.used + 1, self.inner.describe()),
            source: std::io::Error::new(std::io::ErrorKind::BrokenPipe, "cut (fault injection)"),
        }
    }

    fn take(&mut self) -> Result<(), DeviceError> {
        if self.used >= self.budget {
            return Err(self.cut());
        }
        self.used += 1;
        Ok(())
    }
}

impl<D: Device> Device for CutAfter<D> {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.take()?;
        self.inner.read32(offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.take()?;
        self.inner.write32(offset, value)
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        let left = self.budget.saturating_sub(self.used);
        let allowed = ops.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        // The part before the cut reaches the device as one batch, as it would have.
        self.inner.run_batch(&ops[..allowed], reads)?;
        self.used += allowed as u64;
        if allowed < ops.len() {
            return Err(self.cut());
        }
        Ok(())
    }

    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        self.inner.wait(d)
    }

    fn describe(&self) -> String {
        format!(
            "{} (cut after {} accesses)",
            self.inner.describe(),
            self.budget
        )
    }
}
