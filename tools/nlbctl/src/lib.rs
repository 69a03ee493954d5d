//! The library half of `nlbctl`: what its commands are built on and its tests call directly.
//!
//! - [`policy_sim`]: the closed-loop simulator of the service LB policy behind `nlbctl
//!   policy-sim` (the golden model, the driver's loader and connection table, the compiler's
//!   policy runtime; no daemon, no async runtime).
#![deny(missing_docs)]

pub mod policy_sim;
