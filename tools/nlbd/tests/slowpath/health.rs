//! The health checker against real TCP servers on 127.0.0.1 that behave well and badly
//! (SPEC R5). Every misbehaviour is a real tokio listener doing exactly that on the wire.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nlbd::health::{
    Check, CheckerOptions, Health, HealthChange, HealthChecker, HealthError, HealthEvents,
    HealthTarget, ProbeFailure, ProbeKey, ProbeOutcome, ProbePhase, ProbeRequest, TargetKey,
    WeightMode, WeightReport, MAX_BODY_BYTES,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Runs `behaviour` on every connection accepted on a fresh 127.0.0.1 port.
async fn serve<F, Fut>(behaviour: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(behaviour(stream));
        }
    });
    addr
}

/// Reads a request head (up to the blank line) and returns it as text.
async fn read_head(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut byte).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

async fn respond(mut s: TcpStream, response: &'static [u8]) {
    read_head(&mut s).await;
    let _ = s.write_all(response).await;
    let _ = s.shutdown().await;
}

async fn probe(addr: SocketAddr, timeout: Duration) -> ProbeOutcome {
    let key = ProbeKey::http(addr, "/", "lb.test");
    ProbeRequest::new(&key).unwrap().run(timeout).await
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
const SHORT: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------------------------
// One probe against servers that behave and misbehave.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn sends_get_with_path_host_and_close() {
    let seen = Arc::new(Mutex::new(String::new()));
    let seen2 = Arc::clone(&seen);
    let addr = serve(move |mut s| {
        let seen = Arc::clone(&seen2);
        async move {
            let head = read_head(&mut s).await;
            *seen.lock().unwrap() = head;
            let _ = s.write_all(OK).await;
        }
    })
    .await;
    let key = ProbeKey::http(addr, "/healthz?deep=1", "[2001:db8::1]");
    let out = ProbeRequest::new(&key).unwrap().run(SHORT).await;
    assert!(out.result.is_ok(), "{out:?}");
    let head = seen.lock().unwrap().clone();
    // Hand-parse the request the server received.
    let mut lines = head.split("\r\n");
    assert_eq!(lines.next(), Some("GET /healthz?deep=1 HTTP/1.1"));
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(get("host"), vec!["[2001:db8::1]"]);
    assert_eq!(get("connection"), vec!["close"]);
    assert_eq!(get("user-agent").len(), 1);
}

#[tokio::test]
async fn status_200_passes_and_others_fail() {
    let ok = serve(|s| respond(s, OK)).await;
    let out = probe(ok, SHORT).await;
    let pass = out.result.unwrap();
    assert_eq!(pass.body_bytes, 2);
    assert_eq!(pass.weight, WeightReport::Missing);

    for (response, code) in [
        (
            &b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"[..],
            503,
        ),
        (&b"HTTP/1.1 204 No Content\r\n\r\n"[..], 204),
        (
            &b"HTTP/1.1 301 Moved\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n"[..],
            301,
        ),
    ] {
        let addr = serve(move |s| respond(s, response)).await;
        assert_eq!(
            probe(addr, SHORT).await.result,
            Err(ProbeFailure::Status(code))
        );
    }
}

#[tokio::test]
async fn http10_body_until_close_passes() {
    let addr = serve(|s| respond(s, b"HTTP/1.0 200 OK\r\n\r\nfine, thanks")).await;
    let pass = probe(addr, SHORT).await.result.unwrap();
    assert_eq!(pass.body_bytes, "fine, thanks".len());
}

#[tokio::test]
async fn weight_header_is_read() {
    let addr = serve(|s| {
        respond(
            s,
            b"HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: 250\r\nContent-Length: 0\r\n\r\n",
        )
    })
    .await;
    assert_eq!(
        probe(addr, SHORT).await.result.unwrap().weight,
        WeightReport::Weight(250)
    );
    let addr = serve(|s| {
        respond(
            s,
            b"HTTP/1.1 200 OK\r\nx-load-balancing-endpoint-weight: lots\r\nContent-Length: 0\r\n\r\n",
        )
    })
    .await;
    assert_eq!(
        probe(addr, SHORT).await.result.unwrap().weight,
        WeightReport::Invalid
    );
}

