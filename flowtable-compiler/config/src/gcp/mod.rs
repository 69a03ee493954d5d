//! Reading a configuration file into the model: schema, types, values, and the checks that
//! relate objects to each other. Every problem is collected; nothing stops at the first.

use crate::diag::{did_you_mean, Diagnostics, Pos};
use crate::model::*;
use crate::resource::{self, Collection, RefError, ScopeKind};
use crate::tree::{self, Node, Value};
use nlb_hw::enums::{Affinity, DefaultAction, Delivery};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;

mod bgp;
mod service_checks;
pub(crate) mod services;

pub use services::{MAX_IDLE_TIMEOUT_SEC, MAX_PROBE_DATA};

/// Why a field of backend services is refused on a target pool or an instance.
const BACKEND_SERVICES: &str =
    "belongs to backend services (SPEC R6): write them under `backendServices` or `regionBackendServices`";
/// Why legacy HTTPS health checks are refused (the seed: the target-pool load balancer does not
/// support them).
const HTTPS_CHECKS: &str = "legacy HTTPS health checks are not offered for this load balancer: a target pool takes one legacy HTTP health check (`httpHealthChecks`), a backend service one health check (`healthChecks`, type HTTPS for HTTPS)";

/// `a target pool`, `an instance`.
fn with_article(what: &str) -> String {
    if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {what}")
    } else {
        format!("a {what}")
    }
}

pub(crate) struct Reader<'a> {
    pub file: &'a str,
    pub diags: Diagnostics,
}

/// A mapping whose keys were checked against a schema.
pub(crate) struct Obj<'n> {
    pub path: String,
    pub pos: Pos,
    pub fields: Vec<(&'static str, &'n Node)>,
}

impl<'n> Obj<'n> {
    pub fn get(&self, name: &str) -> Option<&'n Node> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .filter(|v| !v.is_null())
    }

    pub fn path(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    pub fn loc(&self, index: usize) -> Loc {
        Loc {
            index,
            pos: self.pos,
            fields: self.fields.iter().map(|(n, v)| (*n, v.pos)).collect(),
            incomplete: false,
        }
    }
}

impl<'a> Reader<'a> {
    pub fn new(file: &'a str) -> Self {
        Reader {
            file,
            diags: Diagnostics::new(),
        }
    }

    pub fn err(&mut self, pos: Pos, path: &str, msg: impl Into<String>, valid: Option<String>) {
        self.diags.push(self.file, pos, path, msg, valid);
    }

    /// Checks a mapping's keys: unknown ones (with a did-you-mean), repeated ones, and fields
    /// of the product that are refused for now.
    pub fn object<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        known: &[&'static str],
        unsupported: &[(&str, &str)],
    ) -> Option<Obj<'n>> {
        self.object_with(node, path, known, &[], unsupported)
    }

    /// [`Reader::object`] that also accepts the fields `ignored` (output-only fields of the
    /// product, which change nothing here) without listing them among the valid ones.
    pub fn object_with<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        known: &[&'static str],
        ignored: &[&'static str],
        unsupported: &[(&str, &str)],
    ) -> Option<Obj<'n>> {
        let Value::Map(entries) = &node.value else {
            if !node.is_null() {
                self.err(
                    node.pos,
                    path,
                    format!("expected a mapping, found {}", node.kind()),
                    None,
                );
            }
            return None;
        };
        let mut obj = Obj {
            path: path.to_string(),
            pos: node.pos,
            fields: Vec::new(),
        };
        for (k, v) in entries {
            let Some(key) = k.scalar() else {
                self.err(
                    k.pos,
                    path,
                    format!("a key must be a plain name, found {}", k.kind()),
                    None,
                );
                continue;
            };
            let kpath = obj.path(key);
            if let Some(name) = known.iter().find(|n| **n == key) {
                if obj.fields.iter().any(|(n, _)| n == name) {
                    self.err(k.pos, &kpath, "field given twice", None);
                } else {
                    obj.fields.push((name, v));
                }
            } else if let Some((_, why)) = unsupported.iter().find(|(n, _)| *n == key) {
                self.err(k.pos, &kpath, format!("`{key}` {why}"), None);
            } else if ignored.contains(&key) {
                // Output only (`selfLink`, `creationTimestamp`, ...): accepted, not read.
            } else {
                let hint = did_you_mean(key, known)
                    .map(|s| format!(", did you mean `{s}`?"))
                    .unwrap_or_default();
                self.err(
                    k.pos,
                    &kpath,
                    format!("unknown field `{key}`{hint}"),
                    Some(known.join(", ")),
                );
            }
        }
        Some(obj)
    }

    /// A list; a missing or null field is an empty list.
    pub fn list<'n>(&mut self, node: Option<&'n Node>, path: &str) -> &'n [Node] {
        match node {
            None => &[],
            Some(n) => match &n.value {
                Value::Seq(items) => items,
                _ if n.is_null() => &[],
                _ => {
                    self.err(
                        n.pos,
                        path,
                        format!("expected a list, found {}", n.kind()),
                        None,
                    );
                    &[]
                }
            },
        }
    }

    pub fn scalar<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n str> {
        match node.scalar() {
            Some(s) if !node.is_null() => Some(s),
            _ => {
                self.err(
                    node.pos,
                    path,
                    format!("expected a value, found {}", node.kind()),
                    None,
                );
                None
            }
        }
    }

    pub fn string(&mut self, obj: &Obj, name: &str, required: bool) -> Option<String> {
        match obj.get(name) {
            Some(n) => self.scalar(n, &obj.path(name)).map(str::to_string),
            None => {
                if required {
                    self.err(
                        obj.pos,
                        &obj.path(name),
                        format!("`{name}` is required"),
                        None,
                    );
                }
                None
            }
        }
    }

    /// An object name: RFC 1035 label, as the public API requires.
    pub fn name(&mut self, obj: &Obj) -> Option<String> {
        let name = self.string(obj, "name", true)?;
        let ok = name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.ends_with('-')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            let pos = obj.get("name").map_or(obj.pos, |n| n.pos);
            self.err(
                pos,
                &obj.path("name"),
                format!("invalid name `{name}`"),
                Some("lowercase letters, digits and '-', starting with a letter, not ending with '-', at most 63 characters".into()),
            );
        }
        Some(name)
    }

    /// A reference to an object of one of the collections `want`: a name, a partial path or a
    /// full resource URL (see [`crate::resource`]).
    pub fn reference(
        &mut self,
        node: &Node,
        path: &str,
        want: &'static [Collection],
    ) -> Option<Ref> {
        let text = self.scalar(node, path)?;
        let wanted = want.iter().map(|c| c.what).collect::<Vec<_>>().join(" or ");
        let valid = Some(resource::forms(&want[0]));
        match resource::parse_ref(text, want) {
            Ok(p) => Some(Ref {
                name: p.name,
                pos: node.pos,
                collection: p.collection.map(|c| c.segment),
                scope: p.scope,
            }),
            Err(RefError::Syntax(msg)) => {
                self.err(node.pos, path, msg, valid);
                None
            }
            Err(RefError::WrongCollection(segment, what)) => {
                let msg = match segment.as_str() {
                    "httpsHealthChecks" => format!("`{text}` is a legacy HTTPS health check, which is not offered for this load balancer: a target pool takes one legacy HTTP health check (`httpHealthChecks`), a backend service one health check of the newer kind (`healthChecks`)"),
                    "healthChecks" => format!("`{text}` is a health check of the newer kind, which backend services take; a target pool takes one legacy HTTP health check (`httpHealthChecks`)"),
                    "httpHealthChecks" if want.contains(&resource::HEALTH_CHECKS) => format!("`{text}` is a legacy HTTP health check, which target pools take; a backend service takes a health check of the newer kind (`healthChecks`, type HTTP)"),
                    "backendServices" if want.contains(&resource::TARGET_POOLS) => format!("`{text}` is a backend service: a forwarding rule names a backend service in `backendService`, not `target`"),
                    "targetPools" | "targetInstances" if want.contains(&resource::BACKEND_SERVICES) => format!("`{text}` is a {}: a forwarding rule names it in `target`, not `backendService`", if segment == "targetPools" { "target pool" } else { "target instance" }),
                    _ => format!(
                        "expected a reference to {}, found {} (`{text}`)",
                        with_article(&wanted),
                        what.map_or_else(
                            || format!("a path into the collection `{segment}`"),
                            with_article
                        )
                    ),
                };
                self.err(node.pos, path, msg, valid);
                None
            }
            Err(RefError::WrongScope(c)) if c.segment == "instanceGroups" => {
                self.err(
                    node.pos,
                    path,
                    format!("`{text}`: regional instance groups are not supported: the service LB policy places each backend group in one zone, as Google Cloud's service LB policy does (zonal instance groups only: `zones/ZONE/instanceGroups/NAME`)"),
                    valid,
                );
                None
            }
            Err(RefError::WrongScope(c)) => {
                let scope = match c.scope {
                    ScopeKind::Global => "global: `global/".to_string(),
                    ScopeKind::Region => "regional: `regions/REGION/".to_string(),
                    ScopeKind::Zone => "zonal: `zones/ZONE/".to_string(),
                    ScopeKind::GlobalOrRegion => {
                        format!(
                            "global or regional: `global/{}/NAME` or `regions/REGION/",
                            c.segment
                        )
                    }
                };
                self.err(
                    node.pos,
                    path,
                    format!("`{text}`: {}s are {scope}{}/NAME`", c.what, c.segment),
                    valid,
                );
                None
            }
        }
    }

    /// A `region` (or, with `zone`, a `zone`) field: a name, a path or a URL; the name, or an
    /// empty string when absent or wrong.
    pub fn location(&mut self, obj: &Obj, field: &str, zone: bool) -> String {
        let Some(n) = obj.get(field) else {
            return String::new();
        };
        let path = obj.path(field);
        let Some(text) = self.scalar(n, &path) else {
            return String::new();
        };
        match resource::parse_location(text, zone) {
            Ok(name) => name,
            Err(msg) => {
                self.err(n.pos, &path, msg, None);
                String::new()
            }
        }
    }

    pub fn integer(&mut self, obj: &Obj, name: &str, default: u64, lo: u64, hi: u64) -> u64 {
        let Some(n) = obj.get(name) else {
            return default;
        };
        let path = obj.path(name);
        let Some(text) = self.scalar(n, &path) else {
            return default;
        };
        match text.trim().parse::<u64>() {
            Ok(v) if (lo..=hi).contains(&v) => v,
            Ok(v) => {
                self.err(
                    n.pos,
                    &path,
                    format!("{v} is out of range"),
                    Some(format!("{lo}..={hi}")),
                );
                default
            }
            Err(_) => {
                self.err(
                    n.pos,
                    &path,
                    format!("`{text}` is not a whole number"),
                    Some(format!("{lo}..={hi}")),
                );
                default
            }
        }
    }

    /// An enumerated value; `later` lists real values that are refused for now, with why.
    pub fn enumerated<T: Copy>(
        &mut self,
        obj: &Obj,
        name: &str,
        default: T,
        values: &[(&'static str, T)],
        later: &[(&str, &str)],
    ) -> T {
        let Some(n) = obj.get(name) else {
            return default;
        };
        let path = obj.path(name);
        let Some(text) = self.scalar(n, &path) else {
            return default;
        };
        if let Some((_, v)) = values.iter().find(|(s, _)| *s == text) {
            return *v;
        }
        let names: Vec<&str> = values.iter().map(|(s, _)| *s).collect();
        if let Some((_, why)) = later.iter().find(|(s, _)| *s == text) {
            self.err(
                n.pos,
                &path,
                format!("`{text}` {why}"),
                Some(names.join(", ")),
            );
        } else {
            let hint = did_you_mean(text, &names)
                .map(|s| format!(", did you mean `{s}`?"))
                .unwrap_or_default();
            self.err(
                n.pos,
                &path,
                format!("`{text}` is not a valid value{hint}"),
                Some(names.join(", ")),
            );
        }
        default
    }

    pub fn ip(&mut self, node: &Node, path: &str) -> Option<IpAddr> {
        let text = self.scalar(node, path)?;
        match text.trim().parse::<IpAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                self.err(
                    node.pos,
                    path,
                    format!("`{text}` is not an IP address"),
                    Some("an IPv4 address such as 203.0.113.10 or an IPv6 address such as 2001:db8::10".into()),
                );
                None
            }
        }
    }

    pub fn prefix(&mut self, node: &Node, path: &str) -> Option<Prefix> {
        let text = self.scalar(node, path)?;
        match parse_prefix(text.trim()) {
            Ok(p) => Some(p),
            Err(msg) => {
                self.err(
                    node.pos,
                    path,
                    msg,
                    Some("CIDR such as 198.51.100.0/24 or 2001:db8::/32".into()),
                );
                None
            }
        }
    }

    pub fn mac(&mut self, node: &Node, path: &str) -> Option<u64> {
        let text = self.scalar(node, path)?;
        match parse_mac(text.trim()) {
            Some(m) => Some(m),
            None => {
                self.err(
                    node.pos,
                    path,
                    format!("`{text}` is not a MAC address"),
                    Some("six hex octets such as 02:00:00:00:00:0a".into()),
                );
                None
            }
        }
    }
}

