//! `nlb_axi_cdc` (the `axi_cdc` model: 64-bit addresses, 512-bit data; the OpenNIC plugin's
//! host DMA crossing) between two unrelated clocks (`nlb_verif::clocks`). A master on the slave
//! side (`s_axi_*`) sends write bursts of 1-8 beats with random byte strobes, then read bursts,
//! offering each channel at random clocks and taking responses with random back-pressure;
//! behind the master side (`m_axi_*`), `nlb_verif::host_mem::AxiHost` serves a host memory with
//! PCIe-like latencies. Checked against a reference memory: every write burst answered once
//! with OKAY and every byte it strobed in the host memory, nothing else written; every read
//! burst's beats in order, with the reference's bytes, OKAY, `rlast` on its last beat only.
//! Clocks: 322.27 -> 250 MHz (the plugin's), 250 -> 322.27, 125 -> 250, 250 = 250 in phase;
//! now and then one clock paused for a while. Bins printed, all required.

use nlb_verif::bench::{seed_from_env, Agent};
use nlb_verif::clocks::{opennic, ClockSpec, Clocks};
use nlb_verif::host_mem::{AxiHost, HostMemory, HostTiming};
use nlb_verif::models::AxiCdc;
use nlb_verif::{Port, VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

const S_SIDE: usize = 0;
const M_SIDE: usize = 1;
const BASE: u64 = 0x1_2340_0000;
const LEN: usize = 64 * 256;
const BEAT: usize = 64;

/// One write burst: its address, its beats' data (16 words each) and strobes.
#[derive(Debug, Clone)]
struct WriteBurst {
    addr: u64,
    beats: Vec<(Vec<u32>, u64)>,
}

/// The master on `s_axi_*`, stepped at the slave-side clock's edges.
struct Master {
    p: BTreeMap<&'static str, Port>,
    aw: VecDeque<(u64, u64)>,
    w: VecDeque<(Vec<u32>, u64, bool)>,
    ar: VecDeque<(u64, u64)>,
    aw_cur: Option<(u64, u64)>,
    w_cur: Option<(Vec<u32>, u64, bool)>,
    ar_cur: Option<(u64, u64)>,
    bready: bool,
    rready: bool,
    b: Vec<u64>,
    r: Vec<(Vec<u32>, u64, bool)>,
    offer: f64,
    take: f64,
}

impl Master {
    fn new(sim: &Verilated) -> Master {
        let names = [
            "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata", "wstrb",
            "wlast", "wvalid", "wready", "bresp", "bvalid", "bready", "araddr", "arlen", "arsize",
            "arburst", "arvalid", "arready", "rdata", "rresp", "rlast", "rvalid", "rready",
        ];
        let p = names
            .iter()
            .map(|n| (*n, sim.port(&format!("s_axi_{n}")).expect(n)))
            .collect();
        Master {
            p,
            aw: VecDeque::new(),
            w: VecDeque::new(),
            ar: VecDeque::new(),
            aw_cur: None,
            w_cur: None,
            ar_cur: None,
            bready: false,
            rready: false,
            b: Vec::new(),
            r: Vec::new(),
            offer: 0.7,
            take: 0.7,
        }
    }

    fn idle(&self) -> bool {
        self.aw.is_empty()
            && self.w.is_empty()
            && self.ar.is_empty()
            && self.aw_cur.is_none()
            && self.w_cur.is_none()
            && self.ar_cur.is_none()
    }
}

impl Agent for Master {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        let p = &self.p;
        if self.aw_cur.is_none() && rng.random_bool(self.offer) {
            self.aw_cur = self.aw.pop_front();
        }
        if self.w_cur.is_none() && rng.random_bool(self.offer) {
            self.w_cur = self.w.pop_front();
        }
        if self.ar_cur.is_none() && rng.random_bool(self.offer) {
            self.ar_cur = self.ar.pop_front();
        }
        let (awaddr, awlen) = self
            .aw_cur
            .unwrap_or((rng.random(), rng.random_range(0..256)));
        sim.set_u64(p["awaddr"], awaddr)?;
        sim.set_u64(p["awlen"], awlen)?;
        sim.set_u64(p["awsize"], 6)?;
        sim.set_u64(p["awburst"], 1)?;
        sim.set_bit(p["awvalid"], self.aw_cur.is_some())?;
        match &self.w_cur {
            Some((data, strb, last)) => {
                sim.set(p["wdata"], data)?;
                sim.set_u64(p["wstrb"], *strb)?;
                sim.set_bit(p["wlast"], *last)?;
            }
            None => {
                let noise: Vec<u32> = (0..16).map(|_| rng.random()).collect();
                sim.set(p["wdata"], &noise)?;
                sim.set_u64(p["wstrb"], rng.random())?;
                sim.set_bit(p["wlast"], rng.random())?;
            }
        }
        sim.set_bit(p["wvalid"], self.w_cur.is_some())?;
        let (araddr, arlen) = self
            .ar_cur
            .unwrap_or((rng.random(), rng.random_range(0..256)));
        sim.set_u64(p["araddr"], araddr)?;
        sim.set_u64(p["arlen"], arlen)?;
        sim.set_u64(p["arsize"], 6)?;
        sim.set_u64(p["arburst"], 1)?;
        sim.set_bit(p["arvalid"], self.ar_cur.is_some())?;
        self.bready = rng.random_bool(self.take);
        self.rready = rng.random_bool(self.take);
        sim.set_bit(p["bready"], self.bready)?;
        sim.set_bit(p["rready"], self.rready)
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let p = &self.p;
        if self.aw_cur.is_some() && sim.get_bit(p["awready"])? {
            self.aw_cur = None;
        }
        if self.w_cur.is_some() && sim.get_bit(p["wready"])? {
            self.w_cur = None;
        }
        if self.ar_cur.is_some() && sim.get_bit(p["arready"])? {
            self.ar_cur = None;
        }
        if self.bready && sim.get_bit(p["bvalid"])? {
            self.b.push(sim.get_u64(p["bresp"])?);
        }
        if self.rready && sim.get_bit(p["rvalid"])? {
            self.r.push((
                sim.get_words(p["rdata"])?,
                sim.get_u64(p["rresp"])?,
                sim.get_bit(p["rlast"])?,
            ));
        }
        Ok(())
    }
}

