//! One test per validation error: each asserts the line and the field path the message
//! names, counted by hand in the YAML text of the test.

use flowtable_compiler::Diagnostics;
use nlb_config::parse_config;

fn errors(yaml: &str) -> Diagnostics {
    let (_, d) = parse_config("t.yaml", yaml);
    d
}

/// Asserts that some diagnostic sits on `line`, names `path`, and says `words`.
#[track_caller]
fn expect(d: &Diagnostics, line: u32, path: &str, words: &str) {
    let text = d.to_string();
    let found = d.iter().any(|x| {
        let s = x.to_string();
        x.pos.line == line
            && s.starts_with(&format!("t.yaml:{line}:"))
            && x.path == path
            && s.contains(words)
    });
    assert!(found, "expected line {line}, {path}: {words}\ngot:\n{text}");
}

const GOOD: &str = "\
instances:
  - name: web-1
    ip: 192.0.2.11
    mac: 02:00:00:00:00:11
  - name: web-2
    ip: 192.0.2.12
    mac: 02:00:00:00:00:12
targetPools:
  - name: web
    instances: [web-1, web-2]
forwardingRules:
  - name: http
    IPAddress: 203.0.113.10
    portRange: \"80\"
    target: web
";

#[test]
fn good_config_has_no_errors() {
    let d = errors(GOOD);
    assert!(d.is_empty(), "{d}");
}

#[test]
fn unknown_field_with_did_you_mean() {
    let d = errors(&GOOD.replace("    portRange: \"80\"", "    portrange: \"80\""));
    expect(
        &d,
        14,
        "forwardingRules[0].portrange",
        "did you mean `portRange`",
    );
    assert!(d.to_string().contains("(valid: name,"), "{d}");
}

#[test]
fn unknown_top_level_field() {
    let d = errors(&format!("{GOOD}instance: []\n"));
    expect(&d, 16, "instance", "did you mean `instances`");
}

#[test]
fn not_supported_yet_fields() {
    // A rule names a target pool or a backend service, not both.
    let d = errors(&GOOD.replace("    target: web", "    target: web\n    backendService: bs"));
    expect(
        &d,
        16,
        "forwardingRules[0].backendService",
        "`target` and `backendService` exclude each other",
    );
    // The backend-service affinities are not the target pool's.
    let d = errors(&GOOD.replace(
        "    instances: [web-1, web-2]",
        "    instances: [web-1, web-2]\n    sessionAffinity: CLIENT_IP_PORT_PROTO",
    ));
    expect(
        &d,
        11,
        "targetPools[0].sessionAffinity",
        "not supported yet for target pools",
    );
    // Fields of backend services on a target pool name where they belong.
    let d = errors(&GOOD.replace(
        "    instances: [web-1, web-2]",
        "    instances: [web-1, web-2]\n    localityLbPolicy: MAGLEV",
    ));
    expect(
        &d,
        11,
        "targetPools[0].localityLbPolicy",
        "write them under `backendServices` or `regionBackendServices`",
    );
    // An empty list of backend services is no error.
    assert!(errors(&format!("{GOOD}backendServices: []\n")).is_empty());
}

#[test]
fn bad_enum_values_list_the_valid_ones() {
    let d = errors(&GOOD.replace("    target: web", "    target: web\n    IPProtocol: GRE"));
    expect(
        &d,
        16,
        "forwardingRules[0].IPProtocol",
        "`GRE` is not a valid value",
    );
    assert!(
        d.to_string().contains("(valid: TCP, UDP, L3_DEFAULT)"),
        "{d}"
    );
    // Other protocols are L3_DEFAULT's.
    let d = errors(&GOOD.replace("    target: web", "    target: web\n    IPProtocol: ICMP"));
    expect(
        &d,
        16,
        "forwardingRules[0].IPProtocol",
        "an `L3_DEFAULT` rule of a backend service takes every protocol",
    );
    let d = errors(&GOOD.replace(
        "    instances: [web-1, web-2]",
        "    instances: [web-1, web-2]\n    delivery: VXLAN",
    ));
    expect(
        &d,
        11,
        "targetPools[0].delivery",
        "(valid: L2_DSR, IPIP, GUE)",
    );
    let d = errors(&GOOD.replace(
        "    instances: [web-1, web-2]",
        "    instances: [web-1, web-2]\n    sessionAffinity: CLIENT_IPP",
    ));
    expect(
        &d,
        11,
        "targetPools[0].sessionAffinity",
        "did you mean `CLIENT_IP`",
    );
    let d = errors(&format!("nic:\n  defaultAction: REJECT\n{GOOD}"));
    expect(&d, 2, "nic.defaultAction", "(valid: PASS, DROP)");
}

