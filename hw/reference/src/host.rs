//! The decisions the host's slow path takes on the NIC's behalf (docs/pipeline.md §3, §6;
//! SPEC R4.1–R4.3, R10.2), built from the same lookup stages as the NIC's ([`crate::lookup`]):
//! where a punted first fragment goes, and where an ICMP error that reaches the host goes.
//!
//! The host's copy of the connection table is any [`ConnTableView`]; a connection counts only
//! while its backend has a valid entry (the host removes connections before it invalidates a
//! backend, so this is a guard, not a rule the NIC has).

use crate::conntrack::{self, ConnTableView};
use crate::lookup::{self, RuleMatch};
use crate::parse::{proto, InnerFlow};
use crate::trace::{ConnStep, Flow, Recorder, Step};
use nlb_hw::enums::KeyType;
use nlb_hw::Tables;

/// Where the host sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Choice {
    /// Rule id.
    pub rule: u16,
    /// Pool id of the rule (its descriptor carries the delivery used for injection).
    pub pool: u16,
    /// Backend id.
    pub backend: u16,
}

/// Why the host has no backend for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// The flow matches no forwarding rule (or the rule has no valid descriptor).
    NoRule,
    /// The flow's client is outside the rule's source ranges.
    AclDenied,
    /// The pool has no valid descriptor, an empty slice, or its slot names no valid backend.
    NoBackend,
}

/// The backend of the flow's established connection in the host's copy of the connection
/// table (§7; `flow` client → VIP), when that backend still has a valid entry.
pub fn established_backend<C: ConnTableView + ?Sized, R: Recorder>(
    t: &Tables,
    ct: &C,
    flow: &Flow,
    rec: &mut R,
) -> Option<u16> {
    let (_, index) = conntrack::lookup(ct, &flow.key(KeyType::Tuple5));
    let backend = index
        .and_then(|i| ct.entry(i))
        .map(|e| e.backend)
        .filter(|&b| t.backends.get(usize::from(b)).is_some_and(|e| e.valid));
    rec.step(|| Step::Conntrack(ConnStep::Host { backend }));
    backend
}

/// Rule → pool → Maglev → backend for a flow whose rule is known (`fragment`: hashed with the
/// fragment key).
fn by_maglev<R: Recorder>(
    t: &Tables,
    rule: u16,
    pool_id: u16,
    flow: &Flow,
    fragment: bool,
    rec: &mut R,
) -> Result<Choice, Miss> {
    let pool = lookup::pool_entry(t, pool_id, rec).ok_or(Miss::NoBackend)?;
    let (_, hash) = lookup::affinity_key(&pool, flow, fragment, rec);
    let backend = lookup::maglev(t, &pool, hash, rec).ok_or(Miss::NoBackend)?;
    lookup::backend_entry(t, backend, rec).ok_or(Miss::NoBackend)?;
    Ok(Choice {
        rule,
        pool: pool_id,
        backend,
    })
}

/// Where a first fragment punted with its rule goes (SPEC R4.1–R4.3, §6): a TCP fragment of
/// a pool that tracks connections goes to its connection's backend, or, without one, to the
/// backend a whole packet of the flow gets (the pool's whole-packet key: the 5-tuple under
/// `NONE`); a SYN without ACK selects anew as a whole one does (§7). Any other fragment goes
/// to the backend of the fragment key (the 3-tuple under `NONE`), as the NIC sends fragments
/// of single-rule VIPs. `tcp_flags` are the first fragment's; `conntrack` is the host's copy.
pub fn first_fragment<C: ConnTableView + ?Sized, R: Recorder>(
    t: &Tables,
    conntrack: Option<&C>,
    rule: u16,
    flow: &Flow,
    tcp_flags: u8,
    rec: &mut R,
) -> Result<Choice, Miss> {
    let entry = lookup::rule_entry(t, rule, rec).ok_or(Miss::NoRule)?;
    let tracks = t
        .pools
        .get(usize::from(entry.pool))
        .is_some_and(|p| p.valid && p.track);
    if flow.protocol != proto::TCP || !tracks {
        return by_maglev(t, rule, entry.pool, flow, true, rec);
    }
    let established = match conntrack {
        Some(_) if lookup::syn_only(tcp_flags) => {
            rec.step(|| Step::Conntrack(ConnStep::SynSelectsAnew));
            None
        }
        Some(ct) => established_backend(t, ct, flow, rec),
        None => {
            rec.step(|| Step::Conntrack(ConnStep::NoTable));
            None
        }
    };
    match established {
        Some(backend) => Ok(Choice {
            rule,
            pool: entry.pool,
            backend,
        }),
        None => by_maglev(t, rule, entry.pool, flow, false, rec),
    }
}

/// Where an ICMP error that reached the host goes (SPEC R10.2, §3): the flow its quote names
/// (reversed reading first), that flow's rule, its ACL on the client, the established
/// connection of a tracking pool, else Maglev with the pool's whole-packet key — exactly as
/// for a packet of the flow.
pub fn icmp_error<C: ConnTableView + ?Sized, R: Recorder>(
    t: &Tables,
    conntrack: Option<&C>,
    quote: &InnerFlow,
    rec: &mut R,
) -> Result<Choice, Miss> {
    let flow = lookup::quoted_flow(t, quote, rec);
    let RuleMatch::Rule { id, entry, .. } = lookup::rule_of(t, &flow, false, rec) else {
        return Err(Miss::NoRule);
    };
    if !lookup::acl(t, id, &entry, flow.client, rec) {
        return Err(Miss::AclDenied);
    }
    let tracks = t
        .pools
        .get(usize::from(entry.pool))
        .is_some_and(|p| p.valid && p.track);
    let established = conntrack
        .filter(|_| tracks)
        .and_then(|ct| established_backend(t, ct, &flow, rec));
    match established {
        Some(backend) => Ok(Choice {
            rule: id,
            pool: entry.pool,
            backend,
        }),
        None => by_maglev(t, id, entry.pool, &flow, false, rec),
    }
}
