//! The host rings against the simulated device (docs/pipeline.md §15, SPEC R12.2): events,
//! punted frames and injected frames cross without a single register read after setup;
//! drops are counted, never silent; interrupts are moderated; commands move tables.

use crate::common;

use common::*;
use nlb_driver::device::Device;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_driver::queues::PuntedFrame;
use nlb_driver::rings::{HostRings, RingSizes};
use nlb_driver::{discover, Conntrack};
use nlb_hw::enums::{Event, Table, Verdict};
use nlb_hw::layouts::CmdDesc;
use nlb_hw::{NicSettings, Tables};
use std::time::Duration;

fn setup() -> ModelHandle {
    let mut sim = ModelHandle::new(profile());
    discover(&mut sim).unwrap();
    let mut loader = Loader::attach(&mut sim, profile(), LoaderOptions::default()).unwrap();
    let mut a = image(profile(), Which::A, 0);
    a.pools[0].track = true;
    loader.load(&mut sim, &a, &NicSettings::default()).unwrap();
    sim
}

fn small() -> RingSizes {
    RingSizes {
        punt_log2: 3,
        event_log2: 3,
        inject_log2: 3,
        cmd_log2: 3,
        cmd_data: 1024 * 1024,
        irq_count: 4,
        irq_usecs: 100,
    }
}

fn send(sim: &ModelHandle, src_port: u16) -> firmware_sim::PacketResult {
    let mut out = vec![0u8; 16384];
    sim.lock()
        .receive(&frame_to_vip(src_port), &mut out)
        .unwrap()
}

