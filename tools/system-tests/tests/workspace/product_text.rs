//! What the product says names what its users know: Google Cloud's and GKE's features, SPEC
//! rules, commands. Never the documents the specification was distilled from ("seed 001"),
//! "the source product", the tracker's issue numbers or a working session: a user has seen none
//! of them. Every tracked text file is read: docs, README, help and error strings, comments
//! and tests (which are read by the next engineer).

use std::path::{Path, PathBuf};

/// Phrases a user has never seen, lower case.
const UNSEEN: &[&str] = &[
    "seed 0",
    "seeds/",
    "source product",
    "source document",
    "this session",
];

/// File endings that hold text a person reads.
const TEXT: &[&str] = &[
    "md", "rs", "sh", "toml", "yaml", "yml", "json", "v", "vh", "sv", "py", "service", "tcl",
    "txt", "cpp", "h", "xdc",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" || name == "demo-out" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| TEXT.contains(&x))
        {
            out.push(p);
        }
    }
}

/// `issue 28`, `issue #28`, `Issue 28's`: a tracker's number.
fn cites_an_issue(line: &str) -> bool {
    let lower = line.to_lowercase();
    lower.match_indices("issue").any(|(at, _)| {
        let rest = lower[at + "issue".len()..].trim_start_matches([' ', '#']);
        let before_ok = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        let spaced = lower[at + "issue".len()..].starts_with([' ', '#']);
        before_ok && spaced && rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn unseen_words(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    UNSEEN
        .iter()
        .copied()
        .find(|w| lower.contains(w))
        .or(cites_an_issue(line).then_some("issue N"))
}

#[test]
fn product_text_names_only_what_users_know() {
    let root = nlb_system_tests::bins::workspace();
    let mut files = Vec::new();
    walk(&root, &mut files);
    let me = Path::new(file!()).file_name();
    let mut found = Vec::new();
    for f in files {
        if f.file_name() == me {
            continue; // this file names the words it looks for
        }
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(word) = unseen_words(line) {
                found.push(format!(
                    "{}:{}: {word}: {}",
                    f.strip_prefix(&root).unwrap_or(&f).display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} lines name what users have never seen (say what Google Cloud or GKE does, or cite a SPEC rule):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_check_knows_the_words_it_refuses() {
    assert_eq!(unseen_words("as seed 003 says"), Some("seed 0"));
    assert_eq!(
        unseen_words("the source product drops it"),
        Some("source product")
    );
    assert_eq!(unseen_words("fixed in issue 28"), Some("issue N"));
    assert_eq!(unseen_words("see Issue #7."), Some("issue N"));
    assert_eq!(
        unseen_words("a random seed from the clock; 2 issues remain"),
        None
    );
    assert_eq!(unseen_words("katran#96 and metallb#3"), None);
}
