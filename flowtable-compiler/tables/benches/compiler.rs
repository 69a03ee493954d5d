//! Compiler benchmarks; prints figures (run: `cargo bench -p flowtable-compiler`).
//!
//! 1. Maglev population, M = 65537, N = 10 / 100 / 1000 (target ≤ 1 ms for N = 1000).
//! 2. Full compile of a generated config: 1024 VIPs × 2 rules, 1024 pools, 65,536 backends,
//!    `u280` profile (target ≤ 2 s).
//! 3. Recompute after one backend's health change, for its pool (target ≤ 2 ms).
//! 4. Production scale (`scale` section): one pool of 65,536 backends (M = 6,553,621, M ≥ 100 × N)
//!    plus the 1024-pool config, at the `u280` and `u55c` profiles: Maglev population, compile,
//!    image write and read, image size.

use flowtable_compiler::maglev::{populate, Member};
use flowtable_compiler::{compile, compile_file, CompileOptions, HealthState, Image};
use nlb_config::parse_config;
use nlb_hw::Profile;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Runs `f` `runs` times; returns (min, median).
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    v.sort();
    (v[0], v[v.len() / 2])
}

fn ms(d: Duration) -> String {
    format!("{:9.3} ms", d.as_secs_f64() * 1e3)
}

fn report(what: &str, (min, median): (Duration, Duration), target: &str) {
    println!(
        "{what:<58} min {} median {}   {target}",
        ms(min),
        ms(median)
    );
}

