//! Frame generators for the RTL tests: well-formed frames built field by field (Ethernet,
//! VLAN tags, IPv4 with options, IPv6 with extension headers, fragments, TCP/UDP, ICMP errors
//! quoting a flow), random specs of them, and mutations that make them malformed.
//!
//! The builder writes what it is told, including wrong lengths and checksums when asked, so
//! the tests can reach every check of the parser; expectations never come from here but from
//! the golden model.

use rand::rngs::StdRng;
use rand::RngExt;

/// 802.1Q TPID.
pub const TPID_8021Q: u16 = 0x8100;
/// 802.1ad TPID.
pub const TPID_8021AD: u16 = 0x88A8;

/// An IPv6 extension header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ext {
    /// Hop-by-hop (0), routing (43) or destination options (60): `len8` is the length field
    /// (the header is `(len8 + 1) * 8` bytes).
    Options {
        /// Next-header value identifying this header (0, 43 or 60).
        kind: u8,
        /// Hdr Ext Len.
        len8: u8,
    },
    /// Fragment header (44).
    Fragment {
        /// Fragment offset in 8-byte units.
        offset: u16,
        /// More fragments.
        more: bool,
        /// Identification.
        id: u32,
    },
}

impl Ext {
    fn kind(&self) -> u8 {
        match self {
            Ext::Options { kind, .. } => *kind,
            Ext::Fragment { .. } => 44,
        }
    }

    fn len(&self) -> usize {
        match self {
            Ext::Options { len8, .. } => (usize::from(*len8) + 1) * 8,
            Ext::Fragment { .. } => 8,
        }
    }
}

/// The IP layer of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ip {
    /// IPv4.
    V4 {
        /// Source address.
        src: u32,
        /// Destination address.
        dst: u32,
        /// TOS.
        tos: u8,
        /// Identification.
        id: u16,
        /// Don't fragment.
        df: bool,
        /// More fragments.
        mf: bool,
        /// Fragment offset in 8-byte units.
        frag_offset: u16,
        /// Option bytes (padded to a multiple of 4, at most 40).
        options: Vec<u8>,
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: u128,
        /// Destination address.
        dst: u128,
        /// Traffic class.
        tclass: u8,
        /// Flow label (20 bits).
        flow: u32,
        /// Extension headers in order.
        ext: Vec<Ext>,
    },
}

/// The layer-4 content of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L4 {
    /// TCP header (20 bytes) with these flags.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Flags byte (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10).
        flags: u8,
    },
    /// UDP header (8 bytes).
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// ICMP / ICMPv6 message (protocol 1 over IPv4, 58 over IPv6): type, code, 4 bytes of
    /// rest-of-header, then `body` (a quote for error messages).
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
        /// What follows the 8-byte ICMP header.
        body: Vec<u8>,
    },
    /// Any other protocol number; the payload follows directly.
    Other(u8),
}

impl L4 {
    fn protocol(&self, v6: bool) -> u8 {
        match self {
            L4::Tcp { .. } => 6,
            L4::Udp { .. } => 17,
            L4::Icmp { .. } => {
                if v6 {
                    58
                } else {
                    1
                }
            }
            L4::Other(p) => *p,
        }
    }
}

/// Everything a frame is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    /// Destination MAC.
    pub dst_mac: u64,
    /// Source MAC.
    pub src_mac: u64,
    /// VLAN tags: (TPID, TCI), outermost first.
    pub vlans: Vec<(u16, u16)>,
    /// The IP layer; `None` with `ethertype` for frames that are not IP.
    pub ip: Option<Ip>,
    /// EtherType when `ip` is `None`.
    pub ethertype: u16,
    /// Layer 4.
    pub l4: L4,
    /// Payload bytes after the layer-4 header.
    pub payload: usize,
    /// The frame is padded with zeros to at least this many bytes (60 for Ethernet).
    pub min_len: usize,
}

