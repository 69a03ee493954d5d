//! `--engine rtl`: `nlb_top` under Verilator ([`nlb_verif::device::RtlDevice`]) as the NIC.
//!
//! One model serves both sides: the socket server's connections reach its registers through
//! AXI-Lite (the driver loads tables, installs connections and pops the queues exactly as on
//! hardware), and the traffic thread sends frames into its receive stream. A mutex orders the
//! two; a register batch releases it every [`OPS_PER_LOCK`] operations so that traffic runs
//! while a large table loads, as on a card.

use crate::engine::{read_enable, Pipeline};
use crate::transmit::{InjectSource, Taken};
use nlb_driver::device::{Device, DeviceError, RegOp};
use nlb_driver::dma::{DmaRegion, IrqLine};
use nlb_driver::pcie::PcieStats;
use nlb_hw::enums::Verdict;
use nlb_verif::device::RtlDevice;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Register operations done under one lock by [`SharedRtl::run_batch`].
const OPS_PER_LOCK: usize = 256;

/// A handle on the one RTL model; clones share it.
#[derive(Debug, Clone)]
pub struct SharedRtl(Arc<Mutex<RtlDevice>>);

impl SharedRtl {
    /// Starts the model (reset, pipeline disabled).
    pub fn start() -> Result<SharedRtl, String> {
        let dev = RtlDevice::new(0).map_err(|e| format!("starting the Verilator model: {e}"))?;
        Ok(SharedRtl(Arc::new(Mutex::new(dev))))
    }

    fn lock(&self) -> MutexGuard<'_, RtlDevice> {
        // A panic while holding the lock leaves the model between whole requests: usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Device for SharedRtl {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.lock().read32(offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.lock().write32(offset, value)
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        for chunk in ops.chunks(OPS_PER_LOCK) {
            self.lock().run_batch(chunk, reads)?;
        }
        Ok(())
    }

    /// Runs the model's clock (packets in flight drain), then lets the traffic thread in.
    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        self.lock().wait(d)?;
        std::thread::yield_now();
        Ok(())
    }

    fn describe(&self) -> String {
        format!("nlb-sim {}", self.lock().describe())
    }

    /// The host rings: `nlb_top`'s DMA master serves the memory the driver maps.
    fn dma_map(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.lock().dma_map(region)
    }

    fn dma_unmap(&mut self, region: &DmaRegion) -> Result<(), DeviceError> {
        self.lock().dma_unmap(region)
    }

    fn set_interrupts(&mut self, lines: &[IrqLine]) -> Result<(), DeviceError> {
        self.lock().set_interrupts(lines)
    }

    fn pcie(&mut self) -> PcieStats {
        self.lock().pcie()
    }
}

impl InjectSource for SharedRtl {
    fn take(&self) -> Result<Taken, String> {
        let i = self
            .lock()
            .take_injected()
            .map_err(|e| format!("the Verilator model: {e}"))?;
        Ok(Taken {
            frames: i
                .packets
                .into_iter()
                .map(|p| (p.result.verdict, p.output))
                .collect(),
            overflows: i.overflows,
        })
    }
}

/// The traffic side of the model.
pub struct Rtl {
    dev: SharedRtl,
}

impl Rtl {
    /// The traffic side of `dev`.
    pub fn new(dev: &SharedRtl) -> Rtl {
        Rtl { dev: dev.clone() }
    }
}

impl Pipeline for Rtl {
    fn enabled(&mut self) -> Result<bool, String> {
        read_enable(&mut self.dev)
    }

    fn run(
        &mut self,
        frames: &[&[u8]],
        each: &mut dyn FnMut(usize, Verdict, &[u8]),
    ) -> Result<(), String> {
        // Back to back on the receive stream; the model runs until every frame has its result
        // and its transmitted frame. It lives on its own thread, so the frames go to it owned:
        // a copy per frame, next to the hundred-odd clocks each one costs.
        let owned = frames.iter().map(|f| f.to_vec()).collect();
        let packets = self
            .dev
            .lock()
            .receive(owned)
            .map_err(|e| format!("the Verilator model: {e}"))?;
        if packets.len() != frames.len() {
            return Err(format!(
                "the Verilator model gave {} results for {} frames",
                packets.len(),
                frames.len()
            ));
        }
        for (i, p) in packets.iter().enumerate() {
            each(i, p.result.verdict, &p.output);
        }
        Ok(())
    }
}
