//! The slow path's device loop: one thread owns the device and does everything that touches
//! it — table loads for health changes and reloads ([`Controller`]), learn and teardown events
//! and ageing ([`Connections`]), punted frames ([`PuntHandler`]), counter reads — so register
//! traffic never interleaves between two of them.
//!
//! Everything else (the health checker, the metrics server, the admin socket, signals) runs
//! elsewhere and talks to the engine with [`Command`]s over a channel. Health decisions go first
//! in every round (their latency to the table counts); when idle the loop waits on the channel
//! for at most [`EngineOptions::idle_poll`], so a command wakes it at once.

use super::controller::{Applied, Controller, ControllerError, ControllerStats, LoadOutcome};
use super::health::{HealthChange, HealthSnapshot};
use super::learn::{Connections, DrainCause, EvictCause, LearnOptions, LearnStats};
use super::policy::{PolicyRuntime, PolicyStats, Refreshed, DEFAULT_DEADBAND, DEFAULT_REFRESH};
use super::punt::fragments::{FragmentLimits, FragmentStats};
use super::punt::{PuntContext, PuntHandler, PuntStats};
use super::tracking::{self, FailoverSwitch, FAILOVER_DRAINING_TIMEOUT_SECS};
use flowtable_compiler::policy::{Decision, Locality, Policy};
use flowtable_compiler::{
    explain_compiled, Config, Explanation, Flow, HealthState, PoolReport, Symbols,
};
use nlb_driver::conntrack::{ConntrackError, ConntrackStats, FLAG_CLOSED};
use nlb_driver::device::{Device, DeviceError};
use nlb_driver::discovery::{discover, DeviceInfo, DiscoveryError};
use nlb_driver::loader::{LoadReport, LoaderOptions};
use nlb_driver::pcie::PcieStats;
use nlb_driver::queues::{read_counters, CounterKind, PuntedFrame, Queues};
use nlb_driver::rings::{RingDevice, RingSizes};
use nlb_hw::enums::{Reason, Verdict};
use nlb_hw::hash::u128_to_addr;
use nlb_hw::layouts::EventRecord;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;
use tracing::{debug, error, info, warn};

/// Tuning of the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineOptions {
    /// The table loader's.
    pub loader: LoaderOptions,
    /// The connection manager's.
    pub learn: LearnOptions,
    /// The fragment tracker's.
    pub fragments: FragmentLimits,
    /// Longest wait for a command when the queues were empty (the queue polling period when
    /// idle).
    pub idle_poll: Duration,
    /// Period of the connection ageing pass.
    pub age_every: Duration,
    /// Punted frames handled per round at most (learn events get their turn in between).
    pub punts_per_round: usize,
    /// Period of the service LB policy's refresh (live counts to weights, SPEC R6; only with
    /// backend services).
    pub policy_refresh: Duration,
    /// A group's share must move by more than this (absolute) for new weights to be loaded
    /// (health changes always are): the hysteresis that keeps a steady load from moving them.
    pub policy_deadband: f64,
    /// The host rings (SPEC R12.2): punted frames, events, injected frames and table writes
    /// by DMA, no register read on those paths; `None`: the register queues (debugging, or
    /// a device without the DMA engine).
    pub rings: Option<RingSizes>,
    /// Ask the NIC to install the connections it learns (SPEC R12.3; granted where the
    /// device can).
    pub hw_learn: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            loader: LoaderOptions::default(),
            learn: LearnOptions::default(),
            fragments: FragmentLimits::default(),
            idle_poll: Duration::from_millis(1),
            age_every: Duration::from_secs(1),
            punts_per_round: 64,
            policy_refresh: DEFAULT_REFRESH,
            policy_deadband: DEFAULT_DEADBAND,
            rings: Some(RingSizes::default()),
            hw_learn: true,
        }
    }
}

/// Register accesses of the slow path attributed to its work (SPEC R12.1, R12.2): what the
/// hot paths cost on a card. Every figure is a count; reads per item are derived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MmioUse {
    /// Learn and teardown events handled, and the register reads and writes that handling
    /// (polling included) took.
    pub events: u64,
    /// Reads of it.
    pub event_reads: u64,
    /// Writes of it.
    pub event_writes: u64,
    /// Punted frames handled (injection included), and their register accesses.
    pub punts: u64,
    /// Reads of it.
    pub punt_reads: u64,
    /// Writes of it.
    pub punt_writes: u64,
    /// Connections the host installed or the NIC learned, with the events above.
    pub installs: u64,
    /// Table entries loaded, and the register accesses of the loads.
    pub entries: u64,
    /// Reads of it.
    pub load_reads: u64,
    /// Writes of it.
    pub load_writes: u64,
}

impl MmioUse {
    /// Register reads per learn or teardown event.
    pub fn reads_per_event(&self) -> f64 {
        ratio(self.event_reads, self.events)
    }
    /// Register reads per punted frame.
    pub fn reads_per_punt(&self) -> f64 {
        ratio(self.punt_reads, self.punts)
    }
    /// Register reads per installed connection.
    pub fn reads_per_install(&self) -> f64 {
        ratio(self.event_reads, self.installs)
    }
    /// Register reads per loaded table entry.
    pub fn reads_per_entry(&self) -> f64 {
        ratio(self.load_reads, self.entries)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The device is not an nlb-offload NIC this build understands.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The configuration or the first load failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The connection table could not be read.
    #[error("reading the connection table: {0}")]
    Conntrack(#[from] ConntrackError),
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Generation now serving.
    pub generation: u32,
    /// Table entries written.
    pub changed_entries: usize,
    /// Connections evicted (their backend or rule is gone, or their backend left its backend
    /// service without draining).
    pub evicted: usize,
    /// (rule, backend) pairs whose connections drain (`connectionDraining`).
    pub draining: usize,
    /// Connections rewritten (their backend or rule was renumbered).
    pub remapped: usize,
}

/// A request to the engine.
#[derive(Debug)]
pub enum Command {
    /// Health decisions and the checker's state after them.
    Health {
        /// The decisions.
        changes: Vec<HealthChange>,
        /// The checker's snapshot taken after receiving them.
        snapshot: HealthSnapshot,
    },
    /// A new configuration (already parsed and validated); the reply says whether it serves
    /// or, on one line, why not.
    Reload {
        /// The configuration.
        config: Box<Config>,
        /// Current health.
        snapshot: HealthSnapshot,
        /// Rule and backend ids to compile with (a fleet's published ids); None: those of
        /// the tables serving.
        ids: Option<Box<Symbols>>,
        /// The answer.
        reply: oneshot::Sender<Result<ReloadReport, String>>,
    },
    /// The engine's state, with the device's counters when `counters`.
    Status {
        /// Read the counters block too.
        counters: bool,
        /// The answer.
        reply: oneshot::Sender<Box<EngineStatus>>,
    },
    /// The connection table (at most `limit` entries, from entry index `from` on).
    Connections {
        /// First entry index listed (0: from the start; a long listing goes page by page).
        from: u32,
        /// Most entries returned.
        limit: usize,
        /// The answer.
        reply: oneshot::Sender<ConnectionList>,
    },
    /// A copy of the configuration serving (what names mean: rule VIPs, pool members).
    Config {
        /// The answer.
        reply: oneshot::Sender<Box<Config>>,
    },
    /// Where a new connection of `flow` goes in the tables serving, and why (`nlbctl explain
    /// --socket`): with a backend service's decision over its live counts.
    Explain {
        /// The flow.
        flow: Flow,
        /// The answer.
        reply: oneshot::Sender<Box<Explanation>>,
    },
    /// Write a bitstream into the card's user flash slot and reboot the card into it (`nlbctl
    /// fleet upgrade --bitstream`). The card comes back empty: once this succeeds the engine
    /// leaves the device alone, and nlbd starts again to load the tables.
    Flash {
        /// The bitstream (checked against the card before anything is written).
        image: Box<nlb_driver::flash::Bitstream>,
        /// The answer: what was done, or what failed.
        reply: oneshot::Sender<Result<Flashed, FlashFailed>>,
    },
    /// This host's pinned connections by names (SPEC R15.2, [`crate::pinned`]): what it
    /// publishes to the fleet, with the digest of the tables they were found for.
    Pinned {
        /// Return the connections even if unchanged since the last answer.
        again: bool,
        /// The answer: (tables digest, the connections or None when unchanged).
        reply: oneshot::Sender<(String, Option<Vec<nlb_control::fleet::PinnedConnection>>)>,
    },
    /// The other hosts' pinned connections, all of them: installed here as copies, the copies
    /// no longer listed lapse.
    Mirror {
        /// Every other host's pinned connections.
        connections: Vec<nlb_control::fleet::PinnedConnection>,
        /// This host's own, as it published them before nlbd restarted (installed as its own
        /// where the table lost them: a card rebooted empty); usually none.
        restore: Vec<nlb_control::fleet::PinnedConnection>,
        /// The answer: what was done, or why the device refused.
        reply: oneshot::Sender<Result<crate::pinned::MirrorReport, String>>,
    },
    /// Tables about to be loaded, prepared but not loaded (make-before-break in a fleet,
    /// SPEC R15.2): the new configuration's, or with `config` None the tables serving under
    /// the health of `snapshot`. A [`Command::Reload`] or [`Command::Health`] with the same
    /// inputs loads them later.
    Prepare {
        /// A new configuration and the ids to compile it with (see [`Command::Reload`]).
        config: Option<Box<(Config, Option<Symbols>)>>,
        /// The health the tables are compiled under.
        snapshot: HealthSnapshot,
        /// The answer, or why the configuration does not compile (on one line).
        reply: oneshot::Sender<Result<PreparedTables, String>>,
    },
    /// Finish the learn events already queued and stop. Tables and connections stay in the
    /// NIC.
    Shutdown,
}

/// Tables prepared and not loaded yet ([`Command::Prepare`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTables {
    /// Their digest: [`EngineStatus::tables_digest`] once they serve.
    pub digest: String,
    /// They differ from the tables serving.
    pub changed: bool,
    /// The digest of the tables serving.
    pub serving_digest: String,
    /// What this host publishes until they serve: its own open connections pinned under the
    /// tables serving and those the new tables would pin, by names (empty when unchanged).
    pub pinned: Vec<nlb_control::fleet::PinnedConnection>,
}

/// Why [`Command::Flash`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlashFailed {
    /// The card was rebooted (it lost what this engine loaded); false: it runs its image
    /// as before, with its tables and connections.
    pub card_reset: bool,
    /// What failed, in words.
    pub message: String,
}

