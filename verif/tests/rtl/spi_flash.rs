//! `nlb_spi_flash` (RTL) against the controller model of `firmware_sim::flash`: the same
//! register sequence, with random chip-select frames, transfer widths, clock dividers and
//! flash commands (ID, status, program, erase, fast read), must give the same SPI frames (bytes
//! on MOSI and MISO per chip-select frame) and the same register reads. Behind the RTL's SPI
//! pins sits the same chip model, driven bit by bit. The block alone is driven on its
//! extension-bus port as `nlb_regs` drives it (random idle clocks); `nlb_top` is driven on its
//! AXI-Lite port (random idle cycles and back-pressure), so the flash is reached the way the
//! driver reaches it.
//!
//! Replay a failure with `NLB_SEED=<seed>`; `NLB_TRACE=1` writes a waveform.

use std::time::Duration;

use firmware_sim::flash::chip::op;
use firmware_sim::flash::{ChipTiming, FlashBlock, FlashConfig, SpiFrame, SpiNor, MT25QU01G};
use nlb_hw::blocks::spi_flash;
use nlb_verif::axil::AxiLiteMaster;
use nlb_verif::bench::{seed_from_env, trace_always, wave_path, Agent, Bench};
use nlb_verif::extbus::ExtBusMaster;
use nlb_verif::models::{SpiFlash, Top};
use nlb_verif::{Port, VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Register clock of the model and of the RTL (4 ns).
const CLK_HZ: u64 = 250_000_000;
const CLK_NS: u64 = 1_000_000_000 / CLK_HZ;

/// One step of a register sequence.
#[derive(Debug, Clone, Copy)]
enum Step {
    Write(u32, u32),
    Read(u32),
    /// Let this much time pass with the bus idle.
    Wait(Duration),
}

/// Short chip timings so erases finish in a few thousand clocks; no jitter, so both chips
/// finish at the same time.
fn timing() -> ChipTiming {
    ChipTiming {
        page_program: Duration::from_micros(20),
        subsector_erase: Duration::from_micros(60),
        sector_erase: Duration::from_micros(90),
        jitter_percent: 0,
    }
}

fn config(seed: u64) -> FlashConfig {
    FlashConfig {
        chip: MT25QU01G,
        timing: timing(),
        sys_clk_hz: CLK_HZ,
        mmio_read: Duration::ZERO,
        seed,
        ..FlashConfig::default()
    }
}

/// Builds a random but meaningful sequence of `commands` flash commands: every kind, each
/// frame shifted with random widths and dividers.
fn sequence(rng: &mut StdRng, commands: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let ctrl = |cs: bool, div: u8, width: usize| {
        let c = spi_flash::Ctrl {
            cs,
            div,
            bytes_m1: width as u8 - 1,
        };
        c.word().expect("1..=4 bytes")
    };
    // Sends `bytes` in one frame, cutting them into random-width transfers, reading after some.
    let frame = |steps: &mut Vec<Step>, rng: &mut StdRng, bytes: &[u8]| {
        let div = rng.random_range(0..4u8);
        steps.push(Step::Write(spi_flash::CTRL, ctrl(true, div, 1)));
        let mut at = 0;
        while at < bytes.len() {
            let width = rng.random_range(1..=4usize).min(bytes.len() - at);
            let div = if rng.random_bool(0.2) {
                rng.random_range(0..4u8)
            } else {
                div
            };
            steps.push(Step::Write(spi_flash::CTRL, ctrl(true, div, width)));
            // txrx: the low `width` bytes, the first one most significant.
            let mut be = [0u8; 4];
            be[4 - width..].copy_from_slice(&bytes[at..at + width]);
            let word = u32::from_be_bytes(be);
            steps.push(Step::Write(spi_flash::TXRX, word));
            if rng.random_bool(0.7) {
                steps.push(Step::Read(spi_flash::TXRX));
            }
            if rng.random_bool(0.1) {
                steps.push(Step::Read(spi_flash::STATUS));
            }
            at += width;
        }
        steps.push(Step::Write(spi_flash::CTRL, ctrl(false, div, 1)));
    };
    let addr = |rng: &mut StdRng| rng.random_range(0..MT25QU01G.size as u32) & !0xFF;
    for _ in 0..commands {
        match rng.random_range(0..7) {
            0 => frame(&mut steps, rng, &[op::RDID, 0, 0, 0, 0, 0]),
            1 => frame(&mut steps, rng, &[op::RDSR, 0, 0]),
            2 => {
                let a = addr(rng) | rng.random_range(0..256u32);
                frame(&mut steps, rng, &[op::WREN]);
                let mut cmd = vec![op::PP4];
                cmd.extend(a.to_be_bytes());
                let n = rng.random_range(1..300);
                cmd.extend((0..n).map(|_| rng.random::<u8>()));
                frame(&mut steps, rng, &cmd);
                steps.push(Step::Wait(Duration::from_micros(25)));
                frame(&mut steps, rng, &[op::RDSR, 0]);
                let mut read = vec![op::FAST_READ4];
                read.extend((a & !0xFF).to_be_bytes());
                read.push(0);
                read.extend(vec![0; 260]);
                frame(&mut steps, rng, &read);
            }
            3 => {
                frame(&mut steps, rng, &[op::WREN]);
                let mut cmd = vec![if rng.random_bool(0.5) {
                    op::SSE4
                } else {
                    op::SE4
                }];
                cmd.extend(addr(rng).to_be_bytes());
                frame(&mut steps, rng, &cmd);
                // Mid-erase: the status shows WIP on both.
                steps.push(Step::Wait(Duration::from_micros(30)));
                frame(&mut steps, rng, &[op::RDSR, 0, 0]);
                steps.push(Step::Wait(Duration::from_micros(70)));
            }
            4 => {
                let mut read = vec![op::READ4];
                read.extend(addr(rng).to_be_bytes());
                read.extend(vec![0; rng.random_range(1..64)]);
                frame(&mut steps, rng, &read);
            }
            5 => {
                // Garbage: random bytes, possibly an unknown opcode.
                let n = rng.random_range(1..12);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                frame(&mut steps, rng, &bytes);
            }
            _ => {
                // The first (factory) image: read its start.
                let mut read = vec![op::FAST_READ4, 0, 0, 0, 0, 0];
                read.extend(vec![0; 40]);
                frame(&mut steps, rng, &read);
            }
        }
        steps.push(Step::Read(spi_flash::CTRL));
    }
    steps
}

/// What a register sequence did.
#[derive(Debug, Default, PartialEq, Eq)]
struct Observed {
    /// (step index, register, value) of every read except `status`.
    reads: Vec<(usize, u32, u32)>,
    frames: Vec<SpiFrame>,
}

fn run_model(seed: u64, steps: &[Step]) -> Observed {
    let mut block = FlashBlock::new(config(seed));
    block.set_trace(true);
    let mut seen = Observed::default();
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Write(off, v) => block.write32(off, v),
            Step::Read(off) => {
                let v = block.read32(off);
                if off != spi_flash::STATUS {
                    seen.reads.push((i, off, v));
                }
            }
            Step::Wait(d) => block.advance(d),
        }
    }
    seen.frames = block.take_trace();
    seen
}

