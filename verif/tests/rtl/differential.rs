//! The whole pipeline (`nlb_top`) against the golden model, packet by packet.
//!
//! Each case: two random table banks (`nlb_verif::scenario`: every affinity and delivery,
//! tracked and untracked pools, ACLs, VIPs with several rules, `L3_DEFAULT` rules (entries of
//! protocol 0, gap slots in the VIP's TCP and UDP entries), IPv4/IPv6 backends, broken
//! entries) loaded into both banks through the AXI-Lite table window; connections installed
//! through the conntrack block the way the host does; random ctrl settings (default action,
//! local MAC, GUE port, outer source prefixes). Traffic in three phases (bank 0, bank 1, the
//! pipeline disabled): frames to the VIPs (hot flows that hit connections, fragments, ICMP
//! errors quoting VIP flows either way round, portless protocols: ICMP and ICMPv6 echo, GRE,
//! ESP, SCTP, any protocol number; VLAN tags, jumbo frames) mixed with random and
//! malformed frames of every size, plus frames injected by the host to random pools and
//! backends; random idle cycles on both input streams and random back-pressure on the transmit,
//! punt and event streams. Three cases in four run on `top_hbm`, the connection table and the
//! Maglev slots on the HBM model (`nlb_verif::hbm::HbmConfig::realistic`: 60-240 clocks of
//! latency, refresh, reordering, back-pressure); the fourth on chip (`top`).
//!
//! The receive side has no back-pressure: a frame it has no room for is dropped whole and
//! reported on `m_drop_*` (docs/pipeline.md §14.4), which the model cannot predict (it has no
//! clock). The test learns those frames from the monitor and leaves them out of the model's
//! expectations, counting each on its drop reason and the DROP verdict as the RTL does; every
//! other packet must agree bit for bit. The drops are counted and printed.
//!
//! Compared with `firmware_sim::pipeline::{process, process_injected}`: every packet's result
//! (verdict, reason, bank, rule, pool, backend, key, connection-table outcome and index, flow
//! hash, IP id, lengths, event), every transmitted frame byte for byte, every punt (header and
//! frame) and every event, in order; then the counters of every family, the connection count
//! and every hit-bit word, read through the registers. A mismatch prints the seed, the packet
//! in hex and both results, and writes a VCD of the clocks before it.
//!
//! Coverage bins are counted and printed: parser path x verdict; for forwarded packets parser
//! path x affinity key x action x bank; injected x verdict; forwarded whole packets by the
//! port slot they matched (0-3, 4-14, 15: VIP entries with up to 16 rules); TCP fragments
//! punted on tracking pools and forwarded on others; portless packets by path and verdict,
//! matching a protocol-0 entry, by affinity key and connection-table outcome; TCP and UDP
//! packets forwarded through the gap slot of an `L3_DEFAULT` rule; source ACLs refusing, and
//! admitting through prefix indices 0-6 and through the last (7). The test fails if a bin is never hit
//! (fragments never use the 5-tuple, SPEC R4.2, so those bins are not required). CI runs
//! `NLB_DIFF_CASES` cases (default 16) of `NLB_DIFF_FRAMES` packets per enabled phase (default
//! 3000; the disabled phase gets an eighth): 102k packets. `NLB_SOAK=1` takes the first seed
//! from the clock (unless `NLB_SEED` is set) and the soak's lighter stream timing ([`Mix`]: no
//! idle input cycles, back-pressure of at most 0.05 per clock); with `NLB_DIFF_CASES=400
//! NLB_DIFF_FRAMES=12000` that is 10.2M packets (docs/verification.md).

use firmware_sim::conntrack::ConnTable;
use firmware_sim::parse::{self, Family, Parsed};
use firmware_sim::pipeline::{process, process_injected, Context, CtOutcome, PacketResult};
use firmware_sim::{CounterKind, Counters};
use nlb_hw::blocks::{conntrack, ctrl};
use nlb_hw::enums::{DefaultAction, Delivery, KeyType, Reason, Verdict};
use nlb_hw::layouts::{AclEntry, AclPrefix, InjectHeader, LearnEvent};
use nlb_hw::{table_index, FlowKey, NicSettings, Profile, Tables};
use nlb_testkit::hex;
use nlb_verif::bench::{seed_from_env, trace_always, wave_path};
use nlb_verif::hbm::HbmConfig;
use nlb_verif::scenario::Scenario;
use nlb_verif::top::{take_events, take_frames, take_punts, PuntedFrame, TopBench};
use nlb_verif::VerifError;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Bytes of a punted frame the punt stream carries (the punt window, docs/pipeline.md 13).
const PUNT_BYTES: usize = 9728;

