//! Throughput and latency of `nlb_top`, counted in clocks, with the tables on chip (`top`) and
//! on the HBM model (`top_hbm`, `HbmConfig::realistic`). The figures are printed (and kept in
//! docs/verification.md and docs/synthesis.md with the command that prints them); the tests
//! assert only what the pipeline must do whatever its speed: every frame comes out whole, in
//! order, as the model says, and none is dropped when the input is at line rate and the output
//! never stalls.
//! - line rate per frame size (docs/pipeline.md §14.5): frames of 64, 65, 128, 129, 256, 1500
//!   and 9000 bytes back to back (a beat in every clock, no idle clock between frames), output
//!   never stalled, forwarded by L2 DSR, untracked (one Maglev read each) and tracked (one
//!   connection-table hit each, 1024 flows): packets and beats per clock in and out, idle clocks
//!   between output frames, Mpps at 322.27 MHz against a 100G port;
//! - every size from 60 to 9018 bytes once each, back to back, on the HBM model: all come out,
//!   none dropped, no idle clock between them on the output;
//! - lookup latency: last beat in -> result over a stream of tracked hits at half a packet per
//!   clock, p50 / p99 / max in clocks and ns at 322.27 MHz, with the HBM model's own read
//!   latencies (p50 / p99) and bytes per packet per channel;
//! - frames of every size from 60 to 9018 bytes under random back-pressure and idle cycles:
//!   all come out (or are dropped whole and reported), in order, each the received frame with
//!   its MACs rewritten;
//! - hardware learning's rate (docs/pipeline.md §15.3), on chip and on the HBM model with
//!   `dma.ctrl.hw_learn` = 1: 64-byte frames of new connections back to back (each a miss the
//!   NIC installs, or leaves to the host when all its install records are in use), and each new
//!   flow's first two packets back to back (the second waits for the first's install): packets
//!   per clock, new connections per second at 322.27 MHz; after each, the same flows again
//!   with learning off: the flows that hit are exactly `conntrack.count`, each in its bucket,
//!   no bucket over its ways, at most what the flows' buckets hold, and a second packet that
//!   hit its first's install hit the flow's entry.

use firmware_sim::CtOutcome;
use nlb_hw::blocks::{conntrack, ctrl, dma};
use nlb_hw::enums::{Affinity, Delivery};
use nlb_hw::layouts::{
    BackendEntry, CtEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{table_index, FlowKey, NicSettings, Profile, Tables};
use nlb_verif::bench::seed_from_env;
use nlb_verif::frames::{FrameSpec, L4};
use nlb_verif::hbm::{self, HbmConfig};
use nlb_verif::scenario::mapped;
use nlb_verif::top::{take_frames, TopBench};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{HashMap, HashSet};

const VIP: u32 = 0x0a01_0001;
const BACKEND_MAC: u64 = 0x0200_0000_b00b;

/// Maglev slots of the benchmark's pool.
const MAGLEV_SLICE: usize = 251;

/// The pipeline's clock on the boards (the 100G MAC's, docs/pipeline.md §14.5), MHz.
const CLOCK_MHZ: f64 = 322.27;

/// One VIP (TCP, all ports) to one pool of one backend, delivered by L2 DSR; `track`: the pool
/// tracks connections.
fn l2dsr_tables_tracking(track: bool) -> Tables {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut t = Tables::empty(profile);
    t.backends[1] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(0xc0a8_0001),
        mac: BACKEND_MAC,
    };
    // A slice of 251 slots, the smallest the compiler steps a pool down to when the slot
    // memory is short (M >= 100 x N): even its 16 rows spread over every Maglev channel, as
    // every pool's do. (A slice inside one row,
    // such as a target instance's single slot, sends every packet of the VIP to one channel:
    // docs/pipeline.md section 14.2.)
    for s in 0..MAGLEV_SLICE {
        t.maglev[s] = MaglevSlot { backend: 1 };
    }
    t.pools[0] = PoolEntry {
        valid: true,
        affinity: Affinity::None,
        delivery: Delivery::L2Dsr,
        maglev_base: 0,
        maglev_size: MAGLEV_SLICE as u32,
        track,
        ..PoolEntry::default()
    };
    t.rules[0] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: 0,
    };
    let key = FlowKey {
        key_type: nlb_hw::enums::KeyType::Vip,
        protocol: 6,
        src_port: 0,
        dst_port: 0,
        src_addr: 0,
        dst_addr: mapped(VIP),
    };
    let bucket = table_index(key.hash(), profile.vip_buckets) as usize;
    let mut e = VipEntry {
        valid: true,
        protocol: 6,
        addr: mapped(VIP),
        ..VipEntry::default()
    };
    e.slot[0] = PortSlot {
        valid: true,
        port_lo: 0,
        port_hi: 65535,
        rule: 0,
    };
    t.vip[bucket * profile.vip_ways as usize] = e;
    t
}

