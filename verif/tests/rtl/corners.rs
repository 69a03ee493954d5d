//! Corner values through the whole pipeline (`nlb_top`) against the golden model.
//!
//! Random traffic almost never produces the exact operand that exercises a carry, a special
//! checksum encoding or a size exactly at a limit, so this test builds those on purpose
//! (docs/verification.md, "Corner values"):
//!
//! - **Checksums**: every ones'-complement sum the datapath computes, with its operands solved
//!   for the corner: the receive check of the IPv4 header (parser), the outer IPv4 header of
//!   IPIP and GUE (editor), the UDP checksum of GUE over IPv6 (editor, with the payload's share
//!   from `nlb_l3_csum`). A free 16-bit operand (the outer source address through
//!   `ctrl.outer_src_v4`, the inner IPv4 ID, a payload word) is solved so that the integer
//!   sum of the 16-bit words needs no, one or two end-around carries, or folds to 0xFFFF (an
//!   IPv4 checksum of 0x0000; a UDP checksum computing to 0, sent as 0xFFFF), or to 0xFFFE.
//!   Checksums on the wire are checked with etherparse; the receive check must accept both
//!   encodings of zero and reject a field one off.
//! - **Size limits**: the largest output (9018 bytes, docs/pipeline.md §9) exactly at, one
//!   below and one above, per delivery x outer family x VLAN tags (0, 1, 2; 3 is malformed);
//!   minimum frames; IHL 4, 5 and 15; IPv6 extension chains at their limits; port-range ends
//!   (0, 1, 65534, 65535, a range's edges and one past them); the last entry of each table and
//!   one past it; later fragments to a VIP with one rule and with none.
//! - **Counters**: the simulation-only preset port of `nlb_top` (`sim_cnt_preset_*`, under
//!   `NLB_SIM_HOOKS`) and the model's `Counters::preset` set rule, backend, reason and verdict
//!   counters just below 2^32 and 2^64; traffic then carries packets, bytes, punts and drops
//!   across, and every counter word is read through the registers.
//!
//! Every packet's result, transmitted frame and punt must equal the model's. Value bins are
//! printed and all required. `NLB_SEED` replays a run; `NLB_TRACE=1` writes a waveform.

use etherparse::{Ipv4Header, Ipv6Header, UdpHeader};
use firmware_sim::conntrack::ConnTable;
use firmware_sim::pipeline::{process, Context, CtOutcome, PacketResult};
use firmware_sim::{Counter, CounterKind, Counters};
use nlb_hw::blocks::conntrack;
use nlb_hw::enums::KeyType;
use nlb_hw::enums::{Affinity, DefaultAction, Delivery, Reason, Verdict};
use nlb_hw::layouts::{
    BackendEntry, CtEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{table_index, FlowKey, NicSettings, Profile, Tables};
use nlb_testkit::hex;
use nlb_verif::bench::{seed_from_env, trace_always, wave_path};
use nlb_verif::hbm::HbmConfig;
use nlb_verif::scenario::mapped;
use nlb_verif::top::{take_frames, take_punts, PuntedFrame, TopBench};
use nlb_verif::VerifError;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;

/// Largest output frame (docs/pipeline.md §9).
const MAX_OUT: usize = 9018;
/// 2^32, where a counter's low word carries into its high word.
const TWO_POW_32: u64 = 0x1_0000_0000;
/// Bytes of a punted frame the punt stream carries.
const PUNT_BYTES: usize = 9728;

const VIP4: u32 = 0x0a63_0001;
/// An IPv4 UDP VIP whose entry has no valid port slot: no rule at all for the protocol.
const VIP4_NO_SLOTS: u32 = 0x0a63_0002;
const VIP6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0100;
const CLIENT4: u32 = 0xc633_6407;
const CLIENT6: u128 = 0x2001_0db8_00c0_0000_0000_0000_0000_0007;
/// Backend 0 (IPv4): 10.0.0.1, small high word so that an outer header sum can stay below
/// 0x10000 (the no-carry corner).
const BACKEND4: u32 = 0x0a00_0001;
const BACKEND6: u128 = 0x2001_0db8_00b0_0000_0000_0000_0000_0001;

/// Rules with special table-end meanings (their slots are on the IPv4 UDP entry).
const RULE_POOL_PAST: u16 = 10;
const RULE_MAGLEV_PAST: u16 = 11;
const RULE_BACKEND_PAST: u16 = 13;
const POOL_MAGLEV_PAST: u16 = 12;
const POOL_BACKEND_PAST: u16 = 14;
const MAGLEV_BACKEND_PAST: u32 = 20;
/// A tracked pool (L2 DSR, Maglev slot 21 -> backend 0) behind rule 16, on TCP port 40000 of
/// the IPv4 VIP: its flows in the connection table's last bucket.
const RULE_TRACKED: u16 = 16;
const POOL_TRACKED: u16 = 15;
const MAGLEV_TRACKED: u32 = 21;
const PORT_TRACKED: u16 = 40000;

fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

use nlb_verif::coverage::{self, Bins};

fn bin(bins: &mut Bins, name: String) {
    coverage::hit(bins, name);
}

// ---- ones'-complement arithmetic, written here from RFC 1071 ----------------------------------

/// Integer sum of the big-endian 16-bit words of `b` (an odd last byte padded with zero).
fn word_sum(b: &[u8]) -> u64 {
    b.chunks(2)
        .map(|c| u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0)))
        .sum()
}

/// The sum folded to 16 bits with end-around carries.
fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// How many end-around carries a 16-bit fold of `s` takes: 0 (s < 0x10000), 1, or 2 (the
/// first fold carries out again), as a bin name.
fn carry_class(s: u64) -> &'static str {
    if s < 0x10000 {
        "no carry"
    } else if (s & 0xffff) + (s >> 16) < 0x10000 {
        "one end-around carry"
    } else {
        "two end-around carries"
    }
}

/// The corner a solver aims a sum at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    NoCarry,
    OneCarry,
    TwoCarries,
    /// Folds to 0xFFFF: the checksum computes to 0x0000.
    FoldsFfff,
    /// Folds to 0xFFFE: the checksum computes to 0x0001.
    FoldsFffe,
}

const AIMS: [Aim; 5] = [
    Aim::NoCarry,
    Aim::OneCarry,
    Aim::TwoCarries,
    Aim::FoldsFfff,
    Aim::FoldsFffe,
];

fn aim_holds(aim: Aim, s: u64) -> bool {
    match aim {
        Aim::NoCarry => s < 0x10000,
        Aim::OneCarry => s >= 0x10000 && (s & 0xffff) + (s >> 16) < 0x10000,
        Aim::TwoCarries => s >= 0x10000 && (s & 0xffff) + (s >> 16) >= 0x10000,
        Aim::FoldsFfff => fold(s) == 0xffff,
        Aim::FoldsFffe => fold(s) == 0xfffe,
    }
}

/// A value x in 0..=max with `ok(x)`, chosen at random among all of them; None if there is
/// none.
fn solve(rng: &mut StdRng, max: u64, ok: impl Fn(u64) -> bool) -> Option<u64> {
    let hits: Vec<u64> = (0..=max).filter(|&x| ok(x)).collect();
    if hits.is_empty() {
        None
    } else {
        Some(hits[rng.random_range(0..hits.len())])
    }
}

// ---- frames --------------------------------------------------------------------------------

/// A frame to build: L2 with tags, IPv4 (with options) or IPv6 (with extension headers),
/// TCP/UDP, payload, Ethernet padding.
#[derive(Debug, Clone)]
struct Pkt {
    tags: usize,
    v6: bool,
    proto: u8,
    sport: u16,
    dport: u16,
    ihl: u8,
    opt_fill: u8,
    id: u16,
    df: bool,
    tos: u8,
    /// The IPv4 destination (an IPv6 packet goes to VIP6).
    dst4: u32,
    /// (more fragments, offset in 8-byte units).
    frag: Option<(bool, u16)>,
    /// IPv6 destination-options headers, lengths in bytes (multiples of 8).
    ext: Vec<usize>,
    payload: Vec<u8>,
    pad: usize,
    /// The IPv4 header checksum as sent (None: the correct one).
    csum: Option<u16>,
}

