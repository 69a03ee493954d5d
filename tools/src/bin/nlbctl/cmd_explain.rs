//! `nlbctl explain`: where a flow goes, and why.

use crate::common::{self, CliError};
use flowtable_compiler::{explain, Flow, Fragment};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Show which rule, pool, key, hash, Maglev slot and backend a new flow gets, and why.
///
/// The answer is read from the compiled tables the NIC would execute. It is the choice for a
/// new connection; an established one keeps the backend its connection-table entry holds.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON).
    config: PathBuf,
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
    let profile = common::profile(&args.profile)?;
    let health = common::health(args.health.as_deref())?;
    let compiled = common::compile_config(&args.config, &health, profile, &Default::default())?;
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
    let mut e = explain(&compiled.tables, &compiled.nic, &compiled.symbols, &flow);
    if let Some(p) = e.pool_id.and_then(|id| compiled.pools.get(usize::from(id))) {
        e.steps.push(format!("pool {}: {}", p.name, p.why));
    }
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
            match (e.failed_over, compiled.service_decision(e.pool.as_deref().unwrap_or("")).is_some()) {
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
    if e.verdict == "forward" {
        outln!(
            "  (a new connection's choice; an established one keeps its connection-table backend)"
        );
    }
    Ok(())
}
