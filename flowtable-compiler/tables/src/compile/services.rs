//! Backend services as pools (SPEC R1, R6): a backend service owns two Maglev slices, one of
//! its primary backends and one of its failover backends, and [`crate::policy::decide`] gives
//! the weights of their members: by the service LB policy the service names, or, naming none
//! (and for every Kubernetes Service), by passthrough semantics, every healthy endpoint
//! alike ([`crate::policy::Policy::passthrough`]). A fresh compile has no live
//! connection counts: it decides as with none (every group empty), which is what a freshly
//! loaded table serves until the slow path feeds the policy its live counts
//! ([`super::Compiled::rebalance`], in `live.rs`); from then on every fill decides with the
//! live counts, drain state and time the plan keeps.

use crate::policy::{self, Decision, DrainState, Endpoint, Group, Locality, Policy, Preference};
use nlb_config::model::{
    region_of_zone, BackendService, Config, GroupLookup, LocalityLbPolicy, MaxConnections,
    ServiceLbPolicy,
};
use std::collections::{BTreeMap, HashMap};

/// Connections an endpoint counts for when no backend of its service gives a capacity: so
/// many that a group is never full, so nothing spills for capacity (groups share in
/// proportion to their endpoints × `capacityScaler`, and `capacityScaler: 0` still drains).
pub const UNLIMITED_PER_ENDPOINT: f64 = 1e9;

/// Integer Maglev weight of the endpoint with the largest share; the others in proportion
/// (any positive share at least 1).
pub const WEIGHT_SCALE: u32 = 10_000;

/// One backend group of a service, as the policy sees it.
#[derive(Debug, Clone)]
pub(super) struct GroupPlan {
    /// The group's name (instance group or network endpoint group).
    pub name: String,
    /// Its region (its zone's; a regional service's own when the zone is not known).
    pub region: String,
    /// Its zone (`zone`, or its first member's; empty when not known).
    pub zone: String,
    /// `preference`.
    pub preference: Preference,
    /// `failover`.
    pub failover: bool,
    /// Target capacity in connections (max connections × `capacityScaler`).
    pub capacity: f64,
    /// No backend of the service gives a capacity ([`UNLIMITED_PER_ENDPOINT`]).
    pub unlimited: bool,
    /// Its endpoints: indexes into the pool plan's members.
    pub members: Vec<usize>,
}

/// What a backend service adds to a pool plan.
#[derive(Debug, Clone)]
pub(super) struct ServicePlan {
    /// The service LB policy, with the service's `failoverPolicy`.
    pub policy: Policy,
    /// Where the NIC is.
    pub locality: Locality,
    /// Its groups, by name.
    pub groups: Vec<GroupPlan>,
    /// `localityLbPolicy: WEIGHTED_MAGLEV`: probe weights shape the shares within a group.
    pub weighted: bool,
    /// Weights shape the shares across the groups too: without a service LB policy, where the
    /// passthrough load balancer shares new connections among all its backends in proportion
    /// to their weights whatever their group or zone (a Kubernetes Service's nodes by their
    /// ready pods, SPEC R7.3).
    pub weights_across_groups: bool,
    /// The decision of the last fill (for reports and `explain`): what the tables serve.
    pub decision: Option<Decision>,
    /// Live connections per endpoint (member name), as last fed by the slow path.
    pub live: BTreeMap<String, u64>,
    /// Opened and closed connections lately (the groups' turnover), when the slow path counts
    /// closed connections.
    pub churn: super::live::Churn,
    /// The automatic capacity drain's state (R6.3), kept between decisions.
    pub drain: DrainState,
    /// Policy time (seconds, the slow path's monotonic clock) of the live counts.
    pub now: f64,
    /// The decision of the latest refresh, applied or not (for `status`).
    pub observed: Option<Decision>,
}

impl ServicePlan {
    /// Whether some group is a failover backend.
    pub fn has_failover(&self) -> bool {
        self.groups.iter().any(|g| g.failover)
    }

    /// Member indexes of the primary (`false`) or failover (`true`) groups, in member order.
    pub fn members_of(&self, failover: bool) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .groups
            .iter()
            .filter(|g| g.failover == failover)
            .flat_map(|g| g.members.iter().copied())
            .collect();
        v.sort_unstable();
        v
    }
}

