//! The cycle driver: agents that drive and sample a model's ports once per clock, with random
//! idle cycles and back-pressure from a seeded generator.

use crate::error::VerifError;
use crate::verilated::Verilated;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Something that drives some ports of a model and watches others, once per clock.
///
/// Per cycle the bench calls every agent's [`Agent::drive`], settles the model, calls every
/// agent's [`Agent::observe`] (handshakes seen there complete at the coming edge), then
/// clocks the model.
pub trait Agent {
    /// Sets the inputs this agent owns for the coming clock edge.
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError>;
    /// Samples outputs after the model settled, before the edge.
    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError>;
}

/// A model plus the random generator its agents draw timing from.
#[derive(Debug)]
pub struct Bench {
    /// The model.
    pub sim: Verilated,
    /// The generator agents use (seeded; see [`Bench::seed`]).
    pub rng: StdRng,
    seed: u64,
}

impl Bench {
    /// A bench around `sim`, with a generator seeded by `seed`.
    pub fn new(sim: Verilated, seed: u64) -> Bench {
        Bench {
            sim,
            rng: StdRng::seed_from_u64(seed),
            seed,
        }
    }

    /// The seed: rerun with `NLB_SEED=<seed>` to replay a failure.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// One clock with these agents.
    pub fn step(&mut self, agents: &mut [&mut dyn Agent]) -> Result<(), VerifError> {
        for a in agents.iter_mut() {
            a.drive(&mut self.sim, &mut self.rng)?;
        }
        self.sim.eval();
        for a in agents.iter_mut() {
            a.observe(&mut self.sim)?;
        }
        self.sim.tick();
        Ok(())
    }

    /// One clock with `first` and `others` (for agents that step the bench themselves).
    pub fn step_with(
        &mut self,
        first: &mut dyn Agent,
        others: &mut [&mut dyn Agent],
    ) -> Result<(), VerifError> {
        first.drive(&mut self.sim, &mut self.rng)?;
        for a in others.iter_mut() {
            a.drive(&mut self.sim, &mut self.rng)?;
        }
        self.sim.eval();
        first.observe(&mut self.sim)?;
        for a in others.iter_mut() {
            a.observe(&mut self.sim)?;
        }
        self.sim.tick();
        Ok(())
    }
}

/// The seed for a randomised test: `NLB_SEED` (decimal or 0x-hex) when set, else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("NLB_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            }
        })
        .unwrap_or(default)
}

/// Where a test writes its waveform: `$NLB_WAVE_DIR` or `target/verif-waves`, file
/// `<name>-<seed>.vcd`.
pub fn wave_path(name: &str, seed: u64) -> std::path::PathBuf {
    let dir = std::env::var_os("NLB_WAVE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            crate_dir
                .parent()
                .unwrap_or(crate_dir)
                .join("target/verif-waves")
        });
    dir.join(format!("{name}-{seed:#x}.vcd"))
}

/// Whether every test should trace (`NLB_TRACE=1`), not only replays of failures.
pub fn trace_always() -> bool {
    std::env::var("NLB_TRACE").is_ok_and(|v| v == "1")
}