#[test]
fn bad_ip_and_cidr() {
    let d = errors(&GOOD.replace("203.0.113.10", "203.0.113.300"));
    expect(&d, 13, "forwardingRules[0].IPAddress", "not an IP address");
    let d = errors(&GOOD.replace("ip: 192.0.2.12", "ip: web-2.example"));
    expect(&d, 6, "instances[1].ip", "not an IP address");
    let d = errors(&GOOD.replace(
        "    target: web",
        "    target: web\n    sourceRanges: [198.51.100.0/24, 198.51.100.0/33]",
    ));
    expect(
        &d,
        16,
        "forwardingRules[0].sourceRanges[1]",
        "prefix length",
    );
    let d = errors(&GOOD.replace(
        "    target: web",
        "    target: web\n    sourceRanges:\n      - 198.51.100.7/24",
    ));
    expect(
        &d,
        17,
        "forwardingRules[0].sourceRanges[0]",
        "did you mean `198.51.100.0/24`",
    );
}

#[test]
fn bad_port_ranges() {
    let d = errors(&GOOD.replace("\"80\"", "\"http\""));
    expect(&d, 14, "forwardingRules[0].portRange", "not a port number");
    let d = errors(&GOOD.replace("\"80\"", "\"0-80\""));
    expect(&d, 14, "forwardingRules[0].portRange", "outside 1..=65535");
    let d = errors(&GOOD.replace("\"80\"", "\"70000\""));
    expect(&d, 14, "forwardingRules[0].portRange", "outside 1..=65535");
    let d = errors(&GOOD.replace("\"80\"", "\"9000-8000\""));
    expect(&d, 14, "forwardingRules[0].portRange", "reversed");
}

#[test]
fn overlapping_rules_name_both() {
    let extra =
        "  - name: alt\n    IPAddress: 203.0.113.10\n    portRange: \"1-100\"\n    target: web\n";
    let d = errors(&format!("{GOOD}{extra}"));
    expect(
        &d,
        18,
        "forwardingRules[1].portRange",
        "rule `alt` overlaps 80 of rule `http`",
    );
    assert!(d.to_string().contains("line 12"), "{d}");
    // Another protocol on the same VIP does not overlap.
    let udp = "  - name: alt\n    IPAddress: 203.0.113.10\n    IPProtocol: UDP\n    target: web\n";
    assert!(errors(&format!("{GOOD}{udp}")).is_empty());
}

#[test]
fn duplicate_names() {
    let d = errors(&GOOD.replace("name: web-2", "name: web-1"));
    expect(&d, 5, "instances[1].name", "duplicate name `web-1`");
    let ti = "targetInstances:\n  - name: web\n    instance: web-1\n";
    let d = errors(&format!("{GOOD}{ti}"));
    expect(&d, 17, "targetInstances[0].name", "duplicate name `web`");
}

