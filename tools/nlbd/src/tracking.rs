//! What the configuration says about established connections, per pool (SPEC R4.1): which
//! ones stay on a backend that turns unhealthy, how long the ones a reload takes out of a
//! backend service may continue, and what a failover or failback does to the ones of the set
//! that stopped serving. Everything here is pure (configuration and compile in, decisions
//! out); [`crate::learn::Connections`] carries them out on the connection table and
//! [`crate::engine::Engine`] calls both.
//!
//! The rules follow Google Cloud's documentation of its backend-service passthrough load
//! balancer (SPEC R4.1 gives the defaults; the service LB policy, SPEC R6, says nothing of
//! connection tracking): the compute v1 reference of `backendServices`
//! (<https://cloud.google.com/compute/docs/reference/rest/v1/backendServices>: its
//! `connectionTrackingPolicy` and `failoverPolicy`), "Enable connection draining"
//! (<https://cloud.google.com/load-balancing/docs/enabling-connection-draining>) and "Failover
//! for external passthrough Network Load Balancer overview"
//! (<https://cloud.google.com/load-balancing/docs/network/networklb-failover-overview>):
//!
//! - `connectionTrackingPolicy.connectionPersistenceOnUnhealthyBackends` ("If set to
//!   DEFAULT_FOR_PROTOCOL, the existing connections persist on unhealthy backends only for
//!   connection-oriented protocols (TCP and SCTP) and only if the Tracking Mode is
//!   PER_CONNECTION (default tracking mode) or the Session Affinity is configured for
//!   5-tuple. They do not persist for UDP. If set to NEVER_PERSIST, ... they are always
//!   diverted to newly selected healthy backends (unless all backends are unhealthy). If set
//!   to ALWAYS_PERSIST, existing connections always persist on unhealthy backends regardless
//!   of protocol and session affinity."): the rule itself is
//!   [`flowtable_compiler::Persistence::keeps`], the one home of it. Target pools and target
//!   instances have no such field; they keep `DEFAULT_FOR_PROTOCOL`, the target-pool load
//!   balancer's behaviour (SPEC R4.1: established connections are not cut actively), or what
//!   [`crate::learn::LearnOptions::persistence`] says.
//! - `connectionDraining.drainingTimeoutSec` (0–3600; 0 disables draining): draining starts
//!   when "a VM or an endpoint [is removed] from a backend group (instance group or NEG)"
//!   and "doesn't apply when you disconnect a backend (instance group or zonal NEG) from a
//!   load balancer's backend service" (removing a group from a service "isn't supported for
//!   internal passthrough Network Load Balancers and external passthrough Network Load
//!   Balancers"). Passthrough load balancers drain "TCP, UDP, and other non-TCP protocols".
//!   During the timeout no new connection goes to the removed endpoint and the existing ones
//!   continue; after it, they end. An endpoint shared by several services drains for the
//!   largest of their timeouts. See [`plan_reload_drains`].
//! - `failoverPolicy.disableConnectionDrainOnFailover` ("On failover or failback, this field
//!   indicates whether connection draining will be honored. Google Cloud has a fixed
//!   connection draining timeout of 10 minutes. A setting of true terminates existing TCP
//!   connections to the active pool during failover and failback, immediately draining
//!   traffic. A setting of false allows existing TCP connections to persist, even on VMs no
//!   longer in the active pool, for up to the duration of the connection draining timeout (10
//!   minutes)." It "can be set to true only if the protocol is TCP", which the configuration
//!   checks). See [`failover_switches`].

use flowtable_compiler::{
    Backend, BackendService, Compiled, Config, Persistence, PoolKind, TrackingMode,
};
use nlb_hw::layouts::BackendEntry;
use nlb_hw::Tables;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The fixed connection draining timeout of a failover or failback when
/// `disableConnectionDrainOnFailover` is false (compute v1 `BackendServiceFailoverPolicy`:
/// "Google Cloud has a fixed connection draining timeout of 10 minutes").
pub const FAILOVER_DRAINING_TIMEOUT_SECS: u32 = 600;

/// How a pool treats its established connections when their backend turns unhealthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionTracking {
    /// `connectionPersistenceOnUnhealthyBackends`.
    pub persistence: Persistence,
    /// `trackingMode`.
    pub tracking: TrackingMode,
    /// Whether the session affinity keys the 5-tuple (`NONE`, `CLIENT_IP_PORT_PROTO`).
    pub five_tuple_affinity: bool,
}

