//! The fragment tracker of the slow path (SPEC R4.3).
//!
//! Non-first fragments carry no ports, so on a VIP with several rules for one protocol the NIC
//! cannot tell which rule they belong to and punts every fragment of such VIPs. The host decides
//! the first fragment (it has the ports) and remembers, per (source, destination, protocol, IP
//! ID), where it went; later fragments are sent the same way. Fragments that arrive before the
//! first are buffered until it comes, within a memory cap and a timeout. Memory stays bounded:
//! past the caps fragments are dropped and counted, never silently lost.

use hashbrown::HashTable;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Identifies one IP datagram (RFC 791 / RFC 8200 reassembly key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatagramKey {
    /// Source address, IPv4 mapped.
    pub src: u128,
    /// Destination address (the VIP), IPv4 mapped.
    pub dst: u128,
    /// IP protocol of the payload.
    pub protocol: u8,
    /// IPv4 identification or IPv6 fragment identification.
    pub ip_id: u32,
}

/// Where the datagram's first fragment went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Rule id of the first fragment.
    pub rule: u16,
    /// Pool id serving that rule.
    pub pool: u16,
    /// Backend id chosen for the datagram.
    pub backend: u16,
}

/// Limits of the tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentLimits {
    /// Datagrams remembered at once (decided or waiting).
    pub max_datagrams: usize,
    /// Bytes of fragments buffered while waiting for first fragments.
    pub max_buffered_bytes: usize,
    /// Fragments buffered per datagram.
    pub max_fragments_per_datagram: usize,
    /// How long a datagram is remembered after its last fragment (Linux's ipfrag_time is 30 s).
    pub timeout: Duration,
}

impl Default for FragmentLimits {
    fn default() -> Self {
        FragmentLimits {
            max_datagrams: 65_536,
            max_buffered_bytes: 16 << 20,
            max_fragments_per_datagram: 64,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Counters of the tracker (exported as metrics by nlbd).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FragmentStats {
    /// First fragments decided.
    pub first_seen: u64,
    /// Later fragments sent straight away (their first had been seen).
    pub followed: u64,
    /// Later fragments buffered because they came before their first.
    pub buffered: u64,
    /// Buffered fragments released when their first arrived.
    pub released: u64,
    /// Fragments dropped because a cap was reached.
    pub overflow_drops: u64,
    /// Buffered fragments dropped because their first never came in time.
    pub timeout_drops: u64,
    /// Datagrams forgotten after the timeout.
    pub expired: u64,
    /// Datagrams forgotten before their timeout to make room for a new first fragment (the
    /// least recently active first): under a sustained rate the tracker keeps the newest
    /// `max_datagrams` datagrams rather than refusing new ones.
    pub evicted: u64,
}

impl std::ops::AddAssign for FragmentStats {
    fn add_assign(&mut self, o: FragmentStats) {
        let FragmentStats {
            first_seen,
            followed,
            buffered,
            released,
            overflow_drops,
            timeout_drops,
            expired,
            evicted,
        } = o;
        self.first_seen += first_seen;
        self.followed += followed;
        self.buffered += buffered;
        self.released += released;
        self.overflow_drops += overflow_drops;
        self.timeout_drops += timeout_drops;
        self.expired += expired;
        self.evicted += evicted;
    }
}

/// What to do with a later (non-first) fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaterFragment {
    /// Send it the way of its first fragment.
    Send(Decision),
    /// Kept until the first fragment arrives.
    Buffered,
    /// Dropped: a memory cap was reached (counted in `overflow_drops`).
    Dropped,
}

/// A datagram's key as a slot stores it: 4-byte words, so that a slot fits one cache line.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
struct StoredKey {
    src: [u32; 4],
    dst: [u32; 4],
    ip_id: u32,
    protocol: u8,
}

impl From<DatagramKey> for StoredKey {
    fn from(k: DatagramKey) -> Self {
        let words = |a: u128| [0, 32, 64, 96].map(|shift| (a >> shift) as u32);
        StoredKey {
            src: words(k.src),
            dst: words(k.dst),
            ip_id: k.ip_id,
            protocol: k.protocol,
        }
    }
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum SlotState {
    #[default]
    Free,
    Decided,
    /// Later fragments came first; they wait in `FragmentTracker::waiting`.
    Waiting,
}

/// One remembered datagram, in one cache line: the table is larger than the caches, so each
/// datagram's look-up is a miss, and that miss should be the only one.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Slot {
    key: StoredKey,
    /// Nanoseconds after the tracker's epoch.
    expires: u64,
    /// Bumped each time the slot is freed: expiry items of its earlier datagrams are stale.
    generation: u32,
    decision: Decision,
    state: SlotState,
}

/// An expiry candidate: current while its slot still holds the same datagram
/// (`generation`) with the same `expires`.
#[derive(Clone, Copy)]
struct Due {
    expires: u64,
    slot: u32,
    generation: u32,
}

fn is_current(slots: &[Slot], d: &Due) -> bool {
    slots.get(d.slot as usize).is_some_and(|s| {
        s.state != SlotState::Free && s.generation == d.generation && s.expires == d.expires
    })
}

/// The bounded per-datagram tracker.
///
/// Datagrams live in slots reused as they are forgotten; a hash index maps keys to slot
/// numbers (4 bytes a bucket: it stays in cache where the slots cannot), and an expiry queue
/// of slot numbers orders them by last activity. Finding a datagram reads its slot once;
/// forgetting the oldest needs no look-up by key.
pub struct FragmentTracker {
    limits: FragmentLimits,
    slots: Vec<Slot>,
    free: Vec<u32>,
    index: HashTable<u32>,
    /// Keyed per tracker: the keys come from the network.
    hasher: ahash::RandomState,
    /// Fragments buffered for datagrams still waiting for their first, by slot.
    waiting: HashMap<u32, Vec<Vec<u8>>>,
    /// Expiry candidates in insertion/refresh order; stale items are skipped lazily.
    expiry: VecDeque<Due>,
    /// The time slots count from: the first `now` the tracker saw.
    epoch: Option<Instant>,
    live: usize,
    buffered_bytes: usize,
    stats: FragmentStats,
}

impl std::fmt::Debug for FragmentTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentTracker")
            .field("datagrams", &self.live)
            .field("buffered_bytes", &self.buffered_bytes)
            .field("stats", &self.stats)
            .finish()
    }
}

