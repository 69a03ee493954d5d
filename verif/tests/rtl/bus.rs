//! Bus masters that behave like real ones, against the golden model's register semantics
//! (docs/pipeline.md §13; the regmap's conventions, partial byte strobes included).
//!
//! - `nlb_top` over AXI-Lite with `nlb_verif::axil::PipelinedMaster`: several writes in
//!   flight, each write's address and data phases apart in either order, writes going out
//!   while a B response is held, reads on their own channel overlapping the writes, random
//!   byte strobes (none, some, all) on every register of the blocks the RTL implements
//!   (fw_id, ctrl, table, conntrack and counters, block headers, holes), enumerated from
//!   `hw/regmap.toml` itself.
//! - The blocks of the extension bus on their own (`nlb_conntrack`, `nlb_counters`) with
//!   `nlb_verif::extbus::ExtBusPipe`: a write and a read in flight together, requested in the
//!   same clock or apart, the next one right after an ack.
//!
//! The model executes each access atomically and writes in their order (AXI-Lite has one ID).
//! A read is not ordered against writes in flight (AXI orders no read against a write), so it
//! must return the register's value in one of the model's states between the writes answered
//! before the read was issued and the writes taken before its answer; `table.status` may
//! also show `busy` while a table command it overlaps runs (docs/verification.md). Every
//! response must be OKAY and the masters' protocol checks clean. Bins (the timing cases and a
//! partial write of every register) are required. `NLB_BUS_ACCESSES` changes the run length.

use firmware_sim::{ConnTable, Counter, CounterKind, ModelDevice};
use nlb_hw::blocks::{self, table};
use nlb_hw::Profile;
use nlb_verif::axil::{Access, Finished, PipeTiming, PipelinedMaster};
use nlb_verif::bench::{seed_from_env, wave_path, Agent, Bench};
use nlb_verif::coverage::{self, Bins};
use nlb_verif::ct_memory::CtMemory;
use nlb_verif::extbus::ExtBusPipe;
use nlb_verif::models::{Conntrack, Counters as CountersModel, Top};
use nlb_verif::Verilated;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

