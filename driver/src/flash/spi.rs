//! SPI NOR commands over the flash controller block (`spi_flash` in `docs/regmap.md`).
//!
//! The controller shifts up to four bytes per `txrx` access (width in `ctrl` bits 17..16),
//! stalling the bus while it shifts, so a page program is 64 word writes and a read costs a
//! write and a read per four bytes. Only the dedicated 4-byte-address opcodes are used, so the
//! chip's address mode and extended address register never matter.

use std::time::Duration;

use nlb_hw::blocks::spi_flash;

use super::FlashError;
use crate::device::Device;

/// The divider used (`ctrl.div`): 62.5 MHz, within every supported chip's limit for all
/// opcodes used.
pub const DIVIDER: u8 = 1;

/// Bytes in a mebibyte (chip sizes).
const MIB: u64 = 1024 * 1024;

/// `ctrl` with the divider used: chip select, and `bytes` (1..=4) per `txrx` access.
pub fn ctrl(cs: bool, bytes: u8) -> spi_flash::Ctrl {
    spi_flash::Ctrl {
        cs,
        div: DIVIDER,
        bytes_m1: bytes.saturating_sub(1),
    }
}

/// Opcodes (the MT25Q / S25FL-S single-I/O set).
pub mod op {
    /// Write enable.
    pub const WREN: u8 = 0x06;
    /// Read status register.
    pub const RDSR: u8 = 0x05;
    /// Read JEDEC ID.
    pub const RDID: u8 = 0x9F;
    /// Fast read, 4-byte address, 8 dummy clocks.
    pub const FAST_READ4: u8 = 0x0C;
    /// Page program, 4-byte address.
    pub const PP4: u8 = 0x12;
    /// 4 KiB erase, 4-byte address.
    pub const SSE4: u8 = 0x21;
    /// 64 KiB erase, 4-byte address.
    pub const SE4: u8 = 0xDC;
}

/// Status register: write in progress.
pub const SR_WIP: u8 = 0x01;
/// Status register: write enable latch.
pub const SR_WEL: u8 = 0x02;

/// A flash chip the programmer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipInfo {
    /// Part number.
    pub name: &'static str,
    /// JEDEC manufacturer, type, capacity.
    pub jedec_id: [u8; 3],
    /// Bytes.
    pub size: u64,
}

/// Chips with 4 KiB + 64 KiB erase, 256-byte pages and the 4-byte opcodes above.
pub const KNOWN_CHIPS: &[ChipInfo] = &[
    ChipInfo {
        name: "MT25QU512",
        jedec_id: [0x20, 0xBB, 0x20],
        size: 64 * MIB,
    },
    ChipInfo {
        name: "MT25QU01G",
        jedec_id: [0x20, 0xBB, 0x21],
        size: 128 * MIB,
    },
    ChipInfo {
        name: "MT25QU02G",
        jedec_id: [0x20, 0xBB, 0x22],
        size: 256 * MIB,
    },
    ChipInfo {
        name: "MT25QL512",
        jedec_id: [0x20, 0xBA, 0x20],
        size: 64 * MIB,
    },
    ChipInfo {
        name: "MT25QL01G",
        jedec_id: [0x20, 0xBA, 0x21],
        size: 128 * MIB,
    },
    ChipInfo {
        name: "MT25QL02G",
        jedec_id: [0x20, 0xBA, 0x22],
        size: 256 * MIB,
    },
];

/// Erase granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraseSize {
    /// 4 KiB subsector.
    Subsector,
    /// 64 KiB sector.
    Sector,
}

impl EraseSize {
    /// Bytes.
    pub fn bytes(self) -> u32 {
        match self {
            EraseSize::Subsector => 4096,
            EraseSize::Sector => 65536,
        }
    }
}

/// How long to wait for an operation: first wait (about the typical time), poll interval,
/// and the limit (several times the datasheet maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPlan {
    /// Wait before the first status read.
    pub first: Duration,
    /// Wait between status reads.
    pub poll: Duration,
    /// Give up after this much waiting.
    pub timeout: Duration,
}

/// Page program: typical 0.12 ms, datasheet maximum 1.8 ms.
pub const PROGRAM_WAIT: WaitPlan = WaitPlan {
    first: Duration::from_micros(100),
    poll: Duration::from_micros(20),
    timeout: Duration::from_millis(20),
};
/// 4 KiB erase: typical 50 ms, maximum 400 ms.
pub const SUBSECTOR_ERASE_WAIT: WaitPlan = WaitPlan {
    first: Duration::from_millis(40),
    poll: Duration::from_millis(5),
    timeout: Duration::from_secs(2),
};
/// 64 KiB erase: typical 150 ms, maximum 1 s.
pub const SECTOR_ERASE_WAIT: WaitPlan = WaitPlan {
    first: Duration::from_millis(120),
    poll: Duration::from_millis(10),
    timeout: Duration::from_secs(5),
};

