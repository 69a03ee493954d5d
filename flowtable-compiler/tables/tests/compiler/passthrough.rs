//! Backend services without a service LB policy keep passthrough semantics (SPEC R6, R3.4):
//! new connections spread over the healthy endpoints alike, and only `failoverPolicy` moves
//! them to failover backends. The service LB policy belongs to Google Cloud's application and
//! proxy load balancers; its defaults (failover threshold 70, tiers, capacity) do not apply to
//! a passthrough backend service that names none.
//!
//! Expectations come from Google Cloud's "Traffic distribution for internal passthrough
//! Network Load Balancers": "If you haven't configured failover, an internal passthrough
//! Network Load Balancer distributes new connections to its healthy backend VMs, if at least
//! one backend VM is healthy. When all backend VMs are unhealthy, the load balancer
//! distributes new connections among all backends as a last resort." and, with failover
//! configured, "among VMs in its active pool".

use flowtable_compiler::{
    compile, explain_compiled, BackendHealth, CompileOptions, Compiled, Flow, Fragment, HealthState,
};
use nlb_config::parse_config;
use std::collections::BTreeMap;
use std::net::IpAddr;

fn build(text: &str, health: &HealthState) -> Compiled {
    let (c, d) = parse_config("t.yaml", text);
    assert!(d.is_empty(), "{d}");
    compile(&c, health, &CompileOptions::default()).expect("compiles")
}

