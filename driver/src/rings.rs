//! The host side of the NIC's descriptor rings (SPEC R12.2, docs/pipeline.md §15): punted
//! frames and learn/teardown events device → host, injected frames and table commands
//! host → device, in host memory the driver allocates and maps for the device's DMA.
//!
//! No hot path reads a register: how far the device got on each ring (and how many records
//! it dropped) is in the write-back area in host memory, which the NIC updates; the host
//! moves its own index with one posted register write per batch (the doorbell). Setup
//! (ring bases and sizes) and teardown are register writes too, once.
//!
//! An engine may carry only the first rings: the punt, event and inject rings, as the RTL's
//! `nlb_host_dma` does (`dma.caps.rings` = 3), or only the two toward the host (2). Table and
//! connection writes then go through the register windows ([`split_commands`] finds no
//! command ring), and with two rings injected frames go through the inject register window.
//!
//! One [`HostRings`] serves every backend that can DMA: VFIO (the memory mapped into the
//! container's IOMMU), the in-process model, `nlb-sim` over its socket (the memory shared
//! with the process), and the Verilated RTL.

use crate::device::{Device, DeviceError};
use crate::dma::{DmaError, DmaRegion, IrqLine};
use crate::queues::{PuntSlot, PuntedFrame};
use nlb_hw::blocks::dma as regs;
use nlb_hw::enums::DmaCmd;
use nlb_hw::enums::{DmaError as CmdError, Ring};
use nlb_hw::layouts::{
    CmdDesc, CtEntry, EventRecord, InjectDesc, InjectHeader, PuntCpl, PuntDesc, RingWb,
};
use nlb_hw::rings::{self, RingDef};
use nlb_hw::LayoutError;
use nlb_hw::Tables;
use std::time::{Duration, Instant};

/// Why a ring operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// Register access (setup, doorbells) failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Host memory for the rings could not be had or mapped.
    #[error(transparent)]
    Memory(#[from] DmaError),
    /// A record from the device does not decode.
    #[error("ring record does not decode: {0}")]
    Decode(#[from] LayoutError),
    /// The device has no `dma` block of this version (an older bitstream).
    #[error("the device has no host DMA engine of this release (dma.caps reads {caps:#x}: 2 to 4 rings expected); flash a bitstream of this release")]
    NoEngine {
        /// What `dma.caps` read.
        caps: u32,
    },
    /// The engine does not carry this ring (`dma.caps.rings` below 4).
    #[error("the device's DMA engine carries no {ring:?} ring (dma.caps.rings = {carried})")]
    NotCarried {
        /// The ring asked for.
        ring: Ring,
        /// Rings the engine carries.
        carried: u8,
    },
    /// The card's shell does not carry the DMA engine's port to host memory (the OpenNIC
    /// plugin's `config` says so): its DMA would only fault.
    #[error("the card's OpenNIC shell does not carry the host DMA port (plugin config bit 8 is 0): no host rings; build the shell with the host DMA path and --host-bridge (docs/boards.md, \"The host DMA path\")")]
    NoHostPath,
    /// A ring size the engine does not support.
    #[error("a ring of 2^{log2} slots is beyond the engine's 2^{max}")]
    TooLarge {
        /// Asked.
        log2: u8,
        /// Supported.
        max: u8,
    },
    /// The frame to inject is larger than a buffer.
    #[error("frame of {len} bytes exceeds the inject buffer ({max} bytes)")]
    FrameTooLong {
        /// Frame length.
        len: usize,
        /// Buffer size.
        max: usize,
    },
    /// The inject ring has no free slot (the device has not consumed them yet).
    #[error("the inject ring is full")]
    InjectFull,
    /// The command ring has no free slot.
    #[error("the command ring is full")]
    CommandsFull,
    /// A command failed on the device.
    #[error("command in slot {slot} failed on the device: {code:?}")]
    Command {
        /// Its slot.
        slot: u16,
        /// Why.
        code: CmdError,
    },
    /// The device did not finish the commands in time.
    #[error("the device did not finish {pending} command(s) within {after:?}")]
    Timeout {
        /// Commands not done.
        pending: u16,
        /// How long was waited.
        after: Duration,
    },
}

/// Ring sizes and interrupt moderation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSizes {
    /// Punt ring slots, log2 (each with a buffer of [`rings::FRAME_BYTES`]).
    pub punt_log2: u8,
    /// Event ring slots, log2.
    pub event_log2: u8,
    /// Inject ring slots, log2 (each with a buffer).
    pub inject_log2: u8,
    /// Command ring slots, log2.
    pub cmd_log2: u8,
    /// Bytes of the command data area (bulk loads and read-backs go through it in chunks).
    pub cmd_data: usize,
    /// Interrupt after this many records on a to-host ring ...
    pub irq_count: u8,
    /// ... or this many microseconds after the first one not yet signalled.
    pub irq_usecs: u16,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes {
            punt_log2: 10,
            event_log2: 12,
            inject_log2: 10,
            cmd_log2: 6,
            cmd_data: 16 * 1024 * 1024,
            irq_count: 32,
            irq_usecs: 50,
        }
    }
}

