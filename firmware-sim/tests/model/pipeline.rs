//! Hand-worked tests of the pipeline semantics, one or more per SPEC rule. Tables are built by
//! hand (tests/common); expected backends come from the documented Maglev formula or from
//! the hash known-answer vectors; emitted frames are decoded with etherparse.

use crate::common;

use common::*;
use firmware_sim::pipeline::key_report_name;
use firmware_sim::{CtOutcome, ModelDevice};
use nlb_hw::blocks::{conntrack as ctb, counters as cb, ctrl, queues as qb, table as tb};
use nlb_hw::enums::{
    Affinity, CounterKind, CounterSnapshot, Delivery, Event, KeyType, Reason, Table, TableCmd,
    Verdict,
};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::layouts::{CtEntry, LearnEvent, MaglevSlot, PoolEntry, PuntHeader};
use nlb_hw::{FlowKey, Profile, Tables};

/// Selects and latches a counter through the registers.
fn snapshot(d: &mut ModelDevice, kind: CounterKind, index: u32) {
    let select = cb::Select { kind, index }.word().unwrap();
    d.write32(cb::SELECT, select).unwrap();
    let latch = cb::Snapshot {
        op: CounterSnapshot::Latch,
    };
    d.write32(cb::SNAPSHOT, latch.word()).unwrap();
}

/// A latched 64-bit counter.
fn wide(d: &mut ModelDevice, regs: [u32; 2]) -> u64 {
    cb::packets::join(regs.map(|r| d.read32(r).unwrap()))
}

fn counter(d: &mut ModelDevice, kind: CounterKind, index: u32) -> (u64, u64) {
    snapshot(d, kind, index);
    (
        wide(d, cb::packets::REGISTERS),
        wide(d, cb::bytes::REGISTERS),
    )
}

/// Punts and drops of a counter, through the registers (SPEC R10.1).
fn punts_drops(d: &mut ModelDevice, kind: CounterKind, index: u32) -> (u64, u64) {
    snapshot(d, kind, index);
    (wide(d, cb::punts::REGISTERS), wide(d, cb::drops::REGISTERS))
}

fn reason_count(d: &mut ModelDevice, r: Reason) -> u64 {
    counter(d, CounterKind::Reason, r.value()).0
}

/// The table window's status shows an error.
fn window_error(d: &mut ModelDevice) -> bool {
    tb::Status::from_word(d.read32(tb::STATUS).unwrap()).error
}

fn t5(src: &str, sport: u16, dst: &str, dport: u16, proto: u8) -> FlowKey {
    FlowKey::tuple5(proto, ip(src), sport, ip(dst), dport)
}

/// Pops one learn event through the queue registers.
fn pop_event(d: &mut ModelDevice) -> Option<LearnEvent> {
    if qb::LearnStatus::from_word(d.read32(qb::LEARN_STATUS).unwrap()).count == 0 {
        return None;
    }
    d.write32(qb::LEARN_POP, qb::LearnPop { pop: true }.word())
        .unwrap();
    let mut w = [0u32; 12];
    for (i, x) in w.iter_mut().enumerate() {
        *x = d.read32(qb::LEARN_DATA + 4 * i as u32).unwrap();
    }
    Some(LearnEvent::unpack(&w).unwrap())
}

/// Installs a learn event through the conntrack registers the way the host does: all words
/// with valid = 0, then word 0 again with valid = 1.
fn install_via_registers(d: &mut ModelDevice, ev: &LearnEvent) -> u32 {
    let key = FlowKey {
        key_type: KeyType::Tuple5,
        protocol: ev.protocol,
        src_port: ev.src_port,
        dst_port: ev.dst_port,
        src_addr: ev.src_addr,
        dst_addr: ev.dst_addr,
    };
    let bucket = nlb_hw::table_index(key.hash(), d.conntrack().buckets());
    let ways = d.conntrack().ways();
    let index = (bucket * ways..(bucket + 1) * ways)
        .find(|&i| !d.conntrack().entry(i).unwrap().valid)
        .expect("free way");
    let e = CtEntry {
        valid: false,
        protocol: ev.protocol,
        src_port: ev.src_port,
        dst_port: ev.dst_port,
        src_addr: ev.src_addr,
        dst_addr: ev.dst_addr,
        backend: ev.backend,
        rule: ev.rule,
        flags: 0,
        timestamp: 1,
    };
    let words = e.pack().unwrap();
    for (i, w) in words.iter().enumerate() {
        d.write32(ctb::DATA + 4 * i as u32, *w).unwrap();
    }
    let write_at = ctb::Cmd {
        op: TableCmd::WriteAt,
        index,
    }
    .word()
    .unwrap();
    d.write32(ctb::CMD, write_at).unwrap();
    let valid = CtEntry { valid: true, ..e }.pack().unwrap()[0];
    d.write32(ctb::DATA, valid).unwrap();
    d.write32(ctb::CMD, write_at).unwrap();
    assert!(!ctb::Status::from_word(d.read32(ctb::STATUS).unwrap()).error);
    index
}

/// Writes a whole bank through the table window (every entry that differs from `base`).
fn load_bank(d: &mut ModelDevice, bank: u32, base: &Tables, new: &Tables) {
    for (table, index) in base.diff(new) {
        let words = new.read_entry(table, index).unwrap();
        let select = tb::Select {
            table,
            bank: bank == 1,
        };
        d.write32(tb::SELECT, select.word()).unwrap();
        for (i, w) in words.iter().enumerate() {
            d.write32(tb::DATA + 4 * i as u32, *w).unwrap();
        }
        let cmd = tb::Cmd {
            op: TableCmd::WriteAt,
            index,
        };
        d.write32(tb::CMD, cmd.word().unwrap()).unwrap();
        assert!(!window_error(d), "{table:?} {index}");
    }
}

