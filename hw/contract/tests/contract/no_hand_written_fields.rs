//! No hand-written shift or mask of a shared field: every register field, wide value and
//! layout the driver, the model, the tools, verif and the RTL share is generated from
//! `hw/regmap.toml` (docs/regmap.md), so a shift or mask by a literal in code that handles
//! register words is a second copy of the contract that will drift.
//!
//! The Rust check tokenizes every source file of the crates (comments and strings do not
//! count) and flags:
//! - a shift by an integer literal (`x << 24`, `x >>= 8`) or by a hand-defined `*_SHIFT`
//!   constant;
//! - a binary `&` with an integer literal (`x & 0xff`, `x & !0xFF`, `x &= 3`).
//!
//! Arithmetic that is not a regmap field (packet bytes, checksums, hashes, random number
//! generators, CRCs, external formats such as the Xilinx bitstream and the SPI NOR protocol)
//! is allowed per file or per function by [`RUST_ALLOWED`], each with its reason.
//!
//! The RTL check looks at the modules that decode register words (nlb_regs, nlb_table_cmd,
//! nlb_counters, nlb_conntrack, nlb_spi_flash and nlb_top's bus decode) for a bit select by a
//! literal (`w[0]`, `w[31:24]`), a shift by a literal and a zero-padding concatenation
//! (`{31'd0, x}`), except on the signals [`RTL_ALLOWED`] names.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// (path from the repository root — a file, or a directory ending in `/`; function name or
/// `*`; why the arithmetic there is not a regmap field).
const RUST_ALLOWED: &[(&str, &str, &str)] = &[
    // The generator and the bit-level helpers every generated accessor uses.
    ("hw/contract/src/codegen.rs", "*", "the generator: it writes the shifts of the generated code"),
    ("hw/contract/src/ct_words.rs", "*", "ct_entry packed with shifts at the generated _LSB/_WIDTH (tested bit-identical to CtEntry::pack)"),
    ("hw/contract/src/hash.rs", "*", "the flow hash (CRC-32C, fmix32, (h * M) >> 32) and IPv4-mapped addresses"),
    ("hw/contract/tests/", "*", "tests of the generated code use hand-worked literals, and proptest ranges"),
    // The reference semantics (nlb-reference): packet bytes and checksums, as in the model.
    ("hw/reference/src/parse.rs", "*", "packet header parsing (version nibble, IHL, fragment bits, flow label)"),
    ("hw/reference/src/action.rs", "*", "packet rewriting: IPv6 flow label, checksums"),
    ("hw/reference/tests/reference/trace.rs", "by_hand", "the Maglev slot (hash * M) >> 32 worked by hand as the expectation"),
    ("hw/reference/tests/reference/portless.rs", "by_hand", "buckets and Maglev slots (hash * M) >> 32 worked by hand as the expectation"),
    // Packet bytes, checksums, hashing inside the model (not registers).
    ("firmware-sim/src/parse.rs", "*", "packet header parsing (version nibble, IHL, fragment bits)"),
    ("firmware-sim/src/action.rs", "*", "packet rewriting: IPv6 flow label, checksums, GUE source port from the flow hash"),
    ("firmware-sim/src/keyhash.rs", "*", "the canonical hash key packed into u64 lanes for the fast CRC"),
    ("firmware-sim/src/conntrack.rs", "*", "the model's own packed cache lines and tag lanes (not the ct_entry layout)"),
    ("firmware-sim/src/flash/chip.rs", "*", "the SPI NOR chip's protocol (addresses, status bits)"),
    ("firmware-sim/src/flash/bitstream.rs", "*", "Xilinx configuration packets (UG570)"),
    ("firmware-sim/src/flash/layout.rs", "*", "CRC-32 (ISO-HDLC) tables"),
    ("firmware-sim/src/flash/rng.rs", "*", "splitmix64"),
    ("firmware-sim/benches/", "*", "benchmark traffic generators"),
    ("firmware-sim/tests/model/common/", "*", "test frames: IPv4 fragment fields, checksums, MAC bytes"),
    ("firmware-sim/tests/model/differential.rs", "*", "random generators and IPv4 header checksums of test frames"),
    ("firmware-sim/tests/model/parse.rs", "*", "IPv4 header fields of test frames"),
    ("hw/contract/src/tables.rs", "a_run_of_entries_decodes_as_one_entry_at_a_time", "xorshift random words (the expectation is the generated unpack)"),
    ("driver/tests/driver/rings.rs", "the_connection_table_read_back_by_dma_is_the_one_the_window_reads", "an LCG's bits pick test entries' field values"),
    ("driver/src/conntrack/table.rs", "*", "the connection manager's compact host copy: ct_entry fields read at the generated _LSB/_WIDTH (tested against CtEntry::unpack), IPv4 addresses narrowed to 32 bits and widened back, test entries from a hash"),
    ("driver/src/dma.rs", "read_words", "one 64-bit load split into the two 32-bit words it holds"),
    // Bank numbers (0 or 1) used as array indices.
    ("driver/src/loader.rs", "shadow", "bank number as an index of the two shadows"),
    ("driver/src/loader.rs", "suspect_entries", "bank number as an index of the two shadows"),
    ("firmware-sim/src/device.rs", "bank", "bank number as an index of the two banks"),
    ("firmware-sim/src/device.rs", "context", "bank number as an index of the two banks"),
    // hit_read is a bitmap: bit b is entry (index & !31) + b, a position computed per entry.
    ("driver/src/conntrack.rs", "age_io", "hit_read bitmap: bit b of the word is entry (index & !31) + b"),
    ("firmware-sim/tests/model/conntrack.rs", "key", "test flow keys from a small counter"),
    // Driver and tools: external formats, randomness, sizes.
    ("driver/src/flash/bitstream.rs", "*", "Xilinx configuration packets (UG570)"),
    ("driver/src/flash/tests.rs", "*", "CRC-32, xorshift and IDCODE revisions of the flash tests"),
    ("tools/nlbd/", "*", "packet bytes, sizes and timers of the slow path (fragments, ICMP, health probes) and its benchmark traffic"),
    ("driver/src/socket/", "*", "the socket protocol's 64-bit nanosecond times and body limit"),
    ("driver/src/vfio/", "*", "VFIO ioctl flag bits"),
    ("driver/src/rings.rs", "program", "64-bit IOVAs as the _lo/_hi register pair (the _lo word masked by its generated DEFINED)"),
    ("firmware-sim/src/dma.rs", "read_reg", "64-bit IOVAs as the _lo/_hi register pair (the _lo word masked by its generated DEFINED)"),
    ("firmware-sim/src/dma.rs", "write_reg", "64-bit IOVAs as the _lo/_hi register pair (the _lo word masked by its generated DEFINED)"),
    ("firmware-sim/tests/model/learning.rs", "*", "64-bit IOVAs of test rings as the _lo/_hi register pair"),
    ("driver/benches/", "*", "benchmark address generators"),
    ("driver/examples/", "*", "benchmark sizes"),
    ("driver/tests/driver/common/", "*", "splitmix64 and MAC bytes"),
    ("tools/nlb-sim/src/csum.rs", "*", "IPv4/TCP/UDP checksums"),
    ("tools/nlb-sim/src/afpacket.rs", "*", "socket buffer size"),
    ("tools/nlbctl/src/cmd_traffic.rs", "*", "packet bytes, IPv4 fragments and xorshift of generated traffic"),
    ("tools/nlbctl/src/policy_sim/engine.rs", "*", "client addresses of simulated connections"),
    ("tools/control/src/splitmix.rs", "*", "SplitMix64's mixing shifts and its 53-bit unit draw"),
    ("tools/system-tests/", "*", "CRC-32, random seeds and frame bytes of the tool tests and their harness"),
    ("flowtable-compiler/", "*", "the compiler fills layouts through the generated types; its shifts are prefix and address arithmetic"),
    ("verif/src/frames.rs", "*", "frame generators: IPv4/IPv6 header fields and checksums"),
    ("verif/src/verilated.rs", "*", "Verilated ports of 33..64 bits as two 32-bit words"),
    ("verif/src/host_mem.rs", "*", "AXI write strobes (a bit per byte of a beat) and the MSI-X request bits of m_dma_irq"),
    ("verif/tests/rtl/host_rings.rs", "*", "64-bit IOVAs of test rings as the _lo/_hi register pair"),
    ("verif/tests/rtl/learning.rs", "*", "64-bit IOVAs of the test's event ring as the _lo/_hi register pair; an IPv6 flow label's 20 bits"),
    ("verif/tests/rtl/axi_cdc.rs", "*", "AXI write strobes of test bursts (a bit per byte of a beat)"),
    (
        "verif/tests/rtl/board.rs",
        "the_host_rings_cross_to_the_qdma_clock_and_match_the_model",
        "64-bit IOVAs of test rings as the _lo/_hi register pair",
    ),
    ("verif/src/axi_mem.rs", "*", "bits of a memory row (entries at their byte offsets in the row) and of wide port words"),
    ("verif/tests/rtl/rx_no_stall.rs", "*", "IPv4 header checksums of test frames (RFC 1071)"),
    ("verif/src/top.rs", "frame_beats", "AXI-Stream tkeep of 64 bytes as two words"),
    ("verif/src/top.rs", "take_frames", "AXI-Stream tkeep of 64 bytes as two words"),
    ("verif/tests/rtl/regs.rs", "pipeline_read", "bits of a table memory row read on the pipeline port"),
    ("verif/tests/rtl/regs.rs", "check_v6_mask", "the 128-bit ctrl_outer_src_v6_mask port's words joined (a derived port, not a regmap field)"),
    ("verif/src/scenario.rs", "*", "IPv4-mapped addresses of generated traffic"),
    ("verif/tests/rtl/corners.rs", "word_sum", "ones'-complement checksum arithmetic (RFC 1071)"),
    ("verif/tests/rtl/corners.rs", "fold", "ones'-complement checksum arithmetic (RFC 1071)"),
    ("verif/tests/rtl/corners.rs", "carry_class", "ones'-complement checksum arithmetic (RFC 1071)"),
    ("verif/tests/rtl/corners.rs", "aim_holds", "ones'-complement checksum arithmetic (RFC 1071)"),
    ("verif/tests/rtl/corners.rs", "v4_header", "IPv4 header fields of built frames"),
    ("verif/tests/rtl/corners.rs", "build", "IPv4/IPv6 header fields of built frames"),
    ("verif/tests/rtl/corners.rs", "check_wire", "IP version nibble of transmitted frames"),
    ("verif/tests/rtl/corners.rs", "outer_v4_directed", "the two 16-bit words of an outer IPv4 source address"),
    ("verif/tests/rtl/corners.rs", "gue6_directed", "a solved 16-bit payload word as two bytes"),
    ("verif/tests/rtl/corners.rs", "biased", "a solved 16-bit payload word as two bytes"),
    ("verif/src/extbus.rs", "write_strobed", "the AXI write strobe: four byte-enable bits"),
    ("verif/tests/rtl/l3_csum.rs", "*", "ones'-complement checksum arithmetic (RFC 1071) and solved payload bytes"),
    ("verif/tests/rtl/editor.rs", "random_settings", "48-bit MAC addresses drawn at random"),
    ("verif/tests/rtl/editor.rs", "random_backend", "48-bit MAC addresses drawn at random"),
    ("verif/tests/rtl/editor.rs", "aim_checksum", "a search over 2^20 flow hashes"),
    ("verif/tests/rtl/counter_bank.rs", "*", "64-bit counter values as the bench's two 32-bit words"),
    ("verif/tests/rtl/conntrack.rs", "write", "a 32-bit write merged byte by byte under its strobe"),
    ("verif/tests/rtl/conntrack.rs", "run", "random entry words with bit 0 (valid) forced; hit bits of a wide port word"),
    ("verif/tests/rtl/table_mem.rs", "lane_of", "one lane's bits out of a wide port word"),
    ("verif/tests/rtl/lookup.rs", "row", "a bucket's entries laid side by side in one memory row, lane i from bit i x entry width"),
    ("verif/tests/rtl/lookup.rs", "user_word", "nlb_lookup's s_user word as nlb_top builds it from ctrl bits and the inject header (an internal port, not a regmap field)"),
    ("verif/tests/rtl/spi_flash.rs", "*", "the SPI NOR chip's bit-serial protocol and byte framing of txrx"),
    ("verif/tests/rtl/parser.rs", "*", "tkeep words and header bytes of parser test frames"),
    ("verif/tests/rtl/bus.rs", "value_for", "random register words, legal and not (garbage in every field), whose handling the test compares with the model's"),
    ("verif/tests/rtl/counters.rs", "snapshot", "a counter index past its family's 4,096 entries (an upper bit set), a value bin"),
    ("verif/src/contents.rs", "*", "table sizes and indices at their extremes (2^17-slot slices, top index bits set) chosen on purpose; entries are built with the generated layouts"),
    ("firmware-sim/src/device.rs", "write32_strobed", "the byte-strobe lanes of an AXI-Lite write, not a register field"),
    ("tools/control/src/fleet.rs", "file_sha256", "a 64 KiB read buffer"),
    ("tools/control/src/bgp/", "*", "BGP message fields (RFC 4271, 4724, 6793) and AS numbers, not NIC registers"),
];

