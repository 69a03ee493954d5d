//! `nlbctl sim`: run a pcap through the simulated NIC and report what happened to each packet.

use crate::common::{self, CliError};
use firmware_sim::pcap::{read_frames, FrameWriter};
use firmware_sim::pipeline::key_report_name;
use firmware_sim::{PacketResult, ModelDevice};
use flowtable_compiler::Symbols;
use nlb_hw::enums::{Reason, Verdict};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Run packets from a pcap through the NIC pipeline on the compiled tables.
///
/// Every packet gets a verdict (forward, punt, drop, pass) and a reason. `--report` writes
/// one JSON object per input packet, in input order:
/// {"index", "verdict", "reason", "rule", "pool", "backend", "key", "conntrack"} (names are
/// the configuration's; null where not applicable). `--out` writes the forwarded frames, as
/// the backends receive them, to a pcap readable by tcpdump and Wireshark. As the slow path
/// would, the simulator installs the connections the NIC learns, so later packets of a flow
/// hit the connection table; `--no-learn` turns that off.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON), a compiled table image, or Kubernetes manifests (a
    /// file, a directory, or `-` for standard input; docs/kubernetes.md).
    #[arg(long)]
    config: PathBuf,
    /// Input pcap (Ethernet frames).
    #[arg(long, value_name = "IN.pcap")]
    pcap: PathBuf,
    /// Which NIC model executes the tables: the Rust golden model, or the Verilator RTL.
    #[arg(long, value_enum, default_value = "model")]
    engine: Engine,
    /// Health/weight state (see docs/config.md).
    #[arg(long, value_name = "FILE")]
    health: Option<PathBuf>,
    /// Write forwarded frames here.
    #[arg(long, value_name = "OUT.pcap")]
    out: Option<PathBuf>,
    /// Write the per-packet JSON lines report here.
    #[arg(long, value_name = "OUT.jsonl")]
    report: Option<PathBuf>,
    /// Do not install learned connections.
    #[arg(long)]
    no_learn: bool,
    /// Capacity profile (for configurations; images carry their own).
    #[arg(long, default_value = "sim", value_name = "NAME")]
    profile: String,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// The bit-exact Rust golden model (firmware-sim).
    Model,
    /// The Verilog pipeline under Verilator.
    Rtl,
}

