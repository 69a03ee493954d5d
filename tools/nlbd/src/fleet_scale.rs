//! A virtual-time simulation of shared health at fleet scale (SPEC R11.2; docs/fleet.md,
//! "Scale"): H hosts, B backends, k probers per backend, no sockets and no etcd. What it
//! takes from the real code: who probes what ([`fleet::probers`] over
//! [`fleet::rendezvous_hash`]es of the real host names and probe strings), the threshold
//! rule of the health checker (a decision after `threshold` consecutive equal results), the
//! reports' lifecycle of `nlbd --etcd` (a put on each prober decision, deletes with a lease,
//! a host record rewritten when its tables change) and the merge rule (healthy when any
//! report is). What it models: probes at a random phase of each interval observing the
//! backend's true state, backends flapping as a Poisson process, lease expiry `ttl` after the
//! last keep-alive (every ttl/3), and watch delivery taking no time.
//!
//! It measures probe load per host, the time from a backend's change to the fleet's decision,
//! convergence after a host loss (its probes reported again by new probers), the etcd write
//! rate and the watch events delivered, and the wall-clock cost of one host's re-ranking.

use nlb_control::fleet;
use nlb_control::splitmix::SplitMix64;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// The simulation's parameters.
#[derive(Debug, Clone)]
pub struct ScaleParams {
    /// NLB hosts.
    pub hosts: usize,
    /// Backends (one health-check target each).
    pub backends: usize,
    /// Probers per backend (`nlbd --probers`).
    pub probers: usize,
    /// Health-check interval (s).
    pub interval: f64,
    /// Healthy and unhealthy thresholds (probes).
    pub threshold: u32,
    /// Lease TTL (s; keep-alive every TTL/3).
    pub lease_ttl: f64,
    /// Each backend changes state this often on average (changes per backend per hour).
    pub flaps_per_hour: f64,
    /// Simulated time (s).
    pub duration: f64,
    /// Seed of the pseudo-random draws.
    pub seed: u64,
}

impl Default for ScaleParams {
    fn default() -> Self {
        ScaleParams {
            hosts: 100,
            backends: 100_000,
            probers: fleet::DEFAULT_PROBERS,
            interval: 5.0,
            threshold: 2,
            lease_ttl: 5.0,
            flaps_per_hour: 1.0,
            duration: 600.0,
            seed: 18,
        }
    }
}

/// What it measured.
#[derive(Debug, Clone)]
pub struct ScaleReport {
    /// Probes per second per host: fewest, mean, most.
    pub probes_per_host_per_s: (f64, f64, f64),
    /// Probes per second per host if every host probed every backend.
    pub probes_per_host_per_s_unshared: f64,
    /// Backend state changes that lasted long enough to be decided.
    pub decided_changes: u64,
    /// From a backend's change to the fleet's decision (s): p50, p99, max.
    pub decision_delay: (f64, f64, f64),
    /// Report puts per second (steady state).
    pub report_writes_per_s: f64,
    /// Host-record puts per second (each fleet decision changes every host's tables, hence
    /// its digest; a host rewrites its record at most every 500 ms).
    pub record_writes_per_s: f64,
    /// Lease keep-alives per second (not written to etcd's log).
    pub keepalives_per_s: f64,
    /// Watch events delivered per second (every write to every host: each watches the prefix).
    pub watch_events_per_s: f64,
    /// Backends the lost host probed (all of which move).
    pub moved: usize,
    /// Backends whose probers changed other than by taking over the lost host's place (0 by
    /// rendezvous hashing).
    pub moved_elsewhere: usize,
    /// From the host's death to its lease expiring (s).
    pub lease_expiry: f64,
    /// From the host's death to the last moved backend reported by its new prober (s).
    pub convergence: f64,
    /// Backends left without any report at some point of the handover (0 with k ≥ 2).
    pub unreported: usize,
    /// Writes at the host loss: the lease's deletes, then the new probers' puts.
    pub loss_writes: usize,
    /// Watch events those writes deliver to the survivors.
    pub loss_watch_events: usize,
    /// Bytes of a configuration (YAML, as docs/config.md writes it) of one pool of all the
    /// backends: what `PREFIX config` holds, twice over with its ids (names by id) in JSON.
    pub config_bytes: usize,
    /// Wall-clock time for one host to re-rank every backend over the survivors (this
    /// machine, this build).
    pub rerank_wall: Duration,
}

