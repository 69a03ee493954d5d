//! A master of `nlb_regs`' extension bus (`ext_*`), for testing the blocks that hang off it
//! (`nlb_spi_flash`, ...) on their own, as `nlb_regs` drives them: a one-clock request with an
//! absolute byte address (write: data and strobes), then the block pulses the ack when the
//! access is done (read: with the data). One access at a time; random idle clocks before
//! each request, and noise on the address and data lines between requests (a block must take
//! them at the request).

use crate::bench::{Agent, Bench};
use crate::error::VerifError;
use crate::verilated::{Port, Verilated};
use rand::rngs::StdRng;
use rand::RngExt;
use std::collections::VecDeque;

/// Clock cycles an access may take before it is reported as hung.
pub const TIMEOUT_CYCLES: u64 = 100_000;

#[derive(Debug, Clone, Copy)]
struct Ports {
    wr_req: Port,
    wr_addr: Port,
    wr_data: Port,
    wr_strb: Port,
    wr_ack: Port,
    rd_req: Port,
    rd_addr: Port,
    rd_data: Port,
    rd_ack: Port,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Write { addr: u32, data: u32, strb: u32 },
    Read { addr: u32 },
}

/// Drives a block's `ext_*` slave ports.
#[derive(Debug)]
pub struct ExtBusMaster {
    ports: Ports,
    /// The access in progress and whether its request went out.
    current: Option<(Op, bool)>,
    /// The request is on the bus this clock.
    requesting: bool,
    /// The answer of the finished access (read data, or 0 for a write).
    done: Option<u32>,
    /// Probability of waiting one more clock before a request.
    pub idle: f64,
    violations: Vec<String>,
}

impl ExtBusMaster {
    /// A master on the model's `ext_*` ports.
    pub fn new(sim: &Verilated, idle: f64) -> Result<ExtBusMaster, VerifError> {
        let p = |s: &str| sim.port(&format!("ext_{s}"));
        Ok(ExtBusMaster {
            ports: Ports {
                wr_req: p("wr_req")?,
                wr_addr: p("wr_addr")?,
                wr_data: p("wr_data")?,
                wr_strb: p("wr_strb")?,
                wr_ack: p("wr_ack")?,
                rd_req: p("rd_req")?,
                rd_addr: p("rd_addr")?,
                rd_data: p("rd_data")?,
                rd_ack: p("rd_ack")?,
            },
            current: None,
            requesting: false,
            done: None,
            idle,
            violations: Vec::new(),
        })
    }

    /// Acks that came with no access waiting for one (empty when the block behaved).
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Writes a register (all four bytes), stepping until the block acks.
    pub fn write(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        addr: u32,
        data: u32,
    ) -> Result<(), VerifError> {
        self.write_strobed(bench, others, addr, data, 0xf)
    }

    /// Writes the bytes of a register that `strb` selects (bit i: byte i), stepping until the
    /// block acks.
    pub fn write_strobed(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        addr: u32,
        data: u32,
        strb: u32,
    ) -> Result<(), VerifError> {
        self.run(
            bench,
            others,
            Op::Write {
                addr,
                data,
                strb: strb & 0xf,
            },
        )
        .map(|_| ())
    }

    /// Reads a register, stepping until the block acks with the data.
    pub fn read(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        addr: u32,
    ) -> Result<u32, VerifError> {
        self.run(bench, others, Op::Read { addr })
    }

    fn run(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        op: Op,
    ) -> Result<u32, VerifError> {
        self.current = Some((op, false));
        self.done = None;
        for _ in 0..TIMEOUT_CYCLES {
            bench.step_with(self, others)?;
            if let Some(v) = self.done.take() {
                return Ok(v);
            }
        }
        let (what, addr) = match op {
            Op::Write { addr, .. } => ("write", addr),
            Op::Read { addr } => ("read", addr),
        };
        Err(VerifError::Timeout {
            what: format!("extension-bus {what} at {addr:#06x}"),
            cycles: TIMEOUT_CYCLES,
        })
    }
}

