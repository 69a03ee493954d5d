//! Bitstream files and the flash programmer (issue: flashing NIC bitstreams safely).
//!
//! * [`bitstream`]: `.bit` / `.bin` parsing, sync word, the part a bitstream targets.
//! * [`spi`]: SPI NOR commands over the `spi_flash` controller block.
//! * [`program`]: erase, program, verify, repair and the slot marker ([`flash_image`]).
//! * [`fw`]: what the card runs and what its flash holds ([`fw_info`]), and [`reboot`].
//!
//! The multiboot layout (segment 0 fallback, segment 1 user, marker in each segment's last
//! 4 KiB) is `firmware_sim::flash::layout`, shared with the boot model; see `docs/flashing.md`.

pub mod bitstream;
pub mod fw;
pub mod program;
pub mod spi;

#[cfg(test)]
mod tests;

use std::time::Duration;

use firmware_sim::flash::layout::MarkerError;
use nlb_hw::blocks::{fw_id, reboot, spi_flash};

pub use bitstream::{Bitstream, BitstreamError};
pub use firmware_sim::flash::layout::{Layout, Slot, SlotMarker};
pub use fw::{fw_info, reboot, BootStatus, FirmwareIdent, FwInfo, RebootOptions, RebootReport};
pub use program::{flash_image, FlashOptions, FlashReport, Phase, Progress};

use crate::device::{Device, DeviceError};

/// Why flashing, `fw-info` or `reboot` failed.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    /// Register access failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The bitstream file is unusable.
    #[error(transparent)]
    Bitstream(#[from] BitstreamError),
    /// The card does not answer as an nlb-offload device.
    #[error(
        "the card does not answer: firmware-ID type reads {found:#010x}, expected {expected:#010x}{hint}",
        expected = fw_id::TYPE_WORD,
        hint = if *found == u32::MAX { " (all ones: rebooting, or the FPGA is not configured)" } else { "" }
    )]
    NotUp {
        /// The word read.
        found: u32,
    },
    /// A register block the flash tools need is missing or of another version.
    #[error("the card has no usable `{name}` block (type {type_word:#010x}, version {version}); this tool needs version {supported}")]
    MissingBlock {
        /// Block name.
        name: &'static str,
        /// TYPE read.
        type_word: u32,
        /// VERSION read.
        version: u32,
        /// Version supported.
        supported: u32,
    },
    /// The flash chip is not one the programmer knows.
    #[error(
        "unknown flash chip, JEDEC ID {:02x} {:02x} {:02x}; supported: {}",
        jedec_id[0], jedec_id[1], jedec_id[2],
        spi::KNOWN_CHIPS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
    )]
    UnknownChip {
        /// The ID read.
        jedec_id: [u8; 3],
    },
    /// The flash chip stayed busy: a program or erase did not end within the limit.
    #[error(
        "the flash chip is still busy after {after:?} (status register {status:#04x}, write in \
         progress): a program or erase started earlier (an interrupted `nlbctl flash`?) has \
         not ended; run the command again, and if the chip stays busy, power-cycle the card"
    )]
    ChipBusy {
        /// How long we waited.
        after: Duration,
        /// The last status register read.
        status: u8,
    },
    /// The bitstream targets another FPGA part.
    #[error(
        "the bitstream is for {bitstream} but this card's FPGA is {card}: refusing to flash it \
         (it would not configure); pass --force to flash anyway"
    )]
    PartMismatch {
        /// What the bitstream says (part name and IDCODE).
        bitstream: String,
        /// What the card says.
        card: String,
    },
    /// The bitstream does not say which part it is for.
    #[error(
        "cannot tell which FPGA part the bitstream is for (no IDCODE packet and no known part \
         name in a .bit header); this card is {card}; pass --force to flash anyway"
    )]
    UnknownTargetPart {
        /// What the card says.
        card: String,
    },
    /// The configuration data never ends configuration.
    #[error("the bitstream has no DESYNC command: it is truncated; pass --force to flash anyway")]
    Incomplete,
    /// Writing the fallback slot needs `--force`.
    #[error(
        "refusing to write the fallback slot without --force: it is what the card boots when \
         the user image fails, and an interrupted write there can leave the card unbootable \
         (JTAG recovery)"
    )]
    FallbackNeedsForce,
    /// The image does not fit its slot.
    #[error("the image is {bytes} bytes; a slot of this flash holds at most {max}")]
    TooLarge {
        /// Image bytes.
        bytes: u64,
        /// Slot capacity.
        max: u32,
    },
    /// A wait ran out.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// Read-back still differs after the retries.
    #[error(
        "flash at {addr:#010x} still differs from the image after {retries} re-programming \
         attempts; the slot has no valid marker, so the card will boot the fallback image"
    )]
    VerifyFailed {
        /// First differing byte.
        addr: u32,
        /// Attempts made.
        retries: u32,
    },
    /// A slot holds no complete image.
    #[error("the {slot} slot holds no complete image: {why}")]
    NoImage {
        /// Slot name.
        slot: &'static str,
        /// Marker problem.
        why: MarkerError,
    },
    /// The card did not come back after a reboot.
    #[error(
        "the card did not come back within {after:?} after the reboot{}",
        last.as_ref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    DidNotReturn {
        /// How long we waited.
        after: Duration,
        /// The last access error seen, if any.
        last: Option<String>,
    },
    /// The card came back running the fallback image.
    #[error(
        "the card came back running the fallback image: the {slot} image was rejected ({reason}); \
         flash it again"
    )]
    FallbackBooted {
        /// The slot that was asked for.
        slot: &'static str,
        /// Why the boot logic rejected it.
        reason: &'static str,
    },
    /// The card came back as something else.
    #[error("after the reboot the card reports {what}: {after:#x} (was {before:#x})")]
    IdentityChanged {
        /// Which field.
        what: &'static str,
        /// Before.
        before: u32,
        /// After.
        after: u32,
    },
    /// The card came back with another build than expected.
    #[error("after the reboot the card runs build {found:#010x}, expected {expected:#010x}")]
    UnexpectedBuild {
        /// Build id found.
        found: u32,
        /// Build id expected.
        expected: u32,
    },
    /// The card came back speaking another register map version.
    #[error(
        "after the reboot the card speaks regmap version {found}; this tool speaks {supported} \
         (use the tools of the release the bitstream came from)"
    )]
    RegmapVersion {
        /// Version found.
        found: u32,
        /// Version supported.
        supported: u32,
    },
}

