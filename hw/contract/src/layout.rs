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
    let mut done = 0;
    while done < width {
        let n = (width - done).min(64);
        let chunk = (value >> done) as u64;
        bits[lsb + done..lsb + done + n].store_le::<u64>(chunk);
        done += n;
    }
    Ok(())
}

/// Loads `bits[lsb..lsb + width]`.
pub fn get_bits(bits: &BitSlice<u32, Lsb0>, lsb: usize, width: usize) -> u128 {
    let mut value = 0u128;
    let mut done = 0;
    while done < width {
        let n = (width - done).min(64);
        let chunk: u64 = bits[lsb + done..lsb + done + n].load_le::<u64>();
        value |= u128::from(chunk) << done;
        done += n;
    }
    value
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
