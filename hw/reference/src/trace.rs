//! What a lookup did, step by step: the inputs and outcome of every stage the reference ran,
//! in pipeline order. `nlbctl explain` is a formatter over these steps.
//!
//! Every stage takes a [`Recorder`]. [`NoTrace`] (what the slow path and the reference device
//! use) records nothing and costs nothing: a step is built by a closure the recorder never
//! calls. [`Trace`] keeps every step.

use crate::parse::{InnerFlow, Parsed};
use nlb_hw::enums::{Affinity, Delivery, KeyType, Reason, Verdict};
use nlb_hw::layouts::{AclPrefix, BackendEntry, LearnEvent, PoolEntry, RuleEntry, VipEntry};
use nlb_hw::FlowKey;

/// Takes the steps of a lookup.
pub trait Recorder {
    /// Records the step `step` builds (called only by recorders that keep steps).
    fn step(&mut self, step: impl FnOnce() -> Step);
}

/// Records nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTrace;

impl Recorder for NoTrace {
    #[inline(always)]
    fn step(&mut self, _step: impl FnOnce() -> Step) {}
}

/// Every step, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// The steps.
    pub steps: Vec<Step>,
}

impl Recorder for Trace {
    fn step(&mut self, step: impl FnOnce() -> Step) {
        self.steps.push(step());
    }
}

/// Whether and which fragment a packet is (docs/pipeline.md §2: offset 0 with MF is the first
/// fragment, which has the ports; a non-zero offset is a later one, without ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Fragment {
    /// A whole packet.
    #[default]
    No,
    /// The first fragment: it carries the ports.
    First,
    /// A later fragment: no ports.
    Later,
}

impl Fragment {
    /// A fragment, first or later.
    pub fn is_fragment(self) -> bool {
        self != Fragment::No
    }
}

/// The flow a packet is load-balanced as (client → VIP; docs/pipeline.md §3). Addresses are
/// 128-bit, IPv4 mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flow {
    /// IP protocol.
    pub protocol: u8,
    /// Client address.
    pub client: u128,
    /// Client port (0 without ports).
    pub client_port: u16,
    /// VIP.
    pub vip: u128,
    /// VIP port (0 without ports).
    pub vip_port: u16,
}

impl Flow {
    /// The flow as a hash key of `key_type` (fields the type does not use are ignored).
    pub fn key(&self, key_type: KeyType) -> FlowKey {
        FlowKey {
            key_type,
            protocol: self.protocol,
            src_port: self.client_port,
            dst_port: self.vip_port,
            src_addr: self.client,
            dst_addr: self.vip,
        }
    }

    /// The flow of a 5-tuple key (client → VIP orientation; the key type is ignored).
    pub fn of_key(key: &FlowKey) -> Flow {
        Flow {
            protocol: key.protocol,
            client: key.src_addr,
            client_port: key.src_port,
            vip: key.dst_addr,
            vip_port: key.dst_port,
        }
    }
}

/// Which reading of an ICMP error's quote names the flow (docs/pipeline.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// The quote reversed: a packet sent from a VIP (the usual case).
    Reversed,
    /// The quote as written: a packet sent toward a VIP.
    Forward,
}

/// What the port slots of a VIP entry gave (docs/pipeline.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotOutcome {
    /// The lowest valid slot holding the port (for a later fragment: the one valid slot).
    Matched {
        /// Slot number, 0..16.
        slot: usize,
        /// The slot's rule id.
        rule: u16,
    },
    /// No valid slot holds the port (a later fragment: no valid slot at all).
    NoSlot,
    /// A later fragment on an entry with two or more valid slots.
    Several,
}

/// What the rule's source ACL said (docs/pipeline.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclOutcome {
    /// The rule has no ACL.
    NotEnabled,
    /// The lowest valid prefix holding the client.
    Allowed {
        /// Prefix number in the entry.
        index: usize,
        /// The prefix.
        prefix: AclPrefix,
    },
    /// No valid prefix holds the client.
    Denied,
}

/// Why a fragment goes to the host (docs/pipeline.md §4–§6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentPunt {
    /// A later fragment (no ports) on a VIP entry with several valid slots: no rule.
    LaterOnSeveralSlots {
        /// Valid slots of the entry.
        valid_slots: usize,
    },
    /// A first fragment on a VIP entry with several valid slots: punted with its rule.
    FirstOnSeveralSlots {
        /// Valid slots of the entry.
        valid_slots: usize,
    },
    /// A TCP fragment (first or later) of a pool that tracks connections.
    TcpOfTrackingPool,
}

/// The connection-table stage (docs/pipeline.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnStep {
    /// Not trackable: the pool does not track, or a fragment.
    NotTrackable,
    /// A TCP SYN without ACK: a miss without lookup (selects anew).
    SynSelectsAnew,
    /// Trackable, but no connection table was given (`explain`: a new connection).
    NoTable,
    /// The bucket of the TUPLE5 hash was searched.
    Lookup {
        /// The bucket.
        bucket: u32,
        /// The entry index and its backend, on a hit.
        hit: Option<(u32, u16)>,
    },
    /// The host's copy of the connection table was asked (slow-path decisions).
    Host {
        /// The connection's backend, when it has one with a valid backend entry.
        backend: Option<u16>,
    },
}

