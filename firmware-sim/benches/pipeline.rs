//! Packets per second per core through the golden model's batch API.
//!
//! 64-byte TCP and UDP frames to one VIP whose pool has 1000 backends (Maglev slice of
//! 65537 slots), a connection table of 1 Mi buckets × 4 ways (the u280 size) holding 1 Mi connections;
//! conntrack hits and misses measured separately. Run with
//!
//!     cargo bench -p firmware-sim --bench pipeline
//!
//! (`NLB_BENCH_SECS` sets the time per case, default 2 s.)

use etherparse::PacketBuilder;
use firmware_sim::{BatchOutput, ConnTable, CtOutcome, SimDevice};
use nlb_hw::enums::{Affinity, Delivery, Event, KeyType, Verdict};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::layouts::{
    BackendEntry, LearnEvent, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry,
};
use nlb_hw::{table_index, FlowKey, Profile, Tables};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const BACKENDS: u16 = 1000;
const MAGLEV_M: u32 = 65537;
const CONNECTIONS: u32 = 1 << 20;
const CT_BUCKETS: u32 = 1 << 20;
const BATCH: usize = 32;
const FRAMES: usize = 1 << 18;
const VIP: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);

fn tables(delivery: Delivery) -> Tables {
    let profile = Profile::by_name("sim").expect("sim profile");
    let mut t = Tables::empty(profile);
    for id in 0..BACKENDS {
        t.backends[usize::from(id)] = BackendEntry {
            valid: true,
            is_ipv6: false,
            addr: addr_to_u128(Ipv4Addr::new(10, 0, (id >> 8) as u8, id as u8).into()),
            mac: 0x02_00_00_00_00_00 | u64::from(id),
        };
    }
    for s in 0..MAGLEV_M {
        t.maglev[s as usize] = MaglevSlot {
            backend: (s % u32::from(BACKENDS)) as u16,
        };
    }
    t.pools[0] = PoolEntry {
        valid: true,
        affinity: Affinity::None,
        delivery,
        maglev_base: 0,
        maglev_size: MAGLEV_M,
        track: true,
        idle_timeout: 60,
        ..PoolEntry::default()
    };
    for (rid, proto) in [(0u16, 6u8), (1, 17)] {
        t.rules[usize::from(rid)] = RuleEntry {
            valid: true,
            acl_enabled: false,
            pool: 0,
        };
        let bucket = table_index(FlowKey::vip(proto, VIP.into()).hash(), profile.vip_buckets);
        let ways = profile.vip_ways as usize;
        let way = (0..ways)
            .find(|w| !t.vip[bucket as usize * ways + w].valid)
            .expect("free way");
        let mut e = VipEntry {
            valid: true,
            protocol: proto,
            addr: addr_to_u128(VIP.into()),
            ..VipEntry::default()
        };
        e.slot[0] = PortSlot {
            valid: true,
            port_lo: 0,
            port_hi: 65535,
            rule: rid,
        };
        t.vip[bucket as usize * ways + way] = e;
    }
    t
}

/// Client i: address 100.64.0.0 + i / 64, port 1024 + i % 64 (hits); misses use ports above.
fn client(i: u32, miss: bool) -> (Ipv4Addr, u16) {
    let a = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + i / 64;
    let p = 1024 + (i % 64) as u16 + if miss { 2048 } else { 0 };
    (Ipv4Addr::from(a), p)
}

fn frame(proto: u8, src: Ipv4Addr, sport: u16) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xee], [2, 0, 0, 0, 0, 1]).ipv4(
        src.octets(),
        VIP.octets(),
        64,
    );
    let mut out = Vec::with_capacity(64);
    if proto == 6 {
        b.tcp(sport, 80, 1, 65535)
            .ack(1)
            .write(&mut out, &[0u8; 6])
            .expect("tcp");
    } else {
        b.udp(sport, 53).write(&mut out, &[0u8; 18]).expect("udp");
    }
    out.resize(64, 0);
    out
}

/// A xorshift stream, to spread frames over the whole connection table.
fn shuffle(n: u32, count: usize) -> Vec<u32> {
    let mut x = 0x9e37_79b9u32;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        })
        .collect()
}

