//! The header parser of the pipeline (docs/pipeline.md, "Parsing").
//!
//! It reads only the first [`PARSE_WINDOW`] bytes of a frame plus the frame length, which is
//! what the RTL's header window holds. Every check happens in the documented order, so the
//! first failing one names the malformed reason; nothing here allocates or panics on any byte
//! string.
//!
//! Two parsers: `parse_common` takes the common frame (TCP or UDP over IPv4 without options
//! or IPv6 without extension headers) in a few wide reads, and `parse_general` takes every
//! frame, walking the header window with a cursor one header at a time. The general parser
//! is written from docs/pipeline.md alone, apart from the reference semantics' parser
//! (`nlb_reference::parse`), so the differential tests hold two readings of the text to each
//! other: the fast path to the general parser (the unit test below), the general parser to the
//! reference's (`tests/model/differential.rs`, on random and on limit-seeking frames), and the
//! RTL's `nlb_parser` to both paths (`verif/tests/rtl/parser.rs`).

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

// The general parser (see the module documentation for why it is written apart from the
// reference's).

/// The header window of docs/pipeline.md §2: the frame's first [`PARSE_WINDOW`] bytes (all of a
/// shorter frame) and the frame's length `L`.
///
/// Reads are total: a byte outside the window reads as 0. Every check of §2 that precedes a
/// read keeps that read inside the window, so the zeros are never used; they only turn a
/// mistake in those checks into a wrong field instead of a panic on a malformed frame.
#[derive(Clone, Copy)]
struct Window<'f> {
    bytes: &'f [u8],
    /// `L`: the frame's length, which may exceed the window.
    len: usize,
}

impl<'f> Window<'f> {
    #[inline]
    fn new(frame: &'f [u8]) -> Self {
        Window {
            bytes: frame.get(..PARSE_WINDOW).unwrap_or(frame),
            len: frame.len(),
        }
    }

    #[inline]
    fn u8(&self, at: usize) -> u8 {
        self.bytes.get(at).copied().unwrap_or(0)
    }

    #[inline]
    fn u16(&self, at: usize) -> u16 {
        self.bytes.get(at..at + 2).map_or(0, |b| be16(b, 0))
    }

    #[inline]
    fn u32(&self, at: usize) -> u32 {
        self.bytes.get(at..at + 4).map_or(0, |b| be32(b, 0))
    }

    #[inline]
    fn u128(&self, at: usize) -> u128 {
        self.bytes.get(at..at + 16).map_or(0, |b| be128(b, 0))
    }

    /// The folded ones'-complement sum of `n` bytes from `at` (0, a failing sum, if they are
    /// not all in the window).
    #[inline]
    fn sum(&self, at: usize, n: usize) -> u16 {
        self.bytes
            .get(at..at + n)
            .map_or(0, |b| ones_complement_sum(b, 0))
    }
}

/// `Err(reason)` when the failure the caller names holds; the checks read as §2 lists them.
#[inline(always)]
fn reject_if(failure: bool, reason: Reason) -> Result<(), Reason> {
    if failure {
        Err(reason)
    } else {
        Ok(())
    }
}

/// The descriptor before any IP header field is read: no fragment, no ports, no ICMP error.
#[inline]
fn empty_headers(family: Family, vlan_tags: u8, l3_offset: usize) -> IpHeaders {
    IpHeaders {
        family,
        vlan_tags,
        l3_offset,
        l3_end: l3_offset,
        l4_offset: l3_offset,
        tos: 0,
        dont_fragment: false,
        protocol: 0,
        src: 0,
        dst: 0,
        is_fragment: false,
        fragment_offset: 0,
        ip_id: 0,
        has_ports: false,
        src_port: 0,
        dst_port: 0,
        tcp_flags: 0,
        icmp_error: false,
        icmp_inner: None,
    }
}

/// The parser of docs/pipeline.md §2 for every frame: a cursor walks the header window one
/// header at a time (Ethernet and its VLAN tags, the IP header, IPv6 extension headers, the
/// upper-layer header), each step checking its header in the documented order and filling in
/// the descriptor. The first failing check names the reason.
#[inline(never)]
pub(crate) fn parse_general(frame: &[u8]) -> Result<Parsed, Reason> {
    let mut cur = Cursor {
        w: Window::new(frame),
        at: 0,
    };
    let (ethertype, tags) = cur.link_layer()?;
    let family = match ethertype {
        ETHERTYPE_IPV4 => Family::V4,
        ETHERTYPE_IPV6 => Family::V6,
        // Not malformed: the frame goes to the host as NOT_IP.
        _ => return Ok(Parsed::NotIp),
    };
    let mut h = empty_headers(family, tags, cur.at);
    match family {
        Family::V4 => cur.ipv4(&mut h)?,
        Family::V6 => {
            cur.ipv6(&mut h)?;
            cur.ipv6_extensions(&mut h)?;
        }
    }
    // A later fragment carries payload where the upper-layer header would be.
    if !h.is_later_fragment() {
        cur.upper_layer(&mut h)?;
    }
    Ok(Parsed::Ip(h))
}

