//! `nlb_parser` against the golden model's parser (`firmware_sim::parse::parse`, the rules of
//! docs/pipeline.md section 2): random, mutated and malformed frames of every size, streamed
//! with random idle cycles and random back-pressure; every descriptor field is compared with
//! what the model parses from the same bytes, and every descriptor must come out exactly
//! `PARSER_LATENCY` clocks after its frame's last beat. Back-to-back 64-byte frames give one
//! descriptor per clock.

use firmware_sim::parse::{self, Family, Parsed};
use nlb_testkit::hex;
use nlb_verif::axis::{AxisSource, Beat};
use nlb_verif::bench::{seed_from_env, trace_always, wave_path, Agent, Bench};
use nlb_verif::frames::random_frame;
use nlb_verif::models::Parser;
use nlb_verif::{Port, VerifError, Verilated, PARSER_LATENCY};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::VecDeque;

/// Everything the descriptor says, normalised so that fields a verdict leaves undefined are
/// zero on both sides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Desc {
    /// `s_axis_tuser` of the frame's first beat.
    user: u8,
    len: u64,
    malformed: Option<u8>,
    not_ip: bool,
    ipv6: bool,
    vlan_tags: u8,
    l3_offset: u64,
    l3_end: u64,
    l4_offset: u64,
    tos: u8,
    dont_fragment: bool,
    protocol: u8,
    src: u128,
    dst: u128,
    fragment: bool,
    frag_offset: u16,
    ip_id: u32,
    has_ports: bool,
    src_port: u16,
    dst_port: u16,
    tcp_flags: u8,
    icmp_error: bool,
    inner: Option<(u8, u128, u128, u16, u16)>,
}

/// What the golden model parses from `frame`.
fn expected(frame: &[u8], user: u8) -> Desc {
    let mut d = Desc {
        user,
        len: frame.len() as u64,
        ..Desc::default()
    };
    match parse::parse(frame) {
        Err(reason) => d.malformed = Some(reason.value() as u8),
        Ok(Parsed::NotIp) => d.not_ip = true,
        Ok(Parsed::Ip(h)) => {
            d.ipv6 = h.family == Family::V6;
            d.vlan_tags = h.vlan_tags;
            d.l3_offset = h.l3_offset as u64;
            d.l3_end = h.l3_end as u64;
            d.l4_offset = h.l4_offset as u64;
            d.tos = h.tos;
            d.dont_fragment = h.dont_fragment;
            d.protocol = h.protocol;
            d.src = h.src;
            d.dst = h.dst;
            d.fragment = h.is_fragment;
            d.frag_offset = h.fragment_offset;
            d.ip_id = h.ip_id;
            d.has_ports = h.has_ports;
            d.src_port = h.src_port;
            d.dst_port = h.dst_port;
            d.tcp_flags = h.tcp_flags;
            d.icmp_error = h.icmp_error;
            d.inner = h
                .icmp_inner
                .map(|i| (i.protocol, i.src, i.dst, i.src_port, i.dst_port));
        }
    }
    d
}

/// The descriptor ports.
struct DescPorts {
    valid: Port,
    fields: Vec<(&'static str, Port)>,
}

const FIELDS: &[&str] = &[
    "m_user",
    "m_len",
    "m_malformed",
    "m_reason",
    "m_not_ip",
    "m_ipv6",
    "m_vlan_tags",
    "m_l3_offset",
    "m_l3_end",
    "m_l4_offset",
    "m_tos",
    "m_dont_fragment",
    "m_protocol",
    "m_src",
    "m_dst",
    "m_fragment",
    "m_frag_offset",
    "m_ip_id",
    "m_has_ports",
    "m_src_port",
    "m_dst_port",
    "m_tcp_flags",
    "m_icmp_error",
    "m_inner_valid",
    "m_inner_protocol",
    "m_inner_src",
    "m_inner_dst",
    "m_inner_src_port",
    "m_inner_dst_port",
];

fn u128_of(w: &[u32]) -> u128 {
    w.iter()
        .enumerate()
        .fold(0u128, |acc, (i, &x)| acc | u128::from(x) << (32 * i))
}

impl DescPorts {
    fn new(sim: &Verilated) -> Result<DescPorts, VerifError> {
        Ok(DescPorts {
            valid: sim.port("m_valid")?,
            fields: FIELDS
                .iter()
                .map(|&n| sim.port(n).map(|p| (n, p)))
                .collect::<Result<_, _>>()?,
        })
    }

