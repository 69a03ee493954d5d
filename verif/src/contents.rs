//! Table contents the register map allows, not only what the compiler writes: generators for
//! every table (docs/pipeline.md §4-§8, the entry layouts of `hw/regmap.toml`) and the probes
//! that exercise them.
//!
//! The compiler lays tables out one way (disjoint port ranges in port order in adjacent slots,
//! one entry per key, prime slices of moderate size); the RTL must follow the contract for any
//! contents a driver, another compiler or the host interface may write. [`generate`] builds a
//! bank where:
//!
//! - **VIP entries** sit in the bucket of their key, in any way, among decoys in the same
//!   bucket: an invalid entry of the same key, the same address under another protocol, an
//!   address differing in exactly one 32-bit word, a valid duplicate of the key in a higher
//!   way (the lowest way wins); some keys have only decoys. Buckets 0, the last and others with
//!   the top bit set are used.
//! - **Port slots** are random: each slot valid or not (invalid slots hold ranges too, often
//!   ones holding the probed ports), ranges overlapping in any order (nested around a few
//!   centres, either wider or narrower first), empty ranges (`lo > hi`), single ports, the
//!   whole range; rule ids distinct per entry, so the rule a packet reports names the slot.
//!   Entries with exactly one valid slot (anywhere, invalid ones around it) and none serve
//!   later fragments.
//! - **Rule, ACL, pool and backend entries** are random legal entries (every field random in
//!   its width, enumerations defined); ids past a table (slot rule 256 + r, rule pool 128 + p,
//!   backend 4096 + b) alias valid entries if a bit is dropped; ids with their top bits set
//!   (rules 128-255, pools 64-127, backends 2048-4095) and every table's last entry are used.
//! - **Maglev slices** of 65,537 slots (at slot 0, and ending at the slot memory's last slot),
//!   of 131,071 (the largest `maglev_size` holds: 17 bits; at 0, reaching the last slot, and
//!   running 15 slots past the memory), of 65,536, of one slot at the last slot, a base with
//!   its top bit set and one just past the memory (the slots a dropped bit would alias hold
//!   valid backends), an empty slice; probes are steered (by the client port or address) to
//!   the indices that matter: the last of the slice, indices with bit 16 set, the slots past
//!   the memory.
//! - **Connection entries** around probed flows: in the flow's bucket, an entry differing
//!   from the flow in exactly one field (protocol, either port, any word of either address,
//!   the valid bit) in a lower way than the flow's own entry, or with no entry of the flow
//!   (a miss); duplicates (the lowest way wins); entries of other flows; `rule`, `flags` and
//!   `timestamp` random (not compared); buckets 0, the last and with the top bit set, the
//!   table's last entry.
//!
//! Nothing here predicts a verdict: the tests ask the golden model and the reference, and
//! count what happened into [`bins`] from the reference's trace of each packet.

use crate::frames::{Ext, FrameSpec, Ip, L4};
use crate::scenario::{is_mapped, mapped, Flow};
use nlb_hw::enums::{Affinity, Delivery, KeyType};
use nlb_hw::hash::table_index;
use nlb_hw::layouts::{
    AclEntry, AclPrefix, BackendEntry, CtEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry,
    VipEntry,
};
use nlb_hw::{FlowKey, Profile, Tables};
use nlb_reference::trace::{ConnStep, SlotOutcome, Step, Trace};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// TCP, UDP.
const TCP: u8 = 6;
const UDP: u8 = 17;

/// How a probe's packet is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A whole packet.
    Whole,
    /// The first fragment (ports present, more-fragments set).
    FirstFragment,
    /// A later fragment (no ports).
    LaterFragment,
}

/// One packet to send: its flow (ports 0 for a portless protocol), how it is cut, its TCP
/// flags, and what it aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// The flow, client → VIP.
    pub flow: Flow,
    /// Whole or a fragment.
    pub shape: Shape,
    /// TCP flags (ignored for other protocols).
    pub tcp_flags: u8,
    /// What the probe aims at (printed with a failure).
    pub what: &'static str,
}

/// Which Maglev slots to fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotFill {
    /// Every slot of the memory (a bench that plays the memories).
    All,
    /// Only the slots the probes read, and the slots a dropped bit would alias (a bench that
    /// loads them through the registers); the others name backend 0, which is invalid, so a
    /// wrong slot shows as another backend or `NO_BACKEND`.
    Probed,
}

/// A bank, the connection entries to install and the probes.
#[derive(Debug, Clone)]
pub struct Contents {
    /// The bank.
    pub tables: Tables,
    /// Connection-table entries (index, entry).
    pub conntrack: Vec<(u32, CtEntry)>,
    /// The packets to send.
    pub probes: Vec<Probe>,
}

/// A field of a connection entry that a decoy changes (exactly one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CtField {
    /// The valid bit (cleared, the rest equal).
    Valid,
    /// The protocol.
    Protocol,
    /// The client (source) port.
    SrcPort,
    /// The VIP (destination) port.
    DstPort,
    /// A 32-bit word of the client address (0 = bits 31..0).
    SrcWord(u8),
    /// A 32-bit word of the VIP address.
    DstWord(u8),
}

impl CtField {
    /// Every field a decoy can differ in.
    pub const ALL: [CtField; 12] = [
        CtField::Valid,
        CtField::Protocol,
        CtField::SrcPort,
        CtField::DstPort,
        CtField::SrcWord(0),
        CtField::SrcWord(1),
        CtField::SrcWord(2),
        CtField::SrcWord(3),
        CtField::DstWord(0),
        CtField::DstWord(1),
        CtField::DstWord(2),
        CtField::DstWord(3),
    ];

    /// Its name in the bins.
    pub fn name(self) -> String {
        match self {
            CtField::Valid => "the valid bit".into(),
            CtField::Protocol => "the protocol".into(),
            CtField::SrcPort => "the client port".into(),
            CtField::DstPort => "the VIP port".into(),
            CtField::SrcWord(k) => format!("client address word {k}"),
            CtField::DstWord(k) => format!("VIP address word {k}"),
        }
    }
}

/// A 128-bit value with 32-bit word `k` XORed with a non-zero value.
fn flip_word(rng: &mut StdRng, v: u128, k: u8) -> u128 {
    let x = rng.random_range(1..=u32::MAX);
    v ^ (u128::from(x) << (32 * u32::from(k)))
}

