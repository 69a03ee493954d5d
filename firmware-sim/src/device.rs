//! The simulated NIC at register level: the blocks of `docs/regmap.md` over two table banks,
//! the connection table, the counters and the punt/learn/inject queues, driven the way the
//! driver drives the RTL (docs/pipeline.md, "The simulated device").
//!
//! Frames enter with [`ModelDevice::receive`] / [`ModelDevice::receive_batch`]; the host side uses
//! [`ModelDevice::read32`] / [`ModelDevice::write32`] only. [`ModelDevice::from_tables`] and
//! [`ModelDevice::set_auto_learn`] are the back doors a simulation run uses instead of a driver
//! (like a memory initialisation file in an RTL simulation).

use crate::conntrack::ConnTable;
use crate::counters::{Counter, CounterKind, Counters};
use crate::dma::{bytes_of, words_of, DmaPort, HostDma, RegEffect};
use crate::pipeline::{self, Context, Lane, OutputError, PacketResult};
use nlb_hw::blocks;
use nlb_hw::ct_words::{pack_ct, unpack_ct};
use nlb_hw::enums::{CounterSnapshot, DmaCmd, DmaError, Event, Ring, TableCmd, Verdict};
use nlb_hw::layouts::{CmdDesc, CtEntry, EventRecord, InjectHeader, LearnEvent, PuntHeader};
use nlb_hw::tables::{MAX_V4_PREFIX, MAX_V6_PREFIX};
use nlb_hw::{NicSettings, Profile, Tables, DESIGN_VERSION, NIC_REGISTERS, REGMAP_VERSION};
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// Bytes of BAR 0.
pub const BAR_SIZE: u32 = 0x1_0000;
/// `fw_id.board_id` of the simulated device.
pub const BOARD_ID_SIM: u32 = 0x5100;
/// Bytes of the punt and inject windows (`punt_data` / `inject_data`).
pub const WINDOW_BYTES: usize = blocks::queues::PUNT_DATA_COUNT as usize * 4;
/// Size of each register block's address range.
const BLOCK_SPAN: u32 = 0x1000;

/// Why a register access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegError {
    /// Not 4-byte aligned.
    #[error("register offset {offset:#x} is not 4-byte aligned")]
    Unaligned {
        /// The offset.
        offset: u32,
    },
    /// Beyond BAR 0.
    #[error("register offset {offset:#x} is beyond BAR 0 ({BAR_SIZE:#x} bytes)")]
    OutOfRange {
        /// The offset.
        offset: u32,
    },
}

/// What a write to the flash/reboot blocks asks of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PortEffect {
    /// Nothing beyond the write.
    #[default]
    None,
    /// Reconfiguration (reboot from flash): every memory and register is reset.
    Reconfigure,
}

/// The `spi_flash` and `reboot` register blocks. The device routes every access in their
/// address ranges (absolute offsets) here; `crate::flash` provides the real chip model.
pub trait FlashPort: Send + fmt::Debug {
    /// Reads a register (absolute BAR offset).
    fn read32(&mut self, offset: u32) -> u32;
    /// Writes a register (absolute BAR offset).
    fn write32(&mut self, offset: u32, value: u32) -> PortEffect;
    /// Lets `d` of simulated time pass (erase and program durations, FPGA reload).
    fn advance(&mut self, _d: Duration) {}
    /// Whether the FPGA is configured and on the bus (false while it reloads after a
    /// reboot: the device then reads all ones and ignores writes).
    fn is_up(&self) -> bool {
        true
    }
    /// `fw_id.build_id` of the booted image, when known.
    fn build_id(&self) -> Option<u32> {
        None
    }
    /// `fw_id.part_id` (the flash chip's identification), when known.
    fn part_id(&self) -> Option<u32> {
        None
    }
}

/// The flash port of a device without a flash model: block headers only, 0 elsewhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFlash;

impl FlashPort for NoFlash {
    fn read32(&mut self, offset: u32) -> u32 {
        block_header(offset).unwrap_or(0)
    }
    fn write32(&mut self, _offset: u32, _value: u32) -> PortEffect {
        PortEffect::None
    }
}

/// TYPE / VERSION / NEXT of the block whose header holds `offset`.
pub fn block_header(offset: u32) -> Option<u32> {
    let base = offset & !(BLOCK_SPAN - 1);
    let (ty, ver, next) = match base {
        blocks::fw_id::BASE => (
            blocks::fw_id::TYPE_WORD,
            blocks::fw_id::VERSION,
            blocks::fw_id::NEXT,
        ),
        blocks::ctrl::BASE => (
            blocks::ctrl::TYPE_WORD,
            blocks::ctrl::VERSION,
            blocks::ctrl::NEXT,
        ),
        blocks::table::BASE => (
            blocks::table::TYPE_WORD,
            blocks::table::VERSION,
            blocks::table::NEXT,
        ),
        blocks::conntrack::BASE => (
            blocks::conntrack::TYPE_WORD,
            blocks::conntrack::VERSION,
            blocks::conntrack::NEXT,
        ),
        blocks::counters::BASE => (
            blocks::counters::TYPE_WORD,
            blocks::counters::VERSION,
            blocks::counters::NEXT,
        ),
        blocks::dma::BASE => (
            blocks::dma::TYPE_WORD,
            blocks::dma::VERSION,
            blocks::dma::NEXT,
        ),
        blocks::spi_flash::BASE => (
            blocks::spi_flash::TYPE_WORD,
            blocks::spi_flash::VERSION,
            blocks::spi_flash::NEXT,
        ),
        blocks::reboot::BASE => (
            blocks::reboot::TYPE_WORD,
            blocks::reboot::VERSION,
            blocks::reboot::NEXT,
        ),
        blocks::queues::BASE => (
            blocks::queues::TYPE_WORD,
            blocks::queues::VERSION,
            blocks::queues::NEXT,
        ),
        blocks::mem::BASE => (
            blocks::mem::TYPE_WORD,
            blocks::mem::VERSION,
            blocks::mem::NEXT,
        ),
        _ => return None,
    };
    match offset - base {
        0x0 => Some(ty),
        0x4 => Some(ver),
        0x8 => Some(next),
        _ => None,
    }
}

/// A frame on the punt queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Punted {
    /// Its punt header.
    pub header: PuntHeader,
    /// The frame (at most [`WINDOW_BYTES`]).
    pub frame: Vec<u8>,
}

