//! `nlbctl flash | fw-info | reboot` against an `nlb-sim` process hosting the flash chip:
//! the operator's path end to end, over the socket device.

use nlb_system_tests::harness::nlbctl;
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
    let child = Command::new(nlb_system_tests::bin("nlb-sim"))
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

/// Big-endian bytes of configuration words.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

const SYNC: u32 = 0xAA99_5566;
const NOOP: u32 = 0x2000_0000;
/// Type-1 write of one word to IDCODE (register 0x0C), and to CMD (0x04) with DESYNC (0x0D).
const IDCODE_WRITE: u32 = 0x3001_8001;
const CMD_WRITE: u32 = 0x3000_8001;
const DESYNC: u32 = 0x0D;
const XCU250_IDCODE: u32 = 0x04B5_7093;

/// A `.bit` file: the fixed 13 bytes, then the fields as given (key, 16-bit length and value;
/// `e` with a 32-bit length), as docs/flashing.md describes them.
fn bit_file(fields: &[(u8, &[u8])]) -> Vec<u8> {
    let mut f = vec![
        0x00, 0x09, 0x0F, 0xF0, 0x0F, 0xF0, 0x0F, 0xF0, 0x0F, 0xF0, 0x00, 0x00, 0x01,
    ];
    for (key, value) in fields {
        f.push(*key);
        if *key == b'e' {
            f.extend((value.len() as u32).to_be_bytes());
        } else {
            f.extend((value.len() as u16).to_be_bytes());
        }
        f.extend(*value);
    }
    f
}

/// Every way `nlbctl flash` refuses a bitstream names the file, whether the parser refuses it
/// or the check against the card (part, completeness, size) does: the operator must know
/// which file to fix, not be pointed at the card.
#[test]
fn every_bitstream_refusal_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nic.sock");
    let _sim = start(&socket);
    let spec = format!("sim:{}", socket.display());
    let good = firmware_sim::flash::bitstream::synthetic(
        firmware_sim::flash::XCU280_IDCODE,
        Some(1),
        100,
        1,
    );
    let a: &[u8] = b"nlb_top;UserID=0XFFFFFFFF;Version=2023.2\0";
    let part: &[u8] = b"xcu280-fsvh2892-2L-e\0";
    let (date, time): (&[u8], &[u8]) = (b"2024/05/01\0", b"12:34:56\0");
    let mut trailing = bit_file(&[
        (b'a', a),
        (b'b', part),
        (b'c', date),
        (b'd', time),
        (b'e', &good),
    ]);
    trailing.push(0);
    let mut bad_key = bit_file(&[(b'a', a)]);
    bad_key.push(b'x');
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.bin", vec![], "the file is empty"),
        (
            "cut.bit",
            bit_file(&[(b'a', a), (b'b', part)])[..30].to_vec(),
            ".bit header truncated",
        ),
        ("bad-key.bit", bad_key, "unexpected field key 0x78"),
        (
            "no-part.bit",
            bit_file(&[(b'a', a), (b'c', date), (b'd', time), (b'e', &good)]),
            "no 'b' field",
        ),
        (
            "trailing.bit",
            trailing,
            "1 bytes after the configuration data",
        ),
        ("erased.bin", vec![0xFF; 5000], "no configuration sync word"),
        (
            "bad-packet.bin",
            words(&[0xFFFF_FFFF, SYNC, 0x6000_0000]),
            "malformed configuration packet 0x60000000",
        ),
        (
            "packets-cut.bin",
            words(&[SYNC, NOOP, 0x5000_0100, 1, 2]),
            "runs past the end",
        ),
        // Refused against the card: content and part.
        (
            "no-desync.bin",
            words(&[
                SYNC,
                NOOP,
                IDCODE_WRITE,
                firmware_sim::flash::XCU280_IDCODE,
                NOOP,
            ]),
            "no DESYNC command",
        ),
        (
            "other-part.bin",
            firmware_sim::flash::bitstream::synthetic(XCU250_IDCODE, Some(1), 100, 1),
            "the bitstream is for xcu250",
        ),
        (
            "which-part.bin",
            words(&[SYNC, NOOP, CMD_WRITE, DESYNC]),
            "cannot tell which FPGA part",
        ),
    ];
    let check = |path: &Path, want: &str, content: bool| {
        let shown = path.display().to_string();
        let o = nlbctl(&["flash", "--device", &spec, &shown]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{shown}: a user error: {err}");
        assert!(err.contains(want), "{shown}: {err}");
        assert!(
            err.starts_with(&format!("error: {shown}")),
            "the message leads with the file: {err}"
        );
        if content {
            assert!(
                !err.starts_with(&format!("error: {spec}")),
                "a bitstream's refusal reported against the card: {err}"
            );
        }
    };
    for (name, bytes, want) in &cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        check(&path, want, true);
    }
    // Larger than a slot of the card's flash (128 MiB less the marker's 4 KiB on the
    // simulated card's 256 MiB chip): an FDRI write of 32 Mi zero words, sparse on disk.
    let big = dir.path().join("too-large.bin");
    {
        use std::io::{Seek, SeekFrom, Write};
        let frame_words: u32 = 32 << 20;
        let mut f = std::fs::File::create(&big).unwrap();
        f.write_all(&words(&[
            SYNC,
            NOOP,
            IDCODE_WRITE,
            firmware_sim::flash::XCU280_IDCODE,
            0x3000_4000,
            0x5000_0000 | frame_words,
        ]))
        .unwrap();
        f.seek(SeekFrom::Current(i64::from(frame_words) * 4))
            .unwrap();
        f.write_all(&words(&[CMD_WRITE, DESYNC])).unwrap();
    }
    check(&big, "a slot of this flash holds at most 134213632", true);
    // A file that cannot be read.
    let missing = dir.path().join("missing.bit");
    let shown = missing.display().to_string();
    let o = nlbctl(&["flash", "--device", &spec, &shown]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&shown) && err.contains("cannot read"), "{err}");
}

