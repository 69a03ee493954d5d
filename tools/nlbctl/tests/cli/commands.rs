//! nlbctl end to end: the real binary on the examples, exit codes, and the documentation's
//! error listing.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    crate::workspace()
}

fn nlbctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("nlbctl runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn compile_every_example() {
    let dir = tempfile::tempdir().unwrap();
    for ex in [
        "web.yaml",
        "web.json",
        "udp-dns.yaml",
        "failover.yaml",
        "target-instance.yaml",
        "ipv6.yaml",
        "gcloud.yaml",
        "ports.yaml",
        "backend-service.yaml",
        // Kubernetes manifests: a directory (docs/kubernetes.md).
        "kubernetes",
    ] {
        let out = dir.path().join(format!("{ex}.img"));
        let o = nlbctl(&[
            "compile",
            &format!("examples/{ex}"),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{ex}: {}", text(&o.stderr));
        let stdout = text(&o.stdout);
        assert!(
            stdout.contains("MAGLEV") && stdout.contains("BACKEND"),
            "{stdout}"
        );
        let img = flowtable_compiler::Image::read(&std::fs::read(&out).unwrap()).unwrap();
        assert!(img.tables.vip.iter().any(|v| v.valid), "{ex}");
    }
    // The YAML and JSON forms of the web example are the same configuration.
    let a = std::fs::read(dir.path().join("web.yaml.img")).unwrap();
    let b = std::fs::read(dir.path().join("web.json.img")).unwrap();
    let (ia, ib) = (
        flowtable_compiler::Image::read(&a).unwrap(),
        flowtable_compiler::Image::read(&b).unwrap(),
    );
    assert_eq!(ia.tables, ib.tables);
}

#[test]
fn broken_config_fails_with_positions_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.img");
    let o = nlbctl(&[
        "compile",
        "examples/broken.yaml",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
    let err = text(&o.stderr);
    assert!(
        err.contains("examples/broken.yaml:6:16: forwardingRules[0].IPAddress: `203.0.113.300` is not an IP address"),
        "{err}"
    );
    assert!(err.contains("problems found; no image written"), "{err}");
}

/// docs/config.md shows the errors of examples/broken.yaml as the tool prints them.
#[test]
fn documented_errors_match_the_tool() {
    let doc = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let start = doc
        .find("nlbctl compile examples/broken.yaml -o x.img` prints (exit status 1):\n\n```\n")
        .expect("the listing in docs/config.md");
    let block = &doc[start..];
    let block = &block[block.find("```\n").unwrap() + 4..];
    let block = &block[..block.find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let o = nlbctl(&[
        "compile",
        "examples/broken.yaml",
        "-o",
        dir.path().join("x.img").to_str().unwrap(),
    ]);
    assert_eq!(
        text(&o.stderr),
        block,
        "docs/config.md is stale: paste the output of `nlbctl compile examples/broken.yaml -o x.img`"
    );
}

#[test]
fn explain_json_names_a_member() {
    let o = nlbctl(&[
        "explain",
        "examples/web.yaml",
        "--src",
        "198.51.100.7:40000",
        "--dst",
        "203.0.113.10:443",
        "--proto",
        "tcp",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "forward");
    assert_eq!(v["rule"], "web-https");
    assert_eq!(v["pool"], "web-pool");
    assert_eq!(v["key"], "5tuple");
    assert!(["web-1", "web-2", "web-3"].contains(&v["backend"].as_str().unwrap()));
    // With web-1..3 all but one down, the survivor gets it.
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h.yaml");
    std::fs::write(&h, "web-1: {healthy: false}\nweb-3: {healthy: false}\n").unwrap();
    let o = nlbctl(&[
        "explain",
        "examples/web.yaml",
        "--src",
        "198.51.100.7:40000",
        "--dst",
        "203.0.113.10:80",
        "--proto",
        "tcp",
        "--health",
        h.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["backend"], "web-2");
    // No rule for UDP: passed to the host by default.
    let o = nlbctl(&[
        "explain",
        "examples/web.yaml",
        "--src",
        "198.51.100.7:4000",
        "--dst",
        "203.0.113.10:80",
        "--proto",
        "udp",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["verdict"].as_str(), v["reason"].as_str()),
        (Some("pass"), Some("NO_RULE"))
    );
}

#[test]
fn explain_later_fragment_on_a_shared_vip_is_punted() {
    let o = nlbctl(&[
        "explain",
        "examples/web.yaml",
        "--src",
        "198.51.100.7:0",
        "--dst",
        "203.0.113.10:0",
        "--proto",
        "tcp",
        "--fragment=later",
    ]);
    assert!(o.status.success());
    let s = text(&o.stdout);
    assert!(s.contains("verdict  punt (FRAGMENT_NEEDS_STATE)"), "{s}");
}

/// A TCP fragment of a target pool goes to the host (SPEC R4.1 over R4.2, docs/pipeline.md §6),
/// and docs/config.md shows what `explain` says about it, word for word.
#[test]
fn explain_tcp_fragment_of_a_tracking_pool_is_punted_as_documented() {
    let args = [
        "explain",
        "examples/ipv6.yaml",
        "--src",
        "[2001:db8:aaaa::7]:40000",
        "--dst",
        "[2001:db8:10::443]:443",
        "--proto",
        "tcp",
        "--fragment",
    ];
    let o = nlbctl(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.contains("verdict  punt (FRAGMENT_NEEDS_STATE)"), "{s}");
    assert!(s.contains("to its connection's backend"), "{s}");
    let doc = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let start = doc
        .find(&format!("`nlbctl {}`:\n\n```\n", args.join(" ")))
        .expect("the listing in docs/config.md");
    let block = &doc[start..];
    let block = &block[block.find("```\n").unwrap() + 4..];
    let block = &block[..block.find("```").unwrap()];
    assert_eq!(
        s,
        block,
        "docs/config.md is stale: paste the output of `nlbctl {}`",
        args.join(" ")
    );
    // A UDP fragment keeps the fragment key and is forwarded by the NIC.
    let o = nlbctl(&[
        "explain",
        "examples/udp-dns.yaml",
        "--src",
        "198.51.100.7:4000",
        "--dst",
        "203.0.113.53:53",
        "--proto",
        "udp",
        "--fragment",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["verdict"].as_str(), v["key"].as_str()),
        (Some("forward"), Some("3tuple"))
    );
}

#[test]
fn diff_shows_moved_and_minimum() {
    let o = nlbctl(&[
        "diff",
        "examples/web.yaml",
        "examples/web.yaml",
        "--new-health",
        "examples/health-down.yaml",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &v[0];
    assert_eq!(row["pool"], "web-pool");
    let (moved, min) = (
        row["moved"].as_f64().unwrap(),
        row["minimum"].as_f64().unwrap(),
    );
    // web-1 held a third of the slots: at least that moves, and little more.
    assert!((0.32..0.35).contains(&min), "{min}");
    assert!(moved >= min && moved - min < 0.02, "{moved} {min}");
}

#[test]
fn inspect_decodes_and_refuses_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("f.img");
    let o = nlbctl(&[
        "compile",
        "examples/failover.yaml",
        "-o",
        img.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let o = nlbctl(&["inspect", img.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["header"]["profile"], "sim");
    assert_eq!(v["pools"][1]["name"], "app-primary");
    assert_eq!(v["pools"][1]["backup"], "app-backup");
    assert_eq!(v["rules"][0]["source_ranges"][0], "192.0.2.0/25");
    let o = nlbctl(&["inspect", img.to_str().unwrap()]);
    assert!(text(&o.stdout).contains("app-primary"));

    let bad = dir.path().join("bad.img");
    std::fs::write(&bad, b"not an image").unwrap();
    let o = nlbctl(&["inspect", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("not a table image"));
}

#[test]
fn user_errors_exit_1() {
    let o = nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        "/nonexistent/dir/x.img",
        "--profile",
        "big",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("unknown profile `big` (valid: sim, u280, u55c)"));
    let o = nlbctl(&["compile", "examples/missing.yaml", "-o", "x.img"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("cannot read examples/missing.yaml"));
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h.yaml");
    std::fs::write(&h, "web-1: {healthy: false}\nweb-9: {healthy: true}\n").unwrap();
    let o = nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        dir.path().join("x.img").to_str().unwrap(),
        "--health",
        h.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(":2:1: web-9: no instance named `web-9`"),
        "{}",
        text(&o.stderr)
    );
    // Per-(pool, instance) entries (SPEC R5.5): a misspelt pool, a non-member, and a pool
    // that has no health check are refused with their line.
    std::fs::write(
        &h,
        "web-pool/web-1: {healthy: false}\nweb-pol/web-2: {healthy: false}\nweb-pool/web-9: {healthy: true}\n",
    )
    .unwrap();
    let o = nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        dir.path().join("x.img").to_str().unwrap(),
        "--health",
        h.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains(":2:1: web-pol/web-2: no target pool or backend service named `web-pol` in examples/web.yaml, did you mean `web-pool`?"),
        "{err}"
    );
    assert!(
        err.contains(":3:1: web-pool/web-9: `web-9` is not a member of pool `web-pool`"),
        "{err}"
    );
    assert!(!err.contains(":1:1:"), "{err}");
    // A good per-pool file compiles and takes web-1 out of web-pool.
    std::fs::write(&h, "web-pool/web-1: {healthy: false}\n").unwrap();
    let o = nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        dir.path().join("x.img").to_str().unwrap(),
        "--health",
        h.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("web-pool                       3       2"),
        "{}",
        text(&o.stdout)
    );
}

/// `compile --previous IMAGE` keeps the ids of the image it replaces: a new instance that
/// sorts first (`web-0`) does not move web-1..3, and one that left leaves its id free.
#[test]
fn compile_previous_keeps_backend_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let web = std::fs::read_to_string(root().join("examples/web.yaml")).unwrap();
    let next = web
        .replace(
            "instances: [web-1, web-2, web-3]",
            "instances: [web-0, web-1, web-3]",
        )
        .replace(
            "  - {name: web-2, ip: 192.0.2.12, zone: europe-west1-c, mac: \"02:00:00:00:00:12\"}",
            "  - {name: web-0, ip: 192.0.2.10, zone: europe-west1-c, mac: \"02:00:00:00:00:10\"}",
        );
    std::fs::write(path("next.yaml"), &next).unwrap();
    let ok = |args: &[&str]| {
        let o = nlbctl(args);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        o
    };
    ok(&["compile", "examples/web.yaml", "-o", &path("1.img")]);
    let o = ok(&[
        "compile",
        &path("next.yaml"),
        "-o",
        &path("2.img"),
        "--previous",
        &path("1.img"),
    ]);
    assert!(
        text(&o.stdout).contains("3 backends"),
        "{}",
        text(&o.stdout)
    );
    let o = ok(&["inspect", &path("2.img"), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<(u64, String)> = v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["id"].as_u64().unwrap(),
                b["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // web-2's id 1 is free (not reused in the same change); web-0 takes the next one.
    assert_eq!(
        ids,
        [
            (0, "web-1".into()),
            (2, "web-3".into()),
            (3, "web-0".into())
        ]
    );
    // Without --previous, ids follow names.
    ok(&["compile", &path("next.yaml"), "-o", &path("3.img")]);
    let o = ok(&["inspect", &path("3.img"), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["backends"][0]["name"], "web-0");
    // A --previous that is not an image is a user error naming it.
    let o = nlbctl(&[
        "compile",
        &path("next.yaml"),
        "-o",
        &path("4.img"),
        "--previous",
        "examples/web.yaml",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("examples/web.yaml"),
        "{}",
        text(&o.stderr)
    );
}

/// A backend-service configuration (SPEC R6): `compile` counts its services, and
/// `explain` follows an L3_DEFAULT rule's gap slot to the service and says why the policy
/// chose the group it did (the preferred group fills first, SPEC R6.6); docs/config.md shows
/// it word for word.
#[test]
fn backend_service_example_compiles_and_explains() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bs.img");
    let o = nlbctl(&[
        "compile",
        "examples/backend-service.yaml",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(
        s.contains("2 rules, 0 target pools, 0 target instances, 2 backend services, 6 backends"),
        "{s}"
    );
    // `edge` has 5 primary endpoints (4093 slots from 0, the smallest slice) and 1 failover
    // endpoint (4093 slots right after).
    let o = nlbctl(&["inspect", out.to_str().unwrap()]);
    let s = text(&o.stdout);
    assert!(
        s.contains("edge                     CLIENT_IP_PROTO L2_DSR, slots 0+4093, failover backends' slots 4093+4093, track true, idle 120 s"),
        "{s}"
    );
    let args = [
        "explain",
        "examples/backend-service.yaml",
        "--src",
        "198.51.100.7:40000",
        "--dst",
        "203.0.113.60:8080",
        "--proto",
        "tcp",
    ];
    let o = nlbctl(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.contains("rule     edge-all"), "{s}");
    assert!(s.contains("pool     edge"), "{s}");
    // The preferred group edge-east (us-east1) fills first; its one endpoint is edge-e1.
    assert!(s.contains("backend  edge-e1 192.0.2.81"), "{s}");
    assert!(
        s.contains("ports 444-65535 (the rule's ports 0-442, 444-65535)"),
        "{s}"
    );
    assert!(s.contains("its primary backends' slice serves"), "{s}");
    let doc = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let start = doc
        .find(&format!("`nlbctl {}`:\n\n```\n", args.join(" ")))
        .expect("the listing in docs/config.md");
    let block = &doc[start..];
    let block = &block[block.find("```\n").unwrap() + 4..];
    let block = &block[..block.find("```").unwrap()];
    assert_eq!(
        s,
        block,
        "docs/config.md is stale: paste the output of `nlbctl {}`",
        args.join(" ")
    );
    // Port 443 of the VIP is the TCP rule's, to the regional service.
    let o = nlbctl(&[
        "explain",
        "examples/backend-service.yaml",
        "--src",
        "198.51.100.7:40000",
        "--dst",
        "203.0.113.60:443",
        "--proto",
        "tcp",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["rule"].as_str(), v["pool"].as_str()),
        (Some("edge-tls"), Some("tls"))
    );
    // ICMP has no ports and no rule of its own: the L3_DEFAULT rule's protocol-0 entry.
    let o = nlbctl(&[
        "explain",
        "examples/backend-service.yaml",
        "--src",
        "198.51.100.7:0",
        "--dst",
        "203.0.113.60:0",
        "--proto",
        "icmp",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(
        s.contains("flow     icmp 198.51.100.7 -> 203.0.113.60"),
        "{s}"
    );
    assert!(
        s.contains("rule edge-all (id 0): 203.0.113.60 other protocols (L3_DEFAULT) all ports"),
        "{s}"
    );
    assert!(s.contains("verdict  forward (FORWARDED)"), "{s}");
}
