//! The host side of nlb-offload: the `Device` trait and its backends, the table loader, the
//! conntrack manager, the flash programmer and the slow path.
#![deny(missing_docs)]

pub mod device;
pub mod discovery;
pub mod flash;
pub mod slowpath;
pub mod vfio;

pub use device::{Batch, Device, DeviceError, RegOp};
pub use discovery::{discover, DeviceInfo, DiscoveryError, FirmwareId};
pub use vfio::{PciAddress, Vfio, VfioError};
