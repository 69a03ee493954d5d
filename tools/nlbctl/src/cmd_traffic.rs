//! `nlbctl traffic`: a pcap of client traffic for a configuration, to feed `nlbctl sim`.

use crate::common::CliError;
use etherparse::{Icmpv4Type, PacketBuilder};
use firmware_sim::pcap::FrameWriter;
use flowtable_compiler::{Config, PortRange, Protocol};
use nlb_config::load_config;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Write a pcap of client traffic toward every forwarding rule of a configuration.
///
/// For each rule, `--flows` client flows from documentation addresses: TCP as SYN, data and
/// FIN; UDP as two datagrams. Then the cases a load balancer must handle: a UDP datagram in
/// IPv4 fragments, an ICMP "fragmentation needed" about a flow, packets to no VIP, an ARP
/// frame and a truncated frame. Flows are interleaved; the same seed gives the same file.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Configuration file (YAML or JSON), or Kubernetes manifests (a file, a directory, or
    /// `-`).
    config: PathBuf,
    /// Output pcap file.
    #[arg(short, long, value_name = "OUT.pcap")]
    output: PathBuf,
    /// Flows per forwarding rule.
    #[arg(long, default_value_t = 8)]
    flows: u32,
    /// Seed of the client addresses, ports and interleaving.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Deterministic xorshift64*: the file must not change between runs or hosts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const CLIENT_MAC: [u8; 6] = [0x02, 0xc1, 0x00, 0x00, 0x00, 0x01];
const ROUTER_MAC: [u8; 6] = [0x02, 0xfe, 0x00, 0x00, 0x00, 0x01];

fn mac_bytes(mac: u64) -> [u8; 6] {
    let b = mac.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// (source, source port, destination, destination port).
type Ends = (IpAddr, u16, IpAddr, u16);

/// One client flow: a list of frames sent in order.
type Flow = Vec<Vec<u8>>;

fn client_addr(rng: &mut Rng, v6: bool) -> IpAddr {
    if v6 {
        let mut a = [0u8; 16];
        a[..6].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0x0c, 0x11]);
        a[8..].copy_from_slice(&rng.next().to_be_bytes());
        IpAddr::from(a)
    } else {
        IpAddr::from([198, 51, 100, 1 + rng.below(254) as u8])
    }
}

struct Frames {
    nic: [u8; 6],
}

impl Frames {
    fn l4(
        &self,
        src: IpAddr,
        dst: IpAddr,
        l4: impl FnOnce(IpStep) -> Vec<u8>,
    ) -> Result<Vec<u8>, CliError> {
        let eth = PacketBuilder::ethernet2(CLIENT_MAC, self.nic);
        let l3 = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
            (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 64),
            _ => return Err(CliError::internal("mixed address families")),
        };
        Ok(l4(l3))
    }

    fn tcp(
        &self,
        (src, sport, dst, dport): Ends,
        seq: u32,
        flags: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, CliError> {
        self.l4(src, dst, |l3| {
            let mut out = Vec::new();
            let mut t = l3.tcp(sport, dport, seq, 65535);
            if flags.contains('S') {
                t = t.syn();
            }
            if flags.contains('A') {
                t = t.ack(1);
            }
            if flags.contains('F') {
                t = t.fin();
            }
            if flags.contains('P') {
                t = t.psh();
            }
            // Writing into a Vec cannot fail for these sizes.
            let _ = t.write(&mut out, payload);
            out
        })
    }

    fn udp(
        &self,
        src: IpAddr,
        sport: u16,
        dst: IpAddr,
        dport: u16,
        payload: &[u8],
    ) -> Result<Vec<u8>, CliError> {
        self.l4(src, dst, |l3| {
            let mut out = Vec::new();
            let _ = l3.udp(sport, dport).write(&mut out, payload);
            out
        })
    }
}

type IpStep = etherparse::PacketBuilderStep<etherparse::IpHeaders>;

