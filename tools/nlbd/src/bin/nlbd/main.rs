//! nlbd: the host slow-path daemon of nlb-offload.
//!
//! ```text
//!  tokio runtime                                   engine thread (owns the device)
//!  ┌──────────────────────────────┐               ┌──────────────────────────────────┐
//!  │ HealthChecker ─ events ──────┼── Command ───►│ Controller: recompile, delta load │
//!  │ reload: SIGHUP, file change ─┼── Command ───►│ Connections: learn, age, persist  │
//!  │ Kubernetes API watch ────────┼── Command ───►│                                   │
//!  │ admin socket (0600) ─────────┼── Command ───►│ PuntHandler: fragments, ICMP      │
//!  │ metrics (hyper, 127.0.0.1) ──┼── Command ───►│ counters                          │
//!  │ BGP: announce the VIPs ──────┼─ (status) ────│                                   │
//!  │ SIGTERM/SIGINT → shutdown ───┼── Shutdown ──►│                                   │
//!  └──────────────────────────────┘               └──────────────────────────────────┘
//! ```
//!
//! See docs/nlbd.md.

mod admin;
mod announce;
mod fleet;
mod kubernetes;
mod metrics;
mod reload;
mod shared_health;

use clap::Parser;
use flowtable_compiler::{Config, Explanation, Flow};
use nlb_control::admin_proto as proto;
use nlb_driver::open_device;
use nlbd::engine::{Command, ConnectionList, Engine, EngineOptions, EngineStatus};
use nlbd::health::{targets_from_config, CheckerOptions, HealthChecker};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::{error, info, warn};

/// How long a request to the engine may take before the caller gives up.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(10);

