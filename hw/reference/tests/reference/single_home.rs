//! The lookup semantics have one host-side home: this crate. The optimised golden model
//! (`firmware-sim`) and the RTL are the two other implementations, held to it by the
//! differential tests (see `docs/architecture.md`); no other code of the workspace may compute
//! a lookup step. This test reads every Rust source outside tests and finds the marks of a
//! lookup step written by hand: a hash turned into a table index, a VIP key built, a port-slot
//! range compared, an ACL prefix compared, an affinity mapped to a key type, the SYN rule, a
//! connection or VIP entry compared, a Maglev index computed.
//!
//! Test code (`tests/`, `benches/`, `examples/`, `#[cfg(test)]` modules) is not read: a test's
//! expectation is worked out on its own, by hand, on purpose. Comments and string literals are
//! not read either.
//!
//! A finding fails with its file, line and kind; so does an allowlist entry that no longer
//! finds anything (keep the list exact).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A kind of lookup step and how to recognise it in one line of code (comments and strings
/// blanked).
struct Mark {
    name: &'static str,
    found: fn(&str) -> bool,
}

const MARKS: &[Mark] = &[
    Mark {
        name: "hash to table index (VIP bucket, connection bucket, Maglev offset)",
        found: |l| l.contains("table_index("),
    },
    Mark {
        name: "VIP key built",
        found: |l| {
            l.contains("FlowKey::vip(")
                || l.contains("key_type: KeyType::Vip")
                || l.contains("(KeyType::Vip,")
        },
    },
    Mark {
        name: "port-slot range compared",
        found: |l| {
            l.contains("port_lo")
                && (l.contains("<=")
                    || l.contains(">=")
                    || l.contains("..=")
                    || l.contains(".contains("))
        },
    },
    Mark {
        name: "prefix compared over 128-bit addresses",
        found: |l| l.contains(">> (128 -"),
    },
    Mark {
        name: "affinity mapped to a key type",
        found: |l| l.contains("Affinity::") && l.contains("KeyType::"),
    },
    Mark {
        name: "SYN without ACK",
        found: |l| l.contains("SYN") && l.contains("ACK") && l.contains("=="),
    },
    Mark {
        name: "connection entry compared",
        found: |l| l.contains("src_port ==") || l.contains("dst_port =="),
    },
    Mark {
        name: "VIP entry compared",
        found: |l| l.contains("protocol ==") && l.contains("addr =="),
    },
    Mark {
        name: "Maglev index by hand",
        found: |l| l.contains("maglev_size") && (l.contains(">>") || l.contains(" % ")),
    },
];

/// Where a lookup step may be written, and why. A path ending in `/` covers a directory.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "verif/src/contents.rs",
        "*",
        "the table-content generators aim entries at a packet (a match, or one field away) and sort port slots so ranges overlap on purpose; the expected result still comes from nlb-reference",
    ),
    (
        "hw/reference/src/",
        "*",
        "the reference semantics: every lookup step, once",
    ),
    (
        "firmware-sim/src/pipeline.rs",
        "*",
        "the optimised golden model, a separate implementation held to the reference by firmware-sim/tests/differential.rs",
    ),
    (
        "firmware-sim/src/conntrack.rs",
        "*",
        "the optimised golden model's connection table (tagged ways), held to the reference by firmware-sim/tests/differential.rs",
    ),
    (
        "hw/contract/src/hash.rs",
        "hash to table index (VIP bucket, connection bucket, Maglev offset)",
        "the definition of `table_index` itself (the regmap's [hash])",
    ),
    (
        "hw/contract/src/hash.rs",
        "VIP key built",
        "`FlowKey::vip`, the canonical key layout of the regmap's [hash]",
    ),
    (
        "flowtable-compiler/config/src/model.rs",
        "prefix compared over 128-bit addresses",
        "`Prefix::contains`: whether a configured prefix holds an address (configuration checks), not a read of the ACL table",
    ),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// Rust sources of the workspace that are not test code, relative to the root.
