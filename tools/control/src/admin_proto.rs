//! The admin socket protocol of nlbd: what `nlbd` answers (`tools/nlbd/src/bin/nlbd/admin.rs`) and
//! `nlbctl status|health|conntrack|top|explain` ask (`tools/nlbctl/src/admin.rs`).
//!
//! A client connects to the Unix socket (mode 0600, so only nlbd's user), writes one request as
//! one JSON line and reads one JSON reply line; then the connection closes.
//!
//! ```text
//! → {"command":"health"}
//! ← {"ok":true,"data":{...}}        or {"ok":false,"error":"why"}
//! ```
use serde::{Deserialize, Serialize};

/// Where nlbd listens and nlbctl connects by default.
pub const DEFAULT_SOCKET: &str = "/run/nlbd.sock";

/// Largest request line accepted.
pub const MAX_REQUEST: usize = 4096;

/// A request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Request {
    /// Device, tables, configuration, pools, counters of the daemon.
    Status,
    /// Every health target and the per-instance health the tables were compiled with.
    Health,
    /// The connection table.
    Conntrack {
        /// Most entries listed.
        limit: usize,
        /// First entry index listed: 0, or the `next` of the page before (a long listing goes
        /// page by page).
        #[serde(default)]
        from: u32,
    },
    /// The NIC's counters by name, with what the names mean (a rule's VIP, an instance's
    /// pools): what `nlbctl top` turns into rates.
    Counters,
    /// Where a new connection of a flow goes in the tables serving, and why (`nlbctl explain
    /// --socket`): a backend service's decision with the live counts. The answer is a
    /// `flowtable_compiler::Explanation`.
    Explain {
        /// IP protocol number.
        protocol: u8,
        /// Client address.
        src: std::net::IpAddr,
        /// Client port.
        src_port: u16,
        /// VIP.
        dst: std::net::IpAddr,
        /// VIP port.
        dst_port: u16,
        /// `no` (a whole packet), `first` or `later` (a fragment).
        #[serde(default = "whole_packet")]
        fragment: String,
    },
    /// Withdraws every VIP from the BGP neighbours and keeps them withdrawn (`drain: true`),
    /// or lets them be announced again (`false`), on this host alone (a fleet host is drained
    /// through etcd: `nlbctl drain HOST`). The answer is a [`BgpData`].
    Drain {
        /// Drain (true) or undrain (false).
        drain: bool,
    },
}

fn whole_packet() -> String {
    "no".into()
}

/// A reply envelope.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply<T> {
    /// Whether `data` holds the answer.
    pub ok: bool,
    /// The answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<T>,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusData {
    /// The device spec.
    pub device: String,
    /// Capacity profile.
    pub profile: String,
    /// Configuration file.
    pub config_file: String,
    /// Digest prefix of the configuration serving.
    pub config_digest: String,
    /// Generation serving.
    pub generation: u32,
    /// Bank serving.
    pub active_bank: u8,
    /// A failed load waits for its retry.
    pub load_pending: bool,
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Prometheus endpoint.
    pub metrics_addr: Option<String>,
    /// Successful loads.
    pub loads: u64,
    /// Failed loads.
    pub load_errors: u64,
    /// Reloads applied.
    pub reloads: u64,
    /// Reloads refused or failed.
    pub reloads_refused: u64,
    /// Health decisions applied to tables.
    pub decisions: u64,
    /// Worst decision-to-table-active latency, milliseconds.
    pub decision_latency_max_ms: f64,
    /// Mean decision-to-table-active latency, milliseconds.
    pub decision_latency_mean_ms: f64,
    /// Health targets still on their start-up assumption.
    pub assumed_targets: usize,
    /// Connections in the table.
    pub conntrack_entries: usize,
    /// Its capacity.
    pub conntrack_capacity: usize,
    /// Learn events handled.
    pub learn_events: u64,
    /// Punted frames handled.
    pub punts: u64,
    /// Frames injected.
    pub injected: u64,
    /// Register access failures.
    pub device_errors: u64,
    /// Per pool.
    pub pools: Vec<PoolData>,
    /// Period of the service LB policy's refresh, milliseconds.
    #[serde(default)]
    pub policy_refresh_ms: f64,
    /// Policy refreshes run (only with backend services).
    #[serde(default)]
    pub policy_refreshes: u64,
    /// Weight changes of backend services loaded into the NIC.
    #[serde(default)]
    pub weight_changes: u64,
    /// Per backend service: the policy's view of its groups (SPEC R6).
    #[serde(default)]
    pub services: Vec<ServiceData>,
    /// The VIPs announced by BGP (None: no `bgp` section).
    #[serde(default)]
    pub bgp: Option<BgpData>,
    /// The host interface on the PCIe cost model (SPEC R12, docs/pcie.md).
    #[serde(default)]
    pub pcie: PcieData,
    /// Connections pinned to a backend the tables no longer choose (SPEC R15.2).
    #[serde(default)]
    pub pinned: PinnedData,
}

