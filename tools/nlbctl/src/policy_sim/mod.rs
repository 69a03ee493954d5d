//! `nlbctl policy-sim`: a deterministic, virtual-time, closed-loop simulation of a backend
//! service's load-balancing policy (SPEC R6) on the golden model of the NIC.
//!
//! A [`Scenario`] (a YAML file; docs/policy-sim.md) gives a load balancer with a backend
//! service, a seed, a duration, the arrival rate of new connections over time, how long they
//! last, health events and the refresh interval. [`run`] opens every connection as a TCP SYN
//! through the model device loaded with the compiled tables, reads the backend from the output
//! frame, installs the learned connection as the slow path does, ends it after its lifetime
//! with a FIN, and at every refresh gives the live connection counts to the real policy
//! runtime (`Compiled::rebalance`) and delta-loads what changed. [`trace_jsonl`], [`summary`]
//! and [`svg`] turn the [`Outcome`] into the trace, the summary and the plot.
//!
//! ```no_run
//! use nlbctl::policy_sim::{run, summary, Scenario};
//! let s = Scenario::load("examples/policy-sim/nearest-region-spill.yaml".as_ref())?;
//! let outcome = run(&s)?;
//! print!("{}", summary(&outcome));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod engine;
mod plot;
mod report;
mod scenario;
mod yaml;

pub use engine::{
    run, GroupSample, GroupTotals, Outcome, Phase, PhaseGroup, Record, RecordKind, SimError, Totals,
};
pub use plot::svg;
pub use report::{summary, trace_jsonl};
pub use scenario::{
    ArrivalStep, ConfigSource, HealthEvent, Lifetime, Scenario, ScenarioError, MAX_CONNECTIONS,
    MAX_DURATION_SECS, MAX_REFRESHES, MICROS,
};