impl Pkt {
    fn new(rng: &mut StdRng, v6: bool, proto: u8, dport: u16, payload: usize) -> Pkt {
        Pkt {
            tags: rng.random_range(0..3),
            v6,
            proto,
            sport: rng.random_range(1024..65535),
            dport,
            ihl: 5,
            opt_fill: 0,
            id: rng.random(),
            df: rng.random_bool(0.5),
            tos: rng.random(),
            dst4: VIP4,
            frag: None,
            ext: Vec::new(),
            payload: (0..payload).map(|_| rng.random()).collect(),
            pad: 0,
            csum: None,
        }
    }

    fn l2_len(&self) -> usize {
        14 + 4 * self.tags
    }

    fn l4_header(&self) -> Vec<u8> {
        if matches!(self.frag, Some((_, off)) if off != 0) {
            return Vec::new();
        }
        let mut h = Vec::new();
        h.extend_from_slice(&self.sport.to_be_bytes());
        h.extend_from_slice(&self.dport.to_be_bytes());
        if self.proto == 6 {
            h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            let len = (8 + self.payload.len()).min(0xffff) as u16;
            h.extend_from_slice(&len.to_be_bytes());
            h.extend_from_slice(&[0, 0]);
        }
        h
    }

    /// The IPv4 header with checksum 0 (options filled with `opt_fill`).
    fn v4_header(&self, l4_len: usize) -> Vec<u8> {
        let hl = 4 * usize::from(self.ihl.max(5));
        let mut h = vec![0u8; hl];
        h[0] = 0x40 | (self.ihl & 0xf);
        h[1] = self.tos;
        h[2..4].copy_from_slice(&((hl + l4_len) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&self.id.to_be_bytes());
        let (mf, off) = self.frag.unwrap_or((false, 0));
        let flags = u16::from(self.df) << 14 | u16::from(mf) << 13 | off;
        h[6..8].copy_from_slice(&flags.to_be_bytes());
        h[8] = 64;
        h[9] = self.proto;
        h[12..16].copy_from_slice(&CLIENT4.to_be_bytes());
        h[16..20].copy_from_slice(&self.dst4.to_be_bytes());
        for b in &mut h[20..] {
            *b = self.opt_fill;
        }
        h
    }

    fn build(&self) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0xaa, 0x02, 0, 0, 0, 0, 0xbb];
        for i in 0..self.tags {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64 + i as u8]);
        }
        let mut l4 = self.l4_header();
        l4.extend_from_slice(&self.payload);
        if self.v6 {
            f.extend_from_slice(&[0x86, 0xdd]);
            let mut chain = Vec::new();
            let mut kinds: Vec<(u8, Vec<u8>)> = self
                .ext
                .iter()
                .map(|&len| {
                    let mut e = vec![0u8; len];
                    e[1] = (len / 8 - 1) as u8;
                    (60u8, e)
                })
                .collect();
            if let Some((mf, off)) = self.frag {
                let mut e = vec![0u8; 8];
                e[2..4].copy_from_slice(&(off << 3 | u16::from(mf)).to_be_bytes());
                e[4..8].copy_from_slice(&u32::from(self.id).to_be_bytes());
                kinds.push((44, e));
            }
            let first = kinds.first().map_or(self.proto, |k| k.0);
            for i in 0..kinds.len() {
                let next = kinds.get(i + 1).map_or(self.proto, |k| k.0);
                kinds[i].1[0] = next;
                chain.extend_from_slice(&kinds[i].1);
            }
            let plen = (chain.len() + l4.len()) as u16;
            let word0 = 6u32 << 28 | u32::from(self.tos) << 20;
            f.extend_from_slice(&word0.to_be_bytes());
            f.extend_from_slice(&plen.to_be_bytes());
            f.push(first);
            f.push(64);
            f.extend_from_slice(&CLIENT6.to_be_bytes());
            f.extend_from_slice(&VIP6.to_be_bytes());
            f.extend_from_slice(&chain);
        } else {
            f.extend_from_slice(&[0x08, 0x00]);
            let mut h = self.v4_header(l4.len());
            let c = self.csum.unwrap_or(!fold(word_sum(&h)));
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
        }
        f.extend_from_slice(&l4);
        f.resize(f.len() + self.pad, 0);
        f
    }

    /// Offset of the IP packet's first payload byte (after the L4 header) in the frame.
    fn payload_at(&self) -> usize {
        let ip = if self.v6 {
            40 + self.ext.iter().sum::<usize>() + if self.frag.is_some() { 8 } else { 0 }
        } else {
            4 * usize::from(self.ihl.max(5))
        };
        self.l2_len() + ip + self.l4_header().len()
    }

    /// Sets the payload so that the IP packet is `ip_len` bytes long.
    fn set_ip_len(&mut self, ip_len: usize) {
        let hdr = self.payload_at() - self.l2_len();
        self.payload.resize(ip_len - hdr, 0x5a);
    }
}

// ---- the bank ------------------------------------------------------------------------------

/// The pool (= rule = port block) of a delivery and an outer family.
fn pool_of(d: Delivery, outer_v6: bool) -> usize {
    d.value() as usize * 2 + usize::from(outer_v6)
}

/// A destination port that selects the pool of (delivery, outer family).
fn port_of(rng: &mut StdRng, d: Delivery, outer_v6: bool) -> u16 {
    1000 + 100 * pool_of(d, outer_v6) as u16 + rng.random_range(0..100)
}

/// VIP entries placed in the last bucket (its every way), the last way's address.
fn last_bucket_vips(p: &Profile) -> Vec<u32> {
    let mut found = Vec::new();
    let mut a = 0x0a64_0000u32;
    while found.len() < p.vip_ways as usize {
        if nlb_reference::lookup::vip_bucket(p, 17, mapped(a)) == p.vip_buckets - 1 {
            found.push(a);
        }
        a += 1;
    }
    found
}

fn place(t: &mut Tables, p: &Profile, protocol: u8, addr: u128, slots: &[(u16, u16, u16)]) {
    let ways = p.vip_ways as usize;
    let bucket = nlb_reference::lookup::vip_bucket(p, protocol, addr) as usize;
    let way = (0..ways)
        .find(|w| !t.vip[bucket * ways + w].valid)
        .expect("a free way for the test's VIP");
    let mut e = VipEntry {
        valid: true,
        protocol,
        addr,
        ..VipEntry::default()
    };
    for (i, &(lo, hi, rule)) in slots.iter().enumerate() {
        e.slot[i] = PortSlot {
            valid: true,
            port_lo: lo,
            port_hi: hi,
            rule,
        };
    }
    t.vip[bucket * ways + way] = e;
}