impl FrameSpec {
    /// A TCP/IPv4 frame between two addresses.
    pub fn tcp4(src: u32, dst: u32, sport: u16, dport: u16, flags: u8) -> FrameSpec {
        FrameSpec {
            dst_mac: 0x0200_0000_0002,
            src_mac: 0x0200_0000_0003,
            vlans: Vec::new(),
            ip: Some(Ip::V4 {
                src,
                dst,
                tos: 0,
                id: 0x1234,
                df: true,
                mf: false,
                frag_offset: 0,
                options: Vec::new(),
            }),
            ethertype: 0x0800,
            l4: L4::Tcp {
                sport,
                dport,
                flags,
            },
            payload: 0,
            min_len: 60,
        }
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(64 + self.payload);
        f.extend_from_slice(&self.dst_mac.to_be_bytes()[2..]);
        f.extend_from_slice(&self.src_mac.to_be_bytes()[2..]);
        for (tpid, tci) in &self.vlans {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        let l4 = l4_bytes(&self.l4, self.payload);
        match &self.ip {
            None => {
                f.extend_from_slice(&self.ethertype.to_be_bytes());
                f.extend_from_slice(&l4);
            }
            Some(ip) => {
                let et: u16 = match ip {
                    Ip::V4 { .. } => 0x0800,
                    Ip::V6 { .. } => 0x86DD,
                };
                f.extend_from_slice(&et.to_be_bytes());
                f.extend_from_slice(&ip_packet(ip, &self.l4, &l4));
            }
        }
        if f.len() < self.min_len {
            f.resize(self.min_len, 0);
        }
        f
    }
}

/// The layer-4 header (with zero checksums) and `payload` bytes of a counting pattern.
fn l4_bytes(l4: &L4, payload: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + payload);
    match l4 {
        L4::Tcp {
            sport,
            dport,
            flags,
        } => {
            b.extend_from_slice(&sport.to_be_bytes());
            b.extend_from_slice(&dport.to_be_bytes());
            b.extend_from_slice(&0x0102_0304u32.to_be_bytes());
            b.extend_from_slice(&0u32.to_be_bytes());
            b.push(0x50);
            b.push(*flags);
            b.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        }
        L4::Udp { sport, dport } => {
            b.extend_from_slice(&sport.to_be_bytes());
            b.extend_from_slice(&dport.to_be_bytes());
            b.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0]);
        }
        L4::Icmp { ty, code, body } => {
            b.extend_from_slice(&[*ty, *code, 0, 0, 0, 0, 0, 0]);
            b.extend_from_slice(body);
        }
        L4::Other(_) => {}
    }
    b.extend((0..payload).map(|i| (i * 7 + 3) as u8));
    b
}

/// The IP packet (header, extension headers, `l4`), lengths and IPv4 checksum correct.
fn ip_packet(ip: &Ip, l4spec: &L4, l4: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(60 + l4.len());
    match ip {
        Ip::V4 {
            src,
            dst,
            tos,
            id,
            df,
            mf,
            frag_offset,
            options,
        } => {
            let mut opts = options.clone();
            opts.truncate(40);
            while opts.len() % 4 != 0 {
                opts.push(0);
            }
            let hl = 20 + opts.len();
            let total = (hl + l4.len()).min(0xffff) as u16;
            let frag = (u16::from(*df) << 14) | (u16::from(*mf) << 13) | (frag_offset & 0x1fff);
            p.push(0x40 | (hl / 4) as u8);
            p.push(*tos);
            p.extend_from_slice(&total.to_be_bytes());
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&frag.to_be_bytes());
            p.push(64);
            p.push(l4spec.protocol(false));
            p.extend_from_slice(&[0, 0]);
            p.extend_from_slice(&src.to_be_bytes());
            p.extend_from_slice(&dst.to_be_bytes());
            p.extend_from_slice(&opts);
            let c = !ones_sum(&p);
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        Ip::V6 {
            src,
            dst,
            tclass,
            flow,
            ext,
        } => {
            let ext_len: usize = ext.iter().map(Ext::len).sum();
            let plen = (ext_len + l4.len()).min(0xffff) as u16;
            let w0 = (6u32 << 28) | (u32::from(*tclass) << 20) | (flow & 0xf_ffff);
            p.extend_from_slice(&w0.to_be_bytes());
            p.extend_from_slice(&plen.to_be_bytes());
            p.push(ext.first().map_or(l4spec.protocol(true), Ext::kind));
            p.push(64);
            p.extend_from_slice(&src.to_be_bytes());
            p.extend_from_slice(&dst.to_be_bytes());
            for (i, e) in ext.iter().enumerate() {
                let next = ext.get(i + 1).map_or(l4spec.protocol(true), Ext::kind);
                match e {
                    Ext::Options { len8, .. } => {
                        p.push(next);
                        p.push(*len8);
                        p.extend((0..e.len() - 2).map(|j| (j as u8) | 0x80));
                    }
                    Ext::Fragment { offset, more, id } => {
                        p.push(next);
                        p.push(0);
                        p.extend_from_slice(&((offset << 3) | u16::from(*more)).to_be_bytes());
                        p.extend_from_slice(&id.to_be_bytes());
                    }
                }
            }
        }
    }
    p.extend_from_slice(l4);
    p
}

