//! The connection table (docs/pipeline.md §7): where a connection's entry lives and which
//! entry a packet's lookup finds, and [`ConnTable`], the reference's table of `buckets × ways`
//! [`CtEntry`] slots (not banked) with the hit bits the `conntrack` register block exposes.
//!
//! The placement and compare rules ([`bucket`], [`holds`], [`lookup`]) are used by the
//! reference pipeline and by the host's own copy of the table in the driver (through
//! [`ConnTableView`]). The pipeline only reads the table; the host writes it (through the
//! register block, or here through [`ConnTable::install`] / [`ConnTable::mark_closed`], which
//! model what the slow path does on learn and teardown events).

use nlb_hw::enums::KeyType;
use nlb_hw::layouts::{CtEntry, LearnEvent};
use nlb_hw::{table_index, FlowKey};

/// The bucket of a flow: `index(hash(TUPLE5 key), buckets)` (the key's type is ignored).
pub fn bucket(key: &FlowKey, buckets: u32) -> u32 {
    bucket_of_hash(key.with_type(KeyType::Tuple5).hash(), buckets)
}

/// The bucket of a flow given its TUPLE5 hash.
pub fn bucket_of_hash(tuple5_hash: u32, buckets: u32) -> u32 {
    table_index(tuple5_hash, buckets)
}

/// Whether an entry is valid and holds the flow: equal protocol, ports and addresses in
/// client → VIP orientation (`rule`, `flags` and `timestamp` are the host's, not compared).
pub fn holds(e: &CtEntry, key: &FlowKey) -> bool {
    e.valid
        && e.protocol == key.protocol
        && e.src_port == key.src_port
        && e.dst_port == key.dst_port
        && e.src_addr == key.src_addr
        && e.dst_addr == key.dst_addr
}

/// A connection table as the lookup reads it: geometry and entries by index
/// (`bucket × ways + way`).
pub trait ConnTableView {
    /// Buckets.
    fn buckets(&self) -> u32;
    /// Ways per bucket.
    fn ways(&self) -> u32;
    /// One entry (`None` beyond the table).
    fn entry(&self, index: u32) -> Option<&CtEntry>;
}

/// The lowest way of a bucket whose entry holds the flow: its index.
pub fn lookup_in<C: ConnTableView + ?Sized>(ct: &C, bucket: u32, key: &FlowKey) -> Option<u32> {
    let ways = ct.ways();
    let start = u64::from(bucket) * u64::from(ways);
    (start..start + u64::from(ways))
        .filter_map(|i| u32::try_from(i).ok())
        .find(|&i| ct.entry(i).is_some_and(|e| holds(e, key)))
}

/// A flow's lookup (§7): its bucket, and the index of the lowest way holding it.
pub fn lookup<C: ConnTableView + ?Sized>(ct: &C, key: &FlowKey) -> (u32, Option<u32>) {
    let b = bucket(key, ct.buckets());
    (b, lookup_in(ct, b, key))
}

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
    hits: Vec<u32>,
    valid: u32,
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
    pub fn bucket_of(&self, tuple5_hash: u32) -> u32 {
        bucket_of_hash(tuple5_hash, self.buckets)
    }

    /// The lowest way of `bucket` holding a valid entry for exactly this 5-tuple.
    pub fn lookup_in(&self, bucket: u32, key: &FlowKey) -> Option<u32> {
        lookup_in(self, bucket, key)
    }

    /// Looks up a 5-tuple (its TUPLE5 hash is computed here).
    pub fn lookup(&self, key: &FlowKey) -> Option<u32> {
        lookup(self, key).1
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
        Ok(())
    }

    /// Sets the hit bit of an entry (the pipeline, on a hit).
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
        let bucket = bucket(&key, self.buckets);
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
pub fn tuple5_key(protocol: u8, src: u128, src_port: u16, dst: u128, dst_port: u16) -> FlowKey {
    FlowKey {
        key_type: KeyType::Tuple5,
        protocol,
        src_port,
        dst_port,
        src_addr: src,
        dst_addr: dst,
    }
}

impl ConnTableView for ConnTable {
    fn buckets(&self) -> u32 {
        self.buckets
    }

    fn ways(&self) -> u32 {
        self.ways
    }

    fn entry(&self, index: u32) -> Option<&CtEntry> {
        self.entries.get(index as usize)
    }
}
