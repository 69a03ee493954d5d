//! `nlb_counters` (the counters block: the result FIFO, the four counter banks, the select /
//! snapshot registers) on its own against the golden model's counters: `ModelDevice`'s
//! counters block over `firmware_sim::Counters` (`Counters::record` per result, the
//! `select` / `snapshot` registers and the eight latched words through `read32` /
//! `write32`), `sim` profile (256 rules, 4096 backends).
//!
//! Results go straight to the block's `s_res_*` ports (every verdict and reason, rules and
//! backends inside the tables, at their last entries and past them, lengths 0, 60, random,
//! 9018, 16383 and 65535), as fast as `s_room` lets them or with idle clocks. Meanwhile the
//! extension bus (random idle clocks, noise between requests) selects counters (every family,
//! unknown families, indices past a family) and latches them (LATCH and LATCH_CLEAR, undefined
//! codes) and reads the eight words and `select`. A latch taken while results are still
//! waiting in the block's FIFO sees the results up to some point: the bench finds the point
//! (no earlier than the results sent `SETTLE` clocks before the latch request, no later than
//! its ack) at which the model's counter equals what the block latched, counts the results up
//! to there into the model, and has the model latch too; every word read must then equal the
//! model's. Counters are preset (the simulation-only port, while no result is waiting; the
//! model's `Counters::preset`) just below 2^32 and 2^64 so that traffic carries them across;
//! at the end, idle, every counter the run touched is read back. Value bins printed, all
//! required.

use firmware_sim::{Counter, CounterKind, ModelDevice, PacketResult};
use nlb_hw::blocks::counters as cb;
use nlb_hw::enums::{CounterSnapshot, Reason, Verdict};
use nlb_hw::Profile;
use nlb_verif::bench::{seed_from_env, Agent, Bench};
use nlb_verif::extbus::ExtBusMaster;
use nlb_verif::models::Counters as CountersModel;
use nlb_verif::{Port, VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;

/// Clocks within which a result sent to an idle-enough block is counted (FIFO of 32, one result
/// per clock, a snapshot taking one clock, the bank's three stages).
const SETTLE: u64 = 48;

/// 2^32: a count's carry into its high word.
const TWO32: u64 = u32::MAX as u64 + 1;

use nlb_verif::coverage::Bins;

fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

/// A result as the counters see it, and the clock it was sent.
#[derive(Debug, Clone)]
struct Sent {
    clock: u64,
    result: PacketResult,
}

/// The result port: one result per clock while `s_room` allows, with probability `rate`.
struct Results {
    valid: Port,
    verdict: Port,
    reason: Port,
    rule_valid: Port,
    rule: Port,
    backend_valid: Port,
    backend: Port,
    len: Port,
    room: Port,
    rate: f64,
    /// Indices the traffic prefers (the preset ones): (rule, backend, reason, verdict).
    hot: Option<(u16, u16, Reason, Verdict)>,
    sent: Vec<Sent>,
    offered: Option<PacketResult>,
    clock: u64,
}

fn random_result(rng: &mut StdRng, hot: Option<(u16, u16, Reason, Verdict)>) -> PacketResult {
    let p = profile();
    let (rules, backends) = (p.rules as u16, p.backends as u16);
    let on_hot = hot.filter(|_| rng.random_bool(0.6));
    let verdict = match on_hot {
        Some((_, _, _, v)) => v,
        None => Verdict::ALL[rng.random_range(0..Verdict::ALL.len())],
    };
    let reason = match on_hot {
        Some((_, _, r, _)) => r,
        None => Reason::ALL[rng.random_range(0..Reason::ALL.len())],
    };
    let rule = match on_hot {
        Some((r, ..)) => Some(r),
        None => match rng.random_range(0..10) {
            0 => None,
            1 => Some(rules - 1),
            2 => Some(rules + rng.random_range(0..4096 - rules)),
            _ => Some(rng.random_range(0..rules)),
        },
    };
    let backend = match on_hot {
        Some((_, b, ..)) => Some(b),
        None => match rng.random_range(0..10) {
            0 => None,
            1 => Some(backends - 1),
            2 => Some(backends + rng.random_range(0..100)),
            _ => Some(rng.random_range(0..backends)),
        },
    };
    let frame_len = match rng.random_range(0..12) {
        0 => 0,
        1 => 60,
        2 => 9018,
        3 => 16383,
        4 => 65535,
        _ => rng.random_range(60..9019),
    };
    PacketResult {
        rule,
        backend,
        ..PacketResult::new(verdict, reason, 0, frame_len)
    }
}

impl Agent for Results {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        let room = sim.get_bit(self.room)?;
        self.offered = (room && rng.random_bool(self.rate)).then(|| random_result(rng, self.hot));
        let r = self.offered.unwrap_or_else(|| random_result(rng, None));
        sim.set_bit(self.valid, self.offered.is_some())?;
        sim.set_u64(self.verdict, u64::from(r.verdict.value()))?;
        sim.set_u64(self.reason, u64::from(r.reason.value()))?;
        sim.set_bit(self.rule_valid, r.rule.is_some())?;
        sim.set_u64(
            self.rule,
            u64::from(r.rule.unwrap_or_else(|| rng.random_range(0..4096))),
        )?;
        sim.set_bit(self.backend_valid, r.backend.is_some())?;
        sim.set_u64(
            self.backend,
            u64::from(r.backend.unwrap_or_else(|| rng.random())),
        )?;
        sim.set_u64(self.len, r.frame_len as u64)
    }

    fn observe(&mut self, _sim: &mut Verilated) -> Result<(), VerifError> {
        if let Some(result) = self.offered.take() {
            self.sent.push(Sent {
                clock: self.clock,
                result,
            });
        }
        self.clock += 1;
        Ok(())
    }
}