/// `nlb_top` on chip, or on the HBM model, with the one-VIP tables.
fn bench_on(hbm: bool, track: bool, seed: u64, idle: f64, backpressure: f64) -> TopBench {
    let cfg = hbm.then(|| HbmConfig::realistic(seed as u32));
    let mut dut =
        TopBench::with_memory(cfg.as_ref(), seed, None, idle, backpressure, 0.0).expect("model");
    dut.write_settings(&NicSettings::default())
        .expect("settings");
    dut.load_bank(0, &l2dsr_tables_tracking(track))
        .expect("tables");
    dut.write32(ctrl::ENABLE, 1).expect("enable");
    dut
}

fn bench(seed: u64, idle: f64, backpressure: f64) -> TopBench {
    bench_on(false, false, seed, idle, backpressure)
}

/// The client and port of flow `i`.
fn client(i: u32) -> (u32, u16) {
    (0x0b00_0000 | i, 1024 + (i % 50000) as u16)
}

/// A TCP frame (ACK) to the VIP of `len` bytes (at least 60) from client `i`.
fn frame(i: u32, len: usize) -> Vec<u8> {
    let (c, sport) = client(i);
    let mut s = FrameSpec::tcp4(c, VIP, sport, 80, 0x10);
    s.l4 = L4::Tcp {
        sport,
        dport: 80,
        flags: 0x10,
    };
    s.payload = len.saturating_sub(54);
    let mut f = s.build();
    f.resize(len.max(60), 0);
    f
}

/// The received frame as L2 DSR sends it: MACs rewritten.
fn rewritten(f: &[u8]) -> Vec<u8> {
    let mut o = f.to_vec();
    o[..6].copy_from_slice(&BACKEND_MAC.to_be_bytes()[2..]);
    o[6..12].copy_from_slice(&NicSettings::default().local_mac.to_be_bytes()[2..]);
    o
}

/// Installs the connections of flows `0..n` (to backend 1) as the host does, each in the first
/// free way of its bucket; returns how many fit.
fn install_flows(dut: &mut TopBench, n: u32) -> u32 {
    let p = Profile::by_name("sim").expect("sim profile");
    let mut used = vec![0u32; p.ct_buckets as usize];
    let mut installed = 0;
    for i in 0..n {
        let key = flow_key(i);
        let bucket = table_index(key.hash(), p.ct_buckets);
        let way = used[bucket as usize];
        if way >= p.ct_ways {
            continue;
        }
        used[bucket as usize] += 1;
        let e = CtEntry {
            valid: true,
            protocol: key.protocol,
            src_port: key.src_port,
            dst_port: key.dst_port,
            src_addr: key.src_addr,
            dst_addr: key.dst_addr,
            backend: 1,
            ..CtEntry::default()
        };
        dut.write_ct(bucket * p.ct_ways + way, &e).expect("install");
        installed += 1;
    }
    assert_eq!(dut.read32(conntrack::COUNT).expect("count"), installed);
    installed
}

/// What a back-to-back run of frames did.
struct LineRate {
    frames: u64,
    beats: u64,
    /// Clocks from the first beat in to the last beat in.
    in_clocks: u64,
    /// Clocks from the first beat out to the last beat out.
    out_clocks: u64,
    /// Clocks without an output beat between the first and the last output beat.
    out_idle: u64,
    dropped: usize,
    /// The dropped frames' numbers among those received since reset.
    dropped_seqs: Vec<u32>,
    /// The results of the frames not dropped, in order.
    results: Vec<firmware_sim::pipeline::PacketResult>,
    /// Clocks from the first beat in to the last beat out.
    total_clocks: u64,
}

