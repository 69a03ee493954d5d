//! Host memory for the NIC's host rings (docs/pipeline.md §15): one region of bytes at an IOVA,
//! shared by the golden model's DMA engine (through [`HostPort`], a `firmware_sim` DMA port)
//! and `nlb_top`'s AXI4 master (through [`AxiHost`], the slave the shell's PCIe DMA would be),
//! so a test can give both devices the same host memory layout and compare what each wrote.
//!
//! [`AxiHost`] may serve the driver's own host memory instead ([`AxiHost::serve_driver`]: the
//! regions `nlb_driver` maps for the device's DMA, through its `HostPort`), so the driver's
//! rings run against `nlb_top` as against a card.
//!
//! A transfer that touches a byte outside the region is refused whole: the model's port
//! returns a fault, the AXI slave answers SLVERR (for a write burst, before writing any of its
//! beats), as an IOMMU refuses an address it does not map for the device.

use crate::bench::Agent;
use crate::error::VerifError;
use crate::verilated::{Port, Verilated};
use firmware_sim::dma::{DmaFault, DmaPort};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes of one AXI beat (512 bits).
const BEAT: u64 = 64;
/// AXI response codes.
const OKAY: u64 = 0;
const SLVERR: u64 = 2;

/// The region: `len` bytes from IOVA `base`, and the MSI-X messages the device raised.
#[derive(Debug, Clone)]
pub struct HostMemory {
    base: u64,
    bytes: Arc<Mutex<Vec<u8>>>,
    interrupts: Arc<Mutex<Vec<u16>>>,
}

