//! Writes the checked-in files generated from `hw/regmap.toml`:
//! `hw/rtl/nlb_regmap.vh` and `docs/regmap.md`.
//!
//! `nlb-regmap-gen [--check]`: with `--check`, writes nothing and exits 1 when a file is stale.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let root = nlb_hw::hw_dir();
    let files = match nlb_hw::generated_files(&root) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut stale = false;
    for (path, text) in files {
        let shown = display(&root, &path);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == text {
            println!("up to date: {shown}");
            continue;
        }
        if check {
            eprintln!("stale: {shown}");
            stale = true;
        } else if let Err(e) = std::fs::write(&path, text) {
            eprintln!("error: cannot write {shown}: {e}");
            return ExitCode::from(2);
        } else {
            println!("wrote {shown}");
        }
    }
    if stale {
        eprintln!("regenerate with: {}", nlb_hw::codegen::REGEN_COMMAND);
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn display(root: &Path, path: &Path) -> String {
    let top = root.parent().unwrap_or(root);
    path.strip_prefix(top).unwrap_or(path).display().to_string()
}
