//! The fleet's store in etcd (SPEC R11.1): one configuration for many NLB hosts.
//!
//! Key layout under a prefix (default `/nlb/`, docs/fleet.md):
//!
//! - `PREFIX config`: the configuration serving the fleet, a JSON [`Published`] (the source
//!   text, its file name, the profile and digests of the compile `nlbctl publish` checked).
//!   Its etcd `mod_revision` is the revision: every put makes a new one.
//! - `PREFIX hosts/NAME`: what host NAME serves, a JSON [`HostRecord`], written with the host's
//!   lease: a host that stops keeping its lease alive disappears after the lease's TTL.
//! - `PREFIX health/POOL/BACKEND/HOST`: host HOST's decision on a backend it probes (shared
//!   health, SPEC R11.2), a JSON [`HealthReport`], with HOST's lease.
//!
//! `nlbctl publish` and `nlbctl fleet status` (blocking, on a runtime of their own) and `nlbd
//! --etcd` (on its runtime) share this module; etcd is reached with `etcd-client` (gRPC).

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The prefix of the fleet's keys unless `--prefix` says otherwise.
pub const DEFAULT_PREFIX: &str = "/nlb/";

/// How long one request to etcd may take (also the connect timeout): long enough for a
/// loaded machine, short enough that a command facing a dead cluster fails promptly.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a request keeps being retried while the members that answer are electing a
/// leader ("leader changed", "no leader"): losing the leader of a healthy cluster is not an
/// outage, and etcd elects a new one within a few election timeouts (1 s by default).
pub const ELECTION_WAIT: Duration = Duration::from_secs(6);

/// Whether an etcd error says the member is up but the cluster has no leader at the moment,
/// so the same request succeeds once one is elected.
fn is_election(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::Unavailable
                && (status.message().contains("leader changed")
                    || status.message().contains("no leader"))
        }
        _ => false,
    }
}

/// The keys of one fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix` (a `/` is added at its end when missing).
    pub fn new(prefix: &str) -> Result<Keys, String> {
        if prefix.is_empty() || prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "--prefix `{prefix}` is not a key prefix (valid: a non-empty path without spaces such as /nlb/)"
            ));
        }
        let mut prefix = prefix.to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(Keys { prefix })
    }

    /// The prefix, ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The configuration's key.
    pub fn config(&self) -> String {
        format!("{}config", self.prefix)
    }

    /// The prefix of the hosts' keys.
    pub fn hosts(&self) -> String {
        format!("{}hosts/", self.prefix)
    }

    /// Host `name`'s key.
    pub fn host(&self, name: &str) -> String {
        format!("{}hosts/{name}", self.prefix)
    }

    /// The prefix of the health reports.
    pub fn health(&self) -> String {
        format!("{}health/", self.prefix)
    }

    /// Host `host`'s report on `backend` of `pool`.
    pub fn health_report(&self, pool: &str, backend: &str, host: &str) -> String {
        format!("{}health/{pool}/{backend}/{host}", self.prefix)
    }

    /// What a key under the prefix is.
    pub fn classify<'k>(&self, key: &'k str) -> KeyKind<'k> {
        let Some(rest) = key.strip_prefix(self.prefix.as_str()) else {
            return KeyKind::Other;
        };
        if rest == "config" {
            return KeyKind::Config;
        }
        if let Some(name) = rest.strip_prefix("hosts/") {
            if !name.is_empty() && !name.contains('/') {
                return KeyKind::Host(name);
            }
        }
        if let Some(r) = rest.strip_prefix("health/") {
            let parts: Vec<&str> = r.split('/').collect();
            if let [pool, backend, host] = parts[..] {
                if !pool.is_empty() && !backend.is_empty() && !host.is_empty() {
                    return KeyKind::Health {
                        pool,
                        backend,
                        host,
                    };
                }
            }
        }
        KeyKind::Other
    }
}

