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
//!
//! # The controller (`spi_flash` block)
//!
//! The registers' fields are in `docs/regmap.md` (generated from `hw/regmap.toml`).
//! * `ctrl`: chip select, the divider of the 250 MHz register clock (SCK = clk / (2 × (div +
//!   1))) and the bytes per `txrx` access.
//! * `txrx`: a write shifts out that many bytes, the most significant first (one byte: bits
//!   7..0); a read returns the bytes shifted in by the last write, last byte in bits 7..0.
//!   An access to `txrx` or `ctrl` while a shift runs waits for it (the bus stalls), so the
//!   host never polls `status`.
//! * `status.busy`: a shift is running.
//!
//! # The reboot block and the boot model
//!
//! See [`boot`] and [`layout`]. `boot_status` says whether the fallback runs, why the
//! requested image was rejected ([`boot::Rejection::code`]) and where the running image
//! starts.

pub mod bitstream;
pub mod boot;
pub mod chip;
pub mod layout;
mod rng;

use std::time::Duration;

use nlb_hw::blocks::{reboot, spi_flash};

pub use chip::{ChipKind, ChipTiming, ProgramFault, SpiNor, MT25QU01G, MT25QU02G, MT25QU512};
pub use layout::{Layout, Slot, SlotMarker};

/// Value written to `reboot.reboot` to reload from flash ('REBO').
pub const REBOOT_MAGIC: u32 = nlb_hw::enums::RebootKey::Reboot.value();
/// Configuration read rate from flash (SPI x4 at 85 MHz).
pub const CONFIG_BYTES_PER_SEC: u64 = 42_500_000;
/// Fixed part of a reconfiguration (power-on reset, housekeeping, PCIe link training).
pub const CONFIG_OVERHEAD: Duration = Duration::from_millis(20);
/// IDCODE of the XCU280 (the simulated card's default part).
pub const XCU280_IDCODE: u32 = 0x04B7_D093;
/// USR_ACCESS of the factory fallback image.
pub const FACTORY_FALLBACK_USR_ACCESS: u32 = 0xFA11_0001;
/// USR_ACCESS of the factory user image.
pub const FACTORY_USER_USR_ACCESS: u32 = 0x05E2_0001;

/// Which images a new [`FlashBlock`] finds in flash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactoryImages {
    /// Golden image in segment 0 and the same design as user image in segment 1.
    Both,
    /// Golden image only: the card boots the fallback.
    FallbackOnly,
    /// Blank flash: nothing boots.
    Blank,
}

/// How to build a [`FlashBlock`].
#[derive(Debug, Clone, Copy)]
pub struct FlashConfig {
    /// The flash part.
    pub chip: ChipKind,
    /// Its timing.
    pub timing: ChipTiming,
    /// Register clock of the controller.
    pub sys_clk_hz: u64,
    /// Simulated cost of one register read (a PCIe non-posted read round trip).
    pub mmio_read: Duration,
    /// IDCODE of the FPGA (bitstreams for another part do not configure).
    pub device_idcode: u32,
    /// Seed of the chip's jitter and partial states.
    pub seed: u64,
    /// Initial flash content.
    pub factory: FactoryImages,
}

impl Default for FlashConfig {
    fn default() -> Self {
        Self {
            chip: MT25QU02G,
            timing: ChipTiming::default(),
            sys_clk_hz: 250_000_000,
            mmio_read: Duration::from_micros(1),
            device_idcode: XCU280_IDCODE,
            seed: 0x5EED,
            factory: FactoryImages::Both,
        }
    }
}

/// What booted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootInfo {
    /// The fallback image (segment 0) is running.
    pub fallback: bool,
    /// Flash address the running image came from.
    pub image_addr: u32,
    /// USR_ACCESS word of the running bitstream, if it sets one.
    pub usr_access: Option<u32>,
    /// Why the requested image was rejected (`boot_status` bits 7..4), 0 = not rejected.
    pub rejection_code: u32,
}

impl BootInfo {
    /// The `boot_status` register value (its fields in `docs/regmap.md`).
    pub fn boot_status(&self) -> u32 {
        use reboot::boot_status as f;
        f::ADDRESS.bits(self.image_addr)
            | f::REJECTION.put(self.rejection_code).unwrap_or(0)
            | f::FALLBACK.flag(self.fallback)
    }
}