/// The nlb-offload slow-path daemon: health checks, table updates, learned connections,
/// fragments, metrics and an admin socket for one NIC.
///
/// It compiles CONFIG for the NIC's capacity profile and loads it (a restarted nlbd reads the
/// tables and connections back from the NIC and carries on: traffic does not stop), probes
/// every backend with its pool's health check and updates the tables when health changes,
/// installs the connections the NIC learns and ages them, turns the live connections of
/// backend services into new weights every --policy-refresh (their service LB policy), sends
/// punted fragments after their first fragment, reloads CONFIG on SIGHUP or when the file
/// changes (a configuration that does not compile is refused and the old one keeps serving),
/// serves Prometheus metrics and answers `nlbctl status|health|conntrack|top|explain` on its
/// admin socket. With a `bgp` section it announces the VIPs it serves to its BGP neighbours
/// (docs/fleet.md). SIGTERM or SIGINT stop it (the VIPs are withdrawn first); SIGUSR2 stops it
/// for a restart (the neighbours keep the routes by graceful restart); the NIC keeps
/// forwarding with what it holds.
///
/// With --kubernetes the configuration is a Kubernetes cluster's LoadBalancer Services, listed
/// and watched from its API (docs/kubernetes.md); with --etcd, the fleet's (docs/fleet.md).
///
/// Example: nlbd --config /etc/nlb/lb.yaml --device pci:0000:03:00.0
///
/// Example: nlbd --kubernetes --kube-project /etc/nlb/project.yaml --device pci:0000:03:00.0
///
/// Logs go to stderr; set NLBD_LOG (for example `debug` or `nlbd=debug,info`) to choose
/// what is logged.
#[derive(Parser, Debug)]
#[command(name = "nlbd", version)]
struct Args {
    /// The load-balancer configuration (YAML or JSON, docs/config.md), or Kubernetes manifests:
    /// one file (a saved `kubectl get -o yaml|json` stream) or a directory of them, reloaded
    /// when any of its files changes (docs/kubernetes.md); or --etcd.
    #[arg(
        long,
        value_name = "FILE|DIR",
        required_unless_present_any = ["etcd", "kubernetes"],
        conflicts_with_all = ["etcd", "kubernetes"]
    )]
    config: Option<PathBuf>,
    /// Take Services, EndpointSlices and Nodes from the Kubernetes API (docs/kubernetes.md):
    /// list and watch them, map every change as manifests are mapped and load it as a delta,
    /// write each served Service's status.loadBalancer.ingress and post Events for warnings.
    /// The API is found with --kubeconfig, else KUBECONFIG, ~/.kube/config or the in-cluster
    /// service account. While the API is unreachable the tables keep serving.
    #[arg(long, conflicts_with = "etcd")]
    kubernetes: bool,
    /// The kubeconfig file for --kubernetes (its current context).
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL for --kubernetes, reached without credentials (`kubectl proxy`'s
    /// http://127.0.0.1:8001, or a test server) instead of a kubeconfig.
    #[arg(
        long,
        value_name = "URL",
        requires = "kubernetes",
        conflicts_with = "kubeconfig"
    )]
    kube_api: Option<String>,
    /// The project document for --kubernetes (`nic` and `kubernetes` sections: NIC settings,
    /// address pools, node MACs; docs/kubernetes.md). SIGHUP reads it again.
    #[arg(long, value_name = "FILE", requires = "kubernetes")]
    kube_project: Option<PathBuf>,
    /// How long a burst of Kubernetes events is gathered into one delta load, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=1000), requires = "kubernetes")]
    kube_coalesce_ms: u64,
    /// How often the Kubernetes objects are mapped again without an event, in seconds (a
    /// status or Event that could not be written is retried then).
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400), requires = "kubernetes")]
    kube_resync: u64,
    /// Take the configuration from the fleet's etcd instead of a file (docs/fleet.md):
    /// HOST:PORT, http://HOST:PORT or (with --etcd-cacert) https://HOST:PORT, comma-separated.
    /// nlbd waits for a published revision, applies every new one, registers as --host with a
    /// lease, and keeps serving the last revision while etcd is unreachable.
    #[arg(long, value_name = "ENDPOINTS", requires = "host")]
    etcd: Option<String>,
    /// This host's name in the fleet (its key is PREFIX hosts/NAME).
    #[arg(long, value_name = "NAME", requires = "etcd")]
    host: Option<String>,
    /// Prefix of the fleet's keys in etcd.
    #[arg(long, value_name = "P", default_value = nlb_control::fleet::DEFAULT_PREFIX, requires = "etcd")]
    etcd_prefix: String,
    /// TTL of the host's lease in seconds: a host that stops keeps its record this long.
    #[arg(long, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(i64).range(2..=600), requires = "etcd")]
    lease_ttl: i64,
    /// Shared health (docs/fleet.md): how many hosts probe each backend, chosen by rendezvous
    /// hashing over the live hosts; every host loads the health their reports in etcd give.
    /// Every host of a fleet must use the same value. 0: each host probes every backend
    /// itself and loads its own decisions.
    #[arg(long, value_name = "K", default_value_t = nlb_control::fleet::DEFAULT_PROBERS as u64, value_parser = clap::value_parser!(u64).range(0..=16), requires = "etcd")]
    probers: u64,
    #[command(flatten)]
    etcd_options: nlb_control::etcd::EtcdArgs,
    /// This host's BGP identifier, instead of the `bgp` section's `routerId` (a fleet's
    /// hosts share one configuration; each needs an identifier of its own).
    #[arg(long, value_name = "IPV4")]
    bgp_router_id: Option<std::net::Ipv4Addr>,
    /// The IPv4 next hop this host announces its VIPs with, instead of the `bgp` section's
    /// `nextHopIpv4`: the NIC's address on the router's link (docs/fleet.md).
    #[arg(long, value_name = "IPV4")]
    bgp_next_hop: Option<std::net::Ipv4Addr>,
    /// The IPv6 next hop, instead of the section's `nextHopIpv6`.
    #[arg(long, value_name = "IPV6")]
    bgp_next_hop_ipv6: Option<std::net::Ipv6Addr>,
    /// The NIC: pci:DDDD:BB:DD.F (bound to vfio-pci) or sim:PATH (an nlb-sim socket).
    #[arg(long, value_name = "SPEC")]
    device: String,
    /// Address of the Prometheus metrics endpoint (`off` for none).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9470")]
    metrics_addr: String,
    /// The admin socket (created with mode 0600).
    #[arg(long, value_name = "PATH", default_value = proto::DEFAULT_SOCKET)]
    admin_socket: PathBuf,
    /// How often to look at CONFIG (every file of a directory) for changes, in milliseconds
    /// (0: only on SIGHUP).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    watch_ms: u64,
    /// How long the engine waits for work when the NIC's queues are empty, in microseconds
    /// (the queue polling period when idle).
    #[arg(long, value_name = "US", default_value_t = 1000)]
    poll_us: u64,
    /// How often the service LB policy of backend services is refreshed, in milliseconds:
    /// the live connections of the NIC's connection table are counted per backend and turned
    /// into new Maglev weights (docs/nlbd.md). The default keeps a capacity crossing to new
    /// weights within 1 s; configurations without backend services do not refresh.
    #[arg(long, value_name = "MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    policy_refresh: u64,
    /// Logs as JSON lines.
    #[arg(long)]
    log_json: bool,
    /// Print nlbd's shell completion script (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<clap_complete::Shell>,
    /// Print nlbd's man page (roff) and exit.
    #[arg(long, exclusive = true)]
    man: bool,
}

