//! Frames the NIC punts to the host, by reason (SPEC R4.3, R4.4, R10.2).
//!
//! - `FRAGMENT_NEEDS_STATE`: every fragment of a datagram to a VIP with several rules for its
//!   protocol, and every TCP fragment of a pool that tracks connections (`docs/pipeline.md`
//!   §4–§6). The first fragment carries its rule in the punt header (a later one does too when
//!   its VIP has a single rule). The host picks the first fragment's backend
//!   ([`lookup::first_fragment`]): for a TCP fragment of a tracking pool, the backend of its
//!   established connection in the host's copy of the connection table, or without one the
//!   backend a whole packet of the flow gets (5-tuple under `NONE`), so the fragments of a
//!   connection's segment reach the connection's backend (SPEC R4.1); for any other fragment
//!   the way the NIC picks one for a fragment (the pool's affinity key narrowed to the
//!   3-tuple, SPEC R4.2). It remembers the decision in the [`FragmentTracker`] and injects the
//!   frame to that backend with the pool's delivery. Later fragments follow the decision, or
//!   wait in the tracker until their first fragment arrives.
//! - ICMP errors, whatever the reason: [`icmp::decide`] and injection.
//! - Anything else is counted and dropped: nothing is lost silently.
//!
//! [`PuntHandler::decide`] is the decision alone (no device); [`PuntHandler::handle`] decides
//! and injects. Its parts: [`fragments`] (the tracker), [`icmp`] (ICMP errors), [`lookup`] (the
//! decisions, taken by the reference semantics).

pub mod fragments;
pub mod icmp;
pub mod lookup;

use self::fragments::{
    DatagramKey, Decision, FragmentLimits, FragmentStats, FragmentTracker, LaterFragment,
};
use self::icmp::IcmpMiss;
use self::lookup::Choice;
use nlb_driver::conntrack::Conntrack;
use nlb_driver::device::{Device, DeviceError};
use nlb_driver::queues::{Injector, PuntedFrame, QueueError};
use nlb_hw::enums::{KeyType, Reason};
use nlb_hw::{FlowKey, Tables};
use nlb_reference::parse::{parse, IpHeaders, Parsed};
use std::time::Instant;

/// Why a punted frame was not sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PuntDrop {
    /// The punt window holds less than the frame (a frame over 9728 bytes).
    Truncated,
    /// Not an IP frame, or malformed.
    Unparsable,
    /// A first fragment whose rule, pool or backend the active tables do not have.
    NoBackend,
    /// The fragment tracker was full (its caps; counted in its `overflow_drops` too).
    TrackerFull,
    /// An ICMP error that could not be sent on.
    Icmp(IcmpMiss),
    /// A reason the slow path has nothing to do for.
    Unhandled,
    /// The inject queue was full.
    InjectFull,
    /// The inject window cannot hold the frame.
    InjectTooLong,
}

impl PuntDrop {
    /// Every drop kind, for metrics.
    pub const ALL: [PuntDrop; 12] = [
        PuntDrop::Truncated,
        PuntDrop::Unparsable,
        PuntDrop::NoBackend,
        PuntDrop::TrackerFull,
        PuntDrop::Icmp(IcmpMiss::NotAnError),
        PuntDrop::Icmp(IcmpMiss::NoQuote),
        PuntDrop::Icmp(IcmpMiss::NoRule),
        PuntDrop::Icmp(IcmpMiss::AclDenied),
        PuntDrop::Icmp(IcmpMiss::NoBackend),
        PuntDrop::Unhandled,
        PuntDrop::InjectFull,
        PuntDrop::InjectTooLong,
    ];

    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            PuntDrop::Truncated => "truncated",
            PuntDrop::Unparsable => "unparsable",
            PuntDrop::NoBackend => "no_backend",
            PuntDrop::TrackerFull => "tracker_full",
            PuntDrop::Icmp(m) => m.label(),
            PuntDrop::Unhandled => "unhandled_reason",
            PuntDrop::InjectFull => "inject_full",
            PuntDrop::InjectTooLong => "inject_too_long",
        }
    }

    fn index(self) -> usize {
        PuntDrop::ALL.iter().position(|d| *d == self).unwrap_or(0)
    }
}

