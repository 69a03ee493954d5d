//! nlb-sim: the simulated nlb-offload NIC as a process.
//!
//! The device (the firmware-sim golden model at register level, or with `--engine rtl` the
//! Verilog pipeline under Verilator) is served on a Unix socket with the socket device
//! protocol, so `nlbctl load|stats|status --device sim:PATH`, `nlbd` and the driver's tests
//! talk to it exactly as to a NIC. Traffic comes from a pcap file (forwarded frames go to
//! `--out`), or from a Linux interface through AF_PACKET (`--rx IFACE --tx IFACE`), where
//! frames the local stack left with a partial TCP/UDP checksum are completed first. Frames the
//! host injects (nlbd's fragments and ICMP errors) leave the same way as forwarded ones: on
//! `--tx`, or into `--out`.

mod afpacket;
mod csum;
mod engine;
#[cfg(feature = "rtl")]
mod rtl;
mod transmit;

use clap::Parser;
use engine::Pipeline;
use firmware_sim::pcap::read_frames;
use firmware_sim::ModelDevice;
use nlb_driver::device::Device;
use nlb_driver::model::ModelHandle;
use nlb_driver::socket::{DeviceFactory, Server};
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use transmit::{InjectSource, PcapOut, Served, Transmitter, Wire};

/// The simulated NIC as a process: serves the device on a Unix socket and runs traffic
/// through it.
///
/// Start it, then load tables with `nlbctl load --device sim:PATH IMAGE` (or run
/// `nlbd --device sim:PATH`). Until a table is loaded the pipeline is disabled and passes
/// every frame to the host. Examples:
///
///   nlb-sim --socket /tmp/nlb.sock --pcap in.pcap --wait-enable --out out.pcap
///
///   nlb-sim --socket /tmp/nlb.sock --rx veth-in --tx veth-out
///
///   nlb-sim --socket /tmp/nlb.sock --engine rtl --rx veth-in --tx veth-out
///
/// The socket protocol is described in docs/driver.md.
#[derive(Parser, Debug)]
#[command(name = "nlb-sim", version)]
struct Args {
    /// Unix socket to serve the device on (a stale socket file is replaced).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// Capacity profile of the simulated NIC.
    #[arg(long, default_value = "sim", value_name = "NAME")]
    profile: String,
    /// Which NIC runs the traffic: the Rust golden model, or the Verilog pipeline under
    /// Verilator (needs a build with `--features rtl`; `sim` profile only, no flash chip).
    #[arg(long, value_enum, default_value = "model")]
    engine: Engine,
    /// Frames to receive, from a pcap file (Ethernet).
    #[arg(long, value_name = "IN.pcap", conflicts_with = "rx")]
    pcap: Option<PathBuf>,
    /// Replay the pcap again and again until the process is stopped.
    #[arg(long = "loop", requires = "pcap", conflicts_with = "loops")]
    repeat: bool,
    /// Replay the pcap this many times, then keep serving the device (the output pcap is
    /// complete once the log says "pcap done").
    #[arg(long, value_name = "N", requires = "pcap")]
    loops: Option<u64>,
    /// Send the pcap's frames at this many per second at most (as tcpreplay --pps); without
    /// it, as fast as the NIC takes them.
    #[arg(long, value_name = "PPS", requires = "pcap", value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
    /// Hold the traffic until a table has been loaded (ctrl.enable = 1).
    #[arg(long)]
    wait_enable: bool,
    /// Write the forwarded frames of the pcap run here, and the frames the host injects.
    #[arg(long, value_name = "OUT.pcap", requires = "pcap")]
    out: Option<PathBuf>,
    /// Receive frames from this interface (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE", requires = "tx")]
    rx: Option<String>,
    /// Transmit forwarded and injected frames on this interface.
    #[arg(long, value_name = "IFACE", requires = "rx")]
    tx: Option<String>,
    /// Install learned connections at once, as an infinitely fast slow path would (without
    /// it, learn events wait on the learn queue for the host). Model engine only.
    #[arg(long)]
    auto_learn: bool,
    /// Print nlb-sim's shell completion script (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<clap_complete::Shell>,
    /// Print nlb-sim's man page (roff) and exit.
    #[arg(long, exclusive = true)]
    man: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// The bit-exact Rust golden model (firmware-sim).
    Model,
    /// The Verilog pipeline under Verilator (builds with the `rtl` feature only).
    Rtl,
}

/// Frames per lock of the device: traffic and register accesses interleave at this grain.
const BURST: usize = 32;

