//! Slow-path benchmarks (figures, no assertions), through the same `Engine` nlbd runs, on the
//! in-process simulated NIC (`ModelHandle`) and over the socket protocol (`SocketDevice` to a server
//! thread serving the same device, as nlbd talks to nlb-sim):
//!
//! - **learn to install**: a SYN goes through the NIC (a conntrack miss: Maglev, learn event
//!   on the queue); the engine polls the queue, pops the event and installs the connection.
//!   Latency of one event (the SYN's arrival → the entry written), and installs per second
//!   when the queue is kept full (bursts of one queue's worth), counting the engine's time.
//! - **deciding probe to table active**: a real `HealthChecker` (1 s interval, thresholds 1)
//!   probes real HTTP backends on loopback; one backend is stopped and started again and
//!   again; each decision goes from `HealthEvents` to the engine, which recompiles the pool and
//!   loads the delta. The figure is `decided_at` → flip read back (target ≤ 50 ms).
//!
//! Run: `cargo bench -p nlbd --bench slowpath -- [--flows N] [--decisions N]
//! [--members N]` (NLB_BENCH_QUICK=1 for a short run).

use etherparse::PacketBuilder;
use firmware_sim::ModelDevice;
use flowtable_compiler::Config;
use nlb_config::parse_config;
use nlb_driver::device::Device;
use nlb_driver::model::{lock, ModelHandle, SharedModel};
use nlb_driver::socket::{Server, ServerHandle, SocketDevice};
use nlb_hw::Profile;
use nlbd::engine::{Engine, EngineOptions};
use nlbd::health::{targets_from_config, CheckerOptions, HealthChecker, HealthSnapshot};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Args {
    flows: usize,
    decisions: usize,
    members: Vec<usize>,
}

fn parse_args() -> Args {
    let quick = std::env::var("NLB_BENCH_QUICK").is_ok();
    let mut a = Args {
        flows: if quick { 4_000 } else { 40_000 },
        decisions: if quick { 4 } else { 20 },
        members: if quick { vec![3] } else { vec![3, 200] },
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<usize>().ok());
        match arg.as_str() {
            "--flows" => a.flows = num().unwrap_or(a.flows),
            "--decisions" => a.decisions = num().unwrap_or(a.decisions),
            "--members" => a.members = num().map(|n| vec![n]).unwrap_or(a.members),
            _ => {}
        }
    }
    a
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A pool of `members` backends at 127.1.x.y:`port`, with an HTTP health check.
fn config(members: usize, port: u16) -> Config {
    let names: Vec<String> = (0..members).map(|i| format!("m{i:04}")).collect();
    let mut y = format!(
        "forwardingRules:\n  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}}\n\
         targetPools:\n  - {{name: web, region: r, instances: [{}], healthChecks: [hc]}}\ninstances:\n",
        names.join(", ")
    );
    for (i, n) in names.iter().enumerate() {
        let ip = backend_ip(i);
        y += &format!(
            "  - {{name: {n}, ip: {ip}, zone: z, mac: '02:00:00:00:{:02x}:{:02x}'}}\n",
            i / 256,
            i % 256
        );
    }
    y += &format!(
        "httpHealthChecks:\n  - {{name: hc, port: {port}, requestPath: /, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 1}}\n"
    );
    let (c, d) = parse_config("bench.yaml", &y);
    assert!(d.is_empty(), "{d}");
    c
}

fn backend_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// The device: in process, or the same device behind a socket server.
struct Nic {
    shared: SharedModel,
    _server: Option<ServerHandle>,
    device: Box<dyn Device>,
}

