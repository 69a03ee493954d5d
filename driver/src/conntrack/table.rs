//! The host's copy of the connection table, compact: 24 bytes an entry instead of the 48 of a
//! [`CtEntry`]. Attach builds the copy of the whole table (64 Mi entries at the `u280` profile),
//! and the memory it takes, new to the process, costs more kernel time (faults, zeroing, the
//! unmap at the end) than decoding the entries does; half the bytes is half of that.
//!
//! An entry's addresses are kept as 32 bits each when both are IPv4 (IPv4-mapped, `::ffff:a.b.c.d`,
//! or with the upper 96 bits zero); otherwise the entry is *wide* and both addresses sit in a
//! side list, the slot holding their place there. Every other field is kept whole, so an entry
//! reads back exactly as it was stored.
//!
//! A new table is all zero bytes, which is the default (invalid) entry everywhere: the kernel
//! hands out zero pages as they are first written, so nothing is written up front.

use super::prefault::{zeroed_vec, Prefault, Prefaulted, Zeroable};
use super::FLAG_CLOSED;
use nlb_hw::layouts::CtEntry;

/// `Slot::state` bits.
const VALID: u8 = 1;
/// `src_addr` is `::ffff:src` (otherwise `src` with the upper 96 bits zero).
const SRC_MAPPED: u8 = 2;
/// As `SRC_MAPPED`, for `dst`.
const DST_MAPPED: u8 = 4;
/// The addresses are in the wide list, at `src`.
const WIDE: u8 = 8;

/// The upper 96 bits of an IPv4-mapped IPv6 address.
const MAPPED_PREFIX: u128 = 0xffff;

/// One entry of the copy. All-zero bytes are the default entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Slot {
    src: u32,
    dst: u32,
    timestamp: u32,
    src_port: u16,
    dst_port: u16,
    backend: u16,
    rule: u16,
    protocol: u8,
    flags: u8,
    state: u8,
}

const _: () = assert!(size_of::<Slot>() == 24);

/// Words of a packed entry.
const WORDS: usize = CtEntry::WORDS;

// `Slot::from_words` reads each field but the addresses in one 32-bit window, into a slot
// field as wide, and the addresses as four 32-bit parts.
const _: () = {
    type E = CtEntry;
    assert!(E::VALID_WIDTH == 1 && E::VALID_LSB == 0);
    assert!(E::PROTOCOL_WIDTH <= 8 && E::FLAGS_WIDTH <= 8);
    assert!(E::SRC_PORT_WIDTH <= 16 && E::DST_PORT_WIDTH <= 16);
    assert!(E::BACKEND_WIDTH <= 16 && E::RULE_WIDTH <= 16);
    assert!(E::TIMESTAMP_WIDTH <= 32);
    assert!(E::SRC_ADDR_WIDTH == 128 && E::DST_ADDR_WIDTH == 128);
};

/// Bits `lsb .. lsb + width` (`width` at most 32) of a packed entry, word 0 holding bits
/// 31..0; bits past the last word read as zero.
#[inline(always)]
fn bits(w: &[u32; WORDS], lsb: usize, width: usize) -> u32 {
    let i = lsb / 32;
    let word = |k: usize| u64::from(w.get(k).copied().unwrap_or(0));
    let v = ((word(i) | word(i + 1) << 32) >> (lsb % 32)) as u32;
    if width >= 32 {
        v
    } else {
        v & ((1 << width) - 1)
    }
}

/// An address as 32 bits and whether it is IPv4-mapped, if it is an IPv4 one.
#[inline]
fn narrow(addr: u128) -> Option<(u32, bool)> {
    match addr >> 32 {
        0 => Some((addr as u32, false)),
        MAPPED_PREFIX => Some((addr as u32, true)),
        _ => None,
    }
}

#[inline]
fn widen(addr: u32, mapped: bool) -> u128 {
    let prefix = if mapped { MAPPED_PREFIX << 32 } else { 0 };
    prefix | u128::from(addr)
}

