//! A serial NOR flash chip with the Micron MT25Q command set (the same single-I/O opcodes as
//! Spansion S25FL-S for everything used here), byte by byte as it sees the SPI bus.
//!
//! Modelled: JEDEC ID; status register (WIP, WEL) and flag status register; write enable
//! latch, cleared by WRDI, by a completed program/erase and by reset; program and erase only
//! start when WEL is set and the command ended on the right byte; 256-byte page program that
//! only clears bits, wraps inside the page and keeps the last 256 bytes when more are sent;
//! 4 KiB subsector and 64 KiB sector erase; durations in simulated time with jitter; commands
//! other than the status reads ignored while busy; 3-byte addressing (with the extended
//! address register) and 4-byte addressing (the mode and the dedicated 4-byte opcodes);
//! power loss during a program or erase leaving the partial state a real cell array shows.

use std::time::Duration;

use super::rng::SplitMix64;

/// A chip part number with its identity and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipKind {
    /// Part number.
    pub name: &'static str,
    /// JEDEC manufacturer, memory type and capacity bytes.
    pub jedec_id: [u8; 3],
    /// Bytes.
    pub size: u64,
}

/// Micron MT25QU512ABB: 64 MiB, 1.8 V.
pub const MT25QU512: ChipKind = ChipKind {
    name: "MT25QU512",
    jedec_id: [0x20, 0xBB, 0x20],
    size: 64 << 20,
};
/// Micron MT25QU01GBBB: 128 MiB, 1.8 V (the configuration flash of many UltraScale+ cards).
pub const MT25QU01G: ChipKind = ChipKind {
    name: "MT25QU01G",
    jedec_id: [0x20, 0xBB, 0x21],
    size: 128 << 20,
};
/// Micron MT25QU02GCBB: 256 MiB, 1.8 V.
pub const MT25QU02G: ChipKind = ChipKind {
    name: "MT25QU02G",
    jedec_id: [0x20, 0xBB, 0x22],
    size: 256 << 20,
};

/// Every chip the model knows.
pub const KNOWN_CHIPS: &[ChipKind] = &[MT25QU512, MT25QU01G, MT25QU02G];

/// Typical operation times (MT25Q datasheet, tPP / tSSE / tSE typical) and their spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipTiming {
    /// Page program.
    pub page_program: Duration,
    /// 4 KiB subsector erase.
    pub subsector_erase: Duration,
    /// 64 KiB sector erase.
    pub sector_erase: Duration,
    /// Each operation lasts typical ± this many percent (uniform).
    pub jitter_percent: u32,
}

impl Default for ChipTiming {
    fn default() -> Self {
        Self {
            page_program: Duration::from_micros(120),
            subsector_erase: Duration::from_millis(50),
            sector_erase: Duration::from_millis(150),
            jitter_percent: 25,
        }
    }
}

/// Opcodes understood by the model.
pub mod op {
    /// Write enable.
    pub const WREN: u8 = 0x06;
    /// Write disable.
    pub const WRDI: u8 = 0x04;
    /// Read status register.
    pub const RDSR: u8 = 0x05;
    /// Read flag status register.
    pub const RDFSR: u8 = 0x70;
    /// Clear flag status register.
    pub const CLFSR: u8 = 0x50;
    /// Read JEDEC ID.
    pub const RDID: u8 = 0x9F;
    /// Read JEDEC ID (multiple I/O alias).
    pub const RDID_ALT: u8 = 0x9E;
    /// Read (3 or 4 address bytes, by mode).
    pub const READ: u8 = 0x03;
    /// Fast read (address by mode, 8 dummy clocks).
    pub const FAST_READ: u8 = 0x0B;
    /// Read with 4-byte address.
    pub const READ4: u8 = 0x13;
    /// Fast read with 4-byte address.
    pub const FAST_READ4: u8 = 0x0C;
    /// Page program (address by mode).
    pub const PP: u8 = 0x02;
    /// Page program with 4-byte address.
    pub const PP4: u8 = 0x12;
    /// 4 KiB subsector erase (address by mode).
    pub const SSE: u8 = 0x20;
    /// 4 KiB subsector erase with 4-byte address.
    pub const SSE4: u8 = 0x21;
    /// 64 KiB sector erase (address by mode).
    pub const SE: u8 = 0xD8;
    /// 64 KiB sector erase with 4-byte address.
    pub const SE4: u8 = 0xDC;
    /// Enter 4-byte address mode.
    pub const EN4B: u8 = 0xB7;
    /// Exit 4-byte address mode.
    pub const EX4B: u8 = 0xE9;
    /// Write extended address register.
    pub const WREAR: u8 = 0xC5;
    /// Read extended address register.
    pub const RDEAR: u8 = 0xC8;
    /// Reset enable.
    pub const RSTEN: u8 = 0x66;
    /// Reset memory.
    pub const RST: u8 = 0x99;
}

