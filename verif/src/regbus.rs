//! 32-bit register access to a model's AXI-Lite port, for models that have nothing else
//! going on (the register file on its own); every access runs the clock with random timing.

use crate::axil::AxiLiteMaster;
use crate::bench::Bench;
use crate::error::VerifError;

/// A bench plus an AXI-Lite master on its `s_axil` port.
#[derive(Debug)]
pub struct RegBus {
    /// The bench (model and generator).
    pub bench: Bench,
    /// The master.
    pub master: AxiLiteMaster,
}

impl RegBus {
    /// A bus on `bench`'s `s_axil` port with the given channel timing.
    pub fn new(bench: Bench, idle: f64, backpressure: f64) -> Result<RegBus, VerifError> {
        let master = AxiLiteMaster::new(&bench.sim, "s_axil", idle, backpressure)?;
        Ok(RegBus { bench, master })
    }

    /// Reads the register at byte `offset`.
    pub fn read32(&mut self, offset: u32) -> Result<u32, VerifError> {
        self.master.read(&mut self.bench, &mut [], offset)
    }

    /// Writes the register at byte `offset`.
    pub fn write32(&mut self, offset: u32, value: u32) -> Result<(), VerifError> {
        self.master.write(&mut self.bench, &mut [], offset, value)
    }

    /// Writes the register at byte `offset` with byte strobes (bit i = byte i).
    pub fn write32_strb(&mut self, offset: u32, value: u32, strb: u32) -> Result<(), VerifError> {
        self.master
            .write_strb(&mut self.bench, &mut [], offset, value, strb)
    }

    /// Writes consecutive registers.
    pub fn write_bulk(&mut self, offset: u32, words: &[u32]) -> Result<(), VerifError> {
        for (i, w) in words.iter().enumerate() {
            self.write32(offset + 4 * i as u32, *w)?;
        }
        Ok(())
    }

    /// Reads consecutive registers.
    pub fn read_bulk(&mut self, offset: u32, out: &mut [u32]) -> Result<(), VerifError> {
        for (i, w) in out.iter_mut().enumerate() {
            *w = self.read32(offset + 4 * i as u32)?;
        }
        Ok(())
    }

    /// Clocks with no transaction.
    pub fn idle(&mut self, cycles: u64) -> Result<(), VerifError> {
        for _ in 0..cycles {
            self.bench.step(&mut [&mut self.master])?;
        }
        Ok(())
    }
}
