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
    /// Adds one packet of `bytes` whose verdict gave `punt` / `drop` the value 1 (else 0),
    /// each count wrapping at 2^64 (`nlb_counter_bank`'s UPDATE; `nlb-verif`'s counter_bank
    /// bench compares the two).
    #[inline]
    pub fn add(&mut self, bytes: u64, punt: u64, drop: u64) {
        self.packets = self.packets.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(bytes);
        self.punts = self.punts.wrapping_add(punt);
        self.drops = self.drops.wrapping_add(drop);
    }
}

/// Counter families, as `counters.select` bits 31..24 encode them (regmap enum `counter_kind`).
pub use nlb_hw::enums::CounterKind;

/// Every counter of the pipeline, in one flat array: reasons, verdicts, rules, backends.
#[derive(Debug, Clone)]
pub struct Counters {
    all: Vec<Counter>,
    rules: usize,
    backends: usize,
}

/// Index of the first verdict counter.
const VERDICTS: usize = Reason::ALL.len();
/// Index of the first rule counter.
const RULES: usize = VERDICTS + Verdict::ALL.len();

impl Counters {
    /// Zeroed counters for a profile's rule and backend counts.
    pub fn new(profile: &Profile) -> Counters {
        let rules = profile.rules as usize;
        let backends = profile.backends as usize;
        Counters {
            all: vec![Counter::default(); RULES + rules + backends],
            rules,
            backends,
        }
    }

    /// Counts one packet: its reason and verdict always, its rule when it matched one, its
    /// backend when it was forwarded or dropped on its way to one.
    #[inline]
    pub fn record(&mut self, r: &PacketResult) {
        let bytes = r.frame_len as u64;
        let v = r.verdict;
        let punt = u64::from(v == Verdict::Punt);
        let drop = u64::from(v == Verdict::Drop);
        let mut add = |i: usize| {
            if let Some(c) = self.all.get_mut(i) {
                c.add(bytes, punt, drop);
            }
        };
        add(r.reason.value() as usize);
        add(VERDICTS + v.value() as usize);
        if let Some(rule) = r.rule.map(usize::from).filter(|&i| i < self.rules) {
            add(RULES + rule);
        }
        // Backends count what was sent to them and what was dropped on its way to them.
        if matches!(v, Verdict::Forward | Verdict::Drop) {
            if let Some(b) = r.backend.map(usize::from).filter(|&i| i < self.backends) {
                add(RULES + self.rules + b);
            }
        }
    }

    /// Index of a counter in the flat array.
    fn index(&self, kind: CounterKind, index: u32) -> Option<usize> {
        let i = index as usize;
        let (base, len) = match kind {
            CounterKind::Reason => (0, Reason::ALL.len()),
            CounterKind::Verdict => (VERDICTS, Verdict::ALL.len()),
            CounterKind::Rule => (RULES, self.rules),
            CounterKind::Backend => (RULES + self.rules, self.backends),
        };
        (i < len).then_some(base + i)
    }

    fn slot(&mut self, kind: CounterKind, index: u32) -> Option<&mut Counter> {
        let i = self.index(kind, index)?;
        self.all.get_mut(i)
    }

    /// One counter; zero for an index beyond the kind's range.
    pub fn get(&self, kind: CounterKind, index: u32) -> Counter {
        self.index(kind, index)
            .and_then(|i| self.all.get(i))
            .copied()
            .unwrap_or_default()
    }

    /// Reads and zeroes one counter.
    pub fn take(&mut self, kind: CounterKind, index: u32) -> Counter {
        self.slot(kind, index)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Test hook: sets one counter to `value` (as the RTL's simulation-only preset port does),
    /// so that tests can count across 2^32 and 2^64. Returns false, changing nothing, for an
    /// index beyond the kind's range.
    #[cfg(feature = "test-hooks")]
    pub fn preset(&mut self, kind: CounterKind, index: u32, value: Counter) -> bool {
        match self.slot(kind, index) {
            Some(c) => {
                *c = value;
                true
            }
            None => false,
        }
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
