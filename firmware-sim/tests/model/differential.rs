//! Differential tests: the optimised golden model against the host-side reference of the
//! pipeline semantics (crate `nlb-reference`, `hw/reference`: the straightforward model, one
//! packet at a time), on random and mutated traffic.
//!
//! Each case builds one table bank (the standard scenario plus broken entries: a rule without
//! a pool, a pool whose Maglev slots name a dead backend, a slice beyond the slot memory, a
//! port slot naming a rule beyond the table; plus `L3_DEFAULT` rules: VIP entries of protocol
//! 0 on pools of every affinity, tracking or not, with the gap slots of their VIPs' TCP and UDP
//! entries), pre-installs connections (some on dead backends, some of portless flows),
//! picks the settings (auto-learn, default action, pipeline enable, connection-table
//! geometry) and sends frames in random batches through `receive_batch` and `receive` of a
//! `ModelDevice` and of the reference. Every result field, every output byte, the counters of
//! every kind and index, the punt and learn queues (read through the registers), the
//! connection table and its hit bits must be equal. A failure names the case seed; frames are
//! generated from it, so `DIFF_SEED=<seed>` with the ignored test `replay_one_case` replays it.

use crate::common;

use common::hostmem::Rings;
use common::*;
use firmware_sim::{BatchOutput, ConnTable, CounterKind, CtOutcome, ModelDevice, PacketResult};
use nlb_hw::blocks::{ctrl, dma, queues};
use nlb_hw::enums::{Affinity, Delivery, Event, KeyType, Reason, Verdict};
use nlb_hw::layouts::{
    AclPrefix, InjectHeader, LearnEvent, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{FlowKey, Tables};
use nlb_reference as reference;
use proptest::prelude::*;
use reference::device::{Counter as RefCounter, RefDevice};
use std::net::IpAddr;

/// The reference's result in the model's type. Both structs are built and taken apart field
/// by field, so a field added to either fails to compile here until it is compared.
fn expected(r: &reference::pipeline::PacketResult) -> PacketResult {
    let reference::pipeline::PacketResult {
        verdict,
        reason,
        bank,
        rule,
        pool,
        backend,
        key,
        conntrack,
        ct_index,
        flow_hash,
        ip_id,
        frame_len,
        out_len,
        event,
    } = *r;
    PacketResult {
        verdict,
        reason,
        bank,
        rule,
        pool,
        backend,
        key,
        conntrack: match conntrack {
            reference::lookup::CtOutcome::None => CtOutcome::None,
            reference::lookup::CtOutcome::Hit => CtOutcome::Hit,
            reference::lookup::CtOutcome::Miss => CtOutcome::Miss,
        },
        ct_index,
        flow_hash,
        ip_id,
        frame_len,
        out_len,
        event,
    }
}

/// The reference's counter in the model's type.
fn expected_counter(c: RefCounter) -> firmware_sim::Counter {
    let RefCounter {
        packets,
        bytes,
        punts,
        drops,
    } = c;
    firmware_sim::Counter {
        packets,
        bytes,
        punts,
        drops,
    }
}

/// SplitMix64: the frames of a case follow from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const CLIENTS4: [&str; 4] = ["198.51.100.1", "198.51.100.2", "192.0.2.7", "100.64.3.9"];
/// `cccc::1` and `aaaa::1` differ only above their low 32 bits, which is all of an address
/// the connection table's key slots hold: the full entry must tell them apart.
const CLIENTS6: [&str; 4] = [
    "2001:db8:aaaa::1",
    "2001:db8:bbbb::2",
    "2001:db8:aaaa:1::5",
    "2001:db8:cccc::1",
];
/// (VIP, protocol, destination port) combinations: every rule, the broken ones, unmatched.
const TARGETS4: [(&str, u8, u16); 19] = [
    (VIP4, 6, 80),
    (VIP4, 6, 443),
    (VIP4, 17, 53),
    (VIP4, 6, 8040),
    (VIP4, 6, 9999),
    (MULTI_UDP_VIP, 17, 1500),
    (MULTI_UDP_VIP, 17, 2500),
    (ACL_VIP4, 6, 22),
    (EMPTY_VIP, 6, 80),
    (SRC_ONLY_VIP, 6, 80),
    (FRAG_VIP4, 17, 4000),
    (BROKEN_VIP, 6, 1),
    (BROKEN_VIP, 6, 2),
    (BROKEN_VIP, 6, 3),
    (BROKEN_VIP, 6, 4),
    ("192.0.2.200", 6, 80),
    (WIDE_VIP, 6, 100),
    (WIDE_VIP, 6, 115),
    (WIDE_VIP, 6, 116),
];
const TARGETS6: [(&str, u8, u16); 5] = [
    (VIP6, 6, 443),
    (VIP6, 17, 7),
    (VIP6, 6, 80),
    (ACL_VIP6, 6, 22),
    ("2001:db8:ffff::99", 17, 53),
];
/// A VIP with broken entries behind its port slots (see `tables`).
const BROKEN_VIP: &str = "198.18.0.9";
/// A VIP with all 16 port slots of its TCP entry valid: ports 100..=115 (see `tables`).
const WIDE_VIP: &str = "198.18.0.10";

/// VIPs with an `L3_DEFAULT` rule (see `tables`): `L3_VIPS4[i]` and `L3_VIPS6[i]` have a
/// protocol-0 entry whose one slot (all ports) names rule `L3_RULE0 + i`, on pool
/// `L3_POOL0 + i`: affinity `Affinity::ALL[i / 2]`, tracking for even `i`. Even `i`: a TCP
/// entry, port 80 → rule 0 and the gaps → the L3 rule; odd `i`: a UDP entry, port 53 → rule 2
/// and the gaps → the L3 rule.
const L3_VIPS4: [&str; 10] = [
    "198.18.1.0",
    "198.18.1.1",
    "198.18.1.2",
    "198.18.1.3",
    "198.18.1.4",
    "198.18.1.5",
    "198.18.1.6",
    "198.18.1.7",
    "198.18.1.8",
    "198.18.1.9",
];
const L3_VIPS6: [&str; 10] = [
    "2001:db8:ffff:1::",
    "2001:db8:ffff:1::1",
    "2001:db8:ffff:1::2",
    "2001:db8:ffff:1::3",
    "2001:db8:ffff:1::4",
    "2001:db8:ffff:1::5",
    "2001:db8:ffff:1::6",
    "2001:db8:ffff:1::7",
    "2001:db8:ffff:1::8",
    "2001:db8:ffff:1::9",
];
const L3_RULE0: u16 = 16;
const L3_POOL0: u16 = 10;
/// The L3 rule with a source ACL (198.51.100.0/24, 2001:db8:aaaa::/48).
const L3_ACL_RULE: u16 = L3_RULE0 + 3;
/// Protocols without ports: ICMP (echo), GRE, ESP, AH, SCTP (ports not read), the boundaries
/// 0 and 255, and an unassigned one.
const PORTLESS: [u8; 8] = [1, 47, 50, 51, 132, 0, 255, 143];

/// Puts a VIP entry in the first free way of its bucket (by the regmap hash of its VIP key).
fn place_vip(t: &mut Tables, e: VipEntry) {
    let profile = t.profile;
    let bucket = nlb_hw::table_index(
        FlowKey {
            key_type: KeyType::Vip,
            protocol: e.protocol,
            dst_addr: e.addr,
            ..FlowKey::default()
        }
        .hash(),
        profile.vip_buckets,
    ) as usize;
    let ways = profile.vip_ways as usize;
    let way = (0..ways)
        .find(|w| !t.vip[bucket * ways + w].valid)
        .expect("free VIP way");
    t.vip[bucket * ways + way] = e;
}

fn vip_entry(protocol: u8, addr: &str, slots: &[(u16, u16, u16)]) -> VipEntry {
    let mut e = VipEntry {
        valid: true,
        protocol,
        addr: nlb_hw::hash::addr_to_u128(ip(addr)),
        ..VipEntry::default()
    };
    for (s, &(port_lo, port_hi, rule)) in e.slot.iter_mut().zip(slots) {
        *s = PortSlot {
            valid: true,
            port_lo,
            port_hi,
            rule,
        };
    }
    e
}

/// The `L3_DEFAULT` rules of `L3_VIPS4` / `L3_VIPS6`, a protocol-0 entry with two slots on
/// BROKEN_VIP (port 0 → rule 13, whose pool is invalid; later fragments: several rules), and
/// a decoy entry of protocol 47 on VIP4 (a GRE packet looks up protocol 0, never 47).
fn add_l3_default_rules(t: &mut Tables) {
    let profile = t.profile;
    for i in 0..10u16 {
        let pool = usize::from(L3_POOL0 + i);
        let base = 6000 + 16 * u32::from(i);
        let size = 13;
        t.pools[pool] = PoolEntry {
            valid: true,
            affinity: Affinity::ALL[usize::from(i / 2)],
            delivery: Delivery::ALL[usize::from(i) % Delivery::ALL.len()],
            maglev_base: base,
            maglev_size: size,
            track: i % 2 == 0,
            idle_timeout: 60,
            ..PoolEntry::default()
        };
        for s in 0..size {
            t.maglev[(base + s) as usize] = MaglevSlot {
                backend: [1u16, 2, 3, 4, 11, 12][(s as usize + usize::from(i)) % 6],
            };
        }
        let rule = L3_RULE0 + i;
        t.rules[usize::from(rule)] = RuleEntry {
            valid: true,
            acl_enabled: rule == L3_ACL_RULE,
            pool: L3_POOL0 + i,
        };
        for vip in [L3_VIPS4[usize::from(i)], L3_VIPS6[usize::from(i)]] {
            place_vip(t, vip_entry(0, vip, &[(0, 65535, rule)]));
            let (proto, port, own) = if i % 2 == 0 { (6, 80, 0) } else { (17, 53, 2) };
            place_vip(
                t,
                vip_entry(
                    proto,
                    vip,
                    &[
                        (port, port, own),
                        (0, port - 1, rule),
                        (port + 1, 65535, rule),
                    ],
                ),
            );
        }
    }
    let acl = &mut t.acl[usize::from(L3_ACL_RULE)];
    acl.prefix[0] = AclPrefix {
        valid: true,
        prefix_len: 96 + 24,
        addr: nlb_hw::hash::addr_to_u128(ip("198.51.100.0")),
    };
    acl.prefix[1] = AclPrefix {
        valid: true,
        prefix_len: 48,
        addr: nlb_hw::hash::addr_to_u128(ip("2001:db8:aaaa::")),
    };
    place_vip(t, vip_entry(0, BROKEN_VIP, &[(0, 0, 13), (1, 65535, 300)]));
    place_vip(t, vip_entry(47, VIP4, &[(0, 65535, 0)]));
    assert!(profile.rules > u32::from(L3_RULE0 + 10));
}

/// The standard bank plus broken entries on BROKEN_VIP TCP: port 1 → rule 13 whose pool 9 is
/// invalid; port 2 → rule 14 on pool 7, whose slots name the dead backend 50; port 3 → rule
/// 15 on pool 8, whose slice lies beyond the slot memory; port 4 → rule 300, beyond the rule
/// table. WIDE_VIP TCP: ports 100..=115 in all 16 slots, on rules 0..=12 (tracked and
/// untracked pools) and again 0..=2.
fn tables() -> Tables {
    let mut t = standard_tables();
    let profile = t.profile;
    let wide = nlb_hw::hash::addr_to_u128(ip(WIDE_VIP));
    let bucket =
        nlb_hw::table_index(FlowKey::vip(6, ip(WIDE_VIP)).hash(), profile.vip_buckets) as usize;
    let ways = profile.vip_ways as usize;
    let way = (0..ways)
        .find(|w| !t.vip[bucket * ways + w].valid)
        .expect("free VIP way");
    let e = &mut t.vip[bucket * ways + way];
    e.valid = true;
    e.protocol = 6;
    e.addr = wide;
    assert_eq!(e.slot.len(), 16);
    for (i, s) in e.slot.iter_mut().enumerate() {
        *s = PortSlot {
            valid: true,
            port_lo: 100 + i as u16,
            port_hi: 100 + i as u16,
            rule: i as u16 % 13,
        };
    }
    let vip = nlb_hw::hash::addr_to_u128(ip(BROKEN_VIP));
    let bucket =
        nlb_hw::table_index(FlowKey::vip(6, ip(BROKEN_VIP)).hash(), profile.vip_buckets) as usize;
    let ways = profile.vip_ways as usize;
    let way = (0..ways)
        .find(|w| !t.vip[bucket * ways + w].valid)
        .expect("free VIP way");
    let e = &mut t.vip[bucket * ways + way];
    e.valid = true;
    e.protocol = 6;
    e.addr = vip;
    for (i, rule) in [13u16, 14, 15, 300].into_iter().enumerate() {
        e.slot[i] = PortSlot {
            valid: true,
            port_lo: i as u16 + 1,
            port_hi: i as u16 + 1,
            rule,
        };
    }
    for (rule, pool) in [(13usize, 9u16), (14, 7), (15, 8)] {
        t.rules[rule] = RuleEntry {
            valid: true,
            acl_enabled: false,
            pool,
        };
    }
    t.pools[7] = PoolEntry {
        valid: true,
        maglev_base: 5000,
        maglev_size: 7,
        track: true,
        ..PoolEntry::default()
    };
    for s in 5000..5007 {
        t.maglev[s] = MaglevSlot { backend: 50 };
    }
    t.pools[8] = PoolEntry {
        valid: true,
        maglev_base: profile.maglev_slots - 3,
        maglev_size: 11,
        track: false,
        ..PoolEntry::default()
    };
    add_l3_default_rules(&mut t);
    t
}

fn client(rng: &mut Rng, v6: bool) -> IpAddr {
    let list: &[&str] = if v6 { &CLIENTS6 } else { &CLIENTS4 };
    let c: &&str = rng.pick(list);
    ip(c)
}

fn flags(rng: &mut Rng) -> Flags {
    let all = [
        SYN,
        ACK,
        ACK,
        ACK,
        Flags {
            fin: true,
            ack: true,
            ..Flags::default()
        },
        Flags {
            rst: true,
            ..Flags::default()
        },
        Flags {
            syn: true,
            ack: true,
            ..Flags::default()
        },
    ];
    *rng.pick(&all)
}

/// One ordinary TCP/UDP frame of the case's flow space.
fn flow_frame(rng: &mut Rng) -> Vec<u8> {
    let v6 = rng.chance(30);
    let (vip, proto, dport) = if v6 {
        *rng.pick(&TARGETS6)
    } else {
        *rng.pick(&TARGETS4)
    };
    let c = client(rng, v6);
    let sport = 1000 + rng.below(4) as u16;
    let vlans: &[u16] = match rng.below(6) {
        0 => &[7],
        1 => &[7, 8],
        _ => &[],
    };
    let payload = vec![
        0xa5u8;
        match rng.below(8) {
            0 => 0,
            1 => 9000,
            2 => 1400,
            _ => rng.below(40) as usize,
        }
    ];
    let f = if proto == 6 {
        tcp_vlan(c, sport, ip(vip), dport, flags(rng), &payload, vlans)
    } else {
        udp_vlan(c, sport, ip(vip), dport, &payload, vlans)
    };
    if rng.chance(50) {
        pad60(f)
    } else {
        f
    }
}

/// A frame to a VIP with an `L3_DEFAULT` rule (or to VIP4 and BROKEN_VIP, or to no VIP): a
/// portless protocol (ICMP / ICMPv6 echo, GRE, ESP, AH, SCTP, 0, 255, any number), whole or
/// fragmented, or TCP / UDP to the entry's own port or a gap port; VLAN tags now and then.
fn portless_frame(rng: &mut Rng) -> Vec<u8> {
    let v6 = rng.chance(40);
    let c = client(rng, v6);
    let vip = match rng.below(12) {
        0 if !v6 => VIP4,
        1 if !v6 => BROKEN_VIP,
        2 => {
            if v6 {
                "2001:db8:ffff:2::1"
            } else {
                "198.18.2.1"
            }
        }
        _ => {
            // The tracking pools' VIPs (even) half the time, so flows repeat and hit.
            let i = if rng.chance(50) {
                2 * rng.below(5) as usize
            } else {
                rng.below(10) as usize
            };
            if v6 {
                L3_VIPS6[i]
            } else {
                L3_VIPS4[i]
            }
        }
    };
    let vlans: &[u16] = match rng.below(6) {
        0 => &[7],
        1 => &[7, 8],
        _ => &[],
    };
    let payload = vec![0x5au8; rng.below(300) as usize];
    let f = match rng.below(10) {
        0 => {
            let sport = 1000 + rng.below(4) as u16;
            let dport = *rng.pick(&[80u16, 53, 79, 81, 52, 54, 0, 65535, 9999]);
            if rng.chance(50) {
                tcp_vlan(c, sport, ip(vip), dport, flags(rng), &payload, vlans)
            } else {
                udp_vlan(c, sport, ip(vip), dport, &payload, vlans)
            }
        }
        1 | 2 => echo_vlan(c, ip(vip), rng.below(3) as u16, &payload, vlans),
        _ => {
            let proto = match rng.below(10) {
                0 | 1 => rng.below(256) as u8,
                2..=5 => 47,
                _ => *rng.pick(&PORTLESS),
            };
            // IPv6 reads 0, 43, 44 and 60 as extension headers: not portless protocols there.
            let proto = if v6 && matches!(proto, 0 | 43 | 44 | 60) {
                47
            } else {
                proto
            };
            raw_ip_vlan(c, ip(vip), proto, &payload, vlans)
        }
    };
    if vlans.is_empty() && payload.len() >= 16 && rng.chance(20) {
        let frags = if v6 {
            ipv6_fragments(
                &f,
                rng.below(1 << 32) as u32,
                8 * (1 + rng.below(4) as usize),
            )
        } else {
            ipv4_fragments(
                &f,
                rng.below(1 << 16) as u16,
                8 * (1 + rng.below(4) as usize),
            )
        };
        return rng.pick(&frags).clone();
    }
    if rng.chance(50) {
        pad60(f)
    } else {
        f
    }
}

/// A frame of any kind: flows, fragments, extension headers, ICMP errors, non-IP, portless
/// protocols.
fn any_frame(rng: &mut Rng) -> Vec<u8> {
    match rng.below(20) {
        0 => {
            let v6 = rng.chance(50);
            let c = client(rng, v6);
            let sport = 1000 + rng.below(4) as u16;
            let payload = vec![0x11u8; 64 + rng.below(200) as usize];
            // UDP datagrams (3-tuple, or the host on a multi-rule VIP) and TCP segments (the
            // host on tracked pools: VIP6:443 and VIP4:80 are, SRC_ONLY_VIP:80 is not).
            let tcp_seg = rng.chance(50);
            let frags = if v6 {
                let whole = if tcp_seg {
                    tcp(c, sport, ip(VIP6), 443, flags(rng), &payload)
                } else {
                    udp(c, sport, ip(VIP6), 4000, &payload)
                };
                ipv6_fragments(
                    &whole,
                    rng.below(1 << 32) as u32,
                    8 * (1 + rng.below(12) as usize),
                )
            } else {
                let whole = if tcp_seg {
                    let (vip, port) = *rng.pick(&[(VIP4, 80), (SRC_ONLY_VIP, 80), (WIDE_VIP, 107)]);
                    tcp(c, sport, ip(vip), port, flags(rng), &payload)
                } else {
                    let vip = *rng.pick(&[FRAG_VIP4, MULTI_UDP_VIP, VIP4]);
                    udp(c, sport, ip(vip), 1500, &payload)
                };
                ipv4_fragments(
                    &whole,
                    rng.below(1 << 16) as u16,
                    8 * (1 + rng.below(12) as usize),
                )
            };
            rng.pick(&frags).clone()
        }
        1 => {
            let c = client(rng, true);
            let exts: &[(u8, usize)] = match rng.below(4) {
                0 => &[(0, 8)],
                1 => &[(0, 8), (60, 16)],
                2 => &[(43, 24), (60, 8), (60, 8)],
                _ => &[(0, 8), (60, 8), (43, 8), (60, 8), (60, 8)],
            };
            ipv6_with_ext(&tcp(c, 1001, ip(VIP6), 443, flags(rng), b"ext"), exts)
        }
        2 => {
            // ICMPv4 error quoting a backend's reply (reversed reading) or a client packet.
            let c = client(rng, false);
            let (vip, proto, port) = *rng.pick(&TARGETS4);
            let sport = 1000 + rng.below(4) as u16;
            let quoted = if rng.chance(50) {
                if proto == 6 {
                    tcp(ip(vip), port, c, sport, ACK, b"")
                } else {
                    udp(ip(vip), port, c, sport, b"")
                }
            } else if proto == 6 {
                tcp(c, sport, ip(vip), port, ACK, b"")
            } else {
                udp(c, sport, ip(vip), port, b"")
            };
            let q = ip_part(&quoted);
            let n = [8usize, 20, 27, 28, 40, q.len()][rng.below(6) as usize].min(q.len());
            let ty = *rng.pick(&[3u8, 11, 0, 8]);
            icmp4_error(ip("192.0.2.254"), ip(vip), ty, 4, [0; 4], &q[..n])
        }
        3 => {
            let c = client(rng, true);
            let (vip, proto, port) = *rng.pick(&TARGETS6);
            let quoted = if proto == 6 {
                tcp(ip(vip), port, c, 1002, ACK, b"")
            } else {
                udp(ip(vip), port, c, 1002, b"")
            };
            let q = ip_part(&quoted);
            let n = [40usize, 47, 48, q.len()][rng.below(4) as usize].min(q.len());
            let ty = *rng.pick(&[1u8, 2, 3, 128]);
            icmp6_error(ip("2001:db8::fe"), ip(vip), ty, 0, [0, 0, 5, 0xdc], &q[..n])
        }
        4 => {
            // Not IP (ARP), or a bare Ethernet header.
            let mut f = vec![0xffu8; 6];
            f.extend_from_slice(&CLIENT_MAC);
            f.extend_from_slice(&[0x08, 0x06]);
            f.resize(14 + rng.below(50) as usize, 0);
            f
        }
        5..=8 => portless_frame(rng),
        _ => flow_frame(rng),
    }
}

/// Recomputes the IPv4 header checksum of an untagged frame (so that a mutated header
/// reaches the stages after the checksum check).
fn fix_ipv4_checksum(f: &mut [u8]) {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return;
    }
    let hl = usize::from(f[14] & 0x0f) * 4;
    if hl < 20 || f.len() < 14 + hl {
        return;
    }
    f[24] = 0;
    f[25] = 0;
    let mut sum = 0u32;
    for c in f[14..14 + hl].chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// A frame, maybe mutated (byte edits in the headers, IPv4 header fields, a third VLAN tag,
/// truncation).
fn frame(rng: &mut Rng) -> Vec<u8> {
    let mut f = any_frame(rng);
    if rng.chance(3) && f.len() >= 14 {
        // One more tag in front of whatever the frame has (three on a QinQ frame).
        let tpid = *rng.pick(&[[0x81u8, 0x00], [0x88, 0xa8]]);
        f.splice(12..12, [tpid[0], tpid[1], 0, 9]);
    }
    if rng.chance(10) && f.len() >= 34 && f[12..14] == [0x08, 0x00] {
        // An IPv4 header field: version / IHL, a short total length, the protocol.
        match rng.below(3) {
            0 => f[14] = rng.next() as u8,
            1 => {
                let hl = usize::from(f[14] & 0x0f) * 4;
                let total = (hl + rng.below(24) as usize) as u16;
                f[16..18].copy_from_slice(&total.to_be_bytes());
            }
            _ => f[23] = *rng.pick(&[1u8, 6, 17, 58, 4]),
        }
        fix_ipv4_checksum(&mut f);
    }
    if rng.chance(30) {
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(f.len().min(80) as u64) as usize;
            f[at] = rng.next() as u8;
        }
        if rng.chance(70) {
            fix_ipv4_checksum(&mut f);
        }
    }
    if rng.chance(10) {
        let n = rng.below(f.len() as u64 + 1) as usize;
        f.truncate(n);
    }
    f
}