/// The flash chip behind the RTL's pins, bit by bit (SPI mode 0). It reacts to the pins as
/// they are after each clock edge, before the model settles, like a chip with no output delay.
struct ChipAgent {
    chip: SpiNor,
    sck: Port,
    cs_n: Port,
    mosi: Port,
    miso: Port,
    prev_sck: bool,
    prev_cs_n: bool,
    bits: u32,
    in_byte: u8,
    out_byte: u8,
    miso_bit: bool,
    frame: SpiFrame,
    frames: Vec<SpiFrame>,
    cycles: u64,
}

impl ChipAgent {
    fn new(sim: &Verilated, chip: SpiNor) -> Result<Self, VerifError> {
        Ok(Self {
            chip,
            sck: sim.port("spi_sck")?,
            cs_n: sim.port("spi_cs_n")?,
            mosi: sim.port("spi_mosi")?,
            miso: sim.port("spi_miso")?,
            prev_sck: false,
            prev_cs_n: true,
            bits: 0,
            in_byte: 0,
            out_byte: 0xFF,
            miso_bit: true,
            frame: SpiFrame::default(),
            frames: Vec::new(),
            cycles: 0,
        })
    }
}

impl Agent for ChipAgent {
    fn drive(&mut self, sim: &mut Verilated, _rng: &mut StdRng) -> Result<(), VerifError> {
        self.cycles += 1;
        self.chip.advance_to(self.cycles * CLK_NS);
        let sck = sim.get_bit(self.sck)?;
        let cs_n = sim.get_bit(self.cs_n)?;
        let mosi = sim.get_bit(self.mosi)?;
        if self.prev_cs_n && !cs_n {
            self.chip.select();
            self.bits = 0;
            self.frame = SpiFrame::default();
            self.out_byte = self.chip.output_byte();
            self.miso_bit = self.out_byte & 0x80 != 0;
        } else if !self.prev_cs_n && cs_n {
            self.chip.deselect();
            self.frames.push(std::mem::take(&mut self.frame));
            self.miso_bit = true;
        }
        if !cs_n {
            if !self.prev_sck && sck {
                self.in_byte = (self.in_byte << 1) | u8::from(mosi);
                self.bits += 1;
                if self.bits == 8 {
                    self.chip.input_byte(self.in_byte);
                    self.frame.mosi.push(self.in_byte);
                    self.frame.miso.push(self.out_byte);
                    self.bits = 0;
                }
            } else if self.prev_sck && !sck {
                if self.bits == 0 {
                    self.out_byte = self.chip.output_byte();
                }
                self.miso_bit = (self.out_byte << self.bits) & 0x80 != 0;
            }
        }
        self.prev_sck = sck;
        self.prev_cs_n = cs_n;
        sim.set_bit(self.miso, self.miso_bit)
    }