#[test]
fn r2_1_vip_protocol_and_port_range_must_all_match() {
    let mut d = standard_device();
    let c = "198.51.100.10";
    let r = send_checked(&mut d, &tcp(ip(c), 40000, ip(VIP4), 80, SYN, b""));
    assert_eq!((r.rule, r.reason), (Some(0), Reason::Forwarded));
    for port in [8000, 8080, 8040] {
        let r = send_checked(&mut d, &tcp(ip(c), 40000, ip(VIP4), port, ACK, b""));
        assert_eq!(r.rule, Some(3), "port {port} inside 8000-8080");
    }
    for port in [7999, 8081, 81] {
        let (r, _) = send(&mut d, &tcp(ip(c), 40000, ip(VIP4), port, ACK, b""));
        assert_eq!(
            (r.verdict, r.reason),
            (Verdict::Pass, Reason::NoRule),
            "port {port}"
        );
    }
    // Right VIP and port, wrong protocol.
    let (r, _) = send(&mut d, &udp(ip(c), 40000, ip(VIP4), 80, b""));
    assert_eq!(r.reason, Reason::NoRule);
    // Right protocol and port, another address.
    let (r, _) = send(&mut d, &tcp(ip(c), 40000, ip("203.0.113.2"), 80, ACK, b""));
    assert_eq!(r.reason, Reason::NoRule);
}

#[test]
fn r2_2_one_vip_several_rules_by_protocol_and_port() {
    let mut d = standard_device();
    let c = ip("198.51.100.10");
    let a = send_checked(&mut d, &tcp(c, 1, ip(VIP4), 80, ACK, b""));
    let b = send_checked(&mut d, &tcp(c, 1, ip(VIP4), 443, ACK, b""));
    let u = send_checked(&mut d, &udp(c, 1, ip(VIP4), 53, b"q"));
    assert_eq!((a.rule, a.pool), (Some(0), Some(0)));
    assert_eq!((b.rule, b.pool), (Some(1), Some(1)));
    assert_eq!((u.rule, u.pool), (Some(2), Some(2)));
}

#[test]
fn r2_3_several_rules_share_one_pool_and_count_separately() {
    let mut d = standard_device();
    let c = ip("198.51.100.10");
    let f80 = tcp(c, 1, ip(VIP4), 80, ACK, b"");
    let f8000 = tcp(c, 1, ip(VIP4), 8000, ACK, b"abc");
    let a = send_checked(&mut d, &f80);
    let b = send_checked(&mut d, &f8000);
    assert_eq!((a.pool, b.pool), (Some(0), Some(0)));
    assert!([1, 2, 3, 4].contains(&a.backend.unwrap()));
    assert_eq!(counter(&mut d, CounterKind::Rule, 0), (1, f80.len() as u64));
    assert_eq!(
        counter(&mut d, CounterKind::Rule, 3),
        (1, f8000.len() as u64)
    );
}

#[test]
fn r2_4_unmatched_packets_pass_or_drop_by_configuration_and_are_counted() {
    let mut d = standard_device();
    let f = udp(ip("198.51.100.10"), 1, ip("192.0.2.99"), 9, b"");
    let (r, out) = send(&mut d, &f);
    assert_eq!(
        (r.verdict, r.reason, r.rule),
        (Verdict::Pass, Reason::NoRule, None)
    );
    assert!(out.is_empty());
    d.write32(ctrl::DEFAULT_ACTION, 1).unwrap();
    let (r, _) = send(&mut d, &f);
    assert_eq!((r.verdict, r.reason), (Verdict::Drop, Reason::NoRule));
    assert_eq!(reason_count(&mut d, Reason::NoRule), 2);
    assert_eq!(
        counter(&mut d, CounterKind::Verdict, Verdict::Pass.value()).0,
        1
    );
    assert_eq!(
        counter(&mut d, CounterKind::Verdict, Verdict::Drop.value()).0,
        1
    );
    // Not IP at all.
    let mut arp = vec![0xffu8; 42];
    arp[12] = 0x08;
    arp[13] = 0x06;
    let (r, _) = send(&mut d, &arp);
    assert_eq!((r.verdict, r.reason), (Verdict::Pass, Reason::NotIp));
}

/// The standard bank plus `L3_DEFAULT` rules (docs/pipeline.md §3, §4; SPEC R2): rule 13
/// VIP4 protocol 0, all ports → pool 0 (NONE, tracking, L2_DSR); rule 14 VIP6 protocol 0 →
/// pool 4 (NONE, IPIP over IPv6, not tracking); rule 15 SRC_ONLY_VIP protocol 0 → pool 6
/// (CLIENT_IP_NO_DESTINATION).
fn l3_default_tables() -> Tables {
    use Affinity::*;
    use Delivery::*;
    let profile = Profile::by_name("sim").expect("sim profile");
    let pools = vec![
        (0, pool(None, L2Dsr, true, &[1, 2, 3, 4], 251)),
        (1, pool(ClientIpProto, Ipip, true, &[1, 2], 13)),
        (2, pool(ClientIp, Gue, false, &[3, 4], 13)),
        (3, pool(None, Gue, true, &[11, 12, 13], 251)),
        (4, pool(None, Ipip, false, &[11, 12], 13)),
        (5, pool(None, L2Dsr, true, &[], 13)),
        (
            6,
            pool(ClientIpNoDestination, L2Dsr, false, &[1, 2, 3, 4], 13),
        ),
    ];
    let mut acl4 = rule(ACL_VIP4, 6, (22, 22), 0);
    acl4.acl = vec![(ip("192.0.2.0"), 24)];
    let mut acl6 = rule(ACL_VIP6, 6, (22, 22), 3);
    acl6.acl = vec![(ip("2001:db8:aaaa::"), 48)];
    let rules = vec![
        rule(VIP4, 6, (80, 80), 0),
        rule(VIP4, 6, (443, 443), 1),
        rule(VIP4, 17, (53, 53), 2),
        rule(VIP4, 6, (8000, 8080), 0),
        rule(VIP6, 6, (443, 443), 3),
        rule(VIP6, 17, (0, 65535), 4),
        rule(MULTI_UDP_VIP, 17, (1000, 1999), 1),
        rule(MULTI_UDP_VIP, 17, (2000, 2999), 2),
        acl4,
        acl6,
        rule(EMPTY_VIP, 6, (80, 80), 5),
        rule(SRC_ONLY_VIP, 6, (80, 80), 6),
        rule(FRAG_VIP4, 17, (0, 65535), 0),
        rule(VIP4, 0, (0, 65535), 0),
        rule(VIP6, 0, (0, 65535), 4),
        rule(SRC_ONLY_VIP, 0, (0, 65535), 6),
    ];
    build_tables(profile, &test_backends(), &pools, &rules)
}

/// The 3-tuple key of a portless flow (ports 0).
fn t3(src: &str, dst: &str, proto: u8) -> FlowKey {
    t5(src, 0, dst, 0, proto).with_type(KeyType::Tuple3)
}

