//! Parser tests: frames built with etherparse (or by hand), expectations from the frame as
//! built and from the documented check order (docs/pipeline.md, "Parsing").

use crate::common;

use common::*;
use etherparse::Ipv4Header;
use firmware_sim::parse::{parse, Family, IpHeaders, Parsed, PARSE_WINDOW};
use nlb_hw::enums::Reason;
use nlb_hw::hash::addr_to_u128;

fn ip_headers(frame: &[u8]) -> IpHeaders {
    match parse(frame) {
        Ok(Parsed::Ip(h)) => h,
        other => panic!("expected an IP packet, got {other:?}"),
    }
}

fn refix_ipv4_checksum(frame: &mut [u8], l3: usize) {
    let hl = usize::from(frame[l3] & 0x0f) * 4;
    frame[l3 + 10] = 0;
    frame[l3 + 11] = 0;
    let (h, _) = Ipv4Header::from_slice(&frame[l3..]).expect("header");
    let c = h.calc_header_checksum();
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    assert!(hl >= 20);
}

#[test]
fn tcp_over_ipv4() {
    let f = tcp(
        ip("198.51.100.10"),
        40000,
        ip("203.0.113.1"),
        80,
        SYN,
        b"hello",
    );
    let h = ip_headers(&f);
    assert_eq!(h.family, Family::V4);
    assert_eq!(h.l3_offset, 14);
    assert_eq!(h.l4_offset, 34);
    assert_eq!(h.l3_end, f.len());
    assert_eq!(h.protocol, 6);
    assert_eq!(h.src, addr_to_u128(ip("198.51.100.10")));
    assert_eq!(h.dst, addr_to_u128(ip("203.0.113.1")));
    assert_eq!((h.src_port, h.dst_port), (40000, 80));
    assert!(h.has_ports);
    assert_eq!(h.tcp_flags & 0x02, 0x02, "SYN");
    assert!(!h.is_fragment);
    assert!(!h.icmp_error);
}

#[test]
fn padding_is_not_part_of_the_ip_packet() {
    let f = pad60(udp(ip("10.0.0.1"), 1, ip("10.0.0.2"), 2, b""));
    let h = ip_headers(&f);
    assert_eq!(f.len(), 60);
    assert_eq!(h.l3_end, 14 + 28);
}

#[test]
fn vlan_tags_one_and_two() {
    let f = udp_vlan(
        ip("2001:db8::1"),
        5353,
        ip("2001:db8:ffff::10"),
        443,
        b"x",
        &[10],
    );
    let h = ip_headers(&f);
    assert_eq!((h.vlan_tags, h.l3_offset, h.family), (1, 18, Family::V6));
    assert_eq!((h.src_port, h.dst_port, h.protocol), (5353, 443, 17));
    let f = udp_vlan(ip("10.1.1.1"), 7, ip("10.2.2.2"), 53, b"x", &[10, 20]);
    let h = ip_headers(&f);
    assert_eq!((h.vlan_tags, h.l3_offset), (2, 22));
    assert_eq!(h.dst_port, 53);
}

#[test]
fn a_third_tag_is_too_many() {
    let f = udp_vlan(ip("10.1.1.1"), 7, ip("10.2.2.2"), 53, b"x", &[10, 20]);
    // Insert one more 802.1Q tag after the MACs.
    let mut g = f[..12].to_vec();
    g.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    g.extend_from_slice(&f[12..]);
    assert_eq!(parse(&g), Err(Reason::TooManyVlans));
}

#[test]
fn a_cut_tag_is_truncated_l2() {
    let f = udp_vlan(ip("10.1.1.1"), 7, ip("10.2.2.2"), 53, b"x", &[10]);
    assert_eq!(parse(&f[..16]), Err(Reason::TruncatedL2));
    assert_eq!(parse(&f[..17]), Err(Reason::TruncatedL2));
    // Tag complete, IP header missing.
    assert_eq!(parse(&f[..18]), Err(Reason::TruncatedL3));
}

#[test]
fn runt_and_not_ip() {
    assert_eq!(parse(&[0u8; 13]), Err(Reason::Runt));
    assert_eq!(parse(&[]), Err(Reason::Runt));
    let mut arp = vec![0u8; 60];
    arp[12] = 0x08;
    arp[13] = 0x06;
    assert_eq!(parse(&arp), Ok(Parsed::NotIp));
}

