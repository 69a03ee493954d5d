//! The `bgp` section: how nlbd announces the VIPs it serves (docs/config.md, docs/fleet.md).
//!
//! ```yaml
//! bgp:
//!   asn: 4200000001          # nlbd's AS (four octets)
//!   routerId: 192.0.2.1      # nlbd's BGP identifier
//!   holdTimeSec: 9           # 0 or 3-65535
//!   gracefulRestartSec: 30   # 0-4095; 0: no graceful restart
//!   med: 10
//!   communities: ["65000:100"]
//!   drainQuietSec: 5
//!   neighbors:
//!     - {address: 127.0.0.1, asn: 65001, localAddress: 127.0.0.2}
//! ```
//!
//! Values are checked as RFC 4271 and RFC 6793 allow them: an AS of 0 or AS_TRANS (23456) is
//! refused, a hold time of 1 or 2 s, an identifier of 0.0.0.0.

use super::{Obj, Reader};
use crate::model::{Bgp, BgpNeighbor};
use crate::tree::Node;
use std::net::{IpAddr, Ipv4Addr};

const BGP: &[&str] = &[
    "asn",
    "routerId",
    "holdTimeSec",
    "gracefulRestartSec",
    "med",
    "localPreference",
    "communities",
    "nextHopIpv4",
    "nextHopIpv6",
    "drainQuietSec",
    "neighbors",
];
const NEIGHBOR: &[&str] = &["address", "port", "asn", "localAddress"];

/// RFC 6793 §9: the two-octet placeholder of a four-octet AS, never an AS of its own.
const AS_TRANS: u64 = 23456;

fn asn(r: &mut Reader, o: &Obj, required: bool) -> Option<u32> {
    let Some(n) = o.get("asn") else {
        if required {
            r.err(o.pos, &o.path("asn"), "`asn` is required", Some(valid_as()));
        }
        return None;
    };
    let path = o.path("asn");
    let text = r.scalar(n, &path)?;
    // `AS65001` and the asdot form `1.10` (RFC 5396) read as the number they stand for.
    let t = text.trim();
    let t = t
        .strip_prefix("AS")
        .or_else(|| t.strip_prefix("as"))
        .unwrap_or(t);
    let value = match t.split_once('.') {
        Some((hi, lo)) => match (hi.parse::<u64>(), lo.parse::<u64>()) {
            (Ok(h), Ok(l)) if h <= 0xffff && l <= 0xffff => Some(h << 16 | l),
            _ => None,
        },
        None => t.parse::<u64>().ok(),
    };
    match value {
        Some(0) => r.err(
            n.pos,
            &path,
            "AS 0 is reserved (RFC 7607)",
            Some(valid_as()),
        ),
        Some(AS_TRANS) => r.err(
            n.pos,
            &path,
            "AS 23456 is AS_TRANS, the placeholder of four-octet AS numbers (RFC 6793), not an AS",
            Some(valid_as()),
        ),
        Some(v) if v <= u64::from(u32::MAX) => return Some(v as u32),
        _ => r.err(
            n.pos,
            &path,
            format!("`{text}` is not an AS number"),
            Some(valid_as()),
        ),
    }
    None
}

fn valid_as() -> String {
    "an AS number 1-4294967295 other than 23456, such as 65001 or 4200000001 (private ranges: 64512-65534, 4200000000-4294967294)".into()
}

fn ipv4(r: &mut Reader, o: &Obj, field: &str) -> Option<Ipv4Addr> {
    let n = o.get(field)?;
    let path = o.path(field);
    match r.ip(n, &path)? {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(a) => {
            r.err(
                n.pos,
                &path,
                format!("`{a}` is an IPv6 address"),
                Some("an IPv4 address".into()),
            );
            None
        }
    }
}

/// `routerId`: required, not 0.0.0.0.
fn router_id(r: &mut Reader, o: &Obj) -> Option<Ipv4Addr> {
    match ipv4(r, o, "routerId") {
        Some(a) if a.is_unspecified() => {
            let pos = o.get("routerId").map_or(o.pos, |n| n.pos);
            r.err(
                pos,
                "bgp.routerId",
                "0.0.0.0 is not a BGP identifier (RFC 4271 §6.2)",
                Some("a non-zero IPv4 address, different from the neighbours' identifiers".into()),
            );
            None
        }
        Some(a) => Some(a),
        None => {
            if o.get("routerId").is_none() {
                r.err(
                    o.pos,
                    "bgp.routerId",
                    "`routerId` is required",
                    Some("an IPv4 address such as 192.0.2.1, different from the neighbours' identifiers".into()),
                );
            }
            None
        }
    }
}

