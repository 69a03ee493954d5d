//! Why a flow goes where it goes: `nlbctl explain`, a formatter over the steps the reference
//! semantics (`nlb-reference`, the same code the slow path runs and the golden model is held
//! to) takes for the flow over a table bank.
//!
//! Rule lookup (VIP bucket, ways, port slots; SPEC R2), a non-first fragment's rule (SPEC
//! R4.3), the rule's ACL (SPEC R9), the pool descriptor and its serving slice (SPEC R1
//! failover), the affinity key (SPEC R3.1, R4.2), its hash and Maglev slot, the backend. This is
//! the choice for a *new* connection: an established one keeps its conntrack backend (SPEC R4.1).
//! Nothing here computes a lookup step; it only words what [`nlb_reference::lookup::lookup`]
//! (and, for a TCP fragment the host decides, [`nlb_reference::host::first_fragment`]) report.

use crate::symbols::Symbols;
use nlb_hw::enums::Reason;
use nlb_hw::hash::{addr_to_u128, u128_to_addr};
use nlb_hw::layouts::{PoolEntry, VipEntry};
use nlb_hw::{NicSettings, Tables};
use nlb_reference::conntrack::ConnTable;
use nlb_reference::lookup::{self, Packet};
use nlb_reference::trace::{AclOutcome, FragmentPunt, SlotOutcome};
use nlb_reference::{host, key_name, Step, Trace};
use serde::Serialize;
use std::net::IpAddr;

/// Whether and which fragment a packet is.
pub use nlb_reference::Fragment;

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

/// "3 rules", or "3 port ranges of 2 rules" when a rule with `ports` holds several slots.
fn held(entry: &VipEntry) -> String {
    let valid: Vec<_> = entry.slot.iter().filter(|s| s.valid).collect();
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
}

/// "all ports", "port 80" or "ports 80-90" of slot `slot`, naming all the slots of its rule
/// when a rule with `ports` holds several.
fn ports_of(entry: &VipEntry, slot: usize) -> String {
    let s = entry.slot[slot];
    let range = |lo: u16, hi: u16| {
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    };
    let mut ports = if (s.port_lo, s.port_hi) == (0, 65535) {
        "all ports".to_string()
    } else if s.port_lo == s.port_hi {
        format!("port {}", s.port_lo)
    } else {
        format!("ports {}-{}", s.port_lo, s.port_hi)
    };
    let own: Vec<String> = entry
        .slot
        .iter()
        .filter(|o| o.valid && o.rule == s.rule)
        .map(|o| range(o.port_lo, o.port_hi))
        .collect();
    if own.len() > 1 {
        ports = format!("{ports} (the rule's ports {})", own.join(", "));
    }
    ports
}

