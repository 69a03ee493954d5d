//! `nlb_fifo` on its own (the `fifo` model: 16-bit words, DEPTH 4, so full and empty come every
//! few words) against a reference queue (`VecDeque`), the semantics its header documents:
//! a word is written when `s_valid && s_ready`, leaves when `m_valid && m_ready`, in order,
//! unchanged; it shows on `m_valid`/`m_data` from the second edge after its write (the memory
//! is read synchronously into the output register); `count` is the words held (output register
//! included); `s_ready` is low exactly when the memory holds DEPTH words. The writer offers
//! words on random clocks, also while the FIFO is full (they must not enter); the reader
//! takes them with random back-pressure, in phases biased to keep the FIFO full, empty or in
//! between. Reset in the middle of a run empties it. Bins printed, all required.

use nlb_verif::bench::seed_from_env;
use nlb_verif::models::Fifo;
use nlb_verif::{Model, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

/// The model's DEPTH parameter.
fn depth() -> usize {
    Fifo::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix("DEPTH="))
        .and_then(|d| d.parse().ok())
        .expect("the fifo model is built with DEPTH")
}

#[test]
fn behaves_as_a_queue() {
    let seed = seed_from_env(0xf1f0);
    let depth = depth();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<Fifo>().expect("model");
    let port = |n: &str| sim.port(n).expect(n);
    let (s_data, s_valid, s_ready) = (port("s_data"), port("s_valid"), port("s_ready"));
    let (m_data, m_valid, m_ready) = (port("m_data"), port("m_valid"), port("m_ready"));
    let count = port("count");
    sim.reset(2).expect("reset");
    // (word, edge it was written at)
    let mut queue: VecDeque<(u16, u64)> = VecDeque::new();
    let mut bins: BTreeMap<&str, u64> = BTreeMap::new();
    let fail = |what: String| -> ! {
        panic!(
            "fifo (DEPTH {depth}): {what} (seed {seed:#x}: NLB_SEED={seed:#x} cargo test -p \
             nlb-verif --test fifo)"
        )
    };
    let mut next_word: u16 = rng.random();
    for phase in 0..400 {
        // (write probability, read probability) per phase: fill, drain, balanced, bursts.
        let (pw, pr) = match phase % 5 {
            0 => (0.9, 0.1),
            1 => (0.1, 0.9),
            2 => (0.5, 0.5),
            3 => (1.0, 1.0),
            _ => (rng.random(), rng.random()),
        };
        if phase == 200 {
            sim.reset(1).expect("reset");
            queue.clear();
            *bins.entry("reset mid-run").or_default() += 1;
        }
        for _ in 0..rng.random_range(5..60) {
            let write = rng.random_bool(pw);
            let read = rng.random_bool(pr);
            sim.set_u64(s_data, u64::from(next_word)).expect("s_data");
            sim.set_bit(s_valid, write).expect("s_valid");
            sim.set_bit(m_ready, read).expect("m_ready");
            sim.eval();
            let edge = sim.cycle();
            let ready = sim.get_bit(s_ready).expect("s_ready");
            let valid = sim.get_bit(m_valid).expect("m_valid");
            let data = sim.get_u64(m_data).expect("m_data") as u16;
            let n = sim.get_u64(count).expect("count") as usize;
            // The reference: a word is visible from the second edge after its write.
            let want_valid = queue.front().is_some_and(|&(_, w)| w + 2 <= edge);
            if n != queue.len() {
                fail(format!(
                    "count {n} with {} words held (edge {edge})",
                    queue.len()
                ));
            }
            if valid != want_valid {
                fail(format!(
                    "m_valid {valid} with {} words held, the oldest written at edge {:?} \
                     (edge {edge})",
                    queue.len(),
                    queue.front().map(|w| w.1)
                ));
            }
            let in_memory = queue.len() - usize::from(valid);
            if ready != (in_memory < depth) {
                fail(format!(
                    "s_ready {ready} with {in_memory} words in the memory (edge {edge})"
                ));
            }
            if valid && data != queue[0].0 {
                fail(format!(
                    "m_data {data:#06x}, the oldest word held is {:#06x} (edge {edge})",
                    queue[0].0
                ));
            }
            if queue.len() == depth + 1 {
                *bins.entry("full: memory and output register").or_default() += 1;
                if write {
                    *bins.entry("write offered while full").or_default() += 1;
                }
                if write && read {
                    *bins.entry("write and read while full").or_default() += 1;
                }
            }
            if queue.is_empty() {
                *bins.entry("empty").or_default() += 1;
                if write {
                    *bins.entry("write into empty").or_default() += 1;
                }
            }
            if valid && !read {
                *bins.entry("output stalled").or_default() += 1;
            }
            if valid && read && write && ready {
                *bins.entry("write and read together").or_default() += 1;
            }
            if valid && read {
                queue.pop_front();
            }
            if write && ready {
                queue.push_back((next_word, edge));
                next_word = rng.random();
            }
            sim.tick();
        }
    }
    for (k, v) in &bins {
        println!("{k:36} {v}");
    }
    for b in [
        "full: memory and output register",
        "write offered while full",
        "write and read while full",
        "empty",
        "write into empty",
        "output stalled",
        "write and read together",
        "reset mid-run",
    ] {
        assert!(bins.contains_key(b), "fifo bin never hit: {b}");
    }
}
