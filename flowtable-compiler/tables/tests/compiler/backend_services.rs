//! Backend services, their groups, health checks and service LB policies (SPEC R1, R2, R6):
//! one test per kind of mistake, each asserting the file, the line (the line of the test's
//! text marked `#!`, where the mistake is written), the field path, the words of the message
//! and what would be valid. Values and defaults come from Google Cloud's public API (compute
//! v1 BackendService, HealthCheck; networkservices ServiceLbPolicy) and its advanced
//! load-balancing documentation.

use flowtable_compiler::Diagnostics;
use nlb_config::parse_config;

const BASE: &str = "\
nic:
  mac: 02:00:00:00:00:01
  region: us-central1
  zone: us-central1-a
forwardingRules:
  - name: all
    IPAddress: 203.0.113.60
    IPProtocol: L3_DEFAULT
    allPorts: true
    backendService: edge
  - name: tls
    IPAddress: 203.0.113.60
    IPProtocol: TCP
    portRange: \"443\"
    backendService: tls
backendServices:
  - name: edge
    protocol: UNSPECIFIED
    healthChecks: [edge-check]
    failoverPolicy:
      failoverRatio: 0.5
    serviceLbPolicy: edge-policy
    backends:
      - group: edge-a
        maxConnectionsPerInstance: 100
      - group: edge-b
        maxConnectionsPerEndpoint: 100
      - group: edge-standby
        maxConnections: 100
        failover: true
regionBackendServices:
  - name: tls
    region: us-central1
    protocol: TCP
    healthChecks: [tls-check]
    backends:
      - group: edge-a
serviceLbPolicies:
  - name: edge-policy
    loadBalancingAlgorithm: WATERFALL_BY_ZONE
instanceGroups:
  - name: edge-a
    zone: us-central1-a
    instances: [a1, a2]
  - name: edge-standby
    zone: us-east1-b
    instances: [s1]
networkEndpointGroups:
  - name: edge-b
    zone: us-central1-b
    networkEndpointType: GCE_VM_IP
    networkEndpoints:
      - instance: b1
healthChecks:
  - name: edge-check
    type: TCP
    tcpHealthCheck: {port: 8080}
  - name: tls-check
    type: HTTP
    httpHealthCheck: {port: 8080, requestPath: /healthz}
instances:
  - {name: a1, ip: 192.0.2.61, zone: us-central1-a, mac: \"02:00:00:00:06:01\"}
  - {name: a2, ip: 192.0.2.62, zone: us-central1-a, mac: \"02:00:00:00:06:02\"}
  - {name: b1, ip: 192.0.2.71, zone: us-central1-b, mac: \"02:00:00:00:07:01\"}
  - {name: s1, ip: 192.0.2.91, zone: us-east1-b, mac: \"02:00:00:00:09:01\"}
";

fn errors(text: &str) -> Diagnostics {
    parse_config("bs.yaml", text).1
}

/// `BASE` with `old` (once in it) replaced by `new`.
fn with(old: &str, new: &str) -> String {
    assert_eq!(
        BASE.matches(old).count(),
        1,
        "`{old}` must occur once in BASE"
    );
    BASE.replacen(old, new, 1)
}

/// Asserts that `text` has a diagnostic in bs.yaml on the line marked `#!`, at `path`, whose
/// message says `words` and whose valid values say `valid`.
#[track_caller]
fn expect_in(text: &str, path: &str, words: &str, valid: Option<&str>) {
    let line = text
        .lines()
        .position(|l| l.contains("#!"))
        .expect("a line marked #!") as u32
        + 1;
    let d = errors(text);
    let found = d.iter().any(|x| {
        x.file == "bs.yaml"
            && x.pos.line == line
            && x.path == path
            && x.message.contains(words)
            && match valid {
                Some(v) => x.valid.as_deref().is_some_and(|have| have.contains(v)),
                None => true,
            }
    });
    assert!(
        found,
        "expected bs.yaml:{line}: {path}: …{words}… (valid: {valid:?})\ngot:\n{d}"
    );
}

#[track_caller]
fn expect(old: &str, new: &str, path: &str, words: &str, valid: Option<&str>) {
    expect_in(&with(old, new), path, words, valid);
}

#[test]
fn the_base_configuration_is_valid() {
    let d = errors(BASE);
    assert!(d.is_empty(), "{d}");
}

#[test]
fn backend_service_fields() {
    expect(
        "  - name: edge\n",
        "  - name: edge\n    region: us-central1 #!\n",
        "backendServices[0].region",
        "a global backend service has no `region`",
        Some("write the service under `regionBackendServices`"),
    );
    // The marker: `region` is required where the service starts.
    let text = with(
        "  - name: tls\n    region: us-central1\n",
        "  - name: tls #!\n",
    );
    expect_in(
        &text,
        "regionBackendServices[0].region",
        "`region` is required",
        Some("`backendServices` (global)"),
    );
    expect(
        "    protocol: TCP\n    healthChecks: [tls-check]",
        "    protocol: HTTP #!\n    healthChecks: [tls-check]",
        "regionBackendServices[0].protocol",
        "is for proxy load balancers",
        Some("TCP, UDP, UNSPECIFIED"),
    );
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    loadBalancingScheme: INTERNAL_MANAGED #!\n",
        "backendServices[0].loadBalancingScheme",
        "this is the external passthrough load balancer",
        Some("EXTERNAL"),
    );
    expect(
        "    healthChecks: [edge-check]",
        "    healthChecks: [global/httpHealthChecks/edge-check] #!",
        "backendServices[0].healthChecks[0]",
        "is a legacy HTTP health check, which target pools take",
        None,
    );
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    sessionAffinity: GENERATED_COOKIE #!\n",
        "backendServices[0].sessionAffinity",
        "a passthrough load balancer sees no HTTP",
        Some("NONE, CLIENT_IP, CLIENT_IP_PROTO, CLIENT_IP_PORT_PROTO, CLIENT_IP_NO_DESTINATION"),
    );
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    localityLbPolicy: ROUND_ROBIN #!\n",
        "backendServices[0].localityLbPolicy",
        "proxy load balancers",
        Some("MAGLEV, WEIGHTED_MAGLEV"),
    );
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    connectionDraining: {drainingTimeoutSec: 3601} #!\n",
        "backendServices[0].connectionDraining.drainingTimeoutSec",
        "3601 is out of range",
        Some("0..=3600"),
    );
    expect(
        "    serviceLbPolicy: edge-policy",
        "    serviceLbPolicy: projects/p/locations/global/backendServices/x #!",
        "backendServices[0].serviceLbPolicy",
        "names a `backendServices`, not a service LB policy",
        Some("projects/PROJECT/locations/global/serviceLbPolicies/NAME"),
    );
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    cdnPolicy: {} #!\n",
        "backendServices[0].cdnPolicy",
        "proxy load balancers",
        None,
    );
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    delivery: VXLAN #!\n",
        "backendServices[0].delivery",
        "`VXLAN` is not a valid value",
        Some("L2_DSR, IPIP, GUE"),
    );
}

