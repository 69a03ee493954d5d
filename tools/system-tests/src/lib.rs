//! The shared harness of the system tests (the tests that run `nlbctl`, `nlbd` and `nlb-sim`
//! as processes, in `tests/`).
#![deny(missing_docs)]

pub mod bins;

pub use bins::bin;
