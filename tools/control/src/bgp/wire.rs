//! BGP-4 messages on the wire (RFC 4271 §4), with the parts of RFC 4760 (multiprotocol
//! reachability for IPv6 unicast), RFC 6793 (four-octet AS numbers), RFC 4724 (graceful
//! restart) and RFC 1997 (communities) an announcing speaker needs.
//!
//! Encoding is exact; decoding checks what RFC 4271 §6 says a receiver must check and returns
//! the NOTIFICATION code and subcode to send ([`WireError`]). Nothing here allocates per byte
//! or panics on input: every length is checked before it is used.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The marker: sixteen octets of ones (RFC 4271 §4.1).
pub const MARKER: [u8; 16] = [0xff; 16];
/// Marker, length and type.
pub const HEADER_LEN: usize = 19;
/// Largest message (RFC 4271 §4.1).
pub const MAX_MESSAGE: usize = 4096;
/// The AS number a four-octet speaker puts in OPEN's two-octet field when its own does not fit
/// (RFC 6793 §9).
pub const AS_TRANS: u16 = 23456;

/// Message types (RFC 4271 §4.1, RFC 2918).
pub mod msg_type {
    /// OPEN.
    pub const OPEN: u8 = 1;
    /// UPDATE.
    pub const UPDATE: u8 = 2;
    /// NOTIFICATION.
    pub const NOTIFICATION: u8 = 3;
    /// KEEPALIVE.
    pub const KEEPALIVE: u8 = 4;
    /// ROUTE-REFRESH (RFC 2918).
    pub const ROUTE_REFRESH: u8 = 5;
}

/// Path attribute type codes.
pub mod attr {
    /// ORIGIN (well-known mandatory).
    pub const ORIGIN: u8 = 1;
    /// AS_PATH (well-known mandatory).
    pub const AS_PATH: u8 = 2;
    /// NEXT_HOP (well-known mandatory for IPv4 NLRI).
    pub const NEXT_HOP: u8 = 3;
    /// MULTI_EXIT_DISC (optional non-transitive).
    pub const MED: u8 = 4;
    /// LOCAL_PREF (well-known, internal peers only).
    pub const LOCAL_PREF: u8 = 5;
    /// COMMUNITIES (optional transitive, RFC 1997).
    pub const COMMUNITIES: u8 = 8;
    /// MP_REACH_NLRI (optional non-transitive, RFC 4760).
    pub const MP_REACH_NLRI: u8 = 14;
    /// MP_UNREACH_NLRI (optional non-transitive, RFC 4760).
    pub const MP_UNREACH_NLRI: u8 = 15;
    /// AS4_PATH (optional transitive, RFC 6793).
    pub const AS4_PATH: u8 = 17;
}

/// Attribute flags (RFC 4271 §4.3).
pub mod flag {
    /// Optional.
    pub const OPTIONAL: u8 = 0x80;
    /// Transitive.
    pub const TRANSITIVE: u8 = 0x40;
    /// Partial.
    pub const PARTIAL: u8 = 0x20;
    /// Two-octet attribute length.
    pub const EXTENDED: u8 = 0x10;
}

/// Capability codes.
pub mod cap {
    /// Multiprotocol extensions (RFC 4760).
    pub const MULTIPROTOCOL: u8 = 1;
    /// Route refresh (RFC 2918).
    pub const ROUTE_REFRESH: u8 = 2;
    /// Graceful restart (RFC 4724).
    pub const GRACEFUL_RESTART: u8 = 64;
    /// Four-octet AS numbers (RFC 6793).
    pub const FOUR_OCTET_AS: u8 = 65;
}

/// Address family identifiers (IANA).
pub const AFI_IPV4: u16 = 1;
/// IPv6.
pub const AFI_IPV6: u16 = 2;
/// Unicast.
pub const SAFI_UNICAST: u8 = 1;

/// NOTIFICATION error codes (RFC 4271 §4.5).
pub mod err {
    /// Message Header Error.
    pub const HEADER: u8 = 1;
    /// OPEN Message Error.
    pub const OPEN: u8 = 2;
    /// UPDATE Message Error.
    pub const UPDATE: u8 = 3;
    /// Hold Timer Expired.
    pub const HOLD_TIMER: u8 = 4;
    /// Finite State Machine Error.
    pub const FSM: u8 = 5;
    /// Cease.
    pub const CEASE: u8 = 6;

    /// Message Header Error: Connection Not Synchronized.
    pub const HEADER_NOT_SYNCHRONIZED: u8 = 1;
    /// Message Header Error: Bad Message Length.
    pub const HEADER_BAD_LENGTH: u8 = 2;
    /// Message Header Error: Bad Message Type.
    pub const HEADER_BAD_TYPE: u8 = 3;
    /// OPEN: Unsupported Version Number.
    pub const OPEN_VERSION: u8 = 1;
    /// OPEN: Bad Peer AS.
    pub const OPEN_BAD_PEER_AS: u8 = 2;
    /// OPEN: Bad BGP Identifier.
    pub const OPEN_BAD_ID: u8 = 3;
    /// OPEN: Unsupported Optional Parameter.
    pub const OPEN_BAD_PARAMETER: u8 = 4;
    /// OPEN: Unacceptable Hold Time.
    pub const OPEN_HOLD_TIME: u8 = 6;
    /// OPEN: Unsupported Capability (RFC 5492).
    pub const OPEN_CAPABILITY: u8 = 7;
    /// UPDATE: Malformed Attribute List.
    pub const UPDATE_MALFORMED_ATTRIBUTES: u8 = 1;
    /// UPDATE: Invalid Network Field.
    pub const UPDATE_INVALID_NETWORK: u8 = 10;
    /// UPDATE: Malformed AS_PATH.
    pub const UPDATE_MALFORMED_AS_PATH: u8 = 11;
    /// Cease: Administrative Shutdown (RFC 4486).
    pub const CEASE_SHUTDOWN: u8 = 2;
    /// Cease: Peer De-configured (RFC 4486).
    pub const CEASE_DECONFIGURED: u8 = 3;
    /// Cease: Administrative Reset (RFC 4486).
    pub const CEASE_RESET: u8 = 4;
    /// Cease: Connection Rejected (RFC 4486).
    pub const CEASE_REJECTED: u8 = 5;
}

/// An IPv4 or IPv6 prefix as NLRI carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    /// The network (host bits zero).
    pub addr: IpAddr,
    /// The length in bits.
    pub len: u8,
}

