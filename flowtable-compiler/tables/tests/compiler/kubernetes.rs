//! Kubernetes LoadBalancer Services from manifests. Every expectation is taken from GKE's
//! documentation ("About LoadBalancer Services", cited by its section titles) or SPEC R7, R9,
//! R10.5, and checked on the compiled tables (Maglev slots, ACLs, health checks), not on the
//! mapping's own bookkeeping alone.

use flowtable_compiler::{
    compile, BackendHealth, CompileOptions, Compiled, Config, Diagnostics, HealthState, Probe,
};
use nlb_config::kube::{self, Shape, Source, TrafficPolicy};
use nlb_config::parse_sources;
use nlb_hw::enums::Affinity;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

fn parse(files: &[(&str, &str)]) -> (Config, Diagnostics) {
    let sources: Vec<Source> = files
        .iter()
        .map(|(n, t)| Source {
            name: n.to_string(),
            text: t.to_string(),
        })
        .collect();
    parse_sources(&sources)
}

fn config(text: &str) -> Config {
    let (c, d) = parse(&[("cluster.yaml", text)]);
    assert!(d.is_empty(), "{d}");
    c
}

fn errors(text: &str) -> String {
    let (_, d) = parse(&[("cluster.yaml", text)]);
    assert!(!d.is_empty(), "expected an error");
    d.to_string()
}

fn build(c: &Config, health: &HealthState) -> Compiled {
    compile(c, health, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Slots per backend name in the slice a pool's descriptor serves.
fn serving(c: &Compiled, pool: &str) -> BTreeMap<String, usize> {
    let id = c.symbols.pool_id(pool).expect("pool");
    let p = c.tables.pools[usize::from(id)];
    let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
    let mut n = BTreeMap::new();
    for s in &c.tables.maglev[b..b + m] {
        *n.entry(c.symbols.backend(s.backend).unwrap_or("?").to_string())
            .or_insert(0) += 1;
    }
    n
}

fn service<'c>(c: &'c Config, key: &str) -> &'c kube::KubeService {
    c.kubernetes
        .iter()
        .find(|k| k.service == key)
        .unwrap_or_else(|| panic!("no Service {key}"))
}

fn members(k: &kube::KubeService) -> BTreeSet<String> {
    k.nodes()
        .iter()
        .filter(|n| n.member)
        .map(|n| n.node.to_string())
        .collect()
}

/// A Node manifest as the API returns it.
fn node(out: &mut String, name: &str, zone: &str, ip: &str, ready: bool, labels: &[&str]) {
    let _ = write!(
        out,
        "---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    topology.kubernetes.io/zone: {zone}
"
    );
    for l in labels {
        let _ = writeln!(out, "    {l}: \"true\"");
    }
    let _ = write!(
        out,
        "status:
  addresses:
  - {{address: {ip}, type: InternalIP}}
  conditions:
  - {{type: Ready, status: \"{}\"}}
",
        if ready { "True" } else { "False" }
    );
}

/// `n` Ready nodes `node-000`.. in zones a/b/c, 10.0.x.y.
fn nodes(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        node(
            &mut s,
            &format!("node-{i:03}"),
            ["zone-a", "zone-b", "zone-c"][i % 3],
            &format!("10.0.{}.{}", i / 200, i % 200 + 1),
            true,
            &[],
        );
    }
    s
}

/// A LoadBalancer Service; `extra` is more of its `spec` (indented by two).
fn svc(out: &mut String, name: &str, annotations: &[(&str, &str)], extra: &str) {
    let _ = write!(
        out,
        "---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: default
  uid: uid-{name}
  annotations:
"
    );
    for (k, v) in annotations {
        let _ = writeln!(out, "    {k}: \"{v}\"");
    }
    let _ = write!(
        out,
        "spec:
  type: LoadBalancer
  loadBalancerIP: 203.0.113.10
  ports:
  - {{port: 80, protocol: TCP, targetPort: 8080}}
{extra}"
    );
}

/// An EndpointSlice of Service `service`: per endpoint (node, ready, serving, terminating).
fn slice(out: &mut String, service: &str, endpoints: &[(&str, bool, bool, bool)]) {
    let _ = write!(
        out,
        "---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata:
  name: {service}-abcde
  namespace: default
  labels:
    kubernetes.io/service-name: {service}
endpoints:
"
    );
    for (i, (n, ready, serving, terminating)) in endpoints.iter().enumerate() {
        let _ = write!(
            out,
            "- addresses: [10.52.9.{}]
  nodeName: {n}
  conditions: {{ready: {ready}, serving: {serving}, terminating: {terminating}}}
",
            i + 1
        );
    }
}

const LOCAL: &str = "  externalTrafficPolicy: Local\n  healthCheckNodePort: 31000\n";

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/kubernetes")
}

