//! The conntrack manager against the simulated device: entries land where the model's own
//! lookup finds them, packets follow them, and no packet can see a half-written entry.

use crate::common;

use common::*;
use nlb_driver::conntrack::{Conntrack, Installed, NewConnection, FLAG_CLOSED};
use nlb_driver::device::{Device, DeviceError, RegOp};
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_driver::queues::Queues;
use nlb_driver::{discover, DeviceInfo};
use nlb_hw::blocks::conntrack as win;
use nlb_hw::blocks::queues as qb;
use nlb_hw::enums::{TableCmd, Verdict};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::{table_index, FlowKey, NicSettings};
use std::net::{IpAddr, Ipv4Addr};

const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn key(src_port: u16) -> FlowKey {
    FlowKey::tuple5(6, IpAddr::V4(CLIENT), src_port, IpAddr::V4(VIP), 80)
}

fn conn(src_port: u16, backend: u16) -> NewConnection {
    NewConnection {
        key: key(src_port),
        backend,
        rule: 0,
    }
}

/// A device serving image A with connection tracking on for pool 0.
fn setup() -> (ModelHandle, DeviceInfo) {
    let mut sim = ModelHandle::new(profile());
    let info = discover(&mut sim).unwrap();
    let mut loader = Loader::attach(&mut sim, info.profile, LoaderOptions::default()).unwrap();
    let mut a = image(profile(), Which::A, 0);
    a.pools[0].track = true;
    loader.load(&mut sim, &a, &NicSettings::default()).unwrap();
    (sim, info)
}

fn send(sim: &ModelHandle, src_port: u16) -> firmware_sim::PacketResult {
    let mut out = vec![0u8; 16384];
    sim.lock()
        .receive(&frame_to_vip(src_port), &mut out)
        .unwrap()
}

#[test]
fn installed_connections_are_where_the_pipeline_looks_and_steer_packets() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    assert_eq!(ct.valid_count(), 0);
    // Untracked: the packet goes by Maglev (backend 10) and asks for a learn.
    let r = send(&sim, 50000);
    assert_eq!(r.backend, Some(A_BACKEND));
    assert!(r.event.is_some(), "a learn event for the miss");
    // Install the flow on backend 30 (a valid backend that Maglev would not pick).
    let mut out = Vec::new();
    ct.install_batch(&mut sim, &[conn(50000, 30)], 5, &mut out)
        .unwrap();
    let Installed::New(index) = out[0] else {
        panic!("{out:?}")
    };
    // The regmap's placement: bucket = (hash * buckets) >> 32, way 0 of an empty bucket.
    let bucket = table_index(key(50000).hash(), profile().ct_buckets);
    assert_eq!(index, bucket * profile().ct_ways);
    // The model's own lookup agrees, and holds what was installed.
    let dev = sim.lock();
    assert_eq!(dev.conntrack().lookup(&key(50000)), Some(index));
    let e = dev.conntrack().entry(index).unwrap();
    assert_eq!((e.backend, e.rule, e.timestamp), (30, 0, 5));
    assert_eq!(e.src_addr, addr_to_u128(IpAddr::V4(CLIENT)));
    drop(dev);
    assert_eq!(
        sim.read32(win::COUNT).unwrap(),
        1,
        "the device counts one valid entry"
    );
    let r = send(&sim, 50000);
    assert_eq!(r.conntrack, firmware_sim::CtOutcome::Hit);
    assert_eq!(r.backend, Some(30), "the tracked backend wins over Maglev");
    assert_eq!(r.event, None);
    // Installing it again is a no-op; another backend replaces it.
    ct.install_batch(&mut sim, &[conn(50000, 30)], 6, &mut out)
        .unwrap();
    assert_eq!(out, vec![Installed::Present(index)]);
    ct.install_batch(&mut sim, &[conn(50000, 40)], 7, &mut out)
        .unwrap();
    assert_eq!(out, vec![Installed::Replaced(index)]);
    assert_eq!(send(&sim, 50000).backend, Some(40));
    // Evicted: back to Maglev.
    assert_eq!(ct.evict_batch(&mut sim, &[key(50000)]).unwrap(), 1);
    assert_eq!(sim.lock().conntrack().lookup(&key(50000)), None);
    assert_eq!(send(&sim, 50000).backend, Some(A_BACKEND));
    assert_eq!(ct.evict_batch(&mut sim, &[key(50000)]).unwrap(), 0);
}

