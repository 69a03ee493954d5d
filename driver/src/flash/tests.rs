//! The programmer against the real chip, controller and boot model of `firmware_sim::flash`,
//! through a small `Device` that serves the firmware-ID block the way the simulated card does
//! and can cut the power at a chosen register access or instant.

use std::time::Duration;

use firmware_sim::flash::bitstream::synthetic;
use firmware_sim::flash::{
    ChipTiming, FlashBlock, FlashConfig, ProgramFault, Slot, FACTORY_FALLBACK_USR_ACCESS,
    FACTORY_USER_USR_ACCESS, MT25QU01G, XCU280_IDCODE,
};
use nlb_hw::blocks::{fw_id, spi_flash};

use super::*;
use crate::device::{Device, DeviceError};

const XCU250_IDCODE: u32 = 0x04B5_7093;

/// A card with only the firmware-ID block and the flash blocks.
struct FlashCard {
    flash: FlashBlock,
    accesses: u64,
    cut_at_access: Option<u64>,
    cut_at_time: Option<Duration>,
    /// The tool dies at this register access (which is not made); the card runs on.
    kill_at_access: Option<u64>,
    off: bool,
}

impl FlashCard {
    fn new(config: FlashConfig) -> Self {
        Self {
            flash: FlashBlock::new(config),
            accesses: 0,
            cut_at_access: None,
            cut_at_time: None,
            kill_at_access: None,
            off: false,
        }
    }

    fn small() -> Self {
        Self::new(FlashConfig {
            chip: MT25QU01G,
            ..FlashConfig::default()
        })
    }

    fn power_gone() -> DeviceError {
        DeviceError::Protocol("power lost".into())
    }

    fn cut(&mut self) -> DeviceError {
        self.flash.power_cut();
        self.off = true;
        Self::power_gone()
    }

    fn tick(&mut self) -> Result<(), DeviceError> {
        if self.off {
            return Err(Self::power_gone());
        }
        self.accesses += 1;
        if Some(self.accesses) == self.cut_at_access {
            return Err(self.cut());
        }
        if Some(self.accesses) == self.kill_at_access {
            self.kill_at_access = None;
            return Err(DeviceError::Protocol("killed".into()));
        }
        Ok(())
    }

    /// Power off (if the cut did not come) and back on; waits (simulated) until the FPGA
    /// configured.
    fn power_cycle(&mut self) {
        if !self.off {
            self.cut();
        }
        self.off = false;
        self.cut_at_access = None;
        self.cut_at_time = None;
        self.flash.power_on();
        for _ in 0..100 {
            if self.flash.is_up() || self.flash.is_bricked() {
                break;
            }
            self.flash.advance(Duration::from_millis(10));
        }
    }

    fn fw_id(&self, offset: u32) -> u32 {
        match offset {
            fw_id::TYPE_REG => fw_id::TYPE_WORD,
            fw_id::VERSION_REG => fw_id::VERSION,
            fw_id::DESIGN_VERSION => nlb_hw::DESIGN_VERSION,
            fw_id::REGMAP_VERSION => nlb_hw::REGMAP_VERSION,
            fw_id::BUILD_ID => self.flash.boot_info().usr_access.unwrap_or(0),
            fw_id::BOARD_ID => 0x5100,
            fw_id::PART_ID => self.flash.part_id(),
            fw_id::PROFILE_ID => 1,
            _ => 0,
        }
    }
}

impl Device for FlashCard {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.tick()?;
        if !self.flash.is_up() {
            return Ok(u32::MAX);
        }
        Ok(if FlashBlock::handles(offset) {
            self.flash.read32(offset)
        } else {
            self.fw_id(offset)
        })
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.tick()?;
        if FlashBlock::handles(offset) {
            self.flash.write32(offset, value);
        }
        Ok(())
    }

    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        if self.off {
            return Err(Self::power_gone());
        }
        if let Some(t) = self.cut_at_time {
            let now = self.flash.now();
            if now + d >= t {
                self.flash.advance(t.saturating_sub(now));
                return Err(self.cut());
            }
        }
        self.flash.advance(d);
        Ok(())
    }

    fn describe(&self) -> String {
        "test:flash-card".into()
    }
}

fn image(idcode: u32, usr: u32, frame_words: u32) -> Bitstream {
    Bitstream::parse(synthetic(idcode, Some(usr), frame_words, u64::from(usr))).unwrap()
}

