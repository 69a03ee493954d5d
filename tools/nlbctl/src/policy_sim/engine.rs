//! The closed loop in virtual time: connections arrive as TCP SYN frames that the golden model
//! forwards by the compiled tables; the slow path's part (installing learned connections,
//! counting live connections, refreshing the policy, delta loads) runs as nlbd's code runs it.
//!
//! One event queue, in whole microseconds, no clock read and no sleep: a run is a function of
//! the scenario and its seed. Events at the same microsecond go in a fixed order: connection
//! ends, health events, the refresh, then arrivals.
//!
//! The device is a fresh `ModelHandle` (the model, as after reset) that the driver's own
//! `Loader` loads and delta-loads, and whose connection table the driver's own `Conntrack`
//! manager fills from the learn queue, as nlbd's learn path does. The live counts the policy
//! gets are read from that host copy of the connection table, which is where nlbd counts
//! them. The simulator keeps, per connection, only what the client side knows: its addresses,
//! when it ends, and which backend its SYN reached (read back from the output frame). At the
//! end it sends a FIN, which must reach the same backend through the connection table
//! whatever weights changed meanwhile (counted as `moved` if not), and then removes the entry
//! as the host's ageing of closed connections would.

use super::scenario::{Lifetime, Scenario, MICROS};
use etherparse::{LinkSlice, NetSlice, PacketBuilder, SlicedPacket};
use flowtable_compiler::policy::Decision;
use flowtable_compiler::{compile, BackendHealth, CompileOptions, Compiled, HealthState, LiveLoad};
use nlb_control::splitmix::SplitMix64;
use nlb_driver::conntrack::{ConntrackError, Installed, NewConnection};
use nlb_driver::queues::{QueueError, Queues};
use nlb_driver::{discover, Conntrack, LoadError, Loader, LoaderOptions, ModelHandle};
use nlb_hw::enums::{Delivery, Event, Verdict};
use nlb_hw::layouts::LearnEvent;
use nlb_hw::FlowKey;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::net::IpAddr;

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration does not compile (capacity, for example).
    #[error("{0}")]
    Compile(#[from] flowtable_compiler::Error),
    /// A table load failed.
    #[error("table load: {0}")]
    Load(#[from] LoadError),
    /// The connection table refused an operation.
    #[error("connection table: {0}")]
    Conntrack(#[from] ConntrackError),
    /// The learn queue could not be read.
    #[error("learn queue: {0}")]
    Queue(#[from] QueueError),
    /// Something that cannot happen did.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What kind of moment a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A refresh: live counts → `rebalance`.
    Refresh,
    /// A health event: `apply_health`, then `rebalance`.
    Health,
}

impl RecordKind {
    /// As the trace writes it.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Refresh => "refresh",
            RecordKind::Health => "health",
        }
    }
}

/// One group at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSample {
    /// Group name.
    pub name: String,
    /// Live connections the policy was given.
    pub live: u64,
    /// Target capacity (connections).
    pub capacity: f64,
    /// live / capacity (`None` for capacity 0 with connections).
    pub utilisation: Option<f64>,
    /// New connections since the previous record that the device sent to it.
    pub arrived: u64,
    /// Share of the new connections since the previous record that the device sent to it
    /// (`None` when none arrived).
    pub observed_share: Option<f64>,
    /// Share the policy decided now (applied or not).
    pub policy_share: f64,
    /// Share of the decision the tables serve after this moment.
    pub served_share: f64,
    /// Share of the serving Maglev slots that are its backends', read from the device's
    /// active bank.
    pub slot_share: f64,
    /// Drained by the automatic capacity drain.
    pub drained: bool,
    /// Healthy share below the failover threshold.
    pub below_threshold: bool,
    /// Tier the policy placed it in.
    pub tier: Option<usize>,
    /// Healthy endpoints.
    pub healthy: usize,
    /// Endpoints.
    pub endpoints: usize,
    /// Its endpoints' served weights changed at this moment.
    pub weight_change: bool,
}