#[test]
fn dangling_references() {
    let d = errors(&GOOD.replace("    target: web", "    target: wbe"));
    expect(
        &d,
        15,
        "forwardingRules[0].target",
        "no target pool or target instance named `wbe`, did you mean `web`",
    );
    let d = errors(&GOOD.replace("[web-1, web-2]", "[web-1, web-3]"));
    expect(
        &d,
        10,
        "targetPools[0].instances[1]",
        "no instance named `web-3`",
    );
    let d = errors(&GOOD.replace("[web-1, web-2]", "[web-1, web-2]\n    healthChecks: [hc]"));
    expect(
        &d,
        11,
        "targetPools[0].healthChecks[0]",
        "no httpHealthCheck named `hc`",
    );
    let d = errors(&format!(
        "{GOOD}targetInstances:\n  - name: ti\n    instance: db-1\n"
    ));
    expect(
        &d,
        18,
        "targetInstances[0].instance",
        "no instance named `db-1`",
    );
    let d = errors(&GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    backupPool: spare\n    failoverRatio: 0.5",
    ));
    expect(
        &d,
        11,
        "targetPools[0].backupPool",
        "no target pool named `spare`",
    );
}

#[test]
fn failover_ratio_rules() {
    let backup = "  - name: spare\n    instances: [web-2]\n";
    let base = GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    backupPool: spare\n    failoverRatio: 1.5",
    );
    let d = errors(&base.replace("forwardingRules:", &format!("{backup}forwardingRules:")));
    expect(&d, 12, "targetPools[0].failoverRatio", "outside [0, 1]");
    let only_ratio = GOOD.replace("[web-1, web-2]", "[web-1, web-2]\n    failoverRatio: 0.5");
    expect(
        &errors(&only_ratio),
        11,
        "targetPools[0].failoverRatio",
        "needs `backupPool`",
    );
    let only_backup = GOOD.replace("[web-1, web-2]", "[web-1, web-2]\n    backupPool: spare");
    let d = errors(&only_backup.replace("forwardingRules:", &format!("{backup}forwardingRules:")));
    expect(&d, 11, "targetPools[0].backupPool", "needs `failoverRatio`");
    let own = GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    backupPool: web\n    failoverRatio: 0.1",
    );
    expect(
        &errors(&own),
        11,
        "targetPools[0].backupPool",
        "its own backup",
    );
}

#[test]
fn health_check_timing_and_count() {
    let hc = "httpHealthChecks:\n  - name: hc\n    checkIntervalSec: 5\n    timeoutSec: 10\n  - name: hc2\n";
    let pool = GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    healthChecks: [hc, hc2]",
    );
    let d = errors(&format!("{pool}{hc}"));
    expect(
        &d,
        20,
        "httpHealthChecks[0].timeoutSec",
        "longer than checkIntervalSec 5",
    );
    expect(&d, 11, "targetPools[0].healthChecks", "at most one");
}

#[test]
fn ipv6_vip_with_ipv4_encapsulation() {
    let cfg = GOOD
        .replace("203.0.113.10", "2001:db8::10")
        .replace("[web-1, web-2]", "[web-1, web-2]\n    delivery: IPIP");
    let d = errors(&format!("nic:\n  outerSourceIpv4: 192.0.2.0/28\n{cfg}"));
    expect(
        &d,
        16,
        "forwardingRules[0].IPAddress",
        "IPv6 VIP 2001:db8::10 cannot be delivered by IPIP",
    );
    // L2 delivery carries it.
    assert!(errors(&GOOD.replace("203.0.113.10", "2001:db8::10")).is_empty());
}

#[test]
fn delivery_needs_mac_and_outer_source() {
    let d = errors(&GOOD.replace("    mac: 02:00:00:00:00:12\n", ""));
    expect(
        &d,
        9,
        "targetPools[0].instances[1]",
        "no `mac`, which L2_DSR delivery needs",
    );
    let d = errors(&GOOD.replace("[web-1, web-2]", "[web-1, web-2]\n    delivery: GUE"));
    expect(
        &d,
        11,
        "targetPools[0].delivery",
        "`nic.outerSourceIpv4` is not set",
    );
}

