//! nlb-offload's OpenNIC plugin in stand-ins of the shell (`nlb_verif::board`): the 322 MHz
//! MAC side with no receive `tready`, the 250 MHz QDMA side and the 125 MHz register side in one
//! simulation. The driver finds the card through BAR 2 at the OpenNIC register window, reads
//! its identity and loads a compiled example configuration through its loader exactly as into
//! the card; the golden model's device gets the same load. Then received frames go in back to
//! back (some marked bad by the MAC, which must never reach the pipeline) while the host sends
//! frames of its own up the QDMA: every transmitted frame is either
//! the model's output for the next forwarded packet or the host's next frame (frames are
//! interleaved whole), the frames sent up to the host are the frames the model passes
//! (unchanged: ARP among them, as a host stack needs) and the ones it punts (without their punt
//! header), each kind in its order, the plugin's counters agree, and no shell rule is broken (transmit
//! `tvalid` held through each frame, `tuser` of the card-to-host stream, AXI protocols, the
//! shell's receive adapter never overflowing).

use nlb_driver::device::Device;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::{discover, ModelHandle};
use nlb_hw::blocks::queues;
use nlb_hw::enums::{Reason, Verdict};
use nlb_verif::axil::Completion;
use nlb_verif::bench::seed_from_env;
use nlb_verif::board::{BoardDevice, BoardTiming, MacFrame};
use nlb_verif::clocks::opennic;
use nlb_verif::scenario::Scenario;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::path::Path;

/// BAR 2 byte offsets: the 250 MHz box's window, the 322 MHz box's (the plugin's) and the
/// plugin's own registers after nlb_top's 64 KiB.
const BOX_250: u32 = 0x10_0000;
const BOX_322: u32 = 0x20_0000;
const PLUGIN_REGS: u32 = BOX_322 + 0x1_0000;
/// The largest part of a frame the punt stream carries (docs/pipeline.md section 13).
const PUNT_BYTES: usize = 9728;
const DECERR: u32 = 3;

fn read(card: &mut BoardDevice, addr: u32) -> Completion {
    card.bar2(addr, None)
        .unwrap_or_else(|e| panic!("BAR 2 read at {addr:#x}: {e}"))
}

fn data(c: Completion) -> u32 {
    match c {
        Completion::Read { data, resp: 0, .. } => data,
        other => panic!("a read answered {other:?}"),
    }
}

fn resp(c: Completion) -> u32 {
    match c {
        Completion::Read { resp, .. } | Completion::Write { resp, .. } => resp,
    }
}

/// The model's punted frames, popped through its punt queue registers: the frame bytes only.
fn model_punts(model: &mut ModelHandle) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let status = model.read32(queues::PUNT_STATUS).expect("status");
        if queues::PuntStatus::from_word(status).count == 0 {
            return out;
        }
        model
            .write32(queues::PUNT_POP, queues::PuntPop { pop: true }.word())
            .expect("pop");
        let len = model.read32(queues::PUNT_LEN).expect("len") as usize;
        let mut bytes: Vec<u8> = (0..len.div_ceil(4) as u32)
            .flat_map(|i| {
                model
                    .read32(queues::PUNT_DATA + 4 * i)
                    .expect("data")
                    .to_le_bytes()
            })
            .collect();
        bytes.truncate(len);
        out.push(bytes);
    }
}

/// An ARP request (who has `target`?), padded to the 60-byte minimum: not IP, so passed to the
/// host's network stack whatever the tables hold (docs/pipeline.md section 2).
fn arp_request(n: u32, target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x0a, n.to_be_bytes()[3]]);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    // Ethernet, IPv4, 6-byte and 4-byte addresses, request.
    f[14..22].copy_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.copy_within(6..12, 22);
    f[28..32].copy_from_slice(&[10, 0, 0, 1]);
    f[38..42].copy_from_slice(&target);
    f
}