#[test]
fn the_example_cluster_maps_as_seed_003_describes() {
    let c = nlb_config::load_config(&examples()).unwrap_or_else(|e| panic!("{e}"));
    let compiled = build(&c, &HealthState::new());

    // storefront: no class, no annotation: on GKE 1.37+ an external backend-service load
    // balancer with GCE_VM_IP NEGs (GKE, "Load balancer type").
    let s = service(&c, "shop/storefront");
    assert_eq!(s.shape, Shape::External);
    assert_eq!(s.policy, TrafficPolicy::Local);
    // Local: only nodes with a serving pod are NEG endpoints ("Nodes in the external
    // passthrough load balancer": Local uses only nodes with at least one serving Pod); the
    // node whose one pod is terminating but serving still is, the NotReady node and the
    // excluded one never are (SPEC R7.6).
    assert_eq!(
        members(s),
        [
            "gke-shop-default-pool-6d1f2a3b-0x1c",
            "gke-shop-default-pool-6d1f2a3b-7kq2",
            "gke-shop-default-pool-81c4d5e6-m3v9"
        ]
        .map(String::from)
        .into()
    );
    // Health check on healthCheckNodePort, 3 s / 1 s / 1 / 2 (SPEC R7.6).
    let hc = c
        .health_checks
        .iter()
        .find(|h| h.port == 31474)
        .expect("a check on healthCheckNodePort");
    assert_eq!(
        (
            hc.check_interval_sec,
            hc.timeout_sec,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        (3, 1, 1, 2)
    );
    // pods-per-node weighting (SPEC R7.3): new connections in proportion to ready,
    // non-terminating pods: 2 on 0x1c, 1 on m3v9, none on 7kq2 (only a terminating one: it
    // leaves new-connection choice at once, SPEC R10.5).
    let shares = serving(&compiled, &s.pools[0]);
    let total: usize = shares.values().sum();
    let share = |n: &str| *shares.get(n).unwrap_or(&0) as f64 / total as f64;
    assert!((share("gke-shop-default-pool-6d1f2a3b-0x1c") - 2.0 / 3.0).abs() < 0.01);
    assert!((share("gke-shop-default-pool-81c4d5e6-m3v9") - 1.0 / 3.0).abs() < 0.01);
    assert_eq!(share("gke-shop-default-pool-6d1f2a3b-7kq2"), 0.0);
    // loadBalancerSourceRanges are the rules' allow list (SPEC R9.1).
    let rules: Vec<_> = c
        .forwarding_rules
        .iter()
        .filter(|r| r.target.name == s.pools[0])
        .collect();
    assert_eq!(rules.len(), 1, "one TCP rule for ports 80 and 443");
    let ranges: BTreeSet<String> = rules[0]
        .source_ranges
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        ranges,
        ["198.51.100.0/24", "192.0.2.0/25"].map(String::from).into()
    );
    let ports: Vec<(u16, u16)> = rules[0].port_ranges.iter().map(|r| (r.lo, r.hi)).collect();
    assert_eq!(ports, vec![(80, 80), (443, 443)]);
    assert_eq!(rules[0].ip_address.to_string(), "203.0.113.70");

    // resolver: class l4-regional-internal, Cluster, dual stack, ClientIP (kube-proxy's 1800 s), UDP and TCP
    // port 53.
    let r = service(&c, "infra/resolver");
    assert_eq!(r.shape, Shape::Internal);
    assert_eq!(r.policy, TrafficPolicy::Cluster);
    assert_eq!(r.pools.len(), 2, "one backend service per IP family");
    assert_eq!(r.vips.len(), 2);
    assert!(r.vips[0].is_ipv4() && r.vips[1].is_ipv6());
    // VIPs from the project's address pools (the Service has no loadBalancerIP).
    assert!(r.vips[0].to_string().starts_with("203.0.113."));
    assert!(r.vips[1].to_string().starts_with("2001:db8:64::"));
    // Cluster: every node not excluded, with or without a pod (GKE), the NotReady one
    // included: only its health check takes it out (SPEC R7.6).
    assert_eq!(members(r).len(), 4);
    for pool in &r.pools {
        let bs = c.backend_services.iter().find(|b| &b.name == pool).unwrap();
        assert_eq!(bs.session_affinity, Affinity::ClientIp);
        // timeoutSeconds 1800 is kube-proxy's: the internal load balancer's idle timeout
        // stays 600 s (SPEC R7.6).
        assert_eq!(bs.idle_timeout_sec, 600);
        let hc = c
            .health_checks
            .iter()
            .find(|h| h.name == bs.health_checks[0].name)
            .unwrap();
        // kube-proxy /healthz on 10256, 8 s / 1 s / 1 / 3 (SPEC R7.1, R7.6).
        assert_eq!(hc.port, 10256);
        assert!(
            matches!(&hc.probe, Probe::Http { request_path, .. } if request_path == "/healthz")
        );
        assert_eq!(
            (
                hc.check_interval_sec,
                hc.timeout_sec,
                hc.healthy_threshold,
                hc.unhealthy_threshold
            ),
            (8, 1, 1, 3)
        );
        // The NotReady node has no IPv6 InternalIP: three IPv6 backends.
        let want = if pool.ends_with("-v6") { 3 } else { 4 };
        assert_eq!(serving(&compiled, pool).len(), want, "{pool}");
    }
    let v6 = serving(&compiled, &r.pools[1]);
    assert!(v6.keys().all(|b| b.ends_with(".ipv6")), "{v6:?}");
    let protos: BTreeSet<String> = c
        .forwarding_rules
        .iter()
        .filter(|f| r.pools.contains(&f.target.name))
        .map(|f| format!("{:?} {}", f.ip_protocol, f.ip_address.is_ipv6()))
        .collect();
    assert_eq!(protos.len(), 4, "TCP and UDP on each family: {protos:?}");

    // legacy-api: class l4-regional-external-legacy: a target pool of every node.
    let l = service(&c, "shop/legacy-api");
    assert_eq!(l.shape, Shape::LegacyTargetPool);
    let tp = c
        .target_pools
        .iter()
        .find(|p| p.name == l.pools[0])
        .unwrap();
    assert_eq!(tp.instances.len(), 3);
    assert_eq!(
        l.vips[0].to_string(),
        "203.0.113.90",
        "status.loadBalancer.ingress"
    );

    // The ClusterIP Service is no load balancer's.
    assert!(!c.kubernetes.iter().any(|k| k.service.contains("internal")));
}

#[test]
fn the_shape_follows_the_class_then_the_annotations() {
    // GKE, "Load balancer type" and "Node grouping".
    type Annotations<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(Annotations, &str, Option<Shape>)] = &[
        (&[], "", Some(Shape::External)),
        (
            &[],
            "  loadBalancerClass: networking.gke.io/l4-regional-external\n",
            Some(Shape::External),
        ),
        (
            &[("cloud.google.com/l4-rbs", "enabled")],
            "",
            Some(Shape::External),
        ),
        (
            &[],
            "  loadBalancerClass: networking.gke.io/l4-regional-internal\n",
            Some(Shape::Internal),
        ),
        (
            &[("networking.gke.io/load-balancer-type", "Internal")],
            "",
            Some(Shape::Internal),
        ),
        (
            &[],
            "  loadBalancerClass: networking.gke.io/l4-regional-external-legacy\n",
            Some(Shape::LegacyTargetPool),
        ),
        // Another controller's class: not ours to serve.
        (&[], "  loadBalancerClass: example.com/metallb\n", None),
    ];
    for (annotations, extra, want) in cases {
        let mut t = nodes(2);
        svc(&mut t, "web", annotations, extra);
        let c = config(&t);
        let got = c.kubernetes.first().map(|k| k.shape);
        assert_eq!(got, *want, "{annotations:?} {extra}");
        if want.is_none() {
            assert!(c.forwarding_rules.is_empty());
            assert!(c.notes.iter().any(|n| n.contains("another controller")));
        }
    }
}

/// Subset limits of GKE ("Node membership in GCE_VM_IP NEG backends") and SPEC R7.5.
#[test]
fn subsets_respect_the_limits_of_each_shape_and_policy() {
    let internal = "  loadBalancerClass: networking.gke.io/l4-regional-internal\n";
    // Internal, Cluster: all nodes up to 25, then a subset of 25.
    for (n, want) in [(25, 25), (26, 25), (40, 25)] {
        let mut t = nodes(n);
        svc(&mut t, "web", &[], internal);
        assert_eq!(members(&config(&t).kubernetes[0]).len(), want, "{n} nodes");
    }
    // External, Cluster: up to 250.
    for (n, want) in [(250, 250), (260, 250)] {
        let mut t = nodes(n);
        svc(&mut t, "web", &[], "");
        assert_eq!(members(&config(&t).kubernetes[0]).len(), want, "{n} nodes");
    }
    // Local: only serving nodes, at most 250 internal.
    let mut t = nodes(260);
    svc(&mut t, "web", &[], &format!("{internal}{LOCAL}"));
    let names: Vec<String> = (0..260).map(|i| format!("node-{i:03}")).collect();
    let eps: Vec<(&str, bool, bool, bool)> = names
        .iter()
        .map(|n| (n.as_str(), true, true, false))
        .collect();
    slice(&mut t, "web", &eps);
    assert_eq!(members(&config(&t).kubernetes[0]).len(), 250);
    // External Local: 260 serving nodes are all members (limit 3000).
    let mut t = nodes(260);
    svc(&mut t, "web", &[], LOCAL);
    slice(&mut t, "web", &eps);
    assert_eq!(members(&config(&t).kubernetes[0]).len(), 260);
    // Local with pods on 3 of 40 nodes: those 3.
    let mut t = nodes(40);
    svc(&mut t, "web", &[], &format!("{internal}{LOCAL}"));
    slice(
        &mut t,
        "web",
        &[
            ("node-003", true, true, false),
            ("node-017", true, true, false),
            ("node-017", true, true, false),
            ("node-031", false, false, false),
        ],
    );
    assert_eq!(
        members(&config(&t).kubernetes[0]),
        ["node-003", "node-017"].map(String::from).into()
    );
}

