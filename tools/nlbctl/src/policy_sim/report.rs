//! The trace (JSON lines) and the summary of a run.

use super::engine::{Outcome, Record};
use super::scenario::MICROS;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// Four decimals: enough for shares and utilisations, and a trace a person can read.
fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn secs(us: u64) -> f64 {
    us as f64 / MICROS
}

fn record_line(r: &Record) -> Value {
    let groups: Vec<Value> = r
        .groups
        .iter()
        .map(|g| {
            json!({
                "group": g.name,
                "live": g.live,
                "capacity": r4(g.capacity),
                "utilisation": g.utilisation.map(r4),
                "arrived": g.arrived,
                "observed_share": g.observed_share.map(r4),
                "policy_share": r4(g.policy_share),
                "served_share": r4(g.served_share),
                "slot_share": r4(g.slot_share),
                "drained": g.drained,
                "below_threshold": g.below_threshold,
                "tier": g.tier,
                "healthy": g.healthy,
                "endpoints": g.endpoints,
                "weight_change": g.weight_change,
            })
        })
        .collect();
    json!({
        "t": secs(r.t),
        "kind": r.kind.name(),
        "event": r.event,
        "arrived": r.arrived,
        "dropped": r.dropped,
        "live": r.live,
        "rule": r.rule,
        "changed_entries": r.changed_entries,
        "written_entries": r.written_entries,
        "groups": groups,
    })
}

/// The trace: a `scenario` line, then one line per refresh and health event, in time order
/// (docs/policy-sim.md). The same scenario and seed give the same bytes.
pub fn trace_jsonl(o: &Outcome) -> String {
    let mut out = String::new();
    let head = json!({
        "kind": "scenario",
        "name": o.name,
        "file": o.file,
        "seed": o.seed,
        "duration": secs(o.duration),
        "refresh_interval": secs(o.refresh),
        "service": o.service,
        "groups": o.groups,
    });
    let _ = writeln!(out, "{head}");
    for r in &o.records {
        let _ = writeln!(out, "{}", record_line(r));
    }
    out
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

/// The summary printed at the end: the run's figures, each phase's shares per group, and per
/// group its peak utilisation and weight changes.
pub fn summary(o: &Outcome) -> String {
    let t = &o.totals;
    let mut s = String::new();
    let dropped: u64 = t.dropped.values().sum();
    let _ = writeln!(
        s,
        "policy-sim {} ({}), seed {}: {} s of virtual time, refresh every {} s",
        o.name,
        o.file,
        o.seed,
        secs(o.duration),
        secs(o.refresh)
    );
    let _ = writeln!(
        s,
        "  {} connections ({} dropped), peak {} live; {} found no room in the connection table",
        t.connections, dropped, t.peak_live, t.bucket_full
    );
    let _ = writeln!(
        s,
        "  FIN to another backend than the SYN: {} tracked connections, {} without room in the table",
        t.moved, t.moved_untracked
    );
    for (reason, n) in &t.dropped {
        let _ = writeln!(s, "  dropped: {n} ({reason})");
    }
    for (what, n) in &t.other {
        let _ = writeln!(s, "  not forwarded: {n} ({what})");
    }
    let _ = writeln!(
        s,
        "  {} delta loads: {} table entries changed, {} written",
        t.delta_loads, t.entries_changed, t.entries_written
    );
    let _ = writeln!(s);
    let width = o.groups.iter().map(String::len).max().unwrap_or(5).max(5);
    let _ = writeln!(
        s,
        "{:<32} {:>8} {:>8}  {:<width$} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "phase", "from s", "to s", "group", "share", "served", "util avg", "util max", "changes"
    );
    for p in &o.phases {
        let name = if p.name.chars().count() > 32 {
            let cut: String = p.name.chars().take(31).collect();
            format!("{cut}…")
        } else {
            p.name.clone()
        };
        for (i, (g, pg)) in o.groups.iter().zip(&p.groups).enumerate() {
            let share = if p.arrived > 0 {
                pct(pg.arrived as f64 / p.arrived as f64)
            } else {
                "-".to_string()
            };
            let (n, from, to) = if i == 0 {
                (
                    name.clone(),
                    format!("{}", secs(p.from)),
                    format!("{}", secs(p.to)),
                )
            } else {
                (String::new(), String::new(), String::new())
            };
            let _ = writeln!(
                s,
                "{n:<32} {from:>8} {to:>8}  {g:<width$} {share:>9} {:>9} {:>9} {:>9} {:>8}",
                pct(pg.served_share_at_end),
                pct(pg.mean_utilisation),
                pct(pg.peak_utilisation),
                pg.weight_changes
            );
        }
        if p.dropped > 0 {
            let _ = writeln!(
                s,
                "{:<32} {:>8} {:>8}  {:<width$} {:>9}",
                "",
                "",
                "",
                "(dropped)",
                pct(p.dropped as f64 / p.arrived.max(1) as f64)
            );
        }
        if !p.rule_at_end.is_empty() {
            let _ = writeln!(s, "{:<32} decided by: {}", "", p.rule_at_end);
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<width$} {:>12} {:>12} {:>10} {:>15}",
        "group", "capacity", "connections", "peak util", "weight changes"
    );
    for g in &o.group_totals {
        // A service that sets no capacity counts every endpoint for so many connections that
        // no group fills (`UNLIMITED_PER_ENDPOINT`): say so rather than print the number.
        let capacity = if g.capacity >= flowtable_compiler::compile::UNLIMITED_PER_ENDPOINT {
            "no limit".to_string()
        } else {
            format!("{:.0}", g.capacity)
        };
        let _ = writeln!(
            s,
            "{:<width$} {:>12} {:>12} {:>10} {:>15}",
            g.name,
            capacity,
            g.connections,
            pct(g.peak_utilisation),
            g.weight_changes
        );
    }
    let _ = writeln!(
        s,
        "\nshare: of the phase's new connections, as the device forwarded them; served: the \
         policy's share in the tables at the phase's end; util: live / capacity at refreshes; \
         decided by: the rule behind the served shares at the phase's end"
    );
    s
}
