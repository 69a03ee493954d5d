//! A generated Kubernetes cluster, as `kubectl get nodes,services,endpointslices -A -o yaml`
//! prints it (one `kind: List`), for the scale benchmark (`benches/kube_scale.rs`) and the
//! output-stability test (`tests/kube_scale_digest.rs`). Deterministic: the same arguments give
//! the same bytes.
//!
//! Nodes `node-NNNNN` over three zones, each Ready with an InternalIP (every 97th not Ready,
//! every 101st labelled exclude-from-external-load-balancers). Services `svc-NNNN` of type
//! LoadBalancer, two TCP ports (80, 443) each: even ones `externalTrafficPolicy: Cluster`
//! (external, so subsets of 250 nodes), odd ones `Local` with a `healthCheckNodePort`; every
//! seventh odd one internal, every eleventh weighted (pods-per-node). Each Service has one
//! EndpointSlice (discovery.k8s.io/v1) of `pods` endpoints on nodes picked by a hash; every
//! fifth Service's first endpoint is terminating. VIPs come from the project document's pool.

use std::fmt::Write as _;

const ZONES: [&str; 3] = ["us-central1-a", "us-central1-b", "us-central1-c"];

/// splitmix64: the deterministic choices of the generator.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The project document (not a manifest): the NIC and the VIP pool.
pub fn project() -> String {
    "nic:\n  zone: us-central1-a\nkubernetes:\n  addressPools: [\"203.0.112.0/20\"]\n".into()
}

/// The manifests of a cluster of `nodes` nodes and `services` Services with `pods` endpoints
/// each.
pub fn manifests(nodes: usize, services: usize, pods: usize) -> String {
    let mut s = String::with_capacity(nodes * 1100 + services * (900 + pods * 330));
    s.push_str("apiVersion: v1\nitems:\n");
    for n in 0..nodes {
        let zone = ZONES[n % 3];
        let ready = if n % 97 == 96 { "False" } else { "True" };
        let exclude = if n % 101 == 100 {
            "      node.kubernetes.io/exclude-from-external-load-balancers: \"\"\n"
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
      volumes.kubernetes.io/controller-managed-attach-detach: "true"
    creationTimestamp: "2026-11-01T08:{m:02}:{sec:02}Z"
    labels:
      beta.kubernetes.io/arch: amd64
      beta.kubernetes.io/os: linux
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: node-{n:05}
      kubernetes.io/os: linux
      node.kubernetes.io/instance-type: n2-standard-8
{exclude}      topology.kubernetes.io/region: us-central1
      topology.kubernetes.io/zone: {zone}
    name: node-{n:05}
    resourceVersion: "{rv}"
    uid: {uid:08x}-0000-4000-8000-{n:012x}
  spec:
    podCIDR: 10.{pa}.{pb}.0/24
    providerID: gce://bench/{zone}/node-{n:05}
  status:
    addresses:
    - address: 10.128.{a}.{b}
      type: InternalIP
    - address: node-{n:05}
      type: Hostname
    conditions:
    - lastHeartbeatTime: "2026-12-01T10:00:00Z"
      lastTransitionTime: "2026-11-01T08:00:00Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "{ready}"
      type: Ready
    nodeInfo:
      kubeletVersion: v1.31.3
"#,
            m = (n / 60) % 60,
            sec = n % 60,
            rv = 1000 + n,
            uid = mix(n as u64) as u32,
            pa = 64 + n / 256,
            pb = n % 256,
            a = n / 250,
            b = 1 + n % 250,
        );
    }
    for v in 0..services {
        let local = v % 2 == 1;
        let internal = local && v % 7 == 3;
        let weighted = local && !internal && v % 11 == 5;
        let mut annotations = String::new();
        if internal {
            annotations.push_str("      networking.gke.io/load-balancer-type: Internal\n");
        }
        if weighted {
            annotations
                .push_str("      networking.gke.io/weighted-load-balancing: pods-per-node\n");
        }
        if !annotations.is_empty() {
            annotations = format!("    annotations:\n{annotations}");
        }
        let policy = if local { "Local" } else { "Cluster" };
        let hc = if local {
            format!("    healthCheckNodePort: {}\n", 30000 + v % 2000)
        } else {
            String::new()
        };
        let _ = write!(
            s,
            r#"- apiVersion: v1
  kind: Service
  metadata:
{annotations}    creationTimestamp: "2026-11-02T{h:02}:{m:02}:{sec:02}Z"
    labels:
      app: svc-{v:04}
    name: svc-{v:04}
    namespace: team-{ns}
    resourceVersion: "{rv}"
    uid: {uid:08x}-1111-4000-8000-{v:012x}
  spec:
    allocateLoadBalancerNodePorts: true
    clusterIP: 10.96.{ca}.{cb}
    clusterIPs:
    - 10.96.{ca}.{cb}
    externalTrafficPolicy: {policy}
{hc}    internalTrafficPolicy: Cluster
    ipFamilies:
    - IPv4
    ipFamilyPolicy: SingleStack
    ports:
    - name: http
      nodePort: {np1}
      port: 80
      protocol: TCP
      targetPort: 8080
    - name: https
      nodePort: {np2}
      port: 443
      protocol: TCP
      targetPort: 8443
    selector:
      app: svc-{v:04}
    sessionAffinity: None
    type: LoadBalancer
  status:
    loadBalancer: {{}}
"#,
            h = (v / 3600) % 24,
            m = (v / 60) % 60,
            sec = v % 60,
            ns = v % 20,
            rv = 100_000 + v,
            uid = mix(1 << 40 | v as u64) as u32,
            ca = v / 250,
            cb = 1 + v % 250,
            np1 = 30000 + (2 * v) % 2767,
            np2 = 30000 + (2 * v + 1) % 2767,
        );
        let _ = write!(
            s,
            r#"- addressType: IPv4
  apiVersion: discovery.k8s.io/v1
  endpoints:
"#
        );
        for p in 0..pods {
            let node = (mix((v as u64) << 20 | p as u64) % nodes.max(1) as u64) as usize;
            let terminating = v % 5 == 0 && p == 0;
            let _ = write!(
                s,
                r#"  - addresses:
    - 10.{pa}.{pb}.{pc}
    conditions:
      ready: {ready}
      serving: true
      terminating: {terminating}
    nodeName: node-{node:05}
    targetRef:
      kind: Pod
      name: svc-{v:04}-{p}
      namespace: team-{ns}
    zone: {zone}
"#,
                pa = 64 + node / 256,
                pb = node % 256,
                pc = 2 + (v * pods + p) % 250,
                ready = !terminating,
                ns = v % 20,
                zone = ZONES[node % 3],
            );
        }
        let _ = write!(
            s,
            r#"  kind: EndpointSlice
  metadata:
    generateName: svc-{v:04}-
    labels:
      endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io
      kubernetes.io/service-name: svc-{v:04}
    name: svc-{v:04}-{tag:05x}
    namespace: team-{ns}
  ports:
  - name: http
    port: 8080
    protocol: TCP
  - name: https
    port: 8443
    protocol: TCP
"#,
            tag = mix(v as u64) as u32 & 0xfffff,
            ns = v % 20,
        );
    }
    s.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    s
}