/// Sends `frames` back to back (a beat in every clock) with the output never stalled; checks
/// that every frame comes out in order (or is reported dropped) and counts the clocks.
fn run_back_to_back(dut: &mut TopBench, frames: &[Vec<u8>]) -> LineRate {
    let beats: u64 = frames.iter().map(|f| f.len().div_ceil(64) as u64).sum();
    for f in frames {
        dut.send(f);
    }
    let start = dut.bench.sim.cycle();
    let (mut first_out, mut last_out, mut out_beats) = (None, 0u64, 0u64);
    let mut last_in = start;
    let mut pending = Vec::new();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut dropped = 0usize;
    let mut dropped_seqs = Vec::new();
    let mut results = Vec::new();
    // (Generous: a flood of new flows behind the HBM model is taken at a few percent.)
    let limit = start + 40 * beats + 20_000;
    while got.len() + dropped < frames.len() && dut.bench.sim.cycle() < limit {
        let before = dut.rx.pending();
        dut.step().expect("step");
        if dut.rx.pending() < before {
            last_in = dut.bench.sim.cycle() - 1;
        }
        let mut b = dut.tx.take();
        if !b.is_empty() {
            let c = dut.bench.sim.cycle() - 1;
            first_out.get_or_insert(c);
            last_out = c;
            out_beats += b.len() as u64;
        }
        pending.append(&mut b);
        got.extend(take_frames(&mut pending));
        for d in dut.mon.drops.drain(..) {
            dropped += 1;
            dropped_seqs.push(d.seq);
        }
        results.extend(dut.mon.results.drain(..).map(|(_, _, r)| r));
    }
    assert_eq!(got.len() + dropped, frames.len(), "frames lost");
    // Whatever is dropped is left out whole; the others come out in order, unchanged.
    if dropped == 0 {
        for (i, (g, f)) in got.iter().zip(frames).enumerate() {
            assert!(
                *g == rewritten(f),
                "frame {i} ({} bytes) came out wrong",
                f.len()
            );
        }
    }
    assert!(dut.tx.violations().is_empty(), "{:?}", dut.tx.violations());
    let first = first_out.unwrap_or(start);
    let out_clocks = last_out - first + 1;
    LineRate {
        frames: frames.len() as u64,
        beats,
        in_clocks: last_in - start + 1,
        out_clocks,
        out_idle: out_clocks.saturating_sub(out_beats),
        dropped,
        dropped_seqs,
        results,
        total_clocks: last_out.max(start) - start + 1,
    }
}

/// The packet rate of a 100G port at `n`-byte frames (without FCS; 24 bytes of FCS,
/// preamble and gap on the wire), Mpps.
fn port_mpps(n: usize) -> f64 {
    100e9 / ((n + 24) as f64 * 8.0) / 1e6
}

/// The HBM model's statistics so far, on a bench that has it (`hbm`).
fn hbm_stats(dut: &mut TopBench, hbm: bool) -> Option<hbm::HbmStats> {
    hbm.then(|| hbm::stats(&mut dut.bench.sim).expect("stats"))
}