/// Splits an IPv4 frame (Ethernet II, no options) into fragments of `chunk` payload bytes
/// (a multiple of 8), with identification `id`.
fn ipv4_fragments(frame: &[u8], id: u16, chunk: usize) -> Vec<Vec<u8>> {
    let (eth, ip) = frame.split_at(14);
    let (hdr, payload) = ip.split_at(20);
    let mut out = Vec::new();
    let mut off = 0;
    while off < payload.len() {
        let end = (off + chunk).min(payload.len());
        let mut h = hdr.to_vec();
        let total = (20 + end - off) as u16;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        let mf = if end < payload.len() { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&(mf | (off / 8) as u16).to_be_bytes());
        h[10..12].copy_from_slice(&[0, 0]);
        let sum = internet_checksum(&h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        let mut f = eth.to_vec();
        f.extend_from_slice(&h);
        f.extend_from_slice(&payload[off..end]);
        out.push(f);
        off = end;
    }
    out
}

fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in bytes.chunks(2) {
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The flows of one configuration.
fn flows(
    config: &Config,
    nic: [u8; 6],
    per_rule: u32,
    rng: &mut Rng,
) -> Result<Vec<Flow>, CliError> {
    let f = Frames { nic };
    let mut flows: Vec<Flow> = Vec::new();
    let mut first_udp4: Option<(IpAddr, u16)> = None;
    let mut first_tcp4: Option<(IpAddr, u16)> = None;
    for rule in &config.forwarding_rules {
        let vip = rule.ip_address;
        for _ in 0..per_rule {
            // A rule with several ports: each flow to one of its ranges (no draw for one range,
            // so single-range rules give the same traffic as before).
            let range = match rule.port_ranges.len() {
                0 | 1 => rule.port_ranges.first().copied().unwrap_or(PortRange::ALL),
                n => rule.port_ranges[rng.below(n as u64) as usize],
            };
            let (lo, hi) = (range.lo.max(1), range.hi.max(1));
            let client = client_addr(rng, vip.is_ipv6());
            let sport = 1024 + rng.below(64_000) as u16;
            let dport = lo + rng.below(u64::from(hi - lo) + 1) as u16;
            let seq = rng.next() as u32;
            // An L3_DEFAULT rule takes TCP and UDP on the ports no other rule of its VIP
            // holds, and every other protocol: its flows here are TCP or UDP, by turns (the
            // NIC does not forward other protocols yet, docs/pipeline.md §3).
            let protocol = match rule.ip_protocol {
                Protocol::L3Default if flows.len().is_multiple_of(2) => Protocol::Tcp,
                Protocol::L3Default => Protocol::Udp,
                p => p,
            };
            let flow = match protocol {
                Protocol::Tcp | Protocol::L3Default => {
                    if vip.is_ipv4() && first_tcp4.is_none() {
                        first_tcp4 = Some((vip, dport));
                    }
                    vec![
                        f.tcp((client, sport, vip, dport), seq, "S", b"")?,
                        f.tcp(
                            (client, sport, vip, dport),
                            seq + 1,
                            "AP",
                            b"GET / HTTP/1.1\r\n\r\n",
                        )?,
                        f.tcp((client, sport, vip, dport), seq + 19, "AF", b"")?,
                    ]
                }
                Protocol::Udp => {
                    if vip.is_ipv4() && first_udp4.is_none() {
                        first_udp4 = Some((vip, dport));
                    }
                    vec![
                        f.udp(client, sport, vip, dport, b"query one")?,
                        f.udp(client, sport, vip, dport, b"query two")?,
                    ]
                }
            };
            flows.push(flow);
        }
    }
    // A UDP datagram in fragments (SPEC R4.2): all of them must reach one backend.
    if let Some((vip, dport)) = first_udp4 {
        let client = client_addr(rng, false);
        let whole = f.udp(client, 5353, vip, dport, &[0x5a; 1200])?;
        flows.push(ipv4_fragments(&whole, 0x4242, 512));
    }
    // ICMP fragmentation-needed from a router about a backend's reply to a client (the
    // path-MTU case, SPEC R10.2): it quotes VIP -> client.
    if let Some((vip, dport)) = first_tcp4 {
        let client = client_addr(rng, false);
        let reply = f.tcp((vip, dport, client, 40000), 7, "AP", &[0u8; 8])?;
        let quoted = &reply[14..14 + 20 + 8];
        let (IpAddr::V4(v), IpAddr::V4(router)) = (vip, IpAddr::from([192, 0, 2, 254])) else {
            return Err(CliError::internal("ICMP case needs IPv4"));
        };
        let mut out = Vec::new();
        let _ = PacketBuilder::ethernet2(ROUTER_MAC, nic)
            .ipv4(router.octets(), v.octets(), 64)
            .icmpv4(Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded {
                    next_hop_mtu: 1400,
                },
            ))
            .write(&mut out, quoted);
        flows.push(vec![out]);
    }
    // Not for any VIP, not IP, and malformed.
    flows.push(vec![f.tcp(
        (
            IpAddr::from([198, 51, 100, 77]),
            5555,
            IpAddr::from([192, 0, 2, 99]),
            22,
        ),
        1,
        "S",
        b"",
    )?]);
    let mut arp = Vec::new();
    arp.extend_from_slice(&[0xff; 6]);
    arp.extend_from_slice(&CLIENT_MAC);
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&CLIENT_MAC);
    arp.extend_from_slice(&[198, 51, 100, 1, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1]);
    flows.push(vec![arp]);
    if let Some(first) = flows.first().and_then(|f| f.first()) {
        flows.push(vec![first[..30.min(first.len())].to_vec()]);
    }
    Ok(flows)
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let config = load_config(&args.config)?;
    let mut rng = Rng(args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut flows = flows(&config, mac_bytes(config.nic.mac), args.flows, &mut rng)?;
    let file = std::fs::File::create(&args.output).map_err(|e| {
        CliError::user(format!(
            "error: cannot create {}: {e}",
            args.output.display()
        ))
    })?;
    let mut w = FrameWriter::new(std::io::BufWriter::new(file))
        .map_err(|e| CliError::user(format!("error: {}: {e}", args.output.display())))?;
    // Interleave: repeatedly take the next frame of a random unfinished flow.
    let mut next = vec![0usize; flows.len()];
    let mut written = 0u64;
    let mut live: Vec<usize> = (0..flows.len()).collect();
    while !live.is_empty() {
        let pick = rng.below(live.len() as u64) as usize;
        let flow = live[pick];
        let frame = std::mem::take(&mut flows[flow][next[flow]]);
        w.write(Duration::from_micros(written * 10), &frame)
            .map_err(|e| CliError::user(format!("error: {}: {e}", args.output.display())))?;
        written += 1;
        next[flow] += 1;
        if next[flow] == flows[flow].len() {
            live.swap_remove(pick);
        }
    }
    let inner = w.into_inner();
    inner
        .into_inner()
        .map_err(|e| CliError::user(format!("error: {}: {e}", args.output.display())))?;
    outln!(
        "wrote {written} frames ({} flows) to {}",
        flows.len(),
        args.output.display()
    );
    Ok(())
}