/// Connections pinned to a backend the tables no longer choose, shared across a fleet (SPEC
/// R15.2, docs/fleet.md "Pinned connections").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedData {
    /// This host's pinned connections (published with `--etcd`).
    pub own: u64,
    /// Other hosts' pinned connections installed here, not hit here yet.
    pub copies: u64,
    /// Copies hit here since start (their traffic moved here).
    pub adopted: u64,
    /// Copies their owner stopped publishing since start.
    pub lapsed: u64,
    /// Other hosts' pinned connections not installed at the last installation: this host
    /// tracks the flow with another backend, or the bucket is full, or a name is unknown here.
    pub refused: u64,
}

/// How the daemon reaches the NIC, and what that costs on a card (docs/pcie.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieData {
    /// Punted frames and events go through the host rings (DMA); injected frames and table
    /// writes too where the device carries those rings (`ring_names`).
    pub rings: bool,
    /// The host rings the device carries ("punt", "event", "inject", "cmd"); empty without
    /// rings.
    #[serde(default)]
    pub ring_names: Vec<String>,
    /// The NIC installs the connections it learns.
    pub hw_learn: bool,
    /// Register reads and writes so far.
    pub mmio_reads: u64,
    /// Register writes (doorbells included).
    pub mmio_writes: u64,
    /// DMA transfers device → host and their bytes.
    pub dma_writes: u64,
    /// Bytes of them.
    pub dma_write_bytes: u64,
    /// DMA transfers host → device.
    pub dma_reads: u64,
    /// Bytes of them.
    pub dma_read_bytes: u64,
    /// MSI-X interrupts.
    pub interrupts: u64,
    /// CPU stalled on register accesses, milliseconds (the cost model's).
    pub mmio_stall_ms: f64,
    /// The link busy with DMA (its busier direction), milliseconds.
    pub link_ms: f64,
    /// Register reads per learn or teardown event.
    pub reads_per_event: f64,
    /// Register reads per punted frame.
    pub reads_per_punt: f64,
    /// Register reads per installed connection.
    pub reads_per_install: f64,
    /// Register reads per loaded table entry.
    pub reads_per_entry: f64,
}

/// One backend service in `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceData {
    /// Name.
    pub name: String,
    /// `loadBalancingAlgorithm`.
    pub algorithm: String,
    /// The service names no service LB policy: passthrough, every healthy endpoint alike
    /// (SPEC R6); the algorithm, isolation, threshold and drain above do not apply.
    #[serde(default)]
    pub passthrough: bool,
    /// The rule that decided the served shares, with its SPEC number.
    #[serde(default)]
    pub rule: String,
    /// `NONE`, `NEAREST` or `STRICT`.
    pub isolation: String,
    /// `failoverHealthThreshold`, percent.
    pub failover_threshold: u8,
    /// `autoCapacityDrain.enable`.
    pub auto_capacity_drain: bool,
    /// The NIC's region and zone (`region/zone`).
    pub nic: String,
    /// Seconds since nlbd's engine started at the latest refresh (0: none yet, the counts are
    /// the compile's: no live connection).
    pub refreshed_at_secs: f64,
    /// Live connections counted at the latest refresh.
    pub live: u64,
    /// The failover backends serve.
    pub failover_serves: bool,
    /// New connections are dropped (STRICT isolation, or `dropTrafficIfUnhealthy`).
    pub drop: bool,
    /// Per group: tiers first.
    pub groups: Vec<ServiceGroupData>,
    /// The latest decision's steps, in words.
    pub steps: Vec<String>,
}

