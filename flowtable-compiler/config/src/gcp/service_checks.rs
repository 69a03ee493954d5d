//! The relations of backend-service load balancers (SPEC R1, R2, R6): what forwarding rules,
//! backend services, instance groups, network endpoint groups, health checks and service LB
//! policies say about each other. Each phase is a function; [`check_services`] runs them.

use super::{zone_text, Index};
use crate::diag::{did_you_mean, Diagnostics};
use crate::model::*;
use std::collections::HashMap;

/// Every relation of backend services, one phase after the other.
pub(super) fn check_services(d: &mut Diagnostics, c: &Config, idx: &Index) {
    check_rules_of_services(d, c, idx);
    check_service_references(d, c, idx);
    check_group_members(d, c, idx);
    check_service_backends(d, c, idx);
    check_service_settings(d, c, idx);
    check_service_locations(d, c, idx);
    check_health_check_timing(d, c);
}

/// A reference to nothing of its kind, with a did-you-mean and what exists.
fn dangling<'a>(
    d: &mut Diagnostics,
    f: &str,
    what: &str,
    r: &Ref,
    path: String,
    names: impl Iterator<Item = &'a str>,
) {
    let mut valid: Vec<&str> = names.collect();
    valid.sort_unstable();
    let hint = did_you_mean(&r.name, &valid)
        .map(|s| format!(", did you mean `{s}`?"))
        .unwrap_or_default();
    let list = if valid.is_empty() {
        "none defined".to_string()
    } else if valid.len() > 12 {
        format!("{}, ... ({} in all)", valid[..12].join(", "), valid.len())
    } else {
        valid.join(", ")
    };
    d.push(
        f,
        r.pos,
        path,
        format!("no {what} named `{}`{hint}", r.name),
        Some(list),
    );
}

/// Forwarding rules that name a backend service (SPEC R2): the service exists; `L3_DEFAULT`
/// only with a backend service of protocol `UNSPECIFIED`; TCP and UDP rules with a service of
/// their protocol or `UNSPECIFIED`; a regional service in the rule's region.
fn check_rules_of_services(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    for r in &c.forwarding_rules {
        let base = format!("forwardingRules[{}]", r.loc.index);
        if !r.backend_service {
            if r.ip_protocol == Protocol::L3Default {
                d.push(
                    f,
                    r.loc.field("IPProtocol"),
                    format!("{base}.IPProtocol"),
                    "`L3_DEFAULT` is for rules of backend services; target pools and target instances take TCP or UDP rules",
                    Some("TCP or UDP, or `backendService` with a backend service of protocol UNSPECIFIED".into()),
                );
            }
            continue;
        }
        let name = r.target.name.as_str();
        let Some(s) = idx.services.get(name) else {
            let other = if idx.pools.contains_key(name) {
                Some("target pool")
            } else if idx.tis.contains_key(name) {
                Some("target instance")
            } else {
                None
            };
            match other {
                Some(kind) => d.push(
                    f,
                    r.target.pos,
                    format!("{base}.backendService"),
                    format!(
                        "`{name}` is a {kind}: a forwarding rule names it in `target`, not `backendService`"
                    ),
                    Some(format!("`target: {name}`")),
                ),
                None => dangling(
                    d,
                    f,
                    "backend service",
                    &r.target,
                    format!("{base}.backendService"),
                    idx.services.keys().copied(),
                ),
            }
            continue;
        };
        if !s.protocol.serves(r.ip_protocol) {
            let valid = match r.ip_protocol {
                Protocol::L3Default => "a backend service of protocol UNSPECIFIED".to_string(),
                p => format!(
                    "a backend service of protocol {} or UNSPECIFIED, or IPProtocol {}",
                    p.name(),
                    s.protocol.name()
                ),
            };
            d.push(
                f,
                r.loc.field("IPProtocol"),
                format!("{base}.IPProtocol"),
                format!(
                    "an {} rule cannot send packets to backend service `{}` of protocol {} ({}, line {})",
                    r.ip_protocol.name(),
                    s.name,
                    s.protocol.name(),
                    s.path(),
                    s.loc.pos.line
                ),
                Some(valid),
            );
        }
        if let Some(Scope::Region(written)) = &r.target.scope {
            if s.global {
                d.push(
                    f,
                    r.target.pos,
                    format!("{base}.backendService"),
                    format!(
                        "the reference names region {written}, but backend service `{}` is global ({}, line {})",
                        s.name,
                        s.path(),
                        s.loc.pos.line
                    ),
                    Some(format!("`global/backendServices/{}`", s.name)),
                );
                continue;
            } else if *written != s.region && !s.region.is_empty() {
                d.push(
                    f,
                    r.target.pos,
                    format!("{base}.backendService"),
                    format!(
                        "the reference names region {written}, but backend service `{}` is in region {} ({}, line {})",
                        s.name,
                        s.region,
                        s.path(),
                        s.loc.pos.line
                    ),
                    Some("the region the object is in".into()),
                );
                continue;
            }
        } else if r.target.scope == Some(Scope::Global) && !s.global {
            d.push(
                f,
                r.target.pos,
                format!("{base}.backendService"),
                format!(
                    "the reference names a global backend service, but `{}` is in region {} ({}, line {})",
                    s.name,
                    s.region,
                    s.path(),
                    s.loc.pos.line
                ),
                Some(format!("`regions/{}/backendServices/{}`", s.region, s.name)),
            );
            continue;
        }
        if !r.region.is_empty() && !s.region.is_empty() && r.region != s.region {
            d.push(
                f,
                r.target.pos,
                format!("{base}.backendService"),
                format!(
                    "backend service `{}` is in region {} ({}, line {}), but forwarding rule `{}` is in region {} ({base}, line {})",
                    s.name,
                    s.region,
                    s.path(),
                    s.loc.pos.line,
                    r.name,
                    r.region,
                    r.loc.pos.line
                ),
                Some("the region of the backend service, or a global backend service".into()),
            );
        }
    }
}

