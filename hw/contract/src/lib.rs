//! The single HW/SW contract of nlb-offload.
//!
//! Everything here is generated from `hw/regmap.toml` at build time (register offsets,
//! enumerations, table-entry layouts with typed pack/unpack, hash constants), plus the flow hash
//! itself. The RTL gets the same definitions through the generated `hw/rtl/nlb_regmap.vh`.
#![deny(missing_docs)]

pub mod codegen;
pub mod ct_words;
pub mod hash;
pub mod layout;
pub mod model;
pub mod tables;

#[allow(clippy::all, clippy::pedantic)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/regmap.rs"));
}

pub use generated::{
    blocks, enums, flash_def, hash_def, layouts, rings, BLOCK_TYPE_PREFIX, DATA_WIDTH,
    DESIGN_VERSION, PROFILES, REGMAP_VERSION,
};
pub use hash::{flow_hash, table_index, FlowKey};
pub use layout::{LayoutError, RegField};
pub use tables::{NicSettings, TableError, Tables, NIC_REGISTERS};

use std::path::{Path, PathBuf};

/// The regmap source, as compiled into this crate.
pub const REGMAP_TOML: &str = include_str!("../../regmap.toml");

/// A capacity profile: every table depth of one build (`[[profiles]]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Name (`sim`, `u280`).
    pub name: &'static str,
    /// Identifier reported by the firmware-ID block.
    pub id: u32,
    /// What the profile is for.
    pub doc: &'static str,
    /// VIP table buckets.
    pub vip_buckets: u32,
    /// VIP entries per bucket.
    pub vip_ways: u32,
    /// Rule descriptors.
    pub rules: u32,
    /// Pool descriptors.
    pub pools: u32,
    /// Maglev slot memory.
    pub maglev_slots: u32,
    /// Backend entries.
    pub backends: u32,
    /// Connection table buckets.
    pub ct_buckets: u32,
    /// Connection entries per bucket.
    pub ct_ways: u32,
    /// Entries of each punt/learn/inject queue.
    pub queue_depth: u32,
    /// HBM pseudo-channels of the connection table (0: on chip).
    pub ct_channels: u32,
    /// HBM pseudo-channels of the Maglev slots (0: on chip).
    pub maglev_channels: u32,
    /// Packets each memory stage holds (table reads in flight per table).
    pub mem_slots: u32,
}

impl Profile {
    /// Looks a profile up by name.
    pub fn by_name(name: &str) -> Option<&'static Profile> {
        PROFILES.iter().find(|p| p.name == name)
    }

    /// Looks a profile up by the id the firmware-ID block reports.
    pub fn by_id(id: u32) -> Option<&'static Profile> {
        PROFILES.iter().find(|p| p.id == id)
    }

    /// Names of all profiles, for error messages.
    pub fn names() -> Vec<&'static str> {
        PROFILES.iter().map(|p| p.name).collect()
    }

    /// VIP table entries (buckets × ways).
    pub fn vip_entries(&self) -> u32 {
        self.vip_buckets * self.vip_ways
    }

    /// Connection table entries (buckets × ways).
    pub fn ct_entries(&self) -> u32 {
        self.ct_buckets * self.ct_ways
    }
}

/// The hardware folder of this checkout (`hw/`: `regmap.toml`, `rtl/`), found from where this
/// crate was built (`hw/contract/`); for the generator and the staleness tests.
pub fn hw_dir() -> PathBuf {
    let contract = Path::new(env!("CARGO_MANIFEST_DIR"));
    contract.parent().unwrap_or(contract).to_path_buf()
}

/// The checked-in files generated from the regmap: (path, expected contents).
///
/// `hw_dir` is the hardware folder (`hw/`, the parent of this crate's `hw/contract/`).
pub fn generated_files(hw_dir: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let text = std::fs::read_to_string(hw_dir.join("regmap.toml"))
        .map_err(|e| format!("cannot read {}: {e}", hw_dir.join("regmap.toml").display()))?;
    let map = model::Regmap::parse(&text)?;
    let top = hw_dir.parent().unwrap_or(hw_dir);
    Ok(vec![
        (hw_dir.join("rtl/nlb_regmap.vh"), codegen::verilog(&map)),
        (top.join("docs/regmap.md"), codegen::markdown(&map)),
    ])
}