/// Parses `a.b.c.d/n` or `x::/n`; a bare address is a host prefix. Host bits must be zero.
pub fn parse_prefix(text: &str) -> Result<Prefix, String> {
    let (addr_text, len_text) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (text, None),
    };
    let addr: IpAddr = addr_text
        .parse()
        .map_err(|_| format!("`{text}` is not a CIDR range: `{addr_text}` is not an IP address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len_text {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max => n,
            _ => {
                return Err(format!(
                    "`{text}` is not a CIDR range: prefix length `{l}` must be 0..={max}"
                ))
            }
        },
    };
    let p = Prefix { addr, len };
    let (net, table_len) = p.to_table();
    let masked = if table_len == 0 {
        0
    } else {
        net & (u128::MAX << (128 - u32::from(table_len)))
    };
    if masked != net {
        let fixed = Prefix {
            addr: nlb_hw::hash::u128_to_addr(masked),
            len,
        };
        return Err(format!(
            "`{text}` has host bits set; did you mean `{fixed}`?"
        ));
    }
    Ok(p)
}

/// Parses `02:00:00:00:00:0a` (or with `-`).
pub fn parse_mac(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut mac = 0u64;
    for p in parts {
        if p.len() != 2 {
            return None;
        }
        mac = (mac << 8) | u64::from(u8::from_str_radix(p, 16).ok()?);
    }
    Some(mac)
}

/// Parses `"80"`, `"80-80"` (as Google Cloud prints one port) or `"8000-8080"`; `"0-65535"`
/// is every port, as an absent range.
fn parse_port_range(text: &str) -> Result<PortRange, String> {
    if text.trim() == "0-65535" {
        return Ok(PortRange::ALL);
    }
    let port = |s: &str| -> Result<u16, String> {
        match s.trim().parse::<u32>() {
            Ok(p) if (1..=65535).contains(&p) => Ok(p as u16),
            Ok(p) => Err(format!("port {p} is outside 1..=65535")),
            Err(_) => Err(format!("`{s}` is not a port number")),
        }
    };
    let (lo, hi) = match text.split_once('-') {
        Some((a, b)) => (port(a)?, port(b)?),
        None => {
            let p = port(text)?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(format!(
            "range {lo}-{hi} is reversed: the low port must come first"
        ));
    }
    Ok(PortRange { lo, hi })
}

/// Fields of every Compute Engine resource that the API fills in (output only): accepted in
/// pasted `gcloud ... describe` / REST output, and ignored.
const OUTPUT_ONLY: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "selfLink",
    "selfLinkWithId",
];

const TOP: &[&str] = &[
    "nic",
    "bgp",
    "forwardingRules",
    "targetPools",
    "targetInstances",
    "instances",
    "httpHealthChecks",
    "backendServices",
    "regionBackendServices",
    "instanceGroups",
    "networkEndpointGroups",
    "healthChecks",
    "serviceLbPolicies",
];
const TOP_LATER: &[(&str, &str)] = &[
    ("httpsHealthChecks", "is not offered for this load balancer: legacy HTTPS health checks do not work with target pools; use `httpHealthChecks` (target pools) or `healthChecks` of type HTTPS (backend services)"),
    ("apiVersion", "is not supported yet: Kubernetes manifests (SPEC R7) come later"),
];
const NIC: &[&str] = &[
    "mac",
    "defaultAction",
    "guePort",
    "outerSourceIpv4",
    "outerSourceIpv6",
    "healthCheckSourceRanges",
    "nextHopMac",
    "region",
    "zone",
    "regionOrder",
];
const RULE: &[&str] = &[
    "name",
    "description",
    "region",
    "IPAddress",
    "IPProtocol",
    "portRange",
    "ports",
    "allPorts",
    "target",
    "backendService",
    "sourceRanges",
    "loadBalancingScheme",
    "networkTier",
    "ipVersion",
    "labels",
];
const RULE_IGNORED: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "selfLink",
    "selfLinkWithId",
    "fingerprint",
    "labelFingerprint",
];
const RULE_LATER: &[(&str, &str)] = &[
    (
        "sourceIpRanges",
        "is a traffic-steering field of Google Cloud's forwarding rules and is not supported: it picks which forwarding rule of a shared address serves which sources (backend-service load balancers); it is no allow list, `sourceRanges` (SPEC R9) is the allow list that drops other sources",
    ),
    (
        "allowGlobalAccess",
        "is not supported yet (internal load balancers)",
    ),
    (
        "serviceLabel",
        "is not supported yet (internal load balancers)",
    ),
    ("network", "is not supported yet (internal load balancers)"),
    (
        "subnetwork",
        "is not supported yet (internal load balancers)",
    ),
];
const POOL: &[&str] = &[
    "name",
    "description",
    "region",
    "instances",
    "healthChecks",
    "sessionAffinity",
    "backupPool",
    "failoverRatio",
    "delivery",
    "idleTimeoutSec",
];
const POOL_LATER: &[(&str, &str)] = &[
    ("connectionTrackingPolicy", BACKEND_SERVICES),
    ("failoverPolicy", BACKEND_SERVICES),
    ("localityLbPolicy", BACKEND_SERVICES),
    ("backends", BACKEND_SERVICES),
    ("serviceLbPolicy", BACKEND_SERVICES),
    (
        "httpsHealthChecks",
        "is not offered for this load balancer: legacy HTTPS health checks do not work with target pools; use `healthChecks` with a legacy HTTP health check",
    ),
    ("securityPolicy", "is not supported yet"),
];
const TARGET_INSTANCE: &[&str] = &[
    "name",
    "description",
    "zone",
    "instance",
    "natPolicy",
    "network",
    "delivery",
    "idleTimeoutSec",
];
const TARGET_INSTANCE_LATER: &[(&str, &str)] = &[("securityPolicy", "is not supported yet")];
/// Our own instance form.
const INSTANCE: &[&str] = &[
    "name",
    "description",
    "ip",
    "zone",
    "mac",
    "weight",
    "labels",
];
/// A Compute Engine instance (`compute#instance`): what is read, plus our `mac` and `weight`.
const GCE_INSTANCE: &[&str] = &[
    "name",
    "description",
    "zone",
    "networkInterfaces",
    "labels",
    "mac",
    "weight",
];
/// Fields of a Compute Engine instance that do not concern the load balancer: its machine,
/// disks, metadata, scheduling, state. Accepted and ignored (`status` too: a stopped instance
/// fails its health check like any other unhealthy one).
const GCE_INSTANCE_IGNORED: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "selfLink",
    "selfLinkWithId",
    "tags",
    "machineType",
    "status",
    "statusMessage",
    "canIpForward",
    "disks",
    "metadata",
    "serviceAccounts",
    "scheduling",
    "cpuPlatform",
    "params",
    "labelFingerprint",
    "instanceEncryptionKey",
    "minCpuPlatform",
    "guestAccelerators",
    "startRestricted",
    "deletionProtection",
    "resourcePolicies",
    "sourceMachineImage",
    "reservationAffinity",
    "hostname",
    "displayDevice",
    "shieldedInstanceConfig",
    "shieldedInstanceIntegrityPolicy",
    "shieldedVmConfig",
    "shieldedVmIntegrityPolicy",
    "sourceMachineImageEncryptionKey",
    "confidentialInstanceConfig",
    "fingerprint",
    "privateIpv6GoogleAccess",
    "advancedMachineFeatures",
    "lastStartTimestamp",
    "lastStopTimestamp",
    "lastSuspendedTimestamp",
    "satisfiesPzs",
    "satisfiesPzi",
    "resourceStatus",
    "networkPerformanceConfig",
    "keyRevocationActionType",
    "postKeyRevocationActionType",
    "localSsdEncryptionMode",
    "partnerMetadata",
    "instanceSettings",
    "upcomingMaintenance",
    "workloadIdentityConfig",
    "secureTags",
    "eraseWindowsVssSignature",
    "preservedStateSizeGb",
    "serviceIntegrationSpecs",
];
/// Why a field of a backend service's `backends[]` is refused on an instance.
const BACKEND_FIELD: &str =
    "is a field of a backend service's `backends[]` (SPEC R6), not of an instance";
const INSTANCE_LATER: &[(&str, &str)] = &[
    ("capacityScaler", BACKEND_FIELD),
    ("balancingMode", BACKEND_FIELD),
    ("preference", BACKEND_FIELD),
    ("failover", BACKEND_FIELD),
    ("maxRate", BACKEND_FIELD),
    ("maxUtilization", BACKEND_FIELD),
    ("maxConnections", BACKEND_FIELD),
];
const HEALTH_CHECK: &[&str] = &[
    "name",
    "description",
    "port",
    "requestPath",
    "host",
    "checkIntervalSec",
    "timeoutSec",
    "healthyThreshold",
    "unhealthyThreshold",
];

/// Most ports a rule's `ports` takes (Google Cloud's limit).
pub const MAX_RULE_PORTS: usize = 5;

const DELIVERIES: &[(&str, Delivery)] = &[
    ("L2_DSR", Delivery::L2Dsr),
    ("IPIP", Delivery::Ipip),
    ("GUE", Delivery::Gue),
];

const TARGETS: &[Collection] = &[resource::TARGET_POOLS, resource::TARGET_INSTANCES];
const SERVICES: &[Collection] = &[resource::BACKEND_SERVICES];
const POOLS: &[Collection] = &[resource::TARGET_POOLS];
const INSTANCES: &[Collection] = &[resource::INSTANCES];
const HTTP_CHECKS: &[Collection] = &[resource::HTTP_HEALTH_CHECKS];