    fn observe(&mut self, _sim: &mut Verilated) -> Result<(), VerifError> {
        Ok(())
    }
}

/// A register master: the block's extension bus, or `nlb_top`'s AXI-Lite port.
enum Master {
    Ext(Box<ExtBusMaster>),
    Axil(Box<AxiLiteMaster>),
}

impl Master {
    fn write(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        off: u32,
        v: u32,
    ) -> Result<(), VerifError> {
        match self {
            Master::Ext(m) => m.write(bench, others, off, v),
            Master::Axil(m) => m.write(bench, others, off, v),
        }
    }

    fn read(
        &mut self,
        bench: &mut Bench,
        others: &mut [&mut dyn Agent],
        off: u32,
    ) -> Result<u32, VerifError> {
        match self {
            Master::Ext(m) => m.read(bench, others, off),
            Master::Axil(m) => m.read(bench, others, off),
        }
    }

    fn idle(&mut self, bench: &mut Bench, others: &mut [&mut dyn Agent]) -> Result<(), VerifError> {
        match self {
            Master::Ext(m) => bench.step_with(m.as_mut(), others),
            Master::Axil(m) => bench.step_with(m.as_mut(), others),
        }
    }

    fn violations(&self) -> &[String] {
        match self {
            Master::Ext(m) => m.violations(),
            Master::Axil(m) => m.violations(),
        }
    }
}

/// Which RTL runs the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dut {
    /// `nlb_spi_flash` on its extension-bus port.
    Block,
    /// `nlb_top`, through its AXI-Lite port.
    Top,
}

fn run_rtl(
    dut: Dut,
    seed: u64,
    steps: &[Step],
    wave: &std::path::Path,
) -> Result<Observed, VerifError> {
    let sim = match (dut, trace_always()) {
        (Dut::Block, true) => Verilated::with_trace::<SpiFlash>(wave)?,
        (Dut::Block, false) => Verilated::new::<SpiFlash>()?,
        (Dut::Top, true) => Verilated::with_trace::<Top>(wave)?,
        (Dut::Top, false) => Verilated::new::<Top>()?,
    };
    let mut bench = Bench::new(sim, seed ^ 0x5EED);
    bench.sim.reset(4)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut master = match dut {
        Dut::Block => Master::Ext(Box::new(ExtBusMaster::new(
            &bench.sim,
            rng.random_range(0.0..0.5),
        )?)),
        Dut::Top => Master::Axil(Box::new(AxiLiteMaster::new(
            &bench.sim,
            "s_axil",
            rng.random_range(0.0..0.5),
            rng.random_range(0.0..0.5),
        )?)),
    };
    // The same chip, with the same factory images, as the model's.
    let chip = FlashBlock::new(config(seed)).chip().clone();
    let mut agent = ChipAgent::new(&bench.sim, chip)?;
    let mut seen = Observed::default();
    for (i, s) in steps.iter().enumerate() {
        match *s {
            Step::Write(off, v) => master.write(&mut bench, &mut [&mut agent], off, v)?,
            Step::Read(off) => {
                let v = master.read(&mut bench, &mut [&mut agent], off)?;
                if off != spi_flash::STATUS {
                    seen.reads.push((i, off, v));
                }
            }
            Step::Wait(d) => {
                for _ in 0..d.as_nanos() as u64 / CLK_NS {
                    master.idle(&mut bench, &mut [&mut agent])?;
                }
            }
        }
    }
    assert!(
        master.violations().is_empty(),
        "bus violations: {:?}",
        master.violations()
    );
    seen.frames = agent.frames;
    Ok(seen)
}

