//! `nlbd --config DIR` (docs/kubernetes.md, docs/nlbd.md), no root: nlbd against a
//! simulated NIC served by the test process, following a directory of Kubernetes manifests.
//! A file that changes, a file that appears and a file that goes are each a reload; a
//! directory with a bad file is refused as a whole (the good change in another file is not
//! applied either), every problem named by file, line and field, and the previous
//! configuration keeps serving until the directory is right again.

use nlb_system_tests::harness;

use harness::{Nic, Nlbd};
use std::path::Path;

const POOL: &str = "k8s-default-web";

fn cluster() -> String {
    let mut out = String::from("nic: {mac: '02:00:00:00:00:01', zone: zone-a}\n");
    for (n, ip) in [("node-1", "127.0.0.21"), ("node-2", "127.0.0.22")] {
        out.push_str(&format!(
            "---
apiVersion: v1
kind: Node
metadata: {{name: {n}, labels: {{topology.kubernetes.io/zone: zone-a}}}}
status:
  addresses: [{{type: InternalIP, address: {ip}}}]
  conditions: [{{type: Ready, status: \"True\"}}]
"
        ));
    }
    out.push_str(
        "---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default, uid: u1}
spec:
  type: LoadBalancer
  loadBalancerIP: 203.0.113.10
  externalTrafficPolicy: Local
  healthCheckNodePort: 30001
  ports: [{port: 80, protocol: TCP}]
",
    );
    out
}

/// The Service's EndpointSlice with one ready pod on each of `nodes`.
fn slice(nodes: &[&str]) -> String {
    let mut out = String::from(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
endpoints:
",
    );
    for (i, n) in nodes.iter().enumerate() {
        out.push_str(&format!(
            "- {{addresses: [10.52.0.{}], nodeName: {n}, conditions: {{ready: true}}}}\n",
            i + 1
        ));
    }
    out
}

fn members(nlbd: &Nlbd) -> Option<u64> {
    let s = nlbd.admin("status")?;
    s["pools"].as_array()?.iter().find(|p| p["name"] == POOL)?["members"].as_u64()
}

fn reloads(nlbd: &Nlbd) -> Option<u64> {
    nlbd.admin("status")?["reloads"].as_u64()
}

fn write(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

#[test]
fn nlbd_follows_a_directory_of_manifests_and_refuses_it_as_a_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    std::fs::create_dir(&dir).unwrap();
    write(&dir, "cluster.yaml", &cluster());
    write(&dir, "slices.yaml", &slice(&["node-1"]));
    let sock = tmp.path().join("nic.sock");
    let _nic = Nic::start(&sock);
    let nlbd = Nlbd::start(tmp.path(), &dir, &sock);
    nlbd.wait_for("one node serving", || (members(&nlbd)? == 1).then_some(()));

    // A file that changes: node-2 gets a ready pod (Local: it becomes a backend).
    write(&dir, "slices.yaml", &slice(&["node-1", "node-2"]));
    nlbd.wait_for("the changed file", || (members(&nlbd)? == 2).then_some(()));
    let applied = reloads(&nlbd).unwrap();

    // A bad file appears alongside a good change in another file: nothing is applied.
    let bad = "apiVersion: v1
kind: Service
metadata: {name: broken, namespace: default}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Locale
  ports: [{port: 81}]
";
    // The bad file first: nlbd may read the directory between two writes, and must never see
    // the good change without the bad file.
    write(&dir, "zz-broken.yaml", bad);
    write(&dir, "slices.yaml", &slice(&["node-1"]));
    let line = nlbd.wait_for("the refusal", || {
        nlbd.log()
            .lines()
            .find(|l| l.contains("configuration refused"))
            .map(str::to_string)
    });
    assert!(
        line.contains("zz-broken.yaml:6:")
            && line.contains("Service/broken.spec.externalTrafficPolicy")
            && line.contains("Cluster, Local"),
        "{line}"
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        members(&nlbd),
        Some(2),
        "the good change was not half-applied"
    );
    assert_eq!(reloads(&nlbd), Some(applied));

    // The bad file goes: the directory as it is now (node-1 alone) is applied.
    std::fs::remove_file(dir.join("zz-broken.yaml")).unwrap();
    nlbd.wait_for("the directory without the bad file", || {
        (members(&nlbd)? == 1).then_some(())
    });
    assert_eq!(reloads(&nlbd), Some(applied + 1));
}
