//! The conntrack manager: the host owns the connection table, the NIC reads it.
//!
//! A connection's place is fixed by the regmap: bucket = `table_index(TUPLE5 hash,
//! ct_buckets)`, index = bucket × ways + way; the manager takes the way already holding the
//! flow, else the lowest free one (the pipeline matches the lowest valid way, so a flow is
//! never in two ways). The bucket and the compare are the reference's
//! (`nlb_reference::conntrack`), the same the pipeline's lookup uses. The manager keeps a copy of every entry, so lookups and scans cost no
//! register access, and rebuilds it from the device on attach. The copy is compact, 24 bytes
//! an entry (`conntrack/table.rs`): attach builds it for the whole table, and its new memory
//! costs more than the decoding; [`Conntrack::entry`] and [`Conntrack::scan`] give entries by
//! value, and the reference's lookups read the copy through a [`CtView`].
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
use crate::rings::{HostRings, RingError, COMMAND_TIMEOUT, ROW_ALIGN};
use nlb_hw::blocks::conntrack as win;
use nlb_hw::ct_words::{pack_ct, unpack_ct};
use nlb_hw::enums::{DmaCmd, Event, KeyType, TableCmd};
use nlb_hw::layouts::{CmdDesc, CtEntry, EventRecord, LearnEvent};
use nlb_hw::{FlowKey, LayoutError};
use nlb_reference::conntrack as placement;
pub use prefault::Prefault;
use std::collections::{BTreeSet, HashMap};
use table::{CtTable, CtTableBuilder, Part, PartRest, SeenTimes};
pub use view::CtView;

mod prefault;
mod table;
mod view;

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
    /// The command ring failed.
    #[error(transparent)]
    Rings(#[from] RingError),
}

/// How the manager reaches the device's table: the `conntrack` register window, or the
/// command ring (DMA; SPEC R12.2).
enum Io<'a, D: ?Sized> {
    Window(&'a mut D),
    Rings(&'a mut D, &'a mut HostRings),
}

impl<D: Device + ?Sized> Io<'_, D> {
    fn dev(&mut self) -> &mut D {
        match self {
            Io::Window(d) | Io::Rings(d, _) => d,
        }
    }

    fn dma(&self) -> bool {
        matches!(self, Io::Rings(..))
    }
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
    /// The NIC learns and the bucket has a free way: left for the NIC to install at the
    /// flow's next packet ([`Conntrack::settle_left`]).
    LeftToNic {
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
    /// Register writes issued (through the command ring: commands).
    pub writes: u64,
    /// Connections the NIC installed itself (hardware learning).
    pub learned_by_nic: u64,
    /// Full buckets settled by taking the place of a closed connection.
    pub settled: u64,
    /// Connections the NIC did not install while its bucket had room (all its install records
    /// in use), left for it to install at the flow's next packet.
    pub left_to_nic: u64,
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

/// Connections per (rule id, backend id). The keys are small ids the host assigns, never
/// chosen by traffic, so a fast fixed hash serves: with the standard SipHash, keeping these
/// counts was half of an attach's time at 64 Mi connections.
pub type PairCounts = HashMap<(u16, u16), u32, foldhash::fast::FixedState>;

/// The host's copy of the connection table and the writer of the device's.
#[derive(Debug)]
pub struct Conntrack {
    buckets: u32,
    ways: u32,
    entries: CtTable,
    /// Host time each entry was installed or last seen hit.
    last_seen: SeenTimes,
    /// Entries whose device contents are unknown after a failed batch: re-read first.
    unknown: BTreeSet<u32>,
    window: [Option<u32>; WORDS],
    /// Entries whose window status is read at the end of the batch.
    checks: Vec<u32>,
    batch: Batch,
    stats: ConntrackStats,
    /// Open entries (valid, not closed) per (rule, backend), kept by [`Conntrack::set_entry`].
    open: PairCounts,
    /// Open entries that stopped being open (closed, aged out, evicted, overwritten by another
    /// flow) per (rule, backend) since [`Conntrack::take_closed`] last took them.
    closed: PairCounts,
    /// Entry writes queued for the command ring (index, words), written whole.
    dma_writes: Vec<(u32, [u32; WORDS])>,
    /// The current call goes through the command ring.
    via_dma: bool,
    /// The current call settles what the learning NIC left: free ways are the NIC's.
    free_ways_to_nic: bool,
}

/// Decodes packed entries (`WORDS` words each) into `out`, on every CPU for a large batch:
/// a rescan reads the whole table (64 Mi entries at the `u280` profile). With shifts, not the
/// generated bit-slice code.
fn decode_entries(words: &[u32], out: &mut [CtEntry]) {
    // Below this, starting threads costs more than the decoding.
    const PER_THREAD_MIN: usize = 16 * 1024;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(out.len() / PER_THREAD_MIN)
        .max(1);
    let decode = |words: &[u32], out: &mut [CtEntry]| {
        for (e, w) in out.iter_mut().zip(words.chunks_exact(WORDS)) {
            *e = unpack_ct(w);
        }
    };
    if threads == 1 {
        return decode(words, out);
    }
    let per = out.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (o, w) in out.chunks_mut(per).zip(words.chunks(per * WORDS)) {
            scope.spawn(move || decode(w, o));
        }
    });
}

