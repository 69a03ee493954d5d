//! Frames the host injects: the NIC runs them when the inject ring's doorbell (`dma.inject_host`)
//! or, on the register path, `inject_push` is written (docs/pipeline.md sections 12 and 14) and
//! transmits them on its port like forwarded traffic. That is how nlbd's
//! fragment tracker sends the fragments it punted (SPEC R4.3) and how punted ICMP errors reach
//! their backend (SPEC R10.2).
//!
//! The device keeps what it transmitted in its inject queue (at most the queue depth; a push
//! with no free entry is dropped and counted by the device) until the wire takes it. The
//! socket server's device is wrapped in [`Served`]: every doorbell or `inject_push` (a register
//! batch is split after it) moves the transmitted frames to the wire at once, on the server
//! thread that made the push, so the queue never fills while the wire works and nothing waits
//! for the traffic thread (which sleeps in `recv` when the interface is quiet).

use crate::afpacket::Port;
use firmware_sim::pcap::FrameWriter;
use nlb_driver::device::{Device, DeviceError, RegOp};
use nlb_driver::dma::{DmaRegion, IrqLine};
use nlb_driver::pcie::PcieStats;
use nlb_hw::blocks::{dma, queues};
use nlb_hw::enums::Verdict;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the inject queue transmitted since the last look.
#[derive(Debug, Default)]
pub struct Taken {
    /// Per push, in order: the verdict and the transmitted frame (empty unless FORWARD).
    pub frames: Vec<(Verdict, Vec<u8>)>,
    /// Pushes the device refused since it started because no entry was free.
    pub overflows: u64,
}

/// Takes what the NIC's inject queue transmitted (frees the entries).
pub trait InjectSource: Send + Sync {
    /// The frames transmitted since the last call.
    fn take(&self) -> Result<Taken, String>;
}

/// Locks a mutex; a panic elsewhere leaves the data whole (counters, a writer between
/// frames), so poisoning is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A file that can be flushed through a second handle while a [`FrameWriter`] owns the first.
#[derive(Debug, Clone)]
pub struct SharedFile(Arc<Mutex<BufWriter<File>>>);

impl SharedFile {
    /// Buffers writes to `file`.
    pub fn new(file: File) -> SharedFile {
        SharedFile(Arc::new(Mutex::new(BufWriter::new(file))))
    }
}

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        lock(&self.0).flush()
    }
}

/// The output pcap of a pcap run: forwarded frames from the traffic thread, injected ones
/// from the transmitter.
#[derive(Debug)]
pub struct PcapOut {
    writer: FrameWriter<SharedFile>,
    file: SharedFile,
}

impl PcapOut {
    /// Starts a capture in `file`.
    pub fn new(file: File) -> Result<PcapOut, String> {
        let file = SharedFile::new(file);
        let writer = FrameWriter::new(file.clone()).map_err(|e| e.to_string())?;
        Ok(PcapOut { writer, file })
    }

    /// Appends a frame.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> Result<(), String> {
        self.writer
            .write(timestamp, frame)
            .map_err(|e| e.to_string())
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) -> Result<(), String> {
        self.file.flush().map_err(|e| e.to_string())
    }
}

/// Where the NIC's port leads.
#[derive(Debug)]
pub enum Wire {
    /// A Linux interface (AF_PACKET), shared with the traffic thread.
    Interface(Arc<Port>),
    /// The `--out` pcap of a pcap run (None: no `--out`, frames are counted only).
    Pcap(Arc<Mutex<Option<PcapOut>>>),
}

impl Wire {
    fn send(&self, frame: &[u8]) -> Result<(), String> {
        match self {
            Wire::Interface(port) => port.send(frame).map_err(|e| e.to_string()),
            Wire::Pcap(out) => match lock(out).as_mut() {
                Some(out) => {
                    // Injected frames have no input time stamp: they get the time they left.
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    out.write(now, frame)?;
                    // A reader of the file sees the frame at once.
                    out.flush()
                }
                None => Ok(()),
            },
        }
    }
}

/// Counters of the injected frames, logged as they change.
#[derive(Debug, Default)]
struct TxCounts {
    transmitted: u64,
    not_forwarded: u64,
    wire_errors: u64,
    overflows: u64,
}

/// Moves what the inject queue transmitted to the wire.
pub struct Transmitter {
    source: Box<dyn InjectSource>,
    wire: Wire,
    /// Also orders the frames: one taker at a time sends what it took before the next takes.
    counts: Mutex<TxCounts>,
}

impl Transmitter {
    /// A transmitter from `source` to `wire`.
    pub fn new(source: Box<dyn InjectSource>, wire: Wire) -> Transmitter {
        Transmitter {
            source,
            wire,
            counts: Mutex::new(TxCounts::default()),
        }
    }

    /// Sends what the inject queue transmitted since the last call. Frames the NIC dropped
    /// (an injected frame to a backend the tables do not have: the NIC's counters count it)
    /// and frames the wire refused are counted and logged, never retried.
    pub fn flush(&self) {
        // Frames waiting on the inject ring move on as the queue empties: take until none
        // comes (bounded by the ring's size in rounds of the queue's depth).
        for _ in 0..1024 {
            if self.flush_once() == 0 {
                break;
            }
        }
    }

