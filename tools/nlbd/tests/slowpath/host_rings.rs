//! The slow path on the host rings (SPEC R12): new connections, TCP fragments and their
//! injection through the in-process model with nlbd's engine, and what crossed the host
//! interface. With the rings no register is read on the event, punt or inject paths, and the
//! NIC installs new connections itself; with the register queues (the debugging path) the
//! same traffic ends the same way.

use etherparse::{Ipv4Header, PacketBuilder};
use firmware_sim::{CtOutcome, ModelDevice};
use nlb_config::parse_config;
use nlb_driver::loader::LoadReport;
use nlb_driver::model::ModelHandle;
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use nlbd::engine::{Engine, EngineOptions};
use nlbd::health::HealthSnapshot;
use std::time::{Duration, Instant};

const CONFIG: &str = "forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
targetPools:
  - {name: web, region: r, instances: [a, b, c]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
";

fn start(opts: EngineOptions) -> (ModelHandle, Engine) {
    start_on(sim_device(), opts)
}

fn start_on(device: ModelDevice, opts: EngineOptions) -> (ModelHandle, Engine) {
    let opts = EngineOptions {
        age_every: Duration::from_secs(1 << 30),
        ..opts
    };
    let (sim, engine, _) = start_with(CONFIG, device, opts);
    (sim, engine)
}

/// nlbd's engine started with the configuration `text` on `device`, no health decided yet.
fn start_with(
    text: &str,
    device: ModelDevice,
    opts: EngineOptions,
) -> (ModelHandle, Engine, LoadReport) {
    let (config, d) = parse_config("t.yaml", text);
    assert!(d.is_empty(), "{d}");
    let sim = ModelHandle::from_device(device);
    let snapshot = HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    };
    let (engine, report) = Engine::start(Box::new(sim.clone()), config, &snapshot, opts).unwrap();
    (sim, engine, report)
}

fn sim_device() -> ModelDevice {
    ModelDevice::new(Profile::by_name("sim").unwrap())
}

/// On the rings a start writes both banks (the one not serving by DMA, without a flip), so
/// the first health change after it writes the entries it changes, not the whole bank.
#[test]
fn after_a_start_on_the_rings_the_first_health_change_writes_only_itself() {
    let text = "forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
targetPools:
  - {name: web, region: r, instances: [a, b, c], healthChecks: [hc]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
httpHealthChecks:
  - {name: hc, port: 80, requestPath: /}
";
    let (sim, mut engine, report) = start_with(text, sim_device(), EngineOptions::default());
    assert!(report.changed_entries > 1000, "{report:?}");
    {
        let dev = sim.lock();
        assert_eq!(dev.bank(0), dev.bank(1), "both banks hold the tables");
        assert_eq!(
            dev.bank(report.bank),
            &engine.controller().compiled().tables
        );
    }
    assert_eq!(engine.controller().loader().generation(), 1, "one flip");
    let mut health = flowtable_compiler::HealthState::new();
    health.set_member_healthy("web", "a", false);
    let applied = engine.apply_health_state(health).unwrap();
    let nlbd::controller::LoadOutcome::Loaded(r) = &applied.load else {
        panic!("{applied:?}");
    };
    // a's share of the 4,093 slots, and the pool entry: what the recompile changed.
    assert!(
        (500..3000).contains(&applied.changed_entries),
        "{applied:?}"
    );
    assert_eq!(r.changed_entries, applied.changed_entries, "{r:?}");
}

/// An instance-wide health entry (a health file's `INSTANCE:` form) holds in every pool that
/// checks the instance: the engine recompiles those pools too. With `a` down in `web` and `b`
/// down everywhere, only `c` takes new connections in `web` (SPEC R3.4, R5.5).
#[test]
fn an_instance_wide_health_entry_recompiles_the_instances_pools() {
    let text = CONFIG.replace(
        "instances: [a, b, c]}",
        "instances: [a, b, c], healthChecks: [hc]}",
    ) + "httpHealthChecks:\n  - {name: hc, port: 80, requestPath: /}\n";
    let (sim, mut engine, _) = start_with(&text, sim_device(), EngineOptions::default());
    let mut health = flowtable_compiler::HealthState::new();
    health.set_member_healthy("web", "a", false);
    let applied = engine.apply_health_state(health.clone()).unwrap();
    assert_eq!(applied.pools, ["web"]);
    health.set_healthy("b", false);
    let applied = engine.apply_health_state(health).unwrap();
    assert_eq!(applied.pools, ["web"], "{applied:?}");
    assert!(applied.changed_entries > 0, "{applied:?}");
    let compiled = engine.controller().compiled();
    let c = compiled.symbols.backend_id("c").unwrap();
    let web = compiled.tables.pools[usize::from(compiled.symbols.pool_id("web").unwrap())];
    let dev = sim.lock();
    let serving = dev.bank(engine.controller().loader().active_bank());
    let slice = &serving.maglev[web.maglev_base as usize..][..web.maglev_size as usize];
    assert!(!slice.is_empty() && slice.iter().all(|s| s.backend == c));
}

fn syn(sport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 51, 100, 9], [203, 0, 113, 80], 64)
        .tcp(sport, 80, 1, 65535)
        .syn()
        .write(&mut v, &[])
        .unwrap();
    v
}

