//! The NIC's host DMA engine (the `dma` register block and the host rings of docs/pipeline.md
//! §15, SPEC R12.2): what the RTL block `nlb_host_dma` does, one record at a time.
//!
//! Host memory is reached through a [`DmaPort`] (host memory as the device sees it, by IOVA,
//! through the IOMMU). The engine moves punted frames and events into the to-host rings, and
//! hands the device the descriptors of the to-device rings (injected frames, commands); the
//! device runs them ([`crate::ModelDevice`]) and reports them done. Indices, drop and error
//! counts are written back to host memory ([`HostDma::flush`]); interrupts are moderated by
//! count and time per ring.
//!
//! Everything here is per record and atomic: a record is either completed whole (slot
//! filled, index moved) or not at all (dropped and counted). The engine never writes outside
//! a slot the host gave it, or beyond the buffer a punt slot names; its index never passes
//! the host's.

use nlb_hw::blocks::dma as b;
use nlb_hw::enums::{DmaError, Ring};
use nlb_hw::layouts::{
    CmdDesc, EventRecord, InjectDesc, InjectHeader, PuntCpl, PuntDesc, PuntHeader,
};
use nlb_hw::rings::{self, RingDef, Wb};
use std::any::Any;
use std::fmt;
use std::time::Duration;

/// A DMA transfer the IOMMU (or the bus) refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("DMA of {len} bytes at IOVA {iova:#x} refused: not mapped for the device")]
pub struct DmaFault {
    /// First address.
    pub iova: u64,
    /// Bytes.
    pub len: usize,
}

/// Host memory as the NIC's DMA engine sees it: by IOVA, through the IOMMU. The driver
/// provides it (the memory it allocated and mapped for the device), and counts what crosses
/// the link on its PCIe cost model.
pub trait DmaPort: Send + fmt::Debug {
    /// A DMA read (the device reads host memory).
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), DmaFault>;
    /// A DMA write (the device writes host memory; posted).
    fn write(&mut self, iova: u64, data: &[u8]) -> Result<(), DmaFault>;
    /// An MSI-X message on `vector`.
    fn interrupt(&mut self, vector: u16);
    /// For the provider to find its own port again.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Bytes of a DMA line: punt buffers and injected frames start on one, and the NIC reads
/// and writes host memory in whole lines.
const LINE: u64 = 64;

/// Slots in a ring of `log2`.
fn slots(log2: u8) -> u16 {
    1u16 << log2.min(rings::MAX_LOG2 as u8)
}

/// One ring's state.
#[derive(Debug, Clone, Copy, Default)]
struct RingState {
    base: u64,
    log2: u8,
    enable: bool,
    /// The host's index (doorbell).
    host: u16,
    /// The device's index.
    dev: u16,
    drops: u32,
    errors: u32,
    error_slot: u16,
    error_code: DmaError,
    /// `<ring>_irq` as written.
    irq: u32,
    /// Completions not yet signalled by an interrupt.
    pending: u32,
    /// Simulated time of the first of them.
    pending_since: u64,
    /// The write-back record is stale.
    dirty: bool,
}

impl RingState {
    /// Slots the device may still use (to-host) or descriptors waiting (to-device).
    fn available(&self) -> u16 {
        self.host.wrapping_sub(self.dev)
    }

    fn slot_addr(&self, def: &RingDef, index: u16) -> u64 {
        let slot = u64::from(index & (slots(self.log2) - 1));
        self.base.wrapping_add(slot * u64::from(def.entry_bytes))
    }

    fn usable(&self) -> bool {
        self.enable && self.base != 0
    }
}

/// A frame of the inject ring, fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectWork {
    /// Its header (backend, pool, length).
    pub header: InjectHeader,
    /// The frame.
    pub frame: Vec<u8>,
}

/// What a DMA access to the engine's registers asks of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegEffect {
    /// Nothing more.
    None,
    /// The host rang a to-device ring's doorbell: run it.
    Doorbell(Ring),
}