#[test]
fn a_full_bucket_refuses_the_next_flow() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let ways = profile().ct_ways as usize;
    let target = ct.bucket_of(&key(1));
    // Source ports whose flows share bucket `target`, found by the regmap hash.
    let ports: Vec<u16> = (1..=u16::MAX)
        .filter(|p| table_index(key(*p).hash(), profile().ct_buckets) == target)
        .take(ways + 1)
        .collect();
    assert_eq!(ports.len(), ways + 1);
    let conns: Vec<_> = ports.iter().map(|p| conn(*p, 20)).collect();
    let mut out = Vec::new();
    ct.install_batch(&mut sim, &conns, 1, &mut out).unwrap();
    let base = target * profile().ct_ways;
    let expected: Vec<Installed> = (0..ways as u32)
        .map(|w| Installed::New(base + w))
        .chain([Installed::BucketFull { bucket: target }])
        .collect();
    assert_eq!(out, expected);
    for p in &ports[..ways] {
        assert_eq!(send(&sim, *p).backend, Some(20));
    }
    assert_eq!(send(&sim, ports[ways]).backend, Some(A_BACKEND));
    // Freeing a way makes room.
    ct.evict_batch(&mut sim, &[key(ports[1])]).unwrap();
    ct.install_batch(&mut sim, &[conn(ports[ways], 20)], 2, &mut out)
        .unwrap();
    assert_eq!(out, vec![Installed::New(base + 1)]);
}

/// What a learning NIC reported not installed (SPEC R12.3, docs/pipeline.md section 15.3): the
/// host settles only a full bucket. A bucket with a free way in the host's copy means the NIC
/// had no install record free, and the NIC's own installs after that event (whose records the
/// host has not read yet) may already hold that way: here one does, written into the device
/// behind the host's back. `settle_left` leaves the bucket alone; `install_batch`, as a
/// learning-off host would, overwrites the NIC's connection.
#[test]
fn what_a_learning_nic_left_is_settled_only_in_a_full_bucket() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let ways = profile().ct_ways;
    let target = ct.bucket_of(&key(1));
    let ports: Vec<u16> = (1..=u16::MAX)
        .filter(|p| table_index(key(*p).hash(), profile().ct_buckets) == target)
        .take(ways as usize + 2)
        .collect();
    let (left, nic) = (ports[0], ports[1]);
    // The NIC installed `nic` in the bucket's first way; its record is still on the ring.
    let first = target * ways;
    let nic_entry = nlb_hw::layouts::CtEntry {
        valid: true,
        protocol: 6,
        src_port: nic,
        dst_port: 80,
        src_addr: addr_to_u128(IpAddr::V4(CLIENT)),
        dst_addr: addr_to_u128(IpAddr::V4(VIP)),
        backend: 30,
        ..Default::default()
    };
    sim.lock().conntrack_mut().write(first, nic_entry).unwrap();
    let mut out = Vec::new();
    ct.settle_left(&mut sim, &[conn(left, 20)], 5, &mut out)
        .unwrap();
    assert_eq!(out, vec![Installed::LeftToNic { bucket: target }]);
    assert_eq!(ct.stats().left_to_nic, 1);
    assert_eq!(sim.lock().conntrack().entry(first), Some(&nic_entry));
    assert_eq!(
        send(&sim, nic).backend,
        Some(30),
        "the NIC's connection holds"
    );
    // The hazard settle_left avoids: a plain install takes the way the copy shows free.
    ct.install_batch(&mut sim, &[conn(left, 20)], 5, &mut out)
        .unwrap();
    assert_eq!(out, vec![Installed::New(first)]);
    assert_ne!(send(&sim, nic).backend, Some(30), "overwritten");
    // A full bucket (in the host's copy) is the host's to settle: through the register window
    // nothing is taken (BucketFull), as install_batch does.
    let fill: Vec<_> = ports[1..ways as usize]
        .iter()
        .map(|p| conn(*p, 20))
        .collect();
    ct.install_batch(&mut sim, &fill, 6, &mut out).unwrap();
    ct.settle_left(&mut sim, &[conn(ports[ways as usize], 20)], 7, &mut out)
        .unwrap();
    assert_eq!(out, vec![Installed::BucketFull { bucket: target }]);
}