pub(crate) fn read_nic(r: &mut Reader, node: Option<&Node>) -> Nic {
    let mut nic = Nic::default();
    let Some(node) = node else { return nic };
    let Some(o) = r.object(node, "nic", NIC, &[]) else {
        return nic;
    };
    nic.loc = o.loc(0);
    if let Some(n) = o.get("mac") {
        if let Some(m) = r.mac(n, "nic.mac") {
            nic.mac = m;
        }
    }
    if let Some(n) = o.get("nextHopMac") {
        nic.next_hop_mac = r.mac(n, "nic.nextHopMac");
    }
    nic.default_action = r.enumerated(
        &o,
        "defaultAction",
        DefaultAction::Pass,
        &[("PASS", DefaultAction::Pass), ("DROP", DefaultAction::Drop)],
        &[],
    );
    nic.gue_port = r.integer(&o, "guePort", 6080, 1, 65535) as u16;
    for (field, v6) in [("outerSourceIpv4", false), ("outerSourceIpv6", true)] {
        if let Some(n) = o.get(field) {
            let path = o.path(field);
            if let Some(p) = r.prefix(n, &path) {
                if p.addr.is_ipv6() != v6 {
                    r.err(
                        n.pos,
                        &path,
                        format!("`{p}` is of the wrong address family"),
                        Some(
                            if v6 {
                                "an IPv6 prefix"
                            } else {
                                "an IPv4 prefix"
                            }
                            .into(),
                        ),
                    );
                } else if v6 {
                    nic.outer_source_ipv6 = Some(p);
                } else {
                    nic.outer_source_ipv4 = Some(p);
                }
            }
        }
    }
    let items = r.list(
        o.get("healthCheckSourceRanges"),
        "nic.healthCheckSourceRanges",
    );
    for (i, n) in items.iter().enumerate() {
        if let Some(p) = r.prefix(n, &format!("nic.healthCheckSourceRanges[{i}]")) {
            nic.health_check_source_ranges.push(p);
        }
    }
    read_nic_locality(r, &o, &mut nic);
    nic
}

/// The NIC's region, zone and region distance order (SPEC R6): where the service LB policy's
/// "client" is.
fn read_nic_locality(r: &mut Reader, o: &Obj, nic: &mut Nic) {
    nic.region = r.location(o, "region", false);
    nic.zone = r.location(o, "zone", true);
    if !nic.zone.is_empty() {
        match region_of_zone(&nic.zone) {
            Some(zr) if nic.region.is_empty() => nic.region = zr.to_string(),
            Some(zr) if zr != nic.region => r.err(
                o.get("zone").map_or(o.pos, |n| n.pos),
                "nic.zone",
                format!(
                    "zone {} is in region {zr}, but `nic.region` is {}",
                    nic.zone, nic.region
                ),
                Some(format!(
                    "a zone of region {}, such as {}-a",
                    nic.region, nic.region
                )),
            ),
            Some(_) => {}
            None => r.err(
                o.get("zone").map_or(o.pos, |n| n.pos),
                "nic.zone",
                format!(
                    "`{}` names no region: a zone is its region and a suffix",
                    nic.zone
                ),
                Some("a zone such as us-central1-a".into()),
            ),
        }
    }
    let items = r.list(o.get("regionOrder"), "nic.regionOrder");
    let valid = || {
        Some(
            "other regions, nearest first, each once, such as [us-east1, europe-west1]".to_string(),
        )
    };
    for (i, n) in items.iter().enumerate() {
        let path = format!("nic.regionOrder[{i}]");
        let Some(text) = r.scalar(n, &path) else {
            continue;
        };
        let region = match resource::parse_location(text, false) {
            Ok(region) => region,
            Err(msg) => {
                r.err(n.pos, &path, msg, valid());
                continue;
            }
        };
        if region == nic.region {
            r.err(
                n.pos,
                &path,
                format!("{region} is the NIC's own region, which is always nearest"),
                valid(),
            );
        } else if nic.region_order.contains(&region) {
            r.err(n.pos, &path, format!("{region} is listed twice"), valid());
        } else {
            nic.region_order.push(region);
        }
    }
    if !nic.region_order.is_empty() && nic.region.is_empty() {
        r.err(
            o.pos,
            "nic.region",
            "`regionOrder` orders the regions by distance from the NIC's own, but `region` (or `zone`) is not set",
            Some("`nic.region`, such as us-central1".into()),
        );
    }
}

/// The destination ports of a rule: `portRange`, `ports` or `allPorts` (at most one of them),
/// or every port when none is given.
fn read_rule_ports(r: &mut Reader, o: &Obj) -> Vec<PortRange> {
    let given: Vec<&str> = ["portRange", "ports", "allPorts"]
        .into_iter()
        .filter(|f| o.get(f).is_some())
        .collect();
    if given.len() > 1 {
        let second = given[1];
        r.err(
            o.get(second).map_or(o.pos, |n| n.pos),
            &o.path(second),
            format!("`{}` and `{second}` exclude each other", given[0]),
            Some("one of `portRange`, `ports` or `allPorts`, or none for all ports".into()),
        );
        return vec![PortRange::ALL];
    }
    if let Some(n) = o.get("portRange") {
        let path = o.path("portRange");
        if let Some(text) = r.scalar(n, &path) {
            match parse_port_range(text) {
                Ok(pr) => return vec![pr],
                Err(msg) => r.err(
                    n.pos,
                    &path,
                    msg,
                    Some("\"80\", \"80-80\" or \"8000-8080\" with ports 1..=65535, low ≤ high; \"0-65535\" or leave out for all ports".into()),
                ),
            }
        }
    }
    if let Some(n) = o.get("allPorts") {
        let path = o.path("allPorts");
        if let Some(text) = r.scalar(n, &path) {
            if !matches!(text, "true" | "false") {
                r.err(
                    n.pos,
                    &path,
                    format!("`{text}` is not a boolean"),
                    Some("true or false".into()),
                );
            }
        }
    }
    if o.get("ports").is_some() {
        let path = o.path("ports");
        let items = r.list(o.get("ports"), &path);
        let valid = || {
            Some(format!(
                "up to {MAX_RULE_PORTS} single ports 1..=65535, such as [\"80\", \"443\"]; `portRange` for a range"
            ))
        };
        let mut ports: Vec<(u16, Pos)> = Vec::new();
        for (i, n) in items.iter().enumerate() {
            let ipath = format!("{path}[{i}]");
            let Some(text) = r.scalar(n, &ipath) else {
                continue;
            };
            let port = match parse_port_range(text) {
                Ok(p) if p.lo == p.hi => p.lo,
                Ok(p) => {
                    r.err(
                        n.pos,
                        &ipath,
                        format!("`{text}` is a range ({p}): `ports` lists single ports"),
                        valid(),
                    );
                    continue;
                }
                Err(msg) => {
                    r.err(n.pos, &ipath, msg, valid());
                    continue;
                }
            };
            if let Some((_, first)) = ports.iter().find(|(p, _)| *p == port) {
                r.err(
                    n.pos,
                    &ipath,
                    format!("port {port} is listed twice (also at line {})", first.line),
                    valid(),
                );
                continue;
            }
            ports.push((port, n.pos));
        }
        if items.is_empty() {
            if let Some(n) = o.get("ports").filter(|n| matches!(n.value, Value::Seq(_))) {
                r.err(n.pos, &path, "`ports` is empty", valid());
            }
        }
        if items.len() > MAX_RULE_PORTS {
            r.err(
                items[MAX_RULE_PORTS].pos,
                &path,
                format!(
                    "{} ports given; a forwarding rule takes at most {MAX_RULE_PORTS}",
                    items.len()
                ),
                valid(),
            );
        }
        if !ports.is_empty() {
            ports.sort_unstable();
            // Adjacent ports make one range: the same matching, one VIP-table slot fewer.
            let mut ranges: Vec<PortRange> = Vec::new();
            for (p, _) in ports {
                match ranges.last_mut() {
                    Some(last) if u32::from(last.hi) + 1 == u32::from(p) => last.hi = p,
                    _ => ranges.push(PortRange { lo: p, hi: p }),
                }
            }
            return ranges;
        }
    }
    vec![PortRange::ALL]
}

fn read_rule(r: &mut Reader, o: &Obj, index: usize) -> Option<ForwardingRule> {
    let name = r.name(o);
    let ip = match o.get("IPAddress") {
        Some(n) => r.ip(n, &o.path("IPAddress")),
        None => {
            r.err(
                o.pos,
                &o.path("IPAddress"),
                "`IPAddress` is required: the VIP",
                None,
            );
            None
        }
    };
    let region = r.location(o, "region", false);
    // Errors in the fields that decide what the rule matches make overlap checks moot.
    let errors_before = r.diags.len();
    let other_protocol =
        "is not supported as a rule protocol: an `L3_DEFAULT` rule of a backend service takes every protocol that no TCP or UDP rule of its VIP takes";
    let proto = r.enumerated(
        o,
        "IPProtocol",
        Protocol::Tcp,
        &[
            ("TCP", Protocol::Tcp),
            ("UDP", Protocol::Udp),
            ("L3_DEFAULT", Protocol::L3Default),
        ],
        &[
            ("ESP", other_protocol),
            ("AH", other_protocol),
            ("SCTP", other_protocol),
            ("ICMP", other_protocol),
        ],
    );
    let port_ranges = read_rule_ports(r, o);
    if proto == Protocol::L3Default {
        // Every port (Google Cloud requires `allPorts: true`; leaving the ports out
        // means every port here as well).
        let narrowed = ["portRange", "ports"]
            .into_iter()
            .find(|f| o.get(f).is_some())
            .or_else(|| {
                o.get("allPorts")
                    .filter(|n| n.scalar() == Some("false"))
                    .map(|_| "allPorts")
            });
        if let Some(field) = narrowed {
            r.err(
                o.loc(index).field(field),
                &o.path(field),
                format!("an `L3_DEFAULT` rule takes every port, so `{field}` cannot narrow it"),
                Some("`allPorts: true`, or leave the ports out".into()),
            );
        }
    }
    let match_fields_bad = r.diags.len() > errors_before;
    let (target, backend_service) = match (o.get("target"), o.get("backendService")) {
        (Some(t), Some(b)) => {
            // The one written later is the one in excess.
            let (later, field) = if t.pos > b.pos {
                (t, "target")
            } else {
                (b, "backendService")
            };
            r.err(
                later.pos,
                &o.path(field),
                "`target` and `backendService` exclude each other",
                Some("a target pool or target instance in `target`, or a backend service in `backendService`".into()),
            );
            (r.reference(t, &o.path("target"), TARGETS), false)
        }
        (Some(n), None) => (r.reference(n, &o.path("target"), TARGETS), false),
        (None, Some(n)) => (r.reference(n, &o.path("backendService"), SERVICES), true),
        (None, None) => {
            r.err(
                o.pos,
                &o.path("target"),
                "`target` or `backendService` is required: a target pool or target instance, or a backend service",
                None,
            );
            (None, false)
        }
    };
    let mut source_ranges = Vec::new();
    let items = r.list(o.get("sourceRanges"), &o.path("sourceRanges"));
    for (i, n) in items.iter().enumerate() {
        if let Some(p) = r.prefix(n, &format!("{}[{i}]", o.path("sourceRanges"))) {
            if !source_ranges.contains(&p) {
                source_ranges.push(p);
            }
        }
    }
    source_ranges.sort();
    if let Some(n) = o.get("loadBalancingScheme") {
        let path = o.path("loadBalancingScheme");
        if let Some(t) = r.scalar(n, &path) {
            if t != "EXTERNAL" {
                r.err(
                    n.pos,
                    &path,
                    format!("`{t}` is not supported yet: this is the external passthrough load balancer"),
                    Some("EXTERNAL".into()),
                );
            }
        }
    }
    // Informational fields Google Cloud prints; checked so a typo is not ignored.
    r.enumerated(
        o,
        "networkTier",
        (),
        &[("PREMIUM", ()), ("STANDARD", ())],
        &[],
    );
    let v6 = r.enumerated(
        o,
        "ipVersion",
        None,
        &[("IPV4", Some(false)), ("IPV6", Some(true))],
        &[],
    );
    if let (Some(v6), Some(addr)) = (v6, ip) {
        if addr.is_ipv6() != v6 {
            r.err(
                o.loc(index).field("ipVersion"),
                &o.path("ipVersion"),
                format!(
                    "`ipVersion` {} contradicts `IPAddress` {addr}",
                    if v6 { "IPV6" } else { "IPV4" }
                ),
                Some(if addr.is_ipv6() { "IPV6" } else { "IPV4" }.into()),
            );
        }
    }
    let mut loc = o.loc(index);
    loc.incomplete = match_fields_bad;
    Some(ForwardingRule {
        name: name?,
        ip_address: ip?,
        ip_protocol: proto,
        port_ranges,
        region,
        target: target?,
        backend_service,
        source_ranges,
        loc,
    })
}

