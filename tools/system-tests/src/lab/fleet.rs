//! A fleet of three NLB hosts behind a router that runs BIRD 2 (SPEC R11.3, R15.1): each
//! host's nlbd announces the VIP by BGP to the router's BIRD, which installs one ECMP route
//! with a next hop per announcing host into the router's kernel table (docs/fleet.md,
//! "Announcing VIPs by BGP"; topology in docs/e2e.md).
//!
//! One run, in phases, with long-lived connections open throughout: a drain (`nlbctl drain`)
//! withdraws a host and its NIC stops receiving packets; a killed and restarted nlbd keeps
//! its route by graceful restart; a host that goes silent is withdrawn when BIRD's hold timer
//! expires. Every established connection moved by ECMP's rehash reaches the same backend.

use super::*;
use std::time::SystemTime;

/// The fleet's NLB hosts: each a namespace of its own holding an nlb-sim and an nlbd `--etcd`,
/// its NIC with its own link from the router (`rxN`) and its own port on the backends' bridge
/// (`txN`), and the host's own leg on that bridge (`m0`, 10.77.0.2N) for etcd, probes and BGP.
const FLEET: [&str; 3] = ["h1", "h2", "h3"];
/// The client's address (its own subnet behind the router).
const FLEET_CLIENT: &str = "10.78.0.10";
/// etcd's client address, on the backends' bridge in the `host` namespace.
const FLEET_ETCD: &str = "10.77.0.1:2379";
/// The router's address on the bridge: its BGP sessions with the hosts.
const ROUTER: &str = "10.77.0.2";
const ROUTER_AS: u32 = 65000;
const FLEET_AS: u32 = 65100;
/// BGP hold time (the smallest RFC 4271 allows) and graceful restart's restart time.
const HOLD_SECS: u64 = 3;
const RESTART_SECS: u64 = 20;

/// `ip -n NS args...`.
fn ip_in(ns: &str, args: &[&str]) {
    let mut v = vec!["ip", "-n", ns];
    v.extend_from_slice(args);
    must(&v);
}

/// Whether etcd is here ([`nlb_testkit::needs`]).
pub fn have_etcd() -> bool {
    nlb_testkit::needs("the fleet's test", &[Need::program("etcd", "etcd-server")])
}

/// Whether BIRD 2 is here ([`nlb_testkit::needs`]).
pub fn have_bird() -> bool {
    nlb_testkit::needs(
        "the fleet's BGP test",
        &[
            Need::program("bird", "bird2"),
            Need::program("birdc", "bird2"),
        ],
    )
}

/// The router namespace `rtr` between the client and the three NICs: links `eth1..eth3` (one
/// to each NIC's `rx1..rx3`, the NIC at 10.79.N.2, whose MAC is written in: the NIC answers no
/// ARP), the layer-4 ECMP hash (`fib_multipath_hash_policy=1`); a leg on the bridge
/// (10.77.0.2) for BGP and the backends' direct replies; the client on `cli0`
/// (10.78.0.0/24). No route to the VIP: BIRD installs it from what the hosts announce.
///
/// ```text
///   cli 10.78.0.10 ── rtr ─ eth1 ── rx1 [h1: nlb-sim, nlbd] tx1, m0 ─┐
///               (BIRD)  ├─ eth2 ── rx2 [h2: nlb-sim, nlbd] tx2, m0 ─┼─ br0 ─ b1 b2 b3 (VIP on lo)
///                       ├─ eth3 ── rx3 [h3: nlb-sim, nlbd] tx3, m0 ─┤  (in `host`: etcd
///                       └─ lan 10.77.0.2 ───────────────────────────┘   on 10.77.0.1)
///   (replies: DSR via the router; BGP: each nlbd from m0 to 10.77.0.2)
/// ```
fn build_ecmp_topology(lab: &mut Lab) {
    add_namespaces(lab, &["host", "rtr", "cli", "b1", "b2", "b3"]);
    add_namespaces(lab, &FLEET);
    let (host, rtr, cli) = (lab.ns("host"), lab.ns("rtr"), lab.ns("cli"));
    ip_in(&host, &["link", "add", "br0", "type", "bridge"]);
    ip_in(&host, &["link", "set", "br0", "up"]);
    ip_in(&host, &["addr", "add", "10.77.0.1/24", "dev", "br0"]);
    add_backends(lab);
    for b in BACKENDS {
        ip_in(&lab.ns(b), &["route", "add", "10.78.0.0/24", "via", ROUTER]);
    }
    for (k, v) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.ipv4.fib_multipath_hash_policy", "1"),
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
    ] {
        lab.run_in("rtr", &["sysctl", "-qw", &format!("{k}={v}")])
            .unwrap();
    }
    ip_in(
        &rtr,
        &[
            "link", "add", "cli0", "type", "veth", "peer", "name", "eth0", "netns", &cli,
        ],
    );
    ip_in(&rtr, &["addr", "add", "10.78.0.1/24", "dev", "cli0"]);
    ip_in(&rtr, &["link", "set", "cli0", "up"]);
    ip_in(
        &cli,
        &["addr", "add", &format!("{FLEET_CLIENT}/24"), "dev", "eth0"],
    );
    ip_in(&cli, &["link", "set", "eth0", "up"]);
    ip_in(&cli, &["route", "add", "default", "via", "10.78.0.1"]);
    ip_in(
        &rtr,
        &[
            "link", "add", "lan", "type", "veth", "peer", "name", "h-rtr", "netns", &host,
        ],
    );
    ip_in(&host, &["link", "set", "h-rtr", "master", "br0", "up"]);
    ip_in(
        &rtr,
        &["addr", "add", &format!("{ROUTER}/24"), "dev", "lan"],
    );
    ip_in(&rtr, &["link", "set", "lan", "up"]);
    for (n, h) in (1..).zip(FLEET) {
        add_fleet_host(lab, n, h);
    }
}

