//! Completing the TCP/UDP checksum of frames that the local Linux stack handed over with
//! CHECKSUM_PARTIAL.
//!
//! On a veth (or `lo`) the sender leaves the L4 checksum to "the hardware": the field holds only
//! the pseudo-header sum and the receiving stack is told to trust the packet. An AF_PACKET
//! reader sees such a frame with `TP_STATUS_CSUMNOTREADY`; a NIC that forwards it must put a
//! real checksum in, or the backend (which receives it as an ordinary frame) drops it. The
//! checksum is computed afresh from the IP header and the segment (RFC 793, RFC 768, RFC 8200
//! section 8.1), so whatever the field held does not matter.

/// Ethertypes this module looks through.
const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;
/// IP protocol numbers.
const TCP: u8 = 6;
const UDP: u8 = 17;
/// IPv6 extension headers a checksum may sit behind.
const V6_HOP_BY_HOP: u8 = 0;
const V6_ROUTING: u8 = 43;
const V6_FRAGMENT: u8 = 44;
const V6_AUTH: u8 = 51;
const V6_DEST_OPTS: u8 = 60;
/// At most this many IPv6 extension headers are followed.
const MAX_V6_EXTENSIONS: usize = 8;

/// Why a frame's checksum was left as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// Not IPv4 or IPv6 (after at most two VLAN tags).
    NotIp,
    /// Neither TCP nor UDP.
    NotTcpUdp,
    /// A fragment: its checksum covers the whole datagram, which this frame is not.
    Fragment,
    /// Lengths that do not fit the frame, or a header too short.
    Malformed,
}

/// Writes the correct TCP or UDP checksum into `frame` (an Ethernet frame). Returns the
/// checksum written, or why none was.
pub fn complete_l4_checksum(frame: &mut [u8]) -> Result<u16, Skipped> {
    let (mut ethertype, mut at) = (be16(frame, 12).ok_or(Skipped::Malformed)?, 14);
    for _ in 0..2 {
        if ethertype != ETH_VLAN && ethertype != ETH_QINQ {
            break;
        }
        ethertype = be16(frame, at + 2).ok_or(Skipped::Malformed)?;
        at += 4;
    }
    let (protocol, l4_start, l4_len, pseudo) = match ethertype {
        ETH_IPV4 => ipv4(frame, at)?,
        ETH_IPV6 => ipv6(frame, at)?,
        _ => return Err(Skipped::NotIp),
    };
    let field = l4_start
        + match protocol {
            TCP => 16,
            UDP => 6,
            _ => return Err(Skipped::NotTcpUdp),
        };
    let end = l4_start + l4_len;
    let min_header = if protocol == TCP { 20 } else { 8 };
    if l4_len < min_header || end > frame.len() {
        return Err(Skipped::Malformed);
    }
    frame[field..field + 2].fill(0);
    let sum = fold(pseudo + ones_sum(&frame[l4_start..end]));
    let mut checksum = !sum;
    // UDP: a computed 0 is sent as all ones, 0 meaning "no checksum" (RFC 768).
    if protocol == UDP && checksum == 0 {
        checksum = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&checksum.to_be_bytes());
    Ok(checksum)
}

/// (protocol, L4 start, L4 length, pseudo-header sum) of an IPv4 packet at `ip`.
fn ipv4(frame: &[u8], ip: usize) -> Result<(u8, usize, usize, u64), Skipped> {
    let first = *frame.get(ip).ok_or(Skipped::Malformed)?;
    let header_len = usize::from(first & 0xf) * 4;
    if first >> 4 != 4 || header_len < 20 || frame.len() < ip + header_len {
        return Err(Skipped::Malformed);
    }
    let total = usize::from(be16(frame, ip + 2).ok_or(Skipped::Malformed)?);
    let flags_offset = be16(frame, ip + 6).ok_or(Skipped::Malformed)?;
    if flags_offset & 0x3fff != 0 {
        return Err(Skipped::Fragment);
    }
    let protocol = frame[ip + 9];
    let l4_len = total.checked_sub(header_len).ok_or(Skipped::Malformed)?;
    let pseudo = ones_sum(&frame[ip + 12..ip + 20]) + u64::from(protocol) + l4_len as u64;
    Ok((protocol, ip + header_len, l4_len, pseudo))
}