/// The kinds of keys under a fleet's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind<'k> {
    /// `PREFIX config`.
    Config,
    /// `PREFIX hosts/NAME`.
    Host(&'k str),
    /// `PREFIX health/POOL/BACKEND/HOST`.
    Health {
        /// The pool.
        pool: &'k str,
        /// The backend (instance).
        backend: &'k str,
        /// The prober.
        host: &'k str,
    },
    /// Anything else.
    Other,
}

/// A host name for `--host`: what its key and the status table can hold.
pub fn check_host_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--host `{name}` is not a host name (valid: 1-253 of a-z, A-Z, 0-9, `-`, `_`, `.`)"
        ))
    }
}

/// The configuration stored under `PREFIX config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The file it was published from (what file:line messages name).
    pub file: String,
    /// Its text, exactly as published: every host parses and compiles this.
    pub source: String,
    /// The capacity profile `nlbctl publish` compiled it for.
    pub profile: String,
    /// SHA-256 of the canonical configuration (hex).
    pub config_digest: String,
    /// [`flowtable_compiler::Compiled::tables_digest`] of that compile, every backend healthy
    /// (hex): what a host of that profile serves of this revision with every backend healthy
    /// and ids in name order.
    pub tables_digest: String,
    /// When it was published (milliseconds since the Unix epoch, the publisher's clock).
    pub published_unix_ms: u64,
    /// The rule and backend ids every host compiles with: the publisher keeps those of the
    /// previous revision for what stays (as a host's own reload would), and hosts take them
    /// rather than their own, so a host that joined late holds the same tables as one that
    /// applied every revision (SPEC R10.4). None: each host keeps its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Ids>,
}

/// Rule and backend names by id (`""`: a free id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ids {
    /// Forwarding rules by rule id.
    pub rules: Vec<String>,
    /// Instances by backend id.
    pub backends: Vec<String>,
}

impl Ids {
    /// The ids of a compile.
    pub fn of(symbols: &flowtable_compiler::Symbols) -> Ids {
        Ids {
            rules: symbols.rules.clone(),
            backends: symbols.backends.clone(),
        }
    }

    /// As the `previous` of a compile (`flowtable_compiler::compile_after`).
    pub fn symbols(&self) -> flowtable_compiler::Symbols {
        flowtable_compiler::Symbols {
            rules: self.rules.clone(),
            backends: self.backends.clone(),
            ..flowtable_compiler::Symbols::default()
        }
    }
}

/// What one host serves, under `PREFIX hosts/NAME` with the host's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// The host's name (`--host`).
    pub host: String,
    /// The revision of the configuration its tables serve.
    pub revision: i64,
    /// SHA-256 of the tables the NIC serves (hex; [`flowtable_compiler::Compiled::tables_digest`]).
    pub tables_digest: String,
    /// SHA-256 of the configuration serving (hex).
    pub config_digest: String,
    /// The NIC's capacity profile.
    pub profile: String,
    /// The host's table generation (counts its own loads).
    pub generation: u32,
    /// How many health-check targets it probes for the fleet (shared health, SPEC R11.2).
    #[serde(default)]
    pub probing: u64,
    /// A later revision the host refused (it keeps serving `revision`), with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refused>,
    /// When the record was written (milliseconds since the Unix epoch, the host's clock).
    pub updated_unix_ms: u64,
}

/// A revision a host would not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// The revision.
    pub revision: i64,
    /// Why (the compiler's messages on one line).
    pub error: String,
}

/// A host's record with its lease as etcd holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostEntry {
    /// The record.
    #[serde(flatten)]
    pub record: HostRecord,
    /// The lease the key is attached to (0: none, which a host never writes).
    pub lease: i64,
    /// Seconds left on the lease, granted TTL (None when etcd no longer knows the lease).
    pub lease_ttl: Option<(i64, i64)>,
}

