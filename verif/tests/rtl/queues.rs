//! Every queue driven to full and past it (`nlb_verif::queues::overflow_run`: fill past full,
//! empty, fill exactly, then near full at random), held to the documented rule: the arriving
//! entry is dropped when the queue is full, each drop reported, nothing reordered or
//! duplicated.
//!
//! - The `queues` block's punt, learn and inject queues (docs/pipeline.md §13; depth
//!   `cap_queue_depth`) on the RTL device (`nlb_verif::device::RtlDevice`: `nlb_top` with the
//!   queues the shell's DMA keeps on hardware) and on the golden model's device, through the
//!   registers: `punt_status` / `learn_status` (count, overflow cleared by reading), pops and
//!   their windows, `inject_status.free`, pushes beyond the free entries (counted as the
//!   devices' inject overflows). The entries expected come from the model's pipeline
//!   (`process` / `process_injected`), not from either queue.
//! - `nlb_top`'s event FIFO (`EVENT_DEPTH` = 64 events ahead of the event stream): the event
//!   stream stalled while packets that learn arrive; each drop pulses `m_event_dropped`.
//! - The FIFOs behind admission control (the packet FIFO, the editor's jobs, the counters'
//!   results): every output stream stalled for long stretches while frames (minimum and
//!   jumbo) and a storm of counter snapshots arrive; admission must close and lose nothing:
//!   every result, frame, punt and event and then every counter equal to the model's.

use firmware_sim::pipeline::{process, process_injected, Context};
use firmware_sim::{ConnTable, CounterKind, Counters, ModelDevice, PacketResult};
use nlb_driver::device::Device;
use nlb_hw::blocks::{counters as cb, queues as q};
use nlb_hw::enums::{Affinity, Delivery, Reason, Verdict};
use nlb_hw::layouts::{
    BackendEntry, InjectHeader, LearnEvent, MaglevSlot, PoolEntry, PortSlot, PuntHeader, RuleEntry,
    VipEntry,
};
use nlb_hw::{NicSettings, Profile, Tables};
use nlb_verif::axil::{Access, PipeTiming, PipelinedMaster};
use nlb_verif::bench::{seed_from_env, wave_path};
use nlb_verif::coverage::{self, Bins};
use nlb_verif::device::RtlDevice;
use nlb_verif::frames::{FrameSpec, Ip, L4};
use nlb_verif::queues::{self, Drops, QueueUnderTest};
use nlb_verif::scenario::mapped;
use nlb_verif::top::{take_events, take_frames, take_punts, TopBench};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

const VIP: u32 = 0x0a01_0001;
const BIG_VIP: u32 = 0x0a01_0002;

/// A bank where a later fragment to `VIP` punts (two rules on it), a TCP packet of a new flow
/// to it learns (a tracking pool), and injected frames go to backend 1 of pool 0; `BIG_VIP`
/// forwards by L2 DSR without learning.
fn bank() -> Tables {
    let p = profile();
    let mut t = Tables::empty(p);
    let place = |t: &mut Tables, addr: u32, slots: &[(u16, u16, u16)]| {
        let a = mapped(addr);
        let bucket = nlb_reference::lookup::vip_bucket(p, 6, a);
        let mut e = VipEntry {
            valid: true,
            protocol: 6,
            addr: a,
            ..VipEntry::default()
        };
        for (i, &(lo, hi, rule)) in slots.iter().enumerate() {
            e.slot[i] = PortSlot {
                valid: true,
                port_lo: lo,
                port_hi: hi,
                rule,
            };
        }
        let w = (0..p.vip_ways)
            .find(|w| !t.vip[(bucket * p.vip_ways + w) as usize].valid)
            .expect("a free way");
        t.vip[(bucket * p.vip_ways + w) as usize] = e;
    };
    place(&mut t, VIP, &[(0, 999, 0), (1000, 65535, 1)]);
    place(&mut t, BIG_VIP, &[(0, 65535, 2)]);
    for (r, pool) in [(0, 0), (1, 0), (2, 1)] {
        t.rules[r] = RuleEntry {
            valid: true,
            acl_enabled: false,
            pool,
        };
    }
    for (i, track) in [(0, true), (1, false)] {
        t.pools[i] = PoolEntry {
            valid: true,
            affinity: Affinity::None,
            delivery: Delivery::L2Dsr,
            maglev_base: 0,
            maglev_size: 1,
            track,
            idle_timeout: 60,
            ..PoolEntry::default()
        };
    }
    t.maglev[0] = MaglevSlot { backend: 1 };
    t.backends[1] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(0x0a00_0101),
        mac: 0x0200_0000_0101,
    };
    t
}

