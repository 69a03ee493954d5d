//! `nlbctl health`: the health of every backend, as the running nlbd sees it.

use crate::admin::ask;
use crate::common::{self, CliError};
use nlb_control::admin_proto as proto;
use std::path::{Path, PathBuf};

/// Show every health target (pool, backend) of the running nlbd: its probe, state, weight,
/// consecutive results and last probe; then each (pool, instance) as the tables were compiled
/// (health belongs to a pool: an instance in two pools is judged by each pool's check).
///
/// Talks to nlbd's admin socket (mode 0600: run as nlbd's user).
///
/// Example: nlbctl health --socket /run/nlbd.sock
#[derive(clap::Args, Debug)]
pub struct Args {
    /// nlbd's admin socket.
    #[arg(long, value_name = "PATH", default_value = proto::DEFAULT_SOCKET)]
    socket: PathBuf,
    #[command(flatten)]
    output: common::Output,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let h: proto::HealthData = ask(&args.socket, &proto::Request::Health)?;
    if args.output.json() {
        return common::print_json(&h);
    }
    let dash = || "-".to_string();
    outln!(
        "{:<20} {:<20} {:<9} {:>6} {:>5} {:>5} {:<16} {:>9}  probe",
        "pool",
        "backend",
        "health",
        "weight",
        "pass",
        "fail",
        "last",
        "latency"
    );
    for t in &h.targets {
        outln!(
            "{:<20} {:<20} {:<9} {:>6} {:>5} {:>5} {:<16} {:>9}  {}{}",
            t.pool,
            t.backend,
            t.health,
            t.weight,
            t.passes,
            t.failures,
            t.last_result.clone().unwrap_or_else(dash),
            t.last_latency_ms
                .map_or_else(dash, |ms| format!("{ms:.1} ms")),
            t.url,
            if t.host.is_empty() {
                String::new()
            } else {
                format!(" (Host: {})", t.host)
            }
        );
    }
    if h.targets.is_empty() {
        outln!("(no pool has a health check)");
    }
    outln!();
    outln!(
        "{:<20} {:<20} {:<9} weight (as the tables were compiled; health is per pool)",
        "pool",
        "instance",
        "healthy"
    );
    for m in &h.members {
        outln!(
            "{:<20} {:<20} {:<9} {}",
            m.pool,
            m.instance,
            if m.healthy { "yes" } else { "no" },
            m.weight
                .map_or_else(|| "configured".to_string(), |w| w.to_string())
        );
    }
    outln!();
    outln!("{} distinct probes, {} in flight", h.probes, h.in_flight);
    Ok(())
}

/// `nlbctl status --socket PATH`: the running nlbd's state.
pub fn status(socket: &Path, json: bool) -> Result<(), CliError> {
    let s: proto::StatusData = ask(socket, &proto::Request::Status)?;
    if json {
        return common::print_json(&s);
    }
    outln!("device       {} (profile {})", s.device, s.profile);
    outln!(
        "config       {} (digest {})",
        s.config_file,
        s.config_digest
    );
    outln!(
        "tables       bank {} serving, generation {}{}; {} loads, {} failed; {} reloads, {} refused",
        s.active_bank,
        s.generation,
        if s.load_pending { " (a failed load is being retried)" } else { "" },
        s.loads,
        s.load_errors,
        s.reloads,
        s.reloads_refused
    );
    outln!(
        "health       {} decisions applied, decision to table active: mean {:.2} ms, max {:.2} ms{}",
        s.decisions,
        s.decision_latency_mean_ms,
        s.decision_latency_max_ms,
        if s.assumed_targets > 0 {
            format!("; {} targets not decided yet", s.assumed_targets)
        } else {
            String::new()
        }
    );
    outln!(
        "connections  {} of {}; {} learn events",
        s.conntrack_entries,
        s.conntrack_capacity,
        s.learn_events
    );
    let p = &s.pinned;
    if p.own + p.copies + p.adopted > 0 {
        outln!(
            "pinned       {} on a backend the tables no longer choose; {} copies of other hosts' ({} adopted, {} lapsed, {} refused)",
            p.own,
            p.copies,
            p.adopted,
            p.lapsed,
            p.refused
        );
    }
    outln!("punts        {} handled, {} injected", s.punts, s.injected);
    let x = &s.pcie;
    let path = if !x.rings {
        "register queues".to_string()
    } else if x.ring_names.is_empty() || x.ring_names.iter().any(|r| r == "cmd") {
        "host rings (DMA)".to_string()
    } else {
        format!(
            "host rings (DMA: {}; table writes by register)",
            x.ring_names.join(", ")
        )
    };
    outln!(
        "host path    {}{}; {} register reads, {} writes ({:.1} ms of CPU stall on the PCIe cost model), DMA {} writes / {} reads ({:.1} ms of link), {} interrupts",
        path,
        if x.hw_learn { ", the NIC learns connections" } else { "" },
        x.mmio_reads,
        x.mmio_writes,
        x.mmio_stall_ms,
        x.dma_writes,
        x.dma_reads,
        x.link_ms,
        x.interrupts
    );
    outln!(
        "reg reads    {:.2} per learn event, {:.2} per punted frame, {:.2} per installed connection, {:.4} per loaded table entry",
        x.reads_per_event,
        x.reads_per_punt,
        x.reads_per_install,
        x.reads_per_entry
    );
    if let Some(m) = &s.metrics_addr {
        outln!("metrics      http://{m}/metrics");
    }
    outln!(
        "uptime       {} s, {} device errors",
        s.uptime_secs,
        s.device_errors
    );
    outln!();
    outln!("{:<20} {:>7} {:>7}  serving", "pool", "members", "healthy");
    for p in &s.pools {
        outln!(
            "{:<20} {:>7} {:>7}  {}{}: {}",
            p.name,
            p.members,
            p.healthy,
            p.serving,
            if p.failed_over { " (failed over)" } else { "" },
            p.eligible.join(", ")
        );
    }
    if !s.services.is_empty() {
        outln!();
        outln!(
            "policy       refreshed every {:.0} ms: {} refreshes, {} weight changes applied",
            s.policy_refresh_ms,
            s.policy_refreshes,
            s.weight_changes
        );
    }
    for svc in &s.services {
        services_table(svc);
    }
    if let Some(b) = &s.bgp {
        bgp_table(b);
    }
    Ok(())
}

