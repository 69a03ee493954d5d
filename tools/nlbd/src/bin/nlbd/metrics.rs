//! Prometheus text metrics (format 0.0.4) on a hyper HTTP/1.1 server bound to 127.0.0.1 by
//! default: `GET /metrics`.
//!
//! Each scrape asks the engine for its state and the device's counters (one register batch
//! per counter kind) and reads the health checker's counters and snapshot.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use nlb_hw::enums::Reason;
use nlbd::engine::{CounterValues, EngineStatus};
use nlbd::health::{Health, HealthSnapshot, LatencyHistogram, ProbeMetrics, WeightReport};
use nlbd::punt::PuntDrop;
use std::fmt::Write as _;
use std::sync::Arc;
use tokio::net::TcpListener;

use crate::fleet::FleetMetrics;
use crate::Daemon;
use std::sync::atomic::Ordering;

/// Escapes a label value.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Builds the exposition text.
#[derive(Debug, Default)]
pub struct Text {
    out: String,
}

impl Text {
    /// `# HELP` and `# TYPE` of a family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        if value.is_finite() && value.fract() == 0.0 && value.abs() < 9.0e15 {
            let _ = writeln!(self.out, " {}", value as i64);
        } else {
            let _ = writeln!(self.out, " {value}");
        }
    }

    /// A family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A histogram family.
    pub fn histogram(&mut self, name: &str, help: &str, h: &LatencyHistogram) {
        self.family(name, "histogram", help);
        let cumulative = h.cumulative();
        for (i, c) in cumulative.iter().enumerate() {
            let le = h
                .bounds_seconds
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            self.sample(&format!("{name}_bucket"), &[("le", &le)], *c as f64);
        }
        self.sample(&format!("{name}_sum"), &[], h.sum.as_secs_f64());
        self.sample(&format!("{name}_count"), &[], h.count as f64);
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// One counter field: (metric suffix, help text, accessor).
type CounterField = (&'static str, &'static str, fn(&CounterValues) -> u64);

fn counters(t: &mut Text, prefix: &str, what: &str, label: &str, rows: &[(String, CounterValues)]) {
    let fields: [CounterField; 4] = [
        ("packets", "packets", |c| c.packets),
        ("bytes", "bytes (received length)", |c| c.bytes),
        ("punts", "packets punted to the host", |c| c.punts),
        ("drops", "packets dropped", |c| c.drops),
    ];
    for (field, help, get) in fields {
        let name = format!("{prefix}_{field}_total");
        t.family(&name, "counter", &format!("NIC counter: {help} per {what}"));
        for (n, c) in rows {
            t.sample(&name, &[(label, n)], get(c) as f64);
        }
    }
}

/// Renders every metric; `refused_early` counts reloads refused before the engine saw them.
/// One section per part of the daemon, in the order a reader of `/metrics` meets them.
pub fn render(
    status: &EngineStatus,
    probes: &ProbeMetrics,
    snapshot: &HealthSnapshot,
    refused_early: u64,
    fleet: Option<&FleetMetrics>,
) -> String {
    let mut t = Text::default();
    identity(&mut t, status);
    tables(&mut t, status, refused_early);
    if let Some(f) = fleet {
        fleet_section(&mut t, f);
    }
    pools(&mut t, status);
    services(&mut t, status);
    health(&mut t, probes, snapshot);
    pcie(&mut t, status);
    connections(&mut t, status);
    punts(&mut t, status);
    nic_counters(&mut t, status);
    t.finish()
}

/// The fleet (`--etcd`, docs/fleet.md): the revision serving, etcd's reachability, and whether
/// the hosts on this revision serve the same tables.
fn fleet_section(t: &mut Text, f: &FleetMetrics) {
    let get = |a: &std::sync::atomic::AtomicI64| a.load(Ordering::Relaxed) as f64;
    let count = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    let flag = |a: &std::sync::atomic::AtomicBool| f64::from(u8::from(a.load(Ordering::Relaxed)));
    t.single(
        "nlb_fleet_revision",
        "gauge",
        "Revision of the fleet's configuration this host serves",
        get(&f.revision),
    );
    t.single(
        "nlb_fleet_live_revision",
        "gauge",
        "Newest revision of the configuration seen in etcd",
        get(&f.live_revision),
    );
    t.single(
        "nlb_fleet_etcd_up",
        "gauge",
        "1 while the session with etcd is up (0: serving the last revision, fail static)",
        flag(&f.etcd_up),
    );
    t.single(
        "nlb_fleet_registered",
        "gauge",
        "1 while this host's record is written under a live lease",
        flag(&f.registered),
    );
    t.single(
        "nlb_fleet_hosts",
        "gauge",
        "Hosts registered in the fleet at the latest read",
        count(&f.hosts),
    );
    t.single(
        "nlb_fleet_hosts_on_revision",
        "gauge",
        "Registered hosts serving this host's revision, this one included",
        count(&f.hosts_on_revision),
    );
    t.single("nlb_fleet_digest_mismatch_hosts", "gauge", "Hosts serving this host's revision with other tables (a digest mismatch: ECMP would send a flow to different backends)", count(&f.mismatched_hosts));
    t.single(
        "nlb_fleet_digest_mismatch",
        "gauge",
        "1 when a host serving this host's revision holds other tables",
        f64::from(u8::from(f.mismatched_hosts.load(Ordering::Relaxed) > 0)),
    );
    t.single(
        "nlb_fleet_revisions_applied_total",
        "counter",
        "Revisions applied, the first included",
        count(&f.applied),
    );
    t.single(
        "nlb_fleet_revisions_refused_total",
        "counter",
        "Revisions refused (the previous one kept serving)",
        count(&f.refused),
    );
    t.single(
        "nlb_fleet_etcd_session_failures_total",
        "counter",
        "Sessions with etcd lost (each followed by a new one that catches up)",
        count(&f.session_failures),
    );
    t.single(
        "nlb_fleet_probing_targets",
        "gauge",
        "Health-check targets this host probes for the fleet (shared health; 0 without)",
        count(&f.probing),
    );
    t.single(
        "nlb_fleet_ignored_keys",
        "gauge",
        "Keys under the fleet's prefix that nlbctl and nlbd do not write, or whose values do not decode: skipped, each logged once",
        count(&f.ignored_keys),
    );
    t.single(
        "nlb_fleet_health_report_writes_total",
        "counter",
        "Health reports this host wrote to or deleted from etcd (shared health)",
        count(&f.reports_written),
    );
    t.family(
        "nlb_fleet_table_changes_total",
        "counter",
        "Changes of the tables in the fleet (a revision or health decisions) by how they loaded: shared (every host prepared them and installed what the others' would pin first), waited_too_long (loaded after the longest wait), unchanged (no other tables)",
    );
    for (outcome, n) in [
        ("shared", &f.changes_shared),
        ("waited_too_long", &f.changes_timed_out),
        ("unchanged", &f.changes_unchanged),
    ] {
        t.sample(
            "nlb_fleet_table_changes_total",
            &[("outcome", outcome)],
            count(n),
        );
    }
    t.single(
        "nlb_fleet_table_change_wait_seconds",
        "gauge",
        "How long the last change of the tables waited for the fleet to prepare it",
        count(&f.change_wait_us) / 1e6,
    );
}

/// What nlbd serves and since when.
fn identity(t: &mut Text, status: &EngineStatus) {
    t.family("nlbd_info", "gauge", "What nlbd serves (value 1)");
    t.sample(
        "nlbd_info",
        &[
            ("device", &status.device),
            ("profile", status.profile),
            ("config_file", &status.config_file),
            ("config_digest", &status.config_digest),
        ],
        1.0,
    );
    t.single(
        "nlbd_uptime_seconds",
        "gauge",
        "Seconds since the engine started",
        status.uptime.as_secs_f64(),
    );
}

/// The table loads and configuration reloads.
fn tables(t: &mut Text, status: &EngineStatus, refused_early: u64) {
    let c = &status.controller;
    t.single(
        "nlbd_table_generation",
        "gauge",
        "Generation of the table serving",
        f64::from(status.generation),
    );
    t.single(
        "nlbd_table_active_bank",
        "gauge",
        "Bank serving",
        f64::from(status.active_bank),
    );
    t.single(
        "nlbd_table_loads_total",
        "counter",
        "Successful table loads",
        c.loads as f64,
    );
    t.single(
        "nlbd_table_load_errors_total",
        "counter",
        "Failed table loads (the previous table kept serving)",
        c.load_errors as f64,
    );
    t.single(
        "nlbd_table_entries_written_total",
        "counter",
        "Table entries written by delta loads",
        c.entries_written as f64,
    );
    t.single(
        "nlbd_table_load_pending",
        "gauge",
        "1 while a failed load waits for its retry",
        f64::from(u8::from(status.load_pending)),
    );
    if let Some(l) = &c.last_load {
        t.single(
            "nlbd_table_last_load_seconds",
            "gauge",
            "Duration of the last load",
            l.elapsed.as_secs_f64(),
        );
        t.single(
            "nlbd_table_last_load_entries",
            "gauge",
            "Entries written by the last load",
            l.changed_entries as f64,
        );
    }
    t.histogram(
        "nlbd_decision_to_active_seconds",
        "Time from the deciding health probe to the new table serving",
        &c.decision_latency,
    );
    t.single(
        "nlbd_decision_to_active_max_seconds",
        "gauge",
        "Largest decision-to-active time seen",
        c.decision_latency_max.as_secs_f64(),
    );
    t.single(
        "nlbd_health_batches_total",
        "counter",
        "Health change batches applied",
        c.health_batches as f64,
    );
    t.family(
        "nlbd_config_reloads_total",
        "counter",
        "Configuration reloads by result",
    );
    t.sample(
        "nlbd_config_reloads_total",
        &[("result", "applied")],
        c.reloads as f64,
    );
    t.sample(
        "nlbd_config_reloads_total",
        &[("result", "refused")],
        (c.reloads_refused + refused_early) as f64,
    );
}

/// Membership, health counts and failover per pool.
fn pools(t: &mut Text, status: &EngineStatus) {
    t.family("nlbd_pool_members", "gauge", "Members of a pool");
    for p in &status.pools {
        t.sample("nlbd_pool_members", &[("pool", &p.name)], p.members as f64);
    }
    t.family("nlbd_pool_healthy", "gauge", "Healthy members of a pool");
    for p in &status.pools {
        t.sample("nlbd_pool_healthy", &[("pool", &p.name)], p.healthy as f64);
    }
    t.family(
        "nlbd_pool_eligible",
        "gauge",
        "Members taking new connections (fail open counts all)",
    );
    for p in &status.pools {
        t.sample(
            "nlbd_pool_eligible",
            &[("pool", &p.name)],
            p.eligible.len() as f64,
        );
    }
    t.family(
        "nlbd_pool_failed_over",
        "gauge",
        "1 when the backup pool serves",
    );
    for p in &status.pools {
        t.sample(
            "nlbd_pool_failed_over",
            &[("pool", &p.name)],
            f64::from(u8::from(p.failed_over)),
        );
    }

    t.family(
        "nlbd_pool_failover_ratio",
        "gauge",
        "failoverRatio of a pool with a backup: the backup serves when healthy members <= ratio x members",
    );
    for (pool, ratio) in &status.failover_ratios {
        t.sample("nlbd_pool_failover_ratio", &[("pool", pool)], *ratio);
    }
}

/// The service LB policy of backend services (SPEC R6): per group its live connections,
/// capacity, utilisation, share and drain; the refreshes and the weight changes they applied.
/// Nothing without backend services. A group of a service without any capacity (no
/// `maxConnections*`) has no capacity or utilisation series: it has no limit.
fn services(t: &mut Text, status: &EngineStatus) {
    if status.services.is_empty() {
        return;
    }
    let data: Vec<_> = status.services.iter().map(crate::admin::service).collect();
    type Field = (
        &'static str,
        &'static str,
        fn(&nlb_control::admin_proto::ServiceGroupData) -> Option<f64>,
    );
    let fields: [Field; 6] = [
        (
            "nlbd_service_group_live_connections",
            "Open connections of a backend service's group at the latest policy refresh",
            |g| Some(g.live as f64),
        ),
        (
            "nlbd_service_group_capacity_connections",
            "Target capacity of a group: max connections x capacityScaler (absent: no limit)",
            |g| g.capacity,
        ),
        (
            "nlbd_service_group_utilisation_ratio",
            "Live connections / capacity of a group (absent: no limit)",
            |g| g.utilisation,
        ),
        (
            "nlbd_service_group_share_ratio",
            "Share of new connections the tables give a group (its Maglev weights)",
            |g| Some(g.share),
        ),
        (
            "nlbd_service_group_drained",
            "1 while the automatic capacity drain drains a group",
            |g| Some(f64::from(u8::from(g.drained))),
        ),
        (
            "nlbd_service_group_below_threshold",
            "1 while a group's healthy share is below the failover threshold",
            |g| Some(f64::from(u8::from(g.below_threshold))),
        ),
    ];
    for (name, help, get) in fields {
        t.family(name, "gauge", help);
        for s in &data {
            for g in &s.groups {
                if let Some(v) = get(g) {
                    t.sample(
                        name,
                        &[("service", &s.name), ("group", &g.name), ("zone", &g.zone)],
                        v,
                    );
                }
            }
        }
    }
    let p = &status.policy;
    t.single(
        "nlbd_service_policy_refreshes_total",
        "counter",
        "Refreshes of the service LB policy (live counts to weights)",
        p.refreshes as f64,
    );
    t.single(
        "nlbd_service_weight_changes_total",
        "counter",
        "Weight changes of backend services loaded into the NIC (one per service per refresh that changed it)",
        p.weight_changes as f64,
    );
    t.single(
        "nlbd_service_policy_entries_changed_total",
        "counter",
        "Table entries rewritten by weight changes",
        p.entries_changed as f64,
    );
    t.single(
        "nlbd_service_policy_deferred_total",
        "counter",
        "Backend services whose weight change waited for a later refresh (one refresh's refill budget spent)",
        p.deferred as f64,
    );
    t.histogram(
        "nlbd_service_policy_refresh_seconds",
        "Duration of a policy refresh: counting, deciding, recompiling and loading",
        &p.refresh_duration,
    );
    t.single(
        "nlbd_service_policy_refresh_interval_seconds",
        "gauge",
        "Period of the policy refresh (--policy-refresh)",
        status.policy_refresh.as_secs_f64(),
    );
}

/// Health and weight per (pool, backend), and the prober's own figures.
fn health(t: &mut Text, probes: &ProbeMetrics, snapshot: &HealthSnapshot) {
    t.family(
        "nlbd_backend_health",
        "gauge",
        "Health state of a (pool, backend) target: 1 for its state",
    );
    for s in &snapshot.targets {
        let state = match s.health {
            Health::Healthy => "healthy",
            Health::Unhealthy => "unhealthy",
            Health::Unknown => "unknown",
        };
        for st in ["healthy", "unhealthy", "unknown"] {
            t.sample(
                "nlbd_backend_health",
                &[
                    ("pool", &s.target.key.pool),
                    ("backend", &s.target.key.backend),
                    ("state", st),
                ],
                f64::from(u8::from(st == state)),
            );
        }
    }
    t.family(
        "nlbd_backend_weight",
        "gauge",
        "Weight reported by X-Load-Balancing-Endpoint-Weight",
    );
    for s in &snapshot.targets {
        if let WeightReport::Weight(w) = s.weight {
            t.sample(
                "nlbd_backend_weight",
                &[
                    ("pool", &s.target.key.pool),
                    ("backend", &s.target.key.backend),
                ],
                f64::from(w),
            );
        }
    }
    t.histogram(
        "nlbd_probe_latency_seconds",
        "Health probe latency, pass or fail",
        &probes.latency,
    );
    t.single(
        "nlbd_probe_passes_total",
        "counter",
        "Health probes passed",
        probes.passes as f64,
    );
    t.family(
        "nlbd_probe_failures_total",
        "counter",
        "Health probes failed, by reason",
    );
    for (label, n) in &probes.failures {
        t.sample("nlbd_probe_failures_total", &[("reason", label)], *n as f64);
    }
    t.single(
        "nlbd_probes_in_flight",
        "gauge",
        "Health probes running",
        probes.in_flight as f64,
    );
    t.single(
        "nlbd_probes",
        "gauge",
        "Distinct probes (IP, port, path, Host)",
        probes.probes as f64,
    );
    t.single(
        "nlbd_health_targets",
        "gauge",
        "Health targets (pool, backend)",
        probes.targets as f64,
    );
}

/// The connection table and the learn queue.
/// The host interface on the PCIe cost model (docs/pcie.md, SPEC R12).
fn pcie(t: &mut Text, status: &EngineStatus) {
    let p = &status.pcie;
    let m = &status.mmio;
    t.single(
        "nlbd_host_rings",
        "gauge",
        "1 when punted frames and events go through the host rings (DMA)",
        f64::from(u8::from(status.rings)),
    );
    t.single(
        "nlbd_host_rings_carried",
        "gauge",
        "Host rings the device carries: 2 punt and event, 3 and injected frames, 4 and table writes (0 without rings)",
        status.carried.len() as f64,
    );
    t.single(
        "nlbd_hw_learning",
        "gauge",
        "1 when the NIC installs the connections it learns",
        f64::from(u8::from(status.hw_learn)),
    );
    t.family(
        "nlbd_mmio_total",
        "counter",
        "Register accesses of the slow path, by kind",
    );
    t.sample("nlbd_mmio_total", &[("kind", "read")], p.mmio_reads as f64);
    t.sample(
        "nlbd_mmio_total",
        &[("kind", "write")],
        p.mmio_writes as f64,
    );
    t.family(
        "nlbd_mmio_reads_total",
        "counter",
        "Register reads by the work they served (the hot paths make none with the rings)",
    );
    for (path, n) in [
        ("events", m.event_reads),
        ("punts", m.punt_reads),
        ("loads", m.load_reads),
    ] {
        t.sample("nlbd_mmio_reads_total", &[("path", path)], n as f64);
    }
    t.family(
        "nlbd_mmio_work_total",
        "counter",
        "Work the register reads above served: events, punted frames, installed connections, loaded table entries",
    );
    for (what, n) in [
        ("events", m.events),
        ("punts", m.punts),
        ("installs", m.installs),
        ("entries", m.entries),
    ] {
        t.sample("nlbd_mmio_work_total", &[("work", what)], n as f64);
    }
    t.family(
        "nlbd_dma_bytes_total",
        "counter",
        "Bytes the NIC moved by DMA, by direction",
    );
    t.sample(
        "nlbd_dma_bytes_total",
        &[("direction", "to_host")],
        p.dma_write_bytes as f64,
    );
    t.sample(
        "nlbd_dma_bytes_total",
        &[("direction", "to_device")],
        p.dma_read_bytes as f64,
    );
    t.single(
        "nlbd_msix_interrupts_total",
        "counter",
        "MSI-X interrupts of the host rings",
        p.interrupts as f64,
    );
    t.single(
        "nlbd_pcie_mmio_stall_seconds_total",
        "counter",
        "CPU stalled on register accesses, on the PCIe cost model",
        p.mmio_stall_ns / 1e9,
    );
    t.single(
        "nlbd_pcie_link_seconds_total",
        "counter",
        "Link time of the DMA (its busier direction), on the PCIe cost model",
        p.link_ns() / 1e9,
    );
}

fn connections(t: &mut Text, status: &EngineStatus) {
    let l = &status.learn;
    t.single(
        "nlbd_conntrack_entries",
        "gauge",
        "Connections in the NIC's table",
        status.conntrack_entries as f64,
    );
    t.single(
        "nlbd_conntrack_capacity",
        "gauge",
        "Capacity of the NIC's connection table",
        status.conntrack_capacity as f64,
    );
    t.single(
        "nlbd_conntrack_draining_pairs",
        "gauge",
        "(rule, backend) pairs whose connections drain (connection draining, failover)",
        status.draining_pairs as f64,
    );
    t.single(
        "nlbd_conntrack_kept_backends",
        "gauge",
        "Deleted instances whose backend entries stay while their connections drain",
        status.kept_backends as f64,
    );
    let p = &status.pinned;
    t.family(
        "nlbd_pinned_connections",
        "gauge",
        "Connections on a backend the tables no longer choose: this host's own (published to the fleet) and copies of other hosts'",
    );
    t.sample("nlbd_pinned_connections", &[("kind", "own")], p.own as f64);
    t.sample(
        "nlbd_pinned_connections",
        &[("kind", "copy")],
        p.copies as f64,
    );
    t.family(
        "nlbd_pinned_copies_total",
        "counter",
        "Copies of other hosts' pinned connections by what became of them",
    );
    for (what, n) in [
        ("installed", p.copies_installed),
        ("adopted", p.adopted),
        ("lapsed", p.lapsed),
    ] {
        t.sample("nlbd_pinned_copies_total", &[("outcome", what)], n as f64);
    }
    t.family(
        "nlbd_pinned_copies_refused",
        "gauge",
        "Other hosts' pinned connections not installed here at the last installation, by reason",
    );
    for (why, n) in [
        ("conflict", p.conflicts),
        ("bucket_full", p.bucket_full),
        ("unknown_name", p.unknown_names),
    ] {
        t.sample("nlbd_pinned_copies_refused", &[("reason", why)], n as f64);
    }
    t.family(
        "nlbd_learn_events_total",
        "counter",
        "Events from the NIC's learn queue",
    );
    t.sample(
        "nlbd_learn_events_total",
        &[("event", "learn")],
        l.learn_events as f64,
    );
    t.sample(
        "nlbd_learn_events_total",
        &[("event", "teardown")],
        l.teardown_events as f64,
    );
    t.family(
        "nlbd_conntrack_installs_total",
        "counter",
        "Learn events by outcome",
    );
    for (o, n) in [
        ("new", l.installed),
        ("present", l.already_present),
        ("replaced", l.replaced),
        ("bucket_full", l.bucket_full),
        ("left_to_nic", l.left_to_nic),
    ] {
        t.sample("nlbd_conntrack_installs_total", &[("outcome", o)], n as f64);
    }
    t.family(
        "nlbd_conntrack_evictions_total",
        "counter",
        "Connections removed, by cause",
    );
    for (o, n) in [
        ("idle", l.aged_out),
        ("unhealthy_backend", l.evicted_unhealthy),
        ("reload", l.evicted_reload),
        ("drained", l.evicted_drained),
        ("failover", l.evicted_failover),
    ] {
        t.sample("nlbd_conntrack_evictions_total", &[("cause", o)], n as f64);
    }
    t.single(
        "nlbd_conntrack_closed_total",
        "counter",
        "Flows marked closed by FIN/RST",
        l.closed as f64,
    );
    t.single(
        "nlbd_conntrack_remapped_total",
        "counter",
        "Connections renumbered by reloads",
        l.remapped as f64,
    );
    t.single(
        "nlbd_learn_queue_overflows_total",
        "counter",
        "Times the NIC's learn queue overflowed",
        l.queue_overflows as f64,
    );
}

/// Punted frames, fragments, and register access failures.
fn punts(t: &mut Text, status: &EngineStatus) {
    let p = &status.punts;
    t.family(
        "nlbd_punts_total",
        "counter",
        "Frames the NIC punted to nlbd, by reason",
    );
    for r in Reason::ALL {
        let n = p.by_reason[r.value() as usize];
        if n > 0 || r == Reason::FragmentNeedsState {
            t.sample("nlbd_punts_total", &[("reason", r.name())], n as f64);
        }
    }
    t.family(
        "nlbd_punt_drops_total",
        "counter",
        "Punted frames nlbd dropped, by why",
    );
    for d in PuntDrop::ALL {
        t.sample(
            "nlbd_punt_drops_total",
            &[("why", d.label())],
            p.dropped(d) as f64,
        );
    }
    t.single(
        "nlbd_injected_total",
        "counter",
        "Frames injected to backends",
        p.injected as f64,
    );
    t.single(
        "nlbd_icmp_injected_total",
        "counter",
        "ICMP errors injected to their flow's backend",
        p.icmp_injected as f64,
    );
    t.single(
        "nlbd_punt_queue_overflows_total",
        "counter",
        "Times the NIC's punt queue overflowed",
        p.queue_overflows as f64,
    );
    let f = &status.fragments;
    t.family("nlbd_fragments_total", "counter", "Fragment tracker events");
    for (o, n) in [
        ("first", f.first_seen),
        ("followed", f.followed),
        ("buffered", f.buffered),
        ("released", f.released),
        ("overflow_drop", f.overflow_drops),
        ("timeout_drop", f.timeout_drops),
        ("expired", f.expired),
        ("evicted", f.evicted),
    ] {
        t.sample("nlbd_fragments_total", &[("outcome", o)], n as f64);
    }
    t.single(
        "nlbd_fragment_datagrams",
        "gauge",
        "Datagrams the fragment tracker remembers",
        status.fragment_datagrams as f64,
    );
    t.single(
        "nlbd_fragment_buffered_bytes",
        "gauge",
        "Bytes of early fragments buffered",
        status.fragment_buffered_bytes as f64,
    );
    t.single(
        "nlbd_device_errors_total",
        "counter",
        "Register access failures",
        status.device_errors as f64,
    );
}

/// The NIC's own counters block (absent until the engine has read it once).
fn nic_counters(t: &mut Text, status: &EngineStatus) {
    if let Some(dc) = &status.counters {
        counters(t, "nlb_rule", "forwarding rule", "rule", &dc.rules);
        counters(t, "nlb_backend", "backend", "backend", &dc.backends);
        let reasons: Vec<(String, CounterValues)> = dc
            .reasons
            .iter()
            .map(|(n, c)| (n.to_string(), *c))
            .collect();
        counters(t, "nlb_reason", "reason", "reason", &reasons);
        let verdicts: Vec<(String, CounterValues)> = dc
            .verdicts
            .iter()
            .map(|(n, c)| (n.to_string(), *c))
            .collect();
        counters(t, "nlb_verdict", "verdict", "verdict", &verdicts);
    }
}

fn reply(status: StatusCode, body: String, content_type: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

async fn serve(
    daemon: Arc<Daemon>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    if req.method() != Method::GET {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET only\n".into(),
            "text/plain",
        ));
    }
    match req.uri().path() {
        "/metrics" => match daemon.engine_status(true).await {
            Ok(status) => {
                let mut text = render(
                    &status,
                    &daemon.checker.metrics(),
                    &daemon.checker.snapshot(),
                    daemon
                        .refused_early
                        .load(std::sync::atomic::Ordering::Relaxed),
                    daemon.fleet.as_deref(),
                );
                if let Some(view) = daemon.announce.view() {
                    let mut t = Text::default();
                    bgp(&mut t, &view);
                    text.push_str(&t.finish());
                }
                Ok(reply(
                    StatusCode::OK,
                    text,
                    "text/plain; version=0.0.4; charset=utf-8",
                ))
            }
            Err(e) => Ok(reply(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{e}\n"),
                "text/plain",
            )),
        },
        "/" => Ok(reply(
            StatusCode::OK,
            "nlbd: metrics at /metrics\n".into(),
            "text/plain",
        )),
        _ => Ok(reply(
            StatusCode::NOT_FOUND,
            "not found; metrics at /metrics\n".into(),
            "text/plain",
        )),
    }
}