/// Reads words at a byte offset of the command data area
/// ([`crate::rings::DataReader::read`]).
type ReadWords<'a> = dyn Fn(usize, &mut [u32]) -> Result<(), RingError> + 'a;

/// Open connections per (rule, backend) counted over a whole table. A backend almost always
/// serves one rule, so each backend id has a counter for the first rule seen with it; only a
/// pair with another rule goes to a hash map. Counting 64 Mi entries in a hash map alone cost
/// more than decoding them.
struct OpenTally {
    /// Per backend id: the rule its counter is for (`NO_RULE`: none yet), and the count.
    rule: Vec<u16>,
    count: Vec<u32>,
    other: PairCounts,
}

/// Above every rule id (`rule` is 12 bits in the connection table).
const NO_RULE: u16 = u16::MAX;
const _: () = assert!(CtEntry::RULE_WIDTH < 16);

impl OpenTally {
    fn new() -> OpenTally {
        let backends = 1usize << CtEntry::BACKEND_WIDTH;
        OpenTally {
            rule: vec![NO_RULE; backends],
            count: vec![0; backends],
            other: PairCounts::default(),
        }
    }

    /// Counts `n` more open connections of (rule, backend).
    #[inline]
    fn add(&mut self, rule: u16, backend: u16, n: u32) {
        let b = usize::from(backend);
        match self.rule.get(b) {
            Some(&r) if r == rule => self.count[b] += n,
            Some(&NO_RULE) => {
                self.rule[b] = rule;
                self.count[b] = n;
            }
            _ => *self.other.entry((rule, backend)).or_insert(0) += n,
        }
    }

    fn into_counts(self) -> PairCounts {
        let mut out = self.other;
        for (b, (&r, &n)) in self.rule.iter().zip(&self.count).enumerate() {
            if r != NO_RULE && n > 0 {
                *out.entry((r, b as u16)).or_insert(0) += n;
            }
        }
        out
    }
}

/// Bytes of entries attach reads by DMA at a time: few enough that the device's writes of a
/// run are still in the cache when the host decodes them (a run of the whole 16 MiB data area
/// was read back from memory), enough that the commands cost little next to the data.
const ATTACH_RUN_BYTES: usize = 2 * 1024 * 1024;

/// Attach's read of the whole table (`len` entries) by DMA: the host copy and its open counts
/// per (rule, backend). Each run of entries is decoded straight from the data area into the
/// copy, which starts as zero memory, never first filled with default entries. One thread does
/// it all: a thread or two more per run cost more CPU time in all (starting them, their page
/// faults contending) than they saved.
fn read_table_dma<D: Device + ?Sized>(
    dev: &mut D,
    rings: &mut HostRings,
    len: usize,
) -> Result<(CtTable, PairCounts), ConntrackError> {
    // A multiple of ROW_ALIGN entries, as the data area's runs are.
    let cache_run = (ATTACH_RUN_BYTES / (WORDS * 4)).next_multiple_of(ROW_ALIGN as usize);
    let per = rings.run_entries(WORDS).min(cache_run);
    let mut tally = OpenTally::new();
    let mut table = CtTableBuilder::new(len);
    while table.next() < len {
        let first = table.next();
        let n = (len - first).min(per);
        rings.submit(&CmdDesc {
            op: DmaCmd::CtRead,
            // At most CMD_INDEX_MAX + 1 entries: checked on attach.
            count: n as u32,
            index: first as u32,
            addr: rings.data_iova(0),
            ..CmdDesc::default()
        })?;
        rings.execute(dev, COMMAND_TIMEOUT)?;
        let data = rings.data_reader();
        let rest = decode_run(&|at, w| data.read(at, w), table.part(n), &mut tally)?;
        table.merge(rest);
    }
    Ok((table.finish(), tally.into_counts()))
}

/// Decodes a run of packed entries, at byte 0 of `read` on, into `part`, counting the open ones
/// into `tally`. On error, the part may be left half written and some entries counted. With
/// shifts, not the generated bit-slice code.
fn decode_run(
    read: &ReadWords<'_>,
    mut part: Part<'_>,
    tally: &mut OpenTally,
) -> Result<PartRest, RingError> {
    // A block at a time (one bounds check per block, and the block stays in the first-level
    // cache).
    const BLOCK: usize = 256;
    let mut w = [0u32; BLOCK * WORDS];
    let mut k = 0;
    while k < part.len() {
        let n = (part.len() - k).min(BLOCK);
        let words = &mut w[..n * WORDS];
        read(k * WORDS * 4, words)?;
        for (j, w) in words.as_chunks::<WORDS>().0.iter().enumerate() {
            if let Some((rule, backend)) = part.put_words(k + j, w) {
                tally.add(rule, backend, 1);
            }
        }
        k += n;
    }
    Ok(part.finish())
}

