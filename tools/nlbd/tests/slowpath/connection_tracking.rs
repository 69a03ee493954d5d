//! What backend services do to established connections, through the slow-path engine on the
//! in-process model NIC: each pool's `connectionPersistenceOnUnhealthyBackends` and idle
//! timeout, `connectionDraining.drainingTimeoutSec` on reloads, and
//! `failoverPolicy.disableConnectionDrainOnFailover` on failover and failback.
//!
//! Expectations come from Google Cloud's documentation, quoted in
//! `tools/nlbd/src/tracking.rs` (compute v1 `BackendServiceConnectionTrackingPolicy`,
//! `BackendServiceFailoverPolicy`, and Google Cloud's "Enable connection draining"), and SPEC
//! R4.1. Traffic goes through the model device; which backend a packet reached is the
//! pipeline's verdict, and for a deleted instance also the destination MAC of the frame the NIC
//! sent (decoded with etherparse). Time is driven explicitly (`Engine::age_at`,
//! `Engine::expire_drains`); the engine's own wall-clock ageing is switched off.

use etherparse::{IpHeaders, IpNumber, PacketBuilder, PacketBuilderStep, SlicedPacket};
use firmware_sim::CtOutcome;
use flowtable_compiler::{BackendHealth, Config, HealthState};
use nlb_config::parse_config;
use nlb_driver::model::ModelHandle;
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use nlbd::engine::{host_secs, Engine, EngineOptions, ReloadReport};
use nlbd::health::HealthSnapshot;
use nlbd::learn::{Drain, DrainCause};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn config(text: &str) -> Config {
    let (c, d) = parse_config("lb.yaml", text);
    assert!(d.is_empty(), "{d}");
    c
}

fn no_probes() -> HealthSnapshot {
    HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    }
}

const CLIENT: [u8; 4] = [198, 51, 100, 7];

fn frame(src: [u8; 4], dst: [u8; 4]) -> PacketBuilderStep<IpHeaders> {
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1]).ipv4(src, dst, 64)
}

/// A TCP segment from `CLIENT:sport` to `dst:dport`: a SYN, or an ACK (with FIN when `fin`).
fn tcp(dst: [u8; 4], dport: u16, sport: u16, syn: bool, fin: bool) -> Vec<u8> {
    let b = frame(CLIENT, dst).tcp(sport, dport, 1000, 65535);
    let b = if syn { b.syn() } else { b.ack(1) };
    let b = if fin { b.fin() } else { b };
    let mut v = Vec::new();
    b.write(&mut v, &[]).unwrap();
    v
}

fn udp(src: [u8; 4], dst: [u8; 4], dport: u16, sport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    frame(src, dst)
        .udp(sport, dport)
        .write(&mut v, &[1, 2, 3, 4])
        .unwrap();
    v
}

/// A packet of IP protocol `proto` with no ports the NIC reads: an ICMP echo request (1),
/// GRE (47), SCTP (132: ports on the wire, not read, docs/pipeline.md §3).
fn portless(src: [u8; 4], dst: [u8; 4], proto: u8) -> Vec<u8> {
    let payload: Vec<u8> = match proto {
        1 => vec![8, 0, 0, 0, 0, 1, 0, 1],
        132 => vec![0x13, 0x88, 0x13, 0x88, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 4],
        _ => vec![0, 0, 0x08, 0, 0, 0, 0, 0],
    };
    let mut v = Vec::new();
    frame(src, dst)
        .write(&mut v, IpNumber(proto), &payload)
        .unwrap();
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

fn down(members: &[(&str, &str)]) -> HealthState {
    let mut h = HealthState::new();
    for (pool, instance) in members {
        h.set_member(
            pool,
            instance,
            BackendHealth {
                healthy: false,
                weight: None,
            },
        );
    }
    h
}

/// What a packet did in the NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    backend: String,
    conntrack: CtOutcome,
    mac: [u8; 6],
}

struct Rig {
    sim: ModelHandle,
    engine: Engine,
    out: Vec<u8>,
}

impl Rig {
    fn new(text: &str) -> Rig {
        let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
        let opts = EngineOptions {
            // Time is the tests': no ageing pass on the wall clock.
            age_every: Duration::from_secs(1 << 30),
            ..EngineOptions::default()
        };
        let (engine, _) =
            Engine::start(Box::new(sim.clone()), config(text), &no_probes(), opts).unwrap();
        Rig {
            sim,
            engine,
            out: vec![0; 16384],
        }
    }

    fn name(&self, id: u16) -> String {
        self.engine
            .controller()
            .compiled()
            .symbols
            .backend(id)
            .unwrap_or("?")
            .to_string()
    }

