//! The lookup stages of docs/pipeline.md §3–§8, each written once: the ICMP quote's reading,
//! the flow hashes, the VIP table, the port slots, the rule descriptor, the source ACL, the
//! fragment rules, the pool and its serving slice, the affinity key, the connection table,
//! Maglev and the backend entry.
//!
//! [`lookup`] chains them for one packet's flow, as the NIC does; the frame-level reference
//! ([`crate::pipeline`]), `nlbctl explain` and the slow path's decisions ([`crate::host`]) are
//! built from these functions, so none of them computes a step of its own. Every stage takes a
//! [`Recorder`] and reports its inputs and outcome as a [`Step`].

use crate::conntrack::{self, ConnTableView};
use crate::parse::{proto, tcp_flags, InnerFlow};
use crate::trace::{
    AclOutcome, ConnStep, Flow, Fragment, FragmentPunt, Reading, Recorder, SlotOutcome, Step,
};
use nlb_hw::enums::{Affinity, DefaultAction, Delivery, KeyType, Reason, Verdict};
use nlb_hw::layouts::{AclEntry, BackendEntry, PoolEntry, RuleEntry, VipEntry};
use nlb_hw::{table_index, FlowKey, NicSettings, Tables};

/// Whether a protocol carries ports in the flow (§3): TCP and UDP only. Every other protocol
/// (ICMP that is not an error, ICMPv6, ESP, GRE, SCTP, ...) is *portless*: its ports are 0.
/// (SCTP has ports on the wire; the pipeline does not read them, as Google Cloud's
/// `L3_DEFAULT` rules treat it as one of "all the other protocols".)
pub fn carries_ports(protocol: u8) -> bool {
    protocol == proto::TCP || protocol == proto::UDP
}

/// The VIP protocol of a flow's protocol (§3): the protocol itself for TCP and UDP, 0 ("every
/// other protocol", the entry of an `L3_DEFAULT` rule) for the portless ones.
pub fn vip_protocol(protocol: u8) -> u8 {
    if carries_ports(protocol) {
        protocol
    } else {
        0
    }
}

/// The key of the rule lookup: VIP protocol + VIP (key type `VIP`). `protocol` is the VIP
/// entry's protocol ([`vip_protocol`] of a flow's).
pub fn vip_key(protocol: u8, vip: u128) -> FlowKey {
    FlowKey {
        key_type: KeyType::Vip,
        protocol,
        dst_addr: vip,
        ..FlowKey::default()
    }
}

/// The VIP-table bucket of (VIP protocol, VIP): `index(hash(VIP key), vip_buckets)` (§4).
/// Where the compiler places a VIP entry of `protocol` (0 for an `L3_DEFAULT` rule's), and
/// where the pipeline looks for it.
pub fn vip_bucket(profile: &nlb_hw::Profile, protocol: u8, vip: u128) -> u32 {
    table_index(vip_key(protocol, vip).hash(), profile.vip_buckets)
}

/// The VIP entry of (VIP protocol, VIP) (§4): the lowest way of its bucket with `valid`,
/// equal protocol and equal address. `protocol` is the VIP protocol ([`vip_protocol`] of a
/// flow's). Returns the entry's index (`bucket × ways + way`).
pub fn vip_entry<R: Recorder>(t: &Tables, protocol: u8, vip: u128, rec: &mut R) -> Option<u32> {
    let hash = vip_key(protocol, vip).hash();
    let ways = t.profile.vip_ways;
    let bucket = table_index(hash, t.profile.vip_buckets);
    let start = bucket as usize * ways as usize;
    let entry = t
        .vip
        .get(start..start + ways as usize)
        .and_then(|w| {
            w.iter()
                .position(|e| e.valid && e.protocol == protocol && e.addr == vip)
        })
        .map(|w| (start + w) as u32);
    rec.step(|| Step::Vip {
        protocol,
        vip,
        hash,
        bucket,
        ways,
        entry,
    });
    entry
}

/// Valid port slots of a VIP entry.
pub fn valid_slots(entry: &VipEntry) -> usize {
    entry.slot.iter().filter(|s| s.valid).count()
}

