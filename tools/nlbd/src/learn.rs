//! Connections the NIC learned (SPEC R4.1): learn events installed in batches, teardown
//! events marking flows closed, ageing by each pool's idle timeout, what happens to
//! connections whose backend turns unhealthy (each pool's persistence), connections that
//! drain (a reload took their backend out of its backend service, or a failover or failback
//! took their set out of service) and keeping entries right across a configuration reload.
//!
//! The NIC picks a backend for a new flow by Maglev and reports it on the learn queue; the host
//! installs (flow → backend) in the connection table so that later packets keep that backend
//! whatever the tables say by then. A `TEARDOWN` (FIN or RST seen) marks the entry closed; it is
//! then aged with the shorter closed timeout, so the final ACKs still reach the backend.
//! Ageing reads the hit bits: an entry not hit for its pool's `idle_timeout` is evicted.
//! A draining (rule, backend) pair keeps its connections until its deadline, then evicts the
//! ones still there; ageing goes on meanwhile, so a connection that ends or idles out first
//! leaves as usual. [`crate::tracking`] decides what drains and for how long.

use crate::pinned::{key_of, MirrorReport, PinnedState, PinnedStats};
use crate::tracking::ConnectionTracking;
use flowtable_compiler::Persistence;
use flowtable_compiler::Symbols;
use nlb_control::fleet::PinnedConnection;
use nlb_driver::conntrack::{
    AgeReport, Conntrack, ConntrackError, Installed, NewConnection, FLAG_CLOSED,
};
use nlb_driver::device::Device;
use nlb_driver::discovery::DeviceInfo;
use nlb_driver::queues::{QueueError, Queues};
use nlb_hw::enums::Event;
use nlb_hw::layouts::{CtEntry, EventRecord, LearnEvent};
use nlb_hw::{FlowKey, Tables};
use std::collections::{BTreeMap, BTreeSet};

/// Idle timeout of pools that do not set one (the external load balancer's, SPEC R4.1).
pub const DEFAULT_IDLE_TIMEOUT_SECS: u32 = 60;

/// Tuning of the connection manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnOptions {
    /// Learn events popped (and installed as one batch) per poll at most.
    pub batch: usize,
    /// Idle timeout of a closed flow (FIN/RST seen), capped by its pool's idle timeout.
    pub closed_timeout_secs: u32,
    /// `connectionPersistenceOnUnhealthyBackends` of target pools and target instances,
    /// which have no such field (backend services use their own `connectionTrackingPolicy`,
    /// [`Connections::set_rule_tracking`]): `DEFAULT_FOR_PROTOCOL`, the target-pool load
    /// balancer's behaviour, unless changed here.
    pub persistence: Persistence,
}

impl Default for LearnOptions {
    fn default() -> Self {
        LearnOptions {
            batch: 256,
            closed_timeout_secs: 10,
            persistence: Persistence::DefaultForProtocol,
        }
    }
}

/// Counters of the connection manager (the conntrack's own are in [`Conntrack::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearnStats {
    /// `LEARN` events received.
    pub learn_events: u64,
    /// `TEARDOWN` events received.
    pub teardown_events: u64,
    /// Connections installed anew.
    pub installed: u64,
    /// Learn events for a flow already installed as reported.
    pub already_present: u64,
    /// Entries rewritten with another backend.
    pub replaced: u64,
    /// Learn events not installed because the bucket was full (the flow keeps going by
    /// Maglev).
    pub bucket_full: u64,
    /// Learn events the NIC did not install while their bucket had room (all its install
    /// records in use: a flood of new connections), left for it to install at the flow's next
    /// packet.
    pub left_to_nic: u64,
    /// Flows marked closed by a teardown.
    pub closed: u64,
    /// Teardowns of flows not in the table.
    pub teardown_untracked: u64,
    /// Entries evicted by ageing.
    pub aged_out: u64,
    /// Entries evicted because their backend turned unhealthy (persistence policy).
    pub evicted_unhealthy: u64,
    /// Entries evicted because a reload removed their backend or rule (or took their backend
    /// out of a backend service without draining).
    pub evicted_reload: u64,
    /// Entries evicted when their draining timeout ran out (`drainingTimeoutSec`, or the fixed
    /// timeout of a failover or failback).
    pub evicted_drained: u64,
    /// Entries evicted on a failover or failback of a service with
    /// `disableConnectionDrainOnFailover`.
    pub evicted_failover: u64,
    /// Entries rewritten because a reload renumbered their backend or rule.
    pub remapped: u64,
    /// Times the learn queue overflowed (events the NIC had to drop).
    pub queue_overflows: u64,
    /// Connections the NIC installed itself (hardware learning, SPEC R12.3): the host only
    /// recorded them.
    pub learned_by_nic: u64,
    /// Ageing passes.
    pub ageing_passes: u64,
}

