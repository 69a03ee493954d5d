//! `explain` agrees with the compiled image for random flows. The expectation is worked out
//! here from the configuration and the SPEC rules (R2 rule match, R4.3 fragments, R9 ACL,
//! R4.1 TCP fragments of tracked pools, R1 failover, R3.1 keys, R4.2 fragment keys), reading only the decoded image's pool slice
//! and slots, not the compiler's lookup code.

use flowtable_compiler::{
    compile, explain, CompileOptions, Config, Flow, Fragment, HealthState, Image,
};
use nlb_config::parse_config;
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

/// A frame of the flow, built with etherparse: TCP (flags ACK: not a SYN) or UDP over IPv4 or
/// IPv6; a first fragment has MF set at offset 0, a later one offset 1480 (its L4 bytes are
/// payload then). The IPv6 fragment header is written here (RFC 8200 §4.5: offset in bits
/// 15..3, M in bit 0): etherparse 0.19.0 writes M into bit 7.
fn frame_of(f: &Flow) -> Vec<u8> {
    use etherparse::{IpFragOffset, IpHeaders, IpNumber, Ipv4Header};
    let (more, offset) = match f.fragment {
        Fragment::No => (false, 0u16),
        Fragment::First => (true, 0),
        Fragment::Later => (true, 185),
    };
    let number = IpNumber(f.protocol);
    let ip = match (f.src, f.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = Ipv4Header::new(0, 64, number, s.octets(), d.octets()).unwrap();
            h.more_fragments = more;
            h.fragment_offset = IpFragOffset::try_new(offset).unwrap();
            h.identification = 4242;
            IpHeaders::Ipv4(h, Default::default())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => IpHeaders::Ipv6(
            etherparse::Ipv6Header {
                hop_limit: 64,
                source: s.octets(),
                destination: d.octets(),
                next_header: number,
                ..Default::default()
            },
            Default::default(),
        ),
        _ => panic!("mixed families: {f:?}"),
    };
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1]).ip(ip);
    let mut out = Vec::new();
    if f.protocol == 6 {
        b.tcp(f.src_port, f.dst_port, 1, 1000)
            .ack(1)
            .write(&mut out, &[0u8; 32])
            .unwrap();
    } else {
        b.udp(f.src_port, f.dst_port)
            .write(&mut out, &[0u8; 32])
            .unwrap();
    }
    if f.src.is_ipv6() && f.fragment != Fragment::No {
        // Ethernet 14 + IPv6 40: the fragment header goes between the IPv6 header and L4.
        let payload = u16::from_be_bytes([out[18], out[19]]) + 8;
        out[18..20].copy_from_slice(&payload.to_be_bytes());
        out[20] = 44;
        let field = offset << 3 | u16::from(more);
        let mut frag = vec![f.protocol, 0];
        frag.extend_from_slice(&field.to_be_bytes());
        frag.extend_from_slice(&4242u32.to_be_bytes());
        out.splice(54..54, frag);
    }
    out
}

/// Everything `explain` and the golden model's result both name.
fn fields_of_explain(
    e: &flowtable_compiler::Explanation,
) -> (
    String,
    String,
    Option<u16>,
    Option<u16>,
    Option<u16>,
    Option<String>,
) {
    (
        e.verdict.clone(),
        e.reason.clone(),
        e.rule_id,
        e.pool_id,
        e.backend_id,
        e.key.clone(),
    )
}

fn fields_of_result(
    r: &firmware_sim::PacketResult,
) -> (
    String,
    String,
    Option<u16>,
    Option<u16>,
    Option<u16>,
    Option<String>,
) {
    (
        r.verdict.name().to_ascii_lowercase(),
        r.reason.name().to_string(),
        r.rule,
        r.pool,
        r.backend,
        r.key
            .map(|k| firmware_sim::pipeline::key_report_name(k).to_string()),
    )
}

