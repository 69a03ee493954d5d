//! The pipeline semantics of `docs/pipeline.md` over one table bank: parse → rule lookup →
//! ACL → pool → conntrack → Maglev → backend → action.
//!
//! [`process`] is a pure function of the bank, the NIC settings, the connection table and the
//! frame: it returns a [`PacketResult`] and writes the output frame; the caller (the
//! simulated device) applies the side effects (counters, hit bits, queues). Processing is
//! split in two halves, [`front`] (everything up to the connection-table bucket) and
//! [`finish`], so that a batch can request every bucket from memory before it needs one; the
//! result is the same as processing one packet at a time.
//!
//! Performance (the batch API is the model's hot path; see `benches/pipeline.rs`): the batch
//! runs both halves in place on its result slots and a compact per-packet lane instead of
//! moving results and parsed headers around; each key is hashed once, straight from its
//! fields (`keyhash`), and the TUPLE5 hash serves the flow hash, the connection table and a
//! 5-tuple Maglev key alike; consecutive packets to the same VIP reuse its lookup
//! ([`VipMemo`]); the connection table filters ways by an 8-bit tag before comparing keys,
//! and compares 16-byte key slots rather than whole entries, so a hit costs the bucket's tag
//! word and the one cache line that holds the bucket's key slots and hit bits (see
//! [`crate::conntrack`]).
//! None of this is observable: `tests/differential.rs` holds the model to the reference
//! semantics (crate `nlb-reference`, the straightforward implementation the host side uses)
//! on random traffic.

use crate::action::{self, Edit, MAX_FRAME};
use crate::conntrack::{tag_of, ConnTable, ProbeKey};
use crate::keyhash::key_hash;
use crate::parse::{self, proto, tcp_flags, IpHeaders, Parsed};
use nlb_hw::enums::{Affinity, DefaultAction, Delivery, Event, KeyType, Reason, Verdict};
use nlb_hw::layout::field_max;
use nlb_hw::layouts::{
    AclEntry, BackendEntry, CtEntry, InjectHeader, LearnEvent, PoolEntry, PuntHeader, RuleEntry,
    VipEntry,
};
use nlb_hw::{table_index, NicSettings, Tables};

/// What the connection table said about a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CtOutcome {
    /// Not looked up: not trackable (a fragment, or a pool without `track`), or the packet
    /// ended before the lookup.
    #[default]
    None,
    /// An entry matched; its backend was used.
    Hit,
    /// No entry (or a TCP SYN, which always selects anew).
    Miss,
}

impl CtOutcome {
    /// `hit` / `miss` / `None` as the sim report writes it.
    pub fn report_name(self) -> Option<&'static str> {
        match self {
            CtOutcome::None => None,
            CtOutcome::Hit => Some("hit"),
            CtOutcome::Miss => Some("miss"),
        }
    }
}

/// Everything the pipeline decided about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketResult {
    /// Verdict.
    pub verdict: Verdict,
    /// Reason (its counter was incremented).
    pub reason: Reason,
    /// Table bank the packet latched.
    pub bank: u8,
    /// Matched rule id.
    pub rule: Option<u16>,
    /// Pool id of the rule (or of the inject header).
    pub pool: Option<u16>,
    /// Backend id chosen.
    pub backend: Option<u16>,
    /// Affinity key type of the packet under its pool, once backend selection was reached
    /// (also on a conntrack hit, where it was computed but not needed).
    pub key: Option<KeyType>,
    /// Connection-table outcome.
    pub conntrack: CtOutcome,
    /// Index of the connection-table entry that hit.
    pub ct_index: Option<u32>,
    /// Flow hash: TUPLE5 hash of the flow (TUPLE3 for fragments); for ICMP errors the hash of
    /// the quoted flow in client→VIP orientation. 0 for frames that are not IP.
    pub flow_hash: u32,
    /// IPv4 identification or IPv6 fragment identification.
    pub ip_id: u32,
    /// Received frame length in bytes.
    pub frame_len: usize,
    /// Bytes of the output frame (FORWARD only, else 0).
    pub out_len: usize,
    /// Learn or teardown event (FORWARD only).
    pub event: Option<LearnEvent>,
}