impl ConnectionTracking {
    /// A target pool's or target instance's: no setting of its own, `persistence` for all of
    /// them, connections tracked by their 5-tuple.
    pub fn target_pool(persistence: Persistence) -> ConnectionTracking {
        ConnectionTracking {
            persistence,
            tracking: TrackingMode::PerConnection,
            five_tuple_affinity: true,
        }
    }

    /// A backend service's `connectionTrackingPolicy` and `sessionAffinity`.
    pub fn of_service(service: &BackendService) -> ConnectionTracking {
        ConnectionTracking {
            persistence: service.persistence,
            tracking: service.tracking_mode,
            five_tuple_affinity: service.five_tuple_affinity(),
        }
    }

    /// Whether a connection of IP protocol `protocol` stays on its backend when that backend
    /// turns unhealthy.
    pub fn keeps(self, protocol: u8) -> bool {
        self.persistence
            .keeps(protocol, self.tracking, self.five_tuple_affinity)
    }
}

/// The backend service a pool id names in `compiled`, if it is one.
fn service_of<'c>(
    config: &'c Config,
    compiled: &Compiled,
    pool: u16,
) -> Option<&'c BackendService> {
    let sym = compiled.symbols.pools.get(usize::from(pool))?;
    if sym.kind != PoolKind::BackendService {
        return None;
    }
    config.backend_services.iter().find(|s| s.name == sym.name)
}

/// The pool id a valid rule names.
fn rule_pool(tables: &Tables, rule: u16) -> Option<u16> {
    tables
        .rules
        .get(usize::from(rule))
        .filter(|r| r.valid)
        .map(|r| r.pool)
}

/// Per rule id: the tracking of the backend service the rule sends to; `None` for the rules
/// of target pools and target instances (and free ids), which follow
/// [`ConnectionTracking::target_pool`].
pub fn rule_tracking(config: &Config, compiled: &Compiled) -> Vec<Option<ConnectionTracking>> {
    let services: HashMap<&str, &BackendService> = config
        .backend_services
        .iter()
        .map(|s| (s.name.as_str(), s))
        .collect();
    let by_pool: Vec<Option<ConnectionTracking>> = compiled
        .symbols
        .pools
        .iter()
        .map(|p| {
            let s = services
                .get(p.name.as_str())
                .filter(|_| p.kind == PoolKind::BackendService)?;
            Some(ConnectionTracking::of_service(s))
        })
        .collect();
    (0..compiled.tables.rules.len())
        .map(|r| {
            let pool = rule_pool(&compiled.tables, r as u16)?;
            by_pool.get(usize::from(pool)).copied().flatten()
        })
        .collect()
}

/// Whether two `backends[]` entries name the same group (instance group or network endpoint
/// group, by name).
fn same_group(a: &Backend, b: &Backend) -> bool {
    a.neg == b.neg && a.group.name == b.group.name
}

/// The draining timeout of an endpoint removed from each group, by (network endpoint group?,
/// name): the largest `drainingTimeoutSec` of the services that have the group as a backend
/// ("If you enable connection draining on multiple backend services that share the same
/// instance groups or NEGs, the largest timeout value is used").
fn group_draining_timeouts(config: &Config) -> HashMap<(bool, &str), u32> {
    let mut m: HashMap<(bool, &str), u32> = HashMap::new();
    for s in &config.backend_services {
        for b in &s.backends {
            let t = m.entry((b.neg, b.group.name.as_str())).or_insert(0);
            *t = (*t).max(s.draining_timeout_sec);
        }
    }
    m
}

/// A (rule, backend) pair whose connections a reload takes out of a backend service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedPair {
    /// Rule id (in the tables before the reload).
    pub rule: u16,
    /// Backend id (in the tables before the reload).
    pub backend: u16,
    /// How long its connections may continue, seconds; 0: they end before the new tables
    /// serve.
    pub timeout_secs: u32,
}

/// An instance gone from the configuration whose backend entry stays in the tables while its
/// connections drain (the NIC delivers a connection-table hit only to a valid backend entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptBackend {
    /// Its backend id (kept: no other instance takes it while it drains).
    pub id: u16,
    /// Its name.
    pub name: String,
    /// Its backend entry as it served.
    pub entry: BackendEntry,
}

