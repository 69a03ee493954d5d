//! The per-target state machine (SPEC R5.2), weight reports and pool weights (SPEC R5.4).
//!
//! Pure logic with no I/O, so every rule is tested by hand-worked sequences.

use std::fmt;
use std::time::Instant;

use hyper::header::HeaderValue;

/// Name of the response header carrying a backend's weight.
pub const WEIGHT_HEADER: &str = "x-load-balancing-endpoint-weight";

/// Largest weight a backend may report.
pub const MAX_WEIGHT: u16 = 1000;

/// Health of one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// Not yet decided: fewer than `healthyThreshold` passes and fewer than
    /// `unhealthyThreshold` failures since the target was added. Not eligible for new
    /// connections (as a new instance is not in the public product before its first passes).
    Unknown,
    /// `healthyThreshold` consecutive passes since it was last unhealthy or unknown.
    Healthy,
    /// `unhealthyThreshold` consecutive failures since it was last healthy or unknown.
    Unhealthy,
}

impl Health {
    /// Whether new connections may go to this target (before fail-open, SPEC R3.4).
    pub fn is_healthy(self) -> bool {
        self == Health::Healthy
    }

    /// Lower-case name for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Healthy => "healthy",
            Health::Unhealthy => "unhealthy",
        }
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a target's last passing probe said about its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightReport {
    /// The pool is not weighted; the header is ignored.
    NotWeighted,
    /// Weighted pool, but no passing probe has carried the header (or none has passed yet).
    Missing,
    /// Weighted pool and the header was present but not one integer in 0..=1000.
    Invalid,
    /// A valid weight.
    Weight(u16),
}

impl WeightReport {
    /// Parses the header values of one response (SPEC R5.4). Exactly one value holding a
    /// decimal integer 0..=1000 (surrounding spaces allowed) is valid; several values, signs,
    /// fractions or anything else are invalid.
    pub fn from_header_values<'a>(mut values: impl Iterator<Item = &'a HeaderValue>) -> Self {
        let Some(first) = values.next() else {
            return WeightReport::Missing;
        };
        if values.next().is_some() {
            return WeightReport::Invalid;
        }
        let Ok(text) = first.to_str() else {
            return WeightReport::Invalid;
        };
        let text = text.trim_matches([' ', '\t']);
        if text.is_empty() || text.len() > 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return WeightReport::Invalid;
        }
        match text.parse::<u16>() {
            Ok(w) if w <= MAX_WEIGHT => WeightReport::Weight(w),
            _ => WeightReport::Invalid,
        }
    }
}

/// The result of one probe as one target judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// HTTP 200 within the target's timeout; carries the weight header when it was parsed.
    Pass(WeightReport),
    /// Anything else that says something about the backend.
    Fail,
}

/// A change of a target's (health, weight) decided by one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// State before.
    pub from: Health,
    /// State after.
    pub to: Health,
    /// Weight report after.
    pub weight: WeightReport,
}

/// Counts consecutive passes and failures of one target and decides its health.
#[derive(Debug, Clone)]
pub struct Tracker {
    health: Health,
    weight: WeightReport,
    weighted: bool,
    passes: u32,
    failures: u32,
    healthy_threshold: u32,
    unhealthy_threshold: u32,
    changed_at: Option<Instant>,
}

impl Tracker {
    /// A new target: [`Health::Unknown`], no weight yet.
    pub fn new(weighted: bool, healthy_threshold: u32, unhealthy_threshold: u32) -> Self {
        Tracker {
            health: Health::Unknown,
            weight: if weighted {
                WeightReport::Missing
            } else {
                WeightReport::NotWeighted
            },
            weighted,
            passes: 0,
            failures: 0,
            healthy_threshold: healthy_threshold.max(1),
            unhealthy_threshold: unhealthy_threshold.max(1),
            changed_at: None,
        }
    }

