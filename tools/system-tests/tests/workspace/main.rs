//! The workspace tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod crate_graph;
mod linking;
mod spec_citations;