/// `communities`: each `AS:VALUE` (RFC 1997), as `AS << 16 | VALUE`.
fn communities(r: &mut Reader, o: &Obj) -> Vec<u32> {
    let mut communities = Vec::new();
    let items = r.list(o.get("communities"), "bgp.communities");
    for (i, n) in items.iter().enumerate() {
        let path = format!("bgp.communities[{i}]");
        let Some(text) = r.scalar(n, &path) else {
            continue;
        };
        let parsed = text.trim().split_once(':').and_then(|(a, v)| {
            Some((a.trim().parse::<u16>().ok()?, v.trim().parse::<u16>().ok()?))
        });
        match parsed {
            Some((a, v)) => communities.push(u32::from(a) << 16 | u32::from(v)),
            None => r.err(
                n.pos,
                &path,
                format!("`{text}` is not a community"),
                Some("AS:VALUE, each 0-65535, such as 65000:100 (RFC 1997)".into()),
            ),
        }
    }
    communities
}

/// `neighbors`: at least one; each with an address and an AS, listed once.
fn neighbors(r: &mut Reader, o: &Obj) -> Vec<BgpNeighbor> {
    let mut neighbors: Vec<BgpNeighbor> = Vec::new();
    let items = r.list(o.get("neighbors"), "bgp.neighbors");
    if items.is_empty() {
        r.err(
            o.get("neighbors").map_or(o.pos, |n| n.pos),
            "bgp.neighbors",
            "`neighbors` is required: nlbd announces to at least one neighbour",
            Some(
                "a list such as [{address: 127.0.0.1, asn: 65001}] (the host's routing daemon)"
                    .into(),
            ),
        );
    }
    for (i, n) in items.iter().enumerate() {
        let path = format!("bgp.neighbors[{i}]");
        let Some(no) = r.object(n, &path, NEIGHBOR, &[]) else {
            continue;
        };
        let address = match no.get("address") {
            Some(a) => r.ip(a, &no.path("address")),
            None => {
                r.err(
                    no.pos,
                    &no.path("address"),
                    "`address` is required",
                    Some("the neighbour's IP address, such as 127.0.0.1".into()),
                );
                None
            }
        };
        let port = r.integer(&no, "port", 179, 1, 65535) as u16;
        let peer_as = asn(r, &no, true);
        let local_address = no
            .get("localAddress")
            .and_then(|a| r.ip(a, &no.path("localAddress")));
        let (Some(address), Some(peer_as)) = (address, peer_as) else {
            continue;
        };
        if let Some(l) = local_address {
            if l.is_ipv4() != address.is_ipv4() {
                let pos = no.get("localAddress").map_or(no.pos, |n| n.pos);
                r.err(
                    pos,
                    &no.path("localAddress"),
                    format!(
                        "`{l}` and the neighbour's address {address} are of different families"
                    ),
                    Some(format!(
                        "an {} address of this host",
                        if address.is_ipv4() { "IPv4" } else { "IPv6" }
                    )),
                );
                continue;
            }
        }
        if let Some(first) = neighbors
            .iter()
            .position(|x| x.address == address && x.port == port)
        {
            r.err(
                no.pos,
                &path,
                format!(
                    "neighbour {address} port {port} is listed twice (also bgp.neighbors[{first}])"
                ),
                None,
            );
            continue;
        }
        neighbors.push(BgpNeighbor {
            address,
            port,
            asn: peer_as,
            local_address,
            loc: no.loc(i),
        });
    }
    neighbors
}

