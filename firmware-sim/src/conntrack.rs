//! The connection table: `buckets × ways` [`CtEntry`] slots (not banked), with the hit bits
//! the `conntrack` register block exposes.
//!
//! The pipeline only reads it; the host writes it (through the register block, or through the
//! host-side helpers [`ConnTable::install`] / [`ConnTable::mark_closed`] that model what the
//! slow path does on learn and teardown events).
//!
//! Memory layout (model-internal, invisible at the interface; the index of an entry is
//! `bucket × ways + way` as in the RTL). What a lookup reads is kept apart from the rest, so
//! that the memory it touches at random is as small as it can be:
//! - the full entries ([`CtEntry`], 48 bytes), read by the register block and the host-side
//!   helpers, and by a lookup only for entries with an IPv6 address;
//! - a 16-byte key slot per entry ([`KeySlot`]): the low 32 bits of both addresses (all of an
//!   IPv4-mapped address), ports, protocol, valid, hit bit and backend. The four slots of a
//!   bucket are one cache line, so a hit on an IPv4 connection reads one line of the key
//!   array (64 MiB at production size instead of 256) and marks its hit bit in the same;
//! - 8-bit tags, four to a 32-bit word per bucket (more ways, more words): 0 for an invalid
//!   entry, else [`tag_of`] the TUPLE5 hash of the entry's own key (whatever bucket it was
//!   written to). A lookup compares the packet's tag with a whole word at once and the key
//!   slots only of the ways whose tag matches (in way order; rarely one more way above a
//!   match), so a miss reads one word of tags (a 4 MiB array) and a hit that word and one
//!   line. Equal keys have equal hashes, so a way skipped for its tag could never have
//!   matched; a tag matches another key's one time in 255, which costs a line, not a result.
//!
//! The arrays are anonymous mappings, advised for transparent huge pages when large: lookups
//! land on random pages, and with 4 KiB pages nearly every one missed the TLB (see
//! `benches/pipeline.rs` and docs/model-performance.md). A mapping starts zero-filled, which is
//! an empty table.

use crate::keyhash::key_hash;
use memmap2::MmapMut;
use nlb_hw::enums::KeyType;
use nlb_hw::layouts::{CtEntry, LearnEvent};
use nlb_hw::{table_index, FlowKey};
use std::fmt;
use std::ptr::NonNull;

/// `flags` bit of a [`CtEntry`]: FIN or RST seen.
pub const CT_FLAG_CLOSED: u8 = nlb_hw::enums::CtFlag::Closed.value() as u8;

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

/// Tags in one tag word (a bucket has `ways.div_ceil(4)` of them).
const TAGS_PER_WORD: usize = 4;
/// Bits of a tag.
const TAG_BITS: u32 = 8;
/// `0x01` in every 8-bit lane of a tag word.
const LANES_ONE: u32 = u32::MAX / 0xff;
/// `0x80` in every 8-bit lane.
const LANES_HIGH: u32 = LANES_ONE << (TAG_BITS - 1);

/// What a lookup compares of one entry, in 16 bytes: four to a cache line, so that a 4-way
/// bucket is one line.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(16))]
struct KeySlot {
    /// The low 32 bits of the client address, then of the VIP address.
    addrs: u64,
    /// Client port, VIP port << 16, protocol << 32, the `KEY_` flags, backend << 48.
    rest: u64,
}

/// `KeySlot::rest`: the entry is valid.
const KEY_VALID: u64 = 1 << 40;
/// `KeySlot::rest`: an address is not IPv4-mapped, so `addrs` holds only part of it and the
/// full entry decides.
const KEY_WIDE: u64 = 1 << 41;
/// `KeySlot::rest`: the hit bit.
const KEY_HIT: u64 = 1 << 42;
/// The bits of `KeySlot::rest` a lookup compares (ports, protocol, valid, wide).
const KEY_COMPARED: u64 = KEY_HIT - 1;
const KEY_BACKEND_SHIFT: u32 = 48;

/// Whether a 128-bit address is IPv4-mapped (`::ffff:a.b.c.d`), all of it in its low 32 bits.
#[inline(always)]
fn is_v4_mapped(addr: u128) -> bool {
    addr >> 32 == 0xffff
}

