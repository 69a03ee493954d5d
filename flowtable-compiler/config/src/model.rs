//! The configuration model: Google Cloud's target-pool Network Load Balancer objects
//! (SPEC R1), field names as in the public REST API, plus the `nic` section.
//!
//! A [`Config`] comes from [`crate::load_config`] (or [`crate::parse_config`]); every object
//! remembers where it was written so later checks can point at it.

mod kubernetes;

pub(crate) use kubernetes::{ClusterNode, VerdictRule};
pub use kubernetes::{
    KubeService, NodeEligibility, NodeVerdict, ServedSlice, Shape, TrafficPolicy,
};

use crate::diag::Pos;
use nlb_hw::enums::{Affinity, DefaultAction, Delivery};
use nlb_hw::hash::addr_to_u128;
use std::fmt;
use std::net::IpAddr;

/// Where an object was written: its index in its list and the position of each field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loc {
    /// Index in the list of the file (`forwardingRules[index]`).
    pub index: usize,
    /// Start of the object.
    pub pos: Pos,
    /// Start of each field that was written.
    pub fields: Vec<(&'static str, Pos)>,
    /// Some field had an error and holds its default instead (checks that would only echo
    /// that error, such as overlaps, skip the object).
    pub incomplete: bool,
}

impl Loc {
    /// Position of a field, or of the object when the field was not written.
    pub fn field(&self, name: &str) -> Pos {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(self.pos, |(_, p)| *p)
    }
}

/// A reference to another object by name, with where it was written. It may have been written
/// as a short name, a partial path (`zones/Z/instances/I`) or a full resource URL; only the
/// name identifies the object, the rest is checked against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// The name referred to.
    pub name: String,
    /// Where the reference was written.
    pub pos: Pos,
    /// The collection a path or URL named (`targetPools`, `instances`, ...); `None` for a
    /// short name.
    pub collection: Option<&'static str>,
    /// The region or zone a path or URL named.
    pub scope: Option<Scope>,
}

impl Ref {
    /// A reference by short name.
    pub fn named(name: &str, pos: Pos) -> Ref {
        Ref {
            name: name.to_string(),
            pos,
            collection: None,
            scope: None,
        }
    }
}

/// Where a resource lives, as its path or URL says (`global/`, `regions/R/`, `zones/Z/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Global resources (legacy HTTP health checks).
    Global,
    /// A region, such as `us-central1`.
    Region(String),
    /// A zone, such as `us-central1-a`.
    Zone(String),
}

impl Scope {
    /// The region this scope lies in, when it names one.
    pub fn region(&self) -> Option<&str> {
        match self {
            Scope::Global => None,
            Scope::Region(r) => Some(r),
            Scope::Zone(z) => region_of_zone(z),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Global => write!(f, "global"),
            Scope::Region(r) => write!(f, "region {r}"),
            Scope::Zone(z) => write!(f, "zone {z}"),
        }
    }
}

/// The region of a zone: the zone without its last `-x` suffix (`us-central1-a` →
/// `us-central1`). A zone name without `-` names no region.
pub fn region_of_zone(zone: &str) -> Option<&str> {
    match zone.rsplit_once('-') {
        Some((region, suffix)) if !region.is_empty() && !suffix.is_empty() => Some(region),
        _ => None,
    }
}

/// IP protocol of a forwarding rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// `L3_DEFAULT`: every protocol that no TCP or UDP rule of the VIP takes (ICMP, ESP, GRE,
    /// SCTP, ..., and the TCP and UDP ports no other rule holds). Only for backend services,
    /// with all ports (SPEC R2, docs/pipeline.md §3–§4).
    L3Default,
}

impl Protocol {
    /// Every accepted name, as the REST API spells them.
    pub const NAMES: [&'static str; 3] = ["TCP", "UDP", "L3_DEFAULT"];

    /// The VIP protocol of the rule's VIP-table entry (docs/pipeline.md §3): the IP protocol
    /// number for TCP and UDP, 0 ("every other protocol") for `L3_DEFAULT`.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::L3Default => 0,
        }
    }

    /// From a VIP protocol (6, 17 or 0).
    pub fn from_number(n: u8) -> Option<Protocol> {
        match n {
            6 => Some(Protocol::Tcp),
            17 => Some(Protocol::Udp),
            0 => Some(Protocol::L3Default),
            _ => None,
        }
    }

    /// The REST API name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::L3Default => "L3_DEFAULT",
        }
    }
}

/// An inclusive destination-port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRange {
    /// First port.
    pub lo: u16,
    /// Last port.
    pub hi: u16,
}

impl PortRange {
    /// Every port: what an absent `portRange` means.
    pub const ALL: PortRange = PortRange { lo: 0, hi: 65535 };

    /// Whether two ranges share a port.
    pub fn overlaps(&self, other: &PortRange) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }

    /// Whether `port` is inside.
    pub fn contains(&self, port: u16) -> bool {
        (self.lo..=self.hi).contains(&port)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == PortRange::ALL {
            write!(f, "all ports")
        } else if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// A decimal fraction in `[0, 1]` kept exactly as the user wrote it (`failoverRatio`).
///
/// The failover test `healthy / members ≤ ratio` is decided on the written decimal, not on a
/// binary float or a rounded value: `0.3` with 3 of 10 healthy fails over (a double holds
/// 0.29999…), and `0.6666` with 2 of 3 healthy does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ratio {
    /// The text as written (for messages and `explain`).
    text: String,
    /// Integer part (0 or 1).
    whole: u8,
    /// Fraction digits after the point, trailing zeros removed.
    digits: Vec<u8>,
}