/// Host `h` (number `n`): its NIC's links and its own leg on the bridge.
fn add_fleet_host(lab: &mut Lab, n: usize, h: &str) {
    let (host, rtr, me) = (lab.ns("host"), lab.ns("rtr"), lab.ns(h));
    let (eth, rx, tx, port, leg) = (
        format!("eth{n}"),
        format!("rx{n}"),
        format!("tx{n}"),
        format!("h-tx{n}"),
        format!("h-m{n}"),
    );
    ip_in(
        &rtr,
        &[
            "link", "add", &eth, "type", "veth", "peer", "name", &rx, "netns", &me,
        ],
    );
    ip_in(
        &rtr,
        &["addr", "add", &format!("10.79.{n}.1/30"), "dev", &eth],
    );
    ip_in(&rtr, &["link", "set", &eth, "up"]);
    ip_in(&me, &["link", "set", &rx, "up"]);
    ip_in(
        &rtr,
        &[
            "neigh",
            "replace",
            &nic_address(n),
            "lladdr",
            NIC_MAC,
            "dev",
            &eth,
            "nud",
            "permanent",
        ],
    );
    ip_in(
        &me,
        &[
            "link", "add", &tx, "type", "veth", "peer", "name", &port, "netns", &host,
        ],
    );
    ip_in(&host, &["link", "set", &port, "master", "br0", "up"]);
    ip_in(&me, &["link", "set", &tx, "up"]);
    ip_in(
        &me,
        &[
            "link", "add", "m0", "type", "veth", "peer", "name", &leg, "netns", &host,
        ],
    );
    ip_in(&host, &["link", "set", &leg, "master", "br0", "up"]);
    ip_in(
        &me,
        &[
            "addr",
            "add",
            &format!("{}/24", host_address(n)),
            "dev",
            "m0",
        ],
    );
    ip_in(&me, &["link", "set", "m0", "up"]);
}

/// Host `n`'s NIC on the router's link: the next hop it announces.
fn nic_address(n: usize) -> String {
    format!("10.79.{n}.2")
}

/// Host `n`'s own address (etcd, probes, BGP; its BGP identifier).
fn host_address(n: usize) -> String {
    format!("10.77.0.2{n}")
}

/// The router's BIRD: one passive eBGP session per host, routes into the kernel's main
/// table with ECMP (`merge paths`), graceful restart as the receiving side.
fn bird_config(lab: &Lab) -> String {
    let peers: String = (1..=FLEET.len())
        .map(|n| {
            format!(
                "protocol bgp h{n} from nlb {{ neighbor {} as {FLEET_AS}; }}\n",
                host_address(n)
            )
        })
        .collect();
    format!(
        r#"log "{log}" all;
router id {ROUTER};
protocol device {{ scan time 1; }}
protocol kernel {{
  ipv4 {{ import none; export all; }};
  merge paths on;
}}
template bgp nlb {{
  local {ROUTER} as {ROUTER_AS};
  passive on;
  hold time {HOLD_SECS};
  keepalive time 1;
  graceful restart on;
  error wait time 1, 2;
  ipv4 {{ import all; export none; }};
}}
{peers}"#,
        log = lab.path("bird-routes.log").display()
    )
}

/// The lab's configuration with a `bgp` section: every host peers with the router. Until
/// `with_b3`, pool `web` has b1 and b2 only: b3 is added halfway through the rolling upgrade.
fn fleet_config(with_b3: bool) -> String {
    let config = if with_b3 {
        config()
    } else {
        config().replace("instances: [b1, b2, b3]", "instances: [b1, b2]")
    };
    assert!(with_b3 || config.contains("instances: [b1, b2]"));
    format!(
        "{}bgp:
  asn: {FLEET_AS}
  routerId: 192.0.2.1
  holdTimeSec: {HOLD_SECS}
  gracefulRestartSec: {RESTART_SECS}
  drainQuietSec: 2
  neighbors: [{{address: {ROUTER}, asn: {ROUTER_AS}}}]
",
        config
    )
}

/// The next hops of the router's route to the VIP (none: no route).
fn nexthops(lab: &Lab) -> Vec<String> {
    let out = lab
        .run_in("rtr", &["ip", "-j", "route", "show", VIP])
        .unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let mut hops: Vec<String> = Vec::new();
    for r in v.as_array().into_iter().flatten() {
        if let Some(g) = r["gateway"].as_str() {
            hops.push(g.to_string());
        }
        for h in r["nexthops"].as_array().into_iter().flatten() {
            if let Some(g) = h["gateway"].as_str() {
                hops.push(g.to_string());
            }
        }
    }
    hops.sort();
    hops
}

/// The next hops of hosts `ns` (numbers from 1).
fn hops_of(ns: &[usize]) -> Vec<String> {
    let mut v: Vec<String> = ns.iter().map(|n| nic_address(*n)).collect();
    v.sort();
    v
}

/// The running fleet.
struct Fleet {
    sockets: Vec<PathBuf>,
    revision: i64,
}

impl Fleet {
    fn logs(&self, lab: &Lab) -> String {
        let mut s: String = FLEET
            .iter()
            .map(|h| {
                format!(
                    "--- nlbd-{h} ---\n{}\n--- nlb-sim-{h} ---\n{}",
                    lab.log(&format!("nlbd-{h}")),
                    lab.log(&format!("nlb-sim-{h}"))
                )
            })
            .collect();
        s.push_str(&format!(
            "--- bird ---\n{}\n{}",
            lab.log("bird"),
            std::fs::read_to_string(lab.path("bird-routes.log")).unwrap_or_default()
        ));
        s
    }

