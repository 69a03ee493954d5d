//! Benchmarks of the service LB policy at run time (SPEC R6): figures, no
//! assertions. Everything runs the real slow path (`Engine`, its policy refresh, the table
//! loader) on the in-process simulated NIC (`ModelHandle`), with real frames through it.
//!
//! - **crossing**: capacity crossing → new weights active. A backend service whose NIC's
//!   zone holds 100 connections; 90 are open. A burst of 30 SYNs takes it past its capacity
//!   (the clock starts at the SYN of the 101st connection), then 30 FINs bring it back (the
//!   clock starts at the FIN that leaves 100). The figure is the time until the device's
//!   serving slice shows the new weights (read from the device, polled every 0.2 ms), over many
//!   crossings, each started at a random phase of the refresh. Target: p99 ≤ 1 s.
//! - **steady**: weight changes per minute under a steady load, after settling (10 minutes). Connections
//!   arrive at random (Poisson) and live an exponential time; the refresh runs on a virtual
//!   clock (`Engine::refresh_policy_at`), so 30 minutes of policy time take seconds. Once the
//!   live count has settled around its mean, a change is only the deadband being crossed by
//!   the load's own noise. Target: 0 after settling. Also without the deadband, for scale.
//! - **recompute**: one policy refresh for 1,000 groups and 65,536 backends (100 backend
//!   services × 10 groups, `u280` profile: 65,536 backends, 16 Mi Maglev slots, each service a
//!   65,537-slot slice): counting (the kept open counts of 65,536 (rule, backend) pairs into
//!   the policy's live load; and for scale the scan of a full 4 Mi-entry connection table it
//!   replaces), then `Compiled::rebalance`: deciding every service, and refilling the slices
//!   of the services whose weights moved (none, one, all). Target ≤ 50 ms.
//!
//! Run: `cargo bench -p nlbd --bench policy -- [crossing|steady|recompute]
//! [--crossings N] [--refresh-ms MS] [--minutes N]` (`NLB_BENCH_QUICK=1` for a short run).

use etherparse::PacketBuilder;
use flowtable_compiler::{
    compile, CompileOptions, Config, HealthState, LiveLoad, DEFAULT_REFILL_BUDGET,
};
use nlb_config::parse_config;
use nlb_driver::conntrack::{Conntrack, PairCounts};
use nlb_driver::device::Device;
use nlb_driver::discover;
use nlb_driver::model::{lock, ModelHandle, SharedModel};
use nlb_hw::blocks::ctrl;
use nlb_hw::layouts::CtEntry;
use nlb_hw::Profile;
use nlbd::engine::{Command, Engine, EngineOptions};
use nlbd::health::HealthSnapshot;
use nlbd::policy::{ServiceIndex, DEFAULT_DEADBAND};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

struct Args {
    what: Vec<String>,
    crossings: usize,
    refresh_ms: u64,
    minutes: u64,
    /// Mean live connections of the steady loads.
    live: Vec<u64>,
}

fn parse_args() -> Args {
    let quick = std::env::var("NLB_BENCH_QUICK").is_ok();
    let mut a = Args {
        what: Vec::new(),
        crossings: if quick { 20 } else { 200 },
        refresh_ms: 250,
        minutes: if quick { 10 } else { 30 },
        live: vec![500, 5000],
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<u64>().ok());
        match arg.as_str() {
            "--crossings" => a.crossings = num().map_or(a.crossings, |n| n as usize),
            "--refresh-ms" => a.refresh_ms = num().unwrap_or(a.refresh_ms),
            "--minutes" => a.minutes = num().unwrap_or(a.minutes),
            "--live" => a.live = num().map_or(a.live, |n| vec![n]),
            "crossing" | "steady" | "recompute" => a.what.push(arg),
            _ => {}
        }
    }
    if a.what.is_empty() {
        a.what = vec!["crossing".into(), "steady".into(), "recompute".into()];
    }
    a
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// xorshift64*: the benchmarks' random numbers, seeded (repeatable runs).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with mean `mean`.
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

fn snapshot() -> HealthSnapshot {
    HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    }
}

