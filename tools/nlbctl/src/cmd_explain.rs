//! `nlbctl explain`: where a flow goes, and why.

use crate::common::{self, CliError};
use nlb_config::kube::{KubeService, NodeEligibility};
use flowtable_compiler::{explain_compiled, Explanation, Flow, Fragment};
use nlb_control::admin_proto as proto;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Show which rule, pool, key, hash, Maglev slot and backend a new flow gets, and why.
///
/// The answer is read from the compiled tables the NIC would execute. It is the choice for a
/// new connection; an established one keeps the backend its connection-table entry holds.
///
/// For a backend service it also says which tier, region and zone the flow's backend is in,
/// and per group its capacity, live connections, utilisation and share of new connections
/// (SPEC R6). A compile has no live connections (it decides as if none were open); with
/// --socket the running nlbd answers from the tables it serves, decided over the live
/// connections it counts.
///
/// For a Kubernetes Service (CONFIG is manifests: a file, a directory, or `-` for a `kubectl
/// get -o yaml|json` stream) it lists every node: whether it is a backend and why (traffic
/// policy, subset, Ready, exclusion label), whether it may take this new connection and why
/// (health, ready endpoints, weights), and its share. `--service NAMESPACE/NAME` takes the
/// Service's address, first port and protocol when --dst and --proto are not given.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON), or Kubernetes manifests (a file, a directory, or
    /// `-` for standard input).
    #[arg(required_unless_present = "socket")]
    config: Option<PathBuf>,
    /// A Kubernetes Service of CONFIG, as NAMESPACE/NAME: the flow goes to its address (of
    /// --src's family), and to its first port and protocol unless --dst/--proto say otherwise.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "socket")]
    service: Option<String>,
    /// Ask the running nlbd (its admin socket) instead of compiling CONFIG: its tables and
    /// live connection counts.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["config", "health", "profile"])]
    socket: Option<PathBuf>,
    /// Client address and port, such as 198.51.100.7:40000 or [2001:db8::7]:40000.
    #[arg(long, value_name = "IP:PORT")]
    src: SocketAddr,
    /// VIP and port.
    #[arg(long, value_name = "IP:PORT", required_unless_present = "service")]
    dst: Option<SocketAddr>,
    /// IP protocol. Protocols other than TCP and UDP carry no ports (the ports given are not
    /// used); an `L3_DEFAULT` rule takes them.
    #[arg(long, value_enum, required_unless_present = "service")]
    proto: Option<Proto>,
    /// The packet is a fragment: `--fragment` (the first, with ports) or `--fragment=later`
    /// (no ports).
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "first")]
    fragment: Option<FragmentArg>,
    /// Health/weight state (see docs/config.md).
    #[arg(long, value_name = "FILE")]
    health: Option<PathBuf>,
    /// Capacity profile.
    #[arg(long, default_value = "sim", value_name = "NAME")]
    profile: String,
    #[command(flatten)]
    output: common::Output,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Proto {
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
    Gre,
    Esp,
    Ah,
    Sctp,
}

impl Proto {
    /// The IP protocol number.
    fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
            Proto::Icmp => 1,
            Proto::Icmpv6 => 58,
            Proto::Gre => 47,
            Proto::Esp => 50,
            Proto::Ah => 51,
            Proto::Sctp => 132,
        }
    }

    /// As `--proto` spells it.
    fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::Icmpv6 => "icmpv6",
            Proto::Gre => "gre",
            Proto::Esp => "esp",
            Proto::Ah => "ah",
            Proto::Sctp => "sctp",
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum FragmentArg {
    First,
    Later,
}

/// A compiled configuration with the health state it was compiled with.
type CompiledConfig = (
    flowtable_compiler::Config,
    flowtable_compiler::Compiled,
    flowtable_compiler::HealthState,
);

/// Runs the subcommand: the configuration compiled, the flow (from --service or
/// --dst/--proto), its explanation, then the report.
pub fn run(args: Args) -> Result<(), CliError> {
    // A configuration is compiled first: --service reads its address from it.
    let compiled_config = compile(&args)?;
    let Target {
        dst,
        proto,
        service: wanted,
    } = service_target(&args, compiled_config.as_ref())?;
    let (Some(dst), Some(proto)) = (dst, proto) else {
        return Err(CliError::user("error: give --dst and --proto, or --service"));
    };
    if args.src.is_ipv4() != dst.is_ipv4() {
        return Err(CliError::user(
            "error: --src and --dst must be of one address family",
        ));
    }
    let flow = Flow {
        protocol: proto.number(),
        src: args.src.ip(),
        src_port: args.src.port(),
        dst: dst.ip(),
        dst_port: dst.port(),
        fragment: match args.fragment {
            None => Fragment::No,
            Some(FragmentArg::First) => Fragment::First,
            Some(FragmentArg::Later) => Fragment::Later,
        },
    };
    let e = explanation(&args, &flow, compiled_config.as_ref())?;
    // The Kubernetes Service behind the flow's pool, and its nodes.
    let kubernetes = compiled_config.as_ref().and_then(|(config, compiled, health)| {
        let pool = e.pool.as_ref()?;
        let k = config.kubernetes.iter().find(|k| k.pools.contains(pool))?;
        Some((k.clone(), k.eligibility(&compiled.served_slice(pool), pool, health)))
    });
    if let (Some(name), false) = (&wanted, kubernetes.is_some()) {
        outln!("note: the flow does not reach Service {name}'s pools ({})", e.reason);
    }
    if args.output.json() {
        return print_json(&e, kubernetes.as_ref());
    }
    print_flow(&args, proto, dst, &flow, &e);
    print_service(&e);
    if let Some((k, nodes)) = &kubernetes {
        print_kubernetes(k, nodes, &e);
    }
    if e.verdict == "forward" {
        outln!(
            "  (a new connection's choice; an established one keeps its connection-table backend)"
        );
    }
    Ok(())
}