#[test]
fn connection_tracking_and_failover_policy() {
    let tracking = |field: &str| {
        with(
            "    protocol: UNSPECIFIED\n",
            &format!(
                "    protocol: UNSPECIFIED\n    connectionTrackingPolicy:\n      {field} #!\n"
            ),
        )
    };
    let base = "backendServices[0].connectionTrackingPolicy";
    expect_in(
        &tracking("trackingMode: PER_FLOW"),
        &format!("{base}.trackingMode"),
        "`PER_FLOW` is not a valid value",
        Some("PER_CONNECTION, PER_SESSION"),
    );
    expect_in(
        &tracking("connectionPersistenceOnUnhealthyBackends: SOMETIMES"),
        &format!("{base}.connectionPersistenceOnUnhealthyBackends"),
        "not a valid value",
        Some("DEFAULT_FOR_PROTOCOL, NEVER_PERSIST, ALWAYS_PERSIST"),
    );
    expect_in(
        &tracking("idleTimeoutSec: 0"),
        &format!("{base}.idleTimeoutSec"),
        "0 is out of range",
        Some("1..=57600"),
    );
    expect_in(
        &tracking("idleTimeoutSec: 57601"),
        &format!("{base}.idleTimeoutSec"),
        "57601 is out of range",
        Some("1..=57600"),
    );
    expect_in(
        &tracking("enableStrongAffinity: true"),
        &format!("{base}.enableStrongAffinity"),
        "is not supported yet",
        None,
    );
    let ratio = |value: &str| {
        with(
            "      failoverRatio: 0.5\n",
            &format!("      failoverRatio: {value} #!\n"),
        )
    };
    let path = "backendServices[0].failoverPolicy.failoverRatio";
    expect_in(
        &ratio("1.5"),
        path,
        "`1.5` is outside [0, 1]",
        Some("a number from 0 to 1"),
    );
    expect_in(
        &ratio("-0.1"),
        path,
        "outside [0, 1]",
        Some("a number from 0 to 1"),
    );
    expect_in(
        &ratio("half"),
        path,
        "`half` is not a number",
        Some("a number from 0 to 1"),
    );
    expect(
        "      failoverRatio: 0.5\n",
        "      failoverRatio: 0.5\n      dropTrafficIfUnhealthy: yes #!\n",
        "backendServices[0].failoverPolicy.dropTrafficIfUnhealthy",
        "`yes` is not a boolean",
        Some("true or false"),
    );
    // disableConnectionDrainOnFailover: only for protocol TCP (compute v1).
    expect(
        "    failoverPolicy:\n      failoverRatio: 0.5\n",
        "    failoverPolicy:\n      failoverRatio: 0.5\n      disableConnectionDrainOnFailover: true #!\n",
        "backendServices[0].failoverPolicy.disableConnectionDrainOnFailover",
        "can be true only for protocol TCP",
        Some("false, or protocol TCP"),
    );
}