/// 1024 VIPs (IPv6, documentation prefix) × TCP 80 + 443, one pool per VIP of `per_pool`
/// instances.
fn generated_config(vips: usize, per_pool: usize) -> String {
    let mut s = String::with_capacity(vips * per_pool * 80);
    s.push_str("forwardingRules:\n");
    for v in 0..vips {
        for port in [80, 443] {
            let _ = writeln!(
                s,
                "  - {{name: r{v}-{port}, IPAddress: \"2001:db8:1::{v:x}\", portRange: \"{port}\", target: p{v}}}"
            );
        }
    }
    s.push_str("targetPools:\n");
    for v in 0..vips {
        let _ = write!(s, "  - {{name: p{v}, instances: [");
        for i in 0..per_pool {
            let _ = write!(s, "{}b{}", if i == 0 { "" } else { ", " }, v * per_pool + i);
        }
        s.push_str("]}\n");
    }
    s.push_str("instances:\n");
    for b in 0..vips * per_pool {
        let _ = writeln!(
            s,
            "  - {{name: b{b}, ip: \"2001:db8:2::{b:x}\", mac: \"02:00:00:{:02x}:{:02x}:{:02x}\"}}",
            (b >> 16) & 0xff,
            (b >> 8) & 0xff,
            b & 0xff
        );
    }
    s
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this once quickly.
    let quick = !std::env::args().any(|a| a == "--bench");
    // `cargo bench -p flowtable-compiler -- maglev` runs only the sections named.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted =
        |section: &str| filters.is_empty() || filters.iter().any(|f| section.contains(f.as_str()));
    let runs = if quick { 1 } else { 20 };
    // A population takes about a millisecond: many runs keep the median steady on a shared
    // machine.
    let maglev_runs = if quick { 1 } else { 101 };
    let big_runs = if quick { 1 } else { 5 };
    println!(
        "flowtable-compiler benchmarks (min and median of {maglev_runs} runs per Maglev \
         population, {big_runs} per compile, {runs} per health change)"
    );

    for n in [10usize, 100, 1000] {
        if !wanted("maglev") {
            break;
        }
        let names: Vec<String> = (0..n).map(|i| format!("backend-{i}")).collect();
        let members: Vec<Member> = names
            .iter()
            .enumerate()
            .map(|(i, s)| Member {
                name: s,
                id: i as u16,
                weight: 1,
            })
            .collect();
        report(
            &format!("Maglev population M=65537 N={n} (equal weights)"),
            time(maglev_runs, || populate(&members, 65537)),
            if n == 1000 { "(target <= 1 ms)" } else { "" },
        );
        let weighted: Vec<Member> = members
            .iter()
            .enumerate()
            .map(|(i, m)| Member {
                weight: 1 + (i as u32 * 37) % 1000,
                ..*m
            })
            .collect();
        report(
            &format!("Maglev population M=65537 N={n} (weights 1..1000)"),
            time(maglev_runs, || populate(&weighted, 65537)),
            "",
        );
    }

    if wanted("scale") {
        scale(quick);
    }
    if !wanted("compile health") {
        return;
    }
    let u280 = Profile::by_name("u280").expect("u280 profile");
    let opts = CompileOptions { profile: u280 };
    let (vips, per_pool) = if quick { (64, 64) } else { (1024, 64) };
    let text = generated_config(vips, per_pool);
    println!(
        "generated config: {vips} VIPs x 2 rules, {vips} pools, {} backends, {:.1} MiB of YAML",
        vips * per_pool,
        text.len() as f64 / 1048576.0
    );
    report(
        "  parse + validate",
        time(big_runs, || parse_config("gen.yaml", &text)),
        "",
    );
    let (config, d) = parse_config("gen.yaml", &text);
    assert!(d.is_empty(), "{d}");
    let health = HealthState::new();
    if std::env::var("NLB_BENCH_PHASES").is_ok() {
        report(
            "  phase: check",
            time(big_runs, || nlb_config::check(&config)),
            "",
        );
        report("  phase: digest", time(big_runs, || config.digest()), "");
        report(
            "  phase: capacity/layout",
            time(big_runs, || {
                flowtable_compiler::check_capacity(&config, u280)
            }),
            "",
        );
        report(
            "  phase: tables empty",
            time(big_runs, || nlb_hw::Tables::empty(u280)),
            "",
        );
        report(
            "  phase: yaml tree only",
            time(big_runs, || parse_config("gen.yaml", "a: [")),
            "",
        );
    }
    report(
        "  compile (u280)",
        time(big_runs, || {
            compile(&config, &health, &opts).expect("compiles")
        }),
        "",
    );
    let path = std::env::temp_dir().join(format!("nlb-bench-{}.yaml", std::process::id()));
    std::fs::write(&path, &text).expect("temp file");
    report(
        "full compile: read + parse + validate + compile + image (u280)",
        time(big_runs, || {
            let (_, c) = compile_file(&path, &health, &opts).expect("compiles");
            c.image(1).write().expect("writes")
        }),
        "(target <= 2 s)",
    );
    let _ = std::fs::remove_file(&path);
    let compiled = compile(&config, &health, &opts).expect("compiles");
    let bytes = compiled.image(1).write().expect("writes");
    println!("  image size {:.1} MiB", bytes.len() as f64 / 1048576.0);
    report(
        "  image read (u280, full-depth tables)",
        time(big_runs, || Image::read(&bytes).expect("reads")),
        "",
    );

    // One backend's health change: recompute its pool.
    let mut c = compiled;
    let mut h = HealthState::new();
    let mut flip = false;
    report(
        &format!("health change, recompile its pool ({per_pool} backends, M=8191)"),
        time(runs, || {
            flip = !flip;
            h.set_healthy("b5", !flip);
            c.recompile_pool("p0", &h).expect("recompiles")
        }),
        "(target <= 2 ms)",
    );
    let big = generated_config(1, 1000);
    let (config, d) = parse_config("one.yaml", &big);
    assert!(d.is_empty(), "{d}");
    let mut c = compile(&config, &HealthState::new(), &opts).expect("compiles");
    let mut h = HealthState::new();
    report(
        "health change, recompile its pool (1000 backends, M=65537)",
        time(runs, || {
            flip = !flip;
            h.set_healthy("b500", !flip);
            c.recompile_pool("p0", &h).expect("recompiles")
        }),
        "(target <= 2 ms)",
    );
}