/// Status register: write in progress.
pub const SR_WIP: u8 = 0x01;
/// Status register: write enable latch.
pub const SR_WEL: u8 = 0x02;
/// Flag status: ready (not busy).
pub const FSR_READY: u8 = 0x80;
/// Flag status: 4-byte address mode.
pub const FSR_ADDR4: u8 = 0x01;

const SUBSECTOR: usize = 4096;
const PAGE: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Id,
    Status,
    FlagStatus,
    ReadEar,
    Read,
    Program,
    Erase(u32),
    WriteEar,
    Simple,
    Unknown,
}

/// Decoding state of the command in the current chip-select frame.
#[derive(Debug, Clone)]
struct Frame {
    opcode: Option<u8>,
    kind: Kind,
    ignored: bool,
    addr: u32,
    addr_got: u8,
    addr_need: u8,
    dummy_need: u8,
    data_count: u32,
    page: [u8; PAGE],
    latched: [bool; PAGE],
}

impl Frame {
    fn new() -> Self {
        Self {
            opcode: None,
            kind: Kind::Unknown,
            ignored: false,
            addr: 0,
            addr_got: 0,
            addr_need: 0,
            dummy_need: 0,
            data_count: 0,
            page: [0xFF; PAGE],
            latched: [false; PAGE],
        }
    }

    fn in_data_phase(&self) -> bool {
        self.opcode.is_some() && self.addr_got == self.addr_need && self.dummy_need == 0
    }
}

#[derive(Debug, Clone)]
enum Operation {
    Program {
        page_base: u32,
        data: Box<[u8; PAGE]>,
        latched: Box<[bool; PAGE]>,
    },
    Erase {
        base: u32,
        len: u32,
    },
}

#[derive(Debug, Clone)]
struct Busy {
    op: Operation,
    start_ns: u64,
    end_ns: u64,
}

/// A fault to inject: programs touching `addr..addr+len` leave some bits unprogrammed for the
/// next `times` program operations there (a worn or marginal sector).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramFault {
    /// First byte affected.
    pub addr: u32,
    /// Bytes affected.
    pub len: u32,
    /// How many more program operations fail.
    pub times: u32,
}

/// The chip.
#[derive(Debug, Clone)]
pub struct SpiNor {
    kind: ChipKind,
    timing: ChipTiming,
    /// 4 KiB subsectors; `None` = erased (all ones), so an idle 256 MiB part costs nothing.
    cells: Vec<Option<Box<[u8; SUBSECTOR]>>>,
    now_ns: u64,
    cs: bool,
    wel: bool,
    addr4: bool,
    ear: u8,
    reset_enabled: bool,
    busy: Option<Busy>,
    frame: Frame,
    rng: SplitMix64,
    faults: Vec<ProgramFault>,
    completed_ops: u64,
}

impl SpiNor {
    /// An erased chip; `seed` drives jitter and partial states.
    pub fn new(kind: ChipKind, timing: ChipTiming, seed: u64) -> Self {
        let subsectors = (kind.size / SUBSECTOR as u64) as usize;
        Self {
            kind,
            timing,
            cells: vec![None; subsectors],
            now_ns: 0,
            cs: false,
            wel: false,
            addr4: false,
            ear: 0,
            reset_enabled: false,
            busy: None,
            frame: Frame::new(),
            rng: SplitMix64::new(seed),
            faults: Vec::new(),
            completed_ops: 0,
        }
    }

