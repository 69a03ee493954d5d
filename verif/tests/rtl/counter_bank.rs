//! `nlb_counter_bank` on its own (the `counter_bank` model: 4 entries) against the golden
//! model's counter, `firmware_sim::Counter::add` (one packet: packets + 1, bytes + length,
//! punts and drops + 0/1, each wrapping at 2^64), with READ returning the entry and
//! READ_CLEAR returning and zeroing it (as `Counters::get` / `take`). One operation per clock
//! at most, mostly on the same entry back to back (the forwarding of both halves), with idle
//! clocks between bursts; entries preset (the simulation-only port, while the bank is idle) just
//! below 2^32 and 2^64 in every field so that the low halves carry into the high halves and the
//! counts wrap, also on back-to-back operations. Every READ / READ_CLEAR's `r_value` must equal
//! the model's entry before the operation, with `r_valid` exactly 3 clocks after it; at the end
//! every entry is read. Bins printed, all required.

use firmware_sim::Counter;
use nlb_verif::bench::seed_from_env;
use nlb_verif::models::CounterBank;
use nlb_verif::{Model, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

const UPDATE: u64 = 0;
const READ: u64 = 1;
const READ_CLEAR: u64 = 2;
/// Clocks from the clock that presents an operation to the clock whose settled outputs show its
/// `r_valid` (the header's "three clocks later": stage 1 and stage 2 registers, then the result
/// register).
const LATENCY: u64 = 3;

fn entries() -> u32 {
    CounterBank::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix("ENTRIES="))
        .and_then(|v| v.parse().ok())
        .expect("the counter_bank model is built with ENTRIES")
}

/// {drops, punts, bytes, packets} as the 256-bit port carries them (packets in bits 63..0).
fn words(c: &Counter) -> Vec<u32> {
    [c.packets, c.bytes, c.punts, c.drops]
        .iter()
        .flat_map(|v| [*v as u32, (v >> 32) as u32])
        .collect()
}

fn counter(w: &[u32]) -> Counter {
    let f = |i: usize| u64::from(w[2 * i]) | u64::from(w[2 * i + 1]) << 32;
    Counter {
        packets: f(0),
        bytes: f(1),
        punts: f(2),
        drops: f(3),
    }
}

/// A value just below a carry or wrap point.
fn near_top(rng: &mut StdRng) -> u64 {
    let below = rng.random_range(0..3u64);
    match rng.random_range(0..3) {
        0 => (1u64 << 32) - 1 - below,
        1 => u64::MAX - below,
        _ => rng.random(),
    }
}