impl Punted {
    /// What the punt queue holds of a punted packet: its header and the frame's first
    /// [`WINDOW_BYTES`] bytes (the editor's punt stream carries the same; `nlb-verif`'s
    /// editor bench compares with this).
    pub fn of(r: &PacketResult, frame: &[u8]) -> Punted {
        Punted {
            header: r.punt_header(),
            frame: frame[..frame.len().min(WINDOW_BYTES)].to_vec(),
        }
    }
}

/// A frame the device transmitted from the inject queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// What the pipeline did with it.
    pub result: PacketResult,
    /// The transmitted frame (empty unless FORWARD).
    pub frame: Vec<u8>,
}

/// Results and output frames of a batch; reuse it across batches so its buffers are
/// allocated (and zeroed) once.
#[derive(Debug, Clone, Default)]
pub struct BatchOutput {
    /// One result per input frame, in order.
    pub results: Vec<PacketResult>,
    /// Output frames back to back; only `frames[..used]` belongs to this batch (the rest is
    /// room kept from earlier batches).
    frames: Vec<u8>,
    used: usize,
    offsets: Vec<usize>,
}

impl BatchOutput {
    /// An empty output.
    pub fn new() -> BatchOutput {
        BatchOutput::default()
    }

    /// The output frame of packet `i` (empty unless it was forwarded).
    pub fn frame(&self, i: usize) -> &[u8] {
        match (self.offsets.get(i), self.results.get(i)) {
            (Some(&o), Some(r)) => self.frames.get(o..o + r.out_len).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn clear(&mut self) {
        self.results.clear();
        self.used = 0;
        self.offsets.clear();
    }

    /// Keeps the first `n` packets' results and frames.
    fn truncate(&mut self, n: usize) {
        self.results.truncate(n);
        self.offsets.truncate(n);
        self.used = match (n.checked_sub(1), self.offsets.last(), self.results.last()) {
            (Some(_), Some(&o), Some(r)) => o + r.out_len,
            _ => 0,
        };
    }
}

#[derive(Debug, Clone, Default)]
struct CtrlRegs {
    enable: bool,
    active_bank: u8,
    generation: u32,
    settings: NicSettings,
}

#[derive(Debug, Clone)]
struct Window {
    select: u32,
    index: u32,
    error: bool,
    data: [u32; blocks::table::DATA_COUNT as usize],
}

#[derive(Debug, Clone)]
struct CtWindow {
    index: u32,
    error: bool,
    data: [u32; blocks::conntrack::DATA_COUNT as usize],
}

#[derive(Debug, Clone)]
struct Queues {
    depth: usize,
    punt: VecDeque<Punted>,
    punt_overflow: bool,
    punt_header: [u32; blocks::queues::PUNT_HEADER_COUNT as usize],
    punt_data: Vec<u8>,
    learn: VecDeque<LearnEvent>,
    learn_overflow: bool,
    learn_data: [u32; blocks::queues::LEARN_DATA_COUNT as usize],
    inject_header: [u32; blocks::queues::INJECT_HEADER_COUNT as usize],
    inject_data: Vec<u32>,
    irq_mask: u32,
    /// Injected frames run through the pipeline and not yet collected by the harness (the
    /// wire): at most `depth`, so a harness that never collects cannot grow it.
    transmitted: VecDeque<Injected>,
    /// Pushes refused because `transmitted` was full.
    inject_overflows: u64,
}

impl Queues {
    fn new(depth: u32) -> Queues {
        Queues {
            depth: depth as usize,
            punt: VecDeque::new(),
            punt_overflow: false,
            punt_header: [0; blocks::queues::PUNT_HEADER_COUNT as usize],
            punt_data: Vec::new(),
            learn: VecDeque::new(),
            learn_overflow: false,
            learn_data: [0; blocks::queues::LEARN_DATA_COUNT as usize],
            inject_header: [0; blocks::queues::INJECT_HEADER_COUNT as usize],
            inject_data: vec![0; blocks::queues::INJECT_DATA_COUNT as usize],
            irq_mask: 0,
            transmitted: VecDeque::new(),
            inject_overflows: 0,
        }
    }
}

/// A batch runs as a software pipeline over groups of `GROUP` packets. In one step, group `g`
/// goes through the front half and requests its connection-table buckets' tag words, group
/// `g - CANDIDATE_LAG` reads its tags and requests the key slots they point at, and group
/// `g - FINISH_LAG` reads its key slots and finishes. Each request thus has at least a group's
/// work to hide behind (the key slots two), whatever the batch size: at the u280 profile's
/// size a tag word and a key slot are random lines of a 4 MiB and a 64 MiB array, the second
/// depending on the first, and on a virtual machine whose host maps memory in 4 KiB pages
/// nearly every key slot also costs a nested page walk. (Running 32 packets' fronts, then
/// their requests, then their back halves left the last packets' entries no time to arrive:
/// hits ran at ~13 Mpps instead of ~16–17; a packet-by-packet stagger with the stages
/// interleaved ran ~5 % slower than groups; finishing one group after the key-slot request
/// instead of two ran hits ~1 Mpps slower, three or four groups after as well; see
/// docs/model-performance.md.)
const GROUP: usize = 8;
/// Groups from a packet's front half to its key-slot request.
const CANDIDATE_LAG: usize = 1;
/// Groups from a packet's front half to its back half.
const FINISH_LAG: usize = 3;
/// Lanes in flight: `FINISH_LAG + 1` groups, rounded up to a power of two.
const RING: usize = 32;
const _: () = assert!(
    RING.is_power_of_two()
        && RING >= (FINISH_LAG + 1) * GROUP
        && CANDIDATE_LAG < FINISH_LAG
        && FINISH_LAG < ROUND_GROUPS
);
/// The host time stamped on auto-learned entries: the auto-learning device has no host
/// clock, and nothing ages its entries.
const AUTO_LEARN_TIME: u32 = 0;
/// Entries a command moves per DMA transfer.
const CMD_CHUNK: u32 = 4096;
/// Groups between the passes that account finished packets (counters, hit bits, queues: they
/// need the device mutably, the stages borrow its tables).
const ROUND_GROUPS: usize = 8;

/// The simulated NIC.
#[derive(Debug)]
pub struct ModelDevice {
    profile: &'static Profile,
    banks: [Tables; 2],
    conntrack: ConnTable,
    counters: Counters,
    ctrl: CtrlRegs,
    table: Window,
    ct: CtWindow,
    counter_select: u32,
    counter_latch: Counter,
    queues: Queues,
    flash: Box<dyn FlashPort>,
    auto_learn: bool,
    pending_events: Vec<LearnEvent>,
    /// The host DMA engine (`dma` block, host rings).
    dma: HostDma,
    /// Per-packet state of the packets in flight in a batch (kept to reuse its allocation).
    lanes: Vec<Lane>,
}

impl ModelDevice {
    /// A device of a profile, as after reset: empty tables, pipeline disabled.
    pub fn new(profile: &'static Profile) -> ModelDevice {
        ModelDevice::with_conntrack(profile, ConnTable::new(profile.ct_buckets, profile.ct_ways))
    }

    /// A device with a connection table of another geometry (benchmarks; the firmware-ID
    /// block still reports the profile's).
    pub fn with_conntrack(profile: &'static Profile, conntrack: ConnTable) -> ModelDevice {
        ModelDevice {
            profile,
            banks: [Tables::empty(profile), Tables::empty(profile)],
            conntrack,
            counters: Counters::new(profile),
            ctrl: CtrlRegs::default(),
            table: Window {
                select: 0,
                index: 0,
                error: false,
                data: [0; blocks::table::DATA_COUNT as usize],
            },
            ct: CtWindow {
                index: 0,
                error: false,
                data: [0; blocks::conntrack::DATA_COUNT as usize],
            },
            counter_select: 0,
            counter_latch: Counter::default(),
            queues: Queues::new(profile.queue_depth),
            flash: Box::new(NoFlash),
            auto_learn: false,
            pending_events: Vec::new(),
            dma: HostDma::new(),
            lanes: Vec::with_capacity(RING),
        }
    }

    /// A device running `tables` in bank 0 with `settings`, pipeline enabled: what a simulation
    /// run starts from (the back door in place of the loader).
    pub fn from_tables(tables: Tables, settings: NicSettings) -> ModelDevice {
        let mut d = ModelDevice::new(tables.profile);
        d.banks[0] = tables;
        d.ctrl.settings = settings;
        d.ctrl.enable = true;
        d
    }

    /// Installs the flash/reboot block model.
    pub fn set_flash(&mut self, flash: Box<dyn FlashPort>) {
        self.flash = flash;
    }

    /// Lets `d` of simulated time pass for the flash chip and the reboot block (packets take
    /// no time in the model).
    pub fn advance(&mut self, d: Duration) {
        self.flash.advance(d);
        self.dma.advance(d);
    }

    /// Connects host memory: the DMA engine reads and writes the host rings through `port`
    /// (`None` disconnects it; DMA then faults and is counted).
    pub fn set_dma_port(&mut self, port: Option<Box<dyn DmaPort>>) {
        self.dma.set_port(port);
    }

    /// The DMA engine carries only the punt and event rings (`n` = 2), those and the inject
    /// ring (`n` = 3, as `nlb_host_dma` does), or all four (`n` = 4, the default): see
    /// [`HostDma::set_rings_carried`].
    pub fn set_dma_rings(&mut self, n: u8) {
        self.dma.set_rings_carried(n);
    }

    /// The host memory port, for its provider.
    pub fn dma_port_mut(&mut self) -> Option<&mut (dyn DmaPort + 'static)> {
        self.dma.port_mut()
    }

    /// When on, learn and teardown events are applied to the connection table at the end of
    /// each `receive`/`receive_batch` call (as an infinitely fast slow path would) instead of
    /// being queued: learn installs the entry, teardown marks it closed.
    pub fn set_auto_learn(&mut self, on: bool) {
        self.auto_learn = on;
    }

    /// The capacity profile.
    pub fn profile(&self) -> &'static Profile {
        self.profile
    }

    /// A table bank (read-only view for tests and tools).
    pub fn bank(&self, bank: u8) -> &Tables {
        &self.banks[usize::from(bank & 1)]
    }

    /// The connection table.
    pub fn conntrack(&self) -> &ConnTable {
        &self.conntrack
    }

    /// The connection table, for host-side back-door operations (benchmarks, tests).
    pub fn conntrack_mut(&mut self) -> &mut ConnTable {
        &mut self.conntrack
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Test hook: the counters, to count results made elsewhere (the `nlb_counters` bench of
    /// nlb-verif feeds it the results it drives into the RTL) and to preset them.
    #[cfg(feature = "test-hooks")]
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }

    /// The current NIC settings (`ctrl` registers).
    pub fn settings(&self) -> &NicSettings {
        &self.ctrl.settings
    }

    /// Frames the inject queue transmitted since the last call, in order: what went out on
    /// the wire (a process hosting the device sends the FORWARDed ones on). Until they are
    /// taken they hold inject queue entries (`inject_status`).
    pub fn take_injected(&mut self) -> Vec<Injected> {
        let taken: Vec<Injected> = self.queues.transmitted.drain(..).collect();
        // Frames waiting on the inject ring move on now that the wire took some.
        if self.dma.waiting(Ring::Inject) > 0 {
            self.run_inject_ring();
            self.dma.flush();
        }
        taken
    }

    /// Pushes the device refused because the inject queue had no free entry (frames not
    /// taken with [`ModelDevice::take_injected`] filled it); those frames were dropped before
    /// the pipeline, so the NIC's counters do not see them.
    pub fn inject_overflows(&self) -> u64 {
        self.queues.inject_overflows
    }

    fn context(&self) -> Context<'_> {
        let bank = self.ctrl.active_bank & 1;
        Context {
            tables: &self.banks[usize::from(bank)],
            bank,
            settings: &self.ctrl.settings,
            enabled: self.ctrl.enable,
            conntrack: &self.conntrack,
        }
    }

    /// One received frame through the pipeline. The output frame of a FORWARD verdict is
    /// written to `out` (give it [`crate::action::MAX_FRAME`] bytes); punts and events are
    /// queued, counters counted.
    pub fn receive(&mut self, frame: &[u8], out: &mut [u8]) -> Result<PacketResult, OutputError> {
        let r = pipeline::process(&self.context(), frame, out)?;
        self.account(&r, frame);
        self.flush_events();
        self.dma.flush();
        Ok(r)
    }

    /// A batch of received frames: the same as calling [`ModelDevice::receive`] for each, in
    /// order, except that auto-learned entries become visible after the batch.
    ///
    /// The packets go through the pipeline's stages staggered by groups (see [`GROUP`]): a
    /// group's front halves, the requests of its candidate entries and its back halves run a
    /// group apart, so the connection-table reads of later packets are in flight while earlier
    /// ones finish; side effects are then applied in packet order. The pipeline writes only hit
    /// bits, counters and queues, so this order gives the same results as one at a time, with
    /// one exception: a connection the NIC learns (hardware learning, docs/pipeline.md §10) is
    /// seen by every later packet. When a later packet of the batch has the learned flow's
    /// hash, everything after the learning packet is computed again from there.
    pub fn receive_batch(&mut self, frames: &[&[u8]], out: &mut BatchOutput) {
        out.clear();
        let mut lanes = std::mem::take(&mut self.lanes);
        lanes.resize(RING, Lane::default());
        let mut start = 0;
        while start < frames.len() {
            match self.run_staged(frames, start, out, &mut lanes) {
                None => break,
                Some(learned) => {
                    out.truncate(learned + 1);
                    start = learned + 1;
                }
            }
        }
        self.lanes = lanes;
        self.flush_events();
        self.dma.flush();
    }

    /// The staggered pipeline over `frames[start..]`, results appended to `out`. Returns
    /// `Some(i)` when packet `i` installed a connection that a later packet already looked up
    /// (the packets up to `i` are done and accounted; the rest must run again).
    fn run_staged(
        &mut self,
        frames: &[&[u8]],
        start: usize,
        out: &mut BatchOutput,
        lanes: &mut [Lane],
    ) -> Option<usize> {
        let n = frames.len() - start;
        let mut pending = [false; RING];
        // The packets of group `g` (empty beyond the batch), relative to `start`.
        let group = |g: usize| (g * GROUP).min(n)..((g + 1) * GROUP).min(n);
        let steps = n.div_ceil(GROUP) + FINISH_LAG;
        let mut step = 0;
        let mut accounted = 0;
        while step < steps {
            let round_end = (step + ROUND_GROUPS).min(steps);
            {
                let ctx = self.context();
                let mut memo = pipeline::VipMemo::default();
                for g in step..round_end {
                    for s in group(g) {
                        let f = frames[start + s];
                        out.results.push(pipeline::initial_result(&ctx, f));
                        if let Some(res) = out.results.last_mut() {
                            let lane = &mut lanes[s % RING];
                            pending[s % RING] = pipeline::front_into(&ctx, f, &mut memo, res, lane);
                            if pending[s % RING] {
                                lane.request_tags(ctx.conntrack);
                            }
                        }
                    }
                    for s in g.checked_sub(CANDIDATE_LAG).map_or(0..0, group) {
                        if pending[s % RING] {
                            lanes[s % RING].request_candidates(ctx.conntrack);
                        }
                    }
                    for i in g.checked_sub(FINISH_LAG).map_or(0..0, group) {
                        out.offsets.push(out.used);
                        let (true, Some(res)) = (pending[i % RING], out.results.get_mut(start + i))
                        else {
                            continue;
                        };
                        let end = out.used + crate::action::MAX_FRAME;
                        if out.frames.len() < end {
                            out.frames.resize(end, 0);
                        }
                        let room = &mut out.frames[out.used..end];
                        let f = frames[start + i];
                        if pipeline::finish_into(&ctx, f, &lanes[i % RING], res, room).is_err() {
                            // The room holds MAX_FRAME bytes, enough for any output.
                            *res = unreachable_result(f.len());
                        }
                        out.used += res.out_len;
                    }
                }
            }
            // Every packet of the groups before `round_end - FINISH_LAG` has finished.
            let finished = if round_end == steps {
                n
            } else {
                group(round_end - FINISH_LAG).start
            };
            let span = start + accounted..start + finished;
            for (i, frame) in frames.iter().enumerate().take(span.end).skip(span.start) {
                let Some(learned) = self.account(&out.results[i], frame) else {
                    continue;
                };
                if out.results[i + 1..].iter().any(|r| r.flow_hash == learned) {
                    return Some(i);
                }
            }
            accounted = finished;
            step = round_end;
        }
        None
    }

    /// Side effects of one packet: counters, hit bit, punt queue or ring, events (and with
    /// hardware learning the install). Returns the flow hash of a connection it installed.
    #[inline]
    fn account(&mut self, r: &PacketResult, frame: &[u8]) -> Option<u32> {
        self.counters.record(r);
        if let Some(i) = r.ct_index {
            self.conntrack.mark_hit(i);
        }
        if r.verdict == Verdict::Punt && !self.dma.punt(&r.punt_header(), frame) {
            let q = &mut self.queues;
            if q.punt.len() < q.depth {
                q.punt.push_back(Punted::of(r, frame));
            } else {
                q.punt_overflow = true;
            }
        }
        let ev = r.event?;
        let mut record = EventRecord {
            event: [ev],
            installed: false,
            ct_index: 0,
        };
        if ev.event == Event::Learn && self.dma.hw_learn() {
            // Hardware learning (SPEC R12.3): the flow's own way, else the lowest free one; a
            // full bucket is left to the host.
            if let Ok(i) = self.conntrack.install(&ev, self.dma.host_time()) {
                record.installed = true;
                record.ct_index = i;
            }
        }
        if self.auto_learn {
            self.pending_events.push(ev);
        } else if !self.dma.event(&record) {
            let q = &mut self.queues;
            if q.learn.len() < q.depth {
                q.learn.push_back(ev);
            } else {
                q.learn_overflow = true;
            }
        }
        record.installed.then_some(ev.flow_hash)
    }

    fn flush_events(&mut self) {
        for ev in std::mem::take(&mut self.pending_events) {
            match ev.event {
                // A full bucket is what the host would log and count; the flow keeps going
                // by Maglev.
                Event::Learn => {
                    let _ = self.conntrack.install(&ev, AUTO_LEARN_TIME);
                }
                Event::Teardown => {
                    let _ = self.conntrack.mark_closed(&ev);
                }
            }
        }
    }

    fn reset(&mut self) {
        let flash = std::mem::replace(&mut self.flash, Box::new(NoFlash));
        let ct = ConnTable::new(self.conntrack.buckets(), self.conntrack.ways());
        let auto = self.auto_learn;
        // Host memory stays mapped across a reconfiguration; the engine's registers reset.
        let carried = self.dma.rings_carried();
        let port = self.dma.port_mut().is_some().then(|| {
            let mut old = HostDma::new();
            std::mem::swap(&mut old, &mut self.dma);
            old
        });
        *self = ModelDevice::with_conntrack(self.profile, ct);
        self.flash = flash;
        self.auto_learn = auto;
        if let Some(mut old) = port {
            old.reset();
            self.dma = old;
        } else {
            self.dma.set_rings_carried(carried);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Registers
    // -----------------------------------------------------------------------------------------

    fn check(offset: u32) -> Result<(), RegError> {
        if !offset.is_multiple_of(4) {
            return Err(RegError::Unaligned { offset });
        }
        if offset >= BAR_SIZE {
            return Err(RegError::OutOfRange { offset });
        }
        Ok(())
    }

    /// Reads the 32-bit register at byte `offset` of BAR 0. Unmapped offsets read 0.
    pub fn read32(&mut self, offset: u32) -> Result<u32, RegError> {
        Self::check(offset)?;
        let base = offset & !(BLOCK_SPAN - 1);
        // While the FPGA reloads the device is off the bus; the flash port answers (all
        // ones) and lets the read's time pass.
        if base == blocks::spi_flash::BASE || base == blocks::reboot::BASE || !self.flash.is_up() {
            return Ok(self.flash.read32(offset));
        }
        if let Some(h) = block_header(offset) {
            return Ok(h);
        }
        Ok(match base {
            blocks::fw_id::BASE => self.read_fw_id(offset),
            blocks::ctrl::BASE => self.read_ctrl(offset),
            blocks::table::BASE => self.read_table(offset),
            blocks::conntrack::BASE => self.read_ct(offset),
            blocks::counters::BASE => self.read_counters(offset),
            blocks::dma::BASE => self.dma.read_reg(offset),
            // The model has no memory ports: no read is issued, none waits (docs/pipeline.md
            // section 14).
            blocks::mem::BASE => 0,
            _ if (blocks::queues::BASE..blocks::mem::BASE).contains(&offset) => {
                self.read_queues(offset)
            }
            _ => 0,
        })
    }

    /// Writes the 32-bit register at byte `offset` of BAR 0. Writes to read-only or unmapped
    /// offsets are ignored.
    pub fn write32(&mut self, offset: u32, value: u32) -> Result<(), RegError> {
        Self::check(offset)?;
        let base = offset & !(BLOCK_SPAN - 1);
        if !self.flash.is_up() {
            return Ok(());
        }
        if base == blocks::spi_flash::BASE || base == blocks::reboot::BASE {
            if self.flash.write32(offset, value) == PortEffect::Reconfigure {
                self.reset();
            }
            return Ok(());
        }
        match base {
            blocks::ctrl::BASE => self.write_ctrl(offset, value),
            blocks::table::BASE => self.write_table(offset, value),
            blocks::conntrack::BASE => self.write_ct(offset, value),
            blocks::counters::BASE => self.write_counters(offset, value),
            blocks::dma::BASE => match self.dma.write_reg(offset, value) {
                RegEffect::Doorbell(Ring::Inject) => {
                    self.run_inject_ring();
                    self.dma.flush();
                }
                RegEffect::Doorbell(Ring::Cmd) => {
                    self.run_commands();
                    self.dma.flush();
                }
                _ => {}
            },
            _ if (blocks::queues::BASE..blocks::mem::BASE).contains(&offset) => {
                self.write_queues(offset, value)
            }
            _ => {}
        }
        Ok(())
    }

    /// Runs the frames waiting on the inject ring through docs/pipeline.md §12, as long as the
    /// transmit queue (frames not yet taken by the wire) has room.
    fn run_inject_ring(&mut self) {
        while self.queues.transmitted.len() < self.queues.depth {
            let Some(work) = self.dma.next_inject() else {
                break;
            };
            self.transmit_injected(&work.header, &work.frame);
            self.dma.inject_done();
        }
    }

    /// One injected frame through the action stage (active bank), counted, onto the
    /// transmit queue.
    fn transmit_injected(&mut self, h: &InjectHeader, frame: &[u8]) {
        let mut out = vec![0u8; crate::action::MAX_FRAME];
        let r = pipeline::process_injected(&self.context(), h, frame, &mut out)
            .unwrap_or_else(|_| unreachable_result(frame.len()));
        self.counters.record(&r);
        out.truncate(r.out_len);
        self.queues.transmitted.push_back(Injected {
            result: r,
            frame: out,
        });
    }

    /// Runs every command waiting on the command ring, in order.
    fn run_commands(&mut self) {
        while let Some((slot, desc)) = self.dma.next_command() {
            let code = match desc {
                Some(c) => self.execute(&c),
                // Already counted by the engine.
                None => DmaError::None,
            };
            self.dma.command_done(slot, code);
        }
    }

    /// One command of the command ring (docs/pipeline.md §15).
    fn execute(&mut self, c: &CmdDesc) -> DmaError {
        if c.count == 0 {
            return DmaError::BadCommand;
        }
        match c.op {
            DmaCmd::TableWrite => {
                let words = Tables::entry_words(c.table);
                self.write_records(c, words, |dev, index, w| {
                    let bank = &mut dev.banks[usize::from(c.bank)];
                    match bank.write_entry(c.table, index, w) {
                        Ok(()) => DmaError::None,
                        Err(nlb_hw::TableError::OutOfRange { .. }) => DmaError::BadIndex,
                        Err(_) => DmaError::BadEntry,
                    }
                })
            }
            DmaCmd::CtWrite => self.write_records(c, CtEntry::WORDS, |dev, index, w| {
                match dev.conntrack.write(index, unpack_ct(w)) {
                    Ok(()) => DmaError::None,
                    Err(_) => DmaError::BadIndex,
                }
            }),
            DmaCmd::TableRead => {
                let words = Tables::entry_words(c.table);
                self.read_records(c, words, |dev, index| {
                    dev.banks[usize::from(c.bank)]
                        .read_entry(c.table, index)
                        .ok()
                })
            }
            DmaCmd::CtRead => self.read_records(c, CtEntry::WORDS, |dev, index| {
                dev.conntrack
                    .entry(index)
                    .and_then(|e| pack_ct(e).ok())
                    .map(|w| w.to_vec())
            }),
            DmaCmd::HitRead => {
                if c.list {
                    return DmaError::BadCommand;
                }
                if !c.index.is_multiple_of(32) {
                    return DmaError::BadIndex;
                }
                self.read_records(c, 1, |dev, k| {
                    // Record k is the word of entries index + 32 (k - index).
                    let at = c
                        .index
                        .checked_add(k.checked_sub(c.index)?.checked_mul(32)?)?;
                    (at < dev.conntrack.len()).then(|| vec![dev.conntrack.take_hits(at)])
                })
            }
        }
    }

    /// A write command: `c.count` records of `words` words (plus the index word for a list)
    /// read from host memory in chunks, each applied by `apply`; stops at the first failure,
    /// or at the first record one of whose words lies in a line the IOMMU refuses (the records
    /// before it applied).
    fn write_records(
        &mut self,
        c: &CmdDesc,
        words: usize,
        mut apply: impl FnMut(&mut ModelDevice, u32, &[u32]) -> DmaError,
    ) -> DmaError {
        if !c.addr.is_multiple_of(4) {
            return DmaError::BadEntry;
        }
        let stride = words + usize::from(c.list);
        let mut done = 0u32;
        while done < c.count {
            let n = (c.count - done).min(CMD_CHUNK);
            let mut raw = vec![0u8; n as usize * stride * 4];
            let at = c.addr + u64::from(done) * stride as u64 * 4;
            let (whole, fault) = match self.dma.read_data_lines(at, &mut raw) {
                Ok(()) => (n as usize, false),
                Err((bytes, _)) => (bytes / (stride * 4), true),
            };
            let data = words_of(&raw[..whole * stride * 4]);
            for (k, rec) in data.chunks(stride).enumerate() {
                let (index, entry) = if c.list {
                    (rec[0], &rec[1..])
                } else {
                    (c.index.wrapping_add(done + k as u32), rec)
                };
                let code = apply(self, index, entry);
                if code != DmaError::None {
                    return code;
                }
            }
            if fault {
                return DmaError::DmaFault;
            }
            done += n;
        }
        DmaError::None
    }

    /// A read command: entries `c.index ..` (`c.count` of them, `words` words each, from
    /// `get`) written to host memory in chunks; stops at the first index `get` refuses (the
    /// entries before it written), or at a line the IOMMU refuses (the lines before it
    /// written).
    fn read_records(
        &mut self,
        c: &CmdDesc,
        words: usize,
        mut get: impl FnMut(&mut ModelDevice, u32) -> Option<Vec<u32>>,
    ) -> DmaError {
        if !c.addr.is_multiple_of(4) {
            return DmaError::BadEntry;
        }
        if c.list {
            return self.read_list(c, words, get);
        }
        let mut done = 0u32;
        let mut buf: Vec<u32> = Vec::new();
        while done < c.count {
            let n = (c.count - done).min(CMD_CHUNK);
            buf.clear();
            let mut code = DmaError::None;
            for k in 0..n {
                let Some(w) = c
                    .index
                    .checked_add(done + k)
                    .and_then(|index| get(self, index))
                else {
                    code = DmaError::BadIndex;
                    break;
                };
                buf.extend_from_slice(&w[..words.min(w.len())]);
                buf.resize(buf.len() + words.saturating_sub(w.len()), 0);
            }
            let at = c.addr + u64::from(done) * words as u64 * 4;
            if self.dma.write_data_lines(at, &bytes_of(&buf)).is_err() {
                return DmaError::DmaFault;
            }
            if code != DmaError::None {
                return code;
            }
            done += n;
        }
        DmaError::None
    }

    /// A list read: records of the index word and room for the entry; the device reads the
    /// indices and writes each entry after its index. Stops as the other commands do: at an
    /// index `get` refuses (the records before it filled), at a record one of whose words
    /// lies in a line the IOMMU refuses for reading, at a line it refuses for writing.
    fn read_list(
        &mut self,
        c: &CmdDesc,
        words: usize,
        mut get: impl FnMut(&mut ModelDevice, u32) -> Option<Vec<u32>>,
    ) -> DmaError {
        let stride = words + 1;
        let mut done = 0u32;
        while done < c.count {
            let n = (c.count - done).min(CMD_CHUNK);
            let at = c.addr + u64::from(done) * stride as u64 * 4;
            let mut raw = vec![0u8; n as usize * stride * 4];
            let (whole, mut code) = match self.dma.read_data_lines(at, &mut raw) {
                Ok(()) => (n as usize, DmaError::None),
                Err((bytes, _)) => (bytes / (stride * 4), DmaError::DmaFault),
            };
            let mut data = words_of(&raw[..whole * stride * 4]);
            let mut filled = 0usize;
            for rec in data.chunks_mut(stride) {
                let Some(w) = get(self, rec[0]) else {
                    code = DmaError::BadIndex;
                    break;
                };
                for (k, x) in rec[1..].iter_mut().enumerate() {
                    *x = w.get(k).copied().unwrap_or(0);
                }
                filled += 1;
            }
            // The filled records go out whole (their index words unchanged).
            if self
                .dma
                .write_data_lines(at, &bytes_of(&data[..filled * stride]))
                .is_err()
            {
                return DmaError::DmaFault;
            }
            if code != DmaError::None {
                return code;
            }
            done += n;
        }
        DmaError::None
    }

    /// Writes the bytes of the register at `offset` that the byte strobes `strb` select (bit
    /// i: byte i, as AXI's WSTRB), by the regmap's rule for partial writes: a read-write
    /// register that stores its value takes the strobed bytes and keeps the others (then
    /// keeps its field bits, saturates, as a whole write does); a register whose write acts
    /// (every write-only register, and `spi_flash.txrx`, whose write starts a transfer) acts
    /// only on a write with all four strobes and ignores any other; read-only and unmapped
    /// offsets ignore writes; a write with no strobe changes nothing.
    pub fn write32_strobed(&mut self, offset: u32, value: u32, strb: u32) -> Result<(), RegError> {
        Self::check(offset)?;
        let strb = strb & 0xf;
        if strb == 0xf {
            return self.write32(offset, value);
        }
        if strb == 0
            || offset == blocks::spi_flash::TXRX
            || blocks::access(offset) != Some(blocks::Access::ReadWrite)
        {
            return Ok(());
        }
        let mask = (0..4)
            .filter(|b| strb >> b & 1 != 0)
            .fold(0u32, |m, b| m | 0xff << (8 * b));
        let old = self.read32(offset)?;
        self.write32(offset, (old & !mask) | (value & mask))
    }

    fn read_fw_id(&self, offset: u32) -> u32 {
        use blocks::fw_id as b;
        let p = self.profile;
        match offset {
            b::DESIGN_VERSION => DESIGN_VERSION,
            b::REGMAP_VERSION => REGMAP_VERSION,
            b::BOARD_ID => BOARD_ID_SIM,
            b::PROFILE_ID => p.id,
            b::CAP_VIP_BUCKETS => p.vip_buckets,
            b::CAP_VIP_WAYS => p.vip_ways,
            b::CAP_RULES => p.rules,
            b::CAP_POOLS => p.pools,
            b::CAP_MAGLEV_SLOTS => p.maglev_slots,
            b::CAP_BACKENDS => p.backends,
            b::CAP_CT_BUCKETS => self.conntrack.buckets(),
            b::CAP_CT_WAYS => self.conntrack.ways(),
            b::CAP_QUEUE_DEPTH => p.queue_depth,
            b::CAP_CT_CHANNELS => p.ct_channels,
            b::CAP_MAGLEV_CHANNELS => p.maglev_channels,
            b::CAP_MEM_SLOTS => p.mem_slots,
            b::BUILD_ID => self.flash.build_id().unwrap_or(0),
            b::PART_ID => self.flash.part_id().unwrap_or(0),
            // git_hash: 0 for the model.
            _ => 0,
        }
    }

    fn read_ctrl(&self, offset: u32) -> u32 {
        use blocks::ctrl as b;
        match offset {
            b::ENABLE => b::Enable {
                enable: self.ctrl.enable,
            }
            .word(),
            b::ACTIVE_BANK => b::ActiveBank {
                bank: self.ctrl.active_bank == 1,
            }
            .word(),
            b::GENERATION => self.ctrl.generation,
            // Packets complete within one call: none is ever in flight between accesses.
            b::PACKETS_IN_FLIGHT | b::BANK_IN_USE => 0,
            o => match (
                NIC_REGISTERS.iter().position(|&r| r == o),
                self.ctrl.settings.words(),
            ) {
                (Some(k), Ok(words)) => words[k],
                _ => 0,
            },
        }
    }

    fn write_ctrl(&mut self, offset: u32, v: u32) {
        use blocks::ctrl as b;
        match offset {
            b::ENABLE => self.ctrl.enable = b::Enable::from_word(v).enable,
            b::ACTIVE_BANK => self.ctrl.active_bank = u8::from(b::ActiveBank::from_word(v).bank),
            b::GENERATION => self.ctrl.generation = v,
            o => {
                let Some(k) = NIC_REGISTERS.iter().position(|&r| r == o) else {
                    return;
                };
                let Ok(mut words) = self.ctrl.settings.words() else {
                    return;
                };
                // The register keeps its field bits; prefix lengths saturate (as the RTL).
                words[k] = match o {
                    b::OUTER_SRC_V4_LEN => v.min(u32::from(MAX_V4_PREFIX)),
                    b::OUTER_SRC_V6_LEN => v.min(u32::from(MAX_V6_PREFIX)),
                    _ => v & blocks::defined(o),
                };
                if let Some(n) = NicSettings::from_words(&words) {
                    self.ctrl.settings = n;
                }
            }
        }
    }

    fn read_table(&self, offset: u32) -> u32 {
        use blocks::table as b;
        match offset {
            b::SELECT => self.table.select,
            b::INDEX => self.table.index,
            b::STATUS => b::Status {
                busy: false,
                error: self.table.error,
            }
            .word(),
            o if (b::DATA..b::DATA + 4 * b::DATA_COUNT).contains(&o) => {
                self.table.data[((o - b::DATA) / 4) as usize]
            }
            _ => 0,
        }
    }

    fn write_table(&mut self, offset: u32, v: u32) {
        use blocks::table as b;
        match offset {
            b::SELECT => self.table.select = v & b::select::DEFINED,
            b::INDEX => self.table.index = v,
            b::CMD => self.table.error = !self.table_cmd(v),
            o if (b::DATA..b::DATA + 4 * b::DATA_COUNT).contains(&o) => {
                self.table.data[((o - b::DATA) / 4) as usize] = v
            }
            _ => {}
        }
    }

    /// Executes a table-window command; false on error (nothing changed).
    fn table_cmd(&mut self, cmd: u32) -> bool {
        let Some((write, index)) = decode_cmd(cmd, self.table.index) else {
            return false;
        };
        let Ok(select) = blocks::table::Select::from_word(self.table.select) else {
            return false;
        };
        let table = select.table;
        let bank = &mut self.banks[usize::from(select.bank)];
        if write {
            let words = Tables::entry_words(table);
            if bank
                .write_entry(table, index, &self.table.data[..words])
                .is_err()
            {
                return false;
            }
        }
        // READ, and WRITE's read-back: the data words hold what the memory stores.
        match bank.read_entry(table, index) {
            Ok(words) => {
                self.table.data[..words.len()].copy_from_slice(&words);
                self.table.index = index;
                true
            }
            Err(_) => false,
        }
    }

    fn read_ct(&mut self, offset: u32) -> u32 {
        use blocks::conntrack as b;
        match offset {
            b::INDEX => self.ct.index,
            b::STATUS => b::Status {
                busy: false,
                error: self.ct.error,
            }
            .word(),
            b::HIT_READ => self.conntrack.take_hits(self.ct.index),
            b::COUNT => self.conntrack.valid_count(),
            o if (b::DATA..b::DATA + 4 * b::DATA_COUNT).contains(&o) => {
                self.ct.data[((o - b::DATA) / 4) as usize]
            }
            _ => 0,
        }
    }

    fn write_ct(&mut self, offset: u32, v: u32) {
        use blocks::conntrack as b;
        match offset {
            b::INDEX => self.ct.index = v,
            b::CMD => self.ct.error = !self.ct_cmd(v),
            o if (b::DATA..b::DATA + 4 * b::DATA_COUNT).contains(&o) => {
                self.ct.data[((o - b::DATA) / 4) as usize] = v
            }
            _ => {}
        }
    }

    /// Executes a conntrack command; false on error (nothing changed).
    fn ct_cmd(&mut self, cmd: u32) -> bool {
        let Some((write, index)) = decode_cmd(cmd, self.ct.index) else {
            return false;
        };
        if write {
            let e = unpack_ct(&self.ct.data);
            if self.conntrack.write(index, e).is_err() {
                return false;
            }
        }
        // READ, and WRITE's read-back.
        match self.conntrack.entry(index).map(pack_ct) {
            Some(Ok(words)) => {
                self.ct.data[..words.len()].copy_from_slice(&words);
                self.ct.index = index;
                true
            }
            _ => false,
        }
    }

    fn read_counters(&self, offset: u32) -> u32 {
        use blocks::counters as b;
        let c = &self.counter_latch;
        if offset == b::SELECT {
            return self.counter_select;
        }
        let wide = [
            (b::packets::REGISTERS, b::packets::split(c.packets)),
            (b::bytes::REGISTERS, b::bytes::split(c.bytes)),
            (b::punts::REGISTERS, b::punts::split(c.punts)),
            (b::drops::REGISTERS, b::drops::split(c.drops)),
        ];
        wide.iter()
            .find_map(|(regs, words)| {
                let k = regs.iter().position(|&r| r == offset)?;
                Some(words[k])
            })
            .unwrap_or(0)
    }

    fn write_counters(&mut self, offset: u32, v: u32) {
        use blocks::counters as b;
        match offset {
            b::SELECT => self.counter_select = v,
            b::SNAPSHOT => {
                // A write-only register acts on a word with only its field bits.
                if v & !b::snapshot::DEFINED != 0 {
                    return;
                }
                let Ok(snapshot) = b::Snapshot::from_word(v) else {
                    return;
                };
                let select = self.counter_select;
                let kind = CounterKind::from_value(b::select::KIND.get(select));
                let index = b::select::INDEX.get(select);
                self.counter_latch = match (kind, snapshot.op) {
                    (Some(k), CounterSnapshot::Latch) => self.counters.get(k, index),
                    (Some(k), CounterSnapshot::LatchClear) => self.counters.take(k, index),
                    (None, _) => Counter::default(),
                };
            }
            _ => {}
        }
    }

    fn read_queues(&mut self, offset: u32) -> u32 {
        use blocks::queues as b;
        let q = &mut self.queues;
        match offset {
            b::PUNT_STATUS => {
                let v = b::PuntStatus {
                    count: saturate_u16(q.punt.len()),
                    overflow: q.punt_overflow,
                }
                .word();
                q.punt_overflow = false;
                v
            }
            b::PUNT_LEN => q.punt_data.len() as u32,
            b::LEARN_STATUS => {
                let v = b::LearnStatus {
                    count: saturate_u16(q.learn.len()),
                    overflow: q.learn_overflow,
                }
                .word();
                q.learn_overflow = false;
                v
            }
            // Entries held by transmitted frames the harness has not taken are not free.
            b::INJECT_STATUS => b::InjectStatus {
                free: saturate_u16(q.depth.saturating_sub(q.transmitted.len())),
            }
            .word(),
            b::IRQ_MASK => q.irq_mask,
            o if (b::LEARN_DATA..b::LEARN_DATA + 4 * b::LEARN_DATA_COUNT).contains(&o) => {
                q.learn_data[((o - b::LEARN_DATA) / 4) as usize]
            }
            o if (b::INJECT_HEADER..b::INJECT_HEADER + 4 * b::INJECT_HEADER_COUNT).contains(&o) => {
                q.inject_header[((o - b::INJECT_HEADER) / 4) as usize]
            }
            o if (b::PUNT_HEADER..b::PUNT_HEADER + 4 * b::PUNT_HEADER_COUNT).contains(&o) => {
                q.punt_header[((o - b::PUNT_HEADER) / 4) as usize]
            }
            o if (b::PUNT_DATA..b::PUNT_DATA + 4 * b::PUNT_DATA_COUNT).contains(&o) => {
                let at = (o - b::PUNT_DATA) as usize;
                let mut w = [0u8; 4];
                for (i, x) in w.iter_mut().enumerate() {
                    *x = q.punt_data.get(at + i).copied().unwrap_or(0);
                }
                u32::from_le_bytes(w)
            }
            _ => 0,
        }
    }

    fn write_queues(&mut self, offset: u32, v: u32) {
        use blocks::queues as b;
        match offset {
            b::PUNT_POP if v == b::PuntPop { pop: true }.word() => {
                let q = &mut self.queues;
                match q.punt.pop_front() {
                    Some(p) => {
                        q.punt_header = p.header.pack().unwrap_or_default();
                        q.punt_data = p.frame;
                    }
                    None => {
                        q.punt_header = [0; 4];
                        q.punt_data.clear();
                    }
                }
            }
            b::LEARN_POP if v == b::LearnPop { pop: true }.word() => {
                let q = &mut self.queues;
                q.learn_data = match q.learn.pop_front() {
                    Some(ev) => ev.pack().unwrap_or_default(),
                    None => [0; 12],
                };
            }
            b::INJECT_PUSH if v == b::InjectPush { push: true }.word() => self.inject(),
            b::IRQ_MASK => self.queues.irq_mask = v & b::irq_mask::DEFINED,
            o if (b::INJECT_HEADER..b::INJECT_HEADER + 4 * b::INJECT_HEADER_COUNT).contains(&o) => {
                self.queues.inject_header[((o - b::INJECT_HEADER) / 4) as usize] = v
            }
            o if (b::INJECT_DATA..b::INJECT_DATA + 4 * b::INJECT_DATA_COUNT).contains(&o) => {
                self.queues.inject_data[((o - b::INJECT_DATA) / 4) as usize] = v
            }
            _ => {}
        }
    }

    /// Sends the inject window through the action stage (on the active bank). With no free
    /// entry the push is dropped and counted.
    fn inject(&mut self) {
        if self.queues.transmitted.len() >= self.queues.depth {
            self.queues.inject_overflows += 1;
            return;
        }
        let Ok(h) = InjectHeader::unpack(&self.queues.inject_header) else {
            return;
        };
        let len = usize::from(h.frame_len).min(WINDOW_BYTES);
        let frame: Vec<u8> = self
            .queues
            .inject_data
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(len)
            .collect();
        self.transmit_injected(&h, &frame);
    }
}

/// A queue length as its 16-bit status field shows it (queues are never that deep).
fn saturate_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Decodes a `cmd` write of the table or conntrack block (the two share the field layout):
/// (is a write, entry index), `None` for an unknown command (or WRITE/READ with index bits
/// set). `nlb_table_cmd` is the RTL's; `nlb-verif`'s table_cmd bench compares the two.
pub fn decode_cmd(cmd: u32, index_reg: u32) -> Option<(bool, u32)> {
    let c = blocks::table::Cmd::from_word(cmd).ok()?;
    match (c.op, c.index) {
        (TableCmd::Write, 0) => Some((true, index_reg)),
        (TableCmd::Read, 0) => Some((false, index_reg)),
        (TableCmd::WriteAt, at) => Some((true, at)),
        (TableCmd::ReadAt, at) => Some((false, at)),
        _ => None,
    }
}

/// The result for the impossible case of a MAX_FRAME buffer being too small: counted as a
/// TOO_BIG drop rather than a panic.
fn unreachable_result(frame_len: usize) -> PacketResult {
    PacketResult::new(Verdict::Drop, nlb_hw::enums::Reason::TooBig, 0, frame_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_decode_by_the_regmap() {
        let (w, r) = (TableCmd::Write.value(), TableCmd::Read.value());
        let (wa, ra) = (TableCmd::WriteAt.value(), TableCmd::ReadAt.value());
        assert_eq!(decode_cmd(w, 7), Some((true, 7)));
        assert_eq!(decode_cmd(r, 7), Some((false, 7)));
        // cmd: op in bits 3..0, the index of the *_AT forms in bits 31..4.
        assert_eq!(decode_cmd(wa | 0x0001_2340, 7), Some((true, 0x1234)));
        assert_eq!(decode_cmd(ra | 0xffff_fff0, 7), Some((false, 0xfff_ffff)));
        // WRITE/READ with index bits, and unknown commands, are errors.
        assert_eq!(decode_cmd(w | 0x10, 7), None);
        assert_eq!(decode_cmd(0, 7), None);
        assert_eq!(decode_cmd(0x5 | 0x10, 7), None);
    }
}