/// An index past the host copy where the manager's own arithmetic put it in the table (as
/// indexing a slice past its end would).
#[cold]
fn beyond(index: u32, len: usize) -> ! {
    panic!("connection-table entry {index} is beyond the table ({len} entries)")
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
    entries: &mut CtTable,
    open: &mut PairCounts,
    closed: &mut PairCounts,
    index: u32,
    entry: CtEntry,
) {
    let Some(old) = entries.set(index as usize, &entry) else {
        return;
    };
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

/// Records ([`Conntrack::learned`]) or connections ([`Conntrack::install_batch`]) whose
/// entries are loaded together ([`Conntrack::warm`]) before they are updated.
const WARM_BATCH: usize = 32;

impl Conntrack {
    /// Attaches to the device's connection table: reads every entry (recovery after a
    /// restart). Entries found valid count as seen at `now`.
    pub fn attach<D: Device + ?Sized>(
        dev: &mut D,
        info: &DeviceInfo,
        now: u32,
    ) -> Result<Conntrack, ConntrackError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return Conntrack::attach_io(Io::Rings(d, rings), info, now);
        }
        Conntrack::attach_io(Io::Window(dev), info, now)
    }

    /// [`Conntrack::attach`] reading the table by DMA through the command ring (no register
    /// read per entry: SPEC R12.4).
    pub fn attach_dma<D: Device + ?Sized>(
        dev: &mut D,
        rings: &mut HostRings,
        info: &DeviceInfo,
        now: u32,
    ) -> Result<Conntrack, ConntrackError> {
        Conntrack::attach_io(Io::Rings(dev, rings), info, now)
    }

    fn attach_io<D: Device + ?Sized>(
        mut io: Io<'_, D>,
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
        if let Io::Rings(dev, rings) = &mut io {
            let (entries, open) = read_table_dma(&mut **dev, rings, len)?;
            return Ok(Conntrack::with_entries(buckets, ways, entries, open, now));
        }
        let mut ct =
            Conntrack::with_entries(buckets, ways, CtTable::new(len), PairCounts::default(), now);
        ct.read_entries(&mut io, 0..len as u32)?;
        Ok(ct)
    }

    /// A manager over a host copy read from the device (`open`: its open counts), every
    /// valid entry seen at `now`.
    fn with_entries(
        buckets: u32,
        ways: u32,
        entries: CtTable,
        open: PairCounts,
        now: u32,
    ) -> Conntrack {
        let len = entries.len();
        Conntrack {
            buckets,
            ways,
            entries,
            last_seen: SeenTimes::new(len, now),
            unknown: BTreeSet::new(),
            window: [None; WORDS],
            checks: Vec::new(),
            batch: Batch::new(),
            stats: ConntrackStats::default(),
            open,
            closed: PairCounts::default(),
            dma_writes: Vec::new(),
            via_dma: false,
            free_ways_to_nic: false,
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

    /// Valid entries (kept up to date by every change: no scan).
    pub fn valid_count(&self) -> usize {
        self.entries.valid_count()
    }

    /// How far the host copy's memory is backed ahead of use. The copy of the entries is
    /// written whole by the attach; the last-seen times (4 bytes an entry) are zero memory
    /// the installs write all over; when they take 32 MiB or more, a thread backs their pages
    /// from the attach on ([`Prefault::Working`] until it is done). Until then an install may
    /// still pay a page fault, writing first to a page the thread has not reached.
    pub fn prefault(&self) -> Prefault {
        self.last_seen.prefault()
    }

    /// Operation counters.
    pub fn stats(&self) -> ConntrackStats {
        self.stats
    }

    /// Open connections (valid entries without FIN or RST seen) per (rule id, backend id),
    /// as the host copy holds them; kept up to date by every change, so reading them costs
    /// no scan. Pairs without an open connection are absent.
    pub fn open_counts(&self) -> &PairCounts {
        &self.open
    }

    /// Open connections that ended (closed, aged out, evicted, or overwritten by another flow)
    /// per (rule, backend) since the previous call, which starts the count again.
    pub fn take_closed(&mut self) -> PairCounts {
        std::mem::take(&mut self.closed)
    }

    /// [`Conntrack::open_counts`] worked out by scanning every entry (what the kept counts
    /// save; for checks and benchmarks).
    pub fn open_counts_by_scan(&self) -> PairCounts {
        let mut counts = PairCounts::default();
        for (_, e) in self.entries.iter_valid().filter(|(_, e)| is_open(e)) {
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
        if let Some(e) = self.entries.get(index as usize) {
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
        (start..start + self.ways)
            .find(|&i| self.entries.is_valid(i as usize) && placement::holds(&self.at(i), k))
    }

    /// Entry `index`, which is in the table (the callers' indices are bucket × ways + way).
    fn at(&self, index: u32) -> CtEntry {
        self.entries
            .get(index as usize)
            .unwrap_or_else(|| beyond(index, self.entries.len()))
    }

    /// [`Conntrack::last_seen`] of an entry in the table.
    fn seen_at(&self, index: u32) -> u32 {
        self.last_seen
            .get(index as usize)
            .unwrap_or_else(|| beyond(index, self.entries.len()))
    }

    /// One entry, as the host last wrote or read it (a copy: the host's copy is compact).
    pub fn entry(&self, index: u32) -> Option<CtEntry> {
        self.entries.get(index as usize)
    }

    /// The host copy as the reference's lookups read it (`nlb_reference::host`), for one
    /// decision's lookups.
    pub fn view(&self) -> CtView<'_> {
        CtView::new(self)
    }

    /// Host time entry `index` was installed or last seen hit.
    pub fn last_seen(&self, index: u32) -> Option<u32> {
        self.last_seen.get(index as usize)
    }

    /// Counts entry `index` as seen at `now`: its idle timeout starts again (no device
    /// access).
    pub fn touch(&mut self, index: u32, now: u32) {
        self.last_seen.set(index as usize, now);
    }

    /// Every valid entry with its index.
    pub fn scan(&self) -> impl Iterator<Item = (u32, CtEntry)> + '_ {
        self.entries.iter_valid().map(|(i, e)| (i as u32, e))
    }

    /// Reads the whole table back from the device, replacing the host copy; returns the
    /// indices whose device contents differed from it.
    pub fn rescan<D: Device + ?Sized>(&mut self, dev: &mut D) -> Result<Vec<u32>, ConntrackError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return self.rescan_io(Io::Rings(d, rings));
        }
        self.rescan_io(Io::Window(dev))
    }

    /// [`Conntrack::rescan`] by DMA.
    pub fn rescan_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
    ) -> Result<Vec<u32>, ConntrackError> {
        self.rescan_io(Io::Rings(dev, rings))
    }

    fn rescan_io<D: Device + ?Sized>(
        &mut self,
        mut io: Io<'_, D>,
    ) -> Result<Vec<u32>, ConntrackError> {
        let before = self.entries.clone();
        self.read_entries(&mut io, 0..self.entries.len() as u32)?;
        Ok(before
            .iter()
            .zip(self.entries.iter())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i as u32)
            .collect())
    }

    fn read_entries<D: Device + ?Sized>(
        &mut self,
        io: &mut Io<'_, D>,
        range: std::ops::Range<u32>,
    ) -> Result<(), ConntrackError> {
        if let Io::Rings(dev, rings) = io {
            return self.read_entries_dma(&mut **dev, rings, range);
        }
        let dev = io.dev();
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
                // Any words decode (every field is a plain integer); never-written ones as
                // whatever they hold, usually not valid.
                let entry = unpack_ct(data);
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

    /// Reads entries by DMA (CT_READ of the command data area's size at a time).
    fn read_entries_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        range: std::ops::Range<u32>,
    ) -> Result<(), ConntrackError> {
        let per = rings.run_entries(WORDS) as u32;
        let mut words = vec![0u32; per as usize * WORDS];
        let mut decoded = vec![CtEntry::default(); per as usize];
        let mut first = range.start;
        while first < range.end {
            let n = (range.end - first).min(per);
            rings.submit(&CmdDesc {
                op: DmaCmd::CtRead,
                count: n,
                index: first,
                addr: rings.data_iova(0),
                ..CmdDesc::default()
            })?;
            rings.execute(dev, COMMAND_TIMEOUT)?;
            let w = &mut words[..n as usize * WORDS];
            rings.read_data(0, w)?;
            let out = &mut decoded[..n as usize];
            decode_entries(w, out);
            for (k, entry) in out.iter().enumerate() {
                set_entry(
                    &mut self.entries,
                    &mut self.open,
                    &mut self.closed,
                    first + k as u32,
                    *entry,
                );
            }
            first += n;
        }
        Ok(())
    }

    /// Re-reads entries left unknown by a failed batch.
    fn settle<D: Device + ?Sized>(&mut self, io: &mut Io<'_, D>) -> Result<(), ConntrackError> {
        while let Some(&i) = self.unknown.iter().next() {
            self.window = [None; WORDS];
            self.read_entries(io, i..i + 1)?;
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

    /// Queues a full write of `entry` at `index`, valid last (through the command ring: the
    /// entry whole, in one write between two packets).
    fn queue_install(&mut self, index: u32, entry: &CtEntry) -> Result<(), ConntrackError> {
        let words = pack_ct(entry)?;
        if self.via_dma {
            self.dma_writes.push((index, words));
            self.checks.push(index);
            return Ok(());
        }
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
        let words = pack_ct(&self.at(index))?;
        if self.via_dma {
            self.dma_writes.push((index, words));
            if let Some(last) = self.dma_writes.last_mut() {
                last.1[0] &= !VALID_BIT;
            }
            self.checks.push(index);
            return Ok(());
        }
        self.queue_entry(index, &words, words[0] & !VALID_BIT);
        self.queue_check(index);
        Ok(())
    }

    fn queue_check(&mut self, index: u32) {
        self.batch.read(win::STATUS);
        self.checks.push(index);
    }

    /// Runs the queued batch; on failure the touched entries become unknown.
    fn flush<D: Device + ?Sized>(&mut self, io: &mut Io<'_, D>) -> Result<(), ConntrackError> {
        if let Io::Rings(dev, rings) = io {
            return self.flush_dma(&mut **dev, rings);
        }
        let dev = io.dev();
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

    /// Sends the entry writes queued for the command ring as CT_WRITE list commands (records:
    /// the index word, then the entry); on failure the touched entries become unknown.
    fn flush_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
    ) -> Result<(), ConntrackError> {
        let writes = std::mem::take(&mut self.dma_writes);
        let checks = std::mem::take(&mut self.checks);
        let per = (rings.data_len() / ((WORDS + 1) * 4)).max(1);
        let mut result = Ok(());
        for chunk in writes.chunks(per) {
            let mut data = std::mem::take(rings.scratch());
            data.clear();
            for (index, words) in chunk {
                data.push(*index);
                data.extend_from_slice(words);
            }
            let sent = rings
                .write_data(0, &data)
                .and_then(|()| {
                    rings.submit(&CmdDesc {
                        op: DmaCmd::CtWrite,
                        list: true,
                        count: chunk.len() as u32,
                        addr: rings.data_iova(0),
                        ..CmdDesc::default()
                    })
                })
                .and_then(|()| rings.execute(dev, COMMAND_TIMEOUT));
            *rings.scratch() = data;
            if let Err(e) = sent {
                self.unknown.extend(checks.iter().copied());
                result = Err(e.into());
                break;
            }
            self.stats.writes += 1;
        }
        self.dma_writes = writes;
        self.dma_writes.clear();
        self.checks = checks;
        self.checks.clear();
        result
    }

    /// Installs connections (one register batch). `out` receives one outcome per connection.
    pub fn install_batch<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        conns: &[NewConnection],
        now: u32,
        out: &mut Vec<Installed>,
    ) -> Result<(), ConntrackError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return self.install_io(Io::Rings(d, rings), conns, now, out);
        }
        self.install_io(Io::Window(dev), conns, now, out)
    }

    /// [`Conntrack::install_batch`] for the LEARNs a learning NIC reported not installed
    /// (SPEC R12.3: the host settles what the NIC could not place). Only a full bucket is the
    /// host's to settle. Where the host's copy shows a free way, the NIC had no install record
    /// free (a flood of new connections, docs/pipeline.md section 15.3), and its installs
    /// after this event may already hold the way the copy shows free: a host write there
    /// could overwrite one. Such a connection is left for the NIC to install at the flow's
    /// next packet ([`Installed::LeftToNic`]).
    pub fn settle_left<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        conns: &[NewConnection],
        now: u32,
        out: &mut Vec<Installed>,
    ) -> Result<(), ConntrackError> {
        self.free_ways_to_nic = true;
        let result = self.install_batch(dev, conns, now, out);
        self.free_ways_to_nic = false;
        result
    }

    /// [`Conntrack::install_batch`] through the command ring: every entry written whole by
    /// DMA, one command for the batch; a full bucket may take the place of a connection
    /// already closed (FIN or RST seen), which only waits for its closed timeout.
    pub fn install_batch_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        conns: &[NewConnection],
        now: u32,
        out: &mut Vec<Installed>,
    ) -> Result<(), ConntrackError> {
        self.install_io(Io::Rings(dev, rings), conns, now, out)
    }

    /// The host's side of hardware learning (SPEC R12.3): the NIC installed the connections of
    /// the LEARN records marked `installed` itself; the host copy follows them (no device
    /// access; `stamp` is the `dma.host_time` the NIC wrote into the entries, `now` the host
    /// time they count as seen). Returns the LEARNs the NIC could not place (a full bucket, or
    /// learning off), for the host to settle with [`Conntrack::install_batch_dma`].
    pub fn learned(&mut self, records: &[EventRecord], stamp: u32, now: u32) -> Vec<NewConnection> {
        let mut left = Vec::new();
        for chunk in records.chunks(WARM_BATCH) {
            self.warm(chunk.iter().map(|r| r.ct_index), 1);
            for r in chunk {
                self.learned_one(r, stamp, now, &mut left);
            }
        }
        left
    }

    /// Loads the entries `start..start + span` of each start (their first and last slots and
    /// the first's last-seen time) in a tight loop, before the caller reads and writes them
    /// one by one: each is a cache miss in a table of hundreds of MiB (about 400 ns on this
    /// project's test machine), and loaded together the misses overlap instead of adding up.
    #[inline]
    fn warm(&self, starts: impl Iterator<Item = u32>, span: u32) {
        let mut loaded = 0u32;
        for start in starts {
            let (first, last) = (start as usize, (start + span - 1) as usize);
            loaded ^= u32::from(self.entries.touch(first))
                ^ u32::from(self.entries.touch(last))
                ^ self.last_seen.get(first).unwrap_or(0);
        }
        // Keeps the loads: their values are not needed.
        std::hint::black_box(loaded);
    }

    /// One record of [`Conntrack::learned`].
    fn learned_one(
        &mut self,
        r: &EventRecord,
        stamp: u32,
        now: u32,
        left: &mut Vec<NewConnection>,
    ) {
        let ev = &r.event[0];
        if ev.event != Event::Learn {
            return;
        }
        if !r.installed {
            left.push(NewConnection::from(ev));
            return;
        }
        let entry = CtEntry {
            valid: true,
            protocol: ev.protocol,
            src_port: ev.src_port,
            dst_port: ev.dst_port,
            src_addr: ev.src_addr,
            dst_addr: ev.dst_addr,
            backend: ev.backend,
            rule: ev.rule,
            flags: 0,
            timestamp: stamp,
        };
        if (r.ct_index as usize) < self.entries.len() {
            let replaced = self.entries.is_valid(r.ct_index as usize);
            self.set_entry(r.ct_index, entry);
            self.last_seen.set(r.ct_index as usize, now);
            if replaced {
                self.stats.replaced += 1;
            } else {
                self.stats.installed += 1;
            }
            self.stats.learned_by_nic += 1;
        }
    }

    fn install_io<D: Device + ?Sized>(
        &mut self,
        mut io: Io<'_, D>,
        conns: &[NewConnection],
        now: u32,
        out: &mut Vec<Installed>,
    ) -> Result<(), ConntrackError> {
        self.settle(&mut io)?;
        self.via_dma = io.dma();
        out.clear();
        let mut keys = [(FlowKey::default(), 0u32); WARM_BATCH];
        for chunk in conns.chunks(WARM_BATCH) {
            // Hash the chunk's connections first, then load their buckets apart from the
            // hashing (a loop that also hashes holds too few loads in flight).
            for (kb, c) in keys.iter_mut().zip(chunk) {
                let k = tuple5(&c.key);
                *kb = (k, placement::bucket(&k, self.buckets));
            }
            let ways = self.ways;
            self.warm(keys[..chunk.len()].iter().map(|&(_, b)| b * ways), ways);
            for (c, (k, bucket)) in chunk.iter().zip(&keys) {
                self.install_one(c, k, *bucket, now, out)?;
            }
        }
        let r = self.flush(&mut io);
        self.via_dma = false;
        r
    }

    /// One connection of [`Conntrack::install_batch`]: `k` its 5-tuple, `bucket` its bucket.
    fn install_one(
        &mut self,
        c: &NewConnection,
        k: &FlowKey,
        bucket: u32,
        now: u32,
        out: &mut Vec<Installed>,
    ) -> Result<(), ConntrackError> {
        let start = bucket * self.ways;
        let existing = self.lookup_in(bucket, k);
        let index = match existing {
            Some(i) => {
                let e = self.at(i);
                if e.backend == c.backend && e.rule == c.rule {
                    self.last_seen.set(i as usize, now);
                    out.push(Installed::Present(i));
                    return Ok(());
                }
                i
            }
            None => {
                match (start..start + self.ways).find(|&i| !self.entries.is_valid(i as usize)) {
                    Some(_) if self.free_ways_to_nic => {
                        self.stats.left_to_nic += 1;
                        out.push(Installed::LeftToNic { bucket });
                        return Ok(());
                    }
                    Some(i) => i,
                    // Through the ring, a full bucket is settled by taking the place of a
                    // closed connection (the one idle longest).
                    None => match (start..start + self.ways)
                        .filter(|&i| self.via_dma && !is_open(&self.at(i)))
                        .min_by_key(|&i| self.seen_at(i))
                    {
                        Some(i) => {
                            self.stats.settled += 1;
                            i
                        }
                        None => {
                            self.stats.bucket_full += 1;
                            out.push(Installed::BucketFull { bucket });
                            return Ok(());
                        }
                    },
                }
            }
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
        if existing.is_some() && !self.via_dma {
            // Another backend for a live flow: take it out first, so no packet sees a
            // mix of the two entries (a DMA write replaces the entry whole).
            self.queue_invalidate(index)?;
        }
        self.queue_install(index, &entry)?;
        self.set_entry(index, entry);
        self.last_seen.set(index as usize, now);
        if existing.is_some() {
            self.stats.replaced += 1;
            out.push(Installed::Replaced(index));
        } else {
            self.stats.installed += 1;
            out.push(Installed::New(index));
        }
        Ok(())
    }

    /// Evicts flows; returns how many were present.
    pub fn evict_batch<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        keys: &[FlowKey],
    ) -> Result<usize, ConntrackError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return self.evict_io(Io::Rings(d, rings), keys);
        }
        self.evict_io(Io::Window(dev), keys)
    }

    /// [`Conntrack::evict_batch`] through the command ring.
    pub fn evict_batch_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        keys: &[FlowKey],
    ) -> Result<usize, ConntrackError> {
        self.evict_io(Io::Rings(dev, rings), keys)
    }

    fn evict_io<D: Device + ?Sized>(
        &mut self,
        mut io: Io<'_, D>,
        keys: &[FlowKey],
    ) -> Result<usize, ConntrackError> {
        self.settle(&mut io)?;
        self.via_dma = io.dma();
        let mut n = 0;
        for key in keys {
            if let Some(i) = self.lookup(key) {
                self.queue_invalidate(i)?;
                self.set_invalid(i);
                self.stats.evicted += 1;
                n += 1;
            }
        }
        let r = self.flush(&mut io);
        self.via_dma = false;
        r?;
        Ok(n)
    }

    /// Marks a flow closed (FIN/RST seen, from a teardown event); its entry stays until
    /// ageing removes it with the closed timeout. Returns whether the flow was present.
    pub fn mark_closed<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        key: &FlowKey,
    ) -> Result<bool, ConntrackError> {
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return self.mark_closed_io(Io::Rings(d, rings), key);
        }
        self.mark_closed_io(Io::Window(dev), key)
    }

    /// [`Conntrack::mark_closed`] through the command ring.
    pub fn mark_closed_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        key: &FlowKey,
    ) -> Result<bool, ConntrackError> {
        self.mark_closed_io(Io::Rings(dev, rings), key)
    }

    fn mark_closed_io<D: Device + ?Sized>(
        &mut self,
        mut io: Io<'_, D>,
        key: &FlowKey,
    ) -> Result<bool, ConntrackError> {
        self.settle(&mut io)?;
        let Some(i) = self.lookup(key) else {
            return Ok(false);
        };
        let mut e = self.at(i);
        if e.flags & FLAG_CLOSED != 0 {
            return Ok(true);
        }
        e.flags |= FLAG_CLOSED;
        let words = pack_ct(&e)?;
        if io.dma() {
            self.via_dma = true;
            self.queue_install(i, &e)?;
        } else {
            // Only the flags word changes; the entry stays valid throughout.
            self.queue_entry(i, &words, words[0]);
            self.queue_check(i);
        }
        self.set_entry(i, e);
        let r = self.flush(&mut io);
        self.via_dma = false;
        r?;
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
        if let Some((d, rings)) = crate::rings::split_commands(dev) {
            return self.age_io(Io::Rings(d, rings), now, timeout);
        }
        self.age_io(Io::Window(dev), now, timeout)
    }

    /// [`Conntrack::age`] through the command ring: the hit bits by DMA (HIT_READ), the
    /// evictions as one CT_WRITE list.
    pub fn age_dma<D: Device + ?Sized>(
        &mut self,
        dev: &mut D,
        rings: &mut HostRings,
        now: u32,
        timeout: impl Fn(&CtEntry) -> u32,
    ) -> Result<AgeReport, ConntrackError> {
        self.age_io(Io::Rings(dev, rings), now, timeout)
    }

    /// The hit bits of groups `g0..g1` (32 entries each), read and cleared.
    fn read_hits<D: Device + ?Sized>(
        &mut self,
        io: &mut Io<'_, D>,
        g0: u32,
        g1: u32,
    ) -> Result<Vec<u32>, ConntrackError> {
        if let Io::Rings(dev, rings) = io {
            let mut hits = vec![0u32; (g1 - g0) as usize];
            let per = (rings.data_len() / 4).max(1) as u32;
            let mut g = g0;
            while g < g1 {
                let n = (g1 - g).min(per);
                rings.submit(&CmdDesc {
                    op: DmaCmd::HitRead,
                    count: n,
                    index: g * 32,
                    addr: rings.data_iova(0),
                    ..CmdDesc::default()
                })?;
                rings.execute(&mut **dev, COMMAND_TIMEOUT)?;
                let at = (g - g0) as usize;
                rings.read_data(0, &mut hits[at..at + n as usize])?;
                g += n;
            }
            return Ok(hits);
        }
        let dev = io.dev();
        for g in g0..g1 {
            self.batch.write(win::INDEX, g * 32).read(win::HIT_READ);
            self.stats.writes += 1;
        }
        Ok(self.batch.run(dev)?.to_vec())
    }

    fn age_io<D: Device + ?Sized>(
        &mut self,
        mut io: Io<'_, D>,
        now: u32,
        timeout: impl Fn(&CtEntry) -> u32,
    ) -> Result<AgeReport, ConntrackError> {
        self.settle(&mut io)?;
        let mut report = AgeReport::default();
        let len = self.entries.len() as u32;
        let groups = len.div_ceil(32);
        let step: u32 = if io.dma() { groups.max(1) } else { 1024 };
        let mut expired = Vec::new();
        let mut g0 = 0;
        while g0 < groups {
            let g1 = (g0 + step).min(groups);
            let hits = self.read_hits(&mut io, g0, g1)?;
            for (g, bits) in (g0..g1).zip(hits) {
                // A run without a valid entry has nothing to refresh or expire (an idle table
                // of 64 Mi is not read through every second).
                if !self.entries.run_has_valid(g as usize * 32) {
                    continue;
                }
                for b in 0..32 {
                    let i = g * 32 + b;
                    if i as usize >= self.entries.len() {
                        break;
                    }
                    if !self.entries.is_valid(i as usize) {
                        continue;
                    }
                    report.scanned += 1;
                    if bits >> b & 1 != 0 {
                        self.last_seen.set(i as usize, now);
                        report.refreshed += 1;
                    } else if now.wrapping_sub(self.seen_at(i)) >= timeout(&self.at(i)) {
                        expired.push(i);
                    }
                }
            }
            g0 = g1;
        }
        self.via_dma = io.dma();
        for chunk in expired.chunks(1024) {
            for &i in chunk {
                self.queue_invalidate(i)?;
                self.set_invalid(i);
            }
            if let Err(e) = self.flush(&mut io) {
                self.via_dma = false;
                return Err(e);
            }
        }
        self.via_dma = false;
        report.evicted = expired.len() as u32;
        self.stats.evicted += u64::from(report.evicted);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manager over a table whose last-seen times take 32 MiB (8 Mi entries, the size a
    /// thread backs them from): they are backed ahead of use, read as the attach's time all
    /// along, and change as set. One dropped right after it was made, the thread still at
    /// work, goes as any other; a small one starts no thread.
    #[test]
    fn the_last_seen_times_of_a_large_table_are_backed_ahead_of_use() {
        let (buckets, ways) = (2 * 1024 * 1024, 4);
        let len = (buckets * ways) as usize;
        let manager = |len: usize| {
            Conntrack::with_entries(
                buckets,
                ways,
                CtTable::new(len),
                PairCounts::default(),
                u32::MAX - 1,
            )
        };
        drop(manager(len));
        let mut ct = manager(len);
        let t0 = std::time::Instant::now();
        while ct.prefault() == Prefault::Working {
            assert!(t0.elapsed().as_secs() < 60, "still backing the pages");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            matches!(ct.prefault(), Prefault::Done | Prefault::Unsupported),
            "{:?}",
            ct.prefault()
        );
        assert!((0..len as u32).all(|i| ct.last_seen(i) == Some(u32::MAX - 1)));
        for (k, i) in [0, 1, 1023, 1024, len as u32 / 2, len as u32 - 1]
            .into_iter()
            .enumerate()
        {
            ct.touch(i, k as u32);
            assert_eq!(ct.last_seen(i), Some(k as u32));
        }
        assert_eq!(ct.last_seen(len as u32), None);
        assert_eq!(ct.valid_count(), 0);
        assert_eq!(manager(4096).prefault(), Prefault::Skipped);
    }

    /// The threaded decode gives what `CtEntry::unpack` (the generated code) gives, entry by
    /// entry, across the threads' boundaries (a batch large enough for several threads).
    #[test]
    fn decoding_on_several_threads_matches_the_generated_unpack() {
        let n: u64 = 5 * 16 * 1024 + 7;
        // Arbitrary words (any words decode: every field is a plain integer), from two
        // multiplicative hashes of the position, so neighbouring entries differ in every field.
        let words: Vec<u32> = (0..n * WORDS as u64)
            .map(|i| {
                let a = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
                let b = i
                    .wrapping_add(1)
                    .wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                    .to_le_bytes();
                u32::from_be_bytes([a[0] ^ b[4], a[1] ^ b[5], a[2] ^ b[6], a[3] ^ b[7]])
            })
            .collect();
        let mut out = vec![CtEntry::default(); n as usize];
        decode_entries(&words, &mut out);
        for (i, (e, w)) in out.iter().zip(words.chunks_exact(WORDS)).enumerate() {
            assert_eq!(*e, CtEntry::unpack(w).unwrap(), "entry {i}");
        }
        // Attach's decode, straight from the data area into the host copy: the same entries,
        // and the open counts of a scan. The run starts past entry 0 of the table, as every
        // run but the first does.
        let read = |at: usize, w: &mut [u32]| {
            w.copy_from_slice(&words[at / 4..at / 4 + w.len()]);
            Ok(())
        };
        let first = 100;
        let len = first + n as usize;
        // A builder past its first `first` entries (left default).
        let past_first = || {
            let mut b = CtTableBuilder::new(len);
            drop(b.part(first));
            b
        };
        let mut b = past_first();
        let mut tally = OpenTally::new();
        let rest = decode_run(&read, b.part(n as usize), &mut tally).unwrap();
        b.merge(rest);
        let table = b.finish();
        let open = tally.into_counts();
        let mut want = PairCounts::default();
        for (i, w) in words.chunks_exact(WORDS).enumerate() {
            let expected = CtEntry::unpack(w).unwrap();
            assert_eq!(table.get(first + i), Some(expected), "entry {i}");
            if expected.valid && expected.flags & FLAG_CLOSED == 0 {
                *want.entry((expected.rule, expected.backend)).or_insert(0) += 1;
            }
        }
        assert!((0..first).all(|i| table.get(i) == Some(CtEntry::default())));
        assert_eq!(table.valid_count(), out.iter().filter(|e| e.valid).count());
        assert!(!want.is_empty());
        assert_eq!(open, want);
        // Several rules on one backend, in every order.
        let mut t = OpenTally::new();
        for (rule, backend, n) in [
            (3, 7, 2),
            (4, 7, 1),
            (3, 7, 1),
            (4, 7, 5),
            (9, 7, 1),
            (0, u16::MAX, 1),
            (0, u16::MAX, 2),
        ] {
            t.add(rule, backend, n);
        }
        let mut got: Vec<_> = t.into_counts().into_iter().collect();
        got.sort_unstable();
        assert_eq!(
            got,
            vec![((0, u16::MAX), 3), ((3, 7), 3), ((4, 7), 6), ((9, 7), 1)]
        );
        // A read that fails part-way is an error, not a half-decoded run.
        let failing = |at: usize, w: &mut [u32]| {
            if at >= 40_000 * WORDS * 4 {
                return Err(RingError::CommandsFull);
            }
            read(at, w)
        };
        let mut b = past_first();
        assert!(decode_run(&failing, b.part(n as usize), &mut OpenTally::new()).is_err());
    }
}
