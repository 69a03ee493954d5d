//! `nlbctl explain`: where a flow goes, and why.

use crate::common::{self, CliError};
use flowtable_compiler::{explain_compiled, Explanation, Flow, Fragment};
use nlb_tools::admin_proto as proto;
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
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON).
    #[arg(required_unless_present = "socket")]
    config: Option<PathBuf>,
    /// Ask the running nlbd (its admin socket) instead of compiling CONFIG: its tables and
    /// live connection counts.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["config", "health", "profile"])]
    socket: Option<PathBuf>,
    /// Client address and port, such as 198.51.100.7:40000 or [2001:db8::7]:40000.
    #[arg(long, value_name = "IP:PORT")]
    src: SocketAddr,
    /// VIP and port.
    #[arg(long, value_name = "IP:PORT")]
    dst: SocketAddr,
    /// IP protocol. Protocols other than TCP and UDP carry no ports (the ports given are not
    /// used); an `L3_DEFAULT` rule takes them.
    #[arg(long, value_enum)]
    proto: Proto,
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

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    if args.src.is_ipv4() != args.dst.is_ipv4() {
        return Err(CliError::user(
            "error: --src and --dst must be of one address family",
        ));
    }
    let flow = Flow {
        protocol: args.proto.number(),
        src: args.src.ip(),
        src_port: args.src.port(),
        dst: args.dst.ip(),
        dst_port: args.dst.port(),
        fragment: match args.fragment {
            None => Fragment::No,
            Some(FragmentArg::First) => Fragment::First,
            Some(FragmentArg::Later) => Fragment::Later,
        },
    };
    let mut kube_services = Vec::new();
    let e: Explanation = match (&args.socket, &args.config) {
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
        )?,
        (None, Some(config)) => {
            let profile = common::profile(&args.profile)?;
            let health = common::health(args.health.as_deref())?;
            let (config, compiled) =
                common::compile_config_with(config, &health, profile, &Default::default())?;
            kube_services = config.kubernetes;
            explain_compiled(&compiled, &flow)
        }
        (None, None) => {
            return Err(CliError::user(
                "error: give a configuration file or --socket PATH",
            ))
        }
    };
    if args.output.json() {
        return common::print_json(&e);
    }
    let proto = args.proto.name();
    let frag = match flow.fragment {
        Fragment::No => "",
        Fragment::First => " (first fragment)",
        Fragment::Later => " (later fragment)",
    };
    if matches!(args.proto, Proto::Tcp | Proto::Udp) {
        outln!("flow     {proto} {} -> {}{frag}", args.src, args.dst);
    } else {
        outln!("flow     {proto} {} -> {}{frag}", args.src.ip(), args.dst.ip());
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
    if let Some(svc) = &e.service {
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
    if let Some(k) = e
        .pool
        .as_ref()
        .and_then(|p| kube_services.iter().find(|k| k.pools.contains(p)))
    {
        print_kubernetes(k, &e);
    }
    if e.verdict == "forward" {
        outln!(
            "  (a new connection's choice; an established one keeps its connection-table backend)"
        );
    }
    Ok(())
}

/// The Kubernetes Service behind the flow's pool: which nodes are backends, and why.
fn print_kubernetes(k: &flowtable_compiler::kube::KubeService, e: &Explanation) {
    outln!(
        "kubernetes Service {}: {}, externalTrafficPolicy {:?}",
        k.service,
        k.shape.describe(),
        k.policy
    );
    outln!("  health check {}", k.health_check);
    let members = k.nodes.iter().filter(|n| n.member).count();
    outln!(
        "  {members} of {} nodes are backends (ready / serving / terminating endpoints of the Service on each):",
        k.nodes.len()
    );
    for n in &k.nodes {
        let this = if e.backend.as_deref().is_some_and(|b| b == n.node || b == format!("{}.ipv6", n.node)) {
            "  <- this flow"
        } else {
            ""
        };
        outln!(
            "  {} {:<28} {:<16} {}/{}/{}  {}{this}",
            if n.member { "+" } else { "-" },
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
