//! The flow hash of `[hash]` in `hw/regmap.toml`: CRC-32C over a 40-byte canonical key, then
//! the murmur3 fmix32 finaliser; table index = `(hash * M) >> 32`.
//!
//! The RTL (`hw/rtl/nlb_flow_hash.v`) implements the same function and is held to the same
//! known-answer vectors (`hw/contract/tests/contract/hash_vectors.rs`).

use crate::enums::KeyType;
use crate::hash_def as def;
use std::net::{IpAddr, Ipv6Addr};

/// Length of the canonical key.
pub const KEY_BYTES: usize = def::KEY_BYTES;

/// A flow key before canonicalisation. Fields a key type does not use are ignored (zeroed in
/// the canonical bytes), so a key built from a full packet can be narrowed by changing
/// `key_type` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// Which fields take part.
    pub key_type: KeyType,
    /// IP protocol number.
    pub protocol: u8,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Source address, IPv4 mapped.
    pub src_addr: u128,
    /// Destination address, IPv4 mapped.
    pub dst_addr: u128,
}

impl FlowKey {
    /// The canonical key bytes (network order), with unused fields zeroed.
    pub fn bytes(&self) -> [u8; KEY_BYTES] {
        let mut b = [0u8; KEY_BYTES];
        let t = self.key_type;
        b[def::KEY_TYPE_OFFSET] = t.value() as u8;
        let (proto, ports, dst) = match t {
            KeyType::Vip => (true, false, true),
            KeyType::Tuple1 => (false, false, false),
            KeyType::Tuple2 => (false, false, true),
            KeyType::Tuple3 => (true, false, true),
            KeyType::Tuple5 => (true, true, true),
        };
        if proto {
            b[def::PROTOCOL_OFFSET] = self.protocol;
        }
        if ports {
            b[def::SRC_PORT_OFFSET..def::SRC_PORT_OFFSET + 2]
                .copy_from_slice(&self.src_port.to_be_bytes());
            b[def::DST_PORT_OFFSET..def::DST_PORT_OFFSET + 2]
                .copy_from_slice(&self.dst_port.to_be_bytes());
        }
        if t != KeyType::Vip {
            b[def::SRC_ADDR_OFFSET..def::SRC_ADDR_OFFSET + 16]
                .copy_from_slice(&self.src_addr.to_be_bytes());
        }
        if dst {
            b[def::DST_ADDR_OFFSET..def::DST_ADDR_OFFSET + 16]
                .copy_from_slice(&self.dst_addr.to_be_bytes());
        }
        b
    }

    /// The same flow narrowed to another key type.
    pub fn with_type(mut self, key_type: KeyType) -> Self {
        self.key_type = key_type;
        self
    }

    /// The flow hash of this key.
    pub fn hash(&self) -> u32 {
        flow_hash(&self.bytes())
    }

    /// The key of the rule lookup: protocol + VIP.
    pub fn vip(protocol: u8, vip: IpAddr) -> Self {
        FlowKey {
            key_type: KeyType::Vip,
            protocol,
            dst_addr: addr_to_u128(vip),
            ..FlowKey::default()
        }
    }

    /// A full 5-tuple key.
    pub fn tuple5(protocol: u8, src: IpAddr, src_port: u16, dst: IpAddr, dst_port: u16) -> Self {
        FlowKey {
            key_type: KeyType::Tuple5,
            protocol,
            src_port,
            dst_port,
            src_addr: addr_to_u128(src),
            dst_addr: addr_to_u128(dst),
        }
    }
}

/// An address as the 128-bit integer the tables hold (IPv4 mapped to `::ffff:a.b.c.d`).
pub fn addr_to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The inverse of [`addr_to_u128`]: IPv4-mapped addresses come back as IPv4.
pub fn u128_to_addr(value: u128) -> IpAddr {
    let v6 = Ipv6Addr::from(value);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// Whether a 128-bit table address is an IPv4-mapped address.
pub fn is_ipv4_mapped(value: u128) -> bool {
    value >> 32 == 0xffff
}

/// Slicing-by-8 tables for the reflected CRC of the regmap, computed at compile time.
static CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ def::CRC_POLY_REFLECTED
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

/// Whether the regmap's polynomial is the one the x86 `crc32` instruction implements.
const CASTAGNOLI: bool = def::CRC_POLY_REFLECTED == 0x82F6_3B78;

/// CRC-32C (CRC-32/ISCSI) of `data` with the regmap's init and xorout.
///
/// Uses the SSE4.2 `crc32` instruction where the CPU has it (the golden model hashes two or
/// three keys per packet), else the portable slicing-by-8 tables; both give the same result.
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if CASTAGNOLI && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { crc32c_sse42(data) };
        }
    }
    crc32c_portable(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc = u64::from(def::CRC_INIT);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(word));
    }
    let mut crc = crc as u32;
    for &b in chunks.remainder() {
        crc = _mm_crc32_u8(crc, b);
    }
    crc ^ def::CRC_XOROUT
}

