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

use super::parse::{ones_complement_sum, Family, IpHeaders, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
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

/// Length of the frame the action produces.
#[inline]
pub fn output_len(
    frame_len: usize,
    h: &IpHeaders,
    delivery: Delivery,
    backend: &BackendEntry,
) -> usize {
    let outer = if backend.is_ipv6 { IPV6_HDR } else { IPV4_HDR };
    match delivery {
        Delivery::L2Dsr => frame_len,
        Delivery::Ipip => h.l3_offset + outer + h.ip_len(),
        Delivery::Gue => h.l3_offset + outer + UDP_HDR + h.ip_len(),
    }
}

#[inline]
fn put_mac(out: &mut [u8], at: usize, mac: u64) {
    out[at..at + 6].copy_from_slice(&mac.to_be_bytes()[2..8]);
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
    let len = output_len(frame.len(), h, delivery, backend);
    let out = &mut out[..len];
    if delivery == Delivery::L2Dsr {
        out.copy_from_slice(frame);
        put_mac(out, 0, backend.mac);
        put_mac(out, 6, settings.local_mac);
        return len;
    }
    let l2 = h.l3_offset;
    out[..l2].copy_from_slice(&frame[..l2]);
    put_mac(out, 0, backend.mac);
    put_mac(out, 6, settings.local_mac);
    let inner = &frame[h.l3_offset..h.l3_end];
    let inner_proto = match h.family {
        Family::V4 => super::parse::proto::IPIP,
        Family::V6 => super::parse::proto::IPV6,
    };
    let gue = delivery == Delivery::Gue;
    let l4_len = if gue { UDP_HDR } else { 0 } + inner.len();
    let next = if gue {
        super::parse::proto::UDP
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
        // IPv6 forbids a zero UDP checksum (RFC 8200 section 8.1).
        let c = !ones_complement_sum(&out[udp_at..], pseudo_v6(src, dst, l4_len as u32));
        let c = if c == 0 { 0xffff } else { c };
        out[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
    }
    len
}

/// The IPv6 pseudo-header sum (RFC 8200 section 8.1) for UDP.
fn pseudo_v6(src: u128, dst: u128, len: u32) -> u32 {
    let mut s = 0u32;
    for a in [src, dst] {
        for i in 0..8 {
            s += ((a >> (112 - 16 * i)) & 0xffff) as u32;
        }
    }
    s + (len >> 16) + (len & 0xffff) + u32::from(super::parse::proto::UDP)
}
