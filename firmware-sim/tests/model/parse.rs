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

// What §2 says and the tests above do not reach: every descriptor field of the IP header
// (checked against etherparse's decoding of the same bytes), the order of the window and
// length checks in an extension chain, fragment headers that end or repeat in the chain, and
// each condition on an ICMP error and its quote.

/// Checks `h` against what etherparse decodes of the same frame: tags, lengths, addresses,
/// TOS / traffic class, fragment fields, the upper-layer protocol and its offset, and the
/// ports and TCP flags when etherparse decodes the transport header.
fn assert_decodes_like_etherparse(frame: &[u8], h: &IpHeaders) {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse decodes the frame");
    let l3 = 14 + 4 * p.link_exts.len();
    assert_eq!(
        (usize::from(h.vlan_tags), h.l3_offset),
        (p.link_exts.len(), l3)
    );
    match p.net.as_ref().expect("an IP packet") {
        NetSlice::Ipv4(v4) => {
            let x = v4.header();
            assert_eq!(h.family, Family::V4);
            assert_eq!(h.l3_end, l3 + usize::from(x.total_len()));
            assert_eq!(h.l4_offset, l3 + 4 * usize::from(x.ihl()));
            assert_eq!(h.tos, x.dcp().value() << 2 | x.ecn().value());
            assert_eq!(h.dont_fragment, x.dont_fragment());
            let offset = x.fragments_offset().value() * 8;
            assert_eq!(h.fragment_offset, offset);
            assert_eq!(h.is_fragment, x.more_fragments() || offset != 0);
            assert_eq!(h.ip_id, u32::from(x.identification()));
            assert_eq!(h.protocol, x.protocol().0);
            assert_eq!(h.src, addr_to_u128(x.source_addr().into()));
            assert_eq!(h.dst, addr_to_u128(x.destination_addr().into()));
        }
        NetSlice::Ipv6(v6) => {
            let x = v6.header();
            assert_eq!(h.family, Family::V6);
            assert_eq!(h.l3_end, l3 + 40 + usize::from(x.payload_length()));
            assert_eq!(h.l4_offset, l3 + 40 + v6.extensions().slice().len());
            assert_eq!(h.tos, x.traffic_class());
            assert!(h.dont_fragment, "IPv6 is never fragmented on the way");
            // The last fragment header of the chain gives the fragment fields; none, zeros.
            let (mut offset, mut more, mut id) = (0, false, 0);
            for e in v6.extensions().clone() {
                if let etherparse::Ipv6ExtensionSlice::Fragment(f) = e {
                    (offset, more, id) = (
                        f.fragment_offset().value() * 8,
                        f.more_fragments(),
                        f.identification(),
                    );
                }
            }
            assert_eq!((h.fragment_offset, h.ip_id), (offset, id));
            assert_eq!(h.is_fragment, more || offset != 0);
            assert_eq!(h.protocol, v6.payload().ip_number.0);
            assert_eq!(h.src, addr_to_u128(x.source_addr().into()));
            assert_eq!(h.dst, addr_to_u128(x.destination_addr().into()));
        }
        NetSlice::Arp(_) => panic!("ARP"),
    }
    match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            assert!(h.has_ports);
            assert_eq!(
                (h.src_port, h.dst_port),
                (t.source_port(), t.destination_port())
            );
            assert_eq!(h.tcp_flags, t.slice()[13]);
        }
        Some(TransportSlice::Udp(u)) => {
            assert!(h.has_ports);
            assert_eq!(
                (h.src_port, h.dst_port),
                (u.source_port(), u.destination_port())
            );
            assert_eq!(h.tcp_flags, 0, "flags are TCP's only");
        }
        _ => {}
    }
}

