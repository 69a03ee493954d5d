//! The command ring in RTL (`nlb_cmd_ring` in `nlb_top`, docs/pipeline.md §15.2) against the
//! golden model's (`ModelDevice::run_commands`), command by command: the driver's `HostRings`
//! attached to both devices, the same data written into both command data areas, the same
//! commands submitted; after each, the outcome the driver reports (done, or the failing slot
//! and code), every byte of the data area and `dma.faults` must be the same.
//!
//! Commands: every table of both banks read (ranges and index lists), entries written into
//! the bank not serving (ranges and lists, entries copied from other rows), connections
//! written and read back, hit bits read after traffic; and on purpose the rare ones: a pool
//! entry with an undefined affinity in the middle of a write (BAD_ENTRY, the entries before
//! it written), writes and reads running past a table's end (BAD_INDEX, the entries before it
//! done), a count of 0 and a list HIT_READ (BAD_COMMAND), a HIT_READ not on a word of 32
//! entries (BAD_INDEX), a data address not 4-byte aligned (BAD_ENTRY), data the IOMMU does
//! not map (DMA_FAULT), and several commands queued behind one doorbell. Finally both devices'
//! tables and connection tables are read whole through their register windows and compared.
//!
//! The loader's attach and loads through the command ring on the RTL are in `device.rs`.

use firmware_sim::ModelDevice;
use nlb_driver::device::Device;
use nlb_driver::rings::{HostRings, RingError, RingSizes};
use nlb_driver::ModelHandle;
use nlb_hw::blocks::{conntrack, dma};
use nlb_hw::enums::{DmaCmd, Ring, Table};
use nlb_hw::layouts::{CmdDesc, CtEntry, PoolEntry};
use nlb_hw::{Profile, Tables};
use nlb_verif::bench::seed_from_env;
use nlb_verif::device::RtlDevice;
use nlb_verif::hbm::HbmConfig;
use nlb_verif::scenario::Scenario;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::time::Duration;

const SIZES: RingSizes = RingSizes {
    punt_log2: 4,
    event_log2: 6,
    inject_log2: 4,
    cmd_log2: 3,
    cmd_data: 256 * 1024,
    irq_count: 1,
    irq_usecs: 0,
};
/// Wall time a command may take in simulation.
const TIMEOUT: Duration = Duration::from_secs(300);
/// An IOVA neither device maps.
const UNMAPPED: u64 = 0x7_0000_0000;

struct Pair {
    rtl: RtlDevice,
    model: ModelHandle,
    rtl_rings: HostRings,
    model_rings: HostRings,
    commands: usize,
}

/// That a batch failed with `code` (docs/regmap.md, `dma_error`).
#[track_caller]
fn fails_with(r: Result<(), String>, code: &str, what: &str) {
    match r {
        Err(e) if e.ends_with(&format!(": {code}")) => {}
        other => panic!("{what}: expected {code}, got {other:?}"),
    }
}

/// What a batch of commands came to, as the driver reports it.
fn outcome(r: Result<(), RingError>) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(RingError::Command { slot, code }) => Err(format!("slot {slot}: {code:?}")),
        Err(e) => panic!("the command ring did not answer: {e}"),
    }
}

impl Pair {
    fn new(seed: u64) -> Pair {
        Self::with_memory(seed, false)
    }

    /// With `hbm`, the RTL's connection table and Maglev slots are on the HBM model: loaded
    /// at a quick timing, then at the realistic one (docs/verification.md "The HBM model").
    fn with_memory(seed: u64, hbm: bool) -> Pair {
        let compiled = crate::compiled_example("web.yaml");
        let quick = HbmConfig::quick(seed as u32);
        let mut rtl = RtlDevice::with_memory(seed, hbm.then_some(quick)).expect("RTL model");
        rtl.load(&compiled.tables, &compiled.nic).expect("RTL load");
        if hbm {
            rtl.set_hbm(&HbmConfig::realistic(seed as u32))
                .expect("HBM timing");
        }
        let mut model = ModelHandle::from_device(ModelDevice::from_tables(
            compiled.tables.clone(),
            compiled.nic,
        ));
        let rtl_rings = HostRings::attach(&mut rtl, SIZES, false).expect("rings on the RTL");
        let model_rings = HostRings::attach(&mut model, SIZES, false).expect("rings on the model");
        assert!(
            rtl_rings.carries(Ring::Cmd),
            "the RTL carries the command ring"
        );
        Pair {
            rtl,
            model,
            rtl_rings,
            model_rings,
            commands: 0,
        }
    }