/// The table-driven CRC-32C, for CPUs without the instruction (and to cross-check it).
pub fn crc32c_portable(data: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut crc = def::CRC_INIT;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc ^ def::CRC_XOROUT
}

/// The mix step (murmur3 fmix32 with the regmap's constants).
pub fn mix(mut h: u32) -> u32 {
    h ^= h >> def::MIX_SHIFT1;
    h = h.wrapping_mul(def::MIX_MUL1);
    h ^= h >> def::MIX_SHIFT2;
    h = h.wrapping_mul(def::MIX_MUL2);
    h ^= h >> def::MIX_SHIFT3;
    h
}

/// The flow hash of canonical key bytes.
pub fn flow_hash(key: &[u8; KEY_BYTES]) -> u32 {
    mix(crc32c(key))
}

/// Index into a table of `size` entries: `(hash * size) >> 32`.
pub fn table_index(hash: u32, size: u32) -> u32 {
    ((u64::from(hash) * u64::from(size)) >> 32) as u32
}

/// A known-answer vector of the flow hash (values computed outside this crate).
#[derive(Debug, Clone, Copy)]
pub struct KnownAnswer {
    /// What the key is.
    pub what: &'static str,
    /// Canonical key bytes, hex.
    pub key_hex: &'static str,
    /// CRC-32C of the key.
    pub crc: u32,
    /// Final flow hash.
    pub hash: u32,
    /// `table_index(hash, 65537)`.
    pub index_65537: u32,
    /// `table_index(hash, 251)`.
    pub index_251: u32,
}

/// Known-answer vectors: hand-built keys, CRC and hash computed by an independent bit-serial
/// implementation (Python, from the published CRC-32C and fmix32 definitions).
pub const KNOWN_ANSWERS: &[KnownAnswer] = &[
    KnownAnswer {
        what: "tuple5 tcp 198.51.100.10:40000 -> 203.0.113.1:80",
        key_hex: "05069c400050000000000000000000000000ffffc633640a00000000000000000000ffffcb007101",
        crc: 0xe429bdf4,
        hash: 0xea249984,
        index_65537: 59941,
        index_251: 229,
    },
    KnownAnswer {
        what: "tuple3 udp 198.51.100.10 -> 203.0.113.1",
        key_hex: "031100000000000000000000000000000000ffffc633640a00000000000000000000ffffcb007101",
        crc: 0xccb93767,
        hash: 0xd8a388e6,
        index_65537: 55460,
        index_251: 212,
    },
    KnownAnswer {
        what: "tuple2 198.51.100.10 -> 203.0.113.1",
        key_hex: "020000000000000000000000000000000000ffffc633640a00000000000000000000ffffcb007101",
        crc: 0x35bfd930,
        hash: 0x6a0dfe05,
        index_65537: 27150,
        index_251: 103,
    },
    KnownAnswer {
        what: "tuple1 198.51.100.10",
        key_hex: "010000000000000000000000000000000000ffffc633640a00000000000000000000000000000000",
        crc: 0x743063d7,
        hash: 0xab321371,
        index_65537: 43826,
        index_251: 167,
    },
    KnownAnswer {
        what: "vip tcp 203.0.113.1",
        key_hex: "00060000000000000000000000000000000000000000000000000000000000000000ffffcb007101",
        crc: 0xb97843b2,
        hash: 0x6134907f,
        index_65537: 24884,
        index_251: 95,
    },
    KnownAnswer {
        what: "tuple5 udp [2001:db8::1]:5353 -> [2001:db8:ffff::10]:443",
        key_hex: "051114e901bb000020010db800000000000000000000000120010db8ffff00000000000000000010",
        crc: 0x244623cc,
        hash: 0x144b61fd,
        index_65537: 5195,
        index_251: 19,
    },
    KnownAnswer {
        what: "all zero bytes",
        key_hex: "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        crc: 0x595fb7dd,
        hash: 0x1b0dcb01,
        index_65537: 6925,
        index_251: 26,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_check_value() {
        // The catalogue check value of CRC-32/ISCSI.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn hardware_and_portable_crc_agree() {
        let mut data = [0u8; 97];
        let mut x = 0x1234_5678u32;
        for round in 0..200 {
            for b in data.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            let len = round % data.len();
            assert_eq!(
                crc32c(&data[..len]),
                crc32c_portable(&data[..len]),
                "len {len}"
            );
        }
    }

    #[test]
    fn index_stays_in_range() {
        for h in [0, 1, u32::MAX / 2, u32::MAX] {
            for m in [1, 2, 251, 65537] {
                assert!(table_index(h, m) < m);
            }
        }
    }

    #[test]
    fn ipv4_round_trips_through_mapping() {
        let a: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(u128_to_addr(addr_to_u128(a)), a);
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(u128_to_addr(addr_to_u128(b)), b);
    }
}
