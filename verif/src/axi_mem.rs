//! A table memory behind AXI4 read ports, for the benches of the blocks that read one
//! (`nlb_lookup`'s memory stages): per channel, requests are taken at random clocks, answered
//! after a random latency, in a random order among those due (ids differ, so the order is
//! free), one beat per clock at most with random gaps, and the bench's `rdata` only when
//! `rvalid` is high (noise otherwise). What a row holds comes from the bench at the clock its
//! burst starts. Writes are not taken (`awready`, `wready` low): the benches that use this do
//! not write.
//!
//! The whole pipeline runs on the HBM model instead (`verif/hbm`, [`crate::hbm`]), which is
//! Verilog and so runs at the model's speed; this one is Rust so that a block bench can serve
//! rows straight from the golden model's tables.

use crate::error::VerifError;
use crate::verilated::{Port, Verilated};
use rand::rngs::StdRng;
use rand::RngExt;

/// The read ports of one table, `<prefix>_ar*` and `<prefix>_r*`, channel `c` in the `c`-th
/// slice of each, and its write ports (held idle).
#[derive(Debug, Clone, Copy)]
struct Ports {
    araddr: Port,
    arid: Port,
    arlen: Port,
    arvalid: Port,
    arready: Port,
    rdata: Port,
    rid: Port,
    rlast: Port,
    rvalid: Port,
    rready: Port,
    awready: Port,
    wready: Port,
    bvalid: Port,
}

/// A request waiting for its data, and the beats of the burst being sent.
#[derive(Debug, Clone)]
struct Burst {
    id: u64,
    local_row: u64,
    first_beat: u64,
    beats: u64,
    due: u64,
    data: Vec<u32>,
    next: u64,
}

/// How the memory times its answers.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Latency of a read, clocks: uniform in this range.
    pub latency: (u64, u64),
    /// Probability of refusing a request in a clock.
    pub ar_refuse: f64,
    /// Probability of an idle clock between two beats.
    pub r_gap: f64,
}

/// The memory, with `channels` channels of `data_w`-bit beats, rows `1 << row_shift` bytes
/// apart in each channel's region (starting at address 0).
#[derive(Debug)]
pub struct AxiMem {
    p: Ports,
    channels: usize,
    data_w: usize,
    row_shift: u32,
    /// Timing of the answers.
    pub timing: Timing,
    waiting: Vec<Vec<Burst>>,
    sending: Vec<Option<Burst>>,
    offered: Vec<bool>,
    ar_ready: Vec<bool>,
    /// Reads answered, per channel.
    pub reads: Vec<u64>,
    /// Reads answered out of the order they were taken in (on one channel).
    pub reordered: u64,
    taken: Vec<u64>,
}

impl AxiMem {
    /// The memory on the model's `<prefix>_*` ports (`m_axi_ct`, ...).
    pub fn new(
        sim: &Verilated,
        prefix: &str,
        channels: usize,
        data_w: usize,
        row_shift: u32,
        timing: Timing,
    ) -> Result<AxiMem, VerifError> {
        let p = |s: &str| sim.port(&format!("{prefix}_{s}"));
        Ok(AxiMem {
            p: Ports {
                araddr: p("araddr")?,
                arid: p("arid")?,
                arlen: p("arlen")?,
                arvalid: p("arvalid")?,
                arready: p("arready")?,
                rdata: p("rdata")?,
                rid: p("rid")?,
                rlast: p("rlast")?,
                rvalid: p("rvalid")?,
                rready: p("rready")?,
                awready: p("awready")?,
                wready: p("wready")?,
                bvalid: p("bvalid")?,
            },
            channels,
            data_w,
            row_shift,
            timing,
            waiting: vec![Vec::new(); channels],
            sending: vec![None; channels],
            offered: vec![false; channels],
            ar_ready: vec![false; channels],
            reads: vec![0; channels],
            reordered: 0,
            taken: vec![0; channels],
        })
    }

    fn field(words: &[u32], at: usize, bits: usize) -> u64 {
        let mut v = 0u64;
        for b in 0..bits {
            let i = at + b;
            if words.get(i / 32).is_some_and(|w| w >> (i % 32) & 1 != 0) {
                v |= 1 << b;
            }
        }
        v
    }

    fn put(words: &mut [u32], at: usize, bits: usize, v: u64) {
        for b in 0..bits {
            let i = at + b;
            let w = &mut words[i / 32];
            *w &= !(1 << (i % 32));
            *w |= ((v >> b & 1) as u32) << (i % 32);
        }
    }

