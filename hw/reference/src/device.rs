//! The reference device: the per-packet side effects of the NIC (docs/pipeline.md §10, §11,
//! §13) around [`crate::pipeline::process`] — counters, hit bits, the punt and learn queues and
//! auto-learn — without the register file. The differential tests of `firmware-sim` run the
//! same traffic through it and through the optimised model's device and compare every result,
//! output byte, counter, queue entry and connection-table entry.

use crate::action;
use crate::conntrack::ConnTable;
use crate::pipeline::{self, Context, OutputError, PacketResult};
use nlb_hw::enums::{CounterKind, Event, Reason, Verdict};
use nlb_hw::layouts::{EventRecord, LearnEvent, PuntHeader};
use nlb_hw::{NicSettings, Tables};
use std::collections::VecDeque;

/// One counter set (§11).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    /// Packets.
    pub packets: u64,
    /// Bytes (received frame length).
    pub bytes: u64,
    /// Of those packets, the ones punted.
    pub punts: u64,
    /// Of those packets, the ones dropped.
    pub drops: u64,
}

/// Bytes of a punted frame that the punt window holds.
pub const WINDOW_BYTES: usize = 9728;

/// The reference device: one table bank, the settings, the connection table, counters and
/// queues.
#[derive(Debug, Clone)]
pub struct RefDevice {
    /// The table bank (bank 0).
    pub tables: Tables,
    /// `ctrl` settings.
    pub settings: NicSettings,
    /// `ctrl.enable`.
    pub enabled: bool,
    /// The connection table.
    pub conntrack: ConnTable,
    /// Rule counters, by rule id.
    pub rules: Vec<Counter>,
    /// Backend counters, by backend id.
    pub backends: Vec<Counter>,
    /// Reason counters, by reason value.
    pub reasons: Vec<Counter>,
    /// Verdict counters, by verdict value.
    pub verdicts: Vec<Counter>,
    /// Depth of the punt and learn queues.
    pub depth: usize,
    /// The punt queue: header and the frame's first [`WINDOW_BYTES`].
    pub punt: VecDeque<(PuntHeader, Vec<u8>)>,
    /// The punt queue overflowed (`punt_status` bit 31).
    pub punt_overflow: bool,
    /// The learn queue.
    pub learn: VecDeque<LearnEvent>,
    /// The learn queue overflowed (`learn_status` bit 31).
    pub learn_overflow: bool,
    /// Events install and close connections at the end of each call (as the simulated
    /// device's auto-learn does) instead of going to the learn queue.
    pub auto_learn: bool,
    /// Hardware learning (`dma.ctrl.hw_learn`, docs/pipeline.md §10): a LEARN installs its
    /// connection at once, seen by every later packet; full buckets are left to the host.
    pub hw_learn: bool,
    /// `dma.host_time`: the timestamp of connections the NIC learns.
    pub host_time: u32,
    /// Every event as the event ring carries it, with where the NIC installed a LEARN
    /// (not bounded: the ring's depth and drops are the DMA engine's).
    pub records: VecDeque<EventRecord>,
    /// Connection-table hits so far, for coverage checks.
    pub hits: u64,
    /// Learn and teardown events so far (in that order), for coverage checks.
    pub events: [u64; 2],
    pending: Vec<LearnEvent>,
}

fn add(c: &mut Counter, bytes: u64, v: Verdict) {
    c.packets = c.packets.wrapping_add(1);
    c.bytes = c.bytes.wrapping_add(bytes);
    match v {
        Verdict::Punt => c.punts = c.punts.wrapping_add(1),
        Verdict::Drop => c.drops = c.drops.wrapping_add(1),
        Verdict::Forward | Verdict::Pass => {}
    }
}

impl RefDevice {
    /// Bank 0 = `tables`, pipeline enabled, a connection table of `buckets × ways`.
    pub fn new(tables: Tables, settings: NicSettings, buckets: u32, ways: u32) -> RefDevice {
        let p = tables.profile;
        RefDevice {
            rules: vec![Counter::default(); p.rules as usize],
            backends: vec![Counter::default(); p.backends as usize],
            reasons: vec![Counter::default(); Reason::ALL.len()],
            verdicts: vec![Counter::default(); Verdict::ALL.len()],
            depth: p.queue_depth as usize,
            tables,
            settings,
            enabled: true,
            conntrack: ConnTable::new(buckets, ways),
            punt: VecDeque::new(),
            punt_overflow: false,
            learn: VecDeque::new(),
            learn_overflow: false,
            auto_learn: false,
            hw_learn: false,
            host_time: 0,
            records: VecDeque::new(),
            hits: 0,
            events: [0; 2],
            pending: Vec::new(),
        }
    }

