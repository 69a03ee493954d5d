//! `nlb_flow_hash` against the flow hash of `nlb-hw`: the known-answer vectors (computed
//! outside the project by a bit-serial implementation) and 100k random keys with random idle
//! cycles, checking the value, the sideband tag and the fixed latency of every key.

use nlb_hw::enums::KeyType;
use nlb_hw::hash::{flow_hash, FlowKey, KEY_BYTES, KNOWN_ANSWERS};
use nlb_testkit::hex;
use nlb_verif::bench::{seed_from_env, trace_always, wave_path};
use nlb_verif::models::FlowHash;
use nlb_verif::{VerifError, Verilated, FLOW_HASH_LATENCY};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::VecDeque;

/// The 320-bit key port: canonical byte 0 in the top byte (bits 319..312), word 0 = bits 31..0.
fn key_words(key: &[u8; KEY_BYTES]) -> Vec<u32> {
    (0..KEY_BYTES / 4)
        .map(|i| {
            let at = KEY_BYTES - 4 * (i + 1);
            u32::from_be_bytes([key[at], key[at + 1], key[at + 2], key[at + 3]])
        })
        .collect()
}

fn unhex(s: &str) -> [u8; KEY_BYTES] {
    let mut out = [0u8; KEY_BYTES];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("known-answer hex");
    }
    out
}

/// One key in flight: its bytes, the cycle it went in, the expected hash.
struct InFlight {
    key: [u8; KEY_BYTES],
    tag: u32,
    cycle_in: u64,
    expect: u32,
}

/// A key the RTL got wrong, and the clock it showed at.
#[derive(Debug)]
struct Mismatch(String, u64);

/// Clocks of waveform kept before a mismatch.
const WAVE_WINDOW: u64 = 64;

/// Pushes `keys` through the model, one offered per clock unless the idle draw says wait
/// (probability `idle`), and checks every result. Returns the clocks used.
fn run(
    keys: &[([u8; KEY_BYTES], u32)],
    idle: f64,
    seed: u64,
    wave: Option<(&std::path::Path, u64)>,
) -> Result<Result<u64, Mismatch>, VerifError> {
    let mut sim = Verilated::new::<FlowHash>()?;
    let (s_key, s_user, s_valid) = (
        sim.port("s_key")?,
        sim.port("s_user")?,
        sim.port("s_valid")?,
    );
    let (m_hash, m_user, m_valid) = (
        sim.port("m_hash")?,
        sim.port("m_user")?,
        sim.port("m_valid")?,
    );
    sim.reset(2)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut next = 0usize;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let start = sim.cycle();
    let limit = start + keys.len() as u64 * 20 + 100;
    while next < keys.len() || !in_flight.is_empty() {
        if let Some((path, from)) = wave {
            if sim.cycle() == from && sim.trace_path().is_none() {
                sim.trace_to(path)?;
            }
        }
        if sim.cycle() > limit {
            return Ok(Err(Mismatch(
                format!("{} keys never came out", in_flight.len()),
                sim.cycle(),
            )));
        }
        let offer = next < keys.len() && !rng.random_bool(idle);
        if offer {
            let (key, expect) = keys[next];
            sim.set(s_key, &key_words(&key))?;
            sim.set_u64(s_user, next as u64)?;
            in_flight.push_back(InFlight {
                key,
                tag: next as u32,
                cycle_in: sim.cycle(),
                expect,
            });
            next += 1;
        } else {
            // No key this clock: noise on the key port must not come out.
            let mut noise = vec![0u32; KEY_BYTES / 4];
            rng.fill(&mut noise[..]);
            sim.set(s_key, &noise)?;
            sim.set_u64(s_user, u64::from(rng.random::<u32>()))?;
        }
        sim.set_bit(s_valid, offer)?;
        sim.eval();
        if sim.get_bit(m_valid)? {
            let got = sim.get_u64(m_hash)? as u32;
            let tag = sim.get_u64(m_user)? as u32;
            let Some(want) = in_flight.pop_front() else {
                return Ok(Err(Mismatch(
                    "m_valid with no key in flight".to_string(),
                    sim.cycle(),
                )));
            };
            let latency = sim.cycle() - want.cycle_in;
            if got != want.expect || tag != want.tag || latency != FLOW_HASH_LATENCY {
                return Ok(Err(Mismatch(
                    format!(
                        "key #{} {}: RTL hash {got:#010x} tag {tag} after {latency} clocks; \
                         expected {:#010x} tag {} after {FLOW_HASH_LATENCY}",
                        want.tag,
                        hex(&want.key),
                        want.expect,
                        want.tag
                    ),
                    sim.cycle(),
                )));
            }
        }
        sim.tick();
    }
    Ok(Ok(sim.cycle() - start))
}

