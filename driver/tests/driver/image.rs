//! Compiled images (the examples, through `flowtable-compiler` and the image file format)
//! loaded by the driver behave exactly like the same tables put into a device by the back door:
//! every packet of a set derived from the image's own VIP table gets the same verdict and the
//! same output frame.

use etherparse::PacketBuilder;
use firmware_sim::ModelDevice;
use flowtable_compiler::{compile_file, CompileOptions, HealthState, Image};
use nlb_driver::discover;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_hw::hash::u128_to_addr;
use nlb_hw::Tables;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// Compiles an example and passes it through the image file format, as `nlbctl load` would.
fn compiled(name: &str, health: &HealthState) -> Image {
    let (_, c) = compile_file(&example(name), health, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let bytes = c.image(1).write().expect("image encodes");
    Image::read(&bytes).expect("image decodes")
}

/// Frames to every VIP/protocol/port-range slot of the tables: the range ends, one port
/// outside, from a few clients, TCP SYN and ACK, or UDP.
fn frames_for(t: &Tables) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for v in t.vip.iter().filter(|v| v.valid) {
        let vip = u128_to_addr(v.addr);
        let mut ports = Vec::new();
        for s in v.slot.iter().filter(|s| s.valid) {
            ports.extend([s.port_lo, s.port_hi, s.port_hi.wrapping_add(1)]);
        }
        // Clients: a few arbitrary ones, and one inside each source range of the ACLs.
        let mut clients: Vec<IpAddr> = (1..=4u8)
            .map(|i| match vip {
                IpAddr::V4(_) => IpAddr::V4([198, 51, 100, i].into()),
                IpAddr::V6(_) => IpAddr::V6(format!("2001:db8:c::{i}").parse().unwrap()),
            })
            .collect();
        for acl in &t.acl {
            for p in acl.prefix.iter().filter(|p| p.valid) {
                clients.push(u128_to_addr(p.addr | 7));
            }
        }
        for (c, port) in ports.iter().enumerate() {
            for (client, src) in clients.iter().copied().enumerate() {
                let client = client as u8;
                let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1]);
                let ip = match (src, vip) {
                    (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
                    (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 64),
                    _ => continue,
                };
                let sport = 40000 + c as u16 * 64 + u16::from(client);
                let mut f = Vec::new();
                let payload = [0u8; 16];
                match v.protocol {
                    6 => {
                        let b = ip.tcp(sport, *port, 1, 1000);
                        let b = if client.is_multiple_of(2) {
                            b.syn()
                        } else {
                            b.ack(1)
                        };
                        b.write(&mut f, &payload).unwrap();
                    }
                    17 => ip.udp(sport, *port).write(&mut f, &payload).unwrap(),
                    _ => continue,
                }
                out.push(f);
            }
        }
    }
    out
}

#[test]
fn driver_loaded_examples_behave_like_the_image() {
    let examples = [
        "web.yaml",
        "failover.yaml",
        "ipv6.yaml",
        "udp-dns.yaml",
        "target-instance.yaml",
        "web.json",
        // Kubernetes manifests (a directory): IPIP to the nodes, IPv4 and IPv6.
        "kubernetes",
    ];
    for name in examples {
        let image = compiled(name, &HealthState::new());
        let mut sim = ModelHandle::new(image.tables.profile);
        let info = discover(&mut sim).unwrap();
        let mut loader = Loader::attach(&mut sim, info.profile, LoaderOptions::default()).unwrap();
        let report = loader.load_image(&mut sim, &image).unwrap();
        assert_eq!(
            report.changed_entries,
            Tables::empty(image.tables.profile)
                .diff(&image.tables)
                .len(),
            "{name}"
        );
        assert_eq!(sim.lock().bank(report.bank), &image.tables, "{name}");
        assert_eq!(sim.lock().settings(), &image.nic, "{name}");

        let mut reference = ModelDevice::from_tables(image.tables.clone(), image.nic);
        let frames = frames_for(&image.tables);
        assert!(frames.len() >= 8, "{name}: {} frames", frames.len());
        let (mut out_a, mut out_b) = (vec![0u8; 16384], vec![0u8; 16384]);
        let mut forwarded = 0;
        for (i, f) in frames.iter().enumerate() {
            let got = sim.lock().receive(f, &mut out_a).unwrap();
            let want = reference.receive(f, &mut out_b).unwrap();
            assert_eq!(got.bank, 1);
            let strip = |mut r: firmware_sim::PacketResult| {
                r.bank = 0;
                r
            };
            assert_eq!(strip(got), strip(want), "{name}: frame {i}");
            assert_eq!(
                out_a[..got.out_len],
                out_b[..want.out_len],
                "{name}: frame {i}"
            );
            forwarded += usize::from(got.verdict == nlb_hw::enums::Verdict::Forward);
        }
        assert!(forwarded > 0, "{name}: something was forwarded");
    }
}

#[test]
fn a_health_change_is_a_small_delta_load() {
    let healthy = compiled("web.yaml", &HealthState::new());
    let mut down = HealthState::new();
    down.set_healthy("web-1", false);
    let degraded = compiled("web.yaml", &down);
    let changed = healthy.tables.diff(&degraded.tables).len();
    assert!(changed > 0);

    let mut sim = ModelHandle::new(healthy.tables.profile);
    let info = discover(&mut sim).unwrap();
    let mut loader = Loader::attach(&mut sim, info.profile, LoaderOptions::default()).unwrap();
    loader.load_image(&mut sim, &healthy).unwrap();
    loader.load_image(&mut sim, &healthy).unwrap(); // both banks hold it
    let r = loader.load_image(&mut sim, &degraded).unwrap();
    assert_eq!(r.changed_entries, changed);
    assert_eq!(sim.lock().bank(r.bank), &degraded.tables);
    // Per changed entry at most: index, one data word per word of the entry, WRITE and
    // READ; one select per table; flip and generation.
    let bound: u64 = healthy
        .tables
        .diff(&degraded.tables)
        .iter()
        .map(|(t, _)| 3 + Tables::entry_words(*t) as u64)
        .sum::<u64>()
        + 6
        + 2;
    assert!(r.total_writes() <= bound, "{r:?}");
}

#[test]
fn an_image_of_another_regmap_version_is_refused() {
    let mut image = compiled("web.yaml", &HealthState::new());
    image.header.regmap_version += 1;
    let mut sim = ModelHandle::new(image.tables.profile);
    let info = discover(&mut sim).unwrap();
    let mut loader = Loader::attach(&mut sim, info.profile, LoaderOptions::default()).unwrap();
    let e = loader.load_image(&mut sim, &image).unwrap_err().to_string();
    let v = nlb_hw::REGMAP_VERSION;
    let expected = format!("regmap version {}, this driver speaks version {v}", v + 1);
    assert!(e.contains(&expected), "{e}");
}
