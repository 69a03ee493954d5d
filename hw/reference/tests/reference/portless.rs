//! Portless flows and `L3_DEFAULT` rules (docs/pipeline.md §3, §4, §6, §7; SPEC R2): every
//! protocol but TCP and UDP has ports 0 and VIP protocol 0; VIP entries of protocol 0 hold the
//! rule of an `L3_DEFAULT` forwarding rule; the affinity key of a portless flow is the fragment
//! column's; any protocol is tracked. The bank is built by hand and every expectation (buckets,
//! key hashes, Maglev slots) is worked out here from the regmap's hash and `(hash × size) >>
//! 32`, not taken from the crate.

use nlb_hw::enums::{Affinity, DefaultAction, KeyType, Reason, Verdict};
use nlb_hw::layouts::{
    BackendEntry, CtEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{FlowKey, NicSettings, Profile, Tables};
use nlb_reference::conntrack::ConnTable;
use nlb_reference::lookup::{self, CtOutcome, Lookup, Packet};
use nlb_reference::{Flow, Fragment, NoTrace, Step, Trace};

const VIP4: u128 = 0xffff_cb00_7101; // 203.0.113.1
const CLIENT4: u128 = 0xffff_c633_6407; // 198.51.100.7
const VIP6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001; // 2001:db8::1
const CLIENT6: u128 = 0x2001_0db8_00aa_0000_0000_0000_0000_0007; // 2001:db8:aa::7

/// Rules: 3 (TCP port 80, pool 2), 7 (the IPv4 VIP's L3_DEFAULT rule, pool 4), 8 (the IPv6
/// VIP's L3_DEFAULT rule, pool 5), 9 (a decoy entry of protocol 47 no lookup may find).
const TCP_RULE: u16 = 3;
const L3_RULE4: u16 = 7;
const L3_RULE6: u16 = 8;
const DECOY_RULE: u16 = 9;

fn by_hand(hash: u32, size: u32) -> u32 {
    ((u64::from(hash) * u64::from(size)) >> 32) as u32
}

fn vip_hash(protocol: u8, vip: u128) -> u32 {
    FlowKey {
        key_type: KeyType::Vip,
        protocol,
        dst_addr: vip,
        ..FlowKey::default()
    }
    .hash()
}

fn slot(lo: u16, hi: u16, rule: u16) -> PortSlot {
    PortSlot {
        valid: true,
        port_lo: lo,
        port_hi: hi,
        rule,
    }
}

/// Puts an entry in the last free way of the bucket its (protocol, address) hashes to.
fn place(t: &mut Tables, e: VipEntry) -> u32 {
    let ways = t.profile.vip_ways;
    let bucket = by_hand(vip_hash(e.protocol, e.addr), t.profile.vip_buckets);
    let way = (0..ways)
        .rev()
        .find(|w| !t.vip[(bucket * ways + w) as usize].valid)
        .expect("a free way");
    let index = bucket * ways + way;
    t.vip[index as usize] = e;
    index
}

fn entry(protocol: u8, addr: u128, slots: &[PortSlot]) -> VipEntry {
    let mut e = VipEntry {
        valid: true,
        protocol,
        addr,
        ..VipEntry::default()
    };
    e.slot[..slots.len()].copy_from_slice(slots);
    e
}

/// The IPv4 VIP: TCP port 80 → rule 3 and the gaps 0-79, 81-65535 → rule 7 (what the
/// compiler writes for an L3_DEFAULT rule beside a TCP rule), protocol 0 → rule 7, and an
/// entry of protocol 47 → rule 9. The IPv6 VIP: protocol 0 → rule 8. Pools: 2 CLIENT_IP
/// tracking (slots 100..107, backends 10..16), 4 NONE tracking (slots 200..211, backends
/// 20..30), 5 CLIENT_IP_PORT_PROTO not tracking (slots 300..305, backends 40..44).
/// `with_l3`: the protocol-0 entries and the gap slots exist.
fn bank(with_l3: bool) -> Tables {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut t = Tables::empty(profile);
    let mut tcp = vec![slot(80, 80, TCP_RULE)];
    if with_l3 {
        tcp.extend([slot(0, 79, L3_RULE4), slot(81, 65535, L3_RULE4)]);
        place(&mut t, entry(0, VIP4, &[slot(0, 65535, L3_RULE4)]));
        place(&mut t, entry(0, VIP6, &[slot(0, 65535, L3_RULE6)]));
    }
    place(&mut t, entry(6, VIP4, &tcp));
    place(&mut t, entry(47, VIP4, &[slot(0, 65535, DECOY_RULE)]));
    for (rule, pool) in [
        (TCP_RULE, 2u16),
        (L3_RULE4, 4),
        (L3_RULE6, 5),
        (DECOY_RULE, 2),
    ] {
        t.rules[usize::from(rule)] = RuleEntry {
            valid: true,
            acl_enabled: false,
            pool,
        };
    }
    for (pool, affinity, track, base, size, first) in [
        (2usize, Affinity::ClientIp, true, 100u32, 7u32, 10u16),
        (4, Affinity::None, true, 200, 11, 20),
        (5, Affinity::ClientIpPortProto, false, 300, 5, 40),
    ] {
        t.pools[pool] = PoolEntry {
            valid: true,
            affinity,
            maglev_base: base,
            maglev_size: size,
            track,
            ..PoolEntry::default()
        };
        for s in 0..size {
            let b = first + s as u16;
            t.maglev[(base + s) as usize] = MaglevSlot { backend: b };
            t.backends[usize::from(b)] = BackendEntry {
                valid: true,
                is_ipv6: false,
                addr: 0xffff_c000_0200 + u128::from(b),
                mac: 0x0200_0000_0000 + u64::from(b),
            };
        }
    }
    t
}

fn packet(protocol: u8, client: u128, vip: u128, fragment: Fragment) -> Packet {
    Packet {
        flow: Flow {
            protocol,
            client,
            client_port: 0,
            vip,
            vip_port: 0,
        },
        fragment,
        icmp_error: false,
        tcp_flags: 0,
    }
}

fn run(t: &Tables, ct: Option<&ConnTable>, p: &Packet) -> Lookup {
    let nic = NicSettings::default();
    match ct {
        Some(ct) => lookup::lookup(t, &nic, Some(ct), p, &mut NoTrace),
        None => lookup::lookup(t, &nic, None::<&ConnTable>, p, &mut NoTrace),
    }
}

/// The 3-tuple key of a portless flow (ports 0) and its hash.
fn tuple3_hash(protocol: u8, client: u128, vip: u128) -> u32 {
    FlowKey {
        key_type: KeyType::Tuple3,
        protocol,
        src_port: 0,
        dst_port: 0,
        src_addr: client,
        dst_addr: vip,
    }
    .hash()
}

/// ICMP (echo), GRE, ESP, SCTP (ports on the wire, none read: the contract treats it as
/// portless), and the boundaries 0 and 255, to the IPv4 VIP; ICMPv6 (not an error) and the
/// same others to the IPv6 VIP.
const PORTLESS4: [u8; 6] = [1, 47, 50, 132, 0, 255];
const PORTLESS6: [u8; 5] = [58, 47, 50, 132, 255];

#[test]
fn a_portless_flow_takes_the_protocol_0_entry() {
    let t = bank(true);
    for proto in PORTLESS4 {
        let got = run(&t, None, &packet(proto, CLIENT4, VIP4, Fragment::No));
        // Pool 4 (NONE): the fragment column of the key table, TUPLE3 (docs/pipeline.md §6).
        let hash = tuple3_hash(proto, CLIENT4, VIP4);
        let backend = 20 + by_hand(hash, 11) as u16;
        assert_eq!(
            (got.verdict, got.reason, got.rule, got.pool),
            (Verdict::Forward, Reason::Forwarded, Some(L3_RULE4), Some(4)),
            "protocol {proto}: {got:?}"
        );
        assert_eq!(got.key, Some(KeyType::Tuple3), "protocol {proto}");
        assert_eq!(got.backend, Some(backend), "protocol {proto}");
        // A tracking pool tracks every protocol (§7): a miss with no table.
        assert_eq!(got.conntrack, CtOutcome::Miss, "protocol {proto}");
    }
    for proto in PORTLESS6 {
        let got = run(&t, None, &packet(proto, CLIENT6, VIP6, Fragment::No));
        let hash = tuple3_hash(proto, CLIENT6, VIP6);
        assert_eq!(
            (got.verdict, got.rule, got.pool, got.key),
            (
                Verdict::Forward,
                Some(L3_RULE6),
                Some(5),
                Some(KeyType::Tuple3)
            ),
            "protocol {proto}: {got:?}"
        );
        assert_eq!(got.backend, Some(40 + by_hand(hash, 5) as u16));
        assert_eq!(got.conntrack, CtOutcome::None, "pool 5 does not track");
    }
}

#[test]
fn the_trace_names_the_vip_protocol_and_the_portless_key() {
    let t = bank(true);
    let mut trace = Trace::default();
    lookup::lookup(
        &t,
        &NicSettings::default(),
        None::<&ConnTable>,
        &packet(47, CLIENT4, VIP4, Fragment::No),
        &mut trace,
    );
    let bucket = by_hand(vip_hash(0, VIP4), t.profile.vip_buckets);
    let vip = trace
        .steps
        .iter()
        .find_map(|s| match *s {
            Step::Vip {
                protocol,
                hash,
                bucket: b,
                ..
            } => Some((protocol, hash, b)),
            _ => None,
        })
        .expect("a VIP step");
    assert_eq!(vip, (0, vip_hash(0, VIP4), bucket));
    let key = trace
        .steps
        .iter()
        .find_map(|s| match *s {
            Step::Key {
                fragment,
                portless,
                key,
                hash,
                ..
            } => Some((fragment, portless, key.key_type, hash)),
            _ => None,
        })
        .expect("a key step");
    assert_eq!(
        key,
        (false, true, KeyType::Tuple3, tuple3_hash(47, CLIENT4, VIP4))
    );
    // TCP and UDP look themselves up.
    let mut trace = Trace::default();
    let mut tcp = packet(6, CLIENT4, VIP4, Fragment::No);
    tcp.flow.vip_port = 80;
    lookup::lookup(
        &t,
        &NicSettings::default(),
        None::<&ConnTable>,
        &tcp,
        &mut trace,
    );
    assert!(trace
        .steps
        .iter()
        .any(|s| matches!(s, Step::Vip { protocol: 6, .. })));
}

/// docs/pipeline.md §4 as it was before L3_DEFAULT rules, for a bank without protocol-0
/// entries: an ICMP echo, GRE, ... to a VIP matches no rule (the default action, NO_RULE).
/// An entry of the packet's own protocol (which no compiler writes) is not looked at.
#[test]
fn without_a_protocol_0_entry_a_portless_flow_is_unmatched_as_before() {
    let t = bank(false);
    for (client, vip, protos) in [
        (CLIENT4, VIP4, &PORTLESS4[..]),
        (CLIENT6, VIP6, &PORTLESS6[..]),
    ] {
        for &proto in protos {
            let p = packet(proto, client, vip, Fragment::No);
            let got = run(&t, None, &p);
            assert_eq!(
                (got.verdict, got.reason, got.rule, got.pool, got.backend),
                (Verdict::Pass, Reason::NoRule, None, None, None),
                "protocol {proto}"
            );
            let drop = NicSettings {
                default_action: DefaultAction::Drop,
                ..NicSettings::default()
            };
            let got = lookup::lookup(&t, &drop, None::<&ConnTable>, &p, &mut NoTrace);
            assert_eq!((got.verdict, got.reason), (Verdict::Drop, Reason::NoRule));
        }
    }
    // TCP keeps its rule, other ports stay unmatched.
    let mut tcp = packet(6, CLIENT4, VIP4, Fragment::No);
    tcp.flow.vip_port = 80;
    assert_eq!(run(&t, None, &tcp).rule, Some(TCP_RULE));
    tcp.flow.vip_port = 8080;
    assert_eq!(run(&t, None, &tcp).reason, Reason::NoRule);
}

/// docs/pipeline.md §4: a TCP port no TCP rule takes reaches the L3_DEFAULT rule through the
/// gap slots of the TCP entry; it stays a TCP packet (5-tuple key under NONE). UDP, with no
/// entry of its own, is unmatched: protocol 0 is only for the portless protocols.
#[test]
fn a_tcp_port_in_the_gap_reaches_the_l3_default_rule() {
    let t = bank(true);
    for (port, rule) in [
        (80u16, TCP_RULE),
        (79, L3_RULE4),
        (81, L3_RULE4),
        (0, L3_RULE4),
        (65535, L3_RULE4),
    ] {
        let mut p = packet(6, CLIENT4, VIP4, Fragment::No);
        p.flow.client_port = 40000;
        p.flow.vip_port = port;
        p.tcp_flags = 0x10;
        let got = run(&t, None, &p);
        assert_eq!(got.rule, Some(rule), "port {port}");
        if rule == L3_RULE4 {
            let key = FlowKey {
                key_type: KeyType::Tuple5,
                protocol: 6,
                src_port: 40000,
                dst_port: port,
                src_addr: CLIENT4,
                dst_addr: VIP4,
            };
            assert_eq!(got.key, Some(KeyType::Tuple5));
            assert_eq!(got.backend, Some(20 + by_hand(key.hash(), 11) as u16));
        }
    }
    let mut udp = packet(17, CLIENT4, VIP4, Fragment::No);
    udp.flow.vip_port = 53;
    let got = run(&t, None, &udp);
    assert_eq!((got.reason, got.rule), (Reason::NoRule, None));
}

/// docs/pipeline.md §7: a portless flow of a tracking pool is looked up in the connection
/// table by its TUPLE5 key with ports 0; the entry must have its protocol.
#[test]
fn a_portless_flow_is_tracked_with_ports_0() {
    let t = bank(true);
    let mut ct = ConnTable::new(64, 4);
    let key = FlowKey {
        key_type: KeyType::Tuple5,
        protocol: 47,
        src_port: 0,
        dst_port: 0,
        src_addr: CLIENT4,
        dst_addr: VIP4,
    };
    let index = by_hand(key.hash(), 64) * 4 + 1;
    let gre = CtEntry {
        valid: true,
        protocol: 47,
        src_port: 0,
        dst_port: 0,
        src_addr: CLIENT4,
        dst_addr: VIP4,
        backend: 29,
        ..CtEntry::default()
    };
    ct.write(index, gre).expect("in range");
    let got = run(&t, Some(&ct), &packet(47, CLIENT4, VIP4, Fragment::No));
    assert_eq!(
        (got.conntrack, got.ct_index, got.backend),
        (CtOutcome::Hit, Some(index), Some(29))
    );
    // ESP between the same addresses is another flow.
    let got = run(&t, Some(&ct), &packet(50, CLIENT4, VIP4, Fragment::No));
    assert_eq!(got.conntrack, CtOutcome::Miss);
    assert_ne!(got.ct_index, Some(index));
}

/// docs/pipeline.md §4, §6, §7: fragments of a portless flow on the protocol-0 entry (one
/// slot): first and later are forwarded with the 3-tuple key and are not tracked.
#[test]
fn fragments_of_a_portless_flow() {
    let t = bank(true);
    for frag in [Fragment::First, Fragment::Later] {
        for proto in [1u8, 47, 50, 132] {
            let got = run(&t, None, &packet(proto, CLIENT4, VIP4, frag));
            let hash = tuple3_hash(proto, CLIENT4, VIP4);
            assert_eq!(
                (got.verdict, got.rule, got.key, got.conntrack, got.flow_hash),
                (
                    Verdict::Forward,
                    Some(L3_RULE4),
                    Some(KeyType::Tuple3),
                    CtOutcome::None,
                    hash
                ),
                "protocol {proto} {frag:?}"
            );
            assert_eq!(got.backend, Some(20 + by_hand(hash, 11) as u16));
        }
    }
}
