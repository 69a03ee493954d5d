//! Generators: Rust (at build time), the Verilog header and the Markdown register map.
//!
//! Compiled twice like `model.rs` (by `build.rs` and as `nlb_hw::codegen`).

use crate::model::{
    camel, Block, Field, Layout, PlacedField, RegField, Register, Regmap, HEADER_REGISTERS,
    RING_REGISTERS,
};
use std::fmt::Write;

/// Command that rewrites the checked-in generated files.
pub const REGEN_COMMAND: &str = "cargo run -p nlb-hw --bin nlb-regmap-gen";

fn rust_int(width: u32) -> &'static str {
    match width {
        1 => "bool",
        2..=8 => "u8",
        9..=16 => "u16",
        17..=32 => "u32",
        33..=64 => "u64",
        _ => "u128",
    }
}

fn field_type(map: &Regmap, f: &Field) -> String {
    if let (Some(inner), Some(c)) = (&f.layout, f.count) {
        let _ = map;
        return format!("[{}; {c}]", camel(inner));
    }
    if let Some(e) = &f.enum_name {
        return format!("crate::enums::{}", camel(e));
    }
    if let Some(n) = f.bytes {
        return format!("[u8; {n}]");
    }
    rust_int(f.width.unwrap_or(1)).to_string()
}

fn doc_lines(out: &mut String, indent: &str, doc: &str) {
    let doc = if doc.is_empty() {
        "(undocumented)"
    } else {
        doc
    };
    let _ = writeln!(out, "{indent}/// {}", doc.replace('\n', " "));
}

/// The Rust module included by `nlb_hw` (constants, enums, layouts).
pub fn rust(map: &Regmap) -> String {
    let mut o = String::new();
    o.push_str("// @generated from hw/regmap.toml by hw/contract/build.rs. Do not edit.\n\n");
    rust_meta(map, &mut o);
    rust_profiles(map, &mut o);
    rust_enums(map, &mut o);
    rust_hash(map, &mut o);
    rust_flash(map, &mut o);
    rust_rings(map, &mut o);
    rust_layouts(map, &mut o);
    rust_blocks(map, &mut o);
    o
}

/// The regmap and design versions, the data width, the block type prefix.
fn rust_meta(map: &Regmap, o: &mut String) {
    let m = &map.meta;
    let _ = writeln!(
        o,
        "/// `meta.regmap_version`: bumped on every incompatible change."
    );
    let _ = writeln!(o, "pub const REGMAP_VERSION: u32 = {};", m.regmap_version);
    let _ = writeln!(o, "/// `meta.design_version` (major.minor as 16.16).");
    let _ = writeln!(
        o,
        "pub const DESIGN_VERSION: u32 = {:#x};",
        m.design_version
    );
    let _ = writeln!(o, "/// AXI-Stream data width of the pipeline, bits.");
    let _ = writeln!(o, "pub const DATA_WIDTH: u32 = {};", m.data_width);
    let _ = writeln!(o, "/// High half of every block TYPE word.");
    let _ = writeln!(
        o,
        "pub const BLOCK_TYPE_PREFIX: u32 = {:#x};\n",
        m.block_type_prefix
    );
}

/// `PROFILES`: the capacity profiles.
fn rust_profiles(map: &Regmap, o: &mut String) {
    let _ = writeln!(o, "/// Capacity profiles, as in `[[profiles]]`.");
    let _ = writeln!(o, "pub const PROFILES: &[crate::Profile] = &[");
    for p in &map.profiles {
        let _ = writeln!(
            o,
            "    crate::Profile {{ name: {:?}, id: {}, doc: {:?}, vip_buckets: {}, vip_ways: {}, rules: {}, pools: {}, maglev_slots: {}, backends: {}, ct_buckets: {}, ct_ways: {}, queue_depth: {}, ct_channels: {}, maglev_channels: {}, mem_slots: {} }},",
            p.name, p.id, p.doc, p.vip_buckets, p.vip_ways, p.rules, p.pools, p.maglev_slots,
            p.backends, p.ct_buckets, p.ct_ways, p.queue_depth, p.ct_channels,
            p.maglev_channels, p.mem_slots
        );
    }
    o.push_str("];\n\n");
}

/// `enums`: an enum per `[[enums]]`, with its values, names and conversions.
fn rust_enums(map: &Regmap, o: &mut String) {
    o.push_str("/// Enumerations of `[[enums]]`.\npub mod enums {\n");
    for e in &map.enums {
        let ty = camel(&e.name);
        doc_lines(o, "    ", &e.doc);
        o.push_str(
            "    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]\n",
        );
        o.push_str("    #[repr(u32)]\n");
        let _ = writeln!(o, "    pub enum {ty} {{");
        for (i, v) in e.values.iter().enumerate() {
            doc_lines(o, "        ", &v.doc);
            if i == 0 {
                o.push_str("        #[default]\n");
            }
            let _ = writeln!(
                o,
                "        {} = {},",
                camel(&v.name.to_ascii_lowercase()),
                v.value
            );
        }
        o.push_str("    }\n\n");
        let _ = writeln!(o, "    impl {ty} {{");
        let _ = writeln!(o, "        /// Every value, in definition order.");
        let _ = writeln!(o, "        pub const ALL: [{ty}; {}] = [", e.values.len());
        for v in &e.values {
            let _ = writeln!(
                o,
                "            {ty}::{},",
                camel(&v.name.to_ascii_lowercase())
            );
        }
        o.push_str("        ];\n");
        o.push_str("        /// The encoded value.\n");
        o.push_str(
            "        pub const fn value(self) -> u32 {\n            self as u32\n        }\n",
        );
        o.push_str("        /// Decodes a value; `None` for values the regmap does not define.\n");
        o.push_str("        pub const fn from_value(value: u32) -> Option<Self> {\n            match value {\n");
        for v in &e.values {
            let _ = writeln!(
                o,
                "                {} => Some({ty}::{}),",
                v.value,
                camel(&v.name.to_ascii_lowercase())
            );
        }
        o.push_str("                _ => Option::None,\n            }\n        }\n");
        o.push_str("        /// The name as written in configuration and reports.\n");
        o.push_str("        pub const fn name(self) -> &'static str {\n            match self {\n");
        for v in &e.values {
            let _ = writeln!(
                o,
                "                {ty}::{} => {:?},",
                camel(&v.name.to_ascii_lowercase()),
                v.name
            );
        }
        o.push_str("            }\n        }\n");
        o.push_str("        /// Parses a name (as written in configuration).\n");
        o.push_str("        pub fn from_name(name: &str) -> Option<Self> {\n");
        o.push_str("            Self::ALL.iter().copied().find(|v| v.name() == name)\n        }\n");
        o.push_str("        /// Every name, for error messages.\n");
        let names: Vec<String> = e.values.iter().map(|v| format!("{:?}", v.name)).collect();
        let _ = writeln!(
            o,
            "        pub const NAMES: [&'static str; {}] = [{}];",
            e.values.len(),
            names.join(", ")
        );
        o.push_str("    }\n\n");
    }
    o.push_str("}\n\n");
}

/// `hash_def`: the flow hash's constants and key fields.
fn rust_hash(map: &Regmap, o: &mut String) {
    let h = &map.hash;
    o.push_str("/// Flow-hash constants of `[hash]`.\npub mod hash_def {\n");
    doc_lines(o, "    ", &h.doc);
    let _ = writeln!(
        o,
        "    pub const CRC_POLY_REFLECTED: u32 = {:#010x};",
        h.crc_poly_reflected
    );
    o.push_str("    /// CRC register initial value.\n");
    let _ = writeln!(o, "    pub const CRC_INIT: u32 = {:#010x};", h.crc_init);
    o.push_str("    /// Final XOR of the CRC.\n");
    let _ = writeln!(o, "    pub const CRC_XOROUT: u32 = {:#010x};", h.crc_xorout);
    for (name, v) in [
        ("MIX_SHIFT1", h.mix_shift1),
        ("MIX_MUL1", h.mix_mul1),
        ("MIX_SHIFT2", h.mix_shift2),
        ("MIX_MUL2", h.mix_mul2),
        ("MIX_SHIFT3", h.mix_shift3),
    ] {
        let _ = writeln!(
            o,
            "    /// Mix step constant.\n    pub const {name}: u32 = {v:#x};"
        );
    }
    o.push_str("    /// Bytes in the canonical key.\n");
    let _ = writeln!(o, "    pub const KEY_BYTES: usize = {};", h.key_bytes);
    for k in &h.key_fields {
        let up = k.name.to_ascii_uppercase();
        doc_lines(o, "    ", &format!("Key field `{}`: {}", k.name, k.doc));
        let _ = writeln!(o, "    pub const {up}_OFFSET: usize = {};", k.offset);
        doc_lines(o, "    ", &format!("Length of key field `{}`.", k.name));
        let _ = writeln!(o, "    pub const {up}_LEN: usize = {};", k.len);
    }
    o.push_str("}\n\n");
}

