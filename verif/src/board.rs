//! nlb-offload's OpenNIC plugin inside stand-ins of the shell (`nlb_opennic_sim`,
//! hw/boards/opennic/sim): the card as the host and the network see it, with the shell's three
//! clocks in one simulation ([`crate::clocks`]):
//! - the 100G MAC at 322.27 MHz: received frames offered back to back with no `tready` (every
//!   beat is taken), transmitted frames taken with random back-pressure, and the rule that a
//!   transmitted frame's `tvalid` never drops before its last beat checked on every clock;
//! - the QDMA at 250 MHz: host frames into the card-to-network stream (h2c), frames toward the
//!   host taken from the card-to-host stream (c2h, `tuser` checked: from CMAC port 0 to
//!   physical function 0), and the host rings' DMA served from a [`HostMemory`];
//! - BAR 2 at 125 MHz: AXI-Lite accesses at the card's byte offsets (the 322 MHz box's window
//!   at 0x200000, the 250 MHz box's at 0x100000).
//!
//! [`BoardDevice`] puts it behind the driver's [`Device`] trait at the register window the
//! driver uses for an OpenNIC card ([`RegisterWindow::OPENNIC_322MHZ_BOX`]), so discovery,
//! the loader and everything else run against it as against the card.

use crate::axil::{AxiLiteMaster, Completion};
use crate::axis::{AxisPorts, AxisSink, AxisSource};
use crate::bench::Agent;
use crate::clocks::{opennic, ClockSpec, Clocks, Edges};
use crate::error::VerifError;
use crate::host_mem::{AxiHost, HostMemory, HostTiming};
use crate::models::Board;
use crate::top::{frame_beats, take_frames};
use crate::verilated::{Port, Verilated};
use crate::worker::ModelThread;
use nlb_driver::device::{Device, DeviceError, RegOp};
use nlb_driver::vfio::inventory::RegisterWindow;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Index of each clock in the bench's [`Clocks`].
const CMAC: usize = 0;
const AXIS: usize = 1;
const AXIL: usize = 2;
/// Register-clock cycles an access may take before the bench gives up.
const ACCESS_TIMEOUT: u64 = 10_000;
/// MAC clocks with nothing moving after which a traffic run is over.
const QUIET_CLOCKS: u64 = 3_000;
/// Bytes of the 322 MHz box's register window (the plugin's part of BAR 2).
const WINDOW_BYTES: u32 = 0x10_0000;

/// How the bench's agents time what they do.
#[derive(Debug, Clone, Copy)]
pub struct BoardTiming {
    /// Probability of holding the MAC's transmit `tready` low in a clock.
    pub mac_backpressure: f64,
    /// Probability of holding the QDMA's card-to-host `tready` low in a clock.
    pub c2h_backpressure: f64,
    /// Probability of an idle clock between two host-frame beats on the h2c stream.
    pub h2c_idle: f64,
    /// Probability of an idle clock between two received beats (the MAC's receive side has
    /// no tready; 0: back to back).
    pub mac_rx_idle: f64,
}

impl Default for BoardTiming {
    fn default() -> BoardTiming {
        BoardTiming {
            mac_backpressure: 0.1,
            c2h_backpressure: 0.1,
            h2c_idle: 0.2,
            mac_rx_idle: 0.0,
        }
    }
}

/// A frame into the MAC's receive side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacFrame {
    /// The frame (no FCS).
    pub bytes: Vec<u8>,
    /// The MAC marks it bad (its FCS did not match): `tuser_err` on its last beat.
    pub bad: bool,
}

/// What came out of a traffic run, per output, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoardTraffic {
    /// Frames the MAC transmitted.
    pub mac_tx: Vec<Vec<u8>>,
    /// Frames the card sent up the QDMA card-to-host stream.
    pub c2h: Vec<Vec<u8>>,
    /// MAC clocks from the first frame offered to the last output beat.
    pub mac_clocks: u64,
}