/// A backend service on 203.0.113.10:80: group `near` in the NIC's zone and `far` in the next,
/// `per_group` instances each taking `per_instance` connections; `WATERFALL_BY_ZONE`; an idle
/// timeout of 16 h (the benchmarks' connections carry no traffic, and ageing runs on the wall
/// clock).
fn two_zones(per_group: usize, per_instance: u64) -> Config {
    let mut y = String::from(
        "nic: {region: r1, zone: r1-a}\n\
         forwardingRules:\n  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}\n\
         serviceLbPolicies:\n  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}\n\
         regionBackendServices:\n  - name: web\n    region: r1\n    serviceLbPolicy: zonal\n    connectionTrackingPolicy: {idleTimeoutSec: 57600}\n    backends:\n",
    );
    for g in ["near", "far"] {
        let _ = writeln!(
            y,
            "      - {{group: {g}, maxConnectionsPerInstance: {per_instance}}}"
        );
    }
    y.push_str("instanceGroups:\n");
    for (g, zone) in [("near", "r1-a"), ("far", "r1-b")] {
        let names: Vec<String> = (0..per_group).map(|i| format!("{g}{i}")).collect();
        let _ = writeln!(
            y,
            "  - {{name: {g}, zone: {zone}, instances: [{}]}}",
            names.join(", ")
        );
    }
    y.push_str("instances:\n");
    for (k, (g, zone)) in [("near", "r1-a"), ("far", "r1-b")].iter().enumerate() {
        for i in 0..per_group {
            let _ = writeln!(
                y,
                "  - {{name: {g}{i}, ip: 192.0.{k}.{}, zone: {zone}, mac: '02:00:00:00:{k:02x}:{:02x}'}}",
                i + 1,
                i + 1
            );
        }
    }
    let (c, d) = parse_config("bench.yaml", &y);
    assert!(d.is_empty(), "{d}");
    c
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tcp {
    Syn,
    /// An ACK of an established flow (keeps its entry from ageing out).
    Ack,
    /// A FIN with its ACK: the NIC marks the flow closed (a teardown event).
    Fin,
}

fn frame(sport: u16, client: u8, kind: Tcp) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 51, 100, client], [203, 0, 113, 10], 64)
        .tcp(sport, 80, 1, 64000);
    let b = match kind {
        Tcp::Syn => b.syn(),
        Tcp::Ack => b.ack(1),
        Tcp::Fin => b.ack(1).fin(),
    };
    let mut f = Vec::new();
    b.write(&mut f, &[]).expect("frame");
    f
}

/// Fraction of `web`'s serving slice that names a `near` backend (ids `near`), as the device
/// serves it.
fn near_share(handle: &mut ModelHandle, shared: &SharedModel, near: &[u16]) -> f64 {
    let Ok(word) = handle.read32(ctrl::ACTIVE_BANK) else {
        return f64::NAN;
    };
    let bank = u8::from(ctrl::ActiveBank::from_word(word).bank);
    let dev = lock(shared);
    let t = dev.bank(bank);
    // `web` is the only pool: id 0; its primary slice serves (no failover backends).
    let p = t.pools[0];
    let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
    if m == 0 {
        return f64::NAN;
    }
    let hits = t.maglev[b..b + m]
        .iter()
        .filter(|s| near.contains(&s.backend))
        .count();
    hits as f64 / m as f64
}