/// `flash_def`: the configuration flash's multiboot layout.
fn rust_flash(map: &Regmap, o: &mut String) {
    let f = &map.flash;
    o.push_str(
        "/// The configuration flash's multiboot layout (`[flash]`).\npub mod flash_def {\n",
    );
    doc_lines(o, "    ", &f.doc);
    let _ = writeln!(o, "    pub const SEGMENTS: u32 = {};", f.segments);
    o.push_str("    /// Bytes at the end of every segment that belong to its marker.\n");
    let _ = writeln!(o, "    pub const MARKER_AREA: u32 = {:#x};", f.marker_area);
    o.push_str("    /// Marker format version written by this release.\n");
    let _ = writeln!(
        o,
        "    pub const MARKER_VERSION: u32 = {};",
        f.marker_version
    );
    let magic_len = map
        .layout(&f.marker_layout)
        .and_then(|l| l.fields.iter().find(|x| x.name == "magic"))
        .and_then(|m| m.bytes)
        .unwrap_or(0);
    let mut magic = f.marker_magic.clone().into_bytes();
    magic.resize(magic_len as usize, 0);
    o.push_str("    /// The marker's `magic` field.\n");
    let _ = writeln!(
        o,
        "    pub const MARKER_MAGIC: [u8; {magic_len}] = {magic:?};"
    );
    o.push_str("    /// The marker's layout.\n");
    let _ = writeln!(
        o,
        "    pub type Marker = crate::layouts::{};",
        camel(&f.marker_layout)
    );
    o.push_str("}\n\n");
}

/// `layouts`: a typed entry per `[[layouts]]`, and `repack`.
fn rust_layouts(map: &Regmap, o: &mut String) {
    o.push_str("/// Entry layouts of `[[layouts]]` with typed pack/unpack.\npub mod layouts {\n");
    o.push_str("    use crate::layout::{get_bits, put_bits, LayoutError};\n");
    o.push_str("    use bitvec::prelude::*;\n\n");
    for l in &map.layouts {
        rust_layout(map, l, o);
    }
    o.push_str("    /// Names of every layout.\n");
    let names: Vec<String> = map
        .layouts
        .iter()
        .map(|l| format!("{:?}", l.name))
        .collect();
    let _ = writeln!(o, "    pub const ALL: &[&str] = &[{}];\n", names.join(", "));
    o.push_str(
        "    /// Unpacks `words` as the named layout and packs the result again: the canonical\n",
    );
    o.push_str("    /// encoding of what the words hold. `None` for an unknown layout name.\n");
    o.push_str("    pub fn repack(layout: &str, words: &[u32]) -> Option<Result<Vec<u32>, LayoutError>> {\n");
    o.push_str("        Some(match layout {\n");
    for l in &map.layouts {
        let _ = writeln!(
            o,
            "            {:?} => {}::unpack(words).and_then(|v| v.pack()).map(|w| w.to_vec()),",
            l.name,
            camel(&l.name)
        );
    }
    o.push_str("            _ => return Option::None,\n        })\n    }\n");
    o.push_str("}\n\n");
}

/// `blocks`: a module per register block, and the tables over all of them.
fn rust_blocks(map: &Regmap, o: &mut String) {
    o.push_str("/// Register blocks of `[[blocks]]`: absolute byte offsets from BAR 0.\npub mod blocks {\n");
    for (i, b) in map.blocks.iter().enumerate() {
        doc_lines(o, "    ", &b.doc);
        let _ = writeln!(o, "    pub mod {} {{", b.name);
        o.push_str("        /// Byte offset of the block.\n");
        let _ = writeln!(o, "        pub const BASE: u32 = {:#06x};", b.offset);
        o.push_str("        /// Value of the TYPE word.\n");
        let _ = writeln!(
            o,
            "        pub const TYPE_WORD: u32 = {:#010x};",
            map.meta.block_type_prefix | b.type_id
        );
        o.push_str("        /// Value of the VERSION word.\n");
        let _ = writeln!(o, "        pub const VERSION: u32 = {};", b.version);
        o.push_str("        /// Bytes from BASE that the block's registers lie in (up to the next block).\n");
        let _ = writeln!(o, "        pub const SPAN: u32 = {:#x};", map.span(i));
        o.push_str("        /// Value of the NEXT word.\n");
        let _ = writeln!(
            o,
            "        pub const NEXT: u32 = {:#06x};",
            map.next_offset(i)
        );
        for (n, off, doc) in HEADER_REGISTERS {
            doc_lines(o, "        ", doc);
            let _ = writeln!(
                o,
                "        pub const {}_REG: u32 = BASE + {off:#x};",
                n.to_ascii_uppercase()
            );
        }
        for r in &b.registers {
            doc_lines(o, "        ", &format!("[{}] {}", r.access, r.doc));
            let up = r.name.to_ascii_uppercase();
            let _ = writeln!(o, "        pub const {up}: u32 = BASE + {:#x};", r.offset);
            if r.count > 1 {
                doc_lines(o, "        ", &format!("Words in `{}`.", r.name));
                let _ = writeln!(o, "        pub const {up}_COUNT: u32 = {};", r.count);
                doc_lines(
                    o,
                    "        ",
                    &format!("Offset of the last word of `{}`.", r.name),
                );
                let _ = writeln!(
                    o,
                    "        pub const {up}_END: u32 = BASE + {:#x};",
                    r.offset + 4 * (r.count - 1)
                );
            }
            if r.has_reset() {
                doc_lines(
                    o,
                    "        ",
                    &format!("Value of `{}` after reset.", r.name),
                );
                let _ = writeln!(o, "        pub const {up}_RESET: u32 = {:#x};", r.reset);
            }
            if !r.fields.is_empty() {
                rust_register(map, b, r, o);
            }
        }
        for w in &b.wide {
            rust_wide(b, w, o);
        }
        o.push_str("    }\n");
    }
    o.push_str(
        "    /// Bits the register at `offset` defines: its fields' (the others read 0; see the\n",
    );
    o.push_str(
        "    /// regmap's conventions for writes), all 32 for a plain value or no register.\n",
    );
    o.push_str("    pub const fn defined(offset: u32) -> u32 {\n        match offset {\n");
    for b in &map.blocks {
        for r in b.registers.iter().filter(|r| !r.fields.is_empty()) {
            let _ = writeln!(
                o,
                "            {}::{} => {:#x},",
                b.name,
                r.name.to_ascii_uppercase(),
                r.defined()
            );
        }
    }
    o.push_str("            _ => u32::MAX,\n        }\n    }\n");
    rust_access(map, o);
    o.push_str(
        "    /// Value of the register at `offset` after reset (0 for one that resets to 0 or\n",
    );
    o.push_str("    /// no register).\n");
    o.push_str("    pub const fn reset(offset: u32) -> u32 {\n        match offset {\n");
    for b in &map.blocks {
        for r in b.registers.iter().filter(|r| r.reset != 0) {
            let _ = writeln!(
                o,
                "            {}::{} => {:#x},",
                b.name,
                r.name.to_ascii_uppercase(),
                r.reset
            );
        }
    }
    o.push_str("            _ => 0,\n        }\n    }\n");
    o.push_str("    /// Bytes of the words every block starts with (TYPE, VERSION, NEXT).\n");
    let _ = writeln!(
        o,
        "    pub const HEADER_BYTES: u32 = {};",
        4 * HEADER_REGISTERS.len()
    );
    o.push_str("    /// Fields of every block's TYPE word (`meta.block_type_prefix | type_id`).\n");
    o.push_str("    pub mod type_word {\n");
    o.push_str("        /// `type_id`, bits 15..0.\n");
    o.push_str(
        "        pub const TYPE_ID: crate::RegField = crate::RegField { lsb: 0, width: 16 };\n",
    );
    o.push_str("        /// The project prefix (`meta.block_type_prefix`), bits 31..16.\n");
    o.push_str(
        "        pub const PREFIX: crate::RegField = crate::RegField { lsb: 16, width: 16 };\n",
    );
    o.push_str("    }\n");
    o.push_str("    /// Every block in discovery order: (name, base, type word, version).\n");
    o.push_str("    pub const ALL: &[(&str, u32, u32, u32)] = &[\n");
    for b in &map.blocks {
        let _ = writeln!(
            o,
            "        ({:?}, {name}::BASE, {name}::TYPE_WORD, {name}::VERSION),",
            b.name,
            name = b.name
        );
    }
    o.push_str("    ];\n}\n");
}

