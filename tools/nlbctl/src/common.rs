//! What the subcommands share: errors with exit codes, profile and health options, inputs.

use flowtable_compiler::{
    compile_after, compile_file_after, CompileOptions, Compiled, Error, HealthState, Image, Symbols,
};
// Imported, not written `nlb_config::kube::Source` in place: rustc then resolves `kube`
// as a crate name too (nlbd's `kube`), which links it into nlbctl (tools/system-tests/tests/linking.rs).
use nlb_config::kube::Source as ManifestSource;
use nlb_hw::Profile;
use std::path::{Path, PathBuf};

/// A message for stderr and the exit status that goes with it.
#[derive(Debug)]
pub struct CliError {
    /// 1 user error, 2 internal error.
    pub code: u8,
    /// What to print.
    pub message: String,
}

impl CliError {
    /// A user error (exit status 1).
    pub fn user(message: impl Into<String>) -> Self {
        CliError {
            code: 1,
            message: message.into(),
        }
    }

    /// An internal error (exit status 2).
    pub fn internal(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
        }
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        let code = if e.exit_code() == 1 { 1 } else { 2 };
        let message = match &e {
            Error::Invalid(d) => {
                let n = d.len();
                format!(
                    "{e}\n{n} problem{} found; no image written",
                    if n == 1 { "" } else { "s" }
                )
            }
            _ => format!("error: {e}"),
        };
        CliError { code, message }
    }
}

/// Capacity profile by name, for `--profile`.
pub fn profile(name: &str) -> Result<&'static Profile, CliError> {
    Profile::by_name(name).ok_or_else(|| {
        CliError::user(format!(
            "error: unknown profile `{name}` (valid: {})",
            Profile::names().join(", ")
        ))
    })
}

/// Health state from `--health`, or everyone healthy.
pub fn health(path: Option<&Path>) -> Result<HealthState, CliError> {
    match path {
        Some(p) => Ok(HealthState::load(p)?),
        None => Ok(HealthState::new()),
    }
}

/// Compiles a configuration file (or Kubernetes manifests: a file, a directory or `-`); rules
/// and backends named in `previous` keep their ids. The configuration read comes back too.
pub fn compile_config_with(
    path: &Path,
    health: &HealthState,
    profile: &'static Profile,
    previous: &Symbols,
) -> Result<(flowtable_compiler::Config, Compiled), CliError> {
    Ok(compile_file_after(
        path,
        health,
        &CompileOptions { profile },
        previous,
    )?)
}

/// The names by id of a table image (`--previous IMAGE`), whose ids a compile keeps.
pub fn previous_ids(path: Option<&Path>) -> Result<Symbols, CliError> {
    let Some(path) = path else {
        return Ok(Symbols::default());
    };
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::user(format!("error: cannot read {}: {e}", path.display())))?;
    let image = Image::read(&bytes).map_err(|e| {
        CliError::user(format!(
            "error: {}: {e} (--previous takes a table image written by `nlbctl compile`)",
            path.display()
        ))
    })?;
    Ok(image.symbols)
}

/// An input that is either a table image (recognised by its magic) or a configuration.
pub enum Input {
    /// A decoded image.
    Image(Box<Image>),
    /// A compiled configuration.
    Compiled(Box<Compiled>),
}

impl Input {
    /// Reads `path` as an image if it starts with the image magic, else compiles it.
    pub fn open(
        path: &PathBuf,
        health: &HealthState,
        profile: &'static Profile,
    ) -> Result<Input, CliError> {
        Self::open_after(path, health, profile, |_| Symbols::default())
    }

