//! Random table banks and the traffic that exercises them, for the pipeline tests.
//!
//! A [`Scenario`] is one bank of `nlb_hw::Tables` built the way the compiler lays tables out
//! (VIP entries in the bucket their hash gives, Maglev slices per pool) but with every case the
//! pipeline must handle: all affinities and deliveries, tracked and untracked pools, ACLs,
//! VIPs with several rules (up to all 16 port slots), `L3_DEFAULT` rules (an entry of protocol
//! 0, and the gaps between the TCP and UDP rules' ranges of its VIP in their entries),
//! entries of other protocols that no lookup may find, IPv4 and IPv6 backends, and broken
//! entries (invalid rules, pools and backends, ids beyond the tables, slices past the slot
//! memory, empty slices). Its traffic goes mostly to the VIPs (hot flows that repeat,
//! fragments, ICMP errors quoting VIP flows either way round, portless protocols: ICMP and
//! ICMPv6 echo, GRE, ESP, SCTP, any protocol number), the rest is random and malformed frames.
//!
//! Nothing here predicts what the pipeline does: the tests ask the golden model.

use crate::frames::{self, Ext, FrameSpec, Ip, L4};
use nlb_hw::enums::{Affinity, Delivery, KeyType};
use nlb_hw::layouts::{
    AclEntry, AclPrefix, BackendEntry, CtEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry,
    VipEntry,
};
use nlb_hw::{FlowKey, Profile, Tables};
use rand::rngs::StdRng;
use rand::RngExt;

/// The IPv4-mapped form of an IPv4 address.
pub fn mapped(v4: u32) -> u128 {
    0xffff_0000_0000 | u128::from(v4)
}

/// Whether a 128-bit address is IPv4-mapped.
pub fn is_mapped(a: u128) -> bool {
    a >> 32 == 0xffff
}

/// One VIP entry of the scenario: address, protocol, its port ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vip {
    /// Address (IPv4 mapped).
    pub addr: u128,
    /// Protocol: 6 TCP, 17 UDP, or 0 (an `L3_DEFAULT` rule's entry: every other protocol).
    pub protocol: u8,
    /// Port ranges of its valid slots.
    pub ranges: Vec<(u16, u16)>,
    /// The slots (indices into `ranges`) that are gap slots of an `L3_DEFAULT` rule: ports
    /// no TCP / UDP rule of the VIP takes, sent to the VIP's `L3_DEFAULT` rule.
    pub gaps: Vec<usize>,
}

/// Protocols without ports the traffic uses besides random numbers: ICMP and ICMPv6 (echo
/// and other informational types), GRE, ESP, AH, SCTP (ports on the wire, not read: the
/// pipeline treats it as portless), and the boundaries 0 and 255.
const PORTLESS: [u8; 8] = [1, 58, 47, 50, 51, 132, 0, 255];

/// A protocol without ports for a flow of the family: mostly [`PORTLESS`] (ICMP over IPv4,
/// ICMPv6 over IPv6), now and then any number (IPv6 extension-header numbers included: the
/// parser then reads the payload as a header chain).
pub fn portless_protocol(rng: &mut StdRng, v6: bool) -> u8 {
    if rng.random_bool(0.15) {
        return match rng.random() {
            6 | 17 => 253,
            p => p,
        };
    }
    match PORTLESS[rng.random_range(0..PORTLESS.len())] {
        1 if v6 => 58,
        58 if !v6 => 1,
        0 if v6 => 47,
        p => p,
    }
}

/// The ranges of `0..=65535` no range of `ranges` holds (the ranges are disjoint).
fn gaps_between(ranges: &[(u16, u16)]) -> Vec<(u16, u16)> {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut out = Vec::new();
    let mut next = 0u32;
    for (lo, hi) in sorted {
        if u32::from(lo) > next {
            out.push((next as u16, lo - 1));
        }
        next = next.max(u32::from(hi) + 1);
    }
    if next <= 65535 {
        out.push((next as u16, 65535));
    }
    out
}

/// A flow as the pipeline sees it: client → VIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Protocol.
    pub protocol: u8,
    /// Client address (IPv4 mapped).
    pub client: u128,
    /// Client port.
    pub client_port: u16,
    /// VIP.
    pub vip: u128,
    /// VIP port.
    pub vip_port: u16,
}

