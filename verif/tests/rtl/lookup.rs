//! `nlb_lookup` (the lookup pipeline, docs/pipeline.md sections 3-10) on its own against the
//! golden model's decision for a parsed frame, `firmware_sim::pipeline::decide` /
//! `decide_injected` (the result `process` gives, without writing the frame).
//!
//! Descriptors go straight to the block's `s_*` ports (not through the parser): the parse
//! results of the scenario traffic (`nlb_verif::scenario`: hot flows that hit the connection
//! table, fragments, ICMP errors either way round, portless protocols, random and malformed
//! frames), injected frames, and directed corners built as `IpHeaders`: VIP entries in the
//! first and the last bucket, in the first and the last way of full buckets; connection
//! entries in the first and last bucket and way, buckets full; port-range ends (ports 0 and
//! 65535, each range's ends and one past them); ACL prefixes of lengths 0, 1, 96 + 24, 127,
//! 128 (an IPv4 /32) and past 128, each admitting its client and refusing the client one bit
//! outside, at every prefix index (the last, index 7, too: the point the coverage run never
//! reached, see docs/verification.md); frame sizes at the output limit; the rule, pool and
//! backend tables' last entries. The bench plays every table memory: two banks of `Tables`
//! (`sim` profile), the on-chip tables answered `RD_LATENCY` clocks after each read from the
//! bank the read names, noise on the data lines in between; the connection table (a `ConnTable`
//! of the profile's shape) and the Maglev slots behind the block's memory ports
//! (`nlb_verif::axi_mem`: 4 and 2 channels, 2-60 clocks of latency, answers in any order,
//! random refusals and gaps), in the memory layout of docs/pipeline.md §14. Each descriptor's bank, enable and default action are random, so the bank flips
//! between neighbours. Results are compared field by field, in order (verdict, reason, bank,
//! rule, pool, backend, key, connection-table outcome and index, flow hash, IP id, lengths,
//! event and its flow; for a FORWARD the delivery and the backend entry); every hit-bit set
//! must be the hit of the result that follows it. Value bins printed, all required.

