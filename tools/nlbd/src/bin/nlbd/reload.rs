//! Configuration reloads: on SIGHUP, and when the contents change (polled, which also sees
//! editors that replace a file by renaming). CONFIG is one file, or a directory of
//! Kubernetes manifests (every `.yaml`, `.yml` and `.json` file in it, as `nlbctl compile DIR`
//! reads it): a directory changes when any of its files changes, appears or goes.
//!
//! A new configuration is parsed and validated here as a whole (every file of a directory
//! together), then compiled by the engine for the device's profile; anything wrong is refused
//! with one log line naming each file, line and field, and the previous configuration keeps
//! serving. A refused configuration is not retried until its contents change again (or on
//! SIGHUP).

use crate::Daemon;
use nlb_config::kube::Source;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};

/// Diagnostics (one per line) as one log line, `; ` between them.
pub fn one_line(diags: &impl std::fmt::Display) -> String {
    diags
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Digest of the inputs' names and texts (to see whether any changed).
pub fn digest(sources: &[Source]) -> u64 {
    let mut h = DefaultHasher::new();
    for s in sources {
        s.name.hash(&mut h);
        s.text.hash(&mut h);
    }
    h.finish()
}

/// The inputs CONFIG names: the file, or every manifest file of the directory in name order.
pub fn read(path: &Path) -> Result<Vec<Source>, String> {
    if path.as_os_str() == "-" {
        return Err("--config - : nlbd reads its configuration again on changes, so it takes a file or a directory, not standard input".into());
    }
    nlb_config::read_sources(path).map_err(|e| e.to_string())
}

/// Reads, validates and offers the configuration. `last` is the digest of the contents last acted on;
/// unchanged contents are skipped unless `forced` (SIGHUP).
async fn consider(daemon: &Daemon, last: &mut Option<u64>, read_failed: &mut bool, forced: bool) {
    let path = &daemon.config_path;
    let sources = match tokio::task::spawn_blocking({
        let path = path.clone();
        move || read(&path)
    })
    .await
    {
        Ok(Ok(t)) => {
            *read_failed = false;
            t
        }
        Ok(Err(e)) => {
            // Once per run of failures: an editor may be between writing and renaming.
            if forced || !*read_failed {
                warn!(config = %path.display(), error = %e, "cannot read the configuration; the previous one keeps serving");
            }
            *read_failed = true;
            return;
        }
        Err(e) => {
            error!(error = %e, "reading the configuration");
            return;
        }
    };
    let d = digest(&sources);
    if !forced && *last == Some(d) {
        return;
    }
    *last = Some(d);
    let name = path.display().to_string();
    let (config, diags) = nlb_config::parse_sources(&sources);
    if let Err(diags) = diags.into_result() {
        let line = one_line(&diags);
        error!(config = %name, "configuration refused, the previous one keeps serving: {line}");
        daemon
            .refused_early
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    info!(config = %name, trigger = if forced { "SIGHUP" } else { "file change" }, "reloading the configuration");
    // The engine logs the outcome (applied, or refused on one line).
    if let Err(e) = daemon.reload(config, None).await {
        tracing::debug!(error = %e, "reload not applied");
    }
}

/// Watches for SIGHUP and (every `watch`, when given) for changed contents; `serving` is the
/// digest of the text nlbd started with.
pub async fn run(daemon: Arc<Daemon>, watch: Option<Duration>, serving: u64) {
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "cannot handle SIGHUP; reloads follow file changes only");
            None
        }
    };
    let mut last = Some(serving);
    let mut read_failed = false;
    loop {
        let tick = async {
            match watch {
                Some(w) => tokio::time::sleep(w).await,
                None => std::future::pending().await,
            }
        };
        let signal = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = signal => consider(&daemon, &mut last, &mut read_failed, true).await,
            _ = tick => consider(&daemon, &mut last, &mut read_failed, false).await,
        }
    }
}

/// With `--etcd` there is no file to read again: SIGHUP (which would otherwise end the
/// process) is logged and ignored; new revisions arrive through the watch.
pub async fn ignore_hangup() {
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return std::future::pending().await;
    };
    while hup.recv().await.is_some() {
        info!("SIGHUP: the configuration comes from etcd (nlbctl publish); nothing to reload");
    }
}
