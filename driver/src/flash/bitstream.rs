//! Bitstream files: Xilinx `.bit` (a header of tagged fields, then the configuration data) and
//! raw `.bin` (the configuration data alone, as it goes into flash).
//!
//! `.bit` header (the format Vivado writes):
//!
//! ```text
//! 00 09  0f f0 0f f0 0f f0 0f f0 00      field 1: 9 fixed bytes
//! 00 01  61                              field 2: 'a'
//! u16 len, design name\0                 "top;UserID=0XFFFFFFFF;Version=2023.2"
//! 'b' u16 len, part\0                    "xcu280-fsvh2892-2L-e"
//! 'c' u16 len, date\0                    "2024/05/01"
//! 'd' u16 len, time\0                    "12:34:56"
//! 'e' u32 len, configuration data        what is written to flash
//! ```
//!
//! The configuration data must hold the sync word `0xAA995566` in its first 4 KiB, and its
//! packets (UG570) are walked to find the IDCODE the bitstream was built for and its
//! USR_ACCESS value: the part check compares them with the card's firmware-ID block.

/// The configuration sync word.
pub const SYNC_WORD: [u8; 4] = [0xAA, 0x99, 0x55, 0x66];
/// How far into the data the sync word must appear.
pub const SYNC_SEARCH_LIMIT: usize = 4096;
/// The fixed first 13 bytes of a `.bit` file.
pub const BIT_MAGIC: [u8; 13] = [
    0x00, 0x09, 0x0F, 0xF0, 0x0F, 0xF0, 0x0F, 0xF0, 0x0F, 0xF0, 0x00, 0x00, 0x01,
];

/// Revision bits of an IDCODE (ignored when comparing parts).
pub const IDCODE_REVISION_MASK: u32 = 0xF000_0000;

/// Parts the part check knows by name: (device prefix of the part name, IDCODE without
/// revision). Source: the devices' JTAG IDCODEs (UG570 table 1-4, and the Alveo parts).
pub const KNOWN_PARTS: &[(&str, u32)] = &[
    ("xcu50", 0x04B7_7093),
    ("xcu200", 0x04B3_7093),
    ("xcu250", 0x04B5_7093),
    ("xcu280", 0x04B7_D093),
    // The U55C's part has the U280's IDCODE (same silicon); the board id tells them apart.
    ("xcu55c", 0x04B7_D093),
    ("xcvu3p", 0x04B3_9093),
    ("xcvu5p", 0x04B2_B093),
    ("xcvu7p", 0x04B2_9093),
    ("xcvu9p", 0x04B3_1093),
    ("xcvu11p", 0x04B4_9093),
    ("xcvu13p", 0x04B5_1093),
    ("xcku3p", 0x04A6_3093),
    ("xcku5p", 0x04A6_2093),
    ("xcku15p", 0x04A5_6093),
];

/// The IDCODE of a part name such as `xcu280-fsvh2892-2L-e` (or `xcu280`), if known.
pub fn idcode_of_part(part: &str) -> Option<u32> {
    let device = part.split('-').next()?.trim().to_ascii_lowercase();
    let device = if device.starts_with("xc") {
        device
    } else {
        format!("xc{device}")
    };
    KNOWN_PARTS
        .iter()
        .find(|(name, _)| *name == device)
        .map(|&(_, id)| id)
}

/// The part name of an IDCODE, if known.
pub fn part_of_idcode(idcode: u32) -> Option<&'static str> {
    let id = idcode & !IDCODE_REVISION_MASK;
    KNOWN_PARTS
        .iter()
        .find(|(_, code)| *code == id)
        .map(|&(name, _)| name)
}

/// Why a file is not a usable bitstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitstreamError {
    /// The file is empty.
    #[error("the file is empty")]
    Empty,
    /// The `.bit` header ends early.
    #[error(".bit header truncated at byte {at} while reading {what}")]
    Truncated {
        /// Byte offset.
        at: usize,
        /// The field.
        what: &'static str,
    },
    /// An unexpected byte where a field key belongs.
    #[error(
        ".bit header: unexpected field key {key:#04x} at byte {at} (expected 'b', 'c', 'd' or 'e')"
    )]
    BadKey {
        /// Byte offset.
        at: usize,
        /// The byte found.
        key: u8,
    },
    /// A header field is missing.
    #[error(".bit header has no '{0}' field")]
    MissingField(char),
    /// Bytes after the configuration data.
    #[error(".bit file has {0} bytes after the configuration data its header announces")]
    TrailingBytes(usize),
    /// No sync word.
    #[error(
        "no configuration sync word AA 99 55 66 in the first 4 KiB of the data: not a Xilinx \
         bitstream{hint}"
    )]
    NoSync {
        /// A guess at what went wrong.
        hint: &'static str,
    },
    /// A configuration packet the FPGA would refuse.
    #[error("malformed configuration packet {word:#010x} at byte {at:#x} of the data")]
    BadPacket {
        /// The header word.
        word: u32,
        /// Its offset in the configuration data.
        at: usize,
    },
    /// The packets run past the end of the data.
    #[error("configuration data truncated: a packet at byte {at:#x} runs past the end")]
    PacketsTruncated {
        /// Offset of the packet.
        at: usize,
    },
}

