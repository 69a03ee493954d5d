//! nlb-sim as a process: `nlbctl load|stats|status --device sim:PATH` against it while it
//! replays a pcap in a loop, and the driver library over the same socket.

use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::{discover, SocketDevice};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    nlb_system_tests::bins::workspace()
}

fn nlbctl(args: &[&str]) -> Output {
    Command::new(nlb_system_tests::bin("nlbctl"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("nlbctl runs")
}

fn ok(o: Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {out}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The nlb-sim child, killed when the test ends however it ends.
struct NlbSim(Child);

impl Drop for NlbSim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(socket: &Path, pcap: &Path) -> NlbSim {
    let child = Command::new(nlb_system_tests::bin("nlb-sim"))
        .args(["--socket", socket.to_str().unwrap()])
        .args(["--pcap", pcap.to_str().unwrap(), "--loop", "--wait-enable"])
        .spawn()
        .expect("nlb-sim starts");
    let sim = NlbSim(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(Instant::now() < deadline, "nlb-sim did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    sim
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("JSON output")
}

#[test]
fn loads_under_looping_traffic_through_the_cli_and_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("web.img");
    let pcap = dir.path().join("in.pcap");
    let down = dir.path().join("down.yaml");
    std::fs::write(&down, "web-1: {healthy: false}\n").unwrap();
    ok(nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        img.to_str().unwrap(),
    ]));
    ok(nlbctl(&[
        "traffic",
        "examples/web.yaml",
        "-o",
        pcap.to_str().unwrap(),
    ]));
    let socket = dir.path().join("nlb.sock");
    let _sim = start(&socket, &pcap);
    let spec = format!("sim:{}", socket.display());

    let status = json(nlbctl(&["status", "--device", &spec, "--json"]));
    assert_eq!(status["enabled"], false);
    assert_eq!(status["profile"], "sim");

    // Alternate the healthy image and the configuration with web-1 down, while the pcap
    // loops through the pipeline.
    for k in 0..6 {
        let out = if k % 2 == 0 {
            ok(nlbctl(&["load", "--device", &spec, img.to_str().unwrap()]))
        } else {
            ok(nlbctl(&[
                "load",
                "--device",
                &spec,
                "examples/web.yaml",
                "--health",
                down.to_str().unwrap(),
            ]))
        };
        assert!(out.contains(&format!("generation {}", k + 1)), "{out}");
    }
    let status = json(nlbctl(&["status", "--device", &spec, "--json"]));
    assert_eq!(status["enabled"], true);
    assert_eq!(status["generation"], 6);
    assert_eq!(status["active_bank"], 0);

    // The library over the same socket: a restarted loader finds the last image in place.
    let mut dev = SocketDevice::connect(&socket).unwrap();
    let info = discover(&mut dev).unwrap();
    let mut loader = Loader::attach(&mut dev, info.profile, LoaderOptions::default()).unwrap();
    let image = flowtable_compiler::Image::load(&img).unwrap();
    let report = loader.load_image(&mut dev, &image).unwrap();
    assert_eq!(report.generation, 7);

    // Traffic ran: web-1 took packets (it was healthy in half the loads), nothing reached a
    // pool without backends.
    std::thread::sleep(Duration::from_millis(200));
    let stats = json(nlbctl(&[
        "stats",
        "--device",
        &spec,
        "--names",
        img.to_str().unwrap(),
        "--json",
    ]));
    assert!(
        stats["verdicts"]["forward"]["packets"].as_u64().unwrap() > 0,
        "{stats}"
    );
    assert_eq!(stats["reasons"]["no_backend"]["packets"], 0, "{stats}");
    let backends: Vec<&str> = stats["backends"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert!(backends.contains(&"web-1"), "{stats}");
    assert!(backends.contains(&"web-2"), "{stats}");

    // Errors name the device and say what to do.
    let o = nlbctl(&["status", "--device", "sim:/nonexistent/nlb.sock"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nlb-sim --socket"));
}

/// Frames the host injects leave nlb-sim as forwarded ones do (here into `--out`; on `--tx`
/// with interfaces, see docs/e2e.md): 150 frames, more than the 64 entries of the inject
/// queue, injected through the library one after another. nlb-sim takes each off the queue
/// as it is pushed, so the queue never fills; every frame is in the output, in order, sent to
/// its backend (L2 DSR: the backend's MAC, the NIC's as source, the rest unchanged).
#[test]
fn injected_frames_leave_like_forwarded_ones() {
    use nlb_driver::device::Device;
    use nlb_driver::queues::Queues;
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("web.img");
    let pcap = dir.path().join("in.pcap");
    let out = dir.path().join("out.pcap");
    ok(nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        img.to_str().unwrap(),
    ]));
    ok(nlbctl(&[
        "traffic",
        "examples/web.yaml",
        "-o",
        pcap.to_str().unwrap(),
        "--flows",
        "3",
    ]));
    let socket = dir.path().join("nlb.sock");
    let _sim = NlbSim(
        Command::new(nlb_system_tests::bin("nlb-sim"))
            .args(["--socket", socket.to_str().unwrap()])
            .args(["--pcap", pcap.to_str().unwrap(), "--wait-enable"])
            .args(["--out", out.to_str().unwrap()])
            .spawn()
            .expect("nlb-sim starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "nlb-sim did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let spec = format!("sim:{}", socket.display());
    ok(nlbctl(&["load", "--device", &spec, img.to_str().unwrap()]));

    let image = flowtable_compiler::Image::load(&img).unwrap();
    let pool = image
        .symbols
        .pools
        .iter()
        .position(|p| p.name == "web-pool")
        .unwrap() as u16;
    let backend = image
        .symbols
        .backends
        .iter()
        .position(|b| b == "web-2")
        .unwrap() as u16;
    let backend_mac = image.tables.backends[usize::from(backend)]
        .mac
        .to_be_bytes();
    let nic_mac = image.nic.local_mac.to_be_bytes();
    let mut dev = SocketDevice::connect(&socket).unwrap();
    let mut queues = Queues::new();
    let frames: Vec<Vec<u8>> = (0..150u16)
        .map(|i| {
            let mut f = Vec::new();
            etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x99], [2, 0, 0, 0, 0, 1])
                .ipv4([198, 51, 100, 7], [203, 0, 113, 10], 64)
                .udp(40000 + i, 80)
                .write(&mut f, format!("injected frame {i}").as_bytes())
                .unwrap();
            f
        })
        .collect();
    for (i, f) in frames.iter().enumerate() {
        queues
            .inject(&mut dev, backend, pool, f)
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
    }
    let free = dev.read32(nlb_hw::blocks::queues::INJECT_STATUS).unwrap() & 0xffff;
    assert_eq!(free, 64, "nothing waits in the inject queue");

    // Every injected frame is in the output (after what the pcap run forwarded).
    let deadline = Instant::now() + Duration::from_secs(20);
    let injected = loop {
        let got: Vec<Vec<u8>> = std::fs::read(&out)
            .ok()
            .and_then(|b| firmware_sim::pcap::read_frames(&b[..]).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|f| f.data)
            .filter(|d| d.windows(15).any(|w| w == b"injected frame "))
            .collect();
        if got.len() >= frames.len() || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(injected.len(), frames.len(), "injected frames in {out:?}");
    for (i, (sent, got)) in frames.iter().zip(&injected).enumerate() {
        assert_eq!(got[..6], backend_mac[2..], "frame {i}: to web-2");
        assert_eq!(got[6..12], nic_mac[2..], "frame {i}: from the NIC");
        assert_eq!(got[12..], sent[12..], "frame {i}: the rest as injected");
    }
}

/// AF_PACKET: nlb-sim attached to veth interfaces in a network namespace of its own; frames
/// sent into the receive interface come out of the transmit interface rewritten for their
/// backend. Needs root, `ip` and python3.
#[test]
fn af_packet_between_veth_interfaces() {
    use nlb_testkit::Need;
    let needs = [
        Need::Root,
        Need::program("ip", "iproute2"),
        Need::program("python3", "python3"),
    ];
    if !nlb_testkit::needs("the AF_PACKET test", &needs) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("web.img");
    let pcap = dir.path().join("in.pcap");
    ok(nlbctl(&[
        "compile",
        "examples/web.yaml",
        "-o",
        img.to_str().unwrap(),
    ]));
    ok(nlbctl(&[
        "traffic",
        "examples/web.yaml",
        "-o",
        pcap.to_str().unwrap(),
    ]));
    let ns = format!("nlbsim{}", std::process::id());
    let sh = |script: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns, "sh", "-c", script])
            .output()
            .expect("ip runs");
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    assert!(Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .unwrap()
        .success());
    let _ns = Ns(ns.clone());
    sh(
        "ip link add rx0 type veth peer name rx1 && ip link add tx0 type veth peer name tx1 && \
        for i in lo rx0 rx1 tx0 tx1; do ip link set $i up; done",
    );
    let socket = dir.path().join("nlb.sock");
    let child = Command::new("ip")
        .args(["netns", "exec", &ns, nlb_system_tests::bin("nlb-sim")])
        .args([
            "--socket",
            socket.to_str().unwrap(),
            "--rx",
            "rx0",
            "--tx",
            "tx0",
        ])
        .spawn()
        .expect("nlb-sim starts");
    let _sim = NlbSim(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "nlb-sim did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let spec = format!("sim:{}", socket.display());
    ok(nlbctl(&["load", "--device", &spec, img.to_str().unwrap()]));
    // Send the capture into rx1 and count what leaves on tx1 with the backends' MACs.
    let script = format!(
        r#"python3 - <<'EOF'
import socket, struct, select, time
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
rx.bind(("tx1", 0))
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
tx.bind(("rx1", 0))
data = open("{pcap}", "rb").read()
off, sent = 24, 0
while off + 16 <= len(data):
    n = struct.unpack("<IIII", data[off:off + 16])[2]
    tx.send(data[off + 16:off + 16 + n]); sent += 1; off += 16 + n
    time.sleep(0.0005)
macs = {{}}
end = time.time() + 2
while time.time() < end:
    r, _, _ = select.select([rx], [], [], 0.2)
    if r:
        f = rx.recv(65535)
        if f[12:14] == b"\x08\x00":
            macs[f[0:6].hex()] = macs.get(f[0:6].hex(), 0) + 1
print(sent, sorted(macs.items()))
EOF"#,
        pcap = pcap.display()
    );
    let out = sh(&script);
    // The three backends of web.yaml: 02:00:00:00:00:11, :12, :13.
    for mac in ["020000000011", "020000000012", "020000000013"] {
        assert!(out.contains(mac), "no frame for {mac}: {out}");
    }
    let stats = json(nlbctl(&["stats", "--device", &spec, "--json"]));
    assert!(stats["verdicts"]["forward"]["packets"].as_u64().unwrap() > 0);
}

/// A configuration big enough that a load takes a while: `pools` pools of 40 backends named
/// `{prefix}P-B` (Maglev permutations follow the names, so two prefixes give two images that
/// differ in nearly every slot).
fn big_config(pools: usize, port: u16, prefix: char) -> String {
    let mut y = String::from("forwardingRules:\n");
    for p in 0..pools {
        y += &format!(
            "  - {{name: r{p}, IPAddress: 203.0.113.{}, IPProtocol: TCP, portRange: \"{port}\", target: p{p}}}\n",
            p + 1
        );
    }
    y += "targetPools:\n";
    for p in 0..pools {
        let m: Vec<String> = (0..40).map(|b| format!("{prefix}{p}-{b}")).collect();
        y += &format!(
            "  - {{name: p{p}, instances: [{}], healthChecks: [hc]}}\n",
            m.join(", ")
        );
    }
    y += "instances:\n";
    for p in 0..pools {
        for b in 0..40 {
            y += &format!(
                "  - {{name: {prefix}{p}-{b}, ip: 10.0.{p}.{}, mac: \"02:00:00:{p:02x}:00:{b:02x}\"}}\n",
                b + 1
            );
        }
    }
    y + "httpHealthChecks:\n  - {name: hc}\n"
}

/// `nlbctl load` killed with SIGKILL at random moments: the NIC always serves one of the two
/// images whole, and the next load succeeds.
#[test]
fn a_killed_nlbctl_load_leaves_a_whole_table_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for (name, port, prefix) in [("a", 80u16, 'b'), ("b", 8080, 'c')] {
        let cfg = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&cfg, big_config(48, port, prefix)).unwrap();
        let img = dir.path().join(format!("{name}.img"));
        ok(nlbctl(&[
            "compile",
            cfg.to_str().unwrap(),
            "-o",
            img.to_str().unwrap(),
        ]));
        images.push((img.clone(), flowtable_compiler::Image::load(&img).unwrap()));
    }
    let pcap = dir.path().join("in.pcap");
    ok(nlbctl(&[
        "traffic",
        "examples/web.yaml",
        "-o",
        pcap.to_str().unwrap(),
    ]));
    let socket = dir.path().join("nlb.sock");
    let _sim = start(&socket, &pcap);
    let spec = format!("sim:{}", socket.display());
    ok(nlbctl(&[
        "load",
        "--device",
        &spec,
        images[0].0.to_str().unwrap(),
    ]));
    // How long a load with ~130 k changed entries takes, to spread the kills over it.
    let t = Instant::now();
    ok(nlbctl(&[
        "load",
        "--device",
        &spec,
        images[1].0.to_str().unwrap(),
    ]));
    let span = t.elapsed().as_micros() as u64;
    // Now B serves and bank 1 holds A.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut torn = 0;
    let mut finished_first = 0;
    for round in 0..16 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Loading B, then A, ... into the bank holding the other image: entries to write.
        let (img, _) = &images[(round + 1) % 2];
        let mut child = Command::new(nlb_system_tests::bin("nlbctl"))
            .args(["load", "--device", &spec, img.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Writes come last in a load: aim most kills at the later part of it.
        std::thread::sleep(Duration::from_micros(span / 3 + seed % (span * 2 / 3 + 1)));
        let finished = matches!(child.try_wait(), Ok(Some(_)));
        let _ = child.kill();
        let _ = child.wait();
        finished_first += usize::from(finished);
        // A fresh loader reads both banks back: the serving one is A or B, whole.
        let mut dev = SocketDevice::connect(&socket).unwrap();
        let info = discover(&mut dev).unwrap();
        let loader = Loader::attach(&mut dev, info.profile, LoaderOptions::default()).unwrap();
        let serving = loader.shadow(loader.active_bank());
        assert!(
            images.iter().any(|(_, i)| &i.tables == serving),
            "round {round}: the serving bank holds neither image"
        );
        let other = loader.shadow(loader.active_bank() ^ 1);
        if !images.iter().any(|(_, i)| &i.tables == other) {
            torn += 1;
        }
    }
    // How many kills landed while the inactive bank was being written (informational: the
    // timing is the scheduler's).
    eprintln!(
        "{torn} of 16 kills interrupted the writes to the inactive bank, {finished_first} came \
         after the load had finished (span {span} us)"
    );
    ok(nlbctl(&[
        "load",
        "--device",
        &spec,
        images[0].0.to_str().unwrap(),
    ]));
    let mut dev = SocketDevice::connect(&socket).unwrap();
    let info = discover(&mut dev).unwrap();
    let loader = Loader::attach(&mut dev, info.profile, LoaderOptions::default()).unwrap();
    assert_eq!(loader.shadow(loader.active_bank()), &images[0].1.tables);
}
