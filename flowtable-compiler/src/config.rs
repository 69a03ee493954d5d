//! Reading a configuration file into the model: schema, types, values, and the checks that
//! relate objects to each other. Every problem is collected; nothing stops at the first.

use crate::diag::{did_you_mean, Diagnostics, Pos};
use crate::model::*;
use crate::tree::{self, Node, Value};
use nlb_hw::enums::{Affinity, DefaultAction, Delivery};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

/// Why a field is refused although it is a real field of the product.
const BACKEND_SERVICES: &str =
    "is not supported yet: it belongs to backend services (SPEC R6), which come later";

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

    pub fn reference(&mut self, node: &Node, path: &str) -> Option<Ref> {
        self.scalar(node, path).map(|s| Ref {
            name: s.to_string(),
            pos: node.pos,
        })
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

/// Parses `"80"` or `"8000-8080"`.
fn parse_port_range(text: &str) -> Result<PortRange, String> {
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

const TOP: &[&str] = &[
    "nic",
    "forwardingRules",
    "targetPools",
    "targetInstances",
    "instances",
    "httpHealthChecks",
];
const TOP_LATER: &[(&str, &str)] = &[
    ("backendServices", BACKEND_SERVICES),
    ("serviceLbPolicies", BACKEND_SERVICES),
    ("healthChecks", "is not supported yet: these are the newer health checks of backend services (SPEC R6); use `httpHealthChecks`"),
    ("apiVersion", "is not supported yet: Kubernetes manifests (SPEC R7) come later"),
    ("kind", "is not supported yet: Kubernetes manifests (SPEC R7) come later"),
];
const NIC: &[&str] = &[
    "mac",
    "defaultAction",
    "guePort",
    "outerSourceIpv4",
    "outerSourceIpv6",
    "healthCheckSourceRanges",
    "nextHopMac",
];
const RULE: &[&str] = &[
    "name",
    "description",
    "region",
    "IPAddress",
    "IPProtocol",
    "portRange",
    "target",
    "sourceRanges",
    "loadBalancingScheme",
];
const RULE_LATER: &[(&str, &str)] = &[
    ("backendService", BACKEND_SERVICES),
    (
        "ports",
        "is not supported yet: use `portRange` (one range per rule)",
    ),
    (
        "allPorts",
        "is not supported yet: leave `portRange` out for all ports",
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
    ("securityPolicy", "is not supported yet"),
];
const TARGET_INSTANCE: &[&str] = &[
    "name",
    "description",
    "zone",
    "instance",
    "natPolicy",
    "delivery",
    "idleTimeoutSec",
];
const INSTANCE: &[&str] = &["name", "description", "ip", "zone", "mac", "weight"];
const INSTANCE_LATER: &[(&str, &str)] = &[
    ("capacityScaler", BACKEND_SERVICES),
    ("balancingMode", BACKEND_SERVICES),
    ("preference", BACKEND_SERVICES),
    ("failover", BACKEND_SERVICES),
    ("maxRate", BACKEND_SERVICES),
    ("maxUtilization", BACKEND_SERVICES),
    ("maxConnections", BACKEND_SERVICES),
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

const DELIVERIES: &[(&str, Delivery)] = &[
    ("L2_DSR", Delivery::L2Dsr),
    ("IPIP", Delivery::Ipip),
    ("GUE", Delivery::Gue),
];

fn read_nic(r: &mut Reader, node: Option<&Node>) -> Nic {
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
    nic
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
    // Errors in the fields that decide what the rule matches make overlap checks moot.
    let errors_before = r.diags.len();
    let proto = r.enumerated(
        o,
        "IPProtocol",
        Protocol::Tcp,
        &[("TCP", Protocol::Tcp), ("UDP", Protocol::Udp)],
        &[(
            "L3_DEFAULT",
            "is not supported yet: write one TCP and one UDP rule",
        )],
    );
    let mut port_range = PortRange::ALL;
    if let Some(n) = o.get("portRange") {
        let path = o.path("portRange");
        if let Some(text) = r.scalar(n, &path) {
            match parse_port_range(text) {
                Ok(pr) => port_range = pr,
                Err(msg) => r.err(
                    n.pos,
                    &path,
                    msg,
                    Some("\"80\" or \"8000-8080\" with ports 1..=65535, low ≤ high; leave out for all ports".into()),
                ),
            }
        }
    }
    let match_fields_bad = r.diags.len() > errors_before;
    let target = match o.get("target") {
        Some(n) => r.reference(n, &o.path("target")),
        None => {
            r.err(
                o.pos,
                &o.path("target"),
                "`target` is required: a target pool or target instance",
                None,
            );
            None
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
    let mut loc = o.loc(index);
    loc.incomplete = match_fields_bad;
    Some(ForwardingRule {
        name: name?,
        ip_address: ip?,
        ip_protocol: proto,
        port_range,
        target: target?,
        source_ranges,
        loc,
    })
}

fn refs(r: &mut Reader, o: &Obj, field: &str) -> Vec<Ref> {
    let path = o.path(field);
    let items = r.list(o.get(field), &path);
    items
        .iter()
        .enumerate()
        .filter_map(|(i, n)| r.reference(n, &format!("{path}[{i}]")))
        .collect()
}

fn read_pool(r: &mut Reader, o: &Obj, index: usize) -> Option<TargetPool> {
    let name = r.name(o);
    let region = r.string(o, "region", false).unwrap_or_default();
    let instances = refs(r, o, "instances");
    let health_checks = refs(r, o, "healthChecks");
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
        .and_then(|n| r.reference(n, &o.path("backupPool")));
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

fn read_target_instance(r: &mut Reader, o: &Obj, index: usize) -> Option<TargetInstance> {
    let name = r.name(o);
    let zone = r.string(o, "zone", false).unwrap_or_default();
    let instance = match o.get("instance") {
        Some(n) => r.reference(n, &o.path("instance")),
        None => {
            r.err(o.pos, &o.path("instance"), "`instance` is required", None);
            None
        }
    };
    r.enumerated(o, "natPolicy", (), &[("NO_NAT", ())], &[]);
    let delivery = r.enumerated(o, "delivery", Delivery::L2Dsr, DELIVERIES, &[]);
    let idle_timeout_sec = r.integer(o, "idleTimeoutSec", 60, 1, 65535) as u16;
    Some(TargetInstance {
        name: name?,
        zone,
        instance: instance?,
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
    let zone = r.string(o, "zone", false).unwrap_or_default();
    let mac = o.get("mac").and_then(|n| r.mac(n, &o.path("mac")));
    let weight = r.integer(o, "weight", 1, 0, 1000) as u32;
    Some(Instance {
        name: name?,
        ip: ip?,
        zone,
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
    if !request_path.starts_with('/') {
        let pos = o.loc(index).field("requestPath");
        r.err(
            pos,
            &o.path("requestPath"),
            format!("`{request_path}` must start with `/`"),
            Some("a path such as /healthz".into()),
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

/// Reads every object of one top-level list.
fn read_list<T>(
    r: &mut Reader,
    top: &Obj,
    field: &'static str,
    known: &[&'static str],
    later: &[(&str, &str)],
    read: fn(&mut Reader, &Obj, usize) -> Option<T>,
) -> Vec<T> {
    let items = r.list(top.get(field), field);
    let mut out = Vec::new();
    for (i, n) in items.iter().enumerate() {
        let path = format!("{field}[{i}]");
        if let Some(o) = r.object(n, &path, known, later) {
            if let Some(v) = read(r, &o, i) {
                out.push(v);
            }
        } else if n.is_null() {
            r.err(n.pos, &path, "expected a mapping, found null", None);
        }
    }
    out
}

/// Parses a configuration text. The returned [`Config`] holds everything that could be read
/// (objects with errors are left out); the diagnostics hold every problem, sorted.
pub fn parse_config(file: &str, text: &str) -> (Config, Diagnostics) {
    let mut config = Config {
        file: file.to_string(),
        ..Config::default()
    };
    let doc = match tree::parse(file, text) {
        Ok(d) => d,
        Err(d) => return (config, d),
    };
    let mut r = Reader::new(file);
    if let Some(top) = r.object(&doc, "", TOP, TOP_LATER) {
        config.nic = read_nic(&mut r, top.get("nic"));
        config.forwarding_rules =
            read_list(&mut r, &top, "forwardingRules", RULE, RULE_LATER, read_rule);
        config.target_pools = read_list(&mut r, &top, "targetPools", POOL, POOL_LATER, read_pool);
        config.target_instances = read_list(
            &mut r,
            &top,
            "targetInstances",
            TARGET_INSTANCE,
            &[],
            read_target_instance,
        );
        config.instances = read_list(
            &mut r,
            &top,
            "instances",
            INSTANCE,
            INSTANCE_LATER,
            read_instance,
        );
        config.http_health_checks = read_list(
            &mut r,
            &top,
            "httpHealthChecks",
            HEALTH_CHECK,
            &[],
            read_health_check,
        );
    } else if doc.is_null() {
        // An empty file is an empty configuration.
    }
    let mut diags = r.diags;
    diags.extend(check(&config));
    diags.sort();
    (config, diags)
}

/// Relations between objects: unique names, references, failover, health-check timing,
/// overlapping rules, delivery of each VIP family, MACs. Capacity is checked by the compiler
/// against a profile.
pub fn check(c: &Config) -> Diagnostics {
    let mut d = Diagnostics::new();
    let f = c.file.as_str();

    // Unique names. Target pools and target instances share one namespace: `target` names one.
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
        );
    for (space, list, name, loc) in named {
        let pos = loc.field("name");
        match seen.get(&(space, name.as_str())) {
            Some((first_list, first_index, first_line)) => d.push(
                f,
                pos,
                format!("{list}[{}].name", loc.index),
                format!(
                    "duplicate name `{name}`: already used by {first_list}[{first_index}] (line {first_line})"
                ),
                None,
            ),
            None => {
                seen.insert((space, name.as_str()), (list, loc.index, pos.line));
            }
        }
    }

    let pools: HashMap<&str, &TargetPool> = c
        .target_pools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let tis: HashMap<&str, &TargetInstance> = c
        .target_instances
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let instances: HashMap<&str, &Instance> =
        c.instances.iter().map(|i| (i.name.as_str(), i)).collect();
    let hcs: HashMap<&str, &HttpHealthCheck> = c
        .http_health_checks
        .iter()
        .map(|h| (h.name.as_str(), h))
        .collect();
    // Lists of valid names, built only when a reference dangles.
    let names = |m: Vec<&str>| -> Vec<String> {
        let mut v: Vec<String> = m.into_iter().map(str::to_string).collect();
        v.sort();
        v
    };
    let target_names = || names(pools.keys().chain(tis.keys()).copied().collect());
    let pool_names = || names(pools.keys().copied().collect());
    let instance_names = || names(instances.keys().copied().collect());
    let hc_names = || names(hcs.keys().copied().collect());
    let dangling = |d: &mut Diagnostics, what: &str, r: &Ref, path: String, valid: &[String]| {
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
            f,
            r.pos,
            path,
            format!("no {what} named `{}`{hint}", r.name),
            Some(list),
        );
    };

    for r in &c.forwarding_rules {
        if !pools.contains_key(r.target.name.as_str()) && !tis.contains_key(r.target.name.as_str())
        {
            dangling(
                &mut d,
                "target pool or target instance",
                &r.target,
                format!("forwardingRules[{}].target", r.loc.index),
                &target_names(),
            );
        }
    }
    for p in &c.target_pools {
        let base = format!("targetPools[{}]", p.loc.index);
        let mut members: HashMap<&str, usize> = HashMap::new();
        for (i, m) in p.instances.iter().enumerate() {
            let path = format!("{base}.instances[{i}]");
            if !instances.contains_key(m.name.as_str()) {
                dangling(&mut d, "instance", m, path, &instance_names());
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
            if !hcs.contains_key(h.name.as_str()) {
                dangling(
                    &mut d,
                    "httpHealthCheck",
                    h,
                    format!("{base}.healthChecks[{i}]"),
                    &hc_names(),
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
                dangling(&mut d, what, b, format!("{base}.backupPool"), &pool_names());
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
    for t in &c.target_instances {
        if !instances.contains_key(t.instance.name.as_str()) {
            dangling(
                &mut d,
                "instance",
                &t.instance,
                format!("targetInstances[{}].instance", t.loc.index),
                &instance_names(),
            );
        }
    }
    for h in &c.http_health_checks {
        if h.timeout_sec > h.check_interval_sec {
            d.push(
                f,
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

    // Overlapping port ranges of rules on the same VIP and protocol (SPEC R2.2).
    let mut by_vip: BTreeMap<(IpAddr, Protocol), Vec<&ForwardingRule>> = BTreeMap::new();
    for r in c.forwarding_rules.iter().filter(|r| !r.loc.incomplete) {
        by_vip
            .entry((r.ip_address, r.ip_protocol))
            .or_default()
            .push(r);
    }
    for ((vip, proto), rules) in &by_vip {
        for (i, b) in rules.iter().enumerate() {
            for a in &rules[..i] {
                if a.port_range.overlaps(&b.port_range) {
                    d.push(
                        f,
                        b.loc.field("portRange"),
                        format!("forwardingRules[{}].portRange", b.loc.index),
                        format!(
                            "{} of rule `{}` overlaps {} of rule `{}` (forwardingRules[{}], line {}) on {vip} {}",
                            b.port_range,
                            b.name,
                            a.port_range,
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

    // Delivery: encapsulation carries a packet in an outer header of the backend's family, and
    // the pipeline uses an outer header of the VIP's family (IPv4 in IPv4, IPv6 in IPv6).
    let mut reported: std::collections::HashSet<(usize, String)> = Default::default();
    for r in &c.forwarding_rules {
        let mut serving: Vec<(&str, Delivery, Vec<&Ref>, String)> = Vec::new();
        if let Some(p) = pools.get(r.target.name.as_str()) {
            serving.push((
                &p.name,
                p.delivery,
                p.instances.iter().collect(),
                format!("targetPools[{}]", p.loc.index),
            ));
            if let Some(b) = p
                .backup_pool
                .as_ref()
                .and_then(|b| pools.get(b.name.as_str()))
            {
                serving.push((
                    &b.name,
                    b.delivery,
                    b.instances.iter().collect(),
                    format!("targetPools[{}]", b.loc.index),
                ));
            }
        } else if let Some(t) = tis.get(r.target.name.as_str()) {
            serving.push((
                &t.name,
                t.delivery,
                vec![&t.instance],
                format!("targetInstances[{}]", t.loc.index),
            ));
        }
        for (pool, delivery, members, _) in serving {
            if delivery == Delivery::L2Dsr {
                continue;
            }
            for m in members {
                let Some(inst) = instances.get(m.name.as_str()) else {
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

    // MACs and outer source prefixes that each pool's delivery needs.
    let need_mac = |d: &mut Diagnostics, delivery: Delivery, m: &Ref, path: &dyn Fn() -> String| {
        let Some(inst) = instances.get(m.name.as_str()) else {
            return;
        };
        if inst.mac.is_some() {
            return;
        }
        if delivery == Delivery::L2Dsr {
            d.push(
                f,
                m.pos,
                path(),
                format!(
                    "instance `{}` has no `mac`, which L2_DSR delivery needs",
                    inst.name
                ),
                Some("a `mac` on the instance, or IPIP/GUE delivery".into()),
            );
        } else if c.nic.next_hop_mac.is_none() {
            d.push(
                f,
                m.pos,
                path(),
                format!(
                    "instance `{}` has no `mac` and `nic.nextHopMac` is not set: {} needs a next-hop MAC",
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
            need_mac(&mut d, p.delivery, m, &|| {
                format!("targetPools[{}].instances[{i}]", p.loc.index)
            });
        }
        if p.delivery != Delivery::L2Dsr {
            for v6 in [false, true] {
                let any = p.instances.iter().any(|m| {
                    instances
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
        need_mac(&mut d, t.delivery, &t.instance, &|| {
            format!("targetInstances[{}].instance", t.loc.index)
        });
        if t.delivery != Delivery::L2Dsr {
            if let Some(inst) = instances.get(t.instance.name.as_str()) {
                families_needed.push((
                    inst.ip.is_ipv6(),
                    t.loc.field("delivery"),
                    format!("targetInstances[{}].delivery", t.loc.index),
                    t.delivery,
                ));
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
    d
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