/// Rewrites the flags / fragment-offset word of the untagged IPv4 frame's header, and its
/// checksum (summed here: etherparse's header type has no place for the reserved flag bit).
fn set_ipv4_flags_offset(f: &mut [u8], word: u16) {
    f[14 + 6..14 + 8].copy_from_slice(&word.to_be_bytes());
    let hl = usize::from(f[14] & 0x0f) * 4;
    f[14 + 10..14 + 12].fill(0);
    let mut sum: u32 = f[14..14 + hl]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[14 + 10..14 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

#[test]
fn ipv4_tos_flags_offset_and_id_as_etherparse_reads_them() {
    let mut h4 = Ipv4Header::new(
        0,
        64,
        etherparse::IpNumber::TCP,
        [192, 0, 2, 1],
        [203, 0, 113, 1],
    )
    .expect("header");
    h4.dscp = etherparse::IpDscp::try_new(46).expect("dscp");
    h4.ecn = etherparse::IpEcn::try_new(1).expect("ecn");
    h4.identification = 0xbeef;
    h4.dont_fragment = true;
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2(ROUTER_MAC, CLIENT_MAC)
        .ip(etherparse::IpHeaders::Ipv4(h4, Default::default()))
        .tcp(4242, 443, 1, 1000)
        .fin()
        .ack(9)
        .write(&mut f, b"bye")
        .expect("build");
    // The builder keeps the header's checksum field as given (0) with an explicit header.
    refix_ipv4_checksum(&mut f, 14);
    let h = ip_headers(&f);
    assert_decodes_like_etherparse(&f, &h);
    assert_eq!(
        (h.tos, h.dont_fragment, h.ip_id),
        (46 << 2 | 1, true, 0xbeef)
    );
    assert_eq!(h.tcp_flags, 0x11, "FIN and ACK, the whole flags byte");

    // The largest offset (0x1FFF · 8 bytes) of a last fragment, and the reserved flag bit,
    // which no field reflects.
    let mut f = udp(ip("10.0.0.1"), 1, ip("10.0.0.2"), 2, &[0u8; 16]);
    set_ipv4_flags_offset(&mut f, 0x8000 | 0x1fff);
    let h = ip_headers(&f);
    assert_decodes_like_etherparse(&f, &h);
    assert_eq!((h.fragment_offset, h.is_fragment), (65528, true));
    assert!(!h.dont_fragment && !h.has_ports && h.src_port == 0);
    // MF alone: a first fragment, ports read.
    set_ipv4_flags_offset(&mut f, 0x2000);
    let h = ip_headers(&f);
    assert_decodes_like_etherparse(&f, &h);
    assert!(h.is_fragment && h.has_ports && h.fragment_offset == 0);
}

#[test]
fn ipv6_traffic_class_and_fields_without_a_fragment_header() {
    let mut f = udp(ip("2001:db8::1"), 5353, ip("2001:db8::2"), 53, b"q");
    // Traffic class 0xb8 between the version and the flow label.
    f[14] = 0x6b;
    f[15] = 0x80 | (f[15] & 0x0f);
    let h = ip_headers(&f);
    assert_decodes_like_etherparse(&f, &h);
    assert_eq!(h.tos, 0xb8);
    assert!(h.dont_fragment, "IPv6 is taken as DF");
    assert_eq!((h.is_fragment, h.fragment_offset, h.ip_id), (false, 0, 0));
    assert_eq!(h.tcp_flags, 0);
}

#[test]
fn vlan_tags_of_either_tpid_in_any_order() {
    let f = udp(ip("10.1.1.1"), 7, ip("10.2.2.2"), 53, b"x");
    for tpids in [[0x8100u16, 0x88a8], [0x88a8, 0x8100], [0x88a8, 0x88a8]] {
        let mut g = f[..12].to_vec();
        for (i, t) in tpids.iter().enumerate() {
            g.extend_from_slice(&t.to_be_bytes());
            g.extend_from_slice(&[0, 10 + i as u8]);
        }
        g.extend_from_slice(&f[12..]);
        let h = ip_headers(&g);
        assert_decodes_like_etherparse(&g, &h);
        assert_eq!((h.vlan_tags, h.l3_offset, h.dst_port), (2, 22, 53));
    }
}

/// Offset of the first extension header of an untagged IPv6 frame.
const EXT0: usize = 14 + 40;

/// Sets the IPv6 payload length of an untagged frame.
fn set_payload_length(f: &mut [u8], len: usize) {
    f[14 + 4..14 + 6].copy_from_slice(&(len as u16).to_be_bytes());
}

#[test]
fn the_window_ends_the_extension_chain_before_the_length_does() {
    let u = udp(ip("2001:db8::1"), 1, ip("2001:db8::2"), 2, &[0u8; 64]);
    let t = tcp(ip("2001:db8::1"), 1, ip("2001:db8::2"), 2, ACK, &[0u8; 64]);
    // A chain ending at 182: UDP's 8 bytes fit the window, TCP's 20 do not.
    let g = ipv6_with_ext(&u, &[(60, 128)]);
    let h = ip_headers(&g);
    assert_decodes_like_etherparse(&g, &h);
    assert_eq!((h.l4_offset, h.dst_port), (EXT0 + 128, 2));
    let g = ipv6_with_ext(&t, &[(60, 128)]);
    assert_eq!(parse(&g), Err(Reason::ExtChainTooLong));
    // Whole in the frame but cut by the payload length: the window is checked first.
    let mut g = ipv6_with_ext(&t, &[(60, 128)]);
    set_payload_length(&mut g, 128 + 10);
    assert_eq!(parse(&g), Err(Reason::ExtChainTooLong));
    let mut g = ipv6_with_ext(&u, &[(60, 128)]);
    set_payload_length(&mut g, 128 + 7);
    assert_eq!(parse(&g), Err(Reason::TruncatedL4));
    // A header starting at 190 (its first 8 bytes past 192) where the packet also ends: the
    // window's check comes before the length's.
    let mut g = ipv6_with_ext(&u, &[(60, 136), (60, 8)]);
    set_payload_length(&mut g, 136);
    assert_eq!(parse(&g), Err(Reason::ExtChainTooLong));
    // Inside the window, a header starting at the packet's end, or reaching past it.
    let mut g = ipv6_with_ext(&u, &[(0, 8), (60, 8)]);
    set_payload_length(&mut g, 12);
    assert_eq!(parse(&g), Err(Reason::BadIpLength));
    let mut g = ipv6_with_ext(&u, &[(0, 8), (60, 16)]);
    set_payload_length(&mut g, 8 + 12);
    assert_eq!(parse(&g), Err(Reason::BadIpLength));
    // A hop-by-hop header reaching both past the window and past the packet: window first.
    let mut g = ipv6_with_ext(&u, &[(0, 160)]);
    set_payload_length(&mut g, 100);
    assert_eq!(parse(&g), Err(Reason::ExtChainTooLong));
}

/// Writes the offset/flags word and identification of the fragment header at `at`.
fn set_fragment(f: &mut [u8], at: usize, offset_bytes: u16, more: bool, id: u32) {
    f[at + 2..at + 4].copy_from_slice(&(offset_bytes | u16::from(more)).to_be_bytes());
    f[at + 4..at + 8].copy_from_slice(&id.to_be_bytes());
}

#[test]
fn ipv6_fragment_headers_end_or_repeat_in_the_chain() {
    let u = udp(ip("2001:db8::1"), 7000, ip("2001:db8::2"), 53, &[0u8; 64]);
    // An atomic fragment (offset 0, M clear): a whole packet, with its identification.
    let mut g = ipv6_with_ext(&u, &[(44, 8)]);
    set_fragment(&mut g, EXT0, 0, false, 0x0102_0304);
    let h = ip_headers(&g);
    assert_decodes_like_etherparse(&g, &h);
    assert_eq!(
        (h.is_fragment, h.ip_id, h.dst_port),
        (false, 0x0102_0304, 53)
    );

    // A second fragment header replaces all the first one said: offset, flag and id.
    let mut g = ipv6_with_ext(&u, &[(44, 8), (60, 8), (44, 8)]);
    set_fragment(&mut g, EXT0, 0, true, 1);
    set_fragment(&mut g, EXT0 + 16, 0, false, 2);
    let h = ip_headers(&g);
    assert_eq!((h.is_fragment, h.fragment_offset, h.ip_id), (false, 0, 2));
    assert_eq!((h.protocol, h.l4_offset, h.dst_port), (17, EXT0 + 24, 53));

    // A later fragment's chain stops at its fragment header: what follows is payload, even
    // when it names a destination-options header that would reach past the window.
    let mut g = ipv6_with_ext(&u, &[(0, 8), (44, 8), (60, 8)]);
    set_fragment(&mut g, EXT0 + 8, 1440, true, 9);
    g[EXT0 + 16 + 1] = 0xff;
    let h = ip_headers(&g);
    assert_eq!((h.protocol, h.l4_offset), (60, EXT0 + 16));
    assert_eq!((h.is_fragment, h.fragment_offset, h.ip_id), (true, 1440, 9));
    assert!(!h.has_ports && h.src_port == 0 && h.dst_port == 0);
    // A later fragment whose "transport header" is cut: no ports, so not TRUNCATED_L4.
    let mut g = ipv6_with_ext(&u, &[(44, 8)]);
    set_fragment(&mut g, EXT0, 8, false, 9);
    g[EXT0] = 6;
    set_payload_length(&mut g, 8 + 4);
    g.truncate(EXT0 + 12);
    let h = ip_headers(&g);
    assert!(h.is_later_fragment() && !h.has_ports && h.protocol == 6);
}

/// An ICMPv4 error of type `ty` from a router to the VIP quoting `quoted`.
fn icmp4(ty: u8, quoted: &[u8]) -> Vec<u8> {
    icmp4_error(ip("192.0.2.254"), ip("203.0.113.1"), ty, 1, [0; 4], quoted)
}

/// An ICMPv6 error of type `ty` from a router to the VIP quoting `quoted`.
fn icmp6(ty: u8, quoted: &[u8]) -> Vec<u8> {
    icmp6_error(
        ip("2001:db8::fe"),
        ip("2001:db8::80"),
        ty,
        0,
        [0; 4],
        quoted,
    )
}

/// The backend's reply from the VIP that a router's error quotes (TCP 80 → 40000).
fn reply4() -> Vec<u8> {
    ip_part(&tcp(
        ip("203.0.113.1"),
        80,
        ip("198.51.100.10"),
        40000,
        ACK,
        &[0u8; 8],
    ))
    .to_vec()
}

/// The same over IPv6, UDP 53 → 6000.
fn reply6() -> Vec<u8> {
    ip_part(&udp(
        ip("2001:db8::80"),
        53,
        ip("2001:db8::1"),
        6000,
        &[0u8; 8],
    ))
    .to_vec()
}

/// The inner flow an ICMP error frame quotes, or `None`; asserts that it is an error.
fn quote_of(f: &[u8]) -> Option<(u8, u16, u16)> {
    let h = ip_headers(f);
    assert!(h.icmp_error, "an ICMP error");
    assert!(!h.has_ports && (h.src_port, h.dst_port, h.tcp_flags) == (0, 0, 0));
    h.icmp_inner.map(|i| (i.protocol, i.src_port, i.dst_port))
}

#[test]
fn icmp_error_types_and_which_packets_can_be_errors() {
    let q = reply4();
    // Time exceeded, any code; an ICMPv4 header of exactly 8 bytes with its quote.
    let f = icmp4(11, &q[..28]);
    let h = ip_headers(&f);
    assert_decodes_like_etherparse(&f, &h);
    let inner = h.icmp_inner.expect("a usable quote");
    let x = etherparse::Ipv4HeaderSlice::from_slice(&q).expect("quoted header");
    assert_eq!(inner.src, addr_to_u128(x.source_addr().into()));
    assert_eq!(inner.dst, addr_to_u128(x.destination_addr().into()));
    assert_eq!(
        (inner.protocol, inner.src_port, inner.dst_port),
        (6, 80, 40000)
    );
    // Other types are ordinary portless packets (parameter problem, redirect, echo reply).
    for ty in [12u8, 5, 0] {
        let h = ip_headers(&icmp4(ty, &q[..28]));
        assert!(!h.icmp_error && h.icmp_inner.is_none() && !h.has_ports);
    }
    // An ICMP message cut below 8 bytes by the IP length is no error, whatever its type.
    let mut f = icmp4(3, &[]);
    f[14 + 2..14 + 4].copy_from_slice(&(20u16 + 7).to_be_bytes());
    refix_ipv4_checksum(&mut f, 14);
    let h = ip_headers(&f);
    assert!(!h.icmp_error && h.protocol == 1);
    // In a first fragment, an error is an ordinary packet: its quote may be cut.
    let mut f = icmp4(3, &q[..28]);
    set_ipv4_flags_offset(&mut f, 0x2000);
    let h = ip_headers(&f);
    assert!(h.is_fragment && !h.icmp_error && h.icmp_inner.is_none());

    // ICMPv6: destination unreachable, packet too big and time exceeded are errors; parameter
    // problem is not.
    let q6 = reply6();
    for ty in [1u8, 2, 3] {
        assert_eq!(quote_of(&icmp6(ty, &q6[..48])), Some((17, 53, 6000)));
    }
    assert!(!ip_headers(&icmp6(4, &q6[..48])).icmp_error);
    // ICMP's number over IPv6 and ICMPv6's over IPv4 are other protocols.
    let mut f = icmp6(1, &q6[..48]);
    f[14 + 6] = 1;
    assert!(!ip_headers(&f).icmp_error);
    let mut f = icmp4(3, &q[..28]);
    f[14 + 9] = 58;
    refix_ipv4_checksum(&mut f, 14);
    assert!(!ip_headers(&f).icmp_error);
}

#[test]
fn icmp_error_quotes_usable_or_not() {
    let q = reply4();
    // Quoted options: the ports follow them.
    let (x, rest) = Ipv4Header::from_slice(&q).expect("quoted header");
    let mut with_options = x.clone();
    with_options.options = [1u8, 1, 1, 0][..].try_into().expect("options");
    let mut q_opt = Vec::new();
    with_options.write(&mut q_opt).expect("write");
    q_opt.extend_from_slice(rest);
    assert_eq!(quote_of(&icmp4(3, &q_opt[..32])), Some((6, 80, 40000)));
    assert_eq!(quote_of(&icmp4(3, &q_opt[..31])), None, "ports + 8 bytes");
    // A quoted first fragment (MF, offset 0) still has its ports; a later one has none.
    let mut q_mf = q.clone();
    q_mf[6] = 0x20;
    assert_eq!(quote_of(&icmp4(3, &q_mf[..28])), Some((6, 80, 40000)));
    let mut q_later = q.clone();
    q_later[7] = 1;
    assert_eq!(quote_of(&icmp4(3, &q_later[..28])), None);
    // Quoted IHL below 5, another version, another protocol: unusable. Quoted lengths and
    // checksums are not looked at.
    let mut bad = q.clone();
    bad[0] = 0x44;
    assert_eq!(quote_of(&icmp4(3, &bad[..28])), None);
    let mut bad = q.clone();
    bad[0] = 0x65;
    assert_eq!(quote_of(&icmp4(3, &bad[..28])), None);
    let mut bad = q.clone();
    bad[9] = 1;
    assert_eq!(quote_of(&icmp4(3, &bad[..28])), None);
    let mut odd = q.clone();
    odd[2..4].copy_from_slice(&9999u16.to_be_bytes());
    odd[10] ^= 0xff;
    assert_eq!(quote_of(&icmp4(3, &odd[..28])), Some((6, 80, 40000)));
    // The quote ends with the outer packet: bytes after it (padding) are not read.
    let mut f = icmp4(3, &q[..27]);
    f.extend_from_slice(&[0u8; 8]);
    assert_eq!(quote_of(&f), None);

    // IPv6: the transport header must follow the quoted fixed header directly.
    let q6 = reply6();
    assert_eq!(quote_of(&icmp6(2, &q6[..47])), None, "ports + 8 bytes");
    let mut q_ext = q6[..40].to_vec();
    q_ext[6] = 60;
    q_ext.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 0]);
    q_ext.extend_from_slice(&q6[40..48]);
    assert_eq!(quote_of(&icmp6(2, &q_ext)), None);
    let mut bad = q6.clone();
    bad[0] = 0x45;
    assert_eq!(quote_of(&icmp6(2, &bad[..48])), None);
}

