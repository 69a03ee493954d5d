//! What sharing pinned connections costs (SPEC R15.2, docs/fleet.md "Pinned connections"):
//! a host of the `u280` profile holds N connections on a pool of B backends; one backend is
//! added, so about 1/(B+1) of them become pinned. Prints the full scan that finds them (once
//! per change of the tables), the refresh between changes, the bytes published to etcd, and
//! what installing them as copies costs another host (register writes on the cost model of
//! the model device).
//!
//! `cargo bench -p nlbd --bench pinned [-- N B]` (default 1,000,000 connections, 12 backends: 13 keep
//! the pool's Maglev slice size, 4093, as every pool of up to 40 does; from 40 to 41 the slice
//! grows to 8191 and almost every choice moves).

use flowtable_compiler::{compile, compile_after, CompileOptions, Compiled, HealthState};
use nlb_driver::device::Device;
use nlb_driver::discovery::discover;
use nlb_driver::model::ModelHandle;
use nlb_driver::rings::{RingDevice, RingSizes};
use nlb_hw::enums::Event;
use nlb_hw::layouts::{CtEntry, LearnEvent};
use nlb_hw::Profile;
use nlbd::learn::{Connections, LearnOptions};
use std::time::Instant;

/// Pool `web` of `backends`, compiled as the successor of `previous` (its ids kept, as a
/// fleet's published ids keep them) when given.
fn config(backends: usize, previous: Option<&Compiled>) -> Compiled {
    let names: Vec<String> = (0..backends).map(|i| format!("b{i}")).collect();
    // The same instances in both revisions (ids by name stay: a fleet publishes its ids).
    let instances: String = (0..backends_defined())
        .map(|i| {
            format!(
                "  - {{name: b{i}, ip: 10.1.{}.{}, zone: z, mac: '02:00:00:00:{:02x}:{:02x}'}}\n",
                i / 250,
                i % 250 + 1,
                i / 256,
                i % 256
            )
        })
        .collect();
    let text = format!(
        "forwardingRules:
  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}}
targetPools:
  - {{name: web, region: r, instances: [{}]}}
instances:
{instances}",
        names.join(", ")
    );
    let (c, d) = nlb_config::parse_config("bench.yaml", &text);
    assert!(d.is_empty(), "{d}");
    let opts = CompileOptions::default();
    match previous {
        Some(p) => compile_after(&c, &HealthState::new(), &opts, &p.symbols),
        None => compile(&c, &HealthState::new(), &opts),
    }
    .expect("compile")
}

