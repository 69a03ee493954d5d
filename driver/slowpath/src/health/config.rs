//! What the health checker is asked to probe: targets, their HTTP check, and validation.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hyper::header::HeaderValue;
use hyper::Uri;

/// Identifies one target: a backend as a member of one pool.
///
/// The same backend in two pools is two targets (each pool may use another check or threshold),
/// but when both use the same (IP, port, path, host) they share one probe.
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

/// A legacy HTTP health check (SPEC R1, R5.1), with the public API's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCheck {
    /// TCP port probed (`port`, default 80).
    pub port: u16,
    /// Path and optional query sent in the GET (`requestPath`, default `/`).
    pub request_path: String,
    /// `Host` header (`host`); empty means the forwarding rule's IP (see [`HealthTarget::rule_ip`]).
    pub host: String,
    /// Time between probes (`checkIntervalSec`, default 5 s).
    pub interval: Duration,
    /// Whole-probe deadline (`timeoutSec`, default 5 s, at most the interval).
    pub timeout: Duration,
    /// Consecutive passes that make a backend healthy (`healthyThreshold`, default 2).
    pub healthy_threshold: u32,
    /// Consecutive failures that make a backend unhealthy (`unhealthyThreshold`, default 2).
    pub unhealthy_threshold: u32,
}

impl Default for HttpCheck {
    fn default() -> Self {
        HttpCheck {
            port: 80,
            request_path: "/".to_string(),
            host: String::new(),
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
    pub check: HttpCheck,
    /// IP of the forwarding rule in front of the pool: the `Host` header when `check.host` is
    /// empty. `None` falls back to the backend's own IP.
    pub rule_ip: Option<IpAddr>,
    /// Whether the pool balances by the `X-Load-Balancing-Endpoint-Weight` response header
    /// (SPEC R5.4); otherwise the header is ignored.
    pub weighted: bool,
}

impl HealthTarget {
    /// A target with the default check on `port` 80 and no forwarding-rule IP.
    pub fn new(pool: impl Into<String>, backend: impl Into<String>, ip: IpAddr) -> Self {
        HealthTarget {
            key: TargetKey::new(pool, backend),
            ip,
            check: HttpCheck::default(),
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

    /// The deduplication key: targets with equal keys share one probe.
    pub fn probe_key(&self) -> ProbeKey {
        ProbeKey {
            addr: SocketAddr::new(self.ip, self.check.port),
            path: self.check.request_path.clone(),
            host: self.host_header(),
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
        if !check.request_path.starts_with('/') {
            return Err(bad(
                "requestPath",
                format!("{:?} must start with '/'", check.request_path),
            ));
        }
        if Uri::try_from(check.request_path.as_str()).is_err() {
            return Err(bad(
                "requestPath",
                format!("{:?} is not a valid request target", check.request_path),
            ));
        }
        if HeaderValue::from_str(&check.host).is_err() || check.host.contains(char::is_whitespace) {
            return Err(bad(
                "host",
                format!("{:?} is not a valid Host header value", check.host),
            ));
        }
        if check.interval.is_zero() {
            return Err(bad("checkIntervalSec", "must be greater than 0".into()));
        }
        if check.timeout.is_zero() {
            return Err(bad("timeoutSec", "must be greater than 0".into()));
        }
        if check.timeout > check.interval {
            return Err(bad(
                "timeoutSec",
                format!(
                    "{:?} must not exceed checkIntervalSec {:?}",
                    check.timeout, check.interval
                ),
            ));
        }
        if check.healthy_threshold == 0 {
            return Err(bad("healthyThreshold", "must be at least 1".into()));
        }
        if check.unhealthy_threshold == 0 {
            return Err(bad("unhealthyThreshold", "must be at least 1".into()));
        }
        Ok(())
    }
}

/// What makes two targets share one probe: backend address and port, request path, `Host`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeKey {
    /// Backend IP and check port.
    pub addr: SocketAddr,
    /// Request path (and query).
    pub path: String,
    /// `Host` header value.
    pub host: String,
}

impl fmt::Display for ProbeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{} (Host: {})", self.addr, self.path, self.host)
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
        let c = HttpCheck::default();
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
        type Breaker = fn(&mut HttpCheck);
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
    fn query_strings_are_allowed() {
        let mut t = target();
        t.check.request_path = "/healthz?verbose=1".into();
        assert_eq!(t.validate(), Ok(()));
    }
}
