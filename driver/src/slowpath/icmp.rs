//! ICMP errors about load-balanced flows (SPEC R10.2) that reach the host.
//!
//! The NIC sends an ICMP error whose quote names a VIP flow to that flow's backend itself
//! (`ICMP_ERROR_FORWARDED`, `docs/pipeline.md` §3); none is punted by the current pipeline.
//! This module decides the ones that do reach the slow path anyway (a punt reason added later,
//! a frame handed up for another reason): the same reading of the quote as the pipeline's —
//! the reversed reading first (a backend's direct reply that bounced), the forward reading if
//! no VIP has the quoted source — then the flow's rule, its ACL on the client, the connection
//! table (an established flow keeps its backend, SPEC R4.1) and else Maglev with the pool's
//! affinity key, exactly as for a packet of the flow.

use super::lookup::{self, Choice};
use crate::conntrack::Conntrack;
use firmware_sim::parse::{InnerFlow, IpHeaders};
use nlb_hw::enums::KeyType;
use nlb_hw::{FlowKey, Tables};

/// Why an ICMP error could not be sent to a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpMiss {
    /// Not an ICMP error message.
    NotAnError,
    /// An error without a usable quote (truncated, not TCP/UDP, a quoted later fragment).
    NoQuote,
    /// The quoted flow matches no forwarding rule.
    NoRule,
    /// The flow's client is outside the rule's source ranges.
    AclDenied,
    /// The pool has no backend for the flow.
    NoBackend,
}

impl IcmpMiss {
    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            IcmpMiss::NotAnError => "icmp_not_an_error",
            IcmpMiss::NoQuote => "icmp_no_quote",
            IcmpMiss::NoRule => "icmp_no_rule",
            IcmpMiss::AclDenied => "icmp_acl_denied",
            IcmpMiss::NoBackend => "icmp_no_backend",
        }
    }
}

/// The flow (client → VIP, 5-tuple) an ICMP error quote refers to (§3): the reversed reading
/// when a VIP entry exists for (protocol, quoted source), else the forward reading.
pub fn quoted_flow(tables: &Tables, quote: &InnerFlow) -> FlowKey {
    let reversed = lookup::vip_entry(tables, quote.protocol, quote.src).is_some();
    let (client, client_port, vip, vip_port) = if reversed {
        (quote.dst, quote.dst_port, quote.src, quote.src_port)
    } else {
        (quote.src, quote.src_port, quote.dst, quote.dst_port)
    };
    FlowKey {
        key_type: KeyType::Tuple5,
        protocol: quote.protocol,
        src_port: client_port,
        dst_port: vip_port,
        src_addr: client,
        dst_addr: vip,
    }
}

/// Where an ICMP error goes: the backend of the flow it quotes.
pub fn decide(
    tables: &Tables,
    conntrack: Option<&Conntrack>,
    headers: &IpHeaders,
) -> Result<Choice, IcmpMiss> {
    if !headers.icmp_error {
        return Err(IcmpMiss::NotAnError);
    }
    let quote = headers.icmp_inner.ok_or(IcmpMiss::NoQuote)?;
    let flow = quoted_flow(tables, &quote);
    let rule = lookup::rule_for(tables, flow.protocol, flow.dst_addr, flow.dst_port)
        .ok_or(IcmpMiss::NoRule)?;
    if !lookup::acl_admits(tables, rule, flow.src_addr) {
        return Err(IcmpMiss::AclDenied);
    }
    let pool = lookup::pool_of(tables, rule).ok_or(IcmpMiss::NoRule)?;
    let established = conntrack
        .filter(|_| lookup::pool_tracks(tables, pool))
        .and_then(|ct| lookup::established_backend(tables, Some(ct), &flow));
    let backend = match established {
        Some(b) => b,
        None => lookup::maglev_backend(tables, pool, &flow, false).ok_or(IcmpMiss::NoBackend)?,
    };
    Ok(Choice {
        rule,
        pool,
        backend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{Icmpv4Type, PacketBuilder};
    use firmware_sim::parse::{parse, Parsed};
    use flowtable_compiler::{compile, explain, CompileOptions, Flow, HealthState};
    use std::net::IpAddr;

    const CONFIG: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
targetPools:
  - {name: web, region: r, instances: [a, b, c]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
";

    /// A router's "fragmentation needed" about a packet `from` → `to` (quoting its first 28
    /// bytes), addressed to `from`.
    fn frag_needed(from: ([u8; 4], u16), to: ([u8; 4], u16), router: [u8; 4]) -> Vec<u8> {
        let mut quoted = Vec::new();
        PacketBuilder::ipv4(from.0, to.0, 64)
            .tcp(from.1, to.1, 1, 1000)
            .write(&mut quoted, &[0u8; 1400])
            .unwrap();
        quoted.truncate(28);
        let mut frame = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xee], [2, 0, 0, 0, 0, 1])
            .ipv4(router, from.0, 64)
            .icmpv4(Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded {
                    next_hop_mtu: 1280,
                },
            ))
            .write(&mut frame, &quoted)
            .unwrap();
        frame
    }

    fn headers(frame: &[u8]) -> IpHeaders {
        match parse(frame) {
            Ok(Parsed::Ip(h)) => h,
            other => panic!("not IP: {other:?}"),
        }
    }

    #[test]
    fn a_bounced_reply_goes_to_the_flows_backend() {
        let (config, d) = flowtable_compiler::parse_config("t.yaml", CONFIG);
        assert!(d.is_empty(), "{d}");
        let c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
        for port in 40000..40040u16 {
            // The backend's reply VIP:80 → client:port was too big for a router on the way.
            let frame = frag_needed(
                ([203, 0, 113, 80], 80),
                ([198, 51, 100, 7], port),
                [192, 0, 2, 254],
            );
            let choice = decide(&c.tables, None, &headers(&frame)).unwrap();
            // The flow's own packets go (explain, independent of this module) to:
            let e = explain(
                &c.tables,
                &c.nic,
                &c.symbols,
                &Flow {
                    protocol: 6,
                    src: "198.51.100.7".parse::<IpAddr>().unwrap(),
                    src_port: port,
                    dst: "203.0.113.80".parse::<IpAddr>().unwrap(),
                    dst_port: 80,
                    fragment: flowtable_compiler::Fragment::No,
                },
            );
            assert_eq!(Some(choice.backend), e.backend_id, "port {port}");
            assert_eq!(Some(choice.rule), e.rule_id);
        }
    }

    #[test]
    fn errors_about_other_flows_are_refused() {
        let (config, _) = flowtable_compiler::parse_config("t.yaml", CONFIG);
        let c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
        let frame = frag_needed(
            ([198, 51, 100, 9], 1234),
            ([8, 8, 8, 8], 53),
            [192, 0, 2, 254],
        );
        assert_eq!(
            decide(&c.tables, None, &headers(&frame)),
            Err(IcmpMiss::NoRule)
        );
        let mut plain = Vec::new();
        PacketBuilder::ethernet2([2; 6], [2; 6])
            .ipv4([198, 51, 100, 7], [203, 0, 113, 80], 64)
            .tcp(1, 80, 1, 1000)
            .write(&mut plain, &[])
            .unwrap();
        assert_eq!(
            decide(&c.tables, None, &headers(&plain)),
            Err(IcmpMiss::NotAnError)
        );
    }
}
