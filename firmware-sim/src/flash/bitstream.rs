//! What the FPGA's configuration logic does with the bytes it reads from flash: find the sync
//! word, walk the configuration packets, refuse a bitstream built for another part (IDCODE),
//! note USR_ACCESS, and finish at DESYNC. Also builds small synthetic bitstreams for the
//! factory images and for tests.
//!
//! Packet format (Xilinx UG570, UltraScale configuration): big-endian 32-bit words after the
//! sync word `0xAA995566`. Type 1 = `001 op(2) reg(14) rsvd(2) count(11)`, type 2 =
//! `010 op(2) count(27)` continuing the register of the preceding type 1; op 2 = write.

use super::rng::SplitMix64;

/// The configuration sync word.
pub const SYNC_WORD: u32 = 0xAA99_5566;
/// A type-1 NOOP.
pub const NOOP: u32 = 0x2000_0000;
/// How far into an image the configuration logic looks for the sync word.
pub const SYNC_SEARCH_LIMIT: u32 = 4096;

/// Configuration registers the boot model looks at.
pub mod reg {
    /// Command register.
    pub const CMD: u32 = 0x04;
    /// Frame data input.
    pub const FDRI: u32 = 0x02;
    /// Device ID check.
    pub const IDCODE: u32 = 0x0C;
    /// USR_ACCESS (AXSS) value.
    pub const AXSS: u32 = 0x0D;
    /// Timer (fallback watchdog).
    pub const TIMER: u32 = 0x11;
    /// Warm boot start address.
    pub const WBSTAR: u32 = 0x10;
}

/// Commands of the CMD register the boot model acts on.
pub mod cmd {
    /// Write configuration data.
    pub const WCFG: u32 = 0x01;
    /// Reset CRC.
    pub const RCRC: u32 = 0x07;
    /// Begin the start-up sequence.
    pub const START: u32 = 0x05;
    /// End of configuration.
    pub const DESYNC: u32 = 0x0D;
}

/// A type-1 write header of `count` words to `register`.
pub const fn type1_write(register: u32, count: u32) -> u32 {
    0x3000_0000 | ((register & 0x3FFF) << 13) | (count & 0x7FF)
}

/// A type-2 write header of `count` words.
pub const fn type2_write(count: u32) -> u32 {
    0x5000_0000 | (count & 0x07FF_FFFF)
}

/// Why the configuration logic rejects an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No sync word in the first 4 KiB (erased or not a bitstream).
    #[error("no sync word")]
    NoSync,
    /// The bitstream's IDCODE is for another part (the FPGA's ID_ERROR).
    #[error("bitstream IDCODE {found:#010x} does not match the device {device:#010x}")]
    IdcodeMismatch {
        /// IDCODE in the bitstream (revision masked).
        found: u32,
        /// The device's (revision masked).
        device: u32,
    },
    /// A word that is no valid packet header.
    #[error("bad packet header {word:#010x} at byte {at:#x}")]
    BadPacket {
        /// The word.
        word: u32,
        /// Its offset in the image.
        at: u32,
    },
    /// The data ran out before DESYNC (a truncated bitstream).
    #[error("bitstream ends before DESYNC")]
    Truncated,
}

/// What a successful configuration learned from the bitstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigSummary {
    /// Offset of the sync word.
    pub sync_at: u32,
    /// IDCODE written by the bitstream (revision masked), if any.
    pub idcode: Option<u32>,
    /// USR_ACCESS written by the bitstream, if any.
    pub usr_access: Option<u32>,
    /// Offset just past the DESYNC command.
    pub end: u32,
}

/// The revision bits of an IDCODE, ignored when comparing parts.
pub const IDCODE_REVISION_MASK: u32 = 0xF000_0000;

/// Configures from `len` bytes given by `byte(offset)`, as the FPGA does for a device whose
/// IDCODE is `device_idcode`.
pub fn configure(
    len: u32,
    mut byte: impl FnMut(u32) -> u8,
    device_idcode: u32,
) -> Result<ConfigSummary, ConfigError> {
    let device = device_idcode & !IDCODE_REVISION_MASK;
    let mut word_at = |at: u32| -> Option<u32> {
        if at.checked_add(4)? > len {
            return None;
        }
        Some(u32::from_be_bytes([
            byte(at),
            byte(at + 1),
            byte(at + 2),
            byte(at + 3),
        ]))
    };
    // The logic shifts bytes in until the last four read equal the sync word.
    let mut window = 0u32;
    let mut at = 0u32;
    let search = len.min(SYNC_SEARCH_LIMIT);
    let sync_at = loop {
        if at >= search {
            return Err(ConfigError::NoSync);
        }
        let b = word_at(at & !3).map_or(0xFF, |w| w.to_be_bytes()[(at & 3) as usize]);
        window = (window << 8) | u32::from(b);
        at += 1;
        if at >= 4 && window == SYNC_WORD {
            break at - 4;
        }
    };
    let mut summary = ConfigSummary {
        sync_at,
        ..ConfigSummary::default()
    };
    let mut pos = sync_at + 4;
    let mut register = 0u32;
    loop {
        let header = word_at(pos).ok_or(ConfigError::Truncated)?;
        let header_at = pos;
        pos += 4;
        let (op, count) = match header >> 29 {
            1 => {
                register = (header >> 13) & 0x3FFF;
                ((header >> 27) & 3, header & 0x7FF)
            }
            2 => ((header >> 27) & 3, header & 0x07FF_FFFF),
            _ => {
                return Err(ConfigError::BadPacket {
                    word: header,
                    at: header_at,
                })
            }
        };
        if op != 2 || count == 0 {
            continue; // NOOP, reads, and a zero-length write (FDRI before a type-2)
        }
        if count == 1 {
            let value = word_at(pos).ok_or(ConfigError::Truncated)?;
            match register {
                reg::IDCODE => {
                    let found = value & !IDCODE_REVISION_MASK;
                    if found != device {
                        return Err(ConfigError::IdcodeMismatch { found, device });
                    }
                    summary.idcode = Some(found);
                }
                reg::AXSS => summary.usr_access = Some(value),
                reg::CMD if value == cmd::DESYNC => {
                    summary.end = pos + 4;
                    return Ok(summary);
                }
                _ => {}
            }
        }
        pos = pos
            .checked_add(count.checked_mul(4).ok_or(ConfigError::Truncated)?)
            .ok_or(ConfigError::Truncated)?;
        if pos > len {
            return Err(ConfigError::Truncated);
        }
    }
}