/// What a reload does to the connections of backend services.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadDrains {
    /// Pairs whose backend leaves the rule's backend service.
    pub pairs: Vec<RemovedPair>,
    /// Instances deleted from the configuration that drain (their entries stay).
    pub keep: Vec<KeptBackend>,
}

/// Which connections a reload from `old` to `new` takes out of a backend service, and for how
/// long they may continue.
///
/// For every rule that sends to a backend service before the reload and stays, and every
/// endpoint of that service: when the endpoint is no longer a member of the pool the rule
/// sends to afterwards, its connections
/// - drain for the group's draining timeout (the largest of the services that have the
///   group) when the endpoint left a group (instance group or
///   network endpoint group) that is still a backend of the same service: the instance was
///   removed from the group or deleted;
/// - end at once otherwise: the group was disconnected from the service, or the rule now
///   sends to another pool (Google Cloud does not drain either for a passthrough
///   load balancer).
///
/// A timeout of 0 ends them at once too. A deleted instance that drains keeps its backend
/// entry ([`ReloadDrains::keep`]) unless the new compile gave its id to another instance, in
/// which case its connections end at once. Rules that go away, and instances that stay with
/// another address or MAC, are the reload's own business (their connections are evicted).
pub fn plan_reload_drains(
    old_config: &Config,
    old: &Compiled,
    new_config: &Config,
    new: &Compiled,
) -> ReloadDrains {
    let new_instances: HashSet<&str> = new_config
        .instances
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    let (old_backends, new_backends) = (ids(&old.symbols.backends), ids(&new.symbols.backends));
    let new_rules = ids(&new.symbols.rules);
    let timeouts = group_draining_timeouts(new_config);
    // What leaves each (service before, pool after): computed once for all rules of a service.
    let mut leaving: HashMap<(&str, u16), Vec<(u16, u32)>> = HashMap::new();
    let mut out = ReloadDrains::default();
    for (rule, rule_name) in old.symbols.rule_names() {
        let Some(service) =
            rule_pool(&old.tables, rule).and_then(|p| service_of(old_config, old, p))
        else {
            continue;
        };
        let Some(new_pool) = new_rules
            .get(rule_name)
            .and_then(|&r| rule_pool(&new.tables, r))
        else {
            continue;
        };
        let list = leaving
            .entry((service.name.as_str(), new_pool))
            .or_insert_with(|| {
                let new_members: HashSet<u16> = new
                    .symbols
                    .pools
                    .get(usize::from(new_pool))
                    .map(|p| p.members.iter().copied().collect())
                    .unwrap_or_default();
                // The same service after the reload (by name), when the rule still sends to it.
                let same_service =
                    service_of(new_config, new, new_pool).filter(|s| s.name == service.name);
                let mut list = Vec::new();
                for group in &service.backends {
                    let group_stays = same_service
                        .is_some_and(|s| s.backends.iter().any(|b| same_group(b, group)));
                    for instance in old_config.group_members(group) {
                        let Some(&backend) = old_backends.get(instance) else {
                            continue;
                        };
                        if new_backends
                            .get(instance)
                            .is_some_and(|b| new_members.contains(b))
                        {
                            continue;
                        }
                        let mut timeout_secs = if group_stays {
                            timeouts
                                .get(&(group.neg, group.group.name.as_str()))
                                .copied()
                                .unwrap_or(0)
                        } else {
                            0
                        };
                        if timeout_secs > 0 && !new_instances.contains(instance) {
                            // Deleted: it drains only if its entry can stay at its id.
                            let id_free =
                                new.symbols.backend(backend).is_none_or(|n| n == instance);
                            match old.tables.backends.get(usize::from(backend)) {
                                Some(entry) if id_free && entry.valid => {
                                    if !out.keep.iter().any(|k| k.id == backend) {
                                        out.keep.push(KeptBackend {
                                            id: backend,
                                            name: instance.to_string(),
                                            entry: *entry,
                                        });
                                    }
                                }
                                _ => timeout_secs = 0,
                            }
                        }
                        list.push((backend, timeout_secs));
                    }
                }
                list
            });
        out.pairs
            .extend(list.iter().map(|&(backend, timeout_secs)| RemovedPair {
                rule,
                backend,
                timeout_secs,
            }));
    }
    out
}