/// docs/pipeline.md §3-§7: ICMP echo, GRE, ESP, SCTP, protocols 0 and 255 to a VIP with an
/// L3_DEFAULT rule take its protocol-0 entry, hash by the 3-tuple under NONE (the fragment
/// column), and are tracked with ports 0 in a tracking pool; whatever bytes follow the IP
/// header (SCTP's ports) are not read.
#[test]
fn l3_default_rule_takes_every_portless_protocol() {
    let t = l3_default_tables();
    let mut d = ModelDevice::from_tables(t.clone(), test_settings());
    let c = "198.51.100.10";
    let frames: Vec<(u8, Vec<u8>)> = vec![
        (1, echo_vlan(ip(c), ip(VIP4), 7, b"ping", &[])),
        (47, raw_ip_vlan(ip(c), ip(VIP4), 47, &[0, 0, 0x08, 0], &[])),
        (50, raw_ip_vlan(ip(c), ip(VIP4), 50, &[0xaa; 40], &[100])),
        // SCTP common header: source port 5000, destination port 80.
        (
            132,
            raw_ip_vlan(ip(c), ip(VIP4), 132, &[0x13, 0x88, 0, 80, 0, 0, 0, 0], &[]),
        ),
        (0, raw_ip_vlan(ip(c), ip(VIP4), 0, b"zero", &[10, 20])),
        (255, raw_ip_vlan(ip(c), ip(VIP4), 255, b"", &[])),
    ];
    for (proto, f) in &frames {
        let r = send_checked(&mut d, f);
        let key = t3(c, VIP4, *proto);
        assert_eq!(
            (r.rule, r.pool, r.key, r.conntrack),
            (Some(13), Some(0), Some(KeyType::Tuple3), CtOutcome::Miss),
            "protocol {proto}"
        );
        assert_eq!(r.backend, Some(maglev_pick(&t, 0, key)), "protocol {proto}");
        // The flow hash is the 5-tuple's, ports 0 (§3).
        assert_eq!(r.flow_hash, t5(c, 0, VIP4, 0, *proto).hash());
        let ev = pop_event(&mut d).expect("a tracking pool learns every protocol");
        assert_eq!(
            (ev.event, ev.protocol, ev.src_port, ev.dst_port, ev.rule),
            (Event::Learn, *proto, 0, 0, 13)
        );
        assert_eq!(ev.backend, r.backend.unwrap());
        // Installed as the host does, the flow's next packet hits its entry.
        let index = install_via_registers(&mut d, &ev);
        let again = send_checked(&mut d, f);
        assert_eq!(
            (again.conntrack, again.ct_index, again.backend),
            (CtOutcome::Hit, Some(index), r.backend)
        );
        assert_eq!(pop_event(&mut d), None, "a hit emits nothing");
    }
    // SCTP with other "ports" is the same flow.
    let other = raw_ip_vlan(
        ip(c),
        ip(VIP4),
        132,
        &[0x27, 0x10, 1, 0xbb, 0, 0, 0, 0],
        &[],
    );
    let r = send_checked(&mut d, &other);
    assert_eq!(r.conntrack, CtOutcome::Hit);
    assert_eq!(r.flow_hash, t5(c, 0, VIP4, 0, 132).hash());

    // IPv6: ICMPv6 echo and GRE on pool 4 (not tracking), encapsulated in IPv6.
    let c6 = "2001:db8:aaaa::5";
    for (proto, f) in [
        (58u8, echo_vlan(ip(c6), ip(VIP6), 9, b"ping6", &[])),
        (47, raw_ip_vlan(ip(c6), ip(VIP6), 47, &[0; 12], &[300])),
    ] {
        let r = send_checked(&mut d, &f);
        assert_eq!(
            (r.rule, r.key, r.conntrack),
            (Some(14), Some(KeyType::Tuple3), CtOutcome::None)
        );
        assert_eq!(r.backend, Some(maglev_pick(&t, 4, t3(c6, VIP6, proto))));
    }
    // CLIENT_IP_NO_DESTINATION: the client alone, whatever the protocol.
    let want = maglev_pick(&t, 6, t5(c, 0, "0.0.0.0", 0, 0).with_type(KeyType::Tuple1));
    for proto in [47u8, 50] {
        let r = send_checked(
            &mut d,
            &raw_ip_vlan(ip(c), ip(SRC_ONLY_VIP), proto, b"x", &[]),
        );
        assert_eq!((r.rule, r.backend), (Some(15), Some(want)));
    }
    // Fragments of a portless flow: the 3-tuple, not tracked.
    let whole = raw_ip_vlan(ip(c), ip(VIP4), 47, &[3u8; 200], &[]);
    let want = maglev_pick(&t, 0, t3(c, VIP4, 47));
    for f in ipv4_fragments(&whole, 0x4747, 64) {
        let r = send_checked(&mut d, &f);
        assert_eq!(
            (r.rule, r.backend, r.key, r.conntrack),
            (Some(13), Some(want), Some(KeyType::Tuple3), CtOutcome::None)
        );
        assert_eq!(r.flow_hash, t3(c, VIP4, 47).hash());
    }
    assert_eq!(pop_event(&mut d), None, "fragments are not tracked");
    // TCP and UDP keep their own entries: a port no TCP rule takes is unmatched here (this
    // bank has no gap slots).
    let (r, _) = send(&mut d, &tcp(ip(c), 1, ip(VIP4), 9999, ACK, b""));
    assert_eq!((r.verdict, r.reason), (Verdict::Pass, Reason::NoRule));
}

/// Without a protocol-0 entry, a portless packet to a VIP matches no rule, as before
/// L3_DEFAULT rules existed (docs/pipeline.md §1, §4): the default action, NO_RULE.
#[test]
fn portless_packets_without_an_l3_default_rule_are_unmatched() {
    let mut d = standard_device();
    let c = ip("198.51.100.10");
    for f in [
        echo_vlan(c, ip(VIP4), 1, b"ping", &[]),
        raw_ip_vlan(c, ip(VIP4), 47, b"gre", &[]),
        raw_ip_vlan(c, ip(FRAG_VIP4), 50, b"esp", &[]),
        echo_vlan(ip("2001:db8:aaaa::5"), ip(VIP6), 1, b"ping6", &[]),
    ] {
        let (r, out) = send(&mut d, &f);
        assert_eq!(
            (r.verdict, r.reason, r.rule, r.pool),
            (Verdict::Pass, Reason::NoRule, None, None)
        );
        assert!(out.is_empty());
    }
}