/// Pre-installs connections of the flow space on both devices (some on a dead backend; some
/// of portless flows to the L3_DEFAULT VIPs, ports 0).
fn preinstall(rng: &mut Rng, dev: &mut ModelDevice, r: &mut RefDevice) {
    for _ in 0..rng.below(32) {
        let v6 = rng.chance(30);
        let key = if rng.chance(30) {
            let i = rng.below(10) as usize;
            let vip = if v6 { L3_VIPS6[i] } else { L3_VIPS4[i] };
            let proto = match *rng.pick(&[47, 47, 1, 50, 132]) {
                1 if v6 => 58,
                p => p,
            };
            FlowKey::tuple5(proto, client(rng, v6), 0, ip(vip), 0)
        } else {
            let (vip, proto, port) = if v6 {
                *rng.pick(&TARGETS6)
            } else {
                *rng.pick(&TARGETS4)
            };
            FlowKey::tuple5(
                proto,
                client(rng, v6),
                1000 + rng.below(4) as u16,
                ip(vip),
                port,
            )
        };
        let proto = key.protocol;
        let backend = *rng.pick(&[1u16, 2, 3, 4, 11, 12, 50, 4095]);
        let ev = LearnEvent {
            event: Event::Learn,
            protocol: proto,
            src_port: key.src_port,
            dst_port: key.dst_port,
            src_addr: key.src_addr,
            dst_addr: key.dst_addr,
            backend,
            rule: 0,
            flow_hash: key.with_type(KeyType::Tuple5).hash(),
        };
        let a = dev.conntrack_mut().install(&ev, 0);
        let b = r.conntrack.install(&ev, 0);
        assert_eq!(a.ok(), b.ok(), "install");
    }
}