/// Watches one stream for the OpenNIC shell's rules: `tvalid` stays high from a frame's first
/// beat to its last (the MAC's transmit side needs it), and, where given, `tuser` words that
/// must hold fixed values on every beat.
#[derive(Debug)]
struct StreamRules {
    name: &'static str,
    tvalid: Port,
    tready: Option<Port>,
    tlast: Port,
    fixed: Vec<(Port, u64, &'static str)>,
    in_frame: bool,
    clock: u64,
    violations: Vec<String>,
}

impl StreamRules {
    fn new(
        sim: &Verilated,
        name: &'static str,
        prefix: &str,
        fixed: &[(&'static str, u64)],
    ) -> Result<StreamRules, VerifError> {
        let p = |s: &str| sim.port(&format!("{prefix}_{s}"));
        let ready = format!("{prefix}_tready");
        Ok(StreamRules {
            name,
            tvalid: p("tvalid")?,
            tready: sim.has_port(&ready).then(|| sim.port(&ready)).transpose()?,
            tlast: p("tlast")?,
            fixed: fixed
                .iter()
                .map(|&(s, v)| Ok((p(s)?, v, s)))
                .collect::<Result<_, VerifError>>()?,
            in_frame: false,
            clock: 0,
            violations: Vec::new(),
        })
    }

    /// After the domain's inputs are set and the model settled, before its edge.
    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        self.clock += 1;
        let valid = sim.get_bit(self.tvalid)?;
        if self.in_frame && !valid && self.violations.len() < 8 {
            self.violations.push(format!(
                "{}: tvalid dropped inside a frame at clock {}",
                self.name, self.clock
            ));
        }
        if !valid {
            return Ok(());
        }
        for &(port, want, what) in &self.fixed {
            let got = sim.get_u64(port)?;
            if got != want && self.violations.len() < 8 {
                self.violations.push(format!(
                    "{}: {what} {got:#x} (the shell expects {want:#x}) at clock {}",
                    self.name, self.clock
                ));
            }
        }
        let taken = match self.tready {
            Some(r) => sim.get_bit(r)?,
            None => true,
        };
        if taken {
            self.in_frame = !sim.get_bit(self.tlast)?;
        }
        Ok(())
    }
}

/// The plugin in the shell stand-ins, stepped edge by edge.
#[derive(Debug)]
pub struct BoardBench {
    sim: Verilated,
    clocks: Clocks,
    rng: StdRng,
    axil: AxiLiteMaster,
    mac_rx: AxisSource,
    mac_tx: AxisSink,
    h2c: AxisSource,
    c2h: AxisSink,
    host: AxiHost,
    rules: Vec<(usize, StreamRules)>,
    overflow: Port,
}

impl BoardBench {
    /// The model out of reset (the shell's module reset, held for 16 register clocks, until the
    /// plugin says it is done), with `timing` and a generator seeded by `seed`; the host rings'
    /// DMA serves `host_memory`.
    pub fn new(
        seed: u64,
        timing: BoardTiming,
        host_memory: HostMemory,
    ) -> Result<BoardBench, VerifError> {
        let mut sim = Verilated::new::<Board>()?;
        let clocks = Clocks::new(
            &mut sim,
            &[
                ClockSpec::mhz("cmac_clk", opennic::CMAC_MHZ),
                ClockSpec::mhz("axis_aclk", opennic::AXIS_MHZ).with_phase(1_300),
                ClockSpec::mhz("axil_aclk", opennic::AXIL_MHZ).with_phase(2_100),
            ],
        )?;
        let axil = AxiLiteMaster::new(&sim, "s_axil", 0.0, 0.0)?;
        // The MAC's error flag (bad FCS) rides as this source's tuser, set on a bad frame's
        // last beat.
        let mac_rx = AxisSource::on(
            AxisPorts::new(&sim, "s_axis_cmac_rx")?
                .with_user(sim.port("s_axis_cmac_rx_tuser_err")?),
            timing.mac_rx_idle,
        );
        let mac_tx = AxisSink::new(&sim, "m_axis_cmac_tx", timing.mac_backpressure)?;
        let h2c = AxisSource::new(&sim, "s_axis_qdma_h2c", timing.h2c_idle)?;
        let c2h = AxisSink::new(&sim, "m_axis_qdma_c2h", timing.c2h_backpressure)?;
        let host = AxiHost::opennic(&sim, host_memory, HostTiming::pcie(), seed ^ 0x5eed)?;
        let rules = vec![
            (
                CMAC,
                StreamRules::new(&sim, "MAC transmit", "m_axis_cmac_tx", &[("tuser_err", 0)])?,
            ),
            (
                AXIS,
                StreamRules::new(
                    &sim,
                    "QDMA card-to-host",
                    "m_axis_qdma_c2h",
                    // From CMAC port 0 (bit 6), to physical function 0 (bit 0).
                    &[("tuser_src", 0x40), ("tuser_dst", 0x1)],
                )?,
            ),
        ];
        let overflow = sim.port("adap_rx_overflow")?;
        let mut bench = BoardBench {
            sim,
            clocks,
            rng: StdRng::seed_from_u64(seed),
            axil,
            mac_rx,
            mac_tx,
            h2c,
            c2h,
            host,
            rules,
            overflow,
        };
        for (port, v) in [
            ("s_axis_qdma_h2c_tuser_src", 0),
            ("s_axis_qdma_h2c_tuser_dst", 0x40),
        ] {
            let p = bench.sim.port(port)?;
            bench.sim.set_u64(p, v)?;
        }
        bench.reset()?;
        Ok(bench)
    }

