//! The scenario file of `nlbctl policy-sim` (docs/policy-sim.md has the schema): a load
//! balancer with a backend service, and what happens to it over virtual time.
//!
//! Everything is checked before anything runs, and every problem is reported with
//! `file:line:column: field: message (valid: ...)`, as configurations are; problems inside an
//! inline configuration are the compiler's, at their place in the scenario file.

use super::yaml::{self, Node, Value};
use flowtable_compiler::{Config, Diagnostics, Error, ForwardingRule, Pos, DEFAULT_DEADBAND};
use nlb_config::{load_config, parse_config};
use nlb_hw::Profile;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Longest scenario: one day of virtual time.
pub const MAX_DURATION_SECS: f64 = 86_400.0;
/// Most connections a scenario may ask for (rate × time over all arrival steps).
pub const MAX_CONNECTIONS: f64 = 5_000_000.0;
/// Shortest refresh interval.
pub const MIN_REFRESH_SECS: f64 = 0.01;
/// Most refreshes a scenario may ask for (a day at one a second fits).
pub const MAX_REFRESHES: u64 = 100_000;
/// Microseconds per second: virtual time runs in whole microseconds.
pub const MICROS: f64 = 1e6;

/// Top-level fields, in the order the documentation lists them.
const FIELDS: &[&str] = &[
    "name",
    "seed",
    "duration",
    "refreshInterval",
    "deadband",
    "profile",
    "forwardingRule",
    "port",
    "config",
    "arrivals",
    "lifetime",
    "health",
];

/// From `at` on, new connections arrive at `rate` per second (a Poisson process).
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalStep {
    /// Start, microseconds.
    pub at: u64,
    /// Connections per second.
    pub rate: f64,
    /// Name for the summary (`name`, or one made from the rate).
    pub name: String,
}

/// How long connections last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lifetime {
    /// Every connection lasts this long (seconds).
    Fixed(f64),
    /// Uniform between the two (seconds).
    Uniform(f64, f64),
    /// Exponential with this mean (seconds).
    Exponential(f64),
}

impl Lifetime {
    /// Mean lifetime, seconds.
    pub fn mean(&self) -> f64 {
        match *self {
            Lifetime::Fixed(m) | Lifetime::Exponential(m) => m,
            Lifetime::Uniform(a, b) => (a + b) / 2.0,
        }
    }

    /// In words.
    pub fn describe(&self) -> String {
        match *self {
            Lifetime::Fixed(m) => format!("{m} s each"),
            Lifetime::Uniform(a, b) => format!("uniform {a}..{b} s"),
            Lifetime::Exponential(m) => format!("exponential, mean {m} s"),
        }
    }
}

/// Members of the service go down or come back at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthEvent {
    /// When, microseconds.
    pub at: u64,
    /// Instances that start failing their health check (groups expanded).
    pub down: Vec<String>,
    /// Instances that pass again.
    pub up: Vec<String>,
    /// Name for the summary and the plot (`name`, or one made from the lists as written).
    pub name: String,
}

/// Where the load balancer's configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// Written inside the scenario.
    Inline,
    /// A file (resolved against the scenario's directory).
    File(PathBuf),
}

/// A checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file, as named.
    pub file: String,
    /// `name`, or the file's stem.
    pub name: String,
    /// `seed`.
    pub seed: u64,
    /// `duration`, microseconds.
    pub duration: u64,
    /// `refreshInterval`, microseconds (default 1 s).
    pub refresh: u64,
    /// `deadband`: share moves smaller than this are not applied (default
    /// [`DEFAULT_DEADBAND`]).
    pub deadband: f64,
    /// `profile`: the capacity profile of the simulated NIC (default `sim`).
    pub profile: &'static Profile,
    /// The load balancer.
    pub config: Config,
    /// Where it came from.
    pub config_source: ConfigSource,
    /// The forwarding rule new connections go to (`forwardingRule`, or the one rule that
    /// targets a backend service).
    pub rule: String,
    /// Its VIP.
    pub vip: std::net::IpAddr,
    /// Destination port of the connections (`port`, or the rule's first).
    pub port: u16,
    /// The backend service the rule targets.
    pub service: String,
    /// The service's groups and their instances, by group name.
    pub groups: Vec<(String, Vec<String>)>,
    /// `arrivals`, by time.
    pub arrivals: Vec<ArrivalStep>,
    /// `lifetime`.
    pub lifetime: Lifetime,
    /// `health`, by time.
    pub health: Vec<HealthEvent>,
}

