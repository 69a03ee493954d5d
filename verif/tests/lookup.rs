//! `nlb_top`'s parser and lookup pipeline against the golden model
//! (`firmware_sim::pipeline::process`): random table banks (every affinity, delivery, tracked
//! and untracked pools, ACLs, VIPs with several rules, broken entries) loaded into both banks
//! through the AXI-Lite table window, connections installed through the conntrack block, and
//! traffic to the VIPs (hot flows, fragments, ICMP errors quoting VIP flows both ways, jumbo
//! frames) mixed with random and malformed frames, streamed with random idle cycles. Every
//! packet's result (verdict, reason, bank, rule, pool, backend, key, connection-table outcome
//! and index, flow hash, IP id, lengths, event) must equal the model's; afterwards the hit
//! bits (read and cleared through `hit_read`) and the connection count must too.

use firmware_sim::conntrack::ConnTable;
use firmware_sim::pipeline::{process, Context, PacketResult};
use firmware_sim::{CounterKind, Counters};
use nlb_hw::blocks::{conntrack, ctrl};
use nlb_hw::enums::DefaultAction;
use nlb_hw::enums::{Reason, Verdict};
use nlb_hw::layouts::LearnEvent;
use nlb_hw::{NicSettings, Profile};
use nlb_verif::bench::{seed_from_env, trace_always, wave_path};
use nlb_verif::scenario::Scenario;
use nlb_verif::top::{take_events, take_frames, take_punts, PuntedFrame, TopBench};

/// Bytes of a punted frame the punt stream carries (the punt window, docs/pipeline.md 13).
const PUNT_BYTES: usize = 9728;
use nlb_verif::VerifError;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn sim_profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

struct Mismatch(String, u64);

const WAVE_WINDOW: u64 = 400;

