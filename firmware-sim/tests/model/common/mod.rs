//! Test helpers: frames built with etherparse (or by hand where etherparse has no builder) and
//! table banks built by hand from the nlb-hw layouts (the compiler does not exist yet).
#![allow(dead_code)]

pub mod hostmem;

use etherparse::{IpFragOffset, Ipv4Header, PacketBuilder};
use nlb_hw::enums::{Affinity, Delivery};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::layouts::{
    AclPrefix, BackendEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{table_index, FlowKey, Profile, Tables};
use std::net::IpAddr;

pub const CLIENT_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0xc1];
pub const ROUTER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0xee];

pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

pub fn mac_u64(m: [u8; 6]) -> u64 {
    m.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b))
}

pub fn u64_mac(m: u64) -> [u8; 6] {
    let b = m.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// TCP flags of a test segment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags {
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
}

pub const ACK: Flags = Flags {
    syn: false,
    ack: true,
    fin: false,
    rst: false,
};
pub const SYN: Flags = Flags {
    syn: true,
    ack: false,
    fin: false,
    rst: false,
};

fn base(
    src: IpAddr,
    dst: IpAddr,
    vlans: &[u16],
) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    let eth = PacketBuilder::ethernet2(ROUTER_MAC, CLIENT_MAC);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => match vlans {
            [] => eth.ipv4(s.octets(), d.octets(), 64),
            [a] => eth
                .single_vlan(etherparse::VlanId::try_new(*a).expect("vlan"))
                .ipv4(s.octets(), d.octets(), 64),
            [a, b, ..] => eth
                .double_vlan(
                    etherparse::VlanId::try_new(*a).expect("vlan"),
                    etherparse::VlanId::try_new(*b).expect("vlan"),
                )
                .ipv4(s.octets(), d.octets(), 64),
        },
        (IpAddr::V6(s), IpAddr::V6(d)) => match vlans {
            [] => eth.ipv6(s.octets(), d.octets(), 64),
            [a] => eth
                .single_vlan(etherparse::VlanId::try_new(*a).expect("vlan"))
                .ipv6(s.octets(), d.octets(), 64),
            [a, b, ..] => eth
                .double_vlan(
                    etherparse::VlanId::try_new(*a).expect("vlan"),
                    etherparse::VlanId::try_new(*b).expect("vlan"),
                )
                .ipv6(s.octets(), d.octets(), 64),
        },
        _ => panic!("mixed address families in a test frame"),
    }
}

pub fn tcp_vlan(
    src: IpAddr,
    sport: u16,
    dst: IpAddr,
    dport: u16,
    f: Flags,
    payload: &[u8],
    vlans: &[u16],
) -> Vec<u8> {
    let mut b = base(src, dst, vlans).tcp(sport, dport, 1000, 65535);
    if f.syn {
        b = b.syn();
    }
    if f.ack {
        b = b.ack(1);
    }
    if f.fin {
        b = b.fin();
    }
    if f.rst {
        b = b.rst();
    }
    let mut out = Vec::new();
    b.write(&mut out, payload).expect("build tcp");
    out
}

pub fn tcp(src: IpAddr, sport: u16, dst: IpAddr, dport: u16, f: Flags, payload: &[u8]) -> Vec<u8> {
    tcp_vlan(src, sport, dst, dport, f, payload, &[])
}

pub fn udp_vlan(
    src: IpAddr,
    sport: u16,
    dst: IpAddr,
    dport: u16,
    payload: &[u8],
    vlans: &[u16],
) -> Vec<u8> {
    let mut out = Vec::new();
    base(src, dst, vlans)
        .udp(sport, dport)
        .write(&mut out, payload)
        .expect("build udp");
    out
}

pub fn udp(src: IpAddr, sport: u16, dst: IpAddr, dport: u16, payload: &[u8]) -> Vec<u8> {
    udp_vlan(src, sport, dst, dport, payload, &[])
}

/// An IP packet of protocol `proto` with `payload` right after the IP header (GRE, ESP, SCTP,
/// any protocol number: the pipeline reads no ports of them).
pub fn raw_ip_vlan(src: IpAddr, dst: IpAddr, proto: u8, payload: &[u8], vlans: &[u16]) -> Vec<u8> {
    let mut out = Vec::new();
    base(src, dst, vlans)
        .write(&mut out, etherparse::IpNumber(proto), payload)
        .expect("build raw ip");
    out
}