/// Files whose tokens are never scanned: this file plants the patterns it looks for.
const NOT_SCANNED: &[&str] = &["hw/contract/tests/contract/no_hand_written_fields.rs"];

const SCANNED_DIRS: &[&str] = &[
    "driver",
    "firmware-sim",
    "tools",
    "verif",
    "flowtable-compiler",
    "hw",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("hw/contract/ sits in the repository")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// One shift or mask by a literal.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finding {
    file: String,
    function: String,
    line: usize,
    what: String,
}

/// Keywords after which `&` is a reference, not a bitwise and.
const KEYWORDS: &[&str] = &[
    "return", "in", "if", "match", "while", "let", "else", "break", "mut", "move", "as",
];

fn is_int_literal(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Literal(l) if l.to_string().starts_with(|c: char| c.is_ascii_digit()))
}

fn punct(t: Option<&TokenTree>, ch: char) -> Option<Spacing> {
    match t {
        Some(TokenTree::Punct(p)) if p.as_char() == ch => Some(p.spacing()),
        _ => None,
    }
}

/// Whether the token before an operator ends an operand (so the operator is binary).
fn ends_operand(t: Option<&TokenTree>) -> bool {
    match t {
        Some(TokenTree::Ident(i)) => !KEYWORDS.contains(&i.to_string().as_str()),
        Some(TokenTree::Literal(_)) => true,
        Some(TokenTree::Group(g)) => g.delimiter() != Delimiter::Brace,
        _ => false,
    }
}

