//! AXI-Stream agents: a source that feeds a model's sink port with random idle cycles, and a
//! sink that drains a model's source port with random back-pressure and checks the stream
//! rules (a beat once offered stays offered, unchanged, until taken).

use crate::bench::Agent;
use crate::error::VerifError;
use crate::verilated::{Port, Verilated};
use rand::rngs::StdRng;
use rand::RngExt;
use std::collections::VecDeque;

/// The ports of one AXI-Stream interface (`<prefix>_tdata`, `_tkeep`, `_tvalid`, `_tready`,
/// `_tlast`, `_tuser`; keep, last and user are optional, and so is `tready` of a sink that
/// takes a beat in every clock it is valid, as `nlb_top`'s receive port).
#[derive(Debug, Clone, Copy)]
pub struct AxisPorts {
    tdata: Port,
    tkeep: Option<Port>,
    tvalid: Port,
    tready: Option<Port>,
    tlast: Option<Port>,
    tuser: Option<Port>,
}

impl AxisPorts {
    /// Finds the interface with this prefix (`s_axis`, `m_axis_punt`, ...).
    pub fn new(sim: &Verilated, prefix: &str) -> Result<AxisPorts, VerifError> {
        let opt = |s: &str| {
            let name = format!("{prefix}_{s}");
            sim.has_port(&name).then(|| sim.port(&name)).transpose()
        };
        Ok(AxisPorts {
            tdata: sim.port(&format!("{prefix}_tdata"))?,
            tkeep: opt("tkeep")?,
            tvalid: sim.port(&format!("{prefix}_tvalid"))?,
            tready: opt("tready")?,
            tlast: opt("tlast")?,
            tuser: opt("tuser")?,
        })
    }

    /// An interface named `<prefix>_data`, `_keep`, `_valid`, `_ready`, `_last` (no user), as
    /// `nlb_editor`'s frame input `s_frame_*` is.
    pub fn plain(sim: &Verilated, prefix: &str) -> Result<AxisPorts, VerifError> {
        let p = |s: &str| sim.port(&format!("{prefix}_{s}"));
        Ok(AxisPorts {
            tdata: p("data")?,
            tkeep: Some(p("keep")?),
            tvalid: p("valid")?,
            tready: Some(p("ready")?),
            tlast: Some(p("last")?),
            tuser: None,
        })
    }

    /// The same interface with `tuser` on a port of another name (the CMAC's `_tuser_err`).
    pub fn with_user(self, port: Port) -> AxisPorts {
        AxisPorts {
            tuser: Some(port),
            ..self
        }
    }

    /// An all-zero beat of this interface's shape.
    pub fn empty_beat(&self) -> Beat {
        Beat {
            data: vec![0; self.tdata.words],
            keep: vec![0; self.tkeep.map_or(0, |p| p.words)],
            last: false,
            user: vec![0; self.tuser.map_or(0, |p| p.words)],
        }
    }

    fn write(&self, sim: &mut Verilated, beat: &Beat) -> Result<(), VerifError> {
        sim.set(self.tdata, &beat.data)?;
        if let Some(p) = self.tkeep {
            sim.set(p, &beat.keep)?;
        }
        if let Some(p) = self.tlast {
            sim.set_bit(p, beat.last)?;
        }
        if let Some(p) = self.tuser {
            sim.set(p, &beat.user)?;
        }
        Ok(())
    }

    fn read(&self, sim: &mut Verilated) -> Result<Beat, VerifError> {
        let mut beat = self.empty_beat();
        sim.get(self.tdata, &mut beat.data)?;
        if let Some(p) = self.tkeep {
            sim.get(p, &mut beat.keep)?;
        }
        if let Some(p) = self.tlast {
            beat.last = sim.get_bit(p)?;
        }
        if let Some(p) = self.tuser {
            sim.get(p, &mut beat.user)?;
        }
        Ok(beat)
    }

    /// A beat of random data, keep, user and last, each within its port's width.
    pub fn random_beat(&self, rng: &mut StdRng) -> Beat {
        let mut b = self.empty_beat();
        fill_width(&mut b.data, self.tdata.width, rng);
        if let Some(p) = self.tkeep {
            fill_width(&mut b.keep, p.width, rng);
        }
        if let Some(p) = self.tuser {
            fill_width(&mut b.user, p.width, rng);
        }
        b.last = self.tlast.is_some() && rng.random();
        b
    }
}

/// Random words holding `width` bits (the bits above are 0).
fn fill_width(words: &mut [u32], width: u32, rng: &mut StdRng) {
    rng.fill(words);
    if let Some(top) = words.last_mut() {
        if !width.is_multiple_of(32) {
            *top &= (1u32 << (width % 32)) - 1;
        }
    }
}

