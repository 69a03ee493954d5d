//! Fragments of tracked TCP connections reach the connection's backend (SPEC
//! R4.1 over R4.2, docs/pipeline.md §6), end to end: the simulated NIC and the slow-path
//! engine nlbd runs (learn events → the host's connection table; punts → the fragment tracker
//! → injection back through the NIC).
//!
//! Frames are built and decoded with etherparse. A fragment's 3-tuple key under `NONE` picks
//! another backend than the connection's 5-tuple for the flows chosen here, so a NIC that
//! hashed TCP fragments would split the segment from its connection.

use etherparse::{Ethernet2Header, Ipv4Header, PacketBuilder};
use firmware_sim::ModelDevice;
use flowtable_compiler::{compile, explain, CompileOptions, Compiled, Flow, Fragment, HealthState};
use nlb_config::parse_config;
use nlb_driver::model::ModelHandle;
use nlb_hw::enums::{KeyType, Verdict};
use nlb_hw::{table_index, FlowKey, Profile};
use nlbd::engine::{Engine, EngineOptions};
use nlbd::health::HealthSnapshot;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// One TCP rule and one UDP rule (one rule per VIP and protocol: before this change the NIC
/// forwarded their fragments itself), both on a tracking target pool with the given session
/// affinity and members (of instances `a`..`h`).
fn config_text(affinity: &str, members: &[&str]) -> String {
    let mut y = format!(
        "forwardingRules:
  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}}
  - {{name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: web}}
targetPools:
  - {{name: web, region: r, sessionAffinity: {affinity}, instances: [{}]}}
instances:
",
        members.join(", ")
    );
    for (i, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        y += &format!(
            "  - {{name: {name}, ip: 192.0.2.{}, zone: z, mac: '02:00:00:00:00:{:02x}'}}\n",
            i + 1,
            0x0a + i
        );
    }
    y
}

const FIVE: [&str; 5] = ["a", "b", "c", "d", "e"];

const WEB: [u8; 4] = [203, 0, 113, 80];
const DNS: [u8; 4] = [203, 0, 113, 53];
/// The client of most flows here.
const CLIENT: [u8; 4] = [198, 51, 100, 9];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xc1];
const NIC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

struct Nic {
    sim: ModelHandle,
    engine: Engine,
}

fn snapshot() -> HealthSnapshot {
    HealthSnapshot {
        taken_at: Instant::now(),
        targets: Vec::new(),
    }
}

fn config(affinity: &str, members: &[&str]) -> flowtable_compiler::Config {
    let (config, d) = parse_config("t.yaml", &config_text(affinity, members));
    assert!(d.is_empty(), "{d}");
    config
}

fn start(affinity: &str, members: &[&str]) -> Nic {
    let config = config(affinity, members);
    let sim = ModelHandle::from_device(ModelDevice::new(
        Profile::by_name("sim").expect("sim profile"),
    ));
    let (engine, _) = Engine::start(
        Box::new(sim.clone()),
        config,
        &snapshot(),
        EngineOptions::default(),
    )
    .expect("engine starts");
    Nic { sim, engine }
}

impl Nic {
    fn compiled(&self) -> &Compiled {
        self.engine.controller().compiled()
    }

    /// The backend a whole TCP packet of a new flow `client:sport` → web gets now.
    fn whole_packet_backend_of(&self, client: [u8; 4], sport: u16) -> String {
        whole_packet_backend(self.compiled(), client, 6, sport, WEB, 80)
    }

    /// Receives one frame; returns the verdict and the frame the NIC sent, if any.
    fn receive(&self, frame: &[u8]) -> (Verdict, Option<Vec<u8>>) {
        let mut out = vec![0u8; 16384];
        let r = self.sim.lock().receive(frame, &mut out).expect("receive");
        let sent = (r.verdict == Verdict::Forward).then(|| out[..r.out_len].to_vec());
        (r.verdict, sent)
    }

