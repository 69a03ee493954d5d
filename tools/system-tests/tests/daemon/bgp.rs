//! nlbd announcing its VIP to a real BIRD 2 on loopback (SPEC R15.1; docs/fleet.md): one
//! neighbour that takes the session, one that refuses it (BIRD expects another AS), one that
//! never answers (nothing listens). `nlbctl status` and the metrics say which is which and why;
//! `nlbctl drain --socket` withdraws the route from BIRD and `--undo` brings it back; SIGTERM
//! withdraws it and ends the session with an administrative shutdown.

use nlb_system_tests::harness::{self, Nic, Nlbd};
use nlb_testkit::Need;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const VIP: &str = "203.0.113.10";

/// BIRD, killed when the test ends.
struct Bird {
    child: Child,
    ctl: String,
    log: std::path::PathBuf,
}

impl Bird {
    fn start(dir: &Path, port: u16) -> Bird {
        let log = dir.join("bird.log");
        let conf = dir.join("bird.conf");
        std::fs::write(
            &conf,
            format!(
                r#"log "{log}" all;
router id 10.255.0.1;
protocol device {{ }}
template bgp t {{
  multihop;
  passive on;
  hold time 3;
  error wait time 1, 2;
  ipv4 {{ import all; export none; }};
}}
protocol bgp good from t {{ local 127.0.0.1 port {port} as 65000; neighbor 127.0.0.2 as 65100; }}
protocol bgp wrong from t {{ local 127.0.0.4 port {port} as 65000; neighbor 127.0.0.3 as 65999; }}
"#,
                log = log.display()
            ),
        )
        .unwrap();
        let ctl = dir.join("bird.ctl").display().to_string();
        let child = Command::new("bird")
            .args(["-f", "-c", conf.to_str().unwrap(), "-s", &ctl])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bird starts");
        Bird { child, ctl, log }
    }

    /// `birdc show route all`: the routes BIRD has.
    fn routes(&self) -> String {
        let o = Command::new("birdc")
            .args(["-s", &self.ctl, "show", "route", "all"])
            .output()
            .expect("birdc runs");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Bird {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(port: u16, silent: u16) -> String {
    format!(
        "nic: {{mac: '02:00:00:00:00:01'}}
forwardingRules:
  - {{name: web, IPAddress: {VIP}, IPProtocol: TCP, portRange: '80', target: web}}
targetPools:
  - {{name: web, region: r, instances: [b1]}}
instances:
  - {{name: b1, ip: 127.0.0.31, zone: z, mac: '02:00:00:00:00:31'}}
bgp:
  asn: 65100
  routerId: 192.0.2.1
  holdTimeSec: 3
  drainQuietSec: 1
  neighbors:
    - {{address: 127.0.0.1, port: {port}, asn: 65000, localAddress: 127.0.0.2}}
    - {{address: 127.0.0.4, port: {port}, asn: 65000, localAddress: 127.0.0.3}}
    - {{address: 127.0.0.1, port: {silent}, asn: 65000}}
"
    )
}

fn wait<T>(what: &str, nlbd: &Nlbd, bird: &Bird, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + harness::WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\nnlbd:\n{}\nbird:\n{}",
            nlbd.log(),
            bird.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bgp_neighbours_that_refuse_or_never_answer_are_shown_and_a_drain_withdraws_from_bird() {
    if !nlb_testkit::needs(
        "the BGP test (`sudo -E cargo test -p nlb-system-tests --test daemon bgp::`)",
        &[
            Need::Root,
            Need::program("bird", "bird2"),
            Need::program("birdc", "bird2"),
        ],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (port, silent) = (harness::hc_port(40), harness::hc_port(41));
    let bird = Bird::start(dir.path(), port);
    let nic_path = dir.path().join("nic.sock");
    let _nic = Nic::start(&nic_path);
    let lb = dir.path().join("lb.yaml");
    std::fs::write(&lb, config(port, silent)).unwrap();
    let mut nlbd = Nlbd::start(dir.path(), &lb, &nic_path);
    let route = format!("{VIP}/32");

    // The good session carries the VIP; the other two say why they do not.
    let status = wait("the three neighbours' states", &nlbd, &bird, || {
        let st = nlbd.admin("status")?;
        let n = st["bgp"]["neighbors"].as_array()?.clone();
        let err = |i: usize| n[i]["last_error"].as_str().unwrap_or("").to_string();
        (n[0]["state"] == "Established"
            && n[0]["announced"] == serde_json::json!([route])
            && err(1).contains("bad peer AS")
            && err(2).contains(&format!("cannot connect to 127.0.0.1:{silent}")))
        .then_some(st)
    });
    assert_ne!(status["bgp"]["neighbors"][1]["state"], "Established");
    assert_ne!(status["bgp"]["neighbors"][2]["state"], "Established");
    wait("BIRD's route from nlbd", &nlbd, &bird, || {
        bird.routes().contains(&route).then_some(())
    });
    // The text status names each neighbour with its state and last error.
    let text = harness::nlbctl(&["status", "--socket", nlbd.socket.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("bgp          announcing {route}")),
        "{text}"
    );
    assert!(text.contains("bad peer AS"), "{text}");
    assert!(
        text.contains(&format!("cannot connect to 127.0.0.1:{silent}")),
        "{text}"
    );
    let addr = status["metrics_addr"].as_str().unwrap().to_string();
    let metrics = get(&addr);
    for (n, up) in [
        (format!("127.0.0.1:{port}"), 1),
        (format!("127.0.0.4:{port}"), 0),
        (format!("127.0.0.1:{silent}"), 0),
    ] {
        let line = format!("nlbd_bgp_neighbor_up{{neighbor=\"{n}\"}} {up}");
        assert!(
            metrics.lines().any(|l| l == line),
            "no `{line}` in\n{metrics}"
        );
    }

    // A drain on this host alone: BIRD loses the route, then gets it back.
    let out = harness::nlbctl(&[
        "drain",
        "--socket",
        nlbd.socket.to_str().unwrap(),
        "--timeout",
        "20",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(
        report["quiet_secs"], 1,
        "the configuration's drainQuietSec: {report}"
    );
    assert!(!bird.routes().contains(&route), "{}", bird.routes());
    let st = nlbd.admin("status").unwrap();
    assert_eq!(
        st["bgp"]["withheld"],
        serde_json::json!(["drained (nlbctl drain)"]),
        "{st}"
    );
    let out = harness::nlbctl(&["drain", "--socket", nlbd.socket.to_str().unwrap(), "--undo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait("BIRD's route back after the undo", &nlbd, &bird, || {
        bird.routes().contains(&route).then_some(())
    });

    // SIGTERM: the route goes before nlbd exits, with an administrative shutdown.
    let status = nlbd.terminate();
    assert!(status.success(), "{status:?}\n{}", nlbd.log());
    assert!(!bird.routes().contains(&route), "{}", bird.routes());
    let log = bird.log();
    assert!(log.contains("Administrative shutdown"), "{log}");
}

/// `GET http://ADDR/metrics`.
fn get(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
