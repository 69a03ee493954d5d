//! The image reader refuses what it does not understand, with clear errors, and never panics.

use flowtable_compiler::image::{FORMAT_VERSION, HEADER_LEN};
use flowtable_compiler::{compile, CompileOptions, HealthState, Image, ImageError};
use nlb_config::parse_config;
use nlb_hw::hash::crc32c;
use proptest::prelude::*;

const CONFIG: &str = "\
instances:
  - {name: a, ip: 192.0.2.1, mac: 02:00:00:00:00:01}
  - {name: b, ip: 2001:db8::2, mac: 02:00:00:00:00:02}
targetPools:
  - {name: p, instances: [a, b]}
forwardingRules:
  - {name: r, IPAddress: 203.0.113.1, portRange: \"80\", target: p, sourceRanges: [198.51.100.0/24]}
";

fn image_bytes() -> Vec<u8> {
    let (c, d) = parse_config("t.yaml", CONFIG);
    assert!(d.is_empty(), "{d}");
    compile(&c, &HealthState::new(), &CompileOptions::default())
        .unwrap()
        .image(3)
        .write()
        .unwrap()
}

/// Recomputes the header CRC and every section CRC, walking the documented layout.
fn fix_crcs(b: &mut [u8]) {
    let crc = crc32c(&b[..68]);
    b[68..72].copy_from_slice(&crc.to_le_bytes());
    let mut at = HEADER_LEN;
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + len > b.len() {
            break;
        }
        let mut input = b[at..at + 12].to_vec();
        input.extend_from_slice(&b[at + 16..at + 16 + len]);
        let crc = crc32c(&input);
        b[at + 12..at + 16].copy_from_slice(&crc.to_le_bytes());
        at += 16 + len;
    }
}

#[test]
fn bad_magic() {
    let mut b = image_bytes();
    b[0] = b'X';
    let e = Image::read(&b).unwrap_err();
    assert!(matches!(e, ImageError::BadMagic { .. }), "{e}");
    assert!(e.to_string().contains("not a table image"));
    assert!(matches!(
        Image::read(b"NLB"),
        Err(ImageError::BadMagic { .. })
    ));
}

#[test]
fn unknown_format_version() {
    let mut b = image_bytes();
    b[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    fix_crcs(&mut b);
    let e = Image::read(&b).unwrap_err();
    assert_eq!(
        e,
        ImageError::UnsupportedFormat {
            found: FORMAT_VERSION + 1
        }
    );
    assert!(
        e.to_string().contains("format version 2 is not supported"),
        "{e}"
    );
}

#[test]
fn wrong_regmap_version() {
    let mut b = image_bytes();
    b[12..16].copy_from_slice(&99u32.to_le_bytes());
    fix_crcs(&mut b);
    let e = Image::read(&b).unwrap_err();
    assert!(
        matches!(e, ImageError::RegmapMismatch { found: 99, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("recompile"), "{e}");
}

#[test]
fn unknown_profile() {
    let mut b = image_bytes();
    b[16..20].copy_from_slice(&77u32.to_le_bytes());
    fix_crcs(&mut b);
    assert_eq!(Image::read(&b).unwrap_err(), ImageError::UnknownProfile(77));
}

#[test]
fn crc_mismatches() {
    let mut b = image_bytes();
    b[30] ^= 1; // generation byte in the header
    assert!(matches!(Image::read(&b), Err(ImageError::HeaderCrc { .. })));
    let mut b = image_bytes();
    let last = b.len() - 1;
    b[last] ^= 0x80; // a symbol byte
    let e = Image::read(&b).unwrap_err();
    assert!(
        matches!(&e, ImageError::SectionCrc { section, .. } if section == "SYMBOLS"),
        "{e}"
    );
}

#[test]
fn truncated_and_trailing_bytes() {
    let b = image_bytes();
    let mut short = b[..b.len() - 5].to_vec();
    fix_crcs(&mut short);
    assert!(Image::read(&short).is_err());
    let mut long = b.clone();
    long.extend_from_slice(&[0; 4]);
    let n = long.len() as u32;
    long[64..68].copy_from_slice(&n.to_le_bytes());
    fix_crcs(&mut long);
    let e = Image::read(&long).unwrap_err();
    assert!(e.to_string().contains("after the last section"), "{e}");
}

#[test]
fn entries_outside_the_table_are_refused() {
    let mut b = image_bytes();
    // First record of the VIP section (after header + NIC section of 16 + 44 bytes).
    let vip = HEADER_LEN + 16 + 44;
    assert_eq!(
        u16::from_le_bytes([b[vip], b[vip + 1]]),
        2,
        "VIP section id"
    );
    b[vip + 16..vip + 20].copy_from_slice(&u32::MAX.to_le_bytes());
    fix_crcs(&mut b);
    let e = Image::read(&b).unwrap_err();
    assert!(
        e.to_string().contains("out of range") || e.to_string().contains("out of order"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Image::read(&bytes);
        let mut with_magic = b"NLBTBLIM".to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = Image::read(&with_magic);
    }

    #[test]
    fn mutated_images_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut b = image_bytes();
        for (i, v) in &flips {
            let i = i.index(b.len());
            b[i] = *v;
        }
        if truncate {
            b.truncate(cut.index(b.len()));
        }
        // With CRCs fixed the decoder behind them sees the damage too.
        let _ = Image::read(&b);
        if b.len() >= HEADER_LEN {
            fix_crcs(&mut b);
            if let Ok(img) = Image::read(&b) {
                // Whatever decodes writes back to the same bytes.
                prop_assert_eq!(img.write().unwrap(), b);
            }
        }
    }
}

/// Every byte of an image set to 0, 1 and 0xff in turn, its CRCs fixed: what still decodes
/// writes back to the same bytes (the reader takes an image only in the form the writer
/// writes: an empty table entry or a trailing empty Maglev slot, which the writer never
/// stores, is refused).
#[test]
fn every_single_byte_change_that_decodes_writes_back_the_same() {
    let orig = image_bytes();
    for i in 0..orig.len() {
        for v in [0u8, 1, 0xff] {
            let mut b = orig.clone();
            b[i] = v;
            fix_crcs(&mut b);
            if let Ok(img) = Image::read(&b) {
                assert_eq!(img.write().unwrap(), b, "byte {i} set to {v:#x}");
            }
        }
    }
}