    /// Applies a new check to a running target (config reload): the decided state and weight
    /// stay, the consecutive counts restart when `restart_counts` (the probe itself changed).
    pub fn reconfigure(
        &mut self,
        weighted: bool,
        healthy_threshold: u32,
        unhealthy_threshold: u32,
        restart_counts: bool,
    ) {
        if weighted != self.weighted {
            self.weighted = weighted;
            self.weight = if weighted {
                WeightReport::Missing
            } else {
                WeightReport::NotWeighted
            };
        }
        self.healthy_threshold = healthy_threshold.max(1);
        self.unhealthy_threshold = unhealthy_threshold.max(1);
        if restart_counts {
            self.passes = 0;
            self.failures = 0;
        }
    }

    /// Current health.
    pub fn health(&self) -> Health {
        self.health
    }

    /// Current weight report.
    pub fn weight(&self) -> WeightReport {
        self.weight
    }

    /// Consecutive passes so far.
    pub fn consecutive_passes(&self) -> u32 {
        self.passes
    }

    /// Consecutive failures so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// When the last transition was decided.
    pub fn changed_at(&self) -> Option<Instant> {
        self.changed_at
    }

    /// Feeds one probe result finished at `at`; returns the transition it decided, if any.
    ///
    /// A weight change of a healthy target is a transition too (the pool's shares change);
    /// the weight of a target that is not healthy is recorded and reported when it turns
    /// healthy.
    pub fn observe(&mut self, verdict: Verdict, at: Instant) -> Option<Transition> {
        let before = (self.health, self.weight);
        match verdict {
            Verdict::Pass(report) => {
                self.passes = self.passes.saturating_add(1);
                self.failures = 0;
                if self.weighted {
                    self.weight = match report {
                        WeightReport::NotWeighted => WeightReport::Missing,
                        other => other,
                    };
                }
                if self.health != Health::Healthy && self.passes >= self.healthy_threshold {
                    self.health = Health::Healthy;
                }
            }
            Verdict::Fail => {
                self.failures = self.failures.saturating_add(1);
                self.passes = 0;
                if self.health != Health::Unhealthy && self.failures >= self.unhealthy_threshold {
                    self.health = Health::Unhealthy;
                }
            }
        }
        let health_changed = self.health != before.0;
        let weight_matters = self.health == Health::Healthy && self.weight != before.1;
        if health_changed || weight_matters {
            self.changed_at = Some(at);
            Some(Transition {
                from: before.0,
                to: self.health,
                weight: self.weight,
            })
        } else {
            None
        }
    }
}

/// Why a pool's new connections are shared equally rather than by reported weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightMode {
    /// The pool is not weighted.
    Unweighted,
    /// Shares follow the reported weights.
    Weighted,
    /// A healthy backend reported no weight (named).
    EqualMissing(String),
    /// A healthy backend reported an invalid weight (named).
    EqualInvalid(String),
    /// Every healthy backend reported 0, so they share equally (SPEC R5.4).
    EqualAllZero,
}

/// New-connection weights of one pool's members, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolWeights {
    /// How the weights were decided.
    pub mode: WeightMode,
    /// (backend name, weight): 0 for members that take no new connections (not healthy, or a
    /// reported weight 0), otherwise the reported weight or 1 when shares are equal.
    pub members: Vec<(String, u32)>,
}

/// One pool member as [`pool_weights`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberView<'a> {
    /// Backend name.
    pub backend: &'a str,
    /// Its health.
    pub health: Health,
    /// Its weight report.
    pub weight: WeightReport,
}