    /// Sends one frame through the NIC (it must be forwarded).
    fn send(&mut self, frame: &[u8]) -> Sent {
        let r = self.sim.lock().receive(frame, &mut self.out).unwrap();
        assert_eq!(r.verdict, Verdict::Forward, "{r:?}");
        let backend = self.name(r.backend.expect("a backend"));
        Sent {
            backend,
            conntrack: r.conntrack,
            mac: dst_mac(&self.out[..r.out_len]),
        }
    }

    /// Sends frames in groups the learn queue holds (64 events on the sim profile), letting
    /// the engine install what the NIC learned after each group; returns where each went.
    fn establish(&mut self, frames: &[Vec<u8>]) -> Vec<Sent> {
        let mut sent = Vec::new();
        for group in frames.chunks(32) {
            for f in group {
                sent.push(self.send(f));
            }
            self.settle();
        }
        sent
    }

    /// Lets the engine handle every event the NIC queued.
    fn settle(&mut self) {
        for _ in 0..1000 {
            if !self.engine.step().busy() {
                return;
            }
        }
        panic!("the engine never went idle");
    }

    /// Connections in the table, per (protocol, backend name).
    fn table(&self) -> BTreeMap<(u8, String), usize> {
        let mut m = BTreeMap::new();
        for (_, e) in self.engine.connections().conntrack().scan() {
            *m.entry((e.protocol, self.name(e.backend))).or_insert(0) += 1;
        }
        m
    }

