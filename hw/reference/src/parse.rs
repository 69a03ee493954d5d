//! The header parser of the pipeline (docs/pipeline.md, "Parsing").
//!
//! It reads only the first [`PARSE_WINDOW`] bytes of a frame plus the frame length, which is
//! what the RTL's header window holds. Every check happens in the documented order, so the
//! first failing one names the malformed reason; nothing here allocates or panics on any byte
//! string.

use nlb_hw::enums::Reason;

/// Bytes of the frame the parser may look at (three 64-byte beats of the 512-bit datapath).
pub const PARSE_WINDOW: usize = 192;
/// VLAN tags accepted before the EtherType (802.1Q, QinQ).
pub const MAX_VLAN_TAGS: usize = 2;
/// IPv6 extension headers accepted before the upper-layer header.
pub const MAX_EXT_HEADERS: usize = 4;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// TPID of an 802.1Q customer tag.
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of an 802.1ad service tag.
pub const TPID_8021AD: u16 = 0x88A8;

/// IP protocol numbers the pipeline knows.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IPv4 in IP (IPIP).
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 in IP.
    pub const IPV6: u8 = 41;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 hop-by-hop options.
    pub const HOPOPT: u8 = 0;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
}

/// TCP flag bits (byte 13 of the TCP header).
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// IP version of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// The transport flow an ICMP error quotes (its inner header), as written in the quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InnerFlow {
    /// Inner IP protocol (TCP or UDP).
    pub protocol: u8,
    /// Inner source address, IPv4 mapped.
    pub src: u128,
    /// Inner destination address, IPv4 mapped.
    pub dst: u128,
    /// Inner source port.
    pub src_port: u16,
    /// Inner destination port.
    pub dst_port: u16,
}

/// What the parser found in an IP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeaders {
    /// IPv4 or IPv6.
    pub family: Family,
    /// VLAN tags before the EtherType.
    pub vlan_tags: u8,
    /// Offset of the IP header (= length of the L2 header including tags).
    pub l3_offset: usize,
    /// End of the IP packet: `l3_offset` + IPv4 total length / 40 + IPv6 payload length.
    /// Bytes after it are Ethernet padding.
    pub l3_end: usize,
    /// Offset of the upper-layer header (after IPv4 options or IPv6 extension headers).
    pub l4_offset: usize,
    /// IPv4 TOS or IPv6 traffic class.
    pub tos: u8,
    /// IPv4 DF bit; always true for IPv6 (routers never fragment it).
    pub dont_fragment: bool,
    /// Upper-layer protocol (after the IPv6 extension chain).
    pub protocol: u8,
    /// Source address, IPv4 mapped.
    pub src: u128,
    /// Destination address, IPv4 mapped.
    pub dst: u128,
    /// More-fragments set or a non-zero offset.
    pub is_fragment: bool,
    /// Fragment offset in bytes (0 for whole packets and first fragments).
    pub fragment_offset: u16,
    /// IPv4 identification or IPv6 fragment identification (0 when there is none).
    pub ip_id: u32,
    /// Whether the ports below were read (TCP/UDP, not a non-first fragment).
    pub has_ports: bool,
    /// Source port, 0 without ports.
    pub src_port: u16,
    /// Destination port, 0 without ports.
    pub dst_port: u16,
    /// TCP flags, 0 for anything but TCP.
    pub tcp_flags: u8,
    /// The packet is an ICMP/ICMPv6 error message (destination unreachable, packet too big,
    /// time exceeded).
    pub icmp_error: bool,
    /// The flow an ICMP error quotes, when its inner header is usable.
    pub icmp_inner: Option<InnerFlow>,
}

impl IpHeaders {
    /// Bytes of the IP packet (header and payload, without Ethernet padding).
    pub fn ip_len(&self) -> usize {
        self.l3_end - self.l3_offset
    }

    /// A non-first fragment (no ports).
    pub fn is_later_fragment(&self) -> bool {
        self.is_fragment && self.fragment_offset != 0
    }
}

/// Outcome of parsing a well-formed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Neither IPv4 nor IPv6 (after up to two VLAN tags).
    NotIp,
    /// An IP packet.
    Ip(IpHeaders),
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
fn be128(b: &[u8], at: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    u128::from_be_bytes(a)
}

#[inline]
fn mapped_v4(v4: u32) -> u128 {
    0xffff_0000_0000 | u128::from(v4)
}