/// SPEC R7.5: "the subset must be stable when nodes come and go": a node that joins displaces
/// at most one member; a non-member that leaves changes nothing; a member that leaves is
/// replaced by exactly one other node.
#[test]
fn subsets_are_stable_when_nodes_come_and_go() {
    let internal = "  loadBalancerClass: networking.gke.io/l4-regional-internal\n";
    let subset = |n: usize, skip: Option<usize>| {
        let mut t = String::new();
        for i in (0..n).filter(|i| Some(*i) != skip) {
            node(
                &mut t,
                &format!("node-{i:03}"),
                "zone-a",
                &format!("10.0.0.{}", i + 1),
                true,
                &[],
            );
        }
        svc(&mut t, "web", &[], internal);
        members(&config(&t).kubernetes[0])
    };
    let base = subset(60, None);
    assert_eq!(base.len(), 25);
    let grown = subset(61, None);
    assert!(base.difference(&grown).count() <= 1);
    let outsider = (0..60)
        .find(|i| !base.contains(&format!("node-{i:03}")))
        .unwrap();
    assert_eq!(subset(60, Some(outsider)), base);
    let insider = (0..60)
        .find(|i| base.contains(&format!("node-{i:03}")))
        .unwrap();
    let shrunk = subset(60, Some(insider));
    assert_eq!(shrunk.len(), 25);
    assert_eq!(base.difference(&shrunk).count(), 1);
    // Another Service (another UID) gets another subset: the load spreads over the nodes.
    let mut t = nodes(60);
    svc(&mut t, "web", &[], internal);
    let mut t2 = t.replace("uid-web", "uid-other");
    t2.push('\n');
    let a = members(&config(&t).kubernetes[0]);
    let b = members(&config(&t2).kubernetes[0]);
    assert_ne!(a, b);
}

/// GKE's "Load balancer health checks" and SPEC R7.6: nodes labelled
/// node.kubernetes.io/exclude-from-external-load-balancers are never backends; a NotReady node
/// stays a backend of the NEG-based load balancers (GKE's NEG controller keeps unready
/// candidate nodes in `GCE_VM_IP` NEGs) and only its health check takes it out.
#[test]
fn excluded_nodes_are_never_backends_and_not_ready_ones_stay_neg_backends() {
    let mut t = String::new();
    node(&mut t, "a", "zone-a", "10.0.0.1", true, &[]);
    node(&mut t, "b", "zone-a", "10.0.0.2", false, &[]);
    node(
        &mut t,
        "c",
        "zone-b",
        "10.0.0.3",
        true,
        &["node.kubernetes.io/exclude-from-external-load-balancers"],
    );
    node(&mut t, "d", "zone-b", "10.0.0.4", true, &[]);
    svc(&mut t, "cl", &[], "");
    let mut t2 = t.clone();
    svc(&mut t2, "lo", &[], LOCAL);
    slice(
        &mut t2,
        "lo",
        &[
            ("a", true, true, false),
            ("b", true, true, false),
            ("c", true, true, false),
        ],
    );
    let t2 = t2.replace(
        "  loadBalancerIP: 203.0.113.10\n  ports:\n  - {port: 80, protocol: TCP, targetPort: 8080}\n  externalTrafficPolicy",
        "  loadBalancerIP: 203.0.113.11\n  ports:\n  - {port: 80, protocol: TCP, targetPort: 8080}\n  externalTrafficPolicy",
    );
    let c = config(&t2);
    assert_eq!(
        members(service(&c, "default/cl")),
        ["a", "b", "d"].map(String::from).into()
    );
    assert_eq!(
        members(service(&c, "default/lo")),
        ["a", "b"].map(String::from).into()
    );
    let verdicts = service(&c, "default/cl").nodes();
    let why: BTreeMap<&str, &str> = verdicts.iter().map(|n| (&*n.node, &*n.why)).collect();
    assert!(
        why["b"].contains("not Ready, still a NEG backend"),
        "{why:?}"
    );
    assert!(why["c"].contains("exclude-from-external-load-balancers"));
    let pool = &service(&c, "default/cl").pools[0];
    let compiled = build(&c, &HealthState::new());
    assert_eq!(
        serving(&compiled, pool).keys().cloned().collect::<Vec<_>>(),
        ["a", "b", "d"]
    );
    // The NotReady node's check fails (kube-proxy's /healthz on a sick node): out.
    let mut h = HealthState::new();
    h.set_member_healthy(pool, "b", false);
    let compiled = build(&c, &h);
    assert_eq!(
        serving(&compiled, pool).keys().cloned().collect::<Vec<_>>(),
        ["a", "d"]
    );
}

/// SPEC R7.3, R5.6 and GKE's "Weighted load balancing": weights only with Local; Cluster
/// with the annotation warns and does not weight.
#[test]
fn pods_per_node_weights_only_with_local() {
    let eps = [
        ("node-000", true, true, false),
        ("node-000", true, true, false),
        ("node-000", true, true, false),
        ("node-001", true, true, false),
    ];
    let weighted = [("networking.gke.io/weighted-load-balancing", "pods-per-node")];
    let mut t = nodes(2);
    svc(&mut t, "web", &weighted, LOCAL);
    slice(&mut t, "web", &eps);
    let c = config(&t);
    let s = serving(&build(&c, &HealthState::new()), &c.kubernetes[0].pools[0]);
    let f = s["node-000"] as f64 / (s["node-000"] + s["node-001"]) as f64;
    assert!((f - 0.75).abs() < 0.01, "{s:?}");
    // A probe-reported weight wins over the EndpointSlice count (it is the same number when
    // the node's agent answers, SPEC R7.1; the probe is the later word).
    let mut h = HealthState::new();
    for (n, w) in [("node-000", 1), ("node-001", 1)] {
        h.set_member(
            &c.kubernetes[0].pools[0],
            n,
            BackendHealth {
                healthy: true,
                weight: Some(w),
            },
        );
    }
    let s = serving(&build(&c, &h), &c.kubernetes[0].pools[0]);
    assert!(s["node-000"].abs_diff(s["node-001"]) <= 1, "{s:?}");

    // Without the annotation: equal shares.
    let mut t = nodes(2);
    svc(&mut t, "web", &[], LOCAL);
    slice(&mut t, "web", &eps);
    let c = config(&t);
    let s = serving(&build(&c, &HealthState::new()), &c.kubernetes[0].pools[0]);
    assert!(s["node-000"].abs_diff(s["node-001"]) <= 1, "{s:?}");

    // Cluster with the annotation: a warning, equal shares.
    let mut t = nodes(2);
    svc(&mut t, "web", &weighted, "");
    slice(&mut t, "web", &eps);
    let c = config(&t);
    assert!(c.kubernetes[0]
        .notes
        .iter()
        .any(|n| n.starts_with("warning:") && n.contains("Local")));
    let s = serving(&build(&c, &HealthState::new()), &c.kubernetes[0].pools[0]);
    assert!(s["node-000"].abs_diff(s["node-001"]) <= 1, "{s:?}");
}

