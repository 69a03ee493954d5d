//! Every `SPEC Rn` or `SPEC Rn.m` cited anywhere in the repository names a rule that
//! docs/spec.md defines (a section `## Rn …`, and in it an item `m.`), so citations cannot
//! point at nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    nlb_system_tests::bins::workspace()
}

/// Rule numbers docs/spec.md defines: "4" for `## R4`, "4.2" for item `2.` inside it.
fn defined() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/spec.md")).expect("docs/spec.md");
    let mut rules = BTreeSet::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("## R") {
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            section = (!n.is_empty()).then_some(n.clone());
            if !n.is_empty() {
                rules.insert(n);
            }
        } else if let Some(s) = &section {
            let item: String = line.chars().take_while(char::is_ascii_digit).collect();
            if !item.is_empty() && line[item.len()..].starts_with(". ") {
                rules.insert(format!("{s}.{item}"));
            }
        }
    }
    rules
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if ["rs", "v", "vh", "md", "toml", "sh", "py", "yaml", "json"]
            .iter()
            .any(|ext| name.ends_with(&format!(".{ext}")))
        {
            out.push(p);
        }
    }
}

#[test]
fn every_cited_rule_is_defined_in_docs_spec() {
    let rules = defined();
    assert!(rules.contains("4.2") && rules.contains("11.4"), "{rules:?}");
    let mut files = Vec::new();
    walk(&root(), &mut files);
    let mut missing = Vec::new();
    let mut cited = 0;
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (at, _) in text.match_indices("SPEC R") {
            let rest = &text[at + "SPEC R".len()..];
            let mut n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if n.is_empty() {
                continue;
            }
            let after = &rest[n.len()..];
            let sub: String = after
                .strip_prefix('.')
                .map(|s| s.chars().take_while(char::is_ascii_digit).collect())
                .unwrap_or_default();
            if !sub.is_empty() {
                n = format!("{n}.{sub}");
            }
            cited += 1;
            if !rules.contains(&n) {
                let line = text[..at].lines().count();
                missing.push(format!("{}:{line}: SPEC R{n}", f.display()));
            }
        }
    }
    assert!(
        cited > 100,
        "only {cited} citations found: is the walk right?"
    );
    assert!(
        missing.is_empty(),
        "citations of rules docs/spec.md does not define:\n{}",
        missing.join("\n")
    );
}
