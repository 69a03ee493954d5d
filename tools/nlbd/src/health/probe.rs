//! One probe: connect, then an HTTP/1.1 `GET` (plain or over TLS) reading the response head
//! and a capped body, or a TCP exchange (optional request, optional expected reply); close.
//!
//! Everything a backend can do wrong ends in a [`ProbeFailure`] within the deadline: the
//! whole exchange (connect, TLS handshake, request, reply) runs under one
//! `tokio::time::timeout`, the response head is read into a buffer of at most
//! [`MAX_HEAD_BYTES`], at most [`MAX_BODY_BYTES`] of body are read before the connection is
//! dropped, and a TCP reply is read only as far as the expected `response` reaches.
//!
//! What passes (the public API's success criteria, `docs/health-checks.md` cites them):
//! * HTTP, HTTPS: status 200 and, when `response` is set, `response` within the first
//!   [`MAX_PROBE_DATA`] (1024) bytes of the body;
//! * TCP: the connection (and `request`, when set, written); when `response` is set, the
//!   reply's first bytes are exactly `response`.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Body as _;
use hyper::client::conn::http1;
use hyper::header::{HeaderValue, CONNECTION, HOST, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::config::{CheckProtocol, ProbeKey, MAX_PROBE_DATA};
use super::socket::{self, CloseMode, Ending, SocketPool};
use super::state::{WeightReport, WEIGHT_HEADER};

/// Largest response head (status line and headers) read; larger is a failure.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Body bytes read at most; the rest is not read (the connection is dropped), and the probe
/// is judged on the status (and the expected `response`, looked for in the first 1024 bytes).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// `User-Agent` of the probes (backends can tell health checks from clients).
pub const PROBE_USER_AGENT: &str = "nlb-offload-health-check/1.0";

/// How far a probe got before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ProbePhase {
    /// TCP connect.
    Connect = 0,
    /// HTTPS: the TLS handshake.
    Handshake,
    /// HTTP(S): sending the request and waiting for the complete response head.
    Head,
    /// HTTP(S): reading the body.
    Body,
    /// TCP: sending `request` and waiting for the expected `response`.
    Reply,
}

impl ProbePhase {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => ProbePhase::Connect,
            1 => ProbePhase::Handshake,
            2 => ProbePhase::Head,
            3 => ProbePhase::Body,
            _ => ProbePhase::Reply,
        }
    }
}

/// Why a probe did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeFailure {
    /// Connection refused (nothing listening).
    Refused,
    /// No route to the backend's host or network.
    Unreachable,
    /// Another connect error.
    Connect(io::ErrorKind),
    /// The backend reset the connection.
    Reset,
    /// The backend closed the connection before a complete response.
    Closed,
    /// The deadline (`timeoutSec`) passed in the given phase.
    Timeout(ProbePhase),
    /// The response is not HTTP/1.x.
    Malformed,
    /// The response head is larger than [`MAX_HEAD_BYTES`] (or has over 100 headers).
    HeadTooLarge,
    /// A complete response with another status than 200.
    Status(u16),
    /// HTTPS: the TLS handshake failed (not TLS, a TLS alert, no common parameters), or a TLS
    /// error came later in the exchange. (Certificates are never checked.)
    Tls,
    /// The expected `response` is not there: HTTP(S), not in the first 1024 bytes of a
    /// 200's body; TCP, the reply does not begin with it.
    Mismatch,
    /// Another I/O error during the exchange.
    Io(io::ErrorKind),
    /// The prober itself ran out of a resource (file descriptors, ephemeral ports, memory):
    /// says nothing about the backend, so it counts neither as a pass nor as a failure.
    Local(io::ErrorKind),
}

impl ProbeFailure {
    /// Whether the failure is about the backend (counts towards `unhealthyThreshold`).
    pub fn is_backend_failure(self) -> bool {
        !matches!(self, ProbeFailure::Local(_))
    }

