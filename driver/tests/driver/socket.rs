//! The socket backend end to end: discovery, loads, conntrack and errors through a server on
//! a real Unix socket, checked against the simulated device behind it.

use crate::common;

use common::*;
use nlb_driver::conntrack::{Conntrack, Installed, NewConnection};
use nlb_driver::device::{Batch, Device, DeviceError};
use nlb_driver::fault::CutAfter;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_driver::socket::{Server, ServerHandle, SocketDevice};
use nlb_driver::{discover, open_device};
use nlb_hw::blocks::ctrl;
use nlb_hw::{FlowKey, NicSettings};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;

struct Served {
    sim: ModelHandle,
    path: PathBuf,
    dir: PathBuf,
    _handle: ServerHandle,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(name: &str) -> Served {
    let sim = ModelHandle::new(profile());
    let dir = std::env::temp_dir().join(format!("nlb-driver-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nlb.sock");
    let served = sim.clone();
    let server = Server::bind(
        &path,
        Arc::new(move || Box::new(served.clone()) as Box<dyn Device>),
    )
    .unwrap();
    Served {
        sim,
        path,
        dir,
        _handle: server.spawn(),
    }
}

#[test]
fn discovery_loads_and_conntrack_over_the_socket() {
    let s = serve("e2e");
    let mut dev = open_device(&format!("sim:{}", s.path.display())).unwrap();
    assert_eq!(dev.describe(), format!("sim:{}", s.path.display()));
    let info = discover(&mut dev).unwrap();
    assert_eq!(info, discover(&mut s.sim.clone()).unwrap());
    let mut loader = Loader::attach(&mut dev, info.profile, LoaderOptions::default()).unwrap();
    let mut a = image(profile(), Which::A, 42);
    a.pools[0].track = true;
    let r = loader.load(&mut dev, &a, &NicSettings::default()).unwrap();
    assert_eq!(r.changed_entries, nonempty_entries(&a));
    assert_eq!(s.sim.lock().bank(1), &a);
    // Conntrack through the socket lands in the model's table.
    let mut ct = Conntrack::attach(&mut dev, &info, 0).unwrap();
    let conns: Vec<NewConnection> = (0..1000)
        .map(|i| NewConnection {
            key: FlowKey::tuple5(
                17,
                IpAddr::V4(Ipv4Addr::new(203, 0, 113, (i % 250) as u8)),
                10000 + i,
                IpAddr::V4(VIP),
                53,
            ),
            backend: B_BACKEND,
            rule: 0,
        })
        .collect();
    let mut out = Vec::new();
    ct.install_batch(&mut dev, &conns, 3, &mut out).unwrap();
    let placed = out
        .iter()
        .filter(|o| matches!(o, Installed::New(_)))
        .count();
    let dev_sim = s.sim.lock();
    assert_eq!(dev_sim.conntrack().valid_count() as usize, placed);
    for (c, o) in conns.iter().zip(&out) {
        if let Installed::New(i) = o {
            assert_eq!(dev_sim.conntrack().lookup(&c.key), Some(*i));
        }
    }
}

#[test]
fn device_errors_cross_the_socket() {
    let s = serve("errors");
    let mut dev = SocketDevice::connect(&s.path).unwrap();
    let e = dev.read32(0x1002).unwrap_err();
    assert!(
        matches!(
            e,
            DeviceError::BadOffset {
                offset: 0x1002,
                why: "not 4-byte aligned"
            }
        ),
        "{e}"
    );
    let e = dev.write32(0x10000, 1).unwrap_err();
    assert!(
        matches!(
            e,
            DeviceError::BadOffset {
                offset: 0x10000,
                ..
            }
        ),
        "{e}"
    );
    // A batch stops at the failing op: the write before it happened, the one after did not.
    let mut b = Batch::new();
    b.write(ctrl::GENERATION, 5)
        .read(0x20000)
        .write(ctrl::GENERATION, 6);
    assert!(b.run(&mut dev).is_err());
    assert_eq!(dev.read32(ctrl::GENERATION).unwrap(), 5);
    // The connection is still usable.
    assert_eq!(dev.read32(0).unwrap(), nlb_hw::blocks::fw_id::TYPE_WORD);
}

#[test]
fn a_broken_client_does_not_take_the_server_down() {
    let s = serve("garbage");
    let mut raw = UnixStream::connect(&s.path).unwrap();
    // A BATCH claiming 1000 ops with none present.
    raw.write_all(&[5, 0, 0, 0, 2, 0xe8, 3, 0, 0]).unwrap();
    let mut hdr = [0u8; 4];
    raw.read_exact(&mut hdr).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(hdr) as usize];
    raw.read_exact(&mut body).unwrap();
    assert_eq!(body[0], 1, "an error reply");
    let msg = String::from_utf8_lossy(&body[12..]);
    assert!(msg.contains("more were expected"), "{msg}");
    // The server closed that connection ...
    assert_eq!(raw.read(&mut hdr).unwrap_or(0), 0);
    // ... and still serves others.
    let mut dev = SocketDevice::connect(&s.path).unwrap();
    assert_eq!(dev.read32(0).unwrap(), nlb_hw::blocks::fw_id::TYPE_WORD);
    // An oversized length is refused without reading it.
    let mut raw = UnixStream::connect(&s.path).unwrap();
    raw.write_all(&u32::MAX.to_le_bytes()).unwrap();
    raw.read_exact(&mut hdr).unwrap();
}

#[test]
fn a_load_cut_over_the_socket_leaves_the_old_table_serving() {
    let s = serve("cut");
    let nic = NicSettings::default();
    let (a, b) = (image(profile(), Which::A, 5), image(profile(), Which::B, 6));
    let mut dev = SocketDevice::connect(&s.path).unwrap();
    let info = discover(&mut dev).unwrap();
    let mut loader = Loader::attach(&mut dev, info.profile, LoaderOptions::default()).unwrap();
    loader.load(&mut dev, &a, &nic).unwrap();
    let mut rng = Rng(77);
    for _ in 0..8 {
        let cut = 3 + rng.below(2000);
        let mut cutting = CutAfter::new(SocketDevice::connect(&s.path).unwrap(), cut);
        assert!(loader.load(&mut cutting, &b, &nic).is_err(), "cut at {cut}");
        assert_eq!(s.sim.lock().read32(ctrl::ACTIVE_BANK).unwrap(), 1);
        assert_eq!(s.sim.lock().bank(1), &a, "cut at {cut}");
    }
    loader.load(&mut dev, &b, &nic).unwrap();
    assert_eq!(s.sim.lock().bank(0), &b);
}

/// The rings over the socket: the server's device DMAs into this process's memory (the memfd
/// went over the socket), signals this process's eventfds, and the client's figures include
/// the server's DMA.
#[test]
fn the_rings_work_over_the_socket_through_shared_memory() {
    use nlb_driver::rings::{HostRings, RingSizes};
    let s = serve("rings");
    let mut dev = SocketDevice::connect(&s.path).unwrap();
    discover(&mut dev).unwrap();
    let sizes = RingSizes {
        punt_log2: 3,
        event_log2: 3,
        inject_log2: 3,
        cmd_log2: 3,
        cmd_data: 64 * 1024,
        irq_count: 1,
        irq_usecs: 0,
    };
    let mut rings = HostRings::attach(&mut dev, sizes, true).unwrap();
    let mut loader =
        Loader::attach_dma(&mut dev, &mut rings, profile(), LoaderOptions::default()).unwrap();
    let mut a = image(profile(), Which::A, 3);
    a.pools[0].track = true;
    loader
        .load_dma(&mut dev, &mut rings, &a, &NicSettings::default())
        .unwrap();
    assert_eq!(s.sim.lock().bank(1), &a);
    let before = dev.pcie();
    // Traffic in the server's device: one new flow, learned by the NIC.
    let mut out = vec![0u8; 16384];
    let r = s.sim.lock().receive(&frame_to_vip(4242), &mut out).unwrap();
    assert_eq!(r.backend, Some(A_BACKEND));
    assert!(rings.wait_interrupt(std::time::Duration::from_secs(5)));
    let mut events = Vec::new();
    assert_eq!(rings.pop_events(8, &mut events).unwrap(), 1);
    assert!(events[0].installed);
    rings.give_back(&mut dev).unwrap();
    // An injected frame leaves the server's device.
    rings.inject(A_BACKEND, 0, &frame_to_vip(1)).unwrap();
    rings.ring_inject(&mut dev).unwrap();
    let sent = s.sim.lock().take_injected();
    assert_eq!(sent.len(), 1);
    assert_eq!(dst_mac(&sent[0].frame), backend_mac(A_BACKEND));
    let used = dev.pcie().since(&before);
    assert_eq!(used.mmio_reads, 0);
    assert_eq!(used.mmio_writes, 2, "two doorbells");
    assert!(used.dma_writes >= 2 && used.dma_reads >= 2, "{used:?}");
    drop(dev);
}