/// Whether the FPGA runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    Running,
    Configuring {
        until_ns: u64,
        outcome: boot::Outcome,
    },
    /// Nothing configured: the card is bricked until JTAG.
    Unconfigured,
    /// Power is off.
    Off,
}

/// One chip-select frame as seen on the SPI bus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpiFrame {
    /// Bytes the controller sent.
    pub mosi: Vec<u8>,
    /// Bytes the chip answered.
    pub miso: Vec<u8>,
}

/// Counters of register accesses served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessStats {
    /// Register reads.
    pub reads: u64,
    /// Register writes.
    pub writes: u64,
    /// Bytes shifted on the SPI bus.
    pub spi_bytes: u64,
}

/// The flash controller and reboot blocks with the flash chip behind them.
#[derive(Debug)]
pub struct FlashBlock {
    chip: SpiNor,
    layout: Layout,
    config: FlashConfig,
    ctrl: u32,
    rx: u32,
    shift_done_ns: u64,
    boot_addr: u32,
    boot: BootInfo,
    power: Power,
    reconfigured: bool,
    trace: Option<Vec<SpiFrame>>,
    frame: SpiFrame,
    stats: AccessStats,
}

impl Default for FlashBlock {
    fn default() -> Self {
        Self::new(FlashConfig::default())
    }
}

impl FlashBlock {
    /// A powered card that has booted from its factory images.
    pub fn new(config: FlashConfig) -> Self {
        let mut chip = SpiNor::new(config.chip, config.timing, config.seed);
        let layout = Layout::new(config.chip.size);
        let images: &[(Slot, u32)] = match config.factory {
            FactoryImages::Both => &[
                (Slot::Fallback, FACTORY_FALLBACK_USR_ACCESS),
                (Slot::User, FACTORY_USER_USR_ACCESS),
            ],
            FactoryImages::FallbackOnly => &[(Slot::Fallback, FACTORY_FALLBACK_USR_ACCESS)],
            FactoryImages::Blank => &[],
        };
        for &(slot, usr) in images {
            let image = bitstream::synthetic(config.device_idcode, Some(usr), 1024, u64::from(usr));
            let marker = SlotMarker {
                image_len: image.len() as u32,
                image_crc32: layout::crc32(&image),
                idcode: config.device_idcode & !bitstream::IDCODE_REVISION_MASK,
                usr_access: Some(usr),
                written_at: 0,
                design: format!("nlb_factory_{}", slot.name()),
            };
            chip.load_direct(layout.base(slot), &image);
            chip.load_direct(layout.marker_addr(slot), &marker.encode());
        }
        let mut block = Self {
            chip,
            layout,
            config,
            ctrl: spi_flash::CTRL_RESET,
            rx: 0,
            shift_done_ns: 0,
            boot_addr: layout.base(Slot::User),
            boot: BootInfo::default(),
            power: Power::Off,
            reconfigured: false,
            trace: None,
            frame: SpiFrame::default(),
            stats: AccessStats::default(),
        };
        let outcome = block.select_image();
        block.finish_boot(outcome);
        block.reconfigured = false;
        block
    }

    /// True for BAR offsets served by this block.
    pub fn handles(offset: u32) -> bool {
        (spi_flash::BASE..reboot::BASE + reboot::SPAN).contains(&offset)
    }

    /// Reads a register (absolute BAR offset). Reads take [`FlashConfig::mmio_read`] of
    /// simulated time; `txrx` first waits for a running shift.
    pub fn read32(&mut self, offset: u32) -> u32 {
        if !self.is_up() {
            // The read still takes its time (and lets a reconfiguration finish).
            let mmio = self.config.mmio_read.as_nanos() as u64;
            self.advance_ns(mmio);
            return 0xFFFF_FFFF;
        }
        self.stats.reads += 1;
        if offset == spi_flash::TXRX || offset == spi_flash::CTRL {
            self.stall();
        }
        let value = match offset {
            spi_flash::TYPE_REG => spi_flash::TYPE_WORD,
            spi_flash::VERSION_REG => spi_flash::VERSION,
            spi_flash::NEXT_REG => spi_flash::NEXT,
            spi_flash::CTRL => self.ctrl,
            spi_flash::TXRX => self.rx,
            spi_flash::STATUS => spi_flash::Status {
                busy: self.chip.now_ns() < self.shift_done_ns,
            }
            .word(),
            reboot::TYPE_REG => reboot::TYPE_WORD,
            reboot::VERSION_REG => reboot::VERSION,
            reboot::NEXT_REG => reboot::NEXT,
            reboot::BOOT_ADDR => self.boot_addr,
            reboot::BOOT_STATUS => self.boot.boot_status(),
            _ => 0,
        };
        let mmio = self.config.mmio_read.as_nanos() as u64;
        self.advance_ns(mmio);
        value
    }