/// Counters of the punt handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PuntStats {
    /// Frames popped from the punt queue, by punt reason (index = reason value).
    pub by_reason: [u64; Reason::ALL.len()],
    /// Frames injected to a backend (punted ones and released buffered fragments).
    pub injected: u64,
    /// ICMP errors injected.
    pub icmp_injected: u64,
    /// Frames dropped, by [`PuntDrop::ALL`] index.
    pub drops: [u64; PuntDrop::ALL.len()],
    /// Times the punt queue overflowed (frames the NIC had to drop; seen by polling).
    pub queue_overflows: u64,
}

impl Default for PuntStats {
    fn default() -> Self {
        PuntStats {
            by_reason: [0; Reason::ALL.len()],
            injected: 0,
            icmp_injected: 0,
            drops: [0; PuntDrop::ALL.len()],
            queue_overflows: 0,
        }
    }
}

impl PuntStats {
    /// Drops of one kind.
    pub fn dropped(&self, kind: PuntDrop) -> u64 {
        self.drops[kind.index()]
    }

    /// Drops of every kind.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// What to do with a punted frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Inject the punted frame to this backend, then the `released` fragments (buffered
    /// earlier, in arrival order) the same way.
    Inject {
        /// Where.
        to: Choice,
        /// Later fragments that arrived before this first fragment.
        released: Vec<Vec<u8>>,
        /// It is an ICMP error.
        icmp: bool,
    },
    /// A later fragment kept until its first fragment arrives.
    Buffered,
    /// Dropped and counted.
    Dropped(PuntDrop),
}

/// What the decisions read: the serving tables and the host's copy of the connection table.
#[derive(Debug, Clone, Copy)]
pub struct PuntContext<'a> {
    /// The tables the NIC serves now.
    pub tables: &'a Tables,
    /// The connection table (ICMP errors of established flows), when there is one.
    pub conntrack: Option<&'a Conntrack>,
}

/// Decides and sends punted frames; owns the fragment tracker.
#[derive(Debug)]
pub struct PuntHandler {
    tracker: FragmentTracker,
    limits: FragmentLimits,
    /// Counters of trackers replaced by [`PuntHandler::forget_fragments`].
    carried: FragmentStats,
    stats: PuntStats,
}

impl PuntHandler {
    /// A handler with a fragment tracker of these limits.
    pub fn new(limits: FragmentLimits) -> PuntHandler {
        PuntHandler {
            tracker: FragmentTracker::new(limits),
            limits,
            carried: FragmentStats::default(),
            stats: PuntStats::default(),
        }
    }

    /// The handler's counters.
    pub fn stats(&self) -> &PuntStats {
        &self.stats
    }

    /// The fragment tracker's counters (since the handler was made).
    pub fn fragment_stats(&self) -> FragmentStats {
        let mut s = self.tracker.stats();
        s += self.carried;
        s
    }

    /// The fragment tracker (occupancy for metrics).
    pub fn tracker(&self) -> &FragmentTracker {
        &self.tracker
    }

    /// Forgets fragment state past its timeout (call it on a timer).
    pub fn expire(&mut self, now: Instant) {
        self.tracker.expire(now);
    }

    /// Forgets every datagram (after a reload renumbered rules, pools or backends: the
    /// decisions hold ids). Buffered fragments are counted as timed out; the counters carry
    /// on.
    pub fn forget_fragments(&mut self) {
        let limits = self.limits;
        let mut old = std::mem::replace(&mut self.tracker, FragmentTracker::new(limits));
        // Past every entry's deadline: all of them expire, and are counted as such.
        old.expire(Instant::now() + limits.timeout + std::time::Duration::from_secs(1));
        self.carried += old.stats();
    }

    /// Counts a punt queue overflow seen by polling.
    pub fn note_overflow(&mut self) {
        self.stats.queue_overflows += 1;
    }