/// Why handling learn events failed.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// Reading the learn queue failed.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Writing the connection table failed.
    #[error(transparent)]
    Conntrack(#[from] ConntrackError),
}

/// Connections to fix after a reload renumbered or removed backends and rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemapPlan {
    /// Flows whose backend or rule is gone: evicted before the new tables serve.
    pub evict: Vec<FlowKey>,
    /// Flows whose ids changed: rewritten once the new tables serve.
    pub rewrite: Vec<NewConnection>,
}

/// Why the connections of a (rule, backend) pair drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainCause {
    /// A reload took the backend out of the rule's backend service
    /// (`connectionDraining.drainingTimeoutSec`).
    Removed,
    /// A failover or failback took the backend's set out of service (the fixed draining
    /// timeout, [`crate::tracking::FAILOVER_DRAINING_TIMEOUT_SECS`]).
    Failover,
}

/// Connections of a (rule, backend) pair that may continue until `deadline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    /// Host time (seconds) from which the pair's connections are evicted.
    pub deadline: u32,
    /// Why.
    pub cause: DrainCause,
}

/// How connections evicted at once are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictCause {
    /// A reload took their backend out of its backend service without draining.
    Reload,
    /// A failover or failback with `disableConnectionDrainOnFailover`.
    Failover,
}

/// The host's connection manager: owns the [`Conntrack`] and applies the policies above.
#[derive(Debug)]
pub struct Connections {
    ct: Conntrack,
    opts: LearnOptions,
    /// Connections pinned to a backend the tables no longer choose: this host's, and the
    /// other hosts' copies ([`crate::pinned`]).
    pinned: PinnedState,
    /// Idle timeout by rule id (the rule's pool's `idle_timeout`).
    rule_timeout: Vec<u32>,
    /// Tracking policy by rule id; `None`: a target pool's ([`LearnOptions::persistence`]).
    rule_tracking: Vec<Option<ConnectionTracking>>,
    /// Draining (rule id, backend id) pairs.
    drains: BTreeMap<(u16, u16), Drain>,
    stats: LearnStats,
    events: Vec<LearnEvent>,
    pending: Vec<NewConnection>,
    outcomes: Vec<Installed>,
}

fn entry_timeout(rule_timeout: &[u32], closed_timeout: u32, e: &CtEntry) -> u32 {
    let idle = rule_timeout
        .get(usize::from(e.rule))
        .copied()
        .unwrap_or(DEFAULT_IDLE_TIMEOUT_SECS);
    if e.flags & FLAG_CLOSED != 0 {
        idle.min(closed_timeout)
    } else {
        idle
    }
}

impl Connections {
    /// Attaches to the device's connection table (reading it back: connections survive a
    /// restart of the host side). Entries found count as seen at `now`.
    pub fn attach<D: Device + ?Sized>(
        dev: &mut D,
        info: &DeviceInfo,
        now: u32,
        opts: LearnOptions,
    ) -> Result<Connections, ConntrackError> {
        Ok(Connections {
            ct: Conntrack::attach(dev, info, now)?,
            opts,
            rule_timeout: Vec::new(),
            rule_tracking: Vec::new(),
            drains: BTreeMap::new(),
            pinned: PinnedState::default(),
            stats: LearnStats::default(),
            events: Vec::with_capacity(opts.batch),
            pending: Vec::with_capacity(opts.batch),
            outcomes: Vec::with_capacity(opts.batch),
        })
    }

    /// The connection table.
    pub fn conntrack(&self) -> &Conntrack {
        &self.ct
    }

    /// Open connections that ended since the previous call, per (rule, backend)
    /// ([`Conntrack::take_closed`]).
    pub fn take_closed(&mut self) -> nlb_driver::conntrack::PairCounts {
        self.ct.take_closed()
    }

