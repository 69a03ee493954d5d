//! Packet and byte counters per rule, per backend, per reason and per verdict (the `counters`
//! register block selects them by kind and index).

use crate::pipeline::PacketResult;
use nlb_hw::enums::{Reason, Verdict};
use nlb_hw::Profile;

/// One counter set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    /// Packets.
    pub packets: u64,
    /// Bytes (received frame length, without FCS).
    pub bytes: u64,
    /// Of those packets, the ones punted to the host.
    pub punts: u64,
    /// Of those packets, the ones dropped.
    pub drops: u64,
}

impl Counter {
    #[inline]
    fn add(&mut self, bytes: u64, verdict: Verdict) {
        self.packets = self.packets.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(bytes);
        match verdict {
            Verdict::Punt => self.punts = self.punts.wrapping_add(1),
            Verdict::Drop => self.drops = self.drops.wrapping_add(1),
            Verdict::Forward | Verdict::Pass => {}
        }
    }
}

/// Counter families, as `counters.select` bits 31..24 encode them (regmap enum `counter_kind`).
pub use nlb_hw::enums::CounterKind;

/// Every counter of the pipeline.
#[derive(Debug, Clone)]
pub struct Counters {
    rules: Vec<Counter>,
    backends: Vec<Counter>,
    reasons: [Counter; Reason::ALL.len()],
    verdicts: [Counter; Verdict::ALL.len()],
}

impl Counters {
    /// Zeroed counters for a profile's rule and backend counts.
    pub fn new(profile: &Profile) -> Counters {
        Counters {
            rules: vec![Counter::default(); profile.rules as usize],
            backends: vec![Counter::default(); profile.backends as usize],
            reasons: [Counter::default(); Reason::ALL.len()],
            verdicts: [Counter::default(); Verdict::ALL.len()],
        }
    }

    /// Counts one packet: its reason and verdict always, its rule when it matched one, its
    /// backend when it was forwarded.
    #[inline]
    pub fn record(&mut self, r: &PacketResult) {
        let bytes = r.frame_len as u64;
        let v = r.verdict;
        if let Some(c) = self.reasons.get_mut(r.reason.value() as usize) {
            c.add(bytes, v);
        }
        if let Some(c) = self.verdicts.get_mut(r.verdict.value() as usize) {
            c.add(bytes, v);
        }
        if let Some(rule) = r.rule {
            if let Some(c) = self.rules.get_mut(usize::from(rule)) {
                c.add(bytes, v);
            }
        }
        // Backends count what was sent to them and what was dropped on its way to them.
        if matches!(v, Verdict::Forward | Verdict::Drop) {
            if let Some(c) = r
                .backend
                .and_then(|b| self.backends.get_mut(usize::from(b)))
            {
                c.add(bytes, v);
            }
        }
    }

    fn slot(&mut self, kind: CounterKind, index: u32) -> Option<&mut Counter> {
        let i = index as usize;
        match kind {
            CounterKind::Rule => self.rules.get_mut(i),
            CounterKind::Backend => self.backends.get_mut(i),
            CounterKind::Reason => self.reasons.get_mut(i),
            CounterKind::Verdict => self.verdicts.get_mut(i),
        }
    }

    /// One counter; zero for an index beyond the kind's range.
    pub fn get(&self, kind: CounterKind, index: u32) -> Counter {
        let i = index as usize;
        match kind {
            CounterKind::Rule => self.rules.get(i),
            CounterKind::Backend => self.backends.get(i),
            CounterKind::Reason => self.reasons.get(i),
            CounterKind::Verdict => self.verdicts.get(i),
        }
        .copied()
        .unwrap_or_default()
    }

    /// Reads and zeroes one counter.
    pub fn take(&mut self, kind: CounterKind, index: u32) -> Counter {
        self.slot(kind, index)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The counter of a reason.
    pub fn reason(&self, r: Reason) -> Counter {
        self.get(CounterKind::Reason, r.value())
    }

    /// The counter of a verdict.
    pub fn verdict(&self, v: Verdict) -> Counter {
        self.get(CounterKind::Verdict, v.value())
    }
}