#[test]
fn ipv4_malformations_in_check_order() {
    let good = tcp(ip("10.0.0.1"), 1000, ip("10.0.0.2"), 80, ACK, b"payload");
    // Cut inside the fixed header.
    assert_eq!(parse(&good[..14 + 19]), Err(Reason::TruncatedL3));
    // Version 6 behind EtherType IPv4.
    let mut f = good.clone();
    f[14] = 0x65;
    assert_eq!(parse(&f), Err(Reason::BadIpVersion));
    // IHL 4.
    let mut f = good.clone();
    f[14] = 0x44;
    assert_eq!(parse(&f), Err(Reason::BadIhl));
    // IHL 15 but only 20 + 27 bytes present after... make the frame end inside the options.
    let mut f = good.clone();
    f[14] = 0x4f;
    assert_eq!(parse(&f[..14 + 40]), Err(Reason::TruncatedL3));
    // Total length beyond the frame.
    let mut f = good.clone();
    let tl = u16::from_be_bytes([f[16], f[17]]) + 1;
    f[16..18].copy_from_slice(&tl.to_be_bytes());
    refix_ipv4_checksum(&mut f, 14);
    assert_eq!(parse(&f), Err(Reason::BadIpLength));
    // Total length below the header.
    let mut f = good.clone();
    f[16..18].copy_from_slice(&19u16.to_be_bytes());
    refix_ipv4_checksum(&mut f, 14);
    assert_eq!(parse(&f), Err(Reason::BadIpLength));
    // Checksum.
    let mut f = good.clone();
    f[24] ^= 0x01;
    assert_eq!(parse(&f), Err(Reason::BadIpChecksum));
    // TCP header cut by the IP length (frame keeps its bytes as padding).
    let mut f = good.clone();
    f[16..18].copy_from_slice(&(20u16 + 19).to_be_bytes());
    refix_ipv4_checksum(&mut f, 14);
    assert_eq!(parse(&f), Err(Reason::TruncatedL4));
}

#[test]
fn ipv4_options_are_skipped() {
    let f = udp(ip("10.0.0.1"), 1111, ip("10.0.0.2"), 2222, b"data");
    let (mut h, payload) = Ipv4Header::from_slice(&f[14..]).expect("ipv4");
    h.options = [1u8, 1, 1, 1, 1, 1, 1, 0][..].try_into().expect("options");
    h.set_payload_len(payload.len()).expect("len");
    h.header_checksum = h.calc_header_checksum();
    let mut g = f[..14].to_vec();
    h.write(&mut g).expect("write");
    g.extend_from_slice(payload);
    let p = ip_headers(&g);
    assert_eq!(p.l4_offset, 14 + 28);
    assert_eq!((p.src_port, p.dst_port), (1111, 2222));
}

#[test]
fn ipv4_fragments_carry_offset_and_id() {
    let f = udp(ip("10.0.0.1"), 5000, ip("10.0.0.2"), 53, &[7u8; 100]);
    let frags = ipv4_fragments(&f, 0x1234, 48);
    assert_eq!(frags.len(), 3);
    let first = ip_headers(&frags[0]);
    assert!(first.is_fragment && first.has_ports);
    assert_eq!((first.fragment_offset, first.ip_id), (0, 0x1234));
    assert_eq!(first.dst_port, 53);
    let second = ip_headers(&frags[1]);
    assert!(second.is_fragment && !second.has_ports);
    assert_eq!((second.fragment_offset, second.ip_id), (48, 0x1234));
    assert_eq!((second.src_port, second.dst_port), (0, 0));
    // A first fragment too short for the UDP header.
    let tiny = ipv4_fragments(&f, 9, 8);
    assert!(ip_headers(&tiny[0]).has_ports);
    let tiny_tcp = ipv4_fragments(
        &tcp(ip("10.0.0.1"), 1, ip("10.0.0.2"), 2, ACK, b"abc"),
        9,
        8,
    );
    assert_eq!(parse(&tiny_tcp[0]), Err(Reason::TruncatedL4));
}

