//! Reading the objects of backend-service load balancers (SPEC R1, R6): backend services,
//! instance groups, network endpoint groups, health checks of the newer kind and service LB
//! policies, in our form and as Google Cloud prints them. Field names, enum values, defaults
//! and ranges are Google Cloud's (docs/config.md lists them with their sources).

use super::{refs, Obj, Reader, DELIVERIES};
use crate::model::*;
use crate::policy::{Algorithm, Isolation, Preference};
use crate::resource::{self, Collection};
use crate::tree::{Node, Value};
use nlb_hw::enums::{Affinity, Delivery};
use std::ops::Not;

pub(super) const GROUPS: &[Collection] =
    &[resource::INSTANCE_GROUPS, resource::NETWORK_ENDPOINT_GROUPS];
pub(super) const HEALTH_CHECKS: &[Collection] = &[resource::HEALTH_CHECKS];
const INSTANCES: &[Collection] = &[resource::INSTANCES];

/// Why a field of a proxy load balancer is refused.
const PROXY_ONLY: &str =
    "belongs to Google Cloud's proxy load balancers and has no meaning for a passthrough one";

/// Fields of a backend service.
pub(super) const SERVICE: &[&str] = &[
    "name",
    "description",
    "region",
    "protocol",
    "loadBalancingScheme",
    "healthChecks",
    "backends",
    "sessionAffinity",
    "connectionTrackingPolicy",
    "failoverPolicy",
    "localityLbPolicy",
    "connectionDraining",
    "serviceLbPolicy",
    "portName",
    "timeoutSec",
    "affinityCookieTtlSec",
    "logConfig",
    "network",
    "delivery",
];
/// Output-only fields Google Cloud prints for a backend service.
pub(super) const SERVICE_IGNORED: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "selfLink",
    "selfLinkWithId",
    "fingerprint",
    "usedBy",
];
pub(super) const SERVICE_LATER: &[(&str, &str)] = &[
    ("cdnPolicy", PROXY_ONLY),
    ("enableCDN", PROXY_ONLY),
    ("iap", PROXY_ONLY),
    ("customRequestHeaders", PROXY_ONLY),
    ("customResponseHeaders", PROXY_ONLY),
    ("consistentHash", PROXY_ONLY),
    ("circuitBreakers", PROXY_ONLY),
    ("outlierDetection", PROXY_ONLY),
    ("localityLbPolicies", PROXY_ONLY),
    ("securitySettings", PROXY_ONLY),
    ("maxStreamDuration", PROXY_ONLY),
    ("compressionMode", PROXY_ONLY),
    ("securityPolicy", "is not supported yet"),
    ("edgeSecurityPolicy", "is not supported yet"),
    (
        "subsetting",
        "is not supported yet (internal passthrough load balancers)",
    ),
    (
        "networkPassThroughLbTrafficPolicy",
        "is not supported yet (zonal affinity of passthrough load balancers)",
    ),
    (
        "ipAddressSelectionPolicy",
        "is not supported yet (IPv6-only backends)",
    ),
];

const BACKEND: &[&str] = &[
    "group",
    "description",
    "balancingMode",
    "maxConnections",
    "maxConnectionsPerInstance",
    "maxConnectionsPerEndpoint",
    "capacityScaler",
    "failover",
    "preference",
];
const BACKEND_LATER: &[(&str, &str)] = &[
    (
        "maxRate",
        "belongs to balancingMode RATE, which passthrough load balancers do not offer; capacity here is counted in connections",
    ),
    (
        "maxRatePerInstance",
        "belongs to balancingMode RATE, which passthrough load balancers do not offer; capacity here is counted in connections",
    ),
    (
        "maxRatePerEndpoint",
        "belongs to balancingMode RATE, which passthrough load balancers do not offer; capacity here is counted in connections",
    ),
    (
        "maxUtilization",
        "belongs to balancingMode UTILIZATION, which passthrough load balancers do not offer; capacity here is counted in connections",
    ),
    ("customMetrics", PROXY_ONLY),
];

