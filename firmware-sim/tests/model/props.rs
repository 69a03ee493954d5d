//! Property tests: no byte string can crash the model; affinity, fragments and established
//! connections keep their backend; the batch API equals one packet at a time.

use crate::common;

use common::*;
use firmware_sim::{BatchOutput, CtOutcome, ModelDevice};
use nlb_hw::enums::{KeyType, Verdict};
use nlb_hw::layouts::MaglevSlot;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn valid_frames() -> Vec<Vec<u8>> {
    vec![
        tcp(ip("198.51.100.1"), 1000, ip(VIP4), 80, SYN, b"payload"),
        tcp_vlan(ip("198.51.100.1"), 1000, ip(VIP4), 443, ACK, b"", &[5, 6]),
        udp(ip("198.51.100.1"), 1000, ip(VIP4), 53, b"q"),
        udp(ip("2001:db8:aaaa::1"), 5, ip(VIP6), 9, &[1u8; 40]),
        ipv6_with_ext(
            &tcp(ip("2001:db8:aaaa::1"), 5, ip(VIP6), 443, ACK, b"x"),
            &[(0, 8), (60, 16)],
        ),
        icmp4_error(
            ip("192.0.2.254"),
            ip(VIP4),
            3,
            4,
            [0; 4],
            &ip_part(&tcp(ip(VIP4), 80, ip("198.51.100.1"), 1000, ACK, b""))[..28],
        ),
        ipv4_fragments(
            &udp(ip("198.51.100.1"), 1, ip(MULTI_UDP_VIP), 1500, &[0u8; 100]),
            7,
            48,
        )
        .remove(1),
    ]
}