fn refs(r: &mut Reader, o: &Obj, field: &str, want: &'static [Collection]) -> Vec<Ref> {
    let path = o.path(field);
    let items = r.list(o.get(field), &path);
    items
        .iter()
        .enumerate()
        .filter_map(|(i, n)| r.reference(n, &format!("{path}[{i}]"), want))
        .collect()
}

fn read_pool(r: &mut Reader, o: &Obj, index: usize) -> Option<TargetPool> {
    let name = r.name(o);
    let region = r.location(o, "region", false);
    let instances = refs(r, o, "instances", INSTANCES);
    let health_checks = refs(r, o, "healthChecks", HTTP_CHECKS);
    let later = "is not supported yet for target pools: it belongs to backend services (SPEC R6)";
    let session_affinity = r.enumerated(
        o,
        "sessionAffinity",
        Affinity::None,
        &[
            ("NONE", Affinity::None),
            ("CLIENT_IP", Affinity::ClientIp),
            ("CLIENT_IP_PROTO", Affinity::ClientIpProto),
        ],
        &[
            ("CLIENT_IP_PORT_PROTO", later),
            ("CLIENT_IP_NO_DESTINATION", later),
        ],
    );
    let backup_pool = o
        .get("backupPool")
        .and_then(|n| r.reference(n, &o.path("backupPool"), POOLS));
    let mut failover_ratio = None;
    if let Some(n) = o.get("failoverRatio") {
        let path = o.path("failoverRatio");
        if let Some(t) = r.scalar(n, &path) {
            match Ratio::parse(t) {
                Some(v) => failover_ratio = Some(v),
                None => r.err(
                    n.pos,
                    &path,
                    if t.trim().parse::<f64>().is_ok() {
                        format!("`{t}` is outside [0, 1]")
                    } else {
                        format!("`{t}` is not a number")
                    },
                    Some("a number from 0 to 1, such as 0.5".into()),
                ),
            }
        }
    }
    let delivery = r.enumerated(o, "delivery", Delivery::L2Dsr, DELIVERIES, &[]);
    let idle_timeout_sec = r.integer(o, "idleTimeoutSec", 60, 1, 65535) as u16;
    Some(TargetPool {
        name: name?,
        region,
        instances,
        health_checks,
        session_affinity,
        backup_pool,
        failover_ratio,
        delivery,
        idle_timeout_sec,
        loc: o.loc(index),
    })
}

/// A network reference (`default`, `global/networks/default`, or its URL): its name.
fn network_name(r: &mut Reader, n: &Node, path: &str) -> String {
    const NETWORKS: &[Collection] = &[Collection {
        segment: "networks",
        scope: ScopeKind::Global,
        what: "network",
    }];
    r.reference(n, path, NETWORKS)
        .map(|x| x.name)
        .unwrap_or_default()
}

fn read_target_instance(r: &mut Reader, o: &Obj, index: usize) -> Option<TargetInstance> {
    let name = r.name(o);
    let zone = r.location(o, "zone", true);
    let instance = match o.get("instance") {
        Some(n) => r.reference(n, &o.path("instance"), INSTANCES),
        None => {
            r.err(o.pos, &o.path("instance"), "`instance` is required", None);
            None
        }
    };
    let network = o
        .get("network")
        .map(|n| network_name(r, n, &o.path("network")))
        .unwrap_or_default();
    r.enumerated(o, "natPolicy", (), &[("NO_NAT", ())], &[]);
    let delivery = r.enumerated(o, "delivery", Delivery::L2Dsr, DELIVERIES, &[]);
    let idle_timeout_sec = r.integer(o, "idleTimeoutSec", 60, 1, 65535) as u16;
    Some(TargetInstance {
        name: name?,
        zone,
        instance: instance?,
        network,
        delivery,
        idle_timeout_sec,
        loc: o.loc(index),
    })
}

fn read_instance(r: &mut Reader, o: &Obj, index: usize) -> Option<Instance> {
    let name = r.name(o);
    let ip = match o.get("ip") {
        Some(n) => r.ip(n, &o.path("ip")),
        None => {
            r.err(o.pos, &o.path("ip"), "`ip` is required", None);
            None
        }
    };
    let zone = r.location(o, "zone", true);
    let mac = o.get("mac").and_then(|n| r.mac(n, &o.path("mac")));
    let weight = r.integer(o, "weight", 1, 0, 1000) as u32;
    Some(Instance {
        name: name?,
        ip: ip?,
        zone,
        network: String::new(),
        mac,
        weight,
        loc: o.loc(index),
    })
}

/// A Compute Engine instance (`gcloud compute instances describe`): packets go to nic0,
/// `networkInterfaces[0].networkIP`, as in Google Cloud. It carries no MAC: L2_DSR needs
/// our `mac` beside it.
fn read_gce_instance(r: &mut Reader, o: &Obj, index: usize) -> Option<Instance> {
    let name = r.name(o);
    let zone = r.location(o, "zone", true);
    let path = o.path("networkInterfaces");
    let nics = r.list(o.get("networkInterfaces"), &path);
    let mut ip = None;
    let mut network = String::new();
    match nics.first() {
        None => r.err(
            o.loc(index).field("networkInterfaces"),
            &path,
            "the instance has no network interface: packets go to nic0, `networkInterfaces[0].networkIP`",
            None,
        ),
        Some(nic0) => {
            let npath = format!("{path}[0]");
            match &nic0.value {
                Value::Map(entries) => {
                    let get = |k: &str| {
                        entries
                            .iter()
                            .find(|(key, _)| key.scalar() == Some(k))
                            .map(|(_, v)| v)
                    };
                    match get("networkIP").filter(|n| !n.is_null()) {
                        Some(n) => ip = r.ip(n, &format!("{npath}.networkIP")),
                        None => r.err(
                            nic0.pos,
                            &format!("{npath}.networkIP"),
                            "nic0 has no `networkIP`: the load balancer delivers to nic0's internal address",
                            None,
                        ),
                    }
                    if let Some(n) = get("network").filter(|n| !n.is_null()) {
                        network = network_name(r, n, &format!("{npath}.network"));
                    }
                }
                _ => r.err(
                    nic0.pos,
                    &npath,
                    format!("expected a mapping, found {}", nic0.kind()),
                    None,
                ),
            }
        }
    }
    let mac = o.get("mac").and_then(|n| r.mac(n, &o.path("mac")));
    let weight = r.integer(o, "weight", 1, 0, 1000) as u32;
    Some(Instance {
        name: name?,
        ip: ip?,
        zone,
        network,
        mac,
        weight,
        loc: o.loc(index),
    })
}

fn read_health_check(r: &mut Reader, o: &Obj, index: usize) -> Option<HttpHealthCheck> {
    let name = r.name(o);
    let port = r.integer(o, "port", 80, 1, 65535) as u16;
    let request_path = r
        .string(o, "requestPath", false)
        .unwrap_or_else(|| "/".into());
    let pos = o.loc(index).field("requestPath");
    if !request_path.starts_with('/') {
        r.err(
            pos,
            &o.path("requestPath"),
            format!("`{request_path}` must start with `/`"),
            Some("a path such as /healthz".into()),
        );
    } else if request_path.contains('?') {
        // Google Cloud's API reference: "This field does not support query parameters."
        r.err(
            pos,
            &o.path("requestPath"),
            format!("`{request_path}` has a query string: legacy HTTP health checks do not support query parameters"),
            Some("a path without `?`, such as /healthz".into()),
        );
    }
    let host = r.string(o, "host", false).unwrap_or_default();
    let check_interval_sec = r.integer(o, "checkIntervalSec", 5, 1, 300) as u32;
    let timeout_sec = r.integer(o, "timeoutSec", 5, 1, 300) as u32;
    let healthy_threshold = r.integer(o, "healthyThreshold", 2, 1, 10) as u32;
    let unhealthy_threshold = r.integer(o, "unhealthyThreshold", 2, 1, 10) as u32;
    Some(HttpHealthCheck {
        name: name?,
        port,
        request_path,
        host,
        check_interval_sec,
        timeout_sec,
        healthy_threshold,
        unhealthy_threshold,
        loc: o.loc(index),
    })
}

/// The kinds of object, as sections of our own form and as Google Cloud resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Rules,
    Pools,
    TargetInstances,
    Instances,
    HttpHealthChecks,
    BackendServices,
    RegionBackendServices,
    InstanceGroups,
    NetworkEndpointGroups,
    HealthChecks,
    ServiceLbPolicies,
}

impl Section {
    const ALL: [Section; 11] = [
        Section::Rules,
        Section::Pools,
        Section::TargetInstances,
        Section::Instances,
        Section::HttpHealthChecks,
        Section::BackendServices,
        Section::RegionBackendServices,
        Section::InstanceGroups,
        Section::NetworkEndpointGroups,
        Section::HealthChecks,
        Section::ServiceLbPolicies,
    ];

    /// The top-level field of our form, also the path prefix of messages.
    fn field(self) -> &'static str {
        match self {
            Section::Rules => "forwardingRules",
            Section::Pools => "targetPools",
            Section::TargetInstances => "targetInstances",
            Section::Instances => "instances",
            Section::HttpHealthChecks => "httpHealthChecks",
            Section::BackendServices => "backendServices",
            Section::RegionBackendServices => "regionBackendServices",
            Section::InstanceGroups => "instanceGroups",
            Section::NetworkEndpointGroups => "networkEndpointGroups",
            Section::HealthChecks => "healthChecks",
            Section::ServiceLbPolicies => "serviceLbPolicies",
        }
    }

    /// The field an aggregated list holds the resources in.
    fn list_field(self) -> &'static str {
        match self {
            Section::RegionBackendServices => "backendServices",
            s => s.field(),
        }
    }

    /// The `kind` of the resource (`None`: the API prints none).
    fn kind(self) -> Option<&'static str> {
        Some(match self {
            Section::Rules => "compute#forwardingRule",
            Section::Pools => "compute#targetPool",
            Section::TargetInstances => "compute#targetInstance",
            Section::Instances => "compute#instance",
            Section::HttpHealthChecks => "compute#httpHealthCheck",
            Section::BackendServices | Section::RegionBackendServices => "compute#backendService",
            Section::InstanceGroups => "compute#instanceGroup",
            Section::NetworkEndpointGroups => "compute#networkEndpointGroup",
            Section::HealthChecks => "compute#healthCheck",
            Section::ServiceLbPolicies => return None,
        })
    }

    /// Whether its REST API has an aggregated (all regions or zones) list.
    fn aggregated(self) -> bool {
        !matches!(self, Section::HttpHealthChecks | Section::ServiceLbPolicies)
    }

    /// A backend service's section follows where it is: regional with a `region`, else
    /// global (the two share one `kind`).
    fn of_service(node: &Node) -> Section {
        match map_get(node, "region") {
            Some(r) if !r.is_null() => Section::RegionBackendServices,
            _ => Section::BackendServices,
        }
    }
}