impl std::fmt::Display for FlashFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What [`Command::Flash`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Flashed {
    /// Bytes written to the flash.
    pub bytes: u32,
    /// Seconds the write took (erase, program, read back).
    pub flash_secs: f64,
    /// Seconds until the card answered after the reboot.
    pub reboot_secs: f64,
    /// The build id before and after.
    pub build_before: u32,
    /// The build id the card runs now.
    pub build_after: u32,
}

/// One counter of the counters block (SPEC R10.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterValues {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Of those, punted.
    pub punts: u64,
    /// Of those, dropped.
    pub drops: u64,
}

/// The device's counters, by the configuration's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Per forwarding rule.
    pub rules: Vec<(String, CounterValues)>,
    /// Per backend (instance).
    pub backends: Vec<(String, CounterValues)>,
    /// Per reason (regmap names).
    pub reasons: Vec<(&'static str, CounterValues)>,
    /// Per verdict.
    pub verdicts: Vec<(&'static str, CounterValues)>,
}

/// A backend service's policy state for metrics and `nlbctl status` (SPEC R6).
#[derive(Debug, Clone)]
pub struct ServiceStatus {
    /// The backend service (its pool's name).
    pub name: String,
    /// Its service LB policy.
    pub policy: Policy,
    /// Where the NIC is.
    pub locality: Locality,
    /// Its groups: place, capacity, members.
    pub groups: Vec<flowtable_compiler::ServiceGroup>,
    /// The decision at the latest refresh (live counts, utilisation, the shares it would give),
    /// per group (its per-endpoint shares left out).
    pub observed: Option<Decision>,
    /// The decision the tables serve (it differs from `observed` by less than the deadband),
    /// per group.
    pub served: Option<Decision>,
    /// Policy time of the latest refresh (seconds since the engine started; 0: none yet).
    pub refreshed_at: f64,
}

/// The engine's state for metrics and `nlbctl status`.
#[derive(Debug, Clone)]
pub struct EngineStatus {
    /// The device.
    pub device: String,
    /// The host rings carry punts and events (and injected frames and table writes where
    /// `carried` names their rings).
    pub rings: bool,
    /// The names of the rings the device carries (empty without rings).
    pub carried: Vec<&'static str>,
    /// The NIC installs the connections it learns.
    pub hw_learn: bool,
    /// What the device saw on the PCIe cost model.
    pub pcie: PcieStats,
    /// Register accesses by the work they served.
    pub mmio: MmioUse,
    /// Its capacity profile.
    pub profile: &'static str,
    /// The configuration file serving.
    pub config_file: String,
    /// First 12 hex digits of its digest.
    pub config_digest: String,
    /// SHA-256 (hex) of the tables the device serves: the active bank as loaded, with the
    /// NIC settings and names ([`flowtable_compiler::Image::tables_digest`]); hosts serving
    /// the same tables have the same digest (SPEC R10.4). Empty if the image cannot be written.
    pub tables_digest: String,
    /// Generation serving.
    pub generation: u32,
    /// The build id of the image the card runs (firmware-ID block).
    pub build_id: u32,
    /// Bank serving.
    pub active_bank: u8,
    /// A failed load waits for its retry.
    pub load_pending: bool,
    /// Targets still on their start-up assumption.
    pub assumed_targets: usize,
    /// Controller counters (loads, reloads, decision latency).
    pub controller: ControllerStats,
    /// Pools: members, healthy, eligible, serving slice, why.
    pub pools: Vec<PoolReport>,
    /// `failoverRatio` of each target pool with a backup pool (its healthy threshold).
    pub failover_ratios: Vec<(String, f64)>,
    /// Health per instance as compiled.
    pub health: HealthState,
    /// Connection manager counters.
    pub learn: LearnStats,
    /// Pinned connections: this host's and the other hosts' copies.
    pub pinned: crate::pinned::PinnedStats,
    /// Conntrack register-level counters.
    pub conntrack: ConntrackStats,
    /// Valid connection-table entries.
    pub conntrack_entries: usize,
    /// (rule, backend) pairs whose connections drain.
    pub draining_pairs: usize,
    /// Deleted instances whose backend entries stay while their connections drain.
    pub kept_backends: usize,
    /// Connection-table capacity.
    pub conntrack_capacity: usize,
    /// Punt handler counters.
    pub punts: PuntStats,
    /// Fragment tracker counters.
    pub fragments: FragmentStats,
    /// Datagrams the tracker remembers.
    pub fragment_datagrams: usize,
    /// Bytes of fragments it buffers.
    pub fragment_buffered_bytes: usize,
    /// Register access failures since start.
    pub device_errors: u64,
    /// Time since the engine started.
    pub uptime: Duration,
    /// The counters block, when asked for.
    pub counters: Option<DeviceCounters>,
    /// The policy refresh's counters.
    pub policy: PolicyStats,
    /// Its period.
    pub policy_refresh: Duration,
    /// Backend services.
    pub services: Vec<ServiceStatus>,
}

/// One connection-table entry, by names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// Entry index.
    pub index: u32,
    /// IP protocol.
    pub protocol: u8,
    /// Client address.
    pub client: IpAddr,
    /// Client port.
    pub client_port: u16,
    /// VIP.
    pub vip: IpAddr,
    /// VIP port.
    pub vip_port: u16,
    /// Backend name (or `#id`).
    pub backend: String,
    /// Rule name (or `#id`).
    pub rule: String,
    /// FIN or RST seen.
    pub closed: bool,
    /// Seconds since it was installed (the entry's timestamp).
    pub age_secs: u32,
}

