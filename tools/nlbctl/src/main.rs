//! nlbctl: compile, explain, compare and inspect nlb-offload flow tables.
//!
//! Each subcommand lives in its own `cmd_*.rs` file with an `Args` (clap) and a
//! `run(Args) -> Result<(), CliError>`; adding one is one line in `commands!` below.
//! Exit status: 0 success, 1 user error, 2 internal error.

/// `println!` that ignores a closed stdout (`nlbctl inspect x | head` must not panic).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod admin;
mod cmd_fleet_upgrade;
mod common;
mod progress;

use clap::{Parser, Subcommand};
use common::CliError;
use std::process::ExitCode;

/// Declares the subcommands: `Variant => module,` (the module's `Args` doc comment is the
/// subcommand's help).
macro_rules! commands {
    ($($variant:ident => $module:ident,)*) => {
        $(mod $module;)*

        #[derive(Subcommand, Debug)]
        enum Command {
            $($variant($module::Args),)*
        }

        fn dispatch(command: Command) -> Result<(), CliError> {
            match command {
                $(Command::$variant(args) => $module::run(args),)*
            }
        }
    };
}

commands! {
    Compile => cmd_compile,
    Explain => cmd_explain,
    Diff => cmd_diff,
    Inspect => cmd_inspect,
    Sim => cmd_sim,
    PolicySim => cmd_policy_sim,
    Traffic => cmd_traffic,
    Load => cmd_load,
    Stats => cmd_stats,
    Status => cmd_status,
    Top => cmd_top,
    Flash => cmd_flash,
    FwInfo => cmd_fw_info,
    Devices => cmd_devices,
    Bind => cmd_bind,
    Unbind => cmd_unbind,
    Reboot => cmd_reboot,
    Health => cmd_health,
    Conntrack => cmd_conntrack,
    Publish => cmd_publish,
    Fleet => cmd_fleet,
    Drain => cmd_drain,
    Completions => cmd_completions,
    Man => cmd_man,
}

/// Control tool of nlb-offload, a passthrough L4 load balancer on an FPGA SmartNIC.
///
/// A configuration (Google Cloud's forwarding rules, target pools, target instances,
/// instances and legacy HTTP health checks; see docs/config.md) compiles into a table image
/// that the NIC executes. Exit status: 0 success, 1 user error (bad config or input, with
/// file:line:column), 2 internal error.
#[derive(Parser, Debug)]
#[command(name = "nlbctl", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", e.message);
            ExitCode::from(e.code)
        }
    }
}
