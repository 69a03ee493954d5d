//! The bridge to `flowtable-compiler`: health targets from a configuration, and health
//! snapshots as the compiler's [`HealthState`] (what `--health` reads).

use std::time::Duration;

use flowtable_compiler::{BackendHealth, BackendService, Config, HealthState, Probe};

use super::checker::HealthSnapshot;
use super::config::{Check, CheckProtocol, HealthTarget, TargetKey};
use super::state::{Health, WeightReport};

/// The health targets of a configuration (SPEC R5.1, R5.5): every instance of every target
/// pool that has a (legacy HTTP) health check, then every member of every backend service that
/// has a health check (HTTP, HTTPS or TCP). Pools without one and target instances are not
/// probed (the compiler counts them healthy).
///
/// A backend service is a pool named as the service, and its members are the instances of
/// its groups, instance groups and network endpoint groups (a `GCE_VM_IP` endpoint is its
/// instance), primary and failover alike, each once, in name order: the members the
/// compiler gives the service's pool. An endpoint is probed at its instance's `ip` (the same
/// address the endpoint's `ipAddress` must name).
///
/// The `Host` fallback of an empty `host` is the IP of the first forwarding rule (in file
/// order) that targets the pool, or, for a target pool only used as a backup, of the first rule
/// of a pool that names it as backup. A target reads the weight header only when its pool
/// balances by weight (SPEC R5.6): target pools never do
/// ([`flowtable_compiler::TargetPool::weighted`]), so a responder that always sends the
/// header (kube-proxy's does) cannot skew them; a backend service does with
/// `localityLbPolicy: WEIGHTED_MAGLEV`.
pub fn targets_from_config(config: &Config) -> Vec<HealthTarget> {
    let rule_ip_of = |pool: &str| {
        config
            .forwarding_rules
            .iter()
            .find(|r| r.target.name == pool)
            .map(|r| r.ip_address)
    };
    let mut targets = Vec::new();
    for pool in &config.target_pools {
        let Some(check_ref) = pool.health_checks.first() else {
            continue;
        };
        let Some(hc) = config
            .http_health_checks
            .iter()
            .find(|h| h.name == check_ref.name)
        else {
            continue;
        };
        let rule_ip = rule_ip_of(&pool.name).or_else(|| {
            config
                .target_pools
                .iter()
                .filter(|p| p.backup_pool.as_ref().is_some_and(|b| b.name == pool.name))
                .find_map(|p| rule_ip_of(&p.name))
        });
        let check = Check {
            port: hc.port,
            request_path: hc.request_path.clone(),
            host: hc.host.clone(),
            interval: Duration::from_secs(u64::from(hc.check_interval_sec)),
            timeout: Duration::from_secs(u64::from(hc.timeout_sec)),
            healthy_threshold: hc.healthy_threshold,
            unhealthy_threshold: hc.unhealthy_threshold,
            ..Check::default()
        };
        for member in &pool.instances {
            let Some(instance) = config.instances.iter().find(|i| i.name == member.name) else {
                continue;
            };
            targets.push(HealthTarget {
                key: TargetKey::new(&pool.name, &instance.name),
                ip: instance.ip,
                check: check.clone(),
                rule_ip,
                weighted: pool.weighted(),
            });
        }
    }
    for service in &config.backend_services {
        let Some(check) = service_check(config, service) else {
            continue;
        };
        let rule_ip = rule_ip_of(&service.name);
        for name in service_members(config, service) {
            let Some(instance) = config.instances.iter().find(|i| i.name == name) else {
                continue;
            };
            targets.push(HealthTarget {
                key: TargetKey::new(&service.name, &instance.name),
                ip: instance.ip,
                check: check.clone(),
                rule_ip,
                weighted: service.weighted(),
            });
        }
    }
    targets
}

/// The check of a backend service: its health check (`healthChecks`, at most one) as the
/// checker runs it; `None` without one.
fn service_check(config: &Config, service: &BackendService) -> Option<Check> {
    let check_ref = service.health_checks.first()?;
    let hc = config
        .health_checks
        .iter()
        .find(|h| h.name == check_ref.name)?;
    let (protocol, request_path, host, request, response) = match &hc.probe {
        Probe::Http {
            request_path,
            host,
            response,
        } => (
            CheckProtocol::Http,
            request_path.as_str(),
            host.as_str(),
            "",
            response,
        ),
        Probe::Https {
            request_path,
            host,
            response,
        } => (
            CheckProtocol::Https,
            request_path.as_str(),
            host.as_str(),
            "",
            response,
        ),
        // A TCP check sends no path or `Host`.
        Probe::Tcp { request, response } => {
            (CheckProtocol::Tcp, "", "", request.as_str(), response)
        }
    };
    Some(Check {
        protocol,
        port: hc.port,
        request_path: request_path.to_string(),
        host: host.to_string(),
        request: request.to_string(),
        response: response.clone(),
        interval: Duration::from_secs(u64::from(hc.check_interval_sec)),
        timeout: Duration::from_secs(u64::from(hc.timeout_sec)),
        healthy_threshold: hc.healthy_threshold,
        unhealthy_threshold: hc.unhealthy_threshold,
    })
}