    /// Short stable label for metrics (`reason` label).
    pub fn label(self) -> &'static str {
        match self {
            ProbeFailure::Refused => "refused",
            ProbeFailure::Unreachable => "unreachable",
            ProbeFailure::Connect(_) => "connect_error",
            ProbeFailure::Reset => "reset",
            ProbeFailure::Closed => "closed",
            ProbeFailure::Timeout(ProbePhase::Connect) => "timeout_connect",
            ProbeFailure::Timeout(ProbePhase::Handshake) => "timeout_tls",
            ProbeFailure::Timeout(ProbePhase::Head) => "timeout_head",
            ProbeFailure::Timeout(ProbePhase::Body) => "timeout_body",
            ProbeFailure::Timeout(ProbePhase::Reply) => "timeout_reply",
            ProbeFailure::Malformed => "malformed",
            ProbeFailure::HeadTooLarge => "head_too_large",
            ProbeFailure::Status(_) => "status",
            ProbeFailure::Tls => "tls",
            ProbeFailure::Mismatch => "mismatch",
            ProbeFailure::Io(_) => "io_error",
            ProbeFailure::Local(_) => "local_error",
        }
    }

    /// Every label [`label`](Self::label) can return, for metrics that list all of them.
    pub const LABELS: [&'static str; 17] = [
        "refused",
        "unreachable",
        "connect_error",
        "reset",
        "closed",
        "timeout_connect",
        "timeout_tls",
        "timeout_head",
        "timeout_body",
        "timeout_reply",
        "malformed",
        "head_too_large",
        "status",
        "tls",
        "mismatch",
        "io_error",
        "local_error",
    ];

    /// Index of [`label`](Self::label) in [`LABELS`](Self::LABELS).
    pub fn label_index(self) -> usize {
        let label = self.label();
        Self::LABELS
            .iter()
            .position(|l| *l == label)
            .unwrap_or(Self::LABELS.len() - 1)
    }
}

impl fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeFailure::Refused => f.write_str("connection refused"),
            ProbeFailure::Unreachable => f.write_str("host or network unreachable"),
            ProbeFailure::Connect(k) => write!(f, "connect failed: {k}"),
            ProbeFailure::Reset => f.write_str("connection reset by the backend"),
            ProbeFailure::Closed => f.write_str("connection closed before a complete response"),
            ProbeFailure::Timeout(ProbePhase::Connect) => f.write_str("timed out connecting"),
            ProbeFailure::Timeout(ProbePhase::Handshake) => {
                f.write_str("timed out in the TLS handshake")
            }
            ProbeFailure::Timeout(ProbePhase::Head) => {
                f.write_str("timed out waiting for the response head")
            }
            ProbeFailure::Timeout(ProbePhase::Body) => f.write_str("timed out reading the body"),
            ProbeFailure::Timeout(ProbePhase::Reply) => {
                f.write_str("timed out waiting for the expected response")
            }
            ProbeFailure::Malformed => f.write_str("response is not valid HTTP/1.x"),
            ProbeFailure::HeadTooLarge => write!(f, "response head over {MAX_HEAD_BYTES} bytes"),
            ProbeFailure::Status(code) => write!(f, "HTTP status {code}, 200 needed"),
            ProbeFailure::Tls => f.write_str("TLS handshake or record failed"),
            ProbeFailure::Mismatch => f.write_str("the expected response is not there"),
            ProbeFailure::Io(k) => write!(f, "I/O error: {k}"),
            ProbeFailure::Local(k) => write!(f, "prober out of resources: {k}"),
        }
    }
}

/// A passing probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbePass {
    /// The weight header as parsed (whether or not the pool is weighted); TCP probes have
    /// none ([`WeightReport::Missing`]).
    pub weight: WeightReport,
    /// Body bytes read (TCP: reply bytes read).
    pub body_bytes: usize,
    /// Whether the body was longer than [`MAX_BODY_BYTES`] and left unread.
    pub body_truncated: bool,
}

/// The result of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// When the probe finished (the deciding instant for the state machine).
    pub finished_at: Instant,
    /// From the start of connect to the end.
    pub latency: Duration,
    /// Pass or why not.
    pub result: Result<ProbePass, ProbeFailure>,
}

/// A request prepared once per probe key, reused every interval.
#[derive(Debug, Clone)]
pub struct ProbeRequest {
    addr: SocketAddr,
    exchange: Exchange,
    close_with_reset: bool,
}

/// What a probe sends and expects.
#[derive(Debug, Clone)]
enum Exchange {
    /// `GET uri` with `Host: host`, over TLS when `tls` is set.
    Http {
        uri: Uri,
        host: HeaderValue,
        response: Bytes,
        tls: Option<Tls>,
    },
    /// `request` (may be empty), then a reply beginning with `response` (may be empty).
    Tcp { request: Bytes, response: Bytes },
}