fn ack(sport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 51, 100, 9], [203, 0, 113, 80], 64)
        .tcp(sport, 80, 2, 65535)
        .ack(1)
        .write(&mut v, &[0u8; 100])
        .unwrap();
    v
}

/// The two fragments of a TCP segment (MF on the first, offset 64 on the second): the NIC
/// punts both (a tracking pool, docs/pipeline.md §6), the host injects them.
fn fragments(sport: u16) -> [Vec<u8>; 2] {
    let whole = ack(sport);
    let (ip, rest) = Ipv4Header::from_slice(&whole[14..]).unwrap();
    let payload = &rest[..rest.len().min(usize::from(ip.total_len) - 20)];
    let cut = 64;
    let mut out = [Vec::new(), Vec::new()];
    for (k, (part, offset, more)) in [(&payload[..cut], 0u16, true), (&payload[cut..], 8, false)]
        .into_iter()
        .enumerate()
    {
        let mut h = ip.clone();
        h.identification = 77;
        h.more_fragments = more;
        h.fragment_offset = etherparse::IpFragOffset::try_new(offset).unwrap();
        h.set_payload_len(part.len()).unwrap();
        h.header_checksum = h.calc_header_checksum();
        let mut f = whole[..14].to_vec();
        h.write(&mut f).unwrap();
        f.extend_from_slice(part);
        out[k] = f;
    }
    out
}

fn run(sim: &ModelHandle, engine: &mut Engine) -> (Vec<CtOutcome>, usize) {
    let mut out = vec![0u8; 16384];
    let mut outcomes = Vec::new();
    for p in 0..50u16 {
        sim.lock().receive(&syn(1000 + p), &mut out).unwrap();
    }
    // Let the host catch up (register path: it installs; rings: it records).
    for _ in 0..10 {
        engine.step();
    }
    for p in 0..50u16 {
        let r = sim.lock().receive(&ack(1000 + p), &mut out).unwrap();
        assert_eq!(r.verdict, Verdict::Forward);
        outcomes.push(r.conntrack);
    }
    for p in 0..20u16 {
        for f in fragments(1000 + p) {
            let r = sim.lock().receive(&f, &mut out).unwrap();
            assert_eq!(r.verdict, Verdict::Punt);
        }
    }
    let mut injected = 0;
    for _ in 0..20 {
        engine.step();
        injected += sim.lock().take_injected().len();
    }
    (outcomes, injected)
}

#[test]
fn the_hot_paths_read_no_register_on_the_rings() {
    let (sim, mut engine) = start(EngineOptions::default());
    let (outcomes, injected) = run(&sim, &mut engine);
    assert!(outcomes.iter().all(|c| *c == CtOutcome::Hit));
    assert_eq!(injected, 40, "every fragment to its connection's backend");
    let s = engine.status(false);
    assert!(s.rings && s.hw_learn);
    assert_eq!(s.learn.learned_by_nic, 50);
    let m = engine.mmio_use();
    assert_eq!((m.events, m.punts, m.installs), (50, 40, 50));
    assert_eq!(m.event_reads, 0, "{m:?}");
    assert_eq!(m.punt_reads, 0, "{m:?}");
    assert_eq!(m.reads_per_event(), 0.0);
    assert_eq!(m.reads_per_punt(), 0.0);
    assert_eq!(m.reads_per_install(), 0.0);
    // A load reads a handful of control registers, whatever its size.
    assert!(m.entries > 300 && m.load_reads < 20, "{m:?}");
    // Punted frames and injected frames crossed by DMA, and interrupts were raised.
    let p = engine.pcie();
    assert!(
        p.dma_writes > 40 && p.dma_reads > 40 && p.interrupts > 0,
        "{p:?}"
    );
}