#[test]
fn backends_of_a_service() {
    let b = "backendServices[0].backends";
    expect(
        "      - group: edge-b\n        maxConnectionsPerEndpoint: 100\n",
        "      - maxConnectionsPerEndpoint: 100 #!\n",
        &format!("{b}[1].group"),
        "`group` is required",
        None,
    );
    expect(
        "        maxConnectionsPerInstance: 100\n",
        "        maxConnectionsPerInstance: 100\n        balancingMode: UTILIZATION #!\n",
        &format!("{b}[0].balancingMode"),
        "capacity here is counted in connections",
        Some("CONNECTION"),
    );
    expect(
        "        maxConnectionsPerInstance: 100\n",
        "        maxConnectionsPerInstance: 100\n        maxRate: 10 #!\n",
        &format!("{b}[0].maxRate"),
        "belongs to balancingMode RATE",
        None,
    );
    expect(
        "        maxConnectionsPerInstance: 100\n",
        "        maxConnectionsPerInstance: 100\n        maxConnections: 10 #!\n",
        &format!("{b}[0].maxConnections"),
        "exclude each other",
        Some("one of maxConnections (the group)"),
    );
    // capacityScaler: 0, or 0.1 to 1.0 (compute v1 Backend).
    let scaler = |v: &str| {
        with(
            "        maxConnectionsPerInstance: 100\n",
            &format!("        maxConnectionsPerInstance: 100\n        capacityScaler: {v} #!\n"),
        )
    };
    let path = format!("{b}[0].capacityScaler");
    expect_in(
        &scaler("0.05"),
        &path,
        "is between 0 and 0.1",
        Some("0 (drains the backend) or 0.1 to 1.0"),
    );
    expect_in(
        &scaler("1.01"),
        &path,
        "outside [0, 1]",
        Some("0 (drains the backend) or 0.1 to 1.0"),
    );
    for ok in ["0", "0.1", "1", "1.0", "0.55"] {
        let d = errors(&scaler(ok));
        assert!(d.is_empty(), "capacityScaler {ok}: {d}");
    }
    expect(
        "        maxConnectionsPerInstance: 100\n",
        "        maxConnectionsPerInstance: 100\n        preference: FIRST #!\n",
        &format!("{b}[0].preference"),
        "not a valid value",
        Some("DEFAULT, PREFERRED"),
    );
    // The capacity field must fit the group's kind.
    expect(
        "        maxConnectionsPerEndpoint: 100\n",
        "        maxConnectionsPerInstance: 100 #!\n",
        &format!("{b}[1].maxConnectionsPerInstance"),
        "does not fit network endpoint group `edge-b`",
        Some("`maxConnectionsPerEndpoint` or `maxConnections`"),
    );
    expect(
        "        maxConnectionsPerInstance: 100\n",
        "        maxConnectionsPerEndpoint: 100 #!\n",
        &format!("{b}[0].maxConnectionsPerEndpoint"),
        "does not fit instance group `edge-a`",
        Some("`maxConnectionsPerInstance` or `maxConnections`"),
    );
    // Capacity on every backend or on none.
    expect(
        "      - group: edge-b\n        maxConnectionsPerEndpoint: 100\n",
        "      - group: edge-b #!\n",
        &format!("{b}[1]"),
        "has no capacity, but 2 of this service's 3 backends have one",
        Some("on every backend, or on none"),
    );
    // Failover backends need primary ones.
    let text = BASE
        .replace(
            "        maxConnectionsPerInstance: 100\n",
            "        maxConnectionsPerInstance: 100\n        failover: true\n",
        )
        .replace(
            "        maxConnectionsPerEndpoint: 100\n",
            "        maxConnectionsPerEndpoint: 100\n        failover: true\n",
        )
        .replace(
            "      - group: edge-a\n        max",
            "      - group: edge-a #!\n        max",
        );
    expect_in(
        &text,
        "backendServices[0].backends",
        "every backend is a failover backend",
        Some("at least one backend without `failover: true`"),
    );
    // A group once per service; an instance in one group of a service.
    expect(
        "      - group: edge-standby\n",
        "      - group: edge-a #!\n",
        &format!("{b}[2].group"),
        "group `edge-a` is a backend of this service already (backendServices[0].backends[0])",
        Some("each group once per backend service"),
    );
    let text = BASE
        .replace("    instances: [s1]\n", "    instances: [s1, a1]\n")
        .replace(
            "      - group: edge-standby\n",
            "      - group: edge-standby #!\n",
        );
    expect_in(
        &text,
        &format!("{b}[2].group"),
        "instance `a1` is in group `edge-standby` and in group `edge-a` (backendServices[0].backends[0]) of this service",
        Some("groups of a service without common instances"),
    );
}

