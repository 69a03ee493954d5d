//! `nlbctl publish`: a configuration to the fleet's etcd, as a new revision (SPEC R11.1).

use crate::common::{self, CliError};
use flowtable_compiler::{
    compile_file_after, maglev_movement, CompileOptions, Error, HealthState, Symbols,
};
use nlb_config::parse_config;
use nlb_control::fleet::{self, Live, Published, Store};
use std::path::PathBuf;

/// Publish a configuration to the fleet (etcd) as its new revision: every `nlbd --etcd`
/// applies it.
///
/// Validates and compiles CONFIG first, with the same messages as `nlbctl compile`
/// (file:line:column: field: message); a configuration with any problem is not published.
/// The stored value holds the source text, the profile and the digests of the configuration
/// and of its compiled tables; etcd's revision of the key is the configuration's revision.
/// `--dry-run` publishes nothing and shows what would change against what is live: the text
/// and, per pool, the share of flows whose backend would change. A publish fails (exit 1)
/// when etcd cannot be reached or the live configuration changed while publishing. A live
/// value that is not a configuration nlbctl published is replaced (and said so).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON).
    config: PathBuf,
    #[command(flatten)]
    fleet: common::FleetStoreArgs,
    /// Capacity profile to check the configuration against (the hosts' NICs).
    #[arg(long, default_value = "sim", value_name = "NAME")]
    profile: String,
    /// Show the difference with the live configuration; publish nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let profile = common::profile(&args.profile)?;
    let store = args.fleet.store()?;
    // Validate before anything else: an invalid file fails the same way with etcd down.
    let healthy = HealthState::new();
    let options = CompileOptions { profile };
    compile_file_after(&args.config, &healthy, &options, &Symbols::default()).map_err(
        |e| match e {
            Error::Invalid(d) => {
                let n = d.len();
                CliError::user(format!(
                    "{}\n{n} problem{} found; nothing published",
                    Error::Invalid(d),
                    if n == 1 { "" } else { "s" }
                ))
            }
            e => CliError::from(e),
        },
    )?;
    let unreachable =
        |e: fleet::FleetError| CliError::user(format!("error: {e}; nothing published"));
    let (live, _) = store.live().map_err(unreachable)?;
    // Ids: those of the live revision for what stays (hosts compile with these).
    let previous = live
        .as_ref()
        .and_then(|l| l.published.as_ref().ok())
        .and_then(|p| p.ids.as_ref())
        .map(fleet::Ids::symbols)
        .unwrap_or_default();
    let (_, compiled) = compile_file_after(&args.config, &healthy, &options, &previous)?;
    let source = std::fs::read_to_string(&args.config).map_err(|e| {
        CliError::user(format!("error: cannot read {}: {e}", args.config.display()))
    })?;
    let tables_digest = compiled
        .tables_digest()
        .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
    let file = args.config.display().to_string();
    let new = Published {
        file: file.clone(),
        source,
        profile: profile.name.to_string(),
        config_digest: fleet::hex(&compiled.config_digest),
        tables_digest: fleet::hex(&tables_digest),
        published_unix_ms: fleet::now_unix_ms(),
        ids: Some(fleet::Ids::of(&compiled.symbols)),
    };
    if args.dry_run {
        dry_run(&new, live.as_ref(), &store, profile);
        return Ok(());
    }
    let expected = live.as_ref().map_or(0, |l| l.revision);
    match live.as_ref().map(|l| (l.revision, &l.published)) {
        Some((rev, Ok(old)))
            if old.source == new.source && old.tables_digest == new.tables_digest =>
        {
            outln!(
                "{file} is what revision {rev} under {} serves already; nothing published",
                store.keys.prefix()
            );
            return Ok(());
        }
        Some((rev, Err(why))) => eprintln!(
            "warning: {} (revision {rev}): {why}; replacing it",
            store.keys.config()
        ),
        _ => {}
    }
    match store.publish(&new, expected).map_err(unreachable)? {
        Ok(rev) => {
            outln!(
                "published {file} as revision {rev} under {} (profile {}, tables digest {})",
                store.keys.prefix(),
                new.profile,
                fleet::short_digest(&new.tables_digest)
            );
            Ok(())
        }
        Err(now) => Err(CliError::user(format!(
            "error: the live configuration changed while publishing (revision {expected} became {now}); nothing published: look at it (--dry-run) and publish again"
        ))),
    }
}

/// Prints what publishing `new` would change against `live`.
fn dry_run(new: &Published, live: Option<&Live>, store: &Store, profile: &'static nlb_hw::Profile) {
    let Some(Live {
        revision: rev,
        published,
    }) = live
    else {
        outln!(
            "nothing is live under {}: publishing would make {} the fleet's first revision (tables digest {})",
            store.keys.prefix(),
            new.file,
            fleet::short_digest(&new.tables_digest)
        );
        return;
    };
    let old = match published {
        Ok(old) => old,
        Err(why) => {
            outln!(
                "live: revision {rev} of {}: {why}; publishing would replace it with {} (tables digest {}); nothing published (--dry-run)",
                store.keys.config(),
                new.file,
                fleet::short_digest(&new.tables_digest)
            );
            return;
        }
    };
    outln!(
        "live: revision {rev}, {} (tables digest {}, published {} s ago)",
        old.file,
        fleet::short_digest(&old.tables_digest),
        fleet::now_unix_ms().saturating_sub(old.published_unix_ms) / 1000
    );
    let text = fleet::unified_diff(
        &format!("{} (revision {rev})", old.file),
        &old.source,
        &format!("{} (new)", new.file),
        &new.source,
    );
    if text.is_empty() {
        outln!("the text is the same: publishing would change nothing");
        return;
    }
    outln!("{}", text.trim_end());
    // The flows each change moves (both sides every backend healthy, ids in name order, as
    // a fresh host compiles them).
    let compile = |p: &Published| {
        let (config, diags) = parse_config(&p.file, &p.source);
        if !diags.is_empty() {
            return None;
        }
        flowtable_compiler::compile_after(
            &config,
            &HealthState::new(),
            &CompileOptions { profile },
            &Symbols::default(),
        )
        .ok()
    };
    let (Some(a), Some(b)) = (compile(old), compile(new)) else {
        outln!(
            "(the live configuration does not compile for profile {}: no per-pool comparison)",
            profile.name
        );
        return;
    };
    let rows = maglev_movement((&a.tables, &a.symbols), (&b.tables, &b.symbols));
    let changed: Vec<_> = rows.iter().filter(|r| r.status != "unchanged").collect();
    outln!();
    outln!("{:<24} {:>9} {:>9}  status", "pool", "moved", "minimum");
    for r in &changed {
        outln!(
            "{:<24} {:>8.3}% {:>8.3}%  {}",
            r.pool,
            100.0 * r.moved,
            100.0 * r.minimum,
            r.status
        );
    }
    outln!(
        "{} of {} pools changed; nothing published (--dry-run)",
        changed.len(),
        rows.len()
    );
}