    /// Decides what to do with one punted frame (no device access). Counts the frame by its
    /// reason and, when it is dropped, by why.
    pub fn decide(
        &mut self,
        punted: &PuntedFrame,
        ctx: &PuntContext<'_>,
        now: Instant,
    ) -> Disposition {
        let h = &punted.header;
        if let Some(n) = self.stats.by_reason.get_mut(h.reason.value() as usize) {
            *n += 1;
        }
        let d = self.decide_inner(punted, ctx, now);
        if let Disposition::Dropped(why) = d {
            self.stats.drops[why.index()] += 1;
        }
        d
    }

    fn decide_inner(
        &mut self,
        punted: &PuntedFrame,
        ctx: &PuntContext<'_>,
        now: Instant,
    ) -> Disposition {
        let h = &punted.header;
        if punted.frame.len() < usize::from(h.frame_len) {
            return Disposition::Dropped(PuntDrop::Truncated);
        }
        let ip = match parse(&punted.frame) {
            Ok(Parsed::Ip(ip)) => ip,
            _ => return Disposition::Dropped(PuntDrop::Unparsable),
        };
        if ip.icmp_error {
            return match icmp::decide(ctx.tables, ctx.conntrack, &ip) {
                Ok(to) => Disposition::Inject {
                    to,
                    released: Vec::new(),
                    icmp: true,
                },
                Err(miss) => Disposition::Dropped(PuntDrop::Icmp(miss)),
            };
        }
        if h.reason != Reason::FragmentNeedsState || !ip.is_fragment {
            return Disposition::Dropped(PuntDrop::Unhandled);
        }
        let key = DatagramKey {
            src: ip.src,
            dst: ip.dst,
            protocol: ip.protocol,
            ip_id: h.ip_id,
        };
        if h.rule_valid && !ip.is_later_fragment() {
            let Some(to) = lookup::first_fragment(
                ctx.tables,
                ctx.conntrack,
                h.rule,
                &flow_of(&ip),
                ip.tcp_flags,
            ) else {
                return Disposition::Dropped(PuntDrop::NoBackend);
            };
            let decision = Decision {
                rule: to.rule,
                pool: to.pool,
                backend: to.backend,
            };
            let released = self.tracker.first_fragment(key, decision, now);
            return Disposition::Inject {
                to,
                released,
                icmp: false,
            };
        }
        match self.tracker.later_fragment(key, &punted.frame, now) {
            LaterFragment::Send(d) => Disposition::Inject {
                to: Choice {
                    rule: d.rule,
                    pool: d.pool,
                    backend: d.backend,
                },
                released: Vec::new(),
                icmp: false,
            },
            LaterFragment::Buffered => Disposition::Buffered,
            LaterFragment::Dropped => Disposition::Dropped(PuntDrop::TrackerFull),
        }
    }

    /// Decides one punted frame and injects what is to be sent. Device errors are returned;
    /// a full inject queue or an oversized frame is a counted drop.
    pub fn handle<D: Device + ?Sized, I: Injector>(
        &mut self,
        dev: &mut D,
        queues: &mut I,
        punted: &PuntedFrame,
        ctx: &PuntContext<'_>,
        now: Instant,
    ) -> Result<Disposition, DeviceError> {
        let d = self.decide(punted, ctx, now);
        if let Disposition::Inject { to, released, icmp } = &d {
            // The punted frame itself from where it lies (no copy on the host rings), then
            // the fragments that waited for it.
            for k in 0..=released.len() {
                let sent = match k.checked_sub(1) {
                    None => queues.inject_punted(dev, to.backend, to.pool, punted),
                    Some(r) => queues.inject_frame(dev, to.backend, to.pool, &released[r]),
                };
                match sent {
                    Ok(()) => {
                        self.stats.injected += 1;
                        if *icmp {
                            self.stats.icmp_injected += 1;
                        }
                    }
                    Err(QueueError::InjectFull) => {
                        self.stats.drops[PuntDrop::InjectFull.index()] += 1;
                    }
                    Err(QueueError::FrameTooLong { .. }) | Err(QueueError::Decode(_)) => {
                        self.stats.drops[PuntDrop::InjectTooLong.index()] += 1;
                    }
                    Err(QueueError::Device(e)) => return Err(e),
                }
            }
        }
        Ok(d)
    }
}