fn bank(p: &'static Profile) -> Tables {
    let mut t = Tables::empty(p);
    let last_backend = p.backends as usize - 1;
    t.backends[0] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(BACKEND4),
        mac: 0x0200_0000_1000,
    };
    t.backends[1] = BackendEntry {
        valid: true,
        is_ipv6: true,
        addr: BACKEND6,
        mac: 0x0200_0000_1001,
    };
    t.backends[last_backend] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(0x0a00_00fe),
        mac: 0x0200_0000_1fff,
    };
    let pool = |base: u32, delivery: Delivery| PoolEntry {
        valid: true,
        affinity: Affinity::None,
        delivery,
        maglev_base: base,
        maglev_size: 1,
        track: false,
        idle_timeout: 60,
        ..PoolEntry::default()
    };
    for d in Delivery::ALL {
        for v6 in [false, true] {
            let i = pool_of(d, v6);
            t.maglev[i] = MaglevSlot {
                backend: u16::from(v6),
            };
            t.pools[i] = pool(i as u32, d);
            t.rules[i] = RuleEntry {
                valid: true,
                acl_enabled: false,
                pool: i as u16,
            };
        }
    }
    // Table ends: the last rule -> the last pool -> the last Maglev slot -> the last backend;
    // and one past each.
    let last_rule = p.rules as usize - 1;
    let last_pool = p.pools as usize - 1;
    let last_slot = p.maglev_slots - 1;
    t.rules[last_rule] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: last_pool as u16,
    };
    t.pools[last_pool] = pool(last_slot, Delivery::L2Dsr);
    t.maglev[last_slot as usize] = MaglevSlot {
        backend: last_backend as u16,
    };
    t.rules[usize::from(RULE_POOL_PAST)] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: p.pools as u16,
    };
    t.rules[usize::from(RULE_MAGLEV_PAST)] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: POOL_MAGLEV_PAST,
    };
    t.pools[usize::from(POOL_MAGLEV_PAST)] = pool(p.maglev_slots, Delivery::L2Dsr);
    t.rules[usize::from(RULE_BACKEND_PAST)] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: POOL_BACKEND_PAST,
    };
    t.pools[usize::from(POOL_BACKEND_PAST)] = pool(MAGLEV_BACKEND_PAST, Delivery::L2Dsr);
    t.maglev[MAGLEV_BACKEND_PAST as usize] = MaglevSlot {
        backend: p.backends as u16,
    };

    t.rules[usize::from(RULE_TRACKED)] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: POOL_TRACKED,
    };
    t.pools[usize::from(POOL_TRACKED)] = PoolEntry {
        track: true,
        ..pool(MAGLEV_TRACKED, Delivery::L2Dsr)
    };
    t.maglev[MAGLEV_TRACKED as usize] = MaglevSlot { backend: 0 };

    // The last bucket of the VIP table, every way full; the last way's VIP is used.
    for a in last_bucket_vips(p) {
        place(&mut t, p, 17, mapped(a), &[(0, 65535, 0)]);
    }
    // The VIPs: six port blocks (delivery x outer family) per protocol and family, and on
    // the IPv4 UDP entry the port-range ends and the table-end rules.
    let blocks: Vec<(u16, u16, u16)> = (0..6u16)
        .map(|i| (1000 + 100 * i, 1099 + 100 * i, i))
        .collect();
    let mut udp4 = blocks.clone();
    udp4.extend_from_slice(&[
        (0, 0, 0),
        (1, 1, 1),
        (65534, 65534, 2),
        (65535, 65535, 3),
        (20000, 20009, 4),
        (30000, 30000, last_rule as u16),
        (30001, 30001, p.rules as u16),
        (30002, 30002, RULE_POOL_PAST),
        (30003, 30003, RULE_MAGLEV_PAST),
        (30004, 30004, RULE_BACKEND_PAST),
    ]);
    let mut tcp4 = blocks.clone();
    tcp4.push((PORT_TRACKED, PORT_TRACKED, RULE_TRACKED));
    place(&mut t, p, 6, mapped(VIP4), &tcp4);
    place(&mut t, p, 17, mapped(VIP4), &udp4);
    place(&mut t, p, 17, mapped(VIP4_NO_SLOTS), &[]);
    place(&mut t, p, 6, VIP6, &blocks);
    place(&mut t, p, 17, VIP6, &blocks);
    t
}

// ---- running packets -----------------------------------------------------------------------

/// The model's side: tables, settings, connection table, counters.
struct World {
    tables: Tables,
    settings: NicSettings,
    ct: ConnTable,
    counters: Counters,
}

/// A packet run through both: the frame, the (equal) result, the transmitted frame.
struct Done {
    frame: Vec<u8>,
    result: PacketResult,
    out: Option<Vec<u8>>,
}

/// Sends `frames` through the RTL and the model with the current settings; every result,
/// transmitted frame and punt must be equal. Returns them in order. A frame the receive side
/// drops for lack of room (the output is back-pressured: docs/pipeline.md §14.4) is counted as
/// the RTL counts it and sent again after the others, so that every corner still gets through.
fn run_batch(dut: &mut TopBench, w: &mut World, frames: Vec<Vec<u8>>) -> Result<Vec<Done>, String> {
    let ctx = Context {
        tables: &w.tables,
        bank: 0,
        settings: &w.settings,
        enabled: true,
        conntrack: &w.ct,
    };
    let mut buf = vec![0u8; PUNT_BYTES * 2];
    // (frame number among received frames, frame, result, output), in sending order; the
    // dropped ones are taken out and sent again.
    let mut queue: std::collections::VecDeque<(u32, Vec<u8>, PacketResult, Vec<u8>)> =
        std::collections::VecDeque::new();
    for f in frames {
        let r = process(&ctx, &f, &mut buf).map_err(|e| format!("model: {e}"))?;
        let out = buf[..r.out_len].to_vec();
        let seq = dut.send(&f);
        queue.push_back((seq, f, r, out));
    }
    let mut expected = Vec::with_capacity(queue.len());
    let mut limit = dut.bench.sim.cycle() + 400 * queue.len() as u64 + 20_000;
    while !queue.is_empty() {
        if dut.bench.sim.cycle() > limit {
            return Err(format!(
                "{} results still missing after {} came out",
                queue.len(),
                expected.len()
            ));
        }
        dut.step().map_err(|e| e.to_string())?;
        while let Some(d) = dut.mon.drops.pop_front() {
            let Some(i) = queue.iter().position(|q| q.0 == d.seq) else {
                return Err(format!(
                    "clock {}: a drop of frame {}, not in flight",
                    d.cycle, d.seq
                ));
            };
            let (_, f, r, out) = queue.remove(i).expect("found");
            w.counters
                .record(&PacketResult::new(Verdict::Drop, d.reason, 0, f.len()));
            let seq = dut.send(&f);
            queue.push_back((seq, f, r, out));
            limit += 400;
        }
        while let Some((cycle, inj, r)) = dut.mon.results.pop_front() {
            let Some((_, f, want, out)) = queue.pop_front() else {
                return Err(format!("clock {cycle}: a result with no frame"));
            };
            if inj || r != want {
                return Err(format!(
                    "clock {cycle}: packet #{} ({} bytes) {}\n  RTL   {r:?}\n  model {want:?}",
                    expected.len(),
                    f.len(),
                    hex(&f)
                ));
            }
            expected.push((f, want, out));
        }
    }
    let total = expected.len();
    let want_tx: Vec<usize> = (0..total)
        .filter(|&i| expected[i].1.verdict == Verdict::Forward)
        .collect();
    let want_punt: Vec<PuntedFrame> = expected
        .iter()
        .filter(|e| e.1.verdict == Verdict::Punt)
        .map(|(f, r, _)| PuntedFrame {
            header: r.punt_header(),
            frame: f[..f.len().min(PUNT_BYTES)].to_vec(),
        })
        .collect();
    // PASS frames leave on the pass stream as they came (docs/pipeline.md section 9).
    let want_pass: Vec<&[u8]> = expected
        .iter()
        .filter(|e| e.1.verdict == Verdict::Pass)
        .map(|(f, _, _)| f.as_slice())
        .collect();
    let (mut tx, mut punts, mut passed) = (Vec::new(), Vec::new(), Vec::new());
    let limit = dut.bench.sim.cycle() + 400 * total as u64 + 20_000;
    while (tx.len() < want_tx.len()
        || punts.len() < want_punt.len()
        || passed.len() < want_pass.len())
        && dut.bench.sim.cycle() <= limit
    {
        dut.step().map_err(|e| e.to_string())?;
        let mut beats = dut.tx.take();
        dut.tx_pending.append(&mut beats);
        tx.extend(take_frames(&mut dut.tx_pending));
        let mut beats = dut.punt.take();
        dut.punt_pending.append(&mut beats);
        punts.extend(take_punts(&mut dut.punt_pending).map_err(|e| e.to_string())?);
        let mut beats = dut.pass.take();
        dut.pass_pending.append(&mut beats);
        passed.extend(take_frames(&mut dut.pass_pending));
    }
    // Let the counters take the last results.
    for _ in 0..64 {
        dut.step().map_err(|e| e.to_string())?;
    }
    let _ = dut.events.take();
    let mut beats = dut.pass.take();
    dut.pass_pending.append(&mut beats);
    passed.extend(take_frames(&mut dut.pass_pending));
    if tx.len() != want_tx.len()
        || punts.len() != want_punt.len()
        || passed.len() != want_pass.len()
    {
        return Err(format!(
            "RTL sent {} frames, {} punts and {} passed frames, the model {}, {} and {}",
            tx.len(),
            punts.len(),
            passed.len(),
            want_tx.len(),
            want_punt.len(),
            want_pass.len()
        ));
    }
    for (k, want) in want_pass.iter().enumerate() {
        if passed[k].as_slice() != *want {
            return Err(format!(
                "passed frame {k}, not the frame sent:\n  RTL   {}\n  sent  {}",
                hex(&passed[k]),
                hex(want)
            ));
        }
    }
    for (k, want) in want_punt.iter().enumerate() {
        if punts[k] != *want {
            return Err(format!(
                "punt {k}:\n  RTL   {:?}\n  model {want:?}",
                punts[k]
            ));
        }
    }
    let mut tx = tx.into_iter();
    let mut done = Vec::with_capacity(total);
    for (f, r, out) in expected {
        w.counters.record(&r);
        let sent = if r.verdict == Verdict::Forward {
            let g = tx.next().unwrap_or_default();
            if g != out {
                return Err(format!(
                    "transmitted frame of {}\n  RTL   {}\n  model {}",
                    hex(&f),
                    hex(&g),
                    hex(&out)
                ));
            }
            Some(g)
        } else {
            None
        };
        done.push(Done {
            frame: f,
            result: r,
            out: sent,
        });
    }
    for sink in [&dut.tx, &dut.punt] {
        if !sink.violations().is_empty() {
            return Err(format!("stream rules: {:?}", sink.violations()));
        }
    }
    Ok(done)
}