/// SPEC R10.5 and R7.2: a node whose endpoints are all terminating (or not ready) takes no new
/// connection while another node has a ready one; when no node has one, the nodes with
/// serving terminating endpoints take them (the load balancer fails open, SPEC R3.4, and
/// kube-proxy sends to the terminating pods: proxy terminating endpoints).
#[test]
fn terminating_endpoints_leave_new_connection_choice_unless_all_are() {
    let mut t = nodes(3);
    svc(&mut t, "web", &[], LOCAL);
    let mut a = t.clone();
    slice(
        &mut a,
        "web",
        &[
            ("node-000", true, true, false),
            ("node-001", false, true, true),
            ("node-002", false, false, false),
        ],
    );
    let c = config(&a);
    let k = &c.kubernetes[0];
    // node-002 has an endpoint that is not serving: not a NEG endpoint at all.
    assert_eq!(
        members(k),
        ["node-000", "node-001"].map(String::from).into()
    );
    let compiled = build(&c, &HealthState::new());
    assert_eq!(
        serving(&compiled, &k.pools[0])
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        ["node-000"]
    );
    let report = compiled
        .pools
        .iter()
        .find(|p| p.name == k.pools[0])
        .unwrap();
    assert!(
        report.why.contains("without a ready endpoint"),
        "{}",
        report.why
    );

    let mut b = t.clone();
    slice(
        &mut b,
        "web",
        &[
            ("node-000", false, true, true),
            ("node-001", false, true, true),
        ],
    );
    let c = config(&b);
    let got = serving(&build(&c, &HealthState::new()), &c.kubernetes[0].pools[0]);
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        ["node-000", "node-001"]
    );
}

/// SPEC R7.6: `sessionAffinity: ClientIP` is CLIENT_IP; its `timeoutSeconds` is kube-proxy's
/// (how long kube-proxy keeps a client on one pod), not the load balancer's. GKE's L4
/// controllers (kubernetes/ingress-gce, `connectionTrackingPolicy()` of its L4 NetLB) set no
/// connection tracking policy unless the Service asks for strong session affinity
/// (`networking.gke.io/l4-strong-session-affinity: enabled`, which needs ClientIP and a
/// timeoutSeconds in 60..=57600, and then sets `idleTimeoutSec` to it); so the idle timeout
/// stays Google Cloud's: 60 s for the external load balancer, 600 s for the internal one.
#[test]
fn client_ip_affinity_and_its_timeout() {
    let internal = "  loadBalancerClass: networking.gke.io/l4-regional-internal\n";
    let strong = [("networking.gke.io/l4-strong-session-affinity", "enabled")];
    let client_ip = |timeout: &str| {
        format!(
            "  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: {timeout}\n"
        )
    };
    type Annotations<'a> = &'a [(&'a str, &'a str)];
    let cases: Vec<(Annotations, String, Affinity, u16)> = vec![
        (&[], String::new(), Affinity::None, 60),
        (
            &[],
            "  sessionAffinity: ClientIP\n".into(),
            Affinity::ClientIp,
            60,
        ),
        (&[], client_ip("300"), Affinity::ClientIp, 60),
        // kube-proxy's timeout may be up to a day: not the connection table's concern.
        (&[], client_ip("86400"), Affinity::ClientIp, 60),
        (
            &[],
            format!("{internal}{}", client_ip("1800")),
            Affinity::ClientIp,
            600,
        ),
        (&strong, client_ip("3600"), Affinity::ClientIp, 3600),
    ];
    for (annotations, extra, affinity, idle) in cases {
        let mut t = nodes(2);
        svc(&mut t, "web", annotations, &extra);
        let c = config(&t);
        let b = &c.backend_services[0];
        assert_eq!(
            (b.session_affinity, b.idle_timeout_sec),
            (affinity, idle),
            "{annotations:?} {extra}"
        );
        let compiled = build(&c, &HealthState::new());
        let id = compiled.symbols.pool_id(&b.name).unwrap();
        let p = compiled.tables.pools[usize::from(id)];
        assert_eq!(p.affinity, affinity, "the table descriptor carries the key");
        assert_eq!(p.idle_timeout, idle, "the connection table ages by it");
    }
    // Strong session affinity asked of an internal Service: GKE offers it for external ones.
    let mut t = nodes(2);
    svc(
        &mut t,
        "web",
        &strong,
        &format!("{internal}{}", client_ip("3600")),
    );
    let c = config(&t);
    assert_eq!(c.backend_services[0].idle_timeout_sec, 600);
    assert!(
        c.kubernetes[0]
            .notes
            .iter()
            .any(|n| n.contains("l4-strong-session-affinity") && n.contains("external")),
        "{:?}",
        c.kubernetes[0].notes
    );
    // What GKE refuses is an error at its file, line and field.
    let mut t = nodes(1);
    svc(&mut t, "web", &strong, "");
    let msg = errors(&t);
    assert!(
        msg.contains(
            "Service/web.metadata.annotations.networking.gke.io/l4-strong-session-affinity"
        ) && msg.contains("sessionAffinity: ClientIP"),
        "{msg}"
    );
    let mut t = nodes(1);
    svc(&mut t, "web", &strong, &client_ip("30"));
    let msg = errors(&t);
    assert!(
        msg.contains("cluster.yaml:")
            && msg.contains("sessionAffinityConfig.clientIP.timeoutSeconds")
            && msg.contains("60..=57600"),
        "{msg}"
    );
    let mut t = nodes(1);
    svc(&mut t, "web", &strong, "  sessionAffinity: ClientIP\n");
    let msg = errors(&t);
    assert!(msg.contains("timeoutSeconds"), "{msg}");
    let mut t = nodes(1);
    svc(
        &mut t,
        "web",
        &[("networking.gke.io/l4-strong-session-affinity", "yes")],
        &client_ip("3600"),
    );
    let msg = errors(&t);
    assert!(msg.contains("(valid: enabled)"), "{msg}");
}