    /// Before the clock settles: the ports this memory drives. `row` gives what a row holds
    /// (channel, row within the channel): `row_w` bits as words; a burst's beats are its
    /// slices of `data_w` bits from its first beat.
    pub fn drive(
        &mut self,
        sim: &mut Verilated,
        rng: &mut StdRng,
        clock: u64,
        row: &dyn Fn(usize, u64) -> Vec<u32>,
    ) -> Result<(), VerifError> {
        let dw = self.data_w;
        let mut rdata: Vec<u32> = (0..(self.channels * dw).div_ceil(32))
            .map(|_| rng.random())
            .collect();
        let id_w = self.p.rid.width as usize / self.channels;
        let mut rid = vec![0u32; self.p.rid.words];
        let mut rvalid = vec![0u32; self.p.rvalid.words];
        let mut rlast = vec![0u32; self.p.rlast.words];
        let mut arready = vec![0u32; self.p.arready.words];
        for c in 0..self.channels {
            // A burst starts: one due request, chosen at random (any id order).
            if self.sending[c].is_none() && !rng.random_bool(self.timing.r_gap) {
                let due: Vec<usize> = (0..self.waiting[c].len())
                    .filter(|&i| self.waiting[c][i].due <= clock)
                    .collect();
                if !due.is_empty() {
                    let pick = due[rng.random_range(0..due.len())];
                    if pick != 0 {
                        self.reordered += 1;
                    }
                    let mut b = self.waiting[c].remove(pick);
                    b.data = row(c, b.local_row);
                    self.sending[c] = Some(b);
                }
            }
            // The offered beat stays offered until taken; the next may wait a clock.
            let offer = match &self.sending[c] {
                Some(_) if self.offered[c] => true,
                Some(_) => !rng.random_bool(self.timing.r_gap),
                None => false,
            };
            self.offered[c] = offer;
            if let (true, Some(b)) = (offer, &self.sending[c]) {
                let beat = b.first_beat + b.next;
                for k in 0..dw {
                    let bit = Self::field(&b.data, beat as usize * dw + k, 1);
                    Self::put(&mut rdata, c * dw + k, 1, bit);
                }
                Self::put(&mut rid, c * id_w, id_w, b.id);
                Self::put(&mut rvalid, c, 1, 1);
                Self::put(&mut rlast, c, 1, u64::from(b.next + 1 == b.beats));
            }
            self.ar_ready[c] = !rng.random_bool(self.timing.ar_refuse);
            Self::put(&mut arready, c, 1, u64::from(self.ar_ready[c]));
        }
        sim.set(self.p.rdata, &rdata)?;
        sim.set(self.p.rid, &rid)?;
        sim.set(self.p.rvalid, &rvalid)?;
        sim.set(self.p.rlast, &rlast)?;
        sim.set(self.p.arready, &arready)?;
        sim.set_u64(self.p.awready, 0)?;
        sim.set_u64(self.p.wready, 0)?;
        sim.set_u64(self.p.bvalid, 0)
    }

    /// After the clock settles: requests taken and beats taken at the coming edge.
    pub fn observe(
        &mut self,
        sim: &mut Verilated,
        rng: &mut StdRng,
        clock: u64,
    ) -> Result<(), VerifError> {
        let arvalid = sim.get_words(self.p.arvalid)?;
        let araddr = sim.get_words(self.p.araddr)?;
        let arid = sim.get_words(self.p.arid)?;
        let arlen = sim.get_words(self.p.arlen)?;
        let rready = sim.get_words(self.p.rready)?;
        let aw = self.p.araddr.width as usize / self.channels;
        let id_w = self.p.arid.width as usize / self.channels;
        let beat_bytes = (self.data_w / 8) as u64;
        for c in 0..self.channels {
            if Self::field(&arvalid, c, 1) == 1 && self.ar_ready[c] {
                let addr = Self::field(&araddr, c * aw, aw.min(64));
                let in_row = addr & ((1 << self.row_shift) - 1);
                let (lo, hi) = self.timing.latency;
                self.waiting[c].push(Burst {
                    id: Self::field(&arid, c * id_w, id_w),
                    local_row: addr >> self.row_shift,
                    first_beat: in_row / beat_bytes,
                    beats: Self::field(&arlen, c * 8, 8) + 1,
                    due: clock + rng.random_range(lo..=hi),
                    data: Vec::new(),
                    next: 0,
                });
                self.taken[c] += 1;
            }
            if self.offered[c] && Self::field(&rready, c, 1) == 1 {
                self.offered[c] = false;
                let done = self.sending[c].as_mut().is_some_and(|b| {
                    b.next += 1;
                    b.next == b.beats
                });
                if done {
                    self.sending[c] = None;
                    self.reads[c] += 1;
                }
            }
        }
        Ok(())
    }

    /// Whether every request taken has been answered.
    pub fn idle(&self) -> bool {
        self.waiting.iter().all(Vec::is_empty) && self.sending.iter().all(Option::is_none)
    }
}