/// `e` changed in exactly `field` (and only there).
pub fn ct_decoy(rng: &mut StdRng, e: &CtEntry, field: CtField) -> CtEntry {
    let mut d = *e;
    match field {
        CtField::Valid => d.valid = false,
        CtField::Protocol => {
            d.protocol = match rng.random_range(0..3) {
                0 if e.protocol == TCP => UDP,
                0 => TCP,
                1 => e.protocol ^ (1 << rng.random_range(0..8)),
                _ => e.protocol.wrapping_add(rng.random_range(1..=255)),
            }
        }
        CtField::SrcPort => d.src_port ^= rng.random_range(1..=u16::MAX),
        CtField::DstPort => d.dst_port ^= rng.random_range(1..=u16::MAX),
        CtField::SrcWord(k) => d.src_addr = flip_word(rng, e.src_addr, k),
        CtField::DstWord(k) => d.dst_addr = flip_word(rng, e.dst_addr, k),
    }
    d
}

/// The one field in which `e` differs from the flow `key` (a TUPLE5 key), `None` when it
/// holds the flow (valid and equal) or differs in more than one.
pub fn ct_difference(e: &CtEntry, key: &FlowKey) -> Option<CtField> {
    let mut diff = Vec::new();
    if !e.valid {
        diff.push(CtField::Valid);
    }
    if e.protocol != key.protocol {
        diff.push(CtField::Protocol);
    }
    if e.src_port != key.src_port {
        diff.push(CtField::SrcPort);
    }
    if e.dst_port != key.dst_port {
        diff.push(CtField::DstPort);
    }
    for k in 0..4u8 {
        let w = |v: u128| (v >> (32 * u32::from(k))) as u32;
        if w(e.src_addr) != w(key.src_addr) {
            diff.push(CtField::SrcWord(k));
        }
        if w(e.dst_addr) != w(key.dst_addr) {
            diff.push(CtField::DstWord(k));
        }
    }
    match diff.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// Whether `e` is valid and holds the flow of the TUPLE5 `key`.
pub fn holds_flow(e: &CtEntry, key: &FlowKey) -> bool {
    e.valid
        && e.protocol == key.protocol
        && e.src_port == key.src_port
        && e.dst_port == key.dst_port
        && e.src_addr == key.src_addr
        && e.dst_addr == key.dst_addr
}

/// The connection-table entry of a flow, to `backend`, with `rule`, `flags` and `timestamp`
/// random (the pipeline does not compare them).
fn ct_of(rng: &mut StdRng, f: &Flow, backend: u16) -> CtEntry {
    CtEntry {
        valid: true,
        protocol: f.protocol,
        src_port: f.client_port,
        dst_port: f.vip_port,
        src_addr: f.client,
        dst_addr: f.vip,
        backend,
        rule: rng.random_range(0..4096),
        flags: rng.random(),
        timestamp: rng.random(),
    }
}

// ---- the generator ------------------------------------------------------------------------

/// A Maglev slice aimed at, with the pool that serves it.
#[derive(Debug, Clone, Copy)]
struct Slice {
    pool: u16,
    base: u32,
    size: u32,
    /// Probe indices: (predicate on the index, what).
    aims: &'static [(Aim, &'static str)],
}

/// An index of a slice a probe is steered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    /// Any index.
    Any,
    /// The slice's last index.
    Last,
    /// An index with bit 16 set.
    Bit16,
    /// An index whose slot lies past the slot memory.
    PastMemory,
    /// The index whose slot is the first past the slot memory (a range check one off reads
    /// slot 0 there).
    FirstPast,
}

fn aim_holds(aim: Aim, s: &Slice, index: u32, slots: u32) -> bool {
    match aim {
        Aim::Any => true,
        Aim::Last => index + 1 == s.size,
        Aim::Bit16 => index & 0x1_0000 != 0,
        Aim::PastMemory => u64::from(s.base) + u64::from(index) >= u64::from(slots),
        Aim::FirstPast => u64::from(s.base) + u64::from(index) == u64::from(slots),
    }
}

struct Gen<'a> {
    p: &'static Profile,
    rng: &'a mut StdRng,
    t: Tables,
    probes: Vec<Probe>,
    clients4: Vec<u128>,
    clients6: Vec<u128>,
    /// Valid backend ids.
    backends: Vec<u16>,
    /// Valid pool ids of the random part.
    pools: Vec<u16>,
    /// Rule ids reserved for the Maglev slices (not used by the random VIPs).
    maglev_rules: BTreeSet<u16>,
    /// The VIP entry of the Maglev slices (the VIP table's last), left alone by the others.
    maglev_vip: Option<usize>,
}

/// Picks one element.
fn pick<T: Copy>(rng: &mut StdRng, v: &[T]) -> T {
    v[rng.random_range(0..v.len())]
}

/// A random permutation of `0..n`.
fn permutation(rng: &mut StdRng, n: u16) -> Vec<u16> {
    let mut v: Vec<u16> = (0..n).collect();
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
    v
}