fn set_settings(dut: &mut TopBench, w: &mut World, s: NicSettings) -> Result<(), String> {
    dut.write_settings(&s).map_err(|e| e.to_string())?;
    w.settings = s;
    Ok(())
}

// ---- checksums on the wire -----------------------------------------------------------------

/// Checks the checksums of a transmitted frame with etherparse and counts their corners.
/// `l2`: the L2 header length; the outer header follows it for IPIP/GUE.
fn check_wire(done: &Done, t: &Tables, bins: &mut Bins) -> Result<(), String> {
    let Some(out) = &done.out else {
        return Ok(());
    };
    let Some(pool) = done.result.pool.and_then(|p| t.pools.get(usize::from(p))) else {
        return Ok(());
    };
    if pool.delivery == Delivery::L2Dsr {
        return Ok(());
    }
    let gue = pool.delivery == Delivery::Gue;
    let l2 = match (out[12], out[13]) {
        (0x81, 0x00) | (0x88, 0xa8) => match (out[16], out[17]) {
            (0x81, 0x00) | (0x88, 0xa8) => 22,
            _ => 18,
        },
        _ => 14,
    };
    let inner_v6 = done.frame.get(l2).is_some_and(|b| b >> 4 == 6);
    let mode = if gue { "gue" } else { "ipip" };
    let inner = if inner_v6 { "v6" } else { "v4" };
    let bad = |what: String| Err(format!("{what} in the transmitted frame {}", hex(out)));
    if out[l2] >> 4 == 4 {
        let (h, rest) =
            Ipv4Header::from_slice(&out[l2..]).map_err(|e| format!("etherparse: {e}"))?;
        if h.header_checksum != h.calc_header_checksum() {
            return bad(format!(
                "outer IPv4 checksum {:#06x}, etherparse computes {:#06x}",
                h.header_checksum,
                h.calc_header_checksum()
            ));
        }
        let mut hb = out[l2..l2 + 20].to_vec();
        hb[10] = 0;
        hb[11] = 0;
        let s = word_sum(&hb);
        let kind = format!("outer ipv4 ({mode}, inner {inner})");
        bin(bins, format!("csum {kind} x {}", carry_class(s)));
        match h.header_checksum {
            0x0000 => bin(bins, format!("csum {kind} x checksum 0x0000")),
            0x0001 => bin(bins, format!("csum {kind} x checksum 0x0001")),
            _ => {}
        }
        if gue {
            let (u, _) = UdpHeader::from_slice(rest).map_err(|e| format!("etherparse: {e}"))?;
            if u.checksum != 0 {
                return bad(format!(
                    "GUE over IPv4 UDP checksum {:#06x} (0 expected)",
                    u.checksum
                ));
            }
        }
    } else if gue {
        let (h, rest) =
            Ipv6Header::from_slice(&out[l2..]).map_err(|e| format!("etherparse: {e}"))?;
        let (u, payload) = UdpHeader::from_slice(rest).map_err(|e| format!("etherparse: {e}"))?;
        let c = u
            .calc_checksum_ipv6(&h, payload)
            .map_err(|e| format!("etherparse: {e}"))?;
        if u.checksum != c {
            return bad(format!(
                "GUE over IPv6 UDP checksum {:#06x}, etherparse computes {c:#06x}",
                u.checksum
            ));
        }
        // The two sums the datapath adds: the inner packet's (nlb_l3_csum) and the header
        // words plus that folded sum (nlb_editor).
        let p = word_sum(payload);
        let hdr = word_sum(&out[l2 + 8..l2 + 40])
            + u64::from(u.length) * 2
            + 17
            + u64::from(u.source_port)
            + u64::from(u.destination_port);
        let s = hdr + u64::from(fold(p));
        let kind = format!("gue over ipv6 (inner {inner})");
        bin(
            bins,
            format!("csum {kind} payload sum x {}", carry_class(p)),
        );
        if fold(p) == 0xffff {
            bin(bins, format!("csum {kind} payload sum x folds to 0xFFFF"));
        }
        bin(bins, format!("csum {kind} udp x {}", carry_class(s)));
        match !fold(s) {
            0x0000 => {
                if u.checksum != 0xffff {
                    return bad("a UDP checksum computing to 0 not sent as 0xFFFF".into());
                }
                bin(
                    bins,
                    format!("csum {kind} udp x computes 0x0000, sent 0xFFFF"),
                );
            }
            0x0001 => bin(bins, format!("csum {kind} udp x computes 0x0001")),
            _ => {}
        }
    }
    Ok(())
}

// ---- traffic -------------------------------------------------------------------------------

/// Packets whose outer IPv4 header sum is aimed at each corner through the outer source
/// address (`ctrl.outer_src_v4`, prefix length 32: the whole source is the register's): one
/// packet per setting.
fn outer_v4_directed(
    dut: &mut TopBench,
    w: &mut World,
    rng: &mut StdRng,
    bins: &mut Bins,
) -> Result<(), String> {
    let base = w.settings;
    for d in [Delivery::Ipip, Delivery::Gue] {
        for inner_v6 in [false, true] {
            for aim in AIMS {
                let proto = if rng.random_bool(0.5) { 6 } else { 17 };
                let len = rng.random_range(0..1400);
                let port = port_of(rng, d, false);
                let mut p = Pkt::new(rng, inner_v6, proto, port, len);
                // Small fixed words so that even the no-carry corner is reachable.
                p.id = 0;
                p.tos = 0;
                let frame = p.build();
                // The sum with source 0, from the model's output; the source adds hi + lo.
                let mut s = base;
                s.outer_src_v4 = 0;
                s.outer_src_v4_len = 32;
                let ctx = Context {
                    tables: &w.tables,
                    bank: 0,
                    settings: &s,
                    enabled: true,
                    conntrack: &w.ct,
                };
                let mut out = vec![0u8; PUNT_BYTES];
                let r = process(&ctx, &frame, &mut out).map_err(|e| format!("model: {e}"))?;
                if r.verdict != Verdict::Forward {
                    return Err(format!("directed outer IPv4 packet not forwarded: {r:?}"));
                }
                let l2 = p.l2_len();
                let mut hb = out[l2..l2 + 20].to_vec();
                hb[10] = 0;
                hb[11] = 0;
                let s0 = word_sum(&hb);
                let Some(x) = solve(rng, 0x1fffe, |x| aim_holds(aim, s0 + x)) else {
                    return Err(format!("no outer source reaches {aim:?} from {s0:#x}"));
                };
                let hi = x.min(0xffff);
                s.outer_src_v4 = (hi << 16 | (x - hi)) as u32;
                set_settings(dut, w, s)?;
                for done in run_batch(dut, w, vec![frame])? {
                    check_wire(&done, &w.tables, bins)?;
                }
            }
        }
    }
    set_settings(dut, w, base)
}

