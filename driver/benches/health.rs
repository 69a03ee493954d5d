//! Health-checker benchmark: N backends (default 10,000) probed every second by one
//! `HealthChecker`, and the CPU share of one core the probing process uses.
//!
//! Run: `cargo bench -p nlb-driver --bench health -- [--backends N] [--seconds S]
//! [--listeners L] [--interval-ms I] [--runtime current|multi] [--reset] [--raw]`
//!
//! `--raw` replaces the checker by the least a probe can do with tokio (connect, one write,
//! read to the end, close; no HTTP parsing, no timeout, no state): the floor the kernel and
//! the runtime set, to compare the checker with.
//!
//! The backends are real HTTP servers in a separate process (this binary re-executed), each a
//! listening socket on its own loopback address 127.x.y.z (so every probe is a distinct
//! (IP, port) and a distinct TCP connection). With `--listeners L` smaller than N, backend i
//! uses listener i mod L and its own path `/b/i` (still a distinct probe: dedup is per
//! (IP, port, path, host)). The prober process runs only the checker; its CPU time
//! (getrusage RUSAGE_SELF, user + system, so the kernel's TCP work on its side counts) over the
//! measured window divided by the window's wall time is the figure. The server process's CPU
//! is reported apart.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nlb_driver::slowpath::health::{
    CheckerOptions, Health, HealthChecker, HealthTarget, HttpCheck, ProbeMetrics,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERVER_ENV: &str = "NLB_HEALTH_BENCH_SERVER";

#[derive(Debug, Clone)]
struct Args {
    backends: usize,
    seconds: u64,
    listeners: usize,
    interval: Duration,
    multi_thread: bool,
    reset: bool,
    raw: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        backends: 10_000,
        seconds: 20,
        listeners: 0,
        interval: Duration::from_secs(1),
        multi_thread: false,
        reset: false,
        raw: false,
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
                args.multi_thread = match it.next().as_deref() {
                    Some("multi") => true,
                    Some("current") => false,
                    other => return Err(format!("--runtime current|multi, not {other:?}")),
                }
            }
            "--reset" => args.reset = true,
            "--raw" => args.raw = true,
            // cargo bench passes --bench; the libtest filters make no sense here.
            "--bench" => {}
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            _ => {}
        }
    }
    if args.backends == 0 {
        return Err("--backends must be at least 1".into());
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

/// CPU time (user, system) of this process so far.
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

/// CPU time (user, system) of another process, from /proc/PID/stat.
fn process_cpu(pid: u32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((
        Duration::from_secs_f64(utime / ticks),
        Duration::from_secs_f64(stime / ticks),
    ))
}

fn backend_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(
        127,
        1 + (i / 62_500) as u8,
        ((i / 250) % 250) as u8,
        (1 + i % 250) as u8,
    )
}

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