/// The engine: the `dma` block's registers and the rings behind them.
#[derive(Debug)]
pub struct HostDma {
    enable: bool,
    hw_learn: bool,
    /// Rings the engine carries (caps.rings): all four, the first three (punt, event and
    /// inject) as `nlb_host_dma` does, or the two toward the host (punt and event); the
    /// registers of the others read 0 and ignore writes.
    carried: u8,
    host_time: u32,
    wb: u64,
    faults: u32,
    rings: [RingState; 4],
    port: Option<Box<dyn DmaPort>>,
    /// Simulated time, nanoseconds (interrupt timers).
    now: u64,
}

impl Default for HostDma {
    fn default() -> HostDma {
        HostDma::new()
    }
}

impl HostDma {
    /// An engine after reset (everything off). Every profile's pipeline can learn
    /// (caps.hw_learn, docs/pipeline.md section 15.3).
    pub fn new() -> HostDma {
        HostDma {
            enable: false,
            hw_learn: false,
            carried: rings::ALL.len() as u8,
            host_time: 0,
            wb: 0,
            faults: 0,
            rings: [RingState::default(); 4],
            port: None,
            now: 0,
        }
    }

    /// Resets the registers and rings (reconfiguration), keeping the host memory port.
    pub fn reset(&mut self) {
        let port = self.port.take();
        let carried = self.carried;
        *self = HostDma::new();
        self.carried = carried;
        self.port = port;
    }

    /// Carries only the first `n` rings (`n` is 2: punt and event; 3: and inject, as the
    /// RTL's engine; or 4): `caps.rings` reads `n`, the other rings' registers read 0 and
    /// ignore writes. Resets the rings.
    pub fn set_rings_carried(&mut self, n: u8) {
        self.carried = n.clamp(2, rings::ALL.len() as u8);
        self.reset();
    }

    /// Rings carried (`caps.rings`).
    pub fn rings_carried(&self) -> u8 {
        self.carried
    }

    /// The ring whose register is at `offset`, when this engine carries it.
    fn carried_ring_of(&self, offset: u32) -> Option<RingDef> {
        ring_of(offset).filter(|d| (d.ring as u8) < self.carried)
    }

    /// Connects host memory (replacing any earlier port).
    pub fn set_port(&mut self, port: Option<Box<dyn DmaPort>>) {
        self.port = port;
    }

    /// The host memory port.
    pub fn port_mut(&mut self) -> Option<&mut (dyn DmaPort + 'static)> {
        self.port.as_deref_mut()
    }

    /// Hardware learning is on (`dma.ctrl.hw_learn`).
    pub fn hw_learn(&self) -> bool {
        self.hw_learn
    }

    /// `dma.host_time`: the timestamp of learned connections.
    pub fn host_time(&self) -> u32 {
        self.host_time
    }

    /// Whether records for to-host ring `ring` go to the ring (engine and ring enabled).
    pub fn takes(&self, ring: Ring) -> bool {
        self.enable && self.rings[ring as usize].usable()
    }

    /// The register at `offset` (absolute) of the `dma` block.
    pub fn read_reg(&self, offset: u32) -> u32 {
        let caps = b::Caps {
            rings: self.carried,
            hw_learn: true,
            max_log2: rings::MAX_LOG2 as u8,
        };
        match offset {
            b::CAPS => caps.word().unwrap_or(0),
            b::CTRL => b::Ctrl {
                enable: self.enable,
                hw_learn: self.hw_learn,
            }
            .word(),
            b::HOST_TIME => self.host_time,
            b::WB_LO => (self.wb as u32) & b::wb_lo::DEFINED,
            b::WB_HI => (self.wb >> 32) as u32,
            b::FAULTS => self.faults,
            o => {
                let Some(def) = self.carried_ring_of(offset) else {
                    return 0;
                };
                let s = &self.rings[def.ring as usize];
                match o {
                    _ if o == def.base_lo => (s.base as u32) & b::punt_base_lo::DEFINED,
                    _ if o == def.base_hi => (s.base >> 32) as u32,
                    _ if o == def.size => b::PuntSize {
                        log2: s.log2,
                        enable: s.enable,
                    }
                    .word()
                    .unwrap_or(0),
                    _ if o == def.host => u32::from(s.host),
                    _ if o == def.dev => u32::from(s.dev),
                    _ if o == def.drops => s.drops,
                    _ if o == def.irq => s.irq,
                    _ => 0,
                }
            }
        }
    }

