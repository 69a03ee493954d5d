//! Driver benchmarks (figures, no assertions):
//!
//! - full image load through the in-process `ModelHandle` and through `SocketDevice` (a server thread on
//!   a Unix socket);
//! - register writes of a delta load after one backend's health change, against the number of
//!   changed entries (target ≤ 2×);
//! - conntrack installs per second, batched, through both backends (target ≥ 1 M/s);
//! - production scale (`scale`): an image with one pool of 65,536 backends (its Maglev slice
//!   M = 6,553,621 ≥ 100 × N) compiled for the `u280` and `u55c` profiles, loaded into a
//!   `ModelHandle` of that profile (attach reads both banks back first).
//!
//! Run: `cargo bench -p nlb-driver --bench driver` (NLB_BENCH_QUICK=1 for a short run).

use flowtable_compiler::{compile, CompileOptions, HealthState, Image};
use nlb_config::parse_config;
use nlb_driver::conntrack::{Conntrack, NewConnection};
use nlb_driver::device::Device;
use nlb_driver::discover;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_driver::socket::{Server, SocketDevice};
use nlb_hw::enums::Table;
use nlb_hw::{FlowKey, Profile};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

/// A configuration with `pools` pools of `per_pool` backends each, one rule per pool.
fn config(pools: usize, per_pool: usize) -> String {
    let mut y = String::from("forwardingRules:\n");
    for p in 0..pools {
        y += &format!(
            "  - {{name: r{p}, IPAddress: 203.0.113.{}, IPProtocol: TCP, portRange: \"80\", target: p{p}}}\n",
            p + 1
        );
    }
    y += "targetPools:\n";
    for p in 0..pools {
        let members: Vec<String> = (0..per_pool).map(|b| format!("b{p}-{b}")).collect();
        y += &format!(
            "  - {{name: p{p}, instances: [{}], healthChecks: [hc]}}\n",
            members.join(", ")
        );
    }
    y += "instances:\n";
    for p in 0..pools {
        for b in 0..per_pool {
            y += &format!(
                "  - {{name: b{p}-{b}, ip: 10.{}.{}.{}, mac: \"02:00:00:{:02x}:{:02x}:{:02x}\"}}\n",
                p / 250,
                p % 250,
                b + 1,
                p / 256,
                p % 256,
                b
            );
        }
    }
    y += "httpHealthChecks:\n  - {name: hc}\n";
    y
}

fn image(text: &str, health: &HealthState) -> Image {
    let (cfg, diags) = parse_config("bench.yaml", text);
    assert!(diags.is_empty(), "{diags:?}");
    compile(&cfg, health, &CompileOptions::default())
        .expect("compiles")
        .image(1)
}

