//! `explain` agrees with the compiled image for random flows. The expectation is worked out
//! here from the configuration and the SPEC rules (R2 rule match, R4.3 fragments, R9 ACL,
//! R4.1 TCP fragments of tracked pools, R1 failover, R3.1 keys, R4.2 fragment keys), reading only the decoded image's pool slice
//! and slots, not the compiler's lookup code.

use flowtable_compiler::{
    compile, explain, parse_config, CompileOptions, Config, Flow, Fragment, HealthState, Image,
};
use nlb_hw::enums::KeyType;
use nlb_hw::{table_index, FlowKey};
use proptest::prelude::*;
use std::net::IpAddr;

const CONFIG: &str = "\
nic:
  healthCheckSourceRanges: [192.0.2.250/32]
instances:
  - {name: a-1, ip: 192.0.2.11, mac: 02:00:00:00:00:11}
  - {name: a-2, ip: 192.0.2.12, mac: 02:00:00:00:00:12}
  - {name: a-3, ip: 192.0.2.13, mac: 02:00:00:00:00:13}
  - {name: a-4, ip: 192.0.2.14, mac: 02:00:00:00:00:14}
  - {name: s-1, ip: 192.0.2.21, mac: 02:00:00:00:00:21}
  - {name: s-2, ip: 192.0.2.22, mac: 02:00:00:00:00:22}
  - {name: b-1, ip: 192.0.2.31, mac: 02:00:00:00:00:31, weight: 3}
  - {name: b-2, ip: 192.0.2.32, mac: 02:00:00:00:00:32}
  - {name: v6, ip: 2001:db8::99, mac: 02:00:00:00:00:99}
httpHealthChecks:
  - {name: hc}
targetPools:
  - {name: a, instances: [a-1, a-2, a-3, a-4], backupPool: spare, failoverRatio: 0.5, healthChecks: [hc]}
  - {name: spare, instances: [s-1, s-2], sessionAffinity: CLIENT_IP, healthChecks: [hc]}
  - {name: b, instances: [b-1, b-2], sessionAffinity: CLIENT_IP_PROTO, healthChecks: [hc]}
  - {name: c, instances: [a-1, b-2], sessionAffinity: CLIENT_IP, healthChecks: [hc]}