fn sources(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                let skip = name.starts_with('.')
                    || matches!(name.as_str(), "target" | "tests" | "benches" | "examples");
                if !skip {
                    walk(&p, root, out);
                }
            } else if name.ends_with(".rs") {
                let rel = p.strip_prefix(root).expect("under the root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// The code of a Rust source line by line, with comments, string and char literals blanked
/// and `#[cfg(test)]` items removed.
fn code_lines(text: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum S {
        Code,
        LineComment,
        BlockComment(u32),
        Str,
        RawStr(usize),
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut s = S::Code;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match s {
            S::Code => {
                if c == '/' && next == Some('/') {
                    s = S::LineComment;
                    out.push(' ');
                } else if c == '/' && next == Some('*') {
                    s = S::BlockComment(1);
                    out.push_str("  ");
                    i += 1;
                } else if c == '"' {
                    s = S::Str;
                    out.push('"');
                } else if c == 'r' && (next == Some('"') || next == Some('#')) {
                    // A raw string r"..." / r#"..."#: count the hashes.
                    let mut j = i + 1;
                    while chars.get(j) == Some(&'#') {
                        j += 1;
                    }
                    if chars.get(j) == Some(&'"') {
                        s = S::RawStr(j - i - 1);
                        out.extend(std::iter::repeat_n(' ', j - i + 1));
                        i = j;
                    } else {
                        out.push(c);
                    }
                } else if c == '\'' {
                    // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
                    let end = if next == Some('\\') {
                        (i + 2..chars.len().min(i + 12)).find(|&j| chars[j] == '\'')
                    } else if chars.get(i + 2) == Some(&'\'') {
                        Some(i + 2)
                    } else {
                        None
                    };
                    match end {
                        Some(e) => {
                            out.extend(std::iter::repeat_n(' ', e - i + 1));
                            i = e;
                        }
                        None => out.push(c),
                    }
                } else {
                    out.push(c);
                }
            }
            S::LineComment => {
                if c == '\n' {
                    s = S::Code;
                    out.push('\n');
                } else {
                    out.push(' ');
                }
            }
            S::BlockComment(depth) => {
                if c == '*' && next == Some('/') {
                    s = if depth == 1 {
                        S::Code
                    } else {
                        S::BlockComment(depth - 1)
                    };
                    out.push_str("  ");
                    i += 1;
                } else if c == '/' && next == Some('*') {
                    s = S::BlockComment(depth + 1);
                    out.push_str("  ");
                    i += 1;
                } else {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                }
            }
            S::Str => {
                if c == '\\' {
                    out.push(' ');
                    if let Some(n) = next {
                        out.push(if n == '\n' { '\n' } else { ' ' });
                        i += 1;
                    }
                } else if c == '"' {
                    s = S::Code;
                    out.push('"');
                } else {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                }
            }
            S::RawStr(hashes) => {
                if c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    s = S::Code;
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes;
                } else {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                }
            }
        }
        i += 1;
    }
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    // Blank every item under `#[cfg(test)]`: from the attribute to the brace that closes the
    // item's first block (or its `;`).
    let mut l = 0;
    while l < lines.len() {
        if lines[l].trim() != "#[cfg(test)]" {
            l += 1;
            continue;
        }
        let mut depth = 0i32;
        let mut opened = false;
        let mut k = l;
        'item: while k < lines.len() {
            for ch in lines[k].chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened => break 'item,
                    _ => {}
                }
                if opened && depth == 0 {
                    break 'item;
                }
            }
            k += 1;
        }
        let last = k.min(lines.len() - 1);
        for line in &mut lines[l..=last] {
            line.clear();
        }
        l = k + 1;
    }
    lines
}

fn allowed(path: &str, mark: &str) -> Option<usize> {
    ALLOWED.iter().position(|(p, m, _)| {
        let place = if p.ends_with('/') {
            path.starts_with(p)
        } else {
            path == *p
        };
        place && (*m == "*" || *m == mark)
    })
}

#[test]
fn no_lookup_step_outside_its_implementations() {
    let root = workspace();
    let files = sources(&root);
    assert!(
        files.iter().any(|f| f == "tools/nlbd/src/punt/lookup.rs"),
        "the walk must reach the driver's sources: {root:?}"
    );
    let mut findings = Vec::new();
    let mut used = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(root.join(f)).expect("readable source");
        for (n, line) in code_lines(&text).iter().enumerate() {
            for m in MARKS.iter().filter(|m| (m.found)(line)) {
                match allowed(f, m.name) {
                    Some(i) => {
                        used.insert(i);
                    }
                    None => findings.push(format!("{f}:{}: {}: {}", n + 1, m.name, line.trim())),
                }
            }
        }
    }
    let stale: Vec<String> = ALLOWED
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, (p, m, why))| format!("{p} ({m}): {why}"))
        .collect();
    assert!(
        findings.is_empty() && stale.is_empty(),
        "a lookup step is computed outside nlb-reference, firmware-sim's fast model and the RTL \
         (call nlb_reference::lookup / host / conntrack instead; docs/architecture.md):\n  {}\n\
         allowlist entries that find nothing any more (remove them):\n  {}",
        findings.join("\n  "),
        stale.join("\n  ")
    );
}

/// The reader finds each kind of mark in code, and none in comments, strings or test modules.
#[test]
fn the_reader_sees_code_only() {
    let text = r##"
// table_index(h, n) in a comment
/* FlowKey::vip( in a block /* nested */ comment */
let s = "table_index(";
let r = r#"KeyType::Vip and "quotes""#;
let c = '{';
let bucket = table_index(h, n);
fn f<'a>(x: &'a u8) {}
#[cfg(test)]
mod tests {
    fn g() { let b = table_index(h, n); }
}
let after = s.port_lo <= p;
"##;
    let lines = code_lines(text);
    let hits: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .flat_map(|(n, l)| {
            MARKS
                .iter()
                .filter(move |m| (m.found)(l))
                .map(move |m| (n + 1, m.name))
        })
        .collect();
    assert_eq!(
        hits,
        vec![(7, MARKS[0].name), (13, MARKS[2].name),],
        "{lines:#?}"
    );
    for (line, want) in [
        ("let i = table_index(hash, size);", 0),
        ("let k = FlowKey::vip(6, ip);", 1),
        ("key_type: KeyType::Vip,", 1),
        ("key_hash(KeyType::Vip, p, 0, 0, 0, vip)", 1),
        ("(s.port_lo..=s.port_hi).contains(&port)", 2),
        ("(a ^ p.addr) >> (128 - u32::from(len)) == 0", 3),
        ("Affinity::ClientIp => KeyType::Tuple2,", 4),
        ("flags & (SYN | ACK) == SYN", 5),
        ("e.src_port == k.src_port", 6),
        ("e.valid && e.protocol == protocol && e.addr == vip", 7),
        (
            "let o = (u64::from(h) * u64::from(p.maglev_size)) >> 32;",
            8,
        ),
    ] {
        assert!((MARKS[want].found)(line), "{} in {line}", MARKS[want].name);
    }
}