/// A flow as a lookup compares it with [`KeySlot`]s (computed once per packet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProbeKey {
    addrs: u64,
    /// As `KeySlot::rest` without the hit bit and backend; always `KEY_VALID`.
    rest: u64,
}

impl ProbeKey {
    /// The probe key of a flow in client → VIP orientation.
    #[inline]
    pub(crate) fn new(protocol: u8, src: u128, src_port: u16, dst: u128, dst_port: u16) -> Self {
        let wide = !(is_v4_mapped(src) && is_v4_mapped(dst));
        Self::pack(protocol, src, src_port, dst, dst_port, wide)
    }

    /// [`ProbeKey::new`] of a flow whose addresses are known to be IPv4-mapped (an IPv4
    /// packet's), without testing them.
    #[inline]
    pub(crate) fn mapped_v4(
        protocol: u8,
        src: u128,
        src_port: u16,
        dst: u128,
        dst_port: u16,
    ) -> Self {
        debug_assert!(is_v4_mapped(src) && is_v4_mapped(dst));
        Self::pack(protocol, src, src_port, dst, dst_port, false)
    }

    #[inline(always)]
    fn pack(protocol: u8, src: u128, src_port: u16, dst: u128, dst_port: u16, wide: bool) -> Self {
        ProbeKey {
            addrs: u64::from(src as u32) | u64::from(dst as u32) << 32,
            rest: u64::from(src_port)
                | u64::from(dst_port) << 16
                | u64::from(protocol) << 32
                | KEY_VALID
                | if wide { KEY_WIDE } else { 0 },
        }
    }

    /// Whether `slot` may hold this flow: certainly, unless the flow is wide (then the full
    /// entry decides).
    #[inline(always)]
    fn admits(&self, slot: &KeySlot) -> bool {
        slot.addrs == self.addrs && slot.rest & KEY_COMPARED == self.rest
    }

    fn is_wide(&self) -> bool {
        self.rest & KEY_WIDE != 0
    }
}

impl KeySlot {
    /// The key slot of an entry, with hit bit `hit`.
    fn of(e: &CtEntry, hit: bool) -> KeySlot {
        if !e.valid {
            return KeySlot {
                addrs: 0,
                rest: if hit { KEY_HIT } else { 0 },
            };
        }
        let key = ProbeKey::new(e.protocol, e.src_addr, e.src_port, e.dst_addr, e.dst_port);
        KeySlot {
            addrs: key.addrs,
            rest: key.rest
                | if hit { KEY_HIT } else { 0 }
                | u64::from(e.backend) << KEY_BACKEND_SHIFT,
        }
    }

    #[inline(always)]
    fn backend(&self) -> u16 {
        (self.rest >> KEY_BACKEND_SHIFT) as u16
    }

    fn hit(&self) -> bool {
        self.rest & KEY_HIT != 0
    }
}

/// The lanes of `tags` that may equal `tag`, as their top bits: every equal lane is set, and
/// the lowest set lane is an equal one (a lane above an equal one may be set without being
/// equal: the borrow of the zero test runs on; a candidate's key is compared anyway). No lane
/// is set when none is equal, so a miss costs three word operations.
#[inline(always)]
fn tag_mask(tags: u32, tag: u8) -> u32 {
    let x = tags ^ (LANES_ONE * u32::from(tag));
    x.wrapping_sub(LANES_ONE) & !x & LANES_HIGH
}

/// Bytes from which a mapping gets its own huge pages (smaller tables are not worth it).
const HUGE_PAGE: usize = 2 << 20;

/// Types for which all-zero bytes are a valid value (and the empty table's contents).
///
/// # Safety
/// All-zero bytes must be a valid value of the type, and the type must own no resources.
unsafe trait ZeroValid: Copy {}

// SAFETY: all-zero bytes are an integer 0.
unsafe impl ZeroValid for u32 {}
// SAFETY: a `KeySlot` is two integers.
unsafe impl ZeroValid for KeySlot {}
// SAFETY: a `CtEntry` is integers and `bool`s, for which zero bytes are 0 and false.
unsafe impl ZeroValid for CtEntry {}

