//! The connection table: `buckets × ways` [`CtEntry`] slots (not banked), with the hit bits
//! the `conntrack` register block exposes.
//!
//! The pipeline only reads it; the host writes it (through the register block, or through the
//! host-side helpers [`ConnTable::install`] / [`ConnTable::mark_closed`] that model what the
//! slow path does on learn and teardown events).
//!
//! Beside the entries the model keeps a 16-bit tag per entry: 0 for an invalid entry, else a
//! fingerprint of the TUPLE5 hash of the entry's own key (whatever bucket it was written to).
//! A lookup compares full keys only in the ways whose tag equals the packet's, so a miss
//! usually reads just the bucket's tags (one cache line) and a hit one entry more. This is a
//! model-internal index, invisible at the interface: equal keys have equal hashes, so a way
//! skipped for its tag could never have matched.

use crate::keyhash::key_hash;
use nlb_hw::enums::KeyType;
use nlb_hw::layouts::{CtEntry, LearnEvent};
use nlb_hw::{table_index, FlowKey};

/// `flags` bit of a [`CtEntry`]: FIN or RST seen.
pub const CT_FLAG_CLOSED: u8 = 0x01;

/// Why a host-side connection-table operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CtError {
    /// Index beyond buckets × ways.
    #[error("connection table index {index} is out of range ({len} entries)")]
    OutOfRange {
        /// Index given.
        index: u32,
        /// Entries in the table.
        len: u32,
    },
    /// Every way of the flow's bucket holds another connection.
    #[error("connection table bucket {bucket} is full ({ways} ways)")]
    BucketFull {
        /// The bucket.
        bucket: u32,
        /// Ways per bucket.
        ways: u32,
    },
}

/// The connection table.
#[derive(Debug, Clone)]
pub struct ConnTable {
    buckets: u32,
    ways: u32,
    entries: Vec<CtEntry>,
    /// Per entry: 0 when invalid, else [`tag_of`] the TUPLE5 hash of its key.
    tags: Vec<u16>,
    hits: Vec<u32>,
    valid: u32,
}

/// The tag of a TUPLE5 flow hash: its low 16 bits (the bucket index comes from the high
/// bits), never 0.
#[inline]
pub fn tag_of(tuple5_hash: u32) -> u16 {
    tuple5_hash as u16 | 1
}

/// The tag an entry gets in the table.
fn entry_tag(e: &CtEntry) -> u16 {
    if !e.valid {
        return 0;
    }
    tag_of(key_hash(
        KeyType::Tuple5,
        e.protocol,
        e.src_port,
        e.dst_port,
        e.src_addr,
        e.dst_addr,
    ))
}

/// Whether a valid entry holds exactly this flow (client → VIP orientation).
#[inline]
fn entry_matches(e: &CtEntry, key: &FlowKey) -> bool {
    e.valid
        && e.protocol == key.protocol
        && e.src_port == key.src_port
        && e.dst_port == key.dst_port
        && e.src_addr == key.src_addr
        && e.dst_addr == key.dst_addr
}