fn nic(over_socket: bool) -> Nic {
    let sim = ModelHandle::from_device(ModelDevice::new(
        Profile::by_name("sim").expect("sim profile"),
    ));
    let shared = sim.shared();
    if !over_socket {
        return Nic {
            shared,
            _server: None,
            device: Box::new(sim),
        };
    }
    let dir = std::env::temp_dir().join(format!("nlb-slowpath-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path: PathBuf = dir.join("nic.sock");
    let served = sim.clone();
    let server = Server::bind(
        &path,
        Arc::new(move || Box::new(served.clone()) as Box<dyn Device>),
    )
    .expect("server");
    let handle = server.spawn();
    let device = Box::new(SocketDevice::connect(&path).expect("connect"));
    Nic {
        shared,
        _server: Some(handle),
        device,
    }
}

fn syn(i: usize) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4(
            [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            [203, 0, 113, 80],
            64,
        )
        .tcp(1024 + (i % 60000) as u16, 80, 1, 64000)
        .syn()
        .write(&mut f, &[])
        .expect("frame");
    f
}

fn empty_snapshot() -> HealthSnapshot {
    HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    }
}

/// Learn events the engine has handled (installed, already present or bucket full).
fn handled(engine: &Engine) -> u64 {
    engine.connections().stats().learn_events
}

/// Steps until `target` learn events are handled; returns the engine time spent.
fn step_until(engine: &mut Engine, target: u64) -> Duration {
    let start = Instant::now();
    let give_up = start + Duration::from_secs(30);
    while handled(engine) < target && Instant::now() < give_up {
        engine.step();
    }
    start.elapsed()
}

fn learn_bench(over_socket: bool, flows: usize) {
    let name = if over_socket {
        "SocketDevice"
    } else {
        "ModelHandle"
    };
    let frames: Vec<Vec<u8>> = (0..flows).map(syn).collect();
    let mut out = vec![0u8; 16384];
    // Rounds of 8,000 flows on a fresh device: half the connection table (few buckets fill
    // up; those events are handled, not installed).
    let round = 8_000usize;
    let mut single = Vec::new();
    let mut engine_time = Duration::ZERO;
    let mut installed_burst = 0u64;
    let mut bursts = 0usize;
    let (mut new_entries, mut full) = (0u64, 0u64);
    for chunk in frames.chunks(round) {
        let n = nic(over_socket);
        let shared = n.shared.clone();
        let (mut engine, _) = Engine::start(
            n.device,
            config(16, 1),
            &empty_snapshot(),
            EngineOptions::default(),
        )
        .expect("engine");
        let (lat, burst) = chunk.split_at(chunk.len().min(500));
        // One event at a time: SYN in, step until its entry is written.
        for f in lat {
            let before = handled(&engine);
            let t0 = Instant::now();
            lock(&shared).receive(f, &mut out).expect("receive");
            step_until(&mut engine, before + 1);
            single.push(t0.elapsed());
        }
        // Full queues: a queue's worth of SYNs (64), then the engine drains and installs.
        for b in burst.chunks(64) {
            let before = handled(&engine);
            {
                let mut dev = lock(&shared);
                for f in b {
                    dev.receive(f, &mut out).expect("receive");
                }
            }
            engine_time += step_until(&mut engine, before + b.len() as u64);
            installed_burst += b.len() as u64;
            bursts += 1;
        }
        new_entries += engine.connections().stats().installed;
        full += engine.connections().stats().bucket_full;
        drop(n._server);
    }
    single.sort();
    println!(
        "learn → install, {name:<9}: one event p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} events)",
        ms(percentile(&single, 0.5)),
        ms(percentile(&single, 0.99)),
        ms(percentile(&single, 1.0)),
        single.len()
    );
    println!(
        "learn → install, {name:<9}: {:.0} events/s with full queues ({} events in {} bursts of 64, {:.1} ms of engine time; {} new entries, {} refused: bucket full)",
        installed_burst as f64 / engine_time.as_secs_f64(),
        installed_burst,
        bursts,
        ms(engine_time),
        new_entries,
        full
    );
}

/// An HTTP backend answering 200 to everything until aborted.
async fn backend(listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await;
        });
    }
}

