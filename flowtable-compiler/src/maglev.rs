//! Maglev lookup tables (Eisenbud et al., NSDI 2016) with weights populated in smooth rounds
//! (Katran's "v2"): each backend takes a turn in a round when its accumulated weight reaches
//! the largest weight, so its share of slots follows its weight share to within one slot.
//!
//! Everything here is deterministic across hosts: a backend's permutation is seeded by its
//! *name* through [`name_hash`], so reordering lists in the file changes nothing (SPEC R10.4).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Slice sizes, all prime: the smallest one ≥ 100 × N is used, 65537 for large pools.
pub const LADDER: [u32; 9] = [251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65537];

/// The largest slice a pool can own (the regmap's `maglev_size` holds 17 bits).
pub const MAX_SIZE: u32 = 65537;

/// Slice size for a pool of `n` backends: the smallest ladder prime ≥ 100·n, or 65537.
pub fn size_for(n: usize) -> u32 {
    let want = (n as u64).saturating_mul(100);
    LADDER
        .iter()
        .copied()
        .find(|&m| u64::from(m) >= want)
        .unwrap_or(MAX_SIZE)
}

/// The next smaller ladder size that still holds `n` backends (at least one slot each).
pub fn step_down(size: u32, n: usize) -> Option<u32> {
    LADDER
        .iter()
        .rev()
        .copied()
        .find(|&m| m < size && m as usize >= n)
}

