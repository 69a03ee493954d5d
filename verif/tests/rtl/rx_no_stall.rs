//! The receive side never stalls (SPEC R13.3, docs/pipeline.md §14.4): `nlb_top`'s received
//! stream has no `tready`, so the bench's source offers a beat in every clock, back to back,
//! and nothing can hold it. What cannot be processed must be dropped whole at its first beat
//! and counted, never cut and never held:
//!
//! - the output stalled for long stretches (`NO_ROOM_BUFFER`: the packet buffer cannot take
//!   a frame of the largest size), on chip; injected frames wait on their own port meanwhile;
//! - the table memory far slower than the frames (`NO_ROOM_LOOKUP`: packets in flight at their
//!   limit), on the HBM model with 700-900 clocks of latency.
//!
//! Every frame sent is either reported dropped (`m_drop_*`, by its number) or transmitted whole,
//! unchanged but for the MACs (L2 DSR), in order; the counters of both reasons, of the DROP and
//! FORWARD verdicts and the forwarding reason equal what the frames were (packets and bytes);
//! and both runs must drop (the point of the bench) and forward.

use firmware_sim::Counter;
use firmware_sim::CounterKind;
use nlb_hw::blocks::ctrl;
use nlb_hw::enums::{Affinity, Delivery, KeyType, Reason, Verdict};
use nlb_hw::layouts::{BackendEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry};
use nlb_hw::{table_index, FlowKey, NicSettings, Profile, Tables};
use nlb_verif::bench::seed_from_env;
use nlb_verif::frames::{FrameSpec, L4};
use nlb_verif::hbm::HbmConfig;
use nlb_verif::scenario::mapped;
use nlb_verif::top::{take_frames, TopBench};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;

const VIP: u32 = 0x0a01_0002;
const BACKEND_MAC: u64 = 0x0200_0000_c0de;

/// One VIP (TCP, all ports) to one backend by L2 DSR, untracked.
fn tables() -> Tables {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut t = Tables::empty(profile);
    t.backends[3] = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: mapped(0xc0a8_0003),
        mac: BACKEND_MAC,
    };
    for s in 0..11 {
        t.maglev[100 + s] = MaglevSlot { backend: 3 };
    }
    t.pools[2] = PoolEntry {
        valid: true,
        affinity: Affinity::None,
        delivery: Delivery::L2Dsr,
        maglev_base: 100,
        maglev_size: 11,
        ..PoolEntry::default()
    };
    t.rules[5] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: 2,
    };
    let key = FlowKey {
        key_type: KeyType::Vip,
        protocol: 6,
        dst_addr: mapped(VIP),
        ..FlowKey::default()
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
        rule: 5,
    };
    t.vip[bucket * profile.vip_ways as usize] = e;
    t
}

fn frame(i: u32, len: usize) -> Vec<u8> {
    let sport = 2000 + (i % 40000) as u16;
    let mut s = FrameSpec::tcp4(0x0c00_0000 | i, VIP, sport, 443, 0x10);
    s.l4 = L4::Tcp {
        sport,
        dport: 443,
        flags: 0x10,
    };
    s.payload = len.saturating_sub(54);
    let mut f = s.build();
    f.resize(len.max(60), 0);
    f
}

fn rewritten(f: &[u8]) -> Vec<u8> {
    let mut o = f.to_vec();
    o[..6].copy_from_slice(&BACKEND_MAC.to_be_bytes()[2..]);
    o[6..12].copy_from_slice(&NicSettings::default().local_mac.to_be_bytes()[2..]);
    o
}

/// What one run saw.
struct Seen {
    sent: usize,
    dropped: BTreeMap<Reason, (u64, u64)>,
    forwarded: (u64, u64),
    injected: usize,
}