/// What [`plan_service`] looks up by name, indexed once for all services.
pub(super) struct PlanLookup<'c> {
    groups: GroupLookup<'c>,
    /// The pools of Kubernetes Services → whether one of those Services asks for zonal
    /// affinity (every Kubernetes Service is passthrough: it names no service LB policy).
    kube_pools: HashMap<&'c str, bool>,
    /// Service LB policies by name (the first of a name).
    policies: HashMap<&'c str, &'c ServiceLbPolicy>,
}

impl<'c> PlanLookup<'c> {
    pub(super) fn new(c: &'c Config) -> PlanLookup<'c> {
        let mut kube_pools: HashMap<&str, bool> = HashMap::new();
        for k in &c.kubernetes {
            for pool in &k.pools {
                *kube_pools.entry(pool.as_str()).or_default() |= k.zonal_affinity;
            }
        }
        let mut policies = HashMap::new();
        for p in &c.service_lb_policies {
            policies.entry(p.name.as_str()).or_insert(p);
        }
        PlanLookup {
            groups: c.group_lookup(),
            kube_pools,
            policies,
        }
    }

    /// The members of a backend's group ([`Config::group_members`]).
    pub(super) fn group_members(&self, backend: &nlb_config::model::Backend) -> Vec<&'c str> {
        self.groups.members(backend)
    }
}

/// The plan of backend service `b` over the pool members `members` (instance names, in name
/// order): its groups with their place and capacity, and its policy.
pub(super) fn plan_service(
    c: &Config,
    lookup: &PlanLookup,
    b: &BackendService,
    members: &[String],
) -> ServicePlan {
    let capacity_given = b.backends.iter().any(|x| x.max_connections.is_some());
    let mut groups: Vec<GroupPlan> = b
        .backends
        .iter()
        .map(|backend| {
            // `members` is sorted and without duplicates.
            let mut idx: Vec<usize> = lookup
                .groups
                .members(backend)
                .into_iter()
                .filter_map(|n| members.binary_search_by(|m| m.as_str().cmp(n)).ok())
                .collect();
            idx.sort_unstable();
            idx.dedup();
            let zone = lookup.groups.zone(backend).unwrap_or_default().to_string();
            let region = region_of_zone(&zone)
                .map(str::to_string)
                .unwrap_or_else(|| b.region.clone());
            let scaler = backend.capacity_scaler.value();
            let max = match backend.max_connections {
                Some(m) => m.of(idx.len()),
                None if capacity_given => 0.0,
                None => MaxConnections::PerEndpoint(1).of(idx.len()) * UNLIMITED_PER_ENDPOINT,
            };
            GroupPlan {
                name: backend.group.name.clone(),
                region,
                zone,
                preference: backend.preference,
                failover: backend.failover,
                capacity: max * scaler,
                unlimited: !capacity_given,
                members: idx,
            }
        })
        .collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    let named = b
        .service_lb_policy
        .as_ref()
        .and_then(|r| lookup.policies.get(r.name.as_str()));
    // The service LB policy applies only where one is named (SPEC R6); otherwise, and for
    // every Kubernetes Service, passthrough semantics.
    let mut policy = match named {
        Some(p) => Policy {
            algorithm: p.algorithm,
            auto_capacity_drain: p.auto_capacity_drain,
            failover_health_threshold: p.failover_health_threshold,
            isolation: p.isolation,
            ..Policy::default()
        },
        None => Policy::passthrough(),
    };
    policy.failover_ratio = b.failover_ratio.clone();
    policy.drop_traffic_if_unhealthy = b.drop_traffic_if_unhealthy;
    policy.zonal_affinity = lookup.kube_pools.get(b.name.as_str()) == Some(&true);
    let passthrough = policy.passthrough;
    ServicePlan {
        policy,
        locality: c.nic.locality(),
        groups,
        weighted: b.locality_lb_policy == LocalityLbPolicy::WeightedMaglev,
        weights_across_groups: passthrough,
        decision: None,
        live: BTreeMap::new(),
        churn: Default::default(),
        drain: DrainState::default(),
        now: 0.0,
        observed: None,
    }
}

