//! (Test-only reference: the golden model as first written, kept verbatim but for paths.)
//! The pipeline semantics of `docs/pipeline.md` over one table bank: parse → rule lookup →
//! ACL → pool → conntrack → Maglev → backend → action.
//!
//! [`process`] is a pure function of the bank, the NIC settings, the connection table and the
//! frame: it returns a [`PacketResult`] and writes the output frame; the caller (the
//! simulated device) applies the side effects (counters, hit bits, queues). Processing is
//! split in two halves, [`front`] (everything up to the connection-table bucket) and
//! [`finish`], so that a batch can touch every bucket before it needs one; the result is the
//! same as processing one packet at a time.

use super::action::{self, MAX_FRAME};
use super::conntrack::{tuple5_key, ConnTable};
use super::parse::{self, proto, tcp_flags, IpHeaders, Parsed};
use firmware_sim::{CtOutcome, PacketResult};
use nlb_hw::enums::{Affinity, DefaultAction, Event, KeyType, Reason, Verdict};
use nlb_hw::layouts::{
    AclEntry, BackendEntry, InjectHeader, LearnEvent, PoolEntry, PuntHeader, VipEntry,
};
use nlb_hw::{table_index, FlowKey, NicSettings, Tables};

/// A fresh result (the old `PacketResult::new`).
fn new_result(verdict: Verdict, reason: Reason, bank: u8, frame_len: usize) -> PacketResult {
    PacketResult {
        verdict,
        reason,
        bank,
        rule: None,
        pool: None,
        backend: None,
        key: None,
        conntrack: CtOutcome::None,
        ct_index: None,
        flow_hash: 0,
        ip_id: 0,
        frame_len,
        out_len: 0,
        event: None,
    }
}

/// The punt header of a result (the old `PacketResult::punt_header`).
pub fn punt_header(r: &PacketResult) -> PuntHeader {
    PuntHeader {
        reason: r.reason,
        verdict: r.verdict,
        bank: r.bank != 0,
        rule_valid: r.rule.is_some(),
        rule: r.rule.unwrap_or(0) & 0x0fff,
        flow_hash: r.flow_hash,
        frame_len: r.frame_len.min(0x3fff) as u16,
        ip_id: r.ip_id,
    }
}

/// `report` names of key types (`5tuple`, ...), as the sim report writes them.
pub fn key_report_name(k: KeyType) -> &'static str {
    match k {
        KeyType::Vip => "vip",
        KeyType::Tuple1 => "1tuple",
        KeyType::Tuple2 => "2tuple",
        KeyType::Tuple3 => "3tuple",
        KeyType::Tuple5 => "5tuple",
    }
}

/// What one packet sees: the bank it latched, the NIC settings, the connection table.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The latched table bank.
    pub tables: &'a Tables,
    /// Bank number (for punt headers).
    pub bank: u8,
    /// `ctrl` settings.
    pub settings: &'a NicSettings,
    /// `ctrl.enable`.
    pub enabled: bool,
    /// The connection table.
    pub conntrack: &'a ConnTable,
}

/// Why an output frame could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// The caller's buffer is smaller than the output frame.
    #[error("output buffer of {got} bytes is too small for a {needed}-byte frame (use action::MAX_FRAME)")]
    TooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
}

/// Session-affinity key type (SPEC R3.1, R4.2).
#[inline]
pub fn affinity_key(affinity: Affinity, fragment: bool) -> KeyType {
    match affinity {
        Affinity::None | Affinity::ClientIpPortProto if fragment => KeyType::Tuple3,
        Affinity::None | Affinity::ClientIpPortProto => KeyType::Tuple5,
        Affinity::ClientIpProto => KeyType::Tuple3,
        Affinity::ClientIp => KeyType::Tuple2,
        Affinity::ClientIpNoDestination => KeyType::Tuple1,
    }
}

/// Whether `addr` lies in one valid prefix of `acl` (all prefixes compared in parallel).
#[inline]
pub fn acl_allows(acl: &AclEntry, addr: u128) -> bool {
    acl.prefix.iter().any(|p| {
        p.valid
            && match p.prefix_len {
                0 => true,
                len @ 1..=128 => (addr ^ p.addr) >> (128 - u32::from(len)) == 0,
                _ => false,
            }
    })
}