/// The `.bit` header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitHeader {
    /// Design name (field 'a' up to the first `;`).
    pub design: String,
    /// The whole 'a' field (`top;UserID=0XFFFFFFFF;Version=2023.2`).
    pub design_field: String,
    /// `UserID=` from the 'a' field, if present.
    pub user_id: Option<u32>,
    /// `Version=` (tool version) from the 'a' field, if present.
    pub tool_version: Option<String>,
    /// Part name (`xcu280-fsvh2892-2L-e`).
    pub part: String,
    /// Build date as written (`2024/05/01`).
    pub date: String,
    /// Build time as written (`12:34:56`).
    pub time: String,
    /// Bytes of configuration data announced by the 'e' field.
    pub data_len: u32,
}

/// Which file format the bytes were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.bit`: header + data.
    Bit,
    /// `.bin`: data only.
    Bin,
}

/// A parsed bitstream: what goes into flash and what it says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitstream {
    /// The format read.
    pub format: Format,
    /// The `.bit` header, for `.bit` files.
    pub header: Option<BitHeader>,
    /// The configuration data (the bytes written to flash).
    pub data: Vec<u8>,
    /// Offset of the sync word in `data`.
    pub sync_at: usize,
    /// IDCODE written by the packets (revision masked), if any.
    pub idcode: Option<u32>,
    /// USR_ACCESS written by the packets, if any.
    pub usr_access: Option<u32>,
    /// True when the packets end with DESYNC (a complete bitstream).
    pub has_desync: bool,
}

impl Bitstream {
    /// Parses a `.bit` (recognised by its fixed first bytes) or else a raw `.bin`.
    pub fn parse(bytes: Vec<u8>) -> Result<Bitstream, BitstreamError> {
        if bytes.is_empty() {
            return Err(BitstreamError::Empty);
        }
        if bytes.starts_with(&BIT_MAGIC) {
            let (header, data_at) = parse_bit_header(&bytes)?;
            let end = data_at + header.data_len as usize;
            let mut data = bytes;
            data.truncate(end);
            data.drain(..data_at);
            Self::from_data(Format::Bit, Some(header), data)
        } else {
            Self::from_data(Format::Bin, None, bytes)
        }
    }

    fn from_data(
        format: Format,
        header: Option<BitHeader>,
        data: Vec<u8>,
    ) -> Result<Bitstream, BitstreamError> {
        let sync_at = find_sync(&data)?;
        let scan = scan_packets(&data, sync_at + 4)?;
        Ok(Bitstream {
            format,
            header,
            data,
            sync_at,
            idcode: scan.idcode,
            usr_access: scan.usr_access,
            has_desync: scan.desync,
        })
    }

    /// The part the bitstream targets: IDCODE from the packets, else from the header's part
    /// name.
    pub fn target_idcode(&self) -> Option<u32> {
        self.idcode
            .or_else(|| self.header.as_ref().and_then(|h| idcode_of_part(&h.part)))
    }

    /// The design name, if the file has a header.
    pub fn design(&self) -> Option<&str> {
        self.header.as_ref().map(|h| h.design.as_str())
    }
}