fn tcp(client_port: u16, dport: u16, dst: u32, payload: usize) -> Vec<u8> {
    let mut s = FrameSpec::tcp4(0x0c00_0001, dst, client_port, dport, 0x10);
    s.payload = payload;
    s.build()
}

/// A later IPv4 fragment to `VIP` (ID `id`): punted, the VIP has two rules.
fn later_fragment(id: u16) -> Vec<u8> {
    let mut s = FrameSpec::tcp4(0x0c00_0002, VIP, 1, 80, 0x10);
    if let Some(Ip::V4 {
        id: i,
        frag_offset,
        df,
        ..
    }) = &mut s.ip
    {
        *i = id;
        *frag_offset = 100;
        *df = false;
    }
    s.l4 = L4::Other(6);
    s.payload = 40 + usize::from(id % 50);
    s.build()
}

/// What the model's pipeline gives a frame (no queue involved).
fn expect(t: &Tables, frame: &[u8]) -> PacketResult {
    expect_out(t, frame).0
}

/// The model pipeline's result and output frame.
fn expect_out(t: &Tables, frame: &[u8]) -> (PacketResult, Vec<u8>) {
    let ct = ConnTable::new(profile().ct_buckets, profile().ct_ways);
    let settings = NicSettings::default();
    let ctx = Context {
        tables: t,
        bank: 0,
        settings: &settings,
        enabled: true,
        conntrack: &ct,
    };
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    let r = process(&ctx, frame, &mut out).expect("room");
    out.truncate(r.out_len);
    (r, out)
}

// ---- the queues block of a device ------------------------------------------------------------

/// A frame the inject queue transmitted: its result and its bytes.
type Transmitted = (PacketResult, Vec<u8>);

/// A device under test: the RTL's or the model's.
enum Dev {
    Rtl(Box<RtlDevice>),
    Model(Box<ModelDevice>),
}

impl Dev {
    fn read(&mut self, o: u32) -> Result<u32, String> {
        match self {
            Dev::Rtl(d) => d.read32(o).map_err(|e| e.to_string()),
            Dev::Model(d) => d.read32(o).map_err(|e| e.to_string()),
        }
    }

    fn write(&mut self, o: u32, v: u32) -> Result<(), String> {
        match self {
            Dev::Rtl(d) => d.write32(o, v).map_err(|e| e.to_string()),
            Dev::Model(d) => d.write32(o, v).map_err(|e| e.to_string()),
        }
    }

    fn receive(&mut self, frame: Vec<u8>) -> Result<PacketResult, String> {
        match self {
            Dev::Rtl(d) => d
                .receive(vec![frame])
                .map_err(|e| e.to_string())?
                .pop()
                .map(|p| p.result)
                .ok_or_else(|| "no result".to_string()),
            Dev::Model(d) => {
                let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
                d.receive(&frame, &mut out).map_err(|e| e.to_string())
            }
        }
    }

    /// Pushes the inject queue refused so far.
    fn inject_overflows(&mut self) -> Result<u64, String> {
        match self {
            Dev::Rtl(d) => d.inject_overflows().map_err(|e| e.to_string()),
            Dev::Model(d) => Ok(d.inject_overflows()),
        }
    }