#[test]
fn ports_protocols_and_families() {
    // Seven TCP ports and one UDP port, IPv6 single stack.
    let mut t = String::new();
    for i in 0..3 {
        let _ = write!(
            t,
            "---
apiVersion: v1
kind: Node
metadata: {{name: n{i}}}
status:
  addresses:
  - {{address: 10.0.0.{i}, type: InternalIP}}
  - {{address: 'fd00::{i}', type: InternalIP}}
  conditions: [{{type: Ready, status: 'True'}}]
"
        );
    }
    t.push_str(
        "---
apiVersion: v1
kind: Service
metadata: {name: v6, namespace: default}
spec:
  type: LoadBalancer
  ipFamilies: [IPv6]
  loadBalancerIP: 2001:db8::10
  ports:
  - {port: 80}
  - {port: 81}
  - {port: 82}
  - {port: 90}
  - {port: 91}
  - {port: 100}
  - {port: 443}
  - {port: 53, protocol: UDP}
",
    );
    let c = config(&t);
    let rules: BTreeMap<String, Vec<(u16, u16)>> = c
        .forwarding_rules
        .iter()
        .map(|r| {
            (
                format!("{:?}", r.ip_protocol),
                r.port_ranges.iter().map(|p| (p.lo, p.hi)).collect(),
            )
        })
        .collect();
    // More than five ports: one range from the lowest to the highest (a rule holds five).
    assert_eq!(rules["Tcp"], vec![(80, 443)]);
    assert_eq!(rules["Udp"], vec![(53, 53)]);
    assert!(c.forwarding_rules.iter().all(|r| r.ip_address.is_ipv6()));
    // Single-stack IPv6: the nodes' IPv6 InternalIPs, named after the nodes (`NODE.ipv6` for
    // a node that also has an IPv4 address, whatever the Service, so a name keeps its address).
    let names: BTreeSet<&str> = c.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["n0.ipv6", "n1.ipv6", "n2.ipv6"].into());
    assert!(c.instances.iter().all(|i| i.ip.is_ipv6()));
    build(&c, &HealthState::new());
}

#[test]
fn addresses_from_a_pool_are_distinct_stable_and_run_out_clearly() {
    let project = "nic: {mac: 02:00:00:00:00:01}\nkubernetes:\n  addressPools: [198.51.100.0/30]\n";
    let two = |names: &[&str]| {
        let mut t = nodes(2);
        for n in names {
            svc(&mut t, n, &[], "");
        }
        t.replace("  loadBalancerIP: 203.0.113.10\n", "")
    };
    let (c, d) = parse(&[("project.yaml", project), ("svc.yaml", &two(&["a", "b"]))]);
    assert!(d.is_empty(), "{d}");
    let vips: BTreeSet<String> = c.kubernetes.iter().map(|k| k.vips[0].to_string()).collect();
    // A /30 has two usable addresses: .1 and .2.
    assert_eq!(
        vips,
        ["198.51.100.1", "198.51.100.2"].map(String::from).into()
    );
    let (_, d) = parse(&[
        ("project.yaml", project),
        ("svc.yaml", &two(&["a", "b", "c"])),
    ]);
    let msg = d.to_string();
    assert!(msg.contains("svc.yaml:"), "{msg}");
    assert!(msg.contains("no IPv4 address left"), "{msg}");
    // Without pools, a Service without an address is an error that says what to do.
    let msg = errors(&two(&["a"]));
    assert!(msg.contains("kubernetes.addressPools"), "{msg}");
}

#[test]
fn bad_manifests_are_reported_by_file_line_and_field() {
    let mut t = nodes(1);
    svc(&mut t, "web", &[], "  externalTrafficPolicy: Locale\n");
    let msg = errors(&t);
    let line = t
        .lines()
        .position(|l| l.contains("Locale"))
        .map(|i| i + 1)
        .unwrap();
    assert!(
        msg.contains(&format!("cluster.yaml:{line}:")),
        "line {line}: {msg}"
    );
    assert!(
        msg.contains("Service/web.spec.externalTrafficPolicy"),
        "{msg}"
    );
    assert!(msg.contains("Cluster, Local"), "{msg}");

    for (bad, field) in [
        (
            "  loadBalancerSourceRanges: [10.0.0.0/33]\n",
            "loadBalancerSourceRanges[0]",
        ),
        ("  ipFamilies: [IPv5]\n", "ipFamilies[0]"),
        ("  sessionAffinity: Cookie\n", "sessionAffinity"),
        ("  externalTrafficPolicy: Local\n", "healthCheckNodePort"),
    ] {
        let mut t = nodes(1);
        svc(&mut t, "web", &[], bad);
        let msg = errors(&t);
        assert!(
            msg.contains(&format!("Service/web.spec.{field}")),
            "{bad}: {msg}"
        );
    }
    let mut t = nodes(1);
    svc(&mut t, "web", &[], "");
    let msg = errors(&t.replace("port: 80,", "port: http,"));
    assert!(msg.contains("spec.ports[0].port"), "{msg}");
    // A kind: List reports the item's place.
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: x}\n  spec: {type: LoadBalancer, loadBalancerIP: 10.0.0.300, ports: [{port: 80}]}\n";
    let msg = errors(list);
    assert!(msg.contains("cluster.yaml:7:"), "{msg}");
    assert!(
        msg.contains("items[0](Service/x).spec.loadBalancerIP"),
        "{msg}"
    );
}

#[test]
fn json_list_streams_are_read_like_yaml() {
    // `kubectl get -o json` output: one List object.
    let json = r#"{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z"}},
     "status": {"addresses": [{"address": "10.0.0.1", "type": "InternalIP"}],
                "conditions": [{"type": "Ready", "status": "True"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default", "uid": "u"},
     "spec": {"type": "LoadBalancer", "loadBalancerIP": "203.0.113.5",
              "ports": [{"port": 80, "protocol": "TCP"}]}}
  ]
}"#;
    let (c, d) = parse(&[("-", json)]);
    assert!(d.is_empty(), "{d}");
    assert_eq!(c.kubernetes.len(), 1);
    assert_eq!(members(&c.kubernetes[0]), ["n1"].map(String::from).into());
    build(&c, &HealthState::new());
}

