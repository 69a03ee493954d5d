//! `nlbctl inspect`: decode a table image.

use crate::common::{self, CliError};
use flowtable_compiler::{format_mac, Image};
use nlb_hw::hash::u128_to_addr;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Decode a table image: header, NIC settings, VIP entries, rules, ACLs, pools with their
/// Maglev shares, and backends, with the config's names.
///
/// The image is checked completely first (magic, versions, CRCs, every entry).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Table image written by `nlbctl compile`.
    image: PathBuf,
    #[command(flatten)]
    output: common::Output,
    /// Show every entry (by default long lists stop after 40 lines).
    #[arg(long)]
    all: bool,
}

#[derive(Serialize)]
struct Header {
    format_version: u16,
    regmap_version: u32,
    profile: &'static str,
    generation: u64,
    config_digest: String,
    bytes: usize,
}

#[derive(Serialize)]
struct Nic {
    default_action: &'static str,
    mac: String,
    gue_port: u16,
    outer_source_ipv4: String,
    outer_source_ipv6: String,
}

#[derive(Serialize)]
struct Vip {
    index: u32,
    bucket: u32,
    address: String,
    protocol: u8,
    slots: Vec<Slot>,
}

#[derive(Serialize)]
struct Slot {
    ports: String,
    rule: String,
}

#[derive(Serialize)]
struct Rule {
    id: usize,
    name: String,
    pool: String,
    source_ranges: Vec<String>,
}

#[derive(Serialize)]
struct Pool {
    id: usize,
    name: String,
    kind: flowtable_compiler::PoolKind,
    affinity: &'static str,
    delivery: &'static str,
    own_slice: [u32; 2],
    /// A backend service's failover backends' slice (base, size); absent for other pools.
    #[serde(skip_serializing_if = "Option::is_none")]
    failover_slice: Option<[u32; 2]>,
    serving_slice: [u32; 2],
    failed_over: bool,
    backup: Option<String>,
    failover_ratio: Option<f64>,
    track: bool,
    idle_timeout: u16,
    members: Vec<String>,
    slots_per_backend: BTreeMap<String, u32>,
}

#[derive(Serialize)]
struct Backend {
    id: usize,
    name: String,
    address: String,
    mac: String,
}

#[derive(Serialize)]
struct Report {
    header: Header,
    nic: Nic,
    vip: Vec<Vip>,
    rules: Vec<Rule>,
    pools: Vec<Pool>,
    backends: Vec<Backend>,
}

fn prefix(addr: u128, len: u8) -> String {
    if nlb_hw::hash::is_ipv4_mapped(addr) && len >= 96 {
        format!("{}/{}", u128_to_addr(addr), len - 96)
    } else {
        format!("{}/{}", std::net::Ipv6Addr::from(addr), len)
    }
}

