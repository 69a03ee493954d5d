//! Known-answer vectors of the flow hash.
//!
//! The key bytes below are written out by hand from the canonical layout in hw/regmap.toml, and
//! the expected CRC and final hash values were computed outside this crate (a bit-serial
//! CRC-32C and fmix32 written in Python from their published definitions). The CRC is also
//! cross-checked against the `crc` crate's CRC-32/ISCSI. The RTL flow-hash module is held to
//! the same table (`nlb_hw::hash::KNOWN_ANSWERS`, which verif runs through the RTL).

use nlb_hw::enums::KeyType;
use nlb_hw::hash::KNOWN_ANSWERS as VECTORS;
use nlb_hw::hash::{addr_to_u128, crc32c, mix};
use nlb_hw::{flow_hash, table_index, FlowKey};
use std::net::IpAddr;

fn unhex(s: &str) -> [u8; 40] {
    let mut out = [0u8; 40];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn known_answers() {
    let iscsi = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
    for v in VECTORS {
        let key = unhex(v.key_hex);
        assert_eq!(
            iscsi.checksum(&key),
            v.crc,
            "crc crate disagrees: {}",
            v.what
        );
        assert_eq!(crc32c(&key), v.crc, "crc: {}", v.what);
        assert_eq!(mix(v.crc), v.hash, "mix: {}", v.what);
        assert_eq!(flow_hash(&key), v.hash, "hash: {}", v.what);
        assert_eq!(
            table_index(v.hash, 65537),
            v.index_65537,
            "index: {}",
            v.what
        );
        assert_eq!(table_index(v.hash, 251), v.index_251, "index: {}", v.what);
    }
}

#[test]
fn canonical_key_layout_matches_hand_built_bytes() {
    let src = ip("198.51.100.10");
    let dst = ip("203.0.113.1");
    let full = FlowKey::tuple5(6, src, 40000, dst, 80);
    assert_eq!(full.bytes(), unhex(VECTORS[0].key_hex));
    let udp = FlowKey::tuple5(17, src, 1234, dst, 53);
    assert_eq!(
        udp.with_type(KeyType::Tuple3).bytes(),
        unhex(VECTORS[1].key_hex)
    );
    assert_eq!(
        full.with_type(KeyType::Tuple2).bytes(),
        unhex(VECTORS[2].key_hex)
    );
    assert_eq!(
        full.with_type(KeyType::Tuple1).bytes(),
        unhex(VECTORS[3].key_hex)
    );
    assert_eq!(FlowKey::vip(6, dst).bytes(), unhex(VECTORS[4].key_hex));
    let v6 = FlowKey::tuple5(17, ip("2001:db8::1"), 5353, ip("2001:db8:ffff::10"), 443);
    assert_eq!(v6.bytes(), unhex(VECTORS[5].key_hex));
    assert_eq!(v6.hash(), VECTORS[5].hash);
}

#[test]
fn narrowed_keys_ignore_unused_fields() {
    let a = FlowKey::tuple5(6, ip("10.0.0.1"), 1, ip("10.0.0.2"), 2);
    let b = FlowKey::tuple5(6, ip("10.0.0.1"), 9, ip("10.0.0.2"), 7);
    assert_ne!(a.hash(), b.hash());
    assert_eq!(
        a.with_type(KeyType::Tuple3).hash(),
        b.with_type(KeyType::Tuple3).hash()
    );
    let c = FlowKey::tuple5(17, ip("10.0.0.1"), 9, ip("10.0.0.3"), 7);
    assert_eq!(
        a.with_type(KeyType::Tuple1).hash(),
        c.with_type(KeyType::Tuple1).hash()
    );
    assert_ne!(
        a.with_type(KeyType::Tuple2).hash(),
        c.with_type(KeyType::Tuple2).hash()
    );
    assert_eq!(addr_to_u128(ip("10.0.0.1")) >> 32, 0xffff);
}
