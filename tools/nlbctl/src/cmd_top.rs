//! `nlbctl top`: a live view of the NIC through the running nlbd.

mod model;
mod view;

use crate::admin::ask;
use nlb_control::admin_proto as proto;
use crate::common::{self, CliError};
use model::{Order, Sample, SortKey};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Terminal;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Live view of the NIC through nlbd: traffic rates, health, connections, tables.
///
/// Refreshed every second: packets and bytes per second per VIP, forwarding rule and backend,
/// new connections per second, verdicts and the reasons behind them (punts, drops, passes),
/// health and weight per (pool, backend), connection-table occupancy, table generation.
///
/// Rates are counter differences between two samples over the time between the two counter
/// reads (nlbd's clock). Keys: `s` cycles the sort column (`p` `b` `t` `n` choose packets/s,
/// bytes/s, packets, name), `r` reverses it, `/` filters rows by name (type, then Enter; Esc
/// drops the filter), `q` or Ctrl-C quits.
///
/// For scripts, `--once` prints one view (two samples `--interval` apart) and exits; with
/// `-o json` as JSON.
///
/// Talks to nlbd's admin socket (mode 0600: run as nlbd's user).
///
/// Examples:
///
///   nlbctl top --socket /run/nlbd/nlbd.sock
///
///   nlbctl top --once -o json --interval 5 --sort bytes
#[derive(clap::Args, Debug)]
pub struct Args {
    /// nlbd's admin socket.
    #[arg(long, value_name = "PATH", default_value = proto::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Seconds between samples (0.1 to 3600).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = interval)]
    interval: f64,
    /// The column rows are sorted by.
    #[arg(long, value_enum, default_value_t = SortKey::Packets)]
    sort: SortKey,
    /// Reverse the sort.
    #[arg(long)]
    reverse: bool,
    /// Show only rows with a name (VIP, rule, target, pool, backend, reason) containing TEXT,
    /// in any case.
    #[arg(long, value_name = "TEXT", default_value = "")]
    filter: String,
    /// Print one view and exit (for scripts; with `-o json` as JSON).
    #[arg(long)]
    once: bool,
    #[command(flatten)]
    output: common::Output,
}

fn interval(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if (0.1..=3600.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s} s is outside 0.1 to 3600"))
    }
}

/// One sample: `status`, `health` and `counters`, in that order.
fn sample(socket: &Path) -> Result<Sample, CliError> {
    Ok(Sample {
        status: ask(socket, &proto::Request::Status)?,
        health: ask(socket, &proto::Request::Health)?,
        counters: ask(socket, &proto::Request::Counters)?,
    })
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let order = Order {
        key: args.sort,
        reverse: args.reverse,
        filter: args.filter.clone(),
    };
    let source = args.socket.display().to_string();
    if args.once {
        let first = sample(&args.socket)?;
        std::thread::sleep(Duration::from_secs_f64(args.interval));
        let second = sample(&args.socket)?;
        let v = model::view(&source, &second, Some(&first), &order);
        if args.output.json() {
            return common::print_json(&v);
        }
        return print_text(&view::Screen {
            view: Some(&v),
            source: &source,
            samples: 2,
            refresh_secs: args.interval,
            error: None,
            editing: None,
            keys: false,
        });
    }
    if args.output.json() {
        return Err(CliError::user(
            "error: -o json prints one view: add --once (nlbctl top --once -o json)",
        ));
    }
    if !std::io::stdout().is_terminal() {
        return Err(CliError::user(
            "error: nlbctl top draws on a terminal; for scripts use --once (and -o json)",
        ));
    }
    Live::new(args, order, source).run()
}

/// Prints a screen as plain text (`--once` without JSON): exactly what the live view draws,
/// as tall as it needs to be, as wide as the terminal (or 160 columns).
fn print_text(screen: &view::Screen) -> Result<(), CliError> {
    let width = ratatui::crossterm::terminal::size()
        .ok()
        .filter(|_| std::io::stdout().is_terminal())
        .map_or(160, |(w, _)| w.max(80));
    let height = 3 + screen
        .view
        .map_or(0, |v| view::heights(v).iter().sum::<u16>());
    let fail = |e: std::io::Error| CliError::internal(format!("internal error: {e}"));
    let mut term = Terminal::new(TestBackend::new(width, height)).map_err(fail)?;
    term.draw(|f| view::draw(f, screen)).map_err(fail)?;
    let buffer = term.backend().buffer();
    for y in 0..height {
        let line: String = (0..width)
            .filter_map(|x| buffer.cell((x, y)).map(|c| c.symbol().to_string()))
            .collect();
        outln!("{}", line.trim_end());
    }
    Ok(())
}

