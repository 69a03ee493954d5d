//! Kubernetes LoadBalancer Services (SPEC R7) as backend services and target pools.
//!
//! Services, EndpointSlices and Nodes (manifests: `kubectl get -o yaml|json` output, `kind:
//! List`, several YAML documents, several files) become objects of the ordinary model, the
//! way GKE turns them into Google Cloud load balancers, and then compile like any
//! configuration: nothing here decides a backend, a share or a health state.
//!
//! | Service | here |
//! |---|---|
//! | internal (`networking.gke.io/l4-regional-internal`, or the annotation `networking.gke.io/load-balancer-type: Internal`) | a backend service of zonal `GCE_VM_IP` NEGs of the Service's nodes |
//! | external (the default, `networking.gke.io/l4-regional-external`, `cloud.google.com/l4-rbs: enabled`) | the same |
//! | legacy (`networking.gke.io/l4-regional-external-legacy`) | a target pool of every node |
//! | `externalTrafficPolicy: Cluster` | every eligible node, a stable subset of at most 25 (internal) / 250 (external) divided over the zones smallest first, by rendezvous hashing on the Service's UID in each; shared HTTP check `/healthz` on 10256, 8 s / 1 s / 1 / 3 |
//! | `externalTrafficPolicy: Local` | only nodes with a serving endpoint (at most 250 internal / 3000 external, divided likewise); HTTP check on `healthCheckNodePort`, 3 s / 1 s / 1 / 2 (the legacy target pool: 8 s / 1 s / 1 / 3) |
//! | no service LB policy | every Kubernetes backend service is passthrough: new connections over the healthy nodes alike (SPEC R6, R7.1) |
//! | `networking.gke.io/weighted-load-balancing: pods-per-node` | `WEIGHTED_MAGLEV` (external backend service with `Local` only; otherwise a note) |
//! | `trafficDistribution: PreferClose` on an internal Service | zonal affinity (spill ratio 0, SPEC R7.4): the NIC's zone alone while it has a healthy node |
//! | `sessionAffinity: ClientIP` | `CLIENT_IP`; `timeoutSeconds` is kube-proxy's: the idle timeout stays 60 s external / 600 s internal, unless `networking.gke.io/l4-strong-session-affinity: enabled` (external) makes it the idle timeout |
//! | `loadBalancerSourceRanges` | the rules' `sourceRanges` (SPEC R9) |
//! | each IP family of `ipFamilies` | a VIP, rules and a backend service of that family |
//!
//! Eligible nodes are not labelled `node.kubernetes.io/exclude-from-external-load-balancers`
//! (SPEC R7.6) and have an InternalIP of the family; a NotReady node stays a backend of the NEG
//! shapes (only its health check takes it out), while the legacy target pool holds Ready
//! nodes only. docs/kubernetes.md has the whole mapping.

mod read;

use crate::diag::{Diagnostics, Pos};
use crate::gcp::Reader;
use crate::model::*;
pub use crate::model::{
    KubeService, NodeEligibility, NodeVerdict, ServedSlice, Shape, TrafficPolicy,
};
use crate::policy::Preference;
use crate::tree::{Node, Value};
use nlb_hw::enums::{Affinity, Delivery};
use read::get;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

/// Node limit of a Service's NEG endpoints (GKE's subsetting, SPEC R7.5); `None`: no limit (target
/// pools hold every node).
pub fn node_limit(shape: Shape, policy: TrafficPolicy) -> Option<usize> {
    match (shape, policy) {
        (Shape::Internal, TrafficPolicy::Cluster) => Some(25),
        (Shape::External, TrafficPolicy::Cluster) => Some(250),
        (Shape::Internal, TrafficPolicy::Local) => Some(250),
        (Shape::External, TrafficPolicy::Local) => Some(3000),
        (Shape::LegacyTargetPool, _) => None,
    }
}

/// kube-proxy's health port, which the shared `Cluster` check probes (GKE: fixed, TCP
/// port 10256, not customisable).
pub const KUBE_PROXY_HEALTH_PORT: u16 = 10256;
/// The `Cluster` check: interval, timeout, healthy and unhealthy thresholds (SPEC R7.6).
pub const CLUSTER_CHECK: [u32; 4] = [8, 1, 1, 3];
/// The per-Service `Local` check of the NEG-based load balancers (SPEC R7.6).
pub const LOCAL_CHECK: [u32; 4] = [3, 1, 1, 2];
/// The legacy target pool's check, `Cluster` and `Local` alike: cloud-provider-gcp's
/// `gceHcCheckIntervalSeconds` 8, `gceHcTimeoutSeconds` 1, `gceHcHealthyThreshold` 1,
/// `gceHcUnhealthyThreshold` 3 (SPEC R7.6).
pub const TARGET_POOL_CHECK: [u32; 4] = [8, 1, 1, 3];
/// Name of the shared `Cluster` health check.
pub const SHARED_CHECK: &str = "k8s-l4-shared-hc";
/// Connection idle timeouts of Google Cloud's passthrough load balancers, which GKE leaves
/// alone unless a Service asks for strong session affinity: 60 s for the external one (SPEC
/// R4.1), 600 s for the internal one (SPEC R7.6).
const IDLE_EXTERNAL: u16 = 60;
const IDLE_INTERNAL: u16 = 600;
/// The idle timeouts strong session affinity allows (kubernetes/ingress-gce:
/// `minStrongSessionAffinityIdleTimeout` 60 s, `maxSessionAffinityIdleTimeout` 16 h).
const STRONG_AFFINITY_IDLE: std::ops::RangeInclusive<u64> = 60..=57_600;

/// One input: a file's name (as the user gave it) and its text.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name used in messages (`-` for standard input).
    pub name: String,
    /// The text.
    pub text: String,
}

/// Whether a parsed document is a Kubernetes object (it has `apiVersion`).
pub(crate) fn is_manifest(doc: &Node) -> bool {
    get(doc, "apiVersion").is_some()
}