    /// `words` at the start of both data areas, then `cmds` (their addresses relative to the
    /// data area, or absolute where `absolute`) behind one doorbell; both outcomes, the data
    /// areas and dma.faults must agree. Returns the outcome.
    fn run(&mut self, what: &str, words: &[u32], cmds: &[CmdDesc]) -> Result<(), String> {
        self.rtl_rings.write_data(0, words).expect("RTL data");
        self.model_rings.write_data(0, words).expect("model data");
        // The rest of the area zeroed, so that what a read writes shows.
        let rest = vec![0u32; (SIZES.cmd_data - words.len() * 4) / 4];
        self.rtl_rings
            .write_data(words.len() * 4, &rest)
            .expect("RTL data");
        self.model_rings
            .write_data(words.len() * 4, &rest)
            .expect("model data");
        for c in cmds {
            self.rtl_rings.submit(c).expect("RTL submit");
            self.model_rings.submit(c).expect("model submit");
        }
        self.commands += cmds.len();
        let rtl = outcome(self.rtl_rings.execute(&mut self.rtl, TIMEOUT));
        let model = outcome(self.model_rings.execute(&mut self.model, TIMEOUT));
        assert_eq!(rtl, model, "{what}: outcome, RTL against the model");
        let mut a = vec![0u32; SIZES.cmd_data / 4];
        let mut b = vec![0u32; SIZES.cmd_data / 4];
        self.rtl_rings.read_data(0, &mut a).expect("RTL data");
        self.model_rings.read_data(0, &mut b).expect("model data");
        if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
            panic!(
                "{what}: data word {i} (byte {:#x}) RTL {:#010x}, model {:#010x}",
                4 * i,
                a[i],
                b[i]
            );
        }
        let faults = (
            self.rtl.read32(dma::FAULTS).expect("RTL faults"),
            self.model.read32(dma::FAULTS).expect("model faults"),
        );
        assert_eq!(
            faults.0, faults.1,
            "{what}: dma.faults, RTL against the model"
        );
        // The valid count the connection writes kept (each from the entry it replaced).
        let counts = (
            self.rtl.read32(conntrack::COUNT).expect("RTL count"),
            self.model.read32(conntrack::COUNT).expect("model count"),
        );
        assert_eq!(
            counts.0, counts.1,
            "{what}: conntrack.count, RTL against the model"
        );
        rtl
    }

    fn addr(&self, byte: usize) -> u64 {
        let a = self.rtl_rings.data_iova(byte);
        assert_eq!(
            a,
            self.model_rings.data_iova(byte),
            "both data areas at one IOVA"
        );
        a
    }
}

fn cmd(
    op: DmaCmd,
    table: Table,
    bank: bool,
    list: bool,
    count: u32,
    index: u32,
    addr: u64,
) -> CmdDesc {
    CmdDesc {
        op,
        table,
        bank,
        list,
        reserved0: 0,
        count,
        index,
        addr,
        reserved1: 0,
    }
}

/// A connection entry of random fields (within their ranges), packed.
fn random_connection(rng: &mut StdRng, valid: bool) -> Vec<u32> {
    let e = CtEntry {
        valid,
        protocol: [6u8, 17][rng.random_range(0..2)],
        src_port: rng.random(),
        dst_port: rng.random(),
        src_addr: rng.random(),
        dst_addr: rng.random(),
        backend: rng.random_range(0..4096),
        rule: rng.random_range(0..256),
        flags: rng.random_range(0..4),
        timestamp: rng.random(),
    };
    e.pack().expect("connection entry").to_vec()
}

const TABLES: [Table; 6] = [
    Table::Vip,
    Table::Rule,
    Table::Acl,
    Table::Pool,
    Table::Maglev,
    Table::Backend,
];

