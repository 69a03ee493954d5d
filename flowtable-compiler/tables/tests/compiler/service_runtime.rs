//! The policy runtime of backend services (SPEC R6): live connection counts fed to
//! [`Compiled::rebalance`] move the weights as SPEC R6 says, a steady load moves nothing, and
//! the automatic capacity drain keeps time (R6.3: < 25 % healthy drains, ≥ 35 % for 60 s
//! undrains). Expected slot shares are worked out by hand from R6's fill rule: a tier of
//! capacity C gets C / N of new connections, N being the service's live connections.

use flowtable_compiler::{
    compile, BackendHealth, CompileOptions, Compiled, HealthState, LiveLoad, DEFAULT_DEADBAND,
};
use nlb_config::parse_config;
use std::collections::BTreeMap;

/// Two zones of the NIC's region, 2 × 50 connections each; the NIC in r1-a.
const TWO_ZONES: &str = "\
nic: {region: r1, zone: r1-a}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, portRange: \"80\", backendService: web}
serviceLbPolicies:
  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE, autoCapacityDrain: {enable: true}}
backendServices:
  - name: web
    healthChecks: [hc]
    serviceLbPolicy: zonal
    backends:
      - {group: a, maxConnectionsPerInstance: 50}
      - {group: b, maxConnectionsPerInstance: 50}
      - {group: c, maxConnectionsPerInstance: 50}
instanceGroups:
  - {name: a, zone: r1-a, instances: [a1, a2]}
  - {name: b, zone: r1-b, instances: [b1, b2]}
  - {name: c, zone: r1-c, instances: [c1, c2, c3, c4, c5]}
healthChecks:
  - {name: hc, type: TCP, tcpHealthCheck: {port: 80}}
instances:
  - {name: a1, ip: 192.0.2.1, zone: r1-a, mac: 02:00:00:00:00:01}
  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: 02:00:00:00:00:02}
  - {name: b1, ip: 192.0.2.3, zone: r1-b, mac: 02:00:00:00:00:03}
  - {name: b2, ip: 192.0.2.4, zone: r1-b, mac: 02:00:00:00:00:04}
  - {name: c1, ip: 192.0.2.5, zone: r1-c, mac: 02:00:00:00:00:05}
  - {name: c2, ip: 192.0.2.6, zone: r1-c, mac: 02:00:00:00:00:06}
  - {name: c3, ip: 192.0.2.7, zone: r1-c, mac: 02:00:00:00:00:07}
  - {name: c4, ip: 192.0.2.8, zone: r1-c, mac: 02:00:00:00:00:08}
  - {name: c5, ip: 192.0.2.9, zone: r1-c, mac: 02:00:00:00:00:09}
";

fn build(health: &HealthState) -> Compiled {
    let (c, d) = parse_config("t.yaml", TWO_ZONES);
    assert!(d.is_empty(), "{d}");
    compile(&c, health, &CompileOptions::default()).expect("compiles")
}

/// Fraction of the serving slice's slots per group (first letter of the backend name).
fn group_shares(c: &Compiled) -> BTreeMap<char, f64> {
    let id = c.symbols.pool_id("web").expect("pool");
    let p = c.tables.pools[usize::from(id)];
    let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
    let mut n = BTreeMap::new();
    for s in &c.tables.maglev[b..b + m] {
        let name = c.symbols.backend(s.backend).unwrap_or("?");
        *n.entry(name.chars().next().unwrap_or('?')).or_insert(0.0) += 1.0 / m as f64;
    }
    n
}

fn live(a: u64, b: u64, c: u64) -> LiveLoad {
    let mut l = LiveLoad::new();
    // Spread over the group's first member: the policy counts per group.
    l.add("web", "a1", a);
    l.add("web", "b1", b);
    l.add("web", "c1", c);
    l
}

fn close(got: Option<&f64>, want: f64) -> bool {
    (got.copied().unwrap_or(0.0) - want).abs() < 0.01
}

