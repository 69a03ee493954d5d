//! Reading Kubernetes objects (Services, EndpointSlices, Nodes) out of manifest trees.
//!
//! Kubernetes objects carry many fields that do not concern a load balancer (status of
//! Pods, managed fields, ...), so unlike our own configuration sections unknown fields are
//! not errors: only the fields read here are checked, each with its `file:line:column`.

use super::{Shape, TrafficPolicy};
use crate::diag::Pos;
use crate::gcp::Reader;
use crate::model::Prefix;
use crate::tree::{Node, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The value of `key` in a mapping node (none for other nodes or a null value).
pub(super) fn get<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| k.scalar() == Some(key))
            .map(|(_, v)| v)
            .filter(|v| !v.is_null()),
        _ => None,
    }
}

/// A scalar field's text (none when absent; an error when it is a list or mapping).
fn text<'n>(r: &mut Reader, node: &'n Node, key: &str, path: &str) -> Option<&'n str> {
    let v = get(node, key)?;
    r.scalar(v, &format!("{path}.{key}"))
}

/// A mapping of strings (labels, annotations): key → (value, position of the value).
fn string_map(r: &mut Reader, node: Option<&Node>, path: &str) -> BTreeMap<String, (String, Pos)> {
    let mut out = BTreeMap::new();
    let Some(node) = node else { return out };
    let Value::Map(entries) = &node.value else {
        r.err(
            node.pos,
            path,
            format!("expected a mapping, found {}", node.kind()),
            None,
        );
        return out;
    };
    for (k, v) in entries {
        if let (Some(k), Some(t)) = (k.scalar(), v.scalar()) {
            out.insert(k.to_string(), (t.to_string(), v.pos));
        }
    }
    out
}

/// A boolean condition that may be absent (`null` in the API means "unknown").
fn opt_bool(r: &mut Reader, node: &Node, key: &str, path: &str) -> Option<bool> {
    let v = get(node, key)?;
    match v.scalar() {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => {
            r.err(
                v.pos,
                &format!("{path}.{key}"),
                format!("expected true or false, found {}", describe(v)),
                Some("true, false".into()),
            );
            None
        }
    }
}

fn describe(n: &Node) -> String {
    match n.scalar() {
        Some(t) => format!("`{t}`"),
        None => n.kind().to_string(),
    }
}

/// An integer field within `lo..=hi`.
fn int(r: &mut Reader, node: &Node, key: &str, path: &str, lo: u64, hi: u64) -> Option<u64> {
    let v = get(node, key)?;
    let t = r.scalar(v, &format!("{path}.{key}"))?;
    match t.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Some(n),
        _ => {
            r.err(
                v.pos,
                &format!("{path}.{key}"),
                format!("`{t}` is not a whole number in {lo}..={hi}"),
                Some(format!("{lo}..={hi}")),
            );
            None
        }
    }
}

/// `metadata`: namespace, name, uid, creation time, labels, annotations.
#[derive(Debug, Clone, Default)]
pub(super) struct Meta {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub created: String,
    pub labels: BTreeMap<String, (String, Pos)>,
    pub annotations: BTreeMap<String, (String, Pos)>,
}

fn meta(r: &mut Reader, obj: &Node, path: &str, namespaced: bool) -> Option<Meta> {
    let Some(m) = get(obj, "metadata") else {
        r.err(
            obj.pos,
            &format!("{path}.metadata"),
            "`metadata` is required",
            None,
        );
        return None;
    };
    let mp = format!("{path}.metadata");
    let Some(name) = text(r, m, "name", &mp) else {
        r.err(m.pos, &format!("{mp}.name"), "`name` is required", None);
        return None;
    };
    Some(Meta {
        namespace: if namespaced {
            text(r, m, "namespace", &mp)
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        },
        name: name.to_string(),
        uid: text(r, m, "uid", &mp).unwrap_or_default().to_string(),
        created: text(r, m, "creationTimestamp", &mp)
            .unwrap_or_default()
            .to_string(),
        labels: string_map(r, get(m, "labels"), &format!("{mp}.labels")),
        annotations: string_map(r, get(m, "annotations"), &format!("{mp}.annotations")),
    })
}

/// One entry of a Service's `spec.ports`.
#[derive(Debug, Clone)]
pub(super) struct ServicePort {
    /// `TCP` (default) or `UDP`.
    pub udp: bool,
    pub port: u16,
    pub pos: Pos,
}