/// Runs `frames` back to back into `dut` (stalls of the output as `stall` says, by clock),
/// and `inject` frames on the inject port meanwhile; checks everything the module doc says.
fn run(
    dut: &mut TopBench,
    frames: &[Vec<u8>],
    inject: &[Vec<u8>],
    stall: &dyn Fn(u64) -> f64,
) -> Seen {
    assert!(
        dut.rx.without_ready(),
        "nlb_top's receive port must have no tready"
    );
    let first_seq = dut.rx_sent;
    for f in frames {
        dut.send(f);
    }
    for f in inject {
        dut.inject(f, 3, 2);
    }
    let mut dropped: BTreeMap<u32, Reason> = BTreeMap::new();
    let mut out_rx: Vec<Vec<u8>> = Vec::new();
    let mut pending = Vec::new();
    let mut results_inj = 0usize;
    let start = dut.bench.sim.cycle();
    let limit = start + 200 * frames.len() as u64 + 200_000;
    let mut last_in = start;
    // Injected frames come from client 13.0.0.x: told apart on the output by their source.
    let is_inj = |g: &[u8]| g.len() >= 30 && g[26..29] == [0x0d, 0, 0][..];
    let received_out = |out: &[Vec<u8>]| out.iter().filter(|g| !is_inj(g)).count();
    while (received_out(&out_rx) + dropped.len() < frames.len()
        || results_inj < inject.len()
        || out_rx.len() - received_out(&out_rx) < inject.len())
        && dut.bench.sim.cycle() < limit
    {
        let bp = stall(dut.bench.sim.cycle() - start);
        dut.tx.backpressure = bp;
        let before = dut.rx.pending();
        dut.step().expect("step");
        if dut.rx.pending() < before {
            last_in = dut.bench.sim.cycle();
        }
        for d in dut.mon.drops.drain(..) {
            assert!(
                dropped
                    .insert(d.seq.wrapping_sub(first_seq), d.reason)
                    .is_none(),
                "frame {} reported dropped twice",
                d.seq
            );
        }
        while let Some((_, inj, r)) = dut.mon.results.pop_front() {
            assert_eq!(r.verdict, Verdict::Forward, "every frame here is forwarded");
            if inj {
                results_inj += 1;
            }
        }
        pending.append(&mut dut.tx.take());
        out_rx.extend(take_frames(&mut pending));
    }
    // Every beat was taken in the clock it was offered: the source, which offers one in every
    // clock, never waited (the last went in as many clocks after the start as there were).
    let beats: u64 = frames.iter().map(|f| f.len().div_ceil(64) as u64).sum();
    assert_eq!(dut.rx.pending(), 0);
    assert_eq!(
        last_in - start,
        beats,
        "the receive side took a beat in every clock"
    );
    assert_eq!(results_inj, inject.len(), "every injected frame comes out");
    // The transmitted frames: the received ones not dropped and the injected ones, each whole.
    // (L2 DSR keeps lengths, so an injected frame is told apart by its client address.)
    let mut want_rx = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains_key(&(*i as u32)));
    let mut seen_inj = 0usize;
    for g in &out_rx {
        if is_inj(g) {
            seen_inj += 1;
            continue;
        }
        let (i, f) = want_rx
            .next()
            .expect("a transmitted frame that was not sent");
        assert!(
            *g == rewritten(f),
            "received frame {i} ({} bytes) came out cut, changed or out of order",
            f.len()
        );
    }
    assert!(want_rx.next().is_none(), "a frame neither dropped nor sent");
    assert_eq!(seen_inj, inject.len());
    let mut by_reason: BTreeMap<Reason, (u64, u64)> = BTreeMap::new();
    for (&i, &r) in &dropped {
        let e = by_reason.entry(r).or_default();
        e.0 += 1;
        e.1 += frames[i as usize].len() as u64;
    }
    let fwd = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains_key(&(*i as u32)))
        .fold((0u64, 0u64), |a, (_, f)| (a.0 + 1, a.1 + f.len() as u64));
    Seen {
        sent: frames.len(),
        dropped: by_reason,
        forwarded: fwd,
        injected: inject.len(),
    }
}