/// What backend services name exists: health checks (at most one, the newer kind), backend
/// groups (an instance group or a network endpoint group, each once per service), the
/// service LB policy.
fn check_service_references(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    for s in &c.backend_services {
        let base = s.path();
        for (i, h) in s.health_checks.iter().enumerate() {
            if !idx.health_checks.contains_key(h.name.as_str()) {
                let what = if idx.hcs.contains_key(h.name.as_str()) {
                    "health check of the newer kind (it is a legacy HTTP health check, which target pools take)"
                } else {
                    "health check"
                };
                dangling(
                    d,
                    f,
                    what,
                    h,
                    format!("{base}.healthChecks[{i}]"),
                    idx.health_checks.keys().copied(),
                );
            }
        }
        if s.health_checks.len() > 1 {
            d.push(
                f,
                s.health_checks[1].pos,
                format!("{base}.healthChecks"),
                format!(
                    "{} health checks given; a backend service of a passthrough load balancer takes one",
                    s.health_checks.len()
                ),
                Some("one health check (or none: every endpoint counts as healthy)".into()),
            );
        }
        let mut seen: HashMap<(bool, &str), usize> = HashMap::new();
        for (i, b) in s.backends.iter().enumerate() {
            let path = format!("{base}.backends[{i}].group");
            let name = b.group.name.as_str();
            let (ig, neg) = (idx.igs.contains_key(name), idx.negs.contains_key(name));
            match b.group.collection {
                None if ig && neg => {
                    d.push(
                        f,
                        b.group.pos,
                        path.clone(),
                        format!("both an instance group and a network endpoint group are named `{name}`: a path says which"),
                        Some(format!("`zones/ZONE/instanceGroups/{name}` or `zones/ZONE/networkEndpointGroups/{name}`")),
                    );
                    continue;
                }
                None if !ig && !neg => {
                    dangling(
                        d,
                        f,
                        "instance group or network endpoint group",
                        &b.group,
                        path.clone(),
                        idx.igs.keys().chain(idx.negs.keys()).copied(),
                    );
                    continue;
                }
                Some("instanceGroups") if !ig => {
                    let what = if neg {
                        "instance group (it is a network endpoint group)"
                    } else {
                        "instance group"
                    };
                    dangling(d, f, what, &b.group, path.clone(), idx.igs.keys().copied());
                    continue;
                }
                Some("networkEndpointGroups") if !neg => {
                    let what = if ig {
                        "network endpoint group (it is an instance group)"
                    } else {
                        "network endpoint group"
                    };
                    dangling(d, f, what, &b.group, path.clone(), idx.negs.keys().copied());
                    continue;
                }
                _ => {}
            }
            if let Some(&other) = seen.get(&(!b.neg, name)) {
                d.push(
                    f,
                    b.group.pos,
                    path.clone(),
                    format!(
                        "this service has an instance group and a network endpoint group both named `{name}` ({base}.backends[{other}]): the service LB policy, health and `explain` name a service's groups by name"
                    ),
                    Some("groups of different names within one backend service".into()),
                );
                continue;
            }
            if let Some(first) = seen.insert((b.neg, name), i) {
                d.push(
                    f,
                    b.group.pos,
                    path,
                    format!("group `{name}` is a backend of this service already ({base}.backends[{first}])"),
                    Some("each group once per backend service".into()),
                );
                seen.insert((b.neg, name), first);
            }
        }
        if let Some(p) = &s.service_lb_policy {
            if !idx.policies.contains_key(p.name.as_str()) {
                dangling(
                    d,
                    f,
                    "service LB policy",
                    p,
                    format!("{base}.serviceLbPolicy"),
                    idx.policies.keys().copied(),
                );
            }
        }
    }
}