/// A punted frame as the registers show it: header words and data.
type PuntRecord = ([u32; 4], Vec<u8>);

/// `punt_status` and the queued frames, popped through the registers.
fn punt_queue(dev: &mut ModelDevice) -> (u32, Vec<PuntRecord>) {
    let status = dev.read32(queues::PUNT_STATUS).expect("reg");
    let mut v = Vec::new();
    for _ in 0..status & 0xffff {
        dev.write32(queues::PUNT_POP, 1).expect("reg");
        let mut h = [0u32; 4];
        for (i, w) in h.iter_mut().enumerate() {
            *w = dev.read32(queues::PUNT_HEADER + 4 * i as u32).expect("reg");
        }
        let len = dev.read32(queues::PUNT_LEN).expect("reg") as usize;
        let mut data = Vec::with_capacity(len);
        for i in 0..len.div_ceil(4) {
            let w = dev.read32(queues::PUNT_DATA + 4 * i as u32).expect("reg");
            data.extend_from_slice(&w.to_le_bytes());
        }
        data.truncate(len);
        v.push((h, data));
    }
    (status, v)
}

/// `learn_status` and the queued events, popped through the registers.
fn learn_queue(dev: &mut ModelDevice) -> (u32, Vec<[u32; 12]>) {
    let status = dev.read32(queues::LEARN_STATUS).expect("reg");
    let mut v = Vec::new();
    for _ in 0..status & 0xffff {
        dev.write32(queues::LEARN_POP, 1).expect("reg");
        let mut w = [0u32; 12];
        for (i, x) in w.iter_mut().enumerate() {
            *x = dev.read32(queues::LEARN_DATA + 4 * i as u32).expect("reg");
        }
        v.push(w);
    }
    (status, v)
}

