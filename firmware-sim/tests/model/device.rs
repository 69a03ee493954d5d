//! The simulated device's own registers (identity, block list, inject queue, flash port) and
//! the pcap helpers.

use crate::common;

use common::*;
use firmware_sim::device::{block_header, BOARD_ID_SIM};
use firmware_sim::pcap::{read_frames, FrameWriter, PcapError};
use firmware_sim::{FlashPort, ModelDevice, PortEffect, RegError};
use nlb_hw::blocks::{self, fw_id, queues as qb};
use nlb_hw::enums::{Reason, Verdict};
use nlb_hw::layouts::InjectHeader;
use nlb_hw::{Profile, DESIGN_VERSION, REGMAP_VERSION};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn firmware_id_and_the_block_list() {
    for p in nlb_hw::PROFILES {
        let mut d = ModelDevice::new(p);
        assert_eq!(d.read32(fw_id::DESIGN_VERSION).unwrap(), DESIGN_VERSION);
        assert_eq!(d.read32(fw_id::REGMAP_VERSION).unwrap(), REGMAP_VERSION);
        assert_eq!(d.read32(fw_id::BOARD_ID).unwrap(), BOARD_ID_SIM);
        assert_eq!(d.read32(fw_id::PROFILE_ID).unwrap(), p.id);
        assert_eq!(d.read32(fw_id::CAP_CT_BUCKETS).unwrap(), p.ct_buckets);
        assert_eq!(d.read32(fw_id::CAP_MAGLEV_SLOTS).unwrap(), p.maglev_slots);
        assert_eq!(d.read32(fw_id::CAP_QUEUE_DEPTH).unwrap(), p.queue_depth);
        // Walk the list as a driver does.
        let mut seen = Vec::new();
        let mut at = 0u32;
        loop {
            let ty = d.read32(at).unwrap();
            let ver = d.read32(at + 4).unwrap();
            seen.push((at, ty, ver));
            at = d.read32(at + 8).unwrap();
            if at == 0 {
                break;
            }
        }
        let want: Vec<_> = blocks::ALL
            .iter()
            .map(|(_, b, t, v)| (*b, *t, *v))
            .collect();
        assert_eq!(seen, want);
    }
}

#[test]
fn bad_offsets_are_refused() {
    let mut d = ModelDevice::new(Profile::by_name("sim").unwrap());
    assert_eq!(d.read32(2), Err(RegError::Unaligned { offset: 2 }));
    assert_eq!(
        d.write32(0x10000, 0),
        Err(RegError::OutOfRange { offset: 0x10000 })
    );
    // Past the queues block's registers and past the dma block's: unmapped.
    assert_eq!(
        d.read32(blocks::mem::BASE - 4).unwrap(),
        0,
        "unmapped reads 0"
    );
    assert_eq!(d.read32(0x5FFC).unwrap(), 0, "unmapped reads 0");
}

#[test]
fn injected_frames_go_to_the_given_backend() {
    let mut d = standard_device();
    let f = udp(ip("198.51.100.10"), 1, ip(VIP4), 1500, &[7u8; 37]);
    let h = InjectHeader {
        backend: 2,
        pool: 1,
        frame_len: f.len() as u16,
    };
    for (i, w) in h.pack().unwrap().iter().enumerate() {
        d.write32(qb::INJECT_HEADER + 4 * i as u32, *w).unwrap();
    }
    for (i, c) in f.chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        d.write32(qb::INJECT_DATA + 4 * i as u32, u32::from_le_bytes(w))
            .unwrap();
    }
    assert_eq!(d.read32(qb::INJECT_STATUS).unwrap(), 64);
    d.write32(qb::INJECT_PUSH, 1).unwrap();
    let sent = d.take_injected();
    assert_eq!(sent.len(), 1);
    let r = sent[0].result;
    assert_eq!(
        (r.verdict, r.reason, r.backend),
        (Verdict::Forward, Reason::Injected, Some(2))
    );
    let t = d.bank(0);
    verify_forwarded(
        &f,
        &sent[0].frame,
        t.pools[1].delivery,
        &t.backends[2],
        d.settings(),
    );
    assert_eq!(d.counters().reason(Reason::Injected).packets, 1);
    // An invalid backend is a counted drop.
    let bad = InjectHeader { backend: 999, ..h };
    d.write32(qb::INJECT_HEADER, bad.pack().unwrap()[0])
        .unwrap();
    d.write32(qb::INJECT_PUSH, 1).unwrap();
    let sent = d.take_injected();
    assert_eq!(sent[0].result.reason, Reason::NoBackend);
}