/// Whether counting `r` changes counter (kind, index): the families `Counters::record` adds it
/// to (for the search of the latch point only; the values come from the model).
fn touches(r: &PacketResult, kind: CounterKind, index: u32) -> bool {
    let p = profile();
    match kind {
        CounterKind::Reason => r.reason.value() == index,
        CounterKind::Verdict => r.verdict.value() == index,
        CounterKind::Rule => r
            .rule
            .is_some_and(|x| u32::from(x) == index && index < p.rules),
        CounterKind::Backend => {
            matches!(r.verdict, Verdict::Forward | Verdict::Drop)
                && r.backend
                    .is_some_and(|x| u32::from(x) == index && index < p.backends)
        }
    }
}

fn family_len(kind: CounterKind) -> u32 {
    let p = profile();
    match kind {
        CounterKind::Reason => Reason::ALL.len() as u32,
        CounterKind::Verdict => Verdict::ALL.len() as u32,
        CounterKind::Rule => p.rules,
        CounterKind::Backend => p.backends,
    }
}

/// {drops, punts, bytes, packets} as the 256-bit preset port takes them (packets from bit 0).
fn preset_words(c: &Counter) -> Vec<u32> {
    [
        cb::packets::split(c.packets),
        cb::bytes::split(c.bytes),
        cb::punts::split(c.punts),
        cb::drops::split(c.drops),
    ]
    .concat()
}

/// A value just below a carry or wrap point, or small.
fn near_top(rng: &mut StdRng) -> u64 {
    let below = rng.random_range(0..40_000u64);
    match rng.random_range(0..4) {
        0 => u64::from(u32::MAX) - below,
        1 => u64::MAX - below,
        2 => u64::from(u32::MAX) * 7 - below,
        _ => rng.random_range(0..1000),
    }
}

struct Run {
    bench: Bench,
    ext: ExtBusMaster,
    results: Results,
    model: ModelDevice,
    /// Results counted into the model so far (a prefix of `results.sent`).
    applied: usize,
    preset: (Port, Port, Port, Port),
    touched: BTreeSet<(u32, u32)>,
    bins: Bins,
}

impl Run {
    fn bin(&mut self, b: &str) {
        *self.bins.entry(b.to_string()).or_default() += 1;
    }

    fn clock(&self) -> u64 {
        self.results.clock
    }

    fn write(&mut self, addr: u32, value: u32) -> Result<(), String> {
        self.ext
            .write(&mut self.bench, &mut [&mut self.results], addr, value)
            .map_err(|e| format!("counters: write of {value:#010x} at {addr:#06x}: {e}"))
    }

    fn read(&mut self, addr: u32) -> Result<u32, String> {
        self.ext
            .read(&mut self.bench, &mut [&mut self.results], addr)
            .map_err(|e| format!("counters: read at {addr:#06x}: {e}"))
    }

