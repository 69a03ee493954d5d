//! Test helpers: two hand-built table images whose mixture is visible in the traffic, and
//! frames built with etherparse.
//!
//! Image A sends VIP 10.0.0.1:80/TCP to rule 0 → pool 0 → slot 0 → backend 10; image B to
//! rule 0 → pool 1 → slot 1 → backend 20. Each image also fills the *other* pool's slot with
//! a trap backend (A: slot 1 → 40, B: slot 0 → 30), so a packet that saw A's rule table with
//! B's Maglev slots, or the reverse, goes to backend 30 or 40: a mixed table is visible in the
//! verdict of every packet.
#![allow(dead_code)]

use etherparse::PacketBuilder;
use nlb_hw::enums::{Affinity, Delivery, Table};
use nlb_hw::hash::addr_to_u128;
use nlb_hw::layouts::{BackendEntry, MaglevSlot, PoolEntry, PortSlot, RuleEntry, VipEntry};
use nlb_hw::{table_index, FlowKey, Profile, Tables};
use std::net::{IpAddr, Ipv4Addr};

pub const VIP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xc1];
pub const NIC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Backend ids: what A serves, what B serves, and the traps.
pub const A_BACKEND: u16 = 10;
pub const B_BACKEND: u16 = 20;
pub const TRAP_B_SLOTS_A_RULE: u16 = 30;
pub const TRAP_A_SLOTS_B_RULE: u16 = 40;
/// Slots that loads change at random, to make every load write something.
pub const JUNK_SLOTS: std::ops::Range<u32> = 1000..1400;

pub fn profile() -> &'static Profile {
    Profile::by_name("sim").expect("sim profile")
}

/// MAC of a backend: 02:00:00:00:00:<id>.
pub fn backend_mac(id: u16) -> u64 {
    0x0200_0000_0000 | u64::from(id)
}

/// Index of the VIP entry (way 0 of its bucket).
pub fn vip_index(p: &Profile) -> u32 {
    let h = FlowKey::vip(6, IpAddr::V4(VIP)).hash();
    table_index(h, p.vip_buckets) * p.vip_ways
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    A,
    B,
}

/// splitmix64: the tests' own random numbers.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Image A or B; `junk` > 0 also fills the junk slots with values from that seed.
pub fn image(p: &'static Profile, which: Which, junk: u64) -> Tables {
    let mut t = Tables::empty(p);
    let mut vip = VipEntry {
        valid: true,
        protocol: 6,
        addr: addr_to_u128(IpAddr::V4(VIP)),
        ..VipEntry::default()
    };
    vip.slot[0] = PortSlot {
        valid: true,
        port_lo: 80,
        port_hi: 80,
        rule: 0,
    };
    t.vip[vip_index(p) as usize] = vip;
    t.rules[0] = RuleEntry {
        valid: true,
        acl_enabled: false,
        pool: match which {
            Which::A => 0,
            Which::B => 1,
        },
    };
    for (pool, base) in [(0usize, 0u32), (1, 1)] {
        t.pools[pool] = PoolEntry {
            valid: true,
            affinity: Affinity::None,
            delivery: Delivery::L2Dsr,
            maglev_base: base,
            maglev_size: 1,
            idle_timeout: 60,
            ..PoolEntry::default()
        };
    }
    let (s0, s1) = match which {
        Which::A => (A_BACKEND, TRAP_A_SLOTS_B_RULE),
        Which::B => (TRAP_B_SLOTS_A_RULE, B_BACKEND),
    };
    t.maglev[0] = MaglevSlot { backend: s0 };
    t.maglev[1] = MaglevSlot { backend: s1 };
    for id in [
        A_BACKEND,
        B_BACKEND,
        TRAP_B_SLOTS_A_RULE,
        TRAP_A_SLOTS_B_RULE,
    ] {
        t.backends[usize::from(id)] = BackendEntry {
            valid: true,
            is_ipv6: false,
            addr: addr_to_u128(IpAddr::V4(Ipv4Addr::new(192, 168, 1, id as u8))),
            mac: backend_mac(id),
        };
    }
    if junk > 0 {
        let mut rng = Rng(junk);
        for s in JUNK_SLOTS {
            t.maglev[s as usize] = MaglevSlot {
                backend: 100 + rng.below(50) as u16,
            };
        }
    }
    t
}

/// Entries of `t` that differ from an empty bank (a hand count for the first load).
pub fn nonempty_entries(t: &Tables) -> usize {
    Tables::empty(t.profile).diff(t).len()
}

/// Entries that differ between two images, per table.
pub fn changed(a: &Tables, b: &Tables, table: Table) -> usize {
    a.diff(b).iter().filter(|(t, _)| *t == table).count()
}

/// A TCP segment (ACK) from 198.51.100.7:`src_port` to the VIP on port 80.
pub fn frame_to_vip(src_port: u16) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, NIC_MAC)
        .ipv4([198, 51, 100, 7], VIP.octets(), 64)
        .tcp(src_port, 80, 1000, 64240)
        .ack(1);
    let payload = b"GET / HTTP/1.0\r\n\r\n";
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload).expect("frame builds");
    out
}

/// The destination MAC of an output frame, decoded by etherparse.
pub fn dst_mac(frame: &[u8]) -> u64 {
    let eth = etherparse::Ethernet2Header::from_slice(frame)
        .expect("output frame has an Ethernet header")
        .0;
    eth.destination
        .iter()
        .fold(0u64, |a, b| (a << 8) | u64::from(*b))
}
