//! nlbctl on Kubernetes manifests: `compile`, `explain` and `sim` take a manifest file, a
//! directory or `-` (a `kubectl get -o yaml|json` stream) wherever they take a configuration.
//! Expectations come from GKE's documentation / SPEC R7, R8.1, R10.5 and the example's own
//! objects (node InternalIPs, the project document's next hop), and the forwarded frames are
//! decoded with an independent decoder (etherparse).

use etherparse::{NetSlice, SlicedPacket};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    crate::workspace()
}

fn nlbctl(args: &[&str]) -> Output {
    nlbctl_stdin(args, None)
}

fn nlbctl_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .current_dir(root())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nlbctl runs");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn image(path: &Path) -> flowtable_compiler::Image {
    flowtable_compiler::Image::read(&std::fs::read(path).unwrap()).unwrap()
}

/// The example as one `kubectl get -o yaml` stream followed by the project document.
fn example_stream() -> String {
    let dir = root().join("examples/kubernetes");
    let cluster = std::fs::read_to_string(dir.join("cluster.yaml")).unwrap();
    let nic = std::fs::read_to_string(dir.join("nic.yaml")).unwrap();
    format!("{cluster}---\n{nic}")
}

#[test]
fn a_directory_a_file_and_standard_input_compile_alike() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let o = nlbctl(&["compile", "examples/kubernetes", "-o", &p("dir.img")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // Backends named after their nodes, pools after the Services.
    assert!(out.contains("k8s-shop-storefront"), "{out}");
    assert!(
        out.contains("ignored (no load balancer reads them): 1 Pod"),
        "{out}"
    );

    let o = nlbctl_stdin(
        &["compile", "-", "-o", &p("stdin.img")],
        Some(&example_stream()),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    std::fs::write(p("all.yaml"), example_stream()).unwrap();
    let o = nlbctl(&["compile", &p("all.yaml"), "-o", &p("file.img")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (a, b, c) = (
        image(&dir.path().join("dir.img")),
        image(&dir.path().join("stdin.img")),
        image(&dir.path().join("file.img")),
    );
    assert_eq!(a.tables, b.tables);
    assert_eq!(a.tables, c.tables);
    assert_eq!(a.header.config_digest, b.header.config_digest);
}

#[test]
fn manifests_alone_compile_with_defaults() {
    // `kubectl get nodes,services,endpointslices -o json`: no project document, so nodes are
    // reached at their InternalIP by IPIP (no MAC known) and the NIC settings are stand-ins
    // the output names.
    let json = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
   "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
              "conditions": [{"type": "Ready", "status": "True"}]}},
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"},
   "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
              "conditions": [{"type": "Ready", "status": "True"}]}},
  {"apiVersion": "v1", "kind": "Service",
   "metadata": {"name": "web", "namespace": "default", "uid": "8d1c7a1e-0000-4000-8000-000000000001"},
   "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 31080}]},
   "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}}
]}"#;
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let o = nlbctl_stdin(&["compile", "-", "-o", img.to_str().unwrap()], Some(json));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("no `nic.nextHopMac` given"),
        "{}",
        text(&o.stdout)
    );
    let i = image(&img);
    let ips: BTreeSet<std::net::IpAddr> = i
        .tables
        .backends
        .iter()
        .filter(|b| b.valid)
        .map(|b| nlb_hw::hash::u128_to_addr(b.addr))
        .collect();
    assert_eq!(
        ips,
        ["10.0.0.1", "10.0.0.2"].map(|a| a.parse().unwrap()).into()
    );
    assert!(i
        .tables
        .pools
        .iter()
        .filter(|p| p.valid)
        .all(|p| p.delivery == nlb_hw::enums::Delivery::Ipip));
}