/// Whether `got` is `a` and `b` interleaved, each in its order: `Err(k)` names the first frame
/// of `got` that neither can be next (or `got.len()` when frames are missing at the end).
fn interleaving(got: &[Vec<u8>], a: &[Vec<u8>], b: &[Vec<u8>]) -> Result<(), usize> {
    // The counts of `a` taken after each frame that some interleaving reaches.
    let mut reach = std::collections::BTreeSet::from([0usize]);
    for (k, g) in got.iter().enumerate() {
        let mut next = std::collections::BTreeSet::new();
        for &i in &reach {
            if a.get(i) == Some(g) {
                next.insert(i + 1);
            }
            if b.get(k - i) == Some(g) {
                next.insert(i);
            }
        }
        if next.is_empty() {
            return Err(k);
        }
        reach = next;
    }
    if got.len() == a.len() + b.len() && reach.contains(&a.len()) {
        Ok(())
    } else {
        Err(got.len())
    }
}

/// A frame of the host's own (EtherType 0x88B5, IEEE's local experimental one, so it can never
/// be a forwarded frame): numbered, `len` bytes.
fn host_frame(n: u32, len: usize, rng: &mut StdRng) -> Vec<u8> {
    let mut f = vec![0u8; len];
    rng.fill(&mut f[..]);
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x77]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xB5]);
    f[14..18].copy_from_slice(&n.to_be_bytes());
    f
}