/// The 5-tuple of a packet with ports (client → VIP).
fn flow_of(ip: &IpHeaders) -> FlowKey {
    FlowKey {
        key_type: KeyType::Tuple5,
        protocol: ip.protocol,
        src_port: ip.src_port,
        dst_port: ip.dst_port,
        src_addr: ip.src,
        dst_addr: ip.dst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv4Header, PacketBuilder};
    use flowtable_compiler::{compile, explain, CompileOptions, Flow, Fragment, HealthState};
    use nlb_driver::model::ModelHandle;
    use nlb_driver::queues::Queues;
    use nlb_hw::layouts::PuntHeader;
    use std::net::IpAddr;
    use std::time::Duration;

    /// Two UDP rules on one VIP: the NIC punts every fragment to it.
    const CONFIG: &str = "
forwardingRules:
  - {name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}
  - {name: game, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '7000-7100', target: game}
targetPools:
  - {name: dns, region: r, instances: [a, b, c]}
  - {name: game, region: r, instances: [b, c, d]}
instances:
  - {name: a, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:00:0a'}
  - {name: b, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:00:0b'}
  - {name: c, ip: 192.0.2.3, zone: z, mac: '02:00:00:00:00:0c'}
  - {name: d, ip: 192.0.2.4, zone: z, mac: '02:00:00:00:00:0d'}
";

    fn compiled() -> flowtable_compiler::Compiled {
        let (config, d) = nlb_config::parse_config("t.yaml", CONFIG);
        assert!(d.is_empty(), "{d}");
        compile(&config, &HealthState::new(), &CompileOptions::default()).unwrap()
    }

    /// The fragments of one UDP datagram client:sport → VIP:dport with IP ID `id`, cut at
    /// 1000-byte boundaries (etherparse builds the datagram; the IP headers are rewritten per
    /// fragment).
    fn fragments(client: [u8; 4], sport: u16, dport: u16, id: u16) -> Vec<Vec<u8>> {
        let mut whole = Vec::new();
        PacketBuilder::ipv4(client, [203, 0, 113, 53], 64)
            .udp(sport, dport)
            .write(&mut whole, &[0x5a; 2500])
            .unwrap();
        let (ip, payload) = Ipv4Header::from_slice(&whole).unwrap();
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < payload.len() {
            let end = (offset + 1000).min(payload.len());
            let mut h = ip.clone();
            h.identification = id;
            h.more_fragments = end < payload.len();
            h.fragment_offset = etherparse::IpFragOffset::try_new((offset / 8) as u16).unwrap();
            h.protocol = IpNumber::UDP;
            h.set_payload_len(end - offset).unwrap();
            h.header_checksum = h.calc_header_checksum();
            let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0xc1, 0x08, 0x00];
            h.write(&mut frame).unwrap();
            frame.extend_from_slice(&payload[offset..end]);
            out.push(frame);
            offset = end;
        }
        out
    }

    /// Runs frames through the simulated NIC loaded with the compiled tables; returns what it
    /// punted.
    fn punt_through_nic(c: &flowtable_compiler::Compiled, frames: &[Vec<u8>]) -> Vec<PuntedFrame> {
        let sim = ModelHandle::from_device(firmware_sim::ModelDevice::from_tables(
            c.tables.clone(),
            c.nic,
        ));
        let mut dev = sim.clone();
        let mut q = Queues::new();
        let mut out = vec![0u8; 16384];
        let mut punted = Vec::new();
        for f in frames {
            sim.lock().receive(f, &mut out).unwrap();
            while let Some(p) = q.pop_punt(&mut dev).unwrap() {
                punted.push(p);
            }
        }
        punted
    }

    fn expected_backend(
        c: &flowtable_compiler::Compiled,
        client: &str,
        sport: u16,
        dport: u16,
    ) -> u16 {
        // What the NIC sends a first fragment to on a VIP with a single rule: explain of a
        // first fragment (3-tuple Maglev) — independent of this module.
        let e = explain(
            &c.tables,
            &c.nic,
            &c.symbols,
            &Flow {
                protocol: 17,
                src: client.parse::<IpAddr>().unwrap(),
                src_port: sport,
                dst: "203.0.113.53".parse::<IpAddr>().unwrap(),
                dst_port: dport,
                fragment: Fragment::No,
            },
        );
        let pool = e.pool_id.unwrap();
        // A fragment's key under NONE is the 3-tuple, whatever the ports.
        let key = FlowKey::tuple5(
            17,
            client.parse().unwrap(),
            0,
            "203.0.113.53".parse().unwrap(),
            0,
        )
        .with_type(KeyType::Tuple3);
        let p = &c.tables.pools[usize::from(pool)];
        let slot = p.maglev_base + nlb_hw::table_index(key.hash(), p.maglev_size);
        c.tables.maglev[slot as usize].backend
    }

    #[test]
    fn fragments_follow_the_first_in_any_order() {
        let c = compiled();
        let ctx = PuntContext {
            tables: &c.tables,
            conntrack: None,
        };
        let t0 = Instant::now();
        for (i, (client, dport)) in [
            ("198.51.100.7", 53u16),
            ("198.51.100.8", 7050),
            ("198.51.100.9", 53),
        ]
        .into_iter()
        .enumerate()
        {
            let frags = fragments(
                client.parse::<std::net::Ipv4Addr>().unwrap().octets(),
                4000 + i as u16,
                dport,
                77,
            );
            assert_eq!(frags.len(), 3);
            let punted = punt_through_nic(&c, &frags);
            assert_eq!(
                punted.len(),
                3,
                "the NIC punts every fragment of a two-rule VIP"
            );
            assert!(punted
                .iter()
                .all(|p| p.header.reason == Reason::FragmentNeedsState));
            let want = expected_backend(&c, client, 4000 + i as u16, dport);
            let rule = c
                .symbols
                .rules
                .iter()
                .position(|r| r == if dport == 53 { "dns" } else { "game" })
                .unwrap() as u16;
            let mut h = PuntHandler::new(FragmentLimits::default());
            // Last, middle, then first: the two early ones wait and leave with the first.
            assert_eq!(h.decide(&punted[2], &ctx, t0), Disposition::Buffered);
            assert_eq!(h.decide(&punted[1], &ctx, t0), Disposition::Buffered);
            match h.decide(&punted[0], &ctx, t0) {
                Disposition::Inject { to, released, icmp } => {
                    assert_eq!(to.backend, want);
                    assert_eq!(to.rule, rule);
                    assert!(!icmp);
                    assert_eq!(
                        released,
                        vec![punted[2].frame.clone(), punted[1].frame.clone()]
                    );
                }
                other => panic!("{other:?}"),
            }
            // A duplicate later fragment now goes straight the same way.
            match h.decide(&punted[1], &ctx, t0) {
                Disposition::Inject { to, released, .. } => {
                    assert_eq!(to.backend, want);
                    assert!(released.is_empty());
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn injected_fragments_leave_the_nic_to_the_backend() {
        let c = compiled();
        let sim = ModelHandle::from_device(firmware_sim::ModelDevice::from_tables(
            c.tables.clone(),
            c.nic,
        ));
        let mut dev = sim.clone();
        let mut q = Queues::new();
        let frags = fragments([198, 51, 100, 20], 5555, 7001, 9);
        let punted = punt_through_nic(&c, &frags);
        let want = expected_backend(&c, "198.51.100.20", 5555, 7001);
        let mac = c.tables.backends[usize::from(want)].mac;
        let ctx = PuntContext {
            tables: &c.tables,
            conntrack: None,
        };
        let mut h = PuntHandler::new(FragmentLimits::default());
        let now = Instant::now();
        for p in [&punted[1], &punted[0], &punted[2]] {
            h.handle(&mut dev, &mut q, p, &ctx, now).unwrap();
        }
        assert_eq!(h.stats().injected, 3);
        let sent = sim.lock().take_injected();
        assert_eq!(sent.len(), 3);
        for s in &sent {
            let eth = etherparse::Ethernet2Header::from_slice(&s.frame).unwrap().0;
            let dst = u64::from_be_bytes([
                0,
                0,
                eth.destination[0],
                eth.destination[1],
                eth.destination[2],
                eth.destination[3],
                eth.destination[4],
                eth.destination[5],
            ]);
            assert_eq!(dst, mac, "L2 DSR to the chosen backend's MAC");
        }
        // In the order the host sent them: the first fragment, then the early one.
        assert_eq!(sent[0].frame[14..], frags[0][14..]);
        assert_eq!(sent[1].frame[14..], frags[1][14..]);
    }

    #[test]
    fn other_reasons_and_garbage_are_counted() {
        let c = compiled();
        let ctx = PuntContext {
            tables: &c.tables,
            conntrack: None,
        };
        let mut h = PuntHandler::new(FragmentLimits::default());
        let now = Instant::now();
        let junk = PuntedFrame {
            header: PuntHeader {
                reason: Reason::FragmentNeedsState,
                frame_len: 4,
                ..PuntHeader::default()
            },
            frame: vec![1, 2, 3, 4],
            slot: None,
        };
        assert_eq!(
            h.decide(&junk, &ctx, now),
            Disposition::Dropped(PuntDrop::Unparsable)
        );
        let short = PuntedFrame {
            header: PuntHeader {
                frame_len: 10_000,
                ..junk.header
            },
            frame: vec![0; 9728],
            slot: None,
        };
        assert_eq!(
            h.decide(&short, &ctx, now),
            Disposition::Dropped(PuntDrop::Truncated)
        );
        let frags = fragments([198, 51, 100, 7], 1, 53, 1);
        let odd = PuntedFrame {
            header: PuntHeader {
                reason: Reason::NoRule,
                frame_len: frags[0].len() as u16,
                ..PuntHeader::default()
            },
            frame: frags[0].clone(),
            slot: None,
        };
        assert_eq!(
            h.decide(&odd, &ctx, now),
            Disposition::Dropped(PuntDrop::Unhandled)
        );
        assert_eq!(h.stats().dropped_total(), 3);
        assert_eq!(
            h.stats().by_reason[Reason::FragmentNeedsState.value() as usize],
            2
        );
        assert_eq!(h.stats().by_reason[Reason::NoRule.value() as usize], 1);
        // A first fragment after the tracker forgot its datagram still goes; a lone later
        // fragment times out and is counted.
        let punted = punt_through_nic(&c, &fragments([198, 51, 100, 9], 9, 53, 5));
        let mut h = PuntHandler::new(FragmentLimits {
            timeout: Duration::from_secs(1),
            ..FragmentLimits::default()
        });
        assert_eq!(h.decide(&punted[1], &ctx, now), Disposition::Buffered);
        h.expire(now + Duration::from_secs(2));
        assert_eq!(h.fragment_stats().timeout_drops, 1);

        // After a renumbering reload the decisions are forgotten: a waiting fragment is
        // counted as timed out, and its first fragment releases nothing.
        let mut h = PuntHandler::new(FragmentLimits::default());
        assert_eq!(h.decide(&punted[2], &ctx, now), Disposition::Buffered);
        h.forget_fragments();
        assert_eq!(h.tracker().datagrams(), 0);
        assert_eq!(h.fragment_stats().timeout_drops, 1);
        assert_eq!(h.fragment_stats().buffered, 1);
        match h.decide(&punted[0], &ctx, now) {
            Disposition::Inject { released, .. } => assert!(released.is_empty()),
            other => panic!("{other:?}"),
        }
    }
}