/// The host rings of a case that uses them, with the drop counts seen so far.
struct CaseRings {
    rings: Rings,
    punt_drops: u32,
    event_drops: u32,
}

/// Compares everything observable of the two devices, draining both queues (the rings, when
/// the case uses them: the register queues then stay empty).
fn compare_state(
    seed: u64,
    dev: &mut ModelDevice,
    r: &mut RefDevice,
    rings: &mut Option<CaseRings>,
) {
    if let Some(cr) = rings.as_mut() {
        let (cpls, frames, drops) = cr.rings.take_punts(dev);
        let want: Vec<([u32; 4], Vec<u8>)> = r
            .punt
            .drain(..)
            .map(|(h, f)| (h.pack().expect("punt header packs"), f))
            .collect();
        let got: Vec<([u32; 4], Vec<u8>)> = cpls
            .iter()
            .zip(frames)
            .map(|(c, f)| (c.header[0].pack().expect("packs"), f))
            .collect();
        assert_eq!(got, want, "seed {seed}: punt ring");
        assert_eq!(
            drops != cr.punt_drops,
            r.punt_overflow,
            "seed {seed}: punt drops"
        );
        cr.punt_drops = drops;
        r.punt_overflow = false;
        let (records, drops) = cr.rings.take_events(dev);
        let learned: Vec<LearnEvent> = records.iter().map(|x| x.event[0]).collect();
        let want: Vec<LearnEvent> = r.learn.drain(..).collect();
        assert_eq!(learned, want, "seed {seed}: event ring");
        if !r.auto_learn {
            // The reference logs every record; the ring holds those that fitted, in order.
            let all: Vec<_> = r.records.drain(..).collect();
            assert_eq!(
                records[..],
                all[..records.len()],
                "seed {seed}: event records"
            );
        }
        r.records.clear();
        assert_eq!(
            drops != cr.event_drops,
            r.learn_overflow,
            "seed {seed}: event drops"
        );
        cr.event_drops = drops;
        r.learn_overflow = false;
    }
    r.records.clear();
    let p = dev.profile();
    for (kind, n) in [
        (CounterKind::Rule, p.rules),
        (CounterKind::Backend, p.backends),
        (CounterKind::Reason, Reason::ALL.len() as u32),
        (CounterKind::Verdict, Verdict::ALL.len() as u32),
    ] {
        for i in 0..n {
            assert_eq!(
                dev.counters().get(kind, i),
                expected_counter(r.counter(kind, i)),
                "seed {seed}: counter {kind:?} {i}"
            );
        }
    }
    let (status, punts) = punt_queue(dev);
    let want_status = r.punt.len() as u32 | u32::from(r.punt_overflow) << 31;
    assert_eq!(status, want_status, "seed {seed}: punt status");
    let want: Vec<PuntRecord> = r
        .punt
        .drain(..)
        .map(|(h, f)| (h.pack().expect("punt header packs"), f))
        .collect();
    assert_eq!(punts, want, "seed {seed}: punt queue");
    r.punt_overflow = false;
    let (status, events) = learn_queue(dev);
    let want_status = r.learn.len() as u32 | u32::from(r.learn_overflow) << 31;
    assert_eq!(status, want_status, "seed {seed}: learn status");
    let want: Vec<[u32; 12]> = r
        .learn
        .drain(..)
        .map(|e| e.pack().expect("event packs"))
        .collect();
    assert_eq!(events, want, "seed {seed}: learn queue");
    r.learn_overflow = false;
    let ct = dev.conntrack_mut();
    assert_eq!(ct.len(), r.conntrack.len());
    assert_eq!(ct.valid_count(), r.conntrack.valid_count(), "seed {seed}");
    for i in 0..ct.len() {
        assert_eq!(
            ct.entry(i),
            r.conntrack.entry(i),
            "seed {seed}: conntrack entry {i}"
        );
    }
    for i in (0..ct.len()).step_by(32) {
        assert_eq!(
            ct.take_hits(i),
            r.conntrack.take_hits(i),
            "seed {seed}: hit bits {i}"
        );
    }
}

