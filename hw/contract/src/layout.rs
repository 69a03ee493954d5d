//! Bit-field access shared by every generated layout.

use bitvec::prelude::*;

/// Why an entry could not be packed or unpacked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A value does not fit its field: it would be truncated.
    #[error("{layout}.{field}: value {value:#x} does not fit in {width} bits (max {max:#x})")]
    Overflow {
        /// Layout name.
        layout: &'static str,
        /// Field name.
        field: &'static str,
        /// The value given.
        value: u128,
        /// Field width.
        width: usize,
        /// Largest value that fits.
        max: u128,
    },
    /// A field holds a value its enumeration does not define.
    #[error("{layout}.{field}: {value} is not a valid value (valid: {})", valid.join(", "))]
    BadEnum {
        /// Layout name.
        layout: &'static str,
        /// Field name.
        field: &'static str,
        /// The raw value.
        value: u32,
        /// Names of the valid values.
        valid: &'static [&'static str],
    },
    /// Not enough words to unpack from.
    #[error("{layout}: {words} words given, {needed} needed")]
    ShortInput {
        /// Layout name.
        layout: &'static str,
        /// Words given.
        words: usize,
        /// Words needed.
        needed: usize,
    },
}

/// Largest value of a `width`-bit field.
pub const fn field_max(width: usize) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// Stores `value` into `bits[lsb..lsb + width]`, refusing values that do not fit.
pub fn put_bits(
    bits: &mut BitSlice<u32, Lsb0>,
    lsb: usize,
    width: usize,
    value: u128,
    layout: &'static str,
    field: &'static str,
) -> Result<(), LayoutError> {
    let max = field_max(width);
    if value > max {
        return Err(LayoutError::Overflow {
            layout,
            field,
            value,
            width,
            max,
        });
    }
    check_range(bits.len(), lsb, width);
    if width == 0 {
        return Ok(());
    }
    let (words, head) = raw_words_mut(bits, lsb, width);
    let mut done = 0;
    while done < width {
        let at = head + done;
        let (word, shift) = (at / 32, at % 32);
        let n = (32 - shift).min(width - done);
        let mask = low_bits(n) << shift;
        let chunk = ((value >> done) as u32) << shift;
        words[word] = (words[word] & !mask) | (chunk & mask);
        done += n;
    }
    Ok(())
}

/// Loads `bits[lsb..lsb + width]`.
pub fn get_bits(bits: &BitSlice<u32, Lsb0>, lsb: usize, width: usize) -> u128 {
    check_range(bits.len(), lsb, width);
    if width == 0 {
        return 0;
    }
    let (words, head) = raw_words(bits, lsb, width);
    let mut value = 0u128;
    let mut done = 0;
    while done < width {
        let at = head + done;
        let (word, shift) = (at / 32, at % 32);
        let n = (32 - shift).min(width - done);
        value |= u128::from((words[word] >> shift) & low_bits(n)) << done;
        done += n;
    }
    value
}

/// The `n` low bits of a word (`n` in 1..=32).
#[inline]
fn low_bits(n: usize) -> u32 {
    u32::MAX >> (32 - n)
}

/// Checks that `lsb..lsb + width` lies inside `bits` and holds at most 128 bits, as bitvec's
/// indexing and the `u128` values do.
#[inline]
fn check_range(len: usize, lsb: usize, width: usize) {
    assert!(
        width <= 128 && lsb.checked_add(width).is_some_and(|end| end <= len),
        "bits {lsb}..{lsb}+{width} of a {len}-bit slice"
    );
}

/// The words under `bits` from the one holding bit `lsb` on, and the position of bit `lsb`
/// in the first of them; the field `lsb..lsb + width` is inside `bits` and not empty
/// ([`check_range`]). Fields are read a word at a time with shifts: bitvec's generic `load_le`
/// walks its domain per call, several times the cost on the event and table paths.
#[inline]
fn raw_words(bits: &BitSlice<u32, Lsb0>, lsb: usize, width: usize) -> (&[u32], usize) {
    assert!(width > 0 && lsb + width <= bits.len());
    let head = usize::from(bits.as_bitptr().bit().into_inner()) + lsb;
    let len = (head + width).div_ceil(32);
    let first = bits.as_bitptr().pointer();
    // SAFETY: `bits` starts at bit `head - lsb` of the element `first` points to and covers
    // `lsb + width` bits or more, at least one (asserted above), so each of the `len` elements
    // from `first` holds some of its bits: all are borrowed shared for the slice's lifetime.
    // `BitSlice<u32, _>` (not an alias type) is never split so that another handle writes
    // those elements meanwhile, and every `u32` is valid. `len` may be 0 (nothing is read).
    let all = unsafe { std::slice::from_raw_parts(first, len) };
    (&all[head / 32..], head % 32)
}