    /// Writes the register at `offset` (absolute) of the `dma` block.
    pub fn write_reg(&mut self, offset: u32, v: u32) -> RegEffect {
        match offset {
            b::CTRL => {
                let c = b::Ctrl::from_word(v);
                self.enable = c.enable;
                self.hw_learn = c.hw_learn;
            }
            b::HOST_TIME => self.host_time = v,
            b::WB_LO => self.wb = (self.wb & !0xFFFF_FFFF) | u64::from(v & b::wb_lo::DEFINED),
            b::WB_HI => self.wb = (self.wb & 0xFFFF_FFFF) | (u64::from(v) << 32),
            o => {
                let Some(def) = self.carried_ring_of(offset) else {
                    return RegEffect::None;
                };
                let s = &mut self.rings[def.ring as usize];
                match o {
                    _ if o == def.base_lo => {
                        s.base = (s.base & !0xFFFF_FFFF) | u64::from(v & b::punt_base_lo::DEFINED)
                    }
                    _ if o == def.base_hi => s.base = (s.base & 0xFFFF_FFFF) | (u64::from(v) << 32),
                    _ if o == def.size => {
                        let z = b::PuntSize::from_word(v);
                        *s = RingState {
                            base: s.base,
                            log2: z.log2.min(rings::MAX_LOG2 as u8),
                            enable: z.enable,
                            irq: s.irq,
                            ..RingState::default()
                        };
                    }
                    _ if o == def.host => {
                        s.host = b::PuntHost::from_word(v).index;
                        if !def.to_host {
                            return RegEffect::Doorbell(def.ring);
                        }
                    }
                    _ if o == def.irq => s.irq = v & b::punt_irq::DEFINED,
                    _ => {}
                }
            }
        }
        RegEffect::None
    }

    fn fault(&mut self, ring: Ring, slot: u16) {
        self.faults = self.faults.wrapping_add(1);
        self.error(ring, slot, DmaError::DmaFault);
    }

    fn error(&mut self, ring: Ring, slot: u16, code: DmaError) {
        let s = &mut self.rings[ring as usize];
        s.errors = s.errors.wrapping_add(1);
        s.error_slot = slot;
        s.error_code = code;
        s.dirty = true;
    }

    fn drop_record(&mut self, ring: Ring) {
        let s = &mut self.rings[ring as usize];
        s.drops = s.drops.wrapping_add(1);
        s.dirty = true;
    }

    fn completed(&mut self, ring: Ring) {
        let now = self.now;
        let s = &mut self.rings[ring as usize];
        s.dev = s.dev.wrapping_add(1);
        s.dirty = true;
        if s.pending == 0 {
            s.pending_since = now;
        }
        s.pending = s.pending.saturating_add(1);
    }