pub(super) const INSTANCE_GROUP: &[&str] = &[
    "name",
    "description",
    "zone",
    "instances",
    "namedPorts",
    "network",
    "subnetwork",
    "size",
];
pub(super) const INSTANCE_GROUP_IGNORED: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "selfLink",
    "selfLinkWithId",
    "fingerprint",
];
pub(super) const NEG: &[&str] = &[
    "name",
    "description",
    "zone",
    "networkEndpointType",
    "networkEndpoints",
    "network",
    "subnetwork",
    "size",
    "defaultPort",
    "annotations",
];
pub(super) const HEALTH_CHECK: &[&str] = &[
    "name",
    "description",
    "region",
    "type",
    "checkIntervalSec",
    "timeoutSec",
    "healthyThreshold",
    "unhealthyThreshold",
    "httpHealthCheck",
    "httpsHealthCheck",
    "tcpHealthCheck",
    "logConfig",
];
pub(super) const HEALTH_CHECK_LATER: &[(&str, &str)] = &[
    ("sslHealthCheck", "is not supported yet (nlbd probes HTTP, HTTPS and TCP)"),
    ("http2HealthCheck", "is not supported yet (nlbd probes HTTP, HTTPS and TCP)"),
    ("grpcHealthCheck", "is not supported yet (nlbd probes HTTP, HTTPS and TCP)"),
    ("grpcTlsHealthCheck", "is not supported yet (nlbd probes HTTP, HTTPS and TCP)"),
    (
        "sourceRegions",
        "is not supported yet: it moves the probes to chosen regions, and nlbd probes from the NIC's host",
    ),
];
pub(super) const POLICY: &[&str] = &[
    "name",
    "description",
    "labels",
    "loadBalancingAlgorithm",
    "autoCapacityDrain",
    "failoverConfig",
    "isolationConfig",
];
pub(super) const POLICY_IGNORED: &[&str] = &["createTime", "updateTime", "kind"];

/// Longest `request` and `response` of a health check: Google Cloud matches the
/// response in the first 1024 bytes.
pub const MAX_PROBE_DATA: usize = 1024;

/// Most seconds a connection may stay idle: 16 hours, Google Cloud's maximum.
pub const MAX_IDLE_TIMEOUT_SEC: u64 = 57_600;

/// `true`/`false` of a field, `default` when absent.
pub(crate) fn boolean(r: &mut Reader, o: &Obj, name: &str, default: bool) -> bool {
    let Some(n) = o.get(name) else {
        return default;
    };
    let path = o.path(name);
    match r.scalar(n, &path) {
        Some("true") | Some("True") => true,
        Some("false") | Some("False") => false,
        Some(t) => {
            r.err(
                n.pos,
                &path,
                format!("`{t}` is not a boolean"),
                Some("true or false".into()),
            );
            default
        }
        None => default,
    }
}

/// A nested mapping such as `connectionTrackingPolicy`.
fn nested<'n>(
    r: &mut Reader,
    o: &Obj<'n>,
    name: &str,
    known: &[&'static str],
    unsupported: &[(&str, &str)],
) -> Option<Obj<'n>> {
    let n = o.get(name)?;
    r.object(n, &o.path(name), known, unsupported)
}

/// A decimal in `[0, 1]` kept as written (`failoverRatio`, `capacityScaler`).
fn ratio(r: &mut Reader, o: &Obj, name: &str, valid: &str) -> Option<Ratio> {
    let n = o.get(name)?;
    let path = o.path(name);
    let t = r.scalar(n, &path)?;
    match Ratio::parse(t) {
        Some(v) => Some(v),
        None => {
            r.err(
                n.pos,
                &path,
                if t.trim().parse::<f64>().is_ok() {
                    format!("`{t}` is outside [0, 1]")
                } else {
                    format!("`{t}` is not a number")
                },
                Some(valid.into()),
            );
            None
        }
    }
}

/// The session affinities of a backend service (SPEC R3.1; the two 5-tuple spellings differ
/// only in name).
const AFFINITIES: &[(&str, Affinity)] = &[
    ("NONE", Affinity::None),
    ("CLIENT_IP", Affinity::ClientIp),
    ("CLIENT_IP_PROTO", Affinity::ClientIpProto),
    ("CLIENT_IP_PORT_PROTO", Affinity::ClientIpPortProto),
    ("CLIENT_IP_NO_DESTINATION", Affinity::ClientIpNoDestination),
];
const COOKIE_AFFINITY: &str =
    "is a cookie or header affinity of Google Cloud's proxy load balancers: a passthrough load balancer sees no HTTP";