#[test]
fn the_own_zone_fills_then_spills_by_capacity() {
    let health = HealthState::default();
    let mut c = build(&health);
    // No live connection: all new connections to the NIC's zone.
    assert!(
        close(group_shares(&c).get(&'a'), 1.0),
        "{:?}",
        group_shares(&c)
    );
    // 80 live (< 100 capacity in a): still all to a; nothing to apply.
    let r = c
        .rebalance(&live(80, 0, 0), 1.0, &health, DEFAULT_DEADBAND)
        .unwrap();
    assert!(r.changed.is_empty(), "{r:?}");
    // 200 live: a gets 100/200 = 50 %, the next zones the rest: b (r1-b) 100/200 = 50 %.
    let r = c
        .rebalance(&live(100, 100, 0), 2.0, &health, DEFAULT_DEADBAND)
        .unwrap();
    assert_eq!(r.pools, vec!["web".to_string()]);
    let s = group_shares(&c);
    assert!(close(s.get(&'a'), 0.5) && close(s.get(&'b'), 0.5), "{s:?}");
    // 400 live: a 100/400, b 100/400, c 250/400 (= the rest, 0.5; c's capacity is 250).
    c.rebalance(&live(100, 100, 200), 3.0, &health, DEFAULT_DEADBAND)
        .unwrap();
    let s = group_shares(&c);
    assert!(
        close(s.get(&'a'), 0.25) && close(s.get(&'b'), 0.25) && close(s.get(&'c'), 0.5),
        "{s:?}"
    );
    let seen = c.service_observed("web").expect("a service");
    assert_eq!(seen.groups.iter().map(|g| g.live).sum::<u64>(), 400);
    assert!((seen.groups[0].utilisation - 1.0).abs() < 1e-9);
}

#[test]
fn a_steady_load_changes_no_weight() {
    let health = HealthState::default();
    let mut c = build(&health);
    c.rebalance(&live(100, 100, 50), 0.0, &health, DEFAULT_DEADBAND)
        .unwrap();
    // ±2 % noise on a steady 250 connections for ten minutes of refreshes.
    let mut changes = 0;
    for t in 1..600u64 {
        let j = (t * 7919 % 11) as i64 - 5; // -5..=5
        let b = (100 + j) as u64;
        let r = c
            .rebalance(&live(100, b, 50), t as f64, &health, DEFAULT_DEADBAND)
            .unwrap();
        changes += r.changed.len();
    }
    assert_eq!(changes, 0);
}

/// SPEC R6.1, "fill up to capacity, then spill", with connections that stay open: once the
/// NIC's zone holds its 100, it takes no new connection however many more arrive (C / N alone
/// would keep giving it 100 / N of them: 100 ln(N / 100) past its capacity by N). When its
/// connections close, it takes as many new ones as close.
#[test]
fn a_full_zone_takes_only_what_its_closing_connections_free() {
    let health = HealthState::default();
    let mut c = build(&health);
    // 10 new connections a second, none closing (the slow path counts closings: 0).
    let with_closed = |a: u64, b: u64, closed_a: u64, closed_b: u64| {
        let mut l = live(a, b, 0);
        l.count_closed();
        l.add_closed("web", "a1", closed_a);
        l.add_closed("web", "b1", closed_b);
        l
    };
    let mut t = 0.0;
    for a in (0..=100).step_by(10) {
        t += 1.0;
        c.rebalance(&with_closed(a, 0, 0, 0), t, &health, DEFAULT_DEADBAND)
            .unwrap();
    }
    // Full, nothing closing: everything to the next zone, b.
    let s = group_shares(&c);
    assert!(close(s.get(&'a'), 0.0) && close(s.get(&'b'), 1.0), "{s:?}");
    let seen = c.service_observed("web").expect("a service");
    assert!(seen.groups[0].why.contains("at capacity"), "{seen:?}");
    // And so on while b fills: a stays at 0, not 100 / N.
    for b in (10..=60).step_by(10) {
        t += 1.0;
        c.rebalance(&with_closed(100, b, 0, 0), t, &health, DEFAULT_DEADBAND)
            .unwrap();
        let s = group_shares(&c);
        assert!(close(s.get(&'a'), 0.0), "b at {b}: {s:?}");
    }
    // Now a's connections close at 3 a second and b's at 7 (10 new a second, 10 closing:
    // steady). A full `a` takes what it frees, 30 % (its closings counted up to two
    // standard deviations high: over the last ~10 s about 31.5 closed of 105 opened, so at
    // most (31.5 + 2 √31.5) / 105 = 41 %), held for two minutes; b, well below its capacity
    // (60 of 100), the rest; c, the next zone, nothing while b has room.
    for _ in 0..120 {
        t += 1.0;
        c.rebalance(&with_closed(100, 60, 3, 7), t, &health, DEFAULT_DEADBAND)
            .unwrap();
    }
    let s = group_shares(&c);
    let a = s.get(&'a').copied().unwrap_or(0.0);
    assert!((0.29..=0.42).contains(&a), "{s:?}");
    assert!(
        close(s.get(&'b'), 1.0 - a) && close(s.get(&'c'), 0.0),
        "{s:?}"
    );
    // Below capacity again (90 live), it takes its capacity's share, 100 / 150.
    t += 1.0;
    c.rebalance(&with_closed(90, 60, 3, 7), t, &health, DEFAULT_DEADBAND)
        .unwrap();
    let s = group_shares(&c);
    assert!(close(s.get(&'a'), 100.0 / 150.0), "{s:?}");
}