/// `explain` says what the golden model (`firmware-sim`, a separate implementation of the
/// pipeline, fed a real frame of the flow) does: verdict, reason, rule, pool, backend and key,
/// over the compiled tables and over tables broken in the ways the pipeline must still
/// decide (an empty slice, a slice past the slot memory, dead backends, a VIP entry with no
/// valid port slot, ACL prefixes longer than 128 bits, pools that track or not).
#[test]
fn explain_agrees_with_the_golden_model() {
    let c = setup(&[]);
    let compiled = compile(&c.config, &c.health, &CompileOptions::default()).unwrap();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(flows(), 400);
    let flows = proptest::strategy::ValueTree::current(&strategy.new_tree(&mut runner).unwrap());
    let mut seen = std::collections::BTreeSet::new();
    for variant in 0..7 {
        let mut t = compiled.tables.clone();
        match variant {
            1 => t.pools.iter_mut().for_each(|p| p.maglev_size = 0),
            2 => t.pools.iter_mut().for_each(|p| {
                p.maglev_base = t.profile.maglev_slots - 2;
                p.maglev_size = p.maglev_size.max(7);
            }),
            3 => t.backends.iter_mut().for_each(|b| b.valid = false),
            4 => t.vip.iter_mut().for_each(|v| {
                v.slot.iter_mut().for_each(|s| s.valid = false);
            }),
            5 => t.acl.iter_mut().for_each(|a| {
                a.prefix.iter_mut().for_each(|p| p.prefix_len += 100);
            }),
            6 => t.pools.iter_mut().for_each(|p| p.track = !p.track),
            _ => {}
        }
        let mut nic = firmware_sim::ModelDevice::from_tables(t.clone(), compiled.nic);
        let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
        for f in &flows {
            let e = explain(&t, &compiled.nic, &compiled.symbols, f);
            let r = nic.receive(&frame_of(f), &mut out).unwrap();
            assert_eq!(
                fields_of_explain(&e),
                fields_of_result(&r),
                "tables variant {variant}, {f:?}: {e:#?}"
            );
            seen.insert((e.verdict.clone(), e.reason.clone()));
        }
    }
    // The flows reach every outcome explain can give.
    for want in [
        ("forward", "FORWARDED"),
        ("pass", "NO_RULE"),
        ("drop", "ACL_DENIED"),
        ("drop", "NO_BACKEND"),
        ("punt", "FRAGMENT_NEEDS_STATE"),
    ] {
        assert!(
            seen.contains(&(want.0.to_string(), want.1.to_string())),
            "no flow ended {want:?}: {seen:?}"
        );
    }
}

/// docs/pipeline.md §4: a later fragment (no ports) on a VIP entry with no valid port slot
/// matches no rule; only two or more valid slots send it to the host.
#[test]
fn a_later_fragment_on_an_entry_without_valid_slots_matches_no_rule() {
    let c = setup(&[]);
    let compiled = compile(&c.config, &c.health, &CompileOptions::default()).unwrap();
    let mut t = compiled.tables.clone();
    let dst: IpAddr = "203.0.113.2".parse().unwrap();
    let entry = t
        .vip
        .iter_mut()
        .find(|v| v.valid && v.addr == nlb_hw::hash::addr_to_u128(dst))
        .expect("the VIP of rule `other`");
    entry.slot.iter_mut().for_each(|s| s.valid = false);
    let flow = Flow {
        protocol: 6,
        src: "198.51.100.7".parse().unwrap(),
        src_port: 0,
        dst,
        dst_port: 0,
        fragment: Fragment::Later,
    };
    let e = explain(&t, &compiled.nic, &compiled.symbols, &flow);
    assert_eq!((e.verdict.as_str(), e.reason.as_str()), ("pass", "NO_RULE"));
    assert_eq!(e.rule, None);
    assert!(
        e.steps[0].contains("has no valid port slot: no rule matches"),
        "{:?}",
        e.steps
    );
}

