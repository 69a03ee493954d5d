//! Shared health (SPEC R11.2; docs/fleet.md): each backend's probe is run by `--probers` hosts
//! chosen by rendezvous hashing over the live hosts (those with a record under `PREFIX
//! hosts/`), their decisions go to etcd under `PREFIX health/POOL/BACKEND/HOST` with the
//! prober's lease, and every host derives the same health from those reports and loads it.
//!
//! The probing itself is the slow path's [`HealthChecker`] (thresholds, weights, probe
//! sharing), given only the targets this host is a prober of; its decisions are not loaded
//! directly but written to etcd, and come back, like every other host's, through the watch.
//!
//! This module keeps the fleet's view (a mirror of the hosts' and reports' keys) and derives
//! from it what to probe and what to load; `fleet.rs` feeds it from etcd and writes this
//! host's reports.

use nlb_control::fleet::{self, HealthReport};
use nlbd::health::{
    Health, HealthChange, HealthSnapshot, HealthTarget, TargetKey, TargetStatus, WeightReport,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::Notify;

/// The fleet's health as this host sees it.
#[derive(Debug)]
pub struct SharedHealth {
    me: String,
    probers: usize,
    state: Mutex<State>,
    /// Woken on every decision of this host's checker: the fleet task writes its reports.
    pub local_changed: Notify,
    /// Woken when the targets or live hosts changed: the fleet task re-derives.
    pub view_changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Every target of the configuration serving.
    targets: Vec<HealthTarget>,
    /// Live hosts (a record under `hosts/`), with their rendezvous hashes.
    live: BTreeMap<String, u64>,
    /// Reports by target, then by prober.
    reports: BTreeMap<TargetKey, BTreeMap<String, HealthReport>>,
    /// The fleet's decision per target; kept when a target's last report goes (its probers
    /// changing hands) until a new report decides again.
    decided: BTreeMap<TargetKey, (Health, WeightReport)>,
    /// What this host probes.
    assigned: BTreeSet<TargetKey>,
    /// The live hosts changed since the last [`SharedHealth::reassign`] (re-ranking costs
    /// targets × hosts: not on every record rewrite).
    live_changed: bool,
    /// Reports or targets changed since the last [`SharedHealth::remerge`].
    reports_changed: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SharedHealth {
    /// Host `me`'s view, with `probers` hosts per backend.
    pub fn new(me: &str, probers: usize) -> SharedHealth {
        SharedHealth {
            me: me.to_string(),
            probers,
            state: Mutex::new(State::default()),
            local_changed: Notify::new(),
            view_changed: Notify::new(),
        }
    }

    /// Takes the targets of a new configuration; returns those this host now probes.
    pub fn set_targets(&self, targets: Vec<HealthTarget>) -> Vec<HealthTarget> {
        let mut s = lock(&self.state);
        let keys: BTreeSet<&TargetKey> = targets.iter().map(|t| &t.key).collect();
        s.decided.retain(|k, _| keys.contains(k));
        s.targets = targets;
        s.reports_changed = true;
        let assigned = self.assignment(&s);
        s.assigned = assigned.iter().map(|t| t.key.clone()).collect();
        self.view_changed.notify_one();
        assigned
    }

    /// The targets this host probes: those whose probe ranks it among the best `probers`
    /// live hosts. None while it is not live itself.
    fn assignment(&self, s: &State) -> Vec<HealthTarget> {
        if !s.live.contains_key(&self.me) {
            return Vec::new();
        }
        let hosts: Vec<(String, u64)> = s.live.iter().map(|(n, h)| (n.clone(), *h)).collect();
        s.targets
            .iter()
            .filter(|t| {
                let item = fleet::rendezvous_hash(&t.probe_key().to_string());
                fleet::probers(&hosts, item, self.probers).contains(&self.me.as_str())
            })
            .cloned()
            .collect()
    }

    /// Replaces the whole view (a fresh read of etcd at a session's start).
    pub fn reset(
        &self,
        live: impl IntoIterator<Item = String>,
        reports: Vec<(TargetKey, String, HealthReport)>,
    ) {
        let mut s = lock(&self.state);
        s.live = live
            .into_iter()
            .map(|n| {
                let h = fleet::rendezvous_hash(&n);
                (n, h)
            })
            .collect();
        s.live_changed = true;
        s.reports_changed = true;
        s.reports.clear();
        for (target, host, report) in reports {
            s.reports.entry(target).or_default().insert(host, report);
        }
    }

    /// A host's record appeared (true) or went (false).
    pub fn host(&self, name: &str, live: bool) {
        let mut s = lock(&self.state);
        let changed = if live {
            s.live
                .insert(name.to_string(), fleet::rendezvous_hash(name))
                .is_none()
        } else {
            s.live.remove(name).is_some()
        };
        s.live_changed |= changed;
    }

    /// A report was written (Some) or deleted (None).
    pub fn report(&self, target: TargetKey, host: &str, report: Option<HealthReport>) {
        let mut s = lock(&self.state);
        s.reports_changed = true;
        match report {
            Some(r) => {
                s.reports
                    .entry(target)
                    .or_default()
                    .insert(host.to_string(), r);
            }
            None => {
                if let Some(by_host) = s.reports.get_mut(&target) {
                    by_host.remove(host);
                    if by_host.is_empty() {
                        s.reports.remove(&target);
                    }
                }
            }
        }
    }

    /// Re-derives what this host probes; Some(targets) when that changed.
    pub fn reassign(&self) -> Option<Vec<HealthTarget>> {
        let mut s = lock(&self.state);
        if !std::mem::take(&mut s.live_changed) {
            return None;
        }
        let assigned = self.assignment(&s);
        let keys: BTreeSet<TargetKey> = assigned.iter().map(|t| t.key.clone()).collect();
        if keys == s.assigned {
            return None;
        }
        s.assigned = keys;
        Some(assigned)
    }

    /// Re-derives the fleet's decisions; the changes since the last call with the snapshot
    /// to load, or None when nothing changed.
    pub fn remerge(&self) -> Option<(Vec<HealthChange>, HealthSnapshot)> {
        let mut s = lock(&self.state);
        if !std::mem::take(&mut s.reports_changed) {
            return None;
        }
        let now = Instant::now();
        let mut changes = Vec::new();
        let targets = s.targets.clone();
        for t in &targets {
            let Some(merged) = s
                .reports
                .get(&t.key)
                .and_then(|r| merge_reports(r.values()))
            else {
                continue;
            };
            let before = s.decided.insert(t.key.clone(), merged);
            if before != Some(merged) {
                let (previous, previous_weight) =
                    before.unwrap_or((Health::Unknown, WeightReport::Missing));
                changes.push(HealthChange {
                    target: t.key.clone(),
                    ip: t.ip,
                    previous,
                    health: merged.0,
                    previous_weight,
                    weight: merged.1,
                    decided_at: now,
                    failure: None,
                });
            }
        }
        if changes.is_empty() {
            return None;
        }
        Some((changes, snapshot_of(&s, &targets, now)))
    }

    /// The fleet's decisions for `targets` (a reload's), as the engine takes them: targets
    /// without a decision are left out (undecided).
    pub fn snapshot_for(&self, targets: &[HealthTarget]) -> HealthSnapshot {
        let s = lock(&self.state);
        snapshot_of(&s, targets, Instant::now())
    }

    /// What this host's reports should be, given its checker's decisions: puts (target,
    /// report) and deletes (target), against what the view holds of its own.
    pub fn own_reports(
        &self,
        local: &HealthSnapshot,
    ) -> (Vec<(TargetKey, HealthReport)>, Vec<TargetKey>) {
        let s = lock(&self.state);
        let mut puts = Vec::new();
        let mut keep = BTreeSet::new();
        for t in &local.targets {
            if !s.assigned.contains(&t.target.key) {
                continue;
            }
            let healthy = match t.health {
                Health::Healthy => true,
                Health::Unhealthy => false,
                Health::Unknown => continue,
            };
            keep.insert(t.target.key.clone());
            let weight = weight_to_text(t.weight);
            let written = s.reports.get(&t.target.key).and_then(|r| r.get(&self.me));
            if written.is_some_and(|w| w.healthy == healthy && w.weight == weight) {
                continue;
            }
            puts.push((
                t.target.key.clone(),
                HealthReport {
                    healthy,
                    weight,
                    updated_unix_ms: fleet::now_unix_ms(),
                },
            ));
        }
        let deletes = s
            .reports
            .iter()
            .filter(|(k, by_host)| by_host.contains_key(&self.me) && !keep.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        (puts, deletes)
    }

    /// How many targets this host probes.
    pub fn probing(&self) -> usize {
        lock(&self.state).assigned.len()
    }
}

fn snapshot_of(s: &State, targets: &[HealthTarget], now: Instant) -> HealthSnapshot {
    let mut out: Vec<TargetStatus> = targets
        .iter()
        .filter_map(|t| {
            // The reports first: a reload's new targets may have them before any merge.
            let (health, weight) = s
                .reports
                .get(&t.key)
                .and_then(|r| merge_reports(r.values()))
                .or_else(|| s.decided.get(&t.key).copied())?;
            Some(TargetStatus {
                target: t.clone(),
                probe: t.probe_key(),
                health,
                weight,
                consecutive_passes: 0,
                consecutive_failures: 0,
                changed_at: None,
                last_probe: None,
            })
        })
        .collect();
    out.sort_by(|a, b| a.target.key.cmp(&b.target.key));
    HealthSnapshot {
        taken_at: now,
        targets: out,
    }
}

/// A weight report as stored in a [`HealthReport`].
pub fn weight_to_text(w: WeightReport) -> String {
    match w {
        WeightReport::NotWeighted => "not_weighted".into(),
        WeightReport::Missing => "missing".into(),
        WeightReport::Invalid => "invalid".into(),
        WeightReport::Weight(n) => n.to_string(),
    }
}

/// The weight of a [`HealthReport`] (anything unreadable counts as `invalid`).
pub fn weight_from_text(s: &str) -> WeightReport {
    match s {
        "not_weighted" => WeightReport::NotWeighted,
        "missing" => WeightReport::Missing,
        _ => s
            .parse::<u16>()
            .ok()
            .filter(|n| *n <= 1000)
            .map_or(WeightReport::Invalid, WeightReport::Weight),
    }
}

/// The fleet's decision on one target from its probers' reports, in host-name order (SPEC
/// R11.2): healthy when any prober finds it healthy, with the weight of the first such
/// report; unhealthy when every report says so; None without a report. "Any" rather than
/// "all" so that one prober that cannot reach a backend (its own path is broken) does not
/// take a healthy backend out of every host's tables.
pub fn merge_reports<'a>(
    reports: impl IntoIterator<Item = &'a HealthReport>,
) -> Option<(Health, WeightReport)> {
    let mut decided = None;
    for r in reports {
        if r.healthy {
            return Some((Health::Healthy, weight_from_text(&r.weight)));
        }
        decided.get_or_insert((Health::Unhealthy, weight_from_text(&r.weight)));
    }
    decided
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(healthy: bool, weight: &str) -> HealthReport {
        HealthReport {
            healthy,
            weight: weight.into(),
            updated_unix_ms: 0,
        }
    }

    #[test]
    fn merged_health_is_healthy_when_any_prober_says_so() {
        assert_eq!(merge_reports(&[]), None);
        let down = report(false, "not_weighted");
        let up = report(true, "7");
        assert_eq!(
            merge_reports([&down, &down]),
            Some((Health::Unhealthy, WeightReport::NotWeighted))
        );
        assert_eq!(
            merge_reports([&down, &up]),
            Some((Health::Healthy, WeightReport::Weight(7)))
        );
        for (text, w) in [
            ("not_weighted", WeightReport::NotWeighted),
            ("missing", WeightReport::Missing),
            ("invalid", WeightReport::Invalid),
            ("0", WeightReport::Weight(0)),
            ("1000", WeightReport::Weight(1000)),
        ] {
            assert_eq!(weight_from_text(text), w);
            assert_eq!(weight_to_text(w), text);
        }
        assert_eq!(weight_from_text("1001"), WeightReport::Invalid);
        assert_eq!(weight_from_text("-1"), WeightReport::Invalid);
    }

    fn targets(n: u8) -> Vec<HealthTarget> {
        (1..=n)
            .map(|i| HealthTarget::new("web", format!("b{i}"), [10, 0, 0, i].into()))
            .collect()
    }

    fn view(me: &str, live: &[&str], n: u8) -> SharedHealth {
        let v = SharedHealth::new(me, 2);
        v.reset(live.iter().map(|h| h.to_string()), Vec::new());
        v.set_targets(targets(n));
        v
    }

    fn assigned(v: &SharedHealth) -> BTreeSet<TargetKey> {
        lock(&v.state).assigned.clone()
    }

    #[test]
    fn every_target_has_two_probers_among_the_live_hosts() {
        let live = ["h1", "h2", "h3"];
        let views: Vec<SharedHealth> = live.iter().map(|h| view(h, &live, 30)).collect();
        for t in targets(30) {
            let probers = views
                .iter()
                .filter(|v| assigned(v).contains(&t.key))
                .count();
            assert_eq!(probers, 2, "{}", t.key);
        }
        // A host that is not live (not registered) probes nothing.
        assert!(assigned(&view("h4", &live, 30)).is_empty());
        // h1 goes: the survivors probe everything, each change reported once.
        for v in &views[1..] {
            v.host("h1", false);
            assert_eq!(v.reassign().map(|a| a.len()), Some(30));
            assert_eq!(v.reassign(), None);
        }
    }

    fn reported(healthy: bool) -> Option<HealthReport> {
        Some(HealthReport {
            healthy,
            weight: "not_weighted".into(),
            updated_unix_ms: 0,
        })
    }

    #[test]
    fn decisions_merge_any_healthy_and_outlive_their_reports() {
        let v = view("h1", &["h1", "h2", "h3"], 2);
        let b1 = TargetKey::new("web", "b1");
        assert!(v.remerge().is_none(), "no report: nothing decided");
        v.report(b1.clone(), "h2", reported(true));
        v.report(b1.clone(), "h3", reported(false));
        let (changes, snap) = v.remerge().expect("b1 decided");
        assert_eq!(changes.len(), 1);
        assert_eq!(
            (changes[0].previous, changes[0].health),
            (Health::Unknown, Health::Healthy)
        );
        assert_eq!(snap.get(&b1).map(|t| t.health), Some(Health::Healthy));
        // b2 undecided: left out (the controller's assumption applies).
        assert!(snap.get(&TargetKey::new("web", "b2")).is_none());
        v.report(b1.clone(), "h2", reported(false));
        let (changes, _) = v.remerge().expect("b1 down");
        assert_eq!(
            (changes[0].previous, changes[0].health),
            (Health::Healthy, Health::Unhealthy)
        );
        // Its probers' reports go (their leases expired): the decision stays until a new one.
        v.report(b1.clone(), "h2", None);
        v.report(b1.clone(), "h3", None);
        assert!(v.remerge().is_none());
        assert_eq!(
            v.snapshot_for(&targets(2)).get(&b1).map(|t| t.health),
            Some(Health::Unhealthy)
        );
    }

    #[test]
    fn own_reports_follow_the_checker_and_the_assignment() {
        let v = view("h1", &["h1"], 30);
        let status = |target: &HealthTarget, health| TargetStatus {
            target: target.clone(),
            probe: target.probe_key(),
            health,
            weight: WeightReport::NotWeighted,
            consecutive_passes: 0,
            consecutive_failures: 0,
            changed_at: None,
            last_probe: None,
        };
        let local = |health| HealthSnapshot {
            taken_at: Instant::now(),
            targets: targets(30).iter().map(|t| status(t, health)).collect(),
        };
        // Undecided: nothing written.
        assert_eq!(v.own_reports(&local(Health::Unknown)), (vec![], vec![]));
        // h1 alone probes all 30.
        let (puts, deletes) = v.own_reports(&local(Health::Healthy));
        assert_eq!(puts.len(), 30);
        assert!(puts.iter().all(|(_, r)| r.healthy) && deletes.is_empty());
        for (k, r) in puts {
            v.report(k, "h1", Some(r));
        }
        // Written already: nothing again.
        assert_eq!(v.own_reports(&local(Health::Healthy)), (vec![], vec![]));
        // Ten hosts join: h1 keeps about 2/11 of the targets and deletes its reports of the
        // others.
        for i in 1..=10 {
            v.host(&format!("x{i}"), true);
        }
        v.reassign();
        let kept = assigned(&v);
        assert!(!kept.is_empty() && kept.len() < 15, "{kept:?}");
        let (puts, deletes) = v.own_reports(&local(Health::Healthy));
        assert!(puts.is_empty());
        // (In key order: b10 before b2.)
        let expected: BTreeSet<TargetKey> = targets(30)
            .into_iter()
            .map(|t| t.key)
            .filter(|k| !kept.contains(k))
            .collect();
        assert_eq!(deletes, expected.into_iter().collect::<Vec<_>>());
    }
}
