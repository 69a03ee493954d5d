//! The host rings in RTL (`nlb_host_dma` in `nlb_top`, docs/pipeline.md §15) against the golden
//! model's DMA engine (`firmware_sim::dma::HostDma` inside `ModelDevice`), punt by punt and
//! event by event: both devices get the same tables, the same `dma` register writes and the
//! same descriptors in host memory of the same layout, and the same received frames (those the
//! RTL's receive side took: it never stalls and may drop a frame whole, docs/pipeline.md
//! §14.4); the RTL's AXI4 master is served by `nlb_verif::host_mem::AxiHost` with PCIe-like
//! latencies and random refusals. Afterwards every byte of the two host memories must be
//! equal (ring slots, punt buffers, write-back records) and the `dma` registers must read the
//! same.
//!
//! Phases: (1) fewer slots given than records come (both rings drop and count), punt buffers
//! of random sizes (frames cut to the buffer, buffers of 0 bytes); (2) the host gives every
//! slot back (indices wrap past the ring size); (3) a punt buffer not 64-byte aligned in the
//! next slot given (the slot fails with BAD_ENTRY, every punt meanwhile counted as an error)
//! and the event ring moved to an address the host memory does not hold (every event a DMA
//! fault). Interrupts: each ring that completed records raised its vector. Then the punt
//! ring's rate (`rtl_punt_ring_rate`).
//!
//! The inject ring (host to device) has its own test: rounds of descriptors the host posts at
//! once, of frames of the bank's traffic to random pools and backends, and on purpose the rare
//! ones: empty frames, frames longer than 9728 bytes (dropped and counted), the largest frame,
//! jumbo frames read in several bursts across 4 KiB boundaries, frame addresses not 64-byte
//! aligned (BAD_ENTRY), not mapped (DMA_FAULT), and a frame whose bytes are mapped but whose
//! last 64-byte line runs past the mapping (refused: the NIC reads whole lines). Every
//! injected frame's result and transmitted bytes must be the model's, in order; the last round
//! runs beside received traffic, whose results must also be the model's.

use firmware_sim::pipeline::PacketResult;
use firmware_sim::{BatchOutput, ModelDevice};
use nlb_hw::blocks::{ctrl, dma};
use nlb_hw::enums::{Ring, Verdict};
use nlb_hw::layouts::{EventRecord, InjectDesc, InjectHeader, PuntCpl, PuntDesc, RingWb};
use nlb_hw::{NicSettings, Profile};
use nlb_verif::bench::seed_from_env;
use nlb_verif::host_mem::{HostMemory, HostTiming};
use nlb_verif::scenario::Scenario;
use nlb_verif::top::take_frames;
use nlb_verif::top::TopBench;
use nlb_verif::VerifError;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const IOVA: u64 = 0x2_4000_0000;
const WB: u64 = IOVA;
const PUNT_RING: u64 = IOVA + 0x1000;
const EVENT_RING: u64 = IOVA + 0x2000;
const BUFS: u64 = IOVA + 0x4000;
const BUF: u64 = 9728;
const INJECT_RING: u64 = IOVA + 0x3000;
const PUNT_LOG2: u8 = 3;
const EVENT_LOG2: u8 = 4;
const INJECT_LOG2: u8 = 4;
/// The inject ring's buffers, one per slot, after the punt buffers.
const INJECT_BUFS: u64 = BUFS + 8 * BUF;
/// The host memory: rings, punt and inject buffers, and 32 bytes more, so that the memory ends
/// in the middle of a 64-byte line.
const LEN: usize = 0x4000 + 24 * 9728 + 32;
/// The largest frame the rings carry.
const FRAME_MAX: usize = 9728;
/// An IOVA the host memory does not hold.
const UNMAPPED: u64 = 0x7_0000_0000;

/// Both devices, their host memories, and the traffic's generator.
struct Pair {
    dut: TopBench,
    model: ModelDevice,
    rtl_mem: HostMemory,
    model_mem: HostMemory,
    scenario: Scenario,
    rng: StdRng,
    out: BatchOutput,
    /// Punt verdicts of the frames so far (the pipelines must agree on them: the rings can
    /// agree only then).
    rtl_punts: u64,
    model_punts: u64,
}

impl Pair {
    fn write(&mut self, offset: u32, value: u32) -> Result<(), VerifError> {
        self.dut.write32(offset, value)?;
        self.model
            .write32(offset, value)
            .map_err(|e| VerifError::Setup(format!("model register {offset:#x}: {e}")))
    }

    fn both(&self, f: impl Fn(&HostMemory)) {
        f(&self.rtl_mem);
        f(&self.model_mem);
    }

    /// Posts slot `slot`'s punt buffer with room for `len` bytes at `addr`.
    fn post(&self, slot: u64, addr: u64, len: u16) {
        let d = PuntDesc {
            addr,
            len,
            reserved: 0,
        };
        let words = d.pack().expect("punt descriptor");
        self.both(|m| {
            m.write_words(PUNT_RING + 16 * slot, &words);
        });
    }