/// The state after one refresh or health event.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Virtual time, microseconds.
    pub t: u64,
    /// Refresh or health event.
    pub kind: RecordKind,
    /// The health event's name.
    pub event: Option<String>,
    /// New connections since the previous record.
    pub arrived: u64,
    /// Of those, dropped by the device.
    pub dropped: u64,
    /// Table entries the compiler changed.
    pub changed_entries: usize,
    /// Table entries the loader wrote (0 without a load).
    pub written_entries: usize,
    /// Live connections in the connection table.
    pub live: u64,
    /// The rule that decided the policy's shares now, with its SPEC number
    /// (`flowtable_compiler::policy::Decision::rule`).
    pub rule: String,
    /// Per group, by name.
    pub groups: Vec<GroupSample>,
}

/// One group over one phase.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PhaseGroup {
    /// New connections the device sent to it.
    pub arrived: u64,
    /// Highest utilisation at a refresh of the phase.
    pub peak_utilisation: f64,
    /// Mean utilisation over the phase's refreshes.
    pub mean_utilisation: f64,
    /// Served share at the phase's last record.
    pub served_share_at_end: f64,
    /// Records of the phase at which its weights changed.
    pub weight_changes: u64,
}

/// A stretch of the scenario between two of its events (a rate step or a health event).
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// What started it.
    pub name: String,
    /// Start, microseconds.
    pub from: u64,
    /// End, microseconds (exclusive).
    pub to: u64,
    /// New connections.
    pub arrived: u64,
    /// Of those, dropped.
    pub dropped: u64,
    /// The rule that decided the shares the tables serve at the phase's last record.
    pub rule_at_end: String,
    /// Per group, in [`Outcome::groups`] order.
    pub groups: Vec<PhaseGroup>,
}

/// Figures of the whole run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Totals {
    /// Connections opened (SYNs sent).
    pub connections: u64,
    /// SYNs the device dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// SYNs neither forwarded nor dropped (punted or passed), by verdict and reason.
    pub other: BTreeMap<String, u64>,
    /// Connections in the connection table whose FIN reached another backend than their SYN
    /// (0 unless installing connections or delta loads are broken).
    pub moved: u64,
    /// Connections the table had no room for whose FIN reached another backend (such a flow
    /// follows the Maglev slots, which weight changes move).
    pub moved_untracked: u64,
    /// Learned connections the connection table had no room for.
    pub bucket_full: u64,
    /// Delta loads (after the first load).
    pub delta_loads: u64,
    /// Table entries the compiler changed, over all refreshes and health events.
    pub entries_changed: u64,
    /// Table entries the loader wrote in delta loads.
    pub entries_written: u64,
    /// Most live connections at a refresh.
    pub peak_live: u64,
}

/// One group over the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupTotals {
    /// Group name.
    pub name: String,
    /// Target capacity (connections).
    pub capacity: f64,
    /// New connections the device sent to it.
    pub connections: u64,
    /// Highest utilisation at a refresh.
    pub peak_utilisation: f64,
    /// Records at which its weights changed.
    pub weight_changes: u64,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Scenario name.
    pub name: String,
    /// Scenario file.
    pub file: String,
    /// Seed used.
    pub seed: u64,
    /// Virtual time simulated, microseconds.
    pub duration: u64,
    /// Refresh interval, microseconds.
    pub refresh: u64,
    /// The backend service.
    pub service: String,
    /// Its groups, by name.
    pub groups: Vec<String>,
    /// Every refresh and health event, in time order.
    pub records: Vec<Record>,
    /// The phases.
    pub phases: Vec<Phase>,
    /// Per group.
    pub group_totals: Vec<GroupTotals>,
    /// The run's figures.
    pub totals: Totals,
    /// Health events: time and name.
    pub health_marks: Vec<(u64, String)>,
    /// Steps of the arrival rate after the start: time and name.
    pub rate_marks: Vec<(u64, String)>,
}

