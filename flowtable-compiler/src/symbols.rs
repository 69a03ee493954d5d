//! Names of the things behind table ids, so tools can speak the config's language.

use serde::Serialize;

/// What a pool descriptor was compiled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    /// A target pool.
    TargetPool,
    /// A target instance (a pool of one backend).
    TargetInstance,
}

/// A pool's name, kind, own Maglev slice and members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSymbol {
    /// Config name.
    pub name: String,
    /// Target pool or target instance.
    pub kind: PoolKind,
    /// First slot of the pool's own slice (its backup's slice may serve instead).
    pub own_base: u32,
    /// Slots of its own slice (0 for a pool without instances).
    pub own_size: u32,
    /// Backend ids of every member, healthy or not, in name order.
    pub members: Vec<u16>,
}

/// Names by id: `rules[rule id]`, `pools[pool id]`, `backends[backend id]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Symbols {
    /// Forwarding rule names by rule id.
    pub rules: Vec<String>,
    /// Pools by pool id.
    pub pools: Vec<PoolSymbol>,
    /// Instance names by backend id.
    pub backends: Vec<String>,
}

impl Symbols {
    /// Name of a rule id.
    pub fn rule(&self, id: u16) -> Option<&str> {
        self.rules.get(usize::from(id)).map(String::as_str)
    }

    /// Name of a pool id.
    pub fn pool(&self, id: u16) -> Option<&str> {
        self.pools.get(usize::from(id)).map(|p| p.name.as_str())
    }

    /// Name of a backend id.
    pub fn backend(&self, id: u16) -> Option<&str> {
        self.backends.get(usize::from(id)).map(String::as_str)
    }

    /// Id of a pool by name.
    pub fn pool_id(&self, name: &str) -> Option<u16> {
        self.pools
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
    }
}
