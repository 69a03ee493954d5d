//! The flash programmer: erase, program, read back, verify, repair, then vouch for the image
//! with the slot marker.
//!
//! Order of work, so that a power cut at any moment leaves a card that boots:
//!
//! 1. erase the slot's marker: from here on the old image of the slot is invalid, and the
//!    boot logic falls back to segment 0 until step 6 completes;
//! 2. erase the image area (64 KiB sectors, 4 KiB subsectors at the ragged end);
//! 3. program every page except the first, then the first (it holds the sync word, so a
//!    partial image never even looks like a bitstream to the FPGA);
//! 4. read everything back and compare;
//! 5. re-erase and re-program each 4 KiB subsector that differs, up to `max_retries` times;
//! 6. write the marker (length, CRC-32, identity, its own CRC) and read it back.

use std::time::{SystemTime, UNIX_EPOCH};

use firmware_sim::flash::layout::{self, Crc32, Layout, Slot, SlotMarker, PAGE, SECTOR, SUBSECTOR};

use super::bitstream::Bitstream;
use super::spi::{ChipInfo, EraseSize, SpiFlash, SpiStats};
use super::{check_part, read_firmware, FlashError};
use crate::device::Device;

/// What to flash and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashOptions {
    /// Target slot.
    pub slot: Slot,
    /// Flash even if the bitstream's part does not match the card, and allow the fallback
    /// slot.
    pub force: bool,
    /// Re-program attempts per subsector that fails verification.
    pub max_retries: u32,
}

impl Default for FlashOptions {
    fn default() -> Self {
        Self {
            slot: Slot::User,
            force: false,
            max_retries: 3,
        }
    }
}

/// The phase a progress report belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Erasing the marker and the image area.
    Erase,
    /// Programming pages.
    Program,
    /// Reading back and comparing.
    Verify,
    /// Re-programming a subsector that failed verification.
    Repair,
    /// Writing and checking the marker.
    Marker,
}

impl Phase {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Erase => "erase",
            Phase::Program => "program",
            Phase::Verify => "verify",
            Phase::Repair => "repair",
            Phase::Marker => "marker",
        }
    }
}

/// Progress within a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// Bytes done in this phase.
    pub done: u64,
    /// Bytes this phase handles.
    pub total: u64,
}

/// What a successful flash did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlashReport {
    /// The slot written.
    pub slot: Slot,
    /// Its first byte in flash.
    pub addr: u32,
    /// Image bytes.
    pub bytes: u32,
    /// CRC-32 (ISO-HDLC, as `crc32(1)` computes it) of the image.
    pub crc32: u32,
    /// The flash chip.
    pub chip: ChipInfo,
    /// Bytes erased.
    pub erased: u64,
    /// Subsectors that failed verification and were re-programmed (their addresses).
    pub repaired: Vec<u32>,
    /// Register traffic.
    pub stats: SpiStats,
    /// The marker written.
    pub marker: SlotMarker,
}

/// Erase units covering `base..base + len` (rounded up to subsectors): whole 64 KiB sectors
/// where they fit, 4 KiB subsectors elsewhere.
pub fn erase_plan(base: u32, len: u32) -> Vec<(u32, EraseSize)> {
    let end = base + len.div_ceil(SUBSECTOR) * SUBSECTOR;
    let mut plan = Vec::new();
    let mut at = base;
    while at < end {
        if at.is_multiple_of(SECTOR) && at + SECTOR <= end {
            plan.push((at, EraseSize::Sector));
            at += SECTOR;
        } else {
            plan.push((at, EraseSize::Subsector));
            at += SUBSECTOR;
        }
    }
    plan
}