/// Backend `i`'s address: 10.0.0.0/8 numbered from 10.0.0.0 (up to 2^24 backends).
fn backend_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0000 + i as u32)
}

/// The probe string of backend `i` (as `nlbd` hashes it: what goes on the wire).
pub fn probe_name(i: usize) -> String {
    let ip = backend_ip(i);
    format!("http://{ip}:80/healthz (Host: {ip})")
}

/// The first probe at or after `t` of a prober with phase `phase`.
fn next_probe(t: f64, phase: f64, interval: f64) -> f64 {
    let n = ((t - phase) / interval).ceil().max(0.0);
    phase + n * interval
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Runs the simulation; host 0 dies at half the duration.
pub fn simulate(p: &ScaleParams) -> ScaleReport {
    let mut rng = SplitMix64::from_state(p.seed);
    let hosts: Vec<(String, u64)> = (0..p.hosts)
        .map(|i| {
            let n = format!("nlb-{i:03}");
            let h = fleet::rendezvous_hash(&n);
            (n, h)
        })
        .collect();
    let survivors: Vec<(String, u64)> = hosts[1..].to_vec();
    let items: Vec<u64> = (0..p.backends)
        .map(|i| fleet::rendezvous_hash(&probe_name(i)))
        .collect();
    let a = assignment(p, &hosts, &survivors, &items);
    let rerank_start = Instant::now();
    let me = survivors[0].0.as_str();
    let mine = items
        .iter()
        .filter(|item| fleet::probers(&survivors, **item, p.probers).contains(&me))
        .count();
    let rerank_wall = rerank_start.elapsed();
    debug_assert!(mine > 0);
    let per_s = |n: usize| n as f64 / p.interval;
    let mean_load = a.load.iter().sum::<usize>() as f64 / p.hosts as f64;
    let probes_per_host_per_s = (
        per_s(*a.load.iter().min().unwrap_or(&0)),
        mean_load / p.interval,
        per_s(*a.load.iter().max().unwrap_or(&0)),
    );
    let s = steady_state(p, &mut rng);
    let record_writes = record_writes(p, &s.decision_times);
    let writes_per_s = (s.report_writes + record_writes) as f64 / p.duration;
    let (lease_expiry, convergence) = host_loss(p, &mut rng, a.moved.len());
    // The lease takes the host's record and its reports; the new probers put one report each.
    let loss_writes = 1 + 2 * a.moved.len();
    let delays = s.delays;
    ScaleReport {
        config_bytes: fleet_config(p).len(),
        probes_per_host_per_s,
        probes_per_host_per_s_unshared: p.backends as f64 / p.interval,
        decided_changes: delays.len() as u64,
        decision_delay: (
            percentile(&delays, 0.5),
            percentile(&delays, 0.99),
            delays.last().copied().unwrap_or(0.0),
        ),
        report_writes_per_s: s.report_writes as f64 / p.duration,
        record_writes_per_s: record_writes as f64 / p.duration,
        keepalives_per_s: p.hosts as f64 / (p.lease_ttl / 3.0),
        watch_events_per_s: writes_per_s * p.hosts as f64,
        moved: a.moved.len(),
        moved_elsewhere: a.moved_elsewhere,
        lease_expiry,
        convergence,
        unreported: a.unreported,
        loss_writes,
        loss_watch_events: loss_writes * (p.hosts - 1),
        rerank_wall,
    }
}

/// Who probes what, before and after host 0's loss.
struct Assignment {
    /// Backends each host probes before the loss.
    load: Vec<usize>,
    /// Backends host 0 probed.
    moved: Vec<usize>,
    /// Backends whose probers other than host 0 changed.
    moved_elsewhere: usize,
    /// Moved backends with no surviving prober's report until their new prober reports.
    unreported: usize,
}

fn assignment(
    p: &ScaleParams,
    hosts: &[(String, u64)],
    survivors: &[(String, u64)],
    items: &[u64],
) -> Assignment {
    let lost = hosts[0].0.clone();
    let mut load = vec![0usize; p.hosts];
    let index: std::collections::HashMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();
    let mut moved = Vec::new();
    let mut moved_elsewhere = 0;
    let mut unreported = 0;
    for (b, item) in items.iter().enumerate() {
        let before = fleet::probers(hosts, *item, p.probers);
        for h in &before {
            load[index[h]] += 1;
        }
        let after = fleet::probers(survivors, *item, p.probers);
        let kept = before
            .iter()
            .filter(|h| **h != lost)
            .all(|h| after.contains(h));
        if before.contains(&lost.as_str()) {
            moved.push(b);
            // Until its new prober reports, only the surviving probers' reports remain.
            if before.len() == 1 {
                unreported += 1;
            }
        }
        if !kept || (!before.contains(&lost.as_str()) && before != after) {
            moved_elsewhere += 1;
        }
    }
    Assignment {
        load,
        moved,
        moved_elsewhere,
        unreported,
    }
}

/// What the steady state's flaps cost and how fast the fleet decides them.
struct Steady {
    /// Delays from a change to the fleet's decision, ascending.
    delays: Vec<f64>,
    /// Reports the probers write.
    report_writes: u64,
    /// When the fleet decided, ascending.
    decision_times: Vec<f64>,
}

/// Steady state: each backend flaps; each of its probers (a random phase each) decides
/// `threshold` probes into a state that lasts that long; the fleet decides when the last
/// prober decides unhealthy (any-healthy merge) or the first decides healthy.
fn steady_state(p: &ScaleParams, rng: &mut SplitMix64) -> Steady {
    let mut delays = Vec::new();
    let mut report_writes = 0u64;
    let mut decision_times = Vec::new();
    let mean_up = 3600.0 / p.flaps_per_hour;
    for _ in 0..p.backends {
        let phases: Vec<f64> = (0..p.probers).map(|_| rng.unit() * p.interval).collect();
        let mut t = rng.exponential(mean_up);
        let mut healthy = true;
        while t < p.duration {
            let end = t + rng.exponential(mean_up);
            healthy = !healthy;
            // Each prober's decision: its `threshold`-th probe at or after t, if before end.
            let decided: Vec<f64> = phases
                .iter()
                .map(|ph| next_probe(t, *ph, p.interval) + f64::from(p.threshold - 1) * p.interval)
                .filter(|d| *d < end.min(p.duration))
                .collect();
            report_writes += decided.len() as u64;
            if decided.len() == p.probers {
                let fleet_at = if healthy {
                    decided.iter().copied().fold(f64::INFINITY, f64::min)
                } else {
                    decided.iter().copied().fold(0.0, f64::max)
                };
                delays.push(fleet_at - t);
                decision_times.push(fleet_at);
            } else if !decided.is_empty() && healthy {
                // A prober decided healthy: the fleet did, at the first one.
                let first = decided.iter().copied().fold(f64::INFINITY, f64::min);
                delays.push(first - t);
                decision_times.push(first);
            } else {
                // Too short to decide everywhere: the probers that decided flip back later
                // (counted in report_writes); the fleet's decision does not change.
            }
            t = end;
        }
    }
    delays.sort_by(f64::total_cmp);
    decision_times.sort_by(f64::total_cmp);
    Steady {
        delays,
        report_writes,
        decision_times,
    }
}

/// Host records: every fleet decision (at `decision_times`, ascending) reloads every host's
/// tables; a host rewrites its record at most once per 500 ms status tick.
fn record_writes(p: &ScaleParams, decision_times: &[f64]) -> u64 {
    let mut ticks = 0u64;
    let mut last_tick = -1i64;
    for d in decision_times {
        let tick = (d / 0.5) as i64;
        if tick != last_tick {
            ticks += 1;
            last_tick = tick;
        }
    }
    ticks * p.hosts as u64
}

/// The host loss: it dies at time 0 of its own timeline; its last keep-alive was up to ttl/3
/// earlier, so its lease expires ttl after that. Each of the `moved` backends' new prober
/// starts with its first probe at a random phase of the first interval and reports after
/// `threshold` probes; the other prober's report covers it meanwhile (k ≥ 2). Returns the
/// lease's expiry and when the last new prober reports.
fn host_loss(p: &ScaleParams, rng: &mut SplitMix64, moved: usize) -> (f64, f64) {
    let lease_expiry = p.lease_ttl - rng.unit() * p.lease_ttl / 3.0;
    let mut convergence: f64 = lease_expiry;
    for _ in 0..moved {
        let first = lease_expiry + rng.unit() * p.interval;
        convergence = convergence.max(first + f64::from(p.threshold - 1) * p.interval);
    }
    (lease_expiry, convergence)
}

/// The configuration of the simulated fleet: one rule, one target pool of every backend.
fn fleet_config(p: &ScaleParams) -> String {
    let mut config = String::from(
        "forwardingRules:\n  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}\n\
         httpHealthChecks:\n  - {name: hc, port: 80, requestPath: /healthz}\n\
         targetPools:\n  - {name: web, region: r, healthChecks: [hc], instances: [",
    );
    for i in 0..p.backends {
        config.push_str(&format!("{}b{i}", if i == 0 { "" } else { ", " }));
    }
    config.push_str("]}\ninstances:\n");
    for i in 0..p.backends {
        let ip = backend_ip(i);
        let [_, a, b, c] = ip.octets();
        config.push_str(&format!(
            "  - {{name: b{i}, ip: {ip}, zone: z, mac: '02:00:{a:02x}:{b:02x}:{c:02x}:01'}}\n"
        ));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures of docs/fleet.md ("Scale"): `cargo test -p nlbd --lib fleet_scale --
    /// --nocapture`.
    #[test]
    fn a_hundred_hosts_and_a_hundred_thousand_backends() {
        let p = ScaleParams::default();
        let r = simulate(&p);
        eprintln!("{p:?}\n{r:#?}");
        // Every backend has k probers: the mean load is k·B/H exactly, and rendezvous hashing
        // keeps every host within 10% of it (σ ≈ 1% at 2,000 per host).
        let fair = (p.probers * p.backends) as f64 / p.hosts as f64 / p.interval;
        assert!((r.probes_per_host_per_s.1 - fair).abs() < 1e-9);
        assert!(r.probes_per_host_per_s.0 > fair * 0.9, "{r:?}");
        assert!(r.probes_per_host_per_s.2 < fair * 1.1, "{r:?}");
        // A loss moves exactly the lost host's backends, nothing else, and none is left
        // without a report.
        assert_eq!(r.moved_elsewhere, 0);
        assert!((r.moved as f64 - fair * p.interval).abs() < fair * p.interval * 0.1);
        assert_eq!(r.unreported, 0);
        // Convergence: the lease, then at most `threshold` intervals.
        assert!(r.lease_expiry <= p.lease_ttl && r.lease_expiry >= p.lease_ttl * 2.0 / 3.0);
        assert!(r.convergence <= p.lease_ttl + f64::from(p.threshold) * p.interval);
        // A backend's change is decided within threshold intervals, after threshold - 1.
        let t = f64::from(p.threshold);
        assert!(
            r.decision_delay.0 >= (t - 1.0) * p.interval && r.decision_delay.2 <= t * p.interval
        );
        assert!(r.decided_changes > 0);
    }

    #[test]
    fn one_prober_leaves_the_lost_hosts_backends_unreported() {
        let p = ScaleParams {
            hosts: 10,
            backends: 1000,
            probers: 1,
            ..ScaleParams::default()
        };
        let r = simulate(&p);
        assert_eq!(r.unreported, r.moved);
        assert!(r.moved > 0);
    }
}