impl FragmentTracker {
    /// An empty tracker.
    pub fn new(limits: FragmentLimits) -> Self {
        // Sized for the cap up front: growing the index rehashes every entry, at the moment a
        // burst of fragmented datagrams fills it. Untouched pages cost nothing.
        let room = limits.max_datagrams.min(1 << 20);
        FragmentTracker {
            limits,
            slots: Vec::with_capacity(room),
            free: Vec::new(),
            index: HashTable::with_capacity(room),
            hasher: ahash::RandomState::new(),
            waiting: HashMap::new(),
            expiry: VecDeque::new(),
            epoch: None,
            live: 0,
            buffered_bytes: 0,
            stats: FragmentStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> FragmentStats {
        self.stats
    }

    /// Datagrams currently remembered.
    pub fn datagrams(&self) -> usize {
        self.live
    }

    /// Bytes currently buffered.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Records the decision for a datagram's first fragment. Returns the later fragments that
    /// were waiting for it, to be sent the same way (in arrival order).
    pub fn first_fragment(
        &mut self,
        key: DatagramKey,
        decision: Decision,
        now: Instant,
    ) -> Vec<Vec<u8>> {
        self.expire(now);
        self.stats.first_seen += 1;
        if self.limits.max_datagrams == 0 {
            // No room at all: later fragments will be buffered and time out. Count it.
            self.stats.overflow_drops += 1;
            return Vec::new();
        }
        let expires = self.expiry_of(now);
        let key = StoredKey::from(key);
        let hash = self.hasher.hash_one(key);
        let released = match self.find(&key, hash) {
            Some(s) => {
                self.refresh(s, expires);
                let slot = &mut self.slots[s as usize];
                slot.decision = decision;
                match std::mem::replace(&mut slot.state, SlotState::Decided) {
                    SlotState::Waiting => self.take_waiting(s),
                    _ => Vec::new(),
                }
            }
            None => {
                if self.live >= self.limits.max_datagrams {
                    self.evict_oldest();
                }
                self.occupy(key, hash, SlotState::Decided, decision, expires);
                Vec::new()
            }
        };
        self.stats.released += released.len() as u64;
        released
    }

    /// Handles a later fragment (`frame` is the whole punted frame, kept only if buffered).
    pub fn later_fragment(
        &mut self,
        key: DatagramKey,
        frame: &[u8],
        now: Instant,
    ) -> LaterFragment {
        self.expire(now);
        let expires = self.expiry_of(now);
        let key = StoredKey::from(key);
        let hash = self.hasher.hash_one(key);
        if let Some(s) = self.find(&key, hash) {
            let slot = self.slots[s as usize];
            if slot.state == SlotState::Decided {
                self.refresh(s, expires);
                self.stats.followed += 1;
                return LaterFragment::Send(slot.decision);
            }
            let frames = self.waiting.entry(s).or_default();
            if frames.len() >= self.limits.max_fragments_per_datagram
                || self.buffered_bytes + frame.len() > self.limits.max_buffered_bytes
            {
                self.stats.overflow_drops += 1;
                return LaterFragment::Dropped;
            }
            frames.push(frame.to_vec());
            self.buffered_bytes += frame.len();
            self.stats.buffered += 1;
            return LaterFragment::Buffered;
        }
        if self.live >= self.limits.max_datagrams
            || self.buffered_bytes + frame.len() > self.limits.max_buffered_bytes
            || self.limits.max_fragments_per_datagram == 0
        {
            self.stats.overflow_drops += 1;
            return LaterFragment::Dropped;
        }
        let s = self.occupy(key, hash, SlotState::Waiting, Decision::default(), expires);
        self.waiting.insert(s, vec![frame.to_vec()]);
        self.buffered_bytes += frame.len();
        self.stats.buffered += 1;
        LaterFragment::Buffered
    }

    /// Forgets datagrams idle past the timeout; buffered fragments of datagrams whose first
    /// never came are dropped and counted. Called by every operation; call it on a timer too.
    pub fn expire(&mut self, now: Instant) {
        let now = self.ticks(now);
        while let Some(&d) = self.expiry.front() {
            if d.expires > now {
                break;
            }
            self.expiry.pop_front();
            if !is_current(&self.slots, &d) {
                continue; // refreshed since, or already gone
            }
            self.stats.expired += 1;
            let dropped = self.release(d.slot).len();
            self.stats.timeout_drops += dropped as u64;
        }
        // Refreshes push duplicates; keep the queue from growing without bound.
        if self.expiry.len() > 4 * self.live + 1024 {
            let slots = &self.slots;
            self.expiry.retain(|d| is_current(slots, d));
        }
    }

    /// Nanoseconds from the epoch to `now` (0 before it).
    fn ticks(&mut self, now: Instant) -> u64 {
        let epoch = *self.epoch.get_or_insert(now);
        u64::try_from(now.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// When a datagram active at `now` is forgotten, in ticks.
    fn expiry_of(&mut self, now: Instant) -> u64 {
        let timeout = u64::try_from(self.limits.timeout.as_nanos()).unwrap_or(u64::MAX);
        self.ticks(now).saturating_add(timeout)
    }

    fn find(&self, key: &StoredKey, hash: u64) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(hash, |&s| slots[s as usize].key == *key)
            .copied()
    }

    /// Puts a new datagram in a free slot (the caller made room) and returns the slot.
    fn occupy(
        &mut self,
        key: StoredKey,
        hash: u64,
        state: SlotState,
        decision: Decision,
        expires: u64,
    ) -> u32 {
        let s = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            (self.slots.len() - 1) as u32
        });
        let slot = &mut self.slots[s as usize];
        *slot = Slot {
            key,
            expires,
            generation: slot.generation,
            decision,
            state,
        };
        let generation = slot.generation;
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index
            .insert_unique(hash, s, |&i| hasher.hash_one(slots[i as usize].key));
        self.expiry.push_back(Due {
            expires,
            slot: s,
            generation,
        });
        self.live += 1;
        s
    }

    /// Marks a datagram active until `expires` (a later time than it had).
    fn refresh(&mut self, s: u32, expires: u64) {
        let slot = &mut self.slots[s as usize];
        if expires > slot.expires {
            slot.expires = expires;
            self.expiry.push_back(Due {
                expires,
                slot: s,
                generation: slot.generation,
            });
        }
    }

    /// The fragments slot `s` buffered, out of the buffered bytes.
    fn take_waiting(&mut self, s: u32) -> Vec<Vec<u8>> {
        let frames = self.waiting.remove(&s).unwrap_or_default();
        self.buffered_bytes -= frames.iter().map(Vec::len).sum::<usize>();
        frames
    }

    /// Forgets the datagram in slot `s`; returns the fragments it had buffered.
    fn release(&mut self, s: u32) -> Vec<Vec<u8>> {
        let slot = &mut self.slots[s as usize];
        let hash = self.hasher.hash_one(slot.key);
        let was = std::mem::take(&mut slot.state);
        slot.generation = slot.generation.wrapping_add(1);
        if let Ok(e) = self.index.find_entry(hash, |&i| i == s) {
            e.remove();
        }
        self.free.push(s);
        self.live -= 1;
        match was {
            SlotState::Waiting => self.take_waiting(s),
            _ => Vec::new(),
        }
    }

    /// Forgets the datagram whose last activity is the oldest; its buffered fragments, if it
    /// was still waiting for its first, are dropped (counted as overflow).
    fn evict_oldest(&mut self) {
        while let Some(d) = self.expiry.pop_front() {
            if !is_current(&self.slots, &d) {
                continue;
            }
            self.stats.evicted += 1;
            let dropped = self.release(d.slot).len();
            self.stats.overflow_drops += dropped as u64;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u32) -> DatagramKey {
        DatagramKey {
            src: 0xffff_c633_640a,
            dst: 0xffff_cb00_7101,
            protocol: 17,
            ip_id: id,
        }
    }

    const D: Decision = Decision {
        rule: 3,
        pool: 1,
        backend: 42,
    };

    #[test]
    fn later_fragments_follow_the_first() {
        let mut t = FragmentTracker::new(FragmentLimits::default());
        let now = Instant::now();
        assert!(t.first_fragment(key(1), D, now).is_empty());
        assert_eq!(
            t.later_fragment(key(1), &[1, 2, 3], now),
            LaterFragment::Send(D)
        );
        assert_eq!(t.later_fragment(key(2), &[9], now), LaterFragment::Buffered);
        assert_eq!(t.stats().followed, 1);
    }

    #[test]
    fn early_fragments_are_released_in_order_when_the_first_arrives() {
        let mut t = FragmentTracker::new(FragmentLimits::default());
        let now = Instant::now();
        assert_eq!(
            t.later_fragment(key(7), b"second", now),
            LaterFragment::Buffered
        );
        assert_eq!(
            t.later_fragment(key(7), b"third", now),
            LaterFragment::Buffered
        );
        assert_eq!(t.buffered_bytes(), 11);
        let out = t.first_fragment(key(7), D, now);
        assert_eq!(out, vec![b"second".to_vec(), b"third".to_vec()]);
        assert_eq!(t.buffered_bytes(), 0);
        assert_eq!(
            t.later_fragment(key(7), b"fourth", now),
            LaterFragment::Send(D)
        );
    }

    #[test]
    fn buffered_fragments_time_out_and_are_counted() {
        let limits = FragmentLimits {
            timeout: Duration::from_secs(2),
            ..FragmentLimits::default()
        };
        let mut t = FragmentTracker::new(limits);
        let now = Instant::now();
        t.later_fragment(key(1), &[0; 100], now);
        t.expire(now + Duration::from_secs(1));
        assert_eq!(t.datagrams(), 1);
        t.expire(now + Duration::from_secs(3));
        assert_eq!(t.datagrams(), 0);
        assert_eq!(t.buffered_bytes(), 0);
        assert_eq!(t.stats().timeout_drops, 1);
        // A first fragment after the timeout finds nothing to release.
        assert!(t
            .first_fragment(key(1), D, now + Duration::from_secs(4))
            .is_empty());
    }

    #[test]
    fn memory_stays_bounded_under_a_flood() {
        let limits = FragmentLimits {
            max_datagrams: 100,
            max_buffered_bytes: 10_000,
            max_fragments_per_datagram: 4,
            timeout: Duration::from_secs(30),
        };
        let mut t = FragmentTracker::new(limits);
        let now = Instant::now();
        let mut dropped = 0;
        for i in 0..10_000u32 {
            // Many datagrams, many fragments each, first fragments never come.
            if t.later_fragment(key(i % 300), &[0; 500], now) == LaterFragment::Dropped {
                dropped += 1;
            }
            assert!(t.datagrams() <= 100);
            assert!(t.buffered_bytes() <= 10_000);
        }
        assert_eq!(t.stats().overflow_drops, dropped);
        assert_eq!(t.stats().buffered + dropped, 10_000);
    }

    /// A full tracker makes room for a new first fragment by forgetting the datagram least
    /// recently active (a refresh by a later fragment counts as activity): the newest keep
    /// their decisions, a waiting datagram forgotten drops its buffered fragments, counted.
    #[test]
    fn a_full_tracker_forgets_the_least_recently_active_datagram() {
        let limits = FragmentLimits {
            max_datagrams: 3,
            timeout: Duration::from_secs(30),
            ..FragmentLimits::default()
        };
        let mut t = FragmentTracker::new(limits);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(
            t.later_fragment(key(1), &[7; 10], at(0)),
            LaterFragment::Buffered
        );
        assert!(t.first_fragment(key(2), D, at(1)).is_empty());
        assert!(t.first_fragment(key(3), D, at(2)).is_empty());
        // 1 waits for its first fragment and is the oldest: it goes, with its fragment.
        assert!(t.first_fragment(key(4), D, at(3)).is_empty());
        assert_eq!((t.stats().evicted, t.stats().overflow_drops), (1, 1));
        assert_eq!(t.buffered_bytes(), 0);
        // 2 is active again (a later fragment), so 3 is now the least recently active.
        assert_eq!(
            t.later_fragment(key(2), &[1], at(4)),
            LaterFragment::Send(D)
        );
        assert!(t.first_fragment(key(5), D, at(5)).is_empty());
        assert_eq!(t.stats().evicted, 2);
        assert_eq!(t.datagrams(), 3);
        for k in [2, 4, 5] {
            assert_eq!(
                t.later_fragment(key(k), &[1], at(6)),
                LaterFragment::Send(D),
                "{k}"
            );
        }
        // 3 was forgotten: its later fragment has no decision to follow. A fragment without
        // its first never pushes a decision out (a flood of such fragments would flush the
        // tracker), so with the tracker full it is dropped.
        assert_eq!(
            t.later_fragment(key(3), &[1], at(7)),
            LaterFragment::Dropped
        );
        assert_eq!((t.stats().evicted, t.stats().overflow_drops), (2, 2));
        // Nothing is forgotten while there is room.
        let mut roomy = FragmentTracker::new(FragmentLimits::default());
        for k in 0..1000 {
            roomy.first_fragment(key(k), D, at(0));
        }
        assert_eq!((roomy.stats().evicted, roomy.datagrams()), (0, 1000));
    }

    #[test]
    fn refreshed_datagrams_do_not_expire_early() {
        let limits = FragmentLimits {
            timeout: Duration::from_secs(10),
            ..FragmentLimits::default()
        };
        let mut t = FragmentTracker::new(limits);
        let t0 = Instant::now();
        t.first_fragment(key(5), D, t0);
        for s in 1..30 {
            let now = t0 + Duration::from_secs(s);
            assert_eq!(
                t.later_fragment(key(5), &[1], now),
                LaterFragment::Send(D),
                "at {s}s"
            );
        }
        t.expire(t0 + Duration::from_secs(45));
        assert_eq!(t.datagrams(), 0);
    }

    /// The tracker's rules kept the plain way: datagrams in a list, least recently active
    /// first. A datagram is active when it is created, decided, or followed by a later
    /// fragment (buffering one more fragment for a datagram still waiting is not activity);
    /// it is forgotten `timeout` after its last activity; a first fragment of a new datagram
    /// with the tracker full forgets the least recently active one.
    /// (key, decision, waiting fragments, expires).
    type NaiveDatagram = (u32, Option<Decision>, Vec<Vec<u8>>, Instant);

    struct Naive {
        limits: FragmentLimits,
        /// Least recently active first.
        list: Vec<NaiveDatagram>,
        bytes: usize,
        stats: FragmentStats,
    }

    impl Naive {
        fn expire(&mut self, now: Instant) {
            let (gone, kept) = self.list.drain(..).partition(|e| e.3 <= now);
            self.list = kept;
            for (_, _, frames, _) in gone {
                self.stats.expired += 1;
                self.stats.timeout_drops += frames.len() as u64;
                self.bytes -= frames.iter().map(Vec::len).sum::<usize>();
            }
        }

        fn first(&mut self, k: u32, d: Decision, now: Instant) -> Vec<Vec<u8>> {
            self.expire(now);
            self.stats.first_seen += 1;
            let expires = now + self.limits.timeout;
            if let Some(at) = self.list.iter().position(|e| e.0 == k) {
                let (_, _, frames, _) = self.list.remove(at);
                self.bytes -= frames.iter().map(Vec::len).sum::<usize>();
                self.stats.released += frames.len() as u64;
                self.list.push((k, Some(d), Vec::new(), expires));
                return frames;
            }
            if self.list.len() >= self.limits.max_datagrams {
                let (_, _, frames, _) = self.list.remove(0);
                self.stats.evicted += 1;
                self.stats.overflow_drops += frames.len() as u64;
                self.bytes -= frames.iter().map(Vec::len).sum::<usize>();
            }
            self.list.push((k, Some(d), Vec::new(), expires));
            Vec::new()
        }

        fn later(&mut self, k: u32, frame: &[u8], now: Instant) -> LaterFragment {
            self.expire(now);
            let (limits, bytes) = (self.limits, self.bytes);
            let full = |frames: usize| {
                frames >= limits.max_fragments_per_datagram
                    || bytes + frame.len() > limits.max_buffered_bytes
            };
            match self.list.iter().position(|e| e.0 == k) {
                Some(at) => {
                    if let Some(d) = self.list[at].1 {
                        let mut e = self.list.remove(at);
                        e.3 = now + self.limits.timeout;
                        self.list.push(e);
                        self.stats.followed += 1;
                        return LaterFragment::Send(d);
                    }
                    if full(self.list[at].2.len()) {
                        self.stats.overflow_drops += 1;
                        return LaterFragment::Dropped;
                    }
                    self.list[at].2.push(frame.to_vec());
                }
                None => {
                    if self.list.len() >= self.limits.max_datagrams || full(0) {
                        self.stats.overflow_drops += 1;
                        return LaterFragment::Dropped;
                    }
                    let expires = now + self.limits.timeout;
                    self.list.push((k, None, vec![frame.to_vec()], expires));
                }
            }
            self.bytes += frame.len();
            self.stats.buffered += 1;
            LaterFragment::Buffered
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        First(u32, u16),
        Later(u32, usize),
        Expire,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = (Op, u64)> {
        use proptest::prelude::*;
        let op = prop_oneof![
            4 => (0u32..10, 0u16..4).prop_map(|(k, b)| Op::First(k, b)),
            5 => (0u32..10, 1usize..700).prop_map(|(k, n)| Op::Later(k, n)),
            1 => Just(Op::Expire),
        ];
        // Time moves on at every operation (activity has an order), sometimes past the
        // timeout.
        (op, prop_oneof![8 => 1u64..5, 1 => 5u64..40])
    }

    proptest::proptest! {
        /// Any sequence of first fragments, later fragments and expiry over a few keys with
        /// small caps (slots reused, stale expiry items, evictions of waiting datagrams) does
        /// what the plain rules say, answer by answer and counter by counter.
        #[test]
        fn the_tracker_keeps_the_rules_of_a_plain_list(
            max_datagrams in 0usize..6,
            max_fragments in 0usize..4,
            max_bytes in 0usize..2_000,
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let limits = FragmentLimits {
                max_datagrams,
                max_buffered_bytes: max_bytes,
                max_fragments_per_datagram: max_fragments,
                timeout: Duration::from_millis(20),
            };
            let mut t = FragmentTracker::new(limits);
            let mut n = Naive { limits, list: Vec::new(), bytes: 0, stats: FragmentStats::default() };
            let mut now = Instant::now();
            for (i, (op, dt)) in ops.into_iter().enumerate() {
                now += Duration::from_millis(dt);
                match op {
                    Op::First(k, b) => {
                        let d = Decision { rule: 1, pool: 2, backend: b };
                        let frames = if max_datagrams == 0 {
                            // No room at all: counted, nothing remembered.
                            n.expire(now);
                            n.stats.first_seen += 1;
                            n.stats.overflow_drops += 1;
                            Vec::new()
                        } else {
                            n.first(k, d, now)
                        };
                        proptest::prop_assert_eq!(t.first_fragment(key(k), d, now), frames, "op {}", i);
                    }
                    Op::Later(k, len) => {
                        let frame = vec![i as u8; len];
                        proptest::prop_assert_eq!(
                            t.later_fragment(key(k), &frame, now),
                            n.later(k, &frame, now),
                            "op {}", i
                        );
                    }
                    Op::Expire => {
                        t.expire(now);
                        n.expire(now);
                    }
                }
                proptest::prop_assert_eq!(t.stats(), n.stats, "op {}", i);
                proptest::prop_assert_eq!(t.datagrams(), n.list.len(), "op {}", i);
                proptest::prop_assert_eq!(t.buffered_bytes(), n.bytes, "op {}", i);
            }
        }
    }
}