    fn read(&self, sim: &mut Verilated) -> Result<Desc, VerifError> {
        let mut v = std::collections::HashMap::new();
        for (name, port) in &self.fields {
            v.insert(*name, u128_of(&sim.get_words(*port)?));
        }
        let g = |n: &str| v.get(n).copied().unwrap_or(0);
        let mut d = Desc {
            user: g("m_user") as u8,
            len: g("m_len") as u64,
            ..Desc::default()
        };
        if g("m_malformed") != 0 {
            d.malformed = Some(g("m_reason") as u8);
        } else if g("m_not_ip") != 0 {
            d.not_ip = true;
        } else {
            d.ipv6 = g("m_ipv6") != 0;
            d.vlan_tags = g("m_vlan_tags") as u8;
            d.l3_offset = g("m_l3_offset") as u64;
            d.l3_end = g("m_l3_end") as u64;
            d.l4_offset = g("m_l4_offset") as u64;
            d.tos = g("m_tos") as u8;
            d.dont_fragment = g("m_dont_fragment") != 0;
            d.protocol = g("m_protocol") as u8;
            d.src = g("m_src");
            d.dst = g("m_dst");
            d.fragment = g("m_fragment") != 0;
            d.frag_offset = g("m_frag_offset") as u16;
            d.ip_id = g("m_ip_id") as u32;
            d.has_ports = g("m_has_ports") != 0;
            d.src_port = g("m_src_port") as u16;
            d.dst_port = g("m_dst_port") as u16;
            d.tcp_flags = g("m_tcp_flags") as u8;
            d.icmp_error = g("m_icmp_error") != 0;
            if g("m_inner_valid") != 0 {
                d.inner = Some((
                    g("m_inner_protocol") as u8,
                    g("m_inner_src"),
                    g("m_inner_dst"),
                    g("m_inner_src_port") as u16,
                    g("m_inner_dst_port") as u16,
                ));
            }
        }
        Ok(d)
    }
}

/// Random back-pressure on the parser's `s_axis_tready` (an input: its user accepts beats).
struct ReadyDriver {
    port: Port,
    stall: f64,
}

impl Agent for ReadyDriver {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        let ready = !rng.random_bool(self.stall);
        sim.set_bit(self.port, ready)
    }

    fn observe(&mut self, _sim: &mut Verilated) -> Result<(), VerifError> {
        Ok(())
    }
}

/// Records the cycle each frame's last beat is taken and every descriptor with its cycle.
struct Monitor {
    ports: DescPorts,
    valid_in: Port,
    ready_in: Port,
    last_in: Port,
    last_taken: VecDeque<u64>,
    seen: Vec<(u64, Desc)>,
}

impl Agent for Monitor {
    fn drive(&mut self, _sim: &mut Verilated, _rng: &mut StdRng) -> Result<(), VerifError> {
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        if sim.get_bit(self.valid_in)?
            && sim.get_bit(self.ready_in)?
            && sim.get_bit(self.last_in)?
        {
            self.last_taken.push_back(sim.cycle());
        }
        if sim.get_bit(self.ports.valid)? {
            let d = self.ports.read(sim)?;
            self.seen.push((sim.cycle(), d));
        }
        Ok(())
    }
}

/// The first-beat sideband of frame `i` (the other beats carry other values).
fn user_of(i: usize) -> u8 {
    (i as u8).wrapping_mul(37) ^ 0x5a
}

