//! `nlbd --kubernetes`: Services, EndpointSlices and Nodes from the live Kubernetes API
//! (docs/kubernetes.md, "The live API").
//!
//! Three watchers (kube's runtime watcher: list, then watch from the list's resourceVersion;
//! a relist on `410 Gone`; retries with backoff) keep reflector stores of the objects. Every
//! change, after a short coalescing window, turns the stores into the very input the manifest
//! reader takes (one JSON document per object, named `api:KIND/NAMESPACE/NAME` so a refusal
//! names the object), which `nlb_config::parse_sources` maps as it maps manifests: one
//! mapping for both. A changed configuration goes to the engine as one reload, a delta load.
//!
//! Fail static: while the API is unreachable the stores keep the last state, the NIC keeps
//! serving it, and the watchers retry with backoff and catch up (a watch from the last
//! resourceVersion, or a relist when that version has expired).
//!
//! Written back: each served Service's `status.loadBalancer.ingress` (its VIPs) when it
//! differs, by a merge PATCH of the status subresource; the mapping's warnings (and objects
//! refused) as Kubernetes Events (events.k8s.io/v1), once per warning.

use crate::Daemon;
use flowtable_compiler::Config;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Client, Resource, ResourceExt as _};
use nlb_config::kube::Source;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

/// The controller name on Events and in the status field manager.
const CONTROLLER: &str = "nlbd";

/// How nlbd reaches the API and what it adds to the objects (the `--kube*` options).
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// `--kubeconfig`: a kubeconfig file (else KUBECONFIG, ~/.kube/config, or the in-cluster
    /// service account).
    pub kubeconfig: Option<PathBuf>,
    /// `--kube-api`: the API server's URL, without credentials (tests, `kubectl proxy`).
    pub api_url: Option<String>,
    /// `--kube-project`: the project document (NIC settings, address pools, node MACs).
    pub project: Option<PathBuf>,
    /// `--kube-coalesce-ms`: how long a burst of events is gathered before one reload.
    pub coalesce: Duration,
    /// `--kube-resync`: how often the stores are mapped again without an event (status
    /// write-back and Events that failed are retried then).
    pub resync: Duration,
}

/// The cluster as the watchers last saw it.
#[derive(Clone)]
pub struct Cluster {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    nodes: Store<Node>,
    client: Client,
}

impl Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("services", &self.services.state().len())
            .field("endpoint_slices", &self.slices.state().len())
            .field("nodes", &self.nodes.state().len())
            .finish()
    }
}

/// The running watchers: the stores, and the instants of changes (the coalescer's input).
#[derive(Debug)]
pub struct Watching {
    cluster: Cluster,
    changes: mpsc::UnboundedReceiver<Instant>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn client(opts: &KubeOptions) -> Result<Client, String> {
    let config = if let Some(url) = &opts.api_url {
        let uri: http::Uri = url.parse().map_err(|e| {
            format!("--kube-api `{url}` is not a URL ({e}); valid: http://127.0.0.1:8001")
        })?;
        kube::Config::new(uri)
    } else if let Some(path) = &opts.kubeconfig {
        let kc = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
    } else {
        kube::Config::infer().await.map_err(|e| {
            format!(
                "no Kubernetes API configuration (KUBECONFIG, ~/.kube/config or in-cluster): {e}"
            )
        })?
    };
    Client::try_from(config).map_err(|e| format!("cannot make a Kubernetes client: {e}"))
}

/// One watcher of every object of kind `K` in the cluster, feeding `writer`; each change sends
/// its instant on `changes`. Errors (API unreachable, watch refused) are logged once per run
/// of failures and retried with kube's default backoff; a `410 Gone` relists.
fn watch<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    changes: mpsc::UnboundedSender<Instant>,
) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let kind = K::kind(&());
    tokio::spawn(async move {
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut failing = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(e) => {
                    if failing {
                        info!(kind = %kind, "Kubernetes API reachable again: catching up");
                        failing = false;
                    }
                    match e {
                        watcher::Event::Apply(_)
                        | watcher::Event::Delete(_)
                        | watcher::Event::InitDone => {
                            if changes.send(Instant::now()).is_err() {
                                return;
                            }
                        }
                        watcher::Event::Init | watcher::Event::InitApply(_) => {}
                    }
                }
                // Not a failure: the version the watch resumed from was compacted away.
                Err(watcher::Error::WatchError(e)) if e.code == 410 => {
                    info!(kind = %kind, "resourceVersion expired (410 Gone): relisting");
                }
                Err(e) => {
                    if !failing {
                        warn!(kind = %kind, error = %e, "Kubernetes API watch failed: the tables keep serving what they hold; retrying with backoff");
                        failing = true;
                    } else {
                        debug!(kind = %kind, error = %e, "Kubernetes API watch still failing");
                    }
                }
            }
        }
    })
}