/// What the write-back area says, read from host memory (no register read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStatus {
    /// Punted frames waiting.
    pub punts: u32,
    /// Events waiting.
    pub events: u32,
    /// Punted frames the device dropped (no posted slot) since the last `poll`.
    pub punt_drops: u32,
    /// Events the device dropped (ring full) since the last `poll`.
    pub event_drops: u32,
    /// Frames the device dropped or failed on the inject ring since the last `poll`.
    pub inject_drops: u32,
    /// Records that failed on any ring (DMA faults included) since the last `poll`.
    pub errors: u32,
    /// Free inject slots.
    pub inject_free: u32,
}

/// Byte offsets of everything in the region.
#[derive(Debug, Clone, Copy)]
struct Layout {
    wb: usize,
    ring: [usize; 4],
    punt_bufs: usize,
    inject_bufs: usize,
    cmd_data: usize,
    len: usize,
}

const FRAME: usize = rings::FRAME_BYTES as usize;
/// Entries of the parts a long command is queued as, at the least ([`HostRings::submit`]).
pub const CMD_PIECE: u32 = 1024;
/// Range reads start their parts and runs at a multiple of this many entries: a Maglev memory
/// row is 16 slots (64 bytes of data) and 16 connections are 4 buckets (768 bytes), so each
/// part starts at a memory row and on a 64-byte line, which the NIC reads whole rows at a time
/// (docs/pipeline.md section 15.2); other starts go an entry at a time.
pub const ROW_ALIGN: u32 = 16;
/// How long a command of the command ring may take before the device counts as stuck (the
/// loader's and the connection manager's waits; [`HostRings::execute`] counts it from the
/// last command done).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// IOVA of the first ring region.
pub const RING_IOVA: u64 = 0x1_0000_0000;

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl Layout {
    fn of(s: &RingSizes) -> Layout {
        let slots = |log2: u8| 1usize << log2;
        let mut at = 4096; // the write-back area: page 0
        let mut ring = [0; 4];
        for (i, log2) in [s.punt_log2, s.event_log2, s.inject_log2, s.cmd_log2]
            .into_iter()
            .enumerate()
        {
            ring[i] = at;
            at = align(at + slots(log2) * rings::ALL[i].entry_bytes as usize, 4096);
        }
        let punt_bufs = at;
        at = align(at + slots(s.punt_log2) * FRAME, 4096);
        let inject_bufs = at;
        at = align(at + slots(s.inject_log2) * FRAME, 4096);
        let cmd_data = at;
        at = align(at + s.cmd_data, 4096);
        Layout {
            wb: 0,
            ring,
            punt_bufs,
            inject_bufs,
            cmd_data,
            len: at,
        }
    }
}

/// The host side of the rings of one device.
#[derive(Debug)]
pub struct HostRings {
    mem: DmaRegion,
    lay: Layout,
    sizes: RingSizes,
    irqs: Vec<IrqLine>,
    /// Next record to consume (to-host rings), next slot to write (to-device rings).
    next: [u16; 4],
    /// The inject ring's device index as last read from its write-back: the ring is known
    /// to have room up to it without reading the write-back again for every frame.
    inject_consumed: u16,
    /// The value last written to each ring's doorbell.
    rung: [u16; 4],
    /// Drop and error counts already reported.
    seen_drops: [u32; 4],
    seen_errors: [u32; 4],
    hw_learn: bool,
    /// Rings the engine carries (`dma.caps.rings`): the first 2, 3 or 4 of punt, event,
    /// inject and command.
    carried: u8,
    /// Injection through the register window, where the engine has no inject ring.
    inject_window: crate::queues::Queues,
    scratch: Vec<u32>,
    /// Buffers of punted frames the caller gave back ([`HostRings::recycle`]), reused by
    /// [`HostRings::pop_punts`] so that a frame costs no allocation.
    spare_frames: Vec<Vec<u8>>,
    /// The buffer (region offset) each punt slot holds: posted, or popped and not yet
    /// posted again. Buffers move between the punt and inject rings ([`HostRings::inject_punted`]).
    punt_buf: Vec<usize>,
    /// The buffer each inject slot owns: its frame while the device has not read it.
    inject_buf: Vec<usize>,
    /// Punt slots whose buffer went to the inject ring since they were popped.
    punt_lent: Vec<bool>,
    /// Punt ring index up to which slots hold a posted buffer: slots from it to `next[0]`
    /// are popped and wait for [`HostRings::give_back`].
    punt_posted: u16,
    /// Punted frames injected from their punt buffers ([`HostRings::injected_in_place`]).
    in_place: u64,
    /// This one's number, in the [`PuntSlot`]s of the frames it pops.
    id: u32,
}

