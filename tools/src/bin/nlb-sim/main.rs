//! nlb-sim: the simulated nlb-offload NIC as a process.
//!
//! The device (the firmware-sim golden model at register level) is served on a Unix socket
//! with the socket device protocol, so `nlbctl load|stats|status --device sim:PATH`, `nlbd`
//! and the driver's tests talk to it exactly as to a NIC. Traffic comes from a pcap file
//! (forwarded frames go to `--out`), or from a Linux interface through AF_PACKET
//! (`--rx IFACE --tx IFACE`).

mod afpacket;

use clap::Parser;
use firmware_sim::pcap::{read_frames, FrameWriter};
use firmware_sim::{BatchOutput, SimDevice};
use nlb_driver::device::Device;
use nlb_driver::sim::{lock, SharedSim, Sim};
use nlb_driver::socket::Server;
use nlb_hw::blocks::ctrl;
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The simulated NIC as a process: serves the device on a Unix socket and runs traffic
/// through it.
///
/// Start it, then load tables with `nlbctl load --device sim:PATH IMAGE`. Until a table is
/// loaded the pipeline is disabled and passes every frame to the host. Examples:
///
///   nlb-sim --socket /tmp/nlb.sock --pcap in.pcap --wait-enable --out out.pcap
///
///   nlb-sim --socket /tmp/nlb.sock --rx veth-in --tx veth-out
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
    /// Which NIC model runs: the Rust golden model, or the Verilator RTL.
    #[arg(long, value_enum, default_value = "model")]
    engine: Engine,
    /// Frames to receive, from a pcap file (Ethernet).
    #[arg(long, value_name = "IN.pcap", conflicts_with = "rx")]
    pcap: Option<PathBuf>,
    /// Replay the pcap again and again until the process is stopped.
    #[arg(long = "loop", requires = "pcap")]
    repeat: bool,
    /// Hold the traffic until a table has been loaded (ctrl.enable = 1).
    #[arg(long)]
    wait_enable: bool,
    /// Write the forwarded frames of the pcap run here.
    #[arg(long, value_name = "OUT.pcap", requires = "pcap")]
    out: Option<PathBuf>,
    /// Receive frames from this interface (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE", requires = "tx")]
    rx: Option<String>,
    /// Transmit forwarded frames on this interface.
    #[arg(long, value_name = "IFACE", requires = "rx")]
    tx: Option<String>,
    /// Install learned connections at once, as an infinitely fast slow path would (without
    /// it, learn events wait on the learn queue for the host).
    #[arg(long)]
    auto_learn: bool,
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

fn run(args: Args) -> Result<(), Failure> {
    if args.engine == Engine::Rtl {
        return Err(user(
            "this nlb-sim was built without the Verilator RTL engine; use --engine model",
        ));
    }
    let profile = Profile::by_name(&args.profile).ok_or_else(|| {
        user(format!(
            "unknown profile `{}` (valid: {})",
            args.profile,
            Profile::names().join(", ")
        ))
    })?;
    let mut device = SimDevice::new(profile);
    device.set_auto_learn(args.auto_learn);
    // The configuration flash with factory fallback and user images, so `nlbctl flash`,
    // `fw-info` and `reboot` work against the simulated NIC as against a card.
    device.set_flash(Box::new(firmware_sim::flash::FlashBlock::new(
        firmware_sim::flash::FlashConfig::default(),
    )));
    let sim = Sim::from_device(device);
    let served = sim.clone();
    let server = Server::bind(
        &args.socket,
        Arc::new(move || Box::new(served.clone()) as Box<dyn Device>),
    )
    .map_err(|e| user(format!("cannot serve on {}: {e}", args.socket.display())))?;
    eprintln!(
        "nlb-sim: {} profile, serving on {}",
        profile.name,
        args.socket.display()
    );

    if let Some(pcap) = &args.pcap {
        let file = std::fs::File::open(pcap)
            .map_err(|e| user(format!("cannot open {}: {e}", pcap.display())))?;
        let frames = read_frames(std::io::BufReader::new(file))
            .map_err(|e| user(format!("{}: {e}", pcap.display())))?;
        let out = match &args.out {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .map_err(|e| user(format!("cannot create {}: {e}", p.display())))?;
                Some(
                    FrameWriter::new(std::io::BufWriter::new(f))
                        .map_err(|e| user(format!("{}: {e}", p.display())))?,
                )
            }
            None => None,
        };
        let shared = sim.shared();
        let (repeat, wait) = (args.repeat, args.wait_enable);
        std::thread::spawn(move || pcap_traffic(shared, frames, out, repeat, wait));
    } else if let (Some(rx), Some(tx)) = (&args.rx, &args.tx) {
        let port = afpacket::Port::open(rx, tx).map_err(|e| user(e.to_string()))?;
        let shared = sim.shared();
        let wait = args.wait_enable;
        std::thread::spawn(move || {
            if let Err(e) = interface_traffic(shared, port, wait) {
                eprintln!("nlb-sim: traffic stopped: {e}");
            }
        });
    }
    server
        .run()
        .map_err(|e| (2, format!("serving {}: {e}", args.socket.display())))
}

fn wait_for_enable(sim: &SharedSim) {
    while lock(sim).read32(ctrl::ENABLE).unwrap_or(0) & 1 == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
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

fn pcap_traffic<W: std::io::Write>(
    sim: SharedSim,
    frames: Vec<firmware_sim::pcap::Frame>,
    mut out: Option<FrameWriter<W>>,
    repeat: bool,
    wait: bool,
) {
    if wait {
        wait_for_enable(&sim);
    }
    let mut batch = BatchOutput::new();
    let mut tally = Tally::default();
    let start = Instant::now();
    loop {
        for chunk in frames.chunks(BURST) {
            let refs: Vec<&[u8]> = chunk.iter().map(|f| f.data.as_slice()).collect();
            lock(&sim).receive_batch(&refs, &mut batch);
            for (i, (r, f)) in batch.results.iter().zip(chunk).enumerate() {
                tally.count(r.verdict);
                if r.verdict == Verdict::Forward {
                    if let Some(w) = out.as_mut() {
                        if let Err(e) = w.write(f.timestamp, batch.frame(i)) {
                            eprintln!("nlb-sim: writing the output pcap: {e}");
                            out = None;
                        }
                    }
                }
            }
        }
        if !repeat || frames.is_empty() {
            break;
        }
    }
    if let Some(w) = out {
        let mut inner = w.into_inner();
        let _ = std::io::Write::flush(&mut inner);
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
}

fn interface_traffic(sim: SharedSim, port: afpacket::Port, wait: bool) -> std::io::Result<()> {
    if wait {
        wait_for_enable(&sim);
    }
    let mut buf = vec![0u8; 16384];
    let mut out = vec![0u8; firmware_sim::action::MAX_FRAME];
    loop {
        let n = port.recv(&mut buf)?;
        let r = lock(&sim).receive(&buf[..n], &mut out);
        match r {
            Ok(r) if r.verdict == Verdict::Forward => port.send(&out[..r.out_len])?,
            // Punts wait on the punt queue for the host; drops and passes end here.
            _ => {}
        }
    }
}
