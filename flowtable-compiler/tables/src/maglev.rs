//! Maglev lookup tables (Eisenbud et al., NSDI 2016) with weights populated in smooth rounds
//! (Katran's "v2"): each backend takes a turn in a round when its accumulated weight reaches
//! the largest weight, so its share of slots follows its weight share to within one slot.
//!
//! Everything here is deterministic across hosts: a backend's permutation is seeded by its
//! *name* through [`name_hash`], so reordering lists in the file changes nothing (SPEC R10.4).

/// Slice sizes a pool steps down through when the slot memory is short, all prime: the sizes
/// of pools up to 655 backends (the smallest one ≥ 100 × N, up to 65537), then about doubling
/// up to the largest slice.
pub const LADDER: [u32; 17] = [
    251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65537, 131071, 262139, 524287, 1048573,
    2097143, 4194301, 8388593, 16777213,
];

/// The largest slice a pool can own (the regmap's `maglev_size` holds 24 bits; prime): M ≥
/// 100 × N up to 167,772 backends, 65,536 (the backend ids) included.
pub const MAX_SIZE: u32 = 16_777_213;

/// The sizes of small pools come from the ladder up to this one; larger pools take the smallest
/// prime ≥ 100 × N.
const LADDER_SMALL_TOP: u32 = 65537;

/// The smallest slice a pool gets while the slot memory allows it. A slice keeps its size
/// while its pool has from 1 to 40 backends, so adding or removing one of them moves only
/// about that backend's share of new flows (SPEC R3.2); a change of size repopulates the
/// whole slice. (Maglev and Katran keep one size, 65,537, for every service.)
pub const MIN_SIZE: u32 = 4093;

/// Slice size for a pool of `n` backends: the smallest ladder prime ≥ 100·n and ≥
/// [`MIN_SIZE`] up to 65537, then the smallest prime ≥ 100·n (at most [`MAX_SIZE`]).
pub fn size_for(n: usize) -> u32 {
    let want = (n as u64).saturating_mul(100).max(u64::from(MIN_SIZE));
    if want <= u64::from(LADDER_SMALL_TOP) {
        return LADDER
            .iter()
            .copied()
            .find(|&m| u64::from(m) >= want)
            .unwrap_or(LADDER_SMALL_TOP);
    }
    if want >= u64::from(MAX_SIZE) {
        return MAX_SIZE;
    }
    let mut m = want as u32 | 1;
    while !is_prime(m) {
        m += 2;
    }
    m.min(MAX_SIZE)
}

/// The next smaller ladder size that still holds `n` backends (at least one slot each).
pub fn step_down(size: u32, n: usize) -> Option<u32> {
    LADDER
        .iter()
        .rev()
        .copied()
        .find(|&m| m < size && m as usize >= n)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

const fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    let mut k = 0;
    while k < bytes.len() {
        h ^= bytes[k] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        k += 1;
    }
    h
}