impl Slot {
    /// The slot of `e`, and its addresses when they do not fit in it (the slot is wide, its
    /// place in the wide list still to be set).
    #[inline]
    fn of(e: &CtEntry) -> (Slot, Option<[u128; 2]>) {
        let mut s = Slot {
            src: 0,
            dst: 0,
            timestamp: e.timestamp,
            src_port: e.src_port,
            dst_port: e.dst_port,
            backend: e.backend,
            rule: e.rule,
            protocol: e.protocol,
            flags: e.flags,
            state: if e.valid { VALID } else { 0 },
        };
        match (narrow(e.src_addr), narrow(e.dst_addr)) {
            (Some((src, src_mapped)), Some((dst, dst_mapped))) => {
                s.src = src;
                s.dst = dst;
                if src_mapped {
                    s.state |= SRC_MAPPED;
                }
                if dst_mapped {
                    s.state |= DST_MAPPED;
                }
                (s, None)
            }
            _ => {
                s.state |= WIDE;
                (s, Some([e.src_addr, e.dst_addr]))
            }
        }
    }

    /// The slot of an entry packed in the device's layout: [`Slot::of`] of what
    /// `nlb_hw::ct_words::unpack_ct` gives, without the entry between (attach decodes the whole
    /// table with it).
    #[inline]
    fn from_words(w: &[u32; WORDS]) -> (Slot, Option<[u128; 2]>) {
        type E = CtEntry;
        let addr = |lsb: usize| {
            [
                bits(w, lsb, 32),
                bits(w, lsb + 32, 32),
                bits(w, lsb + 64, 32),
                bits(w, lsb + 96, 32),
            ]
        };
        let (src, dst) = (addr(E::SRC_ADDR_LSB), addr(E::DST_ADDR_LSB));
        let mut s = Slot {
            src: src[0],
            dst: dst[0],
            timestamp: bits(w, E::TIMESTAMP_LSB, E::TIMESTAMP_WIDTH),
            src_port: bits(w, E::SRC_PORT_LSB, E::SRC_PORT_WIDTH) as u16,
            dst_port: bits(w, E::DST_PORT_LSB, E::DST_PORT_WIDTH) as u16,
            backend: bits(w, E::BACKEND_LSB, E::BACKEND_WIDTH) as u16,
            rule: bits(w, E::RULE_LSB, E::RULE_WIDTH) as u16,
            protocol: bits(w, E::PROTOCOL_LSB, E::PROTOCOL_WIDTH) as u8,
            flags: bits(w, E::FLAGS_LSB, E::FLAGS_WIDTH) as u8,
            state: bits(w, E::VALID_LSB, E::VALID_WIDTH) as u8,
        };
        // The upper 96 bits of an address: IPv4-mapped, zero, or anything else (wide).
        let upper = |a: [u32; 4]| match (a[1], a[2] | a[3]) {
            (0, 0) => Some(0),
            (0xffff, 0) => Some(1),
            _ => None,
        };
        match (upper(src), upper(dst)) {
            (Some(src_mapped), Some(dst_mapped)) => {
                s.state |= (src_mapped * SRC_MAPPED) | (dst_mapped * DST_MAPPED);
                (s, None)
            }
            _ => {
                s.state |= WIDE;
                let wide = |a: [u32; 4]| {
                    a.iter()
                        .rev()
                        .fold(0u128, |v, &part| v << 32 | u128::from(part))
                };
                (s, Some([wide(src), wide(dst)]))
            }
        }
    }

    fn valid(&self) -> bool {
        self.state & VALID != 0
    }

    /// Its place in the wide list, if it is wide.
    fn wide(&self) -> Option<u32> {
        (self.state & WIDE != 0).then_some(self.src)
    }

