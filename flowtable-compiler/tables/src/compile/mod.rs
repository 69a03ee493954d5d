//! From a validated configuration and a health state to one table bank.
//!
//! Ids are given in name order, whatever the order of the file: rules; pools (target pools,
//! then target instances, then backend services); backends (instances). Each pool owns a
//! Maglev slice (a backend service two: its primary and its failover backends'), laid out in
//! pool-id order from slot 0. The health-independent parts (VIP table, rules, ACLs, backends,
//! slice layout) are fixed by [`compile`]; the health-dependent parts (slot contents, pool
//! descriptors) can be recomputed for one pool with [`Compiled::recompile_pool`].

use crate::maglev::{self, Member};
use crate::symbols::{vip_port_slots, PoolKind, PoolSymbol, Symbols};
use crate::Error;
use nlb_config::check;
use nlb_config::diag::{Diagnostics, Pos};
use nlb_config::health::{HealthState, PoolHealth};
use nlb_config::model::{
    BackendService, Config, ForwardingRule, Instance, Prefix, Protocol, Ratio, TargetInstance,
    TargetPool,
};
use nlb_hw::enums::{Affinity, Delivery, Table};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::layouts::{
    AclPrefix, BackendEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{NicSettings, Profile, Tables};
use serde::Serialize;
use std::collections::HashMap;
use std::net::IpAddr;

mod live;
mod services;

pub use live::{LiveLoad, Rebalanced, ServiceGroup, DEFAULT_DEADBAND, DEFAULT_REFILL_BUDGET};

pub use services::{UNLIMITED_PER_ENDPOINT, WEIGHT_SCALE};

/// Port-range slots in one VIP entry (`vip_entry.slot`): the most rules one VIP and protocol
/// can have (SPEC R2.2; Google Cloud has no such limit, the hardware compares this many
/// ranges in parallel).
pub const PORT_SLOTS: usize = VipEntry::SLOT_COUNT;
/// Prefixes in one ACL entry (`acl_entry.prefix`).
pub const ACL_PREFIXES: usize = 8;

/// How to compile.
#[derive(Debug, Clone, Copy)]
pub struct CompileOptions {
    /// Table depths to compile for.
    pub profile: &'static Profile,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            profile: Profile::by_name("sim").unwrap_or(&nlb_hw::PROFILES[0]),
        }
    }
}

/// What the compiler decided for one pool, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolReport {
    /// Pool name.
    pub name: String,
    /// Target pool, target instance or backend service.
    pub kind: PoolKind,
    /// Members configured.
    pub members: usize,
    /// Members healthy.
    pub healthy: usize,
    /// Members with slots in the pool's own slice.
    pub eligible: Vec<String>,
    /// The pool whose slice serves (the backup's when failed over; a backend service serves
    /// from its own slices).
    pub serving: String,
    /// Whether the backup pool serves (a backend service: its failover backends).
    pub failed_over: bool,
    /// Own slice size M (a backend service: its primary backends' slice).
    pub slice_size: u32,
    /// One line on how the eligible set and serving slice were chosen.
    pub why: String,
}

#[derive(Debug, Clone)]
struct PoolPlan {
    kind: PoolKind,
    name: String,
    /// (name, backend id, configured weight), in name order.
    members: Vec<(String, u16, u32)>,
    affinity: Affinity,
    delivery: Delivery,
    backup: Option<u16>,
    /// `failoverRatio` as written (compared exactly).
    ratio: Option<Ratio>,
    /// Whether the pool has a health check; without one every member is healthy (SPEC R5.5).
    health_checked: bool,
    /// Whether probe weights (`X-Load-Balancing-Endpoint-Weight`) shape the slice (SPEC R5.6).
    /// Target pools never weight; backend services with `WEIGHTED_MAGLEV` and weighted GKE
    /// Services will set it.
    weighted: bool,
    /// Per member, its ready, non-terminating Kubernetes endpoints when the pool is a
    /// `Local` Service's ([`Config::ready_endpoints`]): none takes the member out of
    /// new-connection choice as a failed probe would (SPEC R10.5), and the count is its
    /// weight where no probe reported one (SPEC R7.3).
    endpoints: Vec<Option<u32>>,
    idle_timeout: u16,
    track: bool,
    base: u32,
    size: u32,
    /// A backend service's failover backends' slice.
    failover_base: u32,
    failover_size: u32,
    /// What a backend service adds.
    service: Option<Box<services::ServicePlan>>,
    /// A target pool's slice populated over every member it has, once computed
    /// ([`Compiled::fill_slice`]).
    full: FullSlice,
}

/// A target pool's slice populated over every member with the configured weights, and what
/// of it the slot memory holds: a health change refills only the slots of members that left
/// the choice ([`maglev::refill_free`]), so the population is computed once per compile, and
/// only the slots a refill wrote before or writes now can change.
#[derive(Clone, Default)]
struct FullSlice {
    /// The population, once first needed.
    slots: Option<std::sync::Arc<FullSlots>>,
    /// When the pool's slice in the slot memory is `slots` with refills at these slots
    /// (offsets in the slice), those slots; `None` when it holds something else (nothing yet,
    /// or a population over the eligible members). Only the fills write a pool's slice.
    refilled: Option<Vec<u32>>,
}

/// A slice populated over every member, with its slots listed by member.
struct FullSlots {
    table: Vec<u16>,
    /// Member `j`'s slots are `by_member[start[j]..start[j + 1]]` (ascending).
    start: Vec<u32>,
    by_member: Vec<u32>,
}

impl FullSlots {
    /// `table` indexed by member (`members`: the pool's, by name; ids distinct).
    fn new(table: Vec<u16>, members: &[(String, u16, u32)]) -> FullSlots {
        // Member by id, over the span of the pool's ids (not all 65,536: a compile does this
        // for every pool). The table holds only members' ids.
        let lo = members.iter().map(|m| m.1).min().unwrap_or(0);
        let hi = members.iter().map(|m| m.1).max().unwrap_or(0);
        let mut member_of = vec![u32::MAX; usize::from(hi - lo) + 1];
        for (j, m) in members.iter().enumerate() {
            member_of[usize::from(m.1 - lo)] = j as u32;
        }
        let member_of = |b: u16| member_of[usize::from(b - lo)] as usize;
        let mut start = vec![0u32; members.len() + 1];
        for &b in &table {
            start[member_of(b) + 1] += 1;
        }
        for j in 0..members.len() {
            start[j + 1] += start[j];
        }
        let mut next = start.clone();
        let mut by_member = vec![0u32; table.len()];
        for (k, &b) in table.iter().enumerate() {
            let j = member_of(b);
            by_member[next[j] as usize] = k as u32;
            next[j] += 1;
        }
        FullSlots {
            table,
            start,
            by_member,
        }
    }

    fn slots_of(&self, member: usize) -> &[u32] {
        &self.by_member[self.start[member] as usize..self.start[member + 1] as usize]
    }
}

/// What a fill wrote into the slot memory, as the values the slots held before (when asked
/// for): the slots it may have changed, or the whole slices from the pool's base.
enum Written {
    Slots(Vec<(u32, MaglevSlot)>),
    Whole(Vec<MaglevSlot>),
}

impl std::fmt::Debug for FullSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullSlice")
            .field("slots", &self.slots.as_ref().map(|s| s.table.len()))
            .field("refilled", &self.refilled.as_ref().map(Vec::len))
            .finish()
    }
}

/// The result of a compile: one table bank, the NIC settings, names, and per-pool reasons.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Profile compiled for.
    pub profile: &'static Profile,
    /// The tables.
    pub tables: Tables,
    /// The `ctrl` settings.
    pub nic: NicSettings,
    /// Names by id.
    pub symbols: Symbols,
    /// SHA-256 of the canonical configuration.
    pub config_digest: [u8; 32],
    /// Per pool, by pool id.
    pub pools: Vec<PoolReport>,
    /// Remarks (for example slices made smaller to fit the Maglev memory).
    pub notes: Vec<String>,
    plans: Vec<PoolPlan>,
}

/// Everything fixed by the configuration and the profile alone.
struct Layout {
    tables: Tables,
    symbols: Symbols,
    plans: Vec<PoolPlan>,
    nic: NicSettings,
    notes: Vec<String>,
}

