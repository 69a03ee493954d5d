//! `nlbctl completions`: shell completion scripts generated from the command-line definitions.

use crate::common::CliError;
use clap::CommandFactory;

/// Print the completion script of nlbctl for a shell.
///
/// The script is generated from nlbctl's own definitions, so it always knows every command and
/// option of this build. Install it where your shell looks:
///
///   nlbctl completions bash > /usr/share/bash-completion/completions/nlbctl
///
///   nlbctl completions zsh > /usr/local/share/zsh/site-functions/_nlbctl
///
///   nlbctl completions fish > ~/.config/fish/completions/nlbctl.fish
///
/// `nlbd --completions SHELL` and `nlb-sim --completions SHELL` print theirs; deploy/install.sh
/// installs all of them with the man pages (docs/operations.md).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut cmd = crate::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "nlbctl", &mut out);
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(&out);
    Ok(())
}
