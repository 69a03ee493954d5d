//! The workspace's shape, as docs/architecture.md and the README describe it:
//!
//! - the crate table of docs/architecture.md is the graph cargo builds, and the README's layout
//!   table lists every package;
//! - `nlbctl` and `nlb-sim` build without the daemon's stack (async runtime, HTTP, TLS,
//!   Kubernetes, gRPC), so a newcomer's first command needs no more than Rust and a C compiler;
//! - no import cycle between the top-level modules of any crate;
//! - no product function over 150 lines without a comment saying why it is one function.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A package's dependencies on other workspace packages: (name, optional).
type Deps = BTreeSet<(String, bool)>;

fn root() -> PathBuf {
    nlb_system_tests::bins::workspace()
}

/// The workspace members, from the root manifest's `members = [...]` list.
fn members(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("root Cargo.toml");
    let start = text.find("members").expect("a members list");
    let list = &text[start..start + text[start..].find(']').expect("the list ends")];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// A member's package name and the names in its `[dependencies]` (optional ones marked).
fn manifest(root: &Path, member: &str) -> (String, Deps) {
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
        if section == "[dependencies]" && !line.starts_with('#') && line.contains('=') {
            let dep = line
                .split(['=', '.'])
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            deps.insert((dep, line.contains("optional = true")));
        }
    }
    let name = name.unwrap_or_else(|| panic!("{file:?}: no package name"));
    (name, deps)
}

/// Package name → (path, workspace dependencies) of every member.
fn workspace_graph(root: &Path) -> BTreeMap<String, (String, Deps)> {
    let all: Vec<(String, String, Deps)> = members(root)
        .into_iter()
        .map(|m| {
            let (name, deps) = manifest(root, &m);
            (name, m, deps)
        })
        .collect();
    let names: BTreeSet<String> = all.iter().map(|(n, _, _)| n.clone()).collect();
    all.into_iter()
        .map(|(name, path, deps)| {
            let internal = deps
                .into_iter()
                .filter(|(d, _)| names.contains(d))
                .collect();
            (name, (path, internal))
        })
        .collect()
}

