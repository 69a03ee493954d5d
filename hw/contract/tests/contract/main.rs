//! The contract tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod generated_files;
mod hash_vectors;
mod layouts;
mod no_hand_written_fields;
mod register_fields;
