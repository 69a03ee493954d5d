//! The conntrack manager: the host owns the connection table, the NIC reads it.
//!
//! A connection's place is fixed by the regmap: bucket = `table_index(TUPLE5 hash,
//! ct_buckets)`, index = bucket × ways + way; the manager takes the way already holding the
//! flow, else the lowest free one (the pipeline matches the lowest valid way, so a flow is
//! never in two ways). The bucket and the compare are the reference's
//! (`nlb_reference::conntrack`), the same the pipeline's lookup uses. The manager keeps a copy of every entry, so lookups and scans cost no
//! register access, and rebuilds it from the device on attach.
//!
//! Writes go through the `conntrack` window: the data words that differ from what the window
//! holds, then a `cmd` WRITE_AT of the index with `valid` clear, then word 0 again with `valid`
//! set and a second `WRITE_AT` — so the entry only becomes valid once every other word is in
//! place, whatever order the hardware commits the words in (`ct_entry` in `docs/regmap.md`:
//! valid written last). Evictions clear `valid` alone. After a write the window holds the
//! stored entry (regmap v3), which is what the manager wrote, so its copy of the window stays
//! exact. Batches of operations go to the device as one register batch.
//!
//! Ageing reads the hit bits (`hit_read`, 32 entries per read, clear on read): an entry hit
//! since the last pass is refreshed, one idle past its timeout is evicted.
//!
//! Every change to the host copy goes through one place that also keeps the number of open
//! connections (valid, no FIN or RST seen) per (rule, backend): the service LB policy reads
//! them every refresh ([`Conntrack::open_counts`]), and a scan of a full table (4 Mi entries
//! on the `u280` profile) would cost tens of milliseconds each time.

use crate::device::{Batch, Device, DeviceError};
use crate::discovery::DeviceInfo;
use crate::loader::{cmd_at, CMD_INDEX_MAX};
use nlb_hw::blocks::conntrack as win;
use nlb_hw::ct_words::pack_ct;
use nlb_hw::enums::{KeyType, TableCmd};
use nlb_hw::layouts::{CtEntry, LearnEvent};
use nlb_hw::{FlowKey, LayoutError};
use nlb_reference::conntrack as placement;
use std::collections::{BTreeSet, HashMap};

/// `flags` bit: FIN or RST seen.
pub const FLAG_CLOSED: u8 = nlb_hw::enums::CtFlag::Closed.value() as u8;

const WORDS: usize = CtEntry::WORDS;
/// Bit of `valid` in word 0.
const VALID_BIT: u32 = 1 << CtEntry::VALID_LSB;

/// Why a conntrack operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    /// Register access failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The conntrack window reported an error.
    #[error("the conntrack window refused {op} of entry {index}")]
    Window {
        /// Entry index.
        index: u32,
        /// `read` or `write`.
        op: &'static str,
    },
    /// The device has no conntrack block.
    #[error("the device has no conntrack register block")]
    NoBlock,
    /// The device reports more entries than a command can address.
    #[error(
        "the device reports {entries} connection-table entries; commands address at most {max}"
    )]
    TooLarge {
        /// buckets × ways the device reports.
        entries: u64,
        /// Entries a command can address.
        max: u64,
    },
    /// A connection does not encode.
    #[error("connection does not encode: {0}")]
    Encode(#[from] LayoutError),
}

/// A connection to install: its 5-tuple (the key type is ignored; TUPLE5 is used) and where
/// it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewConnection {
    /// The flow.
    pub key: FlowKey,
    /// Backend id.
    pub backend: u16,
    /// Rule id.
    pub rule: u16,
}

impl From<&LearnEvent> for NewConnection {
    fn from(ev: &LearnEvent) -> Self {
        NewConnection {
            key: FlowKey {
                key_type: KeyType::Tuple5,
                protocol: ev.protocol,
                src_port: ev.src_port,
                dst_port: ev.dst_port,
                src_addr: ev.src_addr,
                dst_addr: ev.dst_addr,
            },
            backend: ev.backend,
            rule: ev.rule,
        }
    }
}

/// What an install did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// A new entry at this index.
    New(u32),
    /// The flow was there with another backend or rule; rewritten.
    Replaced(u32),
    /// The flow was already there as asked; nothing written.
    Present(u32),
    /// Every way of the bucket holds another flow: not installed (the flow keeps going by
    /// Maglev).
    BucketFull {
        /// The bucket.
        bucket: u32,
    },
}

