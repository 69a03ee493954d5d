//! What the card runs and what its flash holds (`nlbctl fw-info`), and reloading the FPGA
//! from flash (`nlbctl reboot`).

use std::time::Duration;

use firmware_sim::flash::boot::Rejection;
use firmware_sim::flash::layout::{self, Layout, MarkerError, Slot, SlotMarker};
use nlb_hw::blocks::{fw_id, reboot as reboot_regs};
use nlb_hw::REGMAP_VERSION;

use super::spi::{ChipInfo, SpiFlash};
use super::{read_firmware, FlashError};
use crate::device::Device;

/// Value written to `reboot.reboot` ('REBO').
pub const REBOOT_MAGIC: u32 = nlb_hw::enums::RebootKey::Reboot.value();

/// `reboot.boot_status`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootStatus {
    /// The fallback image runs.
    pub fallback: bool,
    /// Flash address of the running image.
    pub image_addr: u32,
    /// Why the requested image was rejected (0 = it was not).
    pub reason_code: u32,
}

impl BootStatus {
    /// Decodes the register (its fields in `docs/regmap.md`). The reason stays a number: a
    /// newer boot logic may report one this release does not name.
    pub fn from_register(v: u32) -> Self {
        use reboot_regs::boot_status as f;
        Self {
            fallback: f::FALLBACK.get(v) != 0,
            image_addr: f::ADDRESS.bits(v),
            reason_code: f::REJECTION.get(v),
        }
    }

    /// The reason in words.
    pub fn reason(&self) -> &'static str {
        Rejection::describe_code(self.reason_code)
    }
}

/// The firmware-ID block and boot status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirmwareIdent {
    /// Design version, major.minor as 16.16.
    pub design_version: u32,
    /// Register map version.
    pub regmap_version: u32,
    /// Build id.
    pub build_id: u32,
    /// Source commit (8 hex digits).
    pub git_hash: u32,
    /// Board code.
    pub board_id: u32,
    /// FPGA part code.
    pub part_id: u32,
    /// Capacity profile id.
    pub profile_id: u32,
    /// What booted.
    pub boot: BootStatus,
}

/// One slot as its marker describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotInfo {
    /// The slot.
    pub slot: Slot,
    /// Its first byte.
    pub addr: u32,
    /// The marker, or why there is none.
    pub marker: Result<SlotMarker, MarkerError>,
    /// CRC-32 of the bytes the marker covers, read from flash (when asked for).
    pub crc_read: Option<u32>,
}

impl SlotInfo {
    /// True when the marker is valid and (if read) the CRC matches.
    pub fn complete(&self) -> bool {
        match (&self.marker, self.crc_read) {
            (Ok(m), Some(crc)) => m.image_crc32 == crc,
            (Ok(_), None) => true,
            (Err(_), _) => false,
        }
    }
}

/// Everything `fw-info` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FwInfo {
    /// Firmware-ID block and boot status.
    pub ident: FirmwareIdent,
    /// The flash chip.
    pub chip: ChipInfo,
    /// Its multiboot layout.
    pub layout: Layout,
    /// Fallback and user slots.
    pub slots: Vec<SlotInfo>,
}

/// Reads the firmware identity, the flash chip and both slot markers; with `check_crc`, also
/// reads each complete image back and computes its CRC-32.
pub fn fw_info<D: Device + ?Sized>(dev: &mut D, check_crc: bool) -> Result<FwInfo, FlashError> {
    let ident = read_firmware(dev)?;
    let mut spi = SpiFlash::new(dev)?;
    let chip = spi.chip()?;
    let layout = Layout::new(chip.size);
    let mut slots = Vec::new();
    for slot in [Slot::Fallback, Slot::User] {
        let mut raw = [0u8; layout::MARKER_LEN];
        spi.read(layout.marker_addr(slot), &mut raw)?;
        let marker = SlotMarker::decode(&raw);
        let crc_read = match (&marker, check_crc) {
            (Ok(_), true) => Some(super::program::slot_crc(&mut spi, &layout, slot)?.1),
            _ => None,
        };
        slots.push(SlotInfo {
            slot,
            addr: layout.base(slot),
            marker,
            crc_read,
        });
    }
    Ok(FwInfo {
        ident,
        chip,
        layout,
        slots,
    })
}

/// How to reboot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebootOptions {
    /// The image to load.
    pub slot: Slot,
    /// Give up waiting for the card after this long.
    pub timeout: Duration,
    /// Interval between checks whether the card is back.
    pub poll: Duration,
    /// Fail unless the card comes back with this build id.
    pub expect_build_id: Option<u32>,
}

impl Default for RebootOptions {
    fn default() -> Self {
        Self {
            slot: Slot::User,
            timeout: Duration::from_secs(30),
            poll: Duration::from_millis(50),
            expect_build_id: None,
        }
    }
}

/// What a reboot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebootReport {
    /// Before.
    pub before: FirmwareIdent,
    /// After.
    pub after: FirmwareIdent,
    /// Time until the card answered again.
    pub took: Duration,
}

/// Reloads the FPGA from `opts.slot`, waits for the card to come back, and checks that it is
/// the same card, speaks this regmap and runs the requested image.
pub fn reboot<D: Device + ?Sized>(
    dev: &mut D,
    opts: &RebootOptions,
) -> Result<RebootReport, FlashError> {
    let before = read_firmware(dev)?;
    let layout = {
        let mut spi = SpiFlash::new(dev)?;
        Layout::new(spi.chip()?.size)
    };
    dev.write32(reboot_regs::BOOT_ADDR, layout.base(opts.slot))?;
    dev.write32(reboot_regs::REBOOT, REBOOT_MAGIC)?;
    let mut waited = Duration::ZERO;
    let mut last_error = None;
    loop {
        if waited >= opts.timeout {
            return Err(FlashError::DidNotReturn {
                after: waited,
                last: last_error,
            });
        }
        dev.wait(opts.poll)?;
        waited += opts.poll;
        // While the FPGA reloads, reads fail or return all ones; both blocks must answer.
        match (
            dev.read32(fw_id::TYPE_REG),
            dev.read32(reboot_regs::TYPE_REG),
        ) {
            (Ok(fw_id::TYPE_WORD), Ok(reboot_regs::TYPE_WORD)) => break,
            (Err(e), _) | (_, Err(e)) => last_error = Some(e.to_string()),
            _ => {}
        }
    }
    let after = read_firmware(dev)?;
    for (what, b, a) in [
        ("board id", before.board_id, after.board_id),
        ("FPGA part", before.part_id, after.part_id),
    ] {
        if a != b {
            return Err(FlashError::IdentityChanged {
                what,
                before: b,
                after: a,
            });
        }
    }
    if after.regmap_version != REGMAP_VERSION {
        return Err(FlashError::RegmapVersion {
            found: after.regmap_version,
            supported: REGMAP_VERSION,
        });
    }
    if opts.slot == Slot::User && after.boot.fallback {
        return Err(FlashError::FallbackBooted {
            slot: opts.slot.name(),
            reason: after.boot.reason(),
        });
    }
    if let Some(expected) = opts.expect_build_id {
        if after.build_id != expected {
            return Err(FlashError::UnexpectedBuild {
                found: after.build_id,
                expected,
            });
        }
    }
    Ok(RebootReport {
        before,
        after,
        took: waited,
    })
}
