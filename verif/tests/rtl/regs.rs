//! `nlb_regs` through its AXI-Lite port, the way software uses it, with random delays on every
//! AXI channel: the block list, fw_id, ctrl, and the table window into both banks of every
//! table (checked against `nlb_hw::Tables` as the reference bank and through the pipeline's
//! read ports), and the window's error cases.

use nlb_hw::blocks::{
    self, conntrack, counters, ctrl, fw_id, mem, queues, reboot, spi_flash, table,
};
use nlb_hw::enums::{Affinity, DefaultAction, Delivery, Table, TableCmd};
use nlb_hw::layouts::{
    AclEntry, AclPrefix, BackendEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{
    NicSettings, Profile, Tables, BLOCK_TYPE_PREFIX, DESIGN_VERSION, NIC_REGISTERS, REGMAP_VERSION,
};
use nlb_verif::bench::{seed_from_env, trace_always, wave_path, Bench};
use nlb_verif::build_info;
use nlb_verif::models::Regs;
use nlb_verif::regbus::RegBus;
use nlb_verif::{Verilated, TABLE_RD_LATENCY};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// status bits (docs/regmap.md: bit 0 busy, bit 1 error).
const STATUS_BUSY: u32 = 1;
const STATUS_ERROR: u32 = 2;

fn sim_profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

/// A reset register file on a bus with random channel timing.
fn bus(name: &str, seed: u64) -> RegBus {
    let sim = if trace_always() {
        Verilated::with_trace::<Regs>(&wave_path(name, seed))
    } else {
        Verilated::new::<Regs>()
    };
    let mut sim = sim.expect("model");
    sim.reset(4).expect("reset");
    let mut rng = StdRng::seed_from_u64(seed);
    let idle = rng.random_range(0.0..0.6);
    let backpressure = rng.random_range(0.0..0.6);
    RegBus::new(Bench::new(sim, seed ^ 0x9e37_79b9), idle, backpressure).expect("bus")
}

/// The far side of the extension bus: answers every access after a random delay, records
/// what arrived.
struct ExtSlave {
    wr_req: nlb_verif::Port,
    wr_addr: nlb_verif::Port,
    wr_data: nlb_verif::Port,
    wr_strb: nlb_verif::Port,
    wr_ack: nlb_verif::Port,
    rd_req: nlb_verif::Port,
    rd_addr: nlb_verif::Port,
    rd_data: nlb_verif::Port,
    rd_ack: nlb_verif::Port,
    wr_wait: Option<u32>,
    rd_wait: Option<(u32, u32)>,
    writes: Vec<(u32, u32, u32)>,
    reads: Vec<u32>,
}

impl ExtSlave {
    fn new(sim: &Verilated) -> Result<ExtSlave, nlb_verif::VerifError> {
        Ok(ExtSlave {
            wr_req: sim.port("ext_wr_req")?,
            wr_addr: sim.port("ext_wr_addr")?,
            wr_data: sim.port("ext_wr_data")?,
            wr_strb: sim.port("ext_wr_strb")?,
            wr_ack: sim.port("ext_wr_ack")?,
            rd_req: sim.port("ext_rd_req")?,
            rd_addr: sim.port("ext_rd_addr")?,
            rd_data: sim.port("ext_rd_data")?,
            rd_ack: sim.port("ext_rd_ack")?,
            wr_wait: None,
            rd_wait: None,
            writes: Vec::new(),
            reads: Vec::new(),
        })
    }

    /// What the block answers for a read of `addr`.
    fn answer(addr: u32) -> u32 {
        addr.rotate_left(7) ^ 0xa5a5_0000
    }
}

impl nlb_verif::bench::Agent for ExtSlave {
    fn drive(
        &mut self,
        sim: &mut Verilated,
        rng: &mut StdRng,
    ) -> Result<(), nlb_verif::VerifError> {
        let wr_done = matches!(self.wr_wait, Some(0));
        let rd_done = matches!(self.rd_wait, Some((0, _)));
        sim.set_bit(self.wr_ack, wr_done)?;
        sim.set_bit(self.rd_ack, rd_done)?;
        let data = match self.rd_wait {
            Some((0, addr)) => ExtSlave::answer(addr),
            _ => rng.random(),
        };
        sim.set_u64(self.rd_data, u64::from(data))?;
        if wr_done {
            self.wr_wait = None;
        }
        if rd_done {
            self.rd_wait = None;
        }
        if let Some(n) = self.wr_wait.as_mut() {
            *n -= 1;
        }
        if let Some((n, _)) = self.rd_wait.as_mut() {
            *n -= 1;
        }
        let _ = rng;
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), nlb_verif::VerifError> {
        if sim.get_bit(self.wr_req)? {
            self.writes.push((
                sim.get_u64(self.wr_addr)? as u32,
                sim.get_u64(self.wr_data)? as u32,
                sim.get_u64(self.wr_strb)? as u32,
            ));
            self.wr_wait = Some(1 + (sim.cycle() % 4) as u32);
        }
        if sim.get_bit(self.rd_req)? {
            let addr = sim.get_u64(self.rd_addr)? as u32;
            self.reads.push(addr);
            self.rd_wait = Some((1 + (sim.cycle() % 3) as u32, addr));
        }
        Ok(())
    }
}

fn check_protocol(bus: &RegBus) {
    assert!(
        bus.master.violations().is_empty(),
        "AXI-Lite violations: {:?}",
        bus.master.violations()
    );
}

#[test]
fn block_list_walk_matches_the_regmap() {
    let seed = seed_from_env(11);
    let mut bus = bus("regs_blocks", seed);
    // Walk the list from offset 0 as the driver does.
    let mut found = Vec::new();
    let mut offset = 0u32;
    loop {
        let ty = bus.read32(offset).expect("TYPE");
        let version = bus.read32(offset + 4).expect("VERSION");
        let next = bus.read32(offset + 8).expect("NEXT");
        assert_eq!(
            blocks::type_word::PREFIX.bits(ty),
            BLOCK_TYPE_PREFIX,
            "block at {offset:#x}"
        );
        found.push((offset, ty, version));
        assert!(
            found.len() <= blocks::ALL.len(),
            "the list does not end: {found:x?}"
        );
        if next == 0 {
            break;
        }
        assert!(
            next > offset,
            "NEXT must move forward: {offset:#x} -> {next:#x}"
        );
        offset = next;
    }
    let expected: Vec<_> = blocks::ALL.iter().map(|&(_, b, t, v)| (b, t, v)).collect();
    assert_eq!(found, expected, "seed {seed}");

    // The conntrack, counters, spi_flash and mem blocks past their headers go to the extension bus: the
    // access waits for the block's answer, writes arrive with address, data and strobes,
    // reads return what the block answered.
    let mut ext = ExtSlave::new(&bus.bench.sim).expect("ext ports");
    for r in [
        conntrack::INDEX,
        conntrack::STATUS,
        conntrack::HIT_READ,
        conntrack::DATA,
        conntrack::DATA + 4 * 31,
        counters::SELECT,
        counters::SNAPSHOT,
        counters::PACKETS_LO,
        counters::DROPS_HI,
        spi_flash::CTRL,
        spi_flash::TXRX,
        spi_flash::STATUS,
        mem::CT_READS_LO,
        mem::MAGLEV_LATENCY_MAX,
        mem::WAIT_CLOCKS_HI,
    ] {
        let value = 0x5a00_0000 ^ r;
        bus.master
            .write_strb(&mut bus.bench, &mut [&mut ext], r, value, 0b0110)
            .expect("write");
        assert_eq!(
            ext.writes.pop(),
            Some((r, value, 0b0110)),
            "write to {r:#x}"
        );
        assert!(ext.writes.is_empty());
        let got = bus
            .master
            .read(&mut bus.bench, &mut [&mut ext], r)
            .expect("read");
        assert_eq!(got, ExtSlave::answer(r), "read of {r:#x}");
        assert_eq!(ext.reads.pop(), Some(r));
        assert!(ext.reads.is_empty());
    }
    // Their header words stay in the register file.
    for base in [conntrack::BASE, counters::BASE, spi_flash::BASE, mem::BASE] {
        bus.master
            .read(&mut bus.bench, &mut [&mut ext], base)
            .expect("read");
        assert!(
            ext.reads.is_empty(),
            "{base:#x}: the header went to the bus"
        );
    }

    // Blocks the register file does not implement: header words, then zeros; writes are
    // ignored.
    for (base, regs) in [
        (
            reboot::BASE,
            [reboot::BOOT_ADDR, reboot::BOOT_STATUS, reboot::BOOT_STATUS],
        ),
        (
            queues::BASE,
            [queues::PUNT_STATUS, queues::IRQ_MASK, queues::PUNT_DATA],
        ),
    ] {
        for r in regs {
            bus.write32(r, 0xdead_beef).expect("write");
            assert_eq!(
                bus.read32(r).expect("read"),
                0,
                "{base:#x}: register {r:#x}"
            );
        }
    }
    // A hole between registers of an implemented block reads 0.
    assert_eq!(bus.read32(table::STATUS + 4).expect("read"), 0);
    check_protocol(&bus);
}

#[test]
fn firmware_id_words() {
    let mut bus = bus("regs_fw_id", seed_from_env(12));
    let p = sim_profile();
    let expect = [
        (fw_id::DESIGN_VERSION, DESIGN_VERSION),
        (fw_id::REGMAP_VERSION, REGMAP_VERSION),
        (fw_id::BUILD_ID, build_info::build_id()),
        (fw_id::GIT_HASH, build_info::git_hash()),
        // docs/regmap.md: 0x5100 = simulated board; no FPGA part in simulation.
        (fw_id::BOARD_ID, 0x5100),
        (fw_id::PART_ID, 0),
        (fw_id::PROFILE_ID, p.id),
        (fw_id::CAP_VIP_BUCKETS, p.vip_buckets),
        (fw_id::CAP_VIP_WAYS, p.vip_ways),
        (fw_id::CAP_RULES, p.rules),
        (fw_id::CAP_POOLS, p.pools),
        (fw_id::CAP_MAGLEV_SLOTS, p.maglev_slots),
        (fw_id::CAP_BACKENDS, p.backends),
        (fw_id::CAP_CT_BUCKETS, p.ct_buckets),
        (fw_id::CAP_CT_WAYS, p.ct_ways),
        (fw_id::CAP_QUEUE_DEPTH, p.queue_depth),
        (fw_id::CAP_CT_CHANNELS, p.ct_channels),
        (fw_id::CAP_MAGLEV_CHANNELS, p.maglev_channels),
        (fw_id::CAP_MEM_SLOTS, p.mem_slots),
    ];
    for (offset, value) in expect {
        assert_eq!(
            bus.read32(offset).expect("read"),
            value,
            "fw_id at {offset:#x}"
        );
        // Read-only: a write changes nothing.
        bus.write32(offset, !value).expect("write");
        assert_eq!(
            bus.read32(offset).expect("read"),
            value,
            "fw_id at {offset:#x}"
        );
    }
    assert_ne!(build_info::build_id(), 0, "the build stamps a build time");
    check_protocol(&bus);
}

/// What a ctrl register reads after writing `v` (docs: the defined bits; lengths saturate).
fn ctrl_readback(offset: u32, v: u32) -> u32 {
    match offset {
        ctrl::OUTER_SRC_V4_LEN => v.min(32),
        ctrl::OUTER_SRC_V6_LEN => v.min(128),
        _ => v & blocks::defined(offset),
    }
}

/// The outer IPv6 prefix length reaches the pipeline as a mask of that many leading ones.
fn check_v6_mask(bus: &mut RegBus, len: u32, seed: u64) {
    let sim = &mut bus.bench.sim;
    let p = sim.port("ctrl_outer_src_v6_mask").expect("ctrl port");
    let mask = sim
        .get_words(p)
        .expect("get")
        .iter()
        .rev()
        .fold(0u128, |m, &word| (m << 32) | u128::from(word));
    assert!(
        mask.leading_ones() == len && mask.count_ones() == len,
        "ctrl_outer_src_v6_mask {mask:#x} for outer_src_v6_len {len}, seed {seed}"
    );
}

#[test]
fn ctrl_registers_reset_values_readback_and_outputs() {
    let seed = seed_from_env(13);
    let mut bus = bus("regs_ctrl", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let d = NicSettings::default();
    // NicSettings::default() is the regmap's reset values.
    let settings = NIC_REGISTERS
        .iter()
        .copied()
        .zip(d.words().expect("default settings fit"));
    let after_reset: Vec<(u32, u32)> = [
        (ctrl::ENABLE, 0),
        (ctrl::ACTIVE_BANK, 0),
        (ctrl::GENERATION, 0),
    ]
    .into_iter()
    .chain(settings)
    .collect();
    for &(offset, value) in &after_reset {
        assert_eq!(
            bus.read32(offset).expect("read"),
            value,
            "reset value at {offset:#x}"
        );
    }

    check_v6_mask(&mut bus, u32::from(d.outer_src_v6_len), seed);

    let rw: Vec<u32> = after_reset.iter().map(|&(o, _)| o).collect();
    for round in 0..8 {
        let mut written = Vec::new();
        for &offset in &rw {
            let v = match (offset, round % 2) {
                (ctrl::OUTER_SRC_V4_LEN, _) => rng.random_range(0..64),
                (ctrl::OUTER_SRC_V6_LEN, _) => rng.random_range(0..300),
                (ctrl::DEFAULT_ACTION, 0) => DefaultAction::ALL[rng.random_range(0..2)].value(),
                _ => rng.random(),
            };
            bus.write32(offset, v).expect("write");
            written.push((offset, ctrl_readback(offset, v)));
        }
        for &(offset, want) in &written {
            assert_eq!(
                bus.read32(offset).expect("read"),
                want,
                "{offset:#x} seed {seed}"
            );
        }
        // The pipeline sees the same values on the ctrl outputs.
        let get = |bus: &mut RegBus, name: &str| -> Vec<u32> {
            let sim = &mut bus.bench.sim;
            let p = sim.port(name).expect("ctrl port");
            sim.get_words(p).expect("get")
        };
        let w = |o: u32| written.iter().find(|(x, _)| *x == o).map_or(0, |(_, v)| *v);
        assert_eq!(get(&mut bus, "ctrl_enable"), vec![w(ctrl::ENABLE)]);
        assert_eq!(
            get(&mut bus, "ctrl_active_bank"),
            vec![w(ctrl::ACTIVE_BANK)]
        );
        assert_eq!(get(&mut bus, "ctrl_generation"), vec![w(ctrl::GENERATION)]);
        assert_eq!(
            get(&mut bus, "ctrl_default_action"),
            vec![w(ctrl::DEFAULT_ACTION)]
        );
        assert_eq!(
            get(&mut bus, "ctrl_local_mac"),
            vec![w(ctrl::LOCAL_MAC_LO), w(ctrl::LOCAL_MAC_HI)]
        );
        assert_eq!(get(&mut bus, "ctrl_gue_port"), vec![w(ctrl::GUE_PORT)]);
        assert_eq!(
            get(&mut bus, "ctrl_outer_src_v4"),
            vec![w(ctrl::OUTER_SRC_V4)]
        );
        assert_eq!(
            get(&mut bus, "ctrl_outer_src_v4_len"),
            vec![w(ctrl::OUTER_SRC_V4_LEN)]
        );
        assert_eq!(
            get(&mut bus, "ctrl_outer_src_v6"),
            vec![
                w(ctrl::OUTER_SRC_V6_3),
                w(ctrl::OUTER_SRC_V6_2),
                w(ctrl::OUTER_SRC_V6_1),
                w(ctrl::OUTER_SRC_V6_0)
            ]
        );
        check_v6_mask(&mut bus, w(ctrl::OUTER_SRC_V6_LEN), seed);
    }

    // Byte strobes: only the enabled bytes change.
    bus.write32(ctrl::GENERATION, 0x1122_3344).expect("write");
    bus.write32_strb(ctrl::GENERATION, 0xaabb_ccdd, 0b0101)
        .expect("write");
    assert_eq!(bus.read32(ctrl::GENERATION).expect("read"), 0x11bb_33dd);

    // Read-only status comes from the pipeline inputs; writes do not touch it.
    for _ in 0..4 {
        let (in_flight, in_use) = (rng.random::<u32>(), rng.random_range(0..4u32));
        {
            let sim = &mut bus.bench.sim;
            let p = sim.port("stat_packets_in_flight").expect("port");
            sim.set_u64(p, u64::from(in_flight)).expect("set");
            let p = sim.port("stat_bank_in_use").expect("port");
            sim.set_u64(p, u64::from(in_use)).expect("set");
        }
        bus.write32(ctrl::PACKETS_IN_FLIGHT, !in_flight)
            .expect("write");
        assert_eq!(
            bus.read32(ctrl::PACKETS_IN_FLIGHT).expect("read"),
            in_flight
        );
        assert_eq!(bus.read32(ctrl::BANK_IN_USE).expect("read"), in_use);
    }
    check_protocol(&bus);
}

// ---- table window ---------------------------------------------------------------------------

fn mask(width: usize) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// A random valid entry of `table`, packed by nlb-hw.
fn random_entry(table: Table, rng: &mut StdRng) -> Vec<u32> {
    let r = |rng: &mut StdRng, w: usize| rng.random::<u128>() & mask(w);
    let words = match table {
        Table::Vip => VipEntry {
            valid: rng.random(),
            protocol: rng.random(),
            addr: rng.random(),
            slot: std::array::from_fn(|_| PortSlot {
                valid: rng.random(),
                port_lo: rng.random(),
                port_hi: rng.random(),
                rule: r(rng, PortSlot::RULE_WIDTH) as u16,
            }),
        }
        .pack()
        .map(|w| w.to_vec()),
        Table::Rule => RuleEntry {
            valid: rng.random(),
            acl_enabled: rng.random(),
            pool: r(rng, RuleEntry::POOL_WIDTH) as u16,
        }
        .pack()
        .map(|w| w.to_vec()),
        Table::Acl => AclEntry {
            prefix: std::array::from_fn(|_| AclPrefix {
                valid: rng.random(),
                prefix_len: rng.random(),
                addr: rng.random(),
            }),
        }
        .pack()
        .map(|w| w.to_vec()),
        Table::Pool => PoolEntry {
            valid: rng.random(),
            affinity: Affinity::ALL[rng.random_range(0..Affinity::ALL.len())],
            delivery: Delivery::ALL[rng.random_range(0..Delivery::ALL.len())],
            maglev_base: r(rng, PoolEntry::MAGLEV_BASE_WIDTH) as u32,
            maglev_size: r(rng, PoolEntry::MAGLEV_SIZE_WIDTH) as u32,
            backup_pool: r(rng, PoolEntry::BACKUP_POOL_WIDTH) as u16,
            has_backup: rng.random(),
            failover_ratio: r(rng, PoolEntry::FAILOVER_RATIO_WIDTH) as u16,
            failed_over: rng.random(),
            track: rng.random(),
            idle_timeout: rng.random(),
        }
        .pack()
        .map(|w| w.to_vec()),
        Table::Maglev => MaglevSlot {
            backend: rng.random(),
        }
        .pack()
        .map(|w| w.to_vec()),
        Table::Backend => BackendEntry {
            valid: rng.random(),
            is_ipv6: rng.random(),
            addr: rng.random(),
            mac: r(rng, BackendEntry::MAC_WIDTH) as u64,
        }
        .pack()
        .map(|w| w.to_vec()),
    };
    words.expect("random fields fit their widths")
}

fn select(table: Table, bank: u32) -> u32 {
    table::Select {
        table,
        bank: bank == 1,
    }
    .word()
}

/// A command carrying its entry index (docs/regmap.md, table_cmd).
fn at(cmd: TableCmd, index: u32) -> u32 {
    table::Cmd { op: cmd, index }.word().expect("index fits")
}

/// WRITE_AT through the window (the driver's form); returns status afterwards.
fn window_write(bus: &mut RegBus, table: Table, bank: u32, index: u32, words: &[u32]) -> u32 {
    bus.write32(table::SELECT, select(table, bank))
        .expect("select");
    bus.write_bulk(table::DATA, words).expect("data");
    bus.write32(table::CMD, at(TableCmd::WriteAt, index))
        .expect("cmd");
    bus.read32(table::STATUS).expect("status")
}

/// WRITE through the window with the index register (the two-register form).
fn window_write_plain(bus: &mut RegBus, table: Table, bank: u32, index: u32, words: &[u32]) -> u32 {
    bus.write32(table::SELECT, select(table, bank))
        .expect("select");
    bus.write32(table::INDEX, index).expect("index");
    bus.write_bulk(table::DATA, words).expect("data");
    bus.write32(table::CMD, TableCmd::Write.value())
        .expect("cmd");
    bus.read32(table::STATUS).expect("status")
}

/// READ_AT through the window; returns (status, data words 0..n).
fn window_read(bus: &mut RegBus, table: Table, bank: u32, index: u32, n: usize) -> (u32, Vec<u32>) {
    bus.write32(table::SELECT, select(table, bank))
        .expect("select");
    bus.write32(table::CMD, at(TableCmd::ReadAt, index))
        .expect("cmd");
    let status = bus.read32(table::STATUS).expect("status");
    let mut words = vec![0u32; n];
    bus.read_bulk(table::DATA, &mut words).expect("data");
    (status, words)
}

/// Port prefix and row geometry of a table's pipeline read port.
fn pipeline_port(table: Table) -> (&'static str, u32) {
    let p = sim_profile();
    match table {
        Table::Vip => ("vip", p.vip_ways),
        Table::Rule => ("rule", 1),
        Table::Acl => ("acl", 1),
        Table::Pool => ("pool", 1),
        Table::Maglev => ("maglev", 1),
        Table::Backend => ("backend", 1),
    }
}

/// Reads one entry through the pipeline's read port (a whole row, then the lane); a Maglev
/// slot from the memory stage behind the register file (the bus plays it).
fn pipeline_read(bus: &mut RegBus, table: Table, bank: u32, index: u32) -> Vec<u32> {
    if table == Table::Maglev {
        let slot = bus
            .slots
            .as_ref()
            .and_then(|s| s.slots.get(&(bank as u8, index)).copied())
            .unwrap_or(0);
        return vec![u32::from(slot)];
    }
    let (prefix, lanes) = pipeline_port(table);
    let width = Tables::entry_words(table);
    let sim = &mut bus.bench.sim;
    let en = sim.port(&format!("{prefix}_rd_en")).expect("port");
    let bank_p = sim.port(&format!("{prefix}_rd_bank")).expect("port");
    let row = sim.port(&format!("{prefix}_rd_row")).expect("port");
    let data = sim.port(&format!("{prefix}_rd_data")).expect("port");
    sim.set_bit(en, true).expect("set");
    sim.set_u64(bank_p, u64::from(bank)).expect("set");
    sim.set_u64(row, u64::from(index / lanes)).expect("set");
    bus.idle(TABLE_RD_LATENCY).expect("clock");
    let sim = &mut bus.bench.sim;
    sim.set_bit(en, false).expect("set");
    let row_words = sim.get_words(data).expect("get");
    // Lane `index % lanes` of the row, entry bits only.
    let entry_bits = data.width as usize / lanes as usize;
    let lane = (index % lanes) as usize;
    let bit = |b: usize| (row_words[b / 32] >> (b % 32)) & 1;
    let mut out = vec![0u32; width];
    for b in 0..entry_bits {
        out[b / 32] |= bit(lane * entry_bits + b) << (b % 32);
    }
    out
}

#[test]
fn table_window_writes_and_reads_every_table_in_both_banks() {
    let seed = seed_from_env(14);
    let mut bus = bus("regs_tables", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let p = sim_profile();
    // The reference: two banks of typed tables in nlb-hw.
    let mut reference = [Tables::empty(p), Tables::empty(p)];
    let mut touched = Vec::new();
    for table in Table::ALL {
        let depth = reference[0].depth(table);
        let mut indices = vec![0, depth - 1];
        indices.extend((0..10).map(|_| rng.random_range(0..depth)));
        for &index in &indices {
            // The same index in both banks gets different entries; both command forms.
            for bank in 0..2u32 {
                let words = random_entry(table, &mut rng);
                let status = if rng.random() {
                    window_write(&mut bus, table, bank, index, &words)
                } else {
                    window_write_plain(&mut bus, table, bank, index, &words)
                };
                assert_eq!(
                    status, 0,
                    "{table:?}[{index}] bank {bank}: status after WRITE"
                );
                assert_eq!(bus.read32(table::INDEX).expect("index"), index);
                reference[bank as usize]
                    .write_entry(table, index, &words)
                    .expect("reference accepts packed words");
                touched.push((table, bank, index));
            }
        }
    }
    for &(table, bank, index) in &touched {
        let want = reference[bank as usize]
            .read_entry(table, index)
            .expect("reference entry");
        let (status, got) = window_read(&mut bus, table, bank, index, want.len());
        assert_eq!(
            status, 0,
            "{table:?}[{index}] bank {bank}: status after READ"
        );
        assert_eq!(
            got, want,
            "{table:?}[{index}] bank {bank} via the window, seed {seed}"
        );
        let via_pipeline = pipeline_read(&mut bus, table, bank, index);
        assert_eq!(
            via_pipeline, want,
            "{table:?}[{index}] bank {bank} via the pipeline port, seed {seed}"
        );
    }
    check_protocol(&bus);
}

#[test]
fn table_window_errors_touch_nothing() {
    let seed = seed_from_env(15);
    let mut bus = bus("regs_table_errors", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let p = sim_profile();
    let depths = Tables::empty(p);

    for table in Table::ALL {
        let depth = depths.depth(table);
        let n = Tables::entry_words(table);
        let good = random_entry(table, &mut rng);
        assert_eq!(window_write(&mut bus, table, 1, 0, &good), 0);
        // One past the end (which would alias entry 0 if the index were truncated) and far
        // beyond, the largest index a command carries: error, nothing written, the index
        // register and the data words left as they were.
        for bad in [depth, depth + 1, 0xff_ffff] {
            let other = random_entry(table, &mut rng);
            let status = window_write(&mut bus, table, 1, bad, &other);
            assert_eq!(
                status, STATUS_ERROR,
                "{table:?} WRITE_AT {bad} (depth {depth})"
            );
            let (status, words) = window_read(&mut bus, table, 1, bad, n);
            assert_eq!(status, STATUS_ERROR, "{table:?} READ_AT {bad}");
            assert_eq!(
                words, other,
                "{table:?}: a refused READ_AT keeps the window"
            );
            assert_eq!(bus.read32(table::INDEX).expect("index"), 0);
        }
        for bad in [depth, u32::MAX] {
            let other = random_entry(table, &mut rng);
            let status = window_write_plain(&mut bus, table, 1, bad, &other);
            assert_eq!(status, STATUS_ERROR, "{table:?} WRITE at {bad}");
        }
        let (status, got) = window_read(&mut bus, table, 1, 0, n);
        assert_eq!(status, 0, "a good command clears the error");
        assert_eq!(got, good, "{table:?}[0] survived the bad writes");
    }

    // Bad table ids and unknown commands: ids past the enumeration, and ids whose low three
    // bits name a table (8 and 0x80 would alias VIP, 0x0d and 0xfd backend if the 8-bit
    // `table` field lost its upper bits).
    for id in [6u32, 7, 8, 0x0d, 0x80, 0xfd, 0xff] {
        bus.write32(table::SELECT, id).expect("select");
        bus.write32(table::INDEX, 0).expect("index");
        bus.write32(table::CMD, TableCmd::Write.value())
            .expect("cmd");
        assert_eq!(
            bus.read32(table::STATUS).expect("status"),
            STATUS_ERROR,
            "table {id}"
        );
    }
    bus.write32(table::SELECT, select(Table::Rule, 0))
        .expect("select");
    // Unknown commands, and WRITE/READ with index bits set.
    for cmd in [0u32, 5, 0xff, 0x101, 0x8000_0002] {
        bus.write32(table::CMD, cmd).expect("cmd");
        assert_eq!(
            bus.read32(table::STATUS).expect("status"),
            STATUS_ERROR,
            "cmd {cmd}"
        );
    }
    // select keeps bits 8..0 only.
    bus.write32(table::SELECT, 0xffff_ffff).expect("select");
    assert_eq!(bus.read32(table::SELECT).expect("select"), 0x1ff);

    // A pool entry whose enum fields hold undefined values is refused.
    let good = random_entry(Table::Pool, &mut rng);
    assert_eq!(window_write(&mut bus, Table::Pool, 0, 5, &good), 0);
    let undefined_affinity = (0..1u32 << PoolEntry::AFFINITY_WIDTH)
        .filter(|v| Affinity::from_value(*v).is_none())
        .map(|v| (PoolEntry::AFFINITY_LSB, v));
    let undefined_delivery = (0..1u32 << PoolEntry::DELIVERY_WIDTH)
        .filter(|v| Delivery::from_value(*v).is_none())
        .map(|v| (PoolEntry::DELIVERY_LSB, v));
    let mut refused = 0;
    for (lsb, value) in undefined_affinity.chain(undefined_delivery) {
        let mut words = random_entry(Table::Pool, &mut rng);
        let width = if lsb == PoolEntry::AFFINITY_LSB {
            PoolEntry::AFFINITY_WIDTH
        } else {
            PoolEntry::DELIVERY_WIDTH
        };
        // Both fields sit inside word 0.
        words[0] = (words[0] & !((mask(width) as u32) << lsb)) | (value << lsb);
        assert!(PoolEntry::unpack(&words).is_err(), "nlb-hw refuses it too");
        let status = window_write(&mut bus, Table::Pool, 0, 5, &words);
        assert_eq!(status, STATUS_ERROR, "pool field at bit {lsb} = {value}");
        refused += 1;
    }
    assert!(refused > 0);
    let (_, got) = window_read(
        &mut bus,
        Table::Pool,
        0,
        5,
        Tables::entry_words(Table::Pool),
    );
    assert_eq!(got, good, "refused pool entries changed nothing");
    check_protocol(&bus);
}

#[test]
fn data_window_read_back_strobes_and_words_past_the_entry() {
    let seed = seed_from_env(16);
    let mut bus = bus("regs_data_window", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let count = table::DATA_COUNT as usize;
    let pattern: Vec<u32> = (0..count).map(|_| rng.random()).collect();
    bus.write_bulk(table::DATA, &pattern).expect("data");
    let mut back = vec![0u32; count];
    bus.read_bulk(table::DATA, &mut back).expect("data");
    assert_eq!(back, pattern, "all {count} data words are read/write");

    // Byte strobes on a data word.
    bus.write32_strb(table::DATA + 8, 0xaabb_ccdd, 0b0010)
        .expect("write");
    // Strobe 0b0010: byte 1 of the word (little-endian) takes 0xcc, the others stay.
    let mut bytes = pattern[2].to_le_bytes();
    bytes[1] = 0xcc;
    let want = u32::from_le_bytes(bytes);
    assert_eq!(bus.read32(table::DATA + 8).expect("read"), want);

    // READ of a backend entry rewrites its words only (bits past the entry width read 0),
    // later words keep what was written.
    let entry = random_entry(Table::Backend, &mut rng);
    assert_eq!(window_write(&mut bus, Table::Backend, 0, 9, &entry), 0);
    let filler: Vec<u32> = (0..count).map(|_| rng.random()).collect();
    bus.write_bulk(table::DATA, &filler).expect("data");
    bus.write32(table::SELECT, select(Table::Backend, 0))
        .expect("select");
    bus.write32(table::INDEX, 9).expect("index");
    bus.write32(table::CMD, TableCmd::Read.value())
        .expect("cmd");
    bus.read_bulk(table::DATA, &mut back).expect("data");
    let n = entry.len();
    assert_eq!(&back[..n], &entry[..]);
    assert_eq!(
        &back[n..],
        &filler[n..],
        "words past the entry are left alone"
    );
    let spare = BackendEntry::WORDS * 32 - BackendEntry::WIDTH;
    assert_eq!(back[n - 1] >> (32 - spare), 0, "bits past the width read 0");

    // A write leaves what the memory stores in the window: bits past the entry's width in its
    // last word read 0 afterwards, later words stay, and WRITE_AT leaves its index.
    let entry = random_entry(Table::Backend, &mut rng);
    let mut words = entry.clone();
    words[n - 1] |= u32::MAX << (32 - spare);
    words.push(0x0bad_cafe);
    assert_eq!(window_write(&mut bus, Table::Backend, 1, 4000, &words), 0);
    assert_eq!(bus.read32(table::INDEX).expect("index"), 4000);
    let mut back = vec![0u32; n + 1];
    bus.read_bulk(table::DATA, &mut back).expect("data");
    assert_eq!(&back[..n], &entry[..], "the stored entry, read back");
    assert_eq!(back[n], 0x0bad_cafe);
    assert_eq!(pipeline_read(&mut bus, Table::Backend, 1, 4000), entry);

    // An entry is written from the data words as they are at the command.
    assert_eq!(
        bus.read32(table::STATUS).expect("status") & STATUS_BUSY,
        0,
        "the response of a command waits for its end"
    );
    check_protocol(&bus);
}
