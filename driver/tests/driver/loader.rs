//! The table loader against the simulated device (firmware-sim, in process).

use crate::common;

use common::*;
use nlb_driver::device::{Device, DeviceError, RegOp};
use nlb_driver::discover;
use nlb_driver::fault::CutAfter;
use nlb_driver::loader::{LoadError, Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_hw::blocks::{ctrl, table as win};
use nlb_hw::enums::{Table, Verdict};
use nlb_hw::layouts::RuleEntry;
use nlb_hw::{NicSettings, Tables};
use std::time::Duration;

fn attach(sim: &mut ModelHandle) -> Loader {
    let info = discover(sim).expect("the simulated device is discovered");
    assert_eq!(info.profile.name, "sim");
    Loader::attach(sim, info.profile, LoaderOptions::default()).expect("attach")
}

/// Sends one frame to the VIP; returns (bank, backend, destination MAC of the output).
fn send(sim: &ModelHandle, src_port: u16) -> (u8, Option<u16>, Option<u64>) {
    let mut out = vec![0u8; 16384];
    let f = frame_to_vip(src_port);
    let r = sim.lock().receive(&f, &mut out).expect("receive");
    let mac = (r.verdict == Verdict::Forward).then(|| dst_mac(&out[..r.out_len]));
    (r.bank, r.backend, mac)
}

#[test]
fn first_load_serves_the_image() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    assert_eq!((loader.active_bank(), loader.generation()), (0, 0));
    let a = image(profile(), Which::A, 0);
    let report = loader.load(&mut sim, &a, &NicSettings::default()).unwrap();
    // Hand count: 1 VIP entry, rule 0, pools 0 and 1, slots 0 and 1, 4 backends.
    assert_eq!(report.changed_entries, 10);
    assert_eq!(nonempty_entries(&a), 10);
    assert_eq!((report.bank, report.generation), (1, 1));
    assert_eq!(report.verify_writes, 0, "the read-back is reads only");
    // active_bank, generation, and enable (the device came out of reset disabled).
    assert_eq!(report.control_writes, 3);
    assert_eq!(sim.read32(ctrl::ACTIVE_BANK).unwrap(), 1);
    assert_eq!(sim.read32(ctrl::GENERATION).unwrap(), 1);
    assert_eq!(sim.read32(ctrl::ENABLE).unwrap(), 1);
    assert_eq!(sim.lock().bank(1), &a, "bank 1 holds the image");
    assert_eq!(
        sim.lock().bank(0),
        &Tables::empty(profile()),
        "bank 0 untouched"
    );
    let (bank, backend, mac) = send(&sim, 40000);
    assert_eq!((bank, backend), (1, Some(A_BACKEND)));
    assert_eq!(
        mac,
        Some(backend_mac(A_BACKEND)),
        "delivered by MAC rewrite"
    );
}

#[test]
fn delta_load_writes_only_what_differs_from_the_target_bank() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let (a, b) = (image(profile(), Which::A, 0), image(profile(), Which::B, 0));
    let nic = NicSettings::default();
    loader.load(&mut sim, &a, &nic).unwrap(); // bank 1 = A
    let r = loader.load(&mut sim, &a, &nic).unwrap(); // bank 0 = A
    assert_eq!((r.bank, r.changed_entries), (0, 10));
    let mut counting = Counting::new(&sim);
    let r = loader.load(&mut counting, &b, &nic).unwrap(); // bank 1: A -> B
    assert_eq!(r.bank, 1);
    // B differs from A in rule 0, slot 0 and slot 1.
    assert_eq!(r.changed_entries, 3);
    assert_eq!(changed(&a, &b, Table::Rule), 1);
    assert_eq!(changed(&a, &b, Table::Maglev), 2);
    // Hand count: select ×2 (rule, maglev), then per entry its one data word (each differs
    // from the one before) + WRITE_AT carrying the index; the read-back is reads only.
    assert_eq!(r.update_writes, 2 + 3 * 2);
    assert_eq!(r.verify_writes, 0);
    assert_eq!(r.control_writes, 2, "flip and generation only");
    assert_eq!(r.total_writes(), 10);
    assert_eq!(
        counting.writes, 10,
        "the device saw as many writes as reported"
    );
    assert_eq!(counting.reads, r.reads, "and as many reads");
    assert_eq!(send(&sim, 40001).1, Some(B_BACKEND));
    // Loading what the target bank already holds writes no entry.
    let r = loader.load(&mut sim, &b, &nic).unwrap(); // bank 0: A -> B
    assert_eq!(r.changed_entries, 3);
    let r = loader.load(&mut sim, &b, &nic).unwrap(); // bank 1 already B
    assert_eq!(
        (r.changed_entries, r.update_writes, r.total_writes()),
        (0, 0, 2)
    );
    assert_eq!(loader.generation(), 5);
}