/// Sends an injected frame through the register window of `dev` and the reference's
/// `process_injected`; compares the transmitted frames and counts it on the reference.
fn inject(seed: u64, rng: &mut Rng, dev: &mut ModelDevice, r: &mut RefDevice) {
    let f = frame(rng);
    let h = InjectHeader {
        backend: *rng.pick(&[1u16, 3, 11, 13, 50]),
        pool: *rng.pick(&[0u16, 1, 2, 3, 4, 9]),
        frame_len: f.len() as u16,
    };
    for (i, w) in h.pack().expect("inject header").iter().enumerate() {
        dev.write32(queues::INJECT_HEADER + 4 * i as u32, *w)
            .expect("reg");
    }
    let mut padded = f.clone();
    padded.resize(f.len().div_ceil(4) * 4, 0);
    for (i, c) in padded.chunks(4).enumerate() {
        let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        dev.write32(queues::INJECT_DATA + 4 * i as u32, w)
            .expect("reg");
    }
    dev.write32(queues::INJECT_PUSH, 1).expect("reg");
    let got = dev.take_injected();
    assert_eq!(got.len(), 1, "seed {seed}: one injected frame");
    let mut out = vec![0u8; reference::action::MAX_FRAME];
    let want =
        reference::pipeline::process_injected(&r.context(), &h, &f, &mut out).expect("buffer");
    out.truncate(want.out_len);
    assert_eq!(
        got[0].result,
        expected(&want),
        "seed {seed}: injected result, frame {f:02x?}"
    );
    assert_eq!(got[0].frame, out, "seed {seed}: injected frame");
    r.count(&want);
}

/// Packets by what they are and how they ended, for the coverage check: portless flows, and
/// TCP / UDP packets that reached an `L3_DEFAULT` rule through a gap slot.
type Bins = std::collections::BTreeMap<String, u64>;

