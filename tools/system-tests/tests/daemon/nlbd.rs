//! nlbd as a process against a simulated NIC that this test serves on a Unix socket (the
//! driver's socket server over an in-process `ModelDevice`, so the test pushes frames through
//! the very device nlbd manages and sees what it emits), with real HTTP backends on loopback
//! addresses for the health checks.
//!
//! Covered: start and load; health decisions reaching the tables (new flows avoid an unhealthy
//! backend, established ones keep theirs); learned connections installed; fragments of a
//! two-rule VIP sent after their first fragment, also when they come before it; a bad
//! configuration refused and a good one applied on file change; metrics and the admin socket
//! (`nlbctl health|conntrack`); SIGTERM leaves tables and connections in the NIC, and a
//! restarted nlbd carries on with them.

use etherparse::{IpNumber, Ipv4Header, PacketBuilder, SlicedPacket};
use nlb_hw::enums::Verdict;
use nlb_system_tests::harness::{self, nlbctl, Backend, Nic, Nlbd, CLIENT_MAC, NIC_MAC};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// nlbd on `config` and the NIC at `device`, its log `nlbd-N.log`, the configuration
/// watched every 200 ms.
fn start_nlbd(dir: &Path, config: &Path, device: &Path, n: u32) -> Nlbd {
    Nlbd::spawn(dir, &format!("nlbd-{n}.log"), |c| {
        c.arg("--config")
            .arg(config)
            .arg("--device")
            .arg(format!("sim:{}", device.display()))
            .args(["--metrics-addr", "127.0.0.1:0", "--watch-ms", "200"]);
    })
}

fn admin(dir: &Path, what: &str) -> serde_json::Value {
    let sock = dir.join("admin.sock");
    let o = nlbctl(&[what, "--socket", sock.to_str().unwrap(), "--json"]);
    assert!(
        o.status.success(),
        "nlbctl {what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON")
}

fn health_of(dir: &Path, backend: &str) -> String {
    health_in(dir, "web", backend)
}

