//! nlb-sim's command line on its own: errors a user meets name what is wrong and what is
//! valid, and exit with status 1 (docs/architecture.md's exit-status contract); the generated
//! man page and completions cover the options. The process-level tests with nlbctl and nlbd
//! are in nlb-system-tests.

use std::process::{Command, Output};

fn nlb_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nlb-sim"))
        .args(args)
        .output()
        .expect("nlb-sim runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_unknown_profile_is_a_user_error_that_lists_the_profiles() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("nic.sock");
    let o = nlb_sim(&[
        "--socket",
        socket.to_str().expect("utf-8"),
        "--profile",
        "u9999",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("u9999"), "{e}");
    assert!(
        e.contains("valid:") && e.contains("sim") && e.contains("u280"),
        "{e}"
    );
}

#[test]
fn a_missing_pcap_is_a_user_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("nic.sock");
    let missing = dir.path().join("no-such.pcap");
    let o = nlb_sim(&[
        "--socket",
        socket.to_str().expect("utf-8"),
        "--pcap",
        missing.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no-such.pcap"), "{}", stderr(&o));
}

#[cfg(not(feature = "rtl"))]
#[test]
fn the_rtl_engine_without_the_feature_says_how_to_get_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("nic.sock");
    let o = nlb_sim(&[
        "--socket",
        socket.to_str().expect("utf-8"),
        "--engine",
        "rtl",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cargo build -p nlb-sim --features rtl"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_man_page_and_completions_cover_every_option() {
    let man = nlb_sim(&["--man"]);
    assert!(man.status.success(), "{}", stderr(&man));
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(
        man.starts_with(".ie") || man.contains(".TH"),
        "not roff: {man:.80}"
    );
    let bash = nlb_sim(&["--completions", "bash"]);
    assert!(bash.status.success(), "{}", stderr(&bash));
    let bash = String::from_utf8_lossy(&bash.stdout);
    for option in [
        "--socket",
        "--profile",
        "--engine",
        "--pcap",
        "--loop",
        "--loops",
        "--rate",
        "--wait-enable",
        "--out",
        "--rx",
        "--tx",
        "--auto-learn",
    ] {
        assert!(
            man.contains(&option.replace('-', "\\-")),
            "man page lacks {option}"
        );
        assert!(bash.contains(option), "bash completion lacks {option}");
    }
}
