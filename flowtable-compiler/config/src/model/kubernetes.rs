//! What a Kubernetes LoadBalancer Service became ([`crate::kube`] maps them): its shape,
//! traffic policy, pools and VIPs, and why each node of the cluster is or is not one of its
//! backends, for reports and `explain`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

/// Which Google Cloud load balancer a Service becomes (GKE's "About LoadBalancer Services",
/// "Node grouping").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Internal passthrough load balancer: backend service with `GCE_VM_IP` NEGs.
    Internal,
    /// Backend-service-based regional external passthrough load balancer with NEGs.
    External,
    /// Target-pool-based regional external passthrough load balancer (every node).
    LegacyTargetPool,
}

impl Shape {
    /// In words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Shape::Internal => {
                "internal passthrough load balancer (backend service, GCE_VM_IP NEGs)"
            }
            Shape::External => {
                "external passthrough load balancer (backend service, GCE_VM_IP NEGs)"
            }
            Shape::LegacyTargetPool => {
                "external passthrough load balancer (legacy target pool of every node)"
            }
        }
    }
}

/// `spec.externalTrafficPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficPolicy {
    /// Every node; kube-proxy's `/healthz` on 10256.
    Cluster,
    /// Only nodes with a serving endpoint; the Service's `healthCheckNodePort`.
    Local,
}

/// Why a node does or does not serve a Service ([`KubeService::nodes`] words them on demand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVerdict {
    /// The node (and the backend named after it); shared by every Service's verdicts.
    pub node: Arc<str>,
    /// Its zone (`topology.kubernetes.io/zone`), empty when not labelled.
    pub zone: Arc<str>,
    /// Whether it is a backend of the Service.
    pub member: bool,
    /// Why, in words (most reasons are fixed texts).
    pub why: Cow<'static, str>,
    /// The Service's endpoints on the node: ready, serving, terminating.
    pub endpoints: [usize; 3],
}

/// What a LoadBalancer Service became, for reports and `explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeService {
    /// `namespace/name`.
    pub service: String,
    /// Its load-balancer shape.
    pub shape: Shape,
    /// Its traffic policy.
    pub policy: TrafficPolicy,
    /// The pools it became (backend services or a target pool), one per IP family.
    pub pools: Vec<String>,
    /// Its VIPs, one per family.
    pub vips: Vec<IpAddr>,
    /// Its ports in `spec.ports` order, as (UDP, port).
    pub ports: Vec<(bool, u16)>,
    /// The health check, in words.
    pub health_check: String,
    /// Every node of the cluster in name order, shared by every Service; [`KubeService::nodes`]
    /// words each one's verdict on demand (a cluster of thousands of nodes and Services would
    /// otherwise hold one verdict per pair).
    pub(crate) cluster: Arc<[ClusterNode]>,
    /// What decides a node's verdict for this Service.
    pub(crate) rule: VerdictRule,
    /// The members: positions in `cluster`, ascending.
    pub(crate) members: Vec<u32>,
    /// The Service's endpoints per node name (ready, serving, terminating), in name order.
    pub(crate) endpoint_counts: Vec<(String, [usize; 3])>,
    /// Warnings and decisions worth saying (weighting refused, subsets, ...).
    pub notes: Vec<String>,
    /// With `externalTrafficPolicy: Local`, the ready, non-terminating endpoints of the
    /// Service on each backend, as `(pool, backend, count)`: a backend with none leaves
    /// new-connection choice at once, without waiting for health-check thresholds (SPEC
    /// R10.5), and with weighting the count is its weight where no probe reported one
    /// (SPEC R7.3). Empty with `Cluster` (every node serves, SPEC R7.1).
    pub ready_endpoints: Vec<(String, String, u32)>,
    /// Zonal affinity (`trafficDistribution` on an internal Service, SPEC R7.4): the NIC's
    /// zone is the client's; while it has a healthy eligible node only its nodes take new
    /// connections, otherwise all do (spill ratio 0).
    pub zonal_affinity: bool,
    /// The NIC's zone (`nic.zone`), the client's zone of zonal affinity.
    pub client_zone: String,
}

/// A node as the verdicts need it (one table for the whole cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterNode {
    pub(crate) name: Arc<str>,
    pub(crate) zone: Arc<str>,
    pub(crate) ready: bool,
    pub(crate) excluded: bool,
    pub(crate) ipv4: bool,
    pub(crate) ipv6: bool,
}

/// The properties of a Service a node's verdict depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VerdictRule {
    pub(crate) shape: Shape,
    pub(crate) policy: TrafficPolicy,
    /// `Local` with EndpointSlice tracking off.
    pub(crate) untracked: bool,
    pub(crate) ipv4: bool,
    pub(crate) ipv6: bool,
}

