//! Why a flow goes where it goes: the lookups of the pipeline replayed over a table bank.
//!
//! Rule lookup (VIP bucket, ways, port slots; SPEC R2), a non-first fragment's rule (SPEC
//! R4.3), the rule's ACL (SPEC R9), the pool descriptor and its serving slice (SPEC R1
//! failover), the affinity key (SPEC R3.1, R4.2), its hash and Maglev slot, the backend. This is
//! the choice for a *new* connection: an established one keeps its conntrack backend (SPEC R4.1).

use crate::symbols::Symbols;
use nlb_hw::enums::{Affinity, DefaultAction, KeyType, Reason, Verdict};
use nlb_hw::hash::{addr_to_u128, u128_to_addr};
use nlb_hw::{table_index, FlowKey, NicSettings, Tables};
use serde::Serialize;
use std::net::IpAddr;

/// Whether and which fragment a packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fragment {
    /// A whole packet.
    #[default]
    No,
    /// The first fragment: it carries the ports.
    First,
    /// A later fragment: no ports.
    Later,
}

/// A packet's flow, as far as the lookups care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// IP protocol number (6 TCP, 17 UDP).
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port.
    pub dst_port: u16,
    /// Fragment or not.
    pub fragment: Fragment,
}

/// The outcome and every step that led to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// `forward`, `punt`, `drop` or `pass`.
    pub verdict: String,
    /// The reason counter, as the regmap names it (`FORWARDED`, `NO_RULE`, ...).
    pub reason: String,
    /// VIP table bucket of (protocol, destination).
    pub vip_bucket: u32,
    /// VIP table index of the matching entry.
    pub vip_index: Option<u32>,
    /// Rule name.
    pub rule: Option<String>,
    /// Rule id.
    pub rule_id: Option<u16>,
    /// ACL outcome.
    pub acl: Option<String>,
    /// Pool name.
    pub pool: Option<String>,
    /// Pool id.
    pub pool_id: Option<u16>,
    /// Whether the backup pool's slice serves.
    pub failed_over: bool,
    /// Session affinity of the pool.
    pub affinity: Option<String>,
    /// `5tuple`, `3tuple`, `2tuple` or `1tuple`.
    pub key: Option<String>,
    /// Canonical key bytes, hex.
    pub key_bytes: Option<String>,
    /// Flow hash of the key.
    pub hash: Option<u32>,
    /// First slot of the serving slice.
    pub slice_base: Option<u32>,
    /// Slots in the serving slice.
    pub slice_size: Option<u32>,
    /// Maglev slot read.
    pub slot: Option<u32>,
    /// Backend name.
    pub backend: Option<String>,
    /// Backend id.
    pub backend_id: Option<u16>,
    /// Backend address.
    pub backend_ip: Option<String>,
    /// Backend (or next-hop) MAC.
    pub backend_mac: Option<String>,
    /// Delivery used.
    pub delivery: Option<String>,
    /// Each step, in words.
    pub steps: Vec<String>,
}

/// The key type of an affinity (SPEC R3.1), with fragments under 5-tuple keys narrowed to the
/// 3-tuple so all fragments of a datagram meet (SPEC R4.2).
pub fn key_type(affinity: Affinity, fragment: bool) -> KeyType {
    match affinity {
        Affinity::None | Affinity::ClientIpPortProto if fragment => KeyType::Tuple3,
        Affinity::None | Affinity::ClientIpPortProto => KeyType::Tuple5,
        Affinity::ClientIpProto => KeyType::Tuple3,
        Affinity::ClientIp => KeyType::Tuple2,
        Affinity::ClientIpNoDestination => KeyType::Tuple1,
    }
}

