//! Progress of long operations (reading a NIC's tables back, a full load, a conntrack dump):
//! a bar on stderr, drawn only when stderr is a terminal, so scripts and logs see nothing of it.
//! `flash` draws its own bar the same way (cmd_flash.rs).

use nlb_driver::device::{Device, DeviceError, RegOp};
use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

/// A progress bar: `what [#####     ]  42% 1234/5678 unit`.
#[derive(Debug)]
pub struct Bar {
    tty: bool,
    what: String,
    unit: &'static str,
    last_draw: Option<Instant>,
    drawn: bool,
}

impl Bar {
    /// A bar for `what` counting `unit`s; silent unless stderr is a terminal.
    pub fn new(what: &str, unit: &'static str) -> Bar {
        Bar {
            tty: std::io::stderr().is_terminal(),
            what: what.to_string(),
            unit,
            last_draw: None,
            drawn: false,
        }
    }

    /// Starts another phase on the same line (`reading` then `writing`).
    pub fn phase(&mut self, what: &str) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
        self.what = what.to_string();
        self.last_draw = None;
    }

    /// `done` of `total` (at most ten redraws a second, and always the last one).
    pub fn update(&mut self, done: u64, total: u64) {
        if !self.tty {
            return;
        }
        let due = self
            .last_draw
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if !due && done < total {
            return;
        }
        self.last_draw = Some(Instant::now());
        let done = done.min(total);
        const WIDTH: u64 = 40;
        let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
        let percent = (done * 100).checked_div(total).unwrap_or(100);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<8} [{}{}] {:>3}% {done}/{total} {}",
            self.what,
            "#".repeat(filled as usize),
            " ".repeat((WIDTH - filled) as usize),
            percent,
            self.unit
        );
        let _ = err.flush();
        self.drawn = true;
    }

    /// Ends the bar's line (if one was drawn).
    pub fn finish(&mut self) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
    }
}

/// A device that counts the entries its register batches move through a table window and
/// draws them on a [`Bar`]: every entry read or written through a window is exactly one write
/// of the window's `cmd` register (READ_AT or WRITE_AT, docs/regmap.md), whatever else the
/// batch holds.
pub struct WindowProgress<'a> {
    inner: &'a mut dyn Device,
    cmd_register: u32,
    /// Entries moved in this phase.
    pub done: u64,
    /// Entries this phase moves.
    pub total: u64,
    /// The bar.
    pub bar: Bar,
}

impl std::fmt::Debug for WindowProgress<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowProgress")
            .field("device", &self.inner.describe())
            .field("done", &self.done)
            .field("total", &self.total)
            .finish()
    }
}

impl<'a> WindowProgress<'a> {
    /// Watches the window whose `cmd` register is at `cmd_register`.
    pub fn new(inner: &'a mut dyn Device, cmd_register: u32, bar: Bar) -> Self {
        WindowProgress {
            inner,
            cmd_register,
            done: 0,
            total: 0,
            bar,
        }
    }

    /// Starts a phase of `total` entries.
    pub fn phase(&mut self, what: &str, total: u64) {
        self.bar.phase(what);
        self.done = 0;
        self.total = total;
    }
}

impl Device for WindowProgress<'_> {
    fn read32(&mut self, offset: u32) -> Result<u32, DeviceError> {
        self.inner.read32(offset)
    }

    fn write32(&mut self, offset: u32, value: u32) -> Result<(), DeviceError> {
        self.inner.write32(offset, value)?;
        if offset == self.cmd_register {
            self.done += 1;
            self.bar.update(self.done, self.total.max(self.done));
        }
        Ok(())
    }

    fn write_bulk(&mut self, offset: u32, words: &[u32]) -> Result<(), DeviceError> {
        self.inner.write_bulk(offset, words)
    }

    fn read_bulk(&mut self, offset: u32, out: &mut [u32]) -> Result<(), DeviceError> {
        self.inner.read_bulk(offset, out)
    }

    fn run_batch(&mut self, ops: &[RegOp], reads: &mut Vec<u32>) -> Result<(), DeviceError> {
        self.inner.run_batch(ops, reads)?;
        let cmds = ops
            .iter()
            .filter(|op| matches!(op, RegOp::Write(at, _) if *at == self.cmd_register))
            .count() as u64;
        if cmds > 0 {
            self.done += cmds;
            self.bar.update(self.done, self.total.max(self.done));
        }
        Ok(())
    }

    fn wait(&mut self, d: Duration) -> Result<(), DeviceError> {
        self.inner.wait(d)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
