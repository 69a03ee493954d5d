//! The service LB policy at run time (SPEC R6) through the engine nlbd runs,
//! on the in-process simulated NIC: real SYNs and FINs through the device, learn and teardown
//! events installed by the engine, its policy refresh counting the open connections and
//! loading new weights. Expected shares are worked out by hand from R6's fill rule (fill up to
//! capacity, then spill: a group at capacity whose connections do not close gets no new one,
//! an empty group takes what is left; SPEC R6.1 `WATERFALL_BY_ZONE`, R6.2 capacity =
//! maxConnectionsPerInstance × instances) and read back from the device's serving slice.

use etherparse::PacketBuilder;
use flowtable_compiler::Config;
use nlb_config::parse_config;
use nlb_driver::model::{lock, ModelHandle, SharedModel};
use nlb_hw::enums::Verdict;
use nlb_hw::Profile;
use nlbd::controller::LoadOutcome;
use nlbd::engine::{Engine, EngineOptions};
use nlbd::health::HealthSnapshot;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The NIC in r1-a; group `near` (r1-a: n1, n2) and `far` (r1-b: f1, f2), 10 connections per
/// instance: capacity 20 each. A target pool on another VIP shares instance n1.
const CONFIG: &str = "
nic: {region: r1, zone: r1-a}
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', backendService: web}
  - {name: legacy, IPAddress: 203.0.113.20, IPProtocol: TCP, portRange: '80', target: legacy}
targetPools:
  - {name: legacy, region: r1, instances: [n1]}
serviceLbPolicies:
  - {name: zonal, loadBalancingAlgorithm: WATERFALL_BY_ZONE}
regionBackendServices:
  - name: web
    region: r1
    serviceLbPolicy: zonal
    backends:
      - {group: near, maxConnectionsPerInstance: 10}
      - {group: far, maxConnectionsPerInstance: 10}
instanceGroups:
  - {name: near, zone: r1-a, instances: [n1, n2]}
  - {name: far, zone: r1-b, instances: [f1, f2]}
instances:
  - {name: n1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:11'}
  - {name: n2, ip: 192.0.2.2, zone: r1-a, mac: '02:00:00:00:00:12'}
  - {name: f1, ip: 192.0.2.3, zone: r1-b, mac: '02:00:00:00:00:13'}
  - {name: f2, ip: 192.0.2.4, zone: r1-b, mac: '02:00:00:00:00:14'}
";

fn config(text: &str) -> Config {
    let (c, d) = parse_config("policy.yaml", text);
    assert!(d.is_empty(), "{d}");
    c
}

fn snapshot() -> HealthSnapshot {
    HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    }
}

fn frame(vip: [u8; 4], sport: u16, syn: bool, fin: bool) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc1], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 51, 100, 7], vip, 64)
        .tcp(sport, 80, 1, 64000);
    let b = if syn { b.syn() } else { b.ack(1) };
    let b = if fin { b.fin() } else { b };
    let mut f = Vec::new();
    b.write(&mut f, &[]).unwrap();
    f
}

struct Rig {
    shared: SharedModel,
    engine: Engine,
    out: Vec<u8>,
}

impl Rig {
    fn start(text: &str) -> Rig {
        let sim = ModelHandle::new(Profile::by_name("sim").unwrap());
        let shared = sim.shared();
        let options = EngineOptions {
            // The test refreshes by hand, at the policy times it chooses.
            policy_refresh: Duration::from_secs(3600),
            ..EngineOptions::default()
        };
        let (engine, _) = Engine::start(Box::new(sim), config(text), &snapshot(), options).unwrap();
        Rig {
            shared,
            engine,
            out: vec![0; 16384],
        }
    }

    /// Sends a frame; the backend name it went to.
    fn send(&mut self, f: &[u8]) -> String {
        let r = lock(&self.shared).receive(f, &mut self.out).unwrap();
        assert_eq!(r.verdict, Verdict::Forward);
        let id = r.backend.unwrap();
        let symbols = &self.engine.controller().compiled().symbols;
        symbols.backend(id).unwrap().to_string()
    }