/// What a Service says, as far as the load balancer is concerned.
#[derive(Debug, Clone)]
pub(super) struct Service {
    pub file: String,
    pub path: String,
    pub pos: Pos,
    pub meta: Meta,
    pub shape: Shape,
    /// `spec.loadBalancerClass` given but not one of GKE's: another controller's Service.
    pub foreign_class: Option<String>,
    pub policy: TrafficPolicy,
    pub health_check_node_port: Option<u16>,
    /// `spec.loadBalancerIP`.
    pub load_balancer_ip: Option<(IpAddr, Pos)>,
    /// `status.loadBalancer.ingress[].ip`.
    pub status_ips: Vec<IpAddr>,
    /// `spec.ipFamilies` (IPv4 first when both), as booleans "is IPv6".
    pub families: Vec<bool>,
    pub source_ranges: Vec<Prefix>,
    pub client_ip_affinity: bool,
    pub affinity_timeout: Option<(u64, Pos)>,
    /// `networking.gke.io/l4-strong-session-affinity: enabled`, and where.
    pub strong_affinity: Option<Pos>,
    /// `networking.gke.io/weighted-load-balancing: pods-per-node`.
    pub weighted: bool,
    /// `spec.trafficDistribution` asks for zonal affinity (`PreferClose`, ...), and where.
    pub prefer_close: Option<Pos>,
    pub ports: Vec<ServicePort>,
}

/// The annotation that asks GKE for strong session affinity on an external Service.
pub(super) const STRONG_AFFINITY: &str = "networking.gke.io/l4-strong-session-affinity";

/// The GKE load-balancer classes (GKE's "About LoadBalancer Services") and the shape each gives.
pub(super) const CLASSES: &[(&str, Shape)] = &[
    ("networking.gke.io/l4-regional-internal", Shape::Internal),
    ("networking.gke.io/l4-regional-external", Shape::External),
    (
        "networking.gke.io/l4-regional-external-legacy",
        Shape::LegacyTargetPool,
    ),
];

pub(super) fn service(r: &mut Reader, obj: &Node, path: &str) -> Option<Service> {
    let meta = meta(r, obj, path, true)?;
    let Some(spec) = get(obj, "spec") else {
        r.err(obj.pos, &format!("{path}.spec"), "`spec` is required", None);
        return None;
    };
    let sp = format!("{path}.spec");
    let kind = text(r, spec, "type", &sp).unwrap_or("ClusterIP");
    if kind != "LoadBalancer" {
        return None;
    }
    let (shape, foreign_class) = shape(r, spec, &sp, &meta, path);
    let (policy, health_check_node_port) = traffic_policy(r, spec, &sp);
    let (load_balancer_ip, status_ips, families) = addresses(r, obj, spec, &sp, path);
    let source_ranges = source_ranges(r, spec, &sp);
    let (client_ip_affinity, affinity_timeout) = session_affinity(r, spec, &sp);
    let strong_affinity = strong_affinity(r, &meta, path);
    let weighted = weighted(r, &meta, path);
    let prefer_close = prefer_close(r, spec, &sp);
    let ports = ports(r, spec, &sp);
    Some(Service {
        file: r.file.to_string(),
        path: path.to_string(),
        pos: obj.pos,
        meta,
        shape,
        foreign_class,
        policy,
        health_check_node_port,
        load_balancer_ip,
        status_ips,
        families,
        source_ranges,
        client_ip_affinity,
        affinity_timeout,
        strong_affinity,
        weighted,
        prefer_close,
        ports,
    })
}

/// A Service's shape: the class first (immutable, the recommended way), then the
/// annotations; and the class when it is another controller's.
fn shape(
    r: &mut Reader,
    spec: &Node,
    sp: &str,
    meta: &Meta,
    path: &str,
) -> (Shape, Option<String>) {
    let mut shape = Shape::External;
    let mut foreign_class = None;
    if let Some(class) = text(r, spec, "loadBalancerClass", sp) {
        match CLASSES.iter().find(|(c, _)| *c == class) {
            Some((_, s)) => shape = *s,
            None => foreign_class = Some(class.to_string()),
        }
    } else if let Some((t, pos)) = meta.annotations.get("networking.gke.io/load-balancer-type") {
        if t == "Internal" {
            shape = Shape::Internal;
        } else if t != "External" {
            r.err(
                *pos,
                &format!("{path}.metadata.annotations.networking.gke.io/load-balancer-type"),
                format!("`{t}` is not a load-balancer type"),
                Some("Internal (or External, the default)".into()),
            );
        }
    }
    (shape, foreign_class)
}

