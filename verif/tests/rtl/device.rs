//! The RTL behind the driver's `Device` trait: the driver discovers it, attaches its host rings
//! and its loader (reading both banks back by the command ring) and loads a compiled example
//! configuration into it exactly as into hardware; the golden model's device (`nlb_driver::ModelHandle`)
//! gets the same loads through the same loader. Then the same traffic goes through both:
//! every result, every transmitted frame, and what the host reads from the queues (punts and
//! learn events, popped through the registers) must agree; so must frames the host injects
//! through the inject queue, up to and past its depth.

use flowtable_compiler::{CompileOptions, HealthState};
use nlb_driver::device::Device;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::{discover, ModelHandle};
use nlb_hw::blocks::queues;
use nlb_verif::bench::seed_from_env;
use nlb_verif::device::RtlDevice;
use nlb_verif::scenario::Scenario;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Pops every punt and learn event through the queue registers: (punt header + data words,
/// learn words).
fn drain_queues(dev: &mut dyn Device) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let mut punts = Vec::new();
    let waiting = |dev: &mut dyn Device, reg: u32| {
        // punt_status and learn_status share the layout.
        queues::PuntStatus::from_word(dev.read32(reg).expect("status")).count != 0
    };
    while waiting(dev, queues::PUNT_STATUS) {
        dev.write32(queues::PUNT_POP, queues::PuntPop { pop: true }.word())
            .expect("pop");
        let len = dev.read32(queues::PUNT_LEN).expect("len");
        let mut w: Vec<u32> = (0..queues::PUNT_HEADER_COUNT)
            .map(|i| dev.read32(queues::PUNT_HEADER + 4 * i).expect("header"))
            .collect();
        w.push(len);
        w.extend(
            (0..len.div_ceil(4)).map(|i| dev.read32(queues::PUNT_DATA + 4 * i).expect("data")),
        );
        punts.push(w);
    }
    let mut learns = Vec::new();
    while waiting(dev, queues::LEARN_STATUS) {
        dev.write32(queues::LEARN_POP, queues::LearnPop { pop: true }.word())
            .expect("pop");
        learns.push(
            (0..queues::LEARN_DATA_COUNT)
                .map(|i| dev.read32(queues::LEARN_DATA + 4 * i).expect("learn"))
                .collect(),
        );
    }
    (punts, learns)
}

/// The most rules one VIP and protocol may have (SPEC R2.2): 16 TCP rules of one port
/// range each (some ports, some ranges) on two pools, one of them a target instance, next to
/// two UDP rules on the same address, as the compiler lays them out.
fn sixteen_rules() -> flowtable_compiler::Compiled {
    let mut y = String::from(
        "instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
targetPools:
  - {name: web, region: r, instances: [a, b, c]}
targetInstances:
  - {name: one, zone: z, instance: c}
forwardingRules:
  - {name: u1, IPAddress: 203.0.113.9, IPProtocol: UDP, portRange: '53', target: web}
  - {name: u2, IPAddress: 203.0.113.9, IPProtocol: UDP, portRange: '5000-6000', target: one}
",
    );
    for i in 0..16u32 {
        let range = if i % 2 == 0 {
            format!("{}", 100 + i)
        } else {
            format!("{}-{}", 1000 * i, 1000 * i + 999)
        };
        let target = if i % 5 == 4 { "one" } else { "web" };
        y += &format!(
            "  - {{name: t{i:02}, IPAddress: 203.0.113.9, portRange: '{range}', target: {target}}}\n"
        );
    }
    let (config, d) = nlb_config::parse_config("sixteen.yaml", &y);
    assert!(d.is_empty(), "{d}");
    let compiled =
        flowtable_compiler::compile(&config, &HealthState::default(), &CompileOptions::default())
            .expect("16 rules per VIP and protocol compile");
    let full = compiled
        .tables
        .vip
        .iter()
        .filter(|e| e.valid && e.protocol == 6)
        .map(|e| e.slot.iter().filter(|s| s.valid).count())
        .collect::<Vec<_>>();
    assert_eq!(full, vec![16], "one TCP entry with every slot used");
    compiled
}