#[test]
fn references_of_a_service() {
    let b = "backendServices[0]";
    expect(
        "    healthChecks: [edge-check]",
        "    healthChecks: [edge-chek] #!",
        &format!("{b}.healthChecks[0]"),
        "no health check named `edge-chek`, did you mean `edge-check`?",
        Some("edge-check, tls-check"),
    );
    expect(
        "    healthChecks: [edge-check]",
        "    healthChecks: [edge-check, tls-check] #!",
        &format!("{b}.healthChecks"),
        "2 health checks given; a backend service of a passthrough load balancer takes one",
        Some("one health check"),
    );
    expect(
        "      - group: edge-standby\n",
        "      - group: edge-stanby #!\n",
        &format!("{b}.backends[2].group"),
        "no instance group or network endpoint group named `edge-stanby`, did you mean `edge-standby`?",
        Some("edge-a, edge-b, edge-standby"),
    );
    expect(
        "      - group: edge-b\n",
        "      - group: zones/us-central1-b/instanceGroups/edge-b #!\n",
        &format!("{b}.backends[1].group"),
        "no instance group (it is a network endpoint group) named `edge-b`",
        Some("edge-a, edge-standby"),
    );
    expect(
        "      - group: edge-standby\n",
        "      - group: zones/us-east1-b/networkEndpointGroups/edge-standby #!\n",
        &format!("{b}.backends[2].group"),
        "no network endpoint group (it is an instance group) named `edge-standby`",
        Some("edge-b"),
    );
    expect(
        "      - group: edge-standby\n",
        "      - group: regions/us-east1/instanceGroups/edge-standby #!\n",
        &format!("{b}.backends[2].group"),
        "regional instance groups are not supported",
        None,
    );
    expect(
        "    serviceLbPolicy: edge-policy",
        "    serviceLbPolicy: edge-polcy #!",
        &format!("{b}.serviceLbPolicy"),
        "no service LB policy named `edge-polcy`, did you mean `edge-policy`?",
        Some("edge-policy"),
    );
    // A bare name that both an instance group and a network endpoint group have.
    let both = with(
        "networkEndpointGroups:\n",
        "networkEndpointGroups:\n  - name: edge-a\n    zone: us-central1-a\n    networkEndpointType: GCE_VM_IP\n",
    )
    .replace("      - group: edge-a\n        maxConnectionsPerInstance", "      - group: edge-a #!\n        maxConnectionsPerInstance");
    expect_in(
        &both,
        &format!("{b}.backends[0].group"),
        "both an instance group and a network endpoint group are named `edge-a`: a path says which",
        Some("`zones/ZONE/instanceGroups/edge-a` or `zones/ZONE/networkEndpointGroups/edge-a`"),
    );
    // ... and both of them in one service.
    let text = both.replace("#!", "").replace(
        "      - group: edge-b\n",
        "      - group: zones/us-central1-a/instanceGroups/edge-a\n        maxConnectionsPerInstance: 100\n      - group: zones/us-central1-a/networkEndpointGroups/edge-a #!\n",
    );
    expect_in(
        &text,
        &format!("{b}.backends[2].group"),
        "this service has an instance group and a network endpoint group both named `edge-a`",
        Some("groups of different names within one backend service"),
    );
}

#[test]
fn instance_groups_and_network_endpoint_groups() {
    expect(
        "    instances: [a1, a2]\n",
        "    instances: [a1, a3] #!\n",
        "instanceGroups[0].instances[1]",
        "no instance named `a3`",
        Some("a1, a2, b1, s1"),
    );
    expect(
        "    instances: [a1, a2]\n",
        "    instances: [a1, a1] #!\n",
        "instanceGroups[0].instances[1]",
        "instance `a1` is listed twice (also at instanceGroups[0].instances[0])",
        None,
    );
    expect(
        "    instances: [s1]\n",
        "    instances: [s1, b1] #!\n",
        "instanceGroups[1].instances[1]",
        "instance `b1` is in zone us-central1-b (region us-central1)",
        Some("instances of the group's own zone"),
    );
    expect(
        "    instances: [s1]\n",
        "    instances: [zones/us-east1-c/instances/s1] #!\n",
        "instanceGroups[1].instances[0]",
        "the reference names zone us-east1-c, but instance `s1` is in zone us-east1-b",
        Some("the zone the object is in"),
    );
    expect(
        "    instances: [s1]\n",
        "    instances: [s1]\n    size: 2 #!\n",
        "instanceGroups[1].size",
        "Google Cloud says the group has 2 members (`size`), but 1 are listed in `instances`",
        Some("2 entries in `instances`"),
    );
    expect(
        "    instances: [s1]\n",
        "    instances:\n      - {status: RUNNING} #!\n",
        "instanceGroups[1].instances[0].instance",
        "`instance` is required",
        None,
    );
    // Network endpoint groups: GCE_VM_IP endpoints of instances.
    expect(
        "    networkEndpointType: GCE_VM_IP\n",
        "    networkEndpointType: GCE_VM_IP_PORT #!\n",
        "networkEndpointGroups[0].networkEndpointType",
        "passthrough load balancers do not take",
        Some("GCE_VM_IP"),
    );
    let text = with("    networkEndpointType: GCE_VM_IP\n", "")
        .replace("  - name: edge-b\n", "  - name: edge-b #!\n");
    expect_in(
        &text,
        "networkEndpointGroups[0].networkEndpointType",
        "`networkEndpointType` is required",
        Some("GCE_VM_IP"),
    );
    expect(
        "      - instance: b1\n",
        "      - instance: b1\n        port: 80 #!\n",
        "networkEndpointGroups[0].networkEndpoints[0].port",
        "is for GCE_VM_IP_PORT endpoints",
        None,
    );
    expect(
        "      - instance: b1\n",
        "      - ipAddress: 192.0.2.71 #!\n",
        "networkEndpointGroups[0].networkEndpoints[0].instance",
        "`instance` is required: a GCE_VM_IP endpoint is an instance",
        None,
    );
    expect(
        "      - instance: b1\n",
        "      - instance: b1\n        ipAddress: 192.0.2.72 #!\n",
        "networkEndpointGroups[0].networkEndpoints[0].ipAddress",
        "`ipAddress` 192.0.2.72 is not the address of instance `b1`",
        Some("192.0.2.71, or leave `ipAddress` out"),
    );
    expect(
        "      - instance: b1\n",
        "      - instance: b1\n      - instance: b1 #!\n",
        "networkEndpointGroups[0].networkEndpoints[1].instance",
        "instance `b1` is an endpoint twice",
        None,
    );
    expect(
        "      - instance: b1\n",
        "      - instance: b9 #!\n",
        "networkEndpointGroups[0].networkEndpoints[0].instance",
        "no instance named `b9`, did you mean `b1`?",
        Some("a1, a2, b1, s1"),
    );
    // The output of `list-network-endpoints` pastes as it is.
    let d = errors(&with(
        "      - instance: b1\n",
        "      - networkEndpoint: {instance: zones/us-central1-b/instances/b1, ipAddress: 192.0.2.71}\n        healths: []\n",
    ));
    assert!(d.is_empty(), "{d}");
}