/// [`raw_words`] for writing.
#[inline]
fn raw_words_mut(bits: &mut BitSlice<u32, Lsb0>, lsb: usize, width: usize) -> (&mut [u32], usize) {
    assert!(width > 0 && lsb + width <= bits.len());
    let head = usize::from(bits.as_bitptr().bit().into_inner()) + lsb;
    let len = (head + width).div_ceil(32);
    let first = bits.as_mut_bitptr().pointer();
    // SAFETY: as in `raw_words`, and the borrow is exclusive: a `&mut BitSlice<u32, _>` of a
    // non-alias element type owns its elements alone (bitvec's splits give alias types), so
    // the bits outside the field, which `put_bits` writes back unchanged, are nobody else's
    // to write meanwhile.
    let all = unsafe { std::slice::from_raw_parts_mut(first, len) };
    (&mut all[head / 32..], head % 32)
}

/// A bit field of a 32-bit register (`fields` of a register in `hw/regmap.toml`): every
/// shift and mask of a register's bits goes through one of these generated constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegField {
    /// First bit.
    pub lsb: u32,
    /// Bits (1..=32).
    pub width: u32,
}

impl RegField {
    /// Largest value the field holds.
    pub const fn max(self) -> u32 {
        u32::MAX >> (32 - self.width)
    }

    /// The field's bits in place.
    pub const fn mask(self) -> u32 {
        self.max() << self.lsb
    }

    /// The field's value in `word`.
    pub const fn get(self, word: u32) -> u32 {
        (word >> self.lsb) & self.max()
    }

    /// The field's bits of `word`, in place (the others cleared).
    pub const fn bits(self, word: u32) -> u32 {
        word & self.mask()
    }

    /// Whether `value` fits the field.
    pub const fn fits(self, value: u32) -> bool {
        value <= self.max()
    }

    /// `value` placed in the field (the other bits 0); `None` if it does not fit.
    pub const fn put(self, value: u32) -> Option<u32> {
        if self.fits(value) {
            Some(value << self.lsb)
        } else {
            None
        }
    }

    /// A one-bit field set or clear, in place.
    pub const fn flag(self, on: bool) -> u32 {
        if on {
            1 << self.lsb
        } else {
            0
        }
    }

    /// `word` with the field replaced by `value`; `None` if it does not fit.
    pub const fn set(self, word: u32, value: u32) -> Option<u32> {
        match self.put(value) {
            Some(v) => Some((word & !self.mask()) | v),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// bitvec's own field access, chunk by chunk: the independent reading of a field.
    fn bitvec_get(bits: &BitSlice<u32, Lsb0>, lsb: usize, width: usize) -> u128 {
        let mut value = 0u128;
        for (k, chunk) in bits[lsb..lsb + width].chunks(64).enumerate() {
            value |= u128::from(chunk.load_le::<u64>()) << (64 * k);
        }
        value
    }

    proptest! {
        /// Any field of any sub-slice (every start bit within its first word, so slices
        /// that begin mid-word as nested layouts do), widths 0..=128, next to random bits
        /// that must stay as they were.
        #[test]
        fn fields_read_and_write_as_bitvec_does(
            words in proptest::collection::vec(any::<u32>(), 8),
            start in 0usize..40,
            lsb in 0usize..100,
            width in 0usize..=128,
            value in any::<u128>(),
        ) {
            let mut mine = words.clone();
            let mut theirs = words.clone();
            let end = words.len() * 32;
            prop_assume!(start + lsb + width <= end);
            let v = value & field_max(width);
            let sub = &mut mine.view_bits_mut::<Lsb0>()[start..];
            prop_assert_eq!(get_bits(sub, lsb, width), bitvec_get(&theirs.view_bits::<Lsb0>()[start..], lsb, width));
            put_bits(sub, lsb, width, v, "t", "f").expect("fits");
            let field = &mut theirs.view_bits_mut::<Lsb0>()[start + lsb..start + lsb + width];
            for (k, chunk) in field.chunks_mut(64).enumerate() {
                chunk.store_le::<u64>((v >> (64 * k)) as u64);
            }
            prop_assert_eq!(&mine, &theirs);
            prop_assert_eq!(get_bits(&mine.view_bits::<Lsb0>()[start..], lsb, width), v);
        }
    }

    #[test]
    #[should_panic(expected = "bits 30..30+3 of a 32-bit slice")]
    fn a_field_past_the_slice_is_refused() {
        let w = [0u32; 1];
        get_bits(w.view_bits::<Lsb0>(), 30, 3);
    }

    #[test]
    fn a_value_too_wide_is_refused_and_nothing_written() {
        let mut w = [0u32; 2];
        let e = put_bits(w.view_bits_mut::<Lsb0>(), 4, 5, 32, "t", "f").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.f: value 0x20 does not fit in 5 bits (max 0x1f)"
        );
        assert_eq!(w, [0, 0]);
    }
}
