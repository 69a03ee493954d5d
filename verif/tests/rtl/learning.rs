//! Hardware learning in RTL (`nlb_top` with `dma.ctrl.hw_learn` = 1, docs/pipeline.md §15.3,
//! SPEC R12.3) against the golden model (`firmware_sim::ModelDevice`, whose `account` installs
//! each LEARN with `ConnTable::install` at `dma.host_time`), and against the rules as the docs
//! write them: a forwarded packet of a tracking pool that misses the connection table (not an
//! ICMP error, not a TCP FIN or RST: those give TEARDOWN) emits a LEARN and the NIC installs the
//! connection itself, in the flow's own entry if its bucket holds one, else in the lowest free
//! way, else nowhere (a full bucket: `installed` = 0); the event record says where; and the
//! entry is seen by **every later packet**, whatever else is in flight: the flow's next packet,
//! back to back right behind the learning one, hits it. A TCP SYN without ACK never looks up
//! (always a miss and a LEARN) and re-installs over its flow's entry. The RTL must learn so
//! because the host no longer installs what the NIC learned (R12.3: a new connection does not
//! wait for the host); a packet that misses an entry the NIC has already written would be
//! placed by Maglev again and could land on another backend after a backend-set change.
//!
//! Both devices get the same tables (a random `Scenario` with connection tracking on in nearly
//! every pool), the same `dma` register writes (hardware learning on, an event ring of 4,096
//! slots, always given back, so no event is dropped; `dma.host_time` changed before every
//! phase), the same connection-table evictions through the `conntrack` window, and the same
//! frames (those the RTL's receive side took: it may drop a frame whole, docs/pipeline.md
//! §14.4). Traffic goes in batches of at most 48 frames back to back (no idle clock on the
//! received stream unless a phase asks for it; the pipeline's event queue holds 64), each
//! batch run until the host memory has been quiet for 1,000 clocks. The cases run on chip
//! (`top`), and the second of every three on `top_hbm`: the connection table and the
//! Maglev slots behind the HBM model, with reads in flight for hundreds of clocks, so that
//! hundreds of packets are between a bucket's read and an install's decision. A batch takes at
//! most 48 installs, fewer than the RTL's 64 install records, so none is ever left to the
//! host for want of a record and both devices install the same.
//!
//! First the RTL must report `dma.caps.hw_learn` = 1 and keep `dma.ctrl.hw_learn`. Phases:
//! (1) new TCP (non-SYN) and UDP flows, each a burst of 2-4 packets back to back; (2) SYN-only
//! packets: new flows, SYNs retransmitted back to back, SYNs of flows already installed;
//! (3) FIN and RST of new and installed flows; (4) flows chosen to fall in the same
//! connection-table bucket (the model's TUPLE5 hash and `ConnTable::bucket_of`, 7 flows for 4
//! ways) so that buckets fill and later flows get `installed` = 0, interleaved within batches,
//! then a SYN of an installed flow of a full bucket; (5) new flows to different buckets and to
//! one bucket interleaved packet by packet with installed flows and the scenario's random
//! traffic, some batches with idle clocks on the received stream; then the host evicts entries
//! on both devices through the conntrack window (some zeroed, some with `valid` = 0 and the
//! 5-tuple kept, which no lookup and no install may take for the flow's own), and (6) those
//! flows learn again.
//!
//! Compared: every packet's result (verdict, reason, rule, pool, backend, key, conntrack
//! outcome, `ct_index`, flow hash, lengths, event) RTL against model in order, per batch;
//! every byte of both host memories (event records with `installed` and `ct_index`, ring
//! write-back records) after every batch; `dma` registers and `conntrack.count` after every
//! phase; at the end every entry of both connection tables (READ_AT through the RTL's window;
//! a mismatch names the index, bucket and way and decodes both entries).
//!
//! From the docs, not from either implementation, on both devices: every packet of a flow
//! known to learn (its first packet, alone on a table without it, is FORWARDed by a tracking
//! pool with a LEARN of its own 5-tuple) must be what docs/pipeline.md §7, §10 and §15.3 make
//! of the flow's bucket as it stood before the batch and the packets before it in the batch:
//! a SYN without ACK a miss, any other packet a HIT at the lowest valid way of its 5-tuple;
//! a FIN or RST a TEARDOWN, any other miss a LEARN whose record places it at the flow's own
//! valid entry, else the lowest free way, else nowhere (`check_docs`; a bucket that other
//! traffic installed in is left unchecked from there). In phase 1, in so many words: the
//! second packet of every burst whose first packet LEARNed is a HIT at the `ct_index` the
//! first's event record named (or, when that record said `installed` = 0, a miss that LEARNs
//! again). The case must reach at least 20 such back-to-back hits, 2 LEARNs on full buckets,
//! 3 SYN re-installs and a TEARDOWN. `NLB_LEARN_CASES` (default 2: one on
//! chip, one on the HBM model) seeds from `NLB_SEED`.

use crate::host_rings::{env_or, side_by_side, words};
use firmware_sim::pipeline::PacketResult;
use firmware_sim::{BatchOutput, CtOutcome, ModelDevice};
use nlb_hw::blocks::{conntrack, ctrl, dma};
use nlb_hw::enums::{Event, TableCmd, Verdict};
use nlb_hw::layouts::{CtEntry, EventRecord, RingWb};
use nlb_hw::{FlowKey, NicSettings, Profile};
use nlb_verif::bench::seed_from_env;
use nlb_verif::frames::{FrameSpec, Ip, L4};
use nlb_verif::hbm::HbmConfig;
use nlb_verif::host_mem::HostMemory;
use nlb_verif::scenario::{is_mapped, mapped, Flow, Scenario};
use nlb_verif::top::TopBench;
use nlb_verif::{Port, VerifError};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

const IOVA: u64 = 0x2_4000_0000;
/// Write-back records, 16 bytes a ring.
const WB: u64 = IOVA;
const EVENT_RING: u64 = IOVA + 0x1000;
/// 4,096 slots: more than a case's events, and given back before every phase anyway.
const EVENT_LOG2: u8 = 12;
const EVENT_SLOTS: u64 = 1 << EVENT_LOG2;
const LEN: usize = 0x1000 + 64 * EVENT_SLOTS as usize;
/// Frames a batch sends back to back (below the pipeline's 64 queued events).
const BATCH: usize = 48;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// Why a case failed: a disagreement (RTL against the model or the docs), or the bench.
#[derive(Debug)]
enum Fail {
    Differs(String),
    Bench(VerifError),
}

impl From<VerifError> for Fail {
    fn from(e: VerifError) -> Fail {
        Fail::Bench(e)
    }
}

type Check<T> = Result<T, Fail>;

fn differs<T>(msg: String) -> Check<T> {
    Err(Fail::Differs(msg))
}

fn setup_err(what: impl std::fmt::Display) -> Fail {
    Fail::Bench(VerifError::Setup(what.to_string()))
}

/// What the docs say the LEARN record of a packet holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placed {
    /// Installed at this index.
    At(u32),
    /// Not installed (its bucket is full).
    Nowhere,
}

/// The flow a packet belongs to, for the docs' rule.
#[derive(Debug, Clone, Copy)]
struct Of {
    flow: Flow,
    /// TCP flags (UDP: 0).
    flags: u8,
    /// Its connection-table bucket.
    bucket: u32,
    /// The flow is forwarded by a tracking pool (its misses LEARN).
    learning: bool,
}