/// Production scale: a pool of 65,536 backends (the most backend ids) with M >= 100 x N, beside
/// 1024 small pools, compiled for the HBM profiles.
fn scale(quick: bool) {
    let n = if quick { 4096 } else { 65536 };
    let runs = if quick { 1 } else { 3 };
    let m = flowtable_compiler::maglev::size_for(n);
    let names: Vec<String> = (0..n).map(|i| format!("backend-{i}")).collect();
    let members: Vec<Member> = names
        .iter()
        .enumerate()
        .map(|(i, s)| Member {
            name: s,
            id: i as u16,
            weight: 1,
        })
        .collect();
    report(
        &format!("Maglev population M={m} N={n} (equal weights)"),
        time(runs, || populate(&members, m)),
        "",
    );
    // One VIP to a pool of n backends, and 1024 VIPs of 63 backends each. An instance has one
    // backend id whatever pools it is in, and the backend table holds 65,536: the big pool is
    // every small pool's instances (b*) and as many more of its own (x*).
    let (vips, per_pool) = if quick { (16, 4) } else { (1024, 63) };
    let shared = vips * per_pool;
    let own = n - shared;
    let mut text = generated_config(vips, per_pool);
    let mut big = String::from("  - {name: pbig, instances: [");
    for i in 0..n {
        let sep = if i == 0 { "" } else { ", " };
        if i < shared {
            let _ = write!(big, "{sep}b{i}");
        } else {
            let _ = write!(big, "{sep}x{}", i - shared);
        }
    }
    big.push_str("]}\n");
    let pools_at = text.find("targetPools:\n").expect("pools") + "targetPools:\n".len();
    text.insert_str(pools_at, &big);
    let rules_at = text.find("forwardingRules:\n").expect("rules") + "forwardingRules:\n".len();
    text.insert_str(
        rules_at,
        "  - {name: rbig, IPAddress: \"2001:db8:9::1\", portRange: \"80\", target: pbig}\n",
    );
    let mut inst = String::new();
    for i in 0..own {
        let _ = writeln!(
            inst,
            "  - {{name: x{i}, ip: \"2001:db8:3::{i:x}\", mac: \"02:01:00:{:02x}:{:02x}:{:02x}\"}}",
            (i >> 16) & 0xff,
            (i >> 8) & 0xff,
            i & 0xff
        );
    }
    text.push_str(&inst);
    let (config, d) = parse_config("scale.yaml", &text);
    assert!(d.is_empty(), "{d}");
    for name in ["u280", "u55c"] {
        let profile = Profile::by_name(name).expect("profile");
        let opts = CompileOptions { profile };
        let health = HealthState::new();
        report(
            &format!("  compile ({name}: 1 pool of {n} + the small pools)"),
            time(runs, || compile(&config, &health, &opts).expect("compiles")),
            "",
        );
        let compiled = compile(&config, &health, &opts).expect("compiles");
        let slices: Vec<u32> = compiled
            .tables
            .pools
            .iter()
            .filter(|p| p.valid)
            .map(|p| p.maglev_size)
            .collect();
        report(
            &format!("  image write ({name})"),
            time(runs, || compiled.image(1).write().expect("writes")),
            "",
        );
        let bytes = compiled.image(1).write().expect("writes");
        report(
            &format!("  image read ({name})"),
            time(runs, || Image::read(&bytes).expect("reads")),
            "",
        );
        println!(
            "  {name}: image {:.1} MiB, largest slice M = {} ({} backends), {} slices; {} \
             connections, {} Maglev slots per bank",
            bytes.len() as f64 / 1048576.0,
            slices.iter().max().copied().unwrap_or(0),
            n,
            slices.len(),
            u64::from(profile.ct_buckets) * u64::from(profile.ct_ways),
            profile.maglev_slots
        );
    }
}