fn no_progress(_: Progress) {}

fn flash(
    card: &mut FlashCard,
    img: &Bitstream,
    opts: FlashOptions,
) -> Result<FlashReport, FlashError> {
    flash_image(card, img, &opts, &mut no_progress)
}

#[test]
fn flash_then_reboot_runs_the_new_image() {
    let mut card = FlashCard::small();
    let img = image(XCU280_IDCODE, 0xC0DE_0001, 30_000); // ~117 KiB: sectors and subsectors
    let mut phases = Vec::new();
    let report = flash_image(&mut card, &img, &FlashOptions::default(), &mut |p| {
        if phases.last() != Some(&p.phase) {
            phases.push(p.phase);
        }
    })
    .unwrap();
    assert_eq!(
        phases,
        vec![Phase::Erase, Phase::Program, Phase::Verify, Phase::Marker]
    );
    assert_eq!(report.addr, 0x0400_0000);
    assert_eq!(report.bytes as usize, img.data.len());
    // Independent CRC: the catalogue CRC-32 computed over the file's data by a plain loop.
    let mut crc = !0u32;
    for &b in &img.data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    assert_eq!(report.crc32, !crc);
    assert!(report.repaired.is_empty());
    // The flash holds the image byte for byte.
    let mut got = vec![0u8; img.data.len()];
    card.flash.chip().read_direct(0x0400_0000, &mut got);
    assert_eq!(got, img.data);

    let r = reboot(&mut card, &RebootOptions::default()).unwrap();
    assert_eq!(r.before.build_id, FACTORY_USER_USR_ACCESS);
    assert_eq!(r.after.build_id, 0xC0DE_0001);
    assert!(!r.after.boot.fallback);
    assert_eq!(r.after.boot.image_addr, 0x0400_0000);
    // Configuration takes 20 ms + the image at 42.5 MB/s: back at the first 50 ms poll.
    assert_eq!(r.took, Duration::from_millis(50));

    let info = fw_info(&mut card, true).unwrap();
    assert_eq!(info.chip.name, "MT25QU01G");
    let user = &info.slots[1];
    assert_eq!(user.slot, Slot::User);
    assert!(user.complete());
    assert_eq!(user.crc_read, Some(report.crc32));
    assert_eq!(user.marker.as_ref().unwrap().usr_access, Some(0xC0DE_0001));
}

