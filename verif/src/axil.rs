//! An AXI-Lite master agent: one transaction at a time, with random delays on every address,
//! data and response channel, and checks that the model holds its responses until taken.

use crate::bench::{Agent, Bench};
use crate::error::VerifError;
use crate::verilated::{Port, Verilated};
use rand::rngs::StdRng;
use rand::RngExt;
use std::collections::VecDeque;

/// Clock cycles a blocking transaction may take before it is reported as hung.
pub const TIMEOUT_CYCLES: u64 = 10_000;

/// The ports of an AXI-Lite slave interface with prefix `p`: `p_awaddr`, `p_awvalid`, ...
#[derive(Debug, Clone, Copy)]
pub struct AxiLitePorts {
    /// `p_awaddr`.
    pub awaddr: Port,
    /// `p_awvalid`.
    pub awvalid: Port,
    /// `p_awready`.
    pub awready: Port,
    /// `p_wdata`.
    pub wdata: Port,
    /// `p_wstrb`; `None` on an interface without byte strobes (the OpenNIC shell's register
    /// port, where every write is a whole word).
    pub wstrb: Option<Port>,
    /// `p_wvalid`.
    pub wvalid: Port,
    /// `p_wready`.
    pub wready: Port,
    /// `p_bresp`.
    pub bresp: Port,
    /// `p_bvalid`.
    pub bvalid: Port,
    /// `p_bready`.
    pub bready: Port,
    /// `p_araddr`.
    pub araddr: Port,
    /// `p_arvalid`.
    pub arvalid: Port,
    /// `p_arready`.
    pub arready: Port,
    /// `p_rdata`.
    pub rdata: Port,
    /// `p_rresp`.
    pub rresp: Port,
    /// `p_rvalid`.
    pub rvalid: Port,
    /// `p_rready`.
    pub rready: Port,
}

impl AxiLitePorts {
    /// Finds the interface with this prefix (`s_axil`).
    pub fn new(sim: &Verilated, prefix: &str) -> Result<AxiLitePorts, VerifError> {
        let p = |s: &str| sim.port(&format!("{prefix}_{s}"));
        Ok(AxiLitePorts {
            awaddr: p("awaddr")?,
            awvalid: p("awvalid")?,
            awready: p("awready")?,
            wdata: p("wdata")?,
            wstrb: {
                let name = format!("{prefix}_wstrb");
                sim.has_port(&name).then(|| sim.port(&name)).transpose()?
            },
            wvalid: p("wvalid")?,
            wready: p("wready")?,
            bresp: p("bresp")?,
            bvalid: p("bvalid")?,
            bready: p("bready")?,
            araddr: p("araddr")?,
            arvalid: p("arvalid")?,
            arready: p("arready")?,
            rdata: p("rdata")?,
            rresp: p("rresp")?,
            rvalid: p("rvalid")?,
            rready: p("rready")?,
        })
    }
}

/// A finished transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// A write and its BRESP.
    Write {
        /// Byte address.
        addr: u32,
        /// BRESP.
        resp: u32,
    },
    /// A read, its data and RRESP.
    Read {
        /// Byte address.
        addr: u32,
        /// RDATA.
        data: u32,
        /// RRESP.
        resp: u32,
    },
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Write { addr: u32, data: u32, strb: u32 },
    Read { addr: u32 },
}

/// Progress of one address or data channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chan {
    Waiting,
    Offering,
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Current {
    op: Op,
    addr_chan: Chan,
    data_chan: Chan,
}

/// Drives a model's AXI-Lite slave port.
#[derive(Debug)]
pub struct AxiLiteMaster {
    ports: AxiLitePorts,
    queue: VecDeque<Op>,
    current: Option<Current>,
    /// Finished transactions with the clock their response was taken in.
    done: VecDeque<(Completion, u64)>,
    bready: bool,
    rready: bool,
    /// Probability of not yet offering an address or data beat on a clock where it could be.
    pub idle: f64,
    /// Probability of holding BREADY/RREADY low on a clock.
    pub backpressure: f64,
    /// BVALID/RVALID held but not taken last clock, with the response then offered.
    stalled_b: Option<u32>,
    stalled_r: Option<(u32, u32)>,
    violations: Vec<String>,
}

