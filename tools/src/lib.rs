//! What the binaries of nlb-tools share.
//!
//! - [`admin_proto`]: the admin socket protocol between `nlbd` (the server) and `nlbctl
//!   status|health|conntrack|top` (the clients). It needs only serde: `nlbctl` speaks it over a
//!   blocking `std` socket and links no async runtime (`tools/tests/linking.rs`).
//! - [`policy_sim`]: the closed-loop simulator of the service LB policy behind `nlbctl
//!   policy-sim` (the golden model, the driver's loader and connection table, the compiler's
//!   policy runtime; no slow-path crate, no async runtime).
#![deny(missing_docs)]

pub mod admin_proto;
pub mod policy_sim;