/// Starts `nlbctl flash` and kills it (SIGKILL) while it programs pages: the card keeps what
/// the tool left, often a page program still running or a command half sent.
fn kill_a_flash(spec: &str, file: &Path) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(nlb_system_tests::bin("nlbctl"))
        .args(["flash", "--device", spec, file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("nlbctl runs");
    let err = BufReader::new(child.stderr.take().unwrap());
    // Without a terminal the progress is one line per phase.
    let mut phases = Vec::new();
    for line in err.lines() {
        let line = line.unwrap();
        let program = line == "program ...";
        phases.push(line);
        if program {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(3));
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(
        phases.last().map(String::as_str) == Some("program ...") && !status.success(),
        "the flash was to be killed while programming: {phases:?}, {status}"
    );
}

/// docs/flashing.md: after an interrupted flash, "`flash` can simply be run again". Each of
/// `fw-info`, `reboot` and `flash` runs right after a flash killed while programming, and
/// works at once (it waits for the page program the killed tool left running instead of
/// reading the busy chip's ID as ff ff ff).
#[test]
fn commands_work_at_once_after_a_killed_flash() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nic.sock");
    let _sim = start(&socket);
    let spec = format!("sim:{}", socket.display());
    let xcu280 = firmware_sim::flash::XCU280_IDCODE;
    // 256 KiB: about a thousand pages to program, so the kill lands in the middle.
    let big = dir.path().join("big.bin");
    std::fs::write(
        &big,
        firmware_sim::flash::bitstream::synthetic(xcu280, Some(0xB16_0001), 65_536, 3),
    )
    .unwrap();
    let small = dir.path().join("small.bin");
    std::fs::write(
        &small,
        firmware_sim::flash::bitstream::synthetic(xcu280, Some(0xC0DE_0099), 5_000, 4),
    )
    .unwrap();

    kill_a_flash(&spec, &big);
    let info = ok(nlbctl(&["fw-info", "--device", &spec, "--json"]));
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["flash"]["chip"], "MT25QU02G", "{info}");

    kill_a_flash(&spec, &big);
    let out = ok(nlbctl(&["reboot", "--device", &spec, "--slot", "fallback"]));
    assert!(out.contains("running the fallback image"), "{out}");

    kill_a_flash(&spec, &big);
    let out = ok(nlbctl(&[
        "flash",
        "--device",
        &spec,
        small.to_str().unwrap(),
        "--reboot",
    ]));
    assert!(out.contains("build 0xc0de0099"), "{out}");
}