/// Starts the watchers and waits until each kind has been listed once (retrying while the
/// API is unreachable): nothing touches the NIC before the cluster is known.
pub async fn start(opts: &KubeOptions) -> Result<Watching, String> {
    let client = client(opts).await?;
    let (tx, changes) = mpsc::unbounded_channel();
    let (services, w1) = reflector::store();
    let (slices, w2) = reflector::store();
    let (nodes, w3) = reflector::store();
    let tasks = vec![
        watch(Api::<Service>::all(client.clone()), w1, tx.clone()),
        watch(Api::<EndpointSlice>::all(client.clone()), w2, tx.clone()),
        watch(Api::<Node>::all(client.clone()), w3, tx),
    ];
    let cluster = Cluster {
        services,
        slices,
        nodes,
        client,
    };
    {
        let ready = async {
            let _ = cluster.services.wait_until_ready().await;
            let _ = cluster.slices.wait_until_ready().await;
            let _ = cluster.nodes.wait_until_ready().await;
        };
        let mut ready = std::pin::pin!(ready);
        while tokio::time::timeout(Duration::from_secs(10), &mut ready)
            .await
            .is_err()
        {
            info!("waiting for the first list of Services, EndpointSlices and Nodes from the Kubernetes API");
        }
    }
    Ok(Watching {
        cluster,
        changes,
        tasks,
    })
}

/// A JSON document of one object, for the manifest reader.
fn document<K: serde::Serialize + Resource<DynamicType = ()>>(obj: &K) -> Source {
    let kind = K::kind(&());
    let meta = obj.meta();
    let name = match &meta.namespace {
        Some(ns) => format!(
            "api:{kind}/{ns}/{}",
            meta.name.as_deref().unwrap_or_default()
        ),
        None => format!("api:{kind}/{}", meta.name.as_deref().unwrap_or_default()),
    };
    Source {
        name,
        text: serde_json::to_string_pretty(obj).unwrap_or_default(),
    }
}

/// The name of the configuration mapped from the API (the first source).
const API_SOURCE: &str = "kubernetes-api";

/// An object refused by the mapping: where to post the Event, and why.
struct Refused {
    reference: ObjectReference,
    why: String,
}