impl Ratio {
    /// Parses a decimal such as `0.5`, `.25`, `1`, `1.0` or `5e-1`; `None` when the text is
    /// not a number in `[0, 1]`.
    pub fn parse(text: &str) -> Option<Ratio> {
        let t = text.trim();
        let (mantissa, exp) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
            None => (t, 0),
        };
        let mantissa = mantissa.strip_prefix('+').unwrap_or(mantissa);
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.is_empty() && frac.is_empty()
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
            || !(-400..=400).contains(&exp)
        {
            return None;
        }
        // All digits, and where the point sits after applying the exponent.
        let all: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
        let point = int.len() as i64 + i64::from(exp);
        let mut whole: u64 = 0;
        for i in 0..point.max(0) {
            let d = all.get(i as usize).copied().unwrap_or(0);
            whole = whole.saturating_mul(10).saturating_add(u64::from(d));
        }
        let mut digits: Vec<u8> = vec![0; (-point).max(0) as usize];
        digits.extend(all.iter().skip(point.max(0) as usize));
        while digits.last() == Some(&0) {
            digits.pop();
        }
        match (whole, digits.is_empty()) {
            (0, _) | (1, true) => Some(Ratio {
                text: t.to_string(),
                whole: whole as u8,
                digits,
            }),
            _ => None,
        }
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// 1, as written `1`.
    pub fn one() -> Ratio {
        Ratio {
            text: "1".into(),
            whole: 1,
            digits: Vec::new(),
        }
    }

    /// 0.1, as written `0.1`.
    pub fn tenth() -> Ratio {
        Ratio {
            text: "0.1".into(),
            whole: 0,
            digits: vec![1],
        }
    }

    /// Whether it is 0.
    pub fn is_zero(&self) -> bool {
        self.whole == 0 && self.digits.is_empty()
    }

    /// Compares the numbers exactly (`0.50` equals `.5`).
    pub fn compare(&self, other: &Ratio) -> std::cmp::Ordering {
        // Fraction digits carry no trailing zeros, so digit strings compare as numbers.
        (self.whole, &self.digits).cmp(&(other.whole, &other.digits))
    }

    /// The same number in one spelling whatever the text (`0.50`, `.5` and `5e-1` agree).
    pub fn canonical(&self) -> String {
        let frac: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        if frac.is_empty() {
            self.whole.to_string()
        } else {
            format!("{}.{frac}", self.whole)
        }
    }

    /// The nearest double (for display and the table's informational per-mille field).
    pub fn value(&self) -> f64 {
        self.canonical().parse().unwrap_or(0.0)
    }

    /// Whether `part ≤ ratio × total`, exactly (long division of `part / total` compared digit
    /// by digit with the written decimal; with `total = 0`, whether `part` is 0). The target
    /// pool's failover test (SPEC R1: at or below the ratio).
    pub fn at_or_above(&self, part: u64, total: u64) -> bool {
        if total == 0 {
            return part == 0;
        }
        self.fraction_cmp(part, total) != std::cmp::Ordering::Greater
    }

    /// Whether `part < ratio × total`, exactly; false with `total = 0`. The backend service's
    /// failover test (`failoverPolicy.failoverRatio`: strictly below the ratio).
    pub fn above_fraction(&self, part: u64, total: u64) -> bool {
        total != 0 && self.fraction_cmp(part, total) == std::cmp::Ordering::Less
    }

    /// `part / total` compared with the ratio, exactly: long division of `part / total`
    /// compared digit by digit with the written decimal. `total` must not be 0.
    fn fraction_cmp(&self, part: u64, total: u64) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let whole = part / total;
        if whole != u64::from(self.whole) {
            return whole.cmp(&u64::from(self.whole));
        }
        let mut rem = u128::from(part % total);
        let total = u128::from(total);
        for &d in &self.digits {
            let q = rem * 10 / total;
            rem = rem * 10 % total;
            if q != u128::from(d) {
                return q.cmp(&u128::from(d));
            }
        }
        // Every written digit equal: equal only if the quotient ends here.
        if rem == 0 {
            Ordering::Equal
        } else {
            Ordering::Greater
        }
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// An address prefix (CIDR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    /// Network address (host bits zero).
    pub addr: IpAddr,
    /// Prefix length in the address's own family (0..=32 or 0..=128).
    pub len: u8,
}

impl Prefix {
    /// The prefix over the 128-bit table address: IPv4 `/n` becomes `/(96+n)` over the
    /// IPv4-mapped address.
    pub fn to_table(&self) -> (u128, u8) {
        let len = match self.addr {
            IpAddr::V4(_) => 96 + self.len,
            IpAddr::V6(_) => self.len,
        };
        (addr_to_u128(self.addr), len)
    }