/// A zero-filled array in an anonymous mapping, advised for transparent huge pages when it
/// is large: the table's lookups land on random pages, and with 4 KiB pages nearly every one
/// missed the TLB.
struct ZeroedArray<T: ZeroValid> {
    /// The first element (huge-page aligned when large), kept so that a lookup need not ask
    /// the mapping.
    first: NonNull<T>,
    len: usize,
    /// Owns the memory `first` points into.
    _map: MmapMut,
}

// SAFETY: the array owns its elements exclusively (as a `Vec` does); the pointer is only a
// cached address into its own mapping.
unsafe impl<T: ZeroValid + Send> Send for ZeroedArray<T> {}
// SAFETY: shared access gives only `&[T]` (`get`); mutation needs `&mut self`.
unsafe impl<T: ZeroValid + Sync> Sync for ZeroedArray<T> {}

impl<T: ZeroValid> ZeroedArray<T> {
    fn new(len: usize) -> ZeroedArray<T> {
        let bytes = len.saturating_mul(size_of::<T>()).max(1);
        let huge = bytes >= HUGE_PAGE;
        let map_len = if huge {
            bytes.saturating_add(HUGE_PAGE)
        } else {
            bytes
        };
        // `usize::MAX` stands for sizes beyond the address space.
        if map_len == usize::MAX {
            out_of_memory(map_len);
        }
        let mut map = MmapMut::map_anon(map_len).unwrap_or_else(|_| out_of_memory(map_len));
        let addr = map.as_ptr() as usize;
        let offset = if huge {
            addr.next_multiple_of(HUGE_PAGE) - addr
        } else {
            0
        };
        #[cfg(target_os = "linux")]
        if huge {
            // Only advice: without transparent huge pages the table works the same, slower.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        // In bounds: `offset < HUGE_PAGE` when the mapping has `HUGE_PAGE` bytes extra.
        let first = map.as_mut_ptr().wrapping_add(offset).cast::<T>();
        let Some(first) = NonNull::new(first) else {
            out_of_memory(map_len);
        };
        ZeroedArray {
            first,
            len,
            _map: map,
        }
    }

    #[inline(always)]
    fn get(&self) -> &[T] {
        // SAFETY: `first` points `offset` bytes into the mapping, which holds
        // `offset + len * size_of::<T>()` bytes (`new`; no more than the address space, so
        // less than isize::MAX) and lives as long as `self`; it is page aligned and `offset`
        // a multiple of the page size, so the elements are aligned (`T` is no more than page
        // aligned); its bytes are zero (valid: `ZeroValid`) or were written as `T` values
        // through `get_mut`; the borrow of `self` keeps `get_mut` from aliasing.
        unsafe { std::slice::from_raw_parts(self.first.as_ptr(), self.len) }
    }

    #[inline(always)]
    fn get_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `get`; the mutable borrow of `self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.first.as_ptr(), self.len) }
    }
}

/// What a `Vec` does when memory runs out: abort with a message.
#[cold]
fn out_of_memory(bytes: usize) -> ! {
    std::alloc::handle_alloc_error(
        std::alloc::Layout::from_size_align(bytes.min(isize::MAX as usize), 1)
            .unwrap_or(std::alloc::Layout::new::<u8>()),
    )
}

impl<T: ZeroValid> Clone for ZeroedArray<T> {
    fn clone(&self) -> ZeroedArray<T> {
        let mut a = ZeroedArray::new(self.len);
        a.get_mut().copy_from_slice(self.get());
        a
    }
}

/// The connection table.
#[derive(Clone)]
pub struct ConnTable {
    buckets: u32,
    ways: u32,
    /// The full entries.
    entries: ZeroedArray<CtEntry>,
    /// What lookups compare, one per entry, and the hit bits.
    keys: ZeroedArray<KeySlot>,
    /// `ways.div_ceil(4)` words per bucket: the tag of way `4g + i` in bits `8i..8i + 8` of
    /// word `g`; 0 for invalid entries and the lanes past the last way.
    tags: ZeroedArray<u32>,
    tag_words: u32,
    valid: u32,
}

impl fmt::Debug for ConnTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnTable")
            .field("buckets", &self.buckets)
            .field("ways", &self.ways)
            .field("valid", &self.valid)
            .finish_non_exhaustive()
    }
}

/// The tag of a TUPLE5 flow hash: its low 8 bits (the bucket index comes from the high
/// bits), never 0.
#[inline]
pub fn tag_of(tuple5_hash: u32) -> u8 {
    tuple5_hash as u8 | 1
}

/// The tag an entry gets in the table.
fn entry_tag(e: &CtEntry) -> u8 {
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
        let tag_words = ways.div_ceil(TAGS_PER_WORD as u32);
        ConnTable {
            buckets,
            ways,
            entries: ZeroedArray::new(len),
            keys: ZeroedArray::new(len),
            tags: ZeroedArray::new(buckets as usize * tag_words as usize),
            tag_words,
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
        self.entries.len as u32
    }

    /// Whether the table has no entry slots (never: at least 1 × 1).
    pub fn is_empty(&self) -> bool {
        self.entries.len == 0
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

    /// The lowest way of `bucket` holding a valid entry for exactly this 5-tuple, found by
    /// comparing every way's full entry (the documented rule, without tags or key slots).
    pub fn lookup_in(&self, bucket: u32, key: &FlowKey) -> Option<u32> {
        let ways = self.ways as usize;
        let start = bucket as usize * ways;
        self.entries
            .get()
            .get(start..start + ways)?
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
        let probe = ProbeKey::new(
            key.protocol,
            key.src_addr,
            key.src_port,
            key.dst_addr,
            key.dst_port,
        );
        self.probe(self.bucket_of(h), tag_of(h), &probe, |e| {
            entry_matches(e, key)
        })
        .map(|(i, _)| i)
    }

    /// The pipeline's lookup: the same answer as [`ConnTable::lookup_in`], where `tag` is
    /// [`tag_of`] the TUPLE5 hash of the flow and `key` its probe key; key slots are compared
    /// only where tags match, full entries only for wide (IPv6) flows, with `matches`, which
    /// must be true exactly for valid entries of the flow. Returns the entry's index and
    /// backend.
    #[inline]
    pub(crate) fn probe(
        &self,
        bucket: u32,
        tag: u8,
        key: &ProbeKey,
        matches: impl Fn(&CtEntry) -> bool,
    ) -> Option<(u32, u16)> {
        // The first word (all ways of the profiles) in line; the others out of the way.
        let start = bucket as usize * self.ways as usize;
        let candidates = self.candidates(bucket, tag);
        self.probe_word(candidates, start, key, &matches)
            .or_else(|| {
                if self.tag_words > 1 {
                    self.probe_more_words(bucket, start, tag, key, &matches)
                } else {
                    None
                }
            })
    }

    /// The ways of a bucket's first tag word whose tag may be `tag` (see [`tag_mask`]).
    #[inline(always)]
    fn candidates(&self, bucket: u32, tag: u8) -> u32 {
        let first_word = bucket as usize * self.tag_words as usize;
        self.tags
            .get()
            .get(first_word)
            .map_or(0, |&word| tag_mask(word, tag))
    }

    /// The candidates of one tag word (`tag_mask`), in way order; `start` is the index of
    /// the word's first way.
    #[inline(always)]
    fn probe_word(
        &self,
        candidates: u32,
        start: usize,
        key: &ProbeKey,
        matches: &impl Fn(&CtEntry) -> bool,
    ) -> Option<(u32, u16)> {
        // Padding lanes hold 0, which no tag equals.
        let mut m = candidates;
        while m != 0 {
            let index = start + (m.trailing_zeros() / TAG_BITS) as usize;
            let slot = self.keys.get().get(index)?;
            if key.admits(slot) && (!key.is_wide() || self.full_match(index, matches)) {
                return Some((index as u32, slot.backend()));
            }
            m &= m - 1;
        }
        None
    }

    /// The full comparison of a wide flow's candidate.
    #[cold]
    #[inline(never)]
    fn full_match(&self, index: usize, matches: &impl Fn(&CtEntry) -> bool) -> bool {
        self.entries.get().get(index).is_some_and(matches)
    }

    /// The tag words after the first (more than four ways).
    #[cold]
    #[inline(never)]
    fn probe_more_words(
        &self,
        bucket: u32,
        start: usize,
        tag: u8,
        key: &ProbeKey,
        matches: &impl Fn(&CtEntry) -> bool,
    ) -> Option<(u32, u16)> {
        let first_word = bucket as usize * self.tag_words as usize;
        (1..self.tag_words as usize).find_map(|group| {
            let word = *self.tags.get().get(first_word + group)?;
            let start = start + group * TAGS_PER_WORD;
            self.probe_word(tag_mask(word, tag), start, key, matches)
        })
    }

    /// Starts fetching the tags of a bucket (a batch does this for all its packets before it
    /// looks any up).
    #[inline]
    pub(crate) fn prefetch_tags(&self, bucket: u32) {
        let tags = self.tags.get().as_ptr();
        // A prefetch never faults: no bounds check needed.
        prefetch(tags.wrapping_add(bucket as usize * self.tag_words as usize));
    }

    /// Starts fetching the key slot of the lowest way of a bucket whose tag may be `tag` (once
    /// the tags are at hand; with four ways that is the bucket's line); only the first four
    /// ways are looked at (all of the profiles').
    #[inline]
    pub(crate) fn prefetch_candidates(&self, bucket: u32, tag: u8) {
        let m = self.candidates(bucket, tag);
        if m != 0 {
            let index =
                bucket as usize * self.ways as usize + (m.trailing_zeros() / TAG_BITS) as usize;
            // A prefetch never faults: no bounds check needed.
            prefetch(self.keys.get().as_ptr().wrapping_add(index));
        }
    }

    /// One entry.
    pub fn entry(&self, index: u32) -> Option<&CtEntry> {
        self.entries.get().get(index as usize)
    }

    /// Replaces one entry (what the register block's WRITE command does); its hit bit stays.
    pub fn write(&mut self, index: u32, entry: CtEntry) -> Result<(), CtError> {
        let len = self.len();
        let i = index as usize;
        let (Some(old), Some(slot)) = (
            self.entries.get_mut().get_mut(i),
            self.keys.get_mut().get_mut(i),
        ) else {
            return Err(CtError::OutOfRange { index, len });
        };
        match (old.valid, entry.valid) {
            (false, true) => self.valid += 1,
            (true, false) => self.valid -= 1,
            _ => {}
        }
        *old = entry;
        *slot = KeySlot::of(&entry, slot.hit());
        let ways = self.ways as usize;
        let way = i % ways;
        let word = i / ways * self.tag_words as usize + way / TAGS_PER_WORD;
        let shift = TAG_BITS * (way % TAGS_PER_WORD) as u32;
        if let Some(t) = self.tags.get_mut().get_mut(word) {
            *t = *t & !(0xff << shift) | u32::from(entry_tag(&entry)) << shift;
        }
        Ok(())
    }

    /// Sets the hit bit of an entry (the pipeline, on a hit).
    #[inline]
    pub fn mark_hit(&mut self, index: u32) {
        if let Some(s) = self.keys.get_mut().get_mut(index as usize) {
            // Only a change dirties the line.
            if s.rest & KEY_HIT == 0 {
                s.rest |= KEY_HIT;
            }
        }
    }

    /// Reads and clears the hit bits of the 32 entries at `index & !31`.
    pub fn take_hits(&mut self, index: u32) -> u32 {
        let first = (index & !31) as usize;
        let keys = self.keys.get_mut();
        let Some(group) = keys.get_mut(first..keys.len().min(first + 32)) else {
            return 0;
        };
        group.iter_mut().enumerate().fold(0, |bits, (i, s)| {
            let hit = s.hit();
            // Written only when set: an entry never hit is never written, so the pages of a
            // large table nothing touched stay unbacked (a u280 table's first ageing pass
            // dirtied all of them, about 2.5 s of page zeroing).
            if hit {
                s.rest &= !KEY_HIT;
            }
            bits | u32::from(hit) << i
        })
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
                .find(|&i| self.entry(i).is_some_and(|e| !e.valid))
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
        let entry = self.entries.get_mut().get_mut(i as usize)?;
        entry.flags |= CT_FLAG_CLOSED;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys from a small space so that writes collide; `k` picks protocol, port and client.
    fn key(k: u32) -> FlowKey {
        tuple5_key(
            if k.is_multiple_of(2) { 6 } else { 17 },
            0xffff_c633_6400 + u128::from(k / 6),
            1000 + (k / 2 % 3) as u16,
            0xffff_cb00_7101,
            80,
        )
    }

    fn entry_of(k: &FlowKey, backend: u16) -> CtEntry {
        CtEntry {
            valid: true,
            protocol: k.protocol,
            src_port: k.src_port,
            dst_port: k.dst_port,
            src_addr: k.src_addr,
            dst_addr: k.dst_addr,
            backend,
            ..CtEntry::default()
        }
    }

    /// Four key slots to a line, and every bucket of four ways starts a line.
    #[test]
    fn a_four_way_bucket_is_one_line_of_key_slots() {
        assert_eq!(size_of::<KeySlot>(), 16);
        assert_eq!(align_of::<KeySlot>(), 16);
        for buckets in [1, 1 << 16] {
            let t = ConnTable::new(buckets, 4);
            assert_eq!(t.keys.get().as_ptr() as usize % 64, 0, "{buckets} buckets");
        }
    }

    /// Flows whose key slots look alike: IPv4, IPv6 with the same low 32 bits in either
    /// address, IPv4-mapped addresses in an IPv6 flow. Key slots and the full comparison of
    /// every way give the same answers, for tables of one and of several tag words.
    #[test]
    fn key_slots_agree_with_full_entries_for_look_alike_addresses() {
        let prefixes = [
            0xffff_0000_0000u128,
            0x2001_0db8_0000_0000_0000_0000_0000_0000,
            0x2001_0db8_0000_0000_0000_ffff_0000_0000,
            0x0000_0000_0000_0000_0001_ffff_0000_0000,
            0,
            0xfffe_0000_0000,
        ];
        let n = prefixes.len() as u32;
        let space: Vec<FlowKey> = (0..n * n * 4)
            .map(|k| {
                let src = prefixes[(k % n) as usize] | 0xc633_6401;
                let dst = prefixes[(k / n % n) as usize] | 0xcb00_7101;
                let protocol = if (k / (n * n)).is_multiple_of(2) {
                    6
                } else {
                    17
                };
                tuple5_key(protocol, src, 1000 + (k / (2 * n * n)) as u16, dst, 80)
            })
            .collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (buckets, ways) in [(1, 4), (2, 4), (1, 9)] {
            let mut t = ConnTable::new(buckets, ways);
            for _ in 0..300 {
                let k = space[next() as usize % space.len()];
                let e = CtEntry {
                    valid: next() % 4 != 0,
                    ..entry_of(&k, next() as u16)
                };
                t.write(next() as u32 % t.len(), e).expect("in range");
                for f in &space {
                    let bucket = t.bucket_of(f.hash());
                    let found = t.lookup(f);
                    assert_eq!(found, t.lookup_in(bucket, f), "{buckets}x{ways} {f:?}");
                    if let Some(i) = found {
                        assert_eq!(t.entry(i).map(|e| e.src_addr), Some(f.src_addr));
                    }
                }
            }
        }
    }

    /// More ways than one tag word holds: the tag-filtered lookup still gives the lowest
    /// way that the full comparison of every way finds.
    #[test]
    fn tags_agree_with_the_full_comparison_for_any_ways() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (buckets, ways) in [(1, 1), (2, 5), (1, 9), (3, 17)] {
            let mut t = ConnTable::new(buckets, ways);
            for _ in 0..400 {
                let k = key(next() as u32 % 40);
                let index = next() as u32 % t.len();
                let valid = next() % 4 != 0;
                let e = CtEntry {
                    valid,
                    ..entry_of(&k, next() as u16)
                };
                t.write(index, e).expect("in range");
                for q in 0..40 {
                    let f = key(q);
                    let bucket = t.bucket_of(f.hash());
                    assert_eq!(
                        t.lookup(&f),
                        t.lookup_in(bucket, &f),
                        "{buckets}x{ways} {f:?}"
                    );
                }
            }
        }
    }

    /// Keys whose tags are equal are told apart by the full comparison.
    #[test]
    fn equal_tags_compare_full_keys() {
        let mut by_tag = std::collections::HashMap::new();
        let (a, b) = (0..100_000u32)
            .map(|i| {
                tuple5_key(
                    6,
                    0xffff_0a00_0000 + u128::from(i),
                    4000,
                    0xffff_cb00_7101,
                    443,
                )
            })
            .find_map(|k| by_tag.insert(tag_of(k.hash()), k).map(|other| (other, k)))
            .expect("a tag collision among 100k keys");
        assert_ne!(a, b);
        let mut t = ConnTable::new(1, 4);
        t.write(0, entry_of(&b, 1)).expect("in range");
        t.write(2, entry_of(&a, 2)).expect("in range");
        assert_eq!(t.lookup(&a), Some(2));
        assert_eq!(t.lookup(&b), Some(0));
        t.write(0, CtEntry::default()).expect("in range");
        assert_eq!(t.lookup(&b), None);
        assert_eq!(t.lookup(&a), Some(2));
    }

    /// Tag 1 next to an empty way (tag 0) is where the word-wise test flags a lane that is
    /// not equal; the full comparison still decides.
    #[test]
    fn a_flagged_lane_that_is_not_equal_does_not_hit() {
        let mut ones = (0..1_000_000u32)
            .map(|i| {
                tuple5_key(
                    17,
                    0xffff_0a00_0000 + u128::from(i),
                    53,
                    0xffff_cb00_7101,
                    53,
                )
            })
            .filter(|k| tag_of(k.hash()) == 1);
        let (a, b) = (
            ones.next().expect("a key of tag 1"),
            ones.next().expect("another"),
        );
        let mut t = ConnTable::new(1, 4);
        t.write(1, entry_of(&a, 7)).expect("in range");
        assert_ne!(tag_mask(t.tags.get()[0], 1) >> 16, 0, "lane 2 flagged");
        assert_eq!(t.lookup(&a), Some(1));
        assert_eq!(t.lookup(&b), None);
        t.write(3, entry_of(&b, 8)).expect("in range");
        assert_eq!(t.lookup(&b), Some(3));
        assert_eq!(t.lookup(&a), Some(1));
    }

    #[test]
    fn hit_bits_outlive_writes_and_clear_when_read() {
        let mut t = ConnTable::new(10, 4);
        t.mark_hit(5);
        t.mark_hit(37);
        t.mark_hit(40); // beyond the table: ignored
        t.write(37, entry_of(&key(1), 3)).expect("in range");
        assert_eq!(t.take_hits(3), 1 << 5);
        assert_eq!(t.take_hits(0), 0);
        // The last group is partial (entries 32..40).
        assert_eq!(t.take_hits(39), 1 << 5);
        assert_eq!(t.take_hits(39), 0);
        assert_eq!(t.take_hits(1000), 0);
    }

    /// A table large enough for its own huge pages starts empty; a clone is a copy.
    #[test]
    fn large_tables_start_empty_and_clone_as_copies() {
        let mut t = ConnTable::new(1 << 16, 4);
        let last = t.len() - 1;
        assert_eq!(t.entry(last), Some(&CtEntry::default()));
        let k = key(7);
        let ev = LearnEvent {
            event: nlb_hw::enums::Event::Learn,
            protocol: k.protocol,
            src_port: k.src_port,
            dst_port: k.dst_port,
            src_addr: k.src_addr,
            dst_addr: k.dst_addr,
            backend: 9,
            rule: 1,
            flow_hash: k.hash(),
        };
        let i = t.install(&ev, 5).expect("free way");
        t.mark_hit(i);
        let c = t.clone();
        assert!(t.remove(&k));
        assert_eq!(t.lookup(&k), None);
        assert_eq!(c.lookup(&k), Some(i));
        assert_eq!(c.entry(i).map(|e| e.backend), Some(9));
        assert_eq!(c.valid_count(), 1);
        let mut c = c;
        assert_eq!(c.take_hits(i), 1 << (i % 32));
    }
}