/// Serves metrics until the task is aborted.
pub async fn run(listener: TcpListener, daemon: Arc<Daemon>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let daemon = daemon.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| serve(daemon.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The `nlbd_bgp_*` metrics.
fn bgp(t: &mut Text, view: &nlb_control::admin_proto::BgpData) {
    t.family(
        "nlbd_bgp_vip_announced",
        "gauge",
        "1 when nlbd asks its BGP neighbours to carry the VIP's host route, 0 when it withholds it",
    );
    for v in &view.vips {
        let on = view.announcing.contains(v);
        t.sample(
            "nlbd_bgp_vip_announced",
            &[("vip", v)],
            f64::from(u8::from(on)),
        );
    }
    t.single(
        "nlbd_bgp_withheld_reasons",
        "gauge",
        "Reasons nothing is announced now (0: every VIP served is announced; nlbctl status says which)",
        view.withheld.len() as f64,
    );
    t.single(
        "nlbd_bgp_drained",
        "gauge",
        "1 while the host is drained (nlbctl drain)",
        f64::from(u8::from(view.draining)),
    );
    t.family(
        "nlbd_bgp_neighbor_up",
        "gauge",
        "1 while the BGP session with the neighbour is Established",
    );
    for n in &view.neighbors {
        let up = n.state == "Established";
        t.sample(
            "nlbd_bgp_neighbor_up",
            &[("neighbor", &n.neighbor)],
            f64::from(u8::from(up)),
        );
    }
    t.family(
        "nlbd_bgp_neighbor_announced_routes",
        "gauge",
        "Routes the neighbour has from nlbd now",
    );
    for n in &view.neighbors {
        t.sample(
            "nlbd_bgp_neighbor_announced_routes",
            &[("neighbor", &n.neighbor)],
            n.announced.len() as f64,
        );
    }
    t.family(
        "nlbd_bgp_sessions_established_total",
        "counter",
        "BGP sessions established with the neighbour since nlbd started",
    );
    for n in &view.neighbors {
        t.sample(
            "nlbd_bgp_sessions_established_total",
            &[("neighbor", &n.neighbor)],
            n.established_total as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_integers_plain() {
        let mut t = Text::default();
        t.family("x_total", "counter", "help");
        t.sample("x_total", &[("a", "q\"b\\c\nd")], 3.0);
        t.sample("y", &[], 0.25);
        assert_eq!(
            t.finish(),
            "# HELP x_total help\n# TYPE x_total counter\nx_total{a=\"q\\\"b\\\\c\\nd\"} 3\ny 0.25\n"
        );
    }
}
