//! A blocking etcd v3 client over etcd's JSON gateway (HTTP/1.1 + JSON at `/v3/...`, as etcd
//! 3.4 and later serve it on their client URLs), with TLS (client certificates too) and etcd's
//! own user/password authentication.
//!
//! What the fleet needs and no more: range reads, puts (with a lease), deletes, a
//! compare-and-swap transaction, leases (grant, keep-alive, revoke, time to live) and watches.
//! Requests go to the member that answered last, then to the others in turn; a round in which
//! a member said the cluster is electing a leader is tried again for up to
//! [`ELECTION_WAIT`]. A watch runs on a thread of its own, hands its messages to a callback,
//! and resumes from the next revision (on any member) when its stream breaks.
//!
//! It is blocking on purpose: `nlbctl` links no async runtime, and `nlbd` calls it from
//! `tokio::task::spawn_blocking` (the watch's thread feeds a channel).

mod http;
mod options;
mod wire;

pub use http::Endpoint;
pub use options::{parse_endpoints, EtcdArgs, PASSWORD_ENV};

use serde::de::DeserializeOwned;
use serde_json::json;
use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use wire::b64;

/// How long one request to etcd may take at each step (connect, TLS handshake, each read and
/// write): long enough for a loaded machine, short enough that a command facing a dead
/// cluster fails promptly.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a request keeps being retried while the members that answer are electing a
/// leader ("leader changed", "no leader"): losing the leader of a healthy cluster is not an
/// outage, and etcd elects a new one within a few election timeouts (1 s by default).
pub const ELECTION_WAIT: Duration = Duration::from_secs(6);

/// How long a broken watch keeps trying the members to resume before it gives up.
pub const RESUME_WAIT: Duration = Duration::from_secs(6);

/// Pause between two rounds over the members.
const ROUND_PAUSE: Duration = Duration::from_millis(200);

/// Idle connections kept per member for the next requests.
const IDLE_PER_MEMBER: usize = 4;

/// gRPC status codes etcd answers with (through the gateway's `code`).
mod code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const ALREADY_EXISTS: i32 = 6;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const OUT_OF_RANGE: i32 = 11;
    pub const UNIMPLEMENTED: i32 = 12;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}

/// What went wrong with one member.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer: the connection, TLS, a timeout, or an answer that is not HTTP.
    #[error("{0}")]
    Transport(#[source] io::Error),
    /// etcd refused the request (a gRPC status: its code and etcd's message).
    #[error("{message}")]
    Status {
        /// The gRPC status code.
        code: i32,
        /// etcd's message (`etcdserver: ...`).
        message: String,
    },
    /// An answer that is not what etcd's gateway sends.
    #[error("unexpected answer to {what}: {error}")]
    Answer {
        /// The request.
        what: &'static str,
        /// What was wrong with it.
        error: String,
    },
}

impl Error {
    /// Whether the member is up but the cluster has no leader at the moment (etcd's
    /// `ErrLeaderChanged` and `ErrNoLeader`, both Unavailable), so the same request succeeds
    /// once one is elected.
    pub fn is_election(&self) -> bool {
        matches!(self, Error::Status { code: code::UNAVAILABLE, message }
            if message.contains("leader changed") || message.contains("no leader"))
    }

    /// Whether every member would answer the same (a refusal, not an outage): the request is
    /// not sent to the others.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Error::Status {
                code: code::INVALID_ARGUMENT
                    | code::NOT_FOUND
                    | code::ALREADY_EXISTS
                    | code::PERMISSION_DENIED
                    | code::FAILED_PRECONDITION
                    | code::OUT_OF_RANGE
                    | code::UNIMPLEMENTED
                    | code::UNAUTHENTICATED,
                ..
            }
        )
    }

    /// Whether the token sent is no longer valid (expired, or older than the last change of
    /// etcd's users): authenticating again fixes it.
    fn is_stale_token(&self) -> bool {
        matches!(self, Error::Status { code: code::UNAUTHENTICATED, message } if message.contains("invalid auth token"))
            || matches!(self, Error::Status { code: code::INVALID_ARGUMENT, message } if message.contains("revision of auth store is old"))
    }
}

