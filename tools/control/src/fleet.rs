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
//! - `PREFIX drain/NAME`: host NAME is drained (`nlbctl drain`), a JSON [`DrainRequest`]; no
//!   lease: a drain outlives the host's restarts until `nlbctl drain --undo` deletes it.
//! - `PREFIX upgrade/NAME`: the nlbd executable or the bitstream host NAME is to run (`nlbctl
//!   fleet upgrade --binary` or `--bitstream`), a JSON [`UpgradeOrder`], with the host's answer
//!   in it; no lease.
//! - `PREFIX pinned/HOST/N`: part N (from 0) of the connections host HOST tracks on a backend
//!   the tables no longer choose for them (SPEC R15.2), a JSON [`PinnedChunk`], with HOST's
//!   lease. Every other host installs them, so that ECMP may move them anywhere.
//!
//! Any other key under the prefix, and a value under one of these that does not decode, is
//! reported ([`KeyProblem`]) and skipped: it never stops a reader (`nlbctl fleet status`, an
//! `nlbd` session), and `nlbctl publish` replaces whatever `config` holds.
//!
//! `nlbctl publish` and `nlbctl fleet status` (blocking) and `nlbd --etcd` (from its runtime's
//! blocking threads) share this module; etcd is reached with [`crate::etcd`].

use crate::etcd;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::etcd::{ELECTION_WAIT, REQUEST_TIMEOUT};

