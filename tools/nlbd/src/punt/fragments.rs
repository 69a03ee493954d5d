//! The fragment tracker of the slow path (SPEC R4.3).
//!
//! Non-first fragments carry no ports, so on a VIP with several rules for one protocol the NIC
//! cannot tell which rule they belong to and punts every fragment of such VIPs. The host decides
//! the first fragment (it has the ports) and remembers, per (source, destination, protocol, IP
//! ID), where it went; later fragments are sent the same way. Fragments that arrive before the
//! first are buffered until it comes, within a memory cap and a timeout. Memory stays bounded:
//! past the caps fragments are dropped and counted, never silently lost.

use std::collections::hash_map::Entry as MapEntry;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

enum State {
    Decided(Decision),
    Waiting { frames: Vec<Vec<u8>> },
}

struct Entry {
    state: State,
    expires: Instant,
}

/// The bounded per-datagram tracker.
pub struct FragmentTracker {
    limits: FragmentLimits,
    entries: HashMap<DatagramKey, Entry>,
    /// Expiry candidates in insertion/refresh order; stale items are skipped lazily.
    expiry: VecDeque<(Instant, DatagramKey)>,
    buffered_bytes: usize,
    stats: FragmentStats,
}

impl std::fmt::Debug for FragmentTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentTracker")
            .field("datagrams", &self.entries.len())
            .field("buffered_bytes", &self.buffered_bytes)
            .field("stats", &self.stats)
            .finish()
    }
}

impl FragmentTracker {
    /// An empty tracker.
    pub fn new(limits: FragmentLimits) -> Self {
        FragmentTracker {
            limits,
            // Sized for the cap up front: growing it rehashes every entry, at the moment a
            // burst of fragmented datagrams fills it. Untouched pages cost nothing.
            entries: HashMap::with_capacity(limits.max_datagrams.min(1 << 20)),
            expiry: VecDeque::new(),
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
        self.entries.len()
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
        let expires = now + self.limits.timeout;
        if self.limits.max_datagrams == 0 {
            // No room at all: later fragments will be buffered and time out. Count it.
            self.stats.overflow_drops += 1;
            return Vec::new();
        }
        // One look-up whether the datagram is known or new (the table is larger than the
        // caches: each look-up is a miss).
        let released = match self.entries.entry(key) {
            MapEntry::Occupied(mut o) => {
                let entry = o.get_mut();
                entry.expires = expires;
                match std::mem::replace(&mut entry.state, State::Decided(decision)) {
                    State::Waiting { frames } => frames,
                    State::Decided(_) => Vec::new(),
                }
            }
            MapEntry::Vacant(v) => {
                v.insert(Entry {
                    state: State::Decided(decision),
                    expires,
                });
                Vec::new()
            }
        };
        self.expiry.push_back((expires, key));
        self.buffered_bytes -= released.iter().map(Vec::len).sum::<usize>();
        self.stats.released += released.len() as u64;
        // Over the cap only by the datagram just added, whose expiry item is the newest: the
        // one forgotten is another.
        if self.entries.len() > self.limits.max_datagrams {
            self.evict_oldest();
        }
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
        let expires = now + self.limits.timeout;
        if let Some(entry) = self.entries.get_mut(&key) {
            match &mut entry.state {
                State::Decided(d) => {
                    let d = *d;
                    entry.expires = expires;
                    self.expiry.push_back((expires, key));
                    self.stats.followed += 1;
                    return LaterFragment::Send(d);
                }
                State::Waiting { frames } => {
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
            }
        }
        if self.entries.len() >= self.limits.max_datagrams
            || self.buffered_bytes + frame.len() > self.limits.max_buffered_bytes
            || self.limits.max_fragments_per_datagram == 0
        {
            self.stats.overflow_drops += 1;
            return LaterFragment::Dropped;
        }
        self.entries.insert(
            key,
            Entry {
                state: State::Waiting {
                    frames: vec![frame.to_vec()],
                },
                expires,
            },
        );
        self.buffered_bytes += frame.len();
        self.expiry.push_back((expires, key));
        self.stats.buffered += 1;
        LaterFragment::Buffered
    }

    /// Forgets the datagram whose last fragment is the oldest; its buffered fragments, if
    /// it was still waiting for its first, are dropped (counted as overflow).
    fn evict_oldest(&mut self) {
        while let Some((when, key)) = self.expiry.pop_front() {
            // Items of datagrams refreshed since (a later expiry) or gone are stale.
            let MapEntry::Occupied(o) = self.entries.entry(key) else {
                continue;
            };
            if o.get().expires != when {
                continue;
            }
            self.stats.evicted += 1;
            if let State::Waiting { frames } = o.remove().state {
                self.buffered_bytes -= frames.iter().map(Vec::len).sum::<usize>();
                self.stats.overflow_drops += frames.len() as u64;
            }
            return;
        }
    }

    /// Forgets datagrams idle past the timeout; buffered fragments of datagrams whose first
    /// never came are dropped and counted. Called by every operation; call it on a timer too.
    pub fn expire(&mut self, now: Instant) {
        while let Some(&(when, key)) = self.expiry.front() {
            if when > now {
                break;
            }
            self.expiry.pop_front();
            let live = self.entries.get(&key).is_some_and(|e| e.expires <= now);
            if !live {
                continue; // refreshed since, or already gone
            }
            if let Some(Entry { state, .. }) = self.entries.remove(&key) {
                self.stats.expired += 1;
                if let State::Waiting { frames } = state {
                    self.buffered_bytes -= frames.iter().map(Vec::len).sum::<usize>();
                    self.stats.timeout_drops += frames.len() as u64;
                }
            }
        }
        // Refreshes push duplicates; keep the queue from growing without bound.
        if self.expiry.len() > 4 * self.entries.len() + 1024 {
            let entries = &self.entries;
            self.expiry
                .retain(|(when, key)| entries.get(key).is_some_and(|e| e.expires == *when));
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
}