fn parse_bit_header(b: &[u8]) -> Result<(BitHeader, usize), BitstreamError> {
    let mut at = BIT_MAGIC.len();
    let u16_at = |at: usize, what| {
        b.get(at..at + 2)
            .map(|s| usize::from(u16::from_be_bytes([s[0], s[1]])))
            .ok_or(BitstreamError::Truncated { at, what })
    };
    // Field 2's content is the key 'a'; then the design name with a 16-bit length.
    match b.get(at) {
        Some(b'a') => at += 1,
        Some(&key) => return Err(BitstreamError::BadKey { at, key }),
        None => {
            return Err(BitstreamError::Truncated {
                at,
                what: "key 'a'",
            })
        }
    }
    let string = |at: usize, len: usize, what| -> Result<String, BitstreamError> {
        let s = b
            .get(at..at + len)
            .ok_or(BitstreamError::Truncated { at, what })?;
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        Ok(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    let len = u16_at(at, "design name length")?;
    let design_field = string(at + 2, len, "design name")?;
    at += 2 + len;
    let (mut part, mut date, mut time, mut data) = (None, None, None, None);
    while data.is_none() {
        let key = *b.get(at).ok_or(BitstreamError::Truncated {
            at,
            what: "field key",
        })?;
        match key {
            b'b' | b'c' | b'd' => {
                let len = u16_at(at + 1, "field length")?;
                let value = string(at + 3, len, "field")?;
                match key {
                    b'b' => part = Some(value),
                    b'c' => date = Some(value),
                    _ => time = Some(value),
                }
                at += 3 + len;
            }
            b'e' => {
                let s = b.get(at + 1..at + 5).ok_or(BitstreamError::Truncated {
                    at: at + 1,
                    what: "data length",
                })?;
                let len = u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
                at += 5;
                let available = b.len() - at;
                if (len as usize) > available {
                    return Err(BitstreamError::Truncated {
                        at: b.len(),
                        what: "configuration data",
                    });
                }
                if available > len as usize {
                    return Err(BitstreamError::TrailingBytes(available - len as usize));
                }
                data = Some(len);
            }
            key => return Err(BitstreamError::BadKey { at, key }),
        }
    }
    let mut parts = design_field.split(';');
    let design = parts.next().unwrap_or_default().to_string();
    let (mut user_id, mut tool_version) = (None, None);
    for kv in parts {
        if let Some(v) = kv.strip_prefix("UserID=") {
            let hex = v.trim_start_matches("0X").trim_start_matches("0x");
            user_id = u32::from_str_radix(hex, 16).ok();
        } else if let Some(v) = kv.strip_prefix("Version=") {
            tool_version = Some(v.to_string());
        }
    }
    let header = BitHeader {
        design,
        design_field,
        user_id,
        tool_version,
        part: part.ok_or(BitstreamError::MissingField('b'))?,
        date: date.ok_or(BitstreamError::MissingField('c'))?,
        time: time.ok_or(BitstreamError::MissingField('d'))?,
        data_len: data.ok_or(BitstreamError::MissingField('e'))?,
    };
    Ok((header, at))
}

fn find_sync(data: &[u8]) -> Result<usize, BitstreamError> {
    let window = &data[..data.len().min(SYNC_SEARCH_LIMIT)];
    if let Some(at) = window.windows(4).position(|w| w == SYNC_WORD) {
        return Ok(at);
    }
    let hint = if window.windows(4).any(|w| w == [0x66, 0x55, 0x99, 0xAA]) {
        " (the sync word appears byte-swapped: a file for a 32-bit SelectMAP/BPI interface?)"
    } else if window.windows(4).any(|w| w == [0x55, 0x99, 0xAA, 0x66]) {
        " (the sync word appears bit-reversed in each byte: a file prepared for another interface?)"
    } else if window.iter().all(|&b| b == 0xFF) {
        " (only 0xFF: an erased flash dump?)"
    } else {
        ""
    };
    Err(BitstreamError::NoSync { hint })
}

struct PacketScan {
    idcode: Option<u32>,
    usr_access: Option<u32>,
    desync: bool,
}

const REG_CMD: u32 = 0x04;
const REG_IDCODE: u32 = 0x0C;
const REG_AXSS: u32 = 0x0D;
const CMD_DESYNC: u32 = 0x0D;

/// Walks type-1/type-2 packets from `start` until DESYNC or the end of the data.
fn scan_packets(data: &[u8], start: usize) -> Result<PacketScan, BitstreamError> {
    let word = |at: usize| {
        data.get(at..at + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    };
    let mut scan = PacketScan {
        idcode: None,
        usr_access: None,
        desync: false,
    };
    let mut at = start;
    let mut register = 0;
    while let Some(header) = word(at) {
        let (op, count) = match header >> 29 {
            1 => {
                register = (header >> 13) & 0x3FFF;
                ((header >> 27) & 3, (header & 0x7FF) as usize)
            }
            2 => ((header >> 27) & 3, (header & 0x07FF_FFFF) as usize),
            _ => return Err(BitstreamError::BadPacket { word: header, at }),
        };
        let payload = at + 4;
        let end = payload
            .checked_add(count.saturating_mul(4))
            .filter(|&e| e <= data.len())
            .ok_or(BitstreamError::PacketsTruncated { at })?;
        if op == 2 && count == 1 {
            let value = word(payload).ok_or(BitstreamError::PacketsTruncated { at })?;
            match register {
                REG_IDCODE => scan.idcode = Some(value & !IDCODE_REVISION_MASK),
                REG_AXSS => scan.usr_access = Some(value),
                REG_CMD if value == CMD_DESYNC => {
                    scan.desync = true;
                    return Ok(scan);
                }
                _ => {}
            }
        }
        at = end;
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-assembled bitstream body: sync, IDCODE 0x14B7D093, AXSS 0xCAFE0001, FDRI of
    /// 2 words, DESYNC.
    fn body() -> Vec<u8> {
        let words: [u32; 18] = [
            0xFFFF_FFFF,
            0x0000_00BB,
            0x1122_0044,
            0xFFFF_FFFF,
            0xAA99_5566,
            0x2000_0000,
            0x3001_8001,
            0x14B7_D093,
            0x3001_A001,
            0xCAFE_0001,
            0x3000_4000,
            0x5000_0002,
            0x1234_5678,
            0x9ABC_DEF0,
            0x3000_8001,
            0x0000_000D,
            0x2000_0000,
            0x2000_0000,
        ];
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    fn bit_file(data: &[u8]) -> Vec<u8> {
        let mut f = BIT_MAGIC.to_vec();
        f.push(b'a');
        let name = b"nlb_top;UserID=0XFFFFFFFF;Version=2023.2\0";
        f.extend((name.len() as u16).to_be_bytes());
        f.extend(name);
        for (key, value) in [
            (b'b', &b"xcu280-fsvh2892-2L-e\0"[..]),
            (b'c', b"2024/05/01\0"),
            (b'd', b"12:34:56\0"),
        ] {
            f.push(key);
            f.extend((value.len() as u16).to_be_bytes());
            f.extend(value);
        }
        f.push(b'e');
        f.extend((data.len() as u32).to_be_bytes());
        f.extend(data);
        f
    }

    #[test]
    fn bit_header_fields() {
        let b = Bitstream::parse(bit_file(&body())).unwrap();
        let h = b.header.as_ref().unwrap();
        assert_eq!(b.format, Format::Bit);
        assert_eq!(h.design, "nlb_top");
        assert_eq!(h.user_id, Some(0xFFFF_FFFF));
        assert_eq!(h.tool_version.as_deref(), Some("2023.2"));
        assert_eq!(h.part, "xcu280-fsvh2892-2L-e");
        assert_eq!(h.date, "2024/05/01");
        assert_eq!(h.time, "12:34:56");
        assert_eq!(h.data_len, 72);
        assert_eq!(b.data, body());
        assert_eq!(b.sync_at, 16);
        assert_eq!(b.idcode, Some(0x04B7_D093));
        assert_eq!(b.usr_access, Some(0xCAFE_0001));
        assert!(b.has_desync);
    }

    #[test]
    fn raw_bin_and_part_names() {
        let b = Bitstream::parse(body()).unwrap();
        assert_eq!(b.format, Format::Bin);
        assert!(b.header.is_none());
        assert_eq!(b.target_idcode(), Some(0x04B7_D093));
        assert_eq!(idcode_of_part("xcu250-figd2104-2L-e"), Some(0x04B5_7093));
        assert_eq!(idcode_of_part("XCVU9P"), Some(0x04B3_1093));
        assert_eq!(idcode_of_part("u280-fsvh2892"), Some(0x04B7_D093));
        assert_eq!(idcode_of_part("xc7a35t-csg324"), None);
        assert_eq!(part_of_idcode(0x14B7_D093), Some("xcu280"));
    }

    #[test]
    fn refusals() {
        assert_eq!(Bitstream::parse(vec![]), Err(BitstreamError::Empty));
        assert!(matches!(
            Bitstream::parse(vec![0xFF; 5000]),
            Err(BitstreamError::NoSync { hint }) if hint.contains("erased")
        ));
        let swapped: Vec<u8> = body()
            .chunks(4)
            .flat_map(|w| w.iter().rev().copied())
            .collect();
        assert!(matches!(
            Bitstream::parse(swapped),
            Err(BitstreamError::NoSync { hint }) if hint.contains("byte-swapped")
        ));
        let mut f = bit_file(&body());
        f.push(0);
        assert_eq!(Bitstream::parse(f), Err(BitstreamError::TrailingBytes(1)));
        let f = bit_file(&body());
        for cut in [14, 20, 60, 80, f.len() - 1] {
            assert!(
                matches!(
                    Bitstream::parse(f[..cut].to_vec()),
                    Err(BitstreamError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        // The FDRI type-2 announces more words than there are.
        let mut short = body();
        short[44..48].copy_from_slice(&0x5000_0100u32.to_be_bytes());
        assert!(matches!(
            Bitstream::parse(short),
            Err(BitstreamError::PacketsTruncated { at: 44 })
        ));
        // A type-3 header after sync.
        let mut bad = body();
        bad[20..24].copy_from_slice(&0x6000_0000u32.to_be_bytes());
        assert_eq!(
            Bitstream::parse(bad),
            Err(BitstreamError::BadPacket {
                word: 0x6000_0000,
                at: 20
            })
        );
    }
}
