//! The pipeline's table lookups replayed on the host over one table bank, for the decisions
//! the slow path takes on the NIC's behalf (first fragments, punted ICMP errors): rule lookup
//! (`docs/pipeline.md` §4), ACL (§5), key by affinity (§6), the host's copy of the connection
//! table (§7) and Maglev (§8).
//!
//! Nothing here allocates: the slow path calls these per punted packet.

use crate::conntrack::Conntrack;
use firmware_sim::parse::proto::TCP;
use firmware_sim::parse::tcp_flags;
use firmware_sim::pipeline::{acl_allows, affinity_key};
use nlb_hw::enums::KeyType;
use nlb_hw::{table_index, FlowKey, Tables};

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Choice {
    /// Rule id.
    pub rule: u16,
    /// Pool id of the rule (its descriptor carries the delivery used for injection).
    pub pool: u16,
    /// Backend id.
    pub backend: u16,
}

/// Index of the VIP entry of (protocol, VIP) (§4: lowest matching way of its bucket).
pub fn vip_entry(tables: &Tables, protocol: u8, vip: u128) -> Option<usize> {
    let profile = tables.profile;
    let ways = profile.vip_ways as usize;
    let key = FlowKey {
        key_type: KeyType::Vip,
        protocol,
        dst_addr: vip,
        ..FlowKey::default()
    };
    let start = table_index(key.hash(), profile.vip_buckets) as usize * ways;
    tables
        .vip
        .get(start..start + ways)?
        .iter()
        .position(|e| e.valid && e.protocol == protocol && e.addr == vip)
        .map(|w| start + w)
}

/// The rule of a packet with ports (§4): the lowest valid port slot holding `port`, whose rule
/// entry is valid.
pub fn rule_for(tables: &Tables, protocol: u8, vip: u128, port: u16) -> Option<u16> {
    let entry = &tables.vip[vip_entry(tables, protocol, vip)?];
    let slot = entry
        .slot
        .iter()
        .find(|s| s.valid && s.port_lo <= port && port <= s.port_hi)?;
    tables
        .rules
        .get(usize::from(slot.rule))
        .filter(|r| r.valid)
        .map(|_| slot.rule)
}

/// The pool of a valid rule.
pub fn pool_of(tables: &Tables, rule: u16) -> Option<u16> {
    tables
        .rules
        .get(usize::from(rule))
        .filter(|r| r.valid)
        .map(|r| r.pool)
}

/// Whether the rule's source allow-list admits `client` (§5; rules without one admit all).
pub fn acl_admits(tables: &Tables, rule: u16, client: u128) -> bool {
    let Some(r) = tables.rules.get(usize::from(rule)) else {
        return false;
    };
    if !r.acl_enabled {
        return true;
    }
    tables
        .acl
        .get(usize::from(rule))
        .is_some_and(|acl| acl_allows(acl, client))
}

/// The backend Maglev gives a flow in a pool (§6, §8): the affinity key of the pool (narrowed
/// to the 3-tuple for fragments under 5-tuple affinities), its hash, the slot of the serving
/// slice, a valid backend. `flow` holds the 5-tuple in client → VIP orientation; its key type
/// is ignored.
pub fn maglev_backend(tables: &Tables, pool: u16, flow: &FlowKey, fragment: bool) -> Option<u16> {
    let p = tables.pools.get(usize::from(pool)).filter(|p| p.valid)?;
    if p.maglev_size == 0 {
        return None;
    }
    let hash = flow.with_type(affinity_key(p.affinity, fragment)).hash();
    let slot = p
        .maglev_base
        .checked_add(table_index(hash, p.maglev_size))?;
    let backend = tables.maglev.get(slot as usize)?.backend;
    tables
        .backends
        .get(usize::from(backend))
        .filter(|b| b.valid)
        .map(|_| backend)
}

/// Whether a pool tracks connections (a valid descriptor with `track`).
pub fn pool_tracks(tables: &Tables, pool: u16) -> bool {
    tables
        .pools
        .get(usize::from(pool))
        .is_some_and(|p| p.valid && p.track)
}

/// The backend of the flow's established connection in the host's copy of the connection
/// table (§7; `flow` is the 5-tuple client → VIP), when that backend still has a valid entry.
pub fn established_backend(
    tables: &Tables,
    conntrack: Option<&Conntrack>,
    flow: &FlowKey,
) -> Option<u16> {
    let ct = conntrack?;
    let backend = ct.entry(ct.lookup(flow)?)?.backend;
    tables
        .backends
        .get(usize::from(backend))
        .filter(|b| b.valid)
        .map(|_| backend)
}

