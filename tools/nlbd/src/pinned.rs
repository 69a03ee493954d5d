//! Connections pinned to a backend the tables no longer choose, shared across a fleet (SPEC
//! R15.2, R11.3).
//!
//! Identical tables send a flow to the same backend on every host, so ECMP may move an
//! established connection to any host and it carries on (SPEC R11.3). That holds only for
//! connections whose tracked backend is the one the tables choose. After a backend was added,
//! a weight changed, or a backend turned unhealthy in a pool that keeps such connections (SPEC
//! R4.1), some connections stay on a backend the tables would no longer pick: they are
//! *pinned* by the one host whose connection table holds them. Were ECMP to move one (a host
//! drained, upgraded, lost, or back), the host that receives it would choose again and the
//! connection would break.
//!
//! So every host publishes its own pinned connections (by names: rule and instance, the same
//! on every host of a revision) and installs every other host's as *copies* in its own
//! connection table, where the NIC finds them on the first packet ECMP sends its way. A copy:
//!
//! - is never installed over an entry the host has for that flow (its own traffic decides);
//! - does not age while its owner publishes it (it sees no traffic here until ECMP moves it);
//! - is *adopted* once it is hit: its traffic is here now; it ages as the host's own, and the
//!   host publishes it when it is pinned (the owner, drained or gone, stops);
//! - *lapses* when its owner stops publishing it (the connection ended or aged out there, or
//!   the owner is gone and its lease took its keys): it then ages like any other entry, from
//!   that moment, so a connection whose owner died keeps its backend for a full idle timeout.
//!
//! Which own connections are pinned is found by a scan of the connection table when the
//! tables change (the only time the tables' choice changes) and kept up between changes as
//! connections close, age out and copies are adopted. A connection the NIC learns always
//! follows the tables serving, so it is not pinned when it is learned.

use flowtable_compiler::Symbols;
use nlb_control::fleet::PinnedConnection;
use nlb_driver::conntrack::{Conntrack, ConntrackError, Installed, NewConnection, FLAG_CLOSED};
use nlb_driver::device::Device;
use nlb_hw::enums::KeyType;
use nlb_hw::hash::{addr_to_u128, u128_to_addr};
use nlb_hw::layouts::CtEntry;
use nlb_hw::{FlowKey, Tables};
use nlb_reference::{lookup, Flow, NoTrace};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

/// A copy of another host's pinned connection in this host's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Copy {
    backend: u16,
    rule: u16,
    /// Host time it was installed (or last seen hit, after the first ageing pass): a later
    /// `last_seen` means it was hit here (adopted).
    since: u32,
    /// An ageing pass has run since it was installed. A hit bit outlives the entry writes
    /// of its slot, so the first pass may report the previous occupant's hit: it is not
    /// taken for this copy's.
    settled: bool,
}

impl Copy {
    fn new(c: &NewConnection, now: u32) -> Copy {
        Copy {
            backend: c.backend,
            rule: c.rule,
            since: now,
            settled: false,
        }
    }
}

/// The state of pinned connections kept with the connection table.
#[derive(Debug, Default)]
pub(crate) struct PinnedState {
    /// Other hosts' pinned connections installed here and not yet adopted, by flow.
    copies: HashMap<FlowKey, Copy>,
    /// This host's pinned connections (own or adopted) as of the last refresh.
    own: HashSet<FlowKey>,
    /// The tables changed since the last refresh: scan the whole table.
    rescan: bool,
    /// Copies hit here (adopted) since the last refresh, to check against the tables.
    adopted_since_refresh: Vec<FlowKey>,
    /// Copies whose owner stopped publishing them, by flow: the host time they lapsed. Hit
    /// after that, they are this host's (and published while pinned); gone, forgotten.
    lapsed: HashMap<FlowKey, u32>,
    /// `own` changed since [`Connections::own_pinned`] last returned it.
    own_changed: bool,
    stats: PinnedStats,
}

/// Counters of the pinned connections (nlbd's status and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PinnedStats {
    /// This host's pinned connections as of the last refresh (what it publishes).
    pub own: u64,
    /// Other hosts' pinned connections installed here, not adopted.
    pub copies: u64,
    /// Copies installed since start.
    pub copies_installed: u64,
    /// Copies hit here and adopted since start.
    pub adopted: u64,
    /// Copies whose owner stopped publishing them, since start.
    pub lapsed: u64,
    /// At the last installation: copies not installed because the host has its own entry
    /// for that flow with another backend.
    pub conflicts: u64,
    /// At the last installation: copies not installed because their bucket is full.
    pub bucket_full: u64,
    /// At the last installation: copies not installed because a rule or instance name is
    /// unknown to this host's configuration.
    pub unknown_names: u64,
    /// Full scans of the connection table (one per change of the tables).
    pub scans: u64,
}

