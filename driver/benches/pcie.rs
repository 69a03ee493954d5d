//! The host interface on the PCIe cost model (docs/pcie.md; figures, no assertions).
//!
//! - **full load of a `u280` image** (every entry of every table set: 16 Mi Maglev slots,
//!   65,536 backends, ...) by DMA through the command ring, into the in-process model;
//! - **attach** (recovery: both banks and the whole connection table, 64 Mi entries at
//!   `u280`, read back by DMA);
//! - the same load through the register window, for comparison, on the `sim` profile (the
//!   register path at `u280` scale takes minutes on the cost model: that is the point).
//!
//! Each figure is the host's CPU time (this thread's, with the simulated device's own work
//! taken out) and the time on the cost model: host CPU + register stalls + every DMA's
//! latency and link time in sequence (nothing overlapped: conservative).
//!
//! Run: `cargo bench -p nlb-driver --bench pcie` (NLB_BENCH_QUICK=1: the `sim` profile only).

use nlb_driver::conntrack::Conntrack;
use nlb_driver::device::Device;
use nlb_driver::discover;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_driver::pcie::{process_cpu, process_kernel_cpu, PcieStats};
use nlb_driver::rings::{HostRings, RingSizes};
use nlb_hw::enums::{Affinity, Delivery};
use nlb_hw::layouts::{BackendEntry, CtEntry, MaglevSlot, PoolEntry, RuleEntry, VipEntry};
use nlb_hw::{NicSettings, Profile, Tables};
use std::time::{Duration, Instant};

/// Every entry of every table of `p` set (a worst case: a delta from empty writes them all).
fn full_image(p: &'static Profile) -> Tables {
    let mut t = Tables::empty(p);
    let mut x: u32 = 0x1234_5678;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    for (i, b) in t.backends.iter_mut().enumerate() {
        *b = BackendEntry {
            valid: true,
            is_ipv6: false,
            addr: 0xffff_0a00_0000 + i as u128,
            mac: 0x0200_0000_0000 + i as u64,
        };
    }
    let pools = p.pools as usize;
    let slice = (p.maglev_slots as usize / pools).min(65_537);
    for (i, e) in t.pools.iter_mut().enumerate() {
        *e = PoolEntry {
            valid: true,
            affinity: Affinity::None,
            delivery: Delivery::L2Dsr,
            maglev_base: (i * slice) as u32,
            maglev_size: slice as u32,
            idle_timeout: 60,
            track: true,
            ..PoolEntry::default()
        };
    }
    for s in t.maglev.iter_mut() {
        *s = MaglevSlot {
            backend: (rnd() % p.backends) as u16,
        };
    }
    for (i, r) in t.rules.iter_mut().enumerate() {
        *r = RuleEntry {
            valid: true,
            acl_enabled: false,
            pool: (i % pools) as u16,
        };
    }
    for (i, v) in t.vip.iter_mut().enumerate() {
        let mut e = VipEntry {
            valid: true,
            protocol: 6,
            addr: 0xffff_cb00_0000 + i as u128,
            ..VipEntry::default()
        };
        e.slot[0].valid = true;
        e.slot[0].port_lo = 80;
        e.slot[0].port_hi = 80;
        e.slot[0].rule = (i % p.rules as usize) as u16;
        *v = e;
    }
    t
}

/// One line of figures. The host's CPU is every thread's (the simulated device's own work,
/// done inline, left out), and the cost model adds it serially to the PCIe stalls: as if one
/// thread did it all, whatever the threads. The wall time (the device's work left out) says
/// what the threads bought, on an idle machine.
fn report(what: &str, m: &Measured, used: &PcieStats) {
    let host = m.cpu.saturating_sub(m.device_cpu);
    let wall = m.wall.saturating_sub(m.device_cpu);
    let model = used.serial_ns(host.as_secs_f64() * 1e9) / 1e6;
    println!(
        "{what:<46} host CPU {:>8.1} ms (kernel {:>7.1} ms; wall {:>8.1} ms) | on the cost model {:>8.1} ms \
         (register reads {}, writes {}: {:.1} ms stalled; DMA {} reads / {} MB, {} writes / {} MB: \
         {:.1} ms latency + {:.1} ms link)",
        host.as_secs_f64() * 1e3,
        m.kernel.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e3,
        model,
        used.mmio_reads,
        used.mmio_writes,
        used.mmio_stall_ns / 1e6,
        used.dma_reads,
        used.dma_read_bytes >> 20,
        used.dma_writes,
        used.dma_write_bytes >> 20,
        used.dma_read_latency_ns / 1e6,
        (used.dma_read_ns + used.dma_write_ns) / 1e6,
    );
}