impl PacketResult {
    /// A result with its verdict, reason, bank and frame length, and nothing else decided (no
    /// rule, pool, backend, key, connection-table outcome, hashes, output or event).
    pub fn new(verdict: Verdict, reason: Reason, bank: u8, frame_len: usize) -> PacketResult {
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

    /// The punt header of this packet (for the punt queue).
    pub fn punt_header(&self) -> PuntHeader {
        PuntHeader {
            reason: self.reason,
            verdict: self.verdict,
            bank: self.bank != 0,
            rule_valid: self.rule.is_some(),
            rule: self.rule.unwrap_or(0) & field_max(PuntHeader::RULE_WIDTH) as u16,
            flow_hash: self.flow_hash,
            frame_len: self
                .frame_len
                .min(field_max(PuntHeader::FRAME_LEN_WIDTH) as _) as u16,
            ip_id: self.ip_id,
        }
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

/// Session-affinity key type (SPEC R3.1, R4.2). The fast model's own copy: the host side
/// takes it from the reference (`nlb_reference::lookup::key_type`).
#[inline]
fn affinity_key(affinity: Affinity, fragment: bool) -> KeyType {
    match affinity {
        Affinity::None | Affinity::ClientIpPortProto if fragment => KeyType::Tuple3,
        Affinity::None | Affinity::ClientIpPortProto => KeyType::Tuple5,
        Affinity::ClientIpProto => KeyType::Tuple3,
        Affinity::ClientIp => KeyType::Tuple2,
        Affinity::ClientIpNoDestination => KeyType::Tuple1,
    }
}

/// Whether the flow of a protocol carries ports (TCP, UDP); every other protocol is portless,
/// its ports 0, its VIP protocol 0 (the entries of `L3_DEFAULT` rules). The fast model's own
/// copy (see [`affinity_key`]).
#[inline]
fn carries_ports(protocol: u8) -> bool {
    protocol == proto::TCP || protocol == proto::UDP
}

/// The VIP protocol of a flow's protocol: its own for TCP and UDP, else 0.
#[inline]
fn vip_protocol(protocol: u8) -> u8 {
    if carries_ports(protocol) {
        protocol
    } else {
        0
    }
}

/// Whether `addr` lies in one valid prefix of `acl` (all prefixes compared in parallel). The
/// fast model's own copy (see [`affinity_key`]).
#[inline]
fn acl_allows(acl: &AclEntry, addr: u128) -> bool {
    acl.prefix.iter().any(|p| {
        p.valid
            && match p.prefix_len {
                0 => true,
                len @ 1..=128 => (addr ^ p.addr) >> (128 - u32::from(len)) == 0,
                _ => false,
            }
    })
}

/// The rule lookup's view of a VIP entry: the index of the lowest way of the bucket that
/// matches. `protocol` is the VIP protocol.
#[inline]
fn vip_lookup_index(t: &Tables, protocol: u8, vip: u128) -> Option<usize> {
    let ways = t.profile.vip_ways as usize;
    let h = key_hash(KeyType::Vip, protocol, 0, 0, 0, vip);
    let start = table_index(h, t.profile.vip_buckets) as usize * ways;
    t.vip
        .get(start..start + ways)?
        .iter()
        .position(|e| e.valid && e.protocol == protocol && e.addr == vip)
        .map(|w| start + w)
}

/// The last VIP lookup of a batch. Tables do not change during a batch, so packets to the
/// same VIP (the common case) reuse the answer instead of hashing the VIP key again.
#[derive(Debug, Clone, Copy)]
pub struct VipMemo<'t> {
    vip: u128,
    /// The protocol looked up; `NO_PROTOCOL` before the first lookup.
    protocol: u16,
    entry: Option<&'t VipEntry>,
}

/// `VipMemo::protocol` of an empty memo: no protocol number (they are 8-bit).
const NO_PROTOCOL: u16 = 0x100;

impl Default for VipMemo<'_> {
    fn default() -> Self {
        VipMemo {
            vip: 0,
            protocol: NO_PROTOCOL,
            entry: None,
        }
    }
}

impl<'t> VipMemo<'t> {
    #[inline(always)]
    fn lookup(&mut self, t: &'t Tables, protocol: u8, vip: u128) -> Option<&'t VipEntry> {
        if self.protocol == u16::from(protocol) && self.vip == vip {
            self.entry
        } else {
            self.miss(t, protocol, vip)
        }
    }

    #[inline(never)]
    fn miss(&mut self, t: &'t Tables, protocol: u8, vip: u128) -> Option<&'t VipEntry> {
        let entry = vip_lookup_index(t, protocol, vip).and_then(|i| t.vip.get(i));
        *self = VipMemo {
            vip,
            protocol: u16::from(protocol),
            entry,
        };
        entry
    }
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
    #[inline]
    fn hash(&self, key_type: KeyType) -> u32 {
        key_hash(
            key_type,
            self.protocol,
            self.client_port,
            self.vip_port,
            self.client,
            self.vip,
        )
    }

    /// Whether a connection-table entry is valid and holds this flow (SPEC R4.1: protocol,
    /// ports and addresses in client → VIP orientation).
    #[inline]
    fn is_entry_of(&self, e: &CtEntry) -> bool {
        e.valid
            && e.protocol == self.protocol
            && e.src_port == self.client_port
            && e.dst_port == self.vip_port
            && e.src_addr == self.client
            && e.dst_addr == self.vip
    }
}

/// What a packet carries from the front half to the back half besides its result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lane {
    flow: Flow,
    edit: Edit,
    maglev_base: u32,
    maglev_size: u32,
    aff_hash: u32,
    /// The connection-table bucket to read, when `ct_lookup`.
    ct_bucket: u32,
    /// Tag of the flow's TUPLE5 hash (see [`crate::conntrack::tag_of`]).
    ct_tag: u8,
    ct_lookup: bool,
    delivery: Delivery,
    tcp_flags: u8,
    icmp: bool,
}

impl Default for Lane {
    fn default() -> Lane {
        Lane {
            flow: Flow {
                protocol: 0,
                client: 0,
                client_port: 0,
                vip: 0,
                vip_port: 0,
            },
            edit: Edit {
                l3_offset: 0,
                l3_end: 0,
                ip_id: 0,
                family: parse::Family::V4,
                tos: 0,
                dont_fragment: false,
            },
            maglev_base: 0,
            maglev_size: 0,
            aff_hash: 0,
            ct_bucket: 0,
            ct_tag: 0,
            ct_lookup: false,
            delivery: Delivery::L2Dsr,
            tcp_flags: 0,
            icmp: false,
        }
    }
}

impl Lane {
    /// Starts fetching the tags of the connection-table bucket.
    #[inline]
    pub(crate) fn request_tags(&self, conntrack: &ConnTable) {
        if self.ct_lookup {
            conntrack.prefetch_tags(self.ct_bucket);
        }
    }