/// Tells one [`HostRings`] from another in a [`PuntSlot`].
static RINGS_MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Reads the command data area ([`HostRings::data_reader`]); `Send` and `Sync`.
#[derive(Debug, Clone)]
pub struct DataReader {
    mem: DmaRegion,
    base: usize,
    len: usize,
}

impl DataReader {
    /// [`HostRings::read_data`].
    pub fn read(&self, offset: usize, out: &mut [u32]) -> Result<(), RingError> {
        if offset + out.len() * 4 > self.len {
            return Err(DmaError::Bounds {
                offset,
                len: out.len() * 4,
                size: self.len,
            }
            .into());
        }
        self.mem.read_words(self.base + offset, out)?;
        Ok(())
    }
}

fn slots(log2: u8) -> u16 {
    1u16 << log2
}

impl HostRings {
    /// Allocates the rings and buffers, maps them for `dev`'s DMA, connects one interrupt
    /// line per ring, programs the `dma` block (register writes, once), posts every punt
    /// buffer and enables the engine; `hw_learn` asks for hardware learning (granted only
    /// where `dma.caps.hw_learn`, see [`HostRings::hw_learn`]).
    pub fn attach<D: Device + ?Sized>(
        dev: &mut D,
        sizes: RingSizes,
        hw_learn: bool,
    ) -> Result<HostRings, RingError> {
        let caps_word = dev.read32(regs::CAPS)?;
        let caps = regs::Caps::from_word(caps_word);
        let carried = caps.rings;
        if carried < 2 || carried as usize > rings::ALL.len() {
            return Err(RingError::NoEngine { caps: caps_word });
        }
        if crate::opennic::plugin_status(dev)?.is_some_and(|p| !p.host_dma) {
            return Err(RingError::NoHostPath);
        }
        for log2 in [
            sizes.punt_log2,
            sizes.event_log2,
            sizes.inject_log2,
            sizes.cmd_log2,
        ]
        .into_iter()
        .take(usize::from(carried))
        {
            if log2 > caps.max_log2 || log2 == 0 {
                return Err(RingError::TooLarge {
                    log2,
                    max: caps.max_log2,
                });
            }
        }
        let lay = Layout::of(&sizes);
        let mem = DmaRegion::allocate(lay.len, RING_IOVA)?;
        // Engine off while it is set up (a restarted host finds it running).
        dev.write32(regs::CTRL, 0)?;
        dev.dma_map(&mem)?;
        let mut irqs = Vec::new();
        for _ in rings::ALL {
            irqs.push(IrqLine::new().map_err(|e| DeviceError::Io {
                what: "creating an interrupt eventfd".into(),
                source: e,
            })?);
        }
        dev.set_interrupts(&irqs)?;
        let mut r = HostRings {
            mem,
            lay,
            sizes,
            irqs,
            next: [0; 4],
            inject_consumed: 0,
            rung: [0; 4],
            seen_drops: [0; 4],
            seen_errors: [0; 4],
            hw_learn: hw_learn && caps.hw_learn,
            carried,
            inject_window: crate::queues::Queues::new(),
            scratch: Vec::new(),
            spare_frames: Vec::new(),
            punt_buf: (0..usize::from(slots(sizes.punt_log2)))
                .map(|i| lay.punt_bufs + i * FRAME)
                .collect(),
            inject_buf: (0..usize::from(slots(sizes.inject_log2)))
                .map(|i| lay.inject_bufs + i * FRAME)
                .collect(),
            punt_lent: vec![false; usize::from(slots(sizes.punt_log2))],
            punt_posted: 0,
            in_place: 0,
            id: RINGS_MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        r.program(dev)?;
        Ok(r)
    }

    fn iova(&self, offset: usize) -> u64 {
        self.mem.iova() + offset as u64
    }

    fn log2(&self, ring: Ring) -> u8 {
        match ring {
            Ring::Punt => self.sizes.punt_log2,
            Ring::Event => self.sizes.event_log2,
            Ring::Inject => self.sizes.inject_log2,
            Ring::Cmd => self.sizes.cmd_log2,
        }
    }

    fn slot_offset(&self, ring: Ring, index: u16) -> usize {
        let def = rings::ALL[ring as usize];
        let slot = usize::from(index & (slots(self.log2(ring)) - 1));
        self.lay.ring[ring as usize] + slot * def.entry_bytes as usize
    }

    fn program<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), RingError> {
        let wb = self.iova(self.lay.wb);
        self.mem.zero(0, self.lay.ring[0])?;
        let mut ops = crate::device::Batch::new();
        ops.write(regs::WB_LO, wb as u32)
            .write(regs::WB_HI, (wb >> 32) as u32);
        let irq = regs::PuntIrq {
            count: self.sizes.irq_count,
            usecs: self.sizes.irq_usecs,
            enable: true,
        }
        .word();
        for def in rings::ALL.into_iter().take(usize::from(self.carried)) {
            let base = self.iova(self.lay.ring[def.ring as usize]);
            let size = regs::PuntSize {
                log2: self.log2(def.ring),
                enable: true,
            }
            .word()
            .unwrap_or(0);
            ops.write(def.base_lo, base as u32)
                .write(def.base_hi, (base >> 32) as u32)
                .write(def.size, size)
                .write(def.irq, irq);
        }
        // Every punt slot gets its buffer; the event ring gives the device every slot.
        for i in 0..slots(self.sizes.punt_log2) {
            self.post_punt(i)?;
        }
        self.punt_posted = self.next[Ring::Punt as usize];
        let (punt, event) = (slots(self.sizes.punt_log2), slots(self.sizes.event_log2));
        ops.write(regs::PUNT_HOST, u32::from(punt))
            .write(regs::EVENT_HOST, u32::from(event))
            .write(
                regs::CTRL,
                regs::Ctrl {
                    enable: true,
                    hw_learn: self.hw_learn,
                }
                .word(),
            );
        self.rung[Ring::Punt as usize] = punt;
        self.rung[Ring::Event as usize] = event;
        ops.run(dev)?;
        Ok(())
    }

