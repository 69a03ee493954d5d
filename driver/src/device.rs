//! The `Device` trait: register access to an nlb-offload NIC, whatever it is made of.
//!
//! The same loader, conntrack manager, flash programmer and slow path run against every
//! backend: VFIO hardware, the in-process golden model, a remote `nlb-sim` over a Unix socket,
//! and the Verilator RTL. Everything the host does goes through 32-bit register accesses at
//! byte offsets of BAR 0, as `docs/regmap.md` defines them; the punt/learn/inject queues are
//! register blocks too, so backends only implement the primitives below.

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
    /// A wait ran out.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
}

/// Register access to one device.
pub trait Device: Send {
    /// Reads the 32-bit register at byte `offset`.
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError>;

    /// Writes the 32-bit register at byte `offset`.
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError>;

    /// Reads a 64-bit value from two consecutive registers (low word first).
    fn read64(&mut self, offset: u32) -> Result<u64, DeviceError> {
        let lo = self.read32(offset)?;
        let hi = self.read32(offset + 4)?;
        Ok(u64::from(lo) | (u64::from(hi) << 32))
    }

    /// Writes a 64-bit value to two consecutive registers (low word first).
    fn write64(&mut self, offset: u32, value: u64) -> Result<(), DeviceError> {
        self.write32(offset, value as u32)?;
        self.write32(offset + 4, (value >> 32) as u32)
    }

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

    /// Lets time pass for the device: simulated devices advance their clock (and process
    /// pending traffic) by `d`; hardware backends sleep or wait for an interrupt up to `d`.
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        std::thread::sleep(d);
        Ok(())
    }

    /// A short description for logs and errors (`pci:0000:03:00.0`, `sim:/run/nlb.sock`).
    fn describe(&self) -> String;
}

impl<D: Device + ?Sized> Device for Box<D> {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        (**self).read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        (**self).write32(offset, value)
    }
    fn read64(&mut self, offset: u32) -> Result<u64, DeviceError> {
        (**self).read64(offset)
    }
    fn write64(&mut self, offset: u32, value: u64) -> Result<(), DeviceError> {
        (**self).write64(offset, value)
    }
    fn write_bulk(&mut self, offset: u32, words: &[u32]) -> Result<(), DeviceError> {
        (**self).write_bulk(offset, words)
    }
    fn read_bulk(&mut self, offset: u32, out: &mut [u32]) -> Result<(), DeviceError> {
        (**self).read_bulk(offset, out)
    }
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        (**self).wait(d)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