/// A note for each backend service that names no service LB policy but sets what only a
/// policy uses (capacities, a `capacityScaler` between 0 and 1, `preference`): passthrough
/// semantics ignore them (SPEC R6), which a user who wrote them should hear.
pub(super) fn passthrough_notes(c: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    for b in c
        .backend_services
        .iter()
        .filter(|b| b.service_lb_policy.is_none())
    {
        let mut unused = Vec::new();
        if b.backends.iter().any(|x| x.max_connections.is_some()) {
            unused.push("maxConnections");
        }
        if b.backends.iter().any(|x| {
            let v = x.capacity_scaler.value();
            v > 0.0 && v < 1.0
        }) {
            unused.push("capacityScaler (other than 0)");
        }
        if b.backends
            .iter()
            .any(|x| x.preference == Preference::Preferred)
        {
            unused.push("preference");
        }
        if !unused.is_empty() {
            notes.push(format!(
                "backend service {}: no serviceLbPolicy, so it is passthrough (every healthy endpoint alike, SPEC R6) and {} shape nothing; name a service LB policy to use them",
                b.name,
                unused.join(", ")
            ));
        }
    }
    notes
}

/// What one fill of a backend service decided.
#[derive(Debug, Clone)]
pub(super) struct Fill {
    /// The decision over all groups.
    pub decision: Decision,
    /// Weight of each member in the primary slice (0: no slots).
    pub primary: Vec<u32>,
    /// Weight of each member in the failover slice.
    pub failover: Vec<u32>,
    /// What the weights came from, in words (probe weights of `WEIGHTED_MAGLEV`).
    pub note: String,
}

/// The policy's groups over `names` (the plan's members, in name order), their health and
/// live connections.
pub(super) fn policy_groups(
    sp: &ServicePlan,
    names: &[&str],
    healthy: &[bool],
    only: Option<bool>,
) -> Vec<Group> {
    // Per member by one walk each (a refresh decides every service: no lookups per member).
    let live = super::live::by_member(names, &sp.live);
    let closed = sp.churn.closed_by_member(names);
    sp.groups
        .iter()
        .filter(|g| only.is_none_or(|f| g.failover == f))
        .map(|g| Group {
            name: g.name.clone(),
            region: g.region.clone(),
            zone: g.zone.clone(),
            preference: g.preference,
            // A set decided on its own has no failover backends of its own.
            failover: only.is_none() && g.failover,
            capacity: g.capacity,
            unlimited: g.unlimited,
            endpoints: g
                .members
                .iter()
                .map(|&i| Endpoint {
                    name: names[i].to_string(),
                    healthy: healthy[i],
                    live: live[i],
                })
                .collect(),
            turnover: sp
                .churn
                .turnover(g.members.iter().map(|&i| closed[i]).sum()),
        })
        .collect()
}

/// Decides the service's weights under `healthy` and `probe` (per member): the serving set's
/// slice gets the decision's shares, the other slice what that set would serve on its own
/// (so a failover or failback is one descriptor write away).
pub(super) fn fill(
    sp: &ServicePlan,
    names: &[String],
    healthy: &[bool],
    probe: &[Option<u32>],
) -> Fill {
    // On a copy of the drain state: the runtime advances it ([`super::Compiled::rebalance`]);
    // deciding again at the same time and counts decides the same.
    let decide = |groups: &[Group], policy: &Policy| {
        policy::decide(policy, &sp.locality, groups, &mut sp.drain.clone(), sp.now)
    };
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut decision = decide(&policy_groups(sp, &name_refs, healthy, None), &sp.policy);
    if sp.weighted && sp.weights_across_groups {
        // The groups' shares are their endpoints' weighted shares (what the slices hold).
        let (shares, note) = probe_weighted(sp, &decision, names, probe);
        if note.as_deref() == Some(WEIGHTED_ACROSS) {
            decision.rule.push_str(
                "; WEIGHTED_MAGLEV: in proportion to the endpoints' weights (SPEC R5.4, R7.3)",
            );
        }
        for g in &mut decision.groups {
            if let Some(plan) = sp.groups.iter().find(|p| p.name == g.name) {
                g.share = plan
                    .members
                    .iter()
                    .filter_map(|&i| shares.get(&names[i]))
                    .sum();
            }
        }
    }
    let serving_failover = decision.failover_serves;
    let mut notes = Vec::new();
    let mut weights_of = |d: &Decision, set: bool| -> Vec<u32> {
        let (shares, note) = if sp.weighted {
            probe_weighted(sp, d, names, probe)
        } else {
            (d.endpoint_shares.clone(), None)
        };
        if set == serving_failover {
            notes.extend(note);
        }
        let w = Decision {
            endpoint_shares: shares,
            ..d.clone()
        }
        .weights(WEIGHT_SCALE);
        (0..names.len())
            .map(|i| w.get(&names[i]).copied().unwrap_or(0))
            .collect()
    };
    let standby = |set: bool| {
        let alone = Policy {
            failover_ratio: None,
            ..sp.policy.clone()
        };
        decide(&policy_groups(sp, &name_refs, healthy, Some(set)), &alone)
    };
    let serving = weights_of(&decision, serving_failover);
    let other = if sp.has_failover() {
        weights_of(&standby(!serving_failover), !serving_failover)
    } else {
        vec![0; names.len()]
    };
    let (primary, failover) = if serving_failover {
        (other, serving)
    } else {
        (serving, other)
    };
    Fill {
        decision,
        primary,
        failover,
        note: notes.join("; "),
    }
}