use firmware_sim::parse::{self, Family, InnerFlow, IpHeaders, Parsed};
use firmware_sim::pipeline::{self, Context};
use firmware_sim::{ConnTable, CtOutcome, PacketResult};
use nlb_hw::enums::{DefaultAction, Reason, Table, Verdict};
use nlb_hw::layouts::{
    AclEntry, AclPrefix, BackendEntry, InjectHeader, MaglevSlot, PoolEntry, PortSlot, RuleEntry,
    VipEntry,
};
use nlb_hw::{NicSettings, Profile, Tables};
use nlb_verif::axi_mem::{AxiMem, Timing};
use nlb_verif::bench::seed_from_env;
use nlb_verif::models::Lookup;
use nlb_verif::scenario::{is_mapped, mapped, Flow, Scenario};
use nlb_verif::{Port, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

/// Clocks from a table read's enable to its data (nlb_table_mem with its output register).
const RD_LATENCY: u64 = 2;
/// Clocks from a descriptor's `s_valid` to its result's `m_valid` when the block is idle and
/// the packet reads no table memory: the edge into the FIFO, the edge that issues it (into
/// stage I), the 19 front stages, each memory stage's entry, exit and its 2-clock output, X0
/// (hardware learning's merge), X1, X2, and the 3 back stages.
const IDLE_LATENCY: u64 = 33;
/// The memory ports as the `lookup` model is built (verif/build.rs): channels, data width.
const CT_CHANNELS: usize = 4;
const MG_CHANNELS: usize = 2;
const MEM_DATA_W: usize = 256;
/// The first rule of the directed ACL corners (8 VIPs x 7 prefix lengths follow it).
const FIRST_ACL_RULE: u16 = 180;
/// TCP protocol number, UDP.
const TCP: u8 = 6;
const UDP: u8 = 17;

use nlb_verif::coverage::Bins;

fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

// ---- the descriptor --------------------------------------------------------------------------

/// One descriptor as the parser hands it on, with the ctrl bits it latched.
#[derive(Debug, Clone)]
struct Desc {
    bank: u8,
    enable: bool,
    default_drop: bool,
    inject: Option<InjectHeader>,
    len: usize,
    parsed: Result<Parsed, Reason>,
    /// What the case is, for a failure.
    what: &'static str,
}

/// `s_user` as nlb_top builds it from the ctrl bits and the inject header (bits 31..16
/// backend, 15..4 pool, 3 injected, 2 default action DROP, 1 enable, 0 bank).
fn user_word(d: &Desc) -> u32 {
    let (inj, pool, backend) = d
        .inject
        .map_or((0, 0, 0), |h| (1, u32::from(h.pool), u32::from(h.backend)));
    backend << 16
        | pool << 4
        | inj << 3
        | u32::from(d.default_drop) << 2
        | u32::from(d.enable) << 1
        | u32::from(d.bank)
}

fn words128(v: u128) -> [u32; 4] {
    let b = v.to_le_bytes();
    std::array::from_fn(|i| {
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
}

fn u128_of(w: &[u32]) -> u128 {
    let mut b = [0u8; 16];
    for (i, x) in w.iter().take(4).enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
    u128::from_le_bytes(b)
}

/// The descriptor ports.
struct Inputs {
    valid: Port,
    ports: BTreeMap<&'static str, Port>,
}

const IN_PORTS: &[&str] = &[
    "s_user",
    "s_len",
    "s_malformed",
    "s_reason",
    "s_not_ip",
    "s_ipv6",
    "s_l3_offset",
    "s_l3_end",
    "s_tos",
    "s_dont_fragment",
    "s_protocol",
    "s_src",
    "s_dst",
    "s_fragment",
    "s_frag_offset",
    "s_ip_id",
    "s_src_port",
    "s_dst_port",
    "s_tcp_flags",
    "s_icmp_error",
    "s_inner_valid",
    "s_inner_protocol",
    "s_inner_src",
    "s_inner_dst",
    "s_inner_src_port",
    "s_inner_dst_port",
];

impl Inputs {
    fn new(sim: &Verilated) -> Inputs {
        Inputs {
            valid: sim.port("s_valid").expect("s_valid"),
            ports: IN_PORTS
                .iter()
                .map(|&n| (n, sim.port(n).expect(n)))
                .collect(),
        }
    }

    fn set(&self, sim: &mut Verilated, name: &str, v: u128) {
        let port = self.ports[name];
        let words = words128(v);
        sim.set(port, &words[..(port.width as usize).div_ceil(32)])
            .expect(name);
    }

    /// Drives `d` (or, without one, noise with `s_valid` low). Fields a descriptor does not
    /// define (those of a malformed frame or one that is not IP) carry noise.
    fn drive(&self, sim: &mut Verilated, d: Option<&Desc>, rng: &mut StdRng) {
        sim.set_bit(self.valid, d.is_some()).expect("s_valid");
        for name in IN_PORTS {
            self.set(sim, name, rng.random());
        }
        let Some(d) = d else { return };
        self.set(sim, "s_user", u128::from(user_word(d)));
        self.set(sim, "s_len", d.len as u128);
        let flag = |b: bool| u128::from(b);
        self.set(sim, "s_malformed", flag(d.parsed.is_err()));
        self.set(sim, "s_not_ip", flag(matches!(d.parsed, Ok(Parsed::NotIp))));
        match &d.parsed {
            Err(reason) => self.set(sim, "s_reason", u128::from(reason.value())),
            Ok(Parsed::NotIp) => {}
            Ok(Parsed::Ip(h)) => {
                self.set(sim, "s_reason", 0);
                self.set(sim, "s_ipv6", flag(h.family == Family::V6));
                self.set(sim, "s_l3_offset", h.l3_offset as u128);
                self.set(sim, "s_l3_end", h.l3_end as u128);
                self.set(sim, "s_tos", u128::from(h.tos));
                self.set(sim, "s_dont_fragment", flag(h.dont_fragment));
                self.set(sim, "s_protocol", u128::from(h.protocol));
                self.set(sim, "s_src", h.src);
                self.set(sim, "s_dst", h.dst);
                self.set(sim, "s_fragment", flag(h.is_fragment));
                self.set(sim, "s_frag_offset", u128::from(h.fragment_offset));
                self.set(sim, "s_ip_id", u128::from(h.ip_id));
                self.set(sim, "s_src_port", u128::from(h.src_port));
                self.set(sim, "s_dst_port", u128::from(h.dst_port));
                self.set(sim, "s_tcp_flags", u128::from(h.tcp_flags));
                self.set(sim, "s_icmp_error", flag(h.icmp_error));
                self.set(sim, "s_inner_valid", flag(h.icmp_inner.is_some()));
                if let Some(i) = h.icmp_inner {
                    self.set(sim, "s_inner_protocol", u128::from(i.protocol));
                    self.set(sim, "s_inner_src", i.src);
                    self.set(sim, "s_inner_dst", i.dst);
                    self.set(sim, "s_inner_src_port", u128::from(i.src_port));
                    self.set(sim, "s_inner_dst_port", u128::from(i.dst_port));
                }
            }
        }
    }
}

// ---- the result --------------------------------------------------------------------------------

/// A result as numbers, normalised so that both sides say the same about fields that do not
/// apply (the RTL reports 0 for them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Res {
    verdict: u32,
    reason: u32,
    bank: u8,
    inject: bool,
    rule: Option<u16>,
    pool: Option<u16>,
    backend: Option<u16>,
    key: Option<u32>,
    conntrack: u8,
    ct_index: Option<u32>,
    flow_hash: u32,
    ip_id: u32,
    len: u64,
    out_len: u64,
    /// (kind, protocol, client, client port, VIP, VIP port): the event and its flow.
    event: Option<(u32, u8, u128, u16, u128, u16)>,
    /// FORWARD: delivery, backend family, address, MAC.
    forward: Option<(u32, bool, u128, u64)>,
}

fn expected_res(d: &Desc, r: &PacketResult, banks: &[Tables; 2]) -> Res {
    let t = &banks[usize::from(d.bank)];
    let forward = (r.verdict == Verdict::Forward).then(|| {
        let pool = t.pools[usize::from(r.pool.expect("a FORWARD has a pool"))];
        let be = t.backends[usize::from(r.backend.expect("a FORWARD has a backend"))];
        (pool.delivery.value(), be.is_ipv6, be.addr, be.mac)
    });
    Res {
        verdict: r.verdict.value(),
        reason: r.reason.value(),
        bank: r.bank,
        inject: d.inject.is_some(),
        rule: r.rule,
        pool: r.pool,
        backend: r.backend,
        key: r.key.map(|k| k.value()),
        conntrack: match r.conntrack {
            CtOutcome::None => 0,
            CtOutcome::Hit => 1,
            CtOutcome::Miss => 2,
        },
        ct_index: r.ct_index,
        flow_hash: r.flow_hash,
        ip_id: r.ip_id,
        len: r.frame_len as u64,
        out_len: r.out_len as u64,
        event: r.event.map(|e| {
            (
                e.event.value(),
                e.protocol,
                e.src_addr,
                e.src_port,
                e.dst_addr,
                e.dst_port,
            )
        }),
        forward,
    }
}

/// The result ports.
struct Outputs {
    valid: Port,
    ports: BTreeMap<&'static str, Port>,
}

const OUT_PORTS: &[&str] = &[
    "m_inject",
    "m_verdict",
    "m_reason",
    "m_bank",
    "m_rule_valid",
    "m_rule",
    "m_pool_valid",
    "m_pool",
    "m_backend_valid",
    "m_backend",
    "m_key_valid",
    "m_key",
    "m_conntrack",
    "m_ct_index",
    "m_flow_hash",
    "m_ip_id",
    "m_len",
    "m_out_len",
    "m_event_valid",
    "m_event",
    "m_protocol",
    "m_client",
    "m_client_port",
    "m_vip",
    "m_vip_port",
    "m_delivery",
    "m_be_ipv6",
    "m_be_addr",
    "m_be_mac",
];

impl Outputs {
    fn new(sim: &Verilated) -> Outputs {
        Outputs {
            valid: sim.port("m_valid").expect("m_valid"),
            ports: OUT_PORTS
                .iter()
                .map(|&n| (n, sim.port(n).expect(n)))
                .collect(),
        }
    }

    fn read(&self, sim: &mut Verilated) -> Res {
        let mut v = BTreeMap::new();
        for (name, port) in &self.ports {
            v.insert(*name, u128_of(&sim.get_words(*port).expect(name)));
        }
        let g = |n: &str| v[n];
        let opt16 = |valid: &str, field: &str| (g(valid) != 0).then(|| g(field) as u16);
        let verdict = g("m_verdict") as u32;
        let conntrack = g("m_conntrack") as u8;
        Res {
            verdict,
            reason: g("m_reason") as u32,
            bank: g("m_bank") as u8,
            inject: g("m_inject") != 0,
            rule: opt16("m_rule_valid", "m_rule"),
            pool: opt16("m_pool_valid", "m_pool"),
            backend: opt16("m_backend_valid", "m_backend"),
            key: (g("m_key_valid") != 0).then(|| g("m_key") as u32),
            conntrack,
            ct_index: (conntrack == 1).then(|| g("m_ct_index") as u32),
            flow_hash: g("m_flow_hash") as u32,
            ip_id: g("m_ip_id") as u32,
            len: g("m_len") as u64,
            out_len: g("m_out_len") as u64,
            event: (g("m_event_valid") != 0).then(|| {
                (
                    g("m_event") as u32,
                    g("m_protocol") as u8,
                    g("m_client"),
                    g("m_client_port") as u16,
                    g("m_vip"),
                    g("m_vip_port") as u16,
                )
            }),
            forward: (verdict == Verdict::Forward.value()).then(|| {
                (
                    g("m_delivery") as u32,
                    g("m_be_ipv6") != 0,
                    g("m_be_addr"),
                    g("m_be_mac") as u64,
                )
            }),
        }
    }
}

// ---- the table memories ------------------------------------------------------------------------

/// Entries laid side by side in a memory row, lane `i` from bit `i * entry_bits`, as the
/// block's read ports carry a bucket's ways.
fn row(entries: &[Vec<u32>], entry_bits: usize) -> Vec<u32> {
    let mut out = vec![0u32; (entries.len() * entry_bits).div_ceil(32)];
    for (lane, e) in entries.iter().enumerate() {
        for b in 0..entry_bits {
            let bit = (e.get(b / 32).copied().unwrap_or(0) >> (b % 32)) & 1;
            let at = lane * entry_bits + b;
            out[at / 32] |= bit << (at % 32);
        }
    }
    out
}

/// One table's read port.
struct ReadPort {
    table: Table,
    en: Port,
    bank: Port,
    row: Port,
    data: Port,
    /// (clock the data is due, bank, row).
    pending: VecDeque<(u64, u8, u32)>,
}

/// The bench's table memories: two banks and the connection table, read through the block's
/// ports.
struct Memories {
    ports: Vec<ReadPort>,
    banks: [Tables; 2],
    ct: ConnTable,
    /// The connection table's and the Maglev slots' memory ports.
    ct_mem: AxiMem,
    mg_mem: AxiMem,
}

impl Memories {
    fn new(sim: &Verilated, banks: [Tables; 2], ct: ConnTable) -> Memories {
        let port = |n: String| sim.port(&n).expect("table port");
        let ports: Vec<ReadPort> = [
            ("vip", Table::Vip),
            ("rule", Table::Rule),
            ("acl", Table::Acl),
            ("pool", Table::Pool),
            ("backend", Table::Backend),
        ]
        .iter()
        .map(|&(p, t)| ReadPort {
            table: t,
            en: port(format!("{p}_rd_en")),
            bank: port(format!("{p}_rd_bank")),
            row: port(format!("{p}_rd_row")),
            data: port(format!("{p}_rd_data")),
            pending: VecDeque::new(),
        })
        .collect();
        let timing = Timing {
            latency: (2, 60),
            ar_refuse: 0.1,
            r_gap: 0.1,
        };
        let mem = |prefix: &str, channels: usize, row_shift: u32| {
            AxiMem::new(sim, prefix, channels, MEM_DATA_W, row_shift, timing).expect("memory port")
        };
        Memories {
            ports,
            banks,
            ct,
            ct_mem: mem("m_axi_ct", CT_CHANNELS, 8),
            mg_mem: mem("m_axi_mg", MG_CHANNELS, 5),
        }
    }

    /// A connection-table row (bucket) as the memory holds it: way `w` in words 12w..12w+11.
    fn ct_row(ct: &ConnTable, bucket: u64) -> Vec<u32> {
        let ways = ct.ways();
        let mut out = Vec::new();
        for w in 0..ways {
            let e = ct
                .entry(bucket as u32 * ways + w)
                .copied()
                .unwrap_or_default();
            out.extend(e.pack().expect("connection entries fit"));
        }
        out
    }

    /// A Maglev row: 16 slots of global slot index (bank * slots + slot), 16 bits each.
    fn mg_row(banks: &[Tables; 2], row: u64) -> Vec<u32> {
        let slots = u64::from(banks[0].profile.maglev_slots);
        let mut out = vec![0u32; 8];
        for j in 0..16u64 {
            let g = row * 16 + j;
            let t = &banks[(g / slots) as usize % 2];
            let b = t
                .maglev
                .get((g % slots) as usize)
                .map_or(0, |m| u32::from(m.backend));
            out[(j / 2) as usize] |= b << (16 * (j % 2));
        }
        out
    }

    /// The data of a read: the row's entries, packed by nlb-hw.
    fn data(&self, table: Table, bank: u8, r: u32, port_bits: usize) -> Vec<u32> {
        let t = &self.banks[usize::from(bank)];
        let lanes = if table == Table::Vip {
            t.profile.vip_ways
        } else {
            1
        };
        let entries: Vec<Vec<u32>> = (0..lanes)
            .map(|l| {
                // A row past the table (ids the block range-checks itself) reads zeros.
                t.read_entry(table, r * lanes + l)
                    .unwrap_or_else(|_| vec![0; Tables::entry_words(table)])
            })
            .collect();
        row(&entries, port_bits / lanes as usize)
    }

    /// Before the clock settles: the data of reads due now, noise on the other ports.
    fn drive(&mut self, sim: &mut Verilated, clock: u64, rng: &mut StdRng) {
        let ct = &self.ct;
        self.ct_mem
            .drive(sim, rng, clock, &|c, local| {
                Self::ct_row(ct, local * CT_CHANNELS as u64 + c as u64)
            })
            .expect("connection-table port");
        let banks = &self.banks;
        self.mg_mem
            .drive(sim, rng, clock, &|c, local| {
                Self::mg_row(banks, local * MG_CHANNELS as u64 + c as u64)
            })
            .expect("Maglev port");
        for i in 0..self.ports.len() {
            let p = &self.ports[i];
            let bits = p.data.width as usize;
            let due = p.pending.front().is_some_and(|r| r.0 == clock);
            let words = if due {
                let (_, bank, r) = self.ports[i].pending.pop_front().expect("due");
                let p = &self.ports[i];
                self.data(p.table, bank, r, bits)
            } else {
                (0..bits.div_ceil(32)).map(|_| rng.random()).collect()
            };
            sim.set(self.ports[i].data, &words).expect("rd_data");
        }
    }

    /// After the clock settles: the reads requested now.
    fn observe(&mut self, sim: &mut Verilated, clock: u64, rng: &mut StdRng) {
        self.ct_mem
            .observe(sim, rng, clock)
            .expect("connection-table port");
        self.mg_mem.observe(sim, rng, clock).expect("Maglev port");
        for p in &mut self.ports {
            if sim.get_bit(p.en).expect("rd_en") {
                let bank = sim.get_u64(p.bank).expect("bank") as u8;
                let r = sim.get_u64(p.row).expect("row") as u32;
                p.pending.push_back((clock + RD_LATENCY, bank, r));
            }
        }
    }
}

// ---- tables and descriptors --------------------------------------------------------------------

/// An address of the family whose VIP entry of `protocol` lands in `bucket`.
fn vip_in_bucket(rng: &mut StdRng, v6: bool, protocol: u8, bucket: u32) -> u128 {
    loop {
        let a = if v6 {
            0x2001_0db8_0f00_0000_0000_0000_0000_0000 | u128::from(rng.random::<u32>())
        } else {
            mapped(0x0b00_0000 | rng.random_range(0..0x00ff_ffffu32))
        };
        if nlb_reference::lookup::vip_bucket(profile(), protocol, a) == bucket {
            return a;
        }
    }
}

/// A directed VIP: address, protocol, and the ports to send (with the rule slot they hit).
#[derive(Debug, Clone)]
struct Corner {
    vip: u128,
    protocol: u8,
    ports: Vec<u16>,
    /// Clients to send from (ACL corners).
    clients: Vec<u128>,
    /// What the case is.
    what: &'static str,
}

/// An ACL prefix around `client`: its first `len` bits (of 128; 0 admits everyone).
fn prefix_of(client: u128, len: u8) -> u128 {
    if len == 0 || len > 128 {
        return client;
    }
    client & (u128::MAX << (128 - u32::from(len)))
}

/// The directed corners, written into `t` (the bank both sides read): VIPs in the first and last
/// VIP buckets, filling them (first and last way); port slots with ports 0 and 65535 and range
/// ends; ACLs around given clients at every prefix length class and index; the last rule, pool
/// and backend entries.
fn add_corners(t: &mut Tables, rng: &mut StdRng) -> Vec<Corner> {
    let p = profile();
    let ways = p.vip_ways;
    let last_rule = (p.rules - 1) as u16;
    let last_pool = (p.pools - 1) as u16;
    let last_backend = (p.backends - 1) as u16;
    // A pool at the table's end whose slice sits at the slot memory's end, the backend at
    // the backend table's end.
    let size = 7u32;
    let base = p.maglev_slots - size;
    for s in 0..size {
        t.maglev[(base + s) as usize] = MaglevSlot {
            backend: if s % 2 == 0 { last_backend } else { 1 },
        };
    }
    t.backends[usize::from(last_backend)] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(0xc0a8_ffff),
        mac: 0x02ff_ffff_ffff,
    };
    t.pools[usize::from(last_pool)] = PoolEntry {
        valid: true,
        maglev_base: base,
        maglev_size: size,
        track: true,
        idle_timeout: 60,
        ..PoolEntry::default()
    };
    let mut corners = Vec::new();
    // The last rule: the last pool, no ACL.
    t.rules[usize::from(last_rule)] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: last_pool,
    };
    // Rules FIRST_ACL_RULE.. of the directed ACLs (the scenario uses the first 32).
    let mut next_rule = FIRST_ACL_RULE;
    let mut acl_rule = |t: &mut Tables, rng: &mut StdRng, client: u128, len: u8| -> u16 {
        let r = next_rule;
        assert!(
            r < last_rule,
            "the directed ACL rules fit below the last rule"
        );
        next_rule += 1;
        t.rules[usize::from(r)] = RuleEntry {
            valid: true,
            acl_enabled: true,
            pool: last_pool,
        };
        // The prefix at a random index (the last one half the time), other indices invalid
        // or refusing.
        let at = if rng.random_bool(0.5) {
            AclEntry::PREFIX_COUNT - 1
        } else {
            rng.random_range(0..AclEntry::PREFIX_COUNT)
        };
        let mut acl = AclEntry::default();
        for (i, pf) in acl.prefix.iter_mut().enumerate() {
            *pf = if i == at {
                AclPrefix {
                    valid: true,
                    prefix_len: len,
                    addr: prefix_of(client, len),
                }
            } else if rng.random_bool(0.5) {
                // Valid, refusing: a prefix of another address.
                AclPrefix {
                    valid: true,
                    prefix_len: 128,
                    addr: client ^ 0x5a00,
                }
            } else {
                AclPrefix {
                    valid: false,
                    prefix_len: 0,
                    addr: 0,
                }
            };
        }
        t.acl[usize::from(r)] = acl;
        r
    };
    for (bucket, what) in [
        (0, "VIP in the first bucket"),
        (p.vip_buckets - 1, "VIP in the last bucket"),
    ] {
        for way in 0..ways {
            let v6 = way % 2 == 1;
            let protocol = if way == 1 { UDP } else { TCP };
            let vip = vip_in_bucket(rng, v6, protocol, bucket);
            let index = (bucket * ways + way) as usize;
            // Port slots: 0..=0, 1..=999 (ACL corners), 1000..=1999, ..., 65535..=65535 in the
            // last slot; lengths 0, 1, 96 + 24 (IPv4) / 64, 127, 128, 200 around clients.
            let mut e = VipEntry {
                valid: true,
                protocol,
                addr: vip,
                ..VipEntry::default()
            };
            let client = if v6 {
                0x2001_0db8_00c0_0000_0000_0000_0000_0000 | u128::from(rng.random::<u64>())
            } else {
                mapped(rng.random())
            };
            let lens: [u8; 7] = if v6 {
                [0, 1, 64, 127, 128, 129, 200]
            } else {
                [0, 1, 96 + 24, 127, 128, 129, 200]
            };
            let mut clients = vec![client];
            let mut port = 1000u16;
            for (i, len) in lens.iter().enumerate() {
                let r = acl_rule(t, rng, client, *len);
                e.slot[1 + i] = PortSlot {
                    valid: true,
                    port_lo: port,
                    port_hi: port + 999,
                    rule: r,
                };
                port += 1000;
            }
            // Clients: the prefix's own, one bit past each prefix length (refused unless the
            // length is 0), the lowest bit flipped.
            for len in lens {
                if (1..=128).contains(&len) {
                    let past = client ^ (1u128 << (128 - u32::from(len)));
                    // An IPv4 packet's addresses are IPv4-mapped (the parser's form).
                    if v6 || is_mapped(past) {
                        clients.push(past);
                    }
                }
            }
            clients.push(client ^ 1);
            e.slot[0] = PortSlot {
                valid: true,
                port_lo: 0,
                port_hi: 0,
                rule: last_rule,
            };
            e.slot[VipEntry::SLOT_COUNT - 1] = PortSlot {
                valid: true,
                port_lo: 65535,
                port_hi: 65535,
                rule: last_rule,
            };
            t.vip[index] = e;
            let mut ports = vec![
                0, 1, 999, 1000, 1999, 2000, 7999, 8000, 8999, 9000, 65534, 65535,
            ];
            ports.extend((0..4).map(|_| rng.random_range(1000..8000)));
            corners.push(Corner {
                vip,
                protocol,
                ports,
                clients,
                what,
            });
        }
    }
    corners
}