/// `blocks::Access` and `blocks::access`: how software may access the register at an offset.
fn rust_access(map: &Regmap, o: &mut String) {
    o.push_str("    /// How software may access a register (`access` in hw/regmap.toml).\n");
    o.push_str("    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\n");
    o.push_str("    pub enum Access {\n");
    o.push_str("        /// `ro`: reads return it, writes are ignored.\n        ReadOnly,\n");
    o.push_str("        /// `rw`: it stores its field bits.\n        ReadWrite,\n");
    o.push_str("        /// `wo`: a write acts (a command); reads return 0.\n        WriteOnly,\n");
    o.push_str("    }\n");
    o.push_str(
        "    /// The access of the register at byte `offset` (any word of a register array; every\n",
    );
    o.push_str(
        "    /// block's TYPE, VERSION and NEXT words are read-only); `None` where no register is.\n",
    );
    o.push_str("    pub const fn access(offset: u32) -> Option<Access> {\n");
    o.push_str("        if offset % 4 != 0 {\n            return None;\n        }\n");
    o.push_str("        match offset {\n");
    for b in &map.blocks {
        let _ = writeln!(
            o,
            "            {name}::BASE..={name}::NEXT_REG => Some(Access::ReadOnly),",
            name = b.name
        );
        for r in &b.registers {
            let acc = match r.access.as_str() {
                "ro" => "ReadOnly",
                "wo" => "WriteOnly",
                _ => "ReadWrite",
            };
            let up = r.name.to_ascii_uppercase();
            if r.count > 1 {
                let _ = writeln!(
                    o,
                    "            {n}::{up}..={n}::{up}_END => Some(Access::{acc}),",
                    n = b.name
                );
            } else {
                let _ = writeln!(o, "            {}::{up} => Some(Access::{acc}),", b.name);
            }
        }
    }
    o.push_str("            _ => None,\n        }\n    }\n");
}

/// The fields of a register: `RegField` constants in a module named after it, and a typed
/// value (`CamelName`) with `word` / `from_word`.
fn rust_register(map: &Regmap, b: &Block, r: &Register, o: &mut String) {
    let ty = camel(&r.name);
    let path = format!("{}.{}", b.name, r.name);
    let _ = writeln!(o, "        /// Bit fields of `{}`.", r.name);
    let _ = writeln!(o, "        pub mod {} {{", r.name);
    for f in &r.fields {
        doc_lines(o, "            ", &reg_field_doc(f));
        let _ = writeln!(
            o,
            "            pub const {}: crate::RegField = crate::RegField {{ lsb: {}, width: {} }};",
            f.name.to_ascii_uppercase(),
            f.lsb,
            f.width
        );
    }
    o.push_str("            /// Bits the register defines (the others read 0).\n");
    let _ = writeln!(
        o,
        "            pub const DEFINED: u32 = {:#x};",
        r.defined()
    );
    o.push_str("        }\n");

    // The typed value. A field whose Rust type is exactly as wide as the field (bool, u8 for
    // 8 bits, u16, u32, an enum) cannot overflow, so `word` is infallible when all are; an
    // enum field that does not define every value of its width makes `from_word` fallible.
    let exact = |f: &RegField| f.enum_name.is_some() || matches!(f.width, 1 | 8 | 16 | 32);
    let partial_enum = |f: &RegField| {
        f.enum_name
            .as_ref()
            .and_then(|e| map.enum_def(e))
            .is_some_and(|e| f.width >= 32 || (e.values.len() as u64) < (1u64 << f.width))
    };
    let word_fallible = !r.fields.iter().all(exact);
    let from_fallible = r.fields.iter().any(partial_enum);
    doc_lines(
        o,
        "        ",
        &format!("`{}` as typed fields: {}", r.name, r.doc),
    );
    o.push_str("        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]\n");
    let _ = writeln!(o, "        pub struct {ty} {{");
    for f in &r.fields {
        doc_lines(o, "            ", &reg_field_doc(f));
        let fty = match &f.enum_name {
            Some(e) => format!("crate::enums::{}", camel(e)),
            None => rust_int(f.width).to_string(),
        };
        let _ = writeln!(o, "            pub {}: {fty},", f.name);
    }
    o.push_str("        }\n\n");
    let _ = writeln!(o, "        impl {ty} {{");
    if word_fallible {
        o.push_str(
            "            /// The register word; a value wider than its field is an error.\n",
        );
        o.push_str("            pub fn word(&self) -> Result<u32, crate::LayoutError> {\n");
    } else {
        o.push_str("            /// The register word.\n");
        o.push_str("            pub const fn word(&self) -> u32 {\n");
    }
    o.push_str("                let mut w = 0u32;\n");
    for f in &r.fields {
        let up = f.name.to_ascii_uppercase();
        let raw = if f.enum_name.is_some() {
            format!("self.{}.value()", f.name)
        } else {
            format!("self.{} as u32", f.name)
        };
        if exact(f) {
            let _ = writeln!(o, "                w |= ({raw}) << {}::{up}.lsb;", r.name);
        } else {
            let _ = writeln!(o, "                let v = {raw};");
            let _ = writeln!(o, "                if v > {}::{up}.max() {{", r.name);
            let _ = writeln!(
                o,
                "                    return Err(crate::LayoutError::Overflow {{ layout: {path:?}, field: {:?}, value: v.into(), width: {}, max: {}::{up}.max().into() }});",
                f.name, f.width, r.name
            );
            o.push_str("                }\n");
            let _ = writeln!(o, "                w |= v << {}::{up}.lsb;", r.name);
        }
    }
    if word_fallible {
        o.push_str("                Ok(w)\n            }\n\n");
    } else {
        o.push_str("                w\n            }\n\n");
    }
    if from_fallible {
        o.push_str(
            "            /// Decodes a register word (bits outside the fields are ignored); an enum\n",
        );
        o.push_str(
            "            /// field holding a value its enumeration does not define is an error.\n",
        );
        o.push_str(
            "            pub fn from_word(word: u32) -> Result<Self, crate::LayoutError> {\n",
        );
        let _ = writeln!(o, "                Ok({ty} {{");
    } else {
        o.push_str(
            "            /// Decodes a register word (bits outside the fields are ignored).\n",
        );
        o.push_str("            pub fn from_word(word: u32) -> Self {\n");
        let _ = writeln!(o, "                {ty} {{");
    }
    for f in &r.fields {
        let up = f.name.to_ascii_uppercase();
        let raw = format!("{}::{up}.get(word)", r.name);
        let expr = match &f.enum_name {
            Some(e) if partial_enum(f) => format!(
                "crate::enums::{et}::from_value({raw}).ok_or(crate::LayoutError::BadEnum {{ layout: {path:?}, field: {:?}, value: {raw}, valid: &crate::enums::{et}::NAMES }})?",
                f.name,
                et = camel(e)
            ),
            Some(e) => format!(
                "match crate::enums::{et}::from_value({raw}) {{ Some(v) => v, None => crate::enums::{et}::ALL[0] }}",
                et = camel(e)
            ),
            None if f.width == 1 => format!("{raw} != 0"),
            None => format!("{raw} as {}", rust_int(f.width)),
        };
        let _ = writeln!(o, "                    {}: {expr},", f.name);
    }
    if from_fallible {
        o.push_str("                })\n            }\n");
    } else {
        o.push_str("                }\n            }\n");
    }
    o.push_str("        }\n\n");
}

