//! Backend services compiled into tables: expectations worked out by hand from SPEC R2, R3,
//! R5, R6, Google Cloud's advanced load-balancing documentation and Google Cloud's API (compute v1
//! BackendServiceFailoverPolicy: ratio 0 fails over with no healthy primary, others strictly
//! below; Backend.capacityScaler 0 takes no new connections), and docs/pipeline.md §3–§4 for
//! L3_DEFAULT rules.

use flowtable_compiler::{
    compile, BackendHealth, CompileOptions, Compiled, Config, HealthState, Image, PoolKind, Symbols,
};
use nlb_config::parse_config;
use nlb_hw::enums::Affinity;
use std::collections::{BTreeMap, BTreeSet};

fn config(text: &str) -> Config {
    let (c, d) = parse_config("t.yaml", text);
    assert!(d.is_empty(), "{d}");
    c
}

fn build(text: &str, health: &HealthState) -> Compiled {
    compile(&config(text), health, &CompileOptions::default()).expect("compiles")
}

/// Slots per backend name in the slice the pool's descriptor serves.
fn serving(c: &Compiled, pool: &str) -> BTreeMap<String, usize> {
    let id = c.symbols.pool_id(pool).expect("pool");
    let p = c.tables.pools[usize::from(id)];
    let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
    let mut n = BTreeMap::new();
    for s in &c.tables.maglev[b..b + m] {
        *n.entry(c.symbols.backend(s.backend).unwrap_or("?").to_string())
            .or_insert(0) += 1;
    }
    n
}