/// The health of `backend` as a member of `pool` (a target pool or a backend service).
fn health_in(dir: &Path, pool: &str, backend: &str) -> String {
    let h = admin(dir, "health");
    h["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["backend"] == backend && t["pool"] == pool)
        .map(|t| t["health"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// The members of `pool` with slots in the loaded tables (`nlbctl status`).
fn eligible(dir: &Path, pool: &str) -> Option<Vec<String>> {
    let s = admin(dir, "status");
    let p = s["pools"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == pool)
        .cloned()?;
    p["eligible"]
        .as_array()?
        .iter()
        .map(|m| m.as_str().map(str::to_string))
        .collect()
}

fn tcp(client: [u8; 4], sport: u16, syn: bool) -> Vec<u8> {
    tcp_to([203, 0, 113, 80], client, sport, syn)
}

/// A TCP segment to port 80 of `vip`.
fn tcp_to(vip: [u8; 4], client: [u8; 4], sport: u16, syn: bool) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4(client, vip, 64)
        .tcp(sport, 80, 7, 64000);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut f = Vec::new();
    b.write(&mut f, &[]).unwrap();
    f
}

/// The fragments of one UDP datagram to the two-rule VIP (etherparse builds the datagram; the
/// IP header is rewritten per fragment).
fn udp_fragments(client: [u8; 4], sport: u16, dport: u16, id: u16) -> Vec<Vec<u8>> {
    let mut whole = Vec::new();
    PacketBuilder::ipv4(client, [203, 0, 113, 53], 64)
        .udp(sport, dport)
        .write(&mut whole, &[0x42; 2000])
        .unwrap();
    let (ip, payload) = Ipv4Header::from_slice(&whole).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < payload.len() {
        let end = (at + 800).min(payload.len());
        let mut h = ip.clone();
        h.identification = id;
        h.more_fragments = end < payload.len();
        h.fragment_offset = etherparse::IpFragOffset::try_new((at / 8) as u16).unwrap();
        h.protocol = IpNumber::UDP;
        h.set_payload_len(end - at).unwrap();
        h.header_checksum = h.calc_header_checksum();
        let mut frame = Vec::new();
        frame.extend_from_slice(&NIC_MAC);
        frame.extend_from_slice(&CLIENT_MAC);
        frame.extend_from_slice(&[0x08, 0x00]);
        h.write(&mut frame).unwrap();
        frame.extend_from_slice(&payload[at..end]);
        out.push(frame);
        at = end;
    }
    out
}

/// The instance a backend id is: b1..b3 have ids 0..2 (name order); d1..d3 3..5; s1, s2 6, 7.
fn backend_name(id: u16) -> String {
    ["b1", "b2", "b3", "d1", "d2", "d3", "s1", "s2"][usize::from(id)].to_string()
}

/// A health-check target like kube-proxy's health server, which always sends
/// `X-Load-Balancing-Endpoint-Weight` (here `weight`), which a target pool must ignore
/// (SPEC R5.6).
fn weighted_backend(ip: Ipv4Addr, port: u16, weight: u16) -> Backend {
    Backend::http(
        ip,
        port,
        harness::http_200(
            &format!("X-Load-Balancing-Endpoint-Weight: {weight}\r\n"),
            "ok",
        ),
    )
}

/// The health-check port of this run: derived from the process id, so two runs of this test
/// at once (a developer's and CI's) do not take each other's backend addresses.
fn hc_port() -> u16 {
    20000 + (std::process::id() % 20000) as u16
}

/// The configuration, with this run's health-check port.
fn config_text() -> String {
    CONFIG_TEMPLATE.replace("HC_PORT", &hc_port().to_string())
}

const CONFIG_TEMPLATE: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
  - {name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}
  - {name: game, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '7000-7100', target: game}
  - {name: svc, IPAddress: 203.0.113.90, IPProtocol: TCP, portRange: '80', backendService: regions/us-central1/backendServices/svc}
targetPools:
  - {name: web, region: r, instances: [b1, b2, b3], healthChecks: [hc]}
  - {name: dns, region: r, instances: [d1, d2]}
  - {name: game, region: r, instances: [d2, d3]}
regionBackendServices:
  - name: svc
    region: us-central1
    protocol: TCP
    healthChecks: [svc-check]
    backends: [{group: svc-group}]
instanceGroups:
  - {name: svc-group, zone: us-central1-a, instances: [s1, s2]}
healthChecks:
  - {name: svc-check, type: TCP, tcpHealthCheck: {port: HC_PORT, request: PING, response: PONG}, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 1}
instances:
  - {name: b1, ip: 127.0.77.1, zone: z, mac: '02:00:00:00:77:01'}
  - {name: b2, ip: 127.0.77.2, zone: z, mac: '02:00:00:00:77:02'}
  - {name: b3, ip: 127.0.77.3, zone: z, mac: '02:00:00:00:77:03'}
  - {name: d1, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:88:01'}
  - {name: d2, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:88:02'}
  - {name: d3, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:88:03'}
  - {name: s1, ip: 127.0.78.1, zone: us-central1-a, mac: '02:00:00:00:78:01'}
  - {name: s2, ip: 127.0.78.2, zone: us-central1-a, mac: '02:00:00:00:78:02'}
httpHealthChecks:
  - {name: hc, port: HC_PORT, requestPath: /healthz, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 1}
";

#[test]
fn nlbd_runs_the_slow_path_of_a_nic() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = dir.join("lb.yaml");
    std::fs::write(&config, config_text()).unwrap();
    let device = dir.join("nic.sock");
    let mut nic = Nic::start(&device);
    let mut backends: Vec<Backend> = (1..=3)
        // b1 reports weight 0: a weighted pool would give it no new connection.
        .map(|i| weighted_backend(Ipv4Addr::new(127, 0, 77, i), hc_port(), u16::from(i) - 1))
        .collect();

    // The backend service's members answer its TCP check (PING, PONG).
    let mut service_backends: Vec<Backend> = (1..=2)
        .map(|i| Backend::pong(Ipv4Addr::new(127, 0, 78, i), hc_port()))
        .collect();

    let mut nlbd = start_nlbd(dir, &config, &device, 1);
    for b in ["b1", "b2", "b3"] {
        nlbd.wait_for(&format!("{b} healthy"), || {
            (dir.join("admin.sock").exists() && health_of(dir, b) == "healthy").then_some(())
        });
    }
    let mode = std::fs::metadata(dir.join("admin.sock"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "admin socket mode");

    // New connections spread over the three; nlbd installs what the NIC learns.
    let mut first_backend = Vec::new();
    for i in 0..40u16 {
        let r = nic.receive(&tcp([198, 51, 100, 7], 10000 + i, true));
        assert_eq!(r.verdict, Verdict::Forward);
        first_backend.push(r.backend.unwrap());
    }
    // All three take new connections although b1 reports weight 0: target pools never weight
    // (SPEC R5.6), so the header is not even read.
    let spread: std::collections::BTreeSet<u16> = first_backend.iter().copied().collect();
    assert_eq!(
        spread.len(),
        3,
        "40 flows over 3 backends: {first_backend:?}"
    );
    let h = admin(dir, "health");
    for t in h["targets"].as_array().unwrap() {
        assert_eq!(t["weight"], "not_weighted", "{t}");
    }
    nlbd.wait_for("40 connections installed", || {
        (admin(dir, "conntrack")["total"] == 40).then_some(())
    });

    // The backend service: nlbd probes its members with the service's TCP health check, and a
    // member whose health server goes down loses its share (weight 0: no slots) in the loaded
    // tables. (Before backend-service members were probed, s2 stayed in the tables.)
    for b in ["s1", "s2"] {
        nlbd.wait_for(&format!("svc/{b} healthy"), || {
            (health_in(dir, "svc", b) == "healthy").then_some(())
        });
    }
    let h = admin(dir, "health");
    let s1 = h["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pool"] == "svc" && t["backend"] == "s1")
        .cloned()
        .unwrap();
    assert_eq!(s1["url"], format!("tcp://127.0.78.1:{}", hc_port()), "{s1}");
    assert_eq!(s1["host"], "", "a TCP probe sends no Host: {s1}");
    assert_eq!(eligible(dir, "svc").unwrap(), ["s1", "s2"]);
    let to_service = |nic: &mut Nic, sport: u16| {
        let r = nic.receive(&tcp_to([203, 0, 113, 90], [198, 51, 100, 11], sport, true));
        assert_eq!(r.verdict, Verdict::Forward);
        backend_name(r.backend.unwrap())
    };
    let spread: std::collections::BTreeSet<String> = (0..40u16)
        .map(|i| to_service(&mut nic, 40000 + i))
        .collect();
    assert_eq!(
        spread,
        ["s1", "s2"].map(String::from).into(),
        "40 flows over the service's two members"
    );
    service_backends[1].stop();
    nlbd.wait_for("svc/s2 unhealthy", || {
        (health_in(dir, "svc", "s2") == "unhealthy").then_some(())
    });
    nlbd.wait_for("s2 out of the service's slice", || {
        (eligible(dir, "svc")? == ["s1"]).then_some(())
    });
    for i in 0..40u16 {
        assert_eq!(
            to_service(&mut nic, 41000 + i),
            "s1",
            "new flow {i} to the service went to its unhealthy member"
        );
    }
    nlbd.wait_for("120 connections installed", || {
        (admin(dir, "conntrack")["total"] == 120).then_some(())
    });

    // b2 fails its checks: the tables change, new connections avoid it, established ones keep
    // their backend (TCP stays, SPEC R4.1).
    backends[1].stop();
    nlbd.wait_for("b2 unhealthy", || {
        (health_of(dir, "b2") == "unhealthy").then_some(())
    });
    nlbd.wait_for("b2 out of the tables", || {
        let s = admin(dir, "status");
        let web = s["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "web")
            .cloned()?;
        (web["eligible"].as_array()?.len() == 2).then_some(())
    });
    // `nlbctl health` shows health per (pool, instance) as the tables were compiled.
    let o = nlbctl(&[
        "health",
        "--socket",
        dir.join("admin.sock").to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let member = |b: &str| {
        h["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["pool"] == "web" && m["instance"] == b)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(member("b2")["healthy"], false, "{h}");
    assert_eq!(member("b1")["healthy"], true, "{h}");
    let service_member = |b: &str| {
        h["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["pool"] == "svc" && m["instance"] == b)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(service_member("s2")["healthy"], false, "{h}");
    assert_eq!(service_member("s1")["healthy"], true, "{h}");
    for i in 0..60u16 {
        let r = nic.receive(&tcp([198, 51, 100, 8], 20000 + i, true));
        assert_ne!(
            backend_name(r.backend.unwrap()),
            "b2",
            "new flow {i} went to b2"
        );
    }
    for (i, b) in first_backend.iter().enumerate() {
        let r = nic.receive(&tcp([198, 51, 100, 7], 10000 + i as u16, false));
        assert_eq!(r.backend, Some(*b), "established flow {i} moved");
    }

    // Fragments of a VIP with two UDP rules: the later ones come first and wait for theirs.
    let frags = udp_fragments([198, 51, 100, 9], 5353, 7042, 0x1234);
    assert_eq!(frags.len(), 3);
    for f in [&frags[2], &frags[1], &frags[0]] {
        assert_eq!(nic.receive(f).verdict, Verdict::Punt);
    }
    let sent = nlbd.wait_for("3 fragments injected", || {
        let mut dev = nic.device();
        let got = dev.take_injected();
        drop(dev);
        (!got.is_empty()).then_some(got)
    });
    let mut sent = sent;
    while sent.len() < 3 {
        std::thread::sleep(Duration::from_millis(20));
        sent.extend(nic.device().take_injected());
    }
    let macs: std::collections::BTreeSet<[u8; 6]> = sent
        .iter()
        .map(|s| {
            assert_eq!(s.result.verdict, Verdict::Forward);
            let p = SlicedPacket::from_ethernet(&s.frame).unwrap();
            match p.link {
                Some(etherparse::LinkSlice::Ethernet2(e)) => e.destination(),
                other => panic!("{other:?}"),
            }
        })
        .collect();
    assert_eq!(macs.len(), 1, "all fragments to one backend");
    let mac = *macs.iter().next().unwrap();
    assert!(
        mac == [2, 0, 0, 0, 0x88, 2] || mac == [2, 0, 0, 0, 0x88, 3],
        "a member of `game` (port 7042): {mac:02x?}"
    );
    // The first fragment (offset 0, with the UDP header) went out first.
    let first = SlicedPacket::from_ethernet(&sent[0].frame).unwrap();
    match &first.net {
        Some(etherparse::NetSlice::Ipv4(ip)) => {
            assert_eq!(ip.header().fragments_offset().value(), 0);
            assert!(ip.header().more_fragments());
        }
        other => panic!("{other:?}"),
    }

    // A configuration that does not compile is refused; the old one keeps serving.
    let generation = admin(dir, "status")["generation"].as_u64().unwrap();
    std::fs::write(
        &config,
        config_text().replace("portRange: '53'", "portRange: '53-40'"),
    )
    .unwrap();
    nlbd.wait_for("the refusal", || {
        nlbd.log().contains("configuration refused").then_some(())
    });
    assert_eq!(
        admin(dir, "status")["generation"].as_u64().unwrap(),
        generation
    );
    let line = nlbd
        .log()
        .lines()
        .find(|l| l.contains("configuration refused"))
        .unwrap()
        .to_string();
    assert!(
        line.contains("portRange") && line.contains("reversed"),
        "{line}"
    );
    // A good one serves (dns gets d3 as well).
    std::fs::write(
        &config,
        config_text().replace("instances: [d1, d2]}", "instances: [d1, d2, d3]}"),
    )
    .unwrap();
    nlbd.wait_for("the reload", || {
        (admin(dir, "status")["reloads"].as_u64()? == 1).then_some(())
    });
    assert!(admin(dir, "status")["generation"].as_u64().unwrap() > generation);

    // Metrics.
    let addr = admin(dir, "status")["metrics_addr"]
        .as_str()
        .unwrap()
        .to_string();
    let needles = [
        "nlbd_table_generation ",
        "nlbd_decision_to_active_seconds_count ",
        "nlbd_backend_health{pool=\"web\",backend=\"b2\",state=\"unhealthy\"} 1",
        "nlbd_conntrack_entries ",
        "nlbd_fragments_total{outcome=\"released\"} 2",
        "nlbd_punts_total{reason=\"FRAGMENT_NEEDS_STATE\"} 3",
        "nlb_rule_packets_total{rule=\"web\"} ",
        "nlb_backend_packets_total{backend=\"b1\"} ",
        "nlbd_probe_latency_seconds_bucket{le=\"+Inf\"} ",
        "nlbd_config_reloads_total{result=\"refused\"} 1",
    ];
    // The per-target series follow the reload's new health targets within a health batch.
    let last = std::cell::RefCell::new(String::new());
    harness::poll(
        "every metric",
        Duration::from_millis(100),
        || {
            let m = http_get(&addr, "/metrics");
            let complete = needles.iter().all(|n| m.contains(n));
            *last.borrow_mut() = m;
            complete.then_some(())
        },
        || {
            let m = last.borrow();
            let missing: Vec<_> = needles.iter().filter(|n| !m.contains(**n)).collect();
            format!("metrics lack {missing:?}:\n{m}")
        },
    );

    // SIGTERM: nlbd leaves, the NIC keeps its tables and connections.
    let connections = admin(dir, "conntrack")["total"].as_u64().unwrap();
    let generation = admin(dir, "status")["generation"].as_u64().unwrap();
    assert!(nlbd.terminate().success(), "exit status\n{}", nlbd.log());
    assert!(!dir.join("admin.sock").exists(), "admin socket removed");
    let r = nic.receive(&tcp([198, 51, 100, 7], 10000, false));
    assert_eq!(
        r.backend,
        Some(first_backend[0]),
        "the NIC still forwards by its connections"
    );
    assert_eq!(
        u64::from(nic.device().conntrack().valid_count()),
        connections
    );

    // A restarted nlbd recovers from the device: same connections, the next generation, and
    // b2 (still down) stays out of the tables while its checks decide again.
    let mut nlbd = start_nlbd(dir, &config, &device, 2);
    nlbd.wait_for("the restarted nlbd", || {
        let s = dir
            .join("admin.sock")
            .exists()
            .then(|| admin(dir, "status"))?;
        (s["generation"].as_u64()? > generation).then_some(())
    });
    assert_eq!(
        admin(dir, "conntrack")["total"].as_u64().unwrap(),
        connections
    );
    for i in 0..30u16 {
        let r = nic.receive(&tcp([198, 51, 100, 10], 30000 + i, true));
        assert_ne!(
            backend_name(r.backend.unwrap()),
            "b2",
            "new flow {i} went to b2 after the restart"
        );
    }
    backends[1] = weighted_backend(Ipv4Addr::new(127, 0, 77, 2), hc_port(), 1);
    nlbd.wait_for("b2 healthy again", || {
        (health_of(dir, "b2") == "healthy").then_some(())
    });
    assert!(nlbd.terminate().success());
    drop(backends);
    drop(service_backends);
}

/// A plain HTTP/1.1 GET (the test's own client).
fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}
