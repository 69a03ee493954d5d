//! Every hardware capacity limit of the `sim` profile (regmap `[[profiles]]`: 64 × 4 VIP
//! entries, 16 port slots, 8 ACL prefixes, 256 rules, 128 pools, 4096 backends, 131072 Maglev
//! slots) refused with the limit named, at the line and field of the object that does not fit.

use flowtable_compiler::{compile, CompileOptions, Diagnostics, Error, HealthState};
use nlb_config::parse_config;
use nlb_hw::{table_index, FlowKey, Profile};
use std::fmt::Write as _;
use std::net::IpAddr;

fn compile_errors(yaml: &str) -> Diagnostics {
    let (c, d) = parse_config("t.yaml", yaml);
    assert!(d.is_empty(), "parse: {d}");
    match compile(&c, &HealthState::new(), &CompileOptions::default()) {
        Err(Error::Invalid(d)) => d,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("compiled although over capacity"),
    }
}

#[track_caller]
fn expect(d: &Diagnostics, line: u32, path: &str, words: &str) {
    assert!(
        d.iter()
            .any(|x| x.pos.line == line && x.path == path && x.to_string().contains(words)),
        "expected line {line}, {path}: {words}\ngot:\n{d}"
    );
}

/// Line (1-based) of the first line of `text` that contains `needle`.
fn line_of(text: &str, needle: &str) -> u32 {
    text.lines().position(|l| l.contains(needle)).expect(needle) as u32 + 1
}

const ONE_POOL: &str = "\
instances:
  - {name: a, ip: 192.0.2.1, mac: 02:00:00:00:00:01}
targetPools:
  - {name: p, instances: [a]}
forwardingRules:
";

/// `n` TCP rules on one VIP, ports 10, 20, ... (one port each), after [`ONE_POOL`].
fn rules_on_one_vip(n: usize) -> String {
    let mut y = ONE_POOL.to_string();
    for i in 0..n {
        let _ = writeln!(
            y,
            "  - {{name: r{i:02}, IPAddress: 203.0.113.1, portRange: \"{}\", target: p}}",
            10 * (i + 1)
        );
    }
    y
}

/// Sixteen rules on one VIP and protocol fit in every profile (Google Cloud has no such
/// limit; an entry of four port slots refused the fifth), and each port reaches its
/// own rule.
#[test]
fn sixteen_rules_per_vip_fit_in_every_profile() {
    let y = rules_on_one_vip(16);
    let (c, d) = parse_config("t.yaml", &y);
    assert!(d.is_empty(), "parse: {d}");
    for profile in nlb_hw::PROFILES {
        let compiled = compile(&c, &HealthState::new(), &CompileOptions { profile })
            .unwrap_or_else(|e| panic!("{}: {e}", profile.name));
        for i in 0..16u16 {
            let e = flowtable_compiler::explain(
                &compiled.tables,
                &compiled.nic,
                &compiled.symbols,
                &flowtable_compiler::Flow {
                    protocol: 6,
                    src: "198.51.100.1".parse().unwrap(),
                    src_port: 1234,
                    dst: "203.0.113.1".parse().unwrap(),
                    dst_port: 10 * (i + 1),
                    fragment: flowtable_compiler::Fragment::No,
                },
            );
            assert_eq!(e.rule.as_deref(), Some(format!("r{i:02}").as_str()));
            assert_eq!(e.verdict, "forward", "{:?}", e.steps);
        }
    }
}

#[test]
fn port_slots_per_vip() {
    // The 17th rule in port order (r16, port 170, on line 21) is the one that does not fit.
    let y = rules_on_one_vip(17);
    let d = compile_errors(&y);
    expect(
        &d,
        line_of(&y, "name: r16"),
        "forwardingRules[16]",
        "17 rules on 203.0.113.1 TCP, but a VIP entry holds 16 port ranges",
    );
    assert!(
        d.to_string()
            .contains("at most 16 port ranges per VIP and protocol"),
        "{d}"
    );
}

#[test]
fn acl_prefixes_per_rule() {
    let ranges: Vec<String> = (0..9).map(|i| format!("198.51.100.{}/32", i)).collect();
    let y = format!(
        "nic:\n  healthCheckSourceRanges: [192.0.2.250/32]\n{ONE_POOL}  - name: r\n    IPAddress: 203.0.113.1\n    target: p\n    sourceRanges: [{}]\n",
        ranges[..8].join(", ")
    );
    let d = compile_errors(&y);
    expect(
        &d,
        11,
        "forwardingRules[0].sourceRanges",
        "9 source ranges (8 of the rule + 1 health-check ranges), but an ACL entry holds 8",
    );
}

