//! Over generated configurations: reordering every list gives byte-identical images
//! (SPEC R10.4), and recomputing pools after a health change equals a full compile.

use flowtable_compiler::{compile, CompileOptions, HealthState};
use nlb_config::parse_config;
use proptest::prelude::*;
use std::fmt::Write as _;

/// A generated rule: (VIP octet, UDP?, port slot, pool index).
type GenRule = (u8, bool, u8, usize);

#[derive(Debug, Clone)]
struct Gen {
    instances: usize,
    /// Per pool: member indices and whether it has the next pool as backup.
    pools: Vec<(Vec<usize>, bool, u8)>,
    /// Per rule: VIP index, UDP?, port slot (0..4 → disjoint ranges), pool.
    rules: Vec<GenRule>,
}

fn gen() -> impl Strategy<Value = Gen> {
    (2usize..30).prop_flat_map(|n| {
        let pool = (proptest::collection::vec(0..n, 1..8), any::<bool>(), 0u8..3);
        (
            proptest::collection::vec(pool, 1..6),
            proptest::collection::vec((0u8..4, any::<bool>(), 0u8..4, 0usize..6), 1..12),
        )
            .prop_map(move |(pools, rules)| Gen {
                instances: n,
                pools,
                rules,
            })
    })
}

/// YAML for `g`, with every list (and member list) rotated by `rot`.
fn yaml(g: &Gen, rot: usize) -> String {
    fn rotated<T: Clone>(v: &[T], r: usize) -> Vec<T> {
        let mut v = v.to_vec();
        if !v.is_empty() {
            let k = r % v.len();
            v.rotate_left(k);
        }
        v
    }
    let mut s = String::from("instances:\n");
    let idx: Vec<usize> = (0..g.instances).collect();
    for i in rotated(&idx, rot) {
        let _ = writeln!(
            s,
            "  - {{name: i{i}, ip: 192.0.2.{}, mac: 02:00:00:00:00:{:02x}, weight: {}}}",
            i + 1,
            i + 1,
            1 + i % 3
        );
    }
    s.push_str("targetPools:\n");
    let np = g.pools.len();
    let pidx: Vec<usize> = (0..np).collect();
    for p in rotated(&pidx, rot + 1) {
        let (members, backup, affinity) = &g.pools[p];
        let mut m: Vec<usize> = members.clone();
        m.sort_unstable();
        m.dedup();
        let names: Vec<String> = rotated(&m, rot + 2)
            .iter()
            .map(|i| format!("i{i}"))
            .collect();
        let aff = ["NONE", "CLIENT_IP", "CLIENT_IP_PROTO"][usize::from(*affinity)];
        let _ = write!(
            s,
            "  - {{name: p{p}, instances: [{}], sessionAffinity: {aff}",
            names.join(", ")
        );
        if *backup && np > 1 {
            let _ = write!(s, ", backupPool: p{}, failoverRatio: 0.5", (p + 1) % np);
        }
        // Most pools are health checked; every fourth is not (its members always count as
        // healthy, SPEC R5.5).
        if p % 4 != 3 {
            s.push_str(", healthChecks: [hc]");
        }
        s.push_str("}\n");
    }
    s.push_str("httpHealthChecks:\n  - {name: hc}\n");
    s.push_str("forwardingRules:\n");
    // One rule per (VIP, protocol, port slot): later duplicates are dropped.
    let mut seen = std::collections::BTreeSet::new();
    let rules: Vec<(usize, &GenRule)> = g
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| seen.insert((r.0, r.1, r.2)))
        .collect();
    for (k, (vip, udp, slot, pool)) in rotated(&rules, rot + 3) {
        let lo = 1000 * (u32::from(*slot) + 1);
        let _ = writeln!(
            s,
            "  - {{name: r{k}, IPAddress: 203.0.113.{vip}, IPProtocol: {}, portRange: \"{lo}-{}\", target: p{}}}",
            if *udp { "UDP" } else { "TCP" },
            lo + 999,
            pool % np
        );
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn reordering_lists_gives_identical_images(g in gen(), rot in 1usize..7, down in proptest::collection::vec(0usize..30, 0..6)) {
        let mut health = HealthState::new();
        for d in &down {
            health.set_healthy(&format!("i{d}"), false);
        }
        let opts = CompileOptions::default();
        let (a, da) = parse_config("a.yaml", &yaml(&g, 0));
        let (b, db) = parse_config("b.yaml", &yaml(&g, rot));
        prop_assert!(da.is_empty() && db.is_empty(), "{} {}", da, db);
        let ia = compile(&a, &health, &opts).unwrap().image(5).write().unwrap();
        let ib = compile(&b, &health, &opts).unwrap().image(5).write().unwrap();
        prop_assert!(ia == ib, "images differ after reordering");
    }

    #[test]
    fn recompute_after_health_changes_equals_full_compile(
        g in gen(),
        steps in proptest::collection::vec((0usize..30, any::<bool>()), 1..8),
    ) {
        let (c, d) = parse_config("a.yaml", &yaml(&g, 0));
        prop_assert!(d.is_empty(), "{}", d);
        let opts = CompileOptions::default();
        let mut health = HealthState::new();
        let mut live = compile(&c, &health, &opts).unwrap();
        for (i, up) in steps {
            let name = format!("i{}", i % g.instances);
            health.set_healthy(&name, up);
            for pool in live.pools_with_backend(&name) {
                live.recompile_pool(&pool, &health).unwrap();
            }
            let full = compile(&c, &health, &opts).unwrap();
            prop_assert!(live.tables == full.tables, "after {} -> {}", name, up);
        }
    }
}