/// A position in the header window: `at` is where the next header starts.
struct Cursor<'f> {
    w: Window<'f>,
    at: usize,
}

impl Cursor<'_> {
    /// The Ethernet header and up to [`MAX_VLAN_TAGS`] tags: the EtherType after them and the
    /// number of tags; `at` is left on the IP header.
    #[inline]
    fn link_layer(&mut self) -> Result<(u16, u8), Reason> {
        let w = self.w;
        reject_if(w.len < 14, Reason::Runt)?;
        // `at` is the end of the Ethernet header read so far; its EtherType field is the two
        // bytes before it.
        self.at = 14;
        let mut ethertype = w.u16(12);
        let mut tags = 0u8;
        while ethertype == TPID_8021Q || ethertype == TPID_8021AD {
            let one_tag_too_many = usize::from(tags) == MAX_VLAN_TAGS;
            reject_if(one_tag_too_many, Reason::TooManyVlans)?;
            // The tag control information, then the next EtherType.
            let tag_cut = w.len < self.at + 4;
            reject_if(tag_cut, Reason::TruncatedL2)?;
            ethertype = w.u16(self.at + 2);
            self.at += 4;
            tags += 1;
        }
        Ok((ethertype, tags))
    }

    /// The IPv4 header at `at`, options included; `at` is left on the upper-layer header.
    #[inline]
    fn ipv4(&mut self, h: &mut IpHeaders) -> Result<(), Reason> {
        let (w, ip) = (self.w, self.at);
        let fixed_part_cut = w.len < ip + 20;
        reject_if(fixed_part_cut, Reason::TruncatedL3)?;
        reject_if(w.u8(ip) >> 4 != 4, Reason::BadIpVersion)?;
        let ihl = usize::from(w.u8(ip) & 0x0f);
        reject_if(ihl < 5, Reason::BadIhl)?;
        let hl = 4 * ihl;
        let options_cut = w.len < ip + hl;
        reject_if(options_cut, Reason::TruncatedL3)?;
        let total = usize::from(w.u16(ip + 2));
        let length_wrong = total < hl || ip + total > w.len;
        reject_if(length_wrong, Reason::BadIpLength)?;
        // The header ends at most at 22 + 60 bytes, inside the window.
        reject_if(w.sum(ip, hl) != 0xffff, Reason::BadIpChecksum)?;

        let flags_offset = w.u16(ip + 6);
        let more_fragments = flags_offset & 0x2000 != 0;
        // The offset field counts 8-byte units; 0x1FFF · 8 still fits 16 bits.
        let offset = (flags_offset & 0x1fff) << 3;
        h.l3_end = ip + total;
        h.tos = w.u8(ip + 1);
        h.dont_fragment = flags_offset & 0x4000 != 0;
        h.is_fragment = more_fragments || offset != 0;
        h.fragment_offset = offset;
        h.ip_id = u32::from(w.u16(ip + 4));
        h.protocol = w.u8(ip + 9);
        h.src = mapped_v4(w.u32(ip + 12));
        h.dst = mapped_v4(w.u32(ip + 16));
        h.l4_offset = ip + hl;
        self.at = ip + hl;
        Ok(())
    }

    /// The fixed IPv6 header at `at`; `at` is left on the first header after it, whose kind is
    /// in `h.protocol` until the extension chain is walked.
    #[inline]
    fn ipv6(&mut self, h: &mut IpHeaders) -> Result<(), Reason> {
        let (w, ip) = (self.w, self.at);
        let header_cut = w.len < ip + 40;
        reject_if(header_cut, Reason::TruncatedL3)?;
        reject_if(w.u8(ip) >> 4 != 6, Reason::BadIpVersion)?;
        let l3_end = ip + 40 + usize::from(w.u16(ip + 4));
        reject_if(l3_end > w.len, Reason::BadIpLength)?;

        h.l3_end = l3_end;
        // The traffic class sits between the version and the flow label.
        h.tos = (w.u16(ip) >> 4) as u8;
        // Routers never fragment IPv6: only the sender does.
        h.dont_fragment = true;
        h.protocol = w.u8(ip + 6);
        h.src = w.u128(ip + 8);
        h.dst = w.u128(ip + 24);
        h.l4_offset = ip + 40;
        self.at = ip + 40;
        Ok(())
    }

    /// The IPv6 extension headers from `at`: `h.protocol` becomes the upper-layer protocol and
    /// `at` (and `h.l4_offset`) its header; a fragment header fills in the fragment fields.
    #[inline]
    fn ipv6_extensions(&mut self, h: &mut IpHeaders) -> Result<(), Reason> {
        let w = self.w;
        let mut next = h.protocol;
        let mut read = 0;
        while matches!(
            next,
            proto::HOPOPT | proto::ROUTING | proto::DSTOPTS | proto::FRAGMENT
        ) {
            let p = self.at;
            let chain_too_long = read == MAX_EXT_HEADERS || p + 8 > PARSE_WINDOW;
            reject_if(chain_too_long, Reason::ExtChainTooLong)?;
            reject_if(p + 8 > h.l3_end, Reason::BadIpLength)?;
            let len = if next == proto::FRAGMENT {
                8
            } else {
                (usize::from(w.u8(p + 1)) + 1) * 8
            };
            reject_if(p + len > PARSE_WINDOW, Reason::ExtChainTooLong)?;
            reject_if(p + len > h.l3_end, Reason::BadIpLength)?;

            let mut payload_follows = false;
            if next == proto::FRAGMENT {
                // Offset (already in bytes: 13 bits above 3 reserved ones) and M flag.
                let offset_flags = w.u16(p + 2);
                h.fragment_offset = offset_flags & 0xfff8;
                h.is_fragment = h.fragment_offset != 0 || offset_flags & 1 != 0;
                h.ip_id = w.u32(p + 4);
                payload_follows = h.fragment_offset != 0;
            }
            next = w.u8(p);
            self.at = p + len;
            read += 1;
            // In a later fragment the headers after the fragment header are in the first one.
            if payload_follows {
                break;
            }
        }
        h.protocol = next;
        h.l4_offset = self.at;
        Ok(())
    }

    /// The upper-layer header at `at` of a packet that is not a later fragment: TCP/UDP ports
    /// and flags, or an ICMP error and the flow it quotes. Other protocols have no ports.
    #[inline]
    fn upper_layer(&mut self, h: &mut IpHeaders) -> Result<(), Reason> {
        let (w, l4) = (self.w, self.at);
        let need = match (h.family, h.protocol) {
            (_, proto::TCP) => 20,
            (_, proto::UDP) => 8,
            (Family::V4, proto::ICMP) | (Family::V6, proto::ICMPV6) => {
                // Only whole packets: a first fragment's quote may be cut by the fragmentation.
                if !h.is_fragment {
                    self.icmp(h);
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        // Only IPv6 extension headers can push a transport header out of the window.
        reject_if(l4 + need > PARSE_WINDOW, Reason::ExtChainTooLong)?;
        reject_if(l4 + need > h.l3_end, Reason::TruncatedL4)?;
        h.has_ports = true;
        h.src_port = w.u16(l4);
        h.dst_port = w.u16(l4 + 2);
        if h.protocol == proto::TCP {
            h.tcp_flags = w.u8(l4 + 13);
        }
        Ok(())
    }

    /// An ICMP or ICMPv6 message at `at` (a whole packet): whether it is an error and, if its
    /// quote is usable, the flow the quote carries. An ICMP message is never malformed: one
    /// that is too short or of another type is an ordinary portless packet.
    #[inline]
    fn icmp(&self, h: &mut IpHeaders) {
        let (w, l4) = (self.w, self.at);
        // What the parser may read of this packet: neither padding nor beyond the window.
        let limit = h.l3_end.min(PARSE_WINDOW);
        let has_icmp_header = l4 + 8 <= limit;
        if !has_icmp_header {
            return;
        }
        let error_type = match h.family {
            // Destination unreachable (fragmentation needed included), time exceeded.
            Family::V4 => matches!(w.u8(l4), 3 | 11),
            // Destination unreachable, packet too big, time exceeded.
            Family::V6 => matches!(w.u8(l4), 1..=3),
        };
        if error_type {
            h.icmp_error = true;
            h.icmp_inner = quoted_flow(w, h.family, l4 + 8, limit);
        }
    }
}

/// The flow of the IP header an ICMP error quotes at `q`, if the quote is usable: the outer
/// header's IP version, TCP or UDP directly after the quoted IP header (IPv4 options
/// allowed, IPv6 extension headers not), not a later fragment, and the quoted transport
/// header's first 8 bytes before `limit`. The quote's lengths and checksums are not checked:
/// routers quote as little as 8 bytes past the IP header.
#[inline]
fn quoted_flow(w: Window<'_>, family: Family, q: usize, limit: usize) -> Option<InnerFlow> {
    let fits = |at: usize, n: usize| at + n <= limit;
    let (protocol, src, dst, ports) = match family {
        Family::V4 => {
            let ihl = usize::from(w.u8(q) & 0x0f);
            let usable = fits(q, 20) && w.u8(q) >> 4 == 4 && ihl >= 5 && w.u16(q + 6) & 0x1fff == 0;
            if !usable {
                return None;
            }
            let (src, dst) = (mapped_v4(w.u32(q + 12)), mapped_v4(w.u32(q + 16)));
            (w.u8(q + 9), src, dst, q + 4 * ihl)
        }
        Family::V6 => {
            if !(fits(q, 40) && w.u8(q) >> 4 == 6) {
                return None;
            }
            (w.u8(q + 6), w.u128(q + 8), w.u128(q + 24), q + 40)
        }
    };
    let transport = protocol == proto::TCP || protocol == proto::UDP;
    if !(transport && fits(ports, 8)) {
        return None;
    }
    Some(InnerFlow {
        protocol,
        src,
        dst,
        src_port: w.u16(ports),
        dst_port: w.u16(ports + 2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP (or UDP) frame with `tags` VLAN tags, over IPv4 (checksum right; with `options`
    /// zero words of options, which leave the sum of the first 20 bytes right too) or IPv6.
    fn frame(v6: bool, tcp: bool, tags: usize, payload: usize, options: usize) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        for _ in 0..tags {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        }
        let l4_len = if tcp { 20 } else { 8 } + payload;
        let protocol = if tcp { proto::TCP } else { proto::UDP };
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4_len as u16).to_be_bytes());
            f.extend_from_slice(&[protocol, 64]);
            f.extend((0..32).map(|i| i as u8));
        } else {
            let ip = f.len() + 2;
            let hl = 20 + 4 * options;
            f.extend_from_slice(&[0x08, 0x00, 0x40 | (hl / 4) as u8, 0]);
            f.extend_from_slice(&((hl + l4_len) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 1, 0x40, 0, 64, protocol, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            f.resize(f.len() + 4 * options, 0);
            let sum = !ones_complement_sum(&f[ip..ip + hl], 0);
            f[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
        }
        f.extend_from_slice(&[0x9c, 0x40, 0x00, 0x50]);
        f.extend((4..l4_len).map(|i| i as u8));
        f
    }

    /// The fast path promises that every frame it accepts passes every check of the general
    /// parser with the same fields. Frames near the common shape (bytes of the headers edited,
    /// cut, padded) reach both sides of each of its shortcuts.
    #[test]
    fn the_common_frame_parses_as_the_general_parser_parses_it() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            // SplitMix64.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let (mut accepted, mut declined) = (0, 0);
        for _ in 0..200_000 {
            let r = next();
            let mut f = frame(
                r & 1 != 0,
                r & 2 != 0,
                (r >> 2) as usize % 4,
                (r >> 4) as usize % 40,
                (next() % 3) as usize,
            );
            // One to three byte edits in the headers, a cut, or padding.
            for i in 0..(r >> 10) % 4 {
                let at = (next() % 80) as usize;
                if let Some(b) = f.get_mut(at) {
                    *b = (next() >> (8 * i)) as u8;
                }
            }
            // Mostly with the IPv4 checksum made right again, so that edited headers pass it.
            let ip = 14 + 4 * ((r >> 2) as usize % 4);
            let hl = 4 * usize::from(f.get(ip).map_or(0, |b| b & 0x0f));
            if r & 1 == 0 && (r >> 15) % 4 != 0 && hl >= 20 && f.len() >= ip + hl {
                f[ip + 10..ip + 12].fill(0);
                let sum = !ones_complement_sum(&f[ip..ip + hl], 0);
                f[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
            }
            match (r >> 12) % 8 {
                0 => f.truncate((next() % (f.len() as u64 + 1)) as usize),
                1 => f.resize(f.len() + (next() % 64) as usize, 0),
                _ => {}
            }
            match parse_common(&f) {
                Some(h) => {
                    accepted += 1;
                    assert_eq!(parse_general(&f), Ok(Parsed::Ip(h)), "frame {f:02x?}");
                }
                None => declined += 1,
            }
        }
        assert!(
            accepted > 50_000 && declined > 50_000,
            "{accepted} / {declined}"
        );
    }
}