pub(super) fn read_backend_service(
    r: &mut Reader,
    o: &Obj,
    index: usize,
    global: bool,
) -> Option<BackendService> {
    let name = r.name(o);
    let region = service_region(r, o, index, global);
    let protocol = service_protocol(r, o);
    let health_checks = refs(r, o, "healthChecks", HEALTH_CHECKS);
    let backends = service_backends(r, o);
    let session_affinity = r.enumerated(
        o,
        "sessionAffinity",
        Affinity::None,
        AFFINITIES,
        &[
            ("GENERATED_COOKIE", COOKIE_AFFINITY),
            ("HEADER_FIELD", COOKIE_AFFINITY),
            ("HTTP_COOKIE", COOKIE_AFFINITY),
            ("STRONG_COOKIE_AFFINITY", COOKIE_AFFINITY),
        ],
    );
    let (tracking_mode, persistence, idle_timeout_sec) =
        connection_tracking(r, o, session_affinity);
    let (failover_ratio, drop_traffic_if_unhealthy, disable_connection_drain_on_failover) =
        failover_policy(r, o, protocol);
    let locality_lb_policy = r.enumerated(
        o,
        "localityLbPolicy",
        LocalityLbPolicy::Maglev,
        &[
            ("MAGLEV", LocalityLbPolicy::Maglev),
            ("WEIGHTED_MAGLEV", LocalityLbPolicy::WeightedMaglev),
        ],
        &[
            ("ROUND_ROBIN", PROXY_ONLY),
            ("LEAST_REQUEST", PROXY_ONLY),
            ("RING_HASH", PROXY_ONLY),
            ("RANDOM", PROXY_ONLY),
            ("ORIGINAL_DESTINATION", PROXY_ONLY),
            ("WEIGHTED_ROUND_ROBIN", PROXY_ONLY),
            ("WEIGHTED_GCP_RENDEZVOUS", PROXY_ONLY),
        ],
    );
    let mut draining_timeout_sec = 0;
    if let Some(c) = nested(r, o, "connectionDraining", &["drainingTimeoutSec"], &[]) {
        draining_timeout_sec = r.integer(&c, "drainingTimeoutSec", 0, 0, 3600) as u32;
    }
    let service_lb_policy = service_lb_policy_ref(r, o);
    // Informational fields Google Cloud prints; `portName` and `timeoutSec` have no
    // meaning for a passthrough load balancer (packets keep their ports; nothing is proxied).
    if let Some(n) = o.get("portName") {
        r.scalar(n, &o.path("portName"));
    }
    r.integer(o, "timeoutSec", 30, 1, 2_147_483_647);
    r.integer(o, "affinityCookieTtlSec", 0, 0, 1_209_600);
    let delivery = r.enumerated(o, "delivery", Delivery::L2Dsr, DELIVERIES, &[]);
    Some(BackendService {
        name: name?,
        region,
        global,
        protocol,
        health_checks,
        backends,
        session_affinity,
        tracking_mode,
        persistence,
        idle_timeout_sec,
        failover_ratio,
        drop_traffic_if_unhealthy,
        disable_connection_drain_on_failover,
        locality_lb_policy,
        draining_timeout_sec,
        service_lb_policy,
        delivery,
        loc: o.loc(index),
    })
}

/// A backend service's `region`: required of a regional one, refused on a global one.
fn service_region(r: &mut Reader, o: &Obj, index: usize, global: bool) -> String {
    let region = r.location(o, "region", false);
    if global && o.get("region").is_some() {
        r.err(
            o.loc(index).field("region"),
            &o.path("region"),
            "a global backend service has no `region`",
            Some("leave `region` out, or write the service under `regionBackendServices`".into()),
        );
    } else if !global && o.get("region").is_none() {
        r.err(
            o.pos,
            &o.path("region"),
            "`region` is required: this is a regional backend service",
            Some("a region such as us-central1, or write the service under `backendServices` (global)".into()),
        );
    }
    region
}

/// A backend service's `protocol`, and its `loadBalancingScheme` (the external passthrough
/// load balancer's only).
fn service_protocol(r: &mut Reader, o: &Obj) -> ServiceProtocol {
    let protocol = r.enumerated(
        o,
        "protocol",
        ServiceProtocol::Tcp,
        &[
            ("TCP", ServiceProtocol::Tcp),
            ("UDP", ServiceProtocol::Udp),
            ("UNSPECIFIED", ServiceProtocol::Unspecified),
        ],
        &[
            ("HTTP", "is for proxy load balancers; a passthrough backend service is TCP, UDP or UNSPECIFIED"),
            ("HTTPS", "is for proxy load balancers; a passthrough backend service is TCP, UDP or UNSPECIFIED"),
            ("HTTP2", "is for proxy load balancers; a passthrough backend service is TCP, UDP or UNSPECIFIED"),
            ("SSL", "is for proxy load balancers; a passthrough backend service is TCP, UDP or UNSPECIFIED"),
            ("GRPC", "is for proxy load balancers; a passthrough backend service is TCP, UDP or UNSPECIFIED"),
        ],
    );
    r.enumerated(
        o,
        "loadBalancingScheme",
        (),
        &[("EXTERNAL", ())],
        &[
            (
                "EXTERNAL_MANAGED",
                "is not supported: this is the external passthrough load balancer",
            ),
            (
                "INTERNAL",
                "is not supported yet: this is the external passthrough load balancer",
            ),
            (
                "INTERNAL_MANAGED",
                "is not supported: this is the external passthrough load balancer",
            ),
            (
                "INTERNAL_SELF_MANAGED",
                "is not supported: this is the external passthrough load balancer",
            ),
        ],
    );
    protocol
}