/// Packets whose GUE-over-IPv6 UDP checksum (and the payload sum under it) is aimed at each
/// corner through one payload word.
fn gue6_directed(w: &World, rng: &mut StdRng) -> Result<Vec<Vec<u8>>, String> {
    let mut frames = Vec::new();
    for inner_v6 in [false, true] {
        // (aim, on the payload sum alone rather than the whole UDP sum)
        for (aim, on_payload) in [
            (Aim::OneCarry, false),
            (Aim::TwoCarries, false),
            (Aim::FoldsFfff, false),
            (Aim::FoldsFffe, false),
            (Aim::TwoCarries, true),
            (Aim::FoldsFfff, true),
        ] {
            let proto = if rng.random_bool(0.5) { 6 } else { 17 };
            let len = rng.random_range(100..3000);
            let mut p = {
                let port = port_of(rng, Delivery::Gue, true);
                Pkt::new(rng, inner_v6, proto, port, len)
            };
            p.payload[0] = 0;
            p.payload[1] = 0;
            let frame = p.build();
            let ctx = Context {
                tables: &w.tables,
                bank: 0,
                settings: &w.settings,
                enabled: true,
                conntrack: &w.ct,
            };
            let mut out = vec![0u8; PUNT_BYTES];
            let r = process(&ctx, &frame, &mut out).map_err(|e| format!("model: {e}"))?;
            if r.verdict != Verdict::Forward {
                return Err(format!("directed GUE packet not forwarded: {r:?}"));
            }
            let l2 = p.l2_len();
            let ip_end = frame.len() - p.pad;
            let p0 = word_sum(&frame[l2..ip_end]);
            let o = &out[l2..];
            let hdr = word_sum(&o[8..40]) + word_sum(&o[40..46]) + word_sum(&o[44..46]) + 17;
            let x = solve(rng, 0xffff, |x| {
                if on_payload {
                    aim_holds(aim, p0 + x)
                } else {
                    aim_holds(aim, hdr + u64::from(fold(p0 + x)))
                }
            });
            let Some(x) = x else {
                // Not every packet admits every corner (the header words fix the range);
                // another size is tried next round.
                continue;
            };
            p.payload[0] = (x >> 8) as u8;
            p.payload[1] = x as u8;
            frames.push(p.build());
        }
    }
    Ok(frames)
}

/// Receive-side IPv4 header checks: both encodings of a zero checksum, two end-around
/// carries, and a field one off; IHL 5 and 15. The expectation (docs/pipeline.md §2: the
/// header's ones'-complement sum must be 0xFFFF) is worked out here.
fn rx_checksums(rng: &mut StdRng) -> Vec<(Vec<u8>, bool, String)> {
    let mut v = Vec::new();
    for ihl in [5u8, 15] {
        for variant in 0..4 {
            let mut p = {
                let port = port_of(rng, Delivery::L2Dsr, false);
                Pkt::new(rng, false, 17, port, 40)
            };
            p.ihl = ihl;
            p.opt_fill = if variant == 2 { 0xff } else { rng.random() };
            let h0 = {
                let mut q = p.clone();
                q.id = 0;
                word_sum(&q.v4_header(8 + q.payload.len()))
            };
            let aim = if variant == 2 {
                Aim::TwoCarries
            } else {
                Aim::FoldsFfff
            };
            if let Some(id) = solve(rng, 0xffff, |x| aim_holds(aim, h0 + x)) {
                p.id = id as u16;
            }
            let correct = !fold(word_sum(&p.v4_header(8 + p.payload.len())));
            let (field, name) = match variant {
                0 => (correct, "checksum field 0x0000"),
                // 0xFFFF is the other ones'-complement zero: the sum still folds to 0xFFFF.
                1 => (
                    if correct == 0 { 0xffff } else { correct },
                    "checksum field 0xFFFF",
                ),
                2 => (correct, "two end-around carries"),
                _ => (correct.wrapping_add(1), "checksum field one off"),
            };
            p.csum = Some(field);
            let f = p.build();
            let l2 = p.l2_len();
            let valid = fold(word_sum(&f[l2..l2 + 4 * usize::from(ihl)])) == 0xffff;
            v.push((f, valid, format!("csum rx ipv4 ihl {ihl} x {name}")));
        }
    }
    v
}

/// Random traffic with operands biased to the corners: the inner IPv4 ID solved so that the
/// outer IPv4 header sum hits a random corner; payload words of GUE-over-IPv6 packets solved
/// the same way.
fn biased(w: &World, rng: &mut StdRng, n: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut frames = Vec::with_capacity(n);
    let ctx = Context {
        tables: &w.tables,
        bank: 0,
        settings: &w.settings,
        enabled: true,
        conntrack: &w.ct,
    };
    let mut out = vec![0u8; PUNT_BYTES];
    for _ in 0..n {
        let d = Delivery::ALL[rng.random_range(0..3)];
        let outer_v6 = rng.random_bool(0.5);
        let inner_v6 = rng.random_bool(0.3);
        let proto = if rng.random_bool(0.5) { 6 } else { 17 };
        let mut p = {
            let port = port_of(rng, d, outer_v6);
            Pkt::new(rng, inner_v6, proto, port, 0)
        };
        p.payload = (0..rng.random_range(2..600))
            .map(|_| rng.random())
            .collect();
        p.pad = if rng.random_bool(0.2) {
            rng.random_range(1..8)
        } else {
            0
        };
        let aim = AIMS[rng.random_range(0..AIMS.len())];
        let l2 = p.l2_len();
        if d != Delivery::L2Dsr && !outer_v6 && !inner_v6 {
            p.id = 0;
            let f = p.build();
            let r = process(&ctx, &f, &mut out).map_err(|e| format!("model: {e}"))?;
            if r.verdict == Verdict::Forward {
                let mut hb = out[l2..l2 + 20].to_vec();
                hb[10] = 0;
                hb[11] = 0;
                let s0 = word_sum(&hb);
                p.id = solve(rng, 0xffff, |x| aim_holds(aim, s0 + x)).unwrap_or(0) as u16;
            }
        } else if d == Delivery::Gue && outer_v6 {
            p.payload[0] = 0;
            p.payload[1] = 0;
            let f = p.build();
            let r = process(&ctx, &f, &mut out).map_err(|e| format!("model: {e}"))?;
            if r.verdict == Verdict::Forward {
                let p0 = word_sum(&f[l2..f.len() - p.pad]);
                let o = &out[l2..];
                let hdr = word_sum(&o[8..40]) + word_sum(&o[40..46]) + word_sum(&o[44..46]) + 17;
                if let Some(x) = solve(rng, 0xffff, |x| {
                    aim_holds(aim, hdr + u64::from(fold(p0 + x)))
                }) {
                    p.payload[0] = (x >> 8) as u8;
                    p.payload[1] = x as u8;
                }
            }
        }
        frames.push(p.build());
    }
    Ok(frames)
}

/// Frames whose output is exactly 9018 bytes, one less and one more, per delivery x outer
/// family x VLAN tags, with the expected verdict (docs/pipeline.md §9) and the bin.
fn size_limits(rng: &mut StdRng) -> Vec<(Vec<u8>, Reason, String)> {
    let mut v = Vec::new();
    for d in Delivery::ALL {
        for outer_v6 in [false, true] {
            for tags in 0..3 {
                for (delta, name) in [(-1i64, "below"), (0, "at"), (1, "above")] {
                    let target = (MAX_OUT as i64 + delta) as usize;
                    let inner_v6 = rng.random_bool(0.5);
                    let proto = if rng.random_bool(0.5) { 6 } else { 17 };
                    let mut p = {
                        let port = port_of(rng, d, outer_v6);
                        Pkt::new(rng, inner_v6, proto, port, 0)
                    };
                    p.tags = tags;
                    let l2 = p.l2_len();
                    let outer = if outer_v6 { 40 } else { 20 };
                    let ip_len = match d {
                        Delivery::L2Dsr => {
                            // Padding counts for L2 DSR (the frame goes out whole).
                            p.pad = rng.random_range(0..4);
                            target - l2 - p.pad
                        }
                        Delivery::Ipip => target - l2 - outer,
                        Delivery::Gue => target - l2 - outer - 8,
                    };
                    if d != Delivery::L2Dsr {
                        // Padding does not (dropped by the encapsulation).
                        p.pad = rng.random_range(0..4);
                    }
                    p.set_ip_len(ip_len);
                    let reason = if delta > 0 {
                        Reason::TooBig
                    } else {
                        Reason::Forwarded
                    };
                    let fam = if outer_v6 { "v6" } else { "v4" };
                    v.push((
                        p.build(),
                        reason,
                        format!(
                            "size {} x outer {fam} x tags {tags} x {name} 9018",
                            d.name()
                        ),
                    ));
                }
            }
        }
    }
    v
}