/// `externalTrafficPolicy` and the `healthCheckNodePort` a `Local` Service needs.
fn traffic_policy(r: &mut Reader, spec: &Node, sp: &str) -> (TrafficPolicy, Option<u16>) {
    let policy = match text(r, spec, "externalTrafficPolicy", sp) {
        None | Some("Cluster") => TrafficPolicy::Cluster,
        Some("Local") => TrafficPolicy::Local,
        Some(other) => {
            let pos = get(spec, "externalTrafficPolicy").map_or(spec.pos, |n| n.pos);
            r.err(
                pos,
                &format!("{sp}.externalTrafficPolicy"),
                format!("`{other}` is not a traffic policy"),
                Some("Cluster, Local".into()),
            );
            TrafficPolicy::Cluster
        }
    };
    let health_check_node_port =
        int(r, spec, "healthCheckNodePort", sp, 1, 65535).map(|p| p as u16);
    if policy == TrafficPolicy::Local
        && health_check_node_port.is_none()
        && get(spec, "healthCheckNodePort").is_none()
    {
        r.err(
            spec.pos,
            &format!("{sp}.healthCheckNodePort"),
            "externalTrafficPolicy Local needs the Service's healthCheckNodePort, which the load balancer's health check probes (the API server allocates one: `kubectl get -o yaml` shows it)",
            Some("a port 1..=65535".into()),
        );
    }
    (policy, health_check_node_port)
}

/// A Service's `spec.loadBalancerIP` (and where), its `status.loadBalancer.ingress`
/// addresses, and its IP families (IPv4 first when both, as booleans "is IPv6").
fn addresses(
    r: &mut Reader,
    obj: &Node,
    spec: &Node,
    sp: &str,
    path: &str,
) -> (Option<(IpAddr, Pos)>, Vec<IpAddr>, Vec<bool>) {
    let load_balancer_ip = get(spec, "loadBalancerIP")
        .filter(|n| n.scalar() != Some(""))
        .and_then(|n| r.ip(n, &format!("{sp}.loadBalancerIP")).map(|a| (a, n.pos)));
    let mut status_ips = Vec::new();
    if let Some(ingress) = get(obj, "status")
        .and_then(|s| get(s, "loadBalancer"))
        .and_then(|l| get(l, "ingress"))
    {
        if let Value::Seq(items) = &ingress.value {
            for (i, item) in items.iter().enumerate() {
                if let Some(ip) = get(item, "ip") {
                    if let Some(a) =
                        r.ip(ip, &format!("{path}.status.loadBalancer.ingress[{i}].ip"))
                    {
                        status_ips.push(a);
                    }
                }
            }
        }
    }
    let mut families = Vec::new();
    if let Some(f) = get(spec, "ipFamilies") {
        match &f.value {
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    match item.scalar() {
                        Some("IPv4") => families.push(false),
                        Some("IPv6") => families.push(true),
                        _ => r.err(
                            item.pos,
                            &format!("{sp}.ipFamilies[{i}]"),
                            format!("{} is not an IP family", describe(item)),
                            Some("IPv4, IPv6".into()),
                        ),
                    }
                }
            }
            _ => r.err(f.pos, &format!("{sp}.ipFamilies"), "expected a list", None),
        }
    }
    if families.is_empty() {
        // The API server fills ipFamilies; a hand-written manifest without it is single-stack,
        // of the family of its loadBalancerIP when it has one.
        families.push(load_balancer_ip.is_some_and(|(a, _)| a.is_ipv6()));
    }
    families.sort_unstable();
    families.dedup();
    (load_balancer_ip, status_ips, families)
}

/// `loadBalancerSourceRanges`: the rules' allow list (SPEC R9).
fn source_ranges(r: &mut Reader, spec: &Node, sp: &str) -> Vec<Prefix> {
    let mut source_ranges = Vec::new();
    if let Some(list) = get(spec, "loadBalancerSourceRanges") {
        for (i, item) in r
            .list(Some(list), &format!("{sp}.loadBalancerSourceRanges"))
            .iter()
            .enumerate()
        {
            if let Some(p) = r.prefix(item, &format!("{sp}.loadBalancerSourceRanges[{i}]")) {
                source_ranges.push(p);
            }
        }
    }
    source_ranges
}