/// A small but well-formed bitstream for part `idcode`: dummy words, bus-width pattern, sync,
/// IDCODE, optional USR_ACCESS, `frame_words` pseudo-random frame words (from `seed`) and
/// DESYNC, as big-endian bytes like a Vivado `.bin`.
pub fn synthetic(idcode: u32, usr_access: Option<u32>, frame_words: u32, seed: u64) -> Vec<u8> {
    let mut words: Vec<u32> = vec![
        0xFFFF_FFFF,
        0xFFFF_FFFF,
        0x0000_00BB,
        0x1122_0044,
        0xFFFF_FFFF,
        0xFFFF_FFFF,
        SYNC_WORD,
        NOOP,
        type1_write(reg::TIMER, 1),
        0,
        type1_write(reg::WBSTAR, 1),
        0,
        type1_write(reg::CMD, 1),
        cmd::RCRC,
        NOOP,
        NOOP,
        type1_write(reg::IDCODE, 1),
        idcode,
    ];
    if let Some(v) = usr_access {
        words.extend([type1_write(reg::AXSS, 1), v]);
    }
    words.extend([
        type1_write(reg::CMD, 1),
        cmd::WCFG,
        NOOP,
        type1_write(reg::FDRI, 0),
        type2_write(frame_words),
    ]);
    let mut rng = SplitMix64::new(seed);
    words.extend((0..frame_words).map(|_| rng.next_u64() as u32));
    words.extend([
        type1_write(reg::CMD, 1),
        cmd::START,
        NOOP,
        type1_write(reg::CMD, 1),
        cmd::DESYNC,
        NOOP,
        NOOP,
    ]);
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const XCU280: u32 = 0x04B7_D093;

    fn run(b: &[u8], idcode: u32) -> Result<ConfigSummary, ConfigError> {
        configure(b.len() as u32, |i| b[i as usize], idcode)
    }

    #[test]
    fn header_words_match_vivado_output() {
        // Words as they appear in every UltraScale bitstream dump.
        assert_eq!(type1_write(reg::IDCODE, 1), 0x3001_8001);
        assert_eq!(type1_write(reg::CMD, 1), 0x3000_8001);
        assert_eq!(type1_write(reg::FDRI, 0), 0x3000_4000);
        assert_eq!(type1_write(reg::AXSS, 1), 0x3001_A001);
    }

    #[test]
    fn synthetic_configures_and_reports_identity() {
        let b = synthetic(0x1000_0000 | XCU280, Some(0xABCD_0001), 100, 1);
        let s = run(&b, XCU280).unwrap();
        assert_eq!(s.sync_at, 24);
        assert_eq!(s.idcode, Some(XCU280));
        assert_eq!(s.usr_access, Some(0xABCD_0001));
        assert_eq!(s.end as usize, b.len() - 8);
    }

    #[test]
    fn wrong_part_truncation_and_blank_are_refused() {
        let b = synthetic(XCU280, None, 64, 2);
        assert_eq!(
            run(&b, 0x04B5_7093),
            Err(ConfigError::IdcodeMismatch {
                found: XCU280,
                device: 0x04B5_7093
            })
        );
        for cut in [30usize, 100, b.len() - 12] {
            assert_eq!(
                run(&b[..cut], XCU280),
                Err(ConfigError::Truncated),
                "cut {cut}"
            );
        }
        assert_eq!(run(&[0xFF; 8192], XCU280), Err(ConfigError::NoSync));
        // Frames erased after the header: the type-2 count runs past the end or hits 0xFFFFFFFF.
        let mut erased_tail = b.clone();
        let n = erased_tail.len();
        erased_tail[n - 40..].fill(0xFF);
        assert!(run(&erased_tail, XCU280).is_err());
    }
}