    /// Whether the engine carries `ring` (the first `dma.caps.rings` of punt, event, inject
    /// and command).
    pub fn carries(&self, ring: Ring) -> bool {
        (ring as u8) < self.carried
    }

    /// The names of the rings the engine carries, in ring order ("punt", "event", then
    /// "inject" and "cmd" where carried).
    pub fn carried(&self) -> Vec<&'static str> {
        rings::ALL
            .iter()
            .filter(|d| self.carries(d.ring))
            .map(|d| d.name)
            .collect()
    }

    /// Whether hardware learning is on (asked for, and the device can).
    pub fn hw_learn(&self) -> bool {
        self.hw_learn
    }

    /// The sizes the rings were made with.
    pub fn sizes(&self) -> &RingSizes {
        &self.sizes
    }

    /// The host memory of the rings.
    pub fn memory(&self) -> &DmaRegion {
        &self.mem
    }

    /// The interrupt lines, one per ring (`Ring` value).
    pub fn interrupts(&self) -> &[IrqLine] {
        &self.irqs
    }

    /// Stops the engine and unmaps the memory.
    pub fn detach<D: Device + ?Sized>(self, dev: &mut D) -> Result<(), RingError> {
        let mut ops = crate::device::Batch::new();
        ops.write(regs::CTRL, 0);
        for def in rings::ALL.into_iter().take(usize::from(self.carried)) {
            ops.write(def.size, 0);
        }
        ops.run(dev)?;
        dev.dma_unmap(&self.mem)?;
        Ok(())
    }

    /// Posts punt slot `index`'s buffer (the one it holds now) in its descriptor.
    fn post_punt(&mut self, index: u16) -> Result<(), RingError> {
        let slot = usize::from(index & (slots(self.sizes.punt_log2) - 1));
        let d = PuntDesc {
            addr: self.iova(self.punt_buf[slot]),
            len: FRAME as u16,
            reserved: 0,
        };
        self.mem
            .write_words(self.slot_offset(Ring::Punt, index), &d.pack()?)?;
        self.punt_lent[slot] = false;
        Ok(())
    }

    fn wb(&self, ring: Ring) -> Result<RingWb, RingError> {
        let at = self.lay.wb + rings::WB_STRIDE as usize * ring as usize;
        // The index word is the one the device publishes last: acquire it first.
        let first = self.mem.load_u32(at)?;
        let mut w = [0u32; 4];
        self.mem.read_words(at, &mut w)?;
        w[0] = first;
        Ok(RingWb::unpack(&w)?)
    }

    /// What waits on each ring, and what was dropped since the last call: host memory only.
    pub fn poll(&mut self) -> Result<RingStatus, RingError> {
        let mut st = RingStatus::default();
        let mut wbs = [RingWb::default(); 4];
        for ring in Ring::ALL {
            let wb = self.wb(ring)?;
            let i = ring as usize;
            let drops = wb.drops.wrapping_sub(self.seen_drops[i]);
            st.errors += wb.errors.wrapping_sub(self.seen_errors[i]);
            self.seen_drops[i] = wb.drops;
            self.seen_errors[i] = wb.errors;
            match ring {
                Ring::Punt => st.punt_drops = drops,
                Ring::Event => st.event_drops = drops,
                Ring::Inject => st.inject_drops = drops,
                Ring::Cmd => {}
            }
            wbs[i] = wb;
        }
        st.punts = u32::from(wbs[0].index.wrapping_sub(self.next[0]));
        st.events = u32::from(wbs[1].index.wrapping_sub(self.next[1]));
        let in_flight = self.next[2].wrapping_sub(wbs[2].index);
        st.inject_free = u32::from(slots(self.sizes.inject_log2).saturating_sub(in_flight));
        Ok(st)
    }

    /// Takes up to `max` event records into `out` (host memory only); the slots go back to
    /// the device with the next [`HostRings::give_back`].
    pub fn pop_events(
        &mut self,
        max: usize,
        out: &mut Vec<EventRecord>,
    ) -> Result<usize, RingError> {
        let done = self.wb(Ring::Event)?.index;
        let mut n = 0;
        let mut w = [0u32; EventRecord::WORDS];
        while n < max && self.next[1] != done {
            let at = self.slot_offset(Ring::Event, self.next[1]);
            self.mem.read_words(at, &mut w)?;
            out.push(EventRecord::unpack(&w)?);
            self.next[1] = self.next[1].wrapping_add(1);
            n += 1;
        }
        Ok(n)
    }

    /// Takes up to `max` punted frames into `out` (copied out of their buffers; host memory
    /// only). Each buffer stays the host's until the next [`HostRings::give_back`] posts its
    /// slot again: until then [`HostRings::inject_punted`] can send the frame from it.
    pub fn pop_punts(
        &mut self,
        max: usize,
        out: &mut Vec<PuntedFrame>,
    ) -> Result<usize, RingError> {
        let done = self.wb(Ring::Punt)?.index;
        let mut n = 0;
        let mut w = [0u32; PuntCpl::WORDS];
        while n < max && self.next[0] != done {
            let index = self.next[0];
            self.mem
                .read_words(self.slot_offset(Ring::Punt, index), &mut w)?;
            let c = PuntCpl::unpack(&w)?;
            let slot = usize::from(index & (slots(self.sizes.punt_log2) - 1));
            let mut frame = self.spare_frames.pop().unwrap_or_default();
            frame.clear();
            frame.resize(usize::from(c.written).min(FRAME), 0);
            self.mem.read(self.punt_buf[slot], &mut frame)?;
            out.push(PuntedFrame {
                header: c.header[0],
                frame,
                slot: Some(PuntSlot {
                    rings: self.id,
                    index,
                }),
            });
            self.next[0] = index.wrapping_add(1);
            n += 1;
        }
        Ok(n)
    }

    /// Takes back the buffers of punted frames the caller is done with (`frames` is left
    /// empty), for the next [`HostRings::pop_punts`]; keeps at most a ring's worth.
    pub fn recycle(&mut self, frames: &mut Vec<PuntedFrame>) {
        let keep = slots(self.sizes.punt_log2).into();
        for f in frames.drain(..) {
            if self.spare_frames.len() < keep {
                self.spare_frames.push(f.frame);
            }
        }
    }

    /// Gives consumed punt and event slots back to the device: posts the popped punt slots'
    /// buffers, then one posted register write per ring that moved (nothing if neither did).
    /// Frames popped before it can no longer be injected without a copy.
    pub fn give_back<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), RingError> {
        while self.punt_posted != self.next[Ring::Punt as usize] {
            self.post_punt(self.punt_posted)?;
            self.punt_posted = self.punt_posted.wrapping_add(1);
        }
        for (ring, reg) in [
            (Ring::Punt, regs::PUNT_HOST),
            (Ring::Event, regs::EVENT_HOST),
        ] {
            let i = ring as usize;
            let host = self.next[i].wrapping_add(slots(self.log2(ring)));
            if host != self.rung[i] {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                dev.write32(reg, u32::from(host))?;
                self.rung[i] = host;
            }
        }
        Ok(())
    }

    /// Queues a frame for injection to `backend` with `pool`'s delivery (host memory only;
    /// the device sees it at the next [`HostRings::ring_inject`]).
    pub fn inject(&mut self, backend: u16, pool: u16, frame: &[u8]) -> Result<(), RingError> {
        if !self.carries(Ring::Inject) {
            return Err(RingError::NotCarried {
                ring: Ring::Inject,
                carried: self.carried,
            });
        }
        if frame.len() > FRAME {
            return Err(RingError::FrameTooLong {
                len: frame.len(),
                max: FRAME,
            });
        }
        let slot = self.inject_room()?;
        let buf = self.inject_buf[slot];
        self.mem.write(buf, frame)?;
        self.queue_inject(buf, backend, pool, frame.len())
    }

    /// Queues a punted frame for injection like [`HostRings::inject`], but from the buffer
    /// it was punted into, without copying it, while that buffer is still the host's (popped,
    /// its slot not given back, not injected yet): the punt slot takes the inject slot's
    /// buffer in exchange, which the device has read already. Otherwise the frame is copied.
    /// It sends the bytes the NIC punted: a frame the caller changed goes by
    /// [`HostRings::inject`].
    pub fn inject_punted(
        &mut self,
        backend: u16,
        pool: u16,
        punted: &PuntedFrame,
    ) -> Result<(), RingError> {
        let Some(punt) = punted
            .slot
            .filter(|p| p.rings == self.id && self.lendable(p.index))
        else {
            return self.inject(backend, pool, &punted.frame);
        };
        if !self.carries(Ring::Inject) {
            return self.inject(backend, pool, &punted.frame);
        }
        let slot = self.inject_room()?;
        let from = usize::from(punt.index & (slots(self.sizes.punt_log2) - 1));
        let buf = self.punt_buf[from];
        self.punt_buf[from] = std::mem::replace(&mut self.inject_buf[slot], buf);
        self.punt_lent[from] = true;
        self.in_place += 1;
        self.queue_inject(buf, backend, pool, punted.frame.len())
    }

    /// Punted frames injected from the buffers they were punted into, without a copy.
    pub fn injected_in_place(&self) -> u64 {
        self.in_place
    }

    /// Whether punt ring index `index` is popped and not given back, its buffer not lent.
    fn lendable(&self, index: u16) -> bool {
        let popped = self.next[Ring::Punt as usize].wrapping_sub(self.punt_posted);
        let slot = usize::from(index & (slots(self.sizes.punt_log2) - 1));
        index.wrapping_sub(self.punt_posted) < popped && !self.punt_lent[slot]
    }

    /// The next inject slot, if the device has read it (the ring is not full).
    fn inject_room(&mut self) -> Result<usize, RingError> {
        let i = Ring::Inject as usize;
        let size = slots(self.sizes.inject_log2);
        if self.next[i].wrapping_sub(self.inject_consumed) >= size {
            // Full as far as the last look went: see how far the device has come since.
            self.inject_consumed = self.wb(Ring::Inject)?.index;
            if self.next[i].wrapping_sub(self.inject_consumed) >= size {
                return Err(RingError::InjectFull);
            }
        }
        Ok(usize::from(self.next[i] & (size - 1)))
    }

    /// Writes the next inject slot's descriptor: the frame of `len` bytes at `buf`.
    fn queue_inject(
        &mut self,
        buf: usize,
        backend: u16,
        pool: u16,
        len: usize,
    ) -> Result<(), RingError> {
        let index = self.next[Ring::Inject as usize];
        let d = InjectDesc {
            addr: self.iova(buf),
            header: [InjectHeader {
                backend,
                pool,
                frame_len: len as u16,
            }],
            reserved: 0,
        };
        self.mem
            .write_words(self.slot_offset(Ring::Inject, index), &d.pack()?)?;
        self.next[Ring::Inject as usize] = index.wrapping_add(1);
        Ok(())
    }

    /// Rings the inject doorbell if frames were queued since the last time (one posted
    /// register write).
    pub fn ring_inject<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), RingError> {
        let i = Ring::Inject as usize;
        if self.carries(Ring::Inject) && self.next[i] != self.rung[i] {
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            dev.write32(regs::INJECT_HOST, u32::from(self.next[i]))?;
            self.rung[i] = self.next[i];
        }
        Ok(())
    }

    /// `dma.host_time`: the timestamp of the connections the NIC learns (a posted write).
    pub fn set_host_time<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        secs: u32,
    ) -> Result<(), RingError> {
        dev.write32(regs::HOST_TIME, secs)?;
        Ok(())
    }

    /// Waits up to `timeout` for an interrupt of the punt or event ring. Returns whether one
    /// came (the rings may hold records either way: poll them).
    pub fn wait_interrupt(&self, timeout: Duration) -> bool {
        let lines = [
            &self.irqs[Ring::Punt as usize],
            &self.irqs[Ring::Event as usize],
        ];
        let mut fds: Vec<libc::pollfd> = lines
            .iter()
            .map(|l| libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&l.fd()),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a live array of valid pollfds for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        let mut fired = false;
        for l in lines {
            fired |= l.take() > 0;
        }
        n > 0 && fired
    }

    // ---- the command ring ---------------------------------------------------------------

    /// Bytes of the command data area.
    pub fn data_len(&self) -> usize {
        self.sizes.cmd_data
    }

    /// Entries of `words` words each that a run of range reads takes at a time: as many as
    /// the data area holds, a multiple of [`ROW_ALIGN`] where it holds that many (so that
    /// every run after the first starts on a memory row too), at least 1.
    pub fn run_entries(&self, words: usize) -> usize {
        let per = self.sizes.cmd_data / (words * 4);
        let align = ROW_ALIGN as usize;
        if per >= align {
            per - per % align
        } else {
            per.max(1)
        }
    }

    /// IOVA of byte `offset` of the data area.
    pub fn data_iova(&self, offset: usize) -> u64 {
        self.iova(self.lay.cmd_data + offset)
    }

    /// Writes words into the data area.
    pub fn write_data(&self, offset: usize, words: &[u32]) -> Result<(), RingError> {
        if offset + words.len() * 4 > self.sizes.cmd_data {
            return Err(DmaError::Bounds {
                offset,
                len: words.len() * 4,
                size: self.sizes.cmd_data,
            }
            .into());
        }
        self.mem.write_words(self.lay.cmd_data + offset, words)?;
        Ok(())
    }

    /// Reads words out of the data area.
    pub fn read_data(&self, offset: usize, out: &mut [u32]) -> Result<(), RingError> {
        self.data_reader().read(offset, out)
    }

    /// A handle on the data area, which other threads may read through too (attach decodes
    /// the connection table straight from the data area).
    pub fn data_reader(&self) -> DataReader {
        DataReader {
            mem: self.mem.clone(),
            base: self.lay.cmd_data,
            len: self.sizes.cmd_data,
        }
    }

    /// Commands queued and not yet known done.
    fn cmd_pending(&self) -> Result<u16, RingError> {
        let i = Ring::Cmd as usize;
        Ok(self.next[i].wrapping_sub(self.wb(Ring::Cmd)?.index))
    }

    /// Queues a command (host memory only). A command over more than [`CMD_PIECE`] entries
    /// is queued as several over consecutive parts of its data (at most 64, and at most half
    /// the free slots), so that each finishes within [`COMMAND_TIMEOUT`] on a slow device (the
    /// Verilated RTL behind `nlb-sim` runs a connection-table entry in about 100 clocks and
    /// tens of thousands of clocks a second) and the wait sees progress; the parts run in order, as the whole would, but one that fails
    /// does not stop the next.
    pub fn submit(&mut self, cmd: &CmdDesc) -> Result<(), RingError> {
        if !self.carries(Ring::Cmd) {
            return Err(RingError::NotCarried {
                ring: Ring::Cmd,
                carried: self.carried,
            });
        }
        let free = slots(self.sizes.cmd_log2).saturating_sub(self.cmd_pending()?);
        if free == 0 {
            return Err(RingError::CommandsFull);
        }
        let parts = u32::from(free / 2).clamp(1, 64);
        let piece = CMD_PIECE
            .max(cmd.count.div_ceil(parts))
            .next_multiple_of(ROW_ALIGN);
        let (words, index_step) = match cmd.op {
            DmaCmd::TableWrite | DmaCmd::TableRead => (Tables::entry_words(cmd.table), 1),
            DmaCmd::CtWrite | DmaCmd::CtRead => (CtEntry::WORDS, 1),
            DmaCmd::HitRead => (1, 32),
        };
        let stride = 4 * (words as u64 + u64::from(cmd.list));
        let mut done = 0u32;
        loop {
            let n = (cmd.count - done).min(piece);
            let part = CmdDesc {
                count: n,
                index: if cmd.list {
                    cmd.index
                } else {
                    cmd.index.wrapping_add(done.wrapping_mul(index_step))
                },
                addr: cmd.addr.wrapping_add(u64::from(done) * stride),
                ..*cmd
            };
            let i = Ring::Cmd as usize;
            let slot = self.next[i];
            self.mem
                .write_words(self.slot_offset(Ring::Cmd, slot), &part.pack()?)?;
            self.next[i] = slot.wrapping_add(1);
            done += n;
            if done >= cmd.count {
                return Ok(());
            }
        }
    }

    /// Rings the command doorbell for the commands queued since the last ring, without
    /// waiting for them ([`HostRings::execute`] rings and waits).
    pub fn ring_cmd<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), RingError> {
        if !self.carries(Ring::Cmd) {
            return Err(RingError::NotCarried {
                ring: Ring::Cmd,
                carried: self.carried,
            });
        }
        let i = Ring::Cmd as usize;
        if self.next[i] != self.rung[i] {
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            dev.write32(regs::CMD_HOST, u32::from(self.next[i]))?;
            self.rung[i] = self.next[i];
        }
        Ok(())
    }

    /// Rings the command doorbell and waits (up to `timeout` for each command, letting the
    /// device's time pass) until every queued command is done; fails with the first failure
    /// the device reported.
    pub fn execute<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        timeout: Duration,
    ) -> Result<(), RingError> {
        if !self.carries(Ring::Cmd) {
            return Err(RingError::NotCarried {
                ring: Ring::Cmd,
                carried: self.carried,
            });
        }
        let i = Ring::Cmd as usize;
        let errors_before = self.seen_errors[i];
        self.ring_cmd(dev)?;
        // The timeout runs from the last command done (a long batch makes progress).
        let mut start = Instant::now();
        let mut pause = Duration::from_micros(1);
        let mut last = u16::MAX;
        loop {
            let pending = self.cmd_pending()?;
            if pending == 0 {
                break;
            }
            if pending < last {
                (start, last) = (Instant::now(), pending);
            }
            if start.elapsed() >= timeout {
                return Err(RingError::Timeout {
                    pending,
                    after: timeout,
                });
            }
            dev.wait(pause)?;
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        let wb = self.wb(Ring::Cmd)?;
        self.seen_errors[i] = wb.errors;
        if wb.errors != errors_before {
            return Err(RingError::Command {
                slot: wb.error_slot,
                code: wb.error_code,
            });
        }
        Ok(())
    }

    /// Scratch words for callers that build data (kept between calls).
    pub fn scratch(&mut self) -> &mut Vec<u32> {
        &mut self.scratch
    }

    /// Which ring a definition is.
    pub fn def(ring: Ring) -> RingDef {
        rings::ALL[ring as usize]
    }
}