/// Maps the stores (and the project document) as manifests. Objects the reader refuses are
/// left out (with one Event each) so one bad Service does not hold back the others; a problem
/// no object can be blamed for refuses the whole.
fn map(cluster: &Cluster, project: Option<&Source>) -> (Result<Config, String>, Vec<Refused>) {
    // Kept first: its name is the configuration's, and it makes an empty cluster a valid
    // (empty) set of manifests.
    let mut sources = vec![Source {
        name: API_SOURCE.into(),
        text: r#"{"apiVersion": "v1", "kind": "List", "items": []}"#.into(),
    }];
    sources.extend(project.cloned());
    let mut refs: BTreeMap<String, ObjectReference> = BTreeMap::new();
    let mut objects: Vec<Source> = Vec::new();
    for n in cluster.nodes.state() {
        let s = document(n.as_ref());
        refs.insert(s.name.clone(), n.object_ref(&()));
        objects.push(s);
    }
    for s in cluster.services.state() {
        let d = document(s.as_ref());
        refs.insert(d.name.clone(), s.object_ref(&()));
        objects.push(d);
    }
    for e in cluster.slices.state() {
        let d = document(e.as_ref());
        refs.insert(d.name.clone(), e.object_ref(&()));
        objects.push(d);
    }
    // Stores hold no order; the mapping (VIPs from a pool, ids) must not change with it.
    objects.sort_by(|a, b| a.name.cmp(&b.name));
    let mut refused = Vec::new();
    let mut left_out = BTreeSet::new();
    for _ in 0..2 {
        let mut all = sources.clone();
        all.extend(
            objects
                .iter()
                .filter(|o| !left_out.contains(&o.name))
                .cloned(),
        );
        let (config, diags) = nlb_config::parse_sources(&all);
        if diags.is_empty() {
            return (Ok(config), refused);
        }
        let mut blamed = BTreeMap::<String, Vec<String>>::new();
        let mut unblamed = Vec::new();
        for d in diags.iter() {
            let line = format!("{}: {}", d.path, d.message);
            match refs.get(&d.file) {
                Some(_) if !left_out.contains(&d.file) => {
                    blamed.entry(d.file.clone()).or_default().push(line)
                }
                _ => unblamed.push(format!("{}: {line}", d.file)),
            }
        }
        if !unblamed.is_empty() || blamed.is_empty() {
            return (Err(crate::reload::one_line(&diags)), refused);
        }
        for (name, lines) in blamed {
            warn!(object = %name, "left out of the load balancer: {}", lines.join("; "));
            refused.push(Refused {
                reference: refs[&name].clone(),
                why: lines.join("; "),
            });
            left_out.insert(name);
        }
    }
    (
        Err("the mapping still fails after leaving out the objects it refused".into()),
        refused,
    )
}

/// Reads the project document.
async fn read_project(opts: &KubeOptions) -> Result<Option<Source>, String> {
    let Some(path) = &opts.project else {
        return Ok(None);
    };
    // A small file, read at start and on SIGHUP.
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(Some(Source {
        name: path.display().to_string(),
        text,
    }))
}

/// The first configuration (before the engine starts): a refusal is an error.
pub async fn first_config(opts: &KubeOptions, watching: &Watching) -> Result<Config, String> {
    let project = read_project(opts).await?;
    let (config, refused) = map(&watching.cluster, project.as_ref());
    for r in &refused {
        warn!(object = ?r.reference.name, "refused: {}", r.why);
    }
    config
}

/// What was written to the API already, so each thing is written once.
#[derive(Default)]
struct Written {
    /// Warnings posted as Events: (object uid or name, message).
    events: BTreeSet<(String, String)>,
    /// Statuses patched: Service → (the VIPs written, its resourceVersion when written), so a
    /// round that runs before the watch brings the patched object back does not patch again.
    statuses: BTreeMap<String, (Vec<String>, Option<String>)>,
}

/// Follows the cluster: every change (after `opts.coalesce`) or resync maps the stores again,
/// and a configuration that differs from the one serving goes to the engine; then statuses
/// and Events are written. SIGHUP reads the project document again.
pub async fn run(daemon: Arc<Daemon>, opts: KubeOptions, mut watching: Watching, serving: Config) {
    let mut serving = serving;
    let mut written = Written::default();
    let mut project = match read_project(&opts).await {
        Ok(p) => p,
        Err(e) => {
            error!("{e}");
            None
        }
    };
    write_back(&watching.cluster, &serving, &[], &mut written).await;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    loop {
        let hangup = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let first_event = tokio::select! {
            e = watching.changes.recv() => match e {
                Some(at) => Some(at),
                None => return,
            },
            _ = tokio::time::sleep(opts.resync) => None,
            _ = hangup => {
                info!("SIGHUP: reading the project document again");
                match read_project(&opts).await {
                    Ok(p) => project = p,
                    Err(e) => error!("{e}; the previous one stays"),
                }
                None
            }
        };
        if first_event.is_some() && !opts.coalesce.is_zero() {
            tokio::time::sleep(opts.coalesce).await;
        }
        let mut events = usize::from(first_event.is_some());
        while watching.changes.try_recv().is_ok() {
            events += 1;
        }
        let (config, refused) = map(&watching.cluster, project.as_ref());
        let config = match config {
            Ok(c) => c,
            Err(e) => {
                error!("the cluster's objects do not map, the previous configuration keeps serving: {e}");
                write_back(&watching.cluster, &serving, &refused, &mut written).await;
                continue;
            }
        };
        if config != serving {
            match daemon.reload(config.clone(), None).await {
                Ok(()) => {
                    serving = config;
                    if let Some(at) = first_event {
                        info!(
                            events,
                            latency_ms = at.elapsed().as_secs_f64() * 1e3,
                            "Kubernetes changes applied"
                        );
                    }
                }
                // The engine logged why.
                Err(e) => debug!(error = %e, "reload not applied"),
            }
        }
        write_back(&watching.cluster, &serving, &refused, &mut written).await;
    }
}