/// An ICMP echo request (IPv4) or ICMPv6 echo request (IPv6): not an error, so an ordinary
/// portless packet of protocol 1 / 58.
pub fn echo_vlan(src: IpAddr, dst: IpAddr, id: u16, payload: &[u8], vlans: &[u16]) -> Vec<u8> {
    let mut out = Vec::new();
    let b = base(src, dst, vlans);
    if src.is_ipv6() {
        b.icmpv6_echo_request(id, 1).write(&mut out, payload)
    } else {
        b.icmpv4_echo_request(id, 1).write(&mut out, payload)
    }
    .expect("build echo");
    out
}

/// Pads a frame to the 60-byte Ethernet minimum as a NIC receives it (without FCS).
pub fn pad60(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// The IP packet of a frame built by this module (no VLAN tags).
pub fn ip_part(frame: &[u8]) -> &[u8] {
    &frame[14..]
}

/// Splits the IP payload of an untagged IPv4 frame into fragments of `chunk` bytes (a multiple
/// of 8), returning whole frames.
pub fn ipv4_fragments(frame: &[u8], id: u16, chunk: usize) -> Vec<Vec<u8>> {
    let (hdr, payload) = Ipv4Header::from_slice(&frame[14..]).expect("ipv4 frame");
    let payload = &payload[..usize::from(hdr.total_len) - hdr.header_len()];
    let mut out = Vec::new();
    let mut off = 0;
    while off < payload.len() {
        let end = (off + chunk).min(payload.len());
        let mut h = hdr.clone();
        h.identification = id;
        h.dont_fragment = false;
        h.more_fragments = end < payload.len();
        h.fragment_offset = IpFragOffset::try_new((off / 8) as u16).expect("offset");
        h.set_payload_len(end - off).expect("len");
        h.header_checksum = h.calc_header_checksum();
        let mut f = frame[..14].to_vec();
        h.write(&mut f).expect("write");
        f.extend_from_slice(&payload[off..end]);
        out.push(f);
        off = end;
    }
    out
}

/// Splits the IP payload of an untagged IPv6 frame (no extension headers) into fragments
/// with a fragment header, `chunk` bytes each (a multiple of 8).
pub fn ipv6_fragments(frame: &[u8], id: u32, chunk: usize) -> Vec<Vec<u8>> {
    let ip = &frame[14..];
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let nh = ip[6];
    let payload = &ip[40..40 + plen];
    let mut out = Vec::new();
    let mut off = 0;
    while off < payload.len() {
        let end = (off + chunk).min(payload.len());
        let mut f = frame[..14].to_vec();
        let mut h = ip[..40].to_vec();
        let new_plen = (8 + end - off) as u16;
        h[4..6].copy_from_slice(&new_plen.to_be_bytes());
        h[6] = 44;
        f.extend_from_slice(&h);
        let more = u16::from(end < payload.len());
        let fo = ((off / 8) as u16) << 3 | more;
        f.extend_from_slice(&[nh, 0]);
        f.extend_from_slice(&fo.to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&payload[off..end]);
        out.push(f);
        off = end;
    }
    out
}

/// Inserts IPv6 extension headers (each `(type, total length in bytes)`, filled with PadN
/// style zeros) before the upper-layer header of an untagged IPv6 frame.
pub fn ipv6_with_ext(frame: &[u8], exts: &[(u8, usize)]) -> Vec<u8> {
    let ip = &frame[14..];
    let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let mut nh = ip[6];
    let mut chain = Vec::new();
    for &(ty, len) in exts.iter().rev() {
        let mut h = vec![0u8; len];
        h[0] = nh;
        h[1] = (len / 8 - 1) as u8;
        if ty == 44 {
            h.truncate(8);
            h[1] = 0;
        }
        let mut c = h;
        c.extend_from_slice(&chain);
        chain = c;
        nh = ty;
    }
    let mut f = frame[..14].to_vec();
    let mut h = ip[..40].to_vec();
    h[4..6].copy_from_slice(&((plen + chain.len()) as u16).to_be_bytes());
    h[6] = nh;
    f.extend_from_slice(&h);
    f.extend_from_slice(&chain);
    f.extend_from_slice(&ip[40..40 + plen]);
    f
}

/// An ICMPv4 error (type, code) from `router` to `to`, quoting `quoted` (an IP packet).
pub fn icmp4_error(
    router: IpAddr,
    to: IpAddr,
    ty: u8,
    code: u8,
    rest: [u8; 4],
    quoted: &[u8],
) -> Vec<u8> {
    let (IpAddr::V4(r), IpAddr::V4(t)) = (router, to) else {
        panic!("icmp4 needs IPv4 addresses")
    };
    let mut out = Vec::new();
    PacketBuilder::ethernet2(ROUTER_MAC, CLIENT_MAC)
        .ipv4(r.octets(), t.octets(), 64)
        .icmpv4_raw(ty, code, rest)
        .write(&mut out, quoted)
        .expect("build icmp");
    out
}

/// An ICMPv6 error (type, code) from `router` to `to`, quoting `quoted`.
pub fn icmp6_error(
    router: IpAddr,
    to: IpAddr,
    ty: u8,
    code: u8,
    rest: [u8; 4],
    quoted: &[u8],
) -> Vec<u8> {
    let (IpAddr::V6(r), IpAddr::V6(t)) = (router, to) else {
        panic!("icmp6 needs IPv6 addresses")
    };
    let mut out = Vec::new();
    PacketBuilder::ethernet2(ROUTER_MAC, CLIENT_MAC)
        .ipv6(r.octets(), t.octets(), 64)
        .icmpv6_raw(ty, code, rest)
        .write(&mut out, quoted)
        .expect("build icmp6");
    out
}

// ---------------------------------------------------------------------------------------------
// Tables built by hand.
// ---------------------------------------------------------------------------------------------

/// A backend of a hand-built bank.
#[derive(Debug, Clone, Copy)]
pub struct TestBackend {
    pub addr: IpAddr,
    pub mac: u64,
}

/// A pool of a hand-built bank; its Maglev slice is filled round-robin over `backends`
/// (the test only needs *some* slot contents; expectations read the slots back).
#[derive(Debug, Clone)]
pub struct TestPool {
    pub affinity: Affinity,
    pub delivery: Delivery,
    pub track: bool,
    /// Backend ids.
    pub backends: Vec<u16>,
    /// Slice size (prime).
    pub maglev_size: u32,
}

/// A rule of a hand-built bank.
#[derive(Debug, Clone)]
pub struct TestRule {
    pub vip: IpAddr,
    pub protocol: u8,
    pub ports: (u16, u16),
    pub pool: u16,
    /// Source allow-list (addr, prefix length in the address's own family).
    pub acl: Vec<(IpAddr, u8)>,
}

/// Builds a bank. Rules get ids in order; VIP entries are placed in the bucket the hash
/// formula gives (computed here, from nlb_hw's flow hash), first free way.
pub fn build_tables(
    profile: &'static Profile,
    backends: &[(u16, TestBackend)],
    pools: &[(u16, TestPool)],
    rules: &[TestRule],
) -> Tables {
    let mut t = Tables::empty(profile);
    for (id, b) in backends {
        t.backends[usize::from(*id)] = BackendEntry {
            valid: true,
            is_ipv6: b.addr.is_ipv6(),
            addr: addr_to_u128(b.addr),
            mac: b.mac,
        };
    }
    let mut next_slot = 0u32;
    for (id, p) in pools {
        let base = next_slot;
        for i in 0..p.maglev_size {
            let be = if p.backends.is_empty() {
                0
            } else {
                p.backends[(i as usize) % p.backends.len()]
            };
            t.maglev[(base + i) as usize] = MaglevSlot { backend: be };
        }
        next_slot += p.maglev_size;
        t.pools[usize::from(*id)] = PoolEntry {
            valid: true,
            affinity: p.affinity,
            delivery: p.delivery,
            maglev_base: base,
            maglev_size: if p.backends.is_empty() {
                0
            } else {
                p.maglev_size
            },
            track: p.track,
            idle_timeout: 60,
            ..PoolEntry::default()
        };
    }
    for (rid, r) in rules.iter().enumerate() {
        let rid = rid as u16;
        t.rules[usize::from(rid)] = RuleEntry {
            valid: true,
            acl_enabled: !r.acl.is_empty(),
            pool: r.pool,
        };
        for (i, (a, len)) in r.acl.iter().enumerate() {
            let len = if a.is_ipv4() { 96 + len } else { *len };
            t.acl[usize::from(rid)].prefix[i] = AclPrefix {
                valid: true,
                prefix_len: len,
                addr: addr_to_u128(*a),
            };
        }
        let key = FlowKey::vip(r.protocol, r.vip);
        let bucket = table_index(key.hash(), profile.vip_buckets) as usize;
        let ways = profile.vip_ways as usize;
        let vip = addr_to_u128(r.vip);
        let mut placed = false;
        for w in 0..ways {
            let e = &mut t.vip[bucket * ways + w];
            if e.valid && e.addr == vip && e.protocol == r.protocol {
                let s = e
                    .slot
                    .iter_mut()
                    .find(|s| !s.valid)
                    .expect("free port slot");
                *s = PortSlot {
                    valid: true,
                    port_lo: r.ports.0,
                    port_hi: r.ports.1,
                    rule: rid,
                };
                placed = true;
                break;
            }
        }
        if !placed {
            let w = (0..ways)
                .find(|w| !t.vip[bucket * ways + w].valid)
                .expect("free VIP way");
            let mut e = VipEntry {
                valid: true,
                protocol: r.protocol,
                addr: vip,
                ..VipEntry::default()
            };
            e.slot[0] = PortSlot {
                valid: true,
                port_lo: r.ports.0,
                port_hi: r.ports.1,
                rule: rid,
            };
            t.vip[bucket * ways + w] = e;
        }
    }
    t
}

/// The backend the Maglev formula picks for `key` in `pool` of `t` (computed from the
/// documented formula, independently of the pipeline code).
pub fn maglev_pick(t: &Tables, pool: u16, key: FlowKey) -> u16 {
    let p = &t.pools[usize::from(pool)];
    let slot = p.maglev_base + table_index(key.hash(), p.maglev_size);
    t.maglev[slot as usize].backend
}

// ---------------------------------------------------------------------------------------------
// Checking emitted frames with an independent decoder (etherparse).
// ---------------------------------------------------------------------------------------------

use etherparse::{LinkSlice, NetSlice, SlicedPacket, TransportSlice};
use nlb_hw::NicSettings;

/// The settings the tests run with.
pub fn test_settings() -> NicSettings {
    NicSettings {
        default_action: nlb_hw::enums::DefaultAction::Pass,
        local_mac: 0x02_00_00_00_00_01,
        gue_port: 6080,
        outer_src_v4: 0x0aff_0000, // 10.255.0.0/16
        outer_src_v4_len: 16,
        outer_src_v6: 0x2001_0db8_00ff_0000_0000_0000_0000_0000, // 2001:db8:ff::/64
        outer_src_v6_len: 64,
    }
}

/// Where the IP packet of a frame is, according to etherparse: (offset, length).
pub fn ip_span(frame: &[u8]) -> (usize, usize) {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse decodes the input");
    let l3 = 14 + 4 * p.link_exts.len();
    let len = match p.net.expect("IP packet") {
        NetSlice::Ipv4(v4) => usize::from(v4.header().total_len()),
        NetSlice::Ipv6(v6) => 40 + usize::from(v6.header().payload_length()),
        NetSlice::Arp(_) => panic!("not IP"),
    };
    (l3, len)
}

/// Decodes a forwarded frame with etherparse and checks it against the input, the backend
/// and the delivery: MACs, VLAN tags, outer headers, lengths, checksums, inner packet.
pub fn verify_forwarded(
    input: &[u8],
    output: &[u8],
    delivery: Delivery,
    backend: &BackendEntry,
    s: &NicSettings,
) {
    let p = SlicedPacket::from_ethernet(output).expect("etherparse decodes the output");
    let Some(LinkSlice::Ethernet2(eth)) = &p.link else {
        panic!("no Ethernet II header")
    };
    assert_eq!(
        eth.destination(),
        u64_mac(backend.mac),
        "dst MAC = backend's"
    );
    assert_eq!(eth.source(), u64_mac(s.local_mac), "src MAC = NIC's");
    let inp = SlicedPacket::from_ethernet(input).expect("etherparse decodes the input");
    assert_eq!(p.link_exts.len(), inp.link_exts.len(), "VLAN tags kept");
    let l2 = 14 + 4 * p.link_exts.len();
    assert_eq!(
        &output[12..l2 - 2],
        &input[12..l2 - 2],
        "VLAN tags unchanged"
    );
    if delivery == Delivery::L2Dsr {
        assert_eq!(output.len(), input.len());
        assert_eq!(
            &output[12..],
            &input[12..],
            "everything after the MACs unchanged"
        );
        return;
    }
    let (il3, ilen) = ip_span(input);
    let inner_expected = &input[il3..il3 + ilen];
    let inner_v6 = inner_expected[0] >> 4 == 6;
    let want_proto = match delivery {
        Delivery::Gue => 17,
        _ if inner_v6 => 41,
        _ => 4,
    };
    let payload = match p.net.as_ref().expect("outer IP") {
        NetSlice::Ipv4(v4) => {
            assert!(!backend.is_ipv6, "outer family is the backend's");
            let h = v4.header().to_header();
            assert_eq!(
                h.calc_header_checksum(),
                h.header_checksum,
                "outer IPv4 checksum"
            );
            assert_eq!(
                usize::from(h.total_len),
                output.len() - l2,
                "outer total length"
            );
            assert_eq!(h.time_to_live, 64);
            assert_eq!(h.protocol.0, want_proto);
            assert_eq!(
                u32::from_be_bytes(h.destination),
                backend.addr as u32,
                "outer dst"
            );
            let src = u32::from_be_bytes(h.source);
            let len = u32::from(s.outer_src_v4_len);
            if len > 0 {
                assert_eq!(
                    src >> (32 - len),
                    s.outer_src_v4 >> (32 - len),
                    "outer src prefix"
                );
            }
            if !inner_v6 {
                let inner_df = input[il3 + 6] & 0x40 != 0;
                assert_eq!(h.dont_fragment, inner_df, "DF copied");
            }
            if delivery == Delivery::Gue {
                let Some(TransportSlice::Udp(u)) = &p.transport else {
                    panic!("GUE without UDP")
                };
                assert_eq!(u.checksum(), 0, "UDP checksum 0 over IPv4");
                assert_eq!(u.destination_port(), s.gue_port);
                assert!(u.source_port() >= 0xc000);
                assert_eq!(usize::from(u.length()), 8 + ilen);
                u.payload().to_vec()
            } else {
                v4.payload().payload.to_vec()
            }
        }
        NetSlice::Ipv6(v6) => {
            assert!(backend.is_ipv6, "outer family is the backend's");
            let h = v6.header().to_header();
            assert_eq!(usize::from(h.payload_length), output.len() - l2 - 40);
            assert_eq!(h.hop_limit, 64);
            assert_eq!(h.next_header.0, want_proto);
            assert_eq!(
                u128::from_be_bytes(h.destination),
                backend.addr,
                "outer dst"
            );
            let src = u128::from_be_bytes(h.source);
            let len = u32::from(s.outer_src_v6_len);
            if len > 0 {
                assert_eq!(
                    src >> (128 - len),
                    s.outer_src_v6 >> (128 - len),
                    "outer src prefix"
                );
            }
            if delivery == Delivery::Gue {
                let Some(TransportSlice::Udp(u)) = &p.transport else {
                    panic!("GUE without UDP")
                };
                let want = u
                    .to_header()
                    .calc_checksum_ipv6_raw(h.source, h.destination, u.payload())
                    .expect("checksum");
                assert_eq!(u.checksum(), want, "UDP checksum over IPv6");
                assert_ne!(u.checksum(), 0);
                assert_eq!(u.destination_port(), s.gue_port);
                assert_eq!(usize::from(u.length()), 8 + ilen);
                u.payload().to_vec()
            } else {
                v6.payload().payload.to_vec()
            }
        }
        NetSlice::Arp(_) => panic!("ARP out"),
    };
    assert_eq!(payload, inner_expected, "inner packet unchanged");
}

// ---------------------------------------------------------------------------------------------
// The standard scenario of the pipeline tests.
// ---------------------------------------------------------------------------------------------

use firmware_sim::{ModelDevice, PacketResult};

pub const VIP4: &str = "203.0.113.1";
pub const VIP6: &str = "2001:db8:ffff::10";
pub const MULTI_UDP_VIP: &str = "198.18.0.1";
pub const ACL_VIP4: &str = "198.18.0.2";
pub const ACL_VIP6: &str = "2001:db8:ffff::22";
pub const EMPTY_VIP: &str = "198.18.0.3";
pub const SRC_ONLY_VIP: &str = "198.18.0.4";
pub const FRAG_VIP4: &str = "198.18.0.5";

pub fn test_backends() -> Vec<(u16, TestBackend)> {
    let mut v = Vec::new();
    for id in 1..=4u16 {
        v.push((
            id,
            TestBackend {
                addr: ip(&format!("10.0.0.{id}")),
                mac: 0x02_00_00_00_01_00 + u64::from(id),
            },
        ));
    }
    for id in 11..=13u16 {
        v.push((
            id,
            TestBackend {
                addr: ip(&format!("2001:db8:1::{id}")),
                mac: 0x02_00_00_00_02_00 + u64::from(id),
            },
        ));
    }
    v
}

pub fn pool(
    affinity: Affinity,
    delivery: Delivery,
    track: bool,
    backends: &[u16],
    m: u32,
) -> TestPool {
    TestPool {
        affinity,
        delivery,
        track,
        backends: backends.to_vec(),
        maglev_size: m,
    }
}

pub fn rule(vip: &str, protocol: u8, ports: (u16, u16), pool: u16) -> TestRule {
    TestRule {
        vip: ip(vip),
        protocol,
        ports,
        pool,
        acl: Vec::new(),
    }
}

/// Pools: 0 NONE/L2_DSR/track v4 {1..4}; 1 CLIENT_IP_PROTO/IPIP/track {1,2}; 2 CLIENT_IP/GUE
/// {3,4}; 3 NONE/GUE/track v6 {11,12,13}; 4 NONE/IPIP v6 {11,12}; 5 empty;
/// 6 CLIENT_IP_NO_DESTINATION/L2_DSR {1..4}.
/// Rules (ids in order): 0 VIP4 TCP 80 → 0; 1 VIP4 TCP 443 → 1; 2 VIP4 UDP 53 → 2;
/// 3 VIP4 TCP 8000-8080 → 0; 4 VIP6 TCP 443 → 3; 5 VIP6 UDP all → 4;
/// 6 MULTI UDP 1000-1999 → 1; 7 MULTI UDP 2000-2999 → 2; 8 ACL_VIP4 TCP 22 → 0 from
/// 192.0.2.0/24; 9 ACL_VIP6 TCP 22 → 3 from 2001:db8:aaaa::/48; 10 EMPTY TCP 80 → 5;
/// 11 SRC_ONLY TCP 80 → 6; 12 FRAG_VIP4 UDP all → 0.
pub fn standard_tables() -> Tables {
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
    ];
    build_tables(profile, &test_backends(), &pools, &rules)
}

pub fn standard_device() -> ModelDevice {
    ModelDevice::from_tables(standard_tables(), test_settings())
}

/// Receives one frame; returns the result and the output frame.
pub fn send(d: &mut ModelDevice, frame: &[u8]) -> (PacketResult, Vec<u8>) {
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    let r = d
        .receive(frame, &mut out)
        .expect("output buffer is MAX_FRAME");
    out.truncate(r.out_len);
    (r, out)
}

/// Sends a frame, expects FORWARD and checks the emitted frame with etherparse.
pub fn send_checked(d: &mut ModelDevice, frame: &[u8]) -> PacketResult {
    let (r, out) = send(d, frame);
    assert_eq!(r.verdict, nlb_hw::enums::Verdict::Forward, "{r:?}");
    let t = d.bank(r.bank);
    let pool = t.pools[usize::from(r.pool.expect("pool"))];
    let be = t.backends[usize::from(r.backend.expect("backend"))];
    verify_forwarded(frame, &out, pool.delivery, &be, d.settings());
    r
}