#[test]
fn events_arrive_in_host_memory_without_a_register_read() {
    let mut sim = setup();
    let mut rings = HostRings::attach(&mut sim, small(), false).unwrap();
    let before = sim.pcie();
    // One batch of six new flows: the device writes six records, then its index back once.
    let frames: Vec<Vec<u8>> = (0..6).map(|p| frame_to_vip(20000 + p)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    sim.lock()
        .receive_batch(&refs, &mut firmware_sim::BatchOutput::new());
    let st = rings.poll().unwrap();
    assert_eq!((st.events, st.event_drops), (6, 0));
    let mut events = Vec::new();
    assert_eq!(rings.pop_events(100, &mut events).unwrap(), 6);
    let ports: Vec<u16> = events.iter().map(|e| e.event[0].src_port).collect();
    assert_eq!(ports, (20000..20006).collect::<Vec<_>>());
    assert!(events
        .iter()
        .all(|e| e.event[0].event == Event::Learn && !e.installed));
    rings.give_back(&mut sim).unwrap();
    let used = sim.pcie().since(&before);
    assert_eq!(used.mmio_reads, 0, "no register read on the event path");
    assert_eq!(used.mmio_writes, 1, "one doorbell for the batch");
    assert_eq!(used.dma_writes, 6 + 1, "six records and one write-back");
    // Four records or more make an interrupt (irq_count): one for the batch.
    assert_eq!(used.interrupts, 1);
    assert!(rings.wait_interrupt(Duration::from_secs(1)));
    // A lone record waits for the timer (irq_usecs = 100).
    send(&sim, 20100);
    assert_eq!(sim.pcie().since(&before).interrupts, 1);
    sim.wait(Duration::from_micros(50)).unwrap();
    assert_eq!(sim.pcie().since(&before).interrupts, 1);
    sim.wait(Duration::from_micros(60)).unwrap();
    assert_eq!(sim.pcie().since(&before).interrupts, 2);
    assert!(rings.wait_interrupt(Duration::from_secs(1)));
}

#[test]
fn a_full_event_ring_drops_and_says_how_many() {
    let mut sim = setup();
    let mut rings = HostRings::attach(&mut sim, small(), false).unwrap();
    for p in 0..20 {
        send(&sim, 21000 + p);
    }
    let st = rings.poll().unwrap();
    assert_eq!((st.events, st.event_drops), (8, 12));
    let mut events = Vec::new();
    rings.pop_events(100, &mut events).unwrap();
    rings.give_back(&mut sim).unwrap();
    send(&sim, 22000);
    let st = rings.poll().unwrap();
    assert_eq!(
        (st.events, st.event_drops),
        (1, 0),
        "drops are reported once"
    );
}

#[test]
fn with_hardware_learning_the_host_only_keeps_the_books() {
    let mut sim = setup();
    let info = discover(&mut sim).unwrap();
    let mut rings = HostRings::attach(&mut sim, small(), true).unwrap();
    assert!(rings.hw_learn(), "the model can learn");
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let r = send(&sim, 23000);
    assert_eq!(r.verdict, Verdict::Forward);
    // The next packet hits before the host did anything.
    let r2 = send(&sim, 23000);
    assert_eq!(r2.conntrack, firmware_sim::CtOutcome::Hit);
    let mut events = Vec::new();
    rings.pop_events(10, &mut events).unwrap();
    assert_eq!(events.len(), 1);
    assert!(events[0].installed);
    let before = sim.pcie();
    let left = ct.learned(&events, 0, 5);
    assert!(left.is_empty());
    assert_eq!(sim.pcie().since(&before).mmio_reads, 0);
    assert_eq!(ct.valid_count(), 1, "the host's copy follows the NIC");
}

#[test]
fn punted_frames_and_injected_frames_cross_through_host_memory() {
    let mut sim = setup();
    let mut rings = HostRings::attach(&mut sim, small(), false).unwrap();
    // Pipeline off: every frame is passed to the host, but PASS is not a punt; punt by
    // sending to a VIP whose rule punts is not in image A, so inject and read back instead.
    let frame = frame_to_vip(30000);
    let before = sim.pcie();
    for _ in 0..3 {
        rings.inject(A_BACKEND, 0, &frame).unwrap();
    }
    rings.ring_inject(&mut sim).unwrap();
    let sent = sim.lock().take_injected();
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|s| s.result.backend == Some(A_BACKEND)));
    assert_eq!(dst_mac(&sent[0].frame), backend_mac(A_BACKEND));
    let st = rings.poll().unwrap();
    assert_eq!(st.inject_free, 8);
    let used = sim.pcie().since(&before);
    assert_eq!((used.mmio_reads, used.mmio_writes), (0, 1));
    // Descriptor + frame per injected frame, then the write-back.
    assert_eq!(used.dma_reads, 6);
    // More than the ring holds without a doorbell: full, said so.
    for _ in 0..8 {
        rings.inject(A_BACKEND, 0, &frame).unwrap();
    }
    assert!(matches!(
        rings.inject(A_BACKEND, 0, &frame),
        Err(nlb_driver::rings::RingError::InjectFull)
    ));
}

/// A TCP segment to the VIP cut as a first fragment (MF set), `len` bytes of payload
/// marked with `tag`: the tracking pool's fragments are punted (docs/pipeline.md §6).
fn punted_fragment(tag: u16, len: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4([198, 51, 100, 7], VIP.octets(), 64)
        .tcp(tag, 80, 1000, 64240)
        .ack(1);
    let payload: Vec<u8> = (0..len).map(|i| (i as u16 ^ tag) as u8).collect();
    let mut whole = Vec::new();
    b.write(&mut whole, &payload).unwrap();
    let (mut ip, rest) = etherparse::Ipv4Header::from_slice(&whole[14..]).unwrap();
    ip.more_fragments = true;
    ip.identification = tag;
    ip.header_checksum = ip.calc_header_checksum();
    let mut f = whole[..14].to_vec();
    ip.write(&mut f).unwrap();
    f.extend_from_slice(rest);
    f
}

