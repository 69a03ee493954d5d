//! Announcing the VIPs by BGP (SPEC R15.1): one task per neighbour of the configuration's
//! `bgp` section, each driving an [`nlb_control::bgp::Session`] over TCP.
//!
//! The neighbours are the host's routing daemon (BIRD or FRR on loopback, docs/fleet.md); it
//! carries the routes on to the network's routers. What is announced is one set of host routes
//! for every neighbour ([`Announcer::set`]); the daemon decides it (what this host serves, its
//! drain, its fleet state). Until the first set is given no neighbour is connected: a
//! restarted nlbd does not end a neighbour's graceful restart (RFC 4724's End-of-RIB) before it
//! knows what it serves.
//!
//! - A neighbour that cannot be reached, refuses the session or ends it is tried again after
//!   1 s, doubling to 8 s; each failure is kept in its status (`last_error`) and logged once
//!   per distinct cause.
//! - [`Announcer::stop`] withdraws everything and sends Cease / Administrative Shutdown (RFC
//!   8203) to every neighbour: the routes go at once. A process that dies, or re-executes
//!   itself, sends nothing: the TCP connection closes, and a neighbour that negotiated graceful
//!   restart keeps the routes for the restart time announced (`gracefulRestartSec`), while the
//!   NIC keeps forwarding; a neighbour without graceful restart withdraws them at once.

use nlb_config::{Bgp, BgpNeighbor};
use nlb_control::bgp::{Event, Prefix, RestartState, Session, SessionConfig, State};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tracing::{info, warn};

/// How long a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Backoff between attempts: doubling from the first to the last.
pub const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(8));

/// One neighbour's state, for `nlbctl status` and the metrics.
pub type NeighborStatus = nlb_control::admin_proto::BgpNeighborData;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The session settings of one neighbour.
pub fn session_config(b: &Bgp, n: &BgpNeighbor) -> SessionConfig {
    SessionConfig {
        local_as: b.asn,
        peer_as: n.asn,
        router_id: b.router_id,
        hold_time: b.hold_time,
        restart_time: (b.graceful_restart > 0).then_some(b.graceful_restart),
        med: b.med,
        communities: b.communities.clone(),
        local_pref: b.local_preference,
        next_hop_v4: b.next_hop_ipv4,
        next_hop_v6: b.next_hop_ipv6,
    }
}

