//! Health-checker benchmark: N backends (default 10,000) probed every second by one
//! `HealthChecker`, and the share of one core that the checker costs.
//!
//! Run: `cargo bench -p nlbd --bench health -- [--backends N] [--seconds S]
//! [--listeners L] [--interval-ms I] [--net veth|loopback] [--runtime own|current|multi]
//! [--reset] [--raw] [--floor]`
//!
//! `--runtime own` (the default) runs the checker as `HealthChecker::on_own_thread` makes it,
//! on its own thread and current-thread runtime; `current` and `multi` run it on the
//! benchmark's runtime of that kind (`HealthChecker::new`).
//!
//! Three processes: this one only orchestrates; the HTTP backends run in a server process and
//! the checker in a prober process (both this binary re-executed), so neither side's user
//! space is counted for the other. Each backend is a listening socket on its own address (so
//! every probe is a distinct (IP, port) and a distinct TCP connection); with `--listeners L`
//! smaller than N, backend i uses listener i mod L and its own path `/b/i` (still a distinct
//! probe: dedup is per (IP, port, path, host)).
//!
//! What is counted, and why the network matters: the kernel runs the receive side of a TCP
//! packet in softirq context on the CPU that sent it when the packet crosses loopback (or a
//! plain veth pair). On loopback the prober's `connect()` therefore also runs the *server's*
//! half of the handshake (SYN → listener, SYN-ACK, ACK → child socket, accept queue), and its
//! `write()` runs the server's receive path: the prober is charged for the backends' kernel
//! work, which a real prober never pays (its backends are other machines).
//!
//! `--net veth` (the default when run as root) puts prober and server in two network
//! namespaces joined by a veth pair with threaded NAPI: packets arriving at either side are
//! received by that side's own NAPI kernel thread (`napi/<dev>-<id>`), as a NIC's receive
//! softirq would on real hosts. The figure is then the prober process (every thread: user +
//! system time, from getrusage(RUSAGE_SELF), i.e. the checker's runtime thread(s) and its
//! system calls and transmit path) **plus** the prober side's NAPI thread (the kernel's
//! receive work for the prober's packets: SYN-ACKs, responses, FINs, ACKs). The server
//! process and the server side's NAPI thread are reported apart and not counted.
//! `--net loopback` (no root needed) is the old, pessimistic figure that includes the
//! server's half of every exchange.
//!
//! The figure is judged only when the probes ran at (at least 95% of) the asked rate; on a
//! machine too busy to give the prober its share it says so and projects the share from the
//! CPU per probe instead of printing a flattering number.
//!
//! `--raw` replaces the checker by the least a probe can do with tokio (connect, one write,
//! read to the end, close; no HTTP parsing, no timeout, no state): the floor the kernel and
//! the runtime set, to compare the checker with. `--floor` goes further: the checker's own
//! packets and system calls with no tokio, hyper or state (see `measure_floor`).

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nlbd::health::{Check, CheckerOptions, Health, HealthChecker, HealthTarget, ProbeMetrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Set in the server process: the number of listeners.
const SERVER_ENV: &str = "NLB_HEALTH_BENCH_SERVER";
/// Set in the prober process: the server's port.
const PROBER_ENV: &str = "NLB_HEALTH_BENCH_PORT";
/// The server process id (for the prober's report).
const SERVER_PID_ENV: &str = "NLB_HEALTH_BENCH_SERVER_PID";
/// Veth mode: this process's end of the pair (to switch on threaded NAPI).
const DEV_ENV: &str = "NLB_HEALTH_BENCH_DEV";
/// Veth mode: the server's end (for the report).
const PEER_DEV_ENV: &str = "NLB_HEALTH_BENCH_PEER_DEV";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Own,
    Current,
    Multi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    Loopback,
    Veth,
}