// `explain`'s view of each node: the model's verdicts of a Service joined with the health
// state and the compiled tables, which the model does not know.
impl KubeService {
    /// Every node of the cluster for the Service's pool `pool`, eligible for a new connection
    /// or not, and why: membership (SPEC R7.1, R7.5, R7.6), then health (`health`, the probes'
    /// word) and the EndpointSlices' ready endpoints (SPEC R10.5), then weights (SPEC R7.3),
    /// as the compiled tables hold them (`served`: the pool's members and the slots of the slice
    /// that serves, which the table compiler reads off its tables).
    pub fn eligibility(
        &self,
        served: &ServedSlice<'_>,
        pool: &str,
        health: &crate::HealthState,
    ) -> Vec<NodeEligibility> {
        let (members, slots, total) = (&served.members, &served.slots, served.total);
        let ready = |backend: &str| {
            self.ready_endpoints
                .iter()
                .find(|(p, b, _)| p == pool && b == backend)
                .map(|e| e.2)
        };
        let member_backends: Vec<&str> = members.iter().copied().collect();
        let none_ready =
            !member_backends.is_empty() && member_backends.iter().all(|b| ready(b) == Some(0));
        self.nodes()
            .iter()
            .map(|n| {
                let v6 = format!("{}.ipv6", n.node);
                let backend = [&*n.node, v6.as_str()]
                    .into_iter()
                    .find(|b| members.contains(b))
                    .map(str::to_string);
                let got = backend.as_deref().and_then(|b| slots.get(b)).copied().unwrap_or(0);
                let share = if total == 0 { 0.0 } else { got as f64 / total as f64 };
                let why = match &backend {
                    None if n.member => format!(
                        "{}; but no InternalIP of this pool's IP family",
                        n.why
                    ),
                    None => n.why.to_string(),
                    Some(_) if got > 0 && none_ready => format!(
                        "{}; no node has a ready endpoint, so every member takes new connections (fail open, SPEC R3.4) and kube-proxy sends them to terminating pods (SPEC R7.2)",
                        n.why
                    ),
                    Some(_) if got > 0 => format!(
                        "{}; {:.1} % of new connections{}",
                        n.why,
                        100.0 * share,
                        match (self.zonal_affinity, *n.zone == *self.client_zone) {
                            (false, _) => String::new(),
                            (true, true) => format!(" (zonal affinity: in the NIC's zone {}, SPEC R7.4)", self.client_zone),
                            (true, false) => format!(" (zonal affinity: the NIC's zone {} has no healthy eligible node, so every zone serves, SPEC R7.4)", self.client_zone),
                        }
                    ),
                    Some(b) => {
                        let probe = health.get(pool, b);
                        if ready(b) == Some(0) {
                            format!("{}; no ready, non-terminating endpoint: out of new-connection choice now, without waiting for health checks (SPEC R10.5); its established connections continue", n.why)
                        } else if !probe.healthy {
                            format!("{}; fails its health check {}: no new connections (SPEC R5.2)", n.why, self.health_check.split(':').next().unwrap_or_default())
                        } else if probe.weight == Some(0) {
                            format!("{}; its probe reports weight 0: no new connections (SPEC R5.4)", n.why)
                        } else if self.zonal_affinity && *n.zone != *self.client_zone {
                            format!("{}; zonal affinity: the NIC's zone {} has a healthy eligible node, so only that zone's nodes take new connections (SPEC R7.4)", n.why, self.client_zone)
                        } else {
                            format!("{}; the pool's policy gives it no share now", n.why)
                        }
                    }
                };
                NodeEligibility {
                    node: n.node.to_string(),
                    zone: n.zone.to_string(),
                    member: backend.is_some(),
                    backend,
                    eligible: got > 0,
                    share,
                    endpoints: n.endpoints,
                    why,
                }
            })
            .collect()
    }
}

/// Rendezvous (highest random weight) score of `node` for the Service `key` (its UID): the
/// subset of a Service is its nodes of the highest scores, so a node that comes or goes moves
/// at most one member of every subset (SPEC R7.5: stable subsets).
pub fn rendezvous_score(key: &str, node: &str) -> u64 {
    rendezvous_finish(rendezvous_key(key), node)
}

/// FNV-1a over `bytes` from state `h`.
fn fnv(mut h: u64, bytes: impl IntoIterator<Item = u8>) -> u64 {
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The hash state after a Service's key and the separator: shared by the scores of all nodes.
fn rendezvous_key(key: &str) -> u64 {
    fnv(0xcbf2_9ce4_8422_2325, key.bytes().chain([0u8]))
}

/// [`rendezvous_score`] from the state [`rendezvous_key`] gave.
fn rendezvous_finish(keyed: u64, node: &str) -> u64 {
    let mut h = fnv(keyed, node.bytes());
    // splitmix64 finaliser: FNV alone mixes the last bytes poorly.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The `limit` nodes of the highest rendezvous scores for `key`, in name order.
pub fn rendezvous_subset(key: &str, nodes: &[String], limit: usize) -> Vec<String> {
    let mut scored: Vec<(u64, &String)> = nodes
        .iter()
        .map(|n| (rendezvous_score(key, n), n))
        .collect();
    let order = |a: &(u64, &String), b: &(u64, &String)| b.0.cmp(&a.0).then(a.1.cmp(b.1));
    if limit < scored.len() {
        scored.select_nth_unstable_by(limit, order);
        scored.truncate(limit);
    }
    let mut out: Vec<String> = scored.into_iter().map(|(_, n)| n.clone()).collect();
    out.sort();
    out
}

/// Ports of a Service on an address and protocol: the ports, the Service's path, its file and
/// position (for overlap errors, SPEC R2.2).
type TakenPorts = (PortRange, String, String, Pos);

/// [`rendezvous_subset`] over `nodes[candidates]`: the indexes of the `limit` highest scores.
fn rendezvous_top(
    key: &str,
    nodes: &[read::NodeInfo],
    candidates: &[usize],
    limit: usize,
) -> Vec<usize> {
    let keyed = rendezvous_key(key);
    let mut scored: Vec<(u64, usize)> = candidates
        .iter()
        .map(|&i| (rendezvous_finish(keyed, &nodes[i].name), i))
        .collect();
    let order = |a: &(u64, usize), b: &(u64, usize)| {
        b.0.cmp(&a.0)
            .then_with(|| nodes[a.1].name.cmp(&nodes[b.1].name))
    };
    if limit < scored.len() {
        scored.select_nth_unstable_by(limit, order);
        scored.truncate(limit);
    }
    scored.into_iter().map(|(_, i)| i).collect()
}

/// GKE's subset of `limit` of `candidates` (kubernetes/ingress-gce's per-zone subsetting,
/// SPEC R7.5): the zones in order of their candidate count, smallest first (ties by name),
/// each take `limit left / zones left` (integer division), as many as they have if fewer, by
/// rendezvous hashing on `key` within the zone; what a small zone does not take goes to the
/// larger ones after it. So no zone with candidates is left out while the limit has room for
/// one node per zone, and a node that comes or goes moves few members.
fn subset_per_zone(
    key: &str,
    nodes: &[read::NodeInfo],
    candidates: &[usize],
    limit: usize,
) -> Vec<usize> {
    let mut by_zone: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in candidates {
        by_zone.entry(nodes[i].zone.as_str()).or_default().push(i);
    }
    let mut zones: Vec<(&str, Vec<usize>)> = by_zone.into_iter().collect();
    // Stable: equal counts stay in zone-name order.
    zones.sort_by_key(|(_, members)| members.len());
    let mut left = limit;
    let mut out = Vec::with_capacity(limit);
    let count = zones.len();
    for (k, (_, members)) in zones.iter().enumerate() {
        let size = left / (count - k);
        let picked = if members.len() <= size {
            members.clone()
        } else {
            rendezvous_top(key, nodes, members, size)
        };
        left -= picked.len();
        out.extend(picked);
    }
    out
}

/// The project document's `kubernetes` section.
#[derive(Debug, Clone, Default)]
struct Project {
    pools: Vec<Prefix>,
    delivery: Option<Delivery>,
    macs: BTreeMap<String, u64>,
    /// `kubernetes.endpointSliceTracking: false`: `Local` Services behave as on GKE,
    /// every eligible node a backend and only the health check taking one out.
    untracked: bool,
}

/// Everything read from the inputs.
#[derive(Default)]
struct Inputs {
    services: Vec<read::Service>,
    nodes: Vec<read::NodeInfo>,
    slices: Vec<read::Slice>,
    nic: Option<Nic>,
    project: Project,
    ignored: BTreeMap<String, usize>,
}

/// Reads Kubernetes manifests (and an optional project document of our own: `nic` and
/// `kubernetes` sections) into one configuration. Every problem is reported with its file,
/// line and field; the configuration is valid only when there is none.
pub(crate) fn parse(sources: &[(String, Vec<Node>)]) -> (Config, Diagnostics) {
    let mut inputs = Inputs::default();
    let mut diags = Diagnostics::new();
    for (file, docs) in sources {
        let mut r = Reader::new(file);
        for doc in docs {
            document(&mut r, doc, &mut inputs);
        }
        diags.extend(r.diags);
    }
    let file = match sources {
        [(one, _)] => one.clone(),
        _ => sources.first().map(|(f, _)| f.clone()).unwrap_or_default(),
    };
    let config = map(&inputs, &file, &mut diags);
    diags.sort();
    (config, diags)
}

fn document(r: &mut Reader, doc: &Node, inputs: &mut Inputs) {
    if doc.is_null() {
        return;
    }
    if !is_manifest(doc) {
        project(r, doc, inputs);
        return;
    }
    object(r, doc, "", inputs);
}

fn object(r: &mut Reader, obj: &Node, at: &str, inputs: &mut Inputs) {
    let api = get(obj, "apiVersion").and_then(Node::scalar).unwrap_or("");
    let Some(kind) = get(obj, "kind").and_then(Node::scalar) else {
        r.err(obj.pos, &join(at, "kind"), "`kind` is required", None);
        return;
    };
    let name = get(obj, "metadata")
        .and_then(|m| get(m, "name"))
        .and_then(Node::scalar)
        .unwrap_or("");
    let path = if at.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{at}({kind}/{name})")
    };
    match kind {
        "List" | "ServiceList" | "NodeList" | "EndpointSliceList" => {
            let Some(items) = get(obj, "items") else {
                return;
            };
            let Value::Seq(items) = &items.value else {
                r.err(items.pos, &join(at, "items"), "expected a list", None);
                return;
            };
            for (i, item) in items.iter().enumerate() {
                object(
                    r,
                    item,
                    &format!(
                        "{}items[{i}]",
                        if at.is_empty() {
                            String::new()
                        } else {
                            format!("{at}.")
                        }
                    ),
                    inputs,
                );
            }
        }
        "Service" if api == "v1" => {
            if let Some(s) = read::service(r, obj, &path) {
                inputs.services.push(s);
            }
        }
        "Node" if api == "v1" => {
            if let Some(n) = read::node(r, obj, &path) {
                inputs.nodes.push(n);
            }
        }
        "EndpointSlice" => {
            if let Some(s) = read::endpoint_slice(r, obj, &path, api) {
                inputs.slices.push(s);
            }
        }
        "Service" | "Node" => {
            let pos = get(obj, "apiVersion").map_or(obj.pos, |n| n.pos);
            r.err(
                pos,
                &join(&path, "apiVersion"),
                format!("`{api}` is not the API of a {kind}"),
                Some("v1".into()),
            );
        }
        other => *inputs.ignored.entry(other.to_string()).or_default() += 1,
    }
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}.{b}")
    }
}

