//! The parsed form of `hw/regmap.toml` and its consistency checks.
//!
//! This file is compiled twice: by `build.rs` (to generate the Rust layer) and as
//! `nlb_hw::model` (for the Verilog/Markdown generator). Keep it free of crate-internal paths.

use serde::Deserialize;
use std::collections::BTreeSet;

/// The whole register map.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regmap {
    /// Versions and global constants.
    pub meta: Meta,
    /// Capacity profiles.
    pub profiles: Vec<Profile>,
    /// Enumerations shared by every implementation.
    pub enums: Vec<EnumDef>,
    /// The flow hash definition.
    pub hash: HashDef,
    /// Table-entry and stream-record layouts.
    pub layouts: Vec<Layout>,
    /// Register blocks, in discovery-list order.
    pub blocks: Vec<Block>,
    /// The multiboot layout of the configuration flash.
    pub flash: FlashDef,
    /// Geometry shared by the host rings.
    pub dma: DmaDef,
    /// The host rings of the `dma` block, in `ring` enumeration order.
    pub rings: Vec<RingDef>,
}

/// `[dma]`: what every host ring shares.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaDef {
    /// Prose definition.
    pub doc: String,
    /// Layout of one ring's write-back record.
    pub wb_layout: String,
    /// Bytes between two rings' write-back records.
    pub wb_stride: u32,
    /// Largest ring, log2 entries.
    pub max_log2: u32,
    /// Largest frame a punt or inject buffer carries.
    pub frame_bytes: u32,
}

/// `[[rings]]`: one descriptor ring in host memory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingDef {
    /// Name; also the prefix of its registers in the `dma` block and a value of enum `ring`.
    pub name: String,
    /// `to_host` or `to_device`.
    pub direction: String,
    /// Bytes per slot (a power of two, at least the layouts' bytes).
    pub entry_bytes: u32,
    /// Layout of what the host writes into a slot.
    #[serde(default)]
    pub host_layout: Option<String>,
    /// Layout of what the NIC writes into a slot.
    #[serde(default)]
    pub device_layout: Option<String>,
    /// Prose definition.
    pub doc: String,
}

/// The per-ring registers of the `dma` block, by suffix.
pub const RING_REGISTERS: [&str; 7] = ["base_lo", "base_hi", "size", "host", "dev", "drops", "irq"];

/// `[flash]`: where the images and their markers lie in the configuration flash, and the
/// marker's identity. The marker's bytes are the layout named by `marker_layout`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashDef {
    /// Prose definition.
    pub doc: String,
    /// Equal segments the flash is split into (segment 0: fallback image).
    pub segments: u32,
    /// Bytes at the end of every segment that belong to its marker (one erase subsector).
    pub marker_area: u32,
    /// The layout of the marker's bytes.
    pub marker_layout: String,
    /// Magic at the start of a marker (ASCII, NUL-padded to the `magic` field).
    pub marker_magic: String,
    /// Marker format version written by this release.
    pub marker_version: u32,
}

/// `[meta]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Project name.
    pub name: String,
    /// Bumped on every incompatible change.
    pub regmap_version: u32,
    /// Design version, major.minor as 16.16.
    pub design_version: u32,
    /// AXI-Stream data width, bits.
    pub data_width: u32,
    /// High half of every block type word.
    pub block_type_prefix: u32,
}

/// `[[profiles]]`: the table depths of one build.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Profile name (`sim`, `u280`).
    pub name: String,
    /// Identifier reported by the firmware-ID block.
    pub id: u32,
    /// What the profile is for.
    pub doc: String,
    /// VIP table buckets.
    pub vip_buckets: u32,
    /// VIP entries per bucket.
    pub vip_ways: u32,
    /// Rule descriptors.
    pub rules: u32,
    /// Pool descriptors.
    pub pools: u32,
    /// Maglev slot memory.
    pub maglev_slots: u32,
    /// Backend entries.
    pub backends: u32,
    /// Connection table buckets.
    pub ct_buckets: u32,
    /// Connection entries per bucket.
    pub ct_ways: u32,
    /// Entries of each punt/learn/inject queue.
    pub queue_depth: u32,
    /// HBM pseudo-channels of the connection table (0: on chip).
    pub ct_channels: u32,
    /// HBM pseudo-channels of the Maglev slots (0: on chip).
    pub maglev_channels: u32,
    /// Packets each memory stage holds (table reads in flight per table).
    pub mem_slots: u32,
}