/// Counts one received packet (the reference's result) into the bins.
fn cover(bins: &mut Bins, frame: &[u8], r: &reference::pipeline::PacketResult) {
    let Ok(reference::parse::Parsed::Ip(h)) = reference::parse::parse(frame) else {
        return;
    };
    if h.icmp_error {
        return;
    }
    let family = match h.family {
        reference::parse::Family::V4 => "v4",
        reference::parse::Family::V6 => "v6",
    };
    let v = r.verdict.name();
    let mut add = |bin: String| *bins.entry(bin).or_default() += 1;
    if h.protocol == 6 || h.protocol == 17 {
        let l3 = r
            .rule
            .is_some_and(|id| (L3_RULE0..L3_RULE0 + 10).contains(&id));
        if l3 && !h.is_fragment {
            add(format!("{} gap port x {v}", h.protocol));
        }
        return;
    }
    let frag = match (h.is_fragment, h.is_later_fragment()) {
        (false, _) => "whole",
        (true, false) => "first",
        (true, true) => "later",
    };
    add(format!(
        "portless {family} {frag} x {v} {}",
        r.reason.name()
    ));
    if r.verdict == Verdict::Forward {
        let key = r.key.map_or("-", |k| k.name());
        add(format!("portless forward x key {key}"));
        add(format!("portless forward x conntrack {:?}", r.conntrack));
    }
    if let Some(e) = r.event {
        add(format!("portless event {:?}", e.event));
    }
}

/// One differential case; returns the reference device for coverage checks.
fn run_case(seed: u64, frames_per_case: usize, bins: &mut Bins) -> RefDevice {
    let mut rng = Rng(seed);
    let (buckets, ways) = *rng.pick(&[(1, 1), (4, 2), (64, 4), (4096, 4)]);
    let mut settings = test_settings();
    let drop_default = rng.chance(30);
    let auto_learn = rng.chance(50);
    let enabled = !rng.chance(5);
    // The bank through the back door of `from_tables`, the rest through the registers.
    let mut dev = ModelDevice::from_tables(tables(), settings);
    *dev.conntrack_mut() = ConnTable::new(buckets, ways);
    let mut r = RefDevice::new(tables(), settings, buckets, ways);
    if drop_default {
        dev.write32(ctrl::DEFAULT_ACTION, 1).expect("reg");
        settings.default_action = nlb_hw::enums::DefaultAction::Drop;
        r.settings = settings;
    }
    if !enabled {
        dev.write32(ctrl::ENABLE, 0).expect("reg");
        r.enabled = false;
    }
    dev.set_auto_learn(auto_learn);
    r.auto_learn = auto_learn;
    preinstall(&mut rng, &mut dev, &mut r);
    // Hardware learning and the host rings (docs/pipeline.md §10, §15), drawn from their own
    // generator so that the traffic of a seed stays what it was without them.
    let mut extra = Rng(seed ^ 0xd3a_1ea7);
    if !auto_learn && extra.chance(40) {
        dev.write32(dma::HOST_TIME, 77).expect("reg");
        dev.write32(
            dma::CTRL,
            dma::Ctrl {
                enable: false,
                hw_learn: true,
            }
            .word(),
        )
        .expect("reg");
        r.hw_learn = true;
        r.host_time = 77;
    }
    let log2 = p_depth_log2(&dev);
    let mut rings = extra.chance(40).then(|| CaseRings {
        // As deep as the register queues, so the reference's overflows are the ring's drops.
        rings: Rings::attach(&mut dev, log2),
        punt_drops: 0,
        event_drops: 0,
    });

    let mut out = BatchOutput::new();
    let mut buf = vec![0u8; firmware_sim::action::MAX_FRAME];
    let mut sent = 0;
    while sent < frames_per_case {
        let n = (1 + rng.below(40) as usize).min(frames_per_case - sent);
        let frames: Vec<Vec<u8>> = (0..n).map(|_| frame(&mut rng)).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        match rng.below(8) {
            0 => {
                for f in &refs {
                    let got = dev.receive(f, &mut buf).expect("MAX_FRAME buffer");
                    let (want, wout) = r.receive(f);
                    cover(bins, f, &want);
                    assert_eq!(got, expected(&want), "seed {seed}: frame {f:02x?}");
                    assert_eq!(
                        &buf[..got.out_len],
                        &wout[..],
                        "seed {seed}: output of {f:02x?}"
                    );
                }
            }
            1 => inject(seed, &mut rng, &mut dev, &mut r),
            _ => {
                dev.receive_batch(&refs, &mut out);
                let want = r.receive_batch(&refs);
                assert_eq!(out.results.len(), n);
                for (i, (w, wout)) in want.iter().enumerate() {
                    cover(bins, refs[i], w);
                    assert_eq!(
                        out.results[i],
                        expected(w),
                        "seed {seed}: frame {:02x?}",
                        refs[i]
                    );
                    assert_eq!(
                        out.frame(i),
                        &wout[..],
                        "seed {seed}: output of {:02x?}",
                        refs[i]
                    );
                }
            }
        }
        sent += n;
        if rng.chance(20) {
            compare_state(seed, &mut dev, &mut r, &mut rings);
        }
    }
    compare_state(seed, &mut dev, &mut r, &mut rings);
    r
}

/// log2 of the profile's queue depth.
fn p_depth_log2(dev: &ModelDevice) -> u8 {
    dev.profile().queue_depth.trailing_zeros() as u8
}

