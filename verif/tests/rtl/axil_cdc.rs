//! `nlb_axil_cdc` (the `axil_cdc` model: 16-bit addresses, 32-bit data, SYNC_STAGES 2) between
//! two unrelated clocks (`nlb_verif::clocks`): random reads and writes (random byte strobes)
//! from `nlb_verif::axil::AxiLiteMaster` on the slave port, one at a time with random delays on
//! every channel, on the register clock; behind the master port, on the pipeline clock, a
//! register memory (64 words, some answering SLVERR) with random AWREADY/WREADY/ARREADY and
//! responses after random delays. Checked against a reference memory: the accesses reach the
//! memory exactly once each, in order, with their address, data and strobes (the memory logs
//! them), every response comes back once with its data and response code, and the master port
//! keeps AXI's rules (a valid held with its payload until ready, no response taken that was not
//! offered). Clocks: 125 -> 322.27 MHz (OpenNIC's registers into the 322 MHz box), the reverse,
//! 125 -> 250 MHz, 250 = 250 MHz in phase, and periods redrawn every few hundred edges with one clock now and then
//! paused. Bins printed, all required.

use nlb_verif::axil::{AxiLiteMaster, AxiLitePorts, Completion};
use nlb_verif::bench::{seed_from_env, trace_always, wave_path, Agent};
use nlb_verif::clocks::{opennic, ClockSpec, Clocks};
use nlb_verif::models::AxilCdc;
use nlb_verif::{VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

const SLAVE_SIDE: usize = 0;
const MASTER_SIDE: usize = 1;
/// Words of the register memory behind the master port.
const WORDS: u32 = 64;

/// Every 16th word answers SLVERR (and still stores writes), so response codes are checked.
fn resp_of(addr: u32) -> u32 {
    if (addr / 4) % 16 == 15 {
        2
    } else {
        0
    }
}

fn word_of(addr: u32) -> usize {
    ((addr / 4) % WORDS) as usize
}

/// `old` with the bytes of `data` whose strobe bit is set.
fn merge(old: u32, data: u32, strb: u32) -> u32 {
    let mut bytes = old.to_le_bytes();
    let new = data.to_le_bytes();
    for (i, b) in bytes.iter_mut().enumerate() {
        if (strb / 2u32.pow(i as u32)) % 2 == 1 {
            *b = new[i];
        }
    }
    u32::from_le_bytes(bytes)
}

/// An access as the memory saw it (or as the test issued it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Write { addr: u32, data: u32, strb: u32 },
    Read { addr: u32 },
}

/// The register memory behind the master port, stepped at the pipeline clock's edges.
struct RegMemory {
    p: AxiLitePorts,
    mem: Vec<u32>,
    log: Vec<Access>,
    aw: Option<u32>,
    w: Option<(u32, u32)>,
    /// (response, clocks to wait) of the write answered next.
    b: Option<(u32, u32)>,
    /// (data, response, clocks to wait) of the read answered next.
    r: Option<(u32, u32, u32)>,
    ready: (bool, bool, bool),
    offered_b: bool,
    offered_r: bool,
    /// AW / W / AR offered and not taken at the last edge, with the payload then.
    held_aw: Option<u32>,
    held_w: Option<(u32, u32)>,
    held_ar: Option<u32>,
    violations: Vec<String>,
    aw_w_apart: u64,
}

impl RegMemory {
    fn new(sim: &Verilated) -> Result<RegMemory, VerifError> {
        Ok(RegMemory {
            p: AxiLitePorts::new(sim, "m_axil")?,
            mem: (0..WORDS).map(|i| i.wrapping_mul(0x0101_0101)).collect(),
            log: Vec::new(),
            aw: None,
            w: None,
            b: None,
            r: None,
            ready: (false, false, false),
            offered_b: false,
            offered_r: false,
            held_aw: None,
            held_w: None,
            held_ar: None,
            violations: Vec::new(),
            aw_w_apart: 0,
        })
    }
}