/// A device that counts the register accesses reaching it (the loader's own report is
/// checked against these, not trusted).
struct Counting {
    sim: ModelHandle,
    writes: u64,
    reads: u64,
}

impl Counting {
    fn new(sim: &ModelHandle) -> Counting {
        Counting {
            sim: sim.clone(),
            writes: 0,
            reads: 0,
        }
    }
}

impl Device for Counting {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.reads += 1;
        self.sim.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.writes += 1;
        self.sim.write32(offset, value)
    }
    fn describe(&self) -> String {
        "counting".into()
    }
}

#[test]
fn a_run_of_equal_slots_costs_one_write_per_entry() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let nic = NicSettings::default();
    let a = image(profile(), Which::A, 0);
    loader.load(&mut sim, &a, &nic).unwrap();
    loader.load(&mut sim, &a, &nic).unwrap();
    // 300 Maglev slots move to one backend and 100 to another (a failed backend's slots
    // going to the survivors), in bank 1.
    let mut moved = a.clone();
    for s in 2000..2300 {
        moved.maglev[s] = nlb_hw::layouts::MaglevSlot { backend: 7 };
    }
    for s in 3000..3100 {
        moved.maglev[s] = nlb_hw::layouts::MaglevSlot { backend: 8 };
    }
    let mut counting = Counting::new(&sim);
    let r = loader.load(&mut counting, &moved, &nic).unwrap();
    assert_eq!(r.changed_entries, 400);
    // select + (data word + WRITE_AT) per run + WRITE_AT per other entry + flip + generation.
    assert_eq!(counting.writes, 1 + 2 * 2 + 398 + 2);
    assert_eq!(r.total_writes(), counting.writes);
    assert!(counting.writes <= 2 * r.changed_entries as u64);
    assert_eq!(sim.lock().bank(1), &moved);
}

#[test]
fn every_profile_table_is_addressable_by_a_command() {
    // cmd bits 31..4 carry the index (docs/regmap.md, table_cmd): 2^28 entries at most.
    for p in nlb_hw::PROFILES {
        for t in Table::ALL {
            let depth = nlb_driver::loader::table_depth(p, t);
            assert!(
                depth - 1 <= nlb_driver::loader::CMD_INDEX_MAX,
                "{} {t:?}: {depth} entries",
                p.name
            );
        }
        assert!(p.ct_buckets * p.ct_ways - 1 <= nlb_driver::loader::CMD_INDEX_MAX);
    }
    // cmd bits 31..4 (docs/regmap.md).
    assert_eq!(nlb_driver::loader::CMD_INDEX_MAX, 0x0FFF_FFFF);
}