/// CONFIG compiled, unless nlbd is asked instead.
fn compile(args: &Args) -> Result<Option<CompiledConfig>, CliError> {
    let (None, Some(config)) = (&args.socket, &args.config) else {
        return Ok(None);
    };
    let profile = common::profile(&args.profile)?;
    let health = common::health(args.health.as_deref())?;
    let (config, compiled) =
        common::compile_config_with(config, &health, profile, &Default::default())?;
    Ok(Some((config, compiled, health)))
}

/// What the flow is sent to.
struct Target {
    dst: Option<SocketAddr>,
    proto: Option<Proto>,
    /// The Service asked for (--service).
    service: Option<String>,
}

/// The destination and protocol asked for, with --service's address, first port and
/// protocol where --dst and --proto do not say.
fn service_target(
    args: &Args,
    compiled_config: Option<&CompiledConfig>,
) -> Result<Target, CliError> {
    let (dst, proto) = (args.dst, args.proto);
    let Some(name) = &args.service else {
        return Ok(Target {
            dst,
            proto,
            service: None,
        });
    };
    let kube = compiled_config
        .map(|(c, ..)| c.kubernetes.as_slice())
        .unwrap_or_default();
    let Some(k) = kube.iter().find(|k| &k.service == name) else {
        let known: Vec<&str> = kube.iter().map(|k| k.service.as_str()).collect();
        return Err(CliError::user(format!(
            "error: --service {name}: no LoadBalancer Service of that NAMESPACE/NAME in the manifests (they have: {})",
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        )));
    };
    let Some(vip) = k.vips.iter().find(|v| v.is_ipv4() == args.src.is_ipv4()) else {
        return Err(CliError::user(format!(
            "error: Service {name} has no {} address for --src {}",
            if args.src.is_ipv4() { "IPv4" } else { "IPv6" },
            args.src
        )));
    };
    let (udp, port) = k.ports.first().copied().unwrap_or((false, 0));
    let proto_udp = match proto {
        Some(p) => matches!(p, Proto::Udp),
        None => udp,
    };
    let port = dst.map(|d| d.port()).unwrap_or_else(|| {
        k.ports
            .iter()
            .find(|(u, _)| *u == proto_udp)
            .map_or(port, |p| p.1)
    });
    Ok(Target {
        dst: Some(SocketAddr::new(*vip, port)),
        proto: proto.or(Some(if udp { Proto::Udp } else { Proto::Tcp })),
        service: Some(name.clone()),
    })
}

/// The flow explained by the running nlbd (--socket) or from the compiled configuration.
fn explanation(
    args: &Args,
    flow: &Flow,
    compiled_config: Option<&CompiledConfig>,
) -> Result<Explanation, CliError> {
    match (&args.socket, compiled_config) {
        (Some(socket), _) => crate::admin::ask(
            socket,
            &proto::Request::Explain {
                protocol: flow.protocol,
                src: flow.src,
                src_port: flow.src_port,
                dst: flow.dst,
                dst_port: flow.dst_port,
                fragment: match flow.fragment {
                    Fragment::No => "no",
                    Fragment::First => "first",
                    Fragment::Later => "later",
                }
                .into(),
            },
        ),
        (None, Some((_, compiled, _))) => Ok(explain_compiled(compiled, flow)),
        (None, None) => Err(CliError::user(
            "error: give a configuration file or --socket PATH",
        )),
    }
}

/// `--output json`: the explanation, with the Kubernetes Service and its nodes when there is
/// one.
fn print_json(
    e: &Explanation,
    kubernetes: Option<&(KubeService, Vec<NodeEligibility>)>,
) -> Result<(), CliError> {
    let Some((k, nodes)) = kubernetes else {
        return common::print_json(e);
    };
    let mut v =
        serde_json::to_value(e).map_err(|err| CliError::internal(format!("error: {err}")))?;
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "kubernetes".into(),
            serde_json::json!({
                "service": k.service,
                "shape": format!("{:?}", k.shape),
                "externalTrafficPolicy": format!("{:?}", k.policy),
                "healthCheck": k.health_check,
                "zonalAffinity": k.zonal_affinity.then_some(&k.client_zone),
                "nodes": nodes,
                "notes": k.notes,
            }),
        );
    }
    common::print_json(&v)
}

