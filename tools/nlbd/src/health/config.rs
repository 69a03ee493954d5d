//! What the health checker is asked to probe: targets, their HTTP check, and validation.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hyper::header::HeaderValue;
use hyper::Uri;

/// Identifies one target: a backend as a member of one pool.
///
/// The same backend in two pools is two targets (each pool may use another check or threshold),
/// but when both probe it the same way (the same [`ProbeKey`]: IP, port, protocol, what is
/// sent and what is expected) they share one probe.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetKey {
    /// Target pool name.
    pub pool: String,
    /// Backend (instance) name.
    pub backend: String,
}

impl TargetKey {
    /// A key from pool and backend names.
    pub fn new(pool: impl Into<String>, backend: impl Into<String>) -> Self {
        TargetKey {
            pool: pool.into(),
            backend: backend.into(),
        }
    }
}

impl fmt::Display for TargetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.pool, self.backend)
    }
}

/// How a probe talks to the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum CheckProtocol {
    /// `GET requestPath` over plain TCP (legacy `httpHealthChecks`, `type: HTTP`).
    #[default]
    Http,
    /// The same GET over TLS (`type: HTTPS`); the certificate is not checked.
    Https,
    /// A TCP connection, optionally a `request` sent and a `response` expected (`type: TCP`).
    Tcp,
}

impl CheckProtocol {
    /// `HTTP`, `HTTPS` or `TCP`, as the public API's `type` names it.
    pub fn name(self) -> &'static str {
        match self {
            CheckProtocol::Http => "HTTP",
            CheckProtocol::Https => "HTTPS",
            CheckProtocol::Tcp => "TCP",
        }
    }

    /// The URL scheme shown for a probe (`http`, `https`, `tcp`).
    pub fn scheme(self) -> &'static str {
        match self {
            CheckProtocol::Http => "http",
            CheckProtocol::Https => "https",
            CheckProtocol::Tcp => "tcp",
        }
    }

    /// Whether the probe is an HTTP request (plain or over TLS).
    pub fn is_http(self) -> bool {
        self != CheckProtocol::Tcp
    }
}

/// Longest `request` and `response` (SPEC R1; the public API's limit, and the response of an
/// HTTP or HTTPS check is looked for in the first this many bytes of the body).
pub const MAX_PROBE_DATA: usize = 1024;

/// A health check as the checker runs it (SPEC R1, R5.1): the legacy HTTP check of target
/// pools, or the HTTP, HTTPS or TCP check of backend services, with the public API's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// `HTTP` (the default and the only kind of legacy checks), `HTTPS` or `TCP`.
    pub protocol: CheckProtocol,
    /// TCP port probed (`port`, default 80).
    pub port: u16,
    /// HTTP(S): path and optional query sent in the GET (`requestPath`, default `/`).
    pub request_path: String,
    /// HTTP(S): `Host` header (`host`); empty means the forwarding rule's IP (see
    /// [`HealthTarget::rule_ip`]). HTTPS also sends it as the TLS server name (SNI) when it is
    /// a DNS name.
    pub host: String,
    /// TCP: ASCII sent once connected (`request`, may be empty).
    pub request: String,
    /// HTTP(S): ASCII the first 1024 bytes of the body must contain; TCP: ASCII the reply must
    /// begin with (`response`; empty: no content check).
    pub response: String,
    /// Time between probes (`checkIntervalSec`, default 5 s).
    pub interval: Duration,
    /// Whole-probe deadline (`timeoutSec`, default 5 s, at most the interval).
    pub timeout: Duration,
    /// Consecutive passes that make a backend healthy (`healthyThreshold`, default 2).
    pub healthy_threshold: u32,
    /// Consecutive failures that make a backend unhealthy (`unhealthyThreshold`, default 2).
    pub unhealthy_threshold: u32,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            protocol: CheckProtocol::Http,
            port: 80,
            request_path: "/".to_string(),
            host: String::new(),
            request: String::new(),
            response: String::new(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
            healthy_threshold: 2,
            unhealthy_threshold: 2,
        }
    }
}

