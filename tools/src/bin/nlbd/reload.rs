//! Configuration reloads: on SIGHUP, and when the file's contents change (polled, which also
//! sees editors that replace the file by renaming).
//!
//! A new configuration is parsed and validated here, then compiled by the engine for the
//! device's profile; anything wrong is refused with one log line and the previous
//! configuration keeps serving. A refused file is not retried until its contents change again
//! (or on SIGHUP).

use crate::Daemon;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};

/// Digest of a configuration's text (to see whether it changed).
pub fn digest(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// Reads, validates and offers the file. `last` is the digest of the contents last acted on;
/// unchanged contents are skipped unless `forced` (SIGHUP).
async fn consider(daemon: &Daemon, last: &mut Option<u64>, read_failed: &mut bool, forced: bool) {
    let path = &daemon.config_path;
    let text = match tokio::task::spawn_blocking({
        let path = path.clone();
        move || std::fs::read_to_string(path)
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
                warn!(file = %path.display(), error = %e, "cannot read the configuration; the previous one keeps serving");
            }
            *read_failed = true;
            return;
        }
        Err(e) => {
            error!(error = %e, "reading the configuration");
            return;
        }
    };
    let d = digest(&text);
    if !forced && *last == Some(d) {
        return;
    }
    *last = Some(d);
    let name = path.display().to_string();
    let (config, diags) = flowtable_compiler::parse_sources(&[flowtable_compiler::kube::Source {
        name: name.clone(),
        text,
    }]);
    if let Err(diags) = diags.into_result() {
        let line = diags
            .to_string()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        error!(file = %name, "configuration refused, the previous one keeps serving: {line}");
        daemon
            .refused_early
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    info!(file = %name, trigger = if forced { "SIGHUP" } else { "file change" }, "reloading the configuration");
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