impl AxiLiteMaster {
    /// A master on the model's `prefix` slave interface.
    pub fn new(
        sim: &Verilated,
        prefix: &str,
        idle: f64,
        backpressure: f64,
    ) -> Result<AxiLiteMaster, VerifError> {
        Ok(AxiLiteMaster {
            ports: AxiLitePorts::new(sim, prefix)?,
            queue: VecDeque::new(),
            current: None,
            done: VecDeque::new(),
            bready: false,
            rready: false,
            idle,
            backpressure,
            stalled_b: None,
            stalled_r: None,
            violations: Vec::new(),
        })
    }

    /// Queues a write of all four bytes.
    pub fn queue_write(&mut self, addr: u32, data: u32) {
        self.queue_write_strb(addr, data, 0xf);
    }

    /// Queues a write with byte strobes.
    pub fn queue_write_strb(&mut self, addr: u32, data: u32, strb: u32) {
        self.queue.push_back(Op::Write { addr, data, strb });
    }

    /// Queues a read.
    pub fn queue_read(&mut self, addr: u32) {
        self.queue.push_back(Op::Read { addr });
    }

    /// The oldest finished transaction.
    pub fn pop_completion(&mut self) -> Option<Completion> {
        self.done.pop_front().map(|(c, _)| c)
    }

    /// The oldest finished transaction and the clock its response (BVALID/RVALID with
    /// READY) was taken in: whatever the transaction did, it did by then.
    pub fn pop_completion_timed(&mut self) -> Option<(Completion, u64)> {
        self.done.pop_front()
    }

    /// Whether nothing is queued or in flight.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.current.is_none()
    }

    /// Protocol violations seen on the model's side (empty when it behaved).
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Writes a register, stepping `bench` (and `others`) until the response arrives.
    pub fn write(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        addr: u32,
        data: u32,
    ) -> Result<(), VerifError> {
        self.write_strb(bench, others, addr, data, 0xf)
    }

    /// Writes a register with byte strobes, stepping until the response arrives.
    pub fn write_strb(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        addr: u32,
        data: u32,
        strb: u32,
    ) -> Result<(), VerifError> {
        self.queue_write_strb(addr, data, strb);
        match self.finish(bench, others, "write", addr)? {
            Completion::Write { resp: 0, .. } => Ok(()),
            Completion::Write { resp, .. } | Completion::Read { resp, .. } => {
                Err(VerifError::AxiResponse {
                    what: "write",
                    addr,
                    resp,
                })
            }
        }
    }

    /// Reads a register, stepping until the data arrives.
    pub fn read(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        addr: u32,
    ) -> Result<u32, VerifError> {
        self.queue_read(addr);
        match self.finish(bench, others, "read", addr)? {
            Completion::Read { data, resp: 0, .. } => Ok(data),
            Completion::Write { resp, .. } | Completion::Read { resp, .. } => {
                Err(VerifError::AxiResponse {
                    what: "read",
                    addr,
                    resp,
                })
            }
        }
    }

    fn finish(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        what: &str,
        addr: u32,
    ) -> Result<Completion, VerifError> {
        for _ in 0..TIMEOUT_CYCLES {
            bench.step_with(self, others)?;
            if self.is_idle() {
                if let Some((c, _)) = self.done.pop_back() {
                    return Ok(c);
                }
            }
        }
        Err(VerifError::Timeout {
            what: format!("AXI-Lite {what} at {addr:#06x}"),
            cycles: TIMEOUT_CYCLES,
        })
    }
}