/// The prefix of the fleet's keys unless `--prefix` says otherwise.
pub const DEFAULT_PREFIX: &str = "/nlb/";

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

    /// Host `name`'s drain.
    pub fn drain(&self, name: &str) -> String {
        format!("{}drain/{name}", self.prefix)
    }

    /// Host `name`'s upgrade order.
    pub fn upgrade(&self, name: &str) -> String {
        format!("{}upgrade/{name}", self.prefix)
    }

    /// The prefix of host `name`'s pinned connections.
    pub fn pinned_of(&self, name: &str) -> String {
        format!("{}pinned/{name}/", self.prefix)
    }

    /// Part `chunk` of host `name`'s pinned connections.
    pub fn pinned(&self, name: &str, chunk: u32) -> String {
        format!("{}pinned/{name}/{chunk}", self.prefix)
    }

    /// What a key under the prefix is.
    pub fn classify<'k>(&self, key: &'k str) -> KeyKind<'k> {
        let Some(rest) = key.strip_prefix(self.prefix.as_str()) else {
            return KeyKind::Other;
        };
        if rest == "config" {
            return KeyKind::Config;
        }
        for (dir, kind) in [
            ("hosts/", KeyKind::Host as fn(&'k str) -> KeyKind<'k>),
            ("drain/", KeyKind::Drain),
            ("upgrade/", KeyKind::Upgrade),
        ] {
            if let Some(name) = rest.strip_prefix(dir) {
                if !name.is_empty() && !name.contains('/') {
                    return kind(name);
                }
            }
        }
        if let Some(r) = rest.strip_prefix("pinned/") {
            if let Some((host, chunk)) = r.split_once('/') {
                // The part's number as written: decimal, no sign, no leading zero.
                let canonical = chunk.bytes().all(|b| b.is_ascii_digit())
                    && (chunk == "0" || !chunk.starts_with('0'));
                if let (false, true, Ok(chunk)) = (host.is_empty(), canonical, chunk.parse()) {
                    return KeyKind::Pinned { host, chunk };
                }
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
    /// `PREFIX drain/NAME`.
    Drain(&'k str),
    /// `PREFIX upgrade/NAME`.
    Upgrade(&'k str),
    /// `PREFIX health/POOL/BACKEND/HOST`.
    Health {
        /// The pool.
        pool: &'k str,
        /// The backend (instance).
        backend: &'k str,
        /// The prober.
        host: &'k str,
    },
    /// `PREFIX pinned/HOST/N`.
    Pinned {
        /// The host tracking them.
        host: &'k str,
        /// The part.
        chunk: u32,
    },
    /// Anything else.
    Other,
}

/// Pinned connections per `PREFIX pinned/HOST/N` key: about 100 bytes of JSON each, so a part
/// stays well under etcd's default request limit (1.5 MiB).
pub const PINNED_PER_KEY: usize = 8192;

/// One connection a host tracks on a backend the tables serving no longer choose for it (a
/// backend was added, a weight changed, its backend turned unhealthy and the pool keeps such
/// connections): by names, which mean the same on every host of the revision.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PinnedConnection {
    /// IP protocol number.
    pub protocol: u8,
    /// The client's address and port (port 0 for a portless protocol).
    pub client: std::net::SocketAddr,
    /// The VIP and its port.
    pub vip: std::net::SocketAddr,
    /// The forwarding rule.
    pub rule: String,
    /// The backend (instance) the connection stays on.
    pub backend: String,
}

/// Part of one host's pinned connections (`PREFIX pinned/HOST/N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedChunk {
    /// The host tracking them.
    pub host: String,
    /// The fleet revision the host served when it wrote them.
    pub revision: i64,
    /// The connections.
    pub connections: Vec<PinnedConnection>,
}

/// A host's pinned connections as the values of its keys, [`PINNED_PER_KEY`] to a key, in
/// connection order (the same set always gives the same values: only changed parts are
/// written).
pub fn pinned_chunks(host: &str, revision: i64, mut conns: Vec<PinnedConnection>) -> Vec<Vec<u8>> {
    conns.sort();
    conns
        .chunks(PINNED_PER_KEY)
        .map(|c| {
            serde_json::to_vec(&PinnedChunk {
                host: host.to_string(),
                revision,
                connections: c.to_vec(),
            })
            .unwrap_or_default()
        })
        .collect()
}

/// A part of `name`'s pinned connections, checked against its key's name.
fn decode_pinned(name: &str, value: &[u8]) -> Result<PinnedChunk, String> {
    let c: PinnedChunk =
        serde_json::from_slice(value).map_err(|e| format!("not pinned connections: {e}"))?;
    if c.host != name {
        return Err(format!(
            "not pinned connections: they name host `{}`, their key `{name}`",
            c.host
        ));
    }
    Ok(c)
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The routes its BGP neighbours have from it now (SPEC R15.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub announced: Vec<String>,
    /// Why it announces nothing, when it does not (`nlbctl status` says the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
    /// It is drained (`PREFIX drain/NAME`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
    /// While drained: packets its NIC matched to a forwarding rule since nlbd started (what
    /// `nlbctl drain` waits to see stand still).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip_packets: Option<u64>,
    /// SHA-256 (hex) of the nlbd executable running.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub binary_sha256: String,
    /// The build id of the image the card runs (its firmware-ID block's `build_id`: the
    /// bitstream's USR_ACCESS word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<u32>,
    /// Its pinned connections' sharing (SPEC R15.2), for `nlbctl drain` to wait on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedProgress>,
    /// When the record was written (milliseconds since the Unix epoch, the host's clock).
    pub updated_unix_ms: u64,
}

/// How far a host is with sharing pinned connections (`PREFIX pinned/...`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedProgress {
    /// Its own pinned connections, as published.
    pub own: u64,
    /// The tables digest they were found for (its `tables_digest` once they are up to date).
    pub tables_digest: String,
    /// The store revision of its last write or delete under `PREFIX pinned/HOST/` (0: none).
    pub written_revision: i64,
    /// The store revision up to which it installed every host's pinned connections.
    pub mirrored_revision: i64,
    /// The tables of its last change (their digest), prepared or loaded since: before it
    /// loads them it publishes the connections they would pin beside those its tables pin,
    /// and it loads them once every host is as far ([`tables_prepared`]). None before its
    /// first change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<String>,
    /// The store revision after it published that (0: nothing to write).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prepared_revision: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Whether every host serves the `live` revision, shares its pinned connections for the
/// tables it serves, and installed every other host's: Err names the first host that is
/// behind. A drain waits for this (ECMP then moves connections among all the others). Hosts
/// whose nlbd does not share (no progress in their record) are skipped.
pub fn pinned_shared(hosts: &[HostRecord], live: i64) -> Result<(), String> {
    for h in hosts.iter().filter(|h| h.pinned.is_some()) {
        if h.revision != live {
            return Err(format!(
                "{} serves revision {}, not the live {live} yet",
                h.host, h.revision
            ));
        }
    }
    let sharing = sharing_hosts(hosts);
    for (host, p, digest) in &sharing {
        if p.tables_digest != *digest {
            return Err(format!(
                "{host} has not published its pinned connections for its tables yet"
            ));
        }
    }
    all_installed(&sharing)
}

/// The hosts that share pinned connections: name, progress, tables digest.
fn sharing_hosts(hosts: &[HostRecord]) -> Vec<(&str, &PinnedProgress, &str)> {
    hosts
        .iter()
        .filter_map(|h| {
            Some((
                h.host.as_str(),
                h.pinned.as_ref()?,
                h.tables_digest.as_str(),
            ))
        })
        .collect()
}

/// Whether every sharing host installed every other host's latest write.
fn all_installed(sharing: &[(&str, &PinnedProgress, &str)]) -> Result<(), String> {
    let newest = sharing.iter().map(|(_, p, _)| p.written_revision).max();
    for (host, p, _) in sharing {
        let behind = sharing
            .iter()
            .find(|(other, o, _)| other != host && o.written_revision > p.mirrored_revision);
        if let Some((other, _, _)) = behind {
            return Err(format!(
                "{host} has not installed {other}'s pinned connections yet (it is at store revision {}, of {})",
                p.mirrored_revision,
                newest.unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// Whether a host may load the tables of digest `digest` (make-before-break, SPEC R15.2):
/// every sharing host has prepared them (published what they would pin beside what its tables
/// pin: `prepared`) or serves them already, and every one installed every other host's
/// publication of that (`prepared_revision`). Until then a connection one host holds on a
/// backend the new tables no longer choose could reach another host, moved by ECMP, before
/// its copy. Hosts that refused revision `revision` (the one the tables belong to), or serve
/// a newer one, serve other tables whatever happens: they are not waited for to prepare
/// (their installing is). Err names the first host that is behind.
pub fn tables_prepared(hosts: &[HostRecord], digest: &str, revision: i64) -> Result<(), String> {
    let sharing = sharing_hosts(hosts);
    let elsewhere = |h: &HostRecord| {
        h.revision > revision || h.refused.as_ref().is_some_and(|r| r.revision == revision)
    };
    let mut published: Vec<(&str, i64)> = Vec::new();
    for h in hosts.iter().filter(|h| h.pinned.is_some() && !elsewhere(h)) {
        let Some(p) = &h.pinned else { continue };
        if p.prepared.as_deref() == Some(digest) {
            published.push((h.host.as_str(), p.prepared_revision));
        } else if h.tables_digest != digest {
            return Err(format!(
                "{} has not prepared tables {} yet",
                h.host,
                short_digest(digest)
            ));
        }
    }
    for (host, p, _) in &sharing {
        let behind = published
            .iter()
            .find(|(other, at)| other != host && *at > p.mirrored_revision);
        if let Some((other, at)) = behind {
            return Err(format!(
                "{host} has not installed what {other} published for them yet (it is at store revision {}, of {at})",
                p.mirrored_revision
            ));
        }
    }
    Ok(())
}

/// `PREFIX upgrade/NAME`: written by `nlbctl fleet upgrade`, answered by host NAME
/// (docs/fleet.md, "Rolling upgrades").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeOrder {
    /// Unique per run of `nlbctl fleet upgrade`.
    pub id: String,
    /// What is replaced: nlbd, or the card's bitstream.
    #[serde(default)]
    pub kind: UpgradeKind,
    /// The file (the executable or the bitstream), by the path every host sees it at. Kept
    /// as `binary` in the key, the name an nlbd from before bitstream upgrades reads (such a
    /// host refuses a bitstream order: the file does not run as nlbd).
    #[serde(rename = "binary", alias = "file")]
    pub file: String,
    /// Its SHA-256 (hex): the host refuses a file with another.
    pub sha256: String,
    /// For a bitstream: its USR_ACCESS word, the build id the card reports once it runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<u32>,
    /// The host's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<UpgradeResult>,
}

/// What an [`UpgradeOrder`] replaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpgradeKind {
    /// The nlbd executable (`--binary`): nlbd executes the new file in its place.
    #[default]
    Binary,
    /// The card's bitstream (`--bitstream`): nlbd writes it into the card's user flash slot,
    /// reboots the card into it, and starts again to load the fleet's tables.
    Bitstream,
}

/// A host's answer to an [`UpgradeOrder`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeResult {
    /// It runs the new file (true), or not (false).
    pub ok: bool,
    /// When not `ok`: the host was changed all the same (a card rebooted into an image that
    /// failed), so it must stay drained; false: nothing changed on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed: bool,
    /// What happened, in words.
    pub message: String,
    /// When (milliseconds since the Unix epoch, the host's clock).
    pub at_unix_ms: u64,
}

/// SHA-256 (hex) of `bytes`.
pub fn bytes_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

/// SHA-256 (hex) of the file at `path`.
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// `PREFIX drain/NAME`: the host announces nothing until the key goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRequest {
    /// When it was asked for (milliseconds since the Unix epoch, the asker's clock).
    pub requested_unix_ms: u64,
    /// Who asked (`nlbctl drain` and the user running it).
    pub by: String,
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
    /// etcd answered with a refusal (authentication, permissions, a lease it does not know).
    #[error("etcd at {endpoints} refused the request: {error}")]
    Refused {
        /// The endpoints tried.
        endpoints: String,
        /// etcd's message.
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

impl FleetError {
    fn of(endpoints: &str, f: etcd::Failure) -> FleetError {
        if f.refused() {
            FleetError::Refused {
                endpoints: endpoints.to_string(),
                error: f.to_string(),
            }
        } else {
            FleetError::Unreachable {
                endpoints: endpoints.to_string(),
                error: f.to_string(),
            }
        }
    }
}

/// `--etcd`: comma-separated `HOST:PORT` or `http://HOST:PORT` (plain HTTP; see
/// [`etcd::EtcdArgs`] for TLS and authentication).
pub fn parse_endpoints(list: &str) -> Result<Vec<etcd::Endpoint>, String> {
    etcd::parse_endpoints(list, false)
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

/// The first 12 characters of a digest, for tables and messages (whatever the text: a
/// record written by hand may hold anything).
pub fn short_digest(digest: &str) -> &str {
    digest
        .char_indices()
        .nth(12)
        .map_or(digest, |(i, _)| &digest[..i])
}

/// The live configuration: its revision (the key's `mod_revision`) and what it holds, or why
/// it is not a configuration `nlbctl publish` stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// The revision.
    pub revision: i64,
    /// The configuration, or why the value is not one.
    pub published: Result<Published, String>,
}

/// A key under the fleet's prefix that is not what nlbctl and nlbd write (an unknown key, or
/// a value that does not decode): reported and skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyProblem {
    /// The key (as text, non-UTF-8 bytes replaced).
    pub key: String,
    /// What is wrong with it.
    pub problem: String,
}

/// What one key under the prefix holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'k> {
    /// `PREFIX config`: a configuration, or why the value is not one.
    Config(Result<Published, String>),
    /// `PREFIX hosts/NAME`: NAME's record, or why the value is not one.
    Host(&'k str, Result<HostRecord, String>),
    /// `PREFIX drain/NAME`: NAME's drain, or why the value is not one.
    Drain(&'k str, Result<DrainRequest, String>),
    /// `PREFIX upgrade/NAME`: NAME's upgrade order, or why the value is not one.
    Upgrade(&'k str, Result<UpgradeOrder, String>),
    /// `PREFIX health/POOL/BACKEND/HOST`: the report, or why the value is not one.
    Health {
        /// The pool.
        pool: &'k str,
        /// The backend.
        backend: &'k str,
        /// The prober.
        host: &'k str,
        /// The report.
        report: Result<HealthReport, String>,
    },
    /// `PREFIX pinned/HOST/N`: the part, or why the value is not one.
    Pinned {
        /// The host tracking them.
        host: &'k str,
        /// The part.
        chunk: u32,
        /// The connections.
        set: Result<PinnedChunk, String>,
    },
    /// Under the prefix, but no key nlbctl or nlbd writes.
    Unknown,
    /// Not under the prefix.
    Outside,
}

impl Entry<'_> {
    /// Why the key or its value is not what nlbctl and nlbd write; None when it is (or when it
    /// is outside the prefix).
    pub fn problem(&self, keys: &Keys) -> Option<String> {
        match self {
            Entry::Config(Err(e))
            | Entry::Host(_, Err(e))
            | Entry::Drain(_, Err(e))
            | Entry::Upgrade(_, Err(e)) => Some(e.clone()),
            Entry::Health { report: Err(e), .. } => Some(e.clone()),
            Entry::Pinned { set: Err(e), .. } => Some(e.clone()),
            Entry::Unknown => Some(format!(
                "not a key nlbctl or nlbd writes (valid under {p}: {p}config, {p}hosts/NAME, {p}health/POOL/BACKEND/HOST, {p}drain/NAME, {p}upgrade/NAME, {p}pinned/NAME/N)",
                p = keys.prefix()
            )),
            _ => None,
        }
    }
}

/// Whether a digest is one this module writes: SHA-256 as lower-case hex.
fn is_digest(d: &str) -> bool {
    d.len() == 64
        && d.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A host's record, checked against its key's name.
fn decode_host(name: &str, value: &[u8]) -> Result<HostRecord, String> {
    let r: HostRecord =
        serde_json::from_slice(value).map_err(|e| format!("not a host record: {e}"))?;
    if r.host != name {
        return Err(format!(
            "not a host record: it names host `{}`, its key `{name}`",
            r.host
        ));
    }
    if !is_digest(&r.tables_digest) {
        return Err("not a host record: its tables_digest is not a SHA-256 in hex".into());
    }
    Ok(r)
}

impl Keys {
    /// What `key` holds, its value decoded and checked.
    pub fn entry<'k>(&self, key: &'k str, value: &[u8]) -> Entry<'k> {
        match self.classify(key) {
            KeyKind::Config => Entry::Config(decode_published(key, value).map_err(|e| match e {
                FleetError::Malformed { error, .. } => error,
                e => e.to_string(),
            })),
            KeyKind::Host(name) => Entry::Host(name, decode_host(name, value)),
            KeyKind::Drain(name) => Entry::Drain(
                name,
                serde_json::from_slice(value).map_err(|e| format!("not a drain request: {e}")),
            ),
            KeyKind::Upgrade(name) => Entry::Upgrade(
                name,
                serde_json::from_slice(value).map_err(|e| format!("not an upgrade order: {e}")),
            ),
            KeyKind::Health {
                pool,
                backend,
                host,
            } => Entry::Health {
                pool,
                backend,
                host,
                report: serde_json::from_slice(value)
                    .map_err(|e| format!("not a health report: {e}")),
            },
            KeyKind::Pinned { host, chunk } => Entry::Pinned {
                host,
                chunk,
                set: decode_pinned(host, value),
            },
            KeyKind::Other if key.starts_with(self.prefix.as_str()) => Entry::Unknown,
            KeyKind::Other => Entry::Outside,
        }
    }
}

/// Everything under the prefix at one revision, sorted out: what `nlbctl fleet status`
/// shows and what an `nlbd` session starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// The store's revision of the read.
    pub revision: i64,
    /// The configuration, when the key exists.
    pub live: Option<Live>,
    /// Host records that decode, with their leases, by host name.
    pub hosts: Vec<(HostRecord, i64)>,
    /// Health reports that decode: (pool, backend, prober, report).
    pub reports: Vec<(String, String, String, HealthReport)>,
    /// Drained hosts.
    pub drains: Vec<(String, DrainRequest)>,
    /// Upgrade orders by host.
    pub upgrades: Vec<(String, UpgradeOrder)>,
    /// Pinned connections that decode: (host, part, connections).
    pub pinned: Vec<(String, u32, PinnedChunk)>,
    /// Keys that are not what nlbctl and nlbd write, in key order.
    pub problems: Vec<KeyProblem>,
}

/// Sorts out the keys of one read of the prefix.
pub fn survey(keys: &Keys, revision: i64, kvs: &[etcd::KeyValue]) -> Survey {
    let mut s = Survey {
        revision,
        ..Survey::default()
    };
    for kv in kvs {
        let key = String::from_utf8_lossy(&kv.key);
        let entry = keys.entry(&key, &kv.value);
        if let Some(problem) = entry.problem(keys) {
            s.problems.push(KeyProblem {
                key: key.to_string(),
                problem,
            });
        }
        match entry {
            Entry::Config(published) => {
                s.live = Some(Live {
                    revision: kv.mod_revision,
                    published,
                })
            }
            Entry::Host(_, Ok(record)) => s.hosts.push((record, kv.lease)),
            Entry::Drain(name, Ok(d)) => s.drains.push((name.to_string(), d)),
            Entry::Upgrade(name, Ok(u)) => s.upgrades.push((name.to_string(), u)),
            Entry::Pinned {
                host,
                chunk,
                set: Ok(set),
            } => s.pinned.push((host.to_string(), chunk, set)),
            Entry::Health {
                pool,
                backend,
                host,
                report: Ok(report),
            } => s.reports.push((
                pool.to_string(),
                backend.to_string(),
                host.to_string(),
                report,
            )),
            _ => {}
        }
    }
    s.hosts.sort_by(|a, b| a.0.host.cmp(&b.0.host));
    s
}

/// Host records that decode with their leases, and the keys under `PREFIX hosts/` that are
/// not records.
pub type HostRecords = (Vec<(HostRecord, i64)>, Vec<KeyProblem>);

/// The fleet's store: its keys in one etcd (cheap to clone; clones share the client).
#[derive(Debug, Clone)]
pub struct Store {
    etcd: etcd::Client,
    /// The fleet's keys.
    pub keys: Keys,
}

impl Store {
    /// The store in the etcd `settings` reach (nothing is connected until the first request).
    pub fn new(settings: etcd::Settings, keys: Keys) -> Store {
        Store {
            etcd: etcd::Client::new(settings),
            keys,
        }
    }

    /// The endpoints, comma-separated.
    pub fn endpoints(&self) -> &str {
        self.etcd.endpoints()
    }

    /// The etcd client (leases and watches).
    pub fn etcd(&self) -> &etcd::Client {
        &self.etcd
    }

    /// An etcd failure as a [`FleetError`].
    pub fn error(&self, f: etcd::Failure) -> FleetError {
        FleetError::of(self.etcd.endpoints(), f)
    }

    /// The live configuration (None when nothing was published), with the store's revision
    /// at the read. A value that is not a configuration is returned as such: publishing
    /// replaces it.
    pub fn live(&self) -> Result<(Option<Live>, i64), FleetError> {
        let key = self.keys.config();
        let r = self
            .etcd
            .range(key.as_bytes(), b"")
            .map_err(|f| self.error(f))?;
        let live = r.kvs.first().map(|kv| Live {
            revision: kv.mod_revision,
            published: decode_published(&key, &kv.value).map_err(|e| match e {
                FleetError::Malformed { error, .. } => error,
                e => e.to_string(),
            }),
        });
        Ok((live, r.revision))
    }

    /// Every key under the prefix at one revision, sorted out.
    pub fn survey(&self) -> Result<Survey, FleetError> {
        let prefix = self.keys.prefix().as_bytes();
        let r = self
            .etcd
            .range(prefix, &etcd::prefix_end(prefix))
            .map_err(|f| self.error(f))?;
        Ok(survey(&self.keys, r.revision, &r.kvs))
    }

    /// Stores `p` as the new revision if the live one is still `expected` (0: nothing live);
    /// `Ok(Err(now))` when it changed in between (`now`: its revision, 0 when deleted).
    /// Whatever the live value holds, a configuration or not, it is replaced.
    pub fn publish(&self, p: &Published, expected: i64) -> Result<Result<i64, i64>, FleetError> {
        let key = self.keys.config();
        let value = serde_json::to_vec(p).map_err(|e| FleetError::Malformed {
            key: key.clone(),
            error: e.to_string(),
        })?;
        // Sent again (to another member, or after an election) only when no answer came;
        // had an earlier attempt applied the put, the compare fails now and the live value
        // is ours byte for byte (it carries the publish time), which counts as published.
        match self
            .etcd
            .put_if_mod_revision(key.as_bytes(), &value, expected)
            .map_err(|f| self.error(f))?
        {
            etcd::Swap::Done(revision) => Ok(Ok(revision)),
            etcd::Swap::Changed(Some(kv)) if kv.value == value => Ok(Ok(kv.mod_revision)),
            etcd::Swap::Changed(Some(kv)) => Ok(Err(kv.mod_revision)),
            etcd::Swap::Changed(None) => Ok(Err(0)),
        }
    }

    /// Every host's record that decodes, with the lease its key is attached to, by host name;
    /// and the keys under `PREFIX hosts/` that are not records.
    pub fn host_records(&self) -> Result<HostRecords, FleetError> {
        let prefix = self.keys.hosts();
        let r = self
            .etcd
            .range(prefix.as_bytes(), &etcd::prefix_end(prefix.as_bytes()))
            .map_err(|f| self.error(f))?;
        let s = survey(&self.keys, r.revision, &r.kvs);
        Ok((s.hosts, s.problems))
    }

    /// The lease's seconds left and granted TTL (None when etcd no longer knows it, or for
    /// lease 0).
    pub fn lease_ttl(&self, lease: i64) -> Result<Option<(i64, i64)>, FleetError> {
        if lease == 0 {
            return Ok(None);
        }
        self.etcd
            .lease_time_to_live(lease)
            .map_err(|f| self.error(f))
    }

    /// Records with their leases' time to live.
    pub fn with_leases(&self, hosts: Vec<(HostRecord, i64)>) -> Result<Vec<HostEntry>, FleetError> {
        hosts
            .into_iter()
            .map(|(record, lease)| {
                Ok(HostEntry {
                    lease_ttl: self.lease_ttl(lease)?,
                    record,
                    lease,
                })
            })
            .collect()
    }

    /// Puts `value` at `key` with `lease`.
    pub fn put(&self, key: &str, value: &[u8], lease: i64) -> Result<(), FleetError> {
        self.etcd
            .put(key.as_bytes(), value, lease)
            .map(drop)
            .map_err(|f| self.error(f))
    }

    /// Puts `value` at `key` (with `lease` unless 0); the store's revision after it.
    pub fn put_at(&self, key: &str, value: &[u8], lease: i64) -> Result<i64, FleetError> {
        self.etcd
            .put(key.as_bytes(), value, lease)
            .map_err(|f| self.error(f))
    }

    /// The value at `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, FleetError> {
        let r = self
            .etcd
            .range(key.as_bytes(), b"")
            .map_err(|f| self.error(f))?;
        Ok(r.kvs.into_iter().next().map(|kv| kv.value))
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &str) -> Result<(), FleetError> {
        self.etcd
            .delete(key.as_bytes())
            .map(drop)
            .map_err(|f| self.error(f))
    }

    /// A lease of `ttl` seconds.
    pub fn grant(&self, ttl: i64) -> Result<i64, FleetError> {
        self.etcd.lease_grant(ttl).map_err(|f| self.error(f))
    }

    /// Keeps `lease` alive; an error when it expired.
    pub fn keep_alive(&self, lease: i64) -> Result<(), FleetError> {
        let ttl = self
            .etcd
            .lease_keep_alive(lease)
            .map_err(|f| self.error(f))?;
        if ttl <= 0 {
            return Err(FleetError::Unreachable {
                endpoints: self.endpoints().to_string(),
                error: format!("lease {lease} expired"),
            });
        }
        Ok(())
    }

    /// Watches the whole prefix from `start_revision` (see [`etcd::Client::watch`]).
    pub fn watch(
        &self,
        start_revision: i64,
        sink: impl FnMut(etcd::WatchMessage) -> bool + Send + 'static,
    ) -> Result<etcd::Watch, FleetError> {
        let prefix = self.keys.prefix().as_bytes();
        self.etcd
            .watch(prefix, &etcd::prefix_end(prefix), start_revision, sink)
            .map_err(|f| self.error(f))
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

    /// An order written before bitstream upgrades existed (no `kind`) is an nlbd
    /// executable's, and the path keeps its old name, so hosts and nlbctl of either version
    /// read each other's orders.
    #[test]
    fn upgrade_orders_of_both_kinds_decode() {
        let old: UpgradeOrder = serde_json::from_str(
            r#"{"id":"1-2","binary":"/opt/nlbd","sha256":"ab","result":{"ok":false,"message":"no","at_unix_ms":3}}"#,
        )
        .unwrap();
        assert_eq!(old.kind, UpgradeKind::Binary);
        assert_eq!(old.file, "/opt/nlbd");
        assert_eq!(old.build_id, None);
        assert!(!old.result.unwrap().changed);
        let new = UpgradeOrder {
            id: "1-3".into(),
            kind: UpgradeKind::Bitstream,
            file: "/opt/nlb_top.bit".into(),
            sha256: "cd".into(),
            build_id: Some(0x0B17_0002),
            result: None,
        };
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains(r#""kind":"bitstream""#), "{text}");
        // The path keeps the name older hosts read.
        assert!(text.contains(r#""binary":"/opt/nlb_top.bit""#), "{text}");
        assert_eq!(serde_json::from_str::<UpgradeOrder>(&text).unwrap(), new);
    }

    #[test]
    fn keys_classify() {
        let k = Keys::new("/nlb/").unwrap();
        assert_eq!(k.classify("/nlb/config"), KeyKind::Config);
        assert_eq!(k.classify("/nlb/hosts/h1"), KeyKind::Host("h1"));
        assert_eq!(k.classify("/nlb/drain/h1"), KeyKind::Drain("h1"));
        assert_eq!(k.classify("/nlb/upgrade/h1"), KeyKind::Upgrade("h1"));
        assert_eq!(k.classify("/nlb/drain/h1/x"), KeyKind::Other);
        assert_eq!(
            k.classify(&k.pinned("h2", 12)),
            KeyKind::Pinned {
                host: "h2",
                chunk: 12
            }
        );
        for other in [
            "/nlb/pinned/h2",
            "/nlb/pinned//0",
            "/nlb/pinned/h2/01",
            "/nlb/pinned/h2/x",
            "/nlb/pinned/h2/-1",
            "/nlb/pinned/h2/+1",
            "/nlb/pinned/h2/0/1",
        ] {
            assert_eq!(k.classify(other), KeyKind::Other, "{other}");
        }
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

    /// A host's pinned connections cut into parts decode back whole, in order; a part under
    /// another host's key is refused.
    #[test]
    fn pinned_parts_round_trip() {
        let k = Keys::new("/nlb/").unwrap();
        let conns: Vec<PinnedConnection> = (0..PINNED_PER_KEY as u32 + 5)
            .rev()
            .map(|i| PinnedConnection {
                protocol: 6,
                client: std::net::SocketAddr::from((
                    std::net::Ipv4Addr::from(0x0a00_0000 + i),
                    40000,
                )),
                vip: "[2001:db8::80]:443".parse().unwrap(),
                rule: "web".into(),
                backend: format!("b{}", i % 3),
            })
            .collect();
        let parts = pinned_chunks("h1", 7, conns.clone());
        assert_eq!(parts.len(), 2);
        let mut back = Vec::new();
        for (n, p) in parts.iter().enumerate() {
            assert!(p.len() < 1_400_000, "part {n}: {} bytes", p.len());
            let key = k.pinned("h1", n as u32);
            match k.entry(&key, p) {
                Entry::Pinned {
                    host: "h1",
                    chunk,
                    set: Ok(set),
                } if chunk == n as u32 => {
                    assert_eq!(set.revision, 7);
                    back.extend(set.connections);
                }
                other => panic!("{other:?}"),
            }
            let elsewhere = k.pinned("h2", 0);
            assert!(k
                .entry(&elsewhere, p)
                .problem(&k)
                .unwrap()
                .contains("they name host `h1`"));
        }
        let mut sorted = conns;
        sorted.sort();
        assert_eq!(back, sorted);
        assert!(k.entry(&k.pinned("h1", 0), b"[]").problem(&k).is_some());
    }

    /// A drain waits until every host published its pinned connections for its own tables
    /// and installed every other host's latest write.
    #[test]
    fn pinned_shared_waits_for_every_host() {
        let progress = |digest: &str, written: i64, mirrored: i64| {
            Some(PinnedProgress {
                own: 1,
                tables_digest: digest.into(),
                written_revision: written,
                mirrored_revision: mirrored,
                prepared: None,
                prepared_revision: 0,
            })
        };
        let d = "a".repeat(64);
        let mut hosts = vec![host("h1", 3, &d), host("h2", 3, &d), host("h3", 3, &d)];
        hosts[0].pinned = progress(&d, 40, 42);
        hosts[1].pinned = progress(&d, 42, 42);
        hosts[2].pinned = progress(&d, 0, 42);
        assert_eq!(pinned_shared(&hosts, 3), Ok(()));
        // A revision was published that no host serves yet.
        let e = pinned_shared(&hosts, 4).unwrap_err();
        assert!(e.contains("h1 serves revision 3, not the live 4"), "{e}");
        // h3 has not seen h2's write at 42.
        hosts[2].pinned = progress(&d, 0, 41);
        let e = pinned_shared(&hosts, 3).unwrap_err();
        assert!(e.contains("h3 has not installed h2's"), "{e}");
        // h1 serves new tables and has not published for them yet.
        hosts[2].pinned = progress(&d, 0, 42);
        hosts[0].tables_digest = "b".repeat(64);
        let e = pinned_shared(&hosts, 3).unwrap_err();
        assert!(e.contains("h1 has not published"), "{e}");
        // A host whose nlbd does not share is not waited for.
        hosts[0].pinned = None;
        hosts[0].revision = 2;
        assert_eq!(pinned_shared(&hosts, 3), Ok(()));
    }

    /// New tables load once every host prepared them (or serves them) and installed every
    /// other host's publication for them; a host that refused their revision, or serves a
    /// newer one, is not waited for to prepare them.
    #[test]
    fn tables_prepared_waits_for_every_host_to_prepare() {
        let (old, new) = ("a".repeat(64), "b".repeat(64));
        let progress = |prepared: Option<(&str, i64)>, written: i64, mirrored: i64| {
            Some(PinnedProgress {
                own: 1,
                tables_digest: old.clone(),
                written_revision: written,
                mirrored_revision: mirrored,
                prepared: prepared.map(|p| p.0.to_string()),
                prepared_revision: prepared.map_or(0, |p| p.1),
            })
        };
        let mut hosts = vec![
            host("h1", 3, &old),
            host("h2", 3, &old),
            host("h3", 3, &old),
        ];
        hosts[0].pinned = progress(Some((&new, 50)), 50, 52);
        hosts[1].pinned = progress(Some((&new, 52)), 52, 52);
        hosts[2].pinned = progress(None, 0, 48);
        let e = tables_prepared(&hosts, &new, 3).unwrap_err();
        assert!(e.contains("h3 has not prepared tables"), "{e}");
        // h3 prepared (nothing of its own to publish), but has not installed h2's write at 52.
        hosts[2].pinned = progress(Some((&new, 0)), 0, 51);
        let e = tables_prepared(&hosts, &new, 3).unwrap_err();
        assert!(e.contains("h3 has not installed what h2 published"), "{e}");
        hosts[2].pinned = progress(Some((&new, 0)), 0, 52);
        assert_eq!(tables_prepared(&hosts, &new, 3), Ok(()));
        // h2 loaded them and published what they pin (a later write): that write is not
        // waited for, its prepared one is.
        hosts[1].tables_digest = new.clone();
        hosts[1].pinned = progress(Some((&new, 52)), 60, 52);
        assert_eq!(tables_prepared(&hosts, &new, 3), Ok(()));
        // A host that serves them without having prepared them (it started on them).
        hosts[1].pinned = progress(None, 60, 52);
        assert_eq!(tables_prepared(&hosts, &new, 3), Ok(()));
        // Tables of another change are not these.
        hosts[0].pinned = progress(Some((&"c".repeat(64), 50)), 50, 52);
        let e = tables_prepared(&hosts, &new, 3).unwrap_err();
        assert!(e.contains("h1 has not prepared"), "{e}");
        // A host that refused the revision, or serves a newer one, serves other tables: not
        // waited for to prepare (but for installing the others').
        hosts[0].refused = Some(Refused {
            revision: 3,
            error: "bad".into(),
        });
        assert_eq!(tables_prepared(&hosts, &new, 3), Ok(()));
        hosts[0].refused = None;
        hosts[0].revision = 4;
        assert_eq!(tables_prepared(&hosts, &new, 3), Ok(()));
        hosts[1].pinned = progress(Some((&new, 52)), 60, 52);
        hosts[0].pinned = progress(None, 50, 40);
        let e = tables_prepared(&hosts, &new, 3).unwrap_err();
        assert!(e.contains("h1 has not installed"), "{e}");
    }

    fn kv(key: &str, value: &[u8], rev: i64) -> etcd::KeyValue {
        etcd::KeyValue {
            key: key.as_bytes().to_vec(),
            value: value.to_vec(),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            lease: 7,
        }
    }

    #[test]
    fn stray_keys_and_values_are_reported_and_skipped() {
        let keys = Keys::new("/nlb/").unwrap();
        let good = serde_json::to_vec(&host("h1", 3, &"ab".repeat(32))).unwrap();
        let other_name = serde_json::to_vec(&host("h9", 3, &"ab".repeat(32))).unwrap();
        let bad_digest = serde_json::to_vec(&host("h3", 3, "é".repeat(40).as_str())).unwrap();
        let report = br#"{"healthy":true,"weight":"not_weighted","updated_unix_ms":1}"#;
        let kvs = [
            kv("/nlb/config", b"hello", 4),
            kv("/nlb/health/web/b1/h1", report, 5),
            kv("/nlb/health/web/b2/h1", b"{}", 5),
            kv("/nlb/hosts/h1", &good, 6),
            kv("/nlb/hosts/h1/extra", &good, 6),
            kv("/nlb/hosts/h2", b"not json", 6),
            kv("/nlb/hosts/h3", &bad_digest, 6),
            kv("/nlb/hosts/h4", &other_name, 6),
            kv("/nlb/stray", b"x", 7),
        ];
        let s = survey(&keys, 9, &kvs);
        assert_eq!(s.revision, 9);
        let live = s.live.expect("the config key is there");
        assert_eq!(live.revision, 4);
        assert!(live.published.is_err());
        // Only the one good record and the one good report are taken.
        assert_eq!(s.hosts.len(), 1);
        assert_eq!((s.hosts[0].0.host.as_str(), s.hosts[0].1), ("h1", 7));
        assert_eq!(s.reports.len(), 1);
        let bad: Vec<&str> = s.problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            bad,
            [
                "/nlb/config",
                "/nlb/health/web/b2/h1",
                "/nlb/hosts/h1/extra",
                "/nlb/hosts/h2",
                "/nlb/hosts/h3",
                "/nlb/hosts/h4",
                "/nlb/stray"
            ]
        );
        assert!(s.problems[0]
            .problem
            .contains("not a configuration published by nlbctl"));
        assert!(s.problems[2]
            .problem
            .contains("not a key nlbctl or nlbd writes"));
        assert!(s.problems[5].problem.contains("names host `h9`"));
        // A short form of anything (a hand-written digest) never splits a character.
        assert_eq!(short_digest(&"é".repeat(20)), "é".repeat(12));
        assert_eq!(short_digest("abc"), "abc");
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
            ..HostRecord::default()
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
