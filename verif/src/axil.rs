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
    awaddr: Port,
    awvalid: Port,
    awready: Port,
    wdata: Port,
    wstrb: Port,
    wvalid: Port,
    wready: Port,
    bresp: Port,
    bvalid: Port,
    bready: Port,
    araddr: Port,
    arvalid: Port,
    arready: Port,
    rdata: Port,
    rresp: Port,
    rvalid: Port,
    rready: Port,
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
            wstrb: p("wstrb")?,
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
        sim.set_u64(p.wstrb, u64::from(strb))?;
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
