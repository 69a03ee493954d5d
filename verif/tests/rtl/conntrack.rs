//! `nlb_conntrack` (the connection table, its register block and its hit bits) on its own
//! against the golden model's conntrack block: `firmware_sim::ModelDevice`'s registers at
//! `conntrack::BASE` over a `ConnTable` of the bench's shape (the `conntrack` model: 16 buckets
//! x 4 ways, 64 entries, two hit words).
//!
//! The extension bus (random idle clocks, noise between requests) carries random register
//! sequences: the index and data words (random byte strobes, merged as the register does),
//! commands (WRITE / READ / WRITE_AT / READ_AT at every index, one past the table and far past
//! it, WRITE/READ with index bits set, unknown ops), installs with the valid bit, overwrites in
//! place, invalidations, reads of `status`, `count`, `index`, the data words, `hit_read` and
//! unmapped offsets of the block; every read must equal the model's. The table itself sits
//! behind the block's command port to the lookup's connection-table stage (`ct_c_*`): the bench
//! plays that stage, answering each read with the entry it holds and storing each write, after
//! 1-30 clocks; after every command the entry the block left in that memory must equal the
//! model's. Meanwhile the pipeline sets random hit bits; a set in the clock the block reads a
//! hit word counts before the read, a later one after it (`mon_hit_read` says which clock that
//! is), so every hit appears in exactly one `hit_read`. Phases bias the commands to fill the
//! table to all 64 entries and to empty it again. Bins printed, all required.

use firmware_sim::device::decode_cmd;
use firmware_sim::{ConnTable, ModelDevice};
use nlb_hw::blocks::conntrack as ct;
use nlb_hw::enums::TableCmd;
use nlb_hw::layouts::CtEntry;
use nlb_hw::Profile;
use nlb_verif::bench::{seed_from_env, Agent, Bench};
use nlb_verif::ct_memory::CtMemory;
use nlb_verif::extbus::ExtBusMaster;
use nlb_verif::models::Conntrack;
use nlb_verif::{Model, Port, VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::VecDeque;

const BUCKETS: u32 = 16;
const WAYS: u32 = 4;
const ENTRIES: u32 = BUCKETS * WAYS;

use nlb_verif::coverage::Bins;

fn param(name: &str) -> u32 {
    Conntrack::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the conntrack model is built with {name}"))
}

/// The pipeline side of the block: the table's memory behind the command port and hit-bit
/// sets, checked against the model it owns (so that a hit set and a hit-word read land in the
/// model in the RTL's order).
struct Pipeline {
    model: ModelDevice,
    /// The table's memory behind the command port.
    mem: CtMemory,
    set_en: Port,
    set_index: Port,
    mon_hit_read: Port,
    /// Probability of a hit set per clock.
    p_set: f64,
    /// This clock's set, if any.
    set_now: Option<u32>,
    /// What the model's hit_read returned at each clock the RTL read a hit word.
    hit_words: VecDeque<u32>,
    /// Clock of the last hit-word read (for the "set in the clearing clock" bin).
    last_hit_read: Option<u64>,
    bins: Bins,
}

impl Pipeline {
    fn bin(&mut self, b: &str) {
        *self.bins.entry(b.to_string()).or_default() += 1;
    }
}

impl Agent for Pipeline {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        self.mem.drive(sim, rng)?;
        let set = rng.random_bool(self.p_set);
        let index = rng.random_range(0..ENTRIES);
        sim.set_bit(self.set_en, set)?;
        sim.set_u64(self.set_index, u64::from(index))?;
        self.set_now = set.then_some(index);
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let now = sim.cycle();
        let valid_reads = self.mem.valid_reads;
        let beside = self.mem.reads_beside_a_write;
        self.mem.observe(sim)?;
        if self.mem.valid_reads != valid_reads {
            self.bin("command read of a valid entry");
        }
        if self.mem.reads_beside_a_write != beside {
            self.bin("old entry read while a write of it is out");
        }
        // A set in the clock of a hit-word read counts before it.
        if let Some(i) = self.set_now {
            self.model.conntrack_mut().mark_hit(i);
        }
        if sim.get_bit(self.mon_hit_read)? {
            let word = self
                .model
                .read32(ct::HIT_READ)
                .map_err(|e| VerifError::Setup(e.to_string()))?;
            self.hit_words.push_back(word);
            if self.set_now.is_some() {
                self.bin("hit set in the clock of its word's read");
            }
            self.last_hit_read = Some(now);
        } else if self.set_now.is_some() && self.last_hit_read == Some(now.wrapping_sub(1)) {
            self.bin("hit set in the clock after a read (the clearing clock)");
        }
        Ok(())
    }
}