    #[inline]
    fn entry(&self, wide: &[[u128; 2]]) -> CtEntry {
        let [src_addr, dst_addr] = match self.wide() {
            // Every wide slot's place was given out by `CtTable::set_wide` and is kept until the
            // slot changes.
            Some(at) => wide[at as usize],
            None => [
                widen(self.src, self.state & SRC_MAPPED != 0),
                widen(self.dst, self.state & DST_MAPPED != 0),
            ],
        };
        CtEntry {
            valid: self.valid(),
            protocol: self.protocol,
            src_port: self.src_port,
            dst_port: self.dst_port,
            src_addr,
            dst_addr,
            backend: self.backend,
            rule: self.rule,
            flags: self.flags,
            timestamp: self.timestamp,
        }
    }
}

// SAFETY: all-zero bytes are a `Slot` (integers only): the default one.
unsafe impl Zeroable for Slot {}

/// The compact copy of a connection table: [`CtTable::get`] gives back exactly the entry
/// [`CtTable::set`] stored.
#[derive(Clone)]
pub(crate) struct CtTable {
    slots: Vec<Slot>,
    /// The addresses of wide slots.
    wide: Vec<[u128; 2]>,
    /// Places in `wide` no slot holds.
    wide_free: Vec<u32>,
    /// Valid entries.
    valid: usize,
    /// Valid entries per run of [`CHUNK`] slots: a scan skips the runs without one (a table
    /// of 64 Mi mostly empty is read in a few ms, not streamed whole from memory). 32 KiB
    /// for 64 Mi entries, so that keeping it costs an install no cache miss.
    chunk_valid: Vec<u16>,
}

/// Slots per [`CtTable::chunk_valid`] count (at most `u16::MAX`).
const CHUNK: usize = 4096;
// A group of 32 hit bits lies in one run ([`CtTable::run_has_valid`]).
const _: () = assert!(CHUNK.is_multiple_of(32) && CHUNK <= u16::MAX as usize);

impl std::fmt::Debug for CtTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CtTable")
            .field("len", &self.slots.len())
            .field("valid", &self.valid)
            .field("wide", &(self.wide.len() - self.wide_free.len()))
            .finish_non_exhaustive()
    }
}

impl CtTable {
    /// `len` default (invalid) entries. Its pages are not backed ahead of use, unlike the
    /// last-seen times' ([`SeenTimes`]): the attach writes every slot (each run's pages backed
    /// just before, [`CtTableBuilder::part`]).
    pub(crate) fn new(len: usize) -> CtTable {
        CtTable {
            // In memory the allocator gets zeroed (for a large table, a new mapping the kernel
            // zeroes a page at a time as it is first written), not written here.
            slots: zeroed_vec(len),
            wide: Vec::new(),
            wide_free: Vec::new(),
            valid: 0,
            chunk_valid: vec![0; len.div_ceil(CHUNK)],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Valid entries (kept, no scan).
    pub(crate) fn valid_count(&self) -> usize {
        self.valid
    }

    /// Entry `index`.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<CtEntry> {
        self.slots.get(index).map(|s| s.entry(&self.wide))
    }

    /// Whether any entry of the run of [`CHUNK`] slots holding `index` is valid (a multiple
    /// of 32: a group of hit bits lies in one run). False beyond the table.
    #[inline]
    pub(crate) fn run_has_valid(&self, index: usize) -> bool {
        self.chunk_valid.get(index / CHUNK).is_some_and(|&n| n > 0)
    }

    /// Whether entry `index` is valid (false beyond the table).
    #[inline]
    pub(crate) fn is_valid(&self, index: usize) -> bool {
        self.slots.get(index).is_some_and(Slot::valid)
    }

    /// The state byte of entry `index` (0 beyond the table): loading the slots of a batch
    /// this way first lets their cache misses overlap before each is read and written in turn.
    #[inline]
    pub(crate) fn touch(&self, index: usize) -> u8 {
        self.slots.get(index).map_or(0, |s| s.state)
    }

    /// Every entry, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = CtEntry> + '_ {
        self.slots.iter().map(|s| s.entry(&self.wide))
    }

