//! The end-to-end scenario on real Linux networking (SPEC R3, R4.1, R5, R8), shared by
//! `e2e.rs` (nlb-sim running the golden model) and `e2e_rtl.rs` (nlb-sim running the Verilator
//! RTL): network namespaces, veth pairs and a bridge; the simulated NIC (`nlb-sim`) attached
//! with AF_PACKET; `nlbd` managing it; three backends with the VIP on their loopback running
//! real HTTP servers; `curl` as the client; replies by L2 direct server return. Topology and
//! how to run it: docs/e2e.md.
//!
//! Needs root (namespaces, veths). Without root it skips with a message, unless `CI` is set,
//! in which case it fails: CI must run it.
//!
//! ```text
//!   ns cli: eth0 10.77.0.10 ─┐                       ┌─ eth0 10.77.0.11 (VIP on lo)  ns b1
//!   VIP 10.77.1.1 → NIC MAC  │   ns host: bridge br0 ├─ eth0 10.77.0.12 (VIP on lo)  ns b2
//!                            └── 10.77.0.1 (nlbd) ───┼─ eth0 10.77.0.13 (VIP on lo)  ns b3
//!                                nic0 ── nlb-sim ────┘   (rx and tx on nic0)
//! ```
//!
//! Nothing turns checksum offload off: the client's frames reach nlb-sim with partial TCP
//! checksums (CHECKSUM_PARTIAL on a veth), and nlb-sim must complete them or the backends drop
//! what it forwards.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

mod fleet;
pub use fleet::{bgp_fleet_drains_restarts_and_loses_a_host, have_bird, have_etcd};

use nlb_testkit::Need;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// Which NIC `nlb-sim` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The golden model.
    Model,
    /// The Verilator RTL (`--engine rtl`).
    Rtl,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Model => "model",
            Engine::Rtl => "rtl",
        }
    }

    /// How long nlbd may take to attach to the NIC: it reads both table banks and the
    /// connection table back through the registers, which the RTL runs clock by clock.
    fn attach_limit(self) -> Duration {
        match self {
            Engine::Model => WAIT,
            Engine::Rtl => Duration::from_secs(600),
        }
    }
}

const VIP: &str = "10.77.1.1";
/// Two UDP rules on the VIP (SPEC R4.3: its fragments need the host): `dns` to the pool
/// `web`, `bulk` to the pool `bulk`, whose only member is `BULK_BACKEND`.
const DNS_PORT: u16 = 5353;
const BULK_PORT: u16 = 7000;
const BULK_BACKEND: &str = "b3";
const NIC_MAC: &str = "02:00:00:00:00:01";
const BACKENDS: [&str; 3] = ["b1", "b2", "b3"];
/// Generous: a loaded 2-core CI machine.
pub const WAIT: Duration = Duration::from_secs(45);

fn backend_ip(i: usize) -> String {
    format!("10.77.0.{}", 11 + i)
}

fn backend_mac(i: usize) -> String {
    format!("02:77:00:00:00:{:02x}", 0x11 + i)
}

/// Whether the test runs here ([`nlb_testkit::needs`]): root (namespaces, veth pairs) and the
/// programs the laboratory runs. `command` is how to run the test, for the message.
pub fn should_run(command: &str) -> bool {
    nlb_testkit::needs(
        &format!("the end-to-end test (`sudo -E {command}`, docs/e2e.md)"),
        &[
            Need::Root,
            Need::program("ip", "iproute2"),
            Need::program("curl", "curl"),
            Need::program("python3", "python3"),
        ],
    )
}