    /// The part.
    pub fn kind(&self) -> ChipKind {
        self.kind
    }

    /// The chip's clock, nanoseconds since it was created.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Moves the chip's clock to `t_ns` (never backwards) and completes what finished.
    pub fn advance_to(&mut self, t_ns: u64) {
        if t_ns > self.now_ns {
            self.now_ns = t_ns;
        }
        self.settle();
    }

    /// True while a program or erase runs.
    pub fn busy(&mut self) -> bool {
        self.settle();
        self.busy.is_some()
    }

    /// Program and erase operations completed so far.
    pub fn completed_ops(&self) -> u64 {
        self.completed_ops
    }

    /// Adds a program fault.
    pub fn inject_program_fault(&mut self, fault: ProgramFault) {
        self.faults.push(fault);
    }

    /// Chip select falls: a new command frame begins.
    pub fn select(&mut self) {
        self.settle();
        if !self.cs {
            self.cs = true;
            self.frame = Frame::new();
        }
    }

    /// Chip select rises: the command in the frame executes if it is complete.
    pub fn deselect(&mut self) {
        self.settle();
        if !self.cs {
            return;
        }
        self.cs = false;
        let frame = std::mem::replace(&mut self.frame, Frame::new());
        self.execute(frame);
    }

    /// Exchanges one byte: returns what the chip drives on MISO while `mosi` shifts in.
    pub fn transfer(&mut self, mosi: u8) -> u8 {
        let out = self.output_byte();
        self.input_byte(mosi);
        out
    }

    /// What the chip drives on MISO during the next byte (depends only on earlier bytes).
    pub fn output_byte(&mut self) -> u8 {
        self.settle();
        if !self.cs || self.frame.ignored {
            return 0xFF;
        }
        let f = &self.frame;
        let Some(_) = f.opcode else { return 0xFF };
        match f.kind {
            Kind::Id => {
                let [m, t, c] = self.kind.jedec_id;
                // Manufacturer, type, capacity, EDID length, extended ID, config, unique ID.
                let id = [m, t, c, 0x10, 0x40, 0x00];
                id.get(f.data_count as usize).copied().unwrap_or(0)
            }
            Kind::Status => self.status(),
            Kind::FlagStatus => self.flag_status(),
            Kind::ReadEar => self.ear,
            Kind::Read if f.in_data_phase() => self.read_byte(f.addr),
            _ => 0xFF,
        }
    }

    /// Takes in the byte on MOSI.
    pub fn input_byte(&mut self, mosi: u8) {
        self.settle();
        if !self.cs {
            return;
        }
        if self.frame.opcode.is_none() {
            self.start_command(mosi);
            return;
        }
        let size_mask = (self.kind.size - 1) as u32;
        let f = &mut self.frame;
        if f.ignored {
            return;
        }
        if f.addr_got < f.addr_need {
            f.addr = (f.addr << 8) | u32::from(mosi);
            f.addr_got += 1;
            if f.addr_got == f.addr_need && f.addr_need == 3 {
                f.addr |= u32::from(self.ear) << 24;
            }
            f.addr &= size_mask;
            return;
        }
        if f.dummy_need > 0 {
            f.dummy_need -= 1;
            return;
        }
        match f.kind {
            Kind::Read => f.addr = (f.addr + 1) & size_mask,
            Kind::Program => {
                // Bytes wrap inside the page; with more than 256 the last 256 win.
                let i = (f.addr as usize + f.data_count as usize) % PAGE;
                f.page[i] = mosi;
                f.latched[i] = true;
            }
            Kind::WriteEar if f.data_count == 0 => f.page[0] = mosi,
            _ => {}
        }
        f.data_count = f.data_count.saturating_add(1);
    }

