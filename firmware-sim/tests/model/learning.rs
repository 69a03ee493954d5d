//! Hardware learning (docs/pipeline.md §10, SPEC R12.3) and the host rings (§15), from the
//! rules as written: which packet sees which entry, where the NIC puts it, what the event
//! record says, what happens to a full bucket, and that the rings never pass the host.

use crate::common::hostmem::{bytes, Rings, IOVA};
use crate::common::*;
use firmware_sim::dma::words_of;
use firmware_sim::{BatchOutput, ConnTable, CtOutcome, ModelDevice};
use nlb_hw::blocks::dma;
use nlb_hw::enums::{DmaCmd, DmaError, Event, Table, Verdict};
use nlb_hw::layouts::{CmdDesc, InjectDesc, InjectHeader, MaglevSlot, RingWb};
use nlb_hw::{table_index, FlowKey};

fn learning_device() -> ModelDevice {
    let mut d = standard_device();
    d.write32(dma::HOST_TIME, 1234).unwrap();
    d.write32(
        dma::CTRL,
        dma::Ctrl {
            enable: false,
            hw_learn: true,
        }
        .word(),
    )
    .unwrap();
    d
}

fn client_flow(port: u16) -> FlowKey {
    FlowKey::tuple5(6, ip("198.51.100.7"), port, ip(VIP4), 80)
}

#[test]
fn the_next_packet_of_a_flow_sees_the_entry_the_nic_learned() {
    let mut d = learning_device();
    let mut rings = Rings::attach(&mut d, 4);
    let syn = tcp(ip("198.51.100.7"), 4000, ip(VIP4), 80, SYN, &[]);
    let ack = tcp(ip("198.51.100.7"), 4000, ip(VIP4), 80, ACK, b"x");
    let (r1, _) = send(&mut d, &syn);
    assert_eq!(
        (r1.verdict, r1.conntrack),
        (Verdict::Forward, CtOutcome::Miss)
    );
    // The entry goes to the lowest free way of the flow's TUPLE5 bucket (§7).
    let key = client_flow(4000);
    let ways = d.conntrack().ways();
    let want = table_index(key.hash(), d.conntrack().buckets()) * ways;
    let (r2, _) = send(&mut d, &ack);
    assert_eq!(r2.conntrack, CtOutcome::Hit, "the next packet hits");
    assert_eq!(r2.ct_index, Some(want));
    assert_eq!(r2.backend, r1.backend);
    assert!(r2.event.is_none(), "a hit learns nothing");
    let e = d.conntrack().entry(want).copied().unwrap();
    assert!(e.valid);
    assert_eq!(
        (e.backend, e.rule, e.flags, e.timestamp),
        (r1.backend.unwrap(), 0, 0, 1234)
    );
    let (records, drops) = rings.take_events(&mut d);
    assert_eq!(drops, 0);
    assert_eq!(records.len(), 1, "one LEARN");
    let rec = records[0];
    assert_eq!(rec.event[0].event, Event::Learn);
    assert!(rec.installed);
    assert_eq!(rec.ct_index, want);
}

#[test]
fn in_a_batch_every_later_packet_sees_the_learned_entry() {
    let mut d = learning_device();
    let mut out = BatchOutput::new();
    let syn = tcp(ip("198.51.100.7"), 4001, ip(VIP4), 80, SYN, &[]);
    let ack = tcp(ip("198.51.100.7"), 4001, ip(VIP4), 80, ACK, b"x");
    let other = tcp(ip("198.51.100.8"), 4001, ip(VIP4), 80, ACK, b"y");
    let frames: Vec<&[u8]> = vec![&syn, &other, &ack, &ack, &other];
    d.receive_batch(&frames, &mut out);
    let ct: Vec<CtOutcome> = out.results.iter().map(|r| r.conntrack).collect();
    assert_eq!(
        ct,
        [
            CtOutcome::Miss,
            CtOutcome::Miss,
            CtOutcome::Hit,
            CtOutcome::Hit,
            CtOutcome::Hit
        ],
        "the SYN's flow hits from the packet after it; the other flow from its second packet"
    );
    let learns = out.results.iter().filter(|r| r.event.is_some()).count();
    assert_eq!(learns, 2);
}