fn scan_stream(stream: TokenStream, function: &str, file: &str, out: &mut Vec<Finding>) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let current_fn = function.to_string();
    let mut pending_fn: Option<String> = None;
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        match t {
            TokenTree::Ident(id) if id == "fn" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    pending_fn = Some(name.to_string());
                }
            }
            TokenTree::Group(g) => {
                let inner = if g.delimiter() == Delimiter::Brace {
                    pending_fn.take().unwrap_or_else(|| current_fn.clone())
                } else {
                    current_fn.clone()
                };
                scan_stream(g.stream(), &inner, file, out);
            }
            TokenTree::Punct(p) if (p.as_char() == '<' || p.as_char() == '>') => {
                let c = p.as_char();
                // `<<` / `>>` (and `<<=` / `>>=`): two joint puncts of the same character.
                if p.spacing() == Spacing::Joint
                    && punct(tokens.get(i + 1), c).is_some()
                    && punct(i.checked_sub(1).and_then(|k| tokens.get(k)), c).is_none()
                    && ends_operand(i.checked_sub(1).and_then(|k| tokens.get(k)))
                {
                    let mut k = i + 2;
                    if punct(tokens.get(k), '=').is_some() {
                        k += 1;
                    }
                    let by = tokens.get(k);
                    let shift_const = matches!(by, Some(TokenTree::Ident(n)) if n.to_string().ends_with("_SHIFT"));
                    if by.is_some_and(is_int_literal) || shift_const {
                        out.push(Finding {
                            file: file.to_string(),
                            function: current_fn.clone(),
                            line: p.span().start().line,
                            what: format!(
                                "{c}{c} {}",
                                by.map(|b| b.to_string()).unwrap_or_default()
                            ),
                        });
                    }
                    i = k;
                    continue;
                }
            }
            TokenTree::Punct(p) if p.as_char() == '&' => {
                let before = i.checked_sub(1).and_then(|k| tokens.get(k));
                let next = tokens.get(i + 1);
                let doubled = punct(next, '&').is_some() || punct(before, '&').is_some();
                if !doubled && ends_operand(before) {
                    let mut k = i + 1;
                    if punct(tokens.get(k), '=').is_some() || punct(tokens.get(k), '!').is_some() {
                        k += 1;
                    }
                    if tokens.get(k).is_some_and(is_int_literal) {
                        out.push(Finding {
                            file: file.to_string(),
                            function: current_fn.clone(),
                            line: p.span().start().line,
                            what: format!("& {}", tokens[k]),
                        });
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// The shifts and masks by literals in one source text.
fn scan_rust(file: &str, text: &str) -> Result<Vec<Finding>, String> {
    let stream =
        TokenStream::from_str(text).map_err(|e| format!("{file}: does not tokenize: {e}"))?;
    let mut out = Vec::new();
    scan_stream(stream, "(top level)", file, &mut out);
    Ok(out)
}

fn allowed(f: &Finding) -> bool {
    RUST_ALLOWED.iter().any(|(path, function, _)| {
        let path_ok = if path.ends_with('/') {
            f.file.starts_with(path)
        } else {
            f.file == *path
        };
        path_ok && (*function == "*" || *function == f.function)
    })
}

fn all_rust_findings() -> Vec<Finding> {
    let root = repo_root();
    let mut files = Vec::new();
    for d in SCANNED_DIRS {
        rust_files(&root.join(d), &mut files);
    }
    assert!(
        files.len() > 100,
        "found only {} Rust files under {}",
        files.len(),
        root.display()
    );
    let mut out = Vec::new();
    for p in files {
        let rel = p
            .strip_prefix(&root)
            .unwrap_or(&p)
            .to_string_lossy()
            .replace('\\', "/");
        if NOT_SCANNED.contains(&rel.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{rel}: {e}"));
        out.extend(scan_rust(&rel, &text).unwrap_or_else(|e| panic!("{e}")));
    }
    out
}

#[test]
fn no_hand_written_shift_or_mask_of_a_register_field_in_rust() {
    let bad: Vec<String> = all_rust_findings()
        .into_iter()
        .filter(|f| !allowed(f))
        .map(|f| format!("  {}:{} in fn {}: `{}`", f.file, f.line, f.function, f.what))
        .collect();
    assert!(
        bad.is_empty(),
        "{} hand-written shifts/masks outside the allowlist. Use the generated register \
         fields (nlb_hw::blocks::<block>::<register>::<FIELD>, the typed <Register> values, \
         wide::split/join) or layouts; if the arithmetic is not a regmap field, add the file or \
         function to RUST_ALLOWED in {} with the reason:\n{}",
        bad.len(),
        file!(),
        bad.join("\n")
    );
}

#[test]
fn every_allowlist_entry_is_still_needed() {
    let findings = all_rust_findings();
    let stale: Vec<String> = RUST_ALLOWED
        .iter()
        .filter(|(path, function, _)| {
            !findings.iter().any(|f| {
                (if path.ends_with('/') {
                    f.file.starts_with(path)
                } else {
                    f.file == *path
                }) && (*function == "*" || *function == f.function)
            })
        })
        .map(|(p, f, _)| format!("  {p} ({f})"))
        .collect();
    assert!(
        stale.is_empty(),
        "allowlist entries that match nothing (remove them):\n{}",
        stale.join("\n")
    );
}

#[test]
fn a_planted_counter_select_shift_is_caught() {
    // The driver's counter read, with the kind shifted into place by hand as it once was.
    let rel = "driver/src/queues.rs";
    let text = std::fs::read_to_string(repo_root().join(rel)).unwrap();
    let clean = scan_rust(rel, &text).unwrap();
    assert!(
        clean.iter().all(|f| !allowed(f)) && clean.is_empty(),
        "{clean:?}"
    );
    let anchor = "    let mut batch = Batch::new();\n    for index in indices {\n";
    assert!(
        text.contains(anchor),
        "read_counters changed: update the planted line"
    );
    let planted = text.replacen(
        anchor,
        &format!("{anchor}        let _sel = (kind.value() << 24) | (index & 0x00ff_ffff);\n"),
        1,
    );
    let found = scan_rust(rel, &planted).unwrap();
    let what: Vec<(&str, &str)> = found
        .iter()
        .map(|f| (f.function.as_str(), f.what.as_str()))
        .collect();
    assert_eq!(
        what,
        [
            ("read_counters", "<< 24"),
            ("read_counters", "& 0x00ff_ffff")
        ]
    );
    assert!(found.iter().all(|f| !allowed(f)));
}

#[test]
fn the_scanner_tells_operators_from_look_alikes() {
    let text = r#"
        fn f(x: u32, v: Vec<Vec<u8>>) -> u32 {
            let a = &0x1234u16.to_be_bytes(); // a reference, not a mask
            let b = "x << 8 & 0xff";           // a string
            // x >> 4 in a comment
            let c = x & y;                     // no literal
            let d = x && true;
            let e = x >>= 3;
            let g = (x) & !0xFF;
            let h = [1u32][0] << 2;
            let k = x >> SOME_SHIFT;
            x
        }
    "#;
    let found = scan_rust("t.rs", text).unwrap();
    let what: Vec<&str> = found.iter().map(|f| f.what.as_str()).collect();
    assert_eq!(what, [">> 3", "& 0xFF", "<< 2", ">> SOME_SHIFT"]);
    assert!(found.iter().all(|f| f.function == "f"));
}

// ---- RTL --------------------------------------------------------------------------------------

/// The modules that decode register words.
const RTL_FILES: &[&str] = &[
    "hw/rtl/nlb_regs.v",
    "hw/rtl/nlb_table_cmd.v",
    "hw/rtl/nlb_counters.v",
    "hw/rtl/nlb_conntrack.v",
    "hw/rtl/nlb_spi_flash.v",
    "hw/rtl/nlb_top.v",
];

/// (file, signal, why a literal select of it is not a regmap field).
const RTL_ALLOWED: &[(&str, &str, &str)] = &[
    ("*", "ext_wr_addr", "word address: bits 1..0 select a byte"),
    ("*", "ext_rd_addr", "word address: bits 1..0 select a byte"),
    ("*", "rd_pipe_reg", "read-latency shift register"),
    (
        "hw/rtl/nlb_regs.v",
        "stat_bank_in_use",
        "the pipeline's per-bank flags, indexed by bank number",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "r_value",
        "array of the four counter banks' outputs",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "r_valid",
        "array of the four counter banks' valid flags",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "s_res_len",
        "packet length saturated to 16 bits for the byte counters",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "sel_index",
        "counter index split into bank lanes (internal banking)",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "sel_family",
        "counter family split into the four banks (internal banking)",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "sim_cnt_preset_index",
        "simulation-only preset hook (NLB_SIM_HOOKS): a counter index widened to compare with \
         the table depth and split into bank lanes, not a register word",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "sim_go",
        "simulation-only preset hook (NLB_SIM_HOOKS): the four families' preset enables",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "s_res_rule",
        "a result's rule id widened to compare with the table depth",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "s_res_backend",
        "a result's backend id widened to compare with the table depth",
    ),
    (
        "hw/rtl/nlb_spi_flash.v",
        "width_m1",
        "bytes per transfer - 1 to bits: (n + 1) * 8",
    ),
    (
        "hw/rtl/nlb_top.v",
        "rx_first",
        "packet counts: one more per first beat",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "d_value",
        "array of the two drop-counter banks' outputs",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "d_valid",
        "array of the two drop-counter banks' valid flags",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "la_main_reg",
        "the read adder's 64-bit lanes split into 32-bit halves with a carry (internal pipeline)",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "la_extra_reg",
        "the read adder's 64-bit lanes split into 32-bit halves with a carry (internal pipeline)",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "lb_lo_reg",
        "the read adder's low halves with their carry bit (internal pipeline)",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "s_drop_len",
        "a dropped frame's length saturated to 16 bits for the byte counters",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "acc_n_reg",
        "receive drops summed per reason (index 1: NO_ROOM_BUFFER) until the drop banks are free",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "acc_b_reg",
        "the bytes of the receive drops summed per reason (index 1: NO_ROOM_BUFFER)",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "acc_some",
        "which of the two per-reason drop sums holds drops",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "ai",
        "loop index over the two per-reason drop sums",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "s_drop_valid",
        "one dropped frame, zero-padded to the 8-bit count of a drop sum",
    ),
    (
        "hw/rtl/nlb_counters.v",
        "drop_bytes",
        "a dropped frame's bytes (16 bits, saturated), zero-padded to the 24-bit sum",
    ),
    ("hw/rtl/nlb_top.v", "k", "tkeep bits counted one by one"),
    (
        "hw/rtl/nlb_top.v",
        "q_ctrl",
        "the receive queue's control bits (bit 0: the bank active at the first beat)",
    ),
    (
        "hw/rtl/nlb_top.v",
        "inj_port_first",
        "packet counts per bank: one more per injected first beat",
    ),
    (
        "hw/rtl/nlb_top.v",
        "drop_valid_reg",
        "packet counts per bank: one less per frame dropped",
    ),
    (
        "hw/rtl/nlb_top.v",
        "fb",
        "loop index over the two banks compared with a one-bit bank number",
    ),
    (
        "hw/rtl/nlb_top.v",
        "m_res_valid",
        "packet counts: one less per result",
    ),
    (
        "hw/rtl/nlb_spi_flash.v",
        "out_reg",
        "the MOSI shift register",
    ),
    (
        "hw/rtl/nlb_spi_flash.v",
        "in_reg",
        "the MISO shift register",
    ),
    (
        "hw/rtl/nlb_spi_flash.v",
        "tx_aligned",
        "the first bit out of the shift register",
    ),
    (
        "hw/rtl/nlb_top.v",
        "in_flight_reg",
        "array of per-bank packet counts",
    ),
    ("hw/rtl/nlb_top.v", "fb", "loop variable"),
];

/// Literal selects, shifts and zero pads in Verilog text (comments removed): (line, signal,
/// text).
fn scan_verilog(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut in_block_comment = false;
    for (n, raw) in text.lines().enumerate() {
        let mut line = String::new();
        let mut rest = raw;
        loop {
            if in_block_comment {
                match rest.find("*/") {
                    Some(k) => {
                        rest = &rest[k + 2..];
                        in_block_comment = false;
                    }
                    None => break,
                }
            } else {
                match (rest.find("/*"), rest.find("//")) {
                    (Some(b), c) if c.is_none_or(|c| b < c) => {
                        line.push_str(&rest[..b]);
                        rest = &rest[b + 2..];
                        in_block_comment = true;
                    }
                    (_, Some(c)) => {
                        line.push_str(&rest[..c]);
                        break;
                    }
                    _ => {
                        line.push_str(rest);
                        break;
                    }
                }
            }
        }
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // A select `name[digits]` or `name[digits:digits]` (declarations `wire [31:0] x`
            // have a space or keyword before the bracket, not an identifier).
            if b[i] == b'[' && i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
                let start = line[..i]
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(0, |k| k + 1);
                let name = &line[start..i];
                if let Some(end) = line[i..].find(']') {
                    let inside = &line[i + 1..i + end];
                    let literal = !inside.is_empty()
                        && inside.split(':').all(|p| {
                            !p.trim().is_empty() && p.trim().bytes().all(|c| c.is_ascii_digit())
                        });
                    if literal && !name.starts_with(|c: char| c.is_ascii_digit()) {
                        out.push((n + 1, name.to_string(), format!("{name}[{inside}]")));
                    }
                }
            }
            if (line[i..].starts_with("<<") || line[i..].starts_with(">>"))
                && !line[i..].starts_with("<<<")
            {
                let after = line[i + 2..].trim_start();
                if after.starts_with(|c: char| c.is_ascii_digit()) {
                    let lit: String = after
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '\'')
                        .collect();
                    let name = operand_before(&line[..i]);
                    out.push((n + 1, name, format!("{} {lit}", &line[i..i + 2])));
                }
                i += 2;
                continue;
            }
            // `x & 32'hFFFF_F000`: a mask by a literal.
            if b[i] == b'&' && !line[i..].starts_with("&&") && (i == 0 || b[i - 1] != b'&') {
                let after = line[i + 1..].trim_start();
                let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
                if !digits.is_empty() && after[digits.len()..].starts_with('\'') {
                    let lit: String = after
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '\'' || *c == '_')
                        .collect();
                    out.push((n + 1, operand_before(&line[..i]), format!("& {lit}")));
                }
            }
            // `{31'd0, x}`: a field placed by padding it with a literal count of zeros (a
            // replication `{N{1'b0}}` has no comma after its zero and is not one).
            if b[i] == b'{' {
                let after = line[i + 1..].trim_start();
                let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
                if !digits.is_empty() {
                    let tail = &after[digits.len()..];
                    let zero = ["'d0", "'b0", "'h0"].iter().find(|z| tail.starts_with(**z));
                    if let Some(z) = zero {
                        let rest = tail[z.len()..].trim_start();
                        if let Some(rest) = rest.strip_prefix(',') {
                            let name: String = rest
                                .trim_start()
                                .chars()
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect();
                            let shown: String = after.chars().take_while(|&c| c != '}').collect();
                            out.push((n + 1, name, format!("{{{shown}}}")));
                        }
                    }
                }
            }
            i += 1;
        }
    }
    out
}