/// Flashes `image` into a slot of the card behind `dev`.
pub fn flash_image<D: Device + ?Sized>(
    dev: &mut D,
    image: &Bitstream,
    opts: &FlashOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<FlashReport, FlashError> {
    if opts.slot == Slot::Fallback && !opts.force {
        return Err(FlashError::FallbackNeedsForce);
    }
    let fw = read_firmware(dev)?;
    if !opts.force {
        check_part(image, &fw)?;
    }
    let mut spi = SpiFlash::new(dev)?;
    let chip = spi.chip()?;
    let layout = Layout::new(chip.size);
    let data = &image.data;
    let len = u32::try_from(data.len()).map_err(|_| FlashError::TooLarge {
        bytes: data.len() as u64,
        max: layout.max_image_len(),
    })?;
    if len > layout.max_image_len() {
        return Err(FlashError::TooLarge {
            bytes: u64::from(len),
            max: layout.max_image_len(),
        });
    }
    let base = layout.base(opts.slot);
    let marker_addr = layout.marker_addr(opts.slot);

    // 1-2. Invalidate, then erase.
    let plan = erase_plan(base, len);
    let erase_total: u64 =
        u64::from(SUBSECTOR) + plan.iter().map(|(_, s)| u64::from(s.bytes())).sum::<u64>();
    let mut erased = 0u64;
    progress(Progress {
        phase: Phase::Erase,
        done: 0,
        total: erase_total,
    });
    spi.erase(marker_addr, EraseSize::Subsector)?;
    erased += u64::from(SUBSECTOR);
    for &(addr, size) in &plan {
        spi.erase(addr, size)?;
        erased += u64::from(size.bytes());
        progress(Progress {
            phase: Phase::Erase,
            done: erased,
            total: erase_total,
        });
    }

    // 3. Program, first page last.
    let pages = len.div_ceil(PAGE);
    let order = (1..pages).chain((pages > 0).then_some(0));
    let mut programmed = 0u64;
    for page in order {
        program_page_of(&mut spi, base, data, page)?;
        programmed += u64::from(page_len(len, page));
        if page % 64 == 0 || page + 1 == pages {
            progress(Progress {
                phase: Phase::Program,
                done: programmed,
                total: u64::from(len),
            });
        }
    }

    // 4-5. Verify and repair.
    let bad = verify(&mut spi, base, data, progress)?;
    let mut repaired = Vec::new();
    for sub in bad {
        repair(&mut spi, base, data, sub, opts.max_retries)?;
        repaired.push(base + sub * SUBSECTOR);
        progress(Progress {
            phase: Phase::Repair,
            done: repaired.len() as u64,
            total: repaired.len() as u64,
        });
    }

    // 6. Vouch for it.
    let marker = SlotMarker {
        image_len: len,
        image_crc32: layout::crc32(data),
        idcode: image.target_idcode().unwrap_or(0),
        usr_access: image.usr_access,
        written_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32),
        design: image.design().unwrap_or_default().to_string(),
    };
    write_marker(&mut spi, marker_addr, &marker, opts.max_retries)?;
    progress(Progress {
        phase: Phase::Marker,
        done: 1,
        total: 1,
    });
    Ok(FlashReport {
        slot: opts.slot,
        addr: base,
        bytes: len,
        crc32: marker.image_crc32,
        chip,
        erased,
        repaired,
        stats: spi.stats(),
        marker,
    })
}

fn page_len(len: u32, page: u32) -> u32 {
    (len - page * PAGE).min(PAGE)
}

fn program_page_of<D: Device + ?Sized>(
    spi: &mut SpiFlash<'_, D>,
    base: u32,
    data: &[u8],
    page: u32,
) -> Result<(), FlashError> {
    let start = (page * PAGE) as usize;
    let bytes = &data[start..(start + PAGE as usize).min(data.len())];
    // Erased flash already reads 0xFF: skip pages with nothing to clear.
    if bytes.iter().all(|&b| b == 0xFF) {
        return Ok(());
    }
    spi.program_page(base + page * PAGE, bytes)
}

