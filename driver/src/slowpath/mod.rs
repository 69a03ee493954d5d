//! The host slow path: health checks, learn/teardown handling, fragments, the controller.

pub mod controller;
pub mod engine;
pub mod fragments;
pub mod health;
pub mod icmp;
pub mod learn;
pub mod lookup;
pub mod punt;