const WAVE_WINDOW: u64 = 400;

fn sim_profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

struct Mismatch(String, u64);

/// The parser's path of a frame, for the coverage bins.
fn path_of(frame: &[u8]) -> &'static str {
    match parse::parse(frame) {
        Err(_) => "malformed",
        Ok(Parsed::NotIp) => "not-ip",
        Ok(Parsed::Ip(h)) => match (h.family, h.icmp_error, h.is_fragment) {
            (Family::V4, true, _) => "icmp4",
            (Family::V6, true, _) => "icmp6",
            (Family::V4, false, true) => "v4-frag",
            (Family::V6, false, true) => "v6-frag",
            (Family::V4, false, false) => "v4",
            (Family::V6, false, false) => "v6",
        },
    }
}

/// One packet the model expects: its result and output frame.
struct Expected {
    frame: Vec<u8>,
    result: PacketResult,
    out: Vec<u8>,
    delivery: Option<Delivery>,
    /// The receive side dropped it for lack of room (learnt from the monitor).
    dropped: Option<Reason>,
}

/// Coverage of one run: bin name -> packets.
use nlb_verif::coverage::{self, Bins};

fn verdict_name(v: Verdict) -> &'static str {
    v.name()
}

/// The VIP entry's protocol and the port slot of the entry a whole packet matched: the VIP
/// protocol is the packet's for TCP and UDP, 0 for every other protocol, whose ports are 0
/// (docs/pipeline.md §3); the lowest valid slot holding the destination port (§4). Worked out
/// here from the entries.
fn matched_slot(t: &Tables, frame: &[u8]) -> Option<(u8, usize)> {
    let Ok(Parsed::Ip(h)) = parse::parse(frame) else {
        return None;
    };
    if h.icmp_error || h.is_fragment {
        return None;
    }
    let protocol = if h.protocol == 6 || h.protocol == 17 {
        h.protocol
    } else {
        0
    };
    let key = FlowKey {
        key_type: KeyType::Vip,
        protocol,
        dst_addr: h.dst,
        ..FlowKey::default()
    };
    let ways = t.profile.vip_ways as usize;
    let bucket = table_index(key.hash(), t.profile.vip_buckets) as usize;
    let entry = t.vip[bucket * ways..(bucket + 1) * ways]
        .iter()
        .find(|e| e.valid && e.protocol == protocol && e.addr == h.dst)?;
    let slot = entry
        .slot
        .iter()
        .position(|s| s.valid && s.port_lo <= h.dst_port && h.dst_port <= s.port_hi)?;
    Some((protocol, slot))
}