/// `[[enums]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnumDef {
    /// Enumeration name (snake_case).
    pub name: String,
    /// What it means.
    pub doc: String,
    /// Its values.
    pub values: Vec<EnumValue>,
}

/// One value of an enumeration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnumValue {
    /// SCREAMING_SNAKE name, as users and the REST API spell it.
    pub name: String,
    /// Encoded value.
    pub value: u32,
    /// What it means.
    pub doc: String,
}

/// `[hash]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashDef {
    /// Prose definition.
    pub doc: String,
    /// CRC polynomial, reflected form.
    pub crc_poly_reflected: u32,
    /// CRC register initial value.
    pub crc_init: u32,
    /// Final XOR of the CRC.
    pub crc_xorout: u32,
    /// Mix: `h ^= h >> mix_shift1`.
    pub mix_shift1: u32,
    /// Mix: `h *= mix_mul1`.
    pub mix_mul1: u32,
    /// Mix: `h ^= h >> mix_shift2`.
    pub mix_shift2: u32,
    /// Mix: `h *= mix_mul2`.
    pub mix_mul2: u32,
    /// Mix: `h ^= h >> mix_shift3`.
    pub mix_shift3: u32,
    /// Length of the canonical key.
    pub key_bytes: u32,
    /// Fields of the canonical key.
    pub key_fields: Vec<KeyField>,
}

/// A byte field of the canonical hash key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyField {
    /// Field name.
    pub name: String,
    /// Byte offset.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
    /// What it holds.
    pub doc: String,
}

/// `[[layouts]]`: a bit-packed record.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// snake_case name.
    pub name: String,
    /// What it is and how it is indexed.
    pub doc: String,
    /// Fields from bit 0 upwards.
    pub fields: Vec<Field>,
}

/// One field of a layout: either `width` bits, or `count` copies of a nested `layout`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// snake_case name.
    pub name: String,
    /// Width in bits (scalar fields).
    pub width: Option<u32>,
    /// Enumeration held by the field.
    #[serde(rename = "enum")]
    pub enum_name: Option<String>,
    /// Nested layout (array fields).
    pub layout: Option<String>,
    /// Number of nested records (array fields).
    pub count: Option<u32>,
    /// A byte string of this many bytes, byte 0 in the lowest bits (`[u8; N]` in Rust).
    pub bytes: Option<u32>,
    /// What it holds.
    #[serde(default)]
    pub doc: String,
}

/// `[[blocks]]`: a register block.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// snake_case name.
    pub name: String,
    /// What it is for.
    pub doc: String,
    /// Low half of the TYPE word.
    pub type_id: u32,
    /// VERSION word.
    pub version: u32,
    /// Byte offset from BAR 0.
    pub offset: u32,
    /// Registers after the three header words.
    pub registers: Vec<Register>,
    /// Values wider than a register, held by several registers.
    #[serde(default)]
    pub wide: Vec<WideValue>,
}

/// A value held by several registers of a block, its low 32 bits in the first one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WideValue {
    /// snake_case name.
    pub name: String,
    /// Width in bits (33..=128).
    pub width: u32,
    /// The registers holding it, least significant 32 bits first.
    pub registers: Vec<String>,
    /// What it is.
    #[serde(default)]
    pub doc: String,
}

/// A bit field of a register.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegField {
    /// snake_case name.
    pub name: String,
    /// First bit.
    pub lsb: u32,
    /// Bits.
    pub width: u32,
    /// Enumeration held by the field.
    #[serde(rename = "enum")]
    pub enum_name: Option<String>,
    /// What it holds.
    #[serde(default)]
    pub doc: String,
}