/// One backend group of a service in `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceGroupData {
    /// Instance group or network endpoint group.
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// `preference`: `PREFERRED` or `DEFAULT`.
    pub preference: String,
    /// A failover backend.
    pub failover: bool,
    /// Live connections at the latest refresh.
    pub live: u64,
    /// Target capacity (max connections × `capacityScaler`); absent: no capacity limit.
    pub capacity: Option<f64>,
    /// live / capacity; absent without a capacity limit.
    pub utilisation: Option<f64>,
    /// Share of new connections the tables serve.
    pub share: f64,
    /// Share the latest refresh decided (applied once it moves by more than the deadband).
    pub target_share: f64,
    /// Tier it serves in (0 first); absent when it takes no new connection.
    pub tier: Option<usize>,
    /// Healthy endpoints.
    pub healthy: usize,
    /// Endpoints.
    pub endpoints: usize,
    /// Drained by the automatic capacity drain.
    pub drained: bool,
    /// Healthy share below the failover threshold.
    pub below_threshold: bool,
    /// Why, in words.
    pub why: String,
}

/// One pool in `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolData {
    /// Name.
    pub name: String,
    /// Members configured.
    pub members: usize,
    /// Members healthy.
    pub healthy: usize,
    /// Members with slots.
    pub eligible: Vec<String>,
    /// The pool whose slice serves.
    pub serving: String,
    /// The backup serves.
    pub failed_over: bool,
    /// Why.
    pub why: String,
}

/// `health`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HealthData {
    /// Every (pool, instance) probed.
    pub targets: Vec<TargetData>,
    /// Per probed (pool, instance), as the tables were compiled (decided health, or the
    /// assumption while a target is undecided).
    pub members: Vec<MemberData>,
    /// Distinct probes running.
    pub probes: usize,
    /// Probes in flight.
    pub in_flight: u64,
}

/// One health target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetData {
    /// Pool.
    pub pool: String,
    /// Instance.
    pub backend: String,
    /// Probe URL (`http://ip:port/path`, `https://ip:port/path`, `tcp://ip:port`).
    pub url: String,
    /// Host header (HTTP and HTTPS; empty for TCP).
    pub host: String,
    /// `healthy`, `unhealthy` or `unknown`.
    pub health: String,
    /// Reported weight, or `missing` / `invalid` / `not_weighted`.
    pub weight: String,
    /// Consecutive passes counted.
    pub passes: u32,
    /// Consecutive failures counted.
    pub failures: u32,
    /// The last probe: `pass` or its failure label.
    pub last_result: Option<String>,
    /// Its latency, milliseconds.
    pub last_latency_ms: Option<f64>,
    /// Seconds since the last transition.
    pub changed_secs_ago: Option<f64>,
}

/// One instance's compiled health.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberData {
    /// Pool.
    pub pool: String,
    /// Instance.
    pub instance: String,
    /// Counted healthy in this pool by the compiler.
    pub healthy: bool,
    /// Probe weight reported (used only by pools that balance by weight, SPEC R5.6).
    pub weight: Option<u32>,
}

/// `conntrack`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConntrackData {
    /// Valid entries.
    pub total: usize,
    /// Capacity.
    pub capacity: usize,
    /// The first entries by index.
    pub entries: Vec<ConnectionData>,
    /// Where the next page starts (`from`); absent when these were the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u32>,
}

/// One connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionData {
    /// `tcp`, `udp` or the number.
    pub protocol: String,
    /// `ip:port` of the client.
    pub client: String,
    /// `ip:port` of the VIP.
    pub vip: String,
    /// Backend name.
    pub backend: String,
    /// Rule name.
    pub rule: String,
    /// FIN/RST seen.
    pub closed: bool,
    /// Seconds since installed.
    pub age_secs: u32,
}

