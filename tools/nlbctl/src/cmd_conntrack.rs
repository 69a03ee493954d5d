//! `nlbctl conntrack`: the connections the NIC tracks, as the running nlbd holds them.

use crate::admin::ask;
use nlb_control::admin_proto as proto;
use crate::common::{self, CliError};
use crate::progress::Bar;
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
    /// List every connection (fetched page by page, with a progress bar on a terminal).
    #[arg(long, conflicts_with = "limit")]
    all: bool,
    /// Connections per request with --all.
    #[arg(long, value_name = "N", default_value_t = 8192, requires = "all", value_parser = clap::value_parser!(u32).range(1..))]
    page: u32,
    #[command(flatten)]
    output: common::Output,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let c = if args.all {
        dump(&args.socket, args.page as usize)?
    } else {
        ask(
            &args.socket,
            &proto::Request::Conntrack {
                limit: args.limit,
                from: 0,
            },
        )?
    };
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
        if args.all && c.total != c.entries.len() {
            format!(
                " ({} listed: the table changed while it was listed)",
                c.entries.len()
            )
        } else if !args.all && c.total > c.entries.len() {
            format!(" ({} listed; --limit or --all for more)", c.entries.len())
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Every connection, `limit` per request (the default 8192 is small enough that nlbd answers
/// each page quickly, large enough that a table of millions takes few requests). Each page
/// starts where the one before ended, so the table changing in between neither repeats nor
/// skips a connection that stays.
fn dump(socket: &std::path::Path, limit: usize) -> Result<proto::ConntrackData, CliError> {
    let mut bar = Bar::new("listing", "connections");
    let page = |from| ask(socket, &proto::Request::Conntrack { limit, from });
    let mut all: proto::ConntrackData = page(0)?;
    bar.update(all.entries.len() as u64, all.total as u64);
    while let Some(from) = all.next {
        let more: proto::ConntrackData = page(from)?;
        if more.next.is_some_and(|next| next <= from) {
            return Err(CliError::internal(format!(
                "error: nlbd's connection listing does not advance (page from {from})"
            )));
        }
        all.entries.extend(more.entries);
        all.total = more.total;
        all.next = more.next;
        bar.update(all.entries.len() as u64, all.total as u64);
    }
    bar.finish();
    Ok(all)
}