/// Executes every operation alone and, after each conntrack command, checks the model's
/// entry: it is either invalid or exactly one of the entries the test installs whole.
struct Watch {
    sim: ModelHandle,
    index_reg: u32,
    commands: usize,
    complete: Vec<nlb_hw::layouts::CtEntry>,
}

impl Device for Watch {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.sim.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.sim.write32(offset, value)?;
        if offset == win::INDEX {
            self.index_reg = value;
        }
        if offset == win::CMD {
            // WRITE_AT/READ_AT carry the index (docs/regmap.md, table_cmd).
            let cmd = win::Cmd::from_word(value).ok();
            if let Some(c) = cmd.filter(|c| matches!(c.op, TableCmd::WriteAt | TableCmd::ReadAt)) {
                self.index_reg = c.index;
            }
            self.commands += 1;
            let dev = self.sim.lock();
            let e = dev.conntrack().entry(self.index_reg).copied().unwrap();
            assert!(
                !e.valid || self.complete.contains(&e),
                "entry {} became valid before it was complete: {e:?}",
                self.index_reg
            );
        }
        Ok(())
    }
    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        for op in ops {
            match *op {
                RegOp::Read(o) => reads.push(self.read32(o)?),
                RegOp::Write(o, v) => self.write32(o, v)?,
            }
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "watch".into()
    }
}

#[test]
fn the_valid_bit_is_written_last() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let conns: Vec<_> = (0..200)
        .map(|i| conn(20000 + i, 10 + (i % 4) * 10))
        .collect();
    let mut watch = Watch {
        sim: sim.clone(),
        index_reg: 0,
        commands: 0,
        complete: Vec::new(),
    };
    // Every entry the installs and the replacements below make, complete.
    for (c, now) in conns
        .iter()
        .map(|c| (c, 1))
        .chain(conns.iter().map(|c| (c, 2)))
    {
        for backend in [c.backend, c.backend + 1] {
            let k = c.key;
            watch.complete.push(nlb_hw::layouts::CtEntry {
                valid: true,
                protocol: k.protocol,
                src_port: k.src_port,
                dst_port: k.dst_port,
                src_addr: k.src_addr,
                dst_addr: k.dst_addr,
                backend,
                rule: c.rule,
                flags: 0,
                timestamp: now,
            });
        }
    }
    let mut out = Vec::new();
    ct.install_batch(&mut watch, &conns, 1, &mut out).unwrap();
    assert!(watch.commands >= 400, "two commands per install");
    // Replacing every flow's backend: invalidate, write, validate.
    let moved: Vec<_> = conns
        .iter()
        .map(|c| NewConnection {
            backend: c.backend + 1,
            ..*c
        })
        .collect();
    ct.install_batch(&mut watch, &moved, 2, &mut out).unwrap();
    assert!(out.iter().all(|o| matches!(o, Installed::Replaced(_))));
    assert_eq!(sim.lock().conntrack().valid_count(), 200);
}

#[test]
fn ageing_keeps_active_flows_and_evicts_idle_and_closed_ones() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let mut out = Vec::new();
    ct.install_batch(
        &mut sim,
        &[conn(1111, 20), conn(2222, 20), conn(3333, 20)],
        0,
        &mut out,
    )
    .unwrap();
    let idle = |e: &nlb_hw::layouts::CtEntry| if e.flags & FLAG_CLOSED != 0 { 10 } else { 60 };
    // Flow 1111 sends traffic; the others are idle.
    assert_eq!(send(&sim, 1111).backend, Some(20));
    let r = ct.age(&mut sim, 30, idle).unwrap();
    assert_eq!((r.scanned, r.refreshed, r.evicted), (3, 1, 0));
    let r = ct.age(&mut sim, 65, idle).unwrap();
    // 2222 and 3333 idle since 0 (65 s ≥ 60); 1111 last seen at 30.
    assert_eq!((r.scanned, r.refreshed, r.evicted), (3, 0, 2));
    assert_eq!(sim.lock().conntrack().valid_count(), 1);
    assert!(sim.lock().conntrack().lookup(&key(1111)).is_some());
    // A FIN/RST marks the flow closed; the short timeout then applies.
    assert!(ct.mark_closed(&mut sim, &key(1111)).unwrap());
    let i = sim.lock().conntrack().lookup(&key(1111)).unwrap();
    assert_eq!(
        sim.lock().conntrack().entry(i).unwrap().flags & FLAG_CLOSED,
        FLAG_CLOSED
    );
    // Last seen at 30: at 35 it is 5 s idle, at 45 15 s (an open flow would stay until 90).
    assert_eq!(ct.age(&mut sim, 35, idle).unwrap().evicted, 0);
    assert_eq!(ct.age(&mut sim, 45, idle).unwrap().evicted, 1);
    assert_eq!(sim.lock().conntrack().valid_count(), 0);
    assert_eq!(send(&sim, 1111).backend, Some(A_BACKEND), "back to Maglev");
}