/// The project document: `nic` (as in any configuration) and `kubernetes`.
fn project(r: &mut Reader, doc: &Node, inputs: &mut Inputs) {
    let Some(o) = r.object(doc, "", &["nic", "kubernetes"], &[]) else {
        return;
    };
    if let Some(n) = o.get("nic") {
        if inputs.nic.is_some() {
            r.err(
                n.pos,
                "nic",
                "`nic` is given twice",
                Some("one `nic` section".into()),
            );
        } else {
            inputs.nic = Some(crate::gcp::read_nic(r, Some(n)));
        }
    }
    let Some(k) = o.get("kubernetes") else { return };
    let Some(k) = r.object(
        k,
        "kubernetes",
        &[
            "addressPools",
            "delivery",
            "endpointSliceTracking",
            "nodeMacs",
        ],
        &[],
    ) else {
        return;
    };
    for (i, item) in r
        .list(k.get("addressPools"), "kubernetes.addressPools")
        .iter()
        .enumerate()
    {
        if let Some(p) = r.prefix(item, &format!("kubernetes.addressPools[{i}]")) {
            inputs.project.pools.push(p);
        }
    }
    inputs.project.delivery = Some(r.enumerated(
        &k,
        "delivery",
        Delivery::Ipip,
        &[
            ("L2_DSR", Delivery::L2Dsr),
            ("IPIP", Delivery::Ipip),
            ("GUE", Delivery::Gue),
        ],
        &[],
    ));
    inputs.project.untracked = !crate::gcp::services::boolean(r, &k, "endpointSliceTracking", true);
    if let Some(m) = k.get("nodeMacs") {
        match &m.value {
            Value::Map(entries) => {
                for (key, v) in entries {
                    let Some(node) = key.scalar() else { continue };
                    if let Some(mac) = r.mac(v, &format!("kubernetes.nodeMacs.{node}")) {
                        inputs.project.macs.insert(node.to_string(), mac);
                    }
                }
            }
            _ => r.err(
                m.pos,
                "kubernetes.nodeMacs",
                "expected a mapping of node name to MAC",
                None,
            ),
        }
    }
}

/// A name of the model from a Service: `k8s-NAMESPACE-NAME`, shortened with a hash of the
/// whole when long, so every derived name (with `-v6`, `-hc`, `-udp`, a zone) stays a valid
/// resource name of at most 63 characters.
fn base_name(namespace: &str, name: &str) -> String {
    let full = format!("k8s-{namespace}-{name}");
    if full.len() <= 36 {
        return full;
    }
    let hash = rendezvous_score("name", &full) as u32;
    let head: String = full.chars().take(27).collect();
    format!("{}-{hash:08x}", head.trim_end_matches('-'))
}

/// A zone as part of a resource name.
fn zone_part(zone: &str) -> String {
    if zone.is_empty() {
        return "nozone".into();
    }
    let s: String = zone
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(20)
        .collect();
    s.trim_matches('-').to_string()
}

/// The backend named after node `node` for one family: the node's name, and for the IPv6
/// address of a node that also has an IPv4 one, `NODE.ipv6`.
fn backend_name(node: &read::NodeInfo, v6: bool) -> String {
    if v6 && node.ipv4.is_some() {
        format!("{}.ipv6", node.name)
    } else {
        node.name.clone()
    }
}

/// Merges sorted single ports into ranges; more than five ports become one range from the
/// lowest to the highest (a forwarding rule holds at most five `ports`).
fn port_ranges(ports: &BTreeSet<u16>) -> (Vec<PortRange>, bool) {
    if ports.len() > 5 {
        let lo = ports.iter().next().copied().unwrap_or(0);
        let hi = ports.iter().next_back().copied().unwrap_or(0);
        return (vec![PortRange { lo, hi }], true);
    }
    let mut out: Vec<PortRange> = Vec::new();
    for &p in ports {
        match out.last_mut() {
            Some(r) if u32::from(r.hi) + 1 == u32::from(p) => r.hi = p,
            _ => out.push(PortRange { lo: p, hi: p }),
        }
    }
    (out, false)
}

