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

/// A backend's permutation of a table of `m` slots: (offset, skip), skip in 1..m and coprime
/// with m (always so for a prime m; for other m the skip moves up to the next coprime value,
/// so that the permutation still visits every slot).
pub fn permutation(name: &str, m: u32) -> (u32, u32) {
    if m <= 1 {
        return (0, 1);
    }
    let offset = (name_hash(0, name) % u64::from(m)) as u32;
    let mut skip = (name_hash(1, name) % u64::from(m - 1)) as u32 + 1;
    while gcd(skip, m) != 1 {
        skip = skip % (m - 1) + 1;
    }
    (offset, skip)
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
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
    let mut f = Filler {
        m,
        table: vec![0u16; m as usize],
        taken: vec![0u64; (m as usize).div_ceil(64)],
        next: Vec::with_capacity(ms.len()),
        skip: Vec::with_capacity(ms.len()),
        ids: ms.iter().map(|x| x.id).collect(),
        left: m,
        tail: None,
        inverse: vec![0; ms.len()],
        prime: is_prime(m),
    };
    f.enter_tail_if_due();
    for x in &ms {
        let (o, s) = permutation(x.name, m);
        f.next.push(o);
        f.skip.push(s);
    }
    let max_w = ms.iter().map(|x| x.weight).max().unwrap_or(1);
    if ms.iter().all(|x| x.weight == max_w) {
        'rounds: loop {
            for i in 0..ms.len() {
                f.turn(i);
                if f.left == 0 {
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
            f.turn(i);
            turns[i] += 1;
            heap.push(Reverse(round(turns[i], ms[i].weight) << 16 | i as u64));
        }
    }
    f.table
}

/// Below this many free slots a turn stops probing and looks the free slots up instead.
/// Probing needs about m/F probes with F slots free (most of the work is in the last few
/// hundred turns); the lookup costs F multiplications, which is cheaper below about √(m/6).
const TAIL: u32 = 96;

/// Population state: the table, which slots are taken (one bit each, 8 KiB for 65537 slots)
/// and each backend's place in its permutation.
struct Filler {
    m: u32,
    table: Vec<u16>,
    taken: Vec<u64>,
    next: Vec<u32>,
    skip: Vec<u32>,
    ids: Vec<u16>,
    /// Free slots left.
    left: u32,
    /// The free slots, once few are left (m prime only).
    tail: Option<Vec<u32>>,
    /// skip⁻¹ mod m per backend, computed when first needed (0 = not yet).
    inverse: Vec<u32>,
    prime: bool,
}

impl Filler {
    /// One turn: backend `i` takes the first free slot of its permutation from where it
    /// stopped.
    #[inline(always)]
    fn turn(&mut self, i: usize) {
        let (m, s) = (self.m, self.skip[i]);
        let c = if self.tail.is_some() {
            self.first_free_in_tail(i)
        } else {
            let mut c = self.next[i];
            while self.taken[(c >> 6) as usize] & (1 << (c & 63)) != 0 {
                c += s;
                if c >= m {
                    c -= m;
                }
            }
            c
        };
        self.taken[(c >> 6) as usize] |= 1 << (c & 63);
        self.table[c as usize] = self.ids[i];
        let n = c + s;
        self.next[i] = if n >= m { n - m } else { n };
        self.left -= 1;
        self.enter_tail_if_due();
    }

    fn enter_tail_if_due(&mut self) {
        if self.left == TAIL.min(self.m) && self.prime && self.tail.is_none() {
            let free = (0..self.m)
                .filter(|&c| self.taken[(c >> 6) as usize] & (1 << (c & 63)) == 0)
                .collect();
            self.tail = Some(free);
        }
    }

    /// The free slot that backend `i` reaches first: slot f is j = (f − c)·skip⁻¹ (mod m)
    /// steps after its next candidate c, so the free slot with the least j is the one
    /// probing would find. Removes it from the free list.
    fn first_free_in_tail(&mut self, i: usize) -> u32 {
        let m = u64::from(self.m);
        if self.inverse[i] == 0 {
            // m is prime: skip^(m−2) is the inverse (Fermat).
            self.inverse[i] = mod_pow(u64::from(self.skip[i]), m - 2, m) as u32;
        }
        let (c, inv) = (u64::from(self.next[i]), u64::from(self.inverse[i]));
        let Some(free) = self.tail.as_mut() else {
            return self.next[i];
        };
        let mut best = (u64::MAX, 0usize);
        for (k, &f) in free.iter().enumerate() {
            let j = ((u64::from(f) + m - c) % m) * inv % m;
            if j < best.0 {
                best = (j, k);
            }
        }
        free.swap_remove(best.1)
    }
}

fn mod_pow(mut base: u64, mut exp: u64, m: u64) -> u64 {
    let mut acc = 1 % m;
    base %= m;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc * base % m;
        }
        base = base * base % m;
        exp >>= 1;
    }
    acc
}

fn is_prime(n: u32) -> bool {
    n >= 2 && (2..).take_while(|d: &u32| d * d <= n).all(|d| n % d != 0)
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

    /// The textbook loop (probe until free), to hold the fast path to.
    fn reference(members: &[Member], m: u32) -> Vec<u16> {
        let mut ms = members.to_vec();
        ms.sort_by(|a, b| a.name.cmp(b.name));
        let mut table = vec![u32::MAX; m as usize];
        let mut next: Vec<u64> = vec![0; ms.len()];
        let perms: Vec<(u32, u32)> = ms.iter().map(|x| permutation(x.name, m)).collect();
        let mut filled = 0;
        while filled < m {
            for (i, x) in ms.iter().enumerate() {
                if filled == m {
                    break;
                }
                let (o, s) = perms[i];
                loop {
                    let c = ((u64::from(o) + next[i] * u64::from(s)) % u64::from(m)) as usize;
                    next[i] += 1;
                    if table[c] == u32::MAX {
                        table[c] = u32::from(x.id);
                        filled += 1;
                        break;
                    }
                }
            }
        }
        table.into_iter().map(|v| v as u16).collect()
    }

    #[test]
    fn fast_path_equals_the_textbook_loop() {
        for (n, m) in [
            (1usize, 251u32),
            (3, 509),
            (10, 1021),
            (37, 4093),
            (200, 65537),
        ] {
            let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
            let members: Vec<Member> = names
                .iter()
                .enumerate()
                .map(|(i, s)| Member {
                    name: s,
                    id: i as u16,
                    weight: 1,
                })
                .collect();
            assert_eq!(populate(&members, m), reference(&members, m), "n={n} m={m}");
        }
        // Not prime: no tail lookup, probing all the way.
        let names = ["a", "b", "c"];
        let members: Vec<Member> = names
            .iter()
            .enumerate()
            .map(|(i, s)| Member {
                name: s,
                id: i as u16,
                weight: 1,
            })
            .collect();
        let t = populate(&members, 100);
        assert_eq!(t, reference(&members, 100));
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