#[test]
fn health_checks_of_the_newer_kind() {
    let hc = "healthChecks[0]";
    expect(
        "    type: TCP\n",
        "    type: SSL #!\n",
        &format!("{hc}.type"),
        "nlbd probes HTTP, HTTPS and TCP",
        Some("HTTP, HTTPS, TCP"),
    );
    expect(
        "    tcpHealthCheck: {port: 8080}\n",
        "    tcpHealthCheck: {port: 8080}\n    httpHealthCheck: {port: 80} #!\n",
        &format!("{hc}.httpHealthCheck"),
        "`httpHealthCheck` does not go with `type` TCP",
        Some("`tcpHealthCheck`"),
    );
    let tcp = |fields: &str| {
        with(
            "    tcpHealthCheck: {port: 8080}\n",
            &format!("    tcpHealthCheck:\n      port: 8080\n      {fields} #!\n"),
        )
    };
    let t = format!("{hc}.tcpHealthCheck");
    expect_in(
        &tcp("response: \"caf\u{e9}\""),
        &format!("{t}.response"),
        "`response` must be ASCII",
        Some("ASCII text of at most 1024 bytes"),
    );
    let long = "x".repeat(1025);
    expect_in(
        &tcp(&format!("request: {long}")),
        &format!("{t}.request"),
        "is 1025 bytes long",
        Some("ASCII text of at most 1024 bytes"),
    );
    expect_in(
        &tcp("portSpecification: USE_SERVING_PORT"),
        &format!("{t}.portSpecification"),
        "their health checks use a fixed `port`",
        Some("USE_FIXED_PORT"),
    );
    expect_in(
        &tcp("proxyHeader: PROXY_V1"),
        &format!("{t}.proxyHeader"),
        "nlbd's probes send no PROXY header",
        Some("NONE"),
    );
    expect_in(
        &tcp("requestPath: /"),
        &format!("{t}.requestPath"),
        "unknown field `requestPath`",
        Some("port, portSpecification, request, response, proxyHeader"),
    );
    expect(
        "    httpHealthCheck: {port: 8080, requestPath: /healthz}\n",
        "    httpHealthCheck: {port: 8080, requestPath: healthz} #!\n",
        "healthChecks[1].httpHealthCheck.requestPath",
        "`healthz` must start with `/`",
        Some("a path such as /healthz"),
    );
    expect(
        "    httpHealthCheck: {port: 8080, requestPath: /healthz}\n",
        "    httpHealthCheck: {port: 0, requestPath: /healthz} #!\n",
        "healthChecks[1].httpHealthCheck.port",
        "0 is out of range",
        Some("1..=65535"),
    );
    expect(
        "    tcpHealthCheck: {port: 8080}\n",
        "    tcpHealthCheck: {port: 8080}\n    checkIntervalSec: 301 #!\n",
        &format!("{hc}.checkIntervalSec"),
        "301 is out of range",
        Some("1..=300"),
    );
    expect(
        "    tcpHealthCheck: {port: 8080}\n",
        "    tcpHealthCheck: {port: 8080}\n    unhealthyThreshold: 11 #!\n",
        &format!("{hc}.unhealthyThreshold"),
        "11 is out of range",
        Some("1..=10"),
    );
    // The default interval is 5 s: a timeout of 6 s is longer.
    expect(
        "    tcpHealthCheck: {port: 8080}\n",
        "    tcpHealthCheck: {port: 8080}\n    timeoutSec: 6 #!\n",
        &format!("{hc}.timeoutSec"),
        "timeoutSec 6 is longer than checkIntervalSec 5",
        Some("1..=5"),
    );
    expect(
        "    tcpHealthCheck: {port: 8080}\n",
        "    tcpHealthCheck: {port: 8080}\n    sslHealthCheck: {} #!\n",
        &format!("{hc}.sslHealthCheck"),
        "is not supported yet",
        None,
    );
    let text = with("    type: TCP\n    tcpHealthCheck: {port: 8080}\n", "")
        .replace("  - name: edge-check\n", "  - name: edge-check #!\n");
    expect_in(
        &text,
        &format!("{hc}.type"),
        "`type` is required",
        Some("HTTP, HTTPS or TCP"),
    );
}