#[test]
fn a_full_bucket_is_left_to_the_host_and_said_so() {
    let mut d = learning_device();
    *d.conntrack_mut() = ConnTable::new(1, 2);
    let mut rings = Rings::attach(&mut d, 4);
    for port in [5000, 5001, 5002] {
        send(
            &mut d,
            &tcp(ip("198.51.100.7"), port, ip(VIP4), 80, SYN, &[]),
        );
    }
    let (records, _) = rings.take_events(&mut d);
    let placed: Vec<(bool, u32)> = records.iter().map(|r| (r.installed, r.ct_index)).collect();
    assert_eq!(placed, [(true, 0), (true, 1), (false, 0)]);
    // The third flow misses again (and learns again) until the host settles it.
    let (r, _) = send(
        &mut d,
        &tcp(ip("198.51.100.7"), 5002, ip(VIP4), 80, ACK, &[]),
    );
    assert_eq!(r.conntrack, CtOutcome::Miss);
    assert_eq!(r.event.map(|e| e.event), Some(Event::Learn));
}

#[test]
fn a_syn_selects_anew_and_replaces_the_flows_own_entry() {
    // R4.1: a SYN always selects anew; with hardware learning its entry replaces the flow's
    // own, in the way that held it.
    let mut d = learning_device();
    *d.conntrack_mut() = ConnTable::new(1, 4);
    send(
        &mut d,
        &tcp(ip("198.51.100.7"), 6000, ip(VIP4), 80, SYN, &[]),
    );
    send(
        &mut d,
        &tcp(ip("198.51.100.7"), 6001, ip(VIP4), 80, SYN, &[]),
    );
    let mut e = *d.conntrack().entry(0).unwrap();
    e.backend = 4095; // as if learned under other tables
    d.conntrack_mut().write(0, e).unwrap();
    let (r, _) = send(
        &mut d,
        &tcp(ip("198.51.100.7"), 6000, ip(VIP4), 80, SYN, &[]),
    );
    assert_eq!(r.conntrack, CtOutcome::Miss, "a SYN does not look up");
    assert_eq!(d.conntrack().entry(0).unwrap().backend, r.backend.unwrap());
    assert_eq!(d.conntrack().valid_count(), 2, "replaced, not added");
}

#[test]
fn with_learning_off_the_nic_writes_nothing() {
    let mut d = standard_device();
    d.write32(
        dma::CTRL,
        dma::Ctrl {
            enable: false,
            hw_learn: false,
        }
        .word(),
    )
    .unwrap();
    let mut rings = Rings::attach(&mut d, 4);
    send(
        &mut d,
        &tcp(ip("198.51.100.7"), 7000, ip(VIP4), 80, SYN, &[]),
    );
    assert_eq!(d.conntrack().valid_count(), 0);
    let (records, _) = rings.take_events(&mut d);
    assert_eq!(records.len(), 1);
    assert!(!records[0].installed);
}

#[test]
fn a_full_ring_drops_and_counts_and_never_passes_the_host() {
    let mut d = standard_device();
    let mut rings = Rings::attach(&mut d, 2); // 4 slots
    for port in 0..10u16 {
        send(
            &mut d,
            &tcp(ip("198.51.100.7"), 8000 + port, ip(VIP4), 80, SYN, &[]),
        );
    }
    let (records, drops) = rings.take_events(&mut d);
    assert_eq!((records.len(), drops), (4, 6));
    assert_eq!(d.read32(dma::EVENT_DROPS).unwrap(), 6);
    // Slots given back: the next events land again.
    send(
        &mut d,
        &tcp(ip("198.51.100.7"), 9000, ip(VIP4), 80, SYN, &[]),
    );
    let (records, drops) = rings.take_events(&mut d);
    assert_eq!((records.len(), drops), (1, 6));
    assert_eq!(records[0].event[0].src_port, 9000);
}