/// What one [`Connections::mirror`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorReport {
    /// Copies installed.
    pub installed: usize,
    /// Copies that lapsed.
    pub lapsed: usize,
    /// Connections this host holds already (its own entry, or a copy).
    pub present: usize,
    /// Not installed for a conflicting own entry.
    pub conflicts: usize,
    /// Not installed for a full bucket.
    pub bucket_full: usize,
    /// Not installed for names unknown here.
    pub unknown_names: usize,
    /// This host's own pinned connections from before nlbd restarted, installed again.
    pub restored: usize,
}

/// The backend the tables choose for a new connection of `e`'s flow under `e`'s rule (SPEC
/// R3.2, docs/pipeline.md §6 and §8: the rule's pool, its affinity key, its Maglev slice);
/// `None` when the rule, its pool or its slice is gone.
pub fn table_choice(tables: &Tables, e: &CtEntry) -> Option<u16> {
    let rule = lookup::rule_entry(tables, e.rule, &mut NoTrace)?;
    let pool = lookup::pool_entry(tables, rule.pool, &mut NoTrace)?;
    let flow = flow_of(e);
    let (_, hash) = lookup::affinity_key(&pool, &flow, false, &mut NoTrace);
    lookup::maglev(tables, &pool, hash, &mut NoTrace)
}

fn flow_of(e: &CtEntry) -> Flow {
    Flow {
        protocol: e.protocol,
        client: e.src_addr,
        client_port: e.src_port,
        vip: e.dst_addr,
        vip_port: e.dst_port,
    }
}

/// Whether `e` is an open connection on a backend other than the tables' choice.
fn is_pinned(tables: &Tables, e: &CtEntry) -> bool {
    e.valid && e.flags & FLAG_CLOSED == 0 && table_choice(tables, e) != Some(e.backend)
}

/// The 5-tuple key of a connection-table entry.
pub(crate) fn key_of(e: &CtEntry) -> FlowKey {
    FlowKey {
        key_type: KeyType::Tuple5,
        protocol: e.protocol,
        src_port: e.src_port,
        dst_port: e.dst_port,
        src_addr: e.src_addr,
        dst_addr: e.dst_addr,
    }
}

/// An entry by names; `None` when a rule or backend id has no name here.
pub fn to_shared(e: &CtEntry, symbols: &Symbols) -> Option<PinnedConnection> {
    Some(PinnedConnection {
        protocol: e.protocol,
        client: SocketAddr::new(u128_to_addr(e.src_addr), e.src_port),
        vip: SocketAddr::new(u128_to_addr(e.dst_addr), e.dst_port),
        rule: symbols.rule(e.rule)?.to_string(),
        backend: symbols.backend(e.backend)?.to_string(),
    })
}

/// A shared connection in this host's ids; `None` when a name is unknown here.
pub fn from_shared(p: &PinnedConnection, symbols: &Symbols) -> Option<NewConnection> {
    let id = |names: &[String], name: &str| {
        names
            .iter()
            .position(|n| n == name)
            .and_then(|i| u16::try_from(i).ok())
    };
    Some(NewConnection {
        key: FlowKey {
            key_type: KeyType::Tuple5,
            protocol: p.protocol,
            src_port: p.client.port(),
            dst_port: p.vip.port(),
            src_addr: addr_to_u128(p.client.ip()),
            dst_addr: addr_to_u128(p.vip.ip()),
        },
        backend: id(&symbols.backends, &p.backend)?,
        rule: id(&symbols.rules, &p.rule)?,
    })
}

impl PinnedState {
    /// The tables changed: the next refresh scans the whole table.
    pub(crate) fn tables_changed(&mut self) {
        self.rescan = true;
    }

    /// The full scan: the open connections of `ct` on a backend other than the tables'
    /// choice, copies left out. On every CPU for a large table (a change of the tables at 10 M
    /// connections).
    fn scan(&self, ct: &Conntrack, tables: &Tables) -> HashSet<FlowKey> {
        self.scan_own(ct, |e| is_pinned(tables, e).then(|| key_of(e)))
            .into_iter()
            .collect()
    }