/// Minimum frames, header-length extremes, IPv6 extension chains at their limits, port-range
/// ends and table ends, each with the reason docs/pipeline.md gives it (`None`: the model
/// decides, e.g. the default action) and its bin.
fn extremes(rng: &mut StdRng, p: &Profile) -> Vec<(Vec<u8>, Option<Reason>, String)> {
    let mut v: Vec<(Vec<u8>, Option<Reason>, String)> = Vec::new();
    let fwd = Some(Reason::Forwarded);
    // Minimum frames.
    let mut f = {
        let port = port_of(rng, Delivery::L2Dsr, false);
        Pkt::new(rng, false, 17, port, 0)
    }
    .build();
    f.truncate(13);
    v.push((f, Some(Reason::Runt), "min 13 bytes x RUNT".into()));
    let mut f = Pkt::new(rng, false, 17, 0, 0).build();
    f.truncate(14);
    f[12] = 0x08;
    f[13] = 0x00;
    v.push((
        f,
        Some(Reason::TruncatedL3),
        "min 14 bytes x TRUNCATED_L3".into(),
    ));
    for d in Delivery::ALL {
        for outer_v6 in [false, true] {
            for inner_v6 in [false, true] {
                let mut q = {
                    let port = port_of(rng, d, outer_v6);
                    Pkt::new(rng, inner_v6, 17, port, 0)
                };
                q.tags = 0;
                let fam = if inner_v6 { "v6" } else { "v4" };
                let n = q.build().len();
                v.push((
                    q.build(),
                    fwd,
                    format!("min {fam} udp ({n} bytes) x {}", d.name()),
                ));
                if !inner_v6 {
                    q.pad = 60 - n;
                    v.push((
                        q.build(),
                        fwd,
                        format!("min 60-byte frame (padded) x {}", d.name()),
                    ));
                }
            }
        }
    }
    // IHL extremes.
    for (ihl, reason, name) in [
        (4u8, Some(Reason::BadIhl), "ihl 4 x BAD_IHL"),
        (5, fwd, "ihl 5 x FORWARDED"),
        (15, fwd, "ihl 15 x FORWARDED"),
    ] {
        for d in Delivery::ALL {
            let ov6 = rng.random_bool(0.5);
            let port = port_of(rng, d, ov6);
            let mut q = Pkt::new(rng, false, 6, port, 30);
            q.ihl = ihl;
            q.opt_fill = 1; // NOP options
            v.push((q.build(), reason, name.to_string()));
        }
    }
    // IHL 15 whose total length ends inside the options.
    let mut q = {
        let port = port_of(rng, Delivery::L2Dsr, false);
        Pkt::new(rng, false, 17, port, 0)
    };
    q.ihl = 15;
    let mut f = q.build();
    let l2 = q.l2_len();
    f[l2 + 2] = 0;
    f[l2 + 3] = 59;
    f[l2 + 10] = 0;
    f[l2 + 11] = 0;
    let c = !fold(word_sum(&f[l2..l2 + 60]));
    f[l2 + 10..l2 + 12].copy_from_slice(&c.to_be_bytes());
    v.push((
        f,
        Some(Reason::BadIpLength),
        "ihl 15 x total length 59 x BAD_IP_LENGTH".into(),
    ));
    // IPv6 extension chains: four headers (the most the parser reads) and five; the last
    // length whose UDP header still ends in the 192-byte window, and 8 bytes more.
    for tags in 0..3usize {
        let ip = 14 + 4 * tags;
        // Largest ext total (multiple of 8) with ip + 40 + ext + 8 <= 192.
        let fit = (192 - ip - 40 - 8) / 8 * 8;
        for (total, name, reason) in [
            (fit, "udp header ends in the window", fwd),
            (
                fit + 8,
                "udp header past the window",
                Some(Reason::ExtChainTooLong),
            ),
        ] {
            let mut q = {
                let port = port_of(rng, Delivery::L2Dsr, true);
                Pkt::new(rng, true, 17, port, 20)
            };
            q.tags = tags;
            // Four headers sharing `total` bytes (each a multiple of 8, at most 2048).
            let mut parts = vec![8usize; 4];
            parts[0] = total - 24;
            q.ext = parts;
            v.push((q.build(), reason, format!("v6 ext x 4 headers x {name}")));
        }
        let mut q = {
            let port = port_of(rng, Delivery::L2Dsr, true);
            Pkt::new(rng, true, 17, port, 20)
        };
        q.tags = tags;
        q.ext = vec![8; 5];
        v.push((
            q.build(),
            Some(Reason::ExtChainTooLong),
            "v6 ext x 5 headers".into(),
        ));
        // The fourth header, the last the parser reads (docs/pipeline.md §2, IPv6 step 4.1, 4.2
        // and 4.4): its first 8 bytes past the window; the packet ending 4 bytes into it; a
        // 16-byte fourth header whose second half is past the packet's end.
        let first3 = (192 - ip - 40) / 8 * 8;
        q.ext = vec![first3 - 16, 8, 8, 8];
        v.push((
            q.build(),
            Some(Reason::ExtChainTooLong),
            "v6 ext x 4th header's first 8 bytes past the window".into(),
        ));
        for (fourth, inside, name) in [
            (
                8,
                4,
                "v6 ext x packet ends inside the 4th header's first 8 bytes",
            ),
            (16, 8, "v6 ext x 4th header's length past the packet's end"),
        ] {
            q.ext = vec![8, 8, 8, fourth];
            let mut f = q.build();
            let plen = 24 + inside;
            f[ip + 4..ip + 6].copy_from_slice(&(plen as u16).to_be_bytes());
            f.truncate(ip + 40 + plen);
            v.push((f, Some(Reason::BadIpLength), name.into()));
        }
    }
    // Three VLAN tags.
    let mut q = {
        let port = port_of(rng, Delivery::L2Dsr, false);
        Pkt::new(rng, false, 17, port, 10)
    };
    q.tags = 3;
    v.push((
        q.build(),
        Some(Reason::TooManyVlans),
        "tags 3 x TOO_MANY_VLANS".into(),
    ));
    // Port-range ends.
    for port in [0u16, 1, 2, 65533, 65534, 65535, 19999, 20000, 20009, 20010] {
        let q = Pkt::new(rng, false, 17, port, 10);
        let matched = matches!(port, 0 | 1 | 65534 | 65535 | 20000 | 20009);
        let (reason, name) = if matched {
            (fwd, "matched")
        } else {
            (Some(Reason::NoRule), "unmatched")
        };
        v.push((q.build(), reason, format!("port {port} x {name}")));
    }
    // Table ends.
    for (port, reason, name) in [
        (
            30000u16,
            fwd,
            "last rule, pool, Maglev slot and backend x FORWARDED",
        ),
        (
            30001,
            Some(Reason::NoRule),
            "rule one past the table x NO_RULE",
        ),
        (
            30002,
            Some(Reason::NoBackend),
            "pool one past the table x NO_BACKEND",
        ),
        (
            30003,
            Some(Reason::NoBackend),
            "Maglev slot one past the memory x NO_BACKEND",
        ),
        (
            30004,
            Some(Reason::NoBackend),
            "backend one past the table x NO_BACKEND",
        ),
    ] {
        let q = Pkt::new(rng, false, 17, port, 10);
        v.push((q.build(), reason, format!("table end x {name}")));
    }
    let mut q = Pkt::new(rng, false, 17, 53, 10);
    q.dst4 = *last_bucket_vips(p).last().unwrap_or(&0);
    q.payload.clear();
    v.push((
        q.build(),
        fwd,
        "table end x VIP in the last bucket's last way x FORWARDED".into(),
    ));
    // Later fragments have no ports (SPEC R4.3): the VIP's one rule decides (that last VIP
    // has one slot); a VIP with no slot has no rule for them, as for a whole packet.
    q.payload = (0..24).map(|_| rng.random()).collect();
    q.frag = Some((false, 185));
    v.push((
        q.build(),
        fwd,
        "later fragment x VIP with one rule x FORWARDED".into(),
    ));
    q.dst4 = VIP4_NO_SLOTS;
    v.push((
        q.build(),
        Some(Reason::NoRule),
        "later fragment x VIP with no port slot x NO_RULE".into(),
    ));
    q.frag = None;
    v.push((
        q.build(),
        Some(Reason::NoRule),
        "whole packet x VIP with no port slot x NO_RULE".into(),
    ));
    v
}

/// TCP flows to the tracked pool whose connection-table bucket is the last one (client ports
/// searched), one per way: the last is the table's last entry.
fn last_bucket_flows(p: &Profile) -> Vec<(u16, u32)> {
    let mut v = Vec::new();
    let mut port = 1024u16;
    while v.len() < p.ct_ways as usize {
        let key = FlowKey {
            key_type: KeyType::Tuple5,
            protocol: 6,
            src_port: port,
            dst_port: PORT_TRACKED,
            src_addr: mapped(CLIENT4),
            dst_addr: mapped(VIP4),
        };
        if table_index(key.hash(), p.ct_buckets) == p.ct_buckets - 1 {
            let index = (p.ct_buckets - 1) * p.ct_ways + v.len() as u32;
            v.push((port, index));
        }
        port += 1;
    }
    v
}

