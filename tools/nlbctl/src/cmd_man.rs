//! `nlbctl man`: man pages generated from the command-line definitions.

use crate::common::CliError;
use clap::CommandFactory;
use std::path::PathBuf;

/// Print nlbctl's man page, or write every page of it into a directory.
///
/// The pages are generated from nlbctl's own definitions (the same text as --help): nlbctl(1)
/// lists the commands, and each command has its own page, nlbctl-top(1), nlbctl-load(1), ...
///
///   nlbctl man | man -l -
///
///   nlbctl man --dir /usr/local/share/man/man1
///
/// `nlbd --man` and `nlb-sim --man` print theirs; deploy/install.sh installs all of them with
/// the completion scripts (docs/operations.md).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write nlbctl.1 and nlbctl-COMMAND.1 for every command here (instead of printing
    /// nlbctl.1).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let cmd = crate::Cli::command();
    let Some(dir) = args.dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut out)
            .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(&out);
        return Ok(());
    };
    let fail = |e: std::io::Error| CliError::user(format!("error: {}: {e}", dir.display()));
    std::fs::create_dir_all(&dir).map_err(fail)?;
    clap_mangen::generate_to(cmd, &dir).map_err(fail)?;
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .map_err(fail)?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("nlbctl") && n.ends_with(".1"))
        .collect();
    pages.sort();
    outln!("wrote {} pages to {}: {}", pages.len(), dir.display(), pages.join(" "));
    Ok(())
}