impl Agent for ExtBusMaster {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        let p = self.ports;
        // Noise between requests.
        let (mut wr, mut rd) = (false, false);
        let (mut addr, mut data, mut strb) = (rng.random::<u32>(), rng.random::<u32>(), 0u32);
        let mut raddr = rng.random::<u32>();
        if let Some((op, issued)) = self.current.as_mut() {
            if !*issued && !rng.random_bool(self.idle) {
                *issued = true;
                match *op {
                    Op::Write {
                        addr: a,
                        data: d,
                        strb: s,
                    } => {
                        wr = true;
                        (addr, data, strb) = (a, d, s);
                    }
                    Op::Read { addr: a } => {
                        rd = true;
                        raddr = a;
                    }
                }
            }
        }
        self.requesting = wr || rd;
        sim.set_bit(p.wr_req, wr)?;
        sim.set_u64(p.wr_addr, u64::from(addr))?;
        sim.set_u64(p.wr_data, u64::from(data))?;
        sim.set_u64(p.wr_strb, u64::from(strb))?;
        sim.set_bit(p.rd_req, rd)?;
        sim.set_u64(p.rd_addr, u64::from(raddr))
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let p = self.ports;
        let cycle = sim.cycle();
        let wr_ack = sim.get_bit(p.wr_ack)?;
        let rd_ack = sim.get_bit(p.rd_ack)?;
        let rd_data = sim.get_u64(p.rd_data)? as u32;
        match self.current {
            Some((Op::Write { .. }, true)) if wr_ack && !self.requesting => {
                self.current = None;
                self.done = Some(0);
            }
            Some((Op::Read { .. }, true)) if rd_ack && !self.requesting => {
                self.current = None;
                self.done = Some(rd_data);
            }
            _ if wr_ack || rd_ack => self.violations.push(format!(
                "cycle {cycle}: an ack with no access waiting for it"
            )),
            _ => {}
        }
        Ok(())
    }
}

// ---- a master with a write and a read in flight ------------------------------------------------

/// A master of the extension bus that uses all the bus allows (nlb_regs' header: one write
/// and one read at a time): a write and a read outstanding together, requested in the same
/// clock or apart, the next request of a kind in the clock after the previous one's ack or
/// after random waits, byte strobes as given; noise on the address, data and strobe lines
/// between requests. Accesses finish as [`crate::axil::Finished`] (`offered` = `accepted` =
/// the request's clock, `responded` = the ack's).
#[derive(Debug)]
pub struct ExtBusPipe {
    ports: Ports,
    /// Probability that a request waits a few clocks before it goes out.
    pub lead: f64,
    /// The longest such wait, clocks.
    pub max_lead: u32,
    all: Vec<(crate::axil::Access, Option<usize>)>,
    writes: VecDeque<usize>,
    reads: VecDeque<usize>,
    /// The write / read in flight: (index, clock requested, clocks still to wait, requested).
    wr: Option<(usize, u64, u32, bool)>,
    rd: Option<(usize, u64, u32, bool)>,
    wr_now: bool,
    rd_now: bool,
    n_writes: usize,
    done: Vec<crate::axil::Finished>,
    finished: usize,
    violations: Vec<String>,
}

impl ExtBusPipe {
    /// A master on the model's `ext_*` ports.
    pub fn new(sim: &Verilated, lead: f64, max_lead: u32) -> Result<ExtBusPipe, VerifError> {
        let p = |s: &str| sim.port(&format!("ext_{s}"));
        Ok(ExtBusPipe {
            ports: Ports {
                wr_req: p("wr_req")?,
                wr_addr: p("wr_addr")?,
                wr_data: p("wr_data")?,
                wr_strb: p("wr_strb")?,
                wr_ack: p("wr_ack")?,
                rd_req: p("rd_req")?,
                rd_addr: p("rd_addr")?,
                rd_data: p("rd_data")?,
                rd_ack: p("rd_ack")?,
            },
            lead,
            max_lead,
            all: Vec::new(),
            writes: VecDeque::new(),
            reads: VecDeque::new(),
            wr: None,
            rd: None,
            wr_now: false,
            rd_now: false,
            n_writes: 0,
            done: Vec::new(),
            finished: 0,
            violations: Vec::new(),
        })
    }

    /// Queues an access; returns its index.
    pub fn push(&mut self, a: crate::axil::Access) -> usize {
        let i = self.all.len();
        let wi = match a {
            crate::axil::Access::Write { .. } => {
                self.writes.push_back(i);
                self.n_writes += 1;
                Some(self.n_writes - 1)
            }
            crate::axil::Access::Read { .. } => {
                self.reads.push_back(i);
                None
            }
        };
        self.all.push((a, wi));
        i
    }