/// A random command word: every op at good and bad indices.
fn random_cmd(rng: &mut StdRng) -> u32 {
    let ops = [
        TableCmd::Write.value(),
        TableCmd::Read.value(),
        TableCmd::WriteAt.value(),
        TableCmd::ReadAt.value(),
    ];
    let at = match rng.random_range(0..10) {
        0 => ENTRIES - 1,
        1 => ENTRIES,
        2 => 0xff_ffff,
        _ => rng.random_range(0..ENTRIES),
    };
    match rng.random_range(0..20) {
        0 => 0,
        1 => rng.random_range(5..256),
        // WRITE/READ with index bits set.
        2 => ops[rng.random_range(0..2)] | cmd_index(at.max(1)),
        3..=9 => ops[rng.random_range(0..2)],
        _ => ops[rng.random_range(2..4)] | cmd_index(at),
    }
}

/// The command word's index field holding `at` (the generated `conntrack.cmd` layout).
fn cmd_index(at: u32) -> u32 {
    ct::cmd::INDEX
        .put(at)
        .expect("a conntrack index fits the command's field")
}

struct Run {
    bench: Bench,
    ext: ExtBusMaster,
    pipe: Pipeline,
}

impl Run {
    fn write(&mut self, addr: u32, value: u32, strb: u32) -> Result<(), String> {
        // The model takes whole words: merge the strobed bytes into what it holds.
        let old = self.pipe.model.read32(addr).map_err(|e| e.to_string())?;
        let merged = (0..4).fold(0u32, |v, b| {
            let src = if strb >> b & 1 != 0 { value } else { old };
            v | (src & 0xff << (8 * b))
        });
        let is_cmd = addr == ct::CMD;
        let written = if is_cmd {
            let index_reg = self
                .pipe
                .model
                .read32(ct::INDEX)
                .map_err(|e| e.to_string())?;
            match decode_cmd(value, index_reg) {
                Some((true, i)) if i < ENTRIES => Some(i),
                _ => None,
            }
        } else {
            None
        };
        self.ext
            .write_strobed(&mut self.bench, &mut [&mut self.pipe], addr, value, strb)
            .map_err(|e| format!("conntrack: write of {value:#010x} at {addr:#06x}: {e}"))?;
        if is_cmd || strb == 0xf {
            self.pipe
                .model
                .write32(addr, value)
                .map_err(|e| e.to_string())?;
        } else {
            self.pipe
                .model
                .write32(addr, merged)
                .map_err(|e| e.to_string())?;
        }
        // What the block left in the table's memory is the model's entry.
        if let Some(i) = written {
            let want = self.pipe.model.conntrack().entry(i).copied();
            let got = self.pipe.mem.entry_as_written(i as usize);
            if got != want {
                return Err(format!(
                    "conntrack: after the write of entry {i} the memory holds\n  RTL   {got:?}\n  \
                     model {want:?}"
                ));
            }
        }
        self.check()
    }

    fn read(&mut self, addr: u32) -> Result<u32, String> {
        let got = self
            .ext
            .read(&mut self.bench, &mut [&mut self.pipe], addr)
            .map_err(|e| format!("conntrack: read at {addr:#06x}: {e}"))?;
        let want = if addr == ct::HIT_READ {
            // Inside the table the block reads and clears a hit word (mon_hit_read); past
            // it there is nothing to clear and the read returns 0, as the model's does.
            let index = self
                .pipe
                .model
                .read32(ct::INDEX)
                .map_err(|e| e.to_string())?;
            match self.pipe.hit_words.pop_front() {
                Some(w) => w,
                None if index >= ENTRIES => {
                    self.pipe.model.read32(addr).map_err(|e| e.to_string())?
                }
                None => {
                    return Err(format!(
                        "conntrack: hit_read at index {index} returned without reading a hit                          word (no mon_hit_read)"
                    ))
                }
            }
        } else {
            self.pipe.model.read32(addr).map_err(|e| e.to_string())?
        };
        if got != want {
            return Err(format!(
                "conntrack: read at {addr:#06x}: RTL {got:#010x}, model {want:#010x} (index \
                 register {:#x})",
                self.pipe.model.read32(ct::INDEX).unwrap_or(0)
            ));
        }
        self.check()?;
        Ok(got)
    }

