//! The host side of nlb-offload: the `Device` trait and its backends, the table loader, the
//! conntrack manager, the flash programmer and the slow path.
#![deny(missing_docs)]

pub mod device;
pub mod flash;
pub mod slowpath;

pub use device::{Device, DeviceError};