#[test]
fn the_driver_finds_loads_and_runs_the_opennic_plugin() {
    let seed = seed_from_env(0xb0a2_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    // The MAC and the QDMA take what they are offered seven clocks in ten: the transmit FIFOs
    // fill and empty, and the pipeline sees back-pressure.
    let timing = BoardTiming {
        mac_backpressure: 0.3,
        c2h_backpressure: 0.3,
        h2c_idle: 0.2,
        mac_rx_idle: 0.0,
    };
    let mut card = BoardDevice::new(seed, timing).expect("board model");

    // BAR 2 as the shell maps it: both boxes' windows, the plugin's own registers, and DECERR
    // where nothing answers.
    assert_eq!(
        data(read(&mut card, PLUGIN_REGS)),
        0x4E4C_5031,
        "the plugin's id"
    );
    assert_eq!(
        data(read(&mut card, PLUGIN_REGS + 4)),
        0x101,
        "one CMAC port, the host DMA port carried"
    );
    assert_eq!(
        data(read(&mut card, BOX_250)),
        0x4E4C_5032,
        "the 250 MHz box's id"
    );
    for addr in [0, BOX_322 + 0x2_0000, 0x30_0000] {
        assert_eq!(resp(read(&mut card, addr)), DECERR, "read at {addr:#x}");
    }
    let w = card.bar2(BOX_322 + 0x8_0000, Some(1)).expect("write");
    assert_eq!(resp(w), DECERR, "write outside every register");

    // The driver, as on the card: discovery through the OpenNIC window.
    let info = discover(&mut card).expect("the card is discovered");
    assert_eq!(info.profile.name, "sim");
    assert_eq!(info.firmware.board_id, 0x0280);
    assert_eq!(info.firmware.board_name(), "Alveo U280");
    assert_eq!(info.firmware.part_id, 0x04B7_D093, "xcu280's IDCODE");

    let mut model = ModelHandle::new(info.profile);
    let compiled = crate::compiled_example("web.yaml");
    // The card's loader starts from what a card out of reset holds (both banks empty, bank 0
    // active), read from a fresh model: reading both banks back through 125 MHz register
    // accesses takes minutes of simulation here (the read-back itself is tested against
    // nlb_top in device.rs). The load writes every entry through the card's table window and
    // reads each one back.
    let mut card_loader = Loader::attach(
        &mut ModelHandle::new(info.profile),
        info.profile,
        LoaderOptions::default(),
    )
    .expect("attach");
    let mut model_loader =
        Loader::attach(&mut model, info.profile, LoaderOptions::default()).expect("attach");
    let t_load = std::time::Instant::now();
    card_loader
        .load(&mut card, &compiled.tables, &compiled.nic)
        .expect("load into the card");
    let load_secs = t_load.elapsed().as_secs_f64();
    model_loader
        .load(&mut model, &compiled.tables, &compiled.nic)
        .expect("load into the model");

    // Traffic: scenario frames back to back into the MAC, host frames up the QDMA (sizes from
    // the smallest to a jumbo frame), at once.
    let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
    // Every 40th frame an ARP request, which the host's stack must see on the card.
    let frames: Vec<Vec<u8>> = (0..3000u32)
        .map(|n| {
            if n % 40 == 39 {
                arp_request(n, [10, 0, 0, (n % 250) as u8])
            } else {
                scenario.frame(&mut rng)
            }
        })
        .collect();
    let host: Vec<Vec<u8>> = (0..40u32)
        .map(|n| {
            let len = match n % 8 {
                0 => 60,
                1 => 65,
                2 => 9000,
                _ => rng.random_range(60..1515),
            };
            host_frame(n, len, &mut rng)
        })
        .collect();
    // Every 97th frame the MAC marks bad (its FCS did not match): the plugin drops it whole
    // before the pipeline, so only the others reach the model.
    let marked: Vec<MacFrame> = frames
        .iter()
        .enumerate()
        .map(|(n, f)| MacFrame {
            bytes: f.clone(),
            bad: n % 97 == 96,
        })
        .collect();
    let bad = marked.iter().filter(|f| f.bad).count() as u32;
    let frames: Vec<Vec<u8>> = marked
        .iter()
        .filter(|f| !f.bad)
        .map(|f| f.bytes.clone())
        .collect();
    let t_traffic = std::time::Instant::now();
    let out = card
        .traffic_marked(marked, host.clone())
        .expect("traffic through the card");
    let traffic_secs = t_traffic.elapsed().as_secs_f64();

    let mut forwarded = Vec::new();
    let mut punted = Vec::new();
    let mut passed = Vec::new();
    let mut events = 0u32;
    let mut buf = vec![0u8; 16384];
    for f in &frames {
        let r = model.lock().receive(f, &mut buf).expect("model traffic");
        if f.get(12..14) == Some(&[0x08, 0x06][..]) {
            assert_eq!(
                (r.verdict, r.reason),
                (Verdict::Pass, Reason::NotIp),
                "ARP is not IP: passed to the host"
            );
        }
        match r.verdict {
            Verdict::Forward => forwarded.push(buf[..r.out_len].to_vec()),
            Verdict::Punt => punted.push(f[..f.len().min(PUNT_BYTES)].to_vec()),
            Verdict::Pass => passed.push(f.clone()),
            Verdict::Drop => {}
        }
        events += u32::from(r.event.is_some());
    }
    // The model's punt queue (its depth's worth; the card's stream has no such limit) holds
    // the first of them, as the punt stream carries them.
    let queued = model_punts(&mut model);
    assert!(
        !queued.is_empty() && punted.starts_with(&queued),
        "the model's punt queue holds the first punted frames"
    );

    // The MAC's transmit side: the forwarded frames and the host's, each in its own order,
    // interleaved whole.
    let (mut fi, mut hi) = (0, 0);
    for (i, f) in out.mac_tx.iter().enumerate() {
        if forwarded.get(fi) == Some(f) {
            fi += 1;
        } else if host.get(hi) == Some(f) {
            hi += 1;
        } else {
            panic!(
                "transmitted frame {i} ({} bytes) is neither forwarded frame {fi} nor host \
                 frame {hi}",
                f.len()
            );
        }
    }
    assert_eq!(fi, forwarded.len(), "every forwarded frame went out");
    assert_eq!(hi, host.len(), "every host frame went out");
    // Up to the host: the passed frames and the punted ones, each in its order.
    if let Err(k) = interleaving(&out.c2h, &passed, &punted) {
        panic!(
            "frame {k} sent up to the host ({} sent in all: {}) is neither the next passed nor \
             the next punted frame (the model passed {} and punted {})",
            out.c2h.len(),
            out.c2h
                .get(k)
                .map_or("none left".to_string(), |f| format!("{} bytes", f.len())),
            passed.len(),
            punted.len()
        );
    }
    assert!(
        !forwarded.is_empty() && !punted.is_empty() && passed.len() >= frames.len() / 40,
        "the traffic forwards, punts and passes"
    );

    // The plugin's counters, as the driver reads them.
    let plugin = nlb_driver::opennic::plugin_status(&mut card)
        .expect("plugin registers")
        .expect("the card has the plugin's registers");
    assert_eq!(
        plugin,
        nlb_driver::opennic::PluginStatus {
            cmac_ports: 1,
            host_dma: true,
            rx_err_frames: bad,
            host_tx_drops: 0,
            host_rx_drops: 0,
            events_lost: events,
        },
        "rx_err_frames: the frames the MAC marked bad; events_lost: every event, with no event \
         ring set up"
    );
    let v = card.violations().expect("violations");
    assert!(v.is_empty(), "shell rules broken: {v:#?}");

    let received_bytes: usize = frames.iter().map(Vec::len).sum();
    eprintln!(
        "board: {} good frames ({received_bytes} bytes) and {bad} marked bad received, {} \
         forwarded, {} punted, {} passed, {} host frames sent, in {} MAC clocks ({:.2} us at {} \
         MHz); simulation: load {load_secs:.1} s, traffic {traffic_secs:.1} s",
        frames.len(),
        forwarded.len(),
        punted.len(),
        passed.len(),
        host.len(),
        out.mac_clocks,
        out.mac_clocks as f64 / opennic::CMAC_MHZ,
        opennic::CMAC_MHZ
    );
}

/// Runs hw/boards/opennic/build.sh with `args`: (exit code, stdout + stderr).
fn build_sh(args: &[&str]) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/boards/opennic/build.sh");
    let out = std::process::Command::new(script)
        .args(args)
        .env_remove("OPENNIC_SHELL")
        .output()
        .expect("bash runs build.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The build script without Vivado: it refuses what cannot build (with the reason), and for
/// each board writes a plugin copy whose stamps and paths Verilator accepts: the shell stand-ins
/// are linted against the copy's include files, as Vivado will read them.
#[test]
fn the_build_script_checks_its_inputs_and_writes_a_plugin_the_shell_can_read() {
    let dir = std::env::temp_dir().join(format!("nlb-board-build-{}", std::process::id()));
    let shell = dir.join("open-nic-shell");
    for d in ["script/board_settings", "src/box_322mhz"] {
        std::fs::create_dir_all(shell.join(d)).expect("fake shell");
    }
    for f in ["script/build.tcl", "src/box_322mhz/box_322mhz.sv"] {
        std::fs::write(shell.join(f), "").expect("fake shell");
    }
    for b in ["au250", "au280"] {
        std::fs::write(shell.join(format!("script/board_settings/{b}.tcl")), "").expect("board");
    }
    let shell_s = shell.to_string_lossy().to_string();

    let refused: [(&[&str], &str); 5] = [
        (&["vcu118", "--shell", &shell_s], "unknown board 'vcu118'"),
        (&["au280"], "no OpenNIC shell checkout"),
        (
            &["au280", "--shell", "/nonexistent"],
            "is not an OpenNIC shell checkout",
        ),
        (&["au55c", "--shell", &shell_s], "has no board 'au55c'"),
        (
            &["au280", "--shell", &shell_s, "--host-bridge"],
            "has no m_axi_host_* ports",
        ),
    ];
    for (args, why) in refused {
        let (code, text) = build_sh(args);
        assert_eq!(code, 2, "build.sh {args:?}: {text}");
        assert!(
            text.contains(why),
            "build.sh {args:?} says why ({why}): {text}"
        );
    }

    for (board, board_id, part_id) in [("au250", "0250", "04B57093"), ("au280", "0280", "04B7D093")]
    {
        let out = dir.join(board);
        let out_s = out.to_string_lossy().to_string();
        let (code, text) = build_sh(&[board, "--shell", &shell_s, "--out", &out_s, "--dry-run"]);
        assert_eq!(code, 0, "{text}");
        assert!(
            text.contains(&format!("-board {board} ")) && text.contains("-user_plugin"),
            "the Vivado command: {text}"
        );
        let params = std::fs::read_to_string(out.join("plugin/box_322mhz/nlb_build_params.vh"))
            .expect("the build stamps");
        assert!(
            params.contains(&format!("NLB_BOARD_ID = 32'h{board_id}")),
            "{params}"
        );
        assert!(
            params.contains(&format!("NLB_PART_ID = 32'h{part_id}")),
            "{params}"
        );
        let tcl = std::fs::read_to_string(out.join("plugin/nlb_build.tcl")).expect("paths");
        assert!(tcl.contains("set nlb_hw_dir"), "{tcl}");

        // The shell stand-ins, with the copy's include folders in place of the checkout's.
        let hw = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw");
        let verilator = std::env::var("VERILATOR").unwrap_or_else(|_| "verilator".into());
        let lint = std::process::Command::new(verilator)
            .args(["--lint-only", "-Wall", "--top-module", "nlb_opennic_sim"])
            .arg(format!("-I{}", hw.join("rtl").display()))
            .args(["-y".into(), hw.join("rtl")])
            .args(["-y".into(), hw.join("boards/opennic/rtl")])
            .args(["-y".into(), hw.join("boards/opennic/sim")])
            .args(["-y".into(), out.join("plugin/box_322mhz")])
            .args(["-y".into(), out.join("plugin/box_250mhz")])
            .arg(format!("-I{}", out.join("plugin/box_322mhz").display()))
            .arg(format!("-I{}", out.join("plugin/box_250mhz").display()))
            .arg(hw.join("boards/opennic/sim/nlb_opennic_sim.v"))
            .output()
            .expect("Verilator runs");
        assert!(
            lint.status.success() && lint.stderr.is_empty(),
            "{board}: {}",
            String::from_utf8_lossy(&lint.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// Host memory of the ring test: write-back records, the two rings, the punt buffers.
const IOVA: u64 = 0x2_4000_0000;
const WB: u64 = IOVA;
const PUNT_RING: u64 = IOVA + 0x1000;
const EVENT_RING: u64 = IOVA + 0x2000;
const INJECT_RING: u64 = IOVA + 0x3000;
const BUFS: u64 = IOVA + 0x4000;
const PUNT_LOG2: u8 = 4;
const EVENT_LOG2: u8 = 5;
const RING_MEM: usize = 0x4000 + (1 << PUNT_LOG2) * PUNT_BYTES;

/// The host rings through the plugin's host DMA port: `nlb_top`'s AXI4 master crossed from the
/// CMAC clock to the QDMA clock (`nlb_axi_cdc`) and its MSI-X requests crossed the same way,
/// served from host memory with PCIe-like latencies. The card and the golden model get the
/// same load, the same `dma` register writes (through the driver's register path), the same
/// descriptors in host memories of the same layout and the same frames (with gaps, so the
/// receive side keeps every frame); afterwards every byte of the two host memories and the
/// `dma` registers must agree, both rings must have completed and dropped records, and each
/// ring must have raised its interrupt.
#[test]
fn the_host_rings_cross_to_the_qdma_clock_and_match_the_model() {
    use nlb_hw::blocks::dma;
    use nlb_hw::enums::Ring;
    use nlb_hw::layouts::{InjectDesc, InjectHeader, PuntDesc, RingWb};
    use nlb_verif::host_mem::HostMemory;

    let seed = seed_from_env(0xb0a2_0002);
    let mut rng = StdRng::seed_from_u64(seed);
    let card_mem = HostMemory::new(IOVA, RING_MEM);
    let model_mem = HostMemory::new(IOVA, RING_MEM);
    let timing = BoardTiming {
        mac_backpressure: 0.2,
        c2h_backpressure: 0.2,
        h2c_idle: 0.2,
        mac_rx_idle: 0.8,
    };
    let mut card = BoardDevice::with_memory(seed, timing, card_mem.clone()).expect("board model");
    let info = discover(&mut card).expect("the card is discovered");
    let mut model = ModelHandle::new(info.profile);
    model.lock().set_dma_port(Some(Box::new(model_mem.port())));
    let compiled = crate::compiled_example("web.yaml");
    for dev in [&mut card as &mut dyn Device, &mut model] {
        let mut loader = Loader::attach(
            &mut ModelHandle::new(info.profile),
            info.profile,
            LoaderOptions::default(),
        )
        .expect("attach");
        loader
            .load(dev, &compiled.tables, &compiled.nic)
            .expect("load");
    }

    // Every punt slot posted with a whole buffer; fewer slots given than records will come,
    // so both rings also drop and count.
    for slot in 0..1u64 << PUNT_LOG2 {
        let d = PuntDesc {
            addr: BUFS + slot * PUNT_BYTES as u64,
            len: PUNT_BYTES as u16,
            reserved: 0,
        };
        let words = d.pack().expect("punt descriptor");
        for m in [&card_mem, &model_mem] {
            assert!(m.write_words(PUNT_RING + 16 * slot, &words));
        }
    }
    let irq = dma::PuntIrq {
        count: 2,
        usecs: 0,
        enable: true,
    }
    .word();
    let mut writes = vec![
        (
            dma::CTRL,
            dma::Ctrl {
                enable: true,
                hw_learn: false,
            }
            .word(),
        ),
        (dma::WB_LO, WB as u32),
        (dma::WB_HI, (WB >> 32) as u32),
    ];
    for (lo, hi, size, ir, base, log2) in [
        (
            dma::PUNT_BASE_LO,
            dma::PUNT_BASE_HI,
            dma::PUNT_SIZE,
            dma::PUNT_IRQ,
            PUNT_RING,
            PUNT_LOG2,
        ),
        (
            dma::EVENT_BASE_LO,
            dma::EVENT_BASE_HI,
            dma::EVENT_SIZE,
            dma::EVENT_IRQ,
            EVENT_RING,
            EVENT_LOG2,
        ),
    ] {
        let size_word = dma::PuntSize { log2, enable: true }
            .word()
            .expect("ring size");
        writes.extend([
            (lo, base as u32),
            (hi, (base >> 32) as u32),
            (size, size_word),
            (ir, irq),
        ]);
    }
    writes.push((dma::PUNT_HOST, (1u32 << PUNT_LOG2) - 3));
    writes.push((dma::EVENT_HOST, (1u32 << EVENT_LOG2) - 4));
    for (reg, v) in writes {
        card.write32(reg, v).expect("card register");
        model.write32(reg, v).expect("model register");
    }

    let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
    let frames: Vec<Vec<u8>> = (0..400).map(|_| scenario.frame(&mut rng)).collect();
    let out = card
        .traffic(frames.clone(), Vec::new())
        .expect("traffic through the card");
    let mut buf = vec![0u8; 16384];
    let mut forwarded = Vec::new();
    let mut passed = Vec::new();
    for f in &frames {
        let r = model.lock().receive(f, &mut buf).expect("model traffic");
        match r.verdict {
            Verdict::Forward => forwarded.push(buf[..r.out_len].to_vec()),
            Verdict::Pass => passed.push(f.clone()),
            Verdict::Punt | Verdict::Drop => {}
        }
    }
    assert_eq!(out.mac_tx, forwarded, "forwarded frames");
    assert!(
        out.c2h == passed,
        "up the QDMA stream: the {} passed frames only (punted frames go to the punt ring); \
         {} frames came",
        passed.len(),
        out.c2h.len()
    );

    let (c, m) = (card_mem.snapshot(), model_mem.snapshot());
    if let Some(at) = c.iter().zip(&m).position(|(a, b)| a != b) {
        panic!(
            "host memory differs first at IOVA {:#x} (card {:#04x}, model {:#04x})",
            IOVA + at as u64,
            c[at],
            m[at]
        );
    }
    for (name, reg) in [
        ("punt_dev", dma::PUNT_DEV),
        ("punt_drops", dma::PUNT_DROPS),
        ("event_dev", dma::EVENT_DEV),
        ("event_drops", dma::EVENT_DROPS),
        ("faults", dma::FAULTS),
    ] {
        assert_eq!(
            card.read32(reg).expect("card"),
            model.read32(reg).expect("model"),
            "dma.{name}"
        );
    }
    let wb = |ring: Ring| {
        let b = model_mem
            .read(WB + 16 * ring as u64, 16)
            .expect("write-back");
        let w: Vec<u32> = b
            .chunks(4)
            .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            .collect();
        RingWb::unpack(&w).expect("write-back record")
    };
    let (pw, ew) = (wb(Ring::Punt), wb(Ring::Event));
    assert!(
        pw.index > 0 && pw.drops > 0 && ew.index > 0 && ew.drops > 0,
        "both rings completed and dropped records: punt {pw:?}, event {ew:?}"
    );
    let irqs = card_mem.interrupts();
    for ring in [Ring::Punt, Ring::Event] {
        assert!(
            irqs.contains(&(ring as u16)),
            "an interrupt on vector {}",
            ring as u16
        );
    }
    assert_eq!(
        data(read(&mut card, PLUGIN_REGS + 0x14)),
        0,
        "no event lost"
    );

    // The inject ring across the crossing: frames the host posts (one of them jumbo, read in
    // several bursts) leave by the MAC exactly as the model transmits them.
    let mut posted = 0u32;
    for k in 0..8u64 {
        let mut frame = scenario.frame(&mut rng);
        if k == 3 {
            frame.resize(4000, 0x5a);
        }
        let desc = InjectDesc {
            addr: BUFS + k * PUNT_BYTES as u64,
            header: [InjectHeader {
                backend: rng.random_range(0..4),
                pool: 0,
                frame_len: frame.len() as u16,
            }],
            reserved: 0,
        };
        let words = desc.pack().expect("inject descriptor");
        for m in [&card_mem, &model_mem] {
            assert!(m.write_words(INJECT_RING + 16 * k, &words));
            assert!(m.write(desc.addr, &frame));
        }
        posted += 1;
    }
    let inject_size = dma::InjectSize {
        log2: 4,
        enable: true,
    }
    .word()
    .expect("ring size");
    for (reg, v) in [
        (dma::INJECT_BASE_LO, INJECT_RING as u32),
        (dma::INJECT_BASE_HI, (INJECT_RING >> 32) as u32),
        (dma::INJECT_SIZE, inject_size),
        (dma::INJECT_HOST, posted),
    ] {
        card.write32(reg, v).expect("card register");
        model.write32(reg, v).expect("model register");
    }
    let injected = card
        .traffic(Vec::new(), Vec::new())
        .expect("injected frames through the card");
    let want: Vec<Vec<u8>> = model
        .lock()
        .take_injected()
        .into_iter()
        .filter(|i| i.result.verdict == Verdict::Forward)
        .map(|i| i.frame)
        .collect();
    assert!(!want.is_empty(), "some injected frames are forwarded");
    assert_eq!(injected.mac_tx, want, "injected frames out of the MAC");
    assert_eq!(
        card.read32(dma::INJECT_DEV).expect("card"),
        model.read32(dma::INJECT_DEV).expect("model"),
        "dma.inject_dev"
    );

    let v = card.violations().expect("violations");
    assert!(v.is_empty(), "shell rules broken: {v:#?}");
    eprintln!(
        "board rings: {} frames; punt ring {pw:?}; event ring {ew:?}; {} interrupts; {} MAC \
         clocks; {posted} frames injected, {} forwarded",
        frames.len(),
        irqs.len(),
        out.mac_clocks,
        want.len()
    );
}
