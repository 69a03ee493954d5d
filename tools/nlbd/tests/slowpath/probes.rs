//! The probes of backend-service health checks (SPEC R1, R5) against real servers on
//! 127.0.0.1, each a std `TcpListener` whose connections run on plain threads: HTTP with an
//! expected `response`, HTTPS (rustls servers with self-signed certificates from `rcgen`) and
//! TCP (`request` / `response`), passing and failing every way the public API's success
//! criteria allow, and servers that misbehave.
//!
//! The success criteria (docs/health-checks.md cites the public API's text):
//! * HTTP, HTTPS: status 200, and `response` (when set) within the first 1024 bytes of the
//!   body;
//! * TCP: a connection; `request` (when set) sent; the reply begins with `response` (when set).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nlbd::health::{
    Check, CheckProtocol, CheckerOptions, Health, HealthChecker, HealthTarget, ProbeFailure,
    ProbeKey, ProbeOutcome, ProbePhase, ProbeRequest, TargetKey, WeightReport,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// The deadline of a probe that is expected to end before it.
const TIMEOUT: Duration = Duration::from_millis(1500);
/// The deadline of a probe that is expected to reach it.
const SHORT: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------------------------
// Servers.
// ---------------------------------------------------------------------------------------------

/// Runs `behaviour` on every connection accepted on a fresh 127.0.0.1 port, each on a thread
/// of its own (reads give up after 10 s, so no server thread outlives a test run by much).
fn serve(behaviour: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let behaviour = Arc::new(behaviour);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let behaviour = Arc::clone(&behaviour);
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                behaviour(stream);
            });
        }
    });
    addr
}