    /// Steps until the engine has handled `events` learn and teardown events in all.
    fn settle(&mut self, events: u64) {
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.engine.connections().stats();
            if s.learn_events + s.teardown_events >= events {
                return;
            }
            assert!(Instant::now() < give_up, "events not handled: {s:?}");
            self.engine.step();
        }
    }

    fn events(&self) -> u64 {
        let s = self.engine.connections().stats();
        s.learn_events + s.teardown_events
    }

    /// Opens connections from source ports `ports` to `vip`; the backend of each.
    fn open(&mut self, vip: [u8; 4], ports: std::ops::Range<u16>) -> Vec<String> {
        let before = self.events();
        let n = ports.len() as u64;
        let mut got = Vec::new();
        // The learn queue holds 64 events (sim profile): in chunks.
        for chunk in ports.collect::<Vec<_>>().chunks(32) {
            let at = self.events();
            for &p in chunk {
                got.push(self.send(&frame(vip, p, true, false)));
            }
            self.settle(at + chunk.len() as u64);
        }
        assert_eq!(self.events(), before + n);
        got
    }

    fn close(&mut self, vip: [u8; 4], ports: std::ops::Range<u16>) {
        for chunk in ports.collect::<Vec<_>>().chunks(32) {
            let at = self.events();
            for &p in chunk {
                self.send(&frame(vip, p, false, true));
            }
            self.settle(at + chunk.len() as u64);
        }
    }

    /// Fraction of the serving slice of `web` per group (first letter of the backend), as
    /// the device's active bank holds it.
    fn shares(&self) -> BTreeMap<char, f64> {
        let c = self.engine.controller();
        let dev = lock(&self.shared);
        let t = dev.bank(c.loader().active_bank());
        let id = c.compiled().symbols.pool_id("web").unwrap();
        let p = t.pools[usize::from(id)];
        let (b, m) = (p.maglev_base as usize, p.maglev_size as usize);
        let mut n: BTreeMap<char, usize> = BTreeMap::new();
        for s in &t.maglev[b..b + m] {
            let name = c.compiled().symbols.backend(s.backend).unwrap_or("?");
            *n.entry(name.chars().next().unwrap()).or_insert(0) += 1;
        }
        n.into_iter()
            .map(|(k, v)| (k, v as f64 / m as f64))
            .collect()
    }
}

const WEB: [u8; 4] = [203, 0, 113, 10];
const LEGACY: [u8; 4] = [203, 0, 113, 20];

fn near(shares: &BTreeMap<char, f64>) -> f64 {
    shares.get(&'n').copied().unwrap_or(0.0)
}