impl Agent for AxiLiteMaster {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        if self.current.is_none() {
            if let Some(op) = self.queue.pop_front() {
                self.current = Some(Current {
                    op,
                    addr_chan: Chan::Waiting,
                    data_chan: match op {
                        Op::Write { .. } => Chan::Waiting,
                        Op::Read { .. } => Chan::Done,
                    },
                });
            }
        }
        let (mut aw, mut w, mut ar) = (false, false, false);
        // Noise on address and data while nothing is offered.
        let (mut addr, mut data, mut strb) = (rng.random::<u32>(), rng.random::<u32>(), 0u32);
        if let Some(cur) = self.current.as_mut() {
            for c in [&mut cur.addr_chan, &mut cur.data_chan] {
                if *c == Chan::Waiting && !rng.random_bool(self.idle) {
                    *c = Chan::Offering;
                }
            }
            match cur.op {
                Op::Write {
                    addr: a,
                    data: d,
                    strb: s,
                } => {
                    aw = cur.addr_chan == Chan::Offering;
                    w = cur.data_chan == Chan::Offering;
                    if aw {
                        addr = a;
                    }
                    if w {
                        data = d;
                        strb = s;
                    }
                }
                Op::Read { addr: a } => {
                    ar = cur.addr_chan == Chan::Offering;
                    if ar {
                        addr = a;
                    }
                }
            }
        }
        let p = self.ports;
        sim.set_u64(p.awaddr, u64::from(addr))?;
        sim.set_u64(p.araddr, u64::from(addr))?;
        sim.set_bit(p.awvalid, aw)?;
        sim.set_bit(p.arvalid, ar)?;
        sim.set_u64(p.wdata, u64::from(data))?;
        match p.wstrb {
            Some(port) => sim.set_u64(port, u64::from(strb))?,
            None if w && strb != 0xf => {
                return Err(VerifError::Setup(format!(
                    "a write with byte strobes {strb:#x} on an interface without wstrb"
                )))
            }
            None => {}
        }
        sim.set_bit(p.wvalid, w)?;
        self.bready = !rng.random_bool(self.backpressure);
        self.rready = !rng.random_bool(self.backpressure);
        sim.set_bit(p.bready, self.bready)?;
        sim.set_bit(p.rready, self.rready)
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let p = self.ports;
        let cycle = sim.cycle();
        if let Some(cur) = self.current.as_mut() {
            let (addr_ready, data_ready) = match cur.op {
                Op::Write { .. } => (sim.get_bit(p.awready)?, sim.get_bit(p.wready)?),
                Op::Read { .. } => (sim.get_bit(p.arready)?, false),
            };
            if cur.addr_chan == Chan::Offering && addr_ready {
                cur.addr_chan = Chan::Done;
            }
            if cur.data_chan == Chan::Offering && data_ready {
                cur.data_chan = Chan::Done;
            }
        }

        let bvalid = sim.get_bit(p.bvalid)?;
        let bresp = sim.get_u64(p.bresp)? as u32;
        if let Some(prev) = self.stalled_b.take() {
            if !bvalid || bresp != prev {
                self.violations
                    .push(format!("cycle {cycle}: BVALID/BRESP changed before BREADY"));
            }
        }
        if bvalid {
            if !self.bready {
                self.stalled_b = Some(bresp);
            } else {
                match self.current {
                    Some(Current {
                        op: Op::Write { addr, .. },
                        addr_chan: Chan::Done,
                        data_chan: Chan::Done,
                    }) => {
                        self.done
                            .push_back((Completion::Write { addr, resp: bresp }, cycle));
                        self.current = None;
                    }
                    _ => self.violations.push(format!(
                        "cycle {cycle}: BVALID without a finished write address and data"
                    )),
                }
            }
        }

