//! `nlb_table_cmd` (the `cmd` decoder shared by the table window and the conntrack block) on
//! its own against the golden model's decoder, `firmware_sim::device::decode_cmd`: every op
//! value the op field holds with the index field at 0, 1, its top and random values, the index register at
//! 0, all ones and random, then random command words. A command the model refuses must be
//! neither a write nor a read; one it takes must be exactly the write or read it names, with
//! its index.

use firmware_sim::device::decode_cmd;
use nlb_hw::blocks::conntrack::cmd;
use nlb_verif::bench::seed_from_env;
use nlb_verif::models::TableCmd;
use nlb_verif::Verilated;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[test]
fn decodes_as_the_model() {
    let seed = seed_from_env(0x7ab1e);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<TableCmd>().expect("model");
    let port = |n: &str| sim.port(n).expect(n);
    let (word, index_reg) = (port("cmd_word"), port("index_reg"));
    let (write, read, index) = (port("cmd_write"), port("cmd_read"), port("cmd_index"));
    let mut cases: Vec<(u32, u32)> = Vec::new();
    // Every op the field holds, the index field 0, 1, its top and random (the widths are the
    // regmap's: a 4-bit op, a 28-bit index).
    let op_max = cmd::OP.max();
    let index_max = cmd::INDEX.max();
    for op in 0..=op_max {
        for field in [0u32, 1, index_max, rng.random_range(2..index_max)] {
            for reg in [0u32, u32::MAX, rng.random()] {
                cases.push((
                    cmd::INDEX.put(field).expect("the index field")
                        | cmd::OP.put(op).expect("the op field"),
                    reg,
                ));
            }
        }
    }
    cases.extend((0..50_000).map(|_| (rng.random(), rng.random())));
    let (mut writes, mut reads, mut refused) = (0, 0, 0);
    for (cmd, reg) in cases {
        sim.set_u64(word, u64::from(cmd)).expect("cmd_word");
        sim.set_u64(index_reg, u64::from(reg)).expect("index_reg");
        sim.eval();
        let got_write = sim.get_bit(write).expect("cmd_write");
        let got_read = sim.get_bit(read).expect("cmd_read");
        let got_index = sim.get_u64(index).expect("cmd_index") as u32;
        let got = match (got_write, got_read) {
            (false, false) => None,
            (true, false) => Some((true, got_index)),
            (false, true) => Some((false, got_index)),
            (true, true) => panic!(
                "table_cmd: cmd {cmd:#010x} (index register {reg:#x}) is both a write and a read \
                 (seed {seed:#x})"
            ),
        };
        let want = decode_cmd(cmd, reg);
        assert_eq!(
            got, want,
            "table_cmd: cmd {cmd:#010x}, index register {reg:#x}: RTL (write, index) {got:?}, \
             model decode_cmd {want:?} (seed {seed:#x}: NLB_SEED={seed:#x} cargo test -p \
             nlb-verif --test table_cmd)"
        );
        match want {
            Some((true, _)) => writes += 1,
            Some((false, _)) => reads += 1,
            None => refused += 1,
        }
    }
    println!("writes {writes}, reads {reads}, refused {refused}");
    assert!(writes > 0 && reads > 0 && refused > 0);
}
