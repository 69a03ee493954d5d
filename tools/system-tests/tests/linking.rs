//! What each binary links: `nlb-sim` links no async runtime, HTTP or TLS stack (tokio, hyper,
//! rustls) and none of the slow path (`nlb-slowpath`); `nlbctl` links none of the slow path
//! and no async runtime, HTTP or gRPC stack (`nlbctl publish|fleet` speak etcd's JSON gateway
//! through `nlb-control`'s blocking client, over rustls for TLS); only `nlbd` links the slow
//! path.
//!
//! The three binaries share one package, hence one dependency list; what a binary links is
//! what its code reaches. The linker takes an object file of a crate only when the binary
//! needs something in it, and rustc's debug information names every object file taken as a
//! compile unit `<crate root>/@/<codegen unit>` (`…/tokio-1.47.1/src/lib.rs/@/tokio.<hash>-cgu.03`,
//! `tools/nlbd/src/lib.rs/@/…`). So the set of crate roots in a binary's compile units is
//! the set of crates it links, code or not. The same scan of `nlbd` must find tokio, hyper and
//! the slow path (else the scan is broken, not the binaries clean), and every scan must find
//! the crates the binary is known to use (else it has no debug information to read).

use std::collections::BTreeSet;

/// Crates `nlbctl` and `nlb-sim` must not link (registry crates by name, workspace crates by
/// their root file).
const ASYNC_STACK: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "http-body-util",
    "rustls",
    "tokio-rustls",
];
const SLOW_PATH_ROOT: &str = "tools/nlbd/src/lib.rs";

/// The crates a binary links, from the compile-unit names in its debug information: a registry
/// crate as its package name (`tokio`), a workspace crate as its root file relative to the
/// workspace (`driver/src/lib.rs`), the standard library as `std`, `core`, ...
fn linked_crates(binary: &str) -> BTreeSet<String> {
    let bytes = std::fs::read(binary).unwrap_or_else(|e| panic!("{binary}: {e}"));
    let mut crates = BTreeSet::new();
    let mut at = 0;
    while let Some(pos) = find(&bytes[at..], b"/@/") {
        let end = at + pos;
        // The name starts after the string before it (debug strings are NUL-separated).
        let start = bytes[..end]
            .iter()
            .rposition(|&b| b == 0 || !(b.is_ascii_graphic() || b == b' '))
            .map_or(0, |p| p + 1);
        let root = String::from_utf8_lossy(&bytes[start..end]).into_owned();
        crates.insert(crate_of(&root));
        at = end + 3;
    }
    crates
}

/// `…/registry/src/index…/tokio-1.47.1/src/lib.rs` → `tokio`; `/rustc/<hash>/library/std/src/lib.rs`
/// → `std`; a workspace root stays as it is.
fn crate_of(root: &str) -> String {
    let Some(dir) = root.strip_suffix("/src/lib.rs") else {
        return root.to_string();
    };
    let last = dir.rsplit('/').next().unwrap_or(dir);
    if root.contains("/registry/src/") || root.contains("/rust/deps/") {
        // `name-1.2.3`: the name is everything before the last `-` followed by a digit.
        match last.rfind('-') {
            Some(i) if last[i + 1..].starts_with(|c: char| c.is_ascii_digit()) => {
                last[..i].to_string()
            }
            _ => last.to_string(),
        }
    } else if root.starts_with("/rustc/") {
        last.to_string()
    } else {
        root.to_string()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn assert_links(binary: &str, crates: &BTreeSet<String>, expected: &[&str]) {
    let missing: Vec<_> = expected.iter().filter(|c| !crates.contains(**c)).collect();
    assert!(
        missing.is_empty(),
        "{binary}: the scan found no compile unit of {missing:?} (it found {crates:?}); \
         is the binary built without debug information? This test reads it."
    );
}

fn assert_clean(name: &str, binary: &str, forbidden: &[&str]) {
    let crates = linked_crates(binary);
    assert_links(
        binary,
        &crates,
        &["clap_builder", "driver/src/lib.rs", "std"],
    );
    let unwanted: Vec<_> = forbidden
        .iter()
        .copied()
        .chain([SLOW_PATH_ROOT])
        .filter(|c| crates.contains(*c))
        .collect();
    assert!(
        unwanted.is_empty(),
        "{name} links {unwanted:?}: only nlbd may (the slow path and its async runtime live in \
         nlb-slowpath, which nlbctl and nlb-sim must not reach). Linked: {crates:?}"
    );
}

#[test]
fn the_scan_finds_the_async_stack_and_the_slow_path_in_nlbd() {
    let nlbd = nlb_system_tests::bin("nlbd");
    let crates = linked_crates(nlbd);
    assert_links(nlbd, &crates, &["tokio", "hyper", "rustls", SLOW_PATH_ROOT]);
}

#[test]
fn nlbctl_links_no_async_runtime_nor_the_slow_path() {
    let nlbctl = nlb_system_tests::bin("nlbctl");
    assert_clean(
        "nlbctl",
        nlbctl,
        &[
            "tokio",
            "hyper",
            "hyper-util",
            "http-body-util",
            "tokio-rustls",
            "tonic",
            "prost",
            "etcd-client",
            "kube",
        ],
    );
    // Its etcd client (the fleet commands) is nlb-control's, over rustls.
    assert_links(
        nlbctl,
        &linked_crates(nlbctl),
        &["tools/control/src/lib.rs", "rustls"],
    );
}

#[test]
fn nlb_sim_links_neither_tokio_nor_hyper_nor_the_slow_path() {
    assert_clean("nlb-sim", nlb_system_tests::bin("nlb-sim"), ASYNC_STACK);
}

#[test]
fn crate_names_from_compile_unit_roots() {
    let reg = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f";
    assert_eq!(crate_of(&format!("{reg}/tokio-1.54.1/src/lib.rs")), "tokio");
    assert_eq!(
        crate_of(&format!("{reg}/hyper-util-0.1.21/src/lib.rs")),
        "hyper-util"
    );
    assert_eq!(crate_of(&format!("{reg}/hyper-1.12.0/src/lib.rs")), "hyper");
    assert_eq!(
        crate_of("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/lib.rs"),
        "std"
    );
    assert_eq!(crate_of("tools/nlbd/src/lib.rs"), SLOW_PATH_ROOT);
    assert_eq!(
        crate_of("tools/nlbctl/src/main.rs"),
        "tools/nlbctl/src/main.rs"
    );
}