/// A listing of the connection table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionList {
    /// Valid entries in all.
    pub total: usize,
    /// Capacity.
    pub capacity: usize,
    /// The first `limit` entries by index.
    pub entries: Vec<ConnectionInfo>,
    /// The index to list from for the entries after these; `None` when none is left.
    pub next: Option<u32>,
}

/// Host time in seconds (what connection entries are stamped with).
pub fn host_secs() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// What one round of [`Engine::step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Learn/teardown events handled.
    pub events: usize,
    /// Punted frames handled.
    pub punts: usize,
    /// An ageing pass ran.
    pub aged: bool,
}

impl StepReport {
    /// Whether anything was done.
    pub fn busy(&self) -> bool {
        self.events > 0 || self.punts > 0
    }
}

/// The device loop.
pub struct Engine {
    dev: Box<dyn Device>,
    info: DeviceInfo,
    controller: Controller,
    conns: Connections,
    punts: PuntHandler,
    queues: Queues,
    opts: EngineOptions,
    started: Instant,
    last_age: Instant,
    policy: PolicyRuntime,
    last_policy: Instant,
    device_errors: u64,
    last_error_log: Option<Instant>,
    /// Which set of each backend service the tables serve (`true`: its failover backends).
    failover_states: BTreeMap<String, bool>,
    /// The digest of the tables serving, by what it was computed for (generation, active
    /// bank, configuration digest): hashing a full bank takes milliseconds on large profiles.
    tables_digest: Option<(DigestKey, String)>,
    /// `dma.host_time` as last written (the stamp of connections the NIC learns).
    host_stamp: u32,
    /// Register accesses by path.
    mmio: MmioUse,
    records: Vec<EventRecord>,
    punted: Vec<PuntedFrame>,
    /// The card was flashed and rebooted into another image ([`Command::Flash`]): it holds
    /// none of what this engine knows, so the engine no longer touches it.
    card_replaced: bool,
}

/// What a tables digest was computed for: generation, active bank, configuration digest.
type DigestKey = (u32, u8, [u8; 32]);

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("device", &self.dev.describe())
            .field("generation", &self.controller.loader().generation())
            .finish()
    }
}

impl Engine {
    /// Discovers the device, attaches (tables and connections are read back: a restarted
    /// daemon carries on with what the NIC holds), compiles `config` and loads it.
    pub fn start(
        dev: Box<dyn Device>,
        config: Config,
        snapshot: &HealthSnapshot,
        opts: EngineOptions,
    ) -> Result<(Engine, LoadReport), EngineError> {
        let mut dev = dev;
        let info = discover(dev.as_mut())?;
        if let Some(sizes) = opts.rings {
            dev = match RingDevice::attach(dev, sizes, opts.hw_learn) {
                Ok(mut r) => {
                    let hw = r.rings().hw_learn();
                    if r.rings().carries(nlb_hw::enums::Ring::Cmd) {
                        info!(
                            hardware_learning = hw,
                            "host rings attached: punts, events, injected frames and table writes by DMA"
                        );
                    } else {
                        info!(
                            hardware_learning = hw,
                            "host rings attached: punts and events by DMA; the device's engine \
                             carries no inject or command ring, so injected frames and table \
                             writes go through the register windows"
                        );
                    }
                    Box::new(r)
                }
                Err((dev, e)) => {
                    warn!(error = %e, "no host rings: the slow path reads the register queues");
                    dev
                }
            };
        }
        let (controller, report) =
            Controller::start(dev.as_mut(), &info, config, snapshot, opts.loader)?;
        let mut conns = Connections::attach(dev.as_mut(), &info, host_secs(), opts.learn)?;
        conns.set_tables(controller.serving());
        // Connections the tables serving cannot deliver any more (their backend left while no
        // nlbd ran, or was draining when the last one stopped: drains are not resumed) choose
        // again rather than be dropped.
        let dangling = conns.evict_dangling(dev.as_mut(), controller.serving())?;
        if dangling > 0 {
            warn!(
                evicted = dangling,
                "connections whose rule or backend the tables no longer have were evicted"
            );
        }
        conns.set_rule_tracking(tracking::rule_tracking(
            controller.config(),
            controller.compiled(),
        ));
        let failover_states =
            tracking::failover_states(controller.compiled(), controller.serving());
        info!(
            device = %dev.describe(),
            profile = info.profile.name,
            generation = report.generation,
            changed_entries = report.changed_entries,
            connections = conns.conntrack().valid_count(),
            "attached and loaded"
        );
        let now = Instant::now();
        let mut engine = Engine {
            dev,
            info,
            controller,
            conns,
            punts: PuntHandler::new(opts.fragments),
            queues: Queues::new(),
            opts,
            started: now,
            last_age: now,
            policy: PolicyRuntime::new(opts.policy_deadband),
            last_policy: now,
            device_errors: 0,
            last_error_log: None,
            failover_states,
            tables_digest: None,
            host_stamp: 0,
            mmio: MmioUse::default(),
            records: Vec::new(),
            punted: Vec::new(),
            card_replaced: false,
        };
        engine.set_host_time(host_secs());
        Ok((engine, report))
    }

    /// The controller.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// The connection manager.
    pub fn connections(&self) -> &Connections {
        &self.conns
    }

    /// The punt handler.
    pub fn punts(&self) -> &PuntHandler {
        &self.punts
    }

    /// The device.
    pub fn device(&mut self) -> &mut dyn Device {
        self.dev.as_mut()
    }