impl Prefix {
    /// A host route: /32 or /128.
    pub fn host(addr: IpAddr) -> Prefix {
        let len = if addr.is_ipv4() { 32 } else { 128 };
        Prefix { addr, len }
    }

    /// Whether it is IPv4.
    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// A capability of OPEN (RFC 5492).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// Multiprotocol extensions for one AFI/SAFI (RFC 4760 §8).
    Multiprotocol {
        /// Address family.
        afi: u16,
        /// Subsequent address family.
        safi: u8,
    },
    /// Route refresh (RFC 2918).
    RouteRefresh,
    /// Four-octet AS numbers, with the speaker's AS (RFC 6793).
    FourOctetAs(u32),
    /// Graceful restart (RFC 4724 §3).
    GracefulRestart(GracefulRestart),
    /// Anything else, kept as sent.
    Other {
        /// Code.
        code: u8,
        /// Value.
        value: Vec<u8>,
    },
}

/// The graceful restart capability (RFC 4724 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GracefulRestart {
    /// Restart State (R): the speaker has restarted, and its peer must not wait for its
    /// End-of-RIB before sending its own routes.
    pub restarted: bool,
    /// Graceful Notification (N, RFC 8538): kept as received, never set by this speaker.
    pub notification: bool,
    /// Restart Time in seconds (12 bits): how long the peer keeps this speaker's routes after
    /// the session goes down without a NOTIFICATION.
    pub restart_time: u16,
    /// The address families whose routes the peer keeps, with Forwarding State (F): whether
    /// forwarding was preserved across the restart.
    pub families: Vec<(u16, u8, bool)>,
}

/// An OPEN message (RFC 4271 §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// Version (4).
    pub version: u8,
    /// My Autonomous System as the two-octet field holds it (AS_TRANS for a large AS).
    pub my_as: u16,
    /// Proposed hold time in seconds (0, or at least 3).
    pub hold_time: u16,
    /// BGP Identifier.
    pub router_id: Ipv4Addr,
    /// Capabilities, in the order sent.
    pub capabilities: Vec<Capability>,
}

impl Open {
    /// The sender's AS: its four-octet capability's when it sent one, else the two-octet field.
    pub fn asn(&self) -> u32 {
        self.capabilities
            .iter()
            .find_map(|c| match c {
                Capability::FourOctetAs(a) => Some(*a),
                _ => None,
            })
            .unwrap_or(u32::from(self.my_as))
    }

    /// Whether the sender speaks four-octet AS numbers.
    pub fn four_octet(&self) -> bool {
        self.capabilities
            .iter()
            .any(|c| matches!(c, Capability::FourOctetAs(_)))
    }

    /// The graceful restart capability, if sent.
    pub fn graceful_restart(&self) -> Option<&GracefulRestart> {
        self.capabilities.iter().find_map(|c| match c {
            Capability::GracefulRestart(g) => Some(g),
            _ => None,
        })
    }

    /// Whether the sender announced multiprotocol support for `afi`/`safi`. A speaker that
    /// sends no multiprotocol capability at all speaks IPv4 unicast only (RFC 4760 §8).
    pub fn supports(&self, afi: u16, safi: u8) -> bool {
        let mut any = false;
        for c in &self.capabilities {
            if let Capability::Multiprotocol { afi: a, safi: s } = c {
                any = true;
                if *a == afi && *s == safi {
                    return true;
                }
            }
        }
        !any && afi == AFI_IPV4 && safi == SAFI_UNICAST
    }
}

/// ORIGIN values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// IGP (0).
    Igp,
    /// EGP (1).
    Egp,
    /// INCOMPLETE (2).
    Incomplete,
}

/// The path attributes of an announcement, as this speaker builds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// ORIGIN.
    pub origin: Origin,
    /// AS_PATH: one AS_SEQUENCE (empty towards an internal peer).
    pub as_path: Vec<u32>,
    /// NEXT_HOP for IPv4 NLRI.
    pub next_hop: Option<Ipv4Addr>,
    /// MULTI_EXIT_DISC.
    pub med: Option<u32>,
    /// LOCAL_PREF (internal peers).
    pub local_pref: Option<u32>,
    /// COMMUNITIES (RFC 1997), each `AS << 16 | value`.
    pub communities: Vec<u32>,
}

/// An UPDATE message (RFC 4271 §4.3) with IPv6 unicast in MP_REACH_NLRI / MP_UNREACH_NLRI
/// (RFC 4760).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Update {
    /// Withdrawn IPv4 routes.
    pub withdrawn: Vec<Prefix>,
    /// Path attributes of `nlri` and `mp_reach` (None: a withdrawal only).
    pub attributes: Option<Attributes>,
    /// Announced IPv4 routes.
    pub nlri: Vec<Prefix>,
    /// IPv6 routes announced in MP_REACH_NLRI, with their next hop (global, and link-local
    /// when given).
    pub mp_reach: Option<(Ipv6Addr, Option<Ipv6Addr>, Vec<Prefix>)>,
    /// IPv6 routes withdrawn in MP_UNREACH_NLRI; `Some(empty)` is the IPv6 End-of-RIB.
    pub mp_unreach: Option<Vec<Prefix>>,
}

impl Update {
    /// The End-of-RIB marker of an address family (RFC 4724 §2): for IPv4 unicast an UPDATE
    /// with nothing in it; for others an UPDATE with only an empty MP_UNREACH_NLRI.
    pub fn end_of_rib(afi: u16) -> Update {
        if afi == AFI_IPV4 {
            Update::default()
        } else {
            Update {
                mp_unreach: Some(Vec::new()),
                ..Update::default()
            }
        }
    }

    /// Which End-of-RIB this is, if it is one.
    pub fn is_end_of_rib(&self) -> Option<u16> {
        let empty = self.withdrawn.is_empty()
            && self.nlri.is_empty()
            && self.mp_reach.is_none()
            && self.attributes.is_none();
        match &self.mp_unreach {
            None if empty => Some(AFI_IPV4),
            Some(v) if empty && v.is_empty() => Some(AFI_IPV6),
            _ => None,
        }
    }
}

/// A NOTIFICATION message (RFC 4271 §4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// Error code.
    pub code: u8,
    /// Error subcode.
    pub subcode: u8,
    /// Data.
    pub data: Vec<u8>,
}