/// First fragments on a VIP entry with several rules: punted with their rule (docs/pipeline.md
/// §5), so the rule, reason and verdict counters count punts.
fn fragments(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let d = Delivery::ALL[rng.random_range(0..3)];
            let mut q = {
                let v6 = rng.random_bool(0.3);
                let port = port_of(rng, d, false);
                Pkt::new(rng, v6, 17, port, 64)
            };
            q.frag = Some((true, 0));
            q.build()
        })
        .collect()
}

// ---- counters ------------------------------------------------------------------------------

/// The counters the traffic reaches (and so the ones preset), plus one past each family.
fn counter_set(p: &Profile) -> Vec<(CounterKind, u32)> {
    let mut v = Vec::new();
    for r in [0, 1, 2, 3, 4, 5, p.rules - 1] {
        v.push((CounterKind::Rule, r));
    }
    for b in [0, 1, p.backends - 1] {
        v.push((CounterKind::Backend, b));
    }
    for r in Reason::ALL {
        v.push((CounterKind::Reason, r.value()));
    }
    for x in Verdict::ALL {
        v.push((CounterKind::Verdict, x.value()));
    }
    v
}

fn kind_name(k: CounterKind) -> &'static str {
    match k {
        CounterKind::Rule => "rule",
        CounterKind::Backend => "backend",
        CounterKind::Reason => "reason",
        CounterKind::Verdict => "verdict",
    }
}