fn main() -> ExitCode {
    if let Some(done) = generated_docs() {
        return done;
    }
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("nlb-sim: {message}");
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, String);

fn user(message: impl Into<String>) -> Failure {
    (1, message.into())
}

/// Why `--engine rtl` cannot run in this build.
#[cfg(not(feature = "rtl"))]
fn rtl_unavailable() -> Failure {
    user(
        "--engine rtl needs the Verilator model, which this nlb-sim was built without; \
         rebuild with `cargo build -p nlb-sim --features rtl` (Verilator required: \
         apt-get install verilator) or use --engine model",
    )
}

/// The NIC `args` asks for, in its three roles.
struct Nic {
    /// A new handle on the device (one per socket connection).
    device: Box<dyn Fn() -> Box<dyn Device> + Send + Sync>,
    /// The traffic side: received frames through the pipeline.
    pipeline: Box<dyn Pipeline>,
    /// The inject queue's transmit side.
    injected: Box<dyn InjectSource>,
}

fn start_nic(args: &Args) -> Result<Nic, Failure> {
    let profile = Profile::by_name(&args.profile).ok_or_else(|| {
        user(format!(
            "unknown profile `{}` (valid: {})",
            args.profile,
            Profile::names().join(", ")
        ))
    })?;
    match args.engine {
        Engine::Model => {
            let mut device = ModelDevice::new(profile);
            device.set_auto_learn(args.auto_learn);
            // The configuration flash with factory fallback and user images, so `nlbctl
            // flash`, `fw-info` and `reboot` work against the simulated NIC as against a card.
            device.set_flash(Box::new(firmware_sim::flash::FlashBlock::new(
                firmware_sim::flash::FlashConfig::default(),
            )));
            let sim = ModelHandle::from_device(device);
            let served = sim.clone();
            eprintln!("nlb-sim: golden model, {} profile", profile.name);
            Ok(Nic {
                device: Box::new(move || Box::new(served.clone()) as Box<dyn Device>),
                pipeline: Box::new(engine::Model::new(&sim)),
                injected: Box::new(engine::ModelInjected(sim)),
            })
        }
        #[cfg(not(feature = "rtl"))]
        Engine::Rtl => Err(rtl_unavailable()),
        #[cfg(feature = "rtl")]
        Engine::Rtl => {
            if profile.name != "sim" {
                return Err(user(format!(
                    "--engine rtl runs the RTL built with the `sim` profile's table depths, \
                     not `{}`; leave out --profile",
                    profile.name
                )));
            }
            if args.auto_learn {
                return Err(user(
                    "--auto-learn is a back door of the golden model; with --engine rtl the \
                     learned connections wait on the learn queue for the host (run nlbd)",
                ));
            }
            let dev = rtl::SharedRtl::start().map_err(|e| (2, e))?;
            let served = dev.clone();
            eprintln!("nlb-sim: Verilator RTL (nlb_top), sim profile");
            Ok(Nic {
                device: Box::new(move || Box::new(served.clone()) as Box<dyn Device>),
                pipeline: Box::new(rtl::Rtl::new(&dev)),
                injected: Box::new(dev),
            })
        }
    }
}

/// Where the traffic comes from; opened before the socket serves, so that a bad file or
/// interface fails the start.
enum Traffic {
    Pcap {
        frames: Vec<firmware_sim::pcap::Frame>,
        out: Arc<Mutex<Option<PcapOut>>>,
    },
    Interface(Arc<afpacket::Port>),
    None,
}

fn open_traffic(args: &Args) -> Result<Traffic, Failure> {
    if let Some(pcap) = &args.pcap {
        let file = std::fs::File::open(pcap)
            .map_err(|e| user(format!("cannot open {}: {e}", pcap.display())))?;
        let frames = read_frames(std::io::BufReader::new(file))
            .map_err(|e| user(format!("{}: {e}", pcap.display())))?;
        let out = match &args.out {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .map_err(|e| user(format!("cannot create {}: {e}", p.display())))?;
                Some(PcapOut::new(f).map_err(|e| user(format!("{}: {e}", p.display())))?)
            }
            None => None,
        };
        return Ok(Traffic::Pcap {
            frames,
            out: Arc::new(Mutex::new(out)),
        });
    }
    if let (Some(rx), Some(tx)) = (&args.rx, &args.tx) {
        let port = afpacket::Port::open(rx, tx).map_err(|e| user(e.to_string()))?;
        return Ok(Traffic::Interface(Arc::new(port)));
    }
    Ok(Traffic::None)
}