#[test]
fn service_lb_policies() {
    let p = "serviceLbPolicies[0]";
    expect(
        "    loadBalancingAlgorithm: WATERFALL_BY_ZONE\n",
        "    loadBalancingAlgorithm: ROUND_ROBIN #!\n",
        &format!("{p}.loadBalancingAlgorithm"),
        "`ROUND_ROBIN` is not a valid value",
        Some("SPRAY_TO_WORLD, SPRAY_TO_REGION, WATERFALL_BY_REGION, WATERFALL_BY_ZONE"),
    );
    for bad in ["0", "100"] {
        expect(
            "    loadBalancingAlgorithm: WATERFALL_BY_ZONE\n",
            &format!("    failoverConfig: {{failoverHealthThreshold: {bad}}} #!\n"),
            &format!("{p}.failoverConfig.failoverHealthThreshold"),
            &format!("{bad} is out of range"),
            Some("1..=99"),
        );
    }
    expect(
        "    loadBalancingAlgorithm: WATERFALL_BY_ZONE\n",
        "    isolationConfig: {isolationGranularity: REGION, isolationMode: FAR} #!\n",
        &format!("{p}.isolationConfig.isolationMode"),
        "`FAR` is not a valid value",
        Some("NEAREST, STRICT"),
    );
    expect(
        "    loadBalancingAlgorithm: WATERFALL_BY_ZONE\n",
        "    isolationConfig: {isolationGranularity: ZONE} #!\n",
        &format!("{p}.isolationConfig.isolationGranularity"),
        "`ZONE` is not a valid value",
        Some("REGION"),
    );
    expect(
        "    loadBalancingAlgorithm: WATERFALL_BY_ZONE\n",
        "    autoCapacityDrain: {enable: maybe} #!\n",
        &format!("{p}.autoCapacityDrain.enable"),
        "`maybe` is not a boolean",
        Some("true or false"),
    );
    expect(
        "  - name: edge-policy\n",
        "  - name: projects/p/locations/global/serviceLbPolicies/Edge #!\n",
        &format!("{p}.name"),
        "invalid name `Edge`",
        Some("lowercase letters, digits and '-'"),
    );
    // A policy's location fits its service: global for a global backend service.
    expect(
        "    serviceLbPolicy: edge-policy",
        "    serviceLbPolicy: projects/p/locations/us-central1/serviceLbPolicies/edge-policy #!",
        "backendServices[0].serviceLbPolicy",
        "service LB policy `edge-policy` is in location us-central1, but backend service `edge` is global",
        Some("a policy of location global"),
    );
    // Pasted as `gcloud network-services service-lb-policies describe` prints it.
    let text = format!(
        "{}---\nname: projects/p/locations/global/serviceLbPolicies/other\nloadBalancingAlgorithm: SPRAY_TO_REGION\ncreateTime: '2025-01-01T00:00:00Z'\n",
        BASE
    );
    assert!(errors(&text).is_empty(), "{}", errors(&text));
}