/// A backend service's `backends[]`.
fn service_backends(r: &mut Reader, o: &Obj) -> Vec<Backend> {
    let mut backends = Vec::new();
    let bpath = o.path("backends");
    for (i, n) in r.list(o.get("backends"), &bpath).iter().enumerate() {
        let path = format!("{bpath}[{i}]");
        if let Some(bo) = r.object(n, &path, BACKEND, BACKEND_LATER) {
            backends.extend(read_backend(r, &bo, i));
        }
    }
    backends
}

/// `connectionTrackingPolicy`: tracking mode, persistence on unhealthy backends, idle
/// timeout (defaults when absent).
fn connection_tracking(
    r: &mut Reader,
    o: &Obj,
    session_affinity: Affinity,
) -> (TrackingMode, Persistence, u16) {
    let mut tracking_mode = TrackingMode::PerConnection;
    let mut persistence = Persistence::DefaultForProtocol;
    let mut idle_timeout_sec = 60u16;
    if let Some(t) = nested(
        r,
        o,
        "connectionTrackingPolicy",
        &[
            "trackingMode",
            "connectionPersistenceOnUnhealthyBackends",
            "idleTimeoutSec",
        ],
        &[(
            "enableStrongAffinity",
            "is not supported yet (Google Cloud does not offer it publicly)",
        )],
    ) {
        tracking_mode = r.enumerated(
            &t,
            "trackingMode",
            TrackingMode::PerConnection,
            &[
                ("PER_CONNECTION", TrackingMode::PerConnection),
                ("PER_SESSION", TrackingMode::PerSession),
                ("TRACKING_MODE_UNSPECIFIED", TrackingMode::PerConnection),
            ],
            &[],
        );
        // The NIC tracks each connection by its own 5-tuple: PER_SESSION is that only under
        // a 5-tuple affinity (Google Cloud's PER_SESSION with a shorter affinity tracks
        // by the affinity's key, which the connection table cannot).
        let five_tuple = matches!(
            session_affinity,
            Affinity::None | Affinity::ClientIpPortProto
        );
        if tracking_mode == TrackingMode::PerSession && !five_tuple {
            r.err(
                t.loc(0).field("trackingMode"),
                &t.path("trackingMode"),
                format!(
                    "PER_SESSION tracking with sessionAffinity {} is not supported: it would track by the affinity's key, and the NIC's connection table tracks each connection by its own 5-tuple",
                    session_affinity.name()
                ),
                Some("PER_CONNECTION, or PER_SESSION with sessionAffinity NONE or CLIENT_IP_PORT_PROTO (where the two are the same)".into()),
            );
        }
        persistence = r.enumerated(
            &t,
            "connectionPersistenceOnUnhealthyBackends",
            Persistence::DefaultForProtocol,
            &[
                ("DEFAULT_FOR_PROTOCOL", Persistence::DefaultForProtocol),
                ("NEVER_PERSIST", Persistence::NeverPersist),
                ("ALWAYS_PERSIST", Persistence::AlwaysPersist),
                (
                    "CONNECTION_PERSISTENCE_ON_UNHEALTHY_BACKENDS_UNSPECIFIED",
                    Persistence::DefaultForProtocol,
                ),
            ],
            &[],
        );
        idle_timeout_sec = r.integer(&t, "idleTimeoutSec", 60, 1, MAX_IDLE_TIMEOUT_SEC) as u16;
    }
    (tracking_mode, persistence, idle_timeout_sec)
}

/// `failoverPolicy`: failover ratio, drop traffic if unhealthy, no connection drain on
/// failover (defaults when absent).
fn failover_policy(
    r: &mut Reader,
    o: &Obj,
    protocol: ServiceProtocol,
) -> (Option<Ratio>, bool, bool) {
    let mut failover_ratio = None;
    let mut drop_traffic_if_unhealthy = false;
    let mut disable_connection_drain_on_failover = false;
    if let Some(f) = nested(
        r,
        o,
        "failoverPolicy",
        &[
            "failoverRatio",
            "dropTrafficIfUnhealthy",
            "disableConnectionDrainOnFailover",
        ],
        &[],
    ) {
        failover_ratio = ratio(r, &f, "failoverRatio", "a number from 0 to 1, such as 0.5");
        drop_traffic_if_unhealthy = boolean(r, &f, "dropTrafficIfUnhealthy", false);
        disable_connection_drain_on_failover =
            boolean(r, &f, "disableConnectionDrainOnFailover", false);
        // compute v1 BackendServiceFailoverPolicy: "can be set to true only if the protocol
        // is TCP".
        if disable_connection_drain_on_failover && protocol != ServiceProtocol::Tcp {
            r.err(
                f.loc(0).field("disableConnectionDrainOnFailover"),
                &f.path("disableConnectionDrainOnFailover"),
                format!(
                    "`disableConnectionDrainOnFailover` can be true only for protocol TCP, and this service's protocol is {}",
                    protocol.name()
                ),
                Some("false, or protocol TCP".into()),
            );
        }
    }
    (
        failover_ratio,
        drop_traffic_if_unhealthy,
        disable_connection_drain_on_failover,
    )
}