fn run(args: Args) -> Result<(), Failure> {
    let nic = start_nic(&args)?;
    let traffic = open_traffic(&args)?;
    let wire = match &traffic {
        Traffic::Pcap { out, .. } => Wire::Pcap(out.clone()),
        Traffic::Interface(port) => Wire::Interface(port.clone()),
        Traffic::None => Wire::Pcap(Arc::new(Mutex::new(None))),
    };
    let tx = Arc::new(Transmitter::new(nic.injected, wire));
    let device = nic.device;
    let factory: Arc<DeviceFactory> =
        Arc::new(move || Box::new(Served::new(device(), tx.clone())) as Box<dyn Device>);
    let server = Server::bind(&args.socket, factory)
        .map_err(|e| user(format!("cannot serve on {}: {e}", args.socket.display())))?;
    eprintln!("nlb-sim: serving on {}", args.socket.display());

    let replay = Replay {
        passes: if args.repeat {
            None
        } else {
            Some(args.loops.unwrap_or(1))
        },
        rate: args.rate,
        wait: args.wait_enable,
    };
    let pipeline = nic.pipeline;
    match traffic {
        Traffic::Pcap { frames, out } => {
            std::thread::spawn(move || {
                if let Err(e) = pcap_traffic(pipeline, frames, &out, replay) {
                    fatal(&e);
                }
            });
        }
        Traffic::Interface(port) => {
            std::thread::spawn(move || {
                if let Err(e) = interface_traffic(pipeline, &port, replay.wait) {
                    fatal(&e);
                }
            });
        }
        Traffic::None => {}
    }
    server
        .run()
        .map_err(|e| (2, format!("serving {}: {e}", args.socket.display())))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The traffic stopped: a NIC without traffic is no NIC, so the process ends.
fn fatal(why: &str) {
    eprintln!("nlb-sim: traffic stopped: {why}");
    std::process::exit(2);
}

fn wait_for_enable(nic: &mut dyn Pipeline) -> Result<(), String> {
    while !nic.enabled()? {
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Tally {
    packets: u64,
    forward: u64,
    punt: u64,
    drop: u64,
    pass: u64,
}

impl Tally {
    fn count(&mut self, v: Verdict) {
        self.packets += 1;
        match v {
            Verdict::Forward => self.forward += 1,
            Verdict::Punt => self.punt += 1,
            Verdict::Drop => self.drop += 1,
            Verdict::Pass => self.pass += 1,
        }
    }
}

/// How the pcap is replayed.
#[derive(Debug, Clone, Copy)]
struct Replay {
    /// Passes over the file; `None`: until the process is stopped.
    passes: Option<u64>,
    /// Frames per second at most.
    rate: Option<u64>,
    /// Wait for `ctrl.enable` first.
    wait: bool,
}

fn pcap_traffic(
    mut nic: Box<dyn Pipeline>,
    frames: Vec<firmware_sim::pcap::Frame>,
    out: &Mutex<Option<PcapOut>>,
    replay: Replay,
) -> Result<(), String> {
    if replay.wait {
        wait_for_enable(nic.as_mut())?;
    }
    let mut tally = Tally::default();
    let start = Instant::now();
    let mut refs: Vec<&[u8]> = Vec::with_capacity(BURST);
    // With a rate, bursts are smaller so the pace is even; each burst waits for its time.
    let burst = match replay.rate {
        Some(r) => (r / 1000).clamp(1, BURST as u64) as usize,
        None => BURST,
    };
    let mut pass = 0u64;
    loop {
        pass += 1;
        for chunk in frames.chunks(burst) {
            if let Some(rate) = replay.rate {
                let due = Duration::from_secs_f64(tally.packets as f64 / rate as f64);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            refs.clear();
            refs.extend(chunk.iter().map(|f| f.data.as_slice()));
            let mut w = lock(out);
            nic.run(&refs, &mut |i, verdict, frame| {
                tally.count(verdict);
                if verdict == Verdict::Forward {
                    if let (Some(o), Some(f)) = (w.as_mut(), chunk.get(i)) {
                        if let Err(e) = o.write(f.timestamp, frame) {
                            eprintln!("nlb-sim: writing the output pcap: {e}");
                            *w = None;
                        }
                    }
                }
            })?;
        }
        if replay.passes.is_some_and(|n| pass >= n) || frames.is_empty() {
            break;
        }
    }
    // The file stays open for the frames the host injects later.
    if let Some(o) = lock(out).as_mut() {
        if let Err(e) = o.flush() {
            eprintln!("nlb-sim: writing the output pcap: {e}");
        }
    }
    eprintln!(
        "nlb-sim: pcap done: {} packets in {:.3} s: {} forwarded, {} punted, {} dropped, {} passed",
        tally.packets,
        start.elapsed().as_secs_f64(),
        tally.forward,
        tally.punt,
        tally.drop,
        tally.pass
    );
    Ok(())
}

/// Largest frame taken from an interface: a jumbo frame with two VLAN tags fits; longer
/// ones (GSO super-frames the local stack did not segment) are dropped and counted.
const RX_BUFFER: usize = 16384;

/// Receives frames from the interface (a burst of whatever is waiting, so the RTL gets them
/// back to back), completes partial checksums, runs them and transmits what is forwarded.
fn interface_traffic(
    mut nic: Box<dyn Pipeline>,
    port: &afpacket::Port,
    wait: bool,
) -> Result<(), String> {
    if wait {
        wait_for_enable(nic.as_mut())?;
    }
    let mut bufs = vec![vec![0u8; RX_BUFFER]; BURST];
    let mut lens = [0usize; BURST];
    let mut stats = RxStats::default();
    let io = |e: std::io::Error| format!("receiving: {e}");
    loop {
        let mut n = 0;
        while n < BURST {
            let r = if n == 0 {
                port.recv(&mut bufs[0]).map(Some).map_err(io)?
            } else {
                match port.try_recv(&mut bufs[n]).map_err(io)? {
                    Some(r) => Some(r),
                    None => break,
                }
            };
            let Some(r) = r else { break };
            if let Some(len) = stats.accept(r, &mut bufs[n]) {
                lens[n] = len;
                n += 1;
            }
        }
        if n == 0 {
            continue;
        }
        let refs: [&[u8]; BURST] = std::array::from_fn(|i| &bufs[i][..lens[i]]);
        let mut sent = Ok(());
        nic.run(&refs[..n], &mut |_, verdict, frame| {
            // Punts wait on the punt queue for the host; drops and passes end here.
            if verdict == Verdict::Forward && sent.is_ok() {
                sent = port.send(frame);
            }
        })?;
        sent.map_err(|e| format!("transmitting: {e}"))?;
    }
}

/// What the receive side did to frames before the NIC saw them.
#[derive(Debug, Default)]
struct RxStats {
    completed: u64,
    oversized: u64,
}

impl RxStats {
    /// The length of a frame to run, after completing its checksum; `None` for a frame that
    /// did not fit the buffer.
    fn accept(&mut self, r: afpacket::Received, buf: &mut [u8]) -> Option<usize> {
        if r.wire_len > r.len {
            self.oversized += 1;
            if self.oversized.is_power_of_two() {
                eprintln!(
                    "nlb-sim: dropped a {}-byte frame larger than the {RX_BUFFER}-byte receive \
                     buffer ({} so far; a GSO frame? turn off TSO/GSO on the sender)",
                    r.wire_len, self.oversized
                );
            }
            return None;
        }
        if r.csum_not_ready && csum::complete_l4_checksum(&mut buf[..r.len]).is_ok() {
            self.completed += 1;
            if self.completed == 1 {
                eprintln!(
                    "nlb-sim: completing the partial TCP/UDP checksums of frames from the local \
                     stack (CHECKSUM_PARTIAL)"
                );
            }
        }
        Some(r.len)
    }
}

/// `--completions SHELL` and `--man`: generated from [`Args`], printed to stdout. Both are
/// exclusive (alone on the command line), so a command of their own parses them without the
/// required options; any other command line is [`Args`]'s to parse.
fn generated_docs() -> Option<ExitCode> {
    use clap::CommandFactory as _;
    use std::io::Write as _;
    #[derive(Parser)]
    #[command(
        name = "nlb-sim",
        disable_help_flag = true,
        disable_version_flag = true
    )]
    struct Docs {
        #[arg(long, value_name = "SHELL")]
        completions: Option<clap_complete::Shell>,
        #[arg(long)]
        man: bool,
    }
    let docs = match Docs::try_parse() {
        Ok(d) => d,
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidValue => e.exit(),
        Err(_) => return None,
    };
    let mut out = Vec::new();
    if let Some(shell) = docs.completions {
        clap_complete::generate(shell, &mut Args::command(), "nlb-sim", &mut out);
    } else if docs.man {
        if let Err(e) = clap_mangen::Man::new(Args::command()).render(&mut out) {
            eprintln!("nlb-sim: cannot render the man page: {e}");
            return Some(ExitCode::from(2));
        }
    } else {
        return None;
    }
    let _ = std::io::stdout().write_all(&out);
    Some(ExitCode::SUCCESS)
}
