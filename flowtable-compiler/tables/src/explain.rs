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
use serde::{Deserialize, Serialize};
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// For a backend service: what its service LB policy decided (SPEC R6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceExplanation>,
}

/// What a backend service's LB policy decides for new connections (SPEC R6): which tier,
/// region and zone the flow's backend is in, and every group's tier, capacity, utilisation
/// and share, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceExplanation {
    /// The backend service.
    pub service: String,
    /// Where the live connection counts come from, in words (a compile has none).
    pub live_counts: String,
    /// Group of the flow's backend.
    pub group: Option<String>,
    /// Its region.
    pub region: Option<String>,
    /// Its zone.
    pub zone: Option<String>,
    /// Its tier (0 is filled first).
    pub tier: Option<usize>,
    /// The share of new connections its group gets.
    pub share: Option<f64>,
    /// Every group, in the order the policy fills them (tiers first, then the groups that
    /// take nothing).
    pub groups: Vec<ServiceGroupExplanation>,
    /// The rule that decided the shares, with its SPEC number ([`crate::policy::Decision::rule`]).
    #[serde(default)]
    pub rule: String,
    /// The policy, where the live counts come from, each group and the flow's, in words (the
    /// decision's own steps, drain, failover, tiers, isolation, are the pool's step).
    pub steps: Vec<String>,
}

/// One group in a [`ServiceExplanation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceGroupExplanation {
    /// Group name.
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// Tier it serves in; `None` when it takes no new connection.
    pub tier: Option<usize>,
    /// Share of new connections.
    pub share: f64,
    /// Live connections the decision counted.
    pub live: u64,
    /// Target capacity (max connections × `capacityScaler`); `None`: no capacity limit.
    pub capacity: Option<f64>,
    /// live / capacity; `None` without a capacity limit.
    pub utilisation: Option<f64>,
    /// Healthy endpoints.
    pub healthy: usize,
    /// Endpoints.
    pub endpoints: usize,
    /// Drained by the automatic capacity drain (R6.3).
    pub drained: bool,
    /// Its healthy share is below the failover threshold (R6.4).
    pub below_threshold: bool,
    /// A failover backend of `failoverPolicy`.
    pub failover: bool,
    /// Why it gets what it gets.
    pub why: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn proto_name(p: u8) -> String {
    match p {
        1 => "ICMP".into(),
        6 => "TCP".into(),
        17 => "UDP".into(),
        47 => "GRE".into(),
        50 => "ESP".into(),
        51 => "AH".into(),
        58 => "ICMPv6".into(),
        132 => "SCTP".into(),
        n => format!("protocol {n}"),
    }
}

/// "protocol 47 (GRE)", "protocol 200".
fn proto_words(p: u8) -> String {
    match proto_name(p) {
        name if name.starts_with("protocol") => name,
        name => format!("protocol {p} ({name})"),
    }
}