/// Members of groups: instance group members and network endpoints are instances of the
/// configuration, each once, in the group's zone; a `GCE_VM_IP` endpoint's `ipAddress` is its
/// instance's address; a pasted group's `size` matches the members given.
fn check_group_members(d: &mut Diagnostics, c: &Config, idx: &Index) {
    for g in &c.instance_groups {
        check_instance_group_members(d, c, idx, g);
    }
    for g in &c.network_endpoint_groups {
        check_endpoint_group_members(d, c, idx, g);
    }
}

/// A member `m` of a group in `group_zone` is in that zone, and in the zone its reference
/// names. The path and the group's words are built only for a diagnostic: a large cluster's
/// groups have hundreds of thousands of members that have none.
fn check_member_zone(
    d: &mut Diagnostics,
    f: &str,
    idx: &Index,
    group_zone: &str,
    m: &Ref,
    path: &dyn Fn() -> String,
    group: &dyn Fn() -> String,
) {
    let Some(inst) = idx.instances.get(m.name.as_str()) else {
        return;
    };
    if let Some(Scope::Zone(z)) = &m.scope {
        if !inst.zone.is_empty() && *z != inst.zone {
            d.push(
                f,
                m.pos,
                path(),
                format!(
                    "the reference names zone {z}, but instance `{}` is in {} (instances[{}], line {})",
                    inst.name,
                    zone_text(&inst.zone),
                    inst.loc.index,
                    inst.loc.pos.line
                ),
                Some("the zone the object is in".into()),
            );
            return;
        }
    }
    if !group_zone.is_empty() && !inst.zone.is_empty() && inst.zone != group_zone {
        d.push(
            f,
            m.pos,
            path(),
            format!(
                "instance `{}` is in {} (instances[{}], line {}), but {} is in {}",
                inst.name,
                zone_text(&inst.zone),
                inst.loc.index,
                inst.loc.pos.line,
                group(),
                zone_text(group_zone)
            ),
            Some("instances of the group's own zone (a group is zonal)".into()),
        );
    }
}

/// The `size` Google Cloud printed for a group is the number of members listed in `field`.
fn check_group_size(
    d: &mut Diagnostics,
    f: &str,
    loc: &Loc,
    base: &str,
    size: Option<u64>,
    n: usize,
    field: &str,
) {
    if let Some(size) = size.filter(|&s| s != n as u64) {
        d.push(
            f,
            loc.field("size"),
            format!("{base}.size"),
            format!(
                "Google Cloud says the group has {size} members (`size`), but {n} are listed in `{field}`: members would be missing"
            ),
            Some(format!(
                "{size} entries in `{field}` (paste the items of `gcloud compute {}`)",
                if field == "instances" {
                    "instance-groups list-instances"
                } else {
                    "network-endpoint-groups list-network-endpoints"
                }
            )),
        );
    }
}

/// An instance group's instances: known, each once, in the group's zone; as many as its size.
fn check_instance_group_members(d: &mut Diagnostics, c: &Config, idx: &Index, g: &InstanceGroup) {
    let f = c.file.as_str();
    let base = format!("instanceGroups[{}]", g.loc.index);
    let zone = c.instance_group_zone(g).unwrap_or_default();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, m) in g.instances.iter().enumerate() {
        let path = || format!("{base}.instances[{i}]");
        if !idx.instances.contains_key(m.name.as_str()) {
            dangling(d, f, "instance", m, path(), idx.instances.keys().copied());
            continue;
        }
        if let Some(first) = seen.insert(&m.name, i) {
            d.push(
                f,
                m.pos,
                path(),
                format!(
                    "instance `{}` is listed twice (also at {base}.instances[{first}])",
                    m.name
                ),
                None,
            );
            seen.insert(&m.name, first);
            continue;
        }
        check_member_zone(d, f, idx, zone, m, &path, &|| {
            format!("instance group `{}`", g.name)
        });
    }
    check_group_size(d, f, &g.loc, &base, g.size, g.instances.len(), "instances");
}