/// The members of a backend service: the instances of all its groups, each once, in name
/// order (as the compiler makes them the service pool's members).
fn service_members<'c>(config: &'c Config, service: &BackendService) -> Vec<&'c str> {
    let mut names: Vec<&str> = service
        .backends
        .iter()
        .flat_map(|backend| config.group_members(backend))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

impl HealthSnapshot {
    /// The compiler's health state: one entry per probed (pool, instance) (SPEC R5.5).
    ///
    /// Each target stands for itself: an instance failing one pool's check keeps its place in
    /// its other pools. [`Health::Unknown`] is not healthy. A weight is carried only when the
    /// target reported a valid one. Pools that are not probed have no entries (the compiler
    /// treats their members as healthy).
    pub fn to_health_state(&self) -> HealthState {
        let mut state = HealthState::new();
        for t in &self.targets {
            let weight = match t.weight {
                WeightReport::Weight(w) => Some(u32::from(w)),
                _ => None,
            };
            state.set_member(
                &t.target.key.pool,
                &t.target.key.backend,
                BackendHealth {
                    healthy: t.health == Health::Healthy,
                    weight,
                },
            );
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::checker::TargetStatus;
    use crate::health::ProbeKey;
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::Instant;

    const CONFIG: &str = "
forwardingRules:
  - {name: web-http, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: web}
  - {name: api, IPAddress: 203.0.113.20, IPProtocol: TCP, portRange: '443', target: api}
targetPools:
  - {name: web, region: r, instances: [a, b], healthChecks: [hc-web], backupPool: spare, failoverRatio: 0.5}
  - {name: spare, region: r, instances: [c], healthChecks: [hc-web]}
  - {name: api, region: r, instances: [a, c], healthChecks: [hc-api]}
  - {name: nohc, region: r, instances: [b]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
httpHealthChecks:
  - {name: hc-web, requestPath: /healthz, checkIntervalSec: 10, timeoutSec: 3, healthyThreshold: 3}
  - {name: hc-api, port: 8080, host: api.example}
";

    fn config() -> Config {
        let (config, diags) = nlb_config::parse_config("t.yaml", CONFIG);
        assert!(diags.is_empty(), "{diags}");
        let d = nlb_config::check(&config);
        assert!(d.is_empty(), "{d}");
        config
    }

    #[test]
    fn targets_cover_probed_pools_with_their_checks() {
        let targets = targets_from_config(&config());
        let keys: Vec<String> = targets.iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["web/a", "web/b", "spare/c", "api/a", "api/c"]);
        let web_a = &targets[0];
        assert_eq!(web_a.ip, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(
            web_a.check,
            Check {
                protocol: CheckProtocol::Http,
                port: 80,
                request_path: "/healthz".into(),
                host: String::new(),
                request: String::new(),
                response: String::new(),
                interval: Duration::from_secs(10),
                timeout: Duration::from_secs(3),
                healthy_threshold: 3,
                unhealthy_threshold: 2,
            }
        );
        // Empty host: the rule's VIP; the backup pool borrows its primary's rule.
        assert_eq!(web_a.host_header(), "203.0.113.10");
        assert_eq!(targets[2].host_header(), "203.0.113.10");
        assert_eq!(targets[3].host_header(), "api.example");
        assert_eq!(targets[3].check.port, 8080);
        assert!(targets.iter().all(|t| t.validate().is_ok()));
        // Target pools never balance by probe weight (SPEC R5.6): the header is not read.
        assert!(targets.iter().all(|t| !t.weighted));
    }

    /// Backend services: a global one over an instance group, a network endpoint group and a
    /// failover group, behind two rules; a regional one with an HTTPS check and
    /// `WEIGHTED_MAGLEV`; one without a rule; one without a health check; and a target pool.
    const SERVICES: &str = "
nic: {mac: '02:00:00:00:00:01', region: us-central1, zone: us-central1-a}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: web}
  - {name: edge-all, IPAddress: 203.0.113.60, IPProtocol: L3_DEFAULT, allPorts: true, backendService: edge}
  - {name: edge-dns, IPAddress: 203.0.113.61, IPProtocol: UDP, portRange: '53', backendService: edge}
  - {name: tls, IPAddress: 203.0.113.70, IPProtocol: TCP, portRange: '443', backendService: regions/us-central1/backendServices/tls}
targetPools:
  - {name: web, region: us-central1, instances: [a1], healthChecks: [legacy]}
backendServices:
  - name: edge
    protocol: UNSPECIFIED
    healthChecks: [edge-tcp]
    backends:
      - {group: zones/us-central1-b/networkEndpointGroups/neg-b}
      - {group: ig-a}
      - {group: ig-f, failover: true}
regionBackendServices:
  - name: tls
    region: us-central1
    protocol: TCP
    healthChecks: [regions/us-central1/healthChecks/tls-check]
    localityLbPolicy: WEIGHTED_MAGLEV
    backends: [{group: ig-a}]
  - name: quiet
    region: us-central1
    healthChecks: [plain]
    backends: [{group: neg-b}]
  - name: unchecked
    region: us-central1
    backends: [{group: ig-f}]
instanceGroups:
  - {name: ig-a, zone: us-central1-a, instances: [a2, a1]}
  - {name: ig-f, zone: us-central1-c, instances: [f1]}
networkEndpointGroups:
  - name: neg-b
    zone: us-central1-b
    networkEndpointType: GCE_VM_IP
    networkEndpoints: [{instance: b2, ipAddress: 192.0.2.22}, {instance: b1}]
healthChecks:
  - {name: edge-tcp, type: TCP, tcpHealthCheck: {port: 7000, request: PING, response: PONG}, checkIntervalSec: 2, timeoutSec: 1, unhealthyThreshold: 3}
  - {name: tls-check, region: us-central1, type: HTTPS, httpsHealthCheck: {requestPath: /ready, host: tls.example, response: ok}}
  - {name: plain, httpHealthCheck: {port: 8080}}
httpHealthChecks:
  - {name: legacy}
instances:
  - {name: a1, ip: 192.0.2.11, zone: us-central1-a, mac: '02:00:00:00:00:11'}
  - {name: a2, ip: 192.0.2.12, zone: us-central1-a, mac: '02:00:00:00:00:12'}
  - {name: b1, ip: 192.0.2.21, zone: us-central1-b, mac: '02:00:00:00:00:21'}
  - {name: b2, ip: 192.0.2.22, zone: us-central1-b, mac: '02:00:00:00:00:22'}
  - {name: f1, ip: 192.0.2.31, zone: us-central1-c, mac: '02:00:00:00:00:31'}
";

    /// Every member of every backend service with a health check is a target of the pool
    /// named as the service, probed as its health check says (expectations worked out by
    /// hand from the configuration above and the public API's defaults).
    #[test]
    fn backend_service_members_are_targets() {
        let (config, diags) = nlb_config::parse_config("s.yaml", SERVICES);
        assert!(diags.is_empty(), "{diags}");
        let d = nlb_config::check(&config);
        assert!(d.is_empty(), "{d}");
        let targets = targets_from_config(&config);
        let keys: Vec<String> = targets.iter().map(|t| t.key.to_string()).collect();
        // Target pools first; then services in file order (global `backendServices` before
        // `regionBackendServices`), members in name order whatever the group order; `edge`
        // has its failover group's f1 too; `unchecked` has no health check.
        assert_eq!(
            keys,
            [
                "web/a1", "edge/a1", "edge/a2", "edge/b1", "edge/b2", "edge/f1", "tls/a1",
                "tls/a2", "quiet/b1", "quiet/b2",
            ]
        );
        let get = |k: &str| &targets[keys.iter().position(|x| x == k).unwrap()];
        let ip = |last: u8| IpAddr::V4(Ipv4Addr::new(192, 0, 2, last));

        // TCP: port 7000, PING / PONG, 2 s / 1 s, thresholds 2 (default) and 3; no path, no
        // Host; probed at the instance's IP, also for a network endpoint.
        let edge_b2 = get("edge/b2");
        assert_eq!(edge_b2.ip, ip(22));
        assert_eq!(get("edge/b1").ip, ip(21));
        assert_eq!(get("edge/f1").ip, ip(31));
        let tcp = Check {
            protocol: CheckProtocol::Tcp,
            port: 7000,
            request_path: String::new(),
            host: String::new(),
            request: "PING".into(),
            response: "PONG".into(),
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
        };
        for m in ["a1", "a2", "b1", "b2", "f1"] {
            let t = get(&format!("edge/{m}"));
            assert_eq!(t.check, tcp, "edge/{m}");
            assert!(!t.weighted, "MAGLEV does not read weights");
            // The first rule in file order that targets the service.
            assert_eq!(t.rule_ip, Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 60))));
        }
        assert_eq!(edge_b2.url(), "tcp://192.0.2.22:7000");