    /// Counts the next `n` sent results into the model.
    fn apply(&mut self, n: usize) {
        for s in &self.results.sent[self.applied..self.applied + n] {
            for kind in CounterKind::ALL {
                let i = match kind {
                    CounterKind::Reason => s.result.reason.value(),
                    CounterKind::Verdict => s.result.verdict.value(),
                    CounterKind::Rule => s.result.rule.map_or(u32::MAX, u32::from),
                    CounterKind::Backend => s.result.backend.map_or(u32::MAX, u32::from),
                };
                if touches(&s.result, kind, i) {
                    let before = self.model.counters().get(kind, i);
                    let mut after = before;
                    after.add(s.result.frame_len as u64, 0, 0);
                    let high = |v: u64| v / TWO32;
                    if high(before.packets) != high(after.packets)
                        || high(before.bytes) != high(after.bytes)
                    {
                        self.touched.insert((kind.value(), i));
                    }
                }
            }
            self.model.counters_mut().record(&s.result);
        }
        self.applied += n;
    }

    /// Selects (kind word, index), latches (`op`: the snapshot word) and reads the eight words
    /// and `select`, comparing with the model at the point of the results the latch saw.
    fn snapshot(&mut self, select: u32, op: u32) -> Result<(), String> {
        self.write(cb::SELECT, select)?;
        self.model
            .write32(cb::SELECT, select)
            .map_err(|e| e.to_string())?;
        let requested = self.clock();
        self.write(cb::SNAPSHOT, op)?;
        let acked = self.clock();
        let regs: Vec<u32> = [
            cb::packets::REGISTERS,
            cb::bytes::REGISTERS,
            cb::punts::REGISTERS,
            cb::drops::REGISTERS,
        ]
        .concat();
        let mut got = Vec::new();
        for &r in &regs {
            got.push(self.read(r)?);
        }
        let got_counter = Counter {
            packets: cb::packets::join([got[0], got[1]]),
            bytes: cb::bytes::join([got[2], got[3]]),
            punts: cb::punts::join([got[4], got[5]]),
            drops: cb::drops::join([got[6], got[7]]),
        };
        // The latch point: results sent at least SETTLE clocks before the request are in,
        // results sent after the ack are not.
        let sent = &self.results.sent;
        let lo = sent[self.applied..]
            .iter()
            .take_while(|s| s.clock + SETTLE < requested)
            .count();
        let hi = sent[self.applied..]
            .iter()
            .take_while(|s| s.clock <= acked)
            .count();
        let kind = CounterKind::from_value(cb::select::KIND.get(select));
        let index = cb::select::INDEX.get(select);
        let latch_clear = (cb::Snapshot {
            op: CounterSnapshot::LatchClear,
        })
        .word();
        let defined = op == latch_clear
            || op
                == (cb::Snapshot {
                    op: CounterSnapshot::Latch,
                })
                .word();
        let point = match kind.filter(|&k| index < family_len(k)) {
            _ if !defined => {
                self.bin("undefined snapshot code (ignored)");
                lo
            }
            Some(k) => {
                let mut c = self.model.counters().get(k, index);
                let pending = &sent[self.applied..];
                // The first point j in lo..=hi (results pending[..j] counted) that gives it.
                let mut found = (lo == 0 && c == got_counter).then_some(0);
                for (j, s) in pending[..hi].iter().enumerate() {
                    if found.is_some() {
                        break;
                    }
                    let r = &s.result;
                    if touches(r, k, index) {
                        c.add(
                            r.frame_len as u64,
                            u64::from(r.verdict == Verdict::Punt),
                            u64::from(r.verdict == Verdict::Drop),
                        );
                    }
                    if j + 1 >= lo && c == got_counter {
                        found = Some(j + 1);
                    }
                }
                let Some(j) = found else {
                    return Err(format!(
                        "counters: latch of {k:?} {index} (snapshot word {op:#x}, requested at \
                         clock {requested}, acked at {acked}): RTL {got_counter:?}, which the \
                         model's counter is after none of results {}..{} (the model's now: \
                         {:?}; results between: {:?})",
                        self.applied + lo,
                        self.applied + hi,
                        self.model.counters().get(k, index),
                        &pending[..hi.min(40)]
                            .iter()
                            .filter(|s| touches(&s.result, k, index))
                            .map(|s| (s.clock, s.result.verdict, s.result.frame_len))
                            .collect::<Vec<_>>()
                    ));
                };
                if pending[j..hi].iter().any(|s| touches(&s.result, k, index)) {
                    self.bin("latch while results for its counter still wait");
                }
                self.bin(&format!("latch of a {k:?} counter"));
                if op == latch_clear {
                    self.bin("latch-clear");
                }
                if got_counter.packets > u64::from(u32::MAX) {
                    self.bin("latched a count past 2^32");
                }
                j
            }
            None => {
                if kind.is_some() && index >= 1 << 12 {
                    self.bin("index past its family with an upper bit set (latches 0)");
                }
                self.bin(if kind.is_some() {
                    "index past its family (latches 0)"
                } else {
                    "unknown family (latches 0)"
                });
                lo
            }
        };
        self.apply(point);
        self.model
            .write32(cb::SNAPSHOT, op)
            .map_err(|e| e.to_string())?;
        for (i, &r) in regs.iter().enumerate() {
            let want = self.model.read32(r).map_err(|e| e.to_string())?;
            if got[i] != want {
                return Err(format!(
                    "counters: read at {r:#06x} after selecting {select:#010x} and snapshot \
                     {op:#x}: RTL {:#010x}, model {want:#010x}",
                    got[i]
                ));
            }
        }
        let sel = self.read(cb::SELECT)?;
        if sel != select {
            return Err(format!(
                "counters: select reads {sel:#010x}, written {select:#010x}"
            ));
        }
        if let Some(v) = self.ext.violations().first() {
            return Err(format!("counters: extension bus: {v}"));
        }
        Ok(())
    }

