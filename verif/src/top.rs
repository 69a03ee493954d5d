//! The whole pipeline (`nlb_top`) on a bench: its AXI-Lite port (tables loaded through the
//! window, connections through the conntrack block, exactly as software does it), the
//! received stream with random idle cycles (it has no tready: every beat offered is taken),
//! and the per-packet result monitor, decoded into the golden model's [`PacketResult`], with
//! the frames the receive side dropped for lack of room. Two models: `top` (the connection
//! table and Maglev slots on chip) and `top_hbm` (on the HBM model, [`crate::hbm`]).

use crate::axil::AxiLiteMaster;
use crate::axis::{AxisSink, AxisSource, Beat};
use crate::bench::{Agent, Bench};
use crate::error::VerifError;
use crate::hbm::HbmConfig;
use crate::host_mem::{AxiHost, HostMemory, HostTiming};
use crate::models::{Top, TopHbm};
use crate::verilated::{Port, Verilated};
use firmware_sim::pipeline::{CtOutcome, PacketResult};
use firmware_sim::{Counter, CounterKind};
use nlb_hw::blocks::{conntrack, counters, table};
use nlb_hw::enums::{CounterSnapshot, Event, KeyType, Reason, TableCmd, Verdict};
use nlb_hw::layout::field_max;
use nlb_hw::layouts::{CtEntry, InjectHeader, LearnEvent, PuntHeader};
use nlb_hw::{NicSettings, Tables, NIC_REGISTERS};
use rand::rngs::StdRng;
use std::collections::VecDeque;
use std::path::Path;

/// Bytes per beat of the received stream.
pub const BEAT_BYTES: usize = 64;

/// The beats of a frame on the 512-bit stream: byte i of a beat in bits 8i+7..8i, tkeep
/// partial on the last beat only; an empty frame is one beat with no bytes.
pub fn frame_beats(frame: &[u8]) -> Vec<Beat> {
    let chunks: Vec<&[u8]> = if frame.is_empty() {
        vec![&[][..]]
    } else {
        frame.chunks(BEAT_BYTES).collect()
    };
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut data = vec![0u32; BEAT_BYTES / 4];
            for (j, b) in c.iter().enumerate() {
                data[j / 4] |= u32::from(*b) << (8 * (j % 4));
            }
            let keep: u64 = if c.len() == BEAT_BYTES {
                u64::MAX
            } else {
                (1u64 << c.len()) - 1
            };
            Beat {
                data,
                keep: vec![keep as u32, (keep >> 32) as u32],
                last: i + 1 == n,
                user: Vec::new(),
            }
        })
        .collect()
}

/// Frames out of the beats of a stream (bytes by tkeep; a frame ends with tlast); beats after
/// the last complete frame stay in `beats`.
pub fn take_frames(beats: &mut Vec<Beat>) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut cur = Vec::new();
    let mut used = 0;
    for (i, b) in beats.iter().enumerate() {
        let keep = u64::from(b.keep[0]) | u64::from(*b.keep.get(1).unwrap_or(&0)) << 32;
        for j in 0..BEAT_BYTES {
            if keep >> j & 1 != 0 {
                cur.push((b.data[j / 4] >> (8 * (j % 4))) as u8);
            }
        }
        if b.last {
            frames.push(std::mem::take(&mut cur));
            used = i + 1;
        }
    }
    beats.drain(..used);
    frames
}

/// A punted frame as the punt stream carries it: the header beat, then the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PuntedFrame {
    /// The punt header (low bits of the first beat).
    pub header: PuntHeader,
    /// The frame bytes that followed.
    pub frame: Vec<u8>,
}

/// Punted frames out of the punt stream's beats (complete ones only).
pub fn take_punts(beats: &mut Vec<Beat>) -> Result<Vec<PuntedFrame>, VerifError> {
    let mut out = Vec::new();
    // Find complete records: a header beat, then beats up to tlast.
    let mut used = 0;
    let mut i = 0;
    while i < beats.len() {
        let Some(end) = beats[i + 1..].iter().position(|b| b.last) else {
            break;
        };
        let header = PuntHeader::unpack(&beats[i].data[..PuntHeader::WORDS])
            .map_err(|e| VerifError::Setup(format!("punt header beat: {e}")))?;
        let mut body: Vec<Beat> = beats[i + 1..=i + 1 + end].to_vec();
        let frames = take_frames(&mut body);
        out.push(PuntedFrame {
            header,
            frame: frames.into_iter().next().unwrap_or_default(),
        });
        i = i + 2 + end;
        used = i;
    }
    beats.drain(..used);
    Ok(out)
}