    /// Every valid entry with its index, in index order.
    pub(crate) fn iter_valid(&self) -> impl Iterator<Item = (usize, CtEntry)> + '_ {
        self.chunk_valid
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .flat_map(move |(c, _)| {
                let run = c * CHUNK..((c + 1) * CHUNK).min(self.slots.len());
                self.slots[run.clone()]
                    .iter()
                    .zip(run)
                    .filter(|(s, _)| s.valid())
                    .map(|(s, i)| (i, s.entry(&self.wide)))
            })
    }

    /// Stores `entry` at `index`; returns the entry it replaces (`None` beyond the table:
    /// nothing stored).
    pub(crate) fn set(&mut self, index: usize, entry: &CtEntry) -> Option<CtEntry> {
        let old = *self.slots.get(index)?;
        // Read before its place in the wide list can be given to the new entry.
        let was = old.entry(&self.wide);
        let (mut slot, addrs) = Slot::of(entry);
        if let Some(at) = old.wide() {
            self.wide_free.push(at);
        }
        if let Some(addrs) = addrs {
            slot.src = self.set_wide(addrs);
        }
        self.valid = self.valid - usize::from(old.valid()) + usize::from(slot.valid());
        let run = &mut self.chunk_valid[index / CHUNK];
        *run = *run - u16::from(old.valid()) + u16::from(slot.valid());
        self.slots[index] = slot;
        Some(was)
    }

    /// A place in the wide list holding `addrs`.
    fn set_wide(&mut self, addrs: [u128; 2]) -> u32 {
        match self.wide_free.pop() {
            Some(at) => {
                self.wide[at as usize] = addrs;
                at
            }
            None => {
                // At most one place per slot, and slots are indexed by u32.
                self.wide.push(addrs);
                (self.wide.len() - 1) as u32
            }
        }
    }
}

/// A new table filled in order, run after run of entries (attach decodes the whole table).
/// A run only ever covers entries not yet written, so filling it writes its memory without
/// reading it first (a read of new memory maps the zero page, and the write after it faults
/// again).
#[derive(Debug)]
pub(crate) struct CtTableBuilder {
    table: CtTable,
    /// Entries handed out so far (`..next`).
    next: usize,
}

impl CtTableBuilder {
    /// A table of `len` entries, none written yet.
    pub(crate) fn new(len: usize) -> CtTableBuilder {
        CtTableBuilder {
            table: CtTable::new(len),
            next: 0,
        }
    }

    /// Entries handed out so far: the next run starts here.
    pub(crate) fn next(&self) -> usize {
        self.next
    }

    /// The next `n` entries (fewer at the end of the table), to be filled ([`Part::put_words`])
    /// and handed back to [`CtTableBuilder::merge`]; entries left unset stay default. Their
    /// memory is made present first, in one call: the kernel then allocates and zeroes the
    /// pages without a fault for each, just before they are written.
    pub(crate) fn part(&mut self, n: usize) -> Part<'_> {
        let range = self.next..self.next.saturating_add(n).min(self.table.len());
        self.next = range.end;
        let slots = &mut self.table.slots[range.clone()];
        populate_for_write(slots);
        let runs = range.start / CHUNK..range.end.div_ceil(CHUNK);
        Part {
            first: range.start,
            slots,
            rest: PartRest {
                first_chunk: runs.start,
                chunk_valid: vec![0; runs.len()],
                ..PartRest::default()
            },
        }
    }

    /// Takes in what filling a part left to do: the wide addresses, the valid count.
    pub(crate) fn merge(&mut self, rest: PartRest) {
        let t = &mut self.table;
        for (index, addrs) in rest.wide {
            let at = t.set_wide(addrs);
            t.slots[index].src = at;
        }
        t.valid += rest.valid;
        for (run, n) in t.chunk_valid[rest.first_chunk..]
            .iter_mut()
            .zip(rest.chunk_valid)
        {
            *run += n;
        }
    }

    /// The table (entries not handed out, or not merged, are default).
    pub(crate) fn finish(self) -> CtTable {
        self.table
    }
}