/// Punted frames injected back leave from the buffers they were punted into: the punt slot
/// takes the inject slot's buffer in exchange. Over rounds that wrap both rings many times,
/// with frames injected twice, copied, or injected after their slot was given back (and
/// written over by newer punts), every frame leaves the NIC with the bytes it came with.
#[test]
fn punted_frames_leave_from_their_own_buffers_intact() {
    let mut sim = setup();
    let mut rings = HostRings::attach(&mut sim, small(), false).unwrap();
    let mut out = vec![0u8; 16384];
    let mut want: Vec<Vec<u8>> = Vec::new();
    let mut in_place = 0;
    let mut injected = Vec::new();
    let mut tag = 100u16;
    let mut punt = |sim: &ModelHandle, n: usize| -> Vec<Vec<u8>> {
        let mut sent = Vec::new();
        for _ in 0..n {
            tag += 1;
            let f = punted_fragment(tag, 40 + usize::from(tag) * 37 % 1400);
            let r = sim.lock().receive(&f, &mut out).unwrap();
            assert_eq!(r.verdict, Verdict::Punt, "fragment {tag}");
            sent.push(f);
        }
        sent
    };
    for round in 0..12 {
        let sent = punt(&sim, 6);
        let mut popped: Vec<PuntedFrame> = Vec::new();
        assert_eq!(rings.pop_punts(100, &mut popped).unwrap(), 6);
        for (k, (p, f)) in popped.iter().zip(&sent).enumerate() {
            assert!(&p.frame == f, "round {round}: punted frame {k}");
        }
        if round % 4 == 3 {
            // Given back first: the slots are posted again and newer punts write over their
            // buffers before the doorbell; the frames must be copied.
            rings.give_back(&mut sim).unwrap();
            let newer = punt(&sim, 6);
            for p in &popped {
                rings.inject_punted(A_BACKEND, 0, p).unwrap();
            }
            want.extend(sent);
            rings.ring_inject(&mut sim).unwrap();
            injected.extend(sim.lock().take_injected());
            let mut again = Vec::new();
            assert_eq!(rings.pop_punts(100, &mut again).unwrap(), 6);
            let same = again.iter().zip(&newer).all(|(p, f)| &p.frame == f);
            assert!(same, "round {round}: the newer punts");
            for p in &again {
                rings.inject_punted(A_BACKEND, 0, p).unwrap();
                in_place += 1;
            }
            want.extend(newer);
        } else {
            for (k, p) in popped.iter().enumerate() {
                match k {
                    // Twice: the second is a copy (the buffer is lent already).
                    0 => {
                        rings.inject_punted(A_BACKEND, 0, p).unwrap();
                        rings.inject_punted(A_BACKEND, 0, p).unwrap();
                        want.push(p.frame.clone());
                        in_place += 1;
                    }
                    // Copied by the caller's choice.
                    1 => rings.inject(A_BACKEND, 0, &p.frame).unwrap(),
                    _ => {
                        rings.inject_punted(A_BACKEND, 0, p).unwrap();
                        in_place += 1;
                    }
                }
                want.push(p.frame.clone());
            }
        }
        rings.give_back(&mut sim).unwrap();
        rings.ring_inject(&mut sim).unwrap();
        assert_eq!(rings.injected_in_place(), in_place, "round {round}");
        injected.extend(sim.lock().take_injected());
    }
    assert_eq!(injected.len(), want.len());
    // A frame popped from these rings, injected through another device's: copied.
    let mut other_sim = setup();
    let mut other = HostRings::attach(&mut other_sim, small(), false).unwrap();
    punt(&sim, 1);
    let mut popped = Vec::new();
    assert_eq!(rings.pop_punts(1, &mut popped).unwrap(), 1);
    other.inject_punted(A_BACKEND, 0, &popped[0]).unwrap();
    other.ring_inject(&mut other_sim).unwrap();
    assert_eq!(other.injected_in_place(), 0);
    let sent = other_sim.lock().take_injected();
    assert!(sent.len() == 1 && sent[0].frame[14..] == popped[0].frame[14..]);
    for (k, (i, w)) in injected.iter().zip(&want).enumerate() {
        assert_eq!(i.result.backend, Some(A_BACKEND), "injected frame {k}");
        assert_eq!(
            dst_mac(&i.frame),
            backend_mac(A_BACKEND),
            "injected frame {k}"
        );
        assert!(
            i.frame[14..] == w[14..],
            "injected frame {k}: the IP datagram changed"
        );
    }
}