#[test]
fn types_and_required_fields() {
    let d = errors(&GOOD.replace("    IPAddress: 203.0.113.10\n", ""));
    expect(
        &d,
        12,
        "forwardingRules[0].IPAddress",
        "`IPAddress` is required",
    );
    let d = errors(&GOOD.replace("[web-1, web-2]", "web-1"));
    expect(&d, 10, "targetPools[0].instances", "expected a list");
    let d = errors(&GOOD.replace("name: web-1", "name: Web_1"));
    expect(&d, 2, "instances[0].name", "invalid name `Web_1`");
    let d = errors(&GOOD.replace("mac: 02:00:00:00:00:11", "mac: 02:00:00:00:11"));
    expect(&d, 4, "instances[0].mac", "not a MAC address");
    let d = errors(&GOOD.replace("    ip: 192.0.2.11", "    ip: 192.0.2.11\n    weight: 5000"));
    expect(&d, 4, "instances[0].weight", "out of range");
}

#[test]
fn syntax_errors_have_positions() {
    let d = errors("forwardingRules:\n  - name: a\n   bad: [\n");
    assert_eq!(d.len(), 1);
    assert!(d.to_string().starts_with("t.yaml:"), "{d}");
    let (_, d) = parse_config(
        "t.json",
        "{\"forwardingRules\": [\n  {\"name\": \"a\",}\n]}",
    );
    assert_eq!(d.iter().next().map(|x| x.pos.line), Some(2), "{d}");
}

#[test]
fn json_config_has_positions_too() {
    let json =
        "{\n  \"instances\": [\n    {\"name\": \"web-1\", \"ip\": \"192.0.2.300\"}\n  ]\n}\n";
    let (_, d) = parse_config("t.json", json);
    let x = d.iter().next().expect("an error");
    assert_eq!((x.pos.line, x.path.as_str()), (3, "instances[0].ip"), "{d}");
}

#[test]
fn errors_are_all_reported_and_sorted() {
    let cfg = GOOD
        .replace("203.0.113.10", "203.0.113.999")
        .replace("ip: 192.0.2.11", "ip: nope")
        .replace("[web-1, web-2]", "[web-1, web-9]");
    let d = errors(&cfg);
    assert!(d.len() >= 3, "{d}");
    let lines: Vec<u32> = d.iter().map(|x| x.pos.line).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

// --- Pasted Google Cloud output: the errors it can meet. ---

/// GOOD with regions and zones (lines as in GOOD: nothing is added before line 8).
fn located(pool_region: &str, zone1: &str, zone2: &str) -> String {
    GOOD.replace(
        "    ip: 192.0.2.11",
        &format!("    ip: 192.0.2.11\n    zone: {zone1}"),
    )
    .replace(
        "    ip: 192.0.2.12",
        &format!("    ip: 192.0.2.12\n    zone: {zone2}"),
    )
    .replace(
        "    instances: [web-1, web-2]",
        &format!("    instances: [web-1, web-2]\n    region: {pool_region}"),
    )
}

#[test]
fn source_ip_ranges_is_refused_with_its_own_reason() {
    let d = errors(&GOOD.replace(
        "    target: web",
        "    target: web\n    sourceIpRanges: [198.51.100.0/24]",
    ));
    expect(
        &d,
        16,
        "forwardingRules[0].sourceIpRanges",
        "traffic-steering field of Google Cloud's forwarding rules",
    );
    assert!(!d.to_string().contains("did you mean"), "{d}");
}

#[test]
fn legacy_https_health_checks_are_refused_everywhere() {
    let why = "not offered for this load balancer";
    let d = errors(&format!("{GOOD}httpsHealthChecks: []\n"));
    expect(
        &d,
        16,
        "httpsHealthChecks",
        "not offered for this load balancer",
    );
    assert!(!d.to_string().contains("did you mean"), "{d}");
    let d = errors(&GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    healthChecks: [global/httpsHealthChecks/hc]",
    ));
    expect(&d, 11, "targetPools[0].healthChecks[0]", why);
    let d = errors(&GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    httpsHealthChecks: [hc]",
    ));
    expect(&d, 11, "targetPools[0].httpsHealthChecks", why);
    let d = errors(&format!(
        "{GOOD}---\nkind: compute#httpsHealthCheck\nname: hc\nport: 443\n"
    ));
    expect(&d, 17, "kind", why);
}