/// Reads the section; None when it has errors (each reported).
pub(crate) fn read_bgp(r: &mut Reader, node: &Node) -> Option<Bgp> {
    let errors = r.diags.0.len();
    let o = r.object(node, "bgp", BGP, &[])?;
    let local_as = asn(r, &o, true);
    let router_id = router_id(r, &o);
    let hold_time = r.integer(&o, "holdTimeSec", 9, 0, 65535) as u16;
    if hold_time == 1 || hold_time == 2 {
        let pos = o.get("holdTimeSec").map_or(o.pos, |n| n.pos);
        r.err(
            pos,
            "bgp.holdTimeSec",
            format!("a hold time of {hold_time} s is not allowed (RFC 4271 §4.2)"),
            Some("0 (no keepalives) or 3-65535".into()),
        );
    }
    let graceful_restart = r.integer(&o, "gracefulRestartSec", 30, 0, 4095) as u16;
    let med = o
        .get("med")
        .map(|_| r.integer(&o, "med", 0, 0, u64::from(u32::MAX)) as u32);
    let local_preference = o
        .get("localPreference")
        .map(|_| r.integer(&o, "localPreference", 100, 0, u64::from(u32::MAX)) as u32);
    let drain_quiet = r.integer(&o, "drainQuietSec", 5, 1, 3600) as u32;
    let next_hop_ipv4 = ipv4(r, &o, "nextHopIpv4");
    let next_hop_ipv6 = o.get("nextHopIpv6").and_then(|n| {
        let path = o.path("nextHopIpv6");
        match r.ip(n, &path)? {
            IpAddr::V6(a) => Some(a),
            IpAddr::V4(a) => {
                r.err(
                    n.pos,
                    &path,
                    format!("`{a}` is an IPv4 address"),
                    Some("an IPv6 address".into()),
                );
                None
            }
        }
    });
    let communities = communities(r, &o);
    let neighbors = neighbors(r, &o);
    if r.diags.0.len() != errors {
        return None;
    }
    Some(Bgp {
        asn: local_as?,
        router_id: router_id?,
        hold_time,
        graceful_restart,
        med,
        local_preference,
        communities,
        next_hop_ipv4,
        next_hop_ipv6,
        drain_quiet,
        neighbors,
        loc: o.loc(0),
    })
}

