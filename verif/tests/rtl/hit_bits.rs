//! `nlb_hit_bits` on its own (the `hit_bits` model: 4 rows of 32 entries) against the golden
//! model's hit bits, `firmware_sim::ConnTable::mark_hit` and `take_hits` over a table of 128
//! entries. Random sets (dense, sparse, and storms on the row being read) race random
//! read-and-clears (at least two clocks apart, as the module requires): a set in the clock of
//! a read (c0) or before counts before it, one in the next clock (c1, when the row is cleared)
//! or later after it, as the module header documents; each read's word, two clocks later with
//! `rc_valid`, must equal the model's, so every hit appears in exactly one read. At the end
//! every row is read twice with no sets: what is left, then zeros. Bins printed, all required.

use firmware_sim::ConnTable;
use nlb_verif::bench::seed_from_env;
use nlb_verif::models::HitBits;
use nlb_verif::{Model, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

/// Clocks from a read's `rc_en` to its `rc_valid` (the module header).
const RC_LATENCY: u64 = 2;

fn rows() -> u32 {
    HitBits::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix("ROWS="))
        .and_then(|v| v.parse().ok())
        .expect("the hit_bits model is built with ROWS")
}

#[test]
fn every_hit_in_exactly_one_read() {
    let seed = seed_from_env(0x417b);
    let rows = rows();
    let mut rng = StdRng::seed_from_u64(seed);
    // Any bucket x way shape with rows * 32 entries: the hit bits only see the entry index.
    let mut model = ConnTable::new(rows * 8, 4);
    let mut sim = Verilated::new::<HitBits>().expect("model");
    let port = |n: &str| sim.port(n).expect(n);
    let (set_en, set_index) = (port("set_en"), port("set_index"));
    let (rc_en, rc_row) = (port("rc_en"), port("rc_row"));
    let (rc_valid, rc_data) = (port("rc_valid"), port("rc_data"));
    sim.reset(2).expect("reset");
    let fail = |what: String| -> ! {
        panic!(
            "hit_bits: {what} (seed {seed:#x}: NLB_SEED={seed:#x} cargo test -p nlb-verif \
             --test hit_bits)"
        )
    };
    // (clock of the read, row, what the model's read returned)
    let mut reads: VecDeque<(u64, u32, u32)> = VecDeque::new();
    let mut last_read: Option<u64> = None;
    let mut bins: BTreeMap<&str, u64> = BTreeMap::new();
    let total = 60_000u64;
    let drain_from = total - 40;
    for clock in 0..total {
        let draining = clock >= drain_from;
        // Dense, sparse, mixed sets; then a storm with almost no reads (whole words set).
        let phase = clock / 2000 % 4;
        let p_set = if draining {
            0.0
        } else {
            [0.7, 0.1, 0.4, 1.0][phase as usize]
        };
        let p_read = if phase == 3 { 0.002 } else { 0.3 };
        let can_read = last_read.is_none_or(|c| clock >= c + 2);
        let read = can_read
            && if draining {
                // Every row twice, two clocks apart.
                (clock - drain_from).is_multiple_of(2)
                    && (clock - drain_from) / 2 < u64::from(2 * rows)
            } else {
                rng.random_bool(p_read)
            };
        let row = if draining {
            ((clock - drain_from) / 2) as u32 % rows
        } else {
            rng.random_range(0..rows)
        };
        let set = rng.random_bool(p_set);
        // Storms on the row being read or cleared, else anywhere.
        let set_row = match (rng.random_range(0..3), reads.back()) {
            (0, _) if read => row,
            (1, Some(&(c, r, _))) if c + 1 == clock => r,
            _ => rng.random_range(0..rows),
        };
        let index = set_row * 32 + rng.random_range(0..32);
        sim.set_bit(set_en, set).expect("set_en");
        sim.set_u64(set_index, u64::from(index)).expect("set_index");
        sim.set_bit(rc_en, read).expect("rc_en");
        sim.set_u64(rc_row, u64::from(row)).expect("rc_row");
        sim.eval();
        // The reference, in the module's order: this clock's set, then this clock's read.
        if set {
            model.mark_hit(index);
            if read && set_row == row {
                *bins.entry("set in the clock of the read (c0)").or_default() += 1;
            }
            if reads
                .back()
                .is_some_and(|&(c, r, _)| c + 1 == clock && r == set_row)
            {
                *bins.entry("set in the clearing clock (c1)").or_default() += 1;
            }
        }
        if read {
            let word = model.take_hits(row * 32);
            reads.push_back((clock, row, word));
            last_read = Some(clock);
        }
        let valid = sim.get_bit(rc_valid).expect("rc_valid");
        let due = reads
            .front()
            .is_some_and(|&(c, _, _)| c + RC_LATENCY == clock);
        if valid != due {
            fail(format!(
                "clock {clock}: rc_valid {valid}, a read's word was {}due",
                if due { "" } else { "not " }
            ));
        }
        if due {
            let (c, r, want) = reads.pop_front().expect("a read in flight");
            let got = sim.get_u64(rc_data).expect("rc_data") as u32;
            if got != want {
                fail(format!(
                    "read of row {r} at clock {c}: RTL {got:#010x}, model {want:#010x}"
                ));
            }
            *bins
                .entry(if got == 0 {
                    "empty word"
                } else {
                    "word with hits"
                })
                .or_default() += 1;
            if got == u32::MAX {
                *bins.entry("all 32 hit").or_default() += 1;
            }
        }
        sim.tick();
    }
    assert!(
        reads.is_empty(),
        "hit_bits: reads still in flight at the end"
    );
    for (k, v) in &bins {
        println!("{k:36} {v}");
    }
    for b in [
        "set in the clock of the read (c0)",
        "set in the clearing clock (c1)",
        "empty word",
        "word with hits",
        "all 32 hit",
    ] {
        assert!(bins.contains_key(b), "hit_bits bin never hit: {b}");
    }
}