/// Address `index` of the pools of one family (each pool's usable addresses in turn: IPv4
/// pools of /30 and wider leave out their network and broadcast addresses); the count of
/// addresses, at most 65536 per pool.
fn pool_addresses(pools: &[&Prefix]) -> Vec<(u128, u64, bool)> {
    pools
        .iter()
        .map(|p| {
            let v4 = p.addr.is_ipv4();
            let bits = if v4 {
                32 - u32::from(p.len)
            } else {
                128 - u32::from(p.len)
            };
            let size: u64 = if bits >= 16 { 65536 } else { 1u64 << bits };
            let base = match p.addr {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            if v4 && bits >= 2 {
                // Skip the network address; the broadcast one is past the 65536 cap or cut.
                let usable = if bits >= 16 { size } else { size - 2 };
                (base + 1, usable, v4)
            } else {
                (base, size, v4)
            }
        })
        .collect()
}

fn address_at(pools: &[(u128, u64, bool)], mut index: u64) -> Option<IpAddr> {
    for &(base, count, v4) in pools {
        if index < count {
            let a = base + u128::from(index);
            return Some(if v4 {
                IpAddr::V4(std::net::Ipv4Addr::from(a as u32))
            } else {
                IpAddr::V6(std::net::Ipv6Addr::from(a))
            });
        }
        index -= count;
    }
    None
}

/// Per Service and family, its VIP: `spec.loadBalancerIP`, else the address its
/// `status.loadBalancer.ingress` already holds, else one of the configured pool: the Service
/// takes the first free address from a start its `namespace/name` hashes to, Services in
/// order of creation (so adding a Service never moves an older one's address).
fn assign_vips(
    inputs: &Inputs,
    order: &[usize],
    diags: &mut Diagnostics,
) -> BTreeMap<(usize, bool), IpAddr> {
    let mut out = BTreeMap::new();
    let mut used: BTreeSet<IpAddr> = BTreeSet::new();
    // Explicit and existing addresses first: the pool never hands them out.
    for &i in order {
        let s = &inputs.services[i];
        for &v6 in &s.families {
            let fixed = s
                .load_balancer_ip
                .map(|(a, _)| a)
                .filter(|a| a.is_ipv6() == v6)
                .or_else(|| s.status_ips.iter().copied().find(|a| a.is_ipv6() == v6));
            if let Some(a) = fixed {
                out.insert((i, v6), a);
                used.insert(a);
            }
        }
    }
    for &i in order {
        let s = &inputs.services[i];
        for &v6 in &s.families {
            if out.contains_key(&(i, v6)) {
                continue;
            }
            let fam: Vec<&Prefix> = inputs
                .project
                .pools
                .iter()
                .filter(|p| p.addr.is_ipv6() == v6)
                .collect();
            let pools = pool_addresses(&fam);
            let total: u64 = pools.iter().map(|p| p.1).sum();
            let family = if v6 { "IPv6" } else { "IPv4" };
            let found = (total > 0)
                .then(|| {
                    let start =
                        rendezvous_score("vip", &format!("{}/{}", s.meta.namespace, s.meta.name))
                            % total;
                    (0..total)
                        .filter_map(|k| address_at(&pools, (start + k) % total))
                        .find(|a| !used.contains(a))
                })
                .flatten();
            match found {
                Some(a) => {
                    used.insert(a);
                    out.insert((i, v6), a);
                }
                None => diags.push(
                    &s.file,
                    s.pos,
                    format!("{}.spec.loadBalancerIP", s.path),
                    if total == 0 {
                        format!("no {family} address for the Service: it has no loadBalancerIP of that family, no status.loadBalancer.ingress address, and no {family} `kubernetes.addressPools` is configured")
                    } else {
                        format!("no {family} address left for the Service: the {total} addresses of `kubernetes.addressPools` are taken")
                    },
                    Some(format!("spec.loadBalancerIP, or an {family} CIDR in `kubernetes.addressPools` of the project document (docs/kubernetes.md)")),
                ),
            }
        }
    }
    out
}

/// The idle timeout strong session affinity sets on an external Service (`annotation` where
/// it is asked for): its ClientIP `timeoutSeconds`, which GKE requires, in 60..=57600
/// (kubernetes/ingress-gce refuses the Service otherwise; here an error at the field).
fn strong_affinity_idle(
    s: &read::Service,
    annotation: Pos,
    diags: &mut Diagnostics,
) -> Option<u16> {
    let field = format!("{}.metadata.annotations.{}", s.path, read::STRONG_AFFINITY);
    let valid = || {
        Some(format!(
            "sessionAffinity: ClientIP with sessionAffinityConfig.clientIP.timeoutSeconds in {}..={}",
            STRONG_AFFINITY_IDLE.start(),
            STRONG_AFFINITY_IDLE.end()
        ))
    };
    if !s.client_ip_affinity {
        diags.push(
            &s.file,
            annotation,
            field,
            "strong session affinity needs `sessionAffinity: ClientIP`",
            valid(),
        );
        return None;
    }
    let Some((t, pos)) = s.affinity_timeout else {
        diags.push(
            &s.file,
            annotation,
            field,
            "strong session affinity needs `sessionAffinityConfig.clientIP.timeoutSeconds`: it becomes the connection idle timeout",
            valid(),
        );
        return None;
    };
    if !STRONG_AFFINITY_IDLE.contains(&t) {
        diags.push(
            &s.file,
            pos,
            format!(
                "{}.spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                s.path
            ),
            format!("{t} s is not an idle timeout strong session affinity allows"),
            Some(format!(
                "{}..={}",
                STRONG_AFFINITY_IDLE.start(),
                STRONG_AFFINITY_IDLE.end()
            )),
        );
        return None;
    }
    u16::try_from(t).ok()
}

/// Endpoint counts of a Service per node, from its EndpointSlices: ready (and not
/// terminating), serving, terminating.
fn endpoint_counts(slices: &[&read::Slice]) -> BTreeMap<String, [usize; 3]> {
    let mut counts: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for slice in slices {
        for e in &slice.endpoints {
            let c = counts.entry(e.node.clone()).or_default();
            if e.ready && !e.terminating {
                c[0] += 1;
            }
            if e.serving {
                c[1] += 1;
            }
            if e.terminating {
                c[2] += 1;
            }
        }
    }
    counts
}

/// The configuration Kubernetes objects become: the NIC's stand-ins, then each Service in
/// name order ([`map_service`]), then what the Services share (the `Cluster` checks, the
/// nodes' instances).
fn map(inputs: &Inputs, file: &str, diags: &mut Diagnostics) -> Config {
    let mut c = Config {
        file: file.to_string(),
        nic: inputs.nic.clone().unwrap_or_default(),
        ..Config::default()
    };
    let delivery = inputs.project.delivery.unwrap_or(Delivery::Ipip);
    let mut notes: Vec<String> = Vec::new();
    nic_stand_ins(&mut c.nic, delivery, &mut notes);
    report_duplicates(inputs, diags);
    let order = creation_order(inputs, &mut notes);
    let cluster = ClusterView::new(inputs, delivery, assign_vips(inputs, &order, diags));
    let mut gathered = Gathered::default();
    for si in name_order(inputs, &order) {
        let k = map_service(&cluster, si, &mut c, &mut gathered, diags);
        for n in &k.notes {
            notes.push(format!("Service {}: {n}", k.service));
        }
        c.kubernetes.push(k);
    }
    add_shared_checks(&mut c, gathered.need_shared);
    add_instances(&cluster, &gathered.used_instances, &mut c, diags);
    if !inputs.ignored.is_empty() {
        let kinds: Vec<String> = inputs
            .ignored
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        notes.push(format!(
            "ignored (no load balancer reads them): {}",
            kinds.join(", ")
        ));
    }
    c.notes = notes;
    c
}

/// Nodes are reached at their InternalIP, encapsulated: the NIC needs a next hop and an outer
/// source; without a project document, stand-ins that keep a compile possible.
fn nic_stand_ins(nic: &mut Nic, delivery: Delivery, notes: &mut Vec<String>) {
    if delivery == Delivery::L2Dsr {
        return;
    }
    if nic.next_hop_mac.is_none() {
        nic.next_hop_mac = Some(0x02_00_00_00_00_02);
        notes.push("no `nic.nextHopMac` given: encapsulated packets go to 02:00:00:00:00:02 (a stand-in; set the router's MAC in the project document)".into());
    }
    if nic.outer_source_ipv4.is_none() {
        nic.outer_source_ipv4 = crate::gcp::parse_prefix("198.18.0.0/24").ok();
        notes.push("no `nic.outerSourceIpv4` given: outer IPv4 sources from 198.18.0.0/24 (a stand-in; set the NIC's own prefix)".into());
    }
    if nic.outer_source_ipv6.is_none() {
        nic.outer_source_ipv6 = crate::gcp::parse_prefix("2001:2::/48").ok();
    }
}

/// Duplicates: one object per name, for Nodes and for Services.
fn report_duplicates(inputs: &Inputs, diags: &mut Diagnostics) {
    let mut seen: BTreeMap<String, (String, Pos)> = BTreeMap::new();
    for n in &inputs.nodes {
        if let Some((f, p)) = seen.insert(n.name.clone(), (n.file.clone(), n.pos)) {
            diags.push(
                &n.file,
                n.pos,
                format!("Node/{}", n.name),
                format!("Node `{}` is given twice (also at {f}:{})", n.name, p.line),
                None,
            );
        }
    }
    let mut seen_svc: BTreeMap<String, (String, Pos)> = BTreeMap::new();
    for s in &inputs.services {
        let key = format!("{}/{}", s.meta.namespace, s.meta.name);
        if let Some((f, p)) = seen_svc.insert(key.clone(), (s.file.clone(), s.pos)) {
            diags.push(
                &s.file,
                s.pos,
                &s.path,
                format!("Service `{key}` is given twice (also at {f}:{})", p.line),
                None,
            );
        }
    }
}

/// The Services this load balancer serves in order of creation, then by name: the order VIPs
/// are handed out in. Services of another controller's class are noted and left out.
fn creation_order(inputs: &Inputs, notes: &mut Vec<String>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..inputs.services.len())
        .filter(|&i| inputs.services[i].foreign_class.is_none())
        .collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&inputs.services[a].meta, &inputs.services[b].meta);
        (&x.created, &x.namespace, &x.name).cmp(&(&y.created, &y.namespace, &y.name))
    });
    for s in inputs.services.iter().filter(|s| s.foreign_class.is_some()) {
        notes.push(format!(
            "Service {}/{}: loadBalancerClass `{}` is another controller's: not served here",
            s.meta.namespace,
            s.meta.name,
            s.foreign_class.as_deref().unwrap_or("")
        ));
    }
    order
}