/// Folded ones'-complement sum of big-endian 16-bit words.
pub fn ones_sum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// An IPv4 address as the tests draw them: mostly from a small set so flows repeat.
pub fn random_v4(rng: &mut StdRng) -> u32 {
    if rng.random_bool(0.7) {
        0x0a00_0000 | rng.random_range(0..16u32)
    } else {
        rng.random()
    }
}

/// An IPv6 address as the tests draw them.
pub fn random_v6(rng: &mut StdRng) -> u128 {
    if rng.random_bool(0.7) {
        0x2001_0db8_0000_0000_0000_0000_0000_0000 | u128::from(rng.random_range(0..16u32))
    } else {
        rng.random()
    }
}

/// A port: mostly a few well-known ones, else any.
pub fn random_port(rng: &mut StdRng) -> u16 {
    match rng.random_range(0..4) {
        0 => 80,
        1 => 443,
        2 => rng.random_range(1024..1100),
        _ => rng.random(),
    }
}

fn random_vlans(rng: &mut StdRng) -> Vec<(u16, u16)> {
    let n = match rng.random_range(0..10) {
        0..=5 => 0,
        6 | 7 => 1,
        8 => 2,
        _ => 3,
    };
    (0..n)
        .map(|_| {
            let tpid = if rng.random_bool(0.5) {
                TPID_8021Q
            } else {
                TPID_8021AD
            };
            (tpid, rng.random_range(0..4096u16))
        })
        .collect()
}

/// A random transport header: TCP with any flags, UDP, or another protocol.
pub fn random_transport(rng: &mut StdRng) -> L4 {
    match rng.random_range(0..10) {
        0..=4 => L4::Tcp {
            sport: random_port(rng),
            dport: random_port(rng),
            flags: match rng.random_range(0..5) {
                0 => 0x02,
                1 => 0x12,
                2 => 0x11,
                3 => 0x04,
                _ => rng.random(),
            },
        },
        5..=8 => L4::Udp {
            sport: random_port(rng),
            dport: random_port(rng),
        },
        _ => L4::Other(rng.random_range(0..=255u8)),
    }
}

/// A random IPv4 layer (options, fragments now and then).
pub fn random_ipv4(rng: &mut StdRng, src: u32, dst: u32) -> Ip {
    let frag = rng.random_range(0..8);
    Ip::V4 {
        src,
        dst,
        tos: rng.random(),
        id: rng.random(),
        df: rng.random_bool(0.5),
        mf: frag == 0 || frag == 1,
        frag_offset: if frag == 1 || frag == 2 {
            rng.random_range(1..0x2000)
        } else {
            0
        },
        options: if rng.random_bool(0.2) {
            let n = rng.random_range(1..=10) * 4;
            (0..n).map(|_| rng.random()).collect()
        } else {
            Vec::new()
        },
    }
}

/// A random IPv6 layer (extension headers and fragments now and then).
pub fn random_ipv6(rng: &mut StdRng, src: u128, dst: u128) -> Ip {
    let n = match rng.random_range(0..10) {
        0..=5 => 0,
        6 => 1,
        7 => 2,
        8 => rng.random_range(3..=4),
        _ => rng.random_range(4..=6),
    };
    let ext = (0..n)
        .map(|_| match rng.random_range(0..5) {
            0 => Ext::Fragment {
                offset: if rng.random_bool(0.5) {
                    0
                } else {
                    rng.random_range(1..0x2000)
                },
                more: rng.random_bool(0.5),
                id: rng.random(),
            },
            k => Ext::Options {
                kind: [0, 43, 60, 0][k - 1],
                len8: if rng.random_bool(0.8) {
                    rng.random_range(0..3)
                } else {
                    rng.random_range(0..=255)
                },
            },
        })
        .collect();
    Ip::V6 {
        src,
        dst,
        tclass: rng.random(),
        flow: rng.random_range(0..0x10_0000),
        ext,
    }
}