fn decision_bench(over_socket: bool, members: usize, decisions: usize) {
    let name = if over_socket {
        "SocketDevice"
    } else {
        "ModelHandle"
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let port = 18090;
    let cfg = config(members, port);
    let mut tasks = Vec::new();
    for i in 0..members {
        let l = runtime
            .block_on(tokio::net::TcpListener::bind((backend_ip(i), port)))
            .expect("bind a backend");
        tasks.push(runtime.spawn(backend(l)));
    }
    let n = nic(over_socket);
    let (mut engine, _) = Engine::start(
        n.device,
        cfg.clone(),
        &empty_snapshot(),
        EngineOptions::default(),
    )
    .expect("engine");
    let _guard = runtime.enter();
    let (checker, mut events) = HealthChecker::new(CheckerOptions::default()).expect("checker");
    checker
        .set_targets(targets_from_config(&cfg))
        .expect("targets");
    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        while let Some(batch) = events.recv().await {
            if tx.send(batch).is_err() {
                break;
            }
        }
    });
    // Until everyone is decided healthy (no table change: assumed healthy from the start).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut latencies: Vec<Duration> = Vec::new();
    let mut loads: Vec<Duration> = Vec::new();
    let mut entries: Vec<usize> = Vec::new();
    let apply = |engine: &mut Engine,
                 batch: Vec<nlbd::health::HealthChange>,
                 latencies: &mut Vec<Duration>,
                 loads: &mut Vec<Duration>,
                 entries: &mut Vec<usize>| {
        if let Some(a) = engine.apply_health(&batch, &checker.snapshot()) {
            if let nlbd::controller::LoadOutcome::Loaded(r) = &a.load {
                loads.push(r.elapsed);
                entries.push(r.changed_entries);
                latencies.extend(a.latencies.iter().copied());
            }
        }
    };
    let healthy = |c: &HealthChecker| {
        c.snapshot()
            .targets
            .iter()
            .all(|t| t.health == nlbd::health::Health::Healthy)
    };
    while !healthy(&checker) && Instant::now() < deadline {
        engine.step();
        if let Ok(b) = rx.recv_timeout(Duration::from_millis(1)) {
            apply(&mut engine, b, &mut latencies, &mut loads, &mut entries);
        }
    }
    latencies.clear();
    loads.clear();
    entries.clear();
    let victim = 0usize;
    for k in 0..decisions * 2 {
        // Stop the victim (refused: unhealthy at the next probe), or start it again.
        if k % 2 == 0 {
            tasks[victim].abort();
        } else {
            let l = runtime
                .block_on(tokio::net::TcpListener::bind((backend_ip(victim), port)))
                .expect("rebind");
            tasks[victim] = runtime.spawn(backend(l));
        }
        let want = latencies.len() + 1;
        let until = Instant::now() + Duration::from_secs(10);
        while latencies.len() < want && Instant::now() < until {
            engine.step();
            if let Ok(b) = rx.recv_timeout(Duration::from_millis(1)) {
                apply(&mut engine, b, &mut latencies, &mut loads, &mut entries);
            }
        }
    }
    let mut sorted = latencies.clone();
    sorted.sort();
    let mut load_sorted = loads.clone();
    load_sorted.sort();
    let mean_entries = entries.iter().sum::<usize>() as f64 / entries.len().max(1) as f64;
    println!(
        "probe → table active, {name:<9}, {members:>4} members: p50 {:.3} ms, p90 {:.3} ms, max {:.3} ms over {} decisions (load p50 {:.3} ms, {:.0} entries per load)",
        ms(percentile(&sorted, 0.5)),
        ms(percentile(&sorted, 0.9)),
        ms(percentile(&sorted, 1.0)),
        sorted.len(),
        ms(percentile(&load_sorted, 0.5)),
        mean_entries
    );
    for t in tasks {
        t.abort();
    }
    drop(checker);
    drop(_guard);
    runtime.shutdown_timeout(Duration::from_secs(1));
}

fn main() {
    let args = parse_args();
    for over_socket in [false, true] {
        learn_bench(over_socket, args.flows);
    }
    for &m in &args.members {
        for over_socket in [false, true] {
            decision_bench(over_socket, m, args.decisions);
        }
    }
}
