//! `nlbctl flash | fw-info | reboot` against an `nlb-sim` process hosting the flash chip:
//! the operator's path end to end, over the socket device.

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

struct SimProcess(Child);

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(socket: &Path) -> SimProcess {
    let child = Command::new(env!("CARGO_BIN_EXE_nlb-sim"))
        .args(["--socket", socket.to_str().unwrap()])
        .spawn()
        .expect("nlb-sim starts");
    let sim = SimProcess(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(Instant::now() < deadline, "nlb-sim did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    sim
}

fn nlbctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .output()
        .expect("nlbctl runs")
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn flash_reboot_and_fw_info_through_nlb_sim() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nic.sock");
    let _sim = start(&socket);
    let spec = format!("sim:{}", socket.display());

    // A bitstream for the simulated card's FPGA (xcu280), and one for another part.
    let good = dir.path().join("nlb_top.bin");
    std::fs::write(
        &good,
        firmware_sim::flash::bitstream::synthetic(
            firmware_sim::flash::XCU280_IDCODE,
            Some(0xC0DE_0042),
            20_000,
            7,
        ),
    )
    .unwrap();
    let other = dir.path().join("other.bin");
    std::fs::write(
        &other,
        firmware_sim::flash::bitstream::synthetic(0x04B5_7093, Some(1), 100, 1),
    )
    .unwrap();

    let refused = nlbctl(&["flash", "--device", &spec, other.to_str().unwrap()]);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "a bitstream for another part is a user error"
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--force"), "says how to override: {err}");
    let refused = nlbctl(&[
        "flash",
        "--device",
        &spec,
        "--slot",
        "fallback",
        good.to_str().unwrap(),
    ]);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "the fallback slot needs --force"
    );

    let out = ok(nlbctl(&[
        "flash",
        "--device",
        &spec,
        good.to_str().unwrap(),
        "--reboot",
    ]));
    // The CRC printed is the catalogue CRC-32 of the file (computed here independently).
    let mut crc = !0u32;
    for &b in &std::fs::read(&good).unwrap() {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    assert!(out.contains(&format!("{:08x}", !crc)), "{out}");
    let info = ok(nlbctl(&["fw-info", "--device", &spec]));
    assert!(
        info.contains("build 0xc0de0042"),
        "the new image runs: {info}"
    );
}