/// A network endpoint group's endpoints: known instances, each once, at the instance's
/// address, in the group's zone; as many as its size.
fn check_endpoint_group_members(
    d: &mut Diagnostics,
    c: &Config,
    idx: &Index,
    g: &NetworkEndpointGroup,
) {
    let f = c.file.as_str();
    let base = format!("networkEndpointGroups[{}]", g.loc.index);
    let zone = c.network_endpoint_group_zone(g).unwrap_or_default();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, e) in g.endpoints.iter().enumerate() {
        let path = || format!("{base}.networkEndpoints[{i}]");
        let m = &e.instance;
        let Some(inst) = idx.instances.get(m.name.as_str()) else {
            dangling(
                d,
                f,
                "instance",
                m,
                format!("{}.instance", path()),
                idx.instances.keys().copied(),
            );
            continue;
        };
        if let Some(first) = seen.insert(&m.name, i) {
            d.push(
                f,
                m.pos,
                format!("{}.instance", path()),
                format!(
                    "instance `{}` is an endpoint twice (also at {base}.networkEndpoints[{first}])",
                    m.name
                ),
                None,
            );
            seen.insert(&m.name, first);
            continue;
        }
        if let Some(ip) = e.ip.filter(|ip| *ip != inst.ip) {
            d.push(
                f,
                e.ip_pos,
                format!("{}.ipAddress", path()),
                format!(
                    "`ipAddress` {ip} is not the address of instance `{}` ({}, instances[{}], line {}): endpoints are delivered to their instance's address",
                    inst.name,
                    inst.ip,
                    inst.loc.index,
                    inst.loc.pos.line
                ),
                Some(format!("{}, or leave `ipAddress` out (another interface of the instance is not supported yet)", inst.ip)),
            );
        }
        check_member_zone(
            d,
            f,
            idx,
            zone,
            m,
            &|| format!("{}.instance", path()),
            &|| format!("network endpoint group `{}`", g.name),
        );
    }
    check_group_size(
        d,
        f,
        &g.loc,
        &base,
        g.size,
        g.endpoints.len(),
        "networkEndpoints",
    );
}

/// The backends of each service: capacity given by all or none, with the field of the
/// group's kind; at least one primary backend when there are failover backends; an instance
/// reached through one group of the service only.
fn check_service_backends(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    let groups = c.group_lookup();
    for s in &c.backend_services {
        let base = s.path();
        for (i, b) in s.backends.iter().enumerate() {
            let wrong = match (b.max_connections, b.neg) {
                (Some(MaxConnections::PerInstance(_)), true) => Some("maxConnectionsPerEndpoint"),
                (Some(MaxConnections::PerEndpoint(_)), false) => Some("maxConnectionsPerInstance"),
                _ => None,
            };
            if let (Some(right), Some(m)) = (wrong, b.max_connections) {
                d.push(
                    f,
                    b.loc.field(m.field()),
                    format!("{base}.backends[{i}].{}", m.field()),
                    format!(
                        "`{}` does not fit {} `{}`",
                        m.field(),
                        if b.neg {
                            "network endpoint group"
                        } else {
                            "instance group"
                        },
                        b.group.name
                    ),
                    Some(format!("`{right}` or `maxConnections` (the whole group)")),
                );
            }
        }
        let with: Vec<usize> = (0..s.backends.len())
            .filter(|&i| s.backends[i].max_connections.is_some())
            .collect();
        if !with.is_empty() && with.len() < s.backends.len() {
            let i = (0..s.backends.len())
                .find(|i| !with.contains(i))
                .unwrap_or(0);
            d.push(
                f,
                s.backends[i].loc.pos,
                format!("{base}.backends[{i}]"),
                format!(
                    "backend `{}` has no capacity, but {} of this service's {} backends have one: the service LB policy fills groups by capacity",
                    s.backends[i].group.name,
                    with.len(),
                    s.backends.len()
                ),
                Some("maxConnections, maxConnectionsPerInstance or maxConnectionsPerEndpoint on every backend, or on none (then every endpoint counts alike and nothing spills for capacity)".into()),
            );
        }
        if !s.backends.is_empty() && s.backends.iter().all(|b| b.failover) {
            d.push(
                f,
                s.loc.field("backends"),
                format!("{base}.backends"),
                "every backend is a failover backend: failover backends serve only when the primary ones fail",
                Some("at least one backend without `failover: true`".into()),
            );
        }
        // An instance reached through two groups of one service would have two shares.
        let mut through: HashMap<&str, (usize, &str)> = HashMap::new();
        for (i, b) in s.backends.iter().enumerate() {
            for m in groups.members(b) {
                if !idx.instances.contains_key(m) {
                    continue;
                }
                match through.get(m) {
                    Some((j, g)) if *j != i => {
                        d.push(
                            f,
                            b.group.pos,
                            format!("{base}.backends[{i}].group"),
                            format!(
                                "instance `{m}` is in group `{}` and in group `{g}` ({base}.backends[{j}]) of this service: an endpoint belongs to one backend group of a service",
                                b.group.name
                            ),
                            Some("groups of a service without common instances".into()),
                        );
                    }
                    Some(_) => {}
                    None => {
                        through.insert(m, (i, &b.group.name));
                    }
                }
            }
        }
    }
}