fn run(name: &str, dev: &mut SimDevice, frames: &[Vec<u8>], want: CtOutcome, secs: f64) {
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let mut out = BatchOutput::new();
    // Warm up and check the case measures what it says.
    dev.receive_batch(&refs[..BATCH], &mut out);
    for r in &out.results {
        assert_eq!(
            (r.verdict, r.conntrack),
            (Verdict::Forward, want),
            "{name}: {r:?}"
        );
    }
    let budget = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut packets = 0u64;
    let mut at = 0;
    while start.elapsed() < budget {
        for _ in 0..256 {
            if at + BATCH > refs.len() {
                at = 0;
            }
            dev.receive_batch(&refs[at..at + BATCH], &mut out);
            at += BATCH;
            packets += BATCH as u64;
        }
    }
    let dt = start.elapsed().as_secs_f64();
    println!(
        "{name:<34} {:>7.2} Mpps/core  {:>6.1} ns/packet",
        packets as f64 / dt / 1e6,
        dt * 1e9 / packets as f64
    );
}

fn main() {
    let secs: f64 = std::env::var("NLB_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let profile = Profile::by_name("sim").expect("sim profile");
    println!(
        "firmware-sim pipeline: {BACKENDS} backends, Maglev M = {MAGLEV_M}, {CONNECTIONS} connections in {CT_BUCKETS} x 4, batches of {BATCH}, 64-byte frames"
    );
    for delivery in [Delivery::L2Dsr, Delivery::Gue] {
        let mut dev = SimDevice::with_conntrack(profile, ConnTable::new(CT_BUCKETS, 4));
        load(&mut dev, &tables(delivery));
        // 1 Mi connections: TCP for even clients, UDP for odd ones.
        let mut installed = 0u32;
        for i in 0..CONNECTIONS {
            let (src, sport) = client(i, false);
            let proto = if i % 2 == 0 { 6 } else { 17 };
            let key = FlowKey::tuple5(
                proto,
                src.into(),
                sport,
                VIP.into(),
                if proto == 6 { 80 } else { 53 },
            );
            let ev = LearnEvent {
                event: Event::Learn,
                protocol: proto,
                src_port: sport,
                dst_port: key.dst_port,
                src_addr: key.src_addr,
                dst_addr: key.dst_addr,
                backend: (i % u32::from(BACKENDS)) as u16,
                rule: 0,
                flow_hash: key.with_type(KeyType::Tuple5).hash(),
            };
            if dev.conntrack_mut().install(&ev, 0).is_ok() {
                installed += 1;
            }
        }
        if delivery == Delivery::L2Dsr {
            println!("installed {installed} of {CONNECTIONS} connections");
        }
        let picks = shuffle(CONNECTIONS / 2, FRAMES);
        for (proto, pname) in [(6u8, "TCP"), (17, "UDP")] {
            for (miss, cname) in [(false, "hit"), (true, "miss")] {
                let mut frames = Vec::with_capacity(FRAMES);
                for &k in &picks {
                    let i = 2 * k + u32::from(proto == 17);
                    let (src, sport) = client(i, miss);
                    let dport = if proto == 6 { 80 } else { 53 };
                    let key = FlowKey::tuple5(proto, src.into(), sport, VIP.into(), dport);
                    // Hits only for connections that found a free way when installed.
                    if miss || dev.conntrack().lookup(&key).is_some() {
                        frames.push(frame(proto, src, sport));
                    }
                }
                let want = if miss {
                    CtOutcome::Miss
                } else {
                    CtOutcome::Hit
                };
                let name = format!("{} {pname} conntrack {cname}", delivery.name());
                run(&name, &mut dev, &frames, want, secs);
            }
        }
    }
}

/// Writes every non-empty entry of `bank` through the table window into bank 0, as the
/// loader would, and enables the pipeline.
fn load(dev: &mut SimDevice, bank: &Tables) {
    let empty = Tables::empty(bank.profile);
    use nlb_hw::blocks::{ctrl, table as tb};
    for (table, index) in empty.diff(bank) {
        let words = bank.read_entry(table, index).expect("entry");
        dev.write32(tb::SELECT, table.value()).expect("reg");
        dev.write32(tb::INDEX, index).expect("reg");
        for (i, w) in words.iter().enumerate() {
            dev.write32(tb::DATA + 4 * i as u32, *w).expect("reg");
        }
        dev.write32(tb::CMD, 1).expect("reg");
    }
    dev.write32(ctrl::ENABLE, 1).expect("reg");
}