/// The inject queue holds what the device transmitted until the harness (the wire) takes it:
/// `inject_status` counts the free entries down, a push with none free is dropped before the
/// pipeline and counted, and taking the frames frees the entries. Nothing grows beyond the
/// queue depth however long nobody takes them.
#[test]
fn the_inject_queue_is_bounded_by_its_depth() {
    let mut d = standard_device();
    let depth = d.profile().queue_depth;
    assert_eq!(depth, 64, "the sim profile (hw/regmap.toml)");
    let f = udp(ip("198.51.100.10"), 1, ip(VIP4), 1500, &[7u8; 37]);
    let h = InjectHeader {
        backend: 2,
        pool: 1,
        frame_len: f.len() as u16,
    };
    for (i, w) in h.pack().unwrap().iter().enumerate() {
        d.write32(qb::INJECT_HEADER + 4 * i as u32, *w).unwrap();
    }
    for (i, c) in f.chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        d.write32(qb::INJECT_DATA + 4 * i as u32, u32::from_le_bytes(w))
            .unwrap();
    }
    for n in 0..depth {
        assert_eq!(d.read32(qb::INJECT_STATUS).unwrap(), depth - n);
        d.write32(qb::INJECT_PUSH, 1).unwrap();
    }
    assert_eq!(d.read32(qb::INJECT_STATUS).unwrap(), 0, "full");
    for _ in 0..3 {
        d.write32(qb::INJECT_PUSH, 1).unwrap();
    }
    assert_eq!(d.inject_overflows(), 3);
    // Only the frames that got an entry ran through the pipeline.
    assert_eq!(
        d.counters().reason(Reason::Injected).packets,
        u64::from(depth)
    );
    let sent = d.take_injected();
    assert_eq!(sent.len(), depth as usize);
    assert!(sent.iter().all(|s| s.result.verdict == Verdict::Forward));
    assert_eq!(d.read32(qb::INJECT_STATUS).unwrap(), depth, "free again");
    d.write32(qb::INJECT_PUSH, 1).unwrap();
    assert_eq!(d.take_injected().len(), 1);
    assert_eq!(d.inject_overflows(), 3);
}

#[derive(Debug, Default)]
struct Recorder {
    log: Arc<Mutex<Vec<(u32, u32)>>>,
}

impl FlashPort for Recorder {
    fn read32(&mut self, offset: u32) -> u32 {
        offset ^ 0xabcd_0000
    }
    fn write32(&mut self, offset: u32, value: u32) -> PortEffect {
        self.log.lock().unwrap().push((offset, value));
        if offset == blocks::reboot::REBOOT && value == 0x5245_424F {
            PortEffect::Reconfigure
        } else {
            PortEffect::None
        }
    }
}

#[test]
fn flash_blocks_are_routed_to_the_flash_port() {
    let mut d = standard_device();
    // Without a flash model: headers only.
    assert_eq!(
        d.read32(blocks::spi_flash::BASE).unwrap(),
        blocks::spi_flash::TYPE_WORD
    );
    assert_eq!(
        d.read32(blocks::reboot::BASE + 8).unwrap(),
        blocks::reboot::NEXT
    );
    assert_eq!(d.read32(blocks::spi_flash::TXRX).unwrap(), 0);
    assert_eq!(
        block_header(blocks::queues::BASE + 8),
        Some(blocks::mem::BASE)
    );
    assert_eq!(block_header(blocks::mem::BASE + 8), Some(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    d.set_flash(Box::new(Recorder { log: log.clone() }));
    assert_eq!(
        d.read32(blocks::spi_flash::TXRX).unwrap(),
        blocks::spi_flash::TXRX ^ 0xabcd_0000
    );
    d.write32(blocks::spi_flash::CTRL, 1).unwrap();
    // A reboot resets the device: tables gone, pipeline disabled.
    d.write32(blocks::reboot::REBOOT, 0x5245_424F).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            (blocks::spi_flash::CTRL, 1),
            (blocks::reboot::REBOOT, 0x5245_424F)
        ]
    );
    assert!(!d.bank(0).pools[0].valid);
    assert_eq!(d.read32(nlb_hw::blocks::ctrl::ENABLE).unwrap(), 0);
    assert_eq!(
        d.read32(blocks::spi_flash::TXRX).unwrap(),
        blocks::spi_flash::TXRX ^ 0xabcd_0000,
        "the flash model survives the reboot"
    );
}

