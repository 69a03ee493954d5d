//! The harness itself: port lookup errors, VCD tracing from the start and mid-run, and the edges
//! of several clocks (`nlb_verif::clocks`).

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

/// `nlb_verif::clocks`: edges of two clocks in time order, coinciding edges reported together,
/// a period change from the next edge, a pause and a resume.
#[test]
fn clocks_step_edges_in_time_order() {
    use nlb_verif::clocks::{ClockSpec, Clocks};
    use nlb_verif::models::AsyncFifo;
    let mut sim = Verilated::new::<AsyncFifo>().expect("model");
    let specs = [
        ClockSpec {
            port: "s_clk",
            period_ps: 3000,
            phase_ps: 1000,
        },
        ClockSpec {
            port: "m_clk",
            period_ps: 2000,
            phase_ps: 1000,
        },
    ];
    let mut clocks = Clocks::new(&mut sim, &specs).expect("clocks");
    let s_clk = sim.port("s_clk").expect("s_clk");
    let mut seen = Vec::new();
    for _ in 0..6 {
        let e = clocks.next_edge(&mut sim).expect("step").expect("an edge");
        // Before the edge both clocks are low.
        assert!(!sim.get_bit(s_clk).expect("s_clk") || !e.has(0));
        seen.push((e.time_ps, e.has(0), e.has(1)));
        clocks.fire(&mut sim, e).expect("fire");
        if e.has(0) {
            assert!(
                sim.get_bit(s_clk).expect("s_clk"),
                "s_clk high after its edge"
            );
        }
    }
    // s: 1000, 4000, 7000; m: 1000, 3000, 5000, 7000, 9000.
    assert_eq!(
        seen,
        vec![
            (1000, true, true),
            (3000, false, true),
            (4000, true, false),
            (5000, false, true),
            (7000, true, true),
            (9000, false, true),
        ]
    );
    assert_eq!((clocks.rises(0), clocks.rises(1)), (3, 5));
    // m_clk paused: only s_clk edges (10000, 13000); then m_clk from 12000 at 1000 ps.
    clocks.pause(1);
    clocks.set_period(1, 1000);
    let mut times = Vec::new();
    for i in 0..4 {
        let e = clocks.next_edge(&mut sim).expect("step").expect("an edge");
        times.push((e.time_ps, e.has(0), e.has(1)));
        clocks.fire(&mut sim, e).expect("fire");
        if i == 0 {
            clocks.resume(1, 2000);
        }
    }
    assert_eq!(
        times,
        vec![
            (10000, true, false),
            (12000, false, true),
            (13000, true, true),
            (14000, false, true),
        ]
    );
}