#[test]
fn r3_1_the_hash_key_follows_session_affinity() {
    let mut d = standard_device();
    let t = standard_tables();
    let c = "198.51.100.10";
    // NONE: 5-tuple.
    for port in 40000..40020 {
        let r = send_checked(&mut d, &tcp(ip(c), port, ip(VIP4), 80, ACK, b""));
        let want = maglev_pick(&t, 0, t5(c, port, VIP4, 80, 6));
        assert_eq!(r.backend, Some(want));
        assert_eq!(r.key.map(key_report_name), Some("5tuple"));
    }
    // CLIENT_IP_PROTO: 3-tuple, ports do not matter.
    let want = maglev_pick(&t, 1, t5(c, 0, VIP4, 0, 6).with_type(KeyType::Tuple3));
    for port in 40000..40020 {
        let r = send_checked(&mut d, &tcp(ip(c), port, ip(VIP4), 443, ACK, b""));
        assert_eq!((r.backend, r.key), (Some(want), Some(KeyType::Tuple3)));
    }
    // CLIENT_IP: 2-tuple.
    let want = maglev_pick(&t, 2, t5(c, 0, VIP4, 0, 17).with_type(KeyType::Tuple2));
    for port in 40000..40020 {
        let r = send_checked(&mut d, &udp(ip(c), port, ip(VIP4), 53, b"q"));
        assert_eq!((r.backend, r.key), (Some(want), Some(KeyType::Tuple2)));
    }
    // CLIENT_IP_NO_DESTINATION: source address only.
    let want = maglev_pick(&t, 6, t5(c, 0, "0.0.0.0", 0, 0).with_type(KeyType::Tuple1));
    let r = send_checked(&mut d, &tcp(ip(c), 5, ip(SRC_ONLY_VIP), 80, ACK, b""));
    assert_eq!((r.backend, r.key), (Some(want), Some(KeyType::Tuple1)));
}

#[test]
fn r3_2_maglev_slot_is_base_plus_scaled_hash() {
    // Known-answer vector: TCP 198.51.100.10:40000 -> 203.0.113.1:80 hashes to 0xea249984,
    // whose index in a 251-slot table is 229 (nlb_hw::hash::KNOWN_ANSWERS, computed outside
    // the crate). Put backend 3 in slot base + 229 and backend 2 everywhere else.
    let profile = Profile::by_name("sim").unwrap();
    let mut t = build_tables(
        profile,
        &test_backends(),
        &[(0, pool(Affinity::None, Delivery::L2Dsr, false, &[2], 251))],
        &[rule(VIP4, 6, (80, 80), 0)],
    );
    let base = 1000;
    t.pools[0].maglev_base = base;
    for s in 0..251 {
        t.maglev[(base + s) as usize] = MaglevSlot { backend: 2 };
    }
    t.maglev[(base + 229) as usize] = MaglevSlot { backend: 3 };
    let mut d = ModelDevice::from_tables(t, test_settings());
    let r = send_checked(
        &mut d,
        &tcp(ip("198.51.100.10"), 40000, ip(VIP4), 80, SYN, b""),
    );
    assert_eq!(r.flow_hash, 0xea24_9984);
    assert_eq!(r.backend, Some(3));
    let r = send_checked(
        &mut d,
        &tcp(ip("198.51.100.10"), 40001, ip(VIP4), 80, SYN, b""),
    );
    let idx = nlb_hw::table_index(r.flow_hash, 251);
    assert_eq!(r.backend, Some(if idx == 229 { 3 } else { 2 }));
}

#[test]
fn r3_3_established_connections_do_not_steer_new_ones() {
    let mut d = standard_device();
    let t = standard_tables();
    // Fifty connections pinned to backend 1.
    for port in 1000..1050u16 {
        let ev = LearnEvent {
            event: Event::Learn,
            protocol: 6,
            src_port: port,
            dst_port: 80,
            src_addr: addr_to_u128(ip("192.0.2.1")),
            dst_addr: addr_to_u128(ip(VIP4)),
            backend: 1,
            rule: 0,
            flow_hash: 0,
        };
        install_via_registers(&mut d, &ev);
    }
    assert_eq!(d.read32(ctb::COUNT).unwrap(), 50);
    for port in 2000..2040u16 {
        let r = send_checked(&mut d, &tcp(ip("192.0.2.2"), port, ip(VIP4), 80, SYN, b""));
        assert_eq!(
            r.backend,
            Some(maglev_pick(&t, 0, t5("192.0.2.2", port, VIP4, 80, 6)))
        );
    }
}

#[test]
fn r3_4_only_backends_in_the_slice_are_eligible() {
    // Health is compiled into the slice (the compiler leaves unhealthy backends out, and puts
    // every backend back when none is healthy): the pipeline picks only what the slots hold.
    let profile = Profile::by_name("sim").unwrap();
    let healthy_only = build_tables(
        profile,
        &test_backends(),
        &[(0, pool(Affinity::None, Delivery::L2Dsr, false, &[1, 3], 13))],
        &[rule(VIP4, 6, (80, 80), 0)],
    );
    let mut d = ModelDevice::from_tables(healthy_only, test_settings());
    let mut seen = std::collections::BTreeSet::new();
    for port in 0..200u16 {
        let r = send_checked(&mut d, &tcp(ip("192.0.2.9"), port, ip(VIP4), 80, SYN, b""));
        seen.insert(r.backend.unwrap());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![1, 3]);
}