    fn start_command(&mut self, opcode: u8) {
        let busy = self.busy.is_some();
        let addr_by_mode = if self.addr4 { 4 } else { 3 };
        let f = &mut self.frame;
        f.opcode = Some(opcode);
        let (kind, addr_need, dummy) = match opcode {
            op::RDID | op::RDID_ALT => (Kind::Id, 0, 0),
            op::RDSR => (Kind::Status, 0, 0),
            op::RDFSR => (Kind::FlagStatus, 0, 0),
            op::RDEAR => (Kind::ReadEar, 0, 0),
            op::READ => (Kind::Read, addr_by_mode, 0),
            op::FAST_READ => (Kind::Read, addr_by_mode, 1),
            op::READ4 => (Kind::Read, 4, 0),
            op::FAST_READ4 => (Kind::Read, 4, 1),
            op::PP => (Kind::Program, addr_by_mode, 0),
            op::PP4 => (Kind::Program, 4, 0),
            op::SSE => (Kind::Erase(SUBSECTOR as u32), addr_by_mode, 0),
            op::SSE4 => (Kind::Erase(SUBSECTOR as u32), 4, 0),
            op::SE => (Kind::Erase(65536), addr_by_mode, 0),
            op::SE4 => (Kind::Erase(65536), 4, 0),
            op::WREAR => (Kind::WriteEar, 0, 0),
            op::WREN | op::WRDI | op::EN4B | op::EX4B | op::RSTEN | op::RST | op::CLFSR => {
                (Kind::Simple, 0, 0)
            }
            _ => (Kind::Unknown, 0, 0),
        };
        f.kind = kind;
        f.addr_need = addr_need;
        f.dummy_need = dummy;
        // While a program or erase runs only the status reads are heard.
        f.ignored = busy && !matches!(kind, Kind::Status | Kind::FlagStatus);
    }

    fn execute(&mut self, f: Frame) {
        let Some(opcode) = f.opcode else { return };
        let reset_was_enabled = std::mem::take(&mut self.reset_enabled);
        if f.ignored || f.kind == Kind::Unknown {
            return;
        }
        // Commands without data must end right after their last address byte.
        let exact = f.addr_got == f.addr_need && f.data_count == 0;
        match f.kind {
            Kind::Simple if exact => match opcode {
                op::WREN => self.wel = true,
                op::WRDI => self.wel = false,
                op::EN4B => self.addr4 = true,
                op::EX4B => self.addr4 = false,
                op::RSTEN => self.reset_enabled = true,
                op::RST if reset_was_enabled => self.software_reset(),
                _ => {} // CLFSR: the model raises no error flags
            },
            Kind::WriteEar if self.wel && f.data_count == 1 => {
                self.ear = f.page[0];
                self.wel = false;
            }
            Kind::Program if self.wel && f.in_data_phase() && f.data_count > 0 => {
                let page_base = f.addr & !(PAGE as u32 - 1);
                let d = self.jittered(self.timing.page_program);
                self.start(
                    Operation::Program {
                        page_base,
                        data: Box::new(f.page),
                        latched: Box::new(f.latched),
                    },
                    d,
                );
            }
            Kind::Erase(len) if self.wel && exact => {
                let base = f.addr & !(len - 1);
                let typ = if len == SUBSECTOR as u32 {
                    self.timing.subsector_erase
                } else {
                    self.timing.sector_erase
                };
                let d = self.jittered(typ);
                self.start(Operation::Erase { base, len }, d);
            }
            _ => {}
        }
    }

    fn software_reset(&mut self) {
        self.wel = false;
        self.addr4 = false;
        self.ear = 0;
    }

    fn jittered(&mut self, typ: Duration) -> u64 {
        let typ_ns = typ.as_nanos() as u64;
        let spread = typ_ns / 100 * u64::from(self.timing.jitter_percent);
        if spread == 0 {
            return typ_ns.max(1);
        }
        (typ_ns - spread + self.rng.below(2 * spread + 1)).max(1)
    }

    fn start(&mut self, op: Operation, duration_ns: u64) {
        self.busy = Some(Busy {
            op,
            start_ns: self.now_ns,
            end_ns: self.now_ns + duration_ns,
        });
    }

