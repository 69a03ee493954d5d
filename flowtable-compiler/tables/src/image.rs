//! The table image: one compiled table bank, the NIC settings and the names, as bytes.
//!
//! Layout (all integers little-endian; the full description is `docs/image-format.md`):
//!
//! ```text
//! header   72 bytes: magic "NLBTBLIM", format version u16, header length u16,
//!          regmap version u32, profile id u32, section count u32, generation u64,
//!          config digest [32], total length u32, CRC32C of bytes 0..68 u32
//! section  id u16, reserved u16 (0), record count u32, payload length u32,
//!          CRC32C of the 12 bytes before it and of the payload u32, payload
//! ```
//!
//! Sections come once each, in id order: NIC settings, VIP, rules, ACL, pools, Maglev,
//! backends, symbols. Table sections store only entries that differ from the all-zero
//! default, as (index u32, packed words); the Maglev section stores slots 0..n as u16 up to
//! the last non-zero one. The reader rebuilds full-depth [`Tables`] and refuses anything it
//! does not understand; no input makes it panic.

use crate::compile::Compiled;
use crate::symbols::{PoolKind, PoolSymbol, Symbols};
use nlb_hw::enums::{DefaultAction, Table};
use nlb_hw::hash::crc32c;
use nlb_hw::layouts::MaglevSlot;
use nlb_hw::{LayoutError, NicSettings, Profile, TableError, Tables, REGMAP_VERSION};

/// First eight bytes of every image.
pub const MAGIC: [u8; 8] = *b"NLBTBLIM";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 72;

/// Section identifiers, in the order they appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u16)]
pub enum SectionId {
    /// NIC settings (`ctrl` block values).
    Nic = 1,
    /// VIP table.
    Vip = 2,
    /// Rule descriptors.
    Rule = 3,
    /// ACL entries.
    Acl = 4,
    /// Pool descriptors.
    Pool = 5,
    /// Maglev slots.
    Maglev = 6,
    /// Backend entries.
    Backend = 7,
    /// Names by id.
    Symbols = 8,
}

const SECTIONS: [SectionId; 8] = [
    SectionId::Nic,
    SectionId::Vip,
    SectionId::Rule,
    SectionId::Acl,
    SectionId::Pool,
    SectionId::Maglev,
    SectionId::Backend,
    SectionId::Symbols,
];

impl SectionId {
    fn table(self) -> Option<Table> {
        match self {
            SectionId::Vip => Some(Table::Vip),
            SectionId::Rule => Some(Table::Rule),
            SectionId::Acl => Some(Table::Acl),
            SectionId::Pool => Some(Table::Pool),
            SectionId::Maglev => Some(Table::Maglev),
            SectionId::Backend => Some(Table::Backend),
            SectionId::Nic | SectionId::Symbols => None,
        }
    }
}

/// Why an image was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Not an image at all.
    #[error("not a table image (it starts with \"{}\", an image with \"NLBTBLIM\")", .found.escape_ascii())]
    BadMagic {
        /// The first bytes found.
        found: Vec<u8>,
    },
    /// Shorter than its header says, or cut inside a section.
    #[error("image truncated: {what}")]
    Truncated {
        /// What was being read.
        what: String,
    },
    /// A format this reader does not know.
    #[error(
        "image format version {found} is not supported (this build reads version {FORMAT_VERSION})"
    )]
    UnsupportedFormat {
        /// The version in the image.
        found: u16,
    },
    /// Built against another register map.
    #[error("image built for regmap version {found}, this build uses regmap version {ours}: recompile the configuration")]
    RegmapMismatch {
        /// The version in the image.
        found: u32,
        /// Ours.
        ours: u32,
    },
    /// A profile id this build does not know.
    #[error("image built for unknown capacity profile id {0}")]
    UnknownProfile(u32),
    /// The header's CRC does not match.
    #[error("header CRC mismatch (stored {stored:#010x}, computed {computed:#010x}): the image is damaged")]
    HeaderCrc {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A section's CRC does not match.
    #[error("{section} section CRC mismatch (stored {stored:#010x}, computed {computed:#010x}): the image is damaged")]
    SectionCrc {
        /// Section name.
        section: String,
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A section that is unknown, repeated, missing or out of order, or whose contents are
    /// not what this format allows.
    #[error("bad {section} section: {reason}")]
    BadSection {
        /// Section name (or id).
        section: String,
        /// Why.
        reason: String,
    },
    /// An entry does not decode or lies outside the table.
    #[error("{section} section, entry {index}: {source}")]
    Entry {
        /// Section name.
        section: String,
        /// Entry index.
        index: u32,
        /// Why.
        source: TableError,
    },
    /// An entry holds a value its field cannot hold (when writing).
    #[error("cannot write image: {0}")]
    Layout(#[from] LayoutError),
}

/// The header of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageHeader {
    /// Format version.
    pub format_version: u16,
    /// Regmap version the tables were built against.
    pub regmap_version: u32,
    /// Capacity profile.
    pub profile: &'static Profile,
    /// Table generation.
    pub generation: u64,
    /// SHA-256 of the canonical configuration.
    pub config_digest: [u8; 32],
}

/// A decoded image: what the driver loads and the golden model executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Header fields.
    pub header: ImageHeader,
    /// One table bank, full depth.
    pub tables: Tables,
    /// NIC settings.
    pub nic: NicSettings,
    /// Names by id.
    pub symbols: Symbols,
}