/// The Services of `order` by namespace and name: the order they are mapped in.
fn name_order(inputs: &Inputs, order: &[usize]) -> Vec<usize> {
    let mut sorted = order.to_vec();
    sorted.sort_by(|&a, &b| {
        let (x, y) = (&inputs.services[a].meta, &inputs.services[b].meta);
        (&x.namespace, &x.name).cmp(&(&y.namespace, &y.name))
    });
    sorted
}

/// What the mapping of every Service reads: the inputs, the nodes by name and in name order,
/// each Service's EndpointSlices and VIPs.
struct ClusterView<'a> {
    inputs: &'a Inputs,
    delivery: Delivery,
    nodes: BTreeMap<&'a str, &'a read::NodeInfo>,
    /// Indexes of `inputs.nodes` in name order.
    by_name: Vec<usize>,
    /// The nodes in name order: the table every Service's verdicts share.
    table: Arc<[ClusterNode]>,
    /// Each Service's EndpointSlices, found once.
    slices_of: BTreeMap<(&'a str, &'a str), Vec<&'a read::Slice>>,
    /// Each Service's VIP per family, by (index in `inputs.services`, IPv6).
    vips: BTreeMap<(usize, bool), IpAddr>,
}

impl<'a> ClusterView<'a> {
    fn new(
        inputs: &'a Inputs,
        delivery: Delivery,
        vips: BTreeMap<(usize, bool), IpAddr>,
    ) -> ClusterView<'a> {
        let nodes: BTreeMap<&str, &read::NodeInfo> =
            inputs.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let mut by_name: Vec<usize> = (0..inputs.nodes.len()).collect();
        by_name.sort_by(|&a, &b| inputs.nodes[a].name.cmp(&inputs.nodes[b].name));
        let table: Arc<[ClusterNode]> = by_name
            .iter()
            .map(|&i| {
                let n = &inputs.nodes[i];
                ClusterNode {
                    name: Arc::from(n.name.as_str()),
                    zone: Arc::from(n.zone.as_str()),
                    ready: n.ready,
                    excluded: n.excluded,
                    ipv4: n.ipv4.is_some(),
                    ipv6: n.ipv6.is_some(),
                }
            })
            .collect();
        let mut slices_of: BTreeMap<(&str, &str), Vec<&read::Slice>> = BTreeMap::new();
        for x in &inputs.slices {
            slices_of
                .entry((x.namespace.as_str(), x.service.as_str()))
                .or_default()
                .push(x);
        }
        ClusterView {
            inputs,
            delivery,
            nodes,
            by_name,
            table,
            slices_of,
            vips,
        }
    }
}

/// What the Services' mappings gather for the objects they share: the (node, IPv6) instances
/// they use, the shared checks they need, the ports they take on each address.
#[derive(Default)]
struct Gathered<'a> {
    used_instances: BTreeSet<(&'a str, bool)>,
    /// [backend-service check, legacy check].
    need_shared: [bool; 2],
    /// (VIP, protocol) → (ports, Service path, file, position) for overlap errors.
    taken: BTreeMap<(IpAddr, bool), Vec<TakenPorts>>,
}

/// What a Service's pools and rules are built from, decided before its IP families are mapped.
struct ServicePlan<'a> {
    s: &'a read::Service,
    /// `namespace/name`.
    key: String,
    /// The name its objects start with.
    base: String,
    legacy: bool,
    delivery: Delivery,
    weighted: bool,
    hc_name: String,
    affinity: Affinity,
    idle: u16,
    tcp: BTreeSet<u16>,
    udp: BTreeSet<u16>,
    protocol: ServiceProtocol,
    loc: Loc,
}

/// One IP family of a Service: its pool's name, its VIP, whether IPv6.
struct Family<'p> {
    pool: &'p str,
    vip: IpAddr,
    v6: bool,
}

