//! What `nlbctl top` shows, computed from two samples of nlbd's admin socket: totals of the
//! later one, rates over the two (counter differences over the difference of nlbd's clock at
//! the two counter reads), sorted and filtered. The screen and `--once -o json` both show a
//! [`View`].

use nlb_control::admin_proto::{CountersData, HealthData, NamedCounters, StatusData};
use serde::Serialize;
use std::collections::BTreeMap;

/// One answer of each admin request `top` uses.
#[derive(Debug, Clone)]
pub struct Sample {
    /// `status`: device, tables, pools.
    pub status: StatusData,
    /// `health`: per (pool, backend) health and weight.
    pub health: HealthData,
    /// `counters`: the NIC's counters by name.
    pub counters: CountersData,
}

/// The column the tables are sorted by.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// Packets per second, busiest first.
    Packets,
    /// Bytes per second, busiest first.
    Bytes,
    /// Packets since the counters were last cleared, most first.
    Total,
    /// Name, A to Z.
    Name,
}

impl SortKey {
    /// The next key (the `s` key cycles through them).
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Packets => SortKey::Bytes,
            SortKey::Bytes => SortKey::Total,
            SortKey::Total => SortKey::Name,
            SortKey::Name => SortKey::Packets,
        }
    }

    /// How the screen names it.
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Packets => "pkt/s",
            SortKey::Bytes => "bytes/s",
            SortKey::Total => "packets",
            SortKey::Name => "name",
        }
    }
}

/// How rows are ordered and which are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// Sort column.
    pub key: SortKey,
    /// Reverse it.
    pub reverse: bool,
    /// Only rows whose names contain this (any case); empty for all.
    pub filter: String,
}

/// Everything on the screen.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    /// The admin socket asked.
    pub source: String,
    /// The device nlbd manages.
    pub device: String,
    /// Its capacity profile.
    pub profile: String,
    /// The configuration file serving.
    pub config_file: String,
    /// Digest prefix of that configuration.
    pub config_digest: String,
    /// Table generation serving.
    pub generation: u32,
    /// Bank serving.
    pub active_bank: u8,
    /// A failed load waits for its retry.
    pub load_pending: bool,
    /// Seconds between the two counter reads the rates are over (nlbd's clock); `None` before
    /// a second sample.
    pub interval_secs: Option<f64>,
    /// Sort column.
    pub sort: SortKey,
    /// Sorted in reverse.
    pub reverse: bool,
    /// The filter, if any.
    pub filter: Option<String>,
    /// The connection table.
    pub connections: ConnectionsView,
    /// Per verdict (FORWARD, PUNT, DROP, PASS), every verdict.
    pub verdicts: Vec<CounterRow>,
    /// Per VIP: the sum of its rules.
    pub vips: Vec<VipRow>,
    /// Per forwarding rule.
    pub rules: Vec<RuleRow>,
    /// Per (pool, backend).
    pub backends: Vec<BackendRow>,
    /// Per pool.
    pub pools: Vec<PoolRow>,
    /// Per reason that counted a packet since the counters were cleared (why packets were
    /// forwarded, punted, dropped or passed to the host).
    pub reasons: Vec<CounterRow>,
}

/// The connection table.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectionsView {
    /// Connections in the table.
    pub entries: usize,
    /// Its capacity.
    pub capacity: usize,
    /// Entries over capacity, in percent.
    pub occupancy_percent: f64,
    /// Connections installed from learn events since nlbd started.
    pub installed: u64,
    /// New connections per second.
    pub new_per_sec: Option<f64>,
}

/// Counters of one verdict or reason.
#[derive(Debug, Clone, Serialize)]
pub struct CounterRow {
    /// The regmap name.
    pub name: String,
    /// Packets.
    pub packets: u64,
    /// Punted.
    pub punts: u64,
    /// Dropped.
    pub drops: u64,
    /// Packets per second.
    pub packets_per_sec: Option<f64>,
    /// Punts per second.
    pub punts_per_sec: Option<f64>,
    /// Drops per second.
    pub drops_per_sec: Option<f64>,
}