    /// Counters.
    pub fn stats(&self) -> LearnStats {
        self.stats
    }

    /// The options.
    pub fn options(&self) -> LearnOptions {
        self.opts
    }

    /// Takes the idle timeouts from the serving tables (after every load).
    pub fn set_tables(&mut self, tables: &Tables) {
        self.pinned.tables_changed();
        self.rule_timeout = tables
            .rules
            .iter()
            .map(|r| {
                let pool = tables.pools.get(usize::from(r.pool)).filter(|_| r.valid);
                match pool {
                    Some(p) if p.valid && p.idle_timeout > 0 => u32::from(p.idle_timeout),
                    _ => DEFAULT_IDLE_TIMEOUT_SECS,
                }
            })
            .collect();
    }

    /// Takes the tracking policy of each rule (see [`crate::tracking::rule_tracking`]; after
    /// every load, as [`Connections::set_tables`]).
    pub fn set_rule_tracking(&mut self, tracking: Vec<Option<ConnectionTracking>>) {
        self.rule_tracking = tracking;
    }

    /// The tracking policy of a connection of `rule`.
    pub fn tracking_of(&self, rule: u16) -> ConnectionTracking {
        self.rule_tracking
            .get(usize::from(rule))
            .copied()
            .flatten()
            .unwrap_or(ConnectionTracking::target_pool(self.opts.persistence))
    }