impl Outcome {
    /// The records of a group, as (time in seconds, sample).
    pub fn series(&self, group: &str) -> Vec<(f64, &GroupSample)> {
        self.records
            .iter()
            .filter_map(|r| {
                r.groups
                    .iter()
                    .find(|g| g.name == group)
                    .map(|g| (r.t as f64 / MICROS, g))
            })
            .collect()
    }

    /// The phase named `name` (the first, if several are).
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// Index of a group in [`Outcome::groups`].
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g == name)
    }
}

const CLIENT_MAC: [u8; 6] = [0x02, 0xc1, 0x1e, 0x00, 0x00, 0x01];

fn mac_bytes(mac: u64) -> [u8; 6] {
    let b = mac.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_u64(b: [u8; 6]) -> u64 {
    b.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x))
}

/// The 128-bit form the tables hold addresses in (IPv4 mapped).
fn addr128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// One connection, as its client knows it.
#[derive(Debug, Clone)]
struct Conn {
    src: IpAddr,
    src_port: u16,
    /// Backend id its SYN reached.
    backend: u16,
    /// The connection-table key of its learn event (when one came).
    key: Option<FlowKey>,
    /// Installed in the connection table.
    tracked: bool,
}

/// The simulator's state.
struct Sim<'s> {
    s: &'s Scenario,
    compiled: Compiled,
    health: HealthState,
    dev: ModelHandle,
    loader: Loader,
    ct: Conntrack,
    queues: Queues,
    events: Vec<LearnEvent>,
    outcomes: Vec<Installed>,
    buf: Vec<u8>,
    arrivals_rng: SplitMix64,
    lifetimes_rng: SplitMix64,
    clients_rng: SplitMix64,
    /// Ends of live connections: (end time, sequence number).
    ends: BinaryHeap<Reverse<(u64, u64)>>,
    conns: BTreeMap<u64, Conn>,
    in_use: HashSet<(IpAddr, u16)>,
    next_seq: u64,
    pool_id: u16,
    vip: IpAddr,
    nic_mac: [u8; 6],
    /// Group index of each backend id.
    group_of: BTreeMap<u16, usize>,
    groups: Vec<String>,
    members: Vec<Vec<String>>,
    /// Since the previous record: arrivals per group, and drops.
    window_arrived: Vec<u64>,
    window_total: u64,
    window_dropped: u64,
    phase_of_now: usize,
    phases: Vec<Phase>,
    utilisation_sums: Vec<Vec<(f64, u64)>>,
    records: Vec<Record>,
    totals: Totals,
}

/// Runs a scenario to its end.
pub fn run(s: &Scenario) -> Result<Outcome, SimError> {
    let mut sim = Sim::new(s)?;
    sim.run()?;
    Ok(sim.finish())
}