/// The port slots of a VIP entry (§4). `port` is the VIP port, `None` for a later fragment
/// (no ports): then no valid slot → no rule, one → that slot whatever its range, two or more
/// → the host decides.
pub fn port_slot<R: Recorder>(
    index: u32,
    entry: &VipEntry,
    port: Option<u16>,
    rec: &mut R,
) -> SlotOutcome {
    let matched = |slot: usize| SlotOutcome::Matched {
        slot,
        rule: entry.slot[slot].rule,
    };
    let outcome = match port {
        None => {
            let mut valid = entry
                .slot
                .iter()
                .enumerate()
                .filter(|(_, s)| s.valid)
                .map(|(i, _)| i);
            match (valid.next(), valid.next()) {
                (None, _) => SlotOutcome::NoSlot,
                (Some(i), None) => matched(i),
                (Some(_), Some(_)) => SlotOutcome::Several,
            }
        }
        Some(port) => entry
            .slot
            .iter()
            .position(|s| s.valid && s.port_lo <= port && port <= s.port_hi)
            .map_or(SlotOutcome::NoSlot, matched),
    };
    rec.step(|| Step::PortSlots {
        index,
        entry: *entry,
        port,
        outcome,
    });
    outcome
}

/// The rule descriptor of a slot's rule id (§4): `None` beyond the table or not `valid`.
pub fn rule_entry<R: Recorder>(t: &Tables, id: u16, rec: &mut R) -> Option<RuleEntry> {
    let entry = t.rules.get(usize::from(id)).copied();
    rec.step(|| Step::Rule { id, entry });
    entry.filter(|r| r.valid)
}

/// The lowest valid prefix of `acl` holding `addr`: `prefix_len ≤ 128` and the top
/// `prefix_len` bits equal (length 0 holds everything). All prefixes are compared in parallel
/// in the NIC; the lowest is what `explain` names.
pub fn acl_match(acl: &AclEntry, addr: u128) -> Option<usize> {
    acl.prefix.iter().position(|p| {
        p.valid
            && match p.prefix_len {
                0 => true,
                len @ 1..=128 => (addr ^ p.addr) >> (128 - u32::from(len)) == 0,
                _ => false,
            }
    })
}

/// The rule's source ACL on the flow's client (§5, SPEC R9.1): whether the packet may pass.
pub fn acl<R: Recorder>(
    t: &Tables,
    rule_id: u16,
    rule: &RuleEntry,
    client: u128,
    rec: &mut R,
) -> bool {
    let outcome = if !rule.acl_enabled {
        AclOutcome::NotEnabled
    } else {
        let acl = t.acl.get(usize::from(rule_id));
        match acl.and_then(|a| acl_match(a, client).map(|i| (i, a.prefix[i]))) {
            Some((index, prefix)) => AclOutcome::Allowed { index, prefix },
            None => AclOutcome::Denied,
        }
    };
    rec.step(|| Step::Acl {
        rule: rule_id,
        client,
        outcome,
    });
    outcome != AclOutcome::Denied
}

/// The pool descriptor of a rule (§6): `None` beyond the table or not `valid`.
pub fn pool_entry<R: Recorder>(t: &Tables, id: u16, rec: &mut R) -> Option<PoolEntry> {
    let entry = t.pools.get(usize::from(id)).copied();
    rec.step(|| Step::Pool { id, entry });
    entry.filter(|p| p.valid)
}

/// The key type of an affinity (§6, SPEC R3.1), narrowed to the 3-tuple for fragments under
/// 5-tuple affinities so every fragment of a datagram meets (SPEC R4.2). `fragment` picks the
/// table's second column: fragments, and portless flows.
pub fn key_type(affinity: Affinity, fragment: bool) -> KeyType {
    match affinity {
        Affinity::None | Affinity::ClientIpPortProto if fragment => KeyType::Tuple3,
        Affinity::None | Affinity::ClientIpPortProto => KeyType::Tuple5,
        Affinity::ClientIpProto => KeyType::Tuple3,
        Affinity::ClientIp => KeyType::Tuple2,
        Affinity::ClientIpNoDestination => KeyType::Tuple1,
    }
}

/// The affinity key of a flow in a pool and its hash (§6: `aff_hash`). A fragment, and a
/// portless flow (it has no ports to tell its 5-tuple from its 3-tuple), take the fragment
/// column of the key-type table.
pub fn affinity_key<R: Recorder>(
    pool: &PoolEntry,
    flow: &Flow,
    fragment: bool,
    rec: &mut R,
) -> (KeyType, u32) {
    let portless = !carries_ports(flow.protocol);
    let key = flow.key(key_type(pool.affinity, fragment || portless));
    let hash = key.hash();
    rec.step(|| Step::Key {
        affinity: pool.affinity,
        fragment,
        portless,
        key,
        hash,
    });
    (key.key_type, hash)
}