#[test]
fn request_path_with_a_query_string_is_refused() {
    let hc = "httpHealthChecks:\n  - name: hc\n    requestPath: /healthz?verbose=1\n";
    let d = errors(&format!("{GOOD}{hc}"));
    expect(
        &d,
        18,
        "httpHealthChecks[0].requestPath",
        "`/healthz?verbose=1` has a query string",
    );
    assert!(errors(&format!("{GOOD}{}", hc.replace("?verbose=1", ""))).is_empty());
}

#[test]
fn regions_of_one_load_balancer_must_agree() {
    assert!(errors(&located("us-central1", "us-central1-a", "us-central1-b")).is_empty());
    // A member in another region: both named.
    let d = errors(&located("us-central1", "us-central1-a", "europe-west1-b"));
    expect(
        &d,
        12,
        "targetPools[0].instances[1]",
        "instance `web-2` is in zone europe-west1-b (region europe-west1) (instances[1], line 6), but target pool `web` is in region us-central1",
    );
    // Without a pool region, the members disagree with each other.
    let no_region = located("us-central1", "us-central1-a", "europe-west1-b")
        .replace("    region: us-central1\n", "");
    let d = errors(&no_region);
    expect(
        &d,
        12,
        "targetPools[0].instances[1]",
        "but target pool `web` has instance `web-1` in zone us-central1-a",
    );
    // A rule in another region than its pool.
    let d = errors(
        &located("us-central1", "us-central1-a", "us-central1-b").replace(
            "    target: web",
            "    target: web\n    region: europe-west1",
        ),
    );
    expect(
        &d,
        18,
        "forwardingRules[0].target",
        "target pool `web` is in region us-central1 (targetPools[0], line 11), but forwarding rule `http` is in region europe-west1",
    );
    // A backup pool in another region.
    let backup = "  - name: spare\n    region: europe-west1\n    instances: [web-2]\n";
    let d = errors(
        &located("us-central1", "us-central1-a", "us-central1-b")
            .replace(
                "    region: us-central1\n",
                "    region: us-central1\n    backupPool: spare\n    failoverRatio: 0.5\n",
            )
            .replace("forwardingRules:", &format!("{backup}forwardingRules:")),
    );
    expect(
        &d,
        14,
        "targetPools[0].backupPool",
        "target pool `spare` is in region europe-west1",
    );
    // Zones without a `-x` suffix name no region: nothing to compare.
    assert!(errors(&located("r", "z", "z")).is_empty());
}

#[test]
fn target_instance_serves_an_instance_of_its_zone() {
    let ti = "targetInstances:\n  - name: ti\n    zone: us-central1-b\n    instance: web-1\n";
    let d = errors(&format!(
        "{}{ti}",
        located("us-central1", "us-central1-a", "us-central1-a")
    ));
    expect(
        &d,
        22,
        "targetInstances[0].instance",
        "instance `web-1` is in zone us-central1-a (region us-central1) (instances[0], line 2), but target instance `ti` is in zone us-central1-b",
    );
}

