//! How many flows a table change moves, per pool, against the least any change could move.
//!
//! A flow with hash h lands in slot (h·M) >> 32 of a slice of M slots, so each slot owns an
//! exact interval of the 2^32 hash values. Walking the intervals of the old and new serving
//! slices side by side gives the exact share of hash space whose backend changed, also when M
//! changed. The theoretical minimum for going from old shares to new shares is the total
//! variation distance Σ max(0, old_b − new_b) over backends b (matched by name).

use crate::symbols::Symbols;
use nlb_hw::Tables;
use serde::Serialize;
use std::collections::BTreeMap;

/// The movement of one pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolMovement {
    /// Pool name.
    pub pool: String,
    /// Serving slice size before (0: none).
    pub old_size: u32,
    /// Serving slice size after.
    pub new_size: u32,
    /// Share of hash space whose backend changed, 0..=1.
    pub moved: f64,
    /// The least share any table for the new backend shares could have moved.
    pub minimum: f64,
    /// `changed`, `unchanged`, `added` or `removed`.
    pub status: String,
}

/// Backend names of a pool's serving slice.
fn serving<'a>(t: &Tables, s: &'a Symbols, pool: u16) -> Vec<&'a str> {
    let Some(p) = t.pools.get(usize::from(pool)).filter(|p| p.valid) else {
        return Vec::new();
    };
    let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
    t.maglev
        .get(b..b + m)
        .unwrap_or(&[])
        .iter()
        .map(|x| s.backend(x.backend).unwrap_or("?"))
        .collect()
}

/// First hash value of slot `i` of `m`: ceil(i·2^32 / m).
fn start(i: u64, m: u64) -> u64 {
    (i << 32).div_ceil(m)
}

/// (moved, minimum) between two slices given as backend names per slot.
pub fn movement(old: &[&str], new: &[&str]) -> (f64, f64) {
    const SPACE: f64 = 4_294_967_296.0;
    match (old.is_empty(), new.is_empty()) {
        (true, true) => return (0.0, 0.0),
        (true, false) | (false, true) => return (1.0, 1.0),
        _ => {}
    }
    let (mo, mn) = (old.len() as u64, new.len() as u64);
    let (mut i, mut j, mut at, mut moved) = (0u64, 0u64, 0u64, 0u64);
    let mut shares: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    while at < 1 << 32 {
        let end = start(i + 1, mo).min(start(j + 1, mn));
        let (a, b) = (old[i as usize], new[j as usize]);
        let width = end - at;
        if a != b {
            moved += width;
        }
        shares.entry(a).or_default().0 += width;
        shares.entry(b).or_default().1 += width;
        at = end;
        if end == start(i + 1, mo) {
            i += 1;
        }
        if end == start(j + 1, mn) {
            j += 1;
        }
    }
    let minimum: u64 = shares.values().map(|(o, n)| o.saturating_sub(*n)).sum();
    (moved as f64 / SPACE, minimum as f64 / SPACE)
}

/// Per pool (by name, over both sides), the movement of its serving slice.
pub fn maglev_movement(old: (&Tables, &Symbols), new: (&Tables, &Symbols)) -> Vec<PoolMovement> {
    let mut names: Vec<&str> = old
        .1
        .pools
        .iter()
        .chain(new.1.pools.iter())
        .map(|p| p.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let o = old.1.pool_id(name).map(|id| serving(old.0, old.1, id));
            let n = new.1.pool_id(name).map(|id| serving(new.0, new.1, id));
            let status = match (&o, &n) {
                (None, _) => "added",
                (_, None) => "removed",
                (Some(a), Some(b)) if a == b => "unchanged",
                _ => "changed",
            };
            let (a, b) = (o.unwrap_or_default(), n.unwrap_or_default());
            let (moved, minimum) = movement(&a, &b);
            PoolMovement {
                pool: name.to_string(),
                old_size: a.len() as u32,
                new_size: b.len() as u32,
                moved,
                minimum,
                status: status.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked_movement() {
        // Same size, one slot of four changes owner: a quarter moves; shares go from
        // a:2/4 b:2/4 to a:1/4 b:3/4, so the minimum is a quarter too.
        let (m, min) = movement(&["a", "a", "b", "b"], &["a", "b", "b", "b"]);
        assert!(
            (m - 0.25).abs() < 1e-9 && (min - 0.25).abs() < 1e-9,
            "{m} {min}"
        );
        // Swapping owners moves everything while the shares stay: minimum 0.
        let (m, min) = movement(&["a", "b"], &["b", "a"]);
        assert!((m - 1.0).abs() < 1e-9 && min.abs() < 1e-9);
        // Resizing from 2 to 3 slots with one owner moves nothing.
        assert_eq!(movement(&["a", "a"], &["a", "a", "a"]), (0.0, 0.0));
        // 2 → 3 slots, a|b → a|a|b: hash space [1/2, 2/3) changes from b to a.
        let (m, _) = movement(&["a", "b"], &["a", "a", "b"]);
        assert!((m - 1.0 / 6.0).abs() < 1e-9, "{m}");
    }
}