/// The flow's hashes (§3): `h5` = hash of its TUPLE5 key, and the flow hash (punt headers,
/// events, encapsulation): the TUPLE3 hash for a fragment, else `h5`.
pub fn flow_hashes(flow: &Flow, fragment: bool) -> (u32, u32) {
    let h5 = flow.key(KeyType::Tuple5).hash();
    let flow_hash = if fragment {
        flow.key(KeyType::Tuple3).hash()
    } else {
        h5
    };
    (h5, flow_hash)
}

/// Maglev (§8, SPEC R3.2): `slot = maglev_base + index(hash, maglev_size)` in the pool's
/// serving slice; the backend id the slot holds. `None` for an empty slice or a slot beyond
/// the slot memory.
pub fn maglev<R: Recorder>(t: &Tables, pool: &PoolEntry, hash: u32, rec: &mut R) -> Option<u16> {
    let (base, size) = (pool.maglev_base, pool.maglev_size);
    let offset = if size == 0 {
        0
    } else {
        table_index(hash, size)
    };
    let slot = u64::from(base) + u64::from(offset);
    let backend = if size == 0 {
        None
    } else {
        usize::try_from(slot)
            .ok()
            .and_then(|s| t.maglev.get(s))
            .map(|s| s.backend)
    };
    rec.step(|| Step::Maglev {
        base,
        size,
        hash,
        offset,
        slot,
        backend,
    });
    backend
}

/// The backend entry of a backend id (§8): `None` beyond the table or not `valid`.
pub fn backend_entry<R: Recorder>(t: &Tables, id: u16, rec: &mut R) -> Option<BackendEntry> {
    let entry = t.backends.get(usize::from(id)).copied();
    rec.step(|| Step::Backend { id, entry });
    entry.filter(|b| b.valid)
}

/// The flow an ICMP error's quote names (§3, SPEC R10.2): the reversed reading (a packet sent
/// from a VIP) when the VIP table has an entry for (protocol, quoted source), else the
/// forward reading. (Quotes are TCP or UDP, so their VIP protocol is their own.)
pub fn quoted_flow<R: Recorder>(t: &Tables, quote: &InnerFlow, rec: &mut R) -> Flow {
    let reversed = Flow {
        protocol: quote.protocol,
        client: quote.dst,
        client_port: quote.dst_port,
        vip: quote.src,
        vip_port: quote.src_port,
    };
    let (flow, reading) = if vip_entry(
        t,
        vip_protocol(reversed.protocol),
        reversed.vip,
        &mut crate::NoTrace,
    )
    .is_some()
    {
        (reversed, Reading::Reversed)
    } else {
        let forward = Flow {
            protocol: quote.protocol,
            client: quote.src,
            client_port: quote.src_port,
            vip: quote.dst,
            vip_port: quote.dst_port,
        };
        (forward, Reading::Forward)
    };
    rec.step(|| Step::IcmpQuote {
        quote: Some(*quote),
        reading: Some(reading),
    });
    flow
}

/// A TCP packet with SYN set and ACK clear: it selects anew (§7).
pub fn syn_only(tcp_flags: u8) -> bool {
    tcp_flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN
}

/// What the rule lookup found for a flow (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleMatch {
    /// A valid rule.
    Rule {
        /// Rule id.
        id: u16,
        /// Its descriptor.
        entry: RuleEntry,
        /// Valid port slots of the VIP entry.
        valid_slots: usize,
    },
    /// No VIP entry, no slot, or the slot's rule has no valid descriptor: unmatched.
    Unmatched,
    /// A later fragment on a VIP entry with several valid slots.
    Several {
        /// Valid port slots of the VIP entry.
        valid_slots: usize,
    },
}