/// What the tasks of the daemon share.
#[derive(Debug)]
pub struct Daemon {
    /// The health checker.
    pub checker: HealthChecker,
    engine: Sender<Command>,
    /// Where metrics are served.
    pub metrics_addr: Option<SocketAddr>,
    /// The configuration file.
    pub config_path: PathBuf,
    /// Reloads refused before reaching the engine (the file did not parse or validate).
    pub refused_early: std::sync::atomic::AtomicU64,
    /// The fleet task's state (`--etcd`).
    pub fleet: Option<Arc<fleet::FleetMetrics>>,
    /// Shared health (`--etcd` with `--probers` above 0): the checker probes this host's
    /// share of the targets and the engine loads the fleet's decisions.
    pub shared: Option<Arc<shared_health::SharedHealth>>,
    /// The VIPs announced by BGP.
    pub announce: Arc<announce::Announce>,
    /// An executable to replace this nlbd with (a rolling upgrade), and the wake-up to do it.
    pub replacement: std::sync::Mutex<Option<PathBuf>>,
    /// Wakes the main task to stop and execute `replacement`.
    pub replace: tokio::sync::Notify,
    started: Instant,
}

impl Daemon {
    fn send(&self, cmd: Command) -> Result<(), String> {
        self.engine
            .send(cmd)
            .map_err(|_| "the engine has stopped".to_string())
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T, String> {
        let (tx, rx) = oneshot::channel();
        self.send(make(tx))?;
        match tokio::time::timeout(ENGINE_TIMEOUT, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err("the engine has stopped".into()),
            Err(_) => Err(format!(
                "the engine did not answer within {ENGINE_TIMEOUT:?}"
            )),
        }
    }

    /// The engine's state (and the NIC's counters).
    pub async fn engine_status(&self, counters: bool) -> Result<Box<EngineStatus>, String> {
        self.ask(|reply| Command::Status { counters, reply }).await
    }

    /// This host's pinned connections by names (None: unchanged since the last answer, unless
    /// `again`), with the digest of the tables they were found for ([`Command::Pinned`]).
    pub async fn pinned(
        &self,
        again: bool,
    ) -> Result<(String, Option<Vec<nlb_control::fleet::PinnedConnection>>), String> {
        self.ask(|reply| Command::Pinned { again, reply }).await
    }

    /// Tables prepared and not loaded ([`Command::Prepare`]): a new configuration's (with
    /// the ids to compile it with), or with None those serving under `snapshot`'s health.
    pub async fn prepare(
        &self,
        config: Option<(Config, Option<flowtable_compiler::Symbols>)>,
        snapshot: nlbd::health::HealthSnapshot,
    ) -> Result<nlbd::engine::PreparedTables, String> {
        self.ask(|reply| Command::Prepare {
            config: config.map(Box::new),
            snapshot,
            reply,
        })
        .await?
    }

    /// Installs the other hosts' pinned connections as copies ([`Command::Mirror`]).
    pub async fn mirror(
        &self,
        connections: Vec<nlb_control::fleet::PinnedConnection>,
        restore: Vec<nlb_control::fleet::PinnedConnection>,
    ) -> Result<nlbd::pinned::MirrorReport, String> {
        self.ask(|reply| Command::Mirror {
            connections,
            restore,
            reply,
        })
        .await?
    }

    /// The connection table: at most `limit` entries from entry index `from` on.
    pub async fn connections(&self, from: u32, limit: usize) -> Result<ConnectionList, String> {
        self.ask(|reply| Command::Connections { from, limit, reply })
            .await
    }

    /// Writes `image` into the card's user flash slot and reboots the card into it
    /// ([`Command::Flash`]; minutes on a card, so without the engine's usual timeout).
    pub async fn flash(
        &self,
        image: nlb_driver::flash::Bitstream,
    ) -> Result<nlbd::engine::Flashed, nlbd::engine::FlashFailed> {
        let stopped = |message: String| nlbd::engine::FlashFailed {
            card_reset: false,
            message,
        };
        let (reply, answer) = oneshot::channel();
        self.send(Command::Flash {
            image: Box::new(image),
            reply,
        })
        .map_err(stopped)?;
        answer
            .await
            .map_err(|_| stopped("the engine has stopped".into()))?
    }

    /// The configuration serving.
    pub async fn config(&self) -> Result<Box<Config>, String> {
        self.ask(|reply| Command::Config { reply }).await
    }

    /// Where a new connection of `flow` goes in the tables serving, and why.
    pub async fn explain(&self, flow: Flow) -> Result<Box<Explanation>, String> {
        self.ask(|reply| Command::Explain { flow, reply }).await
    }

    /// Offers a parsed configuration to the engine, compiled with `ids` (rule and backend
    /// names by id) when given, else keeping the ids serving; on success the checker takes
    /// its targets.
    pub async fn reload(
        &self,
        config: Config,
        ids: Option<flowtable_compiler::Symbols>,
    ) -> Result<(), String> {
        let snapshot = self.snapshot_for(&config);
        self.reload_under(config, ids, snapshot).await
    }

    /// The health a configuration's tables are compiled under: the fleet's decisions (shared
    /// health) or the checker's.
    pub fn snapshot_for(&self, config: &Config) -> nlbd::health::HealthSnapshot {
        match &self.shared {
            Some(shared) => shared.snapshot_for(&targets_from_config(config)),
            None => self.checker.snapshot(),
        }
    }

    /// [`Daemon::reload`] under the health of `snapshot`.
    pub async fn reload_under(
        &self,
        config: Config,
        ids: Option<flowtable_compiler::Symbols>,
        snapshot: nlbd::health::HealthSnapshot,
    ) -> Result<(), String> {
        let targets = targets_from_config(&config);
        let announcing = announce::Announce::pending(&config);
        let report = self
            .ask(|reply| Command::Reload {
                config: Box::new(config),
                snapshot,
                ids: ids.map(Box::new),
                reply,
            })
            .await??;
        self.announce.serving(announcing);
        let targets = match &self.shared {
            Some(shared) => shared.set_targets(targets),
            None => targets,
        };
        match self.checker.set_targets(targets) {
            Ok(s) => info!(
                generation = report.generation,
                targets_added = s.added,
                targets_removed = s.removed,
                targets_changed = s.changed,
                "health targets updated for the new configuration"
            ),
            // The controller validated the same targets; this would be a bug.
            Err(e) => error!(error = %e, "the health checker refused the new targets"),
        }
        Ok(())
    }

    /// Seconds since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}

fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NLBD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> ExitCode {
    if let Some(done) = generated_docs() {
        return done;
    }
    let args = Args::parse();
    init_logs(args.log_json);
    match run(args) {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(binary)) => {
            // A rolling upgrade (`nlbctl fleet upgrade --binary`): the same arguments, the
            // new executable, the same process id (systemd keeps the unit running).
            use std::os::unix::process::CommandExt as _;
            info!(binary = %binary.display(), "executing the new nlbd");
            let e = std::process::Command::new(&binary)
                .args(std::env::args_os().skip(1))
                .exec();
            error!("cannot execute {}: {e}", binary.display());
            eprintln!("nlbd: cannot execute {}: {e}", binary.display());
            ExitCode::from(2)
        }
        Err((code, message)) => {
            error!("{message}");
            eprintln!("nlbd: {message}");
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, String);

/// Where the configuration comes from.
#[derive(Debug)]
enum Source {
    /// A file (`--config`), with the digest of the text read.
    File(PathBuf, u64),
    /// The fleet's etcd (`--etcd`), with the revision the engine starts with.
    Etcd(fleet::FleetOptions, i64, Box<nlb_control::fleet::Published>),
    /// The Kubernetes API (`--kubernetes`), with its watchers and the configuration the
    /// engine starts with.
    Kubernetes(
        kubernetes::KubeOptions,
        Box<kubernetes::Watching>,
        Box<Config>,
    ),
}

/// Runs until stopped; `Some(executable)` when nlbd is to replace itself with it.
fn run(args: Args) -> Result<Option<PathBuf>, Failure> {
    let fleet_options = match (&args.etcd, &args.host) {
        (Some(endpoints), Some(host)) => {
            let settings = args.etcd_options.settings(endpoints).map_err(|e| (1, e))?;
            nlb_control::fleet::check_host_name(host).map_err(|e| (1, e))?;
            let keys = nlb_control::fleet::Keys::new(&args.etcd_prefix).map_err(|e| (1, e))?;
            Some(fleet::FleetOptions {
                settings,
                keys,
                host: host.clone(),
                lease_ttl: args.lease_ttl,
                probers: args.probers as usize,
            })
        }
        _ => None,
    };
    let file_config = match &args.config {
        Some(path) => {
            // Our configuration, or Kubernetes manifests: a file or a directory.
            let sources = reload::read(path).map_err(|e| (1, e))?;
            let (config, diags) = nlb_config::parse_sources(&sources);
            diags
                .into_result()
                .map_err(|d| (1, d.to_string().trim_end().to_string()))?;
            Some((config, Source::File(path.clone(), reload::digest(&sources))))
        }
        None => None,
    };
    let metrics_addr: Option<SocketAddr> = match args.metrics_addr.as_str() {
        "off" => None,
        a => Some(a.parse().map_err(|_| {
            (
                1,
                format!("--metrics-addr `{a}` is not an address (valid: 127.0.0.1:9470, [::1]:9470 or off)"),
            )
        })?),
    };
    let dev = open_device(&args.device).map_err(|e| (1, e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| (2, format!("cannot start the runtime: {e}")))?;
    let kube_options = args.kubernetes.then(|| kubernetes::KubeOptions {
        kubeconfig: args.kubeconfig.clone(),
        api_url: args.kube_api.clone(),
        project: args.kube_project.clone(),
        coalesce: Duration::from_millis(args.kube_coalesce_ms),
        resync: Duration::from_secs(args.kube_resync),
    });
    runtime.block_on(async move {
        let (config, source) = match (file_config, fleet_options, kube_options) {
            (Some(file), ..) => file,
            (None, None, Some(opts)) => {
                // Nothing touches the NIC before the cluster's objects are listed and map.
                let watching = kubernetes::start(&opts).await.map_err(|e| (1, e))?;
                let config = kubernetes::first_config(&opts, &watching)
                    .await
                    .map_err(|e| (1, format!("the cluster's objects do not map: {e}")))?;
                info!(services = config.kubernetes.len(), "starting with the cluster's LoadBalancer Services");
                (
                    config.clone(),
                    Source::Kubernetes(opts, Box::new(watching), Box::new(config)),
                )
            }
            (None, Some(opts), _) => {
                // Nothing touches the NIC before a revision parses: a host with an empty NIC
                // serves nothing until it converges to the live revision.
                let (revision, published, config) = fleet::first_revision(&opts).await;
                info!(host = %opts.host, revision, file = %published.file, "starting with revision {revision}");
                (config, Source::Etcd(opts, revision, Box::new(published)))
            }
            (None, None, None) => return Err((1, "give --config FILE, --etcd ENDPOINTS --host NAME or --kubernetes".to_string())),
        };
        serve(args, config, source, dev, metrics_addr).await
    })
}

async fn serve(
    args: Args,
    config: Config,
    source: Source,
    dev: Box<dyn nlb_driver::Device>,
    metrics_addr: Option<SocketAddr>,
) -> Result<Option<PathBuf>, Failure> {
    // Probes run on a thread of their own with a single-thread runtime: the cheapest way to
    // run thousands of probes a second (docs/health-checks.md).
    let (checker, mut events) =
        HealthChecker::on_own_thread(CheckerOptions::default()).map_err(|e| (2, e.to_string()))?;
    let targets = targets_from_config(&config);
    let announcing = announce::Announce::pending(&config);
    let options = EngineOptions {
        idle_poll: Duration::from_micros(args.poll_us.max(10)),
        policy_refresh: Duration::from_millis(args.policy_refresh),
        ..EngineOptions::default()
    };
    // Attaching reads both banks and the connection table back: blocking work. A NIC that
    // serves tables already kept forwarding while no nlbd ran (RFC 4724's F bit for BGP).
    let snapshot = checker.snapshot();
    let mut dev = dev;
    let kept_forwarding = nlb_driver::Batch::new()
        .read(nlb_hw::blocks::ctrl::GENERATION)
        .run(dev.as_mut())
        .is_ok_and(|r| r.first().is_some_and(|g| *g > 0));
    let started =
        tokio::task::spawn_blocking(move || Engine::start(dev, config, &snapshot, options))
            .await
            .map_err(|e| (2, format!("engine start: {e}")))?;
    let (engine, _) = started.map_err(|e| (1, e.to_string()))?;
    let config_name = source.name();
    // Shared health: nothing to probe until the host is live in the fleet.
    let shared = match &source {
        Source::Etcd(opts, ..) if opts.probers > 0 => Some(Arc::new(
            shared_health::SharedHealth::new(&opts.host, opts.probers),
        )),
        _ => None,
    };
    let targets = match &shared {
        Some(s) => s.set_targets(targets),
        None => targets,
    };
    checker
        .set_targets(targets)
        .map_err(|e| (1, format!("{config_name}: {e}")))?;

    let listener = match metrics_addr {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| (1, format!("cannot serve metrics on {addr}: {e}")))?,
        ),
        None => None,
    };
    let metrics_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
    let admin = admin::bind(&args.admin_socket).map_err(|e| (1, e))?;

    let (tx, rx) = std::sync::mpsc::channel();
    let engine_thread = std::thread::Builder::new()
        .name("nlbd-engine".into())
        .spawn(move || engine.run(rx))
        .map_err(|e| (2, format!("cannot start the engine thread: {e}")))?;
    let fleet_metrics =
        matches!(source, Source::Etcd(..)).then(Arc::<fleet::FleetMetrics>::default);
    let daemon = Arc::new(Daemon {
        checker,
        engine: tx,
        metrics_addr,
        config_path: args.config.clone().unwrap_or_default(),
        refused_early: std::sync::atomic::AtomicU64::new(0),
        fleet: fleet_metrics.clone(),
        shared,
        announce: Arc::new(announce::Announce::new(
            announce::HostBgp {
                router_id: args.bgp_router_id,
                next_hop_ipv4: args.bgp_next_hop,
                next_hop_ipv6: args.bgp_next_hop_ipv6,
            },
            kept_forwarding,
        )),
        replacement: std::sync::Mutex::new(None),
        replace: tokio::sync::Notify::new(),
        started: Instant::now(),
    });
    daemon.announce.serving(announcing);
    info!(
        config = %config_name,
        device = %args.device,
        metrics = ?metrics_addr,
        admin_socket = %args.admin_socket.display(),
        "nlbd running"
    );

    let mut tasks = Vec::new();
    {
        let daemon = daemon.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(changes) = events.recv().await {
                if let Some(shared) = &daemon.shared {
                    // Shared health: decisions go to etcd, and come back as the fleet's.
                    shared.local_changed.notify_one();
                    continue;
                }
                let snapshot = daemon.checker.snapshot();
                if daemon.send(Command::Health { changes, snapshot }).is_err() {
                    break;
                }
            }
        }));
    }
    if let Some(l) = listener {
        tasks.push(tokio::spawn(metrics::run(l, daemon.clone())));
    }
    tasks.push(tokio::spawn(admin::run(admin, daemon.clone())));
    tasks.push(tokio::spawn(announce::run(daemon.clone())));
    match source {
        Source::File(_, serving) => {
            let watch = (args.watch_ms > 0).then(|| Duration::from_millis(args.watch_ms));
            tasks.push(tokio::spawn(reload::run(daemon.clone(), watch, serving)));
        }
        Source::Etcd(opts, revision, published) => {
            let metrics = fleet_metrics.unwrap_or_default();
            tasks.push(tokio::spawn(fleet::run(
                daemon.clone(),
                opts,
                (revision, *published),
                metrics,
            )));
            tasks.push(tokio::spawn(reload::ignore_hangup()));
        }
        Source::Kubernetes(opts, watching, serving) => {
            tasks.push(tokio::spawn(kubernetes::run(
                daemon.clone(),
                opts,
                *watching,
                *serving,
            )));
        }
    }

    let (restart, replacement) = stop_signal(&daemon).await;
    shut_down(&daemon, restart, tasks, engine_thread).await;
    let _ = std::fs::remove_file(&args.admin_socket);
    Ok(replacement)
}