/// The report name of a key type (`5tuple`, ...).
pub fn key_name(k: KeyType) -> &'static str {
    match k {
        KeyType::Tuple5 => "5tuple",
        KeyType::Tuple3 => "3tuple",
        KeyType::Tuple2 => "2tuple",
        KeyType::Tuple1 => "1tuple",
        KeyType::Vip => "vip",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn proto_name(p: u8) -> String {
    match p {
        6 => "TCP".into(),
        17 => "UDP".into(),
        n => format!("protocol {n}"),
    }
}

/// Replays the lookups of one flow over `tables`.
pub fn explain(tables: &Tables, nic: &NicSettings, symbols: &Symbols, flow: &Flow) -> Explanation {
    let profile = tables.profile;
    let ways = profile.vip_ways;
    let dst = addr_to_u128(flow.dst);
    let bucket = table_index(
        FlowKey::vip(flow.protocol, flow.dst).hash(),
        profile.vip_buckets,
    );
    let mut e = Explanation {
        verdict: String::new(),
        reason: String::new(),
        vip_bucket: bucket,
        vip_index: None,
        rule: None,
        rule_id: None,
        acl: None,
        pool: None,
        pool_id: None,
        failed_over: false,
        affinity: None,
        key: None,
        key_bytes: None,
        hash: None,
        slice_base: None,
        slice_size: None,
        slot: None,
        backend: None,
        backend_id: None,
        backend_ip: None,
        backend_mac: None,
        delivery: None,
        steps: Vec::new(),
    };
    let finish = |mut e: Explanation, verdict: Verdict, reason: Reason, step: String| {
        e.verdict = verdict.name().to_ascii_lowercase();
        e.reason = reason.name().to_string();
        e.steps.push(step);
        e
    };
    let no_rule = |e: Explanation, why: String| {
        let v = match nic.default_action {
            DefaultAction::Pass => Verdict::Pass,
            DefaultAction::Drop => Verdict::Drop,
        };
        finish(
            e,
            v,
            Reason::NoRule,
            format!(
                "{why}: no rule matches, default action {} (SPEC R2.4)",
                nic.default_action.name()
            ),
        )
    };
    let entry = (0..ways).map(|w| bucket * ways + w).find(|&i| {
        let v = &tables.vip[i as usize];
        v.valid && v.protocol == flow.protocol && v.addr == dst
    });
    let Some(index) = entry else {
        return no_rule(
            e,
            format!(
                "VIP table bucket {bucket} holds no entry for {} {}",
                flow.dst,
                proto_name(flow.protocol)
            ),
        );
    };
    e.vip_index = Some(index);
    let v = tables.vip[index as usize];
    let valid: Vec<_> = v.slot.iter().filter(|s| s.valid).collect();
    // "3 rules", or "3 port ranges of 2 rules" when a rule with `ports` holds several slots.
    let held = {
        let mut rules: Vec<u16> = valid.iter().map(|s| s.rule).collect();
        rules.sort_unstable();
        rules.dedup();
        if rules.len() == valid.len() {
            format!("{} rules", valid.len())
        } else {
            let of = match rules.len() {
                1 => "1 rule".to_string(),
                n => format!("{n} rules"),
            };
            format!("{} port ranges of {of}", valid.len())
        }
    };
    let slot = if flow.fragment == Fragment::Later {
        if valid.len() != 1 {
            e.steps.push(format!(
                "VIP entry {index} (bucket {bucket}, way {}) has {held} for {}; a later fragment carries no port",
                index % ways,
                proto_name(flow.protocol)
            ));
            return finish(
                e,
                Verdict::Punt,
                Reason::FragmentNeedsState,
                "punted: the host remembers the first fragment's rule and backend (SPEC R4.3)"
                    .into(),
            );
        }
        valid[0]
    } else {
        match valid
            .iter()
            .find(|s| (s.port_lo..=s.port_hi).contains(&flow.dst_port))
        {
            Some(s) => s,
            None => {
                return no_rule(
                    e,
                    format!(
                        "VIP entry {index} has no port range holding port {}",
                        flow.dst_port
                    ),
                );
            }
        }
    };
    let rule = slot.rule;
    let rule_name = symbols.rule(rule).unwrap_or("?").to_string();
    e.rule = Some(rule_name.clone());
    e.rule_id = Some(rule);
    let range = |lo: u16, hi: u16| {
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    };
    let mut ports = if (slot.port_lo, slot.port_hi) == (0, 65535) {
        "all ports".to_string()
    } else if slot.port_lo == slot.port_hi {
        format!("port {}", slot.port_lo)
    } else {
        format!("ports {}-{}", slot.port_lo, slot.port_hi)
    };
    // A rule with `ports` holds one slot per port (adjacent ones merged): name them all.
    let own: Vec<String> = valid
        .iter()
        .filter(|s| s.rule == slot.rule)
        .map(|s| range(s.port_lo, s.port_hi))
        .collect();
    if own.len() > 1 {
        ports = format!("{ports} (the rule's ports {})", own.join(", "));
    }
    e.steps.push(format!(
        "rule {rule_name} (id {rule}): {} {} {ports}; VIP table bucket {bucket}, way {}",
        u128_to_addr(v.addr),
        proto_name(v.protocol),
        index % ways
    ));
    let Some(r) = tables
        .rules
        .get(usize::from(rule))
        .copied()
        .filter(|r| r.valid)
    else {
        return no_rule(e, format!("rule id {rule} has no valid descriptor"));
    };
    if r.acl_enabled {
        let src = addr_to_u128(flow.src);
        let hit = tables.acl[usize::from(rule)].prefix.iter().find(|p| {
            p.valid
                && (p.prefix_len == 0
                    || (src ^ p.addr) >> (128 - u32::from(p.prefix_len.min(128))) == 0)
        });
        match hit {
            Some(p) => {
                let shown = if nlb_hw::hash::is_ipv4_mapped(p.addr) && p.prefix_len >= 96 {
                    format!("{}/{}", u128_to_addr(p.addr), p.prefix_len - 96)
                } else {
                    format!("{}/{}", std::net::Ipv6Addr::from(p.addr), p.prefix_len)
                };
                e.acl = Some(format!("allowed by {shown}"));
                e.steps
                    .push(format!("ACL: source {} allowed by {shown}", flow.src));
            }
            None => {
                e.acl = Some("denied".into());
                return finish(
                    e,
                    Verdict::Drop,
                    Reason::AclDenied,
                    format!(
                        "ACL: source {} is outside the rule's sourceRanges (SPEC R9.1)",
                        flow.src
                    ),
                );
            }
        }
    } else {
        e.acl = Some("none".into());
    }
    if flow.fragment == Fragment::First && valid.len() > 1 {
        return finish(
            e,
            Verdict::Punt,
            Reason::FragmentNeedsState,
            format!(
                "a first fragment on a VIP with {held} for {}: punted with its rule so the host sends the later fragments the same way (SPEC R4.3)",
                proto_name(flow.protocol)
            ),
        );
    }
    let pool_id = r.pool;
    let p = tables
        .pools
        .get(usize::from(pool_id))
        .copied()
        .unwrap_or_default();
    let pool_name = symbols.pool(pool_id).unwrap_or("?").to_string();
    e.pool = Some(pool_name.clone());
    e.pool_id = Some(pool_id);
    e.failed_over = p.failed_over;
    e.affinity = Some(p.affinity.name().to_string());
    e.delivery = Some(p.delivery.name().to_string());
    e.slice_base = Some(p.maglev_base);
    e.slice_size = Some(p.maglev_size);
    let serving = if p.failed_over {
        format!(
            "failed over: backup pool {}'s slice serves",
            symbols.pool(p.backup_pool).unwrap_or("?")
        )
    } else {
        "its own slice serves".to_string()
    };
    e.steps.push(format!(
        "pool {pool_name} (id {pool_id}): affinity {}, delivery {}; {serving}: slots {}..{} ({} slots)",
        p.affinity.name(),
        p.delivery.name(),
        p.maglev_base,
        u64::from(p.maglev_base) + u64::from(p.maglev_size),
        p.maglev_size
    ));
    if !p.valid {
        return finish(
            e,
            Verdict::Drop,
            Reason::NoBackend,
            "the pool has no backend".into(),
        );
    }
    if flow.fragment != Fragment::No && flow.protocol == 6 && p.track {
        return tcp_fragment_punt(e, tables, symbols, flow, &p, finish);
    }
    if p.maglev_size == 0 {
        return finish(
            e,
            Verdict::Drop,
            Reason::NoBackend,
            "the pool has no backend".into(),
        );
    }
    let kt = key_type(p.affinity, flow.fragment != Fragment::No);
    let key = FlowKey::tuple5(
        flow.protocol,
        flow.src,
        flow.src_port,
        flow.dst,
        flow.dst_port,
    )
    .with_type(kt);
    let hash = key.hash();
    let offset = table_index(hash, p.maglev_size);
    let slot_index = p.maglev_base + offset;
    e.key = Some(key_name(kt).into());
    e.key_bytes = Some(hex(&key.bytes()));
    e.hash = Some(hash);
    e.slot = Some(slot_index);
    let frag = if flow.fragment != Fragment::No
        && matches!(p.affinity, Affinity::None | Affinity::ClientIpPortProto)
    {
        " (a fragment: the 3-tuple, SPEC R4.2)"
    } else {
        ""
    };
    e.steps
        .push(format!("key {}{frag}: hash {hash:#010x}", key_name(kt)));
    e.steps.push(format!(
        "slot {} + ({hash:#010x} × {}) >> 32 = {} + {offset} = {slot_index}",
        p.maglev_base, p.maglev_size, p.maglev_base
    ));
    let Some(ms) = tables.maglev.get(slot_index as usize) else {
        return finish(
            e,
            Verdict::Drop,
            Reason::NoBackend,
            "the slot lies outside the slot memory".into(),
        );
    };
    let b = ms.backend;
    let be = tables
        .backends
        .get(usize::from(b))
        .copied()
        .unwrap_or_default();
    let bname = symbols.backend(b).unwrap_or("?").to_string();
    e.backend = Some(bname.clone());
    e.backend_id = Some(b);
    e.backend_ip = Some(u128_to_addr(be.addr).to_string());
    e.backend_mac = Some(crate::model::format_mac(be.mac));
    if !be.valid {
        return finish(
            e,
            Verdict::Drop,
            Reason::NoBackend,
            format!("backend id {b} has no valid entry"),
        );
    }
    let step = format!(
        "backend {bname} (id {b}) {} {} by {}",
        u128_to_addr(be.addr),
        crate::model::format_mac(be.mac),
        p.delivery.name()
    );
    finish(e, Verdict::Forward, Reason::Forwarded, step)
}

/// A TCP fragment of a pool that tracks connections (`docs/pipeline.md` §6): the NIC punts
/// it, and the host sends it where the connection goes. Explains what the host does, and for
/// a first fragment which backend it picks when no connection is established.
fn tcp_fragment_punt(
    mut e: Explanation,
    tables: &Tables,
    symbols: &Symbols,
    flow: &Flow,
    p: &nlb_hw::layouts::PoolEntry,
    finish: impl Fn(Explanation, Verdict, Reason, String) -> Explanation,
) -> Explanation {
    let which = if flow.fragment == Fragment::First {
        "a first"
    } else {
        "a later"
    };
    e.steps.push(format!(
        "{which} TCP fragment on a pool that tracks connections: a fragment key (3-tuple under NONE) could send it to another backend than its connection's (SPEC R4.1 over R4.2)"
    ));
    if flow.fragment == Fragment::Later {
        return finish(
            e,
            Verdict::Punt,
            Reason::FragmentNeedsState,
            "punted: the host sends it the way of its datagram's first fragment (per source, destination, protocol and IP ID; held until the first arrives, SPEC R4.3)".into(),
        );
    }
    let kt = key_type(p.affinity, false);
    let key = FlowKey::tuple5(
        flow.protocol,
        flow.src,
        flow.src_port,
        flow.dst,
        flow.dst_port,
    )
    .with_type(kt);
    let hash = key.hash();
    let without = if p.maglev_size == 0 {
        "the pool has no backend, so it is dropped".to_string()
    } else {
        let slot = u64::from(p.maglev_base) + u64::from(table_index(hash, p.maglev_size));
        match tables
            .maglev
            .get(slot as usize)
            .map(|s| s.backend)
            .filter(|&b| tables.backends.get(usize::from(b)).is_some_and(|b| b.valid))
        {
            Some(b) => format!(
                "to backend {} (id {b}), the one a whole packet of the flow gets (key {}, hash {hash:#010x}, slot {slot})",
                symbols.backend(b).unwrap_or("?"),
                key_name(kt)
            ),
            None => format!(
                "nowhere: slot {slot} (key {}) names no valid backend, so it is dropped",
                key_name(kt)
            ),
        }
    };
    finish(
        e,
        Verdict::Punt,
        Reason::FragmentNeedsState,
        format!(
            "punted with its rule: the host sends it, and the later fragments of its datagram, to its connection's backend (the host's connection table, by the 5-tuple its ports give); with no connection, {without}"
        ),
    )
}