/// `nlbctl explain` on a Service: every node, eligible for a new connection or not, and why.
#[test]
fn eligibility_names_every_node_and_the_reason() {
    let mut t = String::new();
    node(&mut t, "ready-2", "zone-a", "10.0.0.1", true, &[]);
    node(&mut t, "ready-1", "zone-b", "10.0.0.2", true, &[]);
    node(&mut t, "terminating", "zone-a", "10.0.0.3", true, &[]);
    node(&mut t, "probe-down", "zone-b", "10.0.0.4", true, &[]);
    node(&mut t, "no-pods", "zone-b", "10.0.0.5", true, &[]);
    node(&mut t, "not-ready", "zone-a", "10.0.0.6", false, &[]);
    svc(
        &mut t,
        "web",
        &[("networking.gke.io/weighted-load-balancing", "pods-per-node")],
        LOCAL,
    );
    slice(
        &mut t,
        "web",
        &[
            ("ready-2", true, true, false),
            ("ready-2", true, true, false),
            ("ready-1", true, true, false),
            ("terminating", false, true, true),
            ("probe-down", true, true, false),
            ("not-ready", true, true, false),
        ],
    );
    let c = config(&t);
    let k = &c.kubernetes[0];
    let pool = &k.pools[0];
    let mut h = HealthState::new();
    h.set_member_healthy(pool, "probe-down", false);
    h.set_member_healthy(pool, "not-ready", false);
    let compiled = build(&c, &h);
    let e: BTreeMap<String, kube::NodeEligibility> = k
        .eligibility(&compiled.served_slice(pool), pool, &h)
        .into_iter()
        .map(|n| (n.node.clone(), n))
        .collect();
    assert_eq!(e.len(), 6);
    let eligible: BTreeSet<&str> = e
        .values()
        .filter(|n| n.eligible)
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(eligible, ["ready-1", "ready-2"].into());
    // Weighted by ready pods: 2 to 1 (SPEC R7.3).
    assert!(
        (e["ready-2"].share - 2.0 / 3.0).abs() < 0.01,
        "{:?}",
        e["ready-2"]
    );
    assert!(e["terminating"].member && e["terminating"].why.contains("SPEC R10.5"));
    assert!(e["probe-down"].member && e["probe-down"].why.contains("fails its health check"));
    assert!(!e["no-pods"].member && e["no-pods"].why.contains("no serving endpoint"));
    // A NotReady node stays a NEG backend; its failing check takes it out (SPEC R7.6).
    assert!(
        e["not-ready"].member
            && e["not-ready"]
                .why
                .contains("not Ready, still a NEG backend")
            && e["not-ready"].why.contains("fails its health check"),
        "{:?}",
        e["not-ready"]
    );
    // The policy report's group shares are the weighted ones: zone-a holds 2 of 3 ready pods.
    let report = compiled.pools.iter().find(|p| &p.name == pool).unwrap();
    assert!(report.why.contains("66.7 %"), "{}", report.why);
    // And the rule that decided says so.
    let rule = &compiled.service_decision(pool).unwrap().rule;
    assert!(
        rule.contains("no serviceLbPolicy") && rule.contains("WEIGHTED_MAGLEV"),
        "{rule}"
    );
}

/// GKE's zonal affinity (SPEC R7.4): an internal Service with `trafficDistribution:
/// PreferClose` sends new connections only to nodes of the client's zone (the NIC's,
/// `nic.zone`) while that zone has at least one healthy eligible node; otherwise to all
/// eligible nodes (spill ratio 0). External Services do not get it.
#[test]
fn zonal_affinity_keeps_new_connections_in_the_nics_zone_until_it_has_no_healthy_node() {
    let nic = "---\nnic:\n  zone: zone-a\n";
    // nodes(6): node-000, node-003 in zone-a; 001, 004 in zone-b; 002, 005 in zone-c.
    let internal = [("networking.gke.io/load-balancer-type", "Internal")];
    let mut t = nodes(6);
    t.push_str(nic);
    svc(
        &mut t,
        "web",
        &internal,
        "  trafficDistribution: PreferClose\n",
    );
    let c = config(&t);
    let k = service(&c, "default/web");
    assert!(k.zonal_affinity && k.client_zone == "zone-a");
    let pool = k.pools[0].clone();
    let zone_a: BTreeSet<String> = ["node-000", "node-003"].map(String::from).into();
    let keys = |m: BTreeMap<String, usize>| m.into_keys().collect::<BTreeSet<String>>();

    // Every node healthy: only zone-a's nodes take new connections.
    let all_up = HealthState::new();
    assert_eq!(keys(serving(&build(&c, &all_up), &pool)), zone_a);
    // One of zone-a's two nodes fails its check: the other alone (still one healthy there).
    let mut one_down = HealthState::new();
    one_down.set_member_healthy(&pool, "node-000", false);
    let compiled = build(&c, &one_down);
    assert_eq!(
        keys(serving(&compiled, &pool)),
        ["node-003"].map(String::from).into()
    );
    let why: BTreeMap<String, kube::NodeEligibility> = k
        .eligibility(&compiled.served_slice(&pool), &pool, &one_down)
        .into_iter()
        .map(|n| (n.node.clone(), n))
        .collect();
    assert!(
        !why["node-001"].eligible && why["node-001"].why.contains("zonal affinity"),
        "{:?}",
        why["node-001"]
    );
    assert!(
        why["node-003"].why.contains("zone-a"),
        "{:?}",
        why["node-003"]
    );
    // Both fail: every other node of every other zone (among all, not one next zone).
    let mut zone_down = one_down.clone();
    zone_down.set_member_healthy(&pool, "node-003", false);
    let compiled = build(&c, &zone_down);
    let spread = serving(&compiled, &pool);
    assert_eq!(
        keys(spread.clone()),
        ["node-001", "node-002", "node-004", "node-005"]
            .map(String::from)
            .into()
    );
    // ... in equal shares (Maglev slots within 5 % of a quarter).
    let total: usize = spread.values().sum();
    for (n, s) in &spread {
        let f = *s as f64 / total as f64;
        assert!((f - 0.25).abs() < 0.05, "{n}: {f}");
    }
    let why = k.eligibility(&compiled.served_slice(&pool), &pool, &zone_down);
    let b = why.iter().find(|n| n.node == "node-004").unwrap();
    assert!(b.why.contains("every zone serves"), "{b:?}");

    // With Local, the EndpointSlices decide too: zone-a's only ready pod terminating moves
    // new connections to the other zones at once (SPEC R10.5 with R7.4).
    let mut l = nodes(6);
    l.push_str(nic);
    svc(
        &mut l,
        "web",
        &internal,
        &format!("{LOCAL}  trafficDistribution: PreferClose\n"),
    );
    let mut ready = l.clone();
    slice(
        &mut ready,
        "web",
        &[
            ("node-000", true, true, false),
            ("node-001", true, true, false),
            ("node-002", true, true, false),
        ],
    );
    let c = config(&ready);
    assert_eq!(
        keys(serving(&build(&c, &all_up), &c.kubernetes[0].pools[0])),
        ["node-000"].map(String::from).into()
    );
    let mut terminating = l.clone();
    slice(
        &mut terminating,
        "web",
        &[
            ("node-000", false, true, true),
            ("node-001", true, true, false),
            ("node-002", true, true, false),
        ],
    );
    let c = config(&terminating);
    assert_eq!(
        keys(serving(&build(&c, &all_up), &c.kubernetes[0].pools[0])),
        ["node-001", "node-002"].map(String::from).into()
    );

    // External Service: GKE does not offer it, a warning, every zone serves.
    let mut e = nodes(6);
    e.push_str(nic);
    svc(&mut e, "web", &[], "  trafficDistribution: PreferClose\n");
    let c = config(&e);
    let k = service(&c, "default/web");
    assert!(!k.zonal_affinity);
    assert!(k.notes.iter().any(|n| n.contains("internal Services only")));
    assert_eq!(serving(&build(&c, &all_up), &k.pools[0]).len(), 6);
    // A value Kubernetes does not define: file, line, field, the valid ones.
    let mut bad = nodes(1);
    svc(
        &mut bad,
        "web",
        &internal,
        "  trafficDistribution: Nearby\n",
    );
    let msg = errors(&bad);
    assert!(
        msg.contains("Service/web.spec.trafficDistribution") && msg.contains("PreferClose"),
        "{msg}"
    );
    // The setting is part of the configuration's identity (SPEC R10.4).
    let mut plain = nodes(6);
    plain.push_str(nic);
    svc(&mut plain, "web", &internal, "");
    let with = config(&t);
    let without = config(&plain);
    assert_ne!(
        build(&with, &all_up).config_digest,
        build(&without, &all_up).config_digest
    );
}