/// An ICMP error quoting a flow: `inner` is the quoted packet's IP layer and transport
/// (the quote holds its IP header and the first `quote_l4` bytes of its layer 4).
pub fn icmp_error(v6: bool, ty: u8, inner: &Ip, inner_l4: &L4, quote_l4: usize) -> L4 {
    let l4 = l4_bytes(inner_l4, 0);
    let mut q = ip_packet(inner, inner_l4, &l4);
    let hl = match inner {
        Ip::V4 { options, .. } => 20 + options.len().div_ceil(4) * 4,
        Ip::V6 { ext, .. } => 40 + ext.iter().map(Ext::len).sum::<usize>(),
    };
    q.truncate(hl + quote_l4.min(l4.len()));
    let _ = v6;
    L4::Icmp {
        ty,
        code: if ty == 3 && !v6 { 4 } else { 0 },
        body: q,
    }
}

/// A TCP (ACK) or UDP frame over IPv4 or IPv6 (no options or extension headers) with `tags`
/// VLAN tags (802.1ad outermost, then 802.1Q), random addresses, ports, TOS / traffic class
/// and flow label, and `payload` bytes after the L4 header: the frame the per-block benches
/// size and aim exactly.
pub fn flow_frame(rng: &mut StdRng, v6: bool, tags: usize, udp: bool, payload: usize) -> FrameSpec {
    let mut spec = FrameSpec::tcp4(random_v4(rng), random_v4(rng), 1, 2, 0x10);
    if let Some(Ip::V4 { tos, id, df, .. }) = &mut spec.ip {
        *tos = rng.random();
        *id = rng.random();
        *df = rng.random();
    }
    if v6 {
        spec.ip = Some(Ip::V6 {
            src: random_v6(rng),
            dst: random_v6(rng),
            tclass: rng.random(),
            flow: rng.random_range(0..1 << 20),
            ext: Vec::new(),
        });
    }
    spec.vlans = (0..tags)
        .map(|i| {
            (
                if i == 0 { TPID_8021AD } else { 0x8100 },
                rng.random::<u16>(),
            )
        })
        .collect();
    spec.l4 = if udp {
        L4::Udp {
            sport: rng.random(),
            dport: rng.random(),
        }
    } else {
        L4::Tcp {
            sport: rng.random(),
            dport: rng.random(),
            flags: 0x10,
        }
    };
    spec.payload = payload;
    spec
}

/// A random frame spec: every kind the parser knows, mostly well-formed.
pub fn random_spec(rng: &mut StdRng) -> FrameSpec {
    let v6 = rng.random_bool(0.4);
    let kind = rng.random_range(0..20);
    let mut spec = FrameSpec {
        dst_mac: rng.random_range(0..1u64 << 48),
        src_mac: rng.random_range(0..1u64 << 48),
        vlans: random_vlans(rng),
        ip: None,
        ethertype: 0x0800,
        l4: L4::Other(0),
        payload: 0,
        min_len: if rng.random_bool(0.9) { 60 } else { 0 },
    };
    if kind == 0 {
        spec.ethertype = match rng.random_range(0..3) {
            0 => 0x0806,
            1 => 0x88cc,
            _ => rng.random(),
        };
        spec.payload = rng.random_range(0..100);
        return spec;
    }
    let (ip, l4) = if v6 {
        let (s, d) = (random_v6(rng), random_v6(rng));
        if kind <= 3 {
            (
                random_ipv6(rng, s, d),
                random_icmp(
                    rng,
                    true,
                    Ip::V6 {
                        src: d,
                        dst: s,
                        tclass: 0,
                        flow: 0,
                        ext: Vec::new(),
                    },
                ),
            )
        } else {
            (random_ipv6(rng, s, d), random_transport(rng))
        }
    } else {
        let (s, d) = (random_v4(rng), random_v4(rng));
        if kind <= 3 {
            (
                random_ipv4(rng, s, d),
                random_icmp(
                    rng,
                    false,
                    Ip::V4 {
                        src: d,
                        dst: s,
                        tos: 0,
                        id: 1,
                        df: true,
                        mf: false,
                        frag_offset: 0,
                        options: Vec::new(),
                    },
                ),
            )
        } else {
            (random_ipv4(rng, s, d), random_transport(rng))
        }
    };
    spec.ip = Some(ip);
    spec.l4 = l4;
    spec.payload = match rng.random_range(0..10) {
        0..=6 => rng.random_range(0..64),
        7 | 8 => rng.random_range(0..400),
        _ => rng.random_range(0..9000),
    };
    spec
}