/// One VIP.
#[derive(Debug, Clone, Serialize)]
pub struct VipRow {
    /// The address.
    pub vip: String,
    /// Its forwarding rules.
    pub rules: Vec<String>,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Packets per second.
    pub packets_per_sec: Option<f64>,
    /// Bytes per second.
    pub bytes_per_sec: Option<f64>,
}

/// One forwarding rule.
#[derive(Debug, Clone, Serialize)]
pub struct RuleRow {
    /// Rule name.
    pub name: String,
    /// Its VIP.
    pub vip: String,
    /// TCP or UDP.
    pub protocol: String,
    /// Its port ranges.
    pub ports: Vec<String>,
    /// Its target pool or target instance.
    pub target: String,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Punted.
    pub punts: u64,
    /// Dropped.
    pub drops: u64,
    /// Packets per second.
    pub packets_per_sec: Option<f64>,
    /// Bytes per second.
    pub bytes_per_sec: Option<f64>,
    /// Punts per second.
    pub punts_per_sec: Option<f64>,
    /// Drops per second.
    pub drops_per_sec: Option<f64>,
}

/// One backend in one pool.
#[derive(Debug, Clone, Serialize)]
pub struct BackendRow {
    /// The pool (target pool or target instance); empty if it is in none.
    pub pool: String,
    /// The instance.
    pub backend: String,
    /// `healthy`, `unhealthy`, `unknown` (not decided yet), or `unchecked` (the pool has no
    /// health check).
    pub health: String,
    /// The weight its probe reported, or `not_weighted` / `missing` / `invalid`; empty when
    /// unchecked.
    pub weight: String,
    /// Counted healthy when the serving tables were compiled (`None`: unchecked).
    pub healthy_in_tables: Option<bool>,
    /// Packets sent to it (all its pools together: the NIC counts per backend).
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Packets per second.
    pub packets_per_sec: Option<f64>,
    /// Bytes per second.
    pub bytes_per_sec: Option<f64>,
}

/// One pool.
#[derive(Debug, Clone, Serialize)]
pub struct PoolRow {
    /// Name.
    pub name: String,
    /// Members configured.
    pub members: usize,
    /// Members healthy.
    pub healthy: usize,
    /// The pool whose slice serves.
    pub serving: String,
    /// The backup serves.
    pub failed_over: bool,
}

/// A counter's rate between two samples; `None` without an earlier one. A counter that went
/// down (cleared with `nlbctl stats --clear`, or another nlbd) has no rate either.
fn rate(now: u64, before: Option<u64>, secs: Option<f64>) -> Option<f64> {
    let (before, secs) = (before?, secs?);
    (now >= before && secs > 0.0).then(|| (now - before) as f64 / secs)
}

fn matches(filter: &str, names: &[&str]) -> bool {
    filter.is_empty()
        || names
            .iter()
            .any(|n| n.to_lowercase().contains(&filter.to_lowercase()))
}

/// Sorts rows by `order`: (name, packets/s, bytes/s, packets) of each row.
fn sort<T>(rows: &mut [T], order: &Order, key: impl Fn(&T) -> (String, f64, f64, u64)) {
    rows.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        let by = match order.key {
            SortKey::Name => ka.0.cmp(&kb.0),
            SortKey::Packets => kb.1.total_cmp(&ka.1),
            SortKey::Bytes => kb.2.total_cmp(&ka.2),
            SortKey::Total => kb.3.cmp(&ka.3),
        }
        .then_with(|| ka.0.cmp(&kb.0));
        if order.reverse {
            by.reverse()
        } else {
            by
        }
    });
}