/// Sets the command ring up at `base`: 8 slots, enabled.
fn command_ring_at(d: &mut ModelDevice, base: u64) {
    d.write32(dma::CMD_BASE_LO, base as u32).unwrap();
    d.write32(dma::CMD_BASE_HI, (base >> 32) as u32).unwrap();
    let size = dma::CmdSize {
        log2: 3,
        enable: true,
    };
    d.write32(dma::CMD_SIZE, size.word().unwrap()).unwrap();
}

#[test]
fn the_command_ring_writes_and_reads_tables_by_dma() {
    let mut d = standard_device();
    let rings = Rings::attach(&mut d, 2);
    let mem = rings.mem.clone();
    let cmd_ring = IOVA + 0x8_0000;
    let data = IOVA + 0x9_0000;
    let readback = IOVA + 0xA_0000;
    command_ring_at(&mut d, cmd_ring);
    // Maglev slots 100..103 of bank 1 = backends 7, 8, 9, 10 (one word each).
    let slots: Vec<u32> = (7..11).collect();
    mem.write(data, &bytes(&slots));
    let cmds = [
        CmdDesc {
            op: DmaCmd::TableWrite,
            table: Table::Maglev,
            bank: true,
            count: 4,
            index: 100,
            addr: data,
            ..CmdDesc::default()
        },
        CmdDesc {
            op: DmaCmd::TableRead,
            table: Table::Maglev,
            bank: true,
            count: 4,
            index: 100,
            addr: readback,
            ..CmdDesc::default()
        },
        // Beyond the table: an error, counted, the ring goes on.
        CmdDesc {
            op: DmaCmd::TableRead,
            table: Table::Maglev,
            bank: true,
            count: 2,
            index: 131_071,
            addr: readback + 64,
            ..CmdDesc::default()
        },
    ];
    for (i, c) in cmds.iter().enumerate() {
        mem.write(cmd_ring + 32 * i as u64, &bytes(&c.pack().unwrap()));
    }
    d.write32(dma::CMD_HOST, 3).unwrap();
    for (i, b) in (7u16..11).enumerate() {
        assert_eq!(d.bank(1).maglev[100 + i], MaglevSlot { backend: b });
    }
    assert_eq!(words_of(&mem.read(readback, 16)), slots);
    let wb = RingWb::unpack(&words_of(&mem.read(IOVA + 16 * 3, 16))).unwrap();
    assert_eq!(
        (wb.index, wb.errors, wb.error_slot, wb.error_code),
        (3, 1, 2, DmaError::BadIndex)
    );
    // The entry before the one beyond the table was read out (docs/regmap.md, BAD_INDEX:
    // entries before it were done); nothing after it.
    let last = u32::from(d.bank(1).maglev[131_071].backend);
    assert_eq!(words_of(&mem.read(readback + 64, 8)), [last, 0]);
}

