//! Device specifications as users type them: `pci:0000:03:00.0` (VFIO) or
//! `sim:/path/to.sock` (an `nlb-sim` process).
//!
//! The Verilator RTL is served by `nlb-sim --engine rtl` (a build with the `rtl` feature) over
//! the same socket protocol, so it needs no spec of its own here.

use crate::device::{Device, DeviceError};
use crate::socket::SocketDevice;
use crate::vfio::{PciAddress, Vfio, VfioError};
use std::path::PathBuf;

/// A parsed device specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// A NIC through VFIO.
    Pci(PciAddress),
    /// A simulated NIC served on a Unix socket.
    Socket(PathBuf),
}

/// Why a device could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The specification does not parse.
    #[error("`{0}` is not a device: use pci:DDDD:BB:DD.F (a NIC bound to vfio-pci) or sim:PATH (an nlb-sim socket)")]
    BadSpec(String),
    /// VFIO refused.
    #[error(transparent)]
    Vfio(#[from] VfioError),
    /// The socket device refused.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

impl std::str::FromStr for DeviceSpec {
    type Err = OpenError;

    fn from_str(s: &str) -> Result<Self, OpenError> {
        if let Some(addr) = s.strip_prefix("pci:") {
            return Ok(DeviceSpec::Pci(addr.parse()?));
        }
        if let Some(path) = s.strip_prefix("sim:") {
            if !path.is_empty() {
                return Ok(DeviceSpec::Socket(PathBuf::from(path)));
            }
        }
        Err(OpenError::BadSpec(s.to_string()))
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Pci(a) => write!(f, "pci:{a}"),
            DeviceSpec::Socket(p) => write!(f, "sim:{}", p.display()),
        }
    }
}

impl DeviceSpec {
    /// Opens the device.
    pub fn open(&self) -> Result<Box<dyn Device>, OpenError> {
        Ok(match self {
            DeviceSpec::Pci(a) => Box::new(Vfio::open(&a.to_string())?),
            DeviceSpec::Socket(p) => Box::new(SocketDevice::connect(p)?),
        })
    }
}

/// Parses and opens a device specification.
pub fn open_device(spec: &str) -> Result<Box<dyn Device>, OpenError> {
    spec.parse::<DeviceSpec>()?.open()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(
            "pci:0000:03:00.0"
                .parse::<DeviceSpec>()
                .unwrap()
                .to_string(),
            "pci:0000:03:00.0"
        );
        assert_eq!(
            "pci:3:0.1".parse::<DeviceSpec>().unwrap().to_string(),
            "pci:0000:03:00.1"
        );
        assert_eq!(
            "sim:/run/nlb.sock".parse::<DeviceSpec>().unwrap(),
            DeviceSpec::Socket("/run/nlb.sock".into())
        );
        for bad in ["", "sim:", "eth0", "pci:zz"] {
            assert!(bad.parse::<DeviceSpec>().is_err(), "{bad}");
        }
        let e = "eth0".parse::<DeviceSpec>().unwrap_err().to_string();
        assert!(e.contains("pci:DDDD:BB:DD.F"), "{e}");
    }

    #[test]
    fn a_missing_socket_says_what_to_start() {
        let e = match open_device("sim:/nonexistent/nlb.sock") {
            Ok(_) => panic!("connected to a socket that does not exist"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("nlb-sim --socket /nonexistent/nlb.sock"), "{e}");
    }
}
