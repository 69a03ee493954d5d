//! The host slow path of nlb-offload: what `nlbd` runs next to the NIC.
//!
//! ```text
//!  backends ── probes ──► health ── HealthChange ──┐
//!  config file (reload) ───────────────────────────┤
//!                                                  ▼
//!                                   engine (one thread owns the Device)
//!                                    ├─ controller: health + config → recompile → delta load
//!                                    ├─ learn: learn / teardown events → connection table, ageing
//!                                    ├─ policy: live connections → service weights → delta load
//!                                    ├─ punt: punted fragments and ICMP errors → decide → inject
//!                                    └─ counters, status, connection listing (for nlbd's
//!                                       metrics and admin socket)
//! ```
//!
//! - [`health`]: the health checker (SPEC R5), async on tokio (HTTP probes with hyper); its
//!   decisions go to the engine as [`engine::Command::Health`].
//! - [`engine`]: the device loop; everything that touches the NIC happens on its thread, in
//!   the order [`engine::Engine`] documents. Other tasks talk to it with [`engine::Command`]s.
//! - [`controller`]: configuration and health in, tables in the NIC out (SPEC R3.4, R5).
//! - [`learn`]: the connections the NIC learned (SPEC R4.1), and [`tracking`]: what each
//!   pool's configuration says about them (persistence on unhealthy backends, connection
//!   draining, draining on failover and failback).
//! - [`pinned`]: connections pinned to a backend the tables no longer choose, published to
//!   the fleet and installed as copies from the other hosts (SPEC R15.2).
//! - [`policy`]: the service LB policy of backend services at run time (SPEC R6): live
//!   connection counts every refresh, new Maglev weights as delta loads.
//! - [`punt`]: frames the NIC punts (SPEC R4.3, R4.4, R10.2), with [`punt::fragments`] (the
//!   fragment tracker), [`punt::icmp`] (ICMP errors) and [`punt::lookup`] (the decisions, taken
//!   by the reference semantics, `nlb-reference`).
//! - [`bgp`]: the VIPs announced by BGP to the host's routing daemon (SPEC R15.1).
//!
//! The device side (the `Device` trait, loader, connection table, queues) is `nlb-driver`,
//! which stays synchronous; this crate adds the async runtime, so a tool that only loads,
//! flashes or inspects does not link it. `docs/nlbd.md` describes the daemon and
//! `docs/architecture.md` the crate graph.
#![deny(missing_docs)]

// In the order of the data flow above.
pub mod bgp;
pub mod controller;
pub mod engine;
pub mod health;
pub mod learn;
pub mod pinned;
pub mod policy;
pub mod punt;
pub mod tracking;

// The fleet's shared health at scale, in virtual time (docs/fleet.md's figures).
pub mod fleet_scale;