    fn on(&self, proto: u8, backend: &str) -> usize {
        self.table()
            .get(&(proto, backend.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn reload(&mut self, text: &str) -> ReloadReport {
        self.engine.reload(config(text), &no_probes()).unwrap()
    }

    fn drains(&self) -> BTreeMap<(String, String), Drain> {
        let symbols = &self.engine.controller().compiled().symbols;
        self.engine
            .connections()
            .drains()
            .iter()
            .map(|(&(r, b), d)| {
                (
                    (symbols.rule(r).unwrap_or("?").to_string(), self.name(b)),
                    *d,
                )
            })
            .collect()
    }
}

/// A target pool and two backend services over the same three instances, probed per pool
/// (SPEC R5.5): the target pool has no persistence setting (TCP stays, UDP moves), `never` is
/// NEVER_PERSIST, `always` ALWAYS_PERSIST.
const PERSISTENCE: &str = "
forwardingRules:
  - {name: legacy-tcp, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: legacy}
  - {name: legacy-udp, IPAddress: 203.0.113.10, IPProtocol: UDP, portRange: '53', target: legacy}
  - {name: never, IPAddress: 203.0.113.20, IPProtocol: TCP, portRange: '80', backendService: never}
  - {name: always, IPAddress: 203.0.113.30, IPProtocol: UDP, portRange: '53', backendService: always}
targetPools:
  - {name: legacy, region: r1, instances: [a, b, c], healthChecks: [legacy-hc]}
regionBackendServices:
  - name: never
    region: r1
    protocol: TCP
    healthChecks: [hc]
    connectionTrackingPolicy: {connectionPersistenceOnUnhealthyBackends: NEVER_PERSIST}
    backends: [{group: abc}]
  - name: always
    region: r1
    protocol: UDP
    healthChecks: [hc]
    connectionTrackingPolicy: {connectionPersistenceOnUnhealthyBackends: ALWAYS_PERSIST}
    backends: [{group: abc}]
instanceGroups:
  - {name: abc, zone: r1-a, instances: [a, b, c]}
httpHealthChecks:
  - {name: legacy-hc}
healthChecks:
  - {name: hc, type: TCP}
instances:
  - {name: a, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: r1-a, mac: '02:00:00:00:00:0c'}
";

const LEGACY: [u8; 4] = [203, 0, 113, 10];
const NEVER: [u8; 4] = [203, 0, 113, 20];
const ALWAYS: [u8; 4] = [203, 0, 113, 30];

/// compute v1 `connectionPersistenceOnUnhealthyBackends`, decided per pool: when `a` turns
/// unhealthy everywhere, NEVER_PERSIST moves `never`'s TCP connections off it, ALWAYS_PERSIST
/// keeps `always`'s UDP flows on it, and the target pool keeps its TCP and moves its UDP (as
/// before backend services). Before, one setting (DEFAULT_FOR_PROTOCOL) held for every pool.
/// When every endpoint of `never` is unhealthy there is nowhere to move to ("unless all
/// backends are unhealthy"): its connections stay.
#[test]
fn each_pool_keeps_or_moves_connections_by_its_own_persistence() {
    let mut rig = Rig::new(PERSISTENCE);
    let mut frames = Vec::new();
    for i in 0..60 {
        frames.push(tcp(LEGACY, 80, 10000 + i, true, false));
        frames.push(udp(CLIENT, LEGACY, 53, 20000 + i));
        frames.push(tcp(NEVER, 80, 30000 + i, true, false));
        frames.push(udp(CLIENT, ALWAYS, 53, 40000 + i));
    }
    rig.establish(&frames);
    let before = rig.table();
    for proto in [6, 17] {
        for b in ["a", "b", "c"] {
            assert!(rig.on(proto, b) > 0, "{proto} on {b}: {before:?}");
        }
    }
    let count = |rig: &Rig, rule: &str, backend: &str| -> usize {
        let c = rig.engine.controller().compiled();
        let (r, b) = (
            c.symbols.rule_id(rule).unwrap(),
            c.symbols.backend_id(backend).unwrap(),
        );
        rig.engine
            .connections()
            .conntrack()
            .scan()
            .filter(|(_, e)| e.rule == r && e.backend == b)
            .count()
    };
    let on_a: BTreeMap<&str, usize> = ["legacy-tcp", "legacy-udp", "never", "always"]
        .into_iter()
        .map(|r| (r, count(&rig, r, "a")))
        .collect();
    assert!(on_a.values().all(|&n| n > 0), "{on_a:?}");

    rig.engine
        .apply_health_state(down(&[("legacy", "a"), ("never", "a"), ("always", "a")]))
        .unwrap();
    assert_eq!(
        count(&rig, "legacy-tcp", "a"),
        on_a["legacy-tcp"],
        "target pool: TCP stays"
    );
    assert_eq!(count(&rig, "legacy-udp", "a"), 0, "target pool: UDP moves");
    assert_eq!(count(&rig, "never", "a"), 0, "NEVER_PERSIST: TCP moves");
    assert_eq!(
        count(&rig, "always", "a"),
        on_a["always"],
        "ALWAYS_PERSIST: UDP stays"
    );
    assert_eq!(
        rig.engine.connections().stats().evicted_unhealthy as usize,
        on_a["legacy-udp"] + on_a["never"]
    );
    // The NIC agrees: a moved flow's next packet misses and goes to a healthy backend, a kept
    // one hits `a`.
    let moved: Vec<u16> = (0..60)
        .filter(|&i| {
            let s = rig.send(&tcp(NEVER, 80, 30000 + i, false, false));
            s.conntrack == CtOutcome::Miss
        })
        .collect();
    assert_eq!(moved.len(), on_a["never"]);
    for i in moved {
        let s = rig.send(&tcp(NEVER, 80, 30000 + i, false, false));
        assert_ne!(s.backend, "a", "flow {i}: {s:?}");
    }
    rig.settle();
    let kept = (0..60)
        .map(|i| rig.send(&udp(CLIENT, ALWAYS, 53, 40000 + i)))
        .filter(|s| s.backend == "a")
        .collect::<Vec<_>>();
    assert_eq!(kept.len(), on_a["always"]);
    assert!(kept.iter().all(|s| s.conntrack == CtOutcome::Hit));

    // Every endpoint of `never` unhealthy: its connections have nowhere better to go.
    let never_bc = count(&rig, "never", "b") + count(&rig, "never", "c");
    assert!(never_bc > 0);
    rig.engine
        .apply_health_state(down(&[
            ("legacy", "a"),
            ("never", "a"),
            ("never", "b"),
            ("never", "c"),
            ("always", "a"),
        ]))
        .unwrap();
    assert_eq!(
        count(&rig, "never", "b") + count(&rig, "never", "c"),
        never_bc,
        "NEVER_PERSIST with every backend unhealthy: connections stay"
    );
}

/// An `L3_DEFAULT` rule to a service of protocol UNSPECIFIED with DEFAULT_FOR_PROTOCOL: "the
/// existing connections persist on unhealthy backends only for connection-oriented protocols
/// (TCP and SCTP) ... They do not persist for UDP" (nor for ICMP or GRE). Before, only
/// protocol 6 stayed.
#[test]
fn sctp_and_tcp_stay_and_udp_icmp_gre_move_under_default_for_protocol() {
    let mut rig = Rig::new(
        "
forwardingRules:
  - {name: all, IPAddress: 203.0.113.90, IPProtocol: L3_DEFAULT, allPorts: true, backendService: edge}
regionBackendServices:
  - name: edge
    region: r1
    protocol: UNSPECIFIED
    healthChecks: [hc]
    backends: [{group: abc}]
instanceGroups:
  - {name: abc, zone: r1-a, instances: [a, b, c]}
healthChecks:
  - {name: hc, type: TCP}
instances:
  - {name: a, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: r1-a, mac: '02:00:00:00:00:0c'}
",
    );
    let vip = [203, 0, 113, 90];
    let protos = [6u8, 17, 132, 1, 47];
    let mut frames = Vec::new();
    for i in 1..=40u8 {
        let src = [198, 51, 100, i];
        frames.push(tcp(vip, 80, 1000 + u16::from(i), true, false));
        frames.push(udp(src, vip, 53, 5353));
        for p in [132, 1, 47] {
            frames.push(portless(src, vip, p));
        }
    }
    rig.establish(&frames);
    let before = rig.table();
    for p in protos {
        assert!(rig.on(p, "a") > 0, "protocol {p} on a: {before:?}");
    }
    rig.engine
        .apply_health_state(down(&[("edge", "a")]))
        .unwrap();
    for (p, stays) in [(6, true), (132, true), (17, false), (1, false), (47, false)] {
        let want = if stays {
            before[&(p, "a".to_string())]
        } else {
            0
        };
        assert_eq!(rig.on(p, "a"), want, "protocol {p}");
        for other in ["b", "c"] {
            assert_eq!(
                rig.on(p, other),
                before.get(&(p, other.to_string())).copied().unwrap_or(0),
                "protocol {p} on {other} is not touched"
            );
        }
    }
    // The SCTP flows on `a` keep reaching it through the connection table.
    let mut sctp_on_a = 0;
    for i in 1..=40u8 {
        let s = rig.send(&portless([198, 51, 100, i], vip, 132));
        if s.backend == "a" {
            assert_eq!(s.conntrack, CtOutcome::Hit);
            sctp_on_a += 1;
        }
    }
    assert_eq!(sctp_on_a, before[&(132, "a".to_string())]);
}

/// `connectionTrackingPolicy.idleTimeoutSec` per service reaches the ageing, next to a target
/// pool's `idleTimeoutSec`.
#[test]
fn each_service_ages_by_its_own_idle_timeout() {
    let mut rig = Rig::new(
        "
forwardingRules:
  - {name: quick, IPAddress: 203.0.113.20, IPProtocol: TCP, portRange: '80', backendService: quick}
  - {name: slow, IPAddress: 203.0.113.30, IPProtocol: UDP, portRange: '53', backendService: slow}
  - {name: legacy, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: legacy}
targetPools:
  - {name: legacy, region: r1, instances: [a, b], idleTimeoutSec: 30}
regionBackendServices:
  - name: quick
    region: r1
    protocol: TCP
    connectionTrackingPolicy: {idleTimeoutSec: 5}
    backends: [{group: ab}]
  - name: slow
    region: r1
    protocol: UDP
    connectionTrackingPolicy: {idleTimeoutSec: 300}
    backends: [{group: ab}]
instanceGroups:
  - {name: ab, zone: r1-a, instances: [a, b]}
instances:
  - {name: a, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:0b'}
",
    );
    let t0 = host_secs();
    let mut frames = Vec::new();
    for i in 0..10 {
        frames.push(tcp(NEVER, 80, 1000 + i, true, false));
        frames.push(udp(CLIENT, ALWAYS, 53, 2000 + i));
        frames.push(tcp(LEGACY, 80, 3000 + i, true, false));
    }
    rig.establish(&frames);
    let t1 = host_secs();
    let total = |rig: &Rig| rig.engine.connections().conntrack().valid_count();
    assert_eq!(total(&rig), 30);
    rig.engine.age_at(t0 + 4);
    assert_eq!(total(&rig), 30);
    rig.engine.age_at(t1 + 5);
    assert_eq!(total(&rig), 20, "quick (5 s) aged out");
    rig.engine.age_at(t0 + 29);
    assert_eq!(total(&rig), 20);
    rig.engine.age_at(t1 + 30);
    assert_eq!(total(&rig), 10, "the target pool (30 s) aged out");
    assert!(rig.table().keys().all(|(p, _)| *p == 17));
    rig.engine.age_at(t0 + 299);
    assert_eq!(total(&rig), 10);
    rig.engine.age_at(t1 + 300);
    assert_eq!(total(&rig), 0, "slow (300 s) aged out");
}

/// A backend service draining for 30 s over two instance groups.
const DRAINING: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', backendService: web}
regionBackendServices:
  - name: web
    region: r1
    protocol: TCP
    connectionDraining: {drainingTimeoutSec: 30}
    backends:
      - {group: ig-a}
      - {group: ig-b}
instanceGroups:
  - {name: ig-a, zone: r1-a, instances: [a1, a2, a3]}
  - {name: ig-b, zone: r1-a, instances: [b1]}
instances:
  - {name: a1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:a1'}
  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:a2'}
  - {name: a3, ip: 192.0.2.3, zone: r1-a, mac: '02:00:00:00:00:a3'}
  - {name: b1, ip: 192.0.2.4, zone: r1-a, mac: '02:00:00:00:00:b1'}
";

const WEB: [u8; 4] = [203, 0, 113, 80];
const FLOWS: u16 = 120;

fn without_a2_in_its_group(text: &str) -> String {
    text.replace("instances: [a1, a2, a3]}", "instances: [a1, a3]}")
}

fn without_a2(text: &str) -> String {
    without_a2_in_its_group(text).replace(
        "  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:a2'}\n",
        "",
    )
}

/// Establishes `FLOWS` connections to `web` (source ports 40000 on); returns the ports of
/// those on `a2`.
fn establish_web(rig: &mut Rig) -> Vec<u16> {
    let frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| tcp(WEB, 80, 40000 + i, true, false))
        .collect();
    let sent = rig.establish(&frames);
    assert_eq!(
        rig.engine.connections().conntrack().valid_count(),
        usize::from(FLOWS)
    );
    let on_a2: Vec<u16> = (0..FLOWS)
        .filter(|&i| sent[usize::from(i)].backend == "a2")
        .map(|i| 40000 + i)
        .collect();
    assert!(on_a2.len() >= 5, "{} flows on a2", on_a2.len());
    on_a2
}

/// The one drain a test expects: (rule web, backend), its deadline within the reload's second.
fn drain_of(rig: &Rig, backend: &str, cause: DrainCause, secs: u32, t0: u32, t1: u32) -> u32 {
    let drains = rig.drains();
    let d = drains
        .get(&("web".to_string(), backend.to_string()))
        .unwrap_or_else(|| panic!("no drain of {backend}: {drains:?}"));
    assert_eq!(d.cause, cause);
    assert!(
        (t0 + secs..=t1 + secs).contains(&d.deadline),
        "{d:?} not within [{t0}, {t1}] + {secs}"
    );
    d.deadline
}

/// "Enable connection draining": an instance removed from a group drains: no new connection
/// goes to it, its established ones continue for `drainingTimeoutSec`, then they end (their
/// next packets choose again). Before, a reload left them on the removed instance for as long
/// as they lived.
#[test]
fn an_instance_removed_from_its_group_drains_then_its_connections_end() {
    let mut rig = Rig::new(DRAINING);
    let on_a2 = establish_web(&mut rig);
    let t0 = host_secs();
    let report = rig.reload(&without_a2_in_its_group(DRAINING));
    let t1 = host_secs();
    assert_eq!((report.evicted, report.draining), (0, 1), "{report:?}");
    let deadline = drain_of(&rig, "a2", DrainCause::Removed, 30, t0, t1);
    // Established connections keep reaching a2; new ones never do.
    for &p in &on_a2 {
        let s = rig.send(&tcp(WEB, 80, p, false, false));
        assert_eq!((s.backend.as_str(), s.conntrack), ("a2", CtOutcome::Hit));
    }
    let fresh: Vec<Vec<u8>> = (0..200)
        .map(|i| tcp(WEB, 80, 50000 + i, true, false))
        .collect();
    assert!(rig.establish(&fresh).iter().all(|s| s.backend != "a2"));
    rig.engine.expire_drains(deadline - 1);
    assert_eq!(rig.on(6, "a2"), on_a2.len());
    rig.engine.expire_drains(deadline);
    assert_eq!(rig.on(6, "a2"), 0);
    let stats = rig.engine.connections().stats();
    assert_eq!(stats.evicted_drained as usize, on_a2.len());
    assert!(rig.drains().is_empty());
    for &p in &on_a2 {
        let s = rig.send(&tcp(WEB, 80, p, false, false));
        assert_eq!(s.conntrack, CtOutcome::Miss);
        assert_ne!(s.backend, "a2");
    }
}

/// Deleting the instance (as an autoscaler deletes a VM) drains it too: its backend entry stays
/// in the tables while its connections drain, so the NIC keeps delivering them to its MAC, and
/// leaves with them. Before, the reload evicted them at once.
#[test]
fn a_deleted_instance_keeps_delivering_until_its_drain_ends() {
    let mut rig = Rig::new(DRAINING);
    let on_a2 = establish_web(&mut rig);
    let a2 = rig
        .engine
        .controller()
        .compiled()
        .symbols
        .backend_id("a2")
        .unwrap();
    let t0 = host_secs();
    let report = rig.reload(&without_a2(DRAINING));
    let t1 = host_secs();
    assert_eq!((report.evicted, report.draining), (0, 1), "{report:?}");
    assert_eq!(rig.engine.status(false).kept_backends, 1);
    let deadline = drain_of(&rig, "a2", DrainCause::Removed, 30, t0, t1);
    for &p in &on_a2 {
        let s = rig.send(&tcp(WEB, 80, p, false, false));
        assert_eq!(s.conntrack, CtOutcome::Hit);
        assert_eq!(s.mac, [2, 0, 0, 0, 0, 0xa2], "delivered to a2's MAC");
    }
    rig.engine.expire_drains(deadline);
    assert_eq!(rig.on(6, "a2"), 0);
    let status = rig.engine.status(false);
    assert_eq!((status.kept_backends, status.draining_pairs), (0, 0));
    // Its entry is gone from the tables the device serves, and its name from the compile.
    assert!(!rig.engine.controller().serving().backends[usize::from(a2)].valid);
    let bank = rig.engine.controller().loader().active_bank();
    assert!(!rig.sim.lock().bank(bank).backends[usize::from(a2)].valid);
    assert_eq!(rig.engine.controller().compiled().symbols.backend(a2), None);
}

/// A connection that ends during the drain (FIN, then the closed timeout, 10 s) leaves as
/// usual; at the deadline only the others are evicted.
#[test]
fn a_connection_that_ends_first_leaves_before_the_deadline() {
    let mut rig = Rig::new(DRAINING);
    let on_a2 = establish_web(&mut rig);
    let t0 = host_secs();
    rig.reload(&without_a2_in_its_group(DRAINING));
    let t1 = host_secs();
    let deadline = drain_of(&rig, "a2", DrainCause::Removed, 30, t0, t1);
    let ending = on_a2[0];
    rig.send(&tcp(WEB, 80, ending, false, true));
    rig.settle();
    assert_eq!(rig.engine.connections().stats().closed, 1);
    // The FIN refreshed the entry: it is closed at the first pass after it.
    rig.engine.age_at(t1 + 1);
    rig.engine.age_at(t1 + 12);
    assert_eq!(rig.on(6, "a2"), on_a2.len() - 1, "the closed one aged out");
    assert_eq!(rig.engine.connections().stats().aged_out, 1);
    assert!(deadline > t1 + 12);
    rig.engine.expire_drains(deadline);
    assert_eq!(rig.on(6, "a2"), 0);
    assert_eq!(
        rig.engine.connections().stats().evicted_drained as usize,
        on_a2.len() - 1
    );
}

/// A reload that puts the instance back while it drains (deleted, then added again with the
/// same address and MAC) ends the drain: it is a member again and keeps its connections (and
/// its id). Before, the first reload evicted them.
#[test]
fn an_instance_added_back_while_draining_keeps_its_connections() {
    let mut rig = Rig::new(DRAINING);
    let on_a2 = establish_web(&mut rig);
    let a2 = rig.engine.controller().compiled().symbols.backend_id("a2");
    rig.reload(&without_a2(DRAINING));
    assert_eq!(rig.drains().len(), 1);
    let report = rig.reload(DRAINING);
    assert_eq!((report.evicted, report.draining), (0, 0), "{report:?}");
    assert!(rig.drains().is_empty(), "{:?}", rig.drains());
    assert_eq!(rig.engine.status(false).kept_backends, 0);
    assert_eq!(
        rig.engine.controller().compiled().symbols.backend_id("a2"),
        a2
    );
    rig.engine.expire_drains(host_secs() + 3600);
    assert_eq!(rig.on(6, "a2"), on_a2.len());
    for &p in &on_a2 {
        let s = rig.send(&tcp(WEB, 80, p, false, false));
        assert_eq!((s.backend.as_str(), s.conntrack), ("a2", CtOutcome::Hit));
    }
}

/// What does not drain ends at the reload: a group disconnected from the service (Google
/// Cloud does not drain that for passthrough load balancers), and any removal when
/// `drainingTimeoutSec` is 0 (draining disabled). Before, both stayed on the instance, which
/// is no member of the service any more.
#[test]
fn a_disconnected_group_and_a_zero_timeout_end_connections_at_once() {
    let mut rig = Rig::new(DRAINING);
    establish_web(&mut rig);
    let on_b1 = rig.on(6, "b1");
    assert!(on_b1 > 0);
    let report = rig.reload(&DRAINING.replace("      - {group: ig-b}\n", ""));
    assert_eq!((report.evicted, report.draining), (on_b1, 0), "{report:?}");
    assert_eq!(rig.on(6, "b1"), 0);

    let zero = DRAINING.replace("{drainingTimeoutSec: 30}", "{drainingTimeoutSec: 0}");
    let mut rig = Rig::new(&zero);
    let on_a2 = establish_web(&mut rig);
    let report = rig.reload(&without_a2_in_its_group(&zero));
    assert_eq!(
        (report.evicted, report.draining),
        (on_a2.len(), 0),
        "{report:?}"
    );
    assert_eq!(rig.on(6, "a2"), 0);
    assert_eq!(
        rig.engine.connections().stats().evicted_reload as usize,
        on_a2.len()
    );
}

/// A TCP service with four primary endpoints and two failover ones; failover below half
/// healthy.
fn failover_config(disable_drain: bool) -> String {
    format!(
        "
forwardingRules:
  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', backendService: app}}
regionBackendServices:
  - name: app
    region: r1
    protocol: TCP
    healthChecks: [hc]
    failoverPolicy: {{failoverRatio: 0.5, disableConnectionDrainOnFailover: {disable_drain}}}
    backends:
      - {{group: primary}}
      - {{group: standby, failover: true}}
instanceGroups:
  - {{name: primary, zone: r1-a, instances: [p1, p2, p3, p4]}}
  - {{name: standby, zone: r1-a, instances: [s1, s2]}}
healthChecks:
  - {{name: hc, type: TCP}}
instances:
  - {{name: p1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:01'}}
  - {{name: p2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:02'}}
  - {{name: p3, ip: 192.0.2.3, zone: r1-a, mac: '02:00:00:00:00:03'}}
  - {{name: p4, ip: 192.0.2.4, zone: r1-a, mac: '02:00:00:00:00:04'}}
  - {{name: s1, ip: 192.0.2.5, zone: r1-a, mac: '02:00:00:00:00:05'}}
  - {{name: s2, ip: 192.0.2.6, zone: r1-a, mac: '02:00:00:00:00:06'}}
"
    )
}

const PRIMARY: [&str; 4] = ["p1", "p2", "p3", "p4"];
const STANDBY: [&str; 2] = ["s1", "s2"];

fn on_set(rig: &Rig, set: &[&str]) -> usize {
    set.iter().map(|b| rig.on(6, b)).sum()
}

/// Three of four primaries unhealthy: 1/4 is below 0.5, the failover backends serve.
fn fail_over(rig: &mut Rig) {
    rig.engine
        .apply_health_state(down(&[("app", "p1"), ("app", "p2"), ("app", "p3")]))
        .unwrap();
    assert!(rig.engine.controller().serving().pools[0].failed_over);
}

fn fail_back(rig: &mut Rig) {
    rig.engine.apply_health_state(HealthState::new()).unwrap();
    assert!(!rig.engine.controller().serving().pools[0].failed_over);
}

/// compute v1 `disableConnectionDrainOnFailover: true` "terminates existing TCP connections to
/// the active pool during failover and failback": at the failover every primary connection
/// ends (the healthy p4's too, and the unhealthy ones' that DEFAULT_FOR_PROTOCOL would keep);
/// their next packets go to the failover backends. At the failback the connections made
/// during the failover end. Before, both stayed.
#[test]
fn without_drain_on_failover_the_stopped_set_loses_its_connections_at_once() {
    let mut rig = Rig::new(&failover_config(true));
    let frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| tcp(WEB, 80, 40000 + i, true, false))
        .collect();
    rig.establish(&frames);
    assert_eq!(on_set(&rig, &PRIMARY), usize::from(FLOWS));
    assert!(rig.on(6, "p4") > 0);
    fail_over(&mut rig);
    assert_eq!(on_set(&rig, &PRIMARY), 0);
    assert_eq!(
        rig.engine.connections().stats().evicted_failover,
        u64::from(FLOWS)
    );
    // Their next packets choose again, among the failover backends, and are learned there.
    let moved: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| tcp(WEB, 80, 40000 + i, false, false))
        .collect();
    for s in rig.establish(&moved) {
        assert_eq!(s.conntrack, CtOutcome::Miss);
        assert!(STANDBY.contains(&s.backend.as_str()), "{s:?}");
    }
    assert_eq!(on_set(&rig, &STANDBY), usize::from(FLOWS));
    fail_back(&mut rig);
    assert_eq!(
        on_set(&rig, &STANDBY),
        0,
        "failback: the failover set's end too"
    );
    assert_eq!(
        rig.engine.connections().stats().evicted_failover,
        2 * u64::from(FLOWS)
    );
    assert!(rig.drains().is_empty());
}

/// `disableConnectionDrainOnFailover: false` (the default) "allows existing TCP connections to
/// persist, even on VMs no longer in the active pool, for up to the duration of the connection
/// draining timeout (10 minutes)": at the failover the primary connections drain for 600 s
/// (kept meanwhile, also on the unhealthy primaries); a failback before then ends their drain
/// (they serve again) and starts one for the failover set's connections, which end at its
/// deadline while the primary ones stay. Before, nothing ever ended them.
#[test]
fn with_drain_on_failover_the_stopped_set_drains_for_ten_minutes_and_a_failback_resumes() {
    let mut rig = Rig::new(&failover_config(false));
    let frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| tcp(WEB, 80, 40000 + i, true, false))
        .collect();
    rig.establish(&frames);
    let t0 = host_secs();
    fail_over(&mut rig);
    let t1 = host_secs();
    assert_eq!(
        on_set(&rig, &PRIMARY),
        usize::from(FLOWS),
        "kept while draining"
    );
    let drains = rig.drains();
    assert_eq!(
        drains.keys().map(|(_, b)| b.as_str()).collect::<Vec<_>>(),
        PRIMARY
    );
    for d in drains.values() {
        assert_eq!(d.cause, DrainCause::Failover);
        assert!((t0 + 600..=t1 + 600).contains(&d.deadline), "{d:?}");
    }
    // Established connections keep their primaries meanwhile; new ones go to the standbys.
    for i in 0..FLOWS {
        let s = rig.send(&tcp(WEB, 80, 40000 + i, false, false));
        assert_eq!(s.conntrack, CtOutcome::Hit);
        assert!(PRIMARY.contains(&s.backend.as_str()));
    }
    let fresh: Vec<Vec<u8>> = (0..60)
        .map(|i| tcp(WEB, 80, 50000 + i, true, false))
        .collect();
    assert!(rig
        .establish(&fresh)
        .iter()
        .all(|s| STANDBY.contains(&s.backend.as_str())));
    let on_standby = on_set(&rig, &STANDBY);
    assert_eq!(on_standby, 60);

    let t2 = host_secs();
    fail_back(&mut rig);
    let t3 = host_secs();
    let drains = rig.drains();
    assert_eq!(
        drains.keys().map(|(_, b)| b.as_str()).collect::<Vec<_>>(),
        STANDBY,
        "the primaries serve again: their drain ended"
    );
    let deadline = drains.values().map(|d| d.deadline).max().unwrap();
    assert!((t2 + 600..=t3 + 600).contains(&deadline));
    rig.engine.expire_drains(deadline - 1);
    assert_eq!(on_set(&rig, &STANDBY), on_standby);
    rig.engine.expire_drains(deadline);
    assert_eq!(on_set(&rig, &STANDBY), 0);
    assert_eq!(on_set(&rig, &PRIMARY), usize::from(FLOWS));
    let stats = rig.engine.connections().stats();
    assert_eq!((stats.evicted_drained, stats.evicted_failover), (60, 0));
}

/// A restart while a deleted instance drains: drains live in nlbd's memory and are not
/// resumed, and the new tables have no entry for the instance. The restarted engine evicts its
/// connections at start, so their next packets choose again instead of being dropped (before,
/// the NIC dropped them until they idled out).
#[test]
fn a_restart_evicts_connections_the_tables_cannot_deliver() {
    let mut rig = Rig::new(DRAINING);
    let on_a2 = establish_web(&mut rig);
    rig.reload(&without_a2(DRAINING));
    assert_eq!(rig.on(6, "a2"), on_a2.len());
    let Rig { sim, engine, out } = rig;
    drop(engine);
    let opts = EngineOptions {
        age_every: Duration::from_secs(1 << 30),
        ..EngineOptions::default()
    };
    let (engine, _) = Engine::start(
        Box::new(sim.clone()),
        config(&without_a2(DRAINING)),
        &no_probes(),
        opts,
    )
    .unwrap();
    let mut rig = Rig { sim, engine, out };
    assert_eq!(
        rig.engine.connections().conntrack().valid_count(),
        usize::from(FLOWS) - on_a2.len()
    );
    assert_eq!(
        rig.engine.connections().stats().evicted_reload as usize,
        on_a2.len()
    );
    for &p in &on_a2 {
        let s = rig.send(&tcp(WEB, 80, p, false, false));
        assert_eq!(s.conntrack, CtOutcome::Miss);
        assert_ne!(s.backend, "a2");
    }
}