impl Flow {
    /// Its TUPLE5 key, the connection table's.
    pub fn tuple5(&self) -> FlowKey {
        FlowKey {
            key_type: KeyType::Tuple5,
            protocol: self.protocol,
            src_port: self.client_port,
            dst_port: self.vip_port,
            src_addr: self.client,
            dst_addr: self.vip,
        }
    }

    /// A valid connection-table entry of it, to `backend` by `rule`.
    pub fn ct_entry(&self, backend: u16, rule: u16, timestamp: u32) -> CtEntry {
        CtEntry {
            valid: true,
            protocol: self.protocol,
            src_port: self.client_port,
            dst_port: self.vip_port,
            src_addr: self.client,
            dst_addr: self.vip,
            backend,
            rule,
            flags: 0,
            timestamp,
        }
    }
}

/// A table bank and the traffic generator that goes with it.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The bank.
    pub tables: Tables,
    /// Its VIP entries.
    pub vips: Vec<Vip>,
    /// Flows that repeat (connection-table candidates).
    pub hot: Vec<Flow>,
}

const CLIENTS: u32 = 12;

fn client_v4(rng: &mut StdRng) -> u32 {
    if rng.random_bool(0.9) {
        0x0a00_0001 + rng.random_range(0..CLIENTS)
    } else {
        rng.random()
    }
}

fn client_v6(rng: &mut StdRng) -> u128 {
    if rng.random_bool(0.9) {
        0x2001_0db8_00c0_0000_0000_0000_0000_0001 + u128::from(rng.random_range(0..CLIENTS))
    } else {
        rng.random()
    }
}

fn client_port(rng: &mut StdRng) -> u16 {
    if rng.random_bool(0.7) {
        40000 + rng.random_range(0..8)
    } else {
        rng.random()
    }
}

/// Prime slice sizes (and 1) the compiler would use for small pools.
const SLICE_SIZES: [u32; 6] = [1, 7, 13, 31, 61, 101];

/// Backends of a random bank.
const N_BACKENDS: usize = 48;
/// Pools of a random bank.
const N_POOLS: usize = 20;
/// Rules of a random bank.
const N_RULES: usize = 32;

/// Affinity x delivery pairs: the pool kinds every scenario covers.
fn combos() -> usize {
    Affinity::ALL.len() * Delivery::ALL.len()
}

/// Backends: mostly valid, a quarter IPv6.
fn random_backends(t: &mut Tables, rng: &mut StdRng) {
    for b in 0..N_BACKENDS {
        let v6 = rng.random_bool(0.25);
        t.backends[b] = BackendEntry {
            valid: rng.random_bool(0.92),
            is_ipv6: v6,
            addr: if v6 {
                0x2001_0db8_00b0_0000_0000_0000_0000_0000 | b as u128
            } else {
                mapped(0xc0a8_0100 | b as u32)
            },
            mac: 0x0200_0000_1000 | b as u64,
        };
    }
}

/// A pool member: mostly one of the backends, now and then an empty entry or one beyond the
/// table.
fn random_backend_id(profile: &Profile, rng: &mut StdRng) -> u16 {
    match rng.random_range(0..50) {
        0 => profile.backends as u16 + rng.random_range(0..100), // beyond the table
        1 => rng.random_range(N_BACKENDS as u16..profile.backends as u16), // empty
        _ => rng.random_range(0..N_BACKENDS as u16),
    }
}