impl RegField {
    /// The field's bits in place.
    pub fn mask(&self) -> u32 {
        // Checked: an invalid field (reported by `check`) must not panic here.
        let ones = 1u32
            .checked_shl(self.width)
            .map_or(u32::MAX, |v| v.wrapping_sub(1));
        ones.checked_shl(self.lsb).unwrap_or(0)
    }
}

/// A register (or an array of `count` consecutive registers).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// snake_case name.
    pub name: String,
    /// Byte offset within the block.
    pub offset: u32,
    /// `ro`, `rw` or `wo`.
    pub access: String,
    /// Number of 32-bit words (arrays).
    #[serde(default = "one")]
    pub count: u32,
    /// What it does.
    #[serde(default)]
    pub doc: String,
    /// Bit fields (none: the register is one 32-bit value).
    #[serde(default)]
    pub fields: Vec<RegField>,
    /// Value after reset (0 when not given).
    #[serde(default)]
    pub reset: u32,
}

impl Register {
    /// Whether the register has a reset value worth naming: every single read-write register,
    /// and any other with fields or a non-zero reset.
    pub fn has_reset(&self) -> bool {
        self.reset != 0 || !self.fields.is_empty() || (self.access == "rw" && self.count == 1)
    }

    /// Bits the register defines: its fields', or all 32 for a plain value.
    pub fn defined(&self) -> u32 {
        if self.fields.is_empty() {
            u32::MAX
        } else {
            self.fields.iter().fold(0, |m, f| m | f.mask())
        }
    }
}

fn one() -> u32 {
    1
}

/// Words every block starts with.
pub const HEADER_REGISTERS: [(&str, u32, &str); 3] = [
    ("type", 0x0, "block type: meta.block_type_prefix | type_id"),
    ("version", 0x4, "block version"),
    ("next", 0x8, "byte offset of the next block, 0 = last"),
];

/// A field after layout: where it sits.
#[derive(Debug, Clone)]
pub struct PlacedField {
    /// The field as written.
    pub field: Field,
    /// First bit.
    pub lsb: u32,
    /// Bits per element (scalar: the width).
    pub elem_width: u32,
    /// Elements (scalar: 1).
    pub count: u32,
}

impl Regmap {
    /// Parses and checks the TOML text.
    pub fn parse(text: &str) -> Result<Regmap, String> {
        let map: Regmap = toml::from_str(text).map_err(|e| format!("hw/regmap.toml: {e}"))?;
        map.check()?;
        Ok(map)
    }

    /// Finds a layout by name.
    pub fn layout(&self, name: &str) -> Option<&Layout> {
        self.layouts.iter().find(|l| l.name == name)
    }

    /// Finds an enumeration by name.
    pub fn enum_def(&self, name: &str) -> Option<&EnumDef> {
        self.enums.iter().find(|e| e.name == name)
    }

    /// Total width of a layout in bits.
    pub fn layout_width(&self, layout: &Layout) -> u32 {
        self.place(layout)
            .last()
            .map_or(0, |p| p.lsb + p.elem_width * p.count)
    }

    /// Bit positions of every field of a layout.
    pub fn place(&self, layout: &Layout) -> Vec<PlacedField> {
        let mut lsb = 0;
        let mut out = Vec::new();
        for f in &layout.fields {
            let (elem_width, count) = match (&f.layout, f.width) {
                (Some(inner), _) => (
                    self.layout(inner).map_or(0, |l| self.layout_width(l)),
                    f.count.unwrap_or(1),
                ),
                (None, Some(w)) => (w, 1),
                (None, None) => (8 * f.bytes.unwrap_or(0), 1),
            };
            out.push(PlacedField {
                field: f.clone(),
                lsb,
                elem_width,
                count,
            });
            lsb += elem_width * count;
        }
        out
    }

    /// Bytes from block `index`'s base up to the next block (for the last: its registers'
    /// extent rounded up to 4 KiB): every address in the block lies below base + span.
    pub fn span(&self, index: usize) -> u32 {
        let b = &self.blocks[index];
        match self.blocks.get(index + 1) {
            Some(next) => next.offset - b.offset,
            None => {
                let end = b
                    .registers
                    .iter()
                    .map(|r| r.offset + 4 * r.count)
                    .max()
                    .unwrap_or(0)
                    .max(4 * HEADER_REGISTERS.len() as u32);
                end.div_ceil(0x1000) * 0x1000
            }
        }
    }