impl Notification {
    /// The code and subcode in words (RFC 4271 §4.5, RFC 4486).
    pub fn describe(&self) -> String {
        let code = match self.code {
            err::HEADER => "message header error",
            err::OPEN => "OPEN message error",
            err::UPDATE => "UPDATE message error",
            err::HOLD_TIMER => "hold timer expired",
            err::FSM => "finite state machine error",
            err::CEASE => "cease",
            _ => "unknown error",
        };
        let sub = match (self.code, self.subcode) {
            (err::HEADER, 1) => "connection not synchronized",
            (err::HEADER, 2) => "bad message length",
            (err::HEADER, 3) => "bad message type",
            (err::OPEN, 1) => "unsupported version number",
            (err::OPEN, 2) => "bad peer AS",
            (err::OPEN, 3) => "bad BGP identifier",
            (err::OPEN, 4) => "unsupported optional parameter",
            (err::OPEN, 6) => "unacceptable hold time",
            (err::OPEN, 7) => "unsupported capability",
            (err::UPDATE, 1) => "malformed attribute list",
            (err::UPDATE, 3) => "missing well-known attribute",
            (err::UPDATE, 5) => "attribute length error",
            (err::UPDATE, 8) => "invalid NEXT_HOP attribute",
            (err::UPDATE, 10) => "invalid network field",
            (err::UPDATE, 11) => "malformed AS_PATH",
            (err::CEASE, 1) => "maximum number of prefixes reached",
            (err::CEASE, 2) => "administrative shutdown",
            (err::CEASE, 3) => "peer de-configured",
            (err::CEASE, 4) => "administrative reset",
            (err::CEASE, 5) => "connection rejected",
            (err::CEASE, 6) => "other configuration change",
            (err::CEASE, 7) => "connection collision resolution",
            (err::CEASE, 8) => "out of resources",
            (err::CEASE, 9) => "hard reset",
            _ => "",
        };
        let mut s = if sub.is_empty() {
            format!("{code} ({}/{})", self.code, self.subcode)
        } else {
            format!("{code}: {sub} ({}/{})", self.code, self.subcode)
        };
        // RFC 8203: a shutdown communication (a length octet, then UTF-8).
        if self.code == err::CEASE && matches!(self.subcode, err::CEASE_SHUTDOWN | err::CEASE_RESET)
        {
            if let Some((&n, text)) = self.data.split_first() {
                if usize::from(n) == text.len() && n > 0 {
                    s.push_str(&format!(": \"{}\"", String::from_utf8_lossy(text)));
                }
            }
        }
        s
    }
}

/// A BGP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// OPEN.
    Open(Open),
    /// UPDATE.
    Update(Update),
    /// NOTIFICATION.
    Notification(Notification),
    /// KEEPALIVE.
    Keepalive,
    /// ROUTE-REFRESH (RFC 2918) for an AFI/SAFI.
    RouteRefresh {
        /// Address family.
        afi: u16,
        /// Subsequent address family.
        safi: u8,
    },
}

/// A received message that does not decode: what to send back (RFC 4271 §6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct WireError {
    /// NOTIFICATION code.
    pub code: u8,
    /// NOTIFICATION subcode.
    pub subcode: u8,
    /// NOTIFICATION data.
    pub data: Vec<u8>,
    /// In words.
    pub what: String,
}

impl WireError {
    fn new(code: u8, subcode: u8, data: Vec<u8>, what: impl Into<String>) -> WireError {
        WireError {
            code,
            subcode,
            data,
            what: what.into(),
        }
    }

    /// The NOTIFICATION this error asks for.
    pub fn notification(&self) -> Notification {
        Notification {
            code: self.code,
            subcode: self.subcode,
            data: self.data.clone(),
        }
    }
}

/// A message that does not fit in 4096 octets (too many routes for one UPDATE: the caller
/// splits them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a BGP message of {0} octets exceeds 4096")]
pub struct TooLong(pub usize);

// --- encoding ----------------------------------------------------------------------------

fn header(out: &mut Vec<u8>, kind: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&MARKER);
    out.extend_from_slice(&[0, 0, kind]);
    start
}

fn finish(out: &mut Vec<u8>, start: usize) -> Result<(), TooLong> {
    let len = out.len() - start;
    if len > MAX_MESSAGE {
        out.truncate(start);
        return Err(TooLong(len));
    }
    out[start + 16..start + 18].copy_from_slice(&(len as u16).to_be_bytes());
    Ok(())
}

/// The octets of a prefix as NLRI carries it: the length, then the fewest octets that hold it.
fn put_prefix(out: &mut Vec<u8>, p: &Prefix) {
    out.push(p.len);
    let n = usize::from(p.len).div_ceil(8);
    match p.addr {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()[..n.min(4)]),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()[..n.min(16)]),
    }
}

/// Octets a prefix takes in NLRI.
pub fn prefix_len(p: &Prefix) -> usize {
    1 + usize::from(p.len).div_ceil(8)
}

fn put_attr(out: &mut Vec<u8>, flags: u8, code: u8, value: &[u8]) {
    if value.len() > 255 {
        out.extend_from_slice(&[flags | flag::EXTENDED, code]);
        out.extend_from_slice(&(value.len() as u16).to_be_bytes());
    } else {
        out.extend_from_slice(&[flags & !flag::EXTENDED, code, value.len() as u8]);
    }
    out.extend_from_slice(value);
}

impl Message {
    /// Appends the message's octets to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        match self {
            Message::Open(o) => encode_open(o, out),
            Message::Update(u) => encode_update(u, true, out),
            Message::Notification(n) => {
                let start = header(out, msg_type::NOTIFICATION);
                out.extend_from_slice(&[n.code, n.subcode]);
                out.extend_from_slice(&n.data);
                finish(out, start)
            }
            Message::Keepalive => {
                let start = header(out, msg_type::KEEPALIVE);
                finish(out, start)
            }
            Message::RouteRefresh { afi, safi } => {
                let start = header(out, msg_type::ROUTE_REFRESH);
                out.extend_from_slice(&afi.to_be_bytes());
                out.extend_from_slice(&[0, *safi]);
                finish(out, start)
            }
        }
    }

    /// The message's octets.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TooLong> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }
}