    /// Once the tags are at hand: starts fetching the key slot of the first way whose tag
    /// matches the flow's.
    #[inline]
    pub(crate) fn request_candidates(&self, conntrack: &ConnTable) {
        if self.ct_lookup {
            conntrack.prefetch_candidates(self.ct_bucket, self.ct_tag);
        }
    }
}

/// A packet that got through the front half and needs the connection table and the action.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    res: PacketResult,
    lane: Lane,
    /// The connection-table bucket to read (`None`: no lookup).
    pub ct_bucket: Option<u32>,
}

impl Pending {
    /// Starts fetching what the connection-table lookup of this packet will read: the
    /// bucket's tags, or (`candidates`, once the tags are in cache) the key slots they point at.
    #[inline]
    pub fn prefetch(&self, conntrack: &ConnTable, candidates: bool) {
        // The public field decides, as in `finish`.
        if let Some(b) = self.ct_bucket {
            if candidates {
                conntrack.prefetch_candidates(b, self.lane.ct_tag);
            } else {
                conntrack.prefetch_tags(b);
            }
        }
    }
}

/// Outcome of the front half.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
pub enum Front {
    /// The verdict is known.
    Done(PacketResult),
    /// Backend selection and action still to do.
    Pending(Pending),
}

/// A fresh result of a received frame (what the front half starts from).
#[inline]
pub(crate) fn initial_result(ctx: &Context<'_>, frame: &[u8]) -> PacketResult {
    PacketResult::new(Verdict::Forward, Reason::Forwarded, ctx.bank, frame.len())
}

#[inline]
fn unmatched(ctx: &Context<'_>, reason: Reason, res: &mut PacketResult) -> bool {
    res.verdict = match ctx.settings.default_action {
        DefaultAction::Pass => Verdict::Pass,
        DefaultAction::Drop => Verdict::Drop,
    };
    res.reason = reason;
    res.rule = None;
    res.pool = None;
    false
}

#[inline]
fn ended(verdict: Verdict, reason: Reason, res: &mut PacketResult) -> bool {
    res.verdict = verdict;
    res.reason = reason;
    false
}

/// The front half: parse, rule lookup, ACL, pool, keys and hashes, connection-table bucket.
pub fn front(ctx: &Context<'_>, frame: &[u8]) -> Front {
    front_memo(ctx, frame, &mut VipMemo::default())
}

/// [`front`] with a VIP lookup memo shared by the packets of a batch.
#[inline]
pub fn front_memo<'t>(ctx: &Context<'t>, frame: &[u8], memo: &mut VipMemo<'t>) -> Front {
    let mut res = initial_result(ctx, frame);
    let mut lane = Lane::default();
    if front_into(ctx, frame, memo, &mut res, &mut lane) {
        Front::Pending(Pending {
            res,
            ct_bucket: lane.ct_lookup.then_some(lane.ct_bucket),
            lane,
        })
    } else {
        Front::Done(res)
    }
}