    /// Byte offset of the block after `index` in the discovery list (0 after the last).
    pub fn next_offset(&self, index: usize) -> u32 {
        self.blocks.get(index + 1).map_or(0, |b| b.offset)
    }

    /// Checks everything the generators and implementations rely on.
    pub fn check(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        let mut names = BTreeSet::new();
        for l in &self.layouts {
            if !names.insert(l.name.clone()) {
                errors.push(format!("layouts: duplicate name {}", l.name));
            }
            let mut field_names = BTreeSet::new();
            for f in &l.fields {
                if !field_names.insert(f.name.clone()) {
                    errors.push(format!("layouts.{}: duplicate field {}", l.name, f.name));
                }
                match (&f.layout, f.width, f.count) {
                    (Some(inner), None, Some(c)) if c > 0 => {
                        if self.layout(inner).is_none() || inner == &l.name {
                            errors.push(format!(
                                "layouts.{}.{}: nested layout {inner} is not defined above",
                                l.name, f.name
                            ));
                        }
                    }
                    (None, Some(w), None) if (1..=128).contains(&w) && f.bytes.is_none() => {}
                    (None, None, None) if f.bytes.is_some_and(|n| n >= 1) => {}
                    _ => errors.push(format!(
                        "layouts.{}.{}: give one of width (1..=128), bytes (>= 1) or layout + \
                         count (>= 1)",
                        l.name, f.name
                    )),
                }
                if let Some(e) = &f.enum_name {
                    match (self.enum_def(e), f.width) {
                        (Some(def), Some(w)) => {
                            for v in &def.values {
                                if w < 32 && v.value >> w != 0 {
                                    errors.push(format!(
                                        "layouts.{}.{}: enum {e} value {} does not fit {w} bits",
                                        l.name, f.name, v.name
                                    ));
                                }
                            }
                        }
                        _ => errors.push(format!(
                            "layouts.{}.{}: enum {e} is not defined (or field has no width)",
                            l.name, f.name
                        )),
                    }
                }
            }
        }
        for e in &self.enums {
            let mut seen = BTreeSet::new();
            for v in &e.values {
                if !seen.insert(v.value) {
                    errors.push(format!("enums.{}: duplicate value {}", e.name, v.value));
                }
            }
        }
        let mut key_end = 0;
        for k in &self.hash.key_fields {
            if k.offset != key_end {
                errors.push(format!(
                    "hash.key_fields.{}: offset {} leaves a gap or overlap (expected {key_end})",
                    k.name, k.offset
                ));
            }
            key_end = k.offset + k.len;
        }
        if key_end != self.hash.key_bytes {
            errors.push(format!(
                "hash.key_fields end at byte {key_end}, key_bytes is {}",
                self.hash.key_bytes
            ));
        }
        for (i, b) in self.blocks.iter().enumerate() {
            if b.offset % 0x1000 != 0 {
                errors.push(format!("blocks.{}: offset must be 4 KiB aligned", b.name));
            }
            if i > 0 && b.offset <= self.blocks[i - 1].offset {
                errors.push(format!("blocks.{}: offsets must increase", b.name));
            }
            let mut spans: Vec<(u32, u32, &str)> = HEADER_REGISTERS
                .iter()
                .map(|(n, o, _)| (*o, *o + 4, *n))
                .collect();
            for r in &b.registers {
                if r.offset % 4 != 0 {
                    errors.push(format!(
                        "blocks.{}.{}: offset not word aligned",
                        b.name, r.name
                    ));
                }
                if !["ro", "rw", "wo"].contains(&r.access.as_str()) {
                    errors.push(format!(
                        "blocks.{}.{}: access must be ro, rw or wo",
                        b.name, r.name
                    ));
                }
                spans.push((r.offset, r.offset + 4 * r.count, r.name.as_str()));
            }
            spans.sort();
            for w in spans.windows(2) {
                if w[1].0 < w[0].1 {
                    errors.push(format!(
                        "blocks.{}: registers {} and {} overlap",
                        b.name, w[0].2, w[1].2
                    ));
                }
            }
            self.check_fields(b, &mut errors);
            if let Some(next) = self.blocks.get(i + 1) {
                if let Some(last) = spans.last() {
                    if b.offset + last.1 > next.offset {
                        errors.push(format!("blocks.{}: runs into block {}", b.name, next.name));
                    }
                }
            }
        }
        self.check_flash(&mut errors);
        self.check_rings(&mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "hw/regmap.toml is inconsistent:\n  {}",
                errors.join("\n  ")
            ))
        }
    }
}