#[test]
fn an_icmp_error_quote_ends_at_the_window() {
    // ICMPv6 after a destination-options header of `ext` bytes quoting the whole reply (the
    // packet ends past the window): the quoted ports' 8 bytes end at 110 + ext.
    let q6 = reply6();
    let err = icmp6(1, &q6);
    let fits = ipv6_with_ext(&err, &[(60, 80)]);
    assert!(ip_headers(&fits).l3_end > PARSE_WINDOW);
    assert_eq!(quote_of(&fits), Some((17, 53, 6000)));
    let cut = ipv6_with_ext(&err, &[(60, 88)]);
    assert_eq!(quote_of(&cut), None);
}

#[test]
fn descriptors_of_valid_frames_agree_with_etherparse() {
    let frames = [
        tcp_vlan(ip("10.0.0.1"), 1, ip("10.0.0.2"), 2, SYN, b"abc", &[1, 2]),
        udp_vlan(ip("2001:db8::1"), 3, ip("2001:db8::2"), 4, b"abc", &[5]),
        ipv6_with_ext(
            &tcp(ip("2001:db8::1"), 5, ip("2001:db8::2"), 6, ACK, b"abc"),
            &[(0, 8), (43, 24), (60, 8)],
        ),
        ipv6_with_ext(
            &udp(ip("2001:db8::1"), 5, ip("2001:db8::2"), 6, b"abc"),
            &[(0, 8), (44, 8)],
        ),
        raw_ip_vlan(ip("10.0.0.1"), ip("10.0.0.2"), 47, &[0u8; 40], &[]),
        raw_ip_vlan(ip("2001:db8::1"), ip("2001:db8::2"), 132, &[0u8; 40], &[9]),
        echo_vlan(ip("10.0.0.1"), ip("10.0.0.2"), 1, b"ping", &[]),
        pad60(udp(ip("10.0.0.1"), 9, ip("10.0.0.2"), 10, b"")),
    ];
    for f in &frames {
        let h = ip_headers(f);
        assert_decodes_like_etherparse(f, &h);
        assert!(!h.icmp_error);
    }
}