/// A whole TCP or UDP packet of a flow, as parsed headers.
fn headers(rng: &mut StdRng, f: &Flow, ip_len: usize) -> IpHeaders {
    let v6 = !is_mapped(f.vip);
    let l3_offset = [14, 18, 22][rng.random_range(0..3)];
    let tcp = f.protocol == TCP;
    let ports = tcp || f.protocol == UDP;
    IpHeaders {
        family: if v6 { Family::V6 } else { Family::V4 },
        vlan_tags: ((l3_offset - 14) / 4) as u8,
        l3_offset,
        l3_end: l3_offset + ip_len,
        l4_offset: l3_offset + if v6 { 40 } else { 20 },
        tos: rng.random(),
        dont_fragment: v6 || rng.random(),
        protocol: f.protocol,
        src: f.client,
        dst: f.vip,
        is_fragment: false,
        fragment_offset: 0,
        ip_id: if v6 { 0 } else { rng.random_range(0..=0xffff) },
        has_ports: ports,
        src_port: if ports { f.client_port } else { 0 },
        dst_port: if ports { f.vip_port } else { 0 },
        // ACK, now and then FIN or RST (a teardown) or SYN alone (selects anew).
        tcp_flags: if tcp {
            [0x10, 0x10, 0x10, 0x11, 0x14, 0x02, 0x12][rng.random_range(0..7)]
        } else {
            0
        },
        icmp_error: false,
        icmp_inner: None,
    }
}