    /// Every punt slot posted with a buffer of a random size: mostly whole, some shorter than
    /// a frame, a few of 0 bytes.
    fn post_all(&mut self) {
        for slot in 0..1u64 << PUNT_LOG2 {
            let len = match self.rng.random_range(0..10) {
                0 => 0,
                1..=3 => self.rng.random_range(1..=300),
                _ => BUF as u16,
            };
            self.post(slot, BUFS + slot * BUF, len);
        }
    }

    /// One ring at `base` with its size word (which resets the ring), on both devices.
    fn ring<E: std::fmt::Display>(
        &mut self,
        base_lo: u32,
        base_hi: u32,
        base: u64,
        size_reg: u32,
        size: Result<u32, E>,
    ) -> Result<(), VerifError> {
        let size = size.map_err(|e| VerifError::Setup(format!("ring size: {e}")))?;
        self.write(base_lo, base as u32)?;
        self.write(base_hi, (base >> 32) as u32)?;
        self.write(size_reg, size)
    }

    /// The engine on (no hardware learning), writing back to `WB`.
    fn enable_engine(&mut self) -> Result<(), VerifError> {
        let ctl = dma::Ctrl {
            enable: true,
            hw_learn: false,
        }
        .word();
        self.write(dma::CTRL, ctl)?;
        self.write(dma::WB_LO, WB as u32)?;
        self.write(dma::WB_HI, (WB >> 32) as u32)?;
        Ok(())
    }

    fn program(&mut self, punt_host: u16, event_host: u16) -> Result<(), VerifError> {
        let size = |log2| {
            dma::PuntSize { log2, enable: true }
                .word()
                .map_err(|e| VerifError::Setup(format!("ring size: {e}")))
        };
        let irq = dma::PuntIrq {
            count: 2,
            usecs: 0,
            enable: true,
        }
        .word();
        self.enable_engine()?;
        for (lo, hi, sz, ir, base, log2) in [
            (
                dma::PUNT_BASE_LO,
                dma::PUNT_BASE_HI,
                dma::PUNT_SIZE,
                dma::PUNT_IRQ,
                PUNT_RING,
                PUNT_LOG2,
            ),
            (
                dma::EVENT_BASE_LO,
                dma::EVENT_BASE_HI,
                dma::EVENT_SIZE,
                dma::EVENT_IRQ,
                EVENT_RING,
                EVENT_LOG2,
            ),
        ] {
            self.write(lo, base as u32)?;
            self.write(hi, (base >> 32) as u32)?;
            self.write(sz, size(log2)?)?;
            self.write(ir, irq)?;
        }
        self.write(dma::PUNT_HOST, u32::from(punt_host))?;
        self.write(dma::EVENT_HOST, u32::from(event_host))
    }

    /// `n` scenario frames into the RTL; those its receive side took into the model; both
    /// run dry. Returns (frames taken, frames the RTL dropped on receive).
    fn traffic(&mut self, n: usize) -> Result<(usize, usize), VerifError> {
        let frames: Vec<Vec<u8>> = (0..n).map(|_| self.scenario.frame(&mut self.rng)).collect();
        self.send(&frames)
            .map(|(taken, dropped, _)| (taken, dropped))
    }

    /// `frames` into the RTL, back to back; those its receive side took into the model; both
    /// run dry. Returns (frames taken, frames dropped on receive, clocks from the first frame
    /// sent to the host memory's last transfer).
    fn send(&mut self, frames: &[Vec<u8>]) -> Result<(usize, usize, u64), VerifError> {
        let n = frames.len();
        let first = self.dut.rx_sent;
        let start = self.dut.bench.sim.cycle();
        let mut last_transfer = start;
        for f in frames {
            self.dut.send(f);
        }
        let mut done = 0usize;
        let (mut last_moved, mut quiet) = (0u64, 0u64);
        let mut dropped = vec![false; n];
        let limit = self.dut.bench.sim.cycle() + 2_000 * n as u64 + 50_000;
        loop {
            while let Some(d) = self.dut.mon.drops.pop_front() {
                if let Some(x) = dropped.get_mut(d.seq.wrapping_sub(first) as usize) {
                    *x = true;
                }
                done += 1;
            }
            while let Some((_, _, r)) = self.dut.mon.results.pop_front() {
                done += 1;
                self.rtl_punts += u64::from(r.verdict == Verdict::Punt);
            }
            self.dut.tx_pending.clear();
            // Results come out before their punt or event reaches the host rings: done once
            // the bus has been quiet for a while (the engine moves as soon as it has work).
            let moved = self.dut.host.write_beats + self.dut.host.read_bursts;
            if moved != last_moved {
                last_transfer = self.dut.bench.sim.cycle();
            }
            if moved != last_moved || !self.dut.host.idle() {
                (last_moved, quiet) = (moved, 0);
            } else {
                quiet += 1;
            }
            if done >= n && quiet >= 1_000 {
                break;
            }
            if self.dut.bench.sim.cycle() > limit {
                return Err(VerifError::Timeout {
                    what: format!("{done} of {n} frames through, host memory idle"),
                    cycles: self.dut.bench.sim.cycle(),
                });
            }
            self.dut.step()?;
        }
        let taken: Vec<&[u8]> = frames
            .iter()
            .zip(&dropped)
            .filter(|(_, d)| !**d)
            .map(|(f, _)| f.as_slice())
            .collect();
        self.model.receive_batch(&taken, &mut self.out);
        self.model_punts += self
            .out
            .results
            .iter()
            .filter(|r| r.verdict == Verdict::Punt)
            .count() as u64;
        Ok((taken.len(), n - taken.len(), last_transfer - start))
    }
}

