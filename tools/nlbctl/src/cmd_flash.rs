//! `nlbctl flash`: write a bitstream into a multiboot slot of the card's configuration flash.
//! Also the helpers `fw-info` and `reboot` share: opening the device, error mapping, slots.

use crate::common::CliError;
use nlb_driver::flash::{
    bitstream, flash_image, reboot, Bitstream, FlashError, FlashOptions, Phase, Progress,
    RebootOptions, Slot,
};
use nlb_driver::Device;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Write a bitstream (Vivado `.bit` or raw `.bin`) into the card's configuration flash.
///
/// The card keeps two images: the fallback in segment 0, which it boots at power-on and
/// whenever the user image fails, and the user image in segment 1. `flash` writes the user
/// slot: it checks that the bitstream is for the card's FPGA (from the firmware-ID block),
/// erases the slot, programs it, reads everything back, re-programs any 4 KiB that differs
/// (a few times), and only then writes the slot's validity marker. An interrupted flash
/// (power cut, crash, Ctrl-C) leaves the marker erased, so the card boots the fallback and can
/// be flashed again. Prints the image's CRC-32 at the end (the same as `crc32 FILE.bin`).
///
/// Flash the user slot: `nlbctl flash --device pci:0000:03:00.0 build/nlb_top.bit`
///
/// Flash, reboot into it and check it runs: `nlbctl flash --device sim:/run/nlb.sock
/// nlb_top.bin --reboot`
///
/// Replace the golden image (careful): `nlbctl flash --device pci:0000:03:00.0 golden.bit
/// --slot fallback --force`
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The card: pci:DDDD:BB:DD.F (bound to vfio-pci) or sim:PATH (an nlb-sim socket).
    #[arg(long, value_name = "SPEC")]
    device: String,
    /// The bitstream: a Vivado .bit (header checked) or a raw .bin.
    file: PathBuf,
    /// Which slot to write. `fallback` needs --force: a failed write there can leave the card
    /// unbootable (JTAG recovery).
    #[arg(long, value_enum, default_value = "user")]
    slot: SlotArg,
    /// Flash even when the bitstream's FPGA part does not match the card's (or cannot be
    /// told); required with --slot fallback.
    #[arg(long)]
    force: bool,
    /// Re-programming attempts for a 4 KiB subsector that reads back wrong.
    #[arg(long, default_value_t = 3, value_name = "N")]
    retries: u32,
    /// Reboot into the new image afterwards and check that it runs.
    #[arg(long)]
    reboot: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// A multiboot slot on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotArg {
    /// Segment 1, the image the card normally runs.
    User,
    /// Segment 0, the golden image the card falls back to.
    Fallback,
}

impl From<SlotArg> for Slot {
    fn from(s: SlotArg) -> Slot {
        match s {
            SlotArg::User => Slot::User,
            SlotArg::Fallback => Slot::Fallback,
        }
    }
}

/// Opens `--device`.
pub fn open(spec: &str) -> Result<Box<dyn Device>, CliError> {
    nlb_driver::open_device(spec).map_err(|e| CliError::user(format!("error: {e}")))
}

/// A refusal of `flash`: one about the bitstream's content names the file (and the card when
/// it compares the two); any other goes to [`flash_error`].
fn flash_run_error(file: &str, device: &str, e: FlashError) -> CliError {
    match e {
        FlashError::Bitstream(_) | FlashError::Incomplete => {
            CliError::user(format!("error: {file}: {e}"))
        }
        FlashError::PartMismatch { .. }
        | FlashError::UnknownTargetPart { .. }
        | FlashError::TooLarge { .. } => {
            CliError::user(format!("error: {file} does not suit {device}: {e}"))
        }
        e => flash_error(device, e),
    }
}

/// Exit status for a flash error: the user's input or choice (1), or the card (2).
pub fn flash_error(device: &str, e: FlashError) -> CliError {
    let message = format!("error: {device}: {e}");
    match e {
        FlashError::Bitstream(_)
        | FlashError::PartMismatch { .. }
        | FlashError::UnknownTargetPart { .. }
        | FlashError::Incomplete
        | FlashError::FallbackNeedsForce
        | FlashError::TooLarge { .. } => CliError::user(message),
        _ => CliError::internal(message),
    }
}

/// `1.0` from a `fw_id.design_version` word (major.minor).
pub fn version(v: u32) -> String {
    let v = nlb_hw::blocks::fw_id::DesignVersion::from_word(v);
    format!("{}.{}", v.major, v.minor)
}