    /// A punted frame into the punt ring: true when it went there (or was dropped and
    /// counted there); false when the ring is not in use.
    pub fn punt(&mut self, header: &PuntHeader, frame: &[u8]) -> bool {
        if !self.takes(Ring::Punt) {
            return false;
        }
        let def = rings::PUNT;
        let s = self.rings[Ring::Punt as usize];
        if s.available() == 0 {
            self.drop_record(Ring::Punt);
            return true;
        }
        let slot_addr = s.slot_addr(&def, s.dev);
        let slot = s.dev & (slots(s.log2) - 1);
        let Some(port) = self.port.as_deref_mut() else {
            self.fault(Ring::Punt, slot);
            return true;
        };
        let mut raw = [0u8; 16];
        if port.read(slot_addr, &mut raw).is_err() {
            self.fault(Ring::Punt, slot);
            return true;
        }
        let desc = match PuntDesc::unpack(&words_of(&raw)) {
            Ok(d) => d,
            Err(_) => {
                self.error(Ring::Punt, slot, DmaError::BadEntry);
                return true;
            }
        };
        // The buffer starts on a 64-byte line (the RTL writes whole lines' lanes).
        if !desc.addr.is_multiple_of(LINE) {
            self.error(Ring::Punt, slot, DmaError::BadEntry);
            return true;
        }
        let n = frame
            .len()
            .min(usize::from(desc.len))
            .min(rings::FRAME_BYTES as usize);
        if n > 0 && port.write(desc.addr, &frame[..n]).is_err() {
            self.fault(Ring::Punt, slot);
            return true;
        }
        let cpl = PuntCpl {
            header: [*header],
            written: n as u16,
            reserved: 0,
        };
        let Ok(words) = cpl.pack() else {
            self.error(Ring::Punt, slot, DmaError::BadEntry);
            return true;
        };
        if port.write(slot_addr, &bytes_of(&words)).is_err() {
            self.fault(Ring::Punt, slot);
            return true;
        }
        self.completed(Ring::Punt);
        true
    }

    /// An event record into the event ring: true when it went there (or was dropped and
    /// counted there); false when the ring is not in use.
    pub fn event(&mut self, record: &EventRecord) -> bool {
        if !self.takes(Ring::Event) {
            return false;
        }
        let def = rings::EVENT;
        let s = self.rings[Ring::Event as usize];
        if s.available() == 0 {
            self.drop_record(Ring::Event);
            return true;
        }
        let slot = s.dev & (slots(s.log2) - 1);
        let Ok(words) = record.pack() else {
            self.error(Ring::Event, slot, DmaError::BadEntry);
            return true;
        };
        let mut raw = [0u8; 64];
        raw[..words.len() * 4].copy_from_slice(&bytes_of(&words));
        let at = s.slot_addr(&def, s.dev);
        match self.port.as_deref_mut().map(|p| p.write(at, &raw)) {
            Some(Ok(())) => self.completed(Ring::Event),
            _ => self.fault(Ring::Event, slot),
        }
        true
    }

    /// Descriptors waiting on a to-device ring.
    pub fn waiting(&self, ring: Ring) -> u16 {
        let s = &self.rings[ring as usize];
        if self.enable && s.usable() {
            s.available()
        } else {
            0
        }
    }

    /// Reads the descriptor at the head of a to-device ring (`slot_bytes` long); `None`
    /// when nothing waits. A refused read is counted and the descriptor skipped.
    fn head(&mut self, ring: Ring) -> Option<(u16, Option<Vec<u32>>)> {
        if self.waiting(ring) == 0 {
            return None;
        }
        let def = rings::ALL[ring as usize];
        let s = self.rings[ring as usize];
        let slot = s.dev & (slots(s.log2) - 1);
        let mut raw = vec![0u8; def.entry_bytes as usize];
        let ok = self
            .port
            .as_deref_mut()
            .is_some_and(|p| p.read(s.slot_addr(&def, s.dev), &mut raw).is_ok());
        Some((slot, ok.then(|| words_of(&raw))))
    }

