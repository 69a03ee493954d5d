//! Throughput and latency of `nlb_top`, counted in clocks (deterministic), plus the
//! simulation's own speed (printed, never asserted):
//! - back-to-back 64-byte frames forwarded by L2 DSR with no idle cycles and no back-pressure:
//!   packets out per clock over 100k packets (the design target is 1.0);
//! - the latency of one packet: last beat in -> result, last beat in -> first transmitted beat;
//! - frames of every size from 60 to 9018 bytes under random back-pressure and idle cycles:
//!   all come out, in order, each the received frame with its MACs rewritten.

use nlb_hw::blocks::ctrl;
use nlb_hw::enums::{Affinity, Delivery};
use nlb_hw::layouts::{BackendEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry};
use nlb_hw::{table_index, FlowKey, NicSettings, Profile, Tables};
use nlb_verif::bench::seed_from_env;
use nlb_verif::frames::{FrameSpec, L4};
use nlb_verif::scenario::mapped;
use nlb_verif::top::{take_frames, TopBench};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const VIP: u32 = 0x0a01_0001;
const BACKEND_MAC: u64 = 0x0200_0000_b00b;

/// One VIP (TCP, all ports) to one pool of one backend, delivered by L2 DSR.
fn l2dsr_tables() -> Tables {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut t = Tables::empty(profile);
    t.backends[1] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(0xc0a8_0001),
        mac: BACKEND_MAC,
    };
    for s in 0..7 {
        t.maglev[s] = MaglevSlot { backend: 1 };
    }
    t.pools[0] = PoolEntry {
        valid: true,
        affinity: Affinity::None,
        delivery: Delivery::L2Dsr,
        maglev_base: 0,
        maglev_size: 7,
        track: false,
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

fn bench(seed: u64, idle: f64, backpressure: f64) -> TopBench {
    let mut dut = TopBench::new(seed, None, idle, backpressure, 0.0).expect("model");
    dut.write_settings(&NicSettings::default())
        .expect("settings");
    dut.load_bank(0, &l2dsr_tables()).expect("tables");
    dut.write32(ctrl::ENABLE, 1).expect("enable");
    dut
}

/// A TCP frame to the VIP of `len` bytes (at least 60) from client `i`.
fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut s = FrameSpec::tcp4(0x0b00_0000 | i, VIP, 1024 + (i % 50000) as u16, 80, 0x10);
    s.l4 = L4::Tcp {
        sport: 1024 + (i % 50000) as u16,
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

#[test]
fn back_to_back_64_byte_frames_one_per_clock() {
    let n: u32 = std::env::var("NLB_PERF_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let mut dut = bench(seed_from_env(0x9e4f_0001), 0.0, 0.0);
    for i in 0..n {
        dut.send(&frame(i, 64));
    }
    let wall = std::time::Instant::now();
    let start = dut.bench.sim.cycle();
    let (mut first_out, mut last_out, mut out) = (None, 0u64, 0u64);
    let limit = start + 4 * u64::from(n) + 1000;
    while out < u64::from(n) && dut.bench.sim.cycle() < limit {
        dut.step().expect("step");
        let got = take_frames(&mut dut.tx.take()).len() as u64;
        if got > 0 {
            first_out.get_or_insert(dut.bench.sim.cycle());
            last_out = dut.bench.sim.cycle();
            out += got;
        }
        dut.mon.results.clear();
    }
    let secs = wall.elapsed().as_secs_f64();
    let cycles = dut.bench.sim.cycle() - start;
    let first = first_out.unwrap_or(0);
    // Throughput once the pipeline is full: frames out over the clocks they took to come out.
    let steady = (out.saturating_sub(1)) as f64 / (last_out - first).max(1) as f64;
    eprintln!(
        "{out} frames of 64 bytes back to back: {steady:.4} packets per clock in steady state \
         ({out} in {cycles} clocks overall, the first after {} clocks); simulation {:.0} \
         clocks/s, {:.0} packets/s",
        first - start,
        cycles as f64 / secs,
        out as f64 / secs
    );
    assert_eq!(out, u64::from(n), "every frame must come out");
    assert!(
        steady > 0.999,
        "64-byte frames must flow at one per clock, got {steady:.4}"
    );
}

#[test]
fn latency_of_one_packet() {
    let mut dut = bench(seed_from_env(0x9e4f_0002), 0.0, 0.0);
    let f = frame(7, 64);
    dut.send(&f);
    let start = dut.bench.sim.cycle();
    let mut in_cycle = None;
    let (mut res_cycle, mut tx_cycle) = (None, None);
    while tx_cycle.is_none() && dut.bench.sim.cycle() < start + 500 {
        let before = dut.rx.pending();
        dut.step().expect("step");
        if before > 0 && dut.rx.pending() == 0 {
            // The beat was taken at the clock just stepped.
            in_cycle = Some(dut.bench.sim.cycle() - 1);
        }
        if res_cycle.is_none() {
            if let Some((c, _, _)) = dut.mon.results.pop_front() {
                res_cycle = Some(c);
            }
        }
        if !dut.tx.received().is_empty() {
            tx_cycle = Some(dut.bench.sim.cycle() - 1);
        }
    }
    let (i, r, t) = (
        in_cycle.expect("taken"),
        res_cycle.expect("result"),
        tx_cycle.expect("sent"),
    );
    eprintln!(
        "latency: last beat in -> result {} clocks (parser 9 + descriptor FIFO 1 + lookup 22), \
         -> first transmitted beat {} clocks",
        r - i,
        t - i
    );
    assert!(r - i <= 32 + 10, "lookup latency out of budget");
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
    let limit = dut.bench.sim.cycle() + 2_000_000;
    while got.len() < frames.len() && dut.bench.sim.cycle() < limit {
        dut.step().expect("step");
        pending.append(&mut dut.tx.take());
        got.extend(take_frames(&mut pending));
        dut.mon.results.clear();
    }
    assert_eq!(got.len(), frames.len(), "frames lost (seed {seed:#x})");
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert!(
            *g == rewritten(f),
            "frame {i} ({} bytes) came out wrong or out of order (seed {seed:#x})",
            f.len()
        );
    }
    assert!(dut.tx.violations().is_empty(), "{:?}", dut.tx.violations());
}
