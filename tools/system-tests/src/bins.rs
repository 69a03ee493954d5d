//! The binaries under test: `nlbctl`, `nlbd` and `nlb-sim`, each built by its own package.
//!
//! Cargo names a package's own binaries to its tests (`CARGO_BIN_EXE_*`), not another
//! package's, so the system tests find them where cargo puts them: the target directory the
//! test binary itself runs from (`target/<profile>/deps/<test>` → `target/<profile>/<bin>`).
//! `cargo test --workspace` builds them in the same run (each of the three packages has tests
//! of its own, which makes cargo build its binary). A binary that is missing, or older than a
//! source file cargo recorded it was built from (its `<bin>.d` dependency file), fails the
//! test with the command that builds it: testing a stale binary would test old code.

use std::path::{Path, PathBuf};
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

/// The source files cargo's dependency file `dep_file` (`target/<profile>/<bin>.d`, written
/// with every build: `<output>: <source> <source> ...`, spaces in names escaped) lists.
fn sources(dep_file: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dep_file) else {
        return Vec::new();
    };
    // The first line names the output and its sources; the lines after it repeat each source
    // as an empty rule.
    let first = text.lines().next().unwrap_or_default();
    let Some((_, deps)) = first.split_once(": ") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = deps.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| *n == ' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' | '\n' => {
                if !current.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(PathBuf::from(current));
    }
    out
}

/// Why `binary` cannot be tested as it is, if it cannot: missing, or older than a source.
fn stale(binary: &Path) -> Option<String> {
    let built = match std::fs::metadata(binary).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(_) => return Some(format!("{} is not built", binary.display())),
    };
    let dep_file = binary.with_extension("d");
    let newer = sources(&dep_file).into_iter().find(|s| {
        std::fs::metadata(s)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > built && t > SystemTime::UNIX_EPOCH)
    });
    newer.map(|s| format!("{} is older than {}", binary.display(), s.display()))
}

/// The path of binary `name` (`nlbctl`, `nlbd` or `nlb-sim`), checked once per test process
/// to be built and up to date.
pub fn bin(name: &str) -> &'static str {
    static CHECKED: OnceLock<Mutex<Vec<(String, &'static str)>>> = OnceLock::new();
    let package = PACKAGES
        .iter()
        .find(|(b, _)| *b == name)
        .map(|(_, p)| *p)
        .unwrap_or_else(|| panic!("{name} is not one of the binaries under test"));
    let checked = CHECKED.get_or_init(|| Mutex::new(Vec::new()));
    let mut checked = checked.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = checked.iter().find(|(b, _)| b == name) {
        return path;
    }
    let path = profile_dir().join(name);
    if let Some(why) = stale(&path) {
        let features = if cfg!(feature = "rtl") && package != "nlbd" {
            " --features rtl"
        } else {
            ""
        };
        panic!(
            "{why}: build it first (`cargo build -p {package}{features}`), or run the tests \
             with `cargo test --workspace`, which builds every binary"
        );
    }
    // One string per binary for the whole test process.
    let path: &'static str = Box::leak(path.display().to_string().into_boxed_str());
    checked.push((name.to_string(), path));
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_file_lists_its_sources_with_escaped_spaces() {
        let dir = std::env::temp_dir().join(format!("nlb-bins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let d = dir.join("x.d");
        std::fs::write(
            &d,
            "/t/x: /w/src/main.rs /w/my\\ dir/lib.rs\n\n/w/src/a.rs:\n",
        )
        .expect("write");
        let s = sources(&d);
        assert_eq!(s[0], PathBuf::from("/w/src/main.rs"));
        assert_eq!(s[1], PathBuf::from("/w/my dir/lib.rs"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_binary_is_stale() {
        assert!(stale(Path::new("/nonexistent/nlbd")).is_some());
    }
}
