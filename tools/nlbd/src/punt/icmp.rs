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

use super::lookup::Choice;
use nlb_driver::conntrack::Conntrack;
use nlb_hw::Tables;
use nlb_reference::host::{self, Miss};
use nlb_reference::parse::IpHeaders;
use nlb_reference::NoTrace;

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

/// Where an ICMP error goes: the backend of the flow it quotes ([`host::icmp_error`]).
pub fn decide(
    tables: &Tables,
    conntrack: Option<&Conntrack>,
    headers: &IpHeaders,
) -> Result<Choice, IcmpMiss> {
    if !headers.icmp_error {
        return Err(IcmpMiss::NotAnError);
    }
    let quote = headers.icmp_inner.ok_or(IcmpMiss::NoQuote)?;
    let view = conntrack.map(Conntrack::view);
    host::icmp_error(tables, view.as_ref(), &quote, &mut NoTrace).map_err(|m| match m {
        Miss::NoRule => IcmpMiss::NoRule,
        Miss::AclDenied => IcmpMiss::AclDenied,
        Miss::NoBackend => IcmpMiss::NoBackend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{Icmpv4Type, PacketBuilder};
    use flowtable_compiler::{compile, CompileOptions, HealthState};
    use nlb_reference::parse::{parse, Parsed};

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
        let (config, d) = nlb_config::parse_config("t.yaml", CONFIG);
        assert!(d.is_empty(), "{d}");
        let c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
        let mut backends = std::collections::BTreeSet::new();
        for port in 40000..40040u16 {
            // The backend's reply VIP:80 → client:port was too big for a router on the way.
            let frame = frag_needed(
                ([203, 0, 113, 80], 80),
                ([198, 51, 100, 7], port),
                [192, 0, 2, 254],
            );
            let choice = decide(&c.tables, None, &headers(&frame)).unwrap();
            // The golden model (a separate implementation of the pipeline) forwards the same
            // error itself, and a packet of the flow, to:
            let mut nic = firmware_sim::ModelDevice::from_tables(c.tables.clone(), c.nic);
            let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
            let r = nic.receive(&frame, &mut out).unwrap();
            assert_eq!(r.reason, nlb_hw::enums::Reason::IcmpErrorForwarded);
            assert_eq!(
                (r.rule, r.pool, r.backend),
                (Some(choice.rule), Some(choice.pool), Some(choice.backend)),
                "port {port}"
            );
            let mut packet = Vec::new();
            PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xee], [2, 0, 0, 0, 0, 1])
                .ipv4([198, 51, 100, 7], [203, 0, 113, 80], 64)
                .tcp(port, 80, 1, 1000)
                .ack(1)
                .write(&mut packet, &[])
                .unwrap();
            let whole = nic.receive(&packet, &mut out).unwrap();
            assert_eq!(whole.backend, Some(choice.backend), "port {port}");
            backends.insert(choice.backend);
        }
        assert!(backends.len() > 1, "the flows reach several backends");
    }

    #[test]
    fn errors_about_other_flows_are_refused() {
        let (config, _) = nlb_config::parse_config("t.yaml", CONFIG);
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