/// The front half in place: `res` (from [`initial_result`]) gets what is known so far;
/// returns true when the packet needs the back half, with `lane` filled in.
#[inline]
pub(crate) fn front_into<'t>(
    ctx: &Context<'t>,
    frame: &[u8],
    memo: &mut VipMemo<'t>,
    res: &mut PacketResult,
    lane: &mut Lane,
) -> bool {
    if !ctx.enabled {
        return ended(Verdict::Pass, Reason::PipelineDisabled, res);
    }
    // The common frame and the rest take separate copies of what follows, so that the
    // common one keeps its headers in registers.
    match parse::parse_common(frame) {
        Some(hdr) => front_parsed(ctx, &hdr, memo, res, lane),
        None => match parse::parse_general(frame) {
            Ok(Parsed::Ip(hdr)) => front_parsed(ctx, &hdr, memo, res, lane),
            Ok(Parsed::NotIp) => ended(Verdict::Pass, Reason::NotIp, res),
            Err(reason) => ended(Verdict::Drop, reason, res),
        },
    }
}

/// [`front_into`] after the parser: the flow, the rule ([`rule_step`]), then the pool
/// ([`pool_step`]).
#[inline(always)]
fn front_parsed<'t>(
    ctx: &Context<'t>,
    hdr: &IpHeaders,
    memo: &mut VipMemo<'t>,
    res: &mut PacketResult,
    lane: &mut Lane,
) -> bool {
    res.ip_id = hdr.ip_id;
    let icmp = hdr.icmp_error;
    let Some((flow, vip)) = flow_and_vip(ctx.tables, hdr, memo) else {
        return unmatched(ctx, Reason::IcmpNoFlow, res);
    };
    // What the back half needs of the headers goes to the lane now, while it is at hand
    // (the lane is read only if the packet gets that far).
    lane.flow = flow;
    lane.edit = Edit::of(hdr);
    lane.tcp_flags = hdr.tcp_flags;
    lane.icmp = icmp;
    let fragment = hdr.is_fragment && !icmp;
    let h5 = flow.hash(KeyType::Tuple5);
    let flow_hash = if fragment {
        flow.hash(KeyType::Tuple3)
    } else {
        h5
    };
    res.flow_hash = flow_hash;
    let rule = match rule_step(ctx, hdr, &flow, vip, fragment, res) {
        Ok(rule) => rule,
        Err(more) => return more,
    };
    pool_step(ctx, rule, fragment, h5, flow_hash, res, lane)
}

