//! The simulated SPI NOR flash chip and the flash controller / reboot register blocks.
//!
//! # Hook for the simulated device
//!
//! The register-level simulated device owns one [`FlashBlock`] and routes every access whose
//! BAR offset satisfies [`FlashBlock::handles`] (the `spi_flash` and `reboot` blocks, including
//! their TYPE/VERSION/NEXT words) to [`FlashBlock::read32`] / [`FlashBlock::write32`] with the
//! **absolute** BAR offset, and calls [`FlashBlock::advance`] whenever simulated time passes.
//!
//! Reboot (`reboot.reboot` = `'REBO'`) takes the FPGA off the bus while it reloads from flash:
//! while [`FlashBlock::is_up`] is false every register of the device reads `0xFFFF_FFFF` (as a
//! PCIe function that is gone does) and writes are dropped. When it returns,
//! [`FlashBlock::take_reconfigured`] is true once: the device then resets its pipeline state (a
//! new bitstream starts from reset) and reports [`FlashBlock::boot_info`] in the firmware-ID
//! block (`build_id` = [`BootInfo::usr_access`] when the image carries one; `part_id` =
//! [`FlashBlock::part_id`]).
#![allow(missing_docs)] // (skeleton: documented in full with the implementation)

use std::time::Duration;

use nlb_hw::blocks::{reboot, spi_flash};

/// What booted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootInfo {
    /// The fallback image (segment 0) is running.
    pub fallback: bool,
    /// Flash address the running image came from.
    pub image_addr: u32,
    /// USR_ACCESS word of the running bitstream, if it sets one.
    pub usr_access: Option<u32>,
}

/// The flash controller and reboot blocks with the flash chip behind them.
#[derive(Debug, Default)]
pub struct FlashBlock {
    boot: BootInfo,
    reconfigured: bool,
}

impl FlashBlock {
    /// True for BAR offsets served by this block.
    pub fn handles(offset: u32) -> bool {
        (spi_flash::BASE..reboot::BASE + 0x1000).contains(&offset)
    }
    /// Reads a register (absolute BAR offset).
    pub fn read32(&mut self, offset: u32) -> u32 {
        let _ = offset;
        0
    }
    /// Writes a register (absolute BAR offset).
    pub fn write32(&mut self, offset: u32, value: u32) {
        let _ = (offset, value);
    }
    /// Lets simulated time pass.
    pub fn advance(&mut self, d: Duration) {
        let _ = d;
    }
    /// False while the FPGA reloads from flash (or when nothing could boot).
    pub fn is_up(&self) -> bool {
        true
    }
    /// True once after each completed reconfiguration.
    pub fn take_reconfigured(&mut self) -> bool {
        std::mem::take(&mut self.reconfigured)
    }
    /// What booted.
    pub fn boot_info(&self) -> &BootInfo {
        &self.boot
    }
    /// FPGA part code to report in `fw_id.part_id`.
    pub fn part_id(&self) -> u32 {
        0x04B7_D093
    }
}
