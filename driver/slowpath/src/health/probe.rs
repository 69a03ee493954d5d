//! One HTTP/1.1 probe: connect, `GET`, read the response head and a capped body, close.
//!
//! Everything a backend can do wrong ends in a [`ProbeFailure`] within the deadline: the
//! whole exchange runs under one `tokio::time::timeout`, the response head is read into a
//! buffer of at most [`MAX_HEAD_BYTES`], and at most [`MAX_BODY_BYTES`] of body are read before
//! the connection is dropped.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Body as _;
use hyper::client::conn::http1;
use hyper::header::{HeaderValue, CONNECTION, HOST, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::config::ProbeKey;
use super::socket::{self, CloseMode, Ending, SocketPool};
use super::state::{WeightReport, WEIGHT_HEADER};

/// Largest response head (status line and headers) read; larger is a failure.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Body bytes read at most; the rest is not read (the connection is dropped), and the probe
/// is judged on the status.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// `User-Agent` of the probes (backends can tell health checks from clients).
pub const PROBE_USER_AGENT: &str = "nlb-offload-health-check/1.0";

/// How far a probe got before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ProbePhase {
    /// TCP connect.
    Connect = 0,
    /// Sending the request and waiting for the complete response head.
    Head,
    /// Reading the body.
    Body,
}

impl ProbePhase {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => ProbePhase::Connect,
            1 => ProbePhase::Head,
            _ => ProbePhase::Body,
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
            ProbeFailure::Timeout(ProbePhase::Head) => "timeout_head",
            ProbeFailure::Timeout(ProbePhase::Body) => "timeout_body",
            ProbeFailure::Malformed => "malformed",
            ProbeFailure::HeadTooLarge => "head_too_large",
            ProbeFailure::Status(_) => "status",
            ProbeFailure::Io(_) => "io_error",
            ProbeFailure::Local(_) => "local_error",
        }
    }

    /// Every label [`label`](Self::label) can return, for metrics that list all of them.
    pub const LABELS: [&'static str; 13] = [
        "refused",
        "unreachable",
        "connect_error",
        "reset",
        "closed",
        "timeout_connect",
        "timeout_head",
        "timeout_body",
        "malformed",
        "head_too_large",
        "status",
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
            ProbeFailure::Timeout(ProbePhase::Head) => {
                f.write_str("timed out waiting for the response head")
            }
            ProbeFailure::Timeout(ProbePhase::Body) => f.write_str("timed out reading the body"),
            ProbeFailure::Malformed => f.write_str("response is not valid HTTP/1.x"),
            ProbeFailure::HeadTooLarge => write!(f, "response head over {MAX_HEAD_BYTES} bytes"),
            ProbeFailure::Status(code) => write!(f, "HTTP status {code}, 200 needed"),
            ProbeFailure::Io(k) => write!(f, "I/O error: {k}"),
            ProbeFailure::Local(k) => write!(f, "prober out of resources: {k}"),
        }
    }
}

/// A passing probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbePass {
    /// The weight header as parsed (whether or not the pool is weighted).
    pub weight: WeightReport,
    /// Body bytes read.
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
    uri: Uri,
    host: HeaderValue,
    close_with_reset: bool,
}

impl ProbeRequest {
    /// Prepares the request of `key`; `None` when the path or host cannot be sent (validation
    /// refuses those before they get here).
    pub fn new(key: &ProbeKey) -> Option<Self> {
        Some(ProbeRequest {
            addr: key.addr,
            uri: Uri::try_from(key.path.as_str()).ok()?,
            host: HeaderValue::from_str(&key.host).ok()?,
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

    /// [`run`](Self::run), taking its socket from `pool`; after a complete response the
    /// connection is handed back to be ended (and its socket pooled) once the outcome is used.
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
        let stream = socket::connect(self.addr, self.close_mode(), pool)
            .await
            .map_err(classify_connect_error)?;
        phase.store(ProbePhase::Head as u8, Ordering::Relaxed);

        let (mut sender, connection) = http1::Builder::new()
            .max_buf_size(MAX_HEAD_BYTES)
            .handshake::<_, Empty<Bytes>>(ProbeIo(TokioIo::new(stream)))
            .await
            .map_err(|e| classify_hyper_error(&e))?;
        let mut request = Request::new(Empty::<Bytes>::new());
        *request.method_mut() = Method::GET;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, self.host.clone());
        headers.insert(USER_AGENT, HeaderValue::from_static(PROBE_USER_AGENT));
        headers.insert(CONNECTION, HeaderValue::from_static("close"));

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
            while body_bytes < MAX_BODY_BYTES {
                match body.frame().await {
                    None => break,
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            body_bytes += data.len();
                        }
                    }
                    Some(Err(e)) => return Err(classify_hyper_error(&e)),
                }
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
                    if matches!(result, Ok(_) | Err(ProbeFailure::Status(_))) {
                        let stream = connection.into_parts().io.0.into_inner();
                        *ending = Some(Ending::new(stream, self.close_mode(), self.addr));
                    }
                    return result;
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

/// The probe's socket as hyper sees it, with a no-op `shutdown`: the connection ends with the
/// single `close()` when the probe is dropped (hyper would call `shutdown(SHUT_WR)` first, one
/// more system call and FIN sent before the response is even read).
struct ProbeIo(TokioIo<TcpStream>);

impl hyper::rt::Read for ProbeIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ProbeIo {
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
            ProbeFailure::Timeout(ProbePhase::Head),
            ProbeFailure::Timeout(ProbePhase::Body),
            ProbeFailure::Malformed,
            ProbeFailure::HeadTooLarge,
            ProbeFailure::Status(503),
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