    /// Polls `f` until Some within `limit`; panics with the fleet's logs.
    fn wait<T>(
        &self,
        lab: &Lab,
        what: &str,
        limit: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs(lab)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn start_etcd(lab: &mut Lab) {
    let data = lab.path("etcd-data");
    lab.spawn(
        "etcd",
        "host",
        &[
            "etcd",
            "--name",
            "e",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen-client-urls",
            "http://10.77.0.1:2379",
            "--advertise-client-urls",
            "http://10.77.0.1:2379",
            "--listen-peer-urls",
            "http://127.0.0.1:2380",
            "--initial-advertise-peer-urls",
            "http://127.0.0.1:2380",
            "--initial-cluster",
            "e=http://127.0.0.1:2380",
            "--log-level",
            "warn",
        ],
    );
}

/// `nlbctl publish` of the lab's configuration; the revision.
fn publish(lab: &Lab) -> i64 {
    let lb = lab.path("lb.yaml");
    let published = lab.wait_for("a publish to etcd", || {
        lab.run_in(
            "host",
            &[
                crate::bin("nlbctl"),
                "publish",
                lb.to_str().unwrap(),
                "--etcd",
                FLEET_ETCD,
            ],
        )
        .ok()
    });
    published
        .split("as revision ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no revision in: {published}"))
}

/// nlbd on host number `n` (from 0), with its own BGP identifier and next hop.
fn start_nlbd(lab: &mut Lab, n: usize, socket: &Path) {
    let h = FLEET[n];
    let nic = lab.path(&format!("nic-{h}.sock"));
    let metrics = format!("127.0.0.1:{}", 9471 + n);
    let (router_id, next_hop) = (host_address(n + 1), nic_address(n + 1));
    lab.spawn(
        &format!("nlbd-{h}"),
        h,
        &[
            crate::bin("nlbd"),
            "--etcd",
            FLEET_ETCD,
            "--host",
            h,
            "--lease-ttl",
            "2",
            "--device",
            &format!("sim:{}", nic.display()),
            "--admin-socket",
            socket.to_str().unwrap(),
            "--metrics-addr",
            &metrics,
            "--bgp-router-id",
            &router_id,
            "--bgp-next-hop",
            &next_hop,
        ],
    );
}

/// The NIC of host number `n` (from 0).
fn start_nic(lab: &mut Lab, n: usize) {
    let h = FLEET[n];
    let nic_sock = lab.path(&format!("nic-{h}.sock"));
    let (rx, tx) = (format!("rx{}", n + 1), format!("tx{}", n + 1));
    lab.spawn(
        &format!("nlb-sim-{h}"),
        h,
        &[
            crate::bin("nlb-sim"),
            "--socket",
            nic_sock.to_str().unwrap(),
            "--rx",
            &rx,
            "--tx",
            &tx,
        ],
    );
    lab.wait_for("nlb-sim's socket", || {
        std::os::unix::net::UnixStream::connect(&nic_sock).ok()
    });
}

/// Topology, backends, etcd, BIRD, the revision published, three hosts serving it with the
/// pool's two backends eligible, and BIRD's route through all three.
fn start_fleet(lab: &mut Lab) -> Fleet {
    std::fs::write(lab.path("service.py"), SERVICE).unwrap();
    std::fs::write(lab.path("session.py"), SESSION).unwrap();
    std::fs::write(lab.path("probe.py"), PROBE).unwrap();
    std::fs::write(lab.path("lb.yaml"), fleet_config(false)).unwrap();
    std::fs::write(lab.path("bird.conf"), bird_config(lab)).unwrap();
    build_ecmp_topology(lab);
    for b in BACKENDS {
        start_service(lab, b);
        start_health(lab, b);
    }
    start_etcd(lab);
    let (conf, ctl) = (lab.path("bird.conf"), lab.path("bird.ctl"));
    lab.spawn(
        "bird",
        "rtr",
        &[
            "bird",
            "-f",
            "-c",
            conf.to_str().unwrap(),
            "-s",
            ctl.to_str().unwrap(),
        ],
    );
    let revision = publish(lab);
    let sockets: Vec<PathBuf> = FLEET
        .iter()
        .map(|h| lab.path(&format!("admin-{h}.sock")))
        .collect();
    for (n, socket) in sockets.iter().enumerate() {
        start_nic(lab, n);
        start_nlbd(lab, n, socket);
    }
    let fleet = Fleet { sockets, revision };
    fleet.wait(
        lab,
        "the fleet serving with BIRD's route through every host",
        WAIT,
        || (web_eligible(&fleet, 2) && nexthops(lab) == hops_of(&[1, 2, 3])).then_some(()),
    );
    fleet
}

/// Whether every host's status shows pool `web` with `n` eligible backends.
fn web_eligible(fleet: &Fleet, n: usize) -> bool {
    fleet.sockets.iter().all(|s| {
        admin_at(s, "status").is_some_and(|st| {
            st["pools"].as_array().is_some_and(|pools| {
                pools.iter().any(|p| {
                    p["name"] == "web" && p["eligible"].as_array().is_some_and(|e| e.len() == n)
                })
            })
        })
    })
}

/// `nlbctl WHAT --socket SOCK --json` (the admin socket is a file: reachable from here).
fn admin_at(sock: &Path, what: &str) -> Option<serde_json::Value> {
    let o = Command::new(crate::bin("nlbctl"))
        .args([what, "--socket", sock.to_str()?, "--json"])
        .output()
        .ok()?;
    if !o.status.success() {
        return None;
    }
    serde_json::from_slice(&o.stdout).ok()
}

/// Packets host `sock`'s NIC matched to a forwarding rule (nlbd's admin socket, the
/// counters request `nlbctl top` makes).
fn rule_packets(sock: &Path) -> Option<u64> {
    use nlb_control::admin_proto::{CountersData, Reply, Request};
    let mut stream = std::os::unix::net::UnixStream::connect(sock).ok()?;
    let mut line = serde_json::to_string(&Request::Counters).ok()?;
    line.push('\n');
    stream.write_all(line.as_bytes()).ok()?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).ok()?;
    let reply: Reply<CountersData> = serde_json::from_str(&answer).ok()?;
    Some(reply.data?.rules.iter().map(|r| r.packets).sum())
}

/// Which host's NIC tracks each session's connection (None: none yet).
fn carriers(fleet: &Fleet, sessions: &[Session]) -> Vec<Option<usize>> {
    let tracked: Vec<Vec<String>> = fleet
        .sockets
        .iter()
        .map(|s| {
            admin_at(s, "conntrack")
                .and_then(|c| {
                    c["entries"].as_array().map(|e| {
                        e.iter()
                            .filter_map(|x| x["client"].as_str().map(str::to_string))
                            .collect()
                    })
                })
                .unwrap_or_default()
        })
        .collect();
    sessions
        .iter()
        .map(|s| {
            let me = format!("{FLEET_CLIENT}:{}", s.port);
            tracked.iter().position(|t| t.contains(&me))
        })
        .collect()
}

/// Long-lived connections until each host carries at least one (the router's layer-4 hash
/// picks the host; each NIC learns the connections it sees open).
fn open_sessions(lab: &Lab, fleet: &Fleet) -> Vec<Session> {
    let mut sessions: Vec<Session> = Vec::new();
    while sessions.len() < 48 {
        let mut s = Session::open(lab);
        s.round_trip()
            .unwrap_or_else(|e| panic!("a new session failed: {e}\n{}", fleet.logs(lab)));
        sessions.push(s);
        // Enough that some are pinned once b3 joins (each moves with probability 1/3: all
        // 24 stay with probability 6e-5).
        if sessions.len() >= 24 {
            let c = fleet.wait(lab, "the sessions' connections installed", WAIT, || {
                let c = carriers(fleet, &sessions);
                c.iter().all(Option::is_some).then_some(c)
            });
            if (0..3).all(|h| c.contains(&Some(h))) {
                return sessions;
            }
        }
    }
    panic!(
        "48 connections did not reach all three hosts: {:?}",
        carriers(fleet, &sessions)
    );
}

