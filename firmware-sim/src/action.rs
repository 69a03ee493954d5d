//! The frame editor: what a forwarded frame looks like on the wire (docs/pipeline.md,
//! "Actions").
//!
//! - `L2_DSR`: the frame unchanged but for the destination MAC (the backend's) and the source
//!   MAC (the NIC's); VLAN tags and padding kept.
//! - `IPIP`: L2 header (tags kept, MACs rewritten, last EtherType set to the outer family),
//!   then an outer IP header, then the inner IP packet without Ethernet padding.
//! - `GUE`: the same with a UDP header (GUE variant 1: the payload is the inner IP packet).
//!
//! The outer family is the backend's (`is_ipv6`); the protocol / next header says what the
//! inner packet is (4 for IPv4, 41 for IPv6; 17 for GUE).

use crate::parse::{ones_complement_sum, Family, IpHeaders, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use nlb_hw::enums::Delivery;
use nlb_hw::layouts::BackendEntry;
use nlb_hw::NicSettings;

/// Largest frame (without FCS) the NIC transmits: 9000-byte MTU + Ethernet header + one VLAN
/// tag. Longer results are dropped with `TOO_BIG`.
pub const MAX_FRAME: usize = 9018;
/// TTL / hop limit of outer headers.
pub const OUTER_TTL: u8 = 64;
/// GUE source ports are `GUE_SRC_PORT_BASE | (flow_hash & GUE_SRC_PORT_MASK)` (49152..=65535).
pub const GUE_SRC_PORT_BASE: u16 = 0xC000;
/// See [`GUE_SRC_PORT_BASE`].
pub const GUE_SRC_PORT_MASK: u32 = 0x3FFF;

const IPV4_HDR: usize = 20;
const IPV6_HDR: usize = 40;
const UDP_HDR: usize = 8;

/// What the editor needs of a parsed frame (the pipeline carries this instead of the whole
/// [`IpHeaders`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edit {
    /// Offset of the IP header (= length of the L2 header).
    pub l3_offset: u32,
    /// End of the IP packet.
    pub l3_end: u32,
    /// IPv4 identification (low 16 bits used).
    pub ip_id: u32,
    /// IP version.
    pub family: Family,
    /// TOS / traffic class.
    pub tos: u8,
    /// IPv4 DF (true for IPv6).
    pub dont_fragment: bool,
}

impl Edit {
    /// The editor's view of parsed headers (offsets fit in 32 bits: `l3_end` is at most
    /// 22 + 40 + 65535).
    #[inline]
    pub fn of(h: &IpHeaders) -> Edit {
        Edit {
            l3_offset: h.l3_offset as u32,
            l3_end: h.l3_end as u32,
            ip_id: h.ip_id,
            family: h.family,
            tos: h.tos,
            dont_fragment: h.dont_fragment,
        }
    }
}

/// Length of the frame the action produces.
#[inline]
pub fn output_len(
    frame_len: usize,
    h: &IpHeaders,
    delivery: Delivery,
    backend: &BackendEntry,
) -> usize {
    edit_len(frame_len, &Edit::of(h), delivery, backend)
}

/// [`output_len`] on the editor's view.
#[inline]
pub(crate) fn edit_len(
    frame_len: usize,
    e: &Edit,
    delivery: Delivery,
    backend: &BackendEntry,
) -> usize {
    let outer = if backend.is_ipv6 { IPV6_HDR } else { IPV4_HDR };
    let ip_len = (e.l3_end - e.l3_offset) as usize;
    match delivery {
        Delivery::L2Dsr => frame_len,
        Delivery::Ipip => e.l3_offset as usize + outer + ip_len,
        Delivery::Gue => e.l3_offset as usize + outer + UDP_HDR + ip_len,
    }
}

/// `out.copy_from_slice(src)` (equal lengths), without a library call for the frames of up to
/// 64 bytes that make up most small-packet traffic: two overlapping 32-byte moves.
#[inline]
fn copy_frame(out: &mut [u8], src: &[u8]) {
    let n = src.len();
    if (32..=64).contains(&n) && out.len() == n {
        out[..32].copy_from_slice(&src[..32]);
        out[n - 32..].copy_from_slice(&src[n - 32..]);
    } else {
        out.copy_from_slice(src);
    }
}

/// Destination MAC = the backend's, source MAC = the NIC's (the first 12 bytes of `out`).
#[inline]
fn put_macs(out: &mut [u8], dst: u64, src: u64) {
    if let Some(m) = out.get_mut(..12) {
        m[..6].copy_from_slice(&dst.to_be_bytes()[2..8]);
        m[6..].copy_from_slice(&src.to_be_bytes()[2..8]);
    }
}

/// The outer IPv4 source: the configured prefix, host bits from the flow hash.
#[inline]
pub fn outer_src_v4(settings: &NicSettings, flow_hash: u32) -> u32 {
    let len = u32::from(settings.outer_src_v4_len.min(32));
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (settings.outer_src_v4 & mask) | (flow_hash & !mask)
}

/// The outer IPv6 source: the configured prefix, host bits from the flow hash (zero-extended
/// to 128 bits, so only the low 32 host bits vary).
#[inline]
pub fn outer_src_v6(settings: &NicSettings, flow_hash: u32) -> u128 {
    let len = u32::from(settings.outer_src_v6_len.min(128));
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    (settings.outer_src_v6 & mask) | (u128::from(flow_hash) & !mask)
}

/// GUE source port of a flow.
#[inline]
pub fn gue_src_port(flow_hash: u32) -> u16 {
    GUE_SRC_PORT_BASE | (flow_hash & GUE_SRC_PORT_MASK) as u16
}