/// The flow and what the tables chose for it: rule, pool, key, hash, slot, backend, verdict
/// and why.
fn print_flow(args: &Args, proto: Proto, dst: SocketAddr, flow: &Flow, e: &Explanation) {
    let proto_name = proto.name();
    let frag = match flow.fragment {
        Fragment::No => "",
        Fragment::First => " (first fragment)",
        Fragment::Later => " (later fragment)",
    };
    if matches!(proto, Proto::Tcp | Proto::Udp) {
        outln!("flow     {proto_name} {} -> {dst}{frag}", args.src);
    } else {
        outln!("flow     {proto_name} {} -> {}{frag}", args.src.ip(), dst.ip());
    }
    let show = |label: &str, v: &Option<String>| {
        if let Some(v) = v {
            outln!("{label:<8} {v}");
        }
    };
    show("rule", &e.rule);
    show("acl", &e.acl);
    show("pool", &e.pool);
    show("affinity", &e.affinity);
    show("key", &e.key);
    if let Some(b) = &e.key_bytes {
        let groups: Vec<&str> = [
            (0, 2),
            (2, 4),
            (4, 8),
            (8, 12),
            (12, 16),
            (16, 48),
            (48, 80),
        ]
        .iter()
        .filter_map(|&(a, z)| b.get(a..z))
        .collect();
        outln!(
            "bytes    {}  (type proto | sport | dport | rsvd | src addr | dst addr)",
            groups.join(" ")
        );
    }
    if let Some(h) = e.hash {
        outln!("hash     {h:#010x}");
    }
    if let (Some(s), Some(base), Some(size)) = (e.slot, e.slice_base, e.slice_size) {
        outln!(
            "slot     {s} (slice {base}..{} of {size} slots{})",
            u64::from(base) + u64::from(size),
            match (e.failed_over, e.service.is_some()) {
                (true, true) => ", failover backends'",
                (true, false) => ", backup pool's",
                _ => "",
            }
        );
    }
    if let Some(b) = &e.backend {
        outln!(
            "backend  {b} {} {}",
            e.backend_ip.as_deref().unwrap_or(""),
            e.backend_mac.as_deref().unwrap_or("")
        );
    }
    show("delivery", &e.delivery);
    outln!("verdict  {} ({})", e.verdict, e.reason);
    outln!("why:");
    for s in &e.steps {
        outln!("  - {s}");
    }
}

/// A backend service's group, tier and share for the flow, and its policy's steps.
fn print_service(e: &Explanation) {
    let Some(svc) = &e.service else {
        return;
    };
    let place = match (&svc.zone, &svc.region) {
        (Some(z), Some(r)) => format!("zone {z}, region {r}"),
        (None, Some(r)) if !r.is_empty() => format!("region {r}"),
        _ => "no zone given".to_string(),
    };
    match (&svc.group, svc.tier) {
        (Some(g), Some(t)) => outln!(
            "service  {}: group {g} ({place}), tier {t}, {:.1} % of new connections",
            svc.service,
            100.0 * svc.share.unwrap_or(0.0)
        ),
        (Some(g), None) => outln!("service  {}: group {g} ({place}), no tier", svc.service),
        _ => outln!("service  {}", svc.service),
    }
    outln!("policy:");
    for s in &svc.steps {
        outln!("  - {s}");
    }
}

/// The Kubernetes Service behind the flow's pool: which nodes may take the flow, and why.
fn print_kubernetes(
    k: &KubeService,
    nodes: &[NodeEligibility],
    e: &Explanation,
) {
    outln!(
        "kubernetes Service {}: {}, externalTrafficPolicy {:?}",
        k.service,
        k.shape.describe(),
        k.policy
    );
    outln!("  health check {}", k.health_check);
    if k.zonal_affinity {
        outln!(
            "  zonal affinity (trafficDistribution): only zone {} (the NIC's) while it has a healthy eligible node, else every zone (spill ratio 0, SPEC R7.4)",
            k.client_zone
        );
    }
    let members = nodes.iter().filter(|n| n.member).count();
    let eligible = nodes.iter().filter(|n| n.eligible).count();
    outln!(
        "  {members} of {} nodes are backends, {eligible} take new connections (+ eligible, ~ backend not eligible now, - not a backend; endpoints ready/serving/terminating):",
        nodes.len()
    );
    for n in nodes {
        let this = if e.backend.is_some() && e.backend == n.backend {
            "  <- this flow"
        } else {
            ""
        };
        outln!(
            "  {} {:<28} {:<16} {}/{}/{}  {}{this}",
            match (n.eligible, n.member) {
                (true, _) => "+",
                (false, true) => "~",
                (false, false) => "-",
            },
            n.node,
            if n.zone.is_empty() { "(no zone)" } else { n.zone.as_str() },
            n.endpoints[0],
            n.endpoints[1],
            n.endpoints[2],
            n.why
        );
    }
    for note in &k.notes {
        outln!("  note: {note}");
    }
}