    fn device_error(&mut self, what: &str, e: &dyn std::fmt::Display) {
        self.device_errors += 1;
        let now = Instant::now();
        if self
            .last_error_log
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.last_error_log = Some(now);
            error!(error = %e, errors = self.device_errors, "{what}");
        }
    }

    /// One round: queue status, a batch of learn events, up to
    /// [`EngineOptions::punts_per_round`] punted frames, and the timers (ageing, fragment
    /// expiry, a pending load's retry).
    pub fn step(&mut self) -> StepReport {
        let mut report = StepReport::default();
        if self.card_replaced {
            return report;
        }
        let now = Instant::now();
        if nlb_driver::rings::split(&mut self.dev).is_some() {
            self.step_rings(now, &mut report);
            self.step_timers(now, &mut report);
            return report;
        }
        let (r0, w0) = self.dev.mmio_seen();
        let mut punts_from = None;
        match self.queues.poll(self.dev.as_mut()) {
            Ok(status) => {
                if status.learn_overflow {
                    self.conns.note_overflow();
                    warn!("the learn queue overflowed: the NIC dropped learn events (those flows are learned again on their next miss)");
                }
                if status.punt_overflow {
                    self.punts.note_overflow();
                    warn!("the punt queue overflowed: the NIC dropped punted frames");
                }
                if status.learn > 0 {
                    let before = self.conns.stats();
                    match self
                        .conns
                        .poll(self.dev.as_mut(), &mut self.queues, host_secs())
                    {
                        Ok(n) => report.events = n,
                        Err(e) => self.device_error("handling learn events failed", &e),
                    }
                    let after = self.conns.stats();
                    self.mmio.installs += (after.installed + after.replaced)
                        .saturating_sub(before.installed + before.replaced);
                }
                if status.punt > 0 {
                    punts_from = Some(self.dev.mmio_seen());
                    report.punts = self.handle_punts(now);
                }
            }
            Err(e) => self.device_error("polling the queues failed", &e),
        }
        // The status poll counts with the events; the punts' own accesses with the punts.
        let (r1, w1) = self.dev.mmio_seen();
        let (rp, wp) = punts_from.unwrap_or((r1, w1));
        self.mmio.events += report.events as u64;
        self.mmio.event_reads += rp - r0;
        self.mmio.event_writes += wp - w0;
        self.mmio.punts += report.punts as u64;
        self.mmio.punt_reads += r1 - rp;
        self.mmio.punt_writes += w1 - wp;
        self.step_timers(now, &mut report);
        report
    }

    /// The rings' part of a round: what the write-back area says (host memory), a batch of
    /// event records, punted frames, then one doorbell per ring that moved. No register read.
    fn step_rings(&mut self, now: Instant, report: &mut StepReport) {
        let (r0, w0) = self.dev.mmio_seen();
        let Some((_, rings)) = nlb_driver::rings::split(&mut self.dev) else {
            return;
        };
        let nic_learns = rings.hw_learn();
        let status = match rings.poll() {
            Ok(s) => s,
            Err(e) => {
                self.device_error("reading the rings' write-back failed", &e);
                return;
            }
        };
        if status.event_drops > 0 {
            self.conns.note_overflow();
            warn!(
                dropped = status.event_drops,
                "the event ring was full: the NIC dropped events (a dropped LEARN the NIC installed stays installed; the host finds it at its next rescan)"
            );
        }
        if status.punt_drops > 0 {
            self.punts.note_overflow();
            warn!(
                dropped = status.punt_drops,
                "the punt ring was full: the NIC dropped punted frames"
            );
        }
        if status.errors > 0 {
            self.device_error(
                "the DMA engine reported failed records",
                &format!("{} since the last round", status.errors),
            );
        }
        if status.events > 0 {
            let mut records = std::mem::take(&mut self.records);
            records.clear();
            if let Some((_, rings)) = nlb_driver::rings::split(&mut self.dev) {
                if let Err(e) = rings.pop_events(self.opts.learn.batch, &mut records) {
                    self.device_error("reading event records failed", &e);
                }
            }
            let before = self.conns.stats();
            match self.conns.handle_records(
                self.dev.as_mut(),
                &records,
                self.host_stamp,
                host_secs(),
                nic_learns,
            ) {
                Ok(()) => report.events = records.len(),
                Err(e) => self.device_error("handling learn events failed", &e),
            }
            let after = self.conns.stats();
            self.mmio.events += records.len() as u64;
            self.mmio.installs += (after.installed + after.replaced)
                .saturating_sub(before.installed + before.replaced);
            self.records = records;
        }
        let (r1, w1) = self.dev.mmio_seen();
        self.mmio.event_reads += r1 - r0;
        self.mmio.event_writes += w1 - w0;
        if status.punts > 0 {
            report.punts = self.handle_punt_ring(now);
        }
        if let Some((d, rings)) = nlb_driver::rings::split(&mut self.dev) {
            if let Err(e) = rings.give_back(d).and_then(|()| rings.ring_inject(d)) {
                self.device_error("ringing the doorbells failed", &e);
            }
        }
        let (r2, w2) = self.dev.mmio_seen();
        self.mmio.punt_reads += r2 - r1;
        self.mmio.punt_writes += w2 - w1;
        self.mmio.punts += report.punts as u64;
    }

    /// Punted frames from the punt ring, decided and injected through the inject ring.
    fn handle_punt_ring(&mut self, now: Instant) -> usize {
        let mut punted = std::mem::take(&mut self.punted);
        let Some((dev, rings)) = nlb_driver::rings::split(&mut self.dev) else {
            return 0;
        };
        rings.recycle(&mut punted);
        let mut failed: Option<String> = None;
        if let Err(e) = rings.pop_punts(self.opts.punts_per_round, &mut punted) {
            failed = Some(format!("reading punted frames: {e}"));
        }
        for p in &punted {
            let ctx = PuntContext {
                tables: self.controller.serving(),
                conntrack: Some(self.conns.conntrack()),
            };
            if let Err(e) = self.punts.handle(dev, rings, p, &ctx, now) {
                failed = Some(format!("injecting a frame: {e}"));
                break;
            }
        }
        if let Some(e) = failed {
            self.device_error("handling punted frames failed", &e);
        }
        let n = punted.len();
        self.punted = punted;
        n
    }

    /// Register accesses of the slow path by what they served.
    pub fn mmio_use(&self) -> MmioUse {
        let c = self.controller.stats();
        MmioUse {
            entries: c.entries_written,
            load_reads: c.load_reads,
            load_writes: c.load_writes,
            ..self.mmio
        }
    }

    /// What the device saw on the PCIe cost model (docs/pcie.md).
    pub fn pcie(&mut self) -> PcieStats {
        self.dev.pcie()
    }

    /// The timers of a round: ageing, fragment expiry, a pending load's retry, the policy.
    fn step_timers(&mut self, now: Instant, report: &mut StepReport) {
        if now.duration_since(self.last_age) >= self.opts.age_every {
            self.last_age = now;
            report.aged = true;
            self.punts.expire(now);
            self.age_at(host_secs());
            if let Some(result) = self.controller.retry_pending(self.dev.as_mut()) {
                match result {
                    Ok(r) => {
                        self.tables_changed();
                        info!(generation = r.generation, "retried load succeeded");
                    }
                    Err(e) => self.device_error("retrying the table load failed", &e),
                }
            }
        }
        if now.duration_since(self.last_policy) >= self.opts.policy_refresh {
            self.last_policy = now;
            let at = now.saturating_duration_since(self.started).as_secs_f64();
            self.refresh_policy_at(at);
        }
    }

    /// One refresh of the service LB policy at policy time `now` (seconds; the engine's own
    /// timer passes the time since it started): the open connections of the connection table
    /// go to the backend services, and changed weights are loaded (see [`super::policy`]).
    /// `None` without backend services, or when the recompile failed (logged).
    pub fn refresh_policy_at(&mut self, now: f64) -> Option<Refreshed> {
        let closed = self.conns.take_closed();
        let open = self.conns.conntrack().open_counts();
        let result =
            self.policy
                .refresh(&mut self.controller, self.dev.as_mut(), open, &closed, now)?;
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                error!(error = %e.one_line(), "recompiling the service weights failed");
                return None;
            }
        };
        match &r.load {
            LoadOutcome::Loaded(l) => {
                self.tables_changed();
                if !r.pools.is_empty() {
                    info!(
                        services = ?r.pools,
                        live_connections = r.live_connections,
                        changed_entries = l.changed_entries,
                        generation = l.generation,
                        refresh_ms = r.elapsed.as_secs_f64() * 1e3,
                        "service weights updated for the live connections"
                    );
                }
            }
            LoadOutcome::NotNeeded => {}
            LoadOutcome::Failed(e) => {
                let e = e.to_string();
                self.device_error("loading new service weights failed (retrying)", &e);
            }
        }
        Some(r)
    }

    /// Where a new connection of `flow` goes in the tables serving, and why; for a backend
    /// service with the decision over its live counts.
    pub fn explain(&self, flow: &Flow) -> Explanation {
        explain_compiled(self.controller.compiled(), flow)
    }

    fn handle_punts(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while n < self.opts.punts_per_round {
            let punted = match self.queues.pop_punt(self.dev.as_mut()) {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    self.device_error("popping a punted frame failed", &e);
                    break;
                }
            };
            n += 1;
            let ctx = PuntContext {
                tables: self.controller.serving(),
                conntrack: Some(self.conns.conntrack()),
            };
            if let Err(e) =
                self.punts
                    .handle(self.dev.as_mut(), &mut self.queues, &punted, &ctx, now)
            {
                self.device_error("injecting a frame failed", &e);
                break;
            }
        }
        n
    }

    /// Applies health decisions (see [`Controller::apply_health`]); then the persistence
    /// policy for connections on backends that turned unhealthy.
    pub fn apply_health(
        &mut self,
        changes: &[HealthChange],
        snapshot: &HealthSnapshot,
    ) -> Option<Applied> {
        let applied = self
            .controller
            .apply_health(self.dev.as_mut(), changes, snapshot);
        self.health_applied(applied)
    }

    /// Applies a per-(pool, instance) health state decided elsewhere than by the checker (see
    /// [`Controller::apply_health_state`]), with what follows as for [`Engine::apply_health`].
    pub fn apply_health_state(&mut self, health: HealthState) -> Option<Applied> {
        let applied = self
            .controller
            .apply_health_state(self.dev.as_mut(), &[], health);
        self.health_applied(applied)
    }

    /// What follows a health change: the new tables' consequences for connections (failover
    /// and failback, [`Engine::tables_changed`]), then each pool's persistence policy for
    /// connections on backends that turned unhealthy.
    fn health_applied(&mut self, applied: Result<Applied, ControllerError>) -> Option<Applied> {
        let applied = match applied {
            Ok(a) => a,
            Err(e) => {
                error!(error = %e.one_line(), "recompiling after a health change failed");
                return None;
            }
        };
        match &applied.load {
            LoadOutcome::Loaded(r) => {
                self.tables_changed();
                let worst = applied.latencies.iter().max().copied().unwrap_or_default();
                info!(
                    pools = ?applied.pools,
                    changed_entries = r.changed_entries,
                    generation = r.generation,
                    decision_to_active_ms = worst.as_secs_f64() * 1e3,
                    "tables updated for health changes"
                );
            }
            LoadOutcome::NotNeeded => {
                debug!(pools = ?applied.pools, "health changes need no table change")
            }
            LoadOutcome::Failed(e) => {
                let e = e.to_string();
                self.device_error("loading tables for a health change failed (retrying)", &e);
            }
        }
        if !applied.turned_unhealthy.is_empty() {
            let controller = &self.controller;
            let turned = &applied.turned_unhealthy;
            let unhealthy = |rule: u16, backend: u16| {
                controller
                    .connection_pool(rule, backend)
                    .is_some_and(|pool| {
                        turned.contains(&(pool, backend))
                            && tracking::moves_possible(controller.compiled(), pool)
                    })
            };
            match self.conns.backends_unhealthy(self.dev.as_mut(), unhealthy) {
                Ok(n) if n > 0 => info!(
                    evicted = n,
                    backends = ?applied.turned_unhealthy,
                    "connections moved off unhealthy backends (persistence policy)"
                ),
                Ok(_) => {}
                Err(e) => {
                    self.device_error("evicting connections of unhealthy backends failed", &e)
                }
            }
        }
        Some(applied)
    }

    /// Reloads the configuration: compiled and checked first, refused on one line if it does
    /// not compile (the old one keeps serving); connections are evicted or renumbered to
    /// match.
    pub fn reload(
        &mut self,
        config: Config,
        snapshot: &HealthSnapshot,
    ) -> Result<ReloadReport, String> {
        self.reload_with_ids(config, snapshot, None)
    }

    /// [`Engine::reload`] with the rule and backend ids `ids` gives (names by id) instead of
    /// those serving (`Controller::prepare_reload_with_ids`).
    pub fn reload_with_ids(
        &mut self,
        config: Config,
        snapshot: &HealthSnapshot,
        ids: Option<&Symbols>,
    ) -> Result<ReloadReport, String> {
        let file = config.file.clone();
        let plan = match self
            .controller
            .prepare_reload_with_ids(config, snapshot, ids)
        {
            Ok(p) => p,
            Err(e) => {
                self.controller.note_refused_reload();
                let line = e.one_line();
                error!(file = %file, "configuration refused, the previous one keeps serving: {line}");
                return Err(line);
            }
        };
        let remap = self
            .conns
            .plan_remap(|b| plan.map_backend(b), |r| plan.map_rule(r));
        // Backends the reload takes out of a backend service: their connections end with the
        // removed ones, or drain (crate::tracking::plan_reload_drains).
        let end_now: BTreeSet<(u16, u16)> = plan
            .drains
            .iter()
            .filter(|p| p.timeout_secs == 0)
            .map(|p| (p.rule, p.backend))
            .collect();
        let evicted = match self
            .conns
            .evict_removed(self.dev.as_mut(), &remap)
            .and_then(|n| {
                let m = self
                    .conns
                    .evict_pairs(self.dev.as_mut(), &end_now, EvictCause::Reload)?;
                Ok(n + m)
            }) {
            Ok(n) => n,
            Err(e) => {
                let line = format!("evicting connections of removed backends failed: {e}");
                error!(file = %file, "configuration not applied: {line}");
                return Err(line);
            }
        };
        let (backend_map, rule_map) = (plan.backend_map.clone(), plan.rule_map.clone());
        let map = |m: &[Option<u16>], id: u16| m.get(usize::from(id)).copied().flatten();
        let to_drain: Vec<(u16, u16, u32)> = plan
            .drains
            .iter()
            .filter(|p| p.timeout_secs > 0)
            .filter_map(|p| {
                Some((
                    map(&rule_map, p.rule)?,
                    map(&backend_map, p.backend)?,
                    p.timeout_secs,
                ))
            })
            .collect();
        // Ids are kept across reloads (compile_after); pools may still move.
        let renumbered = !self
            .controller
            .compiled()
            .symbols
            .ids_kept_in(&plan.compiled().symbols);
        let report = match self.controller.commit_reload(self.dev.as_mut(), plan) {
            Ok(r) => r,
            Err(e) => {
                let line = e.one_line();
                error!(file = %file, "configuration not applied, the previous one keeps serving: {line}");
                return Err(line);
            }
        };
        let draining =
            self.drains_after_reload(|b| map(&backend_map, b), |r| map(&rule_map, r), &to_drain);
        self.tables_changed();
        // Rule and backend ids may mean other services now.
        self.policy.invalidate();
        if renumbered {
            // Fragment decisions hold ids; a datagram in flight is better dropped (its later
            // fragments time out, counted) than sent to whatever now has its old id.
            self.punts.forget_fragments();
        }
        let remapped = match self
            .conns
            .rewrite_renumbered(self.dev.as_mut(), &remap, host_secs())
        {
            Ok(n) => n,
            Err(e) => {
                self.device_error("rewriting renumbered connections failed", &e);
                0
            }
        };
        info!(
            file = %file,
            generation = report.generation,
            changed_entries = report.changed_entries,
            evicted,
            draining,
            remapped,
            "configuration reloaded"
        );
        Ok(ReloadReport {
            generation: report.generation,
            changed_entries: report.changed_entries,
            evicted,
            draining,
            remapped,
        })
    }

    /// The drains after a reload's tables serve: the ones under way follow the renumbering, end
    /// where the backend is a member of its rule's pool again (re-added while draining: its
    /// connections simply continue), and `new` (rule, backend, timeout seconds; new ids)
    /// start. Returns how many started.
    fn drains_after_reload(
        &mut self,
        backend: impl Fn(u16) -> Option<u16>,
        rule: impl Fn(u16) -> Option<u16>,
        new: &[(u16, u16, u32)],
    ) -> usize {
        self.conns.remap_drains(backend, rule);
        let controller = &self.controller;
        let back = self.conns.cancel_drains(|(r, b), d| {
            d.cause == DrainCause::Removed && controller.connection_pool(r, b).is_some()
        });
        if back > 0 {
            info!(
                pairs = back,
                "backends back in their service: their connections stop draining"
            );
        }
        let now = host_secs();
        for &(r, b, secs) in new {
            self.conns
                .drain(r, b, now.saturating_add(secs), DrainCause::Removed);
        }
        new.len()
    }

    /// What a new serving table means for connections, after every load: the idle timeout
    /// and tracking policy of each rule, and the failover or failback of backend services
    /// ([`tracking::failover_switches`]).
    fn tables_changed(&mut self) {
        let c = &self.controller;
        self.conns.set_tables(c.serving());
        self.conns
            .set_rule_tracking(tracking::rule_tracking(c.config(), c.compiled()));
        let states = tracking::failover_states(c.compiled(), c.serving());
        let switches =
            tracking::failover_switches(c.config(), c.compiled(), &self.failover_states, &states);
        self.failover_states = states;
        let now = host_secs();
        for s in &switches {
            self.failover_switch(s, now);
        }
    }

    /// A failover or failback: drains of the set that serves again end; the connections of the
    /// set that stopped serving end now (`disableConnectionDrainOnFailover`) or drain for
    /// [`FAILOVER_DRAINING_TIMEOUT_SECS`].
    fn failover_switch(&mut self, s: &FailoverSwitch, now: u32) {
        self.conns.cancel_drains(|(r, b), d| {
            d.cause == DrainCause::Failover && s.rules.contains(&r) && s.started.contains(&b)
        });
        let pairs: BTreeSet<(u16, u16)> = s
            .rules
            .iter()
            .flat_map(|&r| s.stopped.iter().map(move |&b| (r, b)))
            .collect();
        let what = if s.to_failover {
            "failover"
        } else {
            "failback"
        };
        if s.evict_now {
            match self
                .conns
                .evict_pairs(self.dev.as_mut(), &pairs, EvictCause::Failover)
            {
                Ok(n) => info!(
                    service = %s.service,
                    evicted = n,
                    "{what}: connections of the backends that stopped serving end (disableConnectionDrainOnFailover)"
                ),
                Err(e) => self.device_error("evicting connections on a failover failed", &e),
            }
        } else {
            let deadline = now.saturating_add(FAILOVER_DRAINING_TIMEOUT_SECS);
            for &(r, b) in &pairs {
                self.conns.drain(r, b, deadline, DrainCause::Failover);
            }
            info!(
                service = %s.service,
                drain_secs = FAILOVER_DRAINING_TIMEOUT_SECS,
                "{what}: connections of the backends that stopped serving drain"
            );
        }
    }

    /// The connection ageing pass at host time `now` (seconds): connections idle (or closed)
    /// longer than their pool's timeout leave, then the drains whose deadline passed end
    /// ([`Engine::expire_drains`]). [`Engine::step`] runs it every
    /// [`EngineOptions::age_every`] on the wall clock.
    pub fn age_at(&mut self, now: u32) {
        self.set_host_time(now);
        match self.conns.age(self.dev.as_mut(), now) {
            Ok(r) if r.evicted > 0 => {
                debug!(evicted = r.evicted, scanned = r.scanned, "aged connections")
            }
            Ok(_) => {}
            Err(e) => self.device_error("ageing connections failed", &e),
        }
        self.expire_drains(now);
    }

    /// The stamp of the connections the NIC learns from now on (`dma.host_time`, a posted
    /// write). Written at start too: the register keeps whatever the last nlbd wrote (or 0 on
    /// a fresh card), and connections learned before the first ageing pass would carry it.
    fn set_host_time(&mut self, now: u32) {
        if let Some((d, rings)) = nlb_driver::rings::split(&mut self.dev) {
            match rings.set_host_time(d, now) {
                Ok(()) => self.host_stamp = now,
                Err(e) => self.device_error("writing the host time failed", &e),
            }
        }
    }

    /// Ends the drains whose deadline is `now` (host seconds) or earlier (their connections are
    /// evicted), then takes the deleted instances nothing drains to any more out of the tables.
    pub fn expire_drains(&mut self, now: u32) {
        match self.conns.expire_drains(self.dev.as_mut(), now) {
            Ok(n) if n > 0 => info!(evicted = n, "draining timeouts ran out"),
            Ok(_) => {}
            Err(e) => self.device_error("evicting drained connections failed", &e),
        }
        let conns = &self.conns;
        match self
            .controller
            .release_backends(self.dev.as_mut(), |id| conns.draining_backend(id))
        {
            Some(Ok(r)) => {
                self.tables_changed();
                info!(
                    generation = r.generation,
                    "drained backends left the tables"
                );
            }
            Some(Err(e)) => self.device_error(
                "loading tables without drained backends failed (retrying)",
                &e,
            ),
            None => {}
        }
    }

    /// The engine's state; with `counters`, the device's counters are read too.
    pub fn status(&mut self, counters: bool) -> EngineStatus {
        let counters = if counters {
            match self.read_counters() {
                Ok(c) => Some(c),
                Err(e) => {
                    self.device_error("reading counters failed", &e);
                    None
                }
            }
        } else {
            None
        };
        let tables_digest = self.serving_tables_digest();
        let (rings, hw_learn, carried) = match nlb_driver::rings::split(&mut self.dev) {
            Some((_, r)) => (true, r.hw_learn(), r.carried()),
            None => (false, false, Vec::new()),
        };
        let pcie = self.dev.pcie();
        let mmio = self.mmio_use();
        let c = &self.controller;
        let ct = self.conns.conntrack();
        EngineStatus {
            rings,
            carried,
            hw_learn,
            pcie,
            mmio,
            device: self.dev.describe(),
            profile: self.info.profile.name,
            config_file: c.config().file.clone(),
            config_digest: c.compiled().config_digest[..6]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            tables_digest,
            generation: c.loader().generation(),
            build_id: self.info.firmware.build_id,
            active_bank: c.loader().active_bank(),
            load_pending: c.load_pending(),
            assumed_targets: c.assumed_targets(),
            controller: c.stats().clone(),
            pools: c.compiled().pools.clone(),
            failover_ratios: c
                .config()
                .target_pools
                .iter()
                .filter_map(|p| Some((p.name.clone(), p.failover_ratio.as_ref()?.value())))
                .collect(),
            health: c.health().clone(),
            learn: self.conns.stats(),
            pinned: self.conns.pinned_stats(),
            conntrack: ct.stats(),
            conntrack_entries: ct.valid_count(),
            draining_pairs: self.conns.drains().len(),
            kept_backends: c.kept_backends().len(),
            conntrack_capacity: (ct.buckets() * ct.ways()) as usize,
            punts: self.punts.stats().clone(),
            fragments: self.punts.fragment_stats(),
            fragment_datagrams: self.punts.tracker().datagrams(),
            fragment_buffered_bytes: self.punts.tracker().buffered_bytes(),
            device_errors: self.device_errors,
            uptime: self.started.elapsed(),
            counters,
            policy: self.policy.stats().clone(),
            policy_refresh: self.opts.policy_refresh,
            services: c
                .compiled()
                .service_pools()
                .into_iter()
                .filter_map(|name| {
                    let compiled = c.compiled();
                    Some(ServiceStatus {
                        policy: compiled.service_policy(&name)?.clone(),
                        locality: compiled.service_locality(&name)?.clone(),
                        groups: compiled.service_groups(&name)?,
                        observed: compiled.service_observed(&name).map(per_group),
                        served: compiled.service_decision(&name).map(per_group),
                        refreshed_at: compiled.service_refreshed_at(&name).unwrap_or(0.0),
                        name,
                    })
                })
                .collect(),
        }
    }

    /// [`EngineStatus::tables_digest`], computed again only when a load or a reload changed
    /// what serves.
    fn serving_tables_digest(&mut self) -> String {
        let c = &self.controller;
        let bank = c.loader().active_bank();
        let key = (c.loader().generation(), bank, c.compiled().config_digest);
        if let Some((k, d)) = &self.tables_digest {
            if *k == key {
                return d.clone();
            }
        }
        let digest = tables_digest(c.compiled(), c.loader().shadow(bank));
        self.tables_digest = Some((key, digest.clone()));
        digest
    }

    /// [`Command::Prepare`]: the tables a reload to `config` (or, with None, a health change
    /// to `snapshot`) would load, their digest, and what this host publishes until they
    /// serve. Nothing is loaded and nothing changes here.
    pub fn prepare(
        &mut self,
        config: Option<(Config, Option<Symbols>)>,
        snapshot: &HealthSnapshot,
    ) -> Result<PreparedTables, String> {
        let (next, maps) = match config {
            Some((config, ids)) => {
                let mut plan = self
                    .controller
                    .prepare_reload_with_ids(config, snapshot, ids.as_ref())
                    .map_err(|e| e.one_line())?;
                let maps = (
                    std::mem::take(&mut plan.rule_map),
                    std::mem::take(&mut plan.backend_map),
                );
                (plan.into_compiled(), Some(maps))
            }
            None => (
                self.controller
                    .preview_health(snapshot)
                    .map_err(|e| e.one_line())?,
                None,
            ),
        };
        let digest = tables_digest(&next, &next.tables);
        let serving_digest = self.serving_tables_digest();
        if digest == serving_digest {
            return Ok(PreparedTables {
                digest,
                changed: false,
                serving_digest,
                pinned: Vec::new(),
            });
        }
        let get = |m: &[Option<u16>], id: u16| m.get(usize::from(id)).copied().flatten();
        let map = |rule: u16, backend: u16| match &maps {
            Some((rules, backends)) => Some((get(rules, rule)?, get(backends, backend)?)),
            None => Some((rule, backend)),
        };
        let c = &self.controller;
        let pinned = self.conns.prepared_pinned(
            (c.serving(), &c.compiled().symbols),
            (&next.tables, &next.symbols),
            &map,
        );
        Ok(PreparedTables {
            digest,
            changed: true,
            serving_digest,
            pinned,
        })
    }

    /// Reads the counters of every configured rule and backend, every reason and verdict.
    pub fn read_counters(&mut self) -> Result<DeviceCounters, DeviceError> {
        let symbols = &self.controller.compiled().symbols;
        let rules = read_block(
            self.dev.as_mut(),
            CounterKind::Rule,
            symbols.rules.len() as u32,
        )?;
        let backends = read_block(
            self.dev.as_mut(),
            CounterKind::Backend,
            symbols.backends.len() as u32,
        )?;
        let reasons = read_block(
            self.dev.as_mut(),
            CounterKind::Reason,
            Reason::ALL.len() as u32,
        )?;
        let verdicts = read_block(
            self.dev.as_mut(),
            CounterKind::Verdict,
            Verdict::ALL.len() as u32,
        )?;
        let symbols = &self.controller.compiled().symbols;
        Ok(DeviceCounters {
            // Free ids (empty names) have no counters worth showing.
            rules: symbols
                .rules
                .iter()
                .cloned()
                .zip(rules)
                .filter(|(n, _)| !n.is_empty())
                .collect(),
            backends: symbols
                .backends
                .iter()
                .cloned()
                .zip(backends)
                .filter(|(n, _)| !n.is_empty())
                .collect(),
            reasons: Reason::ALL.iter().map(|r| r.name()).zip(reasons).collect(),
            verdicts: Verdict::ALL
                .iter()
                .map(|v| v.name())
                .zip(verdicts)
                .collect(),
        })
    }

    /// At most `limit` connections by names, those with an entry index of `from` or more.
    pub fn connections_page(&self, from: u32, limit: usize) -> ConnectionList {
        let ct = self.conns.conntrack();
        let symbols = &self.controller.compiled().symbols;
        let now = host_secs();
        let name = |v: Option<&str>, id: u16| v.map_or_else(|| format!("#{id}"), str::to_string);
        let mut valid = ct.scan().skip_while(|(index, _)| *index < from);
        let entries = valid
            .by_ref()
            .take(limit)
            .map(|(index, e)| ConnectionInfo {
                index,
                protocol: e.protocol,
                client: u128_to_addr(e.src_addr),
                client_port: e.src_port,
                vip: u128_to_addr(e.dst_addr),
                vip_port: e.dst_port,
                backend: name(symbols.backend(e.backend), e.backend),
                rule: name(symbols.rule(e.rule), e.rule),
                closed: e.flags & FLAG_CLOSED != 0,
                age_secs: now.saturating_sub(e.timestamp),
            })
            .collect();
        ConnectionList {
            total: ct.valid_count(),
            capacity: (ct.buckets() * ct.ways()) as usize,
            entries,
            next: valid.next().map(|(index, _)| index),
        }
    }

    /// [`Command::Flash`]: the bitstream into the user slot, then a reboot into it. Until the
    /// reboot the card runs its old image with everything this engine loaded, so any error
    /// before it leaves the host serving as it was.
    fn flash(&mut self, image: &nlb_driver::flash::Bitstream) -> Result<Flashed, FlashFailed> {
        use nlb_driver::flash::{flash_image, reboot, FlashOptions, RebootOptions, Slot};
        let kept = |message: String| FlashFailed {
            card_reset: false,
            message,
        };
        if self.card_replaced {
            return Err(FlashFailed {
                card_reset: true,
                message: "the card was flashed and rebooted already; nlbd is restarting".into(),
            });
        }
        let Some(build) = image.usr_access else {
            return Err(kept("the bitstream carries no USR_ACCESS word: the card's build id could not show that it runs it".into()));
        };
        let started = Instant::now();
        let opts = FlashOptions {
            slot: Slot::User,
            force: false,
            max_retries: 3,
        };
        let written = flash_image(self.dev.as_mut(), image, &opts, &mut |_| {}).map_err(|e| {
            kept(format!(
                "flashing failed, the card keeps running its image: {e}"
            ))
        })?;
        let flash_secs = started.elapsed().as_secs_f64();
        info!(
            bytes = written.bytes,
            crc32 = format_args!("{:08x}", written.crc32),
            "bitstream written to the user slot in {flash_secs:.1} s; rebooting the card into it"
        );
        // From here the card loses its tables and connections, whatever the reboot's outcome.
        self.card_replaced = true;
        let r = reboot(
            self.dev.as_mut(),
            &RebootOptions {
                slot: Slot::User,
                expect_build_id: Some(build),
                ..RebootOptions::default()
            },
        )
        .map_err(|e| FlashFailed {
            card_reset: true,
            message: format!("the card was rebooted into the new image and it failed: {e}"),
        })?;
        Ok(Flashed {
            bytes: written.bytes,
            flash_secs,
            reboot_secs: r.took.as_secs_f64(),
            build_before: r.before.build_id,
            build_after: r.after.build_id,
        })
    }

    /// Handles one command; `false` for [`Command::Shutdown`].
    pub fn handle(&mut self, cmd: Command) -> bool {
        match cmd {
            // The card runs another image and nlbd is restarting: nothing more goes to it.
            Command::Health { .. } if self.card_replaced => {}
            Command::Reload { reply, .. } if self.card_replaced => {
                let _ = reply.send(Err(
                    "the card was flashed and rebooted; nlbd is restarting to load it".into(),
                ));
            }
            Command::Health { changes, snapshot } => {
                self.apply_health(&changes, &snapshot);
            }
            Command::Reload {
                config,
                snapshot,
                ids,
                reply,
            } => {
                let r = self.reload_with_ids(*config, &snapshot, ids.as_deref());
                let _ = reply.send(r);
            }
            Command::Status { counters, reply } => {
                let _ = reply.send(Box::new(self.status(counters)));
            }
            Command::Connections { from, limit, reply } => {
                let _ = reply.send(self.connections_page(from, limit));
            }
            Command::Config { reply } => {
                let _ = reply.send(Box::new(self.controller.config().clone()));
            }
            Command::Explain { flow, reply } => {
                let _ = reply.send(Box::new(self.explain(&flow)));
            }
            Command::Flash { image, reply } => {
                let _ = reply.send(self.flash(&image));
            }
            Command::Pinned { again, reply } => {
                if again {
                    self.conns.republish_pinned();
                }
                let digest = self.serving_tables_digest();
                let c = &self.controller;
                let conns = self.conns.own_pinned(c.serving(), &c.compiled().symbols);
                let _ = reply.send((digest, conns));
            }
            Command::Mirror { reply, .. } if self.card_replaced => {
                let _ = reply.send(Err(
                    "the card was flashed and rebooted; nlbd is restarting to load it".into(),
                ));
            }
            Command::Mirror {
                connections,
                restore,
                reply,
            } => {
                let symbols = &self.controller.compiled().symbols;
                let now = host_secs();
                let restored = self
                    .conns
                    .restore_pinned(self.dev.as_mut(), &restore, symbols, now);
                let r = restored
                    .and_then(|n| {
                        let mut r =
                            self.conns
                                .mirror(self.dev.as_mut(), &connections, symbols, now)?;
                        r.restored = n;
                        Ok(r)
                    })
                    .map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
            Command::Prepare {
                config,
                snapshot,
                reply,
            } => {
                let _ = reply.send(self.prepare(config.map(|c| *c), &snapshot));
            }
            Command::Shutdown => return false,
        }
        true
    }

    /// Runs until [`Command::Shutdown`] or until every sender is gone; then handles the learn
    /// events still queued and returns its final state. Tables and connections stay in the
    /// NIC, which keeps forwarding.
    pub fn run(mut self, commands: Receiver<Command>) -> EngineStatus {
        let mut batch: Vec<Command> = Vec::new();
        let mut busy = true;
        'outer: loop {
            // Wait only when the last round found nothing to do.
            let first = if busy {
                commands
                    .try_recv()
                    .map_err(|e| e == TryRecvError::Disconnected)
            } else {
                commands
                    .recv_timeout(self.opts.idle_poll)
                    .map_err(|e| e == RecvTimeoutError::Disconnected)
            };
            match first {
                Ok(cmd) => batch.push(cmd),
                Err(true) => break 'outer,
                Err(false) => {}
            }
            if !batch.is_empty() {
                loop {
                    match commands.try_recv() {
                        Ok(cmd) => batch.push(cmd),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => break,
                    }
                }
                if !self.run_commands(&mut batch) {
                    break 'outer;
                }
            }
            busy = self.step().busy();
        }
        // Graceful: the events already queued are installed before leaving.
        for _ in 0..64 {
            if !self.step().busy() {
                break;
            }
        }
        info!(
            generation = self.controller.loader().generation(),
            "engine stopped; tables and connections stay in the NIC"
        );
        self.status(false)
    }

    /// Runs a batch of commands: consecutive health batches are merged into one recompile
    /// and load (the latest snapshot wins).
    fn run_commands(&mut self, batch: &mut Vec<Command>) -> bool {
        let mut health: Option<(Vec<HealthChange>, HealthSnapshot)> = None;
        for cmd in batch.drain(..) {
            match cmd {
                Command::Health { changes, snapshot } => match &mut health {
                    Some((all, snap)) => {
                        all.extend(changes);
                        *snap = snapshot;
                    }
                    None => health = Some((changes, snapshot)),
                },
                other => {
                    if let Some((changes, snapshot)) = health.take() {
                        self.handle(Command::Health { changes, snapshot });
                    }
                    if !self.handle(other) {
                        return false;
                    }
                }
            }
        }
        if let Some((changes, snapshot)) = health {
            self.handle(Command::Health { changes, snapshot });
        }
        true
    }
}

