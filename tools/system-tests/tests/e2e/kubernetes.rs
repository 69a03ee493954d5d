//! Kubernetes LoadBalancer Services end to end on real Linux networking (GKE's
//! behaviour, SPEC R7, R10.5): three "node" namespaces, each with a kube-proxy-like agent
//! written for this test (nftables DNAT of VIP:port to a local pod IP:targetPort with the
//! `nft` command, proxy terminating endpoints when no pod is ready, a TCP reset when there is
//! none, `/healthz` on 10256, and the Service's healthCheckNodePort answering 200 with the
//! weight header = local ready pods and 503 at zero); pods are real HTTP servers (python) on
//! addresses of their node (on its loopback); `nlb-sim` and `nlbd --config DIR` driven by a directory of
//! manifests the test rewrites as a cluster's API would change. Topology and how to run it:
//! docs/kubernetes.md ("End to end"). Needs root; skips without it unless `CI` is set.
//!
//! ```text
//!  ns cli 10.77.0.10 ─┐                 ┌─ ns node-1 10.77.0.21 zone-a  pods 10.78.1.x
//!  VIPs 10.77.1.1-3 → │ ns host: br0    ├─ ns node-2 10.77.0.22 zone-b  pods 10.78.2.x
//!  the NIC's MAC      └ 10.77.0.1 nlbd ─┼─ ns node-3 10.77.0.23 zone-c  pods 10.78.3.x
//!                       nic0: nlb-sim ──┘  (L2 DSR to the node's MAC; the node DNATs)
//! ```

use nlb_system_tests::lab as common;

use common::{add_namespaces, must, Lab, WAIT};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NIC_MAC: &str = "02:00:00:00:00:01";
/// The NIC's zone: the client's zone of zonal affinity (SPEC R7.4).
const NIC_ZONE: &str = "zone-a";
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const TARGET_PORT: u16 = 8080;
/// How long a terminating pod keeps serving before it dies (its grace period). Shorter than
/// the `Local` health check can notice a node without ready pods (two failed probes 3 s apart,
/// at least 2.7 s with the checker's 10 % jitter), longer than nlbd takes to load a changed
/// EndpointSlice (a 100 ms poll and a delta load).
const GRACE: Duration = Duration::from_millis(1500);
/// Between the steps of a rolling update.
const STEP: Duration = Duration::from_millis(1500);

/// The Services, all selecting the same pods.
struct Svc {
    name: &'static str,
    vip: &'static str,
    /// `externalTrafficPolicy: Local` with this healthCheckNodePort; `None`: `Cluster`.
    local: Option<u16>,
    /// More of the manifest: annotations, then spec lines.
    annotations: &'static str,
    spec: &'static str,
}

const WEB: Svc = Svc {
    name: "web",
    vip: "10.77.1.1",
    local: Some(30001),
    annotations: "    networking.gke.io/weighted-load-balancing: pods-per-node\n",
    spec: "",
};
const CLUSTER: Svc = Svc {
    name: "everywhere",
    vip: "10.77.1.2",
    local: None,
    annotations: "",
    spec: "",
};
const ZONAL: Svc = Svc {
    name: "near",
    vip: "10.77.1.3",
    local: Some(30003),
    annotations: "    networking.gke.io/load-balancer-type: Internal\n",
    spec: "  trafficDistribution: PreferClose\n",
};
const SERVICES: [&Svc; 3] = [&WEB, &CLUSTER, &ZONAL];

fn pool(s: &Svc) -> String {
    format!("k8s-default-{}", s.name)
}

fn node_name(n: usize) -> String {
    format!("node-{}", n + 1)
}

fn node_ip(n: usize) -> String {
    format!("10.77.0.{}", 21 + n)
}

fn node_mac(n: usize) -> String {
    format!("02:77:00:00:00:{:02x}", 0x21 + n)
}