/// The live screen.
struct Live {
    args: Args,
    order: Order,
    source: String,
    before: Option<Sample>,
    now: Option<Sample>,
    samples: u64,
    error: Option<String>,
    /// The filter being typed, and the one to go back to on Esc.
    editing: Option<(String, String)>,
}

/// Leaves raw mode and the alternate screen however `run` ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

impl Live {
    fn new(args: Args, order: Order, source: String) -> Live {
        Live {
            args,
            order,
            source,
            before: None,
            now: None,
            samples: 0,
            error: None,
            editing: None,
        }
    }

    fn run(mut self) -> Result<(), CliError> {
        let fail = |e: std::io::Error| CliError::internal(format!("error: the terminal: {e}"));
        let mut term = ratatui::try_init().map_err(fail)?;
        let _restore = Restore;
        let every = Duration::from_secs_f64(self.args.interval);
        let mut due = Instant::now();
        let mut redraw = true;
        loop {
            if Instant::now() >= due {
                match sample(&self.args.socket) {
                    Ok(s) => {
                        self.before = self.now.replace(s);
                        self.samples += 1;
                        self.error = None;
                    }
                    Err(e) => self.error = Some(e.message.trim_start_matches("error: ").into()),
                }
                due += every;
                if due < Instant::now() {
                    due = Instant::now() + every;
                }
                redraw = true;
            }
            if redraw {
                let v = self
                    .now
                    .as_ref()
                    .map(|now| model::view(&self.source, now, self.before.as_ref(), &self.order));
                let screen = view::Screen {
                    view: v.as_ref(),
                    source: &self.source,
                    samples: self.samples,
                    refresh_secs: self.args.interval,
                    error: self.error.as_deref(),
                    editing: self.editing.as_ref().map(|(typed, _)| typed.as_str()),
                    keys: true,
                };
                term.draw(|f| view::draw(f, &screen)).map_err(fail)?;
                redraw = false;
            }
            let wait = due.saturating_duration_since(Instant::now());
            if !event::poll(wait).map_err(fail)? {
                continue;
            }
            match event::read().map_err(fail)? {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    if self.key(k) {
                        return Ok(());
                    }
                    redraw = true;
                }
                Event::Resize(..) => redraw = true,
                _ => {}
            }
        }
    }

    /// Handles a key; `true` to quit.
    fn key(&mut self, k: KeyEvent) -> bool {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return true;
        }
        if let Some((typed, previous)) = &mut self.editing {
            match k.code {
                KeyCode::Enter => self.editing = None,
                KeyCode::Esc => {
                    self.order.filter = std::mem::take(previous);
                    self.editing = None;
                }
                KeyCode::Backspace => {
                    typed.pop();
                    self.order.filter = typed.clone();
                }
                KeyCode::Char(c) => {
                    typed.push(c);
                    self.order.filter = typed.clone();
                }
                _ => {}
            }
            return false;
        }
        match k.code {
            KeyCode::Char('q') | KeyCode::Char('Q') => return true,
            KeyCode::Char('s') => self.order.key = self.order.key.next(),
            KeyCode::Char('p') => self.order.key = SortKey::Packets,
            KeyCode::Char('b') => self.order.key = SortKey::Bytes,
            KeyCode::Char('t') => self.order.key = SortKey::Total,
            KeyCode::Char('n') => self.order.key = SortKey::Name,
            KeyCode::Char('r') => self.order.reverse = !self.order.reverse,
            KeyCode::Char('/') => {
                self.editing = Some((String::new(), self.order.filter.clone()));
                self.order.filter.clear();
            }
            KeyCode::Esc => self.order.filter.clear(),
            _ => {}
        }
        false
    }
}
