//! The admin socket: a Unix socket with mode 0600 (only nlbd's user may connect) answering
//! one JSON request per connection (protocol in `nlb_control::admin_proto`, `tools/control/src/admin_proto.rs`).

use crate::Daemon;
use flowtable_compiler::policy::{Isolation, Preference};
use flowtable_compiler::{Flow, Fragment};
use nlb_control::admin_proto::{
    endpoint, protocol_name, BackendCounters, ConnectionData, ConntrackData, CountersData,
    HealthData, MemberData, NamedCounters, PcieData, PoolData, Reply, Request, RuleCounters,
    ServiceData, ServiceGroupData, StatusData, TargetData, MAX_REQUEST,
};
use nlbd::engine::{CounterValues, ServiceStatus};
use nlbd::health::{Health, ProbeOutcome, WeightReport};
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A bound admin socket.
#[derive(Debug)]
pub struct Admin {
    listener: UnixListener,
    path: PathBuf,
}

/// Binds the socket: a stale socket file nobody answers on is replaced; a live one (another
/// nlbd) or another kind of file is an error. The socket is made mode 0600 before anyone is
/// told it exists.
pub fn bind(path: &Path) -> Result<Admin, String> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "{} exists and is not a socket; choose another --admin-socket",
                path.display()
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "another nlbd answers on {}; stop it or choose another --admin-socket",
                path.display()
            ));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove the stale socket {}: {e}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| format!("cannot create the admin socket {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make {} mode 0600: {e}", path.display()))?;
    Ok(Admin {
        listener,
        path: path.to_path_buf(),
    })
}

/// Accepts clients until the task is aborted.
pub async fn run(admin: Admin, daemon: Arc<Daemon>) {
    loop {
        let stream = match admin.listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, socket = %admin.path.display(), "admin: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let daemon = daemon.clone();
        tokio::spawn(async move {
            if let Err(e) = client(stream, daemon).await {
                tracing::debug!(error = %e, "admin client");
            }
        });
    }
}

fn encode<T: Serialize>(r: Result<T, String>) -> String {
    let reply = match r {
        Ok(data) => Reply {
            ok: true,
            data: Some(data),
            error: None,
        },
        Err(e) => Reply {
            ok: false,
            data: None,
            error: Some(e),
        },
    };
    let mut s = serde_json::to_string(&reply)
        .unwrap_or_else(|e| format!("{{\"ok\":false,\"error\":\"encoding the reply: {e}\"}}"));
    s.push('\n');
    s
}

async fn client(stream: UnixStream, daemon: Arc<Daemon>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(MAX_REQUEST as u64));
    let got = tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line)).await;
    let answer = match got {
        Err(_) => encode::<()>(Err("no request within 5 s".into())),
        Ok(Err(e)) => encode::<()>(Err(format!("reading the request: {e}"))),
        Ok(Ok(_)) => match serde_json::from_str::<Request>(line.trim()) {
            Err(e) => encode::<()>(Err(format!(
                "bad request ({e}); send one JSON line such as {{\"command\":\"status\"}}"
            ))),
            Ok(Request::Status) => encode(status(&daemon).await),
            Ok(Request::Health) => encode(health(&daemon).await),
            Ok(Request::Conntrack { limit, from }) => encode(conntrack(&daemon, from, limit).await),
            Ok(Request::Counters) => encode(counters(&daemon).await),
            Ok(Request::Drain { drain }) => encode(drain_local(&daemon, drain).await),
            Ok(Request::Explain {
                protocol,
                src,
                src_port,
                dst,
                dst_port,
                fragment,
            }) => {
                let fragment = match fragment.as_str() {
                    "no" => Ok(Fragment::No),
                    "first" => Ok(Fragment::First),
                    "later" => Ok(Fragment::Later),
                    other => Err(format!(
                        "bad request: fragment `{other}` (valid: no, first, later)"
                    )),
                };
                match fragment {
                    Ok(fragment) => {
                        let flow = Flow {
                            protocol,
                            src,
                            src_port,
                            dst,
                            dst_port,
                            fragment,
                        };
                        encode(daemon.explain(flow).await)
                    }
                    Err(e) => encode::<()>(Err(e)),
                }
            }
        },
    };
    write.write_all(answer.as_bytes()).await?;
    write.shutdown().await
}