#[test]
fn rtl_command_ring_matches_the_model_command_by_command() {
    let seed = seed_from_env(0xc0de_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut p = Pair::new(seed);
    let profile = Profile::by_name("sim").expect("the sim profile");
    let tables = Tables::empty(profile);
    let base = p.addr(0);
    let words_of = Tables::entry_words;

    // Every table of both banks, read as a range: the Maglev slots a range of 1,500 at a
    // random place (all 2 x 131,072 take minutes in simulation), the others whole (or as
    // much as the data area holds).
    for bank in [false, true] {
        for t in TABLES {
            let w = words_of(t);
            let depth = tables.depth(t);
            let room = (SIZES.cmd_data / 4 / w) as u32;
            let (index, count) = if t == Table::Maglev {
                (rng.random_range(0..depth - 1500), 1500)
            } else {
                (0, depth.min(room))
            };
            let c = cmd(DmaCmd::TableRead, t, bank, false, count, index, base);
            assert_eq!(p.run(&format!("{t:?} bank {bank} read"), &[], &[c]), Ok(()));
        }
    }

    // Index lists: random rows of every table (the room after each index filled).
    for t in TABLES {
        let w = words_of(t);
        let n = 40usize;
        let mut recs = Vec::new();
        for _ in 0..n {
            recs.push(rng.random_range(0..tables.depth(t)));
            recs.extend(std::iter::repeat_n(0xdead_beefu32, w));
        }
        let c = cmd(DmaCmd::TableRead, t, true, true, n as u32, 0, base);
        assert_eq!(p.run(&format!("{t:?} list read"), &recs, &[c]), Ok(()));
    }

    // Writes into bank 1 (not serving): entries of bank 0 copied to other rows, as a range and
    // as a list, the range's data starting in the middle of a line.
    let loaded = crate::compiled_example("web.yaml").tables;
    for t in TABLES {
        let w = words_of(t);
        let depth = tables.depth(t);
        let n = 24u32.min(depth);
        let start = rng.random_range(0..=depth - n);
        // Read n entries of bank 0 from a place that holds some, where the example filled any
        // (most of a table is empty, and a run of zero entries would not show where the data
        // was taken from): they are the data.
        let mut words_at = Vec::new();
        let used: Vec<u32> = (0..depth)
            .filter(|&i| {
                words_at.clear();
                loaded
                    .encode_entry(t, i, &mut words_at)
                    .expect("entry of the example");
                words_at.iter().any(|&w| w != 0)
            })
            .collect();
        let from = if used.is_empty() {
            rng.random_range(0..=depth - n)
        } else {
            used[rng.random_range(0..used.len())].min(depth - n)
        };
        let r = cmd(DmaCmd::TableRead, t, false, false, n, from, base + 12);
        assert_eq!(p.run(&format!("{t:?} source"), &[0, 0, 0], &[r]), Ok(()));
        let mut data = vec![0u32; 3 + n as usize * w];
        p.model_rings.read_data(0, &mut data).expect("source");
        let c = cmd(DmaCmd::TableWrite, t, true, false, n, start, base + 12);
        assert_eq!(p.run(&format!("{t:?} range write"), &data, &[c]), Ok(()));
        // The same entries as a list, to random rows.
        let mut recs = Vec::new();
        for k in 0..n as usize {
            recs.push(rng.random_range(0..depth));
            recs.extend_from_slice(&data[3 + k * w..3 + (k + 1) * w]);
        }
        let c = cmd(DmaCmd::TableWrite, t, true, true, n, 0, base);
        assert_eq!(p.run(&format!("{t:?} list write"), &recs, &[c]), Ok(()));
    }

    // A pool entry the table cannot hold (affinity 7) between two good ones: the first is
    // written, the command stops at the second.
    let mut pools = vec![0u32; 3 * PoolEntry::WORDS];
    let r = cmd(DmaCmd::TableRead, Table::Pool, false, false, 3, 0, base);
    p.run("pools", &[], &[r]).expect("pools");
    p.model_rings.read_data(0, &mut pools).expect("pools");
    let w = PoolEntry::WORDS;
    pools[w] |= 7 << PoolEntry::AFFINITY_LSB;
    let c = cmd(DmaCmd::TableWrite, Table::Pool, true, false, 3, 5, base);
    fails_with(
        p.run("bad pool entry", &pools, &[c]),
        "BadEntry",
        "bad pool entry",
    );

    // Past a table's end: two entries done, then BAD_INDEX; read and write.
    for t in TABLES {
        let depth = tables.depth(t);
        let data = vec![0u32; 4 * words_of(t)];
        let c = cmd(DmaCmd::TableWrite, t, true, false, 4, depth - 2, base);
        fails_with(
            p.run(&format!("{t:?} write past the end"), &data, &[c]),
            "BadIndex",
            "write past the end",
        );
        let c = cmd(DmaCmd::TableRead, t, false, false, 4, depth - 2, base);
        fails_with(
            p.run(&format!("{t:?} read past the end"), &[], &[c]),
            "BadIndex",
            "read past the end",
        );
    }

    // Connections: a list of random entries at random indices, read back as a list and a range.
    let ct_len = profile.ct_entries();
    let n = 64usize;
    let mut recs = Vec::new();
    let mut indices = Vec::new();
    for _ in 0..n {
        let i = rng.random_range(0..ct_len);
        indices.push(i);
        recs.push(i);
        let valid = rng.random_range(0..4) != 0;
        recs.extend(random_connection(&mut rng, valid));
    }
    let c = cmd(DmaCmd::CtWrite, Table::Vip, false, true, n as u32, 0, base);
    assert_eq!(p.run("connections written", &recs, &[c]), Ok(()));
    let mut list = Vec::new();
    for &i in &indices {
        list.push(i);
        list.extend(std::iter::repeat_n(0u32, CtEntry::WORDS));
    }
    let c = cmd(DmaCmd::CtRead, Table::Vip, false, true, n as u32, 0, base);
    assert_eq!(p.run("connections read (list)", &list, &[c]), Ok(()));
    let from = indices[0].min(ct_len - 200);
    let c = cmd(DmaCmd::CtRead, Table::Vip, false, false, 200, from, base);
    assert_eq!(p.run("connections read (range)", &[], &[c]), Ok(()));
    let c = cmd(
        DmaCmd::CtWrite,
        Table::Vip,
        false,
        false,
        3,
        ct_len - 1,
        base,
    );
    let data = vec![0u32; 3 * CtEntry::WORDS];
    fails_with(
        p.run("connection past the end", &data, &[c]),
        "BadIndex",
        "connection past the end",
    );

    // Traffic, then the hit bits read (and cleared) for the whole table.
    let compiled = crate::compiled_example("web.yaml");
    let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
    let frames: Vec<Vec<u8>> = (0..200).map(|_| scenario.frame(&mut rng)).collect();
    // Ten at a time: back to back, punts wait on the host memory and the receive side would
    // drop frames (docs/pipeline.md section 14.4), which the model never does.
    let mut got = Vec::new();
    for chunk in frames.chunks(10) {
        got.extend(p.rtl.receive(chunk.to_vec()).expect("RTL traffic"));
    }
    let mut out = vec![0u8; 16384];
    for (i, f) in frames.iter().enumerate() {
        let r = p.model.lock().receive(f, &mut out).expect("model traffic");
        assert_eq!(got[i].result, r, "packet {i}");
    }
    let c = cmd(
        DmaCmd::HitRead,
        Table::Vip,
        false,
        false,
        ct_len / 32,
        0,
        base,
    );
    assert_eq!(p.run("hit bits", &[], &[c]), Ok(()));

    // The refusals.
    let bad = [
        (
            "a count of 0",
            "BadCommand",
            cmd(DmaCmd::TableRead, Table::Rule, false, false, 0, 0, base),
        ),
        (
            "a list HIT_READ",
            "BadCommand",
            cmd(DmaCmd::HitRead, Table::Vip, false, true, 1, 0, base),
        ),
        (
            "a HIT_READ off a word",
            "BadIndex",
            cmd(DmaCmd::HitRead, Table::Vip, false, false, 1, 33, base),
        ),
        (
            "a HIT_READ past the end",
            "BadIndex",
            cmd(
                DmaCmd::HitRead,
                Table::Vip,
                false,
                false,
                3,
                ct_len - 64,
                base,
            ),
        ),
        (
            "data not 4-byte aligned",
            "BadEntry",
            cmd(DmaCmd::TableRead, Table::Rule, false, false, 2, 0, base + 2),
        ),
        (
            "data not mapped (read)",
            "DmaFault",
            cmd(DmaCmd::TableRead, Table::Rule, false, false, 2, 0, UNMAPPED),
        ),
        (
            "data not mapped (write)",
            "DmaFault",
            cmd(DmaCmd::TableWrite, Table::Rule, true, false, 2, 0, UNMAPPED),
        ),
        (
            "data not mapped (list)",
            "DmaFault",
            cmd(DmaCmd::CtWrite, Table::Vip, false, true, 2, 0, UNMAPPED),
        ),
    ];
    for (what, code, c) in bad {
        fails_with(p.run(what, &[], &[c]), code, what);
    }

    // Several commands behind one doorbell, a failure among them (the first failure is
    // reported; the others run).
    let batch = [
        cmd(DmaCmd::TableRead, Table::Backend, true, false, 16, 0, base),
        cmd(
            DmaCmd::TableRead,
            Table::Rule,
            true,
            false,
            16,
            0,
            base + 1024,
        ),
        cmd(DmaCmd::TableRead, Table::Rule, true, false, 0, 0, base),
        cmd(
            DmaCmd::TableRead,
            Table::Pool,
            false,
            false,
            16,
            0,
            base + 2048,
        ),
        cmd(DmaCmd::CtRead, Table::Vip, false, false, 8, 0, base + 4096),
    ];
    fails_with(p.run("a batch", &[], &batch), "BadCommand", "a batch");

    // Both devices hold the same tables, read whole through their register windows.
    for bank in [false, true] {
        for t in TABLES {
            let depth = tables.depth(t);
            let rows: Vec<u32> = if t == Table::Maglev {
                (0..depth).step_by(97).collect()
            } else {
                (0..depth).collect()
            };
            let mut recs = Vec::new();
            for i in rows {
                recs.push(i);
                recs.extend(std::iter::repeat_n(0u32, words_of(t)));
            }
            let room = SIZES.cmd_data / 4 / (words_of(t) + 1);
            recs.truncate(room * (words_of(t) + 1));
            let n = (recs.len() / (words_of(t) + 1)) as u32;
            let c = cmd(DmaCmd::TableRead, t, bank, true, n, 0, base);
            assert_eq!(
                p.run(&format!("{t:?} bank {bank} at the end"), &recs, &[c]),
                Ok(())
            );
        }
    }
    let (st_rtl, st_model) = (
        p.rtl_rings.poll().expect("RTL status"),
        p.model_rings.poll().expect("model status"),
    );
    assert_eq!(st_rtl.errors, st_model.errors, "ring errors");
    println!(
        "command ring on the RTL: {} commands as the model ran them",
        p.commands
    );
}

/// The engine's rate in clocks per entry, one command of each kind over a range (the host
/// memory answering at `RtlDevice`'s bench timing, the tables on chip): printed for
/// docs/benchmarks.md; what the commands moved must be the model's.
#[test]
fn rtl_command_ring_rate() {
    command_rates(seed_from_env(0xc0de_0003), false);
}

/// The same with the connection table and the Maglev slots on the HBM model at its realistic
/// timing (60-240 clocks a read): the rows' reads many at once, their writes one at a time.
#[test]
fn rtl_command_ring_rate_on_hbm() {
    command_rates(seed_from_env(0xc0de_0005), true);
}

fn command_rates(seed: u64, hbm: bool) {
    let mut p = Pair::with_memory(seed, hbm);
    let memory = if hbm { "HBM model" } else { "on chip" };
    let base = p.addr(0);
    let profile = Profile::by_name("sim").expect("the sim profile");
    let tables = Tables::empty(profile);
    let mut lines = Vec::new();
    // (what, op, table, entries, data offset in the area: 4 bytes puts it off the line, so
    // that it goes entry by entry through the windows; on HBM only the row paths, a
    // reference read entry by entry and the connection writes.)
    let all = [
        // Maglev slots and connections from 0 into a 64-byte line: whole memory rows at a
        // time, as much as the data area holds (the wait's ±1,000 clocks then matter little).
        (
            "Maglev slots read (by rows)",
            DmaCmd::TableRead,
            Table::Maglev,
            65536u32,
            0u64,
        ),
        (
            "Maglev slots written (by rows)",
            DmaCmd::TableWrite,
            Table::Maglev,
            65536,
            0,
        ),
        (
            "Maglev slots read (entry by entry)",
            DmaCmd::TableRead,
            Table::Maglev,
            1024,
            4,
        ),
        (
            "Maglev slots written (entry by entry)",
            DmaCmd::TableWrite,
            Table::Maglev,
            1024,
            4,
        ),
        (
            "backend entries read (6 words)",
            DmaCmd::TableRead,
            Table::Backend,
            1024,
            0,
        ),
        (
            "backend entries written",
            DmaCmd::TableWrite,
            Table::Backend,
            1024,
            0,
        ),
        (
            "VIP entries read (27 words)",
            DmaCmd::TableRead,
            Table::Vip,
            256,
            0,
        ),
        (
            "connections read (12 words, by rows)",
            DmaCmd::CtRead,
            Table::Vip,
            5456,
            0,
        ),
        (
            "connections read (entry by entry)",
            DmaCmd::CtRead,
            Table::Vip,
            1024,
            4,
        ),
        ("connections written", DmaCmd::CtWrite, Table::Vip, 1024, 0),
    ];
    let kinds = all.into_iter().filter(|k| {
        !hbm || k.0.ends_with("(by rows)")
            || k.0 == "Maglev slots read (entry by entry)"
            || k.0 == "connections written"
    });
    for (what, op, table, n, off) in kinds {
        let words = if matches!(op, DmaCmd::CtRead | DmaCmd::CtWrite) {
            CtEntry::WORDS
        } else {
            Tables::entry_words(table)
        };
        // Writes take what a read of bank 0 (or of the connection table) left in the area.
        let data = if matches!(op, DmaCmd::TableWrite | DmaCmd::CtWrite) {
            let read = if op == DmaCmd::CtWrite {
                DmaCmd::CtRead
            } else {
                DmaCmd::TableRead
            };
            let c = cmd(read, table, false, false, n, 0, base);
            assert_eq!(p.run("source", &[], &[c]), Ok(()));
            let mut d = vec![0u32; n as usize * words];
            p.model_rings.read_data(0, &mut d).expect("source");
            d
        } else {
            Vec::new()
        };
        assert!(n <= tables.depth(table).max(profile.ct_entries()));
        let c = cmd(op, table, true, false, n, 0, base + off);
        let before = p.rtl.cycles().expect("clocks");
        assert_eq!(p.run(what, &data, &[c]), Ok(()));
        let clocks = p.rtl.cycles().expect("clocks") - before;
        lines.push(format!(
            "{what}: {n} in {clocks} clocks, {:.1} clocks an entry",
            clocks as f64 / f64::from(n)
        ));
    }
    for l in lines {
        println!("command ring on the RTL ({memory}): {l}");
    }
}

/// Range reads that start at a memory row and on a 64-byte line (Maglev slots from a multiple
/// of 16, connections from a multiple of 4) are read whole rows at a time straight from the
/// memory stages, and Maglev range writes of whole rows are written a row at a time
/// (docs/pipeline.md §15.2); what they do must still be the model's, entry for entry and byte
/// for byte: counts that end inside a row (1 entry, a row and one, a row less one), both
/// banks, slot words with their upper bits set, runs to a table's end and past it (BAD_INDEX
/// after the rows within), data the IOMMU does not map (DMA_FAULT), the same ranges one word
/// off the line (an entry at a time), and a long read while traffic runs through the lookup,
/// whose packets must still be the model's.
#[test]
fn rtl_command_ring_reads_ranges_by_rows() {
    let seed = seed_from_env(0xc0de_0004);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut p = Pair::new(seed);
    let profile = Profile::by_name("sim").expect("the sim profile");
    let tables = Tables::empty(profile);
    let base = p.addr(0);
    let mg = tables.depth(Table::Maglev);
    let ct_len = profile.ct_entries();
    let mg_read = |bank, count, index, addr| {
        cmd(
            DmaCmd::TableRead,
            Table::Maglev,
            bank,
            false,
            count,
            index,
            addr,
        )
    };
    let mg_write = |bank, count, index, addr| {
        cmd(
            DmaCmd::TableWrite,
            Table::Maglev,
            bank,
            false,
            count,
            index,
            addr,
        )
    };
    let ct_read =
        |count, index, addr| cmd(DmaCmd::CtRead, Table::Vip, false, false, count, index, addr);

    // Connections to read: random entries written over a stretch of the table (a list).
    let stretch = 2048u32;
    let from = 4 * rng.random_range(0..(ct_len - stretch) / 4);
    let mut recs = Vec::new();
    for k in 0..512u32 {
        recs.push(from + rng.random_range(0..stretch));
        recs.extend(random_connection(&mut rng, k % 5 != 0));
    }
    let c = cmd(DmaCmd::CtWrite, Table::Vip, false, true, 512, 0, base);
    assert_eq!(p.run("connections written", &recs, &[c]), Ok(()));

    // Maglev slots: counts within and across rows, from row starts, both banks.
    for bank in [false, true] {
        for count in [1u32, 15, 16, 17, 31, 1000, 2048] {
            let index = 16 * rng.random_range(0..(mg - count) / 16);
            let c = mg_read(bank, count, index, base);
            let what = format!("Maglev bank {bank}: {count} from {index}");
            assert_eq!(p.run(&what, &[], &[c]), Ok(()));
            // The same one word off the line: an entry at a time.
            let c = mg_read(bank, count, index, base + 4);
            assert_eq!(p.run(&format!("{what}, off the line"), &[], &[c]), Ok(()));
        }
        // To the table's end, and past it: the rows within done, then BAD_INDEX.
        let c = mg_read(bank, 48, mg - 48, base);
        assert_eq!(p.run("Maglev to the end", &[], &[c]), Ok(()));
        let c = mg_read(bank, 40, mg - 32, base);
        fails_with(
            p.run("Maglev past the end", &[], &[c]),
            "BadIndex",
            "Maglev past the end",
        );
    }

    // Connections: counts within and across buckets, over the stretch written above.
    for count in [1u32, 3, 4, 5, 7, 200, 2048] {
        let index = from + 4 * rng.random_range(0..=(stretch - count) / 4);
        let c = ct_read(count, index, base);
        let what = format!("connections: {count} from {index}");
        assert_eq!(p.run(&what, &[], &[c]), Ok(()));
        let c = ct_read(count, index, base + 4);
        assert_eq!(p.run(&format!("{what}, off the line"), &[], &[c]), Ok(()));
    }
    let c = ct_read(8, ct_len - 8, base);
    assert_eq!(p.run("connections to the end", &[], &[c]), Ok(()));
    let c = ct_read(13, ct_len - 8, base);
    fails_with(
        p.run("connections past the end", &[], &[c]),
        "BadIndex",
        "connections past the end",
    );

    // Data the IOMMU does not map: every write refused.
    for (what, c) in [
        (
            "Maglev rows to unmapped data",
            mg_read(false, 64, 0, UNMAPPED),
        ),
        ("connection rows to unmapped data", ct_read(64, 0, UNMAPPED)),
    ] {
        fails_with(p.run(what, &[], &[c]), "DmaFault", what);
    }
    // And the next command runs as usual.
    let c = ct_read(64, from, base);
    assert_eq!(p.run("connections after a fault", &[], &[c]), Ok(()));

    // Maglev range writes from a row start, whole rows, into the bank not serving: each line
    // of data a row written whole. Slot words with their upper bits set too (the table keeps
    // the low 16, as the window does); read back by rows afterwards.
    for count in [16u32, 32, 1024, 4096] {
        let index = 16 * rng.random_range(0..(mg - count) / 16);
        let data: Vec<u32> = (0..count).map(|_| rng.random()).collect();
        let c = mg_write(true, count, index, base);
        let what = format!("Maglev rows written: {count} from {index}");
        assert_eq!(p.run(&what, &data, &[c]), Ok(()));
        let c = mg_read(true, count, index, base);
        assert_eq!(p.run(&format!("{what}, read back"), &[], &[c]), Ok(()));
    }
    // Not whole rows, or off the line: an entry at a time, as before.
    let data: Vec<u32> = (0..40).map(|_| rng.random()).collect();
    for (what, c) in [
        (
            "Maglev write of 40 slots from a row start",
            mg_write(true, 40, 64, base),
        ),
        (
            "Maglev write of 32 slots off the line",
            mg_write(true, 32, 96, base + 4),
        ),
    ] {
        assert_eq!(p.run(what, &data, &[c]), Ok(()));
    }
    let c = mg_read(true, 160, 0, base);
    assert_eq!(p.run("Maglev rows 0-9 read back", &[], &[c]), Ok(()));
    // Past the end: the rows within written, then BAD_INDEX; data not mapped: DMA_FAULT.
    let data: Vec<u32> = (0..48).map(|_| rng.random()).collect();
    let c = mg_write(true, 48, mg - 32, base);
    fails_with(
        p.run("Maglev rows written past the end", &data, &[c]),
        "BadIndex",
        "Maglev rows written past the end",
    );
    let c = mg_write(true, 64, 0, UNMAPPED);
    fails_with(
        p.run("Maglev rows from unmapped data", &[], &[c]),
        "DmaFault",
        "Maglev rows from unmapped data",
    );
    let c = mg_read(true, 64, mg - 64, base);
    assert_eq!(p.run("Maglev end rows read back", &[], &[c]), Ok(()));
    let c = mg_read(true, 64, 0, base);
    assert_eq!(p.run("Maglev first rows read back", &[], &[c]), Ok(()));

    // A long read with traffic running meanwhile: the bulk reads share the memory ports with
    // the packets' reads (and their ids).
    let compiled = crate::compiled_example("web.yaml");
    let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
    let frames: Vec<Vec<u8>> = (0..120).map(|_| scenario.frame(&mut rng)).collect();
    let zero = vec![0u32; SIZES.cmd_data / 4];
    p.rtl_rings.write_data(0, &zero).expect("RTL data");
    p.model_rings.write_data(0, &zero).expect("model data");
    let c = ct_read(4096, 0, base);
    p.rtl_rings.submit(&c).expect("RTL submit");
    let dev0 = p.rtl.read32(dma::CMD_DEV).expect("cmd_dev");
    p.rtl_rings.ring_cmd(&mut p.rtl).expect("RTL doorbell");
    let host = p.rtl.read32(dma::CMD_HOST).expect("cmd_host");
    // The frames go in once the first part is done, the next already running: they meet the
    // bulk reads in the lookup. (Their results wait on the host memory, which the read's
    // writes share with their events: that is slower, and no matter here.)
    let mut dev = dev0;
    for _ in 0..100_000 {
        dev = p.rtl.read32(dma::CMD_DEV).expect("cmd_dev");
        if dev != dev0 {
            break;
        }
        p.rtl.wait(Duration::from_nanos(100)).expect("clocks");
    }
    assert!(
        dev != dev0 && dev.wrapping_sub(dev0) < host.wrapping_sub(dev0),
        "the read's first part done and more to run (cmd_dev {dev0} -> {dev}, cmd_host {host})"
    );
    let t0 = p.rtl.cycles().expect("clocks");
    let mut got = Vec::new();
    for chunk in frames.chunks(10) {
        got.extend(p.rtl.receive(chunk.to_vec()).expect("RTL traffic"));
    }
    let traffic_clocks = p.rtl.cycles().expect("clocks") - t0;
    assert_eq!(
        outcome(p.rtl_rings.execute(&mut p.rtl, TIMEOUT)),
        Ok(()),
        "the read under traffic"
    );
    p.model_rings.submit(&c).expect("model submit");
    assert_eq!(
        outcome(p.model_rings.execute(&mut p.model, TIMEOUT)),
        Ok(())
    );
    let mut out = vec![0u8; 16384];
    for (i, f) in frames.iter().enumerate() {
        let r = p.model.lock().receive(f, &mut out).expect("model traffic");
        assert_eq!(got[i].result, r, "packet {i} during the read");
    }
    let mut a = vec![0u32; 4096 * CtEntry::WORDS];
    let mut b = vec![0u32; 4096 * CtEntry::WORDS];
    p.rtl_rings.read_data(0, &mut a).expect("RTL data");
    p.model_rings.read_data(0, &mut b).expect("model data");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!(
            "the read under traffic: word {i} RTL {:#010x}, model {:#010x}",
            a[i], b[i]
        );
    }
    println!(
        "range reads by rows on the RTL: {} commands as the model ran them; {} frames \
         sent during a 4,096-connection read, their results in {traffic_clocks} clocks",
        p.commands,
        frames.len(),
    );
}