impl<'s> Sim<'s> {
    fn new(s: &'s Scenario) -> Result<Sim<'s>, SimError> {
        let health = HealthState::new();
        let compiled = compile(&s.config, &health, &CompileOptions { profile: s.profile })?;
        let internal = |e: &dyn std::fmt::Display| SimError::Internal(e.to_string());
        let mut dev = ModelHandle::new(s.profile);
        let info = discover(&mut dev).map_err(|e| internal(&e))?;
        let mut loader = Loader::attach(&mut dev, info.profile, LoaderOptions::default())?;
        loader.load(&mut dev, &compiled.tables, &compiled.nic)?;
        let ct = Conntrack::attach(&mut dev, &info, 0)?;
        let pool_id = compiled
            .symbols
            .pool_id(&s.service)
            .ok_or_else(|| SimError::Internal(format!("no pool `{}`", s.service)))?;
        let groups: Vec<String> = s.groups.iter().map(|(g, _)| g.clone()).collect();
        let members: Vec<Vec<String>> = s.groups.iter().map(|(_, m)| m.clone()).collect();
        let mut group_of = BTreeMap::new();
        for (gi, (_, ms)) in s.groups.iter().enumerate() {
            for m in ms {
                if let Some(id) = compiled.symbols.backend_id(m) {
                    group_of.entry(id).or_insert(gi);
                }
            }
        }
        let phases = phases(s, groups.len());
        let n = groups.len();
        let nic_mac = mac_bytes(s.config.nic.mac);
        Ok(Sim {
            s,
            compiled,
            health,
            dev,
            loader,
            ct,
            queues: Queues::new(),
            events: Vec::new(),
            outcomes: Vec::new(),
            buf: vec![0u8; firmware_sim::action::MAX_FRAME],
            arrivals_rng: SplitMix64::new(s.seed, 1),
            lifetimes_rng: SplitMix64::new(s.seed, 2),
            clients_rng: SplitMix64::new(s.seed, 3),
            ends: BinaryHeap::new(),
            conns: BTreeMap::new(),
            in_use: HashSet::new(),
            next_seq: 0,
            pool_id,
            vip: s.vip,
            nic_mac,
            group_of,
            groups,
            members,
            window_arrived: vec![0; n],
            window_total: 0,
            window_dropped: 0,
            phase_of_now: 0,
            utilisation_sums: vec![vec![(0.0, 0); n]; phases.len()],
            phases,
            records: Vec::new(),
            totals: Totals::default(),
        })
    }

    fn run(&mut self) -> Result<(), SimError> {
        let s = self.s;
        let mut next_refresh: u64 = 0;
        let mut next_health = 0usize;
        let mut next_arrival = self.next_arrival(0);
        loop {
            // (time, order): ends, health, refresh, arrivals.
            let mut candidates: Vec<(u64, u8)> = vec![(next_refresh, 2)];
            if let Some(Reverse((t, _))) = self.ends.peek() {
                candidates.push((*t, 0));
            }
            if let Some(e) = s.health.get(next_health) {
                candidates.push((e.at, 1));
            }
            if let Some(t) = next_arrival {
                candidates.push((t, 3));
            }
            let Some(&(t, what)) = candidates.iter().min() else {
                break;
            };
            if t > s.duration {
                break;
            }
            self.phase_of_now = self.phases.iter().rposition(|p| p.from <= t).unwrap_or(0);
            match what {
                0 => self.end_connection(t)?,
                1 => {
                    self.health_event(next_health, t)?;
                    next_health += 1;
                }
                2 => {
                    self.refresh(t, RecordKind::Refresh, None, 0, None)?;
                    next_refresh += s.refresh;
                }
                _ => {
                    self.open_connection(t)?;
                    next_arrival = self.next_arrival(t);
                }
            }
        }
        Ok(())
    }

    /// The next arrival after `from` (a Poisson process whose rate steps; memoryless, so a
    /// draw that crosses a step starts again at the step).
    fn next_arrival(&mut self, from: u64) -> Option<u64> {
        let steps = &self.s.arrivals;
        let mut t = from;
        loop {
            let i = steps.iter().rposition(|st| st.at <= t)?;
            let boundary = steps.get(i + 1).map_or(u64::MAX, |st| st.at);
            let rate = steps[i].rate;
            if rate > 0.0 {
                let gap = (self.arrivals_rng.exponential(1.0 / rate) * MICROS).round() as u64;
                let at = t.saturating_add(gap.max(1));
                if at < boundary {
                    return Some(at);
                }
            }
            if boundary == u64::MAX {
                return None;
            }
            t = boundary;
        }
    }

    fn lifetime(&mut self) -> u64 {
        let secs = match self.s.lifetime {
            Lifetime::Fixed(m) => m,
            Lifetime::Uniform(a, b) => a + (b - a) * self.lifetimes_rng.unit(),
            Lifetime::Exponential(m) => self.lifetimes_rng.exponential(m),
        };
        ((secs * MICROS).round() as u64).max(1)
    }

    fn client(&mut self) -> (IpAddr, u16) {
        loop {
            let r = &mut self.clients_rng;
            let src = match self.vip {
                // 198.18.0.0/15 (RFC 2544, benchmarking).
                IpAddr::V4(_) => {
                    IpAddr::from((0xc612_0000u32 | r.below(1 << 17) as u32).to_be_bytes())
                }
                // 2001:db8::/32 (documentation).
                IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(
                    0x2001_0db8_u128 << 96 | u128::from(r.next_u64()) << 16 | 1,
                )),
            };
            let port = 1024 + r.below(65536 - 1024) as u16;
            if !self.in_use.contains(&(src, port)) {
                return (src, port);
            }
        }
    }