#[test]
fn nic_settings_are_written_only_when_they_change() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let a = image(profile(), Which::A, 0);
    let nic = NicSettings {
        local_mac: 0x0200_0000_00aa,
        gue_port: 7000,
        outer_src_v6: 0x2001_0db8_0000_0000_0000_0000_0000_0000,
        outer_src_v6_len: 64,
        ..NicSettings::default()
    };
    let r = loader.load(&mut sim, &a, &nic).unwrap();
    // local_mac_lo, gue_port, outer_src_v6_0, outer_src_v6_len; flip, generation, enable.
    assert_eq!(r.control_writes, 4 + 3);
    assert_eq!(sim.lock().settings(), &nic);
    let r = loader.load(&mut sim, &a, &nic).unwrap();
    assert_eq!(r.control_writes, 2);
}

#[test]
fn a_restarted_loader_rebuilds_its_shadow_from_the_device() {
    let mut sim = ModelHandle::new(profile());
    let (a, b) = (image(profile(), Which::A, 7), image(profile(), Which::B, 8));
    let nic = NicSettings::default();
    let mut first = attach(&mut sim);
    first.load(&mut sim, &a, &nic).unwrap(); // bank 1 = A
    first.load(&mut sim, &b, &nic).unwrap(); // bank 0 = B
    drop(first);
    let mut second = attach(&mut sim);
    assert_eq!((second.active_bank(), second.generation()), (0, 2));
    assert_eq!(second.shadow(0), &b);
    assert_eq!(second.shadow(1), &a);
    assert_eq!(second.suspect_entries(0) + second.suspect_entries(1), 0);
    // Bank 1 holds A: loading B there writes exactly the A/B difference.
    let r = second.load(&mut sim, &b, &nic).unwrap();
    assert_eq!(r.changed_entries, a.diff(&b).len());
    assert_eq!(sim.lock().bank(1), &b);
}

#[test]
fn a_second_loader_is_detected() {
    let mut sim = ModelHandle::new(profile());
    let a = image(profile(), Which::A, 0);
    let nic = NicSettings::default();
    let mut one = attach(&mut sim);
    let mut two = attach(&mut sim);
    one.load(&mut sim, &a, &nic).unwrap();
    let e = two.load(&mut sim, &a, &nic).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::ActiveBankMoved {
                expected: 0,
                found: 1
            }
        ),
        "{e}"
    );
    assert_eq!(
        sim.lock().bank(0),
        &Tables::empty(profile()),
        "nothing written"
    );
}

#[test]
fn a_device_reset_under_a_live_loader_is_noticed_and_reloaded_whole() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let nic = NicSettings::default();
    let (a, b) = (image(profile(), Which::A, 1), image(profile(), Which::B, 2));
    loader.load(&mut sim, &a, &nic).unwrap();
    loader.load(&mut sim, &b, &nic).unwrap();
    // Power cycle: every memory and register back to reset values.
    *sim.lock() = firmware_sim::ModelDevice::new(profile());
    let r = loader.load(&mut sim, &b, &nic).unwrap();
    assert!(r.resynced);
    assert_eq!(
        r.changed_entries,
        nonempty_entries(&b),
        "the whole image, not a delta"
    );
    assert_eq!((r.bank, r.generation), (1, 1));
    assert_eq!(sim.lock().bank(1), &b);
    assert_eq!(send(&sim, 42000).1, Some(B_BACKEND));
}

#[test]
fn errors_before_any_write_leave_the_device_alone() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let nic = NicSettings::default();
    let a = image(profile(), Which::A, 0);
    loader.load(&mut sim, &a, &nic).unwrap();
    // A pool id wider than the rule entry's 12-bit field.
    let mut bad = image(profile(), Which::B, 0);
    bad.rules[3] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: 5000,
    };
    let e = loader.load(&mut sim, &bad, &nic).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Encode {
                table: Table::Rule,
                index: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("does not fit in 12 bits"), "{e}");
    // Tables of another profile.
    let u280 = nlb_hw::Profile::by_name("u280").unwrap();
    let other = Tables {
        profile: u280,
        vip: vec![],
        rules: vec![],
        acl: vec![],
        pools: vec![],
        maglev: vec![],
        backends: vec![],
    };
    let e = loader.load(&mut sim, &other, &nic).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the image was compiled for the `u280` profile but the device has the `sim` profile; \
         recompile with `--profile sim`"
    );
    assert_eq!(sim.lock().bank(0), &Tables::empty(profile()));
    assert_eq!(sim.lock().bank(1), &a);
    assert_eq!(sim.read32(ctrl::GENERATION).unwrap(), 1);
}