/// Replays the case a failure named:
/// `DIFF_SEED=<seed> cargo test -p firmware-sim --test model differential:: -- --ignored replay`.
#[test]
#[ignore = "replays one failing case; needs DIFF_SEED"]
fn replay_one_case() {
    let seed = std::env::var("DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("DIFF_SEED=<seed from the failure message>");
    run_case(seed, 400, &mut Bins::new());
}

#[test]
fn the_traffic_reaches_every_reason_and_outcome() {
    // The generator is worth something only if it reaches every stage of both models.
    let mut reasons = vec![0u64; Reason::ALL.len()];
    let (mut hits, mut events) = (0u64, [0u64; 2]);
    let mut bins = Bins::new();
    for seed in 0..48 {
        let r = run_case(seed, 400, &mut bins);
        for (n, c) in reasons.iter_mut().zip(&r.reasons) {
            *n += c.packets;
        }
        hits += r.hits;
        for (n, e) in events.iter_mut().zip(r.events) {
            *n += e;
        }
    }
    for (reason, n) in Reason::ALL.iter().zip(&reasons) {
        // The model's tables answer at once: it never drops a received frame for lack of
        // room (docs/pipeline.md section 14); the RTL benches reach those two reasons.
        if matches!(reason, Reason::NoRoomLookup | Reason::NoRoomBuffer) {
            continue;
        }
        assert!(*n > 0, "no packet ended with {reason:?}: {reasons:?}");
    }
    assert!(hits > 0, "no connection-table hit");
    assert!(
        events.iter().all(|&n| n > 0),
        "learn / teardown events: {events:?}"
    );
    // Portless flows (docs/pipeline.md §3-§7) on L3_DEFAULT rules of every affinity, tracked
    // and not, both families, fragments; TCP and UDP through the gap slots.
    let mut want: Vec<String> = Vec::new();
    for family in ["v4", "v6"] {
        want.push(format!("portless {family} whole x FORWARD FORWARDED"));
        want.push(format!("portless {family} whole x PASS NO_RULE"));
        want.push(format!("portless {family} whole x DROP ACL_DENIED"));
        want.push(format!("portless {family} first x FORWARD FORWARDED"));
        want.push(format!("portless {family} later x FORWARD FORWARDED"));
    }
    want.push("portless v4 whole x DROP NO_BACKEND".into());
    want.push("portless v4 later x PUNT FRAGMENT_NEEDS_STATE".into());
    for key in ["TUPLE3", "TUPLE2", "TUPLE1"] {
        want.push(format!("portless forward x key {key}"));
    }
    for ct in ["Hit", "Miss", "None"] {
        want.push(format!("portless forward x conntrack {ct}"));
    }
    want.push("portless event Learn".into());
    for proto in [6, 17] {
        want.push(format!("{proto} gap port x FORWARD"));
    }
    let missing: Vec<&String> = want.iter().filter(|b| !bins.contains_key(*b)).collect();
    assert!(missing.is_empty(), "never reached: {missing:?}\n{bins:#?}");
    assert!(
        !bins
            .keys()
            .any(|b| b.starts_with("portless forward x key TUPLE5")),
        "a portless flow hashed by its 5-tuple: {bins:#?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_model_equals_the_reference_on_random_traffic(seed in any::<u64>()) {
        run_case(seed, 400, &mut Bins::new());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_parser_equals_the_reference_parser(seed in any::<u64>()) {
        // Every public field of the parse, including those the pipeline does not use
        // (the types differ, so their Debug renderings are compared).
        let mut rng = Rng(seed);
        for _ in 0..64 {
            let f = frame(&mut rng);
            let got = format!("{:?}", firmware_sim::parse::parse(&f));
            let want = format!("{:?}", reference::parse::parse(&f));
            prop_assert_eq!(got, want, "frame {:02x?}", f);
        }
    }

    #[test]
    fn the_checksum_sum_equals_the_reference(
        data in proptest::collection::vec(any::<u8>(), 0..100),
        initial in any::<u32>(),
        zeros in any::<bool>(),
    ) {
        let data = if zeros { vec![0u8; data.len()] } else { data };
        prop_assert_eq!(
            firmware_sim::parse::ones_complement_sum(&data, initial),
            reference::parse::ones_complement_sum(&data, initial)
        );
    }
}

/// Everything observable of two devices is equal (queues drained through the registers).
fn compare_devices(seed: u64, a: &mut ModelDevice, b: &mut ModelDevice) {
    let p = a.profile();
    for (kind, n) in [
        (CounterKind::Rule, p.rules),
        (CounterKind::Backend, p.backends),
        (CounterKind::Reason, Reason::ALL.len() as u32),
        (CounterKind::Verdict, Verdict::ALL.len() as u32),
    ] {
        for i in 0..n {
            assert_eq!(
                a.counters().get(kind, i),
                b.counters().get(kind, i),
                "seed {seed}: counter {kind:?} {i}"
            );
        }
    }
    assert_eq!(punt_queue(a), punt_queue(b), "seed {seed}: punt queue");
    assert_eq!(learn_queue(a), learn_queue(b), "seed {seed}: learn queue");
    let len = a.conntrack().len();
    for i in (0..len).step_by(32) {
        assert_eq!(
            a.conntrack_mut().take_hits(i),
            b.conntrack_mut().take_hits(i),
            "seed {seed}: hit bits {i}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_batch_path_equals_the_single_packet_path(seed in any::<u64>()) {
        // Random and mutated frames (no auto-learn: its entries appear after each call, so a
        // batch legitimately differs from single packets there).
        let mut batch = ModelDevice::from_tables(tables(), test_settings());
        let mut single = ModelDevice::from_tables(tables(), test_settings());
        // The same pre-installed connections on both (`preinstall` also fills a reference,
        // unused here).
        // Half the cases with hardware learning: a learned connection is seen by the next
        // packet, in a batch as one at a time.
        let hw_learn = seed % 2 == 0;
        for d in [&mut batch, &mut single] {
            let mut unused = RefDevice::new(tables(), test_settings(), 4096, 4);
            preinstall(&mut Rng(seed), d, &mut unused);
            d.write32(dma::CTRL, dma::Ctrl { enable: false, hw_learn }.word()).expect("reg");
        }
        let mut rng = Rng(seed ^ 0x5eed);
        let mut out = BatchOutput::new();
        let mut buf = vec![0u8; firmware_sim::action::MAX_FRAME];
        for round in 0..8 {
            // Mostly short batches; every fourth long enough that the pipeline's stages run
            // several accounting rounds apart (see `receive_batch`).
            let n = if round % 4 == 3 {
                100 + rng.below(200) as usize
            } else {
                1 + rng.below(70) as usize
            };
            let frames: Vec<Vec<u8>> = (0..n).map(|_| frame(&mut rng)).collect();
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            batch.receive_batch(&refs, &mut out);
            prop_assert_eq!(out.results.len(), n);
            for (i, f) in refs.iter().enumerate() {
                let r = single.receive(f, &mut buf).expect("MAX_FRAME buffer");
                prop_assert_eq!(&out.results[i], &r, "seed {}: frame {:02x?}", seed, f);
                prop_assert_eq!(out.frame(i), &buf[..r.out_len], "seed {}: output", seed);
            }
        }
        compare_devices(seed, &mut batch, &mut single);
    }
}

// The parsers at their corners. The traffic above is mostly well-formed packets with a few
// byte edits; these frames are header stacks built field by field around the limits of
// docs/pipeline.md §2 (tag counts, IHL and lengths, extension chains that end near the
// window's 192nd byte, fragment headers anywhere in the chain, ICMP errors whose quote is cut
// at every length or quotes something unusable), so both parsers' checks meet each boundary.

/// Folds and complements a ones'-complement sum: the checksum of `b`.
fn ip_checksum(b: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in b.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A length near `exact`: itself most of the time, else a little off or anything.
fn near(rng: &mut Rng, exact: usize) -> usize {
    match rng.below(10) {
        0 => exact.saturating_sub(1 + rng.below(8) as usize),
        1 => exact + 1 + rng.below(8) as usize,
        2 => rng.below(400) as usize,
        _ => exact,
    }
}

/// An IPv4 header (with options) over `payload`.
fn corner_ipv4(rng: &mut Rng, protocol: u8, payload: &[u8], quote: bool) -> Vec<u8> {
    let ihl = if rng.chance(60) {
        5
    } else {
        rng.below(16) as usize
    };
    let hl = (4 * ihl).max(20);
    let mut h = vec![0u8; hl];
    h[0] = if rng.chance(92) {
        0x40 | ihl as u8
    } else {
        rng.next() as u8
    };
    h[1] = rng.next() as u8;
    let total = near(rng, hl + payload.len()) as u16;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&(rng.next() as u16).to_be_bytes());
    let frag: u16 = match rng.below(8) {
        0 => 0x2000,                            // first fragment
        1 => 0x2000 | rng.below(0x2000) as u16, // middle fragment
        2 => rng.below(0x2000) as u16,          // last fragment
        3 => rng.next() as u16,                 // anything, the reserved bit too
        4 | 5 => 0x4000,                        // DF
        _ => 0,
    };
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = protocol;
    for b in &mut h[12..] {
        *b = rng.next() as u8;
    }
    // Quotes keep whatever checksum they have; outer headers usually a right one.
    if !quote && rng.chance(95) {
        let c = ip_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
    }
    h.extend_from_slice(payload);
    h
}

/// An IPv6 header with a chain of extension headers over `payload` (of protocol `upper`).
fn corner_ipv6(rng: &mut Rng, upper: u8, payload: &[u8], quote: bool) -> Vec<u8> {
    let count = if quote {
        usize::from(rng.chance(20))
    } else {
        match rng.below(10) {
            0..=3 => 0,
            4 => 5 + rng.below(2) as usize,
            _ => 1 + rng.below(4) as usize,
        }
    };
    // Built back to front: each header names the one after it.
    let mut chain: Vec<u8> = Vec::new();
    let mut next = upper;
    for _ in 0..count {
        let kind = *rng.pick(&[0u8, 43, 60, 44, 44]);
        let mut e = if kind == 44 {
            let mut e = vec![0u8; 8];
            let offset_flags: u16 = match rng.below(5) {
                0 => 1,
                1 => (rng.below(0x2000) as u16) << 3 | 1,
                2 => (rng.below(0x2000) as u16) << 3,
                3 => rng.next() as u16,
                _ => 0,
            };
            e[2..4].copy_from_slice(&offset_flags.to_be_bytes());
            e[4..8].copy_from_slice(&(rng.next() as u32).to_be_bytes());
            e
        } else {
            let units = if rng.chance(90) {
                rng.below(4) as usize
            } else {
                rng.below(24) as usize
            };
            let mut e = vec![0u8; 8 * (units + 1)];
            e[1] = units as u8;
            e
        };
        e[0] = next;
        e.extend_from_slice(&chain);
        chain = e;
        next = kind;
    }
    let mut h = vec![0u8; 40];
    h[0] = if rng.chance(94) {
        0x60 | rng.below(16) as u8
    } else {
        rng.next() as u8
    };
    h[1] = rng.next() as u8;
    let plen = near(rng, chain.len() + payload.len()) as u16;
    h[4..6].copy_from_slice(&plen.to_be_bytes());
    h[6] = next;
    h[7] = 64;
    for b in &mut h[8..40] {
        *b = rng.next() as u8;
    }
    h.extend_from_slice(&chain);
    h.extend_from_slice(payload);
    h
}

/// A transport header of `protocol` (TCP 20 bytes, UDP 8, anything else some bytes).
fn corner_transport(rng: &mut Rng, protocol: u8) -> Vec<u8> {
    let n = match protocol {
        6 => 20,
        17 => 8,
        _ => rng.below(12) as usize,
    };
    (0..n).map(|_| rng.next() as u8).collect()
}

/// An ICMP (v6: ICMPv6) message: an error quoting a packet cut anywhere, or another type.
fn corner_icmp(rng: &mut Rng, v6: bool) -> Vec<u8> {
    let ty = if v6 {
        *rng.pick(&[1u8, 2, 3, 1, 2, 3, 4, 128, 129, 0])
    } else {
        *rng.pick(&[3u8, 11, 3, 11, 0, 8, 4, 12, 5])
    };
    let mut m = vec![ty, rng.next() as u8, 0, 0, 0, 0, 5, 0xdc];
    // The quote: usually the same version, TCP or UDP.
    let quoted_v6 = if rng.chance(85) { v6 } else { !v6 };
    let qproto = *rng.pick(&[6u8, 17, 6, 17, 1, 58, 44, 0]);
    let transport = corner_transport(rng, qproto);
    let mut q = if quoted_v6 {
        corner_ipv6(rng, qproto, &transport, true)
    } else {
        corner_ipv4(rng, qproto, &transport, true)
    };
    // Routers quote at least 8 bytes past the IP header, often the whole packet; cut it
    // anywhere now and then.
    if rng.chance(40) {
        let n = rng.below(q.len() as u64 + 1) as usize;
        q.truncate(n);
    }
    m.extend_from_slice(&q);
    if rng.chance(15) {
        m.truncate(rng.below(10) as usize);
    }
    m
}

/// A frame built header by header around the parser's limits.
fn corner_frame(rng: &mut Rng) -> Vec<u8> {
    let mut f = CLIENT_MAC.to_vec();
    f.extend_from_slice(&ROUTER_MAC);
    let tags = match rng.below(20) {
        0..=8 => 0,
        9..=12 => 1,
        13..=17 => 2,
        _ => 3,
    };
    for _ in 0..tags {
        let tpid = *rng.pick(&[[0x81u8, 0x00], [0x88, 0xa8]]);
        f.extend_from_slice(&tpid);
        f.extend_from_slice(&[0, 7]);
    }
    let v6 = rng.chance(55);
    let ethertype: u16 = match rng.below(20) {
        0 => 0x0806,
        1 => rng.next() as u16,
        _ if v6 => 0x86dd,
        _ => 0x0800,
    };
    f.extend_from_slice(&ethertype.to_be_bytes());
    let protocol = if v6 {
        *rng.pick(&[6u8, 17, 58, 6, 17, 58, 1, 59, 132, 47])
    } else {
        *rng.pick(&[6u8, 17, 1, 6, 17, 1, 58, 132, 47])
    };
    let mut payload = if protocol == 1 || protocol == 58 {
        corner_icmp(rng, v6)
    } else {
        corner_transport(rng, protocol)
    };
    // Data that moves the end of the packet around the end of the window.
    let extra = match rng.below(4) {
        0 => 0,
        1 => rng.below(16) as usize,
        _ => rng.below(200) as usize,
    };
    payload.extend((0..extra).map(|i| i as u8));
    f.extend_from_slice(&if v6 {
        corner_ipv6(rng, protocol, &payload, false)
    } else {
        corner_ipv4(rng, protocol, &payload, false)
    });
    match rng.below(10) {
        0 => {
            let n = rng.below(f.len() as u64 + 1) as usize;
            f.truncate(n);
        }
        1 => f.resize(f.len().max(60), 0),
        2 => f.extend((0..rng.below(300)).map(|_| 0xa5)),
        _ => {}
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_parser_equals_the_reference_parser_at_the_corners(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        for _ in 0..64 {
            let f = corner_frame(&mut rng);
            let got = format!("{:?}", firmware_sim::parse::parse(&f));
            let want = format!("{:?}", reference::parse::parse(&f));
            prop_assert_eq!(got, want, "frame {:02x?}", f);
        }
    }
}
