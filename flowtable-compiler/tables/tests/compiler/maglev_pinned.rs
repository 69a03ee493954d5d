//! Maglev tables pinned byte for byte, so that work on the population's speed cannot change
//! what it computes (a changed table would reshuffle flows on every NIC of a fleet that
//! upgrades one host at a time).
//!
//! Two independent checks per pool:
//! - the SHA-256 of the table (slots as little-endian u16) equals a digest recorded from the
//!   population code as it was before it was optimised (src/maglev.rs as of commit 90853a1);
//! - the table equals a literal, slow transcription of the definition in docs/config.md:
//!   `offset = h(0, name) mod M`, `skip = h(1, name) mod (M−1) + 1` with h = FNV-1a-64 over
//!   the seed's 8 little-endian bytes then the name, then the splitmix64 finaliser; rounds in
//!   which each backend, in name order, adds its weight to a counter and takes a turn (its
//!   next free slot of `offset + j·skip mod M`) when the counter reaches the largest weight.

use flowtable_compiler::maglev::{populate, refill, Member, MAX_SIZE, MAX_WEIGHT};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

/// h(seed, name) as docs/config.md states it.
fn h(seed: u64, name: &str) -> u64 {
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.to_le_bytes().into_iter().chain(name.bytes()) {
        x = (x ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// (offset, skip) of a backend; every M used here is prime or has no factor the skips hit
/// (checked: the walk must visit every slot, or the definition loop below would not end).
fn offset_skip(name: &str, m: u32) -> (u64, u64) {
    if m == 1 {
        return (0, 1);
    }
    let m = u64::from(m);
    let mut skip = h(1, name) % (m - 1) + 1;
    while gcd(skip, m) != 1 {
        skip = skip % (m - 1) + 1;
    }
    (h(0, name) % m, skip)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The definition, probing with `%` and counting rounds one by one.
fn by_definition(members: &[Member], m: u32) -> Vec<u16> {
    let m = m.min(MAX_SIZE);
    by_definition_from(members, vec![None; m as usize])
}

/// The definition of a refill (docs/config.md): the slots of `base` whose backend is one of
/// `members` (weight > 0) keep it; the others are free, and `members` take turns as in a
/// population until none is left.
fn refill_by_definition(base: &[u16], members: &[Member]) -> Vec<u16> {
    let stays = |id: u16| members.iter().any(|x| x.id == id && x.weight > 0);
    if !members.iter().any(|x| x.weight > 0) {
        return Vec::new();
    }
    by_definition_from(
        members,
        base.iter().map(|&b| stays(b).then_some(b)).collect(),
    )
}

/// Turns of `members` as the definition takes them, over a table whose taken slots are
/// `table`'s `Some`, until every slot is taken.
fn by_definition_from(members: &[Member], mut table: Vec<Option<u16>>) -> Vec<u16> {
    let m = table.len() as u32;
    let mut ms: Vec<Member> = members.iter().copied().filter(|x| x.weight > 0).collect();
    for x in &mut ms {
        x.weight = x.weight.min(MAX_WEIGHT);
    }
    ms.sort_by(|a, b| a.name.cmp(b.name));
    if ms.is_empty() || m == 0 {
        return Vec::new();
    }
    let max = u64::from(ms.iter().map(|x| x.weight).max().unwrap_or(1));
    let perms: Vec<(u64, u64)> = ms.iter().map(|x| offset_skip(x.name, m)).collect();
    let mut step = vec![0u64; ms.len()];
    let mut counter = vec![0u64; ms.len()];
    let mut filled = table.iter().filter(|v| v.is_some()).count() as u32;
    while filled < m {
        for (i, x) in ms.iter().enumerate() {
            counter[i] += u64::from(x.weight);
            if counter[i] < max {
                continue;
            }
            counter[i] -= max;
            let (o, s) = perms[i];
            loop {
                let c = ((o + step[i] * s) % u64::from(m)) as usize;
                step[i] += 1;
                if table[c].is_none() {
                    table[c] = Some(x.id);
                    filled += 1;
                    break;
                }
            }
            if filled == m {
                break;
            }
        }
    }
    table.into_iter().map(|v| v.unwrap_or(u16::MAX)).collect()
}

/// Equal tables, or a short message naming the first slot that differs.
fn same_table(got: &[u16], want: &[u16], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: table length");
    if let Some(k) = got.iter().zip(want).position(|(a, b)| a != b) {
        let differ = got.iter().zip(want).filter(|(a, b)| a != b).count();
        panic!(
            "{what}: {differ} slots differ, the first is slot {k}: {} instead of {}",
            got[k], want[k]
        );
    }
}

fn sha256_hex(table: &[u16]) -> String {
    let mut h = Sha256::new();
    for v in table {
        h.update(v.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `n` members named `prefix-i`, ids scattered over u16, weights from `weight(i)`.
fn pool(prefix: &str, n: usize, weight: impl Fn(usize) -> u32) -> (Vec<String>, Vec<u32>) {
    let names = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    (names, (0..n).map(weight).collect())
}

fn members<'a>(names: &'a [String], weights: &[u32]) -> Vec<Member<'a>> {
    names
        .iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (name, &weight))| Member {
            name,
            id: (i as u16).wrapping_mul(40503).wrapping_add(7),
            weight,
        })
        .collect()
}

/// (what, (names, weights), M, SHA-256 recorded from the code before optimisation).
type Case = (&'static str, (Vec<String>, Vec<u32>), u32, &'static str);

fn cases() -> Vec<Case> {
    vec![
        (
            "N=10 equal, M=65537",
            pool("backend", 10, |_| 1),
            65537,
            "301f2019fc8194296542e5dc892e7229e70a3950123ff17fe0e4adaac1aacf46",
        ),
        (
            "N=10 weights 1..1000, M=65537",
            pool("backend", 10, |i| 1 + (i as u32 * 37) % 1000),
            65537,
            "5223403ca5cac945f359006ff3c498be140e816a8d364327843836f444a39588",
        ),
        (
            "N=100 equal, M=65537",
            pool("web", 100, |_| 1),
            65537,
            "92f3d5189982e800608580da4f8da49ab239c88bd818f9ab96b33042e31453c6",
        ),
        (
            "N=100 weights 1..1000, M=65537",
            pool("web", 100, |i| 1 + (i as u32 * 389) % 1000),
            65537,
            "a15423fd7b0d6bf5c3e8ae499a9c9406efc7af2a965904be2582a6368bcce9c2",
        ),
        (
            "N=1000 equal, M=65537",
            pool("backend", 1000, |_| 1),
            65537,
            "3390e058597d1bf1ef6b655d72110a7331fd5b4b0ea182e410f4d1f452775b3c",
        ),
        (
            "N=1000 weights 1..1000, M=65537",
            pool("backend", 1000, |i| 1 + (i as u32 * 37) % 1000),
            65537,
            "3d70b4de25e21977cfd7af360a4d1787cd9477f8bfe22fb6a0e3b5e3de1764e7",
        ),
        (
            "N=1000 weights 0, 1, 2, 1000, above MAX_WEIGHT, M=65537",
            pool("n", 1000, |i| [0, 1, 2, 1000, u32::MAX][i % 5]),
            65537,
            "e010e32903c9c4e093c0db75235bf41c17ad39adfcb2ddf6a88f314498db7015",
        ),
        (
            "N=3 weights 3:2:1, M=251",
            pool("a", 3, |i| 3 - i as u32),
            251,
            "e27c5fac34e22fbfbdc7d87a7e645f90747d4cc6f43c1a7e9f069e8137d9d68c",
        ),
        (
            "N=10 equal, M=1021",
            pool("db", 10, |_| 5),
            1021,
            "69a01cfab852a6d16d5789027c0f7099002fb47fd3e7f46fa8fdd8860ef817d6",
        ),
        (
            "N=80 weights, M=8191",
            pool("cache", 80, |i| 1 + (i as u32 % 7) * 100),
            8191,
            "ba57a3fc470d33c8917161559fb8847680e8cb2573869f81f775e6c7556af189",
        ),
        (
            "N=300 equal, M=32749",
            pool("x", 300, |_| 1),
            32749,
            "e5b10003894adcbe118ef09d1803984e4df39bd1467435989ed90e775ae84fb3",
        ),
        (
            "N=4 equal, M=100 (not prime)",
            pool("np", 4, |_| 1),
            100,
            "5073175050273c245b41688617d689704dd05f72caf62e118a7964d9d5f8641e",
        ),
        (
            "N=3 equal, M=1 (a target instance has one member)",
            pool("one", 3, |_| 2),
            1,
            "0a6361b3a802f55cd5ae06101c88a1e216320fe11cc0cfe1d791eed08a1200fd",
        ),
        (
            "N=2 equal, M=70000 (above 17 bits, not prime)",
            pool("big", 2, |_| 1),
            70000,
            "52b8dad401a29c9f297562bdf309ddefd78e3b980b34dadfc47bd316fb976b9a",
        ),
    ]
}

#[test]
fn tables_are_pinned_and_follow_the_definition() {
    let mut failures = Vec::new();
    for (what, (names, weights), m, want) in cases() {
        let ms = members(&names, &weights);
        let t = populate(&ms, m);
        same_table(
            &t,
            &by_definition(&ms, m),
            &format!("{what} (against the definition)"),
        );
        let got = sha256_hex(&t);
        if got != want {
            failures.push(format!("{what}: sha256 {got}, pinned {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn one_population_after_another_is_unaffected() {
    // Pools built back to back (as a full compile does) equal pools built alone.
    let all = cases();
    let alone: Vec<Vec<u16>> = all
        .iter()
        .map(|(_, (n, w), m, _)| populate(&members(n, w), *m))
        .collect();
    for ((what, (n, w), m, _), want) in all.iter().zip(&alone).rev() {
        same_table(&populate(&members(n, w), *m), want, what);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random pools (weights 0..=1000, now and then a huge one that counts as MAX_WEIGHT) at
    /// sizes from tiny to the largest, prime or not: the table is the definition's.
    #[test]
    fn random_pools_follow_the_definition(
        weights in proptest::collection::vec(
            prop_oneof![8 => 0u32..=1000, 1 => Just(1u32), 1 => any::<u32>()],
            1..48,
        ),
        m in prop::sample::select(vec![2u32, 3, 7, 13, 100, 101, 251, 509, 1021, 2039, 4093, 65537]),
        seed in any::<u32>(),
    ) {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("p{seed:x}-{i}")).collect();
        let ms = members(&names, &weights);
        same_table(&populate(&ms, m), &by_definition(&ms, m), &format!("weights {weights:?} M={m}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A refill after members leave the choice (each member out with a chance of 0 to 100 %,
    /// so from one slot free to nearly all): the table is the definition's, at sizes where
    /// the free slots are many, a few hundred, or fewer than the population's lookup of the
    /// last free slots takes over (√(M/2)).
    #[test]
    fn refills_follow_the_definition(
        weights in proptest::collection::vec(
            prop_oneof![6 => Just(1u32), 3 => 0u32..=1000, 1 => any::<u32>()],
            1..48,
        ),
        out_percent in 0u32..=100,
        m in prop::sample::select(vec![2u32, 7, 101, 251, 1021, 4093, 65537]),
        seed in any::<u32>(),
    ) {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("r{seed:x}-{i}")).collect();
        let all = members(&names, &weights);
        let base = populate(&all, m);
        let staying: Vec<Member> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                // A draw in 0..100 per member from the seed.
                let draw = (seed ^ (*i as u32).wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b) >> 8;
                draw % 100 >= out_percent
            })
            .map(|(_, x)| *x)
            .collect();
        same_table(
            &refill(&base, &staying),
            &refill_by_definition(&base, &staying),
            &format!("weights {weights:?} M={m}, {} of {} staying", staying.len(), all.len()),
        );
    }
}

/// Refills of a large slice with one to a few hundred slots free (the last-slots lookup and
/// the skipping probe), against the definition.
#[test]
fn refills_of_a_large_slice_follow_the_definition() {
    let (names, weights) = pool("big", 600, |i| if i % 5 == 0 { 3 } else { 1 });
    let all = members(&names, &weights);
    let base = populate(&all, 65537);
    for out in [1usize, 2, 7, 40] {
        // Members 5, 18, 31, ... leave.
        let staying: Vec<Member> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| !(i % 13 == 5 && i / 13 < out))
            .map(|(_, x)| *x)
            .collect();
        assert_eq!(staying.len(), all.len() - out);
        same_table(
            &refill(&base, &staying),
            &refill_by_definition(&base, &staying),
            &format!("{out} members out of 600"),
        );
    }
}