#[test]
fn a_bitstream_for_another_part_is_refused_unless_forced() {
    let mut card = FlashCard::small();
    let img = image(XCU250_IDCODE, 0x250, 100);
    let err = flash(&mut card, &img, FlashOptions::default()).unwrap_err();
    assert!(matches!(err, FlashError::PartMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("xcu250") && msg.contains("xcu280") && msg.contains("--force"),
        "{msg}"
    );
    assert_eq!(card.flash.chip().completed_ops(), 0, "nothing touched");

    // Forced: written, but the FPGA refuses it (ID error) and the fallback boots.
    flash(
        &mut card,
        &img,
        FlashOptions {
            force: true,
            ..FlashOptions::default()
        },
    )
    .unwrap();
    let err = reboot(&mut card, &RebootOptions::default()).unwrap_err();
    assert!(matches!(err, FlashError::FallbackBooted { .. }), "{err}");
    assert!(err.to_string().contains("another FPGA part"), "{err}");
    assert_eq!(
        card.flash.boot_info().usr_access,
        Some(FACTORY_FALLBACK_USR_ACCESS)
    );
}

#[test]
fn a_raw_bin_without_idcode_needs_force() {
    let mut card = FlashCard::small();
    // Sync word, NOOP, DESYNC: a bitstream that names no part.
    let words = [0xFFFF_FFFFu32, 0xAA99_5566, 0x2000_0000, 0x3000_8001, 0x0D];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let img = Bitstream::parse(bytes).unwrap();
    let err = flash(&mut card, &img, FlashOptions::default()).unwrap_err();
    assert!(matches!(err, FlashError::UnknownTargetPart { .. }), "{err}");
}

#[test]
fn the_fallback_slot_needs_force() {
    let mut card = FlashCard::small();
    let img = image(XCU280_IDCODE, 0xFA11_0002, 100);
    let opts = FlashOptions {
        slot: Slot::Fallback,
        ..FlashOptions::default()
    };
    let err = flash(&mut card, &img, opts).unwrap_err();
    assert!(matches!(err, FlashError::FallbackNeedsForce), "{err}");
    assert_eq!(card.accesses, 0, "refused before touching the card");
    let r = flash(
        &mut card,
        &img,
        FlashOptions {
            force: true,
            ..opts
        },
    )
    .unwrap();
    assert_eq!(r.addr, 0);
    let r = reboot(
        &mut card,
        &RebootOptions {
            slot: Slot::Fallback,
            ..RebootOptions::default()
        },
    )
    .unwrap();
    assert!(r.after.boot.fallback);
    assert_eq!(r.after.build_id, 0xFA11_0002);
}

#[test]
fn a_weak_subsector_is_reprogrammed() {
    let mut card = FlashCard::small();
    let img = image(XCU280_IDCODE, 0xC0DE_0002, 20_000);
    // The second subsector's first page fails twice.
    card.flash.chip_mut().inject_program_fault(ProgramFault {
        addr: 0x0400_1000,
        len: 256,
        times: 2,
    });
    let r = flash(&mut card, &img, FlashOptions::default()).unwrap();
    assert_eq!(r.repaired, vec![0x0400_1000]);
    let r = reboot(&mut card, &RebootOptions::default()).unwrap();
    assert_eq!(r.after.build_id, 0xC0DE_0002);
}

#[test]
fn a_dead_subsector_fails_cleanly_and_the_fallback_boots() {
    let mut card = FlashCard::small();
    let img = image(XCU280_IDCODE, 0xC0DE_0003, 20_000);
    card.flash.chip_mut().inject_program_fault(ProgramFault {
        addr: 0x0400_3000,
        len: 4096,
        times: 1000,
    });
    let err = flash(&mut card, &img, FlashOptions::default()).unwrap_err();
    match err {
        FlashError::VerifyFailed { addr, retries } => {
            assert_eq!(addr & !0xFFF, 0x0400_3000);
            assert_eq!(retries, 3);
        }
        e => panic!("{e}"),
    }
    let err = reboot(&mut card, &RebootOptions::default()).unwrap_err();
    assert!(err.to_string().contains("never completed"), "{err}");
    assert!(card.flash.boot_info().fallback);
}

#[test]
fn an_erase_that_never_ends_times_out() {
    let mut card = FlashCard::new(FlashConfig {
        chip: MT25QU01G,
        timing: ChipTiming {
            subsector_erase: Duration::from_secs(60),
            ..ChipTiming::default()
        },
        ..FlashConfig::default()
    });
    let img = image(XCU280_IDCODE, 1, 100);
    let err = flash(&mut card, &img, FlashOptions::default()).unwrap_err();
    match &err {
        FlashError::Timeout { what, after } => {
            assert_eq!(what, "the 4 KiB erase at 0x07fff000");
            assert!(*after >= Duration::from_secs(2) && *after < Duration::from_millis(2100));
        }
        e => panic!("{e}"),
    }
}

/// What runs right after a killed flash.
#[derive(Debug, Clone, Copy)]
enum Next {
    FwInfo,
    Reboot,
    Flash,
}

/// `nlbctl flash` killed at register access `kill` (the card keeps running: a program or
/// erase it started goes on, chip select may be left low in the middle of a command), then
/// `next` at once. Returns whether the next command finds the chip busy: an operation still
/// running, or one that starts when its first access ends the half-sent command.
fn killed_then(kill: u64, next: Next, img: &Bitstream) -> bool {
    let mut card = FlashCard::small();
    card.kill_at_access = Some(kill);
    let e = flash(&mut card, img, FlashOptions::default()).unwrap_err();
    assert!(e.to_string().contains("killed"), "kill at {kill}: {e}");
    // What every command does first on the controller: chip select off.
    let accesses = card.accesses;
    card.write32(spi_flash::CTRL, spi::ctrl(false, 1).word().unwrap())
        .unwrap();
    card.accesses = accesses;
    let busy = card.flash.chip_mut().busy();
    let ctx = format!("killed at access {kill} (chip busy: {busy}), then {next:?}");
    match next {
        Next::FwInfo => {
            let info = fw_info(&mut card, false).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(info.chip.name, "MT25QU01G", "{ctx}");
            // The user slot holds the old image or the new one whole (killed while the marker's
            // program ran), or no complete image: its marker is the first thing a flash erases
            // and the last it writes.
            let user = &info.slots[1];
            if user.complete() {
                let m = user.marker.as_ref().unwrap();
                assert!(
                    [Some(FACTORY_USER_USR_ACCESS), img.usr_access].contains(&m.usr_access),
                    "{ctx}: {m:?}"
                );
            }
        }
        Next::Reboot => {
            let r = reboot(
                &mut card,
                &RebootOptions {
                    slot: Slot::Fallback,
                    ..RebootOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(r.after.build_id, FACTORY_FALLBACK_USR_ACCESS, "{ctx}");
        }
        Next::Flash => {
            flash(&mut card, img, FlashOptions::default()).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let r = reboot(&mut card, &RebootOptions::default())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(r.after.build_id, img.usr_access.unwrap_or(0), "{ctx}");
        }
    }
    busy
}

/// A flash killed anywhere (docs/flashing.md: "`flash` can simply be run again"): `fw-info`,
/// `reboot` and `flash` work at once, waiting for a program or erase the killed tool left
/// running instead of reading the busy chip's ID as `ff ff ff`.
#[test]
fn right_after_a_killed_flash_every_command_works() {
    let img = image(XCU280_IDCODE, 0xC0DE_0077, 20_000); // 80 KiB: 1 sector + 4 subsectors
    let mut card = FlashCard::small();
    flash(&mut card, &img, FlashOptions::default()).unwrap();
    let total = card.accesses;
    let nexts = [Next::FwInfo, Next::Reboot, Next::Flash];
    let mut busy = 0;
    let mut runs = 0;
    // The first accesses (before the marker erase), then points spread over the whole flash
    // up to the marker write (the last accesses).
    let points = (1..8)
        .chain((1..90).map(|i| i * (total - 60) / 90))
        .chain(total - 60..total);
    for (i, kill) in points.enumerate() {
        busy += usize::from(killed_then(kill, nexts[i % 3], &img));
        runs += 1;
    }
    eprintln!("{runs} kills, {busy} leaving the chip busy");
    // About a third: the verify phase, which only reads, is a large part of the accesses.
    assert!(
        busy * 4 >= runs,
        "too few kills during a program or erase: {busy} of {runs}"
    );
}

/// A chip that stays busy (an erase that never ends) is a clear error after the bound, not an
/// unknown chip.
#[test]
fn a_chip_that_stays_busy_is_reported_after_the_bound() {
    let mut card = FlashCard::new(FlashConfig {
        chip: MT25QU01G,
        timing: ChipTiming {
            sector_erase: Duration::from_secs(3600),
            ..ChipTiming::default()
        },
        ..FlashConfig::default()
    });
    let err = spi::SpiFlash::new(&mut card)
        .unwrap()
        .erase(0x0400_0000, spi::EraseSize::Sector)
        .unwrap_err();
    assert!(matches!(err, FlashError::Timeout { .. }), "{err}");
    let t0 = card.flash.now();
    let err = fw_info(&mut card, false).unwrap_err();
    let waited = card.flash.now() - t0;
    match &err {
        FlashError::ChipBusy { after, status } => {
            assert_eq!(*after, spi::IDLE_WAIT.timeout);
            assert_eq!(status & spi::SR_WIP, spi::SR_WIP);
        }
        e => panic!("{e}"),
    }
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_millis(5100),
        "{waited:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("still busy") && msg.contains("power-cycle"),
        "{msg}"
    );
    for e in [
        reboot(&mut card, &RebootOptions::default()).unwrap_err(),
        flash(
            &mut card,
            &image(XCU280_IDCODE, 1, 100),
            FlashOptions::default(),
        )
        .unwrap_err(),
    ] {
        assert!(matches!(e, FlashError::ChipBusy { .. }), "{e}");
    }
}

#[test]
fn a_card_with_nothing_bootable_does_not_return() {
    let mut card = FlashCard::small();
    // Wreck both images behind the tool's back (a forced fallback write gone wrong).
    let layout = *card.flash.layout();
    for slot in [Slot::Fallback, Slot::User] {
        card.flash
            .chip_mut()
            .load_direct(layout.base(slot) + 24, &[0; 4]);
    }
    let opts = RebootOptions {
        timeout: Duration::from_secs(2),
        ..RebootOptions::default()
    };
    let err = reboot(&mut card, &opts).unwrap_err();
    assert!(matches!(err, FlashError::DidNotReturn { .. }), "{err}");
    assert!(card.flash.is_bricked());
    // And a card that is down is reported as such.
    let err = fw_info(&mut card, false).unwrap_err();
    assert!(err.to_string().contains("all ones"), "{err}");
}

#[test]
fn unknown_flash_chip_is_named() {
    let e = FlashError::UnknownChip {
        jedec_id: [0xEF, 0x40, 0x19],
    };
    assert!(e
        .to_string()
        .starts_with("unknown flash chip, JEDEC ID ef 40 19; supported: MT25QU512"));
}

/// Outcome of one power-cut run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Booted {
    OldUser,
    NewUser,
    Fallback,
}

fn cut_run(
    cut_access: Option<u64>,
    cut_time: Option<Duration>,
    seed: u64,
    img: &Bitstream,
) -> Booted {
    let mut card = FlashCard::new(FlashConfig {
        chip: MT25QU01G,
        seed,
        ..FlashConfig::default()
    });
    let old_user = synthetic(
        XCU280_IDCODE,
        Some(FACTORY_USER_USR_ACCESS),
        1024,
        u64::from(FACTORY_USER_USR_ACCESS),
    );
    card.cut_at_access = cut_access;
    card.cut_at_time = cut_time.map(|t| card.flash.now() + t);
    let result = flash(&mut card, img, FlashOptions::default());
    card.power_cycle();
    let ctx = format!(
        "seed {seed} cut at access {cut_access:?} / time {cut_time:?}, flash result {result:?}"
    );
    assert!(!card.flash.is_bricked(), "bricked: {ctx}");
    assert!(card.flash.is_up(), "not up: {ctx}");
    let boot = *card.flash.boot_info();
    let user_base = card.flash.layout().base(Slot::User);
    let running = if boot.fallback {
        assert_eq!(boot.image_addr, 0, "{ctx}");
        assert_eq!(boot.usr_access, Some(FACTORY_FALLBACK_USR_ACCESS), "{ctx}");
        assert_ne!(boot.rejection_code, 0, "{ctx}");
        Booted::Fallback
    } else {
        // A user image boots only when its bytes are exactly one of the two images.
        assert_eq!(boot.image_addr, user_base, "{ctx}");
        let (want, outcome) = if boot.usr_access == Some(FACTORY_USER_USR_ACCESS) {
            (&old_user, Booted::OldUser)
        } else {
            assert_eq!(boot.usr_access, img.usr_access, "{ctx}");
            (&img.data, Booted::NewUser)
        };
        let mut got = vec![0u8; want.len()];
        card.flash.chip().read_direct(user_base, &mut got);
        assert!(got == *want, "a damaged user image booted: {ctx}");
        outcome
    };
    if result.is_ok() {
        assert_eq!(running, Booted::NewUser, "{ctx}");
    }
    // Every fourth run: flashing again after the cut repairs the card.
    if seed.is_multiple_of(4) && running != Booted::NewUser {
        flash(&mut card, img, FlashOptions::default())
            .unwrap_or_else(|e| panic!("re-flash: {e}: {ctx}"));
        let r =
            reboot(&mut card, &RebootOptions::default()).unwrap_or_else(|e| panic!("{e}: {ctx}"));
        assert_eq!(r.after.build_id, img.usr_access.unwrap_or(0));
    }
    running
}

#[test]
fn power_cuts_anywhere_never_brick_the_card() {
    let img = image(XCU280_IDCODE, 0xC0DE_0042, 20_000); // 80 KiB: 1 sector + 4 subsectors
                                                         // One clean run measures the register accesses and simulated time a flash takes.
    let mut card = FlashCard::small();
    let t0 = card.flash.now();
    flash(&mut card, &img, FlashOptions::default()).unwrap();
    let (total_accesses, total_time) = (card.accesses, card.flash.now() - t0);

    let runs: u64 = if std::env::var("NLB_SOAK").is_ok() {
        5000
    } else {
        400
    };
    let mut rng = 0x1234_5678_9ABC_DEF0u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    };
    let mut seen = std::collections::HashMap::new();
    for seed in 0..runs {
        let (access, time) = if seed % 2 == 0 {
            (Some(1 + next(total_accesses)), None)
        } else {
            (
                None,
                Some(Duration::from_nanos(next(total_time.as_nanos() as u64))),
            )
        };
        *seen.entry(cut_run(access, time, seed, &img)).or_insert(0) += 1;
    }
    // The edges: before the marker erase starts, and after the marker is written.
    for access in 1..12 {
        *seen
            .entry(cut_run(Some(access), None, 10_000 + access, &img))
            .or_insert(0) += 1;
    }
    for back in 0..4 {
        let access = total_accesses - back;
        *seen
            .entry(cut_run(Some(access), None, 20_000 + back, &img))
            .or_insert(0) += 1;
    }
    eprintln!("outcomes: {seen:?}");
    for outcome in [Booted::OldUser, Booted::NewUser, Booted::Fallback] {
        assert!(
            seen.contains_key(&outcome),
            "{outcome:?} never seen: {seen:?}"
        );
    }
}