/// Learn events out of the event stream's beats.
pub fn take_events(beats: &mut Vec<Beat>) -> Result<Vec<LearnEvent>, VerifError> {
    let out = beats
        .iter()
        .map(|b| {
            LearnEvent::unpack(&b.data[..LearnEvent::WORDS])
                .map_err(|e| VerifError::Setup(format!("event beat: {e}")))
        })
        .collect();
    beats.clear();
    out
}

/// The result monitor's ports.
#[derive(Debug)]
struct ResPorts {
    valid: Port,
    fields: Vec<Port>,
}

/// Result monitor fields, in the order [`ResultMonitor`] reads them.
const RES_FIELDS: &[&str] = &[
    "m_res_inject",
    "m_res_verdict",
    "m_res_reason",
    "m_res_bank",
    "m_res_rule_valid",
    "m_res_rule",
    "m_res_pool_valid",
    "m_res_pool",
    "m_res_backend_valid",
    "m_res_backend",
    "m_res_key_valid",
    "m_res_key",
    "m_res_conntrack",
    "m_res_ct_index",
    "m_res_flow_hash",
    "m_res_ip_id",
    "m_res_len",
    "m_res_out_len",
    "m_res_event_valid",
    "m_res_event",
    "m_res_protocol",
    "m_res_client",
    "m_res_client_port",
    "m_res_vip",
    "m_res_vip_port",
];

/// A received frame the receive side dropped for lack of room (docs/pipeline.md §14.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// The clock `m_drop_valid` showed it.
    pub cycle: u64,
    /// Its number among the frames received since reset (from 0).
    pub seq: u32,
    /// `NoRoomLookup` or `NoRoomBuffer`.
    pub reason: Reason,
}

/// Collects the per-packet results of `nlb_top`, with the clock each appeared.
#[derive(Debug)]
pub struct ResultMonitor {
    ports: ResPorts,
    drop_valid: Port,
    drop_seq: Port,
    drop_reason: Port,
    /// Results seen, oldest first: (clock, injected frame, result).
    pub results: VecDeque<(u64, bool, PacketResult)>,
    /// Received frames dropped for lack of room, oldest first.
    pub drops: VecDeque<Dropped>,
    /// Values that are no enumeration value (a broken result bus).
    pub violations: Vec<String>,
}

fn u128_of(w: &[u32]) -> u128 {
    w.iter()
        .enumerate()
        .fold(0u128, |acc, (i, &x)| acc | u128::from(x) << (32 * i))
}

impl ResultMonitor {
    fn new(sim: &Verilated) -> Result<ResultMonitor, VerifError> {
        Ok(ResultMonitor {
            ports: ResPorts {
                valid: sim.port("m_res_valid")?,
                fields: RES_FIELDS
                    .iter()
                    .map(|n| sim.port(n))
                    .collect::<Result<_, _>>()?,
            },
            drop_valid: sim.port("m_drop_valid")?,
            drop_seq: sim.port("m_drop_seq")?,
            drop_reason: sim.port("m_drop_reason")?,
            results: VecDeque::new(),
            drops: VecDeque::new(),
            violations: Vec::new(),
        })
    }

    fn decode(&mut self, v: &[u128], cycle: u64) -> PacketResult {
        let mut bad = |what: &str, x: u128| {
            self.violations
                .push(format!("cycle {cycle}: {what} {x} is no enum value"));
        };
        let verdict = Verdict::from_value(v[0] as u32).unwrap_or_else(|| {
            bad("verdict", v[0]);
            Verdict::Drop
        });
        let reason = Reason::from_value(v[1] as u32).unwrap_or_else(|| {
            bad("reason", v[1]);
            Reason::NoRule
        });
        let opt16 = |valid: u128, x: u128| (valid != 0).then_some(x as u16);
        let key = if v[9] != 0 {
            Some(KeyType::from_value(v[10] as u32).unwrap_or_else(|| {
                bad("key", v[10]);
                KeyType::Vip
            }))
        } else {
            None
        };
        let conntrack = match v[11] {
            0 => CtOutcome::None,
            1 => CtOutcome::Hit,
            2 => CtOutcome::Miss,
            x => {
                bad("conntrack outcome", x);
                CtOutcome::None
            }
        };
        let event = if v[17] != 0 {
            let kind = Event::from_value(v[18] as u32).unwrap_or_else(|| {
                bad("event", v[18]);
                Event::Learn
            });
            Some(LearnEvent {
                event: kind,
                protocol: v[19] as u8,
                src_port: v[21] as u16,
                dst_port: v[23] as u16,
                src_addr: v[20],
                dst_addr: v[22],
                backend: v[8] as u16,
                rule: v[4] as u16,
                flow_hash: v[13] as u32,
            })
        } else {
            None
        };
        PacketResult {
            verdict,
            reason,
            bank: v[2] as u8,
            rule: opt16(v[3], v[4]),
            pool: opt16(v[5], v[6]),
            backend: opt16(v[7], v[8]),
            key,
            conntrack,
            ct_index: (conntrack == CtOutcome::Hit).then_some(v[12] as u32),
            flow_hash: v[13] as u32,
            ip_id: v[14] as u32,
            frame_len: v[15] as usize,
            out_len: v[16] as usize,
            event,
        }
    }
}