/// Where byte `at` of the region lies, for a mismatch report.
fn region(at: u64) -> String {
    let a = IOVA + at;
    if a < WB + 64 {
        format!("write-back record of ring {}", (a - WB) / 16)
    } else if (PUNT_RING..PUNT_RING + (16 << PUNT_LOG2)).contains(&a) {
        format!("punt slot {}", (a - PUNT_RING) / 16)
    } else if (EVENT_RING..EVENT_RING + (64 << EVENT_LOG2)).contains(&a) {
        format!("event slot {}", (a - EVENT_RING) / 64)
    } else if (INJECT_RING..INJECT_RING + (16 << INJECT_LOG2)).contains(&a) {
        format!("inject slot {}", (a - INJECT_RING) / 16)
    } else if a >= INJECT_BUFS {
        let at = a - INJECT_BUFS;
        format!("inject buffer {} byte {}", at / BUF, at % BUF)
    } else if a >= BUFS {
        format!("punt buffer {} byte {}", (a - BUFS) / BUF, (a - BUFS) % BUF)
    } else {
        format!("IOVA {a:#x}")
    }
}

/// Little-endian 32-bit words of `b` (a whole number of them).
pub(crate) fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The `n` bytes at IOVA `start` of two host memories that begin at IOVA `base`, decoded by
/// `f` side by side (for a mismatch report).
pub(crate) fn side_by_side(
    base: u64,
    start: u64,
    n: usize,
    rtl: &[u8],
    model: &[u8],
    f: &dyn Fn(&[u32]) -> String,
) -> String {
    let s = (start - base) as usize;
    format!(
        "\n  rtl:   {}\n  model: {}",
        f(&words(&rtl[s..s + n])),
        f(&words(&model[s..s + n]))
    )
}

/// The record holding byte `at`, decoded from both memories.
fn decoded(at: u64, rtl: &[u8], model: &[u8]) -> String {
    let a = IOVA + at;
    let show = |start: u64, n: usize, f: &dyn Fn(&[u32]) -> String| {
        side_by_side(IOVA, start, n, rtl, model, f)
    };
    if a < WB + 64 {
        let start = WB + (a - WB) / 16 * 16;
        show(start, 16, &|w| format!("{:?}", RingWb::unpack(w)))
    } else if (PUNT_RING..PUNT_RING + (16 << PUNT_LOG2)).contains(&a) {
        let start = PUNT_RING + (a - PUNT_RING) / 16 * 16;
        show(start, 16, &|w| format!("{:?}", PuntCpl::unpack(w)))
    } else if (EVENT_RING..EVENT_RING + (64 << EVENT_LOG2)).contains(&a) {
        let start = EVENT_RING + (a - EVENT_RING) / 64 * 64;
        show(start, 52, &|w| format!("{:?}", EventRecord::unpack(w)))
    } else {
        String::new()
    }
}

/// Every byte of both host memories, then the dma registers.
fn compare(p: &mut Pair, phase: &str) -> Result<(), String> {
    if p.rtl_punts != p.model_punts {
        return Err(format!(
            "{phase}: {} frames punted by the RTL, {} by the model",
            p.rtl_punts, p.model_punts
        ));
    }
    let (rtl, model) = (p.rtl_mem.snapshot(), p.model_mem.snapshot());
    if let Some(at) = rtl.iter().zip(&model).position(|(a, b)| a != b) {
        return Err(format!(
            "{phase}: host memory differs first at {} (rtl {:#04x}, model {:#04x}){}",
            region(at as u64),
            rtl[at],
            model[at],
            decoded(at as u64, &rtl, &model)
        ));
    }
    for (name, reg) in [
        ("punt_dev", dma::PUNT_DEV),
        ("punt_drops", dma::PUNT_DROPS),
        ("punt_host", dma::PUNT_HOST),
        ("event_dev", dma::EVENT_DEV),
        ("event_drops", dma::EVENT_DROPS),
        ("faults", dma::FAULTS),
        ("ctrl", dma::CTRL),
        ("event_base_lo", dma::EVENT_BASE_LO),
    ] {
        let r = p.dut.read32(reg).map_err(|e| e.to_string())?;
        let m = p.model.read32(reg).map_err(|e| e.to_string())?;
        if r != m {
            return Err(format!(
                "{phase}: dma.{name} reads {r:#x} on the RTL, {m:#x} on the model"
            ));
        }
    }
    Ok(())
}

/// The figures a phase must reach to be worth comparing: records completed and dropped on
/// both rings (from the model's write-back records).
fn wb(mem: &HostMemory, ring: Ring) -> RingWb {
    let b = mem
        .read(WB + 16 * ring as u64, 16)
        .expect("write-back area");
    RingWb::unpack(&words(&b)).expect("write-back record")
}