#[test]
fn references_must_name_the_right_kind_and_place() {
    // A target instance where a target pool is required.
    let d = errors(&GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    backupPool: zones/us-central1-a/targetInstances/ti\n    failoverRatio: 0.5",
    ));
    expect(
        &d,
        11,
        "targetPools[0].backupPool",
        "expected a reference to a target pool, found a target instance (`zones/us-central1-a/targetInstances/ti`)",
    );
    // A zone that contradicts the instance's.
    let d = errors(
        &located("us-central1", "us-central1-a", "us-central1-b").replace(
            "[web-1, web-2]",
            "[zones/us-central1-a/instances/web-1, zones/us-central1-c/instances/web-2]",
        ),
    );
    expect(
        &d,
        12,
        "targetPools[0].instances[1]",
        "the reference names zone us-central1-c, but instance `web-2` is in zone us-central1-b",
    );
    // A URL path of a target pool whose name is a target instance.
    let ti = "targetInstances:\n  - name: ti\n    instance: web-1\n";
    let d = errors(&format!(
        "{}{ti}",
        GOOD.replace(
            "    target: web",
            "    target: https://www.googleapis.com/compute/v1/projects/p/regions/r/targetPools/ti"
        )
    ));
    expect(
        &d,
        15,
        "forwardingRules[0].target",
        "no target pool (it is a target instance) named `ti`",
    );
    // Pools are regional: a zonal path is refused, as is another host.
    let d = errors(&GOOD.replace("    target: web", "    target: zones/z-a/targetPools/web"));
    expect(
        &d,
        15,
        "forwardingRules[0].target",
        "target pools are regional: `regions/REGION/targetPools/NAME`",
    );
    let d = errors(&GOOD.replace(
        "    target: web",
        "    target: https://example.com/compute/v1/projects/p/regions/r/targetPools/web",
    ));
    expect(
        &d,
        15,
        "forwardingRules[0].target",
        "is not a Compute Engine resource URL",
    );
    // A zone URL where a region is wanted.
    let d = errors(&GOOD.replace(
        "[web-1, web-2]",
        "[web-1, web-2]\n    region: https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
    ));
    expect(&d, 11, "targetPools[0].region", "is not a region");
}

#[test]
fn ports_on_rules() {
    let rule = |ports: &str| GOOD.replace("    portRange: \"80\"", &format!("    {ports}"));
    assert!(errors(&rule(
        "ports: [\"80\", \"443\", \"8080\", \"8443\", \"9000\"]"
    ))
    .is_empty());
    let d = errors(&rule(
        "ports: [\"80\", \"443\", \"8080\", \"8443\", \"9000\", \"9001\"]",
    ));
    expect(
        &d,
        14,
        "forwardingRules[0].ports",
        "6 ports given; a forwarding rule takes at most 5",
    );
    let d = errors(&rule("ports: [\"80\", \"443\", \"80\"]"));
    expect(
        &d,
        14,
        "forwardingRules[0].ports[2]",
        "port 80 is listed twice",
    );
    let d = errors(&rule("ports: []"));
    expect(&d, 14, "forwardingRules[0].ports", "`ports` is empty");
    let d = errors(&rule("ports: [\"8000-8080\"]"));
    expect(
        &d,
        14,
        "forwardingRules[0].ports[0]",
        "`ports` lists single ports",
    );
    let d = errors(&rule("portRange: \"80\"\n    ports: [\"443\"]"));
    expect(
        &d,
        15,
        "forwardingRules[0].ports",
        "`portRange` and `ports` exclude each other",
    );
    // Overlap with another rule's port.
    let extra = "  - name: alt\n    IPAddress: 203.0.113.10\n    ports: [\"443\", \"80\"]\n    target: web\n";
    let d = errors(&format!("{GOOD}{extra}"));
    expect(
        &d,
        18,
        "forwardingRules[1].ports",
        "80 of rule `alt` overlaps 80 of rule `http`",
    );
}

#[test]
fn ip_version_must_match_the_address() {
    let d = errors(&GOOD.replace("    target: web", "    target: web\n    ipVersion: IPV6"));
    expect(
        &d,
        16,
        "forwardingRules[0].ipVersion",
        "`ipVersion` IPV6 contradicts `IPAddress` 203.0.113.10",
    );
    let d = errors(&GOOD.replace("    target: web", "    target: web\n    networkTier: GOLD"));
    expect(
        &d,
        16,
        "forwardingRules[0].networkTier",
        "(valid: PREMIUM, STANDARD)",
    );
}