/// Counts a packet into the bins.
fn cover(bins: &mut Bins, e: &Expected, injected: bool, scenario: &Scenario) {
    let tables = &scenario.tables;
    let r = &e.result;
    let v = verdict_name(r.verdict);
    let path = path_of(&e.frame);
    *bins.entry(format!("path {path} x {v}")).or_default() += 1;
    if injected {
        *bins.entry(format!("injected x {v}")).or_default() += 1;
        return;
    }
    // Rules behind every port slot (16 per VIP entry).
    if let (Verdict::Forward, Some((protocol, slot))) = (r.verdict, matched_slot(tables, &e.frame))
    {
        let group = match slot {
            0..=3 => "0-3",
            4..=14 => "4-14",
            _ => "15",
        };
        *bins
            .entry(format!("forward {path} x port slot {group}"))
            .or_default() += 1;
        // A TCP / UDP port no TCP / UDP rule takes, through the gap slot of the VIP's
        // L3_DEFAULT rule (docs/pipeline.md §3-§4).
        let gap = scenario.vips.iter().any(|v| {
            v.protocol == protocol && Some(v.addr) == parsed_dst(&e.frame) && v.gaps.contains(&slot)
        });
        if gap {
            let name = if protocol == 6 { "tcp" } else { "udp" };
            *bins
                .entry(format!("forward {name} x L3_DEFAULT gap slot"))
                .or_default() += 1;
        }
    }
    // Portless packets (neither TCP nor UDP, not ICMP errors): VIP protocol 0, the fragment
    // column's key, tracked like any (docs/pipeline.md §3-§7).
    if let Ok(Parsed::Ip(h)) = parse::parse(&e.frame) {
        if !h.icmp_error && h.protocol != 6 && h.protocol != 17 {
            *bins.entry(format!("portless {path} x {v}")).or_default() += 1;
            if r.rule.is_some() {
                *bins
                    .entry("portless x matched a protocol-0 entry".to_string())
                    .or_default() += 1;
            }
            if let (Verdict::Forward, Some(k)) = (r.verdict, r.key) {
                *bins
                    .entry(format!("portless forward x key {}", k.name()))
                    .or_default() += 1;
            }
            let ct = match r.conntrack {
                CtOutcome::Hit => "hit",
                CtOutcome::Miss => "miss",
                CtOutcome::None => "none",
            };
            if r.verdict == Verdict::Forward {
                *bins
                    .entry(format!("portless forward x conntrack {ct}"))
                    .or_default() += 1;
            }
        }
    }
    // Source ACLs (SPEC R9.1) of whole packets and first fragments: refused, or admitted by
    // which prefix index (each index is a comparator of its own in nlb_lookup; the coverage
    // run once never saw the last one admit, docs/verification.md).
    if let (Ok(Parsed::Ip(h)), Some(rule)) = (parse::parse(&e.frame), r.rule) {
        let acl_on = tables
            .rules
            .get(usize::from(rule))
            .is_some_and(|x| x.valid && x.acl_enabled);
        if acl_on && !h.icmp_error {
            if r.reason == Reason::AclDenied {
                *bins.entry("acl x refused".to_string()).or_default() += 1;
            } else {
                let acl = &tables.acl[usize::from(rule)];
                for (i, p) in acl.prefix.iter().enumerate() {
                    if prefix_admits(p, h.src) {
                        let at = if i + 1 == AclEntry::PREFIX_COUNT {
                            "the last prefix (index 7)"
                        } else {
                            "prefix index 0-6"
                        };
                        *bins.entry(format!("acl x admitted by {at}")).or_default() += 1;
                    }
                }
            }
        }
    }
    // TCP fragments: punted on tracking pools (with their pool), forwarded on others (SPEC
    // R4.1 over R4.2, docs/pipeline.md §6).
    if path.ends_with("-frag")
        && matches!(parse::parse(&e.frame), Ok(Parsed::Ip(h)) if h.protocol == 6)
    {
        let tracked = r.reason == Reason::FragmentNeedsState && r.pool.is_some();
        *bins
            .entry(format!(
                "tcp {path} x {v}{}",
                if tracked { " (tracking pool)" } else { "" }
            ))
            .or_default() += 1;
    }
    if let (Verdict::Forward, Some(k), Some(d)) = (r.verdict, r.key, e.delivery) {
        *bins
            .entry(format!(
                "forward {} x key {} x {} x bank {}",
                path_of(&e.frame),
                k.name(),
                d.name(),
                r.bank
            ))
            .or_default() += 1;
    }
}

/// Whether a valid ACL prefix holds `client` (the bins' own reading of SPEC R9.1: length 0
/// holds every address, lengths past 128 none).
fn prefix_admits(p: &AclPrefix, client: u128) -> bool {
    let len = u32::from(p.prefix_len);
    p.valid
        && match len {
            0 => true,
            1..=128 => (p.addr ^ client).checked_shr(128 - len).unwrap_or(0) == 0,
            _ => false,
        }
}

/// The destination address of an IP frame (IPv4 mapped).
fn parsed_dst(frame: &[u8]) -> Option<u128> {
    match parse::parse(frame) {
        Ok(Parsed::Ip(h)) => Some(h.dst),
        _ => None,
    }
}