/// `kubernetes.endpointSliceTracking: false` (docs/kubernetes.md): a `Local` Service behaves as
/// on GKE ("Load balancer health checks": a node without a ready,
/// non-terminating pod fails the check on healthCheckNodePort, and until the unhealthy
/// threshold is reached it still passes): every eligible node is a backend and only the
/// health check takes one out; the EndpointSlices no longer do (SPEC R10.5 is given up).
#[test]
fn without_endpoint_slice_tracking_only_the_health_check_takes_a_node_out() {
    let mut t = nodes(3);
    t.push_str("---\nkubernetes:\n  endpointSliceTracking: false\n");
    svc(&mut t, "web", &[], LOCAL);
    slice(
        &mut t,
        "web",
        &[
            ("node-000", true, true, false),
            ("node-001", false, true, true),
        ],
    );
    let c = config(&t);
    let k = service(&c, "default/web");
    let all: BTreeSet<String> = ["node-000", "node-001", "node-002"]
        .map(String::from)
        .into();
    assert_eq!(members(k), all, "every eligible node is a backend");
    assert!(k.ready_endpoints.is_empty());
    assert!(k.notes.iter().any(|n| n.contains("tracking is off")));
    let pool = k.pools[0].clone();
    // Probes not answered yet: the terminating node-001 and the pod-less node-002 still serve.
    let got = serving(&build(&c, &HealthState::new()), &pool);
    assert_eq!(got.into_keys().collect::<BTreeSet<_>>(), all);
    // Their checks fail: only node-000.
    let mut h = HealthState::new();
    h.set_member_healthy(&pool, "node-001", false);
    h.set_member_healthy(&pool, "node-002", false);
    let got = serving(&build(&c, &h), &pool);
    assert_eq!(
        got.into_keys().collect::<Vec<_>>(),
        vec!["node-000".to_string()]
    );
    // A bad value: file, line, field and what is valid.
    let bad = format!(
        "{}---\nkubernetes:\n  endpointSliceTracking: sometimes\n",
        nodes(1)
    );
    let msg = errors(&bad);
    assert!(
        msg.contains("kubernetes.endpointSliceTracking") && msg.contains("true or false"),
        "{msg}"
    );
}

/// Share of new connections per node from a compile's decision (what the tables serve).
fn node_shares(compiled: &Compiled, pool: &str) -> BTreeMap<String, f64> {
    compiled
        .service_decision(pool)
        .expect("a backend service")
        .endpoint_shares
        .clone()
}

#[track_caller]
fn assert_equal_shares(shares: &BTreeMap<String, f64>, nodes: &[&str]) {
    assert_eq!(
        shares.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        nodes.iter().copied().collect::<BTreeSet<_>>(),
        "{shares:?}"
    );
    for n in nodes {
        assert!(
            (shares[*n] - 1.0 / nodes.len() as f64).abs() < 1e-9,
            "{n}: {shares:?}"
        );
    }
}

/// SPEC R7.1: "new connections spread over the healthy eligible nodes alike, whatever their
/// zone (MAGLEV over the healthy backends)". GKE gives an unweighted Service's backend service
/// `localityLbPolicy` MAGLEV and no service LB policy (kubernetes/ingress-gce sets
/// WEIGHTED_MAGLEV only for `pods-per-node`), and a passthrough load balancer "distributes new
/// connections to its healthy backend VMs" (Google Cloud, traffic distribution for internal
/// passthrough Network Load Balancers). A zone's share therefore follows its healthy nodes,
/// not its member count, and a zone is never parked behind the others.
#[test]
fn an_unweighted_service_shares_new_connections_equally_over_its_healthy_nodes() {
    // Two nodes in zone-a, two in zone-b; a1 fails its check: a third each to a2, b1, b2
    // (not half to a2 because zone-a has two members).
    let mut t = String::new();
    node(&mut t, "a1", "zone-a", "10.0.0.1", true, &[]);
    node(&mut t, "a2", "zone-a", "10.0.0.2", true, &[]);
    node(&mut t, "b1", "zone-b", "10.0.0.3", true, &[]);
    node(&mut t, "b2", "zone-b", "10.0.0.4", true, &[]);
    svc(&mut t, "web", &[], "");
    let c = config(&t);
    let pool = c.kubernetes[0].pools[0].clone();
    let mut h = HealthState::new();
    h.set_member_healthy(&pool, "a1", false);
    let compiled = build(&c, &h);
    assert_equal_shares(&node_shares(&compiled, &pool), &["a2", "b1", "b2"]);
    let slots = serving(&compiled, &pool);
    let total: usize = slots.values().sum();
    for n in ["a2", "b1", "b2"] {
        let f = slots[n] as f64 / total as f64;
        assert!((f - 1.0 / 3.0).abs() < 0.01, "{n}: {slots:?}");
    }

    // A lone healthy node among 110 in zone-a and two in zone-b: a third each (not nothing
    // for the zone under 1 % healthy).
    let mut t = String::new();
    for i in 0..110 {
        node(
            &mut t,
            &format!("a{i:03}"),
            "zone-a",
            &format!("10.1.0.{}", i + 1),
            true,
            &[],
        );
    }
    node(&mut t, "b1", "zone-b", "10.2.0.1", true, &[]);
    node(&mut t, "b2", "zone-b", "10.2.0.2", true, &[]);
    svc(&mut t, "web", &[], "");
    let c = config(&t);
    let pool = c.kubernetes[0].pools[0].clone();
    assert_eq!(
        members(&c.kubernetes[0]).len(),
        112,
        "external Cluster: up to 250"
    );
    let mut h = HealthState::new();
    for i in 1..110 {
        h.set_member_healthy(&pool, &format!("a{i:03}"), false);
    }
    let compiled = build(&c, &h);
    assert_equal_shares(&node_shares(&compiled, &pool), &["a000", "b1", "b2"]);
    // No failover threshold: nothing is "below" anything.
    let d = compiled.service_decision(&pool).unwrap();
    assert!(d.groups.iter().all(|g| !g.below_threshold), "{d:?}");
}