/// The rule lookup's view of a VIP entry: the lowest way of the bucket that matches.
#[inline]
fn vip_lookup(t: &Tables, protocol: u8, vip: u128) -> Option<&VipEntry> {
    let key = FlowKey {
        key_type: KeyType::Vip,
        protocol,
        dst_addr: vip,
        ..FlowKey::default()
    };
    let ways = t.profile.vip_ways as usize;
    let bucket = table_index(key.hash(), t.profile.vip_buckets) as usize;
    let start = bucket * ways;
    t.vip
        .get(start..start + ways)?
        .iter()
        .find(|e| e.valid && e.protocol == protocol && e.addr == vip)
}

/// The flow a packet is load-balanced as (client → VIP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flow {
    protocol: u8,
    client: u128,
    client_port: u16,
    vip: u128,
    vip_port: u16,
}

impl Flow {
    fn key(&self, key_type: KeyType) -> FlowKey {
        FlowKey {
            key_type,
            protocol: self.protocol,
            src_port: self.client_port,
            dst_port: self.vip_port,
            src_addr: self.client,
            dst_addr: self.vip,
        }
    }
}

/// A packet that got through the front half and needs the connection table and the action.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    res: PacketResult,
    hdr: IpHeaders,
    flow: Flow,
    pool: PoolEntry,
    aff_hash: u32,
    /// The connection-table bucket to read (`None`: no lookup).
    pub ct_bucket: Option<u32>,
    icmp: bool,
}

/// Outcome of the front half (kept unboxed: a batch holds these on the stack).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
pub enum Front {
    /// The verdict is known.
    Done(PacketResult),
    /// Backend selection and action still to do.
    Pending(Pending),
}

fn unmatched(ctx: &Context<'_>, reason: Reason, mut res: PacketResult) -> Front {
    res.verdict = match ctx.settings.default_action {
        DefaultAction::Pass => Verdict::Pass,
        DefaultAction::Drop => Verdict::Drop,
    };
    res.reason = reason;
    res.rule = None;
    res.pool = None;
    Front::Done(res)
}

fn ended(verdict: Verdict, reason: Reason, mut res: PacketResult) -> Front {
    res.verdict = verdict;
    res.reason = reason;
    Front::Done(res)
}