fn serve(sim: &ModelHandle, name: &str) -> (std::path::PathBuf, nlb_driver::socket::ServerHandle) {
    let dir = std::env::temp_dir().join(format!("nlb-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("nlb.sock");
    let served = sim.clone();
    let server = Server::bind(
        &path,
        Arc::new(move || Box::new(served.clone()) as Box<dyn Device>),
    )
    .expect("bind");
    (path, server.spawn())
}

fn full_load<D: Device>(name: &str, dev: &mut D, img: &Image, rounds: u32) {
    let info = discover(dev).expect("discover");
    let t = Instant::now();
    let mut loader = Loader::attach(dev, info.profile, LoaderOptions::default()).expect("attach");
    let attach = t.elapsed();
    let empty = nlb_hw::Tables::empty(info.profile);
    let mut total = std::time::Duration::ZERO;
    let mut report = None;
    for _ in 0..rounds {
        // Empty both banks, then time loading the whole image into one.
        loader.load(dev, &empty, &img.nic).expect("clear");
        loader.load(dev, &empty, &img.nic).expect("clear");
        let t = Instant::now();
        report = Some(loader.load_image(dev, img).expect("load"));
        total += t.elapsed();
    }
    let r = report.expect("at least one round");
    println!(
        "full load, {name:<10}: {:>7.2} ms per load ({} entries, {} writes, {} reads); \
         attach (recovery read of both banks): {:.1} ms",
        total.as_secs_f64() * 1e3 / f64::from(rounds),
        r.changed_entries,
        r.total_writes(),
        r.reads,
        attach.as_secs_f64() * 1e3
    );
}

/// Counts every register access that reaches the device (the honest count: the loader's
/// own report is printed beside it, not trusted).
struct Counting<D> {
    dev: D,
    writes: u64,
    reads: u64,
}

impl<D: Device> Device for Counting<D> {
    fn read32(&mut self, offset: u32) -> Result<u32, nlb_driver::DeviceError> {
        self.reads += 1;
        self.dev.read32(offset)
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), nlb_driver::DeviceError> {
        self.writes += 1;
        self.dev.write32(offset, value)
    }
    fn run_batch(
        &mut self,
        ops: &[nlb_driver::device::RegOp],
        reads: &mut Vec<u32>,
    ) -> Result<(), nlb_driver::DeviceError> {
        for op in ops {
            match op {
                nlb_driver::device::RegOp::Read(_) => self.reads += 1,
                nlb_driver::device::RegOp::Write(..) => self.writes += 1,
            }
        }
        self.dev.run_batch(ops, reads)
    }
    fn wait(&mut self, d: std::time::Duration) -> Result<(), nlb_driver::DeviceError> {
        self.dev.wait(d)
    }
    fn describe(&self) -> String {
        self.dev.describe()
    }
}

fn delta_load(pools: usize, per_pool: usize) {
    let text = config(pools, per_pool);
    let healthy = image(&text, &HealthState::new());
    let mut down = HealthState::new();
    down.set_healthy("b0-0", false);
    let degraded = image(&text, &down);
    let mut sim = ModelHandle::new(healthy.tables.profile);
    let info = discover(&mut sim).expect("discover");
    let mut loader =
        Loader::attach(&mut sim, info.profile, LoaderOptions::default()).expect("attach");
    loader.load_image(&mut sim, &healthy).expect("load");
    loader.load_image(&mut sim, &healthy).expect("load");
    let mut counting = Counting {
        dev: sim.clone(),
        writes: 0,
        reads: 0,
    };
    let r = loader.load_image(&mut counting, &degraded).expect("delta");
    let maglev = r
        .changed_by_table
        .iter()
        .find(|(t, _)| *t == Table::Maglev)
        .map_or(0, |x| x.1);
    let n = r.changed_entries as f64;
    println!(
        "delta load, 1 of {per_pool} backends down ({pools} pools): {} entries changed ({maglev} \
         Maglev slots); register writes at the device {} = {:.2}× entries, all included \
         (loader's report: update {}, read-back {}, control {}); reads {} = {:.2}× entries",
        r.changed_entries,
        counting.writes,
        counting.writes as f64 / n,
        r.update_writes,
        r.verify_writes,
        r.control_writes,
        counting.reads,
        counting.reads as f64 / n,
    );
    assert_eq!(
        counting.writes,
        r.total_writes(),
        "the report counts every write"
    );
}

fn conns(n: u32, seed: u32) -> Vec<NewConnection> {
    (0..n)
        .map(|i| {
            let x = i.wrapping_mul(2_654_435_761) ^ seed;
            NewConnection {
                key: FlowKey::tuple5(
                    6,
                    IpAddr::V4(Ipv4Addr::from(0xc633_0000 | (x & 0xffff))),
                    (x >> 16) as u16 | 1024,
                    IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)),
                    443,
                ),
                backend: (i % 100) as u16,
                rule: 0,
            }
        })
        .collect()
}

/// CPU time of the whole process (every thread: the bench, and the socket server's for
/// `SocketDevice`): on a shared machine wall time mostly measures the other tenants.
fn process_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn conntrack_rate<D: Device>(name: &str, dev: D, batch: usize, rounds: u32) {
    let mut dev = Counting {
        dev,
        writes: 0,
        reads: 0,
    };
    let dev = &mut dev;
    let info = discover(dev).expect("discover");
    let mut ct = Conntrack::attach(dev, &info, 0).expect("attach");
    let capacity = info.firmware.capacities.ct_buckets * info.firmware.capacities.ct_ways;
    // Fill to about a quarter (few full buckets), evict, repeat.
    let per_round = capacity / 4;
    let mut out = Vec::new();
    let mut installed = 0u64;
    let mut elapsed = std::time::Duration::ZERO;
    let mut cpu = std::time::Duration::ZERO;
    let mut writes = 0;
    for round in 0..rounds {
        let all = conns(per_round, round.wrapping_mul(0x9e37_79b9));
        let writes0 = dev.writes;
        let (t, cpu0) = (Instant::now(), process_cpu());
        for chunk in all.chunks(batch) {
            ct.install_batch(dev, chunk, round, &mut out)
                .expect("install");
            installed += out
                .iter()
                .filter(|o| matches!(o, nlb_driver::conntrack::Installed::New(_)))
                .count() as u64;
        }
        elapsed += t.elapsed();
        cpu += process_cpu().saturating_sub(cpu0);
        writes += dev.writes - writes0;
        let keys: Vec<FlowKey> = all.iter().map(|c| c.key).collect();
        for chunk in keys.chunks(batch) {
            ct.evict_batch(dev, chunk).expect("evict");
        }
    }
    println!(
        "conntrack installs, {name:<10} (batches of {batch}): {:>6.2} M/s wall, {:>6.2} M per \
         CPU-second ({installed} installs, {:.1} register writes each at the device)",
        installed as f64 / elapsed.as_secs_f64() / 1e6,
        installed as f64 / cpu.as_secs_f64().max(1e-9) / 1e6,
        writes as f64 / installed as f64
    );
}