fn reg_field_doc(f: &RegField) -> String {
    let bits = if f.width == 1 {
        format!("bit {}", f.lsb)
    } else {
        format!("bits {}..{}", f.lsb + f.width - 1, f.lsb)
    };
    let kind = f
        .enum_name
        .as_ref()
        .map(|e| format!(" (enum `{e}`)"))
        .unwrap_or_default();
    let doc = if f.doc.is_empty() {
        String::new()
    } else {
        format!(": {}", f.doc)
    };
    format!("`{}`, {bits}{kind}{doc}", f.name)
}

/// The integer type of a wide value.
fn wide_int(width: u32) -> &'static str {
    if width <= 64 {
        "u64"
    } else {
        "u128"
    }
}

/// A value spread over several registers: their offsets, `split` and `join`.
fn rust_wide(b: &Block, w: &crate::model::WideValue, o: &mut String) {
    let n = w.registers.len();
    let int = wide_int(w.width);
    let int_bits = if int == "u64" { 64 } else { 128 };
    let path = format!("{}.{}", b.name, w.name);
    doc_lines(
        o,
        "        ",
        &format!(
            "Wide value `{}` ({} bits): {}. Registers least significant first.",
            w.name, w.width, w.doc
        ),
    );
    let _ = writeln!(o, "        pub mod {} {{", w.name);
    let regs: Vec<String> = w
        .registers
        .iter()
        .map(|r| format!("super::{}", r.to_ascii_uppercase()))
        .collect();
    o.push_str("            /// The registers holding it, least significant 32 bits first.\n");
    let _ = writeln!(
        o,
        "            pub const REGISTERS: [u32; {n}] = [{}];",
        regs.join(", ")
    );
    o.push_str("            /// Width in bits.\n");
    let _ = writeln!(o, "            pub const WIDTH: u32 = {};", w.width);
    if w.width < int_bits {
        o.push_str(
            "            /// The register words (in `REGISTERS` order); a value wider than `WIDTH`\n",
        );
        o.push_str("            /// is an error.\n");
        let _ = writeln!(
            o,
            "            pub fn split(value: {int}) -> Result<[u32; {n}], crate::LayoutError> {{"
        );
        let _ = writeln!(o, "                if value >> WIDTH != 0 {{");
        let _ = writeln!(
            o,
            "                    return Err(crate::LayoutError::Overflow {{ layout: {path:?}, field: {:?}, value: value.into(), width: WIDTH as usize, max: ((1u128 << WIDTH) - 1) }});",
            w.name
        );
        o.push_str("                }\n");
        o.push_str("                Ok(std::array::from_fn(|i| (value >> (32 * i)) as u32))\n");
        o.push_str("            }\n");
    } else {
        o.push_str("            /// The register words, in `REGISTERS` order.\n");
        let _ = writeln!(o, "            pub fn split(value: {int}) -> [u32; {n}] {{");
        o.push_str("                std::array::from_fn(|i| (value >> (32 * i)) as u32)\n");
        o.push_str("            }\n");
    }
    o.push_str(
        "            /// The value from its register words (in `REGISTERS` order); bits above\n",
    );
    o.push_str("            /// `WIDTH` are ignored.\n");
    let _ = writeln!(o, "            pub fn join(words: [u32; {n}]) -> {int} {{");
    let _ = writeln!(
        o,
        "                let v = words.iter().rev().fold(0 as {int}, |v, w| (v << 32) | {int}::from(*w));"
    );
    if w.width < int_bits {
        let _ = writeln!(o, "                v & ((1 << WIDTH) - 1)");
    } else {
        o.push_str("                v\n");
    }
    o.push_str("            }\n        }\n");
}

fn rust_layout(map: &Regmap, l: &Layout, o: &mut String) {
    let placed = map.place(l);
    rust_layout_type(map, l, &placed, o);
    rust_layout_pack(map, l, &placed, o);
    rust_layout_unpack(l, &placed, o);
}

/// A layout's struct, and the constants of its impl: name, width, each field's position.
fn rust_layout_type(map: &Regmap, l: &Layout, placed: &[PlacedField], o: &mut String) {
    let ty = camel(&l.name);
    let width = map.layout_width(l);
    let words = width.div_ceil(32);
    doc_lines(o, "    ", &l.doc);
    o.push_str("    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]\n");
    let _ = writeln!(o, "    pub struct {ty} {{");
    for p in placed {
        let f = &p.field;
        doc_lines(o, "        ", &f.doc);
        let _ = writeln!(o, "        pub {}: {},", f.name, field_type(map, f));
    }
    o.push_str("    }\n\n");
    let _ = writeln!(o, "    impl {ty} {{");
    o.push_str("        /// Layout name in the regmap.\n");
    let _ = writeln!(o, "        pub const NAME: &'static str = {:?};", l.name);
    o.push_str("        /// Width in bits.\n");
    let _ = writeln!(o, "        pub const WIDTH: usize = {width};");
    o.push_str("        /// Width in 32-bit words.\n");
    let _ = writeln!(o, "        pub const WORDS: usize = {words};");
    for p in placed {
        let up = p.field.name.to_ascii_uppercase();
        doc_lines(o, "        ", &format!("First bit of `{}`.", p.field.name));
        let _ = writeln!(o, "        pub const {up}_LSB: usize = {};", p.lsb);
        doc_lines(
            o,
            "        ",
            &format!("Bits of `{}` (per element for arrays).", p.field.name),
        );
        let _ = writeln!(o, "        pub const {up}_WIDTH: usize = {};", p.elem_width);
        if p.field.layout.is_some() {
            doc_lines(
                o,
                "        ",
                &format!("Elements of the array `{}`.", p.field.name),
            );
            let _ = writeln!(o, "        pub const {up}_COUNT: usize = {};", p.count);
        }
    }
}

/// A layout's `pack`, `unpack` and `pack_bits`.
fn rust_layout_pack(map: &Regmap, l: &Layout, placed: &[PlacedField], o: &mut String) {
    let words = map.layout_width(l).div_ceil(32);
    o.push_str("\n        /// Packs into words; a value wider than its field is an error.\n");
    let _ = writeln!(
        o,
        "        pub fn pack(&self) -> Result<[u32; {words}], LayoutError> {{"
    );
    let _ = writeln!(o, "            let mut words = [0u32; {words}];");
    o.push_str("            self.pack_bits(words.view_bits_mut::<Lsb0>())?;\n");
    o.push_str("            Ok(words)\n        }\n\n");
    o.push_str(
        "        /// Unpacks from at least `WORDS` words (bits past `WIDTH` are ignored).\n",
    );
    o.push_str("        pub fn unpack(words: &[u32]) -> Result<Self, LayoutError> {\n");
    o.push_str("            if words.len() < Self::WORDS {\n");
    o.push_str("                return Err(LayoutError::ShortInput { layout: Self::NAME, words: words.len(), needed: Self::WORDS });\n");
    o.push_str("            }\n");
    o.push_str("            Self::unpack_bits(words.view_bits::<Lsb0>())\n        }\n\n");

    o.push_str("        /// Packs into a bit slice of at least `WIDTH` bits, starting at bit 0.\n");
    o.push_str("        pub fn pack_bits(&self, bits: &mut BitSlice<u32, Lsb0>) -> Result<(), LayoutError> {\n");
    for p in placed {
        let f = &p.field;
        let up = f.name.to_ascii_uppercase();
        if let Some(inner) = &f.layout {
            let _ = writeln!(
                o,
                "            for (i, e) in self.{}.iter().enumerate() {{",
                f.name
            );
            let _ = writeln!(
                o,
                "                let at = Self::{up}_LSB + i * {}::WIDTH;",
                camel(inner)
            );
            let _ = writeln!(
                o,
                "                e.pack_bits(&mut bits[at..at + {}::WIDTH])?;",
                camel(inner)
            );
            let _ = writeln!(o, "            }}");
        } else if f.bytes.is_some() {
            let _ = writeln!(
                o,
                "            for (i, b) in self.{}.iter().enumerate() {{",
                f.name
            );
            let _ = writeln!(
                o,
                "                put_bits(bits, Self::{up}_LSB + 8 * i, 8, u128::from(*b), Self::NAME, {:?})?;",
                f.name
            );
            let _ = writeln!(o, "            }}");
        } else {
            let value = if f.enum_name.is_some() {
                format!("u128::from(self.{}.value())", f.name)
            } else {
                format!("u128::from(self.{})", f.name)
            };
            let _ = writeln!(
                o,
                "            put_bits(bits, Self::{up}_LSB, Self::{up}_WIDTH, {value}, Self::NAME, {:?})?;",
                f.name
            );
        }
    }
    o.push_str("            Ok(())\n        }\n\n");
}