impl Gen<'_> {
    fn client(&mut self, v6: bool) -> u128 {
        if v6 {
            pick(self.rng, &self.clients6)
        } else {
            pick(self.rng, &self.clients4)
        }
    }

    /// Backends: random legal entries at ids across the table (the last one, ids with bit
    /// 11 set), some invalid with random contents; backend 0 stays invalid and empty.
    fn backends(&mut self) {
        let n = self.p.backends;
        let mut ids: BTreeSet<u16> = [n - 1, n / 2, n / 2 + 1, 1, 2].map(|x| x as u16).into();
        while ids.len() < 200 {
            ids.insert(self.rng.random_range(1..n) as u16);
        }
        for id in ids {
            let v6 = self.rng.random_bool(0.4);
            let e = BackendEntry {
                valid: self.rng.random_bool(0.9) || id == (n - 1) as u16,
                is_ipv6: v6,
                addr: if v6 || self.rng.random_bool(0.1) {
                    0x2001_0db8_00b0_0000_0000_0000_0000_0000 | u128::from(self.rng.random::<u64>())
                } else {
                    mapped(self.rng.random())
                },
                mac: self.rng.random_range(0..1u64 << 48),
            };
            if e.valid {
                self.backends.push(id);
            }
            self.t.backends[usize::from(id)] = e;
        }
    }

    /// A backend id for a slot or connection entry: mostly valid, now and then invalid (0),
    /// or past the table aliasing a valid one.
    fn backend_ref(&mut self) -> u16 {
        let b = pick(self.rng, &self.backends);
        match self.rng.random_range(0..40) {
            0 => 0,
            1 => b + self.p.backends as u16,
            _ => b,
        }
    }

    /// A random legal pool entry (slice set later).
    fn pool_entry(&mut self) -> PoolEntry {
        PoolEntry {
            valid: true,
            affinity: Affinity::ALL[self.rng.random_range(0..Affinity::ALL.len())],
            delivery: Delivery::ALL[self.rng.random_range(0..Delivery::ALL.len())],
            maglev_base: 0,
            maglev_size: 0,
            backup_pool: self.rng.random_range(0..4096),
            has_backup: self.rng.random(),
            failover_ratio: self.rng.random_range(0..1024),
            failed_over: self.rng.random(),
            track: self.rng.random(),
            idle_timeout: self.rng.random(),
        }
    }

    /// Pools of the random part: random entries with small slices anywhere in the memory.
    fn pools(&mut self) {
        let n = self.p.pools as u16;
        let mut ids: BTreeSet<u16> = [n - 1, n / 2, 0, 1].into();
        while ids.len() < 40 {
            ids.insert(self.rng.random_range(0..n - 16));
        }
        for id in ids {
            let mut e = self.pool_entry();
            let size = match self.rng.random_range(0..6) {
                0 => 1,
                1 => 2,
                2 => 13,
                _ => self.rng.random_range(3..4000),
            };
            e.maglev_size = size;
            e.maglev_base = self.rng.random_range(0..self.p.maglev_slots - size);
            if self.rng.random_bool(0.08) {
                e.valid = false;
            } else {
                self.pools.push(id);
            }
            self.t.pools[usize::from(id)] = e;
        }
    }

    /// Rules: every id random (valid or not, an ACL or not, a pool or an id past the table
    /// aliasing a valid pool), except the ones reserved for the Maglev slices.
    fn rules(&mut self) {
        for id in 0..self.p.rules as u16 {
            if self.maglev_rules.contains(&id) {
                continue;
            }
            let pool = match self.rng.random_range(0..20) {
                0 => pick(self.rng, &self.pools) + self.p.pools as u16,
                1 => 4095,
                _ => pick(self.rng, &self.pools),
            };
            let acl = self.rng.random_bool(0.2);
            self.t.rules[usize::from(id)] = RuleEntry {
                valid: self.rng.random_bool(0.9),
                acl_enabled: acl,
                pool,
            };
            if acl {
                let e = self.acl_entry();
                self.t.acl[usize::from(id)] = e;
            }
        }
    }

    /// A random ACL: prefixes around the probes' clients (of any length, lengths past 128
    /// too), valid or not, and random ones.
    fn acl_entry(&mut self) -> AclEntry {
        let mut e = AclEntry::default();
        for pf in e.prefix.iter_mut() {
            let v6 = self.rng.random_bool(0.4);
            let len: u8 = match self.rng.random_range(0..8) {
                0 => 0,
                1 => 128,
                2 => self.rng.random_range(129..=255),
                3 if !v6 => 96 + self.rng.random_range(0..=32),
                _ => self.rng.random_range(1..128),
            };
            let addr = if self.rng.random_bool(0.75) {
                let c = self.client(v6);
                // A prefix of the client, or one bit past it.
                let c = if self.rng.random_bool(0.3) && (1..=128).contains(&len) {
                    c ^ (1u128 << (128 - u32::from(len)))
                } else {
                    c
                };
                if len == 0 || len > 128 {
                    c
                } else {
                    c & (u128::MAX << (128 - u32::from(len)))
                }
            } else {
                self.rng.random()
            };
            *pf = AclPrefix {
                valid: self.rng.random_bool(0.6),
                prefix_len: len,
                addr,
            };
        }
        e
    }

    /// 16 random port slots with rule ids distinct within the entry.
    fn slots(&mut self, valid_p: f64) -> [PortSlot; 16] {
        let rules: Vec<u16> = permutation(self.rng, self.p.rules as u16)
            .into_iter()
            .filter(|r| !self.maglev_rules.contains(r))
            .take(16)
            .collect();
        let centres: Vec<u16> = (0..self.rng.random_range(1..=3))
            .map(|_| self.rng.random_range(100..65000))
            .collect();
        let mut s = [PortSlot::default(); 16];
        for (i, slot) in s.iter_mut().enumerate() {
            let (lo, hi) = match self.rng.random_range(0..12) {
                0 => (0, 65535),
                1 => {
                    let x = self.rng.random();
                    (x, x)
                }
                2 => {
                    // Empty: lo above hi.
                    let lo = self.rng.random_range(1..=65535u16);
                    (lo, self.rng.random_range(0..lo))
                }
                3 => (0, self.rng.random_range(0..100)),
                4 => (self.rng.random_range(65400..=65535), 65535),
                5 | 6 => {
                    let a: u16 = self.rng.random();
                    let b: u16 = self.rng.random();
                    (a.min(b), a.max(b))
                }
                _ => {
                    // Nested around a centre: wider or narrower than its neighbours.
                    let c = pick(self.rng, &centres);
                    let d = [0u16, 1, 3, 20, 400][self.rng.random_range(0..5)];
                    let e = [0u16, 1, 3, 20, 400][self.rng.random_range(0..5)];
                    (c - d.min(c), c.saturating_add(e))
                }
            };
            let rule = if self.rng.random_bool(0.06) {
                // Past the table: 256 + a valid rule's id (a dropped top bit aliases it).
                rules[i] + self.p.rules as u16
            } else {
                rules[i]
            };
            *slot = PortSlot {
                valid: self.rng.random_bool(valid_p),
                port_lo: lo,
                port_hi: hi,
                rule,
            };
        }
        s
    }

    /// An address of the family whose VIP key (protocol, address) lands in `bucket`.
    fn vip_in(&mut self, v6: bool, protocol: u8, bucket: u32) -> u128 {
        loop {
            let a = if v6 {
                0x2001_0db8_0f00_0000_0000_0000_0000_0000 | u128::from(self.rng.random::<u64>())
            } else {
                mapped(0x0b00_0000 | self.rng.random_range(0..0x00ff_ffffu32))
            };
            if nlb_reference::lookup::vip_bucket(self.p, protocol, a) == bucket {
                return a;
            }
        }
    }

    /// VIP entries with random slots among decoys in their bucket, and their probes.
    fn vips(&mut self, n: usize) {
        let buckets = self.p.vip_buckets;
        let ways = self.p.vip_ways as usize;
        let mut chosen: Vec<u32> = vec![0, buckets - 1, buckets / 2, buckets - 2];
        while chosen.len() < n {
            let b = self.rng.random_range(0..buckets);
            if !chosen.contains(&b) {
                chosen.push(b);
            }
        }
        for (k, &bucket) in chosen.iter().enumerate() {
            let v6 = self.rng.random_bool(0.4);
            let protocol = [TCP, UDP, TCP, UDP, 0][self.rng.random_range(0..5)];
            let addr = self.vip_in(v6, protocol, bucket);
            // Entries with one valid slot or none serve later fragments; the others have
            // about half their slots valid.
            let valid_p = match k % 7 {
                0 => 0.0,
                1 => 0.06,
                _ => 0.55,
            };
            let mut slots = self.slots(valid_p);
            if k % 7 == 1 && !slots.iter().any(|s| s.valid) {
                let at = self.rng.random_range(0..16);
                slots[at].valid = true;
            }
            let entry = VipEntry {
                valid: true,
                protocol,
                addr,
                slot: slots,
            };
            // Where the key's own entry goes (none for some keys: only decoys).
            let base = bucket as usize * ways;
            let free: Vec<usize> = (0..ways)
                .filter(|&w| self.maglev_vip != Some(base + w))
                .collect();
            let own = if k % 5 == 4 {
                None
            } else {
                Some(pick(self.rng, &free))
            };
            for w in free {
                let e = if Some(w) == own {
                    entry
                } else {
                    let mut d = entry;
                    d.slot = self.slots(0.5);
                    let above = own.is_some_and(|o| w > o);
                    // The decoy kinds in turn over the entries and ways, so every kind
                    // lands below some entry.
                    match (k + w + self.rng.random_range(0..2)) % 6 {
                        // A valid duplicate of the key above the own entry (the lowest way
                        // wins), an invalid one of the key below it.
                        0 if above => {}
                        0 => d.valid = false,
                        1 => {
                            d.protocol = match protocol {
                                TCP => pick(self.rng, &[UDP, 0, 1]),
                                UDP => pick(self.rng, &[TCP, 0, 47]),
                                _ => pick(self.rng, &[TCP, UDP, 1, 58]),
                            }
                        }
                        2..=4 => {
                            let word = ((k + 3 * w + self.rng.random_range(0..2)) % 4) as u8;
                            d.addr = flip_word(self.rng, addr, word);
                        }
                        _ => {
                            d.addr = self.rng.random();
                            d.valid = self.rng.random_bool(0.5);
                        }
                    }
                    d
                };
                self.t.vip[base + w] = e;
            }
            // Probes: every slot's ends and one past them, a port inside, 0 and 65535.
            let mut ports: Vec<u16> = vec![0, 65535];
            for s in &slots {
                ports.extend([s.port_lo, s.port_hi]);
                ports.push(s.port_lo.wrapping_sub(1));
                ports.push(s.port_hi.wrapping_add(1));
                if s.port_lo <= s.port_hi {
                    ports.push(self.rng.random_range(s.port_lo..=s.port_hi));
                }
            }
            let probes = if protocol == 0 { 10 } else { 40 };
            for _ in 0..probes {
                let port = pick(self.rng, &ports);
                let shape = match self.rng.random_range(0..10) {
                    0 | 1 => Shape::LaterFragment,
                    2 => Shape::FirstFragment,
                    _ => Shape::Whole,
                };
                let client = self.client(v6);
                let flow = if protocol == 0 {
                    let proto = if v6 {
                        pick(self.rng, &[58, 47, 50, 132, 1])
                    } else {
                        pick(self.rng, &[1, 47, 50, 132, 255])
                    };
                    Flow {
                        protocol: proto,
                        client,
                        client_port: 0,
                        vip: addr,
                        vip_port: 0,
                    }
                } else {
                    Flow {
                        protocol,
                        client,
                        client_port: self.rng.random(),
                        vip: addr,
                        vip_port: port,
                    }
                };
                self.probes.push(Probe {
                    flow,
                    shape,
                    tcp_flags: pick(self.rng, &[0x10, 0x10, 0x18, 0x11, 0x04, 0x02]),
                    what: "VIP entry and port slots from random contents",
                });
            }
            // The other protocol toward a TCP/UDP key (its lookup finds the decoys only), and
            // TCP toward a protocol-0 key.
            let other = match protocol {
                TCP => UDP,
                _ => TCP,
            };
            for _ in 0..3 {
                let client = self.client(v6);
                self.probes.push(Probe {
                    flow: Flow {
                        protocol: other,
                        client,
                        client_port: self.rng.random(),
                        vip: addr,
                        vip_port: pick(self.rng, &ports),
                    },
                    shape: Shape::Whole,
                    tcp_flags: 0x10,
                    what: "another protocol toward a VIP key",
                });
            }
        }
    }

    /// The Maglev slices at the extremes, each served by a pool with a rule of its own on one
    /// port of a VIP, and probes steered to the indices that matter.
    fn maglev(&mut self) -> Vec<Slice> {
        let slots = self.p.maglev_slots;
        let p = self.p;
        let last_pool = (p.pools - 1) as u16;
        const ANY: &[(Aim, &str)] = &[(Aim::Any, "Maglev slice, any index")];
        const BIG: &[(Aim, &str)] = &[
            (Aim::Any, "Maglev slice, any index"),
            (Aim::Bit16, "Maglev index with bit 16 set"),
            (Aim::Last, "Maglev slice's last index"),
        ];
        const PAST: &[(Aim, &str)] = &[
            (Aim::Bit16, "Maglev index with bit 16 set"),
            (Aim::PastMemory, "Maglev slot past the slot memory"),
            (Aim::FirstPast, "Maglev slot just past the slot memory"),
        ];
        // Pools of their own: the top 16 ids (bit 6 set), the last among them.
        let mut s = vec![
            Slice {
                pool: last_pool,
                base: 0,
                size: 65_537,
                aims: BIG,
            },
            Slice {
                pool: last_pool - 1,
                base: slots - 65_537,
                size: 65_537,
                aims: BIG,
            },
            Slice {
                pool: last_pool - 2,
                base: 0,
                size: (1 << 17) - 1,
                aims: BIG,
            },
            Slice {
                pool: last_pool - 3,
                base: slots - ((1 << 17) - 1),
                size: (1 << 17) - 1,
                aims: BIG,
            },
            Slice {
                pool: last_pool - 4,
                base: slots - ((1 << 17) - 1) + 15,
                size: (1 << 17) - 1,
                aims: PAST,
            },
            Slice {
                pool: last_pool - 5,
                base: 4321,
                size: 65_536,
                aims: BIG,
            },
            Slice {
                pool: last_pool - 6,
                base: slots - 1,
                size: 1,
                aims: ANY,
            },
            Slice {
                pool: last_pool - 7,
                base: 0x80_0000 | 5,
                size: 7,
                aims: ANY,
            },
            Slice {
                pool: last_pool - 8,
                base: slots + 9,
                size: 3,
                aims: ANY,
            },
            Slice {
                pool: last_pool - 9,
                base: 77,
                size: 0,
                aims: ANY,
            },
            Slice {
                pool: last_pool - 10,
                base: self.rng.random_range(0..slots - 65_537),
                size: 65_537,
                aims: BIG,
            },
        ];
        // Rules of their own: the last ids (bit 7 set), the last rule among them.
        let last_rule = (p.rules - 1) as u16;
        let v6 = false;
        let vip = self.vip_in(v6, TCP, p.vip_buckets - 1);
        let mut entry = VipEntry {
            valid: true,
            protocol: TCP,
            addr: vip,
            ..VipEntry::default()
        };
        for (i, sl) in s.iter_mut().enumerate() {
            let rule = last_rule - i as u16;
            self.maglev_rules.insert(rule);
            let mut pool = self.pool_entry();
            // The TUPLE5 key for whole packets (steered by the client port), no connection
            // table (Maglev on every packet), no ACL.
            pool.affinity = if i % 2 == 0 {
                Affinity::None
            } else {
                Affinity::ClientIpPortProto
            };
            pool.track = false;
            pool.maglev_base = sl.base;
            pool.maglev_size = sl.size;
            self.t.pools[usize::from(sl.pool)] = pool;
            self.t.rules[usize::from(rule)] = RuleEntry {
                valid: true,
                acl_enabled: false,
                pool: sl.pool,
            };
            entry.slot[i] = PortSlot {
                valid: true,
                port_lo: 7000 + i as u16,
                port_hi: 7000 + i as u16,
                rule,
            };
        }
        // The entry in the last bucket's last way (the VIP table's last entry).
        let last = (p.vip_buckets * p.vip_ways - 1) as usize;
        self.t.vip[last] = entry;
        self.maglev_vip = Some(last);
        for (i, sl) in s.iter().enumerate() {
            for &(aim, what) in sl.aims {
                for _ in 0..3 {
                    if let Some(flow) = self.steer(sl, aim, vip, 7000 + i as u16) {
                        self.probes.push(Probe {
                            flow,
                            shape: Shape::Whole,
                            tcp_flags: 0x10,
                            what,
                        });
                    }
                }
            }
        }
        s
    }

    /// A TCP flow to (vip, port) whose TUPLE5 hash gives an index of `s` that `aim` wants.
    fn steer(&mut self, s: &Slice, aim: Aim, vip: u128, port: u16) -> Option<Flow> {
        let slots = self.p.maglev_slots;
        for _ in 0..4_000_000u32 {
            let f = Flow {
                protocol: TCP,
                client: self.client(false),
                client_port: self.rng.random(),
                vip,
                vip_port: port,
            };
            if s.size == 0 {
                return Some(f);
            }
            let index = table_index(f.tuple5().hash(), s.size);
            if aim_holds(aim, s, index, slots) {
                return Some(f);
            }
        }
        None
    }
}