/// `serviceLbPolicy`: a name, or the policy's full resource name.
fn service_lb_policy_ref(r: &mut Reader, o: &Obj) -> Option<Ref> {
    o.get("serviceLbPolicy").and_then(|n| {
        let path = o.path("serviceLbPolicy");
        let text = r.scalar(n, &path)?;
        match resource::parse_policy_name(text) {
            Ok((name, location)) => Some(Ref {
                name,
                pos: n.pos,
                collection: Some("serviceLbPolicies"),
                scope: location.map(|l| {
                    if l == "global" {
                        Scope::Global
                    } else {
                        Scope::Region(l)
                    }
                }),
            }),
            Err(msg) => {
                r.err(
                    n.pos,
                    &path,
                    msg,
                    Some(
                        "a name, or `projects/PROJECT/locations/global/serviceLbPolicies/NAME`"
                            .into(),
                    ),
                );
                None
            }
        }
    })
}

fn read_backend(r: &mut Reader, o: &Obj, index: usize) -> Option<Backend> {
    let group = match o.get("group") {
        Some(n) => r.reference(n, &o.path("group"), GROUPS),
        None => {
            r.err(
                o.pos,
                &o.path("group"),
                "`group` is required: an instance group or a network endpoint group",
                None,
            );
            None
        }
    };
    r.enumerated(
        o,
        "balancingMode",
        (),
        &[("CONNECTION", ())],
        &[
            ("UTILIZATION", "is not offered by passthrough load balancers; capacity here is counted in connections"),
            ("RATE", "is not offered by passthrough load balancers; capacity here is counted in connections"),
            ("CUSTOM_METRICS", PROXY_ONLY),
        ],
    );
    // In the order written: the later one is the one in excess.
    let mut given: Vec<&'static str> = [
        "maxConnections",
        "maxConnectionsPerInstance",
        "maxConnectionsPerEndpoint",
    ]
    .into_iter()
    .filter(|f| o.get(f).is_some())
    .collect();
    given.sort_by_key(|f| o.get(f).map(|n| n.pos));
    let mut max_connections = None;
    if given.len() > 1 {
        r.err(
            o.get(given[1]).map_or(o.pos, |n| n.pos),
            &o.path(given[1]),
            format!("`{}` and `{}` exclude each other", given[0], given[1]),
            Some("one of maxConnections (the group), maxConnectionsPerInstance (instance groups) or maxConnectionsPerEndpoint (network endpoint groups)".into()),
        );
    } else if let Some(&field) = given.first() {
        let n = r.integer(o, field, 0, 0, 2_147_483_647);
        max_connections = Some(match field {
            "maxConnections" => MaxConnections::PerGroup(n),
            "maxConnectionsPerInstance" => MaxConnections::PerInstance(n),
            _ => MaxConnections::PerEndpoint(n),
        });
    }
    let scaler_valid = "0 (drains the backend) or 0.1 to 1.0";
    let mut capacity_scaler = Ratio::one();
    if let Some(s) = ratio(r, o, "capacityScaler", scaler_valid) {
        // 0, or 0.1 to 1.0, as Google Cloud allows.
        if s.is_zero().not() && s.compare(&Ratio::tenth()) == std::cmp::Ordering::Less {
            r.err(
                o.loc(index).field("capacityScaler"),
                &o.path("capacityScaler"),
                format!("`{}` is between 0 and 0.1", s.text()),
                Some(scaler_valid.into()),
            );
        } else {
            capacity_scaler = s;
        }
    }
    let failover = boolean(r, o, "failover", false);
    let preference = r.enumerated(
        o,
        "preference",
        Preference::Default,
        &[
            ("DEFAULT", Preference::Default),
            ("PREFERRED", Preference::Preferred),
            ("PREFERENCE_UNSPECIFIED", Preference::Default),
        ],
        &[],
    );
    let group = group?;
    let neg = group.collection == Some("networkEndpointGroups");
    Some(Backend {
        group,
        neg,
        max_connections,
        capacity_scaler,
        failover,
        preference,
        loc: o.loc(index),
    })
}