/// Presets one counter in the RTL (the simulation-only port) and in the model.
fn preset(
    dut: &mut TopBench,
    w: &mut World,
    kind: CounterKind,
    index: u32,
    c: Counter,
) -> Result<(), VerifError> {
    let sim = &mut dut.bench.sim;
    let valid = sim.port("sim_cnt_preset_valid")?;
    let k = sim.port("sim_cnt_preset_kind")?;
    let i = sim.port("sim_cnt_preset_index")?;
    let val = sim.port("sim_cnt_preset_value")?;
    // {drops, punts, bytes, packets}, little-endian 32-bit words.
    let words: Vec<u32> = [c.packets, c.bytes, c.punts, c.drops]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect::<Vec<u8>>()
        .chunks(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    sim.set(val, &words)?;
    sim.set_u64(k, u64::from(kind.value()))?;
    sim.set_u64(i, u64::from(index))?;
    sim.set_bit(valid, true)?;
    dut.step()?;
    dut.bench.sim.set_bit(valid, false)?;
    dut.step()?;
    if !w.counters.preset(kind, index, c) {
        return Err(VerifError::Setup(format!("model counter {kind:?} {index}")));
    }
    Ok(())
}

/// Reads every counter of the set (and one past each family) through the registers and
/// compares it with the model's; counts the ones that crossed `edge` (2^32) or wrapped past
/// 2^64 (edge 0) since `before`.
fn compare_counters(
    dut: &mut TopBench,
    w: &mut World,
    rng: &mut StdRng,
    p: &Profile,
    before: &BTreeMap<(u32, u32), Counter>,
    round: usize,
    bins: &mut Bins,
) -> Result<(), String> {
    let mut set = counter_set(p);
    set.extend([
        (CounterKind::Rule, p.rules),
        (CounterKind::Backend, p.backends),
        (CounterKind::Reason, Reason::ALL.len() as u32),
        (CounterKind::Verdict, Verdict::ALL.len() as u32),
    ]);
    for (kind, index) in set {
        let clear = round == 1 && rng.random_bool(0.3);
        let got = dut
            .read_counter(kind, index, clear)
            .map_err(|e| e.to_string())?;
        let want = if clear {
            w.counters.take(kind, index)
        } else {
            w.counters.get(kind, index)
        };
        if got != want {
            return Err(format!(
                "counter {kind:?} {index} (clear {clear}): RTL {got:?}, model {want:?}"
            ));
        }
        let Some(b) = before.get(&(kind.value(), index)) else {
            continue;
        };
        for (field, x0, x1) in [
            ("packets", b.packets, want.packets),
            ("bytes", b.bytes, want.bytes),
            ("punts", b.punts, want.punts),
            ("drops", b.drops, want.drops),
        ] {
            let k = kind_name(kind);
            if round == 0 && x0 < TWO_POW_32 && x1 >= TWO_POW_32 {
                bin(bins, format!("counter {k} {field} x across 2^32"));
            }
            if round == 1 && x1 < x0 {
                bin(bins, format!("counter {k} {field} x wraps past 2^64"));
            }
        }
    }
    Ok(())
}

// ---- the test ------------------------------------------------------------------------------

/// Value-biased packets per round: `NLB_CORNER_PACKETS` (default 1000).
fn biased_packets() -> usize {
    std::env::var("NLB_CORNER_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn required_bins() -> Vec<String> {
    let mut b = Vec::new();
    for mode in ["ipip", "gue"] {
        for inner in ["v4", "v6"] {
            let kind = format!("outer ipv4 ({mode}, inner {inner})");
            for c in [
                "no carry",
                "one end-around carry",
                "two end-around carries",
                "checksum 0x0000",
                "checksum 0x0001",
            ] {
                b.push(format!("csum {kind} x {c}"));
            }
        }
    }
    for inner in ["v4", "v6"] {
        let kind = format!("gue over ipv6 (inner {inner})");
        b.push(format!("csum {kind} payload sum x two end-around carries"));
        b.push(format!("csum {kind} payload sum x folds to 0xFFFF"));
        b.push(format!("csum {kind} udp x one end-around carry"));
        b.push(format!("csum {kind} udp x two end-around carries"));
        b.push(format!("csum {kind} udp x computes 0x0000, sent 0xFFFF"));
        b.push(format!("csum {kind} udp x computes 0x0001"));
    }
    for ihl in [5, 15] {
        for name in [
            "checksum field 0x0000",
            "checksum field 0xFFFF",
            "two end-around carries",
            "checksum field one off",
        ] {
            b.push(format!("csum rx ipv4 ihl {ihl} x {name}"));
        }
    }
    for d in Delivery::ALL {
        for fam in ["v4", "v6"] {
            for tags in 0..3 {
                for name in ["below", "at", "above"] {
                    b.push(format!(
                        "size {} x outer {fam} x tags {tags} x {name} 9018",
                        d.name()
                    ));
                }
            }
        }
    }
    for d in ["L2_DSR", "IPIP", "GUE"] {
        b.push(format!("min v4 udp (42 bytes) x {d}"));
        b.push(format!("min v6 udp (62 bytes) x {d}"));
        b.push(format!("min 60-byte frame (padded) x {d}"));
    }
    for name in [
        "min 13 bytes x RUNT",
        "min 14 bytes x TRUNCATED_L3",
        "ihl 4 x BAD_IHL",
        "ihl 5 x FORWARDED",
        "ihl 15 x FORWARDED",
        "ihl 15 x total length 59 x BAD_IP_LENGTH",
        "v6 ext x 4 headers x udp header ends in the window",
        "v6 ext x 4 headers x udp header past the window",
        "v6 ext x 5 headers",
        "v6 ext x 4th header's first 8 bytes past the window",
        "v6 ext x packet ends inside the 4th header's first 8 bytes",
        "v6 ext x 4th header's length past the packet's end",
        "tags 3 x TOO_MANY_VLANS",
        "table end x last rule, pool, Maglev slot and backend x FORWARDED",
        "table end x rule one past the table x NO_RULE",
        "table end x pool one past the table x NO_BACKEND",
        "table end x Maglev slot one past the memory x NO_BACKEND",
        "table end x backend one past the table x NO_BACKEND",
        "table end x VIP in the last bucket's last way x FORWARDED",
        "later fragment x VIP with one rule x FORWARDED",
        "later fragment x VIP with no port slot x NO_RULE",
        "whole packet x VIP with no port slot x NO_RULE",
        "table end x connection-table last entry x hit",
    ] {
        b.push(name.to_string());
    }
    for port in [0, 1, 65534, 65535, 20000, 20009] {
        b.push(format!("port {port} x matched"));
    }
    for port in [2, 65533, 19999, 20010] {
        b.push(format!("port {port} x unmatched"));
    }
    for (k, fields) in [
        ("rule", &["packets", "bytes", "punts", "drops"][..]),
        ("backend", &["packets", "bytes", "drops"][..]),
        ("reason", &["packets", "bytes", "punts", "drops"][..]),
        ("verdict", &["packets", "bytes", "punts", "drops"][..]),
    ] {
        for f in fields {
            b.push(format!("counter {k} {f} x across 2^32"));
            b.push(format!("counter {k} {f} x wraps past 2^64"));
        }
    }
    b
}

/// One run: two rounds of all the traffic, counters preset near 2^32 before the first and
/// near 2^64 before the second.
fn run(seed: u64, bins: &mut Bins) -> Result<usize, String> {
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let wave = wave_path("corners", seed);
    // On the HBM model (docs/verification.md "The HBM model"): the tables load on a quick
    // memory, the traffic runs on the realistic one.
    let hbm = HbmConfig::realistic(seed as u32);
    let mut dut = TopBench::with_memory(
        Some(&HbmConfig::quick(seed as u32)),
        seed,
        trace_always().then_some(wave.as_path()),
        0.1,
        0.2,
        0.2,
    )
    .map_err(|e| e.to_string())?;
    let mut w = World {
        tables: bank(p),
        settings: NicSettings {
            default_action: DefaultAction::Drop,
            outer_src_v4: 0xfff0_0000 | rng.random_range(0..0x10_0000),
            outer_src_v4_len: 32,
            outer_src_v6: 0x2001_0db8_00aa_0000_0000_0000_0000_0000,
            outer_src_v6_len: 64,
            ..NicSettings::default()
        },
        ct: ConnTable::new(p.ct_buckets, p.ct_ways),
        counters: Counters::new(p),
    };
    let s = w.settings;
    set_settings(&mut dut, &mut w, s)?;
    dut.load_bank(0, &w.tables).map_err(|e| e.to_string())?;
    dut.write32(nlb_hw::blocks::ctrl::ACTIVE_BANK, 0)
        .map_err(|e| e.to_string())?;
    dut.write32(nlb_hw::blocks::ctrl::ENABLE, 1)
        .map_err(|e| e.to_string())?;
    // The connection table's last bucket, every way valid; the flows' entries name backend 1
    // (Maglev would give backend 0), so a hit shows in the result.
    for (port, index) in last_bucket_flows(p) {
        let e = CtEntry {
            valid: true,
            protocol: 6,
            src_port: port,
            dst_port: PORT_TRACKED,
            src_addr: mapped(CLIENT4),
            dst_addr: mapped(VIP4),
            backend: 1,
            rule: RULE_TRACKED,
            flags: 0,
            timestamp: 0,
        };
        dut.write_ct(index, &e).map_err(|e| e.to_string())?;
        w.ct.write(index, e)
            .map_err(|e| format!("model conntrack: {e}"))?;
    }
    dut.set_hbm(&hbm).map_err(|e| e.to_string())?;
    let mut packets = 0usize;
    for round in 0..2 {
        // Counters just below 2^32 (round 0) or 2^64 (round 1).
        let top: u64 = if round == 0 { TWO_POW_32 } else { 0 };
        let mut before = BTreeMap::new();
        for (kind, index) in counter_set(p) {
            let c = Counter {
                packets: top.wrapping_sub(rng.random_range(1..3)),
                bytes: top.wrapping_sub(rng.random_range(1..60)),
                punts: top.wrapping_sub(1),
                drops: top.wrapping_sub(1),
            };
            preset(&mut dut, &mut w, kind, index, c).map_err(|e| e.to_string())?;
            before.insert((kind.value(), index), c);
        }

        // Checksums.
        outer_v4_directed(&mut dut, &mut w, &mut rng, bins)?;
        packets += 20;
        let mut frames = gue6_directed(&w, &mut rng)?;
        frames.extend(biased(&w, &mut rng, biased_packets())?);
        packets += frames.len();
        for done in run_batch(&mut dut, &mut w, frames)? {
            check_wire(&done, &w.tables, bins)?;
        }
        let rx = rx_checksums(&mut rng);
        let done = run_batch(&mut dut, &mut w, rx.iter().map(|r| r.0.clone()).collect())?;
        packets += done.len();
        for (d, (_, valid, name)) in done.iter().zip(&rx) {
            let rejected = d.result.reason == Reason::BadIpChecksum;
            if rejected == *valid {
                return Err(format!(
                    "{name}: header sum {} the checksum, the pipeline says {:?}: {}",
                    if *valid { "accepts" } else { "rejects" },
                    d.result.reason,
                    hex(&d.frame)
                ));
            }
            bin(bins, name.clone());
        }

        // Size limits.
        let sizes = size_limits(&mut rng);
        let done = run_batch(
            &mut dut,
            &mut w,
            sizes.iter().map(|s| s.0.clone()).collect(),
        )?;
        packets += done.len();
        for (d, (_, reason, name)) in done.iter().zip(&sizes) {
            if d.result.reason != *reason {
                return Err(format!(
                    "{name}: {:?} ({} bytes out), expected {reason:?}",
                    d.result.reason, d.result.out_len
                ));
            }
            check_wire(d, &w.tables, bins)?;
            bin(bins, name.clone());
        }
        let ext = extremes(&mut rng, p);
        let done = run_batch(&mut dut, &mut w, ext.iter().map(|s| s.0.clone()).collect())?;
        packets += done.len();
        for (d, (_, reason, name)) in done.iter().zip(&ext) {
            if reason.is_some_and(|r| r != d.result.reason) {
                return Err(format!(
                    "{name}: {:?}, expected {reason:?}: {}",
                    d.result.reason,
                    hex(&d.frame)
                ));
            }
            check_wire(d, &w.tables, bins)?;
            bin(bins, name.clone());
        }
        // Every way of the connection table's last bucket hit; the last one is the table's
        // last entry; its hit bit is bit 31 of the last hit word.
        let flows = last_bucket_flows(p);
        let frames = flows
            .iter()
            .map(|&(port, _)| {
                let mut q = Pkt::new(&mut rng, false, 6, PORT_TRACKED, 10);
                q.sport = port;
                q.build()
            })
            .collect();
        let done = run_batch(&mut dut, &mut w, frames)?;
        packets += done.len();
        for (d, &(_, index)) in done.iter().zip(&flows) {
            if d.result.conntrack != CtOutcome::Hit || d.result.ct_index != Some(index) {
                return Err(format!(
                    "a flow of connection-table entry {index} did not hit it: {:?}",
                    d.result
                ));
            }
        }
        bin(bins, "table end x connection-table last entry x hit".into());
        let last_word = p.ct_entries() - 32;
        dut.write32(conntrack::INDEX, last_word)
            .map_err(|e| e.to_string())?;
        let hits = dut.read32(conntrack::HIT_READ).map_err(|e| e.to_string())?;
        let want = flows
            .iter()
            .fold(0u32, |acc, &(_, i)| acc | 1 << (i - last_word));
        if hits != want {
            return Err(format!(
                "hit bits of entries {last_word}..: RTL {hits:#010x}, expected {want:#010x}"
            ));
        }

        let frags = fragments(&mut rng, 6);
        packets += frags.len();
        for d in run_batch(&mut dut, &mut w, frags)? {
            if d.result.verdict != Verdict::Punt {
                return Err(format!("a first fragment was not punted: {:?}", d.result));
            }
        }

        compare_counters(&mut dut, &mut w, &mut rng, p, &before, round, bins)?;
    }
    if !dut.axil.violations().is_empty() {
        return Err(format!("AXI-Lite: {:?}", dut.axil.violations()));
    }
    Ok(packets)
}

#[test]
fn corner_values_match_the_model() {
    let seed = seed_from_env(0xc02e_0001);
    let start = std::time::Instant::now();
    let mut bins = Bins::new();
    let packets = match run(seed, &mut bins) {
        Ok(n) => n,
        Err(e) => panic!(
            "corners: {e}\n  seed {seed:#x} (rerun with NLB_SEED={seed:#x}; NLB_TRACE=1 writes {})",
            wave_path("corners", seed).display()
        ),
    };
    eprintln!(
        "{packets} packets, {:.1} s; value bins:",
        start.elapsed().as_secs_f64()
    );
    coverage::print(&bins, "value bins");
    coverage::assert_hit(
        &bins,
        required_bins(),
        "value bins",
        &format!("seed {seed:#x}"),
    );
}