/// Frame bytes of a probe (no VLAN tags, a few payload bytes).
pub fn frame(p: &Probe, rng: &mut StdRng) -> Vec<u8> {
    let f = &p.flow;
    let v6 = !is_mapped(f.vip);
    let l4 = match f.protocol {
        TCP => L4::Tcp {
            sport: f.client_port,
            dport: f.vip_port,
            flags: p.tcp_flags,
        },
        UDP => L4::Udp {
            sport: f.client_port,
            dport: f.vip_port,
        },
        // Informational ICMP (echo), never an error.
        1 if !v6 => L4::Icmp {
            ty: 8,
            code: 0,
            body: Vec::new(),
        },
        58 if v6 => L4::Icmp {
            ty: 128,
            code: 0,
            body: Vec::new(),
        },
        other => L4::Other(other),
    };
    let (fragment, more, offset) = match p.shape {
        Shape::Whole => (false, false, 0),
        Shape::FirstFragment => (true, true, 0),
        Shape::LaterFragment => (true, rng.random_bool(0.5), rng.random_range(1..0x1000)),
    };
    let ip = if v6 {
        Ip::V6 {
            src: f.client,
            dst: f.vip,
            tclass: rng.random(),
            flow: rng.random_range(0..1 << 20),
            ext: if fragment {
                vec![Ext::Fragment {
                    offset,
                    more,
                    id: rng.random(),
                }]
            } else {
                Vec::new()
            },
        }
    } else {
        Ip::V4 {
            src: f.client as u32,
            dst: f.vip as u32,
            tos: rng.random(),
            id: rng.random(),
            df: !fragment && rng.random_bool(0.5),
            mf: more,
            frag_offset: offset,
            options: Vec::new(),
        }
    };
    FrameSpec {
        dst_mac: 0x0200_0000_0002,
        src_mac: 0x0200_0000_0003,
        vlans: Vec::new(),
        ip: Some(ip),
        ethertype: 0,
        l4,
        payload: rng.random_range(0..40),
        min_len: 60,
    }
    .build()
}