    /// Idle until every result is counted, then preset (kind, index) in both.
    fn preset(&mut self, kind: CounterKind, index: u32, value: Counter) -> Result<(), String> {
        let rate = std::mem::replace(&mut self.results.rate, 0.0);
        for _ in 0..SETTLE {
            self.bench
                .step(&mut [&mut self.results])
                .map_err(|e| e.to_string())?;
        }
        let (valid, k, i, v) = self.preset;
        let sim = &mut self.bench.sim;
        let set = |sim: &mut Verilated| -> Result<(), VerifError> {
            sim.set_bit(valid, true)?;
            sim.set_u64(k, u64::from(kind.value()))?;
            sim.set_u64(i, u64::from(index))?;
            sim.set(v, &preset_words(&value))
        };
        set(sim).map_err(|e| e.to_string())?;
        self.bench
            .step(&mut [&mut self.results])
            .map_err(|e| e.to_string())?;
        self.bench
            .sim
            .set_bit(valid, false)
            .map_err(|e| e.to_string())?;
        let n = self.results.sent.len() - self.applied;
        self.apply(n);
        self.model.counters_mut().preset(kind, index, value);
        self.results.rate = rate;
        Ok(())
    }
}

fn select_word(kind: u32, index: u32) -> u32 {
    cb::select::KIND.put(kind).expect("kind fits")
        | cb::select::INDEX.put(index).expect("index fits")
}