#[test]
fn the_part_check_uses_the_header_and_the_packets() {
    let fw = |part_id| FirmwareIdent {
        design_version: 0,
        regmap_version: 0,
        build_id: 0,
        git_hash: 0,
        board_id: 0x0280,
        part_id,
        profile_id: 0,
        boot: BootStatus::from_register(0),
    };
    let with = |part: &str, idcode: Option<u32>| {
        let mut b = image(XCU280_IDCODE, 1, 4);
        b.idcode = idcode;
        b.header = Some(bitstream::BitHeader {
            design: "top".into(),
            design_field: "top".into(),
            user_id: None,
            tool_version: None,
            part: part.into(),
            date: String::new(),
            time: String::new(),
            data_len: b.data.len() as u32,
        });
        b
    };
    // The card reports its IDCODE with a revision nibble: ignored.
    let card = fw(0x1000_0000 | XCU280_IDCODE);
    assert!(check_part(&with("xcu280-fsvh2892-2L-e", None), &card).is_ok());
    assert!(check_part(&with("xcu280-fsvh2892-2L-e", Some(XCU280_IDCODE)), &card).is_ok());
    let e = check_part(&with("xcu250-figd2104-2L-e", None), &card).unwrap_err();
    assert!(e.to_string().contains("xcu250-figd2104-2L-e"), "{e}");
    // Header and packets disagree: the packets' part is refused.
    let e = check_part(&with("xcu280-fsvh2892-2L-e", Some(XCU250_IDCODE)), &card).unwrap_err();
    assert!(matches!(e, FlashError::PartMismatch { .. }), "{e}");
    // An unknown part name and no IDCODE: cannot tell.
    let e = check_part(&with("xc7a35t-csg324-1", None), &card).unwrap_err();
    assert!(matches!(e, FlashError::UnknownTargetPart { .. }), "{e}");
}