    /// Whether every access pushed has finished.
    pub fn is_idle(&self) -> bool {
        self.finished == self.all.len()
    }

    /// The accesses finished since the last call, in the order their acks came.
    pub fn take_done(&mut self) -> Vec<crate::axil::Finished> {
        std::mem::take(&mut self.done)
    }

    /// Acks with no access waiting for one (empty when the block behaved).
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Steps `bench` (and `others`) until every access pushed has finished.
    pub fn run(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
    ) -> Result<(), VerifError> {
        for _ in 0..TIMEOUT_CYCLES {
            if self.is_idle() {
                return Ok(());
            }
            bench.step_with(self, others)?;
        }
        Err(VerifError::Timeout {
            what: "extension-bus accesses".into(),
            cycles: TIMEOUT_CYCLES,
        })
    }

    fn wait(&self, rng: &mut StdRng) -> u32 {
        if rng.random_bool(self.lead) {
            rng.random_range(1..=self.max_lead.max(1))
        } else {
            0
        }
    }

    /// Whether the channel's access goes out this clock.
    fn go(slot: &mut Option<(usize, u64, u32, bool)>, cycle: u64) -> Option<usize> {
        let (i, at, wait, requested) = slot.as_mut()?;
        if *requested {
            return None;
        }
        if *wait > 0 {
            *wait -= 1;
            return None;
        }
        *requested = true;
        *at = cycle;
        Some(*i)
    }

    fn finish(&mut self, i: usize, at: u64, cycle: u64, data: u32) {
        let (access, write_index) = self.all[i];
        self.done.push(crate::axil::Finished {
            access,
            index: i,
            write_index,
            offered: at,
            accepted: at,
            addr_taken: at,
            data_taken: at,
            responded: cycle,
            data,
            resp: 0,
        });
        self.finished += 1;
    }
}

impl Agent for ExtBusPipe {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        if self.wr.is_none() {
            if let Some(i) = self.writes.pop_front() {
                self.wr = Some((i, 0, self.wait(rng), false));
            }
        }
        if self.rd.is_none() {
            if let Some(i) = self.reads.pop_front() {
                self.rd = Some((i, 0, self.wait(rng), false));
            }
        }
        let cycle = sim.cycle();
        let w = Self::go(&mut self.wr, cycle);
        let r = Self::go(&mut self.rd, cycle);
        self.wr_now = w.is_some();
        self.rd_now = r.is_some();
        let (mut addr, mut data, mut strb) = (
            rng.random::<u32>(),
            rng.random::<u32>(),
            rng.random_range(0..16u32),
        );
        if let Some(crate::axil::Access::Write {
            addr: a,
            data: d,
            strb: s,
        }) = w.map(|i| self.all[i].0)
        {
            (addr, data, strb) = (a, d, s);
        }
        let mut raddr = rng.random::<u32>();
        if let Some(crate::axil::Access::Read { addr: a }) = r.map(|i| self.all[i].0) {
            raddr = a;
        }
        let p = self.ports;
        sim.set_bit(p.wr_req, self.wr_now)?;
        sim.set_u64(p.wr_addr, u64::from(addr))?;
        sim.set_u64(p.wr_data, u64::from(data))?;
        sim.set_u64(p.wr_strb, u64::from(strb))?;
        sim.set_bit(p.rd_req, self.rd_now)?;
        sim.set_u64(p.rd_addr, u64::from(raddr))
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let p = self.ports;
        let cycle = sim.cycle();
        if sim.get_bit(p.wr_ack)? {
            match self.wr {
                Some((i, at, _, true)) if at < cycle => {
                    self.wr = None;
                    self.finish(i, at, cycle, 0);
                }
                _ => self.violations.push(format!(
                    "cycle {cycle}: a write ack with no write waiting for it"
                )),
            }
        }
        if sim.get_bit(p.rd_ack)? {
            let data = sim.get_u64(p.rd_data)? as u32;
            match self.rd {
                Some((i, at, _, true)) if at < cycle => {
                    self.rd = None;
                    self.finish(i, at, cycle, data);
                }
                _ => self.violations.push(format!(
                    "cycle {cycle}: a read ack with no read waiting for it"
                )),
            }
        }
        Ok(())
    }
}
