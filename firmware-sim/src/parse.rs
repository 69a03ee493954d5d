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
///
/// Summed four bytes at a time: 2^16 ≡ 1 modulo 0xFFFF, so the folded sum of 32-bit words is
/// the folded sum of their 16-bit halves (and 0 only when every byte is 0, like the 16-bit
/// sum).
#[inline]
pub fn ones_complement_sum(data: &[u8], initial: u32) -> u16 {
    let mut sum = u64::from(initial);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    // The last 1-3 bytes as a big-endian word padded with zeros.
    let mut tail = [0u8; 4];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    sum += u64::from(u32::from_be_bytes(tail));
    fold(sum)
}

/// Folds a sum of big-endian words (each below 2^32) to 16 bits with end-around carries.
#[inline]
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The common frame, parsed without the general parser's step-by-step checks: up to two
/// VLAN tags, then IPv4 without options (or IPv6 without extension headers) carrying a whole
/// TCP or UDP packet whose header lies in the frame. `None` sends every other frame (and any
/// frame a check of the general parser would reject) to the general parser; for the frames
/// it accepts, every check of the general parser passes and the fields are the same.
#[inline(always)]
pub(crate) fn parse_common(frame: &[u8]) -> Option<IpHeaders> {
    let len = frame.len();
    let mut off = 12;
    let mut tags = 0u8;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    while ethertype == TPID_8021Q || ethertype == TPID_8021AD {
        if usize::from(tags) == MAX_VLAN_TAGS {
            return None;
        }
        off += 4;
        tags += 1;
        ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    let ip = off + 2;
    match ethertype {
        ETHERTYPE_IPV4 => {
            // IPv4 header (20 bytes) and the TCP header's first 20 bytes (fewer for UDP, but
            // the check is one length test).
            let b: &[u8; 40] = frame.get(ip..ip + 40)?.try_into().ok()?;
            if b[0] != 0x45 {
                return None;
            }
            let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
            let frag = u16::from_be_bytes([b[6], b[7]]);
            let protocol = b[9];
            let need = match protocol {
                proto::TCP => 20,
                proto::UDP => 8,
                _ => return None,
            };
            // A fragment, a short IP length or a frame shorter than the IP length: general.
            if frag & 0x3fff != 0 || total < 20 + need || ip + total > len {
                return None;
            }
            let word =
                |i: usize| u64::from(u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]));
            // The folded sum is 0xFFFF exactly when the sum is a non-zero multiple of 0xFFFF.
            let sum = word(0) + word(4) + word(8) + word(12) + word(16);
            if sum % 0xffff != 0 || sum == 0 {
                return None;
            }
            Some(IpHeaders {
                family: Family::V4,
                vlan_tags: tags,
                l3_offset: ip,
                l3_end: ip + total,
                l4_offset: ip + 20,
                tos: b[1],
                dont_fragment: frag & 0x4000 != 0,
                protocol,
                src: mapped_v4(u32::from_be_bytes([b[12], b[13], b[14], b[15]])),
                dst: mapped_v4(u32::from_be_bytes([b[16], b[17], b[18], b[19]])),
                is_fragment: false,
                fragment_offset: 0,
                ip_id: u32::from(u16::from_be_bytes([b[4], b[5]])),
                has_ports: true,
                src_port: u16::from_be_bytes([b[20], b[21]]),
                dst_port: u16::from_be_bytes([b[22], b[23]]),
                tcp_flags: if protocol == proto::TCP { b[33] } else { 0 },
                icmp_error: false,
                icmp_inner: None,
            })
        }
        ETHERTYPE_IPV6 => {
            let b: &[u8; 60] = frame.get(ip..ip + 60)?.try_into().ok()?;
            if b[0] >> 4 != 6 {
                return None;
            }
            let l3_end = ip + 40 + usize::from(u16::from_be_bytes([b[4], b[5]]));
            let protocol = b[6];
            let need = match protocol {
                proto::TCP => 20,
                proto::UDP => 8,
                _ => return None,
            };
            if l3_end > len || ip + 40 + need > l3_end {
                return None;
            }
            let addr = |i: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[i..i + 16]);
                u128::from_be_bytes(a)
            };
            Some(IpHeaders {
                family: Family::V6,
                vlan_tags: tags,
                l3_offset: ip,
                l3_end,
                l4_offset: ip + 40,
                tos: (u16::from_be_bytes([b[0], b[1]]) >> 4) as u8,
                dont_fragment: true,
                protocol,
                src: addr(8),
                dst: addr(24),
                is_fragment: false,
                fragment_offset: 0,
                ip_id: 0,
                has_ports: true,
                src_port: u16::from_be_bytes([b[40], b[41]]),
                dst_port: u16::from_be_bytes([b[42], b[43]]),
                tcp_flags: if protocol == proto::TCP { b[53] } else { 0 },
                icmp_error: false,
                icmp_inner: None,
            })
        }
        _ => None,
    }
}

/// Parses a frame (without FCS). `Err` carries the malformed reason.
#[inline]
pub fn parse(frame: &[u8]) -> Result<Parsed, Reason> {
    match parse_common(frame) {
        Some(h) => Ok(Parsed::Ip(h)),
        None => parse_general(frame),
    }
}