#[derive(Debug, Clone)]
struct Args {
    backends: usize,
    seconds: u64,
    listeners: usize,
    interval: Duration,
    runtime: Runtime,
    reset: bool,
    raw: bool,
    floor: bool,
    net: Option<Net>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        backends: 10_000,
        seconds: 20,
        listeners: 0,
        interval: Duration::from_secs(1),
        runtime: Runtime::Own,
        reset: false,
        raw: false,
        floor: false,
        net: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value"))
                .and_then(|v| v.parse::<u64>().map_err(|e| format!("{name} {v:?}: {e}")))
        };
        match a.as_str() {
            "--backends" => args.backends = value("--backends")? as usize,
            "--seconds" => args.seconds = value("--seconds")?,
            "--listeners" => args.listeners = value("--listeners")? as usize,
            "--interval-ms" => args.interval = Duration::from_millis(value("--interval-ms")?),
            "--runtime" => {
                args.runtime = match it.next().as_deref() {
                    Some("own") => Runtime::Own,
                    Some("multi") => Runtime::Multi,
                    Some("current") => Runtime::Current,
                    other => return Err(format!("--runtime own|current|multi, not {other:?}")),
                }
            }
            "--net" => {
                args.net = Some(match it.next().as_deref() {
                    Some("veth") => Net::Veth,
                    Some("loopback") => Net::Loopback,
                    other => return Err(format!("--net veth|loopback, not {other:?}")),
                })
            }
            "--reset" => args.reset = true,
            "--raw" => args.raw = true,
            "--floor" => args.floor = true,
            // cargo bench passes --bench; the libtest filters make no sense here.
            "--bench" => {}
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            _ => {}
        }
    }
    if args.backends == 0 || args.interval.is_zero() {
        return Err("--backends and --interval-ms must be at least 1".into());
    }
    Ok(args)
}

/// Raises the soft open-files limit to the hard one; returns the new soft limit.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: `lim` is a valid rlimit; raising the soft limit up to the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        // SAFETY: as above.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    }
    lim.rlim_cur
}

/// CPU time (user, system) of this process so far: every thread, live or ended. The total is
/// the scheduler's exact run time; the user/system split is sampled at the tick.
fn own_cpu() -> (Duration, Duration) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for getrusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (tv(usage.ru_utime), tv(usage.ru_stime))
}

/// CPU time (user + system) of another process or kernel thread, from /proc/PID/stat.
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) / ticks))
}

/// Exact run time of a kernel thread (its whole life is in the kernel), from
/// /proc/PID/schedstat; falls back to the tick-sampled /proc/PID/stat.
fn thread_cpu(pid: u32) -> Option<Duration> {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(Duration::from_nanos)
        .or_else(|| process_cpu(pid))
}

/// The NAPI kernel threads (`napi/<dev>-<id>`) of one network device.
fn napi_threads(dev: &str) -> Vec<u32> {
    let prefix = format!("napi/{dev}-");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(&prefix))
        })
        .collect()
}

fn sum_cpu(pids: &[u32]) -> Duration {
    pids.iter().filter_map(|p| thread_cpu(*p)).sum()
}

/// Backend i's address: 127.1+.x.y on loopback, 10.80+.x.y (local to the server namespace)
/// over veth.
fn backend_ip(net: Net, i: usize) -> Ipv4Addr {
    let (a, b) = match net {
        Net::Loopback => (127, 1),
        Net::Veth => (10, 80),
    };
    Ipv4Addr::new(
        a,
        b + (i / 62_500) as u8,
        ((i / 250) % 250) as u8,
        (1 + i % 250) as u8,
    )
}

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

fn net_from_env() -> Net {
    if std::env::var_os(DEV_ENV).is_some() {
        Net::Veth
    } else {
        Net::Loopback
    }
}

/// Server mode: `listeners` listening sockets on distinct IPs sharing one port; each
/// connection reads a request head, answers 200 and closes. Prints the port, then serves until
/// stdin closes (the orchestrator ended).
fn run_server(listeners: usize) -> Result<(), String> {
    raise_nofile();
    let net = net_from_env();
    if let Ok(dev) = std::env::var(DEV_ENV) {
        threaded_napi(&dev)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let first =
            std::net::TcpListener::bind((backend_ip(net, 0), 0)).map_err(|e| e.to_string())?;
        let port = first.local_addr().map_err(|e| e.to_string())?.port();
        let mut sockets = vec![first];
        for i in 1..listeners {
            let ip = backend_ip(net, i);
            sockets.push(
                std::net::TcpListener::bind((ip, port))
                    .map_err(|e| format!("bind {ip}:{port}: {e}"))?,
            );
        }
        for s in sockets {
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            let listener = tokio::net::TcpListener::from_std(s).map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut buf = [0u8; 1024];
                        let mut len = 0;
                        while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf[len..]).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => len += n,
                            }
                            if len == buf.len() {
                                return;
                            }
                        }
                        let _ = stream.write_all(RESPONSE).await;
                    });
                }
            });
        }
        println!("{port}");
        let _ = std::io::stdout().flush();
        // Serve until the orchestrator closes our stdin.
        std::thread::spawn(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            std::process::exit(0);
        });
        std::future::pending::<()>().await;
        Ok(())
    })
}

