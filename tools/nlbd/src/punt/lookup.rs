//! The decisions the slow path takes on the NIC's behalf (first fragments, punted ICMP
//! errors), taken by the reference semantics (`nlb-reference`'s `host` module, built from the
//! same lookup stages as the pipeline's, `docs/pipeline.md` §3–§8) over the serving table
//! bank and the host's copy of the connection table. Nothing here computes a lookup step.

use nlb_driver::conntrack::Conntrack;
use nlb_hw::{FlowKey, Tables};
use nlb_reference::{host, Flow, NoTrace};

/// Where a packet goes.
pub use nlb_reference::host::Choice;

/// Where a first fragment punted with its rule goes (SPEC R4.1–R4.3, `docs/pipeline.md` §6;
/// [`host::first_fragment`]): a TCP fragment of a pool that tracks connections goes to its
/// connection's backend, or, without one, to the backend a whole packet of the flow gets; a
/// SYN without ACK selects anew; any other fragment goes to the backend of the fragment key,
/// as the NIC sends fragments of single-rule VIPs. `flow` is the 5-tuple client → VIP;
/// `tcp_flags` are the first fragment's. `None` when the tables give it no backend.
pub fn first_fragment(
    tables: &Tables,
    conntrack: Option<&Conntrack>,
    rule: u16,
    flow: &FlowKey,
    tcp_flags: u8,
) -> Option<Choice> {
    let view = conntrack.map(Conntrack::view);
    host::first_fragment(
        tables,
        view.as_ref(),
        rule,
        &Flow::of_key(flow),
        tcp_flags,
        &mut NoTrace,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv4Header, PacketBuilder};
    use firmware_sim::ModelDevice;
    use flowtable_compiler::{compile, CompileOptions, HealthState};
    use nlb_hw::enums::{KeyType, Reason, Verdict};
    use std::net::Ipv4Addr;

    const CONFIG: &str = "
forwardingRules:
  - {name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}
  - {name: sticky, IPAddress: 203.0.113.54, IPProtocol: UDP, portRange: '5353', target: dns-sticky}
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80-90', target: web}
  - {name: one, IPAddress: 203.0.113.81, IPProtocol: TCP, portRange: '443', target: one}
targetPools:
  - {name: dns, region: r, instances: [a, b, c, d, e]}
  - {name: dns-sticky, region: r, instances: [a, b, c, d, e], sessionAffinity: CLIENT_IP}
  - {name: web, region: r, instances: [a, b, c, d, e]}
targetInstances:
  - {name: one, instance: c}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
  - {name: d, ip: 192.0.2.4, zone: z, mac: '02:00:00:00:00:0d'}
  - {name: e, ip: 192.0.2.5, zone: z, mac: '02:00:00:00:00:0e'}
";

    /// A frame client:sport → vip:dport; `first_fragment`: MF set (the first of several).
    fn frame(
        proto: u8,
        client: [u8; 4],
        sport: u16,
        vip: [u8; 4],
        dport: u16,
        first_fragment: bool,
    ) -> Vec<u8> {
        let mut ip = Ipv4Header::new(0, 64, IpNumber(proto), client, vip).unwrap();
        ip.identification = 77;
        ip.more_fragments = first_fragment;
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
            .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()));
        let mut f = Vec::new();
        if proto == 6 {
            b.tcp(sport, dport, 1, 1000)
                .ack(1)
                .write(&mut f, &[0u8; 64])
                .unwrap();
        } else {
            b.udp(sport, dport).write(&mut f, &[0u8; 64]).unwrap();
        }
        f
    }

    /// The slow path's choices agree with the golden model (`firmware-sim`, a separate
    /// implementation of the pipeline): a first UDP fragment, and any fragment of a pool that
    /// does not track connections, goes where the NIC sends the same fragment on a VIP with
    /// one rule; a first TCP fragment of a tracking pool without a connection goes where the
    /// NIC sends a whole packet of the flow.
    #[test]
    fn first_fragments_go_where_the_golden_model_sends_them() {
        let (config, d) = nlb_config::parse_config("t.yaml", CONFIG);
        assert!(d.is_empty(), "{d}");
        let c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
        let t = &c.tables;
        let mut nic = ModelDevice::from_tables(t.clone(), c.nic);
        let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
        let mut backends = std::collections::BTreeSet::new();
        let cases: [(u8, [u8; 4], u16); 4] = [
            (17, [203, 0, 113, 53], 53),
            (17, [203, 0, 113, 54], 5353),
            (6, [203, 0, 113, 80], 85),
            (6, [203, 0, 113, 81], 443),
        ];
        for i in 0..400u32 {
            let (proto, vip, dport) = cases[(i % 4) as usize];
            let client = [198, 51, 100 + (i % 3) as u8, (i % 250 + 1) as u8];
            let sport = 1024 + (i * 7919 % 60000) as u16;
            let key = FlowKey {
                key_type: KeyType::Tuple5,
                protocol: proto,
                src_port: sport,
                dst_port: dport,
                src_addr: nlb_hw::hash::addr_to_u128(Ipv4Addr::from(client).into()),
                dst_addr: nlb_hw::hash::addr_to_u128(Ipv4Addr::from(vip).into()),
            };
            // What the golden model does with the first fragment and with a whole packet.
            let frag = nic
                .receive(&frame(proto, client, sport, vip, dport, true), &mut out)
                .unwrap();
            let whole = nic
                .receive(&frame(proto, client, sport, vip, dport, false), &mut out)
                .unwrap();
            assert_eq!(whole.verdict, Verdict::Forward);
            let rule = whole.rule.unwrap();
            let tracking_tcp = proto == 6 && t.pools[usize::from(whole.pool.unwrap())].track;
            let want = if tracking_tcp {
                assert_eq!(
                    (frag.verdict, frag.reason, frag.rule),
                    (Verdict::Punt, Reason::FragmentNeedsState, Some(rule))
                );
                whole
            } else {
                assert_eq!(frag.verdict, Verdict::Forward, "{frag:?}");
                frag
            };
            let got = first_fragment(t, None, rule, &key, 0x10).expect("a backend");
            assert_eq!(
                (Some(got.rule), Some(got.pool), Some(got.backend)),
                (want.rule, want.pool, want.backend),
                "case {i}"
            );
            backends.insert(got.backend);
        }
        assert!(backends.len() >= 4, "the flows reach several backends");
    }

    #[test]
    fn misses_are_none() {
        let (config, _) = nlb_config::parse_config("t.yaml", CONFIG);
        let c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
        let t = &c.tables;
        let key = FlowKey::default();
        assert_eq!(first_fragment(t, None, 200, &key, 0), None, "no such rule");
        let mut broken = t.clone();
        for p in broken.pools.iter_mut() {
            p.maglev_size = 0;
        }
        assert_eq!(first_fragment(&broken, None, 0, &key, 0), None, "no slot");
    }
}