/// One step of a lookup, with its inputs and outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `ctrl.enable` is 0: `PASS PIPELINE_DISABLED`.
    Disabled,
    /// The parser's outcome (docs/pipeline.md §2).
    Parsed(Result<Parsed, Reason>),
    /// An ICMP error's quote (§3): no usable quote, or the reading that names the flow.
    IcmpQuote {
        /// The quoted flow.
        quote: Option<InnerFlow>,
        /// The reading taken (`None` without a quote).
        reading: Option<Reading>,
    },
    /// The flow and its hashes (§3): `h5` = TUPLE5 hash, `flow_hash` = TUPLE3 hash for
    /// fragments, else `h5`.
    Flow {
        /// The flow.
        flow: Flow,
        /// Fragment or not (never for ICMP errors).
        fragment: Fragment,
        /// An ICMP error about the flow.
        icmp_error: bool,
        /// TUPLE5 hash.
        h5: u32,
        /// The flow hash (punt headers, events, encapsulation).
        flow_hash: u32,
    },
    /// The VIP table (§4): the bucket of hash(VIP key), the ways compared, the lowest way
    /// matching.
    Vip {
        /// The VIP protocol looked up: the flow's for TCP and UDP, 0 for every other
        /// (portless) protocol (§3).
        protocol: u8,
        /// VIP looked up.
        vip: u128,
        /// Hash of the VIP key.
        hash: u32,
        /// `index(hash, vip_buckets)`.
        bucket: u32,
        /// Ways per bucket.
        ways: u32,
        /// Index (`bucket × ways + way`) of the entry that matched.
        entry: Option<u32>,
    },
    /// The port slots of the VIP entry (§4).
    PortSlots {
        /// Index of the VIP entry.
        index: u32,
        /// The entry.
        entry: VipEntry,
        /// The VIP port (`None`: a later fragment, no ports).
        port: Option<u16>,
        /// What the slots gave.
        outcome: SlotOutcome,
    },
    /// The rule descriptor (§4): beyond the table (`None`) or its entry.
    Rule {
        /// Rule id.
        id: u16,
        /// The entry, when the id is inside the table.
        entry: Option<RuleEntry>,
    },
    /// The rule's source ACL on the flow's client (§5).
    Acl {
        /// Rule id.
        rule: u16,
        /// The address checked.
        client: u128,
        /// Outcome.
        outcome: AclOutcome,
    },
    /// A fragment that goes to the host (§4–§6).
    FragmentPunt(FragmentPunt),
    /// The pool descriptor (§6): beyond the table (`None`) or its entry.
    Pool {
        /// Pool id.
        id: u16,
        /// The entry, when the id is inside the table.
        entry: Option<PoolEntry>,
    },
    /// The affinity key (§6).
    Key {
        /// The pool's affinity.
        affinity: Affinity,
        /// Whether the packet is a fragment (hashed with the fragment column's key).
        fragment: bool,
        /// Whether the flow is portless (neither TCP nor UDP; the fragment column's key too).
        portless: bool,
        /// The key: its type and the flow.
        key: FlowKey,
        /// Its hash (`aff_hash`).
        hash: u32,
    },
    /// The connection table (§7).
    Conntrack(ConnStep),
    /// Maglev (§8): `slot = base + index(hash, size)`; the backend id the slot holds.
    Maglev {
        /// First slot of the serving slice.
        base: u32,
        /// Slots in the slice (0: no backend).
        size: u32,
        /// The affinity key's hash.
        hash: u32,
        /// `index(hash, size)` (0 when size is 0).
        offset: u32,
        /// `base + offset`.
        slot: u64,
        /// The slot's backend id (`None`: size 0, or the slot beyond the slot memory).
        backend: Option<u16>,
    },
    /// The backend entry (§8): beyond the table (`None`) or its entry.
    Backend {
        /// Backend id.
        id: u16,
        /// The entry, when the id is inside the table.
        entry: Option<BackendEntry>,
    },
    /// The action (§9): output length by the pool's delivery, and whether it is too big.
    Action {
        /// Delivery.
        delivery: Delivery,
        /// Output length in bytes.
        out_len: usize,
        /// Over 9018 bytes: `DROP TOO_BIG`.
        too_big: bool,
    },
    /// A learn or teardown event (§10).
    Event(LearnEvent),
    /// The verdict and reason (the first stage that decides wins).
    Verdict {
        /// Verdict.
        verdict: Verdict,
        /// Reason.
        reason: Reason,
    },
}

/// The report name of a key type (`5tuple`, ...), as `explain` and the sim report write it.
pub fn key_name(k: KeyType) -> &'static str {
    match k {
        KeyType::Vip => "vip",
        KeyType::Tuple1 => "1tuple",
        KeyType::Tuple2 => "2tuple",
        KeyType::Tuple3 => "3tuple",
        KeyType::Tuple5 => "5tuple",
    }
}