/// A request that no member answered: each member's error, in the order tried.
#[derive(Debug)]
pub struct Failure {
    /// (member's URL, its error).
    pub errors: Vec<(String, Error)>,
}

impl Failure {
    /// Whether a member refused the request (an answer, not an outage).
    pub fn refused(&self) -> bool {
        self.errors.iter().any(|(_, e)| e.is_final())
    }

    /// Whether the members that answered were electing a leader.
    pub fn election(&self) -> bool {
        self.errors.iter().any(|(_, e)| e.is_election())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.errors[..] {
            [] => write!(f, "no endpoint to try"),
            [(_, e)] => write!(f, "{e}"),
            many => {
                for (k, (ep, e)) in many.iter().enumerate() {
                    if k > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{ep}: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Failure {}

/// etcd's user and password (`--etcd-user`).
#[derive(Clone)]
pub struct Credentials {
    /// The user.
    pub user: String,
    password: String,
}

impl Credentials {
    /// A user and its password.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"(hidden)")
            .finish()
    }
}

/// Where etcd is and how to reach it.
#[derive(Clone)]
pub struct Settings {
    /// The members' client URLs.
    pub endpoints: Vec<Endpoint>,
    /// TLS (for `https://` endpoints).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// etcd's authentication.
    pub credentials: Option<Credentials>,
    /// Per step of a request ([`REQUEST_TIMEOUT`]).
    pub timeout: Duration,
}

impl Settings {
    /// Plain HTTP endpoints, no authentication.
    pub fn plain(endpoints: Vec<Endpoint>) -> Settings {
        Settings {
            endpoints,
            tls: None,
            credentials: None,
            timeout: REQUEST_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("endpoints", &self.endpoints)
            .field("tls", &self.tls.is_some())
            .field("credentials", &self.credentials)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// One key and its value, as etcd holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The revision that created the key.
    pub create_revision: i64,
    /// The revision of its last change.
    pub mod_revision: i64,
    /// Changes since it was created (1: created only).
    pub version: i64,
    /// Its lease (0: none).
    pub lease: i64,
}

impl From<wire::KeyValue> for KeyValue {
    fn from(kv: wire::KeyValue) -> KeyValue {
        KeyValue {
            key: kv.key,
            value: kv.value,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            lease: kv.lease,
        }
    }
}

/// A range read: the keys found, at the store's revision of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// The store's revision when it was read.
    pub revision: i64,
    /// The keys, in key order.
    pub kvs: Vec<KeyValue>,
}

/// What a compare-and-swap did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swap {
    /// Stored, as this revision.
    Done(i64),
    /// The key had changed: what it holds now (None: absent).
    Changed(Option<KeyValue>),
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// A put (true) or a delete.
    pub put: bool,
    /// The key and, for a put, its new value (a delete's value is empty; its
    /// `mod_revision` is the delete's revision).
    pub kv: KeyValue,
}

/// What a watch hands its callback.
#[derive(Debug)]
pub enum WatchMessage {
    /// Changes, in revision order; `revision` is the store's revision with them.
    Events {
        /// The store's revision.
        revision: i64,
        /// The changes.
        events: Vec<Event>,
    },
    /// etcd compacted the history the watch needed (its start revision, or where it was to
    /// resume, is below `compact_revision`): read the keys afresh. The watch has ended.
    Compacted {
        /// The oldest revision etcd still holds.
        compact_revision: i64,
    },
    /// The stream broke and no member let the watch resume within [`RESUME_WAIT`]. The
    /// watch has ended.
    Lost(Failure),
}

/// A running watch; dropping it ends the watch (its thread stops at once).
#[derive(Debug)]
pub struct Watch {
    shared: Arc<WatchShared>,
}

#[derive(Debug)]
struct WatchShared {
    stop: AtomicBool,
    /// The current stream's socket, shut down to wake the thread.
    socket: Mutex<Option<TcpStream>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(s) = lock(&self.shared.socket).take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The end of the range of every key starting with `prefix` (etcd's `range_end`): the
/// prefix with its last byte below 0xff incremented and what follows it dropped; `\0` (every
/// key) when there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// How a request is retried over the members.
#[derive(Debug, Clone, Copy)]
enum Retry {
    /// Rounds again only while a member says a leader is being elected ([`ELECTION_WAIT`]).
    Election,
    /// Rounds again after any failure but a refusal, for this long.
    Any(Duration),
}

/// An etcd client (cheap to clone: clones share connections, the token and which member
/// answered last).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Vec<Endpoint>,
    joined: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    credentials: Option<Credentials>,
    timeout: Duration,
    /// The authentication token (`Some("")`: etcd has authentication off).
    token: Mutex<Option<String>>,
    /// The member that answered last.
    current: AtomicUsize,
    /// Idle connections by member.
    idle: Vec<Mutex<Vec<http::Conn>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.inner.joined)
            .field("tls", &self.inner.tls.is_some())
            .field("credentials", &self.inner.credentials)
            .finish()
    }
}

fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Answer {
        what,
        error: format!(
            "{e}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        ),
    })
}

/// The first message of a streamed answer (`{"result": ...}` or `{"error": ...}`).
fn first_message<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, Error> {
    let line = bytes
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .ok_or(Error::Answer {
            what,
            error: "an empty stream".into(),
        })?;
    let m: wire::StreamMessage<T> = decode(what, line)?;
    match (m.result, m.error) {
        (_, Some(e)) => Err(Error::Status {
            code: e.grpc_code,
            message: e.message,
        }),
        (Some(r), None) => Ok(r),
        (None, None) => Err(Error::Answer {
            what,
            error: "neither a result nor an error".into(),
        }),
    }
}

/// The error of an answer whose HTTP status is not 200: the gateway's `{"error", "code",
/// "message"}`, or the status line's code and the start of the body.
fn status_error(status: u16, body: &[u8]) -> Error {
    match serde_json::from_slice::<wire::GatewayError>(body) {
        Ok(e) if e.code != 0 || !e.message.is_empty() || !e.error.is_empty() => {
            let mut message = if e.message.is_empty() {
                e.error
            } else {
                e.message
            };
            if message.contains("user name is empty") {
                message.push_str(" (etcd has authentication enabled: give --etcd-user)");
            }
            Error::Status {
                code: if e.code == 0 { code::UNKNOWN } else { e.code },
                message,
            }
        }
        _ => Error::Status {
            code: code::UNKNOWN,
            message: format!(
                "HTTP status {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
            ),
        },
    }
}

/// A watch cancelled at its creation: etcd's reason (`rpc error: code = X desc = message`).
fn cancel_error(reason: &str) -> Error {
    let (name, message) = reason
        .strip_prefix("rpc error: code = ")
        .and_then(|r| r.split_once(" desc = "))
        .unwrap_or(("Unknown", reason));
    let code = match name {
        "Unauthenticated" => code::UNAUTHENTICATED,
        "PermissionDenied" => code::PERMISSION_DENIED,
        "InvalidArgument" => code::INVALID_ARGUMENT,
        "Unavailable" => code::UNAVAILABLE,
        "Canceled" => code::CANCELLED,
        "DeadlineExceeded" => code::DEADLINE_EXCEEDED,
        _ => code::UNKNOWN,
    };
    Error::Status {
        code,
        message: if message.is_empty() {
            "the watch was cancelled".into()
        } else {
            message.to_string()
        },
    }
}

/// Whether an exchange on a reused connection failed before the server could have acted on
/// it (it had closed the idle connection): sent again on a fresh one.
fn stale_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

impl Client {
    /// A client of the members in `settings` (nothing is connected until the first request).
    pub fn new(settings: Settings) -> Client {
        let joined = settings
            .endpoints
            .iter()
            .map(Endpoint::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let idle = settings
            .endpoints
            .iter()
            .map(|_| Mutex::default())
            .collect();
        Client {
            inner: Arc::new(Inner {
                endpoints: settings.endpoints,
                joined,
                tls: settings.tls,
                credentials: settings.credentials,
                timeout: settings.timeout,
                token: Mutex::new(None),
                current: AtomicUsize::new(0),
                idle,
            }),
        }
    }

    /// The members' URLs, comma-separated.
    pub fn endpoints(&self) -> &str {
        &self.inner.joined
    }

    /// Runs `f` on the member that answered last, then on each other one until one answers
    /// (a refusal is returned at once: the others would refuse too); rounds again as `retry`
    /// says, until `stop` says to give up.
    fn failover<T>(
        &self,
        retry: Retry,
        stop: &dyn Fn() -> bool,
        mut f: impl FnMut(usize) -> Result<T, Error>,
    ) -> Result<T, Failure> {
        let n = self.inner.endpoints.len();
        let started = Instant::now();
        let (wait, any) = match retry {
            Retry::Election => (ELECTION_WAIT, false),
            Retry::Any(d) => (d, true),
        };
        loop {
            let first = self.inner.current.load(Ordering::Relaxed) % n.max(1);
            let mut errors = Vec::new();
            let mut again = false;
            for k in 0..n {
                let i = (first + k) % n;
                match f(i) {
                    Ok(v) => {
                        self.inner.current.store(i, Ordering::Relaxed);
                        return Ok(v);
                    }
                    Err(e) => {
                        let refused = e.is_final();
                        again |= e.is_election() || (any && !refused);
                        errors.push((self.inner.endpoints[i].to_string(), e));
                        if refused {
                            return Err(Failure { errors });
                        }
                    }
                }
            }
            if !again || started.elapsed() >= wait || stop() {
                return Err(Failure { errors });
            }
            std::thread::sleep(ROUND_PAUSE);
        }
    }

    fn connect(&self, i: usize) -> Result<http::Conn, Error> {
        http::connect(
            &self.inner.endpoints[i],
            self.inner.tls.as_ref(),
            self.inner.timeout,
        )
        .map_err(Error::Transport)
    }

    /// One request and its whole answer on member `i` (an idle connection reused when there
    /// is one); the body of a 200 answer, else the error it carries.
    fn exchange(
        &self,
        i: usize,
        path: &str,
        body: &[u8],
        token: Option<&str>,
    ) -> Result<Vec<u8>, Error> {
        let authority = self.inner.endpoints[i].authority();
        let roundtrip = |conn: &mut http::Conn| -> io::Result<(http::Head, Vec<u8>)> {
            conn.send(&authority, path, token, body)?;
            let head = conn.read_head()?;
            let bytes = conn.read_body(&head)?;
            Ok((head, bytes))
        };
        let pooled = lock(&self.inner.idle[i]).pop();
        let (conn, answer) = match pooled {
            Some(mut conn) => match roundtrip(&mut conn) {
                Err(e) if stale_connection(&e) => {
                    let mut fresh = self.connect(i)?;
                    let answer = roundtrip(&mut fresh);
                    (fresh, answer)
                }
                answer => (conn, answer),
            },
            None => {
                let mut conn = self.connect(i)?;
                let answer = roundtrip(&mut conn);
                (conn, answer)
            }
        };
        let (head, bytes) = answer.map_err(Error::Transport)?;
        if !head.close {
            let mut idle = lock(&self.inner.idle[i]);
            if idle.len() < IDLE_PER_MEMBER {
                idle.push(conn);
            }
        }
        if head.status == 200 {
            Ok(bytes)
        } else {
            Err(status_error(head.status, &bytes))
        }
    }

    /// The token to send (None: no authentication), authenticating on member `i` first when
    /// there is none.
    fn token(&self, i: usize) -> Result<Option<String>, Error> {
        let Some(c) = &self.inner.credentials else {
            return Ok(None);
        };
        if let Some(t) = lock(&self.inner.token).clone() {
            return Ok(Some(t));
        }
        let body = json!({ "name": c.user, "password": c.password }).to_string();
        let token = match self.exchange(i, "/v3/auth/authenticate", body.as_bytes(), None) {
            Ok(bytes) => {
                let r: wire::AuthenticateResponse = decode("authenticate", &bytes)?;
                if r.token.is_empty() {
                    return Err(Error::Answer {
                        what: "authenticate",
                        error: "no token".into(),
                    });
                }
                r.token
            }
            // etcd without authentication: requests go without a token (as etcd's own
            // client does).
            Err(Error::Status {
                code: code::FAILED_PRECONDITION,
                message,
            }) if message.contains("authentication is not enabled") => String::new(),
            Err(Error::Status { code, message }) => {
                return Err(Error::Status {
                    code,
                    message: format!("user `{}`: {message}", c.user),
                })
            }
            Err(e) => return Err(e),
        };
        *lock(&self.inner.token) = Some(token.clone());
        Ok(Some(token))
    }

    /// Forgets `used` (expired): the next request authenticates again.
    fn forget_token(&self, used: &str) {
        let mut t = lock(&self.inner.token);
        if t.as_deref() == Some(used) {
            *t = None;
        }
    }

    /// A request on member `i` with the token, authenticating again once when it expired.
    fn call_at(&self, i: usize, path: &str, body: &[u8]) -> Result<Vec<u8>, Error> {
        let mut retried = false;
        loop {
            let token = self.token(i)?;
            let send = token.as_deref().filter(|t| !t.is_empty());
            match self.exchange(i, path, body, send) {
                Err(e) if !retried && send.is_some() && e.is_stale_token() => {
                    if let Some(t) = &token {
                        self.forget_token(t);
                    }
                    retried = true;
                }
                answer => return answer,
            }
        }
    }

    /// A unary request with failover, its answer decoded by `read`.
    fn call<T>(
        &self,
        what: &'static str,
        path: &str,
        body: serde_json::Value,
        read: impl Fn(&'static str, &[u8]) -> Result<T, Error>,
    ) -> Result<T, Failure> {
        let body = body.to_string();
        self.failover(Retry::Election, &|| false, |i| {
            let bytes = self.call_at(i, path, body.as_bytes())?;
            read(what, &bytes)
        })
    }

    /// The keys from `key` to `range_end` (empty: `key` alone; see [`prefix_end`]).
    pub fn range(&self, key: &[u8], range_end: &[u8]) -> Result<Range, Failure> {
        let mut body = json!({ "key": b64(key) });
        if !range_end.is_empty() {
            body["range_end"] = b64(range_end).into();
        }
        let r: wire::RangeResponse = self.call("range", "/v3/kv/range", body, decode)?;
        Ok(Range {
            revision: r.header.revision,
            kvs: r.kvs.into_iter().map(KeyValue::from).collect(),
        })
    }

    /// Puts `value` at `key` (attached to `lease` unless 0); the store's revision after it.
    pub fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<i64, Failure> {
        let mut body = json!({ "key": b64(key), "value": b64(value) });
        if lease != 0 {
            body["lease"] = lease.to_string().into();
        }
        let r: wire::PutResponse = self.call("put", "/v3/kv/put", body, decode)?;
        Ok(r.header.revision)
    }

    /// Deletes `key`; how many keys were deleted (0 or 1).
    pub fn delete(&self, key: &[u8]) -> Result<i64, Failure> {
        let body = json!({ "key": b64(key) });
        let r: wire::DeleteRangeResponse =
            self.call("delete", "/v3/kv/deleterange", body, decode)?;
        Ok(r.deleted)
    }

    /// Puts `value` at `key` if the key's `mod_revision` is still `expected` (0: the key is
    /// absent), in one transaction; else reads what it holds.
    pub fn put_if_mod_revision(
        &self,
        key: &[u8],
        value: &[u8],
        expected: i64,
    ) -> Result<Swap, Failure> {
        let k = b64(key);
        let body = json!({
            "compare": [{
                "target": "MOD",
                "result": "EQUAL",
                "key": k,
                "mod_revision": expected.to_string(),
            }],
            "success": [{ "request_put": { "key": k, "value": b64(value) } }],
            "failure": [{ "request_range": { "key": k } }],
        });
        let r: wire::TxnResponse = self.call("txn", "/v3/kv/txn", body, decode)?;
        if r.succeeded {
            return Ok(Swap::Done(r.header.revision));
        }
        let live = r
            .responses
            .into_iter()
            .find_map(|op| op.response_range)
            .and_then(|range| range.kvs.into_iter().next())
            .map(KeyValue::from);
        Ok(Swap::Changed(live))
    }

    /// A lease of `ttl` seconds; its id.
    pub fn lease_grant(&self, ttl: i64) -> Result<i64, Failure> {
        let body = json!({ "TTL": ttl.to_string() });
        let r: wire::LeaseGrantResponse =
            self.call("lease grant", "/v3/lease/grant", body, |what, bytes| {
                let r: wire::LeaseGrantResponse = decode(what, bytes)?;
                if !r.error.is_empty() || r.id == 0 {
                    return Err(Error::Status {
                        code: code::UNKNOWN,
                        message: format!("no lease granted: {}", r.error),
                    });
                }
                Ok(r)
            })?;
        Ok(r.id)
    }

    /// Renews lease `id`; its TTL in seconds (0 or less: it expired or never existed).
    pub fn lease_keep_alive(&self, id: i64) -> Result<i64, Failure> {
        let body = json!({ "ID": id.to_string() });
        let r: wire::LeaseKeepAliveResponse = self.call(
            "lease keep-alive",
            "/v3/lease/keepalive",
            body,
            first_message,
        )?;
        Ok(r.ttl)
    }

    /// Revokes lease `id` (its keys are deleted).
    pub fn lease_revoke(&self, id: i64) -> Result<(), Failure> {
        let body = json!({ "ID": id.to_string() });
        self.call("lease revoke", "/v3/lease/revoke", body, |_, _| Ok(()))
    }

    /// Seconds left on lease `id` and its granted TTL; None when etcd no longer knows it.
    pub fn lease_time_to_live(&self, id: i64) -> Result<Option<(i64, i64)>, Failure> {
        let body = json!({ "ID": id.to_string() });
        let r: wire::LeaseTimeToLiveResponse =
            self.call("lease time to live", "/v3/lease/timetolive", body, decode)?;
        // etcd answers TTL -1 for a lease that expired or never existed.
        Ok((r.ttl >= 0).then_some((r.ttl, r.granted_ttl)))
    }

    /// Opens a watch stream on member `i`: the connection, its body, and the store's
    /// revision when the watch was created.
    fn open_watch(
        &self,
        i: usize,
        key: &[u8],
        range_end: &[u8],
        start_revision: i64,
    ) -> Result<(http::Conn, http::Body, i64), Error> {
        let mut create = json!({ "key": b64(key) });
        if !range_end.is_empty() {
            create["range_end"] = b64(range_end).into();
        }
        if start_revision > 0 {
            create["start_revision"] = start_revision.to_string().into();
        }
        let body = json!({ "create_request": create }).to_string();
        let authority = self.inner.endpoints[i].authority();
        let mut retried = false;
        loop {
            let token = self.token(i)?;
            let send = token.as_deref().filter(|t| !t.is_empty());
            let mut conn = self.connect(i)?;
            let opened = (|| {
                conn.send(&authority, "/v3/watch", send, body.as_bytes())
                    .map_err(Error::Transport)?;
                let head = conn.read_head().map_err(Error::Transport)?;
                if head.status != 200 {
                    let bytes = conn.read_body(&head).map_err(Error::Transport)?;
                    return Err(status_error(head.status, &bytes));
                }
                let mut stream = http::Body::new(&head);
                let first = conn
                    .read_message(&mut stream)
                    .map_err(Error::Transport)?
                    .ok_or(Error::Answer {
                        what: "watch",
                        error: "the stream ended before the watch was created".into(),
                    })?;
                let created: wire::WatchResponse = first_message("watch", &first)?;
                if created.canceled {
                    return Err(cancel_error(&created.cancel_reason));
                }
                if !created.created {
                    return Err(Error::Answer {
                        what: "watch",
                        error: "an answer before the watch was created".into(),
                    });
                }
                Ok((stream, created.header.revision))
            })();
            match opened {
                Ok((stream, revision)) => {
                    conn.set_timeout(None).map_err(Error::Transport)?;
                    return Ok((conn, stream, revision));
                }
                Err(e) if !retried && send.is_some() && e.is_stale_token() => {
                    if let Some(t) = &token {
                        self.forget_token(t);
                    }
                    retried = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Watches the keys from `key` to `range_end` (empty: `key` alone) from `start_revision`
    /// (0: from now), handing `sink` what it sees until `sink` returns false, the watch ends
    /// ([`WatchMessage::Compacted`], [`WatchMessage::Lost`]) or the [`Watch`] is dropped.
    ///
    /// Returns once the watch is created (on the member that answered last, or the next one
    /// that does). When its stream breaks, the watch resumes on any member from the
    /// revision after the last event it handed over, so no event is lost or repeated.
    ///
    /// A member that stops answering without closing the connection leaves the stream
    /// waiting: its owner notices through its other requests (a lease's keep-alive) and drops
    /// the watch.
    pub fn watch(
        &self,
        key: &[u8],
        range_end: &[u8],
        start_revision: i64,
        sink: impl FnMut(WatchMessage) -> bool + Send + 'static,
    ) -> Result<Watch, Failure> {
        let (conn, stream, created_at) = self.failover(Retry::Election, &|| false, |i| {
            self.open_watch(i, key, range_end, start_revision)
        })?;
        let next = if start_revision > 0 {
            start_revision
        } else {
            created_at + 1
        };
        let shared = Arc::new(WatchShared {
            stop: AtomicBool::new(false),
            socket: Mutex::new(conn.socket().ok()),
        });
        let running = Running {
            client: self.clone(),
            shared: shared.clone(),
            key: key.to_vec(),
            range_end: range_end.to_vec(),
            next,
        };
        std::thread::Builder::new()
            .name("etcd-watch".into())
            .spawn(move || running.run(conn, stream, sink))
            .map_err(|e| Failure {
                errors: vec![(self.endpoints().to_string(), Error::Transport(e))],
            })?;
        Ok(Watch { shared })
    }
}

/// A watch's thread.
struct Running {
    client: Client,
    shared: Arc<WatchShared>,
    key: Vec<u8>,
    range_end: Vec<u8>,
    /// The revision to resume from: after the last event handed over.
    next: i64,
}

impl Running {
    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    fn run(
        mut self,
        mut conn: http::Conn,
        mut stream: http::Body,
        mut sink: impl FnMut(WatchMessage) -> bool,
    ) {
        loop {
            let broke = loop {
                if self.stopped() {
                    return;
                }
                let line = match conn.read_message(&mut stream) {
                    Ok(Some(line)) => line,
                    Ok(None) => {
                        break Error::Answer {
                            what: "watch",
                            error: "the stream ended".into(),
                        }
                    }
                    Err(e) => break Error::Transport(e),
                };
                let r: wire::WatchResponse = match first_message("watch", &line) {
                    Ok(r) => r,
                    Err(e) => break e,
                };
                if r.canceled {
                    if r.compact_revision > 0 {
                        sink(WatchMessage::Compacted {
                            compact_revision: r.compact_revision,
                        });
                        return;
                    }
                    break cancel_error(&r.cancel_reason);
                }
                if let Some(last) = r.events.last() {
                    self.next = self.next.max(last.kv.mod_revision + 1);
                    let events = r
                        .events
                        .into_iter()
                        .map(|e| Event {
                            put: e.kind == wire::EventType::Put,
                            kv: e.kv.into(),
                        })
                        .collect();
                    let go_on = sink(WatchMessage::Events {
                        revision: r.header.revision,
                        events,
                    });
                    if !go_on {
                        return;
                    }
                } else if !r.created && r.header.revision > 0 {
                    // A progress report: nothing in the range up to that revision.
                    self.next = self.next.max(r.header.revision + 1);
                }
            };
            if self.stopped() {
                return;
            }
            let _ = broke;
            let resumed = self
                .client
                .failover(Retry::Any(RESUME_WAIT), &|| self.stopped(), |i| {
                    self.client
                        .open_watch(i, &self.key, &self.range_end, self.next)
                });
            match resumed {
                Ok((c, s, _)) => {
                    let mut socket = lock(&self.shared.socket);
                    *socket = c.socket().ok();
                    if self.stopped() {
                        c.shutdown();
                        return;
                    }
                    drop(socket);
                    conn = c;
                    stream = s;
                }
                Err(failure) => {
                    if !self.stopped() {
                        sink(WatchMessage::Lost(failure));
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_election_in_progress_is_waited_for() {
        // The two messages etcd's server returns while it has no leader (etcdserver's
        // ErrLeaderChanged and ErrNoLeader, both gRPC Unavailable, 14).
        for m in ["etcdserver: leader changed", "etcdserver: no leader"] {
            let e = status_error(
                503,
                format!(r#"{{"error":"{m}","message":"{m}","code":14}}"#).as_bytes(),
            );
            assert!(e.is_election(), "{m}");
            assert!(!e.is_final());
        }
        // A member that is down, a timeout, or a refusal is not an election.
        let others = [
            Error::Transport(io::Error::new(io::ErrorKind::ConnectionRefused, "refused")),
            Error::Status {
                code: code::DEADLINE_EXCEEDED,
                message: "etcdserver: request timed out".into(),
            },
            Error::Status {
                code: code::FAILED_PRECONDITION,
                message: "etcdserver: leader changed".into(),
            },
            status_error(502, b"<html>bad gateway</html>"),
        ];
        for e in &others {
            assert!(!e.is_election(), "{e}");
        }
    }

    #[test]
    fn refusals_are_final_and_expired_tokens_are_renewed() {
        // As etcd 3.4's gateway answers them.
        let denied = status_error(
            403,
            br#"{"error":"etcdserver: permission denied","message":"etcdserver: permission denied","code":7}"#,
        );
        assert!(denied.is_final() && !denied.is_stale_token());
        let expired = status_error(
            401,
            br#"{"error":"etcdserver: invalid auth token","message":"etcdserver: invalid auth token","code":16}"#,
        );
        assert!(expired.is_stale_token());
        let no_user = status_error(
            400,
            br#"{"error":"etcdserver: user name is empty","message":"etcdserver: user name is empty","code":3}"#,
        );
        assert!(no_user.is_final());
        assert!(no_user.to_string().contains("--etcd-user"), "{no_user}");
        // A watch refused at creation, as the gateway reports it.
        let e =
            cancel_error("rpc error: code = Unauthenticated desc = etcdserver: invalid auth token");
        assert!(e.is_stale_token(), "{e:?}");
        let e =
            cancel_error("rpc error: code = PermissionDenied desc = etcdserver: permission denied");
        assert!(e.is_final() && e.to_string() == "etcdserver: permission denied");
    }

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"/nlb/"), b"/nlb0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn failures_name_each_member_when_there_are_several() {
        let one = Failure {
            errors: vec![(
                "http://a:1".into(),
                Error::Transport(io::Error::new(io::ErrorKind::ConnectionRefused, "refused")),
            )],
        };
        assert_eq!(one.to_string(), "refused");
        let two = Failure {
            errors: vec![
                ("http://a:1".into(), Error::Transport(io::Error::other("x"))),
                ("http://b:2".into(), Error::Transport(io::Error::other("y"))),
            ],
        };
        assert_eq!(two.to_string(), "http://a:1: x; http://b:2: y");
        assert!(!two.refused());
    }
}