/// A frame to send and what it is.
#[derive(Debug, Clone)]
struct Sent {
    frame: Vec<u8>,
    label: String,
    /// (burst, packet within it) of a back-to-back burst of phase 1.
    burst: Option<(usize, usize)>,
    of: Option<Of>,
}

/// A frame's outcome on both devices (`None`: the RTL's receive side dropped it).
#[derive(Debug, Clone)]
struct Outcome {
    sent: Sent,
    rtl: Option<PacketResult>,
    model: Option<PacketResult>,
    /// Ring index of its event record.
    event_at: Option<u16>,
}

/// What the run reached, for the summary and the requirements.
#[derive(Debug, Default)]
struct Reached {
    frames: usize,
    dropped_on_receive: usize,
    learned: usize,
    not_installed: usize,
    teardowns: usize,
    burst_hits: usize,
    syn_reinstalls: usize,
    /// Packets of learning flows whose outcome the docs' rule predicted and checked.
    predicted: usize,
}

/// Both devices, their host memories, and the traffic's generator.
struct Pair {
    dut: TopBench,
    model: ModelDevice,
    /// The same tables, never learning: says whether a flow's packet is forwarded by a
    /// tracking pool (a LEARN) without touching the devices.
    classify: ModelDevice,
    rtl_mem: HostMemory,
    model_mem: HostMemory,
    scenario: Scenario,
    rng: StdRng,
    out: BatchOutput,
    /// 5-tuples used so far (new flows are new).
    used: HashSet<FlowKey>,
    /// Flows forwarded by a tracking pool: their misses LEARN.
    learning: HashSet<FlowKey>,
    /// Event records written so far (the ring index of the next).
    events: u16,
    event_dropped: Port,
    /// Events the RTL's pipeline dropped for want of room in its event queue.
    rtl_event_drops: u64,
    reached: Reached,
    /// The RTL's tables are on the HBM model.
    hbm: bool,
}

/// A readable 128-bit address.
fn addr(a: u128) -> String {
    if is_mapped(a) {
        Ipv4Addr::from(a as u32).to_string()
    } else {
        format!("[{}]", Ipv6Addr::from(a))
    }
}

fn describe(f: &Flow) -> String {
    let proto = match f.protocol {
        6 => "TCP".to_string(),
        17 => "UDP".to_string(),
        p => format!("protocol {p}"),
    };
    format!(
        "{proto} {}:{} -> {}:{}",
        addr(f.client),
        f.client_port,
        addr(f.vip),
        f.vip_port
    )
}

fn flag_names(flags: u8) -> String {
    let names: Vec<&str> = [
        (SYN, "SYN"),
        (ACK, "ACK"),
        (PSH, "PSH"),
        (FIN, "FIN"),
        (RST, "RST"),
    ]
    .iter()
    .filter(|(b, _)| flags & b != 0)
    .map(|(_, n)| *n)
    .collect();
    names.join("|")
}

/// A frame of `flow` (TCP with `flags`), small mostly (one beat), now and then a few beats.
fn flow_frame(f: &Flow, flags: u8, rng: &mut StdRng) -> Vec<u8> {
    let v6 = !is_mapped(f.vip);
    let mut spec = FrameSpec::tcp4(0, 0, 0, 0, 0);
    spec.ip = Some(if v6 {
        Ip::V6 {
            src: f.client,
            dst: f.vip,
            tclass: 0,
            flow: rng.random_range(0..1 << 20),
            ext: Vec::new(),
        }
    } else {
        Ip::V4 {
            src: f.client as u32,
            dst: f.vip as u32,
            tos: 0,
            id: rng.random(),
            df: rng.random(),
            mf: false,
            frag_offset: 0,
            options: Vec::new(),
        }
    });
    spec.l4 = match f.protocol {
        6 => L4::Tcp {
            sport: f.client_port,
            dport: f.vip_port,
            flags,
        },
        17 => L4::Udp {
            sport: f.client_port,
            dport: f.vip_port,
        },
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
        p => L4::Other(p),
    };
    spec.payload = if rng.random_bool(0.1) {
        rng.random_range(100..400)
    } else {
        rng.random_range(0..20)
    };
    spec.build()
}

/// The event record at ring index `at` in `mem`.
fn record(mem: &HostMemory, at: u16) -> EventRecord {
    let slot = u64::from(at) & (EVENT_SLOTS - 1);
    let b = mem
        .read(EVENT_RING + 64 * slot, 4 * EventRecord::WORDS)
        .expect("event ring in host memory");
    EventRecord::unpack(&words(&b)).expect("event record")
}

/// Where byte `at` of the host memory lies, and the record holding it decoded from both.
fn locate(at: usize, rtl: &[u8], model: &[u8]) -> String {
    let a = IOVA + at as u64;
    let show = |start: u64, n: usize, f: &dyn Fn(&[u32]) -> String| {
        side_by_side(IOVA, start, n, rtl, model, f)
    };
    if a < WB + 64 {
        let start = WB + (a - WB) / 16 * 16;
        format!(
            "write-back record of ring {}{}",
            (a - WB) / 16,
            show(start, 16, &|w| format!("{:?}", RingWb::unpack(w)))
        )
    } else if (EVENT_RING..EVENT_RING + 64 * EVENT_SLOTS).contains(&a) {
        let start = EVENT_RING + (a - EVENT_RING) / 64 * 64;
        format!(
            "event slot {}{}",
            (a - EVENT_RING) / 64,
            show(start, 4 * EventRecord::WORDS, &|w| format!(
                "{:?}",
                EventRecord::unpack(w)
            ))
        )
    } else {
        format!("IOVA {a:#x}")
    }
}

/// A result in one line: what learning is about first.
fn brief(r: &PacketResult) -> String {
    format!(
        "{:?} {:?}, conntrack {:?} ct_index {:?}, backend {:?}, event {:?}",
        r.verdict,
        r.reason,
        r.conntrack,
        r.ct_index,
        r.backend,
        r.event.map(|e| e.event)
    )
}

/// The entries of one bucket as the docs' rule sees them: (index, valid, 5-tuple).
type BucketView = Vec<(u32, bool, FlowKey)>;

/// The docs' install rule (docs/pipeline.md §15.3) over a bucket's view: the entry of the same
/// 5-tuple if the bucket has a valid one, else the lowest free way, else nowhere; the view
/// takes the install.
fn doc_install(view: &mut BucketView, key: &FlowKey) -> Placed {
    let own = view
        .iter()
        .position(|(_, valid, k)| *valid && k == key)
        .or_else(|| view.iter().position(|(_, valid, _)| !*valid));
    match own {
        Some(w) => {
            view[w].1 = true;
            view[w].2 = *key;
            Placed::At(view[w].0)
        }
        None => Placed::Nowhere,
    }
}

fn show_key(k: &FlowKey) -> String {
    describe(&Flow {
        protocol: k.protocol,
        client: k.src_addr,
        client_port: k.src_port,
        vip: k.dst_addr,
        vip_port: k.dst_port,
    })
}