/// Injects frames with the driver's queue access into both devices, more than the inject
/// queue holds, without taking what they transmit: both accept `queue_depth` frames and then
/// report the queue full (the driver's `InjectFull`), transmit the same results and frames,
/// and free the entries once the frames are taken. Returns the frames compared.
fn inject_through_the_driver(
    rtl: &mut RtlDevice,
    model: &mut ModelHandle,
    frames: &[Vec<u8>],
    tables: &nlb_hw::Tables,
    name: &str,
) -> usize {
    use nlb_driver::queues::{QueueError, Queues};
    let depth = tables.profile.queue_depth as usize;
    // The largest pool id an inject header carries.
    const MAX_POOL: u16 =
        nlb_hw::layout::field_max(nlb_hw::layouts::InjectHeader::POOL_WIDTH) as u16;
    // Valid pools and backends of the example, and ids past the tables (dropped NO_BACKEND).
    let pools: Vec<u16> = (0..tables.pools.len())
        .filter(|&i| tables.pools[i].valid)
        .map(|i| i as u16)
        .chain([MAX_POOL])
        .collect();
    let backends: Vec<u16> = (0..tables.backends.len())
        .filter(|&i| tables.backends[i].valid)
        .map(|i| i as u16)
        .chain([MAX_POOL])
        .collect();
    let (mut qr, mut qm) = (Queues::new(), Queues::new());
    let mut pushed = 0;
    let fits = frames
        .iter()
        .filter(|f| f.len() <= nlb_driver::queues::WINDOW_BYTES);
    for (i, f) in fits.take(depth + 3).enumerate() {
        let (backend, pool) = (backends[i % backends.len()], pools[i % pools.len()]);
        let a = qr.inject(rtl, backend, pool, f);
        let b = qm.inject(model, backend, pool, f);
        if i < depth {
            a.unwrap_or_else(|e| panic!("{name}: inject {i} into the RTL: {e}"));
            b.unwrap_or_else(|e| panic!("{name}: inject {i} into the model: {e}"));
            pushed += 1;
        } else {
            assert!(
                matches!(a, Err(QueueError::InjectFull))
                    && matches!(b, Err(QueueError::InjectFull)),
                "{name}: inject {i} with {depth} frames not taken: RTL {a:?}, model {b:?}"
            );
        }
    }
    let got = rtl.take_injected().expect("RTL injected frames");
    let want = model.lock().take_injected();
    assert_eq!(got.packets.len(), pushed, "{name}");
    assert_eq!(want.len(), pushed, "{name}");
    assert_eq!(
        got.overflows, 0,
        "the driver never pushed into a full queue"
    );
    for (i, (g, w)) in got.packets.iter().zip(&want).enumerate() {
        assert_eq!(g.result, w.result, "{name}: injected frame {i}");
        assert_eq!(g.output, w.frame, "{name}: injected frame {i} output");
    }
    for dev in [rtl as &mut dyn Device, model] {
        assert_eq!(
            dev.read32(queues::INJECT_STATUS).expect("status"),
            depth as u32,
            "{name}: entries free once taken"
        );
    }
    pushed
}

