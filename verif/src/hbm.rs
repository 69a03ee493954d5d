//! The HBM model under `nlb_top` (`verif/hbm/nlb_hbm_model.v`, Verilated with the pipeline as
//! the `top_hbm` model): its configuration and its statistics.
//!
//! The model is behavioural Verilog, not Rust, so that it runs inside the Verilated model at
//! the model's speed (no call across the FFI per channel per clock). docs/verification.md
//! ("The HBM model") says what it models and what it does not.

use crate::error::VerifError;
use crate::verilated::Verilated;

/// Channels of the connection table in `top_hbm`.
pub const CT_CHANNELS: usize = 16;
/// Channels of the Maglev slots in `top_hbm`.
pub const MG_CHANNELS: usize = 4;
/// Bytes per beat of every channel.
pub const BEAT_BYTES: u64 = 32;
/// Bins of the latency histograms, 4 clocks each (the last holds 1020 clocks and more).
pub const HIST_BINS: usize = 256;
/// Clocks per histogram bin.
pub const HIST_BIN_CLOCKS: u64 = 4;

/// How the model behaves (read while the model is in reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HbmConfig {
    /// Seed of the model's generators (the Maglev model uses seed + 1).
    pub seed: u32,
    /// Least read latency, clocks.
    pub lat_min: u16,
    /// A uniform draw in 0..spread clocks is added to every read.
    pub lat_spread: u16,
    /// Reads (per mille) that also get the tail.
    pub tail_per_mille: u16,
    /// The tail: a uniform draw in 0..tail_max clocks more.
    pub tail_max: u16,
    /// Clocks between two refreshes of a channel (0: none).
    pub ref_period: u16,
    /// Clocks a refresh stops a channel.
    pub ref_stall: u16,
    /// Beats per clock a channel sends, per mille (1000: one a clock).
    pub bw_per_mille: u16,
    /// Clocks (per mille) a channel refuses a request at random.
    pub arready_drop_per_mille: u16,
}

impl HbmConfig {
    /// The HBM the tests run with: 60-120 clocks for most reads, 3 % of them up to 120
    /// clocks more (a tail to 240), a refresh every 1,257 clocks (3.9 µs at 322 MHz) stopping a
    /// channel for 40, a beat per clock per channel at most (256 bits at 322 MHz: 10.3 GB/s of
    /// a pseudo-channel's 14.4), 2 % of requests refused at random.
    pub fn realistic(seed: u32) -> HbmConfig {
        HbmConfig {
            seed,
            lat_min: 60,
            lat_spread: 61,
            tail_per_mille: 30,
            tail_max: 121,
            ref_period: 1257,
            ref_stall: 40,
            bw_per_mille: 1000,
            arready_drop_per_mille: 20,
        }
    }

    /// A memory answering in 2-5 clocks, without refresh or refusals: for loading a test's
    /// tables through the registers (a host operation whose speed no test looks at), before
    /// its traffic runs on [`HbmConfig::realistic`].
    pub fn quick(seed: u32) -> HbmConfig {
        HbmConfig {
            seed,
            lat_min: 2,
            lat_spread: 4,
            tail_per_mille: 0,
            tail_max: 0,
            ref_period: 0,
            ref_stall: 0,
            bw_per_mille: 1000,
            arready_drop_per_mille: 0,
        }
    }

    /// Writes the configuration ports of a `top_hbm` model: the seed is read at reset, the
    /// rest in every clock (so a test may change the timing between phases).
    pub fn apply(&self, sim: &mut Verilated) -> Result<(), VerifError> {
        let fields: [(&str, u64); 9] = [
            ("hbm_cfg_seed", u64::from(self.seed)),
            ("hbm_cfg_lat_min", u64::from(self.lat_min)),
            ("hbm_cfg_lat_spread", u64::from(self.lat_spread)),
            ("hbm_cfg_tail_per_mille", u64::from(self.tail_per_mille)),
            ("hbm_cfg_tail_max", u64::from(self.tail_max)),
            ("hbm_cfg_ref_period", u64::from(self.ref_period)),
            ("hbm_cfg_ref_stall", u64::from(self.ref_stall)),
            ("hbm_cfg_bw_per_mille", u64::from(self.bw_per_mille)),
            (
                "hbm_cfg_arready_drop_per_mille",
                u64::from(self.arready_drop_per_mille),
            ),
        ];
        for (name, value) in fields {
            let p = sim.port(name)?;
            sim.set_u64(p, value)?;
        }
        Ok(())
    }
}