fn setup(seed: u64) -> Result<Pair, VerifError> {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut rng = StdRng::seed_from_u64(seed);
    let scenario = Scenario::random(profile, &mut rng);
    let settings = NicSettings::default();
    let mut dut = TopBench::new(seed, None, rng.random_range(0.0..0.6), 0.0, 0.1)?;
    let rtl_mem = HostMemory::new(IOVA, LEN);
    let model_mem = HostMemory::new(IOVA, LEN);
    dut.host.set_memory(rtl_mem.clone());
    dut.write_settings(&settings)?;
    dut.load_bank(0, &scenario.tables)?;
    dut.write32(ctrl::ACTIVE_BANK, 0)?;
    dut.write32(ctrl::ENABLE, 1)?;
    let mut model = ModelDevice::from_tables(scenario.tables.clone(), settings);
    model.set_dma_port(Some(Box::new(model_mem.port())));
    Ok(Pair {
        dut,
        model,
        rtl_mem,
        model_mem,
        scenario,
        rng,
        out: BatchOutput::new(),
        rtl_punts: 0,
        model_punts: 0,
    })
}

fn run(seed: u64, frames: usize) -> Result<Result<String, String>, VerifError> {
    let mut p = setup(seed)?;
    let (punts, events) = (1u16 << PUNT_LOG2, 1u16 << EVENT_LOG2);
    // (1) Fewer slots than records.
    p.post_all();
    p.program(punts - 3, events - 4)?;
    let (t1, d1) = p.traffic(frames)?;
    if let Err(e) = compare(&mut p, "phase 1 (rings fill, drops)") {
        return Ok(Err(e));
    }
    let (pw, ew) = (wb(&p.model_mem, Ring::Punt), wb(&p.model_mem, Ring::Event));
    if pw.drops == 0 || ew.drops == 0 || pw.index == 0 || ew.index == 0 {
        return Ok(Err(format!(
            "phase 1 reached no drop or no completion on a ring: punt {pw:?}, event {ew:?}"
        )));
    }
    // (2) Every slot given back; new buffers.
    p.post_all();
    let punt_host = pw.index.wrapping_add(punts);
    p.write(dma::PUNT_HOST, u32::from(punt_host))?;
    p.write(dma::EVENT_HOST, u32::from(ew.index.wrapping_add(events)))?;
    let (t2, d2) = p.traffic(frames)?;
    if let Err(e) = compare(&mut p, "phase 2 (slots given back, indices wrap)") {
        return Ok(Err(e));
    }
    // (3) A misaligned buffer stalls the punt ring with errors; the event ring faults. The
    // host never rewrites a descriptor it posted (the NIC may have read it already, docs/
    // pipeline.md §15.1): the bad buffer goes into the next slot it gives, one the NIC
    // completed in phase 2.
    if wb(&p.model_mem, Ring::Punt).index == pw.index {
        return Ok(Err("phase 2 completed no punt".into()));
    }
    let slot = u64::from(punt_host) & (u64::from(punts) - 1);
    p.post(slot, BUFS + slot * BUF + 8, BUF as u16);
    p.write(dma::PUNT_HOST, u32::from(punt_host.wrapping_add(1)))?;
    p.write(dma::EVENT_BASE_LO, UNMAPPED as u32)?;
    p.write(dma::EVENT_BASE_HI, (UNMAPPED >> 32) as u32)?;
    p.write(
        dma::EVENT_SIZE,
        dma::EventSize {
            log2: EVENT_LOG2,
            enable: true,
        }
        .word()
        .map_err(|e| VerifError::Setup(format!("ring size: {e}")))?,
    )?;
    p.write(dma::EVENT_HOST, u32::from(events))?;
    let (t3, d3) = p.traffic(frames / 2)?;
    if let Err(e) = compare(&mut p, "phase 3 (bad buffer, unmapped event ring)") {
        return Ok(Err(e));
    }
    let (pw, ew) = (wb(&p.model_mem, Ring::Punt), wb(&p.model_mem, Ring::Event));
    if pw.errors == 0 || ew.errors == 0 {
        return Ok(Err(format!(
            "phase 3 reached no error: punt {pw:?}, event {ew:?}"
        )));
    }
    let irqs = p.rtl_mem.interrupts();
    for ring in [Ring::Punt, Ring::Event] {
        if !irqs.contains(&(ring as u16)) {
            return Ok(Err(format!("no interrupt on vector {}", ring as u16)));
        }
    }
    Ok(Ok(format!(
        "seed {seed}: {} frames taken ({} dropped on receive); punt ring {pw:?}; event ring \
         {ew:?}; {} write bursts, {} beats, {} reads, {} refused; {} interrupts",
        t1 + t2 + t3,
        d1 + d2 + d3,
        p.dut.host.write_bursts,
        p.dut.host.write_beats,
        p.dut.host.read_bursts,
        p.dut.host.refused,
        irqs.len()
    )))
}

#[test]
fn rtl_rings_match_the_model_punt_by_punt_and_event_by_event() {
    let frames = env_or("NLB_RINGS_FRAMES", 400);
    each_seed(0x5eed_0d3a, 4, |seed| run(seed, frames as usize));
}