    fn settle(&mut self) {
        let done = matches!(&self.busy, Some(b) if self.now_ns >= b.end_ns);
        if done {
            if let Some(b) = self.busy.take() {
                self.apply(&b.op, None);
                self.wel = false;
                self.completed_ops += 1;
            }
        }
    }

    /// Applies an operation's effect on the cells: whole (`progress` = None) or cut short at
    /// `progress` (0..=255 of 256).
    fn apply(&mut self, op: &Operation, progress: Option<u32>) {
        match op {
            Operation::Program {
                page_base,
                data,
                latched,
            } => {
                let weak = self.take_fault(*page_base);
                for i in 0..PAGE {
                    if !latched[i] {
                        continue;
                    }
                    let addr = *page_base + i as u32;
                    let old = self.read_byte(addr);
                    let to_clear = old & !data[i];
                    // A cut-short program has cleared a random part of the bits it was
                    // clearing; a weak cell misses about half of them.
                    let cleared = match (progress, weak) {
                        (Some(p), _) => to_clear & self.rng.bits_with_probability(p),
                        (None, true) => to_clear & self.rng.bits_with_probability(128),
                        (None, false) => to_clear,
                    };
                    if cleared != 0 {
                        self.cell_mut(addr)[addr as usize % SUBSECTOR] = old & !cleared;
                    }
                }
            }
            Operation::Erase { base, len } => match progress {
                None => {
                    for s in 0..*len as usize / SUBSECTOR {
                        self.cells[*base as usize / SUBSECTOR + s] = None;
                    }
                }
                Some(p) => {
                    // MT25Q erase first programs every cell to 0, then pulses them back to 1:
                    // early on bytes drift to 0, later bits come back as 1.
                    for addr in *base..*base + *len {
                        let old = self.read_byte(addr);
                        let new = if p < 77 {
                            old & !self.rng.bits_with_probability(p * 256 / 77)
                        } else {
                            self.rng.bits_with_probability((p - 77) * 256 / 179)
                        };
                        if new != old {
                            self.cell_mut(addr)[addr as usize % SUBSECTOR] = new;
                        }
                    }
                }
            },
        }
    }

    fn take_fault(&mut self, page_base: u32) -> bool {
        for f in &mut self.faults {
            let hit = page_base < f.addr.saturating_add(f.len) && f.addr < page_base + PAGE as u32;
            if hit && f.times > 0 {
                f.times -= 1;
                return true;
            }
        }
        false
    }

    /// Power is lost: a running program or erase stops where it is, volatile state clears.
    pub fn power_loss(&mut self) {
        self.settle();
        if let Some(b) = self.busy.take() {
            let total = (b.end_ns - b.start_ns).max(1);
            let done = self.now_ns.saturating_sub(b.start_ns).min(total);
            let progress = (u128::from(done) * 256 / u128::from(total)) as u32;
            self.apply(&b.op, Some(progress.min(255)));
        }
        self.cs = false;
        self.frame = Frame::new();
        self.reset_enabled = false;
        self.software_reset();
    }

    fn status(&self) -> u8 {
        let mut s = 0;
        if self.busy.is_some() {
            s |= SR_WIP;
        }
        if self.wel {
            s |= SR_WEL;
        }
        s
    }

    fn flag_status(&self) -> u8 {
        let mut s = 0;
        if self.busy.is_none() {
            s |= FSR_READY;
        }
        if self.addr4 {
            s |= FSR_ADDR4;
        }
        s
    }

    fn cell_mut(&mut self, addr: u32) -> &mut [u8; SUBSECTOR] {
        self.cells[addr as usize / SUBSECTOR].get_or_insert_with(|| Box::new([0xFF; SUBSECTOR]))
    }

    /// The byte stored at `addr` (modulo the size), without the SPI bus (a test probe).
    pub fn read_byte(&self, addr: u32) -> u8 {
        let a = (u64::from(addr) % self.kind.size) as usize;
        match &self.cells[a / SUBSECTOR] {
            Some(c) => c[a % SUBSECTOR],
            None => 0xFF,
        }
    }