#[test]
fn line_rate_per_frame_size() {
    let per_size: usize = std::env::var("NLB_PERF_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let sizes = [64usize, 65, 128, 129, 256, 1500, 9000];
    eprintln!(
        "line rate, {per_size} frames per size back to back (a beat in every clock), output never \
         stalled; pipeline at {CLOCK_MHZ} MHz against a 100G port:"
    );
    eprintln!(
        "  {:<22} {:>6} {:>6} {:>11} {:>11} {:>9} {:>8} {:>10} {:>10}",
        "memory, flows",
        "bytes",
        "beats",
        "pkt/clk in",
        "pkt/clk out",
        "out idle",
        "dropped",
        "Mpps",
        "100G Mpps"
    );
    for (hbm, track) in [(false, false), (true, false), (true, true)] {
        let seed = seed_from_env(0x9e4f_0010);
        let mut dut = bench_on(hbm, track, seed, 0.0, 0.0);
        let flows = if track {
            install_flows(&mut dut, 1024)
        } else {
            1024
        };
        // The loads and installs read the tables too (read-backs): count only the packets'.
        let before = hbm_stats(&mut dut, hbm);
        let mut packets = 0;
        for &n in &sizes {
            let count = if n >= 1500 { per_size / 10 } else { per_size };
            packets += count;
            let frames: Vec<Vec<u8>> = (0..count as u32).map(|i| frame(i % flows, n)).collect();
            let r = run_back_to_back(&mut dut, &frames);
            let ppc_in = r.frames as f64 / r.in_clocks as f64;
            let ppc_out = r.frames as f64 / r.out_clocks as f64;
            eprintln!(
                "  {:<22} {n:>6} {:>6} {ppc_in:>11.4} {ppc_out:>11.4} {:>9} {:>8} {:>10.2} {:>10.2}",
                format!(
                    "{}, {}",
                    if hbm { "HBM" } else { "on chip" },
                    if track { "tracked hits" } else { "untracked" }
                ),
                n.div_ceil(64),
                r.out_idle,
                r.dropped,
                ppc_out * CLOCK_MHZ,
                port_mpps(n)
            );
            assert_eq!(
                r.dropped, 0,
                "{n}-byte frames at one beat per clock: none may be dropped"
            );
        }
        if let (Some(before), Some(st)) = (before, hbm_stats(&mut dut, hbm)) {
            let (ct, mg) = (st.ct.since(&before.ct), st.mg.since(&before.mg));
            eprintln!(
                "  HBM reads of the {packets} packets: connection table {} ({:.3} per packet, {} \
                 bytes), Maglev {} ({:.3} per packet, {} bytes)",
                ct.reads,
                ct.reads as f64 / packets as f64,
                ct.bytes(),
                mg.reads,
                mg.reads as f64 / packets as f64,
                mg.bytes()
            );
        }
    }
}

#[test]
fn every_size_back_to_back_on_hbm() {
    let seed = seed_from_env(0x9e4f_0011);
    let mut dut = bench_on(true, false, seed, 0.0, 0.0);
    let frames: Vec<Vec<u8>> = (60..=9018usize)
        .enumerate()
        .map(|(i, n)| frame(i as u32, n))
        .collect();
    let r = run_back_to_back(&mut dut, &frames);
    eprintln!(
        "every size 60..=9018 back to back on the HBM model: {} frames, {} beats in {} clocks \
         ({:.4} beats per clock in), out in {} clocks with {} idle clocks between frames, {} \
         dropped",
        r.frames,
        r.beats,
        r.in_clocks,
        r.beats as f64 / r.in_clocks as f64,
        r.out_clocks,
        r.out_idle,
        r.dropped
    );
    assert_eq!(
        r.dropped, 0,
        "no frame may be dropped at one beat per clock"
    );
}

#[test]
fn lookup_latency_with_hbm() {
    let seed = seed_from_env(0x9e4f_0012);
    let n: usize = std::env::var("NLB_PERF_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    for (hbm, track) in [(false, true), (true, true), (true, false)] {
        // Half a packet per clock: 64-byte frames with an idle clock on average between them.
        let mut dut = bench_on(hbm, track, seed, 0.5, 0.0);
        let flows = if track {
            install_flows(&mut dut, 1024)
        } else {
            1024
        };
        // The loads and installs read the tables too (read-backs): count only the packets'.
        let before = hbm_stats(&mut dut, hbm);
        let mut lat = Vec::with_capacity(n);
        let mut sent_at: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
        for i in 0..n as u32 {
            dut.send(&frame(i % flows, 64));
        }
        let limit = dut.bench.sim.cycle() + 100 * n as u64 + 10_000;
        while lat.len() < n && dut.bench.sim.cycle() < limit {
            let before = dut.rx.pending();
            dut.step().expect("step");
            if dut.rx.pending() < before {
                // A one-beat frame: its last beat was taken in the clock just stepped.
                sent_at.push_back(dut.bench.sim.cycle() - 1);
            }
            while let Some((c, _, r)) = dut.mon.results.pop_front() {
                let t0 = sent_at.pop_front().expect("a frame for every result");
                assert_eq!(r.backend, Some(1), "forwarded to the backend");
                lat.push(c - t0);
            }
            assert!(
                dut.mon.drops.is_empty(),
                "no drop at half a packet per clock"
            );
            dut.tx.take();
        }
        assert_eq!(lat.len(), n, "every packet has a result");
        lat.sort_unstable();
        let pct = |q: f64| lat[((q * n as f64) as usize).min(n - 1)];
        let ns = |c: u64| c as f64 * 1000.0 / CLOCK_MHZ;
        eprintln!(
            "lookup latency ({}, {}; last beat in -> result, {n} packets at 0.5 per clock): p50 \
             {} clocks ({:.0} ns), p99 {} ({:.0} ns), max {} ({:.0} ns) at {CLOCK_MHZ} MHz",
            if hbm { "HBM" } else { "on chip" },
            if track { "tracked hits" } else { "untracked" },
            pct(0.5),
            ns(pct(0.5)),
            pct(0.99),
            ns(pct(0.99)),
            lat[n - 1],
            ns(lat[n - 1])
        );
        if let (Some(before), Some(st)) = (before, hbm_stats(&mut dut, hbm)) {
            for (name, t) in [
                ("connection table", st.ct.since(&before.ct)),
                ("Maglev", st.mg.since(&before.mg)),
            ] {
                if t.reads == 0 {
                    continue;
                }
                eprintln!(
                    "  HBM {name}, the packets' reads: {} ({:.3} per packet), read latency p50 {} \
                     p99 {} max {} clocks (mean {:.1}); {:.1} bytes per packet; beats per channel \
                     {:?}",
                    t.reads,
                    t.reads as f64 / n as f64,
                    t.percentile(0.5),
                    t.percentile(0.99),
                    t.lat_max,
                    t.lat_sum as f64 / t.reads as f64,
                    t.bytes() as f64 / n as f64,
                    t.beats
                );
            }
        }
    }
}

#[test]
fn every_size_60_to_9018_in_order_under_back_pressure() {
    let seed = seed_from_env(0x9e4f_0003);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut dut = bench(seed, 0.3, 0.4);
    let mut sizes: Vec<usize> = (60..=300).collect();
    sizes.extend((301..=9018).step_by(37));
    sizes.push(9018);
    for _ in 0..200 {
        sizes.push(rng.random_range(60..=9018));
    }
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &l)| frame(i as u32, l))
        .collect();
    for f in &frames {
        dut.send(f);
    }
    let mut got = Vec::new();
    let mut pending = Vec::new();
    let mut dropped = std::collections::BTreeSet::new();
    let limit = dut.bench.sim.cycle() + 2_000_000;
    while got.len() + dropped.len() < frames.len() && dut.bench.sim.cycle() < limit {
        dut.step().expect("step");
        pending.append(&mut dut.tx.take());
        got.extend(take_frames(&mut pending));
        for d in dut.mon.drops.drain(..) {
            dropped.insert(d.seq as usize);
        }
        dut.mon.results.clear();
    }
    assert_eq!(
        got.len() + dropped.len(),
        frames.len(),
        "frames lost (seed {seed:#x})"
    );
    // The frames not dropped come out whole, in order.
    let kept = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i));
    for (i, (g, (k, f))) in got.iter().zip(kept).enumerate() {
        assert!(
            *g == rewritten(f),
            "frame {k} ({} bytes, output {i}) came out wrong or out of order (seed {seed:#x})",
            f.len()
        );
    }
    assert!(dut.tx.violations().is_empty(), "{:?}", dut.tx.violations());
}