    /// Whether `addr` lies inside (always false across families).
    pub fn contains(&self, addr: IpAddr) -> bool {
        let (net, len) = self.to_table();
        let a = addr_to_u128(addr);
        if self.addr.is_ipv4() != addr.is_ipv4() {
            return false;
        }
        len == 0 || (a ^ net) >> (128 - u32::from(len)) == 0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The NIC's own settings (`nic:` section).
#[derive(Debug, Clone, PartialEq)]
pub struct Nic {
    /// The NIC's MAC: source MAC of forwarded frames.
    pub mac: u64,
    /// What happens to packets matching no rule (SPEC R2.4).
    pub default_action: DefaultAction,
    /// UDP destination port of GUE encapsulation.
    pub gue_port: u16,
    /// Outer IPv4 source prefix for IPIP/GUE.
    pub outer_source_ipv4: Option<Prefix>,
    /// Outer IPv6 source prefix for IPIP/GUE.
    pub outer_source_ipv6: Option<Prefix>,
    /// Where health probes come from: appended to every rule ACL that is enabled (SPEC R9.1).
    pub health_check_source_ranges: Vec<Prefix>,
    /// Next-hop MAC for IPIP/GUE backends that have no `mac` of their own.
    pub next_hop_mac: Option<u64>,
    /// The NIC's own region (empty when not given): the "client" location of the service LB
    /// policy (SPEC R6). Taken from `zone` when only that is given.
    pub region: String,
    /// The NIC's own zone (empty when not given).
    pub zone: String,
    /// Other regions, nearest first (`regionOrder`); regions not listed come after them, by
    /// name.
    pub region_order: Vec<String>,
    /// Where the section was written.
    pub loc: Loc,
}

impl Nic {
    /// Where the NIC is, for the service LB policy.
    pub fn locality(&self) -> crate::policy::Locality {
        crate::policy::Locality {
            region: self.region.clone(),
            zone: self.zone.clone(),
            region_order: self.region_order.clone(),
        }
    }
}

impl Default for Nic {
    fn default() -> Self {
        Nic {
            mac: 0x02_00_00_00_00_01,
            default_action: DefaultAction::Pass,
            gue_port: 6080,
            outer_source_ipv4: None,
            outer_source_ipv6: None,
            health_check_source_ranges: Vec::new(),
            next_hop_mac: None,
            region: String::new(),
            zone: String::new(),
            region_order: Vec::new(),
            loc: Loc::default(),
        }
    }
}

/// A forwarding rule: VIP + protocol + port range → target (SPEC R1, R2).
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardingRule {
    /// Unique name.
    pub name: String,
    /// The VIP.
    pub ip_address: IpAddr,
    /// `TCP`, `UDP` or `L3_DEFAULT`.
    pub ip_protocol: Protocol,
    /// Destination ports, sorted and disjoint: the one `portRange`, the `ports` (adjacent ones
    /// merged into one range), or [`PortRange::ALL`] when neither is given. Never empty.
    pub port_ranges: Vec<PortRange>,
    /// Region (empty when not given): checked against the target's.
    pub region: String,
    /// What the rule sends its packets to: a target pool or a target instance (`target`), or a
    /// backend service (`backendService`, see [`ForwardingRule::backend_service`]). Pools of
    /// every kind share one namespace, so the name alone names the pool.
    pub target: Ref,
    /// Whether `target` was written as `backendService` (a backend service).
    pub backend_service: bool,
    /// Source allow-list (SPEC R9); empty = everyone.
    pub source_ranges: Vec<Prefix>,
    /// Where it was written.
    pub loc: Loc,
}

/// A target pool (SPEC R1).
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPool {
    /// Unique name among pools and target instances.
    pub name: String,
    /// Region (empty when not given): its instances and rules must be in it.
    pub region: String,
    /// Member instances.
    pub instances: Vec<Ref>,
    /// At most one legacy HTTP health check.
    pub health_checks: Vec<Ref>,
    /// Which flow key feeds the Maglev hash.
    pub session_affinity: Affinity,
    /// Pool that serves when the healthy fraction is ≤ `failover_ratio`.
    pub backup_pool: Option<Ref>,
    /// 0..=1, exactly as written.
    pub failover_ratio: Option<Ratio>,
    /// How packets reach the backends.
    pub delivery: Delivery,
    /// Connection idle timeout, seconds.
    pub idle_timeout_sec: u16,
    /// Where it was written.
    pub loc: Loc,
}

impl TargetPool {
    /// Whether probe weights (`X-Load-Balancing-Endpoint-Weight`) shape the pool's share of new
    /// connections: never for target pools (SPEC R5.6; a weight header on their probes is
    /// ignored). The health checker reads the header only where this holds; the compiler uses
    /// probe weights only where this holds.
    pub fn weighted(&self) -> bool {
        false
    }
}

/// A target instance: protocol forwarding to exactly one backend.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetInstance {
    /// Unique name among pools and target instances.
    pub name: String,
    /// Zone (empty when not given): its instance must be in it.
    pub zone: String,
    /// The instance.
    pub instance: Ref,
    /// The network (name) the target instance forwards to, when given: it must be the
    /// instance's nic0 network, the interface packets are delivered to.
    pub network: String,
    /// How packets reach it.
    pub delivery: Delivery,
    /// Connection idle timeout, seconds.
    pub idle_timeout_sec: u16,
    /// Where it was written.
    pub loc: Loc,
}

/// A backend instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Unique name.
    pub name: String,
    /// Address packets are delivered to (`networkInterfaces[0].networkIP`, nic0, when written
    /// as a Compute Engine instance).
    pub ip: IpAddr,
    /// Zone (empty when not given); its region is the zone without the last `-x`.
    pub zone: String,
    /// The network (name) of nic0, when written as a Compute Engine instance.
    pub network: String,
    /// MAC for L2 delivery (or the next hop for IPIP/GUE).
    pub mac: Option<u64>,
    /// Share of new connections relative to the pool's other members (0..=1000, default 1).
    pub weight: u32,
    /// Where it was written.
    pub loc: Loc,
}

/// A legacy HTTP health check (SPEC R5).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpHealthCheck {
    /// Unique name.
    pub name: String,
    /// TCP port probed.
    pub port: u16,
    /// Path requested.
    pub request_path: String,
    /// Host header; empty = the forwarding rule's IP.
    pub host: String,
    /// Seconds between probes.
    pub check_interval_sec: u32,
    /// Seconds a probe may take.
    pub timeout_sec: u32,
    /// Passes to turn healthy.
    pub healthy_threshold: u32,
    /// Failures to turn unhealthy.
    pub unhealthy_threshold: u32,
    /// Where it was written.
    pub loc: Loc,
}

/// `protocol` of a backend service: which forwarding rules may send it packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceProtocol {
    /// TCP rules.
    Tcp,
    /// UDP rules.
    Udp,
    /// Any rule, and the only one an `L3_DEFAULT` rule may name.
    Unspecified,
}

impl ServiceProtocol {
    /// The REST API name.
    pub fn name(self) -> &'static str {
        match self {
            ServiceProtocol::Tcp => "TCP",
            ServiceProtocol::Udp => "UDP",
            ServiceProtocol::Unspecified => "UNSPECIFIED",
        }
    }

    /// Whether a forwarding rule of `protocol` may name a service of this protocol: the same
    /// protocol, or `UNSPECIFIED` for any (and only `UNSPECIFIED` for `L3_DEFAULT`).
    pub fn serves(self, protocol: Protocol) -> bool {
        matches!(
            (self, protocol),
            (ServiceProtocol::Unspecified, _)
                | (ServiceProtocol::Tcp, Protocol::Tcp)
                | (ServiceProtocol::Udp, Protocol::Udp)
        )
    }
}

/// `connectionTrackingPolicy.trackingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackingMode {
    /// The default: connections are tracked by their 5-tuple (3-tuple without ports).
    PerConnection,
    /// Connections are tracked by the session affinity's key. Accepted only where that key
    /// is the connection's own (5-tuple affinities), see docs/config.md.
    PerSession,
}

impl TrackingMode {
    /// The REST API name.
    pub fn name(self) -> &'static str {
        match self {
            TrackingMode::PerConnection => "PER_CONNECTION",
            TrackingMode::PerSession => "PER_SESSION",
        }
    }
}