async fn status(daemon: &Daemon) -> Result<StatusData, String> {
    let s = daemon.engine_status(false).await?;
    let c = &s.controller;
    let h = &c.decision_latency;
    Ok(StatusData {
        device: s.device.clone(),
        profile: s.profile.to_string(),
        config_file: s.config_file.clone(),
        config_digest: s.config_digest.clone(),
        generation: s.generation,
        active_bank: s.active_bank,
        load_pending: s.load_pending,
        uptime_secs: daemon.uptime().as_secs(),
        metrics_addr: daemon.metrics_addr.map(|a| a.to_string()),
        loads: c.loads,
        load_errors: c.load_errors,
        reloads: c.reloads,
        reloads_refused: c.reloads_refused
            + daemon
                .refused_early
                .load(std::sync::atomic::Ordering::Relaxed),
        decisions: h.count,
        decision_latency_max_ms: c.decision_latency_max.as_secs_f64() * 1e3,
        decision_latency_mean_ms: if h.count == 0 {
            0.0
        } else {
            h.sum.as_secs_f64() * 1e3 / h.count as f64
        },
        assumed_targets: s.assumed_targets,
        conntrack_entries: s.conntrack_entries,
        conntrack_capacity: s.conntrack_capacity,
        pinned: nlb_control::admin_proto::PinnedData {
            own: s.pinned.own,
            copies: s.pinned.copies,
            adopted: s.pinned.adopted,
            lapsed: s.pinned.lapsed,
            refused: s.pinned.conflicts + s.pinned.bucket_full + s.pinned.unknown_names,
        },
        learn_events: s.learn.learn_events + s.learn.teardown_events,
        punts: s.punts.by_reason.iter().sum(),
        injected: s.punts.injected,
        device_errors: s.device_errors,
        policy_refresh_ms: s.policy_refresh.as_secs_f64() * 1e3,
        policy_refreshes: s.policy.refreshes,
        weight_changes: s.policy.weight_changes,
        services: s.services.iter().map(service).collect(),
        pcie: PcieData {
            rings: s.rings,
            ring_names: s.carried.iter().map(|r| r.to_string()).collect(),
            hw_learn: s.hw_learn,
            mmio_reads: s.pcie.mmio_reads,
            mmio_writes: s.pcie.mmio_writes,
            dma_writes: s.pcie.dma_writes,
            dma_write_bytes: s.pcie.dma_write_bytes,
            dma_reads: s.pcie.dma_reads,
            dma_read_bytes: s.pcie.dma_read_bytes,
            interrupts: s.pcie.interrupts,
            mmio_stall_ms: s.pcie.mmio_stall_ns / 1e6,
            link_ms: s.pcie.link_ns() / 1e6,
            reads_per_event: s.mmio.reads_per_event(),
            reads_per_punt: s.mmio.reads_per_punt(),
            reads_per_install: s.mmio.reads_per_install(),
            reads_per_entry: s.mmio.reads_per_entry(),
        },
        bgp: daemon.announce.view(),
        pools: s
            .pools
            .iter()
            .map(|p| PoolData {
                name: p.name.clone(),
                members: p.members,
                healthy: p.healthy,
                eligible: p.eligible.clone(),
                serving: p.serving.clone(),
                failed_over: p.failed_over,
                why: p.why.clone(),
            })
            .collect(),
    })
}

/// `nlbctl drain --socket` (and `--undo`): this host alone, until undrained or restarted.
async fn drain_local(
    daemon: &Daemon,
    drain: bool,
) -> Result<nlb_control::admin_proto::BgpData, String> {
    use std::sync::atomic::Ordering;
    let was = daemon.announce.local_drain.swap(drain, Ordering::Relaxed);
    if was != drain {
        tracing::info!(
            drain,
            "{} by the admin socket",
            if drain { "drained" } else { "undrained" }
        );
    }
    daemon.announce.changed.notify_one();
    // The decision runs at once; its result is what the next status shows.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(v) = daemon.announce.view() {
            if v.draining == daemon.announce.drained() {
                return Ok(v);
            }
        }
    }
    daemon
        .announce
        .view()
        .ok_or_else(|| "the configuration has no bgp section: nothing is announced".to_string())
}