    /// The next injected frame (descriptor and frame read from host memory), or `None`.
    /// Descriptors that fail (a refused DMA, a frame too long) are consumed, counted and
    /// skipped. Call [`HostDma::inject_done`] once the frame went through.
    pub fn next_inject(&mut self) -> Option<InjectWork> {
        loop {
            let (slot, words) = self.head(Ring::Inject)?;
            let Some(words) = words else {
                self.fault(Ring::Inject, slot);
                self.completed(Ring::Inject);
                continue;
            };
            let Ok(desc) = InjectDesc::unpack(&words) else {
                self.error(Ring::Inject, slot, DmaError::BadEntry);
                self.completed(Ring::Inject);
                continue;
            };
            let header = desc.header[0];
            let len = usize::from(header.frame_len);
            if len > rings::FRAME_BYTES as usize {
                self.drop_record(Ring::Inject);
                self.completed(Ring::Inject);
                continue;
            }
            // The frame starts on a 64-byte line and is read in whole lines (the RTL reads
            // beats of the line size: a frame whose last line runs past the device's
            // mapping is refused though its last byte is inside).
            if !desc.addr.is_multiple_of(LINE) {
                self.error(Ring::Inject, slot, DmaError::BadEntry);
                self.completed(Ring::Inject);
                continue;
            }
            let mut frame = vec![0u8; len.next_multiple_of(LINE as usize)];
            let ok = self
                .port
                .as_deref_mut()
                .is_some_and(|p| p.read(desc.addr, &mut frame).is_ok());
            if !ok {
                self.fault(Ring::Inject, slot);
                self.completed(Ring::Inject);
                continue;
            }
            frame.truncate(len);
            return Some(InjectWork { header, frame });
        }
    }

    /// The frame of the last [`HostDma::next_inject`] went through: its slot is free.
    pub fn inject_done(&mut self) {
        self.completed(Ring::Inject);
    }

    /// The command at the head of the command ring and its slot, or `None`. A descriptor
    /// that cannot be read or decoded is consumed and counted, and `Some((slot, None))`
    /// returned (call [`HostDma::command_done`] as for any other).
    pub fn next_command(&mut self) -> Option<(u16, Option<CmdDesc>)> {
        let (slot, words) = self.head(Ring::Cmd)?;
        let Some(words) = words else {
            self.fault(Ring::Cmd, slot);
            return Some((slot, None));
        };
        match CmdDesc::unpack(&words) {
            Ok(d) => Some((slot, Some(d))),
            Err(_) => {
                self.error(Ring::Cmd, slot, DmaError::BadCommand);
                Some((slot, None))
            }
        }
    }

    /// The command at `slot` finished with `code` (NONE: success).
    pub fn command_done(&mut self, slot: u16, code: DmaError) {
        if code != DmaError::None {
            if code == DmaError::DmaFault {
                self.fault(Ring::Cmd, slot);
            } else {
                self.error(Ring::Cmd, slot, code);
            }
        }
        self.completed(Ring::Cmd);
    }

    /// A DMA read for a command's data.
    pub fn read_data(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        match self.port.as_deref_mut() {
            Some(p) => p.read(iova, buf),
            None => Err(DmaFault {
                iova,
                len: buf.len(),
            }),
        }
    }

    /// A DMA write of a command's data.
    pub fn write_data(&mut self, iova: u64, data: &[u8]) -> Result<(), DmaFault> {
        match self.port.as_deref_mut() {
            Some(p) => p.write(iova, data),
            None => Err(DmaFault {
                iova,
                len: data.len(),
            }),
        }
    }

    /// A DMA read for a command's data, line by line where the whole is refused: the bytes
    /// before the first 64-byte line the IOMMU refuses are read (`buf` holds them), and their
    /// count is returned with the fault. The NIC reads whole lines, so a line is refused when
    /// any byte of it is not mapped.
    pub fn read_data_lines(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), (usize, DmaFault)> {
        let Err(fault) = self.read_data(iova, buf) else {
            return Ok(());
        };
        let mut done = 0usize;
        while done < buf.len() {
            let at = iova.wrapping_add(done as u64);
            let line = at & !(LINE - 1);
            let mut whole = [0u8; LINE as usize];
            if self.read_data(line, &mut whole).is_err() {
                break;
            }
            let n = ((line + LINE - at) as usize).min(buf.len() - done);
            let from = (at - line) as usize;
            buf[done..done + n].copy_from_slice(&whole[from..from + n]);
            done += n;
        }
        Err((done, fault))
    }