/// A rolling update on a `Local` Service: the node whose last pod starts terminating leaves
/// new-connection choice at once (SPEC R10.5); the two nodes left share equally (SPEC R7.1),
/// not two thirds to the one whose zone had two members.
#[test]
fn a_rolling_update_on_a_local_service_keeps_the_shares_equal() {
    let mut t = String::new();
    node(&mut t, "a1", "zone-a", "10.0.0.1", true, &[]);
    node(&mut t, "a2", "zone-a", "10.0.0.2", true, &[]);
    node(&mut t, "b1", "zone-b", "10.0.0.3", true, &[]);
    svc(&mut t, "web", &[], LOCAL);
    slice(
        &mut t,
        "web",
        &[
            ("a1", true, true, false),
            ("a2", false, true, true),
            ("b1", true, true, false),
        ],
    );
    let c = config(&t);
    let pool = c.kubernetes[0].pools[0].clone();
    let compiled = build(&c, &HealthState::new());
    assert_equal_shares(&node_shares(&compiled, &pool), &["a1", "b1"]);
    // `explain` says which rule decided.
    let report = compiled.pools.iter().find(|p| p.name == pool).unwrap();
    assert!(
        report.why.contains("no serviceLbPolicy") && report.why.contains("R7.1"),
        "{}",
        report.why
    );
}

/// GKE's subsetting (kubernetes/ingress-gce, `getSubsetPerZone`): the zones sorted by their
/// node count, smallest first, each takes `limit / zones left` of the limit (integer
/// division) and what a zone cannot fill goes to the larger ones after it. So a zone with
/// eligible nodes is never left out (SPEC R7.5).
#[test]
fn subsets_are_divided_over_the_zones_smallest_first() {
    let internal = "  loadBalancerClass: networking.gke.io/l4-regional-internal\n";
    let per_zone = |counts: &[(&str, usize)], extra: &str| {
        let mut t = String::new();
        let mut ip = 0;
        for (zone, n) in counts {
            for i in 0..*n {
                ip += 1;
                node(
                    &mut t,
                    &format!("{zone}-{i:03}"),
                    zone,
                    &format!("10.0.{}.{}", ip / 200, ip % 200 + 1),
                    true,
                    &[],
                );
            }
        }
        svc(&mut t, "web", &[], extra);
        let c = config(&t);
        let mut got: BTreeMap<String, usize> = BTreeMap::new();
        for n in c.kubernetes[0].nodes().iter().filter(|n| n.member) {
            *got.entry(n.zone.to_string()).or_default() += 1;
        }
        got
    };
    let want = |v: &[(&str, usize)]| -> BTreeMap<String, usize> {
        v.iter().map(|(z, n)| (z.to_string(), *n)).collect()
    };
    // Internal Cluster, 25 nodes: zone-c (2) takes 25 / 3 = 8, has 2; zone-b (3) takes
    // 23 / 2 = 11, has 3; zone-a the other 20.
    assert_eq!(
        per_zone(&[("zone-a", 100), ("zone-b", 3), ("zone-c", 2)], internal),
        want(&[("zone-a", 20), ("zone-b", 3), ("zone-c", 2)])
    );
    // Three equal zones: 25 / 3 = 8, then 17 / 2 = 8, then 9 (ties in zone-name order).
    assert_eq!(
        per_zone(&[("zone-a", 30), ("zone-b", 30), ("zone-c", 30)], internal),
        want(&[("zone-a", 8), ("zone-b", 8), ("zone-c", 9)])
    );
    // External Cluster, 250 nodes: a zone of 5 keeps its 5.
    assert_eq!(
        per_zone(&[("zone-a", 300), ("zone-b", 5)], ""),
        want(&[("zone-a", 245), ("zone-b", 5)])
    );
}

/// GKE's NEG controller (kubernetes/ingress-gce) keeps every candidate node in a `GCE_VM_IP`
/// NEG whether Ready or not (its `CandidateAndUnreadyNodesFilter`); only the node's health
/// check takes it out of new-connection choice (SPEC R7.6). The legacy target pool keeps its
/// own rule: the nodes the service controller hands cloud-provider-gcp, Ready ones.
#[test]
fn a_not_ready_node_stays_a_neg_backend_and_only_its_health_check_takes_it_out() {
    let mut t = String::new();
    node(&mut t, "a", "zone-a", "10.0.0.1", true, &[]);
    node(&mut t, "b", "zone-a", "10.0.0.2", false, &[]);
    node(&mut t, "d", "zone-b", "10.0.0.4", true, &[]);
    svc(&mut t, "web", &[], "");
    let c = config(&t);
    let k = service(&c, "default/web");
    assert_eq!(members(k), ["a", "b", "d"].map(String::from).into());
    let pool = k.pools[0].clone();
    // Its check has not failed (yet): it takes new connections like the others.
    let compiled = build(&c, &HealthState::new());
    assert_equal_shares(&node_shares(&compiled, &pool), &["a", "b", "d"]);
    // Its check fails: out.
    let mut h = HealthState::new();
    h.set_member_healthy(&pool, "b", false);
    let compiled = build(&c, &h);
    assert_equal_shares(&node_shares(&compiled, &pool), &["a", "d"]);
    let e = k.eligibility(&compiled.served_slice(&pool), &pool, &h);
    let b = e.iter().find(|n| n.node == "b").unwrap();
    assert!(
        b.member && !b.eligible && b.why.contains("fails its health check"),
        "{b:?}"
    );
    // The legacy target pool: not a member.
    let legacy = t.replace(
        "  type: LoadBalancer\n",
        "  type: LoadBalancer\n  loadBalancerClass: networking.gke.io/l4-regional-external-legacy\n",
    );
    let c = config(&legacy);
    let k = service(&c, "default/web");
    assert_eq!(members(k), ["a", "d"].map(String::from).into());
    let why = k.nodes();
    let b = why.iter().find(|n| &*n.node == "b").unwrap();
    assert!(b.why.contains("not Ready"), "{b:?}");
}

/// cloud-provider-gcp's target pools (gce.go): one HTTP health check shape for both traffic
/// policies, `gceHcCheckIntervalSeconds = 8`, `gceHcTimeoutSeconds = 1`,
/// `gceHcHealthyThreshold = 1`, `gceHcUnhealthyThreshold = 3`, on the healthCheckNodePort's
/// path for `Local` (SPEC R7.6).
#[test]
fn the_legacy_target_pool_probes_local_services_as_cloud_provider_gcp_does() {
    let mut t = nodes(3);
    svc(
        &mut t,
        "web",
        &[],
        &format!("  loadBalancerClass: networking.gke.io/l4-regional-external-legacy\n{LOCAL}"),
    );
    slice(&mut t, "web", &[("node-000", true, true, false)]);
    let c = config(&t);
    let tp = &c.target_pools[0];
    let hc = c
        .http_health_checks
        .iter()
        .find(|h| h.name == tp.health_checks[0].name)
        .expect("the pool's check");
    assert_eq!((hc.port, hc.request_path.as_str()), (31000, "/healthz"));
    assert_eq!(
        (
            hc.check_interval_sec,
            hc.timeout_sec,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        (8, 1, 1, 3)
    );
    assert!(
        service(&c, "default/web")
            .health_check
            .contains("every 8 s"),
        "{}",
        service(&c, "default/web").health_check
    );
}