/// The digest of `tables` loaded with `compiled`'s settings and names (hex SHA-256 of the
/// image, [`flowtable_compiler::Image::tables_digest`]): what a fleet's hosts compare.
fn tables_digest(compiled: &flowtable_compiler::Compiled, tables: &nlb_hw::Tables) -> String {
    let image = flowtable_compiler::Image {
        header: compiled.image_header(0),
        tables: tables.clone(),
        nic: compiled.nic,
        symbols: compiled.symbols.clone(),
    };
    image
        .tables_digest()
        .map(|d| d.iter().map(|b| format!("{b:02x}")).collect::<String>())
        .unwrap_or_default()
}

/// A decision without its per-endpoint shares (a status of 65,536 backends need not copy them).
fn per_group(d: &Decision) -> Decision {
    Decision {
        endpoint_shares: Default::default(),
        groups: d.groups.clone(),
        drop: d.drop,
        failover_serves: d.failover_serves,
        rule: d.rule.clone(),
        steps: d.steps.clone(),
    }
}

/// Reads counters `0..count` of one kind (packets, bytes, punts, drops), one batch.
fn read_block(
    dev: &mut dyn Device,
    kind: CounterKind,
    count: u32,
) -> Result<Vec<CounterValues>, DeviceError> {
    Ok(read_counters(dev, kind, 0..count, false)?
        .into_iter()
        .map(|c| CounterValues {
            packets: c.packets,
            bytes: c.bytes,
            punts: c.punts,
            drops: c.drops,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::tests::{change, config, snapshot, CONFIG};
    use crate::health::Health::{Healthy, Unhealthy};
    use nlb_driver::model::ModelHandle;
    use nlb_hw::Profile;

    /// What a fleet's hosts wait on before they load new tables (make-before-break): the
    /// digest of prepared tables is the one the engine reports once a reload or a health
    /// change with the same inputs loads them, and preparing loads nothing.
    #[test]
    fn prepared_tables_are_the_tables_that_load() {
        let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
        let cfg = config(CONFIG);
        let up = [
            ("web", "a", Healthy),
            ("web", "b", Healthy),
            ("web", "c", Healthy),
            ("spare", "d", Healthy),
        ];
        let s = snapshot(&cfg, &up);
        let options = EngineOptions {
            rings: None,
            ..EngineOptions::default()
        };
        let (mut engine, _) = Engine::start(Box::new(sim.clone()), cfg, &s, options).unwrap();
        let before = engine.status(false).tables_digest;
        let generation = engine.controller().loader().generation();

        // The same inputs: nothing to change.
        let same = engine.prepare(None, &s).unwrap();
        assert_eq!(
            (same.changed, same.digest.as_str()),
            (false, before.as_str())
        );

        // A health change: prepared, not loaded; then loaded by the health path.
        let down = [up[0], ("web", "b", Unhealthy), up[2], up[3]];
        let s2 = snapshot(engine.controller().config(), &down);
        let p = engine.prepare(None, &s2).unwrap();
        assert!(p.changed);
        assert_ne!(p.digest, before);
        assert_eq!(engine.controller().loader().generation(), generation);
        assert_eq!(engine.status(false).tables_digest, before);
        let t0 = Instant::now();
        engine.apply_health(&[change("web", "b", Unhealthy, t0)], &s2);
        assert_eq!(engine.status(false).tables_digest, p.digest);

        // A new configuration: prepared, then loaded by the reload path.
        let text = CONFIG.replace("instances: [a, b, c]", "instances: [a, b, c, d]");
        let p = engine.prepare(Some((config(&text), None)), &s2).unwrap();
        assert!(p.changed);
        engine.reload(config(&text), &s2).unwrap();
        assert_eq!(engine.status(false).tables_digest, p.digest);
    }
}