fn check_any(d: &mut ModelDevice, frame: &[u8]) {
    let (r, out) = send(d, frame);
    assert_eq!(r.frame_len, frame.len());
    if r.verdict == Verdict::Forward {
        assert_eq!(out.len(), r.out_len);
        assert!(out.len() <= firmware_sim::action::MAX_FRAME);
    } else {
        assert_eq!(r.out_len, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut d = standard_device();
        check_any(&mut d, &bytes);
        // Also behind an Ethernet header announcing IPv4 / IPv6.
        for et in [[0x08u8, 0x00], [0x86, 0xdd], [0x81, 0x00]] {
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, et[0], et[1]];
            f.extend_from_slice(&bytes);
            check_any(&mut d, &f);
        }
    }

    #[test]
    fn mutated_frames_never_panic(
        which in 0usize..7,
        edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8),
        cut in any::<u16>(),
    ) {
        let mut d = standard_device();
        let mut f = valid_frames().swap_remove(which);
        for (at, v) in edits {
            let i = usize::from(at) % f.len();
            f[i] = v;
        }
        check_any(&mut d, &f);
        let n = usize::from(cut) % (f.len() + 1);
        check_any(&mut d, &f[..n]);
    }

    #[test]
    fn the_same_affinity_key_gives_the_same_backend(
        a in any::<u32>(), p1 in any::<u16>(), p2 in any::<u16>(),
    ) {
        let mut d = standard_device();
        let c = IpAddr::V4(Ipv4Addr::from(a));
        // CLIENT_IP (VIP4 UDP 53): ports do not matter.
        let (r1, _) = send(&mut d, &udp(c, p1, ip(VIP4), 53, b""));
        let (r2, _) = send(&mut d, &udp(c, p2, ip(VIP4), 53, b""));
        prop_assert_eq!(r1.verdict, Verdict::Forward);
        prop_assert_eq!(r1.backend, r2.backend);
        // CLIENT_IP_PROTO (VIP4 TCP 443, tracked: ACKs miss and use Maglev).
        let (r1, _) = send(&mut d, &tcp(c, p1, ip(VIP4), 443, ACK, b""));
        let (r2, _) = send(&mut d, &tcp(c, p2, ip(VIP4), 443, ACK, b""));
        prop_assert_eq!(r1.backend, r2.backend);
        // NONE: the same 5-tuple again.
        let (r1, _) = send(&mut d, &tcp(c, p1, ip(VIP4), 80, SYN, b""));
        let (r2, _) = send(&mut d, &tcp(c, p1, ip(VIP4), 80, SYN, b""));
        prop_assert_eq!(r1.backend, r2.backend);
    }

    #[test]
    fn all_fragments_of_a_datagram_reach_one_backend(
        a in any::<u32>(), b in any::<u128>(), sport in any::<u16>(),
        len in 64usize..1400, chunk8 in 1usize..40, id in any::<u16>(), v6 in any::<bool>(),
    ) {
        // At least two fragments (a single piece is a whole packet).
        prop_assume!(chunk8 * 8 < len + 8);
        let mut d = standard_device();
        let payload = vec![0x5au8; len];
        let frags = if v6 {
            let c = IpAddr::V6(Ipv6Addr::from(b | 1));
            ipv6_fragments(&udp(c, sport, ip(VIP6), 4000, &payload), u32::from(id), chunk8 * 8)
        } else {
            let c = IpAddr::V4(Ipv4Addr::from(a));
            ipv4_fragments(&udp(c, sport, ip(FRAG_VIP4), 4000, &payload), id, chunk8 * 8)
        };
        let mut backends = std::collections::BTreeSet::new();
        for f in &frags {
            let (r, _) = send(&mut d, f);
            prop_assert_eq!(r.verdict, Verdict::Forward);
            prop_assert_eq!(r.key, Some(KeyType::Tuple3));
            backends.insert(r.backend);
        }
        prop_assert_eq!(backends.len(), 1);
    }

    #[test]
    fn an_established_connection_keeps_its_backend_when_it_leaves_the_slots(
        a in any::<u32>(), sport in 1u16.., udp_flow in any::<bool>(),
    ) {
        let mut d = standard_device();
        d.set_auto_learn(true);
        let c = IpAddr::V4(Ipv4Addr::from(a));
        // Pool 0 (NONE, tracked) serves VIP4 TCP 80 and FRAG_VIP4 UDP.
        let first = if udp_flow {
            udp(c, sport, ip(FRAG_VIP4), 4000, b"x")
        } else {
            tcp(c, sport, ip(VIP4), 80, SYN, b"")
        };
        let (r, _) = send(&mut d, &first);
        let chosen = r.backend.unwrap();
        // Bank 1: the chosen backend removed from every slot of pool 0 (still a valid entry).
        let mut t = standard_tables();
        let p = t.pools[0];
        let replacement = if chosen == 1 { 2 } else { 1 };
        for s in p.maglev_base..p.maglev_base + p.maglev_size {
            if t.maglev[s as usize].backend == chosen {
                t.maglev[s as usize] = MaglevSlot { backend: replacement };
            }
        }
        let mut d2 = ModelDevice::from_tables(t, test_settings());
        *d2.conntrack_mut() = d.conntrack().clone();
        let next = if udp_flow {
            udp(c, sport, ip(FRAG_VIP4), 4000, b"y")
        } else {
            tcp(c, sport, ip(VIP4), 80, ACK, b"data")
        };
        let (r, _) = send(&mut d2, &next);
        prop_assert_eq!(r.conntrack, CtOutcome::Hit);
        prop_assert_eq!(r.backend, Some(chosen));
    }

    #[test]
    fn a_batch_equals_one_packet_at_a_time(
        picks in proptest::collection::vec((0usize..7, any::<u16>()), 1..60),
    ) {
        let base = valid_frames();
        let frames: Vec<Vec<u8>> = picks
            .iter()
            .map(|&(w, port)| {
                let mut f = base[w].clone();
                // Vary the client port bytes of untagged v4 TCP/UDP a little.
                if w == 0 || w == 2 {
                    f[34..36].copy_from_slice(&port.to_be_bytes());
                    // UDP checksum may now be wrong, which the pipeline does not check; TCP
                    // checksums are not checked either.
                }
                f
            })
            .collect();
        let mut one = standard_device();
        let singles: Vec<_> = frames.iter().map(|f| send(&mut one, f)).collect();
        let mut batch = standard_device();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let mut out = BatchOutput::new();
        batch.receive_batch(&refs, &mut out);
        prop_assert_eq!(out.results.len(), frames.len());
        for (i, (r, o)) in singles.iter().enumerate() {
            prop_assert_eq!(&out.results[i], r);
            prop_assert_eq!(out.frame(i), o.as_slice());
        }
        for k in [nlb_hw::enums::Reason::Forwarded, nlb_hw::enums::Reason::NoRule] {
            prop_assert_eq!(one.counters().reason(k), batch.counters().reason(k));
        }
    }
}
