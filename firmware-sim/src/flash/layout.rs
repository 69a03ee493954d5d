//! The multiboot layout of the configuration flash, shared by the boot model and the host's
//! flash programmer.
//!
//! The flash is split into two equal segments: segment 0 holds the **fallback** (golden) image
//! the FPGA loads at power-on, segment 1 the **user** image it then loads by multiboot. Each
//! image starts at its segment's first byte (where the FPGA's configuration logic looks for
//! the sync word). The last 4 KiB subsector of each segment holds a [`SlotMarker`]: image
//! length, CRC-32 and identity, protected by its own CRC. The programmer erases the marker
//! first and writes it last, after the whole image has been read back and verified, so an
//! image whose flashing was interrupted has no valid marker and is never booted: the boot
//! logic falls back to segment 0.
//!
//! ```text
//! 0x0000_0000  segment 0: fallback image ............ | marker (last 4 KiB)
//! size / 2     segment 1: user image ................ | marker (last 4 KiB)
//! ```

use nlb_hw::flash_def::{self, Marker};

/// Bytes of one erase subsector; the marker owns one.
pub const SUBSECTOR: u32 = 4096;
/// The marker area of every segment is one erase subsector (erased alone before a flash).
const _: () = assert!(flash_def::MARKER_AREA == SUBSECTOR);

/// Bytes of one erase sector.
pub const SECTOR: u32 = 65536;
/// Bytes of one program page.
pub const PAGE: u32 = 256;
/// Number of multiboot segments (`[flash]` of `hw/regmap.toml`).
pub const SEGMENTS: u32 = flash_def::SEGMENTS;
/// The marker's magic bytes.
pub const MARKER_MAGIC: [u8; 8] = flash_def::MARKER_MAGIC;
/// The marker format version written by this code.
pub const MARKER_VERSION: u32 = flash_def::MARKER_VERSION;
/// Bytes of an encoded marker.
pub const MARKER_LEN: usize = Marker::WORDS * 4;
/// Bytes of the design-name field of the marker.
pub const MARKER_NAME_LEN: usize = Marker::DESIGN_WIDTH / 8;
/// Bytes of the marker covered by its own CRC (everything before the `crc` field).
const MARKER_CRC_AT: usize = Marker::CRC_LSB / 8;

/// A multiboot slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// Segment 0: the golden image loaded at power-on and whenever the user image fails.
    Fallback,
    /// Segment 1: the image normally running.
    User,
}

impl Slot {
    /// The segment index.
    pub fn segment(self) -> u32 {
        match self {
            Slot::Fallback => 0,
            Slot::User => 1,
        }
    }

    /// `fallback` or `user`.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Fallback => "fallback",
            Slot::User => "user",
        }
    }
}

/// Where the segments of a flash of a given size lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of the whole flash.
    pub flash_size: u64,
}

impl Layout {
    /// The layout of a flash of `flash_size` bytes (a power of two of at least 128 KiB).
    pub fn new(flash_size: u64) -> Self {
        Self { flash_size }
    }

    /// Bytes of one segment.
    pub fn segment_size(&self) -> u32 {
        (self.flash_size / u64::from(SEGMENTS)) as u32
    }

    /// First byte of `slot`'s segment (where its image starts).
    pub fn base(&self, slot: Slot) -> u32 {
        slot.segment() * self.segment_size()
    }

    /// Address of `slot`'s marker (the first byte of its segment's marker area, the last
    /// subsector).
    pub fn marker_addr(&self, slot: Slot) -> u32 {
        self.base(slot) + self.segment_size() - flash_def::MARKER_AREA
    }

    /// The largest image a slot holds.
    pub fn max_image_len(&self) -> u32 {
        self.segment_size() - flash_def::MARKER_AREA
    }

    /// The slot whose segment begins at `addr`, if any.
    pub fn slot_at(&self, addr: u32) -> Option<Slot> {
        [Slot::Fallback, Slot::User]
            .into_iter()
            .find(|s| self.base(*s) == addr)
    }
}

/// The validity marker of a slot: written last, it vouches for the image before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMarker {
    /// Bytes of the image, from the segment base.
    pub image_len: u32,
    /// CRC-32 (ISO-HDLC, as zlib and `crc32(1)`) of those bytes.
    pub image_crc32: u32,
    /// IDCODE the bitstream was built for (without revision), 0 when unknown.
    pub idcode: u32,
    /// USR_ACCESS word of the bitstream, if it sets one.
    pub usr_access: Option<u32>,
    /// When it was written, seconds since the Unix epoch (informational).
    pub written_at: u32,
    /// Design name from the `.bit` header (truncated to 24 bytes), empty for a raw `.bin`.
    pub design: String,
}

/// Why bytes read from a marker location are not a valid marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// The subsector is erased: no image was ever completed here (or flashing was interrupted).
    #[error("no marker (erased)")]
    Erased,
    /// The magic bytes are wrong.
    #[error("no marker (bad magic)")]
    BadMagic,
    /// Written by a newer tool.
    #[error("marker version {0} is not understood")]
    Version(u32),
    /// The marker's own CRC does not match (partially written or partially erased).
    #[error("marker CRC mismatch (interrupted write or erase)")]
    Crc,
}