        let rvalid = sim.get_bit(p.rvalid)?;
        let rdata = sim.get_u64(p.rdata)? as u32;
        let rresp = sim.get_u64(p.rresp)? as u32;
        if let Some(prev) = self.stalled_r.take() {
            if !rvalid || (rdata, rresp) != prev {
                self.violations
                    .push(format!("cycle {cycle}: RVALID/RDATA changed before RREADY"));
            }
        }
        if rvalid {
            if !self.rready {
                self.stalled_r = Some((rdata, rresp));
            } else {
                match self.current {
                    Some(Current {
                        op: Op::Read { addr },
                        addr_chan: Chan::Done,
                        ..
                    }) => {
                        self.done.push_back((
                            Completion::Read {
                                addr,
                                data: rdata,
                                resp: rresp,
                            },
                            cycle,
                        ));
                        self.current = None;
                    }
                    _ => self.violations.push(format!(
                        "cycle {cycle}: RVALID without a finished read address"
                    )),
                }
            }
        }
        Ok(())
    }
}

// ---- a pipelined master ----------------------------------------------------------------------

/// One access of a [`PipelinedMaster`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A write with byte strobes (bit i: byte i).
    Write {
        /// Byte address.
        addr: u32,
        /// Data.
        data: u32,
        /// WSTRB.
        strb: u32,
    },
    /// A read.
    Read {
        /// Byte address.
        addr: u32,
    },
}

/// How a [`PipelinedMaster`] times its five channels, as a PCIe bridge or a CPU's
/// write-combining path does: several writes outstanding, a write's address and data phases
/// apart in either order, responses held while more accesses go out, reads beside writes.
#[derive(Debug, Clone, Copy)]
pub struct PipeTiming {
    /// Writes issued (a beat offered) and not yet answered, at most.
    pub max_writes: usize,
    /// Reads issued and not yet answered, at most.
    pub max_reads: usize,
    /// Probability that a write's address phase, or its data phase, waits before it is
    /// offered (the two draw apart, so either may lead).
    pub lead: f64,
    /// The longest such wait, clocks.
    pub max_lead: u32,
    /// Probability per clock of starting to hold BREADY (RREADY) low.
    pub hold: f64,
    /// The longest hold, clocks.
    pub max_hold: u32,
    /// Probability of BREADY / RREADY low on a clock outside a hold.
    pub backpressure: f64,
}

impl Default for PipeTiming {
    fn default() -> PipeTiming {
        PipeTiming {
            max_writes: 4,
            max_reads: 4,
            lead: 0.3,
            max_lead: 24,
            hold: 0.05,
            max_hold: 40,
            backpressure: 0.2,
        }
    }
}

/// A finished access of a [`PipelinedMaster`], with the clocks that bound what it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// The access.
    pub access: Access,
    /// Its place among the accesses pushed (0, 1, ...).
    pub index: usize,
    /// For a write: its place among the writes (the order the slave executes them in).
    pub write_index: Option<usize>,
    /// The clock its first beat (address or data) was offered.
    pub offered: u64,
    /// The clock its last request handshake (AW and W, or AR) completed.
    pub accepted: u64,
    /// The clock its address (AW or AR) was taken.
    pub addr_taken: u64,
    /// The clock its data (W) was taken (a read: its address's).
    pub data_taken: u64,
    /// The clock its response (B or R) was taken.
    pub responded: u64,
    /// RDATA (0 for a write).
    pub data: u32,
    /// BRESP or RRESP.
    pub resp: u32,
}

/// A beat waiting on one request channel: the access's index, and the clocks still to wait
/// before it is offered.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    index: usize,
    wait: u32,
    offered: bool,
}

/// Progress of one access.
#[derive(Debug, Clone, Copy)]
struct Progress {
    access: Access,
    write_index: Option<usize>,
    offered: Option<u64>,
    /// Request handshakes still to come (2 for a write, 1 for a read).
    handshakes: u8,
    accepted: u64,
    addr_taken: u64,
    data_taken: u64,
}