/// The beats of a frame: 64 bytes each, byte i of the beat in bits 8i+7..8i, tkeep partial
/// on the last beat only, `user` on the first beat (noise on the others). An empty frame is
/// one beat with no bytes.
fn beats(frame: &[u8], user: u8) -> Vec<Beat> {
    let chunks: Vec<&[u8]> = if frame.is_empty() {
        vec![&[][..]]
    } else {
        frame.chunks(64).collect()
    };
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut data = vec![0u32; 16];
            for (j, b) in c.iter().enumerate() {
                data[j / 4] |= u32::from(*b) << (8 * (j % 4));
            }
            let keep_bits: u64 = if c.len() == 64 {
                u64::MAX
            } else {
                (1u64 << c.len()) - 1
            };
            Beat {
                data,
                keep: vec![keep_bits as u32, (keep_bits >> 32) as u32],
                last: i + 1 == n,
                user: vec![u32::from(if i == 0 { user } else { !user ^ i as u8 })],
            }
        })
        .collect()
}

struct Mismatch(String, u64);

const WAVE_WINDOW: u64 = 200;

/// Streams `frames` through the parser; checks every descriptor and its latency. Returns the
/// clocks from the first beat to the last descriptor.
fn run(
    frames: &[Vec<u8>],
    idle: f64,
    stall: f64,
    seed: u64,
    wave: Option<(&std::path::Path, u64)>,
) -> Result<Result<u64, Mismatch>, VerifError> {
    let mut sim = Verilated::new::<Parser>()?;
    sim.reset(2)?;
    let mut source = AxisSource::new(&sim, "s_axis", idle)?;
    for (i, f) in frames.iter().enumerate() {
        for b in beats(f, user_of(i)) {
            source.push(b);
        }
    }
    let mut ready = ReadyDriver {
        port: sim.port("s_axis_tready")?,
        stall,
    };
    let mut mon = Monitor {
        ports: DescPorts::new(&sim)?,
        valid_in: sim.port("s_axis_tvalid")?,
        ready_in: sim.port("s_axis_tready")?,
        last_in: sim.port("s_axis_tlast")?,
        last_taken: VecDeque::new(),
        seen: Vec::new(),
    };
    let mut bench = Bench::new(sim, seed);
    let start = bench.sim.cycle();
    let total_beats: usize = source.pending();
    let limit = start + (total_beats as u64) * 20 + 200;
    let mut checked = 0usize;
    while checked < frames.len() {
        if let Some((path, from)) = wave {
            if bench.sim.cycle() == from && bench.sim.trace_path().is_none() {
                bench.sim.trace_to(path)?;
            }
        }
        if bench.sim.cycle() > limit {
            return Ok(Err(Mismatch(
                format!("only {checked} of {} descriptors came out", frames.len()),
                bench.sim.cycle(),
            )));
        }
        bench.step(&mut [&mut ready, &mut source, &mut mon])?;
        for (cycle, got) in mon.seen.drain(..) {
            let Some(frame) = frames.get(checked) else {
                return Ok(Err(Mismatch(
                    "a descriptor with no frame".to_string(),
                    cycle,
                )));
            };
            let taken = mon.last_taken.pop_front().unwrap_or(u64::MAX);
            let want = expected(frame, user_of(checked));
            let latency = cycle.wrapping_sub(taken);
            if got != want || latency != PARSER_LATENCY {
                return Ok(Err(Mismatch(
                    format!(
                        "frame #{checked} ({} bytes) {}\n  RTL   {got:?} after {latency} clocks\n  model {want:?} after {PARSER_LATENCY}",
                        frame.len(),
                        hex(frame)
                    ),
                    cycle,
                )));
            }
            checked += 1;
        }
    }
    Ok(Ok(bench.sim.cycle() - start))
}