/// Share of the serving slice's Maglev slots per backend name.
fn slot_shares(c: &Compiled, pool: &str) -> BTreeMap<String, f64> {
    let id = c.symbols.pool_id(pool).expect("pool");
    let p = c.tables.pools[usize::from(id)];
    let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
    let mut n = BTreeMap::new();
    for s in &c.tables.maglev[b..b + m] {
        *n.entry(c.symbols.backend(s.backend).unwrap_or("?").to_string())
            .or_insert(0.0) += 1.0 / m as f64;
    }
    n
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

/// Two NEGs of one backend service without `serviceLbPolicy`: `big` with ten endpoints in the
/// NIC's zone, `small` with two in the next zone.
const NO_POLICY: &str = "\
nic:
  region: r1
  zone: r1-a
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: \"80\", backendService: web}
regionBackendServices:
  - name: web
    region: r1
    protocol: TCP
    healthChecks: [hc]
    backends:
      - {group: big}
      - {group: small}
networkEndpointGroups:
  - name: big
    zone: r1-a
    networkEndpointType: GCE_VM_IP
    networkEndpoints: [{instance: b0}, {instance: b1}, {instance: b2}, {instance: b3}, {instance: b4}, {instance: b5}, {instance: b6}, {instance: b7}, {instance: b8}, {instance: b9}]
  - name: small
    zone: r1-b
    networkEndpointType: GCE_VM_IP
    networkEndpoints: [{instance: s0}, {instance: s1}]
healthChecks:
  - {name: hc, type: TCP, tcpHealthCheck: {port: 80}}
instances:
  - {name: b0, ip: 192.0.2.10, zone: r1-a, mac: 02:00:00:00:01:00}
  - {name: b1, ip: 192.0.2.11, zone: r1-a, mac: 02:00:00:00:01:01}
  - {name: b2, ip: 192.0.2.12, zone: r1-a, mac: 02:00:00:00:01:02}
  - {name: b3, ip: 192.0.2.13, zone: r1-a, mac: 02:00:00:00:01:03}
  - {name: b4, ip: 192.0.2.14, zone: r1-a, mac: 02:00:00:00:01:04}
  - {name: b5, ip: 192.0.2.15, zone: r1-a, mac: 02:00:00:00:01:05}
  - {name: b6, ip: 192.0.2.16, zone: r1-a, mac: 02:00:00:00:01:06}
  - {name: b7, ip: 192.0.2.17, zone: r1-a, mac: 02:00:00:00:01:07}
  - {name: b8, ip: 192.0.2.18, zone: r1-a, mac: 02:00:00:00:01:08}
  - {name: b9, ip: 192.0.2.19, zone: r1-a, mac: 02:00:00:00:01:09}
  - {name: s0, ip: 192.0.2.20, zone: r1-b, mac: 02:00:00:00:02:00}
  - {name: s1, ip: 192.0.2.21, zone: r1-b, mac: 02:00:00:00:02:01}
";

/// Six of `big`'s ten endpoints healthy (60 %, under the service LB policy's default failover
/// threshold of 70) and both of `small`'s: Google Cloud distributes new connections to the
/// eight healthy backends, 12.5 % each. The policy's threshold would have sent `big` nothing
/// and `small`'s two endpoints 50 % each.
#[test]
fn a_backend_service_without_a_policy_spreads_over_its_healthy_endpoints_alike() {
    let mut h = HealthState::new();
    down(&mut h, "web", &["b6", "b7", "b8", "b9"]);
    let c = build(NO_POLICY, &h);
    let d = c.service_decision("web").expect("a decision");
    let healthy = ["b0", "b1", "b2", "b3", "b4", "b5", "s0", "s1"];
    for e in healthy {
        let share = d.endpoint_shares.get(e).copied().unwrap_or(0.0);
        assert!((share - 0.125).abs() < 1e-9, "{e}: {share}: {d:?}");
    }
    assert_eq!(d.endpoint_shares.len(), 8, "{d:?}");
    // The tables serve it: each healthy endpoint's slots are an eighth of the slice (Maglev
    // fills a slice of M slots to within a slot or two per backend).
    let slots = slot_shares(&c, "web");
    assert_eq!(slots.len(), 8, "{slots:?}");
    for e in healthy {
        assert!((slots[e] - 0.125).abs() < 0.005, "{e}: {slots:?}");
    }
    // Nothing is below a threshold: there is none without a policy.
    assert!(d.groups.iter().all(|g| !g.below_threshold), "{d:?}");
}

/// Zones do not weigh either: with the NIC in r1-a, one healthy endpoint of `big` and two of
/// `small` take a third each (the policy's default WATERFALL_BY_REGION would have kept them
/// all in the NIC's zone or region by capacity).
#[test]
fn without_a_policy_neither_zone_nor_endpoint_count_weighs() {
    let mut h = HealthState::new();
    down(
        &mut h,
        "web",
        &["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"],
    );
    let c = build(NO_POLICY, &h);
    let d = c.service_decision("web").expect("a decision");
    for e in ["b0", "s0", "s1"] {
        let share = d.endpoint_shares.get(e).copied().unwrap_or(0.0);
        assert!((share - 1.0 / 3.0).abs() < 1e-9, "{e}: {d:?}");
    }
    // Nothing healthy: "among all backends as a last resort" (SPEC R3.4).
    let mut all = HealthState::new();
    down(
        &mut all,
        "web",
        &[
            "b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "s0", "s1",
        ],
    );
    let c = build(NO_POLICY, &all);
    let d = c.service_decision("web").expect("a decision");
    assert_eq!(d.endpoint_shares.len(), 12, "{d:?}");
    assert!(!d.drop);
}

/// `failoverPolicy` still moves new connections to the failover backends without a service LB
/// policy (compute v1 BackendServiceFailoverPolicy: ratio 0 fails over when no primary backend
/// is healthy), and the active pool then spreads over its healthy VMs alike.
#[test]
fn without_a_policy_only_the_failover_policy_moves_traffic_to_failover_backends() {
    let text = NO_POLICY.replace("{group: small}", "{group: small, failover: true}");
    let mut h = HealthState::new();
    down(
        &mut h,
        "web",
        &["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"],
    );
    let c = build(&text, &h);
    let d = c.service_decision("web").expect("a decision");
    assert!(!d.failover_serves, "one primary endpoint is healthy");
    assert_eq!(d.endpoint_shares.get("b0").copied(), Some(1.0), "{d:?}");
    down(&mut h, "web", &["b0"]);
    let c = build(&text, &h);
    let d = c.service_decision("web").expect("a decision");
    assert!(d.failover_serves, "{d:?}");
    for e in ["s0", "s1"] {
        assert_eq!(d.endpoint_shares.get(e).copied(), Some(0.5), "{e}: {d:?}");
    }
}

/// `nlbctl explain` says which rule decided: passthrough without a service LB policy.
#[test]
fn explain_says_that_no_policy_decided() {
    let mut h = HealthState::new();
    down(&mut h, "web", &["b6", "b7", "b8", "b9"]);
    let c = build(NO_POLICY, &h);
    let flow = Flow {
        protocol: 6,
        src: IpAddr::from([198, 51, 100, 7]),
        src_port: 40000,
        dst: IpAddr::from([203, 0, 113, 10]),
        dst_port: 80,
        fragment: Fragment::No,
    };
    let e = explain_compiled(&c, &flow);
    let text = e.steps.join("\n");
    assert!(
        text.contains("no serviceLbPolicy") && text.contains("SPEC R6"),
        "{text}"
    );
    assert!(
        text.contains("8 healthy endpoints") && text.contains("alike"),
        "{text}"
    );
    let s = e.service.expect("a backend service explanation");
    assert!(
        s.steps.iter().any(|x| x.contains("no serviceLbPolicy")),
        "{s:?}"
    );
}

/// Capacities and preferences belong to the service LB policy (SPEC R6.1, R6.2, R6.6): without
/// one they shape nothing, and the compile says so; `capacityScaler: 0` still takes a group
/// out ("A setting of 0 means the group is completely drained": compute v1 Backend).
#[test]
fn capacities_shape_nothing_without_a_policy_and_a_note_says_so() {
    let text = NO_POLICY
        .replace(
            "{group: big}",
            "{group: big, maxConnectionsPerEndpoint: 10, capacityScaler: 0.5}",
        )
        .replace(
            "{group: small}",
            "{group: small, maxConnectionsPerEndpoint: 1000, preference: PREFERRED}",
        );
    let c = build(&text, &HealthState::new());
    let d = c.service_decision("web").expect("a decision");
    assert_eq!(d.endpoint_shares.len(), 12, "{d:?}");
    for share in d.endpoint_shares.values() {
        assert!((share - 1.0 / 12.0).abs() < 1e-9, "{d:?}");
    }
    assert!(
        c.notes.iter().any(|n| n.contains("backend service web")
            && n.contains("no serviceLbPolicy")
            && n.contains("maxConnections")
            && n.contains("preference")),
        "{:?}",
        c.notes
    );
    let drained = NO_POLICY.replace("{group: big}", "{group: big, capacityScaler: 0}");
    let c = build(&drained, &HealthState::new());
    let d = c.service_decision("web").expect("a decision");
    assert_eq!(
        d.endpoint_shares
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["s0", "s1"],
        "{d:?}"
    );
}
