//! Table contents the register map allows (`nlb_verif::contents`) on `nlb_lookup` alone, where
//! the bench plays the memories, so every slot of the Maglev memory is filled (slices of
//! 65,537 and 131,071 slots read wherever their index falls): two generated banks (the
//! descriptors alternate between them), their connection entries in the one connection table,
//! every probe's parse sent as a descriptor with random idle clocks. Each result is compared
//! with the golden model's decision (the bench's `Run`), the model's with the reference's, and
//! the bins of `nlb_verif::contents::bins` must all be hit. A failure is replayed with a
//! waveform.

use super::*;
use nlb_verif::bench::wave_path;
use nlb_verif::contents::{self, SlotFill};
use nlb_verif::coverage;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One case: two banks, their probes through the block. Returns the bins.
fn case(seed: u64, wave: Option<&std::path::Path>) -> Bins {
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let banks = [
        contents::generate(p, &mut rng, SlotFill::All),
        contents::generate(p, &mut rng, SlotFill::All),
    ];
    let mut ct = ConnTable::new(p.ct_buckets, p.ct_ways);
    let mut ct_ref = nlb_reference::conntrack::ConnTable::new(p.ct_buckets, p.ct_ways);
    let mut ct_map = BTreeMap::new();
    for c in &banks {
        for (i, e) in &c.conntrack {
            ct.write(*i, *e).expect("an index inside the table");
            ct_ref.write(*i, *e).expect("an index inside the table");
            ct_map.insert(*i, *e);
        }
    }
    let mut sim = Verilated::new::<Lookup>().expect("model");
    if let Some(path) = wave {
        sim.trace_to(path).expect("waveform");
    }
    sim.reset(2).expect("reset");
    let mut settings = [NicSettings::default(), NicSettings::default()];
    settings[0].default_action = DefaultAction::Pass;
    settings[1].default_action = DefaultAction::Drop;
    let mut r = Run {
        inputs: Inputs::new(&sim),
        outputs: Outputs::new(&sim),
        mem: Memories::new(&sim, [banks[0].tables.clone(), banks[1].tables.clone()], ct),
        hit_en: sim.port("hit_set_en").expect("port"),
        hit_index: sim.port("hit_set_index").expect("port"),
        room: sim.port("s_room").expect("port"),
        sim,
        settings,
        rng: StdRng::seed_from_u64(seed ^ 0x7ab1),
        clock: 0,
        flight: VecDeque::new(),
        hit_prev: None,
        bins: Bins::new(),
        seed,
        prev_bank: None,
    };
    r.idle(4);
    // Both banks' probes, interleaved at random.
    let mut all: Vec<(u8, contents::Probe)> = Vec::new();
    for (b, c) in banks.iter().enumerate() {
        all.extend(c.probes.iter().map(|pr| (b as u8, *pr)));
    }
    for i in (1..all.len()).rev() {
        let j = rng.random_range(0..=i);
        all.swap(i, j);
    }
    let mut names = Vec::new();
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    for (bank, pr) in all {
        let frame = contents::frame(&pr, &mut rng);
        let default_drop = rng.random_bool(0.5);
        let tables = &banks[usize::from(bank)].tables;
        let s = &r.settings[usize::from(default_drop)];
        // The model against the reference first (the bench then holds the RTL to the model).
        let (rr, t) = contents::trace(tables, &ct_ref, s, &frame);
        let ctx = Context {
            tables,
            bank: 0,
            settings: s,
            enabled: true,
            conntrack: &r.mem.ct,
        };
        let m = pipeline::process(&ctx, &frame, &mut out).expect("room for the frame");
        assert_eq!(
            contents::model_result(&rr),
            m,
            "the model and the reference disagree on {frame:02x?} ({})",
            pr.what
        );
        names.clear();
        contents::bins(p, tables, &ct_map, &t, &mut names);
        for n in names.drain(..) {
            coverage::hit(&mut r.bins, n);
        }
        let d = Desc {
            bank,
            enable: true,
            default_drop,
            inject: None,
            len: frame.len(),
            parsed: parse::parse(&frame),
            what: pr.what,
        };
        r.send(&d);
        if rng.random_bool(0.2) {
            let n = rng.random_range(1..8);
            r.idle(n);
        }
    }
    r.drain();
    r.bins
}

#[test]
fn contents_the_register_map_allows() {
    let first = seed_from_env(0x7ab1_e001);
    let cases = std::env::var("NLB_CONTENTS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2u64)
        .max(1);
    let mut bins = Bins::new();
    for c in 0..cases {
        let seed = first.wrapping_add(c);
        match catch_unwind(AssertUnwindSafe(|| case(seed, None))) {
            Ok(b) => {
                for (k, v) in b {
                    *bins.entry(k).or_default() += v;
                }
            }
            Err(_) => {
                let wave = wave_path("lookup_contents", seed);
                let _ = catch_unwind(AssertUnwindSafe(|| case(seed, Some(&wave))));
                panic!(
                    "lookup table contents: seed {seed:#x} failed (above; rerun with \
                     NLB_SEED={seed:#x} NLB_CONTENTS_CASES=1); waveform: {}",
                    wave.display()
                );
            }
        }
    }
    coverage::print(&bins, "lookup table-content bins");
    let mut required = contents::required_bins(profile());
    // The bench's own: every result at or after the idle latency was seen.
    required.push("verdict Forward".into());
    coverage::assert_hit(
        &bins,
        &required,
        "lookup table-content bins",
        &format!("first seed {first:#x}"),
    );
}