fn set(h: &mut HealthState, members: &[&str], healthy: bool) {
    for m in members {
        h.set_member(
            "web",
            m,
            BackendHealth {
                healthy,
                weight: None,
            },
        );
    }
}

#[test]
fn a_sick_zone_drains_and_returns_after_sixty_seconds() {
    let mut health = HealthState::default();
    for m in ["a1", "a2", "b1", "b2", "c1", "c2", "c3", "c4", "c5"] {
        set(&mut health, &[m], true);
    }
    let mut c = build(&health);
    // a and b full (100 each), c takes the other 50 of 250: 20 % of new connections.
    let load = live(100, 100, 50);
    c.rebalance(&load, 0.0, &health, DEFAULT_DEADBAND).unwrap();
    // c: 1 of 5 healthy (20 % < 25 %): drained; 1 of 3 groups stays under 50 %.
    set(&mut health, &["c2", "c3", "c4", "c5"], false);
    c.apply_health(&health).unwrap();
    c.rebalance(&load, 1.0, &health, DEFAULT_DEADBAND).unwrap();
    let group_c = |c: &Compiled| {
        c.service_observed("web")
            .expect("service")
            .groups
            .iter()
            .find(|g| g.name == "c")
            .cloned()
            .expect("group c")
    };
    assert!(group_c(&c).drained);
    assert!(
        !group_shares(&c).contains_key(&'c'),
        "{:?}",
        group_shares(&c)
    );
    // 2 of 5 healthy (40 % ≥ 35 %) from t = 10: still drained at t = 69, back at t = 70.
    set(&mut health, &["c2"], true);
    c.apply_health(&health).unwrap();
    for t in [10.0, 30.0, 69.0] {
        c.rebalance(&load, t, &health, DEFAULT_DEADBAND).unwrap();
        assert!(group_c(&c).drained, "t = {t}");
    }
    let r = c.rebalance(&load, 70.0, &health, DEFAULT_DEADBAND).unwrap();
    assert!(!group_c(&c).drained);
    assert!(!r.changed.is_empty(), "undraining is always applied");
    assert!(
        close(group_shares(&c).get(&'c'), 0.2),
        "{:?}",
        group_shares(&c)
    );
    // A reload carries the drain: drain c again, recompile, adopt.
    set(&mut health, &["c2"], false);
    c.rebalance(&load, 80.0, &health, DEFAULT_DEADBAND).unwrap();
    assert!(group_c(&c).drained);
    let mut fresh = build(&health);
    fresh.adopt_policy_state(&c, &health).unwrap();
    assert!(group_c(&fresh).drained);
    assert_eq!(fresh.tables, c.tables);
}