/// Why a scenario cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario or its configuration is wrong: every problem found, by position.
    #[error("{0}")]
    Invalid(Diagnostics),
    /// The scenario file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl From<Diagnostics> for ScenarioError {
    fn from(d: Diagnostics) -> Self {
        ScenarioError::Invalid(d)
    }
}

struct Reader<'a> {
    file: &'a str,
    diags: Diagnostics,
}

impl Reader<'_> {
    fn err(&mut self, pos: Pos, path: &str, msg: impl Into<String>, valid: Option<&str>) {
        self.diags
            .push(self.file, pos, path, msg, valid.map(str::to_string));
    }

    /// The entries of a mapping, with unknown keys reported.
    fn mapping<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        fields: &[&str],
    ) -> Option<&'n [(Node, Node)]> {
        let Value::Map(entries) = &node.value else {
            self.err(
                node.pos,
                path,
                format!("expected a mapping, found {}", node.kind()),
                None,
            );
            return None;
        };
        let mut seen = BTreeSet::new();
        for (k, _) in entries {
            let name = match &k.value {
                Value::Scalar { text, .. } => text.as_str(),
                _ => "",
            };
            if !fields.contains(&name) {
                self.err(
                    k.pos,
                    &join(path, name),
                    format!("unknown field `{name}`"),
                    Some(&fields.join(", ")),
                );
            } else if !seen.insert(name) {
                self.err(k.pos, &join(path, name), "field given twice", None);
            }
        }
        Some(entries)
    }

    fn number(&mut self, node: &Node, path: &str, lo: f64, hi: f64) -> Option<f64> {
        let text = match &node.value {
            Value::Scalar { text, .. } if !node.is_null() => text.trim(),
            _ => {
                self.err(
                    node.pos,
                    path,
                    format!("expected a number, found {}", node.kind()),
                    Some(&format!("{lo} to {hi}")),
                );
                return None;
            }
        };
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && (lo..=hi).contains(&v) => Some(v),
            Ok(v) if v.is_finite() => {
                self.err(
                    node.pos,
                    path,
                    format!("{text} is out of range"),
                    Some(&format!("{lo} to {hi}")),
                );
                None
            }
            _ => {
                self.err(
                    node.pos,
                    path,
                    format!("`{text}` is not a number"),
                    Some(&format!("{lo} to {hi}")),
                );
                None
            }
        }
    }

    fn integer(&mut self, node: &Node, path: &str, hi: u64) -> Option<u64> {
        let text = self.string(node, path)?;
        match text.trim().parse::<u64>() {
            Ok(v) if v <= hi => Some(v),
            _ => {
                self.err(
                    node.pos,
                    path,
                    format!("`{text}` is not an integer from 0 to {hi}"),
                    Some(&format!("0 to {hi}")),
                );
                None
            }
        }
    }

    fn string<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n str> {
        match &node.value {
            Value::Scalar { text, .. } if !node.is_null() => Some(text),
            _ => {
                self.err(
                    node.pos,
                    path,
                    format!("expected a string, found {}", node.kind()),
                    None,
                );
                None
            }
        }
    }

    fn list<'n>(&mut self, node: &'n Node, path: &str) -> &'n [Node] {
        match &node.value {
            Value::Seq(items) => items,
            _ => {
                self.err(
                    node.pos,
                    path,
                    format!("expected a list, found {}", node.kind()),
                    None,
                );
                &[]
            }
        }
    }

    /// Seconds as whole microseconds.
    fn seconds(&mut self, node: &Node, path: &str, lo: f64, hi: f64) -> Option<u64> {
        self.number(node, path, lo, hi)
            .map(|s| (s * MICROS).round() as u64)
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn get<'n>(entries: &'n [(Node, Node)], name: &str) -> Option<&'n Node> {
    entries
        .iter()
        .find(|(k, _)| matches!(&k.value, Value::Scalar { text, .. } if text == name))
        .map(|(_, v)| v)
}

