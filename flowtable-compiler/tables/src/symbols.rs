//! Names of the things behind table ids, so tools can speak the config's language.
//!
//! Rule and backend ids are kept across reloads ([`crate::compile_after`]), so their lists
//! may have holes: `""` marks an id that names nothing.

use nlb_config::model::{Config, ForwardingRule, PortRange, Protocol};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::Tables;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// What a pool descriptor was compiled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    /// A target pool.
    TargetPool,
    /// A target instance (a pool of one backend).
    TargetInstance,
    /// A backend service: its primary backends' slice, and its failover backends' slice.
    BackendService,
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
    /// Slots of its own slice (0 for a pool without instances). For a backend service, the
    /// slice of its primary backends.
    pub own_size: u32,
    /// First slot of a backend service's failover backends' slice (0 for other pools).
    pub failover_base: u32,
    /// Slots of a backend service's failover backends' slice (0 without failover backends,
    /// and for other pools).
    pub failover_size: u32,
    /// Backend ids of every member, healthy or not, in name order (of a backend service: every
    /// endpoint of its groups, primary and failover).
    pub members: Vec<u16>,
}

/// Names by id: `rules[rule id]`, `pools[pool id]`, `backends[backend id]` (`""`: a free id).
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
        self.rules
            .get(usize::from(id))
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    /// Name of a pool id.
    pub fn pool(&self, id: u16) -> Option<&str> {
        self.pools.get(usize::from(id)).map(|p| p.name.as_str())
    }

    /// Name of a backend id.
    pub fn backend(&self, id: u16) -> Option<&str> {
        self.backends
            .get(usize::from(id))
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    /// Id of a backend by name.
    pub fn backend_id(&self, name: &str) -> Option<u16> {
        self.backends
            .iter()
            .position(|n| n == name)
            .map(|i| i as u16)
    }

    /// Id of a rule by name.
    pub fn rule_id(&self, name: &str) -> Option<u16> {
        self.rules.iter().position(|n| n == name).map(|i| i as u16)
    }

    /// Rules in use: (id, name).
    pub fn rule_names(&self) -> impl Iterator<Item = (u16, &str)> {
        named(&self.rules)
    }

    /// Backends in use: (id, name).
    pub fn backend_names(&self) -> impl Iterator<Item = (u16, &str)> {
        named(&self.backends)
    }

    /// Whether every rule, pool and backend named in both keeps its id (so ids held by the
    /// NIC's connection table or by the host's fragment state still mean the same thing).
    pub fn ids_kept_in(&self, next: &Symbols) -> bool {
        let kept = |a: &[String], b: &[String]| {
            a.iter()
                .zip(b)
                .all(|(x, y)| x.is_empty() || y.is_empty() || x == y)
                && a.iter()
                    .enumerate()
                    .filter(|(_, n)| !n.is_empty())
                    .all(|(i, n)| b.get(i) == Some(n) || !b.contains(n))
        };
        let pools = |s: &Symbols| s.pools.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        kept(&self.rules, &next.rules)
            && kept(&self.backends, &next.backends)
            && kept(&pools(self), &pools(next))
    }

    /// The rule and backend ids a device serves, named after `config`: what a new compile for
    /// that device keeps ([`crate::compile_after`]) when no image of the last compile is at
    /// hand (a restarted daemon). A backend is recognised by its entry (address, family and
    /// MAC: what a connection to it means), a rule by its VIP, protocol and port range. Ids the
    /// device uses for something the configuration does not have are marked held (`"\0"`) so
    /// they are not handed to a new backend in the same change.
    pub fn recover(tables: &Tables, config: &Config) -> Symbols {
        const HELD: &str = "\0";
        let mut symbols = Symbols::default();

        let mut by_entry: BTreeMap<(bool, u128, u64), Vec<&str>> = BTreeMap::new();
        let mut instances: Vec<_> = config.instances.iter().collect();
        instances.sort_by(|a, b| a.name.cmp(&b.name));
        for i in instances.iter().rev() {
            let mac = i.mac.or(config.nic.next_hop_mac).unwrap_or(0);
            by_entry
                .entry((i.ip.is_ipv6(), addr_to_u128(i.ip), mac))
                .or_default()
                .push(&i.name);
        }
        for (id, e) in tables.backends.iter().enumerate().filter(|(_, e)| e.valid) {
            let name = by_entry
                .get_mut(&(e.is_ipv6, e.addr, e.mac))
                .and_then(Vec::pop)
                .unwrap_or(HELD);
            set(&mut symbols.backends, id, name);
        }

        // Every slot a rule takes, as the compiler places them (an L3_DEFAULT rule also takes
        // the gaps of its VIP's TCP and UDP entries).
        let mut by_match: HashMap<(u128, u8, u16, u16), &str> = HashMap::new();
        for ((addr, proto), slots) in vip_port_slots(&config.forwarding_rules) {
            for (range, r) in slots {
                by_match.insert((addr, proto, range.lo, range.hi), &r.name);
            }
        }
        let mut named_rules: Vec<&str> = Vec::new();
        for v in tables.vip.iter().filter(|v| v.valid) {
            for slot in v.slot.iter().filter(|s| s.valid) {
                // A rule with several port ranges has several slots naming one id; a slot
                // that matches no rule of the configuration holds the id unless another of
                // the id's slots names a rule.
                let id = usize::from(slot.rule);
                let current = symbols.rules.get(id).cloned().unwrap_or_default();
                let name = by_match
                    .get(&(v.addr, v.protocol, slot.port_lo, slot.port_hi))
                    .copied()
                    .filter(|n| !named_rules.contains(n))
                    .unwrap_or(HELD);
                if current.is_empty() || (current == HELD && name != HELD) {
                    set(&mut symbols.rules, id, name);
                    if name != HELD {
                        named_rules.push(name);
                    }
                }
            }
        }
        for (id, _) in tables.rules.iter().enumerate().filter(|(_, r)| r.valid) {
            if symbols.rules.get(id).is_none_or(|n| n.is_empty()) {
                set(&mut symbols.rules, id, HELD);
            }
        }
        symbols
    }

    /// Id of a pool by name.
    pub fn pool_id(&self, name: &str) -> Option<u16> {
        self.pools
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
    }
}