/// The front half: parse, rule lookup, ACL, pool, keys and hashes, connection-table bucket.
pub fn front(ctx: &Context<'_>, frame: &[u8]) -> Front {
    let mut res = new_result(Verdict::Forward, Reason::Forwarded, ctx.bank, frame.len());
    if !ctx.enabled {
        return ended(Verdict::Pass, Reason::PipelineDisabled, res);
    }
    let hdr = match parse::parse(frame) {
        Ok(Parsed::Ip(h)) => h,
        Ok(Parsed::NotIp) => return ended(Verdict::Pass, Reason::NotIp, res),
        Err(reason) => return ended(Verdict::Drop, reason, res),
    };
    res.ip_id = hdr.ip_id;
    let t = ctx.tables;

    // The flow: the packet itself, or the flow an ICMP error quotes. A quote is first read
    // as a packet sent from a VIP (the backend's direct reply, reversed: the usual case), and
    // only when its source is no VIP of its protocol as a packet sent toward a VIP.
    let icmp = hdr.icmp_error;
    let (flow, vip) = if icmp {
        let Some(inner) = hdr.icmp_inner else {
            return unmatched(ctx, Reason::IcmpNoFlow, res);
        };
        let reversed = Flow {
            protocol: inner.protocol,
            client: inner.dst,
            client_port: inner.dst_port,
            vip: inner.src,
            vip_port: inner.src_port,
        };
        match vip_lookup(t, reversed.protocol, reversed.vip) {
            Some(v) => (reversed, Some(v)),
            None => {
                let forward = Flow {
                    protocol: inner.protocol,
                    client: inner.src,
                    client_port: inner.src_port,
                    vip: inner.dst,
                    vip_port: inner.dst_port,
                };
                (forward, vip_lookup(t, forward.protocol, forward.vip))
            }
        }
    } else {
        let flow = Flow {
            protocol: hdr.protocol,
            client: hdr.src,
            client_port: hdr.src_port,
            vip: hdr.dst,
            vip_port: hdr.dst_port,
        };
        (flow, vip_lookup(t, flow.protocol, flow.vip))
    };
    let fragment = hdr.is_fragment && !icmp;
    let h5 = flow.key(KeyType::Tuple5).hash();
    let flow_hash = if fragment {
        flow.key(KeyType::Tuple3).hash()
    } else {
        h5
    };
    res.flow_hash = flow_hash;
    let no_match = if icmp {
        Reason::IcmpNoFlow
    } else {
        Reason::NoRule
    };

    // Rule lookup (SPEC R2.1): VIP + protocol, then the port-range slots.
    let Some(vip) = vip else {
        return unmatched(ctx, no_match, res);
    };
    let several = vip.slot.iter().filter(|s| s.valid).count() > 1;
    let rule_id = if hdr.is_later_fragment() {
        // No ports (SPEC R4.3): one rule for the protocol decides it, several need the host.
        if several {
            return ended(Verdict::Punt, Reason::FragmentNeedsState, res);
        }
        vip.slot.iter().find(|s| s.valid).map(|s| s.rule)
    } else {
        vip.slot
            .iter()
            .find(|s| s.valid && s.port_lo <= flow.vip_port && flow.vip_port <= s.port_hi)
            .map(|s| s.rule)
    };
    let Some(rule_id) = rule_id else {
        return unmatched(ctx, no_match, res);
    };
    let Some(rule) = t.rules.get(usize::from(rule_id)).filter(|r| r.valid) else {
        return unmatched(ctx, no_match, res);
    };
    res.rule = Some(rule_id);

    // Source ACL (SPEC R9.1), on the flow's client.
    if rule.acl_enabled {
        let allowed = t
            .acl
            .get(usize::from(rule_id))
            .is_some_and(|acl| acl_allows(acl, flow.client));
        if !allowed {
            return ended(Verdict::Drop, Reason::AclDenied, res);
        }
    }
    // First fragments on a VIP with several rules go to the host too, with their rule, so it
    // can send the later ones the same way.
    if fragment && several {
        return ended(Verdict::Punt, Reason::FragmentNeedsState, res);
    }

    res.pool = Some(rule.pool);
    let Some(pool) = t.pools.get(usize::from(rule.pool)).filter(|p| p.valid) else {
        return ended(Verdict::Drop, Reason::NoBackend, res);
    };
    // A TCP fragment of a tracking pool may belong to an established connection, whose
    // backend the fragment key need not hash to: the host sends it the connection's way
    // (SPEC R4.1 over R4.2; a first fragment with its rule). UDP keeps the 3-tuple rule.
    if fragment && flow.protocol == proto::TCP && pool.track {
        return ended(Verdict::Punt, Reason::FragmentNeedsState, res);
    }
    let key_type = affinity_key(pool.affinity, fragment);
    res.key = Some(key_type);
    let aff_hash = match key_type {
        KeyType::Tuple5 => h5,
        KeyType::Tuple3 if fragment => flow_hash,
        k => flow.key(k).hash(),
    };
    let trackable =
        pool.track && !fragment && (flow.protocol == proto::TCP || flow.protocol == proto::UDP);
    let ct_bucket = if !trackable {
        None
    } else {
        let syn_only = !icmp
            && flow.protocol == proto::TCP
            && hdr.tcp_flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
        res.conntrack = CtOutcome::Miss;
        (!syn_only).then(|| ctx.conntrack.bucket_of(h5))
    };
    Front::Pending(Pending {
        res,
        hdr,
        flow,
        pool: *pool,
        aff_hash,
        ct_bucket,
        icmp,
    })
}