/// One item of an instance group's `instances`: a reference, or an item of `gcloud compute
/// instance-groups list-instances` output (`{instance: URL, status: RUNNING, ...}`).
fn group_member(r: &mut Reader, n: &Node, path: &str) -> Option<Ref> {
    if let Value::Map(_) = n.value {
        let o = r.object(n, path, &["instance", "status", "namedPorts"], &[])?;
        return match o.get("instance") {
            Some(i) => r.reference(i, &o.path("instance"), INSTANCES),
            None => {
                r.err(o.pos, &o.path("instance"), "`instance` is required", None);
                None
            }
        };
    }
    r.reference(n, path, INSTANCES)
}

/// `size` as Google Cloud prints it.
fn size(r: &mut Reader, o: &Obj) -> Option<u64> {
    o.get("size")
        .map(|_| r.integer(o, "size", 0, 0, u64::from(u32::MAX)))
}

pub(super) fn read_instance_group(r: &mut Reader, o: &Obj, index: usize) -> Option<InstanceGroup> {
    let name = r.name(o);
    let zone = r.location(o, "zone", true);
    let path = o.path("instances");
    let instances = r
        .list(o.get("instances"), &path)
        .iter()
        .enumerate()
        .filter_map(|(i, n)| group_member(r, n, &format!("{path}[{i}]")))
        .collect();
    let size = size(r, o);
    Some(InstanceGroup {
        name: name?,
        zone,
        instances,
        size,
        loc: o.loc(index),
    })
}

/// One network endpoint: `{instance, ipAddress}` as the API attaches it, or an item of
/// `gcloud compute network-endpoint-groups list-network-endpoints` output
/// (`{networkEndpoint: {instance, ipAddress}, healths: ...}`).
fn network_endpoint(r: &mut Reader, n: &Node, path: &str) -> Option<NetworkEndpoint> {
    const ENDPOINT: &[&str] = &["instance", "ipAddress"];
    const LATER: &[(&str, &str)] = &[
        ("port", "is for GCE_VM_IP_PORT endpoints of proxy load balancers; a GCE_VM_IP endpoint is an instance's address"),
        ("ipv6Address", "is not supported yet (IPv6 endpoints)"),
        ("fqdn", "is for internet network endpoint groups"),
    ];
    let o = r.object_with(
        n,
        path,
        &["networkEndpoint", "instance", "ipAddress"],
        &["healths"],
        LATER,
    )?;
    let inner;
    let o = match o.get("networkEndpoint") {
        Some(e) => {
            inner = r.object(e, &o.path("networkEndpoint"), ENDPOINT, LATER)?;
            &inner
        }
        None => &o,
    };
    let instance = match o.get("instance") {
        Some(i) => r.reference(i, &o.path("instance"), INSTANCES),
        None => {
            r.err(
                o.pos,
                &o.path("instance"),
                "`instance` is required: a GCE_VM_IP endpoint is an instance",
                None,
            );
            None
        }
    };
    let ip = o
        .get("ipAddress")
        .and_then(|n| r.ip(n, &o.path("ipAddress")));
    Some(NetworkEndpoint {
        instance: instance?,
        ip,
        ip_pos: o.loc(0).field("ipAddress"),
        pos: o.pos,
    })
}

pub(super) fn read_network_endpoint_group(
    r: &mut Reader,
    o: &Obj,
    index: usize,
) -> Option<NetworkEndpointGroup> {
    let name = r.name(o);
    let zone = r.location(o, "zone", true);
    let other = "is a kind of network endpoint group that passthrough load balancers do not take; they take GCE_VM_IP endpoints";
    r.enumerated(
        o,
        "networkEndpointType",
        (),
        &[("GCE_VM_IP", ())],
        &[
            ("GCE_VM_IP_PORT", other),
            ("GCE_VM_IP_PORTMAP", other),
            ("NON_GCP_PRIVATE_IP_PORT", other),
            ("INTERNET_IP_PORT", other),
            ("INTERNET_FQDN_PORT", other),
            ("SERVERLESS", other),
            ("PRIVATE_SERVICE_CONNECT", other),
        ],
    );
    if o.get("networkEndpointType").is_none() {
        r.err(
            o.pos,
            &o.path("networkEndpointType"),
            "`networkEndpointType` is required",
            Some("GCE_VM_IP".into()),
        );
    }
    let path = o.path("networkEndpoints");
    let endpoints = r
        .list(o.get("networkEndpoints"), &path)
        .iter()
        .enumerate()
        .filter_map(|(i, n)| network_endpoint(r, n, &format!("{path}[{i}]")))
        .collect();
    let size = size(r, o);
    Some(NetworkEndpointGroup {
        name: name?,
        zone,
        endpoints,
        size,
        loc: o.loc(index),
    })
}