fn run(seed: u64) -> Result<Bins, String> {
    let p = profile();
    let mut sim = Verilated::new::<CountersModel>().map_err(|e| e.to_string())?;
    sim.reset(2).map_err(|e| e.to_string())?;
    let port = |n: &str| sim.port(n).map_err(|e| e.to_string());
    let results = Results {
        valid: port("s_res_valid")?,
        verdict: port("s_res_verdict")?,
        reason: port("s_res_reason")?,
        rule_valid: port("s_res_rule_valid")?,
        rule: port("s_res_rule")?,
        backend_valid: port("s_res_backend_valid")?,
        backend: port("s_res_backend")?,
        len: port("s_res_len")?,
        room: port("s_room")?,
        rate: 0.8,
        hot: None,
        sent: Vec::new(),
        offered: None,
        clock: 0,
    };
    let preset = (
        port("sim_cnt_preset_valid")?,
        port("sim_cnt_preset_kind")?,
        port("sim_cnt_preset_index")?,
        port("sim_cnt_preset_value")?,
    );
    let ext = ExtBusMaster::new(&sim, 0.3).map_err(|e| e.to_string())?;
    let mut r = Run {
        bench: Bench::new(sim, seed),
        ext,
        results,
        model: ModelDevice::new(p),
        applied: 0,
        preset,
        touched: BTreeSet::new(),
        bins: Bins::new(),
    };
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0);
    let latch = cb::Snapshot {
        op: CounterSnapshot::Latch,
    }
    .word();
    let latch_clear = cb::Snapshot {
        op: CounterSnapshot::LatchClear,
    }
    .word();
    for phase in 0..12 {
        // Hot counters preset near a carry, traffic biased to them.
        let hot = (
            if rng.random_bool(0.5) {
                (p.rules - 1) as u16
            } else {
                rng.random_range(0..p.rules as u16)
            },
            if rng.random_bool(0.5) {
                (p.backends - 1) as u16
            } else {
                rng.random_range(0..p.backends as u16)
            },
            Reason::ALL[rng.random_range(0..Reason::ALL.len())],
            [Verdict::Forward, Verdict::Drop][rng.random_range(0..2)],
        );
        for (kind, index) in [
            (CounterKind::Rule, u32::from(hot.0)),
            (CounterKind::Backend, u32::from(hot.1)),
            (CounterKind::Reason, hot.2.value()),
            (CounterKind::Verdict, hot.3.value()),
        ] {
            let v = Counter {
                packets: near_top(&mut rng),
                bytes: near_top(&mut rng),
                punts: near_top(&mut rng),
                drops: near_top(&mut rng),
            };
            r.preset(kind, index, v)?;
        }
        r.results.hot = Some(hot);
        r.results.rate = [0.95, 0.5, 0.1][phase % 3];
        for _ in 0..40 {
            let kinds = CounterKind::ALL;
            let k = kinds[rng.random_range(0..kinds.len())];
            let index = match rng.random_range(0..10) {
                0..=4 => match k {
                    CounterKind::Rule => u32::from(hot.0),
                    CounterKind::Backend => u32::from(hot.1),
                    CounterKind::Reason => hot.2.value(),
                    CounterKind::Verdict => hot.3.value(),
                },
                5 => family_len(k) - 1,
                6 => family_len(k) + rng.random_range(0..3),
                // Past the family with one of the 24-bit index field's upper bits set, the
                // low bits naming the hot counter (a select that dropped the bit would latch
                // it).
                7 if rng.random_bool(0.5) => {
                    let low = match k {
                        CounterKind::Rule => u32::from(hot.0),
                        CounterKind::Backend => u32::from(hot.1),
                        CounterKind::Reason => hot.2.value(),
                        CounterKind::Verdict => hot.3.value(),
                    };
                    (1 << rng.random_range(12..24)) | low
                }
                _ => rng.random_range(0..family_len(k)),
            };
            let kind_word = if rng.random_range(0..20) == 0 {
                rng.random_range(4..256)
            } else {
                k.value()
            };
            let op = match rng.random_range(0..12) {
                0 => latch_clear,
                1 => rng.random_range(3..16),
                2 => 0,
                _ => latch,
            };
            r.snapshot(select_word(kind_word, index), op)?;
            for _ in 0..rng.random_range(0..20) {
                r.bench
                    .step(&mut [&mut r.results])
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    // Idle, then every counter the run carried past 2^32 and a sample of the rest.
    r.results.rate = 0.0;
    for _ in 0..SETTLE {
        r.bench
            .step(&mut [&mut r.results])
            .map_err(|e| e.to_string())?;
    }
    let touched: Vec<(u32, u32)> = r.touched.iter().copied().collect();
    if !touched.is_empty() {
        r.bin("carried past 2^32 by traffic");
    }
    for (k, i) in touched {
        r.snapshot(select_word(k, i), latch)?;
    }
    for k in CounterKind::ALL {
        for i in [0, family_len(k) - 1] {
            r.snapshot(select_word(k.value(), i), latch)?;
        }
    }
    let n = r.results.sent.len() as u64;
    *r.bins.entry("results counted".to_string()).or_default() += n;
    if r.applied != r.results.sent.len() {
        return Err(format!(
            "counters: {} results sent, {} counted at the end",
            r.results.sent.len(),
            r.applied
        ));
    }
    Ok(r.bins)
}

#[test]
fn counts_and_latches_as_the_model() {
    let seed = seed_from_env(0xc047);
    let bins = run(seed).unwrap_or_else(|e| {
        panic!(
            "{e}\n  seed {seed:#x}: replay with NLB_SEED={seed:#x} cargo test -p nlb-verif \
             --test counters"
        )
    });
    for (k, v) in &bins {
        println!("{k:56} {v}");
    }
    let required = [
        "latch while results for its counter still wait",
        "latch of a Rule counter",
        "latch of a Backend counter",
        "latch of a Reason counter",
        "latch of a Verdict counter",
        "latch-clear",
        "latched a count past 2^32",
        "carried past 2^32 by traffic",
        "undefined snapshot code (ignored)",
        "index past its family (latches 0)",
        "index past its family with an upper bit set (latches 0)",
        "unknown family (latches 0)",
    ];
    let context = format!("seed {seed:#x}");
    nlb_verif::coverage::assert_hit(&bins, required, "counters bins", &context);
}