    /// Steps the engine until `done` holds (or panics after 10 s).
    fn step_until(&mut self, what: &str, done: impl Fn(&Engine) -> bool) {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !done(&self.engine) {
            assert!(Instant::now() < give_up, "timed out waiting for {what}");
            if !self.engine.step().busy() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// The MAC of a backend, by name (from the configuration the engine compiled).
    fn mac_of(&self, name: &str) -> [u8; 6] {
        let c = self.compiled();
        let id = c
            .symbols
            .backends
            .iter()
            .position(|b| b == name)
            .expect("backend name");
        let m = c.tables.backends[id].mac.to_be_bytes();
        [m[2], m[3], m[4], m[5], m[6], m[7]]
    }

    /// The backend a whole packet of a new flow from [`CLIENT`] gets.
    fn whole_packet_backend(&self, protocol: u8, sport: u16, vip: [u8; 4], dport: u16) -> String {
        whole_packet_backend(self.compiled(), CLIENT, protocol, sport, vip, dport)
    }

    /// The backend of the 3-tuple key (what a NIC hashing fragments under NONE picks), from
    /// the documented key and slot formula over the compiled tables.
    fn three_tuple_backend(&self, protocol: u8, vip: [u8; 4]) -> String {
        let c = self.compiled();
        let t = &c.tables;
        let key = FlowKey::tuple5(protocol, IpAddr::from(CLIENT), 0, IpAddr::from(vip), 0)
            .with_type(KeyType::Tuple3);
        let p = &t.pools[0];
        let slot = p.maglev_base + table_index(key.hash(), p.maglev_size);
        let id = t.maglev[slot as usize].backend;
        c.symbols.backend(id).expect("backend").to_string()
    }
}

/// The backend a whole packet of a new flow gets: `explain` (the compiler's replay of the
/// pipeline, not the slow path).
fn whole_packet_backend(
    c: &Compiled,
    client: [u8; 4],
    protocol: u8,
    sport: u16,
    vip: [u8; 4],
    dport: u16,
) -> String {
    let e = explain(
        &c.tables,
        &c.nic,
        &c.symbols,
        &Flow {
            protocol,
            src: IpAddr::from(client),
            src_port: sport,
            dst: IpAddr::from(vip),
            dst_port: dport,
            fragment: Fragment::No,
        },
    );
    e.backend.expect("a backend")
}

fn tcp_segment(sport: u16, syn: bool, payload: &[u8]) -> Vec<u8> {
    tcp_from(CLIENT, sport, syn, payload)
}

fn tcp_from(client: [u8; 4], sport: u16, syn: bool, payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4(client, WEB, 64)
        .tcp(sport, 80, 1000, 64240);
    let b = if syn { b.syn() } else { b.ack(1).psh() };
    let mut f = Vec::new();
    b.write(&mut f, payload).expect("build");
    f
}

fn udp_datagram(sport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4(CLIENT, DNS, 64)
        .udp(sport, 53)
        .write(&mut f, payload)
        .expect("build");
    f
}

/// Splits an untagged IPv4 frame into fragments of at most `chunk` payload bytes (a
/// multiple of 8), with IP ID `id`; etherparse rewrites each header and its checksum.
fn fragment(frame: &[u8], id: u16, chunk: usize) -> Vec<Vec<u8>> {
    let (eth, rest) = Ethernet2Header::from_slice(frame).expect("ethernet");
    let (ip, payload) = Ipv4Header::from_slice(rest).expect("ipv4");
    let payload = &payload[..ip.payload_len().expect("length") as usize];
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < payload.len() {
        let end = (offset + chunk).min(payload.len());
        let mut h = ip.clone();
        h.identification = id;
        h.dont_fragment = false;
        h.more_fragments = end < payload.len();
        h.fragment_offset = etherparse::IpFragOffset::try_new((offset / 8) as u16).expect("offset");
        h.set_payload_len(end - offset).expect("length");
        h.header_checksum = h.calc_header_checksum();
        let mut f = Vec::new();
        eth.write(&mut f).expect("write");
        h.write(&mut f).expect("write");
        f.extend_from_slice(&payload[offset..end]);
        out.push(f);
        offset = end;
    }
    out
}

/// Destination MAC of a frame the NIC sent, and its IPv4 fragment (offset in bytes, payload).
fn decode(frame: &[u8]) -> ([u8; 6], usize, Vec<u8>) {
    let (eth, rest) = Ethernet2Header::from_slice(frame).expect("ethernet");
    let (ip, payload) = Ipv4Header::from_slice(rest).expect("ipv4");
    let len = ip.payload_len().expect("length") as usize;
    (
        eth.destination,
        usize::from(ip.fragment_offset.value()) * 8,
        payload[..len].to_vec(),
    )
}

/// Every fragment of `frags` that left the NIC (sent straight away or injected by the host),
/// decoded; panics unless each left exactly once, to one MAC, and they reassemble into the
/// original IP payload of `whole`. Returns that MAC.
fn delivered(nic: &mut Nic, whole: &[u8], frags: &[Vec<u8>], order: &[usize]) -> [u8; 6] {
    let injected_before = nic.engine.punts().stats().injected;
    let mut sent = Vec::new();
    let mut punted = 0u64;
    for &i in order {
        match nic.receive(&frags[i]) {
            (Verdict::Forward, Some(f)) => sent.push(f),
            (Verdict::Punt, None) => punted += 1,
            other => panic!("fragment {i}: {other:?}"),
        }
    }
    nic.step_until("the punted fragments to be injected", |e| {
        e.punts().stats().injected >= injected_before + punted
    });
    sent.extend(nic.sim.lock().take_injected().into_iter().map(|i| i.frame));
    assert_eq!(sent.len(), frags.len(), "every fragment leaves once");
    let mut macs: Vec<[u8; 6]> = Vec::new();
    let mut pieces: Vec<(usize, Vec<u8>)> = Vec::new();
    for f in &sent {
        let (mac, offset, data) = decode(f);
        macs.push(mac);
        pieces.push((offset, data));
    }
    macs.dedup();
    assert_eq!(macs.len(), 1, "all fragments to one backend: {macs:02x?}");
    pieces.sort();
    let joined: Vec<u8> = pieces.into_iter().flat_map(|(_, d)| d).collect();
    let (_, rest) = Ethernet2Header::from_slice(whole).expect("ethernet");
    let (ip, payload) = Ipv4Header::from_slice(rest).expect("ipv4");
    assert_eq!(joined, payload[..ip.payload_len().expect("len") as usize]);
    macs[0]
}

/// A client port whose connection (5-tuple) lands on another backend than the 3-tuple key.
fn port_where_keys_differ(nic: &Nic, protocol: u8, vip: [u8; 4], dport: u16, from: u16) -> u16 {
    let three = nic.three_tuple_backend(protocol, vip);
    (from..from + 1000)
        .find(|&p| nic.whole_packet_backend(protocol, p, vip, dport) != three)
        .expect("some port's 5-tuple differs from the 3-tuple with 5 backends")
}

#[test]
fn fragments_of_an_established_connection_reach_its_backend() {
    let mut nic = start("NONE", &FIVE);
    let sport = port_where_keys_differ(&nic, 6, WEB, 80, 40000);
    let conn_backend = nic.whole_packet_backend(6, sport, WEB, 80);
    let conn_mac = nic.mac_of(&conn_backend);
    assert_ne!(conn_backend, nic.three_tuple_backend(6, WEB));

    // The handshake's SYN goes to the 5-tuple backend; the engine learns the connection.
    let (v, out) = nic.receive(&tcp_segment(sport, true, b""));
    assert_eq!(v, Verdict::Forward);
    assert_eq!(decode(&out.expect("sent")).0, conn_mac);
    nic.step_until("the connection to be installed", |e| {
        e.connections().conntrack().valid_count() == 1
    });

    // A data segment of the connection, fragmented on the way (three fragments), arriving
    // out of order: a later one, the first, the last.
    let seg = tcp_segment(sport, false, &[0x5a; 2400]);
    let frags = fragment(&seg, 0x1234, 1000);
    assert_eq!(frags.len(), 3);
    let mac = delivered(&mut nic, &seg, &frags, &[1, 0, 2]);
    assert_eq!(mac, conn_mac, "the connection's backend, {conn_backend}");
    let stats = nic.engine.punts().fragment_stats();
    assert_eq!(
        (stats.first_seen, stats.buffered, stats.released),
        (1, 1, 1)
    );
}

/// Under CLIENT_IP fragments and whole packets share the 2-tuple key, yet a connection may
/// sit on another backend than today's pick: here a reload adds three backends and the
/// client's pick moves, while its established connection stays (SPEC R4.1). Its fragments
/// follow the connection, not the new pick.
#[test]
fn fragments_of_a_connection_whose_pick_moved_stay_with_it() {
    let eight = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let before = compile(
        &config("CLIENT_IP", &FIVE),
        &HealthState::new(),
        &CompileOptions::default(),
    )
    .expect("compiles");
    let after = compile(
        &config("CLIENT_IP", &eight),
        &HealthState::new(),
        &CompileOptions::default(),
    )
    .expect("compiles");
    // A client whose pick moves with the three new backends.
    let client = (1..=250u8)
        .map(|i| [198, 51, 100, i])
        .find(|&c| {
            whole_packet_backend(&before, c, 6, 1, WEB, 80)
                != whole_packet_backend(&after, c, 6, 1, WEB, 80)
        })
        .expect("3 of 8 backends are new: many clients move");
    let conn_backend = whole_packet_backend(&before, client, 6, 40000, WEB, 80);

    let mut nic = start("CLIENT_IP", &FIVE);
    let (_, out) = nic.receive(&tcp_from(client, 40000, true, b""));
    let conn_mac = nic.mac_of(&conn_backend);
    assert_eq!(decode(&out.expect("sent")).0, conn_mac);
    nic.step_until("the connection to be installed", |e| {
        e.connections().conntrack().valid_count() == 1
    });
    nic.engine
        .reload(config("CLIENT_IP", &eight), &snapshot())
        .expect("reload");
    assert_ne!(
        nic.whole_packet_backend_of(client, 40000),
        conn_backend,
        "a new connection of the client now goes elsewhere"
    );
    // The established connection keeps its backend, whole packets and fragments alike.
    let seg = tcp_from(client, 40000, false, &[0x11; 1800]);
    let (_, out) = nic.receive(&seg);
    assert_eq!(decode(&out.expect("sent")).0, conn_mac);
    let frags = fragment(&seg, 0x0777, 1000);
    let mac = delivered(&mut nic, &seg, &frags, &[0, 1]);
    assert_eq!(mac, conn_mac, "the connection's backend, {conn_backend}");
    // A SYN without ACK (with data, fragmented) starts a new selection whatever the
    // connection table holds, as a whole SYN does (docs/pipeline.md §7): the new pick.
    let syn = tcp_from(client, 40000, true, &[0x22; 1800]);
    let frags = fragment(&syn, 0x0778, 1000);
    let mac = delivered(&mut nic, &syn, &frags, &[1, 0]);
    assert_eq!(mac, nic.mac_of(&nic.whole_packet_backend_of(client, 40000)));
}

#[test]
fn fragments_without_a_connection_go_where_a_whole_packet_goes() {
    let mut nic = start("NONE", &FIVE);
    let sport = port_where_keys_differ(&nic, 6, WEB, 80, 42000);
    let want = nic.whole_packet_backend(6, sport, WEB, 80);
    let seg = tcp_segment(sport, false, &[0x33; 2000]);
    let frags = fragment(&seg, 0x0042, 800);
    let mac = delivered(&mut nic, &seg, &frags, &[0, 1, 2]);
    assert_eq!(mac, nic.mac_of(&want));
}

#[test]
fn udp_fragments_keep_the_three_tuple_rule() {
    let mut nic = start("NONE", &FIVE);
    let sport = port_where_keys_differ(&nic, 17, DNS, 53, 43000);
    let dgram = udp_datagram(sport, &[0x77; 2400]);
    let frags = fragment(&dgram, 0x0099, 1000);
    let want = nic.mac_of(&nic.three_tuple_backend(17, DNS));
    for f in &frags {
        let (v, out) = nic.receive(f);
        assert_eq!(v, Verdict::Forward, "the NIC sends them itself");
        assert_eq!(decode(&out.expect("sent")).0, want);
    }
    nic.engine.step();
    assert_eq!(nic.engine.punts().stats().injected, 0);
}