/// What an ageing pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgeReport {
    /// Valid entries seen.
    pub scanned: u32,
    /// Entries whose hit bit was set (refreshed).
    pub refreshed: u32,
    /// Entries evicted as idle.
    pub evicted: u32,
}

/// Operation counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConntrackStats {
    /// New entries.
    pub installed: u64,
    /// Rewritten entries.
    pub replaced: u64,
    /// Installs refused for a full bucket.
    pub bucket_full: u64,
    /// Entries evicted (explicitly or by ageing).
    pub evicted: u64,
    /// Register writes issued.
    pub writes: u64,
}

/// `cmd` of a WRITE_AT of entry `index` (below [`CMD_INDEX_MAX`]: checked on attach).
fn write_at(index: u32) -> u32 {
    cmd_at(TableCmd::WriteAt, index).unwrap_or_default()
}

/// Whether a `status` read shows an error.
fn failed(status: u32) -> bool {
    win::Status::from_word(status).error
}

fn tuple5(key: &FlowKey) -> FlowKey {
    key.with_type(KeyType::Tuple5)
}

/// The host's copy of the connection table and the writer of the device's.
#[derive(Debug)]
pub struct Conntrack {
    buckets: u32,
    ways: u32,
    entries: Vec<CtEntry>,
    /// Host time each entry was installed or last seen hit.
    last_seen: Vec<u32>,
    /// Entries whose device contents are unknown after a failed batch: re-read first.
    unknown: BTreeSet<u32>,
    window: [Option<u32>; WORDS],
    /// Entries whose window status is read at the end of the batch.
    checks: Vec<u32>,
    batch: Batch,
    stats: ConntrackStats,
    /// Open entries (valid, not closed) per (rule, backend), kept by [`Conntrack::set_entry`].
    open: HashMap<(u16, u16), u32>,
    /// Open entries that stopped being open (closed, aged out, evicted, overwritten by another
    /// flow) per (rule, backend) since [`Conntrack::take_closed`] last took them.
    closed: HashMap<(u16, u16), u32>,
}

/// Whether an entry is an open connection: valid, and no FIN or RST seen.
fn is_open(e: &CtEntry) -> bool {
    e.valid && e.flags & FLAG_CLOSED == 0
}

/// Whether two entries are the same connection to the same backend.
fn same_connection(a: &CtEntry, b: &CtEntry) -> bool {
    (
        a.protocol, a.src_port, a.dst_port, a.src_addr, a.dst_addr, a.rule, a.backend,
    ) == (
        b.protocol, b.src_port, b.dst_port, b.src_addr, b.dst_addr, b.rule, b.backend,
    )
}

/// Replaces entry `index` of `entries`, keeping `open` (the open counts per (rule, backend))
/// and `closed` (open connections that ended): every change to the host copy goes through
/// here.
fn set_entry(
    entries: &mut [CtEntry],
    open: &mut HashMap<(u16, u16), u32>,
    closed: &mut HashMap<(u16, u16), u32>,
    index: u32,
    entry: CtEntry,
) {
    let Some(slot) = entries.get_mut(index as usize) else {
        return;
    };
    let old = std::mem::replace(slot, entry);
    if is_open(&old) {
        let key = (old.rule, old.backend);
        if let Some(n) = open.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&key);
            }
        }
        if !(is_open(&entry) && same_connection(&old, &entry)) {
            *closed.entry(key).or_insert(0) += 1;
        }
    }
    if is_open(&entry) {
        *open.entry((entry.rule, entry.backend)).or_insert(0) += 1;
    }
}

/// The host's copy of the connection table, as the reference's lookups read it.
impl placement::ConnTableView for Conntrack {
    fn buckets(&self) -> u32 {
        Conntrack::buckets(self)
    }

    fn ways(&self) -> u32 {
        Conntrack::ways(self)
    }

    fn entry(&self, index: u32) -> Option<&CtEntry> {
        Conntrack::entry(self, index)
    }
}

