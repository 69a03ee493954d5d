//! Kubernetes scale benchmark: a generated cluster of 5,000 nodes and 2,000
//! LoadBalancer Services (`benches/support/kube_cluster.rs`) compiled for the `u280` profile,
//! as `nlbctl compile DIR` does it; prints the time of each phase, the process's CPU time and
//! its peak resident memory. Target: ≤ 2 s.
//!
//! Run: `cargo bench -p flowtable-compiler --bench kube_scale` (one pass, about ten seconds
//! with the build). `KUBE_SCALE=NODES,SERVICES,PODS` changes the size; `KUBE_SCALE_KEEP=DIR`
//! leaves the manifests in DIR (to time `nlbctl compile DIR` itself).

#[path = "support/kube_cluster.rs"]
mod kube_cluster;

use flowtable_compiler::{compile_checked, CompileOptions, Diagnostics, HealthState, Symbols};
use nlb_config::{parse_sources_timed, read_sources};
use nlb_hw::Profile;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// User + system CPU time of this process so far (Linux `/proc/self/stat`, clock ticks of
/// 1/100 s, the kernel's USER_HZ).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime is field 14, stime 15: indexes 11 and 12 after the state.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A line of `/proc/self/status` (VmHWM: peak resident set; VmRSS: now).
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// SHA-256 of every Service's per-node verdicts (what `nlbctl explain --service` words), one
/// line per (Service, node): the check that computing them differently changes nothing.
fn verdicts_digest(config: &flowtable_compiler::Config) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for k in &config.kubernetes {
        for v in &k.nodes() {
            h.update(format!(
                "{}\t{}\t{}\t{}\t{}\t{:?}\n",
                k.service, v.node, v.zone, v.member, v.why, v.endpoints
            ));
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn ms(d: Duration) -> String {
    format!("{:8.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter (`cargo bench -p flowtable-compiler -- maglev`,
    // meant for the other bench) that does not name this one skips it.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with("--") && !"kube_scale".contains(a.as_str()))
    {
        return;
    }
    let size: Vec<usize> = std::env::var("KUBE_SCALE")
        .unwrap_or_else(|_| "5000,2000,10".into())
        .split(',')
        .map(|v| v.trim().parse().expect("KUBE_SCALE=NODES,SERVICES,PODS"))
        .collect();
    let (nodes, services, pods) = (size[0], size[1], size[2]);
    let dir = match std::env::var_os("KUBE_SCALE_KEEP") {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("nlb-kube-scale-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).expect("manifest directory");
    let manifests = kube_cluster::manifests(nodes, services, pods);
    std::fs::write(dir.join("cluster.yaml"), &manifests).expect("write manifests");
    std::fs::write(dir.join("project.yaml"), kube_cluster::project()).expect("write project");
    println!(
        "cluster: {nodes} nodes, {services} Services, {pods} endpoints each: {:.1} MB of YAML in {}",
        manifests.len() as f64 / 1e6,
        dir.display()
    );
    drop(manifests);
    let rss_before = status_kib("VmRSS:");
    let cpu_before = cpu_time();
    let wall = Instant::now();

    let t = Instant::now();
    let sources = read_sources(&dir).expect("read the manifests");
    let read_files = t.elapsed();
    let (config, diags, times) = parse_sources_timed(&sources);
    assert!(diags.is_empty(), "generated cluster is invalid:\n{diags}");
    drop(sources);
    let profile = Profile::by_name("u280").expect("u280 profile");
    let t = Instant::now();
    // As `nlbctl compile` does: the relations were checked with the parse.
    let compiled = compile_checked(
        &config,
        &HealthState::default(),
        &CompileOptions { profile },
        Diagnostics::new(),
        &Symbols::default(),
    )
    .expect("compiles");
    let compile_time = t.elapsed();
    let t = Instant::now();
    let bytes = compiled.image(1).write().expect("image");
    let image_time = t.elapsed();
    let wall = wall.elapsed();
    let cpu = cpu_time() - cpu_before;
    let digest = compiled.tables_digest().expect("digest");

    println!("read files                  {}", ms(read_files));
    println!("parse YAML                  {}", ms(times.read));
    println!("map Kubernetes objects      {}", ms(times.map));
    println!("check relations             {}", ms(times.check));
    println!("compile                     {}", ms(compile_time));
    println!(
        "image ({:5.1} MB)           {}",
        bytes.len() as f64 / 1e6,
        ms(image_time)
    );
    println!("total: wall {}, CPU {}   target <= 2 s", ms(wall), ms(cpu));
    println!(
        "memory: peak RSS {} MB (before reading {} MB)",
        status_kib("VmHWM:") / 1024,
        rss_before / 1024
    );
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("tables digest {hex}");
    println!("verdicts digest {}", verdicts_digest(&config));
    if std::env::var_os("KUBE_SCALE_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