/// Pools with Maglev slices.
fn random_pools(t: &mut Tables, profile: &Profile, rng: &mut StdRng) {
    let combos = combos();
    let rotation = rng.random_range(0..N_POOLS);
    let mut next_slot = 0u32;
    for p in 0..N_POOLS {
        let size = if p == 3 {
            0 // no backend at all
        } else {
            SLICE_SIZES[rng.random_range(0..SLICE_SIZES.len())]
        };
        // One slice straddles the end of the slot memory.
        let base = if p == 5 {
            profile.maglev_slots - size / 2
        } else {
            next_slot
        };
        if p != 5 {
            next_slot += size;
        }
        let members: Vec<u16> = (0..rng.random_range(1..6))
            .map(|_| random_backend_id(profile, rng))
            .collect();
        for i in 0..size {
            if let Some(s) = t.maglev.get_mut((base + i) as usize) {
                *s = MaglevSlot {
                    backend: members[i as usize % members.len()],
                };
            }
        }
        // Every affinity x delivery pair has a pool (rotated per scenario so each pair
        // also lands on the odd pools: empty, straddling, invalid); the rest are random.
        let (affinity, delivery) = if p < combos {
            let c = (p + rotation) % combos;
            (
                Affinity::ALL[c % Affinity::ALL.len()],
                Delivery::ALL[c / Affinity::ALL.len()],
            )
        } else {
            (
                Affinity::ALL[rng.random_range(0..Affinity::ALL.len())],
                Delivery::ALL[rng.random_range(0..Delivery::ALL.len())],
            )
        };
        t.pools[p] = PoolEntry {
            valid: p != 7,
            affinity,
            delivery,
            maglev_base: base,
            maglev_size: size,
            track: rng.random_bool(0.6),
            idle_timeout: 60,
            ..PoolEntry::default()
        };
    }
}

/// Rules: pools, ACLs, a few broken.
fn random_rules(t: &mut Tables, profile: &Profile, rng: &mut StdRng) {
    let combos = combos();
    for r in 0..N_RULES {
        // The first rules reach every affinity x delivery pool (rule r -> pool r), so
        // VIPs whose first slot names them (below) cover every pool kind per family.
        let pool = if r < combos {
            r as u16
        } else {
            match rng.random_range(0..30) {
                0 => profile.pools as u16 + rng.random_range(0..50), // beyond the table
                _ => rng.random_range(0..N_POOLS as u16),
            }
        };
        let acl = rng.random_bool(0.2);
        t.rules[r] = RuleEntry {
            valid: r != 9,
            acl_enabled: acl,
            pool,
        };
        if acl {
            for i in 0..rng.random_range(1..4) {
                let (addr, len) = match rng.random_range(0..4) {
                    0 => (0, 0),
                    1 => (mapped(0x0a00_0000), 96 + rng.random_range(24..=32)),
                    2 => (
                        0x2001_0db8_00c0_0000_0000_0000_0000_0000,
                        rng.random_range(64..=128),
                    ),
                    _ => (mapped(client_v4(rng)), 128),
                };
                // Spread over all the entry's prefix indices by rule, the last one
                // too (every index is a separate comparator; no extra random draw, so
                // the scenarios stay what they were otherwise).
                t.acl[r].prefix[(i + 5 * r) % AclEntry::PREFIX_COUNT] = AclPrefix {
                    valid: rng.random_bool(0.9),
                    prefix_len: if rng.random_bool(0.05) { 200 } else { len },
                    addr,
                };
            }
        }
    }
}

/// A slot's rule: mostly one of the rules, now and then one beyond the table.
fn random_rule_id(profile: &Profile, rng: &mut StdRng) -> u16 {
    if rng.random_bool(0.04) {
        profile.rules as u16 + rng.random_range(0..100)
    } else {
        rng.random_range(0..N_RULES as u16)
    }
}

/// VIPs: IPv4 and IPv6, TCP and UDP, one to all 16 port-range slots; L3_DEFAULT rules.
struct RandomVips {
    profile: &'static Profile,
    /// Next systematic first-slot rule per family (IPv4, IPv6), from a random start.
    first_rule: [u16; 2],
    /// The same for the L3_DEFAULT rules, so portless flows meet every pool kind.
    l3_next: [u16; 2],
    layouts: Vec<Vec<(u16, u16)>>,
    vips: Vec<Vip>,
}

impl RandomVips {
    fn new(profile: &'static Profile, rng: &mut StdRng) -> RandomVips {
        let combos = combos();
        let first_rule = [
            rng.random_range(0..combos as u16),
            rng.random_range(0..combos as u16),
        ];
        let l3_next = [
            rng.random_range(0..combos as u16),
            rng.random_range(0..combos as u16),
        ];
        RandomVips {
            profile,
            first_rule,
            l3_next,
            layouts: port_layouts(),
            vips: Vec::new(),
        }
    }