#[test]
fn the_driver_loads_the_rtl_like_hardware_and_it_forwards_like_the_model() {
    use nlb_driver::rings::{HostRings, RingSizes};
    use nlb_hw::blocks::dma;

    let seed = seed_from_env(0xde71_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rtl = RtlDevice::new(seed).expect("model thread");
    let info = discover(&mut rtl).expect("the RTL is discovered");
    assert_eq!(info.profile.name, "sim");
    let mut model = ModelHandle::new(info.profile);

    // The host rings, as on a card: the loader's reads and writes go by the command ring.
    // The punt and event rings are switched off again, so that punts and learn events stay
    // in the register queues this test compares.
    let sizes = RingSizes {
        cmd_data: 256 * 1024,
        ..RingSizes::default()
    };
    let mut rtl_rings = HostRings::attach(&mut rtl, sizes, false).expect("rings on the RTL");
    let mut model_rings = HostRings::attach(&mut model, sizes, false).expect("rings on the model");
    for dev in [&mut rtl as &mut dyn Device, &mut model] {
        dev.write32(dma::PUNT_SIZE, 0).expect("punt ring off");
        dev.write32(dma::EVENT_SIZE, 0).expect("event ring off");
    }

    let t0 = std::time::Instant::now();
    let mut rtl_loader = Loader::attach_dma(
        &mut rtl,
        &mut rtl_rings,
        info.profile,
        LoaderOptions::default(),
    )
    .expect("attach");
    let attach_secs = t0.elapsed().as_secs_f64();
    let mut model_loader = Loader::attach_dma(
        &mut model,
        &mut model_rings,
        info.profile,
        LoaderOptions::default(),
    )
    .expect("attach");

    let mut configs: Vec<(String, flowtable_compiler::Compiled)> = Vec::new();
    for name in ["web.yaml", "ipv6.yaml", "udp-dns.yaml"] {
        configs.push((name.to_string(), crate::compiled_example(name)));
    }
    configs.push(("16 rules on one VIP".into(), sixteen_rules()));
    let mut total = 0usize;
    for (name, compiled) in configs {
        let r = rtl_loader
            .load_dma(&mut rtl, &mut rtl_rings, &compiled.tables, &compiled.nic)
            .expect("load into the RTL by the command ring");
        model_loader
            .load_dma(
                &mut model,
                &mut model_rings,
                &compiled.tables,
                &compiled.nic,
            )
            .expect("load into the model");
        assert!(r.commands > 0, "{name}: the load went by the command ring");
        let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
        let frames: Vec<Vec<u8>> = (0..400).map(|_| scenario.frame(&mut rng)).collect();
        let got = rtl.receive(frames.clone()).expect("RTL traffic");
        let mut out = vec![0u8; 16384];
        for (i, (f, g)) in frames.iter().zip(&got).enumerate() {
            let want = model.lock().receive(f, &mut out).expect("model traffic");
            assert_eq!(g.result, want, "{name}: packet {i} (bank {})", r.bank);
            assert_eq!(g.output, out[..want.out_len], "{name}: packet {i} output");
        }
        assert_eq!(got.len(), frames.len());
        let (rtl_q, model_q) = (drain_queues(&mut rtl), drain_queues(&mut model));
        assert_eq!(rtl_q, model_q, "{name}: punt and learn queues");
        total += frames.len();
        total += inject_through_the_driver(&mut rtl, &mut model, &frames, &compiled.tables, &name);
    }
    eprintln!(
        "discover + attach (both banks read back by the command ring): {attach_secs:.1} s; \
         {total} packets compared"
    );
}

/// The conntrack block under the driver's conntrack manager (WRITE_AT with valid last,
/// evictions, ageing's hit reads) and under raw commands of both forms: the RTL and the model
/// must show the same registers, the same read-back after every write, the same count.
#[test]
fn the_conntrack_block_answers_like_the_model() {
    use nlb_driver::conntrack::{Conntrack, NewConnection};
    use nlb_hw::blocks::conntrack as ct;
    use nlb_hw::enums::TableCmd;
    use nlb_hw::layouts::CtEntry;
    use rand::RngExt;
    use std::net::{IpAddr, Ipv4Addr};

    let seed = seed_from_env(0xde71_0002);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rtl = RtlDevice::new(seed).expect("model thread");
    let info = discover(&mut rtl).expect("the RTL is discovered");
    let mut model = ModelHandle::new(info.profile);
    let mut rtl_ct = Conntrack::attach(&mut rtl, &info, 0).expect("attach");
    let mut model_ct = Conntrack::attach(&mut model, &info, 0).expect("attach");
    let conns: Vec<NewConnection> = (0..300)
        .map(|i| NewConnection {
            key: nlb_hw::FlowKey::tuple5(
                if i % 3 == 0 { 17 } else { 6 },
                IpAddr::V4(Ipv4Addr::new(198, 51, 100, (i % 250) as u8)),
                1024 + rng.random_range(0..60_000u16),
                IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)),
                443,
            ),
            backend: rng.random_range(0..4096),
            rule: rng.random_range(0..256),
        })
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    rtl_ct
        .install_batch(&mut rtl, &conns, 5, &mut a)
        .expect("install");
    model_ct
        .install_batch(&mut model, &conns, 5, &mut b)
        .expect("install");
    assert_eq!(a, b);
    let gone: Vec<_> = conns.iter().step_by(7).map(|c| c.key).collect();
    rtl_ct.evict_batch(&mut rtl, &gone).expect("evict");
    model_ct.evict_batch(&mut model, &gone).expect("evict");
    assert_eq!(
        rtl.read32(ct::COUNT).expect("count"),
        model.read32(ct::COUNT).expect("count")
    );
    assert_eq!(
        rtl.read32(ct::COUNT).expect("count") as usize,
        model_ct.valid_count()
    );
    // What the manager believes is what both devices hold, read back through READ_AT at
    // every index the installs touched.
    let touched: Vec<u32> = a
        .iter()
        .filter_map(|o| match o {
            nlb_driver::conntrack::Installed::New(i)
            | nlb_driver::conntrack::Installed::Replaced(i) => Some(*i),
            _ => None,
        })
        .collect();
    assert!(touched.len() > 250, "most flows found a free way");
    for &i in &touched {
        let want = rtl_ct.entry(i).expect("in range").pack().expect("packs");
        for dev in [&mut rtl as &mut dyn Device, &mut model] {
            let read_at = ct::Cmd {
                op: TableCmd::ReadAt,
                index: i,
            };
            dev.write32(ct::CMD, read_at.word().expect("fits"))
                .expect("cmd");
            let got: Vec<u32> = (0..CtEntry::WORDS as u32)
                .map(|w| dev.read32(ct::DATA + 4 * w).expect("data"))
                .collect();
            assert_eq!(got, want, "entry {i} on {}", dev.describe());
        }
    }

    // Raw commands: random words (junk past the entry's width included), both forms, good and
    // bad indices; after each, status, index and every data word agree.
    let entries = info.firmware.capacities.ct_buckets * info.firmware.capacities.ct_ways;
    let ops = [
        TableCmd::Write,
        TableCmd::Read,
        TableCmd::WriteAt,
        TableCmd::ReadAt,
    ];
    for step in 0..200 {
        let words: Vec<u32> = (0..CtEntry::WORDS + 1).map(|_| rng.random()).collect();
        let index = match rng.random_range(0..8) {
            0 => entries + rng.random_range(0..3),
            1 => 0xff_ffff,
            _ => rng.random_range(0..entries),
        };
        let op = ops[rng.random_range(0..ops.len())];
        let cmd = match op {
            TableCmd::WriteAt | TableCmd::ReadAt => ct::Cmd { op, index }.word().expect("fits"),
            _ => {
                op.value()
                    | if rng.random_range(0..10) == 0 {
                        0x100
                    } else {
                        0
                    }
            }
        };
        for dev in [&mut rtl as &mut dyn Device, &mut model] {
            for (i, w) in words.iter().enumerate() {
                dev.write32(ct::DATA + 4 * i as u32, *w).expect("data");
            }
            if matches!(op, TableCmd::Write | TableCmd::Read) {
                dev.write32(ct::INDEX, index).expect("index");
            }
            dev.write32(ct::CMD, cmd).expect("cmd");
        }
        let regs = |dev: &mut dyn Device| -> Vec<u32> {
            [ct::STATUS, ct::INDEX, ct::COUNT]
                .into_iter()
                .chain((0..CtEntry::WORDS as u32 + 1).map(|i| ct::DATA + 4 * i))
                .map(|r| dev.read32(r).expect("read"))
                .collect()
        };
        assert_eq!(
            regs(&mut rtl),
            regs(&mut model),
            "step {step}: {op:?} cmd {cmd:#x}, seed {seed}"
        );
    }
}