/// A device with its host rings. Register accesses go to the device; the loader and the
/// connection manager find the rings through [`Device::split_rings`] and move their entries by
/// DMA; the slow path takes events and punted frames from [`RingDevice::parts`].
pub struct RingDevice {
    dev: Box<dyn Device>,
    rings: HostRings,
}

impl std::fmt::Debug for RingDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingDevice")
            .field("device", &self.dev.describe())
            .field("rings", &self.rings)
            .finish()
    }
}

impl RingDevice {
    /// Attaches rings to `dev` ([`HostRings::attach`]); on failure the device comes back with
    /// the error (it may still serve through its register windows).
    #[allow(clippy::result_large_err)]
    pub fn attach(
        mut dev: Box<dyn Device>,
        sizes: RingSizes,
        hw_learn: bool,
    ) -> Result<RingDevice, (Box<dyn Device>, RingError)> {
        match HostRings::attach(dev.as_mut(), sizes, hw_learn) {
            Ok(rings) => Ok(RingDevice { dev, rings }),
            Err(e) => Err((dev, e)),
        }
    }

    /// The device and its rings.
    pub fn parts(&mut self) -> (&mut dyn Device, &mut HostRings) {
        (self.dev.as_mut(), &mut self.rings)
    }

    /// The rings.
    pub fn rings(&mut self) -> &mut HostRings {
        &mut self.rings
    }