/// The TLS side of an HTTPS probe.
#[derive(Clone)]
struct Tls {
    connector: TlsConnector,
    /// A DNS name is sent as SNI; an IP address is not (RFC 6066 allows host names only).
    server_name: ServerName<'static>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl ProbeRequest {
    /// Prepares the request of `key`; `None` when the path or host cannot be sent (validation
    /// refuses those before they get here) or TLS cannot be set up.
    pub fn new(key: &ProbeKey) -> Option<Self> {
        let exchange = match key.protocol {
            CheckProtocol::Http | CheckProtocol::Https => Exchange::Http {
                uri: Uri::try_from(key.path.as_str()).ok()?,
                host: HeaderValue::from_str(&key.host).ok()?,
                response: Bytes::copy_from_slice(key.response.as_bytes()),
                tls: match key.protocol {
                    CheckProtocol::Https => Some(Tls {
                        connector: tls_connector()?,
                        server_name: server_name(&key.host, key.addr.ip()),
                    }),
                    _ => None,
                },
            },
            CheckProtocol::Tcp => Exchange::Tcp {
                request: Bytes::copy_from_slice(key.request.as_bytes()),
                response: Bytes::copy_from_slice(key.response.as_bytes()),
            },
        };
        Some(ProbeRequest {
            addr: key.addr,
            exchange,
            close_with_reset: false,
        })
    }

    /// Ends each probe's connection with a reset (SO_LINGER 0) even when the backend keeps
    /// its end open (by default a reset is sent only after the backend's own FIN).
    pub fn close_with_reset(mut self, enabled: bool) -> Self {
        self.close_with_reset = enabled;
        self
    }

    /// The backend address probed.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Runs one probe with a deadline for the whole exchange.
    pub async fn run(&self, timeout: Duration) -> ProbeOutcome {
        let (outcome, ending) = self.run_with(timeout, None).await;
        if let Some(ending) = ending {
            ending.end(None, Duration::ZERO).await;
        }
        outcome
    }

    /// [`run`](Self::run), taking its socket from `pool`; after a complete HTTP(S) response
    /// the connection is handed back to be ended (and its socket pooled) once the outcome is
    /// used.
    pub(crate) async fn run_with(
        &self,
        timeout: Duration,
        pool: Option<&SocketPool>,
    ) -> (ProbeOutcome, Option<Ending>) {
        let started = Instant::now();
        // Atomic rather than Cell so the probe future stays Send (spawned on any worker).
        let phase = AtomicU8::new(ProbePhase::Connect as u8);
        let mut ending = None;
        let exchange = self.exchange(&phase, pool, &mut ending);
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_elapsed) => Err(ProbeFailure::Timeout(ProbePhase::from_u8(
                phase.load(Ordering::Relaxed),
            ))),
        };
        let finished_at = Instant::now();
        let outcome = ProbeOutcome {
            finished_at,
            latency: finished_at.saturating_duration_since(started),
            result,
        };
        (outcome, ending)
    }

    fn close_mode(&self) -> CloseMode {
        if self.close_with_reset {
            CloseMode::Reset
        } else {
            CloseMode::Polite
        }
    }

    async fn exchange(
        &self,
        phase: &AtomicU8,
        pool: Option<&SocketPool>,
        ending: &mut Option<Ending>,
    ) -> Result<ProbePass, ProbeFailure> {
        let mode = self.close_mode();
        match &self.exchange {
            Exchange::Http {
                uri,
                host,
                response,
                tls,
            } => {
                // The request (or the ClientHello) follows the connect at once: the
                // handshake's last ACK can ride on it.
                let stream = socket::connect(self.addr, mode, pool, true)
                    .await
                    .map_err(classify_connect_error)?;
                let get = Get {
                    uri,
                    host,
                    response,
                    phase,
                };
                match tls {
                    None => {
                        phase.store(ProbePhase::Head as u8, Ordering::Relaxed);
                        let (result, done) = get.exchange(stream).await;
                        *ending = done.map(|s| Ending::new(s, mode, self.addr));
                        result
                    }
                    Some(tls) => {
                        phase.store(ProbePhase::Handshake as u8, Ordering::Relaxed);
                        let stream = tls
                            .connector
                            .connect(tls.server_name.clone(), stream)
                            .await
                            .map_err(|e| classify_io_error(&e))?;
                        phase.store(ProbePhase::Head as u8, Ordering::Relaxed);
                        let (result, done) = get.exchange(stream).await;
                        *ending = done.map(|s| Ending::new(s.into_inner().0, mode, self.addr));
                        result
                    }
                }
            }
            Exchange::Tcp { request, response } => {
                // With no request, nothing would carry the handshake's last ACK, and a server
                // that speaks first (a banner) would wait for it: no deferred ACK, no socket
                // from the pool (those have it).
                let defer_ack = !request.is_empty();
                let pool = if defer_ack { pool } else { None };
                let mut stream = socket::connect(self.addr, mode, pool, defer_ack)
                    .await
                    .map_err(classify_connect_error)?;
                phase.store(ProbePhase::Reply as u8, Ordering::Relaxed);
                // Dropped afterwards: FIN, or a reset in `close_with_reset` mode.
                tcp_exchange(&mut stream, request, response).await
            }
        }
    }
}

