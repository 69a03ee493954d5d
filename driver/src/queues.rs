//! The punt, learn and inject queues through the `queues` register block (on hardware the
//! shell's DMA carries them; the register path serves the simulated device, the RTL and
//! debugging), and the counters block.
//!
//! Polling: [`Queues::poll`] reads both status registers in one batch; a caller with nothing
//! to do calls [`Device::wait`] (which advances a simulated device's clock, or sleeps).
//!
//! The overflow bits of `punt_status` / `learn_status` clear when read, and the pops read the
//! status registers too (to learn how many entries wait). So that no overflow is lost between
//! a [`Queues::poll`] and a pop, every status read keeps the bit it saw until the next
//! [`Queues::poll`] reports it.

use crate::device::{Batch, Device, DeviceError};
use nlb_hw::blocks::{counters as cnt, queues as q};
use nlb_hw::layouts::{InjectHeader, LearnEvent, PuntHeader};
use nlb_hw::LayoutError;

/// Why a queue operation failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// Register access failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A record from the device does not decode.
    #[error("queue record does not decode: {0}")]
    Decode(#[from] LayoutError),
    /// The frame to inject is larger than the inject window.
    #[error("frame of {len} bytes exceeds the inject window ({max} bytes)")]
    FrameTooLong {
        /// Frame length.
        len: usize,
        /// Window size.
        max: usize,
    },
    /// The inject queue has no free entry.
    #[error("the inject queue is full")]
    InjectFull,
}

/// Queue occupancy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStatus {
    /// Frames waiting on the punt queue.
    pub punt: u32,
    /// The punt queue overflowed since the last read.
    pub punt_overflow: bool,
    /// Events waiting on the learn queue.
    pub learn: u32,
    /// The learn queue overflowed since the last read.
    pub learn_overflow: bool,
}

/// A punted frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PuntedFrame {
    /// Its punt header.
    pub header: PuntHeader,
    /// The frame bytes (as far as the window holds them).
    pub frame: Vec<u8>,
    /// Where the frame still lies in host memory, for an injection without a copy: set by
    /// the host rings' `pop_punts`; `None` from the register window.
    pub slot: Option<PuntSlot>,
}

/// Where a punted frame still lies in host memory, so that injecting it needs no copy (the
/// host rings' `inject_punted`): its punt ring index, until the slot is given back, in the
/// rings that popped it (other rings copy it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PuntSlot {
    /// Which host rings popped it.
    pub(crate) rings: u32,
    /// Its punt ring index.
    pub(crate) index: u16,
}

/// Bytes of the punt and inject windows.
pub const WINDOW_BYTES: usize = q::PUNT_DATA_COUNT as usize * 4;

/// Queue access over any device; keeps its batch buffers between calls.
#[derive(Debug, Default)]
pub struct Queues {
    batch: Batch,
    /// Overflow bits seen by a status read and not yet reported by [`Queues::poll`].
    punt_overflow: bool,
    learn_overflow: bool,
}

impl Queues {
    /// A queue accessor.
    pub fn new() -> Queues {
        Queues::default()
    }

    /// Reads both status registers. The overflow flags report every overflow the device
    /// flagged since the last `poll`, including those a pop's status read cleared; reporting
    /// them clears them.
    pub fn poll<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<QueueStatus, QueueError> {
        let r = self
            .batch
            .read(q::PUNT_STATUS)
            .read(q::LEARN_STATUS)
            .run(dev)?;
        let (punt, learn) = (
            q::PuntStatus::from_word(r[0]),
            q::LearnStatus::from_word(r[1]),
        );
        let status = QueueStatus {
            punt: u32::from(punt.count),
            punt_overflow: self.punt_overflow || punt.overflow,
            learn: u32::from(learn.count),
            learn_overflow: self.learn_overflow || learn.overflow,
        };
        self.punt_overflow = false;
        self.learn_overflow = false;
        Ok(status)
    }

    /// Reads `learn_status`, keeping its overflow bit for the next [`Queues::poll`]; returns
    /// the events waiting.
    fn learn_waiting<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<u32, QueueError> {
        let status = q::LearnStatus::from_word(self.batch.read(q::LEARN_STATUS).run(dev)?[0]);
        self.learn_overflow |= status.overflow;
        Ok(u32::from(status.count))
    }

    /// Reads `punt_status`, keeping its overflow bit for the next [`Queues::poll`]; returns
    /// the frames waiting.
    fn punt_waiting<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<u32, QueueError> {
        let status = q::PuntStatus::from_word(self.batch.read(q::PUNT_STATUS).run(dev)?[0]);
        self.punt_overflow |= status.overflow;
        Ok(u32::from(status.count))
    }

