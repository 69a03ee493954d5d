//! flowtable-compiler: a validated load-balancer configuration (from the front ends of
//! `nlb-config`) to the flow tables the NIC executes.
//!
//! The pipeline is resolve (ids, health, failover) → place (policy, weights) → build tables →
//! image:
//!
//! ```no_run
//! use flowtable_compiler::{compile, CompileOptions, HealthState, Image};
//! let config = nlb_config::load_config("examples/web.yaml".as_ref())?;
//! let compiled = compile(&config, &HealthState::default(), &CompileOptions::default())?;
//! let bytes = compiled.image(1).write()?;
//! let image = Image::read(&bytes)?;
//! assert_eq!(image.tables, compiled.tables);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The public API, in the order a caller meets it:
//!
//! - [`compile_file`]: `nlb_config::load_config` (read and validate a file or Kubernetes
//!   manifests into a [`Config`]) and [`compile()`] in one go, reporting syntax, schema,
//!   relation and capacity problems together.
//! - [`HealthState`]: which backends are healthy, with probe weights (`--health FILE`).
//! - [`compile()`] with [`CompileOptions`] (the capacity profile) → [`Compiled`]: one
//!   [`nlb_hw::Tables`] bank, [`nlb_hw::NicSettings`], [`Symbols`] (names by id) and a
//!   [`PoolReport`] per pool saying why it serves what it serves.
//! - [`Compiled::recompile_pool`] / [`Compiled::apply_health`]: recompute after a health or
//!   weight change, returning the (table, index) entries that changed for a delta load.
//! - [`Compiled::image`] → [`Image`]; [`Image::write`] / [`Image::read`] / [`Image::load`]:
//!   the versioned, CRC-checked table image (`docs/image-format.md`).
//! - [`explain()`]: the lookups of one [`Flow`] over a table bank, as the reference semantics
//!   (`nlb-reference`) takes and reports them, in words;
//!   [`maglev_movement`]: how many flows a change moves, per pool.
//!
//! Errors ([`Error`]) are typed: [`Error::Invalid`] carries every [`Diagnostic`], each
//! printed as `file:line:column: field.path: message (valid: ...)`; [`Error::exit_code`] is
//! 1 for user errors and 2 for internal ones.
#![deny(missing_docs)]

pub mod compile;
pub mod diff;
pub mod explain;
pub mod image;
pub mod maglev;
pub mod policy;
pub mod symbols;

pub use compile::{
    check_capacity, compile, compile_after, compile_checked, CompileOptions, Compiled, LiveLoad,
    PoolReport, Rebalanced, ServiceGroup, DEFAULT_DEADBAND, DEFAULT_REFILL_BUDGET,
};
pub use diff::{maglev_movement, PoolMovement};
pub use explain::{
    explain, explain_compiled, explain_service, Explanation, Flow, Fragment, ServiceExplanation,
    ServiceGroupExplanation,
};
pub use image::{Image, ImageError, ImageHeader};
pub use symbols::{PoolKind, PoolSymbol, Symbols};
// The compiler's inputs and errors are the front ends' (`nlb-config`): a caller of `compile`
// names them from here.
pub use nlb_config::model::*;
pub use nlb_config::{BackendHealth, Diagnostic, Diagnostics, Error, HealthState, Pos};

use std::path::Path;

/// Reads, validates and compiles a configuration file in one go, reporting every problem of
/// the file at once: syntax, schema, relations and the profile's capacity.
pub fn compile_file(
    path: &Path,
    health: &HealthState,
    options: &CompileOptions,
) -> Result<(Config, Compiled), Error> {
    compile_file_after(path, health, options, &Symbols::default())
}

/// [`compile_file`] as the successor of a compile whose names by id are `previous` (see
/// [`compile_after`]): rules and backends that stay keep their ids.
pub fn compile_file_after(
    path: &Path,
    health: &HealthState,
    options: &CompileOptions,
    previous: &Symbols,
) -> Result<(Config, Compiled), Error> {
    let (config, mut diags) = nlb_config::parse_sources(&nlb_config::read_sources(path)?);
    if !diags.is_empty() {
        diags.extend(check_capacity(&config, options.profile));
        diags.sort();
        return Err(Error::Invalid(diags));
    }
    let mut names = health.check_names(&config);
    if !names.is_empty() {
        names.sort();
        return Err(Error::Invalid(names));
    }
    // parse_config has checked the relations already: they were found clean above.
    let compiled =
        compile::compile_checked(&config, health, options, Diagnostics::new(), previous)?;
    Ok((config, compiled))
}
