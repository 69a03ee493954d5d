//! `nlb_editor` on its own against the golden model's editor: `firmware_sim::action::write_frame`
//! for every FORWARD (L2 DSR, IPIP and GUE, outer IPv4 and IPv6, with both checksums) and
//! `firmware_sim::device::Punted::of` for every PUNT (header beat and the frame's first 9728
//! bytes); PASS sends the frame unchanged on the pass stream (docs/pipeline.md section 9);
//! DROP sends nothing.
//!
//! The bench plays the blocks around the editor in `nlb_top`: the lookup's results (one pulse
//! per frame, fields as the lookup gives them; the ctrl settings change with every result and
//! carry noise in between, since the editor samples them with the result), the payload sums of
//! `nlb_l3_csum` (from the model's `payload_sum`, a few clocks before each result), the packet
//! FIFO's frames (random idle clocks) and random back-pressure on the three output streams;
//! results are held back while `jobs` is high, as the top's admission control does. Every
//! transmitted frame and punt record must equal the model's and every passed frame the frame
//! given, in order, and the streams must
//! keep the AXI-Stream rules.
//!
//! Directed cases: outputs of 9017 and 9018 bytes per delivery x outer family x 0-2 VLAN tags
//! (the largest frame that may be sent; one byte more is a TOO_BIG drop the editor never sees);
//! minimum and padded frames; the outer IPv4 checksum solved to 0x0000 and 0x0001 (0xFFFF cannot occur) and the
//! GUE-over-IPv6 UDP checksum to 0xFFFF (computing to 0 or 0xFFFF); outer source prefixes of
//! length 0, 1, full and one short of full; punts of 0, 1, 63, 64, 65, 9727, 9728, 9729,
//! 16383, 16384 and 20000 bytes (the window cut and the 14-bit length clamp), rule ids 0 and
//! 4095, with and without a rule. Then seeded random packets. Bins printed, all required.