fn encode_open(o: &Open, out: &mut Vec<u8>) -> Result<(), TooLong> {
    let start = header(out, msg_type::OPEN);
    out.push(o.version);
    out.extend_from_slice(&o.my_as.to_be_bytes());
    out.extend_from_slice(&o.hold_time.to_be_bytes());
    out.extend_from_slice(&o.router_id.octets());
    // One optional parameter of type 2 (capabilities) per capability, as most speakers send.
    let mut params = Vec::new();
    for c in &o.capabilities {
        let mut value = Vec::new();
        let code = match c {
            Capability::Multiprotocol { afi, safi } => {
                value.extend_from_slice(&afi.to_be_bytes());
                value.extend_from_slice(&[0, *safi]);
                cap::MULTIPROTOCOL
            }
            Capability::RouteRefresh => cap::ROUTE_REFRESH,
            Capability::FourOctetAs(a) => {
                value.extend_from_slice(&a.to_be_bytes());
                cap::FOUR_OCTET_AS
            }
            Capability::GracefulRestart(g) => {
                let flags = (u16::from(g.restarted) << 15)
                    | (u16::from(g.notification) << 14)
                    | (g.restart_time & 0x0fff);
                value.extend_from_slice(&flags.to_be_bytes());
                for (afi, safi, fwd) in &g.families {
                    value.extend_from_slice(&afi.to_be_bytes());
                    value.extend_from_slice(&[*safi, if *fwd { 0x80 } else { 0 }]);
                }
                cap::GRACEFUL_RESTART
            }
            Capability::Other { code, value: v } => {
                value.extend_from_slice(v);
                *code
            }
        };
        let cap_len = value.len().min(255);
        params.extend_from_slice(&[2, (cap_len + 2) as u8, code, cap_len as u8]);
        params.extend_from_slice(&value[..cap_len]);
    }
    out.push(params.len().min(255) as u8);
    out.extend_from_slice(&params);
    finish(out, start)
}

/// The AS_PATH (or AS4_PATH) value: one AS_SEQUENCE of `path` (none when empty), each AS in
/// four octets or two.
fn as_path_value(path: &[u32], four: bool) -> Vec<u8> {
    let mut v = Vec::new();
    for chunk in path.chunks(255) {
        v.extend_from_slice(&[2, chunk.len() as u8]);
        for a in chunk {
            if four {
                v.extend_from_slice(&a.to_be_bytes());
            } else {
                let two = u16::try_from(*a).unwrap_or(AS_TRANS);
                v.extend_from_slice(&two.to_be_bytes());
            }
        }
    }
    v
}