/// Before the chip is identified: a program or erase left running by an earlier session (an
/// `nlbctl flash` killed mid-erase) must end first, since a busy chip ignores the ID command.
/// The longest operation the programmer starts is a 64 KiB erase (datasheet maximum 1 s), so
/// the limit is that of [`SECTOR_ERASE_WAIT`]; the poll is short, as the operation may be
/// nearly done.
pub const IDLE_WAIT: WaitPlan = WaitPlan {
    first: Duration::ZERO,
    poll: Duration::from_millis(1),
    timeout: SECTOR_ERASE_WAIT.timeout,
};

/// Register traffic counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpiStats {
    /// Register reads.
    pub reads: u64,
    /// Register writes.
    pub writes: u64,
    /// Time the host asked the device to wait.
    pub waited: Duration,
}

/// The flash behind the controller of one device.
#[derive(Debug)]
pub struct SpiFlash<'d, D: Device + ?Sized> {
    dev: &'d mut D,
    /// Last value written to `ctrl` (so unchanged writes are skipped).
    ctrl: spi_flash::Ctrl,
    stats: SpiStats,
}

impl<'d, D: Device + ?Sized> SpiFlash<'d, D> {
    /// Takes the controller: chip select off, divider [`DIVIDER`], one byte per access.
    pub fn new(dev: &'d mut D) -> Result<Self, FlashError> {
        let mut s = Self {
            dev,
            ctrl: spi_flash::Ctrl::default(),
            stats: SpiStats::default(),
        };
        s.write_ctrl(ctrl(false, 1))?;
        Ok(s)
    }

    /// Counters so far.
    pub fn stats(&self) -> SpiStats {
        self.stats
    }

    /// The device, for accesses outside the flash.
    pub fn device(&mut self) -> &mut D {
        self.dev
    }

    fn write_ctrl(&mut self, value: spi_flash::Ctrl) -> Result<(), FlashError> {
        // Widths are 1, 2 or 4 here: the fields always fit.
        let word = value.word().map_err(|e| {
            FlashError::Device(crate::device::DeviceError::Protocol(format!(
                "spi_flash.ctrl: {e}"
            )))
        })?;
        self.stats.writes += 1;
        self.dev.write32(spi_flash::CTRL, word)?;
        self.ctrl = value;
        Ok(())
    }

    /// Chip select on with `width` bytes per access.
    fn select(&mut self, width: u8) -> Result<(), FlashError> {
        let v = ctrl(true, width);
        if v != self.ctrl {
            self.write_ctrl(v)?;
        }
        Ok(())
    }

    fn deselect(&mut self) -> Result<(), FlashError> {
        // Keep the width: the next frame often starts with the same one.
        let v = spi_flash::Ctrl {
            cs: false,
            ..self.ctrl
        };
        self.write_ctrl(v)
    }

    fn tx(&mut self, word: u32) -> Result<(), FlashError> {
        self.stats.writes += 1;
        self.dev.write32(spi_flash::TXRX, word)?;
        Ok(())
    }

    fn rx(&mut self) -> Result<u32, FlashError> {
        self.stats.reads += 1;
        Ok(self.dev.read32(spi_flash::TXRX)?)
    }

    fn wait(&mut self, d: Duration) -> Result<(), FlashError> {
        self.stats.waited += d;
        self.dev.wait(d)?;
        Ok(())
    }

    /// Sends the opcode and a 4-byte address.
    fn command_with_addr(&mut self, opcode: u8, addr: u32) -> Result<(), FlashError> {
        self.select(1)?;
        self.tx(u32::from(opcode))?;
        self.select(4)?;
        self.tx(addr)
    }

    /// Reads the JEDEC ID.
    pub fn jedec_id(&mut self) -> Result<[u8; 3], FlashError> {
        self.select(4)?;
        // Four bytes per access, the first in bits 31..24.
        self.tx(u32::from_be_bytes([op::RDID, 0, 0, 0]))?;
        let v = self.rx()?;
        self.deselect()?;
        let [_, m, t, c] = v.to_be_bytes();
        Ok([m, t, c])
    }