/// (protocol, L4 start, L4 length, pseudo-header sum) of an IPv6 packet at `ip`, behind its
/// extension headers.
fn ipv6(frame: &[u8], ip: usize) -> Result<(u8, usize, usize, u64), Skipped> {
    if frame.len() < ip + 40 || frame[ip] >> 4 != 6 {
        return Err(Skipped::Malformed);
    }
    let payload = usize::from(be16(frame, ip + 4).ok_or(Skipped::Malformed)?);
    let mut next = frame[ip + 6];
    let mut at = ip + 40;
    for _ in 0..MAX_V6_EXTENSIONS {
        let len = match next {
            V6_HOP_BY_HOP | V6_ROUTING | V6_DEST_OPTS => {
                (usize::from(*frame.get(at + 1).ok_or(Skipped::Malformed)?) + 1) * 8
            }
            V6_AUTH => (usize::from(*frame.get(at + 1).ok_or(Skipped::Malformed)?) + 2) * 4,
            V6_FRAGMENT => return Err(Skipped::Fragment),
            _ => break,
        };
        next = frame[at];
        at += len;
    }
    let l4_len = (ip + 40 + payload)
        .checked_sub(at)
        .ok_or(Skipped::Malformed)?;
    // Source and destination, the upper-layer length (32 bits) and the next header.
    let pseudo = ones_sum(&frame[ip + 8..ip + 40]) + l4_len as u64 + u64::from(next);
    Ok((next, at, l4_len, pseudo))
}

fn be16(frame: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
}

