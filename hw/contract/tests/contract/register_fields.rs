//! Register fields and wide values generated from `hw/regmap.toml`, against words worked out
//! by hand from the bit positions the register map documents (docs/regmap.md).

use nlb_hw::blocks::{counters, ctrl, queues, reboot, spi_flash, table};
use nlb_hw::enums::{BootRejection, CounterKind, CounterSnapshot, RebootKey, Table, TableCmd};
use nlb_hw::model::Regmap;
use nlb_hw::LayoutError;

#[test]
fn table_window_words() {
    // select: bits 7..0 table, bit 8 bank. POOL = 3.
    let s = table::Select {
        table: Table::Pool,
        bank: true,
    };
    assert_eq!(s.word(), 0x0000_0103);
    assert_eq!(table::Select::from_word(0x0000_0103), Ok(s));
    // Bits outside the fields are ignored; an undefined table id is an error.
    assert_eq!(
        table::Select::from_word(0xFFFF_FE05).unwrap().table,
        Table::Backend
    );
    assert!(matches!(
        table::Select::from_word(0x0000_0007),
        Err(LayoutError::BadEnum { value: 7, .. })
    ));
    // cmd: bits 3..0 op, bits 31..4 index. WRITE_AT = 3.
    let c = table::Cmd {
        op: TableCmd::WriteAt,
        index: 0x12_3456,
    };
    assert_eq!(c.word(), Ok(0x0123_4563));
    let c = table::Cmd {
        op: TableCmd::ReadAt,
        index: 0xFFF_FFFF,
    };
    assert_eq!(c.word(), Ok(0xFFFF_FFF4));
    let too_far = table::Cmd {
        op: TableCmd::ReadAt,
        index: 0x1000_0000,
    };
    assert!(matches!(
        too_far.word(),
        Err(LayoutError::Overflow {
            field: "index",
            width: 28,
            ..
        })
    ));
    assert_eq!(table::cmd::INDEX.max(), 0xFFF_FFFF);
    assert_eq!(table::cmd::INDEX.mask(), 0xFFFF_FFF0);
    // status: bit 0 busy, bit 1 error.
    assert_eq!(table::status::ERROR.flag(true), 2);
    assert!(!table::Status::from_word(2).busy);
    assert!(table::Status::from_word(2).error);
    assert_eq!(table::status::DEFINED, 3);
}

#[test]
fn counter_select_and_snapshot_words() {
    // select: bits 31..24 kind, bits 23..0 index. REASON = 2.
    let s = counters::Select {
        kind: CounterKind::Reason,
        index: 19,
    };
    assert_eq!(s.word(), Ok(0x0200_0013));
    assert_eq!(counters::select::KIND.get(0x0300_0001), 3);
    assert_eq!(counters::select::INDEX.get(0x0300_0001), 1);
    let s = counters::Select {
        kind: CounterKind::Rule,
        index: 1 << 24,
    };
    assert!(
        s.word().is_err(),
        "an index past bit 23 would change the kind"
    );
    let snap = counters::Snapshot {
        op: CounterSnapshot::LatchClear,
    };
    assert_eq!(snap.word(), 2);
    // The four 64-bit counters: low word first.
    assert_eq!(
        counters::packets::REGISTERS,
        [counters::PACKETS_LO, counters::PACKETS_HI]
    );
    assert_eq!(
        counters::bytes::join([0x89AB_CDEF, 0x0123_4567]),
        0x0123_4567_89AB_CDEF
    );
    assert_eq!(
        counters::drops::split(0x0123_4567_89AB_CDEF),
        [0x89AB_CDEF, 0x0123_4567]
    );
}

#[test]
fn ctrl_wide_values_and_resets() {
    // local_mac: lo = bits 31..0, hi = bits 47..32.
    assert_eq!(
        ctrl::local_mac::REGISTERS,
        [ctrl::LOCAL_MAC_LO, ctrl::LOCAL_MAC_HI]
    );
    assert_eq!(
        ctrl::local_mac::split(0x0A0B_0C0D_0E0F),
        Ok([0x0C0D_0E0F, 0x0A0B])
    );
    assert!(ctrl::local_mac::split(1 << 48).is_err());
    // The high register holds 16 bits: the rest is ignored when joining.
    assert_eq!(
        ctrl::local_mac::join([0x0C0D_0E0F, 0xFFFF_0A0B]),
        0x0A0B_0C0D_0E0F
    );
    // outer_src_v6: v6_0 holds bits 127..96, v6_3 bits 31..0.
    assert_eq!(
        ctrl::outer_src_v6::REGISTERS,
        [
            ctrl::OUTER_SRC_V6_3,
            ctrl::OUTER_SRC_V6_2,
            ctrl::OUTER_SRC_V6_1,
            ctrl::OUTER_SRC_V6_0
        ]
    );
    let v6 = 0x2001_0db8_0000_0001_0000_0002_0000_0003u128;
    assert_eq!(
        ctrl::outer_src_v6::split(v6),
        [3, 0x0000_0002, 0x0000_0001, 0x2001_0db8]
    );
    assert_eq!(ctrl::outer_src_v6::join([3, 2, 1, 0x2001_0db8]), v6);
    // Reset values (docs/regmap.md): MAC 02:00:00:00:00:01, GUE 6080, /32 and /128.
    assert_eq!(
        ctrl::local_mac::join([ctrl::LOCAL_MAC_LO_RESET, ctrl::LOCAL_MAC_HI_RESET]),
        0x0200_0000_0001
    );
    assert_eq!(ctrl::GUE_PORT_RESET, 6080);
    assert_eq!(ctrl::OUTER_SRC_V4_LEN_RESET, 32);
    assert_eq!(ctrl::OUTER_SRC_V6_LEN_RESET, 128);
    assert_eq!(ctrl::ENABLE_RESET, 0);
    assert_eq!(ctrl::bank_in_use::BANK1.mask(), 2);
}

