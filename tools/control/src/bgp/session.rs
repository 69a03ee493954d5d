//! One BGP session of an announcing speaker, without I/O: bytes and time in, bytes and events
//! out (the caller owns the TCP connection and the clock).
//!
//! The finite state machine is RFC 4271 §8's from the moment the TCP connection is up (the
//! caller connects, retries and backs off): OpenSent → OpenConfirm → Established. This speaker
//! only announces: the peer's routes are read for their framing and End-of-RIB and dropped.
//!
//! - OPEN carries the multiprotocol capability for IPv4 and IPv6 unicast (RFC 4760), four-octet
//!   AS numbers (RFC 6793) and, when configured, graceful restart (RFC 4724) with the Restart
//!   State and Forwarding State bits the caller gives.
//! - The peer's OPEN is checked as RFC 4271 §6.2 says: its AS (Bad Peer AS), its hold time
//!   (1 and 2 are Unacceptable Hold Time), its identifier (0, or ours towards an internal peer:
//!   Bad BGP Identifier).
//! - The hold time is the smaller of the two proposals; KEEPALIVEs go every third of it (none
//!   when it is 0); a peer silent for the hold time ends the session with Hold Timer Expired.
//!   Until the peer's OPEN arrives the hold timer is 4 minutes (RFC 4271 §8.2.2).
//! - Once Established, the routes wanted are announced, then End-of-RIB for every family the
//!   session carries; later changes go as the difference (withdrawals and announcements).
//! - [`Session::shutdown`] withdraws everything announced, then sends a Cease NOTIFICATION
//!   (Administrative Shutdown with a reason, RFC 8203): the peer drops the routes at once
//!   instead of keeping them for a graceful restart.

use super::wire::{
    self, err, Attributes, Capability, GracefulRestart, Message, Notification, Open, Origin,
    Prefix, Update, AFI_IPV4, AFI_IPV6, AS_TRANS, SAFI_UNICAST,
};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// The hold time before the peer's OPEN arrived (RFC 4271 §8.2.2: "a large value", 4 minutes
/// suggested).
pub const OPEN_HOLD: Duration = Duration::from_secs(240);

/// What a session announces and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Our AS.
    pub local_as: u32,
    /// The peer's AS, as configured: its OPEN must say the same.
    pub peer_as: u32,
    /// Our BGP identifier.
    pub router_id: Ipv4Addr,
    /// The hold time we propose (0, or 3 and more).
    pub hold_time: u16,
    /// Graceful restart: the restart time we announce (None: no capability).
    pub restart_time: Option<u16>,
    /// MULTI_EXIT_DISC of our routes.
    pub med: Option<u32>,
    /// COMMUNITIES of our routes.
    pub communities: Vec<u32>,
    /// LOCAL_PREF towards an internal peer (100 when not given: RFC 4271 has no default, 100
    /// is the common one).
    pub local_pref: Option<u32>,
    /// NEXT_HOP of IPv4 routes (default: the session's local address when it is IPv4).
    pub next_hop_v4: Option<Ipv4Addr>,
    /// Next hop of IPv6 routes (default: the session's local address when it is IPv6).
    pub next_hop_v6: Option<Ipv6Addr>,
}

impl SessionConfig {
    /// Whether the peer is internal (same AS).
    pub fn internal(&self) -> bool {
        self.local_as == self.peer_as
    }
}

/// What this speaker says of its own restart in the graceful restart capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestartState {
    /// The speaker restarted (R bit): the first session after the process started, when it
    /// had announced before.
    pub restarted: bool,
    /// The forwarding state was kept across the restart (F bit): the NIC kept forwarding.
    pub forwarding: bool,
}

/// Where the session is (RFC 4271 §8.2.2, after Connect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Our OPEN is sent; waiting for the peer's.
    OpenSent,
    /// OPENs exchanged; waiting for the peer's KEEPALIVE.
    OpenConfirm,
    /// Routes flow.
    Established,
    /// Ended (an error or a shutdown): the caller closes the connection.
    Closed,
}

impl State {
    /// Its name in RFC 4271.
    pub fn name(self) -> &'static str {
        match self {
            State::OpenSent => "OpenSent",
            State::OpenConfirm => "OpenConfirm",
            State::Established => "Established",
            State::Closed => "Closed",
        }
    }
}