/// The speakers of one `bgp` section.
#[derive(Debug)]
pub struct Announcer {
    bgp: Bgp,
    wanted: watch::Sender<Option<BTreeSet<Prefix>>>,
    stop: watch::Sender<Option<String>>,
    status: Vec<Arc<Mutex<NeighborStatus>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Announcer {
    /// Starts one task per neighbour (on the current runtime); nothing connects before the
    /// first [`Announcer::set`].
    pub fn start(bgp: &Bgp, restart: RestartState) -> Announcer {
        let (wanted, _) = watch::channel(None);
        let (stop, _) = watch::channel(None);
        let mut status = Vec::new();
        let mut tasks = Vec::new();
        for n in &bgp.neighbors {
            let st = Arc::new(Mutex::new(NeighborStatus {
                neighbor: SocketAddr::new(n.address, n.port).to_string(),
                asn: n.asn,
                state: "Idle".into(),
                since_unix_ms: now_ms(),
                ..NeighborStatus::default()
            }));
            status.push(st.clone());
            tasks.push(tokio::spawn(neighbor(
                session_config(bgp, n),
                n.clone(),
                restart,
                wanted.subscribe(),
                stop.subscribe(),
                st,
            )));
        }
        Announcer {
            bgp: bgp.clone(),
            wanted,
            stop,
            status,
            tasks,
        }
    }

    /// The section it runs.
    pub fn config(&self) -> &Bgp {
        &self.bgp
    }

    /// The routes every neighbour should have.
    pub fn set(&self, routes: BTreeSet<Prefix>) {
        self.wanted.send_if_modified(|w| {
            if w.as_ref() == Some(&routes) {
                false
            } else {
                *w = Some(routes);
                true
            }
        });
    }

    /// The routes asked for (None before the first [`Announcer::set`]).
    pub fn wanted(&self) -> Option<BTreeSet<Prefix>> {
        self.wanted.borrow().clone()
    }

    /// Each neighbour's state.
    pub fn status(&self) -> Vec<NeighborStatus> {
        self.status
            .iter()
            .map(|s| s.lock().map(|g| g.clone()).unwrap_or_default())
            .collect()
    }

    /// Withdraws everything from every neighbour and ends the sessions (Cease /
    /// Administrative Shutdown with `reason`); waits at most `limit` for them.
    pub async fn stop(self, reason: &str, limit: Duration) {
        let _ = self.stop.send(Some(reason.to_string()));
        let all = futures::future::join_all(self.tasks);
        let _ = tokio::time::timeout(limit, all).await;
    }

    /// Ends the tasks without a word to the neighbours (they see the connection close: a
    /// graceful restart when negotiated). For a process about to replace itself.
    pub fn abandon(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

fn set_state(st: &Mutex<NeighborStatus>, f: impl FnOnce(&mut NeighborStatus)) {
    if let Ok(mut g) = st.lock() {
        f(&mut g);
    }
}

/// One neighbour, until stopped.
async fn neighbor(
    cfg: SessionConfig,
    n: BgpNeighbor,
    mut restart: RestartState,
    mut wanted: watch::Receiver<Option<BTreeSet<Prefix>>>,
    mut stop: watch::Receiver<Option<String>>,
    st: Arc<Mutex<NeighborStatus>>,
) {
    let peer = SocketAddr::new(n.address, n.port);
    let mut backoff = RETRY.0;
    let mut last_logged = String::new();
    // Nothing connects before the first decision.
    loop {
        if stop.borrow().is_some() {
            return;
        }
        if wanted.borrow().is_some() {
            break;
        }
        tokio::select! {
            r = wanted.changed() => if r.is_err() { return },
            r = stop.changed() => if r.is_err() { return },
        }
    }
    loop {
        if stop.borrow().is_some() {
            return;
        }
        set_state(&st, |s| {
            s.state = "Connect".into();
            s.since_unix_ms = now_ms();
        });
        let outcome = match connect(peer, n.local_address).await {
            Ok(stream) => run_session(&cfg, stream, restart, &mut wanted, &mut stop, &st).await,
            Err(e) => Err(format!("cannot connect to {peer}: {e}")),
        };
        // Only the first session after the process started says it restarted.
        restart.restarted = false;
        let established = st.lock().map(|s| s.state == "Established").unwrap_or(false);
        set_state(&st, |s| {
            s.state = "Idle".into();
            s.since_unix_ms = now_ms();
            s.announced.clear();
            if let Err(e) = &outcome {
                s.last_error = Some(e.clone());
            }
        });
        match outcome {
            Ok(()) => return,
            Err(e) => {
                if e != last_logged {
                    warn!(neighbor = %peer, "BGP: {e}; trying again");
                    last_logged = e;
                }
                if established {
                    backoff = RETRY.0;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(RETRY.1);
    }
}

async fn connect(
    peer: SocketAddr,
    local: Option<std::net::IpAddr>,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = if peer.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    if let Some(l) = local {
        socket.bind(SocketAddr::new(l, 0))?;
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(peer)).await {
        Ok(r) => {
            let s = r?;
            s.set_nodelay(true)?;
            Ok(s)
        }
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {CONNECT_TIMEOUT:?}"),
        )),
    }
}

/// One session over `stream`: Ok when stopped on purpose, else why it ended.
async fn run_session(
    cfg: &SessionConfig,
    mut stream: tokio::net::TcpStream,
    restart: RestartState,
    wanted: &mut watch::Receiver<Option<BTreeSet<Prefix>>>,
    stop: &mut watch::Receiver<Option<String>>,
    st: &Mutex<NeighborStatus>,
) -> Result<(), String> {
    let local = stream.local_addr().map_err(|e| e.to_string())?.ip();
    let peer = stream.peer_addr().map_err(|e| e.to_string())?;
    let mut s = Session::new(cfg.clone(), local, restart, Instant::now());
    s.set_routes(wanted.borrow().clone().unwrap_or_default(), Instant::now());
    set_state(st, |x| {
        x.state = State::OpenSent.name().into();
        x.since_unix_ms = now_ms();
    });
    let mut buf = vec![0u8; 8192];
    loop {
        let out = s.take_output();
        if !out.is_empty() {
            stream
                .write_all(&out)
                .await
                .map_err(|e| format!("sending to {peer}: {e}"))?;
        }
        if s.state() == State::Closed {
            // A shutdown: its NOTIFICATION went out above.
            let _ = stream.shutdown().await;
            return Ok(());
        }
        let deadline = tokio::time::Instant::from_std(s.next_deadline());
        tokio::select! {
            r = stream.read(&mut buf) => {
                let n = r.map_err(|e| format!("reading from {peer}: {e}"))?;
                if n == 0 {
                    return Err(format!("{peer} closed the connection"));
                }
                let was = s.state();
                match s.receive(&buf[..n], Instant::now()) {
                    Ok(events) => {
                        for e in events {
                            if let Event::Established { peer: open, hold_time, .. } = e {
                                info!(
                                    neighbor = %peer,
                                    asn = open.asn(),
                                    router_id = %open.router_id,
                                    hold_time,
                                    announced = s.announced().len(),
                                    "BGP session established"
                                );
                                set_state(st, |x| {
                                    x.router_id = Some(open.router_id.to_string());
                                    x.hold_time = Some(hold_time);
                                    x.graceful_restart = open.graceful_restart().is_some();
                                    x.established_total += 1;
                                    x.last_error = None;
                                });
                            }
                        }
                    }
                    Err(e) => {
                        let _ = stream.write_all(&s.take_output()).await;
                        return Err(e.to_string());
                    }
                }
                if s.state() != was {
                    set_state(st, |x| {
                        x.state = s.state().name().into();
                        x.since_unix_ms = now_ms();
                    });
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                if let Err(e) = s.poll(Instant::now()) {
                    let _ = stream.write_all(&s.take_output()).await;
                    return Err(e.to_string());
                }
            }
            r = wanted.changed() => {
                if r.is_err() {
                    s.shutdown("nlbd stopping", Instant::now());
                } else {
                    let w = wanted.borrow().clone().unwrap_or_default();
                    s.set_routes(w, Instant::now());
                }
            }
            r = stop.changed() => {
                let reason = match r {
                    Ok(()) => stop.borrow().clone().unwrap_or_default(),
                    Err(_) => "nlbd stopping".to_string(),
                };
                s.shutdown(&reason, Instant::now());
            }
        }
        let announced: Vec<String> = s.announced().iter().map(ToString::to_string).collect();
        set_state(st, |x| x.announced = announced);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nlb_control::bgp::wire::{self, Capability, Message, Open, Update};
    use std::net::Ipv4Addr;
    use tokio::net::TcpListener;

    fn section(port: u16) -> Bgp {
        let text = format!(
            "bgp:\n  asn: 4200000001\n  routerId: 192.0.2.1\n  holdTimeSec: 3\n  gracefulRestartSec: 20\n  neighbors: [{{address: 127.0.0.1, port: {port}, asn: 65001}}]\n"
        );
        let (c, d) = nlb_config::parse_config("t.yaml", &text);
        assert!(d.0.is_empty(), "{d}");
        c.bgp.unwrap()
    }

    /// A peer that reads whole messages.
    struct Peer {
        s: tokio::net::TcpStream,
        buf: Vec<u8>,
    }

    impl Peer {
        async fn next(&mut self) -> Option<Message> {
            loop {
                if let Ok(Some(len)) = wire::frame_len(&self.buf) {
                    if self.buf.len() >= len {
                        let m: Vec<u8> = self.buf.drain(..len).collect();
                        return wire::decode(&m).ok();
                    }
                }
                let mut b = [0u8; 4096];
                let n = self.s.read(&mut b).await.ok()?;
                if n == 0 {
                    return None;
                }
                self.buf.extend_from_slice(&b[..n]);
            }
        }

        async fn send(&mut self, m: Message) {
            self.s.write_all(&m.to_bytes().unwrap()).await.unwrap();
        }
    }

    async fn accept(l: &TcpListener) -> Peer {
        let (s, _) = tokio::time::timeout(Duration::from_secs(5), l.accept())
            .await
            .expect("nlbd connects")
            .unwrap();
        Peer { s, buf: Vec::new() }
    }

    fn open() -> Message {
        Message::Open(Open {
            version: 4,
            my_as: 65001,
            hold_time: 90,
            router_id: Ipv4Addr::new(10, 0, 0, 1),
            capabilities: vec![
                Capability::Multiprotocol { afi: 1, safi: 1 },
                Capability::FourOctetAs(65001),
            ],
        })
    }

    fn vip(s: &str) -> Prefix {
        Prefix::host(s.parse().unwrap())
    }

    #[tokio::test]
    async fn announces_after_the_first_decision_and_withdraws_on_stop() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let a = Announcer::start(
            &section(port),
            RestartState {
                restarted: true,
                forwarding: true,
            },
        );
        // No decision yet: no connection.
        assert!(
            tokio::time::timeout(Duration::from_millis(300), l.accept())
                .await
                .is_err(),
            "connected before knowing what to announce"
        );
        a.set([vip("10.77.1.1")].into());
        let mut p = accept(&l).await;
        let Some(Message::Open(o)) = p.next().await else {
            panic!("no OPEN")
        };
        assert_eq!(o.asn(), 4_200_000_001);
        let gr = o.graceful_restart().unwrap();
        assert!(gr.restarted && gr.families.iter().all(|f| f.2));
        assert_eq!(gr.restart_time, 20);
        p.send(open()).await;
        p.send(Message::Keepalive).await;
        assert_eq!(p.next().await, Some(Message::Keepalive));
        let Some(Message::Update(u)) = p.next().await else {
            panic!()
        };
        assert_eq!(u.nlri, vec![vip("10.77.1.1")]);
        assert_eq!(p.next().await, Some(Message::Update(Update::end_of_rib(1))));
        // Wait for the status to show it.
        for _ in 0..50 {
            if a.status()[0].announced == vec!["10.77.1.1/32".to_string()] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let st = a.status();
        assert_eq!(st[0].state, "Established");
        assert_eq!(st[0].router_id.as_deref(), Some("10.0.0.1"));
        // A drain: withdrawn.
        a.set(BTreeSet::new());
        let Some(Message::Update(w)) = p.next().await else {
            panic!()
        };
        assert_eq!(w.withdrawn, vec![vip("10.77.1.1")]);
        a.set([vip("10.77.1.1")].into());
        let Some(Message::Update(_)) = p.next().await else {
            panic!()
        };
        // Stop: withdraw, then Cease / Administrative Shutdown with the reason.
        let stopping = tokio::spawn(a.stop("nlbd stopping", Duration::from_secs(2)));
        let Some(Message::Update(w)) = p.next().await else {
            panic!()
        };
        assert_eq!(w.withdrawn, vec![vip("10.77.1.1")]);
        let Some(Message::Notification(n)) = p.next().await else {
            panic!()
        };
        assert_eq!((n.code, n.subcode), (6, 2));
        assert!(n.describe().contains("nlbd stopping"));
        assert_eq!(p.next().await, None);
        stopping.await.unwrap();
    }

    #[tokio::test]
    async fn a_refusing_neighbour_is_retried_and_its_error_kept() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let a = Announcer::start(&section(port), RestartState::default());
        a.set([vip("10.77.1.1")].into());
        // First session: the peer says it is another AS → nlbd sends Bad Peer AS and retries.
        let mut p = accept(&l).await;
        let _ = p.next().await;
        p.send(Message::Open(Open {
            version: 4,
            my_as: 65099,
            hold_time: 90,
            router_id: Ipv4Addr::new(10, 0, 0, 1),
            capabilities: vec![Capability::FourOctetAs(65099)],
        }))
        .await;
        let Some(Message::Notification(n)) = p.next().await else {
            panic!()
        };
        assert_eq!((n.code, n.subcode), (2, 2));
        // It comes back after the backoff; its status says why the last one ended. The second
        // OPEN no longer says it restarted.
        let mut p = accept(&l).await;
        let Some(Message::Open(o)) = p.next().await else {
            panic!()
        };
        assert!(o.graceful_restart().is_some_and(|g| !g.restarted));
        let e = a.status()[0].last_error.clone().unwrap_or_default();
        assert!(e.contains("AS 65099"), "{e}");
        a.abandon();
    }

    #[tokio::test]
    async fn a_neighbour_that_never_answers_is_reported() {
        // A port nobody listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let a = Announcer::start(&section(port), RestartState::default());
        a.set([vip("10.77.1.1")].into());
        let mut e = String::new();
        for _ in 0..100 {
            e = a.status()[0].last_error.clone().unwrap_or_default();
            if !e.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(e.contains("cannot connect to 127.0.0.1"), "{e}");
        assert_eq!(a.status()[0].state, "Idle");
        a.abandon();
    }
}