/// The flow: the packet itself, or the flow an ICMP error quotes, with its VIP entry. A quote
/// is first read as a packet sent from a VIP (the backend's direct reply, reversed: the usual
/// case), and only when its source is no VIP of its protocol as a packet sent toward a VIP.
/// (Quotes are TCP or UDP: their VIP protocol is their own.) `None`: an ICMP error that
/// quotes no flow.
#[inline(always)]
fn flow_and_vip<'t>(
    t: &'t Tables,
    hdr: &IpHeaders,
    memo: &mut VipMemo<'t>,
) -> Option<(Flow, Option<&'t VipEntry>)> {
    if !hdr.icmp_error {
        let flow = Flow {
            protocol: hdr.protocol,
            client: hdr.src,
            client_port: hdr.src_port,
            vip: hdr.dst,
            vip_port: hdr.dst_port,
        };
        return Some((flow, memo.lookup(t, vip_protocol(flow.protocol), flow.vip)));
    }
    let inner = hdr.icmp_inner?;
    let reversed = Flow {
        protocol: inner.protocol,
        client: inner.dst,
        client_port: inner.dst_port,
        vip: inner.src,
        vip_port: inner.src_port,
    };
    match memo.lookup(t, reversed.protocol, reversed.vip) {
        Some(v) => Some((reversed, Some(v))),
        None => {
            let forward = Flow {
                protocol: inner.protocol,
                client: inner.src,
                client_port: inner.src_port,
                vip: inner.dst,
                vip_port: inner.dst_port,
            };
            Some((forward, memo.lookup(t, forward.protocol, forward.vip)))
        }
    }
}

/// Rule lookup (SPEC R2.1): VIP + protocol, then the port-range slots; the source ACL (SPEC
/// R9.1). `Err` carries [`front_into`]'s answer when the packet ends here (no rule, denied,
/// or a fragment the host must place).
#[inline(always)]
fn rule_step<'t>(
    ctx: &Context<'t>,
    hdr: &IpHeaders,
    flow: &Flow,
    vip: Option<&VipEntry>,
    fragment: bool,
    res: &mut PacketResult,
) -> Result<&'t RuleEntry, bool> {
    let t = ctx.tables;
    let no_match = if hdr.icmp_error {
        Reason::IcmpNoFlow
    } else {
        Reason::NoRule
    };
    let Some(vip) = vip else {
        return Err(unmatched(ctx, no_match, res));
    };
    // Two or more valid slots; asked only of fragments (whole packets need just the match).
    let several = |v: &VipEntry| v.slot.iter().filter(|s| s.valid).nth(1).is_some();
    let rule_id = if hdr.is_later_fragment() {
        // No ports (SPEC R4.3): one rule for the protocol decides it, several need the host.
        if several(vip) {
            return Err(ended(Verdict::Punt, Reason::FragmentNeedsState, res));
        }
        vip.slot.iter().find(|s| s.valid).map(|s| s.rule)
    } else {
        vip.slot
            .iter()
            .find(|s| s.valid && s.port_lo <= flow.vip_port && flow.vip_port <= s.port_hi)
            .map(|s| s.rule)
    };
    let Some(rule_id) = rule_id else {
        return Err(unmatched(ctx, no_match, res));
    };
    let Some(rule) = t.rules.get(usize::from(rule_id)).filter(|r| r.valid) else {
        return Err(unmatched(ctx, no_match, res));
    };
    res.rule = Some(rule_id);

    // Source ACL (SPEC R9.1), on the flow's client.
    if rule.acl_enabled {
        let allowed = t
            .acl
            .get(usize::from(rule_id))
            .is_some_and(|acl| acl_allows(acl, flow.client));
        if !allowed {
            return Err(ended(Verdict::Drop, Reason::AclDenied, res));
        }
    }
    // First fragments on a VIP with several rules go to the host too, with their rule, so it
    // can send the later ones the same way.
    if fragment && several(vip) {
        return Err(ended(Verdict::Punt, Reason::FragmentNeedsState, res));
    }
    Ok(rule)
}

