//! `nlb_axis_frame_fifo` on its own (32-bit beats, DEPTH 16, so frames fill it), in both modes,
//! against what its header documents:
//! - what leaves is the frames that entered, in order, each whole and unchanged, except the
//!   frames dropped whole: those marked bad on their last beat, those longer than DEPTH beats,
//!   and (DROP_WHEN_FULL = 1) those that found the memory full; `m_drop` pulses once per dropped
//!   frame, and a dropped frame never shows any beat;
//! - a frame is offered only once whole: `m_axis_tvalid` stays high from a frame's first beat to
//!   its last, whatever `m_axis_tready` does;
//! - with back-pressure (DROP_WHEN_FULL = 0) no good frame of at most DEPTH beats is lost;
//!   without tready (DROP_WHEN_FULL = 1) `s_axis_tready` is always high;
//! - `level` never exceeds DEPTH + 1.
//!
//! The source offers frames of 1 to 20 beats (some bad) with random gaps; the sink takes them
//! with back-pressure that changes by phase (always, rarely, randomly).

use nlb_verif::bench::seed_from_env;
use nlb_verif::models::{FrameFifo, FrameFifoDrop};
use nlb_verif::{Model, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;

const DEPTH: usize = 16;

/// A frame: its beats (data words; keep is all ones but on the last beat) and whether it is
/// marked bad.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    words: Vec<u32>,
    last_keep: u32,
    bad: bool,
}

fn random_frame(rng: &mut StdRng, n: u32) -> Frame {
    let beats = match rng.random_range(0..10) {
        0 => rng.random_range(17..=20),
        1 => DEPTH,
        _ => rng.random_range(1..=8),
    };
    let mut words: Vec<u32> = (0..beats).map(|_| rng.random()).collect();
    // The frame's number in its first word, so frames are told apart.
    words[0] = n;
    Frame {
        words,
        last_keep: rng.random_range(1..=15),
        bad: rng.random_bool(0.1),
    }
}