        // HTTPS: default port 443, its path, host and response; defaults 5/5/2/2; weighted.
        let tls_a2 = get("tls/a2");
        assert_eq!(tls_a2.ip, ip(12));
        assert_eq!(
            tls_a2.check,
            Check {
                protocol: CheckProtocol::Https,
                port: 443,
                request_path: "/ready".into(),
                host: "tls.example".into(),
                request: String::new(),
                response: "ok".into(),
                interval: Duration::from_secs(5),
                timeout: Duration::from_secs(5),
                healthy_threshold: 2,
                unhealthy_threshold: 2,
            }
        );
        assert!(tls_a2.weighted, "WEIGHTED_MAGLEV reads the weight header");
        assert_eq!(tls_a2.host_header(), "tls.example");
        assert_eq!(tls_a2.url(), "https://192.0.2.12:443/ready");

        // HTTP without `type`, port 8080, path `/`; no rule in front: Host is the member's IP.
        let quiet_b1 = get("quiet/b1");
        assert_eq!(quiet_b1.check.protocol, CheckProtocol::Http);
        assert_eq!(
            (quiet_b1.check.port, quiet_b1.check.request_path.as_str()),
            (8080, "/")
        );
        assert_eq!(quiet_b1.rule_ip, None);
        assert_eq!(quiet_b1.host_header(), "192.0.2.21");

