//! What the binaries of nlb-tools share.
//!
//! - [`admin_proto`]: the admin socket protocol between `nlbd` (the server) and `nlbctl
//!   status|health|conntrack|top` (the clients). It needs only serde: `nlbctl` speaks it over a
//!   blocking `std` socket and links no async runtime (`tools/tests/linking.rs`).
#![deny(missing_docs)]

pub mod admin_proto;