/// Encodes an UPDATE. `four_octet`: the session negotiated four-octet AS numbers (else AS_PATH
/// goes in two octets, with AS_TRANS for a large AS, and AS4_PATH carries the real path: RFC
/// 6793 §4.2.2).
pub fn encode_update(u: &Update, four_octet: bool, out: &mut Vec<u8>) -> Result<(), TooLong> {
    let start = header(out, msg_type::UPDATE);
    let mut withdrawn = Vec::new();
    for p in &u.withdrawn {
        put_prefix(&mut withdrawn, p);
    }
    out.extend_from_slice(&(withdrawn.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&withdrawn);
    let mut attrs = Vec::new();
    if let Some(a) = &u.attributes {
        let origin = match a.origin {
            Origin::Igp => 0,
            Origin::Egp => 1,
            Origin::Incomplete => 2,
        };
        put_attr(&mut attrs, flag::TRANSITIVE, attr::ORIGIN, &[origin]);
        put_attr(
            &mut attrs,
            flag::TRANSITIVE,
            attr::AS_PATH,
            &as_path_value(&a.as_path, four_octet),
        );
        if let (Some(nh), false) = (a.next_hop, u.nlri.is_empty()) {
            put_attr(&mut attrs, flag::TRANSITIVE, attr::NEXT_HOP, &nh.octets());
        }
        if let Some(med) = a.med {
            put_attr(&mut attrs, flag::OPTIONAL, attr::MED, &med.to_be_bytes());
        }
        if let Some(lp) = a.local_pref {
            put_attr(
                &mut attrs,
                flag::TRANSITIVE,
                attr::LOCAL_PREF,
                &lp.to_be_bytes(),
            );
        }
        if !a.communities.is_empty() {
            let v: Vec<u8> = a.communities.iter().flat_map(|c| c.to_be_bytes()).collect();
            put_attr(
                &mut attrs,
                flag::OPTIONAL | flag::TRANSITIVE,
                attr::COMMUNITIES,
                &v,
            );
        }
        if !four_octet && a.as_path.iter().any(|x| *x > u32::from(u16::MAX)) {
            put_attr(
                &mut attrs,
                flag::OPTIONAL | flag::TRANSITIVE,
                attr::AS4_PATH,
                &as_path_value(&a.as_path, true),
            );
        }
    }
    if let Some((global, link_local, prefixes)) = &u.mp_reach {
        let mut v = Vec::new();
        v.extend_from_slice(&AFI_IPV6.to_be_bytes());
        v.push(SAFI_UNICAST);
        match link_local {
            Some(ll) => {
                v.push(32);
                v.extend_from_slice(&global.octets());
                v.extend_from_slice(&ll.octets());
            }
            None => {
                v.push(16);
                v.extend_from_slice(&global.octets());
            }
        }
        v.push(0); // Reserved.
        for p in prefixes {
            put_prefix(&mut v, p);
        }
        put_attr(&mut attrs, flag::OPTIONAL, attr::MP_REACH_NLRI, &v);
    }
    if let Some(prefixes) = &u.mp_unreach {
        let mut v = Vec::new();
        v.extend_from_slice(&AFI_IPV6.to_be_bytes());
        v.push(SAFI_UNICAST);
        for p in prefixes {
            put_prefix(&mut v, p);
        }
        put_attr(&mut attrs, flag::OPTIONAL, attr::MP_UNREACH_NLRI, &v);
    }
    out.extend_from_slice(&(attrs.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&attrs);
    for p in &u.nlri {
        put_prefix(out, p);
    }
    finish(out, start)
}

// --- decoding ----------------------------------------------------------------------------

/// How many octets the next message takes, once the header is in `buf`; None while fewer than
/// 19 octets are there. Checks the marker, the length and the type (RFC 4271 §6.1).
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, WireError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    if buf[..16] != MARKER {
        return Err(WireError::new(
            err::HEADER,
            err::HEADER_NOT_SYNCHRONIZED,
            Vec::new(),
            "the message's marker is not all ones",
        ));
    }
    let len = usize::from(u16::from_be_bytes([buf[16], buf[17]]));
    let kind = buf[18];
    let min = match kind {
        msg_type::OPEN => 29,
        msg_type::UPDATE => 23,
        msg_type::NOTIFICATION => 21,
        msg_type::KEEPALIVE => 19,
        msg_type::ROUTE_REFRESH => 23,
        _ => {
            return Err(WireError::new(
                err::HEADER,
                err::HEADER_BAD_TYPE,
                vec![kind],
                format!("message type {kind} is not one of BGP's"),
            ))
        }
    };
    let bad = len < min || len > MAX_MESSAGE || (kind == msg_type::KEEPALIVE && len != 19);
    if bad {
        return Err(WireError::new(
            err::HEADER,
            err::HEADER_BAD_LENGTH,
            (len as u16).to_be_bytes().to_vec(),
            format!("a message of type {kind} cannot be {len} octets long"),
        ));
    }
    Ok(Some(len))
}

/// Decodes one whole message (as [`frame_len`] delimited it).
pub fn decode(msg: &[u8]) -> Result<Message, WireError> {
    let len = frame_len(msg)?.ok_or_else(|| {
        WireError::new(
            err::HEADER,
            err::HEADER_BAD_LENGTH,
            Vec::new(),
            "a message shorter than its header",
        )
    })?;
    if len != msg.len() {
        return Err(WireError::new(
            err::HEADER,
            err::HEADER_BAD_LENGTH,
            (len as u16).to_be_bytes().to_vec(),
            format!(
                "the header says {len} octets, the message has {}",
                msg.len()
            ),
        ));
    }
    let body = &msg[HEADER_LEN..];
    match msg[18] {
        msg_type::OPEN => decode_open(body).map(Message::Open),
        msg_type::UPDATE => decode_update(body).map(Message::Update),
        msg_type::NOTIFICATION => Ok(Message::Notification(Notification {
            code: body[0],
            subcode: body[1],
            data: body[2..].to_vec(),
        })),
        msg_type::KEEPALIVE => Ok(Message::Keepalive),
        _ => Ok(Message::RouteRefresh {
            afi: u16::from_be_bytes([body[0], body[1]]),
            safi: body[3],
        }),
    }
}

fn open_error(subcode: u8, what: impl Into<String>) -> WireError {
    WireError::new(err::OPEN, subcode, Vec::new(), what)
}

fn decode_open(b: &[u8]) -> Result<Open, WireError> {
    // b holds at least 10 octets (frame_len's minimum of 29).
    let version = b[0];
    if version != 4 {
        return Err(WireError::new(
            err::OPEN,
            err::OPEN_VERSION,
            4u16.to_be_bytes().to_vec(),
            format!("BGP version {version}, not 4"),
        ));
    }
    let my_as = u16::from_be_bytes([b[1], b[2]]);
    let hold_time = u16::from_be_bytes([b[3], b[4]]);
    let router_id = Ipv4Addr::new(b[5], b[6], b[7], b[8]);
    let params_len = usize::from(b[9]);
    let params = b.get(10..10 + params_len).ok_or_else(|| {
        WireError::new(
            err::HEADER,
            err::HEADER_BAD_LENGTH,
            Vec::new(),
            "OPEN's optional parameters run past the message",
        )
    })?;
    if 10 + params_len != b.len() {
        return Err(WireError::new(
            err::HEADER,
            err::HEADER_BAD_LENGTH,
            Vec::new(),
            "OPEN has octets after its optional parameters",
        ));
    }
    let mut capabilities = Vec::new();
    let mut i = 0;
    while i < params.len() {
        let (Some(&kind), Some(&plen)) = (params.get(i), params.get(i + 1)) else {
            return Err(open_error(
                err::OPEN_BAD_PARAMETER,
                "a truncated optional parameter",
            ));
        };
        let value = params
            .get(i + 2..i + 2 + usize::from(plen))
            .ok_or_else(|| {
                open_error(
                    err::OPEN_BAD_PARAMETER,
                    "an optional parameter runs past the others",
                )
            })?;
        i += 2 + usize::from(plen);
        if kind != 2 {
            return Err(open_error(
                err::OPEN_BAD_PARAMETER,
                format!("optional parameter type {kind} (only capabilities, type 2, are known)"),
            ));
        }
        let mut j = 0;
        while j < value.len() {
            let (Some(&code), Some(&clen)) = (value.get(j), value.get(j + 1)) else {
                return Err(open_error(
                    err::OPEN_BAD_PARAMETER,
                    "a truncated capability",
                ));
            };
            let v = value.get(j + 2..j + 2 + usize::from(clen)).ok_or_else(|| {
                open_error(
                    err::OPEN_BAD_PARAMETER,
                    "a capability runs past its parameter",
                )
            })?;
            j += 2 + usize::from(clen);
            capabilities.push(decode_capability(code, v)?);
        }
    }
    Ok(Open {
        version,
        my_as,
        hold_time,
        router_id,
        capabilities,
    })
}

fn decode_capability(code: u8, v: &[u8]) -> Result<Capability, WireError> {
    let bad = |what: &str| {
        open_error(
            err::OPEN_BAD_PARAMETER,
            format!("capability {code}: {what}"),
        )
    };
    Ok(match code {
        cap::MULTIPROTOCOL => {
            let [a0, a1, _, safi] = v else {
                return Err(bad("not 4 octets"));
            };
            Capability::Multiprotocol {
                afi: u16::from_be_bytes([*a0, *a1]),
                safi: *safi,
            }
        }
        cap::ROUTE_REFRESH if v.is_empty() => Capability::RouteRefresh,
        cap::FOUR_OCTET_AS => {
            let [a, b2, c, d] = v else {
                return Err(bad("not 4 octets"));
            };
            Capability::FourOctetAs(u32::from_be_bytes([*a, *b2, *c, *d]))
        }
        cap::GRACEFUL_RESTART => {
            if v.len() < 2 || !(v.len() - 2).is_multiple_of(4) {
                return Err(bad("not 2 octets and 4 per address family"));
            }
            let flags = u16::from_be_bytes([v[0], v[1]]);
            Capability::GracefulRestart(GracefulRestart {
                restarted: flags & 0x8000 != 0,
                notification: flags & 0x4000 != 0,
                restart_time: flags & 0x0fff,
                families: v[2..]
                    .chunks_exact(4)
                    .map(|f| (u16::from_be_bytes([f[0], f[1]]), f[2], f[3] & 0x80 != 0))
                    .collect(),
            })
        }
        _ => Capability::Other {
            code,
            value: v.to_vec(),
        },
    })
}

fn update_error(subcode: u8, what: impl Into<String>) -> WireError {
    WireError::new(err::UPDATE, subcode, Vec::new(), what)
}

/// Prefixes of one family packed as NLRI.
fn decode_prefixes(mut b: &[u8], v6: bool) -> Result<Vec<Prefix>, WireError> {
    let mut out = Vec::new();
    let max = if v6 { 128 } else { 32 };
    while let Some((&len, rest)) = b.split_first() {
        let n = usize::from(len).div_ceil(8);
        if len > max || rest.len() < n {
            return Err(update_error(
                err::UPDATE_INVALID_NETWORK,
                format!("a prefix of length {len} that does not fit"),
            ));
        }
        let mut octets = [0u8; 16];
        octets[..n].copy_from_slice(&rest[..n]);
        let addr = if v6 {
            IpAddr::V6(Ipv6Addr::from(octets))
        } else {
            IpAddr::V4(Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3]))
        };
        out.push(Prefix { addr, len });
        b = &rest[n..];
    }
    Ok(out)
}

