//! No blackhole on a rolling update (SPEC R10.5), in the slow-path engine on
//! the simulated NIC: an EndpointSlice update in which a node's only pod starts terminating is
//! compiled and applied as one delta load, after which no new connection goes to that node while
//! its established connections still do; when every pod is terminating the nodes with
//! terminating pods take new connections again (SPEC R3.4 fail open, GKE's proxy
//! terminating endpoints, SPEC R7.2).
//!
//! Which node a packet reached is read from the frame the NIC sent (its destination MAC, decoded
//! with etherparse: L2 delivery with the MACs of the project document), not from the
//! pipeline's ids.

use etherparse::{PacketBuilder, SlicedPacket};
use flowtable_compiler::Config;
use nlb_config::kube::Source;
use nlb_config::parse_sources;
use nlb_driver::model::{lock, ModelHandle};
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use nlbd::engine::{Engine, EngineOptions};
use nlbd::health::HealthSnapshot;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const NODES: [(&str, u8); 3] = [("node-a", 0xa), ("node-b", 0xb), ("node-c", 0xc)];

/// The cluster with the Service's pods as (node, ready, serving, terminating).
fn manifests(pods: &[(&str, bool, bool, bool)]) -> Config {
    manifests_in(["zone-a"; 3], pods)
}

/// [`manifests`] with the nodes of `NODES` in `zones`.
fn manifests_in(zones: [&str; 3], pods: &[(&str, bool, bool, bool)]) -> Config {
    let mut s = String::from(
        "nic: {mac: '02:00:00:00:00:01'}\nkubernetes:\n  delivery: L2_DSR\n  nodeMacs:\n",
    );
    for (n, m) in NODES {
        let _ = writeln!(s, "    {n}: '02:00:00:00:0a:{m:02x}'");
    }
    for ((n, m), zone) in NODES.into_iter().zip(zones) {
        let _ = write!(
            s,
            "---
apiVersion: v1
kind: Node
metadata: {{name: {n}, labels: {{topology.kubernetes.io/zone: {zone}}}}}
status:
  addresses: [{{type: InternalIP, address: 10.0.0.{m}}}]
  conditions: [{{type: Ready, status: 'True'}}]
"
        );
    }
    s.push_str(
        "---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, uid: 3f1c2d4e-0000-4000-8000-00000000000a}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 31999
  loadBalancerIP: 203.0.113.10
  ports: [{port: 80, protocol: TCP, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata:
  name: web-x1
  namespace: shop
  labels: {kubernetes.io/service-name: web}
endpoints:
",
    );
    for (i, (n, ready, serving, terminating)) in pods.iter().enumerate() {
        let _ = write!(
            s,
            "- addresses: [10.52.0.{}]\n  nodeName: {n}\n  conditions: {{ready: {ready}, serving: {serving}, terminating: {terminating}}}\n",
            i + 1
        );
    }
    let (c, d) = parse_sources(&[Source {
        name: "cluster.yaml".into(),
        text: s,
    }]);
    assert!(d.is_empty(), "{d}");
    c
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

/// The node a frame the NIC sent went to, by its destination MAC.
fn node_of(frame: &[u8]) -> &'static str {
    let p = SlicedPacket::from_ethernet(frame).expect("the NIC sent a valid frame");
    let mac = match p.link {
        Some(etherparse::LinkSlice::Ethernet2(e)) => e.destination(),
        other => panic!("not Ethernet: {other:?}"),
    };
    NODES
        .iter()
        .find(|(_, m)| mac == [2, 0, 0, 0, 0xa, *m])
        .map(|(n, _)| *n)
        .unwrap_or_else(|| panic!("to no node: {mac:02x?}"))
}

#[test]
fn a_terminating_pod_takes_its_node_out_of_new_connections_in_one_delta_load() {
    let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
    let snapshot = HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    };
    let ready = |n| (n, true, true, false);
    let terminating = |n| (n, false, true, true);
    let (mut engine, _) = Engine::start(
        Box::new(sim.clone()),
        manifests(&[ready("node-a"), ready("node-b"), ready("node-c")]),
        &snapshot,
        EngineOptions::default(),
    )
    .unwrap();
    let shared = sim.shared();
    let mut out = vec![0u8; 16384];
    let mut send = |sport: u16, syn: bool| -> &'static str {
        let r = lock(&shared).receive(&tcp(sport, syn), &mut out).unwrap();
        assert_eq!(r.verdict, Verdict::Forward, "sport {sport}");
        node_of(&out[..r.out_len])
    };

    // Established connections on every node, installed by the engine.
    let mut owner: HashMap<u16, &str> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    for group in (0..192u16).collect::<Vec<_>>().chunks(32) {
        for &i in group {
            owner.insert(40000 + i, send(40000 + i, true));
        }
        while engine.connections().conntrack().valid_count() < owner.len() {
            engine.step();
            assert!(Instant::now() < deadline, "connections not installed");
        }
    }
    let on: BTreeSet<&str> = owner.values().copied().collect();
    assert_eq!(on, ["node-a", "node-b", "node-c"].into());

    // The rolling update begins: node-b's pod is terminating (still serving).
    let started = Instant::now();
    let report = engine
        .reload(
            manifests(&[ready("node-a"), terminating("node-b"), ready("node-c")]),
            &snapshot,
        )
        .unwrap();
    let took = started.elapsed();
    println!(
        "EndpointSlice update -> tables active: {:.2} ms, {} entries written",
        took.as_secs_f64() * 1e3,
        report.changed_entries
    );
    // A delta: node-b stays a backend (its connections keep their entry and id); only the
    // Maglev slots that change are rewritten, fewer than the service's slice holds.
    assert_eq!(report.evicted, 0);
    assert_eq!(report.remapped, 0);
    let slice = engine.controller().serving().pools[0].maglev_size as usize;
    assert!(
        report.changed_entries > 0 && report.changed_entries < slice,
        "{report:?} (a slice of {slice})"
    );

    // Established connections, node-b's too, keep their node (SPEC R4.1, R10.5).
    for (&sport, &node) in &owner {
        assert_eq!(send(sport, false), node, "established sport {sport}");
    }
    // No new connection goes to node-b.
    let mut fresh: BTreeMap<&str, usize> = BTreeMap::new();
    for i in 0..600u16 {
        *fresh.entry(send(50000 + i, true)).or_default() += 1;
    }
    assert_eq!(
        fresh.keys().copied().collect::<Vec<_>>(),
        ["node-a", "node-c"],
        "{fresh:?}"
    );

    // Every pod terminating (no ready one anywhere): the nodes with terminating pods take new
    // connections again (fail open, proxy terminating endpoints).
    let report = engine
        .reload(
            manifests(&[
                terminating("node-a"),
                terminating("node-b"),
                terminating("node-c"),
            ]),
            &snapshot,
        )
        .unwrap();
    assert_eq!(report.evicted, 0);
    let mut fresh: BTreeSet<&str> = BTreeSet::new();
    for i in 0..300u16 {
        fresh.insert(send(52000 + i, true));
    }
    assert_eq!(fresh, ["node-a", "node-b", "node-c"].into());

    // New pods ready on node-b again: it takes new connections again.
    engine
        .reload(
            manifests(&[terminating("node-a"), ready("node-b"), ready("node-c")]),
            &snapshot,
        )
        .unwrap();
    let mut fresh: BTreeSet<&str> = BTreeSet::new();
    for i in 0..300u16 {
        fresh.insert(send(54000 + i, true));
    }
    assert_eq!(fresh, ["node-b", "node-c"].into());
    // And the first connections still reach their nodes.
    for (&sport, &node) in &owner {
        assert_eq!(send(sport, false), node, "established sport {sport}");
    }
}