/// The counters of both drop reasons, the verdicts and FORWARDED must be what the frames were.
fn check_counters(dut: &mut TopBench, seen: &Seen, inject_bytes: u64) {
    for reason in [Reason::NoRoomLookup, Reason::NoRoomBuffer] {
        let (n, bytes) = seen.dropped.get(&reason).copied().unwrap_or((0, 0));
        let got = dut
            .read_counter(CounterKind::Reason, reason.value(), false)
            .expect("counter");
        assert_eq!(
            got,
            Counter {
                packets: n,
                bytes,
                punts: 0,
                drops: n,
            },
            "{reason:?} counter"
        );
    }
    let (dn, db) = seen
        .dropped
        .values()
        .fold((0, 0), |a, &(n, b)| (a.0 + n, a.1 + b));
    let got = dut
        .read_counter(CounterKind::Verdict, Verdict::Drop.value(), false)
        .expect("counter");
    assert_eq!(
        got,
        Counter {
            packets: dn,
            bytes: db,
            punts: 0,
            drops: dn,
        },
        "DROP verdict counter"
    );
    let got = dut
        .read_counter(CounterKind::Reason, Reason::Forwarded.value(), false)
        .expect("counter");
    assert_eq!(
        (got.packets, got.bytes),
        seen.forwarded,
        "FORWARDED reason counter"
    );
    let got = dut
        .read_counter(CounterKind::Verdict, Verdict::Forward.value(), false)
        .expect("counter");
    assert_eq!(
        (got.packets, got.bytes),
        (
            seen.forwarded.0 + seen.injected as u64,
            seen.forwarded.1 + inject_bytes
        ),
        "FORWARD verdict counter"
    );
}

fn bench(hbm: Option<&HbmConfig>, seed: u64) -> TopBench {
    let mut dut = TopBench::with_memory(hbm, seed, None, 0.0, 0.0, 0.0).expect("model");
    dut.write_settings(&NicSettings::default())
        .expect("settings");
    dut.load_bank(0, &tables()).expect("tables");
    dut.write32(ctrl::ENABLE, 1).expect("enable");
    dut
}

#[test]
fn a_stalled_output_drops_whole_frames_and_counts_them() {
    let seed = seed_from_env(0x5a11_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut dut = bench(None, seed);
    let frames: Vec<Vec<u8>> = (0..6000u32)
        .map(|i| {
            let len = match rng.random_range(0..20) {
                0 => rng.random_range(1500..=9018),
                1..=5 => rng.random_range(65..=1500),
                _ => rng.random_range(60..=64),
            };
            frame(i, len)
        })
        .collect();
    // Injected frames from client 13.0.0.x (told apart on the output).
    let inject: Vec<Vec<u8>> = (0..40u32)
        .map(|i| {
            let mut f = frame(i, rng.random_range(60..=600));
            f[26..30].copy_from_slice(&[0x0d, 0, 0, i as u8]);
            // A valid IPv4 header checksum again.
            f[24..26].copy_from_slice(&[0, 0]);
            let mut sum = 0u32;
            for w in f[14..34].chunks(2) {
                sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            f
        })
        .collect();
    let inject_bytes: u64 = inject.iter().map(|f| f.len() as u64).sum();
    // The output nearly stops for 3000 clocks in every 5000.
    let seen = run(&mut dut, &frames, &inject, &|c| {
        if c % 5000 < 3000 {
            0.97
        } else {
            0.0
        }
    });
    eprintln!(
        "{} frames back to back, output stalled 3 clocks in 5: dropped {:?}, forwarded {:?} \
         (packets, bytes), {} injected frames through",
        seen.sent, seen.dropped, seen.forwarded, seen.injected
    );
    assert!(
        seen.dropped.contains_key(&Reason::NoRoomBuffer),
        "the stalls must make the buffer drop frames (the case this bench is for)"
    );
    assert!(seen.forwarded.0 > 0);
    check_counters(&mut dut, &seen, inject_bytes);
}

#[test]
fn a_slow_memory_drops_whole_frames_and_counts_them() {
    let seed = seed_from_env(0x5a11_0002);
    let mut rng = StdRng::seed_from_u64(seed);
    let slow = HbmConfig {
        lat_min: 700,
        lat_spread: 200,
        tail_per_mille: 0,
        ..HbmConfig::realistic(seed as u32)
    };
    let mut dut = bench(Some(&slow), seed);
    let frames: Vec<Vec<u8>> = (0..4000u32)
        .map(|i| frame(i, rng.random_range(60..=64)))
        .collect();
    let seen = run(&mut dut, &frames, &[], &|_| 0.0);
    eprintln!(
        "{} frames back to back, memory answering in 700-900 clocks: dropped {:?}, forwarded \
         {:?} (packets, bytes)",
        seen.sent, seen.dropped, seen.forwarded
    );
    assert!(
        seen.dropped.contains_key(&Reason::NoRoomLookup),
        "the slow memory must make the lookup drop frames (the case this bench is for)"
    );
    assert!(seen.forwarded.0 > 0);
    check_counters(&mut dut, &seen, 0);
}