/// One `GET` on a connected stream (plain TCP or TLS).
struct Get<'a> {
    uri: &'a Uri,
    host: &'a HeaderValue,
    response: &'a [u8],
    phase: &'a AtomicU8,
}

impl Get<'_> {
    /// Sends the request and reads the response; gives the stream back after a complete
    /// response (passing or not), so that the connection can be ended cleanly.
    async fn exchange<S>(self, stream: S) -> (Result<ProbePass, ProbeFailure>, Option<S>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let handshake = http1::Builder::new()
            .max_buf_size(MAX_HEAD_BYTES)
            .handshake::<_, Empty<Bytes>>(ProbeIo(TokioIo::new(stream)))
            .await;
        let (mut sender, connection) = match handshake {
            Ok(parts) => parts,
            Err(e) => return (Err(classify_hyper_error(&e)), None),
        };
        let mut request = Request::new(Empty::<Bytes>::new());
        *request.method_mut() = Method::GET;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, self.host.clone());
        headers.insert(USER_AGENT, HeaderValue::from_static(PROBE_USER_AGENT));
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
        let (expected, phase) = (self.response, self.phase);

        let exchange = async {
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| classify_hyper_error(&e))?;
            if response.status() != StatusCode::OK {
                return Err(ProbeFailure::Status(response.status().as_u16()));
            }
            let weight = WeightReport::from_header_values(
                response.headers().get_all(WEIGHT_HEADER).into_iter(),
            );
            phase.store(ProbePhase::Body as u8, Ordering::Relaxed);
            let mut body = response.into_body();
            let mut body_bytes = 0usize;
            // The first bytes of the body, where the expected response is looked for.
            let mut window: Vec<u8> = Vec::new();
            while body_bytes < MAX_BODY_BYTES {
                match body.frame().await {
                    None => break,
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            if !expected.is_empty() && window.len() < MAX_PROBE_DATA {
                                let take = (MAX_PROBE_DATA - window.len()).min(data.len());
                                window.extend_from_slice(&data[..take]);
                            }
                            body_bytes += data.len();
                        }
                    }
                    Some(Err(e)) => return Err(classify_hyper_error(&e)),
                }
            }
            if !contains(&window, expected) {
                return Err(ProbeFailure::Mismatch);
            }
            Ok(ProbePass {
                weight,
                body_bytes: body_bytes.min(MAX_BODY_BYTES),
                body_truncated: body_bytes >= MAX_BODY_BYTES && !body.is_end_stream(),
            })
        };

        // Drive the connection and the exchange together on this task (no spawn per probe).
        // When the connection ends first its error is the more precise one, but the exchange
        // may still hold a complete response, so it is awaited to the end.
        let mut exchange = pin!(exchange);
        let mut connection = connection;
        let mut connection_error: Option<ProbeFailure> = None;
        let mut connection_done = false;
        loop {
            tokio::select! {
                biased;
                result = &mut exchange => {
                    let result = match (result, connection_error) {
                        (Err(_), Some(precise)) => Err(precise),
                        (result, _) => result,
                    };
                    // A complete response, passing or not: the connection ended cleanly.
                    let complete = matches!(
                        result,
                        Ok(_) | Err(ProbeFailure::Status(_) | ProbeFailure::Mismatch)
                    );
                    let stream = complete.then(|| connection.into_parts().io.0.into_inner());
                    return (result, stream);
                }
                done = &mut connection, if !connection_done => {
                    connection_done = true;
                    if let Err(e) = done {
                        connection_error = Some(classify_hyper_error(&e));
                    }
                }
            }
        }
    }
}