/// `connectionTrackingPolicy.connectionPersistenceOnUnhealthyBackends` (SPEC R4.1): what
/// happens to established connections of a backend that turns unhealthy. The NIC keeps a
/// connection while its entry stays; the host's slow path removes the entries this setting
/// does not keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// The default: TCP connections stay (under `PER_CONNECTION` tracking, or a 5-tuple
    /// affinity); UDP flows and every other protocol choose again.
    DefaultForProtocol,
    /// Connections of an unhealthy backend choose again (unless every backend is unhealthy).
    NeverPersist,
    /// Connections stay whatever the protocol.
    AlwaysPersist,
}

impl Persistence {
    /// The REST API name.
    pub fn name(self) -> &'static str {
        match self {
            Persistence::DefaultForProtocol => "DEFAULT_FOR_PROTOCOL",
            Persistence::NeverPersist => "NEVER_PERSIST",
            Persistence::AlwaysPersist => "ALWAYS_PERSIST",
        }
    }

    /// Whether an established connection of IP protocol `protocol` stays on its backend when
    /// that backend turns unhealthy, under `tracking` (Google Cloud's rule, quoted in
    /// docs/config.md).
    pub fn keeps(self, protocol: u8, tracking: TrackingMode, five_tuple_affinity: bool) -> bool {
        match self {
            Persistence::AlwaysPersist => true,
            Persistence::NeverPersist => false,
            Persistence::DefaultForProtocol => {
                // Connection-oriented protocols: TCP (6) and SCTP (132).
                matches!(protocol, 6 | 132)
                    && (tracking == TrackingMode::PerConnection || five_tuple_affinity)
            }
        }
    }
}

/// `localityLbPolicy` of a backend service (SPEC R5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalityLbPolicy {
    /// The default: endpoints share by the service LB policy alone.
    Maglev,
    /// Endpoints share within their group by the weights their health probes report
    /// (`X-Load-Balancing-Endpoint-Weight`, SPEC R5.4).
    WeightedMaglev,
}

impl LocalityLbPolicy {
    /// The REST API name.
    pub fn name(self) -> &'static str {
        match self {
            LocalityLbPolicy::Maglev => "MAGLEV",
            LocalityLbPolicy::WeightedMaglev => "WEIGHTED_MAGLEV",
        }
    }
}

/// The capacity of a backend (`balancingMode: CONNECTION`, SPEC R6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxConnections {
    /// `maxConnections`: the whole group.
    PerGroup(u64),
    /// `maxConnectionsPerInstance`: each instance of an instance group.
    PerInstance(u64),
    /// `maxConnectionsPerEndpoint`: each endpoint of a network endpoint group.
    PerEndpoint(u64),
}

impl MaxConnections {
    /// The field it was written as.
    pub fn field(self) -> &'static str {
        match self {
            MaxConnections::PerGroup(_) => "maxConnections",
            MaxConnections::PerInstance(_) => "maxConnectionsPerInstance",
            MaxConnections::PerEndpoint(_) => "maxConnectionsPerEndpoint",
        }
    }

    /// Connections of a group of `members` endpoints (before `capacityScaler`).
    pub fn of(self, members: usize) -> f64 {
        match self {
            MaxConnections::PerGroup(n) => n as f64,
            MaxConnections::PerInstance(n) | MaxConnections::PerEndpoint(n) => {
                n as f64 * members as f64
            }
        }
    }
}

/// One entry of a backend service's `backends[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    /// The instance group or network endpoint group.
    pub group: Ref,
    /// Whether `group` names a network endpoint group (else an instance group).
    pub neg: bool,
    /// Capacity in connections, when given (every backend of a service gives one, or none
    /// does).
    pub max_connections: Option<MaxConnections>,
    /// `capacityScaler`: 0, or 0.1 to 1 (default 1), exactly as written.
    pub capacity_scaler: Ratio,
    /// `failover`: a failover backend of the service's `failoverPolicy`.
    pub failover: bool,
    /// `preference`: `PREFERRED` backends fill first (SPEC R6.6).
    pub preference: crate::policy::Preference,
    /// Where it was written (`backends[index]`).
    pub loc: Loc,
}

/// A backend service (`backendServices`, global, or `regionBackendServices`): the pool of a
/// backend-service passthrough load balancer (SPEC R1, R6).
#[derive(Debug, Clone, PartialEq)]
pub struct BackendService {
    /// Unique name among all pools (target pools, target instances, backend services).
    pub name: String,
    /// Its region; empty for a global backend service, whose backends may be anywhere.
    pub region: String,
    /// Written as a global backend service (`backendServices`, or pasted without `region`).
    pub global: bool,
    /// Which forwarding rules may name it.
    pub protocol: ServiceProtocol,
    /// At most one health check (`healthChecks`, the newer kind).
    pub health_checks: Vec<Ref>,
    /// The backend groups.
    pub backends: Vec<Backend>,
    /// Which flow key feeds the Maglev hash (SPEC R3.1), including the 5-tuple
    /// `CLIENT_IP_PORT_PROTO` and the 1-tuple `CLIENT_IP_NO_DESTINATION`.
    pub session_affinity: Affinity,
    /// `connectionTrackingPolicy.trackingMode`.
    pub tracking_mode: TrackingMode,
    /// `connectionTrackingPolicy.connectionPersistenceOnUnhealthyBackends`.
    pub persistence: Persistence,
    /// `connectionTrackingPolicy.idleTimeoutSec`: connection idle timeout, seconds.
    pub idle_timeout_sec: u16,
    /// `failoverPolicy.failoverRatio` (0 when not given: fail over when no primary endpoint is
    /// healthy).
    pub failover_ratio: Option<Ratio>,
    /// `failoverPolicy.dropTrafficIfUnhealthy`.
    pub drop_traffic_if_unhealthy: bool,
    /// `failoverPolicy.disableConnectionDrainOnFailover` (the slow path's).
    pub disable_connection_drain_on_failover: bool,
    /// `localityLbPolicy`.
    pub locality_lb_policy: LocalityLbPolicy,
    /// `connectionDraining.drainingTimeoutSec` (0..=3600, the slow path's).
    pub draining_timeout_sec: u32,
    /// `serviceLbPolicy`, when given.
    pub service_lb_policy: Option<Ref>,
    /// How packets reach the backends (our extension, as for target pools).
    pub delivery: Delivery,
    /// Where it was written.
    pub loc: Loc,
}