/// One round trip on every session: those that failed (another backend would have answered
/// with a reset).
fn broken(sessions: &mut [Session]) -> Vec<String> {
    let mut broken = Vec::new();
    for (i, s) in sessions.iter_mut().enumerate() {
        if let Err(e) = s.round_trip() {
            broken.push(format!("session {i} to {}: {e}", s.backend));
        }
    }
    broken
}

const PROBE: &str = r#"
# New connections to VIP:80 from the client, one started every PERIOD seconds for DURATION
# seconds, each within LIMIT seconds (1: a lost SYN is not sent again within it; 3.5: TCP's
# first retransmission, at 1 s, is): prints "UNIX_TIME ok|fail" per connection.
import socket, sys, threading, time
vip, period, duration, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
lock = threading.Lock()
def probe(t):
    ok = False
    try:
        s = socket.create_connection((vip, 80), timeout=limit)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        ok = s.recv(100).startswith(b"HTTP/1.0 200")
        s.close()
    except OSError:
        pass
    with lock:
        print("%.3f %s" % (t, "ok" if ok else "fail"), flush=True)
threads = []
start = time.time()
while time.time() - start < duration:
    t = threading.Thread(target=probe, args=(time.time(),))
    t.start()
    threads.append(t)
    time.sleep(period)
for t in threads:
    t.join()
"#;

/// A new connection's limit where none may fail: TCP's first SYN retransmission (at 1 s) is
/// in, as for any client (a frame lost by the userspace NIC on a loaded machine is not a
/// failure of what is tested). Where a host is lost, connections get 1 s: no retransmission,
/// so that every connection hashed to the dead host counts.
const RETRIED: f64 = 3.5;

/// New connections probed from the client in the background.
struct Probe {
    child: Child,
}