    /// What a packet sees on this device.
    pub fn context(&self) -> Context<'_> {
        Context {
            tables: &self.tables,
            bank: 0,
            settings: &self.settings,
            enabled: self.enabled,
            conntrack: &self.conntrack,
        }
    }

    fn process(&self, frame: &[u8]) -> (PacketResult, Vec<u8>) {
        let mut out = vec![0u8; action::MAX_FRAME];
        match pipeline::process(&self.context(), frame, &mut out) {
            Ok(r) => {
                out.truncate(r.out_len);
                (r, out)
            }
            // The buffer holds MAX_FRAME bytes, and longer outputs are dropped as TOO_BIG.
            Err(OutputError::TooSmall { needed, got }) => {
                unreachable!("a {needed}-byte output in a {got}-byte buffer")
            }
        }
    }

    /// One frame, as `ModelDevice::receive`.
    pub fn receive(&mut self, frame: &[u8]) -> (PacketResult, Vec<u8>) {
        let r = self.process(frame);
        self.account(&r.0, frame);
        self.flush();
        r
    }

    /// A batch, as `ModelDevice::receive_batch`: auto-learned entries appear after it.
    pub fn receive_batch(&mut self, frames: &[&[u8]]) -> Vec<(PacketResult, Vec<u8>)> {
        let mut v = Vec::new();
        for f in frames {
            let r = self.process(f);
            self.account(&r.0, f);
            v.push(r);
        }
        self.flush();
        v
    }

    /// Counts one packet (what the original `Counters::record` did).
    pub fn count(&mut self, r: &PacketResult) {
        let bytes = r.frame_len as u64;
        let v = r.verdict;
        add(&mut self.reasons[r.reason.value() as usize], bytes, v);
        add(&mut self.verdicts[r.verdict.value() as usize], bytes, v);
        if let Some(c) = r.rule.and_then(|i| self.rules.get_mut(usize::from(i))) {
            add(c, bytes, v);
        }
        if matches!(v, Verdict::Forward | Verdict::Drop) {
            if let Some(c) = r
                .backend
                .and_then(|i| self.backends.get_mut(usize::from(i)))
            {
                add(c, bytes, v);
            }
        }
    }

    fn account(&mut self, r: &PacketResult, frame: &[u8]) {
        self.count(r);
        let v = r.verdict;
        if let Some(i) = r.ct_index {
            self.hits += 1;
            self.conntrack.mark_hit(i);
        }
        if v == Verdict::Punt {
            if self.punt.len() < self.depth {
                let n = frame.len().min(WINDOW_BYTES);
                self.punt.push_back((r.punt_header(), frame[..n].to_vec()));
            } else {
                self.punt_overflow = true;
            }
        }
        if let Some(ev) = r.event {
            self.events[usize::from(ev.event == Event::Teardown)] += 1;
            let mut record = EventRecord {
                event: [ev],
                installed: false,
                ct_index: 0,
            };
            if ev.event == Event::Learn && self.hw_learn {
                if let Ok(i) = self.conntrack.install(&ev, self.host_time) {
                    record.installed = true;
                    record.ct_index = i;
                }
            }
            self.records.push_back(record);
            if self.auto_learn {
                self.pending.push(ev);
            } else if self.learn.len() < self.depth {
                self.learn.push_back(ev);
            } else {
                self.learn_overflow = true;
            }
        }
    }

    fn flush(&mut self) {
        for ev in std::mem::take(&mut self.pending) {
            match ev.event {
                Event::Learn => {
                    let _ = self.conntrack.install(&ev, 0);
                }
                Event::Teardown => {
                    let _ = self.conntrack.mark_closed(&ev);
                }
            }
        }
    }

    /// One counter, as `Counters::get`.
    pub fn counter(&self, kind: CounterKind, index: u32) -> Counter {
        let v = match kind {
            CounterKind::Rule => &self.rules,
            CounterKind::Backend => &self.backends,
            CounterKind::Reason => &self.reasons,
            CounterKind::Verdict => &self.verdicts,
        };
        v.get(index as usize).copied().unwrap_or_default()
    }
}