/// What went wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No answer, or a transport error.
    #[error("cannot reach etcd at {endpoints}: {error}")]
    Unreachable {
        /// The endpoints tried.
        endpoints: String,
        /// What the client said.
        error: String,
    },
    /// A value that is not what this module writes.
    #[error("etcd key {key}: {error}")]
    Malformed {
        /// The key.
        key: String,
        /// Why.
        error: String,
    },
}

/// A connection to the fleet's etcd: one client per endpoint, each request sent to the one
/// that answered last and, when it fails, to the others in turn. (One client balancing over
/// all endpoints sends some requests to a member that is down and fails them: a cluster
/// that lost one member would fail every third publish.)
#[derive(Clone)]
pub struct Store {
    clients: Vec<Client>,
    urls: Vec<String>,
    current: Arc<AtomicUsize>,
    endpoints: String,
    /// The fleet's keys.
    pub keys: Keys,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("endpoints", &self.endpoints)
            .field("keys", &self.keys)
            .finish()
    }
}

/// `--etcd`: comma-separated `HOST:PORT` or `http://HOST:PORT`, as `http://` URLs.
pub fn parse_endpoints(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for e in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if e.starts_with("https://") {
            return Err(format!(
                "--etcd `{e}`: TLS is not supported yet (valid: HOST:PORT or http://HOST:PORT, comma-separated)"
            ));
        }
        let rest = e.strip_prefix("http://").unwrap_or(e);
        let port_ok = rest
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !port_ok || rest.contains('/') {
            return Err(format!(
                "--etcd `{e}` is not an endpoint (valid: HOST:PORT or http://HOST:PORT, comma-separated, such as 127.0.0.1:2379)"
            ));
        }
        out.push(format!("http://{rest}"));
    }
    if out.is_empty() {
        return Err("--etcd: no endpoint given (valid: HOST:PORT[,HOST:PORT...])".into());
    }
    Ok(out)
}