    /// Pops up to one batch of learn events and handles them. Returns how many there were.
    pub fn poll<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        queues: &mut Queues,
        now: u32,
    ) -> Result<usize, LearnError> {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let popped = queues.pop_learn(dev, self.opts.batch, &mut events);
        let result = match popped {
            Ok(n) => self
                .handle_events(dev, &events, now)
                .map(|()| n)
                .map_err(LearnError::from),
            Err(e) => Err(e.into()),
        };
        self.events = events;
        result
    }

    /// Handles records of the event ring in order (SPEC R12.3): a LEARN the NIC installed is
    /// recorded in the host's copy (no device access; `stamp` is the `dma.host_time` the NIC
    /// wrote into it); runs of LEARNs it could not place are installed by the host (a full
    /// bucket may take a closed connection's place; while the NIC learns, `nic_learns`, a
    /// bucket with a free way is left to it: [`Conntrack::settle_left`]); a TEARDOWN marks its
    /// flow closed.
    pub fn handle_records<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        records: &[EventRecord],
        stamp: u32,
        now: u32,
        nic_learns: bool,
    ) -> Result<(), ConntrackError> {
        self.pending.clear();
        let nic_installed = |r: &EventRecord| r.event[0].event == Event::Learn && r.installed;
        let mut at = 0;
        while let Some(r) = records.get(at) {
            let ev = &r.event[0];
            if nic_installed(r) {
                // A run of entries the NIC installed, taken together (their table updates
                // overlap their cache misses). Installs the host queued before it go first:
                // the NIC learned in packet order.
                let run = records[at..]
                    .iter()
                    .take_while(|r| nic_installed(r))
                    .count();
                self.flush_installs(dev, now, nic_learns)?;
                let left = self.ct.learned(&records[at..at + run], stamp, now);
                debug_assert!(left.is_empty());
                let run64 = run as u64;
                self.stats.learn_events += run64;
                self.stats.learned_by_nic += run64;
                self.stats.installed += run64;
                at += run;
                continue;
            }
            at += 1;
            match ev.event {
                Event::Learn => {
                    self.stats.learn_events += 1;
                    self.pending.push(NewConnection::from(ev));
                }
                Event::Teardown => {
                    self.stats.teardown_events += 1;
                    self.flush_installs(dev, now, nic_learns)?;
                    let key = NewConnection::from(ev).key;
                    if self.ct.mark_closed(dev, &key)? {
                        self.stats.closed += 1;
                    } else {
                        self.stats.teardown_untracked += 1;
                    }
                }
            }
        }
        self.flush_installs(dev, now, nic_learns)
    }

    /// Counts a learn queue overflow seen by polling.
    pub fn note_overflow(&mut self) {
        self.stats.queue_overflows += 1;
    }

    /// Handles events in order: runs of `LEARN` are installed as one batch; a `TEARDOWN`
    /// marks its flow closed (after the installs before it).
    pub fn handle_events<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        events: &[LearnEvent],
        now: u32,
    ) -> Result<(), ConntrackError> {
        self.pending.clear();
        for ev in events {
            match ev.event {
                Event::Learn => {
                    self.stats.learn_events += 1;
                    self.pending.push(NewConnection::from(ev));
                }
                Event::Teardown => {
                    self.stats.teardown_events += 1;
                    self.flush_installs(dev, now, false)?;
                    let key = NewConnection::from(ev).key;
                    if self.ct.mark_closed(dev, &key)? {
                        self.stats.closed += 1;
                    } else {
                        self.stats.teardown_untracked += 1;
                    }
                }
            }
        }
        self.flush_installs(dev, now, false)
    }

    /// Installs the pending connections; `left_by_nic`: they are LEARNs a learning NIC did not
    /// install, which the host only settles ([`Conntrack::settle_left`]).
    fn flush_installs<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        now: u32,
        left_by_nic: bool,
    ) -> Result<(), ConntrackError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let result = if left_by_nic {
            self.ct
                .settle_left(dev, &self.pending, now, &mut self.outcomes)
        } else {
            self.ct
                .install_batch(dev, &self.pending, now, &mut self.outcomes)
        };
        self.pending.clear();
        for o in &self.outcomes {
            match o {
                Installed::New(_) => self.stats.installed += 1,
                Installed::Replaced(_) => self.stats.replaced += 1,
                Installed::Present(_) => self.stats.already_present += 1,
                Installed::BucketFull { .. } => self.stats.bucket_full += 1,
                Installed::LeftToNic { .. } => self.stats.left_to_nic += 1,
            }
        }
        result
    }

    /// One ageing pass at host time `now` (seconds).
    pub fn age<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        now: u32,
    ) -> Result<AgeReport, ConntrackError> {
        let (timeouts, closed) = (&self.rule_timeout, self.opts.closed_timeout_secs);
        let pinned = &self.pinned;
        // A copy of another host's pinned connection does not age while that host publishes
        // it ([`crate::pinned`]).
        let report = self.ct.age(dev, now, |e| {
            if pinned.exempt(e) {
                u32::MAX
            } else {
                entry_timeout(timeouts, closed, e)
            }
        })?;
        self.pinned.settle_copies(&self.ct);
        self.stats.ageing_passes += 1;
        self.stats.aged_out += u64::from(report.evicted);
        Ok(report)
    }

    /// Applies each pool's persistence policy to connections whose backend turned unhealthy:
    /// `unhealthy(rule, backend)` says whether a connection of that rule on that backend is
    /// one of them (health belongs to a pool, SPEC R5.5, so the rule matters). Evicts the ones
    /// the policy of their rule's pool ([`Connections::tracking_of`]) does not keep; returns
    /// how many were evicted.
    pub fn backends_unhealthy<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        unhealthy: impl Fn(u16, u16) -> bool,
    ) -> Result<usize, ConntrackError> {
        let keys: Vec<FlowKey> = self
            .ct
            .scan()
            .filter(|(_, e)| {
                !self.tracking_of(e.rule).keeps(e.protocol) && unhealthy(e.rule, e.backend)
            })
            .map(|(_, e)| key_of(&e))
            .collect();
        let n = self.ct.evict_batch(dev, &keys)?;
        self.stats.evicted_unhealthy += n as u64;
        Ok(n)
    }

    /// The draining pairs.
    pub fn drains(&self) -> &BTreeMap<(u16, u16), Drain> {
        &self.drains
    }

    /// Whether connections on `backend` drain (for any rule).
    pub fn draining_backend(&self, backend: u16) -> bool {
        self.drains.keys().any(|&(_, b)| b == backend)
    }

    /// Lets the connections of (`rule`, `backend`) continue until `deadline` (host seconds),
    /// then evicts them ([`Connections::expire_drains`]). A pair that drains already keeps the
    /// earlier deadline.
    pub fn drain(&mut self, rule: u16, backend: u16, deadline: u32, cause: DrainCause) {
        let d = Drain { deadline, cause };
        self.drains
            .entry((rule, backend))
            .and_modify(|e| {
                if deadline < e.deadline {
                    *e = d;
                }
            })
            .or_insert(d);
    }

    /// Stops the drains `cancel` picks (their connections stay, as any other); returns how
    /// many.
    pub fn cancel_drains(&mut self, cancel: impl Fn((u16, u16), &Drain) -> bool) -> usize {
        let before = self.drains.len();
        self.drains.retain(|&pair, d| !cancel(pair, d));
        before - self.drains.len()
    }

    /// Evicts the connections of the given (rule, backend) pairs now (and forgets their
    /// drains); returns how many.
    pub fn evict_pairs<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        pairs: &BTreeSet<(u16, u16)>,
        cause: EvictCause,
    ) -> Result<usize, ConntrackError> {
        if pairs.is_empty() {
            return Ok(0);
        }
        self.drains.retain(|pair, _| !pairs.contains(pair));
        let keys: Vec<FlowKey> = self
            .ct
            .scan()
            .filter(|(_, e)| pairs.contains(&(e.rule, e.backend)))
            .map(|(_, e)| key_of(&e))
            .collect();
        let n = self.ct.evict_batch(dev, &keys)?;
        match cause {
            EvictCause::Reload => self.stats.evicted_reload += n as u64,
            EvictCause::Failover => self.stats.evicted_failover += n as u64,
        }
        Ok(n)
    }

    /// Ends the drains whose deadline is `now` or earlier: evicts the connections still there
    /// (those that ended or idled out first are gone already); returns how many.
    pub fn expire_drains<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        now: u32,
    ) -> Result<usize, ConntrackError> {
        let due: BTreeSet<(u16, u16)> = self
            .drains
            .iter()
            .filter(|(_, d)| d.deadline <= now)
            .map(|(&pair, _)| pair)
            .collect();
        if due.is_empty() {
            return Ok(0);
        }
        let keys: Vec<FlowKey> = self
            .ct
            .scan()
            .filter(|(_, e)| due.contains(&(e.rule, e.backend)))
            .map(|(_, e)| key_of(&e))
            .collect();
        let n = self.ct.evict_batch(dev, &keys)?;
        self.drains.retain(|pair, _| !due.contains(pair));
        self.stats.evicted_drained += n as u64;
        Ok(n)
    }

    /// Follows a reload's renumbering: drains of pairs whose rule or backend is gone end
    /// (their connections are evicted by the reload).
    pub fn remap_drains(
        &mut self,
        backend: impl Fn(u16) -> Option<u16>,
        rule: impl Fn(u16) -> Option<u16>,
    ) {
        let old = std::mem::take(&mut self.drains);
        for ((r, b), d) in old {
            if let (Some(r), Some(b)) = (rule(r), backend(b)) {
                self.drain(r, b, d.deadline, d.cause);
            }
        }
    }

    /// Evicts the connections whose rule or backend has no valid entry in `tables` (found by
    /// [`Connections::attach`] on a device whose tables changed meanwhile: the NIC would drop
    /// their packets); returns how many.
    pub fn evict_dangling<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        tables: &Tables,
    ) -> Result<usize, ConntrackError> {
        let valid_rule = |r: u16| tables.rules.get(usize::from(r)).is_some_and(|e| e.valid);
        let valid_backend = |b: u16| tables.backends.get(usize::from(b)).is_some_and(|e| e.valid);
        let keys: Vec<FlowKey> = self
            .ct
            .scan()
            .filter(|(_, e)| !valid_rule(e.rule) || !valid_backend(e.backend))
            .map(|(_, e)| key_of(&e))
            .collect();
        let n = self.ct.evict_batch(dev, &keys)?;
        self.stats.evicted_reload += n as u64;
        Ok(n)
    }

    /// Counters of the pinned connections ([`crate::pinned`]).
    pub fn pinned_stats(&self) -> PinnedStats {
        self.pinned.stats()
    }

    /// This host's pinned connections by names (what it publishes to the fleet), up to date
    /// with `tables`; `None` when the set is the one the last `Some` returned
    /// ([`crate::pinned`]).
    pub fn own_pinned(
        &mut self,
        tables: &Tables,
        symbols: &Symbols,
    ) -> Option<Vec<PinnedConnection>> {
        self.pinned.own_pinned(&self.ct, tables, symbols)
    }

    /// What this host publishes while the fleet prepares new tables: its own connections
    /// pinned under `now` or under `next` (tables and names; `map` takes (rule, backend) ids
    /// to `next`'s; [`crate::pinned`]).
    pub fn prepared_pinned(
        &self,
        now: (&Tables, &Symbols),
        next: (&Tables, &Symbols),
        map: &(dyn Fn(u16, u16) -> Option<(u16, u16)> + Sync),
    ) -> Vec<PinnedConnection> {
        self.pinned.prepared(&self.ct, now, next, map)
    }

    /// The next [`Connections::own_pinned`] returns the set even if unchanged (a new etcd
    /// lease: every part is written again).
    pub fn republish_pinned(&mut self) {
        self.pinned.republish();
    }

    /// Makes the copies of the other hosts' pinned connections what `shared` says (every
    /// owner's): new ones installed where this host has no entry for the flow, the ones no
    /// longer shared lapse (they age from `now` on; [`crate::pinned`]).
    pub fn mirror<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        shared: &[PinnedConnection],
        symbols: &Symbols,
        now: u32,
    ) -> Result<MirrorReport, ConntrackError> {
        self.pinned.mirror(&mut self.ct, dev, shared, symbols, now)
    }

    /// Installs this host's own pinned connections as it published them before nlbd
    /// restarted, where the table has no entry for them ([`crate::pinned`]).
    pub fn restore_pinned<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        own: &[PinnedConnection],
        symbols: &Symbols,
        now: u32,
    ) -> Result<usize, ConntrackError> {
        self.pinned.restore(&mut self.ct, dev, own, symbols, now)
    }

    /// Plans the fix-up of a reload: `backend` and `rule` map old ids to new ones (`None` =
    /// gone).
    pub fn plan_remap(
        &self,
        backend: impl Fn(u16) -> Option<u16>,
        rule: impl Fn(u16) -> Option<u16>,
    ) -> RemapPlan {
        let mut plan = RemapPlan::default();
        for (_, e) in self.ct.scan() {
            match (backend(e.backend), rule(e.rule)) {
                (Some(b), Some(r)) if b == e.backend && r == e.rule => {}
                (Some(b), Some(r)) => plan.rewrite.push(NewConnection {
                    key: key_of(&e),
                    backend: b,
                    rule: r,
                }),
                _ => plan.evict.push(key_of(&e)),
            }
        }
        plan
    }

    /// Evicts the flows a reload removes (before the new tables serve).
    pub fn evict_removed<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        plan: &RemapPlan,
    ) -> Result<usize, ConntrackError> {
        let n = self.ct.evict_batch(dev, &plan.evict)?;
        self.stats.evicted_reload += n as u64;
        Ok(n)
    }

    /// Rewrites the flows a reload renumbered (once the new tables serve).
    pub fn rewrite_renumbered<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        plan: &RemapPlan,
        now: u32,
    ) -> Result<usize, ConntrackError> {
        let mut n = 0;
        for chunk in plan.rewrite.chunks(self.opts.batch.max(1)) {
            self.ct.install_batch(dev, chunk, now, &mut self.outcomes)?;
            n += self
                .outcomes
                .iter()
                .filter(|o| matches!(o, Installed::Replaced(_) | Installed::New(_)))
                .count();
        }
        self.stats.remapped += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use flowtable_compiler::{compile, CompileOptions, HealthState};
    use nlb_driver::discovery::discover;
    use nlb_driver::model::ModelHandle;
    use nlb_hw::enums::Verdict;

    const CONFIG: &str = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}
  - {name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}