/// The identifier just before an operator (`rd_pipe_reg << 1` gives `rd_pipe_reg`).
fn operand_before(text: &str) -> String {
    let t = text.trim_end().trim_end_matches(')');
    let start = t
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |k| k + 1);
    t[start..].to_string()
}

fn rtl_findings() -> Vec<String> {
    let root = repo_root();
    let mut bad = Vec::new();
    for file in RTL_FILES {
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (line, name, what) in scan_verilog(&text) {
            let ok = RTL_ALLOWED
                .iter()
                .any(|(f, s, _)| (*f == "*" || f == file) && !name.is_empty() && *s == name);
            if !ok {
                bad.push(format!("  {file}:{line}: `{what}`"));
            }
        }
    }
    bad
}

#[test]
fn no_hand_written_bit_select_of_a_register_field_in_rtl() {
    let bad = rtl_findings();
    assert!(
        bad.is_empty(),
        "{} literal bit selects, shifts or zero pads in register-decoding RTL. Use the \
         generated NLB_REG_<BLOCK>_<REG>_<FIELD>_LSB/_W (and _WIDE_LSB) of nlb_regmap.vh; if \
         the signal is not a register word, add it to RTL_ALLOWED in {} with the reason:\n{}",
        bad.len(),
        file!(),
        bad.join("\n")
    );
}