/// `sessionAffinity: ClientIP`, and its `timeoutSeconds` (and where).
fn session_affinity(r: &mut Reader, spec: &Node, sp: &str) -> (bool, Option<(u64, Pos)>) {
    let client_ip_affinity = match text(r, spec, "sessionAffinity", sp) {
        None | Some("None") => false,
        Some("ClientIP") => true,
        Some(other) => {
            let pos = get(spec, "sessionAffinity").map_or(spec.pos, |n| n.pos);
            r.err(
                pos,
                &format!("{sp}.sessionAffinity"),
                format!("`{other}` is not a session affinity"),
                Some("None, ClientIP".into()),
            );
            false
        }
    };
    let affinity_timeout = get(spec, "sessionAffinityConfig")
        .and_then(|c| get(c, "clientIP"))
        .and_then(|c| {
            let p = format!("{sp}.sessionAffinityConfig.clientIP");
            let pos = get(c, "timeoutSeconds").map(|n| n.pos);
            int(r, c, "timeoutSeconds", &p, 1, 86400).zip(pos)
        });
    (client_ip_affinity, affinity_timeout)
}

/// Where the strong session affinity annotation enables it.
fn strong_affinity(r: &mut Reader, meta: &Meta, path: &str) -> Option<Pos> {
    let (v, pos) = meta.annotations.get(STRONG_AFFINITY)?;
    if v == "enabled" {
        return Some(*pos);
    }
    r.err(
        *pos,
        &format!("{path}.metadata.annotations.{STRONG_AFFINITY}"),
        format!("`{v}` does not enable strong session affinity"),
        Some("enabled".into()),
    );
    None
}

/// Whether the weighted-load-balancing annotation asks for `pods-per-node`.
fn weighted(r: &mut Reader, meta: &Meta, path: &str) -> bool {
    let Some((v, pos)) = meta
        .annotations
        .get("networking.gke.io/weighted-load-balancing")
    else {
        return false;
    };
    if v == "pods-per-node" {
        return true;
    }
    r.err(
        *pos,
        &format!("{path}.metadata.annotations.networking.gke.io/weighted-load-balancing"),
        format!("`{v}` is not a weighting"),
        Some("pods-per-node".into()),
    );
    false
}

/// Where `spec.trafficDistribution` asks for zonal affinity.
fn prefer_close(r: &mut Reader, spec: &Node, sp: &str) -> Option<Pos> {
    match text(r, spec, "trafficDistribution", sp) {
        None => None,
        // PreferSameZone is PreferClose's newer, explicit name (Kubernetes 1.34); the load
        // balancer knows no nodes closer than a zone, so PreferSameNode is zonal here too.
        Some("PreferClose" | "PreferSameZone" | "PreferSameNode") => {
            get(spec, "trafficDistribution").map(|n| n.pos)
        }
        Some(other) => {
            let pos = get(spec, "trafficDistribution").map_or(spec.pos, |n| n.pos);
            r.err(
                pos,
                &format!("{sp}.trafficDistribution"),
                format!("`{other}` is not a traffic distribution the load balancer follows"),
                Some("PreferClose, PreferSameZone, PreferSameNode (GKE's zonal affinity)".into()),
            );
            None
        }
    }
}

/// `spec.ports`: TCP and UDP ports, at least one.
fn ports(r: &mut Reader, spec: &Node, sp: &str) -> Vec<ServicePort> {
    let mut ports = Vec::new();
    let port_list = r.list(get(spec, "ports"), &format!("{sp}.ports"));
    if port_list.is_empty() {
        r.err(
            spec.pos,
            &format!("{sp}.ports"),
            "a LoadBalancer Service needs at least one port",
            None,
        );
    }
    for (i, p) in port_list.iter().enumerate() {
        let pp = format!("{sp}.ports[{i}]");
        let udp = match text(r, p, "protocol", &pp) {
            None | Some("TCP") => false,
            Some("UDP") => true,
            Some(other) => {
                let pos = get(p, "protocol").map_or(p.pos, |n| n.pos);
                r.err(
                    pos,
                    &format!("{pp}.protocol"),
                    format!("`{other}` is not supported: the NIC balances TCP and UDP ports (SPEC R8.2)"),
                    Some("TCP, UDP".into()),
                );
                continue;
            }
        };
        match int(r, p, "port", &pp, 1, 65535) {
            Some(port) => ports.push(ServicePort {
                udp,
                port: port as u16,
                pos: get(p, "port").map_or(p.pos, |n| n.pos),
            }),
            None if get(p, "port").is_none() => {
                r.err(p.pos, &format!("{pp}.port"), "`port` is required", None)
            }
            None => {}
        }
    }
    ports
}