/// The connection-table key of flow `i` (its 5-tuple).
fn flow_key(i: u32) -> FlowKey {
    let (c, sport) = client(i);
    FlowKey {
        key_type: nlb_hw::enums::KeyType::Tuple5,
        protocol: 6,
        src_port: sport,
        dst_port: 80,
        src_addr: mapped(c),
        dst_addr: mapped(VIP),
    }
}

/// The buckets' fill after installing flows `flows` in order (lowest free way, a full bucket
/// installs nothing, docs/pipeline.md §15.3): how many are installed.
fn installs_that_fit(flows: &[u32]) -> u32 {
    let p = Profile::by_name("sim").expect("sim profile");
    let mut used = vec![0u32; p.ct_buckets as usize];
    let mut n = 0;
    for &i in flows {
        let b = table_index(flow_key(i).hash(), p.ct_buckets) as usize;
        if used[b] < p.ct_ways {
            used[b] += 1;
            n += 1;
        }
    }
    n
}

/// Hardware learning's rate with the tables on chip or behind the HBM model: see the module's
/// doc. What must hold whatever the timing (docs/pipeline.md §15.3): an entry the NIC installs
/// is seen by its flow's next packet, every packet of a flow the NIC installed hits it, a full
/// bucket installs nothing, and an install the NIC leaves to the host (all its records in use)
/// leaves nothing behind.
fn learning_rate(hbm: bool) {
    let seed = seed_from_env(0x1ea4);
    let n = 2_000u32;
    let mut dut = bench_on(hbm, true, seed, 0.0, 0.0);
    let caps = dma::Caps::from_word(dut.read32(dma::CAPS).expect("caps"));
    assert!(caps.hw_learn, "the pipeline reports hardware learning");
    let learning = |dut: &mut TopBench, on: bool| {
        let c = dma::Ctrl {
            enable: false,
            hw_learn: on,
        };
        dut.write32(dma::CTRL, c.word()).expect("ctrl");
    };
    let place = if hbm {
        "behind the HBM model"
    } else {
        "on chip"
    };
    println!("hardware learning, 64-byte frames back to back, {place}, 322.27 MHz:");
    // Frames received since reset (the drop reports number them so).
    let received = std::cell::Cell::new(0u32);
    // Sends `frames` (flow, frame) back to back; returns the flows of the frames admitted, and
    // their results.
    let run = |dut: &mut TopBench, what: &str, frames: &[(u32, Vec<u8>)]| {
        let before = dut.read32(conntrack::COUNT).expect("count");
        let bytes: Vec<Vec<u8>> = frames.iter().map(|(_, f)| f.clone()).collect();
        let r = run_back_to_back(dut, &bytes);
        let after = dut.read32(conntrack::COUNT).expect("count");
        let dropped: HashSet<u32> = r.dropped_seqs.iter().copied().collect();
        let admitted: Vec<u32> = frames
            .iter()
            .enumerate()
            .filter(|(k, _)| !dropped.contains(&(received.get() + *k as u32)))
            .map(|(_, (flow, _))| *flow)
            .collect();
        received.set(received.get() + frames.len() as u32);
        let installs = after - before;
        // (A run without a name prints nothing.)
        if !what.is_empty() {
            println!(
                "  {what:42} {:5} frames {:5} dropped  {:.4} pkt/clk taken  {:5} installed  \
             {:.4} installs/clk = {:6.1} M/s",
                r.frames,
                r.dropped,
                admitted.len() as f64 / r.total_clocks as f64,
                installs,
                f64::from(installs) / r.total_clocks as f64,
                f64::from(installs) / r.total_clocks as f64 * CLOCK_MHZ
            );
        }
        assert_eq!(
            admitted.len(),
            r.results.len(),
            "a result per admitted frame"
        );
        (admitted, r.results)
    };
    // Learning off, every flow of `flows` once: the entries the NIC installed since `base`
    // (`conntrack.count` then) are exactly the flows that hit, each in its own bucket, no bucket
    // over its ways, and nothing installs. Returns each hit flow's entry.
    let verify = |dut: &mut TopBench, flows: &[u32], what: &str, base: u32| {
        learning(dut, false);
        let count = dut.read32(conntrack::COUNT).expect("count");
        let frames: Vec<(u32, Vec<u8>)> = flows.iter().map(|&i| (i, frame(i, 64))).collect();
        let (admitted, results) = run(dut, what, &frames);
        assert_eq!(admitted.len(), flows.len(), "{what}: hits dropped");
        let profile = Profile::by_name("sim").expect("sim profile");
        let mut per_bucket = vec![0u32; profile.ct_buckets as usize];
        let mut hits = HashMap::new();
        for (flow, r) in admitted.iter().zip(&results) {
            if r.conntrack != CtOutcome::Hit {
                continue;
            }
            let b = table_index(flow_key(*flow).hash(), profile.ct_buckets);
            let at = r.ct_index.expect("a hit names its entry");
            assert_eq!(
                at / profile.ct_ways,
                b,
                "{what}: flow {flow} hit outside its bucket"
            );
            per_bucket[b as usize] += 1;
            hits.insert(*flow, at);
        }
        assert!(
            per_bucket.iter().all(|&h| h <= profile.ct_ways),
            "{what}: a bucket over its ways"
        );
        assert_eq!(
            dut.read32(conntrack::COUNT).expect("count"),
            count,
            "{what}: learning off installs nothing"
        );
        assert_eq!(
            hits.len() as u32,
            count - base,
            "{what}: every connection the NIC installed is hit by its flow, and only those"
        );
        learning(dut, true);
        hits
    };
    learning(&mut dut, true);
    // New connections: each frame a miss that the NIC installs, where its bucket has room and
    // a record is free; else the host is to install it (installed = 0).
    let frames: Vec<(u32, Vec<u8>)> = (0..n).map(|i| (i, frame(i, 64))).collect();
    let (learned, _) = run(&mut dut, "new connections, one packet each", &frames);
    let established = verify(
        &mut dut,
        &learned,
        "the same flows again (hits, learning off)",
        0,
    );
    let installed = established.len() as u32;
    let fit = installs_that_fit(&learned);
    assert!(
        installed <= fit,
        "more installed ({installed}) than the buckets hold ({fit})"
    );
    println!(
        "    installed by the NIC {installed} of the {fit} the buckets hold; {} left to the host \
         (all install records in use)",
        fit - installed
    );
    // The flows left, again, 32 at a time (fewer than the 64 install records), each batch after
    // the records in use before it have had the time to reach memory (one write at a time, each
    // a write response away: 100 clocks is generous behind the HBM model): none is left now,
    // so the NIC holds every flow that fits.
    let left: Vec<(u32, Vec<u8>)> = learned
        .iter()
        .filter(|f| !established.contains_key(f))
        .map(|&i| (i, frame(i, 64)))
        .collect();
    for chunk in left.chunks(32) {
        for _ in 0..100 * 64 {
            dut.step().expect("step");
        }
        run(&mut dut, "", chunk);
    }
    let established = verify(
        &mut dut,
        &learned,
        "all of them again, learned 32 at a time",
        0,
    );
    assert_eq!(
        established.len() as u32,
        fit,
        "installed 32 at a time, the NIC holds every flow its bucket has room for"
    );
    // Established flows at line rate with a new connection every 160 frames (2 M a second at
    // 322.27 MHz): every established flow's packet hits its entry.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pool: Vec<(u32, u32)> = established.iter().map(|(&f, &at)| (f, at)).collect();
    pool.sort_unstable();
    let frames: Vec<(u32, Vec<u8>)> = (0..4 * n)
        .map(|k| {
            let flow = if k % 160 == 159 {
                3 * n + k
            } else {
                pool[rng.random_range(0..pool.len())].0
            };
            (flow, frame(flow, 64))
        })
        .collect();
    let (mixed, results) = run(
        &mut dut,
        "established, a new flow every 160 frames",
        &frames,
    );
    for (flow, r) in mixed.iter().zip(&results) {
        if let Some(&at) = established.get(flow) {
            assert_eq!(
                (r.conntrack, r.ct_index),
                (CtOutcome::Hit, Some(at)),
                "established flow {flow} in the mixed run"
            );
        }
    }
    // Each new flow's first two packets back to back: the second sees the first's install.
    let frames: Vec<(u32, Vec<u8>)> = (n..2 * n)
        .flat_map(|i| [(i, frame(i, 64)), (i, frame(i, 64))])
        .collect();
    let base = dut.read32(conntrack::COUNT).expect("count");
    let (pairs, results) = run(&mut dut, "new flows, two packets each", &frames);
    let mut flows: Vec<u32> = pairs.clone();
    flows.dedup();
    let count_before = dut.read32(conntrack::COUNT).expect("count");
    let entries = verify(
        &mut dut,
        &flows,
        "those flows again (hits, learning off)",
        base,
    );
    // A second packet right behind its first hits the entry its flow holds now (nothing
    // evicts here), or misses: its first was left to the host, and it installed the flow
    // itself or was left too.
    let mut behind = 0;
    for w in pairs.iter().zip(&results).collect::<Vec<_>>().windows(2) {
        let ((f0, r0), (f1, r1)) = (w[0], w[1]);
        if f0 != f1 || r0.conntrack == CtOutcome::Hit || r1.conntrack != CtOutcome::Hit {
            continue;
        }
        assert_eq!(
            r1.ct_index,
            entries.get(f1).copied(),
            "flow {f1}: the second packet hit another entry than the flow's"
        );
        behind += 1;
    }
    println!(
        "    {behind} second packets hit the install of the packet right before them; \
         {count_before} connections installed in all"
    );
    assert!(behind > 0, "no second packet saw its first's install");
}

#[test]
fn hardware_learning_rate() {
    learning_rate(false);
}

#[test]
fn hardware_learning_rate_hbm() {
    learning_rate(true);
}