/// What [`probe_weighted`] says when weights shape the shares across the groups.
const WEIGHTED_ACROSS: &str = "weights (probes, else ready endpoints) across the nodes";

/// `WEIGHTED_MAGLEV` (SPEC R5.4, R5.6): within each group, the group's share follows the
/// weights the endpoints' probes report; weight 0 takes an endpoint out of new connections
/// (and a group whose endpoints all report 0 out, its share going to the others); all 0, or
/// an endpoint without a weight, and the policy's equal shares stay.
fn probe_weighted(
    sp: &ServicePlan,
    d: &Decision,
    names: &[String],
    probe: &[Option<u32>],
) -> (BTreeMap<String, f64>, Option<String>) {
    let shares = &d.endpoint_shares;
    let index = |n: &str| names.iter().position(|m| m == n);
    let serving: Vec<usize> = shares
        .iter()
        .filter(|(_, s)| **s > 0.0)
        .filter_map(|(n, _)| index(n))
        .collect();
    if serving.is_empty() {
        return (shares.clone(), None);
    }
    if serving.iter().any(|&i| probe[i].is_none()) {
        return (
            shares.clone(),
            Some("an endpoint without a probe weight: equal shares within each group".into()),
        );
    }
    if serving.iter().all(|&i| probe[i] == Some(0)) {
        return (
            shares.clone(),
            Some("every probe weight is 0: equal shares within each group".into()),
        );
    }
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    if sp.weights_across_groups {
        let share: f64 = serving.iter().map(|&i| shares[&names[i]]).sum();
        let total: u64 = serving
            .iter()
            .map(|&i| u64::from(probe[i].unwrap_or(0)))
            .sum();
        for &i in &serving {
            let w = u64::from(probe[i].unwrap_or(0));
            if w > 0 {
                out.insert(names[i].clone(), share * w as f64 / total as f64);
            }
        }
        return (out, Some(WEIGHTED_ACROSS.into()));
    }
    let mut lost = 0.0;
    for g in &sp.groups {
        let members: Vec<usize> = g
            .members
            .iter()
            .copied()
            .filter(|i| serving.contains(i))
            .collect();
        let share: f64 = members.iter().map(|&i| shares[&names[i]]).sum();
        let total: u64 = members
            .iter()
            .map(|&i| u64::from(probe[i].unwrap_or(0)))
            .sum();
        if total == 0 {
            lost += share;
            continue;
        }
        for &i in &members {
            let w = u64::from(probe[i].unwrap_or(0));
            if w > 0 {
                out.insert(names[i].clone(), share * w as f64 / total as f64);
            }
        }
    }
    let kept: f64 = out.values().sum();
    if lost > 0.0 && kept > 0.0 {
        for s in out.values_mut() {
            *s *= (kept + lost) / kept;
        }
    }
    (out, Some("probe weights within each group".into()))
}