    /// `pick` over every entry of `ct` that is not a copy, on every CPU for a large table.
    fn scan_own<T: Send>(
        &self,
        ct: &Conntrack,
        pick: impl Fn(&CtEntry) -> Option<T> + Sync,
    ) -> Vec<T> {
        const PER_THREAD_MIN: u32 = 64 * 1024;
        let len = ct.buckets() * ct.ways();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u32)
            .min(len / PER_THREAD_MIN)
            .max(1);
        let pick = &pick;
        let part = move |range: std::ops::Range<u32>| -> Vec<T> {
            range
                .filter_map(|i| ct.entry(i))
                .filter(|e| self.copies.is_empty() || !self.copies.contains_key(&key_of(e)))
                .filter_map(|e| pick(&e))
                .collect()
        };
        if threads == 1 {
            return part(0..len);
        }
        let per = len.div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let range = t * per..((t + 1) * per).min(len);
                    scope.spawn(move || part(range))
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    }

    /// What this host publishes while the fleet prepares new tables (make-before-break, SPEC
    /// R15.2): its own open connections pinned under the tables serving (by `now`'s names), and
    /// those `next` would pin (by `next`'s names; `map` takes a connection's (rule, backend)
    /// ids to `next`'s, None where it ends with the change). Copies left out.
    pub(crate) fn prepared(
        &self,
        ct: &Conntrack,
        now: (&Tables, &Symbols),
        next: (&Tables, &Symbols),
        map: &(dyn Fn(u16, u16) -> Option<(u16, u16)> + Sync),
    ) -> Vec<PinnedConnection> {
        self.scan_own(ct, |e| {
            if is_pinned(now.0, e) {
                return to_shared(e, now.1);
            }
            let (rule, backend) = map(e.rule, e.backend)?;
            let moved = CtEntry {
                rule,
                backend,
                ..*e
            };
            is_pinned(next.0, &moved)
                .then(|| to_shared(&moved, next.1))
                .flatten()
        })
    }

    /// The ageing timeout of `e` is suspended: a copy its owner still publishes.
    pub(crate) fn exempt(&self, e: &CtEntry) -> bool {
        !self.copies.is_empty()
            && self
                .copies
                .get(&key_of(e))
                .is_some_and(|c| c.backend == e.backend && c.rule == e.rule)
    }
}

impl PinnedState {
    /// Counters of the pinned connections.
    pub(crate) fn stats(&self) -> PinnedStats {
        PinnedStats {
            own: self.own.len() as u64,
            copies: self.copies.len() as u64,
            ..self.stats
        }
    }

    /// After an ageing pass of `ct`: copies hit here are adopted; copies whose entry was
    /// replaced or evicted are forgotten.
    pub(crate) fn settle_copies(&mut self, ct: &Conntrack) {
        let p = self;
        let mut adopted = Vec::new();
        p.copies.retain(|key, c| {
            let Some(i) = ct.lookup(key) else {
                return false;
            };
            let same = ct
                .entry(i)
                .is_some_and(|e| e.backend == c.backend && e.rule == c.rule);
            let seen = ct.last_seen(i).unwrap_or(c.since);
            if !c.settled {
                c.settled = true;
                c.since = c.since.max(seen);
                return same;
            }
            if same && seen > c.since {
                adopted.push(*key);
                return false;
            }
            same
        });
        // A lapsed copy hit since it lapsed carries this host's traffic: its own now.
        p.lapsed.retain(|key, at| match ct.lookup(key) {
            None => false,
            Some(i) if ct.last_seen(i).is_some_and(|t| t > *at) => {
                adopted.push(*key);
                false
            }
            Some(_) => true,
        });
        p.stats.adopted += adopted.len() as u64;
        p.adopted_since_refresh.extend(adopted);
    }

    /// This host's pinned connections by names (what it publishes), brought up to date with
    /// `tables`: a full scan when they changed since the last call, else the last set less the
    /// connections that ended plus the copies adopted since. `None` when the set is the one
    /// the last `Some` returned.
    pub(crate) fn own_pinned(
        &mut self,
        ct: &Conntrack,
        tables: &Tables,
        symbols: &Symbols,
    ) -> Option<Vec<PinnedConnection>> {
        if self.rescan {
            let own = self.scan(ct, tables);
            let p = &mut *self;
            p.rescan = false;
            p.stats.scans += 1;
            p.adopted_since_refresh.clear();
            p.own_changed |= own != p.own;
            p.own = own;
        } else {
            let p = &mut *self;
            let before = p.own.len();
            let adopted = std::mem::take(&mut p.adopted_since_refresh);
            p.own.extend(adopted.into_iter().filter(|k| {
                ct.lookup(k)
                    .and_then(|i| ct.entry(i))
                    .is_some_and(|e| is_pinned(tables, &e))
            }));
            let grown = p.own.len();
            p.own.retain(|k| {
                ct.lookup(k)
                    .and_then(|i| ct.entry(i))
                    .is_some_and(|e| e.flags & FLAG_CLOSED == 0 && !p.copies.contains_key(k))
            });
            p.own_changed |= grown != before || p.own.len() != grown;
        }
        let p = self;
        if !std::mem::take(&mut p.own_changed) {
            return None;
        }
        Some(
            p.own
                .iter()
                .filter_map(|k| ct.lookup(k).and_then(|i| ct.entry(i)))
                .filter_map(|e| to_shared(&e, symbols))
                .collect(),
        )
    }

