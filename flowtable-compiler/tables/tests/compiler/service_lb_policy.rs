//! The service LB policy where a backend service names one (SPEC R6), held to Google Cloud's
//! "Advanced load balancing optimizations" page (load-balancing algorithms, automatic capacity
//! drain, failover threshold, traffic isolation), quoted in each test. The compiler decides
//! with no live connections, so nothing is full.

use flowtable_compiler::{compile, BackendHealth, CompileOptions, Compiled, HealthState};
use nlb_config::parse_config;

fn build(text: &str, health: &HealthState) -> Compiled {
    let (c, d) = parse_config("t.yaml", text);
    assert!(d.is_empty(), "{d}");
    compile(&c, health, &CompileOptions::default()).expect("compiles")
}

fn down(h: &mut HealthState, pool: &str, members: &[&str]) {
    for m in members {
        h.set_member(
            pool,
            m,
            BackendHealth {
                healthy: false,
                weight: None,
            },
        );
    }
}

fn group_share(c: &Compiled, group: &str) -> f64 {
    let d = c.service_decision("web").expect("a decision");
    d.groups
        .iter()
        .find(|g| g.name == group)
        .unwrap_or_else(|| panic!("no group {group}: {d:?}"))
        .share
}

/// The NIC in r1-a; in r1 `own` (r1-a, 100 connections) and `other` (r1-b, 300); `far` in r2
/// (1000). ALGORITHM is replaced.
const ZONES: &str = "\
nic: {region: r1, zone: r1-a, regionOrder: [r2]}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}
serviceLbPolicies:
  - {name: p, loadBalancingAlgorithm: ALGORITHM}
backendServices:
  - name: web
    serviceLbPolicy: p
    healthChecks: [hc]
    backends:
      - {group: own, maxConnections: 100}
      - {group: other, maxConnections: 300}
      - {group: far, maxConnections: 1000}
healthChecks:
  - {name: hc, type: TCP, tcpHealthCheck: {port: 80}}
instanceGroups:
  - {name: own, zone: r1-a, instances: [o1]}
  - {name: other, zone: r1-b, instances: [t1]}
  - {name: far, zone: r2-a, instances: [f1]}