/// The bins every CI run must hit.
fn required_bins() -> Vec<String> {
    let mut b = vec![
        "acl x refused".to_string(),
        "acl x admitted by prefix index 0-6".to_string(),
        "acl x admitted by the last prefix (index 7)".to_string(),
    ];
    for p in ["v4", "v6", "icmp4", "icmp6"] {
        for v in ["FORWARD", "DROP", "PASS"] {
            b.push(format!("path {p} x {v}"));
        }
    }
    for p in ["v4-frag", "v6-frag"] {
        for v in ["FORWARD", "DROP", "PUNT", "PASS"] {
            b.push(format!("path {p} x {v}"));
        }
    }
    b.push("path malformed x DROP".into());
    b.push("path not-ip x PASS".into());
    // Every forwarded path x affinity key x delivery x bank. Fragments never use the 5-tuple
    // (SPEC R4.2: a fragment has no ports to hash, so a 5-tuple pool keys it by the 3-tuple).
    for p in ["v4", "v6", "icmp4", "icmp6", "v4-frag", "v6-frag"] {
        for k in [
            KeyType::Tuple1,
            KeyType::Tuple2,
            KeyType::Tuple3,
            KeyType::Tuple5,
        ] {
            if p.ends_with("-frag") && k == KeyType::Tuple5 {
                continue;
            }
            for d in Delivery::ALL {
                for bank in 0..2 {
                    b.push(format!(
                        "forward {p} x key {} x {} x bank {bank}",
                        k.name(),
                        d.name()
                    ));
                }
            }
        }
    }
    b.push("injected x FORWARD".into());
    b.push("injected x DROP".into());
    for p in ["v4", "v6"] {
        for g in ["0-3", "4-14", "15"] {
            b.push(format!("forward {p} x port slot {g}"));
        }
    }
    for p in ["v4-frag", "v6-frag"] {
        b.push(format!("tcp {p} x PUNT (tracking pool)"));
        b.push(format!("tcp {p} x FORWARD"));
    }
    // Portless flows on L3_DEFAULT rules, and TCP / UDP through their gap slots.
    for p in ["v4", "v6", "v4-frag", "v6-frag"] {
        b.push(format!("portless {p} x FORWARD"));
    }
    for p in ["v4", "v6"] {
        for v in ["DROP", "PASS"] {
            b.push(format!("portless {p} x {v}"));
        }
    }
    b.push("portless x matched a protocol-0 entry".into());
    for k in [KeyType::Tuple1, KeyType::Tuple2, KeyType::Tuple3] {
        b.push(format!("portless forward x key {}", k.name()));
    }
    for ct in ["hit", "miss", "none"] {
        b.push(format!("portless forward x conntrack {ct}"));
    }
    b.push("forward tcp x L3_DEFAULT gap slot".into());
    b.push("forward udp x L3_DEFAULT gap slot".into());
    b
}

/// A frame to inject: traffic of the bank, to a random pool and backend (some invalid).
fn injected(s: &Scenario, rng: &mut StdRng) -> (Vec<u8>, InjectHeader) {
    let frame = s.frame(rng);
    let header = InjectHeader {
        backend: if rng.random_bool(0.9) {
            rng.random_range(0..56)
        } else {
            rng.random()
        },
        pool: if rng.random_bool(0.9) {
            rng.random_range(0..24)
        } else {
            rng.random_range(0..4096)
        },
        frame_len: frame.len().min(0x3fff) as u16,
    };
    (frame, header)
}

/// Random ctrl settings (what the editor writes into encapsulated frames).
fn random_settings(rng: &mut StdRng) -> NicSettings {
    NicSettings {
        default_action: if rng.random_bool(0.5) {
            DefaultAction::Drop
        } else {
            DefaultAction::Pass
        },
        local_mac: rng.random_range(0..1u64 << ctrl::local_mac::WIDTH),
        gue_port: rng.random(),
        outer_src_v4: rng.random(),
        outer_src_v4_len: rng.random_range(0..=32),
        outer_src_v6: rng.random(),
        outer_src_v6_len: rng.random_range(0..=128),
    }
}

/// The stream timing of the cases: CI's mix, or the soak's lighter one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Per case, idle cycles on both input streams with a probability drawn from 0-0.5 per
    /// beat and back-pressure on the three output streams from 0-0.5 per clock: the stalls
    /// that the coverage of CI's run needs.
    Ci,
    /// `NLB_SOAK=1`: the same frames, banks, settings and checks, but the inputs back to back
    /// (no idle cycles), back-pressure from 0-0.05 per clock (so most clocks carry a beat and
    /// nearly every case still stalls the outputs now and then) and no idle cycles on the
    /// AXI-Lite port that loads the tables (CI's 0.2 per channel and clock).
    Soak,
}

impl Mix {
    fn from_env() -> Mix {
        if std::env::var("NLB_SOAK").is_ok_and(|v| v == "1") {
            Mix::Soak
        } else {
            Mix::Ci
        }
    }
}