fn ip_desc(rng: &mut StdRng, h: IpHeaders, what: &'static str) -> Desc {
    let pad = if rng.random_bool(0.2) {
        rng.random_range(0..8)
    } else {
        0
    };
    let len = (h.l3_end + pad).max(60);
    Desc {
        bank: 0,
        enable: true,
        default_drop: false,
        inject: None,
        len,
        parsed: Ok(Parsed::Ip(h)),
        what,
    }
}

/// Random ctrl bits: the bank flips often, enable mostly on.
fn ctrl_bits(rng: &mut StdRng, d: &mut Desc) {
    d.bank = rng.random_range(0..2);
    d.enable = rng.random_bool(0.95);
    d.default_drop = rng.random_bool(0.5);
}

// ---- the run ---------------------------------------------------------------------------------

/// Whether a valid prefix admits `client` (for the bins only: the verdicts come from the model).
fn admits(p: &AclPrefix, client: u128) -> bool {
    p.valid
        && p.prefix_len <= 128
        && (p.prefix_len == 0 || prefix_of(client, p.prefix_len) == prefix_of(p.addr, p.prefix_len))
}

struct Run {
    sim: Verilated,
    inputs: Inputs,
    outputs: Outputs,
    mem: Memories,
    hit_en: Port,
    hit_index: Port,
    room: Port,
    settings: [NicSettings; 2],
    rng: StdRng,
    clock: u64,
    /// (clock sent, descriptor, expected) in flight.
    flight: VecDeque<(u64, Desc, Res)>,
    /// A hit-bit set in the previous clock.
    hit_prev: Option<(u64, u32)>,
    bins: Bins,
    seed: u64,
    prev_bank: Option<u8>,
}