/// Milliseconds since the Unix epoch.
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    /// Connects (lazily: the first request finds out whether etcd answers).
    pub async fn connect(endpoints: &[String], keys: Keys) -> Result<Store, FleetError> {
        let joined = endpoints.join(",");
        let options = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(2), REQUEST_TIMEOUT);
        let mut clients = Vec::new();
        for e in endpoints {
            let client = Client::connect([e], Some(options.clone()))
                .await
                .map_err(|err| FleetError::Unreachable {
                    endpoints: e.clone(),
                    error: err.to_string(),
                })?;
            clients.push(client);
        }
        if clients.is_empty() {
            return Err(FleetError::Unreachable {
                endpoints: joined,
                error: "no endpoint given".into(),
            });
        }
        Ok(Store {
            clients,
            urls: endpoints.to_vec(),
            current: Arc::new(AtomicUsize::new(0)),
            endpoints: joined,
            keys,
        })
    }

    /// Runs `request` on the endpoint that answered last, then on each other one until one
    /// answers; the errors of all when none does. While a member that answers says the
    /// cluster is electing a leader, the round is tried again, for up to [`ELECTION_WAIT`].
    async fn request<T, F, Fut>(&self, request: F) -> Result<T, FleetError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let n = self.clients.len();
        let deadline = tokio::time::Instant::now() + ELECTION_WAIT;
        loop {
            let first = self.current.load(Ordering::Relaxed) % n.max(1);
            let mut errors = Vec::new();
            let mut electing = false;
            for k in 0..n {
                let i = (first + k) % n;
                match request(self.clients[i].clone()).await {
                    Ok(v) => {
                        self.current.store(i, Ordering::Relaxed);
                        return Ok(v);
                    }
                    Err(e) => {
                        electing |= is_election(&e);
                        if n == 1 {
                            errors.push(e.to_string());
                        } else {
                            errors.push(format!("{}: {e}", self.urls[i]));
                        }
                    }
                }
            }
            if !electing || tokio::time::Instant::now() >= deadline {
                return Err(self.unreachable(errors.join("; ")));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The endpoints, comma-separated.
    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }

    /// The client of the endpoint that answered last, for watches and leases.
    pub fn client(&self) -> Client {
        let i = self.current.load(Ordering::Relaxed) % self.clients.len().max(1);
        self.clients[i].clone()
    }

    /// An etcd error as [`FleetError::Unreachable`].
    pub fn unreachable(&self, e: impl std::fmt::Display) -> FleetError {
        FleetError::Unreachable {
            endpoints: self.endpoints.clone(),
            error: e.to_string(),
        }
    }

    /// The live configuration and its revision, with the store's revision at the read; None
    /// when nothing was published.
    pub async fn live(&self) -> Result<(Option<(i64, Published)>, i64), FleetError> {
        let key = self.keys.config();
        let r = self
            .request(|mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        let store_revision = r.header().map_or(0, |h| h.revision());
        let Some(kv) = r.kvs().first() else {
            return Ok((None, store_revision));
        };
        let published = decode_published(&key, kv.value())?;
        Ok((Some((kv.mod_revision(), published)), store_revision))
    }

    /// Every key under the prefix, with the store's revision at the read: the configuration,
    /// the hosts and the health reports as of one revision, from which a watch continues.
    pub async fn read_all(&self) -> Result<(Vec<etcd_client::KeyValue>, i64), FleetError> {
        let prefix = self.keys.prefix().to_string();
        let mut r = self
            .request(|mut c| {
                let prefix = prefix.clone();
                async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let store_revision = r.header().map_or(0, |h| h.revision());
        Ok((r.take_kvs(), store_revision))
    }

    /// Stores `p` as the new revision if the live one is still `expected` (0: nothing live);
    /// `Ok(Err(now))` when it changed in between (`now`: its revision, 0 when deleted).
    pub async fn publish(
        &self,
        p: &Published,
        expected: i64,
    ) -> Result<Result<i64, i64>, FleetError> {
        let key = self.keys.config();
        let value = serde_json::to_vec(p).map_err(|e| FleetError::Malformed {
            key: key.clone(),
            error: e.to_string(),
        })?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.as_str(),
                CompareOp::Equal,
                expected,
            )])
            .and_then([TxnOp::put(key.as_str(), value.clone(), None)])
            .or_else([TxnOp::get(key.as_str(), None)]);
        // Sent again (to another member, or after an election) only when no answer came;
        // had an earlier attempt applied the put, the compare fails now and the live value
        // is ours byte for byte (it carries the publish time), which counts as published.
        let r = self
            .request(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        if r.succeeded() {
            // The put's revision is the store's revision after the transaction.
            return Ok(Ok(r.header().map_or(0, |h| h.revision())));
        }
        let live = r.op_responses().into_iter().find_map(|op| match op {
            etcd_client::TxnOpResponse::Get(g) => g
                .kvs()
                .first()
                .map(|kv| (kv.mod_revision(), kv.value() == value.as_slice())),
            _ => None,
        });
        match live {
            Some((revision, true)) => Ok(Ok(revision)),
            Some((revision, false)) => Ok(Err(revision)),
            None => Ok(Err(0)),
        }
    }

    /// Every host's record and the lease its key is attached to, by host name.
    pub async fn host_records(&self) -> Result<Vec<(HostRecord, i64)>, FleetError> {
        let prefix = self.keys.hosts();
        let r = self
            .request(|mut c| {
                let prefix = prefix.clone();
                async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut out = Vec::new();
        for kv in r.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let record: HostRecord =
                serde_json::from_slice(kv.value()).map_err(|e| FleetError::Malformed {
                    key: key.clone(),
                    error: format!("not a host record: {e}"),
                })?;
            out.push((record, kv.lease()));
        }
        out.sort_by(|a, b| a.0.host.cmp(&b.0.host));
        Ok(out)
    }

    /// Every host's record with its lease's time to live, by host name.
    pub async fn hosts(&self) -> Result<Vec<HostEntry>, FleetError> {
        let mut out = Vec::new();
        for (record, lease) in self.host_records().await? {
            let lease_ttl = if lease == 0 {
                None
            } else {
                let t = self
                    .request(|mut c| async move { c.lease_time_to_live(lease, None).await })
                    .await?;
                // etcd answers TTL -1 for a lease that expired or never existed.
                (t.ttl() >= 0).then(|| (t.ttl(), t.granted_ttl()))
            };
            out.push(HostEntry {
                record,
                lease,
                lease_ttl,
            });
        }
        Ok(out)
    }
}

/// How many hosts probe each backend unless `nlbd --probers` says otherwise (SPEC R11.2).
pub const DEFAULT_PROBERS: usize = 2;

/// One prober's decided health of one target (a pool's member), stored under
/// `PREFIX health/POOL/BACKEND/HOST` with the prober's lease: a prober that dies takes its
/// reports with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// Whether the prober decided the target healthy (else unhealthy; undecided targets are
    /// not reported).
    pub healthy: bool,
    /// The weight its probes reported (`not_weighted`, `missing`, `invalid` or 0-1000: SPEC
    /// R5.4).
    pub weight: String,
    /// When it was written (milliseconds since the Unix epoch, the prober's clock).
    pub updated_unix_ms: u64,
}

/// A name's 64-bit hash for rendezvous hashing: FNV-1a, then the SplitMix64 finaliser. The
/// same on every host and every build (the hosts must agree on who probes what).
pub fn rendezvous_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    crate::splitmix::mix(h)
}