/// One transfer: data, keep and user as little-endian words (word 0 = bits 31..0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// tdata.
    pub data: Vec<u32>,
    /// tkeep (empty when the interface has none).
    pub keep: Vec<u32>,
    /// tlast.
    pub last: bool,
    /// tuser (empty when the interface has none).
    pub user: Vec<u32>,
}

/// Feeds beats into a model's sink interface.
#[derive(Debug)]
pub struct AxisSource {
    ports: AxisPorts,
    queue: VecDeque<Beat>,
    presenting: bool,
    /// Probability of staying idle on a clock where a beat could be offered.
    pub idle: f64,
    sent: u64,
}

impl AxisSource {
    /// A source on the model's `prefix` sink interface.
    pub fn new(sim: &Verilated, prefix: &str, idle: f64) -> Result<AxisSource, VerifError> {
        Ok(AxisSource {
            ports: AxisPorts::new(sim, prefix)?,
            queue: VecDeque::new(),
            presenting: false,
            idle,
            sent: 0,
        })
    }

    /// A source on an interface found otherwise (see [`AxisPorts::plain`]).
    pub fn on(ports: AxisPorts, idle: f64) -> AxisSource {
        AxisSource {
            ports,
            queue: VecDeque::new(),
            presenting: false,
            idle,
            sent: 0,
        }
    }

    /// The interface's ports.
    pub fn ports(&self) -> &AxisPorts {
        &self.ports
    }

    /// Whether the model's interface has no `tready`: every beat offered is taken.
    pub fn without_ready(&self) -> bool {
        self.ports.tready.is_none()
    }

    /// Queues a beat.
    pub fn push(&mut self, beat: Beat) {
        self.queue.push_back(beat);
    }

    /// Beats queued and not yet taken by the model.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Beats the model has taken.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

impl Agent for AxisSource {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        if !self.presenting && !self.queue.is_empty() && !rng.random_bool(self.idle) {
            self.presenting = true;
        }
        match (self.presenting, self.queue.front()) {
            (true, Some(beat)) => self.ports.write(sim, beat)?,
            // Nothing offered: drive noise, so a model that looks at data without valid shows.
            _ => {
                let noise = self.ports.random_beat(rng);
                self.ports.write(sim, &noise)?;
                self.presenting = false;
            }
        }
        sim.set_bit(self.ports.tvalid, self.presenting)
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        // Without tready the model takes every beat offered.
        let ready = match self.ports.tready {
            Some(p) => sim.get_bit(p)?,
            None => true,
        };
        if self.presenting && ready {
            self.queue.pop_front();
            self.presenting = false;
            self.sent += 1;
        }
        Ok(())
    }
}

/// Drains a model's source interface.
#[derive(Debug)]
pub struct AxisSink {
    ports: AxisPorts,
    /// Probability of holding tready low on a clock.
    pub backpressure: f64,
    ready: bool,
    received: Vec<Beat>,
    /// The beat offered but not taken last clock: it must be offered again, unchanged.
    stalled: Option<Beat>,
    violations: Vec<String>,
}

impl AxisSink {
    /// A sink on the model's `prefix` source interface.
    pub fn new(sim: &Verilated, prefix: &str, backpressure: f64) -> Result<AxisSink, VerifError> {
        let ports = AxisPorts::new(sim, prefix)?;
        // A sink drives tready: the port must have one.
        sim.port(&format!("{prefix}_tready"))?;
        Ok(AxisSink {
            ports,
            backpressure,
            ready: false,
            received: Vec::new(),
            stalled: None,
            violations: Vec::new(),
        })
    }

    /// Beats received so far.
    pub fn received(&self) -> &[Beat] {
        &self.received
    }

    /// Takes the beats received so far.
    pub fn take(&mut self) -> Vec<Beat> {
        std::mem::take(&mut self.received)
    }

    /// Stream-rule violations seen (empty when the model behaved).
    pub fn violations(&self) -> &[String] {
        &self.violations
    }
}

impl Agent for AxisSink {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        self.ready = !rng.random_bool(self.backpressure);
        match self.ports.tready {
            Some(p) => sim.set_bit(p, self.ready),
            None => Ok(()),
        }
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let valid = sim.get_bit(self.ports.tvalid)?;
        let beat = if valid || self.stalled.is_some() {
            Some(self.ports.read(sim)?)
        } else {
            None
        };
        if let Some(prev) = self.stalled.take() {
            if !valid {
                self.violations.push(format!(
                    "cycle {}: tvalid dropped before the beat was taken",
                    sim.cycle()
                ));
            } else if beat.as_ref() != Some(&prev) {
                self.violations.push(format!(
                    "cycle {}: the offered beat changed before it was taken",
                    sim.cycle()
                ));
            }
        }
        if let (true, Some(beat)) = (valid, beat) {
            if self.ready {
                self.received.push(beat);
            } else {
                self.stalled = Some(beat);
            }
        }
        Ok(())
    }
}
