//! What `nlbctl` and `nlbd` speak to each other and to etcd.
//!
//! - [`admin_proto`]: the admin socket protocol between `nlbd` (the server) and `nlbctl
//!   status|health|conntrack|top|explain` (the clients), serde only: `nlbctl` speaks it over a
//!   blocking `std` socket.
//! - [`fleet`]: the fleet's store in etcd (the configuration's revisions, the hosts' records),
//!   which `nlbctl publish|fleet` write and read and `nlbd --etcd` follows (docs/fleet.md).
//! - [`etcd`]: the blocking etcd client under it (etcd's JSON gateway over HTTP/1.1, TLS with
//!   rustls, etcd's authentication), and the etcd options both binaries take.
//! - [`bgp`]: BGP messages and one session's state machine without I/O, with which `nlbd`
//!   announces the VIPs it serves to the host's routing daemon.
//! - [`splitmix`]: the SplitMix64 mixer behind the fleet's rendezvous hashing, and a seeded
//!   stream of numbers for the simulators built on it.
#![deny(missing_docs)]

pub mod admin_proto;
pub mod bgp;
pub mod etcd;
pub mod fleet;
pub mod splitmix;