/// One backend of one pool to probe: the unit the controller hands to
/// [`HealthChecker::set_targets`](super::HealthChecker::set_targets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthTarget {
    /// Pool and backend names.
    pub key: TargetKey,
    /// Backend IP address (probes go to `ip:check.port`).
    pub ip: IpAddr,
    /// The pool's health check.
    pub check: Check,
    /// IP of the forwarding rule in front of the pool: the `Host` header when `check.host` is
    /// empty. `None` falls back to the backend's own IP.
    pub rule_ip: Option<IpAddr>,
    /// Whether the pool balances by the `X-Load-Balancing-Endpoint-Weight` response header
    /// (SPEC R5.4); otherwise the header is ignored.
    pub weighted: bool,
}

impl HealthTarget {
    /// A target with the default check (HTTP `GET /` on port 80) and no forwarding-rule IP.
    pub fn new(pool: impl Into<String>, backend: impl Into<String>, ip: IpAddr) -> Self {
        HealthTarget {
            key: TargetKey::new(pool, backend),
            ip,
            check: Check::default(),
            rule_ip: None,
            weighted: false,
        }
    }

    /// The `Host` header value this target is probed with: `check.host`, else the forwarding
    /// rule's IP, else the backend's IP (IPv6 in brackets, as RFC 9110 writes a host).
    pub fn host_header(&self) -> String {
        if !self.check.host.is_empty() {
            return self.check.host.clone();
        }
        match self.rule_ip.unwrap_or(self.ip) {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        }
    }

    /// The deduplication key: targets with equal keys share one probe. Only what goes on the
    /// wire counts: a TCP check has no path or `Host`.
    pub fn probe_key(&self) -> ProbeKey {
        let check = &self.check;
        let addr = SocketAddr::new(self.ip, check.port);
        match check.protocol {
            CheckProtocol::Http | CheckProtocol::Https => ProbeKey {
                addr,
                protocol: check.protocol,
                path: check.request_path.clone(),
                host: self.host_header(),
                request: String::new(),
                response: check.response.clone(),
            },
            CheckProtocol::Tcp => ProbeKey {
                addr,
                protocol: CheckProtocol::Tcp,
                path: String::new(),
                host: String::new(),
                request: check.request.clone(),
                response: check.response.clone(),
            },
        }
    }

    /// Where the probe goes, as a URL: `http://10.0.0.7:80/healthz`, `https://…`,
    /// `tcp://10.0.0.7:6379`.
    pub fn url(&self) -> String {
        let addr = SocketAddr::new(self.ip, self.check.port);
        match self.check.protocol {
            CheckProtocol::Tcp => format!("tcp://{addr}"),
            p => format!("{}://{addr}{}", p.scheme(), self.check.request_path),
        }
    }

    /// Checks the target against the public API's rules, so that a bad config is refused
    /// before anything is probed.
    pub fn validate(&self) -> Result<(), HealthError> {
        let key = &self.key;
        let bad = |what: &'static str, why: String| HealthError::Invalid {
            target: key.clone(),
            field: what,
            why,
        };
        let check = &self.check;
        if check.port == 0 {
            return Err(bad("port", "must be 1..=65535".into()));
        }
        for (field, text) in [("request", &check.request), ("response", &check.response)] {
            if !text.is_ascii() {
                return Err(bad(field, format!("{text:?} must be ASCII")));
            }
            if text.len() > MAX_PROBE_DATA {
                return Err(bad(
                    field,
                    format!("{} bytes long; at most {MAX_PROBE_DATA} bytes", text.len()),
                ));
            }
        }
        if check.protocol.is_http() {
            if !check.request.is_empty() {
                return Err(bad(
                    "request",
                    format!(
                        "an {} check sends a GET, not a request of its own",
                        check.protocol.name()
                    ),
                ));
            }
            check_http(check).map_err(|(field, why)| bad(field, why))?;
        }
        check_timing(check).map_err(|(field, why)| bad(field, why))
    }
}

/// The timing and thresholds of any check.
fn check_timing(check: &Check) -> Result<(), (&'static str, String)> {
    let bad = |field, why: &str| Err((field, why.to_string()));
    if check.interval.is_zero() {
        return bad("checkIntervalSec", "must be greater than 0");
    }
    if check.timeout.is_zero() {
        return bad("timeoutSec", "must be greater than 0");
    }
    if check.timeout > check.interval {
        return Err((
            "timeoutSec",
            format!(
                "{:?} must not exceed checkIntervalSec {:?}",
                check.timeout, check.interval
            ),
        ));
    }
    if check.healthy_threshold == 0 {
        return bad("healthyThreshold", "must be at least 1");
    }
    if check.unhealthy_threshold == 0 {
        return bad("unhealthyThreshold", "must be at least 1");
    }
    Ok(())
}