/// Something the caller should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The session is up: the peer's OPEN, the hold time used, and whether IPv6 unicast
    /// goes over it.
    Established {
        /// The peer's OPEN.
        peer: Open,
        /// The hold time negotiated.
        hold_time: u16,
        /// IPv6 unicast negotiated.
        ipv6: bool,
    },
    /// The peer sent its End-of-RIB for a family.
    PeerEndOfRib(u16),
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The peer sent a NOTIFICATION.
    #[error("the peer closed the session: {}", .0.describe())]
    PeerNotification(Notification),
    /// We sent a NOTIFICATION (queued in the output: send it, then close).
    #[error("{what} (sent NOTIFICATION {})", .sent.describe())]
    Sent {
        /// What we sent.
        sent: Notification,
        /// Why, in words.
        what: String,
    },
}

/// One session.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    local: IpAddr,
    state: State,
    /// Received octets not yet a whole message.
    input: Vec<u8>,
    /// Octets to send.
    output: Vec<u8>,
    /// Negotiated hold time (OPEN_HOLD until the peer's OPEN).
    hold: Duration,
    keepalive: Option<Duration>,
    last_rx: Instant,
    last_tx: Instant,
    peer: Option<Open>,
    four_octet: bool,
    ipv6: bool,
    /// What the peer has from us.
    announced: BTreeSet<Prefix>,
    /// What we want it to have.
    wanted: BTreeSet<Prefix>,
}

/// Routes per UPDATE: a /32 takes 5 octets of NLRI, a /128 17 in MP_REACH_NLRI; these keep
/// every UPDATE well under 4096 octets with the attributes.
const V4_PER_UPDATE: usize = 600;
const V6_PER_UPDATE: usize = 200;

impl Session {
    /// A session on a connection just established from `local`; our OPEN is queued.
    pub fn new(cfg: SessionConfig, local: IpAddr, restart: RestartState, now: Instant) -> Session {
        let mut capabilities = vec![
            Capability::Multiprotocol {
                afi: AFI_IPV4,
                safi: SAFI_UNICAST,
            },
            Capability::Multiprotocol {
                afi: AFI_IPV6,
                safi: SAFI_UNICAST,
            },
            Capability::FourOctetAs(cfg.local_as),
        ];
        if let Some(t) = cfg.restart_time {
            capabilities.push(Capability::GracefulRestart(GracefulRestart {
                restarted: restart.restarted,
                notification: false,
                restart_time: t.min(0x0fff),
                families: vec![
                    (AFI_IPV4, SAFI_UNICAST, restart.forwarding),
                    (AFI_IPV6, SAFI_UNICAST, restart.forwarding),
                ],
            }));
        }
        let open = Open {
            version: 4,
            my_as: u16::try_from(cfg.local_as).unwrap_or(AS_TRANS),
            hold_time: cfg.hold_time,
            router_id: cfg.router_id,
            capabilities,
        };
        let mut s = Session {
            cfg,
            local,
            state: State::OpenSent,
            input: Vec::new(),
            output: Vec::new(),
            hold: OPEN_HOLD,
            keepalive: None,
            last_rx: now,
            last_tx: now,
            peer: None,
            four_octet: false,
            ipv6: false,
            announced: BTreeSet::new(),
            wanted: BTreeSet::new(),
        };
        s.send(&Message::Open(open), now);
        s
    }

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The peer's OPEN, once received.
    pub fn peer(&self) -> Option<&Open> {
        self.peer.as_ref()
    }

    /// What the peer has from us (Established), in order.
    pub fn announced(&self) -> &BTreeSet<Prefix> {
        &self.announced
    }

    /// The hold time in use.
    pub fn hold_time(&self) -> Duration {
        self.hold
    }

