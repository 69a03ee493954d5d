//! A small deterministic generator for the chip's analogue effects (timing jitter, which bits a
//! cut-short program or erase has reached), so that every simulation is reproducible by seed.

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for simulation noise.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..n` (`n` > 0; 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A byte whose bits are each set with probability `p_per_256 / 256`.
    pub fn bits_with_probability(&mut self, p_per_256: u32) -> u8 {
        let r = self.next_u64();
        let mut out = 0u8;
        for bit in 0..8 {
            if ((r >> (bit * 8)) & 0xFF) < u64::from(p_per_256) {
                out |= 1 << bit;
            }
        }
        out
    }
}
