//! Host memory for the model's DMA engine in tests: one region at a fixed IOVA, written and
//! read by the test as the host would, plus the host side of the punt and event rings
//! written from docs/pipeline.md §15 (not from the driver, which these tests must not need).

use firmware_sim::dma::{words_of, DmaFault, DmaPort};
use firmware_sim::ModelDevice;
use nlb_hw::blocks::dma;
use nlb_hw::layouts::{EventRecord, PuntCpl, PuntDesc, RingWb};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// First IOVA of the region.
pub const IOVA: u64 = 0x1_2340_0000;
/// Bytes of a punt buffer.
pub const BUF: usize = 9728;

/// The region, shared between the test (the host) and the device's port.
#[derive(Debug, Clone)]
pub struct HostMem {
    pub bytes: Arc<Mutex<Vec<u8>>>,
    pub interrupts: Arc<Mutex<Vec<u16>>>,
}

impl HostMem {
    pub fn new(len: usize) -> HostMem {
        HostMem {
            bytes: Arc::new(Mutex::new(vec![0; len])),
            interrupts: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn read(&self, iova: u64, n: usize) -> Vec<u8> {
        let at = (iova - IOVA) as usize;
        self.bytes.lock().unwrap()[at..at + n].to_vec()
    }

    pub fn write(&self, iova: u64, data: &[u8]) {
        let at = (iova - IOVA) as usize;
        self.bytes.lock().unwrap()[at..at + data.len()].copy_from_slice(data);
    }
}

/// The port the device gets.
#[derive(Debug)]
pub struct Port(pub HostMem);

impl DmaPort for Port {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        let m = self.0.bytes.lock().unwrap();
        let at = iova.checked_sub(IOVA).map(|a| a as usize);
        match at.and_then(|a| m.get(a..a + buf.len())) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(DmaFault {
                iova,
                len: buf.len(),
            }),
        }
    }

    fn write(&mut self, iova: u64, data: &[u8]) -> Result<(), DmaFault> {
        let mut m = self.0.bytes.lock().unwrap();
        let at = iova.checked_sub(IOVA).map(|a| a as usize);
        match at.and_then(|a| m.get_mut(a..a + data.len())) {
            Some(dst) => {
                dst.copy_from_slice(data);
                Ok(())
            }
            None => Err(DmaFault {
                iova,
                len: data.len(),
            }),
        }
    }

    fn interrupt(&mut self, vector: u16) {
        self.0.interrupts.lock().unwrap().push(vector);
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The host side of the punt and event rings of one device, `slots` each.
#[derive(Debug)]
pub struct Rings {
    pub mem: HostMem,
    pub slots: u16,
    /// Consumer indices (free-running).
    punt_next: u16,
    event_next: u16,
}

/// Where things are in the region.
const WB: u64 = IOVA;
const PUNT_RING: u64 = IOVA + 0x1000;
const EVENT_RING: u64 = IOVA + 0x1_0000;
const PUNT_BUFS: u64 = IOVA + 0x10_0000;

impl Rings {
    /// Allocates the region, connects it to `dev`, sets both rings up (2^log2 slots),
    /// posts every punt buffer and enables the engine (keeping `dma.ctrl.hw_learn`).
    pub fn attach(dev: &mut ModelDevice, log2: u8) -> Rings {
        let slots = 1u16 << log2;
        let mem = HostMem::new(0x10_0000 + usize::from(slots) * BUF);
        dev.set_dma_port(Some(Box::new(Port(mem.clone()))));
        let w = |dev: &mut ModelDevice, o: u32, v: u32| dev.write32(o, v).expect("reg");
        w(dev, dma::WB_LO, WB as u32);
        w(dev, dma::WB_HI, (WB >> 32) as u32);
        for (base_lo, base_hi, size, at) in [
            (
                dma::PUNT_BASE_LO,
                dma::PUNT_BASE_HI,
                dma::PUNT_SIZE,
                PUNT_RING,
            ),
            (
                dma::EVENT_BASE_LO,
                dma::EVENT_BASE_HI,
                dma::EVENT_SIZE,
                EVENT_RING,
            ),
        ] {
            w(dev, base_lo, at as u32);
            w(dev, base_hi, (at >> 32) as u32);
            w(dev, size, u32::from(log2) | 1 << 8);
        }
        for i in 0..slots {
            let d = PuntDesc {
                addr: PUNT_BUFS + u64::from(i) * BUF as u64,
                len: BUF as u16,
                reserved: 0,
            };
            mem.write(PUNT_RING + 16 * u64::from(i), &bytes(&d.pack().unwrap()));
        }
        w(dev, dma::PUNT_HOST, u32::from(slots));
        w(dev, dma::EVENT_HOST, u32::from(slots));
        let learn = dev.read32(dma::CTRL).expect("reg") & 2;
        w(dev, dma::CTRL, 1 | learn);
        Rings {
            mem,
            slots,
            punt_next: 0,
            event_next: 0,
        }
    }

    fn wb(&self, ring: u64) -> RingWb {
        RingWb::unpack(&words_of(&self.mem.read(WB + 16 * ring, 16))).unwrap()
    }

    /// Punted frames completed since the last call (header and bytes), and the ring's drop
    /// count; every slot is posted again.
    pub fn take_punts(&mut self, dev: &mut ModelDevice) -> (Vec<PuntCpl>, Vec<Vec<u8>>, u32) {
        let wb = self.wb(0);
        let (mut cpls, mut frames) = (Vec::new(), Vec::new());
        while self.punt_next != wb.index {
            let slot = u64::from(self.punt_next % self.slots);
            let c = PuntCpl::unpack(&words_of(&self.mem.read(PUNT_RING + 16 * slot, 16))).unwrap();
            let buf = PUNT_BUFS + slot * BUF as u64;
            frames.push(self.mem.read(buf, usize::from(c.written)));
            cpls.push(c);
            let d = PuntDesc {
                addr: buf,
                len: BUF as u16,
                reserved: 0,
            };
            self.mem
                .write(PUNT_RING + 16 * slot, &bytes(&d.pack().unwrap()));
            self.punt_next = self.punt_next.wrapping_add(1);
        }
        let host = self.punt_next.wrapping_add(self.slots);
        dev.write32(dma::PUNT_HOST, u32::from(host)).expect("reg");
        (cpls, frames, wb.drops)
    }

    /// Event records written since the last call, and the ring's drop count; the slots are
    /// given back.
    pub fn take_events(&mut self, dev: &mut ModelDevice) -> (Vec<EventRecord>, u32) {
        let wb = self.wb(1);
        let mut v = Vec::new();
        while self.event_next != wb.index {
            let slot = u64::from(self.event_next % self.slots);
            v.push(
                EventRecord::unpack(&words_of(&self.mem.read(EVENT_RING + 64 * slot, 64))).unwrap(),
            );
            self.event_next = self.event_next.wrapping_add(1);
        }
        let host = self.event_next.wrapping_add(self.slots);
        dev.write32(dma::EVENT_HOST, u32::from(host)).expect("reg");
        (v, wb.drops)
    }
}

pub fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