/// One Service: its options (weighting, tracking, zonal affinity), its members, its health
/// check and idle timeout, then a pool and forwarding rules per IP family.
fn map_service<'a>(
    cl: &ClusterView<'a>,
    si: usize,
    c: &mut Config,
    gathered: &mut Gathered<'a>,
    diags: &mut Diagnostics,
) -> KubeService {
    let s = &cl.inputs.services[si];
    let key = format!("{}/{}", s.meta.namespace, s.meta.name);
    let mut snotes: Vec<String> = Vec::new();
    let base = base_name(&s.meta.namespace, &s.meta.name);
    let slices = cl
        .slices_of
        .get(&(s.meta.namespace.as_str(), s.meta.name.as_str()))
        .map_or(&[][..], Vec::as_slice);
    let counts = endpoint_counts(slices);
    let endpoint_list: Vec<(String, [usize; 3])> =
        counts.iter().map(|(n, c)| (n.clone(), *c)).collect();
    let weighted = weighting(s, &mut snotes);
    // Without EndpointSlice tracking a Local Service behaves as on GKE: its nodes
    // are every eligible node and only the health check tells which have a ready pod.
    let untracked = cl.inputs.project.untracked && s.policy == TrafficPolicy::Local;
    if untracked {
        snotes.push("EndpointSlice tracking is off (kubernetes.endpointSliceTracking: false): every eligible node is a backend and only the check on healthCheckNodePort takes a node without a ready pod out, (unhealthyThreshold + 1) × interval late at worst".into());
    }
    let zonal_affinity = wants_zonal_affinity(s, &c.nic.zone, &mut snotes);
    let rule = VerdictRule {
        shape: s.shape,
        policy: s.policy,
        untracked,
        ipv4: s.families.contains(&false),
        ipv6: s.families.contains(&true),
    };
    let (members, member_positions) = choose_members(cl, s, &key, &rule, &counts, &mut snotes);
    endpoint_notes(cl, slices, &counts, &mut snotes);
    let (hc_name, health_check) = add_health_check(s, &base, c, &mut gathered.need_shared);
    let idle = idle_timeout(s, &mut snotes, diags);
    let tcp: BTreeSet<u16> = s.ports.iter().filter(|p| !p.udp).map(|p| p.port).collect();
    let udp: BTreeSet<u16> = s.ports.iter().filter(|p| p.udp).map(|p| p.port).collect();
    let protocol = match (tcp.is_empty(), udp.is_empty()) {
        (false, true) => ServiceProtocol::Tcp,
        (true, false) => ServiceProtocol::Udp,
        _ => ServiceProtocol::Unspecified,
    };
    let plan = ServicePlan {
        s,
        key,
        base,
        legacy: s.shape == Shape::LegacyTargetPool,
        delivery: cl.delivery,
        weighted,
        hc_name,
        affinity: if s.client_ip_affinity {
            Affinity::ClientIp
        } else {
            Affinity::None
        },
        idle,
        tcp,
        udp,
        protocol,
        loc: Loc {
            index: 0,
            pos: s.pos,
            fields: Vec::new(),
            incomplete: false,
        },
    };

    let mut pools = Vec::new();
    let mut svc_vips = Vec::new();
    let mut ready_endpoints = Vec::new();
    for &v6 in &s.families {
        let pool = if v6 && s.families.len() > 1 {
            format!("{}-v6", plan.base)
        } else {
            plan.base.clone()
        };
        let Some(&vip) = cl.vips.get(&(si, v6)) else {
            continue;
        };
        svc_vips.push(vip);
        let fam_members: Vec<&read::NodeInfo> = members
            .iter()
            .filter_map(|m| cl.nodes.get(*m).copied())
            .filter(|n| {
                if v6 {
                    n.ipv6.is_some()
                } else {
                    n.ipv4.is_some()
                }
            })
            .collect();
        for n in &fam_members {
            gathered.used_instances.insert((n.name.as_str(), v6));
            if s.policy == TrafficPolicy::Local && !untracked {
                let ready = counts.get(&n.name).map_or(0, |c| c[0]);
                ready_endpoints.push((pool.clone(), backend_name(n, v6), ready as u32));
            }
        }
        let family = Family {
            pool: &pool,
            vip,
            v6,
        };
        if plan.legacy {
            add_target_pool(&plan, &family, &fam_members, c);
        } else {
            add_backend_service(&plan, &family, &fam_members, c);
        }
        pools.push(pool.clone());
        add_forwarding_rules(&plan, &family, &mut gathered.taken, &mut snotes, c, diags);
    }
    if !plan.legacy && members.is_empty() {
        snotes.push("no node serves: new connections to its VIP are dropped (NO_BACKEND)".into());
    }
    KubeService {
        service: plan.key,
        shape: s.shape,
        policy: s.policy,
        pools,
        vips: svc_vips,
        ports: s.ports.iter().map(|p| (p.udp, p.port)).collect(),
        health_check,
        cluster: cl.table.clone(),
        rule,
        members: member_positions,
        endpoint_counts: endpoint_list,
        notes: snotes,
        ready_endpoints,
        zonal_affinity,
        client_zone: c.nic.zone.clone(),
    }
}

/// Weighting (SPEC R5.6, R7.3): only an external backend service with Local.
fn weighting(s: &read::Service, snotes: &mut Vec<String>) -> bool {
    s.weighted
        && match (s.shape, s.policy) {
            (Shape::External, TrafficPolicy::Local) => true,
            (_, TrafficPolicy::Cluster) => {
                snotes.push("warning: networking.gke.io/weighted-load-balancing needs externalTrafficPolicy Local; with Cluster packets may go on to other nodes, so nodes are not weighted (SPEC R7.6)".into());
                false
            }
            (Shape::Internal, _) => {
                snotes.push("warning: networking.gke.io/weighted-load-balancing is offered for external Services only (GKE): not weighted".into());
                false
            }
            (Shape::LegacyTargetPool, _) => {
                snotes.push("warning: networking.gke.io/weighted-load-balancing needs a backend-service load balancer; target pools never weight (SPEC R5.6)".into());
                false
            }
        }
}

/// Zonal affinity (SPEC R7.4): GKE offers it for internal Services only, and the NIC needs a
/// zone (`nic_zone`) to prefer.
fn wants_zonal_affinity(s: &read::Service, nic_zone: &str, snotes: &mut Vec<String>) -> bool {
    match (s.prefer_close, s.shape) {
        (None, _) => false,
        (Some(_), Shape::Internal) if nic_zone.is_empty() => {
            snotes.push("warning: trafficDistribution asks for zonal affinity, but `nic.zone` is not set: the NIC has no zone to prefer, so every zone serves".into());
            false
        }
        (Some(_), Shape::Internal) => true,
        (Some(_), _) => {
            snotes.push("warning: trafficDistribution (zonal affinity) is offered for internal Services only (GKE): every zone serves".into());
            false
        }
    }
}

