//! The NIC that runs the traffic: the golden model, or (feature `rtl`) the Verilator RTL.
//! Both sit behind the same socket server and the same traffic loops.

use crate::transmit::{InjectSource, Taken};
use firmware_sim::BatchOutput;
use nlb_driver::device::Device;
use nlb_driver::model::ModelHandle;
use nlb_hw::blocks::ctrl;
use nlb_hw::enums::Verdict;

/// Runs received frames through the NIC.
pub trait Pipeline: Send {
    /// Whether the pipeline is enabled (a table has been loaded).
    fn enabled(&mut self) -> Result<bool, String>;

    /// Runs `frames` in order; `each(i, verdict, frame)` gets every result with the
    /// transmitted frame (empty unless the verdict is FORWARD). Punts and learn events go to
    /// the device's queues, for the host.
    fn run(
        &mut self,
        frames: &[&[u8]],
        each: &mut dyn FnMut(usize, Verdict, &[u8]),
    ) -> Result<(), String>;
}

/// The golden model, shared with the socket server.
pub struct Model {
    sim: ModelHandle,
    batch: BatchOutput,
}

impl Model {
    /// Wraps the device served by `sim`.
    pub fn new(sim: &ModelHandle) -> Model {
        Model {
            sim: sim.clone(),
            batch: BatchOutput::new(),
        }
    }
}

impl Pipeline for Model {
    fn enabled(&mut self) -> Result<bool, String> {
        read_enable(&mut self.sim)
    }

    fn run(
        &mut self,
        frames: &[&[u8]],
        each: &mut dyn FnMut(usize, Verdict, &[u8]),
    ) -> Result<(), String> {
        self.sim.lock().receive_batch(frames, &mut self.batch);
        for (i, r) in self.batch.results.iter().enumerate() {
            each(i, r.verdict, self.batch.frame(i));
        }
        Ok(())
    }
}

/// The golden model's inject queue.
pub struct ModelInjected(pub ModelHandle);

impl InjectSource for ModelInjected {
    fn take(&self) -> Result<Taken, String> {
        let mut dev = self.0.lock();
        Ok(Taken {
            frames: dev
                .take_injected()
                .into_iter()
                .map(|i| (i.result.verdict, i.frame))
                .collect(),
            overflows: dev.inject_overflows(),
        })
    }
}

/// Reads `ctrl.enable` through any device.
pub fn read_enable(dev: &mut dyn Device) -> Result<bool, String> {
    Ok(dev.read32(ctrl::ENABLE).map_err(|e| e.to_string())? & 1 != 0)
}
