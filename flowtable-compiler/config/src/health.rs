//! Health and weight state (`--health FILE`): which backends are healthy in which pool and
//! what weight their probes reported (SPEC R5). The slow path writes it; the compiler reads it.
//!
//! Health belongs to a (pool, instance) pair (SPEC R5.5): an instance in two pools is judged by
//! each pool's own check. The file is a YAML or JSON mapping whose keys are either
//! `POOL/INSTANCE` (that pool only) or `INSTANCE` (every pool that checks the instance; the
//! form of older files), each to `{healthy: bool, weight: 0..1000}` (`weight` optional). A
//! pool-specific entry wins over an instance-wide one; anything not listed is healthy.
//! Pools without a health check ignore the state: their members are always healthy.

use crate::diag::{did_you_mean, Diagnostics, Pos};
use crate::gcp::Reader;
use crate::model::Config;
use crate::tree::{self, Value};
use crate::Error;
use std::collections::BTreeMap;
use std::path::Path;

/// What is known about one backend in one pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendHealth {
    /// Whether it passes the pool's health check.
    pub healthy: bool,
    /// Weight reported by its probe (`X-Load-Balancing-Endpoint-Weight`), 0..=1000; used
    /// only by pools that balance by weight (SPEC R5.6).
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

/// The states of one pool's members ([`HealthState::in_pool`]).
#[derive(Debug, Clone)]
pub struct PoolHealth<'a> {
    members: BTreeMap<&'a str, BackendHealth>,
    backends: &'a BTreeMap<String, BackendHealth>,
}

impl PoolHealth<'_> {
    /// The state of `instance` in the pool: its per-pool entry, else its instance-wide entry,
    /// else healthy.
    pub fn get(&self, instance: &str) -> BackendHealth {
        self.members
            .get(instance)
            .or_else(|| self.backends.get(instance))
            .copied()
            .unwrap_or_default()
    }
}

/// A (pool, instance) pair: the unit health belongs to.
pub type MemberKey = (String, String);

/// Health of backends per (pool, instance), with instance-wide entries as a fallback.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthState {
    /// Instance-wide states (`INSTANCE:`): the instance in every pool that checks it.
    pub backends: BTreeMap<String, BackendHealth>,
    /// Per-pool states (`POOL/INSTANCE:`), which take precedence.
    pub members: BTreeMap<MemberKey, BackendHealth>,
    file: String,
    positions: BTreeMap<String, Pos>,
}

impl HealthState {
    /// Everyone healthy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state of `instance` as a member of `pool`: its per-pool entry, else its
    /// instance-wide entry, else healthy.
    pub fn get(&self, pool: &str, instance: &str) -> BackendHealth {
        self.members
            .get(&(pool.to_string(), instance.to_string()))
            .or_else(|| self.backends.get(instance))
            .copied()
            .unwrap_or_default()
    }