fn lower(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// One line of the report, as the contract in docs/ defines it.
fn report_line(index: usize, r: &PacketResult, names: &Symbols) -> serde_json::Value {
    let name = |n: Option<&str>| n.map_or(serde_json::Value::Null, |s| s.into());
    serde_json::json!({
        "index": index,
        "verdict": lower(r.verdict.name()),
        "reason": lower(r.reason.name()),
        "rule": name(r.rule.and_then(|id| names.rule(id))),
        "pool": name(r.pool.and_then(|id| names.pool(id))),
        "backend": name(r.backend.and_then(|id| names.backend(id))),
        "key": r.key.map_or(serde_json::Value::Null, |k| key_report_name(k).into()),
        "conntrack": r.conntrack.report_name().map_or(serde_json::Value::Null, |s| s.into()),
    })
}

/// The NIC that executes the tables: the golden model, or (feature `rtl`) the Verilator RTL.
enum Nic {
    Model(Box<ModelDevice>),
    #[cfg(feature = "rtl")]
    Rtl(Box<rtl::RtlNic>),
}

impl Nic {
    /// One packet; the output frame of a FORWARD goes to `buf`.
    fn receive(&mut self, frame: &[u8], buf: &mut [u8]) -> Result<PacketResult, String> {
        match self {
            Nic::Model(d) => d.receive(frame, buf).map_err(|e| e.to_string()),
            #[cfg(feature = "rtl")]
            Nic::Rtl(r) => r.receive(frame, buf),
        }
    }

    /// Valid connection-table entries.
    fn connections(&mut self) -> Result<u32, String> {
        match self {
            Nic::Model(d) => Ok(d.conntrack().valid_count()),
            #[cfg(feature = "rtl")]
            Nic::Rtl(r) => r.connections(),
        }
    }

    /// Packets counted on a reason.
    fn reason_packets(&mut self, reason: Reason) -> Result<u64, String> {
        match self {
            Nic::Model(d) => Ok(d.counters().reason(reason).packets),
            #[cfg(feature = "rtl")]
            Nic::Rtl(r) => r.reason_packets(reason),
        }
    }
}

/// `--engine rtl`: `nlb_top` under Verilator, loaded through its registers. Packets go one at
/// a time, and the connections the NIC learns are installed through the conntrack block
/// before the next packet (as the model's auto-learn does), so the report is the model's.
#[cfg(feature = "rtl")]
mod rtl {
    use firmware_sim::{ConnTable, PacketResult};
    use nlb_driver::device::Device;
    use nlb_driver::queues::read_counters;
    use nlb_hw::blocks::conntrack;
    use nlb_hw::enums::{CounterKind, Event, Reason};
    use nlb_hw::{NicSettings, Tables};
    use nlb_verif::device::{write_conntrack, RtlDevice};

    pub struct RtlNic {
        dev: RtlDevice,
        /// What the host installed (the slow path's view, to pick ways as it does).
        ct: ConnTable,
        learn: bool,
    }

    impl RtlNic {
        pub fn new(tables: &Tables, nic: &NicSettings, learn: bool) -> Result<RtlNic, String> {
            let mut dev = RtlDevice::new(0).map_err(|e| e.to_string())?;
            dev.load(tables, nic).map_err(|e| e.to_string())?;
            let p = tables.profile;
            Ok(RtlNic {
                dev,
                ct: ConnTable::new(p.ct_buckets, p.ct_ways),
                learn,
            })
        }

        pub fn receive(&mut self, frame: &[u8], buf: &mut [u8]) -> Result<PacketResult, String> {
            let mut got = self
                .dev
                .receive(vec![frame.to_vec()])
                .map_err(|e| e.to_string())?;
            let p = got.pop().ok_or("the RTL gave no result")?;
            let out = buf
                .get_mut(..p.output.len())
                .ok_or("output frame larger than the buffer")?;
            out.copy_from_slice(&p.output);
            if let (true, Some(ev)) = (self.learn, p.result.event) {
                let index = match ev.event {
                    Event::Learn => self.ct.install(&ev, 0).ok(),
                    Event::Teardown => self.ct.mark_closed(&ev),
                };
                if let Some(e) = index.and_then(|i| self.ct.entry(i).map(|e| (i, *e))) {
                    write_conntrack(&mut self.dev, e.0, &e.1).map_err(|e| e.to_string())?;
                }
            }
            Ok(p.result)
        }

        pub fn connections(&mut self) -> Result<u32, String> {
            self.dev.read32(conntrack::COUNT).map_err(|e| e.to_string())
        }

        pub fn reason_packets(&mut self, reason: Reason) -> Result<u64, String> {
            let c = read_counters(&mut self.dev, CounterKind::Reason, [reason.value()], false)
                .map_err(|e| e.to_string())?;
            Ok(c.first().map_or(0, |c| c.packets))
        }
    }
}

/// The error of `--engine rtl` in a build without the Verilator model.
#[cfg(not(feature = "rtl"))]
fn rtl_unavailable() -> CliError {
    CliError::user(
        "error: --engine rtl needs the Verilator model, which this nlbctl was built without; \
         rebuild with `cargo build -p nlbctl --features rtl` (Verilator required: \
         apt-get install verilator) or use --engine model",
    )
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    #[cfg(not(feature = "rtl"))]
    if args.engine == Engine::Rtl {
        return Err(rtl_unavailable());
    }
    let profile = common::profile(&args.profile)?;
    let health = common::health(args.health.as_deref())?;
    let input = common::Input::open(&args.config, &health, profile)?;
    let (tables, symbols) = input.parts();
    let nic = match &input {
        common::Input::Image(i) => i.nic,
        common::Input::Compiled(c) => c.nic,
    };
    let file = std::fs::File::open(&args.pcap)
        .map_err(|e| CliError::user(format!("error: cannot read {}: {e}", args.pcap.display())))?;
    let frames = read_frames(std::io::BufReader::new(file))
        .map_err(|e| CliError::user(format!("error: {}: {e}", args.pcap.display())))?;

    let mut device = match args.engine {
        Engine::Model => {
            let mut d = ModelDevice::from_tables(tables.clone(), nic);
            d.set_auto_learn(!args.no_learn);
            Nic::Model(Box::new(d))
        }
        #[cfg(feature = "rtl")]
        Engine::Rtl => Nic::Rtl(Box::new(
            rtl::RtlNic::new(tables, &nic, !args.no_learn)
                .map_err(|e| CliError::internal(format!("internal error: RTL model: {e}")))?,
        )),
        #[cfg(not(feature = "rtl"))]
        Engine::Rtl => return Err(rtl_unavailable()),
    };

    let mut out = match &args.out {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| {
                CliError::user(format!("error: cannot create {}: {e}", p.display()))
            })?;
            Some(
                FrameWriter::new(std::io::BufWriter::new(f))
                    .map_err(|e| CliError::user(format!("error: {}: {e}", p.display())))?,
            )
        }
        None => None,
    };
    let mut report = match &args.report {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(
            |e| CliError::user(format!("error: cannot create {}: {e}", p.display())),
        )?)),
        None => None,
    };

    let mut buf = vec![0u8; firmware_sim::action::MAX_FRAME];
    let mut by_outcome: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut by_backend: BTreeMap<String, u64> = BTreeMap::new();
    for (index, frame) in frames.iter().enumerate() {
        let r = device
            .receive(&frame.data, &mut buf)
            .map_err(|e| CliError::internal(format!("internal error: packet {index}: {e}")))?;
        *by_outcome
            .entry((lower(r.verdict.name()), lower(r.reason.name())))
            .or_default() += 1;
        if r.verdict == Verdict::Forward {
            let name = r
                .backend
                .and_then(|b| symbols.backend(b))
                .unwrap_or("?")
                .to_string();
            *by_backend.entry(name).or_default() += 1;
            if let Some(w) = out.as_mut() {
                w.write(frame.timestamp, &buf[..r.out_len])
                    .map_err(|e| CliError::user(format!("error: writing --out: {e}")))?;
            }
        }
        if let Some(w) = report.as_mut() {
            let line = report_line(index, &r, symbols);
            writeln!(w, "{line}")
                .map_err(|e| CliError::user(format!("error: writing --report: {e}")))?;
        }
    }
    if let Some(w) = out {
        w.into_inner()
            .flush()
            .map_err(|e| CliError::user(format!("error: writing --out: {e}")))?;
    }
    if let Some(mut w) = report {
        w.flush()
            .map_err(|e| CliError::user(format!("error: writing --report: {e}")))?;
    }

    outln!("{} packets from {}", frames.len(), args.pcap.display());
    outln!("  {:<8} {:<24} {:>8}", "verdict", "reason", "packets");
    for ((verdict, reason), n) in &by_outcome {
        outln!("  {verdict:<8} {reason:<24} {n:>8}");
    }
    if !by_backend.is_empty() {
        outln!("forwarded per backend:");
        for (name, n) in &by_backend {
            outln!("  {name:<24} {n:>8}");
        }
    }
    let learned = device
        .connections()
        .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
    outln!(
        "connection table: {learned} entries{}",
        if args.no_learn { " (learning off)" } else { "" }
    );
    let mut malformed = 0u64;
    for r in Reason::ALL
        .iter()
        .filter(|r| (Reason::Runt.value()..=Reason::TruncatedL4.value()).contains(&r.value()))
    {
        malformed += device
            .reason_packets(*r)
            .map_err(|e| CliError::internal(format!("internal error: {e}")))?;
    }
    if malformed > 0 {
        outln!("malformed frames: {malformed}");
    }
    Ok(())
}