/// What needs the whole configuration: IPv6 VIPs need an IPv6 next hop on IPv4 sessions.
pub(crate) fn check_bgp(d: &mut crate::Diagnostics, c: &crate::Config) {
    let Some(b) = &c.bgp else { return };
    let Some(v6) = c.forwarding_rules.iter().find(|r| r.ip_address.is_ipv6()) else {
        return;
    };
    if b.next_hop_ipv6.is_some() {
        return;
    }
    if let Some(n) = b.neighbors.iter().find(|n| n.address.is_ipv4()) {
        d.push(
            &c.file,
            b.loc.pos,
            "bgp.nextHopIpv6",
            format!(
                "forwarding rule `{}` has the IPv6 VIP {}, and neighbour {} is reached over IPv4: an IPv6 route needs an IPv6 next hop",
                v6.name, v6.ip_address, n.address
            ),
            Some("`nextHopIpv6: ADDRESS` (where the routers send the IPv6 VIPs' traffic), or an IPv6 neighbour".into()),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::parse_config;

    const RULE: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: pool}
targetPools:
  - {name: pool, instances: [a]}
instances:
  - {name: a, ip: 10.0.0.1, mac: '02:00:00:00:00:0a'}
";

    fn errors(bgp: &str) -> Vec<String> {
        let (_, d) = parse_config("lb.yaml", &format!("{bgp}{RULE}"));
        d.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_full_section_reads_as_written() {
        let text = format!(
            "bgp:
  asn: 4200000001
  routerId: 192.0.2.1
  holdTimeSec: 3
  gracefulRestartSec: 120
  med: 10
  localPreference: 200
  communities: ['65000:100', '0:666']
  nextHopIpv4: 10.79.1.2
  drainQuietSec: 2
  neighbors:
    - {{address: 127.0.0.1, asn: 65001, localAddress: 127.0.0.2}}
    - {{address: '2001:db8::1', port: 1179, asn: AS65002}}
{RULE}"
        );
        let (c, d) = parse_config("lb.yaml", &text);
        assert!(d.0.is_empty(), "{d}");
        let b = c.bgp.unwrap();
        assert_eq!(b.asn, 4_200_000_001);
        assert_eq!(b.router_id.to_string(), "192.0.2.1");
        assert_eq!((b.hold_time, b.graceful_restart), (3, 120));
        assert_eq!((b.med, b.local_preference), (Some(10), Some(200)));
        assert_eq!(b.communities, vec![65000 << 16 | 100, 666]);
        assert_eq!(b.next_hop_ipv4.unwrap().to_string(), "10.79.1.2");
        assert_eq!(b.drain_quiet, 2);
        assert_eq!(b.neighbors.len(), 2);
        assert_eq!(b.neighbors[0].port, 179);
        assert_eq!(
            b.neighbors[0].local_address.unwrap().to_string(),
            "127.0.0.2"
        );
        assert_eq!((b.neighbors[1].port, b.neighbors[1].asn), (1179, 65002));
    }

    #[test]
    fn defaults_and_asdot() {
        let (c, d) = parse_config(
            "lb.yaml",
            &format!("bgp:\n  asn: '1.10'\n  routerId: 192.0.2.1\n  neighbors: [{{address: 127.0.0.1, asn: 65001}}]\n{RULE}"),
        );
        assert!(d.0.is_empty(), "{d}");
        let b = c.bgp.unwrap();
        // RFC 5396: 1.10 is 65546.
        assert_eq!(b.asn, 65546);
        assert_eq!((b.hold_time, b.graceful_restart, b.drain_quiet), (9, 30, 5));
        assert_eq!((b.med, b.local_preference), (None, None));
    }

    #[test]
    fn every_mistake_is_named_with_file_line_and_field() {
        let e = errors(
            "bgp:
  asn: 23456
  routerId: 0.0.0.0
  holdTimeSec: 2
  gracefulRestartSec: 5000
  communities: ['65000:70000', x]
  neighbrs: []
",
        );
        let joined = e.join("\n");
        for want in [
            "lb.yaml:2:8: bgp.asn: AS 23456 is AS_TRANS",
            "lb.yaml:3:13: bgp.routerId: 0.0.0.0 is not a BGP identifier",
            "lb.yaml:4:16: bgp.holdTimeSec: a hold time of 2 s is not allowed",
            "lb.yaml:5:23: bgp.gracefulRestartSec: 5000 is out of range (valid: 0..=4095)",
            "lb.yaml:6:17: bgp.communities[0]: `65000:70000` is not a community",
            "lb.yaml:6:32: bgp.communities[1]: `x` is not a community",
            "lb.yaml:7:3: bgp.neighbrs: unknown field `neighbrs`, did you mean `neighbors`?",
            "bgp.neighbors: `neighbors` is required",
        ] {
            assert!(joined.contains(want), "missing {want:?} in:\n{joined}");
        }
        let e = errors(
            "bgp:
  routerId: 192.0.2.1
  neighbors:
    - {address: 127.0.0.1, asn: 0}
    - {address: 127.0.0.1, asn: 65001, localAddress: '::1'}
    - {address: 127.0.0.1, asn: 65001}
    - {address: 127.0.0.1, asn: 65001}
",
        )
        .join("\n");
        for want in [
            "bgp.asn: `asn` is required",
            "lb.yaml:4:33: bgp.neighbors[0].asn: AS 0 is reserved",
            "bgp.neighbors[1].localAddress: `::1` and the neighbour's address 127.0.0.1 are of different families",
            "lb.yaml:7:7: bgp.neighbors[3]: neighbour 127.0.0.1 port 179 is listed twice (also bgp.neighbors[0])",
        ] {
            assert!(e.contains(want), "missing {want:?} in:\n{e}");
        }
    }

    #[test]
    fn ipv6_vips_need_an_ipv6_next_hop_over_ipv4_sessions() {
        let rule6 = RULE.replace("203.0.113.10", "'2001:db8::10'");
        let (_, d) = parse_config(
            "lb.yaml",
            &format!("bgp:\n  asn: 65010\n  routerId: 192.0.2.1\n  neighbors: [{{address: 127.0.0.1, asn: 65001}}]\n{rule6}"),
        );
        let e = d.to_string();
        assert!(
            e.contains("bgp.nextHopIpv6: forwarding rule `web` has the IPv6 VIP 2001:db8::10"),
            "{e}"
        );
        let (_, d) = parse_config(
            "lb.yaml",
            &format!("bgp:\n  asn: 65010\n  routerId: 192.0.2.1\n  nextHopIpv6: '2001:db8:ff::2'\n  neighbors: [{{address: 127.0.0.1, asn: 65001}}]\n{rule6}"),
        );
        assert!(d.0.is_empty(), "{d}");
    }

    #[test]
    fn the_section_changes_no_digest() {
        let with = format!("bgp:\n  asn: 65010\n  routerId: 192.0.2.1\n  neighbors: [{{address: 127.0.0.1, asn: 65001}}]\n{RULE}");
        let (a, _) = parse_config("lb.yaml", &with);
        let (b, _) = parse_config("lb.yaml", RULE);
        assert_eq!(a.digest(), b.digest());
    }
}