/// The rule lookup of a flow (§4): VIP entry of its VIP protocol, port slots
/// (`later_fragment`: without ports; a portless flow's VIP port is 0), rule descriptor.
pub fn rule_of<R: Recorder>(
    t: &Tables,
    flow: &Flow,
    later_fragment: bool,
    rec: &mut R,
) -> RuleMatch {
    let Some(index) = vip_entry(t, vip_protocol(flow.protocol), flow.vip, rec) else {
        return RuleMatch::Unmatched;
    };
    let Some(entry) = t.vip.get(index as usize) else {
        return RuleMatch::Unmatched;
    };
    let valid_slots = valid_slots(entry);
    let port = (!later_fragment).then_some(flow.vip_port);
    match port_slot(index, entry, port, rec) {
        SlotOutcome::Several => RuleMatch::Several { valid_slots },
        SlotOutcome::NoSlot => RuleMatch::Unmatched,
        SlotOutcome::Matched { rule, .. } => match rule_entry(t, rule, rec) {
            Some(entry) => RuleMatch::Rule {
                id: rule,
                entry,
                valid_slots,
            },
            None => RuleMatch::Unmatched,
        },
    }
}

/// What the connection table said about a packet (§7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CtOutcome {
    /// Not looked up: not trackable, or the packet ended before the lookup.
    #[default]
    None,
    /// An entry matched; its backend was used.
    Hit,
    /// No entry (or a TCP SYN, which always selects anew).
    Miss,
}

/// A packet as the lookup sees it: its flow and what decides the fragment and connection
/// rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Packet {
    /// The flow (for an ICMP error, the flow its quote names: [`quoted_flow`]).
    pub flow: Flow,
    /// Fragment or not.
    pub fragment: Fragment,
    /// An ICMP error about the flow (never a fragment).
    pub icmp_error: bool,
    /// TCP flags (0 for anything but TCP).
    pub tcp_flags: u8,
}

/// What the lookup of one packet decided (§4–§8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    /// Verdict. `FORWARD` means a usable backend was found; the action may still drop the
    /// packet (`TOO_BIG`).
    pub verdict: Verdict,
    /// Reason.
    pub reason: Reason,
    /// The matched rule (also for ACL drops and fragment punts).
    pub rule: Option<u16>,
    /// The rule's pool id (also when the descriptor is unusable).
    pub pool: Option<u16>,
    /// The affinity key type, once backend selection was reached.
    pub key: Option<KeyType>,
    /// TUPLE5 hash of the flow.
    pub h5: u32,
    /// The flow hash (TUPLE3 for fragments).
    pub flow_hash: u32,
    /// Connection-table outcome.
    pub conntrack: CtOutcome,
    /// The entry that hit.
    pub ct_index: Option<u32>,
    /// The backend id chosen (also when its entry is unusable).
    pub backend: Option<u16>,
    /// For `FORWARD`: the backend's entry and the pool's delivery (what the action needs).
    pub target: Option<(BackendEntry, Delivery)>,
}

/// The verdict of a packet that matches no rule (§1): `ctrl.default_action`.
pub fn default_verdict(settings: &NicSettings) -> Verdict {
    match settings.default_action {
        DefaultAction::Pass => Verdict::Pass,
        DefaultAction::Drop => Verdict::Drop,
    }
}

