//! The golden model of the nlb-offload NIC pipeline and the simulated device.
//!
//! - [`parse`]: the header parser over byte slices (no allocation per packet).
//! - [`pipeline`]: the exact pipeline semantics of `docs/pipeline.md` over one table bank.
//! - [`action`]: the frame editor (L2 DSR, IPIP, GUE).
//! - [`device`]: the simulated NIC at register level (`docs/regmap.md`).
//! - [`pcap`]: reading and writing pcap files of frames.
#![deny(missing_docs)]

pub mod flash;
pub mod parse;
