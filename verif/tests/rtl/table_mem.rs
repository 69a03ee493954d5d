//! `nlb_table_mem` on its own (the `table_mem` model: 2 banks x 8 rows x 4 lanes of 20 bits,
//! output register on, as `nlb_regs` builds its tables) against a reference bank array (the
//! behaviour the module header documents; `nlb_regs`' tables are checked against
//! `nlb_hw::Tables` through the whole register file in `regs.rs`). Port B writes and reads
//! single entries (index = row * LANES + lane, read-first: a write returns the old entry);
//! port A reads whole rows of either bank; both answer exactly 2 clocks after the request, and
//! port A holds its data until its next read. Random sequences with both ports busy, biased to the first and
//! last row of each bank; a port-A read of the row port B writes in the same clock may see the
//! old or the new entry in the written lane (a true-dual-port block RAM leaves that collision
//! open), every other lane must be exact. Bins printed, all required.

use nlb_verif::bench::seed_from_env;
use nlb_verif::models::TableMem;
use nlb_verif::{Model, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

const RD_LATENCY: u64 = 2;

fn param(name: &str) -> usize {
    TableMem::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the table_mem model is built with {name}"))
}

fn lane_of(words: &[u32], lane: usize, width: usize) -> u32 {
    (0..width).fold(0u32, |v, b| {
        let bit = lane * width + b;
        v | (words[bit / 32] >> (bit % 32) & 1) << b
    })
}

#[test]
fn reads_and_writes_as_a_memory() {
    let seed = seed_from_env(0x7ab1);
    let (width, rows, lanes) = (param("WIDTH"), param("ROWS"), param("LANES"));
    assert_eq!((param("OUTPUT_REG"), param("BANKS")), (1, 2));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<TableMem>().expect("model");
    let port = |s: &str| sim.port(s).expect(s);
    let (a_en, a_bank, a_row, a_data) =
        (port("a_en"), port("a_bank"), port("a_row"), port("a_data"));
    let (b_en, b_we, b_bank, b_index) =
        (port("b_en"), port("b_we"), port("b_bank"), port("b_index"));
    let (b_wdata, b_rdata) = (port("b_wdata"), port("b_rdata"));
    let fail = |what: String| -> ! {
        panic!(
            "table_mem: {what} (seed {seed:#x}: NLB_SEED={seed:#x} cargo test -p nlb-verif \
             --test table_mem)"
        )
    };
    let mask = (1u32 << width) - 1;
    let mut mem = vec![vec![0u32; rows * lanes]; 2];
    // (clock, bank, row, expected lanes, lane port B wrote in that clock with its old value)
    type ARead = (u64, usize, usize, Vec<u32>, Option<(usize, u32)>);
    let mut a_reads: VecDeque<ARead> = VecDeque::new();
    let mut b_reads: VecDeque<(u64, usize, usize, u32)> = VecDeque::new();
    let mut bins: BTreeMap<String, u64> = BTreeMap::new();
    let pick_row = |rng: &mut StdRng| match rng.random_range(0..4) {
        0 => 0,
        1 => rows - 1,
        _ => rng.random_range(0..rows),
    };
    // Port A holds its data between reads (port B's lane select follows b_index every clock).
    let mut a_last: Option<Vec<u32>> = None;
    let total = 2 * rows * lanes + 40_000;
    for clock in 0..total as u64 {
        // First every entry of both banks written once, then random traffic.
        let init = (clock as usize) < 2 * rows * lanes;
        let (do_b, we, bank_b, index) = if init {
            let c = clock as usize;
            (true, true, c / (rows * lanes), c % (rows * lanes))
        } else {
            let lane = rng.random_range(0..lanes);
            (
                rng.random_bool(0.6),
                rng.random_bool(0.4),
                rng.random_range(0..2),
                pick_row(&mut rng) * lanes + lane,
            )
        };
        let do_a = !init && rng.random_bool(0.6);
        let (bank_a, row_a) = (rng.random_range(0..2usize), pick_row(&mut rng));
        let wdata = rng.random::<u32>() & mask;
        sim.set_bit(a_en, do_a).expect("a_en");
        sim.set_u64(a_bank, bank_a as u64).expect("a_bank");
        sim.set_u64(a_row, row_a as u64).expect("a_row");
        sim.set_bit(b_en, do_b).expect("b_en");
        sim.set_bit(b_we, we).expect("b_we");
        sim.set_u64(b_bank, bank_b as u64).expect("b_bank");
        sim.set_u64(b_index, index as u64).expect("b_index");
        sim.set_u64(b_wdata, u64::from(wdata)).expect("b_wdata");
        sim.eval();
        // Outputs due now (requests RD_LATENCY clocks ago); between answers they hold.
        let a_words = sim.get_words(a_data).expect("a_data");
        let b_word = sim.get_u64(b_rdata).expect("b_rdata") as u32;
        if a_reads.front().is_some_and(|r| r.0 + RD_LATENCY == clock) {
            let (c, bank, row, want, collided) = a_reads.pop_front().expect("a read");
            for (lane, &w) in want.iter().enumerate() {
                let got = lane_of(&a_words, lane, width);
                let ok = got == w || collided.is_some_and(|(l, new)| l == lane && got == new);
                if !ok {
                    fail(format!(
                        "port A read of bank {bank} row {row} at clock {c}, lane {lane}: RTL \
                         {got:#x}, reference {w:#x}"
                    ));
                }
            }
            a_last = Some(a_words.clone());
            *bins
                .entry(format!(
                    "port A bank {bank} row {}",
                    if row == 0 {
                        "first"
                    } else if row == rows - 1 {
                        "last"
                    } else {
                        "middle"
                    }
                ))
                .or_default() += 1;
        } else if a_last.as_ref().is_some_and(|l| *l != a_words) {
            fail(format!("clock {clock}: port A data changed without a read"));
        }
        if b_reads.front().is_some_and(|r| r.0 + RD_LATENCY == clock) {
            let (c, bank, index, want) = b_reads.pop_front().expect("b read");
            if b_word != want {
                fail(format!(
                    "port B access of bank {bank} entry {index} at clock {c}: RTL {b_word:#x}, \
                     reference {want:#x}"
                ));
            }
        }
        // The reference: reads see the entries before this clock's write (read-first).
        if do_a {
            let want = mem[bank_a][row_a * lanes..(row_a + 1) * lanes].to_vec();
            let collided = (do_b && we && bank_b == bank_a && index / lanes == row_a)
                .then(|| (index % lanes, wdata));
            if collided.is_some() {
                *bins
                    .entry("port A reads the row port B writes".into())
                    .or_default() += 1;
            }
            // The old entry is the reference; the new one is also accepted in that lane.
            a_reads.push_back((clock, bank_a, row_a, want, collided));
        }
        if do_b {
            b_reads.push_back((clock, bank_b, index, mem[bank_b][index]));
            if we {
                mem[bank_b][index] = wdata;
                if !init {
                    *bins
                        .entry(format!("port B write lane {}", index % lanes))
                        .or_default() += 1;
                }
            }
        }
        sim.tick();
    }
    for (k, v) in &bins {
        println!("{k:40} {v}");
    }
    let mut required = vec!["port A reads the row port B writes".to_string()];
    for bank in 0..2 {
        for r in ["first", "last", "middle"] {
            required.push(format!("port A bank {bank} row {r}"));
        }
    }
    for l in 0..lanes {
        required.push(format!("port B write lane {l}"));
    }
    let missing: Vec<&String> = required.iter().filter(|b| !bins.contains_key(*b)).collect();
    assert!(missing.is_empty(), "table_mem bins never hit: {missing:?}");
}