/// Connection writes go out one after another while the next record's words come in, each
/// entry's old state read ahead (nlb_conntrack): lists that write an index again right after
/// itself, two records later, and its bucket's other ways between, must leave the entries and
/// `conntrack.count` as the model does, entry by entry, on chip and on the HBM model (where a
/// read ahead is still out when the write before it lands).
#[test]
fn rtl_connection_writes_back_to_back_keep_the_count() {
    for hbm in [false, true] {
        let seed = seed_from_env(0xc0de_0007) + u64::from(hbm);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut p = Pair::with_memory(seed, hbm);
        let base = p.addr(0);
        let ct_len = Profile::by_name("sim").expect("sim").ct_entries();
        let bucket = 4 * rng.random_range(0..ct_len / 4 - 4);
        // (index, valid): the same entry set, cleared, set, set again and cleared back to back;
        // a bucket's ways around it; an index again two and three records later.
        let a = bucket + 1;
        let script: Vec<(u32, bool)> = vec![
            (a, true),
            (a, false),
            (a, true),
            (a, true),
            (a + 1, true),
            (a, false),
            (a - 1, true),
            (a, true),
            (a + 1, false),
            (a + 2, true),
            (a + 1, true),
            (a + 4, true),
            (a + 1, false),
            (a + 4, false),
            (a + 4, true),
            (a - 1, false),
        ];
        let mut recs = Vec::new();
        for &(i, valid) in &script {
            recs.push(i);
            recs.extend(random_connection(&mut rng, valid));
        }
        let c = cmd(
            DmaCmd::CtWrite,
            Table::Vip,
            false,
            true,
            script.len() as u32,
            0,
            base,
        );
        assert_eq!(p.run("same entries back to back", &recs, &[c]), Ok(()));
        // A range over the bucket and the next, then a list that clears some of it again.
        let mut data = Vec::new();
        for k in 0..8 {
            data.extend(random_connection(&mut rng, k % 3 != 0));
        }
        let c = cmd(DmaCmd::CtWrite, Table::Vip, false, false, 8, bucket, base);
        assert_eq!(p.run("a range over them", &data, &[c]), Ok(()));
        let mut recs = Vec::new();
        for k in [7u32, 0, 7, 3, 3, 5] {
            recs.push(bucket + k);
            recs.extend(random_connection(&mut rng, k == 3));
        }
        let c = cmd(DmaCmd::CtWrite, Table::Vip, false, true, 6, 0, base);
        assert_eq!(p.run("cleared again", &recs, &[c]), Ok(()));
        // What the table holds now, read entry by entry through the window (a list) and by
        // rows (a range).
        let mut list = Vec::new();
        for k in 0..8 {
            list.push(bucket + k);
            list.extend(std::iter::repeat_n(0u32, CtEntry::WORDS));
        }
        let c = cmd(DmaCmd::CtRead, Table::Vip, false, true, 8, 0, base);
        assert_eq!(p.run("read back (list)", &list, &[c]), Ok(()));
        let c = cmd(DmaCmd::CtRead, Table::Vip, false, false, 8, bucket, base);
        assert_eq!(p.run("read back (range)", &[], &[c]), Ok(()));
        // Many random writes into a few buckets, each index often twice in a row.
        let mut recs = Vec::new();
        let mut last = bucket;
        for _ in 0..400 {
            let i = if rng.random_range(0..3) == 0 {
                last
            } else {
                bucket + rng.random_range(0..16)
            };
            last = i;
            recs.push(i);
            let valid = rng.random_range(0..3) != 0;
            recs.extend(random_connection(&mut rng, valid));
        }
        let c = cmd(DmaCmd::CtWrite, Table::Vip, false, true, 400, 0, base);
        assert_eq!(p.run("400 into four buckets", &recs, &[c]), Ok(()));
        let c = cmd(DmaCmd::CtRead, Table::Vip, false, false, 16, bucket, base);
        assert_eq!(p.run("the four buckets", &[], &[c]), Ok(()));
        println!(
            "connection writes back to back ({}): entries and count as the model's",
            if hbm { "HBM model" } else { "on chip" }
        );
    }
}