/// The reference's trace of one frame on `tables` with the connection table `ct` (bank 0,
/// enabled).
pub fn trace(
    tables: &Tables,
    ct: &nlb_reference::conntrack::ConnTable,
    settings: &nlb_hw::NicSettings,
    frame: &[u8],
) -> (nlb_reference::pipeline::PacketResult, Trace) {
    let ctx = nlb_reference::pipeline::Context {
        tables,
        bank: 0,
        settings,
        enabled: true,
        conntrack: ct,
    };
    let mut out = vec![0u8; nlb_reference::action::MAX_FRAME];
    let mut t = Trace::default();
    let r = nlb_reference::pipeline::process_traced(&ctx, frame, &mut out, &mut t)
        .unwrap_or_else(|e| unreachable!("an output buffer of MAX_FRAME bytes: {e}"));
    (r, t)
}

/// Generates a bank from the `profile`'s register map, its connection entries and probes.
pub fn generate(profile: &'static Profile, rng: &mut StdRng, fill: SlotFill) -> Contents {
    let clients4 = (0..8).map(|_| mapped(rng.random())).collect();
    let clients6 = (0..8)
        .map(|_| 0x2001_0db8_00c0_0000_0000_0000_0000_0000 | u128::from(rng.random::<u64>()))
        .collect();
    let mut g = Gen {
        p: profile,
        rng,
        t: Tables::empty(profile),
        probes: Vec::new(),
        clients4,
        clients6,
        backends: Vec::new(),
        pools: Vec::new(),
        maglev_rules: BTreeSet::new(),
        maglev_vip: None,
    };
    g.backends();
    g.pools();
    let slices = g.maglev();
    g.rules();
    g.vips(18);
    let conntrack = connections(&mut g);
    fill_slots(&mut g, &slices, fill);
    Contents {
        tables: g.t,
        conntrack,
        probes: g.probes,
    }
}

