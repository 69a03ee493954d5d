//! `docs/architecture.md` draws the crate graph as a table: each workspace crate, its path and
//! the workspace crates it depends on. This test reads the manifests and fails when the two
//! disagree, so the graph a newcomer reads is the one cargo builds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ sits in the workspace")
        .to_path_buf()
}

/// The workspace members, from the root manifest's `members = [...]` line.
fn members(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("root Cargo.toml");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// A member's package name and its workspace dependencies (`path = ...` entries of
/// `[dependencies]`; optional ones marked), read line by line.
fn manifest(root: &Path, member: &str) -> (String, BTreeSet<(String, bool)>) {
    let file = root.join(member).join("Cargo.toml");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    let mut section = String::new();
    let mut name = None;
    let mut deps = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        if section == "[package]" && line.starts_with("name") {
            name = line.split('"').nth(1).map(str::to_string);
        }
        if section == "[dependencies]" && line.contains("path =") {
            let dep = line.split('=').next().unwrap_or("").trim().to_string();
            deps.insert((dep, line.contains("optional = true")));
        }
    }
    (
        name.unwrap_or_else(|| panic!("{file:?}: no package name")),
        deps,
    )
}

/// The table under "## Crates" in docs/architecture.md: crate → (path, dependencies; optional
/// ones are those written "`crate` with feature `f`").
fn documented(root: &Path) -> BTreeMap<String, (String, BTreeSet<(String, bool)>)> {
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).expect("architecture.md");
    let mut rows = BTreeMap::new();
    let mut in_section = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            in_section = line.starts_with("## Crates");
            continue;
        }
        if !in_section || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "| `name` (`path/`) | owns | depends on | outside |"
        let first = cells[1];
        let ticks: Vec<&str> = first.split('`').collect();
        if ticks.len() < 4 {
            continue; // the binaries' table: no path
        }
        let (name, path) = (
            ticks[1].to_string(),
            ticks[3].trim_end_matches('/').to_string(),
        );
        let mut deps = BTreeSet::new();
        for part in cells[3].split([',', ';']) {
            let optional = part.contains("with feature");
            // Only the crate names: backticked words that name a member, not feature names.
            for word in part.split('`').skip(1).step_by(2) {
                if word.starts_with("nlb-")
                    || word == "flowtable-compiler"
                    || word == "firmware-sim"
                {
                    deps.insert((word.to_string(), optional));
                }
            }
        }
        rows.insert(name, (path, deps));
    }
    rows
}

#[test]
fn architecture_md_draws_the_crate_graph_cargo_builds() {
    let root = workspace();
    let docs = documented(&root);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for member in members(&root) {
        let (name, deps) = manifest(&root, &member);
        seen.insert(name.clone());
        match docs.get(&name) {
            None => problems.push(format!("{name} ({member}) is not in the crate table")),
            Some((path, documented_deps)) => {
                if path != &member {
                    problems.push(format!(
                        "{name}: table says path {path}, workspace has {member}"
                    ));
                }
                if documented_deps != &deps {
                    problems.push(format!(
                        "{name}: table says it depends on {documented_deps:?}, its manifest on {deps:?}"
                    ));
                }
            }
        }
    }
    for name in docs.keys() {
        if !seen.contains(name) {
            problems.push(format!(
                "the crate table lists {name}, which is no workspace member"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md is stale:\n{}",
        problems.join("\n")
    );
}