#[test]
fn r4_1_a_connection_keeps_its_backend_until_it_closes() {
    let mut d = standard_device();
    let base = standard_tables();
    let (c, vip) = ("198.51.100.77", VIP4);
    let syn = tcp(ip(c), 33333, ip(vip), 80, SYN, b"");
    let r = send_checked(&mut d, &syn);
    assert_eq!(r.conntrack, CtOutcome::Miss);
    let first = r.backend.unwrap();
    let ev = pop_event(&mut d).expect("learn event");
    assert_eq!(ev.event, Event::Learn);
    assert_eq!((ev.src_port, ev.dst_port, ev.protocol), (33333, 80, 6));
    assert_eq!(
        (ev.src_addr, ev.dst_addr),
        (addr_to_u128(ip(c)), addr_to_u128(ip(vip)))
    );
    assert_eq!((ev.backend, ev.rule, ev.flow_hash), (first, 0, r.flow_hash));
    let index = install_via_registers(&mut d, &ev);

    // The backend set changes: bank 1 = bank 0 with every slot of pool 0 on another backend.
    let other = if first == 4 { 3 } else { 4 };
    let mut changed = base.clone();
    let p = changed.pools[0];
    for s in p.maglev_base..p.maglev_base + p.maglev_size {
        changed.maglev[s as usize] = MaglevSlot { backend: other };
    }
    load_bank(&mut d, 1, &Tables::empty(base.profile), &changed);
    d.write32(ctrl::ACTIVE_BANK, 1).unwrap();

    let ack = tcp(ip(c), 33333, ip(vip), 80, ACK, b"data");
    let r = send_checked(&mut d, &ack);
    assert_eq!(
        (r.bank, r.conntrack, r.backend),
        (1, CtOutcome::Hit, Some(first))
    );
    assert_eq!(pop_event(&mut d), None, "a hit emits nothing");
    d.write32(ctb::INDEX, index).unwrap();
    assert_ne!(
        d.read32(ctb::HIT_READ).unwrap() & (1 << (index % 32)),
        0,
        "hit bit"
    );
    assert_eq!(
        d.read32(ctb::HIT_READ).unwrap() & (1 << (index % 32)),
        0,
        "read clears"
    );
    // A new connection follows the new slots.
    let r = send_checked(&mut d, &tcp(ip(c), 44444, ip(vip), 80, SYN, b""));
    assert_eq!(r.backend, Some(other));
    assert_eq!(pop_event(&mut d).map(|e| e.event), Some(Event::Learn));
    // A SYN always selects anew, even on a tracked 5-tuple.
    let r = send_checked(&mut d, &syn);
    assert_eq!((r.conntrack, r.backend), (CtOutcome::Miss, Some(other)));
    assert_eq!(pop_event(&mut d).map(|e| e.event), Some(Event::Learn));
    // FIN and RST emit teardown events (the hit still decides the backend).
    let mut fin = ACK;
    fin.fin = true;
    let r = send_checked(&mut d, &tcp(ip(c), 33333, ip(vip), 80, fin, b""));
    assert_eq!((r.conntrack, r.backend), (CtOutcome::Hit, Some(first)));
    let ev = pop_event(&mut d).expect("teardown");
    assert_eq!((ev.event, ev.backend), (Event::Teardown, first));
    // UDP of a tracked pool learns too (VIP6 TCP is tracked; use pool 3 via VIP6:443).
    let r = send_checked(
        &mut d,
        &tcp(ip("2001:db8:aaaa::1"), 5, ip(VIP6), 443, ACK, b""),
    );
    assert_eq!(r.conntrack, CtOutcome::Miss);
    assert_eq!(pop_event(&mut d).map(|e| e.event), Some(Event::Learn));
    // Untracked pools neither look up nor learn.
    let r = send_checked(&mut d, &udp(ip(c), 5, ip(VIP4), 53, b""));
    assert_eq!(r.conntrack, CtOutcome::None);
    assert_eq!(pop_event(&mut d), None);
}

#[test]
fn r4_2_fragments_hash_on_three_tuple_under_none() {
    let mut d = standard_device();
    let t = standard_tables();
    let c = "198.51.100.10";
    // IPv4, pool 0 (NONE).
    let whole = udp(ip(c), 7777, ip(FRAG_VIP4), 5000, &[9u8; 300]);
    let want = maglev_pick(&t, 0, t5(c, 0, FRAG_VIP4, 0, 17).with_type(KeyType::Tuple3));
    for f in ipv4_fragments(&whole, 0x4242, 96) {
        let r = send_checked(&mut d, &f);
        assert_eq!(
            (r.rule, r.backend, r.key),
            (Some(12), Some(want), Some(KeyType::Tuple3))
        );
        assert_eq!(r.conntrack, CtOutcome::None, "fragments are not tracked");
    }
    // IPv6, pool 4 (NONE, IPIP over IPv6).
    let whole = udp(ip("2001:db8:aaaa::5"), 7777, ip(VIP6), 5000, &[1u8; 300]);
    let want = maglev_pick(
        &t,
        4,
        t5("2001:db8:aaaa::5", 0, VIP6, 0, 17).with_type(KeyType::Tuple3),
    );
    for f in ipv6_fragments(&whole, 77, 128) {
        let r = send_checked(&mut d, &f);
        assert_eq!(
            (r.backend, r.key, r.ip_id),
            (Some(want), Some(KeyType::Tuple3), 77)
        );
    }
    // CLIENT_IP: fragments and whole packets share the 2-tuple key.
    let whole = udp(ip(c), 7777, ip(VIP4), 53, &[2u8; 200]);
    let w = send_checked(&mut d, &whole);
    for f in ipv4_fragments(&whole, 0x99, 64) {
        let r = send_checked(&mut d, &f);
        assert_eq!((r.backend, r.key), (w.backend, Some(KeyType::Tuple2)));
    }
}