/// Kinds of Google Cloud objects refused with a reason.
const KINDS_LATER: &[(&str, &str)] = &[("compute#httpsHealthCheck", HTTPS_CHECKS)];

fn valid_kinds() -> String {
    let mut kinds: Vec<&str> = Section::ALL.iter().filter_map(|s| s.kind()).collect();
    kinds.dedup();
    kinds.join(", ")
        + ", or their lists (`...List`, `...AggregatedList`); a service LB policy as `gcloud network-services service-lb-policies describe` prints it"
}

/// The value of `key` in a mapping node, without checking the mapping.
fn map_get<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| k.scalar() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

/// Whether a mapping without `kind` is a service LB policy as Google Cloud prints it: its
/// `name` is its full resource name.
fn is_pasted_policy(node: &Node) -> bool {
    map_get(node, "kind").is_none()
        && map_get(node, "name")
            .and_then(Node::scalar)
            .is_some_and(|n| n.contains("/serviceLbPolicies/"))
}

/// Reads every document of a file into one configuration.
struct Loader<'a> {
    r: Reader<'a>,
    config: Config,
    /// Next index of each section, counted over the whole file: `forwardingRules[3]` is the
    /// file's fourth forwarding rule, whichever document and form it came from.
    next: [usize; Section::ALL.len()],
    /// Where the `nic` section was, once read.
    nic_at: Option<Pos>,
}

impl Loader<'_> {
    fn document(&mut self, doc: &Node) {
        match &doc.value {
            _ if doc.is_null() => {}
            // A JSON array (`gcloud ... list --format=json`) or a YAML list of resources.
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    if is_pasted_policy(item) {
                        self.resource(Section::ServiceLbPolicies, item);
                        continue;
                    }
                    match map_get(item, "kind").and_then(Node::scalar) {
                        Some(_) => self.kind_document(item),
                        None => self.r.err(
                            item.pos,
                            &format!("[{i}]"),
                            "a resource in a list needs its `kind`",
                            Some(valid_kinds()),
                        ),
                    }
                }
            }
            Value::Map(_) if map_get(doc, "kind").is_some() => self.kind_document(doc),
            Value::Map(_) if is_pasted_policy(doc) => {
                self.resource(Section::ServiceLbPolicies, doc)
            }
            Value::Map(_) => self.sections(doc),
            Value::Scalar { .. } => self.r.err(
                doc.pos,
                "",
                format!("expected a mapping, found {}", doc.kind()),
                Some("a configuration (`forwardingRules:`, `targetPools:`, ...) or a Compute Engine resource with its `kind`".into()),
            ),
        }
    }

    /// A document of our own form: top-level sections.
    fn sections(&mut self, doc: &Node) {
        let Some(top) = self.r.object(doc, "", TOP, TOP_LATER) else {
            return;
        };
        if let Some(n) = top.get("nic") {
            match self.nic_at {
                Some(first) => self.r.err(
                    n.pos,
                    "nic",
                    format!("`nic` given twice (also at line {})", first.line),
                    Some("one `nic` section in the file".into()),
                ),
                None => {
                    self.nic_at = Some(n.pos);
                    self.config.nic = read_nic(&mut self.r, Some(n));
                }
            }
        }
        if let Some(n) = top.get("bgp") {
            if self.config.bgp.is_some() {
                self.r.err(
                    n.pos,
                    "bgp",
                    "`bgp` given twice",
                    Some("one `bgp` section in the file".into()),
                );
            } else {
                self.config.bgp = bgp::read_bgp(&mut self.r, n);
            }
        }
        for s in Section::ALL {
            let items = self.r.list(top.get(s.field()), s.field());
            for item in items {
                // A pasted backend service goes where its `region` says.
                let s = match s {
                    Section::BackendServices | Section::RegionBackendServices
                        if map_get(item, "kind").is_some() =>
                    {
                        Section::of_service(item)
                    }
                    s => s,
                };
                self.resource(s, item);
            }
        }
    }

    /// A document with a `kind`: one resource, or a list of them.
    fn kind_document(&mut self, doc: &Node) {
        let Some(kind_node) = map_get(doc, "kind") else {
            return;
        };
        let Some(kind) = self.r.scalar(kind_node, "kind") else {
            return;
        };
        if let Some(s) = Section::ALL.iter().find(|s| s.kind() == Some(kind)) {
            let s = match s {
                Section::BackendServices => Section::of_service(doc),
                s => *s,
            };
            return self.resource(s, doc);
        }
        if let Some(s) = Section::ALL
            .iter()
            .find(|s| s.kind().is_some() && kind.strip_suffix("List") == s.kind())
        {
            return self.list_document(*s, doc, false);
        }
        if let Some(s) = Section::ALL.iter().find(|s| {
            s.aggregated() && s.kind().is_some() && kind.strip_suffix("AggregatedList") == s.kind()
        }) {
            return self.list_document(*s, doc, true);
        }
        let base = kind
            .strip_suffix("AggregatedList")
            .or_else(|| kind.strip_suffix("List"))
            .unwrap_or(kind);
        let msg = if let Some((_, why)) = KINDS_LATER.iter().find(|(k, _)| *k == base) {
            format!("`{kind}`: {why}")
        } else if kind == "compute#instanceGroupsListInstances" {
            format!("`{kind}` (the output of `list-instances`) does not name its group: paste its items into the instance group's `instances`")
        } else if !kind.starts_with("compute#") {
            format!(
                "`kind: {kind}` is not supported yet: Kubernetes manifests (SPEC R7) come later"
            )
        } else {
            format!("`{kind}` is not a resource of a passthrough load balancer")
        };
        self.r.err(kind_node.pos, "kind", msg, Some(valid_kinds()));
    }

    /// A REST list (`compute#targetPoolList`: `items: [...]`) or aggregated list
    /// (`items: {regions/R: {targetPools: [...]}}`).
    fn list_document(&mut self, s: Section, doc: &Node, aggregated: bool) {
        let Some(o) = self.r.object_with(
            doc,
            "",
            &["kind", "items", "nextPageToken", "unreachables", "warning"],
            &["id", "selfLink"],
            &[],
        ) else {
            return;
        };
        if let Some(n) = o.get("nextPageToken") {
            if n.scalar() != Some("") {
                self.r.err(
                    n.pos,
                    "nextPageToken",
                    "this is one page of a longer list: the resources of the other pages are missing",
                    Some("every page, or the list as `gcloud ... list` prints it".into()),
                );
            }
        }
        if let Some(n) = o.get("unreachables") {
            if !matches!(&n.value, Value::Seq(v) if v.is_empty()) {
                self.r.err(
                    n.pos,
                    "unreachables",
                    "some regions or zones could not be listed: their resources are missing",
                    Some("a list made when every scope answered".into()),
                );
            }
        }
        let Some(items) = o.get("items") else {
            return;
        };
        let route = |s: Section, item: &Node| match s {
            Section::BackendServices | Section::RegionBackendServices => Section::of_service(item),
            s => s,
        };
        if !aggregated {
            for item in self.r.list(Some(items), "items") {
                self.resource(route(s, item), item);
            }
            return;
        }
        let Value::Map(scopes) = &items.value else {
            self.r.err(
                items.pos,
                "items",
                format!(
                    "expected a mapping of regions or zones, found {}",
                    items.kind()
                ),
                None,
            );
            return;
        };
        for (scope, v) in scopes {
            let path = format!("items.{}", scope.scalar().unwrap_or("?"));
            if let Some(so) = self.r.object(v, &path, &[s.list_field(), "warning"], &[]) {
                let list_path = so.path(s.list_field());
                for item in self.r.list(so.get(s.list_field()), &list_path) {
                    self.resource(route(s, item), item);
                }
            }
        }
    }

    /// One object of section `s`, in our form or as a Google Cloud resource.
    fn resource(&mut self, s: Section, node: &Node) {
        let index = self.next[s as usize];
        self.next[s as usize] += 1;
        let path = format!("{}[{index}]", s.field());
        if node.is_null() {
            self.r
                .err(node.pos, &path, "expected a mapping, found null", None);
            return;
        }
        let kind = map_get(node, "kind");
        if let (Some(k), Some(want)) = (kind, s.kind()) {
            if let Some(text) = k.scalar() {
                if text != want {
                    self.r.err(
                        k.pos,
                        &format!("{path}.kind"),
                        format!("`{text}` does not belong in `{}`", s.field()),
                        Some(want.into()),
                    );
                    return;
                }
            }
        }
        let r = &mut self.r;
        let c = &mut self.config;
        match s {
            Section::Rules => {
                if let Some(o) = r.object_with(node, &path, RULE, RULE_IGNORED, RULE_LATER) {
                    c.forwarding_rules.extend(read_rule(r, &o, index));
                }
            }
            Section::Pools => {
                if let Some(o) = r.object_with(node, &path, POOL, OUTPUT_ONLY, POOL_LATER) {
                    c.target_pools.extend(read_pool(r, &o, index));
                }
            }
            Section::TargetInstances => {
                if let Some(o) = r.object_with(
                    node,
                    &path,
                    TARGET_INSTANCE,
                    OUTPUT_ONLY,
                    TARGET_INSTANCE_LATER,
                ) {
                    c.target_instances
                        .extend(read_target_instance(r, &o, index));
                }
            }
            Section::Instances => {
                // A Compute Engine instance says so by its `kind` or its network interfaces.
                let gce = kind.is_some() || map_get(node, "networkInterfaces").is_some();
                let (known, ignored, read): (_, _, fn(&mut Reader, &Obj, usize) -> _) = if gce {
                    (GCE_INSTANCE, GCE_INSTANCE_IGNORED, read_gce_instance)
                } else {
                    (INSTANCE, OUTPUT_ONLY, read_instance)
                };
                if let Some(o) = r.object_with(node, &path, known, ignored, INSTANCE_LATER) {
                    c.instances.extend(read(r, &o, index));
                }
            }
            Section::HttpHealthChecks => {
                if let Some(o) = r.object_with(node, &path, HEALTH_CHECK, OUTPUT_ONLY, &[]) {
                    c.http_health_checks.extend(read_health_check(r, &o, index));
                }
            }
            Section::BackendServices | Section::RegionBackendServices => {
                if let Some(o) = r.object_with(
                    node,
                    &path,
                    services::SERVICE,
                    services::SERVICE_IGNORED,
                    services::SERVICE_LATER,
                ) {
                    let global = s == Section::BackendServices;
                    c.backend_services
                        .extend(services::read_backend_service(r, &o, index, global));
                }
            }
            Section::InstanceGroups => {
                if let Some(o) = r.object_with(
                    node,
                    &path,
                    services::INSTANCE_GROUP,
                    services::INSTANCE_GROUP_IGNORED,
                    &[],
                ) {
                    c.instance_groups
                        .extend(services::read_instance_group(r, &o, index));
                }
            }
            Section::NetworkEndpointGroups => {
                if let Some(o) = r.object_with(
                    node,
                    &path,
                    services::NEG,
                    services::INSTANCE_GROUP_IGNORED,
                    &[],
                ) {
                    c.network_endpoint_groups
                        .extend(services::read_network_endpoint_group(r, &o, index));
                }
            }
            Section::HealthChecks => {
                if let Some(o) = r.object_with(
                    node,
                    &path,
                    services::HEALTH_CHECK,
                    OUTPUT_ONLY,
                    services::HEALTH_CHECK_LATER,
                ) {
                    c.health_checks
                        .extend(services::read_health_check(r, &o, index));
                }
            }
            Section::ServiceLbPolicies => {
                if let Some(o) =
                    r.object_with(node, &path, services::POLICY, services::POLICY_IGNORED, &[])
                {
                    c.service_lb_policies
                        .extend(services::read_service_lb_policy(r, &o, index));
                }
            }
        }
    }
}