/// The view of `now`, with rates since `before` (if any), sorted and filtered by `order`.
pub fn view(source: &str, now: &Sample, before: Option<&Sample>, order: &Order) -> View {
    let c = &now.counters;
    let prev = before.map(|b| &b.counters);
    let secs = prev.map(|p| c.at_secs - p.at_secs);
    let f = order.filter.as_str();

    let verdicts = counter_rows(&c.verdicts, prev.map(|p| p.verdicts.as_slice()), secs);
    let mut reasons: Vec<CounterRow> =
        counter_rows(&c.reasons, prev.map(|p| p.reasons.as_slice()), secs)
            .into_iter()
            .filter(|r| r.packets > 0 && matches(f, &[&r.name]))
            .collect();
    let mut rules = rule_rows(c, prev, secs);
    let mut vips = vip_rows(&rules, secs, f);
    rules.retain(|r| matches(f, &[&r.name, &r.vip, &r.target]));
    let mut backends = backend_rows(now, prev, secs);
    backends.retain(|b| matches(f, &[&b.backend, &b.pool]));
    sort_rows(order, &mut vips, &mut rules, &mut backends, &mut reasons);

    let s = &now.status;
    let pools = s
        .pools
        .iter()
        .filter(|p| matches(f, &[&p.name]))
        .map(|p| PoolRow {
            name: p.name.clone(),
            members: p.members,
            healthy: p.healthy,
            serving: p.serving.clone(),
            failed_over: p.failed_over,
        })
        .collect();
    View {
        source: source.to_string(),
        device: s.device.clone(),
        profile: s.profile.clone(),
        config_file: s.config_file.clone(),
        config_digest: s.config_digest.clone(),
        generation: c.generation,
        active_bank: s.active_bank,
        load_pending: s.load_pending,
        interval_secs: secs,
        sort: order.key,
        reverse: order.reverse,
        filter: (!order.filter.is_empty()).then(|| order.filter.clone()),
        connections: ConnectionsView {
            entries: c.conntrack_entries,
            capacity: c.conntrack_capacity,
            occupancy_percent: if c.conntrack_capacity == 0 {
                0.0
            } else {
                100.0 * c.conntrack_entries as f64 / c.conntrack_capacity as f64
            },
            installed: c.connections_installed,
            new_per_sec: rate(
                c.connections_installed,
                prev.map(|p| p.connections_installed),
                secs,
            ),
        },
        verdicts,
        vips,
        rules,
        backends,
        pools,
        reasons,
    }
}

/// Rows of named counters (verdicts, reasons), with rates against `old`.
fn counter_rows(
    rows: &[NamedCounters],
    old: Option<&[NamedCounters]>,
    secs: Option<f64>,
) -> Vec<CounterRow> {
    rows.iter()
        .map(|r| {
            let o = old.and_then(|o| o.iter().find(|x| x.name == r.name));
            CounterRow {
                name: r.name.clone(),
                packets: r.packets,
                punts: r.punts,
                drops: r.drops,
                packets_per_sec: rate(r.packets, o.map(|o| o.packets), secs),
                punts_per_sec: rate(r.punts, o.map(|o| o.punts), secs),
                drops_per_sec: rate(r.drops, o.map(|o| o.drops), secs),
            }
        })
        .collect()
}

/// One row per forwarding rule, with rates against `prev`.
fn rule_rows(c: &CountersData, prev: Option<&CountersData>, secs: Option<f64>) -> Vec<RuleRow> {
    c.rules
        .iter()
        .map(|r| {
            let o = prev.and_then(|p| p.rules.iter().find(|x| x.name == r.name));
            RuleRow {
                name: r.name.clone(),
                vip: r.vip.clone(),
                protocol: r.protocol.clone(),
                ports: r.ports.clone(),
                target: r.target.clone(),
                packets: r.packets,
                bytes: r.bytes,
                punts: r.punts,
                drops: r.drops,
                packets_per_sec: rate(r.packets, o.map(|o| o.packets), secs),
                bytes_per_sec: rate(r.bytes, o.map(|o| o.bytes), secs),
                punts_per_sec: rate(r.punts, o.map(|o| o.punts), secs),
                drops_per_sec: rate(r.drops, o.map(|o| o.drops), secs),
            }
        })
        .collect()
}

