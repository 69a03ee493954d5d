//! The RTL as a device behind the driver's register-access trait ([`nlb_driver::Device`]), so
//! the driver's own loader, discovery and conntrack manager run against `nlb_top` exactly as
//! against hardware.
//!
//! A Verilated model is not `Send` (it is a raw handle into C++), while `Device` requires it:
//! the model lives on a worker thread of its own and every call is a message to it. Register
//! accesses are AXI-Lite transactions on `nlb_top`'s `s_axil` port; the `queues` block, which
//! the shell's DMA engine implements on hardware, is played here by the worker: it fills the
//! punt and learn queues (depth = the profile's `queue_depth`, overflow flags as in
//! docs/pipeline.md section 13) from the punt and event streams, and `inject_push` sends the
//! inject window on the inject stream and runs the clock until the frame is through; what it
//! transmitted waits, holding its inject queue entry, until [`RtlDevice::take_injected`] takes
//! it (the wire), as the golden model's device does.

use crate::error::VerifError;
use crate::hbm::HbmConfig;
use crate::top::{take_events, take_frames, take_punts, PuntedFrame, TopBench};
use crate::worker::ModelThread;
use firmware_sim::pipeline::PacketResult;
use nlb_driver::device::{Device, DeviceError, RegOp};
use nlb_driver::dma::{DmaRegion, HostPort, IrqLine};
use nlb_driver::pcie::{PcieCosts, PcieLedger, PcieStats};
use nlb_hw::blocks::queues as q;
use nlb_hw::blocks::{conntrack, ctrl, dma};
use nlb_hw::enums::TableCmd;
use nlb_hw::layouts::CtEntry;
use nlb_hw::layouts::{InjectHeader, LearnEvent};
use nlb_hw::{NicSettings, Profile, Tables};
use std::collections::VecDeque;
use std::sync::Arc;

/// Bytes of the punt and inject windows.
const WINDOW_BYTES: usize = q::PUNT_DATA_COUNT as usize * 4;
/// Clocks a batch of frames may take per frame before the worker gives up.
const CLOCKS_PER_FRAME: u64 = 2_000;
/// Clocks with no DMA transfer after which the DMA master counts as settled (longer than the
/// host memory's answer, HostTiming::pcie).
const DMA_QUIET: u32 = 400;
/// Clocks a request may take to settle its DMA before the worker gives up.
const DMA_SETTLE_LIMIT: u64 = 2_000_000;

/// What one received or injected frame did in the RTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtlPacket {
    /// The result (as the golden model reports it).
    pub result: PacketResult,
    /// The transmitted frame (FORWARD), else empty.
    pub output: Vec<u8>,
}

enum Request {
    Read(u32),
    Write(u32, u32),
    Batch(Vec<RegOp>),
    Load(Box<Tables>, NicSettings),
    Clocks(u64),
    Receive(Vec<Vec<u8>>),
    TakeInjected,
    InjectOverflows,
    DmaMap(DmaRegion),
    DmaUnmap(u64),
    SetInterrupts(Vec<IrqLine>),
    Pcie,
    Cycles,
    SetHbm(HbmConfig),
}

enum Response {
    Value(u32),
    Values(Vec<u32>),
    Done,
    Packets(Vec<RtlPacket>),
    Injected(Injected),
    Count(u64),
    Pcie(PcieStats),
}

/// The frames the inject queue transmitted since the last [`RtlDevice::take_injected`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Injected {
    /// One per push that had a free entry, in order (the output frame is empty unless FORWARD).
    pub packets: Vec<RtlPacket>,
    /// Pushes refused since the model started because no entry was free (frames not taken
    /// filled the queue): dropped before the pipeline, as the golden model's device does.
    pub overflows: u64,
}

/// `nlb_top` on a worker thread, as a [`Device`].
#[derive(Debug)]
pub struct RtlDevice {
    thread: ModelThread<Request, Response>,
}