/// A layout's `unpack_bits`, and the end of its impl.
fn rust_layout_unpack(l: &Layout, placed: &[PlacedField], o: &mut String) {
    let ty = camel(&l.name);
    o.push_str("        /// Unpacks from a bit slice of at least `WIDTH` bits.\n");
    o.push_str(
        "        pub fn unpack_bits(bits: &BitSlice<u32, Lsb0>) -> Result<Self, LayoutError> {\n",
    );
    o.push_str("            if bits.len() < Self::WIDTH {\n");
    o.push_str("                return Err(LayoutError::ShortInput { layout: Self::NAME, words: bits.len() / 32, needed: Self::WORDS });\n");
    o.push_str("            }\n");
    let _ = writeln!(o, "            Ok({ty} {{");
    for p in placed {
        let f = &p.field;
        let up = f.name.to_ascii_uppercase();
        if let (Some(inner), Some(c)) = (&f.layout, f.count) {
            let it = camel(inner);
            let _ = writeln!(o, "                {}: {{", f.name);
            let _ = writeln!(
                o,
                "                    let mut out = [{it}::default(); {c}];"
            );
            let _ = writeln!(
                o,
                "                    for (i, e) in out.iter_mut().enumerate() {{"
            );
            let _ = writeln!(
                o,
                "                        let at = Self::{up}_LSB + i * {it}::WIDTH;"
            );
            let _ = writeln!(
                o,
                "                        *e = {it}::unpack_bits(&bits[at..at + {it}::WIDTH])?;"
            );
            let _ = writeln!(o, "                    }}");
            let _ = writeln!(o, "                    out");
            let _ = writeln!(o, "                }},");
        } else if let Some(n) = f.bytes {
            let _ = writeln!(
                o,
                "                {}: std::array::from_fn::<u8, {n}, _>(|i| get_bits(bits, Self::{up}_LSB + 8 * i, 8) as u8),",
                f.name
            );
        } else {
            let raw = format!("get_bits(bits, Self::{up}_LSB, Self::{up}_WIDTH)");
            let expr = if let Some(e) = &f.enum_name {
                format!(
                    "crate::enums::{et}::from_value({raw} as u32).ok_or(LayoutError::BadEnum {{ layout: Self::NAME, field: {:?}, value: {raw} as u32, valid: &crate::enums::{et}::NAMES }})?",
                    f.name,
                    et = camel(e)
                )
            } else if f.width == Some(1) {
                format!("{raw} != 0")
            } else {
                format!("{raw} as {}", rust_int(f.width.unwrap_or(1)))
            };
            let _ = writeln!(o, "                {}: {expr},", f.name);
        }
    }
    o.push_str("            })\n        }\n    }\n\n");
}

fn vl_ident(parts: &[&str]) -> String {
    let mut s = String::from("NLB");
    for p in parts {
        s.push('_');
        s.push_str(&p.to_ascii_uppercase());
    }
    s
}

/// One `localparam`: a plain number for `width` 0, else a `width`-bit hex literal; `doc`, if
/// any, as a comment.
fn lp(o: &mut String, name: String, width: u32, value: u128, doc: &str) {
    let val = if width == 0 {
        format!("{value}")
    } else {
        format!("{width}'h{value:x}")
    };
    if doc.is_empty() {
        let _ = writeln!(o, "localparam {name} = {val};");
    } else {
        let _ = writeln!(
            o,
            "localparam {name} = {val}; // {}",
            doc.replace('\n', " ")
        );
    }
}

/// `hw/rtl/nlb_regmap.vh`: localparams for every offset, field position, width and value.
pub fn verilog(map: &Regmap) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "// @generated from hw/regmap.toml; do not edit.");
    let _ = writeln!(o, "// Regenerate with: {REGEN_COMMAND}");
    o.push_str("//\n// Include inside a module body: `include \"nlb_regmap.vh\"\n");
    o.push_str(
        "// Every module uses only part of the map, so unused parameters are expected here.\n",
    );
    o.push_str("/* verilator lint_off UNUSEDPARAM */\n\n");
    vl_meta(map, &mut o);
    vl_profiles(map, &mut o);
    vl_enums(map, &mut o);
    vl_hash(map, &mut o);
    vl_layouts(map, &mut o);
    vl_blocks(map, &mut o);
    vl_flash(map, &mut o);
    vl_rings(map, &mut o);
    o.push_str("\n/* verilator lint_on UNUSEDPARAM */\n");
    o
}

/// Meta: versions, data width, block type prefix.
fn vl_meta(map: &Regmap, o: &mut String) {
    let m = &map.meta;
    o.push_str("// ---- meta ----\n");
    lp(
        o,
        vl_ident(&["regmap_version"]),
        32,
        m.regmap_version.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["design_version"]),
        32,
        m.design_version.into(),
        "",
    );
    lp(o, vl_ident(&["data_width"]), 0, m.data_width.into(), "");
    lp(
        o,
        vl_ident(&["block_type_prefix"]),
        32,
        m.block_type_prefix.into(),
        "",
    );
}

/// Each capacity profile's id and table depths.
fn vl_profiles(map: &Regmap, o: &mut String) {
    o.push_str("\n// ---- capacity profiles ----\n");
    for p in &map.profiles {
        let pn = p.name.as_str();
        lp(o, vl_ident(&["profile", pn, "id"]), 32, p.id.into(), &p.doc);
        for (k, v) in [
            ("vip_buckets", p.vip_buckets),
            ("vip_ways", p.vip_ways),
            ("rules", p.rules),
            ("pools", p.pools),
            ("maglev_slots", p.maglev_slots),
            ("backends", p.backends),
            ("ct_buckets", p.ct_buckets),
            ("ct_ways", p.ct_ways),
            ("queue_depth", p.queue_depth),
            ("ct_channels", p.ct_channels),
            ("maglev_channels", p.maglev_channels),
            ("mem_slots", p.mem_slots),
        ] {
            lp(o, vl_ident(&["profile", pn, k]), 0, v.into(), "");
        }
    }
}

/// Each enumeration's values and count.
fn vl_enums(map: &Regmap, o: &mut String) {
    o.push_str("\n// ---- enumerations ----\n");
    for e in &map.enums {
        let _ = writeln!(o, "// {}: {}", e.name, e.doc);
        let bits = e
            .values
            .iter()
            .map(|v| 32 - v.value.leading_zeros())
            .max()
            .unwrap_or(1)
            .max(1);
        for v in &e.values {
            lp(
                o,
                vl_ident(&[&e.name, &v.name]),
                bits,
                v.value.into(),
                &v.doc,
            );
        }
        lp(
            o,
            vl_ident(&[&e.name, "count"]),
            0,
            (e.values.len() as u32).into(),
            "values defined",
        );
    }
}