fn run<M: Model>(drop_when_full: bool, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<M>().expect("model");
    let port = |n: &str| sim.port(n).expect(n);
    let (s_data, s_keep, s_valid, s_ready, s_last, s_err) = (
        port("s_axis_tdata"),
        port("s_axis_tkeep"),
        port("s_axis_tvalid"),
        port("s_axis_tready"),
        port("s_axis_tlast"),
        port("s_axis_tuser_err"),
    );
    let (m_data, m_keep, m_valid, m_ready, m_last) = (
        port("m_axis_tdata"),
        port("m_axis_tkeep"),
        port("m_axis_tvalid"),
        port("m_axis_tready"),
        port("m_axis_tlast"),
    );
    let (m_drop, level) = (port("m_drop"), port("level"));
    let mode = if drop_when_full {
        "DROP_WHEN_FULL"
    } else {
        "back-pressure"
    };
    let fail = |what: String| -> ! {
        panic!(
            "frame fifo ({mode}): {what} (seed {seed:#x}: NLB_SEED={seed:#x} cargo test -p \
             nlb-verif --test rtl frame_fifo)"
        )
    };
    sim.reset(2).expect("reset");

    let frames: Vec<Frame> = (0..600).map(|n| random_frame(&mut rng, n)).collect();
    let (mut fi, mut bi) = (0usize, 0usize);
    let mut out: Vec<(Vec<u32>, u32)> = Vec::new();
    let mut cur: Vec<u32> = Vec::new();
    let mut drops = 0usize;
    let mut in_frame_out = false;
    let mut bins: BTreeMap<&str, u64> = BTreeMap::new();
    let mut gap = false;
    let mut clock = 0u64;
    while clock < 200_000 && (fi < frames.len() || sim.get_u64(level).expect("level") > 0) {
        clock += 1;
        let (p_offer, p_take) = match (clock / 2_000) % 3 {
            0 => (0.9, 0.95),
            1 => (0.95, 0.2),
            _ => (0.5, 0.5),
        };
        // The source: a beat of the current frame, or a gap between beats.
        gap = !rng.random_bool(p_offer) && !gap;
        let offering = fi < frames.len() && !gap;
        if offering {
            let f = &frames[fi];
            let last = bi + 1 == f.words.len();
            sim.set_u64(s_data, u64::from(f.words[bi])).expect("data");
            sim.set_u64(s_keep, if last { u64::from(f.last_keep) } else { 0xF })
                .expect("keep");
            sim.set_bit(s_last, last).expect("last");
            sim.set_bit(s_err, last && f.bad).expect("err");
        }
        sim.set_bit(s_valid, offering).expect("valid");
        let take = rng.random_bool(p_take);
        sim.set_bit(m_ready, take).expect("ready");
        sim.eval();
        let ready = sim.get_bit(s_ready).expect("ready");
        if drop_when_full && !ready {
            fail(format!(
                "s_axis_tready low at clock {clock} without back-pressure"
            ));
        }
        let valid = sim.get_bit(m_valid).expect("valid");
        if in_frame_out && !valid {
            fail(format!(
                "m_axis_tvalid dropped inside a frame at clock {clock}"
            ));
        }
        if valid && take {
            cur.push(sim.get_u64(m_data).expect("data") as u32);
            let keep = sim.get_u64(m_keep).expect("keep") as u32;
            let last = sim.get_bit(m_last).expect("last");
            in_frame_out = !last;
            if last {
                out.push((std::mem::take(&mut cur), keep));
            } else if keep != 0xF {
                fail(format!(
                    "a partial keep {keep:#x} before a frame's last beat"
                ));
            }
        } else if valid {
            in_frame_out = true;
            *bins.entry("output held by back-pressure").or_default() += 1;
        }
        if sim.get_bit(m_drop).expect("drop") {
            drops += 1;
        }
        let lv = sim.get_u64(level).expect("level");
        if lv > DEPTH as u64 + 1 {
            fail(format!("level {lv} at clock {clock}"));
        }
        if lv >= DEPTH as u64 {
            *bins.entry("memory full").or_default() += 1;
        }
        if offering && ready {
            bi += 1;
            if bi == frames[fi].words.len() {
                fi += 1;
                bi = 0;
            }
        } else if offering {
            *bins.entry("input held by back-pressure").or_default() += 1;
        }
        sim.tick();
    }
    if fi < frames.len() {
        fail(format!("only {fi} of {} frames went in", frames.len()));
    }
    // m_drop of the last frame shows a clock after its last beat.
    sim.tick();
    if sim.get_bit(m_drop).expect("drop") {
        drops += 1;
    }

    // What left: the frames in order, each whole, none of the bad or too long ones.
    let mut next = 0usize;
    for (i, (words, keep)) in out.iter().enumerate() {
        let Some(k) = (next..frames.len()).find(|&k| frames[k].words[0] == words[0]) else {
            fail(format!(
                "output frame {i} (number {}) is out of order or unknown",
                words[0]
            ));
        };
        let f = &frames[k];
        if f.bad || f.words.len() > DEPTH {
            fail(format!(
                "frame {k} left although it must be dropped ({f:?})"
            ));
        }
        if *words != f.words || *keep != f.last_keep {
            fail(format!("frame {k} left changed"));
        }
        for skipped in &frames[next..k] {
            let must = skipped.bad || skipped.words.len() > DEPTH;
            if !must && !drop_when_full {
                fail(format!(
                    "a good frame before frame {k} was lost with back-pressure"
                ));
            }
        }
        next = k + 1;
    }
    if out.len() + drops != frames.len() {
        fail(format!(
            "{} frames left and {drops} m_drop pulses for {} frames",
            out.len(),
            frames.len()
        ));
    }
    let bad = frames.iter().filter(|f| f.bad).count();
    let long = frames
        .iter()
        .filter(|f| !f.bad && f.words.len() > DEPTH)
        .count();
    bins.insert("frames dropped", drops as u64);
    bins.insert("bad frames", bad as u64);
    bins.insert("too long frames", long as u64);
    if drop_when_full {
        bins.insert("dropped for room", (drops - bad - long) as u64);
    }
    eprintln!("frame fifo ({mode}): {} frames out; {bins:?}", out.len());
    let mut required = vec![
        "bad frames",
        "too long frames",
        "memory full",
        "output held by back-pressure",
    ];
    if drop_when_full {
        required.push("dropped for room");
    } else {
        required.push("input held by back-pressure");
    }
    for b in required {
        if bins.get(b).copied().unwrap_or(0) == 0 {
            fail(format!("bin '{b}' never hit"));
        }
    }
}

#[test]
fn keeps_or_drops_frames_whole_with_back_pressure() {
    run::<FrameFifo>(false, seed_from_env(0xf2a3_0001));
}

#[test]
fn keeps_or_drops_frames_whole_without_tready() {
    run::<FrameFifoDrop>(true, seed_from_env(0xf2a3_0002));
}