    /// The shell's reset of the user modules: `mod_rstn` low for 16 register clocks, then
    /// high until the plugin raises `mod_rst_done`.
    pub fn reset(&mut self) -> Result<(), VerifError> {
        let rstn = self.sim.port("mod_rstn")?;
        let done = self.sim.port("mod_rst_done")?;
        self.sim.set_bit(rstn, false)?;
        let start = self.clocks.rises(AXIL);
        while self.clocks.rises(AXIL) < start + 16 {
            self.edge()?;
        }
        self.sim.set_bit(rstn, true)?;
        while !self.sim.get_bit(done)? {
            if self.clocks.rises(AXIL) > start + 1_000 {
                return Err(VerifError::Timeout {
                    what: "the plugin's mod_rst_done after a reset".into(),
                    cycles: 1_000,
                });
            }
            self.edge()?;
        }
        Ok(())
    }

    /// Moves to the next clock edge and does, for each domain that rises there, what its agents
    /// do once per clock.
    fn edge(&mut self) -> Result<Edges, VerifError> {
        let edges = self
            .clocks
            .next_edge(&mut self.sim)?
            .ok_or_else(|| VerifError::Setup("every clock stopped".into()))?;
        let sim = &mut self.sim;
        let rng = &mut self.rng;
        if edges.has(CMAC) {
            self.mac_rx.drive(sim, rng)?;
            self.mac_tx.drive(sim, rng)?;
        }
        if edges.has(AXIS) {
            self.h2c.drive(sim, rng)?;
            self.c2h.drive(sim, rng)?;
            self.host.drive(sim, rng)?;
        }
        if edges.has(AXIL) {
            self.axil.drive(sim, rng)?;
        }
        sim.eval();
        if edges.has(CMAC) {
            self.mac_rx.observe(sim)?;
            self.mac_tx.observe(sim)?;
        }
        if edges.has(AXIS) {
            self.h2c.observe(sim)?;
            self.c2h.observe(sim)?;
            self.host.observe(sim)?;
        }
        if edges.has(AXIL) {
            self.axil.observe(sim)?;
        }
        for (domain, r) in &mut self.rules {
            if edges.has(*domain) {
                r.observe(sim)?;
            }
        }
        self.clocks.fire(sim, edges)?;
        Ok(edges)
    }

    /// One AXI-Lite access at BAR 2 byte offset `addr` (a write if `data` is given), the other
    /// clocks running; its completion.
    pub fn access(&mut self, addr: u32, data: Option<u32>) -> Result<Completion, VerifError> {
        match data {
            Some(v) => self.axil.queue_write(addr, v),
            None => self.axil.queue_read(addr),
        }
        let start = self.clocks.rises(AXIL);
        loop {
            if let Some(c) = self.axil.pop_completion() {
                return Ok(c);
            }
            if self.clocks.rises(AXIL) > start + ACCESS_TIMEOUT {
                return Err(VerifError::Timeout {
                    what: format!("the BAR 2 access at {addr:#x}"),
                    cycles: ACCESS_TIMEOUT,
                });
            }
            self.edge()?;
        }
    }

    /// Runs `clocks` MAC clocks.
    pub fn run(&mut self, clocks: u64) -> Result<(), VerifError> {
        let end = self.clocks.rises(CMAC) + clocks;
        while self.clocks.rises(CMAC) < end {
            self.edge()?;
        }
        Ok(())
    }

    /// Offers `rx` to the MAC's receive side, back to back, and `h2c` to the QDMA's
    /// host-to-card stream at the same time; runs until both are in and nothing has come out
    /// for a while; what came out.
    pub fn traffic(&mut self, rx: &[Vec<u8>], h2c: &[Vec<u8>]) -> Result<BoardTraffic, VerifError> {
        let rx: Vec<MacFrame> = rx
            .iter()
            .map(|f| MacFrame {
                bytes: f.clone(),
                bad: false,
            })
            .collect();
        self.traffic_marked(&rx, h2c)
    }

