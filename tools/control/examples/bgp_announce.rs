//! Announces host routes to a BGP peer until killed (a blocking driver of
//! `nlb_control::bgp::Session`, for trying a routing daemon's behaviour by hand).
//!
//! cargo run -p nlb-control --example bgp_announce -- PEER:PORT LOCAL_AS PEER_AS ROUTER_ID [--bind IP] [--restart-time S] [--restarted] [--hold S] PREFIX...
use nlb_control::bgp::{Prefix, RestartState, Session, SessionConfig};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: PEER:PORT LOCAL_AS PEER_AS ROUTER_ID [--bind IP] [--restart-time S] [--restarted] [--hold S] PREFIX...");
        std::process::exit(1);
    }
    let peer: SocketAddr = args[0].parse().expect("peer");
    let mut cfg = SessionConfig {
        local_as: args[1].parse().expect("local as"),
        peer_as: args[2].parse().expect("peer as"),
        router_id: args[3].parse().expect("router id"),
        hold_time: 9,
        restart_time: None,
        med: None,
        communities: vec![],
        local_pref: None,
        next_hop_v4: None,
        next_hop_v6: None,
    };
    let mut restart = RestartState::default();
    let mut bind: Option<IpAddr> = None;
    let mut routes = std::collections::BTreeSet::new();
    let mut i = 4;
    while i < args.len() {
        match args[i].as_str() {
            "--bind" => {
                bind = Some(args[i + 1].parse().expect("bind"));
                i += 1;
            }
            "--restart-time" => {
                cfg.restart_time = Some(args[i + 1].parse().expect("restart time"));
                i += 1;
            }
            "--hold" => {
                cfg.hold_time = args[i + 1].parse().expect("hold");
                i += 1;
            }
            "--next-hop" => {
                cfg.next_hop_v4 = Some(args[i + 1].parse().expect("nh"));
                i += 1;
            }
            "--restarted" => {
                restart = RestartState {
                    restarted: true,
                    forwarding: true,
                }
            }
            p => {
                let (a, l) = p.split_once('/').expect("prefix");
                routes.insert(Prefix {
                    addr: a.parse().expect("addr"),
                    len: l.parse().expect("len"),
                });
            }
        }
        i += 1;
    }
    let sock = match bind {
        Some(b) => {
            let s = socket2_free_bind(b, peer);
            s
        }
        None => TcpStream::connect(peer).expect("connect"),
    };
    let local = sock.local_addr().unwrap().ip();
    eprintln!("connected from {local}");
    let mut sock = sock;
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut s = Session::new(cfg, local, restart, Instant::now());
    s.set_routes(routes, Instant::now());
    let mut buf = [0u8; 4096];
    loop {
        let out = s.take_output();
        if !out.is_empty() {
            sock.write_all(&out).unwrap();
        }
        match sock.read(&mut buf) {
            Ok(0) => {
                eprintln!("peer closed");
                return;
            }
            Ok(n) => match s.receive(&buf[..n], Instant::now()) {
                Ok(ev) => ev.iter().for_each(|e| eprintln!("{e:?}")),
                Err(e) => {
                    let _ = sock.write_all(&s.take_output());
                    eprintln!("error: {e}");
                    return;
                }
            },
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => {
                eprintln!("read: {e}");
                return;
            }
        }
        if let Err(e) = s.poll(Instant::now()) {
            let _ = sock.write_all(&s.take_output());
            eprintln!("error: {e}");
            return;
        }
    }
}

fn socket2_free_bind(b: IpAddr, peer: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(peer),
        socket2::Type::STREAM,
        None,
    )
    .unwrap();
    s.bind(&SocketAddr::new(b, 0).into()).unwrap();
    s.connect(&peer.into()).expect("connect");
    s.into()
}