    /// What the inject queue transmitted since the last call, and the pushes refused so far.
    fn take_injected(&mut self) -> Result<(Vec<Transmitted>, u64), String> {
        match self {
            Dev::Rtl(d) => {
                let i = d.take_injected().map_err(|e| e.to_string())?;
                Ok((
                    i.packets
                        .into_iter()
                        .map(|p| (p.result, p.output))
                        .collect(),
                    i.overflows,
                ))
            }
            Dev::Model(d) => {
                let v = d
                    .take_injected()
                    .into_iter()
                    .map(|i| (i.result, i.frame))
                    .collect();
                Ok((v, d.inject_overflows()))
            }
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Dev::Rtl(_) => "RTL device",
            Dev::Model(_) => "model device",
        }
    }
}

/// Which queue of the block an adapter drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Punt,
    Learn,
}

/// The punt or learn queue through the registers: entries are the popped windows.
struct StatusQueue<'a> {
    dev: &'a mut Dev,
    which: Which,
    tables: Tables,
    /// An overflow bit read with a count (that read cleared it).
    seen: bool,
}

impl StatusQueue<'_> {
    fn status(&mut self) -> Result<(usize, bool), String> {
        let reg = match self.which {
            Which::Punt => q::PUNT_STATUS,
            Which::Learn => q::LEARN_STATUS,
        };
        // punt_status and learn_status share the layout.
        let s = q::PuntStatus::from_word(self.dev.read(reg)?);
        Ok((usize::from(s.count), s.overflow))
    }
}

impl QueueUnderTest for StatusQueue<'_> {
    type Item = Vec<u32>;

    fn name(&self) -> String {
        format!("{} {:?} queue", self.dev.label(), self.which)
    }

    fn depth(&self) -> usize {
        profile().queue_depth as usize
    }

    fn offer(&mut self, n: u64) -> Result<Vec<u32>, String> {
        let frame = match self.which {
            Which::Punt => later_fragment(n as u16),
            Which::Learn => tcp(n as u16, 80 + (n % 900) as u16, VIP, (n % 30) as usize),
        };
        let want = expect(&self.tables, &frame);
        let got = self.dev.receive(frame.clone())?;
        if got != want {
            return Err(format!("result {got:?}, the model's pipeline {want:?}"));
        }
        Ok(match self.which {
            Which::Punt => {
                if want.verdict != Verdict::Punt {
                    return Err(format!("a probe that does not punt: {want:?}"));
                }
                let mut w = want
                    .punt_header()
                    .pack()
                    .map_err(|e| e.to_string())?
                    .to_vec();
                let data = &frame[..frame.len().min(q::PUNT_DATA_COUNT as usize * 4)];
                w.push(data.len() as u32);
                w.extend(data.chunks(4).map(|c| {
                    let mut b = [0u8; 4];
                    b[..c.len()].copy_from_slice(c);
                    u32::from_le_bytes(b)
                }));
                w
            }
            Which::Learn => want
                .event
                .ok_or_else(|| format!("a probe that does not learn: {want:?}"))?
                .pack()
                .map_err(|e| e.to_string())?
                .to_vec(),
        })
    }

    fn occupancy(&mut self) -> Result<Option<usize>, String> {
        let (n, o) = self.status()?;
        self.seen |= o;
        Ok(Some(n))
    }

    fn drops(&mut self) -> Result<Drops, String> {
        let (_, o) = self.status()?;
        let f = o || std::mem::take(&mut self.seen);
        Ok(Drops::Flag(f))
    }

    fn take(&mut self) -> Result<Vec<Vec<u32>>, String> {
        let (n, o) = self.status()?;
        self.seen |= o;
        match self.which {
            Which::Punt => {
                self.dev
                    .write(q::PUNT_POP, q::PuntPop { pop: true }.word())?;
                let mut w: Vec<u32> = (0..q::PUNT_HEADER_COUNT)
                    .map(|i| self.dev.read(q::PUNT_HEADER + 4 * i))
                    .collect::<Result<_, _>>()?;
                let len = self.dev.read(q::PUNT_LEN)?;
                if n == 0 {
                    // Popping an empty queue clears the window.
                    if len != 0 || w.iter().any(|x| *x != 0) {
                        return Err(format!(
                            "the punt window after popping an empty queue: {w:x?}, {len} bytes"
                        ));
                    }
                    return Ok(Vec::new());
                }
                w.push(len);
                for i in 0..len.div_ceil(4) {
                    w.push(self.dev.read(q::PUNT_DATA + 4 * i)?);
                }
                // The header decodes (a header beat, not data).
                PuntHeader::unpack(&w[..PuntHeader::WORDS]).map_err(|e| e.to_string())?;
                Ok(vec![w])
            }
            Which::Learn => {
                self.dev
                    .write(q::LEARN_POP, q::LearnPop { pop: true }.word())?;
                let w: Vec<u32> = (0..q::LEARN_DATA_COUNT)
                    .map(|i| self.dev.read(q::LEARN_DATA + 4 * i))
                    .collect::<Result<_, _>>()?;
                if n == 0 {
                    if w.iter().any(|x| *x != 0) {
                        return Err(format!("learn_data after popping an empty queue: {w:x?}"));
                    }
                    return Ok(Vec::new());
                }
                LearnEvent::unpack(&w).map_err(|e| e.to_string())?;
                Ok(vec![w])
            }
        }
    }
}