    /// As [`BoardBench::traffic`], with frames the MAC marks bad (`tuser_err` on the last beat).
    pub fn traffic_marked(
        &mut self,
        rx: &[MacFrame],
        h2c: &[Vec<u8>],
    ) -> Result<BoardTraffic, VerifError> {
        for f in rx {
            let mut beats = frame_beats(&f.bytes);
            let n = beats.len();
            for (i, mut b) in beats.drain(..).enumerate() {
                b.user = vec![u32::from(f.bad && i + 1 == n)];
                self.mac_rx.push(b);
            }
        }
        for f in h2c {
            for b in frame_beats(f) {
                self.h2c.push(b);
            }
        }
        let start = self.clocks.rises(CMAC);
        let mut tx_beats = Vec::new();
        let mut c2h_beats = Vec::new();
        let mut last_activity = start;
        let mut dma_moved = self.host.write_beats + self.host.read_bursts;
        loop {
            self.edge()?;
            let now = self.clocks.rises(CMAC);
            let (t, c) = (self.mac_tx.take(), self.c2h.take());
            // The host rings' DMA counts as activity: records reach host memory after the
            // frames that made them have left.
            let moved = self.host.write_beats + self.host.read_bursts;
            if !t.is_empty()
                || !c.is_empty()
                || self.mac_rx.pending() + self.h2c.pending() > 0
                || moved != dma_moved
                || !self.host.idle()
            {
                last_activity = now;
                dma_moved = moved;
            }
            tx_beats.extend(t);
            c2h_beats.extend(c);
            if now > last_activity + QUIET_CLOCKS {
                break;
            }
        }
        let out = BoardTraffic {
            mac_tx: take_frames(&mut tx_beats),
            c2h: take_frames(&mut c2h_beats),
            mac_clocks: last_activity - start,
        };
        if !tx_beats.is_empty() || !c2h_beats.is_empty() {
            return Err(VerifError::Setup(format!(
                "{} MAC and {} host beats left without their last beat",
                tx_beats.len(),
                c2h_beats.len()
            )));
        }
        Ok(out)
    }

    /// Every rule broken so far: the shell's stream rules, AXI-Lite and AXI-Stream protocol,
    /// and beats lost in the shell's receive adapter.
    pub fn violations(&mut self) -> Result<Vec<String>, VerifError> {
        let mut v: Vec<String> = self.axil.violations().to_vec();
        v.extend(self.mac_tx.violations().iter().cloned());
        v.extend(self.c2h.violations().iter().cloned());
        for (_, r) in &self.rules {
            v.extend(r.violations.iter().cloned());
        }
        if self.sim.get_bit(self.overflow)? {
            v.push("a frame beat toward the host found the shell's receive adapter full".into());
        }
        Ok(v)
    }

    /// The host memory the rings' DMA writes.
    pub fn host_memory(&self) -> Option<&HostMemory> {
        self.host.memory()
    }
}

enum Request {
    Access(u32, Option<u32>),
    Batch(Vec<RegOp>),
    Run(u64),
    Traffic(Vec<MacFrame>, Vec<Vec<u8>>),
    Violations,
}

enum Response {
    Done(Completion),
    Values(Vec<u32>),
    Ran,
    Traffic(BoardTraffic),
    Violations(Vec<String>),
}

/// The plugin as a [`Device`]: register `r` is BAR 2 byte `0x200000 + r`, as the driver maps
/// an OpenNIC card ([`RegisterWindow::OPENNIC_322MHZ_BOX`]). The model runs on a thread of
/// its own (a Verilated model is not `Send`).
#[derive(Debug)]
pub struct BoardDevice {
    thread: ModelThread<Request, Response>,
}

/// BAR 2 byte offset of the plugin's register 0.
fn window_base() -> u32 {
    RegisterWindow::OPENNIC_322MHZ_BOX.offset as u32
}

fn unexpected() -> DeviceError {
    DeviceError::Protocol("unexpected answer from the board model".into())
}

fn to_device(addr: u32, c: Completion) -> Result<u32, DeviceError> {
    match c {
        Completion::Read { data, resp: 0, .. } => Ok(data),
        Completion::Write { resp: 0, .. } => Ok(0),
        Completion::Read { resp, .. } | Completion::Write { resp, .. } => {
            Err(DeviceError::Protocol(format!(
                "BAR 2 offset {addr:#x} answered AXI response {resp}"
            )))
        }
    }
}

impl BoardDevice {
    /// Starts the model (out of reset, pipeline disabled) on its own thread, with no host
    /// memory behind the host rings' DMA (every transfer refused).
    pub fn new(seed: u64, timing: BoardTiming) -> Result<BoardDevice, VerifError> {
        BoardDevice::with_memory(seed, timing, HostMemory::new(0, 0))
    }

    /// [`BoardDevice::new`] with `host_memory` behind the host rings' DMA (the QDMA's bridge).
    pub fn with_memory(
        seed: u64,
        timing: BoardTiming,
        host_memory: HostMemory,
    ) -> Result<BoardDevice, VerifError> {
        let thread = ModelThread::start(
            "nlb-board",
            "board model",
            move || BoardBench::new(seed, timing, host_memory),
            handle,
        )?;
        Ok(BoardDevice { thread })
    }