/// Runs, and on a mismatch replays the same seed with a waveform and fails with everything
/// needed to reproduce it.
fn check(name: &str, keys: &[([u8; KEY_BYTES], u32)], idle: f64, seed: u64) -> u64 {
    let wave = wave_path(name, seed);
    let first = run(
        keys,
        idle,
        seed,
        trace_always().then_some((wave.as_path(), 0)),
    )
    .expect("simulation harness");
    match first {
        Ok(cycles) => cycles,
        Err(Mismatch(what, cycle)) => {
            // Same seed, same stimulus: replay with a waveform of the clocks before the failure.
            let from = cycle.saturating_sub(WAVE_WINDOW);
            let replay = run(keys, idle, seed, Some((wave.as_path(), from)));
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
fn known_answer_vectors() {
    // Expected values come from the vectors (computed outside the project), not nlb-hw.
    let keys: Vec<_> = KNOWN_ANSWERS
        .iter()
        .map(|ka| (unhex(ka.key_hex), ka.hash))
        .collect();
    assert!(!keys.is_empty());
    // Back to back, then with gaps.
    check("flow_hash_kat", &keys, 0.0, 1);
    check("flow_hash_kat_idle", &keys, 0.5, 2);
}

fn random_key(rng: &mut StdRng) -> [u8; KEY_BYTES] {
    if rng.random_bool(0.5) {
        // Any bytes at all: the hash is defined over the 40 bytes, whatever they hold.
        let mut k = [0u8; KEY_BYTES];
        rng.fill(&mut k[..]);
        k
    } else {
        let v4 = |rng: &mut StdRng| 0xffff_0000_0000u128 | u128::from(rng.random::<u32>());
        let (src, dst) = if rng.random_bool(0.5) {
            (v4(rng), v4(rng))
        } else {
            (rng.random::<u128>(), rng.random::<u128>())
        };
        let types = KeyType::ALL;
        FlowKey {
            key_type: types[rng.random_range(0..types.len())],
            protocol: [6u8, 17, rng.random()][rng.random_range(0..3)],
            src_port: rng.random(),
            dst_port: rng.random(),
            src_addr: src,
            dst_addr: dst,
        }
        .bytes()
    }
}

#[test]
fn random_keys_match_nlb_hw() {
    let seed = seed_from_env(0x5eed_0001);
    let count: usize = std::env::var("NLB_HASH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
        .max(1);
    let mut rng = StdRng::seed_from_u64(seed);
    let keys: Vec<_> = (0..count)
        .map(|_| {
            let k = random_key(&mut rng);
            (k, flow_hash(&k))
        })
        .collect();
    // A fifth back to back (one key per clock), the rest with random gaps.
    let split = (count / 5).max(1).min(count);
    let cycles = check("flow_hash_burst", &keys[..split], 0.0, seed);
    // One key per clock: the pipeline never stalls, so the burst takes keys + latency clocks.
    assert_eq!(
        cycles,
        split as u64 + FLOW_HASH_LATENCY,
        "back-to-back keys must flow at one per clock"
    );
    let idle = 0.1 + 0.6 * rng.random::<f64>();
    check("flow_hash_idle", &keys[split..], idle, seed ^ 1);
}