/// The `ip` entries a Service's `status.loadBalancer.ingress` holds.
fn ingress_ips(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| i.iter().filter_map(|e| e.ip.clone()).collect())
        .unwrap_or_default()
}

/// Writes each served Service's VIPs to its status when they differ, and posts an Event for
/// each warning not posted yet (the mapping's, and objects left out).
async fn write_back(
    cluster: &Cluster,
    serving: &Config,
    refused: &[Refused],
    written: &mut Written,
) {
    let services: BTreeMap<(String, String), Arc<Service>> = cluster
        .services
        .state()
        .into_iter()
        .map(|s| ((s.namespace().unwrap_or_default(), s.name_any()), s))
        .collect();
    let mut warnings: Vec<(ObjectReference, String, &'static str)> = Vec::new();
    for k in &serving.kubernetes {
        let Some((ns, name)) = k.service.split_once('/') else {
            continue;
        };
        let Some(svc) = services.get(&(ns.to_string(), name.to_string())) else {
            continue;
        };
        let want: Vec<String> = k.vips.iter().map(|v| v.to_string()).collect();
        let version = svc.resource_version();
        let pending = written
            .statuses
            .get(&k.service)
            .is_some_and(|(w, v)| *w == want && *v == version);
        if ingress_ips(svc) != want && !pending {
            let api: Api<Service> = Api::namespaced(cluster.client.clone(), ns);
            let ingress: Vec<_> = want
                .iter()
                .map(|ip| serde_json::json!({"ip": ip, "ipMode": "VIP"}))
                .collect();
            let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": ingress}}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    info!(service = %k.service, vips = ?want, "status.loadBalancer.ingress written");
                    written
                        .statuses
                        .insert(k.service.clone(), (want.clone(), version));
                }
                Err(e) => {
                    warn!(service = %k.service, error = %e, "cannot write status.loadBalancer.ingress; retried at the next change or resync")
                }
            }
        }
        for note in &k.notes {
            if let Some(w) = note.strip_prefix("warning: ") {
                warnings.push((svc.object_ref(&()), w.to_string(), "LoadBalancerWarning"));
            }
        }
    }
    for r in refused {
        warnings.push((r.reference.clone(), r.why.clone(), "LoadBalancerRefused"));
    }
    for (reference, message, reason) in warnings {
        let key = (
            reference
                .uid
                .clone()
                .or_else(|| reference.name.clone())
                .unwrap_or_default(),
            message.clone(),
        );
        if written.events.contains(&key) {
            continue;
        }
        let recorder = Recorder::new(
            cluster.client.clone(),
            Reporter {
                controller: CONTROLLER.into(),
                instance: std::env::var("HOSTNAME").ok(),
            },
        );
        let mut note = message;
        // The API refuses notes over 1 kB.
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note),
            action: "LoadBalancing".into(),
            secondary: None,
        };
        match recorder.publish(&event, &reference).await {
            Ok(()) => {
                written.events.insert(key);
            }
            Err(e) => {
                warn!(error = %e, "cannot post a Kubernetes Event; retried at the next change or resync")
            }
        }
    }
}