    fn check(&mut self) -> Result<(), String> {
        if let Some(e) = self.pipe.mem.error.take() {
            return Err(e);
        }
        if let Some(v) = self.ext.violations().first() {
            return Err(format!("conntrack: extension bus: {v}"));
        }
        Ok(())
    }
}

fn run(seed: u64) -> Result<Bins, String> {
    assert_eq!((param("CT_BUCKETS"), param("CT_WAYS")), (BUCKETS, WAYS));
    let profile = Profile::by_name("sim").expect("the sim profile exists");
    let model = ModelDevice::with_conntrack(profile, ConnTable::new(BUCKETS, WAYS));
    let mut sim = Verilated::new::<Conntrack>().map_err(|e| e.to_string())?;
    sim.reset(2).map_err(|e| e.to_string())?;
    let port = |n: &str| sim.port(n).map_err(|e| e.to_string());
    let pipe = Pipeline {
        model,
        mem: CtMemory::new(&sim, ENTRIES as usize).map_err(|e| e.to_string())?,
        set_en: port("hit_set_en")?,
        set_index: port("hit_set_index")?,
        mon_hit_read: port("mon_hit_read")?,
        p_set: 0.3,
        set_now: None,
        hit_words: VecDeque::new(),
        last_hit_read: None,
        bins: Bins::new(),
    };
    let ext = ExtBusMaster::new(&sim, 0.3).map_err(|e| e.to_string())?;
    let mut r = Run {
        bench: Bench::new(sim, seed),
        ext,
        pipe,
    };
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc7);
    let mut bins = Bins::new();
    let mut seen_full = false;
    for phase in 0..24 {
        // Fill, empty, or mix; hits dense or sparse.
        let p_valid = match phase % 3 {
            0 => 0.95,
            1 => 0.05,
            _ => 0.5,
        };
        r.pipe.p_set = if phase % 2 == 0 { 0.6 } else { 0.05 };
        if phase == 1 || phase == 13 {
            // Every entry written by WRITE_AT, valid (the table full) or invalid (empty).
            let valid = phase == 1;
            for i in 0..ENTRIES {
                for w in 0..CtEntry::WORDS as u32 {
                    let v: u32 = rng.random();
                    let v = if w == 0 { v & !1 | u32::from(valid) } else { v };
                    r.write(ct::DATA + 4 * w, v, 0xf)?;
                }
                r.write(ct::CMD, TableCmd::WriteAt.value() | cmd_index(i), 0xf)?;
            }
            let n = r.read(ct::COUNT)?;
            if n == ENTRIES {
                seen_full = true;
            }
        }
        for _ in 0..150 {
            let index_reg = r.pipe.model.read32(ct::INDEX).map_err(|e| e.to_string())?;
            let mut add = |b: &str| *bins.entry(b.to_string()).or_default() += 1;
            match rng.random_range(0..20) {
                0..=2 => {
                    let idx = match rng.random_range(0..8) {
                        0 => ENTRIES,
                        1 => rng.random(),
                        _ => rng.random_range(0..ENTRIES),
                    };
                    let strb = if rng.random_bool(0.2) {
                        rng.random_range(0..16)
                    } else {
                        0xf
                    };
                    r.write(ct::INDEX, idx, strb)?;
                }
                3..=6 => {
                    // An entry into the data words: valid by the phase, random fields, random
                    // bits past the entry's width.
                    for w in 0..CtEntry::WORDS as u32 {
                        let mut v: u32 = rng.random();
                        if w == 0 {
                            v = v & !1 | u32::from(rng.random_bool(p_valid));
                        }
                        r.write(ct::DATA + 4 * w, v, 0xf)?;
                    }
                    add("entry staged");
                }
                7 => {
                    let w = rng.random_range(0..ct::DATA_COUNT);
                    r.write(ct::DATA + 4 * w, rng.random(), rng.random_range(0..16))?;
                }
                8..=12 => {
                    let cmd = random_cmd(&mut rng);
                    let decoded = decode_cmd(cmd, index_reg);
                    let before =
                        decoded.and_then(|(_, i)| r.pipe.model.conntrack().entry(i).copied());
                    r.write(ct::CMD, cmd, 0xf)?;
                    let after =
                        decoded.and_then(|(_, i)| r.pipe.model.conntrack().entry(i).copied());
                    // Sometimes the same entry again at once, as the command ring writes
                    // (index, words, command): the block reads its old entry while the write
                    // before is still on its way to memory.
                    if let Some((true, i)) = decoded.filter(|&(_, i)| i < ENTRIES) {
                        if rng.random_bool(0.3) {
                            r.write(ct::INDEX, i, 0xf)?;
                            for w in 0..CtEntry::WORDS as u32 {
                                let mut v: u32 = rng.random();
                                if w == 0 {
                                    v = v & !1 | u32::from(rng.random_bool(0.5));
                                }
                                r.write(ct::DATA + 4 * w, v, 0xf)?;
                            }
                            r.write(ct::CMD, TableCmd::Write.value(), 0xf)?;
                            add("the same entry written again at once");
                        }
                    }
                    let error = r.read(ct::STATUS)? & 2 != 0;
                    let name = match (decoded, before, after) {
                        (None, _, _) => "bad command (error)",
                        (Some(_), None, _) => "index past the table (error)",
                        (Some((false, _)), _, _) => "read",
                        (Some((true, _)), Some(b), Some(a)) => match (b.valid, a.valid) {
                            (false, true) => "install (valid bit set)",
                            (true, true) => "overwrite in place",
                            (true, false) => "invalidate",
                            (false, false) => "write of an invalid entry",
                        },
                        _ => "other",
                    };
                    add(name);
                    if error != name.ends_with("(error)") {
                        return Err(format!(
                            "conntrack: cmd {cmd:#010x} ({name}) left status error {error}"
                        ));
                    }
                    if decoded.is_some_and(|(_, i)| i == ENTRIES - 1) && !error {
                        add("last entry");
                    }
                }
                13..=14 => {
                    let n = r.read(ct::COUNT)?;
                    if n == ENTRIES {
                        seen_full = true;
                    }
                    if n == 0 {
                        add("count 0");
                    }
                }
                15..=16 => {
                    let hits = r.read(ct::HIT_READ)?;
                    if hits != 0 {
                        add("hit word with hits");
                    }
                    if index_reg >= ENTRIES {
                        add("hit_read past the table");
                    }
                }
                17 => {
                    r.read(ct::INDEX)?;
                }
                18 => {
                    r.read(ct::DATA + 4 * rng.random_range(0..ct::DATA_COUNT))?;
                }
                _ => {
                    // Anywhere in the block past its header, mapped or not.
                    let off = ct::INDEX + 4 * rng.random_range(0..(0x1000 - 0xc) / 4);
                    if rng.random_bool(0.5) {
                        r.read(off)?;
                    } else if off != ct::CMD && off != ct::HIT_READ {
                        r.write(off, rng.random(), 0xf)?;
                    }
                }
            }
        }
    }
    if seen_full {
        *bins.entry("count 64 (full)".into()).or_default() += 1;
    }
    for (k, v) in std::mem::take(&mut r.pipe.bins) {
        *bins.entry(k).or_default() += v;
    }
    Ok(bins)
}

#[test]
fn registers_buckets_and_hits_match_the_model() {
    let seed = seed_from_env(0xc0de);
    let bins = run(seed).unwrap_or_else(|e| {
        panic!(
            "{e}\n  seed {seed:#x}: replay with NLB_SEED={seed:#x} cargo test -p nlb-verif \
             --test conntrack"
        )
    });
    for (k, v) in &bins {
        println!("{k:56} {v}");
    }
    let required = [
        "install (valid bit set)",
        "overwrite in place",
        "invalidate",
        "write of an invalid entry",
        "read",
        "bad command (error)",
        "index past the table (error)",
        "last entry",
        "count 0",
        "count 64 (full)",
        "hit word with hits",
        "hit_read past the table",
        "hit set in the clock of its word's read",
        "hit set in the clock after a read (the clearing clock)",
        "command read of a valid entry",
        "the same entry written again at once",
        "old entry read while a write of it is out",
    ];
    nlb_verif::coverage::assert_hit(
        &bins,
        required,
        "conntrack bins",
        &format!("seed {seed:#x}"),
    );
}