/// The flow hash's constants and key fields.
fn vl_hash(map: &Regmap, o: &mut String) {
    o.push_str("\n// ---- flow hash ----\n");
    let _ = writeln!(o, "// {}", map.hash.doc);
    let h = &map.hash;
    lp(
        o,
        vl_ident(&["hash", "crc_poly_reflected"]),
        32,
        h.crc_poly_reflected.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "crc_init"]),
        32,
        h.crc_init.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "crc_xorout"]),
        32,
        h.crc_xorout.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "mix_shift1"]),
        0,
        h.mix_shift1.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "mix_mul1"]),
        32,
        h.mix_mul1.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "mix_shift2"]),
        0,
        h.mix_shift2.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "mix_mul2"]),
        32,
        h.mix_mul2.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "mix_shift3"]),
        0,
        h.mix_shift3.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["hash", "key_bytes"]),
        0,
        h.key_bytes.into(),
        "",
    );
    for k in &h.key_fields {
        lp(
            o,
            vl_ident(&["hash", "key", &k.name, "offset"]),
            0,
            k.offset.into(),
            &k.doc,
        );
        lp(
            o,
            vl_ident(&["hash", "key", &k.name, "len"]),
            0,
            k.len.into(),
            "",
        );
    }
}

/// Each layout's width and field positions.
fn vl_layouts(map: &Regmap, o: &mut String) {
    o.push_str("\n// ---- table entry layouts (LSB = bit position in the entry, W = width) ----\n");
    for l in &map.layouts {
        let _ = writeln!(o, "// {}: {}", l.name, l.doc);
        let width = map.layout_width(l);
        lp(o, vl_ident(&[&l.name, "width"]), 0, width.into(), "");
        lp(
            o,
            vl_ident(&[&l.name, "words"]),
            0,
            width.div_ceil(32).into(),
            "",
        );
        for p in map.place(l) {
            lp(
                o,
                vl_ident(&[&l.name, &p.field.name, "lsb"]),
                0,
                p.lsb.into(),
                &p.field.doc,
            );
            lp(
                o,
                vl_ident(&[&l.name, &p.field.name, "w"]),
                0,
                p.elem_width.into(),
                "",
            );
            if p.field.layout.is_some() {
                lp(
                    o,
                    vl_ident(&[&l.name, &p.field.name, "count"]),
                    0,
                    p.count.into(),
                    "",
                );
            }
        }
    }
}

/// Each register block: its header words, registers, fields and wide values.
fn vl_blocks(map: &Regmap, o: &mut String) {
    let m = &map.meta;
    o.push_str("\n// ---- register blocks (absolute byte addresses) ----\n");
    lp(
        o,
        vl_ident(&["blk", "header_bytes"]),
        32,
        (4 * HEADER_REGISTERS.len() as u32).into(),
        "TYPE, VERSION, NEXT: the registers every block starts with",
    );
    for (i, b) in map.blocks.iter().enumerate() {
        let _ = writeln!(o, "// {}: {}", b.name, b.doc);
        lp(
            o,
            vl_ident(&["blk", &b.name, "base"]),
            32,
            b.offset.into(),
            "",
        );
        lp(
            o,
            vl_ident(&["blk", &b.name, "type"]),
            32,
            (m.block_type_prefix | b.type_id).into(),
            "",
        );
        lp(
            o,
            vl_ident(&["blk", &b.name, "version"]),
            32,
            b.version.into(),
            "",
        );
        lp(
            o,
            vl_ident(&["blk", &b.name, "next"]),
            32,
            map.next_offset(i).into(),
            "",
        );
        lp(
            o,
            vl_ident(&["blk", &b.name, "span"]),
            32,
            map.span(i).into(),
            "bytes from the base the block's registers lie in",
        );
        for (n, off, _) in HEADER_REGISTERS {
            lp(
                o,
                vl_ident(&["reg", &b.name, n]),
                32,
                (b.offset + off).into(),
                "",
            );
        }
        for r in &b.registers {
            lp(
                o,
                vl_ident(&["reg", &b.name, &r.name]),
                32,
                (b.offset + r.offset).into(),
                &format!("[{}] {}", r.access, r.doc),
            );
            if r.count > 1 {
                lp(
                    o,
                    vl_ident(&["reg", &b.name, &r.name, "count"]),
                    0,
                    r.count.into(),
                    "",
                );
            }
            if r.has_reset() {
                lp(
                    o,
                    vl_ident(&["reg", &b.name, &r.name, "reset"]),
                    32,
                    r.reset.into(),
                    "",
                );
            }
            if !r.fields.is_empty() {
                lp(
                    o,
                    vl_ident(&["reg", &b.name, &r.name, "defined"]),
                    32,
                    r.defined().into(),
                    "bits the register defines",
                );
            }
            for f in &r.fields {
                lp(
                    o,
                    vl_ident(&["reg", &b.name, &r.name, &f.name, "lsb"]),
                    0,
                    f.lsb.into(),
                    &reg_field_doc(f),
                );
                lp(
                    o,
                    vl_ident(&["reg", &b.name, &r.name, &f.name, "w"]),
                    0,
                    f.width.into(),
                    "",
                );
                lp(
                    o,
                    vl_ident(&["reg", &b.name, &r.name, &f.name, "mask"]),
                    32,
                    f.mask().into(),
                    "",
                );
            }
        }
        for w in &b.wide {
            lp(
                o,
                vl_ident(&["wide", &b.name, &w.name, "w"]),
                0,
                w.width.into(),
                &format!("{} (registers least significant first)", w.doc),
            );
            for (k, r) in w.registers.iter().enumerate() {
                lp(
                    o,
                    vl_ident(&["reg", &b.name, r, "wide", "lsb"]),
                    0,
                    (32 * k as u32).into(),
                    &format!("first bit of wide {} held by {r}", w.name),
                );
            }
        }
    }
}

/// The configuration flash's layout and marker.
fn vl_flash(map: &Regmap, o: &mut String) {
    o.push_str("\n// ---- configuration flash ----\n");
    let f = &map.flash;
    let _ = writeln!(o, "// {}", f.doc);
    lp(
        o,
        vl_ident(&["flash", "segments"]),
        0,
        f.segments.into(),
        "",
    );
    lp(
        o,
        vl_ident(&["flash", "marker_area"]),
        32,
        f.marker_area.into(),
        "bytes at the end of each segment holding its marker",
    );
    lp(
        o,
        vl_ident(&["flash", "marker_version"]),
        32,
        f.marker_version.into(),
        "",
    );
    let magic = f
        .marker_magic
        .bytes()
        .enumerate()
        .fold(0u128, |v, (i, b)| v | (u128::from(b) << (8 * i)));
    let magic_bits = map
        .layout(&f.marker_layout)
        .and_then(|l| l.fields.iter().find(|x| x.name == "magic"))
        .and_then(|m| m.bytes)
        .unwrap_or(0)
        * 8;
    lp(
        o,
        vl_ident(&["flash", "marker_magic"]),
        magic_bits,
        magic,
        &format!("{:?}, byte 0 in bits 7..0", f.marker_magic),
    );
}

/// `docs/regmap.md`: the register map for people.
pub fn markdown(map: &Regmap) -> String {
    let mut o = String::new();
    md_intro(map, &mut o);
    md_profiles(map, &mut o);
    md_blocks(map, &mut o);
    md_flash(map, &mut o);
    markdown_rings(map, &mut o);
    md_layouts(map, &mut o);
    md_enums(map, &mut o);
    md_hash(map, &mut o);
    o
}

