//! `nlbctl policy-sim`: the closed-loop simulation of a backend service's LB policy.

use crate::common::CliError;
use nlbctl::policy_sim::{self, Scenario, ScenarioError, SimError, MICROS};
use std::path::{Path, PathBuf};

/// Simulate a backend service's load-balancing policy (SPEC R6) in virtual time, closed loop.
///
/// The scenario (YAML; docs/policy-sim.md, examples/policy-sim/) gives the load balancer, a
/// seed, a duration, the arrival rate of new connections over time, their lifetimes, health
/// events and the refresh interval. Every connection is a TCP SYN through the golden model
/// loaded with the compiled tables; its learned connection is installed as nlbd installs it;
/// at every refresh the live connections per backend go to the policy, and what changes is
/// delta-loaded into the model. No clock is read: the same scenario and seed give the same
/// trace, byte for byte.
///
/// Writes DIR/STEM.jsonl (one JSON line per refresh and health event: per group live,
/// capacity, utilisation, share of new connections observed and served, drained, weight
/// changes) and DIR/STEM.svg (utilisation and shares over time, health events marked), then
/// prints a summary: per phase and group the share of new connections, utilisation and
/// weight changes.
///
///   nlbctl policy-sim examples/policy-sim/nearest-region-spill.yaml -o out/
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scenario file.
    scenario: PathBuf,
    /// Directory for the trace and the plot (created if missing), named after the scenario
    /// file: STEM.jsonl and STEM.svg.
    #[arg(short = 'o', long, value_name = "DIR", default_value = ".")]
    out_dir: PathBuf,
    /// Seed instead of the scenario's.
    #[arg(long)]
    seed: Option<u64>,
    /// Simulate only this many seconds of the scenario.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
}

fn scenario_error(e: ScenarioError) -> CliError {
    match e {
        ScenarioError::Invalid(d) => {
            let n = d.len();
            CliError::user(format!(
                "{d}\n{n} problem{} found; nothing simulated",
                if n == 1 { "" } else { "s" }
            ))
        }
        other => CliError::user(format!("error: {other}")),
    }
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text)
        .map_err(|e| CliError::user(format!("error: cannot write {}: {e}", path.display())))
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut scenario = Scenario::load(&args.scenario).map_err(scenario_error)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            return Err(CliError::user(format!(
                "error: --duration {d}: give a positive number of seconds"
            )));
        }
        scenario.duration = scenario.duration.min((d * MICROS).round() as u64);
    }
    let outcome = policy_sim::run(&scenario).map_err(|e| match e {
        SimError::Compile(c) => CliError::from(c),
        other => CliError::internal(format!("internal error: {other}")),
    })?;
    std::fs::create_dir_all(&args.out_dir).map_err(|e| {
        CliError::user(format!(
            "error: cannot create {}: {e}",
            args.out_dir.display()
        ))
    })?;
    let stem = args
        .scenario
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let trace = args.out_dir.join(format!("{stem}.jsonl"));
    let plot = args.out_dir.join(format!("{stem}.svg"));
    write(&trace, &policy_sim::trace_jsonl(&outcome))?;
    let svg = policy_sim::svg(&outcome).map_err(CliError::internal)?;
    write(&plot, &svg)?;
    outln!("{}", policy_sim::summary(&outcome));
    outln!("trace: {}", trace.display());
    outln!("plot:  {}", plot.display());
    Ok(())
}