fn format_secs(us: u64) -> String {
    let s = us as f64 / MICROS;
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Scenario::parse(&path.display().to_string(), &text, base)
    }

    /// Checks a scenario text; `base` is the directory a `config` path is relative to.
    pub fn parse(file: &str, text: &str, base: &Path) -> Result<Scenario, ScenarioError> {
        let root = yaml::parse(file, text)?;
        let mut r = Reader {
            file,
            diags: Diagnostics::new(),
        };
        let Some(top) = r.mapping(&root, "", FIELDS) else {
            return Err(r.diags.into());
        };
        let required = |r: &mut Reader, name: &str, what: &str| -> Option<&Node> {
            let n = get(top, name);
            if n.is_none() {
                r.err(root.pos, name, format!("missing: {what}"), None);
            }
            n
        };

        let name = match get(top, "name") {
            Some(n) => r.string(n, "name").map(str::to_string),
            None => None,
        }
        .unwrap_or_else(|| {
            Path::new(file)
                .file_stem()
                .map_or("scenario".to_string(), |s| s.to_string_lossy().into_owned())
        });
        let seed = get(top, "seed")
            .and_then(|n| r.integer(n, "seed", u64::MAX))
            .unwrap_or(1);
        let duration = required(&mut r, "duration", "seconds of virtual time to simulate")
            .and_then(|n| r.seconds(n, "duration", 1e-3, MAX_DURATION_SECS));
        let refresh = get(top, "refreshInterval")
            .map_or(Some(1_000_000), |n| {
                r.seconds(n, "refreshInterval", MIN_REFRESH_SECS, MAX_DURATION_SECS)
            })
            .unwrap_or(1_000_000);
        let deadband = get(top, "deadband")
            .map_or(Some(DEFAULT_DEADBAND), |n| {
                r.number(n, "deadband", 0.0, 1.0)
            })
            .unwrap_or(DEFAULT_DEADBAND);
        let profile = read_profile(&mut r, top);

        // The configuration: inline, or a file next to the scenario.
        let (config, config_error) =
            match required(&mut r, "config", "the load balancer (a mapping, or a path)") {
                Some(n) => read_config(&mut r, n, text, base),
                None => (None, None),
            };

        let arrivals = required(&mut r, "arrivals", "new connections per second over time")
            .map(|n| arrivals(&mut r, n, duration))
            .unwrap_or_default();
        let lifetime = required(&mut r, "lifetime", "how long connections last")
            .and_then(|n| lifetime(&mut r, n));
        if let Some(d) = duration {
            check_limits(&mut r, top, &root, d, refresh, &arrivals);
        }

        // What the scenario names in the configuration.
        let mut resolved = None;
        if let Some((c, _)) = &config {
            resolved = resolve(&mut r, top, &root, c);
        }
        let health = match (get(top, "health"), &resolved) {
            (Some(n), Some(res)) => health_events(&mut r, n, duration, &res.groups),
            _ => Vec::new(),
        };

        if let Some(e) = config_error {
            return Err(match e {
                Error::Invalid(mut d) => {
                    d.extend(r.diags);
                    d.sort();
                    ScenarioError::Invalid(d)
                }
                other => {
                    r.err(root.pos, "config", other.to_string(), None);
                    ScenarioError::Invalid(r.diags)
                }
            });
        }
        r.diags.clone().into_result()?;
        let (
            Some((config, config_source)),
            Some(duration),
            Some(lifetime),
            Some(profile),
            Some(res),
        ) = (config, duration, lifetime, profile, resolved)
        else {
            // Every None above was reported.
            return Err(r.diags.into());
        };
        Ok(Scenario {
            file: file.to_string(),
            name,
            seed,
            duration,
            refresh,
            deadband,
            profile,
            config,
            config_source,
            rule: res.rule,
            vip: res.vip,
            port: res.port,
            service: res.service,
            groups: res.groups,
            arrivals,
            lifetime,
            health,
        })
    }

    /// Mean lifetime in seconds × the rate of the step in force at `t`: the live connections
    /// a steady state at that rate holds (Little's law).
    pub fn steady_live_at(&self, t: u64) -> f64 {
        let rate = self
            .arrivals
            .iter()
            .rev()
            .find(|s| s.at <= t)
            .map_or(0.0, |s| s.rate);
        rate * self.lifetime.mean()
    }
}

