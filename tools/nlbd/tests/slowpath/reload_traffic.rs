//! Reloads under traffic: established connections keep their backend while instances are
//! added and removed in a loop (SPEC R4.1: "health changes and backend-set changes do not move
//! it").
//!
//! The slow-path engine runs against the in-process simulated NIC while another thread sends
//! the packets of established TCP connections through the same device without pause, so the
//! packets interleave with every register access of each reload (table writes, the bank
//! flip, connection-table fix-ups). Which backend a packet reached is read from the frame the
//! NIC sent (its destination MAC, decoded with etherparse), not from the pipeline's ids, and
//! compared with the backend the connection's first packet reached.

use etherparse::{PacketBuilder, SlicedPacket};
use nlb_config::parse_config;
use nlb_driver::model::{lock, ModelHandle};
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use nlbd::engine::{Engine, EngineOptions};
use nlbd::health::HealthSnapshot;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOWS: u16 = 512;
const ROUNDS: usize = 24;

/// Stable backends `web-1..web-4` carry the connections; `churn` names the instances added
/// to the pool this round. Their names sort before and among the stable ones, so name-ordered
/// ids would move every stable backend.
fn config(churn: &[String]) -> String {
    let mut s = String::from(
        "forwardingRules:\n  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: web}\n",
    );
    // A rule that comes and goes too: its name sorts first, so name-ordered rule ids move.
    if !churn.is_empty() {
        s.push_str("  - {name: aaa-extra, IPAddress: 203.0.113.11, IPProtocol: TCP, portRange: '80', target: web}\n");
    }
    let mut members: Vec<String> = (1..=4).map(|i| format!("web-{i}")).collect();
    members.extend(churn.iter().cloned());
    let _ = writeln!(
        s,
        "targetPools:\n  - {{name: web, region: r, instances: [{}]}}\ninstances:",
        members.join(", ")
    );
    for (i, m) in members.iter().enumerate() {
        let _ = writeln!(
            s,
            "  - {{name: {m}, ip: 192.0.2.{}, zone: z, mac: '02:00:00:00:01:{:02x}'}}",
            10 + i,
            mac_octet(m)
        );
    }
    s
}

/// The last MAC octet of an instance: fixed per name, whatever the round.
fn mac_octet(name: &str) -> u8 {
    name.bytes()
        .fold(7u8, |h, b| h.wrapping_mul(31).wrapping_add(b))
        | 1
}

fn tcp(sport: u16, syn: bool) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 51, 100, 7], [203, 0, 113, 10], 64)
        .tcp(sport, 80, 1000, 65535);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut v = Vec::new();
    b.write(&mut v, &[]).unwrap();
    v
}

/// The destination MAC of a frame the NIC sent, decoded independently.
fn dst_mac(frame: &[u8]) -> [u8; 6] {
    let p = SlicedPacket::from_ethernet(frame).expect("the NIC sent a valid frame");
    match p.link {
        Some(etherparse::LinkSlice::Ethernet2(e)) => e.destination(),
        other => panic!("not Ethernet: {other:?}"),
    }
}

#[test]
fn established_connections_never_reach_another_backend_while_instances_come_and_go() {
    let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
    let parse = |text: &str| {
        let (c, d) = parse_config("lb.yaml", text);
        assert!(d.is_empty(), "{d}");
        c
    };
    let snapshot = HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    };
    let (mut engine, _) = Engine::start(
        Box::new(sim.clone()),
        parse(&config(&[])),
        &snapshot,
        EngineOptions::default(),
    )
    .unwrap();

    // Establish the connections: a SYN each, learned and installed by the engine.
    let shared = sim.shared();
    let mut out = vec![0u8; 16384];
    let mut owner: HashMap<u16, [u8; 6]> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // In groups smaller than the learn queue (64 events on the sim profile).
    for group in (0..FLOWS).collect::<Vec<_>>().chunks(32) {
        for &i in group {
            let r = lock(&shared)
                .receive(&tcp(40000 + i, true), &mut out)
                .unwrap();
            assert_eq!(r.verdict, Verdict::Forward);
            owner.insert(40000 + i, dst_mac(&out[..r.out_len]));
        }
        while engine.connections().conntrack().valid_count() < owner.len() {
            engine.step();
            assert!(Instant::now() < deadline, "connections not installed");
        }
    }
    let used: std::collections::BTreeSet<[u8; 6]> = owner.values().copied().collect();
    assert!(used.len() >= 3, "the flows use several backends: {used:?}");

    // Traffic: every established connection's packets, round robin, without pause.
    let stop = Arc::new(AtomicBool::new(false));
    let reloading = Arc::new(AtomicBool::new(false));
    let during_reloads = Arc::new(AtomicU64::new(0));
    let traffic = {
        let (stop, reloading, during_reloads) =
            (stop.clone(), reloading.clone(), during_reloads.clone());
        let shared = shared.clone();
        let owner = owner.clone();
        std::thread::spawn(move || {
            let frames: Vec<(u16, Vec<u8>)> = (0..FLOWS)
                .map(|i| (40000 + i, tcp(40000 + i, false)))
                .collect();
            let mut out = vec![0u8; 16384];
            let (mut sent, mut wrong, mut wrong_count) = (0u64, Vec::new(), 0u64);
            while !stop.load(Ordering::Relaxed) {
                for (sport, frame) in &frames {
                    let r = lock(&shared).receive(frame, &mut out).unwrap();
                    sent += 1;
                    if reloading.load(Ordering::Relaxed) {
                        during_reloads.fetch_add(1, Ordering::Relaxed);
                    }
                    let got = (r.verdict == Verdict::Forward).then(|| dst_mac(&out[..r.out_len]));
                    if got != Some(owner[sport]) {
                        wrong_count += 1;
                        if wrong.len() < 20 {
                            wrong.push((*sport, r.verdict, got));
                        }
                    }
                }
            }
            (sent, wrong, wrong_count)
        })
    };

    // Instances (and a rule) come and go: each round adds new ones whose names sort before,
    // between and after the stable backends, and drops the previous round's.
    let mut reloads = 0;
    for round in 0..ROUNDS {
        let churn: Vec<String> = match round % 3 {
            0 => vec![format!("a-{round}")],
            1 => vec![format!("a-{round}"), format!("web-2x{round}")],
            _ => vec![],
        };
        reloading.store(true, Ordering::Relaxed);
        let report = engine
            .reload(parse(&config(&churn)), &snapshot)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        reloading.store(false, Ordering::Relaxed);
        reloads += 1;
        assert_eq!(
            report.evicted, 0,
            "round {round}: no connection's backend was removed"
        );
        assert_eq!(
            report.remapped, 0,
            "round {round}: ids stay, nothing to rewrite"
        );
        for _ in 0..5 {
            engine.step();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (sent, wrong, wrong_count) = traffic.join().unwrap();
    assert_eq!(reloads, ROUNDS);
    assert!(
        during_reloads.load(Ordering::Relaxed) > 1000,
        "the traffic overlapped the reloads too little to prove anything: {} of {sent} packets",
        during_reloads.load(Ordering::Relaxed)
    );
    assert!(
        wrong.is_empty(),
        "{wrong_count} of {sent} packets of established connections reached another backend; the first (sport, verdict, dst MAC): {wrong:?}"
    );
    // And the connection table still names the backends the flows started on.
    assert_eq!(
        engine.connections().conntrack().valid_count(),
        usize::from(FLOWS)
    );
}