static DEFINED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn backends_defined() -> usize {
    DEFINED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A host of the `u280` profile on the host rings (table writes by DMA through the command
/// ring, as nlbd runs): the model's handle (its PCIe ledger), the device, its connections.
fn host(c: &Compiled) -> (ModelHandle, RingDevice, Connections) {
    let p = Profile::by_name("u280").expect("u280 profile");
    let sim = ModelHandle::from_device(firmware_sim::ModelDevice::new(p));
    let mut raw = sim.clone();
    let info = discover(&mut raw).expect("discover");
    let mut dev = RingDevice::attach(Box::new(raw), RingSizes::default(), false)
        .map_err(|(_, e)| e)
        .expect("host rings");
    let mut conns =
        Connections::attach(&mut dev, &info, 1000, LearnOptions::default()).expect("attach");
    conns.set_tables(&c.tables);
    (sim, dev, conns)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000) as u32;
    let b = args.get(1).copied().unwrap_or(12) as usize;
    DEFINED.store(b + 1, std::sync::atomic::Ordering::Relaxed);
    let before = config(b, None);
    let after = config(b + 1, Some(&before));
    let (_sim1, mut dev, mut h1) = host(&before);
    // N connections, each on the backend the tables choose (as the NIC learns them).
    let t = Instant::now();
    let mut events = Vec::with_capacity(4096);
    for i in 0..n {
        let mut e = LearnEvent {
            event: Event::Learn,
            protocol: 6,
            src_port: 1024 + (i % 60_000) as u16,
            dst_port: 80,
            src_addr: u128::from(
                std::net::Ipv4Addr::from(0x0a00_0000 + i / 60_000).to_ipv6_mapped(),
            ),
            dst_addr: u128::from(std::net::Ipv4Addr::new(203, 0, 113, 80).to_ipv6_mapped()),
            ..LearnEvent::default()
        };
        let entry = CtEntry {
            valid: true,
            protocol: e.protocol,
            src_port: e.src_port,
            dst_port: e.dst_port,
            src_addr: e.src_addr,
            dst_addr: e.dst_addr,
            ..CtEntry::default()
        };
        e.backend = nlbd::pinned::table_choice(&before.tables, &entry).expect("a backend");
        events.push(e);
        if events.len() == events.capacity() || i + 1 == n {
            h1.handle_events(&mut dev, &events, 1000).expect("install");
            events.clear();
        }
    }
    let installed = h1.conntrack().valid_count();
    println!(
        "{installed} connections installed on {b} backends in {:.1} s (u280 profile, bucket overflow leaves {})",
        t.elapsed().as_secs_f64(),
        n as usize - installed
    );

    h1.set_tables(&after.tables);
    let t = Instant::now();
    let pinned = h1
        .own_pinned(&after.tables, &after.symbols)
        .unwrap_or_default();
    let scan = t.elapsed();
    let t = Instant::now();
    let again = h1.own_pinned(&after.tables, &after.symbols);
    let refresh = t.elapsed();
    assert_eq!(again, None);
    let parts = nlb_control::fleet::pinned_chunks("h1", 2, pinned.clone());
    let bytes: usize = parts.iter().map(Vec::len).sum();
    println!(
        "backend {} added: {} pinned ({:.1} %, expected about {:.1} %)",
        b,
        pinned.len(),
        100.0 * pinned.len() as f64 / installed as f64,
        100.0 / (b + 1) as f64
    );
    println!(
        "  full scan after the change: {:.0} ms ({:.0} ns per connection); refresh without a change: {:.1} ms",
        scan.as_secs_f64() * 1e3,
        scan.as_secs_f64() * 1e9 / installed as f64,
        refresh.as_secs_f64() * 1e3
    );
    println!(
        "  published: {} keys, {:.1} MB ({:.0} bytes per pinned connection)",
        parts.len(),
        bytes as f64 / 1e6,
        bytes as f64 / pinned.len().max(1) as f64
    );

    // Another host installs them as copies.
    let (mut sim2, mut dev2, mut h2) = host(&after);
    let cost0 = sim2.pcie();
    let t = Instant::now();
    let r = h2
        .mirror(&mut dev2, &pinned, &after.symbols, 2000)
        .expect("mirror");
    let took = t.elapsed();
    let cost = sim2.pcie();
    // The model device runs in this process: its own work is not the host's.
    let device_ns = (cost.device_cpu_ns - cost0.device_cpu_ns) as f64;
    let host_ns = (took.as_secs_f64() * 1e9 - device_ns).max(0.0);
    println!(
        "  installed as copies on another host: {} in {:.0} ms of host CPU ({:.0} ns each; the simulated NIC's own work, {:.0} ms, left out); {} register writes, {:.1} MB by DMA",
        r.installed,
        host_ns / 1e6,
        host_ns / r.installed.max(1) as f64,
        device_ns / 1e6,
        cost.mmio_writes - cost0.mmio_writes,
        (cost.dma_read_bytes + cost.dma_write_bytes - cost0.dma_read_bytes - cost0.dma_write_bytes) as f64 / 1e6
    );
    let per_10m = 10_000_000.0 / installed as f64;
    println!(
        "  at 10 M connections per host (scaled): scan {:.1} s per change of the tables, {:.0} MB in etcd per host, copies installed by each other host {:.1} s of host CPU per change",
        scan.as_secs_f64() * per_10m,
        bytes as f64 * per_10m / 1e6,
        host_ns / 1e9 * per_10m
    );
}