fn report(img: &Image, bytes: usize) -> Report {
    let t = &img.tables;
    let s = &img.symbols;
    let name = |o: Option<&str>, id: u16| o.map_or_else(|| format!("#{id}"), str::to_string);
    let ways = t.profile.vip_ways;
    let vip = t
        .vip
        .iter()
        .enumerate()
        .filter(|(_, e)| e.valid)
        .map(|(i, e)| Vip {
            index: i as u32,
            bucket: i as u32 / ways,
            address: u128_to_addr(e.addr).to_string(),
            protocol: e.protocol,
            slots: e
                .slot
                .iter()
                .filter(|x| x.valid)
                .map(|x| Slot {
                    ports: if (x.port_lo, x.port_hi) == (0, 65535) {
                        "all".into()
                    } else if x.port_lo == x.port_hi {
                        x.port_lo.to_string()
                    } else {
                        format!("{}-{}", x.port_lo, x.port_hi)
                    },
                    rule: name(s.rule(x.rule), x.rule),
                })
                .collect(),
        })
        .collect();
    let rules = t
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.valid)
        .map(|(i, r)| Rule {
            id: i,
            name: name(s.rule(i as u16), i as u16),
            pool: name(s.pool(r.pool), r.pool),
            source_ranges: if r.acl_enabled {
                t.acl[i]
                    .prefix
                    .iter()
                    .filter(|p| p.valid)
                    .map(|p| prefix(p.addr, p.prefix_len))
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    let pools = t
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| p.valid)
        .map(|(i, p)| {
            let sym = s.pools.get(i);
            let mut shares: BTreeMap<String, u32> = BTreeMap::new();
            let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
            for x in t.maglev.get(b..b + m).unwrap_or(&[]) {
                *shares
                    .entry(name(s.backend(x.backend), x.backend))
                    .or_default() += 1;
            }
            Pool {
                id: i,
                name: name(s.pool(i as u16), i as u16),
                kind: sym.map_or(flowtable_compiler::PoolKind::TargetPool, |x| x.kind),
                affinity: p.affinity.name(),
                delivery: p.delivery.name(),
                own_slice: sym.map_or([0, 0], |x| [x.own_base, x.own_size]),
                failover_slice: sym
                    .filter(|x| x.kind == flowtable_compiler::PoolKind::BackendService)
                    .map(|x| [x.failover_base, x.failover_size]),
                serving_slice: [p.maglev_base, p.maglev_size],
                failed_over: p.failed_over,
                backup: p
                    .has_backup
                    .then(|| name(s.pool(p.backup_pool), p.backup_pool)),
                failover_ratio: p.has_backup.then(|| f64::from(p.failover_ratio) / 1000.0),
                track: p.track,
                idle_timeout: p.idle_timeout,
                members: sym.map_or_else(Vec::new, |x| {
                    x.members.iter().map(|&m| name(s.backend(m), m)).collect()
                }),
                slots_per_backend: shares,
            }
        })
        .collect();
    let backends = t
        .backends
        .iter()
        .enumerate()
        .filter(|(_, b)| b.valid)
        .map(|(i, b)| Backend {
            id: i,
            name: name(s.backend(i as u16), i as u16),
            address: u128_to_addr(b.addr).to_string(),
            mac: format_mac(b.mac),
        })
        .collect();
    let n = &img.nic;
    Report {
        header: Header {
            format_version: img.header.format_version,
            regmap_version: img.header.regmap_version,
            profile: img.header.profile.name,
            generation: img.header.generation,
            config_digest: img
                .header
                .config_digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            bytes,
        },
        nic: Nic {
            default_action: n.default_action.name(),
            mac: format_mac(n.local_mac),
            gue_port: n.gue_port,
            outer_source_ipv4: format!(
                "{}/{}",
                std::net::Ipv4Addr::from(n.outer_src_v4),
                n.outer_src_v4_len
            ),
            outer_source_ipv6: format!(
                "{}/{}",
                std::net::Ipv6Addr::from(n.outer_src_v6),
                n.outer_src_v6_len
            ),
        },
        vip,
        rules,
        pools,
        backends,
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let bytes = std::fs::read(&args.image)
        .map_err(|e| CliError::user(format!("error: cannot read {}: {e}", args.image.display())))?;
    let img = Image::read(&bytes)
        .map_err(|e| CliError::user(format!("error: {}: {e}", args.image.display())))?;
    let r = report(&img, bytes.len());
    if args.output.json() {
        return common::print_json(&r);
    }
    let limit = if args.all { usize::MAX } else { 40 };
    let more = |n: usize| {
        if n > limit {
            outln!("  ... {} more (--all shows them)", n - limit);
        }
    };
    let h = &r.header;
    outln!(
        "image {}: format {}, regmap {}, profile {}, generation {}, {}",
        args.image.display(),
        h.format_version,
        h.regmap_version,
        h.profile,
        h.generation,
        common::human_bytes(h.bytes)
    );
    outln!("config digest {}", h.config_digest);
    let n = &r.nic;
    outln!(
        "nic: mac {}, unmatched packets {}, GUE port {}, outer sources {} {}",
        n.mac,
        n.default_action,
        n.gue_port,
        n.outer_source_ipv4,
        n.outer_source_ipv6
    );
    outln!("\nVIP table ({} entries):", r.vip.len());
    for v in r.vip.iter().take(limit) {
        let proto = match v.protocol {
            // Every other protocol: an L3_DEFAULT rule's entry (docs/pipeline.md §3).
            0 => "L3_DEFAULT".to_string(),
            6 => "TCP".to_string(),
            17 => "UDP".to_string(),
            p => p.to_string(),
        };
        let slots: Vec<String> = v
            .slots
            .iter()
            .map(|s| format!("{} -> {}", s.ports, s.rule))
            .collect();
        outln!(
            "  [{}] bucket {:<5} {} {proto}: {}",
            v.index,
            v.bucket,
            v.address,
            slots.join(", ")
        );
    }
    more(r.vip.len());
    outln!("\nrules ({}):", r.rules.len());
    for x in r.rules.iter().take(limit) {
        let acl = if x.source_ranges.is_empty() {
            String::new()
        } else {
            format!("  from {}", x.source_ranges.join(", "))
        };
        outln!("  {:>4} {:<24} -> {}{acl}", x.id, x.name, x.pool);
    }
    more(r.rules.len());
    outln!("\npools ({}):", r.pools.len());
    for p in r.pools.iter().take(limit) {
        let backup = match (&p.backup, p.failover_ratio, p.failover_slice) {
            (Some(b), Some(ratio), _) => format!(
                ", backup {b} at {ratio}{}",
                if p.failed_over { " (FAILED OVER)" } else { "" }
            ),
            (_, _, Some([base, size])) if size > 0 => format!(
                ", failover backends' slots {base}+{size}{}",
                if p.failed_over { " (FAILED OVER)" } else { "" }
            ),
            _ => String::new(),
        };
        outln!(
            "  {:>4} {:<24} {} {}, slots {}+{}{backup}, track {}, idle {} s",
            p.id,
            p.name,
            p.affinity,
            p.delivery,
            p.serving_slice[0],
            p.serving_slice[1],
            p.track,
            p.idle_timeout
        );
        let shares: Vec<String> = p
            .slots_per_backend
            .iter()
            .take(8)
            .map(|(b, c)| format!("{b} {c}"))
            .collect();
        let rest = p.slots_per_backend.len().saturating_sub(8);
        outln!(
            "       members {}; slots: {}{}",
            p.members.len(),
            shares.join(", "),
            if rest > 0 {
                format!(", ... {rest} more")
            } else {
                String::new()
            }
        );
    }
    more(r.pools.len());
    outln!("\nbackends ({}):", r.backends.len());
    for b in r.backends.iter().take(limit) {
        outln!("  {:>5} {:<24} {} {}", b.id, b.name, b.address, b.mac);
    }
    more(r.backends.len());
    Ok(())
}