impl Regmap {
    /// Register fields and wide values of one block.
    fn check_fields(&self, b: &Block, errors: &mut Vec<String>) {
        for r in &b.registers {
            let at = format!("blocks.{}.{}", b.name, r.name);
            let mut used = 0u32;
            let mut names = BTreeSet::new();
            for f in &r.fields {
                if !names.insert(f.name.as_str()) {
                    errors.push(format!("{at}: duplicate field {}", f.name));
                }
                if f.width == 0 || f.lsb + f.width > 32 {
                    errors.push(format!(
                        "{at}.{}: bits {}..{} are not inside the 32-bit register",
                        f.name,
                        f.lsb + f.width.max(1) - 1,
                        f.lsb
                    ));
                    continue;
                }
                if used & f.mask() != 0 {
                    errors.push(format!("{at}.{}: overlaps another field", f.name));
                }
                used |= f.mask();
                if let Some(e) = &f.enum_name {
                    match self.enum_def(e) {
                        Some(def) => {
                            for v in &def.values {
                                if f.width < 32 && v.value >> f.width != 0 {
                                    errors.push(format!(
                                        "{at}.{}: enum {e} value {} does not fit {} bits",
                                        f.name, v.name, f.width
                                    ));
                                }
                            }
                        }
                        None => errors.push(format!("{at}.{}: enum {e} is not defined", f.name)),
                    }
                }
            }
            if r.reset & !r.defined() != 0 {
                errors.push(format!(
                    "{at}: reset {:#x} sets bits outside the fields ({:#x})",
                    r.reset,
                    r.defined()
                ));
            }
            if !r.fields.is_empty() && r.count > 1 {
                errors.push(format!("{at}: an array register cannot have fields"));
            }
        }
        let mut in_wide = BTreeSet::new();
        for w in &b.wide {
            let at = format!("blocks.{}.wide.{}", b.name, w.name);
            if !(33..=128).contains(&w.width) {
                errors.push(format!("{at}: width must be 33..=128"));
                continue;
            }
            if w.registers.len() as u32 != w.width.div_ceil(32) {
                errors.push(format!(
                    "{at}: {} bits need {} registers, {} listed",
                    w.width,
                    w.width.div_ceil(32),
                    w.registers.len()
                ));
            }
            if b.registers
                .iter()
                .any(|r| r.name == w.name && !r.fields.is_empty())
            {
                errors.push(format!("{at}: name taken by a register with fields"));
            }
            for (k, name) in w.registers.iter().enumerate() {
                let Some(r) = b.registers.iter().find(|r| &r.name == name) else {
                    errors.push(format!("{at}: no register {name} in the block"));
                    continue;
                };
                if !in_wide.insert(name.as_str()) {
                    errors.push(format!("{at}: register {name} is part of two wide values"));
                }
                // The register holds bits 32k.. of the value: all 32, or the rest at the top.
                let bits = (w.width - 32 * k as u32).min(32);
                let want = if bits == 32 {
                    u32::MAX
                } else {
                    (1u32 << bits) - 1
                };
                if r.defined() != want {
                    errors.push(format!(
                        "{at}: register {name} must define bits {}..0 (its fields define {:#x})",
                        bits - 1,
                        r.defined()
                    ));
                }
            }
        }
    }