/// Reads a request head (up to the blank line), byte by byte so nothing after it is taken.
fn read_head(s: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A complete 200 response with `body`.
fn ok_with(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// An HTTP server answering every request with `response`.
fn http(response: Vec<u8>) -> SocketAddr {
    serve(move |mut s| {
        read_head(&mut s);
        let _ = s.write_all(&response);
    })
}

/// A self-signed certificate for `backend.test` (not the name the probes use, and from no
/// authority anyone trusts) and its key, as a rustls server configuration.
fn tls_server_config() -> Arc<ServerConfig> {
    let certified = rcgen::generate_simple_self_signed(vec!["backend.test".to_string()]).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .unwrap();
    Arc::new(config)
}

/// An HTTPS server answering every request with `response`; records the server name (SNI)
/// each client asked for and the request heads.
struct Https {
    addr: SocketAddr,
    sni: Arc<Mutex<Vec<Option<String>>>>,
    heads: Arc<Mutex<Vec<String>>>,
}

fn https(response: Vec<u8>) -> Https {
    let config = tls_server_config();
    let sni = Arc::new(Mutex::new(Vec::new()));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (sni2, heads2) = (Arc::clone(&sni), Arc::clone(&heads));
    let addr = serve(move |tcp| {
        let Ok(conn) = ServerConnection::new(Arc::clone(&config)) else {
            return;
        };
        let mut tls = StreamOwned::new(conn, tcp);
        // The first read drives the handshake.
        let head = read_head(&mut tls);
        if head.is_empty() {
            return;
        }
        sni2.lock()
            .unwrap()
            .push(tls.conn.server_name().map(str::to_string));
        heads2.lock().unwrap().push(head);
        let _ = tls.write_all(&response);
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    Https { addr, sni, heads }
}

// ---------------------------------------------------------------------------------------------
// Probes.
// ---------------------------------------------------------------------------------------------

fn key(addr: SocketAddr, protocol: CheckProtocol, response: &str) -> ProbeKey {
    ProbeKey {
        addr,
        protocol,
        path: if protocol.is_http() {
            "/healthz".into()
        } else {
            String::new()
        },
        host: if protocol.is_http() {
            "svc.test".into()
        } else {
            String::new()
        },
        request: String::new(),
        response: response.into(),
    }
}

fn tcp_key(addr: SocketAddr, request: &str, response: &str) -> ProbeKey {
    ProbeKey {
        request: request.into(),
        ..key(addr, CheckProtocol::Tcp, response)
    }
}

async fn probe(key: &ProbeKey, timeout: Duration) -> ProbeOutcome {
    ProbeRequest::new(key).unwrap().run(timeout).await
}

async fn result(key: &ProbeKey) -> Result<(), ProbeFailure> {
    probe(key, TIMEOUT).await.result.map(|_| ())
}

// ---------------------------------------------------------------------------------------------
// HTTP with `response`.
// ---------------------------------------------------------------------------------------------

/// The expected response must lie within the first 1024 bytes of the body: "ok" as bytes
/// 1023–1024 (1-based) is in, as bytes 1024–1025 it is not (worked out by hand).
#[tokio::test]
async fn http_response_is_looked_for_in_the_first_1024_bytes_of_the_body() {
    let first = http(ok_with(b"status: ok, all good"));
    assert_eq!(result(&key(first, CheckProtocol::Http, "ok")).await, Ok(()));

    let mut last_two = vec![b'x'; 1022];
    last_two.extend_from_slice(b"ok");
    let at_the_edge = http(ok_with(&last_two));
    assert_eq!(
        result(&key(at_the_edge, CheckProtocol::Http, "ok")).await,
        Ok(())
    );

    let mut straddling = vec![b'x'; 1023];
    straddling.extend_from_slice(b"ok");
    let beyond = http(ok_with(&straddling));
    assert_eq!(
        result(&key(beyond, CheckProtocol::Http, "ok")).await,
        Err(ProbeFailure::Mismatch)
    );
    let mut far = vec![b'x'; 5000];
    far.extend_from_slice(b"ok");
    let far = http(ok_with(&far));
    assert_eq!(
        result(&key(far, CheckProtocol::Http, "ok")).await,
        Err(ProbeFailure::Mismatch)
    );
    // Without an expected response the same body passes: the status alone decides.
    assert_eq!(result(&key(far, CheckProtocol::Http, "")).await, Ok(()));
}

#[tokio::test]
async fn http_response_absent_or_on_another_status_fails() {
    let other = http(ok_with(b"status: degraded"));
    assert_eq!(
        result(&key(other, CheckProtocol::Http, "status: ok")).await,
        Err(ProbeFailure::Mismatch)
    );
    // Matching is of exact bytes: case counts.
    let upper = http(ok_with(b"OK"));
    assert_eq!(
        result(&key(upper, CheckProtocol::Http, "ok")).await,
        Err(ProbeFailure::Mismatch)
    );
    let empty = http(ok_with(b""));
    assert_eq!(
        result(&key(empty, CheckProtocol::Http, "ok")).await,
        Err(ProbeFailure::Mismatch)
    );
    // The body holds the response, but the status is not 200.
    let unavailable = http(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            .to_vec(),
    );
    assert_eq!(
        result(&key(unavailable, CheckProtocol::Http, "ok")).await,
        Err(ProbeFailure::Status(503))
    );
}

/// The response is found across the frames of a chunked body that arrives in two writes
/// ("o" at the end of the first chunk, "k" at the start of the second).
#[tokio::test]
async fn http_response_split_across_chunks_is_found() {
    let addr = serve(|mut s| {
        read_head(&mut s);
        let first = format!("{:x}\r\n{}o\r\n", 500, "y".repeat(499));
        let _ = s.write_all(
            format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{first}").as_bytes(),
        );
        let _ = s.flush();
        thread::sleep(Duration::from_millis(50));
        let _ = s.write_all(b"3\r\nk!!\r\n0\r\n\r\n");
    });
    let out = probe(&key(addr, CheckProtocol::Http, "ok"), TIMEOUT).await;
    assert_eq!(out.result.map(|p| p.body_bytes), Ok(503), "{out:?}");
}

/// A body that trickles in: the probe fails at its deadline, reading the body.
#[tokio::test]
async fn http_slow_body_times_out() {
    let addr = serve(|mut s| {
        read_head(&mut s);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
        for _ in 0..100 {
            if s.write_all(b"x").is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(30));
        }
    });
    let out = probe(&key(addr, CheckProtocol::Http, "ok"), SHORT).await;
    assert_eq!(out.result, Err(ProbeFailure::Timeout(ProbePhase::Body)));
}

// ---------------------------------------------------------------------------------------------
// HTTPS.
// ---------------------------------------------------------------------------------------------

/// A self-signed certificate for another name passes (Google Cloud's probers do not validate
/// certificates); the request is the same GET as over HTTP; `host` is the server name (SNI).
#[tokio::test]
async fn https_passes_whatever_the_certificate_and_sends_host_as_sni() {
    let server = https(ok_with(b"{\"status\": \"ok\"}"));
    let k = key(server.addr, CheckProtocol::Https, "\"ok\"");
    let out = probe(&k, TIMEOUT).await;
    assert!(out.result.is_ok(), "{out:?}");
    assert_eq!(
        server.sni.lock().unwrap().as_slice(),
        [Some("svc.test".to_string())]
    );
    let head = server.heads.lock().unwrap()[0].clone();
    assert!(head.starts_with("GET /healthz HTTP/1.1\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("\r\nhost: svc.test\r\n"),
        "{head}"
    );

    // A Host with a port: the name without it. An IP (the forwarding rule's, when `host` is
    // empty): no SNI at all, as RFC 6066 allows host names only.
    for (host, sni) in [
        ("svc.test:8443", Some("svc.test")),
        ("203.0.113.60", None),
        ("[2001:db8::1]", None),
    ] {
        server.sni.lock().unwrap().clear();
        let k = ProbeKey {
            host: host.into(),
            ..key(server.addr, CheckProtocol::Https, "")
        };
        assert_eq!(result(&k).await, Ok(()), "{host}");
        assert_eq!(
            server.sni.lock().unwrap().as_slice(),
            [sni.map(str::to_string)],
            "{host}"
        );
    }
}

#[tokio::test]
async fn https_judges_status_response_and_weight_as_http_does() {
    let server = https(ok_with(b"fine"));
    assert_eq!(
        result(&key(server.addr, CheckProtocol::Https, "ok")).await,
        Err(ProbeFailure::Mismatch)
    );
    let down =
        https(b"HTTP/1.1 503 Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec());
    assert_eq!(
        result(&key(down.addr, CheckProtocol::Https, "")).await,
        Err(ProbeFailure::Status(503))
    );
    let weighted = https(
        b"HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: 37\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            .to_vec(),
    );
    let pass = probe(&key(weighted.addr, CheckProtocol::Https, "ok"), TIMEOUT)
        .await
        .result
        .unwrap();
    assert_eq!(pass.weight, WeightReport::Weight(37));
}

/// Handshakes that cannot complete fail as `tls`; one that never progresses fails at the
/// deadline in the handshake; a server that hangs up fails as `closed`.
#[tokio::test]
async fn https_handshake_failures() {
    // A plain HTTP server: its answer to the ClientHello is not TLS.
    let plain = serve(|mut s| {
        let mut buf = [0u8; 512];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    assert_eq!(
        result(&key(plain, CheckProtocol::Https, "")).await,
        Err(ProbeFailure::Tls)
    );
    // A TLS server that refuses the handshake: a fatal handshake_failure alert (record type
    // 21, TLS 1.2 record version, length 2, level fatal (2), description 40).
    let refusing = serve(|mut s| {
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
        let _ = s.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]);
    });
    assert_eq!(
        result(&key(refusing, CheckProtocol::Https, "")).await,
        Err(ProbeFailure::Tls)
    );
    // Garbage that happens to look like a record header, then nonsense.
    let garbage = serve(|mut s| {
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"\x16\x03\x03\x00\x05\xff\xff\xff\xff\xff");
    });
    assert_eq!(
        result(&key(garbage, CheckProtocol::Https, "")).await,
        Err(ProbeFailure::Tls)
    );
    // Reads the ClientHello and says nothing.
    let silent = serve(|mut s| {
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
        thread::sleep(Duration::from_secs(3));
    });
    let out = probe(&key(silent, CheckProtocol::Https, ""), SHORT).await;
    assert_eq!(
        out.result,
        Err(ProbeFailure::Timeout(ProbePhase::Handshake))
    );
    // Reads the ClientHello and closes.
    let hangs_up = serve(|mut s| {
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
    });
    assert_eq!(
        result(&key(hangs_up, CheckProtocol::Https, "")).await,
        Err(ProbeFailure::Closed)
    );
}

/// A TLS server that completes the handshake and then never answers the request.
#[tokio::test]
async fn https_silent_after_the_handshake_times_out_waiting_for_the_head() {
    let config = tls_server_config();
    let addr = serve(move |tcp| {
        let Ok(conn) = ServerConnection::new(Arc::clone(&config)) else {
            return;
        };
        let mut tls = StreamOwned::new(conn, tcp);
        read_head(&mut tls);
        thread::sleep(Duration::from_secs(3));
    });
    let out = probe(&key(addr, CheckProtocol::Https, ""), SHORT).await;
    assert_eq!(out.result, Err(ProbeFailure::Timeout(ProbePhase::Head)));
}

// ---------------------------------------------------------------------------------------------
// TCP.
// ---------------------------------------------------------------------------------------------

/// A TCP server that records what it received (up to `expect` bytes or the client's close)
/// and answers with `reply`.
fn tcp_server(expect: usize, reply: &'static [u8]) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = serve(move |mut s| {
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while got.len() < expect {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        seen2.lock().unwrap().push(got);
        let _ = s.write_all(reply);
        // Keep the connection open a little: the probe must not wait for the close.
        thread::sleep(Duration::from_millis(200));
    });
    (addr, seen)
}

#[tokio::test]
async fn tcp_connect_only_passes_and_refused_fails() {
    let (addr, _) = tcp_server(0, b"");
    assert_eq!(result(&tcp_key(addr, "", "")).await, Ok(()));
    let closed = {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        l.local_addr().unwrap()
    };
    assert_eq!(
        result(&tcp_key(closed, "", "")).await,
        Err(ProbeFailure::Refused)
    );
}

#[tokio::test]
async fn tcp_request_is_sent_and_the_reply_must_begin_with_the_response() {
    let (addr, seen) = tcp_server(6, b"+PONG\r\n");
    assert_eq!(result(&tcp_key(addr, "PING\r\n", "+PONG")).await, Ok(()));
    assert_eq!(seen.lock().unwrap().as_slice(), [b"PING\r\n".to_vec()]);
    // The whole reply, exactly, is a beginning too.
    assert_eq!(
        result(&tcp_key(addr, "PING\r\n", "+PONG\r\n")).await,
        Ok(())
    );
    // The response is a beginning, not a substring.
    assert_eq!(
        result(&tcp_key(addr, "PING\r\n", "PONG")).await,
        Err(ProbeFailure::Mismatch)
    );
    let (err, _) = tcp_server(6, b"-ERR unknown command\r\n");
    assert_eq!(
        result(&tcp_key(err, "PING\r\n", "+PONG")).await,
        Err(ProbeFailure::Mismatch)
    );
    // Longer than the reply: the probe waits for the rest, and the server closes first.
    assert_eq!(
        result(&tcp_key(addr, "PING\r\n", "+PONG\r\nmore")).await,
        Err(ProbeFailure::Closed)
    );
}

/// A server that speaks first (a banner) with no request: no deferred ACK holds it back.
#[tokio::test]
async fn tcp_banner_without_request() {
    let addr = serve(|mut s| {
        let _ = s.write_all(b"220 smtp.test ESMTP ready\r\n");
        thread::sleep(Duration::from_millis(500));
    });
    let out = probe(&tcp_key(addr, "", "220 "), TIMEOUT).await;
    assert_eq!(out.result.map(|p| p.body_bytes), Ok(4), "{out:?}");
}

/// Only as many bytes as the response has are read, whatever the backend sends; a reply
/// that arrives byte by byte is put together.
#[tokio::test]
async fn tcp_reads_only_the_response_length() {
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let endless = serve(move |mut s| {
        let chunk = [b'A'; 16 * 1024];
        for _ in 0..1024 {
            match s.write(&chunk) {
                Ok(n) => sent2.fetch_add(n, Ordering::Relaxed),
                Err(_) => return,
            };
        }
    });
    let out = probe(&tcp_key(endless, "", "AAAA"), TIMEOUT).await;
    assert_eq!(out.result.map(|p| p.body_bytes), Ok(4));

    let trickle = serve(|mut s| {
        for b in b"OK ready" {
            if s.write_all(&[*b]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
    });
    assert_eq!(result(&tcp_key(trickle, "", "OK ready")).await, Ok(()));
    // The endless server's 16 MiB were never all read (socket buffers aside).
    thread::sleep(Duration::from_millis(100));
    assert!(sent.load(Ordering::Relaxed) < 16 * 1024 * 1024);
}

#[tokio::test]
async fn tcp_misbehaving_servers_fail_cleanly() {
    // Closes after half the response.
    let early = serve(|mut s| {
        let mut buf = [0u8; 16];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"+PO");
    });
    assert_eq!(
        result(&tcp_key(early, "PING", "+PONG")).await,
        Err(ProbeFailure::Closed)
    );
    // Never answers.
    let silent = serve(|mut s| {
        let mut buf = [0u8; 16];
        let _ = s.read(&mut buf);
        thread::sleep(Duration::from_secs(3));
    });
    let out = probe(&tcp_key(silent, "PING", "+PONG"), SHORT).await;
    assert_eq!(out.result, Err(ProbeFailure::Timeout(ProbePhase::Reply)));
    // Garbage.
    let garbage = serve(|mut s| {
        let _ = s.write_all(&[0xff, 0x00, 0xfe, 0x80, 0x16, 0x03]);
    });
    assert_eq!(
        result(&tcp_key(garbage, "", "+PONG")).await,
        Err(ProbeFailure::Mismatch)
    );
    // Resets.
    let resets = serve(|s| drop(reset_on_close(s)));
    let got = result(&tcp_key(resets, "PING", "+PONG")).await;
    assert!(
        matches!(got, Err(ProbeFailure::Reset | ProbeFailure::Closed)),
        "{got:?}"
    );
}

/// The stream with SO_LINGER 0: closing it makes the kernel send a reset.
fn reset_on_close(s: TcpStream) -> TcpStream {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a descriptor the stream owns, alive for the call, with a linger
    // struct on the stack of the exact size passed.
    unsafe {
        use std::os::fd::AsRawFd;
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// The checker with these probes.
// ---------------------------------------------------------------------------------------------

fn target(pool: &str, name: &str, addr: SocketAddr, check: Check) -> HealthTarget {
    let mut t = HealthTarget::new(pool, name, addr.ip());
    t.check = Check {
        port: addr.port(),
        interval: Duration::from_millis(100),
        timeout: Duration::from_millis(100),
        healthy_threshold: 1,
        unhealthy_threshold: 1,
        ..check
    };
    t
}

fn wait_health(checker: &HealthChecker, key: &TargetKey, want: Health) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let snap = checker.snapshot();
        if snap.get(key).is_some_and(|t| t.health == want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{key} did not turn {want}: {:?}",
            snap.get(key)
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// HTTPS and TCP targets turn healthy and unhealthy with their servers; targets of two pools
/// with the same probe share it, another `response` is another probe.
#[test]
fn checker_decides_https_and_tcp_targets() {
    let up = Arc::new(AtomicBool::new(true));
    let up2 = Arc::clone(&up);
    let pong = serve(move |mut s| {
        let mut buf = [0u8; 4];
        if s.read_exact(&mut buf).is_err() {
            return;
        }
        let reply: &[u8] = if up2.load(Ordering::Relaxed) {
            b"PONG"
        } else {
            b"FAIL"
        };
        let _ = s.write_all(reply);
    });
    let tls = https(ok_with(b"ready"));

    let (checker, _events) = HealthChecker::on_own_thread(CheckerOptions::default()).unwrap();
    let tcp_check = Check {
        protocol: CheckProtocol::Tcp,
        request: "PING".into(),
        response: "PONG".into(),
        ..Check::default()
    };
    let https_check = Check {
        protocol: CheckProtocol::Https,
        response: "ready".into(),
        ..Check::default()
    };
    let targets = vec![
        target("edge", "vm", pong, tcp_check.clone()),
        target("other", "vm", pong, tcp_check.clone()),
        target(
            "third",
            "vm",
            pong,
            Check {
                response: "PON".into(),
                ..tcp_check
            },
        ),
        target("tls", "vm", tls.addr, https_check),
    ];
    let summary = checker.set_targets(targets).unwrap();
    assert_eq!((summary.added, summary.probes_started), (4, 3));

    let edge = TargetKey::new("edge", "vm");
    let other = TargetKey::new("other", "vm");
    let tls_key = TargetKey::new("tls", "vm");
    for k in [&edge, &other, &tls_key] {
        wait_health(&checker, k, Health::Healthy);
    }
    up.store(false, Ordering::Relaxed);
    wait_health(&checker, &edge, Health::Unhealthy);
    wait_health(&checker, &other, Health::Unhealthy);
    let snap = checker.snapshot();
    assert_eq!(
        snap.get(&edge).and_then(|t| t.last_probe).map(|o| o.result),
        Some(Err(ProbeFailure::Mismatch))
    );
    // "FAIL" does not begin with "PON" either.
    wait_health(&checker, &TargetKey::new("third", "vm"), Health::Unhealthy);
    assert_eq!(snap.get(&tls_key).map(|t| t.health), Some(Health::Healthy));
}
