//! Reloads under traffic through the processes an operator runs: `nlb-sim` replays the packets
//! of established TCP connections at a steady rate while `nlbd`, attached over nlb-sim's
//! socket, applies configuration after configuration that add and remove instances. Every
//! frame nlb-sim forwards is written to its output pcap; each is decoded with etherparse and
//! its destination MAC must be the one its connection's first frame went to (SPEC R4.1).

use etherparse::{PacketBuilder, SlicedPacket};
use firmware_sim::pcap::{read_frames, FrameWriter};
use nlb_system_tests::harness;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const FLOWS: u16 = 256;
const RATE: u64 = 40_000;
const PASSES: u64 = 600;
const RELOADS: u64 = 12;

/// A child process killed when the test ends however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pool: stable backends web-1..4 carry the connections; `churn` joins them this round
/// (names sorting before, between and after theirs, so name-ordered ids would move them).
fn config(churn: &[String]) -> String {
    let mut members: Vec<String> = (1..=4).map(|i| format!("web-{i}")).collect();
    members.extend(churn.iter().cloned());
    let mut s = format!(
        "forwardingRules:\n  - {{name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: web}}\n\
         targetPools:\n  - {{name: web, region: r, instances: [{}]}}\ninstances:\n",
        members.join(", ")
    );
    for m in &members {
        let octet = m
            .bytes()
            .fold(7u8, |h, b| h.wrapping_mul(31).wrapping_add(b))
            | 1;
        let _ = writeln!(
            s,
            "  - {{name: {m}, ip: 192.0.2.{octet}, zone: z, mac: '02:00:00:00:02:{octet:02x}'}}"
        );
    }
    s
}

fn ack(sport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 51, 100, 9], [203, 0, 113, 10], 64)
        .tcp(sport, 80, 1000, 65535)
        .ack(1)
        .write(&mut v, &[])
        .unwrap();
    v
}

/// `nlbctl WHAT --json` against nlbd's admin socket; `None` while nlbd is not answering yet.
fn admin(socket: &Path, what: &str) -> Option<serde_json::Value> {
    let o = Command::new(nlb_system_tests::bin("nlbctl"))
        .args([what, "--socket", socket.to_str()?, "--json"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| serde_json::from_slice(&o.stdout).ok())
        .flatten()
}

/// Polls `f` until it returns `Some`, or fails naming `what` with the `logs`.
fn wait_for<T>(what: &str, logs: &[&Path], f: impl FnMut() -> Option<T>) -> T {
    harness::poll(what, Duration::from_millis(20), f, || {
        logs.iter()
            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

#[test]
fn established_connections_keep_their_backend_through_nlb_sim_while_nlbd_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| -> PathBuf { dir.path().join(n) };
    let mut pcap = FrameWriter::new(std::fs::File::create(at("in.pcap")).unwrap()).unwrap();
    for i in 0..FLOWS {
        pcap.write(Duration::ZERO, &ack(30000 + i)).unwrap();
    }
    pcap.into_inner().flush().unwrap();
    std::fs::write(at("lb.yaml"), config(&[])).unwrap();

    let sim_log = at("nlb-sim.log");
    let _sim = Proc(
        Command::new(nlb_system_tests::bin("nlb-sim"))
            .arg("--socket")
            .arg(at("nic.sock"))
            .arg("--pcap")
            .arg(at("in.pcap"))
            .args(["--loops", &PASSES.to_string(), "--rate", &RATE.to_string()])
            .arg("--out")
            .arg(at("out.pcap"))
            .arg("--wait-enable")
            .stderr(std::fs::File::create(&sim_log).unwrap())
            .spawn()
            .expect("nlb-sim starts"),
    );
    wait_for("nlb-sim's socket", &[&sim_log], || {
        UnixStream::connect(at("nic.sock")).ok()
    });
    let nlbd_log = at("nlbd.log");
    let admin_sock = at("admin.sock");
    let _nlbd = Proc(
        Command::new(nlb_system_tests::bin("nlbd"))
            .arg("--config")
            .arg(at("lb.yaml"))
            .arg("--device")
            .arg(format!("sim:{}", at("nic.sock").display()))
            .arg("--admin-socket")
            .arg(&admin_sock)
            .args(["--metrics-addr", "127.0.0.1:0", "--watch-ms", "30"])
            .env("NLBD_LOG", "info")
            .stderr(std::fs::File::create(&nlbd_log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .expect("nlbd starts"),
    );
    let logs = [sim_log.as_path(), nlbd_log.as_path()];

    // Every connection learned and installed before the first reload: from here on each one's
    // backend is fixed.
    wait_for("every connection installed", &logs, || {
        let total = admin(&admin_sock, "conntrack")?["total"].as_u64()?;
        (total == u64::from(FLOWS)).then_some(())
    });
    for round in 1..=RELOADS {
        let churn: Vec<String> = match round % 3 {
            0 => vec![format!("a-{round}")],
            1 => vec![format!("a-{round}"), format!("web-2x{round}")],
            _ => vec![],
        };
        std::fs::write(at("lb.yaml"), config(&churn)).unwrap();
        wait_for(&format!("reload {round}"), &logs, || {
            let s = admin(&admin_sock, "status")?;
            (s["reloads"].as_u64()? == round).then_some(())
        });
        let sim = std::fs::read_to_string(&sim_log).unwrap_or_default();
        assert!(
            !sim.contains("pcap done"),
            "the traffic ended before reload {round}: raise PASSES\n{sim}"
        );
    }
    wait_for("the end of the traffic", &logs, || {
        std::fs::read_to_string(&sim_log)
            .ok()
            .filter(|s| s.contains("pcap done"))
    });

    let frames = read_frames(std::fs::File::open(at("out.pcap")).unwrap()).unwrap();
    let mut owner: HashMap<u16, [u8; 6]> = HashMap::new();
    let (mut checked, mut wrong) = (0u64, Vec::new());
    for f in &frames {
        let p = SlicedPacket::from_ethernet(&f.data).expect("nlb-sim wrote a valid frame");
        let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
            panic!("not Ethernet");
        };
        let Some(etherparse::TransportSlice::Tcp(tcp)) = p.transport else {
            continue;
        };
        let first = *owner.entry(tcp.source_port()).or_insert(eth.destination());
        checked += 1;
        if first != eth.destination() {
            wrong.push((tcp.source_port(), eth.destination()));
        }
    }
    assert_eq!(owner.len(), usize::from(FLOWS));
    assert!(
        checked >= u64::from(FLOWS) * PASSES * 9 / 10,
        "only {checked} frames forwarded"
    );
    assert!(
        wrong.is_empty(),
        "{} of {checked} frames of established connections reached another backend; first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
}