/// docs/pipeline.md §5: an ACL prefix holds the client only with `prefix_len ≤ 128`; a longer
/// one (the field has 8 bits) holds nothing, even the exact address.
#[test]
fn an_acl_prefix_longer_than_128_bits_holds_nothing() {
    let c = setup(&[]);
    let compiled = compile(&c.config, &c.health, &CompileOptions::default()).unwrap();
    let mut t = compiled.tables.clone();
    let client: IpAddr = "198.51.100.7".parse().unwrap();
    let tls = compiled
        .symbols
        .rules
        .iter()
        .position(|r| r == "tls")
        .unwrap();
    assert!(t.rules[tls].acl_enabled);
    for (i, len) in [(0usize, 129u8), (1, 200), (2, 255)] {
        t.acl[tls].prefix[i] = nlb_hw::layouts::AclPrefix {
            valid: true,
            prefix_len: len,
            addr: nlb_hw::hash::addr_to_u128(client),
        };
    }
    for p in t.acl[tls].prefix.iter_mut().skip(3) {
        p.valid = false;
    }
    let flow = Flow {
        protocol: 6,
        src: client,
        src_port: 40000,
        dst: "203.0.113.1".parse().unwrap(),
        dst_port: 443,
        fragment: Fragment::No,
    };
    let e = explain(&t, &compiled.nic, &compiled.symbols, &flow);
    assert_eq!(
        (e.verdict.as_str(), e.reason.as_str()),
        ("drop", "ACL_DENIED")
    );
    assert_eq!(e.acl.as_deref(), Some("denied"));
    // /128 is the longest prefix that holds anything.
    t.acl[tls].prefix[3] = nlb_hw::layouts::AclPrefix {
        valid: true,
        prefix_len: 128,
        addr: nlb_hw::hash::addr_to_u128(client),
    };
    let e = explain(&t, &compiled.nic, &compiled.symbols, &flow);
    assert_eq!(e.verdict, "forward");
    assert_eq!(e.acl.as_deref(), Some("allowed by 198.51.100.7/32"));
}

/// A frame of a portless flow (docs/pipeline.md §3): ICMP / ICMPv6 echo for protocols 1 / 58,
/// else the protocol's number with 16 bytes after the IP header (SCTP's ports among them,
/// which nothing reads). Fragments as in `frame_of` (IPv4 only here).
fn portless_frame_of(f: &Flow) -> Vec<u8> {
    use etherparse::{IpFragOffset, IpHeaders, IpNumber, Ipv4Header};
    let (more, offset) = match f.fragment {
        Fragment::No => (false, 0u16),
        Fragment::First => (true, 0),
        Fragment::Later => (true, 185),
    };
    let number = IpNumber(f.protocol);
    let ip = match (f.src, f.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = Ipv4Header::new(0, 64, number, s.octets(), d.octets()).unwrap();
            h.more_fragments = more;
            h.fragment_offset = IpFragOffset::try_new(offset).unwrap();
            h.identification = 4242;
            IpHeaders::Ipv4(h, Default::default())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            assert_eq!(
                f.fragment,
                Fragment::No,
                "IPv6 fragments are not built here"
            );
            IpHeaders::Ipv6(
                etherparse::Ipv6Header {
                    hop_limit: 64,
                    source: s.octets(),
                    destination: d.octets(),
                    next_header: number,
                    ..Default::default()
                },
                Default::default(),
            )
        }
        _ => panic!("mixed families: {f:?}"),
    };
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1]).ip(ip);
    let mut out = Vec::new();
    match (f.protocol, f.src.is_ipv6()) {
        (1, false) => b.icmpv4_echo_request(1, 1).write(&mut out, b"ping"),
        (58, true) => b.icmpv6_echo_request(1, 1).write(&mut out, b"ping"),
        (p, _) => {
            let mut payload = f.src_port.to_be_bytes().to_vec();
            payload.extend_from_slice(&f.dst_port.to_be_bytes());
            payload.resize(16, 0);
            b.write(&mut out, IpNumber(p), &payload)
        }
    }
    .unwrap();
    out
}

