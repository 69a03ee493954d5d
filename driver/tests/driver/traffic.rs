//! Continuous traffic while images are loaded again and again, in process (`ModelHandle`) and over
//! the socket protocol (`SocketDevice` to a server on the same simulated device): no packet may
//! be processed with a mix of old and new tables.
//!
//! Bank 1 always receives A images and bank 0 B images (see `common`), so every forwarded
//! packet must be (bank 1, backend 10) or (bank 0, backend 20); a packet that saw A's rule
//! with B's Maglev slots, or the reverse, lands on a trap backend (30, 40), and the backend
//! counters of the traps must stay 0.

use crate::common;

use common::*;
use nlb_driver::device::Device;
use nlb_driver::discover;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::model::ModelHandle;
use nlb_driver::queues::{read_counters, CounterKind};
use nlb_driver::socket::{Server, SocketDevice};
use nlb_hw::enums::Verdict;
use nlb_hw::NicSettings;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Default, Clone)]
struct Seen {
    packets: u64,
    bank0: u64,
    bank1: u64,
    not_forwarded: u64,
    mixed: Vec<(u8, Option<u16>)>,
}

impl Seen {
    fn record(&mut self, r: &firmware_sim::PacketResult) {
        self.packets += 1;
        match (r.verdict, r.bank, r.backend) {
            (Verdict::Forward, 1, Some(A_BACKEND)) => self.bank1 += 1,
            (Verdict::Forward, 0, Some(B_BACKEND)) => self.bank0 += 1,
            (Verdict::Forward, bank, backend) => self.mixed.push((bank, backend)),
            // Before the first load: pipeline disabled; bank 0 empty until the 2nd load.
            _ => self.not_forwarded += 1,
        }
    }
}

/// The simulated device with a packet arriving after every `every`-th register access: the
/// densest interleaving of traffic and driver there can be.
struct Interleaved {
    sim: ModelHandle,
    every: u32,
    count: u32,
    frames: Vec<Vec<u8>>,
    out: Vec<u8>,
    seen: Arc<std::sync::Mutex<Seen>>,
}

impl Interleaved {
    fn new(sim: ModelHandle, every: u32, seen: Arc<std::sync::Mutex<Seen>>) -> Interleaved {
        Interleaved {
            sim,
            every,
            count: 0,
            frames: (0..64).map(|i| frame_to_vip(20000 + i)).collect(),
            out: vec![0u8; 16384],
            seen,
        }
    }

    fn tick(&mut self) {
        self.count += 1;
        if self.count.is_multiple_of(self.every) {
            let f = &self.frames[self.count as usize % self.frames.len()];
            let r = self.sim.lock().receive(f, &mut self.out).expect("receive");
            self.seen.lock().unwrap().record(&r);
        }
    }
}

impl Device for Interleaved {
    fn read32(&mut self, offset: u32) -> Result<u32, nlb_driver::DeviceError> {
        let v = self.sim.read32(offset);
        self.tick();
        v
    }
    fn write32(&mut self, offset: u32, value: u32) -> Result<(), nlb_driver::DeviceError> {
        let r = self.sim.write32(offset, value);
        self.tick();
        r
    }
    fn describe(&self) -> String {
        "interleaved".into()
    }
}

/// Sends frames through the device until `stop`, one lock per frame, like a NIC port.
fn traffic(sim: ModelHandle, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        let mut out = vec![0u8; 16384];
        let frames: Vec<Vec<u8>> = (0..64).map(|i| frame_to_vip(30000 + i)).collect();
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let r = sim
                .lock()
                .receive(&frames[i % frames.len()], &mut out)
                .expect("receive");
            i += 1;
            seen.record(&r);
            if i % 16 == 0 {
                std::thread::yield_now();
            }
        }
        seen
    })
}

fn load_again_and_again<D: Device + ?Sized>(dev: &mut D, sim: &ModelHandle, loads: u64) -> Seen {
    let stop = Arc::new(AtomicBool::new(false));
    let t = traffic(sim.clone(), stop.clone());
    let info = discover(dev).expect("discover");
    let mut loader = Loader::attach(dev, info.profile, LoaderOptions::default()).expect("attach");
    let mut writes = 0;
    for k in 0..loads {
        let which = if k % 2 == 0 { Which::A } else { Which::B };
        let report = loader
            .load(
                dev,
                &image(profile(), which, k + 1),
                &NicSettings::default(),
            )
            .expect("load");
        assert_eq!(report.bank, if k % 2 == 0 { 1 } else { 0 });
        assert_eq!(report.generation as u64, k + 1);
        writes += report.total_writes();
    }
    stop.store(true, Ordering::Relaxed);
    let seen = t.join().expect("traffic thread");
    assert!(writes > 0);
    let traps = read_counters(
        dev,
        CounterKind::Backend,
        [TRAP_B_SLOTS_A_RULE, TRAP_A_SLOTS_B_RULE].map(u32::from),
        false,
    )
    .expect("counters");
    assert_eq!(
        traps[0].packets + traps[1].packets,
        0,
        "no packet reached a trap"
    );
    seen
}

fn check(threaded: &Seen, interleaved: &Seen) {
    for (what, seen) in [("threaded", threaded), ("interleaved", interleaved)] {
        assert!(
            seen.mixed.is_empty(),
            "{what}: mixed tables seen: {:?}",
            seen.mixed
        );
    }
    // How much of the threaded traffic lands inside a load is up to the scheduler; the
    // interleaved traffic is dense by construction.
    assert!(threaded.packets > 0);
    assert!(
        interleaved.bank0 > 1000 && interleaved.bank1 > 1000,
        "both banks served under load: {interleaved:?}"
    );
}

#[test]
fn in_process_traffic_never_sees_a_mixed_table() {
    let sim = ModelHandle::new(profile());
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let mut dev = Interleaved::new(sim.clone(), 5, seen.clone());
    let threaded = load_again_and_again(&mut dev, &sim, 30);
    let interleaved = seen.lock().unwrap().clone();
    check(&threaded, &interleaved);
}

#[test]
fn socket_loads_under_traffic_never_show_a_mixed_table() {
    let sim = ModelHandle::new(profile());
    let dir = std::env::temp_dir().join(format!("nlb-driver-traffic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nlb.sock");
    let served = sim.clone();
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let in_server = seen.clone();
    // The server's device gets a packet after every 5th access it executes.
    let server = Server::bind(
        &path,
        Arc::new(move || {
            Box::new(Interleaved::new(served.clone(), 5, in_server.clone())) as Box<dyn Device>
        }),
    )
    .unwrap();
    let _handle = server.spawn();
    let mut dev = SocketDevice::connect(&path).unwrap();
    let threaded = load_again_and_again(&mut dev, &sim, 20);
    let interleaved = seen.lock().unwrap().clone();
    check(&threaded, &interleaved);
    let _ = std::fs::remove_dir_all(&dir);
}