fn main() {
    // `cargo bench --bench driver -- conntrack` runs the sections whose name contains a word.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |section: &str| words.is_empty() || words.iter().any(|w| section.contains(w));
    let quick = std::env::var_os("NLB_BENCH_QUICK").is_some();
    let rounds = if quick { 1 } else { 5 };
    let profile = Profile::by_name("sim").expect("sim profile");
    // A large image: 64 pools × 60 backends (every Maglev slice large), on the sim profile.
    let big = image(&config(64, 60), &HealthState::new());
    // (compiled once; only the load sections use it)
    println!(
        "image: {} non-empty entries",
        nlb_hw::Tables::empty(profile).diff(&big.tables).len()
    );

    if want("load") {
        let mut sim = ModelHandle::new(profile);
        full_load("ModelHandle", &mut sim, &big, rounds);
        let sim = ModelHandle::new(profile);
        let (path, _server) = serve(&sim, "load");
        let mut sock = SocketDevice::connect(&path).expect("connect");
        full_load("SocketDevice", &mut sock, &big, rounds);
    }
    if want("scale") {
        scale_load(quick);
    }
    if want("delta") {
        delta_load(1, 3);
        delta_load(1, 100);
        delta_load(16, 50);
    }
    if !want("conntrack") {
        return;
    }

    let ct_rounds = if quick { 2 } else { 8 };
    for batch in [64, 1024] {
        conntrack_rate("ModelHandle", ModelHandle::new(profile), batch, ct_rounds);
        let sim = ModelHandle::new(profile);
        let (path, _server) = serve(&sim, "ct");
        let sock = SocketDevice::connect(&path).expect("connect");
        conntrack_rate("SocketDevice", sock, batch, ct_rounds);
    }
}

/// One VIP to one pool of `n` backends (addresses 10.0.0.0/8 by index).
fn one_pool_config(n: usize) -> String {
    let mut y = String::from(
        "forwardingRules:\n  - {name: big, IPAddress: 203.0.113.200, IPProtocol: TCP, portRange: \"80\", target: pbig}\ntargetPools:\n  - {name: pbig, healthChecks: [hc], instances: [",
    );
    for b in 0..n {
        let _ = write!(y, "{}x{b}", if b == 0 { "" } else { ", " });
    }
    y += "]}\ninstances:\n";
    for b in 0..n {
        let _ = writeln!(
            y,
            "  - {{name: x{b}, ip: 10.{}.{}.{}, mac: \"02:02:00:{:02x}:{:02x}:{:02x}\"}}",
            (b >> 16) & 0xff,
            (b >> 8) & 0xff,
            b & 0xff,
            (b >> 16) & 0xff,
            (b >> 8) & 0xff,
            b & 0xff
        );
    }
    y += "httpHealthChecks:\n  - {name: hc}\n";
    y
}

/// Compile, image and load at the production profiles.
fn scale_load(quick: bool) {
    let n = if quick { 4096 } else { 65536 };
    let text = one_pool_config(n);
    let (cfg, diags) = parse_config("scale.yaml", &text);
    assert!(diags.is_empty(), "{diags:?}");
    for name in ["u280", "u55c"] {
        let profile = Profile::by_name(name).expect("profile");
        let t = Instant::now();
        let compiled =
            compile(&cfg, &HealthState::new(), &CompileOptions { profile }).expect("compiles");
        let img = compiled.image(1);
        let bytes = img.write().expect("writes");
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let slice = img
            .tables
            .pools
            .iter()
            .map(|p| p.maglev_size)
            .max()
            .unwrap_or(0);
        println!(
            "scale, {name}: 1 pool of {n} backends, Maglev slice M = {slice}; compile + image {compile_ms:.0} ms, image {:.1} MiB",
            bytes.len() as f64 / 1048576.0
        );
        let mut sim = ModelHandle::new(profile);
        full_load(name, &mut sim, &img, 1);
    }
}