/// Makes a veth device receive in its own NAPI kernel thread, in this process's network
/// namespace (`ip netns exec` mounted a matching /sys): GRO on (which gives a veth device its
/// NAPI instances), TSO off (veth hands its peer's NAPI only packets it may aggregate, which
/// with TSO on excludes most TCP packets) and threaded NAPI on.
fn threaded_napi(dev: &str) -> Result<(), String> {
    const ETHTOOL_STSO: u32 = 0x1f;
    const ETHTOOL_SGRO: u32 = 0x2c;
    ethtool_set(dev, ETHTOOL_SGRO, 1).map_err(|e| format!("enabling GRO on {dev}: {e}"))?;
    ethtool_set(dev, ETHTOOL_STSO, 0).map_err(|e| format!("disabling TSO on {dev}: {e}"))?;
    std::fs::write(format!("/sys/class/net/{dev}/threaded"), "1")
        .map_err(|e| format!("enabling threaded NAPI on {dev}: {e}"))?;
    if napi_threads(dev).is_empty() {
        return Err(format!("no napi/{dev}-* kernel thread after enabling it"));
    }
    Ok(())
}

/// One legacy `SIOCETHTOOL` set command taking a `struct ethtool_value`.
fn ethtool_set(dev: &str, cmd: u32, data: u32) -> std::io::Result<()> {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue { cmd, data };
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if dev.len() >= ifr.ifr_name.len() {
        return Err(std::io::ErrorKind::InvalidInput.into());
    }
    for (dst, src) in ifr.ifr_name.iter_mut().zip(dev.bytes()) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: plain socket creation; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `ifr` names the device and points at `value`, both alive for the call, as
    // SIOCETHTOOL with an ethtool_value command expects.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut ifr) };
    let err = std::io::Error::last_os_error();
    // SAFETY: `fd` is the socket opened above, closed once.
    unsafe { libc::close(fd) };
    if rc == 0 {
        Ok(())
    } else {
        Err(err)
    }
}

fn failures_summary(m: &ProbeMetrics) -> String {
    let parts: Vec<String> = m
        .failures
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| format!("{l}={n}"))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(" ")
    }
}

fn main() {
    let result = if let Ok(listeners) = std::env::var(SERVER_ENV) {
        run_server(listeners.parse().unwrap_or(1))
    } else {
        parse_args().and_then(|args| match std::env::var(PROBER_ENV) {
            Ok(port) => run_prober(&args, port.parse().unwrap_or(0)),
            Err(_) => orchestrate(args),
        })
    };
    if let Err(e) = result {
        eprintln!("health bench: {e}");
        std::process::exit(2);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let status = Command::new("ip")
        .args(args)
        .status()
        .map_err(|e| format!("running ip {}: {e}", args.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("ip {} failed ({status})", args.join(" ")))
    }
}

/// Two network namespaces joined by a veth pair; removed on drop.
struct Namespaces {
    prober: String,
    server: String,
}

impl Namespaces {
    const PROBER_IP: &'static str = "192.168.251.1";
    const SERVER_IP: &'static str = "192.168.251.2";
    /// Covers every `backend_ip(Net::Veth, i)`.
    const BACKENDS: &'static str = "10.80.0.0/12";

    fn create() -> Result<Self, String> {
        Self::remove_stale();
        let id = std::process::id();
        let ns = Namespaces {
            prober: format!("nlbh{id}c"),
            server: format!("nlbh{id}s"),
        };
        ip(&["netns", "add", &ns.prober])?;
        ip(&["netns", "add", &ns.server])?;
        let (p, s) = (ns.prober.as_str(), ns.server.as_str());
        // The devices carry their namespace's name.
        ip(&[
            "link", "add", p, "netns", p, "type", "veth", "peer", "name", s, "netns", s,
        ])?;
        ip(&[
            "-n",
            p,
            "addr",
            "add",
            &format!("{}/30", Self::PROBER_IP),
            "dev",
            p,
        ])?;
        ip(&[
            "-n",
            s,
            "addr",
            "add",
            &format!("{}/30", Self::SERVER_IP),
            "dev",
            s,
        ])?;
        for (n, d) in [(p, p), (s, s), (p, "lo"), (s, "lo")] {
            ip(&["-n", n, "link", "set", d, "up"])?;
        }
        // Any address of the range is local to the server namespace (no 10,000 addresses).
        ip(&[
            "-n",
            s,
            "route",
            "add",
            "local",
            Self::BACKENDS,
            "dev",
            "lo",
        ])?;
        ip(&[
            "-n",
            p,
            "route",
            "add",
            Self::BACKENDS,
            "via",
            Self::SERVER_IP,
        ])?;
        Ok(ns)
    }
}

impl Namespaces {
    /// Removes the namespaces of earlier runs that were killed before cleaning up (their
    /// benchmark process is gone).
    fn remove_stale() {
        let Ok(dir) = std::fs::read_dir("/run/netns") else {
            return;
        };
        for name in dir.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
            let pid = name
                .strip_prefix("nlbh")
                .and_then(|r| r.strip_suffix('c').or_else(|| r.strip_suffix('s')))
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = ip(&["netns", "del", &name]);
                }
            }
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in [&self.prober, &self.server] {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `exe` with `env`, inside `netns` when given.
fn spawn(netns: Option<&str>, env: &[(&str, String)], stdout: Stdio) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(std::env::args().skip(1));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::piped())
        .stdout(stdout)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", exe.display()))
}