impl Conntrack {
    /// Attaches to the device's connection table: reads every entry (recovery after a
    /// restart). Entries found valid count as seen at `now`.
    pub fn attach<D: Device + ?Sized>(
        dev: &mut D,
        info: &DeviceInfo,
        now: u32,
    ) -> Result<Conntrack, ConntrackError> {
        if info.block("conntrack").is_none() {
            return Err(ConntrackError::NoBlock);
        }
        let caps = info.firmware.capacities;
        let buckets = caps.ct_buckets.max(1);
        let ways = caps.ct_ways.max(1);
        let entries = u64::from(buckets) * u64::from(ways);
        let max = u64::from(CMD_INDEX_MAX) + 1;
        if entries > max {
            return Err(ConntrackError::TooLarge { entries, max });
        }
        let len = entries as usize;
        let mut ct = Conntrack {
            buckets,
            ways,
            entries: vec![CtEntry::default(); len],
            last_seen: vec![now; len],
            unknown: BTreeSet::new(),
            window: [None; WORDS],
            checks: Vec::new(),
            batch: Batch::new(),
            stats: ConntrackStats::default(),
            open: HashMap::new(),
            closed: HashMap::new(),
        };
        ct.read_entries(dev, 0..len as u32)?;
        Ok(ct)
    }

    /// Buckets.
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// Ways per bucket.
    pub fn ways(&self) -> u32 {
        self.ways
    }

    /// Valid entries.
    pub fn valid_count(&self) -> usize {
        self.entries.iter().filter(|e| e.valid).count()
    }

    /// Operation counters.
    pub fn stats(&self) -> ConntrackStats {
        self.stats
    }

    /// Open connections (valid entries without FIN or RST seen) per (rule id, backend id),
    /// as the host copy holds them; kept up to date by every change, so reading them costs
    /// no scan. Pairs without an open connection are absent.
    pub fn open_counts(&self) -> &HashMap<(u16, u16), u32> {
        &self.open
    }

    /// Open connections that ended (closed, aged out, evicted, or overwritten by another flow)
    /// per (rule, backend) since the previous call, which starts the count again.
    pub fn take_closed(&mut self) -> HashMap<(u16, u16), u32> {
        std::mem::take(&mut self.closed)
    }

    /// [`Conntrack::open_counts`] worked out by scanning every entry (what the kept counts
    /// save; for checks and benchmarks).
    pub fn open_counts_by_scan(&self) -> HashMap<(u16, u16), u32> {
        let mut counts = HashMap::new();
        for e in self.entries.iter().filter(|e| is_open(e)) {
            *counts.entry((e.rule, e.backend)).or_insert(0) += 1;
        }
        counts
    }

    /// Replaces the host copy of entry `index`, keeping the open counts.
    fn set_entry(&mut self, index: u32, entry: CtEntry) {
        set_entry(
            &mut self.entries,
            &mut self.open,
            &mut self.closed,
            index,
            entry,
        );
    }

    /// Clears `valid` of the host copy of entry `index`.
    fn set_invalid(&mut self, index: u32) {
        if let Some(&e) = self.entries.get(index as usize) {
            self.set_entry(index, CtEntry { valid: false, ..e });
        }
    }

    /// The bucket of a flow.
    pub fn bucket_of(&self, key: &FlowKey) -> u32 {
        placement::bucket(key, self.buckets)
    }

    /// The index of a flow's entry.
    pub fn lookup(&self, key: &FlowKey) -> Option<u32> {
        let k = tuple5(key);
        self.lookup_in(placement::bucket(&k, self.buckets), &k)
    }

    fn lookup_in(&self, bucket: u32, k: &FlowKey) -> Option<u32> {
        let start = bucket * self.ways;
        (start..start + self.ways).find(|&i| placement::holds(&self.entries[i as usize], k))
    }

    /// One entry, as the host last wrote or read it.
    pub fn entry(&self, index: u32) -> Option<&CtEntry> {
        self.entries.get(index as usize)
    }

