//! The connection table's tag index is invisible: after any sequence of register-style
//! writes (entries in their own bucket or in another, duplicates, invalidations, rewrites),
//! the tag-filtered lookup the pipeline uses gives the same index as comparing every way of
//! the bucket, and that is the lowest way whose entry is valid and equal (docs/pipeline.md §7).

use firmware_sim::ConnTable;
use nlb_hw::enums::KeyType;
use nlb_hw::layouts::CtEntry;
use nlb_hw::{table_index, FlowKey};
use proptest::prelude::*;

/// A small flow space so that writes collide: 3 clients × 3 ports × 2 protocols.
fn key(k: u8) -> FlowKey {
    FlowKey {
        key_type: KeyType::Tuple5,
        protocol: if k & 1 == 0 { 6 } else { 17 },
        src_port: 1000 + u16::from(k / 2 % 3),
        dst_port: 80,
        src_addr: 0xffff_c633_6400 + u128::from(k / 6 % 3),
        dst_addr: 0xffff_cb00_7101,
    }
}

fn entry(k: u8, valid: bool, backend: u16) -> CtEntry {
    let f = key(k);
    CtEntry {
        valid,
        protocol: f.protocol,
        src_port: f.src_port,
        dst_port: f.dst_port,
        src_addr: f.src_addr,
        dst_addr: f.dst_addr,
        backend,
        rule: 0,
        flags: 0,
        timestamp: 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tag_filtered_lookup_equals_the_full_comparison(
        geometry in prop_oneof![Just((1u32, 1u32)), Just((2, 4)), Just((4, 2)), Just((8, 3))],
        writes in proptest::collection::vec(
            (any::<u16>(), 0u8..18, any::<bool>(), any::<u16>(), any::<bool>()),
            0..60,
        ),
    ) {
        let (buckets, ways) = geometry;
        let mut t = ConnTable::new(buckets, ways);
        for (at, k, valid, backend, own_bucket) in writes {
            // Either a way of the key's own bucket (what the host does) or any index.
            let h = key(k).hash();
            let index = if own_bucket {
                table_index(h, buckets) * ways + u32::from(at) % ways
            } else {
                u32::from(at) % t.len()
            };
            t.write(index, entry(k, valid, backend)).expect("index in range");
        }
        for k in 0..18 {
            let f = key(k);
            let bucket = table_index(f.hash(), buckets);
            // The documented rule, computed here from the entries alone.
            let want = (bucket * ways..(bucket + 1) * ways).find(|&i| {
                t.entry(i).is_some_and(|e| *e == entry(k, true, e.backend))
            });
            prop_assert_eq!(t.lookup_in(bucket, &f), want);
            prop_assert_eq!(t.lookup(&f), want);
        }
    }
}
