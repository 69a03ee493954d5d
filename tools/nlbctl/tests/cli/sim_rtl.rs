//! `nlbctl sim --engine rtl` (feature `rtl`): the Verilator model of hw/rtl gives the same
//! report, the same forwarded frames and the same summary as the golden model on the traffic
//! `nlbctl traffic` generates for the examples. Without the feature, `--engine rtl` is a user
//! error that says how to get it.

#[cfg(feature = "rtl")]
use std::path::Path;
use std::process::Command;

fn nlbctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .current_dir(crate::workspace())
        .output()
        .expect("nlbctl runs")
}

#[cfg(feature = "rtl")]
#[test]
fn rtl_engine_reports_what_the_model_reports() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = |x: &Path| x.to_str().expect("utf-8 path").to_string();
    for example in [
        "examples/web.yaml",
        "examples/udp-dns.yaml",
        "examples/ipv6.yaml",
    ] {
        let pcap = dir.path().join("in.pcap");
        let o = nlbctl(&["traffic", example, "-o", &p(&pcap), "--flows", "12"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut runs = Vec::new();
        for engine in ["model", "rtl"] {
            let out = dir.path().join(format!("out-{engine}.pcap"));
            let report = dir.path().join(format!("report-{engine}.jsonl"));
            let o = nlbctl(&[
                "sim",
                "--config",
                example,
                "--pcap",
                &p(&pcap),
                "--engine",
                engine,
                "--out",
                &p(&out),
                "--report",
                &p(&report),
            ]);
            assert!(
                o.status.success(),
                "{example} --engine {engine}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            runs.push((
                std::fs::read(&report).expect("report"),
                std::fs::read(&out).expect("out pcap"),
                o.stdout,
            ));
        }
        assert!(!runs[0].0.is_empty(), "{example}: empty report");
        assert_eq!(
            String::from_utf8_lossy(&runs[1].0),
            String::from_utf8_lossy(&runs[0].0),
            "{example}: reports differ (rtl, model)"
        );
        assert!(runs[1].1 == runs[0].1, "{example}: forwarded frames differ");
        assert_eq!(
            String::from_utf8_lossy(&runs[1].2),
            String::from_utf8_lossy(&runs[0].2),
            "{example}: summaries differ (rtl, model)"
        );
    }
}

#[cfg(not(feature = "rtl"))]
#[test]
fn rtl_engine_without_the_feature_says_how_to_get_it() {
    let o = nlbctl(&[
        "sim",
        "--config",
        "examples/web.yaml",
        "--pcap",
        "no-such.pcap",
        "--engine",
        "rtl",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--features rtl"), "{err}");
}
