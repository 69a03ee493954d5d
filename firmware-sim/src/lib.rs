//! The golden model of the nlb-offload NIC pipeline and the simulated device.
#![deny(missing_docs)]

pub mod flash;