use firmware_sim::action::{output_len, payload_sum, write_frame, MAX_FRAME};
use firmware_sim::device::Punted;
use firmware_sim::parse::{parse, Family, IpHeaders, Parsed};
use firmware_sim::pipeline::{CtOutcome, PacketResult};
use nlb_hw::enums::{Delivery, Reason, Verdict};
use nlb_hw::layouts::BackendEntry;
use nlb_hw::NicSettings;
use nlb_testkit::hex;
use nlb_verif::axis::{AxisPorts, AxisSink, AxisSource};
use nlb_verif::bench::{seed_from_env, Bench};
use nlb_verif::frames::{flow_frame, random_frame};
use nlb_verif::models::Editor;
use nlb_verif::top::{frame_beats, take_frames, take_punts, PuntedFrame};
use nlb_verif::{Port, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use nlb_verif::coverage::Bins;

/// Jobs the bench lets wait (the editor's job FIFO holds 64; the top keeps it from filling).
const MAX_JOBS: u64 = 48;

/// One packet as the editor sees it.
#[derive(Debug, Clone)]
struct Pkt {
    frame: Vec<u8>,
    res: PacketResult,
    headers: Option<IpHeaders>,
    delivery: Delivery,
    backend: BackendEntry,
    settings: NicSettings,
    name: String,
}

impl Pkt {
    fn describe(&self) -> String {
        let f = &self.frame;
        format!(
            "{} ({:?}, {:?} to {} backend, {} bytes: {}{})",
            self.name,
            self.res.verdict,
            self.delivery,
            if self.backend.is_ipv6 { "IPv6" } else { "IPv4" },
            f.len(),
            hex(&f[..f.len().min(96)]),
            if f.len() > 96 { "..." } else { "" }
        )
    }

    /// The frame the model transmits (FORWARD).
    fn expected_tx(&self) -> Vec<u8> {
        let h = self.headers.as_ref().expect("a forwarded frame parses");
        let mut out = vec![0u8; MAX_FRAME];
        let n = write_frame(
            &self.frame,
            h,
            self.delivery,
            &self.backend,
            &self.settings,
            self.res.flow_hash,
            &mut out,
        );
        out.truncate(n);
        out
    }
}

fn headers(frame: &[u8]) -> Option<IpHeaders> {
    match parse(frame) {
        Ok(Parsed::Ip(h)) => Some(h),
        _ => None,
    }
}

fn random_settings(rng: &mut StdRng) -> NicSettings {
    let v4_lens = [0u8, 1, 31, 32, rng.random_range(0..=32)];
    let v6_lens = [0u8, 1, 127, 128, rng.random_range(0..=128)];
    NicSettings {
        local_mac: rng.random_range(0..1u64 << 48),
        gue_port: rng.random(),
        outer_src_v4: rng.random(),
        outer_src_v4_len: v4_lens[rng.random_range(0..v4_lens.len())],
        outer_src_v6: rng.random(),
        outer_src_v6_len: v6_lens[rng.random_range(0..v6_lens.len())],
        ..NicSettings::default()
    }
}

fn random_backend(rng: &mut StdRng, v6: bool) -> BackendEntry {
    BackendEntry {
        valid: true,
        is_ipv6: v6,
        addr: if v6 {
            rng.random()
        } else {
            0xffff_0000_0000 | u128::from(rng.random::<u32>())
        },
        mac: rng.random_range(0..1u64 << 48),
    }
}

fn result(verdict: Verdict, reason: Reason, frame: &[u8], rng: &mut StdRng) -> PacketResult {
    let rule = match rng.random_range(0..4) {
        0 => None,
        1 => Some(0),
        2 => Some(4095),
        _ => Some(rng.random_range(0..4096)),
    };
    PacketResult {
        verdict,
        reason,
        bank: rng.random_range(0..2),
        rule,
        pool: None,
        backend: None,
        key: None,
        conntrack: CtOutcome::None,
        ct_index: None,
        flow_hash: rng.random(),
        ip_id: rng.random(),
        frame_len: frame.len(),
        out_len: 0,
        event: None,
    }
}

/// A FORWARD of `frame` (which must parse as IP): the lookup's result with the frame's headers;
/// a result the lookup would turn into a TOO_BIG drop comes out as that drop.
fn forward(
    rng: &mut StdRng,
    frame: Vec<u8>,
    delivery: Delivery,
    outer_v6: bool,
    name: String,
) -> Pkt {
    let h = headers(&frame).expect("a forwarded frame parses");
    let backend = random_backend(rng, outer_v6);
    let mut res = result(Verdict::Forward, Reason::Forwarded, &frame, rng);
    res.ip_id = h.ip_id;
    res.out_len = output_len(frame.len(), &h, delivery, &backend);
    if res.out_len > MAX_FRAME {
        res.verdict = Verdict::Drop;
        res.reason = Reason::TooBig;
        res.out_len = 0;
    }
    Pkt {
        frame,
        res,
        headers: Some(h),
        delivery,
        backend,
        settings: random_settings(rng),
        name,
    }
}

/// A frame whose output under `delivery` to an `outer_v6` backend is `out_len` bytes.
fn frame_for_output(
    rng: &mut StdRng,
    out_len: usize,
    delivery: Delivery,
    outer_v6: bool,
    v6: bool,
    tags: usize,
) -> Vec<u8> {
    let l3 = 14 + 4 * tags;
    let ip_hdr = if v6 { 40 } else { 20 };
    let added = match delivery {
        Delivery::L2Dsr => 0,
        Delivery::Ipip => {
            if outer_v6 {
                40
            } else {
                20
            }
        }
        Delivery::Gue => {
            if outer_v6 {
                48
            } else {
                28
            }
        }
    };
    let payload = out_len - added - l3 - ip_hdr - 8;
    flow_frame(rng, v6, tags, true, payload).build()
}

/// Searches flow hashes (the outer source's host bits, the flow label, the GUE source port)
/// for one that makes the model's output checksum at `at` equal `want`.
fn aim_checksum(p: &mut Pkt, at: usize, want: u16) -> bool {
    let h = p.headers.expect("a forwarded frame parses");
    let mut out = vec![0u8; p.res.out_len];
    for hash in 0..(1u32 << 20) {
        p.res.flow_hash = hash.wrapping_mul(0x9e37_79b1);
        write_frame(
            &p.frame,
            &h,
            p.delivery,
            &p.backend,
            &p.settings,
            p.res.flow_hash,
            &mut out,
        );
        if u16::from_be_bytes([out[at], out[at + 1]]) == want {
            return true;
        }
    }
    false
}

fn directed(rng: &mut StdRng) -> Vec<Pkt> {
    let mut pkts = Vec::new();
    for delivery in Delivery::ALL {
        for outer_v6 in [false, true] {
            for tags in 0..3 {
                for out_len in [MAX_FRAME - 1, MAX_FRAME, MAX_FRAME + 1] {
                    let v6 = rng.random();
                    let f = frame_for_output(rng, out_len, delivery, outer_v6, v6, tags);
                    pkts.push(forward(
                        rng,
                        f,
                        delivery,
                        outer_v6,
                        format!("output of {out_len} bytes"),
                    ));
                }
                // Minimum frames (padded to 60 bytes) and one-beat frames.
                for payload in [0usize, 1, 2, 3] {
                    let (v6, udp) = (rng.random(), rng.random());
                    let f = flow_frame(rng, v6, tags, udp, payload).build();
                    pkts.push(forward(rng, f, delivery, outer_v6, "minimum frame".into()));
                }
            }
        }
    }
    // The outer IPv4 checksum solved to 0x0000 and 0x0001, the GUE-over-IPv6 UDP checksum to
    // 0xFFFF, with a short source prefix so that the flow hash moves the sums.
    for (delivery, outer_v6, want, name) in [
        (
            Delivery::Ipip,
            false,
            0x0000u16,
            "outer IPv4 checksum 0x0000",
        ),
        (Delivery::Gue, false, 0x0001, "outer IPv4 checksum 0x0001"),
        (Delivery::Gue, true, 0xffff, "GUE UDP checksum 0xffff"),
    ] {
        for tags in 0..3 {
            let (v6, payload) = (rng.random(), rng.random_range(0..100));
            let f = flow_frame(rng, v6, tags, true, payload).build();
            let mut p = forward(rng, f, delivery, outer_v6, name.into());
            p.settings.outer_src_v4_len = 8;
            p.settings.outer_src_v6_len = 96;
            let l3 = 14 + 4 * tags;
            let at = if outer_v6 { l3 + 40 + 6 } else { l3 + 10 };
            assert!(
                aim_checksum(&mut p, at, want),
                "editor bench: cannot aim {name}"
            );
            pkts.push(p);
        }
    }
    // Punts around the window cut and the length clamp.
    for len in [0usize, 1, 63, 64, 65, 9727, 9728, 9729, 16383, 16384, 20000] {
        let frame: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let reason = Reason::ALL[rng.random_range(0..Reason::ALL.len())];
        pkts.push(Pkt {
            res: result(Verdict::Punt, reason, &frame, rng),
            frame,
            headers: None,
            delivery: Delivery::L2Dsr,
            backend: random_backend(rng, false),
            settings: random_settings(rng),
            name: format!("punt of {len} bytes"),
        });
    }
    pkts
}

fn random_packet(rng: &mut StdRng) -> Pkt {
    let pick = rng.random_range(0..10);
    if pick < 6 {
        let (v6, tags, udp, payload) = (
            rng.random(),
            rng.random_range(0..3),
            rng.random(),
            rng.random_range(0..3000),
        );
        let f = if rng.random_bool(0.1) {
            flow_frame(rng, v6, tags, udp, payload).build()
        } else {
            loop {
                let f = random_frame(rng, 0.0);
                if headers(&f).is_some() {
                    break f;
                }
            }
        };
        let delivery = Delivery::ALL[rng.random_range(0..3)];
        let outer_v6 = rng.random();
        return forward(rng, f, delivery, outer_v6, "random forward".into());
    }
    let frame = random_frame(rng, 0.3);
    let (verdict, name) = match pick {
        6 | 7 => (Verdict::Punt, "random punt"),
        8 => (Verdict::Drop, "random drop"),
        _ => (Verdict::Pass, "random pass"),
    };
    let reason = Reason::ALL[rng.random_range(0..Reason::ALL.len())];
    Pkt {
        res: result(verdict, reason, &frame, rng),
        headers: headers(&frame),
        frame,
        delivery: Delivery::ALL[rng.random_range(0..3)],
        backend: {
            let v6 = rng.random();
            random_backend(rng, v6)
        },
        settings: random_settings(rng),
        name: name.into(),
    }
}

/// The editor's input ports other than the frame stream.
struct ResPorts {
    valid: Port,
    fields: Vec<(Port, &'static str)>,
    csum_valid: Port,
    csum: Port,
    jobs: Port,
}

fn words128(v: u128) -> Vec<u32> {
    (0..4).map(|i| (v >> (32 * i)) as u32).collect()
}

/// The value of each result and ctrl field for `p` (by port name).
fn field_value(p: &Pkt, name: &str) -> u128 {
    let h = p.headers.as_ref();
    let r = &p.res;
    let s = &p.settings;
    match name {
        "s_res_verdict" => u128::from(r.verdict.value()),
        "s_res_reason" => u128::from(r.reason.value()),
        "s_res_bank" => u128::from(r.bank),
        "s_res_rule_valid" => u128::from(r.rule.is_some()),
        "s_res_rule" => u128::from(r.rule.unwrap_or(0xabc)),
        "s_res_flow_hash" => u128::from(r.flow_hash),
        "s_res_ip_id" => u128::from(r.ip_id),
        "s_res_len" => r.frame_len as u128,
        "s_res_out_len" => r.out_len as u128,
        "s_res_delivery" => u128::from(p.delivery.value()),
        "s_res_be_ipv6" => u128::from(p.backend.is_ipv6),
        "s_res_be_addr" => p.backend.addr,
        "s_res_be_mac" => u128::from(p.backend.mac),
        "s_res_ipv6" => u128::from(h.is_some_and(|h| h.family == Family::V6)),
        "s_res_l3_offset" => h.map_or(0x1f, |h| h.l3_offset as u128),
        "s_res_l3_end" => h.map_or(0x1_2345, |h| h.l3_end as u128),
        "s_res_tos" => u128::from(h.map_or(0x5a, |h| h.tos)),
        "s_res_dont_fragment" => u128::from(h.is_some_and(|h| h.dont_fragment)),
        "ctrl_local_mac" => u128::from(s.local_mac),
        "ctrl_gue_port" => u128::from(s.gue_port),
        "ctrl_outer_src_v4" => u128::from(s.outer_src_v4),
        "ctrl_outer_src_v4_len" => u128::from(s.outer_src_v4_len),
        "ctrl_outer_src_v6" => s.outer_src_v6,
        // nlb_regs gives the editor the prefix's length as a mask of that many leading ones.
        "ctrl_outer_src_v6_mask" => match s.outer_src_v6_len {
            0 => 0,
            len => u128::MAX << (128 - u32::from(len.min(128))),
        },
        other => unreachable!("no field {other}"),
    }
}

const FIELDS: [&str; 24] = [
    "s_res_verdict",
    "s_res_reason",
    "s_res_bank",
    "s_res_rule_valid",
    "s_res_rule",
    "s_res_flow_hash",
    "s_res_ip_id",
    "s_res_len",
    "s_res_out_len",
    "s_res_delivery",
    "s_res_be_ipv6",
    "s_res_be_addr",
    "s_res_be_mac",
    "s_res_ipv6",
    "s_res_l3_offset",
    "s_res_l3_end",
    "s_res_tos",
    "s_res_dont_fragment",
    "ctrl_local_mac",
    "ctrl_gue_port",
    "ctrl_outer_src_v4",
    "ctrl_outer_src_v4_len",
    "ctrl_outer_src_v6",
    "ctrl_outer_src_v6_mask",
];

fn set(sim: &mut Verilated, port: Port, v: u128) -> Result<(), String> {
    let w = words128(v);
    sim.set(port, &w[..port.words]).map_err(|e| e.to_string())
}

fn run(seed: u64, pkts: &[Pkt], idle: f64, backpressure: f64) -> Result<(), String> {
    let sim = Verilated::new::<Editor>().map_err(|e| e.to_string())?;
    let mut bench = Bench::new(sim, seed);
    bench.sim.reset(2).map_err(|e| e.to_string())?;
    let sim = &bench.sim;
    let port = |n: &str| sim.port(n).map_err(|e| e.to_string());
    let ports = ResPorts {
        valid: port("s_res_valid")?,
        fields: FIELDS
            .iter()
            .map(|&n| port(n).map(|p| (p, n)))
            .collect::<Result<_, _>>()?,
        csum_valid: port("s_csum_valid")?,
        csum: port("s_csum")?,
        jobs: port("jobs")?,
    };
    let mut frames = AxisSource::on(
        AxisPorts::plain(&bench.sim, "s_frame").map_err(|e| e.to_string())?,
        idle,
    );
    for p in pkts {
        for b in frame_beats(&p.frame) {
            frames.push(b);
        }
    }
    let mut tx = AxisSink::new(&bench.sim, "m_axis_tx", backpressure).map_err(|e| e.to_string())?;
    let mut punt =
        AxisSink::new(&bench.sim, "m_axis_punt", backpressure).map_err(|e| e.to_string())?;
    let mut pass =
        AxisSink::new(&bench.sim, "m_axis_pass", backpressure).map_err(|e| e.to_string())?;
    let want_pass: Vec<(usize, &[u8])> = pkts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.res.verdict == Verdict::Pass)
        .map(|(i, p)| (i, p.frame.as_slice()))
        .collect();
    let (mut got_pass, mut pass_beats): (Vec<Vec<u8>>, Vec<_>) = (Vec::new(), Vec::new());
    let want_tx: Vec<(usize, Vec<u8>)> = pkts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.res.verdict == Verdict::Forward)
        .map(|(i, p)| (i, p.expected_tx()))
        .collect();
    let want_punt: Vec<(usize, Punted)> = pkts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.res.verdict == Verdict::Punt)
        .map(|(i, p)| (i, Punted::of(&p.res, &p.frame)))
        .collect();
    let (mut got_tx, mut got_punt): (Vec<Vec<u8>>, Vec<PuntedFrame>) = (Vec::new(), Vec::new());
    let (mut tx_beats, mut punt_beats) = (Vec::new(), Vec::new());
    let (mut next_csum, mut next_res) = (0usize, 0usize);
    let mut csum_edge = vec![0u64; pkts.len()];
    let mut quiet = 0u64;
    let (mut checked_tx, mut checked_punt) = (0usize, 0usize);
    loop {
        let edge = bench.sim.cycle();
        if edge > 20_000_000 {
            return Err("editor: the run does not end".into());
        }
        // The payload sum a few clocks before the result, as nlb_l3_csum gives it.
        let csum_now =
            next_csum < pkts.len() && next_csum - next_res < 6 && bench.rng.random_bool(0.7);
        bench
            .sim
            .set_bit(ports.csum_valid, csum_now)
            .map_err(|e| e.to_string())?;
        let csum = if csum_now {
            let p = &pkts[next_csum];
            csum_edge[next_csum] = edge;
            next_csum += 1;
            p.headers
                .as_ref()
                .map_or(bench.rng.random(), |h| payload_sum(&p.frame, h))
        } else {
            bench.rng.random()
        };
        bench
            .sim
            .set_u64(ports.csum, u64::from(csum))
            .map_err(|e| e.to_string())?;
        let jobs = bench.sim.get_u64(ports.jobs).map_err(|e| e.to_string())?;
        let res_now = next_res < next_csum
            && csum_edge[next_res] + 2 <= edge
            && jobs < MAX_JOBS
            && bench.rng.random_bool(0.6);
        bench
            .sim
            .set_bit(ports.valid, res_now)
            .map_err(|e| e.to_string())?;
        for &(port, name) in &ports.fields {
            let v = if res_now {
                field_value(&pkts[next_res], name)
            } else {
                bench.rng.random()
            };
            set(&mut bench.sim, port, v)?;
        }
        if res_now {
            next_res += 1;
        }
        bench
            .step(&mut [&mut frames, &mut tx, &mut punt, &mut pass])
            .map_err(|e| e.to_string())?;
        tx_beats.extend(tx.take());
        punt_beats.extend(punt.take());
        pass_beats.extend(pass.take());
        got_pass.extend(take_frames(&mut pass_beats));
        if let Some(k) =
            (0..got_pass.len()).find(|&k| want_pass.get(k).map(|w| w.1) != Some(&got_pass[k][..]))
        {
            return Err(match want_pass.get(k) {
                Some((i, want)) => format!(
                    "editor: packet {i}, {}: passed frame is not the frame given\n  RTL   {}\n  given {}",
                    pkts[*i].describe(),
                    hex(&got_pass[k]),
                    hex(want)
                ),
                None => format!(
                    "editor: passed frame {k} beyond the {} expected: {}",
                    want_pass.len(),
                    hex(&got_pass[k])
                ),
            });
        }
        got_tx.extend(take_frames(&mut tx_beats));
        got_punt.extend(take_punts(&mut punt_beats).map_err(|e| e.to_string())?);
        while checked_tx < got_tx.len() {
            let k = checked_tx;
            let got = &got_tx[k];
            let Some((i, want)) = want_tx.get(k) else {
                return Err(format!(
                    "editor: transmitted frame {k} beyond the {} expected: {}",
                    want_tx.len(),
                    hex(got)
                ));
            };
            if got != want {
                let at = got
                    .iter()
                    .zip(want)
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(want.len()));
                return Err(format!(
                    "editor: packet {i}, {}: transmitted frame differs at byte {at} \
                     (RTL {} bytes, model {} bytes)\n  RTL   {}\n  model {}",
                    pkts[*i].describe(),
                    got.len(),
                    want.len(),
                    hex(&got[at.saturating_sub(16).min(got.len())..got.len().min(at + 48)]),
                    hex(&want[at.saturating_sub(16).min(want.len())..want.len().min(at + 48)]),
                ));
            }
            checked_tx += 1;
        }
        while checked_punt < got_punt.len() {
            let k = checked_punt;
            let got = &got_punt[k];
            let Some((i, want)) = want_punt.get(k) else {
                return Err(format!(
                    "editor: punt {k} beyond the {} expected: {:?}",
                    want_punt.len(),
                    got.header
                ));
            };
            if got.header != want.header || got.frame != want.frame {
                return Err(format!(
                    "editor: packet {i}, {}: punt record differs\n  RTL   header {:?}, {} bytes\n  \
                     model header {:?}, {} bytes",
                    pkts[*i].describe(),
                    got.header,
                    got.frame.len(),
                    want.header,
                    want.frame.len()
                ));
            }
            checked_punt += 1;
        }
        if let Some(v) = tx
            .violations()
            .iter()
            .chain(punt.violations())
            .chain(pass.violations())
            .next()
        {
            return Err(format!("editor: output stream rule broken: {v}"));
        }
        if next_res == pkts.len()
            && got_tx.len() == want_tx.len()
            && got_punt.len() == want_punt.len()
            && got_pass.len() == want_pass.len()
        {
            // Everything arrived; nothing more may follow.
            quiet += 1;
            if quiet > 300 {
                break;
            }
        }
    }
    if frames.pending() != 0
        || !tx_beats.is_empty()
        || !punt_beats.is_empty()
        || !pass_beats.is_empty()
    {
        return Err(format!(
            "editor: after the last packet {} frame beats were not taken, {} transmit, {} punt \
             and {} pass beats are left over",
            frames.pending(),
            tx_beats.len(),
            punt_beats.len(),
            pass_beats.len()
        ));
    }
    Ok(())
}