/// Whether `needle` occurs in `haystack` (an empty needle always does).
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// A TCP probe on a connected stream: `request` written, then, when `response` is set, exactly
/// as many bytes read as it has, which must be it. Reading stops at the first byte that
/// differs and never goes past the response's length, whatever the backend sends.
async fn tcp_exchange(
    stream: &mut TcpStream,
    request: &[u8],
    response: &[u8],
) -> Result<ProbePass, ProbeFailure> {
    if !request.is_empty() {
        stream
            .write_all(request)
            .await
            .map_err(|e| classify_io_error(&e))?;
    }
    let mut got = Vec::with_capacity(response.len());
    let mut buf = [0u8; MAX_PROBE_DATA];
    while got.len() < response.len() {
        let want = (response.len() - got.len()).min(buf.len());
        let n = stream
            .read(&mut buf[..want])
            .await
            .map_err(|e| classify_io_error(&e))?;
        if n == 0 {
            return Err(ProbeFailure::Closed);
        }
        got.extend_from_slice(&buf[..n]);
        if !response.starts_with(&got) {
            return Err(ProbeFailure::Mismatch);
        }
    }
    Ok(ProbePass {
        weight: WeightReport::Missing,
        body_bytes: got.len(),
        body_truncated: false,
    })
}

/// The TLS server name of an HTTPS probe whose `Host` is `host`: a DNS name (without a
/// `:port`) is sent as SNI; anything else, such as the forwarding rule's IP that stands in for
/// an empty `host`, sends none (SNI carries host names only, RFC 6066 section 3).
fn server_name(host: &str, ip: IpAddr) -> ServerName<'static> {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    };
    match ServerName::try_from(name.to_string()) {
        Ok(dns @ ServerName::DnsName(_)) => dns,
        _ => ServerName::IpAddress(ip.into()),
    }
}

/// The TLS client of every HTTPS probe (one configuration for the process; `None` only if
/// rustls refuses its own defaults).
fn tls_connector() -> Option<TlsConnector> {
    static CONFIG: OnceLock<Option<Arc<ClientConfig>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let schemes = provider
                .signature_verification_algorithms
                .supported_schemes();
            let config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .ok()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate { schemes }))
                .with_no_client_auth();
            Some(Arc::new(config))
        })
        .clone()
        .map(TlsConnector::from)
}

/// Accepts whatever certificate the backend presents, as Google Cloud's HTTPS health checks
/// do: their probers do not validate certificates (a backend may use a self-signed one, or
/// one for another name), so checking here would mark healthy backends unhealthy. A health
/// probe carries no secret and its verdict only says whether the backend answered, so there
/// is nothing for certificate checking to protect. The handshake signature is not checked
/// either: that needs the certificate parsed, which webpki refuses for some certificates that
/// Google's probers take (X.509 v1, as `openssl x509 -req` makes without extensions).
#[derive(Debug)]
struct AnyCertificate {
    /// Signature schemes offered in the ClientHello (the crypto provider's).
    schemes: Vec<SignatureScheme>,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// The probe's stream as hyper sees it, with a no-op `shutdown`: the connection ends with the
/// single `close()` when the probe is dropped (hyper would call `shutdown(SHUT_WR)` first, one
/// more system call and FIN sent before the response is even read).
struct ProbeIo<S>(TokioIo<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> hyper::rt::Read for ProbeIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> hyper::rt::Write for ProbeIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
}

/// Linux errno values that mean the prober, not the backend, is short of something.
fn is_local_resource_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
}

fn classify_connect_error(e: io::Error) -> ProbeFailure {
    if is_local_resource_error(&e) {
        return ProbeFailure::Local(e.kind());
    }
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => ProbeFailure::Refused,
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH) => ProbeFailure::Unreachable,
        Some(libc::ECONNRESET) => ProbeFailure::Reset,
        _ => ProbeFailure::Connect(e.kind()),
    }
}