/// A part name and IDCODE for humans.
pub fn part(idcode: u32) -> String {
    match bitstream::part_of_idcode(idcode) {
        Some(name) => format!("{name} (IDCODE {idcode:#010x})"),
        None => format!("IDCODE {idcode:#010x}"),
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let path = args.file.display().to_string();
    let bytes = std::fs::read(&args.file)
        .map_err(|e| CliError::user(format!("error: cannot read {path}: {e}")))?;
    let image =
        Bitstream::parse(bytes).map_err(|e| CliError::user(format!("error: {path}: {e}")))?;
    describe(&path, &image);
    let mut dev = open(&args.device)?;
    let opts = FlashOptions {
        slot: args.slot.into(),
        force: args.force,
        max_retries: args.retries,
    };
    let mut bar = ProgressBar::new(args.quiet);
    let started = Instant::now();
    let result = flash_image(dev.as_mut(), &image, &opts, &mut |p| bar.update(p));
    bar.finish();
    let report = result.map_err(|e| flash_run_error(&path, &args.device, e))?;
    for addr in &report.repaired {
        outln!("re-programmed the 4 KiB at {addr:#010x} after a read-back mismatch");
    }
    outln!(
        "wrote {} bytes to the {} slot at {:#010x} of {} in {:.1} s ({} register reads, {} writes)",
        report.bytes,
        report.slot.name(),
        report.addr,
        report.chip.name,
        started.elapsed().as_secs_f64(),
        report.stats.reads,
        report.stats.writes
    );
    outln!("CRC-32 {:08x}", report.crc32);
    if args.reboot {
        let r = reboot(
            dev.as_mut(),
            &RebootOptions {
                slot: opts.slot,
                ..RebootOptions::default()
            },
        )
        .map_err(|e| flash_error(&args.device, e))?;
        outln!(
            "rebooted: back after {:.1} s, build {:#010x}, running the {} image",
            r.took.as_secs_f64(),
            r.after.build_id,
            if r.after.boot.fallback {
                "fallback"
            } else {
                "user"
            }
        );
    }
    Ok(())
}

fn describe(path: &str, image: &Bitstream) {
    match &image.header {
        Some(h) => outln!(
            "{path}: design {} for {}, built {} {}, {} bytes of configuration data",
            h.design,
            h.part,
            h.date,
            h.time,
            h.data_len
        ),
        None => outln!("{path}: raw bitstream, {} bytes", image.data.len()),
    }
    if let Some(id) = image.idcode {
        outln!("  targets {}", part(id));
    }
    if let Some(v) = image.usr_access {
        outln!("  USR_ACCESS {v:#010x}");
    }
}

/// A progress bar on stderr when it is a terminal; otherwise one line per phase.
struct ProgressBar {
    quiet: bool,
    tty: bool,
    last_draw: Option<Instant>,
    phase: Option<Phase>,
    drawn: bool,
}

impl ProgressBar {
    fn new(quiet: bool) -> Self {
        Self {
            quiet,
            tty: std::io::stderr().is_terminal(),
            last_draw: None,
            phase: None,
            drawn: false,
        }
    }

    fn update(&mut self, p: Progress) {
        if self.quiet {
            return;
        }
        let new_phase = self.phase != Some(p.phase);
        self.phase = Some(p.phase);
        let mut err = std::io::stderr().lock();
        if !self.tty {
            if new_phase {
                let _ = writeln!(err, "{} ...", p.phase.name());
            }
            return;
        }
        let due = self
            .last_draw
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if !(new_phase || due || p.done == p.total) {
            return;
        }
        self.last_draw = Some(Instant::now());
        const WIDTH: u64 = 40;
        let filled = (p.done * WIDTH)
            .checked_div(p.total)
            .unwrap_or(WIDTH)
            .min(WIDTH);
        let percent = (p.done * 100).checked_div(p.total).unwrap_or(100);
        let _ = write!(
            err,
            "\r{:<8} [{}{}] {:>3}% {:>8.1}/{:.1} MiB",
            p.phase.name(),
            "#".repeat(filled as usize),
            " ".repeat((WIDTH - filled) as usize),
            percent,
            p.done as f64 / 1048576.0,
            p.total as f64 / 1048576.0
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn finish(&mut self) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
        }
    }
}
