//! `nlb_async_fifo` on its own (the `async_fifo` model: 16-bit words, DEPTH 4, SYNC_STAGES 2)
//! with two unrelated clocks (`nlb_verif::clocks`), against a reference queue (`VecDeque`) and
//! the rules its header documents:
//! - a word enters on `s_valid && s_ready` at an `s_clk` edge and leaves on `m_valid && m_ready`
//!   at an `m_clk` edge, once, in order, unchanged; `m_valid` never shows a word that is not held;
//! - `s_ready` never offers room that is not there (words held minus the output register must be
//!   below DEPTH), and is low only when the memory was full by the reads of SYNC_STAGES + 2
//!   write clocks before (a read reaches the write side through the synchroniser and the
//!   registered level, never later); a word shows on `m_valid`
//!   at most SYNC_STAGES + 2 read clocks after the write edge (when the output register is free);
//! - `s_level` is an upper bound on the words in the memory (never above DEPTH, DEPTH exactly when
//!   `s_ready` is low), `m_level` a lower bound on the words held (at least `m_valid`).
//!
//! Clocks: OpenNIC's pairs (322.27 / 250 MHz both ways, 125 / 322.27 MHz both ways), equal
//! clocks in phase (every edge of both at one instant), periods redrawn every few hundred
//! edges (1 to 20 ns each, so either side up to 20 times the other's rate), and pauses (the
//! read clock stopped while the writer fills the FIFO, the write clock stopped while the reader
//! drains it). Writer and reader are biased by phase to keep the FIFO full, empty or in
//! between; each run resets mid-run with words held (both resets together, as the header's
//! rule asks). Bins printed, all required.