impl Agent for ResultMonitor {
    fn drive(&mut self, _sim: &mut Verilated, _rng: &mut StdRng) -> Result<(), VerifError> {
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        if sim.get_bit(self.drop_valid)? {
            let cycle = sim.cycle();
            let seq = sim.get_u64(self.drop_seq)? as u32;
            let code = sim.get_u64(self.drop_reason)? as u32;
            let reason = match Reason::from_value(code) {
                Some(r @ (Reason::NoRoomLookup | Reason::NoRoomBuffer)) => r,
                _ => {
                    self.violations.push(format!(
                        "cycle {cycle}: drop reason {code} is no room reason"
                    ));
                    Reason::NoRoomLookup
                }
            };
            self.drops.push_back(Dropped { cycle, seq, reason });
        }
        if !sim.get_bit(self.ports.valid)? {
            return Ok(());
        }
        let mut v = Vec::with_capacity(self.ports.fields.len());
        for i in 0..self.ports.fields.len() {
            let p = self.ports.fields[i];
            v.push(u128_of(&sim.get_words(p)?));
        }
        let cycle = sim.cycle();
        let r = self.decode(&v[1..], cycle);
        self.results.push_back((cycle, v[0] != 0, r));
        Ok(())
    }
}

/// `nlb_top` with its agents.
#[derive(Debug)]
pub struct TopBench {
    /// The model and the generator of its timing.
    pub bench: Bench,
    /// AXI-Lite master on `s_axil`.
    pub axil: AxiLiteMaster,
    /// Source on the received stream.
    pub rx: AxisSource,
    /// Source on the inject stream.
    pub inject: AxisSource,
    /// Result monitor.
    pub mon: ResultMonitor,
    /// Sink on the transmit stream.
    pub tx: AxisSink,
    /// Sink on the punt stream.
    pub punt: AxisSink,
    /// Sink on the pass stream (PASS frames, toward the host's network stack).
    pub pass: AxisSink,
    /// Sink on the event stream.
    pub events: AxisSink,
    /// Host memory on the host rings' AXI4 master (empty until a test gives it one).
    pub host: AxiHost,
    /// Transmit beats taken from the sink, not yet a whole frame.
    pub tx_pending: Vec<Beat>,
    /// Punt beats taken from the sink, not yet a whole record.
    pub punt_pending: Vec<Beat>,
    /// Pass beats taken from the sink, not yet a whole frame.
    pub pass_pending: Vec<Beat>,
    /// Frames queued on the received stream since reset: the next one's number, as
    /// `m_drop_seq` counts them ([`Dropped::seq`]).
    pub rx_sent: u32,
}

impl TopBench {
    /// A reset `nlb_top` (tracing to `wave` when given), with the given probability of idle
    /// clocks on the received stream, back-pressure on every output stream and the AXI-Lite
    /// timing of `axil_idle`.
    pub fn new(
        seed: u64,
        wave: Option<&Path>,
        rx_idle: f64,
        backpressure: f64,
        axil_idle: f64,
    ) -> Result<TopBench, VerifError> {
        Self::with_memory(None, seed, wave, rx_idle, backpressure, axil_idle)
    }