impl BackendService {
    /// The section its messages are in.
    pub fn section(&self) -> &'static str {
        if self.global {
            "backendServices"
        } else {
            "regionBackendServices"
        }
    }

    /// `backendServices[2]`, as messages name it.
    pub fn path(&self) -> String {
        format!("{}[{}]", self.section(), self.loc.index)
    }

    /// Whether probe weights shape the shares within a group (SPEC R5.6).
    pub fn weighted(&self) -> bool {
        self.locality_lb_policy == LocalityLbPolicy::WeightedMaglev
    }

    /// Whether its affinity keys the 5-tuple (`NONE`, `CLIENT_IP_PORT_PROTO`).
    pub fn five_tuple_affinity(&self) -> bool {
        matches!(
            self.session_affinity,
            Affinity::None | Affinity::ClientIpPortProto
        )
    }
}

/// A zonal instance group (`compute#instanceGroup`): a backend of backend services. Its
/// members are our own `instances` field (Google Cloud's `describe` does not print them; the
/// items of `list-instances` may be pasted there).
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceGroup {
    /// Unique name among instance groups.
    pub name: String,
    /// Its zone (empty when not given: the zone of its members).
    pub zone: String,
    /// Member instances.
    pub instances: Vec<Ref>,
    /// `size` as Google Cloud printed it, to check the member list against.
    pub size: Option<u64>,
    /// Where it was written.
    pub loc: Loc,
}

/// One `GCE_VM_IP` endpoint of a network endpoint group: an instance (its primary address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkEndpoint {
    /// The instance.
    pub instance: Ref,
    /// `ipAddress`, when given: must be the instance's address.
    pub ip: Option<IpAddr>,
    /// Where `ipAddress` was written (the endpoint's position when it was not).
    pub ip_pos: Pos,
    /// Where the endpoint was written.
    pub pos: Pos,
}

/// A zonal network endpoint group of `GCE_VM_IP` endpoints (`compute#networkEndpointGroup`).
/// Its endpoints are our own `networkEndpoints` field (the form the API attaches them in; the
/// items of `list-network-endpoints` may be pasted there).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkEndpointGroup {
    /// Unique name among network endpoint groups.
    pub name: String,
    /// Its zone (empty when not given).
    pub zone: String,
    /// The endpoints.
    pub endpoints: Vec<NetworkEndpoint>,
    /// `size` as Google Cloud printed it.
    pub size: Option<u64>,
    /// Where it was written.
    pub loc: Loc,
}

/// The probe of a health check of the newer kind (`type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `HTTP`: a GET that passes on a 200, and, with `response`, when the first 1024 bytes of
    /// the body contain it.
    Http {
        /// `requestPath` (default `/`).
        request_path: String,
        /// `host` (empty: the forwarding rule's IP).
        host: String,
        /// `response` (empty: any body).
        response: String,
    },
    /// `HTTPS`: the same over TLS (certificates are not checked, as in Google Cloud).
    Https {
        /// `requestPath` (default `/`).
        request_path: String,
        /// `host` (empty: the forwarding rule's IP).
        host: String,
        /// `response` (empty: any body).
        response: String,
    },
    /// `TCP`: a connection, then `request` is sent and the reply must begin with `response`
    /// (both empty: the connection alone passes).
    Tcp {
        /// `request` (ASCII, may be empty).
        request: String,
        /// `response` (ASCII, may be empty).
        response: String,
    },
}

impl Probe {
    /// `HTTP`, `HTTPS` or `TCP`.
    pub fn kind(&self) -> &'static str {
        match self {
            Probe::Http { .. } => "HTTP",
            Probe::Https { .. } => "HTTPS",
            Probe::Tcp { .. } => "TCP",
        }
    }
}

/// A health check of the newer kind (`healthChecks`, `compute#healthCheck`), as backend
/// services use (SPEC R5).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    /// Unique name among health checks.
    pub name: String,
    /// Its region; empty for a global health check.
    pub region: String,
    /// The probe.
    pub probe: Probe,
    /// Port probed (`USE_FIXED_PORT`; default 80 for HTTP and TCP, 443 for HTTPS).
    pub port: u16,
    /// Seconds between probes.
    pub check_interval_sec: u32,
    /// Seconds a probe may take.
    pub timeout_sec: u32,
    /// Passes to turn healthy.
    pub healthy_threshold: u32,
    /// Failures to turn unhealthy.
    pub unhealthy_threshold: u32,
    /// Where it was written.
    pub loc: Loc,
}

/// A service load-balancing policy (`serviceLbPolicies`, networkservices; SPEC R6).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceLbPolicy {
    /// The short name (the last segment of `projects/P/locations/L/serviceLbPolicies/NAME`).
    pub name: String,
    /// The location its full name gave (`global` or a region), empty when written by name.
    pub location: String,
    /// `loadBalancingAlgorithm` (default `WATERFALL_BY_REGION`).
    pub algorithm: crate::policy::Algorithm,
    /// `autoCapacityDrain.enable`.
    pub auto_capacity_drain: bool,
    /// `failoverConfig.failoverHealthThreshold` (1..=99, default 70).
    pub failover_health_threshold: u8,
    /// `isolationConfig` (`REGION` granularity; no isolation without it).
    pub isolation: crate::policy::Isolation,
    /// Where it was written.
    pub loc: Loc,
}

/// A whole configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// The file it came from, as named by the user (for messages).
    pub file: String,
    /// NIC settings.
    pub nic: Nic,
    /// Forwarding rules.
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Target pools.
    pub target_pools: Vec<TargetPool>,
    /// Target instances.
    pub target_instances: Vec<TargetInstance>,
    /// Backend instances.
    pub instances: Vec<Instance>,
    /// Legacy HTTP health checks.
    pub http_health_checks: Vec<HttpHealthCheck>,
    /// Backend services, global (`backendServices`) and regional (`regionBackendServices`).
    pub backend_services: Vec<BackendService>,
    /// Zonal instance groups.
    pub instance_groups: Vec<InstanceGroup>,
    /// Zonal network endpoint groups (`GCE_VM_IP`).
    pub network_endpoint_groups: Vec<NetworkEndpointGroup>,
    /// Health checks of the newer kind.
    pub health_checks: Vec<HealthCheck>,
    /// Service load-balancing policies.
    pub service_lb_policies: Vec<ServiceLbPolicy>,
    /// What each Kubernetes LoadBalancer Service became, when the input was Kubernetes
    /// manifests ([`crate::kube`]); in the digest only through the objects above and the
    /// ready endpoint counts.
    pub kubernetes: Vec<KubeService>,
    /// Things worth telling the user about how the input was read (printed by `compile`).
    pub notes: Vec<String>,
    /// How nlbd announces the VIPs by BGP (`bgp`; none: it announces nothing). Not in the
    /// digest: it changes no table.
    pub bgp: Option<Bgp>,
}

