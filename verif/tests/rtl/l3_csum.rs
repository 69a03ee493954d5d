//! `nlb_l3_csum` on its own against the golden model's share of the GUE-over-IPv6 UDP checksum,
//! `firmware_sim::action::payload_sum` (the ones'-complement sum of the frame's IP packet, the
//! function the model's editor uses).
//!
//! The block watches a stream it never stalls: `s_axis_tvalid` and `s_axis_tready` are both
//! inputs, so the bench drives random idle clocks and random back-pressure on them (with noise
//! on the data lines while nothing is offered, and a refused beat held unchanged). Every frame
//! must give exactly one `m_valid` pulse, 6 clocks after the edge that took its last beat; for
//! every frame the model parses as IP, `m_sum` must equal `payload_sum`.
//!
//! Directed cases: the packet's last aligned word solved so that the 32-bit word sum needs no,
//! one or two end-around carries and so that it folds to 0xFFFF and to 0x0001; every IP end
//! position around a beat boundary (63, 64, 65 bytes into a beat) for 0-2 VLAN tags and both
//! families; Ethernet padding after the packet; odd packet lengths; jumbo frames and the
//! largest IPv4 packet (65535 bytes). Then seeded random frames (`random_spec`, every kind the
//! parser knows). Bins printed, all required.

use firmware_sim::action::payload_sum;
use firmware_sim::parse::{parse, IpHeaders, Parsed};
use nlb_testkit::hex;
use nlb_verif::bench::seed_from_env;
use nlb_verif::frames::{flow_frame, random_spec, Ip, L4};
use nlb_verif::models::L3Csum;
use nlb_verif::top::frame_beats;
use nlb_verif::{Port, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::VecDeque;

/// Clocks from the edge that takes a frame's last beat to the clock whose settled outputs show
/// its `m_valid` (the module header).
const LATENCY: u64 = 6;

use nlb_verif::coverage::Bins;

struct Ports {
    data: Port,
    keep: Port,
    valid: Port,
    ready: Port,
    last: Port,
    m_valid: Port,
    m_sum: Port,
}

/// The 16-bit big-endian words of `b` summed without folding (a trailing odd byte is a high
/// byte).
fn word_sum(b: &[u8]) -> u64 {
    b.chunks(2)
        .map(|c| u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0)))
        .sum()
}

/// How many end-around carries folding the 32-bit word sum `s` to 16 bits takes.
fn carry_class(s: u64) -> &'static str {
    let once = (s & 0xffff) + (s >> 16);
    if s <= 0xffff {
        "no carry"
    } else if once <= 0xffff {
        "one end-around carry"
    } else {
        "two end-around carries"
    }
}

/// The frame's IP headers, when the model parses it as IP.
fn headers(frame: &[u8]) -> Option<IpHeaders> {
    match parse(frame) {
        Ok(Parsed::Ip(h)) => Some(h),
        _ => None,
    }
}

/// Rewrites the packet's last aligned 16-bit word (in the L4 payload) so that the packet's word
/// sum satisfies `ok`; false when no value does.
fn solve_last_word(frame: &mut [u8], h: &IpHeaders, ok: impl Fn(u64) -> bool) -> bool {
    let len = h.l3_end - h.l3_offset;
    let at = h.l3_offset + (len - 2) / 2 * 2;
    let l4_header = if h.protocol == 17 { 8 } else { 20 };
    if at < h.l4_offset + l4_header {
        return false;
    }
    frame[at] = 0;
    frame[at + 1] = 0;
    let base = word_sum(&frame[h.l3_offset..h.l3_end]);
    let odd_tail = at + 1 >= h.l3_end;
    for w in (0..=0xffffu64).rev() {
        // A word cut by the packet's end keeps only its high byte.
        let w = if odd_tail { w & 0xff00 } else { w };
        if ok(base + w) {
            frame[at] = (w >> 8) as u8;
            if !odd_tail {
                frame[at + 1] = w as u8;
            }
            return true;
        }
    }
    false
}

