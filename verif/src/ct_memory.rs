//! The connection table's memory as `nlb_conntrack` sees it when it stands alone: its command
//! port (`ct_c_wr_*`, `ct_c_rd_*`: a write and a read at a time, each answered by an ack; a
//! write's `ct_c_wr_take` before its ack) played by a table of entries. Inside `nlb_top` the
//! lookup's connection-table memory stage answers that port (docs/pipeline.md section 14); the
//! block benches put this agent there instead.
//!
//! As a memory with latency may: a write lands in the table when it is acknowledged, and a read
//! returns the table as it was at its request, so a read issued while a write of the same entry
//! is out returns the entry before that write.

use crate::bench::Agent;
use crate::{Port, VerifError, Verilated};
use nlb_hw::ct_words::unpack_ct;
use nlb_hw::layouts::CtEntry;
use rand::rngs::StdRng;
use rand::RngExt;

/// A write on its way: clocks to its take and to its ack, and what it writes where.
#[derive(Debug, Clone, Copy)]
struct Pending {
    take_in: Option<u32>,
    ack_in: u32,
    index: usize,
    entry: CtEntry,
}

/// The table behind `nlb_conntrack`'s command port.
#[derive(Debug)]
pub struct CtMemory {
    wr_req: Port,
    wr_index: Port,
    wr_entry: Port,
    wr_ack: Port,
    wr_take: Port,
    rd_req: Port,
    rd_index: Port,
    rd_ack: Port,
    rd_entry: Port,
    /// The table as the block's acknowledged writes left it.
    pub entries: Vec<CtEntry>,
    /// The write being answered, and the read (clocks left, the entry it returns).
    wr: Option<Pending>,
    rd_wait: Option<(u32, CtEntry)>,
    /// The first write or read of an entry past the table, or a request while one of its
    /// kind was out, if any.
    pub error: Option<String>,
    /// Commands answered: reads of a valid entry.
    pub valid_reads: u64,
    /// Reads requested while a write of the same entry was out (they return the entry before).
    pub reads_beside_a_write: u64,
}

impl CtMemory {
    /// The memory of `entries` empty entries on the model's `ct_c_*` ports.
    pub fn new(sim: &Verilated, entries: usize) -> Result<CtMemory, VerifError> {
        Ok(CtMemory {
            wr_req: sim.port("ct_c_wr_req")?,
            wr_index: sim.port("ct_c_wr_index")?,
            wr_entry: sim.port("ct_c_wr_entry")?,
            wr_ack: sim.port("ct_c_wr_ack")?,
            wr_take: sim.port("ct_c_wr_take")?,
            rd_req: sim.port("ct_c_rd_req")?,
            rd_index: sim.port("ct_c_rd_index")?,
            rd_ack: sim.port("ct_c_rd_ack")?,
            rd_entry: sim.port("ct_c_rd_entry")?,
            entries: vec![CtEntry::default(); entries],
            wr: None,
            rd_wait: None,
            error: None,
            valid_reads: 0,
            reads_beside_a_write: 0,
        })
    }

    /// Entry `index` once the write out, if any, has landed.
    pub fn entry_as_written(&self, index: usize) -> Option<CtEntry> {
        match self.wr {
            Some(w) if w.index == index => Some(w.entry),
            _ => self.entries.get(index).copied(),
        }
    }

    fn fail(&mut self, what: String) {
        if self.error.is_none() {
            self.error = Some(what);
        }
    }
}

impl Agent for CtMemory {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        // A take and an ack when their waits run out, with a read's entry; random words
        // otherwise. The write lands in the clock of its ack.
        let take = matches!(
            self.wr,
            Some(Pending {
                take_in: Some(0),
                ..
            })
        );
        let wr_done = matches!(self.wr, Some(Pending { ack_in: 0, .. }));
        let rd_done = matches!(self.rd_wait, Some((0, _)));
        sim.set_bit(self.wr_take, take)?;
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
        if wr_done {
            if let Some(w) = self.wr.take() {
                if let Some(slot) = self.entries.get_mut(w.index) {
                    *slot = w.entry;
                }
            }
        }
        if let Some(w) = self.wr.as_mut() {
            w.take_in = w.take_in.and_then(|n| n.checked_sub(1));
            w.ack_in -= 1;
        }
        self.rd_wait = self
            .rd_wait
            .and_then(|(n, e)| n.checked_sub(1).map(|n| (n, e)));
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        // 1 to 30 clocks, varying from one command to the next (a memory's latency); a write
        // takes its record after 1-3 clocks (as the stage's, once the record is free).
        let delay = 1 + (sim.cycle() * 13 % 30) as u32;
        let take = 1 + (sim.cycle() * 7 % 3) as u32;
        if sim.get_bit(self.wr_req)? {
            let index = sim.get_u64(self.wr_index)? as usize;
            let entry = unpack_ct(&sim.get_words(self.wr_entry)?);
            if index >= self.entries.len() {
                self.fail(format!("conntrack: write of entry {index}, past the table"));
            }
            if self.wr.is_some() {
                self.fail(format!(
                    "conntrack: write of entry {index} while one is out"
                ));
            }
            self.wr = Some(Pending {
                take_in: Some(take - 1),
                ack_in: take + delay,
                index,
                entry,
            });
        }
        if sim.get_bit(self.rd_req)? {
            let index = sim.get_u64(self.rd_index)? as usize;
            if self.rd_wait.is_some() {
                self.fail(format!("conntrack: read of entry {index} while one is out"));
            }
            if matches!(self.wr, Some(w) if w.index == index) {
                self.reads_beside_a_write += 1;
            }
            let e = self.entries.get(index).copied().unwrap_or_default();
            if e.valid {
                self.valid_reads += 1;
            }
            self.rd_wait = Some((delay, e));
        }
        Ok(())
    }
}
