//! The host slow path: health checks, learn/teardown handling, fragments, the controller.

pub mod fragments;
pub mod health;