#[test]
fn commands_write_and_read_tables_by_dma() {
    let mut sim = setup();
    let mut rings = HostRings::attach(&mut sim, small(), false).unwrap();
    rings.write_data(0, &[5, 6, 7]).unwrap();
    rings
        .submit(&CmdDesc {
            op: nlb_hw::enums::DmaCmd::TableWrite,
            table: Table::Maglev,
            bank: true,
            count: 3,
            index: 2000,
            addr: rings.data_iova(0),
            ..CmdDesc::default()
        })
        .unwrap();
    rings
        .submit(&CmdDesc {
            op: nlb_hw::enums::DmaCmd::TableRead,
            table: Table::Maglev,
            bank: true,
            count: 3,
            index: 2000,
            addr: rings.data_iova(64),
            ..CmdDesc::default()
        })
        .unwrap();
    let before = sim.pcie();
    rings.execute(&mut sim, Duration::from_secs(1)).unwrap();
    let mut back = [0u32; 3];
    rings.read_data(64, &mut back).unwrap();
    assert_eq!(back, [5, 6, 7]);
    assert_eq!(sim.lock().bank(1).maglev[2001].backend, 6);
    let used = sim.pcie().since(&before);
    assert_eq!((used.mmio_reads, used.mmio_writes), (0, 1));
    // A bad command is reported with its slot and code.
    rings
        .submit(&CmdDesc {
            op: nlb_hw::enums::DmaCmd::TableRead,
            table: Table::Maglev,
            count: 3,
            index: u32::MAX - 1,
            addr: rings.data_iova(0),
            ..CmdDesc::default()
        })
        .unwrap();
    match rings.execute(&mut sim, Duration::from_secs(1)) {
        Err(nlb_driver::rings::RingError::Command { slot, code }) => {
            assert_eq!((slot, code), (2, nlb_hw::enums::DmaError::BadIndex))
        }
        other => panic!("{other:?}"),
    }
}

/// A command over more entries than `CMD_PIECE` is queued in parts over consecutive data,
/// each its own slot: the device runs them as the whole (the table holds what the data
/// says, every entry read back), and the ring's index moves once per part.
#[test]
fn a_long_command_goes_in_parts_that_do_what_the_whole_would() {
    use nlb_driver::rings::CMD_PIECE;
    use nlb_hw::enums::{DmaCmd, Ring};
    let mut sim = setup();
    let mut rings = HostRings::attach(&mut sim, small(), false).unwrap();
    let n = 2 * CMD_PIECE + 1000;
    let slots: Vec<u32> = (0..n).map(|i| i % 4000 + 1).collect();
    rings.write_data(0, &slots).unwrap();
    let before = sim.read32(nlb_hw::blocks::dma::CMD_DEV).unwrap();
    for (op, at) in [(DmaCmd::TableWrite, 0), (DmaCmd::TableRead, 4 * n as usize)] {
        rings
            .submit(&CmdDesc {
                op,
                table: Table::Maglev,
                bank: true,
                count: n,
                index: 7,
                addr: rings.data_iova(at),
                ..CmdDesc::default()
            })
            .unwrap();
    }
    rings.execute(&mut sim, Duration::from_secs(10)).unwrap();
    let mut back = vec![0u32; n as usize];
    rings.read_data(4 * n as usize, &mut back).unwrap();
    assert_eq!(back, slots);
    let sim_bank = sim.lock();
    for (i, want) in slots.iter().enumerate() {
        assert_eq!(u32::from(sim_bank.bank(1).maglev[7 + i].backend), *want);
    }
    drop(sim_bank);
    // A ring of 8 slots and parts of at least CMD_PIECE entries, at most half the free slots:
    // the write in 3 (8 free: up to 4), the read in 2 (5 free).
    assert!(rings.carries(Ring::Cmd));
    let after = sim.read32(nlb_hw::blocks::dma::CMD_DEV).unwrap();
    assert_eq!(after.wrapping_sub(before), 5);
}