fn compare(dut: Dut, seed: u64, commands: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let steps = sequence(&mut rng, commands);
    let model = run_model(seed, &steps);
    let wave = wave_path(
        if dut == Dut::Top {
            "spi_flash_top"
        } else {
            "spi_flash"
        },
        seed,
    );
    let rtl = run_rtl(dut, seed, &steps, &wave).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
    let replay = format!(
        "replay with NLB_SEED={seed:#x} NLB_TRACE=1 (waveform: {})",
        wave.display()
    );
    assert_eq!(
        rtl.frames.len(),
        model.frames.len(),
        "frame count; {replay}"
    );
    for (i, (r, m)) in rtl.frames.iter().zip(&model.frames).enumerate() {
        assert_eq!(r, m, "SPI frame {i} differs (rtl, model); {replay}");
    }
    for (r, m) in rtl.reads.iter().zip(&model.reads) {
        assert_eq!(
            r, m,
            "register read (step, offset, value) differs (rtl, model); {replay}"
        );
    }
    assert_eq!(rtl.reads.len(), model.reads.len(), "{replay}");
}

#[test]
fn rtl_and_model_shift_the_same_bytes() {
    let base = seed_from_env(0x5F1A);
    let runs = if std::env::var("NLB_SOAK").is_ok() {
        200
    } else {
        8
    };
    for i in 0..runs {
        compare(Dut::Block, base.wrapping_add(i), 24);
    }
}

/// The controller inside `nlb_top`, reached through the AXI-Lite port the driver uses: the
/// same differential (fewer commands: the whole pipeline is simulated every clock), then
/// the block's header words and reset value as the driver's discovery reads them.
#[test]
fn nlb_top_reaches_the_flash_through_its_register_port() {
    let base = seed_from_env(0x70F1);
    let runs = if std::env::var("NLB_SOAK").is_ok() {
        20
    } else {
        1
    };
    for i in 0..runs {
        compare(Dut::Top, base.wrapping_add(i), 8);
    }

    let mut bench = Bench::new(Verilated::new::<Top>().expect("model"), 2);
    bench.sim.reset(4).expect("reset");
    let mut master = AxiLiteMaster::new(&bench.sim, "s_axil", 0.3, 0.3).expect("master");
    let mut read = |off| master.read(&mut bench, &mut [], off).expect("read");
    assert_eq!(read(spi_flash::TYPE_REG), spi_flash::TYPE_WORD);
    assert_eq!(read(spi_flash::VERSION_REG), spi_flash::VERSION);
    assert_eq!(read(spi_flash::NEXT_REG), spi_flash::NEXT);
    assert_eq!(
        read(spi_flash::CTRL),
        FlashBlock::default().read32(spi_flash::CTRL)
    );
    assert_eq!(read(spi_flash::STATUS), 0);
    // A hole of the block reads 0.
    assert_eq!(read(spi_flash::BASE + 0x800), 0);
}

#[test]
fn reset_values() {
    let mut bench = Bench::new(Verilated::new::<SpiFlash>().expect("model"), 1);
    bench.sim.reset(4).expect("reset");
    let mut master = ExtBusMaster::new(&bench.sim, 0.3).expect("master");
    let mut read = |off| master.read(&mut bench, &mut [], off).expect("read");
    // The model's reset value: divider 3, chip select off, one byte per access.
    assert_eq!(
        read(spi_flash::CTRL),
        FlashBlock::default().read32(spi_flash::CTRL)
    );
    let reset = spi_flash::Ctrl {
        cs: false,
        div: 3,
        bytes_m1: 0,
    };
    assert_eq!(read(spi_flash::CTRL), reset.word().unwrap());
    assert_eq!(read(spi_flash::STATUS), 0);
    assert_eq!(read(spi_flash::TXRX), 0);
}