/// Makes the whole pages within `slots` present and writable (`MADV_POPULATE_WRITE`), as a
/// write to each would, without changing what they hold; only advice (an older kernel
/// refuses it, and the writes fault the pages in instead).
fn populate_for_write(slots: &mut [Slot]) {
    const PAGE: usize = 4096;
    let start = slots.as_mut_ptr() as usize;
    let end = start + size_of_val(slots);
    let (first, last) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
    if first < last {
        // SAFETY: the range is whole pages inside `slots`, memory this borrow owns; the call
        // reads and writes none of it (it only backs the pages, keeping their contents).
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_POPULATE_WRITE,
            );
        }
    }
}

/// Consecutive entries of a [`CtTableBuilder`]'s table, never written before.
#[derive(Debug)]
pub(crate) struct Part<'a> {
    first: usize,
    slots: &'a mut [Slot],
    rest: PartRest,
}

/// What a filled [`Part`] leaves for [`CtTableBuilder::merge`].
#[derive(Debug, Default)]
pub(crate) struct PartRest {
    /// Wide entries (index, addresses) without their place in the wide list yet.
    wide: Vec<(usize, [u128; 2])>,
    /// Valid entries written.
    valid: usize,
    /// Valid entries written per run of the table's ([`CtTable::chunk_valid`]), from run
    /// `first_chunk` on.
    first_chunk: usize,
    chunk_valid: Vec<u16>,
}

impl Part<'_> {
    /// Entries.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Stores the entry packed in `words` (the device's layout) as the part's `k`-th entry,
    /// which is default (never written: only written here, once; no effect beyond the part).
    /// Returns its (rule, backend) if it is an open connection (valid, no FIN or RST seen).
    #[inline]
    pub(crate) fn put_words(&mut self, k: usize, words: &[u32; WORDS]) -> Option<(u16, u16)> {
        let slot = self.slots.get_mut(k)?;
        let (new, addrs) = Slot::from_words(words);
        if let Some(addrs) = addrs {
            self.rest.wide.push((self.first + k, addrs));
        }
        self.rest.valid += usize::from(new.valid());
        if new.valid() {
            self.rest.chunk_valid[(self.first + k) / CHUNK - self.rest.first_chunk] += 1;
        }
        *slot = new;
        (new.valid() && new.flags & FLAG_CLOSED == 0).then_some((new.rule, new.backend))
    }

    /// Done: what is left for [`CtTableBuilder::merge`].
    pub(crate) fn finish(self) -> PartRest {
        self.rest
    }
}

/// A host time per entry, kept relative to a base: a new list (every entry at the base) is zero
/// memory, not 4 bytes written per entry up front. Its pages are backed ahead of use on a
/// thread of its own when the list is large ([`Prefaulted`]): installs set times all over it
/// (256 MiB at the `u280` profile) right after attach, and each first write of a page would
/// otherwise fault.
#[derive(Debug, Clone)]
pub(crate) struct SeenTimes {
    base: u32,
    /// Time - base (wrapping: the times wrap too).
    since: Prefaulted<u32>,
}

impl SeenTimes {
    /// `len` entries, each at `base`.
    pub(crate) fn new(len: usize, base: u32) -> SeenTimes {
        SeenTimes {
            base,
            since: Prefaulted::new(len),
        }
    }

    pub(crate) fn get(&self, index: usize) -> Option<u32> {
        self.since.get(index).map(|d| d.wrapping_add(self.base))
    }

    /// Sets entry `index` (no effect beyond the list).
    pub(crate) fn set(&mut self, index: usize, t: u32) {
        if let Some(d) = self.since.get_mut(index) {
            *d = t.wrapping_sub(self.base);
        }
    }

