//! What the binaries of nlb-tools share.
//!
//! - [`admin_proto`]: the admin socket protocol between `nlbd` (the server) and `nlbctl
//!   status|health|conntrack|top` (the clients). It needs only serde: `nlbctl` speaks it over a
//!   blocking `std` socket and links no async runtime (`tools/tests/linking.rs`).
//! - [`fleet`]: the fleet's store in etcd (the configuration's revisions, the hosts' records),
//!   used by `nlbctl publish|fleet` and `nlbd --etcd`; it links etcd's gRPC client and tokio,
//!   which only these commands reach.
//! - [`fleet_scale`]: a virtual-time simulation of shared health at fleet scale (no sockets,
//!   no etcd), for docs/fleet.md's figures.
//! - [`policy_sim`]: the closed-loop simulator of the service LB policy behind `nlbctl
//!   policy-sim` (the golden model, the driver's loader and connection table, the compiler's
//!   policy runtime; no slow-path crate, no async runtime).
#![deny(missing_docs)]

pub mod admin_proto;
pub mod fleet;
pub mod fleet_scale;
pub mod policy_sim;
mod splitmix;