    /// Takes the octets to send.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    fn send(&mut self, m: &Message, now: Instant) {
        let r = match m {
            Message::Update(u) => wire::encode_update(u, self.four_octet, &mut self.output),
            m => m.encode(&mut self.output),
        };
        // Our messages are sized to fit (routes are split per UPDATE); a failure would be a
        // bug, and sends nothing.
        debug_assert!(r.is_ok(), "{r:?}");
        self.last_tx = now;
    }

    fn fail(&mut self, n: Notification, what: impl Into<String>, now: Instant) -> SessionError {
        self.send(&Message::Notification(n.clone()), now);
        self.state = State::Closed;
        SessionError::Sent {
            sent: n,
            what: what.into(),
        }
    }

    /// Takes in octets received; returns what happened. On an error the session is Closed and
    /// the output holds the NOTIFICATION to send (when we send one) before closing.
    pub fn receive(&mut self, data: &[u8], now: Instant) -> Result<Vec<Event>, SessionError> {
        self.input.extend_from_slice(data);
        let mut events = Vec::new();
        loop {
            if self.state == State::Closed {
                return Ok(events);
            }
            let len = match wire::frame_len(&self.input) {
                Ok(Some(len)) if self.input.len() >= len => len,
                Ok(_) => return Ok(events),
                Err(e) => {
                    let what = e.what.clone();
                    return Err(self.fail(e.notification(), what, now));
                }
            };
            let bytes: Vec<u8> = self.input.drain(..len).collect();
            self.last_rx = now;
            let msg = match wire::decode(&bytes) {
                Ok(m) => m,
                Err(e) => {
                    let what = e.what.clone();
                    return Err(self.fail(e.notification(), what, now));
                }
            };
            self.handle(msg, now, &mut events)?;
        }
    }

    fn handle(
        &mut self,
        msg: Message,
        now: Instant,
        events: &mut Vec<Event>,
    ) -> Result<(), SessionError> {
        let fsm = |s: &mut Session, got: &str| {
            let state = s.state.name();
            s.fail(
                Notification {
                    code: err::FSM,
                    subcode: 0,
                    data: Vec::new(),
                },
                format!("{got} in state {state}"),
                now,
            )
        };
        match (self.state, msg) {
            (_, Message::Notification(n)) => {
                self.state = State::Closed;
                Err(SessionError::PeerNotification(n))
            }
            (State::OpenSent, Message::Open(o)) => {
                self.check_open(&o, now)?;
                let hold = self.cfg.hold_time.min(o.hold_time);
                self.hold = Duration::from_secs(u64::from(hold));
                self.keepalive =
                    (hold > 0).then(|| Duration::from_secs(u64::from(hold / 3).max(1)));
                self.four_octet = o.four_octet();
                self.ipv6 = o.supports(AFI_IPV6, SAFI_UNICAST);
                self.peer = Some(o);
                self.send(&Message::Keepalive, now);
                self.state = State::OpenConfirm;
                Ok(())
            }
            (State::OpenConfirm, Message::Keepalive) => {
                self.state = State::Established;
                let Some(peer) = self.peer.clone() else {
                    return Err(fsm(self, "KEEPALIVE before OPEN"));
                };
                events.push(Event::Established {
                    peer,
                    hold_time: self.hold.as_secs() as u16,
                    ipv6: self.ipv6,
                });
                self.sync(now);
                self.send(&Message::Update(Update::end_of_rib(AFI_IPV4)), now);
                if self.ipv6 {
                    self.send(&Message::Update(Update::end_of_rib(AFI_IPV6)), now);
                }
                Ok(())
            }
            (State::Established, Message::Keepalive) => Ok(()),
            (State::Established, Message::Update(u)) => {
                if let Some(afi) = u.is_end_of_rib() {
                    events.push(Event::PeerEndOfRib(afi));
                }
                Ok(())
            }
            // RFC 2918: only when we announced the capability, which we do not; ignored.
            (State::Established, Message::RouteRefresh { .. }) => Ok(()),
            (_, Message::Open(_)) => Err(fsm(self, "OPEN")),
            (_, Message::Keepalive) => Err(fsm(self, "KEEPALIVE")),
            (_, Message::Update(_)) => Err(fsm(self, "UPDATE")),
            (_, Message::RouteRefresh { .. }) => Err(fsm(self, "ROUTE-REFRESH")),
        }
    }

    /// RFC 4271 §6.2.
    fn check_open(&mut self, o: &Open, now: Instant) -> Result<(), SessionError> {
        let open_err = |subcode: u8, data: Vec<u8>| Notification {
            code: err::OPEN,
            subcode,
            data,
        };
        if o.asn() != self.cfg.peer_as {
            let n = open_err(err::OPEN_BAD_PEER_AS, Vec::new());
            return Err(self.fail(
                n,
                format!(
                    "the peer says it is AS {}, the configuration says AS {}",
                    o.asn(),
                    self.cfg.peer_as
                ),
                now,
            ));
        }
        if o.hold_time == 1 || o.hold_time == 2 {
            let n = open_err(err::OPEN_HOLD_TIME, Vec::new());
            return Err(self.fail(
                n,
                format!(
                    "the peer proposes a hold time of {} s (0 or at least 3)",
                    o.hold_time
                ),
                now,
            ));
        }
        let same_id = o.router_id == self.cfg.router_id && self.cfg.internal();
        if o.router_id.is_unspecified() || same_id {
            let n = open_err(err::OPEN_BAD_ID, Vec::new());
            return Err(self.fail(
                n,
                format!(
                    "the peer's BGP identifier {} is {}",
                    o.router_id,
                    if same_id { "ours" } else { "zero" }
                ),
                now,
            ));
        }
        Ok(())
    }

    /// Checks the timers at `now`: a KEEPALIVE when one is due; Hold Timer Expired when the
    /// peer has been silent for the hold time.
    pub fn poll(&mut self, now: Instant) -> Result<(), SessionError> {
        if self.state == State::Closed {
            return Ok(());
        }
        let hold_on = self.state == State::OpenSent || !self.hold.is_zero();
        if hold_on && now.duration_since(self.last_rx) >= self.hold {
            let n = Notification {
                code: err::HOLD_TIMER,
                subcode: 0,
                data: Vec::new(),
            };
            let secs = self.hold.as_secs();
            return Err(self.fail(n, format!("the peer sent nothing for {secs} s"), now));
        }
        if let Some(k) = self.keepalive {
            if matches!(self.state, State::OpenConfirm | State::Established)
                && now.duration_since(self.last_tx) >= k
            {
                self.send(&Message::Keepalive, now);
            }
        }
        Ok(())
    }

    /// When [`Session::poll`] next has something to do.
    pub fn next_deadline(&self) -> Instant {
        let mut t = self.last_rx
            + if self.hold.is_zero() {
                OPEN_HOLD
            } else {
                self.hold
            };
        if let Some(k) = self.keepalive {
            if matches!(self.state, State::OpenConfirm | State::Established) {
                t = t.min(self.last_tx + k);
            }
        }
        t
    }

    /// The routes we want the peer to have; once Established the difference goes out.
    pub fn set_routes(&mut self, wanted: BTreeSet<Prefix>, now: Instant) {
        self.wanted = wanted;
        if self.state == State::Established {
            self.sync(now);
        }
    }

    /// The attributes of our routes towards the peer.
    fn attributes(&self, v4: bool) -> Attributes {
        let internal = self.cfg.internal();
        let next_hop = match (self.cfg.next_hop_v4, self.local) {
            (Some(nh), _) => Some(nh),
            (None, IpAddr::V4(a)) => Some(a),
            (None, IpAddr::V6(_)) => None,
        };
        Attributes {
            origin: Origin::Igp,
            as_path: if internal {
                Vec::new()
            } else {
                vec![self.cfg.local_as]
            },
            next_hop: if v4 { next_hop } else { None },
            med: self.cfg.med,
            local_pref: internal.then_some(self.cfg.local_pref.unwrap_or(100)),
            communities: self.cfg.communities.clone(),
        }
    }

    /// The IPv6 next hop: configured, or the local address when it is IPv6.
    fn next_hop_v6(&self) -> Option<Ipv6Addr> {
        match (self.cfg.next_hop_v6, self.local) {
            (Some(nh), _) => Some(nh),
            (None, IpAddr::V6(a)) => Some(a),
            (None, IpAddr::V4(_)) => None,
        }
    }

    /// Whether the session can carry `p` (IPv6 needs the family and a next hop; IPv4 a next
    /// hop).
    pub fn carries(&self, p: &Prefix) -> bool {
        if p.is_ipv4() {
            self.cfg.next_hop_v4.is_some() || self.local.is_ipv4()
        } else {
            self.ipv6 && self.next_hop_v6().is_some()
        }
    }

    /// Sends the difference between what the peer has and what we want.
    fn sync(&mut self, now: Instant) {
        let wanted: BTreeSet<Prefix> = self
            .wanted
            .iter()
            .filter(|p| self.carries(p))
            .copied()
            .collect();
        let gone: Vec<Prefix> = self.announced.difference(&wanted).copied().collect();
        let new: Vec<Prefix> = wanted.difference(&self.announced).copied().collect();
        let (gone4, gone6): (Vec<Prefix>, Vec<Prefix>) =
            gone.into_iter().partition(Prefix::is_ipv4);
        let (new4, new6): (Vec<Prefix>, Vec<Prefix>) = new.into_iter().partition(Prefix::is_ipv4);
        for chunk in gone4.chunks(V4_PER_UPDATE) {
            let u = Update {
                withdrawn: chunk.to_vec(),
                ..Update::default()
            };
            self.send(&Message::Update(u), now);
        }
        for chunk in gone6.chunks(V6_PER_UPDATE) {
            let u = Update {
                mp_unreach: Some(chunk.to_vec()),
                ..Update::default()
            };
            self.send(&Message::Update(u), now);
        }
        for chunk in new4.chunks(V4_PER_UPDATE) {
            let u = Update {
                attributes: Some(self.attributes(true)),
                nlri: chunk.to_vec(),
                ..Update::default()
            };
            self.send(&Message::Update(u), now);
        }
        if let Some(nh) = self.next_hop_v6() {
            for chunk in new6.chunks(V6_PER_UPDATE) {
                let u = Update {
                    attributes: Some(self.attributes(false)),
                    mp_reach: Some((nh, None, chunk.to_vec())),
                    ..Update::default()
                };
                self.send(&Message::Update(u), now);
            }
        }
        self.announced = wanted;
    }

    /// Ends the session on purpose: withdraws everything announced, then sends Cease /
    /// Administrative Shutdown with `reason` (RFC 8203: at most 255 octets of UTF-8).
    pub fn shutdown(&mut self, reason: &str, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        if self.state == State::Established {
            self.wanted.clear();
            self.sync(now);
        }
        let mut text = reason.as_bytes().to_vec();
        text.truncate(255);
        while std::str::from_utf8(&text).is_err() {
            text.pop();
        }
        let mut data = vec![text.len() as u8];
        data.extend_from_slice(&text);
        self.send(
            &Message::Notification(Notification {
                code: err::CEASE,
                subcode: err::CEASE_SHUTDOWN,
                data,
            }),
            now,
        );
        self.state = State::Closed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SessionConfig {
        SessionConfig {
            local_as: 4_200_000_001,
            peer_as: 65000,
            router_id: Ipv4Addr::new(192, 0, 2, 1),
            hold_time: 9,
            restart_time: Some(30),
            med: Some(10),
            communities: vec![(65000 << 16) | 100],
            local_pref: None,
            next_hop_v4: None,
            next_hop_v6: None,
        }
    }

    fn peer_open(asn: u32, hold: u16, id: Ipv4Addr, v6: bool) -> Vec<u8> {
        let mut caps = vec![
            Capability::Multiprotocol { afi: 1, safi: 1 },
            Capability::FourOctetAs(asn),
        ];
        if v6 {
            caps.push(Capability::Multiprotocol { afi: 2, safi: 1 });
        }
        Message::Open(Open {
            version: 4,
            my_as: u16::try_from(asn).unwrap_or(AS_TRANS),
            hold_time: hold,
            router_id: id,
            capabilities: caps,
        })
        .to_bytes()
        .unwrap()
    }

    /// Splits a stream of octets into messages.
    fn messages(mut b: &[u8]) -> Vec<Message> {
        let mut out = Vec::new();
        while let Some(len) = wire::frame_len(b).unwrap() {
            out.push(wire::decode(&b[..len]).unwrap());
            b = &b[len..];
        }
        assert!(b.is_empty());
        out
    }

    fn established(v6: bool, t0: Instant) -> Session {
        let mut s = Session::new(
            cfg(),
            "127.0.0.2".parse().unwrap(),
            RestartState::default(),
            t0,
        );
        let _ = s.take_output();
        s.receive(&peer_open(65000, 90, Ipv4Addr::new(10, 0, 0, 1), v6), t0)
            .unwrap();
        let ev = s
            .receive(&Message::Keepalive.to_bytes().unwrap(), t0)
            .unwrap();
        assert!(matches!(ev[..], [Event::Established { .. }]));
        s
    }

    fn vip(s: &str) -> Prefix {
        Prefix::host(s.parse().unwrap())
    }

    #[test]
    fn open_then_keepalive_then_routes_and_end_of_rib() {
        let t0 = Instant::now();
        let mut s = Session::new(
            cfg(),
            "127.0.0.2".parse().unwrap(),
            RestartState {
                restarted: true,
                forwarding: true,
            },
            t0,
        );
        // Our OPEN: AS_TRANS in the two-octet field, the real AS in the capability, graceful
        // restart with R and F set as told.
        let out = messages(&s.take_output());
        let [Message::Open(open)] = &out[..] else {
            panic!("{out:?}")
        };
        assert_eq!(open.my_as, AS_TRANS);
        assert_eq!(open.asn(), 4_200_000_001);
        assert_eq!(open.hold_time, 9);
        let gr = open.graceful_restart().unwrap();
        assert!(gr.restarted);
        assert_eq!(gr.restart_time, 30);
        assert_eq!(gr.families, vec![(1, 1, true), (2, 1, true)]);
        s.set_routes([vip("10.77.1.1"), vip("2001:db8::1")].into(), t0);
        assert!(s.take_output().is_empty(), "no UPDATE before Established");
        // The peer's OPEN: the smaller hold time (9) wins; we answer with a KEEPALIVE.
        s.receive(&peer_open(65000, 90, Ipv4Addr::new(10, 0, 0, 1), false), t0)
            .unwrap();
        assert_eq!(s.state(), State::OpenConfirm);
        assert_eq!(s.hold_time(), Duration::from_secs(9));
        assert_eq!(messages(&s.take_output()), vec![Message::Keepalive]);
        let ev = s
            .receive(&Message::Keepalive.to_bytes().unwrap(), t0)
            .unwrap();
        assert_eq!(s.state(), State::Established);
        let [Event::Established {
            ipv6, hold_time, ..
        }] = &ev[..]
        else {
            panic!("{ev:?}")
        };
        assert!(!ipv6);
        assert_eq!(*hold_time, 9);
        // The IPv4 VIP with next hop = our address, AS_PATH [our AS] (external peer), MED and
        // community; the IPv6 VIP is not carried (the peer did not announce IPv6); then the
        // IPv4 End-of-RIB.
        let out = messages(&s.take_output());
        assert_eq!(out.len(), 2, "{out:?}");
        let Message::Update(u) = &out[0] else {
            panic!()
        };
        assert_eq!(u.nlri, vec![vip("10.77.1.1")]);
        let a = u.attributes.as_ref().unwrap();
        assert_eq!(a.next_hop, Some(Ipv4Addr::new(127, 0, 0, 2)));
        assert_eq!(a.as_path, vec![4_200_000_001]);
        assert_eq!(a.med, Some(10));
        assert_eq!(a.local_pref, None, "LOCAL_PREF only to internal peers");
        assert_eq!(a.communities, vec![(65000 << 16) | 100]);
        assert_eq!(out[1], Message::Update(Update::end_of_rib(AFI_IPV4)));
        assert_eq!(s.announced().len(), 1);
    }

    #[test]
    fn changes_go_as_differences_and_ipv6_in_mp_attributes() {
        let t0 = Instant::now();
        let mut c = cfg();
        c.next_hop_v6 = Some("2001:db8:ffff::2".parse().unwrap());
        let mut s = Session::new(c, "127.0.0.2".parse().unwrap(), RestartState::default(), t0);
        s.receive(&peer_open(65000, 90, Ipv4Addr::new(10, 0, 0, 1), true), t0)
            .unwrap();
        s.receive(&Message::Keepalive.to_bytes().unwrap(), t0)
            .unwrap();
        let out = messages(&s.take_output());
        // OPEN, KEEPALIVE, then the two End-of-RIBs (nothing to announce yet).
        assert_eq!(
            out[2..],
            [
                Message::Update(Update::end_of_rib(AFI_IPV4)),
                Message::Update(Update::end_of_rib(AFI_IPV6))
            ]
        );
        s.set_routes([vip("10.77.1.1"), vip("2001:db8::1")].into(), t0);
        let out = messages(&s.take_output());
        assert_eq!(out.len(), 2);
        let Message::Update(u6) = &out[1] else {
            panic!()
        };
        let (nh, _, p) = u6.mp_reach.as_ref().unwrap();
        assert_eq!(*nh, "2001:db8:ffff::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p, &vec![vip("2001:db8::1")]);
        assert_eq!(u6.attributes.as_ref().unwrap().next_hop, None);
        // One VIP of each family goes: a withdrawal of each, nothing else.
        s.set_routes([vip("10.77.1.2"), vip("2001:db8::1")].into(), t0);
        let out = messages(&s.take_output());
        let Message::Update(w) = &out[0] else {
            panic!()
        };
        assert_eq!(w.withdrawn, vec![vip("10.77.1.1")]);
        let Message::Update(a) = &out[1] else {
            panic!()
        };
        assert_eq!(a.nlri, vec![vip("10.77.1.2")]);
        assert_eq!(out.len(), 2);
        // The same set again: nothing.
        s.set_routes([vip("10.77.1.2"), vip("2001:db8::1")].into(), t0);
        assert!(s.take_output().is_empty());
        // Shutdown withdraws both families, then Cease / Administrative Shutdown.
        s.shutdown("nlbd stopping", t0);
        let out = messages(&s.take_output());
        assert_eq!(out.len(), 3, "{out:?}");
        let Message::Update(w4) = &out[0] else {
            panic!()
        };
        assert_eq!(w4.withdrawn, vec![vip("10.77.1.2")]);
        let Message::Update(w6) = &out[1] else {
            panic!()
        };
        assert_eq!(w6.mp_unreach, Some(vec![vip("2001:db8::1")]));
        let Message::Notification(n) = &out[2] else {
            panic!()
        };
        assert_eq!((n.code, n.subcode), (6, 2));
        assert_eq!(n.data[0] as usize, "nlbd stopping".len());
        assert_eq!(s.state(), State::Closed);
    }

    #[test]
    fn internal_peers_get_local_pref_and_an_empty_as_path() {
        let t0 = Instant::now();
        let mut c = cfg();
        c.local_as = 65000;
        c.next_hop_v4 = Some(Ipv4Addr::new(10, 79, 1, 2));
        let mut s = Session::new(c, "127.0.0.2".parse().unwrap(), RestartState::default(), t0);
        s.receive(&peer_open(65000, 90, Ipv4Addr::new(10, 0, 0, 1), false), t0)
            .unwrap();
        s.receive(&Message::Keepalive.to_bytes().unwrap(), t0)
            .unwrap();
        let _ = s.take_output();
        s.set_routes([vip("10.77.1.1")].into(), t0);
        let out = messages(&s.take_output());
        let Message::Update(u) = &out[0] else {
            panic!()
        };
        let a = u.attributes.as_ref().unwrap();
        assert!(a.as_path.is_empty());
        assert_eq!(a.local_pref, Some(100));
        assert_eq!(a.next_hop, Some(Ipv4Addr::new(10, 79, 1, 2)));
    }

    #[test]
    fn a_wrong_peer_as_hold_time_or_identifier_is_refused_as_rfc_4271_says() {
        let t0 = Instant::now();
        for (open, subcode) in [
            (peer_open(65099, 90, Ipv4Addr::new(10, 0, 0, 1), false), 2),
            (peer_open(65000, 2, Ipv4Addr::new(10, 0, 0, 1), false), 6),
            (peer_open(65000, 90, Ipv4Addr::new(0, 0, 0, 0), false), 3),
        ] {
            let mut s = Session::new(
                cfg(),
                "127.0.0.2".parse().unwrap(),
                RestartState::default(),
                t0,
            );
            let _ = s.take_output();
            let e = s.receive(&open, t0).unwrap_err();
            let SessionError::Sent { sent, .. } = &e else {
                panic!("{e:?}")
            };
            assert_eq!((sent.code, sent.subcode), (2, subcode), "{e}");
            assert_eq!(s.state(), State::Closed);
            let out = messages(&s.take_output());
            assert_eq!(out, vec![Message::Notification(sent.clone())]);
        }
        // Our own identifier is refused from an internal peer only.
        let mut c = cfg();
        c.local_as = 65000;
        let mut s = Session::new(c, "127.0.0.2".parse().unwrap(), RestartState::default(), t0);
        let e = s
            .receive(
                &peer_open(65000, 90, Ipv4Addr::new(192, 0, 2, 1), false),
                t0,
            )
            .unwrap_err();
        assert!(e.to_string().contains("ours"), "{e}");
    }

    #[test]
    fn keepalives_every_third_of_the_hold_time_and_the_hold_timer() {
        let t0 = Instant::now();
        let mut s = established(false, t0);
        let _ = s.take_output();
        // Hold 9 s: a KEEPALIVE at 3 s, not before.
        s.poll(t0 + Duration::from_millis(2900)).unwrap();
        assert!(s.take_output().is_empty());
        assert_eq!(s.next_deadline(), t0 + Duration::from_secs(3));
        s.poll(t0 + Duration::from_secs(3)).unwrap();
        assert_eq!(messages(&s.take_output()), vec![Message::Keepalive]);
        // The peer's KEEPALIVE at 8 s restarts the hold timer; silence until 17 s expires it.
        s.receive(
            &Message::Keepalive.to_bytes().unwrap(),
            t0 + Duration::from_secs(8),
        )
        .unwrap();
        s.poll(t0 + Duration::from_millis(16_900)).unwrap();
        let e = s.poll(t0 + Duration::from_secs(17)).unwrap_err();
        let SessionError::Sent { sent, .. } = e else {
            panic!()
        };
        assert_eq!((sent.code, sent.subcode), (4, 0));
        let out = messages(&s.take_output());
        assert_eq!(out.last(), Some(&Message::Notification(sent)));
    }

    #[test]
    fn a_hold_time_of_zero_sends_no_keepalives_and_never_expires() {
        let t0 = Instant::now();
        let mut c = cfg();
        c.hold_time = 0;
        let mut s = Session::new(c, "127.0.0.2".parse().unwrap(), RestartState::default(), t0);
        s.receive(&peer_open(65000, 90, Ipv4Addr::new(10, 0, 0, 1), false), t0)
            .unwrap();
        s.receive(&Message::Keepalive.to_bytes().unwrap(), t0)
            .unwrap();
        let _ = s.take_output();
        s.poll(t0 + Duration::from_secs(3600)).unwrap();
        assert!(s.take_output().is_empty());
    }

    #[test]
    fn the_open_wait_is_four_minutes() {
        let t0 = Instant::now();
        let mut s = Session::new(
            cfg(),
            "127.0.0.2".parse().unwrap(),
            RestartState::default(),
            t0,
        );
        s.poll(t0 + Duration::from_secs(239)).unwrap();
        let e = s.poll(t0 + OPEN_HOLD).unwrap_err();
        assert!(matches!(e, SessionError::Sent { ref sent, .. } if sent.code == 4));
    }

    #[test]
    fn messages_out_of_order_are_fsm_errors_and_notifications_end_the_session() {
        let t0 = Instant::now();
        let mut s = Session::new(
            cfg(),
            "127.0.0.2".parse().unwrap(),
            RestartState::default(),
            t0,
        );
        let e = s
            .receive(&Message::Update(Update::default()).to_bytes().unwrap(), t0)
            .unwrap_err();
        assert!(
            matches!(e, SessionError::Sent { ref sent, .. } if sent.code == 5),
            "{e}"
        );
        let mut s = established(false, t0);
        let n = Notification {
            code: 6,
            subcode: 4,
            data: vec![],
        };
        let e = s
            .receive(&Message::Notification(n.clone()).to_bytes().unwrap(), t0)
            .unwrap_err();
        assert_eq!(e, SessionError::PeerNotification(n));
        assert_eq!(s.state(), State::Closed);
    }

    #[test]
    fn messages_split_anywhere_across_reads_arrive_whole() {
        let t0 = Instant::now();
        let mut stream = peer_open(65000, 90, Ipv4Addr::new(10, 0, 0, 1), true);
        stream.extend(Message::Keepalive.to_bytes().unwrap());
        stream.extend(
            Message::Update(Update::end_of_rib(AFI_IPV4))
                .to_bytes()
                .unwrap(),
        );
        stream.extend(
            Message::Update(Update::end_of_rib(AFI_IPV6))
                .to_bytes()
                .unwrap(),
        );
        for cut in 1..stream.len() {
            let mut s = Session::new(
                cfg(),
                "127.0.0.2".parse().unwrap(),
                RestartState::default(),
                t0,
            );
            let mut ev = s.receive(&stream[..cut], t0).unwrap();
            ev.extend(s.receive(&stream[cut..], t0).unwrap());
            assert_eq!(ev.len(), 3, "cut at {cut}: {ev:?}");
            assert_eq!(ev[1], Event::PeerEndOfRib(AFI_IPV4));
            assert_eq!(ev[2], Event::PeerEndOfRib(AFI_IPV6));
        }
    }

    #[test]
    fn many_routes_split_into_updates_under_4096_octets() {
        let t0 = Instant::now();
        let mut s = established(false, t0);
        let _ = s.take_output();
        let many: BTreeSet<Prefix> = (0..2000u32)
            .map(|i| Prefix::host(IpAddr::V4(Ipv4Addr::from(0x0a4d_0000 + i))))
            .collect();
        s.set_routes(many.clone(), t0);
        let out = s.take_output();
        let msgs = messages(&out);
        assert_eq!(msgs.len(), 4);
        let got: BTreeSet<Prefix> = msgs
            .iter()
            .flat_map(|m| match m {
                Message::Update(u) => u.nlri.clone(),
                _ => vec![],
            })
            .collect();
        assert_eq!(got, many);
    }
}