/// Ones' complement sum of big-endian 16-bit words (an odd last byte is padded with zero),
/// folded to 16 bits.
pub fn ones_complement_sum(data: &[u8], initial: u32) -> u16 {
    let mut sum = u64::from(initial);
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Parses a frame (without FCS). `Err` carries the malformed reason.
pub fn parse(frame: &[u8]) -> Result<Parsed, Reason> {
    let len = frame.len();
    if len < 14 {
        return Err(Reason::Runt);
    }
    // Only the window is visible; `len` is still the true frame length for length checks.
    let w = &frame[..len.min(PARSE_WINDOW)];
    let mut ethertype = be16(w, 12);
    let mut off = 14;
    let mut tags = 0u8;
    while ethertype == TPID_8021Q || ethertype == TPID_8021AD {
        if usize::from(tags) == MAX_VLAN_TAGS {
            return Err(Reason::TooManyVlans);
        }
        if len < off + 4 {
            return Err(Reason::TruncatedL2);
        }
        ethertype = be16(w, off + 2);
        off += 4;
        tags += 1;
    }
    match ethertype {
        ETHERTYPE_IPV4 => parse_ipv4(w, len, off, tags).map(Parsed::Ip),
        ETHERTYPE_IPV6 => parse_ipv6(w, len, off, tags).map(Parsed::Ip),
        _ => Ok(Parsed::NotIp),
    }
}

fn parse_ipv4(w: &[u8], len: usize, ip: usize, tags: u8) -> Result<IpHeaders, Reason> {
    if len < ip + 20 {
        return Err(Reason::TruncatedL3);
    }
    if w[ip] >> 4 != 4 {
        return Err(Reason::BadIpVersion);
    }
    let ihl = usize::from(w[ip] & 0x0f);
    if ihl < 5 {
        return Err(Reason::BadIhl);
    }
    let hl = ihl * 4;
    if len < ip + hl {
        return Err(Reason::TruncatedL3);
    }
    let total = usize::from(be16(w, ip + 2));
    if total < hl || ip + total > len {
        return Err(Reason::BadIpLength);
    }
    // At most 22 + 60 bytes: always inside the window.
    if ones_complement_sum(&w[ip..ip + hl], 0) != 0xffff {
        return Err(Reason::BadIpChecksum);
    }
    let frag = be16(w, ip + 6);
    let offset = (frag & 0x1fff) << 3;
    let more = frag & 0x2000 != 0;
    let mut h = IpHeaders {
        family: Family::V4,
        vlan_tags: tags,
        l3_offset: ip,
        l3_end: ip + total,
        l4_offset: ip + hl,
        tos: w[ip + 1],
        dont_fragment: frag & 0x4000 != 0,
        protocol: w[ip + 9],
        src: mapped_v4(be32(w, ip + 12)),
        dst: mapped_v4(be32(w, ip + 16)),
        is_fragment: more || offset != 0,
        fragment_offset: offset,
        ip_id: u32::from(be16(w, ip + 4)),
        has_ports: false,
        src_port: 0,
        dst_port: 0,
        tcp_flags: 0,
        icmp_error: false,
        icmp_inner: None,
    };
    parse_l4(w, &mut h)?;
    Ok(h)
}

fn parse_ipv6(w: &[u8], len: usize, ip: usize, tags: u8) -> Result<IpHeaders, Reason> {
    if len < ip + 40 {
        return Err(Reason::TruncatedL3);
    }
    if w[ip] >> 4 != 6 {
        return Err(Reason::BadIpVersion);
    }
    let l3_end = ip + 40 + usize::from(be16(w, ip + 4));
    if l3_end > len {
        return Err(Reason::BadIpLength);
    }
    let mut nh = w[ip + 6];
    let mut p = ip + 40;
    let mut exts = 0;
    let mut is_fragment = false;
    let mut fragment_offset = 0u16;
    let mut ip_id = 0u32;
    while matches!(
        nh,
        proto::HOPOPT | proto::ROUTING | proto::DSTOPTS | proto::FRAGMENT
    ) {
        if exts == MAX_EXT_HEADERS || p + 8 > PARSE_WINDOW {
            return Err(Reason::ExtChainTooLong);
        }
        if p + 8 > l3_end {
            return Err(Reason::BadIpLength);
        }
        let hlen = if nh == proto::FRAGMENT {
            8
        } else {
            (usize::from(w[p + 1]) + 1) * 8
        };
        if p + hlen > PARSE_WINDOW {
            return Err(Reason::ExtChainTooLong);
        }
        if p + hlen > l3_end {
            return Err(Reason::BadIpLength);
        }
        let this = nh;
        nh = w[p];
        if this == proto::FRAGMENT {
            let f = be16(w, p + 2);
            fragment_offset = f & 0xfff8;
            is_fragment = fragment_offset != 0 || f & 1 != 0;
            ip_id = be32(w, p + 4);
        }
        p += hlen;
        exts += 1;
        // What follows the fragment header of a later fragment is payload, not headers.
        if this == proto::FRAGMENT && fragment_offset != 0 {
            break;
        }
    }
    let vtcf = be32(w, ip);
    let mut h = IpHeaders {
        family: Family::V6,
        vlan_tags: tags,
        l3_offset: ip,
        l3_end,
        l4_offset: p,
        tos: (vtcf >> 20) as u8,
        dont_fragment: true,
        protocol: nh,
        src: be128(w, ip + 8),
        dst: be128(w, ip + 24),
        is_fragment,
        fragment_offset,
        ip_id,
        has_ports: false,
        src_port: 0,
        dst_port: 0,
        tcp_flags: 0,
        icmp_error: false,
        icmp_inner: None,
    };
    parse_l4(w, &mut h)?;
    Ok(h)
}

/// TCP/UDP ports and flags, or an ICMP error's inner flow. Later fragments have none.
fn parse_l4(w: &[u8], h: &mut IpHeaders) -> Result<(), Reason> {
    if h.is_later_fragment() {
        return Ok(());
    }
    let l4 = h.l4_offset;
    let need = match h.protocol {
        proto::TCP => 20,
        proto::UDP => 8,
        proto::ICMP if h.family == Family::V4 && !h.is_fragment => {
            parse_icmp(w, h);
            return Ok(());
        }
        proto::ICMPV6 if h.family == Family::V6 && !h.is_fragment => {
            parse_icmp(w, h);
            return Ok(());
        }
        _ => return Ok(()),
    };
    if l4 + need > PARSE_WINDOW {
        return Err(Reason::ExtChainTooLong);
    }
    if l4 + need > h.l3_end {
        return Err(Reason::TruncatedL4);
    }
    h.has_ports = true;
    h.src_port = be16(w, l4);
    h.dst_port = be16(w, l4 + 2);
    if h.protocol == proto::TCP {
        h.tcp_flags = w[l4 + 13];
    }
    Ok(())
}

fn parse_icmp(w: &[u8], h: &mut IpHeaders) {
    let l4 = h.l4_offset;
    let limit = h.l3_end.min(PARSE_WINDOW);
    if l4 + 8 > limit {
        return; // too short to be an error message: an ordinary ICMP packet
    }
    let ty = w[l4];
    h.icmp_error = match h.family {
        Family::V4 => ty == 3 || ty == 11,
        Family::V6 => ty == 1 || ty == 2 || ty == 3,
    };
    if h.icmp_error {
        h.icmp_inner = parse_inner(w, h.family, l4 + 8, limit);
    }
}

/// The quoted header of an ICMP error: same family as the outer header, TCP or UDP, with its
/// ports inside both the window and the outer packet. Inner lengths and checksums are not
/// checked (quotes are usually truncated).
fn parse_inner(w: &[u8], family: Family, ip: usize, limit: usize) -> Option<InnerFlow> {
    let (protocol, src, dst, l4) = match family {
        Family::V4 => {
            if ip + 20 > limit || w[ip] >> 4 != 4 {
                return None;
            }
            let ihl = usize::from(w[ip] & 0x0f);
            if ihl < 5 || be16(w, ip + 6) & 0x1fff != 0 {
                return None;
            }
            (
                w[ip + 9],
                mapped_v4(be32(w, ip + 12)),
                mapped_v4(be32(w, ip + 16)),
                ip + ihl * 4,
            )
        }
        Family::V6 => {
            if ip + 40 > limit || w[ip] >> 4 != 6 {
                return None;
            }
            (w[ip + 6], be128(w, ip + 8), be128(w, ip + 24), ip + 40)
        }
    };
    if protocol != proto::TCP && protocol != proto::UDP {
        return None;
    }
    if l4 + 8 > limit {
        return None;
    }
    Some(InnerFlow {
        protocol,
        src,
        dst,
        src_port: be16(w, l4),
        dst_port: be16(w, l4 + 2),
    })
}
