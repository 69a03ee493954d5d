//! The binaries under test: `nlbctl`, `nlbd` and `nlb-sim`, each built by its own package.
//!
//! Cargo names a package's own binaries to its tests (`CARGO_BIN_EXE_*`), not another
//! package's, so the system tests find them where cargo puts them: the target directory the
//! test binary itself runs from (`target/<profile>/deps/<test>` → `target/<profile>/<bin>`).
//! `cargo test --workspace` builds them in the same run (each of the three packages has tests
//! of its own, which makes cargo build its binary). A binary that is missing or older than
//! the workspace's sources is built here with `cargo build`, with the features this crate was
//! built with, so `cargo test -p nlb-system-tests` alone also tests what the sources say.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

/// The package that builds each binary.
const PACKAGES: &[(&str, &str)] = &[
    ("nlbctl", "nlbctl"),
    ("nlbd", "nlbd"),
    ("nlb-sim", "nlb-sim"),
];

/// The workspace root (`tools/system-tests/` is two levels down).
pub fn workspace() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().nth(2).unwrap_or(here).to_path_buf()
}

/// `target/<profile>/`: where this test binary's cargo run put the binaries.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    // target/<profile>/deps/<test binary>
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("the test binary runs from target/<profile>/deps")
}

/// The newest modification time of the sources a binary is built from: every `.rs`, `.v`,
/// `.vh`, `.toml` and `.cpp` file of the workspace outside `target/` and `.git/`.
fn newest_source(dir: &Path, newest: &mut SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "docs" || name == "examples" {
            continue;
        }
        let Ok(meta) = e.metadata() else { continue };
        if meta.is_dir() {
            newest_source(&path, newest);
        } else if matches!(
            path.extension().and_then(|x| x.to_str()),
            Some("rs" | "v" | "vh" | "toml" | "cpp" | "h")
        ) {
            if let Ok(m) = meta.modified() {
                *newest = (*newest).max(m);
            }
        }
    }
}

/// The path of binary `name` (`nlbctl`, `nlbd` or `nlb-sim`), built now if it is missing or
/// older than the sources (checked once per test process).
pub fn bin(name: &str) -> &'static str {
    static BUILT: OnceLock<Mutex<Vec<(String, &'static str)>>> = OnceLock::new();
    let package = PACKAGES
        .iter()
        .find(|(b, _)| *b == name)
        .map(|(_, p)| *p)
        .unwrap_or_else(|| panic!("{name} is not one of the binaries under test"));
    let path = profile_dir().join(name);
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(b, _)| b == name) {
        return path;
    }
    let fresh = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .is_ok_and(|bin_time| {
            let mut newest = SystemTime::UNIX_EPOCH;
            newest_source(&workspace(), &mut newest);
            bin_time >= newest
        });
    if !fresh {
        let profile = profile_dir();
        let release = profile.file_name().is_some_and(|p| p == "release");
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .current_dir(workspace())
            .args(["build", "-q", "-p", package]);
        if release {
            cargo.arg("--release");
        }
        // The features this crate was built with (`rtl`: nlbctl's and nlb-sim's).
        if cfg!(feature = "rtl") && package != "nlbd" {
            cargo.args(["--features", "rtl"]);
        }
        eprintln!(
            "{} is missing or older than the sources: {cargo:?}",
            path.display()
        );
        let status = cargo
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo to build {name}: {e}"));
        assert!(status.success(), "cargo build -p {package} failed");
    }
    // One string per binary for the whole test process.
    let path: &'static str = Box::leak(path.display().to_string().into_boxed_str());
    built.push((name.to_string(), path));
    path
}
