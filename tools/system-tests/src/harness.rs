//! What the operator-experience tests share (`top.rs`, `monitoring.rs`): a simulated NIC
//! served on a Unix socket by the test process (the driver's socket server over an in-process
//! `ModelDevice`, so the test sends frames through the very device nlbd manages), nlbd as a
//! process against it, real HTTP health-check backends on loopback, a private tmux server, and
//! the check that an outside tool is there (`nlb_testkit::needs`).

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use etherparse::PacketBuilder;
use firmware_sim::ModelDevice;
use firmware_sim::PacketResult;
use nlb_driver::device::Device;
use nlb_driver::model::{lock, ModelHandle, SharedModel};
use nlb_driver::socket::{Server, ServerHandle};
use nlb_hw::blocks::ctrl;
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
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

/// Polls `f` every `every` until it returns `Some`; after [`WAIT`] fails with `what` and
/// whatever `context` says (a log, a screen).
pub fn poll<T>(
    what: &str,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(every);
    }
}

/// A health-check target on loopback: a listener that runs one responder per connection
/// until stopped; stopped = nothing listens (connections are refused).
pub struct Backend {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// An HTTP/1.1 answer `200 OK` with `headers` (each `Name: value\r\n`) and `body`.
pub fn http_200(headers: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl Backend {
    /// An HTTP health-check target answering `200 ok`.
    pub fn start(ip: Ipv4Addr, port: u16) -> Backend {
        Backend::http(ip, port, http_200("", "ok"))
    }

    /// An HTTP target that reads a request's head and sends `answer`.
    pub fn http(ip: Ipv4Addr, port: u16, answer: Vec<u8>) -> Backend {
        Backend::serve(ip, port, move |s| {
            let mut buf = [0u8; 2048];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(&answer);
        })
    }

    /// A TCP health server for a backend service's TCP check: answers `PING` with `PONG`.
    pub fn pong(ip: Ipv4Addr, port: u16) -> Backend {
        Backend::serve(ip, port, |s| {
            let mut ping = [0u8; 4];
            if s.read_exact(&mut ping).is_ok() && &ping == b"PING" {
                let _ = s.write_all(b"PONG");
            }
        })
    }

    /// Listens on `ip:port` and runs `respond` on each connection until stopped.
    pub fn serve(
        ip: Ipv4Addr,
        port: u16,
        respond: impl Fn(&mut TcpStream) + Send + 'static,
    ) -> Backend {
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
                        respond(&mut s);
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

    /// Stops listening.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
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
        Nlbd::spawn(dir, "nlbd.log", |c| {
            c.arg("--config")
                .arg(config)
                .arg("--device")
                .arg(format!("sim:{}", device.display()))
                .args(["--metrics-addr", "127.0.0.1:0"]);
        })
    }

    /// Starts nlbd with its admin socket in `dir`, its log in `dir/log_name` (`NLBD_LOG=info`
    /// unless `configure` says otherwise) and the arguments `configure` adds.
    pub fn spawn(dir: &Path, log_name: &str, configure: impl FnOnce(&mut Command)) -> Nlbd {
        let log = dir.join(log_name);
        let socket = dir.join("admin.sock");
        let mut command = Command::new(crate::bin("nlbd"));
        command
            .arg("--admin-socket")
            .arg(&socket)
            .env("NLBD_LOG", "info")
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null());
        configure(&mut command);
        let child = command.spawn().expect("nlbd starts");
        Nlbd { child, log, socket }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
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
    pub fn wait_for<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        poll(what, Duration::from_millis(20), f, || {
            format!("nlbd log:\n{}", self.log())
        })
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

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM, then its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        poll(
            "nlbd to stop on SIGTERM",
            Duration::from_millis(20),
            || self.child.try_wait().unwrap(),
            String::new,
        )
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
/// The clients' MAC in the frames built here.
pub const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xc1];

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
    handle: ModelHandle,
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
            handle: sim,
            _server: server.spawn(),
            out: vec![0; 16384],
        }
    }

    /// Receives one frame; the pipeline's result.
    pub fn receive(&mut self, frame: &[u8]) -> PacketResult {
        lock(&self.shared).receive(frame, &mut self.out).unwrap()
    }

    /// Receives one frame; its verdict.
    pub fn send(&mut self, frame: &[u8]) -> Verdict {
        self.receive(frame).verdict
    }

    /// What the last forwarded frame went out as.
    pub fn transmitted(&self) -> &[u8] {
        &self.out
    }

    /// Receives one frame that must be forwarded.
    pub fn forward(&mut self, frame: &[u8]) {
        assert_eq!(self.send(frame), Verdict::Forward, "{frame:02x?}");
    }

    /// The device itself, locked.
    pub fn device(&self) -> std::sync::MutexGuard<'_, ModelDevice> {
        lock(&self.shared)
    }

    /// The shared device (for a sender thread).
    pub fn shared(&self) -> SharedModel {
        self.shared.clone()
    }

    /// `ctrl.generation` as the host reads it.
    pub fn generation(&mut self) -> u32 {
        self.handle.read32(ctrl::GENERATION).unwrap()
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
        let last = std::cell::RefCell::new(String::new());
        poll(
            what,
            Duration::from_millis(40),
            || {
                let s = self.screen();
                let v = f(&s);
                *last.borrow_mut() = s;
                v
            },
            || format!("the screen:\n{}", last.borrow()),
        )
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}
