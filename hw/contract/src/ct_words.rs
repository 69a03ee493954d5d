//! Connection-table entries packed and unpacked with shifts instead of the generated
//! bit-slice code: the host installs one entry per connection and the simulated NIC unpacks
//! one per conntrack WRITE, so both use these. Bit-identical to [`CtEntry::pack`] /
//! [`CtEntry::unpack`] (tested against them).

use crate::layouts::CtEntry;
use crate::LayoutError;

/// Bits `lsb .. lsb + width` (width <= 128) of packed words, word 0 = bits 31..0.
#[inline]
fn get_field(words: &[u32], lsb: usize, width: usize) -> u128 {
    let mut value = 0u128;
    let mut done = 0;
    while done < width {
        let bit = lsb + done;
        let (w, off) = (bit / 32, bit % 32);
        let n = (32 - off).min(width - done);
        let chunk = (words.get(w).copied().unwrap_or(0) >> off) & (u32::MAX >> (32 - n));
        value |= u128::from(chunk) << done;
        done += n;
    }
    value
}

/// ORs `width` bits of `value` into packed words from bit `lsb`.
#[inline]
fn put_field(words: &mut [u32], lsb: usize, width: usize, value: u128) {
    let mut done = 0;
    while done < width {
        let bit = lsb + done;
        let (w, off) = (bit / 32, bit % 32);
        let n = (32 - off).min(width - done);
        let chunk = ((value >> done) as u32) & (u32::MAX >> (32 - n));
        if let Some(word) = words.get_mut(w) {
            *word |= chunk << off;
        }
        done += n;
    }
}

/// [`CtEntry::unpack`] with shifts (every field is a plain integer, so any words decode; bits
/// past the layout are ignored).
pub fn unpack_ct(words: &[u32]) -> CtEntry {
    let f = |lsb, width| get_field(words, lsb, width);
    CtEntry {
        valid: f(CtEntry::VALID_LSB, CtEntry::VALID_WIDTH) != 0,
        protocol: f(CtEntry::PROTOCOL_LSB, CtEntry::PROTOCOL_WIDTH) as u8,
        src_port: f(CtEntry::SRC_PORT_LSB, CtEntry::SRC_PORT_WIDTH) as u16,
        dst_port: f(CtEntry::DST_PORT_LSB, CtEntry::DST_PORT_WIDTH) as u16,
        src_addr: f(CtEntry::SRC_ADDR_LSB, CtEntry::SRC_ADDR_WIDTH),
        dst_addr: f(CtEntry::DST_ADDR_LSB, CtEntry::DST_ADDR_WIDTH),
        backend: f(CtEntry::BACKEND_LSB, CtEntry::BACKEND_WIDTH) as u16,
        rule: f(CtEntry::RULE_LSB, CtEntry::RULE_WIDTH) as u16,
        flags: f(CtEntry::FLAGS_LSB, CtEntry::FLAGS_WIDTH) as u8,
        timestamp: f(CtEntry::TIMESTAMP_LSB, CtEntry::TIMESTAMP_WIDTH) as u32,
    }
}

/// [`CtEntry::pack`] with shifts; the same error for a field that does not fit (only `rule`
/// is narrower than its Rust type).
pub fn pack_ct(e: &CtEntry) -> Result<[u32; CtEntry::WORDS], LayoutError> {
    if u128::from(e.rule) > crate::layout::field_max(CtEntry::RULE_WIDTH) {
        return e.pack();
    }
    type E = CtEntry;
    let mut w = [0u32; E::WORDS];
    let mut put = |lsb, width, value| put_field(&mut w, lsb, width, value);
    put(E::VALID_LSB, E::VALID_WIDTH, u128::from(e.valid));
    put(E::PROTOCOL_LSB, E::PROTOCOL_WIDTH, u128::from(e.protocol));
    put(E::SRC_PORT_LSB, E::SRC_PORT_WIDTH, u128::from(e.src_port));
    put(E::DST_PORT_LSB, E::DST_PORT_WIDTH, u128::from(e.dst_port));
    put(E::SRC_ADDR_LSB, E::SRC_ADDR_WIDTH, e.src_addr);
    put(E::DST_ADDR_LSB, E::DST_ADDR_WIDTH, e.dst_addr);
    put(E::BACKEND_LSB, E::BACKEND_WIDTH, u128::from(e.backend));
    put(E::RULE_LSB, E::RULE_WIDTH, u128::from(e.rule));
    put(E::FLAGS_LSB, E::FLAGS_WIDTH, u128::from(e.flags));
    put(
        E::TIMESTAMP_LSB,
        E::TIMESTAMP_WIDTH,
        u128::from(e.timestamp),
    );
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry() -> impl Strategy<Value = CtEntry> {
        (
            (any::<bool>(), any::<u8>(), any::<u16>(), any::<u16>()),
            (any::<u128>(), any::<u128>()),
            (any::<u16>(), 0u16..1 << 12, any::<u8>(), any::<u32>()),
        )
            .prop_map(
                |((valid, protocol, src_port, dst_port), (src_addr, dst_addr), (b, r, f, t))| {
                    CtEntry {
                        valid,
                        protocol,
                        src_port,
                        dst_port,
                        src_addr,
                        dst_addr,
                        backend: b,
                        rule: r,
                        flags: f,
                        timestamp: t,
                    }
                },
            )
    }

    proptest! {
        /// The shift packer and unpacker agree with the generated (bit-slice) ones.
        #[test]
        fn fast_ct_packing_matches_the_generated_code(e in entry(), junk in any::<u32>()) {
            let words = e.pack().unwrap();
            prop_assert_eq!(pack_ct(&e).unwrap(), words);
            prop_assert_eq!(unpack_ct(&words), e);
            // Bits past the layout (word 11 above bit 365 - 352) are ignored.
            let mut dirty = words;
            dirty[CtEntry::WORDS - 1] |= junk << (CtEntry::WIDTH % 32);
            prop_assert_eq!(unpack_ct(&dirty), CtEntry::unpack(&dirty).unwrap());
        }
    }

    #[test]
    fn a_rule_too_wide_is_the_generated_error() {
        let wide = CtEntry {
            rule: 1 << CtEntry::RULE_WIDTH,
            ..CtEntry::default()
        };
        assert_eq!(pack_ct(&wide).unwrap_err(), wide.pack().unwrap_err());
    }
}