/// `profile`: a capacity profile's name (default `sim`).
fn read_profile(r: &mut Reader, top: &[(Node, Node)]) -> Option<&'static Profile> {
    match get(top, "profile") {
        None => Profile::by_name("sim"),
        Some(n) => r.string(n, "profile").and_then(|p| {
            let found = Profile::by_name(p);
            if found.is_none() {
                r.err(
                    n.pos,
                    "profile",
                    format!("unknown profile `{p}`"),
                    Some(&Profile::names().join(", ")),
                );
            }
            found
        }),
    }
}

/// `config`: the configuration inline (a block mapping of the scenario's `text`), or a file
/// relative to `base`; or the error of a configuration file that could not be read as one.
fn read_config(
    r: &mut Reader,
    n: &Node,
    text: &str,
    base: &Path,
) -> (Option<(Config, ConfigSource)>, Option<Error>) {
    let mut config: Option<(Config, ConfigSource)> = None;
    let mut config_error: Option<Error> = None;
    match &n.value {
        Value::Map(_) if n.flow => r.err(
            n.pos,
            "config",
            "write the inline configuration as a block mapping (one field per line), or give a path",
            None,
        ),
        Value::Map(_) => {
            let (c, d) = parse_config(r.file, &yaml::blank_outside(text, n));
            if d.is_empty() {
                config = Some((c, ConfigSource::Inline));
            } else {
                r.diags.extend(d);
            }
        }
        Value::Scalar { text: p, .. } if !n.is_null() => {
            let path = base.join(p);
            match load_config(&path) {
                Ok(c) => config = Some((c, ConfigSource::File(path))),
                Err(Error::Io { .. }) => r.err(
                    n.pos,
                    "config",
                    format!("cannot read {}", path.display()),
                    Some("a mapping, or a path relative to the scenario file"),
                ),
                Err(e) => config_error = Some(e),
            }
        }
        _ => r.err(
            n.pos,
            "config",
            format!("expected a mapping or a path, found {}", n.kind()),
            None,
        ),
    }
    (config, config_error)
}

/// The simulator's limits over `duration` (µs): connections in all, refreshes.
fn check_limits(
    r: &mut Reader,
    top: &[(Node, Node)],
    root: &Node,
    duration: u64,
    refresh: u64,
    arrivals: &[ArrivalStep],
) {
    let d = duration;
    let mut total = 0.0;
    for (i, s) in arrivals.iter().enumerate() {
        let end = arrivals.get(i + 1).map_or(d, |n| n.at).min(d);
        total += s.rate * end.saturating_sub(s.at) as f64 / MICROS;
    }
    if total > MAX_CONNECTIONS {
        r.err(
            root.pos,
            "arrivals",
            format!(
                "{total:.0} connections over {} s: more than this simulator's {MAX_CONNECTIONS:.0}",
                format_secs(d)
            ),
            Some("a lower rate or a shorter duration"),
        );
    }
    if d / refresh.max(1) > MAX_REFRESHES {
        r.err(
            get(top, "refreshInterval").map_or(root.pos, |n| n.pos),
            "refreshInterval",
            format!(
                "{} refreshes over {} s: more than this simulator's {MAX_REFRESHES}",
                d / refresh.max(1),
                format_secs(d)
            ),
            Some("a longer interval or a shorter duration"),
        );
    }
}