/// Host `host`'s score for item `item` (both [`rendezvous_hash`]es): the `k` hosts of highest
/// score probe the item.
pub fn rendezvous_score(host: u64, item: u64) -> u64 {
    crate::splitmix::mix(host ^ item.rotate_left(17))
}

/// The `k` hosts (of `hosts`, names with their [`rendezvous_hash`]) that probe `item`, best
/// first: highest rendezvous score, ties by name. Removing a host moves only the items it
/// probed; adding one takes about k/N of the items, each from one host.
pub fn probers(hosts: &[(String, u64)], item: u64, k: usize) -> Vec<&str> {
    let mut best: Vec<(u64, &str)> = Vec::with_capacity(k + 1);
    for (name, h) in hosts {
        let s = rendezvous_score(*h, item);
        // Highest score first; among equal scores the smaller name first.
        let pos = best
            .iter()
            .position(|(bs, bn)| s > *bs || (s == *bs && name.as_str() < *bn))
            .unwrap_or(best.len());
        if pos < k {
            best.insert(pos, (s, name.as_str()));
            best.truncate(k);
        }
    }
    best.into_iter().map(|(_, n)| n).collect()
}

/// Reads a [`Published`] value.
pub fn decode_published(key: &str, value: &[u8]) -> Result<Published, FleetError> {
    serde_json::from_slice(value).map_err(|e| FleetError::Malformed {
        key: key.to_string(),
        error: format!("not a configuration published by nlbctl: {e}"),
    })
}

/// Hosts of one revision that serve different tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// The revision.
    pub revision: i64,
    /// Each tables digest served on it, with its hosts.
    pub digests: Vec<DigestHosts>,
}

/// The hosts serving one tables digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DigestHosts {
    /// The digest (hex).
    pub digest: String,
    /// Its hosts, by name.
    pub hosts: Vec<String>,
}

/// Hosts serving the same revision with different tables, per such revision. ECMP spreads a
/// flow's packets over the hosts, so hosts of one revision must hold byte-identical tables
/// (SPEC R10.4, R11.1); hosts still on another revision are catching up, not a mismatch.
pub fn digest_mismatches(hosts: &[HostRecord]) -> Vec<Mismatch> {
    use std::collections::BTreeMap;
    let mut by_revision: BTreeMap<i64, BTreeMap<&str, Vec<String>>> = BTreeMap::new();
    for h in hosts {
        by_revision
            .entry(h.revision)
            .or_default()
            .entry(h.tables_digest.as_str())
            .or_default()
            .push(h.host.clone());
    }
    by_revision
        .into_iter()
        .filter(|(_, digests)| digests.len() > 1)
        .map(|(revision, digests)| Mismatch {
            revision,
            digests: digests
                .into_iter()
                .map(|(d, hosts)| DigestHosts {
                    digest: d.to_string(),
                    hosts,
                })
                .collect(),
        })
        .collect()
}