    fn frame(&self, src: IpAddr, src_port: u16, fin: bool) -> Result<Vec<u8>, SimError> {
        let eth = PacketBuilder::ethernet2(CLIENT_MAC, self.nic_mac);
        let l3 = match (src, self.vip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => eth.ipv4(a.octets(), b.octets(), 64),
            (IpAddr::V6(a), IpAddr::V6(b)) => eth.ipv6(a.octets(), b.octets(), 64),
            _ => return Err(SimError::Internal("mixed address families".into())),
        };
        let tcp = l3.tcp(src_port, self.s.port, 1000, 65535);
        let tcp = if fin { tcp.fin().ack(1) } else { tcp.syn() };
        let mut out = Vec::with_capacity(tcp.size(0));
        tcp.write(&mut out, &[])
            .map_err(|e| SimError::Internal(format!("building a frame: {e}")))?;
        Ok(out)
    }

    /// Sends a frame; returns the backend id the output frame went to (decoded from the frame
    /// itself and checked against the pipeline's report), or the verdict and reason.
    fn send(&mut self, frame: &[u8]) -> Result<Result<u16, (Verdict, String)>, SimError> {
        let r = self
            .dev
            .lock()
            .receive(frame, &mut self.buf)
            .map_err(|e| SimError::Internal(format!("model: {e}")))?;
        if r.verdict != Verdict::Forward {
            return Ok(Err((r.verdict, r.reason.name().to_ascii_lowercase())));
        }
        let out = &self.buf[..r.out_len];
        let packet = SlicedPacket::from_ethernet(out)
            .map_err(|e| SimError::Internal(format!("the device's output does not decode: {e}")))?;
        let dst_mac = match &packet.link {
            Some(LinkSlice::Ethernet2(e)) => mac_u64(e.destination()),
            _ => {
                return Err(SimError::Internal(
                    "output frame without Ethernet II".into(),
                ))
            }
        };
        let dst_ip = match &packet.net {
            Some(NetSlice::Ipv4(v4)) => IpAddr::V4(v4.header().destination_addr()),
            Some(NetSlice::Ipv6(v6)) => IpAddr::V6(v6.header().destination_addr()),
            _ => return Err(SimError::Internal("output frame without IP".into())),
        };
        // The backend entries are the address book: a frame still addressed to the VIP went
        // by MAC rewrite (L2 DSR), an encapsulated one to its backend's address.
        let tables = &self.compiled.tables;
        let l2 = tables.pools[usize::from(self.pool_id)].delivery == Delivery::L2Dsr;
        let candidates: Vec<u16> = tables
            .backends
            .iter()
            .enumerate()
            .filter(|(_, b)| b.valid)
            .filter(|(_, b)| {
                if l2 && dst_ip == self.vip {
                    b.mac == dst_mac
                } else {
                    b.addr == addr128(dst_ip)
                }
            })
            .map(|(i, _)| i as u16)
            .collect();
        match r.backend {
            Some(b) if candidates.contains(&b) => Ok(Ok(b)),
            other => Err(SimError::Internal(format!(
                "the output frame (to {dst_ip}, MAC {dst_mac:012x}) matches backends {candidates:?}, the pipeline reported {other:?}"
            ))),
        }
    }

    /// Pops every waiting learn event.
    fn pop_events(&mut self) -> Result<(), SimError> {
        self.events.clear();
        loop {
            let before = self.events.len();
            let n = self.queues.pop_learn(&mut self.dev, 64, &mut self.events)?;
            if n == 0 || self.events.len() == before {
                return Ok(());
            }
        }
    }

