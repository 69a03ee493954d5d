//! Benchmark: flash a 64 MiB bitstream into the simulated card (MT25QU02G behind the
//! `spi_flash` controller model) and print throughput in simulated and wall time, and register
//! accesses per byte.
//!
//! ```text
//! cargo run --release -p nlb-driver --example flash_bench [MIB]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_sim::flash::bitstream::synthetic;
use firmware_sim::flash::{FlashBlock, FlashConfig};
use nlb_driver::device::{Device, DeviceError};
use nlb_driver::flash::{flash_image, reboot, Bitstream, FlashOptions, Phase, RebootOptions};
use nlb_hw::blocks::fw_id;

/// The flash blocks plus the firmware-ID registers the tools read; counts accesses and
/// publishes the simulated clock so the progress callback can time phases.
struct Card {
    flash: FlashBlock,
    reads: u64,
    writes: u64,
    clock_ns: Arc<AtomicU64>,
}

impl Card {
    fn publish(&self) {
        self.clock_ns
            .store(self.flash.now().as_nanos() as u64, Ordering::Relaxed);
    }
}

impl Device for Card {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.reads += 1;
        if !self.flash.is_up() {
            return Ok(u32::MAX);
        }
        let v = if FlashBlock::handles(offset) {
            self.flash.read32(offset)
        } else {
            match offset {
                fw_id::TYPE_REG => fw_id::TYPE_WORD,
                fw_id::VERSION_REG => fw_id::VERSION,
                fw_id::REGMAP_VERSION => nlb_hw::REGMAP_VERSION,
                fw_id::DESIGN_VERSION => nlb_hw::DESIGN_VERSION,
                fw_id::BUILD_ID => self.flash.boot_info().usr_access.unwrap_or(0),
                fw_id::BOARD_ID => 0x5100,
                fw_id::PART_ID => self.flash.part_id(),
                _ => 0,
            }
        };
        self.publish();
        Ok(v)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.writes += 1;
        if FlashBlock::handles(offset) {
            self.flash.write32(offset, value);
        }
        Ok(())
    }

    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        self.flash.advance(d);
        self.publish();
        Ok(())
    }

    fn describe(&self) -> String {
        "bench:flash".into()
    }
}

fn main() {
    let mib: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let clock_ns = Arc::new(AtomicU64::new(0));
    let mut card = Card {
        flash: FlashBlock::new(FlashConfig::default()),
        reads: 0,
        writes: 0,
        clock_ns: clock_ns.clone(),
    };
    let idcode = card.flash.part_id();
    // Frame words so the whole file is `mib` MiB (the packets around the frames are 32 words).
    let words = (mib << 18) - 32;
    let image = Bitstream::parse(synthetic(idcode, Some(0xBE4C_0001), words, 42))
        .unwrap_or_else(|e| panic!("synthetic bitstream: {e}"));
    let bytes = image.data.len() as f64;

    let mut phases: Vec<(Phase, Instant, u64)> = Vec::new();
    let wall = Instant::now();
    let sim0 = card.flash.now();
    let report = flash_image(&mut card, &image, &FlashOptions::default(), &mut |p| {
        if phases.last().map(|x| x.0) != Some(p.phase) {
            phases.push((p.phase, Instant::now(), clock_ns.load(Ordering::Relaxed)));
        }
    })
    .unwrap_or_else(|e| panic!("flash: {e}"));
    let wall_s = wall.elapsed().as_secs_f64();
    let sim_s = (card.flash.now() - sim0).as_secs_f64();
    let accesses = card.reads + card.writes;

    println!("flash {mib} MiB image into {} (sim)", report.chip.name);
    println!("  bytes                  {}", report.bytes);
    println!("  CRC-32                 {:08x}", report.crc32);
    println!(
        "  simulated time         {sim_s:.1} s  ({:.2} MB/s)",
        bytes / sim_s / 1e6
    );
    println!(
        "  wall time              {wall_s:.2} s  ({:.1} MB/s)",
        bytes / wall_s / 1e6
    );
    println!(
        "  register accesses      {accesses} ({} reads, {} writes) = {:.3} per byte",
        card.reads,
        card.writes,
        accesses as f64 / bytes
    );
    println!(
        "  SPI bytes shifted      {} ({:.3} per image byte)",
        card.flash.stats().spi_bytes,
        card.flash.stats().spi_bytes as f64 / bytes
    );
    let end = (Instant::now(), clock_ns.load(Ordering::Relaxed));
    for (i, (phase, w, s)) in phases.iter().enumerate() {
        let (nw, ns) = phases.get(i + 1).map_or(end, |n| (n.1, n.2));
        println!(
            "  phase {:<8} simulated {:>7.1} s  wall {:>6.2} s",
            phase.name(),
            (ns - s) as f64 / 1e9,
            nw.duration_since(*w).as_secs_f64()
        );
    }
    let r = reboot(&mut card, &RebootOptions::default()).unwrap_or_else(|e| panic!("reboot: {e}"));
    println!(
        "  reboot                 back after {:?} (simulated), build {:#010x}",
        r.took, r.after.build_id
    );
}