    /// Fourteen VIP addresses, IPv4 and IPv6 in turn, each with its entries.
    fn build(mut self, t: &mut Tables, rng: &mut StdRng) -> Vec<Vip> {
        for v in 0..14u32 {
            let addr = if v % 2 == 1 {
                0x2001_0db8_0000_0000_0000_0000_0000_0100 | u128::from(v)
            } else {
                mapped(0x0a01_0000 | v)
            };
            let family = usize::from(!is_mapped(addr));
            // An L3_DEFAULT rule on most VIPs.
            let l3_rule = rng.random_bool(0.6).then(|| {
                self.l3_next[family] = (self.l3_next[family] + 1) % combos() as u16;
                self.l3_next[family]
            });
            for protocol in [6u8, 17] {
                if rng.random_bool(0.3) {
                    continue;
                }
                self.port_entry(t, rng, addr, protocol, l3_rule);
            }
            if let Some(rule) = l3_rule {
                self.l3_entry(t, rng, addr, rule);
            }
            // Now and then an entry of a portless protocol's own number, which no lookup may
            // find (a portless flow looks up protocol 0).
            if rng.random_bool(0.2) {
                let protocol = [1u8, 47, 50, 58][rng.random_range(0..4)];
                if let Some(i) = place(t, self.profile, protocol, addr) {
                    t.vip[i].slot[0] = PortSlot {
                        valid: true,
                        port_lo: 0,
                        port_hi: 65535,
                        rule: random_rule_id(self.profile, rng),
                    };
                }
            }
        }
        self.vips
    }

    /// A TCP or UDP entry of `addr`: its rules' port ranges, and the gaps between them for
    /// the VIP's L3_DEFAULT rule (`l3_rule`).
    fn port_entry(
        &mut self,
        t: &mut Tables,
        rng: &mut StdRng,
        addr: u128,
        protocol: u8,
        l3_rule: Option<u16>,
    ) {
        let (profile, layouts) = (self.profile, &self.layouts);
        let nested = layouts.len() - 1;
        let family = usize::from(!is_mapped(addr));
        let ways = profile.vip_ways as usize;
        // Mostly single-slot VIPs: only their later fragments are forwarded
        // (SPEC R4.3), and the coverage bins want every pool kind behind them; the
        // two 16-slot layouts (the last) often enough that every slot sees traffic.
        let layout = match rng.random_range(0..20) {
            0..=13 => rng.random_range(0..2),
            14..=16 => rng.random_range(layouts.len() - 2..layouts.len()),
            _ => rng.random_range(2..layouts.len()),
        };
        let mut ranges = layouts[layout].clone();
        let own = ranges.len();
        // The compiler gives the L3_DEFAULT rule the ports the TCP / UDP rules leave
        // (as many as the slots hold; a nested layout has no gaps to speak of).
        if let (Some(_), true) = (l3_rule, layout != nested && rng.random_bool(0.9)) {
            for gap in gaps_between(&ranges) {
                if ranges.len() == e_slots() {
                    break;
                }
                ranges.push(gap);
            }
        }
        let bucket = nlb_reference::lookup::vip_bucket(profile, protocol, addr) as usize;
        let Some(way) = (0..ways).find(|w| !t.vip[bucket * ways + w].valid) else {
            return;
        };
        let mut e = VipEntry {
            valid: true,
            protocol,
            addr,
            ..VipEntry::default()
        };
        for (i, (lo, hi)) in ranges.iter().enumerate() {
            let rule = match l3_rule {
                Some(r) if i >= own => r,
                _ if i == 0 => {
                    self.first_rule[family] = (self.first_rule[family] + 1) % combos() as u16;
                    self.first_rule[family]
                }
                _ => random_rule_id(profile, rng),
            };
            e.slot[i] = PortSlot {
                valid: true,
                port_lo: *lo,
                port_hi: *hi,
                rule,
            };
        }
        t.vip[bucket * ways + way] = e;
        self.vips.push(Vip {
            addr,
            protocol,
            gaps: (own..ranges.len()).collect(),
            ranges,
        });
    }