    /// Identifies the chip, after waiting (bounded, [`IDLE_WAIT`]) for a program or erase
    /// still running to end.
    pub fn chip(&mut self) -> Result<ChipInfo, FlashError> {
        self.wait_idle()?;
        let id = self.jedec_id()?;
        KNOWN_CHIPS
            .iter()
            .find(|c| c.jedec_id == id)
            .copied()
            .ok_or(FlashError::UnknownChip { jedec_id: id })
    }

    /// Reads the status register.
    pub fn status(&mut self) -> Result<u8, FlashError> {
        self.select(2)?;
        // Two bytes per access: the opcode, then the first status byte.
        self.tx(u32::from_be_bytes([0, 0, op::RDSR, 0]))?;
        let v = self.rx()?;
        self.deselect()?;
        Ok(v as u8)
    }

    /// Waits until no program or erase runs. A status of all ones is no chip answering (MISO
    /// floats high), not a busy one: identification then reports the ID it reads.
    pub fn wait_idle(&mut self) -> Result<(), FlashError> {
        let plan = IDLE_WAIT;
        let mut waited = Duration::ZERO;
        loop {
            let status = self.status()?;
            if status & SR_WIP == 0 || status == 0xFF {
                return Ok(());
            }
            if waited >= plan.timeout {
                return Err(FlashError::ChipBusy {
                    after: waited,
                    status,
                });
            }
            self.wait(plan.poll)?;
            waited += plan.poll;
        }
    }

    fn write_enable(&mut self) -> Result<(), FlashError> {
        self.select(1)?;
        self.tx(u32::from(op::WREN))?;
        self.deselect()
    }

    /// Waits until WIP clears, reading the status continuously within one frame.
    fn wait_ready(
        &mut self,
        plan: WaitPlan,
        what: impl FnOnce() -> String,
    ) -> Result<(), FlashError> {
        let mut waited = plan.first;
        self.wait(plan.first)?;
        self.select(2)?;
        // Two bytes per access: the opcode, then the first status byte.
        self.tx(u32::from_be_bytes([0, 0, op::RDSR, 0]))?;
        loop {
            let status = self.rx()? as u8;
            if status & SR_WIP == 0 {
                return self.deselect();
            }
            if waited >= plan.timeout {
                self.deselect()?;
                return Err(FlashError::Timeout {
                    what: what(),
                    after: waited,
                });
            }
            self.wait(plan.poll)?;
            waited += plan.poll;
            // The status register is output again and again while chip select stays low.
            self.tx(0)?;
        }
    }

    /// Reads `out.len()` bytes from `addr`.
    pub fn read(&mut self, addr: u32, out: &mut [u8]) -> Result<(), FlashError> {
        self.command_with_addr(op::FAST_READ4, addr)?;
        self.select(1)?;
        self.tx(0xFF)?; // 8 dummy clocks
        self.select(4)?;
        let mut words = out.chunks_exact_mut(4);
        for w in &mut words {
            self.tx(0xFFFF_FFFF)?;
            w.copy_from_slice(&self.rx()?.to_be_bytes());
        }
        let rest = words.into_remainder();
        if !rest.is_empty() {
            self.select(1)?;
            for b in rest {
                self.tx(0xFF)?;
                *b = self.rx()? as u8;
            }
        }
        self.deselect()
    }

    /// Programs `data` (1..=256 bytes, not crossing a page boundary) at `addr` and waits.
    pub fn program_page(&mut self, addr: u32, data: &[u8]) -> Result<(), FlashError> {
        debug_assert!(!data.is_empty() && (addr as usize % 256) + data.len() <= 256);
        self.write_enable()?;
        self.command_with_addr(op::PP4, addr)?;
        let mut words = data.chunks_exact(4);
        for w in &mut words {
            self.tx(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))?;
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.select(1)?;
            for &b in rest {
                self.tx(u32::from(b))?;
            }
        }
        self.deselect()?;
        self.wait_ready(PROGRAM_WAIT, || format!("the page program at {addr:#010x}"))
    }

    /// Erases the subsector or sector holding `addr` and waits.
    pub fn erase(&mut self, addr: u32, size: EraseSize) -> Result<(), FlashError> {
        self.write_enable()?;
        let (opcode, plan) = match size {
            EraseSize::Subsector => (op::SSE4, SUBSECTOR_ERASE_WAIT),
            EraseSize::Sector => (op::SE4, SECTOR_ERASE_WAIT),
        };
        self.command_with_addr(opcode, addr)?;
        self.deselect()?;
        self.wait_ready(plan, || {
            format!("the {} KiB erase at {addr:#010x}", size.bytes() / 1024)
        })
    }
}