/// Where a first fragment punted with its rule goes (SPEC R4.1–R4.3, `docs/pipeline.md` §6):
/// a TCP fragment of a pool that tracks connections goes to its connection's backend, or,
/// without one, to the backend a whole packet of the flow gets (the pool's whole-packet key:
/// the 5-tuple under `NONE`); a SYN without ACK selects anew as a whole one does (§7). Any
/// other fragment goes to the backend of the fragment key (the 3-tuple under `NONE`), as the
/// NIC sends fragments of single-rule VIPs. `tcp_flags` are the first fragment's.
pub fn first_fragment(
    tables: &Tables,
    conntrack: Option<&Conntrack>,
    rule: u16,
    flow: &FlowKey,
    tcp_flags: u8,
) -> Option<Choice> {
    let pool = pool_of(tables, rule)?;
    if flow.protocol != TCP || !pool_tracks(tables, pool) {
        return choose(tables, rule, flow, true);
    }
    let syn_only = tcp_flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
    let conntrack = conntrack.filter(|_| !syn_only);
    let backend = match established_backend(tables, conntrack, flow) {
        Some(b) => b,
        None => maglev_backend(tables, pool, flow, false)?,
    };
    Some(Choice {
        rule,
        pool,
        backend,
    })
}

/// Rule → pool → Maglev backend for a packet whose rule is known.
pub fn choose(tables: &Tables, rule: u16, flow: &FlowKey, fragment: bool) -> Option<Choice> {
    let pool = pool_of(tables, rule)?;
    let backend = maglev_backend(tables, pool, flow, fragment)?;
    Some(Choice {
        rule,
        pool,
        backend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowtable_compiler::{compile, explain, CompileOptions, Flow, Fragment, HealthState};
    use nlb_hw::hash::addr_to_u128;
    use std::net::IpAddr;

    const CONFIG: &str = "
forwardingRules:
  - {name: dns-a, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}
  - {name: dns-b, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '5353', target: dns-sticky}
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80-90', target: web, sourceRanges: [198.51.100.0/24]}
targetPools:
  - {name: dns, region: r, instances: [a, b, c]}
  - {name: dns-sticky, region: r, instances: [a, b, c], sessionAffinity: CLIENT_IP}
  - {name: web, region: r, instances: [b, c]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
";

    fn compiled() -> flowtable_compiler::Compiled {
        let (config, d) = flowtable_compiler::parse_config("t.yaml", CONFIG);
        assert!(d.is_empty(), "{d}");
        compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap()
    }

    /// The host lookups agree with `explain` (the compiler's own replay of the pipeline) on
    /// many flows, whole packets and first fragments.
    #[test]
    fn host_lookups_agree_with_explain() {
        let c = compiled();
        let t = &c.tables;
        let mut agreed = 0;
        for i in 0..600u32 {
            let src: IpAddr = format!("198.51.{}.{}", 100 + i % 2, i % 250 + 1)
                .parse()
                .unwrap();
            let (dst, proto, dport): (IpAddr, u8, u16) = match i % 3 {
                0 => ("203.0.113.53".parse().unwrap(), 17, 53),
                1 => ("203.0.113.53".parse().unwrap(), 17, 5353),
                _ => ("203.0.113.80".parse().unwrap(), 6, 80 + (i % 12) as u16),
            };
            let sport = 1024 + (i * 7919 % 60000) as u16;
            for fragment in [Fragment::No, Fragment::First] {
                let flow = Flow {
                    protocol: proto,
                    src,
                    src_port: sport,
                    dst,
                    dst_port: dport,
                    fragment,
                };
                let e = explain(t, &c.nic, &c.symbols, &flow);
                let key = FlowKey::tuple5(proto, src, sport, dst, dport);
                let rule = rule_for(t, proto, addr_to_u128(dst), dport);
                assert_eq!(rule, e.rule_id, "{flow:?}");
                let Some(rule) = rule else { continue };
                if !acl_admits(t, rule, addr_to_u128(src)) {
                    assert_eq!(e.reason, "ACL_DENIED", "{flow:?}");
                    continue;
                }
                if e.verdict == "punt" {
                    // A first fragment on the two-rule VIP: the NIC punts it (the host
                    // decides it, see punt.rs); explain has no backend to compare.
                    assert_eq!(e.reason, "FRAGMENT_NEEDS_STATE");
                    continue;
                }
                let frag = fragment != Fragment::No;
                let choice = choose(t, rule, &key, frag).map(|c| c.backend);
                assert_eq!(choice, e.backend_id, "{flow:?}");
                agreed += 1;
            }
        }
        assert!(agreed > 400, "only {agreed} flows reached a backend");
    }

    #[test]
    fn misses_are_none() {
        let c = compiled();
        let t = &c.tables;
        let vip = addr_to_u128("203.0.113.53".parse().unwrap());
        assert_eq!(rule_for(t, 17, vip, 54), None, "port outside every slot");
        assert_eq!(rule_for(t, 6, vip, 53), None, "no TCP rule on the VIP");
        assert_eq!(pool_of(t, 200), None);
        assert_eq!(maglev_backend(t, 100, &FlowKey::default(), false), None);
    }
}