/// The `bgp` section: nlbd announces each VIP it serves, as a host route, to these neighbours
/// (the host's routing daemon) while it serves it, and withdraws it on drain, on stop and on
/// failure (docs/fleet.md, "Announcing VIPs by BGP").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bgp {
    /// nlbd's AS (four octets; `asn`).
    pub asn: u32,
    /// nlbd's BGP identifier (`routerId`): it must differ from the neighbours' own.
    pub router_id: std::net::Ipv4Addr,
    /// The hold time proposed, in seconds (`holdTimeSec`, 0 or 3-65535; default 9).
    pub hold_time: u16,
    /// Graceful restart's restart time announced, in seconds (`gracefulRestartSec`, 0-4095;
    /// default 30; 0 announces no graceful restart): how long a neighbour keeps the routes of
    /// an nlbd that went away without withdrawing them.
    pub graceful_restart: u16,
    /// MULTI_EXIT_DISC of the routes (`med`).
    pub med: Option<u32>,
    /// LOCAL_PREF of the routes towards internal neighbours (`localPreference`; default 100).
    pub local_preference: Option<u32>,
    /// COMMUNITIES of the routes (`communities`, each `AS:VALUE`), as `AS << 16 | VALUE`.
    pub communities: Vec<u32>,
    /// NEXT_HOP of IPv4 routes (`nextHopIpv4`; default: the session's own address).
    pub next_hop_ipv4: Option<std::net::Ipv4Addr>,
    /// Next hop of IPv6 routes (`nextHopIpv6`; default: the session's own address when IPv6).
    pub next_hop_ipv6: Option<std::net::Ipv6Addr>,
    /// How long a drain waits for the host's counters to stay still before it reports the
    /// host drained, in seconds (`drainQuietSec`, 1-3600; default 5).
    pub drain_quiet: u32,
    /// The neighbours.
    pub neighbors: Vec<BgpNeighbor>,
    /// Where it was written.
    pub loc: Loc,
}

/// One BGP neighbour of [`Bgp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BgpNeighbor {
    /// Its address (`address`).
    pub address: std::net::IpAddr,
    /// Its port (`port`, default 179).
    pub port: u16,
    /// Its AS (`asn`): the same as nlbd's for an internal session.
    pub asn: u32,
    /// The address nlbd connects from (`localAddress`; default: the system's choice).
    pub local_address: Option<std::net::IpAddr>,
    /// Where it was written.
    pub loc: Loc,
}

/// The backend groups of a [`Config`] by name ([`Config::group_lookup`]).
#[derive(Debug)]
pub struct GroupLookup<'c> {
    config: &'c Config,
    negs: std::collections::HashMap<&'c str, &'c NetworkEndpointGroup>,
    igs: std::collections::HashMap<&'c str, &'c InstanceGroup>,
}

impl<'c> GroupLookup<'c> {
    /// [`Config::group_members`].
    pub fn members(&self, backend: &Backend) -> Vec<&'c str> {
        let name = backend.group.name.as_str();
        if backend.neg {
            self.negs.get(name).map_or_else(Vec::new, |g| {
                g.endpoints
                    .iter()
                    .map(|e| e.instance.name.as_str())
                    .collect()
            })
        } else {
            self.igs.get(name).map_or_else(Vec::new, |g| {
                g.instances.iter().map(|r| r.name.as_str()).collect()
            })
        }
    }

    /// [`Config::group_zone`].
    pub fn zone(&self, backend: &Backend) -> Option<&'c str> {
        let name = backend.group.name.as_str();
        if backend.neg {
            self.negs
                .get(name)
                .and_then(|g| self.config.network_endpoint_group_zone(g))
        } else {
            self.igs
                .get(name)
                .and_then(|g| self.config.instance_group_zone(g))
        }
    }
}