    /// [`Input::open`], compiling a configuration as the successor of the ids `previous`
    /// gives for it (for example those a device serves).
    pub fn open_after(
        path: &PathBuf,
        health: &HealthState,
        profile: &'static Profile,
        previous: impl FnOnce(&flowtable_compiler::Config) -> Symbols,
    ) -> Result<Input, CliError> {
        if path.as_os_str() == "-" || path.is_dir() {
            // Kubernetes manifests from standard input or a directory.
            let sources = nlb_config::read_sources(path)?;
            let (config, diags) = nlb_config::parse_sources(&sources);
            if !diags.is_empty() {
                return Err(Error::Invalid(diags).into());
            }
            let ids = previous(&config);
            let compiled = compile_after(&config, health, &CompileOptions { profile }, &ids)?;
            return Ok(Input::Compiled(Box::new(compiled)));
        }
        let bytes = std::fs::read(path)
            .map_err(|e| CliError::user(format!("error: cannot read {}: {e}", path.display())))?;
        if bytes.starts_with(&flowtable_compiler::image::MAGIC) {
            let img = Image::read(&bytes)
                .map_err(|e| CliError::user(format!("error: {}: {e}", path.display())))?;
            return Ok(Input::Image(Box::new(img)));
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            CliError::user(format!(
                "error: {} is neither a table image nor a text configuration",
                path.display()
            ))
        })?;
        let (config, diags) = nlb_config::parse_sources(&[ManifestSource {
            name: path.display().to_string(),
            text,
        }]);
        if !diags.is_empty() {
            return Err(Error::Invalid(diags).into());
        }
        let ids = previous(&config);
        let compiled = compile_after(&config, health, &CompileOptions { profile }, &ids)?;
        Ok(Input::Compiled(Box::new(compiled)))
    }

    /// Tables and names.
    pub fn parts(&self) -> (&nlb_hw::Tables, &flowtable_compiler::Symbols) {
        match self {
            Input::Image(i) => (&i.tables, &i.symbols),
            Input::Compiled(c) => (&c.tables, &c.symbols),
        }
    }
}

/// Writes `bytes` to `path` atomically (a temporary file renamed over it).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CliError::user(format!("error: cannot write {}: {e}", path.display()))
        })
}

/// `1.2 KiB`-style sizes.
pub fn human_bytes(n: usize) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

/// JSON to stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let s = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
    outln!("{s}");
    Ok(())
}

/// How a read-only command prints its answer: `-o text` (the default, for people) or
/// `-o json` (for scripts; `--json` is the older spelling and stays).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Output {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT", default_value_t = Format::Text)]
    format: Format,
    /// Print JSON (the same as `-o json`).
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

/// An output format.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Lines and tables for people.
    Text,
    /// One JSON document.
    Json,
}

impl Output {
    /// Whether JSON was asked for.
    pub fn json(&self) -> bool {
        self.json || self.format == Format::Json
    }
}

/// Where the fleet's store is: the etcd endpoints, their TLS options and the key prefix (the
/// options every fleet command takes).
#[derive(clap::Args, Debug)]
pub struct FleetStoreArgs {
    /// etcd endpoints: HOST:PORT, http://HOST:PORT or (with --etcd-cacert) https://HOST:PORT,
    /// comma-separated.
    #[arg(long, value_name = "ENDPOINTS")]
    pub etcd: String,
    #[command(flatten)]
    pub etcd_options: nlb_control::etcd::EtcdArgs,
    /// Prefix of the fleet's keys in etcd.
    #[arg(long, value_name = "P", default_value = nlb_control::fleet::DEFAULT_PREFIX)]
    pub prefix: String,
}

impl FleetStoreArgs {
    /// The store (nothing is contacted yet); a bad endpoint, TLS file or prefix is a user
    /// error.
    pub fn store(&self) -> Result<nlb_control::fleet::Store, CliError> {
        let settings = self
            .etcd_options
            .settings(&self.etcd)
            .map_err(|e| CliError::user(format!("error: {e}")))?;
        let keys = nlb_control::fleet::Keys::new(&self.prefix)
            .map_err(|e| CliError::user(format!("error: {e}")))?;
        Ok(nlb_control::fleet::Store::new(settings, keys))
    }
}