        // The legacy pool is as before.
        assert_eq!(get("web/a1").check.protocol, CheckProtocol::Http);
        assert_eq!(get("web/a1").host_header(), "203.0.113.10");
        assert!(targets.iter().all(|t| t.validate().is_ok()));

        // a1 is probed three ways (web: HTTP 80, edge: TCP 7000, tls: HTTPS 443): three
        // probes; edge and a second service with the same check would share one.
        let a1: std::collections::BTreeSet<ProbeKey> = targets
            .iter()
            .filter(|t| t.key.backend == "a1")
            .map(HealthTarget::probe_key)
            .collect();
        assert_eq!(a1.len(), 3);
    }

    fn status(pool: &str, backend: &str, health: Health, weight: WeightReport) -> TargetStatus {
        let target = HealthTarget::new(pool, backend, IpAddr::V4(Ipv4Addr::LOCALHOST));
        TargetStatus {
            probe: ProbeKey::http("127.0.0.1:80".parse().unwrap(), "/", "h"),
            target,
            health,
            weight,
            consecutive_passes: 0,
            consecutive_failures: 0,
            changed_at: None,
            last_probe: None,
        }
    }

    #[test]
    fn snapshot_becomes_the_compiler_health_state() {
        use WeightReport::*;
        let snap = HealthSnapshot {
            taken_at: Instant::now(),
            targets: vec![
                status("api", "a", Health::Healthy, Weight(5)),
                status("api", "c", Health::Healthy, Weight(7)),
                status("spare", "c", Health::Healthy, Weight(9)),
                status("web", "a", Health::Healthy, Weight(5)),
                status("web", "b", Health::Unknown, Missing),
                status("web", "d", Health::Unhealthy, Invalid),
            ],
        };
        let state = snap.to_health_state();
        let get = |p: &str, n: &str| state.members.get(&(p.into(), n.into())).copied();
        let h = |healthy, weight| Some(BackendHealth { healthy, weight });
        assert_eq!(get("api", "a"), h(true, Some(5)));
        // c reports its own weight to each of its pools.
        assert_eq!(get("api", "c"), h(true, Some(7)));
        assert_eq!(get("spare", "c"), h(true, Some(9)));
        // Unknown is not healthy; an invalid weight is no weight.
        assert_eq!(get("web", "b"), h(false, None));
        assert_eq!(get("web", "d"), h(false, None));
        assert_eq!(state.members.len(), 6);
        assert!(state.backends.is_empty(), "no instance-wide entries");
    }

    /// SPEC R5.5 (and Google Cloud: each target pool's own health check decides for
    /// that pool): failing pool p2's check leaves the instance in pool p1.
    #[test]
    fn health_belongs_to_the_pool() {
        let snap = HealthSnapshot {
            taken_at: Instant::now(),
            targets: vec![
                status("p1", "x", Health::Healthy, WeightReport::NotWeighted),
                status("p2", "x", Health::Unhealthy, WeightReport::NotWeighted),
            ],
        };
        let state = snap.to_health_state();
        assert!(state.get("p1", "x").healthy);
        assert!(!state.get("p2", "x").healthy);
    }
}
