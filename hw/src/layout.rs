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