/// Entries with a name: (id, name).
fn named(v: &[String]) -> impl Iterator<Item = (u16, &str)> {
    v.iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .map(|(i, n)| (i as u16, n.as_str()))
}

/// Sets `v[id] = name`, growing `v` with free ids.
fn set(v: &mut Vec<String>, id: usize, name: &str) {
    if v.len() <= id {
        v.resize(id + 1, String::new());
    }
    v[id] = name.to_string();
}

/// The port-range slots of each (VIP, VIP protocol) (docs/pipeline.md §3–§4), in port order:
/// a TCP or UDP rule takes one slot per port range in its protocol's entry; an `L3_DEFAULT`
/// rule takes the one slot (all ports) of the VIP's protocol-0 entry, for every protocol but
/// TCP and UDP, and the gaps between the ranges of the VIP's TCP and of its UDP rules (all
/// ports when the VIP has no rule of that protocol), so TCP and UDP packets that no rule of
/// their own takes reach it through their own entries. Keys are (VIP as a table address,
/// VIP protocol 6, 17 or 0).
pub(crate) fn vip_port_slots<'r>(
    rules: impl IntoIterator<Item = &'r ForwardingRule>,
) -> BTreeMap<(u128, u8), Vec<(PortRange, &'r ForwardingRule)>> {
    let mut slots: BTreeMap<(u128, u8), Vec<(PortRange, &ForwardingRule)>> = BTreeMap::new();
    let mut l3: Vec<&ForwardingRule> = Vec::new();
    for r in rules {
        let addr = addr_to_u128(r.ip_address);
        if r.ip_protocol == Protocol::L3Default {
            l3.push(r);
            slots
                .entry((addr, 0))
                .or_default()
                .push((PortRange::ALL, r));
        } else {
            let v = slots.entry((addr, r.ip_protocol.number())).or_default();
            v.extend(r.port_ranges.iter().map(|range| (*range, r)));
        }
    }
    for r in l3 {
        let addr = addr_to_u128(r.ip_address);
        for proto in [Protocol::Tcp, Protocol::Udp] {
            let v = slots.entry((addr, proto.number())).or_default();
            let mut taken: Vec<PortRange> = v.iter().map(|(range, _)| *range).collect();
            taken.sort();
            let mut next: u32 = 0;
            let mut gaps = Vec::new();
            for range in taken {
                if u32::from(range.lo) > next {
                    gaps.push(PortRange {
                        lo: next as u16,
                        hi: range.lo - 1,
                    });
                }
                next = next.max(u32::from(range.hi) + 1);
            }
            if next <= 65535 {
                gaps.push(PortRange {
                    lo: next as u16,
                    hi: 65535,
                });
            }
            v.extend(gaps.into_iter().map(|g| (g, r)));
        }
    }
    for v in slots.values_mut() {
        v.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    }
    slots
}