/// Which nodes serve a Service (the verdicts, why not the others, are worded on demand): the
/// eligible ones, or a subset of them over the zones when they are more than its shape and
/// policy allow (SPEC R7.5). Returns the members' names (in name order) and their positions
/// in the cluster table.
fn choose_members<'a>(
    cl: &ClusterView<'a>,
    s: &read::Service,
    key: &str,
    rule: &VerdictRule,
    counts: &BTreeMap<String, [usize; 3]>,
    snotes: &mut Vec<String>,
) -> (Vec<&'a str>, Vec<u32>) {
    let cluster = &cl.table;
    let inputs = cl.inputs;
    let limit = node_limit(s.shape, s.policy);
    let uid = if s.meta.uid.is_empty() {
        key.to_string()
    } else {
        s.meta.uid.clone()
    };
    // The nodes with endpoints, as positions in `cluster` (ascending: both in name order).
    let mut with_endpoints: Vec<(usize, [usize; 3])> = Vec::with_capacity(counts.len());
    for (name, c) in counts {
        let first = cluster.partition_point(|n| &*n.name < name.as_str());
        for p in (first..cluster.len()).take_while(|&p| *cluster[p].name == **name) {
            with_endpoints.push((p, *c));
        }
    }
    let mut next = with_endpoints.iter().peekable();
    let candidates: Vec<usize> = cluster
        .iter()
        .zip(&cl.by_name)
        .enumerate()
        .filter(|&(p, (n, _))| {
            let ep = next.next_if(|e| e.0 == p).map_or([0; 3], |e| e.1);
            rule.ineligible(n, ep).is_none()
        })
        .map(|(_, (_, &i))| i)
        .collect();
    let mut member_of = vec![false; inputs.nodes.len()];
    match limit {
        Some(l) if candidates.len() > l => {
            snotes.push(format!(
                "{} eligible nodes, more than the {l} a {} Service with externalTrafficPolicy {:?} may have: a subset of {l}, divided over the zones smallest first as GKE does, by rendezvous hashing on the Service's UID in each zone (SPEC R7.5)",
                candidates.len(),
                if s.shape == Shape::Internal { "internal" } else { "external" },
                s.policy
            ));
            for i in subset_per_zone(&uid, &inputs.nodes, &candidates, l) {
                member_of[i] = true;
            }
        }
        _ => {
            for &i in &candidates {
                member_of[i] = true;
            }
        }
    }
    let members: Vec<&str> = candidates
        .iter()
        .filter(|&&i| member_of[i])
        .map(|&i| inputs.nodes[i].name.as_str())
        .collect();
    let member_positions: Vec<u32> = (0..cl.by_name.len())
        .filter(|&p| member_of[cl.by_name[p]])
        .map(|p| p as u32)
        .collect();
    (members, member_positions)
}

/// Notes on endpoints that count for no node: without `nodeName`, or on a node no Node
/// manifest describes.
fn endpoint_notes(
    cl: &ClusterView<'_>,
    slices: &[&read::Slice],
    counts: &BTreeMap<String, [usize; 3]>,
    snotes: &mut Vec<String>,
) {
    let slices_without_node: usize = slices.iter().map(|x| x.without_node).sum();
    if slices_without_node > 0 {
        snotes.push(format!(
            "{slices_without_node} endpoint(s) without nodeName count for no node"
        ));
    }
    for (node, _) in counts
        .iter()
        .filter(|(n, _)| !cl.nodes.contains_key(n.as_str()))
    {
        snotes.push(format!("endpoints on node `{node}`, which no Node manifest describes: the node is not a backend"));
    }
}

/// A Service's health check (SPEC R7.1, R7.6; the target pool's one shape for both policies):
/// a `Local` Service's own check goes into `c`, the shared `Cluster` check is marked in
/// `need_shared` for later. Returns the check's name and the check in words.
fn add_health_check(
    s: &read::Service,
    base: &str,
    c: &mut Config,
    need_shared: &mut [bool; 2],
) -> (String, String) {
    let (hc_name, hc_port, timing) = match s.policy {
        TrafficPolicy::Cluster => (
            SHARED_CHECK.to_string(),
            KUBE_PROXY_HEALTH_PORT,
            CLUSTER_CHECK,
        ),
        TrafficPolicy::Local => (
            format!("{base}-hc"),
            s.health_check_node_port.unwrap_or(0),
            if s.shape == Shape::LegacyTargetPool {
                TARGET_POOL_CHECK
            } else {
                LOCAL_CHECK
            },
        ),
    };
    let health_check = format!(
        "{hc_name}: HTTP GET /healthz on port {hc_port}, every {} s, timeout {} s, healthy after {}, unhealthy after {}",
        timing[0], timing[1], timing[2], timing[3]
    );
    let loc = Loc {
        index: 0,
        pos: s.pos,
        fields: Vec::new(),
        incomplete: false,
    };
    let legacy = s.shape == Shape::LegacyTargetPool;
    if s.policy == TrafficPolicy::Cluster {
        need_shared[usize::from(legacy)] = true;
    } else if s.health_check_node_port.is_some() {
        if legacy {
            c.http_health_checks.push(HttpHealthCheck {
                name: hc_name.clone(),
                port: hc_port,
                request_path: "/healthz".into(),
                host: String::new(),
                check_interval_sec: timing[0],
                timeout_sec: timing[1],
                healthy_threshold: timing[2],
                unhealthy_threshold: timing[3],
                loc: Loc {
                    index: c.http_health_checks.len(),
                    ..loc.clone()
                },
            });
        } else {
            c.health_checks.push(HealthCheck {
                name: hc_name.clone(),
                region: String::new(),
                probe: Probe::Http {
                    request_path: "/healthz".into(),
                    host: String::new(),
                    response: String::new(),
                },
                port: hc_port,
                check_interval_sec: timing[0],
                timeout_sec: timing[1],
                healthy_threshold: timing[2],
                unhealthy_threshold: timing[3],
                loc: Loc {
                    index: c.health_checks.len(),
                    ..loc.clone()
                },
            });
        }
    }
    (hc_name, health_check)
}

/// A Service's connection idle timeout. `timeoutSeconds` is kube-proxy's (how long it keeps a
/// client on one pod); GKE sets the load balancer's idle timeout only for strong session
/// affinity (SPEC R7.6).
fn idle_timeout(s: &read::Service, snotes: &mut Vec<String>, diags: &mut Diagnostics) -> u16 {
    let default_idle = if s.shape == Shape::Internal {
        IDLE_INTERNAL
    } else {
        IDLE_EXTERNAL
    };
    match s.strong_affinity {
        None => default_idle,
        Some(_) if s.shape != Shape::External => {
            snotes.push(format!(
                "warning: {} is offered for external Services with GCE_VM_IP NEGs only (GKE): the idle timeout stays {default_idle} s",
                read::STRONG_AFFINITY
            ));
            default_idle
        }
        Some(pos) => strong_affinity_idle(s, pos, diags).unwrap_or(default_idle),
    }
}

/// References to the backends named after `nodes` in one IP family.
fn node_refs(nodes: &[&read::NodeInfo], v6: bool, pos: Pos) -> Vec<Ref> {
    nodes
        .iter()
        .map(|n| Ref::named(&backend_name(n, v6), pos))
        .collect()
}

/// The legacy shape's pool of one family: a target pool of its members.
fn add_target_pool(
    plan: &ServicePlan<'_>,
    family: &Family<'_>,
    members: &[&read::NodeInfo],
    c: &mut Config,
) {
    let s = plan.s;
    c.target_pools.push(TargetPool {
        name: family.pool.to_string(),
        region: String::new(),
        instances: node_refs(members, family.v6, s.pos),
        health_checks: vec![Ref::named(&plan.hc_name, s.pos)],
        session_affinity: plan.affinity,
        backup_pool: None,
        failover_ratio: None,
        delivery: plan.delivery,
        idle_timeout_sec: plan.idle,
        loc: Loc {
            index: c.target_pools.len(),
            ..plan.loc.clone()
        },
    });
}