    fn now_secs(t: u64) -> u32 {
        (t / 1_000_000) as u32
    }

    fn open_connection(&mut self, t: u64) -> Result<(), SimError> {
        let (src, src_port) = self.client();
        let syn = self.frame(src, src_port, false)?;
        self.totals.connections += 1;
        self.window_total += 1;
        let phase = self.phase_of_now;
        self.phases[phase].arrived += 1;
        let backend = match self.send(&syn)? {
            Ok(b) => b,
            Err((verdict, reason)) => {
                if verdict == Verdict::Drop {
                    *self.totals.dropped.entry(reason).or_default() += 1;
                    self.window_dropped += 1;
                    self.phases[phase].dropped += 1;
                } else {
                    let v = verdict.name().to_ascii_lowercase();
                    *self
                        .totals
                        .other
                        .entry(format!("{v} {reason}"))
                        .or_default() += 1;
                }
                return Ok(());
            }
        };
        if let Some(&g) = self.group_of.get(&backend) {
            self.window_arrived[g] += 1;
            self.phases[phase].groups[g].arrived += 1;
        }
        // The slow path's learn: pop the events, install them.
        self.pop_events()?;
        let learned: Vec<NewConnection> = self
            .events
            .iter()
            .filter(|e| e.event == Event::Learn)
            .map(NewConnection::from)
            .collect();
        let key = learned.first().map(|c| c.key);
        let mut tracked = false;
        if !learned.is_empty() {
            let mut outcomes = std::mem::take(&mut self.outcomes);
            self.ct
                .install_batch(&mut self.dev, &learned, Self::now_secs(t), &mut outcomes)?;
            let full = outcomes
                .iter()
                .filter(|o| matches!(o, Installed::BucketFull { .. }))
                .count();
            self.totals.bucket_full += full as u64;
            tracked = full == 0;
            self.outcomes = outcomes;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let end = t.saturating_add(self.lifetime());
        self.ends.push(Reverse((end, seq)));
        self.in_use.insert((src, src_port));
        self.conns.insert(
            seq,
            Conn {
                src,
                src_port,
                backend,
                key,
                tracked,
            },
        );
        Ok(())
    }

    fn end_connection(&mut self, _t: u64) -> Result<(), SimError> {
        let Some(Reverse((_, seq))) = self.ends.pop() else {
            return Ok(());
        };
        let Some(c) = self.conns.remove(&seq) else {
            return Ok(());
        };
        self.in_use.remove(&(c.src, c.src_port));
        let fin = self.frame(c.src, c.src_port, true)?;
        match self.send(&fin)? {
            Ok(b) if b == c.backend => {}
            _ if c.tracked => self.totals.moved += 1,
            _ => self.totals.moved_untracked += 1,
        }
        self.pop_events()?;
        // The host ages a closed connection out; here at once.
        if let Some(key) = c.key {
            self.ct.evict_batch(&mut self.dev, &[key])?;
        }
        Ok(())
    }

    fn health_event(&mut self, i: usize, t: u64) -> Result<(), SimError> {
        let e = &self.s.health[i];
        for (list, healthy) in [(&e.down, false), (&e.up, true)] {
            for m in list {
                self.health.set_member(
                    &self.s.service,
                    m,
                    BackendHealth {
                        healthy,
                        weight: None,
                    },
                );
            }
        }
        let before = self.served();
        let changed = self.compiled.apply_health(&self.health)?.len();
        self.refresh(
            t,
            RecordKind::Health,
            Some(e.name.clone()),
            changed,
            Some(before),
        )
    }

    /// Live connections per (pool, backend), from the host's copy of the connection table, and
    /// those that closed since the previous refresh, as nlbd counts them.
    fn live_load(&mut self) -> (LiveLoad, u64) {
        let mut live = LiveLoad::new();
        let mut n = 0;
        let closed = self.ct.take_closed();
        let (tables, symbols) = (&self.compiled.tables, &self.compiled.symbols);
        let names = |rule: u16, backend: u16| {
            let pool = tables
                .rules
                .get(usize::from(rule))
                .filter(|r| r.valid)
                .and_then(|r| symbols.pool(r.pool));
            pool.zip(symbols.backend(backend))
        };
        for (_, e) in self.ct.scan() {
            if let Some((pool, backend)) = names(e.rule, e.backend) {
                live.add(pool, backend, 1);
                n += 1;
            }
        }
        live.count_closed();
        for (&(rule, backend), &k) in &closed {
            if let Some((pool, backend)) = names(rule, backend) {
                live.add_closed(pool, backend, u64::from(k));
            }
        }
        (live, n)
    }

    fn served(&self) -> BTreeMap<String, f64> {
        self.compiled
            .service_decision(&self.s.service)
            .map(|d| d.endpoint_shares.clone())
            .unwrap_or_default()
    }

    /// Share of the serving slots per group, read from the device's active bank.
    fn slot_shares(&self) -> Vec<f64> {
        let dev = self.dev.lock();
        let bank = dev.bank(self.loader.active_bank());
        let mut out = vec![0.0; self.groups.len()];
        let Some(p) = bank.pools.get(usize::from(self.pool_id)) else {
            return out;
        };
        let (base, size) = (p.maglev_base as usize, p.maglev_size as usize);
        let Some(slots) = bank.maglev.get(base..base + size) else {
            return out;
        };
        for s in slots {
            if let Some(&g) = self.group_of.get(&s.backend) {
                out[g] += 1.0 / size as f64;
            }
        }
        out
    }

    /// A refresh (or the rebalance after a health event): live counts to the policy, a delta
    /// load when the tables changed, and a record. `changed_by_health` entries and the served
    /// shares `before` come from the health event's own recompile, when there was one.
    fn refresh(
        &mut self,
        t: u64,
        kind: RecordKind,
        event: Option<String>,
        changed_by_health: usize,
        before: Option<BTreeMap<String, f64>>,
    ) -> Result<(), SimError> {
        let before = before.unwrap_or_else(|| self.served());
        let (live, live_total) = self.live_load();
        let r = self
            .compiled
            .rebalance(&live, t as f64 / MICROS, &self.health, self.s.deadband)?;
        let changed = r.changed.len() + changed_by_health;
        let mut written = 0;
        if changed > 0 {
            let report =
                self.loader
                    .load(&mut self.dev, &self.compiled.tables, &self.compiled.nic)?;
            written = report.changed_entries;
            self.totals.delta_loads += 1;
            self.totals.entries_written += written as u64;
        }
        self.totals.entries_changed += changed as u64;
        self.totals.peak_live = self.totals.peak_live.max(live_total);
        let after = self.served();
        let observed: Decision = self
            .compiled
            .service_observed(&self.s.service)
            .cloned()
            .ok_or_else(|| {
                SimError::Internal(format!("`{}` is no backend service", self.s.service))
            })?;
        let served_decision = self.compiled.service_decision(&self.s.service).cloned();
        let slots = self.slot_shares();
        let phase = self.phase_of_now;
        if let Some(d) = &served_decision {
            self.phases[phase].rule_at_end = d.rule.clone();
        }
        let mut groups = Vec::with_capacity(self.groups.len());
        for (gi, name) in self.groups.iter().enumerate() {
            let Some(g) = observed.groups.iter().find(|g| &g.name == name) else {
                continue;
            };
            let changed_here = self.members[gi].iter().any(|m| {
                let a = before.get(m).copied().unwrap_or(0.0);
                let b = after.get(m).copied().unwrap_or(0.0);
                (a - b).abs() > 1e-12
            });
            let served_share = served_decision
                .as_ref()
                .and_then(|d| d.groups.iter().find(|x| &x.name == name))
                .map_or(0.0, |x| x.share);
            let utilisation = g.utilisation.is_finite().then_some(g.utilisation);
            let pg = &mut self.phases[phase].groups[gi];
            if changed_here {
                pg.weight_changes += 1;
            }
            pg.served_share_at_end = served_share;
            if kind == RecordKind::Refresh {
                let u = utilisation.unwrap_or(0.0);
                pg.peak_utilisation = pg.peak_utilisation.max(u);
                let acc = &mut self.utilisation_sums[phase][gi];
                acc.0 += u;
                acc.1 += 1;
            }
            groups.push(GroupSample {
                name: name.clone(),
                live: g.live,
                capacity: g.capacity,
                utilisation,
                arrived: self.window_arrived[gi],
                observed_share: (self.window_total > 0)
                    .then(|| self.window_arrived[gi] as f64 / self.window_total as f64),
                policy_share: g.share,
                served_share,
                slot_share: slots[gi],
                drained: g.drained,
                below_threshold: g.below_threshold,
                tier: g.tier,
                healthy: g.healthy,
                endpoints: g.endpoints,
                weight_change: changed_here,
            });
        }
        self.records.push(Record {
            t,
            kind,
            event,
            arrived: self.window_total,
            dropped: self.window_dropped,
            changed_entries: changed,
            written_entries: written,
            live: live_total,
            rule: observed.rule.clone(),
            groups,
        });
        self.window_arrived.iter_mut().for_each(|n| *n = 0);
        self.window_total = 0;
        self.window_dropped = 0;
        Ok(())
    }

    fn finish(mut self) -> Outcome {
        for (p, sums) in self.phases.iter_mut().zip(&self.utilisation_sums) {
            for (g, &(sum, n)) in p.groups.iter_mut().zip(sums) {
                g.mean_utilisation = if n > 0 { sum / n as f64 } else { 0.0 };
            }
        }
        let group_totals = self
            .groups
            .iter()
            .enumerate()
            .map(|(gi, name)| GroupTotals {
                name: name.clone(),
                capacity: self
                    .records
                    .iter()
                    .rev()
                    .find_map(|r| r.groups.iter().find(|g| &g.name == name))
                    .map_or(0.0, |g| g.capacity),
                connections: self.phases.iter().map(|p| p.groups[gi].arrived).sum(),
                peak_utilisation: self
                    .phases
                    .iter()
                    .map(|p| p.groups[gi].peak_utilisation)
                    .fold(0.0, f64::max),
                weight_changes: self
                    .phases
                    .iter()
                    .map(|p| p.groups[gi].weight_changes)
                    .sum(),
            })
            .collect();
        Outcome {
            name: self.s.name.clone(),
            file: self.s.file.clone(),
            seed: self.s.seed,
            duration: self.s.duration,
            refresh: self.s.refresh,
            service: self.s.service.clone(),
            groups: self.groups,
            records: self.records,
            phases: self.phases,
            group_totals,
            totals: self.totals,
            health_marks: self
                .s
                .health
                .iter()
                .filter(|e| e.at <= self.s.duration)
                .map(|e| (e.at, e.name.clone()))
                .collect(),
            rate_marks: self
                .s
                .arrivals
                .iter()
                .filter(|a| a.at > 0 && a.at <= self.s.duration)
                .map(|a| (a.at, a.name.clone()))
                .collect(),
        }
    }
}

/// The phases: from each rate step and health event to the next (same-time ones merged).
fn phases(s: &Scenario, groups: usize) -> Vec<Phase> {
    let mut starts: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for a in &s.arrivals {
        starts.entry(a.at).or_default().push(a.name.clone());
    }
    for e in &s.health {
        starts.entry(e.at).or_default().push(e.name.clone());
    }
    starts.retain(|&t, _| t < s.duration);
    let times: Vec<u64> = starts.keys().copied().collect();
    starts
        .into_iter()
        .enumerate()
        .map(|(i, (from, names))| Phase {
            name: names.join(" + "),
            from,
            to: times.get(i + 1).copied().unwrap_or(s.duration),
            arrived: 0,
            dropped: 0,
            rule_at_end: String::new(),
            groups: vec![PhaseGroup::default(); groups],
        })
        .collect()
}