/// One case: two random banks, connections, three phases of traffic (bank 0, bank 1, the
/// pipeline disabled). Returns the packets checked.
fn run(
    seed: u64,
    frames_per_phase: usize,
    wave: Option<(&std::path::Path, u64)>,
) -> Result<Result<usize, Mismatch>, VerifError> {
    let profile = sim_profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let banks = [
        Scenario::random(profile, &mut rng),
        Scenario::random(profile, &mut rng),
    ];
    let settings = NicSettings {
        default_action: if rng.random_bool(0.5) {
            DefaultAction::Drop
        } else {
            DefaultAction::Pass
        },
        ..NicSettings::default()
    };
    let rx_idle = rng.random_range(0.0..0.5);
    let backpressure = rng.random_range(0.0..0.5);
    let mut dut = TopBench::new(seed, None, rx_idle, backpressure, 0.2)?;
    if let Some((path, 0)) = wave {
        dut.bench.sim.trace_to(path)?;
    }
    dut.write_settings(&settings)?;
    dut.load_bank(0, &banks[0].tables)?;
    dut.load_bank(1, &banks[1].tables)?;
    let mut ct = ConnTable::new(profile.ct_buckets, profile.ct_ways);
    for s in &banks {
        for (index, e) in s.conntrack(profile, &mut rng) {
            dut.write_ct(index, &e)?;
            ct.write(index, e)
                .map_err(|e| VerifError::Setup(format!("model conntrack: {e}")))?;
        }
    }

    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    let mut counters = Counters::new(profile);
    let mut checked = 0usize;
    let mut seen = std::collections::BTreeMap::new();
    for (phase, (bank, enabled)) in [(0u8, true), (1, true), (0, false)].into_iter().enumerate() {
        dut.write32(ctrl::ACTIVE_BANK, u32::from(bank))?;
        dut.write32(ctrl::ENABLE, u32::from(enabled))?;
        let scenario = &banks[usize::from(bank)];
        let frames: Vec<Vec<u8>> = (0..frames_per_phase)
            .map(|_| scenario.frame(&mut rng))
            .collect();
        for f in &frames {
            dut.send(f);
        }
        let ctx = Context {
            tables: &banks[usize::from(bank)].tables,
            bank,
            settings: &settings,
            enabled,
            conntrack: &ct,
        };
        let mut expected: Vec<PacketResult> = Vec::with_capacity(frames.len());
        let mut want_tx: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut want_punt: Vec<(usize, PuntedFrame)> = Vec::new();
        let mut want_events: Vec<(usize, LearnEvent)> = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let r =
                process(&ctx, f, &mut out).map_err(|e| VerifError::Setup(format!("model: {e}")))?;
            if r.verdict == Verdict::Forward {
                want_tx.push((i, out[..r.out_len].to_vec()));
            }
            if r.verdict == Verdict::Punt {
                want_punt.push((
                    i,
                    PuntedFrame {
                        header: r.punt_header(),
                        frame: f[..f.len().min(PUNT_BYTES)].to_vec(),
                    },
                ));
            }
            if let Some(e) = r.event {
                want_events.push((i, e));
            }
            expected.push(r);
        }
        for r in &expected {
            counters.record(r);
            if let Some(i) = r.ct_index {
                ct.mark_hit(i);
            }
            let key = format!(
                "{:?}/{:?} key {:?} ct {:?} ev {:?}",
                r.verdict,
                r.reason,
                r.key,
                r.conntrack,
                r.event.map(|e| e.event)
            );
            *seen.entry(key).or_insert(0usize) += 1;
        }
        let mut got = 0usize;
        let limit = dut.bench.sim.cycle() + 200 * frames.len() as u64 + 10_000;
        while got < frames.len() {
            if let Some((path, from)) = wave {
                if from > 0 && dut.bench.sim.cycle() == from && dut.bench.sim.trace_path().is_none()
                {
                    dut.bench.sim.trace_to(path)?;
                }
            }
            if dut.bench.sim.cycle() > limit {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: only {got} of {} results came out",
                        frames.len()
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
            dut.step()?;
            while let Some((cycle, r)) = dut.mon.results.pop_front() {
                let (f, want) = (&frames[got], &expected[got]);
                if r != *want {
                    return Ok(Err(Mismatch(
                        format!(
                            "phase {phase} (bank {bank}, enabled {enabled}) packet #{got} ({} bytes) {}\n  RTL   {r:?}\n  model {want:?}",
                            f.len(),
                            hex(f)
                        ),
                        cycle,
                    )));
                }
                got += 1;
                checked += 1;
            }
        }
        // The output streams: every forwarded frame, punt and event, in order.
        let (mut tx, mut punts, mut events) = (Vec::new(), Vec::new(), Vec::new());
        let limit = dut.bench.sim.cycle() + 400 * frames.len() as u64 + 10_000;
        loop {
            let mut beats = dut.tx.take();
            dut.tx_pending.append(&mut beats);
            tx.extend(take_frames(&mut dut.tx_pending));
            let mut beats = dut.punt.take();
            dut.punt_pending.append(&mut beats);
            punts.extend(take_punts(&mut dut.punt_pending)?);
            let mut beats = dut.events.take();
            events.extend(take_events(&mut beats)?);
            if tx.len() >= want_tx.len()
                && punts.len() >= want_punt.len()
                && events.len() >= want_events.len()
            {
                break;
            }
            if dut.bench.sim.cycle() > limit {
                break;
            }
            dut.step()?;
        }
        eprintln!(
            "phase {phase}: {} frames transmitted, {} punted, {} events",
            tx.len(),
            punts.len(),
            events.len()
        );
        for (k, (i, want)) in want_tx.iter().enumerate() {
            let got = tx.get(k);
            if got != Some(want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: transmitted frame {k} (packet #{i}, {:?}) of {}\n  RTL   {}\n  model {}",
                        expected[*i].reason,
                        hex(&frames[*i]),
                        got.map_or("(none)".to_string(), |g| hex(g)),
                        hex(want)
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        for (k, (i, want)) in want_punt.iter().enumerate() {
            let got = punts.get(k);
            if got != Some(want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: punt {k} (packet #{i}) {}\n  RTL   {got:?}\n  model {want:?}",
                        hex(&frames[*i])
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        for (k, (i, want)) in want_events.iter().enumerate() {
            let got = events.get(k);
            if got != Some(want) {
                return Ok(Err(Mismatch(
                    format!(
                        "phase {phase}: event {k} (packet #{i}) {}\n  RTL   {got:?}\n  model {want:?}",
                        hex(&frames[*i])
                    ),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        if tx.len() != want_tx.len()
            || punts.len() != want_punt.len()
            || events.len() != want_events.len()
        {
            return Ok(Err(Mismatch(
                format!(
                    "phase {phase}: RTL sent {} frames, {} punts, {} events; model {}, {}, {}",
                    tx.len(),
                    punts.len(),
                    events.len(),
                    want_tx.len(),
                    want_punt.len(),
                    want_events.len()
                ),
                dut.bench.sim.cycle(),
            )));
        }
        for sink in [&dut.tx, &dut.punt, &dut.events] {
            if !sink.violations().is_empty() {
                return Ok(Err(Mismatch(
                    format!("stream rules: {:?}", sink.violations()),
                    dut.bench.sim.cycle(),
                )));
            }
        }
        if !dut.mon.violations.is_empty() {
            return Ok(Err(Mismatch(
                format!("result bus: {:?}", dut.mon.violations),
                dut.bench.sim.cycle(),
            )));
        }
    }

    // Counters of every family, as the host reads them: every reason and verdict, the rules
    // and backends in use and a few beyond; some snapshot-and-clear.
    let mut idx: Vec<(CounterKind, u32)> = Vec::new();
    idx.extend((0..Reason::ALL.len() as u32 + 2).map(|i| (CounterKind::Reason, i)));
    idx.extend((0..5).map(|i| (CounterKind::Verdict, i)));
    idx.extend((0..40).map(|i| (CounterKind::Rule, i)));
    idx.extend((0..56).map(|i| (CounterKind::Backend, i)));
    for extra in [profile.rules - 1, profile.rules, 4095] {
        idx.push((CounterKind::Rule, extra));
    }
    for extra in [profile.backends - 1, profile.backends, 0xff_ffff] {
        idx.push((CounterKind::Backend, extra));
    }
    for (kind, i) in idx {
        let clear = rng.random_bool(0.3);
        let got = dut.read_counter(kind, i, clear)?;
        let want = if clear {
            counters.take(kind, i)
        } else {
            counters.get(kind, i)
        };
        if got != want {
            return Ok(Err(Mismatch(
                format!("counter {kind:?} {i} (clear {clear}): RTL {got:?}, model {want:?}"),
                dut.bench.sim.cycle(),
            )));
        }
    }

    // Hit bits and the connection count, as the host reads them.
    let count = dut.read32(conntrack::COUNT)?;
    if count != ct.valid_count() {
        return Ok(Err(Mismatch(
            format!("conntrack count: RTL {count}, model {}", ct.valid_count()),
            dut.bench.sim.cycle(),
        )));
    }
    for row in 0..profile.ct_entries() / 32 {
        dut.write32(conntrack::INDEX, row * 32 + rng.random_range(0..32))?;
        let rtl = dut.read32(conntrack::HIT_READ)?;
        let model = ct.take_hits(row * 32);
        let again = dut.read32(conntrack::HIT_READ)?;
        if rtl != model || again != 0 {
            return Ok(Err(Mismatch(
                format!(
                    "hit bits of entries {}..{}: RTL {rtl:#010x} (then {again:#x}), model {model:#010x}",
                    row * 32,
                    row * 32 + 31
                ),
                dut.bench.sim.cycle(),
            )));
        }
    }
    if !dut.axil.violations().is_empty() {
        return Ok(Err(Mismatch(
            format!("AXI-Lite: {:?}", dut.axil.violations()),
            dut.bench.sim.cycle(),
        )));
    }
    for (k, n) in &seen {
        eprintln!("{n:7} {k}");
    }
    Ok(Ok(checked))
}

fn check(name: &str, seed: u64, frames_per_phase: usize) -> usize {
    let wave = wave_path(name, seed);
    let first = run(
        seed,
        frames_per_phase,
        trace_always().then_some((wave.as_path(), 0)),
    )
    .expect("simulation harness");
    match first {
        Ok(n) => n,
        Err(Mismatch(what, cycle)) => {
            let from = cycle.saturating_sub(WAVE_WINDOW).max(1);
            let replay = run(seed, frames_per_phase, Some((wave.as_path(), from)));
            panic!(
                "{name}: clock {cycle}: {what}\n  seed {seed:#x} (rerun with NLB_SEED={seed:#x}); \
                 waveform of clocks {from}..={cycle}: {} ({})",
                wave.display(),
                if replay.is_ok() {
                    "written"
                } else {
                    "replay failed"
                }
            );
        }
    }
}

#[test]
fn lookup_results_match_the_model() {
    let seed = seed_from_env(0x100c_0001);
    let per_phase: usize = std::env::var("NLB_LOOKUP_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let n = check("lookup", seed, per_phase);
    assert_eq!(n, 3 * per_phase);
}
