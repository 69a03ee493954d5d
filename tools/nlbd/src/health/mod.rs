//! The health checker of the slow path (SPEC R5): the health checks of every member of every
//! pool (legacy HTTP checks of target pools; HTTP, HTTPS and TCP checks of backend services),
//! decided by thresholds, with the weights of weighted pools.
//!
//! ```text
//! controller ── set_targets(Vec<HealthTarget>) ──► HealthChecker
//!                                                   │ one task per distinct ProbeKey
//!                                                   │ (IP, port, protocol, path, Host,
//!                                                   │ request, response), shared by the
//!                                                   │ pools that use the same check
//!                                                   ▼
//!                                     ProbeRequest::run  (connect, [TLS], GET, head ≤ 16 KiB,
//!                                                   │     body ≤ 64 KiB; or TCP request and
//!                                                   │     expected reply; one deadline)
//!                                                   ▼
//!                                 Tracker per target (thresholds, weight)
//!                                                   │
//!                 HealthEvents::recv() ◄── HealthChange {target, health, weight, decided_at}
//!                 HealthChecker::snapshot() / metrics()
//! ```
//!
//! [`targets_from_config`] builds the targets from a compiler [`Config`](flowtable_compiler::Config);
//! [`HealthSnapshot::to_health_state`] gives the compiler's `HealthState` back.
//!
//! `docs/health-checks.md` describes the behaviour, the defaults, the state machine and how
//! misbehaving backends are handled.

mod checker;
mod compiler;
mod config;
mod metrics;
mod probe;
mod socket;
mod state;

pub use checker::{
    CheckerOptions, HealthChange, HealthChecker, HealthEvents, HealthSnapshot, ReloadSummary,
    TargetStatus,
};
pub use compiler::targets_from_config;
pub use config::{
    Check, CheckProtocol, HealthError, HealthTarget, ProbeKey, TargetKey, MAX_PROBE_DATA,
};
pub use metrics::{LatencyHistogram, ProbeMetrics, LATENCY_BOUNDS_SECONDS};
pub use probe::{
    ProbeFailure, ProbeOutcome, ProbePass, ProbePhase, ProbeRequest, MAX_BODY_BYTES,
    MAX_HEAD_BYTES, PROBE_USER_AGENT,
};
pub use state::{
    pool_weights, Health, MemberView, PoolWeights, Tracker, Transition, Verdict, WeightMode,
    WeightReport, MAX_WEIGHT, WEIGHT_HEADER,
};