#[test]
fn a_planted_rtl_counter_select_slice_is_caught() {
    let text = "wire [7:0] kind = select_reg[31:24]; // the kind\n\
                assign x = {31'd0, busy_reg} | (y << 8);\n\
                /* old: select_reg[23:0] */ wire [NLB_W-1:0] ok = select_reg[NLB_LSB +: NLB_W];\n";
    let found: Vec<String> = scan_verilog(text)
        .into_iter()
        .map(|(l, _, w)| format!("{l}:{w}"))
        .collect();
    assert_eq!(
        found,
        ["1:select_reg[31:24]", "2:{31'd0, busy_reg}", "2:<< 8"]
    );
}

#[test]
fn every_rtl_allowlist_entry_is_still_needed() {
    let root = repo_root();
    let mut seen: Vec<(String, String)> = Vec::new();
    for file in RTL_FILES {
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        seen.extend(
            scan_verilog(&text)
                .into_iter()
                .map(|(_, name, _)| (file.to_string(), name)),
        );
    }
    let stale: Vec<String> = RTL_ALLOWED
        .iter()
        .filter(|(f, s, _)| {
            !seen
                .iter()
                .any(|(file, name)| (*f == "*" || f == file) && name == s)
        })
        .map(|(f, s, _)| format!("  {f}: {s}"))
        .collect();
    assert!(
        stale.is_empty(),
        "RTL allowlist entries that match nothing (remove them):\n{}",
        stale.join("\n")
    );
}