#[test]
fn pcap_round_trip_and_bad_input() {
    let frames = [
        tcp(ip("10.0.0.1"), 1, ip(VIP4), 80, SYN, b""),
        udp(ip("2001:db8::1"), 2, ip(VIP6), 53, b"abc"),
    ];
    let mut w = FrameWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(Duration::from_micros(1_700_000_000_000_000 + i as u64), f)
            .unwrap();
    }
    let bytes = w.into_inner();
    // Classic pcap magic, little-endian, link type 1.
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 1);
    let back = read_frames(&bytes[..]).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[1].data, frames[1]);
    assert_eq!(
        back[1].timestamp,
        Duration::from_micros(1_700_000_000_000_001)
    );
    assert!(matches!(
        read_frames(&b"not a pcap file at all"[..]),
        Err(PcapError::Format(_))
    ));
    let cut = &bytes[..bytes.len() - 5];
    assert!(matches!(
        read_frames(cut),
        Err(PcapError::Packet { index: 1, .. })
    ));
}

// ---- table window and conntrack block commands (docs/regmap.md, `table_cmd`) ----------------

use nlb_hw::blocks::{conntrack as ctb, table as tb};
use nlb_hw::enums::{Table, TableCmd};
use nlb_hw::layouts::{BackendEntry, CtEntry};
use nlb_hw::Tables;

fn at(cmd: TableCmd, index: u32) -> u32 {
    tb::Cmd { op: cmd, index }.word().unwrap()
}

fn data(d: &mut ModelDevice, base: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| d.read32(base + 4 * i).unwrap())
        .collect()
}

#[test]
fn table_commands_carry_the_index_and_a_write_leaves_the_stored_entry_readable() {
    let p = Profile::by_name("sim").unwrap();
    let mut d = ModelDevice::new(p);
    let mut reference = Tables::empty(p);
    let entry = BackendEntry {
        valid: true,
        is_ipv6: false,
        addr: 0xffff_0a00_0001,
        mac: 0x02_00_00_00_00_07,
    };
    let words = entry.pack().unwrap().to_vec();
    let n = words.len();
    // Junk past the entry's width in its last word, and in the word after the entry.
    let spare = BackendEntry::WORDS * 32 - BackendEntry::WIDTH;
    let mut written = words.clone();
    written[n - 1] |= u32::MAX << (32 - spare);
    written.push(0xdead_beef);
    for (i, w) in written.iter().enumerate() {
        d.write32(tb::DATA + 4 * i as u32, *w).unwrap();
    }
    let backend_bank1 = tb::Select {
        table: Table::Backend,
        bank: true,
    };
    d.write32(tb::SELECT, backend_bank1.word()).unwrap();
    d.write32(tb::CMD, at(TableCmd::WriteAt, 4095)).unwrap();
    assert_eq!(d.read32(tb::STATUS).unwrap(), 0);
    assert_eq!(d.read32(tb::INDEX).unwrap(), 4095, "WRITE_AT sets index");
    reference.write_entry(Table::Backend, 4095, &words).unwrap();
    assert_eq!(d.bank(1), &reference, "exactly that entry of bank 1");
    // The data words now hold what the memory stores: the junk past the width is gone, the
    // word after the entry is untouched.
    let mut stored = words.clone();
    stored.push(0xdead_beef);
    assert_eq!(data(&mut d, tb::DATA, n + 1), stored);

    // READ_AT of another entry, then the old two-register form.
    d.write32(tb::CMD, at(TableCmd::ReadAt, 3)).unwrap();
    assert_eq!(d.read32(tb::INDEX).unwrap(), 3);
    assert_eq!(data(&mut d, tb::DATA, n), vec![0; n]);
    d.write32(tb::INDEX, 4095).unwrap();
    d.write32(tb::CMD, TableCmd::Read.value()).unwrap();
    assert_eq!(data(&mut d, tb::DATA, n), words);
    assert_eq!(d.read32(tb::STATUS).unwrap(), 0);

    // Errors change nothing (not even `index` or the data words): an index past the table,
    // the largest index the command can carry, WRITE/READ with index bits, unknown commands.
    for bad in [
        at(TableCmd::WriteAt, 4096),
        at(TableCmd::ReadAt, 0xff_ffff),
        TableCmd::Write.value() | 0x100,
        TableCmd::Read.value() | 0x8000_0000,
        0,
        at(TableCmd::ReadAt, 1) + 1,
    ] {
        d.write32(tb::DATA, 0x1234).unwrap();
        d.write32(tb::CMD, bad).unwrap();
        assert_eq!(d.read32(tb::STATUS).unwrap(), 2, "cmd {bad:#x}");
        assert_eq!(d.read32(tb::INDEX).unwrap(), 4095, "cmd {bad:#x}");
        assert_eq!(d.read32(tb::DATA).unwrap(), 0x1234, "cmd {bad:#x}");
        assert_eq!(d.bank(1), &reference, "cmd {bad:#x}");
    }
    d.write32(tb::CMD, at(TableCmd::ReadAt, 0)).unwrap();
    assert_eq!(
        d.read32(tb::STATUS).unwrap(),
        0,
        "a good command clears the error"
    );
}