/// One line of a [`line_diff`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine<'a> {
    /// In both.
    Same(&'a str),
    /// Only in the old text.
    Removed(&'a str),
    /// Only in the new text.
    Added(&'a str),
}

/// The lines of `old` and `new` as a shortest edit (longest common subsequence), or None when
/// the texts are too large for the quadratic table (more than 16 Mi line pairs).
pub fn line_diff<'a>(old: &'a str, new: &'a str) -> Option<Vec<DiffLine<'a>>> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Common head and tail are kept out of the table.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    if ma.len().saturating_mul(mb.len()) > 16 * 1024 * 1024 {
        return None;
    }
    // lcs[i][j]: the longest common subsequence of ma[i..] and mb[j..].
    let w = mb.len() + 1;
    let mut lcs = vec![0u32; (ma.len() + 1) * w];
    for i in (0..ma.len()).rev() {
        for j in (0..mb.len()).rev() {
            lcs[i * w + j] = if ma[i] == mb[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let mut out: Vec<DiffLine> = a[..head].iter().map(|l| DiffLine::Same(l)).collect();
    let (mut i, mut j) = (0, 0);
    while i < ma.len() || j < mb.len() {
        if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
            out.push(DiffLine::Same(ma[i]));
            i += 1;
            j += 1;
        } else if i < ma.len() && (j == mb.len() || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            // Removals before additions, as diff -u prints a changed line.
            out.push(DiffLine::Removed(ma[i]));
            i += 1;
        } else {
            out.push(DiffLine::Added(mb[j]));
            j += 1;
        }
    }
    out.extend(a[a.len() - tail..].iter().map(|l| DiffLine::Same(l)));
    Some(out)
}

/// A unified diff (3 lines of context) of two texts, empty when they are equal.
pub fn unified_diff(old_name: &str, old: &str, new_name: &str, new: &str) -> String {
    use std::fmt::Write as _;
    let Some(lines) = line_diff(old, new) else {
        return format!(
            "--- {old_name}\n+++ {new_name}\n(too large to diff line by line: {} and {} lines)\n",
            old.lines().count(),
            new.lines().count()
        );
    };
    if lines.iter().all(|l| matches!(l, DiffLine::Same(_))) {
        return String::new();
    }
    const CONTEXT: usize = 3;
    let changed: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !matches!(l, DiffLine::Same(_)))
        .map(|(i, _)| i)
        .collect();
    // Hunks: runs of changes whose contexts touch.
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &c in &changed {
        let (lo, hi) = (
            c.saturating_sub(CONTEXT),
            (c + CONTEXT + 1).min(lines.len()),
        );
        match hunks.last_mut() {
            Some((_, end)) if lo <= *end => *end = hi,
            _ => hunks.push((lo, hi)),
        }
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    for (lo, hi) in hunks {
        // Line numbers (1-based) of the hunk's first line on each side.
        let before = &lines[..lo];
        let old_at = 1 + before
            .iter()
            .filter(|l| !matches!(l, DiffLine::Added(_)))
            .count();
        let new_at = 1 + before
            .iter()
            .filter(|l| !matches!(l, DiffLine::Removed(_)))
            .count();
        let hunk = &lines[lo..hi];
        let old_n = hunk
            .iter()
            .filter(|l| !matches!(l, DiffLine::Added(_)))
            .count();
        let new_n = hunk
            .iter()
            .filter(|l| !matches!(l, DiffLine::Removed(_)))
            .count();
        let _ = writeln!(out, "@@ -{old_at},{old_n} +{new_at},{new_n} @@");
        for l in hunk {
            let _ = match l {
                DiffLine::Same(s) => writeln!(out, " {s}"),
                DiffLine::Removed(s) => writeln!(out, "-{s}"),
                DiffLine::Added(s) => writeln!(out, "+{s}"),
            };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_end_in_a_slash() {
        let k = Keys::new("/lb").unwrap();
        assert_eq!(k.config(), "/lb/config");
        assert_eq!(k.host("a"), "/lb/hosts/a");
        assert_eq!(Keys::new("/nlb/").unwrap().hosts(), "/nlb/hosts/");
        assert!(Keys::new("").is_err());
        assert!(Keys::new("/a b/").is_err());
    }

    #[test]
    fn only_an_election_in_progress_is_waited_for() {
        // The two messages etcd's server returns while it has no leader (etcdserver's
        // ErrLeaderChanged and ErrNoLeader, both gRPC Unavailable).
        for m in ["etcdserver: leader changed", "etcdserver: no leader"] {
            let e = etcd_client::Error::GRpcStatus(tonic::Status::unavailable(m));
            assert!(is_election(&e), "{m}");
        }
        // A member that is down, a timeout, or a refusal is not an election.
        let others = [
            etcd_client::Error::GRpcStatus(tonic::Status::unavailable("tcp connect error")),
            etcd_client::Error::GRpcStatus(tonic::Status::deadline_exceeded("timeout")),
            etcd_client::Error::GRpcStatus(tonic::Status::failed_precondition(
                "etcdserver: leader changed",
            )),
            etcd_client::Error::InvalidArgs("no leader".into()),
        ];
        for e in &others {
            assert!(!is_election(e), "{e}");
        }
    }

    #[test]
    fn endpoints_are_http_urls() {
        assert_eq!(
            parse_endpoints("127.0.0.1:2379, http://e2:2380").unwrap(),
            ["http://127.0.0.1:2379", "http://e2:2380"]
        );
        for bad in [
            "",
            "127.0.0.1",
            "h:0",
            "h:70000",
            "https://h:1",
            "h:1/x",
            ":5",
        ] {
            assert!(parse_endpoints(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_classify() {
        let k = Keys::new("/nlb/").unwrap();
        assert_eq!(k.classify("/nlb/config"), KeyKind::Config);
        assert_eq!(k.classify("/nlb/hosts/h1"), KeyKind::Host("h1"));
        assert_eq!(
            k.classify(&k.health_report("web", "b1", "h2")),
            KeyKind::Health {
                pool: "web",
                backend: "b1",
                host: "h2"
            }
        );
        for other in [
            "/nlb/hosts/",
            "/nlb/health/web/b1",
            "/nlb/health/a//c",
            "/x/config",
            "/nlb/configs",
        ] {
            assert_eq!(k.classify(other), KeyKind::Other, "{other}");
        }
    }

    fn hosts(n: usize) -> Vec<(String, u64)> {
        (0..n)
            .map(|i| {
                let name = format!("nlb-{i}");
                let h = rendezvous_hash(&name);
                (name, h)
            })
            .collect()
    }

    #[test]
    fn rendezvous_picks_k_distinct_hosts_whatever_their_order() {
        let mut hs = hosts(7);
        for item in 0..200u64 {
            let item = rendezvous_hash(&format!("tcp://10.0.{}.{}:80", item / 250, item % 250));
            let p: Vec<String> = probers(&hs, item, 2)
                .into_iter()
                .map(String::from)
                .collect();
            assert_eq!(p.len(), 2);
            assert_ne!(p[0], p[1]);
            hs.reverse();
            assert_eq!(probers(&hs, item, 2), p);
        }
        // Fewer hosts than k: all of them.
        assert_eq!(probers(&hosts(1), 5, 2), ["nlb-0"]);
        assert!(probers(&[], 5, 2).is_empty());
        // A fixed value: the hash must not change between builds or hosts of one fleet.
        assert_eq!(
            rendezvous_hash(""),
            crate::splitmix::mix(0xcbf2_9ce4_8422_2325)
        );
    }

    #[test]
    fn losing_a_host_moves_only_its_items_and_load_is_even() {
        let (n, items, k) = (10, 20_000u64, 2);
        let all = hosts(n);
        let lost = "nlb-3";
        let rest: Vec<(String, u64)> = all.iter().filter(|(h, _)| h != lost).cloned().collect();
        let mut load: std::collections::BTreeMap<&str, usize> = Default::default();
        for i in 0..items {
            let item = rendezvous_hash(&format!("item-{i}"));
            let before = probers(&all, item, k);
            let after = probers(&rest, item, k);
            for h in &before {
                *load.entry(h).or_default() += 1;
            }
            if before.contains(&lost) {
                // The survivor keeps its place; one new host takes the lost one's.
                let kept: Vec<&str> = before.iter().copied().filter(|h| *h != lost).collect();
                assert!(
                    kept.iter().all(|h| after.contains(h)),
                    "{before:?} {after:?}"
                );
            } else {
                assert_eq!(before, after, "an item the lost host did not probe moved");
            }
        }
        // k × items / n each, within 5% (binomial: σ ≈ 0.7% here).
        let fair = (k as u64 * items) as f64 / n as f64;
        for (h, l) in load {
            assert!((l as f64 - fair).abs() < fair * 0.05, "{h}: {l} vs {fair}");
        }
    }

    #[test]
    fn host_names() {
        assert!(check_host_name("nlb-1.zone_a").is_ok());
        for bad in ["", "a/b", "a b", "é"] {
            assert!(check_host_name(bad).is_err(), "{bad}");
        }
    }

    fn host(name: &str, revision: i64, digest: &str) -> HostRecord {
        HostRecord {
            host: name.into(),
            revision,
            tables_digest: digest.into(),
            config_digest: String::new(),
            profile: "sim".into(),
            generation: 1,
            probing: 0,
            refused: None,
            updated_unix_ms: 0,
        }
    }

    #[test]
    fn a_mismatch_is_two_digests_on_one_revision() {
        // Another revision with another digest is a host catching up, not a mismatch.
        let hosts = [host("a", 5, "x"), host("b", 5, "x"), host("c", 4, "y")];
        assert!(digest_mismatches(&hosts).is_empty());
        let hosts = [host("a", 5, "x"), host("b", 5, "z"), host("c", 5, "x")];
        let hosts_of = |d: &str, h: &[&str]| DigestHosts {
            digest: d.into(),
            hosts: h.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(
            digest_mismatches(&hosts),
            [Mismatch {
                revision: 5,
                digests: vec![hosts_of("x", &["a", "c"]), hosts_of("z", &["b"])]
            }]
        );
    }

    #[test]
    fn unified_diff_by_hand() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni\n";
        // Worked by hand and what GNU `diff -u` prints for the same files: d → D at line 4, i
        // added after h (line 9); contexts 1-7 and 5-9
        // touch, so one hunk from line 1 to the end.
        assert_eq!(
            unified_diff("old", old, "new", new),
            "--- old\n+++ new\n@@ -1,8 +1,9 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n h\n+i\n"
        );
        assert_eq!(unified_diff("o", old, "n", old), "");
        let many: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let edited = many.replace("2\n", "two\n").replacen("19\n", "", 1);
        // "2\n" also matches inside "12\n": the replace makes 2 → two and 12 → 1two.
        assert_eq!(
            unified_diff("o", &many, "n", &edited),
            "--- o\n+++ n\n@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n\
             @@ -9,12 +9,11 @@\n 9\n 10\n 11\n-12\n+1two\n 13\n 14\n 15\n 16\n 17\n 18\n-19\n 20\n"
        );
    }
}
