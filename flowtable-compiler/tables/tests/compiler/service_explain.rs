//! `explain` of a flow to a backend service (SPEC R6): which tier, region and zone its backend
//! is in and why, from the decision the tables serve, with the live counts fed to the policy
//! (a compile has none, and says so). Shares are worked out by hand from R6's fill rule (a
//! tier of capacity C gets C / N of new connections, N the service's live connections).

use flowtable_compiler::{
    compile, explain_compiled, CompileOptions, Compiled, Flow, Fragment, HealthState, LiveLoad,
    DEFAULT_DEADBAND,
};
use nlb_config::parse_config;
use std::net::IpAddr;

/// The NIC in r1-a; `near` (r1-a) and `far` (r1-b), 10 connections per instance: 20 each.
const TWO_ZONES: &str = "
nic: {region: r1, zone: r1-a}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}
serviceLbPolicies:
  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}
regionBackendServices:
  - name: web
    region: r1
    serviceLbPolicy: zonal
    backends:
      - {group: near, maxConnectionsPerInstance: 10}
      - {group: far, maxConnectionsPerInstance: 10}
instanceGroups:
  - {name: near, zone: r1-a, instances: [n1, n2]}
  - {name: far, zone: r1-b, instances: [f1, f2]}
instances:
  - {name: n1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:11'}
  - {name: n2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:12'}
  - {name: f1, ip: 192.0.2.3, zone: r1-b, mac: '02:00:00:00:00:13'}
  - {name: f2, ip: 192.0.2.4, zone: r1-b, mac: '02:00:00:00:00:14'}
";

fn build(text: &str) -> Compiled {
    let (c, d) = parse_config("t.yaml", text);
    assert!(d.is_empty(), "{d}");
    compile(&c, &HealthState::default(), &CompileOptions::default()).expect("compiles")
}

fn flow(port: u16) -> Flow {
    Flow {
        protocol: 6,
        src: IpAddr::from([198, 51, 100, 7]),
        src_port: port,
        dst: IpAddr::from([203, 0, 113, 10]),
        dst_port: 80,
        fragment: Fragment::No,
    }
}

fn all_text(e: &flowtable_compiler::Explanation) -> String {
    let mut t = e.steps.join("\n");
    if let Some(s) = &e.service {
        t.push('\n');
        t.push_str(&s.steps.join("\n"));
    }
    t
}

#[test]
fn a_compile_has_no_live_connections_and_says_so() {
    let c = build(TWO_ZONES);
    let e = explain_compiled(&c, &flow(40000));
    let s = e.service.as_ref().expect("a backend service");
    assert_eq!(s.service, "web");
    // Nothing is live: the NIC's zone takes every new connection (R6.1).
    assert_eq!(
        (s.group.as_deref(), s.zone.as_deref(), s.region.as_deref()),
        (Some("near"), Some("r1-a"), Some("r1"))
    );
    assert_eq!((s.tier, s.share), (Some(0), Some(1.0)));
    assert!(s.live_counts.starts_with("none: a compile"), "{s:?}");
    let near = &s.groups[0];
    assert_eq!(
        (near.name.as_str(), near.capacity, near.live),
        ("near", Some(20.0), 0)
    );
    assert_eq!(s.groups[1].tier, None, "far takes nothing: {s:?}");
    assert!(s.groups[1].why.contains("earlier tiers have room"), "{s:?}");
}

#[test]
fn with_live_counts_the_flow_is_told_its_tier_and_zone() {
    let mut c = build(TWO_ZONES);
    let mut live = LiveLoad::new();
    live.add("web", "n1", 15);
    live.add("web", "n2", 15);
    c.rebalance(&live, 5.0, &HealthState::default(), DEFAULT_DEADBAND)
        .unwrap();
    // 30 live, near holds 20: near 20/30, far 10/30 of new connections.
    let mut seen = [false, false];
    for port in 40000..40100 {
        let e = explain_compiled(&c, &flow(port));
        let s = e.service.expect("a backend service");
        assert!(
            s.live_counts.starts_with("30 at nlbd's latest refresh"),
            "{s:?}"
        );
        let group = s.group.clone().expect("a group");
        let backend = e.backend.expect("a backend");
        if group == "far" {
            assert!(backend.starts_with('f'));
            assert_eq!((s.zone.as_deref(), s.tier), (Some("r1-b"), Some(1)));
            assert!((s.share.unwrap() - 1.0 / 3.0).abs() < 1e-9, "{s:?}");
            seen[1] = true;
        } else {
            assert!(backend.starts_with('n'));
            assert_eq!((s.zone.as_deref(), s.tier), (Some("r1-a"), Some(0)));
            assert!((s.share.unwrap() - 2.0 / 3.0).abs() < 1e-9, "{s:?}");
            seen[0] = true;
        }
        let near = s.groups.iter().find(|g| g.name == "near").unwrap();
        assert_eq!((near.live, near.utilisation), (30, Some(1.5)));
        let last = s.steps.last().unwrap();
        assert!(
            last.contains(&format!("backend {backend} is in group {group}")),
            "{last}"
        );
    }
    assert_eq!(seen, [true, true], "100 flows reach both zones");
}

/// Without any `maxConnections*` every endpoint counts for 10⁹ connections (only so that
/// groups share by their size): explain said "capacity 2000000000"; it is no limit.
#[test]
fn a_service_without_capacity_has_no_capacity_limit() {
    let text = TWO_ZONES
        .replace(", maxConnectionsPerInstance: 10}", "}")
        .replace("WATERFALL_BY_ZONE", "SPRAY_TO_REGION");
    let c = build(&text);
    let e = explain_compiled(&c, &flow(40000));
    let t = all_text(&e);
    assert!(t.contains("no capacity limit"), "{t}");
    assert!(
        !t.contains("000000000") && !t.contains("e9"),
        "explain shows the 10⁹ stand-in: {t}"
    );
    let s = e.service.unwrap();
    assert!(s
        .groups
        .iter()
        .all(|g| g.capacity.is_none() && g.utilisation.is_none()));
    // Both zones of the region share in proportion to their size: 2 and 2 endpoints.
    for g in &s.groups {
        assert!((g.share - 0.5).abs() < 1e-9, "{g:?}");
    }
}