fn arrivals(r: &mut Reader, node: &Node, duration: Option<u64>) -> Vec<ArrivalStep> {
    let mut out: Vec<ArrivalStep> = Vec::new();
    let items = r.list(node, "arrivals");
    if items.is_empty() && matches!(node.value, Value::Seq(_)) {
        r.err(
            node.pos,
            "arrivals",
            "no step",
            Some("a list of {at: SECONDS, rate: PER_SECOND}, the first at 0"),
        );
    }
    let hi = duration.map_or(MAX_DURATION_SECS, |d| d as f64 / MICROS);
    for (i, item) in items.iter().enumerate() {
        let path = format!("arrivals[{i}]");
        let Some(m) = r.mapping(item, &path, &["at", "rate", "name"]) else {
            continue;
        };
        let at = match get(m, "at") {
            Some(n) => r.seconds(n, &join(&path, "at"), 0.0, hi),
            None => {
                r.err(
                    item.pos,
                    &join(&path, "at"),
                    "missing: when the step starts (seconds)",
                    None,
                );
                None
            }
        };
        let rate = match get(m, "rate") {
            Some(n) => r.number(n, &join(&path, "rate"), 0.0, 1e6),
            None => {
                r.err(
                    item.pos,
                    &join(&path, "rate"),
                    "missing: new connections per second",
                    None,
                );
                None
            }
        };
        let name = get(m, "name").and_then(|n| r.string(n, &join(&path, "name")));
        let (Some(at), Some(rate)) = (at, rate) else {
            continue;
        };
        if i == 0 && at != 0 {
            r.err(
                item.pos,
                &join(&path, "at"),
                "the first step must start at 0",
                Some("at: 0"),
            );
        }
        if let Some(prev) = out.last() {
            if at <= prev.at {
                r.err(
                    item.pos,
                    &join(&path, "at"),
                    format!(
                        "steps must be in increasing time: {} s is not after {} s",
                        format_secs(at),
                        format_secs(prev.at)
                    ),
                    None,
                );
                continue;
            }
        }
        out.push(ArrivalStep {
            at,
            rate,
            name: name.map_or_else(|| format!("{rate} conn/s"), str::to_string),
        });
    }
    out
}

fn lifetime(r: &mut Reader, node: &Node) -> Option<Lifetime> {
    let m = r.mapping(node, "lifetime", &["distribution", "mean", "min", "max"])?;
    const KINDS: &str = "fixed, uniform, exponential";
    let kind = match get(m, "distribution") {
        Some(n) => (r.string(n, "lifetime.distribution")?, n.pos),
        None => {
            r.err(node.pos, "lifetime.distribution", "missing", Some(KINDS));
            return None;
        }
    };
    let secs = |r: &mut Reader, name: &str| -> Option<f64> {
        match get(m, name) {
            Some(n) => r.number(n, &format!("lifetime.{name}"), 1e-3, MAX_DURATION_SECS),
            None => {
                r.err(
                    node.pos,
                    &format!("lifetime.{name}"),
                    format!("missing: `{}` needs it (seconds)", kind.0),
                    None,
                );
                None
            }
        }
    };
    let unused = |r: &mut Reader, names: &[&str]| {
        for name in names {
            if let Some(n) = get(m, name) {
                r.err(
                    n.pos,
                    &format!("lifetime.{name}"),
                    format!("`{}` takes no `{name}`", kind.0),
                    None,
                );
            }
        }
    };
    match kind.0 {
        "fixed" => {
            unused(r, &["min", "max"]);
            secs(r, "mean").map(Lifetime::Fixed)
        }
        "exponential" => {
            unused(r, &["min", "max"]);
            secs(r, "mean").map(Lifetime::Exponential)
        }
        "uniform" => {
            unused(r, &["mean"]);
            let (lo, hi) = (secs(r, "min")?, secs(r, "max")?);
            if hi < lo {
                r.err(node.pos, "lifetime.max", "smaller than `min`", None);
                return None;
            }
            Some(Lifetime::Uniform(lo, hi))
        }
        other => {
            r.err(
                kind.1,
                "lifetime.distribution",
                format!("unknown distribution `{other}`"),
                Some(KINDS),
            );
            None
        }
    }
}

