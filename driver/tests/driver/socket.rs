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