/// Settings that depend on other objects: `WEIGHTED_MAGLEV` needs an HTTP or HTTPS health
/// check (the weight arrives in a response header, SPEC R5.4). (The settings of one service
/// that depend on each other, `disableConnectionDrainOnFailover` only for TCP and
/// `PER_SESSION` tracking only where the session is the connection, are checked as it is read.)
fn check_service_settings(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    for s in &c.backend_services {
        let base = s.path();
        if s.weighted() {
            let check = s
                .health_checks
                .first()
                .and_then(|h| idx.health_checks.get(h.name.as_str()));
            let http = check.is_some_and(|h| !matches!(h.probe, Probe::Tcp { .. }));
            if !http && (s.health_checks.is_empty() || check.is_some()) {
                d.push(
                    f,
                    s.loc.field("localityLbPolicy"),
                    format!("{base}.localityLbPolicy"),
                    match check {
                        Some(h) => format!(
                            "WEIGHTED_MAGLEV takes the weights HTTP health-check responses report (X-Load-Balancing-Endpoint-Weight), but health check `{}` is of type {}",
                            h.name,
                            h.probe.kind()
                        ),
                        None => "WEIGHTED_MAGLEV takes the weights HTTP health-check responses report (X-Load-Balancing-Endpoint-Weight), but the service has no health check".to_string(),
                    },
                    Some("an HTTP or HTTPS health check, or MAGLEV".into()),
                );
            }
        }
    }
}

/// Regions and zones: a regional backend service's groups are in its region (a global one may
/// span regions, as the policy's region algorithms need); a regional health check is in the
/// service's region; a service LB policy's location fits the service.
fn check_service_locations(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let groups = c.group_lookup();
    for s in &c.backend_services {
        check_backend_locations(d, c, idx, &groups, s);
        check_health_check_locations(d, c, idx, s);
        check_policy_location(d, c, idx, s);
    }
}

/// A backend service's groups: in the zone their reference names, and in the region of a
/// regional service.
fn check_backend_locations(
    d: &mut Diagnostics,
    c: &Config,
    idx: &Index,
    groups: &GroupLookup<'_>,
    s: &BackendService,
) {
    let f = c.file.as_str();
    let base = s.path();
    for (i, b) in s.backends.iter().enumerate() {
        let path = format!("{base}.backends[{i}].group");
        let group = if b.neg {
            idx.negs.get(b.group.name.as_str()).map(|g| {
                (
                    g.zone.as_str(),
                    g.loc.index,
                    g.loc.pos.line,
                    "networkEndpointGroups",
                )
            })
        } else {
            idx.igs.get(b.group.name.as_str()).map(|g| {
                (
                    g.zone.as_str(),
                    g.loc.index,
                    g.loc.pos.line,
                    "instanceGroups",
                )
            })
        };
        let zone = groups.zone(b).map(str::to_string);
        if let (Some(Scope::Zone(written)), Some(zone)) = (&b.group.scope, &zone) {
            if written != zone {
                let (_, index, line, list) = group.unwrap_or(("", 0, 0, ""));
                d.push(
                    f,
                    b.group.pos,
                    path,
                    format!(
                        "the reference names zone {written}, but group `{}` is in {} ({list}[{index}], line {line})",
                        b.group.name,
                        zone_text(zone)
                    ),
                    Some("the zone the object is in".into()),
                );
                continue;
            }
        }
        let region = zone
            .as_deref()
            .and_then(region_of_zone)
            .or_else(|| b.group.scope.as_ref().and_then(Scope::region));
        if let Some(region) = region {
            if !s.global && !s.region.is_empty() && region != s.region {
                d.push(
                    f,
                    b.group.pos,
                    path,
                    format!(
                        "group `{}` is in region {region}, but regional backend service `{}` is in region {} ({base}, line {})",
                        b.group.name, s.name, s.region, s.loc.pos.line
                    ),
                    Some("groups of the service's region, or a global backend service (`backendServices`), which may span regions".into()),
                );
            }
        }
    }
}

