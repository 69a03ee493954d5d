//! The boot model: which image the FPGA loads from flash, as UltraScale multiboot does it.
//!
//! A reboot asks for the image at `boot_addr` (the user segment by default). That image is
//! loaded when its segment's marker is valid, the marker's length and CRC-32 match the bytes,
//! and the configuration logic accepts the bitstream (sync word, matching IDCODE, DESYNC).
//! Otherwise the FPGA falls back to the golden image at address 0; that one needs no marker
//! (it may have been written by a factory programmer), only a bitstream that configures. If
//! that fails too, the FPGA stays unconfigured: the card is bricked (only JTAG recovers it),
//! which is why the programmer touches the fallback segment only when forced.

use super::bitstream::{configure, ConfigError};
use super::chip::SpiNor;
use super::layout::{Crc32, Layout, MarkerError, Slot, SlotMarker, MARKER_LEN};

/// Why the requested image was not loaded; its code is reported in `boot_status` bits 7..4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// `boot_addr` is not the first byte of a segment.
    #[error("boot address is not a segment start")]
    NotASegment,
    /// No valid marker (never completed, interrupted, or damaged).
    #[error("slot marker: {0}")]
    Marker(MarkerError),
    /// The marker claims more bytes than the segment holds.
    #[error("marker length exceeds the segment")]
    TooLong,
    /// The image bytes do not match the marker's CRC-32.
    #[error("image CRC-32 mismatch")]
    Crc,
    /// The configuration logic refused the bitstream.
    #[error("configuration: {0}")]
    Config(ConfigError),
}

impl Rejection {
    /// The 4-bit code of `boot_status` bits 7..4 (0 = nothing was rejected).
    pub fn code(&self) -> u32 {
        use nlb_hw::enums::BootRejection as B;
        match self {
            Rejection::NotASegment => B::NotASegment,
            Rejection::Marker(MarkerError::Erased) => B::MarkerErased,
            Rejection::Marker(_) => B::MarkerDamaged,
            Rejection::TooLong => B::TooLong,
            Rejection::Crc => B::CrcMismatch,
            Rejection::Config(ConfigError::NoSync) => B::NoSync,
            Rejection::Config(ConfigError::IdcodeMismatch { .. }) => B::WrongPart,
            Rejection::Config(ConfigError::BadPacket { .. }) => B::BadPacket,
            Rejection::Config(ConfigError::Truncated) => B::Truncated,
        }
        .value()
    }

    /// Text for a `boot_status` code, as `nlbctl fw-info` prints it.
    pub fn describe_code(code: u32) -> &'static str {
        match code {
            0 => "none",
            1 => "boot address is not a segment start",
            2 => "no marker: the image was never completed (erased marker)",
            3 => "damaged marker (interrupted write or erase)",
            4 => "marker length exceeds the segment",
            5 => "image CRC-32 mismatch",
            6 => "no sync word",
            7 => "bitstream built for another FPGA part (IDCODE)",
            8 => "bad configuration packet",
            9 => "bitstream truncated before DESYNC",
            _ => "unknown",
        }
    }
}

/// A loaded image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// Where it came from.
    pub addr: u32,
    /// Bytes the configuration logic read (to the end of DESYNC).
    pub config_bytes: u32,
    /// USR_ACCESS of the bitstream.
    pub usr_access: Option<u32>,
}

/// The outcome of a boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// What runs, if anything configured.
    pub loaded: Option<Loaded>,
    /// The fallback runs because the requested image was rejected (or it was requested).
    pub fallback: bool,
    /// Why the requested image was rejected.
    pub rejected: Option<Rejection>,
}

/// Checks the user-style image of `slot`: marker, CRC, bitstream.
pub fn check_slot(
    chip: &SpiNor,
    layout: &Layout,
    slot: Slot,
    idcode: u32,
) -> Result<Loaded, Rejection> {
    let base = layout.base(slot);
    let mut raw = [0u8; MARKER_LEN];
    chip.read_direct(layout.marker_addr(slot), &mut raw);
    let marker = SlotMarker::decode(&raw).map_err(Rejection::Marker)?;
    if marker.image_len > layout.max_image_len() {
        return Err(Rejection::TooLong);
    }
    let mut crc = Crc32::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = 0u32;
    while at < marker.image_len {
        let n = (marker.image_len - at).min(buf.len() as u32) as usize;
        chip.read_direct(base + at, &mut buf[..n]);
        crc.update(&buf[..n]);
        at += n as u32;
    }
    if crc.finish() != marker.image_crc32 {
        return Err(Rejection::Crc);
    }
    configure_at(chip, base, marker.image_len, idcode)
}

fn configure_at(chip: &SpiNor, base: u32, len: u32, idcode: u32) -> Result<Loaded, Rejection> {
    let s = configure(len, |i| chip.read_byte(base + i), idcode).map_err(Rejection::Config)?;
    Ok(Loaded {
        addr: base,
        config_bytes: s.end,
        usr_access: s.usr_access,
    })
}

/// Boots: tries the image at `boot_addr`, then the golden image at 0.
pub fn boot(chip: &SpiNor, layout: &Layout, boot_addr: u32, idcode: u32) -> Outcome {
    let requested = match layout.slot_at(boot_addr) {
        Some(Slot::User) => check_slot(chip, layout, Slot::User, idcode),
        Some(Slot::Fallback) => {
            return Outcome {
                loaded: golden(chip, layout, idcode),
                fallback: true,
                rejected: None,
            }
        }
        None => Err(Rejection::NotASegment),
    };
    match requested {
        Ok(l) => Outcome {
            loaded: Some(l),
            fallback: false,
            rejected: None,
        },
        Err(why) => Outcome {
            loaded: golden(chip, layout, idcode),
            fallback: true,
            rejected: Some(why),
        },
    }
}

/// The golden image: checked by its marker when it has one, else by configuration alone.
fn golden(chip: &SpiNor, layout: &Layout, idcode: u32) -> Option<Loaded> {
    match check_slot(chip, layout, Slot::Fallback, idcode) {
        Ok(l) => Some(l),
        Err(Rejection::Marker(MarkerError::Erased)) => {
            configure_at(chip, 0, layout.max_image_len(), idcode).ok()
        }
        Err(_) => None,
    }
}