fn nic_settings(c: &Config) -> NicSettings {
    let mut n = NicSettings {
        default_action: c.nic.default_action,
        local_mac: c.nic.mac,
        gue_port: c.nic.gue_port,
        ..NicSettings::default()
    };
    if let Some(Prefix {
        addr: IpAddr::V4(a),
        len,
    }) = c.nic.outer_source_ipv4
    {
        n.outer_src_v4 = u32::from(a);
        n.outer_src_v4_len = len;
    }
    if let Some(Prefix {
        addr: IpAddr::V6(a),
        len,
    }) = c.nic.outer_source_ipv6
    {
        n.outer_src_v6 = u128::from(a);
        n.outer_src_v6_len = len;
    }
    n
}

/// Ids for `names` (in name order) below `capacity`: a name that `previous` (names by id,
/// `""` for a free id) held keeps its id; new names take, in name order, the lowest ids that
/// were free before, then the ids freed by this change. Not handing out an id in the same
/// change that frees it means a removed backend's id never names another backend while the
/// removed one's connections may still be in flight. With no previous ids this is name order.
fn allocate_ids(names: &[&str], previous: &[String], capacity: usize) -> Vec<usize> {
    let before: HashMap<&str, usize> = previous
        .iter()
        .enumerate()
        .filter(|(id, n)| !n.is_empty() && *id < capacity)
        .map(|(id, n)| (n.as_str(), id))
        .collect();
    let mut taken = vec![false; capacity];
    let mut ids: Vec<Option<usize>> = names.iter().map(|n| before.get(n).copied()).collect();
    for id in ids.iter().flatten() {
        taken[*id] = true;
    }
    let held_before = |id: usize| previous.get(id).is_some_and(|n| !n.is_empty());
    let mut fresh = (0..capacity).filter(|&id| !taken[id] && !held_before(id));
    let mut recycled = (0..capacity).filter(|&id| !taken[id] && held_before(id));
    for id in ids.iter_mut().filter(|id| id.is_none()) {
        *id = fresh.next().or_else(|| recycled.next());
    }
    // The caller checked that the names fit, so every name found an id.
    ids.into_iter().map(|id| id.unwrap_or(0)).collect()
}

/// Names by id, `""` for a free id.
fn names_by_id(names: &[&str], ids: &[usize]) -> Vec<String> {
    let mut v = vec![String::new(); ids.iter().map(|&i| i + 1).max().unwrap_or(0)];
    for (name, &id) in names.iter().zip(ids) {
        v[id] = name.to_string();
    }
    v
}

/// Ids, VIP placement, ACLs, backends, slice layout; every capacity limit of the profile.
/// Works on a partly broken configuration too (dangling references are skipped), so that
/// capacity problems are reported together with the others. Rule and backend ids stay those of
/// `previous` for every rule and backend that stays (see [`allocate_ids`]).
///
/// One phase after the other, each a function: table sizes, backends, pool plans, Maglev
/// slices, rules and ACLs, the VIP table.
fn layout(
    c: &Config,
    profile: &'static Profile,
    previous: &Symbols,
) -> (Option<Layout>, Diagnostics) {
    let mut d = Diagnostics::new();
    let s = ByName::new(c);
    if !check_table_sizes(&mut d, c, profile, &s) {
        return (None, d);
    }
    let mut tables = Tables::empty(profile);
    let mut symbols = Symbols::default();
    let backends = place_backends(c, profile, previous, &s, &mut tables, &mut symbols);
    let (pool_id, mut plans) = plan_pools(c, &s, &backends);
    let mut notes = size_slices(&mut d, c, profile, &s, &mut plans);
    notes.extend(services::passthrough_notes(c));
    symbols.pools = plans
        .iter()
        .map(|p| PoolSymbol {
            name: p.name.clone(),
            kind: p.kind,
            own_base: p.base,
            own_size: p.size,
            failover_base: p.failover_base,
            failover_size: p.failover_size,
            members: p.members.iter().map(|m| m.1).collect(),
        })
        .collect();
    let rule_ids = place_rules(
        &mut d,
        c,
        profile,
        previous,
        &s,
        &pool_id,
        &mut tables,
        &mut symbols,
    );
    place_vips(&mut d, c, profile, &s, &rule_ids, &mut tables);

    let ok = d.is_empty();
    (
        ok.then(|| Layout {
            tables,
            symbols,
            plans,
            nic: nic_settings(c),
            notes,
        }),
        d,
    )
}

/// The objects that take ids, in name order (the order of a fresh compile's ids).
struct ByName<'c> {
    rules: Vec<&'c ForwardingRule>,
    target_pools: Vec<&'c TargetPool>,
    target_instances: Vec<&'c TargetInstance>,
    services: Vec<&'c BackendService>,
    instances: Vec<&'c Instance>,
}

impl<'c> ByName<'c> {
    fn new(c: &'c Config) -> ByName<'c> {
        let mut rules: Vec<_> = c.forwarding_rules.iter().collect();
        rules.sort_by(|a, b| a.name.cmp(&b.name));
        let mut target_pools: Vec<_> = c.target_pools.iter().collect();
        target_pools.sort_by(|a, b| a.name.cmp(&b.name));
        let mut target_instances: Vec<_> = c.target_instances.iter().collect();
        target_instances.sort_by(|a, b| a.name.cmp(&b.name));
        let mut services: Vec<_> = c.backend_services.iter().collect();
        services.sort_by(|a, b| a.name.cmp(&b.name));
        let mut instances: Vec<_> = c.instances.iter().collect();
        instances.sort_by(|a, b| a.name.cmp(&b.name));
        ByName {
            rules,
            target_pools,
            target_instances,
            services,
            instances,
        }
    }

    fn pool_count(&self) -> usize {
        self.target_pools.len() + self.target_instances.len() + self.services.len()
    }
}

/// The rule, pool and backend tables hold every object: one problem per table that does not,
/// at the first object (in id order) beyond its depth. Returns whether ids can be given.
fn check_table_sizes(
    d: &mut Diagnostics,
    c: &Config,
    profile: &'static Profile,
    s: &ByName,
) -> bool {
    let limit = |d: &mut Diagnostics,
                 count: usize,
                 cap: u32,
                 what: &str,
                 table: &str,
                 at: Option<(Pos, String)>| {
        if count > cap as usize {
            let (pos, path) = at.unwrap_or_default();
            d.push(
                &c.file,
                pos,
                path,
                format!(
                    "{count} {what}, but the {} profile's {table} holds {cap}",
                    profile.name
                ),
                Some(format!("at most {cap}")),
            );
        }
    };
    limit(
        d,
        s.rules.len(),
        profile.rules,
        "forwarding rules",
        "rule table",
        s.rules
            .get(profile.rules as usize)
            .map(|r| (r.loc.pos, format!("forwardingRules[{}]", r.loc.index))),
    );
    // The first pool beyond the table, in pool-id order.
    let cap = profile.pools as usize;
    let (pools, tis) = (s.target_pools.len(), s.target_instances.len());
    let pool_at = if pools > cap {
        s.target_pools
            .get(cap)
            .map(|p| (p.loc.pos, format!("targetPools[{}]", p.loc.index)))
    } else if pools + tis > cap {
        s.target_instances
            .get(cap - pools)
            .map(|t| (t.loc.pos, format!("targetInstances[{}]", t.loc.index)))
    } else {
        s.services
            .get(cap.saturating_sub(pools + tis))
            .map(|b| (b.loc.pos, b.path()))
    };
    limit(
        d,
        s.pool_count(),
        profile.pools,
        if s.services.is_empty() {
            "target pools and target instances"
        } else {
            "target pools, target instances and backend services"
        },
        "pool table",
        pool_at,
    );
    limit(
        d,
        s.instances.len(),
        profile.backends,
        "instances",
        "backend table",
        s.instances
            .get(profile.backends as usize)
            .map(|i| (i.loc.pos, format!("instances[{}]", i.loc.index))),
    );
    s.rules.len() <= rule_capacity(profile) as usize
        && s.pool_count() <= profile.pools as usize
        && s.instances.len() <= backend_capacity(profile)
}

/// Rule ids the profile's rule table and a rule entry's pool field can hold.
fn rule_capacity(profile: &Profile) -> u32 {
    profile.rules.min(1 << RuleEntry::POOL_WIDTH)
}

/// Backend ids the profile's backend table and a 16-bit id can hold.
fn backend_capacity(profile: &Profile) -> usize {
    profile.backends.min(1 << 16) as usize
}

/// A backend's id and configured weight, by instance name.
type Backends<'c> = HashMap<&'c str, (u16, u32)>;

/// Backend entries. Ids are kept across reloads, so an established connection's backend id
/// keeps naming its backend while the connection table is not rewritten.
fn place_backends<'c>(
    c: &Config,
    profile: &'static Profile,
    previous: &Symbols,
    s: &ByName<'c>,
    tables: &mut Tables,
    symbols: &mut Symbols,
) -> Backends<'c> {
    let inst_names: Vec<&str> = s.instances.iter().map(|i| i.name.as_str()).collect();
    let backend_ids = allocate_ids(&inst_names, &previous.backends, backend_capacity(profile));
    let mut backends = Backends::new();
    for (i, &id) in s.instances.iter().zip(&backend_ids) {
        backends.insert(&i.name, (id as u16, i.weight));
        tables.backends[id] = BackendEntry {
            valid: true,
            is_ipv6: i.ip.is_ipv6(),
            addr: addr_to_u128(i.ip),
            mac: i.mac.or(c.nic.next_hop_mac).unwrap_or(0),
        };
    }
    symbols.backends = names_by_id(&inst_names, &backend_ids);
    backends
}