impl HostMemory {
    /// `len` zero bytes at IOVA `base`.
    pub fn new(base: u64, len: usize) -> HostMemory {
        HostMemory {
            base,
            bytes: Arc::new(Mutex::new(vec![0; len])),
            interrupts: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// First IOVA.
    pub fn base(&self) -> u64 {
        self.base
    }

    fn range(&self, iova: u64, n: usize) -> Option<std::ops::Range<usize>> {
        let at = usize::try_from(iova.checked_sub(self.base)?).ok()?;
        let end = at.checked_add(n)?;
        let len = self
            .bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (end <= len).then_some(at..end)
    }

    /// Whether every byte of `[iova, iova + n)` is in the region.
    pub fn mapped(&self, iova: u64, n: usize) -> bool {
        self.range(iova, n).is_some()
    }

    /// `n` bytes from `iova`, or `None` outside the region.
    pub fn read(&self, iova: u64, n: usize) -> Option<Vec<u8>> {
        let r = self.range(iova, n)?;
        Some(self.bytes.lock().unwrap_or_else(PoisonError::into_inner)[r].to_vec())
    }

    /// Writes `data` at `iova`; false (nothing written) outside the region.
    pub fn write(&self, iova: u64, data: &[u8]) -> bool {
        let Some(r) = self.range(iova, data.len()) else {
            return false;
        };
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner)[r].copy_from_slice(data);
        true
    }

    /// Little-endian words in at `iova` (the host writing a descriptor).
    pub fn write_words(&self, iova: u64, words: &[u32]) -> bool {
        let b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.write(iova, &b)
    }

    /// Every byte of the region.
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The MSI-X vectors raised so far, in order.
    pub fn interrupts(&self) -> Vec<u16> {
        self.interrupts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn interrupt(&self, vector: u16) {
        self.interrupts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(vector);
    }

    /// The port the golden model's DMA engine gets.
    pub fn port(&self) -> HostPort {
        HostPort(self.clone())
    }
}

/// The region as a `firmware_sim` DMA port.
#[derive(Debug)]
pub struct HostPort(HostMemory);

impl DmaPort for HostPort {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        match self.0.read(iova, buf.len()) {
            Some(b) => {
                buf.copy_from_slice(&b);
                Ok(())
            }
            None => Err(DmaFault {
                iova,
                len: buf.len(),
            }),
        }
    }

    fn write(&mut self, iova: u64, data: &[u8]) -> Result<(), DmaFault> {
        if self.0.write(iova, data) {
            Ok(())
        } else {
            Err(DmaFault {
                iova,
                len: data.len(),
            })
        }
    }

    fn interrupt(&mut self, vector: u16) {
        self.0.interrupt(vector);
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// How the AXI slave times its answers.
#[derive(Debug, Clone, Copy)]
pub struct HostTiming {
    /// Probability of taking an offered address (AW, AR) or write beat in a clock.
    pub ready: f64,
    /// Clocks from a burst's last write beat (or a read's address) to its answer: uniform.
    pub latency: (u64, u64),
}

impl HostTiming {
    /// A PCIe DMA seen from the FPGA: answers after 20-120 clocks, each channel taking what
    /// it is offered three clocks in four.
    pub fn pcie() -> HostTiming {
        HostTiming {
            ready: 0.75,
            latency: (20, 120),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Ports {
    awaddr: Port,
    awlen: Port,
    awvalid: Port,
    awready: Port,
    wdata: Port,
    wstrb: Port,
    wlast: Port,
    wvalid: Port,
    wready: Port,
    bresp: Port,
    bvalid: Port,
    bready: Port,
    araddr: Port,
    arlen: Port,
    arvalid: Port,
    arready: Port,
    rdata: Port,
    rresp: Port,
    rlast: Port,
    rvalid: Port,
    rready: Port,
    irq: Irq,
}

/// How the master asks for MSI-X messages.
#[derive(Debug, Clone, Copy)]
enum Irq {
    /// `nlb_top`'s `m_dma_irq`: one clock per message, bit = vector.
    Pulses(Port),
    /// The OpenNIC plugin's `m_host_irq_valid`/`_vector`/`_ready`: a vector held until taken.
    Handshake {
        valid: Port,
        vector: Port,
        ready: Port,
    },
    /// A master without MSI-X requests.
    None,
}

/// A write burst taken: its next beat's address, beats left, and whether it may be written.
#[derive(Debug, Clone, Copy)]
struct WriteBurst {
    addr: u64,
    beats: u64,
    ok: bool,
}

/// A read burst taken: when it may start, its next beat's address, beats left, its answer.
#[derive(Debug, Clone, Copy)]
struct ReadBurst {
    due: u64,
    addr: u64,
    beats: u64,
    ok: bool,
}

/// What an [`AxiHost`] serves: a test's [`HostMemory`], or the regions the driver mapped.
enum Backing {
    Memory(HostMemory),
    Driver(nlb_driver::dma::HostPort),
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backing::Memory(m) => f.debug_tuple("Memory").field(&m.base()).finish(),
            Backing::Driver(_) => f.write_str("Driver"),
        }
    }
}

impl Backing {
    fn mapped(&self, iova: u64, n: usize) -> bool {
        match self {
            Backing::Memory(m) => m.mapped(iova, n),
            Backing::Driver(p) => p.maps(iova, n),
        }
    }

    /// One beat's bytes (zeros where the read is refused: the caller checked `mapped`).
    fn read(&mut self, iova: u64, n: usize) -> Vec<u8> {
        match self {
            Backing::Memory(m) => m.read(iova, n).unwrap_or_default(),
            Backing::Driver(p) => {
                let mut b = vec![0u8; n];
                if p.read(iova, &mut b).is_err() {
                    b.fill(0);
                }
                b
            }
        }
    }

    /// A beat's strobed bytes, written as runs of consecutive bytes.
    fn write_strobed(&mut self, iova: u64, data: &[u32], strb: u64) {
        let bytes: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut i = 0u64;
        while i < BEAT {
            if strb >> i & 1 == 0 {
                i += 1;
                continue;
            }
            let start = i;
            while i < BEAT && strb >> i & 1 != 0 {
                i += 1;
            }
            let Some(run) = bytes.get(start as usize..i as usize) else {
                break;
            };
            match self {
                Backing::Memory(m) => {
                    m.write(iova + start, run);
                }
                Backing::Driver(p) => {
                    // The burst was checked whole when its address was taken.
                    let _ = p.write(iova + start, run);
                }
            }
        }
    }

    fn interrupt(&mut self, vector: u16) {
        match self {
            Backing::Memory(m) => m.interrupt(vector),
            Backing::Driver(p) => p.interrupt(vector),
        }
    }
}

/// `nlb_top`'s `m_axi_dma_*` master (or the OpenNIC plugin's `m_axi_host_*`) served from a
/// [`HostMemory`] or the driver's mapped regions (one id: answers in order), and its MSI-X requests recorded into the
/// memory's interrupts. Latencies count the clocks of the master's domain (the calls of
/// [`Agent::observe`]).
#[derive(Debug)]
pub struct AxiHost {
    p: Ports,
    mem: Backing,
    /// Timing of the answers.
    pub timing: HostTiming,
    writes: VecDeque<WriteBurst>,
    responses: VecDeque<(u64, u64)>,
    reads: VecDeque<ReadBurst>,
    aw_ready: bool,
    w_ready: bool,
    ar_ready: bool,
    /// Its own generator, so a bench's other agents draw what they drew without it.
    rng: StdRng,
    /// Latencies drawn for a burst finishing this clock.
    next_b: u64,
    next_r: u64,
    /// Write bursts answered.
    pub write_bursts: u64,
    /// Write beats taken.
    pub write_beats: u64,
    /// Read bursts answered.
    pub read_bursts: u64,
    /// Transfers answered SLVERR.
    pub refused: u64,
    /// Clocks of the master's domain so far.
    clock: u64,
}

impl AxiHost {
    /// The slave on `sim`'s `m_axi_dma_*` ports, over `mem`, its timing drawn from `seed`.
    pub fn new(
        sim: &Verilated,
        mem: HostMemory,
        timing: HostTiming,
        seed: u64,
    ) -> Result<AxiHost, VerifError> {
        let irq = Irq::Pulses(sim.port("m_dma_irq")?);
        AxiHost::on(sim, "m_axi_dma", irq, mem, timing, seed)
    }

    /// The slave on the OpenNIC plugin's `m_axi_host_*` ports (`nlb_opennic_sim`), its MSI-X
    /// requests taken from `m_host_irq_*`.
    pub fn opennic(
        sim: &Verilated,
        mem: HostMemory,
        timing: HostTiming,
        seed: u64,
    ) -> Result<AxiHost, VerifError> {
        let irq = Irq::Handshake {
            valid: sim.port("m_host_irq_valid")?,
            vector: sim.port("m_host_irq_vector")?,
            ready: sim.port("m_host_irq_ready")?,
        };
        AxiHost::on(sim, "m_axi_host", irq, mem, timing, seed)
    }

    /// The slave on `sim`'s `<prefix>_aw*`, `_w*`, `_b*`, `_ar*`, `_r*` ports (a master with
    /// no MSI-X requests, such as the bridge `nlb_axi_cdc`'s master side).
    pub fn on_prefix(
        sim: &Verilated,
        prefix: &str,
        mem: HostMemory,
        timing: HostTiming,
        seed: u64,
    ) -> Result<AxiHost, VerifError> {
        AxiHost::on(sim, prefix, Irq::None, mem, timing, seed)
    }

    fn on(
        sim: &Verilated,
        prefix: &str,
        irq: Irq,
        mem: HostMemory,
        timing: HostTiming,
        seed: u64,
    ) -> Result<AxiHost, VerifError> {
        let p = |s: &str| sim.port(&format!("{prefix}_{s}"));
        Ok(AxiHost {
            p: Ports {
                awaddr: p("awaddr")?,
                awlen: p("awlen")?,
                awvalid: p("awvalid")?,
                awready: p("awready")?,
                wdata: p("wdata")?,
                wstrb: p("wstrb")?,
                wlast: p("wlast")?,
                wvalid: p("wvalid")?,
                wready: p("wready")?,
                bresp: p("bresp")?,
                bvalid: p("bvalid")?,
                bready: p("bready")?,
                araddr: p("araddr")?,
                arlen: p("arlen")?,
                arvalid: p("arvalid")?,
                arready: p("arready")?,
                rdata: p("rdata")?,
                rresp: p("rresp")?,
                rlast: p("rlast")?,
                rvalid: p("rvalid")?,
                rready: p("rready")?,
                irq,
            },
            clock: 0,
            mem: Backing::Memory(mem),
            timing,
            writes: VecDeque::new(),
            responses: VecDeque::new(),
            reads: VecDeque::new(),
            aw_ready: false,
            w_ready: false,
            ar_ready: false,
            rng: StdRng::seed_from_u64(seed),
            next_b: 0,
            next_r: 0,
            write_bursts: 0,
            write_beats: 0,
            read_bursts: 0,
            refused: 0,
        })
    }

    /// The test memory it serves (`None` while it serves the driver's regions).
    pub fn memory(&self) -> Option<&HostMemory> {
        match &self.mem {
            Backing::Memory(m) => Some(m),
            Backing::Driver(_) => None,
        }
    }

    /// Serves `mem` from now on.
    pub fn set_memory(&mut self, mem: HostMemory) {
        self.mem = Backing::Memory(mem);
    }

    /// Serves the regions the driver maps through `port` from now on (reads, writes and
    /// interrupts charged on its PCIe ledger); a burst touching anything unmapped is refused.
    pub fn serve_driver(&mut self, port: nlb_driver::dma::HostPort) {
        self.mem = Backing::Driver(port);
    }

    /// The driver's port, while it is served.
    pub fn driver_port_mut(&mut self) -> Option<&mut nlb_driver::dma::HostPort> {
        match &mut self.mem {
            Backing::Driver(p) => Some(p),
            Backing::Memory(_) => None,
        }
    }

    /// No transfer taken and not yet answered.
    pub fn idle(&self) -> bool {
        self.writes.is_empty() && self.responses.is_empty() && self.reads.is_empty()
    }

    fn latency(&mut self) -> u64 {
        let (lo, hi) = self.timing.latency;
        self.rng.random_range(lo..=hi.max(lo))
    }
}

impl Agent for AxiHost {
    fn drive(&mut self, sim: &mut Verilated, _bench_rng: &mut StdRng) -> Result<(), VerifError> {
        let cycle = self.clock;
        if let Irq::Handshake { ready, .. } = self.p.irq {
            sim.set_bit(ready, true)?;
        }
        self.next_b = self.latency();
        self.next_r = self.latency();
        self.aw_ready = self.rng.random_bool(self.timing.ready);
        self.ar_ready = self.rng.random_bool(self.timing.ready);
        // Write beats are taken once their burst's address was.
        self.w_ready = !self.writes.is_empty() && self.rng.random_bool(self.timing.ready);
        sim.set_bit(self.p.awready, self.aw_ready)?;
        sim.set_bit(self.p.arready, self.ar_ready)?;
        sim.set_bit(self.p.wready, self.w_ready)?;
        match self.responses.front() {
            Some(&(due, resp)) if due <= cycle => {
                sim.set_bit(self.p.bvalid, true)?;
                sim.set_u64(self.p.bresp, resp)?;
            }
            _ => {
                sim.set_bit(self.p.bvalid, false)?;
                sim.set_u64(self.p.bresp, OKAY)?;
            }
        }
        let mut rdata = vec![0u32; self.p.rdata.words];
        match self.reads.front() {
            Some(r) if r.due <= cycle => {
                if r.ok {
                    let b = self.mem.read(r.addr, BEAT as usize);
                    for (i, w) in b.chunks(4).enumerate() {
                        if let Some(d) = rdata.get_mut(i) {
                            *d = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                        }
                    }
                }
                sim.set_bit(self.p.rvalid, true)?;
                sim.set_bit(self.p.rlast, r.beats == 1)?;
                sim.set_u64(self.p.rresp, if r.ok { OKAY } else { SLVERR })?;
            }
            _ => {
                sim.set_bit(self.p.rvalid, false)?;
                sim.set_bit(self.p.rlast, false)?;
                sim.set_u64(self.p.rresp, OKAY)?;
            }
        }
        sim.set(self.p.rdata, &rdata)
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let cycle = self.clock;
        self.clock += 1;
        match self.p.irq {
            Irq::Pulses(port) => {
                let irq = sim.get_u64(port)?;
                for v in 0..16u16 {
                    if irq >> v & 1 != 0 {
                        self.mem.interrupt(v);
                    }
                }
            }
            Irq::Handshake { valid, vector, .. } => {
                if sim.get_bit(valid)? {
                    self.mem.interrupt(sim.get_u64(vector)? as u16);
                }
            }
            Irq::None => {}
        }
        if self.aw_ready && sim.get_bit(self.p.awvalid)? {
            let addr = sim.get_u64(self.p.awaddr)?;
            let beats = sim.get_u64(self.p.awlen)? + 1;
            let ok = self.mem.mapped(addr, (beats * BEAT) as usize);
            self.writes.push_back(WriteBurst { addr, beats, ok });
        }
        if self.w_ready && sim.get_bit(self.p.wvalid)? {
            let data = sim.get_words(self.p.wdata)?;
            let strb = sim.get_u64(self.p.wstrb)?;
            let last = sim.get_bit(self.p.wlast)?;
            let Some(w) = self.writes.front_mut() else {
                return Err(VerifError::Protocol(format!(
                    "clock {cycle}: a DMA write beat with no burst"
                )));
            };
            if w.ok {
                self.mem.write_strobed(w.addr, &data, strb);
            }
            self.write_beats += 1;
            w.addr += BEAT;
            w.beats -= 1;
            if (w.beats == 0) != last {
                return Err(VerifError::Protocol(format!(
                    "clock {cycle}: a DMA wlast {last} with {} beats left",
                    w.beats
                )));
            }
            if last {
                let ok = w.ok;
                self.writes.pop_front();
                let due = cycle + self.next_b;
                self.responses
                    .push_back((due, if ok { OKAY } else { SLVERR }));
                self.write_bursts += 1;
                if !ok {
                    self.refused += 1;
                }
            }
        }
        if sim.get_bit(self.p.bready)? {
            if let Some(&(due, _)) = self.responses.front() {
                if due <= cycle {
                    self.responses.pop_front();
                }
            }
        }
        if self.ar_ready && sim.get_bit(self.p.arvalid)? {
            let addr = sim.get_u64(self.p.araddr)?;
            let beats = sim.get_u64(self.p.arlen)? + 1;
            let ok = self.mem.mapped(addr, (beats * BEAT) as usize);
            let due = cycle + self.next_r;
            self.reads.push_back(ReadBurst {
                due,
                addr,
                beats,
                ok,
            });
            self.read_bursts += 1;
            if !ok {
                self.refused += 1;
            }
        }
        if sim.get_bit(self.p.rready)? {
            if let Some(r) = self.reads.front_mut() {
                if r.due <= cycle {
                    r.addr += BEAT;
                    r.beats -= 1;
                    if r.beats == 0 {
                        self.reads.pop_front();
                    }
                }
            }
        }
        Ok(())
    }
}
