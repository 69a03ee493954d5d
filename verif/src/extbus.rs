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