instances:
  - {name: o1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:01'}
  - {name: t1, ip: 192.0.2.2, zone: r1-b, mac: '02:00:00:00:00:02'}
  - {name: f1, ip: 192.0.2.3, zone: r2-a, mac: '02:00:00:00:00:03'}
";

/// WATERFALL_BY_REGION: "each second-layer GFE prefers to select backend instances or
/// endpoints in a zone that's as close as possible to it... at low request rates, each
/// second-layer GFE might exclusively send requests to backends in its preferred zone".
/// SPRAY_TO_REGION: "each second-layer GFE has no preference for selecting backends in a zone
/// that's as close as possible to it... sends requests to backends in all zones of the
/// region", filled by capacity. With nothing live (the lowest load there is), the NIC's own
/// zone takes everything under WATERFALL_BY_REGION, and the region's zones share by capacity
/// (1 : 3) under SPRAY_TO_REGION; the next region gets nothing under either (SPEC R6.1).
#[test]
fn waterfall_by_region_prefers_the_nics_zone_and_spray_to_region_does_not() {
    let c = build(
        &ZONES.replace("ALGORITHM", "WATERFALL_BY_REGION"),
        &HealthState::new(),
    );
    assert_eq!(
        (
            group_share(&c, "own"),
            group_share(&c, "other"),
            group_share(&c, "far")
        ),
        (1.0, 0.0, 0.0)
    );
    let c = build(
        &ZONES.replace("ALGORITHM", "SPRAY_TO_REGION"),
        &HealthState::new(),
    );
    assert!((group_share(&c, "own") - 0.25).abs() < 1e-9);
    assert!((group_share(&c, "other") - 0.75).abs() < 1e-9);
    assert_eq!(group_share(&c, "far"), 0.0);
}

/// Eight groups in the NIC's region (1000 connections each, no isolation needed); SICK groups
/// have one healthy endpoint of five (20 %).
fn drain_config() -> String {
    let mut s = String::from(
        "\
nic: {region: r1, zone: r1-a}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}
serviceLbPolicies:
  - {name: p, autoCapacityDrain: {enable: true}}
backendServices:
  - name: web
    serviceLbPolicy: p
    healthChecks: [hc]
    backends:
",
    );
    for g in 0..8 {
        s.push_str(&format!("      - {{group: g{g}, maxConnections: 1000}}\n"));
    }
    s.push_str(
        "healthChecks:\n  - {name: hc, type: TCP, tcpHealthCheck: {port: 80}}\ninstanceGroups:\n",
    );
    for g in 0..8 {
        s.push_str(&format!(
            "  - {{name: g{g}, zone: r1-a, instances: [g{g}i0, g{g}i1, g{g}i2, g{g}i3, g{g}i4]}}\n"
        ));
    }
    s.push_str("instances:\n");
    for g in 0..8 {
        for i in 0..5 {
            s.push_str(&format!(
                "  - {{name: g{g}i{i}, ip: 192.0.{g}.{}, zone: r1-a, mac: '02:00:00:00:{g:02x}:{i:02x}'}}\n",
                i + 1
            ));
        }
    }
    s
}

/// Marks `sick` groups of `drain_config` at 1 of 5 endpoints healthy (fewer than 25 %).
fn sick(groups: &[usize]) -> HealthState {
    let mut h = HealthState::new();
    for g in groups {
        let names: Vec<String> = (1..5).map(|i| format!("g{g}i{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        down(&mut h, "web", &refs);
    }
    h
}

fn drained(c: &Compiled) -> Vec<String> {
    c.service_decision("web")
        .expect("a decision")
        .groups
        .iter()
        .filter(|g| g.drained)
        .map(|g| g.name.clone())
        .collect()
}

/// Automatic capacity drain: "sets the capacity of each drain candidate backend instance
/// group or NEG to zero, provided that the ratio of drain candidates to all backend instance
/// groups or NEGs is less than 50%", a candidate having "fewer than 25% of its member
/// instances or endpoints" passing health checks (SPEC R6.3). So every candidate is drained,
/// or none is: 3 of 8 (37.5 %) all three; 4 of 8 (exactly 50 %, not below) none, not the
/// first three of them; 1 of 8 that one.
#[test]
fn automatic_capacity_drain_drains_every_candidate_or_none() {
    let text = drain_config();
    let c = build(&text, &sick(&[1, 4, 6]));
    assert_eq!(drained(&c), ["g1", "g4", "g6"]);
    let c = build(&text, &sick(&[1, 4, 6, 7]));
    assert_eq!(drained(&c), Vec::<String>::new());
    let d = c.service_decision("web").expect("a decision");
    assert!(
        d.steps
            .iter()
            .any(|s| s.contains("4 of 8") && s.contains("50 %")),
        "{:?}",
        d.steps
    );
    let c = build(&text, &sick(&[2]));
    assert_eq!(drained(&c), ["g2"]);
}

/// The NIC in r1; `near` (r1-a) with ten endpoints and `far` in r2 with two. MODE is replaced.
const ISOLATED: &str = "\
nic: {region: r1, zone: r1-a, regionOrder: [r2]}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}
serviceLbPolicies:
  - name: p
    isolationConfig: {isolationGranularity: REGION, isolationMode: MODE}
backendServices:
  - name: web
    serviceLbPolicy: p
    healthChecks: [hc]
    backends:
      - {group: near, maxConnections: 1000}
      - {group: far, maxConnections: 1000}
healthChecks:
  - {name: hc, type: TCP, tcpHealthCheck: {port: 80}}
instanceGroups:
  - {name: near, zone: r1-a, instances: [n0, n1, n2, n3, n4, n5, n6, n7, n8, n9]}
  - {name: far, zone: r2-a, instances: [f0, f1]}
instances:
  - {name: n0, ip: 192.0.2.10, zone: r1-a, mac: '02:00:00:00:00:10'}
  - {name: n1, ip: 192.0.2.11, zone: r1-a, mac: '02:00:00:00:00:11'}
  - {name: n2, ip: 192.0.2.12, zone: r1-a, mac: '02:00:00:00:00:12'}
  - {name: n3, ip: 192.0.2.13, zone: r1-a, mac: '02:00:00:00:00:13'}
  - {name: n4, ip: 192.0.2.14, zone: r1-a, mac: '02:00:00:00:00:14'}
  - {name: n5, ip: 192.0.2.15, zone: r1-a, mac: '02:00:00:00:00:15'}
  - {name: n6, ip: 192.0.2.16, zone: r1-a, mac: '02:00:00:00:00:16'}
  - {name: n7, ip: 192.0.2.17, zone: r1-a, mac: '02:00:00:00:00:17'}
  - {name: n8, ip: 192.0.2.18, zone: r1-a, mac: '02:00:00:00:00:18'}
  - {name: n9, ip: 192.0.2.19, zone: r1-a, mac: '02:00:00:00:00:19'}
  - {name: f0, ip: 192.0.2.20, zone: r2-a, mac: '02:00:00:00:00:20'}
  - {name: f1, ip: 192.0.2.21, zone: r2-a, mac: '02:00:00:00:00:21'}
";

/// NEAREST: "If the nearest region has no backends configured, or the backends in the
/// nearest region are unhealthy, traffic is sent to the next-nearest region"; the failover
/// threshold "determines when a backend is considered unhealthy" (default 70). `near` at 6
/// of 10 healthy (60 %) is unhealthy by it, so r2 serves, as it would without isolation.
/// At 7 of 10 it is healthy and keeps every new connection.
#[test]
fn isolation_nearest_leaves_a_region_below_the_failover_threshold() {
    let text = ISOLATED.replace("MODE", "NEAREST");
    let mut h = HealthState::new();
    down(&mut h, "web", &["n7", "n8", "n9"]);
    let c = build(&text, &h);
    assert_eq!(
        (group_share(&c, "near"), group_share(&c, "far")),
        (1.0, 0.0)
    );
    down(&mut h, "web", &["n6"]);
    let c = build(&text, &h);
    assert_eq!(
        (group_share(&c, "near"), group_share(&c, "far")),
        (0.0, 1.0)
    );
    let d = c.service_decision("web").expect("a decision");
    assert!(
        d.steps
            .iter()
            .any(|s| s.contains("NEAREST") && s.contains("region r2")),
        "{:?}",
        d.steps
    );
}

/// STRICT: "the load balancer sends traffic only to backends in the region closest to the
/// user. If the nearest region has no backends configured or the backends in the nearest
/// region are unhealthy ... traffic is dropped". Not failing open over the other regions
/// when every backend is down (SPEC R6.5: "even when every region is down").
#[test]
fn isolation_strict_drops_even_when_every_region_is_down() {
    let text = ISOLATED.replace("MODE", "STRICT");
    let mut h = HealthState::new();
    let everyone = [
        "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "f0", "f1",
    ];
    down(&mut h, "web", &everyone[..10]);
    let c = build(&text, &h);
    let d = c.service_decision("web").expect("a decision");
    assert!(d.drop && d.endpoint_shares.is_empty(), "{d:?}");
    down(&mut h, "web", &everyone[10..]);
    let c = build(&text, &h);
    let d = c.service_decision("web").expect("a decision");
    assert!(d.drop && d.endpoint_shares.is_empty(), "{d:?}");
    // No slot serves: the NIC drops new connections (NO_BACKEND).
    let id = c.symbols.pool_id("web").expect("pool");
    assert_eq!(c.tables.pools[usize::from(id)].maglev_size, 0);
}