    /// The L3_DEFAULT rule's own entry, protocol 0: one slot of all ports; now and then other
    /// contents (port 0 outside every slot, several slots), which the pipeline must handle as
    /// any table.
    fn l3_entry(&mut self, t: &mut Tables, rng: &mut StdRng, addr: u128, rule: u16) {
        let ranges = if rng.random_bool(0.85) {
            vec![(0, 65535)]
        } else {
            self.layouts[rng.random_range(1..self.layouts.len())].clone()
        };
        if let Some(i) = place(t, self.profile, 0, addr) {
            let e = &mut t.vip[i];
            for (k, (lo, hi)) in ranges.iter().enumerate() {
                e.slot[k] = PortSlot {
                    valid: true,
                    port_lo: *lo,
                    port_hi: *hi,
                    rule: if k == 0 {
                        rule
                    } else {
                        random_rule_id(self.profile, rng)
                    },
                };
            }
            self.vips.push(Vip {
                addr,
                protocol: 0,
                ranges,
                gaps: Vec::new(),
            });
        }
    }
}

impl Scenario {
    /// A random bank for `profile` (which must be at least as large as `sim`): backends,
    /// pools, rules, then VIPs, in that order of random draws.
    pub fn random(profile: &'static Profile, rng: &mut StdRng) -> Scenario {
        let mut t = Tables::empty(profile);
        random_backends(&mut t, rng);
        random_pools(&mut t, profile, rng);
        random_rules(&mut t, profile, rng);
        let vips = RandomVips::new(profile, rng).build(&mut t, rng);
        let hot = hot_flows(&vips, rng);
        Scenario {
            tables: t,
            vips,
            hot,
        }
    }

    /// The traffic generator of a bank built elsewhere (a compiled configuration): its VIP
    /// entries with their valid slots' ranges, hot flows toward them.
    pub fn from_tables(tables: Tables, rng: &mut StdRng) -> Scenario {
        let vips: Vec<Vip> = tables
            .vip
            .iter()
            .filter(|e| e.valid)
            .map(|e| Vip {
                addr: e.addr,
                protocol: e.protocol,
                ranges: e
                    .slot
                    .iter()
                    .filter(|s| s.valid)
                    .map(|s| (s.port_lo, s.port_hi))
                    .collect(),
                gaps: Vec::new(),
            })
            .collect();
        let hot = hot_flows(&vips, rng);
        Scenario { tables, vips, hot }
    }

    /// Connection-table entries for some of the hot flows (index, entry), each in the bucket
    /// of its TUPLE5 hash, in a free way, some on dead or missing backends.
    pub fn conntrack(&self, profile: &Profile, rng: &mut StdRng) -> Vec<(u32, CtEntry)> {
        let ways = profile.ct_ways;
        let mut used = std::collections::HashSet::new();
        let mut out = Vec::new();
        for f in &self.hot {
            if !rng.random_bool(0.6) {
                continue;
            }
            let key = f.tuple5();
            let bucket = nlb_reference::conntrack::bucket(&key, profile.ct_buckets);
            let way = rng.random_range(0..ways);
            let index = bucket * ways + way;
            if !used.insert(index) {
                continue;
            }
            out.push((
                index,
                // Fields drawn in this order (valid, backend, rule, timestamp): the scenarios
                // of a seed stay what they were.
                CtEntry {
                    valid: rng.random_bool(0.95),
                    ..f.ct_entry(
                        if rng.random_bool(0.9) {
                            rng.random_range(0..48)
                        } else {
                            rng.random()
                        },
                        rng.random_range(0..32),
                        rng.random(),
                    )
                },
            ));
        }
        out
    }

    /// One frame of traffic: mostly to the VIPs, sizes up to jumbo now and then.
    pub fn frame(&self, rng: &mut StdRng) -> Vec<u8> {
        let roll = rng.random_range(0..100);
        if roll < 12 || self.vips.is_empty() {
            return frames::random_frame(rng, 0.4);
        }
        let flow = if roll < 50 && !self.hot.is_empty() {
            self.hot[rng.random_range(0..self.hot.len())]
        } else {
            let Some(v) = pick(&self.vips, rng) else {
                return frames::random_frame(rng, 0.4);
            };
            let mut f = flow_to(v, rng);
            if rng.random_bool(0.05) {
                // Another protocol to the same VIP: TCP / UDP without an entry, or portless.
                f.protocol = [6, 17, 0, 255][rng.random_range(0..4)];
                f.protocol = match f.protocol {
                    0 => portless_protocol(rng, !is_mapped(v.addr)),
                    p => p,
                };
            }
            f
        };
        flow_frame(flow, rng)
    }