impl VerdictRule {
    /// Why `node` cannot serve the Service at all (SPEC R7.1, R7.6); `None`: a candidate.
    pub(crate) fn ineligible(
        &self,
        node: &ClusterNode,
        endpoints: [usize; 3],
    ) -> Option<&'static str> {
        if !node.ready && self.shape == Shape::LegacyTargetPool {
            Some(NOT_READY_LEGACY)
        } else if node.excluded {
            Some(EXCLUDED)
        } else if !((self.ipv4 && node.ipv4) || (self.ipv6 && node.ipv6)) {
            Some("no InternalIP of the Service's IP family")
        } else if self.policy == TrafficPolicy::Local
            && self.shape != Shape::LegacyTargetPool
            && !self.untracked
            && endpoints[1] == 0
        {
            Some("externalTrafficPolicy Local: no serving endpoint of the Service on the node")
        } else {
            None
        }
    }

    /// Why a candidate is a member, or not (SPEC R7.5, R7.6).
    fn candidate(&self, node: &ClusterNode, member: bool, ep: [usize; 3]) -> Cow<'static, str> {
        if !member {
            return Cow::Borrowed(OUTSIDE_SUBSET);
        }
        let why = self.member_why(ep);
        if node.ready {
            return why;
        }
        Cow::Owned(format!(
            "{why}; not Ready, still a NEG backend: only its health check takes it out (SPEC R7.6)"
        ))
    }

    /// Why a member is one.
    fn member_why(&self, ep: [usize; 3]) -> Cow<'static, str> {
        match (self.shape, self.policy) {
            (_, TrafficPolicy::Local) if self.untracked => Cow::Owned(format!(
                "a backend (EndpointSlice tracking off); its check on healthCheckNodePort passes only with a ready local endpoint: {} here",
                ep[0]
            )),
            (Shape::LegacyTargetPool, TrafficPolicy::Local) => Cow::Owned(format!(
                "in the target pool (every node); its check on healthCheckNodePort passes only with a ready local endpoint: {} here",
                ep[0]
            )),
            (_, TrafficPolicy::Local) => Cow::Owned(format!("{} serving endpoint(s) on the node ({} ready)", ep[1], ep[0])),
            (_, TrafficPolicy::Cluster) => Cow::Borrowed("externalTrafficPolicy Cluster: every eligible node serves (kube-proxy forwards to a pod anywhere)"),
        }
    }
}

/// The endpoint counts of each node of `cluster` (in name order) from `counts` (in name
/// order): a merge walk, no lookups.
fn counts_in_order<'a>(
    cluster: &'a [ClusterNode],
    counts: &'a [(String, [usize; 3])],
) -> impl Iterator<Item = [usize; 3]> + 'a {
    let mut k = 0;
    cluster.iter().map(move |n| {
        while counts.get(k).is_some_and(|(c, _)| c.as_str() < &*n.name) {
            k += 1;
        }
        match counts.get(k) {
            Some((c, ep)) if c.as_str() == &*n.name => *ep,
            _ => [0; 3],
        }
    })
}

/// Why one node is, or is not, a choice for a new connection to one of a Service's pools
/// (`nlbctl explain`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NodeEligibility {
    /// The node.
    pub node: String,
    /// Its zone (empty when not labelled).
    pub zone: String,
    /// The backend named after it in this pool (`NODE`, or `NODE.ipv6`), when a member.
    pub backend: Option<String>,
    /// Whether it is a backend (NEG endpoint, target-pool instance) of the Service.
    pub member: bool,
    /// Whether new connections may go to it now: it holds slots of the slice that serves.
    pub eligible: bool,
    /// Its share of new connections (its slots of the serving slice).
    pub share: f64,
    /// The Service's endpoints on it: ready (and not terminating), serving, terminating.
    pub endpoints: [usize; 3],
    /// Why, in words.
    pub why: String,
}

/// What a pool's compiled tables serve: its member backends and the Maglev slots each holds
/// in the slice that serves new connections now.
#[derive(Debug, Clone, Default)]
pub struct ServedSlice<'a> {
    /// The pool's member backends.
    pub members: BTreeSet<&'a str>,
    /// Slots per backend of the serving slice.
    pub slots: BTreeMap<&'a str, usize>,
    /// Slots of the serving slice that name a backend.
    pub total: usize,
}

impl KubeService {
    /// Every node of the cluster in name order, member or not, with why (SPEC R7.1, R7.5,
    /// R7.6).
    pub fn nodes(&self) -> Vec<NodeVerdict> {
        let mut members = self.members.iter().peekable();
        self.cluster
            .iter()
            .zip(counts_in_order(&self.cluster, &self.endpoint_counts))
            .enumerate()
            .map(|(i, (n, endpoints))| {
                let member = members.next_if(|&&m| m as usize == i).is_some();
                let why = match self.rule.ineligible(n, endpoints) {
                    Some(why) => Cow::Borrowed(why),
                    None => self.rule.candidate(n, member, endpoints),
                };
                NodeVerdict {
                    node: n.name.clone(),
                    zone: n.zone.clone(),
                    member,
                    why,
                    endpoints,
                }
            })
            .collect()
    }
}

const EXCLUDED: &str =
    "labelled node.kubernetes.io/exclude-from-external-load-balancers (SPEC R7.6)";
const OUTSIDE_SUBSET: &str =
    "outside the Service's subset (divided over the zones, rendezvous hashing on its UID in each, SPEC R7.5)";
const NOT_READY_LEGACY: &str =
    "not Ready: the legacy target pool holds Ready nodes only (SPEC R7.6)";