/// The title, the versions, and how registers, fields and entries are read and named.
fn md_intro(map: &Regmap, o: &mut String) {
    let m = &map.meta;
    o.push_str("<!-- @generated from hw/regmap.toml; do not edit. -->\n");
    let _ = writeln!(o, "<!-- Regenerate with: {REGEN_COMMAND} -->\n");
    let _ = writeln!(o, "# Register map and table layouts\n");
    let _ = writeln!(
        o,
        "Regmap version **{}**, design version **{}.{}**, AXI-Stream data width {} bits. \
         The source of truth is `hw/regmap.toml`; this page, `hw/rtl/nlb_regmap.vh` and the Rust \
         layer of `nlb-hw` are generated from it.\n",
        m.regmap_version,
        m.design_version >> 16,
        m.design_version & 0xffff,
        m.data_width
    );
    o.push_str("Registers are 32-bit little-endian at byte offsets from BAR 0. Table entries are \
                packed from bit 0 upwards in the order listed and moved as 32-bit words (word 0 = \
                bits 31..0). IPv4 addresses are held IPv4-mapped (`::ffff:a.b.c.d`) in 128-bit fields.\n\n");
    o.push_str(
        "A register's bits are named by its **fields** (tables under each block; other bits \
         read 0). Code never writes a field's shift or mask: Rust uses \
         `nlb_hw::blocks::<block>::<Reg>` (typed fields, `word()` / `from_word()`), the \
         field positions `<block>::<reg>::<FIELD>` (`lsb`, `width`, `get`, `put`), `DEFINED` \
         and `<REG>_RESET`, and `<block>::<wide>::split` / `join` for a value held by several \
         registers; Verilog uses `NLB_REG_<BLOCK>_<REG>_<FIELD>_LSB` / `_W` / `_MASK`, \
         `NLB_REG_<BLOCK>_<REG>_DEFINED` and `_RESET` from `nlb_regmap.vh`. \
         `hw/contract/tests/contract/no_hand_written_fields.rs` fails on a shift or mask by a literal in the Rust \
         crates and on a literal bit select in the register-decoding RTL.\n\n\
         To add a field: add it to the register's `fields` in `hw/regmap.toml` (`lsb`, `width`, \
         `enum` if it holds one; `reset` on the register if it does not reset to 0), run \
         `cargo run -p nlb-hw --bin nlb-regmap-gen`, then use the generated names in the RTL \
         (`nlb_regs` or the block on its extension bus), in the golden model's device \
         (`firmware-sim/src/device.rs`) and in the driver (the model keeps a ctrl register's \
         `blocks::defined` bits, and `verif/tests/rtl/regs.rs` holds the RTL's to the same). Naming bits that already \
         exist changes no value (no `regmap_version` bump); moving a bit or changing its \
         meaning is incompatible and bumps it.\n\n",
    );
}

/// The capacity profiles' table.
fn md_profiles(map: &Regmap, o: &mut String) {
    o.push_str("## Capacity profiles\n\n| profile | id | VIP buckets × ways | rules | pools | Maglev slots | backends | conntrack buckets × ways | queue depth | HBM channels (connections, Maglev; 0 = on chip) | reads in flight per table | what |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for p in &map.profiles {
        let _ = writeln!(
            o,
            "| `{}` | {} | {} × {} | {} | {} | {} | {} | {} × {} | {} | {}, {} | {} | {} |",
            p.name,
            p.id,
            p.vip_buckets,
            p.vip_ways,
            p.rules,
            p.pools,
            p.maglev_slots,
            p.backends,
            p.ct_buckets,
            p.ct_ways,
            p.queue_depth,
            p.ct_channels,
            p.maglev_channels,
            p.mem_slots,
            p.doc
        );
    }
}

/// Each register block: its registers, fields and wide values.
fn md_blocks(map: &Regmap, o: &mut String) {
    let m = &map.meta;
    o.push_str("\n## Register blocks\n\nThe blocks form a list starting at offset 0: every block begins with TYPE \
                (`block_type_prefix | type_id`), VERSION and NEXT (offset of the next block, 0 = last). \
                Software walks the list and refuses types or versions it does not know.\n\n\
                Partial writes (AXI byte strobes, WSTRB, not all set): a read-write register that \
                stores its value takes the strobed bytes and keeps the others (then keeps its field \
                bits and saturates as a whole write does); a register whose write acts (every \
                write-only register, and `spi_flash.txrx`, whose write starts a transfer) acts only \
                on a write of all four bytes and ignores any other; a write with no strobe changes \
                nothing.\n\n");
    for (i, b) in map.blocks.iter().enumerate() {
        let _ = writeln!(
            o,
            "### `{}` at {:#06x} (type {:#010x}, version {}, next {:#06x})\n\n{}\n",
            b.name,
            b.offset,
            m.block_type_prefix | b.type_id,
            b.version,
            map.next_offset(i),
            b.doc
        );
        o.push_str("| offset | register | access | words | description |\n|---|---|---|---|---|\n");
        for (n, off, doc) in HEADER_REGISTERS {
            let _ = writeln!(o, "| {:#06x} | `{n}` | ro | 1 | {doc} |", b.offset + off);
        }
        for r in &b.registers {
            let reset = if r.reset != 0 {
                format!(" Reset {:#x}.", r.reset)
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "| {:#06x} | `{}` | {} | {} | {}{reset} |",
                b.offset + r.offset,
                r.name,
                r.access,
                r.count,
                r.doc
            );
        }
        o.push('\n');
        if b.registers.iter().any(|r| !r.fields.is_empty()) {
            o.push_str("Fields (other bits read 0; a read-write register stores only its field bits, a write-only one acts only on a word with no other bit set):\n\n| register | bits | field | type | description |\n|---|---|---|---|---|\n");
            for r in &b.registers {
                for f in &r.fields {
                    let bits = if f.width == 1 {
                        format!("{}", f.lsb)
                    } else {
                        format!("{}..{}", f.lsb + f.width - 1, f.lsb)
                    };
                    let ty = f
                        .enum_name
                        .as_ref()
                        .map_or("unsigned".to_string(), |e| format!("enum `{e}`"));
                    let _ = writeln!(
                        o,
                        "| `{}` | {bits} | `{}` | {ty} | {} |",
                        r.name, f.name, f.doc
                    );
                }
            }
            o.push('\n');
        }
        for w in &b.wide {
            let regs: Vec<String> = w.registers.iter().map(|r| format!("`{r}`")).collect();
            let _ = writeln!(
                o,
                "Wide value `{}` ({} bits{}): held by {}, least significant 32 bits first.\n",
                w.name,
                w.width,
                if w.doc.is_empty() {
                    String::new()
                } else {
                    format!(", {}", w.doc)
                },
                regs.join(", ")
            );
        }
    }
}

/// The configuration flash.
fn md_flash(map: &Regmap, o: &mut String) {
    let f = &map.flash;
    let _ = writeln!(
        o,
        "## Configuration flash\n\n{}\n\n- segments: {}\n- marker: the last {:#x} bytes of every segment, layout `{}` below\n- marker magic: `{:?}` (NUL-padded), version {}\n",
        f.doc, f.segments, f.marker_area, f.marker_layout, f.marker_magic, f.marker_version
    );
}

/// Each layout's fields.
fn md_layouts(map: &Regmap, o: &mut String) {
    o.push_str("## Table entry and stream record layouts\n\n");
    for l in &map.layouts {
        let width = map.layout_width(l);
        let _ = writeln!(
            o,
            "### `{}` ({} bits, {} words)\n\n{}\n",
            l.name,
            width,
            width.div_ceil(32),
            l.doc
        );
        o.push_str("| bits | field | width | type | description |\n|---|---|---|---|---|\n");
        for p in map.place(l) {
            let total = p.elem_width * p.count;
            let ty = match (&p.field.layout, &p.field.enum_name, p.field.bytes) {
                (Some(inner), _, _) => format!("`{inner}` × {}", p.count),
                (None, Some(e), _) => format!("enum `{e}`"),
                (None, None, Some(n)) => format!("{n} bytes, byte 0 lowest"),
                _ => "unsigned".to_string(),
            };
            let _ = writeln!(
                o,
                "| {}..{} | `{}` | {} | {} | {} |",
                p.lsb + total - 1,
                p.lsb,
                p.field.name,
                total,
                ty,
                p.field.doc
            );
        }
        o.push('\n');
    }
}

/// Each enumeration's values.
fn md_enums(map: &Regmap, o: &mut String) {
    o.push_str("## Enumerations\n\n");
    for e in &map.enums {
        let _ = writeln!(
            o,
            "### `{}`\n\n{}\n\n| value | name | meaning |\n|---|---|---|",
            e.name, e.doc
        );
        for v in &e.values {
            let _ = writeln!(o, "| {} | `{}` | {} |", v.value, v.name, v.doc);
        }
        o.push('\n');
    }
}

