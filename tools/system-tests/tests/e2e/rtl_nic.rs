//! End-to-end on real Linux networking with nlb-sim running the Verilator RTL
//! (`nlb-sim --engine rtl`, feature `rtl`): the same scenario as `e2e.rs` (in
//! `common/mod.rs`), every packet through `nlb_top` and every table, connection and counter
//! through its AXI-Lite registers, loaded by nlbd's driver as on a card. Needs root; skips
//! without it unless `CI` is set. See docs/e2e.md.
//!
//! Also, without root: the process serves the Verilated NIC on its socket; and a build without
//! the feature says how to get the engine.

#[cfg(feature = "rtl")]
use nlb_system_tests::lab as common;

use std::process::Command;
#[cfg(feature = "rtl")]
use std::{
    path::Path,
    process::{Child, Output},
    time::{Duration, Instant},
};

#[cfg(feature = "rtl")]
#[test]
fn curl_through_the_rtl_nic_with_health_checks_and_dsr() {
    if !common::should_run("cargo test -p nlb-system-tests --features rtl --test e2e rtl_nic::") {
        return;
    }
    common::curl_through_the_simulated_nic_with_health_checks_and_dsr(common::Engine::Rtl);
}

#[cfg(feature = "rtl")]
fn root() -> std::path::PathBuf {
    nlb_system_tests::bins::workspace()
}

#[cfg(feature = "rtl")]
fn nlbctl(args: &[&str]) -> Output {
    Command::new(nlb_system_tests::bin("nlbctl"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("nlbctl runs")
}

/// The nlb-sim child, killed when the test ends however it ends.
#[cfg(feature = "rtl")]
struct NlbSim(Child);

#[cfg(feature = "rtl")]
impl Drop for NlbSim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// With `--engine rtl` the socket serves `nlb_top` itself: the firmware-ID block answers with
/// what the Verilator build recorded (not the golden model's), the pipeline starts disabled,
/// and frames run through it before any table is loaded are passed to the host.
#[cfg(feature = "rtl")]
#[test]
fn rtl_engine_serves_the_verilated_nic() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = |x: &Path| x.to_str().expect("utf-8 path").to_string();
    let (pcap, socket, log) = (
        dir.path().join("in.pcap"),
        dir.path().join("nic.sock"),
        dir.path().join("nlb-sim.log"),
    );
    let o = nlbctl(&[
        "traffic",
        "examples/web.yaml",
        "-o",
        &p(&pcap),
        "--flows",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let frames = firmware_sim::pcap::read_frames(std::fs::File::open(&pcap).expect("pcap"))
        .expect("pcap")
        .len();
    assert!(frames > 0);
    let _sim = NlbSim(
        Command::new(nlb_system_tests::bin("nlb-sim"))
            .args([
                "--socket",
                &p(&socket),
                "--engine",
                "rtl",
                "--pcap",
                &p(&pcap),
            ])
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("nlb-sim starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = format!("pcap done: {frames} packets");
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(&done) && std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            assert!(
                text.contains(&format!(
                    "0 forwarded, 0 punted, 0 dropped, {frames} passed"
                )),
                "{text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nlb-sim did not run the pcap:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = nlbctl(&[
        "status",
        "--device",
        &format!("sim:{}", p(&socket)),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(s["build_id"], nlb_verif::build_info::build_id(), "{s}");
    assert_eq!(
        s["git_hash"],
        format!("{:08x}", nlb_verif::build_info::git_hash()),
        "{s}"
    );
    assert_eq!(s["profile"], "sim");
    assert_eq!(s["enabled"], false);
}

#[cfg(not(feature = "rtl"))]
#[test]
fn rtl_engine_without_the_feature_says_how_to_get_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("nic.sock");
    let o = Command::new(nlb_system_tests::bin("nlb-sim"))
        .args([
            "--socket",
            socket.to_str().expect("utf-8"),
            "--engine",
            "rtl",
        ])
        .output()
        .expect("nlb-sim runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--features rtl"), "{err}");
    assert!(!socket.exists(), "it served a socket anyway");
}