/// Runs `cmd` and returns its standard output, or an error starting with `what` that carries
/// its standard error.
fn captured(mut cmd: Command, what: &str) -> Result<String, String> {
    let o = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Runs `args` and returns its standard output, or why it failed (status and output).
pub fn sh(args: &[&str]) -> Result<String, String> {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    captured(c, &format!("`{}` failed", args.join(" ")))
}

/// [`sh`], panicking with the failure.
pub fn must(args: &[&str]) -> String {
    sh(args).unwrap_or_else(|e| panic!("{e}"))
}

/// The namespaces and processes of one run; everything is removed on drop (also when the
/// test fails).
pub struct Lab {
    /// The prefix of this run's namespace names (unique per process).
    pub prefix: String,
    /// Files of the run: configurations, logs, captures.
    pub dir: tempfile::TempDir,
    /// Long-running processes by label, killed on drop.
    pub children: Vec<(String, Child)>,
    /// The namespaces created, deleted on drop.
    pub namespaces: Vec<String>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

impl Lab {
    /// A new run: namespaces left by dead runs removed, this run's prefix `nlbe<pid><suffix>`
    /// (unique per process and scenario), a fresh directory.
    pub fn new(suffix: &str) -> Lab {
        remove_stale_namespaces();
        Lab {
            prefix: format!("nlbe{}{suffix}", std::process::id()),
            dir: tempfile::tempdir().unwrap(),
            children: Vec::new(),
            namespaces: Vec::new(),
        }
    }

    /// The full name of namespace `name` of this run.
    pub fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// A file of this run.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `ip netns exec NS args...` as a command.
    pub fn exec(&self, ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(ns)]).args(args);
        c
    }

    /// Runs `args` in namespace `ns` and returns its standard output.
    pub fn run_in(&self, ns: &str, args: &[&str]) -> Result<String, String> {
        captured(
            self.exec(ns, args),
            &format!("`{}` in {ns}", args.join(" ")),
        )
    }

    /// Starts a long-running process in a namespace; its stderr goes to `<label>.log`.
    pub fn spawn(&mut self, label: &str, ns: &str, args: &[&str]) {
        let log = std::fs::File::create(self.path(&format!("{label}.log"))).unwrap();
        let child = self
            .exec(ns, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {label}: {e}"));
        self.children.push((label.to_string(), child));
    }

    /// Kills and reaps the process `label`.
    pub fn stop(&mut self, label: &str) {
        if let Some(i) = self.children.iter().position(|(l, _)| l == label) {
            let (_, mut c) = self.children.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The label of nlb-sim or nlbd if it has exited (a zombie not yet reaped, or gone).
    fn daemon_gone(&self) -> Option<&str> {
        self.children
            .iter()
            .filter(|(l, _)| l == "nlb-sim" || l == "nlbd")
            .find(|(_, c)| {
                // `ip netns exec` execs the program: the child's pid is the daemon's.
                std::fs::read_to_string(format!("/proc/{}/stat", c.id())).map_or(true, |st| {
                    st.rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().next())
                        == Some("Z")
                })
            })
            .map(|(l, _)| l.as_str())
    }

    /// The standard error of process `label` so far.
    pub fn log(&self, label: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{label}.log"))).unwrap_or_default()
    }

    /// The logs of nlbd and nlb-sim, for a failure's message.
    pub fn logs(&self) -> String {
        ["nlbd", "nlb-sim"]
            .iter()
            .map(|l| format!("--- {l} ---\n{}", self.log(l)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Polls until `f` gives `Some`, or fails naming `what` with the daemons' logs.
    pub fn wait_for<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        self.wait_long(what, WAIT, f)
    }

    /// [`Lab::wait_for`] with its own time limit.
    pub fn wait_long<T>(&self, what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if let Some(gone) = self.daemon_gone() {
                panic!("{gone} exited while waiting for {what}\n{}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `nlbctl WHAT --socket admin.sock --json`.
    pub fn admin(&self, what: &str) -> Option<serde_json::Value> {
        let sock = self.path("admin.sock");
        let o = Command::new(crate::bin("nlbctl"))
            .args([what, "--socket", sock.to_str()?, "--json"])
            .output()
            .ok()?;
        if !o.status.success() {
            return None;
        }
        serde_json::from_slice(&o.stdout).ok()
    }

    fn health(&self, backend: &str) -> Option<String> {
        let h = self.admin("health")?;
        h["targets"]
            .as_array()?
            .iter()
            .find(|t| t["backend"] == backend)
            .and_then(|t| t["health"].as_str().map(str::to_string))
    }

    fn eligible(&self) -> Option<Vec<String>> {
        let s = self.admin("status")?;
        let web = s["pools"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == "web")?
            .clone();
        Some(
            web["eligible"]
                .as_array()?
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        )
    }

    /// One `curl http://VIP/` from the client: the answering backend's name, or why not.
    fn curl(&self) -> Result<String, String> {
        self.run_in(
            "cli",
            &["curl", "-sS", "--max-time", "5", &format!("http://{VIP}/")],
        )
        .map(|s| s.trim().to_string())
    }

    /// `n` requests; the backends that answered, in order. Every request must succeed.
    fn curls(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                self.curl()
                    .unwrap_or_else(|e| panic!("request {i} failed: {e}\n{}", self.logs()))
            })
            .collect()
    }
}

/// Removes namespaces of earlier runs whose process is gone (a run killed before cleaning).
pub fn remove_stale_namespaces() {
    let Ok(list) = sh(&["ip", "netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name
            .strip_prefix("nlbe")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = sh(&["ip", "netns", "del", name]);
        }
    }
}

// The programs the namespaces run (each script's head says what it does).
const SERVICE: &str = include_str!("../scripts/service.py");
const SESSION: &str = include_str!("../scripts/session.py");
const UDP_CLIENT: &str = include_str!("../scripts/udp_client.py");

fn config() -> String {
    let instances: String = (0..3)
        .map(|i| {
            format!(
                "  - {{name: {}, ip: {}, zone: lab-a, mac: '{}'}}\n",
                BACKENDS[i],
                backend_ip(i),
                backend_mac(i)
            )
        })
        .collect();
    format!(
        "nic: {{mac: '{NIC_MAC}'}}
forwardingRules:
  - {{name: web, IPAddress: {VIP}, IPProtocol: TCP, portRange: '80', target: web}}
  - {{name: session, IPAddress: {VIP}, IPProtocol: TCP, portRange: '9000', target: web}}
  - {{name: dns, IPAddress: {VIP}, IPProtocol: UDP, portRange: '{DNS_PORT}', target: web}}
  - {{name: bulk, IPAddress: {VIP}, IPProtocol: UDP, portRange: '{BULK_PORT}', target: bulk}}
targetPools:
  - {{name: web, region: lab, instances: [b1, b2, b3], healthChecks: [hc]}}
  - {{name: bulk, region: lab, instances: [{BULK_BACKEND}]}}
instances:
{instances}httpHealthChecks:
  - {{name: hc, port: 8080, requestPath: /healthz, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 2}}
"
    )
}

/// Namespaces `names` of the lab, loopback up, IPv6 off.
pub fn add_namespaces(lab: &mut Lab, names: &[&str]) {
    for ns in names {
        let name = lab.ns(ns);
        must(&["ip", "netns", "add", &name]);
        lab.namespaces.push(name.clone());
        must(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        // No IPv6 chatter (router solicitations) on the segment.
        let _ = lab.run_in(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        let _ = lab.run_in(
            ns,
            &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
        );
    }
}

/// The backends b1..b3 on the host namespace's bridge br0: the VIP on loopback, not answered
/// in ARP (L2 DSR, SPEC R8).
fn add_backends(lab: &mut Lab) {
    let host = lab.ns("host");
    let ip_host = |args: &[&str]| {
        let mut v = vec!["ip", "-n", host.as_str()];
        v.extend_from_slice(args);
        must(&v);
    };
    for (i, b) in BACKENDS.iter().enumerate() {
        let ns = lab.ns(b);
        let port = format!("h-{b}");
        ip_host(&[
            "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
        ]);
        ip_host(&["link", "set", &port, "master", "br0", "up"]);
        must(&[
            "ip",
            "-n",
            &ns,
            "link",
            "set",
            "eth0",
            "address",
            &backend_mac(i),
        ]);
        must(&[
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/24", backend_ip(i)),
            "dev",
            "eth0",
        ]);
        must(&["ip", "-n", &ns, "link", "set", "eth0", "up"]);
        must(&[
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{VIP}/32"),
            "dev",
            "lo",
        ]);
        lab.run_in(b, &["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"])
            .unwrap();
        lab.run_in(b, &["sysctl", "-qw", "net.ipv4.conf.all.arp_announce=2"])
            .unwrap();
    }
}

fn build_topology(lab: &mut Lab) {
    add_namespaces(lab, &["host", "cli", "b1", "b2", "b3"]);
    let host = lab.ns("host");
    let ip_host = |args: &[&str]| {
        let mut v = vec!["ip", "-n", host.as_str()];
        v.extend_from_slice(args);
        must(&v);
    };
    ip_host(&["link", "add", "br0", "type", "bridge"]);
    ip_host(&["link", "set", "br0", "up"]);
    ip_host(&["addr", "add", "10.77.0.1/24", "dev", "br0"]);
    // The NIC's port: nlb-sim receives and transmits on nic0.
    ip_host(&[
        "link", "add", "h-nic", "type", "veth", "peer", "name", "nic0",
    ]);
    ip_host(&["link", "set", "h-nic", "master", "br0", "up"]);
    ip_host(&["link", "set", "nic0", "up"]);
    // The client.
    let cli = lab.ns("cli");
    ip_host(&[
        "link", "add", "h-cli", "type", "veth", "peer", "name", "eth0", "netns", &cli,
    ]);
    ip_host(&["link", "set", "h-cli", "master", "br0", "up"]);
    must(&[
        "ip",
        "-n",
        &cli,
        "addr",
        "add",
        "10.77.0.10/24",
        "dev",
        "eth0",
    ]);
    must(&["ip", "-n", &cli, "link", "set", "eth0", "up"]);
    must(&[
        "ip",
        "-n",
        &cli,
        "route",
        "add",
        &format!("{VIP}/32"),
        "dev",
        "eth0",
    ]);
    // The client's ICMP errors (port unreachable, below) are not rate limited.
    lab.run_in("cli", &["sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"])
        .unwrap();
    // The VIP resolves to the NIC's MAC: only nlb-sim receives what the client sends to it.
    must(&[
        "ip",
        "-n",
        &cli,
        "neigh",
        "replace",
        VIP,
        "lladdr",
        NIC_MAC,
        "dev",
        "eth0",
        "nud",
        "permanent",
    ]);
    add_backends(lab);
}

fn start_service(lab: &mut Lab, b: &str) {
    let script = lab.path("service.py");
    let script = script.to_str().unwrap().to_string();
    let (dns, bulk) = (DNS_PORT.to_string(), BULK_PORT.to_string());
    lab.spawn(
        &format!("service-{b}"),
        b,
        &["python3", &script, b, "80", "9000", VIP, &dns, &bulk],
    );
}

fn start_health(lab: &mut Lab, b: &str) {
    let script = lab.path("service.py");
    let script = script.to_str().unwrap().to_string();
    lab.spawn(
        &format!("health-{b}"),
        b,
        &["python3", &script, b, "8080", "0"],
    );
}

/// The long-lived connection: a python client in the client namespace.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    backend: String,
    /// The client's port.
    port: u16,
    rounds: u32,
}

impl Session {
    fn open(lab: &Lab) -> Session {
        let script = lab.path("session.py");
        let mut child = lab
            .exec("cli", &["python3", script.to_str().unwrap(), VIP])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("session client");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines.recv_timeout(WAIT).expect("the session's first line");
        let (backend, port) = first
            .strip_prefix("backend ")
            .and_then(|r| r.split_once(' '))
            .and_then(|(b, p)| Some((b.to_string(), p.parse().ok()?)))
            .unwrap_or_else(|| panic!("session: {first}"));
        Session {
            child,
            stdin,
            lines,
            backend,
            port,
            rounds: 0,
        }
    }

    /// One echo round trip over the same connection.
    fn round_trip(&mut self) -> Result<(), String> {
        self.rounds += 1;
        writeln!(self.stdin, "go").map_err(|e| e.to_string())?;
        self.stdin.flush().map_err(|e| e.to_string())?;
        match self.lines.recv_timeout(WAIT) {
            Ok(l) if l == format!("ok {}", self.rounds) => Ok(()),
            Ok(l) => Err(l),
            Err(e) => Err(format!("no answer: {e}")),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Source MACs of the frames that carried replies from the VIP to the client, captured in the
/// client namespace while `during` runs (None when tcpdump is not installed).
fn reply_macs(lab: &Lab, during: impl FnOnce()) -> Option<Vec<String>> {
    let found = Command::new("sh")
        .args(["-c", "command -v tcpdump"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("note: tcpdump not installed; the reply path is not captured");
        during();
        return None;
    }
    let out = lab.path("replies.txt");
    let mut cap = lab
        .exec(
            "cli",
            &[
                "tcpdump",
                "-i",
                "eth0",
                "-n",
                "-e",
                "-l",
                "-U",
                "tcp and src host",
                VIP,
            ],
        )
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump");
    // tcpdump says "listening on ..." once the capture runs.
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    during();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid, not reaped yet.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let _ = cap.wait();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    Some(
        text.lines()
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect(),
    )
}

/// `udp.py` in the client namespace: `count` datagrams of `size` bytes to VIP:`port` (with
/// `twice`, each asks for a second answer that meets a closed port); its output lines.
fn udp(lab: &Lab, port: u16, size: usize, count: usize, twice: bool) -> Vec<String> {
    let script = lab.path("udp.py");
    let (port, size, count) = (port.to_string(), size.to_string(), count.to_string());
    let mut args = vec![
        "python3",
        script.to_str().unwrap(),
        VIP,
        &port,
        &size,
        &count,
    ];
    if twice {
        args.push("twice");
    }
    lab.run_in("cli", &args)
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.logs()))
        .lines()
        .map(str::to_string)
        .collect()
}

/// nlbd's metrics page.
fn metrics(lab: &Lab) -> String {
    lab.run_in(
        "host",
        &[
            "curl",
            "-sS",
            "--max-time",
            "10",
            "http://127.0.0.1:9470/metrics",
        ],
    )
    .unwrap()
}

/// The value of an unlabelled metric.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Fragments through a VIP with two UDP rules (SPEC R4.3) and ICMP errors about UDP flows
/// (SPEC R10.2), checked by what the backends received.
fn udp_fragments_and_icmp_errors(lab: &Lab) {
    // Datagrams of 4000 bytes leave the client as three IP fragments each (MTU 1500). The NIC
    // punts every one (the VIP has two UDP rules; later fragments carry no port); nlbd sends
    // them through the inject queue to the first fragment's backend, nlb-sim transmits them,
    // and the backend's kernel reassembles the datagram: its answer carries the length and
    // SHA-256 of what arrived, checked by the client. `bulk` has one backend.
    let bulk = udp(lab, BULK_PORT, 4000, 4, false);
    assert_eq!(
        bulk,
        vec![format!("answer {BULK_BACKEND}"); 4],
        "fragmented datagrams to the `bulk` rule"
    );
    // `dns` goes to the three-member pool `web`: under NONE a fragment is hashed on the
    // 3-tuple (SPEC R4.2), so every datagram of this client goes to one backend.
    let dns = udp(lab, DNS_PORT, 4000, 4, false);
    let who: std::collections::BTreeSet<&str> = dns
        .iter()
        .filter_map(|l| l.strip_prefix("answer "))
        .collect();
    assert!(
        dns.len() == 4 && who.len() == 1 && BACKENDS.contains(who.first().unwrap()),
        "fragmented datagrams to the `dns` rule: {dns:?}"
    );
    let m = metrics(lab);
    let injected = metric(&m, "nlbd_injected_total").unwrap_or(0.0);
    assert!(
        injected >= 24.0,
        "8 datagrams of 3 fragments went through nlbd's inject queue: {injected}"
    );
    assert!(
        lab.log("nlb-sim")
            .contains("transmitting frames the host injected"),
        "{}",
        lab.logs()
    );

    // ICMP errors: each datagram to `dns` is answered twice, the client's socket is closed
    // after the first answer, so its kernel sends a port unreachable to the VIP quoting the
    // second. The NIC sends it to the flow's backend, whose kernel hands it to the service's
    // socket (IP_RECVERR): the service logs it with the flow's client port.
    let flows = udp(lab, DNS_PORT, 16, 8, true);
    assert_eq!(flows.len(), 8, "{flows:?}");
    let client = "10.77.0.10";
    for f in &flows {
        let mut it = f.split_whitespace().skip(1);
        let (Some(port), Some(backend)) = (it.next(), it.next()) else {
            panic!("udp.py: {f}");
        };
        let about = format!("about {client}:{port}");
        lab.wait_for(
            &format!("the ICMP error about port {port} at {backend}"),
            || {
                lab.log(&format!("service-{backend}"))
                    .contains(&format!("icmp type 3 code 3 {about}"))
                    .then_some(())
            },
        );
        for other in BACKENDS.iter().filter(|b| **b != backend) {
            assert!(
                !lab.log(&format!("service-{other}")).contains(&about),
                "the ICMP error about port {port} (a flow to {backend}) reached {other}"
            );
        }
    }
    let m = metrics(lab);
    assert!(
        metric(
            &m,
            "nlb_reason_packets_total{reason=\"ICMP_ERROR_FORWARDED\"}"
        )
        .unwrap_or(0.0)
            >= 8.0,
        "the NIC forwarded the ICMP errors"
    );
}

/// The whole scenario with nlb-sim running `engine`.
pub fn curl_through_the_simulated_nic_with_health_checks_and_dsr(engine: Engine) {
    // The model and RTL runs share a process (one test binary) and may run at once.
    let mut lab = Lab::new(&format!("-{}", engine.name()));
    std::fs::write(lab.path("service.py"), SERVICE).unwrap();
    std::fs::write(lab.path("session.py"), SESSION).unwrap();
    std::fs::write(lab.path("udp.py"), UDP_CLIENT).unwrap();
    std::fs::write(lab.path("lb.yaml"), config()).unwrap();
    build_topology(&mut lab);
    for b in BACKENDS {
        start_service(&mut lab, b);
        start_health(&mut lab, b);
    }

    let nic_sock = lab.path("nic.sock");
    let nic = nic_sock.to_str().unwrap().to_string();
    lab.spawn(
        "nlb-sim",
        "host",
        &[
            crate::bin("nlb-sim"),
            "--socket",
            &nic,
            "--rx",
            "nic0",
            "--tx",
            "nic0",
            "--engine",
            engine.name(),
        ],
    );
    lab.wait_for("nlb-sim's socket", || {
        std::os::unix::net::UnixStream::connect(&nic_sock).ok()
    });
    let config = lab.path("lb.yaml");
    let admin = lab.path("admin.sock");
    lab.spawn(
        "nlbd",
        "host",
        &[
            crate::bin("nlbd"),
            "--config",
            config.to_str().unwrap(),
            "--device",
            &format!("sim:{nic}"),
            "--admin-socket",
            admin.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:9470",
        ],
    );
    let attach = Instant::now();
    lab.wait_long("nlbd attached to the NIC", engine.attach_limit(), || {
        lab.admin("status")
    });
    eprintln!(
        "e2e ({}): nlbd attached and loaded in {:.1} s",
        engine.name(),
        attach.elapsed().as_secs_f64()
    );
    for b in BACKENDS {
        lab.wait_for(&format!("{b} healthy"), || {
            (lab.health(b)? == "healthy").then_some(())
        });
    }

    // 1. curl to the VIP works; new connections spread over the backends; the replies come
    //    straight from the backends (their MACs), not through the NIC.
    let mut answers = Vec::new();
    let macs = reply_macs(&lab, || answers = lab.curls(30));
    let spread: std::collections::BTreeSet<&String> = answers.iter().collect();
    assert!(spread.len() >= 2, "30 connections all went to {spread:?}");
    assert!(
        answers.iter().all(|a| BACKENDS.contains(&a.as_str())),
        "{answers:?}"
    );
    if let Some(macs) = macs {
        assert!(!macs.is_empty(), "no reply frame captured");
        let backend_macs: Vec<String> = (0..3).map(backend_mac).collect();
        for m in &macs {
            assert!(
                backend_macs.contains(m),
                "a reply came from {m}, not from a backend's own MAC"
            );
        }
    }

    // 2. UDP fragments through a VIP with two UDP rules, and ICMP errors about UDP flows.
    udp_fragments_and_icmp_errors(&lab);

    // 3. A long-lived connection, then another backend stops: it turns unhealthy, new
    //    connections avoid it, the long-lived connection carries on.
    let mut session = Session::open(&lab);
    session.round_trip().unwrap();
    let kept = session.backend.clone();
    let victim = BACKENDS.iter().find(|b| **b != kept).unwrap().to_string();
    lab.stop(&format!("service-{victim}"));
    lab.stop(&format!("health-{victim}"));
    lab.wait_for(&format!("{victim} unhealthy"), || {
        (lab.health(&victim)? == "unhealthy").then_some(())
    });
    lab.wait_for(&format!("{victim} out of the tables"), || {
        let e = lab.eligible()?;
        (e.len() == 2 && !e.contains(&victim)).then_some(())
    });
    let answers = lab.curls(30);
    assert!(
        !answers.contains(&victim),
        "a new connection reached the unhealthy {victim}: {answers:?}"
    );
    session
        .round_trip()
        .unwrap_or_else(|e| panic!("the long-lived connection to {kept} broke: {e}"));

    // 4. Its service comes back but its health check does not: still no new connections.
    start_service(&mut lab, &victim);
    std::thread::sleep(Duration::from_millis(500));
    let answers = lab.curls(15);
    assert!(!answers.contains(&victim), "{answers:?}");

    // 5. Every health check fails: fail open, all three take new connections again (the
    //    unhealthy ones included), and the long-lived connection still carries on.
    for b in BACKENDS.iter().filter(|b| **b != victim) {
        lab.stop(&format!("health-{b}"));
    }
    for b in BACKENDS {
        lab.wait_for(&format!("{b} unhealthy"), || {
            (lab.health(b)? == "unhealthy").then_some(())
        });
    }
    lab.wait_for("fail open (three eligible)", || {
        (lab.eligible()?.len() == 3).then_some(())
    });
    let answers = lab.curls(40);
    let spread: std::collections::BTreeSet<&String> = answers.iter().collect();
    assert!(
        answers.contains(&victim) && spread.len() == 3,
        "fail open should serve all three: {answers:?}"
    );
    session
        .round_trip()
        .unwrap_or_else(|e| panic!("the long-lived connection to {kept} broke: {e}"));

    // nlbd installed what the NIC learned, and its metrics say what happened.
    let s = lab.admin("status").unwrap();
    assert!(s["learn_events"].as_u64().unwrap() > 0, "{s}");
    // The events came by the host rings, on either engine: the RTL's DMA master wrote them
    // into nlbd's memory (shared with nlb-sim) as a card's would.
    assert_eq!(
        s["pcie"]["rings"],
        serde_json::json!(true),
        "host rings: {s}"
    );
    assert!(s["pcie"]["dma_writes"].as_u64().unwrap_or(0) > 0, "{s}");
    // Both engines carry the four rings (the fragments above went back out through the
    // inject ring; tables and connections are written through the command ring;
    // docs/driver.md).
    let carried: &[&str] = &["punt", "event", "inject", "cmd"];
    assert_eq!(
        s["pcie"]["ring_names"],
        serde_json::json!(carried),
        "rings carried: {s}"
    );
    // Three table changes: the victim out; one more down; fail open.
    assert!(s["decisions"].as_u64().unwrap() >= 3, "{s}");
    let metrics = metrics(&lab);
    for needle in [
        "nlbd_pool_eligible{pool=\"web\"} 3",
        "nlbd_pool_healthy{pool=\"web\"} 0",
        "nlb_rule_packets_total{rule=\"web\"}",
        "nlbd_decision_to_active_seconds_count",
    ] {
        assert!(metrics.contains(needle), "metrics lack `{needle}`");
    }
    // The client's frames came with partial checksums (nothing turned offload off), and
    // nlb-sim completed them: the backends answered every request above.
    assert!(
        lab.log("nlb-sim")
            .contains("completing the partial TCP/UDP checksums"),
        "nlb-sim never saw a partial checksum\n{}",
        lab.logs()
    );
    eprintln!(
        "e2e ({}): decision to table active: mean {:.2} ms, max {:.2} ms over {} decisions",
        engine.name(),
        s["decision_latency_mean_ms"].as_f64().unwrap_or(0.0),
        s["decision_latency_max_ms"].as_f64().unwrap_or(0.0),
        s["decisions"]
    );
    drop(session);
}

// --- A backend service filling the NIC's zone, then spilling (SPEC R6) -----------------------

/// The many-connection client: one python process holding long-lived connections (its
/// commands: the script's head).
const CONNECTIONS: &str = include_str!("../scripts/connections.py");

/// The backend service's port on the VIP (the backends' session service).
const ZONAL_PORT: u16 = 9000;
/// Connections per instance (`maxConnectionsPerInstance`).
const PER_INSTANCE: u64 = 4;
/// The NIC's zone holds b1; the other zone b2 and b3.
const NEAR: [&str; 1] = ["b1"];
const FAR: [&str; 2] = ["b2", "b3"];

/// nlbd's configuration for the zonal scenario: a regional backend service with one instance
/// group in the NIC's zone (lab-a) and one in lab-b, `WATERFALL_BY_ZONE`, 4 connections per
/// instance.
fn zonal_config() -> String {
    let zone = |b: &str| if NEAR.contains(&b) { "lab-a" } else { "lab-b" };
    let instances: String = (0..3)
        .map(|i| {
            format!(
                "  - {{name: {}, ip: {}, zone: {}, mac: '{}'}}\n",
                BACKENDS[i],
                backend_ip(i),
                zone(BACKENDS[i]),
                backend_mac(i)
            )
        })
        .collect();
    format!(
        "nic: {{mac: '{NIC_MAC}', region: lab, zone: lab-a}}
forwardingRules:
  - {{name: sessions, IPAddress: {VIP}, IPProtocol: TCP, portRange: '{ZONAL_PORT}', backendService: zonal}}
regionBackendServices:
  - name: zonal
    region: lab
    protocol: TCP
    healthChecks: [hc]
    serviceLbPolicy: zonal
    backends:
      - {{group: near, maxConnectionsPerInstance: {PER_INSTANCE}}}
      - {{group: far, maxConnectionsPerInstance: {PER_INSTANCE}}}
serviceLbPolicies:
  - {{name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}}
instanceGroups:
  - {{name: near, zone: lab-a, instances: [{}]}}
  - {{name: far, zone: lab-b, instances: [{}]}}
healthChecks:
  - {{name: hc, type: HTTP, httpHealthCheck: {{port: 8080, requestPath: /healthz}}, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 2}}
instances:
{instances}",
        NEAR.join(", "),
        FAR.join(", ")
    )
}

/// The many-connection client in the client namespace.
struct Connections {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// Open connections: id → backend.
    open: std::collections::BTreeMap<u32, String>,
}

impl Connections {
    fn start(lab: &Lab) -> Connections {
        let script = lab.path("connections.py");
        let port = ZONAL_PORT.to_string();
        let mut child = lab
            .exec("cli", &["python3", script.to_str().unwrap(), VIP, &port])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("connections client");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Connections {
            child,
            stdin,
            lines,
            open: Default::default(),
        }
    }

    fn ask(&mut self, lab: &Lab, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        match self.lines.recv_timeout(WAIT) {
            Ok(l) if !l.starts_with("error") => l,
            Ok(l) => panic!("`{cmd}`: {l}\n{}", lab.logs()),
            Err(e) => panic!("`{cmd}`: no answer: {e}\n{}", lab.logs()),
        }
    }

    /// Opens one connection; the backend it landed on.
    fn open(&mut self, lab: &Lab) -> String {
        let l = self.ask(lab, "open");
        let mut it = l.split_whitespace().skip(1);
        let (Some(id), Some(backend)) = (it.next().and_then(|i| i.parse().ok()), it.next()) else {
            panic!("connections.py: {l}");
        };
        self.open.insert(id, backend.to_string());
        backend.to_string()
    }

    fn close_all(&mut self, lab: &Lab) {
        let ids: Vec<u32> = self.open.keys().copied().collect();
        for id in ids {
            self.ask(lab, &format!("close {id}"));
            self.open.remove(&id);
        }
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The backend service as `nlbctl status --socket` shows it.
fn zonal_status(lab: &Lab) -> Option<serde_json::Value> {
    let s = lab.admin("status")?;
    s["services"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == "zonal")
        .cloned()
}

fn group<'a>(svc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    svc["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == name))
        .unwrap_or_else(|| panic!("no group {name}: {svc}"))
}

/// Waits until nlbd's latest policy refresh counted `live` open connections (the weights for
/// that count are then active: the refresh that counted them loaded them).
fn wait_live(lab: &Lab, live: u64) -> serde_json::Value {
    lab.wait_for(&format!("nlbd to count {live} live connections"), || {
        let svc = zonal_status(lab)?;
        (svc["live"].as_u64()? == live).then_some(svc)
    })
}

/// A backend service over two zones, real long-lived TCP connections through nlb-sim and nlbd
/// (SPEC R6.1 `WATERFALL_BY_ZONE`, R6.2 capacity): new connections fill the NIC's zone first;
/// once its capacity (4 connections) is taken they spill to the other zone; when the
/// connections close, new ones go back to the NIC's zone.
pub fn backend_service_fills_the_near_zone_then_spills() {
    let mut lab = Lab::new("-bs");
    std::fs::write(lab.path("service.py"), SERVICE).unwrap();
    std::fs::write(lab.path("connections.py"), CONNECTIONS).unwrap();
    std::fs::write(lab.path("lb.yaml"), zonal_config()).unwrap();
    build_topology(&mut lab);
    for b in BACKENDS {
        start_service(&mut lab, b);
        start_health(&mut lab, b);
    }
    let nic_sock = lab.path("nic.sock");
    let nic = nic_sock.to_str().unwrap().to_string();
    lab.spawn(
        "nlb-sim",
        "host",
        &[
            crate::bin("nlb-sim"),
            "--socket",
            &nic,
            "--rx",
            "nic0",
            "--tx",
            "nic0",
        ],
    );
    lab.wait_for("nlb-sim's socket", || {
        std::os::unix::net::UnixStream::connect(&nic_sock).ok()
    });
    let config = lab.path("lb.yaml");
    let admin = lab.path("admin.sock");
    lab.spawn(
        "nlbd",
        "host",
        &[
            crate::bin("nlbd"),
            "--config",
            config.to_str().unwrap(),
            "--device",
            &format!("sim:{nic}"),
            "--admin-socket",
            admin.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:9470",
            "--policy-refresh",
            "100",
        ],
    );
    let started = Instant::now();
    // Each backend's session service answers (from the host's bridge address, not through the
    // NIC): the first connections must not meet a service still starting.
    for (i, b) in BACKENDS.iter().enumerate() {
        let probe = format!(
            "import socket; s = socket.create_connection(('{}', {ZONAL_PORT}), timeout=2); assert s.makefile('rb').readline()",
            backend_ip(i)
        );
        lab.wait_for(&format!("{b}'s session service"), || {
            lab.run_in("host", &["python3", "-c", &probe]).ok()
        });
    }
    // Every endpoint healthy (or counted healthy while not decided), and a first refresh.
    let svc = lab.wait_for("the service's first policy refresh", || {
        let svc = zonal_status(&lab)?;
        let healthy = svc["groups"]
            .as_array()?
            .iter()
            .all(|g| g["healthy"] == g["endpoints"]);
        (healthy && svc["refreshed_at_secs"].as_f64()? > 0.0).then_some(svc)
    });
    // Capacity: 4 per instance × instances (R6.2); idle, the NIC's zone takes everything.
    assert_eq!(group(&svc, "near")["capacity"], 4.0, "{svc}");
    assert_eq!(group(&svc, "far")["capacity"], 8.0, "{svc}");
    assert_eq!(group(&svc, "near")["share"], 1.0, "{svc}");
    assert_eq!(group(&svc, "far")["share"], 0.0, "{svc}");

    // 1. The NIC's zone fills first: while it has room, every new connection goes to b1.
    let mut conns = Connections::start(&lab);
    for i in 0..PER_INSTANCE {
        let b = conns.open(&lab);
        assert!(
            NEAR.contains(&b.as_str()),
            "connection {i} went to {b} while the NIC's zone had room"
        );
        wait_live(&lab, i + 1);
    }
    let svc = wait_live(&lab, PER_INSTANCE);
    assert_eq!(group(&svc, "near")["live"], PER_INSTANCE, "{svc}");
    assert_eq!(group(&svc, "near")["utilisation"], 1.0, "{svc}");

    // 2. Its capacity taken and none of its connections closing, the NIC's zone takes no new
    //    connection: every one spills to the other zone while that has room (8). Past the
    //    total capacity of 12 the overload goes to both in proportion to capacity, and no
    //    zone fills past 3 √capacity beyond it (SPEC R6.1, fill up to capacity).
    let total = 20;
    let far_capacity = 8;
    let mut spilled = Vec::new();
    for n in PER_INSTANCE..total {
        let b = conns.open(&lab);
        assert!(BACKENDS.contains(&b.as_str()), "{b}");
        if FAR.contains(&b.as_str()) {
            spilled.push(b);
        } else {
            assert!(
                n >= PER_INSTANCE + far_capacity,
                "connection {n} went to the full NIC's zone ({b}) while the other had room"
            );
        }
        wait_live(&lab, n + 1);
    }
    let svc = wait_live(&lab, total);
    eprintln!(
        "e2e (backend service): {} of {} connections past the NIC's zone's capacity spilled to lab-b; near holds {}, far {}",
        spilled.len(),
        total - PER_INSTANCE,
        group(&svc, "near")["live"],
        group(&svc, "far")["live"]
    );
    assert!(
        spilled.len() as u64 >= far_capacity,
        "{} connections spilled to the other zone once the NIC's zone was full: {svc}",
        spilled.len()
    );
    let near_live = group(&svc, "near")["live"].as_u64().unwrap();
    assert!(
        near_live <= PER_INSTANCE + 6,
        "the NIC's zone holds {near_live}, more than 3 √4 past its capacity of 4: {svc}"
    );
    assert!(group(&svc, "far")["share"].as_f64().unwrap() > 0.0, "{svc}");
    assert!(group(&svc, "far")["tier"].as_u64() == Some(1), "{svc}");
    assert_eq!(
        group(&svc, "near")["live"].as_u64().unwrap()
            + group(&svc, "far")["live"].as_u64().unwrap(),
        total
    );
    // Every connection still carries traffic (established ones keep their backend whatever
    // the weights say now).
    assert_eq!(conns.ask(&lab, "ping"), format!("pinged {total}"));
    // `nlbctl explain --socket` names the zone a new connection would go to.
    let o = Command::new(crate::bin("nlbctl"))
        .args(["explain", "--socket", admin.to_str().unwrap()])
        .args([
            "--src",
            "10.77.0.10:40000",
            "--dst",
            &format!("{VIP}:{ZONAL_PORT}"),
        ])
        .args(["--proto", "tcp"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("service  zonal: group ") && text.contains("live connections: "),
        "{text}"
    );
    // Metrics: per group live connections, capacity, share; weight changes were applied.
    let m = metrics(&lab);
    let near_live = format!(
        "nlbd_service_group_live_connections{{service=\"zonal\",group=\"near\",zone=\"lab-a\"}} {}",
        group(&svc, "near")["live"]
    );
    for needle in [
        near_live.as_str(),
        "nlbd_service_group_capacity_connections{service=\"zonal\",group=\"far\",zone=\"lab-b\"} 8",
        "nlbd_service_group_share_ratio{service=\"zonal\",group=\"far\",zone=\"lab-b\"}",
        "nlbd_service_policy_refresh_seconds_count",
    ] {
        assert!(m.contains(needle), "metrics lack `{needle}`:\n{m}");
    }
    assert!(
        metric(&m, "nlbd_service_weight_changes_total").unwrap_or(0.0) >= 1.0,
        "{m}"
    );

    // 3. Every connection closes (FIN: not live any more); new ones fill the NIC's zone again.
    conns.close_all(&lab);
    wait_live(&lab, 0);
    for i in 0..PER_INSTANCE {
        let b = conns.open(&lab);
        assert!(
            NEAR.contains(&b.as_str()),
            "connection {i} after the others closed went to {b}, not to the NIC's zone"
        );
        wait_live(&lab, i + 1);
    }
    eprintln!(
        "e2e (backend service): done in {:.1} s after nlbd started",
        started.elapsed().as_secs_f64()
    );
}