/// The hash that seeds permutations: FNV-1a (64-bit) over the 8 little-endian bytes of `seed`
/// followed by the UTF-8 bytes of `name`, then the splitmix64 finaliser. It never runs in
/// hardware; it only has to be the same on every host.
pub fn name_hash(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in seed.to_le_bytes().iter().chain(name.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A backend's permutation of a table of `m` slots: (offset, skip), skip in 1..m.
pub fn permutation(name: &str, m: u32) -> (u32, u32) {
    if m <= 1 {
        return (0, 1);
    }
    let offset = (name_hash(0, name) % u64::from(m)) as u32;
    let skip = (name_hash(1, name) % u64::from(m - 1)) as u32 + 1;
    (offset, skip)
}

/// Largest weight that counts (the configuration allows 0..=1000).
pub const MAX_WEIGHT: u32 = 1 << 20;

/// One backend taking part in a population.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    /// Name: seeds the permutation.
    pub name: &'a str,
    /// The value written into its slots (backend id).
    pub id: u16,
    /// Relative weight; 0 leaves the member out, values above [`MAX_WEIGHT`] count as it.
    pub weight: u32,
}

/// Fills a table of `m` slots (m prime, or 1; at most [`MAX_SIZE`], larger values count as
/// it) with the members' ids. Members are taken in name order whatever the order given;
/// members of weight 0 are left out. With no member of weight > 0 the result is empty.
pub fn populate(members: &[Member], m: u32) -> Vec<u16> {
    let m = m.min(MAX_SIZE);
    let mut ms: Vec<Member> = members
        .iter()
        .filter(|x| x.weight > 0)
        .map(|x| Member {
            weight: x.weight.min(MAX_WEIGHT),
            ..*x
        })
        .collect();
    if ms.is_empty() || m == 0 {
        return Vec::new();
    }
    ms.sort_by(|a, b| a.name.cmp(b.name));
    if m == 1 {
        return vec![ms[0].id];
    }
    let mut table = vec![0u16; m as usize];
    // Which slots are taken, one bit each: 8 KiB for 65537 slots, so the probing of the last
    // free slots stays in the L1 cache.
    let mut taken = vec![0u64; (m as usize).div_ceil(64)];
    let mut next: Vec<u32> = Vec::with_capacity(ms.len());
    let mut skip: Vec<u32> = Vec::with_capacity(ms.len());
    for x in &ms {
        let (o, s) = permutation(x.name, m);
        next.push(o);
        skip.push(s);
    }
    // One turn: backend i takes the next free slot of its permutation.
    let mut turn = |i: usize| {
        let s = skip[i];
        let mut c = next[i];
        while taken[(c >> 6) as usize] & (1 << (c & 63)) != 0 {
            c += s;
            if c >= m {
                c -= m;
            }
        }
        taken[(c >> 6) as usize] |= 1 << (c & 63);
        table[c as usize] = ms[i].id;
        c += s;
        next[i] = if c >= m { c - m } else { c };
    };
    let max_w = ms.iter().map(|x| x.weight).max().unwrap_or(1);
    if ms.iter().all(|x| x.weight == max_w) {
        let mut filled = 0u32;
        'rounds: loop {
            for i in 0..ms.len() {
                turn(i);
                filled += 1;
                if filled == m {
                    break 'rounds;
                }
            }
        }
    } else {
        // Turn k of backend i falls in round ceil(k·max/w_i) (its accumulated weight reaches
        // the maximum then); within a round backends go in order. A heap keyed by
        // (round << 16 | i) replays exactly the round-by-round loop without visiting backends
        // that have no turn in a round. Rounds stay below (m + 1)·MAX_WEIGHT < 2^37.
        let mut turns: Vec<u64> = vec![1; ms.len()];
        let round = |k: u64, w: u32| (k * u64::from(max_w)).div_ceil(u64::from(w));
        let mut heap: BinaryHeap<Reverse<u64>> = ms
            .iter()
            .enumerate()
            .map(|(i, x)| Reverse(round(1, x.weight) << 16 | i as u64))
            .collect();
        for _ in 0..m {
            let Some(Reverse(key)) = heap.pop() else {
                break;
            };
            let i = (key & 0xffff) as usize;
            turn(i);
            turns[i] += 1;
            heap.push(Reverse(round(turns[i], ms[i].weight) << 16 | i as u64));
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_prime(n: u32) -> bool {
        n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
    }

    #[test]
    fn ladder_is_prime_and_sizes_follow_100n() {
        assert!(LADDER.iter().all(|&m| is_prime(m)));
        assert_eq!(size_for(1), 251);
        assert_eq!(size_for(3), 509);
        assert_eq!(size_for(10), 1021);
        assert_eq!(size_for(327), 32749);
        assert_eq!(size_for(328), 65537);
        assert_eq!(size_for(5000), 65537);
        assert_eq!(step_down(1021, 3), Some(509));
        assert_eq!(step_down(251, 3), None);
    }

    #[test]
    fn permutation_visits_every_slot() {
        let m = 251;
        let (o, s) = permutation("web-1", m);
        let mut seen = vec![false; m as usize];
        for j in 0..m {
            seen[((u64::from(o) + u64::from(j) * u64::from(s)) % u64::from(m)) as usize] = true;
        }
        assert!(seen.iter().all(|&x| x));
    }

    #[test]
    fn hand_worked_small_table() {
        // m = 7 and permutations computed by hand from the definition:
        // each backend fills its first free slot of offset + j·skip (mod 7) in turn.
        let m = 7u32;
        let members = [
            Member {
                name: "a",
                id: 0,
                weight: 1,
            },
            Member {
                name: "b",
                id: 1,
                weight: 1,
            },
        ];
        let (oa, sa) = permutation("a", m);
        let (ob, sb) = permutation("b", m);
        let mut expect = [u16::MAX; 7];
        let (mut ja, mut jb, mut filled) = (0u32, 0u32, 0);
        while filled < 7 {
            for (o, s, j, id) in [(oa, sa, &mut ja, 0u16), (ob, sb, &mut jb, 1u16)] {
                if filled == 7 {
                    break;
                }
                loop {
                    let c = ((o + *j * s) % m) as usize;
                    *j += 1;
                    if expect[c] == u16::MAX {
                        expect[c] = id;
                        filled += 1;
                        break;
                    }
                }
            }
        }
        assert_eq!(populate(&members, m), expect.to_vec());
    }

    #[test]
    fn weights_follow_turns_exactly() {
        // Weights 3:1 over 1021 slots: the round-robin definition gives 766 and 255 slots
        // (turns of the heavy backend in rounds 1..=255 plus its share of round 256).
        let members = [
            Member {
                name: "heavy",
                id: 1,
                weight: 3,
            },
            Member {
                name: "light",
                id: 2,
                weight: 1,
            },
        ];
        let t = populate(&members, 1021);
        let heavy = t.iter().filter(|&&v| v == 1).count();
        assert_eq!(heavy + t.iter().filter(|&&v| v == 2).count(), 1021);
        assert!((765..=767).contains(&heavy), "{heavy}");
    }

    #[test]
    fn order_of_members_does_not_matter() {
        let a = [
            Member {
                name: "x",
                id: 3,
                weight: 2,
            },
            Member {
                name: "y",
                id: 4,
                weight: 1,
            },
            Member {
                name: "z",
                id: 5,
                weight: 1,
            },
        ];
        let mut b = a;
        b.reverse();
        assert_eq!(populate(&a, 509), populate(&b, 509));
    }
}