/// ASCII text of at most [`MAX_PROBE_DATA`] bytes (`request`, `response`).
fn probe_data(r: &mut Reader, o: &Obj, name: &str) -> String {
    let Some(text) = r.string(o, name, false) else {
        return String::new();
    };
    let pos = o.get(name).map_or(o.pos, |n| n.pos);
    if !text.is_ascii() {
        r.err(
            pos,
            &o.path(name),
            format!("`{name}` must be ASCII, as Google Cloud requires"),
            Some(format!("ASCII text of at most {MAX_PROBE_DATA} bytes")),
        );
    } else if text.len() > MAX_PROBE_DATA {
        r.err(
            pos,
            &o.path(name),
            format!(
                "`{name}` is {} bytes long; the response is matched in the first {MAX_PROBE_DATA}",
                text.len()
            ),
            Some(format!("ASCII text of at most {MAX_PROBE_DATA} bytes")),
        );
    }
    text
}

pub(super) fn read_health_check(r: &mut Reader, o: &Obj, index: usize) -> Option<HealthCheck> {
    let name = r.name(o);
    let region = r.location(o, "region", false);
    let later = "is not supported yet: nlbd probes HTTP, HTTPS and TCP";
    let kind = r.enumerated(
        o,
        "type",
        None,
        &[
            ("HTTP", Some("httpHealthCheck")),
            ("HTTPS", Some("httpsHealthCheck")),
            ("TCP", Some("tcpHealthCheck")),
        ],
        &[
            ("SSL", later),
            ("HTTP2", later),
            ("GRPC", later),
            ("GRPC_WITH_TLS", later),
        ],
    );
    let written: Vec<&str> = ["httpHealthCheck", "httpsHealthCheck", "tcpHealthCheck"]
        .into_iter()
        .filter(|f| o.get(f).is_some())
        .collect();
    // `type` names the one sub-object; without `type`, the one sub-object written says it.
    let field = match (kind, written.as_slice()) {
        (Some(f), _) => Some(f),
        (None, [one]) if o.get("type").is_none() => Some(*one),
        (None, _) if o.get("type").is_some() => None,
        (None, _) => {
            r.err(
                o.pos,
                &o.path("type"),
                "`type` is required",
                Some("HTTP, HTTPS or TCP, with its httpHealthCheck, httpsHealthCheck or tcpHealthCheck".into()),
            );
            None
        }
    };
    if let Some(field) = field {
        for other in written.iter().filter(|w| **w != field) {
            r.err(
                o.loc(index).field(other),
                &o.path(other),
                format!("`{other}` does not go with `type` {}", type_of(field)),
                Some(format!("`{field}`")),
            );
        }
    }
    let (probe, port) = match field {
        Some(field) => read_probe(r, o, field),
        None => (
            Probe::Tcp {
                request: String::new(),
                response: String::new(),
            },
            80,
        ),
    };
    let check_interval_sec = r.integer(o, "checkIntervalSec", 5, 1, 300) as u32;
    let timeout_sec = r.integer(o, "timeoutSec", 5, 1, 300) as u32;
    let healthy_threshold = r.integer(o, "healthyThreshold", 2, 1, 10) as u32;
    let unhealthy_threshold = r.integer(o, "unhealthyThreshold", 2, 1, 10) as u32;
    Some(HealthCheck {
        name: name?,
        region,
        probe,
        port,
        check_interval_sec,
        timeout_sec,
        healthy_threshold,
        unhealthy_threshold,
        loc: o.loc(index),
    })
}

fn type_of(field: &str) -> &'static str {
    match field {
        "httpHealthCheck" => "HTTP",
        "httpsHealthCheck" => "HTTPS",
        _ => "TCP",
    }
}