/// Ids by name (free ids left out).
fn ids(names: &[String]) -> HashMap<&str, u16> {
    names
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .map(|(i, n)| (n.as_str(), i as u16))
        .collect()
}

/// Writes kept backends into a compile: their entries and names at their ids (where no
/// instance of the compile has the id), so connections on them keep being delivered and the
/// next compile does not hand the id to a new instance. Returns the ones written.
pub fn keep_backends(compiled: &mut Compiled, kept: &[KeptBackend]) -> Vec<KeptBackend> {
    let mut written = Vec::new();
    for k in kept {
        let id = usize::from(k.id);
        let taken = compiled.symbols.backend(k.id).is_some_and(|n| n != k.name);
        let named_elsewhere = compiled
            .symbols
            .backend_id(&k.name)
            .is_some_and(|b| b != k.id);
        if taken || named_elsewhere || id >= compiled.tables.backends.len() {
            continue;
        }
        if compiled.symbols.backend(k.id).is_some() {
            // The instance is back in the configuration: an instance like any other.
            continue;
        }
        compiled.tables.backends[id] = k.entry;
        if compiled.symbols.backends.len() <= id {
            compiled.symbols.backends.resize(id + 1, String::new());
        }
        compiled.symbols.backends[id] = k.name.clone();
        written.push(k.clone());
    }
    written
}

/// Takes kept backends out of a compile again (their connections are gone): invalid entries,
/// free ids, as a compile without them leaves them.
pub fn release_backends(compiled: &mut Compiled, released: &[KeptBackend]) {
    for k in released {
        let id = usize::from(k.id);
        if compiled.symbols.backend(k.id) != Some(k.name.as_str()) {
            continue;
        }
        if let Some(e) = compiled.tables.backends.get_mut(id) {
            *e = BackendEntry::default();
        }
        compiled.symbols.backends[id].clear();
    }
    while compiled
        .symbols
        .backends
        .last()
        .is_some_and(String::is_empty)
    {
        compiled.symbols.backends.pop();
    }
}

/// Which set of each backend service serves new connections in `serving` (`true`: its
/// failover backends), by service name.
pub fn failover_states(compiled: &Compiled, serving: &Tables) -> BTreeMap<String, bool> {
    compiled
        .symbols
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind == PoolKind::BackendService)
        .filter_map(|(id, p)| {
            let entry = serving.pools.get(id).filter(|e| e.valid)?;
            Some((p.name.clone(), entry.failed_over))
        })
        .collect()
}

/// A backend service whose serving set changed: a failover (the failover backends took over)
/// or a failback (the primary ones did again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverSwitch {
    /// The service.
    pub service: String,
    /// `true`: a failover; `false`: a failback.
    pub to_failover: bool,
    /// Ids of the rules that send to it.
    pub rules: Vec<u16>,
    /// Backend ids of the set that stopped serving.
    pub stopped: Vec<u16>,
    /// Backend ids of the set that serves now.
    pub started: Vec<u16>,
    /// `disableConnectionDrainOnFailover`: the connections of the stopped set end now;
    /// otherwise they may continue for [`FAILOVER_DRAINING_TIMEOUT_SECS`].
    pub evict_now: bool,
}