/// A backend service's policy state: live counts, utilisation and drain of the latest refresh,
/// shares and tiers of what the tables serve.
pub fn service(s: &ServiceStatus) -> ServiceData {
    let observed = s.observed.as_ref().or(s.served.as_ref());
    let served = s.served.as_ref().or(observed);
    let mut groups: Vec<ServiceGroupData> = s
        .groups
        .iter()
        .map(|g| {
            let seen = observed.and_then(|d| d.groups.iter().find(|r| r.name == g.name));
            let serves = served.and_then(|d| d.groups.iter().find(|r| r.name == g.name));
            let live = seen.map_or(0, |r| r.live);
            ServiceGroupData {
                name: g.name.clone(),
                region: g.region.clone(),
                zone: g.zone.clone(),
                preference: match g.preference {
                    Preference::Preferred => "PREFERRED",
                    Preference::Default => "DEFAULT",
                }
                .into(),
                failover: g.failover,
                live,
                capacity: (!g.unlimited).then_some(g.capacity),
                utilisation: (!g.unlimited && g.capacity > 0.0).then(|| live as f64 / g.capacity),
                share: serves.map_or(0.0, |r| r.share),
                target_share: seen.map_or(0.0, |r| r.share),
                tier: serves.and_then(|r| r.tier),
                healthy: seen.map_or(0, |r| r.healthy),
                endpoints: g.members.len(),
                drained: seen.is_some_and(|r| r.drained),
                below_threshold: seen.is_some_and(|r| r.below_threshold),
                why: seen.map_or_else(String::new, |r| r.why.clone()),
            }
        })
        .collect();
    groups.sort_by(|a, b| {
        (a.tier.is_none(), a.tier, &a.name).cmp(&(b.tier.is_none(), b.tier, &b.name))
    });
    let nic = match (s.locality.region.as_str(), s.locality.zone.as_str()) {
        ("", "") => "-".to_string(),
        (r, "") => r.to_string(),
        (r, z) => format!("{r}/{z}"),
    };
    ServiceData {
        name: s.name.clone(),
        algorithm: s.policy.algorithm.name().into(),
        passthrough: s.policy.passthrough,
        rule: served.map_or_else(String::new, |d| d.rule.clone()),
        isolation: match s.policy.isolation {
            Isolation::None => "NONE",
            Isolation::Nearest => "NEAREST",
            Isolation::Strict => "STRICT",
        }
        .into(),
        failover_threshold: s.policy.failover_health_threshold,
        auto_capacity_drain: s.policy.auto_capacity_drain,
        nic,
        refreshed_at_secs: s.refreshed_at,
        live: groups.iter().map(|g| g.live).sum(),
        failover_serves: served.is_some_and(|d| d.failover_serves),
        drop: served.is_some_and(|d| d.drop),
        groups,
        steps: observed.map_or_else(Vec::new, |d| d.steps.clone()),
    }
}

fn last_result(o: &ProbeOutcome) -> String {
    match &o.result {
        Ok(_) => "pass".into(),
        Err(f) => f.label().to_string(),
    }
}