fn bins_of(pkts: &[Pkt]) -> Bins {
    let mut bins = Bins::new();
    for p in pkts {
        let mut add = |b: String| *bins.entry(b).or_default() += 1;
        add(p.name.clone());
        match p.res.verdict {
            Verdict::Forward => {
                let h = p.headers.as_ref().expect("parses");
                add(format!(
                    "forward {} over IPv{} inner IPv{} x {} tags",
                    p.delivery.name(),
                    if p.backend.is_ipv6 { 6 } else { 4 },
                    if h.family == Family::V6 { 6 } else { 4 },
                    h.vlan_tags
                ));
                if p.frame.len() > h.l3_end {
                    add("forward of a padded frame".into());
                }
            }
            Verdict::Punt => {
                add(format!("punt rule valid {}", p.res.rule.is_some()));
                if p.frame.len() > 9728 {
                    add("punt cut at 9728 bytes".into());
                }
            }
            Verdict::Drop if p.res.reason == Reason::TooBig => add("too big (dropped)".into()),
            v => add(format!("{v:?}")),
        }
    }
    bins
}

#[test]
fn edits_as_the_model() {
    let seed = seed_from_env(0xed17);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pkts = directed(&mut rng);
    pkts.extend((0..1500).map(|_| random_packet(&mut rng)));
    let bins = bins_of(&pkts);
    // Back to back with a ready output, then with idle clocks and back-pressure.
    for (k, (idle, bp)) in [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)].into_iter().enumerate() {
        let run_seed = seed.wrapping_add(k as u64);
        if let Err(e) = run(run_seed, &pkts, idle, bp) {
            panic!(
                "{e}\n  seed {seed:#x} (idle {idle}, back-pressure {bp}): replay with \
                 NLB_SEED={seed:#x} cargo test -p nlb-verif --test rtl editor::"
            );
        }
    }
    for (k, v) in &bins {
        println!("{k:50} {v}");
    }
    let mut required = vec![
        "outer IPv4 checksum 0x0000".to_string(),
        "outer IPv4 checksum 0x0001".into(),
        "GUE UDP checksum 0xffff".into(),
        "minimum frame".into(),
        "forward of a padded frame".into(),
        "punt cut at 9728 bytes".into(),
        "punt rule valid true".into(),
        "punt rule valid false".into(),
        "too big (dropped)".into(),
        "Drop".into(),
        "Pass".into(),
        format!("output of {} bytes", MAX_FRAME - 1),
        format!("output of {MAX_FRAME} bytes"),
    ];
    for d in Delivery::ALL {
        for o in [4, 6] {
            for i in [4, 6] {
                for t in 0..3 {
                    required.push(format!(
                        "forward {} over IPv{o} inner IPv{i} x {t} tags",
                        d.name()
                    ));
                }
            }
        }
    }
    nlb_verif::coverage::assert_hit(&bins, &required, "editor bins", &format!("seed {seed:#x}"));
}