/// The directed frames, each with the bin it is meant for.
fn directed(rng: &mut StdRng) -> Vec<(Vec<u8>, String)> {
    let mut out = Vec::new();
    // Sums aimed at the fold's corners. "no carry" needs a small packet of small words: IPv6
    // (no header checksum) between ::1 and ::2.
    type Aim = fn(u64) -> bool;
    let aims: [(&str, Aim); 5] = [
        ("aim no carry", |s| s <= 0xffff),
        ("aim one end-around carry", |s| {
            s > 0xffff && (s & 0xffff) + (s >> 16) <= 0xffff
        }),
        ("aim two end-around carries", |s| {
            (s & 0xffff) + (s >> 16) > 0xffff
        }),
        ("aim folds to 0xffff", |s| s > 0 && s % 0xffff == 0),
        ("aim folds to 0x0001", |s| s % 0xffff == 1),
    ];
    for (name, aim) in aims {
        for i in 0..24 {
            let v6 = i % 2 == 1 || name == "aim no carry";
            let payload = rng.random_range(4..200);
            let mut spec = flow_frame(rng, v6, i % 3, i % 4 < 2, payload);
            if name == "aim no carry" {
                spec.ip = Some(Ip::V6 {
                    src: 1,
                    dst: 2,
                    tclass: 0,
                    flow: 0,
                    ext: Vec::new(),
                });
                spec.l4 = L4::Udp { sport: 1, dport: 2 };
                spec.payload = 2 + i % 3;
            }
            let mut f = spec.build();
            let h = headers(&f).expect("a directed frame parses");
            if name == "aim no carry" {
                // The counting pattern is small already; zero it so that only the header and
                // the solved word count.
                for b in &mut f[h.l4_offset + 8..h.l3_end] {
                    *b = 0;
                }
            }
            assert!(
                solve_last_word(&mut f, &h, aim),
                "l3_csum bench: no word solves {name} for {}",
                hex(&f)
            );
            out.push((f, name.to_string()));
        }
    }
    // Every IP end position around a beat boundary, per family and tag count, with and
    // without padding after the packet.
    for v6 in [false, true] {
        for tags in 0..3 {
            for end_in_beat in [62usize, 63, 64, 65, 66, 127, 128, 129] {
                let l3 = 14 + 4 * tags;
                let hdr = if v6 { 40 } else { 20 } + 8;
                let Some(payload) = end_in_beat.checked_sub(l3 + hdr) else {
                    continue;
                };
                let spec = flow_frame(rng, v6, tags, true, payload);
                let mut f = spec.build();
                out.push((f.clone(), format!("end at byte {end_in_beat}")));
                f.extend((0..rng.random_range(1..70)).map(|_| rng.random::<u8>()));
                out.push((f, "ethernet padding".into()));
            }
        }
    }
    // Long packets: jumbo frames and the largest IPv4 total length.
    for (v6, payload) in [
        (false, 8972),
        (true, 8952),
        (false, 65535 - 20 - 20),
        (true, 65535 - 20),
    ] {
        let mut f = flow_frame(rng, v6, 1, false, payload).build();
        for b in f.iter_mut().skip(80) {
            *b = 0xff;
        }
        out.push((f, "long packet, all ones".into()));
    }
    out
}

/// Streams `frames` through the block with random idle clocks (`idle`) and back-pressure
/// (`stall`); returns each frame's sum, checking the pulse count and latency.
fn stream(
    sim: &mut Verilated,
    p: &Ports,
    frames: &[Vec<u8>],
    rng: &mut StdRng,
    idle: f64,
    stall: f64,
) -> Result<Vec<u16>, String> {
    let mut beats: VecDeque<(usize, nlb_verif::axis::Beat)> = frames
        .iter()
        .enumerate()
        .flat_map(|(i, f)| frame_beats(f).into_iter().map(move |b| (i, b)))
        .collect();
    // Edge numbers that took each frame's last beat, in order, waiting for their pulse.
    let mut waiting: VecDeque<(usize, u64)> = VecDeque::new();
    let mut sums = Vec::with_capacity(frames.len());
    let mut offered = false;
    let noise = |rng: &mut StdRng| -> Vec<u32> { (0..16).map(|_| rng.random()).collect() };
    while sums.len() < frames.len() {
        if sim.cycle() > 40_000_000 {
            return Err("l3_csum bench: the run does not end".into());
        }
        // A beat once offered stays offered until taken (the stream rule), unchanged.
        if !offered && !beats.is_empty() {
            offered = !rng.random_bool(idle);
        }
        let ready = !rng.random_bool(stall);
        match (offered, beats.front()) {
            (true, Some((_, b))) => {
                sim.set(p.data, &b.data).map_err(|e| e.to_string())?;
                sim.set(p.keep, &b.keep).map_err(|e| e.to_string())?;
                sim.set_bit(p.last, b.last).map_err(|e| e.to_string())?;
            }
            _ => {
                sim.set(p.data, &noise(rng)).map_err(|e| e.to_string())?;
                sim.set(p.keep, &[rng.random(), rng.random()])
                    .map_err(|e| e.to_string())?;
                sim.set_bit(p.last, rng.random())
                    .map_err(|e| e.to_string())?;
            }
        }
        sim.set_bit(p.valid, offered).map_err(|e| e.to_string())?;
        sim.set_bit(p.ready, ready).map_err(|e| e.to_string())?;
        let edge = sim.cycle();
        if offered && ready {
            let (i, b) = beats.pop_front().expect("an offered beat");
            if b.last {
                waiting.push_back((i, edge));
            }
            offered = false;
        }
        sim.tick();
        // The clock whose settled outputs are read now (the header's convention).
        let edge = sim.cycle();
        if sim.get_bit(p.m_valid).map_err(|e| e.to_string())? {
            let sum = sim.get_u64(p.m_sum).map_err(|e| e.to_string())? as u16;
            let Some((i, took)) = waiting.pop_front() else {
                return Err(format!(
                    "l3_csum: m_valid at edge {edge} with no frame outstanding"
                ));
            };
            if edge - took != LATENCY {
                return Err(format!(
                    "l3_csum: frame {i} ({}) summed {} clocks after its last beat, not {LATENCY}",
                    hex(&frames[i]),
                    edge - took
                ));
            }
            sums.push(sum);
        } else if waiting
            .front()
            .is_some_and(|&(_, took)| edge - took >= LATENCY)
        {
            let (i, _) = waiting[0];
            return Err(format!(
                "l3_csum: no m_valid {LATENCY} clocks after frame {i}'s last beat ({})",
                hex(&frames[i])
            ));
        }
    }
    Ok(sums)
}

