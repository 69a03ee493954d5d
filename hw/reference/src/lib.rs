//! The host-side reference of the nlb-offload pipeline semantics (`docs/pipeline.md`),
//! written once and plainly, one packet at a time.
//!
//! - [`parse`]: the header parser (§2).
//! - [`lookup`]: every lookup stage (§3–§8: ICMP reading, flow hashes, VIP table, port slots,
//!   rule, ACL, fragment rules, pool and serving slice, affinity key, connection table,
//!   Maglev slot, backend), each able to report what it did as a [`Step`] of a [`Trace`].
//! - [`action`]: the frame editor (§9); [`conntrack`]: the connection table's placement and
//!   compare rules and a table (§7); [`pipeline`]: a frame through all of it, with its event
//!   (§10); [`device`]: the per-packet side effects (§11, §13).
//! - [`host`]: the decisions the slow path takes on the NIC's behalf (§3, §6).
//!
//! Who uses it: `nlbctl explain` formats a [`Trace`] of [`lookup::lookup`]; the slow path
//! (`nlb-driver`) decides punted fragments and ICMP errors with [`host`] and places
//! connections with [`conntrack`]; the differential tests of `firmware-sim` hold the optimised
//! model to [`device::RefDevice`]. The optimised model and the RTL are separate
//! implementations held to this one (see `docs/architecture.md`); nothing else computes a
//! lookup step (`tests/single_home.rs` checks it).
#![deny(missing_docs)]

pub mod action;
pub mod conntrack;
pub mod device;
pub mod host;
pub mod lookup;
pub mod parse;
pub mod pipeline;
pub mod trace;

pub use trace::{key_name, Flow, Fragment, NoTrace, Recorder, Step, Trace};