/// Server mode: `listeners` listening sockets on distinct loopback IPs sharing one port; each
/// connection reads a request head, answers 200 and closes. Prints the port, then serves until
/// stdin closes (the parent ended).
fn run_server(listeners: usize) -> Result<(), String> {
    raise_nofile();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let first = std::net::TcpListener::bind((backend_ip(0), 0)).map_err(|e| e.to_string())?;
        let port = first.local_addr().map_err(|e| e.to_string())?.port();
        let mut sockets = vec![first];
        for i in 1..listeners {
            sockets.push(
                std::net::TcpListener::bind((backend_ip(i), port))
                    .map_err(|e| format!("bind {}:{port}: {e}", backend_ip(i)))?,
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
        // Serve until the parent closes our stdin.
        std::thread::spawn(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            std::process::exit(0);
        });
        std::future::pending::<()>().await;
        Ok(())
    })
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
    if let Ok(listeners) = std::env::var(SERVER_ENV) {
        let n = listeners.parse().unwrap_or(1);
        if let Err(e) = run_server(n) {
            eprintln!("health bench server: {e}");
            std::process::exit(2);
        }
        return;
    }
    let mut args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("health bench: {e}");
            std::process::exit(1);
        }
    };
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
    if let Err(e) = run(&args) {
        eprintln!("health bench: {e}");
        std::process::exit(2);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut server = Command::new(exe)
        .env(SERVER_ENV, args.listeners.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the server process: {e}"))?;
    let server_pid = server.id();
    let mut line = String::new();
    if let Some(out) = server.stdout.take() {
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
    }
    let port: u16 = line
        .trim()
        .parse()
        .map_err(|_| format!("server did not start (said {line:?})"))?;

    let mut builder = if args.multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = builder.enable_all().build().map_err(|e| e.to_string())?;
    let result = runtime.block_on(measure(args, port, server_pid));
    drop(server.stdin.take());
    let _ = server.wait();
    result
}

async fn measure(args: &Args, port: u16, server_pid: u32) -> Result<(), String> {
    if args.raw {
        return measure_raw(args, port, server_pid).await;
    }
    let (checker, _events) = HealthChecker::new(CheckerOptions {
        close_with_reset: args.reset,
        ..CheckerOptions::default()
    })
    .map_err(|e| e.to_string())?;
    let checker = Arc::new(checker);
    let targets: Vec<HealthTarget> = (0..args.backends)
        .map(|i| {
            let ip = backend_ip(i % args.listeners);
            let mut t = HealthTarget::new("bench", format!("b{i}"), IpAddr::V4(ip));
            t.check = HttpCheck {
                port,
                request_path: if args.listeners == args.backends {
                    "/healthz".into()
                } else {
                    format!("/b/{i}")
                },
                host: "bench.test".into(),
                interval: args.interval,
                timeout: args.interval,
                healthy_threshold: 2,
                unhealthy_threshold: 2,
            };
            t
        })
        .collect();
    let summary = checker.set_targets(targets).map_err(|e| e.to_string())?;
    println!(
        "health bench: {} backends on {} listeners (127.x.y.z:{port}), {} probes, every {:?}, \
         {} runtime, close with {}",
        args.backends,
        args.listeners,
        summary.probes_started,
        args.interval,
        if args.multi_thread {
            "multi-thread"
        } else {
            "current-thread"
        },
        if args.reset { "RST" } else { "FIN" },
    );

    // Warm up: every probe's first round starts within one interval, healthy after two.
    let warmup = args.interval * 3;
    tokio::time::sleep(warmup).await;

    let before_metrics = checker.metrics();
    let before_cpu = own_cpu();
    let before_server = process_cpu(server_pid);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let wall = started.elapsed();
    let after_cpu = own_cpu();
    let after_server = process_cpu(server_pid);
    let after_metrics = checker.metrics();

    let user = after_cpu.0.saturating_sub(before_cpu.0);
    let system = after_cpu.1.saturating_sub(before_cpu.1);
    let share = (user + system).as_secs_f64() / wall.as_secs_f64();
    let probes = (after_metrics.latency.count - before_metrics.latency.count) as f64;
    let rate = probes / wall.as_secs_f64();
    let snapshot = checker.snapshot();
    let healthy = snapshot
        .targets
        .iter()
        .filter(|t| t.health == Health::Healthy)
        .count();

    println!(
        "window {:.1} s: {:.0} probes/s ({:.0} expected), prober CPU {:.1}% of one core \
         (user {:.1}%, system {:.1}%), {:.1} µs CPU per probe",
        wall.as_secs_f64(),
        rate,
        args.backends as f64 / args.interval.as_secs_f64(),
        share * 100.0,
        user.as_secs_f64() / wall.as_secs_f64() * 100.0,
        system.as_secs_f64() / wall.as_secs_f64() * 100.0,
        (user + system).as_secs_f64() / probes.max(1.0) * 1e6,
    );
    if let (Some(b), Some(a)) = (before_server, after_server) {
        let s = (a.0 + a.1).saturating_sub(b.0 + b.1);
        println!(
            "server process (not counted above): {:.1}% of one core",
            s.as_secs_f64() / wall.as_secs_f64() * 100.0
        );
    }
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
    println!(
        "target ≤ 25% of one core: {}",
        if share <= 0.25 { "met" } else { "NOT met" }
    );
    Ok(())
}

/// The floor: the same connections without hyper, deadlines, scheduling or state.
async fn measure_raw(args: &Args, port: u16, server_pid: u32) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let done = Arc::new(AtomicU64::new(0));
    let request = b"GET /healthz HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n";
    let backends = args.backends;
    for i in 0..backends {
        let addr = std::net::SocketAddr::new(IpAddr::V4(backend_ip(i % args.listeners)), port);
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
        args.backends, args.listeners, args.interval
    );
    tokio::time::sleep(args.interval * 3).await;
    let before = (
        done.load(Ordering::Relaxed),
        own_cpu(),
        process_cpu(server_pid),
    );
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let wall = started.elapsed();
    let after = (
        done.load(Ordering::Relaxed),
        own_cpu(),
        process_cpu(server_pid),
    );
    let user = after.1 .0.saturating_sub(before.1 .0);
    let system = after.1 .1.saturating_sub(before.1 .1);
    let probes = (after.0 - before.0) as f64;
    println!(
        "window {:.1} s: {:.0} probes/s, raw client CPU {:.1}% of one core (user {:.1}%, \
         system {:.1}%), {:.1} µs CPU per probe",
        wall.as_secs_f64(),
        probes / wall.as_secs_f64(),
        (user + system).as_secs_f64() / wall.as_secs_f64() * 100.0,
        user.as_secs_f64() / wall.as_secs_f64() * 100.0,
        system.as_secs_f64() / wall.as_secs_f64() * 100.0,
        (user + system).as_secs_f64() / probes.max(1.0) * 1e6,
    );
    if let (Some(b), Some(a)) = (before.2, after.2) {
        let s = (a.0 + a.1).saturating_sub(b.0 + b.1);
        println!(
            "server process: {:.1}% of one core",
            s.as_secs_f64() / wall.as_secs_f64() * 100.0
        );
    }
    Ok(())
}