/// Where a command's data is not what the NIC can use: an address not 4-byte aligned fails
/// the command before any entry (BAD_ENTRY); data running past what the IOMMU maps stops it at
/// the first entry one of whose words lies in a refused 64-byte line, the entries before it
/// done (DMA_FAULT, counted in dma.faults); a read whose data runs past it writes the lines
/// before the refused one (docs/pipeline.md section 15.2).
#[test]
fn a_command_stops_where_its_data_stops() {
    let mut d = standard_device();
    let rings = Rings::attach(&mut d, 2);
    let mem = rings.mem.clone();
    // The mapped region ends here (Rings::attach: 1 MiB and four punt buffers).
    let end = IOVA + 0x10_0000 + 4 * 9728;
    assert_eq!(end % 64, 0);
    let cmd_ring = IOVA + 0x8_0000;
    command_ring_at(&mut d, cmd_ring);
    let before: Vec<u16> = (0..200).map(|i| d.bank(1).maglev[i].backend).collect();
    // 25 words before the end of the mapping, 40 slots asked for.
    let data = end - 100;
    let values: Vec<u32> = (0..25).map(|i| 1000 + i).collect();
    mem.write(data, &bytes(&values));
    let cmds = [
        CmdDesc {
            op: DmaCmd::TableWrite,
            table: Table::Maglev,
            bank: true,
            count: 4,
            index: 0,
            addr: data + 2,
            ..CmdDesc::default()
        },
        CmdDesc {
            op: DmaCmd::TableWrite,
            table: Table::Maglev,
            bank: true,
            count: 40,
            index: 100,
            addr: data,
            ..CmdDesc::default()
        },
        // 30 slots read into the last mapped line and beyond.
        CmdDesc {
            op: DmaCmd::TableRead,
            table: Table::Maglev,
            bank: true,
            count: 30,
            index: 100,
            addr: end - 64,
            ..CmdDesc::default()
        },
    ];
    for (i, c) in cmds.iter().enumerate() {
        mem.write(cmd_ring + 32 * i as u64, &bytes(&c.pack().unwrap()));
    }
    d.write32(dma::CMD_HOST, 1).unwrap();
    let wb = RingWb::unpack(&words_of(&mem.read(IOVA + 16 * 3, 16))).unwrap();
    assert_eq!((wb.index, wb.error_code), (1, DmaError::BadEntry));
    for (i, b) in before.iter().enumerate().take(4) {
        assert_eq!(d.bank(1).maglev[i].backend, *b, "slot {i} untouched");
    }
    d.write32(dma::CMD_HOST, 2).unwrap();
    let wb = RingWb::unpack(&words_of(&mem.read(IOVA + 16 * 3, 16))).unwrap();
    assert_eq!((wb.index, wb.error_code), (2, DmaError::DmaFault));
    for i in 0..25 {
        assert_eq!(
            u32::from(d.bank(1).maglev[100 + i].backend),
            1000 + i as u32
        );
    }
    for i in 25..40 {
        assert_eq!(
            d.bank(1).maglev[100 + i].backend,
            before[100 + i],
            "slot {} untouched",
            100 + i
        );
    }
    assert_eq!(d.read32(dma::FAULTS).unwrap(), 1);
    d.write32(dma::CMD_HOST, 3).unwrap();
    let wb = RingWb::unpack(&words_of(&mem.read(IOVA + 16 * 3, 16))).unwrap();
    assert_eq!(
        (wb.index, wb.errors, wb.error_code),
        (3, 3, DmaError::DmaFault)
    );
    // The last mapped line holds the first 16 slots read.
    let got = words_of(&mem.read(end - 64, 64));
    let want: Vec<u32> = (0..16)
        .map(|i| u32::from(d.bank(1).maglev[100 + i].backend))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn injected_frames_come_from_the_inject_ring() {
    let mut d = standard_device();
    let rings = Rings::attach(&mut d, 2);
    let mem = rings.mem.clone();
    let ring = IOVA + 0x8_0000;
    let buf = IOVA + 0x9_0000;
    d.write32(dma::INJECT_BASE_LO, ring as u32).unwrap();
    d.write32(dma::INJECT_BASE_HI, (ring >> 32) as u32).unwrap();
    d.write32(
        dma::INJECT_SIZE,
        dma::InjectSize {
            log2: 2,
            enable: true,
        }
        .word()
        .unwrap(),
    )
    .unwrap();
    let f = udp(ip("198.51.100.10"), 1, ip(VIP4), 1500, &[7u8; 37]);
    mem.write(buf, &f);
    let desc = InjectDesc {
        addr: buf,
        header: [InjectHeader {
            backend: 2,
            pool: 1,
            frame_len: f.len() as u16,
        }],
        reserved: 0,
    };
    for slot in 0..4u64 {
        mem.write(ring + 16 * slot, &bytes(&desc.pack().unwrap()));
    }
    d.write32(dma::INJECT_HOST, 4).unwrap();
    let sent = d.take_injected();
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|s| s.result.backend == Some(2)));
    let wb = RingWb::unpack(&words_of(&mem.read(IOVA + 16 * 2, 16))).unwrap();
    assert_eq!(wb.index, 4, "consumed, written back");
}