fn orchestrate(mut args: Args) -> Result<(), String> {
    let net = args
        .net
        .unwrap_or(if is_root() { Net::Veth } else { Net::Loopback });
    let nofile = raise_nofile();
    if args.listeners == 0 {
        // One listener per backend when the server's fd limit allows it.
        args.listeners = if (args.backends as u64) + 1000 <= nofile {
            args.backends
        } else {
            (nofile.saturating_sub(1000) as usize).clamp(1, args.backends)
        };
    }
    args.listeners = args.listeners.clamp(1, args.backends);
    let namespaces = match net {
        Net::Veth => Some(Namespaces::create().map_err(|e| {
            format!("{e} (--net veth needs root and iproute2; --net loopback does not)")
        })?),
        Net::Loopback => None,
    };
    let ns = |f: fn(&Namespaces) -> &String| namespaces.as_ref().map(|n| f(n).as_str());
    let (prober_dev, server_dev) = (ns(|n| &n.prober), ns(|n| &n.server));

    let mut server_env = vec![(SERVER_ENV, args.listeners.to_string())];
    if let Some(dev) = server_dev {
        server_env.push((DEV_ENV, dev.to_string()));
    }
    let mut server = spawn(server_dev, &server_env, Stdio::piped())?;
    let mut line = String::new();
    if let Some(out) = server.stdout.take() {
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
    }
    let result = match line.trim().parse::<u16>() {
        Err(_) => Err(format!("the server did not start (said {line:?})")),
        Ok(port) => {
            let mut env = vec![
                (PROBER_ENV, port.to_string()),
                (SERVER_PID_ENV, server.id().to_string()),
                ("NLB_HEALTH_BENCH_LISTENERS", args.listeners.to_string()),
            ];
            if let (Some(dev), Some(peer)) = (prober_dev, server_dev) {
                env.push((DEV_ENV, dev.to_string()));
                env.push((PEER_DEV_ENV, peer.to_string()));
            }
            spawn(prober_dev, &env, Stdio::inherit()).and_then(|mut prober| {
                let status = prober.wait().map_err(|e| e.to_string())?;
                if status.success() {
                    Ok(())
                } else {
                    Err(format!("the prober failed ({status})"))
                }
            })
        }
    };
    drop(server.stdin.take());
    let _ = server.wait();
    drop(namespaces);
    result
}

/// The thread of this process named `name` (the checker's `nlb-health`).
fn own_thread(name: &str) -> Option<u32> {
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                .is_ok_and(|c| c.trim_end() == name)
        })
}

/// Exact run time of one thread of this process.
fn own_thread_cpu(tid: u32) -> Option<Duration> {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(Duration::from_nanos)
}

/// CPU readings at one instant.
struct Reading {
    at: Instant,
    own: (Duration, Duration),
    checker_thread: Option<Duration>,
    own_rx: Duration,
    server: Option<Duration>,
    server_rx: Duration,
}