/// A Node, as far as the load balancer is concerned.
#[derive(Debug, Clone)]
pub(super) struct NodeInfo {
    pub file: String,
    pub pos: Pos,
    pub name: String,
    pub ready: bool,
    pub zone: String,
    pub ipv4: Option<IpAddr>,
    pub ipv6: Option<IpAddr>,
    /// Labelled `node.kubernetes.io/exclude-from-external-load-balancers`.
    pub excluded: bool,
}

pub(super) const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

pub(super) fn node(r: &mut Reader, obj: &Node, path: &str) -> Option<NodeInfo> {
    let meta = meta(r, obj, path, false)?;
    let status = get(obj, "status");
    let mut ready = false;
    let mut ipv4 = None;
    let mut ipv6 = None;
    if let Some(status) = status {
        if let Some(Value::Seq(conds)) = get(status, "conditions").map(|c| &c.value) {
            ready = conds.iter().any(|c| {
                get(c, "type").and_then(Node::scalar) == Some("Ready")
                    && get(c, "status").and_then(Node::scalar) == Some("True")
            });
        }
        if let Some(Value::Seq(addrs)) = get(status, "addresses").map(|a| &a.value) {
            for (i, a) in addrs.iter().enumerate() {
                if get(a, "type").and_then(Node::scalar) != Some("InternalIP") {
                    continue;
                }
                let Some(n) = get(a, "address") else { continue };
                if let Some(ip) = r.ip(n, &format!("{path}.status.addresses[{i}].address")) {
                    let slot = if ip.is_ipv6() { &mut ipv6 } else { &mut ipv4 };
                    slot.get_or_insert(ip);
                }
            }
        }
    }
    let zone = meta
        .labels
        .get("topology.kubernetes.io/zone")
        .or_else(|| meta.labels.get("failure-domain.beta.kubernetes.io/zone"))
        .map(|(z, _)| z.clone())
        .unwrap_or_default();
    Some(NodeInfo {
        file: r.file.to_string(),
        pos: obj.pos,
        excluded: meta.labels.contains_key(EXCLUDE_LABEL),
        name: meta.name,
        ready,
        zone,
        ipv4,
        ipv6,
    })
}

/// One endpoint of an EndpointSlice.
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    pub node: String,
    /// `conditions.ready` (absent: unknown, taken as ready, as the API says).
    pub ready: bool,
    /// `conditions.serving` (absent: as `ready`).
    pub serving: bool,
    pub terminating: bool,
}

/// An EndpointSlice: the Service it belongs to and its endpoints.
#[derive(Debug, Clone)]
pub(super) struct Slice {
    pub namespace: String,
    pub service: String,
    pub endpoints: Vec<Endpoint>,
    /// Endpoints without `nodeName` (they count for no node).
    pub without_node: usize,
}

pub(super) fn endpoint_slice(r: &mut Reader, obj: &Node, path: &str, api: &str) -> Option<Slice> {
    if api != "discovery.k8s.io/v1" {
        let pos = get(obj, "apiVersion").map_or(obj.pos, |n| n.pos);
        r.err(
            pos,
            &format!("{path}.apiVersion"),
            format!("EndpointSlice `{api}` is not supported (v1beta1 has no `nodeName` and `zone` fields of its own)"),
            Some("discovery.k8s.io/v1".into()),
        );
        return None;
    }
    let meta = meta(r, obj, path, true)?;
    let Some((service, _)) = meta.labels.get("kubernetes.io/service-name").cloned() else {
        // A slice of no Service (managed by something else) concerns no load balancer.
        return None;
    };
    let mut endpoints = Vec::new();
    let mut without_node = 0;
    let list = r.list(get(obj, "endpoints"), &format!("{path}.endpoints"));
    for (i, e) in list.iter().enumerate() {
        let ep = format!("{path}.endpoints[{i}]");
        let cp = format!("{ep}.conditions");
        let (ready, serving, terminating) = match get(e, "conditions") {
            Some(c) => {
                let ready = opt_bool(r, c, "ready", &cp);
                let serving = opt_bool(r, c, "serving", &cp);
                let terminating = opt_bool(r, c, "terminating", &cp).unwrap_or(false);
                // The API: a nil `ready` is unknown, to be read as ready; `serving` as `ready`.
                let ready = ready.unwrap_or(true);
                (ready, serving.unwrap_or(ready), terminating)
            }
            None => (true, true, false),
        };
        match text(r, e, "nodeName", &ep) {
            Some(node) => endpoints.push(Endpoint {
                node: node.to_string(),
                ready,
                serving,
                terminating,
            }),
            None => without_node += 1,
        }
    }
    Some(Slice {
        namespace: meta.namespace,
        service,
        endpoints,
        without_node,
    })
}