/// A plan per pool, in pool-id order (target pools, then target instances, then backend
/// services, each by name): members, affinity, delivery, backup, health and weighting, and
/// the slice sizes they want.
fn plan_pools<'c>(
    c: &Config,
    s: &ByName<'c>,
    backends: &Backends,
) -> (HashMap<&'c str, u16>, Vec<PoolPlan>) {
    let mut pool_id: HashMap<&str, u16> = HashMap::new();
    for (id, name) in s
        .target_pools
        .iter()
        .map(|p| &p.name)
        .chain(s.target_instances.iter().map(|t| &t.name))
        .chain(s.services.iter().map(|b| &b.name))
        .enumerate()
    {
        pool_id.entry(name).or_insert(id as u16);
    }
    let members_of = |refs: &mut dyn Iterator<Item = &str>| -> Vec<(String, u16, u32)> {
        let mut v: Vec<(String, u16, u32)> = refs
            .filter_map(|n| {
                let (id, weight) = *backends.get(n)?;
                Some((n.to_string(), id, weight))
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut plans: Vec<PoolPlan> = Vec::with_capacity(s.pool_count());
    for p in &s.target_pools {
        let members = members_of(&mut p.instances.iter().map(|r| r.name.as_str()));
        let backup = p
            .backup_pool
            .as_ref()
            .and_then(|b| pool_id.get(b.name.as_str()).copied())
            .filter(|&b| usize::from(b) < s.target_pools.len());
        plans.push(PoolPlan {
            kind: PoolKind::TargetPool,
            name: p.name.clone(),
            size: if members.is_empty() {
                0
            } else {
                maglev::size_for(members.len())
            },
            members,
            affinity: p.session_affinity,
            delivery: p.delivery,
            backup,
            ratio: p.failover_ratio.clone(),
            health_checked: !p.health_checks.is_empty(),
            weighted: p.weighted(),
            idle_timeout: p.idle_timeout_sec,
            track: true,
            base: 0,
            failover_base: 0,
            failover_size: 0,
            service: None,
            endpoints: Vec::new(),
            full: FullSlice::default(),
        });
    }
    for t in &s.target_instances {
        let members = members_of(&mut std::iter::once(t.instance.name.as_str()));
        plans.push(PoolPlan {
            kind: PoolKind::TargetInstance,
            name: t.name.clone(),
            size: u32::from(!members.is_empty()),
            members,
            affinity: Affinity::None,
            delivery: t.delivery,
            backup: None,
            ratio: None,
            // No health check: the instance always counts as healthy.
            health_checked: false,
            weighted: false,
            idle_timeout: t.idle_timeout_sec,
            // One backend: every packet goes to it, so there is no choice to remember.
            track: false,
            base: 0,
            failover_base: 0,
            failover_size: 0,
            service: None,
            endpoints: Vec::new(),
            full: FullSlice::default(),
        });
    }
    let lookup = services::PlanLookup::new(c);
    for b in &s.services {
        // Every endpoint of every group, primary and failover, once, in name order.
        let mut names: Vec<&str> = Vec::new();
        for backend in &b.backends {
            names.extend(lookup.group_members(backend));
        }
        let members = members_of(&mut names.into_iter());
        let member_names: Vec<String> = members.iter().map(|m| m.0.clone()).collect();
        let plan = services::plan_service(c, &lookup, b, &member_names);
        let slice = |n: usize| if n == 0 { 0 } else { maglev::size_for(n) };
        plans.push(PoolPlan {
            kind: PoolKind::BackendService,
            name: b.name.clone(),
            size: slice(plan.members_of(false).len()),
            failover_size: slice(plan.members_of(true).len()),
            members,
            affinity: b.session_affinity,
            delivery: b.delivery,
            backup: None,
            ratio: b.failover_ratio.clone(),
            health_checked: !b.health_checks.is_empty(),
            weighted: b.weighted(),
            idle_timeout: b.idle_timeout_sec,
            // Tracked whatever the tracking mode: `PER_SESSION` is accepted only where the
            // session is the connection (docs/config.md).
            track: true,
            base: 0,
            failover_base: 0,
            service: Some(Box::new(plan)),
            endpoints: Vec::new(),
            full: FullSlice::default(),
        });
    }
    let ready: HashMap<(&str, &str), u32> = c
        .kubernetes
        .iter()
        .flat_map(|k| &k.ready_endpoints)
        .map(|(p, b, n)| ((p.as_str(), b.as_str()), *n))
        .collect();
    for p in &mut plans {
        p.endpoints = p
            .members
            .iter()
            .map(|m| ready.get(&(p.name.as_str(), m.0.as_str())).copied())
            .collect();
    }
    (pool_id, plans)
}

/// Maglev slot memory: shrinks the largest slices one ladder step at a time until all fit,
/// then lays the slices out in pool-id order from slot 0. Returns a note per shrunk slice.
fn size_slices(
    d: &mut Diagnostics,
    c: &Config,
    profile: &'static Profile,
    s: &ByName,
    plans: &mut [PoolPlan],
) -> Vec<String> {
    let cap = u64::from(profile.maglev_slots);
    let mut total: u64 = plans
        .iter()
        .map(|p| u64::from(p.size) + u64::from(p.failover_size))
        .sum();
    // The slices that may shrink: (plan, failover slice, members): those of target pools and
    // backend services (a target instance's holds one slot). Member counts do not change
    // while slices shrink: counted once (a cluster of thousands of Services shrinks many
    // steps).
    let mut slices: Vec<(usize, bool, usize)> = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        match (&p.service, p.kind) {
            (Some(sp), _) => {
                slices.push((i, false, sp.members_of(false).len()));
                slices.push((i, true, sp.members_of(true).len()));
            }
            (None, PoolKind::TargetPool) => slices.push((i, false, p.members.len())),
            _ => {}
        }
    }
    while total > cap {
        let candidate = slices
            .iter()
            .filter_map(|&(i, failover, n)| {
                let size = if failover {
                    plans[i].failover_size
                } else {
                    plans[i].size
                };
                maglev::step_down(size, n).map(|new| (size, i, failover, new))
            })
            .max_by_key(|(size, i, failover, _)| (*size, std::cmp::Reverse((*i, *failover))));
        let Some((old, i, failover, new)) = candidate else {
            break;
        };
        if failover {
            plans[i].failover_size = new;
        } else {
            plans[i].size = new;
        }
        total -= u64::from(old - new);
    }
    if total > cap {
        let biggest_pool = s
            .target_pools
            .iter()
            .max_by_key(|p| p.instances.len())
            .map(|p| {
                (
                    p.instances.len(),
                    p.loc.pos,
                    format!("targetPools[{}]", p.loc.index),
                )
            });
        let biggest_service = plans
            .iter()
            .filter(|p| p.kind == PoolKind::BackendService)
            .max_by_key(|p| p.members.len())
            .and_then(|p| {
                s.services
                    .iter()
                    .find(|b| b.name == p.name)
                    .map(|b| (p.members.len(), b))
            })
            .map(|(n, b)| (n, b.loc.pos, b.path()));
        let (pos, path) = [biggest_pool, biggest_service]
            .into_iter()
            .flatten()
            .max_by_key(|(n, _, _)| *n)
            .map(|(_, pos, path)| (pos, path))
            .unwrap_or_default();
        d.push(
            &c.file,
            pos,
            path,
            format!(
                "the pools need {total} Maglev slots even at the smallest slice sizes, but the {} profile's slot memory holds {cap}",
                profile.name
            ),
            Some(format!("at most {cap} slots in all; fewer or smaller pools")),
        );
    }
    let mut notes = Vec::new();
    for &(i, failover, n) in &slices {
        let size = if failover {
            plans[i].failover_size
        } else {
            plans[i].size
        };
        if size != 0 && size != maglev::size_for(n) {
            notes.push(format!(
                "pool {}: {}Maglev slice of {size} slots instead of {} to fit the slot memory",
                plans[i].name,
                if failover { "failover backends' " } else { "" },
                maglev::size_for(n)
            ));
        }
    }
    let mut base = 0u32;
    for p in plans.iter_mut() {
        p.base = base;
        base = base.saturating_add(p.size);
        if p.service.is_some() {
            p.failover_base = base;
            base = base.saturating_add(p.failover_size);
        }
    }
    notes
}

/// Rule entries and their ACLs. Ids are kept across reloads too (connections carry their rule
/// for counters). Returns the rule id of each rule of `s.rules`.
#[allow(clippy::too_many_arguments)]
fn place_rules(
    d: &mut Diagnostics,
    c: &Config,
    profile: &'static Profile,
    previous: &Symbols,
    s: &ByName,
    pool_id: &HashMap<&str, u16>,
    tables: &mut Tables,
    symbols: &mut Symbols,
) -> Vec<usize> {
    let rule_names: Vec<&str> = s.rules.iter().map(|r| r.name.as_str()).collect();
    let rule_ids = allocate_ids(
        &rule_names,
        &previous.rules,
        rule_capacity(profile) as usize,
    );
    symbols.rules = names_by_id(&rule_names, &rule_ids);
    for (r, &id) in s.rules.iter().zip(&rule_ids) {
        let acl_enabled = !r.source_ranges.is_empty();
        tables.rules[id] = RuleEntry {
            valid: pool_id.contains_key(r.target.name.as_str()),
            acl_enabled,
            pool: pool_id.get(r.target.name.as_str()).copied().unwrap_or(0),
        };
        if acl_enabled {
            let mut prefixes: Vec<Prefix> = r.source_ranges.clone();
            for p in &c.nic.health_check_source_ranges {
                if !prefixes.contains(p) {
                    prefixes.push(*p);
                }
            }
            if prefixes.len() > ACL_PREFIXES {
                d.push(
                    &c.file,
                    r.loc.field("sourceRanges"),
                    format!("forwardingRules[{}].sourceRanges", r.loc.index),
                    format!(
                        "{} source ranges ({} of the rule + {} health-check ranges), but an ACL entry holds {ACL_PREFIXES}",
                        prefixes.len(),
                        r.source_ranges.len(),
                        prefixes.len() - r.source_ranges.len()
                    ),
                    Some(format!("at most {ACL_PREFIXES} prefixes; merge ranges into wider ones")),
                );
                continue;
            }
            for (k, p) in prefixes.iter().enumerate() {
                let (addr, len) = p.to_table();
                tables.acl[id].prefix[k] = AclPrefix {
                    valid: true,
                    prefix_len: len,
                    addr,
                };
            }
        }
    }
    rule_ids
}

/// VIP table: one entry per (VIP, VIP protocol), placed in the first free way of its bucket;
/// groups are placed in address order so the result does not depend on the file's order.
fn place_vips(
    d: &mut Diagnostics,
    c: &Config,
    profile: &'static Profile,
    s: &ByName,
    rule_ids: &[usize],
    tables: &mut Tables,
) {
    let f = c.file.as_str();
    let id_of: HashMap<&str, u16> = s
        .rules
        .iter()
        .zip(rule_ids)
        .map(|(r, &id)| (r.name.as_str(), id as u16))
        .collect();
    let ways = profile.vip_ways as usize;
    let mut occupant: Vec<Option<(u128, u8)>> = vec![None; tables.vip.len()];
    for ((addr, proto), slots) in vip_port_slots(s.rules.iter().copied()) {
        let Some(&(_, first)) = slots.first() else {
            continue;
        };
        if slots.len() > PORT_SLOTS {
            let extra = slots[PORT_SLOTS].1;
            let mut names: Vec<&str> = slots.iter().map(|s| s.1.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            let held = if names.len() == slots.len() {
                format!("{} rules", names.len())
            } else {
                format!("{} rules with {} port ranges", names.len(), slots.len())
            };
            let gaps = slots
                .iter()
                .filter(|(_, r)| r.ip_protocol == Protocol::L3Default)
                .count();
            let l3 = if gaps > 0 && proto != 0 {
                format!(
                    " ({gaps} of them the gaps an L3_DEFAULT rule takes between the other rules' ports)"
                )
            } else {
                String::new()
            };
            let field = if extra.ip_protocol == Protocol::L3Default {
                "IPProtocol"
            } else if extra.loc.fields.iter().any(|(n, _)| *n == "ports") {
                "ports"
            } else {
                "portRange"
            };
            let proto_name = Protocol::from_number(proto).map_or("?", Protocol::name);
            d.push(
                f,
                extra.loc.field(field),
                format!("forwardingRules[{}]", extra.loc.index),
                format!(
                    "{held} on {} {proto_name}{l3}, but a VIP entry holds {PORT_SLOTS} port ranges per protocol",
                    first.ip_address,
                ),
                Some(format!("at most {PORT_SLOTS} port ranges per VIP and protocol: a rule's `portRange` takes one, its `ports` one per port (adjacent ports together), an L3_DEFAULT rule one per gap between the TCP (or UDP) rules' ranges")),
            );
            continue;
        }
        // The bucket the pipeline looks the VIP up in (docs/pipeline.md §4).
        let bucket = nlb_reference::lookup::vip_bucket(profile, proto, addr) as usize;
        let Some(way) = (0..ways).find(|w| occupant[bucket * ways + w].is_none()) else {
            let held: Vec<String> = (0..ways)
                .filter_map(|w| occupant[bucket * ways + w])
                .map(|(a, p)| {
                    format!(
                        "{} {}",
                        nlb_hw::hash::u128_to_addr(a),
                        Protocol::from_number(p).map_or("?", Protocol::name)
                    )
                })
                .collect();
            d.push(
                f,
                first.loc.field("IPAddress"),
                format!("forwardingRules[{}].IPAddress", first.loc.index),
                format!(
                    "VIP table bucket {bucket} is full: its {ways} ways hold {}; the {} profile has {} buckets × {ways} ways",
                    held.join(", "),
                    profile.name,
                    profile.vip_buckets
                ),
                Some(format!("at most {ways} VIP+protocol pairs hashing to one bucket (an L3_DEFAULT rule's VIP takes its protocol-0, TCP and UDP entries); another VIP address")),
            );
            continue;
        };
        let index = bucket * ways + way;
        occupant[index] = Some((addr, proto));
        let mut entry = VipEntry {
            valid: true,
            protocol: proto,
            addr,
            slot: [PortSlot::default(); PORT_SLOTS],
        };
        for (k, (range, rule)) in slots.iter().enumerate() {
            entry.slot[k] = PortSlot {
                valid: true,
                port_lo: range.lo,
                port_hi: range.hi,
                rule: id_of.get(rule.name.as_str()).copied().unwrap_or(0),
            };
        }
        tables.vip[index] = entry;
    }
}

/// The policy of a backend service in a few words: algorithm, and the settings that differ
/// from the defaults.
fn policy_summary(p: &crate::policy::Policy) -> String {
    use crate::policy::Isolation;
    if p.passthrough {
        return "passthrough".to_string();
    }
    let mut s = format!("policy {}", p.algorithm.name());
    if p.auto_capacity_drain {
        s.push_str(", auto capacity drain");
    }
    if p.failover_health_threshold != 70 {
        s.push_str(&format!(
            ", failover threshold {} %",
            p.failover_health_threshold
        ));
    }
    match p.isolation {
        Isolation::None => {}
        Isolation::Nearest => s.push_str(", isolation NEAREST"),
        Isolation::Strict => s.push_str(", isolation STRICT"),
    }
    s
}

/// Checks a possibly broken configuration against a profile's capacity: the diagnostics
/// [`compile`] would add to those of [`check`].
pub fn check_capacity(config: &Config, profile: &'static Profile) -> Diagnostics {
    layout(config, profile, &Symbols::default()).1
}

/// Compiles a configuration under a health state. Ids follow names (see [`compile_after`] to
/// keep the ids of a previous compile).
pub fn compile(
    config: &Config,
    health: &HealthState,
    options: &CompileOptions,
) -> Result<Compiled, Error> {
    compile_checked(config, health, options, check(config), &Symbols::default())
}

/// Compiles a configuration as the successor of a compile whose names by id are `previous`
/// (its [`Compiled::symbols`], an image's, or [`Symbols::recover`]ed from a device): every rule
/// and backend that stays keeps its id, so the connection table of a running NIC stays right
/// across the table flip. New ones take free ids (never one this change frees).
pub fn compile_after(
    config: &Config,
    health: &HealthState,
    options: &CompileOptions,
    previous: &Symbols,
) -> Result<Compiled, Error> {
    compile_checked(config, health, options, check(config), previous)
}

/// [`compile`] for a configuration whose relations were already checked (`relations` holds
/// what [`check`] found), so a file read by [`nlb_config::parse_config`] is not checked twice.
pub fn compile_checked(
    config: &Config,
    health: &HealthState,
    options: &CompileOptions,
    relations: Diagnostics,
    previous: &Symbols,
) -> Result<Compiled, Error> {
    let mut d = relations;
    let (layout, capacity) = layout(config, options.profile, previous);
    d.extend(capacity);
    d.into_result()?;
    let layout =
        layout.ok_or_else(|| Error::Internal("layout failed without a diagnostic".into()))?;
    let mut c = Compiled {
        profile: options.profile,
        tables: layout.tables,
        nic: layout.nic,
        symbols: layout.symbols,
        config_digest: config.digest(),
        pools: Vec::new(),
        notes: config.notes.iter().cloned().chain(layout.notes).collect(),
        plans: layout.plans,
    };
    c.pools = c
        .plans
        .iter()
        .map(|p| PoolReport {
            name: p.name.clone(),
            kind: p.kind,
            members: p.members.len(),
            healthy: 0,
            eligible: Vec::new(),
            serving: p.name.clone(),
            failed_over: false,
            slice_size: p.size,
            why: String::new(),
        })
        .collect();
    // Backend services' fills (their Maglev tables dominate a large compile) are computed side
    // by side, then written in pool order; each is deterministic and independent of the
    // others, so the tables are those of filling one pool after another.
    let services: Vec<usize> = (0..c.plans.len())
        .filter(|&id| c.plans[id].service.is_some())
        .collect();
    let mut fills = c.service_fills(&services, health).into_iter();
    for id in 0..c.plans.len() {
        if c.plans[id].service.is_some() {
            if let Some(fill) = fills.next().flatten() {
                c.apply_service_fill(id, fill);
            }
        } else {
            c.fill_slice(id, health, false);
        }
    }
    for id in 0..c.plans.len() {
        c.describe(id, health);
    }
    Ok(c)
}

impl Compiled {
    /// What pool `pool` serves now, read off the tables: its members and the Maglev slots each
    /// holds in the slice its descriptor names (empty for an unknown pool). The Kubernetes
    /// front end explains a Service's nodes from it (`KubeService::eligibility`).
    pub fn served_slice(&self, pool: &str) -> nlb_config::kube::ServedSlice<'_> {
        let symbols = &self.symbols;
        let id = symbols.pool_id(pool);
        let mut served = nlb_config::kube::ServedSlice {
            members: id
                .and_then(|id| symbols.pools.get(usize::from(id)))
                .map(|p| {
                    p.members
                        .iter()
                        .filter_map(|&b| symbols.backend(b))
                        .collect()
                })
                .unwrap_or_default(),
            ..Default::default()
        };
        if let Some(entry) = id.and_then(|id| self.tables.pools.get(usize::from(id))) {
            let (base, size) = (entry.maglev_base as usize, entry.maglev_size as usize);
            for s in self.tables.maglev.iter().skip(base).take(size) {
                if let Some(b) = symbols.backend(s.backend) {
                    *served.slots.entry(b).or_default() += 1;
                    served.total += 1;
                }
            }
        }
        served
    }

    /// Whether member `i` of pool `id` is healthy in that pool (SPEC R5.5).
    /// A member of a Kubernetes `Local` Service without a ready endpoint is unhealthy as soon
    /// as the EndpointSlices say so, before its probes fail (SPEC R10.5).
    fn member_healthy(&self, id: usize, i: usize, health: &PoolHealth) -> bool {
        let p = &self.plans[id];
        let endpoints = p.endpoints.get(i).copied().flatten() != Some(0);
        endpoints && (!p.health_checked || health.get(&p.members[i].0).healthy)
    }

    /// The weight member `i` of pool `id` reports: its probe's, else (Kubernetes `Local`
    /// Services) its ready endpoints, which is what the node's probe answers (SPEC R7.1).
    fn reported_weight(&self, id: usize, i: usize, health: &PoolHealth) -> Option<u32> {
        let p = &self.plans[id];
        health
            .get(&p.members[i].0)
            .weight
            .or_else(|| p.endpoints.get(i).copied().flatten())
    }

    /// How many members the EndpointSlices took out (SPEC R10.5), for reports.
    fn without_endpoints(&self, id: usize) -> usize {
        self.plans[id]
            .endpoints
            .iter()
            .filter(|e| **e == Some(0))
            .count()
    }

    fn healthy_count(&self, id: usize, health: &HealthState) -> usize {
        let health = health.in_pool(&self.plans[id].name);
        (0..self.plans[id].members.len())
            .filter(|&i| self.member_healthy(id, i, &health))
            .count()
    }

    /// Eligible members with effective weights, and why (SPEC R3.4, R5.4–R5.6).
    fn eligible(&self, id: usize, health: &HealthState) -> (Vec<(usize, u32)>, String) {
        let p = &self.plans[id];
        let health = &health.in_pool(&p.name);
        let healthy: Vec<usize> = (0..p.members.len())
            .filter(|&i| self.member_healthy(id, i, health))
            .collect();
        let endpoint_view = p.endpoints.iter().any(Option::is_some);
        let (set, mut why) = if !p.health_checked && !endpoint_view {
            (
                healthy,
                match p.kind {
                    PoolKind::TargetInstance => {
                        "a target instance: its instance serves".to_string()
                    }
                    PoolKind::TargetPool | PoolKind::BackendService => format!(
                        "no health check: all {} members count as healthy",
                        p.members.len()
                    ),
                },
            )
        } else if healthy.is_empty() && !p.members.is_empty() {
            (
                (0..p.members.len()).collect::<Vec<_>>(),
                "no member is healthy: all are eligible (fail open)".to_string(),
            )
        } else {
            let n = healthy.len();
            (
                healthy,
                format!("{n} of {} members healthy", p.members.len()),
            )
        };
        let probe_weight = |i: usize| self.reported_weight(id, i, health);
        let gone = self.without_endpoints(id);
        if gone > 0 {
            why.push_str(&format!(
                ", {gone} without a ready endpoint (EndpointSlices, SPEC R10.5)"
            ));
        }
        // Probe weights count only in a weighted pool (SPEC R5.6), and there only when every
        // eligible member reported one (SPEC R5.4); otherwise the configured weights apply.
        let reported = set.iter().any(|&i| probe_weight(i).is_some());
        let probed =
            p.weighted && !set.is_empty() && set.iter().all(|&i| probe_weight(i).is_some());
        let mut weighted: Vec<(usize, u32)> = set
            .iter()
            .map(|&i| {
                let w = if probed {
                    probe_weight(i).unwrap_or(1)
                } else {
                    p.members[i].2
                };
                (i, w)
            })
            .collect();
        if probed {
            why.push_str(", probe weights");
        } else if reported && !p.weighted && p.kind == PoolKind::TargetPool {
            why.push_str(", probe weights ignored (target pools do not weight)");
        } else if reported && p.weighted {
            why.push_str(", a member without a probe weight: configured weights");
        }
        if !weighted.is_empty() && weighted.iter().all(|(_, w)| *w == 0) {
            for w in &mut weighted {
                w.1 = 1;
            }
            why.push_str(", every weight is 0: equal shares");
        }
        (weighted, why)
    }

    /// Writes pool `id`'s slice (a target pool's, or a backend service's two) under `health`,
    /// and its report; returns what it overwrote when `record` is set (else nothing).
    fn fill_slice(&mut self, id: usize, health: &HealthState, record: bool) -> Written {
        if self.plans[id].service.is_some() {
            let old = self.old_slices(id, record);
            self.fill_service(id, health);
            return Written::Whole(old);
        }
        let (eligible, why) = self.eligible(id, health);
        let written = match self.full_slice(id, &eligible) {
            Some(full) => self.write_refill(id, &full, &eligible, record),
            None => {
                let slots = maglev::populate(&self.members_of(id, &eligible), self.plans[id].size);
                let old = self.old_slices(id, record);
                let base = self.plans[id].base as usize;
                for (k, b) in slots.iter().enumerate() {
                    self.tables.maglev[base + k] = MaglevSlot { backend: *b };
                }
                self.plans[id].full.refilled = None;
                Written::Whole(old)
            }
        };
        let p = &self.plans[id];
        let names = eligible
            .iter()
            .filter(|(_, w)| *w > 0)
            .map(|&(i, _)| p.members[i].0.clone())
            .collect();
        let healthy = self.healthy_count(id, health);
        let r = &mut self.pools[id];
        r.eligible = names;
        r.healthy = healthy;
        r.why = why;
        written
    }

    /// Pool `id`'s members `chosen` (index, weight) as a population takes them.
    fn members_of(&self, id: usize, chosen: &[(usize, u32)]) -> Vec<Member<'_>> {
        let p = &self.plans[id];
        chosen
            .iter()
            .map(|&(i, w)| Member {
                name: &p.members[i].0,
                id: p.members[i].1,
                weight: w,
            })
            .collect()
    }

    /// Pool `id`'s slices (a backend service's two) as they are, when `record` is set.
    fn old_slices(&self, id: usize, record: bool) -> Vec<MaglevSlot> {
        if !record {
            return Vec::new();
        }
        let p = &self.plans[id];
        let size = p.size as usize
            + if p.service.is_some() {
                p.failover_size as usize
            } else {
                0
            };
        self.tables.maglev[p.base as usize..p.base as usize + size].to_vec()
    }

    /// Writes `full` with the slots of the members not in `eligible` refilled
    /// ([`maglev::refill_free`]): when the slice holds `full` with earlier refills, only the
    /// slots those and this one fill.
    fn write_refill(
        &mut self,
        id: usize,
        full: &FullSlots,
        eligible: &[(usize, u32)],
        record: bool,
    ) -> Written {
        let p = &self.plans[id];
        let mut stays = vec![false; p.members.len()];
        for &(i, w) in eligible {
            stays[i] = w > 0;
        }
        let mut free: Vec<u32> = (0..p.members.len())
            .filter(|&j| !stays[j])
            .flat_map(|j| full.slots_of(j).iter().copied())
            .collect();
        free.sort_unstable();
        let ids = maglev::refill_free(p.size, &free, &self.members_of(id, eligible));
        let base = p.base as usize;
        let written = match self.plans[id].full.refilled.take() {
            Some(before) => {
                let mut touched: Vec<u32> = before.iter().chain(&free).copied().collect();
                touched.sort_unstable();
                touched.dedup();
                let old = if record {
                    touched
                        .iter()
                        .map(|&k| (k, self.tables.maglev[base + k as usize]))
                        .collect()
                } else {
                    Vec::new()
                };
                for &k in &before {
                    self.tables.maglev[base + k as usize] = MaglevSlot {
                        backend: full.table[k as usize],
                    };
                }
                Written::Slots(old)
            }
            None => {
                let old = self.old_slices(id, record);
                for (k, &b) in full.table.iter().enumerate() {
                    self.tables.maglev[base + k] = MaglevSlot { backend: b };
                }
                Written::Whole(old)
            }
        };
        for (&k, &b) in free.iter().zip(&ids) {
            self.tables.maglev[base + k as usize] = MaglevSlot { backend: b };
        }
        self.plans[id].full.refilled = Some(free);
        written
    }

    /// Pool `id`'s slice populated over all its members with their configured weights, when
    /// `eligible` keeps those weights (then the slice is that one with the slots of the
    /// members not eligible refilled, docs/config.md): computed on first use, kept for later
    /// health changes. `None` when weights other than the configured ones apply (probe
    /// weights, endpoint counts, every weight 0), or no member has a weight: the slice is
    /// populated over `eligible`.
    fn full_slice(
        &mut self,
        id: usize,
        eligible: &[(usize, u32)],
    ) -> Option<std::sync::Arc<FullSlots>> {
        let p = &self.plans[id];
        let configured = |i: usize| p.members[i].2;
        let all_zero = p.members.iter().all(|m| m.2 == 0);
        if all_zero || eligible.iter().any(|&(i, w)| w != configured(i)) {
            return None;
        }
        if let Some(full) = &p.full.slots {
            if full.table.len() == p.size as usize {
                return Some(full.clone());
            }
        }
        let members: Vec<Member> = p
            .members
            .iter()
            .map(|(name, id, weight)| Member {
                name,
                id: *id,
                weight: *weight,
            })
            .collect();
        let table = maglev::populate(&members, p.size);
        if table.len() != p.size as usize {
            return None;
        }
        let full = std::sync::Arc::new(FullSlots::new(table, &p.members));
        self.plans[id].full = FullSlice {
            slots: Some(full.clone()),
            refilled: None,
        };
        Some(full)
    }

    /// A backend service's two slices, from the service LB policy's decision with no live
    /// connections (SPEC R6) under `health` (and, for `WEIGHTED_MAGLEV`, the probe weights).
    fn fill_service(&mut self, id: usize, health: &HealthState) {
        if let Some(fill) = self.service_fill(id, health) {
            self.apply_service_fill(id, fill);
        }
    }

    /// What [`Compiled::fill_service`] writes, computed without writing it (so that several
    /// services can be computed at once, [`Compiled::service_fills`]).
    pub(super) fn service_fill(&self, id: usize, health: &HealthState) -> Option<ServiceFill> {
        let p = &self.plans[id];
        let sp = p.service.as_deref()?;
        let names: Vec<String> = p.members.iter().map(|m| m.0.clone()).collect();
        let health = &health.in_pool(&p.name);
        let healthy: Vec<bool> = (0..names.len())
            .map(|i| self.member_healthy(id, i, health))
            .collect();
        let probe: Vec<Option<u32>> = (0..names.len())
            .map(|i| self.reported_weight(id, i, health))
            .collect();
        let fill = services::fill(sp, &names, &healthy, &probe);
        let mut slices = Vec::with_capacity(2);
        for (failover, base, size, weights) in [
            (false, p.base, p.size, &fill.primary),
            (true, p.failover_base, p.failover_size, &fill.failover),
        ] {
            let set = sp.members_of(failover);
            let members: Vec<Member> = set
                .iter()
                .map(|&i| Member {
                    name: &p.members[i].0,
                    id: p.members[i].1,
                    weight: weights[i],
                })
                .collect();
            slices.push((base, size, maglev::populate(&members, size)));
        }
        let serving = if fill.decision.failover_serves {
            &fill.failover
        } else {
            &fill.primary
        };
        let eligible: Vec<String> = (0..names.len())
            .filter(|&i| serving[i] > 0)
            .map(|i| names[i].clone())
            .collect();
        let count = healthy.iter().filter(|h| **h).count();
        let mut why = format!(
            "{}; {count} of {} endpoints healthy",
            policy_summary(&sp.policy),
            names.len()
        );
        if !p.health_checked {
            why = format!(
                "{}; no health check: all {} endpoints count as healthy",
                policy_summary(&sp.policy),
                names.len()
            );
        }
        let gone = self.without_endpoints(id);
        if gone > 0 {
            why.push_str(&format!(
                "; {gone} without a ready endpoint (EndpointSlices, SPEC R10.5)"
            ));
        }
        for step in &fill.decision.steps {
            why.push_str("; ");
            why.push_str(step);
        }
        // Which groups take new connections, where they are, and why.
        let shares: Vec<String> = fill
            .decision
            .groups
            .iter()
            .filter(|g| g.share > 0.0)
            .map(|g| {
                let place = sp
                    .groups
                    .iter()
                    .find(|x| x.name == g.name)
                    .map(|x| {
                        if x.zone.is_empty() {
                            x.region.clone()
                        } else {
                            x.zone.clone()
                        }
                    })
                    .unwrap_or_default();
                let place = if place.is_empty() {
                    String::new()
                } else {
                    format!(" in {place}")
                };
                let why = if g.why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", g.why)
                };
                format!("{}{place} {:.1} %{why}", g.name, 100.0 * g.share)
            })
            .collect();
        if !shares.is_empty() {
            why.push_str("; new connections: ");
            why.push_str(&shares.join(", "));
        }
        if !fill.note.is_empty() {
            why.push_str("; ");
            why.push_str(&fill.note);
        }
        Some(ServiceFill {
            decision: fill.decision,
            slices,
            eligible,
            healthy: count,
            why,
        })
    }

    /// Writes a service's computed fill: its slices, its decision and its report.
    fn apply_service_fill(&mut self, id: usize, fill: ServiceFill) {
        for (base, size, slots) in fill.slices {
            // A slice without a member of weight > 0 is written empty, as a fresh compile
            // leaves it (its descriptor then says 0 slots, or the other slice serves).
            for k in 0..size as usize {
                self.tables.maglev[base as usize + k] = MaglevSlot {
                    backend: slots.get(k).copied().unwrap_or(0),
                };
            }
        }
        if let Some(sp) = self.plans[id].service.as_deref_mut() {
            sp.decision = Some(fill.decision);
        }
        let r = &mut self.pools[id];
        r.eligible = fill.eligible;
        r.healthy = fill.healthy;
        r.why = fill.why;
    }

    /// [`Compiled::service_fill`] of several services, on as many threads as the machine has
    /// cores (each service's fill is independent of the others' and deterministic, so the
    /// tables are the same as one at a time): when many services move at once, their Maglev
    /// refills dominate a refresh.
    pub(super) fn service_fills(
        &self,
        ids: &[usize],
        health: &HealthState,
    ) -> Vec<Option<ServiceFill>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(ids.len());
        if threads <= 1 {
            return ids
                .iter()
                .map(|&id| self.service_fill(id, health))
                .collect();
        }
        let chunk = ids.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = ids
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|&id| self.service_fill(id, health))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| match w.join() {
                    Ok(fills) => fills,
                    // A panic in a worker is a bug: raise it here, as without threads.
                    Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect()
        })
    }

    /// A backend service's descriptor: the slice of the backends that serve (its failover
    /// backends' when the policy fails over), or no slot when the policy drops new connections.
    fn describe_service(&mut self, id: usize) {
        let p = &self.plans[id];
        let Some(d) = p.service.as_deref().and_then(|sp| sp.decision.as_ref()) else {
            return;
        };
        let (base, size) = if d.failover_serves {
            (p.failover_base, p.failover_size)
        } else {
            (p.base, p.size)
        };
        let drop = d.drop || size == 0;
        self.tables.pools[id] = PoolEntry {
            valid: true,
            affinity: p.affinity,
            delivery: p.delivery,
            maglev_base: base,
            maglev_size: if drop { 0 } else { size },
            backup_pool: 0,
            has_backup: false,
            failover_ratio: p.ratio.as_ref().map_or(0, |r| {
                (r.value() * 1000.0).round().clamp(0.0, 1000.0) as u16
            }),
            failed_over: d.failover_serves,
            track: p.track,
            idle_timeout: p.idle_timeout,
        };
        let failed_over = d.failover_serves;
        let r = &mut self.pools[id];
        r.failed_over = failed_over;
        r.serving = r.name.clone();
    }

    /// The decision of a backend service's policy in the last compile or recompile of the
    /// pool: groups, tiers, shares and why (SPEC R6). `None` for other pools.
    pub fn service_decision(&self, pool: &str) -> Option<&crate::policy::Decision> {
        self.plans
            .iter()
            .find(|p| p.name == pool)
            .and_then(|p| p.service.as_deref())
            .and_then(|sp| sp.decision.as_ref())
    }

    /// Writes a pool's descriptor: its own slice, or its backup's when failed over (SPEC R1).
    fn describe(&mut self, id: usize, health: &HealthState) {
        if self.plans[id].service.is_some() {
            return self.describe_service(id);
        }
        let p = &self.plans[id];
        let total = p.members.len();
        let healthy = self.healthy_count(id, health);
        let mut serving = id;
        let mut note = String::new();
        if let (Some(b), Some(ratio)) = (p.backup, &p.ratio) {
            let b = usize::from(b);
            // Exactly as written: no rounding of the ratio or of the fraction (SPEC R1).
            if ratio.at_or_above(healthy as u64, total as u64) {
                let backup_healthy = self.healthy_count(b, health);
                if backup_healthy > 0 {
                    serving = b;
                    note = format!(
                        "; healthy fraction {healthy}/{total} ≤ failoverRatio {ratio}: backup pool {} serves",
                        self.plans[b].name
                    );
                } else {
                    note = format!(
                        "; healthy fraction {healthy}/{total} ≤ failoverRatio {ratio}, but backup pool {} has no healthy member: the pool serves itself",
                        self.plans[b].name
                    );
                }
            } else {
                note = format!(
                    "; healthy fraction {healthy}/{total} > failoverRatio {ratio}: the pool serves itself"
                );
            }
        }
        let s = &self.plans[serving];
        self.tables.pools[id] = PoolEntry {
            valid: true,
            affinity: p.affinity,
            delivery: s.delivery,
            maglev_base: s.base,
            maglev_size: s.size,
            backup_pool: p.backup.unwrap_or(0),
            has_backup: p.backup.is_some(),
            // Informational for the NIC (the compiler decides failover): per mille, rounded.
            failover_ratio: p.ratio.as_ref().map_or(0, |r| {
                (r.value() * 1000.0).round().clamp(0.0, 1000.0) as u16
            }),
            failed_over: serving != id,
            track: p.track,
            idle_timeout: p.idle_timeout,
        };
        let serving_name = s.name.clone();
        let r = &mut self.pools[id];
        r.serving = serving_name;
        r.failed_over = serving != id;
        if let Some(i) = r.why.find("; healthy fraction") {
            r.why.truncate(i);
        }
        r.why.push_str(&note);
    }

    /// Names of the pools that have `backend` as a member.
    pub fn pools_with_backend(&self, backend: &str) -> Vec<String> {
        self.plans
            .iter()
            .filter(|p| p.members.iter().any(|m| m.0 == backend))
            .map(|p| p.name.clone())
            .collect()
    }

    /// Recomputes one pool after a health or weight change: its slice, its descriptor and the
    /// descriptors of pools that use it as their backup. Returns the entries that changed, as
    /// the driver's delta load wants them. The result equals a full [`compile`] under `health`.
    pub fn recompile_pool(
        &mut self,
        pool: &str,
        health: &HealthState,
    ) -> Result<Vec<(Table, u32)>, Error> {
        let id = self.pool_index(pool)?;
        Ok(self.recompile_pool_with(id, health, None))
    }

    /// The index of the pool named `pool` in this compile.
    pub(super) fn pool_index(&self, pool: &str) -> Result<usize, Error> {
        self.plans
            .iter()
            .position(|p| p.name == pool)
            .ok_or_else(|| Error::Internal(format!("no pool named `{pool}` in this compile")))
    }

    /// [`Compiled::recompile_pool`] of pool `id`, with its fill computed already when `fill`
    /// is given (a backend service's, [`Compiled::service_fills`]).
    pub(super) fn recompile_pool_with(
        &mut self,
        id: usize,
        health: &HealthState,
        fill: Option<ServiceFill>,
    ) -> Vec<(Table, u32)> {
        // The pool's slices: its own, and a backend service's failover slice right after it.
        let base = self.plans[id].base as usize;
        let dependants: Vec<usize> = std::iter::once(id)
            .chain((0..self.plans.len()).filter(|&q| self.plans[q].backup == Some(id as u16)))
            .collect();
        let old_pools: Vec<PoolEntry> = dependants.iter().map(|&q| self.tables.pools[q]).collect();
        let written = match fill {
            Some(fill) => {
                let old = self.old_slices(id, true);
                self.apply_service_fill(id, fill);
                Written::Whole(old)
            }
            None => self.fill_slice(id, health, true),
        };
        for &q in &dependants {
            self.describe(q, health);
        }
        let mut changed = Vec::new();
        let now = |k: usize| self.tables.maglev[base + k];
        match written {
            Written::Whole(old) => {
                for (k, old) in old.iter().enumerate() {
                    if now(k) != *old {
                        changed.push((Table::Maglev, (base + k) as u32));
                    }
                }
            }
            // Ascending, each once.
            Written::Slots(old) => {
                for (k, old) in old {
                    if now(k as usize) != old {
                        changed.push((Table::Maglev, (base + k as usize) as u32));
                    }
                }
            }
        }
        for (&q, old) in dependants.iter().zip(&old_pools) {
            if self.tables.pools[q] != *old {
                changed.push((Table::Pool, q as u32));
            }
        }
        changed
    }

    /// Recomputes every pool for a new health state; returns the entries that changed.
    pub fn apply_health(&mut self, health: &HealthState) -> Result<Vec<(Table, u32)>, Error> {
        let names: Vec<String> = self.plans.iter().map(|p| p.name.clone()).collect();
        let mut changed = Vec::new();
        for n in names {
            changed.extend(self.recompile_pool(&n, health)?);
        }
        changed.sort_by_key(|(t, i)| (t.value(), *i));
        changed.dedup();
        Ok(changed)
    }

    /// Occupancy of each table: (table, used entries, depth).
    pub fn occupancy(&self) -> Vec<(Table, u32, u32)> {
        let t = &self.tables;
        let count = |n: usize| n as u32;
        vec![
            (
                Table::Vip,
                count(t.vip.iter().filter(|e| e.valid).count()),
                t.depth(Table::Vip),
            ),
            (
                Table::Rule,
                count(t.rules.iter().filter(|e| e.valid).count()),
                t.depth(Table::Rule),
            ),
            (
                Table::Acl,
                count(
                    t.acl
                        .iter()
                        .filter(|e| e.prefix.iter().any(|p| p.valid))
                        .count(),
                ),
                t.depth(Table::Acl),
            ),
            (
                Table::Pool,
                count(t.pools.iter().filter(|e| e.valid).count()),
                t.depth(Table::Pool),
            ),
            (
                Table::Maglev,
                self.plans.iter().map(|p| p.size + p.failover_size).sum(),
                t.depth(Table::Maglev),
            ),
            (
                Table::Backend,
                count(t.backends.iter().filter(|e| e.valid).count()),
                t.depth(Table::Backend),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nlb_config::health::BackendHealth;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ids_stay_and_new_names_take_ids_free_before_this_change() {
        // No history: name order.
        assert_eq!(allocate_ids(&["a", "b", "c"], &[], 8), [0, 1, 2]);
        // `aa` comes: a, b, c keep 0, 1, 2; `aa` takes 3.
        let before = names(&["a", "b", "c"]);
        assert_eq!(
            allocate_ids(&["a", "aa", "b", "c"], &before, 8),
            [0, 3, 1, 2]
        );
        // `b` goes and `ab` comes in the same change: `ab` does not get b's id 1.
        assert_eq!(allocate_ids(&["a", "ab", "c"], &before, 8), [0, 3, 2]);
        // A free id of the previous list (a hole) is taken before a new one at the end.
        let holed = names(&["a", "", "c"]);
        assert_eq!(allocate_ids(&["a", "ab", "c"], &holed, 8), [0, 1, 2]);
        // Full: the ids this change frees are used last, lowest first.
        let full = names(&["a", "b", "c", "d"]);
        assert_eq!(allocate_ids(&["a", "x", "y"], &full, 4), [0, 1, 2]);
        assert_eq!(allocate_ids(&["c", "x"], &full, 4), [2, 0]);
        // Ids at or beyond the capacity (a smaller profile) are not kept.
        assert_eq!(allocate_ids(&["a", "d"], &full, 3), [0, 1]);
        assert_eq!(
            names_by_id(&["a", "ab", "c"], &[0, 3, 2]),
            ["a", "", "c", "ab"]
        );
    }

    /// The weighted path that backend services (`WEIGHTED_MAGLEV`) and weighted GKE Services
    /// will switch on (SPEC R5.4): probe weights count only when every eligible member has
    /// one; weight 0 leaves; all 0 share equally.
    #[test]
    fn a_weighted_pool_follows_probe_weights_by_the_spec_rules() {
        let text = "\
httpHealthChecks:
  - {name: hc}
instances:
  - {name: a, ip: 192.0.2.1, mac: 02:00:00:00:00:01}
  - {name: b, ip: 192.0.2.2, mac: 02:00:00:00:00:02}
  - {name: c, ip: 192.0.2.3, mac: 02:00:00:00:00:03}
targetPools:
  - {name: p, instances: [a, b, c], healthChecks: [hc]}
forwardingRules:
  - {name: r, IPAddress: 203.0.113.1, target: p}
";
        let (config, d) = nlb_config::parse_config("t.yaml", text);
        assert!(d.is_empty(), "{d}");
        let mut c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
        c.plans[0].weighted = true;
        let serving = |c: &Compiled| -> std::collections::BTreeSet<String> {
            let (b, m) = (c.plans[0].base as usize, c.plans[0].size as usize);
            c.tables.maglev[b..b + m]
                .iter()
                .map(|s| c.symbols.backends[usize::from(s.backend)].clone())
                .collect()
        };
        let weight = |w| BackendHealth {
            healthy: true,
            weight: Some(w),
        };
        let mut h = HealthState::new();
        h.set_member("p", "a", weight(0));
        c.recompile_pool("p", &h).unwrap();
        assert_eq!(
            serving(&c).len(),
            3,
            "b and c report none: configured weights"
        );
        h.set_member("p", "b", weight(10));
        h.set_member("p", "c", weight(10));
        c.recompile_pool("p", &h).unwrap();
        assert_eq!(
            serving(&c),
            ["b", "c"].map(String::from).into(),
            "weight 0 leaves"
        );
        assert!(
            c.pools[0].why.contains("probe weights"),
            "{}",
            c.pools[0].why
        );
        h.set_member("p", "b", weight(0));
        h.set_member("p", "c", weight(0));
        c.recompile_pool("p", &h).unwrap();
        assert_eq!(serving(&c).len(), 3, "all 0: equal shares");
    }
}

/// A backend service's computed fill ([`Compiled::service_fill`]): its slices' slots, its
/// decision and its report, not yet written.
#[derive(Debug, Clone)]
pub(super) struct ServiceFill {
    decision: crate::policy::Decision,
    /// (base, size, slots) of the primary and the failover slice.
    slices: Vec<(u32, u32, Vec<u16>)>,
    eligible: Vec<String>,
    healthy: usize,
    why: String,
}