fn check(frames: &[(Vec<u8>, String)], sums: &[u16], bins: &mut Bins) -> Result<(), String> {
    for ((f, name), &got) in frames.iter().zip(sums) {
        let Some(h) = headers(f) else {
            *bins
                .entry("not IP (sum unused, pulse checked)".into())
                .or_default() += 1;
            continue;
        };
        let want = payload_sum(f, &h);
        if got != want {
            return Err(format!(
                "l3_csum: {name}: frame {} ({} bytes, IP bytes {}..{}): RTL m_sum {got:#06x}, \
                 model payload_sum {want:#06x}",
                hex(f),
                f.len(),
                h.l3_offset,
                h.l3_end
            ));
        }
        let s = word_sum(&f[h.l3_offset..h.l3_end]);
        for b in [
            name.clone(),
            carry_class(s).to_string(),
            format!("{} tags", h.vlan_tags),
            format!(
                "IPv{}",
                if h.family == firmware_sim::parse::Family::V4 {
                    4
                } else {
                    6
                }
            ),
        ] {
            *bins.entry(b).or_default() += 1;
        }
        if want == 0xffff {
            *bins.entry("sum 0xffff".into()).or_default() += 1;
        }
        if (h.l3_end - h.l3_offset) % 2 == 1 {
            *bins.entry("odd packet length".into()).or_default() += 1;
        }
    }
    Ok(())
}

fn run(seed: u64) -> Result<Bins, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<L3Csum>().map_err(|e| e.to_string())?;
    let port = |s: &str| sim.port(s).map_err(|e| e.to_string());
    let p = Ports {
        data: port("s_axis_tdata")?,
        keep: port("s_axis_tkeep")?,
        valid: port("s_axis_tvalid")?,
        ready: port("s_axis_tready")?,
        last: port("s_axis_tlast")?,
        m_valid: port("m_valid")?,
        m_sum: port("m_sum")?,
    };
    sim.reset(2).map_err(|e| e.to_string())?;
    let mut cases = directed(&mut rng);
    cases.extend((0..3000).map(|_| (random_spec(&mut rng).build(), "random".to_string())));
    let mut bins = Bins::new();
    // Back to back, then under idle clocks and back-pressure (the four corners and a mix).
    for (idle, stall) in [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.3, 0.3)] {
        let frames: Vec<Vec<u8>> = cases.iter().map(|(f, _)| f.clone()).collect();
        let sums = stream(&mut sim, &p, &frames, &mut rng, idle, stall)?;
        check(&cases, &sums, &mut bins)?;
    }
    Ok(bins)
}

#[test]
fn sums_match_the_model() {
    let seed = seed_from_env(0x13c5);
    let bins = run(seed).unwrap_or_else(|e| {
        panic!("{e}\n  seed {seed:#x}: replay with NLB_SEED={seed:#x} cargo test -p nlb-verif --test rtl l3_csum::")
    });
    for (k, v) in &bins {
        println!("{k:40} {v}");
    }
    let mut required: Vec<String> = [
        "no carry",
        "one end-around carry",
        "two end-around carries",
        "sum 0xffff",
        "odd packet length",
        "0 tags",
        "1 tags",
        "2 tags",
        "IPv4",
        "IPv6",
        "ethernet padding",
        "long packet, all ones",
        "not IP (sum unused, pulse checked)",
    ]
    .map(String::from)
    .to_vec();
    required.extend([62, 63, 64, 65, 66, 127, 128, 129].map(|e| format!("end at byte {e}")));
    nlb_verif::coverage::assert_hit(&bins, &required, "l3_csum bins", &format!("seed {seed:#x}"));
}