/// The table under "## Crates" in docs/architecture.md: crate → (path, dependencies; optional
/// ones are those written "`crate` with feature `f`").
fn documented(root: &Path, names: &BTreeSet<String>) -> BTreeMap<String, (String, Deps)> {
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
        // "| `name` (`path/`) | owns | depends on | outside |"
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let ticks: Vec<&str> = cells[1].split('`').collect();
        if ticks.len() < 4 || cells.len() < 5 {
            continue;
        }
        let (name, path) = (
            ticks[1].to_string(),
            ticks[3].trim_end_matches('/').to_string(),
        );
        let mut deps = BTreeSet::new();
        for part in cells[3].split([',', ';']) {
            let optional = part.contains("with feature");
            for word in part.split('`').skip(1).step_by(2) {
                if names.contains(word) {
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
    let root = root();
    let graph = workspace_graph(&root);
    let names: BTreeSet<String> = graph.keys().cloned().collect();
    let docs = documented(&root, &names);
    let mut problems = Vec::new();
    for (name, (path, deps)) in &graph {
        match docs.get(name) {
            None => problems.push(format!("{name} ({path}) is not in the crate table")),
            Some((documented_path, documented_deps)) => {
                if documented_path != path {
                    problems.push(format!(
                        "{name}: the table says {documented_path}, the workspace {path}"
                    ));
                }
                if documented_deps != deps {
                    problems.push(format!(
                        "{name}: the table says it depends on {documented_deps:?}, its manifest on {deps:?}"
                    ));
                }
            }
        }
    }
    for name in docs.keys().filter(|n| !graph.contains_key(*n)) {
        problems.push(format!(
            "the crate table lists {name}, which is no workspace member"
        ));
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md is stale:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_layout_table_lists_every_package() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let missing: Vec<String> = workspace_graph(&root)
        .into_iter()
        .filter(|(name, (path, _))| {
            !readme.lines().any(|l| {
                l.starts_with('|')
                    && l.contains(&format!("`{path}/`"))
                    && l.contains(&format!("`{name}`"))
            })
        })
        .map(|(name, (path, _))| format!("{name} ({path}/)"))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's layout table lacks: {missing:?}"
    );
}

/// The packages `cargo tree` says `package` builds with its default features (normal and
/// build dependencies), by name.
fn dependency_tree(package: &str) -> BTreeSet<String> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// What only the daemon needs: the async runtime and HTTP stack, gRPC and protoc, the Kubernetes
/// client. (TLS is not among them: `nlbctl` speaks to etcd over TLS too.)
const DAEMON_STACK: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "tonic",
    "prost",
    "prost-build",
    "etcd-client",
    "kube",
    "kube-client",
    "k8s-openapi",
    "nlbd",
];

#[test]
fn nlbctl_and_nlb_sim_build_without_the_daemons_stack() {
    for package in ["nlbctl", "nlb-sim"] {
        let tree = dependency_tree(package);
        assert!(
            tree.contains("nlb-driver"),
            "{package}: cargo tree read nothing: {tree:?}"
        );
        let found: Vec<&&str> = DAEMON_STACK.iter().filter(|d| tree.contains(**d)).collect();
        assert!(
            found.is_empty(),
            "{package} builds {found:?}, which only nlbd needs"
        );
    }
    // The check can fail: nlbd builds all of it.
    let nlbd = dependency_tree("nlbd");
    assert!(nlbd.contains("tokio") && nlbd.contains("kube"), "{nlbd:?}");
}

/// A Rust source with comments, string and character literals blanked (same length, newlines
/// kept), so braces and paths are read only from code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r'
            && matches!(b.get(i + 1), Some(b'"' | b'#'))
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
        {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = text[j + 1..]
                .find(std::str::from_utf8(&close).unwrap_or("\""))
                .map_or(b.len(), |e| j + 1 + e + close.len());
            for &x in &b[i..end] {
                blank(&mut out, x);
            }
            i = end;
        } else if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let rest = &b[i + 1..];
            let len = if rest.first() == Some(&b'\\') {
                rest.iter().position(|&x| x == b'\'').map(|p| p + 2)
            } else if rest.get(1) == Some(&b'\'') {
                Some(3)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(ch) == Some(&b'\'')).then_some(ch + 2)
            };
            match len {
                Some(n) => {
                    for &x in &b[i..(i + n).min(b.len())] {
                        blank(&mut out, x);
                    }
                    i += n;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its `#[cfg(test)]` modules (tests may reach anywhere).
fn product_code(text: &str) -> String {
    let code = code_only(text);
    match code
        .find("#[cfg(test)]\nmod ")
        .or_else(|| code.find("#[cfg(test)]\npub mod "))
    {
        Some(at) => code[..at].to_string(),
        None => code,
    }
}

/// The crate roots of a package: `src/lib.rs`, `src/main.rs` and `src/bin/*` (each its own
/// crate), with the files of each.
fn crates_of(package_dir: &Path) -> Vec<(PathBuf, Vec<PathBuf>)> {
    let src = package_dir.join("src");
    let mut all = Vec::new();
    rust_files(&src, &mut all);
    let bin_dir = src.join("bin");
    let mut crates = Vec::new();
    let mut bins: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    let mut rest = Vec::new();
    for f in all {
        match f.strip_prefix(&bin_dir) {
            Ok(inside) => {
                let first = inside
                    .components()
                    .next()
                    .map(|c| bin_dir.join(c.as_os_str()));
                bins.entry(first.unwrap_or_else(|| f.clone()))
                    .or_default()
                    .push(f);
            }
            Err(_) => rest.push(f),
        }
    }
    for (top, files) in bins {
        let root = if top.is_dir() {
            top.join("main.rs")
        } else {
            top.clone()
        };
        crates.push((root, files));
    }
    let lib = src.join("lib.rs");
    let main = src.join("main.rs");
    if lib.exists() && main.exists() {
        // A library and a binary over one folder: main.rs's modules are those it declares.
        let main_text = product_code(&std::fs::read_to_string(&main).unwrap_or_default());
        let main_mods: BTreeSet<String> = main_text
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix("mod ")
                    .map(|m| m.trim_end_matches(';').trim().to_string())
            })
            .collect();
        let (bin_files, lib_files): (Vec<PathBuf>, Vec<PathBuf>) =
            rest.into_iter().partition(|f| {
                f == &main || top_module(&src, f).is_some_and(|m| main_mods.contains(&m))
            });
        crates.push((main, bin_files));
        crates.push((lib, lib_files));
    } else if lib.exists() {
        crates.push((lib, rest));
    } else if main.exists() {
        crates.push((main, rest));
    }
    crates
}

/// The top-level module a file belongs to (`None` for the crate root).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// A cycle in `graph`, if there is one (as a path that ends where it starts).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The top-level modules each top-level module of a crate refers to, by `crate::m` paths and
/// by names the crate root re-exports from `m` (`pub use m::{A, B}`).
fn module_graph(src: &Path, root: &Path, files: &[PathBuf]) -> BTreeMap<String, BTreeSet<String>> {
    let root_code = product_code(&std::fs::read_to_string(root).unwrap_or_default());
    let mut reexported: BTreeMap<String, String> = BTreeMap::new();
    for stmt in root_code.split(';') {
        let stmt = stmt.trim();
        let Some(path) = stmt.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = path.split_once("::") else {
            continue;
        };
        for name in names.trim_matches(['{', '}']).split(',') {
            let name = name.trim().rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() && name != "*" && name != "self" {
                reexported.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(from) = top_module(src, f) else {
            continue;
        };
        let code = product_code(&std::fs::read_to_string(f).unwrap_or_default());
        let edges = graph.entry(from.clone()).or_default();
        let mut rest = code.as_str();
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let word: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let braced = after.starts_with('{');
            let targets: Vec<String> = if braced {
                let group = &after[1..after.find('}').unwrap_or(after.len())];
                group
                    .split(',')
                    .map(|w| w.trim().split("::").next().unwrap_or("").to_string())
                    .collect()
            } else {
                vec![word]
            };
            for t in targets {
                let module = reexported.get(&t).cloned().unwrap_or(t);
                if module != from
                    && files
                        .iter()
                        .any(|g| top_module(src, g).as_deref() == Some(module.as_str()))
                {
                    edges.insert(module);
                }
            }
            rest = after;
        }
    }
    graph
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = root();
    let mut cycles = Vec::new();
    for member in members(&root) {
        let dir = root.join(&member);
        for (crate_root, files) in crates_of(&dir) {
            let src = if crate_root.ends_with("src/lib.rs") || crate_root.ends_with("src/main.rs") {
                dir.join("src")
            } else {
                crate_root
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| dir.join("src"))
            };
            let graph = module_graph(&src, &crate_root, &files);
            if let Some(c) = find_cycle(&graph) {
                cycles.push(format!(
                    "{}: {}",
                    crate_root
                        .strip_prefix(&root)
                        .unwrap_or(&crate_root)
                        .display(),
                    c.join(" → ")
                ));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between modules:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let dag: BTreeMap<String, BTreeSet<String>> =
        [("a".to_string(), BTreeSet::from(["b".to_string()]))]
            .into_iter()
            .collect();
    assert_eq!(find_cycle(&dag), None);
}

/// The longest a product function may be without a comment saying why it is one.
const LONGEST_FUNCTION: usize = 150;

/// The marker, in a comment within the lines just above a long function (with its doc
/// comments and attributes), that says why it is one function.
const LONG_MARKER: &str = "One function:";

/// Functions of `text` longer than [`LONGEST_FUNCTION`] lines and not marked: (line, name,
/// length).
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let code = product_code(text);
    let lines: Vec<&str> = code.lines().collect();
    let raw: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let Some(at) = t.find("fn ") else { continue };
        let before = &t[..at];
        if !before.split_whitespace().all(|w| {
            matches!(
                w,
                "pub"
                    | "pub(crate)"
                    | "pub(super)"
                    | "async"
                    | "const"
                    | "unsafe"
                    | "extern"
                    | "\"C\""
            ) || w.starts_with("pub(")
        }) {
            continue;
        }
        let name: String = t[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body: from the first `{` after the signature to its matching `}`; a `;` first
        // is a declaration without a body.
        let mut depth = 0i32;
        let mut started = false;
        let mut end = None;
        'scan: for (j, l) in lines.iter().enumerate().skip(i) {
            for ch in l.chars() {
                match ch {
                    ';' if !started => break 'scan,
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => {
                        depth -= 1;
                        if started && depth == 0 {
                            end = Some(j);
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
        let Some(end) = end else { continue };
        let len = end - i + 1;
        if len <= LONGEST_FUNCTION {
            continue;
        }
        let marked = raw[i.saturating_sub(30)..i]
            .iter()
            .rev()
            .take_while(|l| {
                let l = l.trim_start();
                l.starts_with("//") || l.starts_with("#[") || l.starts_with("#!") || l.is_empty()
            })
            .any(|l| l.contains(LONG_MARKER));
        if !marked {
            found.push((i + 1, name, len));
        }
    }
    found
}

#[test]
fn product_functions_are_short_or_say_why_not() {
    let root = root();
    let mut long = Vec::new();
    // Test support is not product code: its scenarios read top to bottom.
    for member in members(&root)
        .into_iter()
        .filter(|m| !m.ends_with("system-tests"))
    {
        let mut files = Vec::new();
        rust_files(&root.join(&member).join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            for (line, name, len) in long_functions(&text) {
                long.push(format!(
                    "{}:{line}: fn {name}: {len} lines",
                    f.strip_prefix(&root).unwrap_or(&f).display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LONGEST_FUNCTION} lines (split them at their phase boundaries, or say why \
         not in a comment with `{LONG_MARKER}` above them):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_check_sees_a_long_function_and_its_marker() {
    let body = "    let x = 1;\n".repeat(LONGEST_FUNCTION);
    let text = format!("/// Doc.\nfn long() {{\n{body}}}\n\nfn short() {{ \"}}\"; }}\n");
    assert_eq!(
        long_functions(&text).len(),
        1,
        "{:?}",
        long_functions(&text)
    );
    assert_eq!(long_functions(&text)[0].1, "long");
    let marked = format!("// {LONG_MARKER} the steps share one state machine.\n{text}");
    assert!(long_functions(&marked).is_empty());
}