    /// `[dma]` and `[[rings]]` against the layouts, the `ring` enumeration and the `dma`
    /// block.
    fn check_rings(&self, errors: &mut Vec<String>) {
        let d = &self.dma;
        match self.layout(&d.wb_layout) {
            Some(l) if self.layout_width(l) <= 8 * d.wb_stride => {}
            _ => errors.push(format!(
                "dma.wb_layout: layout {} must exist and fit wb_stride",
                d.wb_layout
            )),
        }
        if !d.wb_stride.is_power_of_two() || d.max_log2 > 15 {
            errors.push("dma: wb_stride a power of two, max_log2 at most 15".to_string());
        }
        let ring_enum = self.enum_def("ring");
        let block = self.blocks.iter().find(|b| b.name == "dma");
        if block.is_none() {
            errors.push("rings: no block named dma".to_string());
        }
        for (i, r) in self.rings.iter().enumerate() {
            let at = format!("rings.{}", r.name);
            let value = ring_enum.and_then(|e| {
                e.values
                    .iter()
                    .find(|v| v.name.eq_ignore_ascii_case(&r.name))
            });
            if value.map(|v| v.value) != Some(i as u32) {
                errors.push(format!("{at}: enum ring must give it value {i}"));
            }
            if !["to_host", "to_device"].contains(&r.direction.as_str()) {
                errors.push(format!("{at}: direction must be to_host or to_device"));
            }
            if !r.entry_bytes.is_power_of_two() || r.entry_bytes < 16 {
                errors.push(format!("{at}: entry_bytes must be a power of two >= 16"));
            }
            for l in [&r.host_layout, &r.device_layout].into_iter().flatten() {
                match self.layout(l) {
                    Some(def) if self.layout_width(def) <= 8 * r.entry_bytes => {}
                    _ => errors.push(format!("{at}: layout {l} must exist and fit entry_bytes")),
                }
            }
            if let Some(b) = block {
                // Every ring's registers have the first ring's fields, so one decoding serves.
                let first = &self.rings[0].name;
                for suffix in RING_REGISTERS {
                    let find = |ring: &str| {
                        let name = format!("{ring}_{suffix}");
                        b.registers.iter().find(|x| x.name == name)
                    };
                    match (find(&r.name), find(first)) {
                        (Some(x), Some(y)) => {
                            let shape = |reg: &Register| {
                                reg.fields
                                    .iter()
                                    .map(|f| (f.name.clone(), f.lsb, f.width))
                                    .collect::<Vec<_>>()
                            };
                            if shape(x) != shape(y) || x.access != y.access {
                                errors.push(format!(
                                    "{at}: register {}_{suffix} differs from {first}_{suffix}",
                                    r.name
                                ));
                            }
                        }
                        _ => errors.push(format!(
                            "{at}: block dma has no register {}_{suffix}",
                            r.name
                        )),
                    }
                }
            }
        }
        if ring_enum.map_or(0, |e| e.values.len()) != self.rings.len() {
            errors.push("rings: one ring per value of enum ring".to_string());
        }
    }

    /// `[flash]` against the layouts.
    fn check_flash(&self, errors: &mut Vec<String>) {
        let f = &self.flash;
        match self.layout(&f.marker_layout) {
            None => errors.push(format!(
                "flash.marker_layout: layout {} is not defined",
                f.marker_layout
            )),
            Some(l) => {
                let magic = l.fields.iter().find(|x| x.name == "magic");
                match magic.and_then(|m| m.bytes) {
                    Some(n) if f.marker_magic.len() <= n as usize && f.marker_magic.is_ascii() => {}
                    _ => errors.push(format!(
                        "flash: layout {} needs a `magic` field of bytes holding marker_magic",
                        l.name
                    )),
                }
                if !self.layout_width(l).is_multiple_of(32)
                    || self.layout_width(l) / 8 > f.marker_area
                {
                    errors.push(format!(
                        "flash: layout {} must be whole words and fit marker_area",
                        l.name
                    ));
                }
            }
        }
        if f.segments < 1 || !f.marker_area.is_power_of_two() {
            errors.push("flash: segments >= 1 and a power-of-two marker_area".to_string());
        }
    }
}

/// `snake_case` → `CamelCase`.
pub fn camel(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(c) => {
                    c.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect()
}