/// Sum of the big-endian 16-bit words of `bytes` (an odd last byte padded with zero),
/// unfolded.
fn ones_sum(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(2);
    let mut sum: u64 = words
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

    const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x10];
    const DST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    fn build(
        builder: etherparse::PacketBuilderStep<etherparse::UdpHeader>,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut v = Vec::new();
        builder.write(&mut v, payload).expect("builds");
        v
    }

    /// The L4 checksum field's offset and the checksum etherparse computes for the frame (the
    /// independent reference).
    fn reference(frame: &[u8]) -> (usize, u16) {
        let p = SlicedPacket::from_ethernet(frame).expect("etherparse parses it");
        let (src, dst, ipv4) = match &p.net {
            Some(NetSlice::Ipv4(v4)) => (
                v4.header().source().to_vec(),
                v4.header().destination().to_vec(),
                true,
            ),
            Some(NetSlice::Ipv6(v6)) => (
                v6.header().source().to_vec(),
                v6.header().destination().to_vec(),
                false,
            ),
            _ => panic!("not IP"),
        };
        let start = |s: &[u8]| s.as_ptr() as usize - frame.as_ptr() as usize;
        match p.transport {
            Some(TransportSlice::Udp(u)) => {
                let h = u.to_header();
                let c = if ipv4 {
                    h.calc_checksum_ipv4_raw(
                        src.clone().try_into().expect("4"),
                        dst.clone().try_into().expect("4"),
                        u.payload(),
                    )
                } else {
                    h.calc_checksum_ipv6_raw(
                        src.clone().try_into().expect("16"),
                        dst.clone().try_into().expect("16"),
                        u.payload(),
                    )
                }
                .expect("checksum");
                (start(u.slice()) + 6, c)
            }
            Some(TransportSlice::Tcp(t)) => {
                let h = t.to_header();
                let c = if ipv4 {
                    h.calc_checksum_ipv4_raw(
                        src.clone().try_into().expect("4"),
                        dst.clone().try_into().expect("4"),
                        t.payload(),
                    )
                } else {
                    h.calc_checksum_ipv6_raw(
                        src.clone().try_into().expect("16"),
                        dst.clone().try_into().expect("16"),
                        t.payload(),
                    )
                }
                .expect("checksum");
                (start(t.slice()) + 16, c)
            }
            _ => panic!("not TCP/UDP"),
        }
    }

    /// Puts what the Linux stack leaves for CHECKSUM_PARTIAL into the field (the folded
    /// pseudo-header sum), then completes it; the result must be etherparse's checksum.
    fn check_completes(mut frame: Vec<u8>) {
        let (field, want) = reference(&frame);
        assert_eq!(
            u16::from_be_bytes([frame[field], frame[field + 1]]),
            want,
            "etherparse built a correct frame"
        );
        frame[field..field + 2].copy_from_slice(&0x1234u16.to_be_bytes());
        let got = complete_l4_checksum(&mut frame).expect("completed");
        assert_eq!(got, want);
        assert_eq!(u16::from_be_bytes([frame[field], frame[field + 1]]), want);
    }

    #[test]
    fn udp_over_ipv4_padded_to_the_minimum_frame() {
        let mut f = build(
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                .ipv4([10, 77, 0, 10], [10, 77, 1, 1], 64)
                .udp(40000, 53),
            b"abc",
        );
        // Ethernet padding after the IP packet is not part of the checksum.
        f.resize(60, 0xee);
        check_completes(f);
    }

    #[test]
    fn tcp_over_ipv4_behind_two_vlan_tags() {
        let f = build_tcp(
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                .single_vlan(7.try_into().expect("vlan id"))
                .ipv4([10, 77, 0, 10], [10, 77, 1, 1], 64),
            b"GET / HTTP/1.1\r\n\r\n",
        );
        // etherparse writes 0x8100 + tag; add an outer 802.1ad tag by hand.
        let mut q = f[..12].to_vec();
        q.extend_from_slice(&[0x88, 0xa8, 0x00, 0x05]);
        q.extend_from_slice(&f[12..]);
        check_completes(q);
    }

    fn build_tcp(
        b: etherparse::PacketBuilderStep<etherparse::IpHeaders>,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut v = Vec::new();
        b.tcp(40000, 80, 0x0102_0304, 65535)
            .psh()
            .ack(0x0a0b_0c0d)
            .write(&mut v, payload)
            .expect("builds");
        v
    }

    #[test]
    fn tcp_over_ipv4_with_options_and_an_odd_length() {
        let mut f = build_tcp(
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv4([192, 0, 2, 1], [198, 51, 100, 7], 9),
            b"odd",
        );
        // Add 4 bytes of IPv4 options (NOP x4): IHL 6, total length + 4, header checksum
        // is not what this module looks at.
        f.splice(34..34, [1u8, 1, 1, 1]);
        f[14] = 0x46;
        let total = u16::from_be_bytes([f[16], f[17]]) + 4;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        check_completes(f);
    }

    #[test]
    fn udp_and_tcp_over_ipv6_behind_extension_headers() {
        let src = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99];
        let f = build(
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                .ipv6(src, dst, 64)
                .udp(5353, 53),
            b"query",
        );
        check_completes(f.clone());
        // The same packet with a hop-by-hop header (8 bytes: next = UDP, PadN) in front.
        let mut h = f.clone();
        h.splice(54..54, [UDP, 0, 1, 4, 0, 0, 0, 0]);
        h[20] = V6_HOP_BY_HOP;
        let payload = u16::from_be_bytes([h[18], h[19]]) + 8;
        h[18..20].copy_from_slice(&payload.to_be_bytes());
        check_completes(h);
        let t = build_tcp(
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv6(src, dst, 64),
            b"hello",
        );
        check_completes(t);
    }

    #[test]
    fn a_udp_checksum_of_zero_is_sent_as_all_ones() {
        // Choose a payload word that makes the sum 0xffff: the checksum computes to 0, which
        // UDP must send as 0xffff (RFC 768).
        let builder = || {
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .udp(1000, 2000)
        };
        let f = build(builder(), &[0, 0]);
        let (field, c) = reference(&f);
        assert_ne!(c, 0xffff, "the chosen packet needs a non-trivial word");
        let mut z = build(builder(), &c.to_be_bytes());
        assert_eq!(complete_l4_checksum(&mut z), Ok(0xffff));
        assert_eq!(&z[field..field + 2], &[0xff, 0xff]);
    }

    #[test]
    fn fragments_other_protocols_and_short_frames_are_left_alone() {
        let mut f = build(
            PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .udp(1000, 2000),
            b"x",
        );
        let mut frag = f.clone();
        frag[20] = 0x20; // more fragments
        let before = frag.clone();
        assert_eq!(complete_l4_checksum(&mut frag), Err(Skipped::Fragment));
        assert_eq!(frag, before);
        let mut icmp = f.clone();
        icmp[23] = 1;
        assert_eq!(complete_l4_checksum(&mut icmp), Err(Skipped::NotTcpUdp));
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(complete_l4_checksum(&mut arp), Err(Skipped::NotIp));
        // A total length beyond the frame.
        f[16..18].copy_from_slice(&2000u16.to_be_bytes());
        assert_eq!(complete_l4_checksum(&mut f), Err(Skipped::Malformed));
        for n in 0..42 {
            let mut cut = build(
                PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
                    .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                    .udp(1000, 2000),
                b"x",
            );
            cut.truncate(n);
            assert!(complete_l4_checksum(&mut cut).is_err(), "{n} bytes");
        }
    }
}