/// The rule's pool: the key and hash of its affinity, whether to look the connection up, and
/// what the back half needs of it (in `lane`). Returns [`front_into`]'s answer.
#[inline(always)]
fn pool_step(
    ctx: &Context<'_>,
    rule: &RuleEntry,
    fragment: bool,
    h5: u32,
    flow_hash: u32,
    res: &mut PacketResult,
    lane: &mut Lane,
) -> bool {
    let flow = lane.flow;
    res.pool = Some(rule.pool);
    let Some(pool) = ctx
        .tables
        .pools
        .get(usize::from(rule.pool))
        .filter(|p| p.valid)
    else {
        return ended(Verdict::Drop, Reason::NoBackend, res);
    };
    // A TCP fragment of a tracking pool may belong to an established connection, whose
    // backend the fragment key need not hash to: the host sends it the connection's way
    // (SPEC R4.1 over R4.2; a first fragment with its rule). UDP keeps the 3-tuple rule.
    if fragment && flow.protocol == proto::TCP && pool.track {
        return ended(Verdict::Punt, Reason::FragmentNeedsState, res);
    }
    // A portless flow has no ports to tell its 5-tuple from its 3-tuple: the fragment column.
    let key_type = affinity_key(pool.affinity, fragment || !carries_ports(flow.protocol));
    res.key = Some(key_type);
    let aff_hash = match key_type {
        KeyType::Tuple5 => h5,
        KeyType::Tuple3 if fragment => flow_hash,
        k => flow.hash(k),
    };
    // Any protocol is tracked (a portless flow by its protocol and addresses, ports 0).
    let trackable = pool.track && !fragment;
    let mut ct_lookup = false;
    if trackable {
        let syn_only = !lane.icmp
            && flow.protocol == proto::TCP
            && lane.tcp_flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
        res.conntrack = CtOutcome::Miss;
        ct_lookup = !syn_only;
    }
    lane.maglev_base = pool.maglev_base;
    lane.maglev_size = pool.maglev_size;
    lane.aff_hash = aff_hash;
    lane.ct_bucket = if ct_lookup {
        ctx.conntrack.bucket_of(h5)
    } else {
        0
    };
    lane.ct_tag = tag_of(h5);
    lane.ct_lookup = ct_lookup;
    lane.delivery = pool.delivery;
    true
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
    let mut lane = p.lane;
    // The public field decides, as it always did.
    lane.ct_lookup = p.ct_bucket.is_some();
    lane.ct_bucket = p.ct_bucket.unwrap_or(0);
    finish_into(ctx, frame, &lane, &mut res, out)?;
    Ok(res)
}

/// The back half in place on the result the front half left.
#[inline]
pub(crate) fn finish_into(
    ctx: &Context<'_>,
    frame: &[u8],
    p: &Lane,
    res: &mut PacketResult,
    out: &mut [u8],
) -> Result<(), OutputError> {
    let Some((backend_id, backend)) = select_backend(ctx, p, res) else {
        return Ok(());
    };
    emit(ctx, frame, &p.edit, p.delivery, backend, res, out)?;
    note_event(p, backend_id, res);
    Ok(())
}