/// The punt ring's rate (docs/benchmarks.md, "Host rings in RTL"): frames the pipeline punts,
/// back to back, into a ring of 64 slots all posted at once, as a slow path keeps its ring
/// full; clocks from the first frame in to the last write of the engine. Run at the bench's
/// PCIe timing and at the cost model's (docs/pcie.md: every answer after a 64-byte DMA read's
/// 546 ns, 176 clocks at 322.27 MHz; a write's response as late as a read's, so an upper
/// bound). What lands in host memory must be the model's, byte for byte.
fn run_punt_rate(seed: u64) -> Result<Result<String, String>, VerifError> {
    const LOG2: u8 = 6;
    const STRIDE: u64 = 2048;
    let mut p = setup(seed)?;
    // Frames the model punts (repeated when the scenario has few: each is its own record).
    let mut classify = ModelDevice::from_tables(p.scenario.tables.clone(), NicSettings::default());
    let mut out = BatchOutput::new();
    let mut punted: Vec<Vec<u8>> = Vec::new();
    for _ in 0..100 {
        let batch: Vec<Vec<u8>> = (0..500).map(|_| p.scenario.frame(&mut p.rng)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        classify.receive_batch(&refs, &mut out);
        punted.extend(
            batch
                .iter()
                .zip(&out.results)
                .filter(|(_, r)| r.verdict == Verdict::Punt)
                .map(|(f, _)| f.clone()),
        );
        if punted.len() >= 1 << LOG2 {
            break;
        }
    }
    if punted.is_empty() {
        return Ok(Err("the scenario punts no frame".into()));
    }
    let frames: Vec<Vec<u8>> = punted.iter().cycle().take(1 << LOG2).cloned().collect();
    let mean = frames.iter().map(Vec::len).sum::<usize>() / frames.len();
    let mut figures = Vec::new();
    let cost_model = HostTiming {
        ready: 1.0,
        latency: (176, 176),
    };
    for (name, timing) in [
        ("bench PCIe", HostTiming::pcie()),
        ("cost model", cost_model),
    ] {
        p.dut.host.timing = timing;
        p.enable_engine()?;
        let size = dma::PuntSize {
            log2: LOG2,
            enable: true,
        }
        .word();
        p.ring(
            dma::PUNT_BASE_LO,
            dma::PUNT_BASE_HI,
            PUNT_RING,
            dma::PUNT_SIZE,
            size,
        )?;
        for slot in 0..1u64 << LOG2 {
            p.post(slot, BUFS + slot * STRIDE, STRIDE as u16);
        }
        let reads = p.dut.host.read_bursts;
        p.write(dma::PUNT_HOST, 1 << LOG2)?;
        let (taken, dropped, clocks) = p.send(&frames)?;
        if let Err(e) = compare(&mut p, &format!("punt rate ({name})")) {
            return Ok(Err(e));
        }
        let done = wb(&p.rtl_mem, Ring::Punt).index;
        if usize::from(done) != taken {
            return Ok(Err(format!(
                "{name}: {done} punts completed of {taken} frames taken ({dropped} dropped)"
            )));
        }
        let per = clocks as f64 / taken.max(1) as f64;
        figures.push(format!(
            "{name}: {taken} punts ({dropped} dropped on receive) in {clocks} clocks, {per:.0} \
             a punt, {:.2} M/s at 322.27 MHz; {} descriptor reads",
            322.27 / per,
            p.dut.host.read_bursts - reads
        ));
    }
    Ok(Ok(format!(
        "seed {seed}: punted frames of {mean} bytes on average; {}",
        figures.join("; ")
    )))
}

#[test]
fn rtl_punt_ring_rate() {
    each_seed(0x5eed_9a7e, 1, run_punt_rate);
}

/// A number from the environment, or `default`.
pub(crate) fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `case` for `NLB_RINGS_CASES` (default `cases`) seeds from `NLB_SEED` (default `base`),
/// printing each summary and failing with the seed to rerun.
fn each_seed(
    base: u64,
    cases: u64,
    case: impl Fn(u64) -> Result<Result<String, String>, VerifError>,
) {
    let base = seed_from_env(base);
    for c in 0..env_or("NLB_RINGS_CASES", cases) {
        let seed = base.wrapping_add(c);
        match case(seed) {
            Ok(Ok(summary)) => println!("{summary}"),
            Ok(Err(m)) => panic!("seed {seed}: {m}\n(rerun: NLB_SEED={seed} NLB_RINGS_CASES=1)"),
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
}

/// The kinds of inject descriptors a round posts, the rare ones on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum InjectCase {
    /// A frame of the bank's traffic to a random pool and backend (some invalid).
    Traffic,
    /// frame_len 0: one beat with no byte.
    Empty,
    /// A frame of 1,500 to 9,728 bytes (the traffic frame, then random bytes): several bursts,
    /// across 4 KiB boundaries; the largest one exactly.
    Jumbo,
    /// frame_len above 9,728: dropped and counted.
    TooLong,
    /// A frame address not 64-byte aligned: BAD_ENTRY.
    Misaligned,
    /// A frame address the host memory does not hold: DMA_FAULT.
    Unmapped,
    /// Bytes inside the mapping, the last 64-byte line not: DMA_FAULT.
    LinePastEnd,
}

impl Pair {
    /// The inject ring alone (punts and events go to the register queues), with interrupts by
    /// count.
    fn program_inject(&mut self) -> Result<(), VerifError> {
        self.enable_engine()?;
        let size = dma::InjectSize {
            log2: INJECT_LOG2,
            enable: true,
        }
        .word();
        self.ring(
            dma::INJECT_BASE_LO,
            dma::INJECT_BASE_HI,
            INJECT_RING,
            dma::INJECT_SIZE,
            size,
        )?;
        let irq = dma::InjectIrq {
            count: 3,
            usecs: 0,
            enable: true,
        }
        .word();
        self.write(dma::INJECT_IRQ, irq)
    }

    /// Posts the descriptor of ring index `index` for a frame of `case`, its bytes written to
    /// both host memories.
    fn post_inject(&mut self, index: u16, case: InjectCase) {
        let slot = u64::from(index) & ((1 << INJECT_LOG2) - 1);
        let buf = INJECT_BUFS + slot * BUF;
        let mut frame = self.scenario.frame(&mut self.rng);
        let mut addr = buf;
        let mut len = frame.len();
        match case {
            InjectCase::Traffic => {}
            InjectCase::Empty => {
                frame.clear();
                len = 0;
            }
            InjectCase::Jumbo => {
                len = if self.rng.random_bool(0.25) {
                    FRAME_MAX
                } else {
                    self.rng.random_range(1500..=FRAME_MAX)
                };
                while frame.len() < len {
                    frame.push(self.rng.random());
                }
            }
            InjectCase::TooLong => len = self.rng.random_range(FRAME_MAX + 1..=0x3fff),
            InjectCase::Misaligned => addr = buf + self.rng.random_range(1..64u64),
            InjectCase::Unmapped => addr = UNMAPPED + 64 * self.rng.random_range(0..64u64),
            InjectCase::LinePastEnd => {
                // The memory ends 32 bytes into a line: a frame ending 16 bytes before the end
                // has all its bytes mapped, and its last line half outside.
                let end = IOVA + LEN as u64;
                len = 64 * self.rng.random_range(1..4usize) + 16;
                addr = end - 16 - len as u64;
                frame.resize(len, 0xa5);
            }
        }
        frame.truncate(len);
        let header = InjectHeader {
            backend: if self.rng.random_bool(0.9) {
                self.rng.random_range(0..56)
            } else {
                self.rng.random()
            },
            pool: if self.rng.random_bool(0.9) {
                self.rng.random_range(0..24)
            } else {
                self.rng.random_range(0..4096)
            },
            frame_len: len as u16,
        };
        self.write_inject(slot, addr, header, &frame);
    }

    /// Slot `slot`'s descriptor (the frame at `addr` with `header`) and the frame's bytes,
    /// into both host memories.
    fn write_inject(&self, slot: u64, addr: u64, header: InjectHeader, frame: &[u8]) {
        let desc = InjectDesc {
            addr,
            header: [header],
            reserved: 0,
        };
        let words = desc.pack().expect("inject descriptor");
        self.both(|m| {
            m.write_words(INJECT_RING + 16 * slot, &words);
            m.write(addr, frame);
        });
    }

    /// Posts the descriptor of ring index `index` for a frame of the traffic cut or padded to
    /// `len` bytes, to backend 0 of pool 0.
    fn post_inject_len(&mut self, index: u16, len: usize) {
        let slot = u64::from(index) & ((1 << INJECT_LOG2) - 1);
        let addr = INJECT_BUFS + slot * BUF;
        let mut frame = self.scenario.frame(&mut self.rng);
        frame.resize(len, 0);
        let header = InjectHeader {
            backend: 0,
            pool: 0,
            frame_len: len as u16,
        };
        self.write_inject(slot, addr, header, &frame);
    }

    /// Rings the inject doorbell at `host` on both devices and sends `traffic` received frames
    /// to both; the RTL runs until its host memory has been quiet for a while and every
    /// injected frame the model transmitted came out. Compares injected frames (results and
    /// bytes, in order) and received frames' results.
    /// Returns the frames through and the clocks from the doorbell to the last one's result.
    fn inject_round(
        &mut self,
        host: u16,
        traffic: usize,
    ) -> Result<Result<(usize, u64), String>, VerifError> {
        let frames: Vec<Vec<u8>> = (0..traffic)
            .map(|_| self.scenario.frame(&mut self.rng))
            .collect();
        let first = self.dut.rx_sent;
        for f in &frames {
            self.dut.send(f);
        }
        self.write(dma::INJECT_HOST, u32::from(host))?;
        let rung = self.dut.bench.sim.cycle();
        let mut last_result = rung;
        let want = self.model.take_injected();
        let mut got_inj: Vec<(PacketResult, Vec<u8>)> = Vec::new();
        let mut got_rx: Vec<PacketResult> = Vec::new();
        let mut results: std::collections::VecDeque<(bool, PacketResult)> = Default::default();
        let mut tx: std::collections::VecDeque<Vec<u8>> = Default::default();
        let mut dropped = vec![false; traffic];
        let mut n_dropped = 0;
        let (mut last_moved, mut quiet) = (0u64, 0u64);
        let limit = self.dut.bench.sim.cycle() + 3_000 * (traffic + want.len()) as u64 + 100_000;
        loop {
            self.dut.step()?;
            while let Some(d) = self.dut.mon.drops.pop_front() {
                if let Some(x) = dropped.get_mut(d.seq.wrapping_sub(first) as usize) {
                    *x = true;
                    n_dropped += 1;
                }
            }
            while let Some((_, inj, r)) = self.dut.mon.results.pop_front() {
                results.push_back((inj, r));
            }
            let mut beats = self.dut.tx.take();
            self.dut.tx_pending.append(&mut beats);
            tx.extend(take_frames(&mut self.dut.tx_pending));
            self.dut.punt.take();
            self.dut.events.take();
            self.dut.pass.take();
            // A FORWARD result takes the next transmitted frame (the editor keeps the order).
            while let Some(&(inj, r)) = results.front() {
                let out = if r.verdict == Verdict::Forward {
                    match tx.pop_front() {
                        Some(f) => f,
                        None => break,
                    }
                } else {
                    Vec::new()
                };
                results.pop_front();
                if inj {
                    last_result = self.dut.bench.sim.cycle();
                    got_inj.push((r, out));
                } else {
                    got_rx.push(r);
                }
            }
            let moved = self.dut.host.write_beats + self.dut.host.read_bursts;
            if moved != last_moved || !self.dut.host.idle() {
                (last_moved, quiet) = (moved, 0);
            } else {
                quiet += 1;
            }
            if got_inj.len() >= want.len() && got_rx.len() + n_dropped >= traffic && quiet >= 1_000
            {
                break;
            }
            if self.dut.bench.sim.cycle() > limit {
                return Err(VerifError::Timeout {
                    what: format!(
                        "{} of {} injected frames and {} of {traffic} received ones through",
                        got_inj.len(),
                        want.len(),
                        got_rx.len() + n_dropped
                    ),
                    cycles: self.dut.bench.sim.cycle(),
                });
            }
        }
        if got_inj.len() != want.len() {
            return Ok(Err(format!(
                "the RTL transmitted {} injected frames, the model {}",
                got_inj.len(),
                want.len()
            )));
        }
        for (k, ((r, out), m)) in got_inj.iter().zip(&want).enumerate() {
            if *r != m.result {
                return Ok(Err(format!(
                    "injected frame #{k}:\n  RTL   {r:?}\n  model {:?}",
                    m.result
                )));
            }
            if *out != m.frame {
                return Ok(Err(format!(
                    "injected frame #{k} ({:?}): transmitted {} bytes on the RTL, {} on the model",
                    m.result.verdict,
                    out.len(),
                    m.frame.len()
                )));
            }
        }
        let taken: Vec<&[u8]> = frames
            .iter()
            .zip(&dropped)
            .filter(|(_, d)| !**d)
            .map(|(f, _)| f.as_slice())
            .collect();
        self.model.receive_batch(&taken, &mut self.out);
        if got_rx != self.out.results {
            let k = got_rx
                .iter()
                .zip(&self.out.results)
                .position(|(a, b)| a != b)
                .unwrap_or(got_rx.len().min(self.out.results.len()));
            return Ok(Err(format!(
                "received frames beside injection differ at #{k} ({} results on the RTL, {} on \
                 the model)",
                got_rx.len(),
                self.out.results.len()
            )));
        }
        Ok(Ok((want.len(), last_result - rung)))
    }
}

fn run_inject(seed: u64, rounds: usize) -> Result<Result<String, String>, VerifError> {
    use InjectCase::*;
    let mut p = setup(seed)?;
    p.program_inject()?;
    let slots = 1u16 << INJECT_LOG2;
    let mut host = 0u16;
    let mut seen = std::collections::BTreeMap::<InjectCase, usize>::new();
    let mut through = 0;
    for round in 0..rounds {
        let k = p.rng.random_range(1..=slots);
        for j in 0..k {
            let case = match p.rng.random_range(0..20) {
                0 => Empty,
                1 => TooLong,
                2 => Misaligned,
                3 => Unmapped,
                4 => LinePastEnd,
                5..=7 => Jumbo,
                _ => Traffic,
            };
            *seen.entry(case).or_default() += 1;
            p.post_inject(host.wrapping_add(j), case);
        }
        host = host.wrapping_add(k);
        let traffic = if round + 1 == rounds { 200 } else { 0 };
        match p.inject_round(host, traffic)? {
            Ok((n, _)) => through += n,
            Err(e) => return Ok(Err(format!("round {round}: {e}"))),
        }
        if let Err(e) = compare(&mut p, &format!("inject round {round}")) {
            return Ok(Err(e));
        }
        for (name, reg) in [
            ("inject_dev", dma::INJECT_DEV),
            ("inject_drops", dma::INJECT_DROPS),
        ] {
            let r = p.dut.read32(reg)?;
            let m = p
                .model
                .read32(reg)
                .map_err(|e| VerifError::Setup(e.to_string()))?;
            if r != m {
                return Ok(Err(format!(
                    "round {round}: dma.{name} reads {r:#x} on the RTL, {m:#x} on the model"
                )));
            }
        }
    }
    // The transmit side stalled while the largest frames keep coming, the ring topped up
    // three times: they fill the pipeline's packet FIFO (2,048 beats), then the inject queue
    // (512), and the engine must hold back rather than offer the queue a beat it has no room
    // for: it promises itself room for a frame before taking it (docs/pipeline.md §15.2),
    // and with several frames in flight the room must count them all. Then the stall ends
    // and every frame must come out as the model's.
    p.dut.tx.backpressure = 1.0;
    let mut posted = 0usize;
    for _ in 0..3 {
        let dev = p.dut.read32(dma::INJECT_DEV)? as u16;
        let free = slots - host.wrapping_sub(dev);
        for j in 0..free {
            p.post_inject_len(host.wrapping_add(j), FRAME_MAX);
        }
        host = host.wrapping_add(free);
        posted += usize::from(free);
        p.write(dma::INJECT_HOST, u32::from(host))?;
        for _ in 0..30_000 {
            p.dut.step()?;
        }
    }
    let held = host.wrapping_sub(p.dut.read32(dma::INJECT_DEV)? as u16);
    if held == 0 {
        return Ok(Err(format!(
            "the stalled pipeline took all {posted} jumbo frames: the inject queue was never full"
        )));
    }
    p.dut.tx.backpressure = 0.0;
    match p.inject_round(host, 0)? {
        Ok((n, _)) if n == posted => through += n,
        Ok((n, _)) => {
            return Ok(Err(format!(
                "{n} of {posted} jumbo frames through after the stall"
            )))
        }
        Err(e) => return Ok(Err(format!("jumbo frames after the stall: {e}"))),
    }
    let waits = p.dut.bench.sim.port("sim_inject_waits")?;
    let waits = p.dut.bench.sim.get_u64(waits)?;
    if waits != 0 {
        return Ok(Err(format!(
            "the engine offered the inject queue {waits} beats it had no room for"
        )));
    }
    let iw = wb(&p.model_mem, Ring::Inject);
    if iw.index != host || iw.drops == 0 || iw.errors == 0 {
        return Ok(Err(format!(
            "the inject ring did not consume every descriptor, or saw no drop or error: {iw:?} \
             (host {host})"
        )));
    }
    if !p.rtl_mem.interrupts().contains(&(Ring::Inject as u16)) {
        return Ok(Err("no interrupt on the inject ring's vector".into()));
    }
    // The ring's rate: a full ring of frames of one size, posted at once, at the bench's
    // timing of the host memory (answers in 20-120 clocks, HostTiming::pcie) and at the cost
    // model's (every answer after 176 clocks: a 64-byte DMA read's 546 ns at 322.27 MHz,
    // docs/pcie.md). Posted together, the descriptors of a line come in one read: 16 frames
    // of one line each take 16 reads and one per descriptor line they span.
    let cost_model = HostTiming {
        ready: 1.0,
        latency: (176, 176),
    };
    let mut rates = Vec::new();
    for (name, timing) in [("bench", HostTiming::pcie()), ("cost model", cost_model)] {
        p.dut.host.timing = timing;
        for len in [64usize, 1500] {
            let slots = 1u16 << INJECT_LOG2;
            for j in 0..slots {
                p.post_inject_len(host.wrapping_add(j), len);
            }
            host = host.wrapping_add(slots);
            let reads_before = p.dut.host.read_bursts;
            let lines =
                u64::from(host.wrapping_sub(1) / 4) - u64::from(host.wrapping_sub(slots) / 4) + 1;
            let round = p.inject_round(host, 0)?;
            let reads = p.dut.host.read_bursts - reads_before;
            if len == 64 && reads != u64::from(slots) + lines {
                return Ok(Err(format!(
                    "{reads} reads for {slots} frames of one line posted at once (want {}: \
                     each descriptor line read once)",
                    u64::from(slots) + lines
                )));
            }
            match round {
                Ok((n, clocks)) if n == usize::from(slots) => {
                    let per = clocks as f64 / n as f64;
                    rates.push(format!(
                        "{name} {len} B: {per:.0} clocks a frame ({:.2} M/s at 322.27 MHz)",
                        322.27 / per
                    ))
                }
                Ok((n, _)) => {
                    return Ok(Err(format!("{n} of {slots} frames of {len} bytes through")))
                }
                Err(e) => return Ok(Err(format!("rate round ({name}, {len} bytes): {e}"))),
            }
        }
    }
    p.dut.host.timing = HostTiming::pcie();
    Ok(Ok(format!(
        "seed {seed}: {} descriptors ({seen:?}), {through} frames through; inject ring \
         {iw:?}; {} read bursts, {} refused; rate {}",
        iw.index,
        p.dut.host.read_bursts,
        p.dut.host.refused,
        rates.join(", ")
    )))
}

#[test]
fn rtl_inject_ring_matches_the_model_frame_by_frame() {
    each_seed(0x5eed_1a7c, 3, |seed| run_inject(seed, 8));
}