#[test]
fn a_load_by_dma_reads_no_register_per_entry_and_recovers_by_dma() {
    let mut sim = ModelHandle::new(profile());
    discover(&mut sim).unwrap();
    // A small data area: the load goes in several chunks.
    let sizes = RingSizes {
        cmd_data: 4096,
        ..small()
    };
    let mut rings = HostRings::attach(&mut sim, sizes, false).unwrap();
    let mut loader =
        Loader::attach_dma(&mut sim, &mut rings, profile(), LoaderOptions::default()).unwrap();
    let a = image(profile(), Which::A, 7);
    let before = sim.pcie();
    let report = loader
        .load_dma(&mut sim, &mut rings, &a, &NicSettings::default())
        .unwrap();
    let used = sim.pcie().since(&before);
    assert_eq!(report.changed_entries, nonempty_entries(&a));
    assert!(report.changed_entries > 400);
    // A write and a read-back per chunk: runs of 16 or more consecutive entries go as ranges
    // and the rest as index lists, the 402 Maglev slots as their whole rows, each chunk of at
    // most 256 entries (half of the data area): seven chunks for this image.
    assert_eq!(report.commands, 2 * 7);
    // A handful of register accesses for the whole load: the ctrl checks, the drain, the
    // NIC settings and the flip, and one doorbell per chunk.
    assert!(used.mmio_reads <= 20, "{used:?}");
    assert!(used.mmio_writes <= 20 + report.commands, "{used:?}");
    assert_eq!(sim.lock().bank(report.bank), &a, "the bank holds the image");
    assert_eq!(send(&sim, 1234).backend, Some(A_BACKEND));
    // A delta: only what changed moves.
    let b = image(profile(), Which::B, 7);
    let report = loader
        .load_dma(&mut sim, &mut rings, &b, &NicSettings::default())
        .unwrap();
    assert_eq!(
        report.changed_entries,
        Tables::diff(&Tables::empty(profile()), &b).len()
    );
    assert_eq!(sim.lock().bank(report.bank), &b);
    // A restarted loader rebuilds its shadow by DMA, as the register read-back would.
    let before = sim.pcie();
    let again =
        Loader::attach_dma(&mut sim, &mut rings, profile(), LoaderOptions::default()).unwrap();
    assert!(sim.pcie().since(&before).mmio_reads <= 16);
    let by_window = Loader::attach(&mut sim, profile(), LoaderOptions::default()).unwrap();
    for bank in 0..2 {
        assert_eq!(again.shadow(bank), by_window.shadow(bank));
    }
    assert_eq!(again.active_bank(), report.bank);
}

/// The connection table read back by DMA is the table read back through the register window
/// (SPEC R12.4: the same recovery, without a register read per entry): every entry, whatever it
/// holds (open, closed by a FIN or RST, invalid with stale fields, the widest field values),
/// and the open counts per (rule, backend) the service LB policy reads. A small data area
/// makes the read-back go in many runs, one ending mid-table.
#[test]
fn the_connection_table_read_back_by_dma_is_the_one_the_window_reads() {
    use nlb_driver::conntrack::FLAG_CLOSED;
    use nlb_hw::layouts::CtEntry;
    let mut sim = setup();
    let info = discover(&mut sim).unwrap();
    let len = {
        let mut m = sim.lock();
        let ct = m.conntrack_mut();
        let len = ct.len();
        // An LCG (Knuth's MMIX constants); its high half is the number.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 32) as u32
        };
        for i in 0..len {
            let r = next();
            let e = CtEntry {
                // Three in four valid; of those, one in four closed.
                valid: r % 4 != 0,
                protocol: if r & 16 != 0 { 6 } else { 17 },
                src_port: (next() & 0xffff) as u16,
                dst_port: if i % 97 == 0 { u16::MAX } else { 443 },
                src_addr: if i % 89 == 0 {
                    u128::MAX
                } else {
                    0xffff_0a00_0000 | u128::from(next())
                },
                dst_addr: 0x2001_0db8_u128 << 96 | u128::from(i),
                // A few pairs, so that counts add up across runs and threads.
                backend: if i % 101 == 0 {
                    0xffff
                } else {
                    (r >> 8 & 7) as u16
                },
                rule: (r >> 12 & 3) as u16,
                flags: if r >> 4 & 3 == 0 { FLAG_CLOSED } else { 0 },
                timestamp: next(),
            };
            ct.write(i, e).unwrap();
        }
        len
    };
    assert!(len >= 4096, "the table is larger than the data area below");
    let by_window = Conntrack::attach(&mut sim, &info, 7).unwrap();
    // 1 KiB of data area: 21 entries of 48 bytes a run, the last run short.
    let sizes = RingSizes {
        cmd_data: 1024,
        ..small()
    };
    let mut rings = HostRings::attach(&mut sim, sizes, false).unwrap();
    let before = sim.pcie();
    let by_dma = Conntrack::attach_dma(&mut sim, &mut rings, &info, 7).unwrap();
    let used = sim.pcie().since(&before);
    assert_eq!(used.mmio_reads, 0, "{used:?}");
    for i in 0..len {
        assert_eq!(by_dma.entry(i), by_window.entry(i), "entry {i}");
        assert_eq!(by_dma.last_seen(i), Some(7));
    }
    assert_eq!(by_dma.entry(len), None);
    assert_eq!(by_dma.open_counts(), by_window.open_counts());
    assert_eq!(by_dma.open_counts(), &by_dma.open_counts_by_scan());
    assert!(by_dma.open_counts().len() > 8, "{:?}", by_dma.open_counts());
    assert_eq!(by_dma.valid_count(), by_window.valid_count());
}

