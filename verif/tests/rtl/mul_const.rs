//! `nlb_mul_const_csa` on its own: `sum + carry` must equal `x * CONST` modulo 2^32, for the
//! tree shapes the flow hash does not use (32 terms, two terms, one term). The regmap's two
//! mix constants are covered through the flow hash.

use nlb_verif::bench::seed_from_env;
use nlb_verif::models::{MulAllOnes, MulOneBit, MulTwoBits};
use nlb_verif::{Model, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The constant a model was built with, read from its `CONST=32'h...` parameter.
fn constant<M: Model>() -> u32 {
    let p = M::PARAMS
        .iter()
        .find_map(|p| p.strip_prefix("CONST=32'h"))
        .expect("the model is built with a CONST parameter");
    u32::from_str_radix(p, 16).expect("hex constant")
}

fn check<M: Model>(seed: u64) {
    let k = constant::<M>();
    let mut sim = Verilated::new::<M>().expect("model");
    let (x, sum, carry) = (
        sim.port("x").expect("x"),
        sim.port("sum").expect("sum"),
        sim.port("carry").expect("carry"),
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let edges = [
        0u32,
        1,
        2,
        0x8000_0000,
        u32::MAX,
        u32::MAX - 1,
        0x5555_5555,
        0xaaaa_aaaa,
    ];
    let values = edges
        .into_iter()
        .chain((0..20_000).map(|_| rng.random::<u32>()));
    for v in values {
        sim.set_u64(x, u64::from(v)).expect("x");
        sim.eval();
        let s = sim.get_u64(sum).expect("sum") as u32;
        let c = sim.get_u64(carry).expect("carry") as u32;
        assert_eq!(
            s.wrapping_add(c),
            v.wrapping_mul(k),
            "{}: x = {v:#010x}, CONST = {k:#010x}: sum {s:#010x} + carry {c:#010x}",
            M::NAME
        );
    }
}

#[test]
fn thirty_two_terms() {
    assert_eq!(constant::<MulAllOnes>(), u32::MAX);
    check::<MulAllOnes>(seed_from_env(21));
}

#[test]
fn two_terms_need_no_compression() {
    check::<MulTwoBits>(seed_from_env(22));
}

#[test]
fn one_term_is_a_shift() {
    check::<MulOneBit>(seed_from_env(23));
}