/// A random ICMP message: mostly errors quoting a packet of `inner`'s addresses, sometimes
/// other types, bad quotes or short ones.
fn random_icmp(rng: &mut StdRng, v6: bool, mut inner: Ip) -> L4 {
    let ty = match (v6, rng.random_range(0..6)) {
        (false, 0..=2) => 3,
        (false, 3) => 11,
        (true, 0) => 1,
        (true, 1 | 2) => 2,
        (true, 3) => 3,
        _ => rng.random_range(0..=255),
    };
    if rng.random_bool(0.2) {
        // Quote of another family, or a fragment.
        if rng.random_bool(0.5) {
            inner = if v6 {
                Ip::V4 {
                    src: random_v4(rng),
                    dst: random_v4(rng),
                    tos: 0,
                    id: 0,
                    df: false,
                    mf: false,
                    frag_offset: 0,
                    options: Vec::new(),
                }
            } else {
                Ip::V6 {
                    src: random_v6(rng),
                    dst: random_v6(rng),
                    tclass: 0,
                    flow: 0,
                    ext: Vec::new(),
                }
            };
        } else if let Ip::V4 {
            frag_offset,
            options,
            ..
        } = &mut inner
        {
            *frag_offset = rng.random_range(0..3);
            *options = vec![1; rng.random_range(0..3) * 4];
        } else if let Ip::V6 { ext, .. } = &mut inner {
            ext.push(Ext::Options { kind: 0, len8: 0 });
        }
    }
    let inner_l4 = random_transport(rng);
    let quote = match rng.random_range(0..6) {
        0 => rng.random_range(0..8),
        _ => 8,
    };
    icmp_error(v6, ty, &inner, &inner_l4, quote)
}

/// Damages a frame: byte flips in the headers, a cut, a wrong length or checksum.
pub fn mutate(frame: &mut Vec<u8>, rng: &mut StdRng) {
    match rng.random_range(0..6) {
        0 | 1 => {
            let n = rng.random_range(1..=3);
            for _ in 0..n {
                if frame.is_empty() {
                    break;
                }
                let at = rng.random_range(0..frame.len().min(120));
                frame[at] ^= 1 << rng.random_range(0..8);
            }
        }
        2 => {
            let keep = rng.random_range(0..=frame.len());
            frame.truncate(keep);
        }
        3 => {
            // A random byte anywhere in the first 64.
            if !frame.is_empty() {
                let at = rng.random_range(0..frame.len().min(64));
                frame[at] = rng.random();
            }
        }
        4 => {
            // Extra padding (L beyond the IP length).
            let n = rng.random_range(1..200);
            frame.extend((0..n).map(|i| i as u8));
        }
        _ => {
            // A random 16-bit length/EtherType-looking field near the start.
            if frame.len() >= 40 {
                let at = rng.random_range(12..40);
                let v: u16 = rng.random();
                frame[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
        }
    }
}

/// A random frame: a random spec, built, mutated with probability `mutate_p`, or (rarely)
/// random bytes of any length up to 300.
pub fn random_frame(rng: &mut StdRng, mutate_p: f64) -> Vec<u8> {
    if rng.random_bool(0.03) {
        let n = rng.random_range(0..300);
        return (0..n).map(|_| rng.random()).collect();
    }
    let mut f = random_spec(rng).build();
    if rng.random_bool(mutate_p) {
        mutate(&mut f, rng);
    }
    f
}