targetInstances:
  - {name: ti, instance: v6}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.1, portRange: \"80\", target: a}
  - {name: tls, IPAddress: 203.0.113.1, portRange: \"443\", target: c, sourceRanges: [198.51.100.0/25]}
  - {name: dns, IPAddress: 203.0.113.1, IPProtocol: UDP, target: b}
  - {name: other, IPAddress: 203.0.113.2, portRange: \"1000-2000\", target: b}
  - {name: six, IPAddress: 2001:db8::1, portRange: \"8000-8100\", target: ti}
";

struct Case {
    config: Config,
    health: HealthState,
}

fn setup(down: &[&str]) -> Case {
    let (config, d) = parse_config("t.yaml", CONFIG);
    assert!(d.is_empty(), "{d}");
    let mut health = HealthState::new();
    for n in down {
        health.set_healthy(n, false);
    }
    Case { config, health }
}

/// What SPEC says should happen: (verdict, rule, pool, eligible backend names).
fn expected(c: &Case, f: &Flow) -> (String, Option<String>, Option<String>, Vec<String>) {
    let on_vip: Vec<_> = c
        .config
        .forwarding_rules
        .iter()
        .filter(|r| r.ip_address == f.dst && r.ip_protocol.number() == f.protocol)
        .collect();
    let rule = match f.fragment {
        Fragment::Later if on_vip.len() > 1 => return ("punt".into(), None, None, vec![]),
        Fragment::Later => on_vip.first().copied(),
        _ => on_vip
            .iter()
            .copied()
            .find(|r| r.port_ranges.iter().any(|p| p.contains(f.dst_port))),
    };
    let Some(rule) = rule else {
        return ("pass".into(), None, None, vec![]);
    };
    let name = Some(rule.name.clone());
    if !rule.source_ranges.is_empty() {
        let hc = &c.config.nic.health_check_source_ranges;
        if !rule
            .source_ranges
            .iter()
            .chain(hc)
            .any(|p| p.contains(f.src))
        {
            return ("drop".into(), name, None, vec![]);
        }
    }
    if f.fragment == Fragment::First && on_vip.len() > 1 {
        return ("punt".into(), name, None, vec![]);
    }
    // TCP fragments of target pools (which track connections) go to the host, which knows
    // the connections (SPEC R4.1 over R4.2, docs/pipeline.md §6); target instances have one
    // backend and keep the fragment key.
    let pool_name = rule.target.name.clone();
    let tracks = c.config.target_pools.iter().any(|p| p.name == pool_name);
    if f.fragment != Fragment::No && f.protocol == 6 && tracks {
        return ("punt".into(), name, None, vec![]);
    }
    let members = |pool: &str| -> Vec<String> {
        if let Some(p) = c.config.target_pools.iter().find(|p| p.name == pool) {
            p.instances.iter().map(|r| r.name.clone()).collect()
        } else {
            let t = c
                .config
                .target_instances
                .iter()
                .find(|t| t.name == pool)
                .unwrap();
            vec![t.instance.name.clone()]
        }
    };
    let healthy = |pool: &str| -> Vec<String> {
        members(pool)
            .into_iter()
            .filter(|m| c.health.get(pool, m).healthy)
            .collect()
    };
    let mut serving = pool_name.clone();
    if let Some(p) = c.config.target_pools.iter().find(|p| p.name == pool_name) {
        if let (Some(b), Some(ratio)) = (&p.backup_pool, &p.failover_ratio) {
            // The one ratio of this config, 0.5: healthy / members ≤ 1/2.
            assert_eq!(ratio.text(), "0.5");
            let (up, all) = (healthy(&pool_name).len(), members(&pool_name).len());
            if 2 * up <= all && !healthy(&b.name).is_empty() {
                serving = b.name.clone();
            }
        }
    }
    let mut eligible = healthy(&serving);
    if eligible.is_empty() {
        eligible = members(&serving);
    }
    ("forward".into(), name, Some(pool_name), eligible)
}

fn key_type(affinity: &str, fragment: bool) -> KeyType {
    match affinity {
        "NONE" if fragment => KeyType::Tuple3,
        "NONE" => KeyType::Tuple5,
        "CLIENT_IP_PROTO" => KeyType::Tuple3,
        "CLIENT_IP" => KeyType::Tuple2,
        other => panic!("affinity {other} not in this config"),
    }
}

fn flows() -> impl Strategy<Value = Flow> {
    let src = prop_oneof![
        Just("198.51.100.7"),
        Just("198.51.100.200"),
        Just("192.0.2.250"),
        Just("203.0.113.77"),
    ];
    let v4 = (
        src,
        prop_oneof![
            Just("203.0.113.1"),
            Just("203.0.113.2"),
            Just("203.0.113.9")
        ],
    );
    let addrs = prop_oneof![
        v4.prop_map(|(s, d)| (s.parse::<IpAddr>().unwrap(), d.parse::<IpAddr>().unwrap())),
        Just((
            "2001:db8:5::5".parse().unwrap(),
            "2001:db8::1".parse().unwrap()
        )),
    ];
    let port = prop_oneof![
        Just(80u16),
        Just(443),
        Just(53),
        Just(1500),
        Just(8050),
        any::<u16>()
    ];
    let frag = prop_oneof![6 => Just(Fragment::No), 1 => Just(Fragment::First), 1 => Just(Fragment::Later)];
    (
        addrs,
        prop_oneof![Just(6u8), Just(17)],
        any::<u16>(),
        port,
        frag,
    )
        .prop_map(
            |((src, dst), protocol, src_port, dst_port, fragment)| Flow {
                protocol,
                src,
                src_port,
                dst,
                dst_port,
                fragment,
            },
        )
}

fn check_flows(down: &[&str], flows: &[Flow]) -> Result<(), TestCaseError> {
    let c = setup(down);
    let compiled = compile(&c.config, &c.health, &CompileOptions::default()).unwrap();
    let image = Image::read(&compiled.image(1).write().unwrap()).unwrap();
    for f in flows {
        let got = explain(&compiled.tables, &compiled.nic, &compiled.symbols, f);
        let (verdict, rule, pool, eligible) = expected(&c, f);
        prop_assert_eq!(&got.verdict, &verdict, "{:?}", f);
        prop_assert_eq!(&got.rule, &rule, "{:?}", f);
        if verdict != "forward" {
            continue;
        }
        prop_assert_eq!(&got.pool, &pool);
        // The backend the image's own slots give for this key.
        let pid = image.symbols.pool_id(pool.as_deref().unwrap()).unwrap();
        let p = image.tables.pools[usize::from(pid)];
        let kt = key_type(p.affinity.name(), f.fragment != Fragment::No);
        let hash = FlowKey::tuple5(f.protocol, f.src, f.src_port, f.dst, f.dst_port)
            .with_type(kt)
            .hash();
        let slot = p.maglev_base + table_index(hash, p.maglev_size);
        let backend = image
            .symbols
            .backend(image.tables.maglev[slot as usize].backend)
            .unwrap();
        prop_assert_eq!(got.backend.as_deref(), Some(backend), "{:?}", f);
        prop_assert!(
            eligible.iter().any(|e| e == backend),
            "{} not eligible ({:?}) for {:?}",
            backend,
            eligible,
            f
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn explain_agrees_with_the_image(flows in proptest::collection::vec(flows(), 40)) {
        // All healthy; a-1 and a-2 down (2/4 ≤ 0.5: pool a fails over to spare); and every
        // member of b down (fail open).
        check_flows(&[], &flows)?;
        check_flows(&["a-1", "a-2"], &flows)?;
        check_flows(&["a-1", "a-2", "s-1", "s-2", "b-1", "b-2"], &flows)?;
    }
}