/// Hints the CPU to fetch the cache line holding `p` (no effect elsewhere).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl ConnTable {
    /// An empty table of `buckets × ways` entries (both at least 1).
    pub fn new(buckets: u32, ways: u32) -> ConnTable {
        let buckets = buckets.max(1);
        let ways = ways.max(1);
        let len = buckets as usize * ways as usize;
        ConnTable {
            buckets,
            ways,
            entries: vec![CtEntry::default(); len],
            tags: vec![0; len],
            hits: vec![0; len.div_ceil(32)],
            valid: 0,
        }
    }

    /// Buckets.
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// Ways per bucket.
    pub fn ways(&self) -> u32 {
        self.ways
    }

    /// Entries (buckets × ways).
    pub fn len(&self) -> u32 {
        self.entries.len() as u32
    }

    /// Whether the table has no entry slots (never: at least 1 × 1).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Valid entries.
    pub fn valid_count(&self) -> u32 {
        self.valid
    }

    /// Bucket of a TUPLE5 flow hash.
    #[inline]
    pub fn bucket_of(&self, tuple5_hash: u32) -> u32 {
        table_index(tuple5_hash, self.buckets)
    }

    /// The ways of a bucket, for prefetching.
    #[inline]
    pub fn bucket_entries(&self, bucket: u32) -> &[CtEntry] {
        let start = bucket as usize * self.ways as usize;
        self.entries
            .get(start..start + self.ways as usize)
            .unwrap_or(&[])
    }

    /// The lowest way of `bucket` holding a valid entry for exactly this 5-tuple.
    #[inline]
    pub fn lookup_in(&self, bucket: u32, key: &FlowKey) -> Option<u32> {
        let start = bucket as usize * self.ways as usize;
        self.bucket_entries(bucket)
            .iter()
            .position(|e| entry_matches(e, key))
            .map(|w| (start + w) as u32)
    }

    /// Looks up a 5-tuple (its TUPLE5 hash is computed here).
    pub fn lookup(&self, key: &FlowKey) -> Option<u32> {
        let h = key_hash(
            KeyType::Tuple5,
            key.protocol,
            key.src_port,
            key.dst_port,
            key.src_addr,
            key.dst_addr,
        );
        self.probe(self.bucket_of(h), tag_of(h), key)
    }

    /// The pipeline's lookup: the same answer as [`ConnTable::lookup_in`], where `tag` is
    /// [`tag_of`] the TUPLE5 hash of `key`; full keys are compared only where tags match.
    #[inline]
    pub(crate) fn probe(&self, bucket: u32, tag: u16, key: &FlowKey) -> Option<u32> {
        self.probe_with(bucket, tag, |e| entry_matches(e, key))
    }

    /// [`ConnTable::probe`] with the key comparison given by the caller (`matches` must be
    /// true exactly for valid entries of the packet's 5-tuple); returns the entry's index
    /// and backend.
    #[inline]
    pub(crate) fn probe_with(
        &self,
        bucket: u32,
        tag: u16,
        matches: impl Fn(&CtEntry) -> bool,
    ) -> Option<u32> {
        let ways = self.ways as usize;
        let start = bucket as usize * ways;
        let tags = self.tags.get(start..start + ways)?;
        // Tags first (a miss usually ends here), keys only where a tag matches.
        let mut w = tags.iter().position(|&t| t == tag)?;
        loop {
            if self.entries.get(start + w).is_some_and(&matches) {
                return Some((start + w) as u32);
            }
            w += 1 + tags.get(w + 1..)?.iter().position(|&t| t == tag)?;
        }
    }

    /// Starts fetching the tags of a bucket (a batch does this for all its packets before it
    /// looks any up).
    #[inline]
    pub(crate) fn prefetch_tags(&self, bucket: u32) {
        if let Some(t) = self.tags.get(bucket as usize * self.ways as usize) {
            prefetch(t);
        }
    }

    /// Starts fetching the entries of a bucket whose tag is `tag` (once the tags are at hand).
    #[inline]
    pub(crate) fn prefetch_candidates(&self, bucket: u32, tag: u16) {
        let start = bucket as usize * self.ways as usize;
        let Some(tags) = self.tags.get(start..start + self.ways as usize) else {
            return;
        };
        for (w, &t) in tags.iter().enumerate() {
            if t == tag {
                if let Some(e) = self.entries.get(start + w) {
                    // An entry may straddle two cache lines.
                    let p = (e as *const CtEntry).cast::<u8>();
                    prefetch(p);
                    prefetch(p.wrapping_add(size_of::<CtEntry>() - 1));
                }
            }
        }
    }

    /// One entry.
    pub fn entry(&self, index: u32) -> Option<&CtEntry> {
        self.entries.get(index as usize)
    }

    /// Replaces one entry (what the register block's WRITE command does).
    pub fn write(&mut self, index: u32, entry: CtEntry) -> Result<(), CtError> {
        let len = self.len();
        let slot = self
            .entries
            .get_mut(index as usize)
            .ok_or(CtError::OutOfRange { index, len })?;
        match (slot.valid, entry.valid) {
            (false, true) => self.valid += 1,
            (true, false) => self.valid -= 1,
            _ => {}
        }
        *slot = entry;
        if let Some(t) = self.tags.get_mut(index as usize) {
            *t = entry_tag(&entry);
        }
        Ok(())
    }

    /// Sets the hit bit of an entry (the pipeline, on a hit).
    #[inline]
    pub fn mark_hit(&mut self, index: u32) {
        if let Some(w) = self.hits.get_mut(index as usize / 32) {
            *w |= 1 << (index % 32);
        }
    }

    /// Reads and clears the hit bits of the 32 entries at `index & !31`.
    pub fn take_hits(&mut self, index: u32) -> u32 {
        self.hits
            .get_mut(index as usize / 32)
            .map(std::mem::take)
            .unwrap_or(0)
    }

    /// Host-side install of a learn event, as the slow path does it: the entry of the same
    /// 5-tuple if there is one, else the lowest free way of the bucket.
    pub fn install(&mut self, ev: &LearnEvent, timestamp: u32) -> Result<u32, CtError> {
        let key = tuple5_key(
            ev.protocol,
            ev.src_addr,
            ev.src_port,
            ev.dst_addr,
            ev.dst_port,
        );
        let bucket = self.bucket_of(key_hash(
            KeyType::Tuple5,
            key.protocol,
            key.src_port,
            key.dst_port,
            key.src_addr,
            key.dst_addr,
        ));
        let start = bucket * self.ways;
        let index = match self.lookup_in(bucket, &key) {
            Some(i) => i,
            None => (start..start + self.ways)
                .find(|&i| !self.entries[i as usize].valid)
                .ok_or(CtError::BucketFull {
                    bucket,
                    ways: self.ways,
                })?,
        };
        self.write(
            index,
            CtEntry {
                valid: true,
                protocol: ev.protocol,
                src_port: ev.src_port,
                dst_port: ev.dst_port,
                src_addr: ev.src_addr,
                dst_addr: ev.dst_addr,
                backend: ev.backend,
                rule: ev.rule,
                flags: 0,
                timestamp,
            },
        )?;
        Ok(index)
    }

    /// Host-side handling of a teardown event: marks the connection's entry closed (FIN/RST
    /// seen) and returns its index; the entry stays until the host ages it out.
    pub fn mark_closed(&mut self, ev: &LearnEvent) -> Option<u32> {
        let key = tuple5_key(
            ev.protocol,
            ev.src_addr,
            ev.src_port,
            ev.dst_addr,
            ev.dst_port,
        );
        let i = self.lookup(&key)?;
        let e = &mut self.entries[i as usize];
        e.flags |= CT_FLAG_CLOSED;
        Some(i)
    }

    /// Removes a connection; returns whether it was there.
    pub fn remove(&mut self, key: &FlowKey) -> bool {
        match self.lookup(key) {
            Some(i) => self.write(i, CtEntry::default()).is_ok(),
            None => false,
        }
    }
}

/// A TUPLE5 [`FlowKey`] from 128-bit (IPv4-mapped) addresses.
#[inline]
pub fn tuple5_key(protocol: u8, src: u128, src_port: u16, dst: u128, dst_port: u16) -> FlowKey {
    FlowKey {
        key_type: nlb_hw::enums::KeyType::Tuple5,
        protocol,
        src_port,
        dst_port,
        src_addr: src,
        dst_addr: dst,
    }
}