impl Compiled {
    /// The image of this compile with a generation number.
    pub fn image(&self, generation: u64) -> Image {
        Image {
            header: self.image_header(generation),
            tables: self.tables.clone(),
            nic: self.nic,
            symbols: self.symbols.clone(),
        }
    }

    /// The header of this compile's image with a generation number.
    pub fn image_header(&self, generation: u64) -> ImageHeader {
        ImageHeader {
            format_version: FORMAT_VERSION,
            regmap_version: REGMAP_VERSION,
            profile: self.profile,
            generation,
            config_digest: self.config_digest,
        }
    }

    /// SHA-256 of this compile's image at generation 0: every table entry, the NIC settings,
    /// the names by id, the profile and the configuration digest, and nothing that differs
    /// between hosts serving the same tables (the generation counts a host's own loads). Two
    /// hosts with the same tables digest pick the same backend for every flow (SPEC R10.4).
    pub fn tables_digest(&self) -> Result<[u8; 32], ImageError> {
        self.image(0).tables_digest()
    }
}

/// Whether an entry is the all-zero default (checked on the typed entry, without packing).
fn is_default(t: &Tables, table: Table, i: usize) -> bool {
    use nlb_hw::layouts::{AclEntry, BackendEntry, PoolEntry, RuleEntry, VipEntry};
    match table {
        Table::Vip => t.vip.get(i) == Some(&VipEntry::default()),
        Table::Rule => t.rules.get(i) == Some(&RuleEntry::default()),
        Table::Acl => t.acl.get(i) == Some(&AclEntry::default()),
        Table::Pool => t.pools.get(i) == Some(&PoolEntry::default()),
        Table::Maglev => t.maglev.get(i) == Some(&MaglevSlot::default()),
        Table::Backend => t.backends.get(i) == Some(&BackendEntry::default()),
    }
}

fn put_u16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put_str(v: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(usize::from(u16::MAX));
    put_u16(v, n as u16);
    v.extend_from_slice(&b[..n]);
}

/// A section that cannot be read, and why.
fn bad_section(id: SectionId, reason: String) -> ImageError {
    ImageError::BadSection {
        section: section_name(id as u16),
        reason,
    }
}

fn section_name(id: u16) -> String {
    match id {
        1 => "NIC".into(),
        2 => "VIP".into(),
        3 => "RULE".into(),
        4 => "ACL".into(),
        5 => "POOL".into(),
        6 => "MAGLEV".into(),
        7 => "BACKEND".into(),
        8 => "SYMBOLS".into(),
        n => format!("unknown (id {n})"),
    }
}

impl Image {
    /// SHA-256 of the image's bytes with generation 0: the same for two hosts serving the same
    /// tables, names, NIC settings and configuration, however many loads each has made.
    pub fn tables_digest(&self) -> Result<[u8; 32], ImageError> {
        use sha2::{Digest, Sha256};
        if self.header.generation == 0 {
            return Ok(Sha256::digest(self.write()?).into());
        }
        let mut at_zero = self.clone();
        at_zero.header.generation = 0;
        Ok(Sha256::digest(at_zero.write()?).into())
    }

