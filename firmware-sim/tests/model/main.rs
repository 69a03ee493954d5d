//! The model tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod common;
mod conntrack;
mod device;
mod differential;
mod learning;
mod parse;
mod pipeline;
mod props;
