//! The steps a lookup reports, on a bank built by hand, with the arithmetic worked out here
//! (`(hash × size) >> 32` in u64) rather than taken from the crate; and recording changes
//! nothing about the outcome.

use nlb_hw::enums::{Affinity, KeyType, Reason, Verdict};
use nlb_hw::layouts::{
    AclPrefix, BackendEntry, CtEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{FlowKey, NicSettings, Profile, Tables};
use nlb_reference::conntrack::ConnTable;
use nlb_reference::lookup::{self, CtOutcome, Packet};
use nlb_reference::parse::InnerFlow;
use nlb_reference::trace::{AclOutcome, ConnStep, Reading, SlotOutcome};
use nlb_reference::{Flow, Fragment, NoTrace, Step, Trace};

const VIP: u128 = 0xffff_cb00_7101; // 203.0.113.1
const CLIENT: u128 = 0xffff_c633_6407; // 198.51.100.7

fn by_hand(hash: u32, size: u32) -> u32 {
    ((u64::from(hash) * u64::from(size)) >> 32) as u32
}

/// VIP TCP: slot 0 ports 80..=80 → rule 3, slot 1 ports 443..=443 → rule 5 (ACL 198.51.100.0/24),
/// both on pool 2 (CLIENT_IP, tracking, slice 100..107 of backends 10..16).
fn bank() -> Tables {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut t = Tables::empty(profile);
    let hash = FlowKey {
        key_type: KeyType::Vip,
        protocol: 6,
        dst_addr: VIP,
        ..FlowKey::default()
    }
    .hash();
    let bucket = by_hand(hash, profile.vip_buckets) as usize;
    let ways = profile.vip_ways as usize;
    let mut e = VipEntry {
        valid: true,
        protocol: 6,
        addr: VIP,
        ..VipEntry::default()
    };
    e.slot[0] = PortSlot {
        valid: true,
        port_lo: 80,
        port_hi: 80,
        rule: 3,
    };
    e.slot[1] = PortSlot {
        valid: true,
        port_lo: 443,
        port_hi: 443,
        rule: 5,
    };
    // The last way of the bucket, so the ways are really searched.
    t.vip[bucket * ways + ways - 1] = e;
    for r in [3usize, 5] {
        t.rules[r] = RuleEntry {
            valid: true,
            acl_enabled: r == 5,
            pool: 2,
        };
    }
    t.acl[5].prefix[2] = AclPrefix {
        valid: true,
        prefix_len: 96 + 24,
        addr: 0xffff_c633_6400,
    };
    t.pools[2] = PoolEntry {
        valid: true,
        affinity: Affinity::ClientIp,
        maglev_base: 100,
        maglev_size: 7,
        track: true,
        ..PoolEntry::default()
    };
    for s in 0..7u16 {
        t.maglev[100 + usize::from(s)] = MaglevSlot { backend: 10 + s };
        t.backends[usize::from(10 + s)] = BackendEntry {
            valid: true,
            is_ipv6: false,
            addr: 0xffff_c000_0200 + u128::from(s),
            mac: 0x0200_0000_0000 + u64::from(s),
        };
    }
    t
}

fn packet(port: u16, tcp_flags: u8) -> Packet {
    Packet {
        flow: Flow {
            protocol: 6,
            client: CLIENT,
            client_port: 40000,
            vip: VIP,
            vip_port: port,
        },
        fragment: Fragment::No,
        icmp_error: false,
        tcp_flags,
    }
}

#[test]
fn a_forwarded_packet_reports_every_stage() {
    let t = bank();
    let nic = NicSettings::default();
    let p = packet(443, 0x10);
    let mut trace = Trace::default();
    let got = lookup::lookup(&t, &nic, None::<&ConnTable>, &p, &mut trace);
    let quiet = lookup::lookup(&t, &nic, None::<&ConnTable>, &p, &mut NoTrace);
    assert_eq!(got, quiet, "recording changes nothing");
    assert_eq!(
        (got.verdict, got.reason),
        (Verdict::Forward, Reason::Forwarded)
    );

    let names: Vec<&str> = trace
        .steps
        .iter()
        .map(|s| match s {
            Step::Flow { .. } => "flow",
            Step::Vip { .. } => "vip",
            Step::PortSlots { .. } => "slots",
            Step::Rule { .. } => "rule",
            Step::Acl { .. } => "acl",
            Step::Pool { .. } => "pool",
            Step::Key { .. } => "key",
            Step::Conntrack(_) => "conntrack",
            Step::Maglev { .. } => "maglev",
            Step::Backend { .. } => "backend",
            Step::Verdict { .. } => "verdict",
            other => panic!("unexpected step {other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "flow",
            "vip",
            "slots",
            "rule",
            "acl",
            "pool",
            "key",
            "conntrack",
            "maglev",
            "backend",
            "verdict"
        ]
    );
    let vip_hash = FlowKey {
        key_type: KeyType::Vip,
        protocol: 6,
        dst_addr: VIP,
        ..FlowKey::default()
    }
    .hash();
    // CLIENT_IP: the 2-tuple key (client, VIP).
    let key = FlowKey {
        key_type: KeyType::Tuple2,
        protocol: 6,
        src_port: 40000,
        dst_port: 443,
        src_addr: CLIENT,
        dst_addr: VIP,
    };
    let offset = by_hand(key.hash(), 7);
    for s in &trace.steps {
        match *s {
            Step::Vip {
                bucket,
                ways,
                entry,
                ..
            } => {
                assert_eq!(bucket, by_hand(vip_hash, t.profile.vip_buckets));
                assert_eq!(entry, Some(bucket * ways + ways - 1));
            }
            Step::PortSlots { outcome, port, .. } => {
                assert_eq!(port, Some(443));
                assert_eq!(outcome, SlotOutcome::Matched { slot: 1, rule: 5 });
            }
            Step::Acl { outcome, .. } => {
                assert!(matches!(outcome, AclOutcome::Allowed { index: 2, .. }));
            }
            Step::Key {
                key: k,
                hash,
                fragment,
                ..
            } => {
                assert_eq!(
                    (k.key_type, hash, fragment),
                    (KeyType::Tuple2, key.hash(), false)
                );
            }
            Step::Conntrack(c) => assert_eq!(c, ConnStep::NoTable),
            Step::Maglev {
                base,
                size,
                offset: o,
                slot,
                backend,
                ..
            } => {
                assert_eq!(
                    (base, size, o, slot),
                    (100, 7, offset, 100 + u64::from(offset))
                );
                assert_eq!(backend, Some(10 + offset as u16));
            }
            _ => {}
        }
    }
    assert_eq!(got.backend, Some(10 + offset as u16));
    assert_eq!(got.key, Some(KeyType::Tuple2));
    assert_eq!(
        got.conntrack,
        CtOutcome::Miss,
        "trackable, no table: a miss"
    );
}

#[test]
fn the_connection_table_and_the_syn_rule() {
    let t = bank();
    let nic = NicSettings::default();
    let mut ct = ConnTable::new(64, 4);
    let key = FlowKey {
        key_type: KeyType::Tuple5,
        protocol: 6,
        src_port: 40000,
        dst_port: 80,
        src_addr: CLIENT,
        dst_addr: VIP,
    };
    let bucket = by_hand(key.hash(), 64);
    // Way 2 of the flow's bucket, backend 16 (whatever Maglev says).
    let index = bucket * 4 + 2;
    ct.write(
        index,
        CtEntry {
            valid: true,
            protocol: 6,
            src_port: 40000,
            dst_port: 80,
            src_addr: CLIENT,
            dst_addr: VIP,
            backend: 16,
            ..CtEntry::default()
        },
    )
    .expect("in range");
    let mut trace = Trace::default();
    let hit = lookup::lookup(&t, &nic, Some(&ct), &packet(80, 0x10), &mut trace);
    assert_eq!(
        (hit.conntrack, hit.ct_index, hit.backend),
        (CtOutcome::Hit, Some(index), Some(16))
    );
    assert!(trace.steps.contains(&Step::Conntrack(ConnStep::Lookup {
        bucket,
        hit: Some((index, 16)),
    })));
    assert!(
        !trace.steps.iter().any(|s| matches!(s, Step::Maglev { .. })),
        "a hit reads no Maglev slot"
    );
    // A SYN without ACK selects anew: no lookup, Maglev.
    let mut trace = Trace::default();
    let syn = lookup::lookup(&t, &nic, Some(&ct), &packet(80, 0x02), &mut trace);
    assert_eq!(syn.conntrack, CtOutcome::Miss);
    assert!(trace
        .steps
        .contains(&Step::Conntrack(ConnStep::SynSelectsAnew)));
    assert!(trace.steps.iter().any(|s| matches!(s, Step::Maglev { .. })));
}

#[test]
fn an_icmp_quote_is_read_reversed_first() {
    let t = bank();
    // A reply VIP:443 → client:40000 that bounced: the quote's source is the VIP.
    let quote = InnerFlow {
        protocol: 6,
        src: VIP,
        dst: CLIENT,
        src_port: 443,
        dst_port: 40000,
    };
    let mut trace = Trace::default();
    let flow = lookup::quoted_flow(&t, &quote, &mut trace);
    assert_eq!((flow.client, flow.vip, flow.vip_port), (CLIENT, VIP, 443));
    assert_eq!(
        trace.steps,
        [Step::IcmpQuote {
            quote: Some(quote),
            reading: Some(Reading::Reversed)
        }]
    );
    // The packet the client sent toward the VIP: no VIP has the client's address.
    let forward = InnerFlow {
        src: CLIENT,
        dst: VIP,
        src_port: 40000,
        dst_port: 443,
        ..quote
    };
    let mut trace = Trace::default();
    let flow = lookup::quoted_flow(&t, &forward, &mut trace);
    assert_eq!((flow.client, flow.vip, flow.vip_port), (CLIENT, VIP, 443));
    assert!(matches!(
        trace.steps[..],
        [Step::IcmpQuote {
            reading: Some(Reading::Forward),
            ..
        }]
    ));
}

#[test]
fn a_denied_client_and_an_unmatched_port() {
    let t = bank();
    let nic = NicSettings::default();
    let mut p = packet(443, 0x10);
    p.flow.client = 0xffff_c633_6507; // 198.51.101.7: outside 198.51.100.0/24
    let mut trace = Trace::default();
    let got = lookup::lookup(&t, &nic, None::<&ConnTable>, &p, &mut trace);
    assert_eq!(
        (got.verdict, got.reason, got.rule),
        (Verdict::Drop, Reason::AclDenied, Some(5))
    );
    assert!(trace.steps.iter().any(|s| matches!(
        s,
        Step::Acl {
            outcome: AclOutcome::Denied,
            ..
        }
    )));
    let got = lookup::lookup(
        &t,
        &nic,
        None::<&ConnTable>,
        &packet(444, 0x10),
        &mut NoTrace,
    );
    assert_eq!(
        (got.verdict, got.reason, got.rule),
        (Verdict::Pass, Reason::NoRule, None)
    );
}