/// An AXI-Lite master with several accesses in flight: writes whose AW and W beats go out
/// apart and in either order (AXI allows the data before the address), more writes while a
/// B response is held, reads on their own channel beside the writes, responses held for long
/// stretches. Responses are matched to the accesses in order (AXI-Lite has one ID: B in the
/// order of the writes, R in the order of the reads). It checks that the slave holds BVALID /
/// BRESP and RVALID / RDATA / RRESP until taken and answers no write before both its beats
/// and no read before its address were taken.
#[derive(Debug)]
pub struct PipelinedMaster {
    ports: AxiLitePorts,
    /// Probability of not offering a beat that could go out on a clock.
    pub idle: f64,
    /// Channel timing.
    pub timing: PipeTiming,
    all: Vec<Progress>,
    aw: VecDeque<Waiting>,
    w: VecDeque<Waiting>,
    ar: VecDeque<Waiting>,
    /// Writes / reads not yet started on their channels (in order).
    writes_todo: VecDeque<usize>,
    reads_todo: VecDeque<usize>,
    /// Writes / reads issued and not answered, in order.
    writes_open: VecDeque<usize>,
    reads_open: VecDeque<usize>,
    writes: usize,
    b_hold: u32,
    r_hold: u32,
    bready: bool,
    rready: bool,
    aw_off: Option<usize>,
    w_off: Option<usize>,
    ar_off: Option<usize>,
    stalled_b: Option<u32>,
    stalled_r: Option<(u32, u32)>,
    done: Vec<Finished>,
    finished: usize,
    violations: Vec<String>,
}

impl PipelinedMaster {
    /// A master on the model's `prefix` slave interface.
    pub fn new(
        sim: &Verilated,
        prefix: &str,
        idle: f64,
        timing: PipeTiming,
    ) -> Result<PipelinedMaster, VerifError> {
        Ok(PipelinedMaster {
            ports: AxiLitePorts::new(sim, prefix)?,
            idle,
            timing,
            all: Vec::new(),
            aw: VecDeque::new(),
            w: VecDeque::new(),
            ar: VecDeque::new(),
            writes_todo: VecDeque::new(),
            reads_todo: VecDeque::new(),
            writes_open: VecDeque::new(),
            reads_open: VecDeque::new(),
            writes: 0,
            b_hold: 0,
            r_hold: 0,
            bready: false,
            rready: false,
            aw_off: None,
            w_off: None,
            ar_off: None,
            stalled_b: None,
            stalled_r: None,
            done: Vec::new(),
            finished: 0,
            violations: Vec::new(),
        })
    }

    /// Queues an access; returns its index.
    pub fn push(&mut self, access: Access) -> usize {
        let index = self.all.len();
        let (write_index, handshakes) = match access {
            Access::Write { .. } => {
                self.writes += 1;
                self.writes_todo.push_back(index);
                (Some(self.writes - 1), 2)
            }
            Access::Read { .. } => {
                self.reads_todo.push_back(index);
                (None, 1)
            }
        };
        self.all.push(Progress {
            access,
            write_index,
            offered: None,
            handshakes,
            accepted: 0,
            addr_taken: 0,
            data_taken: 0,
        });
        index
    }

    /// Whether every access pushed has its response.
    pub fn is_idle(&self) -> bool {
        self.finished == self.all.len()
    }

    /// The accesses finished since the last call, in the order their responses came.
    pub fn take_done(&mut self) -> Vec<Finished> {
        std::mem::take(&mut self.done)
    }