struct Context {
    net: Net,
    port: u16,
    server_pid: Option<u32>,
    own_rx: Vec<u32>,
    server_rx: Vec<u32>,
    checker_thread: Option<u32>,
}

impl Context {
    fn read(&self) -> Reading {
        Reading {
            at: Instant::now(),
            own: own_cpu(),
            checker_thread: self.checker_thread.and_then(own_thread_cpu),
            own_rx: sum_cpu(&self.own_rx),
            server: self.server_pid.and_then(process_cpu),
            server_rx: sum_cpu(&self.server_rx),
        }
    }

    /// Prints the CPU shares between two readings, `probes` having finished in between.
    fn report(&self, what: &str, before: &Reading, after: &Reading, probes: u64, expected: f64) {
        let wall = after.at.duration_since(before.at).as_secs_f64();
        let user = after.own.0.saturating_sub(before.own.0).as_secs_f64();
        let system = after.own.1.saturating_sub(before.own.1).as_secs_f64();
        let rx = after.own_rx.saturating_sub(before.own_rx).as_secs_f64();
        let total = user + system + rx;
        let rate = probes as f64 / wall;
        let pct = |s: f64| s / wall * 100.0;
        let per_probe = |s: f64| s / (probes.max(1) as f64) * 1e6;
        println!(
            "window {wall:.1} s: {rate:.0} probes/s ({expected:.0} asked), {what} {:.1}% of one \
             core = {:.1} µs per probe",
            pct(total),
            per_probe(total),
        );
        match self.net {
            Net::Veth => println!(
                "  prober process {:.1}% (user {:.1}%, system {:.1}%; {:.1} + {:.1} µs per probe) \
                 + its receive NAPI thread {:.1}% ({:.1} µs per probe)",
                pct(user + system),
                pct(user),
                pct(system),
                per_probe(user),
                per_probe(system),
                pct(rx),
                per_probe(rx),
            ),
            Net::Loopback => println!(
                "  user {:.1}%, system {:.1}% ({:.1} + {:.1} µs per probe); loopback: system time \
                 includes the servers' half of every TCP exchange (see --net veth)",
                pct(user),
                pct(system),
                per_probe(user),
                per_probe(system),
            ),
        }
        if let (Some(b), Some(a)) = (before.checker_thread, after.checker_thread) {
            let t = a.saturating_sub(b).as_secs_f64();
            println!(
                "  of which the checker's own thread (nlb-health) {:.1}% = {:.1} µs per probe",
                pct(t),
                per_probe(t)
            );
        }
        if let (Some(b), Some(a)) = (before.server, after.server) {
            let server_rx = after.server_rx.saturating_sub(before.server_rx);
            println!(
                "  not counted: server process {:.1}%{}",
                pct(a.saturating_sub(b).as_secs_f64()),
                match self.net {
                    Net::Veth => format!(
                        ", server's receive NAPI thread {:.1}%",
                        pct(server_rx.as_secs_f64())
                    ),
                    Net::Loopback => String::new(),
                }
            );
        }
        let projected = per_probe(total) * expected / 1e6 * 100.0;
        if rate >= 0.95 * expected {
            println!(
                "target ≤ 25% of one core at {expected:.0} probes/s: {} ({:.1}%)",
                if pct(total) <= 25.0 { "met" } else { "NOT met" },
                pct(total)
            );
        } else {
            println!(
                "target ≤ 25% of one core: not judged, only {:.0}% of the asked probes ran (the \
                 machine is too busy); CPU per probe × {expected:.0}/s = {projected:.1}%",
                rate / expected * 100.0
            );
        }
    }
}

