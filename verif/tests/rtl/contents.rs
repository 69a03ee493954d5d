//! Table contents the register map allows, through the whole pipeline (`nlb_top`): a bank from
//! `nlb_verif::contents::generate` (random port slots with invalid slots between valid ones
//! and overlapping ranges in any order, VIP and connection entries differing from the packet in
//! exactly one field in the same bucket, Maglev slices of 65,537 and 131,071 slots, ids past
//! the tables aliasing valid entries, the tables' last entries) loaded through the AXI-Lite
//! table window, its connection entries installed through the conntrack block as the host
//! does it, and its probes sent with random idle cycles and back-pressure on every stream.
//!
//! Every packet's result must equal the golden model's (`firmware_sim::pipeline::process`),
//! and the model's the reference's (`nlb_reference::pipeline::process`); every transmitted
//! frame and punt the model's. The bins (from the reference's trace of each packet) must all
//! be hit. `NLB_CONTENTS_CASES` (default 4) banks per run.

use firmware_sim::pipeline::{process, Context};
use firmware_sim::{ConnTable, PacketResult};
use nlb_hw::enums::{DefaultAction, Verdict};
use nlb_hw::layouts::CtEntry;
use nlb_hw::{NicSettings, Profile};
use nlb_testkit::hex;
use nlb_verif::bench::{seed_from_env, trace_always, wave_path};
use nlb_verif::contents::{self, Contents, SlotFill};
use nlb_verif::coverage::{self, Bins};
use nlb_verif::top::{take_frames, take_punts, PuntedFrame, TopBench};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;

/// Bytes of a punted frame the punt stream carries.
const PUNT_BYTES: usize = 9728;
/// Clocks of waveform written before a mismatch.
const WAVE_WINDOW: u64 = 3000;

fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

/// A mismatch and the clock it was seen in.
struct Mismatch(String, u64);

/// One expected packet.
struct Expected {
    frame: Vec<u8>,
    result: PacketResult,
    out: Vec<u8>,
    what: &'static str,
}

