//! Packets per second per core through the golden model's batch API.
//!
//! 64-byte TCP and UDP frames to one VIP whose pool has 1000 backends (Maglev slice of
//! 65537 slots), a connection table of 1 Mi buckets × 4 ways (the u280 size) holding 1 Mi connections;
//! conntrack hits and misses measured separately. Run with
//!
//!     cargo bench -p firmware-sim --bench pipeline
//!
//! Environment:
//! - `NLB_BENCH_SECS`: time per case (default 2 s);
//! - `NLB_BENCH_PACKETS`: run exactly this many packets per case instead (rounded up to whole
//!   batches), for instruction counts under callgrind;
//! - `NLB_BENCH_CASE`: run only the cases whose name contains this text;
//! - `NLB_BENCH_BATCH`: frames per `receive_batch` call (default 32);
//! - `NLB_BENCH_CT_BUCKETS`: connection-table buckets (default 1 Mi), with as many connections
//!   (a small table that fits the caches shows what the table's size costs).
//!
//! What the figures are made of: a miss reads one random word of the 4 MiB tag array per
//! packet, a hit that word and one random cache line of the 64 MiB key-slot array (both on
//! transparent huge pages where the kernel gives them; see `src/conntrack.rs`). With
//! `NLB_BENCH_CT_BUCKETS=1024` everything is in cache and hits cost what misses do, so the
//! difference at 1 Mi buckets is the memory system's, not instructions'. The 262,144 frames
//! lie back to back in one 16 MiB buffer, as in a receive ring, and are sent in that order;
//! `docs/model-performance.md` has the figures and what was tried.
//!
//! Mpps per core is packets over the CPU time of the benchmark thread (from
//! `/proc/thread-self/schedstat`), so other processes on a shared machine do not count against
//! it; the wall-clock figure is printed beside it. Instructions per packet, exactly, one case at
//! a time (callgrind counts only the measured loop):
//!
//!     NLB_BENCH_PACKETS=16384 NLB_BENCH_CASE="L2_DSR TCP conntrack hit" \
//!         valgrind --tool=callgrind --toggle-collect='*measured*' target/release/deps/pipeline-HASH
//!
//! and divide the instructions collected by the packet count the case prints.

use etherparse::PacketBuilder;
use firmware_sim::{BatchOutput, ConnTable, CtOutcome, ModelDevice};
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
const CT_BUCKETS: u32 = 1 << 20;
/// Frames per `receive_batch` call (`NLB_BENCH_BATCH` overrides).
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

/// How long a case runs.
#[derive(Debug, Clone, Copy)]
enum Budget {
    Time(Duration),
    Packets(u64),
}

/// CPU time of the calling thread (the first field of schedstat, in ns).
fn thread_cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The measured loop: `batches` batches of `BATCH` frames, cycling through `refs`; returns the
/// packets sent. Not inlined, so callgrind can count exactly this (`--toggle-collect`).
#[inline(never)]
fn measured(
    dev: &mut ModelDevice,
    refs: &[&[u8]],
    out: &mut BatchOutput,
    at: &mut usize,
    batch: usize,
    batches: u64,
) -> u64 {
    for _ in 0..batches {
        if *at + batch > refs.len() {
            *at = 0;
        }
        dev.receive_batch(&refs[*at..*at + batch], out);
        *at += batch;
    }
    batches * batch as u64
}

fn run(
    name: &str,
    dev: &mut ModelDevice,
    frames: &[Vec<u8>],
    want: CtOutcome,
    budget: Budget,
    batch: usize,
) {
    // One buffer, frames back to back, as a receive ring would hold them.
    let ring: Vec<u8> = frames.concat();
    let mut refs: Vec<&[u8]> = Vec::with_capacity(frames.len());
    let mut at = 0;
    for f in frames {
        refs.push(&ring[at..at + f.len()]);
        at += f.len();
    }
    let mut out = BatchOutput::new();
    // Warm up and check the case measures what it says.
    dev.receive_batch(&refs[..batch], &mut out);
    for r in &out.results {
        assert_eq!(
            (r.verdict, r.conntrack),
            (Verdict::Forward, want),
            "{name}: {r:?}"
        );
    }
    let mut at = batch;
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    let packets = match budget {
        Budget::Packets(n) => measured(
            dev,
            &refs,
            &mut out,
            &mut at,
            batch,
            n.div_ceil(batch as u64),
        ),
        Budget::Time(t) => {
            let mut packets = 0;
            while start.elapsed() < t {
                packets += measured(
                    dev,
                    &refs,
                    &mut out,
                    &mut at,
                    batch,
                    (8192 / batch).max(1) as u64,
                );
            }
            packets
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, thread_cpu_time()) {
        (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
        _ => wall,
    };
    println!(
        "{name:<26} {:>7.2} Mpps/core {:>7.1} ns/packet (CPU time)  {:>7.2} Mpps wall  {packets} packets",
        packets as f64 / cpu / 1e6,
        cpu * 1e9 / packets as f64,
        packets as f64 / wall / 1e6,
    );
}

fn main() {
    let secs: f64 = std::env::var("NLB_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let budget = match std::env::var("NLB_BENCH_PACKETS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(n) => Budget::Packets(n),
        None => Budget::Time(Duration::from_secs_f64(secs)),
    };
    let only = std::env::var("NLB_BENCH_CASE").unwrap_or_default();
    let ct_buckets: u32 = std::env::var("NLB_BENCH_CT_BUCKETS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 64)
        .unwrap_or(CT_BUCKETS);
    let batch: usize = std::env::var("NLB_BENCH_BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| (1..=FRAMES / 2).contains(&n))
        .unwrap_or(BATCH);
    let connections = ct_buckets;
    let profile = Profile::by_name("sim").expect("sim profile");
    println!(
        "firmware-sim pipeline: {BACKENDS} backends, Maglev M = {MAGLEV_M}, {connections} connections in {ct_buckets} x 4, batches of {batch}, 64-byte frames"
    );
    for delivery in [Delivery::L2Dsr, Delivery::Gue] {
        if !(0..4).any(|c| case_name(delivery, c).contains(&only)) {
            continue;
        }
        let mut dev = ModelDevice::with_conntrack(profile, ConnTable::new(ct_buckets, 4));
        load(&mut dev, &tables(delivery));
        // 1 Mi connections: TCP for even clients, UDP for odd ones.
        let mut installed = 0u32;
        for i in 0..connections {
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
            println!("installed {installed} of {connections} connections");
        }
        let picks = shuffle(connections / 2, FRAMES);
        for c in 0..4 {
            let name = case_name(delivery, c);
            if !name.contains(&only) {
                continue;
            }
            let proto = if c < 2 { 6u8 } else { 17 };
            let miss = c % 2 == 1;
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
            run(&name, &mut dev, &frames, want, budget, batch);
        }
    }
}

/// Name of case `c` (0..4: TCP hit, TCP miss, UDP hit, UDP miss) of a delivery.
fn case_name(delivery: Delivery, c: usize) -> String {
    let p = if c < 2 { "TCP" } else { "UDP" };
    let h = if c.is_multiple_of(2) { "hit" } else { "miss" };
    format!("{} {p} conntrack {h}", delivery.name())
}

/// Writes every non-empty entry of `bank` through the table window into bank 0, as the
/// loader would, and enables the pipeline.
fn load(dev: &mut ModelDevice, bank: &Tables) {
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