impl Source {
    /// Where the configuration comes from, for the log.
    fn name(&self) -> String {
        match self {
            Source::File(path, _) => path.display().to_string(),
            Source::Etcd(opts, revision, _) => {
                format!("{} (revision {revision})", opts.keys.config())
            }
            Source::Kubernetes(opts, ..) => match &opts.api_url {
                Some(url) => format!("the Kubernetes API at {url}"),
                None => "the Kubernetes API".to_string(),
            },
        }
    }
}

/// Withdraws the VIPs (a stop) or leaves them to the neighbours' graceful restart (`restart`),
/// then ends the tasks and the engine; the NIC keeps forwarding.
async fn shut_down(
    daemon: &Daemon,
    restart: bool,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    engine_thread: std::thread::JoinHandle<nlbd::engine::EngineStatus>,
) {
    if restart {
        // The neighbours keep the routes while the NIC keeps forwarding; the next nlbd
        // announces them again.
        daemon.announce.abandon().await;
    } else {
        // A stop withdraws the VIPs before anything else goes (SPEC R15.1).
        daemon.announce.stop("nlbd stopping").await;
    }
    info!("shutting down: the NIC keeps forwarding with its tables and connections");
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    let _ = daemon.send(Command::Shutdown);
    let joined = tokio::task::spawn_blocking(move || engine_thread.join()).await;
    if !matches!(joined, Ok(Ok(_))) {
        warn!("the engine thread ended abnormally");
    }
}