fn check(name: &str, frames: &[Vec<u8>], idle: f64, stall: f64, seed: u64) -> u64 {
    let wave = wave_path(name, seed);
    let first = run(
        frames,
        idle,
        stall,
        seed,
        trace_always().then_some((wave.as_path(), 0)),
    )
    .expect("simulation harness");
    match first {
        Ok(cycles) => cycles,
        Err(Mismatch(what, cycle)) => {
            let from = cycle.saturating_sub(WAVE_WINDOW);
            let replay = run(frames, idle, stall, seed, Some((wave.as_path(), from)));
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

fn frame_count() -> usize {
    std::env::var("NLB_PARSER_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000)
        .max(1)
}

#[test]
fn random_and_malformed_frames_match_the_model() {
    let seed = seed_from_env(0x9a45_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let frames: Vec<Vec<u8>> = (0..frame_count())
        .map(|_| random_frame(&mut rng, 0.35))
        .collect();
    // The corpus must reach every reason the parser can give, and the ICMP quote paths.
    let mut reasons = std::collections::BTreeSet::new();
    let (mut quotes, mut v6_ext, mut later) = (0, 0, 0);
    for f in &frames {
        match parse::parse(f) {
            Err(r) => {
                reasons.insert(r.name());
            }
            Ok(Parsed::NotIp) => {
                reasons.insert("NOT_IP");
            }
            Ok(Parsed::Ip(h)) => {
                quotes += usize::from(h.icmp_inner.is_some());
                v6_ext += usize::from(h.family == Family::V6 && h.l4_offset > h.l3_offset + 40);
                later += usize::from(h.is_later_fragment());
            }
        }
    }
    for r in [
        "RUNT",
        "TRUNCATED_L2",
        "TOO_MANY_VLANS",
        "TRUNCATED_L3",
        "BAD_IP_VERSION",
        "BAD_IHL",
        "BAD_IP_LENGTH",
        "BAD_IP_CHECKSUM",
        "EXT_CHAIN_TOO_LONG",
        "TRUNCATED_L4",
        "NOT_IP",
    ] {
        assert!(
            reasons.contains(r),
            "the random corpus never gives {r} (seed {seed:#x}): {reasons:?}"
        );
    }
    assert!(
        quotes > 0 && v6_ext > 0 && later > 0,
        "corpus lacks quotes/ext/fragments"
    );
    let idle = 0.05 + 0.4 * rng.random::<f64>();
    let stall = 0.05 + 0.4 * rng.random::<f64>();
    check("parser_random", &frames, idle, stall, seed);
}

#[test]
fn every_size_from_0_to_300_and_jumbo() {
    let seed = seed_from_env(0x9a45_0002);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut frames = Vec::new();
    // Every length from 0 to 300 bytes, cut from random well-formed frames padded long.
    for len in 0..=300usize {
        for _ in 0..3 {
            let mut f = random_frame(&mut rng, 0.0);
            f.resize(f.len().max(len), 0x5a);
            f.truncate(len);
            frames.push(f);
        }
    }
    // Long frames up to 9018 bytes and a few beyond (lengths checked against the whole frame).
    for _ in 0..60 {
        let mut f = random_frame(&mut rng, 0.2);
        let len = rng.random_range(300..=9100);
        f.resize(len, 0xa5);
        frames.push(f);
    }
    check("parser_sizes", &frames, 0.2, 0.2, seed);
}

#[test]
fn back_to_back_minimum_frames_one_descriptor_per_clock() {
    let seed = seed_from_env(0x9a45_0003);
    let mut rng = StdRng::seed_from_u64(seed);
    let n = 5000;
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let mut f = random_frame(&mut rng, 0.1);
            f.resize(64, 0);
            f
        })
        .collect();
    let cycles = check("parser_line_rate", &frames, 0.0, 0.0, seed);
    // One beat per frame, no stalls: the run takes the frames plus the latency.
    assert_eq!(
        cycles,
        n as u64 + PARSER_LATENCY,
        "64-byte frames back to back must give one descriptor per clock"
    );
}