use nlb_verif::bench::{seed_from_env, trace_always, wave_path};
use nlb_verif::clocks::{opennic, ClockSpec, Clocks};
use nlb_verif::models::AsyncFifo;
use nlb_verif::{Model, Port, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

/// Clock indices in the `Clocks` list.
const WR: usize = 0;
const RD: usize = 1;

/// A model parameter (its build value, else the RTL default).
fn param(name: &str, default: u64) -> u64 {
    AsyncFifo::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How a run's clocks behave.
#[derive(Debug, Clone, Copy)]
enum Timing {
    /// Fixed frequencies (MHz) of the write and read clocks, the read clock's first edge at
    /// this phase (ps).
    Fixed(f64, f64, u64),
    /// Periods redrawn (1-20 ns each) every few hundred edges.
    Drifting,
    /// 250 MHz writes, 322 MHz reads, with one clock paused for long stretches.
    Pausing,
}

#[derive(Debug, Clone, Copy)]
struct Ports {
    s_rst: Port,
    s_data: Port,
    s_valid: Port,
    s_ready: Port,
    s_level: Port,
    m_rst: Port,
    m_data: Port,
    m_valid: Port,
    m_ready: Port,
    m_level: Port,
}

/// A word held: its data and the read-clock count by which it must show.
#[derive(Debug, Clone, Copy)]
struct Held {
    data: u16,
    show_by: u64,
}

/// Reset progress: both resets high since `since_ps`; the first reset edge of each side.
#[derive(Debug, Clone, Copy)]
struct Resetting {
    first_wr: Option<u64>,
    first_rd: Option<u64>,
    wr_after_rd: bool,
    rd_after_wr: bool,
    wr_released: bool,
    rd_released: bool,
}

/// What a run counted.
/// Counts one hit of bin `k`.
fn bin(b: &mut BTreeMap<String, u64>, k: &str) {
    *b.entry(k.to_string()).or_default() += 1;
}

#[derive(Debug, Default)]
struct Outcome {
    words: u64,
    bins: BTreeMap<String, u64>,
}

fn run(
    name: &str,
    timing: Timing,
    events: u64,
    seed: u64,
    wave: Option<&Path>,
) -> Result<Outcome, String> {
    let depth = param("DEPTH", 16) as usize;
    let sync = param("SYNC_STAGES", 2);
    let err = |e: nlb_verif::VerifError| e.to_string();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<AsyncFifo>().map_err(err)?;
    if let Some(w) = wave {
        sim.trace_to(w).map_err(err)?;
    }
    let port = |n: &str| sim.port(n).map_err(err);
    let p = Ports {
        s_rst: port("s_rst")?,
        s_data: port("s_data")?,
        s_valid: port("s_valid")?,
        s_ready: port("s_ready")?,
        s_level: port("s_level")?,
        m_rst: port("m_rst")?,
        m_data: port("m_data")?,
        m_valid: port("m_valid")?,
        m_ready: port("m_ready")?,
        m_level: port("m_level")?,
    };
    let specs = match timing {
        Timing::Fixed(w, r, phase) => [
            ClockSpec::mhz("s_clk", w),
            ClockSpec::mhz("m_clk", r).with_phase(phase),
        ],
        Timing::Drifting | Timing::Pausing => [
            ClockSpec::mhz("s_clk", opennic::AXIS_MHZ),
            ClockSpec::mhz("m_clk", opennic::CMAC_MHZ).with_phase(1234),
        ],
    };
    let mut clocks = Clocks::new(&mut sim, &specs).map_err(err)?;
    let mut out = Outcome::default();

    let mut queue: VecDeque<Held> = VecDeque::new();
    let mut next_word: u16 = rng.random();
    // Words written and words moved out of the memory (into the output register) since reset,
    // and the second of these at each of the last write-clock edges.
    let mut written = 0u64;
    let mut moved_at_wr_edges: VecDeque<u64> = VecDeque::new();
    // Start in reset (both asserted together at time 0).
    let mut resetting = Some(Resetting {
        first_wr: None,
        first_rd: None,
        wr_after_rd: false,
        rd_after_wr: false,
        wr_released: false,
        rd_released: false,
    });
    sim.set_bit(p.s_rst, true).map_err(err)?;
    sim.set_bit(p.m_rst, true).map_err(err)?;
    let mut words_since_reset = 0u64;
    let mut mid_reset_done = false;
    let (mut write_p, mut read_p) = (0.5, 0.5);
    let mut pause_left = 0u64;

    for event in 0..events {
        // Phases: fill, drain, balanced, saturated, random.
        if event.is_multiple_of(250) {
            (write_p, read_p) = match (event / 250) % 5 {
                0 => (0.9, 0.15),
                1 => (0.15, 0.9),
                2 => (0.5, 0.5),
                3 => (1.0, 1.0),
                _ => (rng.random(), rng.random()),
            };
        }
        match timing {
            Timing::Drifting if event % 300 == 150 => {
                let w = rng.random_range(1000..20_000u64);
                // Now and then the same period (edges in a fixed relation).
                let r = if rng.random_bool(0.2) {
                    w
                } else {
                    rng.random_range(1000..20_000u64)
                };
                clocks.set_period(WR, w);
                clocks.set_period(RD, r);
                bin(&mut out.bins, "period changed");
                if w >= 4 * r {
                    bin(&mut out.bins, "read clock 4x the write clock or more");
                }
                if r >= 4 * w {
                    bin(&mut out.bins, "write clock 4x the read clock or more");
                }
            }
            Timing::Pausing if resetting.is_none() => {
                if pause_left > 0 {
                    pause_left -= 1;
                    if pause_left == 0 {
                        let delay = rng.random_range(1..5000);
                        clocks.resume(WR, delay);
                        clocks.resume(RD, delay);
                    }
                } else if event % 400 == 200 {
                    // Stop the read clock while the writer fills, or the write clock while the
                    // reader drains.
                    let (stop, w, r) = if rng.random_bool(0.5) {
                        (RD, 1.0, 0.0)
                    } else {
                        (WR, 0.0, 1.0)
                    };
                    clocks.pause(stop);
                    (write_p, read_p) = (w, r);
                    pause_left = 150;
                }
            }
            _ => {}
        }
        // A reset in the middle of the run, with words held.
        if !mid_reset_done
            && resetting.is_none()
            && !clocks.paused(WR)
            && !clocks.paused(RD)
            && event > events / 2
            && queue.len() >= 2
        {
            mid_reset_done = true;
            bin(&mut out.bins, "reset with words held");
            resetting = Some(Resetting {
                first_wr: None,
                first_rd: None,
                wr_after_rd: false,
                rd_after_wr: false,
                wr_released: false,
                rd_released: false,
            });
            queue.clear();
            words_since_reset = 0;
            written = 0;
            moved_at_wr_edges.clear();
            sim.set_bit(p.s_rst, true).map_err(err)?;
            sim.set_bit(p.m_rst, true).map_err(err)?;
        }

        let Some(edges) = clocks.next_edge(&mut sim).map_err(err)? else {
            return Err(format!("{name}: every clock paused at event {event}"));
        };
        let (wr_edge, rd_edge) = (edges.has(WR), edges.has(RD));
        let now = edges.time_ps;

        // Drive the rising domains' inputs.
        // No traffic while resetting (the reset drops what is held; a side released first
        // waits for the other).
        let quiet = resetting.is_some();
        let mut offer = false;
        if wr_edge {
            offer = !quiet && rng.random_bool(write_p);
            let data = if offer { next_word } else { rng.random() };
            sim.set_u64(p.s_data, u64::from(data)).map_err(err)?;
            sim.set_bit(p.s_valid, offer).map_err(err)?;
        }
        let mut take = false;
        if rd_edge {
            take = !quiet && rng.random_bool(read_p);
            sim.set_bit(p.m_ready, take).map_err(err)?;
        }
        sim.eval();

        // Sample and check.
        let s_ready = sim.get_bit(p.s_ready).map_err(err)?;
        let s_level = sim.get_u64(p.s_level).map_err(err)? as usize;
        let m_valid = sim.get_bit(p.m_valid).map_err(err)?;
        let m_data = sim.get_u64(p.m_data).map_err(err)? as u16;
        let m_level = sim.get_u64(p.m_level).map_err(err)? as usize;
        let at = format!(
            "{name}: at {now} ps (write clock {}, read clock {})",
            clocks.rises(WR),
            clocks.rises(RD)
        );

        if let Some(r) = resetting.as_mut() {
            // Reset rule: each side has a reset edge after the other side's first one; then
            // release, in either order, each at one of its own edges.
            if wr_edge {
                if r.first_rd.is_some_and(|t| t < now) {
                    r.wr_after_rd = true;
                }
                r.first_wr.get_or_insert(now);
            }
            if rd_edge {
                if r.first_wr.is_some_and(|t| t < now) {
                    r.rd_after_wr = true;
                }
                r.first_rd.get_or_insert(now);
            }
            // This edge samples the resets high; a release comes after it, for the next edge.
            let release = r.wr_after_rd && r.rd_after_wr;
            clocks.fire(&mut sim, edges).map_err(err)?;
            if release {
                if wr_edge && !r.wr_released && rng.random_bool(0.5) {
                    r.wr_released = true;
                    sim.set_bit(p.s_rst, false).map_err(err)?;
                }
                if rd_edge && !r.rd_released && rng.random_bool(0.5) {
                    r.rd_released = true;
                    sim.set_bit(p.m_rst, false).map_err(err)?;
                }
                sim.eval();
            }
            if r.wr_released && r.rd_released {
                resetting = None;
            }
            continue;
        }

        let held = queue.len();
        if m_valid {
            match queue.front() {
                None => return Err(format!("{at}: m_valid with no word held (a phantom word)")),
                Some(w) if w.data != m_data => {
                    return Err(format!(
                        "{at}: m_data {m_data:#06x}, the oldest word held is {:#06x} \
                         ({held} held)",
                        w.data
                    ))
                }
                Some(_) => {}
            }
        }
        let in_memory = held - usize::from(m_valid);
        if s_ready && in_memory >= depth {
            return Err(format!(
                "{at}: s_ready high with {in_memory} words in the memory (DEPTH {depth})"
            ));
        }
        if s_level > depth || s_level < in_memory || s_ready != (s_level != depth) {
            return Err(format!(
                "{at}: s_level {s_level}, s_ready {s_ready} with {in_memory} words in the memory"
            ));
        }
        if m_level > held || m_level < usize::from(m_valid) {
            return Err(format!(
                "{at}: m_level {m_level} with {held} words held (m_valid {m_valid})"
            ));
        }
        // The write side sees reads SYNC_STAGES + 2 of its clocks late (through the
        // synchroniser, then its registered level): refused only if the memory was full by
        // the read count of that many write clocks ago.
        let moved = written - in_memory as u64;
        if in_memory >= depth {
            bin(&mut out.bins, "full (DEPTH words in the memory)");
        }
        if wr_edge {
            moved_at_wr_edges.push_back(moved);
            if moved_at_wr_edges.len() as u64 > sync + 3 {
                moved_at_wr_edges.pop_front();
            }
            let old = moved_at_wr_edges.front().copied().unwrap_or(0);
            if !s_ready && moved_at_wr_edges.len() as u64 > sync + 2 && written - old < depth as u64
            {
                return Err(format!(
                    "{at}: s_ready low with {in_memory} words in the memory, {} by the reads \
                     of {} write clocks ago",
                    written - old,
                    sync + 2
                ));
            }
            if !s_ready && in_memory < depth {
                bin(
                    &mut out.bins,
                    "refused while the last reads cross (conservative full)",
                );
            }
        }
        if rd_edge && !m_valid {
            if let Some(w) = queue.front() {
                if clocks.rises(RD) >= w.show_by {
                    return Err(format!(
                        "{at}: {held} words held and m_valid low {} read clocks after the \
                         oldest was written",
                        clocks.rises(RD) + sync + 2 - w.show_by
                    ));
                }
            }
        }

        // Bins.
        if wr_edge && offer && !s_ready {
            bin(&mut out.bins, "write offered while refused");
        }
        if held == 0 {
            bin(&mut out.bins, "empty");
        }
        if edges.count() == 2 {
            bin(&mut out.bins, "edges of both clocks at one instant");
            if offer && s_ready && take && m_valid {
                bin(&mut out.bins, "a word in and a word out at one instant");
            }
        }
        if clocks.paused(RD) && wr_edge && offer && !s_ready {
            bin(&mut out.bins, "read clock paused: writer refused (full)");
        }
        if clocks.paused(WR) && rd_edge && take && m_valid {
            bin(&mut out.bins, "write clock paused: word taken");
        }
        if mid_reset_done && words_since_reset > 0 && rd_edge && take && m_valid {
            bin(&mut out.bins, "words through after the mid-run reset");
        }

        // Handshakes at this instant's edges.
        if rd_edge && take && m_valid {
            queue.pop_front();
            out.words += 1;
        }
        if wr_edge && offer && s_ready {
            // The read edge at this same instant samples the old pointer.
            let base = clocks.rises(RD) + u64::from(rd_edge);
            queue.push_back(Held {
                data: next_word,
                show_by: base + sync + 2,
            });
            next_word = rng.random();
            words_since_reset += 1;
            written += 1;
        }
        clocks.fire(&mut sim, edges).map_err(err)?;
    }
    if resetting.is_some() {
        return Err(format!("{name}: still in reset at the end"));
    }
    Ok(out)
}

/// Runs one case; on a failure replays it with a waveform and panics with the seed.
fn check(name: &str, timing: Timing, events: u64, seed: u64, bins: &mut BTreeMap<String, u64>) {
    let wave = wave_path(name, seed);
    match run(
        name,
        timing,
        events,
        seed,
        trace_always().then_some(wave.as_path()),
    ) {
        Ok(o) => {
            println!("{name:40} {:6} words through", o.words);
            assert!(o.words > 0, "{name}: no word came through");
            for (k, v) in o.bins {
                *bins.entry(k).or_default() += v;
            }
        }
        Err(e) => {
            let _ = run(name, timing, events, seed, Some(&wave));
            panic!(
                "async_fifo: {e}\n  seed {seed:#x} (NLB_SEED={seed:#x} cargo test -p nlb-verif \
                 --test rtl async_fifo); waveform: {}",
                wave.display()
            );
        }
    }
}

#[test]
fn two_clocks_against_a_reference_queue() {
    let seed = seed_from_env(0xcdc0);
    let (cmac, axis, axil) = (opennic::CMAC_MHZ, opennic::AXIS_MHZ, opennic::AXIL_MHZ);
    let cases = [
        ("async_fifo 322 -> 250 MHz", Timing::Fixed(cmac, axis, 777)),
        ("async_fifo 250 -> 322 MHz", Timing::Fixed(axis, cmac, 1500)),
        ("async_fifo 125 -> 322 MHz", Timing::Fixed(axil, cmac, 300)),
        ("async_fifo 322 -> 125 MHz", Timing::Fixed(cmac, axil, 2000)),
        // Equal clocks in phase: every edge of both at one instant.
        (
            "async_fifo 250 = 250 MHz in phase",
            Timing::Fixed(axis, axis, 2000),
        ),
        ("async_fifo periods redrawn", Timing::Drifting),
        ("async_fifo clocks paused", Timing::Pausing),
    ];
    let mut bins = BTreeMap::new();
    for (i, (name, timing)) in cases.into_iter().enumerate() {
        check(name, timing, 20_000, seed.wrapping_add(i as u64), &mut bins);
    }
    for (k, v) in &bins {
        println!("{k:50} {v}");
    }
    for b in [
        "full (DEPTH words in the memory)",
        "write offered while refused",
        "refused while the last reads cross (conservative full)",
        "empty",
        "edges of both clocks at one instant",
        "a word in and a word out at one instant",
        "read clock paused: writer refused (full)",
        "write clock paused: word taken",
        "reset with words held",
        "words through after the mid-run reset",
        "period changed",
        "read clock 4x the write clock or more",
        "write clock 4x the read clock or more",
    ] {
        assert!(bins.contains_key(b), "async_fifo bin never hit: {b}");
    }
}