fn run_prober(args: &Args, port: u16) -> Result<(), String> {
    raise_nofile();
    let net = net_from_env();
    let mut context = Context {
        net,
        port,
        server_pid: std::env::var(SERVER_PID_ENV)
            .ok()
            .and_then(|p| p.parse().ok()),
        own_rx: Vec::new(),
        server_rx: Vec::new(),
        checker_thread: None,
    };
    if let Ok(dev) = std::env::var(DEV_ENV) {
        threaded_napi(&dev)?;
        context.own_rx = napi_threads(&dev);
    }
    if let Ok(peer) = std::env::var(PEER_DEV_ENV) {
        context.server_rx = napi_threads(&peer);
    }
    let listeners = std::env::var("NLB_HEALTH_BENCH_LISTENERS")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(args.backends);
    let mut builder = if args.runtime == Runtime::Multi {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = builder.enable_all().build().map_err(|e| e.to_string())?;
    if args.floor {
        measure_floor(args, listeners, &mut context)
    } else if args.raw {
        runtime.block_on(measure_raw(args, listeners, &context))
    } else {
        runtime.block_on(measure(args, listeners, &mut context))
    }
}

async fn measure(args: &Args, listeners: usize, context: &mut Context) -> Result<(), String> {
    let options = CheckerOptions {
        close_with_reset: args.reset,
        ..CheckerOptions::default()
    };
    let (checker, _events) = match args.runtime {
        Runtime::Own => HealthChecker::on_own_thread(options),
        Runtime::Current | Runtime::Multi => HealthChecker::new(options),
    }
    .map_err(|e| e.to_string())?;
    let checker = Arc::new(checker);
    let port = context.port;
    let targets: Vec<HealthTarget> = (0..args.backends)
        .map(|i| {
            let ip = backend_ip(context.net, i % listeners);
            let mut t = HealthTarget::new("bench", format!("b{i}"), IpAddr::V4(ip));
            t.check = Check {
                port,
                request_path: if listeners == args.backends {
                    "/healthz".into()
                } else {
                    format!("/b/{i}")
                },
                host: "bench.test".into(),
                interval: args.interval,
                timeout: args.interval,
                healthy_threshold: 2,
                unhealthy_threshold: 2,
                ..Check::default()
            };
            t
        })
        .collect();
    let summary = checker.set_targets(targets).map_err(|e| e.to_string())?;
    println!(
        "health bench: {} backends on {} listeners (port {port}, {}), {} probes, every {:?}, \
         {} runtime, close with {}",
        args.backends,
        listeners,
        match context.net {
            Net::Veth => "veth pair between two namespaces, threaded NAPI",
            Net::Loopback => "loopback",
        },
        summary.probes_started,
        args.interval,
        match args.runtime {
            Runtime::Own => "own-thread",
            Runtime::Current => "current-thread",
            Runtime::Multi => "multi-thread",
        },
        if args.reset { "RST" } else { "FIN" },
    );

    // Warm up: every probe's first round starts within one interval, healthy after two.
    tokio::time::sleep(args.interval * 3).await;

    // Looked up now: a new thread names itself once it runs.
    context.checker_thread = own_thread("nlb-health");
    let before_metrics = checker.metrics();
    let before = context.read();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let after = context.read();
    let after_metrics = checker.metrics();

    let probes = after_metrics.latency.count - before_metrics.latency.count;
    let expected = args.backends as f64 / args.interval.as_secs_f64();
    context.report("checker CPU", &before, &after, probes, expected);

    let healthy = checker
        .snapshot()
        .targets
        .iter()
        .filter(|t| t.health == Health::Healthy)
        .count();
    let lat = &after_metrics.latency;
    let bound = |q: f64| {
        lat.quantile_bound(q)
            .map_or("overflow".to_string(), |s| format!("≤{:.1} ms", s * 1e3))
    };
    println!(
        "probe latency p50 {} p99 {} p99.9 {}; healthy {healthy}/{}; failures {}; in flight {}",
        bound(0.5),
        bound(0.99),
        bound(0.999),
        args.backends,
        failures_summary(&after_metrics),
        after_metrics.in_flight,
    );
    Ok(())
}

/// The floor: the same connections without hyper, deadlines, scheduling or state.
async fn measure_raw(args: &Args, listeners: usize, context: &Context) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let done = Arc::new(AtomicU64::new(0));
    let request = b"GET /healthz HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n";
    let backends = args.backends;
    for i in 0..backends {
        let addr = std::net::SocketAddr::new(
            IpAddr::V4(backend_ip(context.net, i % listeners)),
            context.port,
        );
        let done = Arc::clone(&done);
        let interval = args.interval;
        tokio::spawn(async move {
            // Spread evenly over the interval, as the checker's random phases do on average.
            let phase = interval.mul_f64(i as f64 / backends as f64);
            tokio::time::sleep(phase).await;
            let mut ticker = tokio::time::interval(interval);
            let mut buf = [0u8; 1024];
            loop {
                ticker.tick().await;
                if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                    if s.write_all(request).await.is_ok() {
                        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    println!(
        "raw floor: {} backends on {} listeners, every {:?}",
        args.backends, listeners, args.interval
    );
    tokio::time::sleep(args.interval * 3).await;
    let (before_done, before) = (done.load(Ordering::Relaxed), context.read());
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let (after_done, after) = (done.load(Ordering::Relaxed), context.read());
    let expected = args.backends as f64 / args.interval.as_secs_f64();
    context.report(
        "raw client CPU",
        &before,
        &after,
        after_done - before_done,
        expected,
    );
    Ok(())
}

/// The floor of the checker's own packet and system-call pattern, without tokio, hyper or any
/// state: one thread with its own edge-triggered epoll, sockets registered once and reused
/// (no `epoll_ctl` per probe), and per probe exactly the kernel work the checker asks for:
/// `connect` (SYN; the handshake's ACK deferred onto the request), `send` (request), `recv`
/// (response; the backend's FIN seen in the same or the next event), `connect(AF_UNSPEC)`
/// (RST, local port released) and `getsockopt(SO_ERROR)` (the reset's error cleared). Probes
/// start evenly spread over the interval. What this costs is what any client of this design
/// costs on this machine before it does any work of its own.
fn measure_floor(args: &Args, listeners: usize, context: &mut Context) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let addrs: Vec<libc::sockaddr_in> = (0..args.backends)
        .map(|i| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: context.port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(backend_ip(context.net, i % listeners).octets()),
            },
            sin_zero: [0; 8],
        })
        .collect();
    let interval = args.interval;
    let thread = {
        let (done, stop) = (Arc::clone(&done), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("nlb-health".into())
            .spawn(move || floor_loop(&addrs, interval, &done, &stop))
            .map_err(|e| e.to_string())?
    };
    println!(
        "floor client: {} backends on {} listeners, every {:?} (own epoll, reused sockets, 5 \
         system calls per probe)",
        args.backends, listeners, interval
    );
    std::thread::sleep(args.interval * 3);
    context.checker_thread = own_thread("nlb-health");
    let (before_done, before) = (done.load(Ordering::Relaxed), context.read());
    std::thread::sleep(Duration::from_secs(args.seconds));
    let (after_done, after) = (done.load(Ordering::Relaxed), context.read());
    stop.store(true, Ordering::Relaxed);
    let _ = thread.join();
    let expected = args.backends as f64 / args.interval.as_secs_f64();
    context.report(
        "floor client CPU",
        &before,
        &after,
        after_done - before_done,
        expected,
    );
    Ok(())
}

/// The floor client's loop (see [`measure_floor`]); errors end the probe, not the loop.
fn floor_loop(
    addrs: &[libc::sockaddr_in],
    interval: Duration,
    done: &std::sync::atomic::AtomicU64,
    stop: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering;
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Idle,
        Connecting,
        Sent,
    }
    const REQUEST: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: bench.test\r\nuser-agent: \
        nlb-offload-health-check/1.0\r\nconnection: close\r\n\r\n";
    // SAFETY: plain epoll instance creation; closed at the end.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return;
    }
    // Per descriptor: its state and backend.
    let mut state: Vec<(State, usize)> = Vec::new();
    let mut pool: Vec<libc::c_int> = Vec::new();
    let sockaddr_len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let n = addrs.len();
    let started = Instant::now();
    let mut next = 0u64; // probes started so far
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut buf = [0u8; 4096];
    let finish = |fd: libc::c_int, pool: &mut Vec<libc::c_int>, reuse: bool| {
        // SAFETY: an all-zero sockaddr is valid; AF_UNSPEC disconnects `fd`, an open socket.
        let mut unspec: libc::sockaddr = unsafe { std::mem::zeroed() };
        unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `fd` is open; `unspec`, `err` and `len` are valid for the sizes passed.
        let ok = reuse
            && unsafe {
                libc::connect(fd, &unspec, std::mem::size_of::<libc::sockaddr>() as u32) == 0
                    && libc::getsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    ) == 0
            };
        if ok {
            pool.push(fd);
        } else {
            // SAFETY: `fd` is open and owned by this loop; closing also unregisters it.
            unsafe { libc::close(fd) };
        }
        done.fetch_add(1, Ordering::Relaxed);
    };
    while !stop.load(Ordering::Relaxed) {
        // Start every probe that is due (probe k at k × interval / n), on whole milliseconds
        // as tokio's timer wheel fires its timers: about ten at a time at 10,000 probes/s,
        // whose packets and events then come in small bunches. (Starting each at its exact
        // time instead wakes this thread and the NAPI threads three to five times as often,
        // and costs 50% more.)
        let now = Duration::from_millis(started.elapsed().as_millis() as u64);
        while interval.mul_f64(next as f64 / n as f64) <= now {
            let backend = (next % n as u64) as usize;
            next += 1;
            let fd = match pool.pop() {
                Some(fd) => fd,
                None => {
                    // SAFETY: plain socket creation; the descriptor is owned by this loop.
                    let fd = unsafe {
                        libc::socket(
                            libc::AF_INET,
                            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                            0,
                        )
                    };
                    if fd < 0 {
                        continue;
                    }
                    let one: libc::c_int = 1;
                    let mut ev = libc::epoll_event {
                        events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET)
                            as u32,
                        u64: fd as u64,
                    };
                    // SAFETY: `fd` and `epfd` are open; `one` and `ev` outlive the calls.
                    unsafe {
                        libc::setsockopt(
                            fd,
                            libc::IPPROTO_TCP,
                            libc::TCP_DEFER_ACCEPT,
                            (&one as *const libc::c_int).cast(),
                            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                        );
                        libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev);
                    }
                    fd
                }
            };
            if state.len() <= fd as usize {
                state.resize(fd as usize + 1, (State::Idle, 0));
            }
            // SAFETY: `fd` is open; the address is a valid sockaddr_in of the length passed.
            let rc = unsafe {
                libc::connect(
                    fd,
                    (&addrs[backend] as *const libc::sockaddr_in).cast(),
                    sockaddr_len,
                )
            };
            if rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EINPROGRESS)
            {
                state[fd as usize] = (State::Connecting, backend);
            } else {
                state[fd as usize] = (State::Idle, backend);
                finish(fd, &mut pool, false);
            }
        }
        let due = interval.mul_f64(next as f64 / n as f64);
        // Sleep until the next start, in whole milliseconds as tokio's timer does (a shorter
        // wait would spin).
        let wait_ms = due
            .saturating_sub(started.elapsed())
            .as_micros()
            .div_ceil(1000)
            .clamp(1, 100) as libc::c_int;
        // SAFETY: `events` is valid for writes of its length.
        let ready =
            unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), events.len() as i32, wait_ms) };
        for ev in events.iter().take(ready.max(0) as usize) {
            let fd = ev.u64 as libc::c_int;
            let flags = ev.events as libc::c_int;
            let Some((st, _)) = state.get(fd as usize).copied() else {
                continue;
            };
            match st {
                State::Idle => {}
                State::Connecting => {
                    if flags & (libc::EPOLLERR | libc::EPOLLHUP) != 0 {
                        state[fd as usize].0 = State::Idle;
                        finish(fd, &mut pool, false);
                    } else if flags & libc::EPOLLOUT != 0 {
                        // SAFETY: `fd` is open; REQUEST is valid for its length.
                        let sent = unsafe {
                            libc::send(
                                fd,
                                REQUEST.as_ptr().cast(),
                                REQUEST.len(),
                                libc::MSG_NOSIGNAL,
                            )
                        };
                        if sent == REQUEST.len() as isize {
                            state[fd as usize].0 = State::Sent;
                        } else {
                            state[fd as usize].0 = State::Idle;
                            finish(fd, &mut pool, false);
                        }
                    }
                }
                State::Sent => {
                    if flags & (libc::EPOLLIN | libc::EPOLLRDHUP) == 0 {
                        continue;
                    }
                    // SAFETY: `fd` is open; `buf` is valid for writes of its length.
                    let got = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                    // The backend's FIN: seen with the response, or in a later event.
                    if got == 0 || (got > 0 && flags & libc::EPOLLRDHUP != 0) {
                        state[fd as usize].0 = State::Idle;
                        finish(fd, &mut pool, true);
                    } else if got < 0
                        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
                    {
                        state[fd as usize].0 = State::Idle;
                        finish(fd, &mut pool, false);
                    }
                }
            }
        }
    }
    for fd in pool {
        // SAFETY: idle descriptors owned by this loop.
        unsafe { libc::close(fd) };
    }
    // SAFETY: the epoll descriptor created above.
    unsafe { libc::close(epfd) };
}