fn names(m: &BTreeMap<String, usize>) -> BTreeSet<&str> {
    m.keys().map(String::as_str).collect()
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

/// A global service over two regions, with a service LB policy of the default algorithm
/// (without one it would be passthrough, SPEC R6): the NIC in r1 (zone r1-a), r2 next.
const TWO_REGIONS: &str = "\
nic:
  region: r1
  zone: r1-a
  regionOrder: [r2]
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, portRange: \"80\", backendService: web}
serviceLbPolicies:
  - {name: waterfall, loadBalancingAlgorithm: WATERFALL_BY_REGION}
backendServices:
  - name: web
    serviceLbPolicy: waterfall
    healthChecks: [hc]
    sessionAffinity: CLIENT_IP_PORT_PROTO
    connectionTrackingPolicy: {idleTimeoutSec: 300}
    backends:
      - {group: near, maxConnectionsPerInstance: 100}
      - {group: far, maxConnectionsPerInstance: 100}
instanceGroups:
  - {name: near, zone: r1-a, instances: [n1, n2]}
  - {name: far, zone: r2-b, instances: [f1, f2]}
healthChecks:
  - {name: hc, type: HTTP, httpHealthCheck: {port: 8080}}
instances:
  - {name: n1, ip: 192.0.2.1, zone: r1-a, mac: 02:00:00:00:00:01}
  - {name: n2, ip: 192.0.2.2, zone: r1-a, mac: 02:00:00:00:00:02}
  - {name: f1, ip: 192.0.2.3, zone: r2-b, mac: 02:00:00:00:00:03}
  - {name: f2, ip: 192.0.2.4, zone: r2-b, mac: 02:00:00:00:00:04}
";

/// SPEC R6.1 WATERFALL_BY_REGION (the default): the nearest region's groups take new
/// connections up to their capacity; with no live connection nothing is full, so only the
/// NIC's region serves. The pool is the service's, with its affinity and idle timeout.
#[test]
fn the_nearest_region_serves_first() {
    let c = build(TWO_REGIONS, &HealthState::new());
    assert_eq!(c.symbols.pools.len(), 1);
    let sym = &c.symbols.pools[0];
    assert_eq!(sym.kind, PoolKind::BackendService);
    assert_eq!(sym.members.len(), 4, "every endpoint is a member");
    let s = serving(&c, "web");
    assert_eq!(names(&s), BTreeSet::from(["n1", "n2"]), "{s:?}");
    // Equal shares within the group: 4093 slots, 2046 and 2047.
    assert!(s.values().all(|&n| n == 2046 || n == 2047), "{s:?}");
    let p = c.tables.pools[0];
    assert_eq!(p.affinity, Affinity::ClientIpPortProto);
    assert_eq!((p.idle_timeout, p.track, p.failed_over), (300, true, false));
    let d = c.service_decision("web").expect("a decision");
    assert_eq!(
        d.groups.iter().find(|g| g.name == "far").unwrap().share,
        0.0
    );
}

/// capacityScaler 0 (compute v1 Backend; SPEC R6.2: "0 drains it"): no new connections for
/// the group, the next region takes them.
#[test]
fn capacity_scaler_zero_takes_no_new_connections() {
    let text = TWO_REGIONS.replace(
        "{group: near, maxConnectionsPerInstance: 100}",
        "{group: near, maxConnectionsPerInstance: 100, capacityScaler: 0}",
    );
    let c = build(&text, &HealthState::new());
    assert_eq!(names(&serving(&c, "web")), BTreeSet::from(["f1", "f2"]));
    // With no capacity given at all, capacityScaler 0 drains as well.
    let text = TWO_REGIONS
        .replace(
            "{group: near, maxConnectionsPerInstance: 100}",
            "{group: near, capacityScaler: 0}",
        )
        .replace(
            "{group: far, maxConnectionsPerInstance: 100}",
            "{group: far}",
        );
    let c = build(&text, &HealthState::new());
    assert_eq!(names(&serving(&c, "web")), BTreeSet::from(["f1", "f2"]));
}

/// SPEC R3.4 within the policy: unhealthy endpoints get no slots; a group below the failover
/// threshold (70 % by default, R6.4) yields to the others.
#[test]
fn health_shapes_the_slices() {
    let mut h = HealthState::new();
    down(&mut h, "web", &["n2"]);
    let c = build(TWO_REGIONS, &h);
    // near: 1 of 2 healthy = 50 % < 70 %: the far region takes new connections.
    assert_eq!(names(&serving(&c, "web")), BTreeSet::from(["f1", "f2"]));
    // The health of another pool does not count (SPEC R5.5).
    let mut other = HealthState::new();
    down(&mut other, "elsewhere", &["n2"]);
    let c = build(TWO_REGIONS, &other);
    assert_eq!(names(&serving(&c, "web")), BTreeSet::from(["n1", "n2"]));
    // Nothing healthy: fail open over every endpoint (R3.4).
    let mut all = HealthState::new();
    down(&mut all, "web", &["n1", "n2", "f1", "f2"]);
    let c = build(TWO_REGIONS, &all);
    assert_eq!(names(&serving(&c, "web")).len(), 4);
}

const FAILOVER: &str = "\
forwardingRules:
  - {name: app, IPAddress: 203.0.113.30, IPProtocol: UDP, backendService: app}
regionBackendServices:
  - name: app
    region: r1
    protocol: UDP
    healthChecks: [hc]
    failoverPolicy: {failoverRatio: 0.5}
    backends:
      - {group: primary}
      - {group: standby, failover: true}
instanceGroups:
  - {name: primary, zone: r1-a, instances: [p1, p2, p3, p4]}
  - {name: standby, zone: r1-b, instances: [s1, s2]}
healthChecks:
  - {name: hc, type: TCP}
instances:
  - {name: p1, ip: 192.0.2.1, mac: 02:00:00:00:00:01}
  - {name: p2, ip: 192.0.2.2, mac: 02:00:00:00:00:02}
  - {name: p3, ip: 192.0.2.3, mac: 02:00:00:00:00:03}
  - {name: p4, ip: 192.0.2.4, mac: 02:00:00:00:00:04}
  - {name: s1, ip: 192.0.2.5, mac: 02:00:00:00:00:05}
  - {name: s2, ip: 192.0.2.6, mac: 02:00:00:00:00:06}
";

/// failoverPolicy (compute v1): failover when the healthy share of the primary backends is
/// strictly below failoverRatio (2 of 4 = 0.5 is not below 0.5; 1 of 4 is), onto the
/// failover backends' own slice: the descriptor flips, both slices stay.
#[test]
fn failover_backends_serve_strictly_below_the_ratio() {
    let mut h = HealthState::new();
    down(&mut h, "app", &["p1", "p2"]);
    let c = build(FAILOVER, &h);
    assert!(!c.tables.pools[0].failed_over);
    assert_eq!(names(&serving(&c, "app")), BTreeSet::from(["p3", "p4"]));
    let sym = &c.symbols.pools[0];
    assert_eq!(
        (
            sym.own_base,
            sym.own_size,
            sym.failover_base,
            sym.failover_size
        ),
        (0, 4093, 4093, 4093),
        "4 primary endpoints: 4093 slots; 2 failover endpoints: 4093 right after"
    );
    down(&mut h, "app", &["p3"]);
    let c = build(FAILOVER, &h);
    let p = c.tables.pools[0];
    assert!(p.failed_over && c.pools[0].failed_over);
    assert_eq!((p.maglev_base, p.maglev_size), (4093, 4093));
    assert_eq!(names(&serving(&c, "app")), BTreeSet::from(["s1", "s2"]));
    // The primary slice holds what the primary backends would serve (p4 alone).
    let primary: BTreeSet<&str> = c.tables.maglev[..4093]
        .iter()
        .map(|s| c.symbols.backend(s.backend).unwrap_or("?"))
        .collect();
    assert_eq!(primary, BTreeSet::from(["p4"]));
    // No healthy failover backend either: the primary ones serve (their healthy one).
    down(&mut h, "app", &["s1", "s2"]);
    let c = build(FAILOVER, &h);
    assert!(!c.tables.pools[0].failed_over);
    assert_eq!(names(&serving(&c, "app")), BTreeSet::from(["p4"]));
}

/// failoverRatio 0 (the default): failover only when no primary backend is healthy.
#[test]
fn failover_ratio_zero_waits_for_no_healthy_primary() {
    let text = FAILOVER.replace("    failoverPolicy: {failoverRatio: 0.5}\n", "");
    let mut h = HealthState::new();
    down(&mut h, "app", &["p1", "p2", "p3"]);
    let c = build(&text, &h);
    assert!(
        !c.tables.pools[0].failed_over,
        "1 of 4 healthy: no failover"
    );
    down(&mut h, "app", &["p4"]);
    let c = build(&text, &h);
    assert!(c.tables.pools[0].failed_over, "none healthy: failover");
}

/// dropTrafficIfUnhealthy (compute v1): with every primary and failover backend unhealthy,
/// new connections are dropped (no slot in the descriptor); without it they go to every
/// primary backend (not the failover ones).
#[test]
fn nothing_healthy_drops_or_fails_open_over_the_primary_backends() {
    let mut h = HealthState::new();
    down(&mut h, "app", &["p1", "p2", "p3", "p4", "s1", "s2"]);
    let c = build(FAILOVER, &h);
    assert_eq!(
        names(&serving(&c, "app")),
        BTreeSet::from(["p1", "p2", "p3", "p4"])
    );
    let text = FAILOVER.replace(
        "{failoverRatio: 0.5}",
        "{failoverRatio: 0.5, dropTrafficIfUnhealthy: true}",
    );
    let c = build(&text, &h);
    let p = c.tables.pools[0];
    assert!(p.valid && p.maglev_size == 0, "{p:?}");
}

/// Without any capacity, every endpoint counts alike (groups share by their endpoints), and
/// preferred groups (SPEC R6.6) still come first where a service LB policy applies.
#[test]
fn without_capacity_endpoints_share_equally_and_preferred_groups_come_first() {
    let text = "\
forwardingRules:
  - {name: r, IPAddress: 203.0.113.40, backendService: s}
regionBackendServices:
  - name: s
    region: r1
    backends:
      - {group: one}
      - {group: three}
instanceGroups:
  - {name: one, zone: r1-a, instances: [a]}
  - {name: three, zone: r1-b, instances: [b, c, d]}
instances:
  - {name: a, ip: 192.0.2.1, mac: 02:00:00:00:00:01}
  - {name: b, ip: 192.0.2.2, mac: 02:00:00:00:00:02}
  - {name: c, ip: 192.0.2.3, mac: 02:00:00:00:00:03}
  - {name: d, ip: 192.0.2.4, mac: 02:00:00:00:00:04}
";
    let c = build(text, &HealthState::new());
    let s = serving(&c, "s");
    // 4093 slots over 4 equal members: 1023 or 1024 each.
    assert_eq!(s.len(), 4, "{s:?}");
    assert!(s.values().all(|&n| (1023..=1024).contains(&n)), "{s:?}");
    let preferred = text.replace("{group: one}", "{group: one, preference: PREFERRED}");
    let with_policy = format!(
        "{}serviceLbPolicies:\n  - {{name: p}}\n",
        preferred.replace(
            "    region: r1\n",
            "    region: r1\n    serviceLbPolicy: p\n"
        )
    );
    let c = build(&with_policy, &HealthState::new());
    assert_eq!(names(&serving(&c, "s")), BTreeSet::from(["a"]));
    // Without a policy, a preference shapes nothing (passthrough, SPEC R6).
    let c = build(&preferred, &HealthState::new());
    assert_eq!(serving(&c, "s").len(), 4);
}

/// WEIGHTED_MAGLEV (SPEC R5.4, R5.6): probe weights shape the shares when every serving
/// endpoint reported one; weight 0 leaves; a missing one restores equal shares.
#[test]
fn weighted_maglev_follows_probe_weights() {
    let text = TWO_REGIONS.replace(
        "    sessionAffinity: CLIENT_IP_PORT_PROTO\n",
        "    sessionAffinity: CLIENT_IP_PORT_PROTO\n    localityLbPolicy: WEIGHTED_MAGLEV\n",
    );
    let weight = |w| BackendHealth {
        healthy: true,
        weight: Some(w),
    };
    let mut h = HealthState::new();
    h.set_member("web", "n1", weight(3));
    h.set_member("web", "n2", weight(1));
    let s = serving(&build(&text, &h), "web");
    // 3:1 of 4093 slots: within a slot of 3069.75 and 1023.25.
    assert!(
        (3069..=3071).contains(&s["n1"]) && (1022..=1024).contains(&s["n2"]),
        "{s:?}"
    );
    h.set_member("web", "n2", weight(0));
    assert_eq!(
        names(&serving(&build(&text, &h), "web")),
        BTreeSet::from(["n1"])
    );
    let mut missing = HealthState::new();
    missing.set_member("web", "n1", weight(3));
    let s = serving(&build(&text, &missing), "web");
    assert!(s.values().all(|&n| n == 2046 || n == 2047), "{s:?}");
    // MAGLEV (the default) ignores probe weights.
    let s = serving(&build(TWO_REGIONS, &h), "web");
    assert_eq!(names(&s), BTreeSet::from(["n1", "n2"]));
}

const L3: &str = "\
forwardingRules:
  - {name: all, IPAddress: 203.0.113.60, IPProtocol: L3_DEFAULT, allPorts: true, backendService: s}
  - {name: tls, IPAddress: 203.0.113.60, IPProtocol: TCP, portRange: \"443\", backendService: s}
backendServices:
  - name: s
    protocol: UNSPECIFIED
    backends: [{group: g}]
instanceGroups:
  - {name: g, instances: [a]}
instances:
  - {name: a, ip: 192.0.2.1, mac: 02:00:00:00:00:01}
";

/// docs/pipeline.md §3–§4: an L3_DEFAULT rule compiles into the VIP's protocol-0 entry (one
/// slot of all ports) and into the gaps of its TCP entry (0-442 and 444-65535 around the
/// TCP rule's 443) and its UDP entry (all ports: no UDP rule).
#[test]
fn l3_default_takes_protocol_zero_and_the_gaps() {
    let c = build(L3, &HealthState::new());
    let all = c.symbols.rule_id("all").unwrap();
    let tls = c.symbols.rule_id("tls").unwrap();
    let mut entries: BTreeMap<u8, Vec<(u16, u16, u16)>> = BTreeMap::new();
    for v in c.tables.vip.iter().filter(|v| v.valid) {
        let slots = v
            .slot
            .iter()
            .filter(|s| s.valid)
            .map(|s| (s.port_lo, s.port_hi, s.rule))
            .collect();
        assert!(entries.insert(v.protocol, slots).is_none());
    }
    assert_eq!(
        entries,
        BTreeMap::from([
            (0, vec![(0, 65535, all)]),
            (6, vec![(0, 442, all), (443, 443, tls), (444, 65535, all)]),
            (17, vec![(0, 65535, all)]),
        ])
    );
    // The image keeps the backend-service pool and its slices, and a device's tables name
    // the rules again (ids kept across a restart).
    let img = Image::read(&c.image(1).write().unwrap()).unwrap();
    assert_eq!(img.symbols, c.symbols);
    let recovered = Symbols::recover(&c.tables, &config(L3));
    assert_eq!(recovered.rules, c.symbols.rules);
}

/// A VIP entry holds 16 port ranges: 8 TCP rules and the 9 gaps an L3_DEFAULT rule takes
/// between them are 17. Reported at the L3_DEFAULT rule's protocol.
#[test]
fn l3_default_gaps_count_against_the_port_slots() {
    let mut text = String::from(
        "forwardingRules:\n  - name: all\n    IPAddress: 203.0.113.60\n    IPProtocol: L3_DEFAULT\n    backendService: s\n",
    );
    for i in 1..=8 {
        text.push_str(&format!(
            "  - {{name: p{i}, IPAddress: 203.0.113.60, portRange: \"{}\", backendService: s}}\n",
            i * 10
        ));
    }
    text.push_str(&L3[L3.find("backendServices:").unwrap()..]);
    let err = compile(
        &config(&text),
        &HealthState::new(),
        &CompileOptions::default(),
    )
    .expect_err("17 slots");
    let s = err.to_string();
    assert!(
        s.contains("t.yaml:4:17: forwardingRules[0]: 9 rules with 17 port ranges on 203.0.113.60 TCP (9 of them the gaps an L3_DEFAULT rule takes between the other rules' ports), but a VIP entry holds 16 port ranges per protocol"),
        "{s}"
    );
    // Seven TCP rules and eight gaps fit.
    let seven = text.replace(
        "  - {name: p8, IPAddress: 203.0.113.60, portRange: \"80\", backendService: s}\n",
        "",
    );
    assert!(compile(
        &config(&seven),
        &HealthState::new(),
        &CompileOptions::default()
    )
    .is_ok());
}

/// A recompile of a backend service after a health change equals a full compile under the
/// new health (what the slow path's delta loads rely on).
#[test]
fn recompile_equals_a_full_compile() {
    let mut c = build(FAILOVER, &HealthState::new());
    let mut h = HealthState::new();
    down(&mut h, "app", &["p1", "p2", "p3"]);
    let changed = c.recompile_pool("app", &h).unwrap();
    assert!(!changed.is_empty());
    let full = build(FAILOVER, &h);
    assert_eq!(c.tables, full.tables);
    assert_eq!(c.pools, full.pools);
}

/// docs/pipeline.md §3–§4 as the reference semantics (and so `explain`) reads the tables: a
/// flow of any protocol but TCP and UDP looks up the VIP's protocol-0 entry, which only an
/// L3_DEFAULT rule makes; it carries no ports.
#[test]
fn other_protocols_reach_the_l3_default_rule() {
    use flowtable_compiler::{explain, Flow, Fragment};
    let c = build(L3, &HealthState::new());
    let flow = |protocol: u8, dst: &str, port: u16| Flow {
        protocol,
        src: "198.51.100.7".parse().unwrap(),
        src_port: 40000,
        dst: dst.parse().unwrap(),
        dst_port: port,
        fragment: Fragment::No,
    };
    for protocol in [1u8, 47, 50, 132] {
        let e = explain(
            &c.tables,
            &c.nic,
            &c.symbols,
            &flow(protocol, "203.0.113.60", 7),
        );
        assert_eq!(
            (e.verdict.as_str(), e.rule.as_deref(), e.backend.as_deref()),
            ("forward", Some("all"), Some("a")),
            "protocol {protocol}: {e:?}"
        );
        assert!(
            e.steps[0].starts_with(&format!("protocol {protocol} ("))
                && e.steps[0].contains(") → VIP protocol 0: "),
            "{e:?}"
        );
        assert!(
            e.steps[1].contains("other protocols (L3_DEFAULT) all ports"),
            "{e:?}"
        );
    }
    let e = explain(&c.tables, &c.nic, &c.symbols, &flow(6, "203.0.113.60", 443));
    assert_eq!(e.rule.as_deref(), Some("tls"));
    let e = explain(
        &c.tables,
        &c.nic,
        &c.symbols,
        &flow(17, "203.0.113.60", 443),
    );
    assert_eq!(e.rule.as_deref(), Some("all"), "UDP 443 is no TCP rule's");
    // Without an L3_DEFAULT rule, other protocols match nothing (SPEC R2.4).
    let tcp_only = L3.replace(
        "  - {name: all, IPAddress: 203.0.113.60, IPProtocol: L3_DEFAULT, allPorts: true, backendService: s}\n",
        "",
    );
    let c = build(&tcp_only, &HealthState::new());
    let e = explain(&c.tables, &c.nic, &c.symbols, &flow(1, "203.0.113.60", 0));
    assert_eq!((e.verdict.as_str(), e.reason.as_str()), ("pass", "NO_RULE"));
}

/// SPEC R10.4: the order of lists in the file changes nothing, for backend services too
/// (groups, backends and endpoints are taken by name).
#[test]
fn reordered_lists_compile_to_identical_tables() {
    let a = config(FAILOVER);
    let reordered = FAILOVER
        .replace(
            "      - {group: primary}\n      - {group: standby, failover: true}\n",
            "      - {group: standby, failover: true}\n      - {group: primary}\n",
        )
        .replace("[p1, p2, p3, p4]", "[p4, p2, p3, p1]")
        .replace(
            "  - {name: primary, zone: r1-a, instances: [p4, p2, p3, p1]}\n  - {name: standby, zone: r1-b, instances: [s1, s2]}\n",
            "  - {name: standby, zone: r1-b, instances: [s2, s1]}\n  - {name: primary, zone: r1-a, instances: [p4, p2, p3, p1]}\n",
        );
    assert_ne!(reordered, FAILOVER);
    let b = config(&reordered);
    assert_eq!(a.digest(), b.digest());
    let mut h = HealthState::new();
    down(&mut h, "app", &["p1", "p2", "p3"]);
    let (x, y) = (
        compile(&a, &h, &CompileOptions::default()).unwrap(),
        compile(&b, &h, &CompileOptions::default()).unwrap(),
    );
    assert_eq!(x.tables, y.tables);
    assert_eq!(x.image(1).write().unwrap(), y.image(1).write().unwrap());
}

/// The pool table holds target pools, target instances and backend services together (128 in
/// the `sim` profile): the 129th pool, a backend service, is refused at its line.
#[test]
fn backend_services_count_against_the_pool_table() {
    let mut text = String::from(
        "instances:\n  - {name: a, ip: 192.0.2.1, mac: 02:00:00:00:00:01}\ninstanceGroups:\n  - {name: g, instances: [a]}\ntargetPools:\n",
    );
    for i in 0..100 {
        text.push_str(&format!("  - {{name: p{i:03}, instances: [a]}}\n"));
    }
    text.push_str("regionBackendServices:\n");
    for i in 0..29 {
        text.push_str(&format!(
            "  - {{name: s{i:02}, region: r, backends: [{{group: g}}]}}\n"
        ));
    }
    let err = compile(
        &config(&text),
        &HealthState::new(),
        &CompileOptions::default(),
    )
    .expect_err("129 pools");
    let s = err.to_string();
    // 100 target pools, then services by name: s28 is the 129th pool, on the file's line 134.
    let line = text.lines().position(|l| l.contains("name: s28")).unwrap() + 1;
    assert!(
        s.contains(&format!("t.yaml:{line}:5: regionBackendServices[28]: 129 target pools, target instances and backend services, but the sim profile's pool table holds 128")),
        "{s}"
    );
}

/// A health file names a backend service's endpoints as `SERVICE/INSTANCE` (SPEC R5.5);
/// anything else is refused with what would be valid.
#[test]
fn health_files_name_service_endpoints() {
    let c = config(FAILOVER);
    let h = HealthState::parse("h.yaml", "app/p1: {healthy: false}\n").unwrap();
    assert!(h.check_names(&c).is_empty());
    let h = HealthState::parse("h.yaml", "app/q1: {healthy: false}\n").unwrap();
    let d = h.check_names(&c).to_string();
    assert!(
        d.contains("h.yaml:1:1: app/q1: `q1` is not an endpoint of backend service `app`")
            && d.contains("(valid: app/NAME with NAME among p1, p2, p3, p4, s1, s2)"),
        "{d}"
    );
    let h = HealthState::parse("h.yaml", "ap/p1: {healthy: false}\n").unwrap();
    let d = h.check_names(&c).to_string();
    assert!(
        d.contains("no target pool or backend service named `ap` in t.yaml, did you mean `app`?"),
        "{d}"
    );
}
