//! The harness itself: port lookup errors, and VCD tracing from the start and mid-run.

use nlb_verif::models::FlowHash;
use nlb_verif::{VerifError, Verilated};

#[test]
fn port_errors_are_typed() {
    let mut sim = Verilated::new::<FlowHash>().expect("model");
    match sim.port("no_such_port") {
        Err(VerifError::NoSuchPort { port, .. }) => assert_eq!(port, "no_such_port"),
        other => panic!("expected NoSuchPort, got {other:?}"),
    }
    let key = sim.port("s_key").expect("s_key");
    assert_eq!(key.width, 320);
    assert!(matches!(
        sim.set(key, &[0; 3]),
        Err(VerifError::Width { words: 3, .. })
    ));
    let hash = sim.port("m_hash").expect("m_hash");
    assert!(matches!(
        sim.set_u64(hash, 1),
        Err(VerifError::NotAnInput { .. })
    ));
}

fn vcd_times(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter_map(|t| t.trim().parse().ok())
        .collect()
}

#[test]
fn waveform_from_start_and_from_mid_run() {
    let dir = std::env::temp_dir().join(format!("nlb-verif-harness-{}", std::process::id()));
    let whole = dir.join("whole.vcd");
    let late = dir.join("late.vcd");

    let mut sim = Verilated::with_trace::<FlowHash>(&whole).expect("model");
    sim.reset(2).expect("reset");
    for _ in 0..10 {
        sim.tick();
    }
    sim.trace_close();

    let mut sim = Verilated::new::<FlowHash>().expect("model");
    sim.reset(2).expect("reset");
    for _ in 0..5 {
        sim.tick();
    }
    sim.trace_to(&late).expect("trace mid-run");
    let valid = sim.port("s_valid").expect("port");
    sim.set_bit(valid, true).expect("drive");
    for _ in 0..5 {
        sim.tick();
    }
    drop(sim);

    let whole_text = std::fs::read_to_string(&whole).expect("whole.vcd");
    let late_text = std::fs::read_to_string(&late).expect("late.vcd");
    for text in [&whole_text, &late_text] {
        assert!(text.contains("$enddefinitions"), "a VCD header");
        assert!(text.contains("s_key"), "ports are traced");
    }
    let (t_whole, t_late) = (vcd_times(&whole_text), vcd_times(&late_text));
    // 12 clocks from time 0 at 10 ns; the late trace starts at clock 7 (70 ns).
    assert_eq!(t_whole.first(), Some(&0));
    assert!(t_late.first().is_some_and(|&t| t > 0), "{t_late:?}");
    assert!(t_whole.last() > t_late.first());
    let _ = std::fs::remove_dir_all(&dir);
}