    /// A random flow toward one of the bank's VIP entries (a client of a few ports; portless
    /// for a protocol-0 entry), or `None` without VIPs.
    pub fn random_flow(&self, rng: &mut StdRng) -> Option<Flow> {
        pick(&self.vips, rng).map(|v| flow_to(v, rng))
    }
}

/// One frame of a flow: TCP with random flags (SYN alone now and then), UDP, or the flow's
/// portless protocol; VLAN tags, sizes up to jumbo; a fifth of them fragments, a tenth ICMP
/// errors quoting the flow either way round.
pub fn flow_frame(flow: Flow, rng: &mut StdRng) -> Vec<u8> {
    let v6 = !is_mapped(flow.vip);
    let mut spec = FrameSpec::tcp4(0, 0, 0, 0, 0);
    spec.vlans = match rng.random_range(0..10) {
        0 => vec![(frames::TPID_8021Q, 100)],
        1 => vec![(frames::TPID_8021AD, 10), (frames::TPID_8021Q, 20)],
        _ => Vec::new(),
    };
    spec.payload = match rng.random_range(0..20) {
        0 => rng.random_range(8900..9000),
        1 => rng.random_range(300..1500),
        _ => rng.random_range(0..64),
    };
    let transport = |rng: &mut StdRng, f: &Flow| -> L4 {
        match f.protocol {
            6 => L4::Tcp {
                sport: f.client_port,
                dport: f.vip_port,
                flags: [0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14][rng.random_range(0..7)],
            },
            17 => L4::Udp {
                sport: f.client_port,
                dport: f.vip_port,
            },
            // ICMP / ICMPv6 of the packet's own family: informational types (echo request
            // and reply, timestamp, neighbour solicitation, ...), never errors.
            1 if !v6 => L4::Icmp {
                ty: [8, 0, 13, 14][rng.random_range(0..4)],
                code: 0,
                body: Vec::new(),
            },
            58 if v6 => L4::Icmp {
                ty: [128, 129, 133, 135, 136][rng.random_range(0..5)],
                code: 0,
                body: Vec::new(),
            },
            p => L4::Other(p),
        }
    };
    if rng.random_bool(0.1) {
        // An ICMP error about the flow: quoting the backend's reply (from the VIP) or the
        // client's packet (toward the VIP); addressed to the VIP or the client.
        let reply = rng.random_bool(0.6);
        let (qs, qd, qsp, qdp) = if reply {
            (flow.vip, flow.client, flow.vip_port, flow.client_port)
        } else {
            (flow.client, flow.vip, flow.client_port, flow.vip_port)
        };
        let inner_l4 = match flow.protocol {
            6 => L4::Tcp {
                sport: qsp,
                dport: qdp,
                flags: 0x10,
            },
            17 => L4::Udp {
                sport: qsp,
                dport: qdp,
            },
            // A quote of a portless packet is no usable quote (docs/pipeline.md §2).
            p if rng.random_bool(0.5) => L4::Other(p),
            _ => L4::Udp {
                sport: qsp,
                dport: qdp,
            },
        };
        let router = if v6 {
            0x2001_0db8_00ee_0000_0000_0000_0000_0001
        } else {
            mapped(0x0a63_0001)
        };
        let inner = ip_layer(v6, qs, qd, rng, false);
        let ty = if v6 {
            [1, 2, 3][rng.random_range(0..3)]
        } else {
            [3, 11][rng.random_range(0..2)]
        };
        spec.l4 = frames::icmp_error(v6, ty, &inner, &inner_l4, 8);
        spec.ip = Some(ip_layer(v6, router, flow.vip, rng, false));
        spec.payload = 0;
    } else {
        spec.l4 = transport(rng, &flow);
        let fragment = rng.random_bool(0.2);
        spec.ip = Some(ip_layer(v6, flow.client, flow.vip, rng, fragment));
    }
    spec.build()
}