/// SPEC R7.1 through the slow path on the simulated NIC: a rolling update on a `Local`
/// Service whose nodes are in two zones (node-a and node-b in zone-a, node-c in zone-b). When
/// node-b's pod starts terminating, the two nodes left share new connections equally, as a
/// passthrough load balancer spreads them over its healthy backends (MAGLEV, no service LB
/// policy), not two thirds to node-a because its zone had two members. Counted from the
/// frames the NIC sent.
#[test]
fn a_rolling_update_across_zones_leaves_equal_shares_on_the_nic() {
    let zones = ["zone-a", "zone-a", "zone-b"];
    let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
    let snapshot = HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    };
    let ready = |n| (n, true, true, false);
    let terminating = |n| (n, false, true, true);
    let (mut engine, _) = Engine::start(
        Box::new(sim.clone()),
        manifests_in(zones, &[ready("node-a"), ready("node-b"), ready("node-c")]),
        &snapshot,
        EngineOptions::default(),
    )
    .unwrap();
    engine
        .reload(
            manifests_in(
                zones,
                &[ready("node-a"), terminating("node-b"), ready("node-c")],
            ),
            &snapshot,
        )
        .unwrap();
    let shared = sim.shared();
    let mut out = vec![0u8; 16384];
    let mut fresh: BTreeMap<&str, usize> = BTreeMap::new();
    let n = 4000u16;
    for i in 0..n {
        let r = lock(&shared)
            .receive(&tcp(20000 + i, true), &mut out)
            .unwrap();
        assert_eq!(r.verdict, Verdict::Forward);
        *fresh.entry(node_of(&out[..r.out_len])).or_default() += 1;
    }
    assert_eq!(
        fresh.keys().copied().collect::<Vec<_>>(),
        ["node-a", "node-c"],
        "{fresh:?}"
    );
    // Half each, within four standard deviations of a binomial share of 1/2 over n SYNs.
    let tolerance = 4.0 * (0.25 / f64::from(n)).sqrt();
    let a = fresh["node-a"] as f64 / f64::from(n);
    assert!((a - 0.5).abs() < tolerance, "{fresh:?}");
}