/// What one table's model counted since reset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HbmTableStats {
    /// Reads taken.
    pub reads: u64,
    /// Beats sent, per channel.
    pub beats: Vec<u64>,
    /// Sum of the read latencies (request taken to last beat taken), clocks.
    pub lat_sum: u64,
    /// The longest, clocks.
    pub lat_max: u64,
    /// Reads per latency bin of [`HIST_BIN_CLOCKS`] clocks.
    pub hist: Vec<u64>,
}

impl HbmTableStats {
    /// Bytes read.
    pub fn bytes(&self) -> u64 {
        self.beats.iter().sum::<u64>() * BEAT_BYTES
    }

    /// What was counted after `before` (a snapshot of the same table taken earlier): reads,
    /// beats, latency sum and histogram are differences; `lat_max` is the upper edge of the
    /// highest latency bin the interval's reads fell in (the model keeps one maximum since
    /// reset).
    pub fn since(&self, before: &HbmTableStats) -> HbmTableStats {
        let diff = |a: &[u64], b: &[u64]| -> Vec<u64> {
            a.iter()
                .zip(b.iter().chain(std::iter::repeat(&0)))
                .map(|(x, y)| x - y)
                .collect()
        };
        let hist = diff(&self.hist, &before.hist);
        let lat_max = hist
            .iter()
            .rposition(|&n| n > 0)
            .map_or(0, |i| (i as u64 + 1) * HIST_BIN_CLOCKS);
        HbmTableStats {
            reads: self.reads - before.reads,
            beats: diff(&self.beats, &before.beats),
            lat_sum: self.lat_sum - before.lat_sum,
            lat_max,
            hist,
        }
    }

    /// The latency below which a fraction `q` of the reads finished (upper edge of its bin).
    pub fn percentile(&self, q: f64) -> u64 {
        let total: u64 = self.hist.iter().sum();
        if total == 0 {
            return 0;
        }
        let want = (q * total as f64).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= want {
                return (i as u64 + 1) * HIST_BIN_CLOCKS;
            }
        }
        HIST_BINS as u64 * HIST_BIN_CLOCKS
    }
}

/// Both tables' statistics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HbmStats {
    /// The connection table's channels.
    pub ct: HbmTableStats,
    /// The Maglev slots' channels.
    pub mg: HbmTableStats,
}

/// Reads the statistics ports of a `top_hbm` model (the histograms bin by bin).
pub fn stats(sim: &mut Verilated) -> Result<HbmStats, VerifError> {
    let mut out = HbmStats::default();
    for (t, channels) in [("ct", CT_CHANNELS), ("mg", MG_CHANNELS)] {
        let s = HbmTableStats {
            reads: {
                let p = sim.port(&format!("hbm_{t}_reads"))?;
                sim.get_u64(p)?
            },
            beats: {
                let p = sim.port(&format!("hbm_{t}_beats"))?;
                let w = sim.get_words(p)?;
                w.iter().take(channels).map(|&x| u64::from(x)).collect()
            },
            lat_sum: {
                let p = sim.port(&format!("hbm_{t}_lat_sum"))?;
                sim.get_u64(p)?
            },
            lat_max: {
                let p = sim.port(&format!("hbm_{t}_lat_max"))?;
                sim.get_u64(p)?
            },
            hist: Vec::new(),
        };
        if t == "ct" {
            out.ct = s;
        } else {
            out.mg = s;
        }
    }
    let sel = sim.port("hbm_hist_sel")?;
    let ct = sim.port("hbm_ct_hist_count")?;
    let mg = sim.port("hbm_mg_hist_count")?;
    for bin in 0..HIST_BINS {
        sim.set_u64(sel, bin as u64)?;
        sim.eval();
        out.ct.hist.push(sim.get_u64(ct)?);
        out.mg.hist.push(sim.get_u64(mg)?);
    }
    Ok(out)
}