#[test]
fn rebalanced_tables_equal_a_fresh_compile_fed_the_same_counts() {
    let health = HealthState::default();
    let mut c = build(&health);
    let load = live(120, 40, 7);
    c.rebalance(&load, 5.0, &health, 0.0).unwrap();
    let mut fresh = build(&health);
    fresh.rebalance(&load, 5.0, &health, 0.0).unwrap();
    assert_eq!(fresh.tables, c.tables);
}

/// Three services over the same two zones; `web2`'s NIC zone is the fullest.
fn three_services() -> Compiled {
    let mut text = String::from("nic: {region: r1, zone: r1-a}\nforwardingRules:\n");
    for s in 1..=3 {
        text.push_str(&format!(
            "  - {{name: web{s}, IPAddress: 203.0.113.{s}, portRange: \"80\", backendService: web{s}}}\n"
        ));
    }
    text.push_str(
        "serviceLbPolicies:\n  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}\nbackendServices:\n",
    );
    for s in 1..=3 {
        text.push_str(&format!(
            "  - name: web{s}\n    serviceLbPolicy: zonal\n    backends:\n      - {{group: a, maxConnectionsPerInstance: 50}}\n      - {{group: b, maxConnectionsPerInstance: 50}}\n"
        ));
    }
    text.push_str(
        "instanceGroups:\n  - {name: a, zone: r1-a, instances: [a1, a2]}\n  - {name: b, zone: r1-b, instances: [b1, b2]}\n\
         instances:\n  - {name: a1, ip: 192.0.2.1, zone: r1-a, mac: 02:00:00:00:00:01}\n  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: 02:00:00:00:00:02}\n\
         \x20 - {name: b1, ip: 192.0.2.3, zone: r1-b, mac: 02:00:00:00:00:03}\n  - {name: b2, ip: 192.0.2.4, zone: r1-b, mac: 02:00:00:00:00:04}\n",
    );
    let (c, d) = parse_config("three.yaml", &text);
    assert!(d.is_empty(), "{d}");
    compile(&c, &HealthState::default(), &CompileOptions::default()).expect("compiles")
}

/// A refresh that cannot refill every service that moved refills the most urgent first (the
/// largest share move) and leaves the others to the next refreshes, which finish the job:
/// the tables end as an unbudgeted refresh leaves them.
#[test]
fn a_refill_budget_takes_the_largest_moves_first_and_the_rest_later() {
    let health = HealthState::default();
    let mut budgeted = three_services();
    let mut whole = three_services();
    let slots = |c: &Compiled| {
        let id = c.symbols.pool_id("web1").expect("pool");
        u64::from(c.tables.pools[usize::from(id)].maglev_size)
    };
    let one = slots(&budgeted);
    // Each NIC zone (capacity 100) over capacity by another amount, within 3 √100 (closings
    // not counted): a's share moves from 1 to 100/115 (web1, by 0.13), 100/125 (web2, by
    // 0.2), 100/120 (web3, by 0.17).
    let mut load = LiveLoad::new();
    for (s, a) in [("web1", 115), ("web2", 125), ("web3", 120)] {
        load.add(s, "a1", a);
    }
    // The budget holds one service's slices (and a failover slice, if any, of 0 slots).
    let r = budgeted
        .rebalance_within(&load, 1.0, &health, DEFAULT_DEADBAND, one)
        .unwrap();
    assert_eq!(r.pools, vec!["web2".to_string()]);
    assert_eq!(r.deferred, vec!["web1".to_string(), "web3".to_string()]);
    let r = budgeted
        .rebalance_within(&load, 2.0, &health, DEFAULT_DEADBAND, one)
        .unwrap();
    assert_eq!(
        r.pools,
        vec!["web3".to_string()],
        "the larger of the two moves"
    );
    let r = budgeted
        .rebalance_within(&load, 3.0, &health, DEFAULT_DEADBAND, one)
        .unwrap();
    assert_eq!((r.pools, r.deferred), (vec!["web1".to_string()], vec![]));
    let r = whole
        .rebalance(&load, 3.0, &health, DEFAULT_DEADBAND)
        .unwrap();
    assert_eq!(r.pools.len(), 3);
    assert_eq!(budgeted.tables, whole.tables);
}