/// Applies SPEC R5.4 to one pool: weight 0 takes a healthy backend out of new-connection
/// choice; when every healthy backend reports 0 they share equally; a missing or invalid weight
/// on any healthy backend puts the whole pool back on equal weights. Only healthy members are
/// judged (an unhealthy backend cannot report); fail-open when none is healthy is the
/// controller's decision (SPEC R3.4) and uses equal weights.
pub fn pool_weights(weighted: bool, members: &[MemberView<'_>]) -> PoolWeights {
    let healthy = || members.iter().filter(|m| m.health.is_healthy());
    let mut mode = if weighted {
        WeightMode::Weighted
    } else {
        WeightMode::Unweighted
    };
    if weighted {
        for m in healthy() {
            match m.weight {
                WeightReport::Weight(_) => {}
                WeightReport::Invalid => {
                    mode = WeightMode::EqualInvalid(m.backend.to_string());
                    break;
                }
                WeightReport::Missing | WeightReport::NotWeighted => {
                    mode = WeightMode::EqualMissing(m.backend.to_string());
                    break;
                }
            }
        }
        if mode == WeightMode::Weighted
            && healthy().all(|m| m.weight == WeightReport::Weight(0))
            && healthy().next().is_some()
        {
            mode = WeightMode::EqualAllZero;
        }
    }
    let members = members
        .iter()
        .map(|m| {
            let w = match (&mode, m.health.is_healthy(), m.weight) {
                (_, false, _) => 0,
                (WeightMode::Weighted, true, WeightReport::Weight(w)) => u32::from(w),
                (_, true, _) => 1,
            };
            (m.backend.to_string(), w)
        })
        .collect();
    PoolWeights { mode, members }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Health::*;

    fn hv(s: &'static str) -> HeaderValue {
        HeaderValue::from_static(s)
    }

    #[test]
    fn weight_header_parsing_follows_the_spec_range() {
        let one = |s: &'static str| WeightReport::from_header_values([hv(s)].iter());
        assert_eq!(one("0"), WeightReport::Weight(0));
        assert_eq!(one("1000"), WeightReport::Weight(1000));
        assert_eq!(one(" 17 "), WeightReport::Weight(17));
        assert_eq!(one("007"), WeightReport::Weight(7));
        for bad in [
            "1001",
            "-1",
            "+5",
            "1.5",
            "",
            "abc",
            "99999999999",
            "1e3",
            "0x10",
        ] {
            let v = HeaderValue::from_str(bad).unwrap();
            assert_eq!(
                WeightReport::from_header_values([v].iter()),
                WeightReport::Invalid,
                "{bad:?}"
            );
        }
        assert_eq!(
            WeightReport::from_header_values([].iter()),
            WeightReport::Missing
        );
        assert_eq!(
            WeightReport::from_header_values([hv("5"), hv("5")].iter()),
            WeightReport::Invalid
        );
    }

    fn run(tracker: &mut Tracker, script: &str) -> Vec<(Health, Health)> {
        let now = Instant::now();
        script
            .chars()
            .filter_map(|c| {
                let v = if c == 'P' {
                    Verdict::Pass(WeightReport::Missing)
                } else {
                    Verdict::Fail
                };
                tracker.observe(v, now).map(|t| (t.from, t.to))
            })
            .collect()
    }

    #[test]
    fn thresholds_count_consecutive_results() {
        // Hand-worked: healthy after 2 passes in a row, unhealthy after 3 failures in a row.
        let mut t = Tracker::new(false, 2, 3);
        assert_eq!(run(&mut t, "P"), vec![]);
        assert_eq!(t.health(), Unknown);
        assert_eq!(run(&mut t, "P"), vec![(Unknown, Healthy)]);
        // A failure streak interrupted by a pass starts again.
        assert_eq!(run(&mut t, "FFPFF"), vec![]);
        assert_eq!(t.health(), Healthy);
        assert_eq!(run(&mut t, "F"), vec![(Healthy, Unhealthy)]);
        assert_eq!(run(&mut t, "FFFP"), vec![]);
        assert_eq!(run(&mut t, "P"), vec![(Unhealthy, Healthy)]);
    }

    #[test]
    fn unknown_turns_unhealthy_after_the_unhealthy_threshold() {
        let mut t = Tracker::new(false, 2, 2);
        assert_eq!(run(&mut t, "FPF"), vec![]);
        assert_eq!(run(&mut t, "F"), vec![(Unknown, Unhealthy)]);
    }

    #[test]
    fn threshold_one_decides_on_every_flip() {
        let mut t = Tracker::new(false, 1, 1);
        assert_eq!(
            run(&mut t, "PFP"),
            vec![
                (Unknown, Healthy),
                (Healthy, Unhealthy),
                (Unhealthy, Healthy)
            ]
        );
    }

    #[test]
    fn weight_changes_of_healthy_targets_are_transitions() {
        let now = Instant::now();
        let mut t = Tracker::new(true, 1, 1);
        assert_eq!(t.weight(), WeightReport::Missing);
        let tr = t.observe(Verdict::Pass(WeightReport::Weight(10)), now);
        assert_eq!(
            tr,
            Some(Transition {
                from: Unknown,
                to: Healthy,
                weight: WeightReport::Weight(10)
            })
        );
        assert_eq!(
            t.observe(Verdict::Pass(WeightReport::Weight(10)), now),
            None
        );
        let tr = t.observe(Verdict::Pass(WeightReport::Weight(0)), now);
        assert_eq!(tr.map(|t| t.weight), Some(WeightReport::Weight(0)));
        let tr = t.observe(Verdict::Pass(WeightReport::Invalid), now);
        assert_eq!(tr.map(|t| t.weight), Some(WeightReport::Invalid));
        // Failing keeps the last weight.
        assert_eq!(
            t.observe(Verdict::Fail, now).map(|t| t.weight),
            Some(WeightReport::Invalid)
        );
    }

    #[test]
    fn unweighted_targets_ignore_the_header() {
        let mut t = Tracker::new(false, 1, 1);
        let tr = t.observe(Verdict::Pass(WeightReport::Weight(3)), Instant::now());
        assert_eq!(tr.map(|t| t.weight), Some(WeightReport::NotWeighted));
        assert_eq!(
            t.observe(Verdict::Pass(WeightReport::Weight(4)), Instant::now()),
            None
        );
    }

    #[test]
    fn reconfigure_keeps_the_decision() {
        let mut t = Tracker::new(false, 2, 2);
        run(&mut t, "PP");
        t.reconfigure(false, 3, 3, true);
        assert_eq!(t.health(), Healthy);
        assert_eq!(run(&mut t, "FF"), vec![]);
        assert_eq!(run(&mut t, "F"), vec![(Healthy, Unhealthy)]);
    }

    fn member(backend: &'static str, health: Health, weight: WeightReport) -> MemberView<'static> {
        MemberView {
            backend,
            health,
            weight,
        }
    }

    fn weights(p: &PoolWeights) -> Vec<u32> {
        p.members.iter().map(|(_, w)| *w).collect()
    }

    #[test]
    fn pool_weights_follow_spec_r5_4() {
        use WeightReport::*;
        // Reported weights are used; unhealthy members get nothing.
        let p = pool_weights(
            true,
            &[
                member("a", Healthy, Weight(3)),
                member("b", Healthy, Weight(1)),
                member("c", Unhealthy, Missing),
            ],
        );
        assert_eq!(
            (p.mode.clone(), weights(&p)),
            (WeightMode::Weighted, vec![3, 1, 0])
        );
        // Weight 0 removes a healthy backend from new-connection choice.
        let p = pool_weights(
            true,
            &[
                member("a", Healthy, Weight(0)),
                member("b", Healthy, Weight(5)),
            ],
        );
        assert_eq!(weights(&p), vec![0, 5]);
        // All healthy report 0: equal shares.
        let p = pool_weights(
            true,
            &[
                member("a", Healthy, Weight(0)),
                member("b", Healthy, Weight(0)),
                member("c", Unknown, Weight(9)),
            ],
        );
        assert_eq!(
            (p.mode.clone(), weights(&p)),
            (WeightMode::EqualAllZero, vec![1, 1, 0])
        );
        // One missing or invalid weight: the pool goes back to equal weights.
        let p = pool_weights(
            true,
            &[
                member("a", Healthy, Weight(7)),
                member("b", Healthy, Missing),
            ],
        );
        assert_eq!(
            (p.mode.clone(), weights(&p)),
            (WeightMode::EqualMissing("b".into()), vec![1, 1])
        );
        let p = pool_weights(
            true,
            &[
                member("a", Healthy, Invalid),
                member("b", Healthy, Weight(0)),
            ],
        );
        assert_eq!(
            (p.mode.clone(), weights(&p)),
            (WeightMode::EqualInvalid("a".into()), vec![1, 1])
        );
        // Unweighted pools: equal among the healthy.
        let p = pool_weights(
            false,
            &[
                member("a", Healthy, NotWeighted),
                member("b", Unhealthy, NotWeighted),
            ],
        );
        assert_eq!(
            (p.mode.clone(), weights(&p)),
            (WeightMode::Unweighted, vec![1, 0])
        );
    }
}
