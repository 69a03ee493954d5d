//! Several clocks of their own periods on one model: the edges of every clock in time order.
//!
//! [`Verilated::tick`] steps one clock (`clk`). A model with clock domains (`nlb_async_fifo`'s
//! `s_clk`/`m_clk`, a board-level top with 125, 250 and 322 MHz clocks) is stepped by
//! [`Clocks`] instead: each clock has a period and a phase in picoseconds and may change its
//! period or pause at any time; [`Clocks::next_edge`] moves time to the next rising edge of any
//! clock (lowering the clocks whose falling edges come first) and says which clocks rise
//! there, possibly several at the same instant; the bench then does for those domains what it
//! does once per clock with one clock:
//! 1. set each rising domain's inputs (they are sampled at the edge);
//! 2. [`Verilated::eval`];
//! 3. sample each rising domain's outputs (a handshake seen now completes at this edge);
//! 4. [`Clocks::fire`]: the clocks rise, the model settles.
//!
//! Inputs of a domain that does not rise keep their values, so every domain sees inputs that
//! change only just before its own edges. Waveforms (when tracing) are dumped at the real
//! times of every edge.

use crate::error::VerifError;
use crate::verilated::{Port, Verilated};

/// A clock: the model's port, its period and where its first rising edge falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSpec {
    /// The clock input's port name.
    pub port: &'static str,
    /// Period in picoseconds (at least 2).
    pub period_ps: u64,
    /// Time of the first rising edge in picoseconds.
    pub phase_ps: u64,
}

impl ClockSpec {
    /// A clock of `mhz` MHz (the period rounded to a picosecond), first edge after half a period.
    pub fn mhz(port: &'static str, mhz: f64) -> ClockSpec {
        let period_ps = period_of(mhz);
        ClockSpec {
            port,
            period_ps,
            phase_ps: period_ps / 2,
        }
    }

    /// The same clock with its first rising edge at `phase_ps`.
    pub fn with_phase(self, phase_ps: u64) -> ClockSpec {
        ClockSpec { phase_ps, ..self }
    }
}

/// The period in picoseconds of a clock of `mhz` MHz (rounded; at least 2).
pub fn period_of(mhz: f64) -> u64 {
    let ps = (1.0e6 / mhz).round();
    if ps.is_finite() && ps >= 2.0 {
        ps as u64
    } else {
        2
    }
}

/// OpenNIC's clocks: the 100G MAC's (`cmac_clk`, the 322 MHz box), the host side's
/// (`axis_aclk`, the 250 MHz box) and the register clock (`axil_aclk`), in MHz.
pub mod opennic {
    /// 322.265625 MHz: the CMAC's 100G clock.
    pub const CMAC_MHZ: f64 = 322.265625;
    /// 250 MHz: the 250 MHz box (host traffic).
    pub const AXIS_MHZ: f64 = 250.0;
    /// 125 MHz: AXI-Lite registers.
    pub const AXIL_MHZ: f64 = 125.0;
}

/// The clocks that rise at one instant, as a set of indices into the [`Clocks`] list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Edges {
    mask: u32,
    /// The instant, in picoseconds.
    pub time_ps: u64,
}

impl Edges {
    /// Whether clock `i` (its index in the list given to [`Clocks::new`]) rises.
    pub fn has(&self, i: usize) -> bool {
        i < 32 && self.mask & (1u32 << i) != 0
    }

    /// How many clocks rise.
    pub fn count(&self) -> u32 {
        self.mask.count_ones()
    }
}

#[derive(Debug, Clone, Copy)]
struct Clock {
    port: Port,
    period_ps: u64,
    /// The next rising edge (None while paused).
    next_rise: Option<u64>,
    /// The pending falling edge of the current high phase.
    next_fall: Option<u64>,
    rises: u64,
}

/// Clocks of a model, stepped edge by edge in time order (module documentation).
#[derive(Debug)]
pub struct Clocks {
    clocks: Vec<Clock>,
    now_ps: u64,
}

