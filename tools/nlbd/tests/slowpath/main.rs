//! The slowpath tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod connection_tracking;
mod health;
mod host_rings;
mod kubernetes_endpoints;
mod policy_runtime;
mod probes;
mod reload_traffic;
mod tcp_fragments;