/// Polls until `pred(near share)`; the time it became true.
fn wait_share(
    handle: &mut ModelHandle,
    shared: &SharedModel,
    near: &[u16],
    pred: impl Fn(f64) -> bool,
) -> Option<Instant> {
    let give_up = Instant::now() + Duration::from_secs(10);
    while Instant::now() < give_up {
        if pred(near_share(handle, shared, near)) {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

fn crossing(args: &Args) {
    let refresh = Duration::from_millis(args.refresh_ms);
    let handle = ModelHandle::new(Profile::by_name("sim").expect("sim profile"));
    let shared = handle.shared();
    let mut probe = handle.clone();
    let options = EngineOptions {
        policy_refresh: refresh,
        ..EngineOptions::default()
    };
    // 4 + 4 instances of 25 connections: the NIC's zone holds 100.
    let config = two_zones(4, 25);
    // A fresh device gives the ids a fresh compile gives.
    let symbols = compile(&config, &HealthState::new(), &CompileOptions::default())
        .expect("compiles")
        .symbols;
    let near: Vec<u16> = (0..symbols.backends.len() as u16)
        .filter(|&b| symbols.backend(b).is_some_and(|n| n.starts_with("near")))
        .collect();
    let (engine, _) =
        Engine::start(Box::new(handle), config, &snapshot(), options).expect("engine");
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || engine.run(rx));
    let mut out = vec![0u8; 16384];
    let mut send = |f: &[u8]| {
        lock(&shared).receive(f, &mut out).expect("receive");
    };
    // 90 connections open for good (client .1), in bursts the learn queue (64) holds.
    for chunk in 0..3 {
        for p in 0..30 {
            send(&frame(10_000 + chunk * 30 + p, 1, Tcp::Syn));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut up, mut down) = (Vec::new(), Vec::new());
    let mut missed = 0;
    for c in 0..args.crossings {
        // The 90 carry traffic (no idle timeout takes them), then a random phase of the
        // refresh period.
        for p in 0..90 {
            send(&frame(10_000 + p, 1, Tcp::Ack));
        }
        std::thread::sleep(refresh.mul_f64(rng.unit()) + Duration::from_millis(1));
        let ports: Vec<u16> = (0..30)
            .map(|i| 20_000 + ((c * 30 + i) % 40_000) as u16)
            .collect();
        // 10 more: 100, at capacity (not past it); the 11th crosses.
        for &p in &ports[..10] {
            send(&frame(p, 2, Tcp::Syn));
        }
        let t0 = Instant::now();
        for &p in &ports[10..] {
            send(&frame(p, 2, Tcp::Syn));
        }
        // 120 live: near gets 100/120 of new connections (R6 fill rule), far the rest.
        match wait_share(&mut probe, &shared, &near, |s| s < 0.95) {
            Some(t1) => up.push(t1 - t0),
            None => missed += 1,
        }
        std::thread::sleep(refresh.mul_f64(rng.unit()) + Duration::from_millis(1));
        // 19 FINs leave 101; the 20th leaves 100: back within capacity.
        for &p in &ports[..19] {
            send(&frame(p, 2, Tcp::Fin));
        }
        let t0 = Instant::now();
        for &p in &ports[19..] {
            send(&frame(p, 2, Tcp::Fin));
        }
        match wait_share(&mut probe, &shared, &near, |s| s == 1.0) {
            Some(t1) => down.push(t1 - t0),
            None => missed += 1,
        }
    }
    let _ = tx.send(Command::Shutdown);
    let status = thread.join().expect("engine thread");
    let mut all: Vec<Duration> = up.iter().chain(&down).copied().collect();
    up.sort();
    down.sort();
    all.sort();
    let line = |name: &str, v: &[Duration]| {
        println!(
            "crossing → new weights active, {name:<4} (refresh {} ms): p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} crossings",
            args.refresh_ms,
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.9)),
            ms(percentile(v, 0.99)),
            ms(percentile(v, 1.0)),
            v.len()
        );
    };
    line("up", &up);
    line("down", &down);
    line("all", &all);
    let p = &status.policy;
    println!(
        "  engine: {} refreshes, {} weight changes loaded, refresh mean {:.3} ms, max {:.3} ms; {} crossings not seen within 10 s",
        p.refreshes,
        p.weight_changes,
        ms(p.refresh_duration.sum) / p.refresh_duration.count.max(1) as f64,
        ms(p.refresh_duration_max),
        missed
    );
}

/// Weight changes per minute of policy time under Poisson arrivals with exponential
/// lifetimes of 100 s, `mean_live` connections on average, each zone's capacity 80 % of that;
/// the deadband of `deadband`.
fn steady_run(args: &Args, mean_live: u64, deadband: f64) -> (Vec<u64>, u64) {
    // u280: a connection table that holds every connection of the run (closed entries age
    // by the wall clock, which barely moves here).
    let handle = ModelHandle::new(Profile::by_name("u280").expect("u280 profile"));
    let shared = handle.shared();
    let options = EngineOptions {
        // The bench refreshes on its own clock.
        policy_refresh: Duration::from_secs(24 * 3600),
        policy_deadband: deadband,
        ..EngineOptions::default()
    };
    // 8 + 8 instances: each zone holds 80 % of the mean (near gets 80 % of new connections).
    let per_instance = (mean_live / 10).max(1);
    let (mut engine, _) = Engine::start(
        Box::new(handle),
        two_zones(8, per_instance),
        &snapshot(),
        options,
    )
    .expect("engine");
    let mut out = vec![0u8; 16384];
    let lifetime = 100.0;
    let rate = mean_live as f64 / lifetime;
    let tick = 0.25;
    let mut rng = Rng(0x0bad_cafe_f00d_0002);
    let mut next_arrival = rng.exp(1.0 / rate);
    // (close time, client, port)
    let mut open: Vec<(f64, u8, u16)> = Vec::new();
    let mut serial: u32 = 0;
    let mut per_minute = vec![0u64; args.minutes as usize];
    let mut t = 0.0;
    let mut refreshes = 0;
    while t < (args.minutes * 60) as f64 {
        t += tick;
        let mut events = 0u64;
        while next_arrival <= t {
            let (client, port) = ((serial / 60_000) as u8 + 1, (serial % 60_000) as u16 + 1024);
            serial += 1;
            lock(&shared)
                .receive(&frame(port, client, Tcp::Syn), &mut out)
                .expect("receive");
            open.push((next_arrival + rng.exp(lifetime), client, port));
            next_arrival += rng.exp(1.0 / rate);
            events += 1;
        }
        let mut i = 0;
        while i < open.len() {
            if open[i].0 <= t {
                let (_, client, port) = open.swap_remove(i);
                lock(&shared)
                    .receive(&frame(port, client, Tcp::Fin), &mut out)
                    .expect("receive");
                events += 1;
            } else {
                i += 1;
            }
        }
        let s = engine.connections().stats();
        let target = s.learn_events + s.teardown_events + events;
        loop {
            let s = engine.connections().stats();
            if s.learn_events + s.teardown_events >= target {
                break;
            }
            engine.step();
        }
        if let Some(r) = engine.refresh_policy_at(t) {
            refreshes += 1;
            if !r.pools.is_empty() {
                let minute = ((t / 60.0) as usize).min(per_minute.len() - 1);
                per_minute[minute] += 1;
            }
        }
    }
    (per_minute, refreshes)
}

fn steady(args: &Args) {
    // Lifetimes of 100 s: the live count reaches its mean within 1 - e^-6 after 10 minutes.
    let settle = 10.min(args.minutes as usize / 2);
    let mut runs: Vec<(u64, f64)> = args.live.iter().map(|&n| (n, DEFAULT_DEADBAND)).collect();
    // For scale: without the deadband, at the smallest load.
    runs.push((args.live.iter().copied().min().unwrap_or(500), 0.0));
    for (mean_live, deadband) in runs {
        let started = Instant::now();
        let (per_minute, refreshes) = steady_run(args, mean_live, deadband);
        let after: u64 = per_minute[settle..].iter().sum();
        let minutes = (per_minute.len() - settle).max(1);
        println!(
            "steady load ({mean_live} live on average: {:.0}/s × 100 s; capacity {} + {}), deadband {:.0} %: {:.2} weight changes per minute after {settle} minutes of settling ({} in {} minutes; per minute from the start: {:?}); {} refreshes every 0.25 s of policy time, {:.1} s of wall time",
            mean_live as f64 / 100.0,
            8 * (mean_live / 10).max(1),
            8 * (mean_live / 10).max(1),
            deadband * 100.0,
            after as f64 / minutes as f64,
            after,
            minutes,
            per_minute,
            refreshes,
            started.elapsed().as_secs_f64()
        );
    }
}

/// 100 backend services × 10 groups (5 zones in r1, 5 in r2) over 65,536 instances.
fn big_config() -> Config {
    let (services, groups, backends) = (100usize, 10usize, 65_536usize);
    let mut y = String::with_capacity(12 << 20);
    y.push_str("nic: {region: r1, zone: r1-a, regionOrder: [r2]}\nforwardingRules:\n");
    for s in 0..services {
        let _ = writeln!(
            y,
            "  - {{name: rule{s}, IPAddress: 198.18.{}.{}, IPProtocol: TCP, portRange: '80', backendService: svc{s}}}",
            s / 250,
            s % 250 + 1
        );
    }
    y.push_str(
        "serviceLbPolicies:\n  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}\nbackendServices:\n",
    );
    for s in 0..services {
        let _ = writeln!(
            y,
            "  - name: svc{s}\n    serviceLbPolicy: zonal\n    backends:"
        );
        for g in 0..groups {
            let _ = writeln!(
                y,
                "      - {{group: g{s}x{g}, maxConnectionsPerInstance: 100}}"
            );
        }
    }
    let zone = |g: usize| format!("r{}-{}", g / 5 + 1, (b'a' + (g % 5) as u8) as char);
    // Instance i belongs to group (i mod 1000): service s = group / 10.
    let total_groups = services * groups;
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); total_groups];
    for i in 0..backends {
        members[i % total_groups].push(i);
    }
    y.push_str("instanceGroups:\n");
    for (k, m) in members.iter().enumerate() {
        let names: Vec<String> = m.iter().map(|i| format!("i{i}")).collect();
        let _ = writeln!(
            y,
            "  - {{name: g{}x{}, zone: {}, instances: [{}]}}",
            k / groups,
            k % groups,
            zone(k % groups),
            names.join(", ")
        );
    }
    y.push_str("instances:\n");
    for i in 0..backends {
        let _ = writeln!(
            y,
            "  - {{name: i{i}, ip: 10.{}.{}.{}, zone: {}, mac: '02:00:00:{:02x}:{:02x}:{:02x}'}}",
            i >> 16,
            (i >> 8) & 255,
            i & 255,
            zone((i % total_groups) % groups),
            i >> 16,
            (i >> 8) & 255,
            i & 255
        );
    }
    let (c, d) = parse_config("big.yaml", &y);
    assert!(d.is_empty(), "{d}");
    c
}