impl Run {
    fn fail(&self, what: String) -> ! {
        let seed = self.seed;
        panic!(
            "lookup: {what}\n  seed {seed:#x}: replay with NLB_SEED={seed:#x} cargo test -p \
             nlb-verif --test lookup"
        )
    }

    fn bin(&mut self, b: &str) {
        *self.bins.entry(b.to_string()).or_default() += 1;
    }

    fn expect(&self, d: &Desc) -> PacketResult {
        let ctx = Context {
            tables: &self.mem.banks[usize::from(d.bank)],
            bank: d.bank,
            settings: &self.settings[usize::from(d.default_drop)],
            enabled: d.enable,
            conntrack: &self.mem.ct,
        };
        match &d.inject {
            Some(h) => pipeline::decide_injected(&ctx, h, &d.parsed, d.len),
            None => pipeline::decide(&ctx, &d.parsed, d.len),
        }
    }

    /// One clock; `d` is offered when the block has room (returns whether it was taken).
    fn step(&mut self, d: Option<&Desc>) -> bool {
        let room = self.sim.get_bit(self.room).expect("s_room");
        self.step_offer(d.filter(|_| room))
    }

    /// One clock; `d` is offered whatever `s_room` says (the caller keeps to the contract).
    fn step_offer(&mut self, d: Option<&Desc>) -> bool {
        let clock = self.clock;
        self.inputs.drive(&mut self.sim, d, &mut self.rng);
        self.mem.drive(&mut self.sim, clock, &mut self.rng);
        self.sim.eval();
        self.mem.observe(&mut self.sim, clock, &mut self.rng);
        if let Some(d) = d {
            let r = self.expect(d);
            self.bins_of(d, &r);
            let e = expected_res(d, &r, &self.mem.banks);
            self.flight.push_back((clock, d.clone(), e));
        }
        let set = self
            .sim
            .get_bit(self.hit_en)
            .expect("hit_set_en")
            .then(|| self.sim.get_u64(self.hit_index).expect("hit_set_index") as u32);
        if self.sim.get_bit(self.outputs.valid).expect("m_valid") {
            let got = self.outputs.read(&mut self.sim);
            let Some((sent, d, want)) = self.flight.pop_front() else {
                self.fail(format!(
                    "clock {clock}: a result with no descriptor in flight: {got:?}"
                ));
            };
            if got != want {
                self.fail(format!(
                    "result of the descriptor sent at clock {sent} ({}):\n  descriptor {:?}\n  \
                     s_user {:#010x}\n  RTL   {got:?}\n  model {want:?}",
                    d.what,
                    d,
                    user_word(&d)
                ));
            }
            // A hit marks its entry in the clock before the result.
            let hit = want.ct_index.filter(|_| want.conntrack == 1);
            let prev = self
                .hit_prev
                .take()
                .filter(|(c, _)| c + 1 == clock)
                .map(|(_, i)| i);
            if hit != prev {
                self.fail(format!(
                    "descriptor sent at clock {sent} ({}): hit-bit set {prev:?} in the clock \
                     before its result, the result's hit {hit:?}",
                    d.what
                ));
            }
            let waited = clock - sent;
            if waited < IDLE_LATENCY {
                self.fail(format!(
                    "descriptor sent at clock {sent} ({}): result after {waited} clocks, the \
                     least is {IDLE_LATENCY}",
                    d.what
                ));
            }
            if waited == IDLE_LATENCY {
                self.bin("result at the idle latency (33 clocks)");
            }
        }
        if let Some((c, i)) = self.hit_prev {
            if c + 1 == clock {
                self.fail(format!(
                    "clock {c}: hit-bit set of entry {i} with no hit result after it"
                ));
            }
        }
        if let Some(i) = set {
            self.hit_prev = Some((clock, i));
        }
        self.sim.tick();
        self.clock += 1;
        d.is_some()
    }