/// Port-range layouts of a VIP entry (slot order): one slot (all ports, or one port), a few,
/// 5, 8 and all 16 slots (disjoint, as the compiler writes them: the 16 cover every port, so
/// random ports reach every slot), and 16 nested ranges around port 1000, where the lowest
/// matching slot is not the only one (a table the compiler never writes; the pipeline's rule
/// is the lowest match whatever the contents).
pub fn port_layouts() -> Vec<Vec<(u16, u16)>> {
    let mut v: Vec<Vec<(u16, u16)>> = vec![
        vec![(0, 65535)],
        vec![(80, 80)],
        vec![(80, 80), (443, 443)],
        vec![(53, 53), (8000, 8080), (9000, 9000)],
        vec![(1, 100), (200, 300), (443, 443), (1000, 65000)],
        vec![
            (1, 100),
            (200, 300),
            (443, 443),
            (1000, 2000),
            (3000, 65000),
        ],
        (0..8).map(|i| (8000 + 10 * i, 8000 + 10 * i + 4)).collect(),
    ];
    v.push((0..16u16).map(|i| (i * 4096, i * 4096 + 4095)).collect());
    v.push((0..16u16).map(|i| (1000 - 50 * i, 1000 + 50 * i)).collect());
    v
}

/// Port slots of a VIP entry.
fn e_slots() -> usize {
    VipEntry::default().slot.len()
}

/// Puts an empty valid entry of (protocol, addr) in a free way of its bucket; its index.
fn place(t: &mut Tables, profile: &Profile, protocol: u8, addr: u128) -> Option<usize> {
    let ways = profile.vip_ways as usize;
    let bucket = nlb_reference::lookup::vip_bucket(profile, protocol, addr) as usize;
    let way = (0..ways).find(|w| !t.vip[bucket * ways + w].valid)?;
    let i = bucket * ways + way;
    t.vip[i] = VipEntry {
        valid: true,
        protocol,
        addr,
        ..VipEntry::default()
    };
    Some(i)
}

/// A flow toward a VIP entry: a client of a few ports (none for a protocol-0 entry, whose
/// flows are portless: ICMP, GRE, ESP, ... with ports 0).
fn flow_to(v: &Vip, rng: &mut StdRng) -> Flow {
    let v6 = !is_mapped(v.addr);
    let client = if v6 {
        client_v6(rng)
    } else {
        mapped(client_v4(rng))
    };
    if v.protocol == 0 {
        return Flow {
            protocol: portless_protocol(rng, v6),
            client,
            client_port: 0,
            vip: v.addr,
            vip_port: 0,
        };
    }
    Flow {
        protocol: v.protocol,
        client,
        client_port: client_port(rng),
        vip: v.addr,
        vip_port: vip_port(v, rng),
    }
}

/// Hot flows: clients toward the VIPs, repeating (connection-table candidates).
fn hot_flows(vips: &[Vip], rng: &mut StdRng) -> Vec<Flow> {
    let mut hot = Vec::new();
    for _ in 0..64 {
        let Some(v) = pick(vips, rng) else { break };
        hot.push(flow_to(v, rng));
    }
    hot
}

fn pick<'a>(vips: &'a [Vip], rng: &mut StdRng) -> Option<&'a Vip> {
    if vips.is_empty() {
        None
    } else {
        Some(&vips[rng.random_range(0..vips.len())])
    }
}

fn vip_port(v: &Vip, rng: &mut StdRng) -> u16 {
    match (rng.random_bool(0.8), v.ranges.first()) {
        (true, Some(_)) => {
            let (lo, hi) = v.ranges[rng.random_range(0..v.ranges.len())];
            rng.random_range(lo..=hi)
        }
        _ => rng.random(),
    }
}

/// An IP layer between two addresses (both mapped IPv4 or both IPv6), a fragment if asked.
fn ip_layer(v6: bool, src: u128, dst: u128, rng: &mut StdRng, fragment: bool) -> Ip {
    let (offset, more) = if fragment {
        match rng.random_range(0..3) {
            0 => (0, true),
            1 => (rng.random_range(1..200), true),
            _ => (rng.random_range(1..200), false),
        }
    } else {
        (0, false)
    };
    if v6 {
        Ip::V6 {
            src,
            dst,
            tclass: rng.random(),
            flow: rng.random_range(0..0x10_0000),
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
            src: src as u32,
            dst: dst as u32,
            tos: rng.random(),
            id: rng.random(),
            df: rng.random_bool(0.5),
            mf: more,
            frag_offset: offset,
            options: Vec::new(),
        }
    }
}