/// A TCP fragment of a pool that tracks connections may belong to an
/// established connection whose backend its 3-tuple does not hash to (SPEC R4.1 over R4.2),
/// so every TCP fragment of such a pool, first or later, whatever the affinity, goes to the
/// host with its rule (docs/pipeline.md §6). UDP fragments and TCP fragments of untracked
/// pools keep their fragment key; frames the host injects are never punted.
#[test]
fn r4_1_tcp_fragments_of_tracking_pools_go_to_the_host() {
    let mut d = standard_device();
    let t = standard_tables();
    // An established connection to VIP6:443 (rule 4, pool 3: NONE, tracked; the VIP's only
    // TCP rule): the SYN is learned, a later packet hits.
    let c6 = "2001:db8:aaaa::7";
    let syn = tcp(ip(c6), 40001, ip(VIP6), 443, SYN, b"");
    let first = send_checked(&mut d, &syn);
    let ev = pop_event(&mut d).expect("learn");
    d.conntrack_mut().install(&ev, 0).expect("install");
    let r = send_checked(&mut d, &tcp(ip(c6), 40001, ip(VIP6), 443, ACK, b"x"));
    assert_eq!((r.conntrack, r.backend), (CtOutcome::Hit, first.backend));
    // A segment of that connection, fragmented on the way: every fragment is punted with
    // rule 4 and pool 3 (a later one too: the VIP has one TCP rule), none is forwarded.
    let seg = tcp(ip(c6), 40001, ip(VIP6), 443, ACK, &[7u8; 600]);
    let frags = ipv6_fragments(&seg, 0x5151, 200);
    assert!(frags.len() >= 3);
    for f in &frags {
        let (r, out) = send(&mut d, f);
        assert_eq!(
            (r.verdict, r.reason, r.rule, r.pool, r.backend, r.key),
            (
                Verdict::Punt,
                Reason::FragmentNeedsState,
                Some(4),
                Some(3),
                None,
                None
            )
        );
        assert_eq!(
            (r.conntrack, r.event, out.len()),
            (CtOutcome::None, None, 0)
        );
        let want = t5(c6, 0, VIP6, 0, 6).with_type(KeyType::Tuple3).hash();
        assert_eq!((r.flow_hash, r.ip_id), (want, 0x5151));
    }
    // IPv4, pool 1 (CLIENT_IP_PROTO, tracked) behind VIP4:443: punted too, whatever the
    // affinity; the first fragment with its rule, the later ones without (VIP4 has three TCP
    // rules, so the several-rules punt takes them first).
    let seg = tcp(ip("198.51.100.10"), 5000, ip(VIP4), 443, ACK, &[1u8; 300]);
    for (i, f) in ipv4_fragments(&seg, 0x0c0c, 96).iter().enumerate() {
        let (r, _) = send(&mut d, f);
        assert_eq!(
            (r.verdict, r.reason),
            (Verdict::Punt, Reason::FragmentNeedsState)
        );
        assert_eq!(r.rule, (i == 0).then_some(1));
    }
    // Untracked pool 6 (CLIENT_IP_NO_DESTINATION) behind SRC_ONLY_VIP:80: forwarded by its
    // key, like whole packets of the client.
    let seg = tcp(
        ip("198.51.100.10"),
        5000,
        ip(SRC_ONLY_VIP),
        80,
        ACK,
        &[1u8; 300],
    );
    let whole = send_checked(&mut d, &seg);
    for f in ipv4_fragments(&seg, 0x0d0d, 96) {
        let r = send_checked(&mut d, &f);
        assert_eq!(
            (r.rule, r.backend, r.key),
            (Some(11), whole.backend, Some(KeyType::Tuple1))
        );
    }
    // UDP fragments of tracked pool 0 keep the 3-tuple rule (R4.2).
    let dgram = udp(ip("198.51.100.10"), 7777, ip(FRAG_VIP4), 5000, &[9u8; 300]);
    let want = maglev_pick(
        &t,
        0,
        t5("198.51.100.10", 0, FRAG_VIP4, 0, 17).with_type(KeyType::Tuple3),
    );
    for f in ipv4_fragments(&dgram, 0x4243, 96) {
        let r = send_checked(&mut d, &f);
        assert_eq!((r.backend, r.key), (Some(want), Some(KeyType::Tuple3)));
    }
    // The host's injection of such a fragment leaves the NIC to the backend it names.
    let settings = test_settings();
    let ct = firmware_sim::ConnTable::new(16, 4);
    let ctx = firmware_sim::pipeline::Context {
        tables: &t,
        bank: 0,
        settings: &settings,
        enabled: true,
        conntrack: &ct,
    };
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    let h = nlb_hw::layouts::InjectHeader {
        backend: 12,
        pool: 3,
        frame_len: frags[1].len() as u16,
    };
    let r = firmware_sim::pipeline::process_injected(&ctx, &h, &frags[1], &mut out).unwrap();
    assert_eq!(
        (r.verdict, r.reason, r.backend),
        (Verdict::Forward, Reason::Injected, Some(12))
    );
    // Counted as punts of their rules (R10.1).
    assert_eq!(
        punts_drops(&mut d, CounterKind::Rule, 4),
        (frags.len() as u64, 0)
    );
}

#[test]
fn r4_3_fragments_on_a_vip_with_several_rules_go_to_the_host() {
    let mut d = standard_device();
    let whole = udp(
        ip("198.51.100.10"),
        7777,
        ip(MULTI_UDP_VIP),
        1500,
        &[5u8; 200],
    );
    let frags = ipv4_fragments(&whole, 0x0b0b, 64);
    for (i, f) in frags.iter().enumerate() {
        let (r, out) = send(&mut d, f);
        assert_eq!(
            (r.verdict, r.reason),
            (Verdict::Punt, Reason::FragmentNeedsState)
        );
        assert!(out.is_empty());
        assert_eq!(r.rule, if i == 0 { Some(6) } else { None });
    }
    // Whole packets still match by port.
    let r = send_checked(&mut d, &whole);
    assert_eq!(r.rule, Some(6));
    // The punt queue through its registers.
    assert_eq!(
        qb::PuntStatus::from_word(d.read32(qb::PUNT_STATUS).unwrap()).count,
        frags.len() as u16
    );
    for (i, f) in frags.iter().enumerate() {
        d.write32(qb::PUNT_POP, 1).unwrap();
        let mut w = [0u32; 4];
        for (k, x) in w.iter_mut().enumerate() {
            *x = d.read32(qb::PUNT_HEADER + 4 * k as u32).unwrap();
        }
        let h = PuntHeader::unpack(&w).unwrap();
        assert_eq!(h.reason, Reason::FragmentNeedsState);
        assert_eq!((h.ip_id, usize::from(h.frame_len)), (0x0b0b, f.len()));
        assert_eq!(h.rule_valid, i == 0);
        let want = FlowKey::tuple5(17, ip("198.51.100.10"), 0, ip(MULTI_UDP_VIP), 0)
            .with_type(KeyType::Tuple3)
            .hash();
        assert_eq!(h.flow_hash, want);
        let len = d.read32(qb::PUNT_LEN).unwrap() as usize;
        let mut bytes = Vec::new();
        for k in 0..len.div_ceil(4) {
            bytes.extend_from_slice(
                &d.read32(qb::PUNT_DATA + 4 * k as u32)
                    .unwrap()
                    .to_le_bytes(),
            );
        }
        bytes.truncate(len);
        assert_eq!(&bytes, f);
    }
    assert_eq!(
        reason_count(&mut d, Reason::FragmentNeedsState),
        frags.len() as u64
    );
    // Only the first fragment matched rule 6 (by port); it counts as a punt of that rule, the
    // whole packet as a forward.
    assert_eq!(counter(&mut d, CounterKind::Rule, 6).0, 2);
    assert_eq!(punts_drops(&mut d, CounterKind::Rule, 6), (1, 0));
}