/// The splitmix64 finaliser.
const fn finish(mut h: u64) -> u64 {
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// FNV-1a states after the 8 seed bytes of the two hashes a permutation needs.
const SEEDED: [u64; 2] = [
    fnv1a(FNV_OFFSET, &0u64.to_le_bytes()),
    fnv1a(FNV_OFFSET, &1u64.to_le_bytes()),
];

/// The hash that seeds permutations: FNV-1a (64-bit) over the 8 little-endian bytes of `seed`
/// followed by the UTF-8 bytes of `name`, then the splitmix64 finaliser. It never runs in
/// hardware; it only has to be the same on every host.
pub fn name_hash(seed: u64, name: &str) -> u64 {
    finish(fnv1a(
        fnv1a(FNV_OFFSET, &seed.to_le_bytes()),
        name.as_bytes(),
    ))
}

/// `name_hash(0, name)` and `name_hash(1, name)` in one pass over the name.
fn name_hashes(name: &str) -> (u64, u64) {
    let [mut h0, mut h1] = SEEDED;
    for &b in name.as_bytes() {
        h0 = (h0 ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        h1 = (h1 ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    (finish(h0), finish(h1))
}

/// A backend's permutation of a table of `m` slots: (offset, skip), skip in 1..m and coprime
/// with m (always so for a prime m; for other m the skip moves up to the next coprime value,
/// so that the permutation still visits every slot).
pub fn permutation(name: &str, m: u32) -> (u32, u32) {
    permutation_for(name, m, is_prime(m))
}

/// [`permutation`] with the primality of `m` known (a prime m needs no coprimality search).
fn permutation_for(name: &str, m: u32, prime: bool) -> (u32, u32) {
    if m <= 1 {
        return (0, 1);
    }
    let (h0, h1) = name_hashes(name);
    let offset = (h0 % u64::from(m)) as u32;
    let mut skip = (h1 % u64::from(m - 1)) as u32 + 1;
    while !prime && gcd(skip, m) != 1 {
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
    let ms = taking_part(members);
    if ms.is_empty() || m == 0 {
        return Vec::new();
    }
    if m == 1 {
        return vec![ms[0].id];
    }
    let mut fill = Fill::new(&ms, m);
    take_turns(&mut fill, &ms);
    fill.table
}

/// The table of `base` (a [`populate`] of every member a pool has) with the slots of the
/// members not among `members` (those that left the choice: unhealthy) handed to `members`:
/// each slot of a member in `members` keeps its backend, and the others are filled the way
/// [`populate`] fills a table, as if those were the only free slots (turns in rounds by
/// weight, in name order; each turn takes the member's first free slot of its permutation
/// from its offset). A member that leaves therefore moves exactly its own slots, spread over
/// the others by weight; `members` are the ones of `base` with the same weights for the
/// shares to hold. With no member of weight > 0 the result is empty.
pub fn refill(base: &[u16], members: &[Member]) -> Vec<u16> {
    let ms = taking_part(members);
    if ms.is_empty() || base.is_empty() {
        return Vec::new();
    }
    let mut staying = vec![0u64; 1 << 10];
    for x in &ms {
        staying[usize::from(x.id >> 6)] |= 1 << (x.id & 63);
    }
    let stays = |id: u16| staying[usize::from(id >> 6)] >> (id & 63) & 1 == 1;
    let free: Vec<u32> = (0..base.len() as u32)
        .filter(|&c| !stays(base[c as usize]))
        .collect();
    let mut table = base.to_vec();
    for (&c, id) in free.iter().zip(refill_free(base.len() as u32, &free, &ms)) {
        table[c as usize] = id;
    }
    table
}

/// The backends [`refill`] gives the slots `free` of a table of `m` slots (any order, each
/// once; every other slot keeps its backend), in the order of `free`: the same result without
/// a pass over the whole table, for a caller that knows which slots its members left.
pub fn refill_free(m: u32, free: &[u32], members: &[Member]) -> Vec<u16> {
    let ms = taking_part(members);
    if ms.is_empty() || free.is_empty() {
        return Vec::new();
    }
    let m = m.min(MAX_SIZE);
    if m == 1 {
        return vec![ms[0].id];
    }
    let mut fill = Fill::new(&ms, m);
    fill.all_taken_but(free);
    take_turns(&mut fill, &ms);
    free.iter().map(|&c| fill.table[c as usize]).collect()
}

/// The members that take part in a population: weight > 0 (capped at [`MAX_WEIGHT`]), in name
/// order whatever the order given.
fn taking_part<'a>(members: &[Member<'a>]) -> Vec<Member<'a>> {
    let mut ms: Vec<Member> = members
        .iter()
        .filter(|x| x.weight > 0)
        .map(|x| Member {
            weight: x.weight.min(MAX_WEIGHT),
            ..*x
        })
        .collect();
    ms.sort_by(|a, b| a.name.cmp(b.name));
    ms
}

/// Turns of `ms` (at least one, in name order) in rounds by weight until `fill` has no free
/// slot left.
fn take_turns(fill: &mut Fill, ms: &[Member]) {
    let n = ms.len();
    let max_w = ms.iter().map(|x| x.weight).max().unwrap_or(1);
    if ms.iter().all(|x| x.weight == max_w) {
        // Every backend has a turn in every round, in name order.
        let mut i = n - 1;
        fill.run(|| {
            i += 1;
            if i == n {
                i = 0;
            }
            i
        });
    } else {
        let weights: Vec<u32> = ms.iter().map(|x| x.weight).collect();
        let order = weighted_order(&weights, fill.left);
        let mut t = 0;
        fill.run(|| {
            // `order` holds at least as many turns as free slots, and `run` asks for one per
            // free slot.
            let i = order[t] as usize;
            t += 1;
            i
        });
    }
}

/// The first `m` turns under `weights` (indices into it, all weights in 1..=[`MAX_WEIGHT`]):
/// turn k of backend i falls in round ⌈k·max/w_i⌉ (its accumulated weight reaches the largest
/// weight then), and within a round backends go in index (name) order. Rather than walking
/// rounds one by one or keeping a heap of next turns, the turns are counting-sorted by round
/// (a stable sort, so index order holds within a round): O(m + n) with no division per turn.
fn weighted_order(weights: &[u32], m: u32) -> Vec<u32> {
    let max = u64::from(weights.iter().copied().max().unwrap_or(1));
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let n = weights.len() as u64;
    // Rounds up to `last` hold Σ ⌊last·w_i/max⌋ > last·total/max − n ≥ m turns; last ≤ m + n
    // because total ≥ max.
    let last = ((u64::from(m) + n) * max).div_ceil(total.max(1));
    // before[r]: turns in rounds before r (after the prefix sum below).
    let mut before = vec![0u32; last as usize + 2];
    for &w in weights {
        for r in rounds(u64::from(w), max, last) {
            before[r as usize + 1] += 1;
        }
    }
    for r in 1..before.len() {
        before[r] += before[r - 1];
    }
    let mut order = vec![0u32; before[last as usize + 1] as usize];
    for (i, &w) in weights.iter().enumerate() {
        for r in rounds(u64::from(w), max, last) {
            order[before[r as usize] as usize] = i as u32;
            before[r as usize] += 1;
        }
    }
    order.truncate(m as usize);
    order
}

/// The rounds ⌈k·max/w⌉ of turns k = 1, 2, ... (0 < w ≤ max) up to `last`, by Bresenham's
/// stepping instead of a division per turn.
fn rounds(w: u64, max: u64, last: u64) -> impl Iterator<Item = u64> {
    let (step, rem) = (max / w, max % w);
    // round·w − k·max = behind, kept in [0, w) so that round is the ceiling.
    let (mut round, mut behind) = (0u64, 0u64);
    std::iter::from_fn(move || {
        // One more round when the remainder overtakes what was left behind; branch-free, as
        // that happens irregularly.
        let carry = u64::from(rem > behind);
        round += step + carry;
        behind = behind + (w & carry.wrapping_neg()) - rem;
        (round <= last).then_some(round)
    })
}

/// Words of the taken bitmap for a table of `m` slots. It holds two copies of the table's
/// bits (bit x and bit x + m both say whether slot x is taken), so that a candidate
/// `last + k·skip mod m` can be looked up as `last + (k·skip mod m)` < 2m without reducing it:
/// 2m bits, rounded up to a power of two of words so that a mask proves every index in bounds.
fn taken_words(m: u32) -> usize {
    (2 * m as usize).div_ceil(64).next_power_of_two()
}

/// `x mod m` for x < 2m, without a branch (which would be mispredicted half the time).
#[inline(always)]
fn wrap(x: u32, m: u32) -> u32 {
    let d = x.wrapping_sub(m);
    // All ones when x < m (d wrapped around; x and m are below 2^31).
    let below = ((d as i32) >> 31) as u32;
    d.wrapping_add(m & below)
}

/// One backend's walk through its permutation.
#[derive(Debug, Clone, Copy)]
struct Walk {
    /// The slot it took last (before its first turn: offset − skip), so that its candidates
    /// are `last + k·skip mod m` for k = 1, 2, ...
    last: u32,
    /// `k·skip mod m` for k = 1..=8: the next eight candidates, each `last + step[k − 1]`.
    step: [u32; 8],
    id: u16,
}

/// Population state: the table, which slots are taken and each backend's walk.
///
/// A turn gives a backend the first free slot of its permutation after the one it took last.
/// Probing one candidate at a time costs a mispredicted branch per turn once the table is half
/// full, so the fill changes method as free slots become rare; every method finds the same
/// slot:
/// - more than half free: probe one candidate at a time (usually the first one is free);
/// - down to 1/16 free: look at the next eight candidates at once and take the first free one;
/// - down to about √(m/2) free (at most 128): skip eight candidates at a time while all are
///   taken;
/// - the last ones: look the free slots up instead of probing (see [`Tail`]).
struct Fill {
    m: u32,
    table: Vec<u16>,
    taken: Vec<u64>,
    /// `taken.len() - 1` (a power of two minus one).
    mask: usize,
    walks: Vec<Walk>,
    /// Free slots left.
    left: u32,
}

impl Fill {
    fn new(ms: &[Member], m: u32) -> Fill {
        let prime = is_prime(m);
        let walks = ms
            .iter()
            .map(|x| {
                let (offset, skip) = permutation_for(x.name, m, prime);
                let mut step = [0u32; 8];
                let mut acc = 0;
                for s in &mut step {
                    acc = wrap(acc + skip, m);
                    *s = acc;
                }
                Walk {
                    last: wrap(offset + m - skip, m),
                    step,
                    id: x.id,
                }
            })
            .collect();
        Fill {
            m,
            table: vec![0; m as usize],
            taken: vec![0; taken_words(m)],
            mask: taken_words(m) - 1,
            walks,
            left: m,
        }
    }

    /// 1 when the slot `x mod m` (x < 2m) is taken, else 0.
    #[inline(always)]
    fn taken_bit(&self, x: u32) -> u32 {
        (self.taken[(x >> 6) as usize & self.mask] >> (x & 63)) as u32 & 1
    }

    /// Every slot taken but `free` (a [`refill`] keeps the others' backends).
    fn all_taken_but(&mut self, free: &[u32]) {
        self.taken.fill(!0);
        for &c in free {
            for x in [c, c + self.m] {
                self.taken[(x >> 6) as usize & self.mask] &= !(1 << (x & 63));
            }
        }
        self.left = free.len() as u32;
    }

    /// Backend `i` takes slot `c` (< m).
    #[inline(always)]
    fn take(&mut self, i: usize, c: u32) {
        for x in [c, c + self.m] {
            self.taken[(x >> 6) as usize & self.mask] |= 1 << (x & 63);
        }
        let w = &mut self.walks[i];
        self.table[c as usize] = w.id;
        w.last = c;
        self.left -= 1;
    }

    /// Turns, with `next` naming the backend of each in order, until the table is full.
    #[inline(always)]
    fn run(&mut self, mut next: impl FnMut() -> usize) {
        let m = self.m;
        let tail = tail_len(m);
        while self.left > (m / 2).max(tail) {
            let i = next();
            let c = self.first_free_one_by_one(&self.walks[i]);
            self.take(i, c);
        }
        while self.left > (m / 16).max(tail) {
            let i = next();
            let c = self.first_free_eight_wide(&self.walks[i]);
            self.take(i, c);
        }
        while self.left > tail {
            let i = next();
            let c = self.first_free_skipping(&self.walks[i]);
            self.take(i, c);
        }
        let mut t = Tail::new(self);
        while self.left > 0 {
            let i = next();
            let c = t.first_free(self, i);
            self.take(i, c);
        }
    }

    /// The first free slot of walk `w`, probing one candidate at a time.
    #[inline(always)]
    fn first_free_one_by_one(&self, w: &Walk) -> u32 {
        let mut x = w.last + w.step[0];
        while self.taken_bit(x) != 0 {
            x = wrap(x, self.m) + w.step[0];
        }
        wrap(x, self.m)
    }

    /// The eight candidates after `last`: bit k set when candidate k + 1 is taken.
    #[inline(always)]
    fn eight_taken(&self, last: u32, step: &[u32; 8]) -> u32 {
        let mut mask = 0;
        for k in (0..8).rev() {
            mask = mask << 1 | self.taken_bit(last + step[k]);
        }
        mask
    }

    /// The first free slot of walk `w`, looking at eight candidates at once.
    #[inline(always)]
    fn first_free_eight_wide(&self, w: &Walk) -> u32 {
        let mut last = w.last;
        let mut mask = self.eight_taken(last, &w.step);
        while mask == 0xff {
            last = wrap(last + w.step[7], self.m);
            mask = self.eight_taken(last, &w.step);
        }
        let k = (!mask).trailing_zeros() as usize;
        wrap(last + w.step[k & 7], self.m)
    }

    /// The first free slot of walk `w`, skipping eight candidates at a time while all are
    /// taken (cheaper per candidate than building the mask when most blocks are full).
    #[inline(always)]
    fn first_free_skipping(&self, w: &Walk) -> u32 {
        let mut last = w.last;
        loop {
            // Bit 0 stays set only when all eight candidates are taken.
            let mut all = !0u64;
            for &s in &w.step {
                let x = last + s;
                all &= self.taken[(x >> 6) as usize & self.mask] >> (x & 63);
            }
            if all & 1 == 0 {
                break;
            }
            last = wrap(last + w.step[7], self.m);
        }
        let k = (!self.eight_taken(last, &w.step)).trailing_zeros() as usize;
        wrap(last + w.step[k & 7], self.m)
    }
}

/// Free slots below which turns look the free slots up instead of probing: probing needs
/// about m/F probes with F slots free, the lookup F multiplications; they cost the same
/// around F = √(m/2).
fn tail_len(m: u32) -> u32 {
    ((f64::from(m) / 2.0).sqrt() as u32).clamp(1, 4096)
}

/// The last free slots, and per backend the inverse of its skip (computed when first needed).
struct Tail {
    free: Vec<u32>,
    inverse: Vec<u32>,
    /// ⌊(2^64 − 1)/m⌋, for reducing products mod m without a division.
    reciprocal: u64,
}

impl Tail {
    fn new(fill: &Fill) -> Tail {
        let m = fill.m;
        let mut free = Vec::with_capacity(fill.left as usize);
        for (w, &word) in fill.taken.iter().enumerate().take(m.div_ceil(64) as usize) {
            let mut bits = !word;
            while bits != 0 {
                let c = (w as u32) << 6 | bits.trailing_zeros();
                if c >= m {
                    break;
                }
                free.push(c);
                bits &= bits - 1;
            }
        }
        Tail {
            free,
            inverse: vec![0; fill.walks.len()],
            reciprocal: u64::MAX / u64::from(m),
        }
    }

    /// The free slot that backend `i` reaches first, removed from the free list: slot f is
    /// j = (f − c)·skip⁻¹ (mod m) steps after its next candidate c, so the free slot with the
    /// least j is the one probing would find.
    fn first_free(&mut self, fill: &Fill, i: usize) -> u32 {
        let (m, w) = (fill.m, fill.walks[i]);
        if self.inverse[i] == 0 {
            self.inverse[i] = inverse_mod(w.step[0], m);
        }
        let (c, inv, r, m64) = (
            wrap(w.last + w.step[0], m),
            u64::from(self.inverse[i]),
            self.reciprocal,
            u64::from(m),
        );
        let mut best = u64::MAX;
        for (k, &f) in self.free.iter().enumerate() {
            let p = u64::from(wrap(f + m - c, m)) * inv;
            // p < m², so ⌊p·r / 2^64⌋ is ⌊p/m⌋ or one less: one subtraction corrects it.
            let q = ((u128::from(p) * u128::from(r)) >> 64) as u64;
            let j = p - q * m64;
            let j = if j >= m64 { j - m64 } else { j };
            best = best.min(j << 32 | k as u64);
        }
        self.free.swap_remove((best & 0xffff_ffff) as usize)
    }
}

/// a⁻¹ mod m for a coprime with m (extended Euclid).
fn inverse_mod(a: u32, m: u32) -> u32 {
    let (mut r0, mut r1) = (i64::from(m), i64::from(a));
    let (mut t0, mut t1) = (0i64, 1i64);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (t0, t1) = (t1, t0 - q * t1);
    }
    t0.rem_euclid(i64::from(m)) as u32
}

fn is_prime(n: u32) -> bool {
    n >= 2
        && (2..)
            .take_while(|d: &u32| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_prime(n: u32) -> bool {
        n >= 2
            && (2..)
                .take_while(|d| d * d <= n)
                .all(|d| !n.is_multiple_of(d))
    }

    #[test]
    fn ladder_is_prime_and_sizes_follow_100n() {
        assert!(LADDER.iter().all(|&m| is_prime(m)));
        // Pools of 1 to 40 backends share the smallest size: no step while they grow.
        assert_eq!(size_for(1), 4093);
        assert_eq!(size_for(3), 4093);
        assert_eq!(size_for(40), 4093);
        assert_eq!(size_for(41), 8191);
        assert_eq!(size_for(327), 32749);
        assert_eq!(size_for(328), 65537);
        assert_eq!(size_for(655), 65537);
        // Past 655 backends, the smallest prime >= 100 N (M >= 100 N at 65,536 backends).
        assert_eq!(size_for(656), 65609);
        assert_eq!(size_for(5000), 500009);
        assert_eq!(size_for(65536), 6_553_621);
        assert_eq!(size_for(1 << 20), MAX_SIZE);
        assert!(is_prime(size_for(65536)) && size_for(65536) >= 6_553_600);
        assert_eq!(step_down(6_553_621, 65536), Some(4194301));
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
            // Slices past 131,072 slots (a bitmap sized for 65,537 aliased them).
            (1500, size_for(1500)),
            (2000, size_for(2000)),
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
