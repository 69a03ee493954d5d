//! The cli tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod commands;
mod devices;
mod kubernetes;
mod policy_sim;
mod sim;
mod sim_rtl;

/// The workspace root: examples/ and docs/ are read from it, and nlbctl runs in it.
fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