    /// Reads `out.len()` bytes at `addr` without the SPI bus.
    pub fn read_direct(&self, addr: u32, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = self.read_byte(addr.wrapping_add(i as u32));
        }
    }

    /// Stores `data` at `addr` exactly, without the SPI bus (a factory programmer).
    pub fn load_direct(&mut self, addr: u32, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let a = ((u64::from(addr) + i as u64) % self.kind.size) as u32;
            if b != 0xFF || self.cells[a as usize / SUBSECTOR].is_some() {
                self.cell_mut(a)[a as usize % SUBSECTOR] = b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chip() -> SpiNor {
        let timing = ChipTiming {
            jitter_percent: 0,
            ..ChipTiming::default()
        };
        SpiNor::new(MT25QU01G, timing, 7)
    }

    fn cmd(c: &mut SpiNor, bytes: &[u8]) -> Vec<u8> {
        c.select();
        let out = bytes.iter().map(|&b| c.transfer(b)).collect();
        c.deselect();
        out
    }

    fn wait_ms(c: &mut SpiNor, ms: u64) {
        let t = c.now_ns() + ms * 1_000_000;
        c.advance_to(t);
    }

    fn program4(c: &mut SpiNor, addr: u32, data: &[u8]) {
        cmd(c, &[op::WREN]);
        let mut b = vec![op::PP4];
        b.extend(addr.to_be_bytes());
        b.extend(data);
        cmd(c, &b);
    }

    fn read4(c: &mut SpiNor, addr: u32, n: usize) -> Vec<u8> {
        let mut b = vec![op::READ4];
        b.extend(addr.to_be_bytes());
        b.resize(5 + n, 0);
        cmd(c, &b)[5..].to_vec()
    }

    #[test]
    fn jedec_id_of_the_datasheet() {
        let mut c = chip();
        assert_eq!(
            cmd(&mut c, &[op::RDID, 0, 0, 0]),
            vec![0xFF, 0x20, 0xBB, 0x21]
        );
    }

    #[test]
    fn program_needs_wel_and_only_clears_bits() {
        let mut c = chip();
        cmd(&mut c, &[op::PP4, 0, 0, 0x10, 0, 0x00]);
        wait_ms(&mut c, 1);
        assert_eq!(c.read_byte(0x1000), 0xFF, "no WREN: ignored");
        program4(&mut c, 0x1000, &[0xF0]);
        assert_eq!(cmd(&mut c, &[op::RDSR, 0])[1], SR_WIP | SR_WEL);
        wait_ms(&mut c, 1);
        assert_eq!(
            cmd(&mut c, &[op::RDSR, 0])[1],
            0,
            "WIP and WEL clear when done"
        );
        program4(&mut c, 0x1000, &[0x3C]);
        wait_ms(&mut c, 1);
        assert_eq!(c.read_byte(0x1000), 0x30, "0xF0 & 0x3C");
    }

    #[test]
    fn program_wraps_inside_the_page_and_keeps_the_last_256() {
        let mut c = chip();
        program4(&mut c, 0x20FE, &[1, 2, 3, 4]);
        wait_ms(&mut c, 1);
        assert_eq!(read4(&mut c, 0x2000, 2), vec![3, 4]);
        assert_eq!(
            read4(&mut c, 0x20FE, 3),
            vec![1, 2, 0xFF],
            "0x2100 untouched"
        );
        let data: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
        program4(&mut c, 0x3000, &data);
        wait_ms(&mut c, 1);
        // Bytes 256..300 overwrote latch slots 0..44: byte i of the page is data[i+256].
        assert_eq!(c.read_byte(0x3000), data[256]);
        assert_eq!(c.read_byte(0x3000 + 43), data[299]);
        assert_eq!(c.read_byte(0x3000 + 44), data[44]);
    }

    #[test]
    fn erase_sizes_and_durations() {
        let mut c = chip();
        program4(&mut c, 0x0101_0000, &[0]);
        wait_ms(&mut c, 1);
        program4(&mut c, 0x0101_F000, &[0]);
        wait_ms(&mut c, 1);
        cmd(&mut c, &[op::WREN]);
        cmd(&mut c, &[op::SSE4, 0x01, 0x01, 0xF0, 0x33]);
        wait_ms(&mut c, 49);
        assert!(c.busy(), "4 KiB erase takes 50 ms");
        assert_eq!(
            read4(&mut c, 0x0101_F000, 1),
            vec![0xFF],
            "reads ignored while busy"
        );
        wait_ms(&mut c, 2);
        assert!(!c.busy());
        assert_eq!(c.read_byte(0x0101_F000), 0xFF);
        assert_eq!(c.read_byte(0x0101_0000), 0x00, "other subsector kept");
        cmd(&mut c, &[op::WREN]);
        cmd(&mut c, &[op::SE4, 0x01, 0x01, 0x80, 0x00]);
        wait_ms(&mut c, 151);
        assert_eq!(c.read_byte(0x0101_0000), 0xFF);
        // An erase with a trailing byte is not executed.
        program4(&mut c, 0x5000, &[0]);
        wait_ms(&mut c, 1);
        cmd(&mut c, &[op::WREN]);
        cmd(&mut c, &[op::SSE4, 0, 0, 0x50, 0, 0]);
        wait_ms(&mut c, 60);
        assert_eq!(c.read_byte(0x5000), 0);
    }

    #[test]
    fn three_byte_addressing_reaches_only_16_mib_without_the_extended_register() {
        let mut c = chip();
        program4(&mut c, 0x0100_0000, &[0x5A]);
        wait_ms(&mut c, 1);
        program4(&mut c, 0x0000_0000, &[0xA5]);
        wait_ms(&mut c, 1);
        assert_eq!(cmd(&mut c, &[op::READ, 0, 0, 0, 0])[4], 0xA5);
        cmd(&mut c, &[op::WREN]);
        cmd(&mut c, &[op::WREAR, 0x01]);
        assert_eq!(cmd(&mut c, &[op::READ, 0, 0, 0, 0])[4], 0x5A);
        cmd(&mut c, &[op::EN4B]);
        assert_eq!(cmd(&mut c, &[op::RDFSR, 0])[1], FSR_READY | FSR_ADDR4);
        assert_eq!(cmd(&mut c, &[op::READ, 0x01, 0, 0, 0, 0])[5], 0x5A);
        assert_eq!(cmd(&mut c, &[op::FAST_READ4, 0, 0, 0, 0, 0xFF, 0])[6], 0xA5);
    }

    #[test]
    fn power_loss_mid_program_leaves_a_subset_of_the_bits() {
        let mut c = chip();
        let data = [0u8; 256];
        program4(&mut c, 0x4000, &data);
        wait_ms(&mut c, 0); // no time: nothing done yet
        let t = c.now_ns() + 60_000; // half of 120 us
        c.advance_to(t);
        c.power_loss();
        let mut got = [0u8; 256];
        c.read_direct(0x4000, &mut got);
        let zeros: u32 = got.iter().map(|b| b.count_zeros()).sum();
        assert!(
            zeros > 256 && zeros < 256 * 7,
            "about half the bits: {zeros}"
        );
        assert!(!c.busy());
        assert_eq!(cmd(&mut c, &[op::RDSR, 0])[1], 0, "WEL lost with power");
    }

    #[test]
    fn power_loss_mid_erase_leaves_neither_old_nor_erased() {
        let mut c = chip();
        for p in 0..16u32 {
            program4(&mut c, 0x8000 + p * 256, &[0x55; 256]);
            wait_ms(&mut c, 1);
        }
        cmd(&mut c, &[op::WREN]);
        cmd(&mut c, &[op::SSE4, 0, 0, 0x80, 0]);
        wait_ms(&mut c, 40);
        c.power_loss();
        let mut got = vec![0u8; 4096];
        c.read_direct(0x8000, &mut got);
        assert!(got.iter().any(|&b| b != 0x55) && got.iter().any(|&b| b != 0xFF));
    }
}