impl Probe {
    /// Connections for `seconds`, each given `limit` seconds.
    fn start(lab: &Lab, seconds: u64, limit: f64) -> Probe {
        let script = lab.path("probe.py");
        let child = lab
            .exec(
                "cli",
                &[
                    "python3",
                    script.to_str().unwrap(),
                    VIP,
                    "0.02",
                    &seconds.to_string(),
                    &limit.to_string(),
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the probe");
        Probe { child }
    }

    /// Waits for the end: (Unix time, succeeded) per connection, in start order.
    fn results(self) -> Vec<(f64, bool)> {
        let out = self.child.wait_with_output().expect("the probe's output");
        let mut v: Vec<(f64, bool)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (t, r) = l.split_once(' ')?;
                Some((t.parse().ok()?, r == "ok"))
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Three NLB hosts announcing the VIP to the router's BIRD (SPEC R11.3, R15.1): long-lived
/// connections spread over the three stay up (each round trip reaching the backend it
/// started with) through a drain, an nlbd restart and the loss of a host; BIRD's ECMP route
/// follows what the hosts announce.
pub fn bgp_fleet_drains_restarts_and_loses_a_host() {
    remove_stale_namespaces();
    let mut lab = Lab {
        prefix: format!("nlbe{}-f", std::process::id()),
        dir: tempfile::tempdir().unwrap(),
        children: Vec::new(),
        namespaces: Vec::new(),
    };
    let mut fleet = start_fleet(&mut lab);
    announcements_shown(&lab, &fleet);
    let mut sessions = open_sessions(&lab, &fleet);
    drain_phase(&lab, &fleet, &mut sessions);
    restart_phase(&mut lab, &fleet, &mut sessions);
    upgrade_phase(&lab, &fleet, &mut sessions);
    bitstream_phase(&lab, &mut fleet, &mut sessions);
    undrained_upgrade_phase(&lab, &fleet, &mut sessions);
    host_loss_phase(&mut lab, &fleet, &mut sessions);
    nic_loss_phase(&mut lab, &fleet, &mut sessions);
    drop(sessions);
}

/// `nlbctl status`, the metrics and `nlbctl fleet status` say what each host announces.
fn announcements_shown(lab: &Lab, fleet: &Fleet) {
    for (n, s) in fleet.sockets.iter().enumerate() {
        let st = admin_at(s, "status").unwrap();
        let bgp = &st["bgp"];
        assert_eq!(
            bgp["announcing"],
            serde_json::json!([format!("{VIP}/32")]),
            "{st}"
        );
        let neighbor = &bgp["neighbors"][0];
        assert_eq!(neighbor["neighbor"], format!("{ROUTER}:179"), "{st}");
        assert_eq!(
            neighbor["state"],
            "Established",
            "{st}\n{:?}\n{}",
            lab.run_in("rtr", &["ip", "route"]),
            fleet.logs(lab)
        );
        assert_eq!(neighbor["router_id"], ROUTER, "{st}");
        assert_eq!(neighbor["hold_time"], HOLD_SECS, "{st}");
        assert_eq!(neighbor["graceful_restart"], true, "{st}");
        let metrics = lab
            .run_in(
                FLEET[n],
                &[
                    "curl",
                    "-sS",
                    &format!("http://127.0.0.1:{}/metrics", 9471 + n),
                ],
            )
            .unwrap();
        for line in [
            format!("nlbd_bgp_vip_announced{{vip=\"{VIP}/32\"}} 1"),
            format!("nlbd_bgp_neighbor_up{{neighbor=\"{ROUTER}:179\"}} 1"),
            format!("nlbd_bgp_neighbor_announced_routes{{neighbor=\"{ROUTER}:179\"}} 1"),
        ] {
            assert!(
                metrics.lines().any(|l| l == line),
                "no `{line}` in\n{metrics}"
            );
        }
    }
    // BIRD's own view: three sessions up, each with the VIP from its host.
    let ctl = lab.path("bird.ctl");
    let routes = lab
        .run_in(
            "rtr",
            &["birdc", "-s", ctl.to_str().unwrap(), "show", "route", "all"],
        )
        .unwrap();
    for n in 1..=3 {
        assert!(
            routes.contains(&format!("via {} on eth{n}", nic_address(n))),
            "{routes}"
        );
    }
    // The hosts' records say the same (each host writes its record within half a second).
    fleet.wait(
        lab,
        "`nlbctl fleet status` showing every host's announcement",
        WAIT,
        || {
            let hosts = host_records(lab)?;
            (hosts.len() == 3
                && hosts.iter().all(|h| {
                    h["revision"] == fleet.revision
                        && h["announced"] == serde_json::json!([format!("{VIP}/32")])
                }))
            .then_some(())
        },
    );
}

/// `nlbctl drain h1`: the router's route loses h1, h1's NIC stands still (new flows go to the
/// others), the sessions moved by the rehash carry on; undone, h1 is back in the route.
fn drain_phase(lab: &Lab, fleet: &Fleet, sessions: &mut [Session]) {
    let nlbctl = crate::bin("nlbctl");
    // New connections all along: the drain loses none, and h1's NIC sees its last packets
    // right after the withdrawal.
    let probe = Probe::start(lab, 5, RETRIED);
    // The probe's connections reach h1 (its counters move) before the drain starts.
    let at_start = rule_packets(&fleet.sockets[0]).unwrap();
    fleet.wait(lab, "the probe's connections reaching h1", WAIT, || {
        (rule_packets(&fleet.sockets[0])? > at_start).then_some(())
    });
    // The router's route and h1's NIC's counters every 20 ms while the drain runs.
    let (stop_tx, stop_rx) = channel::<()>();
    let socket = fleet.sockets[0].clone();
    let rtr = lab.ns("rtr");
    let started = Instant::now();
    let watcher = std::thread::spawn(move || {
        let mut samples: Vec<(Duration, Option<u64>, bool)> = Vec::new();
        while stop_rx.try_recv().is_err() {
            let route = sh(&["ip", "-n", &rtr, "route", "show", VIP]).unwrap_or_default();
            let via_h1 = route.contains(&nic_address(1));
            samples.push((started.elapsed(), rule_packets(&socket), via_h1));
            std::thread::sleep(Duration::from_millis(20));
        }
        samples
    });
    let out = lab
        .run_in(
            "host",
            &[
                nlbctl,
                "drain",
                "h1",
                "--etcd",
                FLEET_ETCD,
                "--timeout",
                "30",
                "-o",
                "json",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", fleet.logs(lab)));
    let _ = stop_tx.send(());
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    eprintln!("bgp fleet: drain of h1: {report}");
    assert_eq!(report["drained"], true, "{report}");
    let results = probe.results();
    let failed = results.iter().filter(|r| !r.1).count();
    eprintln!(
        "bgp fleet: new connections during the drain: {failed} of {} failed",
        results.len()
    );
    assert_eq!(failed, 0, "new connections failed during a drain");
    let samples = watcher.join().unwrap();
    let route_gone = samples.iter().find(|x| !x.2).map(|x| x.0);
    let last_packet = samples
        .windows(2)
        .rfind(|w| w[0].1 != w[1].1)
        .map(|w| w[1].0);
    let secs = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.3} s", d.as_secs_f64()));
    eprintln!(
        "bgp fleet: after `nlbctl drain h1` started: the router's route lost h1 at {}, h1's NIC counted its last packet by {} ({} samples, 20 ms apart)",
        secs(route_gone),
        secs(last_packet),
        samples.len()
    );
    assert_eq!(nexthops(lab), hops_of(&[2, 3]), "{}", fleet.logs(lab));
    let before = rule_packets(&fleet.sockets[0]).unwrap();
    let answers = lab.curls(20);
    assert!(
        answers.iter().all(|a| BACKENDS.contains(&a.as_str())),
        "{answers:?}"
    );
    let broken_now = broken(sessions);
    assert!(
        broken_now.is_empty(),
        "drain: {broken_now:?}\n{}",
        fleet.logs(lab)
    );
    assert_eq!(
        rule_packets(&fleet.sockets[0]).unwrap(),
        before,
        "the drained h1's NIC still receives packets"
    );
    // Its status says why it announces nothing.
    let st = admin_at(&fleet.sockets[0], "status").unwrap();
    assert_eq!(st["bgp"]["draining"], true, "{st}");
    assert_eq!(
        st["bgp"]["neighbors"][0]["announced"],
        serde_json::json!([]),
        "{st}"
    );
    lab.run_in(
        "host",
        &[nlbctl, "drain", "h1", "--etcd", FLEET_ETCD, "--undo"],
    )
    .unwrap();
    fleet.wait(lab, "h1 back in the route", WAIT, || {
        (nexthops(lab) == hops_of(&[1, 2, 3])).then_some(())
    });
    let broken_now = broken(sessions);
    assert!(
        broken_now.is_empty(),
        "undrain: {broken_now:?}\n{}",
        fleet.logs(lab)
    );
}

/// h2's nlbd is killed (no withdrawal: the TCP connection closes) and started again: BIRD
/// keeps its route throughout (graceful restart), and the new nlbd takes it over.
fn restart_phase(lab: &mut Lab, fleet: &Fleet, sessions: &mut [Session]) {
    let probe = Probe::start(lab, 6, RETRIED);
    lab.stop("nlbd-h2");
    let stopped = Instant::now();
    // The route through h2 stays while no nlbd runs there.
    let mut samples = 0;
    while stopped.elapsed() < Duration::from_secs(2) {
        assert_eq!(
            nexthops(lab),
            hops_of(&[1, 2, 3]),
            "graceful restart lost h2's route"
        );
        samples += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    start_nlbd(lab, 1, &fleet.sockets[1]);
    fleet.wait(
        lab,
        "h2's new nlbd established and announcing",
        WAIT,
        || {
            let st = admin_at(&fleet.sockets[1], "status")?;
            let n = &st["bgp"]["neighbors"][0];
            (n["state"] == "Established"
                && n["announced"] == serde_json::json!([format!("{VIP}/32")]))
            .then_some(())
        },
    );
    let restart = stopped.elapsed();
    assert_eq!(nexthops(lab), hops_of(&[1, 2, 3]));
    let results = probe.results();
    let failed = results.iter().filter(|r| !r.1).count();
    eprintln!(
        "bgp fleet: nlbd restart on h2: announced again {:.1} s after the kill; route kept ({samples} samples); new connections: {failed} of {} failed",
        restart.as_secs_f64(),
        results.len()
    );
    assert_eq!(failed, 0, "new connections failed across an nlbd restart");
    let broken_now = broken(sessions);
    assert!(
        broken_now.is_empty(),
        "restart: {broken_now:?}\n{}",
        fleet.logs(lab)
    );
}

/// `nlbctl fleet upgrade --binary`: a file that is no nlbd is refused by the first host, which
/// serves again, and nothing else moves; then a new nlbd executable (this build's, with bytes
/// appended: another digest) replaces nlbd on each host in turn, with new connections
/// starting every 20 ms throughout and none failing.
fn upgrade_phase(lab: &Lab, fleet: &Fleet, sessions: &mut [Session]) {
    let nlbctl = crate::bin("nlbctl");
    let bogus = lab.path("not-nlbd");
    std::fs::write(&bogus, "#!/bin/sh\nexit 3\n").unwrap();
    must(&["chmod", "755", bogus.to_str().unwrap()]);
    let o = lab
        .exec(
            "host",
            &[
                nlbctl,
                "fleet",
                "upgrade",
                "--binary",
                bogus.to_str().unwrap(),
                "--etcd",
                FLEET_ETCD,
                "--quiet-sec",
                "1",
                "--timeout",
                "30",
            ],
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("h1: refused the new nlbd")
            && err.contains("--version` failed")
            && err.contains("h2, h3 not upgraded"),
        "{err}"
    );
    fleet.wait(
        lab,
        "h1 back in the route after the refused upgrade",
        WAIT,
        || {
            let undrained = host_records(lab)?.iter().all(|h| h["draining"] != true);
            (undrained && nexthops(lab) == hops_of(&[1, 2, 3])).then_some(())
        },
    );

    let new = lab.path("nlbd-new");
    std::fs::copy(crate::bin("nlbd"), &new).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&new).unwrap();
    f.write_all(b"\nanother build\n").unwrap();
    drop(f);
    let sha = nlb_control::fleet::file_sha256(&new).unwrap();
    let probe = Probe::start(lab, 20, RETRIED);
    // The router's route changes, time-stamped, for a failure's message.
    let monitor_log = lab.path("route-monitor.log");
    let mut monitor = Command::new("ip")
        .args(["-n", &lab.ns("rtr"), "-ts", "monitor", "route"])
        .stdout(std::fs::File::create(&monitor_log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("ip monitor");
    let started = Instant::now();
    let started_unix = unix_now();
    let out = lab
        .run_in(
            "host",
            &[
                nlbctl,
                "fleet",
                "upgrade",
                "--binary",
                new.to_str().unwrap(),
                "--etcd",
                FLEET_ETCD,
                "--quiet-sec",
                "1",
                "--timeout",
                "60",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", fleet.logs(lab)));
    let took = started.elapsed();
    eprintln!(
        "bgp fleet: nlbctl fleet upgrade in {:.1} s:\n{out}",
        took.as_secs_f64()
    );
    assert!(out.contains("every host runs"), "{out}");
    let results = probe.results();
    let failed = results.iter().filter(|r| !r.1).count();
    let when: Vec<String> = results
        .iter()
        .filter(|r| !r.1)
        .map(|r| format!("{:.2}", r.0 - started_unix))
        .collect();
    eprintln!(
        "bgp fleet: new connections during the rolling upgrade: {failed} of {} failed (started at {when:?} s)",
        results.len()
    );
    let _ = monitor.kill();
    let _ = monitor.wait();
    assert_eq!(
        failed,
        0,
        "new connections failed during a rolling upgrade (started at {when:?} s after {started_unix:.3}); the router's route changes:\n{}\n{}",
        std::fs::read_to_string(&monitor_log).unwrap_or_default(),
        fleet.logs(lab)
    );
    let hosts = host_records(lab).expect("nlbctl fleet status");
    for h in &hosts {
        assert_eq!(h["binary_sha256"], sha.as_str(), "{hosts:?}");
    }
    all_serving(lab, fleet, sessions, &hosts, "upgrade");
}

/// After a rolling upgrade: every host announces the VIP, the router's route has all three,
/// and every long-lived session still reaches its backend.
fn all_serving(
    lab: &Lab,
    fleet: &Fleet,
    sessions: &mut [Session],
    hosts: &[serde_json::Value],
    what: &str,
) {
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    for h in hosts {
        assert_eq!(
            h["announced"],
            serde_json::json!([format!("{VIP}/32")]),
            "{hosts:?}"
        );
    }
    assert_eq!(nexthops(lab), hops_of(&[1, 2, 3]));
    let broken_now = broken(sessions);
    assert!(
        broken_now.is_empty(),
        "{what}: {broken_now:?}\n{}",
        fleet.logs(lab)
    );
}

/// `nlbctl fleet upgrade --bitstream` with the given file and extra arguments, from the host
/// namespace: (exit status, stdout, stderr).
fn upgrade_bitstream(lab: &Lab, file: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    spawn_upgrade_bitstream(lab, file, extra).finish()
}

/// Every host's record from `nlbctl fleet status`.
fn host_records(lab: &Lab) -> Option<Vec<serde_json::Value>> {
    let status = lab
        .run_in(
            "host",
            &[
                crate::bin("nlbctl"),
                "fleet",
                "status",
                "--etcd",
                FLEET_ETCD,
                "-o",
                "json",
            ],
        )
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&status).ok()?;
    v["hosts"].as_array().cloned()
}

/// `nlbctl fleet upgrade --bitstream`: a bitstream without a build id is refused before any
/// host is drained; one for another FPGA is refused by the first host's check against its
/// card, which serves again, and nothing else moves; then a bitstream for the cards' FPGA is
/// flashed into each card in turn, each card reboots into it (empty) and its nlbd starts
/// again and loads the fleet's revision, with new connections starting every 20 ms
/// throughout and none failing, and every long-lived session reaching its backend.
fn bitstream_phase(lab: &Lab, fleet: &mut Fleet, sessions: &mut [Session]) {
    use firmware_sim::flash::{bitstream::synthetic, XCU280_IDCODE};
    const NEW_BUILD: u32 = 0x0B17_0002;
    let write = |name: &str, bytes: Vec<u8>| {
        let path = lab.path(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let before = host_records(lab).unwrap();

    // No USR_ACCESS: nlbctl refuses it, no host is touched.
    let anonymous = write("anonymous.bin", synthetic(XCU280_IDCODE, None, 100, 5));
    let (code, _, err) = upgrade_bitstream(lab, &anonymous, &["--timeout", "30"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("anonymous.bin") && err.contains("no USR_ACCESS word"),
        "{err}"
    );
    let after = host_records(lab).unwrap();
    assert!(
        after.iter().all(|h| h["draining"] != true),
        "a refused file drained a host: {after:?}"
    );

    // Another FPGA's bitstream (an XCU250's IDCODE): h1's nlbd checks it against its card.
    // An Alveo U250's FPGA (XCU250), where the cards have an XCU280.
    const XCU250_IDCODE: u32 = 0x04B5_7093;
    let other = write(
        "xcu250.bin",
        synthetic(XCU250_IDCODE, Some(NEW_BUILD), 100, 6),
    );
    let (code, _, err) = upgrade_bitstream(lab, &other, &["--timeout", "30"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("h1: refused the bitstream") && err.contains("h2, h3 not upgraded"),
        "{err}"
    );
    fleet.wait(
        lab,
        "h1 back in the route after the refused bitstream",
        WAIT,
        || {
            let hosts = host_records(lab)?;
            let undrained = hosts.iter().all(|h| h["draining"] != true);
            (undrained && nexthops(lab) == hops_of(&[1, 2, 3])).then_some(())
        },
    );
    let kept = host_records(lab).unwrap();
    for (b, a) in before.iter().zip(&kept) {
        assert_eq!(
            b["build_id"], a["build_id"],
            "a refused bitstream changed a card"
        );
    }

    // The cards' own FPGA: flashed, rebooted and loaded, host after host; as h2 withdraws for
    // its upgrade, b3 joins the pool (a new revision, then b3's first health decision):
    // connections Maglev now sends elsewhere stay pinned to their backend by the host that
    // tracks them, and the hosts still to upgrade carry pinned connections through their
    // drain and their card's reboot (SPEC R15.2).
    let good = write(
        "nlb_top-new.bin",
        synthetic(XCU280_IDCODE, Some(NEW_BUILD), 2_000, 7),
    );
    let probe = Probe::start(lab, 20, RETRIED);
    let started = Instant::now();
    let (code, out, err, broken_during) = with_sessions_busy(sessions, || {
        // h1 first; then the others (h1 already runs the image), with the new revision
        // published the moment h2 withdraws: the revision and b3's first health decision
        // change the tables while h2's connections move to h1 and h3 by ECMP's rehash. Each
        // change is made before it breaks: every host installs what the new tables pin before
        // any host loads them.
        let (code, first, err) =
            spawn_upgrade_bitstream(lab, &good, &["--timeout", "60", "--hosts", "h1"]).finish();
        if code != 0 {
            return (code, first, err);
        }
        let rest = spawn_upgrade_bitstream(lab, &good, &["--timeout", "60"]);
        let h2 = nic_address(2);
        fleet.wait(lab, "h2 withdrawn by its drain", WAIT, || {
            (!nexthops(lab).contains(&h2)).then_some(())
        });
        std::fs::write(lab.path("lb.yaml"), fleet_config(true)).unwrap();
        fleet.revision = publish(lab);
        let (code, rest, err) = rest.finish();
        (code, format!("{first}{rest}"), err)
    });
    assert_eq!(code, 0, "{out}\n{err}\n{}", fleet.logs(lab));
    eprintln!(
        "bgp fleet: nlbctl fleet upgrade --bitstream (b3 added as h2 withdrew) in {:.1} s:\n{out}",
        started.elapsed().as_secs_f64()
    );
    assert!(out.contains("every host runs"), "{out}");
    let results = probe.results();
    let failed = results.iter().filter(|r| !r.1).count();
    let pinned = pinned_counts(fleet);
    eprintln!(
        "bgp fleet: during the rolling bitstream upgrade with a backend added as h2 withdrew: {} of {} long-lived connections broken (a round trip on each every 300 ms), {failed} of {} new connections failed; pinned connections now (own, copies) per host: {pinned:?}; changes of the tables since each nlbd started (made before they broke, loaded after the longest wait, the last one's wait in ms): {:?}",
        broken_during.len(),
        sessions.len(),
        results.len(),
        table_changes(lab)
    );
    assert!(
        broken_during.is_empty(),
        "long-lived connections broke during the upgrade: {broken_during:?}\n{}",
        fleet.logs(lab)
    );
    assert_eq!(
        failed,
        0,
        "new connections failed during a bitstream upgrade\n{}",
        fleet.logs(lab)
    );
    // Some sessions are pinned (else this proved nothing about them): the hosts that carry
    // them publish them, the others hold copies.
    let own: u64 = pinned.iter().map(|p| p.0).sum();
    assert!(own > 0, "no connection is pinned: {pinned:?}");
    let revision = fleet.revision;
    fleet.wait(
        lab,
        "every host serving the revision with b3 eligible",
        WAIT,
        || {
            let hosts = host_records(lab)?;
            (web_eligible(fleet, 3) && hosts.iter().all(|h| h["revision"] == revision))
                .then_some(())
        },
    );
    let hosts = host_records(lab).unwrap();
    for h in &hosts {
        assert_eq!(h["build_id"], NEW_BUILD, "{hosts:?}");
        assert_eq!(h["revision"], fleet.revision, "{hosts:?}");
        assert_eq!(h["tables_digest"], hosts[0]["tables_digest"], "{hosts:?}");
    }
    all_serving(lab, fleet, sessions, &hosts, "bitstream upgrade");
}

/// The baseline: the same rolling bitstream upgrade without draining (`--no-drain`), under
/// the same traffic: each card reboots while the router still sends it packets. What broke is
/// printed, then the sessions that broke are closed (the next phases check the others).
fn undrained_upgrade_phase(lab: &Lab, fleet: &Fleet, sessions: &mut Vec<Session>) {
    use firmware_sim::flash::{bitstream::synthetic, XCU280_IDCODE};
    const BUILD: u32 = 0x0B17_0003;
    let image = lab.path("nlb_top-undrained.bin");
    std::fs::write(&image, synthetic(XCU280_IDCODE, Some(BUILD), 2_000, 8)).unwrap();
    let probe = Probe::start(lab, 15, RETRIED);
    let (code, out, err, broken_during) = with_sessions_busy(sessions, || {
        spawn_upgrade_bitstream(lab, &image, &["--timeout", "60", "--no-drain"]).finish()
    });
    assert_eq!(code, 0, "{out}\n{err}\n{}", fleet.logs(lab));
    assert!(out.contains("not drained"), "{out}");
    let results = probe.results();
    let failed = results.iter().filter(|r| !r.1).count();
    eprintln!(
        "bgp fleet: baseline, the same upgrade without draining: {} of {} long-lived connections broken, {failed} of {} new connections failed\n{out}",
        broken_during.len(),
        sessions.len(),
        results.len()
    );
    let broken_at: std::collections::BTreeSet<usize> =
        broken_during.iter().map(|(i, _)| *i).collect();
    let mut i = 0;
    sessions.retain(|_| {
        i += 1;
        !broken_at.contains(&(i - 1))
    });
    assert!(!sessions.is_empty(), "every session broke");
    fleet.wait(lab, "every host announcing again", WAIT, || {
        (nexthops(lab) == hops_of(&[1, 2, 3])).then_some(())
    });
}

/// Runs `during` while a thread makes a round trip on every session every 300 ms: its
/// result and the sessions that broke (index, first error).
fn with_sessions_busy(
    sessions: &mut [Session],
    during: impl FnOnce() -> (i32, String, String),
) -> (i32, String, String, Vec<(usize, String)>) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let busy = scope.spawn(|| {
            let mut broken: std::collections::BTreeMap<usize, String> = Default::default();
            loop {
                let last = stop.load(std::sync::atomic::Ordering::Relaxed);
                for (i, s) in sessions.iter_mut().enumerate() {
                    if broken.contains_key(&i) {
                        continue;
                    }
                    if let Err(e) = s.round_trip() {
                        broken.insert(i, format!("session {i} to {}: {e}", s.backend));
                    }
                }
                if last {
                    return broken.into_iter().collect::<Vec<_>>();
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        let (code, out, err) = during();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let broken = busy.join().unwrap();
        (code, out, err, broken)
    })
}

/// `nlbctl fleet upgrade --bitstream` running in the background.
struct RunningUpgrade {
    child: Child,
}

impl RunningUpgrade {
    /// Waits for its end: (exit status, stdout, stderr).
    fn finish(self) -> (i32, String, String) {
        let o = self.child.wait_with_output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

fn spawn_upgrade_bitstream(lab: &Lab, file: &std::path::Path, extra: &[&str]) -> RunningUpgrade {
    let mut args = vec![
        crate::bin("nlbctl"),
        "fleet",
        "upgrade",
        "--bitstream",
        file.to_str().unwrap(),
        "--etcd",
        FLEET_ETCD,
        "--quiet-sec",
        "1",
    ];
    args.extend_from_slice(extra);
    let child = lab
        .exec("host", &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    RunningUpgrade { child }
}

/// Each host's pinned connections: (own, copies), from `nlbctl status --socket`.
/// Per host, changes of the tables since its nlbd started: (made before they broke, loaded
/// after the longest wait, how long the last one waited for the fleet in ms), from its
/// metrics.
fn table_changes(lab: &Lab) -> Vec<(u64, u64, u64)> {
    (0..FLEET.len())
        .map(|n| {
            let url = format!("http://127.0.0.1:{}/metrics", 9471 + n);
            let metrics = lab
                .run_in(FLEET[n], &["curl", "-sS", &url])
                .unwrap_or_default();
            let value = |name: &str| -> f64 {
                metrics
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                    .unwrap_or(0.0)
            };
            let count = |outcome: &str| {
                value(&format!(
                    "nlb_fleet_table_changes_total{{outcome=\"{outcome}\"}}"
                )) as u64
            };
            let wait_ms = value("nlb_fleet_table_change_wait_seconds") * 1e3;
            (
                count("shared"),
                count("waited_too_long"),
                wait_ms.round() as u64,
            )
        })
        .collect()
}

fn pinned_counts(fleet: &Fleet) -> Vec<(u64, u64)> {
    fleet
        .sockets
        .iter()
        .map(|s| {
            let st = admin_at(s, "status").unwrap_or_default();
            (
                st["pinned"]["own"].as_u64().unwrap_or(0),
                st["pinned"]["copies"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// h3 goes silent (its own link down, then nlbd and its NIC killed: nothing tells the router):
/// BIRD withdraws it when the hold time runs out; new connections hashed to it are lost until
/// then, none after; every session carries on through the others to the same backend.
fn host_loss_phase(lab: &mut Lab, fleet: &Fleet, sessions: &mut [Session]) {
    let probe = Probe::start(lab, HOLD_SECS + 4, 1.0);
    std::thread::sleep(Duration::from_millis(500));
    let died = unix_now();
    let t = Instant::now();
    ip_in(&lab.ns("h3"), &["link", "set", "m0", "down"]);
    lab.stop("nlbd-h3");
    lab.stop("nlb-sim-h3");
    fleet.wait(
        lab,
        "BIRD withdrawing h3",
        Duration::from_secs(HOLD_SECS + 3),
        || (nexthops(lab) == hops_of(&[1, 2])).then_some(()),
    );
    let withdrawn = t.elapsed();
    let results = probe.results();
    let after: Vec<&(f64, bool)> = results.iter().filter(|r| r.0 >= died).collect();
    let failed: Vec<f64> = after.iter().filter(|r| !r.1).map(|r| r.0 - died).collect();
    let window = failed.last().copied().unwrap_or(0.0);
    eprintln!(
        "bgp fleet: h3 lost: withdrawn after {:.2} s (hold time {HOLD_SECS} s); new connections: {} of {} failed, the last started {window:.2} s after the loss",
        withdrawn.as_secs_f64(),
        failed.len(),
        after.len()
    );
    assert!(
        withdrawn <= Duration::from_secs(HOLD_SECS + 2),
        "withdrawn after {withdrawn:?}"
    );
    assert!(
        window <= withdrawn.as_secs_f64() + 0.5,
        "new connections failed {window:.2} s after the loss, the route went at {withdrawn:?}: {failed:?}"
    );
    let broken_now = broken(sessions);
    assert!(
        broken_now.is_empty(),
        "host loss: {broken_now:?}\n{}",
        fleet.logs(lab)
    );
    let answers = lab.curls(20);
    assert!(
        answers.iter().all(|a| BACKENDS.contains(&a.as_str())),
        "{answers:?}"
    );
}

/// h2's NIC goes (nlb-sim killed) while its nlbd runs: nlbd cannot read the NIC and withdraws
/// the VIP itself; the route keeps h1 alone and every session carries on through it.
fn nic_loss_phase(lab: &mut Lab, fleet: &Fleet, sessions: &mut [Session]) {
    let t = Instant::now();
    lab.stop("nlb-sim-h2");
    fleet.wait(lab, "h2 withdrawn once its NIC is gone", WAIT, || {
        (nexthops(lab) == hops_of(&[1])).then_some(())
    });
    let withdrawn = t.elapsed();
    let st = admin_at(&fleet.sockets[1], "status");
    eprintln!(
        "bgp fleet: h2's NIC gone: withdrawn after {:.2} s; nlbd says: {}",
        withdrawn.as_secs_f64(),
        st.as_ref()
            .map_or("(no status)".to_string(), |s| s["bgp"]["withheld"]
                .to_string())
    );
    let broken_now = broken(sessions);
    assert!(
        broken_now.is_empty(),
        "NIC loss: {broken_now:?}\n{}",
        fleet.logs(lab)
    );
}