/// Portless flows (docs/pipeline.md §3-§7, SPEC R2): a flow of any protocol but TCP and UDP is
/// portless and looks up VIP protocol 0, an `L3_DEFAULT` rule's entry. Without one it matches
/// no rule, as before; with one (added here by hand: the compiler side is separate) `explain`
/// names the VIP protocol, the rule and the 3-tuple key, and agrees with the golden model fed
/// a real frame of the flow, the ports the caller gave ignored.
#[test]
fn a_portless_flow_takes_the_l3_default_entry() {
    let c = setup(&[]);
    let compiled = compile(&c.config, &c.health, &CompileOptions::default()).unwrap();
    let rule_id = |name: &str| {
        compiled
            .symbols
            .rules
            .iter()
            .position(|r| r == name)
            .unwrap() as u16
    };
    let v4: IpAddr = "203.0.113.1".parse().unwrap();
    let v6: IpAddr = "2001:db8::1".parse().unwrap();
    let gre = Flow {
        protocol: 47,
        src: "198.51.100.7".parse().unwrap(),
        src_port: 1234,
        dst: v4,
        dst_port: 80,
        fragment: Fragment::No,
    };
    let e = explain(&compiled.tables, &compiled.nic, &compiled.symbols, &gre);
    assert_eq!((e.verdict.as_str(), e.reason.as_str()), ("pass", "NO_RULE"));
    assert!(
        e.steps[0].starts_with("protocol 47 (GRE) → VIP protocol 0: "),
        "{:?}",
        e.steps
    );
    assert!(
        e.steps[1].contains(
            "holds no entry for 203.0.113.1 VIP protocol 0 (the VIP has no L3_DEFAULT rule): no rule matches"
        ),
        "{:?}",
        e.steps
    );

    // L3_DEFAULT rules: 203.0.113.1 → rule `web` (pool a, NONE), 2001:db8::1 → rule `six`.
    let mut t = compiled.tables.clone();
    for (addr, rule) in [(v4, rule_id("web")), (v6, rule_id("six"))] {
        let addr = nlb_hw::hash::addr_to_u128(addr);
        let bucket = nlb_reference::lookup::vip_bucket(t.profile, 0, addr) as usize;
        let ways = t.profile.vip_ways as usize;
        let way = (0..ways).find(|w| !t.vip[bucket * ways + w].valid).unwrap();
        let mut entry = nlb_hw::layouts::VipEntry {
            valid: true,
            protocol: 0,
            addr,
            ..Default::default()
        };
        entry.slot[0] = nlb_hw::layouts::PortSlot {
            valid: true,
            port_lo: 0,
            port_hi: 65535,
            rule,
        };
        t.vip[bucket * ways + way] = entry;
    }
    let mut nic = firmware_sim::ModelDevice::from_tables(t.clone(), compiled.nic);
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    let mut flows = Vec::new();
    for protocol in [1u8, 47, 50, 132, 0, 255] {
        for fragment in [Fragment::No, Fragment::First, Fragment::Later] {
            flows.push(Flow {
                protocol,
                fragment,
                ..gre
            });
        }
    }
    for protocol in [58u8, 47, 132] {
        flows.push(Flow {
            protocol,
            src: "2001:db8:5::5".parse().unwrap(),
            dst: v6,
            ..gre
        });
    }
    for f in &flows {
        let e = explain(&t, &compiled.nic, &compiled.symbols, f);
        let r = nic.receive(&portless_frame_of(f), &mut out).unwrap();
        assert_eq!(fields_of_explain(&e), fields_of_result(&r), "{f:?}: {e:#?}");
        assert_eq!(e.verdict, "forward", "{f:?}: {e:#?}");
        assert_eq!(e.key.as_deref(), Some("3tuple"), "{f:?}");
        let ports_ignored = FlowKey::tuple5(f.protocol, f.src, 0, f.dst, 0)
            .with_type(KeyType::Tuple3)
            .hash();
        assert_eq!(e.hash, Some(ports_ignored), "{f:?}");
        if f.dst == v4 {
            assert_eq!(e.rule.as_deref(), Some("web"));
            assert!(
                e.steps.iter().any(|s| s.starts_with(&format!(
                    "rule web (id {}): 203.0.113.1 other protocols (L3_DEFAULT) all ports; VIP table bucket",
                    rule_id("web")
                ))),
                "{:?}",
                e.steps
            );
            // Pool a is NONE: a whole packet would use the 5-tuple.
            let why = if f.fragment == Fragment::No {
                "(a portless flow: the 3-tuple, docs/pipeline.md §6)"
            } else {
                "(a fragment: the 3-tuple, SPEC R4.2)"
            };
            assert!(
                e.steps
                    .iter()
                    .any(|s| s.starts_with("key 3tuple ") && s.contains(why)),
                "{:?}",
                e.steps
            );
        }
    }
    // TCP keeps its own entry: port 80 is `web`'s, port 9999 none (no gap slots here).
    let tcp = Flow { protocol: 6, ..gre };
    assert_eq!(
        explain(&t, &compiled.nic, &compiled.symbols, &tcp)
            .rule
            .as_deref(),
        Some("web")
    );
    let e = explain(
        &t,
        &compiled.nic,
        &compiled.symbols,
        &Flow {
            dst_port: 9999,
            ..tcp
        },
    );
    assert_eq!(e.reason, "NO_RULE");
}
