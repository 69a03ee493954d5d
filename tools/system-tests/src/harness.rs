//! What the operator-experience tests share (`top.rs`, `monitoring.rs`): a simulated NIC
//! served on a Unix socket by the test process (the driver's socket server over an in-process
//! `ModelDevice`, so the test sends frames through the very device nlbd manages), nlbd as a
//! process against it, real HTTP health-check backends on loopback, a private tmux server, and
//! the check that an outside tool is there (`nlb_testkit::needs`).

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use etherparse::PacketBuilder;
use firmware_sim::ModelDevice;
use nlb_driver::device::Device;
use nlb_driver::model::{lock, ModelHandle, SharedModel};
use nlb_driver::socket::{Server, ServerHandle};
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generous: the CI machine has 2 cores shared with other builds.
pub const WAIT: Duration = Duration::from_secs(60);

/// Whether `tool` is here ([`nlb_testkit::needs`]); `package` is the Debian package with it.
pub fn have(tool: &str, package: &str) -> bool {
    nlb_testkit::needs("this test", &[nlb_testkit::Need::program(tool, package)])
}

/// A minimal HTTP backend for health checks: answers 200 until dropped.
pub struct Backend {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Backend {
    /// Serves on `ip:port`.
    pub fn start(ip: Ipv4Addr, port: u16) -> Backend {
        let listener = TcpListener::bind((ip, port)).expect("bind backend");
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut buf = [0u8; 2048];
                        let mut got = Vec::new();
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        let _ = s.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Backend {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The nlbd child, killed when the test ends however it ends.
pub struct Nlbd {
    child: Child,
    log: PathBuf,
    /// Its admin socket.
    pub socket: PathBuf,
}

impl Nlbd {
    /// Starts nlbd on `config` and the NIC at `device`, metrics on a free loopback port.
    pub fn start(dir: &Path, config: &Path, device: &Path) -> Nlbd {
        let log = dir.join("nlbd.log");
        let socket = dir.join("admin.sock");
        let child = Command::new(crate::bin("nlbd"))
            .arg("--config")
            .arg(config)
            .arg("--device")
            .arg(format!("sim:{}", device.display()))
            .arg("--admin-socket")
            .arg(&socket)
            .args(["--metrics-addr", "127.0.0.1:0"])
            .env("NLBD_LOG", "info")
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .expect("nlbd starts");
        Nlbd { child, log, socket }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "nlbd did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nlbctl WHAT --socket SOCKET -o json`, parsed; `None` while nlbd does not answer.
    pub fn admin(&self, what: &str) -> Option<serde_json::Value> {
        if !self.socket.exists() {
            return None;
        }
        let o = nlbctl(&[what, "--socket", self.socket.to_str()?, "-o", "json"]);
        if !o.status.success() {
            return None;
        }
        serde_json::from_slice(&o.stdout).ok()
    }

    /// Polls `f` until it returns `Some`, or fails with `what` and nlbd's log.
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\nnlbd log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The health of (pool, backend) as `nlbctl health` shows it.
    pub fn health(&self, pool: &str, backend: &str) -> Option<String> {
        let h = self.admin("health")?;
        h["targets"]
            .as_array()?
            .iter()
            .find(|t| t["backend"] == backend && t["pool"] == pool)
            .and_then(|t| t["health"].as_str().map(str::to_string))
    }
}

impl Drop for Nlbd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs nlbctl.
pub fn nlbctl(args: &[&str]) -> Output {
    Command::new(crate::bin("nlbctl"))
        .args(args)
        .output()
        .expect("nlbctl runs")
}

/// The MAC the NIC answers on (the configuration's default `nic.mac`).
pub const NIC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xc1];

/// A TCP frame from `client:sport` to `vip:dport` (a SYN, or an ACK of an established flow).
pub fn tcp(client: [u8; 4], sport: u16, vip: [u8; 4], dport: u16, syn: bool) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4(client, vip, 64)
        .tcp(sport, dport, 7, 64000);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut f = Vec::new();
    b.write(&mut f, &[]).unwrap();
    f
}

/// A UDP frame with `payload` bytes of payload.
pub fn udp(client: [u8; 4], sport: u16, vip: [u8; 4], dport: u16, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4(client, vip, 64)
        .udp(sport, dport)
        .write(&mut f, &vec![0x42; payload])
        .unwrap();
    f
}

/// The NIC: a simulated device served on a socket; frames go through it here.
pub struct Nic {
    shared: SharedModel,
    _server: ServerHandle,
    out: Vec<u8>,
}

impl Nic {
    /// Serves a `sim`-profile NIC on `path`.
    pub fn start(path: &Path) -> Nic {
        let sim = ModelHandle::from_device(ModelDevice::new(Profile::by_name("sim").unwrap()));
        let served = sim.clone();
        let server = Server::bind(
            path,
            Arc::new(move || Box::new(served.clone()) as Box<dyn Device>),
        )
        .expect("serve the NIC");
        Nic {
            shared: sim.shared(),
            _server: server.spawn(),
            out: vec![0; 16384],
        }
    }

    /// Receives one frame; its verdict.
    pub fn send(&mut self, frame: &[u8]) -> Verdict {
        lock(&self.shared)
            .receive(frame, &mut self.out)
            .unwrap()
            .verdict
    }

    /// Receives one frame that must be forwarded.
    pub fn forward(&mut self, frame: &[u8]) {
        assert_eq!(self.send(frame), Verdict::Forward, "{frame:02x?}");
    }

    /// The shared device (for a sender thread).
    pub fn shared(&self) -> SharedModel {
        self.shared.clone()
    }
}

/// A health-check port for this run, from the process id and a per-test offset, so that runs
/// at the same time (a developer's and CI's, or two tests) do not take each other's.
pub fn hc_port(offset: u16) -> u16 {
    20000 + offset * 7 + (std::process::id() % 9000) as u16
}

/// A tmux server of its own (its socket in the test's directory), killed on drop.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts a server with one `width` × `height` window running `sh`.
    pub fn start(dir: &Path, width: u16, height: u16) -> Tmux {
        let t = Tmux {
            socket: dir.join("tmux.sock"),
        };
        let o = t
            .command()
            .args(["new-session", "-d", "-x", &width.to_string()])
            .args(["-y", &height.to_string(), "env", "PS1=$ ", "sh"])
            .output()
            .expect("tmux runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        t
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).args(["-f", "/dev/null"]);
        c
    }

    /// Types `keys` (tmux key names: `Enter`, `Escape`, `C-c`, or literal text with `-l`).
    pub fn keys(&self, keys: &[&str]) {
        let o = self.command().arg("send-keys").args(keys).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.keys(&["-l", text]);
    }

    /// The screen as text.
    pub fn screen(&self) -> String {
        let o = self
            .command()
            .args(["capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Polls the screen until `f` accepts it; fails with the last screen and `what`.
    pub fn wait_screen<T>(&self, what: &str, mut f: impl FnMut(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            let s = self.screen();
            if let Some(v) = f(&s) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(40));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}