    /// Stops the rings and gives the device back.
    pub fn detach(self) -> Result<Box<dyn Device>, RingError> {
        let RingDevice { mut dev, rings } = self;
        rings.detach(dev.as_mut())?;
        Ok(dev)
    }
}

impl Device for RingDevice {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.dev.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.dev.write32(offset, value)
    }
    fn write_bulk(&mut self, offset: u32, words: &[u32]) -> Result<(), DeviceError> {
        self.dev.write_bulk(offset, words)
    }
    fn read_bulk(&mut self, offset: u32, out: &mut [u32]) -> Result<(), DeviceError> {
        self.dev.read_bulk(offset, out)
    }
    fn run_batch(
        &mut self,
        ops: &[crate::device::RegOp],
        reads: &mut Vec<u32>,
    ) -> Result<(), DeviceError> {
        self.dev.run_batch(ops, reads)
    }
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        self.dev.wait(d)
    }
    fn describe(&self) -> String {
        self.dev.describe()
    }
    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.dev.dma_map(region)
    }
    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.dev.dma_unmap(region)
    }
    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        self.dev.set_interrupts(lines)
    }
    fn pcie(&mut self) -> crate::pcie::PcieStats {
        self.dev.pcie()
    }
    fn mmio_seen(&self) -> (u64, u64) {
        self.dev.mmio_seen()
    }
    fn split_rings(&mut self) -> Option<(&mut dyn Device, &mut dyn std::any::Any)> {
        Some((self.dev.as_mut(), &mut self.rings))
    }
}