    /// How far the list's memory is backed ahead of use.
    pub(crate) fn prefault(&self) -> Prefault {
        self.since.prefault()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nlb_hw::ct_words::{pack_ct, unpack_ct};

    /// Entries of every kind of address: IPv4-mapped, upper bits zero (0 itself included), the
    /// edges of both, IPv6, mixed; the other fields from a hash of the position, so neighbours
    /// differ in each.
    fn entries(n: u64) -> Vec<CtEntry> {
        let addrs: [u128; 8] = [
            0xffff_c633_0001,
            0xffff_ffff_ffff,
            0xffff_0000_0000,
            0,
            0x0a00_0001,
            0x1_0000_0000,
            0x2001_0db8_0000_0000_0000_0000_0000_0001,
            u128::MAX,
        ];
        (0..n)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 3);
                let b = h.to_le_bytes();
                // Every field through the hardware layout, so each is in its range (rule: 12
                // bits) and the entry is one the device could hold.
                let words = pack_ct(&CtEntry {
                    valid: b[0] & 1 != 0,
                    protocol: b[1],
                    src_port: u16::from_le_bytes([b[2], b[3]]),
                    dst_port: u16::from_le_bytes([b[4], b[5]]),
                    src_addr: addrs[i as usize % addrs.len()] ^ u128::from(b[6] & 1),
                    dst_addr: addrs[(i / 8) as usize % addrs.len()],
                    backend: u16::from_le_bytes([b[6], b[7]]),
                    rule: u16::from_le_bytes([b[1], b[3]]) & 0xfff,
                    flags: b[5],
                    timestamp: (h >> 32) as u32,
                })
                .unwrap();
                unpack_ct(&words)
            })
            .collect()
    }

    #[test]
    fn a_new_table_holds_default_entries_in_zero_bytes() {
        let t = CtTable::new(1000);
        assert_eq!(t.len(), 1000);
        assert_eq!(t.valid_count(), 0);
        assert!(t.iter().all(|e| e == CtEntry::default()));
        assert_eq!(t.get(1000), None);
        assert!(!t.is_valid(0) && !t.is_valid(1000));
        assert_eq!(CtTable::new(0).len(), 0);
    }

    /// A sparse table: valid entries at the first and last slot of a run, alone in a run, in
    /// the short last run; runs emptied again by invalid and by valid-again entries. The scan
    /// finds exactly the valid ones, in order, whatever runs it skips.
    #[test]
    fn the_scan_of_a_sparse_table_finds_every_valid_entry() {
        let len = 10 * CHUNK + 37;
        let mut t = CtTable::new(len);
        let all = entries(64);
        let valid: Vec<&CtEntry> = all.iter().filter(|e| e.valid).collect();
        let invalid = all.iter().find(|e| !e.valid).unwrap();
        let places = [
            0,
            CHUNK - 1,
            CHUNK,
            3 * CHUNK + 5,
            5 * CHUNK - 1,
            7 * CHUNK + 100,
            10 * CHUNK,
            len - 1,
        ];
        let every = |t: &CtTable| -> Vec<(usize, CtEntry)> {
            (0..t.len())
                .filter(|&i| t.is_valid(i))
                .map(|i| (i, t.get(i).unwrap()))
                .collect()
        };
        for (k, &i) in places.iter().enumerate() {
            t.set(i, valid[k % valid.len()]);
            assert!(t.iter_valid().eq(every(&t)), "after setting {i}");
        }
        assert_eq!(t.iter_valid().count(), places.len());
        // Emptied: an invalid entry over a valid one; a valid one over a valid one keeps it.
        for (k, &i) in places.iter().enumerate() {
            if k % 2 == 0 {
                t.set(i, invalid);
            } else {
                t.set(i, valid[(k + 1) % valid.len()]);
            }
            assert!(t.iter_valid().eq(every(&t)), "after replacing {i}");
        }
        assert_eq!(t.iter_valid().count(), places.len() / 2);
        assert_eq!(t.valid_count(), places.len() / 2);
        for &i in &places {
            t.set(i, invalid);
        }
        assert_eq!(t.iter_valid().count(), 0);
        assert_eq!(CtTable::new(0).iter_valid().count(), 0);
        // Built by parts that straddle runs (attach), valid entries at the same places.
        let mut b = CtTableBuilder::new(len);
        for run in [CHUNK - 3, 2 * CHUNK + 10, 5 * CHUNK, 3 * CHUNK] {
            let first = b.next();
            let mut p = b.part(run);
            for (k, &i) in places.iter().enumerate() {
                if (first..first + p.len()).contains(&i) {
                    p.put_words(i - first, &valid[k % valid.len()].pack().unwrap());
                }
            }
            let rest = p.finish();
            b.merge(rest);
        }
        let built = b.finish();
        assert_eq!(built.valid_count(), places.len());
        assert!(built.iter_valid().eq(every(&built)));
        assert!(built.iter_valid().map(|(i, _)| i).eq(places));
    }

    /// Every entry stored reads back as stored, the old one is returned, the valid count and the
    /// wide list follow (a wide slot's place is reused, never leaked).
    #[test]
    fn entries_read_back_as_stored() {
        let all = entries(4096);
        assert!(all.iter().any(|e| narrow(e.src_addr).is_none()));
        assert!(all.iter().any(|e| narrow(e.src_addr).is_some()));
        let mut t = CtTable::new(300);
        let mut shadow = vec![CtEntry::default(); 300];
        for (k, e) in all.iter().enumerate() {
            let i = (k * 7919) % 300;
            assert_eq!(t.set(i, e), Some(shadow[i]), "set {k} at {i}");
            shadow[i] = *e;
            assert_eq!(t.get(i), Some(*e), "get {k} at {i}");
        }
        assert_eq!(t.iter().collect::<Vec<_>>(), shadow);
        assert_eq!(t.valid_count(), shadow.iter().filter(|e| e.valid).count());
        let valid: Vec<_> = shadow.iter().enumerate().filter(|(_, e)| e.valid).collect();
        let got: Vec<_> = t.iter_valid().collect();
        assert_eq!(got.len(), valid.len());
        for ((i, e), (j, f)) in got.iter().zip(&valid) {
            assert_eq!((*i, e), (*j, *f));
            assert!(t.is_valid(*i));
        }
        let wide_held = shadow
            .iter()
            .filter(|e| narrow(e.src_addr).is_none() || narrow(e.dst_addr).is_none())
            .count();
        assert_eq!(t.wide.len() - t.wide_free.len(), wide_held);
        assert!(t.wide.len() <= 300);
        // Beyond the table: nothing stored.
        assert_eq!(t.set(300, &all[0]), None);
        assert_eq!(t.iter().collect::<Vec<_>>(), shadow);
    }

    /// A table built run after run holds what `set` gives, and then changes as one set entry
    /// by entry does.
    #[test]
    fn a_table_built_run_after_run_matches_entries_set_one_by_one() {
        let all = entries(3000);
        let mut by_set = CtTable::new(1000);
        for (i, e) in all[..950].iter().enumerate() {
            by_set.set(i, e);
        }
        let mut b = CtTableBuilder::new(1000);
        // Runs of a few pages' worth of entries, and less.
        for run in [400, 171, 379] {
            let first = b.next();
            let mut p = b.part(run);
            assert_eq!(p.len(), run);
            for k in 0..p.len() {
                let e = &all[first + k];
                let open = e.valid && e.flags & FLAG_CLOSED == 0;
                assert_eq!(
                    p.put_words(k, &e.pack().unwrap()),
                    open.then_some((e.rule, e.backend))
                );
            }
            // Beyond the part: ignored.
            assert_eq!(p.put_words(p.len(), &all[0].pack().unwrap()), None);
            let rest = p.finish();
            b.merge(rest);
        }
        assert_eq!(b.next(), 950);
        // Past the end: only what is left.
        assert_eq!(b.part(100).len(), 50);
        let mut built = b.finish();
        assert!(built.iter().eq(by_set.iter()));
        assert_eq!(built.valid_count(), by_set.valid_count());
        for (i, e) in all[1000..].iter().enumerate() {
            let i = (i * 31) % 1000;
            assert_eq!(built.set(i, e), by_set.set(i, e));
        }
        assert!(built.iter().eq(by_set.iter()));
        assert_eq!(built.valid_count(), by_set.valid_count());
        // The scan skips runs without a valid entry and finds every valid one, after parts
        // that straddle runs and sets that make entries valid and invalid.
        for t in [&built, &by_set] {
            let every: Vec<(usize, CtEntry)> = (0..t.len())
                .filter(|&i| t.is_valid(i))
                .map(|i| (i, t.get(i).unwrap()))
                .collect();
            assert!(t.iter_valid().eq(every));
        }
        assert_eq!(
            built.wide.len() - built.wide_free.len(),
            by_set.wide.len() - by_set.wide_free.len()
        );
    }

    /// Any words decode (every field is a plain integer) as the generated unpack decodes them,
    /// addresses of every kind among them; entries packed by the generated code read back.
    #[test]
    fn packed_entries_decode_as_the_generated_unpack_does() {
        let mut x: u64 = 0x0123_4567_89ab_cdef;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        };
        let mut b = CtTableBuilder::new(3 * 2000);
        let mut want = Vec::new();
        let mut part = b.part(3 * 2000);
        for k in 0..2000 {
            // Random words; then the same with IPv4 addresses (upper 96 bits as an IPv4-mapped
            // or a zero-prefixed address); then an entry packed by the generated code.
            let mut w: [u32; WORDS] = std::array::from_fn(|_| next());
            let random = w;
            let e = CtEntry::unpack(&w).unwrap();
            let mut v4 = e;
            v4.src_addr = widen(e.src_addr as u32, k % 2 == 0);
            v4.dst_addr = widen(e.dst_addr as u32, k % 3 == 0);
            w = v4.pack().unwrap();
            let mut packed = CtEntry::unpack(&[next(); WORDS]).unwrap();
            packed.src_addr = if k % 5 == 0 { 0 } else { v4.src_addr };
            for (j, (words, entry)) in [(random, e), (w, v4), (packed.pack().unwrap(), packed)]
                .into_iter()
                .enumerate()
            {
                assert_eq!(CtEntry::unpack(&words).unwrap(), entry);
                part.put_words(3 * k + j, &words);
                want.push(entry);
            }
        }
        let rest = part.finish();
        b.merge(rest);
        let t = b.finish();
        for (i, e) in want.iter().enumerate() {
            assert_eq!(t.get(i).as_ref(), Some(e), "entry {i}");
        }
        assert!(want.iter().filter(|e| narrow(e.src_addr).is_none()).count() > 1000);
        assert!(want.iter().filter(|e| narrow(e.dst_addr).is_some()).count() > 1000);
        assert_eq!(t.valid_count(), want.iter().filter(|e| e.valid).count());
    }

    #[test]
    fn seen_times_read_back_across_the_wrap() {
        let mut s = SeenTimes::new(4, u32::MAX - 1);
        assert_eq!(
            (0..5).map(|i| s.get(i)).collect::<Vec<_>>(),
            [Some(u32::MAX - 1); 4]
                .into_iter()
                .chain([None])
                .collect::<Vec<_>>()
        );
        s.set(0, 3);
        s.set(1, 0);
        s.set(2, u32::MAX);
        s.set(4, 9);
        assert_eq!(
            (0..5).map(|i| s.get(i)).collect::<Vec<_>>(),
            [Some(3), Some(0), Some(u32::MAX), Some(u32::MAX - 1), None]
        );
    }
}