/// A VIP entry's protocol: 6, 17, or 0 for the entry of an `L3_DEFAULT` rule (§3).
fn vip_proto_name(p: u8) -> String {
    match p {
        0 => "other protocols (L3_DEFAULT)".into(),
        n => proto_name(n),
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
    let packet = packet_of(flow);
    let mut trace = Trace::default();
    // No connection table: the choice for a new connection.
    let outcome = lookup::lookup(tables, nic, None::<&ConnTable>, &packet, &mut trace);
    let mut w = Wording {
        e: Explanation::empty(outcome.verdict.name(), outcome.reason.name()),
        ctx: Context {
            tables,
            nic,
            symbols,
            flow,
            packet: &packet,
            proto: proto_name(flow.protocol),
        },
        bucket: 0,
        ways: 1,
        vip: VipEntry::default(),
        pool: PoolEntry::default(),
        service_pool: false,
        unmatched: String::new(),
        last: String::new(),
    };
    for step in &trace.steps {
        w.step(step);
    }
    w.e
}

/// The packet the reference looks up for `flow`.
fn packet_of(flow: &Flow) -> Packet {
    // A later fragment carries no ports (docs/pipeline.md §2), whatever the caller gave, and
    // neither does any protocol but TCP and UDP.
    let ports = flow.fragment != Fragment::Later && matches!(flow.protocol, 6 | 17);
    Packet {
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
    }
}

impl Explanation {
    /// An explanation with its outcome and nothing found yet.
    fn empty(verdict: &str, reason: &str) -> Explanation {
        Explanation {
            verdict: verdict.to_ascii_lowercase(),
            reason: reason.to_string(),
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
            service: None,
        }
    }
}

/// [`explain`] over a compile's tables, with the pool's reason and, for a backend service,
/// what its service LB policy decided ([`ServiceExplanation`]): from the decision the tables
/// serve, so the tier and zone named are those of the backend the slot gives.
pub fn explain_compiled(compiled: &crate::Compiled, flow: &Flow) -> Explanation {
    let mut e = explain(&compiled.tables, &compiled.nic, &compiled.symbols, flow);
    let Some(p) = e.pool_id.and_then(|id| compiled.pools.get(usize::from(id))) else {
        return e;
    };
    e.steps.push(format!("pool {}: {}", p.name, p.why));
    e.service = explain_service(compiled, &p.name, e.backend.as_deref());
    e
}

/// What the service LB policy of backend service `pool` decided, for a new connection to
/// `backend` (the backend the flow's slot names).
pub fn explain_service(
    compiled: &crate::Compiled,
    pool: &str,
    backend: Option<&str>,
) -> Option<ServiceExplanation> {
    // What the tables serve decides the shares and tiers; the latest refresh has the freshest
    // counts (the two differ by less than the deadband).
    let decision = compiled.service_decision(pool)?;
    let latest = compiled.service_observed(pool).unwrap_or(decision);
    let groups = compiled.service_groups(pool)?;
    let live_counts = if compiled.service_fed(pool) == Some(true) {
        let total: u64 = latest.groups.iter().map(|g| g.live).sum();
        format!(
            "{total} at nlbd's latest refresh ({:.1} s after it started), counted in its connection table; the shares are those the tables serve",
            compiled.service_refreshed_at(pool).unwrap_or(0.0)
        )
    } else {
        "none: a compile counts none, so nothing is full (nlbd counts them every refresh: `nlbctl explain --socket`)".to_string()
    };
    let place = |g: &crate::ServiceGroup| -> String {
        match (g.zone.is_empty(), g.region.is_empty()) {
            (false, _) => format!("zone {}, region {}", g.zone, g.region),
            (true, false) => format!("region {}", g.region),
            (true, true) => "no zone given".to_string(),
        }
    };
    let mut rows: Vec<ServiceGroupExplanation> = decision
        .groups
        .iter()
        .map(|r| {
            let g = groups.iter().find(|g| g.name == r.name);
            let now = latest.groups.iter().find(|l| l.name == r.name).unwrap_or(r);
            ServiceGroupExplanation {
                name: r.name.clone(),
                region: r.region.clone(),
                zone: r.zone.clone(),
                tier: r.tier,
                share: r.share,
                live: now.live,
                capacity: (!r.unlimited).then_some(r.capacity),
                utilisation: (!r.unlimited && now.utilisation.is_finite())
                    .then_some(now.utilisation),
                healthy: r.healthy,
                endpoints: r.endpoints,
                drained: r.drained,
                below_threshold: r.below_threshold,
                failover: g.is_some_and(|g| g.failover),
                why: r.why.clone(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.tier.is_none(), a.tier, &a.name).cmp(&(b.tier.is_none(), b.tier, &b.name))
    });
    let chosen = backend.and_then(|b| groups.iter().find(|g| g.members.iter().any(|m| m == b)));
    let report = chosen.and_then(|g| decision.groups.iter().find(|r| r.name == g.name));
    let mut steps = Vec::new();
    let policy = compiled.service_policy(pool);
    if let Some(p) = policy.filter(|p| p.passthrough) {
        steps.push(format!(
            "service {pool}: no serviceLbPolicy: passthrough, new connections over the healthy endpoints alike (SPEC R6, R7.1){}; NIC in {}",
            if p.zonal_affinity {
                ", zonal affinity (SPEC R7.4)"
            } else {
                ""
            },
            compiled
                .service_locality(pool)
                .map_or_else(|| "no region given".to_string(), nic_place),
        ));
    } else if let Some(p) = policy {
        let isolation = match p.isolation {
            crate::policy::Isolation::None => "no isolation",
            crate::policy::Isolation::Nearest => "isolation NEAREST (granularity REGION)",
            crate::policy::Isolation::Strict => "isolation STRICT (granularity REGION)",
        };
        steps.push(format!(
            "service {pool}: {}, {isolation}, failover threshold {} %{}; NIC in {}",
            p.algorithm.name(),
            p.failover_health_threshold,
            if p.auto_capacity_drain {
                ", automatic capacity drain"
            } else {
                ""
            },
            compiled
                .service_locality(pool)
                .map_or_else(|| "no region given".to_string(), nic_place),
        ));
    }
    steps.push(format!("decided by: {}", decision.rule));
    steps.push(format!("live connections: {live_counts}"));
    for r in &rows {
        let capacity = match (r.capacity, r.utilisation) {
            (None, _) => "no capacity limit".to_string(),
            (Some(c), Some(u)) => format!("{} of {c:.0} ({:.0} %)", r.live, 100.0 * u),
            (Some(c), None) => format!("{} of {c:.0} (over a capacity of 0)", r.live),
        };
        let tier = r
            .tier
            .map_or_else(|| "no tier".to_string(), |t| format!("tier {t}"));
        let g = groups.iter().find(|g| g.name == r.name);
        let why = if r.why.is_empty() {
            String::new()
        } else {
            format!(": {}", r.why)
        };
        steps.push(format!(
            "group {} ({}): {tier}, {} of {} endpoints healthy, live {capacity}, {:.1} % of new connections{why}",
            r.name,
            g.map_or_else(String::new, place),
            r.healthy,
            r.endpoints,
            100.0 * r.share
        ));
    }
    if decision.drop {
        steps.push("new connections are dropped (no slot): see the steps above".to_string());
    } else if let (Some(g), Some(r)) = (chosen, report) {
        steps.push(format!(
            "this flow's backend {} is in group {} ({}), {}, which takes {:.1} % of new connections",
            backend.unwrap_or("?"),
            g.name,
            place(g),
            r.tier
                .map_or_else(|| "no tier (fail open)".to_string(), |t| format!("tier {t}")),
            100.0 * r.share
        ));
    }
    Some(ServiceExplanation {
        service: pool.to_string(),
        live_counts,
        group: chosen.map(|g| g.name.clone()),
        region: chosen.map(|g| g.region.clone()),
        zone: chosen.map(|g| g.zone.clone()).filter(|z| !z.is_empty()),
        tier: report.and_then(|r| r.tier),
        share: report.map(|r| r.share),
        groups: rows,
        rule: decision.rule.clone(),
        steps,
    })
}

/// "zone r1-a, region r1" for the NIC's own place.
fn nic_place(l: &crate::policy::Locality) -> String {
    let mut s = match (l.zone.is_empty(), l.region.is_empty()) {
        (false, _) => format!("zone {}, region {}", l.zone, l.region),
        (true, false) => format!("region {}", l.region),
        (true, true) => "no region given (nic.region)".to_string(),
    };
    if !l.region_order.is_empty() {
        s.push_str(&format!(", then regions {}", l.region_order.join(", ")));
    }
    s
}

/// What every step's wording may need and no step changes.
struct Context<'a> {
    tables: &'a Tables,
    nic: &'a NicSettings,
    symbols: &'a Symbols,
    flow: &'a Flow,
    packet: &'a Packet,
    /// The flow's protocol, in words.
    proto: String,
}

/// The explanation being written, and what earlier steps found that later ones word.
struct Wording<'a> {
    e: Explanation,
    ctx: Context<'a>,
    /// The VIP stage's bucket and ways.
    bucket: u32,
    ways: u32,
    /// The VIP entry whose slots were searched.
    vip: VipEntry,
    /// The pool descriptor read.
    pool: PoolEntry,
    /// The pool is a backend service (its slices are its service LB policy's).
    service_pool: bool,
    /// Why no rule matched, for the verdict of an unmatched packet.
    unmatched: String,
    /// The step that ended the lookup, worded with the verdict.
    last: String,
}

