//! `nlbctl conntrack`: the connections the NIC tracks, as the running nlbd holds them.

use crate::cmd_health::{ask, proto};
use crate::common::{self, CliError};
use std::path::PathBuf;

/// List the connection table of the NIC (client, VIP, backend, rule, FIN/RST seen, seconds
/// since installed) from the running nlbd's copy of it.
///
/// Talks to nlbd's admin socket (mode 0600: run as nlbd's user).
///
/// Example: nlbctl conntrack --limit 20
#[derive(clap::Args, Debug)]
pub struct Args {
    /// nlbd's admin socket.
    #[arg(long, value_name = "PATH", default_value = proto::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// List at most this many connections.
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: usize,
    #[command(flatten)]
    output: common::Output,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let c: proto::ConntrackData = ask(
        &args.socket,
        &proto::Request::Conntrack { limit: args.limit },
    )?;
    if args.output.json() {
        return common::print_json(&c);
    }
    outln!(
        "{:<5} {:<45} {:<45} {:<20} {:<20} {:<6} {:>6}",
        "proto",
        "client",
        "vip",
        "backend",
        "rule",
        "state",
        "age"
    );
    for e in &c.entries {
        outln!(
            "{:<5} {:<45} {:<45} {:<20} {:<20} {:<6} {:>5}s",
            e.protocol,
            e.client,
            e.vip,
            e.backend,
            e.rule,
            if e.closed { "closed" } else { "open" },
            e.age_secs
        );
    }
    outln!(
        "{} of {} connections{}",
        c.total,
        c.capacity,
        if c.total > c.entries.len() {
            format!(" ({} listed; --limit for more)", c.entries.len())
        } else {
            String::new()
        }
    );
    Ok(())
}