#[test]
fn forwarding_rules_of_backend_services() {
    expect(
        "    IPProtocol: L3_DEFAULT\n    allPorts: true\n",
        "    IPProtocol: L3_DEFAULT\n    portRange: \"80\" #!\n",
        "forwardingRules[0].portRange",
        "an `L3_DEFAULT` rule takes every port, so `portRange` cannot narrow it",
        Some("`allPorts: true`, or leave the ports out"),
    );
    expect(
        "    allPorts: true\n",
        "    allPorts: false #!\n",
        "forwardingRules[0].allPorts",
        "an `L3_DEFAULT` rule takes every port, so `allPorts` cannot narrow it",
        Some("`allPorts: true`"),
    );
    expect(
        "    allPorts: true\n",
        "    allPorts: always #!\n",
        "forwardingRules[0].allPorts",
        "`always` is not a boolean",
        Some("true or false"),
    );
    expect(
        "    backendService: edge\n",
        "    backendService: edge\n    target: edge #!\n",
        "forwardingRules[0].target",
        "`target` and `backendService` exclude each other",
        Some("a backend service in `backendService`"),
    );
    let text = with(
        "    allPorts: true\n    backendService: edge\n",
        "    allPorts: true\n",
    )
    .replace("  - name: all\n", "  - name: all #!\n");
    expect_in(
        &text,
        "forwardingRules[0].target",
        "`target` or `backendService` is required",
        None,
    );
    expect(
        "    backendService: edge\n",
        "    target: edge #!\n",
        "forwardingRules[0].target",
        "`edge` is a backend service: a forwarding rule names a backend service in `backendService`, not `target`",
        Some("`backendService: edge`"),
    );
    expect(
        "    backendService: edge\n",
        "    backendService: edg #!\n",
        "forwardingRules[0].backendService",
        "no backend service named `edg`, did you mean `edge`?",
        Some("edge, tls"),
    );
    expect(
        "    backendService: edge\n",
        "    target: regions/us-central1/backendServices/edge #!\n",
        "forwardingRules[0].target",
        "is a backend service: a forwarding rule names a backend service in `backendService`, not `target`",
        None,
    );
    // L3_DEFAULT only with a backend service of protocol UNSPECIFIED (compute v1
    // ForwardingRule); TCP and UDP with their own protocol or UNSPECIFIED.
    expect(
        "    IPProtocol: L3_DEFAULT\n    allPorts: true\n    backendService: edge\n",
        "    IPProtocol: L3_DEFAULT #!\n    allPorts: true\n    backendService: tls\n",
        "forwardingRules[0].IPProtocol",
        "an L3_DEFAULT rule cannot send packets to backend service `tls` of protocol TCP",
        Some("a backend service of protocol UNSPECIFIED"),
    );
    expect(
        "    IPProtocol: TCP\n",
        "    IPProtocol: UDP #!\n",
        "forwardingRules[1].IPProtocol",
        "an UDP rule cannot send packets to backend service `tls` of protocol TCP",
        Some("a backend service of protocol UDP or UNSPECIFIED, or IPProtocol TCP"),
    );
    // UNSPECIFIED takes TCP and UDP rules too.
    let d = errors(&with(
        "    backendService: tls\n",
        "    backendService: edge\n",
    ));
    assert!(d.is_empty(), "{d}");
    // L3_DEFAULT is for backend services only.
    let pool = "targetPools:\n  - {name: pool, instances: [a1]}\n";
    expect_in(
        &format!(
            "{}{pool}",
            with(
                "    IPProtocol: L3_DEFAULT\n    allPorts: true\n    backendService: edge\n",
                "    IPProtocol: L3_DEFAULT #!\n    target: pool\n"
            )
        ),
        "forwardingRules[0].IPProtocol",
        "`L3_DEFAULT` is for rules of backend services",
        Some("TCP or UDP, or `backendService`"),
    );
    expect_in(
        &format!(
            "{}{pool}",
            with("    backendService: tls\n", "    backendService: pool #!\n")
        ),
        "forwardingRules[1].backendService",
        "`pool` is a target pool: a forwarding rule names it in `target`, not `backendService`",
        Some("`target: pool`"),
    );
    // One L3_DEFAULT rule per VIP.
    expect(
        "  - name: tls\n    IPAddress: 203.0.113.60\n    IPProtocol: TCP\n    portRange: \"443\"\n",
        "  - name: tls\n    IPAddress: 203.0.113.60\n    IPProtocol: L3_DEFAULT #!\n",
        "forwardingRules[1].IPProtocol",
        "VIP 203.0.113.60 has an L3_DEFAULT rule already: `all` (forwardingRules[0], line 6)",
        Some("one L3_DEFAULT rule per VIP"),
    );
    // Other protocols are L3_DEFAULT's.
    expect(
        "    IPProtocol: TCP\n",
        "    IPProtocol: ESP #!\n",
        "forwardingRules[1].IPProtocol",
        "an `L3_DEFAULT` rule of a backend service takes every protocol",
        Some("TCP, UDP, L3_DEFAULT"),
    );
    // A regional backend service serves rules of its region (the service is on line 33 once
    // the rule has one line more).
    expect(
        "    portRange: \"443\"\n    backendService: tls\n",
        "    portRange: \"443\"\n    region: us-east1\n    backendService: tls #!\n",
        "forwardingRules[1].backendService",
        "backend service `tls` is in region us-central1 (regionBackendServices[0], line 33), but forwarding rule `tls` is in region us-east1",
        Some("the region of the backend service, or a global backend service"),
    );
    for (written, words, valid) in [
        (
            "regions/us-east1/backendServices/tls",
            "the reference names region us-east1, but backend service `tls` is in region us-central1",
            "the region the object is in",
        ),
        (
            "global/backendServices/tls",
            "the reference names a global backend service, but `tls` is in region us-central1",
            "`regions/us-central1/backendServices/tls`",
        ),
    ] {
        expect(
            "    backendService: tls\n",
            &format!("    backendService: {written} #!\n"),
            "forwardingRules[1].backendService",
            words,
            Some(valid),
        );
    }
    expect(
        "    backendService: edge\n",
        "    backendService: regions/us-central1/backendServices/edge #!\n",
        "forwardingRules[0].backendService",
        "the reference names region us-central1, but backend service `edge` is global",
        Some("`global/backendServices/edge`"),
    );
}

#[test]
fn settings_that_depend_on_each_other() {
    // WEIGHTED_MAGLEV takes its weights from HTTP(S) health-check responses (SPEC R5.4, R5.6).
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    localityLbPolicy: WEIGHTED_MAGLEV #!\n",
        "backendServices[0].localityLbPolicy",
        "WEIGHTED_MAGLEV takes the weights HTTP health-check responses report (X-Load-Balancing-Endpoint-Weight), but health check `edge-check` is of type TCP",
        Some("an HTTP or HTTPS health check, or MAGLEV"),
    );
    expect(
        "    healthChecks: [tls-check]\n",
        "    localityLbPolicy: WEIGHTED_MAGLEV #!\n",
        "regionBackendServices[0].localityLbPolicy",
        "but the service has no health check",
        Some("an HTTP or HTTPS health check, or MAGLEV"),
    );
    let d = errors(&with(
        "    healthChecks: [tls-check]\n",
        "    healthChecks: [tls-check]\n    localityLbPolicy: WEIGHTED_MAGLEV\n",
    ));
    assert!(d.is_empty(), "an HTTP check: {d}");
    // PER_SESSION only where the session is the connection (docs/config.md).
    expect(
        "    protocol: UNSPECIFIED\n",
        "    protocol: UNSPECIFIED\n    sessionAffinity: CLIENT_IP\n    connectionTrackingPolicy:\n      trackingMode: PER_SESSION #!\n",
        "backendServices[0].connectionTrackingPolicy.trackingMode",
        "PER_SESSION tracking with sessionAffinity CLIENT_IP is not supported",
        Some("PER_CONNECTION, or PER_SESSION with sessionAffinity NONE or CLIENT_IP_PORT_PROTO"),
    );
    for affinity in ["NONE", "CLIENT_IP_PORT_PROTO"] {
        let d = errors(&with(
            "    protocol: UNSPECIFIED\n",
            &format!("    protocol: UNSPECIFIED\n    sessionAffinity: {affinity}\n    connectionTrackingPolicy: {{trackingMode: PER_SESSION}}\n"),
        ));
        assert!(d.is_empty(), "{affinity}: {d}");
    }
}