    /// Every valid entry with its index.
    pub fn scan(&self) -> impl Iterator<Item = (u32, &CtEntry)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.valid)
            .map(|(i, e)| (i as u32, e))
    }

    /// Reads the whole table back from the device, replacing the host copy; returns the
    /// indices whose device contents differed from it.
    pub fn rescan<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<Vec<u32>, ConntrackError> {
        let before = self.entries.clone();
        self.read_entries(dev, 0..self.entries.len() as u32)?;
        Ok(before
            .iter()
            .zip(&self.entries)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i as u32)
            .collect())
    }

    fn read_entries<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        range: std::ops::Range<u32>,
    ) -> Result<(), ConntrackError> {
        const STEP: u32 = 1024;
        let mut first = range.start;
        while first < range.end {
            let last = (first + STEP).min(range.end);
            for i in first..last {
                // Below CMD_INDEX_MAX: checked on attach.
                let cmd = cmd_at(TableCmd::ReadAt, i).unwrap_or_default();
                self.batch
                    .write(win::CMD, cmd)
                    .read(win::STATUS)
                    .read_words(win::DATA, WORDS as u32);
            }
            let r = self.batch.run(dev)?;
            for (k, i) in (first..last).enumerate() {
                let at = k * (WORDS + 1);
                if failed(r[at]) {
                    return Err(ConntrackError::Window {
                        index: i,
                        op: "read",
                    });
                }
                let data = &r[at + 1..at + 1 + WORDS];
                // Words that do not decode (never written since power-up) count as free.
                let entry = CtEntry::unpack(data).unwrap_or_default();
                set_entry(
                    &mut self.entries,
                    &mut self.open,
                    &mut self.closed,
                    i,
                    entry,
                );
            }
            // The window now holds the last entry read.
            if let Some(k) = (last - first).checked_sub(1) {
                let at = k as usize * (WORDS + 1) + 1;
                for (slot, w) in self.window.iter_mut().zip(&r[at..at + WORDS]) {
                    *slot = Some(*w);
                }
            }
            first = last;
        }
        Ok(())
    }

    /// Re-reads entries left unknown by a failed batch.
    fn settle<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), ConntrackError> {
        while let Some(&i) = self.unknown.iter().next() {
            self.window = [None; WORDS];
            self.read_entries(dev, i..i + 1)?;
            self.unknown.remove(&i);
        }
        Ok(())
    }

    /// Queues the window writes that make entry `index` hold `words` (data words that differ
    /// from what the window holds, then the command, which carries the index).
    fn queue_entry(&mut self, index: u32, words: &[u32; WORDS], first_word: u32) {
        for (k, (held, w)) in self.window.iter_mut().zip(words).enumerate().skip(1) {
            if *held != Some(*w) {
                self.batch.write(win::DATA + 4 * k as u32, *w);
                *held = Some(*w);
                self.stats.writes += 1;
            }
        }
        if self.window[0] != Some(first_word) {
            self.batch.write(win::DATA, first_word);
            self.window[0] = Some(first_word);
            self.stats.writes += 1;
        }
        self.batch.write(win::CMD, write_at(index));
        self.stats.writes += 1;
    }

    /// Queues a full write of `entry` at `index`, valid last.
    fn queue_install(&mut self, index: u32, entry: &CtEntry) -> Result<(), ConntrackError> {
        let words = pack_ct(entry)?;
        self.queue_entry(index, &words, words[0] & !VALID_BIT);
        if words[0] & VALID_BIT != 0 {
            self.batch.write(win::DATA, words[0]);
            self.batch.write(win::CMD, write_at(index));
            self.window[0] = Some(words[0]);
            self.stats.writes += 2;
        }
        self.queue_check(index);
        Ok(())
    }

    /// Queues clearing `valid` of entry `index` (the other words stay).
    fn queue_invalidate(&mut self, index: u32) -> Result<(), ConntrackError> {
        let words = pack_ct(&self.entries[index as usize])?;
        self.queue_entry(index, &words, words[0] & !VALID_BIT);
        self.queue_check(index);
        Ok(())
    }

    fn queue_check(&mut self, index: u32) {
        self.batch.read(win::STATUS);
        self.checks.push(index);
    }

    /// Runs the queued batch; on failure the touched entries become unknown.
    fn flush<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<(), ConntrackError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let checks = std::mem::take(&mut self.checks);
        match self.batch.run(dev) {
            Ok(r) => {
                let bad = checks
                    .iter()
                    .zip(r)
                    .find(|(_, status)| failed(**status))
                    .map(|(i, _)| *i);
                self.checks = checks;
                self.checks.clear();
                match bad {
                    Some(index) => {
                        self.unknown.insert(index);
                        self.window = [None; WORDS];
                        Err(ConntrackError::Window { index, op: "write" })
                    }
                    None => Ok(()),
                }
            }
            Err(e) => {
                self.unknown.extend(checks.iter().copied());
                self.window = [None; WORDS];
                self.checks = checks;
                self.checks.clear();
                Err(e.into())
            }
        }
    }

    /// Installs connections (one register batch). `out` receives one outcome per connection.
    pub fn install_batch<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        conns: &[NewConnection],
        now: u32,
        out: &mut Vec<Installed>,
    ) -> Result<(), ConntrackError> {
        self.settle(dev)?;
        out.clear();
        for c in conns {
            let k = tuple5(&c.key);
            let bucket = placement::bucket(&k, self.buckets);
            let start = bucket * self.ways;
            let existing = self.lookup_in(bucket, &k);
            let index = match existing {
                Some(i) => {
                    let e = &self.entries[i as usize];
                    if e.backend == c.backend && e.rule == c.rule {
                        self.last_seen[i as usize] = now;
                        out.push(Installed::Present(i));
                        continue;
                    }
                    i
                }
                None => match (start..start + self.ways).find(|&i| !self.entries[i as usize].valid)
                {
                    Some(i) => i,
                    None => {
                        self.stats.bucket_full += 1;
                        out.push(Installed::BucketFull { bucket });
                        continue;
                    }
                },
            };
            let entry = CtEntry {
                valid: true,
                protocol: k.protocol,
                src_port: k.src_port,
                dst_port: k.dst_port,
                src_addr: k.src_addr,
                dst_addr: k.dst_addr,
                backend: c.backend,
                rule: c.rule,
                flags: 0,
                timestamp: now,
            };
            if existing.is_some() {
                // Another backend for a live flow: take it out first, so no packet sees a
                // mix of the two entries.
                self.queue_invalidate(index)?;
            }
            self.queue_install(index, &entry)?;
            self.set_entry(index, entry);
            self.last_seen[index as usize] = now;
            if existing.is_some() {
                self.stats.replaced += 1;
                out.push(Installed::Replaced(index));
            } else {
                self.stats.installed += 1;
                out.push(Installed::New(index));
            }
        }
        self.flush(dev)
    }

    /// Evicts flows; returns how many were present.
    pub fn evict_batch<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        keys: &[FlowKey],
    ) -> Result<usize, ConntrackError> {
        self.settle(dev)?;
        let mut n = 0;
        for key in keys {
            if let Some(i) = self.lookup(key) {
                self.queue_invalidate(i)?;
                self.set_invalid(i);
                self.stats.evicted += 1;
                n += 1;
            }
        }
        self.flush(dev)?;
        Ok(n)
    }

    /// Marks a flow closed (FIN/RST seen, from a teardown event); its entry stays until
    /// ageing removes it with the closed timeout. Returns whether the flow was present.
    pub fn mark_closed<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        key: &FlowKey,
    ) -> Result<bool, ConntrackError> {
        self.settle(dev)?;
        let Some(i) = self.lookup(key) else {
            return Ok(false);
        };
        let mut e = self.entries[i as usize];
        if e.flags & FLAG_CLOSED != 0 {
            return Ok(true);
        }
        e.flags |= FLAG_CLOSED;
        let words = pack_ct(&e)?;
        // Only the flags word changes; the entry stays valid throughout.
        self.queue_entry(i, &words, words[0]);
        self.queue_check(i);
        self.set_entry(i, e);
        self.flush(dev)?;
        Ok(true)
    }

    /// One ageing pass at host time `now` (seconds): reads every hit bit, refreshes the
    /// entries hit since the last pass, and evicts those idle for at least
    /// `timeout(entry)` seconds (the pool's idle timeout, shorter for closed flows).
    pub fn age<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        now: u32,
        timeout: impl Fn(&CtEntry) -> u32,
    ) -> Result<AgeReport, ConntrackError> {
        self.settle(dev)?;
        let mut report = AgeReport::default();
        let len = self.entries.len() as u32;
        let groups = len.div_ceil(32);
        const STEP: u32 = 1024;
        let mut expired = Vec::new();
        let mut g0 = 0;
        while g0 < groups {
            let g1 = (g0 + STEP).min(groups);
            for g in g0..g1 {
                self.batch.write(win::INDEX, g * 32).read(win::HIT_READ);
                self.stats.writes += 1;
            }
            let hits = self.batch.run(dev)?.to_vec();
            for (g, bits) in (g0..g1).zip(hits) {
                for b in 0..32 {
                    let i = g * 32 + b;
                    let Some(e) = self.entries.get(i as usize) else {
                        break;
                    };
                    if !e.valid {
                        continue;
                    }
                    report.scanned += 1;
                    if bits >> b & 1 != 0 {
                        self.last_seen[i as usize] = now;
                        report.refreshed += 1;
                    } else if now.wrapping_sub(self.last_seen[i as usize]) >= timeout(e) {
                        expired.push(i);
                    }
                }
            }
            g0 = g1;
        }
        for chunk in expired.chunks(1024) {
            for &i in chunk {
                self.queue_invalidate(i)?;
                self.set_invalid(i);
            }
            self.flush(dev)?;
        }
        report.evicted = expired.len() as u32;
        self.stats.evicted += u64::from(report.evicted);
        Ok(report)
    }
}