impl Clocks {
    /// The clocks of `specs` on `sim`, all low now (time 0); at most 32.
    pub fn new(sim: &mut Verilated, specs: &[ClockSpec]) -> Result<Clocks, VerifError> {
        if specs.is_empty() || specs.len() > 32 {
            return Err(VerifError::Setup(format!(
                "Clocks takes 1 to 32 clocks, not {}",
                specs.len()
            )));
        }
        let mut clocks = Vec::with_capacity(specs.len());
        for s in specs {
            let port = sim.port(s.port)?;
            if s.period_ps < 2 {
                return Err(VerifError::Setup(format!(
                    "clock {}: a period of {} ps is too short (2 ps at least)",
                    s.port, s.period_ps
                )));
            }
            sim.set_bit(port, false)?;
            clocks.push(Clock {
                port,
                period_ps: s.period_ps,
                next_rise: Some(s.phase_ps),
                next_fall: None,
                rises: 0,
            });
        }
        sim.eval();
        Ok(Clocks { clocks, now_ps: 0 })
    }

    /// The time now, in picoseconds.
    pub fn now_ps(&self) -> u64 {
        self.now_ps
    }

    /// Rising edges clock `i` has had.
    pub fn rises(&self, i: usize) -> u64 {
        self.clocks.get(i).map_or(0, |c| c.rises)
    }

    /// Clock `i`'s period in picoseconds.
    pub fn period_ps(&self, i: usize) -> u64 {
        self.clocks.get(i).map_or(0, |c| c.period_ps)
    }

    /// Whether clock `i` is paused.
    pub fn paused(&self, i: usize) -> bool {
        self.clocks.get(i).is_some_and(|c| c.next_rise.is_none())
    }

    /// Changes clock `i`'s period from its next rising edge on (the current cycle keeps its
    /// length: the next rise stays where it is).
    pub fn set_period(&mut self, i: usize, period_ps: u64) {
        if let Some(c) = self.clocks.get_mut(i) {
            c.period_ps = period_ps.max(2);
        }
    }

    /// Stops clock `i` (low, after its pending falling edge) until [`Clocks::resume`].
    pub fn pause(&mut self, i: usize) {
        if let Some(c) = self.clocks.get_mut(i) {
            c.next_rise = None;
        }
    }

    /// Starts a paused clock `i` again: it rises `delay_ps` from now (at least 1 ps, and not
    /// before its falling edge).
    pub fn resume(&mut self, i: usize, delay_ps: u64) {
        let now = self.now_ps;
        if let Some(c) = self.clocks.get_mut(i) {
            if c.next_rise.is_none() {
                let earliest = c.next_fall.map_or(now + 1, |f| f + 1);
                c.next_rise = Some((now + delay_ps.max(1)).max(earliest));
            }
        }
    }

    /// Moves time to the next rising edge of any clock, lowering on the way every clock whose
    /// falling edge comes first (or at the same instant), and returns the clocks that rise
    /// there (not yet risen: set their domains' inputs, evaluate, sample, then
    /// [`Clocks::fire`]). None when every clock is paused.
    pub fn next_edge(&mut self, sim: &mut Verilated) -> Result<Option<Edges>, VerifError> {
        let Some(t) = self.clocks.iter().filter_map(|c| c.next_rise).min() else {
            return Ok(None);
        };
        // Falling edges up to t, in time order.
        while let Some(f) = self
            .clocks
            .iter()
            .filter_map(|c| c.next_fall)
            .filter(|&f| f <= t)
            .min()
        {
            for c in self.clocks.iter_mut() {
                if c.next_fall == Some(f) {
                    c.next_fall = None;
                    sim.set_bit(c.port, false)?;
                }
            }
            self.now_ps = f;
            sim.eval();
            sim.dump_ps(f);
        }
        self.now_ps = t;
        let mut mask = 0u32;
        for (i, c) in self.clocks.iter().enumerate() {
            if c.next_rise == Some(t) {
                mask |= 1u32 << i;
            }
        }
        Ok(Some(Edges { mask, time_ps: t }))
    }

    /// The clocks of `edges` rise (the instant [`Clocks::next_edge`] returned); the model
    /// settles and the next edges of those clocks are scheduled.
    pub fn fire(&mut self, sim: &mut Verilated, edges: Edges) -> Result<(), VerifError> {
        let t = edges.time_ps;
        for (i, c) in self.clocks.iter_mut().enumerate() {
            if edges.has(i) && c.next_rise == Some(t) {
                sim.set_bit(c.port, true)?;
                c.rises += 1;
                c.next_fall = Some(t + c.period_ps / 2);
                c.next_rise = Some(t + c.period_ps);
            }
        }
        sim.eval();
        sim.dump_ps(t);
        Ok(())
    }
}