#[test]
fn flash_and_reboot_words() {
    // spi_flash.ctrl: bit 0 cs, bits 15..8 div, bits 17..16 bytes - 1.
    let c = spi_flash::Ctrl {
        cs: true,
        div: 1,
        bytes_m1: 3,
    };
    assert_eq!(c.word(), Ok(0x0003_0101));
    let c = spi_flash::Ctrl {
        cs: false,
        div: 0,
        bytes_m1: 4,
    };
    assert!(c.word().is_err(), "five bytes per access do not exist");
    assert_eq!(spi_flash::CTRL_RESET, 0x300, "divider 3 after reset");
    assert_eq!(spi_flash::ctrl::DEFINED, 0x0003_FF01);
    assert_eq!(
        spi_flash::Ctrl::from_word(spi_flash::CTRL_RESET),
        spi_flash::Ctrl {
            cs: false,
            div: 3,
            bytes_m1: 0,
        }
    );
    // boot_status: bit 0 fallback, bits 7..4 rejection, bits 31..8 address.
    let s = reboot::BootStatus::from_word(0x0400_0051).unwrap();
    assert!(s.fallback);
    assert_eq!(s.rejection, BootRejection::CrcMismatch);
    assert_eq!(s.address, 0x04_0000);
    assert_eq!(reboot::boot_status::ADDRESS.bits(0x0400_0051), 0x0400_0000);
    assert!(
        reboot::BootStatus::from_word(0xF0).is_err(),
        "code 15 is not defined"
    );
    // reboot: only 'REBO' acts.
    let r = reboot::Reboot {
        key: RebootKey::Reboot,
    };
    assert_eq!(r.word(), u32::from_be_bytes(*b"REBO"));
}

#[test]
fn queue_status_words() {
    // bits 15..0 count, bit 31 overflow.
    let s = queues::PuntStatus {
        count: 5,
        overflow: true,
    };
    assert_eq!(s.word(), 0x8000_0005);
    assert_eq!(
        queues::LearnStatus::from_word(0x8000_FFFF),
        queues::LearnStatus {
            count: 0xFFFF,
            overflow: true,
        }
    );
    assert_eq!(queues::InjectStatus { free: 64 }.word(), 64);
    assert_eq!(queues::irq_mask::DEFINED, 3);
    assert_eq!(queues::PuntPop { pop: true }.word(), 1);
}

#[test]
fn marker_constants() {
    assert_eq!(&nlb_hw::flash_def::MARKER_MAGIC, b"NLBSLOT\0");
    assert_eq!(nlb_hw::flash_def::MARKER_AREA, 4096);
    assert_eq!(nlb_hw::flash_def::Marker::WORDS, 16, "64 bytes");
    assert_eq!(nlb_hw::layouts::SlotMarker::DESIGN_LSB, 36 * 8);
    assert_eq!(nlb_hw::layouts::SlotMarker::CRC_LSB, 60 * 8);
}

/// The regmap text with `old` replaced by `new`, parsed.
fn edited(old: &str, new: &str) -> Result<Regmap, String> {
    let text = nlb_hw::REGMAP_TOML;
    assert!(text.contains(old), "test needs {old}");
    Regmap::parse(&text.replacen(old, new, 1))
}

#[test]
fn inconsistent_fields_are_refused_with_where() {
    let select = r#"{ name = "bank", lsb = 8, width = 1 },"#;
    let err = edited(select, r#"{ name = "bank", lsb = 7, width = 1 },"#).unwrap_err();
    assert!(err.contains("blocks.table.select.bank: overlaps"), "{err}");
    let err = edited(select, r#"{ name = "bank", lsb = 32, width = 1 },"#).unwrap_err();
    assert!(
        err.contains("blocks.table.select.bank: bits 32..32"),
        "{err}"
    );
    let err = edited(
        r#"{ name = "kind", lsb = 24, width = 8, enum = "counter_kind" },"#,
        r#"{ name = "kind", lsb = 24, width = 1, enum = "counter_kind" },"#,
    )
    .unwrap_err();
    assert!(
        err.contains("enum counter_kind value REASON does not fit 1 bits"),
        "{err}"
    );
    let err = edited("reset = 6080,", "reset = 0x10000,").unwrap_err();
    assert!(err.contains("blocks.ctrl.gue_port: reset 0x10000"), "{err}");
    let err = edited(
        r#"registers = ["local_mac_lo", "local_mac_hi"]"#,
        r#"registers = ["local_mac_lo"]"#,
    )
    .unwrap_err();
    assert!(
        err.contains("wide.local_mac: 48 bits need 2 registers, 1 listed"),
        "{err}"
    );
    let err = edited(
        r#"registers = ["packets_lo", "packets_hi"]"#,
        r#"registers = ["packets_lo", "bytes_lo"]"#,
    )
    .unwrap_err();
    assert!(
        err.contains("register bytes_lo is part of two wide values"),
        "{err}"
    );
}