/// What one measured call took.
struct Measured {
    /// CPU of every thread of the process.
    cpu: Duration,
    /// The simulated device's CPU inside it (on the calling thread).
    device_cpu: Duration,
    /// The part of `cpu` in the kernel (new memory's faults and zeroing).
    kernel: Duration,
    /// Wall time.
    wall: Duration,
}

/// Runs `f`, returning its result, what it took and the PCIe use.
fn measure<R>(
    dev: &mut ModelHandle,
    f: impl FnOnce(&mut ModelHandle) -> R,
) -> (R, Measured, PcieStats) {
    let before = dev.pcie();
    let (c0, k0, w0) = (process_cpu(), process_kernel_cpu(), Instant::now());
    let r = f(dev);
    let (cpu, wall) = (process_cpu().saturating_sub(c0), w0.elapsed());
    let kernel = process_kernel_cpu().saturating_sub(k0);
    let used = dev.pcie().since(&before);
    let device_cpu = Duration::from_nanos(used.device_cpu_ns);
    (
        r,
        Measured {
            cpu,
            device_cpu,
            kernel,
            wall,
        },
        used,
    )
}

fn by_dma(p: &'static Profile, conns: u32) {
    let img = full_image(p);
    let mut dev = ModelHandle::new(p);
    discover(&mut dev).expect("discover");
    let mut rings = HostRings::attach(&mut dev, RingSizes::default(), false).expect("rings");
    let (loader, m, used) = measure(&mut dev, |d| {
        Loader::attach_dma(d, &mut rings, p, LoaderOptions::default()).expect("attach")
    });
    report(
        &format!("{}: attach, empty device (tables)", p.name),
        &m,
        &used,
    );
    let mut loader = loader;
    let (r, m, used) = measure(&mut dev, |d| {
        loader
            .load_dma(d, &mut rings, &img, &NicSettings::default())
            .expect("load")
    });
    report(
        &format!(
            "{}: full load by DMA ({} entries)",
            p.name, r.changed_entries
        ),
        &m,
        &used,
    );
    println!(
        "{:<46} register reads per loaded entry {:.6}",
        "",
        used.mmio_reads as f64 / r.changed_entries.max(1) as f64
    );
    // Connections, installed by the back door (as if learned), then the recovery read.
    {
        let mut m = dev.lock();
        let ct = m.conntrack_mut();
        let len = ct.len().min(conns);
        for i in 0..len {
            let e = CtEntry {
                valid: true,
                protocol: 6,
                src_port: (i & 0xffff) as u16,
                dst_port: 80,
                src_addr: 0xffff_c633_0000 + u128::from(i),
                dst_addr: 0xffff_cb00_7101,
                backend: (i % p.backends) as u16,
                rule: 0,
                flags: 0,
                timestamp: 1,
            };
            let _ = ct.write(i, e);
        }
    }
    let info = discover(&mut dev).expect("discover");
    let (_, m, used) = measure(&mut dev, |d| {
        let l = Loader::attach_dma(d, &mut rings, p, LoaderOptions::default()).expect("attach");
        let c = Conntrack::attach_dma(d, &mut rings, &info, 1).expect("conntrack");
        (l.generation(), c.valid_count())
    });
    report(
        &format!("{}: attach (both banks + {} connections)", p.name, conns),
        &m,
        &used,
    );
}

fn by_window(p: &'static Profile) {
    let img = full_image(p);
    let mut dev = ModelHandle::new(p);
    discover(&mut dev).expect("discover");
    let (loader, m, used) = measure(&mut dev, |d| {
        Loader::attach(d, p, LoaderOptions::default()).expect("attach")
    });
    report(
        &format!("{}: attach through the register window", p.name),
        &m,
        &used,
    );
    let mut loader = loader;
    let (r, m, used) = measure(&mut dev, |d| {
        loader.load(d, &img, &NicSettings::default()).expect("load")
    });
    report(
        &format!(
            "{}: full load through the window ({} entries)",
            p.name, r.changed_entries
        ),
        &m,
        &used,
    );
    println!(
        "{:<46} register reads per loaded entry {:.2}",
        "",
        used.mmio_reads as f64 / r.changed_entries.max(1) as f64
    );
}

fn main() {
    let quick = std::env::var("NLB_BENCH_QUICK").is_ok();
    let sim = Profile::by_name("sim").expect("sim profile");
    by_window(sim);
    by_dma(sim, sim.ct_buckets * sim.ct_ways);
    if !quick {
        let u280 = Profile::by_name("u280").expect("u280 profile");
        by_dma(u280, u280.ct_buckets * u280.ct_ways);
    }
    let _ = Device::describe(&ModelHandle::new(sim));
}
