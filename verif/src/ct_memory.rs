//! The connection table's memory as `nlb_conntrack` sees it when it stands alone: its command
//! port (`ct_c_wr_*`, `ct_c_rd_*`: one write or read at a time, answered by an ack) played by
//! a table of entries. Inside `nlb_top` the lookup's connection-table memory stage answers
//! that port (docs/pipeline.md section 14); the block benches put this agent there instead.

use crate::bench::Agent;
use crate::{Port, VerifError, Verilated};
use nlb_hw::ct_words::unpack_ct;
use nlb_hw::layouts::CtEntry;
use rand::rngs::StdRng;
use rand::RngExt;

/// The table behind `nlb_conntrack`'s command port.
#[derive(Debug)]
pub struct CtMemory {
    wr_req: Port,
    wr_index: Port,
    wr_entry: Port,
    wr_ack: Port,
    rd_req: Port,
    rd_index: Port,
    rd_ack: Port,
    rd_entry: Port,
    /// The table as the block wrote it.
    pub entries: Vec<CtEntry>,
    /// A write or read being answered: clocks left, and the entry a read returns.
    wr_wait: Option<u32>,
    rd_wait: Option<(u32, CtEntry)>,
    /// The first write or read of an entry past the table, if any.
    pub error: Option<String>,
    /// Commands answered: reads of a valid entry.
    pub valid_reads: u64,
}

impl CtMemory {
    /// The memory of `entries` empty entries on the model's `ct_c_*` ports.
    pub fn new(sim: &Verilated, entries: usize) -> Result<CtMemory, VerifError> {
        Ok(CtMemory {
            wr_req: sim.port("ct_c_wr_req")?,
            wr_index: sim.port("ct_c_wr_index")?,
            wr_entry: sim.port("ct_c_wr_entry")?,
            wr_ack: sim.port("ct_c_wr_ack")?,
            rd_req: sim.port("ct_c_rd_req")?,
            rd_index: sim.port("ct_c_rd_index")?,
            rd_ack: sim.port("ct_c_rd_ack")?,
            rd_entry: sim.port("ct_c_rd_entry")?,
            entries: vec![CtEntry::default(); entries],
            wr_wait: None,
            rd_wait: None,
            error: None,
            valid_reads: 0,
        })
    }
}

impl Agent for CtMemory {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        // An ack when the wait runs out, with a read's entry; random words otherwise.
        let wr_done = self.wr_wait == Some(0);
        let rd_done = matches!(self.rd_wait, Some((0, _)));
        sim.set_bit(self.wr_ack, wr_done)?;
        sim.set_bit(self.rd_ack, rd_done)?;
        let words: Vec<u32> = match self.rd_wait {
            Some((0, e)) => e
                .pack()
                .map_err(|e| VerifError::Setup(e.to_string()))?
                .to_vec(),
            _ => (0..CtEntry::WORDS).map(|_| rng.random()).collect(),
        };
        sim.set(self.rd_entry, &words)?;
        self.wr_wait = self.wr_wait.and_then(|n| n.checked_sub(1));
        self.rd_wait = self
            .rd_wait
            .and_then(|(n, e)| n.checked_sub(1).map(|n| (n, e)));
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        // 1 to 30 clocks, varying from one command to the next (a memory's latency).
        let delay = 1 + (sim.cycle() * 13 % 30) as u32;
        if sim.get_bit(self.wr_req)? {
            let index = sim.get_u64(self.wr_index)? as usize;
            let e = unpack_ct(&sim.get_words(self.wr_entry)?);
            if let Some(slot) = self.entries.get_mut(index) {
                *slot = e;
            } else if self.error.is_none() {
                self.error = Some(format!("conntrack: write of entry {index}, past the table"));
            }
            self.wr_wait = Some(delay);
        }
        if sim.get_bit(self.rd_req)? {
            let index = sim.get_u64(self.rd_index)? as usize;
            let e = self.entries.get(index).copied().unwrap_or_default();
            if e.valid {
                self.valid_reads += 1;
            }
            self.rd_wait = Some((delay, e));
        }
        Ok(())
    }
}