/// Connection table, Maglev and the backend entry: the chosen backend when it is valid (the
/// reason set for a FORWARD), else `None` with the packet dropped (NO_BACKEND).
#[inline]
fn select_backend<'t>(
    ctx: &Context<'t>,
    p: &Lane,
    res: &mut PacketResult,
) -> Option<(u16, &'t BackendEntry)> {
    let t = ctx.tables;
    let flow = &p.flow;

    let mut backend_id = None;
    if p.ct_lookup {
        let key = match p.edit.family {
            // An IPv4 packet's flow (or the IPv4 flow its ICMP error quotes) has IPv4-mapped
            // addresses.
            parse::Family::V4 => ProbeKey::mapped_v4(
                flow.protocol,
                flow.client,
                flow.client_port,
                flow.vip,
                flow.vip_port,
            ),
            parse::Family::V6 => ProbeKey::new(
                flow.protocol,
                flow.client,
                flow.client_port,
                flow.vip,
                flow.vip_port,
            ),
        };
        if let Some((i, e)) = ctx
            .conntrack
            .probe(p.ct_bucket, p.ct_tag, &key, |e| flow.is_entry_of(e))
        {
            res.conntrack = CtOutcome::Hit;
            res.ct_index = Some(i);
            backend_id = Some(e);
        }
    }
    let backend_id = match backend_id {
        Some(b) => b,
        None => {
            // Maglev (SPEC R3.2): the pool's slice of the slot memory.
            if p.maglev_size == 0 {
                drop_no_backend(res);
                return None;
            }
            let slot = p.maglev_base as u64 + u64::from(table_index(p.aff_hash, p.maglev_size));
            match t.maglev.get(slot as usize) {
                Some(s) => s.backend,
                None => {
                    drop_no_backend(res);
                    return None;
                }
            }
        }
    };
    res.backend = Some(backend_id);
    let Some(backend) = t.backends.get(usize::from(backend_id)).filter(|b| b.valid) else {
        drop_no_backend(res);
        return None;
    };
    res.reason = if p.icmp {
        Reason::IcmpErrorForwarded
    } else {
        Reason::Forwarded
    };
    Some((backend_id, backend))
}

/// The learn or teardown event of a forwarded packet (docs/pipeline.md section 10).
#[inline]
fn note_event(p: &Lane, backend_id: u16, res: &mut PacketResult) {
    let flow = &p.flow;
    if res.verdict == Verdict::Forward && res.conntrack != CtOutcome::None && !p.icmp {
        let closing =
            flow.protocol == proto::TCP && p.tcp_flags & (tcp_flags::FIN | tcp_flags::RST) != 0;
        let event = if closing {
            Some(Event::Teardown)
        } else if res.conntrack == CtOutcome::Miss {
            Some(Event::Learn)
        } else {
            None
        };
        if let Some(event) = event {
            res.event = Some(LearnEvent {
                event,
                protocol: flow.protocol,
                src_port: flow.client_port,
                dst_port: flow.vip_port,
                src_addr: flow.client,
                dst_addr: flow.vip,
                backend: backend_id,
                rule: res.rule.unwrap_or(0) & field_max(LearnEvent::RULE_WIDTH) as u16,
                flow_hash: res.flow_hash,
            });
        }
    }
}

/// The lookup's decision for a frame already parsed (`parsed`: what [`parse::parse`] returned
/// for it; `frame_len`: its length in bytes): the [`PacketResult`] [`process`] gives for that
/// frame, `out_len` included, without writing the output frame. The RTL's `nlb_lookup` takes
/// the same descriptor (docs/pipeline.md sections 3-10); its bench (verif/tests/lookup.rs)
/// compares the two.
pub fn decide(
    ctx: &Context<'_>,
    parsed: &Result<Parsed, Reason>,
    frame_len: usize,
) -> PacketResult {
    let mut res = PacketResult::new(Verdict::Forward, Reason::Forwarded, ctx.bank, frame_len);
    if !ctx.enabled {
        ended(Verdict::Pass, Reason::PipelineDisabled, &mut res);
        return res;
    }
    let mut lane = Lane::default();
    let pending = match parsed {
        Ok(Parsed::Ip(hdr)) => front_parsed(ctx, hdr, &mut VipMemo::default(), &mut res, &mut lane),
        Ok(Parsed::NotIp) => ended(Verdict::Pass, Reason::NotIp, &mut res),
        Err(reason) => ended(Verdict::Drop, *reason, &mut res),
    };
    if pending {
        if let Some((backend_id, backend)) = select_backend(ctx, &lane, &mut res) {
            size_check(frame_len, &lane.edit, lane.delivery, backend, &mut res);
            note_event(&lane, backend_id, &mut res);
        }
    }
    res
}