#[test]
fn counts_as_the_model() {
    let seed = seed_from_env(0xc0c0);
    let n = entries();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<CounterBank>().expect("model");
    let port = |s: &str| sim.port(s).expect(s);
    let (op_valid, op_kind, op_index) = (port("op_valid"), port("op_kind"), port("op_index"));
    let (op_bytes, op_punt, op_drop) = (port("op_bytes"), port("op_punt"), port("op_drop"));
    // One packet per update, as the families count (the drop banks add sums: nlb_counters).
    let op_count = port("op_count");
    let (pre_valid, pre_index, pre_value) = (
        port("sim_preset_valid"),
        port("sim_preset_index"),
        port("sim_preset_value"),
    );
    let (r_valid, r_value) = (port("r_valid"), port("r_value"));
    sim.reset(2).expect("reset");
    let fail = |what: String| -> ! {
        panic!(
            "counter_bank: {what} (seed {seed:#x}: NLB_SEED={seed:#x} cargo test -p nlb-verif \
             --test counter_bank)"
        )
    };
    let mut model = vec![Counter::default(); n as usize];
    // (clock, index, kind, expected value) of reads in flight.
    let mut reads: VecDeque<(u64, u32, u64, Counter)> = VecDeque::new();
    let mut bins: BTreeMap<&str, u64> = BTreeMap::new();
    let mut prev: Option<(u64, u32)> = None;
    let mut clock = 0u64;
    let mut step = |sim: &mut Verilated,
                    op: Option<(u64, u32, u16, bool, bool)>,
                    preset: Option<(u32, Counter)>,
                    model: &mut Vec<Counter>,
                    reads: &mut VecDeque<(u64, u32, u64, Counter)>,
                    bins: &mut BTreeMap<&str, u64>| {
        let (kind, index, bytes, punt, drop) = op.unwrap_or((UPDATE, 0, 0, false, false));
        sim.set_bit(op_valid, op.is_some()).expect("op_valid");
        sim.set_u64(op_kind, kind).expect("op_kind");
        sim.set_u64(op_index, u64::from(index)).expect("op_index");
        sim.set_bit(op_count, true).expect("op_count");
        sim.set_u64(op_bytes, u64::from(bytes)).expect("op_bytes");
        sim.set_bit(op_punt, punt).expect("op_punt");
        sim.set_bit(op_drop, drop).expect("op_drop");
        let (pi, pv) = preset.unwrap_or((0, Counter::default()));
        sim.set_bit(pre_valid, preset.is_some()).expect("preset");
        sim.set_u64(pre_index, u64::from(pi)).expect("preset index");
        sim.set(pre_value, &words(&pv)).expect("preset value");
        sim.eval();
        let valid = sim.get_bit(r_valid).expect("r_valid");
        let due = reads.front().is_some_and(|r| r.0 + LATENCY == clock);
        if valid != due {
            fail(format!(
                "clock {clock}: r_valid {valid}, a read was {}due",
                if due { "" } else { "not " }
            ));
        }
        if due {
            let (c, i, k, want) = reads.pop_front().expect("a read");
            let got = counter(&sim.get_words(r_value).expect("r_value"));
            if got != want {
                fail(format!(
                    "{} of entry {i} at clock {c}:\n  RTL   {got:?}\n  model {want:?}",
                    if k == READ { "READ" } else { "READ_CLEAR" }
                ));
            }
        }
        if let Some((i, v)) = preset {
            model[i as usize] = v;
        }
        if let Some((kind, i, bytes, punt, drop)) = op {
            let c = &mut model[i as usize];
            let back_to_back = prev.is_some_and(|(pc, pi)| pc + 1 == clock && pi == i);
            match kind {
                UPDATE => {
                    let old = *c;
                    c.add(u64::from(bytes), u64::from(punt), u64::from(drop));
                    let carried = [
                        (old.packets, c.packets),
                        (old.bytes, c.bytes),
                        (old.punts, c.punts),
                        (old.drops, c.drops),
                    ]
                    .iter()
                    .any(|&(a, b)| a >> 32 != b >> 32);
                    let wrapped = c.packets < old.packets
                        || c.bytes < old.bytes
                        || c.punts < old.punts
                        || c.drops < old.drops;
                    if carried {
                        *bins.entry("carry into the high half").or_default() += 1;
                        if back_to_back {
                            *bins.entry("carry, back to back on the entry").or_default() += 1;
                        }
                    }
                    if wrapped {
                        *bins.entry("wrap at 2^64").or_default() += 1;
                    }
                    if back_to_back {
                        *bins.entry("update back to back on the entry").or_default() += 1;
                    }
                }
                _ => {
                    reads.push_back((clock, i, kind, *c));
                    if kind == READ_CLEAR {
                        *c = Counter::default();
                        *bins.entry("read-clear").or_default() += 1;
                    }
                    if back_to_back {
                        *bins
                            .entry("read back to back after an operation")
                            .or_default() += 1;
                    }
                }
            }
            prev = Some((clock, i));
        }
        sim.tick();
        clock += 1;
    };
    for burst in 0..3000 {
        if burst % 10 == 0 {
            // Presets only while the bank is idle.
            for _ in 0..4 {
                step(&mut sim, None, None, &mut model, &mut reads, &mut bins);
            }
            let i = rng.random_range(0..n);
            let v = Counter {
                packets: near_top(&mut rng),
                bytes: near_top(&mut rng),
                punts: near_top(&mut rng),
                drops: near_top(&mut rng),
            };
            step(
                &mut sim,
                None,
                Some((i, v)),
                &mut model,
                &mut reads,
                &mut bins,
            );
            for _ in 0..2 {
                step(&mut sim, None, None, &mut model, &mut reads, &mut bins);
            }
        }
        let hot = rng.random_range(0..n);
        for _ in 0..rng.random_range(1..12) {
            let op = rng.random_bool(0.85).then(|| {
                let kind = match rng.random_range(0..10) {
                    0 => READ,
                    1 => READ_CLEAR,
                    _ => UPDATE,
                };
                let index = if rng.random_bool(0.7) {
                    hot
                } else {
                    rng.random_range(0..n)
                };
                let bytes = match rng.random_range(0..4) {
                    0 => 0xffff,
                    1 => 0,
                    _ => rng.random(),
                };
                (
                    kind,
                    index,
                    bytes,
                    rng.random_bool(0.3),
                    rng.random_bool(0.3),
                )
            });
            step(&mut sim, op, None, &mut model, &mut reads, &mut bins);
        }
    }
    for i in 0..n {
        step(
            &mut sim,
            Some((READ, i, 0, false, false)),
            None,
            &mut model,
            &mut reads,
            &mut bins,
        );
    }
    for _ in 0..4 {
        step(&mut sim, None, None, &mut model, &mut reads, &mut bins);
    }
    assert!(reads.is_empty(), "counter_bank: reads still in flight");
    for (k, v) in &bins {
        println!("{k:40} {v}");
    }
    for b in [
        "carry into the high half",
        "carry, back to back on the entry",
        "wrap at 2^64",
        "update back to back on the entry",
        "read-clear",
        "read back to back after an operation",
    ] {
        assert!(bins.contains_key(b), "counter_bank bin never hit: {b}");
    }
}