/// Writes the output frame into `out`, which must hold [`output_len`] bytes; returns that
/// length. The caller checks `MAX_FRAME` first.
pub fn write_frame(
    frame: &[u8],
    h: &IpHeaders,
    delivery: Delivery,
    backend: &BackendEntry,
    settings: &NicSettings,
    flow_hash: u32,
    out: &mut [u8],
) -> usize {
    write_edit(
        frame,
        &Edit::of(h),
        delivery,
        backend,
        settings,
        flow_hash,
        out,
    )
}

/// [`write_frame`] on the editor's view.
#[inline]
pub(crate) fn write_edit(
    frame: &[u8],
    h: &Edit,
    delivery: Delivery,
    backend: &BackendEntry,
    settings: &NicSettings,
    flow_hash: u32,
    out: &mut [u8],
) -> usize {
    let len = edit_len(frame.len(), h, delivery, backend);
    let out = &mut out[..len];
    if delivery == Delivery::L2Dsr {
        copy_frame(out, frame);
        put_macs(out, backend.mac, settings.local_mac);
        return len;
    }
    let l2 = h.l3_offset as usize;
    out[..l2].copy_from_slice(&frame[..l2]);
    put_macs(out, backend.mac, settings.local_mac);
    let inner = &frame[l2..h.l3_end as usize];
    let inner_proto = match h.family {
        Family::V4 => crate::parse::proto::IPIP,
        Family::V6 => crate::parse::proto::IPV6,
    };
    let gue = delivery == Delivery::Gue;
    let l4_len = if gue { UDP_HDR } else { 0 } + inner.len();
    let next = if gue {
        crate::parse::proto::UDP
    } else {
        inner_proto
    };
    let (outer_len, src, dst) = if backend.is_ipv6 {
        out[l2 - 2..l2].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        let src = outer_src_v6(settings, flow_hash);
        let o = &mut out[l2..l2 + IPV6_HDR];
        let word0 = (6u32 << 28) | (u32::from(h.tos) << 20) | (flow_hash & 0x000F_FFFF);
        o[0..4].copy_from_slice(&word0.to_be_bytes());
        o[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        o[6] = next;
        o[7] = OUTER_TTL;
        o[8..24].copy_from_slice(&src.to_be_bytes());
        o[24..40].copy_from_slice(&backend.addr.to_be_bytes());
        (IPV6_HDR, src, backend.addr)
    } else {
        out[l2 - 2..l2].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let src = outer_src_v4(settings, flow_hash);
        let dst = backend.addr as u32;
        let (id, df) = match h.family {
            Family::V4 => (h.ip_id as u16, h.dont_fragment),
            Family::V6 => (0, true),
        };
        let o = &mut out[l2..l2 + IPV4_HDR];
        o[0] = 0x45;
        o[1] = h.tos;
        o[2..4].copy_from_slice(&((IPV4_HDR + l4_len) as u16).to_be_bytes());
        o[4..6].copy_from_slice(&id.to_be_bytes());
        o[6..8].copy_from_slice(&(if df { 0x4000u16 } else { 0 }).to_be_bytes());
        o[8] = OUTER_TTL;
        o[9] = next;
        o[10..12].copy_from_slice(&[0, 0]);
        o[12..16].copy_from_slice(&src.to_be_bytes());
        o[16..20].copy_from_slice(&dst.to_be_bytes());
        let c = !ones_complement_sum(o, 0);
        o[10..12].copy_from_slice(&c.to_be_bytes());
        (IPV4_HDR, u128::from(src), u128::from(dst))
    };
    let mut at = l2 + outer_len;
    let udp_at = at;
    if gue {
        let u = &mut out[at..at + UDP_HDR];
        u[0..2].copy_from_slice(&gue_src_port(flow_hash).to_be_bytes());
        u[2..4].copy_from_slice(&settings.gue_port.to_be_bytes());
        u[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        u[6..8].copy_from_slice(&[0, 0]);
        at += UDP_HDR;
    }
    out[at..at + inner.len()].copy_from_slice(inner);
    if gue && backend.is_ipv6 {
        // Pseudo header, UDP header (checksum 0), then the payload's share (what the RTL's
        // nlb_l3_csum computes as the frame streams in). IPv6 forbids a zero UDP checksum
        // (RFC 8200 section 8.1).
        let payload = u32::from(edit_payload_sum(frame, h));
        let c = !ones_complement_sum(
            &out[udp_at..udp_at + UDP_HDR],
            pseudo_v6(src, dst, l4_len as u32) + payload,
        );
        let c = if c == 0 { 0xffff } else { c };
        out[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
    }
    len
}

/// The ones'-complement sum of a frame's IP packet (bytes `l3_offset..l3_end`, Ethernet
/// padding excluded), folded to 16 bits: 0 only when every byte is 0. The GUE-over-IPv6 UDP
/// checksum's share of the payload (`l3_offset` is even, so the packet's words are the
/// frame's); the RTL's `nlb_l3_csum` computes it as the frame streams in.
pub fn payload_sum(frame: &[u8], h: &IpHeaders) -> u16 {
    edit_payload_sum(frame, &Edit::of(h))
}

/// [`payload_sum`] on the editor's view.
#[inline]
fn edit_payload_sum(frame: &[u8], e: &Edit) -> u16 {
    ones_complement_sum(&frame[e.l3_offset as usize..e.l3_end as usize], 0)
}

/// The IPv6 pseudo-header sum (RFC 8200 section 8.1) for UDP.
fn pseudo_v6(src: u128, dst: u128, len: u32) -> u32 {
    let mut s = 0u32;
    for a in [src, dst] {
        for i in 0..8 {
            s += ((a >> (112 - 16 * i)) & 0xffff) as u32;
        }
    }
    s + (len >> 16) + (len & 0xffff) + u32::from(crate::parse::proto::UDP)
}