/// What one case checked.
struct Checked {
    packets: usize,
    /// Clocks of the whole case, and of its setup (reset, settings, both banks and the
    /// connections loaded through the registers).
    clocks: u64,
    setup_clocks: u64,
    /// Received frames dropped for lack of room.
    dropped: usize,
}

/// One case. Returns the packets checked and the clocks simulated.
fn run(
    seed: u64,
    frames_per_phase: usize,
    mix: Mix,
    bins: &mut Bins,
    wave: Option<(&std::path::Path, u64)>,
) -> Result<Result<Checked, Mismatch>, VerifError> {
    let profile = sim_profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let banks = [
        Scenario::random(profile, &mut rng),
        Scenario::random(profile, &mut rng),
    ];
    let settings = random_settings(&mut rng);
    let rx_idle = rng.random_range(0.0..0.5);
    let backpressure = rng.random_range(0.0..0.5);
    // Drawn either way, so a seed builds the same banks and traffic under both mixes.
    let (rx_idle, backpressure, axil_idle) = match mix {
        Mix::Ci => (rx_idle, backpressure, 0.2),
        Mix::Soak => (0.0, backpressure / 10.0, 0.0),
    };
    // Three cases in four on the HBM model, one on chip; the tables load on a quick memory,
    // the traffic runs on the realistic one.
    let hbm = (seed % 4 != 3).then(|| HbmConfig::realistic(seed as u32));
    let quick = HbmConfig::quick(seed as u32);
    let mut dut = TopBench::with_memory(
        hbm.as_ref().map(|_| &quick),
        seed,
        None,
        rx_idle,
        backpressure,
        axil_idle,
    )?;
    if let Some((path, 0)) = wave {
        dut.bench.sim.trace_to(path)?;
    }
    dut.write_settings(&settings)?;
    dut.load_bank(0, &banks[0].tables)?;
    dut.load_bank(1, &banks[1].tables)?;
    let mut ct = ConnTable::new(profile.ct_buckets, profile.ct_ways);
    for s in &banks {
        for (index, e) in s.conntrack(profile, &mut rng) {
            dut.write_ct(index, &e)?;
            ct.write(index, e)
                .map_err(|e| VerifError::Setup(format!("model conntrack: {e}")))?;
        }
    }

    if let Some(cfg) = &hbm {
        dut.set_hbm(cfg)?;
    }
    let setup_clocks = dut.bench.sim.cycle();

    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    let mut counters = Counters::new(profile);
    let mut checked = 0usize;
    let mut dropped = 0usize;
    // Frames received since reset: the number the monitor gives a dropped frame.
    let mut rx_base = 0u32;
    let delivery_of = |t: &Tables, r: &PacketResult| {
        r.pool
            .and_then(|p| t.pools.get(usize::from(p)))
            .map(|p| p.delivery)
    };
    for (phase, (bank, enabled)) in [(0u8, true), (1, true), (0, false)].into_iter().enumerate() {
        dut.write32(ctrl::ACTIVE_BANK, u32::from(bank))?;
        dut.write32(ctrl::ENABLE, u32::from(enabled))?;
        let scenario = &banks[usize::from(bank)];
        let tables = &scenario.tables;
        let ctx = Context {
            tables,
            bank,
            settings: &settings,
            enabled,
            conntrack: &ct,
        };
        let n = if enabled {
            frames_per_phase
        } else {
            frames_per_phase / 8
        };
        let mut rx: Vec<Expected> = Vec::with_capacity(n);
        let mut inj: Vec<Expected> = Vec::new();
        for _ in 0..n {
            if rng.random_bool(0.05) {
                let (frame, h) = injected(scenario, &mut rng);
                let result = process_injected(&ctx, &h, &frame, &mut out)
                    .map_err(|e| VerifError::Setup(format!("model: {e}")))?;
                dut.inject(&frame, h.backend, h.pool);
                let delivery = delivery_of(tables, &result);
                inj.push(Expected {
                    out: out[..result.out_len].to_vec(),
                    frame,
                    result,
                    delivery,
                    dropped: None,
                });
            } else {
                let frame = scenario.frame(&mut rng);
                let result = process(&ctx, &frame, &mut out)
                    .map_err(|e| VerifError::Setup(format!("model: {e}")))?;
                dut.send(&frame);
                let delivery = delivery_of(tables, &result);
                rx.push(Expected {
                    out: out[..result.out_len].to_vec(),
                    frame,
                    result,
                    delivery,
                    dropped: None,
                });
            }
        }
        let total = rx.len() + inj.len();
        // Results in the order the pipeline took the frames: (injected, index).
        let mut order: Vec<(bool, usize)> = Vec::with_capacity(total);
        let (mut next_rx, mut next_inj) = (0usize, 0usize);
        let mut phase_dropped = 0usize;
        let limit = dut.bench.sim.cycle() + 300 * total as u64 + 10_000;
        while order.len() + phase_dropped < total {
            if let Some((path, from)) = wave {
                if from > 0 && dut.bench.sim.cycle() == from && dut.bench.sim.trace_path().is_none()
                {
                    dut.bench.sim.trace_to(path)?;
                }
            }
            if dut.bench.sim.cycle() > limit {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: only {} of {total} results came out",
                        order.len()
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
            dut.step()?;
            // Frames the receive side dropped: the model leaves them out (it has no clock to
            // know), and counts them as the RTL does.
            while let Some(d) = dut.mon.drops.pop_front() {
                let i = d.seq.wrapping_sub(rx_base) as usize;
                let Some(e) = rx
                    .get_mut(i)
                    .filter(|e| e.dropped.is_none() && i >= next_rx)
                else {
                    return Ok(Err(Mismatch(
                        format!(
                            "phase {phase}: drop of received frame {} ({:?}), not one in flight",
                            d.seq, d.reason
                        ),
                        d.cycle,
                    )));
                };
                e.dropped = Some(d.reason);
                counters.record(&PacketResult::new(
                    Verdict::Drop,
                    d.reason,
                    bank,
                    e.frame.len(),
                ));
                *bins
                    .entry(format!("dropped x {}", d.reason.name()))
                    .or_default() += 1;
                phase_dropped += 1;
            }
            while let Some((cycle, is_inj, r)) = dut.mon.results.pop_front() {
                if !is_inj {
                    while rx.get(next_rx).is_some_and(|e| e.dropped.is_some()) {
                        next_rx += 1;
                    }
                }
                let (list, next) = if is_inj {
                    (&inj, &mut next_inj)
                } else {
                    (&rx, &mut next_rx)
                };
                let Some(e) = list.get(*next) else {
                    return Ok(Err(Mismatch(
                        format!("phase {phase}: a result with no frame (injected {is_inj})"),
                        cycle,
                    )));
                };
                if r != e.result {
                    return Ok(Err(Mismatch(
                        format!(
                            "phase {phase} (bank {bank}, enabled {enabled}) {} #{} ({} bytes) {}\n  RTL   {r:?}\n  model {:?}",
                            if is_inj { "injected frame" } else { "packet" },
                            *next,
                            e.frame.len(),
                            hex(&e.frame),
                            e.result
                        ),
                        cycle,
                    )));
                }
                counters.record(&e.result);
                if let Some(i) = e.result.ct_index {
                    ct.mark_hit(i);
                }
                cover(bins, e, is_inj, scenario);
                order.push((is_inj, *next));
                *next += 1;
                checked += 1;
            }
        }
        rx_base = rx_base.wrapping_add(rx.len() as u32);
        dropped += phase_dropped;
        if !dut.mon.violations.is_empty() {
            return Ok(Err(Mismatch(
                format!("result bus: {:?}", dut.mon.violations),
                dut.bench.sim.cycle(),
            )));
        }

        // What the output streams must carry, in the pipeline's order.
        let mut want_tx: Vec<(&Expected, &[u8])> = Vec::new();
        let mut want_punt: Vec<(&Expected, PuntedFrame)> = Vec::new();
        // PASS: the frame as received, unchanged and whole (docs/pipeline.md section 9).
        let mut want_pass: Vec<(&Expected, &[u8])> = Vec::new();
        let mut want_events: Vec<(&Expected, LearnEvent)> = Vec::new();
        for &(is_inj, i) in &order {
            let e = if is_inj { &inj[i] } else { &rx[i] };
            match e.result.verdict {
                Verdict::Forward => want_tx.push((e, &e.out)),
                Verdict::Punt => want_punt.push((
                    e,
                    PuntedFrame {
                        header: e.result.punt_header(),
                        frame: e.frame[..e.frame.len().min(PUNT_BYTES)].to_vec(),
                    },
                )),
                Verdict::Pass => want_pass.push((e, &e.frame)),
                Verdict::Drop => {}
            }
            if let Some(ev) = e.result.event {
                want_events.push((e, ev));
            }
        }
        let (mut tx, mut punts, mut passed, mut events) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let limit = dut.bench.sim.cycle() + 400 * total as u64 + 10_000;
        loop {
            let mut beats = dut.tx.take();
            dut.tx_pending.append(&mut beats);
            tx.extend(take_frames(&mut dut.tx_pending));
            let mut beats = dut.punt.take();
            dut.punt_pending.append(&mut beats);
            punts.extend(take_punts(&mut dut.punt_pending)?);
            let mut beats = dut.pass.take();
            dut.pass_pending.append(&mut beats);
            passed.extend(take_frames(&mut dut.pass_pending));
            let mut beats = dut.events.take();
            events.extend(take_events(&mut beats)?);
            let all = tx.len() >= want_tx.len()
                && punts.len() >= want_punt.len()
                && passed.len() >= want_pass.len()
                && events.len() >= want_events.len();
            if all || dut.bench.sim.cycle() > limit {
                break;
            }
            dut.step()?;
        }
        for (k, (e, want)) in want_tx.iter().enumerate() {
            let got = tx.get(k);
            if got.map(|g| g.as_slice()) != Some(*want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: transmitted frame {k} ({:?}) of {}\n  RTL   {}\n  model {}",
                        e.result.reason,
                        hex(&e.frame),
                        got.map_or("(none)".to_string(), |g| hex(g)),
                        hex(want)
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        for (k, (e, want)) in want_punt.iter().enumerate() {
            let got = punts.get(k);
            if got != Some(want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: punt {k} of {}\n  RTL   {got:?}\n  model {want:?}",
                        hex(&e.frame)
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        for (k, (e, want)) in want_pass.iter().enumerate() {
            let got = passed.get(k);
            if got.map(|g| g.as_slice()) != Some(*want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: passed frame {k} ({:?})\n  RTL   {}\n  sent  {}",
                        e.result.reason,
                        got.map_or("(none)".to_string(), |g| hex(g)),
                        hex(want)
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        for (k, (e, want)) in want_events.iter().enumerate() {
            let got = events.get(k);
            if got != Some(want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: event {k} of {}\n  RTL   {got:?}\n  model {want:?}",
                        hex(&e.frame)
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        if (tx.len(), punts.len(), passed.len(), events.len())
            != (
                want_tx.len(),
                want_punt.len(),
                want_pass.len(),
                want_events.len(),
            )
        {
            return Ok(Err(Mismatch(
                format!(
                    "phase {phase}: RTL sent {} frames, {} punts, {} passed frames, {} events; \
                     model {}, {}, {}, {}",
                    tx.len(),
                    punts.len(),
                    passed.len(),
                    events.len(),
                    want_tx.len(),
                    want_punt.len(),
                    want_pass.len(),
                    want_events.len()
                ),
                dut.bench.sim.cycle(),
            )));
        }
        for sink in [&dut.tx, &dut.punt, &dut.pass, &dut.events] {
            if !sink.violations().is_empty() {
                return Ok(Err(Mismatch(
                    format!("stream rules: {:?}", sink.violations()),
                    dut.bench.sim.cycle(),
                )));
            }
        }
    }

    // Counters of every family, as the host reads them: every reason and verdict, the rules
    // and backends in use and a few beyond; some snapshot-and-clear.
    let mut idx: Vec<(CounterKind, u32)> = Vec::new();
    idx.extend((0..Reason::ALL.len() as u32 + 2).map(|i| (CounterKind::Reason, i)));
    idx.extend((0..5).map(|i| (CounterKind::Verdict, i)));
    idx.extend((0..40).map(|i| (CounterKind::Rule, i)));
    idx.extend((0..56).map(|i| (CounterKind::Backend, i)));
    for extra in [profile.rules - 1, profile.rules, 4095] {
        idx.push((CounterKind::Rule, extra));
    }
    for extra in [profile.backends - 1, profile.backends, 0xff_ffff] {
        idx.push((CounterKind::Backend, extra));
    }
    for (kind, i) in idx {
        let clear = rng.random_bool(0.3);
        let got = dut.read_counter(kind, i, clear)?;
        let want = if clear {
            counters.take(kind, i)
        } else {
            counters.get(kind, i)
        };
        if got != want {
            return Ok(Err(Mismatch(
                format!("counter {kind:?} {i} (clear {clear}): RTL {got:?}, model {want:?}"),
                dut.bench.sim.cycle(),
            )));
        }
    }

    // Hit bits and the connection count, as the host reads them.
    let count = dut.read32(conntrack::COUNT)?;
    if count != ct.valid_count() {
        return Ok(Err(Mismatch(
            format!("conntrack count: RTL {count}, model {}", ct.valid_count()),
            dut.bench.sim.cycle(),
        )));
    }
    for row in 0..profile.ct_entries() / 32 {
        dut.write32(conntrack::INDEX, row * 32 + rng.random_range(0..32))?;
        let rtl = dut.read32(conntrack::HIT_READ)?;
        let model = ct.take_hits(row * 32);
        let again = dut.read32(conntrack::HIT_READ)?;
        if rtl != model || again != 0 {
            return Ok(Err(Mismatch(
                format!(
                    "hit bits of entries {}..{}: RTL {rtl:#010x} (then {again:#x}), model {model:#010x}",
                    row * 32,
                    row * 32 + 31
                ),
                dut.bench.sim.cycle(),
            )));
        }
    }
    if !dut.axil.violations().is_empty() {
        return Ok(Err(Mismatch(
            format!("AXI-Lite: {:?}", dut.axil.violations()),
            dut.bench.sim.cycle(),
        )));
    }
    Ok(Ok(Checked {
        packets: checked,
        clocks: dut.bench.sim.cycle(),
        setup_clocks,
        dropped,
    }))
}

/// Runs a case; on a mismatch replays it with a waveform and panics with everything needed
/// to reproduce it.
fn check(name: &str, seed: u64, frames_per_phase: usize, mix: Mix, bins: &mut Bins) -> Checked {
    let wave = wave_path(name, seed);
    let first = run(
        seed,
        frames_per_phase,
        mix,
        bins,
        trace_always().then_some((wave.as_path(), 0)),
    )
    .expect("simulation harness");
    match first {
        Ok(n) => n,
        Err(Mismatch(what, cycle)) => {
            let from = cycle.saturating_sub(WAVE_WINDOW).max(1);
            let replay = run(
                seed,
                frames_per_phase,
                mix,
                &mut Bins::new(),
                Some((wave.as_path(), from)),
            );
            panic!(
                "{name}: clock {cycle}: {what}\n  seed {seed:#x} (rerun with {}NLB_SEED={seed:#x} NLB_DIFF_CASES=1); \
                 waveform of clocks {from}..={cycle}: {} ({})",
                if mix == Mix::Soak { "NLB_SOAK=1 " } else { "" },
                wave.display(),
                if replay.is_ok() {
                    "written"
                } else {
                    "replay failed"
                }
            );
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn pipeline_matches_the_model_packet_by_packet() {
    let first_seed = seed_from_env(0xd1ff_0001);
    let cases = env_usize("NLB_DIFF_CASES", 16).max(1);
    let per_phase = env_usize("NLB_DIFF_FRAMES", 3000).max(1);
    let mix = Mix::from_env();
    // NLB_SOAK=1: seeds from the clock (printed), so every soak run covers new ground; an
    // explicit NLB_SEED replays one.
    let first_seed = if mix == Mix::Soak && std::env::var_os("NLB_SEED").is_none() {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(first_seed, |d| d.as_nanos() as u64)
    } else {
        first_seed
    };
    let mut bins = Bins::new();
    let (mut packets, mut clocks, mut setup_clocks, mut dropped) = (0usize, 0u64, 0u64, 0usize);
    let start = std::time::Instant::now();
    for c in 0..cases as u64 {
        let seed = first_seed.wrapping_add(c);
        eprintln!("case seed {seed:#x}");
        let done = check("differential", seed, per_phase, mix, &mut bins);
        packets += done.packets;
        clocks += done.clocks;
        setup_clocks += done.setup_clocks;
        dropped += done.dropped;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{packets} packets in {cases} cases ({mix:?} mix; {dropped} more received frames dropped \
         for lack of room, learnt from the monitor), {clocks} clocks ({:.1} per packet; \
         {setup_clocks} of them loading the cases), {secs:.1} s ({:.0} packets/s, {:.0} clocks/s, \
         with setup and checks)",
        clocks as f64 / packets as f64,
        packets as f64 / secs,
        clocks as f64 / secs
    );
    coverage::print(&bins, "coverage bins");
    let context = format!("first seed {first_seed:#x}");
    coverage::assert_hit(&bins, required_bins(), "coverage bins", &context);
}