#[test]
fn a_restarted_manager_finds_the_table_as_it_was() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let conns: Vec<_> = (0..500).map(|i| conn(30000 + i, 20)).collect();
    let mut out = Vec::new();
    ct.install_batch(&mut sim, &conns, 9, &mut out).unwrap();
    let before: Vec<_> = ct.scan().collect();
    assert_eq!(before.len(), 500);
    let mut again = Conntrack::attach(&mut sim, &info, 100).unwrap();
    let after: Vec<_> = again.scan().collect();
    assert_eq!(before, after);
    assert!(again.rescan(&mut sim).unwrap().is_empty());
    // The learn queue held the misses of the traffic so far: none here.
    let mut events = Vec::new();
    Queues::new().pop_learn(&mut sim, 64, &mut events).unwrap();
    assert!(events.is_empty());
}

#[test]
fn learn_events_from_traffic_become_connections() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    for p in 0..10 {
        assert_eq!(send(&sim, 60000 + p).verdict, Verdict::Forward);
    }
    let mut q = Queues::new();
    assert_eq!(q.poll(&mut sim).unwrap().learn, 10);
    let mut events = Vec::new();
    assert_eq!(q.pop_learn(&mut sim, 64, &mut events).unwrap(), 10);
    let conns: Vec<NewConnection> = events.iter().map(NewConnection::from).collect();
    let mut out = Vec::new();
    ct.install_batch(&mut sim, &conns, 1, &mut out).unwrap();
    assert!(out.iter().all(|o| matches!(o, Installed::New(_))));
    for p in 0..10 {
        let r = send(&sim, 60000 + p);
        assert_eq!(r.conntrack, firmware_sim::CtOutcome::Hit);
        assert_eq!(r.backend, Some(A_BACKEND));
    }
}

#[test]
fn a_learn_queue_overflow_between_poll_and_pop_is_still_reported() {
    let (mut sim, _info) = setup();
    let depth = profile().queue_depth as u16;
    let mut q = Queues::new();
    for p in 0..10 {
        assert!(send(&sim, 40000 + p).event.is_some());
    }
    let s = q.poll(&mut sim).unwrap();
    assert_eq!((s.learn, s.learn_overflow), (10, false));
    // More misses than the queue holds arrive after the poll: the device drops the rest and
    // flags the overflow.
    for p in 0..depth {
        send(&sim, 41000 + p);
    }
    let mut events = Vec::new();
    assert_eq!(
        q.pop_learn(&mut sim, 1000, &mut events).unwrap(),
        usize::from(depth)
    );
    // The pop's status read cleared the device's flag (read-to-clear, docs/regmap.md) ...
    assert_eq!(sim.read32(qb::LEARN_STATUS).unwrap(), 0);
    // ... yet the next poll reports the overflow, once.
    let s = q.poll(&mut sim).unwrap();
    assert_eq!((s.learn, s.learn_overflow), (0, true));
    assert!(!q.poll(&mut sim).unwrap().learn_overflow);
}