#[tokio::test]
async fn refused_connection_fails_at_once() {
    // Bind then close a listener: the port is known to be free of listeners.
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let out = probe(addr, SHORT).await;
    assert_eq!(out.result, Err(ProbeFailure::Refused));
    assert!(out.latency < SHORT);
}

#[tokio::test]
async fn backend_that_accepts_and_says_nothing_times_out() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let out = probe(addr, SHORT).await;
    assert_eq!(out.result, Err(ProbeFailure::Timeout(ProbePhase::Head)));
    assert!(
        out.latency >= SHORT && out.latency < Duration::from_secs(5),
        "{out:?}"
    );
}

#[tokio::test]
async fn listener_that_never_accepts_times_out() {
    // A full accept queue: the kernel completes handshakes up to the backlog, then stays
    // silent. The probe must still end at its deadline.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((LOCALHOST, 0).into()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let out = probe(addr, SHORT).await;
    assert!(
        matches!(out.result, Err(ProbeFailure::Timeout(_))),
        "{out:?}"
    );
    drop(listener);
}

#[tokio::test]
async fn slowloris_head_times_out() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        for b in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    })
    .await;
    assert_eq!(
        probe(addr, SHORT).await.result,
        Err(ProbeFailure::Timeout(ProbePhase::Head))
    );
}

#[tokio::test]
async fn slow_body_times_out() {
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            .await;
        for _ in 0..100 {
            if s.write_all(b"x").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(
        probe(addr, SHORT).await.result,
        Err(ProbeFailure::Timeout(ProbePhase::Body))
    );
}

#[tokio::test]
async fn garbage_is_malformed() {
    for garbage in [
        &b"SSH-2.0-OpenSSH_9.6\r\n"[..],
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage-tls\r\n\r\n"[..],
        &b"HTTP/1.1 abc Nope\r\n\r\n"[..],
        &b"HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\n"[..],
    ] {
        let addr = serve(move |s| respond(s, garbage)).await;
        let out = probe(addr, SHORT).await;
        assert_eq!(out.result, Err(ProbeFailure::Malformed), "{garbage:?}");
    }
}

#[tokio::test]
async fn huge_head_is_refused_without_reading_it_all() {
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let addr = serve(move |mut s| {
        let sent = Arc::clone(&sent2);
        async move {
            read_head(&mut s).await;
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n").await;
            // Endless headers: 1 MiB would be written if the client kept reading.
            let line = format!("X-Filler: {}\r\n", "a".repeat(1000));
            for _ in 0..1024 {
                if s.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
                sent.fetch_add(line.len(), Ordering::Relaxed);
            }
        }
    })
    .await;
    let out = probe(addr, Duration::from_secs(2)).await;
    assert_eq!(out.result, Err(ProbeFailure::HeadTooLarge));
    // The client stopped well before the server had sent everything (socket buffers aside).
    assert!(sent.load(Ordering::Relaxed) < 1024 * 1000);

    let many = serve(|mut s| async move {
        read_head(&mut s).await;
        let mut head = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..200 {
            head.push_str(&format!("X-{i}: y\r\n"));
        }
        head.push_str("Content-Length: 0\r\n\r\n");
        let _ = s.write_all(head.as_bytes()).await;
    })
    .await;
    assert_eq!(
        probe(many, SHORT).await.result,
        Err(ProbeFailure::HeadTooLarge)
    );
}

#[tokio::test]
async fn huge_body_is_capped_and_the_probe_passes() {
    // Content-Length of 1 GiB and an endless stream: the probe reads the cap and stops.
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n")
            .await;
        let chunk = vec![b'z'; 16 * 1024];
        while s.write_all(&chunk).await.is_ok() {}
    })
    .await;
    let pass = probe(addr, Duration::from_secs(2)).await.result.unwrap();
    assert!(pass.body_truncated);
    assert_eq!(pass.body_bytes, MAX_BODY_BYTES);

    // The same with chunked transfer coding.
    let chunked = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await;
        let chunk = format!("4000\r\n{}\r\n", "q".repeat(0x4000));
        while s.write_all(chunk.as_bytes()).await.is_ok() {}
    })
    .await;
    let pass = probe(chunked, Duration::from_secs(2)).await.result.unwrap();
    assert!(pass.body_truncated && pass.body_bytes == MAX_BODY_BYTES);
}

/// Closes the socket with SO_LINGER 0, which makes the kernel send a RST.
#[allow(deprecated)] // The deprecation is about blocking on close; a zero linger never blocks.
fn reset(s: TcpStream) {
    let _ = s.set_linger(Some(Duration::ZERO));
    drop(s);
}

