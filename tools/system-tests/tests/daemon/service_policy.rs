//! nlbd's service LB policy as an operator sees it (SPEC R6), no root: nlbd
//! against a simulated NIC served by the test process, connections opened by sending SYNs
//! through that NIC. `nlbctl status` (human and JSON) shows each group's live connections,
//! capacity, utilisation, share and tier; the metrics carry the same per group (checked by
//! `promtool check metrics` when Prometheus' tools are installed); `nlbctl explain --socket`
//! says which tier and zone a new connection goes to, with the live counts. Expected shares
//! are worked out by hand from R6's fill rule (a tier of capacity C gets C / N of new
//! connections, N the service's live connections).

use nlb_system_tests::harness;

use harness::{have, nlbctl, tcp, Nic, Nlbd};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The NIC in r1-a; `near` (r1-a: n1, n2) and `far` (r1-b: f1, f2), 5 connections per
/// instance: capacity 10 each. No health check: every endpoint counts as healthy.
const CONFIG: &str = "
nic: {region: r1, zone: r1-a}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}
serviceLbPolicies:
  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}
regionBackendServices:
  - name: web
    region: r1
    serviceLbPolicy: zonal
    backends:
      - {group: near, maxConnectionsPerInstance: 5}
      - {group: far, maxConnectionsPerInstance: 5}
instanceGroups:
  - {name: near, zone: r1-a, instances: [n1, n2]}
  - {name: far, zone: r1-b, instances: [f1, f2]}
instances:
  - {name: n1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:11'}
  - {name: n2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:12'}
  - {name: f1, ip: 192.0.2.3, zone: r1-b, mac: '02:00:00:00:00:13'}
  - {name: f2, ip: 192.0.2.4, zone: r1-b, mac: '02:00:00:00:00:14'}
";

fn group<'a>(svc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    svc["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == name))
        .unwrap_or_else(|| panic!("no group {name}: {svc}"))
}

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
    out.split_once("\r\n\r\n")
        .map_or(out.clone(), |(_, b)| b.to_string())
}

#[test]
fn nlbd_shows_and_explains_the_policy_over_live_connections() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = dir.join("lb.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let device = dir.join("nic.sock");
    let mut nic = Nic::start(&device);
    let nlbd = Nlbd::start(dir, &config, &device);
    let svc = nlbd.wait_for("the first policy refresh", || {
        let s = nlbd.admin("status")?;
        let svc = s["services"].as_array()?.first()?.clone();
        (svc["refreshed_at_secs"].as_f64()? > 0.0).then_some(svc)
    });
    assert_eq!(
        (
            svc["name"].as_str(),
            svc["algorithm"].as_str(),
            svc["nic"].as_str()
        ),
        (Some("web"), Some("WATERFALL_BY_ZONE"), Some("r1/r1-a"))
    );
    assert_eq!(group(&svc, "near")["share"], 1.0, "{svc}");

    // 15 connections: all to near (it takes everything until a refresh counts it full).
    for i in 0..15 {
        nic.forward(&tcp(
            [198, 51, 100, 7],
            10000 + i,
            [203, 0, 113, 10],
            80,
            true,
        ));
    }
    let svc = nlbd.wait_for("15 live connections counted", || {
        let s = nlbd.admin("status")?;
        let svc = s["services"].as_array()?.first()?.clone();
        (svc["live"].as_u64()? == 15).then_some(svc)
    });
    // near: 15 of 10 (150 %) and none of them closing: it gets no new connection (SPEC R6.1,
    // fill up to capacity, then spill), far (tier 1, empty) all of them.
    let near = group(&svc, "near");
    assert_eq!(
        (
            near["live"].as_u64(),
            near["capacity"].as_f64(),
            near["tier"].as_u64()
        ),
        (Some(15), Some(10.0), Some(0))
    );
    assert!((near["utilisation"].as_f64().unwrap() - 1.5).abs() < 1e-9);
    assert_eq!(near["share"].as_f64(), Some(0.0), "{svc}");
    assert!(
        near["why"]
            .as_str()
            .unwrap()
            .starts_with("at capacity (15 live of 10)"),
        "{svc}"
    );
    let far = group(&svc, "far");
    assert_eq!(
        (far["live"].as_u64(), far["tier"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(far["share"].as_f64(), Some(1.0), "{svc}");
    let status = nlbd.admin("status").unwrap();
    assert!(status["weight_changes"].as_u64().unwrap() >= 1, "{status}");
    assert_eq!(status["policy_refresh_ms"], 250.0);

    // The human table.
    let socket = nlbd.socket.to_str().unwrap().to_string();
    let o = nlbctl(&["status", "--socket", &socket]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("service web (WATERFALL_BY_ZONE, failover threshold 70 %); NIC in r1/r1-a; 15 live connections"),
        "{text}"
    );
    // Which rule decided the shares the tables serve.
    assert!(
        text.contains("decided by: serviceLbPolicy WATERFALL_BY_ZONE (SPEC R6.1)"),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("near"), "near r1-a 15/10 150 % 0.0% 0.0% 0 -");
    assert_eq!(row("far"), "far r1-b 0/10 0 % 100.0% 100.0% 1 -");

    // explain against nlbd: with the live counts, a flow's tier and zone.
    let o = nlbctl(&[
        "explain",
        "--socket",
        &socket,
        "--src",
        "198.51.100.9:40000",
        "--dst",
        "203.0.113.10:80",
        "--proto",
        "tcp",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &e["service"];
    assert!(
        s["live_counts"]
            .as_str()
            .unwrap()
            .starts_with("15 at nlbd's latest refresh"),
        "{e}"
    );
    let backend = e["backend"].as_str().unwrap();
    let (zone, tier) = if backend.starts_with('n') {
        ("r1-a", 0)
    } else {
        ("r1-b", 1)
    };
    assert_eq!(
        (s["zone"].as_str(), s["tier"].as_u64()),
        (Some(zone), Some(tier)),
        "{e}"
    );

    // Metrics: per group, and the refresh.
    let addr = status["metrics_addr"].as_str().unwrap().to_string();
    let m = http_get(&addr, "/metrics");
    for needle in [
        "nlbd_service_group_live_connections{service=\"web\",group=\"near\",zone=\"r1-a\"} 15",
        "nlbd_service_group_capacity_connections{service=\"web\",group=\"far\",zone=\"r1-b\"} 10",
        "nlbd_service_group_utilisation_ratio{service=\"web\",group=\"near\",zone=\"r1-a\"} 1.5",
        "nlbd_service_group_drained{service=\"web\",group=\"far\",zone=\"r1-b\"} 0",
        "nlbd_service_group_share_ratio{service=\"web\",group=\"far\",zone=\"r1-b\"} 1",
        "nlbd_service_policy_refresh_seconds_bucket{le=\"+Inf\"} ",
        "nlbd_service_policy_refresh_interval_seconds 0.25",
    ] {
        assert!(m.contains(needle), "metrics lack `{needle}`:\n{m}");
    }
    let changes = m
        .lines()
        .find_map(|l| l.strip_prefix("nlbd_service_weight_changes_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(changes.is_some_and(|c| c >= 1.0), "{m}");
    if have("promtool", "prometheus") {
        let mut p = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        p.stdin.take().unwrap().write_all(m.as_bytes()).unwrap();
        let o = p.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "promtool check metrics:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