impl Agent for RegMemory {
    fn drive(&mut self, sim: &mut Verilated, rng: &mut StdRng) -> Result<(), VerifError> {
        let p = self.p;
        self.ready = (
            self.aw.is_none() && rng.random_bool(0.6),
            self.w.is_none() && rng.random_bool(0.6),
            self.r.is_none() && rng.random_bool(0.6),
        );
        sim.set_bit(p.awready, self.ready.0)?;
        sim.set_bit(p.wready, self.ready.1)?;
        sim.set_bit(p.arready, self.ready.2)?;
        if let Some((_, wait)) = self.b.as_mut() {
            *wait = wait.saturating_sub(1);
        }
        if let Some((_, _, wait)) = self.r.as_mut() {
            *wait = wait.saturating_sub(1);
        }
        self.offered_b = self.b.is_some_and(|(_, wait)| wait == 0);
        self.offered_r = self.r.is_some_and(|(_, _, wait)| wait == 0);
        sim.set_bit(p.bvalid, self.offered_b)?;
        sim.set_u64(p.bresp, u64::from(self.b.map_or(3, |(resp, _)| resp)))?;
        sim.set_bit(p.rvalid, self.offered_r)?;
        let (data, resp) = match self.r {
            Some((d, r, _)) if self.offered_r => (d, r),
            _ => (rng.random(), 3),
        };
        sim.set_u64(p.rdata, u64::from(data))?;
        sim.set_u64(p.rresp, u64::from(resp))
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let p = self.p;
        let awvalid = sim.get_bit(p.awvalid)?;
        let awaddr = sim.get_u64(p.awaddr)? as u32;
        let wvalid = sim.get_bit(p.wvalid)?;
        let wdata = sim.get_u64(p.wdata)? as u32;
        let wstrb = match p.wstrb {
            Some(port) => sim.get_u64(port)? as u32,
            None => 0xf,
        };
        let arvalid = sim.get_bit(p.arvalid)?;
        let araddr = sim.get_u64(p.araddr)? as u32;
        // A valid offered at the last edge and not taken stays, with its payload.
        if let Some(a) = self.held_aw.take() {
            if !awvalid || awaddr != a {
                self.violations
                    .push("AWVALID/AWADDR changed before AWREADY".into());
            }
        }
        if let Some(w) = self.held_w.take() {
            if !wvalid || (wdata, wstrb) != w {
                self.violations
                    .push("WVALID/WDATA changed before WREADY".into());
            }
        }
        if let Some(a) = self.held_ar.take() {
            if !arvalid || araddr != a {
                self.violations
                    .push("ARVALID/ARADDR changed before ARREADY".into());
            }
        }
        if awvalid {
            if self.ready.0 {
                self.aw = Some(awaddr);
            } else {
                self.held_aw = Some(awaddr);
            }
        }
        if wvalid {
            if self.ready.1 {
                self.w = Some((wdata, wstrb));
            } else {
                self.held_w = Some((wdata, wstrb));
            }
        }
        if self.aw.is_some() != self.w.is_some() {
            self.aw_w_apart += 1;
        }
        if let (Some(addr), Some((data, strb))) = (self.aw, self.w) {
            if self.b.is_some() {
                self.violations
                    .push("a second write before the first's response".into());
            }
            let i = word_of(addr);
            self.mem[i] = merge(self.mem[i], data, strb);
            self.log.push(Access::Write { addr, data, strb });
            self.b = Some((resp_of(addr), self.log.len() as u32 % 5));
            self.aw = None;
            self.w = None;
        }
        if arvalid {
            if self.ready.2 {
                if self.r.is_some() {
                    self.violations
                        .push("a second read before the first's data".into());
                }
                self.log.push(Access::Read { addr: araddr });
                self.r = Some((
                    self.mem[word_of(araddr)],
                    resp_of(araddr),
                    self.log.len() as u32 % 7,
                ));
            } else {
                self.held_ar = Some(araddr);
            }
        }
        if self.offered_b && sim.get_bit(p.bready)? {
            self.b = None;
        }
        if self.offered_r && sim.get_bit(p.rready)? {
            self.r = None;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Timing {
    /// Slave-side and master-side clocks (MHz), the master side's first edge at this phase (ps).
    Fixed(f64, f64, u64),
    /// Periods redrawn every few hundred edges, one clock paused now and then.
    Drifting,
}

/// Counts one hit of bin `k`.
fn bin(b: &mut BTreeMap<String, u64>, k: &str) {
    *b.entry(k.to_string()).or_default() += 1;
}

#[derive(Debug, Default)]
struct Outcome {
    accesses: usize,
    bins: BTreeMap<String, u64>,
}

fn run(timing: Timing, accesses: usize, seed: u64, wave: Option<&Path>) -> Result<Outcome, String> {
    let err = |e: VerifError| e.to_string();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Verilated::new::<AxilCdc>().map_err(err)?;
    if let Some(w) = wave {
        sim.trace_to(w).map_err(err)?;
    }
    let (s_rst, m_rst) = (
        sim.port("s_rst").map_err(err)?,
        sim.port("m_rst").map_err(err)?,
    );
    let specs = match timing {
        Timing::Fixed(s, m, phase) => [
            ClockSpec::mhz("s_clk", s),
            ClockSpec::mhz("m_clk", m).with_phase(phase),
        ],
        Timing::Drifting => [
            ClockSpec::mhz("s_clk", opennic::AXIL_MHZ),
            ClockSpec::mhz("m_clk", opennic::CMAC_MHZ),
        ],
    };
    let mut clocks = Clocks::new(&mut sim, &specs).map_err(err)?;
    let (idle, backpressure) = (rng.random_range(0.0..0.6), rng.random_range(0.0..0.6));
    let mut master = AxiLiteMaster::new(&sim, "s_axil", idle, backpressure).map_err(err)?;
    let mut memory = RegMemory::new(&sim).map_err(err)?;
    let mut out = Outcome::default();

    // Reset: both together, each side clocked at least twice.
    sim.set_bit(s_rst, true).map_err(err)?;
    sim.set_bit(m_rst, true).map_err(err)?;
    while clocks.rises(SLAVE_SIDE) < 3 || clocks.rises(MASTER_SIDE) < 3 {
        let Some(e) = clocks.next_edge(&mut sim).map_err(err)? else {
            return Err("no clock".into());
        };
        clocks.fire(&mut sim, e).map_err(err)?;
    }
    sim.set_bit(s_rst, false).map_err(err)?;
    sim.set_bit(m_rst, false).map_err(err)?;
    sim.eval();

    // The accesses and what each must answer, from the reference memory.
    let mut reference: Vec<u32> = memory.mem.clone();
    let mut issued: Vec<Access> = Vec::new();
    let mut expected: VecDeque<Completion> = VecDeque::new();
    for _ in 0..accesses {
        let addr = rng.random_range(0..WORDS) * 4;
        if rng.random_bool(0.5) {
            let data: u32 = rng.random();
            let strb = if rng.random_bool(0.5) {
                15
            } else {
                rng.random_range(0..16)
            };
            master.queue_write_strb(addr, data, strb);
            issued.push(Access::Write { addr, data, strb });
            let i = word_of(addr);
            reference[i] = merge(reference[i], data, strb);
            expected.push_back(Completion::Write {
                addr,
                resp: resp_of(addr),
            });
        } else {
            master.queue_read(addr);
            issued.push(Access::Read { addr });
            expected.push_back(Completion::Read {
                addr,
                data: reference[word_of(addr)],
                resp: resp_of(addr),
            });
        }
    }

    let limit = 2000 + 400 * accesses as u64;
    let mut pause_left = 0u64;
    let mut event = 0u64;
    while !master.is_idle() || !expected.is_empty() {
        event += 1;
        if event > limit {
            return Err(format!(
                "{} of {accesses} accesses answered after {limit} clock edges (hung)",
                accesses - expected.len()
            ));
        }
        if let Timing::Drifting = timing {
            if pause_left > 0 {
                pause_left -= 1;
                if pause_left == 0 {
                    clocks.resume(SLAVE_SIDE, rng.random_range(1..3000));
                    clocks.resume(MASTER_SIDE, rng.random_range(1..3000));
                }
            } else if event.is_multiple_of(300) {
                let (a, b) = (
                    rng.random_range(1000..20_000u64),
                    rng.random_range(1000..20_000u64),
                );
                clocks.set_period(SLAVE_SIDE, a);
                clocks.set_period(MASTER_SIDE, b);
                bin(&mut out.bins, "periods redrawn");
                if rng.random_bool(0.3) {
                    let stop = if rng.random_bool(0.5) {
                        SLAVE_SIDE
                    } else {
                        MASTER_SIDE
                    };
                    clocks.pause(stop);
                    pause_left = 60;
                    bin(&mut out.bins, "a clock paused with an access in flight");
                }
            }
        }
        let Some(edges) = clocks.next_edge(&mut sim).map_err(err)? else {
            return Err("every clock paused".into());
        };
        let (s_edge, m_edge) = (edges.has(SLAVE_SIDE), edges.has(MASTER_SIDE));
        if s_edge {
            master.drive(&mut sim, &mut rng).map_err(err)?;
        }
        if m_edge {
            memory.drive(&mut sim, &mut rng).map_err(err)?;
        }
        sim.eval();
        if s_edge {
            master.observe(&mut sim).map_err(err)?;
        }
        if m_edge {
            memory.observe(&mut sim).map_err(err)?;
        }
        if edges.count() == 2 {
            bin(&mut out.bins, "edges of both clocks at one instant");
        }
        clocks.fire(&mut sim, edges).map_err(err)?;
        while let Some(c) = master.pop_completion() {
            let Some(want) = expected.pop_front() else {
                return Err(format!("a response with nothing outstanding: {c:?}"));
            };
            if c != want {
                return Err(format!(
                    "access {} ({:?}): answered {c:?}, the reference memory gives {want:?}",
                    accesses - expected.len() - 1,
                    issued.get(accesses - expected.len() - 1)
                ));
            }
            match c {
                Completion::Write { resp: 0, .. } => bin(&mut out.bins, "write OKAY"),
                Completion::Write { .. } => bin(&mut out.bins, "write SLVERR"),
                Completion::Read { resp: 0, .. } => bin(&mut out.bins, "read OKAY"),
                Completion::Read { .. } => bin(&mut out.bins, "read SLVERR"),
            }
            out.accesses += 1;
        }
        if let Some(v) = master.violations().first() {
            return Err(format!("slave port: {v}"));
        }
        if let Some(v) = memory.violations.first() {
            return Err(format!("master port: {v}"));
        }
    }
    // Let a duplicated access show, then compare what the memory saw.
    for _ in 0..200 {
        let Some(edges) = clocks.next_edge(&mut sim).map_err(err)? else {
            break;
        };
        if edges.has(MASTER_SIDE) {
            memory.drive(&mut sim, &mut rng).map_err(err)?;
            sim.eval();
            memory.observe(&mut sim).map_err(err)?;
        }
        clocks.fire(&mut sim, edges).map_err(err)?;
    }
    if memory.log != issued {
        let i = (0..memory.log.len().max(issued.len()))
            .find(|&i| memory.log.get(i) != issued.get(i))
            .unwrap_or(0);
        return Err(format!(
            "the memory saw {} accesses for {} issued; first difference at {i}: saw {:?}, \
             issued {:?}",
            memory.log.len(),
            issued.len(),
            memory.log.get(i),
            issued.get(i)
        ));
    }
    if memory.mem != reference {
        return Err("the memory differs from the reference at the end".into());
    }
    if memory.aw_w_apart > 0 {
        bin(&mut out.bins, "AW and W taken at different edges");
    }
    if issued
        .iter()
        .any(|a| matches!(a, Access::Write { strb, .. } if *strb != 15))
    {
        bin(&mut out.bins, "write with partial strobes");
    }
    Ok(out)
}

fn check(name: &str, timing: Timing, accesses: usize, seed: u64, bins: &mut BTreeMap<String, u64>) {
    let wave = wave_path(name, seed);
    match run(
        timing,
        accesses,
        seed,
        trace_always().then_some(wave.as_path()),
    ) {
        Ok(o) => {
            println!("{name:36} {:5} accesses", o.accesses);
            for (k, v) in o.bins {
                *bins.entry(k).or_default() += v;
            }
        }
        Err(e) => {
            let _ = run(timing, accesses, seed, Some(&wave));
            panic!(
                "{name}: {e}\n  seed {seed:#x} (NLB_SEED={seed:#x} cargo test -p nlb-verif \
                 --test rtl axil_cdc); waveform: {}",
                wave.display()
            );
        }
    }
}

#[test]
fn register_accesses_across_clocks() {
    let seed = seed_from_env(0xa11c);
    let (cmac, axis, axil) = (opennic::CMAC_MHZ, opennic::AXIS_MHZ, opennic::AXIL_MHZ);
    let cases = [
        ("axil_cdc 125 -> 322 MHz", Timing::Fixed(axil, cmac, 1111)),
        ("axil_cdc 322 -> 125 MHz", Timing::Fixed(cmac, axil, 1111)),
        ("axil_cdc 125 -> 250 MHz", Timing::Fixed(axil, axis, 1111)),
        // Equal clocks in phase: every edge of both at one instant.
        (
            "axil_cdc 250 = 250 MHz in phase",
            Timing::Fixed(axis, axis, 2000),
        ),
        ("axil_cdc periods redrawn, pauses", Timing::Drifting),
    ];
    let mut bins = BTreeMap::new();
    for (i, (name, timing)) in cases.into_iter().enumerate() {
        check(name, timing, 1000, seed.wrapping_add(i as u64), &mut bins);
    }
    for (k, v) in &bins {
        println!("{k:44} {v}");
    }
    for b in [
        "write OKAY",
        "write SLVERR",
        "read OKAY",
        "read SLVERR",
        "write with partial strobes",
        "AW and W taken at different edges",
        "edges of both clocks at one instant",
        "periods redrawn",
        "a clock paused with an access in flight",
    ] {
        assert!(bins.contains_key(b), "axil_cdc bin never hit: {b}");
    }
}