/// The host rings a device handle drives, and the device under them ([`Device::split_rings`]
/// typed): `None` without rings.
pub fn split<D: Device + ?Sized>(dev: &mut D) -> Option<(&mut dyn Device, &mut HostRings)> {
    let (d, rings) = dev.split_rings()?;
    Some((d, rings.downcast_mut::<HostRings>()?))
}

/// As [`split`], where the rings carry the command ring (table and connection writes by
/// DMA); `None` otherwise, and those writes go through the register windows.
pub fn split_commands<D: Device + ?Sized>(
    dev: &mut D,
) -> Option<(&mut dyn Device, &mut HostRings)> {
    split(dev).filter(|(_, r)| r.carries(Ring::Cmd))
}

impl crate::queues::Injector for HostRings {
    fn inject_frame<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        backend: u16,
        pool: u16,
        frame: &[u8],
    ) -> Result<(), crate::queues::QueueError> {
        if !self.carries(Ring::Inject) {
            return self.inject_window.inject(dev, backend, pool, frame);
        }
        self.inject(backend, pool, frame).map_err(queue_error)
    }

    fn inject_punted<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        backend: u16,
        pool: u16,
        punted: &PuntedFrame,
    ) -> Result<(), crate::queues::QueueError> {
        if !self.carries(Ring::Inject) {
            // The register window: a copy, as for any frame.
            return self.inject_frame(dev, backend, pool, &punted.frame);
        }
        HostRings::inject_punted(self, backend, pool, punted).map_err(queue_error)
    }
}

/// A ring error as the register queues' injections report it.
fn queue_error(e: RingError) -> crate::queues::QueueError {
    match e {
        RingError::InjectFull => crate::queues::QueueError::InjectFull,
        RingError::FrameTooLong { len, max } => {
            crate::queues::QueueError::FrameTooLong { len, max }
        }
        RingError::Device(d) => crate::queues::QueueError::Device(d),
        RingError::Decode(d) => crate::queues::QueueError::Decode(d),
        other => crate::queues::QueueError::Device(crate::device::DeviceError::Protocol(
            other.to_string(),
        )),
    }
}