/// The whole product path: the programmer through the driver's `ModelHandle` backend into the
/// simulated NIC (`ModelDevice`) hosting the flash chip, then a reboot that resets the device's
/// pipeline and reports the new image in its firmware-ID block.
#[test]
fn flash_and_reboot_through_the_simulated_nic() {
    let mut dev = firmware_sim::ModelDevice::new(nlb_hw::Profile::by_name("sim").unwrap());
    dev.set_flash(Box::new(FlashBlock::new(FlashConfig {
        chip: MT25QU01G,
        ..FlashConfig::default()
    })));
    let mut sim = crate::ModelHandle::from_device(dev);
    // Something to lose on reboot: the pipeline enabled.
    sim.write32(nlb_hw::blocks::ctrl::ENABLE, 1).unwrap();
    let before = fw_info(&mut sim, false).unwrap();
    assert_eq!(
        sim.read32(fw_id::BUILD_ID).unwrap(),
        FACTORY_USER_USR_ACCESS
    );
    assert_eq!(
        sim.read32(fw_id::PART_ID).unwrap(),
        XCU280_IDCODE & 0x0FFF_FFFF
    );
    assert_eq!(before.chip.name, "MT25QU01G");

    let img = image(XCU280_IDCODE, 0xC0DE_0002, 5_000);
    let report = flash_image(&mut sim, &img, &FlashOptions::default(), &mut no_progress).unwrap();
    assert!(report.repaired.is_empty());
    let r = reboot(&mut sim, &RebootOptions::default()).unwrap();
    assert_eq!(r.after.build_id, 0xC0DE_0002);
    assert!(!r.after.boot.fallback);
    // A new bitstream starts from reset.
    assert_eq!(sim.read32(nlb_hw::blocks::ctrl::ENABLE).unwrap(), 0);
    assert!(fw_info(&mut sim, true).unwrap().slots[1].complete());
}