/// A device whose `bank_in_use` reports packets on both banks for its first `busy_reads` reads.
#[derive(Debug)]
struct Busy {
    inner: ModelHandle,
    busy_reads: u32,
    waits: u32,
}

impl Device for Busy {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        if offset == ctrl::BANK_IN_USE && self.busy_reads > 0 {
            self.busy_reads -= 1;
            return Ok(0b11);
        }
        self.inner.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.inner.write32(offset, value)
    }
    fn wait(&mut self, _d: Duration) -> Result<(), DeviceError> {
        self.waits += 1;
        Ok(())
    }
    fn describe(&self) -> String {
        "busy".into()
    }
}

#[test]
fn waits_for_the_old_bank_to_drain_and_gives_up_in_bounded_time() {
    let sim = ModelHandle::new(profile());
    let mut dev = Busy {
        inner: sim.clone(),
        busy_reads: 3,
        waits: 0,
    };
    let info = discover(&mut dev).unwrap();
    let opts = LoaderOptions {
        drain_timeout: Duration::from_millis(200),
        ..LoaderOptions::default()
    };
    let mut loader = Loader::attach(&mut dev, info.profile, opts).unwrap();
    let a = image(profile(), Which::A, 0);
    loader.load(&mut dev, &a, &NicSettings::default()).unwrap();
    assert_eq!(dev.waits, 3, "polled until the bank drained");
    dev.busy_reads = u32::MAX;
    let e = loader
        .load(
            &mut dev,
            &image(profile(), Which::B, 0),
            &NicSettings::default(),
        )
        .unwrap_err();
    assert!(matches!(e, LoadError::BankBusy { bank: 0, .. }), "{e}");
    assert_eq!(
        sim.lock().bank(0),
        &Tables::empty(profile()),
        "nothing written"
    );
    assert_eq!(sim.lock().bank(1), &a);
}

/// A device that flips one bit of the table window's data on every read-back.
#[derive(Debug)]
struct Corrupt(ModelHandle);

impl Device for Corrupt {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        let v = self.0.read32(offset)?;
        Ok(if offset == win::DATA { v ^ 0x100 } else { v })
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.0.write32(offset, value)
    }
    fn describe(&self) -> String {
        "corrupt".into()
    }
}

#[test]
fn a_read_back_mismatch_aborts_before_the_flip() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let a = image(profile(), Which::A, 0);
    let mut dev = Corrupt(sim.clone());
    let e = loader
        .load(&mut dev, &a, &NicSettings::default())
        .unwrap_err();
    assert!(matches!(e, LoadError::Verify { bank: 1, .. }), "{e}");
    assert_eq!(sim.read32(ctrl::ACTIVE_BANK).unwrap(), 0, "no flip");
    assert_eq!(sim.read32(ctrl::ENABLE).unwrap(), 0);
    // The same loader recovers on a sound device.
    loader.load(&mut sim, &a, &NicSettings::default()).unwrap();
    assert_eq!(sim.lock().bank(1), &a);
}

/// A device whose table window drops every command (the data words keep what was written).
#[derive(Debug)]
struct LostCommands(ModelHandle);

impl Device for LostCommands {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.0.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        if offset == win::CMD {
            return Ok(());
        }
        self.0.write32(offset, value)
    }
    fn describe(&self) -> String {
        "lost commands".into()
    }
}

