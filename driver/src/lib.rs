//! The host side of nlb-offload: the `Device` trait and its backends, the table loader, the
//! conntrack manager and the flash programmer. Synchronous: the slow path that runs on top of
//! it (health checks, learned connections, punts; tokio) is the `nlb-slowpath` crate.
#![deny(missing_docs)]

pub mod conntrack;
pub mod device;
pub mod discovery;
pub mod dma;
pub mod fault;
pub mod flash;
pub mod loader;
pub mod model;
pub mod opennic;
pub mod pcie;
pub mod queues;
pub mod rings;
pub mod socket;
pub mod spec;
pub mod vfio;

pub use conntrack::{Conntrack, ConntrackError, NewConnection};
pub use device::{Batch, Device, DeviceError, RegOp};
pub use discovery::{discover, DeviceInfo, DiscoveryError, FirmwareId};
pub use loader::{LoadError, LoadReport, Loader, LoaderOptions};
pub use model::ModelHandle;
pub use socket::SocketDevice;
pub use spec::{open_device, DeviceSpec, OpenError};
pub use vfio::{PciAddress, Vfio, VfioError};