    /// A DMA write of a command's data, line by line where the whole is refused: the lines
    /// before the first one the IOMMU refuses are written, as the NIC, which writes a line at a
    /// time, leaves them.
    pub fn write_data_lines(&mut self, iova: u64, data: &[u8]) -> Result<(), DmaFault> {
        let Err(fault) = self.write_data(iova, data) else {
            return Ok(());
        };
        let mut done = 0usize;
        while done < data.len() {
            let at = iova.wrapping_add(done as u64);
            let line = at & !(LINE - 1);
            let n = ((line + LINE - at) as usize).min(data.len() - done);
            let mut whole = [0u8; LINE as usize];
            let from = (at - line) as usize;
            // The line's other bytes as they are, so that only the data's change.
            if self.read_data(line, &mut whole).is_err() {
                break;
            }
            whole[from..from + n].copy_from_slice(&data[done..done + n]);
            if self.write_data(line, &whole).is_err() {
                break;
            }
            done += n;
        }
        Err(fault)
    }

    /// Writes back every ring whose record changed and raises the interrupts their
    /// moderation calls for: what the engine does when its queue of work runs empty (the
    /// model: at the end of every call that moved records).
    pub fn flush(&mut self) {
        for ring in Ring::ALL {
            let i = ring as usize;
            if !self.rings[i].dirty {
                continue;
            }
            let s = self.rings[i];
            self.rings[i].dirty = false;
            let wb = Wb {
                index: s.dev,
                reserved: 0,
                drops: s.drops,
                errors: s.errors,
                error_slot: s.error_slot,
                error_code: s.error_code,
                reserved1: 0,
            };
            let at = self.wb + u64::from(rings::WB_STRIDE) * i as u64;
            if self.wb != 0 {
                if let (Ok(words), Some(p)) = (wb.pack(), self.port.as_deref_mut()) {
                    if p.write(at, &bytes_of(&words)).is_err() {
                        self.faults = self.faults.wrapping_add(1);
                    }
                }
            }
            self.moderate(ring, false);
        }
    }

    /// Lets `d` of simulated time pass: interrupt timers fire.
    pub fn advance(&mut self, d: Duration) {
        self.now = self
            .now
            .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        for ring in Ring::ALL {
            self.moderate(ring, true);
        }
    }

    /// Raises ring `ring`'s interrupt when its pending completions reached the count, or
    /// (`timers`) its timer ran out.
    fn moderate(&mut self, ring: Ring, timers: bool) {
        let s = &mut self.rings[ring as usize];
        let irq = b::PuntIrq::from_word(s.irq);
        if !irq.enable || s.pending == 0 {
            return;
        }
        let by_count = s.pending >= u32::from(irq.count.max(1));
        let by_time = timers
            && irq.usecs != 0
            && self.now.saturating_sub(s.pending_since) >= u64::from(irq.usecs) * 1000;
        if by_count || by_time {
            s.pending = 0;
            if let Some(p) = self.port.as_deref_mut() {
                p.interrupt(ring as u16);
            }
        }
    }
}

/// The ring whose registers hold `offset`. Every ring's registers have the punt ring's
/// fields (hw/regmap.toml checks it), so the `Punt*` register types decode all of them.
fn ring_of(offset: u32) -> Option<RingDef> {
    rings::ALL
        .into_iter()
        .find(|d| [d.base_lo, d.base_hi, d.size, d.host, d.dev, d.drops, d.irq].contains(&offset))
}

/// Little-endian words of bytes (the tail zero-padded).
pub fn words_of(raw: &[u8]) -> Vec<u32> {
    raw.chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

/// Bytes of little-endian words.
pub fn bytes_of(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