    /// The states of `pool`'s members, for looking many up: [`PoolHealth::get`] is
    /// [`HealthState::get`] for that pool without building a key per look-up.
    pub fn in_pool(&self, pool: &str) -> PoolHealth<'_> {
        let first = (pool.to_string(), String::new());
        let members = self
            .members
            .range(first..)
            .take_while(|((p, _), _)| p == pool)
            .map(|((_, instance), h)| (instance.as_str(), *h))
            .collect();
        PoolHealth {
            members,
            backends: &self.backends,
        }
    }

    /// Sets the state of an instance in every pool (an instance-wide entry).
    pub fn set(&mut self, instance: &str, health: BackendHealth) {
        self.backends.insert(instance.to_string(), health);
    }

    /// Sets the state of an instance in one pool.
    pub fn set_member(&mut self, pool: &str, instance: &str, health: BackendHealth) {
        self.members
            .insert((pool.to_string(), instance.to_string()), health);
    }

    /// Marks an instance healthy or not in every pool, keeping its instance-wide weight.
    pub fn set_healthy(&mut self, instance: &str, healthy: bool) {
        let mut h = self.backends.get(instance).copied().unwrap_or_default();
        h.healthy = healthy;
        self.set(instance, h);
    }

    /// Marks an instance healthy or not in one pool, keeping its weight there.
    pub fn set_member_healthy(&mut self, pool: &str, instance: &str, healthy: bool) {
        let mut h = self.get(pool, instance);
        h.healthy = healthy;
        self.set_member(pool, instance, h);
    }

    /// Parses a health file.
    pub fn parse(file: &str, text: &str) -> Result<HealthState, Diagnostics> {
        let doc = tree::parse(file, text)?;
        let mut r = Reader::new(file);
        let mut state = HealthState {
            file: file.to_string(),
            ..HealthState::default()
        };
        const EXPECTED: &str = "expected {healthy: true|false, weight: 0..1000}";
        match &doc.value {
            Value::Map(entries) => {
                for (k, v) in entries {
                    let Some(key) = k.scalar().map(str::to_string) else {
                        r.err(k.pos, "", "expected `INSTANCE` or `POOL/INSTANCE`", None);
                        continue;
                    };
                    let member = match key.split_once('/') {
                        None => None,
                        Some((pool, instance))
                            if !pool.is_empty()
                                && !instance.is_empty()
                                && !instance.contains('/') =>
                        {
                            Some((pool.to_string(), instance.to_string()))
                        }
                        Some(_) => {
                            r.err(
                                k.pos,
                                &key,
                                format!("`{key}` is not an instance or a pool/instance pair"),
                                Some(
                                    "`INSTANCE` (every pool) or `POOL/INSTANCE` (one pool)".into(),
                                ),
                            );
                            continue;
                        }
                    };
                    let Some(o) = r.object(v, &key, &["healthy", "weight"], &[]) else {
                        if v.is_null() {
                            r.err(v.pos, &key, EXPECTED, None);
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
                    if state.positions.insert(key.clone(), k.pos).is_some() {
                        r.err(k.pos, &key, "given twice", None);
                    }
                    let h = BackendHealth { healthy, weight };
                    match member {
                        Some((pool, instance)) => state.set_member(&pool, &instance, h),
                        None => state.set(&key, h),
                    }
                }
            }
            _ if doc.is_null() => {}
            _ => r.err(
                doc.pos,
                "",
                format!(
                    "expected a mapping of `INSTANCE` or `POOL/INSTANCE` to a state, found {}",
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

    /// Entries the configuration cannot use: instances it does not define (likely typos),
    /// pools it does not define, pairs whose instance is not a member of the pool, and pools
    /// without a health check (their members are always healthy, SPEC R5.5).
    pub fn check_names(&self, config: &Config) -> Diagnostics {
        let mut d = Diagnostics::new();
        let instances: Vec<&str> = config.instances.iter().map(|i| i.name.as_str()).collect();
        let pools: Vec<&str> = config
            .target_pools
            .iter()
            .map(|p| p.name.as_str())
            .chain(config.backend_services.iter().map(|b| b.name.as_str()))
            .collect();
        let hint = |name: &str, among: &[&str]| {
            did_you_mean(name, among)
                .map(|s| format!(", did you mean `{s}`?"))
                .unwrap_or_default()
        };
        let pos = |key: &str| self.positions.get(key).copied().unwrap_or_default();
        for name in self.backends.keys() {
            if !instances.contains(&name.as_str()) {
                d.push(
                    &self.file,
                    pos(name),
                    name.as_str(),
                    format!(
                        "no instance named `{name}` in {}{}",
                        config.file,
                        hint(name, &instances)
                    ),
                    None,
                );
            }
        }
        for (pool, instance) in self.members.keys() {
            let key = format!("{pool}/{instance}");
            // A backend service's members are the endpoints of its groups.
            let service_members = config
                .backend_services
                .iter()
                .find(|b| b.name == *pool)
                .map(|b| {
                    let mut v: Vec<&str> = b
                        .backends
                        .iter()
                        .flat_map(|x| config.group_members(x))
                        .collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                });
            if let Some(members) = service_members {
                if !members.contains(&instance.as_str()) {
                    d.push(
                        &self.file,
                        pos(&key),
                        key.as_str(),
                        format!(
                            "`{instance}` is not an endpoint of backend service `{pool}`{}",
                            hint(instance, &members)
                        ),
                        Some(format!(
                            "{pool}/NAME with NAME among {}",
                            members.join(", ")
                        )),
                    );
                }
                continue;
            }
            let Some(p) = config.target_pools.iter().find(|p| p.name == *pool) else {
                let what = if config.target_instances.iter().any(|t| t.name == *pool) {
                    format!(
                        "`{pool}` is a target instance, which has no health check (its instance always serves)"
                    )
                } else {
                    format!(
                        "no target pool or backend service named `{pool}` in {}{}",
                        config.file,
                        hint(pool, &pools)
                    )
                };
                d.push(&self.file, pos(&key), key.as_str(), what, None);
                continue;
            };
            let members: Vec<&str> = p.instances.iter().map(|m| m.name.as_str()).collect();
            if !members.contains(&instance.as_str()) {
                d.push(
                    &self.file,
                    pos(&key),
                    key.as_str(),
                    format!(
                        "`{instance}` is not a member of pool `{pool}`{}",
                        hint(instance, &members)
                    ),
                    Some(format!(
                        "{pool}/NAME with NAME among {}",
                        members.join(", ")
                    )),
                );
            } else if p.health_checks.is_empty() {
                d.push(
                    &self.file,
                    pos(&key),
                    key.as_str(),
                    format!(
                        "pool `{pool}` has no health check: its members are always healthy (SPEC R5.5)"
                    ),
                    Some("entries for pools with a health check".into()),
                );
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool's view answers as the whole state does, for pools whose names are prefixes of
    /// each other (`we`, `web`, `web-2`) or sort around them, and instances with entries
    /// only in other pools, only instance-wide, or nowhere.
    #[test]
    fn a_pools_view_answers_as_the_state() {
        let mut h = HealthState::new();
        let unhealthy = BackendHealth {
            healthy: false,
            weight: None,
        };
        let weighed = |w| BackendHealth {
            healthy: true,
            weight: Some(w),
        };
        h.set_member("we", "a", unhealthy);
        h.set_member("web", "a", weighed(7));
        h.set_member("web", "b", unhealthy);
        h.set_member("web-2", "c", unhealthy);
        h.set_member("wea", "b", weighed(3));
        h.set_member("", "a", weighed(1));
        h.set("b", weighed(9));
        h.set("d", unhealthy);
        for pool in ["", "we", "wea", "web", "web-2", "web-20", "weba", "x"] {
            let view = h.in_pool(pool);
            for instance in ["", "a", "b", "c", "d", "e"] {
                assert_eq!(
                    view.get(instance),
                    h.get(pool, instance),
                    "{pool}/{instance}"
                );
            }
        }
    }

    #[test]
    fn parses_states_and_reports_positions() {
        let h = HealthState::parse(
            "h.yaml",
            "web-1: {healthy: false}\nweb-2:\n  healthy: true\n  weight: 500\napi/web-1: {healthy: true}\n",
        )
        .unwrap();
        assert!(!h.get("web", "web-1").healthy);
        assert!(h.get("api", "web-1").healthy, "the per-pool entry wins");
        assert_eq!(h.get("web", "web-2").weight, Some(500));
        assert!(h.get("web", "other").healthy);
        let e = HealthState::parse("h.yaml", "web-1: {healthy: maybe}\n").unwrap_err();
        assert!(e.to_string().starts_with("h.yaml:1:"), "{e}");
        let e =
            HealthState::parse("h.yaml", "web-1:\n  healthy: true\n  weight: 1001\n").unwrap_err();
        assert!(e.to_string().starts_with("h.yaml:3:"), "{e}");
        for bad in ["/web-1", "web/", "a/b/c"] {
            let e = HealthState::parse(
                "h.yaml",
                &format!("x: {{healthy: true}}\n{bad}: {{healthy: false}}\n"),
            )
            .unwrap_err();
            assert!(e.to_string().starts_with("h.yaml:2:1:"), "{bad}: {e}");
            assert!(e.to_string().contains("POOL/INSTANCE"), "{e}");
        }
    }
}