/// Maglev slot contents: every slot, or the ones the probes read (found by the reference's
/// trace) and the slots a dropped bit of an out-of-memory slice would alias.
fn fill_slots(g: &mut Gen<'_>, slices: &[Slice], fill: SlotFill) {
    let slots = g.p.maglev_slots as usize;
    let mut want: BTreeSet<usize> = BTreeSet::new();
    match fill {
        SlotFill::All => want.extend(0..slots),
        SlotFill::Probed => {
            let ct = nlb_reference::conntrack::ConnTable::new(g.p.ct_buckets, g.p.ct_ways);
            let settings = nlb_hw::NicSettings::default();
            let mut rng_frames = StdRng::seed_from_u64(g.rng.random());
            for p in &g.probes {
                let f = frame(p, &mut rng_frames);
                let (_, t) = trace(&g.t, &ct, &settings, &f);
                for s in &t.steps {
                    if let Step::Maglev { slot, size, .. } = s {
                        if *size > 0 {
                            // Past the memory: the slot a dropped top bit would read.
                            want.insert((*slot as usize) % slots);
                        }
                    }
                }
            }
            for s in slices {
                for i in 0..s.size.min(16) {
                    want.insert((s.base + i) as usize % slots);
                }
            }
        }
    }
    let last = (g.p.backends - 1) as u16;
    for (i, s) in want.into_iter().enumerate() {
        // Now and then the backend table's last entry (valid).
        let backend = if i % 13 == 0 { last } else { g.backend_ref() };
        g.t.maglev[s] = MaglevSlot { backend };
    }
}