#[tokio::test]
async fn reset_before_and_during_the_response_fails() {
    let before = serve(|mut s| async move {
        read_head(&mut s).await;
        reset(s);
    })
    .await;
    assert_eq!(probe(before, SHORT).await.result, Err(ProbeFailure::Reset));

    let during = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        reset(s);
    })
    .await;
    let out = probe(during, SHORT).await;
    assert_eq!(out.result, Err(ProbeFailure::Reset), "{out:?}");
}

#[tokio::test]
async fn close_before_a_complete_response_fails() {
    let silent = serve(|mut s| async move {
        read_head(&mut s).await;
    })
    .await;
    assert_eq!(probe(silent, SHORT).await.result, Err(ProbeFailure::Closed));

    let half = serve(|s| respond(s, b"HTTP/1.1 200 OK\r\nContent-Le")).await;
    assert_eq!(probe(half, SHORT).await.result, Err(ProbeFailure::Closed));

    let short_body =
        serve(|s| respond(s, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")).await;
    assert_eq!(
        probe(short_body, SHORT).await.result,
        Err(ProbeFailure::Closed)
    );
}

#[tokio::test]
async fn keep_alive_server_that_never_closes_still_passes() {
    // The server ignores `Connection: close` and keeps the socket open after a complete
    // response; the probe is done once the body is read.
    let addr = serve(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
            .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    assert!(probe(addr, SHORT).await.result.is_ok());
}

/// A server that answers 200 and then reports how the client ended the connection.
async fn close_observer() -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<std::io::Result<usize>>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let addr = serve(move |mut s| {
        let tx = tx.clone();
        async move {
            read_head(&mut s).await;
            let _ = s.write_all(OK).await;
            // Keep our end open and see what the client does with its own.
            let mut buf = [0u8; 16];
            let end = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
            let _ = tx.send(end.unwrap_or(Err(std::io::ErrorKind::TimedOut.into())));
        }
    })
    .await;
    (addr, rx)
}

#[tokio::test]
async fn connection_ends_with_fin_by_default_and_reset_on_request() {
    let (addr, mut ends) = close_observer().await;
    let key = ProbeKey::http(addr, "/", "lb.test");
    let polite = ProbeRequest::new(&key).unwrap();
    assert!(polite.run(SHORT).await.result.is_ok());
    // A FIN: the server reads end-of-stream.
    assert_eq!(ends.recv().await.unwrap().unwrap(), 0);

    let abrupt = ProbeRequest::new(&key).unwrap().close_with_reset(true);
    assert!(abrupt.run(SHORT).await.result.is_ok());
    let end = ends.recv().await.unwrap();
    assert_eq!(
        end.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset)
    );
}

// ---------------------------------------------------------------------------------------------
// The checker: thresholds, events, dedup, reload, weights.
// ---------------------------------------------------------------------------------------------

/// A backend whose health endpoint can be switched and that counts requests per path.
struct Backend {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    weight: Arc<Mutex<Option<String>>>,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

impl Backend {
    async fn start() -> Backend {
        let up = Arc::new(AtomicBool::new(true));
        let weight: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (u, w, r) = (Arc::clone(&up), Arc::clone(&weight), Arc::clone(&requests));
        let addr = serve(move |mut s| {
            let (up, weight, requests) = (Arc::clone(&u), Arc::clone(&w), Arc::clone(&r));
            async move {
                let head = read_head(&mut s).await;
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let host = head
                    .split("\r\n")
                    .find_map(|l| l.strip_prefix("host: ").or(l.strip_prefix("Host: ")))
                    .unwrap_or("")
                    .to_string();
                requests.lock().unwrap().push((path, host));
                let response = if up.load(Ordering::Relaxed) {
                    match weight.lock().unwrap().clone() {
                        Some(w) => format!(
                            "HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: {w}\r\nContent-Length: 0\r\n\r\n"
                        ),
                        None => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string(),
                    }
                } else {
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n".to_string()
                };
                let _ = s.write_all(response.as_bytes()).await;
                let _ = s.shutdown().await;
            }
        })
        .await;
        Backend {
            addr,
            up,
            weight,
            requests,
        }
    }

    fn target(&self, pool: &str, name: &str, interval_ms: u64) -> HealthTarget {
        let mut t = HealthTarget::new(pool, name, self.addr.ip());
        t.check = Check {
            port: self.addr.port(),
            request_path: "/healthz".into(),
            host: "svc.test".into(),
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_millis(interval_ms),
            healthy_threshold: 2,
            unhealthy_threshold: 2,
            ..Check::default()
        };
        t
    }

    fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// Every change received so far, so waits for different targets can come in any order.
struct Watch {
    events: HealthEvents,
    seen: Vec<HealthChange>,
}

impl Watch {
    fn new(events: HealthEvents) -> Self {
        Watch {
            events,
            seen: Vec::new(),
        }
    }

    /// The first change not returned before that satisfies `want`, waiting up to `within`.
    async fn until(
        &mut self,
        within: Duration,
        what: &str,
        want: impl Fn(&HealthChange) -> bool,
    ) -> HealthChange {
        let deadline = Instant::now() + within;
        loop {
            if let Some(i) = self.seen.iter().position(&want) {
                return self.seen.remove(i);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no change where {what} within {within:?}: {:?}",
                self.seen
            );
            if let Ok(Some(batch)) = tokio::time::timeout(left, self.events.recv()).await {
                self.seen.extend(batch);
            }
        }
    }

    /// Waits until `key` is decided `health`.
    async fn health(&mut self, key: &TargetKey, health: Health) -> HealthChange {
        self.until(WAIT, &format!("{key} is {health}"), |c| {
            &c.target == key && c.health == health
        })
        .await
    }
}

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn thresholds_decide_and_events_carry_the_deciding_probe() {
    let backend = Backend::start().await;
    let (checker, events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let mut watch = Watch::new(events);
    let target = backend.target("web", "vm-1", 60);
    let key = target.key.clone();
    let summary = checker.set_targets(vec![target]).unwrap();
    assert_eq!((summary.added, summary.probes_started), (1, 1));
    assert_eq!(
        checker.snapshot().get(&key).unwrap().health,
        Health::Unknown
    );

    let up = watch.health(&key, Health::Healthy).await;
    assert_eq!(up.previous, Health::Unknown);
    assert_eq!(up.failure, None);
    // It took two passing probes: the server saw at least two requests by then.
    assert!(backend.request_count() >= 2);
    let status = checker.snapshot().get(&key).unwrap().clone();
    assert!(status.last_probe.is_some());

    backend.up.store(false, Ordering::Relaxed);
    let down = watch.health(&key, Health::Unhealthy).await;
    assert_eq!(down.previous, Health::Healthy);
    assert_eq!(down.failure, Some(ProbeFailure::Status(503)));
    assert!(down.decided_at > up.decided_at);
    assert!(down.decided_at <= Instant::now());
    let status = checker.snapshot().get(&key).unwrap().clone();
    assert_eq!(status.health, Health::Unhealthy);
    assert!(status.consecutive_failures >= 2);

    backend.up.store(true, Ordering::Relaxed);
    watch.health(&key, Health::Healthy).await;

    let m = checker.metrics();
    assert_eq!((m.probes, m.targets), (1, 1));
    assert!(m.passes >= 4 && m.failures_of("status") >= 2, "{m:?}");
    assert_eq!(m.latency.count, m.passes + m.failures_total());
}

#[tokio::test]
async fn targets_with_the_same_probe_key_share_one_probe() {
    let backend = Backend::start().await;
    let (checker, events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let mut watch = Watch::new(events);
    let mut other_path = backend.target("pool-d", "vm", 100);
    other_path.check.request_path = "/other".into();
    let targets = vec![
        backend.target("pool-a", "vm", 100),
        backend.target("pool-b", "vm", 100),
        backend.target("pool-c", "vm", 100),
        other_path,
    ];
    let summary = checker.set_targets(targets).unwrap();
    assert_eq!((summary.added, summary.probes_started), (4, 2));
    assert_eq!(checker.metrics().probes, 2);

    // All four become healthy.
    for pool in ["pool-a", "pool-b", "pool-c", "pool-d"] {
        watch
            .health(&TargetKey::new(pool, "vm"), Health::Healthy)
            .await;
    }

    // Over one second, /healthz is requested about ten times (one probe every 100 ms), not
    // thirty (three pools).
    let count = |path: &str| {
        backend
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .count()
    };
    let before = count("/healthz");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let per_second = count("/healthz") - before;
    assert!((7..=13).contains(&per_second), "{per_second} probes/s");
    assert!(backend
        .requests
        .lock()
        .unwrap()
        .iter()
        .all(|(_, host)| host == "svc.test"));
}

#[tokio::test]
async fn longer_interval_on_a_shared_probe_takes_fewer_results() {
    // Two pools share a probe; one checks every 100 ms, the other every 400 ms. The probe runs
    // at 100 ms; the slower pool counts only every fourth result, so with threshold 2 it needs
    // about 400 ms more than the fast one to decide.
    let backend = Backend::start().await;
    let (checker, events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let mut watch = Watch::new(events);
    let fast = backend.target("fast", "vm", 100);
    let mut slow = backend.target("slow", "vm", 400);
    slow.check.timeout = Duration::from_millis(100);
    checker.set_targets(vec![fast, slow]).unwrap();
    let a = watch
        .health(&TargetKey::new("fast", "vm"), Health::Healthy)
        .await;
    let b = watch
        .health(&TargetKey::new("slow", "vm"), Health::Healthy)
        .await;
    let gap = b.decided_at.duration_since(a.decided_at);
    assert!(gap >= Duration::from_millis(200), "{gap:?}");
    assert_eq!(checker.metrics().probes, 1);
}

#[tokio::test]
async fn reload_keeps_unaffected_probes_and_stops_removed_ones() {
    let a = Backend::start().await;
    let b = Backend::start().await;
    let (checker, events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let mut watch = Watch::new(events);
    let ta = a.target("web", "a", 80);
    let tb = b.target("web", "b", 80);
    checker.set_targets(vec![ta.clone(), tb.clone()]).unwrap();
    watch.health(&ta.key, Health::Healthy).await;
    watch.health(&tb.key, Health::Healthy).await;

    // Same target set again: nothing restarts.
    let s = checker.set_targets(vec![ta.clone(), tb.clone()]).unwrap();
    assert_eq!((s.unchanged, s.probes_started, s.probes_stopped), (2, 0, 0));

    // Drop b, change a's thresholds, add c: a stays healthy (no Unknown in between).
    let c = Backend::start().await;
    let mut ta2 = ta.clone();
    ta2.check.unhealthy_threshold = 5;
    let tc = c.target("web", "c", 80);
    let s = checker.set_targets(vec![ta2, tc.clone()]).unwrap();
    assert_eq!(
        (
            s.added,
            s.removed,
            s.changed,
            s.probes_started,
            s.probes_stopped
        ),
        (1, 1, 1, 1, 1)
    );
    let snap = checker.snapshot();
    assert_eq!(snap.get(&ta.key).unwrap().health, Health::Healthy);
    assert_eq!(snap.get(&tc.key).unwrap().health, Health::Unknown);
    assert!(snap.get(&tb.key).is_none());
    watch.health(&tc.key, Health::Healthy).await;
    // b is not probed any more.
    let b_count = b.request_count();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(b.request_count(), b_count);

    // a moves to another path: new probe, same decided state.
    let mut ta3 = ta.clone();
    ta3.check.request_path = "/v2/healthz".into();
    let s = checker.set_targets(vec![ta3, tc]).unwrap();
    assert_eq!((s.changed, s.probes_started, s.probes_stopped), (1, 1, 1));
    assert_eq!(
        checker.snapshot().get(&ta.key).unwrap().health,
        Health::Healthy
    );
    let m = checker.metrics();
    assert_eq!((m.probes, m.targets), (2, 2));
}

#[tokio::test]
async fn invalid_target_sets_are_refused_whole() {
    let backend = Backend::start().await;
    let (checker, _events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let good = backend.target("web", "a", 100);
    checker.set_targets(vec![good.clone()]).unwrap();
    let mut bad = backend.target("web", "b", 100);
    bad.check.timeout = Duration::from_millis(500);
    let err = checker.set_targets(vec![good.clone(), bad]).unwrap_err();
    assert!(
        matches!(
            &err,
            HealthError::Invalid {
                field: "timeoutSec",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("web/b"), "{err}");
    let err = checker
        .set_targets(vec![good.clone(), good.clone()])
        .unwrap_err();
    assert_eq!(err, HealthError::Duplicate(good.key.clone()));
    // The old set is still probed.
    assert_eq!(checker.metrics().targets, 1);
}

#[tokio::test]
async fn empty_host_sends_the_forwarding_rule_ip() {
    let backend = Backend::start().await;
    let (checker, events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let mut watch = Watch::new(events);
    let mut t = backend.target("web", "a", 100);
    t.check.host = String::new();
    t.rule_ip = Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)));
    checker.set_targets(vec![t.clone()]).unwrap();
    watch.health(&t.key, Health::Healthy).await;
    let hosts: Vec<String> = backend
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(_, h)| h.clone())
        .collect();
    assert!(hosts.iter().all(|h| h == "203.0.113.9"), "{hosts:?}");
}

#[tokio::test]
async fn weighted_pool_follows_reported_weights() {
    let (a, b, c) = (
        Backend::start().await,
        Backend::start().await,
        Backend::start().await,
    );
    *a.weight.lock().unwrap() = Some("3".into());
    *b.weight.lock().unwrap() = Some("1".into());
    *c.weight.lock().unwrap() = Some("0".into());
    let (checker, events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    let mut watch = Watch::new(events);
    let targets: Vec<HealthTarget> = [(&a, "a"), (&b, "b"), (&c, "c")]
        .iter()
        .map(|(backend, name)| {
            let mut t = backend.target("weighted", name, 80);
            t.weighted = true;
            t
        })
        .collect();
    checker.set_targets(targets.clone()).unwrap();
    for t in &targets {
        watch.health(&t.key, Health::Healthy).await;
    }
    let weights = checker.snapshot().pool_weights("weighted").unwrap();
    assert_eq!(weights.mode, WeightMode::Weighted);
    assert_eq!(
        weights.members,
        vec![("a".into(), 3), ("b".into(), 1), ("c".into(), 0)]
    );

    // b stops sending the header: a weight change event, and the pool goes equal.
    *b.weight.lock().unwrap() = None;
    let change = watch
        .until(WAIT, "b's weight changes", |c| c.target.backend == "b")
        .await;
    assert_eq!(
        (change.health, change.previous_weight, change.weight),
        (
            Health::Healthy,
            WeightReport::Weight(1),
            WeightReport::Missing
        )
    );
    let weights = checker.snapshot().pool_weights("weighted").unwrap();
    assert_eq!(weights.mode, WeightMode::EqualMissing("b".into()));
    assert_eq!(
        weights.members,
        vec![("a".into(), 1), ("b".into(), 1), ("c".into(), 1)]
    );
}

#[tokio::test]
async fn hanging_backends_do_not_delay_healthy_ones() {
    // Many hung backends share one checker with a healthy one and an in-flight cap of 4:
    // probes wait for a slot but every hung one still ends at its own deadline, and the
    // healthy backend is still decided.
    let hung = serve(|mut s| async move {
        read_head(&mut s).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let backend = Backend::start().await;
    let (checker, events) = HealthChecker::new(CheckerOptions {
        max_in_flight: 4,
        jitter: 0.1,
        close_with_reset: false,
    })
    .unwrap();
    let mut watch = Watch::new(events);
    let mut targets: Vec<HealthTarget> = (0..8)
        .map(|i| {
            let mut t = HealthTarget::new("hung", format!("h{i}"), LOCALHOST);
            t.check = Check {
                port: hung.port(),
                request_path: format!("/{i}"),
                interval: Duration::from_millis(200),
                timeout: Duration::from_millis(100),
                ..Check::default()
            };
            t
        })
        .collect();
    targets.push(backend.target("ok", "vm", 200));
    checker.set_targets(targets).unwrap();
    watch
        .health(&TargetKey::new("ok", "vm"), Health::Healthy)
        .await;
    watch
        .health(&TargetKey::new("hung", "h7"), Health::Unhealthy)
        .await;
    let m = checker.metrics();
    assert!(m.in_flight <= 4, "{m:?}");
    assert!(m.failures_of("timeout_head") >= 2, "{m:?}");
}

#[tokio::test]
async fn dropping_the_checker_ends_the_event_stream() {
    let (checker, mut events) = HealthChecker::new(CheckerOptions::default()).unwrap();
    drop(checker);
    assert_eq!(events.recv().await, None);
}

#[test]
fn needs_a_runtime() {
    assert!(matches!(
        HealthChecker::new(CheckerOptions::default()),
        Err(HealthError::NoRuntime(_))
    ));
}