/// The open connections per (rule, backend) that the service LB policy reads each refresh
/// (SPEC R6: live tracked connections): counted by hand through installs, a rewrite to another
/// backend, a FIN, an eviction, ageing and a restart; then random operations against a scan.
#[test]
fn open_counts_follow_every_change_of_the_table() {
    let (mut sim, info) = setup();
    let mut ct = Conntrack::attach(&mut sim, &info, 0).unwrap();
    let rule = |src_port: u16, backend: u16, rule: u16| NewConnection {
        rule,
        ..conn(src_port, backend)
    };
    let counts = |ct: &Conntrack| {
        let mut v: Vec<((u16, u16), u32)> =
            ct.open_counts().iter().map(|(k, n)| (*k, *n)).collect();
        v.sort_unstable();
        v
    };
    let mut out = Vec::new();
    ct.install_batch(
        &mut sim,
        &[
            conn(1, 20),
            conn(2, 20),
            conn(3, 30),
            rule(4, 20, 1),
            conn(1, 20), // present already: counted once
        ],
        0,
        &mut out,
    )
    .unwrap();
    assert_eq!(counts(&ct), vec![((0, 20), 2), ((0, 30), 1), ((1, 20), 1)]);
    // Flow 2 rewritten to backend 30: one moves from (0, 20) to (0, 30).
    ct.install_batch(&mut sim, &[conn(2, 30)], 0, &mut out)
        .unwrap();
    assert_eq!(counts(&ct), vec![((0, 20), 1), ((0, 30), 2), ((1, 20), 1)]);
    // A FIN: flow 3 is closed, no longer open (its entry stays until aged).
    assert!(ct.mark_closed(&mut sim, &key(3)).unwrap());
    assert_eq!(counts(&ct), vec![((0, 20), 1), ((0, 30), 1), ((1, 20), 1)]);
    // Closing it again and evicting it change nothing more; evicting flow 4 removes its pair.
    assert!(ct.mark_closed(&mut sim, &key(3)).unwrap());
    assert_eq!(ct.evict_batch(&mut sim, &[key(3), key(4)]).unwrap(), 2);
    assert_eq!(counts(&ct), vec![((0, 20), 1), ((0, 30), 1)]);
    // Ageing evicts the idle flow 1 (flow 2 was refreshed by its rewrite at 0 too: both go).
    let r = ct.age(&mut sim, 100, |_| 60).unwrap();
    assert_eq!(r.evicted, 2);
    assert!(ct.open_counts().is_empty());
    // A restarted manager counts what it reads back.
    ct.install_batch(&mut sim, &[conn(7, 20), rule(8, 21, 2)], 0, &mut out)
        .unwrap();
    assert!(ct.mark_closed(&mut sim, &key(7)).unwrap());
    let again = Conntrack::attach(&mut sim, &info, 0).unwrap();
    assert_eq!(counts(&again), vec![((2, 21), 1)]);

    // Random installs, rewrites, closes and evictions: the kept counts equal a scan.
    let mut ct = again;
    // An LCG (Knuth's MMIX constants); its high half is the number.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x / 4_294_967_296
    };
    for round in 0..40 {
        let mut batch = Vec::new();
        for _ in 0..50 {
            let r = next();
            batch.push(rule(
                (r % 400) as u16,
                20 + (r / 400 % 4) as u16,
                (r / 1600 % 3) as u16,
            ));
        }
        ct.install_batch(&mut sim, &batch, round, &mut out).unwrap();
        for _ in 0..10 {
            ct.mark_closed(&mut sim, &key((next() % 400) as u16))
                .unwrap();
        }
        let evict: Vec<FlowKey> = (0..10).map(|_| key((next() % 400) as u16)).collect();
        ct.evict_batch(&mut sim, &evict).unwrap();
        if round % 10 == 9 {
            ct.age(&mut sim, round + 5, |e| {
                if e.flags & FLAG_CLOSED != 0 {
                    3
                } else {
                    30
                }
            })
            .unwrap();
        }
        assert_eq!(ct.open_counts(), &ct.open_counts_by_scan(), "round {round}");
    }
    let open: u32 = ct.open_counts().values().sum();
    let dev = sim.lock();
    let table = dev.conntrack();
    let by_device = (0..table.len())
        .filter_map(|i| table.entry(i))
        .filter(|e| e.valid && e.flags & FLAG_CLOSED == 0)
        .count();
    drop(dev);
    assert_eq!(open as usize, by_device, "the device's own table agrees");
    assert!(open > 0);
}
