//! `nlbctl devices`, `bind` and `unbind`, the real binary on sysfs trees built in a temporary
//! directory (`NLB_SYSFS_ROOT`), with a fake kernel reacting to the writes as the kernel's
//! sysfs ABI documents (Documentation/ABI/testing/sysfs-bus-pci): `driver_override` names
//! the one driver that may bind, a driver's `unbind` lets the device go, `drivers_probe` binds.

use nlb_testkit::sysfs::{FakeSysfs, PciDev};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

const PF0: &str = "0000:3b:00.0";
const PF1: &str = "0000:3b:00.1";

fn nlbctl(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .env("NLB_SYSFS_ROOT", root)
        .output()
        .expect("nlbctl runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An Alveo card with the OpenNIC shell (Gen3 x16): PF0 on the OpenNIC driver `onic` with its
/// interface down, PF1 on vfio-pci, each alone in an IOMMU group; an Intel NIC on i40e.
fn machine(dir: &Path) -> FakeSysfs {
    let fs = FakeSysfs::new(dir).unwrap();
    fs.load_driver("vfio-pci").unwrap();
    for (addr, vendor, device, group, driver, native) in [
        (PF0, 0x10ee, 0x903f, 40, "onic", "onic"),
        (PF1, 0x10ee, 0x913f, 41, "vfio-pci", "onic"),
        ("0000:01:00.0", 0x8086, 0x1572, 5, "i40e", "i40e"),
    ] {
        fs.add(&PciDev {
            addr,
            vendor,
            device,
            class: 0x028000,
            group: Some(group),
            driver: Some(driver),
            native: Some(native),
        })
        .unwrap();
    }
    fs.add_netdev(PF0, "ens1f0", "down", false).unwrap();
    fs
}

fn assert_nothing_written(fs: &FakeSysfs) {
    let probe = std::fs::read_to_string(fs.root().join("sys/bus/pci/drivers_probe")).unwrap();
    assert_eq!(probe, "", "drivers_probe written");
    assert_eq!(fs.driver_override(PF0), "(null)");
    assert_eq!(fs.driver(PF0).as_deref(), Some("onic"));
}

#[test]
fn devices_lists_the_cards_with_the_next_command() {
    let dir = tempfile::tempdir().unwrap();
    let _fs = machine(dir.path());
    let o = nlbctl(dir.path(), &["devices"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "ADDRESS       CARD                  IDS        IOMMU  DRIVER    VFIO  NEXT",
            "0000:3b:00.0  OpenNIC PF0 Gen3 x16  10ee:903f  40     onic      no    sudo nlbctl bind 0000:3b:00.0",
            "0000:3b:00.1  OpenNIC PF1 Gen3 x16  10ee:913f  41     vfio-pci  yes   nlbctl fw-info --device pci:0000:3b:00.1",
            "registers: BAR 2 + 0x200000 on each (the OpenNIC shell's 322 MHz box)",
        ],
        "{out}"
    );

    // docs/devices.md shows this machine.
    let doc = std::fs::read_to_string(crate::workspace().join("docs/devices.md")).unwrap();
    let start = doc
        .find("$ nlbctl devices\nADDRESS")
        .expect("the listing in docs/devices.md");
    let block = &doc[start + "$ nlbctl devices\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    assert_eq!(
        block, out,
        "docs/devices.md is stale: paste this output of `nlbctl devices`"
    );

    let o = nlbctl(dir.path(), &["devices", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["iommu"], true);
    assert_eq!(v["vfio_pci_loaded"], true);
    let c = &v["cards"][0];
    assert_eq!(c["address"], PF0);
    assert_eq!(
        (c["vendor"].as_str(), c["device"].as_str()),
        (Some("10ee"), Some("903f"))
    );
    assert_eq!(c["pf"], 0);
    assert_eq!(c["iommu_group"], 40);
    assert_eq!(c["driver"], "onic");
    assert_eq!(c["vfio_pci"], false);
    assert_eq!(c["registers"]["bar"], 2);
    assert_eq!(c["registers"]["offset"], 0x20_0000);
    assert_eq!(c["interfaces"][0]["name"], "ens1f0");
    assert_eq!(c["interfaces"][0]["up"], false);
    assert_eq!(c["next"], "sudo nlbctl bind 0000:3b:00.0");
    assert_eq!(v["cards"][1]["vfio_pci"], true);
    assert_eq!(v["cards"].as_array().unwrap().len(), 2);
}

#[test]
fn devices_says_what_blocks_each_card() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    fs.add_netdev(PF0, "ens1f0", "up", true).unwrap();
    let out = text(&nlbctl(dir.path(), &["devices"]).stdout);
    assert!(out.contains("sudo ip link set ens1f0 down"), "{out}");

    std::fs::remove_dir_all(dir.path().join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    let out = text(&nlbctl(dir.path(), &["devices"]).stdout);
    assert!(out.contains("sudo modprobe vfio-pci"), "{out}");
}

#[test]
fn devices_without_a_card_says_how_to_look() {
    let dir = tempfile::tempdir().unwrap();
    let _fs = FakeSysfs::new(dir.path()).unwrap();
    let o = nlbctl(dir.path(), &["devices"]);
    assert!(o.status.success());
    let out = text(&o.stdout);
    assert!(out.starts_with("no OpenNIC card found"), "{out}");
    assert!(out.contains("10ee:903f"), "{out}");
    assert!(out.contains("lspci -D -nn -d 10ee:"), "{out}");
    let o = nlbctl(dir.path(), &["devices", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cards"], serde_json::json!([]));
}

#[test]
fn bind_refuses_with_the_fix_and_writes_nothing() {
    type Setup = fn(&Path, &FakeSysfs);
    let cases: [(&str, &[&str], Setup, &str); 6] = [
        (
            "no device",
            &["0000:af:00.0"],
            |_, _| {},
            "lspci -D -nn -d 10ee:",
        ),
        (
            "not a card",
            &["0000:01:00.0"],
            |_, _| {},
            "(8086:1572) is not a card nlb-offload knows",
        ),
        (
            "no IOMMU",
            &[PF0],
            |root, _| {
                std::fs::remove_dir_all(root.join("sys/kernel/iommu_groups")).unwrap();
                std::fs::create_dir(root.join("sys/kernel/iommu_groups")).unwrap();
            },
            "intel_iommu=on iommu=pt",
        ),
        (
            "vfio-pci not loaded",
            &[PF0],
            |root, fs| {
                fs.set_driver(PF1, None).unwrap();
                std::fs::remove_dir_all(root.join("sys/bus/pci/drivers/vfio-pci")).unwrap();
            },
            "sudo modprobe vfio-pci",
        ),
        (
            "group shared",
            &[PF0],
            |root, _| {
                // PF1 moves into PF0's group, still on the OpenNIC driver.
                let g = root.join("sys/kernel/iommu_groups");
                std::fs::remove_dir_all(g.join("41")).unwrap();
                std::os::unix::fs::symlink(
                    format!("../../../../devices/pci0000:00/{PF1}"),
                    g.join("40/devices").join(PF1),
                )
                .unwrap();
                let dev = root.join("sys/devices/pci0000:00").join(PF1);
                std::fs::remove_file(dev.join("driver")).unwrap();
                std::os::unix::fs::symlink("../../../bus/pci/drivers/onic", dev.join("driver"))
                    .unwrap();
            },
            "also holds 0000:3b:00.1 (bound to onic)",
        ),
        (
            "interface up",
            &[PF0],
            |_, fs| fs.add_netdev(PF0, "ens1f0", "up", true).unwrap(),
            "`sudo ip link set ens1f0 down`",
        ),
    ];
    for (name, addrs, setup, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let fs = machine(dir.path());
        setup(dir.path(), &fs);
        let mut args = vec!["bind"];
        args.extend_from_slice(addrs);
        let o = nlbctl(dir.path(), &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.starts_with("error: "), "{name}: {err}");
        assert!(err.contains(expected), "{name}: {err}");
        assert_nothing_written(&fs);
    }
}

#[test]
fn bind_of_a_bound_card_says_so_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let _fs = machine(dir.path());
    let o = nlbctl(dir.path(), &["bind", PF1]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "0000:3b:00.1 is already bound to vfio-pci; nothing to do\n"
    );
}

#[test]
fn bind_dry_run_prints_the_writes_and_makes_none() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let o = nlbctl(dir.path(), &["bind", "--dry-run", PF0]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "0000:3b:00.0: onic -> vfio-pci; would write:\n\
         \x20   echo vfio-pci | sudo tee /sys/bus/pci/devices/0000:3b:00.0/driver_override\n\
         \x20   echo 0000:3b:00.0 | sudo tee /sys/bus/pci/devices/0000:3b:00.0/driver/unbind\n\
         \x20   echo 0000:3b:00.0 | sudo tee /sys/bus/pci/drivers_probe\n"
    );
    assert_nothing_written(&fs);
}

/// Runs nlbctl while a thread plays the kernel on the tree.
fn with_kernel(fs: &FakeSysfs, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .env("NLB_SYSFS_ROOT", fs.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                fs.kernel_step().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        let out = child.wait_with_output().unwrap();
        stop.store(true, Ordering::Relaxed);
        out
    })
}

#[test]
fn bind_then_unbind_through_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let fs = machine(dir.path());
    let o = with_kernel(&fs, &["bind", PF0]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "0000:3b:00.0: bound to vfio-pci (was onic); registers at BAR 2 + 0x200000; next: \
         nlbctl fw-info --device pci:0000:3b:00.0\n"
    );
    assert_eq!(fs.driver(PF0).as_deref(), Some("vfio-pci"));
    assert_eq!(fs.driver_override(PF0), "vfio-pci");
    let out = text(&nlbctl(dir.path(), &["devices"]).stdout);
    assert!(
        out.contains("nlbctl fw-info --device pci:0000:3b:00.0"),
        "{out}"
    );

    let o = with_kernel(&fs, &["unbind", PF0]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "0000:3b:00.0: bound to onic (was vfio-pci)\n"
    );
    assert_eq!(fs.driver(PF0).as_deref(), Some("onic"));
    assert_eq!(fs.driver_override(PF0), "(null)");
}

#[test]
fn a_bind_the_kernel_ignores_is_reported() {
    // No kernel behind the files: the writes land, nothing binds.
    let dir = tempfile::tempdir().unwrap();
    let _fs = machine(dir.path());
    let o = nlbctl(dir.path(), &["bind", PF0]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("is bound to onic, not vfio-pci"), "{err}");
    assert!(err.contains("sudo nlbctl unbind 0000:3b:00.0"), "{err}");
}