/// The flow hash, its canonical key and the key type of each affinity.
fn md_hash(map: &Regmap, o: &mut String) {
    let h = &map.hash;
    o.push_str("## Flow hash\n\n");
    let _ = writeln!(o, "{}\n", h.doc);
    let _ = writeln!(
        o,
        "```text\ncrc   = CRC-32 (reflected poly {:#010x}, init {:#010x}, xorout {:#010x}) over the {}-byte key\n\
         h     = crc\nh    ^= h >> {}\nh     = h * {:#010x} (mod 2^32)\nh    ^= h >> {}\nh     = h * {:#010x} (mod 2^32)\nh    ^= h >> {}\nindex = (h * M) >> 32   for a table of M entries\n```\n",
        h.crc_poly_reflected,
        h.crc_init,
        h.crc_xorout,
        h.key_bytes,
        h.mix_shift1,
        h.mix_mul1,
        h.mix_shift2,
        h.mix_mul2,
        h.mix_shift3
    );
    o.push_str("Canonical key (network byte order; fields a key type does not use are zero):\n\n| bytes | field | meaning |\n|---|---|---|\n");
    for k in &h.key_fields {
        let _ = writeln!(
            o,
            "| {}..{} | `{}` | {} |",
            k.offset,
            k.offset + k.len - 1,
            k.name,
            k.doc
        );
    }
    o.push_str("\nKey types by session affinity (SPEC R3.1, R4.2): `NONE` and `CLIENT_IP_PORT_PROTO` → TUPLE5 \
                (fragments → TUPLE3); `CLIENT_IP_PROTO` → TUPLE3; `CLIENT_IP` → TUPLE2; \
                `CLIENT_IP_NO_DESTINATION` → TUPLE1. The rule lookup hashes a VIP key; the connection \
                table always a TUPLE5 key.\n");
}

/// `[dma]` and `[[rings]]`: ring geometry and ids.
fn vl_rings(map: &Regmap, o: &mut String) {
    o.push_str("\n// ---- host rings ----\n");
    let d = &map.dma;
    let _ = writeln!(o, "// {}", d.doc);
    lp(
        o,
        vl_ident(&["dma", "wb_stride"]),
        32,
        d.wb_stride.into(),
        "bytes per ring in the write-back area",
    );
    lp(
        o,
        vl_ident(&["dma", "max_log2"]),
        0,
        d.max_log2.into(),
        "largest ring, log2 entries",
    );
    lp(
        o,
        vl_ident(&["dma", "frame_bytes"]),
        32,
        d.frame_bytes.into(),
        "largest punted or injected frame",
    );
    lp(
        o,
        vl_ident(&["dma", "rings"]),
        0,
        map.rings.len() as u128,
        "",
    );
    for (i, r) in map.rings.iter().enumerate() {
        lp(
            o,
            vl_ident(&["ring", &r.name, "id"]),
            0,
            i as u128,
            "enum ring value and MSI-X vector",
        );
        lp(
            o,
            vl_ident(&["ring", &r.name, "entry_bytes"]),
            32,
            r.entry_bytes.into(),
            &format!("{} ring, {}", r.name, r.direction),
        );
    }
}

/// The Rust module of `[dma]` and `[[rings]]`.
fn rust_rings(map: &Regmap, o: &mut String) {
    let d = &map.dma;
    o.push_str("/// The host rings of the `dma` block (`[dma]`, `[[rings]]`).\npub mod rings {\n");
    doc_lines(o, "    ", &d.doc);
    o.push_str("    /// Bytes between two rings' write-back records.\n");
    let _ = writeln!(o, "    pub const WB_STRIDE: u32 = {};", d.wb_stride);
    o.push_str("    /// Largest ring, log2 entries.\n");
    let _ = writeln!(o, "    pub const MAX_LOG2: u32 = {};", d.max_log2);
    o.push_str("    /// Largest frame a punt or inject buffer carries.\n");
    let _ = writeln!(o, "    pub const FRAME_BYTES: u32 = {};", d.frame_bytes);
    o.push_str("    /// The write-back record's layout.\n");
    let _ = writeln!(
        o,
        "    pub type Wb = crate::layouts::{};",
        camel(&d.wb_layout)
    );
    o.push_str(
        "    /// One ring: its identity, geometry and registers (absolute BAR offsets).\n    \
         #[derive(Debug, Clone, Copy, PartialEq, Eq)]\n    pub struct RingDef {\n        \
         /// Name.\n        pub name: &'static str,\n        \
         /// The ring (its value is the MSI-X vector and the write-back index).\n        \
         pub ring: crate::enums::Ring,\n        \
         /// The NIC fills slots the host gives it (true) or consumes slots the host writes.\n        \
         pub to_host: bool,\n        /// Bytes per slot.\n        pub entry_bytes: u32,\n",
    );
    for r in RING_REGISTERS {
        let _ = writeln!(
            o,
            "        /// Register `<ring>_{r}`.\n        pub {r}: u32,"
        );
    }
    o.push_str("    }\n\n");
    for r in &map.rings {
        let up = r.name.to_ascii_uppercase();
        doc_lines(o, "    ", &r.doc);
        let _ = writeln!(o, "    pub const {up}: RingDef = RingDef {{");
        let _ = writeln!(o, "        name: {:?},", r.name);
        let _ = writeln!(o, "        ring: crate::enums::Ring::{},", camel(&r.name));
        let _ = writeln!(o, "        to_host: {},", r.direction == "to_host");
        let _ = writeln!(o, "        entry_bytes: {},", r.entry_bytes);
        for reg in RING_REGISTERS {
            let _ = writeln!(
                o,
                "        {reg}: crate::blocks::dma::{}_{},",
                up,
                reg.to_ascii_uppercase()
            );
        }
        o.push_str("    };\n");
        for (what, l) in [("HOST", &r.host_layout), ("DEVICE", &r.device_layout)] {
            if let Some(l) = l {
                let _ = writeln!(
                    o,
                    "    /// What the {} writes into a {} slot.\n    pub type {}{}Slot = crate::layouts::{};",
                    what.to_ascii_lowercase(),
                    r.name,
                    camel(&r.name),
                    camel(&what.to_ascii_lowercase()),
                    camel(l)
                );
            }
        }
    }
    let names: Vec<String> = map
        .rings
        .iter()
        .map(|r| r.name.to_ascii_uppercase())
        .collect();
    o.push_str("    /// Every ring, in `ring` enumeration order.\n");
    let _ = writeln!(
        o,
        "    pub const ALL: [RingDef; {}] = [{}];",
        names.len(),
        names.join(", ")
    );
    o.push_str("}\n\n");
}

/// The `docs/regmap.md` section of `[dma]` and `[[rings]]`.
fn markdown_rings(map: &Regmap, o: &mut String) {
    let d = &map.dma;
    let _ = writeln!(
        o,
        "## Host rings\n\n{}\n\n- write-back area: `dma.wb`, one `{}` record per ring every {} bytes (ring r at + {} × r)\n- ring sizes: 2^1 .. 2^{} slots; indices free-running modulo 2^16\n- frames: at most {} bytes per punt or inject buffer\n",
        d.doc, d.wb_layout, d.wb_stride, d.wb_stride, d.max_log2, d.frame_bytes
    );
    o.push_str("| ring | value / MSI-X vector | direction | slot bytes | host writes | NIC writes | registers | description |\n|---|---|---|---|---|---|---|---|\n");
    for (i, r) in map.rings.iter().enumerate() {
        let show = |l: &Option<String>| l.as_ref().map_or("—".to_string(), |l| format!("`{l}`"));
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} | {} | `dma.{}_*` | {} |",
            r.name,
            i,
            r.direction.replace('_', " "),
            r.entry_bytes,
            show(&r.host_layout),
            show(&r.device_layout),
            r.name,
            r.doc
        );
    }
    o.push('\n');
}