    /// As [`TopBench::new`], with the tables on the HBM model (`top_hbm`) when `hbm` is given,
    /// on chip (`top`) otherwise.
    pub fn with_memory(
        hbm: Option<&HbmConfig>,
        seed: u64,
        wave: Option<&Path>,
        rx_idle: f64,
        backpressure: f64,
        axil_idle: f64,
    ) -> Result<TopBench, VerifError> {
        let mut sim = match (hbm, wave) {
            (Some(_), Some(p)) => Verilated::with_trace::<TopHbm>(p)?,
            (Some(_), None) => Verilated::new::<TopHbm>()?,
            (None, Some(p)) => Verilated::with_trace::<Top>(p)?,
            (None, None) => Verilated::new::<Top>()?,
        };
        if let Some(cfg) = hbm {
            cfg.apply(&mut sim)?;
        }
        sim.reset(4)?;
        let axil = AxiLiteMaster::new(&sim, "s_axil", axil_idle, axil_idle)?;
        let rx = AxisSource::new(&sim, "s_axis_rx", rx_idle)?;
        let inject = AxisSource::new(&sim, "s_axis_inject", rx_idle)?;
        let mon = ResultMonitor::new(&sim)?;
        let tx = AxisSink::new(&sim, "m_axis_tx", backpressure)?;
        let punt = AxisSink::new(&sim, "m_axis_punt", backpressure)?;
        let pass = AxisSink::new(&sim, "m_axis_pass", backpressure)?;
        let events = AxisSink::new(&sim, "m_axis_event", backpressure)?;
        let host = AxiHost::new(&sim, HostMemory::new(0, 0), HostTiming::pcie(), seed)?;
        Ok(TopBench {
            bench: Bench::new(sim, seed),
            axil,
            rx,
            inject,
            mon,
            tx,
            punt,
            pass,
            events,
            host,
            tx_pending: Vec::new(),
            punt_pending: Vec::new(),
            pass_pending: Vec::new(),
            rx_sent: 0,
        })
    }

    /// Sets the HBM model's timing from now on (a `top_hbm` bench; its seed counts only at
    /// reset). The tests load their tables with [`HbmConfig::quick`] and run traffic with
    /// [`HbmConfig::realistic`].
    pub fn set_hbm(&mut self, cfg: &HbmConfig) -> Result<(), VerifError> {
        cfg.apply(&mut self.bench.sim)
    }

    /// One clock with every agent.
    pub fn step(&mut self) -> Result<(), VerifError> {
        self.bench.step(&mut [
            &mut self.axil,
            &mut self.rx,
            &mut self.inject,
            &mut self.mon,
            &mut self.tx,
            &mut self.punt,
            &mut self.pass,
            &mut self.events,
            &mut self.host,
        ])
    }

    /// Writes a register (the stream keeps running).
    pub fn write32(&mut self, offset: u32, value: u32) -> Result<(), VerifError> {
        self.axil.write(
            &mut self.bench,
            &mut [
                &mut self.rx,
                &mut self.inject,
                &mut self.mon,
                &mut self.tx,
                &mut self.punt,
                &mut self.pass,
                &mut self.events,
                &mut self.host,
            ],
            offset,
            value,
        )
    }

    /// Reads a register (the stream keeps running).
    pub fn read32(&mut self, offset: u32) -> Result<u32, VerifError> {
        self.axil.read(
            &mut self.bench,
            &mut [
                &mut self.rx,
                &mut self.inject,
                &mut self.mon,
                &mut self.tx,
                &mut self.punt,
                &mut self.pass,
                &mut self.events,
                &mut self.host,
            ],
            offset,
        )
    }

    /// Queues writes and clocks until the master has done them all.
    fn flush(&mut self) -> Result<(), VerifError> {
        let mut n = 0u64;
        while !self.axil.is_idle() {
            self.step()?;
            n += 1;
            if n > 50_000_000 {
                return Err(VerifError::Timeout {
                    what: "queued AXI-Lite writes".into(),
                    cycles: n,
                });
            }
        }
        while self.axil.pop_completion().is_some() {}
        Ok(())
    }

    /// Loads every entry of `tables` that differs from an empty bank into `bank` through the
    /// table window, then checks the window reported no error.
    pub fn load_bank(&mut self, bank: u8, tables: &Tables) -> Result<(), VerifError> {
        let empty = Tables::empty(tables.profile);
        for (t, index) in tables.diff(&empty) {
            let words = tables
                .read_entry(t, index)
                .map_err(|e| VerifError::Setup(format!("{t:?} {index}: {e}")))?;
            for (i, w) in words.iter().enumerate() {
                self.axil.queue_write(table::DATA + 4 * i as u32, *w);
            }
            let select = table::Select {
                table: t,
                bank: bank == 1,
            };
            self.axil.queue_write(table::SELECT, select.word());
            // WRITE_AT: the index rides in the command.
            let cmd = table::Cmd {
                op: TableCmd::WriteAt,
                index,
            }
            .word()
            .map_err(|e| VerifError::Setup(format!("{t:?} {index}: {e}")))?;
            self.axil.queue_write(table::CMD, cmd);
        }
        self.flush()?;
        let status = self.read32(table::STATUS)?;
        if status != 0 {
            return Err(VerifError::Setup(format!(
                "table window status {status:#x} after loading bank {bank}"
            )));
        }
        Ok(())
    }