    /// The next call of `own_pinned` returns the set even if unchanged (a new etcd lease:
    /// every part is written again).
    pub(crate) fn republish(&mut self) {
        self.own_changed = true;
    }

    /// Makes the copies of the other hosts' pinned connections what `shared` says (all of
    /// them, every owner): the new ones are installed where this host has no entry for the
    /// flow, the ones no longer shared lapse (they age from `now` on).
    pub(crate) fn mirror<D: Device + ?Sized>(
        &mut self,
        ct: &mut Conntrack,
        dev: &mut D,
        shared: &[PinnedConnection],
        symbols: &Symbols,
        now: u32,
    ) -> Result<MirrorReport, ConntrackError> {
        let mut report = MirrorReport::default();
        let mut wanted: HashMap<FlowKey, NewConnection> = HashMap::with_capacity(shared.len());
        for p in shared {
            match from_shared(p, symbols) {
                Some(c) => {
                    wanted.entry(c.key).or_insert(c);
                }
                None => report.unknown_names += 1,
            }
        }
        // Copies no longer shared lapse.
        let lapsed: Vec<FlowKey> = self
            .copies
            .keys()
            .filter(|k| !wanted.contains_key(k))
            .copied()
            .collect();
        for k in &lapsed {
            self.copies.remove(k);
            if let Some(i) = ct.lookup(k) {
                ct.touch(i, now);
                self.lapsed.insert(*k, now);
            }
        }
        report.lapsed = lapsed.len();
        let mut install = Vec::new();
        for (k, c) in &wanted {
            match ct.lookup(k).and_then(|i| ct.entry(i)) {
                Some(e) if e.backend == c.backend && e.rule == c.rule => {
                    report.present += 1;
                    // The same connection, not (yet) this host's own pinned one: a copy
                    // (read back after nlbd restarted, or shared again after it lapsed).
                    if !self.own.contains(k) && !self.copies.contains_key(k) {
                        self.lapsed.remove(k);
                        self.copies.insert(*k, Copy::new(c, now));
                    }
                }
                Some(_) => report.conflicts += 1,
                None => install.push(*c),
            }
        }
        install.sort_by_key(|c| (c.key.src_addr, c.key.src_port, c.key.dst_port));
        let mut outcomes = Vec::new();
        // One batch: through the command ring the driver cuts it to the data area.
        {
            let chunk = &install[..];
            ct.install_batch(dev, chunk, now, &mut outcomes)?;
            for (c, o) in chunk.iter().zip(&outcomes) {
                match o {
                    Installed::New(_) | Installed::Replaced(_) => {
                        report.installed += 1;
                        self.lapsed.remove(&c.key);
                        self.copies.insert(c.key, Copy::new(c, now));
                    }
                    Installed::Present(_) => report.present += 1,
                    // (Copies are installed whole: nothing is left to the NIC.)
                    Installed::BucketFull { .. } | Installed::LeftToNic { .. } => {
                        report.bucket_full += 1
                    }
                }
            }
        }
        let s = &mut self.stats;
        s.copies_installed += report.installed as u64;
        s.lapsed += report.lapsed as u64;
        s.conflicts = report.conflicts as u64;
        s.bucket_full = report.bucket_full as u64;
        s.unknown_names = report.unknown_names as u64;
        Ok(report)
    }