#[test]
fn r8_1_delivery_by_mac_rewrite_ipip_and_gue() {
    let mut d = standard_device();
    let c4 = ip("198.51.100.10");
    let c6 = ip("2001:db8:aaaa::1");
    // L2 DSR with 0, 1 and 2 VLAN tags, padded.
    for vlans in [&[][..], &[7], &[7, 8]] {
        let f = pad60(tcp_vlan(c4, 1, ip(VIP4), 80, ACK, b"", vlans));
        send_checked(&mut d, &f);
    }
    // IPIP over IPv4 (pool 1), DF set and clear.
    let mut f = tcp(c4, 2, ip(VIP4), 443, ACK, b"hello");
    send_checked(&mut d, &f);
    f[20] &= !0x40;
    f[24] = 0;
    f[25] = 0;
    let sum = !firmware_sim::parse::ones_complement_sum(&f[14..34], 0);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    send_checked(&mut d, &pad60(f));
    // GUE over IPv4 (pool 2), tagged.
    send_checked(&mut d, &udp_vlan(c4, 3, ip(VIP4), 53, b"query", &[100]));
    // GUE over IPv6 (pool 3) and IPIP over IPv6 (pool 4).
    send_checked(&mut d, &tcp(c6, 4, ip(VIP6), 443, ACK, b"x"));
    send_checked(&mut d, &udp(c6, 5, ip(VIP6), 9999, &[0u8; 1000]));
    // The outer source spreads by flow: different flows, different outer sources.
    let mut srcs = std::collections::BTreeSet::new();
    for port in 0..16 {
        let (_, out) = send(&mut d, &tcp(c4, port, ip(VIP4), 443, ACK, b""));
        srcs.insert(out[26..30].to_vec());
    }
    assert!(srcs.len() > 1, "outer sources vary with the flow");
}

#[test]
fn encapsulation_beyond_the_maximum_frame_is_dropped() {
    let mut d = standard_device();
    // 9000-byte IP packet: fine by MAC rewrite, too big with 20 more bytes.
    let f = udp(
        ip("198.51.100.10"),
        1,
        ip(FRAG_VIP4),
        9,
        &vec![0u8; 9000 - 28],
    );
    assert_eq!(f.len(), 9014);
    send_checked(&mut d, &f);
    let f = udp(
        ip("2001:db8:aaaa::1"),
        1,
        ip(VIP6),
        9,
        &vec![0u8; 9000 - 48],
    );
    let (r, out) = send(&mut d, &f);
    assert_eq!((r.verdict, r.reason), (Verdict::Drop, Reason::TooBig));
    assert!(out.is_empty());
}

#[test]
fn r9_1_source_ranges_drop_other_sources() {
    let mut d = standard_device();
    let r = send_checked(
        &mut d,
        &tcp(ip("192.0.2.200"), 1, ip(ACL_VIP4), 22, SYN, b""),
    );
    assert_eq!(r.rule, Some(8));
    let (r, _) = send(&mut d, &tcp(ip("192.0.3.1"), 1, ip(ACL_VIP4), 22, SYN, b""));
    assert_eq!(
        (r.verdict, r.reason, r.rule),
        (Verdict::Drop, Reason::AclDenied, Some(8))
    );
    let r = send_checked(
        &mut d,
        &tcp(ip("2001:db8:aaaa:1::9"), 1, ip(ACL_VIP6), 22, SYN, b""),
    );
    assert_eq!(r.rule, Some(9));
    let (r, _) = send(
        &mut d,
        &tcp(ip("2001:db8:aaab::9"), 1, ip(ACL_VIP6), 22, SYN, b""),
    );
    assert_eq!(r.reason, Reason::AclDenied);
    assert_eq!(reason_count(&mut d, Reason::AclDenied), 2);
    assert_eq!(
        counter(&mut d, CounterKind::Rule, 8).0,
        2,
        "denied packets count on their rule"
    );
    assert_eq!(
        punts_drops(&mut d, CounterKind::Rule, 8),
        (0, 1),
        "one of them dropped"
    );
}

#[test]
fn r10_2_icmp_errors_reach_the_flows_backend() {
    let mut d = standard_device();
    d.set_auto_learn(true);
    let t = standard_tables();
    let (c, cport) = ("198.51.100.10", 40000);
    // An established connection to VIP4:80 (learned on its SYN).
    let r = send_checked(&mut d, &tcp(ip(c), cport, ip(VIP4), 80, SYN, b""));
    let backend = r.backend.unwrap();
    assert!(d.conntrack().lookup(&t5(c, cport, VIP4, 80, 6)).is_some());
    // A router on the way back says the backend's reply (VIP -> client) was too big.
    let reply = tcp(ip(VIP4), 80, ip(c), cport, ACK, &[0u8; 1400]);
    let icmp = icmp4_error(
        ip("192.0.2.254"),
        ip(VIP4),
        3,
        4,
        [0, 0, 5, 0x78],
        &ip_part(&reply)[..28],
    );
    let r = send_checked(&mut d, &icmp);
    assert_eq!(
        (r.reason, r.rule, r.backend),
        (Reason::IcmpErrorForwarded, Some(0), Some(backend))
    );
    assert_eq!(r.conntrack, CtOutcome::Hit);
    assert_eq!(r.flow_hash, t5(c, cport, VIP4, 80, 6).hash());
    // Same flow without a tracked entry (pool 2, CLIENT_IP): Maglev of the flow's key.
    let reply = udp(ip(VIP4), 53, ip(c), 5353, b"answer");
    let icmp = icmp4_error(ip("192.0.2.254"), ip(VIP4), 11, 0, [0; 4], ip_part(&reply));
    let r = send_checked(&mut d, &icmp);
    let want = maglev_pick(&t, 2, t5(c, 0, VIP4, 0, 17).with_type(KeyType::Tuple2));
    assert_eq!(
        (r.reason, r.backend),
        (Reason::IcmpErrorForwarded, Some(want))
    );
    // A quote of a packet the client sent toward the VIP maps to the same flow.
    let sent = tcp(ip(c), cport, ip(VIP4), 80, ACK, b"");
    let icmp = icmp4_error(ip("192.0.2.254"), ip(c), 3, 1, [0; 4], ip_part(&sent));
    let r = send_checked(&mut d, &icmp);
    assert_eq!((r.rule, r.backend), (Some(0), Some(backend)));
    // ICMPv6 packet too big about a VIP6 flow (pool 3, GUE over IPv6).
    let reply6 = tcp(ip(VIP6), 443, ip("2001:db8:aaaa::1"), 6000, ACK, &[0u8; 64]);
    let icmp = icmp6_error(
        ip("2001:db8::fe"),
        ip(VIP6),
        2,
        0,
        [0, 0, 5, 0],
        &ip_part(&reply6)[..48],
    );
    let r = send_checked(&mut d, &icmp);
    let want = maglev_pick(&t, 3, t5("2001:db8:aaaa::1", 6000, VIP6, 443, 6));
    assert_eq!(
        (r.reason, r.backend),
        (Reason::IcmpErrorForwarded, Some(want))
    );
    // About no VIP flow: handled like NO_RULE.
    let other = tcp(ip("192.0.2.50"), 80, ip(c), 1, ACK, b"");
    let icmp = icmp4_error(
        ip("192.0.2.254"),
        ip("192.0.2.50"),
        3,
        4,
        [0; 4],
        ip_part(&other),
    );
    let (r, _) = send(&mut d, &icmp);
    assert_eq!((r.verdict, r.reason), (Verdict::Pass, Reason::IcmpNoFlow));
}