#[test]
fn conntrack_commands_carry_the_index_and_a_write_leaves_the_stored_entry_readable() {
    let p = Profile::by_name("sim").unwrap();
    let mut d = ModelDevice::new(p);
    let last = p.ct_buckets * p.ct_ways - 1;
    let e = CtEntry {
        valid: true,
        protocol: 17,
        src_port: 5353,
        dst_port: 53,
        src_addr: 0xffff_c633_6407,
        dst_addr: 0xffff_cb00_7101,
        backend: 9,
        rule: 0xabc,
        flags: 1,
        timestamp: 77,
    };
    let words = e.pack().unwrap();
    let mut written = words.to_vec();
    written[CtEntry::WORDS - 1] |= u32::MAX << (CtEntry::WIDTH % 32);
    for (i, w) in written.iter().enumerate() {
        d.write32(ctb::DATA + 4 * i as u32, *w).unwrap();
    }
    d.write32(ctb::CMD, at(TableCmd::WriteAt, last)).unwrap();
    assert_eq!(d.read32(ctb::STATUS).unwrap(), 0);
    assert_eq!(d.read32(ctb::INDEX).unwrap(), last);
    assert_eq!(d.conntrack().entry(last), Some(&e));
    assert_eq!(d.read32(ctb::COUNT).unwrap(), 1);
    assert_eq!(data(&mut d, ctb::DATA, CtEntry::WORDS), words.to_vec());
    // Clearing valid with WRITE_AT (the same words otherwise) counts down.
    let invalid = CtEntry { valid: false, ..e }.pack().unwrap();
    d.write32(ctb::DATA, invalid[0]).unwrap();
    d.write32(ctb::CMD, at(TableCmd::WriteAt, last)).unwrap();
    assert_eq!(d.read32(ctb::COUNT).unwrap(), 0);
    d.write32(ctb::CMD, at(TableCmd::ReadAt, 0)).unwrap();
    assert_eq!(
        data(&mut d, ctb::DATA, CtEntry::WORDS),
        vec![0; CtEntry::WORDS]
    );
    d.write32(ctb::INDEX, last).unwrap();
    d.write32(ctb::CMD, TableCmd::Read.value()).unwrap();
    assert_eq!(d.read32(ctb::DATA).unwrap(), invalid[0]);
    for bad in [
        at(TableCmd::WriteAt, last + 1),
        TableCmd::Write.value() | 0x100,
    ] {
        d.write32(ctb::CMD, bad).unwrap();
        assert_eq!(d.read32(ctb::STATUS).unwrap(), 2, "cmd {bad:#x}");
        assert_eq!(d.read32(ctb::INDEX).unwrap(), last);
    }
}