/// The back half: connection table, Maglev, backend, events and the action. `out` receives
/// the output frame of a FORWARD verdict.
pub fn finish(
    ctx: &Context<'_>,
    frame: &[u8],
    p: &Pending,
    out: &mut [u8],
) -> Result<PacketResult, OutputError> {
    let mut res = p.res;
    let t = ctx.tables;
    let flow = &p.flow;
    let tuple5 = flow.key(KeyType::Tuple5);

    let mut backend_id = None;
    if let Some(bucket) = p.ct_bucket {
        if let Some(i) = ctx.conntrack.lookup_in(bucket, &tuple5) {
            res.conntrack = CtOutcome::Hit;
            res.ct_index = Some(i);
            backend_id = ctx.conntrack.entry(i).map(|e| e.backend);
        }
    }
    let backend_id = match backend_id {
        Some(b) => b,
        None => {
            // Maglev (SPEC R3.2): the pool's slice of the slot memory.
            if p.pool.maglev_size == 0 {
                return Ok(drop_no_backend(res));
            }
            let slot =
                p.pool.maglev_base as u64 + u64::from(table_index(p.aff_hash, p.pool.maglev_size));
            match t.maglev.get(slot as usize) {
                Some(s) => s.backend,
                None => return Ok(drop_no_backend(res)),
            }
        }
    };
    res.backend = Some(backend_id);
    let Some(backend) = t.backends.get(usize::from(backend_id)).filter(|b| b.valid) else {
        return Ok(drop_no_backend(res));
    };
    res.reason = if p.icmp {
        Reason::IcmpErrorForwarded
    } else {
        Reason::Forwarded
    };
    emit(ctx, frame, &p.hdr, p.pool.delivery, backend, res, out).map(|mut r| {
        if r.verdict == Verdict::Forward && res.conntrack != CtOutcome::None && !p.icmp {
            let closing = flow.protocol == proto::TCP
                && p.hdr.tcp_flags & (tcp_flags::FIN | tcp_flags::RST) != 0;
            let event = if closing {
                Some(Event::Teardown)
            } else if r.conntrack == CtOutcome::Miss {
                Some(Event::Learn)
            } else {
                None
            };
            r.event = event.map(|event| LearnEvent {
                event,
                protocol: flow.protocol,
                src_port: flow.client_port,
                dst_port: flow.vip_port,
                src_addr: flow.client,
                dst_addr: flow.vip,
                backend: backend_id,
                rule: r.rule.unwrap_or(0) & 0x0fff,
                flow_hash: r.flow_hash,
            });
        }
        r
    })
}

fn drop_no_backend(mut res: PacketResult) -> PacketResult {
    res.verdict = Verdict::Drop;
    res.reason = Reason::NoBackend;
    res
}

/// The action stage: size check, then the editor.
fn emit(
    ctx: &Context<'_>,
    frame: &[u8],
    hdr: &IpHeaders,
    delivery: nlb_hw::enums::Delivery,
    backend: &BackendEntry,
    mut res: PacketResult,
    out: &mut [u8],
) -> Result<PacketResult, OutputError> {
    let needed = action::output_len(frame.len(), hdr, delivery, backend);
    if needed > MAX_FRAME {
        res.verdict = Verdict::Drop;
        res.reason = Reason::TooBig;
        return Ok(res);
    }
    if out.len() < needed {
        return Err(OutputError::TooSmall {
            needed,
            got: out.len(),
        });
    }
    res.out_len = action::write_frame(
        frame,
        hdr,
        delivery,
        backend,
        ctx.settings,
        res.flow_hash,
        out,
    );
    res.verdict = Verdict::Forward;
    Ok(res)
}

/// One packet through the whole pipeline.
pub fn process(
    ctx: &Context<'_>,
    frame: &[u8],
    out: &mut [u8],
) -> Result<PacketResult, OutputError> {
    match front(ctx, frame) {
        Front::Done(r) => Ok(r),
        Front::Pending(p) => finish(ctx, frame, &p, out),
    }
}

/// A frame the host injected (inject queue): straight to the action stage with the header's
/// backend and the pool's delivery (reason `INJECTED`). `ctrl.enable` does not apply.
pub fn process_injected(
    ctx: &Context<'_>,
    header: &InjectHeader,
    frame: &[u8],
    out: &mut [u8],
) -> Result<PacketResult, OutputError> {
    let mut res = new_result(Verdict::Forward, Reason::Injected, ctx.bank, frame.len());
    let hdr = match parse::parse(frame) {
        Ok(Parsed::Ip(h)) => h,
        Ok(Parsed::NotIp) => {
            res.verdict = Verdict::Drop;
            res.reason = Reason::NotIp;
            return Ok(res);
        }
        Err(reason) => {
            res.verdict = Verdict::Drop;
            res.reason = reason;
            return Ok(res);
        }
    };
    res.ip_id = hdr.ip_id;
    let ty = if hdr.is_fragment {
        KeyType::Tuple3
    } else {
        KeyType::Tuple5
    };
    res.flow_hash = tuple5_key(hdr.protocol, hdr.src, hdr.src_port, hdr.dst, hdr.dst_port)
        .with_type(ty)
        .hash();
    res.pool = Some(header.pool);
    res.backend = Some(header.backend);
    let t = ctx.tables;
    let pool = t.pools.get(usize::from(header.pool)).filter(|p| p.valid);
    let backend = t
        .backends
        .get(usize::from(header.backend))
        .filter(|b| b.valid);
    let (Some(pool), Some(backend)) = (pool, backend) else {
        return Ok(drop_no_backend(res));
    };
    emit(ctx, frame, &hdr, pool.delivery, backend, res, out)
}