fn show_view(view: &BucketView) -> String {
    view.iter()
        .map(|(i, valid, k)| {
            if *valid {
                format!("{i}: {}", show_key(k))
            } else if k.protocol != 0 || k.src_addr != 0 {
                format!("{i}: free (valid = 0, holding {})", show_key(k))
            } else {
                format!("{i}: free")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// For a result that differs: which earlier packet of the batch LEARNed the entry the model
/// hit and the RTL did not (or the other way round).
fn hint(before: &[Outcome], r: &PacketResult, m: &PacketResult) -> String {
    let learner = |x: &PacketResult| {
        before
            .iter()
            .rev()
            .find(|o| {
                o.model.is_some_and(|p| {
                    p.flow_hash == x.flow_hash && p.event.is_some_and(|e| e.event == Event::Learn)
                })
            })
            .map_or_else(
                || "a packet of an earlier batch".to_string(),
                |o| format!("the earlier packet ({}) of this batch", o.sent.label),
            )
    };
    match (r.conntrack, m.conntrack) {
        (CtOutcome::Miss, CtOutcome::Hit) => format!(
            "\n  (the model hit entry {}, which hardware learning installed on the LEARN of {}; \
             the RTL did not see it: every later packet must, docs/pipeline.md §15.3)",
            m.ct_index.unwrap_or_default(),
            learner(m)
        ),
        (CtOutcome::Hit, CtOutcome::Miss) => format!(
            "\n  (the RTL hit entry {}, which the model's table does not hold for this flow; \
             the flow last LEARNed on {})",
            r.ct_index.unwrap_or_default(),
            learner(r)
        ),
        _ => String::new(),
    }
}

/// The docs' rule (docs/pipeline.md §7, §10, §15.3) for the packets of learning flows in a
/// batch, on one device (`name`: its results and its event records in `mem`), from the buckets
/// as they stood before the batch: a TCP SYN without ACK misses without lookup; any other
/// packet hits the lowest valid way of its 5-tuple; a FIN or RST gives a TEARDOWN, any other
/// miss a LEARN, which installs in the flow's own valid entry, else the lowest free way, else
/// nowhere, and every later packet sees it. A bucket another packet installed in (random
/// traffic) is left unchecked from there. Returns the packets checked and the SYN re-installs.
fn check_docs(
    phase: &str,
    name: &str,
    outcomes: &[Outcome],
    mem: &HostMemory,
    mut views: HashMap<u32, BucketView>,
    ways: u32,
) -> Check<(usize, usize)> {
    let (mut checked, mut syn_reinstalls) = (0, 0);
    let mut tainted: HashSet<u32> = HashSet::new();
    for o in outcomes {
        let r = if name == "RTL" { &o.rtl } else { &o.model };
        let Some(r) = r else { continue };
        let rec = o.event_at.map(|at| record(mem, at));
        let Some(of) = o.sent.of.filter(|of| of.learning) else {
            if let Some(rec) = rec.filter(|rec| rec.event[0].event == Event::Learn) {
                if rec.installed {
                    tainted.insert(rec.ct_index / ways);
                }
            }
            continue;
        };
        if tainted.contains(&of.bucket) {
            continue;
        }
        let Some(view) = views.get_mut(&of.bucket) else {
            continue;
        };
        let before = show_view(view);
        let key = of.flow.tuple5();
        let tcp = of.flow.protocol == 6;
        let syn_only = tcp && of.flags & (SYN | ACK) == SYN;
        let teardown = tcp && of.flags & (FIN | RST) != 0;
        let own = view
            .iter()
            .find(|(_, valid, k)| *valid && *k == key)
            .map(|(i, ..)| *i);
        let hit = if syn_only { None } else { own };
        let event = if teardown {
            Some(Event::Teardown)
        } else if hit.is_none() {
            Some(Event::Learn)
        } else {
            None
        };
        let outcome = if hit.is_some() {
            CtOutcome::Hit
        } else {
            CtOutcome::Miss
        };
        if r.verdict != Verdict::Forward
            || r.conntrack != outcome
            || r.ct_index != hit
            || r.event.map(|e| e.event) != event
        {
            return differs(format!(
                "{phase}: {}: on the {name}: {}; the docs give: FORWARD, conntrack {outcome:?} \
                 ct_index {hit:?}, event {event:?} (docs/pipeline.md §7, §10, §15.3: every \
                 packet sees what learning installed before it), its bucket then holding \
                 [{before}]",
                o.sent.label,
                brief(r)
            ));
        }
        if event == Some(Event::Learn) {
            let want = doc_install(view, &key);
            let rec = rec.expect("a LEARN has its record");
            let got = if rec.installed {
                Placed::At(rec.ct_index)
            } else {
                Placed::Nowhere
            };
            if got != want {
                return differs(format!(
                    "{phase}: {}: the {name}'s LEARN record says {got:?} (installed = {}, \
                     ct_index = {}); the docs' rule (the flow's own valid entry, else the lowest \
                     free way, else nowhere: docs/pipeline.md §15.3) gives {want:?}, its bucket \
                     then holding [{before}]",
                    o.sent.label, rec.installed, rec.ct_index
                ));
            }
            if syn_only && own.is_some() {
                syn_reinstalls += 1;
            }
        }
        checked += 1;
    }
    Ok((checked, syn_reinstalls))
}

fn key_of(e: &CtEntry) -> FlowKey {
    Flow {
        protocol: e.protocol,
        client: e.src_addr,
        client_port: e.src_port,
        vip: e.dst_addr,
        vip_port: e.dst_port,
    }
    .tuple5()
}

impl Pair {
    fn write(&mut self, offset: u32, value: u32) -> Check<()> {
        self.dut.write32(offset, value)?;
        self.model
            .write32(offset, value)
            .map_err(|e| setup_err(format!("model register {offset:#x}: {e}")))
    }

    fn profile(&self) -> &'static Profile {
        self.model.profile()
    }

    /// The connection-table bucket of a flow: the model's TUPLE5 hash, `ConnTable::bucket_of`.
    fn bucket(&self, f: &Flow) -> u32 {
        self.model.conntrack().bucket_of(f.tuple5().hash())
    }

    /// The model's entry of a flow (the devices' tables agree so far: results said so).
    fn installed(&self, f: &Flow) -> Option<u32> {
        self.model.conntrack().lookup(&f.tuple5())
    }

    /// One packet of `f`.
    fn packet(&mut self, f: &Flow, flags: u8, what: &str) -> Sent {
        let frame = flow_frame(f, flags, &mut self.rng);
        let label = if f.protocol == 6 {
            format!(" [{}]", flag_names(flags))
        } else {
            String::new()
        };
        let (bucket, learning) = (self.bucket(f), self.learning.contains(&f.tuple5()));
        Sent {
            frame,
            label: format!("{what}: {}{label}", describe(f)),
            burst: None,
            of: Some(Of {
                flow: *f,
                flags: if f.protocol == 6 { flags } else { 0 },
                bucket,
                learning,
            }),
        }
    }

    /// A scenario frame (hot flows, fragments, ICMP errors, random and malformed frames).
    fn random_frame(&mut self) -> Sent {
        Sent {
            frame: self.scenario.frame(&mut self.rng),
            label: "a frame of the scenario's random traffic".into(),
            burst: None,
            of: None,
        }
    }

    /// A client address not yet used with `vip`'s family, near the scenario's clients (so the
    /// rules' ACLs admit many).
    fn client(&mut self, v6: bool) -> u128 {
        if v6 {
            0x2001_0db8_00c0_0000_0000_0000_0000_0000
                + u128::from(self.rng.random_range(1..4096u32))
        } else {
            mapped(0x0a00_0000 + self.rng.random_range(1..255u32))
        }
    }

    /// Whether the first packet of `f` (a TCP ACK, or its protocol's packet) LEARNs the
    /// flow's own 5-tuple on a table without it: forwarded by a tracking pool.
    fn learns(&mut self, f: &Flow) -> bool {
        let frame = flow_frame(f, ACK, &mut self.rng);
        let mut out = BatchOutput::new();
        self.classify.receive_batch(&[frame.as_slice()], &mut out);
        out.results.first().is_some_and(|r| {
            r.verdict == Verdict::Forward
                && r.conntrack == CtOutcome::Miss
                && r.flow_hash == f.tuple5().hash()
                && r.event.is_some_and(|e| {
                    e.event == Event::Learn
                        && (e.protocol, e.src_addr, e.src_port, e.dst_addr, e.dst_port)
                            == (f.protocol, f.client, f.client_port, f.vip, f.vip_port)
                })
        })
    }

    /// A new flow toward a VIP of the scenario: of `protocol` when given (6 or 17), and one
    /// that learns when `learning`. `None` when the scenario has none after many tries.
    fn new_flow(&mut self, protocol: Option<u8>, learning: bool) -> Option<Flow> {
        for _ in 0..2000 {
            let mut f = self.scenario.random_flow(&mut self.rng)?;
            match protocol {
                Some(p) if f.protocol != p => continue,
                None if learning && f.protocol != 6 && f.protocol != 17 => continue,
                _ => {}
            }
            f.client = self.client(!is_mapped(f.vip));
            if f.protocol == 6 || f.protocol == 17 {
                f.client_port = self.rng.random_range(1024..=65535);
            }
            if self.used.contains(&f.tuple5()) {
                continue;
            }
            let learns = self.learns(&f);
            if learning && !learns {
                continue;
            }
            self.used.insert(f.tuple5());
            if learns {
                self.learning.insert(f.tuple5());
            }
            return Some(f);
        }
        None
    }

    /// A new flow that learns, TCP or UDP as it comes.
    fn learning_flow(&mut self, protocol: Option<u8>) -> Option<Flow> {
        self.new_flow(protocol, true)
            .or_else(|| self.new_flow(None, true))
    }

    /// `n` new flows that learn, all in one connection-table bucket (the first flow's): same
    /// client and VIP, client ports searched for the bucket (about 16 of 65,536 ports fall in
    /// each of the 4,096 buckets), other clients when those are not enough.
    fn bucket_flows(&mut self, n: usize) -> Check<Vec<Flow>> {
        let base = self.learning_flow(None).ok_or_else(|| {
            setup_err(
                "no TCP or UDP flow learns (forwarded by a tracking pool, its LEARN of its \
                     own 5-tuple and flow hash FlowKey::hash)",
            )
        })?;
        let bucket = self.bucket(&base);
        let mut flows = vec![base];
        for k in 0..16u8 {
            // Neighbours of the base flow's client (k = 0: the client itself).
            let client = base.client ^ u128::from(k);
            for port in 1024..=65535u16 {
                if flows.len() == n {
                    return Ok(flows);
                }
                let f = Flow {
                    client,
                    client_port: port,
                    ..base
                };
                if self.bucket(&f) != bucket || self.used.contains(&f.tuple5()) || !self.learns(&f)
                {
                    continue;
                }
                self.used.insert(f.tuple5());
                self.learning.insert(f.tuple5());
                flows.push(f);
            }
        }
        Err(setup_err(format!(
            "found only {} learning flows in bucket {bucket}",
            flows.len()
        )))
    }

    /// Flows the tables hold now, among `flows`.
    fn installed_flows(&self, flows: &[Flow]) -> Vec<Flow> {
        flows
            .iter()
            .filter(|f| self.installed(f).is_some())
            .copied()
            .collect()
    }

    fn set_host_time(&mut self, t: u32) -> Check<()> {
        self.write(dma::HOST_TIME, t)
    }

    /// Between phases: the host's clock moves on (a new `dma.host_time`) and it gives every
    /// event slot back.
    fn next_phase(&mut self) -> Check<()> {
        let t = self.rng.random();
        self.set_host_time(t)?;
        self.give_back()
    }

    /// Gives the NIC every slot of the event ring (the host consumed what it wrote).
    fn give_back(&mut self) -> Check<()> {
        let host = self.events.wrapping_add(EVENT_SLOTS as u16);
        self.write(dma::EVENT_HOST, u32::from(host))
    }

    /// Hardware learning on; the event ring set up with every slot given.
    fn program(&mut self) -> Check<()> {
        let ctl = dma::Ctrl {
            enable: true,
            hw_learn: true,
        }
        .word();
        self.write(dma::CTRL, ctl)?;
        self.write(dma::WB_LO, WB as u32)?;
        self.write(dma::WB_HI, (WB >> 32) as u32)?;
        self.write(dma::EVENT_BASE_LO, EVENT_RING as u32)?;
        self.write(dma::EVENT_BASE_HI, (EVENT_RING >> 32) as u32)?;
        let size = dma::EventSize {
            log2: EVENT_LOG2,
            enable: true,
        }
        .word()
        .map_err(setup_err)?;
        self.write(dma::EVENT_SIZE, size)?;
        self.give_back()
    }

    /// The frames of `sent` into the RTL back to back; those its receive side took into the
    /// model; both run dry. Then every result compared in order, both host memories, and the
    /// docs' rule for the packets of learning flows, on both devices.
    fn batch(&mut self, phase: &str, sent: &[Sent], rx_idle: f64) -> Check<Vec<Outcome>> {
        let n = sent.len();
        // The buckets the learning flows fall in, as they stand before the batch.
        let mut views: HashMap<u32, BucketView> = HashMap::new();
        for of in sent.iter().filter_map(|s| s.of).filter(|of| of.learning) {
            views
                .entry(of.bucket)
                .or_insert_with(|| self.bucket_view(of.bucket));
        }
        self.dut.rx.idle = rx_idle;
        let first = self.dut.rx_sent;
        for s in sent {
            self.dut.send(&s.frame);
        }
        let mut rtl: Vec<PacketResult> = Vec::new();
        let mut dropped = vec![false; n];
        let mut done = 0usize;
        let (mut last_moved, mut quiet) = (0u64, 0u64);
        let limit = self.dut.bench.sim.cycle() + 3_000 * n as u64 + 50_000;
        loop {
            self.dut.step()?;
            if self.dut.bench.sim.get_bit(self.event_dropped)? {
                self.rtl_event_drops += 1;
            }
            while let Some(d) = self.dut.mon.drops.pop_front() {
                if let Some(x) = dropped.get_mut(d.seq.wrapping_sub(first) as usize) {
                    *x = true;
                }
                done += 1;
            }
            while let Some((_, _, r)) = self.dut.mon.results.pop_front() {
                rtl.push(r);
                done += 1;
            }
            // Results come out before their events reach the ring: done once the host memory
            // has been quiet for a while.
            let moved = self.dut.host.write_beats + self.dut.host.read_bursts;
            if moved != last_moved || !self.dut.host.idle() {
                (last_moved, quiet) = (moved, 0);
            } else {
                quiet += 1;
            }
            if done >= n && quiet >= 1_000 {
                break;
            }
            if self.dut.bench.sim.cycle() > limit {
                return Err(Fail::Bench(VerifError::Timeout {
                    what: format!("{phase}: {done} of {n} frames through, host memory idle"),
                    cycles: self.dut.bench.sim.cycle(),
                }));
            }
        }
        self.dut.tx.take();
        self.dut.punt.take();
        self.dut.pass.take();
        self.dut.events.take();
        self.dut.tx_pending.clear();
        if let Some(v) = self.dut.mon.violations.first() {
            return differs(format!("{phase}: the result monitor saw {v}"));
        }
        if self.rtl_event_drops != 0 {
            return differs(format!(
                "{phase}: the RTL's pipeline dropped {} events for want of room in its event \
                 queue (the test sends at most {BATCH} frames at once so that it need not)",
                self.rtl_event_drops
            ));
        }
        let taken: Vec<&[u8]> = sent
            .iter()
            .zip(&dropped)
            .filter(|(_, d)| !**d)
            .map(|(s, _)| s.frame.as_slice())
            .collect();
        self.model.receive_batch(&taken, &mut self.out);
        if rtl.len() != self.out.results.len() {
            return differs(format!(
                "{phase}: {} results from the RTL for {} frames taken",
                rtl.len(),
                taken.len()
            ));
        }
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(n);
        let mut results = rtl.into_iter().zip(self.out.results.iter().copied());
        for (k, (s, d)) in sent.iter().zip(&dropped).enumerate() {
            let (r, m) = if *d {
                (None, None)
            } else {
                let (r, m) = results.next().expect("one result a frame taken");
                if r != m {
                    return differs(format!(
                        "{phase}: frame {k} of a batch of {n} ({}) differs:\n  RTL:   {}\n  \
                         model: {}{}\n  RTL   {r:?}\n  model {m:?}",
                        s.label,
                        brief(&r),
                        brief(&m),
                        hint(&outcomes, &r, &m)
                    ));
                }
                (Some(r), Some(m))
            };
            let event_at = m.and_then(|m| m.event).map(|_| {
                let at = self.events;
                self.events = self.events.wrapping_add(1);
                at
            });
            self.reached.frames += 1;
            self.reached.dropped_on_receive += usize::from(*d);
            outcomes.push(Outcome {
                sent: s.clone(),
                rtl: r,
                model: m,
                event_at,
            });
        }
        self.compare_memory(phase)?;
        let ways = self.profile().ct_ways;
        for o in outcomes.iter().filter(|o| o.event_at.is_some()) {
            let rec = record(&self.model_mem, o.event_at.expect("an event"));
            match (rec.event[0].event, rec.installed) {
                (Event::Learn, true) => self.reached.learned += 1,
                (Event::Learn, false) => self.reached.not_installed += 1,
                (Event::Teardown, _) => self.reached.teardowns += 1,
            }
        }
        let docs =
            |name, mem: &HostMemory, views| check_docs(phase, name, &outcomes, mem, views, ways);
        docs("RTL", &self.rtl_mem, views.clone())?;
        let (predicted, syn) = docs("model", &self.model_mem, views)?;
        self.reached.predicted += predicted;
        self.reached.syn_reinstalls += syn;
        Ok(outcomes)
    }

    /// Every byte of both host memories.
    fn compare_memory(&self, phase: &str) -> Check<()> {
        let (rtl, model) = (self.rtl_mem.snapshot(), self.model_mem.snapshot());
        if let Some(at) = rtl.iter().zip(&model).position(|(a, b)| a != b) {
            return differs(format!(
                "{phase}: host memory differs first at {} (rtl {:#04x}, model {:#04x})",
                locate(at, &rtl, &model),
                rtl[at],
                model[at]
            ));
        }
        Ok(())
    }

    /// Sends `batches` (each back to back), returning every outcome in order.
    fn run(&mut self, phase: &str, batches: &[Vec<Sent>], idle: &[f64]) -> Check<Vec<Outcome>> {
        let mut all = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            let rx_idle = idle.get(i % idle.len().max(1)).copied().unwrap_or(0.0);
            all.extend(self.batch(phase, b, rx_idle)?);
        }
        Ok(all)
    }

    /// `dma` registers and the connection count, after a phase.
    fn compare_registers(&mut self, phase: &str) -> Check<()> {
        for (name, reg) in [
            ("dma.event_dev", dma::EVENT_DEV),
            ("dma.event_drops", dma::EVENT_DROPS),
            ("dma.event_host", dma::EVENT_HOST),
            ("dma.ctrl", dma::CTRL),
            ("dma.host_time", dma::HOST_TIME),
            ("dma.faults", dma::FAULTS),
            ("conntrack.count", conntrack::COUNT),
        ] {
            let r = self.dut.read32(reg)?;
            let m = self.model.read32(reg).map_err(setup_err)?;
            if r != m {
                return differs(format!(
                    "{phase}: {name} reads {r:#x} on the RTL, {m:#x} on the model"
                ));
            }
        }
        let ring = self.dut.read32(dma::EVENT_DEV)?;
        if ring != u32::from(self.events) {
            return differs(format!(
                "{phase}: {} events came, the event ring completed {ring}",
                self.events
            ));
        }
        Ok(())
    }

    /// Evicts entry `index` on both devices through the conntrack window, as the host does:
    /// zeroed, or (`keep_key`) with `valid` = 0 and the rest kept.
    fn evict(&mut self, index: u32, keep_key: bool) -> Check<()> {
        let old = *self
            .model
            .conntrack()
            .entry(index)
            .ok_or_else(|| setup_err(format!("entry {index} beyond the table")))?;
        let e = if keep_key {
            CtEntry {
                valid: false,
                ..old
            }
        } else {
            CtEntry::default()
        };
        let words = e.pack().map_err(setup_err)?;
        for (i, w) in words.iter().enumerate() {
            self.write(conntrack::DATA + 4 * i as u32, *w)?;
        }
        let cmd = conntrack::Cmd {
            op: TableCmd::WriteAt,
            index,
        }
        .word()
        .map_err(setup_err)?;
        self.write(conntrack::CMD, cmd)?;
        let r = self.dut.read32(conntrack::STATUS)?;
        let m = self.model.read32(conntrack::STATUS).map_err(setup_err)?;
        if r != 0 || m != 0 {
            return differs(format!(
                "evicting entry {index}: conntrack.status {r:#x} on the RTL, {m:#x} on the model"
            ));
        }
        Ok(())
    }

    /// A bucket as the docs' rule sees it, from the table (both agree so far).
    fn bucket_view(&self, bucket: u32) -> BucketView {
        let ways = self.profile().ct_ways;
        (bucket * ways..(bucket + 1) * ways)
            .map(|i| {
                let e = self.model.conntrack().entry(i).copied().unwrap_or_default();
                (i, e.valid, key_of(&e))
            })
            .collect()
    }

    /// Every entry of both connection tables: READ_AT through the RTL's conntrack window, the
    /// model's table as it stands. Returns the valid entries.
    fn compare_tables(&mut self) -> Check<u32> {
        let p = self.profile();
        let entries = p.ct_entries();
        self.dut.axil.idle = 0.0;
        if self.hbm {
            // A host operation whose speed nothing here looks at.
            self.dut
                .set_hbm(&HbmConfig::quick(self.dut.bench.seed() as u32))?;
        }
        let mut bad: Vec<String> = Vec::new();
        let mut n_bad = 0;
        let mut valid = 0;
        for i in 0..entries {
            let cmd = conntrack::Cmd {
                op: TableCmd::ReadAt,
                index: i,
            }
            .word()
            .map_err(setup_err)?;
            self.dut.write32(conntrack::CMD, cmd)?;
            let mut got = Vec::with_capacity(CtEntry::WORDS);
            for w in 0..CtEntry::WORDS as u32 {
                got.push(self.dut.read32(conntrack::DATA + 4 * w)?);
            }
            let m = self.model.conntrack().entry(i).copied().unwrap_or_default();
            valid += u32::from(m.valid);
            let want = m.pack().map_err(setup_err)?;
            if got[..] != want[..] {
                n_bad += 1;
                if bad.len() < 6 {
                    bad.push(format!(
                        "entry {i} (bucket {}, way {}):\n    RTL:   {:?}\n    model: {m:?}",
                        i / p.ct_ways,
                        i % p.ct_ways,
                        CtEntry::unpack(&got)
                    ));
                }
            }
        }
        if n_bad > 0 {
            return differs(format!(
                "the connection tables differ in {n_bad} of {entries} entries; the first:\n  {}",
                bad.join("\n  ")
            ));
        }
        Ok(valid)
    }
}

/// Packs bursts into batches of at most [`BATCH`] frames, never splitting a burst.
fn pack(bursts: Vec<Vec<Sent>>) -> Vec<Vec<Sent>> {
    let mut batches: Vec<Vec<Sent>> = vec![Vec::new()];
    for b in bursts {
        if batches.last().is_some_and(|l| l.len() + b.len() > BATCH) {
            batches.push(Vec::new());
        }
        if let Some(l) = batches.last_mut() {
            l.extend(b);
        }
    }
    batches.retain(|b| !b.is_empty());
    batches
}

/// Interleaves the packet lists at random, each list's order kept, into batches of at most
/// `max` frames.
fn interleave(mut lists: Vec<Vec<Sent>>, rng: &mut StdRng, max: usize) -> Vec<Vec<Sent>> {
    for l in &mut lists {
        l.reverse();
    }
    let mut flat = Vec::new();
    loop {
        lists.retain(|l| !l.is_empty());
        if lists.is_empty() {
            break;
        }
        let i = rng.random_range(0..lists.len());
        if let Some(s) = lists[i].pop() {
            flat.push(s);
        }
    }
    flat.chunks(max).map(<[Sent]>::to_vec).collect()
}

/// The docs' check of phase 1 (on both devices): the second packet of a burst whose first
/// packet LEARNed hits the entry the first's record named, or, when that record said it was
/// not installed, misses and LEARNs again. Returns the bursts checked with an entry.
fn check_bursts(
    outcomes: &[Outcome],
    rtl_mem: &HostMemory,
    model_mem: &HostMemory,
) -> Check<usize> {
    let mut hits = 0;
    for pair in outcomes.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (Some((ba, 0)), Some((bb, 1))) = (a.sent.burst, b.sent.burst) else {
            continue;
        };
        if ba != bb {
            continue;
        }
        let Some(at) = a.event_at else { continue };
        for (name, mem, first, second) in [
            ("RTL", rtl_mem, &a.rtl, &b.rtl),
            ("model", model_mem, &a.model, &b.model),
        ] {
            let (Some(first), Some(second)) = (first, second) else {
                continue;
            };
            if first.event.map(|e| e.event) != Some(Event::Learn) {
                continue;
            }
            let rec = record(mem, at);
            if rec.event[0] != first.event.expect("a LEARN") {
                return differs(format!(
                    "phase 1: {}: the {name}'s event record {rec:?} is not its packet's event {:?}",
                    a.sent.label, first.event
                ));
            }
            let ok = if rec.installed {
                second.conntrack == CtOutcome::Hit
                    && second.ct_index == Some(rec.ct_index)
                    && second.event.map(|e| e.event) != Some(Event::Learn)
            } else {
                second.conntrack == CtOutcome::Miss
                    && second.event.map(|e| e.event) == Some(Event::Learn)
            };
            if !ok {
                return differs(format!(
                    "phase 1: burst {ba}: the first packet ({}) LEARNed with record installed = {} \
                     ct_index = {}; the packet right behind it ({}) must {} (docs/pipeline.md \
                     §15.3: every later packet sees the entry), but on the {name} it was: {}",
                    a.sent.label,
                    rec.installed,
                    rec.ct_index,
                    b.sent.label,
                    if rec.installed {
                        format!("HIT entry {} and not LEARN", rec.ct_index)
                    } else {
                        "miss and LEARN again".to_string()
                    },
                    brief(second)
                ));
            }
            if name == "RTL" && rec.installed {
                hits += 1;
            }
        }
    }
    Ok(hits)
}

/// Both devices with the scenario's tables; the RTL's connection table and Maglev slots on
/// the HBM model (`top_hbm`, loaded on a quick memory, the traffic then on
/// `HbmConfig::realistic`: reads in flight for hundreds of clocks) when `hbm`, else on chip.
fn setup(seed: u64, hbm: bool) -> Check<Pair> {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut scenario = Scenario::random(profile, &mut rng);
    // Connection tracking on in every pool but a few (whose packets never learn).
    for (i, pool) in scenario.tables.pools.iter_mut().enumerate() {
        pool.track = i % 8 != 7;
    }
    let settings = NicSettings::default();
    let quick = HbmConfig::quick(seed as u32);
    let mut dut = TopBench::with_memory(hbm.then_some(&quick), seed, None, 0.0, 0.0, 0.1)?;
    let rtl_mem = HostMemory::new(IOVA, LEN);
    let model_mem = HostMemory::new(IOVA, LEN);
    dut.host.set_memory(rtl_mem.clone());
    dut.write_settings(&settings)?;
    dut.load_bank(0, &scenario.tables)?;
    dut.write32(ctrl::ACTIVE_BANK, 0)?;
    dut.write32(ctrl::ENABLE, 1)?;
    if hbm {
        dut.set_hbm(&HbmConfig::realistic(seed as u32))?;
    }
    let event_dropped = dut.bench.sim.port("m_event_dropped")?;
    let mut model = ModelDevice::from_tables(scenario.tables.clone(), settings);
    model.set_dma_port(Some(Box::new(model_mem.port())));
    let classify = ModelDevice::from_tables(scenario.tables.clone(), settings);
    Ok(Pair {
        dut,
        model,
        classify,
        rtl_mem,
        model_mem,
        scenario,
        rng,
        out: BatchOutput::new(),
        used: HashSet::new(),
        learning: HashSet::new(),
        events: 0,
        event_dropped,
        rtl_event_drops: 0,
        reached: Reached::default(),
        hbm,
    })
}

/// Phase 1: new flows, each a burst of 2-4 packets back to back.
fn phase_bursts(p: &mut Pair, flows: &mut Vec<Flow>) -> Vec<Vec<Sent>> {
    let mut bursts = Vec::new();
    for b in 0..90 {
        let proto = if p.rng.random_bool(0.5) { 6 } else { 17 };
        // Mostly flows that learn; some of any kind (untracked pools, drops, portless).
        let flow = if p.rng.random_bool(0.85) {
            p.learning_flow(Some(proto))
        } else {
            p.new_flow(None, false)
        };
        let Some(flow) = flow else { continue };
        flows.push(flow);
        let k = p.rng.random_range(2..=4);
        let burst: Vec<Sent> = (0..k)
            .map(|j| {
                let flags = if p.rng.random_bool(0.5) {
                    ACK
                } else {
                    ACK | PSH
                };
                let mut s = p.packet(&flow, flags, &format!("burst {b}, packet {} of {k}", j + 1));
                s.burst = Some((b, j));
                s
            })
            .collect();
        bursts.push(burst);
    }
    pack(bursts)
}

/// Phase 2: SYNs (without ACK): new flows, retransmitted back to back, and SYNs of flows the
/// tables hold (re-installed at their entries).
fn phase_syn(p: &mut Pair, flows: &mut Vec<Flow>) -> Vec<Vec<Sent>> {
    let mut bursts = Vec::new();
    for i in 0..30 {
        let Some(f) = p.learning_flow(Some(6)) else {
            break;
        };
        flows.push(f);
        let pattern: &[u8] = match i % 4 {
            0 => &[SYN],
            1 => &[SYN, SYN],
            2 => &[SYN, ACK, ACK | PSH],
            _ => &[SYN, SYN, ACK],
        };
        bursts.push(
            pattern
                .iter()
                .map(|&fl| p.packet(&f, fl, "new flow"))
                .collect(),
        );
    }
    let installed: Vec<Flow> = p
        .installed_flows(flows)
        .into_iter()
        .filter(|f| f.protocol == 6)
        .take(20)
        .collect();
    for (i, f) in installed.iter().enumerate() {
        let pattern: &[u8] = match i % 3 {
            0 => &[SYN],
            1 => &[SYN, ACK],
            _ => &[ACK, SYN, ACK],
        };
        bursts.push(
            pattern
                .iter()
                .map(|&fl| p.packet(f, fl, "installed flow"))
                .collect(),
        );
    }
    bursts.shuffle(&mut p.rng);
    pack(bursts)
}

/// Phase 3: FIN and RST, of new flows and of installed ones.
fn phase_teardown(p: &mut Pair, flows: &mut Vec<Flow>) -> Vec<Vec<Sent>> {
    let mut bursts = Vec::new();
    for i in 0..24 {
        let Some(f) = p.learning_flow(Some(6)) else {
            break;
        };
        flows.push(f);
        let pattern: &[u8] = match i % 6 {
            0 => &[FIN],
            1 => &[RST, RST],
            2 => &[FIN | ACK, ACK],
            3 => &[RST, ACK, ACK],
            4 => &[ACK, FIN | ACK, ACK],
            _ => &[ACK, RST],
        };
        bursts.push(
            pattern
                .iter()
                .map(|&fl| p.packet(&f, fl, "new flow"))
                .collect(),
        );
    }
    let installed = p.installed_flows(flows);
    for (i, f) in installed.iter().take(24).enumerate() {
        let pattern: &[u8] = if f.protocol != 6 {
            &[0, 0]
        } else {
            match i % 4 {
                0 => &[FIN | ACK],
                1 => &[RST],
                2 => &[FIN | ACK, ACK],
                _ => &[ACK, RST | ACK, ACK],
            }
        };
        bursts.push(
            pattern
                .iter()
                .map(|&fl| p.packet(f, fl, "installed flow"))
                .collect(),
        );
    }
    bursts.shuffle(&mut p.rng);
    pack(bursts)
}

/// The first packets of a bucket's flows interleaved: flows 0-3 take the four ways, the rest
/// find the bucket full; each flow's second packet close behind its first.
fn bucket_round(p: &mut Pair, flows: &[Flow], what: &str) -> Vec<Sent> {
    let mut out = Vec::new();
    let first = |p: &mut Pair, i: usize| {
        let f = flows[i];
        // A SYN-only flow among them (TCP).
        let flags = if f.protocol == 6 && i == 2 { SYN } else { ACK };
        p.packet(&f, flags, &format!("{what} flow {i}, first packet"))
    };
    let second = |p: &mut Pair, i: usize| {
        p.packet(&flows[i], ACK, &format!("{what} flow {i}, second packet"))
    };
    // 0a 1a 0b 2a 1b 3a 4a 3b 4b 5a 6a 5b 6b 2b
    for (i, is_first) in [
        (0, true),
        (1, true),
        (0, false),
        (2, true),
        (1, false),
        (3, true),
        (4, true),
        (3, false),
        (4, false),
        (5, true),
        (6, true),
        (5, false),
        (6, false),
        (2, false),
    ] {
        if i < flows.len() {
            out.push(if is_first { first(p, i) } else { second(p, i) });
        }
    }
    out
}

/// Clears every valid way of `bucket` not held by one of `flows` (a flow of earlier phases
/// that happened to land there), on both devices: the phase wants the bucket to itself.
fn clear_bucket(p: &mut Pair, bucket: u32, flows: &[Flow]) -> Check<()> {
    let own: HashSet<FlowKey> = flows.iter().map(Flow::tuple5).collect();
    for (i, valid, key) in p.bucket_view(bucket) {
        if valid && !own.contains(&key) {
            p.evict(i, false)?;
        }
    }
    Ok(())
}

fn run_case(seed: u64, hbm: bool) -> Check<String> {
    let mut p = setup(seed, hbm)?;
    // Before anything: the RTL must say it learns.
    let caps_word = p.dut.read32(dma::CAPS)?;
    let caps = dma::Caps::from_word(caps_word);
    if !caps.hw_learn {
        return differs(format!(
            "the RTL does not report hardware learning: dma.caps reads {caps_word:#x} \
             (hw_learn = 0, rings = {}, max_log2 = {}); docs/pipeline.md §15.3 and SPEC R12.3 \
             want caps.hw_learn = 1 and the NIC installing each LEARNed connection itself",
            caps.rings, caps.max_log2
        ));
    }
    let model_caps = dma::Caps::from_word(p.model.read32(dma::CAPS).map_err(setup_err)?);
    assert!(
        model_caps.hw_learn,
        "the golden model learns (caps.hw_learn)"
    );
    let t = p.rng.random();
    p.set_host_time(t)?;
    p.program()?;
    let ctl = dma::Ctrl::from_word(p.dut.read32(dma::CTRL)?);
    if !ctl.enable || !ctl.hw_learn {
        return differs(format!(
            "dma.ctrl reads {ctl:?} on the RTL after enable and hw_learn were written (caps says \
             it learns, so hw_learn is stored)"
        ));
    }
    let mut flows: Vec<Flow> = Vec::new();

    // (1) Bursts back to back.
    let batches = phase_bursts(&mut p, &mut flows);
    let out = p.run("phase 1 (bursts back to back)", &batches, &[0.0])?;
    p.compare_registers("phase 1")?;
    p.reached.burst_hits = check_bursts(&out, &p.rtl_mem, &p.model_mem)?;

    // (2) SYNs.
    p.next_phase()?;
    let batches = phase_syn(&mut p, &mut flows);
    p.run("phase 2 (SYN)", &batches, &[0.0])?;
    p.compare_registers("phase 2")?;

    // (3) FIN and RST.
    p.next_phase()?;
    let batches = phase_teardown(&mut p, &mut flows);
    p.run("phase 3 (FIN, RST)", &batches, &[0.0])?;
    p.compare_registers("phase 3")?;

    // (4) Full buckets: two of them, 7 flows each, then both interleaved, then a SYN of an
    // installed flow of a full bucket (its own entry: installed, same index).
    p.next_phase()?;
    let a = p.bucket_flows(7)?;
    let b = p.bucket_flows(7)?;
    let (bucket_a, bucket_b) = (p.bucket(&a[0]), p.bucket(&b[0]));
    clear_bucket(&mut p, bucket_a, &a)?;
    clear_bucket(&mut p, bucket_b, &b)?;
    let round_a = bucket_round(&mut p, &a, "bucket A");
    let round_b = bucket_round(&mut p, &b, "bucket B");
    p.run("phase 4 (full buckets)", &[round_a, round_b], &[0.0])?;
    let mut again: Vec<Vec<Sent>> = a
        .iter()
        .chain(&b)
        .map(|f| {
            let mut s = vec![p.packet(f, ACK, "full bucket, again")];
            match (f.protocol, p.installed(f)) {
                (6, Some(_)) => s.push(p.packet(f, SYN, "full bucket, SYN of an installed flow")),
                (_, None) => s.push(p.packet(f, ACK, "full bucket, a flow left out, again")),
                _ => {}
            }
            s
        })
        .collect();
    again.shuffle(&mut p.rng);
    let again: Vec<Sent> = again.into_iter().flatten().collect();
    p.run("phase 4 (full buckets, again)", &[again], &[0.0])?;
    p.compare_registers("phase 4")?;
    flows.extend(a.iter().chain(&b));

    // (5) Interleaved: new flows to different buckets and to one bucket, installed flows, the
    // scenario's random traffic.
    p.next_phase()?;
    let mut lists: Vec<Vec<Sent>> = Vec::new();
    let mut same: Vec<Flow> = Vec::new();
    for _ in 0..3 {
        same.extend(p.bucket_flows(3)?);
    }
    for _ in 0..30 {
        let Some(f) = p.learning_flow(None) else {
            break;
        };
        same.push(f);
    }
    for f in &same {
        let k = p.rng.random_range(2..=4);
        let list = (0..k)
            .map(|j| {
                let flags = match (f.protocol, j) {
                    (6, 0) if p.rng.random_bool(0.3) => SYN,
                    (6, j) if j + 1 == k && p.rng.random_bool(0.2) => FIN | ACK,
                    _ => ACK,
                };
                p.packet(f, flags, "interleaved new flow")
            })
            .collect();
        lists.push(list);
    }
    let installed = p.installed_flows(&flows);
    for f in installed.iter().take(15) {
        lists.push(vec![p.packet(f, ACK, "interleaved installed flow")]);
    }
    for _ in 0..90 {
        lists.push(vec![p.random_frame()]);
    }
    flows.extend(same);
    let batches = interleave(lists, &mut p.rng, 40);
    p.run("phase 5 (interleaved)", &batches, &[0.0, 0.3])?;
    p.compare_registers("phase 5")?;

    // Evictions by the host, on both devices through the conntrack window: in bucket A, the
    // lower of two installed ways zeroed and the higher left with valid = 0 and its 5-tuple
    // (whose flow must then go to the lower: no install takes an invalid entry for the flow's
    // own); and a few more flows' entries, zeroed or kept invalid.
    p.next_phase()?;
    let mut in_a: Vec<(u32, Flow)> = a
        .iter()
        .filter_map(|f| p.installed(f).map(|i| (i, *f)))
        .collect();
    in_a.sort_by_key(|(i, _)| *i);
    let mut relearn: Vec<Flow> = Vec::new();
    if in_a.len() >= 3 {
        let (lo, hi) = (in_a[1], in_a[2]);
        p.evict(lo.0, false)?;
        p.evict(hi.0, true)?;
        relearn.push(hi.1);
        relearn.push(lo.1);
    }
    // The flows of bucket A left out earlier come after those.
    let left_out: Vec<Flow> = a
        .iter()
        .filter(|f| p.installed(f).is_none() && !relearn.contains(f))
        .copied()
        .collect();
    relearn.extend(left_out);
    let others: Vec<Flow> = p
        .installed_flows(&flows)
        .into_iter()
        .filter(|f| p.bucket(f) != bucket_a)
        .take(8)
        .collect();
    for (k, f) in others.iter().enumerate() {
        let at = p.installed(f).expect("installed");
        p.evict(at, k % 2 == 1)?;
        relearn.push(*f);
    }
    p.compare_registers("evictions")?;
    // (6) The evicted flows learn again (where the docs' rule puts them, checked by `batch`),
    // each with its next packet right behind.
    let relearned: Vec<Vec<Sent>> = relearn
        .iter()
        .map(|f| {
            vec![
                p.packet(f, ACK, "evicted flow learning again"),
                p.packet(f, ACK, "evicted flow, next packet"),
            ]
        })
        .collect();
    let mut batches = pack(relearned);
    batches.push((0..40).map(|_| p.random_frame()).collect());
    p.run("phase 6 (evicted flows learn again)", &batches, &[0.0])?;
    p.compare_registers("phase 6")?;

    // The whole connection table of both.
    let valid = p.compare_tables()?;

    let r = &p.reached;
    let mut missing = Vec::new();
    if r.burst_hits < 20 {
        missing.push(format!(
            "{} back-to-back hits on learned entries",
            r.burst_hits
        ));
    }
    if r.not_installed < 2 {
        missing.push(format!("{} LEARNs on a full bucket", r.not_installed));
    }
    if r.syn_reinstalls < 3 {
        missing.push(format!("{} SYN re-installs", r.syn_reinstalls));
    }
    if r.teardowns == 0 {
        missing.push("no TEARDOWN".into());
    }
    if !missing.is_empty() {
        return differs(format!(
            "the case reached too little: {}",
            missing.join(", ")
        ));
    }
    Ok(format!(
        "seed {seed} ({}): {r:?}; {valid} valid connection entries, equal on both; {} write beats, \
         {} clocks",
        if p.hbm { "top_hbm" } else { "top" },
        p.dut.host.write_beats,
        p.dut.bench.sim.cycle()
    ))
}

#[test]
fn rtl_learns_as_the_model_and_the_docs_say() {
    let base = seed_from_env(0x5eed_1ea2);
    for c in 0..env_or("NLB_LEARN_CASES", 2) {
        let seed = base.wrapping_add(c);
        let t = std::time::Instant::now();
        // The second case of every three on the HBM model.
        match run_case(seed, c % 3 == 1) {
            Ok(summary) => println!("{summary} ({:.0?})", t.elapsed()),
            Err(Fail::Differs(m)) => {
                panic!(
                    "seed {seed}: {m}\n(rerun: NLB_SEED={base} NLB_LEARN_CASES={})",
                    c + 1
                )
            }
            Err(Fail::Bench(e)) => panic!("seed {seed}: {e}"),
        }
    }
}