/// The backend services whose serving set differs between `before` and `after` (both from
/// [`failover_states`]; services in only one of them did not switch), with what `config` and
/// `compiled` (the compile serving `after`) say about them.
pub fn failover_switches(
    config: &Config,
    compiled: &Compiled,
    before: &BTreeMap<String, bool>,
    after: &BTreeMap<String, bool>,
) -> Vec<FailoverSwitch> {
    let mut out = Vec::new();
    let backends = ids(&compiled.symbols.backends);
    for (name, &now_failover) in after {
        if before.get(name).is_none_or(|&was| was == now_failover) {
            continue;
        }
        let Some(service) = config.backend_services.iter().find(|s| &s.name == name) else {
            continue;
        };
        let Some(pool) = compiled.symbols.pool_id(name) else {
            continue;
        };
        let set = |failover: bool| -> Vec<u16> {
            let mut ids: Vec<u16> = service
                .backends
                .iter()
                .filter(|b| b.failover == failover)
                .flat_map(|b| config.group_members(b))
                .filter_map(|i| backends.get(i).copied())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let rules = (0..compiled.tables.rules.len() as u16)
            .filter(|&r| rule_pool(&compiled.tables, r) == Some(pool))
            .collect();
        out.push(FailoverSwitch {
            service: name.clone(),
            to_failover: now_failover,
            rules,
            stopped: set(!now_failover),
            started: set(now_failover),
            evict_now: service.disable_connection_drain_on_failover,
        });
    }
    out
}

/// Whether the connections of `pool` that its persistence does not keep can move at all: a
/// backend service moves them only while it has a healthy endpoint to move them to ("they are
/// always diverted to newly selected healthy backends (unless all backends are unhealthy)");
/// target pools move them whatever (their behaviour before backend services).
pub fn moves_possible(compiled: &Compiled, pool: u16) -> bool {
    compiled
        .pools
        .get(usize::from(pool))
        .is_none_or(|r| r.kind != PoolKind::BackendService || r.healthy > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowtable_compiler::{compile, compile_after, BackendHealth, CompileOptions, HealthState};

    /// `web` (30 s) and `api` (120 s) share group `ig-a`; `ig-b` is `web`'s alone; target pool
    /// `tp` has `a1` and `b1` too.
    const SHARED: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', backendService: web}
  - {name: api, IPAddress: 203.0.113.81, IPProtocol: TCP, portRange: '80', backendService: api}
  - {name: legacy, IPAddress: 203.0.113.82, IPProtocol: TCP, portRange: '80', target: tp}
regionBackendServices:
  - name: web
    region: r1
    protocol: TCP
    connectionDraining: {drainingTimeoutSec: 30}
    backends:
      - {group: ig-a}
      - {group: ig-b}
  - name: api
    region: r1
    protocol: TCP
    connectionDraining: {drainingTimeoutSec: 120}
    backends:
      - {group: ig-a}
targetPools:
  - {name: tp, region: r1, instances: [a1, b1]}
instanceGroups:
  - {name: ig-a, zone: r1-a, instances: [a1, a2]}
  - {name: ig-b, zone: r1-a, instances: [b1]}
instances:
  - {name: a1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:01'}
  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:02'}
  - {name: b1, ip: 192.0.2.3, zone: r1-a, mac: '02:00:00:00:00:03'}
";

    fn config(text: &str) -> Config {
        let (c, d) = nlb_config::parse_config("t.yaml", text);
        assert!(d.is_empty(), "{d}");
        c
    }

    /// The drains of a reload from `SHARED` to `new`, by names: (rule, backend, seconds).
    fn drains(new: &str) -> (Vec<(String, String, u32)>, Vec<String>) {
        let (old_c, new_c) = (config(SHARED), config(new));
        let opts = CompileOptions::default();
        let old = compile(&old_c, &HealthState::new(), &opts).unwrap();
        let new = compile_after(&new_c, &HealthState::new(), &opts, &old.symbols).unwrap();
        let d = plan_reload_drains(&old_c, &old, &new_c, &new);
        let mut pairs: Vec<(String, String, u32)> = d
            .pairs
            .iter()
            .map(|p| {
                (
                    old.symbols.rule(p.rule).unwrap().to_string(),
                    old.symbols.backend(p.backend).unwrap().to_string(),
                    p.timeout_secs,
                )
            })
            .collect();
        pairs.sort();
        for k in &d.keep {
            assert_eq!(old.symbols.backend(k.id), Some(k.name.as_str()));
            assert_eq!(old.tables.backends[usize::from(k.id)], k.entry);
        }
        (pairs, d.keep.into_iter().map(|k| k.name).collect())
    }

    fn pair(rule: &str, backend: &str, secs: u32) -> (String, String, u32) {
        (rule.to_string(), backend.to_string(), secs)
    }

    /// "Enable connection draining": removing a VM from an instance group drains it, for the
    /// largest timeout of the services sharing the group (120 s, `api`'s, for `web` too);
    /// the target pool's connections are not a backend service's business.
    #[test]
    fn an_instance_removed_from_a_shared_group_drains_for_the_largest_timeout() {
        let removed = SHARED.replace("instances: [a1, a2]}", "instances: [a1]}");
        let (pairs, keep) = drains(&removed);
        assert_eq!(pairs, [pair("api", "a2", 120), pair("web", "a2", 120)]);
        assert!(keep.is_empty(), "a2 is still an instance: {keep:?}");
        // Deleted altogether (an autoscaler deleting the VM): the same, and its backend entry
        // stays while it drains.
        let deleted = removed.replace(
            "  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:02'}\n",
            "",
        );
        let (pairs, keep) = drains(&deleted);
        assert_eq!(pairs, [pair("api", "a2", 120), pair("web", "a2", 120)]);
        assert_eq!(keep, ["a2"]);
    }

    /// Disconnecting a group from a service is not drained by a passthrough load balancer;
    /// neither is a rule that now sends elsewhere; a timeout of 0 disables draining; a rule
    /// that goes away is the reload's own eviction.
    #[test]
    fn what_does_not_drain_ends_at_once() {
        let disconnected = SHARED.replace("      - {group: ig-b}\n", "");
        assert_eq!(drains(&disconnected).0, [pair("web", "b1", 0)]);
        let retargeted = SHARED.replace(
            "portRange: '80', backendService: web}",
            "portRange: '80', backendService: api}",
        );
        assert_eq!(drains(&retargeted).0, [pair("web", "b1", 0)]);
        let zero = SHARED
            .replace("{drainingTimeoutSec: 30}", "{drainingTimeoutSec: 0}")
            .replace("instances: [b1]}", "instances: []}");
        assert_eq!(drains(&zero).0, [pair("web", "b1", 0)]);
        let no_rule = SHARED
            .replace("  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', backendService: web}\n", "")
            .replace("instances: [a1, a2]}", "instances: [a1]}");
        assert_eq!(drains(&no_rule).0, [pair("api", "a2", 120)]);
        // Nothing changes: nothing drains.
        assert_eq!(drains(SHARED), (vec![], vec![]));
    }

    /// Kept backends go into the next compile at their ids and come out again.
    #[test]
    fn kept_backends_hold_their_entry_and_id_until_released() {
        let deleted = SHARED
            .replace("instances: [a1, a2]}", "instances: [a1]}")
            .replace(
                "  - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:02'}\n",
                "",
            );
        let (old_c, new_c) = (config(SHARED), config(&deleted));
        let opts = CompileOptions::default();
        let old = compile(&old_c, &HealthState::new(), &opts).unwrap();
        let mut new = compile_after(&new_c, &HealthState::new(), &opts, &old.symbols).unwrap();
        let fresh = new.clone();
        let a2 = old.symbols.backend_id("a2").unwrap();
        assert!(!new.tables.backends[usize::from(a2)].valid);
        let d = plan_reload_drains(&old_c, &old, &new_c, &new);
        let kept = keep_backends(&mut new, &d.keep);
        assert_eq!(kept, d.keep);
        assert_eq!(
            new.tables.backends[usize::from(a2)],
            old.tables.backends[usize::from(a2)]
        );
        assert_eq!(new.symbols.backend(a2), Some("a2"));
        // The next compile does not give the id to a new instance.
        let with_c3 = deleted.replace(
            "instances:\n  - {name: a1,",
            "instances:\n  - {name: c3, ip: 192.0.2.9, zone: r1-a, mac: '02:00:00:00:00:09'}\n  - {name: a1,",
        );
        let next =
            compile_after(&config(&with_c3), &HealthState::new(), &opts, &new.symbols).unwrap();
        assert_ne!(next.symbols.backend_id("c3"), Some(a2));
        release_backends(&mut new, &kept);
        assert_eq!(new.tables.backends, fresh.tables.backends);
        assert_eq!(new.symbols, fresh.symbols);
    }

    const FAILOVER: &str = "
forwardingRules:
  - {name: app, IPAddress: 203.0.113.30, IPProtocol: TCP, portRange: '80', backendService: app}
regionBackendServices:
  - name: app
    region: r1
    protocol: TCP
    healthChecks: [hc]
    failoverPolicy: {failoverRatio: 0.5, disableConnectionDrainOnFailover: true}
    backends:
      - {group: primary}
      - {group: standby, failover: true}
instanceGroups:
  - {name: primary, zone: r1-a, instances: [p1, p2, p3, p4]}
  - {name: standby, zone: r1-b, instances: [s1, s2]}
healthChecks:
  - {name: hc, type: TCP}
instances:
  - {name: p1, ip: 192.0.2.1, mac: '02:00:00:00:00:01'}
  - {name: p2, ip: 192.0.2.2, mac: '02:00:00:00:00:02'}
  - {name: p3, ip: 192.0.2.3, mac: '02:00:00:00:00:03'}
  - {name: p4, ip: 192.0.2.4, mac: '02:00:00:00:00:04'}
  - {name: s1, ip: 192.0.2.5, mac: '02:00:00:00:00:05'}
  - {name: s2, ip: 192.0.2.6, mac: '02:00:00:00:00:06'}
";

    /// compute v1 failoverPolicy: 1 of 4 primaries healthy is below 0.5, the failover
    /// backends serve; the switch names the set that stopped (all primaries, the healthy p4
    /// too) and the flag.
    #[test]
    fn a_failover_and_a_failback_name_the_set_that_stopped_serving() {
        let c = config(FAILOVER);
        let opts = CompileOptions::default();
        let all_up = compile(&c, &HealthState::new(), &opts).unwrap();
        let mut h = HealthState::new();
        for p in ["p1", "p2", "p3"] {
            h.set_member(
                "app",
                p,
                BackendHealth {
                    healthy: false,
                    weight: None,
                },
            );
        }
        let failed = compile(&c, &h, &opts).unwrap();
        let (up, over) = (
            failover_states(&all_up, &all_up.tables),
            failover_states(&failed, &failed.tables),
        );
        assert_eq!(up, BTreeMap::from([("app".to_string(), false)]));
        assert_eq!(over, BTreeMap::from([("app".to_string(), true)]));
        let ids = |names: &[&str]| -> Vec<u16> {
            names
                .iter()
                .map(|n| failed.symbols.backend_id(n).unwrap())
                .collect()
        };
        let s = failover_switches(&c, &failed, &up, &over);
        assert_eq!(
            s,
            [FailoverSwitch {
                service: "app".into(),
                to_failover: true,
                rules: vec![failed.symbols.rule_id("app").unwrap()],
                stopped: ids(&["p1", "p2", "p3", "p4"]),
                started: ids(&["s1", "s2"]),
                evict_now: true,
            }]
        );
        let back = failover_switches(&c, &all_up, &over, &up);
        assert_eq!(back.len(), 1);
        assert!(!back[0].to_failover);
        assert_eq!(
            (back[0].stopped.clone(), back[0].started.clone()),
            (ids(&["s1", "s2"]), ids(&["p1", "p2", "p3", "p4"]))
        );
        assert!(failover_switches(&c, &failed, &over, &over).is_empty());
    }

    /// The persistence rule as compute v1 states it, through the one home of it
    /// (`Persistence::keeps`): TCP and SCTP stay under DEFAULT_FOR_PROTOCOL only with
    /// PER_CONNECTION tracking or a 5-tuple affinity (a PER_SESSION service with a shorter
    /// affinity, which the configuration refuses, would move them); UDP and the rest move.
    #[test]
    fn default_for_protocol_keeps_connection_oriented_protocols() {
        use Persistence::*;
        let t = |persistence, tracking, five_tuple_affinity| ConnectionTracking {
            persistence,
            tracking,
            five_tuple_affinity,
        };
        for (proto, stays) in [
            (6, true),
            (132, true),
            (17, false),
            (1, false),
            (47, false),
            (50, false),
        ] {
            assert_eq!(
                t(DefaultForProtocol, TrackingMode::PerConnection, false).keeps(proto),
                stays,
                "{proto}"
            );
            assert_eq!(
                t(DefaultForProtocol, TrackingMode::PerSession, true).keeps(proto),
                stays,
                "{proto}"
            );
            assert!(
                !t(DefaultForProtocol, TrackingMode::PerSession, false).keeps(proto),
                "{proto}"
            );
            assert!(t(AlwaysPersist, TrackingMode::PerSession, false).keeps(proto));
            assert!(!t(NeverPersist, TrackingMode::PerConnection, true).keeps(proto));
        }
        // Target pools: their behaviour before backend services (TCP stays, UDP moves).
        assert!(ConnectionTracking::target_pool(DefaultForProtocol).keeps(6));
        assert!(!ConnectionTracking::target_pool(DefaultForProtocol).keeps(17));
    }
}
