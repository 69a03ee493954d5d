//! flowtable-compiler: Google-Cloud-shaped load-balancer configuration to the flow tables the
//! NIC executes.
//!
//! The pipeline is parse → validate → resolve (ids, health, failover) → build tables →
//! image:
//!
//! ```no_run
//! use flowtable_compiler::{compile, load_config, CompileOptions, HealthState, Image};
//! let config = load_config("examples/web.yaml".as_ref())?;
//! let compiled = compile(&config, &HealthState::default(), &CompileOptions::default())?;
//! let bytes = compiled.image(1).write()?;
//! let image = Image::read(&bytes)?;
//! assert_eq!(image.tables, compiled.tables);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The public API, in the order a caller meets it:
//!
//! - [`load_config`] / [`parse_config`]: read and validate a file (YAML or JSON: our own
//!   sections, or resources pasted from `gcloud ... describe`/`list` and the REST API, in one
//!   or several documents) into a [`Config`]; [`compile_file`] does that and [`compile()`] in one go, reporting syntax,
//!   schema, relation and capacity problems together.
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
pub mod config;
pub mod diag;
pub mod diff;
pub mod explain;
pub mod health;
pub mod image;
pub mod kube;
pub mod maglev;
pub mod model;
pub mod policy;
mod resource;
pub mod symbols;
mod tree;

pub use compile::{
    check_capacity, compile, compile_after, compile_checked, CompileOptions, Compiled, LiveLoad,
    PoolReport, Rebalanced, ServiceGroup, DEFAULT_DEADBAND, DEFAULT_REFILL_BUDGET,
};
pub use config::{check, parse_config};
pub use diag::{Diagnostic, Diagnostics, Pos};
pub use diff::{maglev_movement, PoolMovement};
pub use explain::{
    explain, explain_compiled, explain_service, Explanation, Flow, Fragment, ServiceExplanation,
    ServiceGroupExplanation,
};
pub use health::{BackendHealth, HealthState};
pub use image::{Image, ImageError, ImageHeader};
pub use model::*;
pub use symbols::{PoolKind, PoolSymbol, Symbols};

use std::path::Path;

/// What went wrong, and whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is wrong: every problem, sorted by position.
    #[error("{0}")]
    Invalid(Diagnostics),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A table image was refused.
    #[error("{path}: {source}")]
    BadImage {
        /// The file.
        path: String,
        /// Why.
        source: Box<ImageError>,
    },
    /// A bug: the compiler produced something the tables cannot hold.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Exit status for a command-line tool: 1 for user errors, 2 for internal ones.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid(_) | Error::Io { .. } | Error::BadImage { .. } => 1,
            Error::Internal(_) => 2,
        }
    }
}

impl From<Diagnostics> for Error {
    fn from(d: Diagnostics) -> Self {
        Error::Invalid(d)
    }
}

/// Reads a file as text, as a user error when it cannot be read.
pub fn read_text(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The inputs `path` names: the file itself; every `.yaml`, `.yml` and `.json` file of a
/// directory, in name order (Kubernetes manifests); or standard input for `-` (a `kubectl get
/// -o yaml|json` stream).
pub fn read_sources(path: &Path) -> Result<Vec<kube::Source>, Error> {
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(io)?;
        return Ok(vec![kube::Source {
            name: "-".into(),
            text,
        }]);
    }
    if path.is_dir() {
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            })
            .collect();
        files.sort();
        return files
            .iter()
            .map(|p| {
                Ok(kube::Source {
                    name: p.display().to_string(),
                    text: read_text(p)?,
                })
            })
            .collect();
    }
    Ok(vec![kube::Source {
        name: path.display().to_string(),
        text: read_text(path)?,
    }])
}

/// Parses inputs into one configuration: Kubernetes manifests when any document has an
/// `apiVersion` (with an optional project document of `nic` and `kubernetes` sections, see
/// [`kube`]), otherwise one configuration file of our own form ([`parse_config`]).
pub fn parse_sources(sources: &[kube::Source]) -> (Config, Diagnostics) {
    let (config, diags, _) = parse_sources_timed(sources);
    (config, diags)
}

/// Time taken by the phases of [`parse_sources`] (`benches/kube_scale.rs` reports them).
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseTimes {
    /// YAML/JSON text into document trees.
    pub read: std::time::Duration,
    /// Kubernetes objects onto the model (zero for a configuration of our own form).
    pub map: std::time::Duration,
    /// The relations check of the model.
    pub check: std::time::Duration,
}

/// [`parse_sources`], with the time each phase took.
pub fn parse_sources_timed(sources: &[kube::Source]) -> (Config, Diagnostics, ParseTimes) {
    let mut times = ParseTimes::default();
    let start = std::time::Instant::now();
    let mut trees = Vec::new();
    let mut diags = Diagnostics::new();
    for s in sources {
        match tree::parse_stream(&s.name, &s.text) {
            Ok(docs) => trees.push((s.name.clone(), docs)),
            Err(d) => diags.extend(d),
        }
    }
    let manifests = trees
        .iter()
        .any(|(_, docs)| docs.iter().any(kube::is_manifest));
    if !manifests && sources.len() == 1 && diags.is_empty() {
        let (config, diags) = parse_config(&sources[0].name, &sources[0].text);
        times.read = start.elapsed();
        return (config, diags, times);
    }
    if !manifests && diags.is_empty() {
        let file = sources.first().map(|s| s.name.as_str()).unwrap_or("-");
        diags.push(
            file,
            Pos::new(0, 0),
            "",
            "several files without Kubernetes manifests: a directory or stream is read as Kubernetes manifests (documents with `apiVersion` and `kind`)",
            Some("one configuration file, or Kubernetes manifests".into()),
        );
    }
    times.read = start.elapsed();
    let start = std::time::Instant::now();
    let (config, more) = kube::parse(&trees);
    diags.extend(more);
    // A large stream's trees (millions of nodes) are freed on a thread of their own while
    // the relations are checked.
    // (Should no thread start, the closure and the trees are dropped here.)
    if sources.iter().map(|s| s.text.len()).sum::<usize>() >= 1 << 20 {
        let _ = std::thread::Builder::new().spawn(move || drop(trees));
    }
    times.map = start.elapsed();
    let start = std::time::Instant::now();
    if diags.is_empty() {
        diags.extend(check(&config));
    }
    diags.sort();
    times.check = start.elapsed();
    (config, diags, times)
}

/// Reads and validates a configuration file (YAML, or JSON by extension or first character),
/// or Kubernetes manifests (a file, a directory, or `-` for standard input).
/// Capacity is checked later, by [`compile()`], against a profile.
pub fn load_config(path: &Path) -> Result<Config, Error> {
    let (config, diags) = parse_sources(&read_sources(path)?);
    diags.into_result()?;
    Ok(config)
}

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
    let (config, mut diags) = parse_sources(&read_sources(path)?);
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