async fn health(daemon: &Daemon) -> Result<HealthData, String> {
    let engine = daemon.engine_status(false).await?;
    let snap = daemon.checker.snapshot();
    let metrics = daemon.checker.metrics();
    let targets = snap
        .targets
        .iter()
        .map(|t| TargetData {
            pool: t.target.key.pool.clone(),
            backend: t.target.key.backend.clone(),
            url: t.target.url(),
            host: if t.target.check.protocol.is_http() {
                t.target.host_header()
            } else {
                String::new()
            },
            health: match t.health {
                Health::Healthy => "healthy",
                Health::Unhealthy => "unhealthy",
                Health::Unknown => "unknown",
            }
            .into(),
            weight: match t.weight {
                WeightReport::Weight(w) => w.to_string(),
                WeightReport::Missing => "missing".into(),
                WeightReport::Invalid => "invalid".into(),
                WeightReport::NotWeighted => "not_weighted".into(),
            },
            passes: t.consecutive_passes,
            failures: t.consecutive_failures,
            last_result: t.last_probe.as_ref().map(last_result),
            last_latency_ms: t.last_probe.as_ref().map(|o| o.latency.as_secs_f64() * 1e3),
            changed_secs_ago: t
                .changed_at
                .map(|at| snap.taken_at.saturating_duration_since(at).as_secs_f64()),
        })
        .collect();
    let members = engine
        .health
        .members
        .iter()
        .map(|((pool, instance), h)| MemberData {
            pool: pool.clone(),
            instance: instance.clone(),
            healthy: h.healthy,
            weight: h.weight,
        })
        .collect();
    Ok(HealthData {
        targets,
        members,
        probes: metrics.probes,
        in_flight: metrics.in_flight,
    })
}

async fn conntrack(daemon: &Daemon, from: u32, limit: usize) -> Result<ConntrackData, String> {
    let list = daemon.connections(from, limit).await?;
    Ok(ConntrackData {
        total: list.total,
        capacity: list.capacity,
        entries: list
            .entries
            .iter()
            .map(|c| ConnectionData {
                protocol: protocol_name(c.protocol),
                client: endpoint(c.client, c.client_port),
                vip: endpoint(c.vip, c.vip_port),
                backend: c.backend.clone(),
                rule: c.rule.clone(),
                closed: c.closed,
                age_secs: c.age_secs,
            })
            .collect(),
        next: list.next,
    })
}

fn named(name: &str, c: &CounterValues) -> NamedCounters {
    NamedCounters {
        name: name.to_string(),
        packets: c.packets,
        bytes: c.bytes,
        punts: c.punts,
        drops: c.drops,
    }
}

async fn counters(daemon: &Daemon) -> Result<CountersData, String> {
    let status = daemon.engine_status(true).await?;
    let config = daemon.config().await?;
    let c = status
        .counters
        .as_ref()
        .ok_or("the NIC's counters could not be read (see nlbd's log)")?;
    let mut pools_of: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for p in &config.target_pools {
        for i in &p.instances {
            pools_of.entry(&i.name).or_default().push(p.name.clone());
        }
    }
    for t in &config.target_instances {
        pools_of
            .entry(&t.instance.name)
            .or_default()
            .push(t.name.clone());
    }
    Ok(CountersData {
        at_secs: status.uptime.as_secs_f64(),
        generation: status.generation,
        rules: c
            .rules
            .iter()
            .map(|(name, v)| {
                let rule = config.forwarding_rules.iter().find(|r| &r.name == name);
                RuleCounters {
                    name: name.clone(),
                    vip: rule.map_or_else(String::new, |r| r.ip_address.to_string()),
                    protocol: rule.map_or("", |r| r.ip_protocol.name()).to_string(),
                    ports: rule.map_or_else(Vec::new, |r| {
                        r.port_ranges.iter().map(ToString::to_string).collect()
                    }),
                    target: rule.map_or_else(String::new, |r| r.target.name.clone()),
                    packets: v.packets,
                    bytes: v.bytes,
                    punts: v.punts,
                    drops: v.drops,
                }
            })
            .collect(),
        backends: c
            .backends
            .iter()
            .map(|(name, v)| BackendCounters {
                name: name.clone(),
                pools: pools_of.get(name.as_str()).cloned().unwrap_or_default(),
                packets: v.packets,
                bytes: v.bytes,
                punts: v.punts,
                drops: v.drops,
            })
            .collect(),
        reasons: c.reasons.iter().map(|(n, v)| named(n, v)).collect(),
        verdicts: c.verdicts.iter().map(|(n, v)| named(n, v)).collect(),
        connections_installed: status.learn.installed,
        conntrack_entries: status.conntrack_entries,
        conntrack_capacity: status.conntrack_capacity,
    })
}