#[test]
fn a_write_that_never_ran_fails_verification() {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let a = image(profile(), Which::A, 0);
    let e = loader
        .load(&mut LostCommands(sim.clone()), &a, &NicSettings::default())
        .unwrap_err();
    assert!(matches!(e, LoadError::NotExecuted { bank: 1, .. }), "{e}");
    assert_eq!(sim.read32(ctrl::ACTIVE_BANK).unwrap(), 0, "no flip");
    loader.load(&mut sim, &a, &NicSettings::default()).unwrap();
    assert_eq!(sim.lock().bank(1), &a);
}

/// Counts the accesses of one load, so the cut points can cover all of it.
#[derive(Debug)]
struct Count(ModelHandle, u64);

impl Device for Count {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.1 += 1;
        self.0.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.1 += 1;
        self.0.write32(offset, value)
    }
    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        self.1 += ops.len() as u64;
        self.0.run_batch(ops, reads)
    }
    fn describe(&self) -> String {
        "count".into()
    }
}

#[test]
fn a_load_killed_at_any_point_leaves_a_whole_table_serving() {
    let nic = NicSettings::default();
    let old = image(profile(), Which::A, 1);
    let new = image(profile(), Which::B, 2);
    // A device serving `old` from bank 1 with `old` also in bank 0 (a steady state).
    let fresh = || {
        let mut sim = ModelHandle::new(profile());
        let mut l = attach(&mut sim);
        l.load(&mut sim, &old, &nic).unwrap();
        l.load(&mut sim, &old, &nic).unwrap();
        l.load(&mut sim, &image(profile(), Which::A, 3), &nic)
            .unwrap();
        (sim, l)
    };
    let (sim, mut l) = fresh();
    let serving_before = sim.lock().bank(1).clone();
    let mut counter = Count(sim.clone(), 0);
    l.load(&mut counter, &new, &nic).unwrap();
    let total = counter.1;
    assert!(total > 1000, "a load of {total} accesses");

    // Every cut point in the last stretch (around the flip) and a spread over the rest.
    let mut cuts: Vec<u64> = (total.saturating_sub(40)..=total).collect();
    let mut rng = Rng(0x5eed);
    cuts.extend((0..40).map(|_| rng.below(total)));
    cuts.extend([0, 1, 2, 3, 4, 5]);
    for (n, cut) in cuts.into_iter().enumerate() {
        let (sim, mut loader) = fresh();
        assert_eq!(sim.lock().bank(1), &serving_before);
        let mut dev = CutAfter::new(sim.clone(), cut);
        let result = loader.load(&mut dev, &new, &nic);
        let active = sim.lock().read32(ctrl::ACTIVE_BANK).unwrap() as u8;
        let serving = sim.lock().bank(active).clone();
        match &result {
            Ok(_) => assert_eq!(serving, new, "cut {cut}: completed"),
            Err(_) if active == 1 => {
                assert_eq!(
                    serving, serving_before,
                    "cut {cut}: the old table still serves"
                )
            }
            Err(_) => assert_eq!(serving, new, "cut {cut}: flipped to the whole new table"),
        }
        // Packets agree with the table that serves.
        let (_, backend, _) = send(&sim, 41000);
        let expected = if serving == new { B_BACKEND } else { A_BACKEND };
        assert_eq!(backend, Some(expected), "cut {cut}");
        // The interrupted loader carries on with the real device ...
        let mut again_sim = sim.clone();
        loader.load(&mut again_sim, &new, &nic).unwrap();
        assert_eq!(sim.lock().bank(loader.active_bank()), &new, "cut {cut}");
        // ... and so does a restarted one.
        if n % 4 != 0 {
            continue;
        }
        let mut restarted = attach(&mut again_sim);
        restarted.load(&mut again_sim, &old, &nic).unwrap();
        let active = restarted.active_bank();
        assert_eq!(sim.lock().bank(active), &old, "cut {cut}: restarted loader");
    }
}