/// Settles what the file left to the relations: a backend's `group` written as a bare name
/// is a network endpoint group when only such a group has that name (an instance group
/// otherwise; a name both have is reported by the checks).
fn link(config: &mut Config) {
    let negs: std::collections::HashSet<String> = config
        .network_endpoint_groups
        .iter()
        .map(|g| g.name.clone())
        .collect();
    let igs: std::collections::HashSet<String> = config
        .instance_groups
        .iter()
        .map(|g| g.name.clone())
        .collect();
    for b in config
        .backend_services
        .iter_mut()
        .flat_map(|s| s.backends.iter_mut())
        .filter(|b| b.group.collection.is_none())
    {
        b.neg = negs.contains(&b.group.name) && !igs.contains(&b.group.name);
    }
}

/// Parses a configuration text. The returned [`Config`] holds everything that could be read
/// (objects with errors are left out); the diagnostics hold every problem, sorted.
///
/// The text is YAML or JSON: one document of our form (top-level sections), Compute Engine
/// resources as `gcloud ... describe` or the REST API print them (each with its `kind`), lists
/// of them (a JSON array, `compute#...List`, `compute#...AggregatedList`), or a YAML stream of
/// any of these separated by `---`; all documents merge into one configuration.
pub fn parse_config(file: &str, text: &str) -> (Config, Diagnostics) {
    let mut config = Config {
        file: file.to_string(),
        ..Config::default()
    };
    let docs = match tree::parse_stream(file, text) {
        Ok(d) => d,
        Err(d) => return (config, d),
    };
    let mut loader = Loader {
        r: Reader::new(file),
        config,
        next: [0; Section::ALL.len()],
        nic_at: None,
    };
    for doc in &docs {
        loader.document(doc);
    }
    config = loader.config;
    link(&mut config);
    let mut diags = loader.r.diags;
    diags.extend(check(&config));
    diags.sort();
    (config, diags)
}

/// Relations between objects: unique names, references, failover, health-check timing,
/// overlapping rules, delivery of each VIP family, MACs. Capacity is checked by the compiler
/// against a profile.
///
/// One phase after the other, each a function: names, references, health-check timing, port
/// overlaps, regions and zones, and what each pool's delivery needs.
pub fn check(c: &Config) -> Diagnostics {
    let mut d = Diagnostics::new();
    check_unique_names(&mut d, c);
    let idx = Index::new(c);
    check_references(&mut d, c, &idx);
    check_health_check_timing(&mut d, c);
    check_port_overlaps(&mut d, c);
    check_locations(&mut d, c, &idx.pools, &idx.tis, &idx.instances);
    check_vip_families(&mut d, c, &idx);
    check_delivery_needs(&mut d, c, &idx);
    service_checks::check_services(&mut d, c, &idx);
    bgp::check_bgp(&mut d, c);
    d
}

/// Unique names. Target pools and target instances share one namespace: `target` names one.
fn check_unique_names(d: &mut Diagnostics, c: &Config) {
    let f = c.file.as_str();
    // (namespace, name) → where it was first defined; paths are formatted only on a repeat.
    let mut seen: HashMap<(&str, &str), (&str, usize, u32)> = HashMap::new();
    let named = c
        .forwarding_rules
        .iter()
        .map(|r| ("rule", "forwardingRules", &r.name, &r.loc))
        .chain(
            c.target_pools
                .iter()
                .map(|p| ("target", "targetPools", &p.name, &p.loc)),
        )
        .chain(
            c.target_instances
                .iter()
                .map(|t| ("target", "targetInstances", &t.name, &t.loc)),
        )
        .chain(
            c.instances
                .iter()
                .map(|i| ("instance", "instances", &i.name, &i.loc)),
        )
        .chain(
            c.http_health_checks
                .iter()
                .map(|h| ("hc", "httpHealthChecks", &h.name, &h.loc)),
        )
        .chain(
            c.backend_services
                .iter()
                .map(|b| ("target", b.section(), &b.name, &b.loc)),
        )
        .chain(
            c.instance_groups
                .iter()
                .map(|g| ("ig", "instanceGroups", &g.name, &g.loc)),
        )
        .chain(
            c.network_endpoint_groups
                .iter()
                .map(|g| ("neg", "networkEndpointGroups", &g.name, &g.loc)),
        )
        .chain(
            c.health_checks
                .iter()
                .map(|h| ("healthCheck", "healthChecks", &h.name, &h.loc)),
        )
        .chain(
            c.service_lb_policies
                .iter()
                .map(|p| ("policy", "serviceLbPolicies", &p.name, &p.loc)),
        );
    for (space, list, name, loc) in named {
        let pos = loc.field("name");
        match seen.get(&(space, name.as_str())) {
            Some((first_list, first_index, first_line)) => d.push(
                f,
                pos,
                format!("{list}[{}].name", loc.index),
                format!(
                    "duplicate name `{name}`: already used by {first_list}[{first_index}] (line {first_line}){}",
                    if space == "target" && *first_list != list {
                        " (target pools, target instances and backend services share one namespace: health files and `explain` name pools by name)"
                    } else {
                        ""
                    }
                ),
                None,
            ),
            None => {
                seen.insert((space, name.as_str()), (list, loc.index, pos.line));
            }
        }
    }
}

/// Where a backend service's member is written ([`Index::service_members`]): a group's index
/// and the member's, worded only for a diagnostic.
#[derive(Debug, Clone, Copy)]
enum MemberPath {
    /// `instanceGroups[g].instances[i]`.
    Instance(usize, usize),
    /// `networkEndpointGroups[g].networkEndpoints[i].instance`.
    Endpoint(usize, usize),
}

impl fmt::Display for MemberPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberPath::Instance(g, i) => write!(f, "instanceGroups[{g}].instances[{i}]"),
            MemberPath::Endpoint(g, i) => {
                write!(
                    f,
                    "networkEndpointGroups[{g}].networkEndpoints[{i}].instance"
                )
            }
        }
    }
}

/// The objects of a configuration by name, for the checks that follow references.
struct Index<'c> {
    file: &'c str,
    pools: HashMap<&'c str, &'c TargetPool>,
    tis: HashMap<&'c str, &'c TargetInstance>,
    instances: HashMap<&'c str, &'c Instance>,
    hcs: HashMap<&'c str, &'c HttpHealthCheck>,
    services: HashMap<&'c str, &'c BackendService>,
    igs: HashMap<&'c str, &'c InstanceGroup>,
    negs: HashMap<&'c str, &'c NetworkEndpointGroup>,
    health_checks: HashMap<&'c str, &'c HealthCheck>,
    policies: HashMap<&'c str, &'c ServiceLbPolicy>,
}

