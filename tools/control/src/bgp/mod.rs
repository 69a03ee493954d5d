//! BGP for announcing VIPs (SPEC R15.1): the messages ([`wire`]) and one session's state
//! machine without I/O ([`session`]), which `nlbd` drives over TCP to the host's routing
//! daemon (docs/fleet.md, "Announcing VIPs by BGP").
//!
//! The speaker announces and withdraws host routes and never installs what it hears: it is
//! RFC 4271's BGP-4 with four-octet AS numbers (RFC 6793), IPv6 unicast by multiprotocol
//! extensions (RFC 4760), graceful restart (RFC 4724) and communities (RFC 1997).

pub mod session;
pub mod wire;

pub use session::{Event, RestartState, Session, SessionConfig, SessionError, State};
pub use wire::{Prefix, AS_TRANS};