#[test]
fn malformed_frames_are_dropped_with_their_reason() {
    let mut d = standard_device();
    let good = tcp(ip("10.9.9.9"), 1, ip(VIP4), 80, ACK, b"abcdef");
    let mut cases: Vec<(Vec<u8>, Reason)> = vec![(good[..10].to_vec(), Reason::Runt)];
    let tagged = tcp_vlan(ip("10.9.9.9"), 1, ip(VIP4), 80, ACK, b"", &[5]);
    cases.push((tagged[..16].to_vec(), Reason::TruncatedL2));
    let mut three = good[..12].to_vec();
    three.extend_from_slice(&[0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3]);
    three.extend_from_slice(&good[12..]);
    cases.push((three, Reason::TooManyVlans));
    cases.push((good[..30].to_vec(), Reason::TruncatedL3));
    let mut v = good.clone();
    v[14] = 0x55;
    cases.push((v, Reason::BadIpVersion));
    let mut v = good.clone();
    v[14] = 0x43;
    cases.push((v, Reason::BadIhl));
    let mut v = good.clone();
    v.truncate(v.len() - 3);
    cases.push((v, Reason::BadIpLength));
    let mut v = good.clone();
    v[30] ^= 0xff;
    cases.push((v, Reason::BadIpChecksum));
    let six = tcp(ip("2001:db8::1"), 1, ip(VIP6), 443, ACK, b"");
    cases.push((
        ipv6_with_ext(&six, &[(0, 8), (60, 8), (60, 8), (60, 8), (60, 8)]),
        Reason::ExtChainTooLong,
    ));
    let frag = ipv4_fragments(&good, 1, 8);
    cases.push((frag[0].clone(), Reason::TruncatedL4));
    for (f, reason) in &cases {
        let (r, out) = send(&mut d, f);
        assert_eq!(
            (r.verdict, r.reason),
            (Verdict::Drop, *reason),
            "{reason:?}"
        );
        assert!(out.is_empty());
        assert_eq!(reason_count(&mut d, *reason), 1, "{reason:?} counted once");
    }
}

#[test]
fn pools_without_backends_and_a_disabled_pipeline() {
    let mut d = standard_device();
    let (r, _) = send(&mut d, &tcp(ip("10.1.1.1"), 1, ip(EMPTY_VIP), 80, SYN, b""));
    assert_eq!(
        (r.verdict, r.reason, r.rule),
        (Verdict::Drop, Reason::NoBackend, Some(10))
    );
    d.write32(ctrl::ENABLE, 0).unwrap();
    let (r, _) = send(&mut d, &tcp(ip("10.1.1.1"), 1, ip(VIP4), 80, SYN, b""));
    assert_eq!(
        (r.verdict, r.reason),
        (Verdict::Pass, Reason::PipelineDisabled)
    );
    let (r, _) = send(&mut d, &[0u8; 3]);
    assert_eq!(
        r.reason,
        Reason::PipelineDisabled,
        "nothing is parsed while disabled"
    );
}

#[test]
fn table_window_writes_only_the_selected_bank() {
    let mut d = ModelDevice::new(Profile::by_name("sim").unwrap());
    d.write32(ctrl::ENABLE, 1).unwrap();
    let t = standard_tables();
    load_bank(&mut d, 1, &Tables::empty(t.profile), &t);
    let f = tcp(ip("198.51.100.1"), 1, ip(VIP4), 80, ACK, b"");
    let (r, _) = send(&mut d, &f);
    assert_eq!(
        (r.bank, r.reason),
        (0, Reason::NoRule),
        "bank 0 still empty"
    );
    d.write32(ctrl::ACTIVE_BANK, 1).unwrap();
    assert_eq!(d.bank(1), &t, "the window wrote exactly the entries");
    let (r, _) = send(&mut d, &f);
    assert_eq!((r.bank, r.verdict), (1, Verdict::Forward));
    // READ back one entry; errors for a bad index and a bad table.
    let pool_bank1 = tb::Select {
        table: Table::Pool,
        bank: true,
    };
    d.write32(tb::SELECT, pool_bank1.word()).unwrap();
    d.write32(tb::INDEX, 1).unwrap();
    d.write32(tb::CMD, 2).unwrap();
    let words: Vec<u32> = (0..3)
        .map(|i| d.read32(tb::DATA + 4 * i).unwrap())
        .collect();
    assert_eq!(words, t.pools[1].pack().unwrap().to_vec());
    d.write32(tb::INDEX, 100_000).unwrap();
    d.write32(tb::CMD, 2).unwrap();
    assert!(window_error(&mut d));
    d.write32(tb::SELECT, 9).unwrap();
    d.write32(tb::INDEX, 0).unwrap();
    d.write32(tb::CMD, 1).unwrap();
    assert!(window_error(&mut d));
    // An undefined enum value (delivery 3) is refused and leaves the entry as it was.
    d.write32(tb::SELECT, Table::Pool.value()).unwrap();
    d.write32(tb::INDEX, 0).unwrap();
    d.write32(tb::DATA, 3 << PoolEntry::DELIVERY_LSB).unwrap();
    d.write32(tb::CMD, 1).unwrap();
    assert!(window_error(&mut d));
    assert!(!d.bank(0).pools[0].valid);
}