impl<'c> Index<'c> {
    fn new(c: &'c Config) -> Index<'c> {
        Index {
            services: c
                .backend_services
                .iter()
                .map(|b| (b.name.as_str(), b))
                .collect(),
            igs: c
                .instance_groups
                .iter()
                .map(|g| (g.name.as_str(), g))
                .collect(),
            negs: c
                .network_endpoint_groups
                .iter()
                .map(|g| (g.name.as_str(), g))
                .collect(),
            health_checks: c
                .health_checks
                .iter()
                .map(|h| (h.name.as_str(), h))
                .collect(),
            policies: c
                .service_lb_policies
                .iter()
                .map(|p| (p.name.as_str(), p))
                .collect(),
            file: c.file.as_str(),
            pools: c
                .target_pools
                .iter()
                .map(|p| (p.name.as_str(), p))
                .collect(),
            tis: c
                .target_instances
                .iter()
                .map(|t| (t.name.as_str(), t))
                .collect(),
            instances: c.instances.iter().map(|i| (i.name.as_str(), i)).collect(),
            hcs: c
                .http_health_checks
                .iter()
                .map(|h| (h.name.as_str(), h))
                .collect(),
        }
    }

    /// The member instances of a backend service, through its groups, each with the path and
    /// reference that makes it a member (`instanceGroups[0].instances[1]`,
    /// `networkEndpointGroups[2].networkEndpoints[0].instance`).
    fn service_members(&self, b: &BackendService) -> Vec<(MemberPath, &'c Ref)> {
        let mut v = Vec::new();
        for backend in &b.backends {
            let name = backend.group.name.as_str();
            if backend.neg {
                if let Some(g) = self.negs.get(name) {
                    for (i, e) in g.endpoints.iter().enumerate() {
                        v.push((MemberPath::Endpoint(g.loc.index, i), &e.instance));
                    }
                }
            } else if let Some(g) = self.igs.get(name) {
                for (i, m) in g.instances.iter().enumerate() {
                    v.push((MemberPath::Instance(g.loc.index, i), m));
                }
            }
        }
        v
    }

    /// Sorted names of one map (built only when a reference dangles).
    fn names<V>(m: &HashMap<&str, V>) -> Vec<String> {
        let mut v: Vec<String> = m.keys().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    /// A reference to no object of its kind: "no {what} named `x`, did you mean ...".
    fn dangling(&self, d: &mut Diagnostics, what: &str, r: &Ref, path: String, valid: &[String]) {
        let v: Vec<&str> = valid.iter().map(String::as_str).collect();
        let hint = did_you_mean(&r.name, &v)
            .map(|s| format!(", did you mean `{s}`?"))
            .unwrap_or_default();
        let list = if valid.is_empty() {
            "none defined".to_string()
        } else if valid.len() > 12 {
            format!("{}, ... ({} in all)", valid[..12].join(", "), valid.len())
        } else {
            valid.join(", ")
        };
        d.push(
            self.file,
            r.pos,
            path,
            format!("no {what} named `{}`{hint}", r.name),
            Some(list),
        );
    }
}

/// Every reference names an object of its kind: rule targets, pool members, health checks and
/// backup pools (with `failoverRatio`), target instances' instances.
fn check_references(d: &mut Diagnostics, c: &Config, idx: &Index) {
    check_rule_targets(d, c, idx);
    for p in &c.target_pools {
        check_target_pool_references(d, c, idx, p);
    }
    for t in &c.target_instances {
        if !idx.instances.contains_key(t.instance.name.as_str()) {
            idx.dangling(
                d,
                "instance",
                &t.instance,
                format!("targetInstances[{}].instance", t.loc.index),
                &Index::names(&idx.instances),
            );
        }
    }
}

/// The `target` of each forwarding rule of a target pool or target instance.
fn check_rule_targets(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    let (pools, tis) = (&idx.pools, &idx.tis);
    let target_names = || {
        let mut v = Index::names(pools);
        v.extend(Index::names(tis));
        v.sort();
        v
    };
    for r in &c.forwarding_rules {
        let name = r.target.name.as_str();
        let (is_pool, is_ti) = (pools.contains_key(name), tis.contains_key(name));
        if r.backend_service {
            // Checked with the other relations of backend services.
            continue;
        }
        let path = format!("forwardingRules[{}].target", r.loc.index);
        if !is_pool && !is_ti && idx.services.contains_key(name) {
            d.push(
                f,
                r.target.pos,
                path,
                format!("`{name}` is a backend service: a forwarding rule names a backend service in `backendService`, not `target`"),
                Some(format!("`backendService: {name}`")),
            );
            continue;
        }
        // A path or URL says which of the two it names; a short name may be either.
        match r.target.collection {
            Some("targetPools") if !is_pool => {
                let what = if is_ti {
                    "target pool (it is a target instance)"
                } else {
                    "target pool"
                };
                idx.dangling(d, what, &r.target, path, &Index::names(pools));
            }
            Some("targetInstances") if !is_ti => {
                let what = if is_pool {
                    "target instance (it is a target pool)"
                } else {
                    "target instance"
                };
                idx.dangling(d, what, &r.target, path, &Index::names(tis));
            }
            None if !is_pool && !is_ti => idx.dangling(
                d,
                "target pool or target instance",
                &r.target,
                path,
                &target_names(),
            ),
            _ => {}
        }
    }
}

/// A target pool's instances (each once), its health check (at most one) and its backup pool
/// (with a failover ratio, both or neither).
fn check_target_pool_references(d: &mut Diagnostics, c: &Config, idx: &Index, p: &TargetPool) {
    let f = c.file.as_str();
    let (pools, tis) = (&idx.pools, &idx.tis);
    let base = format!("targetPools[{}]", p.loc.index);
    let mut members: HashMap<&str, usize> = HashMap::new();
    for (i, m) in p.instances.iter().enumerate() {
        let path = format!("{base}.instances[{i}]");
        if !idx.instances.contains_key(m.name.as_str()) {
            idx.dangling(d, "instance", m, path, &Index::names(&idx.instances));
        } else if let Some(first) = members.insert(&m.name, i) {
            d.push(
                f,
                m.pos,
                path,
                format!(
                    "instance `{}` is listed twice (also at {base}.instances[{first}])",
                    m.name
                ),
                None,
            );
            members.insert(&m.name, first);
        }
    }
    for (i, h) in p.health_checks.iter().enumerate() {
        if !idx.hcs.contains_key(h.name.as_str()) {
            idx.dangling(
                d,
                "httpHealthCheck",
                h,
                format!("{base}.healthChecks[{i}]"),
                &Index::names(&idx.hcs),
            );
        }
    }
    if p.health_checks.len() > 1 {
        d.push(
            f,
            p.health_checks[1].pos,
            format!("{base}.healthChecks"),
            format!(
                "{} health checks given; a target pool takes at most one",
                p.health_checks.len()
            ),
            Some("zero or one legacy HTTP health check".into()),
        );
    }
    match (&p.backup_pool, &p.failover_ratio) {
        (Some(b), _) if b.name == p.name => d.push(
            f,
            b.pos,
            format!("{base}.backupPool"),
            "a pool cannot be its own backup pool",
            Some("another target pool".into()),
        ),
        (Some(b), _) if !pools.contains_key(b.name.as_str()) => {
            let what = if tis.contains_key(b.name.as_str()) {
                "target pool (it is a target instance)"
            } else {
                "target pool"
            };
            idx.dangling(
                d,
                what,
                b,
                format!("{base}.backupPool"),
                &Index::names(pools),
            );
        }
        _ => {}
    }
    match (&p.backup_pool, &p.failover_ratio) {
        (Some(b), None) => d.push(
            f,
            b.pos,
            format!("{base}.backupPool"),
            "`backupPool` needs `failoverRatio` as well",
            Some("both or neither".into()),
        ),
        (None, Some(_)) => d.push(
            f,
            p.loc.field("failoverRatio"),
            format!("{base}.failoverRatio"),
            "`failoverRatio` needs `backupPool` as well",
            Some("both or neither".into()),
        ),
        _ => {}
    }
}

/// A probe may not take longer than the interval between probes.
fn check_health_check_timing(d: &mut Diagnostics, c: &Config) {
    for h in &c.http_health_checks {
        if h.timeout_sec > h.check_interval_sec {
            d.push(
                &c.file,
                h.loc.field("timeoutSec"),
                format!("httpHealthChecks[{}].timeoutSec", h.loc.index),
                format!(
                    "timeoutSec {} is longer than checkIntervalSec {}",
                    h.timeout_sec, h.check_interval_sec
                ),
                Some(format!("1..={}", h.check_interval_sec)),
            );
        }
    }
}

/// Overlapping port ranges of rules on the same VIP and protocol (SPEC R2.2).
fn check_port_overlaps(d: &mut Diagnostics, c: &Config) {
    let f = c.file.as_str();
    let mut by_vip: BTreeMap<(IpAddr, Protocol), Vec<&ForwardingRule>> = BTreeMap::new();
    for r in c.forwarding_rules.iter().filter(|r| !r.loc.incomplete) {
        by_vip
            .entry((r.ip_address, r.ip_protocol))
            .or_default()
            .push(r);
    }
    for ((vip, proto), rules) in &by_vip {
        for (i, b) in rules.iter().enumerate() {
            if *proto == Protocol::L3Default {
                // Every port: a second L3_DEFAULT rule of the VIP could never match.
                if let Some(a) = rules[..i].first() {
                    d.push(
                        f,
                        b.loc.field("IPProtocol"),
                        format!("forwardingRules[{}].IPProtocol", b.loc.index),
                        format!(
                            "VIP {vip} has an L3_DEFAULT rule already: `{}` (forwardingRules[{}], line {})",
                            a.name, a.loc.index, a.loc.pos.line
                        ),
                        Some("one L3_DEFAULT rule per VIP (SPEC R2)".into()),
                    );
                }
                continue;
            }
            for a in &rules[..i] {
                let clash = b.port_ranges.iter().find_map(|pb| {
                    a.port_ranges
                        .iter()
                        .find(|pa| pa.overlaps(pb))
                        .map(|pa| (pa, pb))
                });
                if let Some((pa, pb)) = clash {
                    let field = if b.loc.fields.iter().any(|(n, _)| *n == "ports") {
                        "ports"
                    } else {
                        "portRange"
                    };
                    d.push(
                        f,
                        b.loc.field(field),
                        format!("forwardingRules[{}].{field}", b.loc.index),
                        format!(
                            "{pb} of rule `{}` overlaps {pa} of rule `{}` (forwardingRules[{}], line {}) on {vip} {}",
                            b.name,
                            a.name,
                            a.loc.index,
                            a.loc.pos.line,
                            proto.name()
                        ),
                        Some("disjoint port ranges for rules of one VIP and protocol".into()),
                    );
                }
            }
        }
    }
}

/// Delivery: encapsulation carries a packet in an outer header of the backend's family, and
/// the pipeline uses an outer header of the VIP's family (IPv4 in IPv4, IPv6 in IPv6).
fn check_vip_families(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    let mut reported: std::collections::HashSet<(usize, String)> = Default::default();
    for r in &c.forwarding_rules {
        let mut serving: Vec<(&str, Delivery, Vec<&Ref>)> = Vec::new();
        if let Some(p) = idx.pools.get(r.target.name.as_str()) {
            serving.push((&p.name, p.delivery, p.instances.iter().collect()));
            if let Some(b) = p
                .backup_pool
                .as_ref()
                .and_then(|b| idx.pools.get(b.name.as_str()))
            {
                serving.push((&b.name, b.delivery, b.instances.iter().collect()));
            }
        } else if let Some(t) = idx.tis.get(r.target.name.as_str()) {
            serving.push((&t.name, t.delivery, vec![&t.instance]));
        } else if let Some(b) = idx.services.get(r.target.name.as_str()) {
            let members = idx.service_members(b).into_iter().map(|m| m.1).collect();
            serving.push((&b.name, b.delivery, members));
        }
        for (pool, delivery, members) in serving {
            if delivery == Delivery::L2Dsr {
                continue;
            }
            for m in members {
                let Some(inst) = idx.instances.get(m.name.as_str()) else {
                    continue;
                };
                if inst.ip.is_ipv4() != r.ip_address.is_ipv4()
                    && reported.insert((r.loc.index, inst.name.clone()))
                {
                    let fam = |a: &IpAddr| if a.is_ipv4() { "IPv4" } else { "IPv6" };
                    d.push(
                        f,
                        r.loc.field("IPAddress"),
                        format!("forwardingRules[{}].IPAddress", r.loc.index),
                        format!(
                            "{} VIP {} cannot be delivered by {} to instance `{}` of pool `{pool}` ({} {}): {} carries a packet only in an outer header of its own family",
                            fam(&r.ip_address),
                            r.ip_address,
                            delivery.name(),
                            inst.name,
                            fam(&inst.ip),
                            inst.ip,
                            delivery.name()
                        ),
                        Some(format!("L2_DSR, or {} backends", fam(&r.ip_address))),
                    );
                }
            }
        }
    }
}

/// MACs and outer source prefixes that each pool's delivery needs.
fn check_delivery_needs(d: &mut Diagnostics, c: &Config, idx: &Index) {
    let f = c.file.as_str();
    // `via`: the backend service an instance serves through its group, named in the message
    // (the reference is in the group, where the pool is not visible).
    let need_mac = |d: &mut Diagnostics,
                    delivery: Delivery,
                    m: &Ref,
                    via: Option<&str>,
                    path: &dyn Fn() -> String| {
        let Some(inst) = idx.instances.get(m.name.as_str()) else {
            return;
        };
        if inst.mac.is_some() {
            return;
        }
        let of = via
            .map(|s| format!(" (backend service `{s}`)"))
            .unwrap_or_default();
        if delivery == Delivery::L2Dsr {
            d.push(
                f,
                m.pos,
                path(),
                format!(
                    "instance `{}` has no `mac`, which L2_DSR delivery{of} needs",
                    inst.name
                ),
                Some(format!("a `mac` on the instance (Google Cloud does not print one: add it), or `delivery: IPIP` or `GUE` on the {} with `nic.nextHopMac`", if via.is_some() { "backend service" } else { "pool" })),
            );
        } else if c.nic.next_hop_mac.is_none() {
            d.push(
                f,
                m.pos,
                path(),
                format!(
                    "instance `{}` has no `mac` and `nic.nextHopMac` is not set: {}{of} needs a next-hop MAC",
                    inst.name,
                    delivery.name()
                ),
                Some("a `mac` on the instance or `nic.nextHopMac`".into()),
            );
        }
    };
    let mut families_needed: Vec<(bool, Pos, String, Delivery)> = Vec::new();
    for p in &c.target_pools {
        for (i, m) in p.instances.iter().enumerate() {
            need_mac(d, p.delivery, m, None, &|| {
                format!("targetPools[{}].instances[{i}]", p.loc.index)
            });
        }
        if p.delivery != Delivery::L2Dsr {
            for v6 in [false, true] {
                let any = p.instances.iter().any(|m| {
                    idx.instances
                        .get(m.name.as_str())
                        .is_some_and(|i| i.ip.is_ipv6() == v6)
                });
                if any {
                    families_needed.push((
                        v6,
                        p.loc.field("delivery"),
                        format!("targetPools[{}].delivery", p.loc.index),
                        p.delivery,
                    ));
                }
            }
        }
    }
    for t in &c.target_instances {
        need_mac(d, t.delivery, &t.instance, None, &|| {
            format!("targetInstances[{}].instance", t.loc.index)
        });
        if t.delivery != Delivery::L2Dsr {
            if let Some(inst) = idx.instances.get(t.instance.name.as_str()) {
                families_needed.push((
                    inst.ip.is_ipv6(),
                    t.loc.field("delivery"),
                    format!("targetInstances[{}].delivery", t.loc.index),
                    t.delivery,
                ));
            }
        }
    }
    for b in &c.backend_services {
        let members = idx.service_members(b);
        for (path, m) in &members {
            need_mac(d, b.delivery, m, Some(&b.name), &|| path.to_string());
        }
        if b.delivery != Delivery::L2Dsr {
            for v6 in [false, true] {
                let any = members.iter().any(|(_, m)| {
                    idx.instances
                        .get(m.name.as_str())
                        .is_some_and(|i| i.ip.is_ipv6() == v6)
                });
                if any {
                    families_needed.push((
                        v6,
                        b.loc.field("delivery"),
                        format!("{}.delivery", b.path()),
                        b.delivery,
                    ));
                }
            }
        }
    }
    families_needed.dedup_by(|a, b| a.0 == b.0 && a.2 == b.2);
    for (v6, pos, path, delivery) in families_needed {
        let (set, field) = if v6 {
            (c.nic.outer_source_ipv6.is_some(), "nic.outerSourceIpv6")
        } else {
            (c.nic.outer_source_ipv4.is_some(), "nic.outerSourceIpv4")
        };
        if !set {
            d.push(
                f,
                pos,
                path,
                format!(
                    "{} delivery to {} backends needs an outer source prefix, but `{field}` is not set",
                    delivery.name(),
                    if v6 { "IPv6" } else { "IPv4" }
                ),
                Some(format!("set `{field}`, or use L2_DSR")),
            );
        }
    }
}

/// Where an object is, as a description for messages: its scope and "target pool `p` is in
/// region R (targetPools[0], line 9)".
type Located = (Scope, String);

fn zone_text(zone: &str) -> String {
    match region_of_zone(zone) {
        Some(r) => format!("zone {zone} (region {r})"),
        None => format!("zone {zone}"),
    }
}

/// Regions and zones of one load balancer (SPEC R1: a target pool's instances are in its
/// region; a target instance's instance is in its zone): a rule, its target, the target's
/// backup pool and the instances must agree wherever both sides say where they are. A reference
/// written as a path or URL must also agree with the object it names.
fn check_locations(
    d: &mut Diagnostics,
    c: &Config,
    pools: &HashMap<&str, &TargetPool>,
    tis: &HashMap<&str, &TargetInstance>,
    instances: &HashMap<&str, &Instance>,
) {
    let places = Places {
        f: c.file.as_str(),
        pools,
        tis,
        instances,
    };
    for r in &c.forwarding_rules {
        places.check_rule(d, r);
    }
    for p in &c.target_pools {
        places.check_pool(d, p);
    }
    for t in &c.target_instances {
        places.check_target_instance(d, t);
    }
}

/// Where the objects of a configuration are, for [`check_locations`].
struct Places<'c> {
    f: &'c str,
    pools: &'c HashMap<&'c str, &'c TargetPool>,
    tis: &'c HashMap<&'c str, &'c TargetInstance>,
    instances: &'c HashMap<&'c str, &'c Instance>,
}

impl Places<'_> {
    fn instance_at(i: &Instance) -> Option<Located> {
        (!i.zone.is_empty()).then(|| {
            (
                Scope::Zone(i.zone.clone()),
                format!(
                    "instance `{}` is in {} (instances[{}], line {})",
                    i.name,
                    zone_text(&i.zone),
                    i.loc.index,
                    i.loc.pos.line
                ),
            )
        })
    }