#[test]
fn documents_with_a_kind() {
    // Unknown kinds, Kubernetes manifests, backend services.
    let d = errors(&format!("{GOOD}---\nkind: compute#address\nname: a\n"));
    expect(
        &d,
        17,
        "kind",
        "`compute#address` is not a resource of a passthrough load balancer",
    );
    assert!(d.to_string().contains("compute#targetPool"), "{d}");
    let d = errors("apiVersion: v1\nkind: Service\nmetadata: {name: web}\n");
    expect(&d, 2, "kind", "Kubernetes manifests (SPEC R7) come later");
    let d = errors(&format!(
        "{GOOD}---\nkind: compute#httpsHealthCheck\nname: hc\n"
    ));
    expect(&d, 17, "kind", "legacy HTTPS health checks are not offered");
    // A resource in the wrong section of our form.
    let d = errors(&GOOD.replace(
        "  - name: web\n",
        "  - name: web\n    kind: compute#forwardingRule\n",
    ));
    expect(
        &d,
        10,
        "targetPools[0].kind",
        "`compute#forwardingRule` does not belong in `targetPools`",
    );
    // One page of a longer REST list.
    let d = errors(&format!(
        "{GOOD}---\nkind: compute#instanceList\nitems: []\nnextPageToken: CkQIABAAGAAg\n"
    ));
    expect(&d, 19, "nextPageToken", "one page of a longer list");
    // A list item without a kind.
    let d = errors("- name: web\n  instances: []\n");
    expect(&d, 1, "[0]", "a resource in a list needs its `kind`");
    // `nic` twice across documents.
    let d = errors(&format!(
        "nic: {{mac: 02:00:00:00:00:01}}\n---\n{GOOD}---\nnic: {{}}\n"
    ));
    expect(&d, 19, "nic", "`nic` given twice (also at line 1)");
}

#[test]
fn compute_engine_instances() {
    let vm = |nic: &str| {
        GOOD.replace(
            "  - name: web-2\n    ip: 192.0.2.12\n",
            &format!("  - kind: compute#instance\n    name: web-2\n    status: RUNNING\n{nic}"),
        )
    };
    // nic0's networkIP is read; our `mac` may stand beside it.
    assert!(errors(&vm(
        "    networkInterfaces:\n      - {name: nic0, networkIP: 192.0.2.12}\n"
    ))
    .is_empty());
    let d = errors(&vm(
        "    networkInterfaces:\n      - {name: nic0, ipv6Address: '2001:db8::1'}\n",
    ));
    expect(
        &d,
        9,
        "instances[1].networkInterfaces[0].networkIP",
        "nic0 has no `networkIP`",
    );
    let d = errors(&vm("    networkInterfaces: []\n"));
    expect(
        &d,
        8,
        "instances[1].networkInterfaces",
        "no network interface",
    );
    // Google Cloud instances have no MAC: L2_DSR still says what is missing.
    let no_mac = vm("    networkInterfaces:\n      - {networkIP: 192.0.2.12}\n")
        .replace("    mac: 02:00:00:00:00:12\n", "");
    let d = errors(&no_mac);
    expect(
        &d,
        12,
        "targetPools[0].instances[1]",
        "instance `web-2` has no `mac`, which L2_DSR delivery needs",
    );
    // A field that is neither read nor a known instance field is still an error.
    let d = errors(&vm(
        "    networkInterfaces:\n      - {networkIP: 192.0.2.12}\n    ipp: 192.0.2.12\n",
    ));
    expect(&d, 10, "instances[1].ipp", "unknown field `ipp`");
}

#[test]
fn target_instance_network_must_be_nic0s() {
    let text = "\
instances:
  - kind: compute#instance
    name: vm
    mac: 02:00:00:00:00:11
    networkInterfaces:
      - {networkIP: 192.0.2.11, network: global/networks/default}
      - {networkIP: 10.1.0.5, network: global/networks/backend}
targetInstances:
  - name: ti
    instance: vm
    network: https://www.googleapis.com/compute/v1/projects/p/global/networks/backend
forwardingRules:
  - {name: r, IPAddress: 203.0.113.10, target: ti}
";
    let d = errors(text);
    expect(
        &d,
        11,
        "targetInstances[0].network",
        "target instance `ti` forwards to network `backend`, but instance `vm`'s nic0 is on network `default`",
    );
    assert!(errors(&text.replace("networks/backend\n", "networks/default\n")).is_empty());
}