fn describe_part(idcode: u32) -> String {
    match bitstream::part_of_idcode(idcode) {
        Some(name) => format!("{name} (IDCODE {idcode:#010x})"),
        None => format!("IDCODE {idcode:#010x}"),
    }
}

/// Reads the firmware-ID block and checks that the flash blocks are there.
pub fn read_firmware<D: Device + ?Sized>(dev: &mut D) -> Result<FirmwareIdent, FlashError> {
    let found = dev.read32(fw_id::TYPE_REG)?;
    if found != fw_id::TYPE_WORD {
        return Err(FlashError::NotUp { found });
    }
    for (name, type_reg, type_word, version) in [
        (
            "spi_flash",
            spi_flash::TYPE_REG,
            spi_flash::TYPE_WORD,
            spi_flash::VERSION,
        ),
        (
            "reboot",
            reboot::TYPE_REG,
            reboot::TYPE_WORD,
            reboot::VERSION,
        ),
    ] {
        let t = dev.read32(type_reg)?;
        let v = dev.read32(type_reg + 4)?;
        if t != type_word || v != version {
            return Err(FlashError::MissingBlock {
                name,
                type_word: t,
                version: v,
                supported: version,
            });
        }
    }
    let boot_status = dev.read32(reboot::BOOT_STATUS)?;
    Ok(FirmwareIdent {
        design_version: dev.read32(fw_id::DESIGN_VERSION)?,
        regmap_version: dev.read32(fw_id::REGMAP_VERSION)?,
        build_id: dev.read32(fw_id::BUILD_ID)?,
        git_hash: dev.read32(fw_id::GIT_HASH)?,
        board_id: dev.read32(fw_id::BOARD_ID)?,
        part_id: dev.read32(fw_id::PART_ID)?,
        profile_id: dev.read32(fw_id::PROFILE_ID)?,
        boot: BootStatus::from_register(boot_status),
    })
}

/// Refuses a bitstream for another part than the card's, or one that cannot be checked.
pub fn check_part(image: &Bitstream, fw: &FirmwareIdent) -> Result<(), FlashError> {
    let card = fw.part_id & !bitstream::IDCODE_REVISION_MASK;
    let from_header = image
        .header
        .as_ref()
        .and_then(|h| bitstream::idcode_of_part(&h.part).map(|id| (h.part.clone(), id)));
    let mut checked = false;
    if let Some((name, id)) = from_header {
        checked = true;
        if id != card {
            return Err(FlashError::PartMismatch {
                bitstream: format!("{name} (IDCODE {id:#010x})"),
                card: describe_part(card),
            });
        }
    }
    if let Some(id) = image.idcode {
        checked = true;
        if id != card {
            return Err(FlashError::PartMismatch {
                bitstream: describe_part(id),
                card: describe_part(card),
            });
        }
    }
    if !checked {
        return Err(FlashError::UnknownTargetPart {
            card: describe_part(card),
        });
    }
    if !image.has_desync {
        return Err(FlashError::Incomplete);
    }
    Ok(())
}