    /// A pool is where its `region` says, or else where its first member with a zone is.
    fn pool_at(&self, p: &TargetPool) -> Option<Located> {
        if !p.region.is_empty() {
            return Some((
                Scope::Region(p.region.clone()),
                format!(
                    "target pool `{}` is in region {} (targetPools[{}], line {})",
                    p.name, p.region, p.loc.index, p.loc.pos.line
                ),
            ));
        }
        p.instances.iter().find_map(|m| {
            let i = self.instances.get(m.name.as_str())?;
            let (scope, _) = Self::instance_at(i)?;
            scope.region()?;
            Some((
                scope,
                format!(
                    "target pool `{}` has instance `{}` in {} (line {})",
                    p.name,
                    i.name,
                    zone_text(&i.zone),
                    i.loc.pos.line
                ),
            ))
        })
    }

    fn ti_at(&self, t: &TargetInstance) -> Option<Located> {
        if !t.zone.is_empty() {
            return Some((
                Scope::Zone(t.zone.clone()),
                format!(
                    "target instance `{}` is in {} (targetInstances[{}], line {})",
                    t.name,
                    zone_text(&t.zone),
                    t.loc.index,
                    t.loc.pos.line
                ),
            ));
        }
        self.instances
            .get(t.instance.name.as_str())
            .and_then(|i| Self::instance_at(i))
    }

    /// One reference from an object `from` (where it is, if known) to an object at `to`.
    fn reference(
        &self,
        d: &mut Diagnostics,
        m: &Ref,
        path: String,
        from: Option<&Located>,
        to: Option<Located>,
    ) {
        let f = self.f;
        if let (Some(written), Some((at, desc))) = (&m.scope, &to) {
            let contradicts = match (written, at) {
                (Scope::Zone(a), Scope::Zone(b)) => a != b,
                _ => written
                    .region()
                    .zip(at.region())
                    .is_some_and(|(a, b)| a != b),
            };
            if contradicts {
                d.push(
                    f,
                    m.pos,
                    path,
                    format!("the reference names {written}, but {desc}"),
                    Some(format!(
                        "the {} the object is in",
                        if matches!(at, Scope::Zone(_)) {
                            "zone"
                        } else {
                            "region"
                        }
                    )),
                );
                return;
            }
        }
        let to_region = to
            .as_ref()
            .and_then(|(s, _)| s.region().map(str::to_string))
            .or_else(|| {
                m.scope
                    .as_ref()
                    .and_then(|s| s.region().map(str::to_string))
            });
        let to_desc = to.map(|(_, desc)| desc).unwrap_or_else(|| {
            format!(
                "the reference names {}",
                m.scope.as_ref().map_or(String::new(), |s| s.to_string())
            )
        });
        if let (Some((from_scope, from_desc)), Some(to_region)) = (from, to_region) {
            if from_scope.region().is_some_and(|r| r != to_region) {
                d.push(
                    f,
                    m.pos,
                    path,
                    format!("{to_desc}, but {from_desc}"),
                    Some(
                        "one region for the forwarding rules, target pools and instances of a load balancer"
                            .to_string(),
                    ),
                );
            }
        }
    }

    /// A forwarding rule and its target.
    fn check_rule(&self, d: &mut Diagnostics, r: &ForwardingRule) {
        let from = (!r.region.is_empty()).then(|| {
            (
                Scope::Region(r.region.clone()),
                format!(
                    "forwarding rule `{}` is in region {} (forwardingRules[{}], line {})",
                    r.name, r.region, r.loc.index, r.loc.pos.line
                ),
            )
        });
        let name = r.target.name.as_str();
        let to = match (self.pools.get(name), self.tis.get(name)) {
            (Some(p), _) if r.target.collection != Some("targetInstances") => self.pool_at(p),
            (_, Some(t)) if r.target.collection != Some("targetPools") => self.ti_at(t),
            _ => return,
        };
        self.reference(
            d,
            &r.target,
            format!("forwardingRules[{}].target", r.loc.index),
            from.as_ref(),
            to,
        );
    }

    /// A target pool, its instances and its backup pool.
    fn check_pool(&self, d: &mut Diagnostics, p: &TargetPool) {
        let here = self.pool_at(p);
        for (i, m) in p.instances.iter().enumerate() {
            if let Some(inst) = self.instances.get(m.name.as_str()) {
                self.reference(
                    d,
                    m,
                    format!("targetPools[{}].instances[{i}]", p.loc.index),
                    here.as_ref(),
                    Self::instance_at(inst),
                );
            }
        }
        if let Some(b) = &p.backup_pool {
            if let Some(bp) = self
                .pools
                .get(b.name.as_str())
                .filter(|bp| bp.name != p.name)
            {
                self.reference(
                    d,
                    b,
                    format!("targetPools[{}].backupPool", p.loc.index),
                    here.as_ref(),
                    self.pool_at(bp),
                );
            }
        }
    }

    /// A target instance and its instance: one zone, one network.
    fn check_target_instance(&self, d: &mut Diagnostics, t: &TargetInstance) {
        let f = self.f;
        let Some(inst) = self.instances.get(t.instance.name.as_str()) else {
            return;
        };
        let path = format!("targetInstances[{}].instance", t.loc.index);
        // A target instance serves an instance of its own zone.
        if !t.zone.is_empty() && !inst.zone.is_empty() && t.zone != inst.zone {
            d.push(
                f,
                t.instance.pos,
                path,
                format!(
                    "instance `{}` is in {} (instances[{}], line {}), but target instance `{}` is in {}",
                    inst.name,
                    zone_text(&inst.zone),
                    inst.loc.index,
                    inst.loc.pos.line,
                    t.name,
                    zone_text(&t.zone)
                ),
                Some("the target instance's own zone".into()),
            );
        } else {
            self.reference(d, &t.instance, path, None, Self::instance_at(inst));
        }
        // Packets go to nic0; a target instance forwarding to another network's interface
        // would be delivered elsewhere than the user asked.
        if !t.network.is_empty() && !inst.network.is_empty() && t.network != inst.network {
            d.push(
                f,
                t.loc.field("network"),
                format!("targetInstances[{}].network", t.loc.index),
                format!(
                    "target instance `{}` forwards to network `{}`, but instance `{}`'s nic0 is on network `{}`: only nic0 is served",
                    t.name, t.network, inst.name, inst.network
                ),
                Some(format!("`{}`, or leave `network` out", inst.network)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges_hand_worked() {
        assert_eq!(parse_port_range("80"), Ok(PortRange { lo: 80, hi: 80 }));
        assert_eq!(
            parse_port_range("8000-8080"),
            Ok(PortRange { lo: 8000, hi: 8080 })
        );
        assert!(parse_port_range("0").is_err());
        assert!(parse_port_range("65536").is_err());
        assert!(parse_port_range("90-80").is_err());
        assert!(parse_port_range("http").is_err());
    }

    #[test]
    fn prefixes_and_macs_hand_worked() {
        assert_eq!(parse_prefix("198.51.100.0/24").unwrap().len, 24);
        assert_eq!(parse_prefix("2001:db8::1").unwrap().len, 128);
        let e = parse_prefix("198.51.100.1/24").unwrap_err();
        assert!(e.contains("198.51.100.0/24"), "{e}");
        assert!(parse_prefix("198.51.100.0/33").is_err());
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some(0x0200_0000_000a));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:zz"), None);
    }
}