    /// Protocol violations seen on the slave's side (empty when it behaved).
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Steps `bench` (and `others`) until every access pushed is answered.
    pub fn run(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
    ) -> Result<(), VerifError> {
        let limit = TIMEOUT_CYCLES + 200 * self.all.len() as u64;
        for _ in 0..limit {
            if self.is_idle() {
                return Ok(());
            }
            bench.step_with(self, others)?;
        }
        let open: Vec<String> = self
            .writes_open
            .iter()
            .chain(self.reads_open.iter())
            .map(|&i| {
                let p = &self.all[i];
                format!(
                    "#{i} {:?} (offered {:?}, {} request handshakes to come)",
                    p.access, p.offered, p.handshakes
                )
            })
            .collect();
        Err(VerifError::Timeout {
            what: format!(
                "{} of {} pipelined AXI-Lite accesses; unanswered: {open:?}",
                self.all.len() - self.finished,
                self.all.len()
            ),
            cycles: limit,
        })
    }

    fn lead(&self, rng: &mut StdRng) -> u32 {
        if rng.random_bool(self.timing.lead) {
            rng.random_range(1..=self.timing.max_lead.max(1))
        } else {
            0
        }
    }

    /// The beat a channel offers this clock (held once offered), after its wait.
    fn offer(q: &mut VecDeque<Waiting>, idle: f64, rng: &mut StdRng) -> Option<usize> {
        let head = q.front_mut()?;
        if head.offered {
            return Some(head.index);
        }
        if head.wait > 0 {
            head.wait -= 1;
            return None;
        }
        if rng.random_bool(idle) {
            return None;
        }
        head.offered = true;
        Some(head.index)
    }

    fn mark_offered(&mut self, index: usize, cycle: u64) {
        let p = &mut self.all[index];
        if p.offered.is_none() {
            p.offered = Some(cycle);
        }
    }

    fn handshake(&mut self, index: usize, cycle: u64, addr: bool) {
        let p = &mut self.all[index];
        if addr {
            p.addr_taken = cycle;
            if matches!(p.access, Access::Read { .. }) {
                p.data_taken = cycle;
            }
        } else {
            p.data_taken = cycle;
        }
        p.handshakes -= 1;
        if p.handshakes == 0 {
            p.accepted = cycle;
        }
    }

    fn hold(rng: &mut StdRng, hold: &mut u32, t: &PipeTiming) -> bool {
        if *hold > 0 {
            *hold -= 1;
            return false;
        }
        if rng.random_bool(t.hold) {
            *hold = rng.random_range(1..=t.max_hold.max(1));
            return false;
        }
        !rng.random_bool(t.backpressure)
    }

    fn finish(&mut self, index: usize, cycle: u64, data: u32, resp: u32) {
        self.finished += 1;
        let p = self.all[index];
        self.done.push(Finished {
            access: p.access,
            index,
            write_index: p.write_index,
            offered: p.offered.unwrap_or(cycle),
            accepted: p.accepted,
            addr_taken: p.addr_taken,
            data_taken: p.data_taken,
            responded: cycle,
            data,
            resp,
        });
    }
}