    fn send(&mut self, d: &Desc) {
        let mut waited = 0;
        while !self.step(Some(d)) {
            waited += 1;
            if waited > 20_000 {
                self.fail(format!(
                    "s_room stayed low for 20,000 clocks at clock {}",
                    self.clock
                ));
            }
        }
    }

    fn idle(&mut self, n: u32) {
        for _ in 0..n {
            self.step(None);
        }
    }

    /// Idles until every result in flight came out: the memory ports answer in up to 60
    /// clocks, in any order, behind the reads queued before them. Fails if some never do.
    fn drain(&mut self) {
        let mut waited = 0;
        while !self.flight.is_empty() && waited < 50_000 {
            self.idle(1);
            waited += 1;
        }
        if !self.flight.is_empty() {
            self.fail(format!("{} results never came out", self.flight.len()));
        }
    }

    fn bins_of(&mut self, d: &Desc, r: &PacketResult) {
        if self.prev_bank.is_some_and(|b| b != d.bank) {
            self.bin("bank flipped between neighbours");
        }
        self.prev_bank = Some(d.bank);
        let mut out = Vec::new();
        self.value_bins(d, r, &mut out);
        for b in out {
            self.bin(&b);
        }
    }

    /// The value bins of one descriptor and its expected result.
    fn value_bins(&self, d: &Desc, r: &PacketResult, out: &mut Vec<String>) {
        out.push(format!("verdict {:?}", r.verdict));
        out.push(format!("reason {:?}", r.reason));
        out.push(format!("conntrack {:?}", r.conntrack));
        if let Some(e) = r.event {
            out.push(format!("event {:?}", e.event));
        }
        let p = profile();
        if let Some(i) = r.ct_index {
            let (b, w) = (i / p.ct_ways, i % p.ct_ways);
            if b == 0 {
                out.push("connection hit in the first bucket".to_string());
            }
            if b == p.ct_buckets - 1 {
                out.push("connection hit in the last bucket".to_string());
            }
            if w == 0 {
                out.push("connection hit in way 0".to_string());
            }
            if w == p.ct_ways - 1 {
                out.push("connection hit in the last way".to_string());
            }
            let full = (0..p.ct_ways).all(|w| {
                self.mem
                    .ct
                    .entry(b * p.ct_ways + w)
                    .is_some_and(|e| e.valid)
            });
            if full {
                out.push("connection hit in a full bucket".to_string());
            }
        }
        let t = &self.mem.banks[usize::from(d.bank)];
        if r.rule == Some((p.rules - 1) as u16) && r.verdict == Verdict::Forward {
            out.push("last rule forwarded".to_string());
        }
        if r.pool == Some((p.pools - 1) as u16)
            && r.backend == Some((p.backends - 1) as u16)
            && r.verdict == Verdict::Forward
        {
            out.push("last pool, last backend forwarded".to_string());
        }
        if r.verdict == Verdict::Forward && r.out_len == firmware_sim::action::MAX_FRAME {
            out.push("output exactly at the frame limit".to_string());
        }
        let Ok(Parsed::Ip(h)) = &d.parsed else { return };
        if d.inject.is_some() || h.icmp_error || !d.enable {
            return;
        }
        // The VIP entry the packet found, its bucket and way.
        let vproto = if h.protocol == TCP || h.protocol == UDP {
            h.protocol
        } else {
            0
        };
        let bucket = nlb_reference::lookup::vip_bucket(p, vproto, h.dst);
        let ways = p.vip_ways;
        let way = (0..ways).find(|w| {
            let e = &t.vip[(bucket * ways + w) as usize];
            e.valid && e.protocol == vproto && e.addr == h.dst
        });
        if let Some(w) = way {
            let full = (0..ways).all(|w| t.vip[(bucket * ways + w) as usize].valid);
            if bucket == 0 {
                out.push("VIP found in the first bucket".to_string());
            }
            if bucket == p.vip_buckets - 1 {
                out.push("VIP found in the last bucket".to_string());
            }
            if w == ways - 1 && full {
                out.push("VIP found in the last way of a full bucket".to_string());
            }
            if w == 0 && full {
                out.push("VIP found in way 0 of a full bucket".to_string());
            }
            let e = &t.vip[(bucket * ways + w) as usize];
            if h.has_ports && !h.is_later_fragment() {
                for (i, s) in e.slot.iter().enumerate().filter(|(_, s)| s.valid) {
                    if h.dst_port == s.port_lo {
                        out.push("VIP port at a range's low end".to_string());
                    }
                    if h.dst_port == s.port_hi {
                        out.push("VIP port at a range's high end".to_string());
                    }
                    if s.port_lo > 0 && h.dst_port == s.port_lo - 1 {
                        out.push("VIP port one below a range".to_string());
                    }
                    if s.port_hi < 65535 && h.dst_port == s.port_hi + 1 {
                        out.push("VIP port one above a range".to_string());
                    }
                    if s.port_lo <= h.dst_port
                        && h.dst_port <= s.port_hi
                        && i == VipEntry::SLOT_COUNT - 1
                    {
                        out.push("matched by the last port slot".to_string());
                    }
                }
                if h.dst_port == 0 && r.rule.is_some() {
                    out.push("port 0 matched".to_string());
                }
                if h.dst_port == 65535 && r.rule.is_some() {
                    out.push("port 65535 matched".to_string());
                }
            }
        }
        // The ACL of the rule the packet matched.
        let Some(rule) = r.rule else { return };
        if !t
            .rules
            .get(usize::from(rule))
            .is_some_and(|e| e.valid && e.acl_enabled)
        {
            return;
        }
        let acl = &t.acl[usize::from(rule)];
        let client = h.src;
        if r.reason == Reason::AclDenied {
            if acl.prefix.iter().any(|p| p.valid && p.prefix_len > 128) {
                out.push("ACL: a prefix longer than 128 refuses".to_string());
            }
            if acl.prefix.iter().any(|p| {
                p.valid
                    && (1..=128).contains(&p.prefix_len)
                    && prefix_of(p.addr ^ client, p.prefix_len) != 0
                    && prefix_of(p.addr ^ client, p.prefix_len - 1) == 0
            }) {
                out.push("ACL: refused one bit past a prefix".to_string());
            }
            return;
        }
        for (i, pf) in acl.prefix.iter().enumerate() {
            if !admits(pf, client) {
                continue;
            }
            let class = match pf.prefix_len {
                0 => "0",
                128 if is_mapped(client) => "128 (an IPv4 /32)",
                128 => "128",
                1..=96 => "1-96",
                _ => "97-127",
            };
            out.push(format!("ACL: admitted by a prefix of length {class}"));
            if i == AclEntry::PREFIX_COUNT - 1 {
                out.push("ACL: admitted by the last prefix (index 7)".to_string());
            }
        }
    }
}