/// The inject queue: entries are the transmitted frames with their results; an entry is held
/// until the host process takes what was transmitted, which frees all of them at once.
struct InjectQueue<'a> {
    dev: &'a mut Dev,
    tables: Tables,
    overflows: u64,
}

impl QueueUnderTest for InjectQueue<'_> {
    type Item = (PacketResult, Vec<u8>);

    fn name(&self) -> String {
        format!("{} inject queue", self.dev.label())
    }

    fn depth(&self) -> usize {
        profile().queue_depth as usize
    }

    fn offer(&mut self, n: u64) -> Result<Self::Item, String> {
        let frame = tcp(n as u16, 443, BIG_VIP, (n % 64) as usize);
        let h = InjectHeader {
            backend: 1,
            pool: 0,
            frame_len: frame.len() as u16,
        };
        for (i, w) in h.pack().map_err(|e| e.to_string())?.iter().enumerate() {
            self.dev.write(q::INJECT_HEADER + 4 * i as u32, *w)?;
        }
        for (i, c) in frame.chunks(4).enumerate() {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            self.dev
                .write(q::INJECT_DATA + 4 * i as u32, u32::from_le_bytes(b))?;
        }
        self.dev
            .write(q::INJECT_PUSH, q::InjectPush { push: true }.word())?;
        let ct = ConnTable::new(profile().ct_buckets, profile().ct_ways);
        let settings = NicSettings::default();
        let ctx = Context {
            tables: &self.tables,
            bank: 0,
            settings: &settings,
            enabled: true,
            conntrack: &ct,
        };
        let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
        let r = process_injected(&ctx, &h, &frame, &mut out).map_err(|e| e.to_string())?;
        out.truncate(r.out_len);
        Ok((r, out))
    }

    fn occupancy(&mut self) -> Result<Option<usize>, String> {
        let free = q::InjectStatus::from_word(self.dev.read(q::INJECT_STATUS)?).free;
        Ok(Some(self.depth() - usize::from(free)))
    }

    fn drops(&mut self) -> Result<Drops, String> {
        let total = self.dev.inject_overflows()?;
        let since = total - self.overflows;
        self.overflows = total;
        Ok(Drops::Since(since))
    }

    fn take(&mut self) -> Result<Vec<Self::Item>, String> {
        Ok(self.dev.take_injected()?.0)
    }
}