#[test]
fn regions_and_zones() {
    // A regional backend service's groups are in its region.
    expect(
        "    backends:\n      - group: edge-a\nserviceLbPolicies",
        "    backends:\n      - group: edge-standby #!\nserviceLbPolicies",
        "regionBackendServices[0].backends[0].group",
        "group `edge-standby` is in region us-east1, but regional backend service `tls` is in region us-central1",
        Some("a global backend service (`backendServices`), which may span regions"),
    );
    expect(
        "      - group: edge-b\n",
        "      - group: zones/us-central1-c/networkEndpointGroups/edge-b #!\n",
        "backendServices[0].backends[1].group",
        "the reference names zone us-central1-c, but group `edge-b` is in zone us-central1-b (region us-central1) (networkEndpointGroups[0]",
        Some("the zone the object is in"),
    );
    // A regional health check serves the services of its region only.
    let regional = with(
        "  - name: edge-check\n",
        "  - name: edge-check\n    region: us-central1\n",
    )
    .replace(
        "    healthChecks: [edge-check]",
        "    healthChecks: [edge-check] #!",
    );
    expect_in(
        &regional,
        "backendServices[0].healthChecks[0]",
        "health check `edge-check` is in region us-central1 (healthChecks[0], line 55), but backend service `edge` is global",
        Some("a global health check, or a regional one of the service's region"),
    );
    expect(
        "    healthChecks: [tls-check]",
        "    healthChecks: [regions/us-central1/healthChecks/tls-check] #!",
        "regionBackendServices[0].healthChecks[0]",
        "the reference names region us-central1, but health check `tls-check` is global",
        Some("the region the object is in"),
    );
    // The NIC's own place (SPEC R6).
    expect(
        "  zone: us-central1-a\nforwardingRules",
        "  zone: us-east1-b #!\nforwardingRules",
        "nic.zone",
        "zone us-east1-b is in region us-east1, but `nic.region` is us-central1",
        Some("a zone of region us-central1"),
    );
    expect(
        "  zone: us-central1-a\nforwardingRules",
        "  zone: us-central1-a\n  regionOrder: [us-east1, us-central1] #!\nforwardingRules",
        "nic.regionOrder[1]",
        "us-central1 is the NIC's own region, which is always nearest",
        Some("other regions, nearest first, each once"),
    );
    expect(
        "  zone: us-central1-a\nforwardingRules",
        "  zone: us-central1-a\n  regionOrder: [us-east1, us-east1] #!\nforwardingRules",
        "nic.regionOrder[1]",
        "us-east1 is listed twice",
        Some("other regions, nearest first, each once"),
    );
    let text = with(
        "  region: us-central1\n  zone: us-central1-a\n",
        "  regionOrder: [us-east1]\n",
    )
    .replace(
        "  mac: 02:00:00:00:00:01\n",
        "  mac: 02:00:00:00:00:01 #!\n",
    );
    expect_in(
        &text,
        "nic.region",
        "`regionOrder` orders the regions by distance from the NIC's own, but `region` (or `zone`) is not set",
        Some("`nic.region`"),
    );
}

#[test]
fn names_and_delivery() {
    // Target pools, target instances and backend services share one namespace.
    // (The later kind in the list of kinds is the duplicate: pools come first.)
    let text = format!("{BASE}targetPools:\n  - {{name: edge, instances: [a1]}}\n").replacen(
        "  - name: edge\n",
        "  - name: edge #!\n",
        1,
    );
    expect_in(
        &text,
        "backendServices[0].name",
        "duplicate name `edge`: already used by targetPools[0] (line 67) (target pools, target instances and backend services share one namespace",
        None,
    );
    // L2_DSR needs each endpoint's MAC.
    let text = with(
        "  - {name: b1, ip: 192.0.2.71, zone: us-central1-b, mac: \"02:00:00:00:07:01\"}\n",
        "  - {name: b1, ip: 192.0.2.71, zone: us-central1-b}\n",
    )
    .replace("      - instance: b1\n", "      - instance: b1 #!\n");
    expect_in(
        &text,
        "networkEndpointGroups[0].networkEndpoints[0].instance",
        "instance `b1` has no `mac`, which L2_DSR delivery (backend service `edge`) needs",
        Some("`delivery: IPIP` or `GUE` on the backend service"),
    );
}