impl Wording<'_> {
    /// Words one step of the trace, in the order of the pipeline (docs/pipeline.md §4–§9).
    fn step(&mut self, step: &Step) {
        match *step {
            Step::Vip {
                protocol,
                bucket,
                ways,
                entry,
                ..
            } => self.vip_stage(protocol, bucket, ways, entry),
            Step::PortSlots {
                index,
                entry,
                port,
                outcome,
            } => self.port_slots(index, entry, port, outcome),
            Step::Rule { id, entry } => {
                if !entry.is_some_and(|r| r.valid) {
                    self.unmatched = format!("rule id {id} has no valid descriptor");
                }
            }
            Step::Acl {
                client, outcome, ..
            } => self.acl(client, outcome),
            Step::FragmentPunt(why) => self.fragment_punt(why),
            Step::Pool { id, entry } => self.pool_stage(id, entry.unwrap_or_default()),
            Step::Key {
                key,
                hash,
                fragment,
                portless,
                affinity,
            } => {
                let kt = key.key_type;
                self.e.key = Some(key_name(kt).into());
                self.e.key_bytes = Some(hex(&key.bytes()));
                self.e.hash = Some(hash);
                // Narrowed from a whole TCP/UDP packet's key (SPEC R4.2; docs/pipeline.md §6).
                let narrowed = lookup::key_type(affinity, false) != kt;
                let frag = if fragment && narrowed {
                    " (a fragment: the 3-tuple, SPEC R4.2)"
                } else if portless && narrowed {
                    " (a portless flow: the 3-tuple, docs/pipeline.md §6)"
                } else {
                    ""
                };
                self.e
                    .steps
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
                if size == 0 && self.service_pool {
                    self.last = "no slot: the service LB policy drops new connections (STRICT isolation with nothing healthy in the nearest region, or dropTrafficIfUnhealthy with nothing healthy; SPEC R6.5)".into();
                } else if size == 0 {
                    self.last = "the pool has no backend".into();
                } else {
                    self.e.slot = u32::try_from(slot).ok();
                    self.e.steps.push(format!(
                        "slot {base} + ({hash:#010x} × {size}) >> 32 = {base} + {offset} = {slot}"
                    ));
                    if backend.is_none() {
                        self.last = "the slot lies outside the slot memory".into();
                    }
                }
            }
            Step::Backend { id, entry } => self.backend(id, entry.unwrap_or_default()),
            Step::Verdict { reason, .. } => {
                let text = if matches!(reason, Reason::NoRule | Reason::IcmpNoFlow) {
                    format!(
                        "{}: no rule matches, default action {} (SPEC R2.4)",
                        self.unmatched,
                        self.ctx.nic.default_action.name()
                    )
                } else {
                    std::mem::take(&mut self.last)
                };
                self.e.steps.push(text);
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

    /// The VIP table bucket and the way that holds (VIP protocol, VIP), if any (§3, §4).
    fn vip_stage(&mut self, protocol: u8, bucket: u32, ways: u32, entry: Option<u32>) {
        (self.bucket, self.ways) = (bucket, ways.max(1));
        self.e.vip_bucket = bucket;
        self.e.vip_index = entry;
        let portless = protocol != self.ctx.flow.protocol;
        if portless {
            self.e.steps.push(format!(
                "{} → VIP protocol {protocol}: only TCP and UDP have ports and entries of their own; every other protocol is portless (ports 0) and looks up the VIP's L3_DEFAULT entry (docs/pipeline.md §3)",
                proto_words(self.ctx.flow.protocol)
            ));
        }
        if entry.is_none() {
            self.unmatched = if portless {
                format!(
                    "VIP table bucket {bucket} holds no entry for {} VIP protocol {protocol} (the VIP has no L3_DEFAULT rule)",
                    self.ctx.flow.dst
                )
            } else {
                format!(
                    "VIP table bucket {bucket} holds no entry for {} {}",
                    self.ctx.flow.dst, self.ctx.proto
                )
            };
        }
    }

    /// The port slot search of the VIP entry: the rule (§4).
    fn port_slots(&mut self, index: u32, entry: VipEntry, port: Option<u16>, outcome: SlotOutcome) {
        self.vip = entry;
        let (bucket, way, proto) = (self.bucket, index % self.ways, &self.ctx.proto);
        match outcome {
            SlotOutcome::Several => self.e.steps.push(format!(
                "VIP entry {index} (bucket {bucket}, way {way}) has {} for {proto}; a later fragment carries no port",
                held(&entry)
            )),
            SlotOutcome::NoSlot => {
                self.unmatched = match port {
                    Some(p) => format!("VIP entry {index} has no port range holding port {p}"),
                    None => format!("VIP entry {index} has no valid port slot"),
                }
            }
            SlotOutcome::Matched { slot, rule } => {
                let name = self.ctx.symbols.rule(rule).unwrap_or("?").to_string();
                self.e.steps.push(format!(
                    "rule {name} (id {rule}): {} {} {}; VIP table bucket {bucket}, way {way}",
                    u128_to_addr(entry.addr),
                    vip_proto_name(entry.protocol),
                    ports_of(&entry, slot),
                ));
                self.e.rule = Some(name);
                self.e.rule_id = Some(rule);
            }
        }
    }

    /// The rule's source allow-list (§5, SPEC R9).
    fn acl(&mut self, client: u128, outcome: AclOutcome) {
        match outcome {
            AclOutcome::NotEnabled => self.e.acl = Some("none".into()),
            AclOutcome::Allowed { prefix, .. } => {
                let shown = if nlb_hw::hash::is_ipv4_mapped(prefix.addr) && prefix.prefix_len >= 96
                {
                    format!("{}/{}", u128_to_addr(prefix.addr), prefix.prefix_len - 96)
                } else {
                    format!(
                        "{}/{}",
                        std::net::Ipv6Addr::from(prefix.addr),
                        prefix.prefix_len
                    )
                };
                self.e.acl = Some(format!("allowed by {shown}"));
                self.e.steps.push(format!(
                    "ACL: source {} allowed by {shown}",
                    u128_to_addr(client)
                ));
            }
            AclOutcome::Denied => {
                self.e.acl = Some("denied".into());
                self.last = format!(
                    "ACL: source {} is outside the rule's sourceRanges (SPEC R9.1)",
                    u128_to_addr(client)
                );
            }
        }
    }

    /// A fragment the NIC punts to the host (§4, §6; SPEC R4.3).
    fn fragment_punt(&mut self, why: FragmentPunt) {
        self.last = match why {
            FragmentPunt::LaterOnSeveralSlots { .. } => {
                "punted: the host remembers the first fragment's rule and backend (SPEC R4.3)"
                    .into()
            }
            FragmentPunt::FirstOnSeveralSlots { .. } => format!(
                "a first fragment on a VIP with {} for {}: punted with its rule so the host sends the later fragments the same way (SPEC R4.3)",
                held(&self.vip),
                self.ctx.proto
            ),
            FragmentPunt::TcpOfTrackingPool => {
                let c = &self.ctx;
                tcp_fragment_punt(&mut self.e, c.tables, c.symbols, c.flow, c.packet)
            }
        };
    }

    /// The pool descriptor and the slice that serves (§6; SPEC R1 failover).
    fn pool_stage(&mut self, id: u16, pool: PoolEntry) {
        self.pool = pool;
        let symbols = self.ctx.symbols;
        let name = symbols.pool(id).unwrap_or("?").to_string();
        let service = symbols
            .pools
            .get(usize::from(id))
            .is_some_and(|p| p.kind == crate::symbols::PoolKind::BackendService);
        self.service_pool = service;
        let serving = match (pool.failed_over, service) {
            (true, true) => "failed over: its failover backends' slice serves".to_string(),
            (true, false) => format!(
                "failed over: backup pool {}'s slice serves",
                symbols.pool(pool.backup_pool).unwrap_or("?")
            ),
            (false, true) => "its primary backends' slice serves".to_string(),
            (false, false) => "its own slice serves".to_string(),
        };
        self.e.steps.push(format!(
            "pool {name} (id {id}): affinity {}, delivery {}; {serving}: slots {}..{} ({} slots)",
            pool.affinity.name(),
            pool.delivery.name(),
            pool.maglev_base,
            u64::from(pool.maglev_base) + u64::from(pool.maglev_size),
            pool.maglev_size
        ));
        let e = &mut self.e;
        e.pool = Some(name);
        e.pool_id = Some(id);
        e.failed_over = pool.failed_over;
        e.affinity = Some(pool.affinity.name().to_string());
        e.delivery = Some(pool.delivery.name().to_string());
        e.slice_base = Some(pool.maglev_base);
        e.slice_size = Some(pool.maglev_size);
        if !pool.valid {
            self.last = "the pool has no backend".into();
        }
    }

    /// The backend the Maglev slot names (§8).
    fn backend(&mut self, id: u16, be: nlb_hw::layouts::BackendEntry) {
        let name = self.ctx.symbols.backend(id).unwrap_or("?").to_string();
        let mac = nlb_config::model::format_mac(be.mac);
        self.last = if be.valid {
            format!(
                "backend {name} (id {id}) {} {mac} by {}",
                u128_to_addr(be.addr),
                self.pool.delivery.name()
            )
        } else {
            format!("backend id {id} has no valid entry")
        };
        let e = &mut self.e;
        e.backend = Some(name);
        e.backend_id = Some(id);
        e.backend_ip = Some(u128_to_addr(be.addr).to_string());
        e.backend_mac = Some(mac);
    }
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