/// The request path and `Host` of an HTTP or HTTPS check.
fn check_http(check: &Check) -> Result<(), (&'static str, String)> {
    if !check.request_path.starts_with('/') {
        return Err((
            "requestPath",
            format!("{:?} must start with '/'", check.request_path),
        ));
    }
    if Uri::try_from(check.request_path.as_str()).is_err() {
        return Err((
            "requestPath",
            format!("{:?} is not a valid request target", check.request_path),
        ));
    }
    if HeaderValue::from_str(&check.host).is_err() || check.host.contains(char::is_whitespace) {
        return Err((
            "host",
            format!("{:?} is not a valid Host header value", check.host),
        ));
    }
    Ok(())
}

/// What makes two targets share one probe: everything that goes on the wire (backend address
/// and port, protocol, request path and `Host`, TCP request) and what the reply is judged by
/// (`response`). Fields a protocol does not use are empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeKey {
    /// Backend IP and check port.
    pub addr: SocketAddr,
    /// HTTP, HTTPS or TCP.
    pub protocol: CheckProtocol,
    /// HTTP(S): request path (and query).
    pub path: String,
    /// HTTP(S): `Host` header value (and, when a DNS name, the TLS server name).
    pub host: String,
    /// TCP: bytes sent once connected.
    pub request: String,
    /// Expected content (empty: none).
    pub response: String,
}

impl ProbeKey {
    /// An HTTP probe of `path` with `Host: host` and no expected content.
    pub fn http(addr: SocketAddr, path: impl Into<String>, host: impl Into<String>) -> Self {
        ProbeKey {
            addr,
            protocol: CheckProtocol::Http,
            path: path.into(),
            host: host.into(),
            request: String::new(),
            response: String::new(),
        }
    }
}

impl fmt::Display for ProbeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.protocol {
            CheckProtocol::Tcp => {
                write!(f, "tcp://{}", self.addr)?;
                if !self.request.is_empty() {
                    write!(f, " (request {:?})", self.request)?;
                }
            }
            p => write!(
                f,
                "{}://{}{} (Host: {})",
                p.scheme(),
                self.addr,
                self.path,
                self.host
            )?,
        }
        if !self.response.is_empty() {
            write!(f, " expecting {:?}", self.response)?;
        }
        Ok(())
    }
}