fn accesses() -> usize {
    std::env::var("NLB_BUS_ACCESSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6000)
}

/// A register word to access: byte offset and a name for the bins.
#[derive(Debug, Clone)]
struct Reg {
    offset: u32,
    name: String,
}

/// The registers of `blocks_named` from the regmap (every word of a short array; the first,
/// second and last of a long one), their header words, and holes of their spans.
fn registers(blocks_named: &[&str], headers: bool, skip: &[&str]) -> Vec<Reg> {
    let map = nlb_hw::model::Regmap::parse(include_str!("../../../hw/regmap.toml"))
        .expect("hw/regmap.toml parses");
    let mut out = Vec::new();
    for (i, b) in map.blocks.iter().enumerate() {
        if !blocks_named.contains(&b.name.as_str()) {
            continue;
        }
        if headers {
            for (k, n) in ["TYPE", "VERSION", "NEXT"].iter().enumerate() {
                out.push(Reg {
                    offset: b.offset + 4 * k as u32,
                    name: format!("{}.{n}", b.name),
                });
            }
        }
        let mut used = Vec::new();
        for r in &b.registers {
            let full = format!("{}.{}", b.name, r.name);
            if skip.contains(&full.as_str()) {
                continue;
            }
            let words: Vec<u32> = if r.count <= 4 {
                (0..r.count).collect()
            } else {
                vec![0, 1, 11, r.count - 1]
            };
            for w in words {
                let offset = b.offset + r.offset + 4 * w;
                used.push(offset);
                out.push(Reg {
                    offset,
                    name: full.clone(),
                });
            }
        }
        // Holes: words of the span no register holds.
        let span = map.span(i);
        let mut holes = 0;
        let mut o = b.offset + 12;
        while holes < 3 && o < b.offset + span {
            if blocks::access(o).is_none() {
                out.push(Reg {
                    offset: o,
                    name: format!("{} hole", b.name),
                });
                holes += 1;
                o += 0x44;
            }
            o += 4;
        }
        out.push(Reg {
            offset: b.offset + span - 4,
            name: format!("{} hole", b.name),
        });
    }
    out
}

/// A value worth writing to `offset`: command words with defined and undefined ops and small
/// indices, small indices and selects, random words elsewhere.
fn value_for(rng: &mut StdRng, offset: u32) -> u32 {
    let cmd = |rng: &mut StdRng| -> u32 {
        let op = match rng.random_range(0..10) {
            0 => rng.random_range(0..256),
            1 => 0,
            _ => rng.random_range(1..=4),
        };
        let index: u32 = match rng.random_range(0..6) {
            0 => 0,
            1 => rng.random_range(0..1 << 24),
            _ => rng.random_range(0..70),
        };
        (index << 8) | op
    };
    match offset {
        table::CMD | blocks::conntrack::CMD => cmd(rng),
        table::SELECT => {
            if rng.random_bool(0.9) {
                rng.random_range(0..8) | (u32::from(rng.random_bool(0.5)) << 8)
            } else {
                rng.random()
            }
        }
        table::INDEX | blocks::conntrack::INDEX => match rng.random_range(0..4) {
            0 => rng.random(),
            _ => rng.random_range(0..70),
        },
        blocks::counters::SELECT => {
            if rng.random_bool(0.9) {
                (rng.random_range(0..5) << 24) | rng.random_range(0..6)
            } else {
                rng.random()
            }
        }
        blocks::counters::SNAPSHOT => match rng.random_range(0..6) {
            0 => rng.random(),
            1 => 3,
            _ => rng.random_range(1..=2),
        },
        o if (blocks::ctrl::BASE..blocks::ctrl::BASE + 0x1000).contains(&o) => {
            if rng.random_bool(0.5) {
                rng.random_range(0..300)
            } else {
                rng.random()
            }
        }
        _ => rng.random(),
    }
}

/// Byte strobes: all four half the time, otherwise any (none included).
fn strobes(rng: &mut StdRng) -> u32 {
    if rng.random_bool(0.5) {
        0xf
    } else {
        rng.random_range(0..16)
    }
}

/// The model side of a run: the model, the writes it executed, and what every read may
/// return.
struct Checker {
    model: ModelDevice,
    /// Writes finished so far, by write index: (offset, data, strobes, taken, answered).
    writes: Vec<(u32, u32, u32, u64, u64)>,
    /// Writes the model has executed (a prefix of `writes`).
    applied: usize,
    bins: Bins,
}

impl Checker {
    /// Checks a batch of finished accesses (every access of the batch answered).
    fn check(&mut self, done: &[Finished], regs: &[Reg]) -> Result<(), String> {
        let name_of = |o: u32| {
            regs.iter()
                .find(|r| r.offset == o)
                .map_or_else(|| format!("{o:#06x}"), |r| r.name.clone())
        };
        let mut new_writes: Vec<&Finished> =
            done.iter().filter(|f| f.write_index.is_some()).collect();
        new_writes.sort_by_key(|f| f.write_index);
        for f in &new_writes {
            let Access::Write { addr, data, strb } = f.access else {
                unreachable!("a write index on a write")
            };
            if f.write_index != Some(self.writes.len()) {
                return Err(format!("write answers out of order: {f:?}"));
            }
            self.writes
                .push((addr, data, strb, f.accepted, f.responded));
        }
        for f in done {
            if f.resp != 0 {
                return Err(format!("response {} (not OKAY) to {f:?}", f.resp));
            }
        }
        // Each read's window of model states: [writes answered before it was offered,
        // writes taken before it was answered].
        let mut reads: Vec<(&Finished, usize, usize, Vec<u32>)> = done
            .iter()
            .filter(|f| f.write_index.is_none())
            .map(|f| {
                let lo = self.writes.iter().filter(|w| w.4 < f.offered).count();
                let hi = self.writes.iter().filter(|w| w.3 < f.responded).count();
                (f, lo, hi.max(lo), Vec::new())
            })
            .collect();
        if let Some(r) = reads.iter().find(|r| r.1 < self.applied) {
            return Err(format!("a read before writes already executed: {:?}", r.0));
        }
        let busy = table::Status {
            busy: true,
            error: false,
        }
        .word();
        let total = self.writes.len();
        for s in self.applied..=total {
            for (f, lo, hi, cands) in reads.iter_mut() {
                if *lo <= s && s <= *hi {
                    let Access::Read { addr } = f.access else {
                        unreachable!()
                    };
                    let v = self.model.read32(addr).map_err(|e| e.to_string())?;
                    cands.push(v);
                    // A table command in the window: status may read busy while it runs.
                    if addr == table::STATUS
                        && self.writes[*lo..*hi].iter().any(|w| w.0 == table::CMD)
                    {
                        cands.push(v | busy);
                    }
                }
            }
            if s < total {
                let (o, d, st, _, _) = self.writes[s];
                self.model
                    .write32_strobed(o, d, st)
                    .map_err(|e| e.to_string())?;
                let reg = name_of(o);
                if st != 0xf {
                    coverage::hit(&mut self.bins, format!("partial strobes on {reg}"));
                }
            }
        }
        self.applied = total;
        for (f, lo, hi, cands) in &reads {
            let Access::Read { addr } = f.access else {
                unreachable!()
            };
            if !cands.contains(&f.data) {
                let window: Vec<String> = self.writes[*lo..*hi]
                    .iter()
                    .map(|w| format!("{} <- {:#010x} strobes {:#x}", name_of(w.0), w.1, w.2))
                    .collect();
                return Err(format!(
                    "read of {} ({addr:#06x}) returned {:#010x}; the model allows {cands:#010x?} \
                     (states {lo}..={hi}; writes overlapping it: {window:?}); {f:?}",
                    name_of(addr),
                    f.data
                ));
            }
            if hi > lo {
                coverage::hit(&mut self.bins, "read overlapping a write");
                if cands.first() != cands.last() {
                    let at = cands.iter().position(|c| *c == f.data);
                    if at == Some(0) {
                        coverage::hit(&mut self.bins, "overlapping read saw the state before");
                    } else {
                        coverage::hit(&mut self.bins, "overlapping read saw a later state");
                    }
                }
            }
        }
        Ok(())
    }
}

/// The timing bins of a batch: phases apart in either order, writes going out while a
/// response was held, reads beside writes.
fn timing_bins(done: &[Finished], bins: &mut Bins) {
    let mut writes: Vec<&Finished> = done.iter().filter(|f| f.write_index.is_some()).collect();
    writes.sort_by_key(|f| f.write_index);
    for f in &writes {
        if f.addr_taken + 3 <= f.data_taken {
            coverage::hit(bins, "write address taken 3+ clocks before its data");
        }
        if f.data_taken + 3 <= f.addr_taken {
            coverage::hit(bins, "write data taken 3+ clocks before its address");
        }
    }
    for pair in writes.windows(2) {
        if pair[1].accepted < pair[0].responded {
            coverage::hit(bins, "write taken before the previous write's response");
        }
        if pair[1].addr_taken < pair[0].responded && pair[0].responded > pair[0].accepted + 8 {
            coverage::hit(bins, "write going out while a held response waits");
        }
    }
    for r in done.iter().filter(|f| f.write_index.is_none()) {
        if writes
            .iter()
            .any(|w| w.offered < r.accepted && r.accepted < w.responded)
        {
            coverage::hit(bins, "read taken while a write is in flight");
        }
    }
}

/// A batch of random accesses over `regs`.
fn batch(rng: &mut StdRng, regs: &[Reg], n: usize) -> Vec<Access> {
    (0..n)
        .map(|_| {
            let r = &regs[rng.random_range(0..regs.len())];
            if rng.random_bool(0.55) {
                Access::Write {
                    addr: r.offset,
                    data: value_for(rng, r.offset),
                    strb: strobes(rng),
                }
            } else {
                Access::Read { addr: r.offset }
            }
        })
        .collect()
}

fn required_timing() -> Vec<String> {
    [
        "write address taken 3+ clocks before its data",
        "write data taken 3+ clocks before its address",
        "write taken before the previous write's response",
        "write going out while a held response waits",
        "read taken while a write is in flight",
        "read overlapping a write",
        "overlapping read saw the state before",
        "overlapping read saw a later state",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Every register of `regs` that a partial write must have reached (read-only ones too: they
/// must ignore it).
fn required_strobes(regs: &[Reg]) -> Vec<String> {
    let mut v: Vec<String> = regs
        .iter()
        .filter(|r| !r.name.ends_with(" hole"))
        .map(|r| format!("partial strobes on {}", r.name))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Runs `f` (a whole test case with an optional waveform); on a panic replays it with one.
fn with_replay(name: &str, seed: u64, f: impl Fn(u64, Option<&std::path::Path>)) {
    if catch_unwind(AssertUnwindSafe(|| f(seed, None))).is_err() {
        let wave = wave_path(name, seed);
        let _ = catch_unwind(AssertUnwindSafe(|| f(seed, Some(&wave))));
        panic!(
            "{name}: seed {seed:#x} failed (above; rerun with NLB_SEED={seed:#x}); waveform: {}",
            wave.display()
        );
    }
}

// ---- nlb_top over AXI-Lite ----------------------------------------------------------------------

fn top_case(seed: u64, wave: Option<&std::path::Path>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<Top>().expect("model");
    if let Some(w) = wave {
        sim.trace_to(w).expect("waveform");
    }
    sim.reset(4).expect("reset");
    let timing = PipeTiming::default();
    let mut m = PipelinedMaster::new(&sim, "s_axil", 0.2, timing).expect("ports");
    let mut bench = Bench::new(sim, seed);
    // The model reads build_id and git_hash from its flash port (0 without one); the RTL has
    // them stamped by the build (checked by regs::).
    let regs = registers(
        &[
            "fw_id",
            "ctrl",
            "table",
            "conntrack",
            "counters",
            "spi_flash",
            "reboot",
            "queues",
        ],
        true,
        &["fw_id.build_id", "fw_id.git_hash"],
    );
    // Past their headers, the spi_flash, reboot and queues blocks are the flash port's and
    // the shell's (not modelled alike): only their headers are accessed.
    let regs: Vec<Reg> = regs
        .into_iter()
        .filter(|r| {
            let blk = r.name.split(['.', ' ']).next().unwrap_or("");
            !["spi_flash", "reboot", "queues"].contains(&blk)
                || r.name.ends_with("TYPE")
                || r.name.ends_with("VERSION")
                || r.name.ends_with("NEXT")
        })
        .collect();
    let mut c = Checker {
        model: ModelDevice::new(profile()),
        writes: Vec::new(),
        applied: 0,
        bins: Bins::new(),
    };
    let n = accesses();
    let mut sent = 0;
    while sent < n {
        let k = rng.random_range(8..48);
        // Now and then a calm stretch: one access at a time, no waits.
        m.timing = if rng.random_bool(0.15) {
            PipeTiming {
                max_writes: 1,
                max_reads: 1,
                lead: 0.0,
                hold: 0.0,
                ..timing
            }
        } else {
            timing
        };
        for a in batch(&mut rng, &regs, k) {
            m.push(a);
        }
        sent += k;
        m.run(&mut bench, &mut []).expect("accesses answered");
        let done = m.take_done();
        timing_bins(&done, &mut c.bins);
        if let Err(e) = c.check(&done, &regs) {
            panic!("AXI-Lite on nlb_top, clock {}: {e}", bench.sim.cycle());
        }
        assert!(
            m.violations().is_empty(),
            "AXI-Lite protocol: {:?}",
            m.violations()
        );
    }
    coverage::print(&c.bins, "AXI-Lite bins");
    let mut required = required_timing();
    required.extend(required_strobes(&regs));
    coverage::assert_hit(
        &c.bins,
        required,
        "AXI-Lite bins",
        &format!("seed {seed:#x}"),
    );
}

#[test]
fn axi_lite_pipelined_and_strobed_as_the_model() {
    with_replay("bus_axil", seed_from_env(0xb05_0001), top_case);
}

// ---- the extension bus ------------------------------------------------------------------------

fn ext_case(
    seed: u64,
    wave: Option<&std::path::Path>,
    mut sim: Verilated,
    model: ModelDevice,
    block: &str,
    preset: impl Fn(&mut Verilated, &mut ModelDevice, &mut StdRng),
) {
    let mut rng = StdRng::seed_from_u64(seed);
    if let Some(w) = wave {
        sim.trace_to(w).expect("waveform");
    }
    sim.reset(4).expect("reset");
    let mut c = Checker {
        model,
        writes: Vec::new(),
        applied: 0,
        bins: Bins::new(),
    };
    preset(&mut sim, &mut c.model, &mut rng);
    // The connection table's block alone: its commands go to the table's memory, played here.
    let mut ct_mem = (block == "conntrack")
        .then(|| CtMemory::new(&sim, c.model.conntrack().len() as usize).expect("command port"));
    let mut m = ExtBusPipe::new(&sim, 0.5, 6).expect("ports");
    let mut bench = Bench::new(sim, seed);
    let regs = registers(&[block], false, &[]);
    let n = accesses() / 2;
    let mut sent = 0;
    while sent < n {
        let k = rng.random_range(8..48);
        m.lead = [0.0, 0.3, 0.7][rng.random_range(0..3)];
        for a in batch(&mut rng, &regs, k) {
            m.push(a);
        }
        sent += k;
        let mut others: Vec<&mut dyn Agent> =
            ct_mem.iter_mut().map(|a| a as &mut dyn Agent).collect();
        m.run(&mut bench, &mut others).expect("accesses answered");
        let done = m.take_done();
        for f in &done {
            if f.write_index.is_some()
                && done
                    .iter()
                    .any(|o| o.write_index.is_none() && o.offered == f.offered)
            {
                coverage::hit(
                    &mut c.bins,
                    "a write and a read requested in the same clock",
                );
            }
        }
        let mut ws: Vec<&Finished> = done.iter().filter(|f| f.write_index.is_some()).collect();
        ws.sort_by_key(|f| f.write_index);
        for p in ws.windows(2) {
            if p[1].offered == p[0].responded + 1 {
                coverage::hit(
                    &mut c.bins,
                    "a write requested in the clock after the previous ack",
                );
            }
        }
        if let Err(e) = c.check(&done, &regs) {
            panic!("extension bus of {block}, clock {}: {e}", bench.sim.cycle());
        }
        assert!(
            m.violations().is_empty(),
            "extension bus: {:?}",
            m.violations()
        );
    }
    coverage::print(&c.bins, &format!("extension-bus bins ({block})"));
    let mut required: Vec<String> = [
        "a write and a read requested in the same clock",
        "a write requested in the clock after the previous ack",
        "read overlapping a write",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    required.extend(required_strobes(&regs));
    coverage::assert_hit(
        &c.bins,
        required,
        "extension-bus bins",
        &format!("seed {seed:#x}"),
    );
}

#[test]
fn extension_bus_conntrack_as_the_model() {
    with_replay(
        "bus_ext_conntrack",
        seed_from_env(0xb05_0002),
        |seed, wave| {
            let sim = Verilated::new::<Conntrack>().expect("model");
            // The bench's geometry: 16 buckets x 4 ways (verif/build.rs).
            let model = ModelDevice::with_conntrack(profile(), ConnTable::new(16, 4));
            ext_case(seed, wave, sim, model, "conntrack", |_, _, _| {});
        },
    );
}

/// {drops, punts, bytes, packets} as the 256-bit preset port takes them (packets from bit 0).
fn preset_words(c: &Counter) -> Vec<u32> {
    use nlb_hw::blocks::counters as cb;
    [
        cb::packets::split(c.packets),
        cb::bytes::split(c.bytes),
        cb::punts::split(c.punts),
        cb::drops::split(c.drops),
    ]
    .concat()
}

#[test]
fn extension_bus_counters_as_the_model() {
    with_replay(
        "bus_ext_counters",
        seed_from_env(0xb05_0003),
        |seed, wave| {
            let sim = Verilated::new::<CountersModel>().expect("model");
            let model = ModelDevice::new(profile());
            // Counters the selects name (indices 0..6 of every family) preset to random values
            // in both, so the latched words are not all zero.
            ext_case(seed, wave, sim, model, "counters", |sim, model, rng| {
                let port = |n: &str| sim.port(n).expect("preset port");
                let (valid, kind, index, value) = (
                    port("sim_cnt_preset_valid"),
                    port("sim_cnt_preset_kind"),
                    port("sim_cnt_preset_index"),
                    port("sim_cnt_preset_value"),
                );
                for k in [
                    CounterKind::Rule,
                    CounterKind::Backend,
                    CounterKind::Reason,
                    CounterKind::Verdict,
                ] {
                    for i in 0..4u32 {
                        let c = Counter {
                            packets: rng.random(),
                            bytes: rng.random(),
                            punts: rng.random(),
                            drops: rng.random(),
                        };
                        sim.set_bit(valid, true).expect("port");
                        sim.set_u64(kind, u64::from(k.value())).expect("port");
                        sim.set_u64(index, u64::from(i)).expect("port");
                        sim.set(value, &preset_words(&c)).expect("port");
                        sim.tick();
                        sim.set_bit(valid, false).expect("port");
                        sim.tick();
                        model.counters_mut().preset(k, i, c);
                    }
                }
                for _ in 0..8 {
                    sim.tick();
                }
            });
        },
    );
}

/// Counts edges of one output pin.
struct Edges {
    port: nlb_verif::Port,
    prev: bool,
    edges: u64,
}

impl nlb_verif::bench::Agent for Edges {
    fn drive(
        &mut self,
        _sim: &mut Verilated,
        _rng: &mut StdRng,
    ) -> Result<(), nlb_verif::VerifError> {
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), nlb_verif::VerifError> {
        let v = sim.get_bit(self.port)?;
        if v != self.prev {
            self.edges += 1;
        }
        self.prev = v;
        Ok(())
    }
}

/// `nlb_spi_flash`: `ctrl` takes partial writes byte by byte (as the model's flash
/// controller); `txrx`, whose write starts a transfer, ignores every write without all four
/// strobes (no clock on `spi_sck`, `status.busy` stays 0, the received word stays 0), reads
/// and writes in flight together.
#[test]
fn extension_bus_spi_flash_partial_writes_as_the_model() {
    use firmware_sim::flash::FlashBlock;
    with_replay(
        "bus_ext_spi_flash",
        seed_from_env(0xb05_0004),
        |seed, wave| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut sim = Verilated::new::<nlb_verif::models::SpiFlash>().expect("model");
            if let Some(w) = wave {
                sim.trace_to(w).expect("waveform");
            }
            sim.reset(4).expect("reset");
            let mut model = ModelDevice::new(profile());
            model.set_flash(Box::new(FlashBlock::default()));
            let mut c = Checker {
                model,
                writes: Vec::new(),
                applied: 0,
                bins: Bins::new(),
            };
            let mut sck = Edges {
                port: sim.port("spi_sck").expect("port"),
                prev: false,
                edges: 0,
            };
            let mut m = ExtBusPipe::new(&sim, 0.3, 6).expect("ports");
            let mut bench = Bench::new(sim, seed);
            let regs = registers(&["spi_flash"], false, &[]);
            for _ in 0..accesses() / 20 {
                let k = rng.random_range(4..24);
                for a in batch(&mut rng, &regs, k) {
                    let a = match a {
                        Access::Write { addr, data, strb } if addr == blocks::spi_flash::TXRX => {
                            Access::Write {
                                addr,
                                data,
                                strb: if strb == 0xf { 0x7 } else { strb },
                            }
                        }
                        other => other,
                    };
                    m.push(a);
                }
                m.run(&mut bench, &mut [&mut sck])
                    .expect("accesses answered");
                let done = m.take_done();
                if let Err(e) = c.check(&done, &regs) {
                    panic!(
                        "extension bus of spi_flash, clock {}: {e}",
                        bench.sim.cycle()
                    );
                }
                assert_eq!(
                    sck.edges, 0,
                    "spi_sck moved: a partial write of txrx started a transfer"
                );
                assert!(
                    m.violations().is_empty(),
                    "extension bus: {:?}",
                    m.violations()
                );
            }
            let required = required_strobes(&regs);
            coverage::assert_hit(
                &c.bins,
                required,
                "spi_flash bins",
                &format!("seed {seed:#x}"),
            );
        },
    );
}
