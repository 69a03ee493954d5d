//! Probe counters and the probe latency histogram, kept in atomics and read as plain data
//! (the daemon renders them in the Prometheus text format).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::probe::{ProbeFailure, ProbeOutcome};

/// Upper bounds (seconds) of the latency histogram buckets; a last bucket takes the rest.
pub const LATENCY_BOUNDS_SECONDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const BUCKETS: usize = LATENCY_BOUNDS_SECONDS.len() + 1;
const LABELS: usize = ProbeFailure::LABELS.len();

/// Live counters shared by every probe task.
#[derive(Debug)]
pub(crate) struct Metrics {
    buckets: [AtomicU64; BUCKETS],
    latency_sum_nanos: AtomicU64,
    passes: AtomicU64,
    failures: [AtomicU64; LABELS],
    in_flight: AtomicU64,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Metrics {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_sum_nanos: AtomicU64::new(0),
            passes: AtomicU64::new(0),
            failures: std::array::from_fn(|_| AtomicU64::new(0)),
            in_flight: AtomicU64::new(0),
        }
    }

    /// Counts a probe in flight until the guard drops (also when its task is aborted).
    pub(crate) fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    pub(crate) fn probe_finished(&self, outcome: &ProbeOutcome) {
        match outcome.result {
            Ok(_) => self.passes.fetch_add(1, Ordering::Relaxed),
            Err(f) => self.failures[f.label_index()].fetch_add(1, Ordering::Relaxed),
        };
        let seconds = outcome.latency.as_secs_f64();
        let bucket = LATENCY_BOUNDS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS - 1);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(outcome.latency.as_nanos()).unwrap_or(u64::MAX);
        self.latency_sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, probes: usize, targets: usize) -> ProbeMetrics {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        ProbeMetrics {
            latency: LatencyHistogram {
                bounds_seconds: &LATENCY_BOUNDS_SECONDS,
                count: counts.iter().sum(),
                counts,
                sum: Duration::from_nanos(self.latency_sum_nanos.load(Ordering::Relaxed)),
            },
            passes: self.passes.load(Ordering::Relaxed),
            failures: ProbeFailure::LABELS
                .iter()
                .zip(self.failures.iter())
                .map(|(label, n)| (*label, n.load(Ordering::Relaxed)))
                .collect(),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            probes,
            targets,
        }
    }
}

/// Keeps one probe in the in-flight gauge while alive.
#[derive(Debug)]
pub(crate) struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Probe latency histogram (every finished probe, pass or fail).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    /// Upper bounds of the first `bounds_seconds.len()` buckets.
    pub bounds_seconds: &'static [f64],
    /// Probes per bucket (not cumulative); one more entry than bounds: the overflow bucket.
    pub counts: Vec<u64>,
    /// Sum of all latencies.
    pub sum: Duration,
    /// Number of probes (sum of `counts`).
    pub count: u64,
}

impl LatencyHistogram {
    /// Cumulative counts per bound, as Prometheus `_bucket{le=..}` lines want (last is +Inf).
    pub fn cumulative(&self) -> Vec<u64> {
        self.counts
            .iter()
            .scan(0u64, |acc, c| {
                *acc += c;
                Some(*acc)
            })
            .collect()
    }

    /// Latency below which `q` (0..=1) of probes finished, as the bucket bound that holds it
    /// (`None` for an empty histogram or the overflow bucket).
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        let i = self.cumulative().iter().position(|c| *c >= rank)?;
        self.bounds_seconds.get(i).copied()
    }
}

/// A reading of the checker's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeMetrics {
    /// Latency histogram.
    pub latency: LatencyHistogram,
    /// Probes that passed.
    pub passes: u64,
    /// Failed probes by [`ProbeFailure::label`], every label listed.
    pub failures: Vec<(&'static str, u64)>,
    /// Probes running now.
    pub in_flight: u64,
    /// Distinct probes (after deduplication).
    pub probes: usize,
    /// Targets (pool members) fed by them.
    pub targets: usize,
}

impl ProbeMetrics {
    /// All failures (local errors included).
    pub fn failures_total(&self) -> u64 {
        self.failures.iter().map(|(_, n)| n).sum()
    }

    /// Failures with one label.
    pub fn failures_of(&self, label: &str) -> u64 {
        self.failures
            .iter()
            .find(|(l, _)| *l == label)
            .map_or(0, |(_, n)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn outcome(ms: u64, result: Result<(), ProbeFailure>) -> ProbeOutcome {
        ProbeOutcome {
            finished_at: Instant::now(),
            latency: Duration::from_millis(ms),
            result: result.map(|_| super::super::probe::ProbePass {
                weight: super::super::state::WeightReport::Missing,
                body_bytes: 0,
                body_truncated: false,
            }),
        }
    }

    #[test]
    fn histogram_buckets_by_upper_bound() {
        let m = Metrics::new();
        for (ms, r) in [
            (1, Ok(())),                   // <= 0.001
            (3, Ok(())),                   // <= 0.005
            (5, Err(ProbeFailure::Reset)), // <= 0.005 (bounds are inclusive)
            (
                20_000,
                Err(ProbeFailure::Timeout(super::super::probe::ProbePhase::Head)),
            ),
        ] {
            let guard = m.in_flight();
            m.probe_finished(&outcome(ms, r));
            drop(guard);
        }
        let r = m.read(2, 3);
        assert_eq!(r.latency.count, 4);
        assert_eq!(r.latency.counts[1], 1);
        assert_eq!(r.latency.counts[3], 2);
        assert_eq!(r.latency.counts[BUCKETS - 1], 1);
        assert_eq!(*r.latency.cumulative().last().unwrap(), 4);
        assert_eq!(r.latency.sum, Duration::from_millis(20_009));
        assert_eq!(r.latency.quantile_bound(0.5), Some(0.005));
        assert_eq!(r.latency.quantile_bound(1.0), None);
        assert_eq!((r.passes, r.failures_total(), r.in_flight), (2, 2, 0));
        assert_eq!(r.failures_of("reset"), 1);
        assert_eq!(r.failures_of("timeout_head"), 1);
        assert_eq!((r.probes, r.targets), (2, 3));
    }
}