#[test]
fn vip_bucket_overflow() {
    // Five VIPs whose TCP key hashes to one of the sim profile's 64 buckets.
    let p = Profile::by_name("sim").unwrap();
    let mut by_bucket: Vec<Vec<IpAddr>> = vec![Vec::new(); p.vip_buckets as usize];
    let vips: Vec<IpAddr> = (0..=255u8)
        .map(|i| IpAddr::from([203, 0, 113, i]))
        .collect();
    for v in vips {
        by_bucket[table_index(FlowKey::vip(6, v).hash(), p.vip_buckets) as usize].push(v);
    }
    let (bucket, five) = by_bucket
        .iter()
        .enumerate()
        .find(|(_, b)| b.len() >= 5)
        .map(|(i, b)| (i, b[..5].to_vec()))
        .expect("256 VIPs in 64 buckets: some bucket gets 5");
    let mut y = ONE_POOL.to_string();
    for (i, v) in five.iter().enumerate() {
        let _ = writeln!(y, "  - {{name: r{i}, IPAddress: {v}, target: p}}");
    }
    let d = compile_errors(&y);
    // Entries are placed in address order, so the fifth (largest) address finds no way.
    expect(
        &d,
        10,
        "forwardingRules[4].IPAddress",
        &format!("VIP table bucket {bucket} is full: its 4 ways hold"),
    );
    assert!(d.to_string().contains("64 buckets × 4 ways"), "{d}");
}

#[test]
fn rules_pools_and_backends() {
    // 260 rules (4 per VIP), 129 target pools, 4097 instances: each over its table.
    let mut y = String::from("instances:\n");
    for i in 0..4097 {
        let _ = writeln!(
            y,
            "  - {{name: i{i:05}, ip: 192.0.2.1, mac: 02:00:00:00:00:01}}"
        );
    }
    y.push_str("targetPools:\n");
    for i in 0..129 {
        let _ = writeln!(y, "  - {{name: p{i:03}, instances: [i00000]}}");
    }
    y.push_str("forwardingRules:\n");
    for i in 0..260 {
        let _ = writeln!(
            y,
            "  - {{name: r{i:03}, IPAddress: 203.0.113.{}, portRange: \"{}\", target: p000}}",
            i / 4,
            1 + i % 4
        );
    }
    let d = compile_errors(&y);
    expect(
        &d,
        line_of(&y, "name: i04096"),
        "instances[4096]",
        "4097 instances, but the sim profile's backend table holds 4096",
    );
    expect(
        &d,
        line_of(&y, "name: p128"),
        "targetPools[128]",
        "129 target pools and target instances, but the sim profile's pool table holds 128",
    );
    expect(
        &d,
        line_of(&y, "name: r256"),
        "forwardingRules[256]",
        "260 forwarding rules, but the sim profile's rule table holds 256",
    );
}

#[test]
fn maglev_slot_memory() {
    // 65 pools sharing 1100 instances: each needs at least 2039 slots (the smallest ladder
    // prime ≥ 1100); 65 × 2039 = 132535 > 131072.
    let mut y = String::from("instances:\n");
    for i in 0..1100 {
        let _ = writeln!(
            y,
            "  - {{name: i{i:04}, ip: 192.0.2.1, mac: 02:00:00:00:00:01}}"
        );
    }
    y.push_str("targetPools:\n  - name: p00\n    instances: &all [");
    y.push_str(
        &(0..1100)
            .map(|i| format!("i{i:04}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    y.push_str("]\n");
    for i in 1..65 {
        let _ = writeln!(y, "  - {{name: p{i:02}, instances: *all}}");
    }
    let d = compile_errors(&y);
    expect(&d, line_of(&y, "name: p64"), "targetPools[64]", "the pools need 132535 Maglev slots even at the smallest slice sizes, but the sim profile's slot memory holds 131072");
    // 64 such pools fit once the slices step down the ladder from the 110017 slots each wants
    // (the smallest prime >= 100 x 1100), with a note.
    let fits = y.replace("  - {name: p64, instances: *all}\n", "");
    let (c, d) = parse_config("t.yaml", &fits);
    assert!(d.is_empty(), "{d}");
    let compiled = compile(&c, &HealthState::new(), &CompileOptions::default()).unwrap();
    assert!(
        compiled
            .notes
            .iter()
            .any(|n| n.contains("instead of 110017")),
        "{:?}",
        compiled.notes
    );
    let used: u32 = compiled.symbols.pools.iter().map(|p| p.own_size).sum();
    assert!(used <= 131072);
}
