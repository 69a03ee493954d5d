//! Configurations pasted from Google Cloud: `gcloud ... describe --format=yaml` output joined
//! into a YAML stream, `gcloud ... list --format=json` arrays, REST list responses. Each test
//! compares with a configuration written by hand in our own form (the expectation), through
//! the canonical text the config digest hashes (SPEC R10.4) and the compiled tables.

use flowtable_compiler::{compile, explain, CompileOptions, Config, Flow, Fragment, HealthState};
use nlb_config::parse_config;
use std::path::Path;

fn parse_ok(file: &str, text: &str) -> Config {
    let (c, d) = parse_config(file, text);
    assert!(d.is_empty(), "{d}");
    c
}

/// examples/gcloud.yaml written by hand: what the pasted resources mean.
const SHOP_BY_HAND: &str = "\
nic:
  mac: 02:00:00:00:00:01
  nextHopMac: 02:00:00:00:00:fe
  outerSourceIpv4: 192.0.2.0/28
forwardingRules:
  - {name: shop-http, IPAddress: 203.0.113.20, portRange: \"80\", target: shop-pool}
  - {name: shop-https, IPAddress: 203.0.113.20, portRange: \"443\", target: shop-pool}
targetPools:
  - {name: shop-pool, region: us-central1, instances: [shop-1, shop-2], healthChecks: [shop-check], delivery: IPIP}
instances:
  - {name: shop-1, ip: 10.128.0.11, zone: us-central1-a}
  - {name: shop-2, ip: 10.128.0.12, zone: us-central1-b}
httpHealthChecks:
  - {name: shop-check, port: 80, requestPath: /healthz}
";

fn example() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gcloud.yaml");
    std::fs::read_to_string(path).expect("examples/gcloud.yaml")
}

#[test]
fn the_gcloud_example_is_the_hand_written_configuration() {
    let pasted = parse_ok("examples/gcloud.yaml", &example());
    let by_hand = parse_ok("hand.yaml", SHOP_BY_HAND);
    assert_eq!(pasted.canonical_text(), by_hand.canonical_text());
    assert_eq!(pasted.digest(), by_hand.digest());
    // nic0's networkIP is the backend address; the zone comes from the zone URL.
    let ips: Vec<String> = pasted.instances.iter().map(|i| i.ip.to_string()).collect();
    assert_eq!(ips, ["10.128.0.11", "10.128.0.12"]);
    let opts = CompileOptions::default();
    let a = compile(&pasted, &HealthState::new(), &opts).unwrap();
    let b = compile(&by_hand, &HealthState::new(), &opts).unwrap();
    assert_eq!(a.tables, b.tables);
    assert_eq!(a.image(1).write().unwrap(), b.image(1).write().unwrap());
}

/// Splits a YAML stream into its documents (each with its leading `---`, if any).
fn documents(stream: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in stream.lines() {
        if line == "---" {
            docs.push(String::new());
        }
        let d = docs.last_mut().unwrap();
        d.push_str(line);
        d.push('\n');
    }
    docs
}

#[test]
fn document_order_and_reference_forms_do_not_change_the_digest() {
    let reference = parse_ok("examples/gcloud.yaml", &example());
    let mut docs = documents(&example());
    docs[0].insert_str(0, "---\n");
    docs.reverse();
    let reversed = docs.concat();
    let c = parse_ok("reversed.yaml", &reversed);
    assert_eq!(c.digest(), reference.digest());
    // Full URLs → partial paths → short names, and compute/v1 → compute/beta.
    let url = "https://www.googleapis.com/compute/v1/projects/shop-prod/";
    let partial = example().replace(url, "projects/shop-prod/");
    let short = example()
        .replace(&format!("{url}regions/us-central1/targetPools/"), "")
        .replace(&format!("{url}global/httpHealthChecks/"), "")
        .replace(&format!("{url}zones/us-central1-a/instances/"), "")
        .replace(&format!("{url}zones/us-central1-b/instances/"), "")
        .replace(&format!("{url}regions/"), "")
        .replace(&format!("{url}zones/"), "");
    let beta = example().replace("/compute/v1/", "/compute/beta/");
    for (what, text) in [("partial", partial), ("short", short), ("beta", beta)] {
        let c = parse_ok(&format!("{what}.yaml"), &text);
        assert_eq!(c.digest(), reference.digest(), "{what}");
    }
}

#[test]
fn output_only_and_informational_fields_are_accepted_and_ignored() {
    let plain = parse_ok("plain.yaml", SHOP_BY_HAND);
    let decorated = SHOP_BY_HAND
        .replace(
            "{name: shop-http,",
            "{kind: compute#forwardingRule, id: '1', creationTimestamp: '2024-01-01T00:00:00.000-08:00', selfLink: x, selfLinkWithId: y, fingerprint: abc=, labelFingerprint: def=, labels: {team: shop}, networkTier: STANDARD, ipVersion: IPV4, description: front door, name: shop-http,",
        )
        .replace(
            "{name: shop-pool,",
            "{kind: compute#targetPool, id: '2', creationTimestamp: t, selfLink: x, description: '', name: shop-pool,",
        )
        .replace(
            "{name: shop-1,",
            "{kind: compute#instance, networkInterfaces: [{networkIP: 10.128.0.11, name: nic0}], status: TERMINATED, machineType: zones/us-central1-a/machineTypes/e2-small, disks: [{boot: true}], labels: {a: b}, name: shop-1,",
        )
        .replace("ip: 10.128.0.11, ", "")
        .replace(
            "{name: shop-check,",
            "{kind: compute#httpHealthCheck, id: '3', selfLink: x, creationTimestamp: t, name: shop-check,",
        );
    let c = parse_ok("decorated.yaml", &decorated);
    assert_eq!(c.canonical_text(), plain.canonical_text());
}

#[test]
fn port_range_forms_of_the_source_product() {
    let base = |ports: &str| {
        SHOP_BY_HAND.replace(
            "{name: shop-http, IPAddress: 203.0.113.20, portRange: \"80\",",
            &format!("{{name: shop-http, IPAddress: 203.0.113.20, {ports}"),
        )
    };
    let digest = |ports: &str| parse_ok("p.yaml", &base(ports)).digest();
    // gcloud prints one port as `80-80`.
    assert_eq!(digest("portRange: 80-80,"), digest("portRange: \"80\","));
    // Every port: no field, `0-65535`, `allPorts: true`.
    let https_elsewhere = |t: String| {
        t.replace(
            "203.0.113.20, portRange: \"443\"",
            "203.0.113.21, portRange: \"443\"",
        )
    };
    let all = |ports: &str| parse_ok("p.yaml", &https_elsewhere(base(ports))).digest();
    assert_eq!(all("portRange: \"0-65535\","), all(""));
    assert_eq!(all("allPorts: true,"), all(""));
    assert_ne!(all("portRange: \"1-65535\","), all(""));
    // `ports`: adjacent ports make one range.
    assert_eq!(
        digest("ports: [\"8080\", \"80\", \"81\"],"),
        digest_of_two_ranges()
    );
}

/// The same as `ports: [80, 81, 8080]`, written as two rules' worth of ranges in canonical
/// form: checked through the canonical text, which lists a rule's ranges.
fn digest_of_two_ranges() -> [u8; 32] {
    let (c, d) = parse_config(
        "p.yaml",
        &SHOP_BY_HAND.replace(
            "{name: shop-http, IPAddress: 203.0.113.20, portRange: \"80\",",
            "{name: shop-http, IPAddress: 203.0.113.20, ports: [80, 81, 8080],",
        ),
    );
    assert!(d.is_empty(), "{d}");
    let text = c.canonical_text();
    assert!(
        text.contains("rule \"shop-http\" 203.0.113.20 TCP 80-81,8080-8080 -> \"shop-pool\""),
        "{text}"
    );
    c.digest()
}

#[test]
fn a_rule_with_ports_matches_exactly_those_ports() {
    let text = SHOP_BY_HAND.replace(
        "{name: shop-http, IPAddress: 203.0.113.20, portRange: \"80\",",
        "{name: shop-http, IPAddress: 203.0.113.20, ports: [\"80\", \"8080\", \"81\"],",
    );
    let c = parse_ok("p.yaml", &text);
    let compiled = compile(&c, &HealthState::new(), &CompileOptions::default()).unwrap();
    let flow = |port: u16| Flow {
        protocol: 6,
        src: "198.51.100.7".parse().unwrap(),
        src_port: 40000,
        dst: "203.0.113.20".parse().unwrap(),
        dst_port: port,
        fragment: Fragment::No,
    };
    let rule_of = |port: u16| {
        explain(
            &compiled.tables,
            &compiled.nic,
            &compiled.symbols,
            &flow(port),
        )
        .rule
    };
    for port in [80, 81, 8080] {
        assert_eq!(rule_of(port).as_deref(), Some("shop-http"), "port {port}");
    }
    assert_eq!(rule_of(443).as_deref(), Some("shop-https"));
    for port in [79, 82, 8079, 8081] {
        assert_eq!(rule_of(port), None, "port {port}");
    }
    // One VIP entry: slots 80-81, 443, 8080 (port order), two of them the rule's.
    let entry = compiled
        .tables
        .vip
        .iter()
        .find(|v| v.valid)
        .expect("a VIP entry");
    let slots: Vec<(u16, u16)> = entry
        .slot
        .iter()
        .filter(|s| s.valid)
        .map(|s| (s.port_lo, s.port_hi))
        .collect();
    assert_eq!(slots, [(80, 81), (443, 443), (8080, 8080)]);
    let e = explain(
        &compiled.tables,
        &compiled.nic,
        &compiled.symbols,
        &flow(8080),
    );
    assert!(
        e.steps[0].contains("port 8080 (the rule's ports 80-81, 8080)"),
        "{:?}",
        e.steps
    );
    // A later fragment carries no port: with several ranges on the VIP the host decides
    // (SPEC R4.3), as with several rules.
    let later = Flow {
        fragment: Fragment::Later,
        ..flow(8080)
    };
    let e = explain(&compiled.tables, &compiled.nic, &compiled.symbols, &later);
    assert_eq!(e.verdict, "punt", "{:?}", e.steps);
    assert!(
        e.steps[0].contains("has 3 port ranges of 2 rules for TCP"),
        "{:?}",
        e.steps
    );
}

/// The resources of SHOP_BY_HAND as REST/gcloud JSON, in pieces.
const RULE_HTTP: &str = r#"{"kind": "compute#forwardingRule", "name": "shop-http", "IPAddress": "203.0.113.20", "IPProtocol": "TCP", "portRange": "80-80", "region": "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1", "target": "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/targetPools/shop-pool"}"#;
const RULE_HTTPS: &str = r#"{"kind": "compute#forwardingRule", "name": "shop-https", "IPAddress": "203.0.113.20", "IPProtocol": "TCP", "portRange": "443-443", "target": "regions/us-central1/targetPools/shop-pool"}"#;
const POOL: &str = r#"{"kind": "compute#targetPool", "name": "shop-pool", "region": "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1", "instances": ["zones/us-central1-a/instances/shop-1", "projects/p/zones/us-central1-b/instances/shop-2"], "healthChecks": ["global/httpHealthChecks/shop-check"], "sessionAffinity": "NONE", "delivery": "IPIP"}"#;
const CHECK: &str = r#"{"kind": "compute#httpHealthCheck", "name": "shop-check", "port": 80, "requestPath": "/healthz", "checkIntervalSec": 5, "timeoutSec": 5, "healthyThreshold": 2, "unhealthyThreshold": 2}"#;
const VM1: &str = r#"{"kind": "compute#instance", "name": "shop-1", "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a", "status": "RUNNING", "networkInterfaces": [{"name": "nic0", "networkIP": "10.128.0.11", "network": "https://www.googleapis.com/compute/v1/projects/p/global/networks/default"}]}"#;
const VM2: &str = r#"{"kind": "compute#instance", "name": "shop-2", "zone": "zones/us-central1-b", "networkInterfaces": [{"networkIP": "10.128.0.12"}]}"#;
const NIC_JSON: &str = r#"{"nic": {"mac": "02:00:00:00:00:01", "nextHopMac": "02:00:00:00:00:fe", "outerSourceIpv4": "192.0.2.0/28"}}"#;

#[test]
fn json_arrays_and_rest_lists_are_configurations_too() {
    let want = parse_ok("hand.yaml", SHOP_BY_HAND).digest();
    // `gcloud ... list --format=json` arrays, one per kind, in a YAML stream with our nic
    // (JSON is YAML: each document may be JSON).
    let stream = format!(
        "{NIC_JSON}\n---\n[{RULE_HTTP},\n {RULE_HTTPS}]\n---\n[{POOL}]\n---\n[{CHECK}]\n---\n[{VM1}, {VM2}]\n"
    );
    assert_eq!(parse_ok("s.yaml", &stream).digest(), want);
    // One JSON array of every resource (no nic: compare without it).
    let array = format!("[{RULE_HTTP}, {RULE_HTTPS}, {POOL}, {CHECK}, {VM1}, {VM2}]");
    let no_nic = SHOP_BY_HAND.replacen(
        "nic:\n  mac: 02:00:00:00:00:01\n  nextHopMac: 02:00:00:00:00:fe\n  outerSourceIpv4: 192.0.2.0/28\n",
        "",
        1,
    );
    let (c, d) = parse_config("a.json", &array);
    let (h, _) = parse_config("h.yaml", &no_nic);
    // Without the nic section IPIP has no next hop: both fail alike, and hold the same objects.
    assert!(
        d.iter()
            .all(|x| x.message.contains("nextHopMac") || x.message.contains("outerSourceIpv4")),
        "{d}"
    );
    assert_eq!(c.canonical_text(), h.canonical_text());
    // REST list responses, plain and aggregated, with their output-only fields.
    let lists = format!(
        "{NIC_JSON}\n---\n{{\"kind\": \"compute#forwardingRuleList\", \"id\": \"projects/p/regions/us-central1/forwardingRules\", \"selfLink\": \"x\", \"items\": [{RULE_HTTP}, {RULE_HTTPS}]}}\n---\n\
         {{\"kind\": \"compute#targetPoolAggregatedList\", \"id\": \"projects/p/aggregated/targetPools\", \"items\": {{\"regions/us-central1\": {{\"targetPools\": [{POOL}]}}, \"regions/europe-west1\": {{\"warning\": {{\"code\": \"NO_RESULTS_ON_PAGE\"}}}}}}}}\n---\n\
         {{\"kind\": \"compute#httpHealthCheckList\", \"items\": [{CHECK}]}}\n---\n\
         {{\"kind\": \"compute#instanceList\", \"items\": [{VM1}, {VM2}], \"nextPageToken\": \"\"}}\n"
    );
    assert_eq!(parse_ok("l.yaml", &lists).digest(), want);
}

#[test]
fn errors_in_later_documents_have_file_positions() {
    let text = example().replace("portRange: 443-443", "portRange: 443-80");
    let (_, d) = parse_config("g.yaml", &text);
    let line = example()
        .lines()
        .position(|l| l == "portRange: 443-443")
        .unwrap() as u32
        + 1;
    let x = d.iter().next().expect("an error");
    assert_eq!(
        (x.pos.line, x.pos.column, x.path.as_str()),
        (line, 12, "forwardingRules[1].portRange"),
        "{d}"
    );
    assert!(x.message.contains("reversed"), "{d}");
}

#[test]
fn names_stay_unique_across_documents() {
    let text = example().replace("name: shop-https", "name: shop-http");
    let (_, d) = parse_config("g.yaml", &text);
    let first = example()
        .lines()
        .position(|l| l == "name: shop-http")
        .unwrap()
        + 1;
    let s = d.to_string();
    assert!(
        s.contains(&format!(
            "forwardingRules[1].name: duplicate name `shop-http`: already used by forwardingRules[0] (line {first})"
        )),
        "{s}"
    );
}