/// Connection entries around the trackable probes: the flow's entry (or none) among decoys
/// that differ from it in exactly one field, in its bucket; and probes steered to the table's
/// first and last buckets and last entry.
fn connections(g: &mut Gen<'_>) -> Vec<(u32, CtEntry)> {
    let p = g.p;
    let ways = p.ct_ways;
    let empty = nlb_reference::conntrack::ConnTable::new(p.ct_buckets, p.ct_ways);
    let settings = nlb_hw::NicSettings::default();
    let mut rng_frames = StdRng::seed_from_u64(g.rng.random());
    // Trackable probes (their packets look the bucket up), whole TCP/UDP/portless flows.
    let mut flows: Vec<Flow> = Vec::new();
    for pr in &g.probes {
        let f = frame(pr, &mut rng_frames);
        let (_, t) = trace(&g.t, &empty, &settings, &f);
        let looked = t
            .steps
            .iter()
            .any(|s| matches!(s, Step::Conntrack(ConnStep::Lookup { .. })));
        if looked && !flows.contains(&pr.flow) {
            flows.push(pr.flow);
        }
    }
    let mut used: BTreeSet<u32> = BTreeSet::new();
    let mut turn = g.rng.random_range(0..CtField::ALL.len());
    let mut out = Vec::new();
    let mut extra = Vec::new();
    // Steered flows: the first bucket, the last (its last way: the table's last entry), one
    // with the top bit set.
    let targets = [
        (0, "connection entry in the first bucket"),
        (
            p.ct_buckets - 1,
            "connection entry at the table's last index",
        ),
        (
            p.ct_buckets / 2 + 5,
            "connection entry in a bucket with its top bit set",
        ),
    ];
    for (bucket, what) in targets {
        let Some(base) = flows
            .iter()
            .find(|f| f.protocol == TCP || f.protocol == UDP)
            .copied()
        else {
            continue;
        };
        for _ in 0..2_000_000u32 {
            let f = Flow {
                client_port: g.rng.random(),
                ..base
            };
            if nlb_reference::conntrack::bucket(&f.tuple5(), p.ct_buckets) == bucket {
                extra.push((f, what));
                break;
            }
        }
    }
    let mut arranged: Vec<(Flow, &'static str, Option<u32>)> = flows
        .iter()
        .map(|f| (*f, "connection entries from random contents", None))
        .collect();
    for (f, what) in extra {
        let way = if what.contains("last index") {
            Some(ways - 1)
        } else {
            None
        };
        arranged.push((f, what, way));
    }
    for (f, what, forced) in arranged {
        let key = f.tuple5();
        let bucket = nlb_reference::conntrack::bucket(&key, p.ct_buckets);
        if !used.insert(bucket) {
            continue;
        }
        // The flow's own entry: a way (forced for the last-index target), or none.
        let own = forced.or_else(|| {
            if g.rng.random_bool(0.2) {
                None
            } else {
                Some(g.rng.random_range(0..ways))
            }
        });
        let backend = g.backend_ref();
        let e = ct_of(g.rng, &f, backend);
        for w in 0..ways {
            let entry = if Some(w) == own {
                e
            } else if own.is_some_and(|o| w > o) && g.rng.random_bool(0.3) {
                // A valid duplicate above (the lowest way wins), another backend.
                let b = g.backend_ref();
                ct_of(g.rng, &f, b)
            } else if g.rng.random_bool(0.85) {
                // The fields in turn, so each is a decoy before hits and in misses.
                let field = CtField::ALL[turn % CtField::ALL.len()];
                turn += 1;
                let mut d = ct_decoy(g.rng, &e, field);
                d.backend = g.backend_ref();
                d
            } else {
                // Another flow, valid or not.
                let other = Flow {
                    client: g.rng.random(),
                    ..f
                };
                let b = g.backend_ref();
                let mut x = ct_of(g.rng, &other, b);
                x.valid = g.rng.random_bool(0.7);
                x
            };
            out.push((bucket * ways + w, entry));
        }
        // Each flow a few times (ACK, PSH-ACK; FIN now and then: a teardown).
        for flags in [0x10, 0x18, pick(g.rng, &[0x10, 0x11, 0x04])] {
            g.probes.push(Probe {
                flow: f,
                shape: Shape::Whole,
                tcp_flags: flags,
                what,
            });
        }
    }
    out
}

// ---- what happened --------------------------------------------------------------------------

/// The bins a packet falls in, from the reference's trace of it (`t`) on `tables` and the
/// connection entries `ct` (by index): which way and bucket its VIP entry was found in and what
/// decoys it passed, which slot matched and how, rule, pool, Maglev and backend ids at the
/// tables' ends and past them, the connection-table outcome and the decoys it passed.
pub fn bins(
    profile: &Profile,
    tables: &Tables,
    ct: &BTreeMap<u32, CtEntry>,
    t: &Trace,
    out: &mut Vec<String>,
) {
    for s in &t.steps {
        match s {
            Step::Vip {
                protocol,
                vip,
                bucket,
                entry,
                ..
            } => vip_bins(profile, tables, *protocol, *vip, *bucket, *entry, out),
            Step::PortSlots {
                entry,
                port,
                outcome,
                ..
            } => slot_bins(entry, *port, *outcome, out),
            Step::Rule { id, entry } => {
                let n = profile.rules as u16;
                if *id >= n && *id < 2 * n && tables.rules[usize::from(*id - n)].valid {
                    out.push("rule id past the table, aliasing a valid rule".into());
                }
                if entry.is_some_and(|e| e.valid) {
                    if *id >= n / 2 {
                        out.push("rule id with its top bit set".into());
                    }
                    if *id == n - 1 {
                        out.push("the last rule".into());
                    }
                }
            }
            Step::Pool { id, entry } => {
                let n = profile.pools as u16;
                if *id >= n && *id < 2 * n && tables.pools[usize::from(*id - n)].valid {
                    out.push("pool id past the table, aliasing a valid pool".into());
                }
                if entry.is_some_and(|e| e.valid) && *id >= n / 2 {
                    out.push("pool id with its top bit set".into());
                }
            }
            Step::Maglev {
                base,
                size,
                offset,
                slot,
                backend,
                ..
            } => maglev_bins(profile, *base, *size, *offset, *slot, *backend, out),
            Step::Backend { id, entry } => {
                let n = profile.backends as u16;
                if *id >= n && tables.backends[usize::from(*id - n)].valid {
                    out.push("backend id past the table, aliasing a valid backend".into());
                }
                if entry.is_some_and(|e| e.valid) {
                    if *id >= n / 2 {
                        out.push("backend id with its top bit set".into());
                    }
                    if *id == n - 1 {
                        out.push("the last backend".into());
                    }
                } else if entry.is_some() {
                    out.push("an invalid backend entry".into());
                }
            }
            Step::Conntrack(ConnStep::Lookup { bucket, hit }) => {
                ct_bins(profile, ct, t, *bucket, *hit, out);
            }
            _ => {}
        }
    }
}

fn vip_bins(
    profile: &Profile,
    tables: &Tables,
    protocol: u8,
    vip: u128,
    bucket: u32,
    entry: Option<u32>,
    out: &mut Vec<String>,
) {
    let ways = profile.vip_ways;
    let found_way = entry.map(|i| i % ways);
    let same_key = |e: &VipEntry| e.protocol == protocol && e.addr == vip;
    // The decoys below the found way (all of the bucket without one).
    let below = found_way.unwrap_or(ways);
    for w in 0..ways {
        let e = &tables.vip[(bucket * ways + w) as usize];
        let prefix = if w < below {
            if found_way.is_some() {
                "VIP found past"
            } else {
                "VIP not found, bucket holding"
            }
        } else {
            if found_way.is_some() && w > below && e.valid && same_key(e) {
                out.push("VIP found below a valid duplicate of its key".into());
            }
            continue;
        };
        if same_key(e) && !e.valid {
            out.push(format!("{prefix} an invalid entry of its key"));
        } else if e.valid && e.addr == vip && e.protocol != protocol {
            out.push(format!("{prefix} its address under another protocol"));
        } else if e.valid && e.protocol == protocol {
            let diff: Vec<u32> = (0..4)
                .filter(|k| (e.addr >> (32 * k)) as u32 != (vip >> (32 * k)) as u32)
                .collect();
            if let [k] = diff.as_slice() {
                out.push(format!("{prefix} its address differing in word {k}"));
            }
        }
    }
    if let Some(w) = found_way {
        out.push(format!("VIP found in way {w}"));
        if bucket == 0 {
            out.push("VIP found in the first bucket".into());
        }
        if bucket == profile.vip_buckets - 1 {
            out.push("VIP found in the last bucket".into());
        }
        if bucket >= profile.vip_buckets / 2 {
            out.push("VIP found in a bucket with its top bit set".into());
        }
        if protocol == 0 {
            out.push("portless flow found its protocol-0 entry".into());
        }
    } else if protocol != 0
        && (0..ways).any(|w| {
            let e = &tables.vip[(bucket * ways + w) as usize];
            e.valid && e.addr == vip && e.protocol != protocol
        })
    {
        out.push("TCP/UDP not found: only other protocols' entries of the address".into());
    }
}

fn holds(s: &PortSlot, port: u16) -> bool {
    s.port_lo <= port && port <= s.port_hi
}

fn slot_bins(entry: &VipEntry, port: Option<u16>, outcome: SlotOutcome, out: &mut Vec<String>) {
    let Some(port) = port else {
        // A later fragment: the valid slots decide, not the port.
        let valid: Vec<usize> = (0..16).filter(|&i| entry.slot[i].valid).collect();
        match (outcome, valid.as_slice()) {
            (SlotOutcome::Matched { slot, .. }, [_]) => {
                out.push("later fragment on the one valid slot".into());
                if slot > 0 && (0..slot).any(|i| !entry.slot[i].valid) {
                    out.push("later fragment on one valid slot above invalid ones".into());
                }
            }
            (SlotOutcome::Several, _) => out.push("later fragment on several valid slots".into()),
            (SlotOutcome::NoSlot, _) => out.push("later fragment on no valid slot".into()),
            _ => {}
        }
        return;
    };
    match outcome {
        SlotOutcome::Matched { slot, .. } => {
            out.push(format!("port slot {slot} matched"));
            let s = &entry.slot[slot];
            if (0..slot).any(|i| !entry.slot[i].valid && holds(&entry.slot[i], port)) {
                out.push("slot matched above an invalid slot holding the port".into());
            }
            if (0..slot).any(|i| !entry.slot[i].valid) {
                out.push("slot matched above an invalid slot".into());
            }
            let later: Vec<&PortSlot> = entry.slot[slot + 1..]
                .iter()
                .filter(|x| x.valid && holds(x, port))
                .collect();
            if !later.is_empty() {
                out.push("lowest of several valid slots holding the port".into());
            }
            if later
                .iter()
                .any(|x| x.port_lo <= s.port_lo && s.port_hi <= x.port_hi && **x != *s)
            {
                out.push("matched range nested in a later, wider one".into());
            }
            if later
                .iter()
                .any(|x| s.port_lo <= x.port_lo && x.port_hi <= s.port_hi && **x != *s)
            {
                out.push("matched range holding a later, narrower one".into());
            }
            if port == s.port_lo {
                out.push("port at its slot's low end".into());
            }
            if port == s.port_hi {
                out.push("port at its slot's high end".into());
            }
        }
        SlotOutcome::NoSlot => {
            out.push("no valid slot holds the port".into());
            if entry.slot.iter().any(|x| !x.valid && holds(x, port)) {
                out.push("only an invalid slot holds the port".into());
            }
            for x in entry.slot.iter().filter(|x| x.valid) {
                if x.port_lo > 0 && port == x.port_lo - 1 {
                    out.push("port one below a valid slot".into());
                }
                if x.port_hi < 65535 && port == x.port_hi + 1 {
                    out.push("port one above a valid slot".into());
                }
                if x.port_lo > x.port_hi && x.port_hi < port && port < x.port_lo {
                    out.push("port between the ends of an empty slot".into());
                }
            }
        }
        SlotOutcome::Several => {}
    }
}

fn maglev_bins(
    profile: &Profile,
    base: u32,
    size: u32,
    offset: u32,
    slot: u64,
    backend: Option<u16>,
    out: &mut Vec<String>,
) {
    let slots = u64::from(profile.maglev_slots);
    if size == 0 {
        out.push("empty Maglev slice".into());
        return;
    }
    if size == 65_537 {
        out.push("Maglev slice of 65,537".into());
    }
    if size == (1 << 17) - 1 {
        out.push("Maglev slice of 131,071 (the largest maglev_size)".into());
    }
    if size == 65_536 {
        out.push("Maglev slice of 65,536".into());
    }
    if size >= 65_537 && offset & 0x1_0000 != 0 {
        out.push(format!("slice of {size}: index with bit 16 set"));
    }
    if size >= 65_537 && offset + 1 == size {
        out.push(format!("slice of {size}: its last index"));
    }
    if slot + 1 == slots {
        out.push("the slot memory's last slot".into());
    }
    if slot >= slots {
        if u64::from(base) >= slots {
            if base & 0x80_0000 != 0 {
                out.push("slice base with its top bit set (past the memory)".into());
            } else {
                out.push("slice base past the memory".into());
            }
        } else {
            out.push("slice running past the memory: slot past it".into());
        }
        if slot == slots {
            out.push("the first slot past the memory".into());
        }
    }
    if backend.is_some_and(|b| u32::from(b) >= profile.backends) {
        out.push("Maglev slot naming a backend past the table".into());
    }
}

fn ct_bins(
    profile: &Profile,
    ct: &BTreeMap<u32, CtEntry>,
    t: &Trace,
    bucket: u32,
    hit: Option<(u32, u16)>,
    out: &mut Vec<String>,
) {
    let ways = profile.ct_ways;
    let Some(key) = t.steps.iter().find_map(|s| match s {
        Step::Flow { flow, .. } => Some(flow.key(KeyType::Tuple5)),
        _ => None,
    }) else {
        return;
    };
    let hit_way = hit.map(|(i, _)| i % ways);
    let below = hit_way.unwrap_or(ways);
    for w in 0..ways {
        let Some(e) = ct.get(&(bucket * ways + w)) else {
            continue;
        };
        if w < below {
            if let Some(field) = ct_difference(e, &key) {
                let prefix = if hit.is_some() {
                    "connection hit past"
                } else {
                    "connection miss, bucket holding"
                };
                out.push(format!("{prefix} an entry differing in {}", field.name()));
            }
        } else if w > below && holds_flow(e, &key) {
            out.push("connection hit below a valid duplicate".into());
        }
    }
    if let Some((index, backend)) = hit {
        out.push(format!("connection hit in way {}", index % ways));
        if bucket == 0 {
            out.push("connection hit in the first bucket".into());
        }
        if bucket == profile.ct_buckets - 1 {
            out.push("connection hit in the last bucket".into());
        }
        if bucket >= profile.ct_buckets / 2 {
            out.push("connection hit in a bucket with its top bit set".into());
        }
        if index == profile.ct_entries() - 1 {
            out.push("connection hit at the table's last index".into());
        }
        if u32::from(backend) >= profile.backends {
            out.push("connection entry naming a backend past the table".into());
        }
    }
}

/// Every bin a run of [`generate`]'s probes must hit.
pub fn required_bins(profile: &Profile) -> Vec<String> {
    let mut v: Vec<String> = [
        "VIP found past an invalid entry of its key",
        "VIP found past its address under another protocol",
        "VIP found below a valid duplicate of its key",
        "VIP not found, bucket holding an invalid entry of its key",
        "VIP not found, bucket holding its address under another protocol",
        "VIP found in the first bucket",
        "VIP found in the last bucket",
        "VIP found in a bucket with its top bit set",
        "portless flow found its protocol-0 entry",
        "TCP/UDP not found: only other protocols' entries of the address",
        "later fragment on the one valid slot",
        "later fragment on one valid slot above invalid ones",
        "later fragment on several valid slots",
        "later fragment on no valid slot",
        "slot matched above an invalid slot holding the port",
        "slot matched above an invalid slot",
        "lowest of several valid slots holding the port",
        "matched range nested in a later, wider one",
        "matched range holding a later, narrower one",
        "port at its slot's low end",
        "port at its slot's high end",
        "no valid slot holds the port",
        "only an invalid slot holds the port",
        "port one below a valid slot",
        "port one above a valid slot",
        "port between the ends of an empty slot",
        "rule id past the table, aliasing a valid rule",
        "rule id with its top bit set",
        "the last rule",
        "pool id past the table, aliasing a valid pool",
        "pool id with its top bit set",
        "empty Maglev slice",
        "Maglev slice of 65,537",
        "Maglev slice of 131,071 (the largest maglev_size)",
        "Maglev slice of 65,536",
        "slice of 65537: index with bit 16 set",
        "slice of 65537: its last index",
        "slice of 131071: index with bit 16 set",
        "slice of 131071: its last index",
        "the slot memory's last slot",
        "slice base with its top bit set (past the memory)",
        "slice base past the memory",
        "slice running past the memory: slot past it",
        "the first slot past the memory",
        "Maglev slot naming a backend past the table",
        "backend id past the table, aliasing a valid backend",
        "backend id with its top bit set",
        "the last backend",
        "an invalid backend entry",
        "connection hit below a valid duplicate",
        "connection hit in the first bucket",
        "connection hit in the last bucket",
        "connection hit in a bucket with its top bit set",
        "connection hit at the table's last index",
        "connection entry naming a backend past the table",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for k in 0..4 {
        v.push(format!("VIP found past its address differing in word {k}"));
    }
    for w in 0..profile.vip_ways {
        v.push(format!("VIP found in way {w}"));
    }
    for s in 0..16 {
        v.push(format!("port slot {s} matched"));
    }
    for w in 0..profile.ct_ways {
        v.push(format!("connection hit in way {w}"));
    }
    for f in CtField::ALL {
        v.push(format!(
            "connection hit past an entry differing in {}",
            f.name()
        ));
        v.push(format!(
            "connection miss, bucket holding an entry differing in {}",
            f.name()
        ));
    }
    v
}

/// The reference's result in the golden model's type (field by field, so a field added to
/// either fails to compile here until it is compared).
pub fn model_result(r: &nlb_reference::pipeline::PacketResult) -> firmware_sim::PacketResult {
    let nlb_reference::pipeline::PacketResult {
        verdict,
        reason,
        bank,
        rule,
        pool,
        backend,
        key,
        conntrack,
        ct_index,
        flow_hash,
        ip_id,
        frame_len,
        out_len,
        event,
    } = *r;
    firmware_sim::PacketResult {
        verdict,
        reason,
        bank,
        rule,
        pool,
        backend,
        key,
        conntrack: match conntrack {
            nlb_reference::lookup::CtOutcome::None => firmware_sim::CtOutcome::None,
            nlb_reference::lookup::CtOutcome::Hit => firmware_sim::CtOutcome::Hit,
            nlb_reference::lookup::CtOutcome::Miss => firmware_sim::CtOutcome::Miss,
        },
        ct_index,
        flow_hash,
        ip_id,
        frame_len,
        out_len,
        event,
    }
}