    /// Installs this host's own pinned connections as it published them before nlbd
    /// restarted (its card rebooted empty, or nlbd started on a new one): where the table has
    /// no entry for the flow, as ordinary entries, seen at `now`. The next refresh scans the
    /// table, so they are published again while they are pinned.
    pub(crate) fn restore<D: Device + ?Sized>(
        &mut self,
        ct: &mut Conntrack,
        dev: &mut D,
        own: &[PinnedConnection],
        symbols: &Symbols,
        now: u32,
    ) -> Result<usize, ConntrackError> {
        let install: Vec<NewConnection> = own
            .iter()
            .filter_map(|p| from_shared(p, symbols))
            .filter(|c| ct.lookup(&c.key).is_none())
            .collect();
        let mut outcomes = Vec::new();
        ct.install_batch(dev, &install, now, &mut outcomes)?;
        self.rescan = true;
        Ok(outcomes
            .iter()
            .filter(|o| matches!(o, Installed::New(_) | Installed::Replaced(_)))
            .count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::{Connections, LearnOptions};
    use etherparse::{PacketBuilder, SlicedPacket};
    use flowtable_compiler::{compile, CompileOptions, Compiled, HealthState};
    use nlb_driver::discovery::discover;
    use nlb_driver::model::ModelHandle;
    use nlb_driver::queues::Queues;
    use nlb_hw::enums::Verdict;

    /// One pool of three; the second revision adds a fourth instance (SPEC R3.2: about a
    /// quarter of the new flows move to it).
    fn config(with_d: bool) -> String {
        let d = if with_d { ", d" } else { "" };
        format!(
            "
forwardingRules:
  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}}
targetPools:
  - {{name: web, region: r, instances: [a, b, c{d}], idleTimeoutSec: 30}}
instances:
  - {{name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}}
  - {{name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}}
  - {{name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}}
  - {{name: d, ip: 192.0.2.4, zone: z, mac: '02:00:00:00:00:0d'}}
"
        )
    }

    fn compiled(with_d: bool) -> Compiled {
        let (config, d) = nlb_config::parse_config("t.yaml", &config(with_d));
        assert!(d.is_empty(), "{d}");
        compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap()
    }