struct Resolved {
    rule: String,
    vip: std::net::IpAddr,
    port: u16,
    service: String,
    groups: Vec<(String, Vec<String>)>,
}

/// The forwarding rule, its backend service and the service's groups.
fn resolve(r: &mut Reader, top: &[(Node, Node)], root: &Node, c: &Config) -> Option<Resolved> {
    let to_service: Vec<&ForwardingRule> = c
        .forwarding_rules
        .iter()
        .filter(|f| f.backend_service)
        .collect();
    let names = |v: &[&ForwardingRule]| {
        v.iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rule: &ForwardingRule = match get(top, "forwardingRule") {
        Some(n) => {
            let want = r.string(n, "forwardingRule")?;
            match to_service.iter().find(|f| f.name == want) {
                Some(f) => f,
                None => {
                    let msg = if c.forwarding_rules.iter().any(|f| f.name == want) {
                        format!("forwarding rule `{want}` does not target a backend service")
                    } else {
                        format!("no forwarding rule `{want}` in the configuration")
                    };
                    r.err(n.pos, "forwardingRule", msg, Some(&names(&to_service)));
                    return None;
                }
            }
        }
        None => match to_service.as_slice() {
            [one] => one,
            [] => {
                r.err(
                    root.pos,
                    "config",
                    "no forwarding rule of the configuration targets a backend service (`backendService`)",
                    None,
                );
                return None;
            }
            many => {
                r.err(
                    root.pos,
                    "forwardingRule",
                    "missing: several forwarding rules target a backend service; name one",
                    Some(&names(many)),
                );
                return None;
            }
        },
    };
    if rule.ip_protocol == flowtable_compiler::Protocol::Udp {
        r.err(
            get(top, "forwardingRule").map_or(root.pos, |n| n.pos),
            "forwardingRule",
            format!(
                "forwarding rule `{}` takes UDP; the simulator opens TCP connections",
                rule.name
            ),
            None,
        );
        return None;
    }
    let port = match get(top, "port") {
        Some(n) => {
            let p = r.integer(n, "port", 65535)? as u16;
            if !rule.port_ranges.iter().any(|pr| pr.lo <= p && p <= pr.hi) || p == 0 {
                r.err(
                    n.pos,
                    "port",
                    format!("forwarding rule `{}` does not take port {p}", rule.name),
                    Some(
                        &rule
                            .port_ranges
                            .iter()
                            .map(|pr| format!("{}-{}", pr.lo.max(1), pr.hi))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                );
                return None;
            }
            p
        }
        // A rule of every port: a web client's.
        None => match rule.port_ranges.first() {
            Some(pr) if pr.contains(80) => 80,
            Some(pr) => pr.lo.max(1),
            None => 80,
        },
    };
    let service = c
        .backend_services
        .iter()
        .find(|b| b.name == rule.target.name)?;
    if let (Some(h), true) = (get(top, "health"), service.health_checks.is_empty()) {
        r.err(
            h.pos,
            "health",
            format!(
                "backend service `{}` has no health check, so health events change nothing",
                service.name
            ),
            Some("a `healthChecks` entry on the service, or no `health` events"),
        );
    }
    let mut groups: Vec<(String, Vec<String>)> = service
        .backends
        .iter()
        .map(|b| {
            let mut m: Vec<String> = c.group_members(b).into_iter().map(str::to_string).collect();
            m.sort();
            m.dedup();
            (b.group.name.clone(), m)
        })
        .collect();
    groups.sort();
    Some(Resolved {
        rule: rule.name.clone(),
        vip: rule.ip_address,
        port,
        service: service.name.clone(),
        groups,
    })
}

fn health_events(
    r: &mut Reader,
    node: &Node,
    duration: Option<u64>,
    groups: &[(String, Vec<String>)],
) -> Vec<HealthEvent> {
    let hi = duration.map_or(MAX_DURATION_SECS, |d| d as f64 / MICROS);
    let members: BTreeSet<&str> = groups
        .iter()
        .flat_map(|(_, m)| m.iter().map(String::as_str))
        .collect();
    let valid = || {
        let mut v: Vec<&str> = groups.iter().map(|(g, _)| g.as_str()).collect();
        v.extend(members.iter().copied());
        v.join(", ")
    };
    let mut out: Vec<HealthEvent> = Vec::new();
    for (i, item) in r.list(node, "health").iter().enumerate() {
        let path = format!("health[{i}]");
        let Some(m) = r.mapping(item, &path, &["at", "down", "up", "name"]) else {
            continue;
        };
        let at = match get(m, "at") {
            Some(n) => r.seconds(n, &join(&path, "at"), 0.0, hi),
            None => {
                r.err(
                    item.pos,
                    &join(&path, "at"),
                    "missing: when (seconds)",
                    None,
                );
                None
            }
        };
        let mut lists: [Vec<String>; 2] = [Vec::new(), Vec::new()];
        let mut written: Vec<String> = Vec::new();
        for (k, field) in ["down", "up"].iter().enumerate() {
            let Some(n) = get(m, field) else { continue };
            let fpath = join(&path, field);
            for (j, name_node) in r.list(n, &fpath).iter().enumerate() {
                let Some(name) = r.string(name_node, &format!("{fpath}[{j}]")) else {
                    continue;
                };
                if let Some((_, ms)) = groups.iter().find(|(g, _)| g == name) {
                    lists[k].extend(ms.iter().cloned());
                } else if members.contains(name) {
                    lists[k].push(name.to_string());
                } else {
                    r.err(
                        name_node.pos,
                        &format!("{fpath}[{j}]"),
                        format!(
                            "`{name}` is neither a group nor an instance of the backend service"
                        ),
                        Some(&valid()),
                    );
                    continue;
                }
                written.push(format!("{field} {name}"));
            }
        }
        if get(m, "down").is_none() && get(m, "up").is_none() {
            r.err(
                item.pos,
                &path,
                "nothing happens: give `down`, `up` or both",
                Some("down: [INSTANCE or GROUP, ...], up: [...]"),
            );
        }
        let both: Vec<&String> = lists[0].iter().filter(|x| lists[1].contains(x)).collect();
        if let Some(x) = both.first() {
            r.err(
                item.pos,
                &path,
                format!("`{x}` goes both down and up at once"),
                None,
            );
        }
        let name = get(m, "name").and_then(|n| r.string(n, &join(&path, "name")));
        let Some(at) = at else { continue };
        if let Some(prev) = out.last() {
            if at < prev.at {
                r.err(
                    item.pos,
                    &join(&path, "at"),
                    format!(
                        "events must be in time order: {} s is before {} s",
                        format_secs(at),
                        format_secs(prev.at)
                    ),
                    None,
                );
                continue;
            }
        }
        let [mut down, mut up] = lists;
        down.sort();
        down.dedup();
        up.sort();
        up.dedup();
        out.push(HealthEvent {
            at,
            down,
            up,
            name: name.map_or_else(|| written.join(", "), str::to_string),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "\
config:
  nic: {region: r1, zone: r1-a}
  forwardingRules:
    - {name: web, IPAddress: 203.0.113.10, portRange: \"80\", backendService: web}
  backendServices:
    - name: web
      healthChecks: [hc]
      backends:
        - {group: a, maxConnections: 100}
  instanceGroups:
    - {name: a, zone: r1-a, instances: [a1, a2]}
  healthChecks:
    - {name: hc, type: TCP, tcpHealthCheck: {port: 80}}
  instances:
    - {name: a1, ip: 192.0.2.1, zone: r1-a, mac: 02:00:00:00:00:01}
    - {name: a2, ip: 192.0.2.2, zone: r1-a, mac: 02:00:00:00:00:02}
";

    fn parse(rest: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse("s.yaml", &format!("{CONFIG}{rest}"), Path::new("."))
    }

    /// The messages of a refused scenario, as `line: text`.
    fn errors(rest: &str) -> Vec<String> {
        match parse(rest) {
            Ok(_) => panic!("accepted: {rest}"),
            Err(ScenarioError::Invalid(d)) => d
                .iter()
                .map(|d| format!("{}: {}: {}", d.pos.line, d.path, d.message))
                .collect(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_minimal_scenario_takes_the_defaults() {
        let s = parse(
            "duration: 10\narrivals: [{at: 0, rate: 5}]\nlifetime: {distribution: fixed, mean: 2}\n",
        )
        .unwrap();
        assert_eq!(
            (s.seed, s.refresh, s.deadband),
            (1, 1_000_000, DEFAULT_DEADBAND)
        );
        assert_eq!(
            (s.rule.as_str(), s.service.as_str(), s.port),
            ("web", "web", 80)
        );
        assert_eq!(s.groups, vec![("a".into(), vec!["a1".into(), "a2".into()])]);
        assert_eq!(s.config_source, ConfigSource::Inline);
        assert_eq!(s.steady_live_at(0), 10.0);
    }

    #[test]
    fn steps_and_events_are_checked_where_they_are_written() {
        // The configuration takes lines 1-16.
        let e = errors(
            "duration: 100\n\
             arrivals:\n  - {at: 5, rate: 1}\n  - {at: 5, rate: 2}\n\
             lifetime: {distribution: uniform, min: 3, max: 2}\n\
             health:\n  - {at: 50, down: [a]}\n  - {at: 40, up: [a9]}\n  - {at: 60}\n",
        );
        let want = [
            "19: arrivals[0].at: the first step must start at 0",
            "20: arrivals[1].at: steps must be in increasing time: 5 s is not after 5 s",
            "21: lifetime.max: smaller than `min`",
            "24: health[1].up[0]: `a9` is neither a group nor an instance of the backend service",
            "24: health[1].at: events must be in time order: 40 s is before 50 s",
            "25: health[2]: nothing happens: give `down`, `up` or both",
        ];
        for w in want {
            assert!(e.iter().any(|x| x == w), "no `{w}` in {e:#?}");
        }
    }

    #[test]
    fn limits_are_errors_not_hangs() {
        let e = errors(
            "duration: 86400\nrefreshInterval: 0.01\narrivals: [{at: 0, rate: 1000}]\n\
             lifetime: {distribution: exponential, mean: 1}\n",
        );
        assert!(
            e.iter()
                .any(|x| x.contains("more than this simulator's 5000000")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|x| x.contains("more than this simulator's 100000")),
            "{e:?}"
        );
    }

    #[test]
    fn health_events_need_a_health_check() {
        let text = format!(
            "{}duration: 10\narrivals: [{{at: 0, rate: 1}}]\nlifetime: {{distribution: fixed, mean: 1}}\nhealth: [{{at: 1, down: [a1]}}]\n",
            CONFIG.replace("      healthChecks: [hc]\n", "")
        );
        let Err(ScenarioError::Invalid(d)) = Scenario::parse("s.yaml", &text, Path::new("."))
        else {
            panic!("accepted")
        };
        assert!(d.to_string().contains("has no health check"), "{d}");
    }
}