/// What stops nlbd: a signal ([`wait_for_shutdown`]), or a rolling upgrade's new executable
/// (`nlbctl fleet upgrade`). Whether the BGP neighbours keep the routes, and the executable.
async fn stop_signal(daemon: &Daemon) -> (bool, Option<PathBuf>) {
    tokio::select! {
        r = wait_for_shutdown() => (r, None),
        () = daemon.replace.notified() => {
            let binary = daemon.replacement.lock().ok().and_then(|mut b| b.take());
            info!("stopping to run another nlbd executable (a rolling upgrade); the BGP neighbours keep the routes");
            (true, binary)
        }
    }
}

/// Waits for SIGTERM or SIGINT (a stop: false) or SIGUSR2 (a restart: true, the BGP
/// neighbours keep the routes by graceful restart).
async fn wait_for_shutdown() -> bool {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut usr2)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::user_defined2()),
    ) else {
        warn!("cannot install signal handlers; stop nlbd with SIGKILL");
        std::future::pending::<()>().await;
        return false;
    };
    tokio::select! {
        _ = term.recv() => { info!("SIGTERM"); false }
        _ = int.recv() => { info!("SIGINT"); false }
        _ = usr2.recv() => {
            info!("SIGUSR2: stopping for a restart, the BGP neighbours keep the routes");
            true
        }
    }
}

/// `--completions SHELL` and `--man`: generated from [`Args`], printed to stdout. Both are
/// exclusive (alone on the command line), so a command of their own parses them without the
/// required options; any other command line is [`Args`]'s to parse.
fn generated_docs() -> Option<ExitCode> {
    use clap::CommandFactory as _;
    use std::io::Write as _;
    #[derive(Parser)]
    #[command(name = "nlbd", disable_help_flag = true, disable_version_flag = true)]
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
        clap_complete::generate(shell, &mut Args::command(), "nlbd", &mut out);
    } else if docs.man {
        if let Err(e) = clap_mangen::Man::new(Args::command()).render(&mut out) {
            eprintln!("nlbd: cannot render the man page: {e}");
            return Some(ExitCode::from(2));
        }
    } else {
        return None;
    }
    let _ = std::io::stdout().write_all(&out);
    Some(ExitCode::SUCCESS)
}
