//! The bridge to `flowtable-compiler`: health targets from a configuration, and health
//! snapshots as the compiler's [`HealthState`] (what `--health` reads).

use std::time::Duration;

use flowtable_compiler::{BackendHealth, Config, HealthState};

use super::checker::HealthSnapshot;
use super::config::{HealthTarget, HttpCheck, TargetKey};
use super::state::{Health, WeightReport};

/// The health targets of a configuration: every instance of every target pool that has a
/// health check (SPEC R5.1). Pools without one and target instances are not probed (the
/// compiler counts them healthy).
///
/// The `Host` fallback of an empty `host` is the IP of the first forwarding rule (in file
/// order) that targets the pool, or, for a pool only used as a backup, of the first rule of a
/// pool that names it as backup. A target reads the weight header only when its pool balances
/// by weight ([`flowtable_compiler::TargetPool::weighted`], SPEC R5.6): target pools never do, so a responder that
/// always sends the header (kube-proxy's does) cannot skew them.
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
        let check = HttpCheck {
            port: hc.port,
            request_path: hc.request_path.clone(),
            host: hc.host.clone(),
            interval: Duration::from_secs(u64::from(hc.check_interval_sec)),
            timeout: Duration::from_secs(u64::from(hc.timeout_sec)),
            healthy_threshold: hc.healthy_threshold,
            unhealthy_threshold: hc.unhealthy_threshold,
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
    targets
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
        let (config, diags) = flowtable_compiler::parse_config("t.yaml", CONFIG);
        assert!(diags.is_empty(), "{diags}");
        let d = flowtable_compiler::check(&config);
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
            HttpCheck {
                port: 80,
                request_path: "/healthz".into(),
                host: String::new(),
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

    fn status(pool: &str, backend: &str, health: Health, weight: WeightReport) -> TargetStatus {
        let target = HealthTarget::new(pool, backend, IpAddr::V4(Ipv4Addr::LOCALHOST));
        TargetStatus {
            probe: ProbeKey {
                addr: "127.0.0.1:80".parse().unwrap(),
                path: "/".into(),
                host: "h".into(),
            },
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

    /// SPEC R5.5 (and the source product: each target pool's own health check decides for
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