/// A backend service's health checks: in the region their reference names; global, or
/// regional in the service's region.
fn check_health_check_locations(d: &mut Diagnostics, c: &Config, idx: &Index, s: &BackendService) {
    let f = c.file.as_str();
    let base = s.path();
    for (i, h) in s.health_checks.iter().enumerate() {
        let Some(hc) = idx.health_checks.get(h.name.as_str()) else {
            continue;
        };
        let path = format!("{base}.healthChecks[{i}]");
        let written = match &h.scope {
            Some(Scope::Region(r)) => Some(r.as_str()),
            Some(Scope::Global) => Some(""),
            _ => None,
        };
        if let Some(w) = written.filter(|w| *w != hc.region) {
            let (named, is) = (
                if w.is_empty() {
                    "a global health check".to_string()
                } else {
                    format!("region {w}")
                },
                if hc.region.is_empty() {
                    "global".to_string()
                } else {
                    format!("in region {}", hc.region)
                },
            );
            d.push(
                f,
                h.pos,
                path,
                format!(
                    "the reference names {named}, but health check `{}` is {is} (healthChecks[{}], line {})",
                    hc.name, hc.loc.index, hc.loc.pos.line
                ),
                Some("the region the object is in".into()),
            );
            continue;
        }
        if !hc.region.is_empty() && (s.global || hc.region != s.region) {
            d.push(
                f,
                h.pos,
                path,
                format!(
                    "health check `{}` is in region {} (healthChecks[{}], line {}), but backend service `{}` is {}",
                    hc.name,
                    hc.region,
                    hc.loc.index,
                    hc.loc.pos.line,
                    s.name,
                    if s.global { "global".to_string() } else { format!("in region {}", s.region) }
                ),
                Some("a global health check, or a regional one of the service's region".into()),
            );
        }
    }
}

/// A backend service's service LB policy: of the location the service is in.
fn check_policy_location(d: &mut Diagnostics, c: &Config, idx: &Index, s: &BackendService) {
    let f = c.file.as_str();
    let base = s.path();
    if let Some(p) = &s.service_lb_policy {
        let Some(policy) = idx.policies.get(p.name.as_str()) else {
            return;
        };
        let location = match &p.scope {
            Some(Scope::Global) => "global",
            Some(Scope::Region(r)) => r.as_str(),
            _ => policy.location.as_str(),
        };
        let fits = location.is_empty()
            || if s.global {
                location == "global"
            } else {
                location == s.region
            };
        if !fits {
            d.push(
                f,
                p.pos,
                format!("{base}.serviceLbPolicy"),
                format!(
                    "service LB policy `{}` is in location {location}, but backend service `{}` is {}",
                    policy.name,
                    s.name,
                    if s.global { "global".to_string() } else { format!("in region {}", s.region) }
                ),
                Some(if s.global {
                    "a policy of location global".to_string()
                } else {
                    format!("a policy of location {}", s.region)
                }),
            );
        }
    }
}

/// A probe may not take longer than the interval between probes.
fn check_health_check_timing(d: &mut Diagnostics, c: &Config) {
    for h in &c.health_checks {
        if h.timeout_sec > h.check_interval_sec {
            d.push(
                &c.file,
                h.loc.field("timeoutSec"),
                format!("healthChecks[{}].timeoutSec", h.loc.index),
                format!(
                    "timeoutSec {} is longer than checkIntervalSec {}",
                    h.timeout_sec, h.check_interval_sec
                ),
                Some(format!("1..={}", h.check_interval_sec)),
            );
        }
    }
}