/// The NEG shapes' pool of one family: a backend service of one GCE_VM_IP NEG per zone (GKE
/// creates one per Service and zone).
fn add_backend_service(
    plan: &ServicePlan<'_>,
    family: &Family<'_>,
    members: &[&read::NodeInfo],
    c: &mut Config,
) {
    let s = plan.s;
    let pool = family.pool;
    let loc = &plan.loc;
    let mut by_zone: BTreeMap<&str, Vec<&read::NodeInfo>> = BTreeMap::new();
    for n in members {
        by_zone.entry(n.zone.as_str()).or_default().push(n);
    }
    let mut backends = Vec::new();
    for (zone, ns) in by_zone {
        let neg = format!("{pool}-{}", zone_part(zone));
        c.network_endpoint_groups.push(NetworkEndpointGroup {
            name: neg.clone(),
            zone: zone.to_string(),
            endpoints: node_refs(&ns, family.v6, s.pos)
                .into_iter()
                .map(|r| NetworkEndpoint {
                    ip: None,
                    ip_pos: s.pos,
                    pos: s.pos,
                    instance: r,
                })
                .collect(),
            size: None,
            loc: Loc {
                index: c.network_endpoint_groups.len(),
                ..loc.clone()
            },
        });
        backends.push(Backend {
            group: Ref::named(&neg, s.pos),
            neg: true,
            max_connections: None,
            capacity_scaler: Ratio::one(),
            failover: false,
            preference: Preference::Default,
            loc: loc.clone(),
        });
    }
    c.backend_services.push(BackendService {
        name: pool.to_string(),
        region: String::new(),
        global: true,
        protocol: plan.protocol,
        health_checks: if s.policy == TrafficPolicy::Local && s.health_check_node_port.is_none() {
            Vec::new()
        } else {
            vec![Ref::named(&plan.hc_name, s.pos)]
        },
        backends,
        session_affinity: plan.affinity,
        tracking_mode: TrackingMode::PerConnection,
        persistence: Persistence::DefaultForProtocol,
        idle_timeout_sec: plan.idle,
        failover_ratio: None,
        drop_traffic_if_unhealthy: false,
        disable_connection_drain_on_failover: false,
        locality_lb_policy: if plan.weighted {
            LocalityLbPolicy::WeightedMaglev
        } else {
            LocalityLbPolicy::Maglev
        },
        draining_timeout_sec: 0,
        // GKE names no service LB policy: passthrough semantics (SPEC R6, R7.1).
        service_lb_policy: None,
        delivery: plan.delivery,
        loc: Loc {
            index: c.backend_services.len(),
            ..loc.clone()
        },
    });
}

/// Forwarding rules of one family: one per protocol, the Service's ports of that protocol,
/// refused where they overlap another Service's on the same VIP (SPEC R2.2).
fn add_forwarding_rules(
    plan: &ServicePlan<'_>,
    family: &Family<'_>,
    taken: &mut BTreeMap<(IpAddr, bool), Vec<TakenPorts>>,
    snotes: &mut Vec<String>,
    c: &mut Config,
    diags: &mut Diagnostics,
) {
    let s = plan.s;
    let key = &plan.key;
    let vip = family.vip;
    let suffix = if family.v6 && s.families.len() > 1 {
        "-v6"
    } else {
        ""
    };
    for (udp, ports) in [(false, &plan.tcp), (true, &plan.udp)] {
        if ports.is_empty() {
            continue;
        }
        let (ranges, spanned) = port_ranges(ports);
        let proto = if udp { "udp" } else { "tcp" };
        if spanned {
            snotes.push(format!(
                "more than five {} ports: the forwarding rule takes ports {}-{}, as GKE's does",
                proto.to_uppercase(),
                ranges[0].lo,
                ranges[0].hi
            ));
        }
        // Overlaps with another Service on the same VIP (SPEC R2.2), at this port.
        let first = s
            .ports
            .iter()
            .find(|p| p.udp == udp)
            .map_or(s.pos, |p| p.pos);
        let mine = taken.entry((vip, udp)).or_default();
        for r in &ranges {
            if let Some((other, opath, ofile, opos)) = mine.iter().find(|(o, ..)| o.overlaps(r)) {
                diags.push(
                    &s.file,
                    first,
                    format!("{}.spec.ports", s.path),
                    format!(
                        "{} ports {r} of Service `{key}` on {vip} overlap ports {other} of {opath} ({ofile}:{})",
                        proto.to_uppercase(),
                        opos.line
                    ),
                    Some("Services sharing an address use disjoint ports of a protocol (SPEC R2.2)".into()),
                );
            }
        }
        for r in &ranges {
            mine.push((*r, s.path.clone(), s.file.clone(), first));
        }
        c.forwarding_rules.push(ForwardingRule {
            name: format!("{}{suffix}-{proto}", plan.base),
            ip_address: vip,
            ip_protocol: if udp { Protocol::Udp } else { Protocol::Tcp },
            port_ranges: ranges,
            region: String::new(),
            target: Ref::named(family.pool, s.pos),
            backend_service: !plan.legacy,
            source_ranges: s.source_ranges.clone(),
            loc: Loc {
                index: c.forwarding_rules.len(),
                ..plan.loc.clone()
            },
        });
    }
}

/// The shared Cluster check, once per kind that uses it ([backend-service check, legacy
/// check]).
fn add_shared_checks(c: &mut Config, need_shared: [bool; 2]) {
    let shared = |index| {
        (
            CLUSTER_CHECK,
            Loc {
                index,
                ..Loc::default()
            },
        )
    };
    if need_shared[0] {
        let (t, loc) = shared(c.health_checks.len());
        c.health_checks.push(HealthCheck {
            name: SHARED_CHECK.into(),
            region: String::new(),
            probe: Probe::Http {
                request_path: "/healthz".into(),
                host: String::new(),
                response: String::new(),
            },
            port: KUBE_PROXY_HEALTH_PORT,
            check_interval_sec: t[0],
            timeout_sec: t[1],
            healthy_threshold: t[2],
            unhealthy_threshold: t[3],
            loc,
        });
    }
    if need_shared[1] {
        let (t, loc) = shared(c.http_health_checks.len());
        c.http_health_checks.push(HttpHealthCheck {
            name: SHARED_CHECK.into(),
            port: KUBE_PROXY_HEALTH_PORT,
            request_path: "/healthz".into(),
            host: String::new(),
            check_interval_sec: t[0],
            timeout_sec: t[1],
            healthy_threshold: t[2],
            unhealthy_threshold: t[3],
            loc,
        });
    }
}

/// An instance per (node, family) some Service uses, at the node's InternalIP of the family.
fn add_instances(
    cl: &ClusterView<'_>,
    used_instances: &BTreeSet<(&str, bool)>,
    c: &mut Config,
    diags: &mut Diagnostics,
) {
    for (name, v6) in used_instances {
        let Some(n) = cl.nodes.get(*name) else {
            continue;
        };
        let ip = if *v6 { n.ipv6 } else { n.ipv4 };
        let Some(ip) = ip else { continue };
        let mac = cl.inputs.project.macs.get(*name).copied();
        if cl.delivery == Delivery::L2Dsr && mac.is_none() {
            diags.push(
                &n.file,
                n.pos,
                format!("Node/{name}"),
                format!("node `{name}` has no MAC, which `kubernetes.delivery: L2_DSR` needs"),
                Some("its MAC in `kubernetes.nodeMacs`, or `delivery: IPIP` or `GUE`".into()),
            );
        }
        c.instances.push(Instance {
            name: backend_name(n, *v6),
            ip,
            zone: n.zone.clone(),
            network: String::new(),
            mac,
            weight: 1,
            loc: Loc {
                index: c.instances.len(),
                pos: n.pos,
                fields: Vec::new(),
                incomplete: false,
            },
        });
    }
}