/// An engine that carries only the rings toward the host, as the RTL's (`dma.caps.rings` = 2):
/// punts and events still cross through host memory; table writes, the loader's read-back and
/// injected frames take the register windows, and what needs a missing ring says so.
#[test]
fn an_engine_with_only_the_punt_and_event_rings_moves_tables_through_registers() {
    use nlb_driver::queues::Injector;
    use nlb_driver::rings::{split, split_commands, RingDevice, RingError};
    use nlb_hw::enums::Ring;

    let mut sim = ModelHandle::new(profile());
    sim.lock().set_dma_rings(2);
    let mut probe = sim.clone();
    discover(&mut probe).unwrap();
    let caps =
        nlb_hw::blocks::dma::Caps::from_word(probe.read32(nlb_hw::blocks::dma::CAPS).unwrap());
    assert_eq!(caps.rings, 2, "dma.caps.rings");
    let mut dev = RingDevice::attach(Box::new(sim.clone()), small(), false)
        .map_err(|(_, e)| e)
        .expect("rings attach to a two-ring engine");
    {
        let rings = dev.rings();
        assert!(rings.carries(Ring::Punt) && rings.carries(Ring::Event));
        assert!(!rings.carries(Ring::Inject) && !rings.carries(Ring::Cmd));
        assert!(matches!(
            rings.submit(&CmdDesc::default()),
            Err(RingError::NotCarried {
                ring: Ring::Cmd,
                carried: 2
            })
        ));
        assert!(matches!(
            rings.inject(A_BACKEND, 0, &frame_to_vip(1)),
            Err(RingError::NotCarried {
                ring: Ring::Inject,
                carried: 2
            })
        ));
    }
    assert!(split(&mut dev).is_some());
    assert!(
        split_commands(&mut dev).is_none(),
        "no command ring to split"
    );
    // The inject and command rings' registers are not there: they read 0.
    for reg in [
        nlb_hw::blocks::dma::INJECT_SIZE,
        nlb_hw::blocks::dma::CMD_SIZE,
        nlb_hw::blocks::dma::CMD_BASE_LO,
    ] {
        assert_eq!(probe.read32(reg).unwrap(), 0, "register {reg:#x}");
    }

    // The loader attaches and loads through the register windows: a write per entry word and
    // the read-back of each entry, and the bank holds the image.
    let mut loader = Loader::attach(&mut dev, profile(), LoaderOptions::default()).unwrap();
    let mut a = image(profile(), Which::A, 3);
    a.pools[0].track = true;
    let before = sim.pcie();
    let report = loader.load(&mut dev, &a, &NicSettings::default()).unwrap();
    let used = sim.pcie().since(&before);
    assert_eq!(sim.lock().bank(report.bank), &a, "the bank holds the image");
    assert!(
        used.mmio_writes > report.changed_entries as u64
            && used.mmio_reads > report.changed_entries as u64,
        "a load through the registers: {used:?} for {} entries",
        report.changed_entries
    );
    assert_eq!(used.dma_reads, 0, "no table data by DMA: {used:?}");

    // New flows: their events come through the event ring, with no register read.
    let before = sim.pcie();
    let frames: Vec<Vec<u8>> = (0..5).map(|p| frame_to_vip(41000 + p)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    sim.lock()
        .receive_batch(&refs, &mut firmware_sim::BatchOutput::new());
    let (_, rings) = split(&mut dev).unwrap();
    let st = rings.poll().unwrap();
    assert_eq!((st.events, st.event_drops), (5, 0));
    let mut events = Vec::new();
    assert_eq!(rings.pop_events(100, &mut events).unwrap(), 5);
    assert!(events.iter().all(|e| e.event[0].event == Event::Learn));
    assert_eq!(sim.pcie().since(&before).mmio_reads, 0);

    // Injection falls back to the inject register window.
    let (d, rings) = split(&mut dev).unwrap();
    rings
        .inject_frame(d, A_BACKEND, 0, &frame_to_vip(42000))
        .unwrap();
    rings.ring_inject(d).unwrap();
    let sent = sim.lock().take_injected();
    assert_eq!(sent.len(), 1, "the frame went through the inject window");
    assert_eq!(sent[0].result.backend, Some(A_BACKEND));
    assert_eq!(dst_mac(&sent[0].frame), backend_mac(A_BACKEND));
}

/// A device with the OpenNIC plugin's registers after the register map, its `config` saying
/// whether the shell carries the host DMA port; everything else is the model's.
struct OpenNicCard {
    model: ModelHandle,
    host_dma: bool,
}

impl Device for OpenNicCard {
    fn read32(&mut self, offset: u32) -> Result<u32, nlb_driver::device::DeviceError> {
        match offset {
            o if o == nlb_driver::opennic::PLUGIN_BASE => Ok(nlb_driver::opennic::PLUGIN_ID),
            // One CMAC port; the host DMA port in the next byte.
            o if o == nlb_driver::opennic::PLUGIN_BASE + 4 => {
                Ok(u32::from_le_bytes([1, u8::from(self.host_dma), 0, 0]))
            }
            o if o > nlb_driver::opennic::PLUGIN_BASE => Ok(0),
            o => self.model.read32(o),
        }
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), nlb_driver::device::DeviceError> {
        self.model.write32(offset, value)
    }

    fn dma_map(
        &mut self,
        region: &nlb_driver::dma::DmaRegion,
    ) -> Result<(), nlb_driver::device::DeviceError> {
        self.model.dma_map(region)
    }

    fn set_interrupts(
        &mut self,
        lines: &[nlb_driver::dma::IrqLine],
    ) -> Result<(), nlb_driver::device::DeviceError> {
        self.model.set_interrupts(lines)
    }

    fn describe(&self) -> String {
        "an OpenNIC card (the model behind the plugin's registers)".into()
    }
}

/// On an OpenNIC card whose shell does not carry the host DMA port, the rings are refused
/// before anything is set up (their DMA could only fault), with the reason and the way out;
/// where it does, they attach.
#[test]
fn rings_are_refused_on_a_card_whose_shell_has_no_host_dma_port() {
    use nlb_driver::rings::RingError;
    let mut model = ModelHandle::new(profile());
    let mut card = OpenNicCard {
        model: model.clone(),
        host_dma: false,
    };
    let before = model.pcie();
    let e = HostRings::attach(&mut card, small(), false).unwrap_err();
    assert!(matches!(e, RingError::NoHostPath), "{e}");
    assert!(e.to_string().contains("--host-bridge"), "{e}");
    let used = model.pcie().since(&before);
    assert_eq!(used.mmio_writes, 0, "nothing set up: {used:?}");
    card.host_dma = true;
    let rings = HostRings::attach(&mut card, small(), false).expect("attach with the port");
    assert!(rings.carries(nlb_hw::enums::Ring::Punt));
}