    /// Serialises the image. Identical images give identical bytes.
    pub fn write(&self) -> Result<Vec<u8>, ImageError> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        put_u16(&mut out, FORMAT_VERSION);
        put_u16(&mut out, HEADER_LEN as u16);
        put_u32(&mut out, self.header.regmap_version);
        put_u32(&mut out, self.header.profile.id);
        put_u32(&mut out, SECTIONS.len() as u32);
        out.extend_from_slice(&self.header.generation.to_le_bytes());
        out.extend_from_slice(&self.header.config_digest);
        put_u32(&mut out, 0); // total length, patched below
        put_u32(&mut out, 0); // header CRC, patched below
        for id in SECTIONS {
            let (count, payload) = self.section(id)?;
            let start = out.len();
            put_u16(&mut out, id as u16);
            put_u16(&mut out, 0);
            put_u32(&mut out, count);
            put_u32(&mut out, payload.len() as u32);
            let mut crc_input = out[start..].to_vec();
            crc_input.extend_from_slice(&payload);
            put_u32(&mut out, crc32c(&crc_input));
            out.extend_from_slice(&payload);
        }
        let total = out.len() as u32;
        out[64..68].copy_from_slice(&total.to_le_bytes());
        let crc = crc32c(&out[..68]);
        out[68..72].copy_from_slice(&crc.to_le_bytes());
        Ok(out)
    }

    fn section(&self, id: SectionId) -> Result<(u32, Vec<u8>), ImageError> {
        let mut p = Vec::new();
        let t = &self.tables;
        match id {
            SectionId::Nic => {
                let n = &self.nic;
                put_u32(&mut p, n.default_action.value());
                put_u32(&mut p, u32::from(n.gue_port));
                p.extend_from_slice(&n.local_mac.to_le_bytes());
                put_u32(&mut p, n.outer_src_v4);
                put_u32(&mut p, u32::from(n.outer_src_v4_len));
                p.extend_from_slice(&n.outer_src_v6.to_le_bytes());
                put_u32(&mut p, u32::from(n.outer_src_v6_len));
                Ok((1, p))
            }
            SectionId::Maglev => {
                let used = t
                    .maglev
                    .iter()
                    .rposition(|s| *s != MaglevSlot::default())
                    .map_or(0, |i| i + 1);
                // The slot's one field is `backend`, so the widest id packs if any does: the
                // width check is made once, not once per slot of a table of millions.
                const _: () = assert!(MaglevSlot::WIDTH == MaglevSlot::BACKEND_WIDTH);
                let slots = &t.maglev[..used];
                if let Some(widest) = slots.iter().max_by_key(|s| s.backend) {
                    widest.pack()?;
                }
                p.resize(2 * used, 0);
                for (bytes, s) in p.chunks_exact_mut(2).zip(slots) {
                    bytes.copy_from_slice(&s.backend.to_le_bytes());
                }
                Ok((used as u32, p))
            }
            SectionId::Symbols => {
                let s = &self.symbols;
                put_u32(&mut p, s.rules.len() as u32);
                for r in &s.rules {
                    put_str(&mut p, r);
                }
                put_u32(&mut p, s.pools.len() as u32);
                for pool in &s.pools {
                    put_str(&mut p, &pool.name);
                    p.push(match pool.kind {
                        PoolKind::TargetPool => 0,
                        PoolKind::TargetInstance => 1,
                        PoolKind::BackendService => 2,
                    });
                    put_u32(&mut p, pool.own_base);
                    put_u32(&mut p, pool.own_size);
                    put_u32(&mut p, pool.members.len() as u32);
                    for m in &pool.members {
                        put_u16(&mut p, *m);
                    }
                    // Only a backend service has a second slice (so images without one are
                    // byte for byte what they were).
                    if pool.kind == PoolKind::BackendService {
                        put_u32(&mut p, pool.failover_base);
                        put_u32(&mut p, pool.failover_size);
                    }
                }
                put_u32(&mut p, s.backends.len() as u32);
                for b in &s.backends {
                    put_str(&mut p, b);
                }
                Ok((3, p))
            }
            _ => {
                let table = id.table().ok_or_else(|| ImageError::BadSection {
                    section: section_name(id as u16),
                    reason: "not a table".into(),
                })?;
                let zero = vec![0u32; Tables::entry_words(table)];
                let mut count = 0u32;
                for index in 0..t.depth(table) {
                    if is_default(t, table, index as usize) {
                        continue;
                    }
                    let words = t
                        .read_entry(table, index)
                        .map_err(|source| ImageError::Entry {
                            section: section_name(id as u16),
                            index,
                            source,
                        })?;
                    if words != zero {
                        put_u32(&mut p, index);
                        for w in words {
                            put_u32(&mut p, w);
                        }
                        count += 1;
                    }
                }
                Ok((count, p))
            }
        }
    }

    /// Decodes an image, checking everything: magic, versions, profile, CRCs, lengths,
    /// section order, entry indices and contents.
    pub fn read(bytes: &[u8]) -> Result<Image, ImageError> {
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(ImageError::BadMagic {
                found: bytes.iter().take(MAGIC.len()).copied().collect(),
            });
        }
        let mut h = Cursor::new(bytes, "header");
        h.skip(8)?;
        let format_version = h.u16()?;
        if format_version != FORMAT_VERSION {
            return Err(ImageError::UnsupportedFormat {
                found: format_version,
            });
        }
        if bytes.len() < HEADER_LEN {
            return Err(ImageError::Truncated {
                what: format!("header needs {HEADER_LEN} bytes, image has {}", bytes.len()),
            });
        }
        let stored = u32::from_le_bytes([bytes[68], bytes[69], bytes[70], bytes[71]]);
        let computed = crc32c(&bytes[..68]);
        if stored != computed {
            return Err(ImageError::HeaderCrc { stored, computed });
        }
        let header_len = h.u16()?;
        if usize::from(header_len) != HEADER_LEN {
            return Err(ImageError::BadSection {
                section: "header".into(),
                reason: format!("header length {header_len}, expected {HEADER_LEN}"),
            });
        }
        let regmap_version = h.u32()?;
        if regmap_version != REGMAP_VERSION {
            return Err(ImageError::RegmapMismatch {
                found: regmap_version,
                ours: REGMAP_VERSION,
            });
        }
        let profile_id = h.u32()?;
        let profile = Profile::by_id(profile_id).ok_or(ImageError::UnknownProfile(profile_id))?;
        let section_count = h.u32()?;
        let generation = h.u64()?;
        let mut config_digest = [0u8; 32];
        config_digest.copy_from_slice(h.take(32)?);
        let total = h.u32()? as usize;
        if total != bytes.len() {
            return Err(ImageError::Truncated {
                what: format!("header says {total} bytes, image has {}", bytes.len()),
            });
        }
        if section_count as usize != SECTIONS.len() {
            return Err(ImageError::BadSection {
                section: "header".into(),
                reason: format!(
                    "{section_count} sections, this format has {}",
                    SECTIONS.len()
                ),
            });
        }
        let mut image = Image {
            header: ImageHeader {
                format_version,
                regmap_version,
                profile,
                generation,
                config_digest,
            },
            tables: Tables::empty(profile),
            nic: NicSettings::default(),
            symbols: Symbols::default(),
        };
        let mut c = Cursor::new(bytes, "sections");
        c.skip(HEADER_LEN)?;
        for expected in SECTIONS {
            let start = c.at;
            let id = c.u16()?;
            let name = section_name(id);
            if id != expected as u16 {
                return Err(ImageError::BadSection {
                    section: name,
                    reason: format!(
                        "expected the {} section here",
                        section_name(expected as u16)
                    ),
                });
            }
            let reserved = c.u16()?;
            let count = c.u32()?;
            let len = c.u32()? as usize;
            let stored = c.u32()?;
            let payload = c.take(len)?;
            let mut crc_input = bytes[start..start + 12].to_vec();
            crc_input.extend_from_slice(payload);
            let computed = crc32c(&crc_input);
            if stored != computed {
                return Err(ImageError::SectionCrc {
                    section: name,
                    stored,
                    computed,
                });
            }
            if reserved != 0 {
                return Err(ImageError::BadSection {
                    section: name,
                    reason: "reserved field is not zero".into(),
                });
            }
            image.read_section(expected, count, payload)?;
        }
        if c.at != bytes.len() {
            return Err(ImageError::BadSection {
                section: "image".into(),
                reason: format!("{} bytes after the last section", bytes.len() - c.at),
            });
        }
        Ok(image)
    }

    fn read_section(
        &mut self,
        id: SectionId,
        count: u32,
        payload: &[u8],
    ) -> Result<(), ImageError> {
        match id {
            SectionId::Nic => self.read_nic(id, count, payload),
            SectionId::Maglev => self.read_maglev(id, count, payload),
            SectionId::Symbols => self.read_symbols(id, count, payload),
            _ => self.read_table(id, count, payload),
        }
    }

    /// The NIC section: one record of the NIC's settings.
    fn read_nic(&mut self, id: SectionId, count: u32, payload: &[u8]) -> Result<(), ImageError> {
        let bad = |reason| bad_section(id, reason);
        let mut c = Cursor::new(payload, "section payload");
        if count != 1 || payload.len() != 44 {
            return Err(bad(format!(
                "{count} records of {} bytes, expected 1 of 44",
                payload.len()
            )));
        }
        let action = c.u32()?;
        let default_action = DefaultAction::from_value(action).ok_or_else(|| {
            bad(format!(
                "default action {action} unknown (valid: {})",
                DefaultAction::NAMES.join(", ")
            ))
        })?;
        let gue_port = u16::try_from(c.u32()?).map_err(|_| bad("GUE port beyond 65535".into()))?;
        let local_mac = c.u64()?;
        let outer_src_v4 = c.u32()?;
        let v4_len = c.u32()?;
        let outer_src_v6 = u128::from_le_bytes(c.array()?);
        let v6_len = c.u32()?;
        if local_mac >> 48 != 0 || v4_len > 32 || v6_len > 128 {
            return Err(bad(
                "MAC wider than 48 bits or prefix length out of range".into()
            ));
        }
        self.nic = NicSettings {
            default_action,
            local_mac,
            gue_port,
            outer_src_v4,
            outer_src_v4_len: v4_len as u8,
            outer_src_v6,
            outer_src_v6_len: v6_len as u8,
        };
        Ok(())
    }

    /// The Maglev section: a backend per slot, in slot order.
    fn read_maglev(&mut self, id: SectionId, count: u32, payload: &[u8]) -> Result<(), ImageError> {
        let bad = |reason| bad_section(id, reason);
        let depth = self.tables.depth(Table::Maglev);
        if count > depth || payload.len() != count as usize * 2 {
            return Err(bad(format!(
                "{count} slots in {} bytes (depth {depth})",
                payload.len()
            )));
        }
        for (slot, b) in self.tables.maglev.iter_mut().zip(payload.chunks_exact(2)) {
            slot.backend = u16::from_le_bytes([b[0], b[1]]);
        }
        // The writer stores the slots up to the last one that holds a backend.
        if count > 0 && self.tables.maglev[count as usize - 1] == MaglevSlot::default() {
            return Err(bad(format!(
                "slot {} is the last stored and empty (slots after the last used one are not stored)",
                count - 1
            )));
        }
        Ok(())
    }

    /// The symbols section: the names of rules, pools and backends by id.
    fn read_symbols(
        &mut self,
        id: SectionId,
        count: u32,
        payload: &[u8],
    ) -> Result<(), ImageError> {
        let bad = |reason| bad_section(id, reason);
        let mut c = Cursor::new(payload, "section payload");
        if count != 3 {
            return Err(bad(format!("{count} lists, expected 3")));
        }
        let n = c.count(2)?;
        let mut rules = Vec::with_capacity(n);
        for _ in 0..n {
            rules.push(c.string()?);
        }
        let n = c.count(15)?;
        let mut pools = Vec::with_capacity(n);
        for _ in 0..n {
            let name = c.string()?;
            let kind = match c.u8()? {
                0 => PoolKind::TargetPool,
                1 => PoolKind::TargetInstance,
                2 => PoolKind::BackendService,
                k => return Err(bad(format!("pool kind {k} unknown"))),
            };
            let own_base = c.u32()?;
            let own_size = c.u32()?;
            let m = c.count(2)?;
            let mut members = Vec::with_capacity(m);
            for _ in 0..m {
                members.push(c.u16()?);
            }
            let (failover_base, failover_size) = if kind == PoolKind::BackendService {
                (c.u32()?, c.u32()?)
            } else {
                (0, 0)
            };
            pools.push(PoolSymbol {
                name,
                kind,
                own_base,
                own_size,
                failover_base,
                failover_size,
                members,
            });
        }
        let n = c.count(2)?;
        let mut backends = Vec::with_capacity(n);
        for _ in 0..n {
            backends.push(c.string()?);
        }
        if c.at != payload.len() {
            return Err(bad("bytes after the last name".into()));
        }
        self.symbols = Symbols {
            rules,
            pools,
            backends,
        };
        Ok(())
    }

    /// A table's section: (index, entry words) records in ascending index order, each entry
    /// in canonical form.
    fn read_table(&mut self, id: SectionId, count: u32, payload: &[u8]) -> Result<(), ImageError> {
        let name = section_name(id as u16);
        let bad = |reason| bad_section(id, reason);
        let table = id.table().ok_or_else(|| bad("not a table".into()))?;
        let words = Tables::entry_words(table);
        let record = 4 + 4 * words;
        if payload.len() != count as usize * record {
            return Err(bad(format!(
                "{count} records need {} bytes, section has {}",
                count as usize * record,
                payload.len()
            )));
        }
        let mut last: Option<u32> = None;
        let mut buf = vec![0u32; words];
        for r in payload.chunks_exact(record) {
            let index = u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
            if last.is_some_and(|l| index <= l) {
                return Err(bad(format!("entry {index} out of order")));
            }
            last = Some(index);
            for (k, w) in buf.iter_mut().enumerate() {
                let o = 4 + 4 * k;
                *w = u32::from_le_bytes([r[o], r[o + 1], r[o + 2], r[o + 3]]);
            }
            let entry_err = |source| ImageError::Entry {
                section: name.clone(),
                index,
                source,
            };
            self.tables
                .write_entry(table, index, &buf)
                .map_err(entry_err)?;
            // Canonical form only: bits beyond the layout must be zero, so that
            // reading and writing again gives the same bytes.
            if self.tables.read_entry(table, index).map_err(entry_err)? != buf {
                return Err(bad(format!(
                    "entry {index} has bits set outside its fields"
                )));
            }
            // The writer stores only entries that hold something: an empty one stored
            // would not be written back.
            if is_default(&self.tables, table, index as usize) {
                return Err(bad(format!(
                    "entry {index} is empty (empty entries are not stored)"
                )));
            }
        }
        Ok(())
    }

    /// Reads an image file.
    pub fn load(path: &std::path::Path) -> Result<Image, crate::Error> {
        let bytes = std::fs::read(path).map_err(|source| crate::Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        Image::read(&bytes).map_err(|e| crate::Error::BadImage {
            path: path.display().to_string(),
            source: Box::new(e),
        })
    }
}

/// Bounds-checked little-endian reading.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Cursor { bytes, at: 0, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ImageError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| ImageError::Truncated {
                what: format!(
                    "{}: {n} bytes wanted at offset {}, {} left",
                    self.what,
                    self.at,
                    self.bytes.len() - self.at
                ),
            })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn skip(&mut self, n: usize) -> Result<(), ImageError> {
        self.take(n).map(|_| ())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ImageError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, ImageError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ImageError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ImageError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ImageError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of records of at least `min_bytes` each, refused when the rest cannot hold them
    /// (so a damaged count cannot ask for a huge allocation).
    fn count(&mut self, min_bytes: usize) -> Result<usize, ImageError> {
        let n = self.u32()? as usize;
        let left = self.bytes.len() - self.at;
        if n.saturating_mul(min_bytes) > left {
            return Err(ImageError::Truncated {
                what: format!("{}: {n} records do not fit in {left} bytes", self.what),
            });
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, ImageError> {
        let n = usize::from(self.u16()?);
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| ImageError::BadSection {
            section: "SYMBOLS".into(),
            reason: "a name is not UTF-8".into(),
        })
    }
}