/// VIPs: the sums of their rules (before filtering: a VIP's numbers do not depend on the
/// filter), then filtered by the VIP or any of its rules.
fn vip_rows(rules: &[RuleRow], secs: Option<f64>, f: &str) -> Vec<VipRow> {
    let mut by_vip: BTreeMap<String, VipRow> = BTreeMap::new();
    for r in rules {
        let v = by_vip.entry(r.vip.clone()).or_insert_with(|| VipRow {
            vip: r.vip.clone(),
            rules: Vec::new(),
            packets: 0,
            bytes: 0,
            packets_per_sec: secs.map(|_| 0.0),
            bytes_per_sec: secs.map(|_| 0.0),
        });
        v.rules.push(r.name.clone());
        v.packets += r.packets;
        v.bytes += r.bytes;
        v.packets_per_sec = v.packets_per_sec.zip(r.packets_per_sec).map(|(a, b)| a + b);
        v.bytes_per_sec = v.bytes_per_sec.zip(r.bytes_per_sec).map(|(a, b)| a + b);
    }
    by_vip
        .into_values()
        .filter(|v| {
            let mut names: Vec<&str> = v.rules.iter().map(String::as_str).collect();
            names.push(&v.vip);
            matches(f, &names)
        })
        .collect()
}

/// Backends: one row per (pool, backend); health from the checker where the pool has a
/// check.
fn backend_rows(now: &Sample, prev: Option<&CountersData>, secs: Option<f64>) -> Vec<BackendRow> {
    let mut backends = Vec::new();
    for b in &now.counters.backends {
        let o = prev.and_then(|p| p.backends.iter().find(|x| x.name == b.name));
        let pools: Vec<String> = if b.pools.is_empty() {
            vec![String::new()]
        } else {
            b.pools.clone()
        };
        for pool in pools {
            let target = now
                .health
                .targets
                .iter()
                .find(|t| t.pool == pool && t.backend == b.name);
            let member = now
                .health
                .members
                .iter()
                .find(|m| m.pool == pool && m.instance == b.name);
            backends.push(BackendRow {
                health: target.map_or_else(|| "unchecked".into(), |t| t.health.clone()),
                weight: target.map_or_else(String::new, |t| t.weight.clone()),
                healthy_in_tables: member.map(|m| m.healthy),
                pool,
                backend: b.name.clone(),
                packets: b.packets,
                bytes: b.bytes,
                packets_per_sec: rate(b.packets, o.map(|o| o.packets), secs),
                bytes_per_sec: rate(b.bytes, o.map(|o| o.bytes), secs),
            });
        }
    }
    backends
}

/// Every table of the view sorted by `order`.
fn sort_rows(
    order: &Order,
    vips: &mut [VipRow],
    rules: &mut [RuleRow],
    backends: &mut [BackendRow],
    reasons: &mut [CounterRow],
) {
    let zero = |r: Option<f64>| r.unwrap_or(0.0);
    sort(vips, order, |v| {
        (
            v.vip.clone(),
            zero(v.packets_per_sec),
            zero(v.bytes_per_sec),
            v.packets,
        )
    });
    sort(rules, order, |r| {
        (
            r.name.clone(),
            zero(r.packets_per_sec),
            zero(r.bytes_per_sec),
            r.packets,
        )
    });
    sort(backends, order, |b| {
        (
            format!("{}/{}", b.backend, b.pool),
            zero(b.packets_per_sec),
            zero(b.bytes_per_sec),
            b.packets,
        )
    });
    sort(reasons, order, |r| {
        (r.name.clone(), zero(r.packets_per_sec), 0.0, r.packets)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_need_two_samples_and_a_counter_that_did_not_go_down() {
        assert_eq!(rate(10, None, Some(1.0)), None);
        assert_eq!(rate(10, Some(4), None), None);
        assert_eq!(rate(10, Some(4), Some(2.0)), Some(3.0));
        assert_eq!(rate(3, Some(4), Some(2.0)), None, "cleared counters");
        assert_eq!(rate(4, Some(4), Some(0.0)), None, "no time passed");
    }

    #[test]
    fn the_filter_ignores_case_and_matches_any_name() {
        assert!(matches("", &["x"]));
        assert!(matches("WeB", &["dns", "web-http"]));
        assert!(!matches("game", &["dns", "web"]));
    }
}