fn recompute(_args: &Args) {
    let profile = Profile::by_name("u280").expect("u280 profile");
    let t = Instant::now();
    let config = big_config();
    let parsed = t.elapsed();
    let t = Instant::now();
    let health = HealthState::new();
    let mut c = compile(&config, &health, &CompileOptions { profile }).expect("compiles");
    println!(
        "recompute: config of 100 services, 1,000 groups, 65,536 backends parsed in {:.0} ms, compiled for u280 in {:.0} ms",
        ms(parsed),
        ms(t.elapsed())
    );
    let services = c.service_pools();
    let groups: usize = services
        .iter()
        .map(|s| c.service_groups(s).map_or(0, |g| g.len()))
        .sum();
    let endpoints: usize = services
        .iter()
        .flat_map(|s| c.service_groups(s).unwrap_or_default())
        .map(|g| g.members.len())
        .sum();

    // Open counts as the connection table keeps them: every backend has connections. A
    // service's near zone (its groups 0 in r1-a) holds `near` per instance.
    let index = ServiceIndex::build(&c);
    let backend_id: HashMap<&str, u16> = c
        .symbols
        .backends
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i as u16))
        .collect();
    let open_for = |near: u32, other: u32| -> PairCounts {
        let mut open = PairCounts::default();
        for name in &services {
            // Service svcN is the target of rule ruleN.
            let rule_name = name.replacen("svc", "rule", 1);
            let rule = c
                .symbols
                .rules
                .iter()
                .position(|r| *r == rule_name)
                .expect("rule") as u16;
            for g in c.service_groups(name).unwrap_or_default() {
                let n = if g.zone == "r1-a" { near } else { other };
                for m in &g.members {
                    let b = backend_id[m.as_str()];
                    if n > 0 {
                        open.insert((rule, b), n);
                    }
                }
            }
        }
        open
    };
    let quiet = open_for(50, 1); // near half full: all new connections stay near
    let busy = open_for(300, 1); // near at 300 %: every service spills
    let runs = 20;
    let mut count = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let (live, n) = index.live_load(&busy, &PairCounts::default());
        count.push(t.elapsed());
        std::hint::black_box((live, n));
    }
    count.sort();
    println!(
        "  counting: {} open (rule, backend) pairs → live load per service and backend: median {:.2} ms",
        busy.len(),
        ms(percentile(&count, 0.5))
    );
    let (quiet_live, _) = index.live_load(&quiet, &PairCounts::default());
    let (busy_live, _) = index.live_load(&busy, &PairCounts::default());
    // The policy clock, 250 ms per refresh.
    let now = std::cell::Cell::new(0.0);
    let tick = || {
        now.set(now.get() + 0.25);
        now.get()
    };
    let rebalance = |c: &mut flowtable_compiler::Compiled, live: &LiveLoad| {
        let at = tick();
        let t = Instant::now();
        let r = c
            .rebalance(live, at, &health, DEFAULT_DEADBAND)
            .expect("rebalance");
        (t.elapsed(), r.pools.len(), r.changed.len())
    };
    // Steady: nothing moves (decide every service; no slice rewritten).
    rebalance(&mut c, &quiet_live);
    let mut steady = Vec::new();
    for _ in 0..runs {
        let (d, pools, _) = rebalance(&mut c, &quiet_live);
        assert_eq!(pools, 0);
        steady.push(d);
    }
    steady.sort();
    // Every service crosses its near zone's capacity, and back: every slice rewritten.
    let mut all = Vec::new();
    let mut entries = 0;
    for k in 0..runs {
        let live = if k % 2 == 0 { &busy_live } else { &quiet_live };
        let (d, pools, changed) = rebalance(&mut c, live);
        assert_eq!(pools, services.len());
        entries = changed;
        all.push(d);
    }
    all.sort();
    // The same with nlbd's refill budget: every refresh stays within it, and the services
    // that did not fit follow at the next refreshes (250 ms apart in nlbd).
    let mut budgeted = Vec::new();
    let mut refreshes_to_finish = Vec::new();
    for k in 0..runs {
        let live = if k % 2 == 0 { &busy_live } else { &quiet_live };
        let mut n = 0;
        loop {
            let at = tick();
            let t = Instant::now();
            let r = c
                .rebalance_within(live, at, &health, DEFAULT_DEADBAND, DEFAULT_REFILL_BUDGET)
                .expect("rebalance");
            budgeted.push(t.elapsed());
            n += 1;
            if r.deferred.is_empty() {
                break;
            }
        }
        refreshes_to_finish.push(n);
    }
    budgeted.sort();
    // One service crosses (the others steady).
    let mut one_live = quiet_live.clone();
    let first = &services[0];
    for g in c.service_groups(first).unwrap_or_default() {
        for m in &g.members {
            let extra = if g.zone == "r1-a" { 250 } else { 0 };
            one_live.add(first, m, extra);
        }
    }
    let mut one = Vec::new();
    for k in 0..runs {
        let live = if k % 2 == 0 { &one_live } else { &quiet_live };
        let (d, pools, _) = rebalance(&mut c, live);
        assert_eq!(pools, 1);
        one.push(d);
    }
    one.sort();
    let show = |v: &[Duration]| {
        format!(
            "median {:.1} ms, max {:.1} ms",
            ms(percentile(v, 0.5)),
            ms(percentile(v, 1.0))
        )
    };
    println!(
        "  rebalance ({} services, {groups} groups, {endpoints} endpoints, {runs} runs each): nothing moves (decide only) {}; one service moves {}; every service moves ({} table entries rewritten) {}",
        services.len(),
        show(&steady),
        show(&one),
        entries,
        show(&all)
    );
    println!(
        "  every service moves, refill budget {} slots per refresh: each refresh {}; {} refreshes to apply all (max)",
        DEFAULT_REFILL_BUDGET,
        show(&budgeted),
        refreshes_to_finish.iter().max().copied().unwrap_or(0)
    );

    // What the kept counts save: a scan of a full connection table (u280: 4 Mi entries, 3 Mi
    // open over the 65,536 backends), read back by the driver as nlbd's does on attach.
    let rule_of: HashMap<u16, u16> = busy.keys().map(|&(r, b)| (b, r)).collect();
    let mut dev = firmware_sim::ModelDevice::new(profile);
    let entries_total = profile.ct_entries();
    {
        let ct = dev.conntrack_mut();
        for i in 0..entries_total {
            // Three entries of four in use, every backend with some.
            if (i / 65_536) % 4 == 3 {
                continue;
            }
            let e = CtEntry {
                valid: true,
                protocol: 6,
                src_port: (i % 60_000) as u16 + 1024,
                dst_port: 80,
                src_addr: u128::from(i),
                dst_addr: 1,
                backend: (i % 65_536) as u16,
                // The rule of the backend's service.
                rule: rule_of[&((i % 65_536) as u16)],
                flags: 0,
                timestamp: 0,
            };
            ct.write(i, e).expect("entry");
        }
    }
    let mut handle = ModelHandle::from_device(dev);
    let info = discover(&mut handle).expect("discover");
    let t = Instant::now();
    let ct = Conntrack::attach(&mut handle, &info, 0).expect("attach");
    let attach = t.elapsed();
    let mut scans = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(ct.open_counts_by_scan());
        scans.push(t.elapsed());
    }
    scans.sort();
    let mut kept = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(index.live_load(ct.open_counts(), &PairCounts::default()));
        kept.push(t.elapsed());
    }
    kept.sort();
    println!(
        "  a full connection table ({} entries, {} open, {} (rule, backend) pairs; read back in {:.1} s): a scan for the counts {:.1} ms (median); the kept counts into the live load {:.1} ms",
        entries_total,
        ct.valid_count(),
        ct.open_counts().len(),
        attach.as_secs_f64(),
        ms(percentile(&scans, 0.5)),
        ms(percentile(&kept, 0.5))
    );
}

fn main() {
    let args = parse_args();
    for w in args.what.clone() {
        match w.as_str() {
            "crossing" => crossing(&args),
            "steady" => steady(&args),
            "recompute" => recompute(&args),
            _ => {}
        }
    }
}