/// Sends `frames` and checks every result, transmitted frame and punt against `want`, and
/// that every PASS frame leaves on the pass stream as it was sent.
fn check_batch(
    dut: &mut TopBench,
    want: &[Expected],
    wave: &mut Option<(&Path, u64)>,
) -> Result<(), Mismatch> {
    for e in want {
        dut.send(&e.frame);
    }
    let err = |dut: &TopBench, s: String| Mismatch(s, dut.bench.sim.cycle());
    let want_tx: Vec<&Expected> = want
        .iter()
        .filter(|e| e.result.verdict == Verdict::Forward)
        .collect();
    let want_punt: Vec<PuntedFrame> = want
        .iter()
        .filter(|e| e.result.verdict == Verdict::Punt)
        .map(|e| PuntedFrame {
            header: e.result.punt_header(),
            frame: e.frame[..e.frame.len().min(PUNT_BYTES)].to_vec(),
        })
        .collect();
    let want_pass: Vec<&Expected> = want
        .iter()
        .filter(|e| e.result.verdict == Verdict::Pass)
        .collect();
    let (mut got, mut tx, mut punts, mut passed) = (0usize, Vec::new(), Vec::new(), 0usize);
    let limit = dut.bench.sim.cycle() + 400 * want.len() as u64 + 20_000;
    while got < want.len()
        || tx.len() < want_tx.len()
        || punts.len() < want_punt.len()
        || passed < want_pass.len()
    {
        if let Some((path, from)) = *wave {
            if dut.bench.sim.cycle() >= from {
                dut.bench
                    .sim
                    .trace_to(path)
                    .map_err(|e| err(dut, e.to_string()))?;
                *wave = None;
            }
        }
        if dut.bench.sim.cycle() > limit {
            return Err(err(
                dut,
                format!(
                    "{got} of {} results, {} of {} frames, {} of {} punts, {passed} of {} \
                     passed frames came out",
                    want.len(),
                    tx.len(),
                    want_tx.len(),
                    punts.len(),
                    want_punt.len(),
                    want_pass.len()
                ),
            ));
        }
        dut.step().map_err(|e| err(dut, e.to_string()))?;
        while let Some((cycle, inj, r)) = dut.mon.results.pop_front() {
            let Some(e) = want.get(got) else {
                return Err(Mismatch("a result with no frame".into(), cycle));
            };
            if inj || r != e.result {
                return Err(Mismatch(
                    format!(
                        "packet #{got} ({}): {}\n  RTL   {r:?}\n  model {:?}",
                        e.what,
                        hex(&e.frame),
                        e.result
                    ),
                    cycle,
                ));
            }
            got += 1;
        }
        let mut beats = dut.tx.take();
        dut.tx_pending.append(&mut beats);
        for f in take_frames(&mut dut.tx_pending) {
            let Some(e) = want_tx.get(tx.len()) else {
                return Err(err(
                    dut,
                    format!("a transmitted frame too many: {}", hex(&f)),
                ));
            };
            if f != e.out {
                return Err(err(
                    dut,
                    format!(
                        "transmitted frame of {} ({})\n  RTL   {}\n  model {}",
                        hex(&e.frame),
                        e.what,
                        hex(&f),
                        hex(&e.out)
                    ),
                ));
            }
            tx.push(f);
        }
        let mut beats = dut.punt.take();
        dut.punt_pending.append(&mut beats);
        for p in take_punts(&mut dut.punt_pending).map_err(|e| err(dut, e.to_string()))? {
            let Some(w) = want_punt.get(punts.len()) else {
                return Err(err(dut, format!("a punt too many: {p:?}")));
            };
            if p != *w {
                return Err(err(
                    dut,
                    format!("punt #{}:\n  RTL   {p:?}\n  model {w:?}", punts.len()),
                ));
            }
            punts.push(p);
        }
        let mut beats = dut.pass.take();
        dut.pass_pending.append(&mut beats);
        for f in take_frames(&mut dut.pass_pending) {
            let Some(e) = want_pass.get(passed) else {
                return Err(err(dut, format!("a passed frame too many: {}", hex(&f))));
            };
            if f != e.frame {
                return Err(err(
                    dut,
                    format!(
                        "passed frame #{passed} ({}), not the frame sent\n  RTL   {}\n  sent  {}",
                        e.what,
                        hex(&f),
                        hex(&e.frame)
                    ),
                ));
            }
            passed += 1;
        }
        let _ = dut.events.take();
    }
    for sink in [&dut.tx, &dut.punt, &dut.pass, &dut.events] {
        if !sink.violations().is_empty() {
            return Err(err(dut, format!("stream rules: {:?}", sink.violations())));
        }
    }
    Ok(())
}

