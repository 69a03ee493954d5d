//! The front ends of nlb-offload: load-balancer configuration as its users write it, read into
//! one validated model with `file:line:column: field: message` errors.
//!
//! Two forms come in:
//!
//! - Google Cloud resources ([`gcp`]): our own YAML/JSON file of forwarding rules, target
//!   pools, health checks and backend services, or resources pasted from `gcloud ... describe` /
//!   `list` and the REST API, in one or several documents;
//! - Kubernetes objects ([`kube`]): `type: LoadBalancer` Services with their EndpointSlices and
//!   Nodes (manifests in a file or directory, or a `kubectl get -o yaml|json` stream), mapped the
//!   way GKE maps them.
//!
//! Both produce a [`Config`] ([`model`]); [`HealthState`] ([`health`]) is the other input of a
//! compile (`--health FILE`). The table compiler (`flowtable-compiler`) turns the two into
//! tables; nothing here knows about tables.
//!
//! In the order a caller meets it: [`read_sources`] → [`parse_sources`] (or [`load_config`] for
//! both, [`parse_config`] for one text) → [`Config`], with every problem in [`Diagnostics`].
#![deny(missing_docs)]

pub mod diag;
pub mod gcp;
pub mod health;
pub mod kube;
pub mod model;
pub mod policy;
mod resource;
mod tree;

pub use diag::{Diagnostic, Diagnostics, Pos};
pub use gcp::{check, parse_config};
pub use health::{BackendHealth, HealthState, PoolHealth};
pub use model::*;

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
    /// A table image was refused (the table compiler's image reader says why).
    #[error("{path}: {source}")]
    BadImage {
        /// The file.
        path: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
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