/// The probe sub-object of a health check (`httpHealthCheck`, ...) and its port.
fn read_probe(r: &mut Reader, o: &Obj, field: &'static str) -> (Probe, u16) {
    let http = field != "tcpHealthCheck";
    let known: &[&'static str] = if http {
        &[
            "port",
            "portSpecification",
            "requestPath",
            "host",
            "response",
            "proxyHeader",
        ]
    } else {
        &[
            "port",
            "portSpecification",
            "request",
            "response",
            "proxyHeader",
        ]
    };
    let named = "is not supported by backend services of passthrough load balancers: their health checks use a fixed `port`";
    let default_port = if field == "httpsHealthCheck" { 443 } else { 80 };
    let empty = |r: &mut Reader| -> (Probe, u16) {
        let _ = r;
        let probe = match field {
            "httpHealthCheck" => Probe::Http {
                request_path: "/".into(),
                host: String::new(),
                response: String::new(),
            },
            "httpsHealthCheck" => Probe::Https {
                request_path: "/".into(),
                host: String::new(),
                response: String::new(),
            },
            _ => Probe::Tcp {
                request: String::new(),
                response: String::new(),
            },
        };
        (probe, default_port)
    };
    let Some(p) = nested(r, o, field, known, &[("portName", named)]) else {
        return empty(r);
    };
    r.enumerated(
        &p,
        "portSpecification",
        (),
        &[("USE_FIXED_PORT", ())],
        &[("USE_NAMED_PORT", named), ("USE_SERVING_PORT", named)],
    );
    r.enumerated(
        &p,
        "proxyHeader",
        (),
        &[("NONE", ())],
        &[(
            "PROXY_V1",
            "is not supported yet: nlbd's probes send no PROXY header",
        )],
    );
    let port = r.integer(&p, "port", u64::from(default_port), 1, 65535) as u16;
    let response = probe_data(r, &p, "response");
    let probe = if http {
        let request_path = r
            .string(&p, "requestPath", false)
            .unwrap_or_else(|| "/".into());
        if !request_path.starts_with('/') {
            r.err(
                p.loc(0).field("requestPath"),
                &p.path("requestPath"),
                format!("`{request_path}` must start with `/`"),
                Some("a path such as /healthz".into()),
            );
        }
        let host = r.string(&p, "host", false).unwrap_or_default();
        if field == "httpHealthCheck" {
            Probe::Http {
                request_path,
                host,
                response,
            }
        } else {
            Probe::Https {
                request_path,
                host,
                response,
            }
        }
    } else {
        Probe::Tcp {
            request: probe_data(r, &p, "request"),
            response,
        }
    };
    (probe, port)
}

pub(super) fn read_service_lb_policy(
    r: &mut Reader,
    o: &Obj,
    index: usize,
) -> Option<ServiceLbPolicy> {
    let (name, location) = match o.get("name") {
        Some(n) => {
            let text = r.scalar(n, &o.path("name"))?;
            match resource::parse_policy_name(text) {
                Ok((name, location)) => {
                    let ok = name.len() <= 63
                        && name.starts_with(|c: char| c.is_ascii_lowercase())
                        && name
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                    if !ok {
                        r.err(
                            n.pos,
                            &o.path("name"),
                            format!("invalid name `{name}`"),
                            Some("lowercase letters, digits and '-', starting with a letter, at most 63 characters".into()),
                        );
                    }
                    (Some(name), location.unwrap_or_default())
                }
                Err(msg) => {
                    r.err(n.pos, &o.path("name"), msg, None);
                    (None, String::new())
                }
            }
        }
        None => {
            r.err(o.pos, &o.path("name"), "`name` is required", None);
            (None, String::new())
        }
    };
    let algorithm = r.enumerated(
        o,
        "loadBalancingAlgorithm",
        Algorithm::WaterfallByRegion,
        &[
            ("SPRAY_TO_WORLD", Algorithm::SprayToWorld),
            ("SPRAY_TO_REGION", Algorithm::SprayToRegion),
            ("WATERFALL_BY_REGION", Algorithm::WaterfallByRegion),
            ("WATERFALL_BY_ZONE", Algorithm::WaterfallByZone),
            (
                "LOAD_BALANCING_ALGORITHM_UNSPECIFIED",
                Algorithm::WaterfallByRegion,
            ),
        ],
        &[],
    );
    let mut auto_capacity_drain = false;
    if let Some(a) = nested(r, o, "autoCapacityDrain", &["enable"], &[]) {
        auto_capacity_drain = boolean(r, &a, "enable", false);
    }
    let mut failover_health_threshold = 70u8;
    if let Some(f) = nested(r, o, "failoverConfig", &["failoverHealthThreshold"], &[]) {
        failover_health_threshold = r.integer(&f, "failoverHealthThreshold", 70, 1, 99) as u8;
    }
    let mut isolation = Isolation::None;
    if let Some(i) = nested(
        r,
        o,
        "isolationConfig",
        &["isolationGranularity", "isolationMode"],
        &[],
    ) {
        let granularity = r.enumerated(
            &i,
            "isolationGranularity",
            false,
            &[
                ("REGION", true),
                ("ISOLATION_GRANULARITY_UNSPECIFIED", false),
            ],
            &[],
        );
        let mode = r.enumerated(
            &i,
            "isolationMode",
            Isolation::Nearest,
            &[
                ("NEAREST", Isolation::Nearest),
                ("STRICT", Isolation::Strict),
                ("ISOLATION_MODE_UNSPECIFIED", Isolation::Nearest),
            ],
            &[],
        );
        // Without the granularity Google Cloud enforces no isolation (SPEC R6.5).
        if granularity {
            isolation = mode;
        }
    }
    Some(ServiceLbPolicy {
        name: name?,
        location,
        algorithm,
        auto_capacity_drain,
        failover_health_threshold,
        isolation,
        loc: o.loc(index),
    })
}