    /// The instance a frame went to, by its destination MAC read with etherparse (L2 DSR).
    fn instance_of(frame: &[u8]) -> String {
        let p = SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
            panic!("not Ethernet II")
        };
        let mac = eth.destination();
        assert_eq!(mac[..5], [2, 0, 0, 0, 0]);
        ((mac[5] - 0x0a + b'a') as char).to_string()
    }

    fn tcp(client: u8, sport: u16, syn: bool) -> Vec<u8> {
        let mut f = Vec::new();
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
            .ipv4([198, 51, 100, client], [203, 0, 113, 80], 64)
            .tcp(sport, 80, 1, 1000);
        let b = if syn { b.syn() } else { b.ack(1) };
        b.write(&mut f, &[]).unwrap();
        f
    }

    /// A host: its NIC (the model) serving `c`'s tables and its connection manager.
    struct Host {
        sim: ModelHandle,
        dev: ModelHandle,
        conns: Connections,
        out: Vec<u8>,
    }

    impl Host {
        fn new(c: &Compiled) -> Host {
            let (sim, dev, conns) = crate::learn::tests::model_nic(c);
            Host {
                sim,
                dev,
                conns,
                out: vec![0; 16384],
            }
        }

        /// A frame through the NIC: the instance it went to and whether it hit the table.
        fn send(&mut self, frame: &[u8]) -> (String, bool) {
            let r = self.sim.lock().receive(frame, &mut self.out).unwrap();
            assert_eq!(r.verdict, Verdict::Forward);
            let hit = r.conntrack == firmware_sim::CtOutcome::Hit;
            (instance_of(&self.out[..r.out_len]), hit)
        }

        fn learn(&mut self, now: u32) {
            let mut q = Queues::new();
            while self.conns.poll(&mut self.dev, &mut q, now).unwrap() > 0 {}
        }
    }

    /// The instance the documented Maglev formula picks for a new connection of `flow` in
    /// `c`'s only pool (docs/pipeline.md §8: `maglev_base + index(hash(5-tuple), size)`).
    fn maglev_choice(c: &Compiled, client: u8, sport: u16) -> String {
        let key = nlb_reference::conntrack::tuple5_key(
            6,
            addr_to_u128([198, 51, 100, client].into()),
            sport,
            addr_to_u128([203, 0, 113, 80].into()),
            80,
        );
        let pool = &c.tables.pools[0];
        let slot = pool.maglev_base + nlb_hw::hash::table_index(key.hash(), pool.maglev_size);
        let id = c.tables.maglev[slot as usize].backend;
        c.symbols.backend(id).unwrap().to_string()
    }

    /// The connections of `opened` (client, port, instance) whose documented Maglev choice
    /// under `c` is another instance, as published (sorted).
    fn moved_by(c: &Compiled, opened: &[(u8, u16, String)]) -> Vec<PinnedConnection> {
        let mut moved: Vec<PinnedConnection> = opened
            .iter()
            .filter(|(client, sport, to)| maglev_choice(c, *client, *sport) != *to)
            .map(|(client, sport, to)| PinnedConnection {
                protocol: 6,
                client: SocketAddr::from(([198, 51, 100, *client], *sport)),
                vip: SocketAddr::from(([203, 0, 113, 80], 80)),
                rule: "web".into(),
                backend: to.clone(),
            })
            .collect();
        moved.sort();
        moved
    }

    /// What the host publishes now (the set, changed or not).
    fn published(conns: &mut Connections, c: &Compiled) -> Vec<PinnedConnection> {
        conns.republish_pinned();
        conns.own_pinned(&c.tables, &c.symbols).unwrap()
    }

    /// 120 connections opened on h1 under three instances: (client, port, instance).
    fn open_connections(h1: &mut Host) -> Vec<(u8, u16, String)> {
        let mut conns = Vec::new();
        for n in 0..120u16 {
            let (client, sport) = (1 + (n % 7) as u8, 40000 + n);
            let (to, hit) = h1.send(&tcp(client, sport, true));
            assert!(!hit);
            conns.push((client, sport, to));
            if n % 40 == 39 {
                h1.learn(1000);
            }
        }
        conns
    }

    #[test]
    fn pinned_are_the_connections_whose_maglev_choice_moved() {
        let (c1, c2) = (compiled(false), compiled(true));
        let mut h1 = Host::new(&c1);
        let opened = open_connections(&mut h1);
        assert!(
            published(&mut h1.conns, &c1).is_empty(),
            "learned connections follow the tables"
        );
        // Instance d is added: the connections Maglev would now send elsewhere are pinned.
        h1.conns.set_tables(&c2.tables);
        let mut got = published(&mut h1.conns, &c2);
        got.sort();
        assert_eq!(got, moved_by(&c2, &opened));
        // About a quarter of them (a fourth instance takes its share), never to d itself.
        assert!((15..=50).contains(&got.len()), "{} pinned", got.len());
        assert!(got.iter().all(|p| p.backend != "d"));
        assert_eq!(h1.conns.pinned_stats().scans, 2);
        assert_eq!(
            h1.conns.own_pinned(&c2.tables, &c2.symbols),
            None,
            "unchanged: nothing to publish again"
        );
        // Without a change of the tables, no scan; a closed connection leaves the set.
        let (client, sport) = match got[0].client {
            SocketAddr::V4(a) => (a.ip().octets()[3], a.port()),
            SocketAddr::V6(_) => unreachable!(),
        };
        let mut fin = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
            .ipv4([198, 51, 100, client], [203, 0, 113, 80], 64)
            .tcp(sport, 80, 2, 1000)
            .ack(1)
            .fin()
            .write(&mut fin, &[])
            .unwrap();
        h1.send(&fin);
        h1.learn(1001);
        let after = h1.conns.own_pinned(&c2.tables, &c2.symbols).unwrap();
        assert_eq!(after.len(), got.len() - 1);
        assert!(!after.contains(&got[0]));
        assert_eq!(h1.conns.pinned_stats().scans, 2);
    }

    /// Before new tables load (make-before-break), a host publishes the connections they
    /// would pin beside those pinned now; a host that installs them as copies keeps their
    /// backends once it serves the new tables, where Maglev alone would move them.
    #[test]
    fn prepared_tables_share_what_they_would_pin_before_they_load() {
        let (c1, c2) = (compiled(false), compiled(true));
        let mut h1 = Host::new(&c1);
        let opened = open_connections(&mut h1);
        let by_name = |b: u16| {
            let name = c1.symbols.backend(b)?;
            c2.symbols.backends.iter().position(|n| n == name)
        };
        let map = |rule: u16, backend: u16| Some((rule, u16::try_from(by_name(backend)?).ok()?));
        let mut got =
            h1.conns
                .prepared_pinned((&c1.tables, &c1.symbols), (&c2.tables, &c2.symbols), &map);
        got.sort();
        assert_eq!(got, moved_by(&c2, &opened));
        assert!(!got.is_empty());
        // Nothing was loaded or rescanned: h1 still publishes nothing for the tables serving.
        assert!(published(&mut h1.conns, &c1).is_empty());
        // h2 serves the old tables, installs the prepared set, then loads the new tables: the
        // moved connections keep their backends there.
        let mut h2 = Host::new(&c1);
        let r = h2.conns.mirror(&mut h2.dev, &got, &c1.symbols, 10).unwrap();
        assert_eq!(r.installed, got.len());
        let profile = discover(&mut h2.dev).unwrap().profile;
        let options = nlb_driver::loader::LoaderOptions::default();
        let mut loader = nlb_driver::loader::Loader::attach(&mut h2.dev, profile, options).unwrap();
        loader.load(&mut h2.dev, &c2.tables, &c2.nic).unwrap();
        for p in &got {
            let SocketAddr::V4(client) = p.client else {
                unreachable!()
            };
            let (client, sport, to) = (client.ip().octets()[3], client.port(), &p.backend);
            let (went, hit) = h2.send(&tcp(client, sport, false));
            assert_eq!((&went, hit), (to, true));
        }
    }

    #[test]
    fn copies_keep_their_backend_on_another_host_until_they_lapse() {
        let (c1, c2) = (compiled(false), compiled(true));
        let mut h1 = Host::new(&c1);
        let opened = open_connections(&mut h1);
        h1.conns.set_tables(&c2.tables);
        let shared = published(&mut h1.conns, &c2);
        let n = shared.len();
        assert!(n >= 10, "{n}");
        // h2 serves the second revision and has never seen these connections.
        let mut h2 = Host::new(&c2);
        // One flow h2 already tracks on its own with another backend (a conflict), and one
        // connection naming an instance h2 does not know.
        let conflict = &shared[0];
        let SocketAddr::V4(ca) = conflict.client else {
            unreachable!()
        };
        let (own_to, _) = h2.send(&tcp(ca.ip().octets()[3], ca.port(), true));
        h2.learn(2000);
        assert_ne!(own_to, conflict.backend);
        let mut offered = shared.clone();
        offered.push(PinnedConnection {
            backend: "zz".into(),
            ..shared[1].clone()
        });
        offered[n] = PinnedConnection {
            client: SocketAddr::from(([198, 51, 100, 99], 1)),
            ..offered[n].clone()
        };
        let r = h2
            .conns
            .mirror(&mut h2.dev, &offered, &c2.symbols, 2000)
            .unwrap();
        assert_eq!(
            (r.installed, r.conflicts, r.unknown_names, r.lapsed),
            (n - 1, 1, 1, 0),
            "{r:?}"
        );
        // Mirrored again: nothing new.
        let again = h2
            .conns
            .mirror(&mut h2.dev, &offered, &c2.symbols, 2001)
            .unwrap();
        assert_eq!((again.installed, again.present), (0, n - 1), "{again:?}");
        // ECMP moves the first half here: each packet reaches the backend it is pinned to
        // (not h2's Maglev choice), from the table.
        let (moved, idle) = shared[1..].split_at((n - 1) / 2);
        for p in moved {
            let SocketAddr::V4(a) = p.client else {
                unreachable!()
            };
            let (to, hit) = h2.send(&tcp(a.ip().octets()[3], a.port(), false));
            assert_eq!((to.as_str(), hit), (p.backend.as_str(), true), "{p:?}");
            assert_ne!(maglev_choice(&c2, a.ip().octets()[3], a.port()), p.backend);
        }
        // A connection of h1 that is not pinned reaches the same backend through h2's
        // tables alone (SPEC R11.3).
        let plain = opened
            .iter()
            .find(|(c, s, to)| maglev_choice(&c2, *c, *s) == *to)
            .unwrap();
        let (to, hit) = h2.send(&tcp(plain.0, plain.1, false));
        assert_eq!((to, hit), (plain.2.clone(), false));
        // The first ageing pass after an install does not count a hit (the slot's previous
        // occupant may have left it); hit again, the copies are adopted (h2 publishes them
        // now); the others do not age while h1 publishes them, however long.
        h2.conns.age(&mut h2.dev, 2002).unwrap();
        assert_eq!(h2.conns.pinned_stats().adopted, 0);
        for p in moved {
            let SocketAddr::V4(a) = p.client else {
                unreachable!()
            };
            h2.send(&tcp(a.ip().octets()[3], a.port(), false));
        }
        h2.conns.age(&mut h2.dev, 2003).unwrap();
        assert_eq!(h2.conns.pinned_stats().adopted, moved.len() as u64);
        let mut own = published(&mut h2.conns, &c2);
        own.sort();
        let mut moved_sorted = moved.to_vec();
        moved_sorted.sort();
        assert_eq!(own, moved_sorted);
        let report = h2.conns.age(&mut h2.dev, 2003 + 10_000).unwrap();
        // The adopted ones and h2's own connection (not hit since) age out; no copy does.
        assert_eq!(report.evicted as usize, moved.len() + 1);
        assert_eq!(h2.conns.pinned_stats().copies, idle.len() as u64);
        for p in idle {
            let k = from_shared(p, &c2.symbols).unwrap().key;
            assert!(h2.conns.conntrack().lookup(&k).is_some(), "{p:?} aged");
        }
        // h1 stops publishing them: they lapse, and age from then on (30 s).
        let r = h2
            .conns
            .mirror(&mut h2.dev, &[], &c2.symbols, 13_000)
            .unwrap();
        assert_eq!(r.lapsed, idle.len());
        assert_eq!(h2.conns.age(&mut h2.dev, 13_029).unwrap().evicted, 0);
        assert_eq!(
            h2.conns.age(&mut h2.dev, 13_030).unwrap().evicted as usize,
            idle.len()
        );
        assert_eq!(h2.conns.conntrack().valid_count(), 0);
        let s = h2.conns.pinned_stats();
        assert_eq!(
            (s.copies, s.lapsed, s.adopted),
            (0, idle.len() as u64, moved.len() as u64)
        );
    }

    /// nlbd restarts on a NIC that kept its table: the copies it reads back are copies again
    /// once the other hosts' connections are handed in (not published as its own, not aged);
    /// a lapsed copy hit afterwards is this host's and published; a card that lost its table
    /// gets this host's own pinned connections back from what it published.
    #[test]
    fn copies_survive_a_restart_and_own_connections_a_reflash() {
        let (c1, c2) = (compiled(false), compiled(true));
        let mut h1 = Host::new(&c1);
        open_connections(&mut h1);
        h1.conns.set_tables(&c2.tables);
        let shared = published(&mut h1.conns, &c2);
        let n = shared.len();
        assert!(n >= 10, "{n}");
        let mut h2 = Host::new(&c2);
        let r = h2
            .conns
            .mirror(&mut h2.dev, &shared, &c2.symbols, 2000)
            .unwrap();
        assert_eq!(r.installed, n);

        // nlbd restarts on h2: the table is read back; nothing is a copy until the fleet's
        // pinned connections come in, and then every one is.
        let info = discover(&mut h2.dev).unwrap();
        h2.conns = Connections::attach(&mut h2.dev, &info, 2100, LearnOptions::default()).unwrap();
        h2.conns.set_tables(&c2.tables);
        let r = h2
            .conns
            .mirror(&mut h2.dev, &shared, &c2.symbols, 2100)
            .unwrap();
        assert_eq!((r.installed, r.present), (0, n), "{r:?}");
        assert_eq!(h2.conns.pinned_stats().copies, n as u64);
        assert!(
            published(&mut h2.conns, &c2).is_empty(),
            "copies are not h2's own"
        );
        assert_eq!(h2.conns.age(&mut h2.dev, 2100 + 10_000).unwrap().evicted, 0);

        // h1 stops publishing them (its card is being reflashed); one comes to h2 later.
        let r = h2
            .conns
            .mirror(&mut h2.dev, &[], &c2.symbols, 12_200)
            .unwrap();
        assert_eq!(r.lapsed, n);
        let SocketAddr::V4(a) = shared[0].client else {
            unreachable!()
        };
        h2.conns.age(&mut h2.dev, 12_201).unwrap();
        let (to, hit) = h2.send(&tcp(a.ip().octets()[3], a.port(), false));
        assert_eq!((to.as_str(), hit), (shared[0].backend.as_str(), true));
        h2.conns.age(&mut h2.dev, 12_202).unwrap();
        assert_eq!(published(&mut h2.conns, &c2), vec![shared[0].clone()]);

        // h1's card comes back empty: what h1 published before is its own again.
        let mut h1 = Host::new(&c2);
        let restored = h1
            .conns
            .restore_pinned(&mut h1.dev, &shared, &c2.symbols, 12_300)
            .unwrap();
        assert_eq!(restored, n);
        let mut again = published(&mut h1.conns, &c2);
        again.sort();
        let mut want = shared.clone();
        want.sort();
        assert_eq!(again, want);
        for p in &shared {
            let SocketAddr::V4(a) = p.client else {
                unreachable!()
            };
            let (to, hit) = h1.send(&tcp(a.ip().octets()[3], a.port(), false));
            assert_eq!((to.as_str(), hit), (p.backend.as_str(), true));
        }
    }
}