targetPools:
  - {name: web, region: r, instances: [a, b, c], idleTimeoutSec: 30}
  - {name: dns, region: r, instances: [a, b, c], idleTimeoutSec: 5}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
";

    fn tcp(sport: u16, syn: bool, fin: bool) -> Vec<u8> {
        let mut f = Vec::new();
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
            .ipv4([198, 51, 100, 7], [203, 0, 113, 80], 64)
            .tcp(sport, 80, 1, 1000);
        let b = if syn { b.syn() } else { b.ack(1) };
        let b = if fin { b.fin() } else { b };
        b.write(&mut f, &[]).unwrap();
        f
    }

    fn udp(sport: u16) -> Vec<u8> {
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
            .ipv4([198, 51, 100, 7], [203, 0, 113, 53], 64)
            .udp(sport, 53)
            .write(&mut f, &[1, 2, 3])
            .unwrap();
        f
    }

    struct Rig {
        sim: ModelHandle,
        dev: ModelHandle,
        q: Queues,
        conns: Connections,
        out: Vec<u8>,
    }

    /// A model NIC serving `c`'s tables and a connection manager attached to it at host time
    /// 1000 (shared with the pinned connections' tests).
    pub(crate) fn model_nic(
        c: &flowtable_compiler::Compiled,
    ) -> (ModelHandle, ModelHandle, Connections) {
        let sim = ModelHandle::from_device(firmware_sim::ModelDevice::from_tables(
            c.tables.clone(),
            c.nic,
        ));
        let mut dev = sim.clone();
        let info = discover(&mut dev).unwrap();
        let mut conns =
            Connections::attach(&mut dev, &info, 1000, LearnOptions::default()).unwrap();
        conns.set_tables(&c.tables);
        (sim, dev, conns)
    }

    impl Rig {
        fn new() -> Rig {
            let (config, d) = nlb_config::parse_config("t.yaml", CONFIG);
            assert!(d.is_empty(), "{d}");
            let c = compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap();
            let (sim, dev, conns) = model_nic(&c);
            Rig {
                sim,
                dev,
                q: Queues::new(),
                conns,
                out: vec![0; 16384],
            }
        }

        /// Sends a frame through the NIC; returns the backend it went to.
        fn send(&mut self, frame: &[u8]) -> Option<u16> {
            let r = self.sim.lock().receive(frame, &mut self.out).unwrap();
            assert_eq!(r.verdict, Verdict::Forward);
            r.backend
        }

        fn poll(&mut self, now: u32) -> usize {
            let mut n = 0;
            loop {
                let got = self.conns.poll(&mut self.dev, &mut self.q, now).unwrap();
                if got == 0 {
                    return n;
                }
                n += got;
            }
        }
    }

    #[test]
    fn learned_flows_are_installed_and_hit() {
        let mut rig = Rig::new();
        // Two bursts of 50: the learn queue holds 64 events (sim profile).
        let mut backends: Vec<Option<u16>> = Vec::new();
        for burst in 0..2 {
            for i in 0..50 {
                backends.push(rig.send(&tcp(10000 + burst * 50 + i, true, false)));
            }
            assert_eq!(rig.poll(1000), 50);
        }
        assert_eq!(rig.conns.stats().installed, 100);
        assert_eq!(rig.conns.conntrack().valid_count(), 100);
        // The device's own table holds them now: the next packets hit.
        for (i, b) in backends.iter().enumerate() {
            let r = rig
                .sim
                .lock()
                .receive(&tcp(10000 + i as u16, false, false), &mut rig.out)
                .unwrap();
            assert_eq!(r.conntrack, firmware_sim::CtOutcome::Hit, "flow {i}");
            assert_eq!(r.backend, *b);
        }
        assert_eq!(rig.poll(1000), 0, "hits raise no events");
    }

    /// A LEARN the learning NIC did not install (docs/pipeline.md section 15.3): with a free
    /// way in the host's copy it is left to the NIC (its later installs may hold that way);
    /// with learning off the host installs it.
    #[test]
    fn a_learn_left_by_a_learning_nic_is_not_installed_by_the_host() {
        let mut rig = Rig::new();
        let record = |sport: u16| EventRecord {
            event: [LearnEvent {
                event: Event::Learn,
                protocol: 6,
                src_port: sport,
                dst_port: 80,
                src_addr: nlb_hw::hash::addr_to_u128("198.51.100.7".parse().unwrap()),
                dst_addr: nlb_hw::hash::addr_to_u128("203.0.113.80".parse().unwrap()),
                backend: 1,
                ..LearnEvent::default()
            }],
            installed: false,
            ct_index: 0,
        };
        rig.conns
            .handle_records(&mut rig.dev, &[record(40000)], 0, 1000, true)
            .unwrap();
        assert_eq!(rig.conns.stats().left_to_nic, 1);
        assert_eq!(rig.conns.stats().installed, 0);
        assert_eq!(rig.conns.conntrack().valid_count(), 0);
        assert_eq!(
            rig.sim.lock().conntrack().valid_count(),
            0,
            "nothing written"
        );
        rig.conns
            .handle_records(&mut rig.dev, &[record(40000)], 0, 1000, false)
            .unwrap();
        assert_eq!(rig.conns.stats().installed, 1);
        assert_eq!(rig.sim.lock().conntrack().valid_count(), 1);
    }

    #[test]
    fn idle_flows_age_out_per_pool_and_closed_ones_sooner() {
        let mut rig = Rig::new();
        rig.send(&tcp(1, true, false));
        rig.send(&tcp(2, true, false));
        rig.send(&udp(3));
        rig.poll(1000);
        assert_eq!(rig.conns.conntrack().valid_count(), 3);
        // Flow 2 closes (FIN): closed timeout 10 s.
        rig.send(&tcp(2, false, true));
        rig.poll(1000);
        assert_eq!(rig.conns.stats().closed, 1);
        rig.conns.age(&mut rig.dev, 1001).unwrap(); // clears the hit bits of the FIN
                                                    // UDP pool: 5 s; closed: 10 s; web: 30 s.
        assert_eq!(rig.conns.age(&mut rig.dev, 1006).unwrap().evicted, 1);
        assert_eq!(rig.conns.age(&mut rig.dev, 1011).unwrap().evicted, 1);
        // Flow 1 is kept alive by traffic.
        rig.send(&tcp(1, false, false));
        assert_eq!(rig.conns.age(&mut rig.dev, 1031).unwrap().evicted, 0);
        assert_eq!(rig.conns.age(&mut rig.dev, 1061).unwrap().evicted, 1);
        assert_eq!(rig.conns.conntrack().valid_count(), 0);
        assert_eq!(rig.conns.stats().aged_out, 3);
    }

    #[test]
    fn udp_moves_and_tcp_stays_when_the_backend_turns_unhealthy() {
        let mut rig = Rig::new();
        for i in 0..60 {
            rig.send(&tcp(20000 + i, true, false));
            rig.send(&udp(20000 + i));
        }
        rig.poll(1000);
        let ct = rig.conns.conntrack();
        let victim = ct.scan().next().unwrap().1.backend;
        let count = |ct: &Conntrack, proto: u8| {
            ct.scan()
                .filter(|(_, e)| e.backend == victim && e.protocol == proto)
                .count()
        };
        let (tcp_before, udp_before) = (count(ct, 6), count(ct, 17));
        assert!(tcp_before > 0 && udp_before > 0);
        let evicted = rig
            .conns
            .backends_unhealthy(&mut rig.dev, |_, b| b == victim)
            .unwrap();
        assert_eq!(evicted, udp_before);
        let ct = rig.conns.conntrack();
        assert_eq!((count(ct, 6), count(ct, 17)), (tcp_before, 0));
        // The device agrees: its table has no UDP entry of the victim left.
        let dev = rig.sim.lock();
        let table = dev.conntrack();
        let dev_udp = (0..table.len())
            .filter_map(|i| table.entry(i))
            .filter(|e| e.valid && e.backend == victim && e.protocol == 17)
            .count();
        drop(dev);
        assert_eq!(dev_udp, 0);
        let target_pool = ConnectionTracking::target_pool;
        assert!(target_pool(Persistence::AlwaysPersist).keeps(17));
        assert!(!target_pool(Persistence::NeverPersist).keeps(6));
    }

    #[test]
    fn a_reload_renumbering_backends_rewrites_and_evicts() {
        let mut rig = Rig::new();
        for i in 0..30 {
            rig.send(&tcp(30000 + i, true, false));
        }
        rig.poll(1000);
        // New config: backend 0 (a) removed, 1 → 0, 2 → 1.
        let plan = rig.conns.plan_remap(|b| b.checked_sub(1), Some);
        fn on(conns: &Connections, b: u16) -> usize {
            conns
                .conntrack()
                .scan()
                .filter(|(_, e)| e.backend == b)
                .count()
        }
        let (a, b, c) = (on(&rig.conns, 0), on(&rig.conns, 1), on(&rig.conns, 2));
        assert_eq!(plan.evict.len(), a);
        assert_eq!(plan.rewrite.len(), b + c);
        assert_eq!(rig.conns.evict_removed(&mut rig.dev, &plan).unwrap(), a);
        assert_eq!(
            rig.conns
                .rewrite_renumbered(&mut rig.dev, &plan, 1000)
                .unwrap(),
            b + c
        );
        let (a2, b2, c2) = (on(&rig.conns, 0), on(&rig.conns, 1), on(&rig.conns, 2));
        assert_eq!((a2, b2, c2), (b, c, 0));
    }
}