    /// Writes a register (absolute BAR offset).
    pub fn write32(&mut self, offset: u32, value: u32) {
        if !self.is_up() {
            return;
        }
        self.stats.writes += 1;
        match offset {
            spi_flash::CTRL => {
                self.stall();
                let was = spi_flash::Ctrl::from_word(self.ctrl).cs;
                let now = spi_flash::Ctrl::from_word(value).cs;
                self.ctrl = value & spi_flash::ctrl::DEFINED;
                match (was, now) {
                    (false, true) => {
                        self.chip.select();
                        self.frame = SpiFrame::default();
                    }
                    (true, false) => {
                        self.chip.deselect();
                        let frame = std::mem::take(&mut self.frame);
                        if let Some(t) = &mut self.trace {
                            t.push(frame);
                        }
                    }
                    _ => {}
                }
            }
            spi_flash::TXRX => {
                self.stall();
                self.shift(value);
            }
            reboot::BOOT_ADDR => self.boot_addr = value,
            reboot::REBOOT if value == REBOOT_MAGIC => self.start_reconfiguration(),
            _ => {}
        }
    }

    /// Lets simulated time pass.
    pub fn advance(&mut self, d: Duration) {
        self.advance_ns(d.as_nanos() as u64);
    }

    /// Simulated time since the block was created.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.chip.now_ns())
    }

    /// False while the FPGA reloads from flash, when nothing could boot, or with power off.
    pub fn is_up(&self) -> bool {
        self.power == Power::Running
    }

    /// True when no image configured: only JTAG would recover such a card.
    pub fn is_bricked(&self) -> bool {
        self.power == Power::Unconfigured
    }

    /// True once after each completed reconfiguration.
    pub fn take_reconfigured(&mut self) -> bool {
        std::mem::take(&mut self.reconfigured)
    }

    /// What booted.
    pub fn boot_info(&self) -> &BootInfo {
        &self.boot
    }

    /// FPGA part code to report in `fw_id.part_id` (IDCODE without revision).
    pub fn part_id(&self) -> u32 {
        self.config.device_idcode & !bitstream::IDCODE_REVISION_MASK
    }

    /// The multiboot layout of this flash.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The flash chip (test probes: direct reads, fault injection).
    pub fn chip(&self) -> &SpiNor {
        &self.chip
    }

    /// The flash chip, mutably.
    pub fn chip_mut(&mut self) -> &mut SpiNor {
        &mut self.chip
    }

    /// Register accesses served so far.
    pub fn stats(&self) -> AccessStats {
        self.stats
    }

    /// Starts (or stops) recording SPI frames.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on.then(Vec::new);
    }

    /// The frames recorded since the last call.
    pub fn take_trace(&mut self) -> Vec<SpiFrame> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Power is lost now: a running program or erase stops where it is.
    pub fn power_cut(&mut self) {
        self.chip.power_loss();
        self.power = Power::Off;
        self.reset_controller();
    }

    /// Power returns: the FPGA configures (user image if valid, else fallback) and is back
    /// after the configuration time.
    pub fn power_on(&mut self) {
        if self.power != Power::Off {
            return;
        }
        self.boot_addr = self.layout.base(Slot::User);
        self.begin_configuration();
    }

    fn reset_controller(&mut self) {
        self.ctrl = spi_flash::CTRL_RESET;
        self.rx = 0;
        self.shift_done_ns = self.chip.now_ns();
        self.frame = SpiFrame::default();
    }

    fn start_reconfiguration(&mut self) {
        // The fabric (and with it this controller) goes away; chip select rises.
        self.chip.deselect();
        self.reset_controller();
        self.begin_configuration();
    }

    fn begin_configuration(&mut self) {
        let outcome = self.select_image();
        let bytes = outcome.loaded.map_or(0, |l| u64::from(l.config_bytes));
        let load_ns = bytes * 1_000_000_000 / CONFIG_BYTES_PER_SEC;
        let until_ns = self.chip.now_ns() + CONFIG_OVERHEAD.as_nanos() as u64 + load_ns;
        self.power = Power::Configuring { until_ns, outcome };
    }

    fn select_image(&mut self) -> boot::Outcome {
        // The configuration logic waits for a running program or erase before reading.
        while self.chip.busy() {
            let t = self.chip.now_ns() + 100_000;
            self.chip.advance_to(t);
        }
        boot::boot(
            &self.chip,
            &self.layout,
            self.boot_addr,
            self.config.device_idcode,
        )
    }

    fn finish_boot(&mut self, outcome: boot::Outcome) {
        self.reconfigured = true;
        match outcome.loaded {
            Some(l) => {
                self.boot = BootInfo {
                    fallback: outcome.fallback,
                    image_addr: l.addr,
                    usr_access: l.usr_access,
                    rejection_code: outcome.rejected.map_or(0, |r| r.code()),
                };
                self.power = Power::Running;
                // After any boot, a reboot goes to the user image again by default.
                self.boot_addr = self.layout.base(Slot::User);
                self.reset_controller();
            }
            None => self.power = Power::Unconfigured,
        }
    }

    fn advance_ns(&mut self, ns: u64) {
        let t = self.chip.now_ns().saturating_add(ns);
        self.chip.advance_to(t);
        if let Power::Configuring { until_ns, outcome } = self.power {
            if self.chip.now_ns() >= until_ns {
                self.finish_boot(outcome);
            }
        }
    }

    /// The bus waits for a running shift.
    fn stall(&mut self) {
        let t = self.shift_done_ns;
        self.chip.advance_to(t);
    }

    fn byte_time_ns(&self) -> u64 {
        let div = u64::from(spi_flash::Ctrl::from_word(self.ctrl).div);
        // 8 bits, each two half periods of (div + 1) register clocks.
        16 * (div + 1) * 1_000_000_000 / self.config.sys_clk_hz
    }

    fn shift(&mut self, value: u32) {
        let ctrl = spi_flash::Ctrl::from_word(self.ctrl);
        let n = u32::from(ctrl.bytes_m1) + 1;
        let byte_ns = self.byte_time_ns();
        let start = self.chip.now_ns();
        let selected = ctrl.cs;
        // The low n bytes of the word go out, the most significant first; the bytes shifted
        // in fill the low n bytes the same way (the last in bits 7..0).
        let bytes = value.to_be_bytes();
        let mut got = [0u8; 4];
        for i in 0..n {
            self.chip.advance_to(start + u64::from(i) * byte_ns);
            let out = bytes[(4 - n + i) as usize];
            let input = if selected {
                self.chip.transfer(out)
            } else {
                0xFF
            };
            if selected && self.trace.is_some() {
                self.frame.mosi.push(out);
                self.frame.miso.push(input);
            }
            got[(4 - n + i) as usize] = input;
        }
        self.stats.spi_bytes += u64::from(n);
        self.rx = u32::from_be_bytes(got);
        self.shift_done_ns = start + u64::from(n) * byte_ns;
    }
}