impl SlotMarker {
    /// The bytes written to flash: the `slot_marker` layout of `hw/regmap.toml` as
    /// little-endian words, its CRC over the bytes before it.
    pub fn encode(&self) -> [u8; MARKER_LEN] {
        let mut design = [0u8; MARKER_NAME_LEN];
        let name = self.design.as_bytes();
        let n = name.len().min(MARKER_NAME_LEN);
        design[..n].copy_from_slice(&name[..n]);
        let mut m = Marker {
            magic: MARKER_MAGIC,
            version: MARKER_VERSION,
            image_len: self.image_len,
            image_crc32: self.image_crc32,
            idcode: self.idcode,
            has_usr_access: self.usr_access.is_some(),
            reserved: 0,
            usr_access: self.usr_access.unwrap_or(0),
            written_at: self.written_at,
            design,
            crc: 0,
        };
        let bytes = marker_bytes(&m);
        m.crc = crc32(&bytes[..MARKER_CRC_AT]);
        marker_bytes(&m)
    }

    /// Decodes and checks the bytes at a marker location.
    pub fn decode(b: &[u8; MARKER_LEN]) -> Result<Self, MarkerError> {
        if b.iter().all(|&x| x == 0xFF) {
            return Err(MarkerError::Erased);
        }
        let words: Vec<u32> = b
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        // Every field is a plain integer or bytes: any words unpack.
        let m = Marker::unpack(&words).map_err(|_| MarkerError::BadMagic)?;
        if m.magic != MARKER_MAGIC {
            return Err(MarkerError::BadMagic);
        }
        if m.crc != crc32(&b[..MARKER_CRC_AT]) {
            return Err(MarkerError::Crc);
        }
        if m.version != MARKER_VERSION {
            return Err(MarkerError::Version(m.version));
        }
        let end = m
            .design
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(MARKER_NAME_LEN);
        Ok(Self {
            image_len: m.image_len,
            image_crc32: m.image_crc32,
            idcode: m.idcode,
            usr_access: m.has_usr_access.then_some(m.usr_access),
            written_at: m.written_at,
            design: String::from_utf8_lossy(&m.design[..end]).into_owned(),
        })
    }
}

/// A marker's bytes: its words, little-endian.
fn marker_bytes(m: &Marker) -> [u8; MARKER_LEN] {
    // Every field fits (reserved is 0, the rest are as wide as their Rust types).
    let words = m.pack().unwrap_or_default();
    let mut b = [0u8; MARKER_LEN];
    for (out, w) in b.chunks_exact_mut(4).zip(words) {
        out.copy_from_slice(&w.to_le_bytes());
    }
    b
}

const CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Running CRC-32 (ISO-HDLC: reflected polynomial 0xEDB88320, init and xor-out all ones).
#[derive(Debug, Clone, Copy)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Self {
        Self(0xFFFF_FFFF)
    }
}

impl Crc32 {
    /// A fresh CRC.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes.
    pub fn update(&mut self, data: &[u8]) {
        let mut c = self.0;
        for &b in data {
            c = CRC32_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
        }
        self.0 = c;
    }

    /// The CRC of everything fed so far.
    pub fn finish(&self) -> u32 {
        !self.0
    }
}

/// CRC-32 (ISO-HDLC) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        // The catalogue check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn marker_hand_worked_bytes() {
        let m = SlotMarker {
            image_len: 0x0001_0203,
            image_crc32: 0xDEAD_BEEF,
            idcode: 0x04B7_D093,
            usr_access: Some(0x1234_5678),
            written_at: 7,
            design: "top".into(),
        };
        let b = m.encode();
        assert_eq!(&b[0..8], b"NLBSLOT\0");
        assert_eq!(&b[8..12], &[1, 0, 0, 0]);
        assert_eq!(&b[12..16], &[0x03, 0x02, 0x01, 0x00]);
        assert_eq!(&b[16..20], &[0xEF, 0xBE, 0xAD, 0xDE]);
        assert_eq!(&b[20..24], &[0x93, 0xD0, 0xB7, 0x04]);
        assert_eq!(&b[24..28], &[1, 0, 0, 0]);
        assert_eq!(&b[28..32], &[0x78, 0x56, 0x34, 0x12]);
        assert_eq!(&b[36..40], b"top\0");
        assert_eq!(SlotMarker::decode(&b), Ok(m));
    }

    #[test]
    fn marker_rejects_damage() {
        let m = SlotMarker {
            image_len: 100,
            image_crc32: 1,
            idcode: 0,
            usr_access: None,
            written_at: 0,
            design: String::new(),
        };
        let good = m.encode();
        assert_eq!(
            SlotMarker::decode(&[0xFF; MARKER_LEN]),
            Err(MarkerError::Erased)
        );
        for i in 0..MARKER_LEN {
            for bit in 0..8 {
                let mut b = good;
                b[i] ^= 1 << bit;
                assert!(SlotMarker::decode(&b).is_err(), "byte {i} bit {bit}");
            }
        }
        // A marker whose program was cut short: a prefix written, the rest still erased.
        for cut in 0..MARKER_LEN {
            let mut b = [0xFF; MARKER_LEN];
            b[..cut].copy_from_slice(&good[..cut]);
            assert!(SlotMarker::decode(&b).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn layout_of_a_128_mib_part() {
        let l = Layout::new(128 << 20);
        assert_eq!(l.segment_size(), 64 << 20);
        assert_eq!(l.base(Slot::User), 0x0400_0000);
        assert_eq!(l.marker_addr(Slot::Fallback), 0x03FF_F000);
        assert_eq!(l.marker_addr(Slot::User), 0x07FF_F000);
        assert_eq!(l.slot_at(0x0400_0000), Some(Slot::User));
        assert_eq!(l.slot_at(0x100), None);
    }
}