    /// Writes one connection-table entry the way the host installs one (all words with
    /// valid = 0, then word 0 with the valid bit).
    pub fn write_ct(&mut self, index: u32, e: &CtEntry) -> Result<(), VerifError> {
        let words = e
            .pack()
            .map_err(|err| VerifError::Setup(format!("conntrack entry: {err}")))?;
        let write_at = conntrack::Cmd {
            op: TableCmd::WriteAt,
            index,
        }
        .word()
        .map_err(|err| VerifError::Setup(format!("conntrack entry {index}: {err}")))?;
        // Every word with valid = 0 first.
        let invalid = CtEntry { valid: false, ..*e }
            .pack()
            .map_err(|err| VerifError::Setup(format!("conntrack entry: {err}")))?;
        for (i, w) in invalid.iter().enumerate() {
            self.axil.queue_write(conntrack::DATA + 4 * i as u32, *w);
        }
        self.axil.queue_write(conntrack::CMD, write_at);
        if e.valid {
            self.axil.queue_write(conntrack::DATA, words[0]);
            self.axil.queue_write(conntrack::CMD, write_at);
        }
        self.flush()?;
        let status = self.read32(conntrack::STATUS)?;
        if status != 0 {
            return Err(VerifError::Setup(format!(
                "conntrack status {status:#x} after writing entry {index}"
            )));
        }
        Ok(())
    }

    /// Writes the ctrl settings, the default action included.
    pub fn write_settings(&mut self, s: &NicSettings) -> Result<(), VerifError> {
        let words = s
            .words()
            .map_err(|e| VerifError::Setup(format!("NIC settings: {e}")))?;
        for (reg, w) in NIC_REGISTERS.iter().zip(words) {
            self.write32(*reg, w)?;
        }
        Ok(())
    }

    /// Snapshots one counter (`clear`: and zeroes it) and reads its eight words.
    pub fn read_counter(
        &mut self,
        kind: CounterKind,
        index: u32,
        clear: bool,
    ) -> Result<Counter, VerifError> {
        let select = counters::Select { kind, index }
            .word()
            .map_err(|e| VerifError::Setup(format!("counter {index}: {e}")))?;
        self.write32(counters::SELECT, select)?;
        let op = if clear {
            CounterSnapshot::LatchClear
        } else {
            CounterSnapshot::Latch
        };
        self.write32(counters::SNAPSHOT, counters::Snapshot { op }.word())?;
        let mut wide = |regs: [u32; 2]| -> Result<u64, VerifError> {
            let lo = self.read32(regs[0])?;
            let hi = self.read32(regs[1])?;
            Ok(counters::packets::join([lo, hi]))
        };
        Ok(Counter {
            packets: wide(counters::packets::REGISTERS)?,
            bytes: wide(counters::bytes::REGISTERS)?,
            punts: wide(counters::punts::REGISTERS)?,
            drops: wide(counters::drops::REGISTERS)?,
        })
    }

    /// Queues a frame on the received stream; returns its number among received frames.
    pub fn send(&mut self, frame: &[u8]) -> u32 {
        for b in frame_beats(frame) {
            self.rx.push(b);
        }
        self.rx_sent = self.rx_sent.wrapping_add(1);
        self.rx_sent.wrapping_sub(1)
    }

    /// Queues a frame on the inject stream with its header (backend, pool).
    pub fn inject(&mut self, frame: &[u8], backend: u16, pool: u16) {
        // tuser: the inject header's backend and pool, where its layout puts them (the
        // frame length is not carried: the stream's tlast ends the frame).
        let pool = pool & field_max(InjectHeader::POOL_WIDTH) as u16;
        let header = InjectHeader {
            backend,
            pool,
            frame_len: 0,
        };
        let user = header.pack().map_or(0, |w| w[0]);
        for mut b in frame_beats(frame) {
            b.user = vec![user];
            self.inject.push(b);
        }
    }
}