impl RtlDevice {
    /// Starts the model (reset, pipeline disabled, as after power-up) on its own thread.
    pub fn new(seed: u64) -> Result<RtlDevice, VerifError> {
        Self::with_memory(seed, None)
    }

    /// As [`RtlDevice::new`], with the connection table and the Maglev slots on the HBM model
    /// (`top_hbm`, [`crate::hbm`]) at `hbm`'s timing when given, on chip otherwise.
    pub fn with_memory(seed: u64, hbm: Option<HbmConfig>) -> Result<RtlDevice, VerifError> {
        let thread = ModelThread::start(
            "nlb-rtl",
            "RTL model",
            move || Worker::new(seed, hbm.as_ref()),
            |w: &mut Worker, r| w.handle(r),
        )?;
        Ok(RtlDevice { thread })
    }

    /// Sets the HBM model's timing from now on (a device made with HBM; for example a quick
    /// one for a load whose speed nothing looks at, then a realistic one).
    pub fn set_hbm(&mut self, cfg: &HbmConfig) -> Result<(), DeviceError> {
        self.done(Request::SetHbm(*cfg))
    }

    fn call(&mut self, r: Request) -> Result<Response, DeviceError> {
        self.thread.call(r)
    }

    fn done(&mut self, r: Request) -> Result<(), DeviceError> {
        match self.call(r)? {
            Response::Done => Ok(()),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    /// Loads `tables` into bank 0 through the table window (every entry that differs from an
    /// empty bank, as a fresh device needs), writes the ctrl settings, selects bank 0 and
    /// enables the pipeline: what `nlbctl sim` starts from, without the loader's read-back of
    /// both banks.
    pub fn load(&mut self, tables: &Tables, nic: &NicSettings) -> Result<(), DeviceError> {
        match self.call(Request::Load(Box::new(tables.clone()), *nic))? {
            Response::Done => Ok(()),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    /// What the inject queue transmitted since the last call (frees their queue entries).
    pub fn take_injected(&mut self) -> Result<Injected, DeviceError> {
        match self.call(Request::TakeInjected)? {
            Response::Injected(i) => Ok(i),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    /// Clocks the simulation has run since it started (for rates in clocks).
    pub fn cycles(&mut self) -> Result<u64, DeviceError> {
        match self.call(Request::Cycles)? {
            Response::Count(n) => Ok(n),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    /// Pushes refused so far because no inject queue entry was free (what
    /// [`Injected::overflows`] reports, without taking the transmitted frames).
    pub fn inject_overflows(&mut self) -> Result<u64, DeviceError> {
        match self.call(Request::InjectOverflows)? {
            Response::Count(n) => Ok(n),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    /// Sends frames into the receive port and runs the clock until every one has its result;
    /// returns them in order with their transmitted frames. Punts and events go to the queues
    /// block, as on hardware.
    pub fn receive(&mut self, frames: Vec<Vec<u8>>) -> Result<Vec<RtlPacket>, DeviceError> {
        match self.call(Request::Receive(frames))? {
            Response::Packets(p) => Ok(p),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }
}

impl Device for RtlDevice {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        check(offset)?;
        match self.call(Request::Read(offset))? {
            Response::Value(v) => Ok(v),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        check(offset)?;
        match self.call(Request::Write(offset, value))? {
            Response::Done => Ok(()),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        for op in ops {
            let (RegOp::Read(o) | RegOp::Write(o, _)) = *op;
            check(o)?;
        }
        // One message for the whole batch: the loader reads banks of 100k+ entries.
        match self.call(Request::Batch(ops.to_vec()))? {
            Response::Values(v) => {
                reads.extend(v);
                Ok(())
            }
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    /// Runs the clock (a clock per microsecond asked, at least one, at most 100k): packets in
    /// flight drain, and a driver polling with short pauses (the command ring's waits start at
    /// a microsecond) sees the NIC's work move with each.
    fn wait(&mut self, d: std::time::Duration) -> Result<(), DeviceError> {
        let clocks = u64::try_from(d.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, 100_000);
        match self.call(Request::Clocks(clocks))? {
            Response::Done => Ok(()),
            _ => Err(DeviceError::Protocol(
                "unexpected answer from the RTL model".into(),
            )),
        }
    }

    fn describe(&self) -> String {
        "rtl:nlb_top (Verilator)".to_string()
    }

    /// `nlb_top`'s DMA master serves the region from now on (with the other regions mapped),
    /// as a card's through the IOMMU.
    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.done(Request::DmaMap(region.clone()))
    }

    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.done(Request::DmaUnmap(region.iova()))
    }

    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        self.done(Request::SetInterrupts(lines.to_vec()))
    }

    /// The DMA and interrupts the host memory saw, on the PCIe cost model (register
    /// accesses are not counted here).
    fn pcie(&mut self) -> PcieStats {
        match self.call(Request::Pcie) {
            Ok(Response::Pcie(p)) => p,
            _ => PcieStats::default(),
        }
    }
}

fn check(offset: u32) -> Result<(), DeviceError> {
    if !offset.is_multiple_of(4) {
        return Err(DeviceError::BadOffset {
            offset,
            why: "not 4-byte aligned",
        });
    }
    if offset >= 0x1_0000 {
        return Err(DeviceError::BadOffset {
            offset,
            why: "beyond the 64 KiB register space",
        });
    }
    Ok(())
}

/// The model and the shell's queues, on the worker thread.
struct Worker {
    dut: TopBench,
    depth: usize,
    punt: VecDeque<PuntedFrame>,
    punt_overflow: bool,
    punt_header: [u32; q::PUNT_HEADER_COUNT as usize],
    punt_data: Vec<u8>,
    learn: VecDeque<LearnEvent>,
    learn_overflow: bool,
    learn_data: [u32; q::LEARN_DATA_COUNT as usize],
    inject_header: [u32; q::INJECT_HEADER_COUNT as usize],
    inject_data: Vec<u32>,
    irq_mask: u32,
    /// Injected frames through the pipeline, not yet taken (at most `depth` from the inject
    /// window; the inject ring's come as the wire takes them).
    transmitted: VecDeque<RtlPacket>,
    /// Results off the monitor not yet matched with their transmitted frame (injected or
    /// not), in pipeline order; and transmitted frames not yet matched with their result.
    unmatched: VecDeque<(bool, PacketResult)>,
    tx_frames: VecDeque<Vec<u8>>,
    /// Received frames' results matched with their frames, for `run_until`.
    received: VecDeque<RtlPacket>,
    /// Results taken off the monitor so far.
    results_seen: u64,
    inject_overflows: u64,
    /// The ledger of the driver's host memory, once the driver mapped some: from then on
    /// `nlb_top`'s DMA master is served, and every request runs the clock until it is quiet.
    dma: Option<Arc<PcieLedger>>,
    /// DMA transfers seen so far (the settle loop's progress).
    dma_moved: u64,
}

impl Worker {
    fn new(seed: u64, hbm: Option<&HbmConfig>) -> Result<Worker, VerifError> {
        let profile =
            Profile::by_name("sim").ok_or_else(|| VerifError::Setup("no sim profile".into()))?;
        // Register accesses without random delays: the loader reads whole banks.
        let dut = TopBench::with_memory(hbm, seed, None, 0.0, 0.0, 0.0)?;
        Ok(Worker {
            dut,
            depth: profile.queue_depth as usize,
            punt: VecDeque::new(),
            punt_overflow: false,
            punt_header: [0; q::PUNT_HEADER_COUNT as usize],
            punt_data: Vec::new(),
            learn: VecDeque::new(),
            learn_overflow: false,
            learn_data: [0; q::LEARN_DATA_COUNT as usize],
            inject_header: [0; q::INJECT_HEADER_COUNT as usize],
            inject_data: vec![0; q::INJECT_DATA_COUNT as usize],
            irq_mask: 0,
            transmitted: VecDeque::new(),
            unmatched: VecDeque::new(),
            tx_frames: VecDeque::new(),
            received: VecDeque::new(),
            results_seen: 0,
            inject_overflows: 0,
            dma: None,
            dma_moved: 0,
        })
    }

    /// The driver's host port, made on first use.
    fn driver_port(&mut self) -> Result<&mut HostPort, VerifError> {
        if self.dma.is_none() {
            let ledger = Arc::new(PcieLedger::new(PcieCosts::default()));
            self.dut.host.serve_driver(HostPort::new(ledger.clone()));
            self.dma = Some(ledger);
        }
        self.dut
            .host
            .driver_port_mut()
            .ok_or_else(|| VerifError::Setup("the DMA master serves no driver memory".into()))
    }

    /// With the driver's memory served: clocks until the DMA master has been quiet for a
    /// while (records written, indices written back), so that what a request started has
    /// landed in host memory when it returns.
    fn settle_dma(&mut self) -> Result<(), VerifError> {
        if self.dma.is_none() {
            return Ok(());
        }
        let (mut quiet, mut n) = (0u32, 0u64);
        while quiet < DMA_QUIET {
            self.dut.step()?;
            self.collect()?;
            // A result counts as progress too: the inject ring's frames go through the
            // pipeline after their reads.
            let moved = self.dut.host.write_beats + self.dut.host.read_bursts + self.results_seen;
            if self.dut.host.idle() && self.unmatched.is_empty() && moved == self.dma_moved {
                quiet += 1;
            } else {
                quiet = 0;
            }
            self.dma_moved = moved;
            n += 1;
            if n > DMA_SETTLE_LIMIT {
                return Err(VerifError::Timeout {
                    what: "the DMA master to settle".into(),
                    cycles: n,
                });
            }
        }
        Ok(())
    }

    fn handle(&mut self, r: Request) -> Result<Response, VerifError> {
        match r {
            Request::Read(off) if in_queues(off) => Ok(Response::Value(self.read_queues(off))),
            Request::Write(off, v) if in_queues(off) => {
                self.write_queues(off, v)?;
                Ok(Response::Done)
            }
            // Without DMA only the AXI-Lite master runs: nothing else is going on between
            // packets. With the driver's memory served, every agent runs (the DMA master may
            // move at any clock) and a doorbell runs until the DMA is quiet.
            Request::Read(off) if self.dma.is_some() => Ok(Response::Value(self.dut.read32(off)?)),
            Request::Write(off, v) if self.dma.is_some() => {
                self.dut.write32(off, v)?;
                // A doorbell or the engine's control starts DMA: let it land (and the
                // frames the inject ring brought go through).
                if [dma::CTRL, dma::PUNT_HOST, dma::EVENT_HOST, dma::INJECT_HOST].contains(&off) {
                    self.settle_dma()?;
                }
                Ok(Response::Done)
            }
            Request::Read(off) => Ok(Response::Value(self.dut.axil.read(
                &mut self.dut.bench,
                &mut [],
                off,
            )?)),
            Request::Write(off, v) => {
                self.dut.axil.write(&mut self.dut.bench, &mut [], off, v)?;
                Ok(Response::Done)
            }
            Request::DmaMap(region) => {
                self.driver_port()?.map(&region);
                Ok(Response::Done)
            }
            Request::DmaUnmap(iova) => {
                self.driver_port()?.unmap(iova);
                Ok(Response::Done)
            }
            Request::SetInterrupts(lines) => {
                self.driver_port()?.set_interrupts(&lines);
                Ok(Response::Done)
            }
            Request::Pcie => Ok(Response::Pcie(
                self.dma.as_ref().map(|l| l.stats()).unwrap_or_default(),
            )),
            Request::Batch(ops) => {
                let mut v = Vec::new();
                for op in ops {
                    match op {
                        RegOp::Read(o) => match self.handle(Request::Read(o))? {
                            Response::Value(x) => v.push(x),
                            _ => return Err(VerifError::Setup("read answered no value".into())),
                        },
                        RegOp::Write(o, x) => {
                            self.handle(Request::Write(o, x))?;
                        }
                    }
                }
                Ok(Response::Values(v))
            }
            Request::Load(tables, nic) => {
                self.dut.write_settings(&nic)?;
                self.dut.load_bank(0, &tables)?;
                self.dut.write32(ctrl::ACTIVE_BANK, 0)?;
                self.dut.write32(ctrl::ENABLE, 1)?;
                Ok(Response::Done)
            }
            Request::Clocks(n) => {
                for _ in 0..n {
                    self.dut.step()?;
                    self.collect()?;
                }
                Ok(Response::Done)
            }
            Request::Receive(frames) => {
                let p = self.receive(frames)?;
                self.settle_dma()?;
                Ok(Response::Packets(p))
            }
            Request::InjectOverflows => Ok(Response::Count(self.inject_overflows)),
            Request::Cycles => Ok(Response::Count(self.dut.bench.sim.cycle())),
            Request::SetHbm(cfg) => {
                self.dut.set_hbm(&cfg)?;
                Ok(Response::Done)
            }
            Request::TakeInjected => Ok(Response::Injected(Injected {
                packets: self.transmitted.drain(..).collect(),
                overflows: self.inject_overflows,
            })),
        }
    }

    /// Runs frames through; results in order with the transmitted frames.
    fn receive(&mut self, frames: Vec<Vec<u8>>) -> Result<Vec<RtlPacket>, VerifError> {
        let first = self.dut.rx_sent;
        for f in &frames {
            self.dut.send(f);
        }
        let mut dropped = std::collections::BTreeMap::new();
        let results = self.run_until(frames.len(), false, &mut dropped)?;
        // Frames the receive side had no room for (docs/pipeline.md section 14.4) have no
        // result on the monitor: each takes its DROP result (its reason, its length) in its
        // place among the others.
        let mut results = results.into_iter();
        let mut out = Vec::with_capacity(frames.len());
        for (k, f) in frames.iter().enumerate() {
            let seq = first.wrapping_add(k as u32);
            match dropped.get(&seq) {
                Some(&reason) => out.push(RtlPacket {
                    result: PacketResult::new(nlb_hw::enums::Verdict::Drop, reason, 0, f.len()),
                    output: Vec::new(),
                }),
                None => out.extend(results.next()),
            }
        }
        Ok(out)
    }

    /// Clocks until `n` results (of received frames, or of frames injected through the
    /// inject window when `injected`) came out and the output streams drained; moves punts and
    /// events into the queues, and injected frames' results to `transmitted`.
    /// Received frames dropped whole at the receive side are recorded in `dropped` (number
    /// among received frames, reason) and count as done.
    fn run_until(
        &mut self,
        n: usize,
        injected: bool,
        dropped: &mut std::collections::BTreeMap<u32, nlb_hw::enums::Reason>,
    ) -> Result<Vec<RtlPacket>, VerifError> {
        let limit = self.dut.bench.sim.cycle() + CLOCKS_PER_FRAME * (n as u64 + 1);
        let first_injected = self.transmitted.len();
        loop {
            self.dut.step()?;
            for d in self.dut.mon.drops.drain(..) {
                dropped.insert(d.seq, d.reason);
            }
            self.collect()?;
            let quiet = self.dut.rx.pending() == 0
                && self.dut.inject.pending() == 0
                && self.dut.tx_pending.is_empty()
                && self.unmatched.is_empty()
                && self.dut.punt_pending.is_empty();
            let done = if injected {
                self.transmitted.len().saturating_sub(first_injected)
            } else {
                self.received.len() + dropped.len()
            };
            if done >= n && quiet {
                // A few more clocks for punts and events behind the last result.
                for _ in 0..64 {
                    self.dut.step()?;
                    self.collect()?;
                }
                break;
            }
            if self.dut.bench.sim.cycle() > limit {
                return Err(VerifError::Timeout {
                    what: format!("{n} frames through the pipeline"),
                    cycles: CLOCKS_PER_FRAME * (n as u64 + 1),
                });
            }
        }
        Ok(if injected {
            Vec::new()
        } else {
            self.received.drain(..).collect()
        })
    }

    /// Results off the monitor and transmitted frames, matched in pipeline order (a FORWARD
    /// result takes the next transmitted frame): injected frames' to `transmitted`, received
    /// frames' to `received`.
    fn match_results(&mut self) {
        while let Some((_, inj, r)) = self.dut.mon.results.pop_front() {
            self.unmatched.push_back((inj, r));
            self.results_seen += 1;
        }
        let mut beats = self.dut.tx.take();
        self.dut.tx_pending.append(&mut beats);
        self.tx_frames.extend(take_frames(&mut self.dut.tx_pending));
        while let Some(&(inj, result)) = self.unmatched.front() {
            let output = if result.verdict == nlb_hw::enums::Verdict::Forward {
                match self.tx_frames.pop_front() {
                    Some(f) => f,
                    None => break,
                }
            } else {
                Vec::new()
            };
            self.unmatched.pop_front();
            let p = RtlPacket { result, output };
            if inj {
                self.transmitted.push_back(p);
            } else {
                self.received.push_back(p);
            }
        }
    }

    /// Punts and events from their streams into the queues (full: dropped, flagged); PASS
    /// frames are the host stack's, which this device does not have: they are let go.
    fn collect(&mut self) -> Result<(), VerifError> {
        self.match_results();
        self.dut.pass.take();
        let mut beats = self.dut.punt.take();
        self.dut.punt_pending.append(&mut beats);
        for p in take_punts(&mut self.dut.punt_pending)? {
            if self.punt.len() < self.depth {
                self.punt.push_back(p);
            } else {
                self.punt_overflow = true;
            }
        }
        let mut beats = self.dut.events.take();
        for e in take_events(&mut beats)? {
            if self.learn.len() < self.depth {
                self.learn.push_back(e);
            } else {
                self.learn_overflow = true;
            }
        }
        Ok(())
    }

    fn read_queues(&mut self, off: u32) -> u32 {
        let range = |base: u32, count: u32| base..base + 4 * count;
        match off {
            q::PUNT_STATUS => {
                let v = q::PuntStatus {
                    count: saturate_u16(self.punt.len()),
                    overflow: self.punt_overflow,
                }
                .word();
                self.punt_overflow = false;
                v
            }
            q::PUNT_LEN => self.punt_data.len() as u32,
            q::LEARN_STATUS => {
                let v = q::LearnStatus {
                    count: saturate_u16(self.learn.len()),
                    overflow: self.learn_overflow,
                }
                .word();
                self.learn_overflow = false;
                v
            }
            // Entries held by transmitted frames not taken yet are not free.
            q::INJECT_STATUS => q::InjectStatus {
                free: saturate_u16(self.depth.saturating_sub(self.transmitted.len())),
            }
            .word(),
            q::IRQ_MASK => self.irq_mask,
            o if range(q::LEARN_DATA, q::LEARN_DATA_COUNT).contains(&o) => {
                self.learn_data[((o - q::LEARN_DATA) / 4) as usize]
            }
            o if range(q::INJECT_HEADER, q::INJECT_HEADER_COUNT).contains(&o) => {
                self.inject_header[((o - q::INJECT_HEADER) / 4) as usize]
            }
            o if range(q::PUNT_HEADER, q::PUNT_HEADER_COUNT).contains(&o) => {
                self.punt_header[((o - q::PUNT_HEADER) / 4) as usize]
            }
            o if range(q::PUNT_DATA, q::PUNT_DATA_COUNT).contains(&o) => {
                let at = (o - q::PUNT_DATA) as usize;
                let mut w = [0u8; 4];
                for (i, x) in w.iter_mut().enumerate() {
                    *x = self.punt_data.get(at + i).copied().unwrap_or(0);
                }
                u32::from_le_bytes(w)
            }
            _ => 0,
        }
    }

    fn write_queues(&mut self, off: u32, v: u32) -> Result<(), VerifError> {
        let range = |base: u32, count: u32| base..base + 4 * count;
        match off {
            q::PUNT_POP if v == q::PuntPop { pop: true }.word() => match self.punt.pop_front() {
                Some(p) => {
                    self.punt_header = p.header.pack().unwrap_or_default();
                    self.punt_data = p.frame;
                }
                None => {
                    self.punt_header = [0; q::PUNT_HEADER_COUNT as usize];
                    self.punt_data.clear();
                }
            },
            q::LEARN_POP if v == q::LearnPop { pop: true }.word() => {
                self.learn_data = match self.learn.pop_front() {
                    Some(ev) => ev.pack().unwrap_or_default(),
                    None => [0; q::LEARN_DATA_COUNT as usize],
                };
            }
            q::INJECT_PUSH if v == q::InjectPush { push: true }.word() => self.inject()?,
            q::IRQ_MASK => self.irq_mask = v & q::irq_mask::DEFINED,
            o if range(q::INJECT_HEADER, q::INJECT_HEADER_COUNT).contains(&o) => {
                self.inject_header[((o - q::INJECT_HEADER) / 4) as usize] = v
            }
            o if range(q::INJECT_DATA, q::INJECT_DATA_COUNT).contains(&o) => {
                self.inject_data[((o - q::INJECT_DATA) / 4) as usize] = v
            }
            _ => {}
        }
        Ok(())
    }

    /// The inject window on the inject stream; the clock runs until it is through, and its
    /// result waits to be taken. With no free entry the push is dropped and counted.
    fn inject(&mut self) -> Result<(), VerifError> {
        if self.transmitted.len() >= self.depth {
            self.inject_overflows += 1;
            return Ok(());
        }
        let Ok(h) = InjectHeader::unpack(&self.inject_header) else {
            return Ok(());
        };
        let len = usize::from(h.frame_len).min(WINDOW_BYTES);
        let frame: Vec<u8> = self
            .inject_data
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(len)
            .collect();
        self.dut.inject(&frame, h.backend, h.pool);
        self.run_until(1, true, &mut std::collections::BTreeMap::new())?;
        Ok(())
    }
}

/// A queue length as its 16-bit status field shows it (queues are never that deep).
fn saturate_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Registers of the queues block past its header (TYPE/VERSION/NEXT answer from the RTL).
fn in_queues(off: u32) -> bool {
    (q::BASE + nlb_hw::blocks::HEADER_BYTES..q::BASE + q::SPAN).contains(&off)
}

/// Writes one connection-table entry through the conntrack block the way the host installs
/// one: every word with `valid` = 0, WRITE_AT, then word 0 with `valid`, WRITE_AT.
pub fn write_conntrack<D: Device + ?Sized>(
    dev: &mut D,
    index: u32,
    e: &CtEntry,
) -> Result<(), DeviceError> {
    let words = e
        .pack()
        .map_err(|err| DeviceError::Protocol(format!("connection entry: {err}")))?;
    let write_at = conntrack::Cmd {
        op: TableCmd::WriteAt,
        index,
    }
    .word()
    .map_err(|err| DeviceError::Protocol(format!("connection entry {index}: {err}")))?;
    // Every word with valid = 0 first.
    let invalid = CtEntry { valid: false, ..*e }
        .pack()
        .map_err(|err| DeviceError::Protocol(format!("connection entry: {err}")))?;
    for (i, w) in invalid.iter().enumerate() {
        dev.write32(conntrack::DATA + 4 * i as u32, *w)?;
    }
    dev.write32(conntrack::CMD, write_at)?;
    if e.valid {
        dev.write32(conntrack::DATA, words[0])?;
        dev.write32(conntrack::CMD, write_at)?;
    }
    Ok(())
}
