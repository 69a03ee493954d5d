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
//! - **new connections per second** with hardware learning, and **punted fragments per
//!   second**, on the host rings: the host's CPU time per item beside the PCIe cost model's
//!   register stalls and link time, and the rate on the cost model (docs/pcie.md).
//!
//! Run: `cargo bench -p nlbd --bench slowpath -- [--flows N] [--decisions N]
//! [--members N]` (NLB_BENCH_QUICK=1 for a short run).

use etherparse::PacketBuilder;
use firmware_sim::ModelDevice;
use flowtable_compiler::Config;
use nlb_config::parse_config;
use nlb_driver::conntrack::Prefault;
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

/// A UDP datagram of 2,000 bytes from `i`'s client to the two-rule VIP, as two fragments
/// (1,480 and 528 bytes of payload): the NIC punts both (docs/pipeline.md §5), the host
/// tracks the datagram and injects both to the first fragment's backend (SPEC R4.3).
fn udp_fragments(i: usize) -> [Vec<u8>; 2] {
    use etherparse::{IpFragOffset, Ipv4Header};
    let mut whole = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4(
            [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            [203, 0, 113, 53],
            64,
        )
        .udp(1024 + (i % 60000) as u16, 53)
        .write(&mut whole, &[0x5a; 2000])
        .expect("frame");
    let (ip, rest) = Ipv4Header::from_slice(&whole[14..]).expect("ipv4");
    let payload = rest.to_vec();
    let mut out = [Vec::new(), Vec::new()];
    for (k, (part, offset, more)) in [
        (&payload[..1480], 0u16, true),
        (&payload[1480..], 185, false),
    ]
    .into_iter()
    .enumerate()
    {
        let mut h = ip.clone();
        h.identification = i as u16;
        h.more_fragments = more;
        h.fragment_offset = IpFragOffset::try_new(offset).expect("offset");
        h.set_payload_len(part.len()).expect("length");
        h.header_checksum = h.calc_header_checksum();
        let mut f = whole[..14].to_vec();
        h.write(&mut f).expect("header");
        f.extend_from_slice(part);
        out[k] = f;
    }
    out
}

/// One TCP rule and two UDP rules on another VIP (so the NIC punts its fragments).
fn rings_config() -> Config {
    let y = "forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
  - {name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: web}
  - {name: dns2, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '54', target: web}
targetPools:
  - {name: web, region: r, instances: [a, b, c, d]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
  - {name: d, ip: 192.0.2.4, zone: z, mac: '02:00:00:00:00:0d'}
";
    let (c, d) = parse_config("bench.yaml", y);
    assert!(d.is_empty(), "{d}");
    c
}

/// An engine on the host rings over an in-process device of `profile` (`u280`: 64 Mi
/// connections, the flows of the benchmark fit); the handle shares the device's PCIe ledger.
fn rings_engine(profile: &str) -> (ModelHandle, Engine) {
    let p = Profile::by_name(profile).expect("profile");
    let sim = ModelHandle::from_device(ModelDevice::new(p));
    let opts = EngineOptions {
        age_every: Duration::from_secs(1 << 30),
        ..EngineOptions::default()
    };
    let (engine, _) = Engine::start(
        Box::new(sim.clone()),
        rings_config(),
        &empty_snapshot(),
        opts,
    )
    .expect("engine");
    (sim, engine)
}

/// What a stream of `items` cost: host CPU (the engine's thread, the device's own work taken
/// out) and the PCIe figures of the same span; prints per-item figures and the rate on the
/// cost model.
fn stream_report(what: &str, items: u64, cpu: Duration, used: &nlb_driver::pcie::PcieStats) {
    let host_ns = cpu.as_secs_f64() * 1e9 - used.device_cpu_ns as f64;
    let per = used.stream_ns_per_item(host_ns.max(0.0), items);
    println!(
        "{what}: {:.2} M/s on the PCIe cost model ({:.0} ns of host CPU per item, {:.1} ns of register stalls, {:.1} ns of link; {} register reads, {} writes, {} DMA writes, {} DMA reads, {} interrupts for {} items)",
        1e3 / per,
        host_ns.max(0.0) / items.max(1) as f64,
        used.mmio_stall_ns / items.max(1) as f64,
        used.link_ns() / items.max(1) as f64,
        used.mmio_reads,
        used.mmio_writes,
        used.dma_writes,
        used.dma_reads,
        used.interrupts,
        items
    );
}

/// New connections per second, bursts of 4,000 (the event ring holds 4,096), the device's
/// side untimed. The NIC installs each new flow (hardware learning, on chip at `sim` and behind
/// HBM at `u280`) and the host takes the records and keeps its books.
///
/// At `u280` three passes of as many new flows each. The first starts as soon as the engine
/// has started (a flood right after a restart): the host's last-seen times (256 MiB) are new
/// memory a thread is still backing, and an install that writes first to a page it has not
/// reached takes the page faults itself. The second, on an engine started again, waits for
/// that thread to finish first (a daemon whose traffic comes a moment after it started). The
/// third follows the second: a daemon that has run a while.
fn cps_bench(profile: &str, flows: usize) {
    let frames =
        |pass: usize| -> Vec<Vec<u8>> { (pass * flows..(pass + 1) * flows).map(syn).collect() };
    if profile != "u280" {
        let (sim, mut engine) = rings_engine(profile);
        cps_pass(&sim, &mut engine, profile, "", &frames(0));
        return;
    }
    // Right after the start: the frames made first, so that nothing waits between the two.
    let first = frames(0);
    let t0 = Instant::now();
    let (sim, mut engine) = rings_engine(profile);
    let started = t0.elapsed();
    let at_start = engine.connections().conntrack().prefault();
    cps_pass(
        &sim,
        &mut engine,
        profile,
        ", right after the start",
        &first,
    );
    println!(
        "    engine started (attach included) in {:.0} ms; the last-seen times {:?} at the start, {:?} after the pass",
        ms(started),
        at_start,
        engine.connections().conntrack().prefault()
    );
    drop((first, engine, sim));
    // Started again, and the backing of the last-seen times waited for.
    let second = frames(1);
    let (sim, mut engine) = rings_engine(profile);
    let t0 = Instant::now();
    while engine.connections().conntrack().prefault() == Prefault::Working {
        std::thread::sleep(Duration::from_millis(1));
    }
    let waited = t0.elapsed();
    cps_pass(
        &sim,
        &mut engine,
        profile,
        ", the host's table fresh, its memory backed",
        &second,
    );
    println!(
        "    the last-seen times {:?} {:.0} ms after the start",
        engine.connections().conntrack().prefault(),
        ms(waited)
    );
    cps_pass(
        &sim,
        &mut engine,
        profile,
        ", the host's table in use",
        &frames(2),
    );
}

/// One pass of [`cps_bench`]: the SYNs of `frames`, new flows each.
fn cps_pass(
    sim: &ModelHandle,
    engine: &mut Engine,
    profile: &str,
    table: &str,
    frames: &[Vec<u8>],
) {
    let mut out = firmware_sim::BatchOutput::new();
    let mut cpu = Duration::ZERO;
    let start = engine.connections().stats().learn_events;
    let learned_before = engine.connections().stats().learned_by_nic;
    let before = sim.clone().pcie();
    let mmio0 = engine.mmio_use();
    for burst in frames.chunks(4000) {
        let refs: Vec<&[u8]> = burst.iter().map(Vec::as_slice).collect();
        lock(&sim.shared()).receive_batch(&refs, &mut out);
        let target = engine.connections().stats().learn_events + burst.len() as u64;
        let t0 = nlb_driver::pcie::thread_cpu();
        while engine.connections().stats().learn_events < target {
            if !engine.step().busy() {
                break;
            }
        }
        cpu += nlb_driver::pcie::thread_cpu().saturating_sub(t0);
    }
    let used = sim.clone().pcie().since(&before);
    let events = engine.connections().stats().learn_events - start;
    let m = engine.mmio_use();
    let how = if engine.status(false).hw_learn {
        "NIC learns, host keeps the books"
    } else {
        "host installs by the command ring"
    };
    stream_report(
        &format!("new connections, {profile} ({how}{table})"),
        events,
        cpu,
        &used,
    );
    println!(
        "    register reads per learn event {:.3}, per installed connection {:.3}; learned by the NIC {} of {} flows, {} connections in the host's table",
        (m.event_reads - mmio0.event_reads) as f64 / events.max(1) as f64,
        (m.event_reads - mmio0.event_reads) as f64 / (m.installs - mmio0.installs).max(1) as f64,
        engine.connections().stats().learned_by_nic - learned_before,
        frames.len(),
        engine.connections().conntrack().valid_count()
    );
}

/// Punted fragments per second: UDP datagrams in two fragments on a two-rule VIP; the host
/// takes each from the punt ring, tracks the datagram and injects the fragment through the
/// inject ring. Bursts of 1,000 fragments (the punt ring holds 1,024), the device untimed.
fn punt_bench(datagrams: usize) {
    let (sim, mut engine) = rings_engine("u280");
    let mut out = firmware_sim::BatchOutput::new();
    let mut cpu = Duration::ZERO;
    let before = sim.clone().pcie();
    let mmio0 = engine.mmio_use();
    let start = engine.mmio_use().punts;
    let mut injected = 0usize;
    for burst in (0..datagrams).collect::<Vec<_>>().chunks(500) {
        let frames: Vec<Vec<u8>> = burst.iter().flat_map(|&i| udp_fragments(i)).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        lock(&sim.shared()).receive_batch(&refs, &mut out);
        let target = engine.mmio_use().punts + frames.len() as u64;
        let t0 = nlb_driver::pcie::thread_cpu();
        while engine.mmio_use().punts < target {
            if !engine.step().busy() {
                break;
            }
        }
        cpu += nlb_driver::pcie::thread_cpu().saturating_sub(t0);
        injected += lock(&sim.shared()).take_injected().len();
    }
    let used = sim.clone().pcie().since(&before);
    let m = engine.mmio_use();
    let punts = m.punts - start;
    stream_report(
        "punted fragments (taken, tracked, injected)",
        punts,
        cpu,
        &used,
    );
    println!(
        "    register reads per punted frame {:.3}; {} frames injected",
        (m.punt_reads - mmio0.punt_reads) as f64 / punts.max(1) as f64,
        injected
    );
}

/// The configuration of the compiler's production-scale benchmark, health-checked: 1,024
/// forwarding rules' pools of 63 backends each (`p0`.., instances `b0`..) and one pool of
/// 65,536 (`pbig`: every `b*` and as many `x*` of its own), every backend id of the `u280`
/// profile.
fn u280_config(vips: usize, per_pool: usize, big: usize) -> Config {
    use std::fmt::Write;
    let shared = vips * per_pool;
    let mut s = String::with_capacity((shared + big) * 90);
    s.push_str("forwardingRules:\n");
    s.push_str("  - {name: rbig, IPAddress: \"2001:db8:9::1\", portRange: \"80\", target: pbig}\n");
    for v in 0..vips {
        let _ = writeln!(
            s,
            "  - {{name: r{v}, IPAddress: \"2001:db8:1::{v:x}\", portRange: \"80\", target: p{v}}}"
        );
    }
    s.push_str("targetPools:\n  - {name: pbig, healthChecks: [hc], instances: [");
    for i in 0..big {
        let sep = if i == 0 { "" } else { ", " };
        if i < shared {
            let _ = write!(s, "{sep}b{i}");
        } else {
            let _ = write!(s, "{sep}x{}", i - shared);
        }
    }
    s.push_str("]}\n");
    for v in 0..vips {
        let _ = write!(s, "  - {{name: p{v}, healthChecks: [hc], instances: [");
        for i in 0..per_pool {
            let _ = write!(s, "{}b{}", if i == 0 { "" } else { ", " }, v * per_pool + i);
        }
        s.push_str("]}\n");
    }
    s.push_str("instances:\n");
    for (prefix, n, net) in [("b", shared, 2), ("x", big.saturating_sub(shared), 3)] {
        for i in 0..n {
            let _ = writeln!(
                s,
                "  - {{name: {prefix}{i}, ip: \"2001:db8:{net}::{i:x}\", mac: \"02:0{net}:00:{:02x}:{:02x}:{:02x}\"}}",
                i / 65536 % 256,
                i / 256 % 256,
                i % 256
            );
        }
    }
    s.push_str("httpHealthChecks:\n  - {name: hc, port: 80, requestPath: /}\n");
    let (c, d) = parse_config("u280.yaml", &s);
    assert!(d.is_empty(), "{d}");
    c
}

/// Health decision → table active at the `u280` profile's scale (target p99 ≤ 50 ms): the
/// engine on an in-process `u280` device over the host rings (tables loaded by DMA), the
/// configuration of [`u280_config`]; after the first two changes (timed apart: the first
/// writes the whole bank the start did not), one more backend of a pool of 63 down at each
/// decision, then of the pool of 65,536, `decisions` times each. Each figure is the
/// engine's whole call (the pool's recompile, the delta load by DMA with its bank flip, and
/// what the new tables mean for connections), measured from the decision; beside it the
/// load's own time and the same on the PCIe cost model (host CPU plus register stalls and DMA).
fn u280_health_bench(decisions: usize, quick: bool) {
    let (vips, per_pool, big) = if quick {
        (16, 63, 4096)
    } else {
        (1024, 63, 65_536)
    };
    let p = Profile::by_name("u280").expect("u280 profile");
    let mut sim = ModelHandle::from_device(ModelDevice::new(p));
    let cfg = u280_config(vips, per_pool, big);
    let t0 = Instant::now();
    let (mut engine, _) = Engine::start(
        Box::new(sim.clone()),
        cfg,
        &empty_snapshot(),
        EngineOptions::default(),
    )
    .expect("engine");
    println!(
        "u280 health: {} pools ({vips} of {per_pool} backends, one of {big}) compiled and loaded in {:.0} ms",
        vips + 1,
        ms(t0.elapsed())
    );
    // An ageing pass over the table as it stands (empty: this benchmark installs none): the
    // hit bits of 64 Mi entries by DMA, and the host's copy where it holds connections.
    for _ in 0..3 {
        let at = Instant::now();
        engine.age_at(nlbd::engine::host_secs());
        println!(
            "u280 health: an ageing pass over the empty table: {:.1} ms",
            ms(at.elapsed())
        );
    }
    // The first change after the start writes the whole other bank (the start loaded one):
    // timed apart, then the steady state.
    let mut health = flowtable_compiler::HealthState::new();
    for (k, healthy) in [false, true].into_iter().enumerate() {
        health.set_member_healthy("p7", "b441", healthy);
        let at = Instant::now();
        let applied = engine
            .apply_health_state(health.clone())
            .expect("health applied");
        let whole = at.elapsed();
        if let nlbd::controller::LoadOutcome::Loaded(r) = &applied.load {
            let active = applied.active_at.map_or(whole, |t| t.duration_since(at));
            println!(
                "u280 health: change {} after the start: table active after {:.1} ms ({:.1} ms the whole call), {} entries written",
                k + 1,
                ms(active),
                ms(whole),
                r.changed_entries
            );
        }
    }
    // Each decision takes one more backend of the pool down (a backend that comes back would
    // find the inactive bank already holding the tables of two loads ago: nothing to write).
    for (pool, first, prefix) in [("p7", 7 * per_pool, "b"), ("pbig", 17, "x")] {
        let (mut lat, mut load, mut model) = (Vec::new(), Vec::new(), Vec::new());
        let mut after = Vec::new();
        let mut entries = 0usize;
        for k in 0..decisions.min(per_pool / 2) {
            health.set_member_healthy(pool, &format!("{prefix}{}", first + k), false);
            let before = sim.pcie();
            let (c0, at) = (nlb_driver::pcie::thread_cpu(), Instant::now());
            let applied = engine
                .apply_health_state(health.clone())
                .expect("health applied");
            let whole = at.elapsed();
            let cpu = nlb_driver::pcie::thread_cpu().saturating_sub(c0);
            let used = sim.pcie().since(&before);
            let nlbd::controller::LoadOutcome::Loaded(r) = &applied.load else {
                panic!("{pool}: no load ({:?})", applied.load);
            };
            let took = applied.active_at.map_or(whole, |t| t.duration_since(at));
            lat.push(took);
            after.push(whole.saturating_sub(took));
            load.push(r.elapsed);
            entries += r.changed_entries;
            let host_ns = cpu.as_secs_f64() * 1e9 - used.device_cpu_ns as f64;
            model.push(Duration::from_nanos(used.serial_ns(host_ns.max(0.0)) as u64));
        }
        for v in [&mut lat, &mut load, &mut model, &mut after] {
            v.sort();
        }
        println!(
            "u280 health, one more backend of {pool} ({} members) down: decision → table active p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (load p50 {:.1} ms); the whole call on the PCIe cost model p50 {:.1} ms, p99 {:.1} ms, of which after the flip (connections of the backend) p50 {:.1} ms; {} decisions, {:.0} entries changed per load",
            if pool == "pbig" { big } else { per_pool },
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            ms(percentile(&lat, 1.0)),
            ms(percentile(&load, 0.5)),
            ms(percentile(&model, 0.5)),
            ms(percentile(&model, 0.99)),
            ms(percentile(&after, 0.5)),
            lat.len(),
            entries as f64 / lat.len().max(1) as f64
        );
    }
}

fn main() {
    let args = parse_args();
    let quick = std::env::var("NLB_BENCH_QUICK").is_ok();
    // NLB_BENCH_ONLY=rings: the ring figures alone (for a profiler), =punts: the punted
    // fragments alone, =cps: the u280 new connections alone; =u280-health: the health
    // decisions at the u280 profile's scale alone.
    let only = std::env::var("NLB_BENCH_ONLY").unwrap_or_default();
    if only == "u280-health" {
        return u280_health_bench(args.decisions, quick);
    }
    if only == "punts" {
        return punt_bench(args.flows.max(40_000) / 2);
    }
    if only == "cps" {
        return cps_bench("u280", args.flows.max(40_000) * 5);
    }
    let only_rings = only == "rings";
    cps_bench("u280", args.flows.max(40_000) * 5);
    // 8,000 flows in the sim profile's 16,384 entries: about one bucket in twenty fills, and
    // its LEARNs are the host's to settle.
    cps_bench("sim", 8_000);
    punt_bench(args.flows.max(40_000) / 2);
    if only_rings {
        return;
    }
    for over_socket in [false, true] {
        learn_bench(over_socket, args.flows);
    }
    for &m in &args.members {
        for over_socket in [false, true] {
            decision_bench(over_socket, m, args.decisions);
        }
    }
    u280_health_bench(args.decisions, quick);
}
