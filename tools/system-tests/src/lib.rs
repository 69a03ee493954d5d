//! The shared harness of the system tests (the tests that run `nlbctl`, `nlbd` and `nlb-sim`
//! as processes, in `tests/`).
//!
//! - [`bins`]: where the binaries under test are (built when missing or stale);
//! - [`harness`]: a simulated NIC served by the test process, nlbd against it, health-check
//!   backends on loopback, a private tmux server (the operator-experience tests);
//! - [`lab`]: the end-to-end laboratory on real Linux networking (namespaces, veths, a bridge,
//!   nlb-sim on AF_PACKET, nlbd, real HTTP backends, curl; docs/e2e.md).
#![deny(missing_docs)]
// Handles on processes, servers and namespaces: nothing prints them.
#![allow(missing_debug_implementations)]

pub mod bins;
pub mod harness;
pub mod lab;

pub use bins::bin;