#[test]
fn punt_learn_and_inject_queues_overflow_as_documented() {
    let seed = seed_from_env(0x9e0e_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let t = bank();
    let mut bins = Bins::new();
    let mut names = Vec::new();
    for rtl in [true, false] {
        let mut dev = if rtl {
            let mut d = RtlDevice::new(seed).expect("the RTL device");
            d.load(&t, &NicSettings::default()).expect("load");
            Dev::Rtl(Box::new(d))
        } else {
            Dev::Model(Box::new(ModelDevice::from_tables(
                t.clone(),
                NicSettings::default(),
            )))
        };
        for which in [Which::Punt, Which::Learn] {
            let mut qut = StatusQueue {
                dev: &mut dev,
                which,
                tables: t.clone(),
                seen: false,
            };
            names.push(qut.name());
            if let Err(e) = queues::overflow_run(&mut qut, &mut rng, 300, &mut bins) {
                panic!("{e} (seed {seed:#x}: rerun with NLB_SEED={seed:#x})");
            }
        }
        let mut qut = InjectQueue {
            dev: &mut dev,
            tables: t.clone(),
            overflows: 0,
        };
        names.push(qut.name());
        if let Err(e) = queues::overflow_run(&mut qut, &mut rng, 300, &mut bins) {
            panic!("{e} (seed {seed:#x}: rerun with NLB_SEED={seed:#x})");
        }
    }
    coverage::print(&bins, "queue bins");
    let required: Vec<String> = names
        .iter()
        .flat_map(|n| queues::required_bins(n))
        .collect();
    coverage::assert_hit(&bins, required, "queue bins", &format!("seed {seed:#x}"));
}

// ---- nlb_top's event FIFO -------------------------------------------------------------------

/// Depth of `nlb_top`'s event FIFO (its EVENT_DEPTH parameter, the default).
const EVENT_DEPTH: usize = 64;

/// The event FIFO ahead of `m_axis_event`: entries offered by packets that learn (the stream
/// stalled), taken one beat at a time.
struct EventFifo {
    dut: TopBench,
    tables: Tables,
    dropped_port: nlb_verif::Port,
    dropped: u64,
}

impl EventFifo {
    fn step(&mut self) -> Result<(), String> {
        self.dut.step().map_err(|e| e.to_string())?;
        if self
            .dut
            .bench
            .sim
            .get_bit(self.dropped_port)
            .map_err(|e| e.to_string())?
        {
            self.dropped += 1;
        }
        Ok(())
    }
}

impl QueueUnderTest for EventFifo {
    type Item = LearnEvent;

    fn name(&self) -> String {
        "nlb_top event FIFO".into()
    }

    fn depth(&self) -> usize {
        EVENT_DEPTH
    }

    fn offer(&mut self, n: u64) -> Result<LearnEvent, String> {
        let frame = tcp(n as u16, 80 + (n % 900) as u16, VIP, 0);
        let want = expect(&self.tables, &frame);
        self.dut.send(&frame);
        for _ in 0..2000 {
            self.step()?;
            if let Some((_, _, r)) = self.dut.mon.results.pop_front() {
                if r != want {
                    return Err(format!("result {r:?}, the model's {want:?}"));
                }
                // The FIFO's write and the drop pulse follow the result.
                for _ in 0..3 {
                    self.step()?;
                }
                return want
                    .event
                    .ok_or_else(|| "a probe that does not learn".into());
            }
        }
        Err("no result".into())
    }

    fn occupancy(&mut self) -> Result<Option<usize>, String> {
        Ok(None)
    }

    fn drops(&mut self) -> Result<Drops, String> {
        Ok(Drops::Since(std::mem::take(&mut self.dropped)))
    }

    fn take(&mut self) -> Result<Vec<LearnEvent>, String> {
        self.dut.events.backpressure = 0.0;
        let mut beats = Vec::new();
        for _ in 0..4 {
            self.step()?;
            beats = self.dut.events.take();
            if !beats.is_empty() {
                break;
            }
        }
        self.dut.events.backpressure = 1.0;
        if beats.len() > 1 {
            return Err(format!("{} beats taken in one clock", beats.len()));
        }
        take_events(&mut beats).map_err(|e| e.to_string())
    }
}

#[test]
fn event_fifo_overflows_as_documented() {
    let seed = seed_from_env(0x9e0e_0002);
    let mut rng = StdRng::seed_from_u64(seed);
    let t = bank();
    let mut dut = TopBench::new(seed, None, 0.1, 0.0, 0.1).expect("model");
    dut.load_bank(0, &t).expect("load");
    dut.write32(nlb_hw::blocks::ctrl::ENABLE, 1)
        .expect("enable");
    dut.events.backpressure = 1.0;
    let dropped_port = dut.bench.sim.port("m_event_dropped").expect("port");
    let mut fifo = EventFifo {
        dut,
        tables: t,
        dropped_port,
        dropped: 0,
    };
    let mut bins = Bins::new();
    if let Err(e) = queues::overflow_run(&mut fifo, &mut rng, 200, &mut bins) {
        panic!("{e} (seed {seed:#x}: rerun with NLB_SEED={seed:#x})");
    }
    if !fifo.dut.events.violations().is_empty() {
        panic!("event stream: {:?}", fifo.dut.events.violations());
    }
    coverage::assert_hit(
        &bins,
        queues::required_bins(&fifo.name()),
        "event FIFO bins",
        &format!("seed {seed:#x}"),
    );
}

// ---- admission: the FIFOs behind it ------------------------------------------------------------

/// Frames, jumbo and minimum, to the two VIPs (forwarded, learning, punted) with every output
/// stream stalled for long stretches and a storm of counter snapshots on the AXI-Lite port.
/// The receive side never waits: frames it has no room for are dropped whole and reported
/// (NO_ROOM_BUFFER); nothing else may be lost: results, frames, punts, events, then every
/// counter as the model's, the drops included.
#[test]
fn stalled_outputs_fill_the_fifos_and_lose_nothing() {
    replay_stall_case("queues_stall", seed_from_env(0x9e0e_0003), false);
}

/// Minimum frames back to back (one result per clock) with no output stalled while the
/// snapshot storm runs: each snapshot takes a clock from the counters' results, so their FIFO
/// fills unless `s_room` closes admission, which drops the frames that find it closed
/// (NO_ROOM_LOOKUP); every counter must still equal the model's, the drops included.
#[test]
fn back_to_back_results_under_a_snapshot_storm_lose_no_count() {
    replay_stall_case("queues_storm", seed_from_env(0x9e0e_0004), true);
}

fn replay_stall_case(name: &str, seed: u64, back_to_back: bool) {
    let wave = wave_path(name, seed);
    let r = std::panic::catch_unwind(|| stall_case(seed, None, back_to_back));
    if r.is_err() {
        let _ = std::panic::catch_unwind(|| stall_case(seed, Some(&wave), back_to_back));
        panic!(
            "{name}: seed {seed:#x} failed (above; rerun with NLB_SEED={seed:#x}); \
             waveform: {}",
            wave.display()
        );
    }
}

/// The frames at the front of `want` that the receive side reported dropped: taken off and
/// counted as the NIC counts such a drop (its reason and the DROP verdict, the frame's bytes).
fn account_drops(
    want: &mut VecDeque<(u32, Vec<u8>, PacketResult)>,
    dropped: &BTreeMap<u32, Reason>,
    counters: &mut Counters,
) -> usize {
    let mut n = 0;
    while let Some(reason) = want.front().and_then(|w| dropped.get(&w.0).copied()) {
        let (_, _, w) = want.pop_front().expect("a frame");
        counters.record(&PacketResult {
            verdict: Verdict::Drop,
            reason,
            rule: None,
            backend: None,
            ..w
        });
        n += 1;
    }
    n
}

/// `back_to_back`: only minimum frames, no output stalled, snapshots whenever the master is
/// idle; otherwise minimum, jumbo, punted and learning frames with the outputs stalled in long
/// stretches.
fn stall_case(seed: u64, wave: Option<&std::path::Path>, back_to_back: bool) {
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let t = bank();
    let mut dut = TopBench::new(seed, wave, 0.0, 0.0, 0.0).expect("model");
    dut.load_bank(0, &t).expect("load");
    dut.write32(nlb_hw::blocks::ctrl::ENABLE, 1)
        .expect("enable");
    let mut axil = PipelinedMaster::new(
        &dut.bench.sim,
        "s_axil",
        0.0,
        PipeTiming {
            lead: 0.0,
            hold: 0.0,
            backpressure: 0.0,
            ..PipeTiming::default()
        },
    )
    .expect("ports");
    // Frames sent and not yet accounted for: (number among the received frames, frame, the
    // model's result). Each comes out with its result or is reported dropped whole.
    let mut want: VecDeque<(u32, Vec<u8>, PacketResult)> = VecDeque::new();
    let mut dropped: BTreeMap<u32, Reason> = BTreeMap::new();
    let mut drops = 0usize;
    let mut counters = Counters::new(p);
    let (mut tx, mut punts, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let (mut want_tx, mut want_punt, mut want_ev) = (Vec::new(), Vec::new(), Vec::new());
    let mut bins = Bins::new();
    let mut got = 0usize;
    let mut sent = 0usize;
    let total = if back_to_back { 4000 } else { 1500 };
    let mut stall_left = 0u32;
    let mut clock = 0u64;
    while got + drops < total || tx.len() < want_tx.len() || punts.len() < want_punt.len() {
        clock += 1;
        assert!(
            clock < 2_000_000,
            "stalled outputs: stuck after {got} results"
        );
        // Frames: bursts of minimum frames, now and then a jumbo one, a punt, a learner.
        if sent < total && dut.rx.pending() < 200 {
            let n = sent as u64;
            let f = match if back_to_back {
                19
            } else {
                rng.random_range(0..20)
            } {
                0 => tcp(n as u16, 443, BIG_VIP, 8900),
                1 => later_fragment(n as u16),
                2 | 3 => tcp(n as u16, 80, VIP, 0),
                _ => tcp(n as u16, 443, BIG_VIP, 0),
            };
            let r = expect(&t, &f);
            dut.send(&f);
            want.push_back((sent as u32, f, r));
            sent += 1;
        }
        // Outputs stalled in long stretches (all three together), then drained.
        if stall_left == 0 {
            stall_left = rng.random_range(1..600);
            let stalled = !back_to_back && rng.random_bool(0.5);
            let bp = if stalled {
                1.0
            } else if back_to_back {
                0.0
            } else {
                rng.random_range(0.0..0.3)
            };
            dut.tx.backpressure = bp;
            dut.punt.backpressure = bp;
            // The event stream is never stalled here (the event FIFO's own test stalls it).
            dut.events.backpressure = 0.0;
        }
        stall_left -= 1;
        // A storm of snapshots: the counters block takes a clock of its own for each.
        if axil.is_idle() && (back_to_back || rng.random_bool(0.3)) {
            for _ in 0..8 {
                let kind = [CounterKind::Reason, CounterKind::Verdict, CounterKind::Rule]
                    [rng.random_range(0..3)];
                let sel = cb::Select {
                    kind,
                    index: rng.random_range(0..3),
                }
                .word()
                .expect("select");
                axil.push(Access::Write {
                    addr: cb::SELECT,
                    data: sel,
                    strb: 0xf,
                });
                axil.push(Access::Write {
                    addr: cb::SNAPSHOT,
                    data: cb::Snapshot {
                        op: nlb_hw::enums::CounterSnapshot::Latch,
                    }
                    .word(),
                    strb: 0xf,
                });
            }
        }
        dut.bench
            .step(&mut [
                &mut axil,
                &mut dut.rx,
                &mut dut.inject,
                &mut dut.mon,
                &mut dut.tx,
                &mut dut.punt,
                &mut dut.pass,
                &mut dut.events,
            ])
            .expect("step");
        let _ = axil.take_done();
        // Frames the receive side had no room for: reported at their first beat, before any
        // later frame's result (docs/pipeline.md section 14.4).
        for d in dut.mon.drops.drain(..) {
            assert!(
                dropped.insert(d.seq, d.reason).is_none(),
                "frame {} reported dropped twice",
                d.seq
            );
            coverage::hit(&mut bins, format!("a frame dropped whole: {:?}", d.reason));
        }
        drops += account_drops(&mut want, &dropped, &mut counters);
        while let Some((cycle, _, r)) = dut.mon.results.pop_front() {
            let (n, f, w) = want.pop_front().expect("a result with no frame");
            assert_eq!(
                r,
                w,
                "clock {cycle}: result of frame {n}, {:02x?}",
                &f[..f.len().min(80)]
            );
            counters.record(&w);
            match w.verdict {
                Verdict::Forward => want_tx.push(expect_out(&t, &f).1),
                Verdict::Punt => want_punt.push((w.punt_header(), f.clone())),
                _ => {}
            }
            if let Some(e) = w.event {
                want_ev.push(e);
            }
            got += 1;
            drops += account_drops(&mut want, &dropped, &mut counters);
        }
        let mut b = dut.tx.take();
        dut.tx_pending.append(&mut b);
        for f in take_frames(&mut dut.tx_pending) {
            assert_eq!(f, want_tx[tx.len()], "transmitted frame #{}", tx.len());
            tx.push(f);
        }
        let mut b = dut.punt.take();
        dut.punt_pending.append(&mut b);
        for pf in take_punts(&mut dut.punt_pending).expect("punt stream") {
            let (h, f) = &want_punt[punts.len()];
            assert_eq!(pf.header, *h, "punt #{} header", punts.len());
            assert_eq!(&pf.frame, f, "punt #{} frame", punts.len());
            punts.push(pf);
        }
        let mut b = dut.events.take();
        events.extend(take_events(&mut b).expect("event stream"));
    }
    // Let the last events and counts through.
    dut.tx.backpressure = 0.0;
    dut.punt.backpressure = 0.0;
    dut.events.backpressure = 0.0;
    for _ in 0..200 {
        dut.step().expect("step");
        let mut b = dut.events.take();
        events.extend(take_events(&mut b).expect("event stream"));
    }
    assert_eq!(events, want_ev, "events");
    for (kind, n) in [
        (CounterKind::Reason, nlb_hw::enums::Reason::ALL.len() as u32),
        (CounterKind::Verdict, 4),
        (CounterKind::Rule, 3),
        (CounterKind::Backend, 2),
    ] {
        for i in 0..n {
            let c = dut.read_counter(kind, i, false).expect("counter");
            assert_eq!(c, counters.get(kind, i), "counter {kind:?} {i}");
        }
    }
    for s in [&dut.tx, &dut.punt, &dut.events] {
        assert!(
            s.violations().is_empty(),
            "stream rules: {:?}",
            s.violations()
        );
    }
    assert!(
        axil.violations().is_empty(),
        "AXI-Lite: {:?}",
        axil.violations()
    );
    // The stalled outputs fill the packet buffer; the snapshot storm holds the counters'
    // results: either way the receive side runs out of room and must drop whole frames.
    let reason = if back_to_back {
        Reason::NoRoomLookup
    } else {
        Reason::NoRoomBuffer
    };
    coverage::assert_hit(
        &bins,
        [format!("a frame dropped whole: {reason:?}")],
        "stall bins",
        &format!("seed {seed:#x}"),
    );
}