/// Reads the image area back; returns the indices of subsectors that differ.
fn verify<D: Device + ?Sized>(
    spi: &mut SpiFlash<'_, D>,
    base: u32,
    data: &[u8],
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<u32>, FlashError> {
    let mut bad = Vec::new();
    let mut buf = vec![0u8; SECTOR as usize];
    let total = data.len() as u64;
    for (i, chunk) in data.chunks(SECTOR as usize).enumerate() {
        let at = i as u32 * SECTOR;
        let got = &mut buf[..chunk.len()];
        spi.read(base + at, got)?;
        for (j, (want, have)) in chunk
            .chunks(SUBSECTOR as usize)
            .zip(got.chunks(SUBSECTOR as usize))
            .enumerate()
        {
            if want != have {
                bad.push(at / SUBSECTOR + j as u32);
            }
        }
        progress(Progress {
            phase: Phase::Verify,
            done: (u64::from(at) + chunk.len() as u64).min(total),
            total,
        });
    }
    Ok(bad)
}

fn repair<D: Device + ?Sized>(
    spi: &mut SpiFlash<'_, D>,
    base: u32,
    data: &[u8],
    sub: u32,
    max_retries: u32,
) -> Result<(), FlashError> {
    let start = (sub * SUBSECTOR) as usize;
    let want = &data[start..(start + SUBSECTOR as usize).min(data.len())];
    let addr = base + sub * SUBSECTOR;
    let mut got = vec![0u8; want.len()];
    for _ in 0..max_retries {
        spi.erase(addr, EraseSize::Subsector)?;
        let first_page = sub * SUBSECTOR / PAGE;
        let pages = (want.len() as u32).div_ceil(PAGE);
        for page in first_page..first_page + pages {
            program_page_of(spi, base, data, page)?;
        }
        spi.read(addr, &mut got)?;
        if got == want {
            return Ok(());
        }
    }
    let mismatch = want.iter().zip(&got).position(|(a, b)| a != b).unwrap_or(0) as u32;
    Err(FlashError::VerifyFailed {
        addr: addr + mismatch,
        retries: max_retries,
    })
}

fn write_marker<D: Device + ?Sized>(
    spi: &mut SpiFlash<'_, D>,
    marker_addr: u32,
    marker: &SlotMarker,
    max_retries: u32,
) -> Result<(), FlashError> {
    let bytes = marker.encode();
    let mut got = [0u8; layout::MARKER_LEN];
    for attempt in 0..=max_retries {
        if attempt > 0 {
            spi.erase(marker_addr, EraseSize::Subsector)?;
        }
        spi.program_page(marker_addr, &bytes)?;
        spi.read(marker_addr, &mut got)?;
        if got == bytes {
            return Ok(());
        }
    }
    Err(FlashError::VerifyFailed {
        addr: marker_addr,
        retries: max_retries,
    })
}

/// CRC-32 of the image bytes of `slot` as its marker describes them, read from flash (what
/// `nlbctl fw-info --check` prints), or the marker error.
pub fn slot_crc<D: Device + ?Sized>(
    spi: &mut SpiFlash<'_, D>,
    layout: &Layout,
    slot: Slot,
) -> Result<(SlotMarker, u32), FlashError> {
    let mut raw = [0u8; layout::MARKER_LEN];
    spi.read(layout.marker_addr(slot), &mut raw)?;
    let marker = SlotMarker::decode(&raw).map_err(|e| FlashError::NoImage {
        slot: slot.name(),
        why: e,
    })?;
    let len = marker.image_len.min(layout.max_image_len());
    let mut crc = Crc32::new();
    let mut buf = vec![0u8; SECTOR as usize];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(SECTOR);
        spi.read(layout.base(slot) + at, &mut buf[..n as usize])?;
        crc.update(&buf[..n as usize]);
        at += n;
    }
    Ok((marker, crc.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erase_plan_uses_sectors_where_they_fit() {
        // 0x0400_0000 + 0x1_2345 bytes: one 64 KiB sector, then 3 subsectors (0x2345 rounds
        // up to 0x3000).
        let p = erase_plan(0x0400_0000, 0x1_2345);
        assert_eq!(
            p,
            vec![
                (0x0400_0000, EraseSize::Sector),
                (0x0401_0000, EraseSize::Subsector),
                (0x0401_1000, EraseSize::Subsector),
                (0x0401_2000, EraseSize::Subsector),
            ]
        );
        assert!(erase_plan(0, 0).is_empty());
        let p = erase_plan(0, 0x2_0000);
        assert_eq!(p.len(), 2);
    }
}