/// [`process_injected`]'s decision for a frame already parsed (as [`decide`]).
pub fn decide_injected(
    ctx: &Context<'_>,
    header: &InjectHeader,
    parsed: &Result<Parsed, Reason>,
    frame_len: usize,
) -> PacketResult {
    let mut res = PacketResult::new(Verdict::Forward, Reason::Injected, ctx.bank, frame_len);
    if let Some((hdr, pool, backend)) = inject_front(ctx, header, parsed, &mut res) {
        size_check(frame_len, &Edit::of(hdr), pool.delivery, backend, &mut res);
    }
    res
}

/// The output length, or TOO_BIG past [`MAX_FRAME`] (what [`emit`] decides before writing).
#[inline]
fn size_check(
    frame_len: usize,
    hdr: &Edit,
    delivery: Delivery,
    backend: &BackendEntry,
    res: &mut PacketResult,
) -> bool {
    let needed = action::edit_len(frame_len, hdr, delivery, backend);
    if needed > MAX_FRAME {
        res.verdict = Verdict::Drop;
        res.reason = Reason::TooBig;
        return false;
    }
    res.out_len = needed;
    res.verdict = Verdict::Forward;
    true
}

#[inline]
fn drop_no_backend(res: &mut PacketResult) {
    res.verdict = Verdict::Drop;
    res.reason = Reason::NoBackend;
}

/// The action stage: size check, then the editor.
#[inline]
fn emit(
    ctx: &Context<'_>,
    frame: &[u8],
    hdr: &Edit,
    delivery: Delivery,
    backend: &BackendEntry,
    res: &mut PacketResult,
    out: &mut [u8],
) -> Result<(), OutputError> {
    if !size_check(frame.len(), hdr, delivery, backend, res) {
        return Ok(());
    }
    let needed = res.out_len;
    if out.len() < needed {
        return Err(OutputError::TooSmall {
            needed,
            got: out.len(),
        });
    }
    res.out_len = action::write_edit(
        frame,
        hdr,
        delivery,
        backend,
        ctx.settings,
        res.flow_hash,
        out,
    );
    res.verdict = Verdict::Forward;
    Ok(())
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
    let mut res = PacketResult::new(Verdict::Forward, Reason::Injected, ctx.bank, frame.len());
    let parsed = parse::parse(frame);
    let Some((hdr, pool, backend)) = inject_front(ctx, header, &parsed, &mut res) else {
        return Ok(res);
    };
    emit(
        ctx,
        frame,
        &Edit::of(hdr),
        pool.delivery,
        backend,
        &mut res,
        out,
    )?;
    Ok(res)
}

/// An injected frame up to the action: drops for parse errors and frames that are not IP (the
/// result says which), then the header's pool and backend, which must be valid.
fn inject_front<'p, 't>(
    ctx: &Context<'t>,
    header: &InjectHeader,
    parsed: &'p Result<Parsed, Reason>,
    res: &mut PacketResult,
) -> Option<(&'p IpHeaders, &'t PoolEntry, &'t BackendEntry)> {
    let hdr = match parsed {
        Ok(Parsed::Ip(h)) => h,
        Ok(Parsed::NotIp) => {
            res.verdict = Verdict::Drop;
            res.reason = Reason::NotIp;
            return None;
        }
        Err(reason) => {
            res.verdict = Verdict::Drop;
            res.reason = *reason;
            return None;
        }
    };
    res.ip_id = hdr.ip_id;
    let ty = if hdr.is_fragment {
        KeyType::Tuple3
    } else {
        KeyType::Tuple5
    };
    res.flow_hash = key_hash(
        ty,
        hdr.protocol,
        hdr.src_port,
        hdr.dst_port,
        hdr.src,
        hdr.dst,
    );
    res.pool = Some(header.pool);
    res.backend = Some(header.backend);
    let t = ctx.tables;
    let pool = t.pools.get(usize::from(header.pool)).filter(|p| p.valid);
    let backend = t
        .backends
        .get(usize::from(header.backend))
        .filter(|b| b.valid);
    let (Some(pool), Some(backend)) = (pool, backend) else {
        drop_no_backend(res);
        return None;
    };
    Some((hdr, pool, backend))
}