    /// One take: sends it, returns how many frames it held.
    fn flush_once(&self) -> usize {
        let mut c = lock(&self.counts);
        let taken = match self.source.take() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("nlb-sim: reading the injected frames: {e}");
                return 0;
            }
        };
        for (verdict, frame) in &taken.frames {
            if *verdict != Verdict::Forward {
                c.not_forwarded += 1;
                if c.not_forwarded.is_power_of_two() {
                    eprintln!(
                        "nlb-sim: an injected frame was not forwarded ({verdict:?}; {} so far, \
                         see the NIC's reason counters)",
                        c.not_forwarded
                    );
                }
                continue;
            }
            match self.wire.send(frame) {
                Ok(()) => {
                    c.transmitted += 1;
                    if c.transmitted == 1 {
                        eprintln!("nlb-sim: transmitting frames the host injected");
                    }
                }
                Err(e) => {
                    c.wire_errors += 1;
                    if c.wire_errors.is_power_of_two() {
                        eprintln!(
                            "nlb-sim: dropped an injected frame: {e} ({} so far)",
                            c.wire_errors
                        );
                    }
                }
            }
        }
        if taken.overflows > c.overflows {
            c.overflows = taken.overflows;
            eprintln!(
                "nlb-sim: the inject queue was full: {} pushes dropped so far",
                c.overflows
            );
        }
        taken.frames.len()
    }
}

/// True for a write that pushes a frame on the inject queue, or rings the inject ring's
/// doorbell.
fn is_push(op: &RegOp) -> bool {
    matches!(
        *op,
        RegOp::Write(queues::INJECT_PUSH, _) | RegOp::Write(dma::INJECT_HOST, _)
    )
}

/// The device as the socket server serves it: register accesses go to the NIC, and after each
/// write that pushed a frame on the inject queue the transmitted frames go to the wire (a
/// batch is split after each push, so even a batch of many pushes never fills the queue).
pub struct Served {
    dev: Box<dyn Device>,
    tx: Arc<Transmitter>,
}

impl Served {
    /// `dev` with its injected frames going out through `tx`.
    pub fn new(dev: Box<dyn Device>, tx: Arc<Transmitter>) -> Served {
        Served { dev, tx }
    }
}

impl Device for Served {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.dev.read32(offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        let r = self.dev.write32(offset, value);
        if is_push(&RegOp::Write(offset, value)) {
            self.tx.flush();
        }
        r
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        let mut rest = ops;
        while let Some(at) = rest.iter().position(is_push) {
            let (upto_push, after) = rest.split_at(at + 1);
            let r = self.dev.run_batch(upto_push, reads);
            // Also after a failed part: the pushes before the failure took effect.
            self.tx.flush();
            r?;
            rest = after;
        }
        if rest.is_empty() {
            return Ok(());
        }
        self.dev.run_batch(rest, reads)
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

    fn pcie(&mut self) -> PcieStats {
        self.dev.pcie()
    }

    fn mmio_seen(&self) -> (u64, u64) {
        self.dev.mmio_seen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use firmware_sim::ModelDevice;
    use nlb_driver::model::ModelHandle;
    use nlb_hw::layouts::InjectHeader;

    /// Counts what reaches the wire (a pcap run without `--out`) through the device's own
    /// queue, in a device whose tables are empty: every injected frame is a NO_BACKEND drop,
    /// which still takes an entry until taken.
    struct Counting(ModelHandle, Arc<Mutex<usize>>);

    impl InjectSource for Counting {
        fn take(&self) -> Result<Taken, String> {
            let mut dev = self.0.lock();
            let frames = dev.take_injected();
            *lock(&self.1) += frames.len();
            Ok(Taken {
                frames: frames
                    .into_iter()
                    .map(|i| (i.result.verdict, i.frame))
                    .collect(),
                overflows: dev.inject_overflows(),
            })
        }
    }

    /// One batch pushing far more frames than the queue holds (no status read between): the
    /// served device takes each frame off the queue as it is pushed, so none is refused.
    #[test]
    fn a_batch_of_many_pushes_never_fills_the_queue() {
        let profile = nlb_hw::Profile::by_name("sim").unwrap();
        let sim = ModelHandle::from_device(ModelDevice::new(profile));
        let taken = Arc::new(Mutex::new(0));
        let tx = Arc::new(Transmitter::new(
            Box::new(Counting(sim.clone(), taken.clone())),
            Wire::Pcap(Arc::new(Mutex::new(None))),
        ));
        let mut served = Served::new(Box::new(sim.clone()), tx);
        let header = InjectHeader {
            backend: 1,
            pool: 1,
            frame_len: 60,
        }
        .pack()
        .unwrap();
        let mut ops = vec![
            RegOp::Write(queues::INJECT_HEADER, header[0]),
            RegOp::Write(queues::INJECT_HEADER + 4, header[1]),
        ];
        let pushes = 3 * profile.queue_depth as usize;
        ops.extend(std::iter::repeat_n(
            RegOp::Write(queues::INJECT_PUSH, 1),
            pushes,
        ));
        ops.push(RegOp::Read(queues::INJECT_STATUS));
        let mut reads = Vec::new();
        served.run_batch(&ops, &mut reads).unwrap();
        assert_eq!(reads, vec![profile.queue_depth]);
        assert_eq!(*lock(&taken), pushes);
        assert_eq!(sim.lock().inject_overflows(), 0);
    }

    #[test]
    fn only_a_write_to_inject_push_pushes() {
        assert!(is_push(&RegOp::Write(queues::INJECT_PUSH, 1)));
        assert!(!is_push(&RegOp::Read(queues::INJECT_PUSH)));
        assert!(!is_push(&RegOp::Write(queues::INJECT_HEADER, 1)));
    }
}