/// One bank: generate, load, install, send every probe; counts bins. `wave`: trace from that
/// clock on (a replay).
fn run(seed: u64, bins: &mut Bins, wave: Option<(&Path, u64)>) -> Result<usize, Mismatch> {
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let Contents {
        tables,
        conntrack,
        mut probes,
    } = contents::generate(p, &mut rng, SlotFill::Probed);
    let setup = |e: nlb_verif::VerifError| Mismatch(format!("setup: {e}"), 0);
    let mut dut = TopBench::new(
        seed,
        wave.filter(|w| w.1 == 0).map(|w| w.0),
        rng.random_range(0.0..0.4),
        rng.random_range(0.0..0.4),
        0.2,
    )
    .map_err(setup)?;
    let settings = NicSettings {
        default_action: if rng.random_bool(0.5) {
            DefaultAction::Drop
        } else {
            DefaultAction::Pass
        },
        ..NicSettings::default()
    };
    dut.write_settings(&settings).map_err(setup)?;
    dut.load_bank(0, &tables).map_err(setup)?;
    dut.write32(nlb_hw::blocks::ctrl::ACTIVE_BANK, 0)
        .map_err(setup)?;
    dut.write32(nlb_hw::blocks::ctrl::ENABLE, 1)
        .map_err(setup)?;
    let mut ct = ConnTable::new(p.ct_buckets, p.ct_ways);
    let mut ct_ref = nlb_reference::conntrack::ConnTable::new(p.ct_buckets, p.ct_ways);
    let mut ct_map: BTreeMap<u32, CtEntry> = BTreeMap::new();
    for (i, e) in &conntrack {
        dut.write_ct(*i, e).map_err(setup)?;
        ct.write(*i, *e)
            .map_err(|e| Mismatch(format!("model conntrack: {e}"), 0))?;
        ct_ref
            .write(*i, *e)
            .map_err(|e| Mismatch(format!("reference conntrack: {e}"), 0))?;
        ct_map.insert(*i, *e);
    }
    // In random order, so neighbours come from different parts of the bank.
    for i in (1..probes.len()).rev() {
        let j = rng.random_range(0..=i);
        probes.swap(i, j);
    }
    let ctx = Context {
        tables: &tables,
        bank: 0,
        settings: &settings,
        enabled: true,
        conntrack: &ct,
    };
    let mut buf = vec![0u8; PUNT_BYTES * 2];
    let mut want = Vec::with_capacity(probes.len());
    let mut names = Vec::new();
    for pr in &probes {
        let frame = contents::frame(pr, &mut rng);
        let r = process(&ctx, &frame, &mut buf).map_err(|e| Mismatch(format!("model: {e}"), 0))?;
        let (rr, t) = contents::trace(&tables, &ct_ref, &settings, &frame);
        if contents::model_result(&rr) != r {
            return Err(Mismatch(
                format!(
                    "the model and the reference disagree on {} ({}):\n  model     {r:?}\n  \
                     reference {rr:?}",
                    hex(&frame),
                    pr.what
                ),
                0,
            ));
        }
        names.clear();
        contents::bins(p, &tables, &ct_map, &t, &mut names);
        for n in names.drain(..) {
            coverage::hit(bins, n);
        }
        want.push(Expected {
            out: buf[..r.out_len].to_vec(),
            frame,
            result: r,
            what: pr.what,
        });
    }
    // In batches, so a mismatch is near its packet.
    let mut wave = wave.filter(|w| w.1 > 0);
    for chunk in want.chunks(256) {
        check_batch(&mut dut, chunk, &mut wave)?;
    }
    if !dut.axil.violations().is_empty() {
        return Err(Mismatch(
            format!("AXI-Lite: {:?}", dut.axil.violations()),
            dut.bench.sim.cycle(),
        ));
    }
    Ok(want.len())
}

#[test]
fn contents_the_register_map_allows_match_the_model() {
    let first = seed_from_env(0xc0e7_0001);
    let cases = std::env::var("NLB_CONTENTS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4u64)
        .max(1);
    let start = std::time::Instant::now();
    let mut bins = Bins::new();
    let mut packets = 0;
    for c in 0..cases {
        let seed = first.wrapping_add(c);
        let wave = wave_path("contents", seed);
        let first_try = run(
            seed,
            &mut bins,
            trace_always().then_some((wave.as_path(), 0)),
        );
        match first_try {
            Ok(n) => packets += n,
            Err(Mismatch(what, cycle)) => {
                let from = cycle.saturating_sub(WAVE_WINDOW).max(1);
                let replay = run(seed, &mut Bins::new(), Some((wave.as_path(), from)));
                panic!(
                    "contents: clock {cycle}: {what}\n  seed {seed:#x} (rerun with \
                     NLB_SEED={seed:#x} NLB_CONTENTS_CASES=1); waveform of clocks \
                     {from}..={cycle}: {} ({})",
                    wave.display(),
                    if replay.is_err() {
                        "written"
                    } else {
                        "replay passed: no waveform"
                    }
                );
            }
        }
    }
    eprintln!(
        "{packets} packets in {cases} banks, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    coverage::print(&bins, "table-content bins");
    coverage::assert_hit(
        &bins,
        contents::required_bins(profile()),
        "table-content bins",
        &format!("first seed {first:#x}"),
    );
}