fn decode_update(b: &[u8]) -> Result<Update, WireError> {
    let malformed = |what: &str| update_error(err::UPDATE_MALFORMED_ATTRIBUTES, what.to_string());
    let wlen = usize::from(u16::from_be_bytes([b[0], b[1]]));
    let withdrawn = b
        .get(2..2 + wlen)
        .ok_or_else(|| malformed("the withdrawn routes run past the message"))?;
    let rest = &b[2 + wlen..];
    let (Some(&a0), Some(&a1)) = (rest.first(), rest.get(1)) else {
        return Err(malformed("no total path attribute length"));
    };
    let alen = usize::from(u16::from_be_bytes([a0, a1]));
    let attrs = rest
        .get(2..2 + alen)
        .ok_or_else(|| malformed("the path attributes run past the message"))?;
    let nlri = &rest[2 + alen..];
    let mut u = Update {
        withdrawn: decode_prefixes(withdrawn, false)?,
        nlri: decode_prefixes(nlri, false)?,
        ..Update::default()
    };
    let mut i = 0;
    let mut a = Attributes {
        origin: Origin::Igp,
        as_path: Vec::new(),
        next_hop: None,
        med: None,
        local_pref: None,
        communities: Vec::new(),
    };
    let mut any = false;
    while i < attrs.len() {
        let (Some(&flags), Some(&code)) = (attrs.get(i), attrs.get(i + 1)) else {
            return Err(malformed("a truncated attribute header"));
        };
        let (len, hdr) = if flags & flag::EXTENDED != 0 {
            let (Some(&l0), Some(&l1)) = (attrs.get(i + 2), attrs.get(i + 3)) else {
                return Err(malformed("a truncated attribute length"));
            };
            (usize::from(u16::from_be_bytes([l0, l1])), 4)
        } else {
            let Some(&l) = attrs.get(i + 2) else {
                return Err(malformed("a truncated attribute length"));
            };
            (usize::from(l), 3)
        };
        let v = attrs
            .get(i + hdr..i + hdr + len)
            .ok_or_else(|| malformed("an attribute runs past the others"))?;
        i += hdr + len;
        match code {
            attr::ORIGIN => {
                any = true;
                a.origin = match v {
                    [0] => Origin::Igp,
                    [1] => Origin::Egp,
                    [2] => Origin::Incomplete,
                    _ => return Err(update_error(6, "an invalid ORIGIN")),
                };
            }
            attr::AS_PATH => {
                any = true;
                a.as_path = decode_as_path(v, true)
                    .or_else(|_| decode_as_path(v, false))
                    .map_err(|()| {
                        update_error(err::UPDATE_MALFORMED_AS_PATH, "a malformed AS_PATH")
                    })?;
            }
            attr::NEXT_HOP => {
                let [x, y, z, w] = v else {
                    return Err(update_error(5, "a NEXT_HOP that is not 4 octets"));
                };
                a.next_hop = Some(Ipv4Addr::new(*x, *y, *z, *w));
            }
            attr::MED => {
                let [x, y, z, w] = v else {
                    return Err(update_error(5, "a MULTI_EXIT_DISC that is not 4 octets"));
                };
                a.med = Some(u32::from_be_bytes([*x, *y, *z, *w]));
            }
            attr::LOCAL_PREF => {
                let [x, y, z, w] = v else {
                    return Err(update_error(5, "a LOCAL_PREF that is not 4 octets"));
                };
                a.local_pref = Some(u32::from_be_bytes([*x, *y, *z, *w]));
            }
            attr::COMMUNITIES => {
                if v.len() % 4 != 0 {
                    return Err(update_error(5, "COMMUNITIES not a multiple of 4 octets"));
                }
                a.communities = v
                    .chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
            }
            attr::MP_REACH_NLRI => u.mp_reach = decode_mp_reach(v)?,
            attr::MP_UNREACH_NLRI => {
                if v.len() < 3 {
                    return Err(malformed("a truncated MP_UNREACH_NLRI"));
                }
                let afi = u16::from_be_bytes([v[0], v[1]]);
                if afi == AFI_IPV6 && v[2] == SAFI_UNICAST {
                    u.mp_unreach = Some(decode_prefixes(&v[3..], true)?);
                }
            }
            _ => {}
        }
    }
    if any {
        u.attributes = Some(a);
    }
    Ok(u)
}

/// An AS_PATH's ASes in order (segments flattened), reading each AS in four octets or two.
fn decode_as_path(mut v: &[u8], four: bool) -> Result<Vec<u32>, ()> {
    let width = if four { 4 } else { 2 };
    let mut out = Vec::new();
    while !v.is_empty() {
        let [kind, n, rest @ ..] = v else {
            return Err(());
        };
        if !(1..=4).contains(kind) {
            return Err(());
        }
        let need = usize::from(*n) * width;
        let seg = rest.get(..need).ok_or(())?;
        for c in seg.chunks_exact(width) {
            out.push(if four {
                u32::from_be_bytes([c[0], c[1], c[2], c[3]])
            } else {
                u32::from(u16::from_be_bytes([c[0], c[1]]))
            });
        }
        v = &rest[need..];
    }
    Ok(out)
}

type MpReach = Option<(Ipv6Addr, Option<Ipv6Addr>, Vec<Prefix>)>;