fn classify_io_error(e: &io::Error) -> ProbeFailure {
    if is_local_resource_error(e) {
        return ProbeFailure::Local(e.kind());
    }
    // tokio-rustls reports TLS errors (alerts, bytes that are not TLS) as I/O errors.
    if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return ProbeFailure::Tls;
    }
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => ProbeFailure::Reset,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe => ProbeFailure::Closed,
        kind => ProbeFailure::Io(kind),
    }
}

fn classify_hyper_error(e: &hyper::Error) -> ProbeFailure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return classify_io_error(io);
        }
        source = err.source();
    }
    // hyper exposes `is_parse_too_large` only with its server feature; its message is stable
    // and the huge-header test catches a change.
    if e.is_parse() && e.to_string().contains("too large") {
        ProbeFailure::HeadTooLarge
    } else if e.is_parse() || e.is_parse_status() {
        ProbeFailure::Malformed
    } else {
        // Incomplete message, closed channel, canceled: the backend went away early.
        ProbeFailure::Closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_listed_and_indexed() {
        let all = [
            ProbeFailure::Refused,
            ProbeFailure::Unreachable,
            ProbeFailure::Connect(io::ErrorKind::Other),
            ProbeFailure::Reset,
            ProbeFailure::Closed,
            ProbeFailure::Timeout(ProbePhase::Connect),
            ProbeFailure::Timeout(ProbePhase::Handshake),
            ProbeFailure::Timeout(ProbePhase::Head),
            ProbeFailure::Timeout(ProbePhase::Body),
            ProbeFailure::Timeout(ProbePhase::Reply),
            ProbeFailure::Malformed,
            ProbeFailure::HeadTooLarge,
            ProbeFailure::Status(503),
            ProbeFailure::Tls,
            ProbeFailure::Mismatch,
            ProbeFailure::Io(io::ErrorKind::Other),
            ProbeFailure::Local(io::ErrorKind::Other),
        ];
        for (i, f) in all.iter().enumerate() {
            assert_eq!(f.label_index(), i, "{f:?}");
            assert_eq!(ProbeFailure::LABELS[i], f.label());
        }
        assert!(!ProbeFailure::Local(io::ErrorKind::Other).is_backend_failure());
        assert!(ProbeFailure::Reset.is_backend_failure());
    }

    #[test]
    fn phases_survive_the_atomic() {
        for p in [
            ProbePhase::Connect,
            ProbePhase::Handshake,
            ProbePhase::Head,
            ProbePhase::Body,
            ProbePhase::Reply,
        ] {
            assert_eq!(ProbePhase::from_u8(p as u8), p);
        }
    }

    #[test]
    fn sni_is_a_dns_name_or_nothing() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let dns = |n: &str| ServerName::try_from(n.to_string()).unwrap();
        assert_eq!(server_name("health.example", ip), dns("health.example"));
        assert_eq!(
            server_name("health.example:8443", ip),
            dns("health.example")
        );
        let none = ServerName::IpAddress(ip.into());
        for host in [
            "203.0.113.9",
            "203.0.113.9:443",
            "[2001:db8::1]",
            "2001:db8::1",
            "a b",
            "",
        ] {
            assert_eq!(server_name(host, ip), none, "{host:?}");
        }
    }

    #[test]
    fn contains_finds_exact_bytes() {
        assert!(contains(b"abc", b""));
        assert!(contains(b"", b""));
        assert!(contains(b"xxokxx", b"ok"));
        assert!(contains(b"ok", b"ok"));
        assert!(!contains(b"o", b"ok"));
        assert!(!contains(b"OK", b"ok"));
    }

    #[test]
    fn tls_errors_inside_io_errors_are_tls_failures() {
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure),
        );
        assert_eq!(classify_io_error(&e), ProbeFailure::Tls);
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "tls handshake eof");
        assert_eq!(classify_io_error(&eof), ProbeFailure::Closed);
    }

    #[test]
    fn errno_classes() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert_eq!(
            classify_connect_error(e(libc::ECONNREFUSED)),
            ProbeFailure::Refused
        );
        assert_eq!(
            classify_connect_error(e(libc::EHOSTUNREACH)),
            ProbeFailure::Unreachable
        );
        assert!(matches!(
            classify_connect_error(e(libc::EMFILE)),
            ProbeFailure::Local(_)
        ));
        assert!(matches!(
            classify_connect_error(e(libc::EADDRNOTAVAIL)),
            ProbeFailure::Local(_)
        ));
    }
}