/// Why the health checker refused a target set (it keeps probing the previous one) or could
/// not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthError {
    /// A field is out of range or malformed.
    #[error("health check of {target}: {field}: {why}")]
    Invalid {
        /// The target.
        target: TargetKey,
        /// Field name as the public API spells it.
        field: &'static str,
        /// What is wrong and what would be valid.
        why: String,
    },
    /// The same (pool, backend) appears twice.
    #[error("health target {0} is listed twice")]
    Duplicate(TargetKey),
    /// The checker was created outside a tokio runtime.
    #[error("the health checker needs a tokio runtime: {0}")]
    NoRuntime(String),
    /// The checker's own thread or runtime could not be started.
    #[error("cannot start the health checker's thread: {0}")]
    Thread(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn target() -> HealthTarget {
        HealthTarget::new("web", "vm-1", IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)))
    }

    #[test]
    fn defaults_are_the_public_api_defaults() {
        // SPEC R1: port 80, path /, interval 5 s, timeout 5 s, thresholds 2/2.
        let c = Check::default();
        assert_eq!(
            (c.port, c.request_path.as_str(), c.host.as_str()),
            (80, "/", "")
        );
        assert_eq!(
            (c.interval, c.timeout),
            (Duration::from_secs(5), Duration::from_secs(5))
        );
        assert_eq!((c.healthy_threshold, c.unhealthy_threshold), (2, 2));
        assert_eq!(target().validate(), Ok(()));
    }

    #[test]
    fn host_falls_back_to_rule_ip_then_backend_ip() {
        let mut t = target();
        assert_eq!(t.host_header(), "10.0.0.7");
        t.rule_ip = Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)));
        assert_eq!(t.host_header(), "[2001:db8::1]");
        t.check.host = "health.example".into();
        assert_eq!(t.host_header(), "health.example");
        assert_eq!(t.probe_key().host, "health.example");
        assert_eq!(t.probe_key().addr, "10.0.0.7:80".parse().unwrap());
    }

    #[test]
    fn refuses_what_the_public_api_refuses() {
        type Breaker = fn(&mut Check);
        let cases: [(&str, Breaker); 8] = [
            ("port", |c| c.port = 0),
            ("requestPath", |c| c.request_path = "healthz".into()),
            ("requestPath", |c| c.request_path = "/a b".into()),
            ("host", |c| c.host = "bad\nhost".into()),
            ("checkIntervalSec", |c| c.interval = Duration::ZERO),
            ("timeoutSec", |c| c.timeout = Duration::from_secs(6)),
            ("healthyThreshold", |c| c.healthy_threshold = 0),
            ("unhealthyThreshold", |c| c.unhealthy_threshold = 0),
        ];
        for (field, break_it) in cases {
            let mut t = target();
            break_it(&mut t.check);
            match t.validate() {
                Err(HealthError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn refuses_probe_data_the_public_api_refuses() {
        type Breaker = fn(&mut Check);
        let cases: [(&str, Breaker); 4] = [
            ("response", |c| c.response = "é".into()),
            ("response", |c| c.response = "x".repeat(MAX_PROBE_DATA + 1)),
            ("request", |c| {
                c.protocol = CheckProtocol::Tcp;
                c.request = "y".repeat(MAX_PROBE_DATA + 1);
            }),
            // An HTTP check has no request of its own.
            ("request", |c| c.request = "PING".into()),
        ];
        for (field, break_it) in cases {
            let mut t = target();
            break_it(&mut t.check);
            match t.validate() {
                Err(HealthError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected a refusal, got {other:?}"),
            }
        }
        // At the limit is fine; a TCP check ignores path and host.
        let mut t = target();
        t.check.response = "z".repeat(MAX_PROBE_DATA);
        assert_eq!(t.validate(), Ok(()));
        t.check.protocol = CheckProtocol::Tcp;
        t.check.request_path = "not a path".into();
        t.check.host = "bad\nhost".into();
        assert_eq!(t.validate(), Ok(()));
    }

    /// What goes on the wire decides which targets share a probe.
    #[test]
    fn probe_keys_hold_what_goes_on_the_wire() {
        let mut http = target();
        http.check.response = "ok".into();
        let mut https = http.clone();
        https.check.protocol = CheckProtocol::Https;
        assert_ne!(http.probe_key(), https.probe_key(), "another protocol");
        let mut other_response = http.clone();
        other_response.check.response = "OK".into();
        assert_ne!(http.probe_key(), other_response.probe_key());

        // TCP: path and host do not go on the wire, so they do not split a probe.
        let mut tcp = target();
        tcp.check.protocol = CheckProtocol::Tcp;
        tcp.check.request = "PING\r\n".into();
        tcp.check.response = "+PONG".into();
        let mut tcp2 = tcp.clone();
        tcp2.check.request_path = "/elsewhere".into();
        tcp2.check.host = "h.example".into();
        tcp2.rule_ip = Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)));
        assert_eq!(tcp.probe_key(), tcp2.probe_key());
        assert_eq!(
            (tcp.probe_key().path.as_str(), tcp.probe_key().host.as_str()),
            ("", "")
        );
        let mut tcp3 = tcp.clone();
        tcp3.check.request = "PING\n".into();
        assert_ne!(tcp.probe_key(), tcp3.probe_key(), "another request");

        assert_eq!(http.url(), "http://10.0.0.7:80/");
        assert_eq!(https.url(), "https://10.0.0.7:80/");
        assert_eq!(tcp.url(), "tcp://10.0.0.7:80");
        assert_eq!(
            tcp.probe_key().to_string(),
            "tcp://10.0.0.7:80 (request \"PING\\r\\n\") expecting \"+PONG\""
        );
        assert_eq!(
            https.probe_key().to_string(),
            "https://10.0.0.7:80/ (Host: 10.0.0.7) expecting \"ok\""
        );
    }

    #[test]
    fn query_strings_are_allowed() {
        let mut t = target();
        t.check.request_path = "/healthz?verbose=1".into();
        assert_eq!(t.validate(), Ok(()));
    }
}
