//! The driver tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod common;
mod conntrack;
mod devices;
mod image;
mod loader;
mod rings;
mod socket;
mod traffic;