/// Formats a MAC as `02:00:00:00:00:01`.
pub fn format_mac(mac: u64) -> String {
    let b = mac.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

impl Config {
    /// A text that is identical for identical configurations, whatever the order of the lists
    /// and documents in the file, wherever things were written and whichever form a reference
    /// took (name, path or URL): the input of the config digest.
    pub fn canonical_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let n = &self.nic;
        let opt = |p: &Option<Prefix>| p.map_or("-".to_string(), |p| p.to_string());
        let _ = writeln!(
            s,
            "nic mac={} default={} gue={} v4={} v6={} next_hop={}",
            format_mac(n.mac),
            n.default_action.name(),
            n.gue_port,
            opt(&n.outer_source_ipv4),
            opt(&n.outer_source_ipv6),
            n.next_hop_mac.map_or("-".to_string(), format_mac),
        );
        let mut hc: Vec<String> = n
            .health_check_source_ranges
            .iter()
            .map(|p| p.to_string())
            .collect();
        hc.sort();
        let _ = writeln!(s, "nic hc_ranges={}", hc.join(","));
        // Written only when set, so digests of configurations without them stay as they were.
        if !n.region.is_empty() || !n.zone.is_empty() || !n.region_order.is_empty() {
            let _ = writeln!(
                s,
                "nic region={:?} zone={:?} order={:?}",
                n.region, n.zone, n.region_order
            );
        }
        let names = |v: &[Ref]| {
            let mut n: Vec<&str> = v.iter().map(|r| r.name.as_str()).collect();
            n.sort_unstable();
            n.join(",")
        };
        let mut lines = Vec::new();
        for r in &self.forwarding_rules {
            let mut src: Vec<String> = r.source_ranges.iter().map(|p| p.to_string()).collect();
            src.sort();
            let ports: Vec<String> = r
                .port_ranges
                .iter()
                .map(|p| format!("{}-{}", p.lo, p.hi))
                .collect();
            lines.push(format!(
                "rule {:?} {} {} {} -> {}{:?} src={}",
                r.name,
                r.ip_address,
                r.ip_protocol.name(),
                ports.join(","),
                if r.backend_service { "service " } else { "" },
                r.target.name,
                src.join(",")
            ));
        }
        for p in &self.target_pools {
            lines.push(format!(
                "pool {:?} region={:?} members={} hc={} affinity={} backup={:?} ratio={:?} delivery={} idle={}",
                p.name,
                p.region,
                names(&p.instances),
                names(&p.health_checks),
                p.session_affinity.name(),
                p.backup_pool.as_ref().map(|b| &b.name),
                p.failover_ratio.as_ref().map(Ratio::canonical),
                p.delivery.name(),
                p.idle_timeout_sec
            ));
        }
        for t in &self.target_instances {
            lines.push(format!(
                "target_instance {:?} zone={:?} instance={:?} delivery={} idle={}",
                t.name,
                t.zone,
                t.instance.name,
                t.delivery.name(),
                t.idle_timeout_sec
            ));
        }
        for i in &self.instances {
            lines.push(format!(
                "instance {:?} ip={} zone={:?} mac={} weight={}",
                i.name,
                i.ip,
                i.zone,
                i.mac.map_or("-".to_string(), format_mac),
                i.weight
            ));
        }
        for h in &self.http_health_checks {
            lines.push(format!(
                "hc {:?} port={} path={:?} host={:?} interval={} timeout={} up={} down={}",
                h.name,
                h.port,
                h.request_path,
                h.host,
                h.check_interval_sec,
                h.timeout_sec,
                h.healthy_threshold,
                h.unhealthy_threshold
            ));
        }
        self.canonical_backend_services(&mut lines);
        // Kubernetes endpoint counts shape the tables (SPEC R7.3, R10.5), so they are part of
        // the configuration's identity.
        for (pool, backend, ready) in self.kubernetes.iter().flat_map(|k| &k.ready_endpoints) {
            lines.push(format!("ready_endpoints {pool:?} {backend:?} {ready}"));
        }
        for k in self.kubernetes.iter().filter(|k| k.zonal_affinity) {
            lines.push(format!("zonal_affinity {:?}", k.pools));
        }
        lines.sort();
        for l in lines {
            s.push_str(&l);
            s.push('\n');
        }
        s
    }

    /// The lines of [`Config::canonical_text`] for backend services and what they use.
    fn canonical_backend_services(&self, lines: &mut Vec<String>) {
        let names = |v: &[Ref]| {
            let mut n: Vec<&str> = v.iter().map(|r| r.name.as_str()).collect();
            n.sort_unstable();
            n.join(",")
        };
        for b in &self.backend_services {
            let mut backends: Vec<String> = b
                .backends
                .iter()
                .map(|x| {
                    format!(
                        "{}{}:{:?}:{}:{}:{:?}",
                        if x.neg { "neg/" } else { "ig/" },
                        x.group.name,
                        x.max_connections,
                        x.capacity_scaler.canonical(),
                        x.failover,
                        x.preference
                    )
                })
                .collect();
            backends.sort();
            lines.push(format!(
                "service {:?} region={:?} global={} protocol={} hc={} backends={} affinity={} tracking={} persistence={} idle={} ratio={:?} drop={} no_drain_on_failover={} locality={} draining={} policy={:?} delivery={}",
                b.name,
                b.region,
                b.global,
                b.protocol.name(),
                names(&b.health_checks),
                backends.join(","),
                b.session_affinity.name(),
                b.tracking_mode.name(),
                b.persistence.name(),
                b.idle_timeout_sec,
                b.failover_ratio.as_ref().map(Ratio::canonical),
                b.drop_traffic_if_unhealthy,
                b.disable_connection_drain_on_failover,
                b.locality_lb_policy.name(),
                b.draining_timeout_sec,
                b.service_lb_policy.as_ref().map(|p| &p.name),
                b.delivery.name()
            ));
        }
        for g in &self.instance_groups {
            lines.push(format!(
                "instance_group {:?} zone={:?} members={}",
                g.name,
                g.zone,
                names(&g.instances)
            ));
        }
        for g in &self.network_endpoint_groups {
            let mut endpoints: Vec<String> = g
                .endpoints
                .iter()
                .map(|e| format!("{}@{:?}", e.instance.name, e.ip))
                .collect();
            endpoints.sort();
            lines.push(format!(
                "neg {:?} zone={:?} endpoints={}",
                g.name,
                g.zone,
                endpoints.join(",")
            ));
        }
        for h in &self.health_checks {
            lines.push(format!(
                "health_check {:?} region={:?} probe={:?} port={} interval={} timeout={} up={} down={}",
                h.name,
                h.region,
                h.probe,
                h.port,
                h.check_interval_sec,
                h.timeout_sec,
                h.healthy_threshold,
                h.unhealthy_threshold
            ));
        }
        for p in &self.service_lb_policies {
            lines.push(format!(
                "service_lb_policy {:?} location={:?} algorithm={} drain={} threshold={} isolation={:?}",
                p.name,
                p.location,
                p.algorithm.name(),
                p.auto_capacity_drain,
                p.failover_health_threshold,
                p.isolation
            ));
        }
    }

    /// The instances of a backend's group: an instance group's members or a network endpoint
    /// group's endpoints, by name, as written (groups not defined give none).
    pub fn group_members(&self, backend: &Backend) -> Vec<&str> {
        let name = backend.group.name.as_str();
        if backend.neg {
            self.network_endpoint_groups
                .iter()
                .find(|g| g.name == name)
                .map(|g| {
                    g.endpoints
                        .iter()
                        .map(|e| e.instance.name.as_str())
                        .collect()
                })
                .unwrap_or_default()
        } else {
            self.instance_groups
                .iter()
                .find(|g| g.name == name)
                .map(|g| g.instances.iter().map(|r| r.name.as_str()).collect())
                .unwrap_or_default()
        }
    }

    /// The zone of a backend's group, when known: its `zone`, or else the zone of its first
    /// member that has one.
    pub fn group_zone(&self, backend: &Backend) -> Option<&str> {
        let name = backend.group.name.as_str();
        if backend.neg {
            self.network_endpoint_groups
                .iter()
                .find(|g| g.name == name)
                .and_then(|g| self.network_endpoint_group_zone(g))
        } else {
            self.instance_groups
                .iter()
                .find(|g| g.name == name)
                .and_then(|g| self.instance_group_zone(g))
        }
    }

    /// [`Config::group_members`] and [`Config::group_zone`] for many backends: the groups
    /// by name, looked up once instead of searched for each backend.
    pub fn group_lookup(&self) -> GroupLookup<'_> {
        let mut negs = std::collections::HashMap::new();
        for g in &self.network_endpoint_groups {
            // The first of a name, as `group_members` finds it.
            negs.entry(g.name.as_str()).or_insert(g);
        }
        let mut igs = std::collections::HashMap::new();
        for g in &self.instance_groups {
            igs.entry(g.name.as_str()).or_insert(g);
        }
        GroupLookup {
            config: self,
            negs,
            igs,
        }
    }

    /// The zone of an instance group: its `zone`, or else its first member's with one.
    pub fn instance_group_zone<'c>(&'c self, g: &'c InstanceGroup) -> Option<&'c str> {
        self.zone_or_members(&g.zone, g.instances.iter())
    }

    /// The zone of a network endpoint group: its `zone`, or else its first endpoint's
    /// instance's with one.
    pub fn network_endpoint_group_zone<'c>(
        &'c self,
        g: &'c NetworkEndpointGroup,
    ) -> Option<&'c str> {
        self.zone_or_members(&g.zone, g.endpoints.iter().map(|e| &e.instance))
    }

    fn zone_or_members<'c>(
        &'c self,
        zone: &'c str,
        mut members: impl Iterator<Item = &'c Ref>,
    ) -> Option<&'c str> {
        if !zone.is_empty() {
            return Some(zone);
        }
        members.find_map(|m| {
            self.instances
                .iter()
                .find(|i| i.name == m.name && !i.zone.is_empty())
                .map(|i| i.zone.as_str())
        })
    }

    /// The ready, non-terminating Kubernetes endpoints of `backend` in `pool`, when the pool
    /// is a Kubernetes Service's with `externalTrafficPolicy: Local` ([`crate::kube`]).
    pub fn ready_endpoints(&self, pool: &str, backend: &str) -> Option<u32> {
        self.kubernetes
            .iter()
            .flat_map(|k| &k.ready_endpoints)
            .find(|(p, b, _)| p == pool && b == backend)
            .map(|e| e.2)
    }

    /// SHA-256 of [`Config::canonical_text`].
    pub fn digest(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        Sha256::digest(self.canonical_text().as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_parse_and_compare_exactly() {
        let r = |t: &str| Ratio::parse(t).unwrap_or_else(|| panic!("{t}"));
        for (t, canonical) in [
            ("0", "0"),
            ("0.0", "0"),
            ("1", "1"),
            ("1.000", "1"),
            (".5", "0.5"),
            ("0.50", "0.5"),
            ("5e-1", "0.5"),
            ("50E-2", "0.5"),
            ("0.05e1", "0.5"),
            ("+0.25", "0.25"),
            ("0.001", "0.001"),
            ("1e-3", "0.001"),
            ("1e0", "1"),
        ] {
            assert_eq!(r(t).canonical(), canonical, "{t}");
            assert_eq!(r(t).text(), t);
        }
        for bad in [
            "", ".", "-0.5", "1.5", "2", "10e-1x", "0.5.5", "abc", "1e", "nan", "inf", "1e999",
        ] {
            assert!(Ratio::parse(bad).is_none(), "{bad}");
        }
        // 0.3 is 3/10 exactly (a double holds 0.2999…): 3 of 10 is at the ratio.
        assert!(r("0.3").at_or_above(3, 10));
        assert!(!r("0.3").at_or_above(4, 10));
        // 2/3 = 0.666…: above 0.6666, below 0.6667.
        assert!(!r("0.6666").at_or_above(2, 3));
        assert!(r("0.6667").at_or_above(2, 3));
        assert!(!r("0.3333").at_or_above(1, 3));
        assert!(r("0.3334").at_or_above(1, 3));
        assert!(r("1").at_or_above(7, 7) && r("0").at_or_above(0, 7) && !r("0").at_or_above(1, 7));
        assert!(r("0.5").at_or_above(0, 0), "0 ≤ ratio × 0");
        assert!(!r("0.5").at_or_above(1, 0));
        // Strictly below (backend services): 3 of 10 is not below 0.3, 2 of 10 is.
        assert!(!r("0.3").above_fraction(3, 10) && r("0.3").above_fraction(2, 10));
        assert!(r("0.6667").above_fraction(2, 3) && !r("0.6666").above_fraction(2, 3));
        assert!(!r("0").above_fraction(0, 7), "nothing is below 0");
        assert!(!r("1").above_fraction(7, 7) && r("1").above_fraction(6, 7));
        assert!(!r("0.5").above_fraction(0, 0));
    }

    #[test]
    fn prefix_contains_hand_worked() {
        let p = Prefix {
            addr: "198.51.100.0".parse().unwrap(),
            len: 24,
        };
        assert!(p.contains("198.51.100.77".parse().unwrap()));
        assert!(!p.contains("198.51.101.1".parse().unwrap()));
        assert_eq!(p.to_table().1, 120);
        let any = Prefix {
            addr: "0.0.0.0".parse().unwrap(),
            len: 0,
        };
        assert!(any.contains("203.0.113.9".parse().unwrap()));
        assert!(!any.contains("2001:db8::1".parse().unwrap()));
        assert_eq!(format_mac(0x0200_0000_00ab), "02:00:00:00:00:ab");
    }

    #[test]
    fn region_of_zone_hand_worked() {
        assert_eq!(region_of_zone("us-central1-a"), Some("us-central1"));
        assert_eq!(region_of_zone("europe-west1-b"), Some("europe-west1"));
        assert_eq!(region_of_zone("lab-a"), Some("lab"));
        assert_eq!(region_of_zone("z"), None);
        assert_eq!(region_of_zone("-a"), None);
        assert_eq!(region_of_zone("us-"), None);
        assert_eq!(
            Scope::Zone("asia-east1-c".into()).region(),
            Some("asia-east1")
        );
        assert_eq!(Scope::Global.region(), None);
    }
}