#[test]
fn live_connections_move_the_weights_and_a_reload_keeps_them() {
    let mut rig = Rig::start(CONFIG);
    // Idle: the NIC's zone takes every new connection.
    assert_eq!(near(&rig.shares()), 1.0);
    let r = rig
        .engine
        .refresh_policy_at(1.0)
        .expect("a backend service");
    assert!(
        r.pools.is_empty() && matches!(r.load, LoadOutcome::NotNeeded),
        "{r:?}"
    );

    // 30 connections, all to the NIC's zone (it takes everything until a refresh says it is
    // full), and 40 to the target pool on n1: they are not the service's.
    let first = rig.open(WEB, 1000..1030);
    assert!(first.iter().all(|b| b.starts_with('n')), "{first:?}");
    rig.open(LEGACY, 5000..5040);
    let r = rig.engine.refresh_policy_at(2.0).unwrap();
    assert_eq!(r.live_connections, 30);
    assert_eq!(r.pools, vec!["web".to_string()]);
    assert!(matches!(r.load, LoadOutcome::Loaded(_)), "{r:?}");
    // near holds 30 of its capacity 20 and none of them closes: it gets no new connection,
    // far all of them (R6.1: fill the NIC's zone up to its capacity, then the other zones).
    let s = rig.shares();
    assert!(near(&s) < 0.01, "{s:?}");
    let status = rig.engine.status(false);
    let web = &status.services[0];
    let seen = web.observed.as_ref().unwrap();
    let g = |n: &str| seen.groups.iter().find(|g| g.name == n).unwrap().clone();
    assert_eq!((g("near").live, g("far").live), (30, 0));
    assert!((g("near").utilisation - 1.5).abs() < 1e-9);
    assert_eq!((g("near").tier, g("far").tier), (Some(0), Some(1)));
    assert!(g("near").why.starts_with("at capacity"), "{:?}", g("near"));
    assert_eq!(status.policy.weight_changes, 1);
    // New connections now spill to the other zone, every one while it has room.
    let spill = rig.open(WEB, 2000..2010);
    assert!(spill.iter().all(|b| b.starts_with('f')), "{spill:?}");

    // Nothing changes while nothing changes: a steady load moves no weight.
    let live = 30 + 10;
    let r = rig.engine.refresh_policy_at(3.0).unwrap();
    assert_eq!(r.live_connections, live);
    let changes = rig.engine.status(false).policy.weight_changes;
    for t in 4..20 {
        let r = rig.engine.refresh_policy_at(f64::from(t)).unwrap();
        assert!(r.pools.is_empty(), "t = {t}: {r:?}");
    }
    assert_eq!(rig.engine.status(false).policy.weight_changes, changes);

    // A reload (one more pool on another VIP) keeps the live counts the service was decided
    // with: the new tables serve the same shares, not those of an idle service.
    let before = rig.shares();
    let more = CONFIG.replace(
        "  - {name: legacy, region: r1, instances: [n1]}",
        "  - {name: legacy, region: r1, instances: [n1]}\n  - {name: other, region: r1, instances: [n2]}",
    ).replace(
        "target: legacy}",
        "target: legacy}\n  - {name: other, IPAddress: 203.0.113.30, IPProtocol: TCP, portRange: '80', target: other}",
    );
    rig.engine.reload(config(&more), &snapshot()).unwrap();
    let after = rig.shares();
    assert!(
        (near(&after) - near(&before)).abs() < 0.01,
        "{before:?} → {after:?}"
    );
    assert!(
        near(&after) < 0.01,
        "the reload forgot the live counts: {after:?}"
    );
    let status = rig.engine.status(false);
    let seen = status.services[0].observed.as_ref().unwrap();
    assert_eq!(seen.groups.iter().map(|g| g.live).sum::<u64>(), live);

    // FINs: closed connections are not live. near's 30 close: 10 left (far's), and near is
    // empty: everything to the NIC's zone again.
    rig.close(WEB, 1000..1030);
    let r = rig.engine.refresh_policy_at(30.0).unwrap();
    assert_eq!(r.live_connections, 10);
    assert_eq!(r.pools, vec!["web".to_string()]);
    assert_eq!(near(&rig.shares()), 1.0, "{:?}", rig.shares());
    let back = rig.open(WEB, 3000..3010);
    assert!(back.iter().all(|b| b.starts_with('n')), "{back:?}");
}

#[test]
fn without_backend_services_there_is_no_refresh() {
    let text = "
forwardingRules:
  - {name: web, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: web}
targetPools:
  - {name: web, region: r1, instances: [n1]}
instances:
  - {name: n1, ip: 192.0.2.1, zone: r1-a, mac: '02:00:00:00:00:11'}
";
    let mut rig = Rig::start(text);
    rig.open(WEB, 1..20);
    assert!(rig.engine.refresh_policy_at(1.0).is_none());
    let status = rig.engine.status(false);
    assert!(status.services.is_empty());
    assert_eq!(status.policy.refreshes, 0);
}
