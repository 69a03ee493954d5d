//! The golden model of the nlb-offload NIC pipeline and the simulated device.
//!
//! - [`parse`]: the header parser over byte slices (no allocation per packet).
//! - [`pipeline`]: the exact pipeline semantics of `docs/pipeline.md` over one table bank.
//! - [`action`]: the frame editor (L2 DSR, IPIP, GUE).
//! - [`conntrack`], [`counters`]: the connection table and the counters.
//! - [`device`]: the simulated NIC at register level (`docs/regmap.md`).
//! - [`pcap`]: reading and writing pcap files of frames.
//!
//! A simulation run (`nlbctl sim`) builds a [`ModelDevice::from_tables`] with the compiled bank
//! and settings, turns on [`ModelDevice::set_auto_learn`] unless told not to, and feeds frames
//! to [`ModelDevice::receive`]; each [`PacketResult`] carries verdict, reason, rule, pool,
//! backend, key type, conntrack outcome, the output frame length and the event.
#![deny(missing_docs)]

pub mod action;
pub mod conntrack;
pub mod counters;
pub mod device;
pub mod dma;
pub mod flash;
mod keyhash;
pub mod parse;
pub mod pcap;
pub mod pipeline;

pub use conntrack::{ConnTable, CtError};
pub use counters::{Counter, CounterKind, Counters};
pub use device::{BatchOutput, FlashPort, ModelDevice, PortEffect, RegError};
pub use dma::{DmaFault, DmaPort, HostDma};
pub use pipeline::{CtOutcome, PacketResult};
