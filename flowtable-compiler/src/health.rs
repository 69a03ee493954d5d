//! Health and weight state (`--health FILE`): which backends are healthy and what weight
//! their probes reported (SPEC R5). The slow path writes it; the compiler reads it.
//!
//! The file is a YAML or JSON mapping from instance name to `{healthy: bool, weight: 0..1000}`
//! (`weight` optional); instances not listed are healthy with their configured weight.

use crate::config::Reader;
use crate::diag::{Diagnostics, Pos};
use crate::model::Config;
use crate::tree::{self, Value};
use crate::Error;
use std::collections::BTreeMap;
use std::path::Path;

/// What is known about one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendHealth {
    /// Whether it passes its health check.
    pub healthy: bool,
    /// Weight reported by its probe (`X-Load-Balancing-Endpoint-Weight`), 0..=1000.
    pub weight: Option<u32>,
}

impl Default for BackendHealth {
    fn default() -> Self {
        BackendHealth {
            healthy: true,
            weight: None,
        }
    }
}

/// Health of every backend by instance name; a name not present is healthy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthState {
    /// States by instance name.
    pub backends: BTreeMap<String, BackendHealth>,
    file: String,
    positions: BTreeMap<String, Pos>,
}

impl HealthState {
    /// Everyone healthy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state of one backend.
    pub fn get(&self, name: &str) -> BackendHealth {
        self.backends.get(name).copied().unwrap_or_default()
    }

    /// Sets the state of one backend.
    pub fn set(&mut self, name: &str, health: BackendHealth) {
        self.backends.insert(name.to_string(), health);
    }

    /// Marks one backend healthy or not, keeping its weight.
    pub fn set_healthy(&mut self, name: &str, healthy: bool) {
        let mut h = self.get(name);
        h.healthy = healthy;
        self.set(name, h);
    }

    /// Parses a health file.
    pub fn parse(file: &str, text: &str) -> Result<HealthState, Diagnostics> {
        let doc = tree::parse(file, text)?;
        let mut r = Reader::new(file);
        let mut state = HealthState {
            file: file.to_string(),
            ..HealthState::default()
        };
        match &doc.value {
            Value::Map(entries) => {
                for (k, v) in entries {
                    let Some(name) = k.scalar().map(str::to_string) else {
                        r.err(k.pos, "", "expected an instance name", None);
                        continue;
                    };
                    let Some(o) = r.object(v, &name, &["healthy", "weight"], &[]) else {
                        if v.is_null() {
                            r.err(
                                v.pos,
                                &name,
                                "expected {healthy: true|false, weight: 0..1000}",
                                None,
                            );
                        }
                        continue;
                    };
                    let healthy = match o.get("healthy") {
                        Some(n) => match n.scalar() {
                            Some("true") => true,
                            Some("false") => false,
                            _ => {
                                r.err(
                                    n.pos,
                                    &o.path("healthy"),
                                    "expected true or false",
                                    Some("true, false".into()),
                                );
                                true
                            }
                        },
                        None => {
                            r.err(
                                o.pos,
                                &o.path("healthy"),
                                "`healthy` is required",
                                Some("true, false".into()),
                            );
                            true
                        }
                    };
                    let weight = o
                        .get("weight")
                        .map(|_| r.integer(&o, "weight", 1, 0, 1000) as u32);
                    if state.positions.insert(name.clone(), k.pos).is_some() {
                        r.err(k.pos, &name, "instance given twice", None);
                    }
                    state
                        .backends
                        .insert(name, BackendHealth { healthy, weight });
                }
            }
            _ if doc.is_null() => {}
            _ => r.err(
                doc.pos,
                "",
                format!(
                    "expected a mapping of instance name to state, found {}",
                    doc.kind()
                ),
                None,
            ),
        }
        r.diags.into_result()?;
        Ok(state)
    }

    /// Reads a health file.
    pub fn load(path: &Path) -> Result<HealthState, Error> {
        let text = crate::read_text(path)?;
        Ok(HealthState::parse(&path.display().to_string(), &text)?)
    }

    /// Names in the state that the configuration does not define (likely typos).
    pub fn check_names(&self, config: &Config) -> Diagnostics {
        let mut d = Diagnostics::new();
        let names: Vec<&str> = config.instances.iter().map(|i| i.name.as_str()).collect();
        for name in self.backends.keys() {
            if !names.contains(&name.as_str()) {
                let hint = crate::diag::did_you_mean(name, &names)
                    .map(|s| format!(", did you mean `{s}`?"))
                    .unwrap_or_default();
                let pos = self.positions.get(name).copied().unwrap_or_default();
                d.push(
                    &self.file,
                    pos,
                    name.as_str(),
                    format!("no instance named `{name}` in {}{hint}", config.file),
                    None,
                );
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_states_and_reports_positions() {
        let h = HealthState::parse(
            "h.yaml",
            "web-1: {healthy: false}\nweb-2:\n  healthy: true\n  weight: 500\n",
        )
        .unwrap();
        assert!(!h.get("web-1").healthy);
        assert_eq!(h.get("web-2").weight, Some(500));
        assert!(h.get("other").healthy);
        let e = HealthState::parse("h.yaml", "web-1: {healthy: maybe}\n").unwrap_err();
        assert!(e.to_string().starts_with("h.yaml:1:"), "{e}");
        let e =
            HealthState::parse("h.yaml", "web-1:\n  healthy: true\n  weight: 1001\n").unwrap_err();
        assert!(e.to_string().starts_with("h.yaml:3:"), "{e}");
    }
}