#[test]
fn explain_a_service_names_every_node() {
    let o = nlbctl(&[
        "explain",
        "examples/kubernetes",
        "--service",
        "shop/storefront",
        "--src",
        "198.51.100.7:40000",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    // Flow to the Service's address and first port.
    assert!(out.contains("-> 203.0.113.70:80"), "{out}");
    assert!(
        out.contains("3 of 5 nodes are backends, 2 take new connections"),
        "{out}"
    );
    let line = |node: &str| {
        out.lines()
            .find(|l| l.contains(node))
            .unwrap_or_else(|| panic!("{node}: {out}"))
            .to_string()
    };
    assert!(line("6d1f2a3b-7kq2").trim_start().starts_with('~'));
    assert!(line("6d1f2a3b-7kq2").contains("SPEC R10.5"));
    // The NotReady node has no pod of this Local Service: not a backend for that reason.
    assert!(line("81c4d5e6-p2w4").contains("no serving endpoint"));
    assert!(line("q8zt").contains("exclude-from-external-load-balancers"));

    // --json carries the same per node.
    let o = nlbctl(&[
        "explain",
        "examples/kubernetes",
        "--service",
        "shop/storefront",
        "--src",
        "198.51.100.7:40000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes = v["kubernetes"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    let eligible: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| n["eligible"] == true)
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        eligible,
        [
            "gke-shop-default-pool-6d1f2a3b-0x1c",
            "gke-shop-default-pool-81c4d5e6-m3v9"
        ]
        .into()
    );
    assert!(eligible.contains(v["backend"].as_str().unwrap()));

    // A source outside loadBalancerSourceRanges is dropped by the ACL (SPEC R9.1).
    let o = nlbctl(&[
        "explain",
        "examples/kubernetes",
        "--service",
        "shop/storefront",
        "--src",
        "192.0.2.200:40000",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("verdict  drop"),
        "{}",
        text(&o.stdout)
    );

    // An unknown Service is a user error that lists the known ones.
    let o = nlbctl(&[
        "explain",
        "examples/kubernetes",
        "--service",
        "shop/nope",
        "--src",
        "198.51.100.7:40000",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("shop/storefront"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn sim_on_manifests_forwards_to_eligible_nodes_by_ipip() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let o = nlbctl(&[
        "traffic",
        "examples/kubernetes",
        "-o",
        &p("in.pcap"),
        "--flows",
        "40",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = nlbctl_stdin(
        &[
            "sim",
            "--config",
            "-",
            "--pcap",
            &p("in.pcap"),
            "--out",
            &p("out.pcap"),
            "--report",
            &p("report.jsonl"),
        ],
        Some(&example_stream()),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: Vec<serde_json::Value> = std::fs::read_to_string(p("report.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The nodes' InternalIPs (cluster.yaml) and the project document's next hop (nic.yaml).
    let node_ip: BTreeMap<&str, &str> = [
        ("gke-shop-default-pool-6d1f2a3b-0x1c", "10.128.0.11"),
        ("gke-shop-default-pool-6d1f2a3b-7kq2", "10.128.0.12"),
        ("gke-shop-default-pool-81c4d5e6-m3v9", "10.128.0.13"),
        // NotReady, still a backend of the Cluster Services' NEGs (SPEC R7.6).
        ("gke-shop-default-pool-81c4d5e6-p2w4", "10.128.0.14"),
        ("gke-shop-default-pool-6d1f2a3b-0x1c.ipv6", "fd20:8::b"),
        ("gke-shop-default-pool-6d1f2a3b-7kq2.ipv6", "fd20:8::c"),
        ("gke-shop-default-pool-81c4d5e6-m3v9.ipv6", "fd20:8::d"),
    ]
    .into();
    let input: Vec<Vec<u8>> = read(&p("in.pcap"));
    let output: Vec<Vec<u8>> = read(&p("out.pcap"));
    let mut next = 0;
    let mut per_pool: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &report {
        if r["verdict"] != "forward" {
            continue;
        }
        let backend = r["backend"].as_str().unwrap();
        let pool = r["pool"].as_str().unwrap();
        per_pool
            .entry(pool.to_string())
            .or_default()
            .insert(backend.to_string());
        let frame = &output[next];
        next += 1;
        // IPIP: outer destination = the node's InternalIP, towards the next hop; the inner
        // packet is the client's, unchanged (SPEC R8.1).
        assert_eq!(&frame[0..6], &[2, 0, 0, 0, 0, 0xfe], "{r}");
        let outer = SlicedPacket::from_ethernet(frame).unwrap();
        let dst = match outer.net {
            Some(NetSlice::Ipv4(v4)) => std::net::IpAddr::V4(v4.header().destination_addr()),
            Some(NetSlice::Ipv6(v6)) => std::net::IpAddr::V6(v6.header().destination_addr()),
            _ => panic!("{r}: not IP"),
        };
        assert_eq!(dst.to_string(), node_ip[backend], "{r}");
        let index = r["index"].as_u64().unwrap() as usize;
        let ip_len = if dst.is_ipv4() { 20 } else { 40 };
        assert_eq!(
            &frame[14 + ip_len..],
            &input[index][14..],
            "{r}: inner packet"
        );
    }
    assert_eq!(next, output.len());
    // storefront (Local): never the node whose only pod is terminating (SPEC R10.5), never
    // the excluded node or the NotReady one, which has no pod of it (SPEC R7.6).
    assert_eq!(
        per_pool["k8s-shop-storefront"],
        [
            "gke-shop-default-pool-6d1f2a3b-0x1c",
            "gke-shop-default-pool-81c4d5e6-m3v9"
        ]
        .map(String::from)
        .into()
    );
    // resolver (Cluster): every eligible node, with or without a pod (GKE), the NotReady
    // one too (its health check has not failed here, SPEC R7.6); it has no IPv6 address.
    assert_eq!(per_pool["k8s-infra-resolver"].len(), 4);
    assert_eq!(per_pool["k8s-infra-resolver-v6"].len(), 3);
}

fn read(path: &str) -> Vec<Vec<u8>> {
    firmware_sim::pcap::read_frames(std::fs::File::open(path).unwrap())
        .unwrap()
        .into_iter()
        .map(|f| f.data)
        .collect()
}

#[test]
fn bad_manifests_exit_1_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("svc.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec:\n  type: LoadBalancer\n  loadBalancerIP: 203.0.113.5\n  externalTrafficPolicy: Local\n  healthCheckNodePort: 70000\n  ports: [{port: 80}]\n",
    )
    .unwrap();
    let img = dir.path().join("x.img");
    let o = nlbctl(&[
        "compile",
        dir.path().to_str().unwrap(),
        "-o",
        img.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("svc.yaml:8:"), "{err}");
    assert!(
        err.contains("Service/web.spec.healthCheckNodePort"),
        "{err}"
    );
    assert!(err.contains("1..=65535"), "{err}");
    assert!(!img.exists(), "nothing written");
}
