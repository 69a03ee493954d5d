//! The regmap's flow hash ([`nlb_hw::flow_hash`]) computed straight from the key fields.
//!
//! [`nlb_hw::FlowKey::hash`] first lays out the 40-byte canonical key, then runs CRC-32C and
//! the mix over it. The pipeline hashes two or three keys per packet, so here the five 64-bit
//! words of the canonical key are assembled in registers and fed to the SSE4.2 `crc32`
//! instruction directly. The result is the same function of the same bytes; the unit tests
//! compare it with `FlowKey::hash` on random keys of every type.

use nlb_hw::enums::KeyType;
use nlb_hw::hash_def as def;
#[cfg(test)]
use nlb_hw::FlowKey;

// The word assembly below assumes the canonical layout of the regmap: type, protocol, source
// port, destination port, two reserved bytes, source address, destination address.
const _: () = assert!(
    def::KEY_BYTES == 40
        && def::KEY_TYPE_OFFSET == 0
        && def::PROTOCOL_OFFSET == 1
        && def::SRC_PORT_OFFSET == 2
        && def::DST_PORT_OFFSET == 4
        && def::SRC_ADDR_OFFSET == 8
        && def::DST_ADDR_OFFSET == 24
);

/// The five little-endian 64-bit words of the canonical key (unused fields zero).
#[inline(always)]
fn words(t: KeyType, protocol: u8, src_port: u16, dst_port: u16, src: u128, dst: u128) -> [u64; 5] {
    let (proto, ports, src_used, dst_used) = match t {
        KeyType::Vip => (true, false, false, true),
        KeyType::Tuple1 => (false, false, true, false),
        KeyType::Tuple2 => (false, false, true, true),
        KeyType::Tuple3 => (true, false, true, true),
        KeyType::Tuple5 => (true, true, true, true),
    };
    let mut w0 = u64::from(t.value() as u8);
    if proto {
        w0 |= u64::from(protocol) << 8;
    }
    if ports {
        // Bytes 2..4 and 4..6 hold the ports big-endian.
        w0 |= u64::from(src_port.swap_bytes()) << 16 | u64::from(dst_port.swap_bytes()) << 32;
    }
    let src = if src_used { src } else { 0 };
    let dst = if dst_used { dst } else { 0 };
    [
        w0,
        ((src >> 64) as u64).swap_bytes(),
        (src as u64).swap_bytes(),
        ((dst >> 64) as u64).swap_bytes(),
        (dst as u64).swap_bytes(),
    ]
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc_words_sse42(w: &[u64; 5]) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64;
    let mut crc = u64::from(def::CRC_INIT);
    for &x in w {
        crc = _mm_crc32_u64(crc, x);
    }
    crc as u32 ^ def::CRC_XOROUT
}

fn crc_words_portable(w: &[u64; 5]) -> u32 {
    let mut b = [0u8; 40];
    for (chunk, x) in b.chunks_exact_mut(8).zip(w) {
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    nlb_hw::hash::crc32c(&b)
}

/// The flow hash of a key given by its fields (fields the type does not use are ignored).
#[inline]
pub fn key_hash(
    key_type: KeyType,
    protocol: u8,
    src_port: u16,
    dst_port: u16,
    src: u128,
    dst: u128,
) -> u32 {
    let w = words(key_type, protocol, src_port, dst_port, src, dst);
    let crc = {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("sse4.2")
                && def::CRC_POLY_REFLECTED == 0x82F6_3B78
            {
                // SAFETY: the CPU supports SSE4.2, checked just above.
                unsafe { crc_words_sse42(&w) }
            } else {
                crc_words_portable(&w)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            crc_words_portable(&w)
        }
    };
    nlb_hw::hash::mix(crc)
}

/// [`key_hash`] of a [`FlowKey`] (the same value as [`FlowKey::hash`]).
#[cfg(test)]
fn flow_key_hash(k: &FlowKey) -> u32 {
    key_hash(
        k.key_type, k.protocol, k.src_port, k.dst_port, k.src_addr, k.dst_addr,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift stream of keys with every field random.
    fn keys(n: usize) -> Vec<FlowKey> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        (0..n)
            .map(|i| FlowKey {
                key_type: KeyType::ALL[i % KeyType::ALL.len()],
                protocol: next() as u8,
                src_port: next() as u16,
                dst_port: next() as u16,
                src_addr: u128::from(next()) << 64 | u128::from(next()),
                dst_addr: u128::from(next()) << 64 | u128::from(next()),
            })
            .collect()
    }

    #[test]
    fn equals_the_regmap_hash_of_the_canonical_bytes() {
        for k in keys(20_000) {
            assert_eq!(flow_key_hash(&k), nlb_hw::flow_hash(&k.bytes()), "{k:?}");
            assert_eq!(
                nlb_hw::hash::mix(crc_words_portable(&words(
                    k.key_type, k.protocol, k.src_port, k.dst_port, k.src_addr, k.dst_addr
                ))),
                k.hash(),
                "portable path: {k:?}"
            );
        }
    }

    #[test]
    fn matches_the_known_answers() {
        for ka in nlb_hw::hash::KNOWN_ANSWERS {
            let bytes: Vec<u8> = (0..ka.key_hex.len() / 2)
                .map(|i| u8::from_str_radix(&ka.key_hex[2 * i..2 * i + 2], 16).expect("hex"))
                .collect();
            let mut b = [0u8; 40];
            b.copy_from_slice(&bytes);
            let port = |o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
            let addr = |o: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[o..o + 16]);
                u128::from_be_bytes(a)
            };
            let t = KeyType::from_value(u32::from(b[0])).expect("key type");
            let h = key_hash(t, b[1], port(2), port(4), addr(8), addr(24));
            assert_eq!(h, ka.hash, "{}", ka.what);
        }
    }
}