/// `counters`: every counter of the NIC's counters block that has a name (SPEC R10.1).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountersData {
    /// When the counters were read: seconds since the engine started, on nlbd's clock (a rate
    /// is a difference of counters over a difference of these).
    pub at_secs: f64,
    /// Generation serving.
    pub generation: u32,
    /// Per forwarding rule.
    pub rules: Vec<RuleCounters>,
    /// Per backend (instance).
    pub backends: Vec<BackendCounters>,
    /// Per reason (regmap names), every reason.
    pub reasons: Vec<NamedCounters>,
    /// Per verdict (regmap names), every verdict.
    pub verdicts: Vec<NamedCounters>,
    /// Connections installed from the NIC's learn events (new connections).
    pub connections_installed: u64,
    /// Connections in the table.
    pub conntrack_entries: usize,
    /// Its capacity.
    pub conntrack_capacity: usize,
}

/// One counter of the counters block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedCounters {
    /// What it counts (a reason or verdict name).
    pub name: String,
    /// Packets.
    pub packets: u64,
    /// Bytes (received length).
    pub bytes: u64,
    /// Of the packets, punted to the host.
    pub punts: u64,
    /// Of the packets, dropped.
    pub drops: u64,
}

/// A forwarding rule's counters and what the rule matches.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleCounters {
    /// Rule name.
    pub name: String,
    /// Its VIP (`IPAddress`).
    pub vip: String,
    /// `TCP` or `UDP`.
    pub protocol: String,
    /// Its port ranges (`80`, `7000-7100`, `all ports`).
    pub ports: Vec<String>,
    /// The target pool or target instance.
    pub target: String,
    /// Packets.
    pub packets: u64,
    /// Bytes (received length).
    pub bytes: u64,
    /// Of the packets, punted to the host.
    pub punts: u64,
    /// Of the packets, dropped.
    pub drops: u64,
}

/// A backend's counters and the pools it is a member of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackendCounters {
    /// Instance name.
    pub name: String,
    /// Target pools and target instances it belongs to.
    pub pools: Vec<String>,
    /// Packets.
    pub packets: u64,
    /// Bytes (received length).
    pub bytes: u64,
    /// Of the packets, punted to the host.
    pub punts: u64,
    /// Of the packets, dropped.
    pub drops: u64,
}

/// `ip:port` with IPv6 in brackets.
pub fn endpoint(ip: std::net::IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}

/// A protocol name.
pub fn protocol_name(p: u8) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        n => n.to_string(),
    }
}

/// What nlbd announces by BGP, and why not when it does not (SPEC R15.1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BgpData {
    /// The VIPs this host serves (host routes).
    pub vips: Vec<String>,
    /// The routes nlbd wants announced: `vips`, or none while anything in `withheld` holds.
    pub announcing: Vec<String>,
    /// Why nothing is announced (empty: everything served is).
    pub withheld: Vec<String>,
    /// Drained (by `nlbctl drain`, through etcd or the admin socket).
    pub draining: bool,
    /// The configuration's `drainQuietSec`: how long `nlbctl drain` waits for the counters
    /// to stand still.
    #[serde(default)]
    pub drain_quiet_secs: u32,
    /// Each neighbour.
    pub neighbors: Vec<BgpNeighborData>,
}

/// One BGP neighbour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BgpNeighborData {
    /// `ADDRESS:PORT`.
    pub neighbor: String,
    /// Its AS.
    pub asn: u32,
    /// `Idle`, `Connect`, `OpenSent`, `OpenConfirm` or `Established`.
    pub state: String,
    /// Since when (Unix ms).
    pub since_unix_ms: u64,
    /// The neighbour's BGP identifier, once known.
    pub router_id: Option<String>,
    /// The hold time in use.
    pub hold_time: Option<u16>,
    /// The neighbour negotiated graceful restart: it keeps the routes over an nlbd restart.
    pub graceful_restart: bool,
    /// Routes announced to it now.
    pub announced: Vec<String>,
    /// Sessions established since nlbd started.
    pub established_total: u64,
    /// Why the last attempt or session ended.
    pub last_error: Option<String>,
}