fn run(seed: u64) -> Bins {
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s0 = Scenario::random(p, &mut rng);
    let s1 = Scenario::random(p, &mut rng);
    let corners = add_corners(&mut s0.tables, &mut rng);
    // The same corners in bank 1 too (the bank flips under them).
    let mut t1 = s1.tables.clone();
    for c in &corners {
        let bucket = nlb_reference::lookup::vip_bucket(p, c.protocol, c.vip);
        for w in 0..p.vip_ways {
            let i = (bucket * p.vip_ways + w) as usize;
            t1.vip[i] = s0.tables.vip[i];
        }
    }
    for r in usize::from(FIRST_ACL_RULE)..p.rules as usize {
        t1.rules[r] = s0.tables.rules[r];
        t1.acl[r] = s0.tables.acl[r];
    }
    let last = |n: u32| (n - 1) as usize;
    t1.pools[last(p.pools)] = s0.tables.pools[last(p.pools)];
    t1.backends[last(p.backends)] = s0.tables.backends[last(p.backends)];
    let tail = p.maglev_slots as usize - 7;
    t1.maglev[tail..].copy_from_slice(&s0.tables.maglev[tail..]);

    // The connection table: the scenarios' hot flows, and full first and last buckets.
    let mut ct = ConnTable::new(p.ct_buckets, p.ct_ways);
    for s in [&s0, &s1] {
        for (i, e) in s.conntrack(p, &mut rng) {
            ct.write(i, e).expect("an index inside the table");
        }
    }
    let mut ct_flows = Vec::new();
    for bucket in [0, p.ct_buckets - 1] {
        let c = &corners[rng.random_range(0..corners.len())];
        let mut w = 0;
        while w < p.ct_ways {
            let f = Flow {
                protocol: c.protocol,
                client: c.clients[0],
                client_port: rng.random(),
                vip: c.vip,
                vip_port: rng.random_range(1000..1999),
            };
            let key = f.tuple5();
            if nlb_reference::conntrack::bucket(&key, p.ct_buckets) != bucket {
                continue;
            }
            let e = f.ct_entry((p.backends - 1) as u16, 0, 0);
            ct.write(bucket * p.ct_ways + w, e)
                .expect("inside the table");
            ct_flows.push(f);
            w += 1;
        }
    }

    let mut sim = Verilated::new::<Lookup>().expect("model");
    sim.reset(2).expect("reset");
    let mut settings = [NicSettings::default(), NicSettings::default()];
    settings[0].default_action = DefaultAction::Pass;
    settings[1].default_action = DefaultAction::Drop;
    let mut r = Run {
        inputs: Inputs::new(&sim),
        outputs: Outputs::new(&sim),
        mem: Memories::new(&sim, [s0.tables.clone(), t1], ct),
        hit_en: sim.port("hit_set_en").expect("port"),
        hit_index: sim.port("hit_set_index").expect("port"),
        room: sim.port("s_room").expect("port"),
        sim,
        settings,
        rng: StdRng::seed_from_u64(seed ^ 0x100c),
        clock: 0,
        flight: VecDeque::new(),
        hit_prev: None,
        bins: Bins::new(),
        seed,
        prev_bank: None,
    };
    r.idle(4);

    // Directed: every corner VIP x port x client, both banks, back to back.
    let mut g = StdRng::seed_from_u64(seed ^ 0xd1);
    for c in &corners {
        for &port in &c.ports {
            for &client in &c.clients {
                let f = Flow {
                    protocol: c.protocol,
                    client,
                    client_port: g.random(),
                    vip: c.vip,
                    vip_port: port,
                };
                let h = headers(&mut g, &f, 60);
                let mut d = ip_desc(&mut g, h, c.what);
                ctrl_bits(&mut g, &mut d);
                d.enable = true;
                r.send(&d);
            }
        }
    }
    // Connection hits in the full first and last buckets (and a SYN, which selects anew).
    for f in &ct_flows {
        for _ in 0..3 {
            let h = headers(&mut g, f, 100);
            let mut d = ip_desc(&mut g, h, "connection-table corner");
            ctrl_bits(&mut g, &mut d);
            d.enable = true;
            r.send(&d);
        }
    }
    // Frames of 9017, 9018 and 9019 bytes (the output limit) to the last pool (L2 DSR, so the
    // output is the frame) and minimum frames.
    for c in corners.iter().filter(|c| c.protocol == TCP) {
        for target in [9017usize, 9018, 9019, 60] {
            let f = Flow {
                protocol: TCP,
                client: c.clients[0],
                client_port: g.random(),
                vip: c.vip,
                vip_port: 0,
            };
            let mut h = headers(&mut g, &f, 60);
            h.l3_end = target.max(h.l3_offset + 60);
            let mut d = ip_desc(&mut g, h, "size corner");
            d.len = h.l3_end;
            d.bank = g.random_range(0..2);
            r.send(&d);
        }
    }
    // Injected frames: valid and invalid pools and backends, the tables' ends.
    for _ in 0..200 {
        let s = if g.random_bool(0.5) { &s0 } else { &s1 };
        let frame = s.frame(&mut g);
        let pick = |g: &mut StdRng, n: u32| match g.random_range(0..6) {
            0 => n - 1,
            1 => n + g.random_range(0..8),
            _ => g.random_range(0..48),
        } as u16;
        let mut d = Desc {
            bank: 0,
            enable: true,
            default_drop: false,
            inject: Some(InjectHeader {
                backend: pick(&mut g, p.backends),
                pool: pick(&mut g, p.pools),
                frame_len: 0,
            }),
            len: frame.len(),
            parsed: parse::parse(&frame),
            what: "injected",
        };
        ctrl_bits(&mut g, &mut d);
        r.send(&d);
    }
    // Random: the scenarios' traffic, either bank, random idle clocks.
    let n = std::env::var("NLB_LOOKUP_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6000u32);
    for i in 0..n {
        let s = if g.random_bool(0.5) { &s0 } else { &s1 };
        let frame = s.frame(&mut g);
        let parsed = parse::parse(&frame);
        let mut d = Desc {
            bank: 0,
            enable: true,
            default_drop: false,
            inject: None,
            len: frame.len(),
            parsed,
            what: "scenario traffic",
        };
        ctrl_bits(&mut g, &mut d);
        // Now and then an ICMP error quoting a corner VIP's flow either way round.
        if i % 50 == 0 {
            let c = &corners[g.random_range(0..corners.len())];
            let f = Flow {
                protocol: c.protocol,
                client: c.clients[0],
                client_port: g.random(),
                vip: c.vip,
                vip_port: c.ports[g.random_range(0..c.ports.len())],
            };
            let mut h = headers(&mut g, &f, 96);
            let reversed = g.random_bool(0.5);
            h.protocol = if is_mapped(f.vip) { 1 } else { 58 };
            h.has_ports = false;
            h.src_port = 0;
            h.dst_port = 0;
            h.tcp_flags = 0;
            h.icmp_error = true;
            h.icmp_inner = Some(if reversed {
                InnerFlow {
                    protocol: f.protocol,
                    src: f.vip,
                    dst: f.client,
                    src_port: f.vip_port,
                    dst_port: f.client_port,
                }
            } else {
                InnerFlow {
                    protocol: f.protocol,
                    src: f.client,
                    dst: f.vip,
                    src_port: f.client_port,
                    dst_port: f.vip_port,
                }
            });
            h.src = mapped(0x0909_0909);
            if !is_mapped(f.vip) {
                h.src = 0x2001_0db8_0909_0000_0000_0000_0000_0009;
            }
            h.dst = if reversed { f.client } else { f.vip };
            d = ip_desc(&mut g, h, "ICMP error quoting a corner flow");
            ctrl_bits(&mut g, &mut d);
        }
        r.send(&d);
        if g.random_bool(0.1) {
            let n = g.random_range(1..30);
            r.idle(n);
        }
        // Now and then the pipeline drains (the memory answers in up to 60 clocks), so that a
        // descriptor meets it idle.
        if g.random_bool(0.01) {
            r.idle(200);
        }
    }
    r.drain();
    r.bins
}

#[test]
fn decides_as_the_model() {
    let seed = seed_from_env(0x100c);
    let bins = run(seed);
    for (k, v) in &bins {
        println!("{k:56} {v}");
    }
    let mut required: Vec<String> = [
        "bank flipped between neighbours",
        "result at the idle latency (33 clocks)",
        "verdict Forward",
        "verdict Punt",
        "verdict Drop",
        "verdict Pass",
        "reason Forwarded",
        "reason IcmpErrorForwarded",
        "reason Injected",
        "reason NoRule",
        "reason IcmpNoFlow",
        "reason AclDenied",
        "reason FragmentNeedsState",
        "reason NoBackend",
        "reason TooBig",
        "reason PipelineDisabled",
        "reason NotIp",
        "conntrack Hit",
        "conntrack Miss",
        "conntrack None",
        "event Learn",
        "event Teardown",
        "connection hit in the first bucket",
        "connection hit in the last bucket",
        "connection hit in way 0",
        "connection hit in the last way",
        "connection hit in a full bucket",
        "last rule forwarded",
        "last pool, last backend forwarded",
        "output exactly at the frame limit",
        "VIP found in the first bucket",
        "VIP found in the last bucket",
        "VIP found in the last way of a full bucket",
        "VIP found in way 0 of a full bucket",
        "VIP port at a range's low end",
        "VIP port at a range's high end",
        "VIP port one below a range",
        "VIP port one above a range",
        "matched by the last port slot",
        "port 0 matched",
        "port 65535 matched",
        "ACL: a prefix longer than 128 refuses",
        "ACL: refused one bit past a prefix",
        "ACL: admitted by the last prefix (index 7)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for class in ["0", "1-96", "97-127", "128", "128 (an IPv4 /32)"] {
        required.push(format!("ACL: admitted by a prefix of length {class}"));
    }
    let context = format!("seed {seed:#x}");
    nlb_verif::coverage::assert_hit(&bins, &required, "lookup bins", &context);
}

/// The bench's oracle is the model's pipeline: `decide` on a frame's parse gives what
/// `process` gives for the frame (the differential tests hold `process` to the RTL and to the
/// reference semantics).
#[test]
fn decide_is_process_without_the_frame() {
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed_from_env(0xdec1));
    let s = Scenario::random(p, &mut rng);
    let mut ct = ConnTable::new(p.ct_buckets, p.ct_ways);
    for (i, e) in s.conntrack(p, &mut rng) {
        ct.write(i, e).expect("inside the table");
    }
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    for n in 0..20_000 {
        let settings = NicSettings {
            default_action: if n % 2 == 0 {
                DefaultAction::Pass
            } else {
                DefaultAction::Drop
            },
            ..NicSettings::default()
        };
        let ctx = Context {
            tables: &s.tables,
            bank: (n % 3 == 0) as u8,
            settings: &settings,
            enabled: n % 17 != 0,
            conntrack: &ct,
        };
        let frame = s.frame(&mut rng);
        let parsed = parse::parse(&frame);
        let whole = pipeline::process(&ctx, &frame, &mut out).expect("room for the frame");
        assert_eq!(
            pipeline::decide(&ctx, &parsed, frame.len()),
            whole,
            "frame {frame:02x?}"
        );
        let h = InjectHeader {
            backend: rng.random_range(0..60),
            pool: rng.random_range(0..24),
            frame_len: 0,
        };
        let injected = pipeline::process_injected(&ctx, &h, &frame, &mut out).expect("room");
        assert_eq!(
            pipeline::decide_injected(&ctx, &h, &parsed, frame.len()),
            injected
        );
    }
}

/// Table contents the register map allows, and the descriptor FIFO filled as far as `s_room`
/// allows, on this bench (child modules: they drive the bench's `Run`, so they follow the
/// bench when the block's memory ports change).
mod descriptor_fifo;
mod table_contents;