/// Replays the lookups of one flow over `tables` (the reference's, recorded) and words them.
pub fn explain(tables: &Tables, nic: &NicSettings, symbols: &Symbols, flow: &Flow) -> Explanation {
    // A later fragment carries no ports (docs/pipeline.md §2), whatever the caller gave.
    let ports = flow.fragment != Fragment::Later;
    let packet = Packet {
        flow: nlb_reference::Flow {
            protocol: flow.protocol,
            client: addr_to_u128(flow.src),
            client_port: if ports { flow.src_port } else { 0 },
            vip: addr_to_u128(flow.dst),
            vip_port: if ports { flow.dst_port } else { 0 },
        },
        fragment: flow.fragment,
        icmp_error: false,
        tcp_flags: 0,
    };
    let mut trace = Trace::default();
    // No connection table: the choice for a new connection.
    let outcome = lookup::lookup(tables, nic, None::<&ConnTable>, &packet, &mut trace);
    let mut e = Explanation {
        verdict: outcome.verdict.name().to_ascii_lowercase(),
        reason: outcome.reason.name().to_string(),
        vip_bucket: 0,
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
    let proto = proto_name(flow.protocol);
    // What the VIP stage found, for the wording of later steps.
    let (mut bucket, mut ways, mut vip) = (0u32, 1u32, VipEntry::default());
    let mut pool = PoolEntry::default();
    // Why a packet matched no rule, and the step that ended the lookup.
    let mut unmatched = String::new();
    let mut last = String::new();
    for step in &trace.steps {
        match *step {
            Step::Vip {
                bucket: b,
                ways: w,
                entry,
                ..
            } => {
                (bucket, ways) = (b, w.max(1));
                e.vip_bucket = b;
                e.vip_index = entry;
                if entry.is_none() {
                    unmatched = format!(
                        "VIP table bucket {b} holds no entry for {} {proto}",
                        flow.dst
                    );
                }
            }
            Step::PortSlots {
                index,
                entry,
                port,
                outcome,
            } => {
                vip = entry;
                match outcome {
                    SlotOutcome::Several => e.steps.push(format!(
                        "VIP entry {index} (bucket {bucket}, way {}) has {} for {proto}; a later fragment carries no port",
                        index % ways,
                        held(&entry)
                    )),
                    SlotOutcome::NoSlot => {
                        unmatched = match port {
                            Some(p) => format!("VIP entry {index} has no port range holding port {p}"),
                            None => format!("VIP entry {index} has no valid port slot"),
                        }
                    }
                    SlotOutcome::Matched { slot, rule } => {
                        let name = symbols.rule(rule).unwrap_or("?").to_string();
                        e.steps.push(format!(
                            "rule {name} (id {rule}): {} {} {}; VIP table bucket {bucket}, way {}",
                            u128_to_addr(entry.addr),
                            proto_name(entry.protocol),
                            ports_of(&entry, slot),
                            index % ways
                        ));
                        e.rule = Some(name);
                        e.rule_id = Some(rule);
                    }
                }
            }
            Step::Rule { id, entry } => {
                if !entry.is_some_and(|r| r.valid) {
                    unmatched = format!("rule id {id} has no valid descriptor");
                }
            }
            Step::Acl {
                client, outcome, ..
            } => match outcome {
                AclOutcome::NotEnabled => e.acl = Some("none".into()),
                AclOutcome::Allowed { prefix, .. } => {
                    let shown =
                        if nlb_hw::hash::is_ipv4_mapped(prefix.addr) && prefix.prefix_len >= 96 {
                            format!("{}/{}", u128_to_addr(prefix.addr), prefix.prefix_len - 96)
                        } else {
                            format!(
                                "{}/{}",
                                std::net::Ipv6Addr::from(prefix.addr),
                                prefix.prefix_len
                            )
                        };
                    e.acl = Some(format!("allowed by {shown}"));
                    e.steps.push(format!(
                        "ACL: source {} allowed by {shown}",
                        u128_to_addr(client)
                    ));
                }
                AclOutcome::Denied => {
                    e.acl = Some("denied".into());
                    last = format!(
                        "ACL: source {} is outside the rule's sourceRanges (SPEC R9.1)",
                        u128_to_addr(client)
                    );
                }
            },
            Step::FragmentPunt(why) => match why {
                FragmentPunt::LaterOnSeveralSlots { .. } => {
                    last = "punted: the host remembers the first fragment's rule and backend (SPEC R4.3)".into();
                }
                FragmentPunt::FirstOnSeveralSlots { .. } => {
                    last = format!(
                        "a first fragment on a VIP with {} for {proto}: punted with its rule so the host sends the later fragments the same way (SPEC R4.3)",
                        held(&vip)
                    );
                }
                FragmentPunt::TcpOfTrackingPool => {
                    last = tcp_fragment_punt(&mut e, tables, symbols, flow, &packet);
                }
            },
            Step::Pool { id, entry } => {
                pool = entry.unwrap_or_default();
                let name = symbols.pool(id).unwrap_or("?").to_string();
                let serving = if pool.failed_over {
                    format!(
                        "failed over: backup pool {}'s slice serves",
                        symbols.pool(pool.backup_pool).unwrap_or("?")
                    )
                } else {
                    "its own slice serves".to_string()
                };
                e.steps.push(format!(
                    "pool {name} (id {id}): affinity {}, delivery {}; {serving}: slots {}..{} ({} slots)",
                    pool.affinity.name(),
                    pool.delivery.name(),
                    pool.maglev_base,
                    u64::from(pool.maglev_base) + u64::from(pool.maglev_size),
                    pool.maglev_size
                ));
                e.pool = Some(name);
                e.pool_id = Some(id);
                e.failed_over = pool.failed_over;
                e.affinity = Some(pool.affinity.name().to_string());
                e.delivery = Some(pool.delivery.name().to_string());
                e.slice_base = Some(pool.maglev_base);
                e.slice_size = Some(pool.maglev_size);
                if !pool.valid {
                    last = "the pool has no backend".into();
                }
            }
            Step::Key {
                key,
                hash,
                fragment,
                affinity,
            } => {
                let kt = key.key_type;
                e.key = Some(key_name(kt).into());
                e.key_bytes = Some(hex(&key.bytes()));
                e.hash = Some(hash);
                // Narrowed from the whole packet's key (SPEC R4.2).
                let frag = if fragment && lookup::key_type(affinity, false) != kt {
                    " (a fragment: the 3-tuple, SPEC R4.2)"
                } else {
                    ""
                };
                e.steps
                    .push(format!("key {}{frag}: hash {hash:#010x}", key_name(kt)));
            }
            Step::Maglev {
                base,
                size,
                hash,
                offset,
                slot,
                backend,
            } => {
                if size == 0 {
                    last = "the pool has no backend".into();
                } else {
                    e.slot = u32::try_from(slot).ok();
                    e.steps.push(format!(
                        "slot {base} + ({hash:#010x} × {size}) >> 32 = {base} + {offset} = {slot}"
                    ));
                    if backend.is_none() {
                        last = "the slot lies outside the slot memory".into();
                    }
                }
            }
            Step::Backend { id, entry } => {
                let be = entry.unwrap_or_default();
                let name = symbols.backend(id).unwrap_or("?").to_string();
                last = if be.valid {
                    format!(
                        "backend {name} (id {id}) {} {} by {}",
                        u128_to_addr(be.addr),
                        crate::model::format_mac(be.mac),
                        pool.delivery.name()
                    )
                } else {
                    format!("backend id {id} has no valid entry")
                };
                e.backend = Some(name);
                e.backend_id = Some(id);
                e.backend_ip = Some(u128_to_addr(be.addr).to_string());
                e.backend_mac = Some(crate::model::format_mac(be.mac));
            }
            Step::Verdict { reason, .. } => {
                let text = if matches!(reason, Reason::NoRule | Reason::IcmpNoFlow) {
                    format!(
                        "{unmatched}: no rule matches, default action {} (SPEC R2.4)",
                        nic.default_action.name()
                    )
                } else {
                    std::mem::take(&mut last)
                };
                e.steps.push(text);
            }
            Step::Disabled
            | Step::Parsed(_)
            | Step::IcmpQuote { .. }
            | Step::Flow { .. }
            | Step::Conntrack(_)
            | Step::Action { .. }
            | Step::Event(_) => {}
        }
    }
    e
}

/// A TCP fragment of a pool that tracks connections (`docs/pipeline.md` §6): the NIC punts
/// it, and the host sends it where the connection goes. Words what the host does, and for a
/// first fragment which backend it picks when no connection is established (the host's own
/// decision, [`host::first_fragment`], without a connection table). Returns the last step.
fn tcp_fragment_punt(
    e: &mut Explanation,
    tables: &Tables,
    symbols: &Symbols,
    flow: &Flow,
    packet: &Packet,
) -> String {
    let which = if flow.fragment == Fragment::First {
        "a first"
    } else {
        "a later"
    };
    e.steps.push(format!(
        "{which} TCP fragment on a pool that tracks connections: a fragment key (3-tuple under NONE) could send it to another backend than its connection's (SPEC R4.1 over R4.2)"
    ));
    if flow.fragment == Fragment::Later {
        return "punted: the host sends it the way of its datagram's first fragment (per source, destination, protocol and IP ID; held until the first arrives, SPEC R4.3)".into();
    }
    let Some(rule) = e.rule_id else {
        return "punted".into();
    };
    let mut trace = Trace::default();
    let choice = host::first_fragment(
        tables,
        None::<&ConnTable>,
        rule,
        &packet.flow,
        packet.tcp_flags,
        &mut trace,
    );
    let mut key = String::new();
    let mut hash = 0;
    let mut slot = None;
    for step in &trace.steps {
        match *step {
            Step::Key {
                key: k, hash: h, ..
            } => {
                key = key_name(k.key_type).to_string();
                hash = h;
            }
            Step::Maglev { size, slot: s, .. } if size != 0 => slot = Some(s),
            _ => {}
        }
    }
    let without = match (choice, slot) {
        (Ok(c), Some(slot)) => format!(
            "to backend {} (id {}), the one a whole packet of the flow gets (key {key}, hash {hash:#010x}, slot {slot})",
            symbols.backend(c.backend).unwrap_or("?"),
            c.backend
        ),
        (_, None) => "the pool has no backend, so it is dropped".to_string(),
        (Err(_), Some(slot)) => {
            format!("nowhere: slot {slot} (key {key}) names no valid backend, so it is dropped")
        }
    };
    format!(
        "punted with its rule: the host sends it, and the later fragments of its datagram, to its connection's backend (the host's connection table, by the 5-tuple its ports give); with no connection, {without}"
    )
}