/// The simulated device's flash port: register accesses, the reboot that resets the device,
/// simulated time, going off the bus while reloading, and the booted identity.
impl crate::device::FlashPort for FlashBlock {
    fn read32(&mut self, offset: u32) -> u32 {
        FlashBlock::read32(self, offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> crate::device::PortEffect {
        let was_up = self.is_up();
        FlashBlock::write32(self, offset, value);
        if was_up && !self.is_up() {
            crate::device::PortEffect::Reconfigure
        } else {
            crate::device::PortEffect::None
        }
    }

    fn advance(&mut self, d: Duration) {
        FlashBlock::advance(self, d);
    }

    fn is_up(&self) -> bool {
        FlashBlock::is_up(self)
    }

    fn build_id(&self) -> Option<u32> {
        self.boot_info().usr_access
    }

    fn part_id(&self) -> Option<u32> {
        Some(FlashBlock::part_id(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nlb_hw::blocks::{reboot, spi_flash};

    fn small() -> FlashBlock {
        FlashBlock::new(FlashConfig {
            chip: MT25QU01G,
            ..FlashConfig::default()
        })
    }

    #[test]
    fn factory_card_boots_the_user_image() {
        let mut f = small();
        assert!(f.is_up());
        assert_eq!(f.read32(reboot::TYPE_REG), 0x4E4C_0008);
        assert_eq!(f.read32(spi_flash::NEXT_REG), reboot::BASE);
        // User segment of a 128 MiB part: 0x0400_0000, nothing rejected, not fallback.
        assert_eq!(f.read32(reboot::BOOT_STATUS), 0x0400_0000);
        assert_eq!(f.boot_info().usr_access, Some(FACTORY_USER_USR_ACCESS));
    }

    #[test]
    fn four_byte_transfer_reads_the_jedec_id() {
        let mut f = small();
        f.set_trace(true);
        let four_bytes = spi_flash::Ctrl {
            cs: true,
            div: 0,
            bytes_m1: 3,
        };
        f.write32(spi_flash::CTRL, four_bytes.word().unwrap());
        f.write32(spi_flash::TXRX, 0x9F00_0000);
        assert_eq!(f.read32(spi_flash::TXRX), 0xFF20_BB21);
        f.write32(spi_flash::CTRL, 0);
        let t = f.take_trace();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].mosi, vec![0x9F, 0, 0, 0]);
        assert_eq!(t[0].miso, vec![0xFF, 0x20, 0xBB, 0x21]);
    }

    #[test]
    fn shifting_takes_bus_time() {
        let mut f = small();
        let div1 = spi_flash::Ctrl {
            cs: true,
            div: 1,
            bytes_m1: 0,
        };
        f.write32(spi_flash::CTRL, div1.word().unwrap());
        let t0 = f.now();
        f.write32(spi_flash::TXRX, 0x05);
        // One byte at 62.5 MHz: 128 ns; the status read is sampled as it arrives.
        assert_eq!(f.read32(spi_flash::STATUS), 1, "bit 0: busy");
        assert_eq!(f.now() - t0, Duration::from_micros(1), "a read costs 1 us");
        assert_eq!(f.read32(spi_flash::STATUS), 0);
        f.write32(spi_flash::TXRX, 0x00);
        f.write32(spi_flash::TXRX, 0x00);
        assert_eq!(
            f.now() - t0,
            Duration::from_nanos(2000 + 128),
            "second write stalled"
        );
    }

    #[test]
    fn reboot_goes_off_the_bus_and_returns() {
        let mut f = small();
        f.write32(reboot::REBOOT, 0x1234);
        assert!(f.is_up(), "wrong magic ignored");
        f.write32(reboot::REBOOT, REBOOT_MAGIC);
        assert!(!f.is_up());
        assert_eq!(f.read32(reboot::BOOT_STATUS), 0xFFFF_FFFF);
        f.advance(Duration::from_millis(19));
        assert!(!f.is_up());
        f.advance(Duration::from_millis(2));
        assert!(f.is_up());
        assert!(f.take_reconfigured());
        assert!(!f.take_reconfigured());
    }

    #[test]
    fn the_simulated_device_routes_to_the_block() {
        use crate::device::{FlashPort, PortEffect};
        let mut f = small();
        assert_eq!(
            FlashPort::read32(&mut f, reboot::BOOT_STATUS),
            0x0400_0000,
            "user image running"
        );
        assert_eq!(
            FlashPort::write32(&mut f, reboot::BOOT_ADDR, 0),
            PortEffect::None
        );
        assert_eq!(
            FlashPort::write32(&mut f, reboot::REBOOT, REBOOT_MAGIC),
            PortEffect::Reconfigure
        );
        // Polling reads take 1 us each: the fallback (asked for) is back after 20 ms.
        let mut polls = 0;
        while FlashPort::read32(&mut f, reboot::BOOT_STATUS) == u32::MAX {
            polls += 1;
        }
        assert!((20_000..20_200).contains(&polls), "{polls}");
        assert_eq!(FlashPort::read32(&mut f, reboot::BOOT_STATUS), 0x0000_0001);
    }

    #[test]
    fn erased_user_marker_boots_the_fallback_and_says_why() {
        let mut f = small();
        let m = f.layout().marker_addr(Slot::User);
        f.chip_mut().load_direct(m, &[0xFF; 64]);
        f.write32(reboot::REBOOT, REBOOT_MAGIC);
        f.advance(Duration::from_millis(100));
        assert!(f.is_up());
        // Fallback at address 0, reason 2 (erased marker) in bits 7..4.
        assert_eq!(f.read32(reboot::BOOT_STATUS), 0x21);
        assert_eq!(f.boot_info().usr_access, Some(FACTORY_FALLBACK_USR_ACCESS));
    }
}