fn decode_mp_reach(v: &[u8]) -> Result<MpReach, WireError> {
    let malformed = || {
        update_error(
            err::UPDATE_MALFORMED_ATTRIBUTES,
            "a malformed MP_REACH_NLRI",
        )
    };
    if v.len() < 5 {
        return Err(malformed());
    }
    let afi = u16::from_be_bytes([v[0], v[1]]);
    let safi = v[2];
    let nh_len = usize::from(v[3]);
    let nh = v.get(4..4 + nh_len).ok_or_else(malformed)?;
    let nlri = v.get(4 + nh_len + 1..).ok_or_else(malformed)?;
    if afi != AFI_IPV6 || safi != SAFI_UNICAST {
        return Ok(None);
    }
    let addr = |o: &[u8]| -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(o);
        Ipv6Addr::from(a)
    };
    let (global, ll) = match nh.len() {
        16 => (addr(nh), None),
        32 => (addr(&nh[..16]), Some(addr(&nh[16..]))),
        _ => return Err(malformed()),
    };
    Ok(Some((global, ll, decode_prefixes(nlri, true)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const M: &str = "ffffffffffffffffffffffffffffffff";

    #[test]
    fn keepalive_is_the_nineteen_octet_header() {
        // RFC 4271 §4.4: a KEEPALIVE is the header alone, length 19, type 4.
        let k = Message::Keepalive.to_bytes().unwrap();
        assert_eq!(k, hex(&format!("{M} 0013 04")));
        assert_eq!(decode(&k).unwrap(), Message::Keepalive);
    }

    #[test]
    fn open_with_four_octet_as_graceful_restart_and_ipv6() {
        // Worked by hand from RFC 4271 §4.2, RFC 5492 (capabilities, parameter type 2),
        // RFC 4760 §8, RFC 6793 §3 and RFC 4724 §3: AS 4200000001 does not fit two octets, so
        // My AS is AS_TRANS (23456 = 0x5ba0); hold time 9; identifier 192.0.2.1.
        let open = Open {
            version: 4,
            my_as: AS_TRANS,
            hold_time: 9,
            router_id: Ipv4Addr::new(192, 0, 2, 1),
            capabilities: vec![
                Capability::Multiprotocol { afi: 1, safi: 1 },
                Capability::Multiprotocol { afi: 2, safi: 1 },
                Capability::FourOctetAs(4_200_000_001),
                Capability::GracefulRestart(GracefulRestart {
                    restarted: true,
                    notification: false,
                    restart_time: 120,
                    families: vec![(1, 1, true), (2, 1, false)],
                }),
            ],
        };
        let bytes = Message::Open(open.clone()).to_bytes().unwrap();
        let expect = hex(&format!(
            "{M} 0043 01 04 5ba0 0009 c0000201 26
             02 06 01 04 0001 00 01
             02 06 01 04 0002 00 01
             02 06 41 04 fa56ea01
             02 0c 40 0a 8078 0001 01 80 0002 01 00"
        ));
        assert_eq!(bytes, expect);
        let back = decode(&bytes).unwrap();
        assert_eq!(back, Message::Open(open.clone()));
        assert_eq!(open.asn(), 4_200_000_001);
        assert!(open.four_octet());
        assert!(open.supports(AFI_IPV6, SAFI_UNICAST));
        let gr = open.graceful_restart().unwrap();
        assert_eq!(gr.restart_time, 120);
    }

    #[test]
    fn an_open_without_multiprotocol_speaks_ipv4_unicast_only() {
        // RFC 4760 §8: without the capability, only IPv4 unicast.
        let open = Open {
            version: 4,
            my_as: 65000,
            hold_time: 90,
            router_id: Ipv4Addr::new(10, 0, 0, 1),
            capabilities: vec![],
        };
        assert!(open.supports(AFI_IPV4, SAFI_UNICAST));
        assert!(!open.supports(AFI_IPV6, SAFI_UNICAST));
        assert_eq!(open.asn(), 65000);
    }

    #[test]
    fn update_announcing_a_vip_to_an_external_peer() {
        // ORIGIN IGP (40 01 01 00), AS_PATH one AS_SEQUENCE of 4200000001 in four octets
        // (40 02 06 02 01 fa56ea01), NEXT_HOP 10.79.1.2 (40 03 04 0a4f0102), MED 10
        // (80 04 04 0000000a), COMMUNITIES 65000:100 (c0 08 04 fde80064); NLRI 10.77.1.1/32.
        let u = Update {
            attributes: Some(Attributes {
                origin: Origin::Igp,
                as_path: vec![4_200_000_001],
                next_hop: Some(Ipv4Addr::new(10, 79, 1, 2)),
                med: Some(10),
                local_pref: None,
                communities: vec![(65000 << 16) | 100],
            }),
            nlri: vec![Prefix::host("10.77.1.1".parse().unwrap())],
            ..Update::default()
        };
        let mut out = Vec::new();
        encode_update(&u, true, &mut out).unwrap();
        let expect = hex(&format!(
            "{M} 003e 02 0000 0022
             40 01 01 00
             40 02 06 02 01 fa56ea01
             40 03 04 0a4f0102
             80 04 04 0000000a
             c0 08 04 fde80064
             20 0a4d0101"
        ));
        assert_eq!(out, expect);
        assert_eq!(decode(&out).unwrap(), Message::Update(u));
    }

    #[test]
    fn a_large_as_towards_a_two_octet_peer_goes_in_as4_path() {
        // RFC 6793 §4.2.2: AS_TRANS in AS_PATH, the real AS in AS4_PATH (optional transitive).
        let u = Update {
            attributes: Some(Attributes {
                origin: Origin::Igp,
                as_path: vec![4_200_000_001],
                next_hop: Some(Ipv4Addr::new(192, 0, 2, 9)),
                med: None,
                local_pref: None,
                communities: vec![],
            }),
            nlri: vec![Prefix::host("10.77.1.1".parse().unwrap())],
            ..Update::default()
        };
        let mut out = Vec::new();
        encode_update(&u, false, &mut out).unwrap();
        let attrs = &out[23..out.len() - 5];
        assert_eq!(
            attrs,
            &hex("40 01 01 00  40 02 04 02 01 5ba0  40 03 04 c0000209  c0 11 06 02 01 fa56ea01")[..]
        );
    }

    #[test]
    fn ipv6_goes_in_mp_reach_and_mp_unreach() {
        // RFC 4760 §3: AFI 2, SAFI 1, next hop length 16, the next hop, a reserved octet, NLRI.
        let vip: IpAddr = "2001:db8::10".parse().unwrap();
        let nh: Ipv6Addr = "2001:db8:ffff::2".parse().unwrap();
        let u = Update {
            attributes: Some(Attributes {
                origin: Origin::Igp,
                as_path: vec![],
                next_hop: None,
                med: None,
                local_pref: Some(100),
                communities: vec![],
            }),
            mp_reach: Some((nh, None, vec![Prefix::host(vip)])),
            ..Update::default()
        };
        let bytes = Message::Update(u.clone()).to_bytes().unwrap();
        let expect = hex(&format!(
            "{M} 004e 02 0000 0037
             40 01 01 00
             40 02 00
             40 05 04 00000064
             80 0e 26 0002 01 10 20010db8ffff00000000000000000002 00
                80 20010db8000000000000000000000010"
        ));
        assert_eq!(bytes, expect);
        assert_eq!(decode(&bytes).unwrap(), Message::Update(u));
        let w = Update {
            mp_unreach: Some(vec![Prefix::host(vip)]),
            ..Update::default()
        };
        let bytes = Message::Update(w.clone()).to_bytes().unwrap();
        assert_eq!(
            bytes,
            hex(&format!(
                "{M} 002e 02 0000 0017 80 0f 14 0002 01 80 20010db8000000000000000000000010"
            ))
        );
        assert_eq!(decode(&bytes).unwrap(), Message::Update(w));
    }

    #[test]
    fn end_of_rib_markers() {
        // RFC 4724 §2: IPv4 unicast's is an UPDATE with nothing (23 octets); another family's
        // an UPDATE holding only an empty MP_UNREACH_NLRI for it.
        let v4 = Message::Update(Update::end_of_rib(AFI_IPV4))
            .to_bytes()
            .unwrap();
        assert_eq!(v4, hex(&format!("{M} 0017 02 0000 0000")));
        let v6 = Message::Update(Update::end_of_rib(AFI_IPV6))
            .to_bytes()
            .unwrap();
        assert_eq!(v6, hex(&format!("{M} 001d 02 0000 0006 80 0f 03 0002 01")));
        for (bytes, afi) in [(v4, AFI_IPV4), (v6, AFI_IPV6)] {
            let Message::Update(u) = decode(&bytes).unwrap() else {
                panic!()
            };
            assert_eq!(u.is_end_of_rib(), Some(afi));
        }
        let withdraw = Update {
            withdrawn: vec![Prefix::host("10.0.0.1".parse().unwrap())],
            ..Update::default()
        };
        assert_eq!(withdraw.is_end_of_rib(), None);
    }

    #[test]
    fn withdrawals_and_short_prefixes() {
        // A /24 takes three octets, a /0 none (RFC 4271 §4.3).
        let u = Update {
            withdrawn: vec![
                Prefix {
                    addr: "198.51.100.0".parse().unwrap(),
                    len: 24,
                },
                Prefix {
                    addr: "0.0.0.0".parse().unwrap(),
                    len: 0,
                },
            ],
            ..Update::default()
        };
        let bytes = Message::Update(u.clone()).to_bytes().unwrap();
        assert_eq!(bytes, hex(&format!("{M} 001c 02 0005 18 c63364 00 0000")));
        assert_eq!(decode(&bytes).unwrap(), Message::Update(u));
    }

    #[test]
    fn notifications_read_in_words() {
        let n = Notification {
            code: 6,
            subcode: 2,
            data: b"\x08draining".to_vec(),
        };
        let bytes = Message::Notification(n.clone()).to_bytes().unwrap();
        assert_eq!(&bytes[16..21], &[0, 30, 3, 6, 2]);
        let Message::Notification(back) = decode(&bytes).unwrap() else {
            panic!()
        };
        assert_eq!(back, n);
        assert_eq!(
            back.describe(),
            "cease: administrative shutdown (6/2): \"draining\""
        );
        assert_eq!(
            Notification {
                code: 2,
                subcode: 2,
                data: vec![]
            }
            .describe(),
            "OPEN message error: bad peer AS (2/2)"
        );
    }

    #[test]
    fn header_errors_are_the_rfcs() {
        // RFC 4271 §6.1: marker → Connection Not Synchronized; length out of range or wrong for
        // the type → Bad Message Length (data: the length); unknown type → Bad Message Type
        // (data: the type).
        let mut bad_marker = Message::Keepalive.to_bytes().unwrap();
        bad_marker[3] = 0;
        assert_eq!(frame_len(&bad_marker).unwrap_err().subcode, 1);
        let long_keepalive = hex(&format!("{M} 0014 04 00"));
        let e = frame_len(&long_keepalive).unwrap_err();
        assert_eq!((e.code, e.subcode, e.data.clone()), (1, 2, vec![0, 20]));
        let e = frame_len(&hex(&format!("{M} 1001 02"))).unwrap_err();
        assert_eq!((e.code, e.subcode), (1, 2));
        let e = frame_len(&hex(&format!("{M} 0013 09"))).unwrap_err();
        assert_eq!((e.code, e.subcode, e.data), (1, 3, vec![9]));
        assert_eq!(frame_len(&hex(M)).unwrap(), None);
    }

    #[test]
    fn open_errors_are_the_rfcs() {
        // Version 3 → Unsupported Version Number with the largest supported (4) as data.
        let mut v3 = Message::Open(Open {
            version: 3,
            my_as: 1,
            hold_time: 90,
            router_id: Ipv4Addr::new(1, 1, 1, 1),
            capabilities: vec![],
        })
        .to_bytes()
        .unwrap();
        let e = decode(&v3).unwrap_err();
        assert_eq!((e.code, e.subcode, e.data), (2, 1, vec![0, 4]));
        // A parameter of type 1 (authentication, deprecated) → Unsupported Optional Parameter.
        v3[19] = 4;
        v3[28] = 3;
        v3.extend_from_slice(&[1, 1, 0]);
        v3[17] += 3;
        let e = decode(&v3).unwrap_err();
        assert_eq!((e.code, e.subcode), (2, 4));
    }

    #[test]
    fn malformed_updates_never_panic() {
        // Every truncation and every one-octet corruption of real messages decodes or fails
        // with an UPDATE or header error, never a panic.
        let u = Update {
            withdrawn: vec![Prefix::host("10.0.0.9".parse().unwrap())],
            attributes: Some(Attributes {
                origin: Origin::Igp,
                as_path: vec![65001, 4_200_000_001],
                next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
                med: Some(5),
                local_pref: Some(100),
                communities: vec![1, 2],
            }),
            nlri: vec![Prefix::host("10.77.1.1".parse().unwrap())],
            mp_reach: Some((
                "2001:db8::1".parse().unwrap(),
                Some("fe80::1".parse().unwrap()),
                vec![Prefix::host("2001:db8::10".parse().unwrap())],
            )),
            mp_unreach: Some(vec![Prefix::host("2001:db8::11".parse().unwrap())]),
        };
        let good = Message::Update(u.clone()).to_bytes().unwrap();
        assert_eq!(decode(&good).unwrap(), Message::Update(u));
        for cut in HEADER_LEN..good.len() {
            let mut m = good[..cut].to_vec();
            m[16..18].copy_from_slice(&(cut as u16).to_be_bytes());
            let _ = decode(&m);
        }
        for i in HEADER_LEN..good.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut m = good.clone();
                m[i] = v;
                let _ = decode(&m);
            }
        }
    }
}