/// The lookups of one packet over a table bank, as the NIC runs them (§4–§8). `conntrack` is
/// the connection table the packet sees (`None`: none is consulted, the choice for a new
/// connection).
pub fn lookup<C: ConnTableView + ?Sized, R: Recorder>(
    t: &Tables,
    settings: &NicSettings,
    conntrack: Option<&C>,
    p: &Packet,
    rec: &mut R,
) -> Lookup {
    let flow = p.flow;
    let icmp = p.icmp_error;
    let fragment = p.fragment.is_fragment() && !icmp;
    let (h5, flow_hash) = flow_hashes(&flow, fragment);
    rec.step(|| Step::Flow {
        flow,
        fragment: if icmp { Fragment::No } else { p.fragment },
        icmp_error: icmp,
        h5,
        flow_hash,
    });
    let mut res = Lookup {
        verdict: Verdict::Forward,
        reason: Reason::Forwarded,
        rule: None,
        pool: None,
        key: None,
        h5,
        flow_hash,
        conntrack: CtOutcome::None,
        ct_index: None,
        backend: None,
        target: None,
    };
    let end = |mut res: Lookup, verdict: Verdict, reason: Reason, rec: &mut R| {
        res.verdict = verdict;
        res.reason = reason;
        rec.step(|| Step::Verdict { verdict, reason });
        res
    };
    let no_match = if icmp {
        Reason::IcmpNoFlow
    } else {
        Reason::NoRule
    };
    let later = !icmp && p.fragment == Fragment::Later;

    // Rule lookup (SPEC R2.1): VIP + protocol, then the port slots, then the descriptor.
    let (rule_id, rule, valid_slots) = match rule_of(t, &flow, later, rec) {
        RuleMatch::Rule {
            id,
            entry,
            valid_slots,
        } => (id, entry, valid_slots),
        RuleMatch::Unmatched => return end(res, default_verdict(settings), no_match, rec),
        RuleMatch::Several { valid_slots } => {
            // No ports (SPEC R4.3): several rules for the protocol need the host.
            rec.step(|| Step::FragmentPunt(FragmentPunt::LaterOnSeveralSlots { valid_slots }));
            return end(res, Verdict::Punt, Reason::FragmentNeedsState, rec);
        }
    };
    res.rule = Some(rule_id);

    // Source ACL (SPEC R9.1), on the flow's client.
    if !acl(t, rule_id, &rule, flow.client, rec) {
        return end(res, Verdict::Drop, Reason::AclDenied, rec);
    }
    // A first fragment on a VIP with several rules goes to the host with its rule, so it can
    // send the later ones the same way (SPEC R4.3).
    if fragment && valid_slots > 1 {
        rec.step(|| Step::FragmentPunt(FragmentPunt::FirstOnSeveralSlots { valid_slots }));
        return end(res, Verdict::Punt, Reason::FragmentNeedsState, rec);
    }

    res.pool = Some(rule.pool);
    let Some(pool) = pool_entry(t, rule.pool, rec) else {
        return end(res, Verdict::Drop, Reason::NoBackend, rec);
    };
    // A TCP fragment of a tracking pool may belong to an established connection, whose
    // backend its fragment key need not hash to: the host sends it the connection's way
    // (SPEC R4.1 over R4.2). UDP keeps the 3-tuple rule.
    if fragment && flow.protocol == proto::TCP && pool.track {
        rec.step(|| Step::FragmentPunt(FragmentPunt::TcpOfTrackingPool));
        return end(res, Verdict::Punt, Reason::FragmentNeedsState, rec);
    }
    let (key_type, aff_hash) = affinity_key(&pool, &flow, fragment, rec);
    res.key = Some(key_type);

    // Connection table (SPEC R4.1): whatever the protocol; a portless flow is tracked by its
    // protocol and addresses (ports 0).
    let trackable = pool.track && !fragment;
    let mut from_connection = None;
    if !trackable {
        rec.step(|| Step::Conntrack(ConnStep::NotTrackable));
    } else {
        res.conntrack = CtOutcome::Miss;
        if !icmp && flow.protocol == proto::TCP && syn_only(p.tcp_flags) {
            rec.step(|| Step::Conntrack(ConnStep::SynSelectsAnew));
        } else if let Some(ct) = conntrack {
            let (bucket, hit) = conntrack::lookup(ct, &flow.key(KeyType::Tuple5));
            let hit = hit.and_then(|i| ct.entry(i).map(|e| (i, e.backend)));
            rec.step(|| Step::Conntrack(ConnStep::Lookup { bucket, hit }));
            if let Some((index, backend)) = hit {
                res.conntrack = CtOutcome::Hit;
                res.ct_index = Some(index);
                from_connection = Some(backend);
            }
        } else {
            rec.step(|| Step::Conntrack(ConnStep::NoTable));
        }
    }

    // Maglev on a miss or for untracked packets (SPEC R3.2), then the backend entry.
    let backend_id = match from_connection {
        Some(b) => b,
        None => match maglev(t, &pool, aff_hash, rec) {
            Some(b) => b,
            None => return end(res, Verdict::Drop, Reason::NoBackend, rec),
        },
    };
    res.backend = Some(backend_id);
    let Some(backend) = backend_entry(t, backend_id, rec) else {
        return end(res, Verdict::Drop, Reason::NoBackend, rec);
    };
    res.target = Some((backend, pool.delivery));
    let reason = if icmp {
        Reason::IcmpErrorForwarded
    } else {
        Reason::Forwarded
    };
    end(res, Verdict::Forward, reason, rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/pipeline.md §3: TCP and UDP keep their number, every other protocol is 0.
    #[test]
    fn vip_protocol_of_each_protocol() {
        for p in 0..=255u8 {
            let want = if p == 6 || p == 17 { p } else { 0 };
            assert_eq!(vip_protocol(p), want, "{p}");
        }
    }
}
