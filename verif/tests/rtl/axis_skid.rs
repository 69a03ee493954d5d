//! `nlb_axis_skid`: random frames through the buffer under random idle cycles and
//! back-pressure arrive complete, in order and unchanged; the stream rules hold on the output;
//! s_axis_tready does not depend on the same clock's m_axis_tready and is high exactly when
//! the buffer holds fewer than its two beats; with neither idle cycles nor back-pressure it
//! moves one beat per clock.

use nlb_verif::axis::{AxisPorts, AxisSink, AxisSource, Beat};
use nlb_verif::bench::{seed_from_env, trace_always, wave_path, Bench};
use nlb_verif::models::AxisSkid;
use nlb_verif::{VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Random frames of 1..=max_len beats, `last` on each frame's final beat.
fn random_frames(ports: &AxisPorts, beats: usize, max_len: usize, rng: &mut StdRng) -> Vec<Beat> {
    let mut out = Vec::with_capacity(beats);
    while out.len() < beats {
        let len = rng.random_range(1..=max_len).min(beats - out.len());
        for i in 0..len {
            let mut b = ports.random_beat(rng);
            b.last = i + 1 == len;
            out.push(b);
        }
    }
    out
}

struct Outcome {
    sent: Vec<Beat>,
    received: Vec<Beat>,
    violations: Vec<String>,
    ready_follows_sink: Option<u64>,
    /// A clock where s_axis_tready disagreed with the occupancy (beats taken − beats given).
    ready_wrong: Option<(u64, u64, bool)>,
    cycles: u64,
}

fn run(
    beats: usize,
    idle: f64,
    backpressure: f64,
    seed: u64,
    wave: Option<&std::path::Path>,
) -> Result<Outcome, VerifError> {
    let mut sim = match wave {
        Some(p) => Verilated::with_trace::<AxisSkid>(p)?,
        None => Verilated::new::<AxisSkid>()?,
    };
    sim.reset(2)?;
    let mut source = AxisSource::new(&sim, "s_axis", idle)?;
    let mut sink = AxisSink::new(&sim, "m_axis", backpressure)?;
    let s_ready = sim.port("s_axis_tready")?;
    let m_ready = sim.port("m_axis_tready")?;
    let mut bench = Bench::new(sim, seed);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xa5a5);
    let sent = random_frames(source.ports(), beats, 12, &mut rng);
    for b in &sent {
        source.push(b.clone());
    }
    let start = bench.sim.cycle();
    let limit = start + 100 * beats as u64 + 100;
    let mut ready_follows_sink = None;
    let mut ready_wrong = None;
    while sink.received().len() < beats && bench.sim.cycle() < limit {
        // Every few clocks, check that s_axis_tready is a register: flipping m_axis_tready
        // in the same clock must not move it.
        if rng.random_bool(0.1) {
            let sim = &mut bench.sim;
            sim.set_bit(m_ready, false)?;
            sim.eval();
            let a = sim.get_bit(s_ready)?;
            sim.set_bit(m_ready, true)?;
            sim.eval();
            let b = sim.get_bit(s_ready)?;
            if a != b && ready_follows_sink.is_none() {
                ready_follows_sink = Some(sim.cycle());
            }
        }
        bench.step(&mut [&mut source, &mut sink])?;
        // The buffer holds two beats: it must take more exactly when it holds fewer than two.
        let held = source.sent() - sink.received().len() as u64;
        let ready = bench.sim.get_bit(s_ready)?;
        if bench.sim.cycle() > start + 1 && ready != (held < 2) && ready_wrong.is_none() {
            ready_wrong = Some((bench.sim.cycle(), held, ready));
        }
    }
    // A few more clocks: nothing extra may come out.
    for _ in 0..20 {
        bench.step(&mut [&mut source, &mut sink])?;
    }
    Ok(Outcome {
        sent,
        received: sink.take(),
        violations: sink.violations().to_vec(),
        ready_follows_sink,
        ready_wrong,
        cycles: bench.sim.cycle() - start - 20,
    })
}

fn first_difference(a: &[Beat], b: &[Beat]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

fn check(name: &str, beats: usize, idle: f64, backpressure: f64, seed: u64) -> u64 {
    let wave = wave_path(name, seed);
    let o = run(
        beats,
        idle,
        backpressure,
        seed,
        trace_always().then_some(wave.as_path()),
    )
    .expect("simulation harness");
    let diff = first_difference(&o.sent, &o.received);
    if diff.is_some()
        || !o.violations.is_empty()
        || o.ready_follows_sink.is_some()
        || o.ready_wrong.is_some()
    {
        let _ = run(beats, idle, backpressure, seed, Some(&wave));
        let beat = diff.map(|i| {
            format!(
                "beat {i}: sent {:x?}\n  received {:x?}",
                o.sent.get(i),
                o.received.get(i)
            )
        });
        panic!(
            "{name} (idle {idle:.2}, back-pressure {backpressure:.2}): {} of {} beats received; \
             {}; violations {:?}; s_axis_tready followed m_axis_tready at clock {:?}; \
             (clock, beats held, s_axis_tready) inconsistent: {:?}\n  \
             seed {seed:#x} (rerun with NLB_SEED={seed:#x}); waveform: {}",
            o.received.len(),
            o.sent.len(),
            beat.unwrap_or_else(|| "no beat differs".into()),
            o.violations,
            o.ready_follows_sink,
            o.ready_wrong,
            wave.display()
        );
    }
    o.cycles
}

#[test]
fn random_streams_under_random_backpressure() {
    let seed = seed_from_env(0x5c1d);
    let mut rng = StdRng::seed_from_u64(seed);
    // The corners, then random mixes.
    let mut settings = vec![(0.0, 0.0), (0.0, 0.9), (0.9, 0.0), (0.5, 0.5), (0.9, 0.9)];
    settings.extend((0..6).map(|_| (rng.random_range(0.0..0.8), rng.random_range(0.0..0.8))));
    for (i, (idle, bp)) in settings.into_iter().enumerate() {
        check("axis_skid", 3000, idle, bp, seed.wrapping_add(i as u64));
    }
}

#[test]
fn full_throughput_without_stalls() {
    let beats = 5000;
    let cycles = check("axis_skid_full_rate", beats, 0.0, 0.0, seed_from_env(7));
    // One beat per clock: tready rises one clock after reset, then one clock of latency.
    assert_eq!(
        cycles,
        beats as u64 + 2,
        "beats {beats} took {cycles} clocks"
    );
}