    fn call(&mut self, r: Request) -> Result<Response, DeviceError> {
        self.thread.call(r)
    }

    /// One access at any BAR 2 byte offset (the 250 MHz box's window, the plugin's own
    /// registers, addresses nothing answers): the AXI completion as the bus gave it.
    pub fn bar2(&mut self, addr: u32, data: Option<u32>) -> Result<Completion, DeviceError> {
        match self.call(Request::Access(addr, data))? {
            Response::Done(c) => Ok(c),
            _ => Err(unexpected()),
        }
    }

    /// Frames into the MAC's receive side and the QDMA's host-to-card stream; what came out.
    pub fn traffic(
        &mut self,
        rx: Vec<Vec<u8>>,
        h2c: Vec<Vec<u8>>,
    ) -> Result<BoardTraffic, DeviceError> {
        let rx = rx
            .into_iter()
            .map(|bytes| MacFrame { bytes, bad: false })
            .collect();
        self.traffic_marked(rx, h2c)
    }

    /// As [`BoardDevice::traffic`], with frames the MAC marks bad.
    pub fn traffic_marked(
        &mut self,
        rx: Vec<MacFrame>,
        h2c: Vec<Vec<u8>>,
    ) -> Result<BoardTraffic, DeviceError> {
        match self.call(Request::Traffic(rx, h2c))? {
            Response::Traffic(t) => Ok(t),
            _ => Err(unexpected()),
        }
    }

    /// Every rule broken so far ([`BoardBench::violations`]).
    pub fn violations(&mut self) -> Result<Vec<String>, DeviceError> {
        match self.call(Request::Violations)? {
            Response::Violations(v) => Ok(v),
            _ => Err(unexpected()),
        }
    }
}

fn handle(b: &mut BoardBench, r: Request) -> Result<Response, VerifError> {
    Ok(match r {
        Request::Access(addr, data) => Response::Done(b.access(addr, data)?),
        Request::Batch(ops) => {
            let mut values = Vec::new();
            for op in ops {
                match op {
                    RegOp::Read(o) => {
                        let addr = window_base() + o;
                        let v = to_device(addr, b.access(addr, None)?)
                            .map_err(|e| VerifError::Setup(e.to_string()))?;
                        values.push(v);
                    }
                    RegOp::Write(o, v) => {
                        let addr = window_base() + o;
                        to_device(addr, b.access(addr, Some(v))?)
                            .map_err(|e| VerifError::Setup(e.to_string()))?;
                    }
                }
            }
            Response::Values(values)
        }
        Request::Run(clocks) => {
            b.run(clocks)?;
            Response::Ran
        }
        Request::Traffic(rx, h2c) => Response::Traffic(b.traffic_marked(&rx, &h2c)?),
        Request::Violations => Response::Violations(b.violations()?),
    })
}

fn check(offset: u32) -> Result<(), DeviceError> {
    if !offset.is_multiple_of(4) {
        return Err(DeviceError::BadOffset {
            offset,
            why: "not 4-byte aligned",
        });
    }
    if offset >= WINDOW_BYTES {
        return Err(DeviceError::BadOffset {
            offset,
            why: "beyond the 322 MHz box's 1 MiB window",
        });
    }
    Ok(())
}

impl Device for BoardDevice {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        check(offset)?;
        let addr = window_base() + offset;
        let c = self.bar2(addr, None)?;
        to_device(addr, c)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        check(offset)?;
        let addr = window_base() + offset;
        let c = self.bar2(addr, Some(value))?;
        to_device(addr, c).map(|_| ())
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        for op in ops {
            let (RegOp::Read(o) | RegOp::Write(o, _)) = *op;
            check(o)?;
        }
        match self.call(Request::Batch(ops.to_vec()))? {
            Response::Values(v) => {
                reads.extend(v);
                Ok(())
            }
            _ => Err(unexpected()),
        }
    }

    /// Runs the MAC clock (1000 clocks per millisecond asked, at most 100k).
    fn wait(&mut self, d: std::time::Duration) -> Result<(), DeviceError> {
        let clocks = (d.as_millis() as u64 * 1000).clamp(1, 100_000);
        match self.call(Request::Run(clocks))? {
            Response::Ran => Ok(()),
            _ => Err(unexpected()),
        }
    }

    fn describe(&self) -> String {
        "rtl:OpenNIC plugin in the shell stand-ins (Verilator)".to_string()
    }
}