/// What nlbd announces by BGP and why not, and each neighbour's session.
pub fn bgp_table(b: &proto::BgpData) {
    outln!();
    if b.withheld.is_empty() {
        outln!("bgp          announcing {}", list_or_none(&b.announcing));
    } else {
        outln!(
            "bgp          announcing nothing of {}: {}",
            list_or_none(&b.vips),
            b.withheld.join("; ")
        );
    }
    outln!(
        "{:<24} {:>10} {:<12} {:>7}  announced",
        "neighbor",
        "asn",
        "state",
        "for s"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    for n in &b.neighbors {
        outln!(
            "{:<24} {:>10} {:<12} {:>7}  {}{}",
            n.neighbor,
            n.asn,
            n.state,
            now.saturating_sub(n.since_unix_ms) / 1000,
            list_or_none(&n.announced),
            n.last_error
                .as_ref()
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default()
        );
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(", ")
    }
}

/// One backend service: per group where it is, live / capacity, utilisation, the share of new
/// connections the tables serve (and the one the latest refresh decided), tier and state.
fn services_table(svc: &proto::ServiceData) {
    outln!();
    let when = if svc.refreshed_at_secs > 0.0 {
        format!(
            "{} live connections at {:.1} s",
            svc.live, svc.refreshed_at_secs
        )
    } else {
        "not refreshed yet: decided with no live connection".to_string()
    };
    let mut what = Vec::new();
    if svc.passthrough {
        what.push("no serviceLbPolicy: passthrough, every healthy endpoint alike".to_string());
    } else {
        what.push(svc.algorithm.clone());
        if svc.isolation != "NONE" {
            what.push(format!("isolation {}", svc.isolation));
        }
        if svc.auto_capacity_drain {
            what.push("auto capacity drain".into());
        }
        what.push(format!("failover threshold {} %", svc.failover_threshold));
    }
    outln!(
        "service {} ({}); NIC in {}; {when}{}{}",
        svc.name,
        what.join(", "),
        svc.nic,
        if svc.failover_serves {
            "; the failover backends serve"
        } else {
            ""
        },
        if svc.drop {
            "; new connections are dropped"
        } else {
            ""
        }
    );
    if !svc.rule.is_empty() {
        outln!("  decided by: {}", svc.rule);
    }
    outln!(
        "  {:<20} {:<14} {:>15} {:>7} {:>7} {:>7} {:>5}  state",
        "group",
        "zone",
        "live/capacity",
        "util",
        "share",
        "target",
        "tier"
    );
    for g in &svc.groups {
        let capacity = match g.capacity {
            Some(c) => format!("{}/{c:.0}", g.live),
            None => format!("{}/no limit", g.live),
        };
        let util = match (g.capacity, g.utilisation) {
            (None, _) => "-".to_string(),
            (Some(_), Some(u)) => format!("{:.0} %", 100.0 * u),
            (Some(_), None) => "full".to_string(),
        };
        let mut state = Vec::new();
        if g.drained {
            state.push("drained".to_string());
        }
        if g.below_threshold {
            state.push("below threshold".to_string());
        }
        if g.failover {
            state.push("failover backend".to_string());
        }
        if g.preference == "PREFERRED" {
            state.push("preferred".to_string());
        }
        if g.healthy < g.endpoints {
            state.push(format!("{} of {} healthy", g.healthy, g.endpoints));
        }
        let zone = if g.zone.is_empty() { &g.region } else { &g.zone };
        outln!(
            "  {:<20} {:<14} {:>15} {:>7} {:>6.1}% {:>6.1}% {:>5}  {}",
            g.name,
            zone,
            capacity,
            util,
            100.0 * g.share,
            100.0 * g.target_share,
            g.tier.map_or_else(|| "-".to_string(), |t| t.to_string()),
            if state.is_empty() {
                "-".to_string()
            } else {
                state.join(", ")
            }
        );
    }
}