#[test]
fn ipv6_extension_headers() {
    let f = tcp(ip("2001:db8::1"), 4000, ip("2001:db8::80"), 443, ACK, b"x");
    let g = ipv6_with_ext(&f, &[(0, 8), (60, 16)]);
    let h = ip_headers(&g);
    assert_eq!(h.l4_offset, 14 + 40 + 24);
    assert_eq!((h.protocol, h.src_port, h.dst_port), (6, 4000, 443));
    // Four extension headers are fine, five are too many.
    let g = ipv6_with_ext(&f, &[(0, 8), (60, 8), (43, 8), (60, 8)]);
    assert_eq!(ip_headers(&g).dst_port, 443);
    let g = ipv6_with_ext(&f, &[(0, 8), (60, 8), (43, 8), (60, 8), (60, 8)]);
    assert_eq!(parse(&g), Err(Reason::ExtChainTooLong));
    // One header reaching past the window.
    let g = ipv6_with_ext(&f, &[(60, 136)]);
    const { assert!(14 + 40 + 136 > PARSE_WINDOW - 8) };
    assert_eq!(parse(&g), Err(Reason::ExtChainTooLong));
    // A header longer than the payload length says.
    let mut g = ipv6_with_ext(&f, &[(60, 16)]);
    g[14 + 4..14 + 6].copy_from_slice(&12u16.to_be_bytes());
    assert_eq!(parse(&g), Err(Reason::BadIpLength));
    // Payload length beyond the frame.
    let mut g = f.clone();
    g[14 + 4..14 + 6].copy_from_slice(&500u16.to_be_bytes());
    assert_eq!(parse(&g), Err(Reason::BadIpLength));
    // Version 4 behind EtherType IPv6.
    let mut g = f.clone();
    g[14] = 0x46;
    assert_eq!(parse(&g), Err(Reason::BadIpVersion));
}

#[test]
fn ipv6_fragments_carry_offset_and_id() {
    let f = udp(ip("2001:db8::1"), 6000, ip("2001:db8::80"), 53, &[3u8; 64]);
    let frags = ipv6_fragments(&f, 0xdead_beef, 40);
    assert_eq!(frags.len(), 2);
    let first = ip_headers(&frags[0]);
    assert!(first.is_fragment && first.has_ports);
    assert_eq!(
        (first.ip_id, first.protocol, first.dst_port),
        (0xdead_beef, 17, 53)
    );
    let later = ip_headers(&frags[1]);
    assert!(later.is_fragment && !later.has_ports);
    assert_eq!((later.fragment_offset, later.protocol), (40, 17));
}

#[test]
fn icmp_errors_quote_their_flow() {
    // A router tells the VIP that its reply to the client was too big.
    let reply = tcp(
        ip("203.0.113.1"),
        80,
        ip("198.51.100.10"),
        40000,
        ACK,
        &[0u8; 40],
    );
    let quoted = &ip_part(&reply)[..28];
    let f = icmp4_error(
        ip("192.0.2.254"),
        ip("203.0.113.1"),
        3,
        4,
        [0, 0, 5, 0xdc],
        quoted,
    );
    let h = ip_headers(&f);
    assert!(h.icmp_error);
    let inner = h.icmp_inner.expect("inner flow");
    assert_eq!(inner.src, addr_to_u128(ip("203.0.113.1")));
    assert_eq!(inner.dst, addr_to_u128(ip("198.51.100.10")));
    assert_eq!(
        (inner.protocol, inner.src_port, inner.dst_port),
        (6, 80, 40000)
    );
    // Echo requests are not errors.
    let mut echo = Vec::new();
    etherparse::PacketBuilder::ethernet2(ROUTER_MAC, CLIENT_MAC)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .icmpv4_echo_request(1, 1)
        .write(&mut echo, b"ping")
        .expect("echo");
    let h = ip_headers(&echo);
    assert!(!h.icmp_error && h.icmp_inner.is_none());
    // An error whose quote is too short has no usable flow.
    let f = icmp4_error(
        ip("192.0.2.254"),
        ip("203.0.113.1"),
        11,
        0,
        [0; 4],
        &ip_part(&reply)[..24],
    );
    let h = ip_headers(&f);
    assert!(h.icmp_error && h.icmp_inner.is_none());
    // ICMPv6 packet too big.
    let reply6 = udp(ip("2001:db8::80"), 53, ip("2001:db8::1"), 6000, &[0u8; 16]);
    let f = icmp6_error(
        ip("2001:db8::fe"),
        ip("2001:db8::80"),
        2,
        0,
        [0, 0, 5, 0],
        ip_part(&reply6),
    );
    let h = ip_headers(&f);
    let inner = h.icmp_inner.expect("inner flow");
    assert_eq!(
        (inner.protocol, inner.src_port, inner.dst_port),
        (17, 53, 6000)
    );
}

#[test]
fn every_prefix_of_valid_frames_parses_without_panic() {
    let frames = [
        tcp_vlan(ip("10.0.0.1"), 1, ip("10.0.0.2"), 2, ACK, b"abc", &[1, 2]),
        ipv6_with_ext(
            &udp(ip("2001:db8::1"), 1, ip("2001:db8::2"), 2, b"abc"),
            &[(0, 8), (44, 8)],
        ),
        icmp4_error(ip("192.0.2.1"), ip("10.0.0.2"), 3, 4, [0; 4], &[0x45; 28]),
    ];
    for f in &frames {
        for n in 0..=f.len() {
            let _ = parse(&f[..n]);
        }
    }
}