/// Rings the inject doorbell of both devices' rings.
fn ring_inject(
    rtl_rings: &mut nlb_driver::rings::HostRings,
    rtl: &mut RtlDevice,
    model_rings: &mut nlb_driver::rings::HostRings,
    model: &mut ModelHandle,
) {
    rtl_rings.ring_inject(rtl).expect("RTL inject doorbell");
    model_rings
        .ring_inject(model)
        .expect("model inject doorbell");
}

/// The driver's host rings on the RTL: `RtlDevice` serves the memory the driver maps for DMA
/// to `nlb_top`'s DMA master, as a card's IOMMU would. The driver attaches `HostRings` to it
/// and to the golden model's device, both carrying the four rings; the same traffic goes through both, in two batches with the slots given
/// back between them, and the rings must hold the same: ring status, every event record,
/// every punted frame with its header. After each batch the driver injects the punted frames
/// back from their punt buffers, then other frames through the inject ring (more than it has
/// slots, so some wait for the device to consume them): what each device transmitted must be
/// the same, result and bytes.
#[test]
fn the_drivers_host_rings_run_on_the_rtl_as_on_the_model() {
    use nlb_driver::queues::PuntedFrame;
    use nlb_driver::rings::{HostRings, RingSizes};
    use nlb_hw::enums::Ring;

    let seed = seed_from_env(0xd0a5_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let compiled = crate::compiled_example("web.yaml");
    let mut rtl = RtlDevice::new(seed).expect("RTL model");
    rtl.load(&compiled.tables, &compiled.nic).expect("RTL load");
    let model_dev = firmware_sim::ModelDevice::from_tables(compiled.tables.clone(), compiled.nic);
    let mut model = ModelHandle::from_device(model_dev);

    // Rings smaller than the traffic: the punt ring fills and drops, and so may the events.
    let sizes = RingSizes {
        punt_log2: 4,
        event_log2: 6,
        inject_log2: 4,
        cmd_log2: 4,
        cmd_data: 64 * 1024,
        irq_count: 8,
        irq_usecs: 0,
    };
    let mut rtl_rings = HostRings::attach(&mut rtl, sizes, false).expect("rings on the RTL");
    let mut model_rings = HostRings::attach(&mut model, sizes, false).expect("rings on the model");
    assert!(rtl_rings.carries(Ring::Punt) && rtl_rings.carries(Ring::Inject));
    assert!(rtl_rings.carries(Ring::Cmd));

    let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
    let (mut events_seen, mut punts_seen, mut injected) = (0usize, 0usize, 0usize);
    for batch in 0..2 {
        let frames: Vec<Vec<u8>> = (0..300).map(|_| scenario.frame(&mut rng)).collect();
        // Ten frames at a time: back to back, a burst of punts waits on the host memory's
        // latency and the receive side would drop what finds no room (DROP NO_ROOM_*, which
        // the model, handling each packet whole, never does).
        let mut got = Vec::new();
        for chunk in frames.chunks(10) {
            got.extend(rtl.receive(chunk.to_vec()).expect("RTL traffic"));
        }
        let mut out = vec![0u8; 16384];
        for (i, f) in frames.iter().enumerate() {
            let r = model.lock().receive(f, &mut out).expect("model traffic");
            assert_eq!(got[i].result, r, "batch {batch}, packet {i}");
        }
        let (st_rtl, st_model) = (
            rtl_rings.poll().expect("poll RTL"),
            model_rings.poll().expect("poll model"),
        );
        assert_eq!(
            (
                st_rtl.punts,
                st_rtl.events,
                st_rtl.punt_drops,
                st_rtl.event_drops,
                st_rtl.errors
            ),
            (
                st_model.punts,
                st_model.events,
                st_model.punt_drops,
                st_model.event_drops,
                st_model.errors
            ),
            "batch {batch}: ring status, RTL {st_rtl:?}, model {st_model:?}"
        );
        let (mut ev_rtl, mut ev_model) = (Vec::new(), Vec::new());
        rtl_rings
            .pop_events(usize::MAX, &mut ev_rtl)
            .expect("RTL events");
        model_rings
            .pop_events(usize::MAX, &mut ev_model)
            .expect("model events");
        assert_eq!(ev_rtl, ev_model, "batch {batch}: event records");
        let (mut p_rtl, mut p_model): (Vec<PuntedFrame>, Vec<PuntedFrame>) =
            (Vec::new(), Vec::new());
        rtl_rings
            .pop_punts(usize::MAX, &mut p_rtl)
            .expect("RTL punts");
        model_rings
            .pop_punts(usize::MAX, &mut p_model)
            .expect("model punts");
        // Header and bytes (the slots name the rings that popped them: not the same).
        let seen = |p: &[PuntedFrame]| {
            p.iter()
                .map(|f| (f.header, f.frame.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(seen(&p_rtl), seen(&p_model), "batch {batch}: punted frames");
        events_seen += ev_rtl.len();
        punts_seen += p_rtl.len();
        // The punted frames go back out from the buffers they were punted into, as nlbd
        // sends fragments (the punt slots take the inject slots' buffers in exchange): the
        // RTL reads them where its own punts wrote them.
        let mut sent = 0;
        for (pr, pm) in p_rtl.iter().zip(&p_model) {
            let (backend, pool) = (rng.random_range(0..12u16), rng.random_range(0..4u16));
            loop {
                match (
                    rtl_rings.inject_punted(backend, pool, pr),
                    model_rings.inject_punted(backend, pool, pm),
                ) {
                    (Ok(()), Ok(())) => break,
                    (a, b) => {
                        assert!(
                            a.is_err() && b.is_err(),
                            "batch {batch}: inject punted {a:?} / {b:?}"
                        );
                        ring_inject(&mut rtl_rings, &mut rtl, &mut model_rings, &mut model);
                    }
                }
            }
            sent += 1;
        }
        assert_eq!(
            rtl_rings.injected_in_place(),
            model_rings.injected_in_place()
        );
        rtl_rings.give_back(&mut rtl).expect("RTL doorbells");
        model_rings.give_back(&mut model).expect("model doorbells");

        // Frames injected to random backends and pools (some beyond the tables), 16 slots
        // for 24 frames: the driver waits for the write-back between its doorbells.
        let mut copied = 0;
        while copied < 24 {
            let frame = scenario.frame(&mut rng);
            let (backend, pool) = (rng.random_range(0..12u16), rng.random_range(0..4u16));
            match (
                rtl_rings.inject(backend, pool, &frame),
                model_rings.inject(backend, pool, &frame),
            ) {
                (Ok(()), Ok(())) => copied += 1,
                (a, b) => {
                    assert!(
                        a.is_err() && b.is_err(),
                        "batch {batch}: inject {a:?} / {b:?}"
                    );
                    ring_inject(&mut rtl_rings, &mut rtl, &mut model_rings, &mut model);
                }
            }
        }
        ring_inject(&mut rtl_rings, &mut rtl, &mut model_rings, &mut model);
        let on_rtl = rtl.take_injected().expect("RTL injected frames").packets;
        let on_model = model.lock().take_injected();
        assert_eq!(
            on_rtl.len(),
            on_model.len(),
            "batch {batch}: frames injected"
        );
        for (k, (r, m)) in on_rtl.iter().zip(&on_model).enumerate() {
            assert_eq!(r.result, m.result, "batch {batch}: injected frame {k}");
            assert_eq!(
                r.output, m.frame,
                "batch {batch}: injected frame {k}'s bytes"
            );
        }
        assert_eq!(
            on_rtl.len(),
            sent + copied,
            "batch {batch}: every injected frame"
        );
        injected += on_rtl.len();
    }
    assert_eq!(
        rtl_rings.injected_in_place() as usize,
        punts_seen,
        "every punted frame went back out from its own buffer"
    );
    assert!(
        events_seen > 0 && punts_seen > 0,
        "the traffic made events ({events_seen}) and punts ({punts_seen})"
    );
    let p = rtl.pcie();
    assert!(
        p.dma_writes > 0 && p.dma_reads > 0 && p.interrupts > 0,
        "the RTL's DMA reached the driver's memory: {p:?}"
    );
    eprintln!(
        "driver rings on the RTL: {events_seen} events, {punts_seen} punted frames, {injected} \
         injected frames; host memory saw {p:?}"
    );
}