impl Agent for PipelinedMaster {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        // Start new writes (both channels) and reads within the limits.
        while self.writes_open.len() < self.timing.max_writes {
            let Some(i) = self.writes_todo.pop_front() else {
                break;
            };
            self.writes_open.push_back(i);
            let (a, d) = (self.lead(rng), self.lead(rng));
            self.aw.push_back(Waiting {
                index: i,
                wait: a,
                offered: false,
            });
            self.w.push_back(Waiting {
                index: i,
                wait: d,
                offered: false,
            });
        }
        while self.reads_open.len() < self.timing.max_reads {
            let Some(i) = self.reads_todo.pop_front() else {
                break;
            };
            self.reads_open.push_back(i);
            let wait = self.lead(rng);
            self.ar.push_back(Waiting {
                index: i,
                wait,
                offered: false,
            });
        }
        self.aw_off = Self::offer(&mut self.aw, self.idle, rng);
        self.w_off = Self::offer(&mut self.w, self.idle, rng);
        self.ar_off = Self::offer(&mut self.ar, self.idle, rng);
        let cycle = sim.cycle();
        for i in [self.aw_off, self.w_off, self.ar_off].into_iter().flatten() {
            self.mark_offered(i, cycle);
        }
        let p = self.ports;
        let addr_of =
            |x: Option<usize>, all: &[Progress], rng: &mut StdRng| match x.map(|i| all[i].access) {
                Some(Access::Write { addr, .. } | Access::Read { addr }) => addr,
                None => rng.random(),
            };
        let awaddr = addr_of(self.aw_off, &self.all, rng);
        let araddr = addr_of(self.ar_off, &self.all, rng);
        let (wdata, wstrb) = match self.w_off.map(|i| self.all[i].access) {
            Some(Access::Write { data, strb, .. }) => (data, strb),
            _ => (rng.random(), rng.random_range(0..16)),
        };
        sim.set_u64(p.awaddr, u64::from(awaddr))?;
        sim.set_bit(p.awvalid, self.aw_off.is_some())?;
        sim.set_u64(p.wdata, u64::from(wdata))?;
        if let Some(port) = p.wstrb {
            sim.set_u64(port, u64::from(wstrb))?;
        }
        sim.set_bit(p.wvalid, self.w_off.is_some())?;
        sim.set_u64(p.araddr, u64::from(araddr))?;
        sim.set_bit(p.arvalid, self.ar_off.is_some())?;
        let t = self.timing;
        self.bready = Self::hold(rng, &mut self.b_hold, &t);
        self.rready = Self::hold(rng, &mut self.r_hold, &t);
        sim.set_bit(p.bready, self.bready)?;
        sim.set_bit(p.rready, self.rready)
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let p = self.ports;
        let cycle = sim.cycle();
        if let Some(i) = self.aw_off {
            if sim.get_bit(p.awready)? {
                self.aw.pop_front();
                self.handshake(i, cycle, true);
            }
        }
        if let Some(i) = self.w_off {
            if sim.get_bit(p.wready)? {
                self.w.pop_front();
                self.handshake(i, cycle, false);
            }
        }
        if let Some(i) = self.ar_off {
            if sim.get_bit(p.arready)? {
                self.ar.pop_front();
                self.handshake(i, cycle, true);
            }
        }

        let bvalid = sim.get_bit(p.bvalid)?;
        let bresp = sim.get_u64(p.bresp)? as u32;
        if let Some(prev) = self.stalled_b.take() {
            if !bvalid || bresp != prev {
                self.violations
                    .push(format!("cycle {cycle}: BVALID/BRESP changed before BREADY"));
            }
        }
        if bvalid {
            if !self.bready {
                self.stalled_b = Some(bresp);
            } else {
                match self.writes_open.front().copied() {
                    Some(i) if self.all[i].handshakes == 0 && self.all[i].accepted < cycle => {
                        self.writes_open.pop_front();
                        self.finish(i, cycle, 0, bresp);
                    }
                    _ => self.violations.push(format!(
                        "cycle {cycle}: BVALID with no write whose address and data were taken"
                    )),
                }
            }
        }

        let rvalid = sim.get_bit(p.rvalid)?;
        let rdata = sim.get_u64(p.rdata)? as u32;
        let rresp = sim.get_u64(p.rresp)? as u32;
        if let Some(prev) = self.stalled_r.take() {
            if !rvalid || (rdata, rresp) != prev {
                self.violations
                    .push(format!("cycle {cycle}: RVALID/RDATA changed before RREADY"));
            }
        }
        if rvalid {
            if !self.rready {
                self.stalled_r = Some((rdata, rresp));
            } else {
                match self.reads_open.front().copied() {
                    Some(i) if self.all[i].handshakes == 0 && self.all[i].accepted < cycle => {
                        self.reads_open.pop_front();
                        self.finish(i, cycle, rdata, rresp);
                    }
                    _ => self.violations.push(format!(
                        "cycle {cycle}: RVALID with no read whose address was taken"
                    )),
                }
            }
        }
        Ok(())
    }
}