const POD: &str = r#"
# A pod: HTTP on its own address, answering every GET with its name and the client's address.
import http.server, socketserver, sys
name, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        body = ("%s %s\n" % (name, self.client_address[0])).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def server_bind(self):
        # Not HTTPServer's: its getfqdn() would wait for a DNS server the lab does not have.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
Server((ip, port), Handler).serve_forever()
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodState {
    Ready,
    /// Deleted: not ready, still serving until its grace period ends.
    Terminating,
}

#[derive(Debug, Clone)]
struct Pod {
    name: String,
    node: usize,
    ip: String,
    state: PodState,
}

/// What the cluster's API would hold; the agents and the manifests follow it.
#[derive(Default)]
struct Cluster {
    pods: Vec<Pod>,
    tracking: bool,
}

impl Cluster {
    /// Ready (not terminating) pods on `node`: the weight its health check reports.
    fn ready_on(&self, node: usize) -> usize {
        self.pods
            .iter()
            .filter(|p| p.node == node && p.state == PodState::Ready)
            .count()
    }
}

type Shared = Arc<Mutex<Cluster>>;

/// Starts a thread that runs `f` inside network namespace `ns` (setns(2) moves only the
/// calling thread); sockets it opens stay in that namespace whichever thread uses them later.
fn spawn_in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on a valid namespace descriptor we hold open; it changes only this
        // thread's network namespace, which ends with the thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

/// [`spawn_in_netns`], waiting for its result.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    spawn_in_netns(ns, f)
        .join()
        .expect("thread in the namespace")
}

// ----- the kube-proxy-like agent ----------------------------------------------------------

/// The agent's nftables ruleset for `node`: per Service, DNAT of VIP:80 to the endpoints
/// kube-proxy would use (Local: this node's; Cluster: every node's, masqueraded when they are
/// elsewhere), ready ones first, else serving terminating ones (proxy terminating endpoints,
/// SPEC R7.2), else a TCP reset.
fn ruleset(cluster: &Cluster, node: usize) -> String {
    let mut pre = String::new();
    let mut fwd = String::new();
    for s in SERVICES {
        let eps: Vec<&Pod> = cluster
            .pods
            .iter()
            .filter(|p| s.local.is_none() || p.node == node)
            .collect();
        let ready: Vec<&&Pod> = eps.iter().filter(|p| p.state == PodState::Ready).collect();
        let chosen: Vec<&&Pod> = if ready.is_empty() {
            eps.iter().collect()
        } else {
            ready
        };
        let m = format!("ip daddr {} tcp dport 80", s.vip);
        match chosen.len() {
            0 => fwd.push_str(&format!("    {m} reject with tcp reset\n")),
            1 => pre.push_str(&format!("    {m} dnat to {}:{TARGET_PORT}\n", chosen[0].ip)),
            n => {
                let map: Vec<String> = chosen
                    .iter()
                    .enumerate()
                    .map(|(i, p)| format!("{i} : {}", p.ip))
                    .collect();
                pre.push_str(&format!(
                    "    {m} dnat to numgen random mod {n} map {{ {} }}:{TARGET_PORT}\n",
                    map.join(", ")
                ));
            }
        }
    }
    format!(
        "table ip kproxy
delete table ip kproxy
table ip kproxy {{
  chain pre {{
    type nat hook prerouting priority dstnat; policy accept;
{pre}  }}
  chain post {{
    type nat hook postrouting priority srcnat; policy accept;
    ct status dnat oifname \"eth0\" masquerade
  }}
  chain filter_forward {{
    type filter hook forward priority filter; policy accept;
{fwd}  }}
}}
"
    )
}