#[test]
fn a_counter_index_past_the_select_field_is_refused_not_wrapped() {
    // counters.select: index bits 23..0, kind above (docs/regmap.md). An index of 2^24 would
    // have been masked to 0 and read counter 0 of the kind; it is an error now.
    let mut sim = ModelHandle::new(profile());
    let ok = nlb_driver::queues::read_counters(
        &mut sim,
        nlb_driver::queues::CounterKind::Rule,
        [0, 0x00FF_FFFF],
        false,
    );
    assert_eq!(ok.map(|v| v.len()).ok(), Some(2));
    let err = nlb_driver::queues::read_counters(
        &mut sim,
        nlb_driver::queues::CounterKind::Rule,
        [0x0100_0000],
        false,
    )
    .unwrap_err();
    assert!(err.to_string().contains("RULE counter 16777216"), "{err}");
}

/// A device with image A loaded into both banks, and its loader (each bank then behind on
/// nothing).
fn both_banks_loaded() -> (ModelHandle, Loader, Tables) {
    let mut sim = ModelHandle::new(profile());
    let mut loader = attach(&mut sim);
    let tables = image(profile(), Which::A, 0);
    for _ in 0..2 {
        loader
            .load(&mut sim, &tables, &NicSettings::default())
            .unwrap();
    }
    (sim, loader, tables)
}

/// `load_changed` told the entries a change touched (as a recompile reports them) leaves
/// the device exactly where a whole compare would: each load writes what differs between
/// the bank it writes (read from the device before the load) and the new tables, no more
/// and no less, across loads that alternate banks (so each bank lags two changes behind),
/// an unhinted load between them, and a change that touches an entry back to its old value.
#[test]
fn a_load_told_what_changed_writes_what_a_whole_compare_would() {
    let (mut sim, mut loader, mut tables) = both_banks_loaded();
    let nic = NicSettings::default();
    let slots = tables.maglev.len() as u32;
    // A linear congruential generator (Numerical Recipes' constants), its high half used.
    let mut x: u32 = 0x2545_f491;
    let mut rnd = move |n: u32| {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        x / 65_536 % n
    };
    for step in 0..12 {
        // A few slots and sometimes a rule change; step 5 puts slot 7 back as it was two
        // loads ago; step 8 loads without a hint.
        let mut changed = Vec::new();
        for _ in 0..(1 + rnd(6)) {
            let i = rnd(slots);
            tables.maglev[i as usize].backend = (rnd(3) + 1) as u16;
            changed.push((Table::Maglev, i));
        }
        if step % 3 == 0 {
            let r = rnd(4) as usize;
            tables.rules[r].pool = (step % 2) as u16;
            changed.push((Table::Rule, r as u32));
        }
        if step == 5 {
            tables.maglev[7].backend = 0;
            changed.push((Table::Maglev, 7));
        }
        let target = loader.active_bank() ^ 1;
        let before = sim.lock().bank(target).clone();
        let want = before.diff(&tables).len();
        let r = if step == 8 {
            loader.load(&mut sim, &tables, &nic).unwrap()
        } else {
            loader
                .load_changed(&mut sim, &tables, &nic, &changed)
                .unwrap()
        };
        assert_eq!(r.bank, target, "step {step}: the bank written");
        assert_eq!(
            sim.lock().bank(target),
            &tables,
            "step {step}: the bank now"
        );
        // Maglev slots are written as their whole rows of 16 where the ring writes them;
        // through the window (this device) each changed entry once.
        assert_eq!(r.changed_entries, want, "step {step}: entries written");
    }
}

/// A hint that leaves out a changed entry is caught where tests run (debug assertions
/// compare it with the whole table), not loaded as if nothing changed there.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "a load's hint left out a changed entry of Maglev")]
fn a_hint_that_misses_a_change_is_caught_in_tests() {
    let (mut sim, mut loader, mut tables) = both_banks_loaded();
    let nic = NicSettings::default();
    tables.maglev[9].backend = 3;
    tables.maglev[10].backend = 3;
    let _ = loader.load_changed(&mut sim, &tables, &nic, &[(Table::Maglev, 9)]);
}
