//! 32-bit register access to a model's AXI-Lite port, for models that have nothing else
//! going on (the register file on its own); every access runs the clock with random timing.
//! The register file's Maglev commands go to a memory stage outside it (`mg_c_*`): the bus
//! can play that stage ([`SlotMemory`]).

use crate::axil::AxiLiteMaster;
use crate::bench::{Agent, Bench};
use crate::error::VerifError;
use crate::verilated::{Port, Verilated};
use rand::rngs::StdRng;
use rand::RngExt;
use std::collections::BTreeMap;

/// The Maglev slots behind `nlb_regs`' `mg_c_*` ports, as the lookup's Maglev stage answers
/// them: a write is stored and acknowledged, a read answered with the stored slot (0 when never
/// written), each after 1-20 clocks.
#[derive(Debug)]
pub struct SlotMemory {
    wr_req: Port,
    wr_bank: Port,
    wr_index: Port,
    wr_slot: Port,
    wr_ack: Port,
    rd_req: Port,
    rd_bank: Port,
    rd_index: Port,
    rd_ack: Port,
    rd_slot: Port,
    /// (bank, slot index) -> backend id.
    pub slots: BTreeMap<(u8, u32), u16>,
    wr_wait: Option<u32>,
    rd_wait: Option<(u32, u16)>,
}

impl SlotMemory {
    /// On the model's `mg_c_*` ports.
    pub fn new(sim: &Verilated) -> Result<SlotMemory, VerifError> {
        Ok(SlotMemory {
            wr_req: sim.port("mg_c_wr_req")?,
            wr_bank: sim.port("mg_c_wr_bank")?,
            wr_index: sim.port("mg_c_wr_index")?,
            wr_slot: sim.port("mg_c_wr_slot")?,
            wr_ack: sim.port("mg_c_wr_ack")?,
            rd_req: sim.port("mg_c_rd_req")?,
            rd_bank: sim.port("mg_c_rd_bank")?,
            rd_index: sim.port("mg_c_rd_index")?,
            rd_ack: sim.port("mg_c_rd_ack")?,
            rd_slot: sim.port("mg_c_rd_slot")?,
            slots: BTreeMap::new(),
            wr_wait: None,
            rd_wait: None,
        })
    }
}

impl Agent for SlotMemory {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        let wr_done = self.wr_wait == Some(0);
        let rd_done = matches!(self.rd_wait, Some((0, _)));
        sim.set_bit(self.wr_ack, wr_done)?;
        sim.set_bit(self.rd_ack, rd_done)?;
        let slot = match self.rd_wait {
            Some((0, s)) => s,
            _ => rng.random(),
        };
        sim.set_u64(self.rd_slot, u64::from(slot))?;
        self.wr_wait = self.wr_wait.and_then(|n| n.checked_sub(1));
        self.rd_wait = self
            .rd_wait
            .and_then(|(n, s)| n.checked_sub(1).map(|n| (n, s)));
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let delay = 1 + (sim.cycle() * 7 % 20) as u32;
        if sim.get_bit(self.wr_req)? {
            let bank = sim.get_u64(self.wr_bank)? as u8;
            let index = sim.get_u64(self.wr_index)? as u32;
            let slot = sim.get_u64(self.wr_slot)? as u16;
            self.slots.insert((bank, index), slot);
            self.wr_wait = Some(delay);
        }
        if sim.get_bit(self.rd_req)? {
            let bank = sim.get_u64(self.rd_bank)? as u8;
            let index = sim.get_u64(self.rd_index)? as u32;
            let slot = self.slots.get(&(bank, index)).copied().unwrap_or(0);
            self.rd_wait = Some((delay, slot));
        }
        Ok(())
    }
}

/// A bench plus an AXI-Lite master on its `s_axil` port.
#[derive(Debug)]
pub struct RegBus {
    /// The bench (model and generator).
    pub bench: Bench,
    /// The master.
    pub master: AxiLiteMaster,
    /// The Maglev slots behind the register file, when the model has `mg_c_*` ports.
    pub slots: Option<SlotMemory>,
}

impl RegBus {
    /// A bus on `bench`'s `s_axil` port with the given channel timing (and the Maglev slots'
    /// memory stage played when the model has `mg_c_*` ports).
    pub fn new(bench: Bench, idle: f64, backpressure: f64) -> Result<RegBus, VerifError> {
        let master = AxiLiteMaster::new(&bench.sim, "s_axil", idle, backpressure)?;
        let slots = if bench.sim.has_port("mg_c_wr_req") {
            Some(SlotMemory::new(&bench.sim)?)
        } else {
            None
        };
        Ok(RegBus {
            bench,
            master,
            slots,
        })
    }

    /// Reads the register at byte `offset`.
    pub fn read32(&mut self, offset: u32) -> Result<u32, VerifError> {
        match self.slots.as_mut() {
            Some(s) => self.master.read(&mut self.bench, &mut [s], offset),
            None => self.master.read(&mut self.bench, &mut [], offset),
        }
    }

    /// Writes the register at byte `offset`.
    pub fn write32(&mut self, offset: u32, value: u32) -> Result<(), VerifError> {
        match self.slots.as_mut() {
            Some(s) => self.master.write(&mut self.bench, &mut [s], offset, value),
            None => self.master.write(&mut self.bench, &mut [], offset, value),
        }
    }

    /// Writes the register at byte `offset` with byte strobes (bit i = byte i).
    pub fn write32_strb(&mut self, offset: u32, value: u32, strb: u32) -> Result<(), VerifError> {
        match self.slots.as_mut() {
            Some(s) => self
                .master
                .write_strb(&mut self.bench, &mut [s], offset, value, strb),
            None => self
                .master
                .write_strb(&mut self.bench, &mut [], offset, value, strb),
        }
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
            match self.slots.as_mut() {
                Some(s) => self.bench.step(&mut [&mut self.master, s])?,
                None => self.bench.step(&mut [&mut self.master])?,
            }
        }
        Ok(())
    }
}