fn program_agents(lab: &Lab, cluster: &Cluster) {
    for n in 0..3 {
        let rules = ruleset(cluster, n);
        let mut child = lab
            .exec(&node_name(n), &["nft", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("nft");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(rules.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nft on {}: {}\n{rules}",
            node_name(n),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The agent's health servers on `node`: kube-proxy's `/healthz` on 10256 (the node is up),
/// and each Local Service's healthCheckNodePort: 200 with the weight header = ready local pods,
/// 503 at zero (SPEC R7.1).
fn start_health_servers(lab: &Lab, node: usize, cluster: Shared) {
    let mut ports = vec![None];
    ports.extend(SERVICES.iter().filter_map(|s| s.local).map(Some));
    let ns = lab.ns(&node_name(node));
    let listeners: Vec<(Option<u16>, TcpListener)> = in_netns(&ns, move || {
        ports
            .into_iter()
            .map(|p| {
                let port = p.unwrap_or(10256);
                let l = TcpListener::bind(("0.0.0.0", port))
                    .unwrap_or_else(|e| panic!("health port {port}: {e}"));
                (p, l)
            })
            .collect()
    });
    for (local, listener) in listeners {
        let cluster = cluster.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 1024];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = match local {
                    None => "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
                        .to_string(),
                    Some(_) => {
                        let ready = cluster.lock().unwrap().ready_on(node);
                        let body = format!("{{\"localEndpoints\": {ready}}}\n");
                        if ready > 0 {
                            format!("HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: {ready}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                        } else {
                            format!("HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                        }
                    }
                };
                let _ = conn.write_all(answer.as_bytes());
            }
        });
    }
}

// ----- the manifests ----------------------------------------------------------------------

fn project_document(tracking: bool) -> String {
    let macs: String = (0..3)
        .map(|n| format!("    {}: '{}'\n", node_name(n), node_mac(n)))
        .collect();
    format!(
        "nic:
  mac: '{NIC_MAC}'
  zone: {NIC_ZONE}
kubernetes:
  delivery: L2_DSR
  endpointSliceTracking: {tracking}
  nodeMacs:
{macs}"
    )
}

fn nodes_and_services() -> String {
    let mut out = String::new();
    for (n, zone) in ZONES.iter().enumerate() {
        out.push_str(&format!(
            "---
apiVersion: v1
kind: Node
metadata:
  name: {}
  labels:
    topology.kubernetes.io/zone: {}
status:
  addresses:
  - {{type: InternalIP, address: {}}}
  conditions:
  - {{type: Ready, status: \"True\"}}
",
            node_name(n),
            zone,
            node_ip(n)
        ));
    }
    for s in SERVICES {
        let policy = match s.local {
            Some(p) => format!("  externalTrafficPolicy: Local\n  healthCheckNodePort: {p}\n"),
            None => "  externalTrafficPolicy: Cluster\n".to_string(),
        };
        out.push_str(&format!(
            "---
apiVersion: v1
kind: Service
metadata:
  name: {}
  namespace: default
  uid: uid-{}
  annotations:
{}spec:
  type: LoadBalancer
  loadBalancerIP: {}
  selector: {{app: web}}
  ports:
  - {{port: 80, targetPort: {TARGET_PORT}, protocol: TCP}}
{policy}{}",
            s.name, s.name, s.annotations, s.vip, s.spec
        ));
    }
    out
}

fn endpoint_slices(cluster: &Cluster) -> String {
    let mut out = String::new();
    for s in SERVICES {
        out.push_str(&format!(
            "---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata:
  name: {}-x1
  namespace: default
  labels:
    kubernetes.io/service-name: {}
ports:
- {{port: {TARGET_PORT}, protocol: TCP}}
endpoints:
",
            s.name, s.name
        ));
        for p in &cluster.pods {
            let ready = p.state == PodState::Ready;
            out.push_str(&format!(
                "- addresses: [{}]
  nodeName: {}
  zone: {}
  conditions: {{ready: {ready}, serving: true, terminating: {}}}
",
                p.ip,
                node_name(p.node),
                ZONES[p.node],
                !ready
            ));
        }
        if cluster.pods.is_empty() {
            out.push_str("[]\n");
        }
    }
    out
}

/// Writes a file of the manifest directory whole (a rename), as an editor or a sync tool would.
fn write_manifest(dir: &std::path::Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

// ----- the test's cluster -----------------------------------------------------------------

struct Test {
    lab: Lab,
    cluster: Shared,
    manifests: std::path::PathBuf,
    next_pod: [usize; 3],
}

impl Test {
    /// The agents and then the EndpointSlices follow the cluster's state.
    fn apply(&self) {
        let c = self.cluster.lock().unwrap();
        program_agents(&self.lab, &c);
        write_manifest(&self.manifests, "endpointslices.yaml", &endpoint_slices(&c));
    }

    /// A new pod on `node`: its server runs and answers, then it is ready.
    fn add_pod(&mut self, node: usize) -> String {
        self.next_pod[node] += 1;
        let k = self.next_pod[node];
        let name = format!("pod-{}{}", node + 1, (b'a' + k as u8 - 1) as char);
        let ip = format!("10.78.{}.{k}", node + 1);
        let ns = node_name(node);
        must(&[
            "ip",
            "-n",
            &self.lab.ns(&ns),
            "addr",
            "add",
            &format!("{ip}/32"),
            "dev",
            "lo",
        ]);
        let script = self.lab.path("pod.py");
        let port = TARGET_PORT.to_string();
        self.lab.spawn(
            &name,
            &ns,
            &["python3", script.to_str().unwrap(), &name, &ip, &port],
        );
        let url = format!("http://{ip}:{TARGET_PORT}/");
        self.lab.wait_for(&format!("{name} serving"), || {
            self.lab
                .run_in(&ns, &["curl", "-sS", "--max-time", "1", &url])
                .ok()
                .filter(|b| b.starts_with(&name))
        });
        self.cluster.lock().unwrap().pods.push(Pod {
            name: name.clone(),
            node,
            ip,
            state: PodState::Ready,
        });
        self.apply();
        name
    }

    /// Deletes a pod as Kubernetes does: terminating (not ready, still serving) for its grace
    /// period, then gone.
    /// Returns, when this was its node's last ready pod and EndpointSlice tracking is on, how
    /// long after the EndpointSlice changed `nlbctl status` first showed the node out of the
    /// `web` pool's choice (the reload's latency, plus up to one status poll).
    fn delete_pod(&mut self, name: &str) -> Option<Duration> {
        let (node, last, tracking) = {
            let mut c = self.cluster.lock().unwrap();
            let p = c.pods.iter_mut().find(|p| p.name == name).expect("pod");
            p.state = PodState::Terminating;
            let node = p.node;
            (node, c.ready_on(node) == 0, c.tracking)
        };
        let grace = Instant::now() + GRACE;
        self.apply();
        let changed = Instant::now();
        let mut left = None;
        if last && tracking {
            while left.is_none() && Instant::now() < grace {
                let out = self
                    .status_pool(&pool(&WEB), "eligible")
                    .is_some_and(|e| !e.contains(&node_name(node)));
                if out {
                    left = Some(changed.elapsed());
                }
            }
        }
        std::thread::sleep(grace.saturating_duration_since(Instant::now()));
        self.lab.stop(name);
        self.cluster.lock().unwrap().pods.retain(|p| p.name != name);
        self.apply();
        left
    }

    fn status_pool(&self, pool: &str, field: &str) -> Option<Vec<String>> {
        let s = self.lab.admin("status")?;
        let p = s["pools"].as_array()?.iter().find(|p| p["name"] == pool)?;
        Some(
            p[field]
                .as_array()?
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        )
    }

    /// Waits until the pool's new-connection choice is exactly `nodes`.
    fn wait_eligible(&self, s: &Svc, nodes: &[usize]) {
        let mut want: Vec<String> = nodes.iter().map(|&n| node_name(n)).collect();
        want.sort();
        let pool = pool(s);
        self.lab.wait_for(&format!("{pool} choosing {want:?}"), || {
            let mut got = self.status_pool(&pool, "eligible")?;
            got.sort();
            (got == want).then_some(())
        });
    }

    fn health(&self, s: &Svc, node: usize) -> Option<String> {
        let h = self.lab.admin("health")?;
        h["targets"]
            .as_array()?
            .iter()
            .find(|t| t["backend"] == node_name(node).as_str() && t["pool"] == pool(s).as_str())
            .and_then(|t| t["health"].as_str().map(str::to_string))
    }
}

/// One HTTP request to `vip`:80 on a new connection: (pod, the address the pod saw).
fn request(vip: &str) -> Result<(String, String), String> {
    let addr: SocketAddr = format!("{vip}:80").parse().unwrap();
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(3)))
        .map_err(|e| e.to_string())?;
    c.write_all(b"GET / HTTP/1.0\r\nHost: lb\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut out = String::new();
    c.read_to_string(&mut out)
        .map_err(|e| format!("receive: {e}"))?;
    if !out.starts_with("HTTP/1.0 200") {
        return Err(format!("answer: {out:?}"));
    }
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").trim();
    let mut it = body.split_whitespace();
    match (it.next(), it.next()) {
        (Some(pod), Some(peer)) => Ok((pod.to_string(), peer.to_string())),
        _ => Err(format!("body: {body:?}")),
    }
}

type Outcome = (String, Result<(String, String), String>);

/// `n` requests from the client namespace, in turn to `vips`.
fn requests(lab: &Lab, vips: &[&'static str], n: usize) -> Vec<Outcome> {
    let vips = vips.to_vec();
    in_netns(&lab.ns("cli"), move || {
        (0..n)
            .map(|i| {
                let v = vips[i % vips.len()];
                (v.to_string(), request(v))
            })
            .collect()
    })
}

/// Continuous traffic from the client namespace (a request every 20 ms, in turn to `vips`)
/// until the returned flag is set; the join handle gives every outcome.
fn traffic(
    lab: &Lab,
    vips: &[&'static str],
) -> (Arc<AtomicBool>, std::thread::JoinHandle<Vec<Outcome>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let vips = vips.to_vec();
    let flag = stop.clone();
    let handle = spawn_in_netns(&lab.ns("cli"), move || {
        let mut out = Vec::new();
        let mut i = 0;
        while !flag.load(Ordering::Relaxed) {
            let v = vips[i % vips.len()];
            out.push((v.to_string(), request(v)));
            i += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        out
    });
    (stop, handle)
}

fn failures(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .filter_map(|(v, r)| r.as_ref().err().map(|e| format!("{v}: {e}")))
        .collect()
}

/// The node a pod runs on, from its name (`pod-2b` is on node-2).
fn node_of(pod: &str) -> usize {
    pod.as_bytes()[4] as usize - b'1' as usize
}

fn build(lab: &mut Lab) {
    add_namespaces(lab, &["host", "cli", "node-1", "node-2", "node-3"]);
    let host = lab.ns("host");
    let ip = |ns: &str, args: &[&str]| {
        let mut v = vec!["ip", "-n", ns];
        v.extend_from_slice(args);
        must(&v);
    };
    ip(&host, &["link", "add", "br0", "type", "bridge"]);
    ip(&host, &["link", "set", "br0", "up"]);
    ip(&host, &["addr", "add", "10.77.0.1/24", "dev", "br0"]);
    ip(
        &host,
        &[
            "link", "add", "h-nic", "type", "veth", "peer", "name", "nic0",
        ],
    );
    ip(&host, &["link", "set", "h-nic", "master", "br0", "up"]);
    ip(&host, &["link", "set", "nic0", "up"]);
    let attach = |port: &str, ns: &str, addr: &str, mac: Option<&str>| {
        ip(
            &host,
            &[
                "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ],
        );
        ip(&host, &["link", "set", port, "master", "br0", "up"]);
        if let Some(mac) = mac {
            ip(ns, &["link", "set", "eth0", "address", mac]);
        }
        ip(ns, &["addr", "add", addr, "dev", "eth0"]);
        ip(ns, &["link", "set", "eth0", "up"]);
    };
    let cli = lab.ns("cli");
    attach("h-cli", &cli, "10.77.0.10/24", None);
    // The VIPs are the NIC's MAC: only nlb-sim receives what the client sends them.
    for s in SERVICES {
        ip(
            &cli,
            &["route", "add", &format!("{}/32", s.vip), "dev", "eth0"],
        );
        ip(
            &cli,
            &[
                "neigh",
                "replace",
                s.vip,
                "lladdr",
                NIC_MAC,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ],
        );
    }
    for n in 0..3 {
        let ns = lab.ns(&node_name(n));
        for sysctl in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
        ] {
            lab.run_in(&node_name(n), &["sysctl", "-qw", sysctl])
                .unwrap();
        }
        attach(
            &format!("h-n{}", n + 1),
            &ns,
            &format!("{}/24", node_ip(n)),
            Some(&node_mac(n)),
        );
        // Pods are addresses on the node's loopback (10.78.N.K); other nodes' pods are routed
        // to their node.
        for m in (0..3).filter(|&m| m != n) {
            ip(
                &ns,
                &[
                    "route",
                    "add",
                    &format!("10.78.{}.0/24", m + 1),
                    "via",
                    &node_ip(m),
                ],
            );
        }
        // Packets for a VIP without endpoints are forwarded, and rejected by the agent.
        ip(&ns, &["route", "add", "default", "via", "10.77.0.1"]);
    }
}

#[test]
fn kubernetes_services_on_namespaced_nodes_with_a_rolling_update() {
    if !common::should_run("cargo test -p nlb-system-tests --test e2e kubernetes::") {
        return;
    }
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v nft"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "the Kubernetes end-to-end test needs `nft` (the nftables package; ./test.sh installs it)"
    );
    let mut lab = Lab::new("-k8s");
    let started = Instant::now();
    std::fs::write(lab.path("pod.py"), POD).unwrap();
    let manifests = lab.path("cluster");
    std::fs::create_dir(&manifests).unwrap();
    build(&mut lab);
    let cluster: Shared = Arc::new(Mutex::new(Cluster {
        tracking: true,
        ..Cluster::default()
    }));
    for n in 0..3 {
        start_health_servers(&lab, n, cluster.clone());
    }
    let mut t = Test {
        lab,
        cluster,
        manifests: manifests.clone(),
        next_pod: [0; 3],
    };
    write_manifest(&manifests, "project.yaml", &project_document(true));
    write_manifest(&manifests, "cluster.yaml", &nodes_and_services());
    // Uneven pods: three on node-1, one on node-2, none on node-3.
    for n in [0, 0, 0, 1] {
        t.add_pod(n);
    }

    let nic_sock = t.lab.path("nic.sock");
    let nic = nic_sock.to_str().unwrap().to_string();
    t.lab.spawn(
        "nlb-sim",
        "host",
        &[
            nlb_system_tests::bin("nlb-sim"),
            "--socket",
            &nic,
            "--rx",
            "nic0",
            "--tx",
            "nic0",
        ],
    );
    t.lab.wait_for("nlb-sim's socket", || {
        std::os::unix::net::UnixStream::connect(&nic_sock).ok()
    });
    let admin = t.lab.path("admin.sock");
    t.lab.spawn(
        "nlbd",
        "host",
        &[
            nlb_system_tests::bin("nlbd"),
            "--config",
            manifests.to_str().unwrap(),
            "--device",
            &format!("sim:{nic}"),
            "--admin-socket",
            admin.to_str().unwrap(),
            "--metrics-addr",
            "off",
            "--watch-ms",
            "100",
        ],
    );
    t.lab.wait_for("nlbd attached", || t.lab.admin("status"));
    for n in [0, 1] {
        t.lab.wait_for(&format!("{} healthy", node_name(n)), || {
            (t.health(&WEB, n)? == "healthy").then_some(())
        });
    }
    t.wait_eligible(&WEB, &[0, 1]);

    // 1. Local with uneven pods: new connections in proportion to each node's ready pods
    //    (pods-per-node, SPEC R7.3: 3 to 1), and the client's address kept (SPEC R7.1).
    let n = 800;
    let got = requests(&t.lab, &[WEB.vip], n);
    let failed = failures(&got);
    assert!(failed.is_empty(), "{failed:?}\n{}", t.lab.logs());
    let mut per_node = [0usize; 3];
    for (_, r) in &got {
        let (pod, peer) = r.as_ref().unwrap();
        assert_eq!(peer, "10.77.0.10", "Local keeps the client's address");
        per_node[node_of(pod)] += 1;
    }
    let share = per_node[0] as f64 / n as f64;
    // Binomial with p = 0.75 over 800: σ ≈ 0.015; ±0.07 is more than 4.5σ.
    eprintln!("e2e k8s: Local, pods 3/1/0: node shares {per_node:?} of {n}");
    assert!(
        (share - 0.75).abs() < 0.07 && per_node[2] == 0,
        "3 pods on node-1, 1 on node-2: {per_node:?}"
    );

    // 2. Cluster: every node is a backend; one without a pod forwards to a pod elsewhere,
    //    which sees the node's address (source NAT, SPEC R7.1).
    t.wait_eligible(&CLUSTER, &[0, 1, 2]);
    let got = requests(&t.lab, &[CLUSTER.vip], 90);
    let failed = failures(&got);
    assert!(failed.is_empty(), "{failed:?}\n{}", t.lab.logs());
    let via_node3 = got
        .iter()
        .filter(|(_, r)| r.as_ref().is_ok_and(|(_, peer)| *peer == node_ip(2)))
        .count();
    eprintln!("e2e k8s: Cluster: {via_node3} of 90 requests through node-3 (no pod there)");
    assert!(via_node3 > 0, "no request went through node-3: {got:?}");

    // 3. Zonal affinity (internal Service, trafficDistribution PreferClose): the NIC's zone
    //    (zone-a, node-1) serves alone while it has a healthy node (SPEC R7.4).
    let got = requests(&t.lab, &[ZONAL.vip], 30);
    for (_, r) in &got {
        let (pod, _) = r
            .as_ref()
            .unwrap_or_else(|e| panic!("{e}\n{}", t.lab.logs()));
        assert_eq!(node_of(pod), 0, "zonal affinity: {got:?}");
    }

    // 4. `--config DIR`: a bad file is refused as a whole, named by file, line and field; the
    //    previous configuration keeps serving.
    let bad = "apiVersion: v1\nkind: Service\nmetadata: {name: broken, namespace: default}\nspec:\n  type: LoadBalancer\n  healthCheckNodePort: 70000\n  externalTrafficPolicy: Local\n  ports: [{port: 81}]\n";
    write_manifest(&manifests, "zz-broken.yaml", bad);
    t.lab.wait_for("the broken file refused", || {
        let log = t.lab.log("nlbd");
        (log.contains("configuration refused") && log.contains("zz-broken.yaml:6:")).then_some(())
    });
    assert!(t
        .lab
        .log("nlbd")
        .contains("Service/broken.spec.healthCheckNodePort"));
    let got = requests(&t.lab, &[WEB.vip], 20);
    assert!(failures(&got).is_empty(), "{got:?}");
    std::fs::remove_file(manifests.join("zz-broken.yaml")).unwrap();

    // 5. A rolling update under continuous traffic, EndpointSlice tracking on: pods on node-1
    //    are replaced by pods on node-3 and node-2; each old pod turns terminating (serving,
    //    not ready) for GRACE, then dies. Node-1 loses its last pod: it leaves new-connection
    //    choice as the EndpointSlice says so (SPEC R10.5), inside the grace period.
    let (stop, handle) = traffic(&t.lab, &[WEB.vip, ZONAL.vip]);
    std::thread::sleep(STEP);
    let old: Vec<String> = t
        .cluster
        .lock()
        .unwrap()
        .pods
        .iter()
        .filter(|p| p.node == 0)
        .map(|p| p.name.clone())
        .collect();
    let mut left = None;
    for (new_node, old_pod) in [2, 2, 1].into_iter().zip(&old) {
        t.add_pod(new_node);
        std::thread::sleep(STEP);
        left = left.or(t.delete_pod(old_pod));
        std::thread::sleep(STEP);
    }
    stop.store(true, Ordering::Relaxed);
    let on = handle.join().unwrap();
    let failed_on = failures(&on);
    eprintln!(
        "e2e k8s: rolling update with EndpointSlice tracking: {} failed of {} requests",
        failed_on.len(),
        on.len()
    );
    eprintln!(
        "e2e k8s: node-1's last pod terminating -> out of new-connection choice in {}",
        left.map_or("more than the grace period".to_string(), |d| format!(
            "{:.0} ms",
            d.as_secs_f64() * 1e3
        ))
    );
    t.wait_eligible(&WEB, &[1, 2]);

    // 6. Zonal affinity spills: zone-a has no healthy eligible node now, so every node of the
    //    other zones serves (not one zone alone; spill ratio 0, SPEC R7.4).
    let got = requests(&t.lab, &[ZONAL.vip], 60);
    let mut zonal_nodes = BTreeMap::new();
    for (_, r) in &got {
        let (pod, _) = r
            .as_ref()
            .unwrap_or_else(|e| panic!("{e}\n{}", t.lab.logs()));
        *zonal_nodes.entry(node_of(pod)).or_insert(0) += 1;
    }
    eprintln!("e2e k8s: zonal affinity after zone-a emptied: requests per node {zonal_nodes:?}");
    assert_eq!(
        zonal_nodes.keys().copied().collect::<Vec<_>>(),
        vec![1, 2],
        "spill to every other zone"
    );

    // 7. The same update with EndpointSlice tracking off (GKE's behaviour):
    //    every node is a backend and only the healthCheckNodePort check takes node-3 out
    //    when its last pod goes, at least two probes 3 s apart after it turned terminating:
    //    from the end of its grace period until then, new connections there are reset.
    t.cluster.lock().unwrap().tracking = false;
    write_manifest(&manifests, "project.yaml", &project_document(false));
    t.lab.wait_for("node-1 a backend again (tracking off)", || {
        let s = t.lab.admin("status")?;
        let p = s["pools"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == pool(&WEB).as_str())?;
        (p["members"].as_u64()? == 3).then_some(())
    });
    t.lab.wait_long("node-1 unhealthy (no pod)", WAIT, || {
        (t.health(&WEB, 0)? == "unhealthy").then_some(())
    });
    t.wait_eligible(&WEB, &[1, 2]);
    let (stop, handle) = traffic(&t.lab, &[WEB.vip]);
    std::thread::sleep(STEP);
    let old: Vec<String> = t
        .cluster
        .lock()
        .unwrap()
        .pods
        .iter()
        .filter(|p| p.node == 2)
        .map(|p| p.name.clone())
        .collect();
    for old_pod in &old {
        t.add_pod(0);
        std::thread::sleep(STEP);
        let _ = t.delete_pod(old_pod);
        std::thread::sleep(STEP);
    }
    // The health check's window: up to (unhealthyThreshold + 1) × interval.
    t.lab.wait_for("node-3 unhealthy", || {
        (t.health(&WEB, 2)? == "unhealthy").then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let off = handle.join().unwrap();
    let failed_off = failures(&off);
    eprintln!(
        "e2e k8s: the same update with tracking off (health checks only): {} failed of {} requests (first: {:?})",
        failed_off.len(),
        off.len(),
        failed_off.first()
    );
    eprintln!(
        "e2e k8s: failed requests during the rolling update: tracking on {} / off {} ({:.1} s in all)",
        failed_on.len(),
        failed_off.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failed_on.is_empty(),
        "with EndpointSlice tracking no request may fail: {failed_on:?}\n{}",
        t.lab.logs()
    );
    assert!(
        !failed_off.is_empty(),
        "the health check alone cannot notice node-3 within the grace period ({GRACE:?}): \
         failures were expected\n{}",
        t.lab.logs()
    );
}