/// The engine of this release's RTL carries the punt and event rings only: events and punted
/// frames still come by DMA with no register read, while tables, connections and injected
/// frames take the register windows; the traffic ends the same way.
#[test]
fn an_engine_of_two_rings_serves_punts_and_events_by_dma() {
    let mut device = ModelDevice::new(Profile::by_name("sim").unwrap());
    device.set_dma_rings(2);
    let (sim, mut engine) = start_on(device, EngineOptions::default());
    let (outcomes, injected) = run(&sim, &mut engine);
    assert!(outcomes.iter().all(|c| *c == CtOutcome::Hit));
    assert_eq!(injected, 40, "every fragment to its connection's backend");
    let s = engine.status(false);
    assert!(s.rings, "the rings are attached");
    let m = engine.mmio_use();
    assert_eq!((m.events, m.punts), (50, 40));
    assert_eq!(m.event_reads, 0, "{m:?}");
    // The load went through the register window: a read-back per entry.
    assert!(m.entries > 300 && m.load_reads > m.entries, "{m:?}");
    let p = engine.pcie();
    assert!(p.dma_writes > 40 && p.interrupts > 0, "{p:?}");
}

#[test]
fn the_register_queues_still_serve_for_debugging() {
    let (sim, mut engine) = start(EngineOptions {
        rings: None,
        ..EngineOptions::default()
    });
    let (outcomes, injected) = run(&sim, &mut engine);
    assert!(outcomes.iter().all(|c| *c == CtOutcome::Hit));
    assert_eq!(injected, 40);
    let s = engine.status(false);
    assert!(!s.rings);
    let m = engine.mmio_use();
    // What the rings save: the register path reads per event and per punted frame.
    assert!(
        m.reads_per_event() > 1.0 && m.reads_per_punt() > 10.0,
        "{m:?}"
    );
}

fn tcp_from(client: [u8; 4], sport: u16, fin: bool) -> Vec<u8> {
    let mut v = Vec::new();
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4(client, [203, 0, 113, 80], 64)
        .tcp(sport, 80, 1, 65535);
    let b = if fin { b.fin().ack(1) } else { b.syn() };
    b.write(&mut v, &[]).unwrap();
    v
}

/// With the NIC learning, event batches mix entries it installed, LEARNs it could not place
/// (full buckets: the host settles them) and TEARDOWNs (FINs of flows it learned). The host
/// takes the installed ones in runs; whatever the mix, its copy must end equal to the table
/// the NIC holds, entry for entry, and every new flow must be counted once.
#[test]
fn with_full_buckets_and_teardowns_in_the_batches_the_hosts_copy_is_the_nics() {
    let (sim, mut engine) = start(EngineOptions::default());
    assert!(engine.status(false).hw_learn);
    let entries = Profile::by_name("sim").unwrap().ct_entries();
    let mut out = vec![0u8; 16384];
    // 24,000 new flows into 16,384 entries: most buckets fill, so uninstalled LEARNs come
    // between installed ones; every 1,000 flows, FINs of 100 flows of the round before.
    let flow = |i: u32| ([10, 9, (i >> 8) as u8, i as u8], 1024 + (i % 7) as u16);
    let mut fins = 0;
    for round in 0..24u32 {
        for i in round * 1000..(round + 1) * 1000 {
            let (c, p) = flow(i);
            sim.lock()
                .receive(&tcp_from(c, p, false), &mut out)
                .unwrap();
        }
        if round > 0 {
            for i in (round - 1) * 1000..(round - 1) * 1000 + 100 {
                let (c, p) = flow(i);
                sim.lock().receive(&tcp_from(c, p, true), &mut out).unwrap();
                fins += 1;
            }
        }
        for _ in 0..8 {
            engine.step();
        }
    }
    for _ in 0..20 {
        engine.step();
    }
    let learn = engine.status(false).learn;
    assert_eq!(learn.learn_events, 24_000, "{learn:?}");
    assert!(
        learn.learned_by_nic > 10_000 && learn.learned_by_nic < 16_384,
        "{learn:?}"
    );
    assert!(
        learn.teardown_events > 0 && learn.teardown_events <= fins,
        "{learn:?}"
    );
    let dev = sim.lock();
    let host = engine.connections().conntrack();
    let mut valid = 0;
    for i in 0..entries {
        let nic = dev.conntrack().entry(i).copied().unwrap_or_default();
        let mine = host.entry(i).unwrap_or_default();
        assert_eq!(
            mine.valid, nic.valid,
            "entry {i}: host {mine:?}, NIC {nic:?}"
        );
        if nic.valid {
            valid += 1;
            assert_eq!(mine, nic, "entry {i}");
        }
    }
    assert_eq!(host.valid_count(), valid);
    assert!(valid > 10_000, "{valid} entries");
}