fn write_burst(rng: &mut StdRng) -> WriteBurst {
    let beats = rng.random_range(1..=8u64);
    let slot = rng.random_range(0..(LEN / BEAT) as u64 - beats + 1);
    WriteBurst {
        addr: BASE + slot * BEAT as u64,
        beats: (0..beats)
            .map(|_| {
                let strb = match rng.random_range(0..4) {
                    0 => rng.random(),
                    _ => u64::MAX,
                };
                ((0..16).map(|_| rng.random()).collect(), strb)
            })
            .collect(),
    }
}

fn run_case(seed: u64, s_mhz: f64, m_mhz: f64, bins: &mut BTreeMap<String, u64>) {
    let fail = |what: String| -> ! {
        panic!(
            "axi_cdc {s_mhz} -> {m_mhz} MHz: {what} (seed {seed:#x}: NLB_SEED={seed:#x} cargo \
             test -p nlb-verif --test rtl axi_cdc)"
        )
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<AxiCdc>().expect("model");
    // Equal clocks run in phase (every edge of both at one instant) and are never paused; the
    // others start apart and pause now and then.
    let in_phase = s_mhz == m_mhz;
    let m_spec = ClockSpec::mhz("m_clk", m_mhz);
    let m_spec = if in_phase {
        m_spec
    } else {
        m_spec.with_phase(700)
    };
    let mut clocks =
        Clocks::new(&mut sim, &[ClockSpec::mhz("s_clk", s_mhz), m_spec]).expect("clocks");
    let mem = HostMemory::new(BASE, LEN);
    let mut host =
        AxiHost::on_prefix(&sim, "m_axi", mem.clone(), HostTiming::pcie(), seed ^ 1).expect("host");
    let mut master = Master::new(&sim);
    let (s_rst, m_rst) = (
        sim.port("s_rst").expect("s_rst"),
        sim.port("m_rst").expect("m_rst"),
    );
    let mut reference = vec![0u8; LEN];

    // Both sides reset together, then released.
    sim.set_bit(s_rst, true).expect("rst");
    sim.set_bit(m_rst, true).expect("rst");
    let mut edges = 0u64;
    let mut step = |sim: &mut Verilated,
                    clocks: &mut Clocks,
                    master: &mut Master,
                    host: &mut AxiHost,
                    rng: &mut StdRng,
                    bins: &mut BTreeMap<String, u64>| {
        edges += 1;
        // Now and then one clock stops for a while.
        if !in_phase && edges.is_multiple_of(400) && rng.random_bool(0.5) {
            let which = rng.random_range(0..2);
            clocks.pause(which);
            *bins.entry(format!("clock {which} paused")).or_default() += 1;
        }
        if !in_phase && edges % 400 == 150 {
            for i in 0..2 {
                clocks.resume(i, rng.random_range(1..5_000));
            }
        }
        let e = clocks.next_edge(sim).expect("edge").expect("a clock runs");
        if e.has(S_SIDE) {
            master.drive(sim, rng).expect("master");
        }
        if e.has(M_SIDE) {
            host.drive(sim, rng).expect("host");
        }
        sim.eval();
        if e.has(S_SIDE) {
            master.observe(sim).expect("master");
        }
        if e.has(M_SIDE) {
            host.observe(sim).expect("host");
        }
        if e.has(S_SIDE) && e.has(M_SIDE) {
            *bins.entry("both edges at one instant".into()).or_default() += 1;
        }
        clocks.fire(sim, e).expect("fire");
    };
    for _ in 0..40 {
        step(
            &mut sim,
            &mut clocks,
            &mut master,
            &mut host,
            &mut rng,
            bins,
        );
    }
    sim.set_bit(s_rst, false).expect("rst");
    sim.set_bit(m_rst, false).expect("rst");

    // Writes.
    let bursts: Vec<WriteBurst> = (0..60).map(|_| write_burst(&mut rng)).collect();
    for wb in &bursts {
        master.aw.push_back((wb.addr, wb.beats.len() as u64 - 1));
        for (i, (data, strb)) in wb.beats.iter().enumerate() {
            master
                .w
                .push_back((data.clone(), *strb, i + 1 == wb.beats.len()));
            let at = (wb.addr - BASE) as usize + i * BEAT;
            for (j, byte) in data.iter().flat_map(|w| w.to_le_bytes()).enumerate() {
                if strb >> j & 1 == 1 {
                    reference[at + j] = byte;
                }
            }
        }
    }
    let mut guard = 0u64;
    while master.b.len() < bursts.len() {
        step(
            &mut sim,
            &mut clocks,
            &mut master,
            &mut host,
            &mut rng,
            bins,
        );
        guard += 1;
        if guard > 400_000 {
            fail(format!(
                "{} of {} write responses",
                master.b.len(),
                bursts.len()
            ));
        }
    }
    if master.b.iter().any(|&r| r != 0) {
        fail(format!("a write answered {:?}", master.b));
    }
    if mem.snapshot() != reference {
        fail("the host memory differs from the writes".into());
    }
    *bins.entry("write bursts".into()).or_default() += bursts.len() as u64;

    // Reads.
    let reads: Vec<(u64, u64)> = (0..60)
        .map(|_| {
            let beats = rng.random_range(1..=8u64);
            let slot = rng.random_range(0..(LEN / BEAT) as u64 - beats + 1);
            (BASE + slot * BEAT as u64, beats)
        })
        .collect();
    for &(addr, beats) in &reads {
        master.ar.push_back((addr, beats - 1));
    }
    let want_beats: u64 = reads.iter().map(|r| r.1).sum();
    guard = 0;
    while (master.r.len() as u64) < want_beats || !master.idle() {
        step(
            &mut sim,
            &mut clocks,
            &mut master,
            &mut host,
            &mut rng,
            bins,
        );
        guard += 1;
        if guard > 400_000 {
            fail(format!("{} of {want_beats} read beats", master.r.len()));
        }
    }
    let mut k = 0usize;
    for (n, &(addr, beats)) in reads.iter().enumerate() {
        for i in 0..beats as usize {
            let (data, resp, last) = &master.r[k];
            k += 1;
            let at = (addr - BASE) as usize + i * BEAT;
            let want: Vec<u32> = reference[at..at + BEAT]
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            if *data != want || *resp != 0 || *last != (i + 1 == beats as usize) {
                fail(format!(
                    "read burst {n} beat {i}: resp {resp}, last {last}, data differs: {}",
                    *data != want
                ));
            }
        }
    }
    *bins.entry("read bursts".into()).or_default() += reads.len() as u64;
    if master.r.len() != k {
        fail(format!("{} read beats for {k} asked", master.r.len()));
    }
    if host.write_bursts != bursts.len() as u64 || host.read_bursts != reads.len() as u64 {
        fail(format!(
            "the host saw {} write and {} read bursts",
            host.write_bursts, host.read_bursts
        ));
    }
}

#[test]
fn carries_bursts_both_ways_between_unrelated_clocks() {
    let seed = seed_from_env(0xa71c_dc01);
    let mut bins = BTreeMap::new();
    for (i, (s, m)) in [
        (opennic::CMAC_MHZ, opennic::AXIS_MHZ),
        (opennic::AXIS_MHZ, opennic::CMAC_MHZ),
        (opennic::AXIL_MHZ, opennic::AXIS_MHZ),
        (opennic::AXIS_MHZ, opennic::AXIS_MHZ),
    ]
    .into_iter()
    .enumerate()
    {
        run_case(seed.wrapping_add(i as u64), s, m, &mut bins);
    }
    eprintln!("axi_cdc: {bins:?}");
    for b in [
        "write bursts",
        "read bursts",
        "clock 0 paused",
        "clock 1 paused",
        "both edges at one instant",
    ] {
        assert!(
            bins.get(b).copied().unwrap_or(0) > 0,
            "bin '{b}' never hit: {bins:?}"
        );
    }
}