    /// Pops up to `max` learn/teardown events into `out` (one register batch per event).
    pub fn pop_learn<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        max: usize,
        out: &mut Vec<LearnEvent>,
    ) -> Result<usize, QueueError> {
        let waiting = self.learn_waiting(dev)?;
        let n = (waiting as usize).min(max);
        for _ in 0..n {
            self.batch
                .write(q::LEARN_POP, q::LearnPop { pop: true }.word())
                .read_words(q::LEARN_DATA, q::LEARN_DATA_COUNT);
        }
        let r = self.batch.run(dev)?;
        for words in r.chunks(q::LEARN_DATA_COUNT as usize) {
            out.push(LearnEvent::unpack(words)?);
        }
        Ok(n)
    }

    /// Pops the head of the punt queue, if any.
    pub fn pop_punt<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
    ) -> Result<Option<PuntedFrame>, QueueError> {
        let waiting = self.punt_waiting(dev)?;
        if waiting == 0 {
            return Ok(None);
        }
        let r = self
            .batch
            .write(q::PUNT_POP, q::PuntPop { pop: true }.word())
            .read_words(q::PUNT_HEADER, q::PUNT_HEADER_COUNT)
            .read(q::PUNT_LEN)
            .run(dev)?;
        let header = PuntHeader::unpack(&r[..q::PUNT_HEADER_COUNT as usize])?;
        let len = (r[q::PUNT_HEADER_COUNT as usize] as usize).min(WINDOW_BYTES);
        let words = len.div_ceil(4) as u32;
        let data = self.batch.read_words(q::PUNT_DATA, words).run(dev)?;
        let mut frame: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
        frame.truncate(len);
        Ok(Some(PuntedFrame {
            header,
            frame,
            slot: None,
        }))
    }

    /// Injects a frame to a backend with a pool's delivery.
    pub fn inject<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        backend: u16,
        pool: u16,
        frame: &[u8],
    ) -> Result<(), QueueError> {
        if frame.len() > WINDOW_BYTES || frame.len() >= 1 << InjectHeader::FRAME_LEN_WIDTH {
            return Err(QueueError::FrameTooLong {
                len: frame.len(),
                max: WINDOW_BYTES,
            });
        }
        let free = q::InjectStatus::from_word(self.batch.read(q::INJECT_STATUS).run(dev)?[0]).free;
        if free == 0 {
            return Err(QueueError::InjectFull);
        }
        let header = InjectHeader {
            backend,
            pool,
            frame_len: frame.len() as u16,
        }
        .pack()?;
        for (i, chunk) in frame.chunks(4).enumerate() {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            self.batch
                .write(q::INJECT_DATA + 4 * i as u32, u32::from_le_bytes(w));
        }
        self.batch
            .write_words(q::INJECT_HEADER, &header)
            .write(q::INJECT_PUSH, q::InjectPush { push: true }.word())
            .run(dev)?;
        Ok(())
    }
}

/// Where injected frames go: the inject register window ([`Queues`]) or the inject ring (the
/// host rings, which send them at their next doorbell).
pub trait Injector {
    /// Queues (or sends) one frame to `backend` with `pool`'s delivery.
    fn inject_frame<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        backend: u16,
        pool: u16,
        frame: &[u8],
    ) -> Result<(), QueueError>;

    /// Queues (or sends) a punted frame; where it still lies in host memory the host rings
    /// send it from there (`inject_punted` of the host rings), else as
    /// [`Injector::inject_frame`]. For the frame as punted: a changed frame goes by
    /// [`Injector::inject_frame`].
    fn inject_punted<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        backend: u16,
        pool: u16,
        punted: &PuntedFrame,
    ) -> Result<(), QueueError> {
        self.inject_frame(dev, backend, pool, &punted.frame)
    }
}

impl Injector for Queues {
    fn inject_frame<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        backend: u16,
        pool: u16,
        frame: &[u8],
    ) -> Result<(), QueueError> {
        self.inject(dev, backend, pool, frame)
    }
}

pub use nlb_hw::enums::CounterKind;
use nlb_hw::enums::CounterSnapshot;

/// One counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterValue {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Packets punted to the host (rule and backend counters).
    pub punts: u64,
    /// Packets dropped (rule and backend counters).
    pub drops: u64,
}

/// Words read per counter: from `packets_lo` to `drops_hi`.
const COUNTER_WORDS: u32 = (cnt::DROPS_HI - cnt::PACKETS_LO) / 4 + 1;

/// Reads counters (select, snapshot, the value words), many in one batch; `clear` resets
/// each one atomically with its snapshot.
pub fn read_counters<D: Device + ?Sized>(
    dev: &mut D,
    kind: CounterKind,
    indices: impl IntoIterator<Item = u32>,
    clear: bool,
) -> Result<Vec<CounterValue>, DeviceError> {
    let op = if clear {
        CounterSnapshot::LatchClear
    } else {
        CounterSnapshot::Latch
    };
    let mut batch = Batch::new();
    for index in indices {
        let select = cnt::Select { kind, index }.word().map_err(|e| {
            DeviceError::Protocol(format!(
                "{} counter {index} cannot be selected: {e}",
                kind.name()
            ))
        })?;
        batch
            .write(cnt::SELECT, select)
            .write(cnt::SNAPSHOT, cnt::Snapshot { op }.word())
            .read_words(cnt::PACKETS_LO, COUNTER_WORDS);
    }
    let r = batch.run(dev)?;
    // A wide counter from the words read (`packets_lo` first).
    let value = |w: &[u32], regs: [u32; 2]| {
        let word = |reg: u32| w[((reg - cnt::PACKETS_LO) / 4) as usize];
        regs.map(word)
    };
    Ok(r.chunks(COUNTER_WORDS as usize)
        .map(|w| CounterValue {
            packets: cnt::packets::join(value(w, cnt::packets::REGISTERS)),
            bytes: cnt::bytes::join(value(w, cnt::bytes::REGISTERS)),
            punts: cnt::punts::join(value(w, cnt::punts::REGISTERS)),
            drops: cnt::drops::join(value(w, cnt::drops::REGISTERS)),
        })
        .collect())
}
