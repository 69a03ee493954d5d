//! `nlbctl top` as a person uses it, and the progress bars of long operations.
//!
//! A simulated NIC served by this test, nlbd managing it with real HTTP health checks, and
//! `nlbctl top` running in a tmux window: the test types keys and reads the screen. Traffic
//! of known size goes through the NIC between two samples, so the rates on the screen must be
//! exactly those packets and bytes over the interval the screen names. `--once -o json` is
//! checked field by field against the traffic sent, the configuration and the regmap.
//!
//! Needs tmux (./test.sh installs it; without it the tests skip, unless CI is set).

use nlb_system_tests::harness;

use harness::{have, hc_port, nlbctl, tcp, udp, Backend, Nic, Nlbd, Tmux};
use nlb_driver::model::lock;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WEB: [u8; 4] = [203, 0, 113, 80];
const DNS: [u8; 4] = [203, 0, 113, 53];

/// Two VIPs: `web` (TCP 80) to a checked pool of three, `dns` (UDP 53) to an unchecked pool
/// of two. `NET` is the loopback /24 of the web backends' health checks.
fn config_text(net: u8, port: u16) -> String {
    format!(
        "
forwardingRules:
  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}}
  - {{name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}}
targetPools:
  - {{name: web, region: r, instances: [b1, b2, b3], healthChecks: [hc]}}
  - {{name: dns, region: r, instances: [d1, d2]}}
instances:
  - {{name: b1, ip: 127.0.{net}.1, zone: z, mac: '02:00:00:00:77:01'}}
  - {{name: b2, ip: 127.0.{net}.2, zone: z, mac: '02:00:00:00:77:02'}}
  - {{name: b3, ip: 127.0.{net}.3, zone: z, mac: '02:00:00:00:77:03'}}
  - {{name: d1, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:88:01'}}
  - {{name: d2, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:88:02'}}
httpHealthChecks:
  - {{name: hc, port: {port}, requestPath: /healthz, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 1}}
"
    )
}

/// A running setup: b1 and b2 answer their checks, b3 does not.
struct Lab {
    dir: tempfile::TempDir,
    nic: Nic,
    nlbd: Nlbd,
    _backends: Vec<Backend>,
}

impl Lab {
    fn start(net: u8, offset: u16) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let port = hc_port(offset);
        let config = dir.path().join("lb.yaml");
        std::fs::write(&config, config_text(net, port)).unwrap();
        let device = dir.path().join("nic.sock");
        let nic = Nic::start(&device);
        let backends = (1..=2)
            .map(|i| Backend::start(Ipv4Addr::new(127, 0, net, i), port))
            .collect();
        let nlbd = Nlbd::start(dir.path(), &config, &device);
        for (b, want) in [("b1", "healthy"), ("b2", "healthy"), ("b3", "unhealthy")] {
            nlbd.wait_for(&format!("{b} {want}"), || {
                (nlbd.health("web", b)? == want).then_some(())
            });
        }
        Lab {
            dir,
            nic,
            nlbd,
            _backends: backends,
        }
    }

    fn socket(&self) -> &str {
        self.nlbd.socket.to_str().unwrap()
    }

    fn connections(&self) -> u64 {
        self.nlbd
            .admin("conntrack")
            .and_then(|c| c["total"].as_u64())
            .unwrap_or(0)
    }

    /// Known traffic: 20 new TCP connections to `web` and 5 UDP flows to `dns`, installed by
    /// nlbd, then 14 more packets on each TCP connection and 9 on each UDP flow. Every first
    /// packet waits for its connection's install (a flow's packets before it would each be
    /// a learn event).
    fn burst(&mut self) -> Traffic {
        let mut t = Traffic::default();
        let before = self.connections();
        for i in 0..20 {
            let f = tcp([198, 51, 100, 7], 10000 + i, WEB, 80, true);
            self.nic.forward(&f);
            t.web.add(&f);
        }
        for i in 0..5 {
            let f = udp([198, 51, 100, 8], 5000 + i, DNS, 53, 100);
            self.nic.forward(&f);
            t.dns.add(&f);
        }
        self.nlbd.wait_for("25 connections installed", || {
            (self.connections() == before + 25).then_some(())
        });
        for i in 0..20 {
            for _ in 0..14 {
                let f = tcp([198, 51, 100, 7], 10000 + i, WEB, 80, false);
                self.nic.forward(&f);
                t.web.add(&f);
            }
        }
        for i in 0..5 {
            for _ in 0..9 {
                let f = udp([198, 51, 100, 8], 5000 + i, DNS, 53, 100);
                self.nic.forward(&f);
                t.dns.add(&f);
            }
        }
        t.new_connections = 25;
        t
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Count {
    packets: u64,
    bytes: u64,
}

impl Count {
    fn add(&mut self, frame: &[u8]) {
        self.packets += 1;
        self.bytes += frame.len() as u64;
    }
}

#[derive(Debug, Default)]
struct Traffic {
    web: Count,
    dns: Count,
    new_connections: u64,
}

/// The rows of the box titled `title` (its header row first), each split into words.
fn rows(screen: &str, title: &str) -> Vec<Vec<String>> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let pattern: Vec<char> = format!("┌ {title} (").chars().collect();
    let Some((top, left)) = lines.iter().enumerate().find_map(|(y, l)| {
        l.windows(pattern.len())
            .position(|w| w == pattern.as_slice())
            .map(|x| (y, x))
    }) else {
        return Vec::new();
    };
    let right = lines[top][left..]
        .iter()
        .position(|c| *c == '┐')
        .map_or(lines[top].len(), |p| left + p);
    lines[top + 1..]
        .iter()
        .take_while(|l| l.get(left) == Some(&'│'))
        .map(|l| {
            l[left + 1..right.min(l.len())]
                .iter()
                .collect::<String>()
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|r| !r.is_empty())
        .skip(1)
        .collect()
}

/// The words of the row of `title` whose first word is `first`.
fn row(screen: &str, title: &str, first: &str) -> Vec<String> {
    rows(screen, title)
        .into_iter()
        .find(|r| r[0] == first)
        .unwrap_or_else(|| panic!("no row `{first}` in {title}:\n{screen}"))
}

/// First words of the rows of `title`, top to bottom.
fn order(screen: &str, title: &str) -> Vec<String> {
    rows(screen, title)
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

/// The number after `word ` in the header.
fn after(screen: &str, word: &str) -> Option<f64> {
    let at = screen.find(word)? + word.len();
    screen[at..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

/// `sample N` of the header and the interval its rates are over.
fn sample(screen: &str) -> Option<(u64, Option<f64>)> {
    let n = after(screen, "sample ")? as u64;
    Some((n, after(screen, " over ")))
}

fn num(s: &str) -> f64 {
    s.parse()
        .unwrap_or_else(|_| panic!("`{s}` is not a number"))
}

/// A rate on the screen (one decimal) against `count` over `secs`.
#[track_caller]
fn assert_rate(shown: &str, count: u64, secs: f64, what: &str) {
    let want = count as f64 / secs;
    // One decimal shown, and the interval shown to the millisecond.
    let slack = 0.051 + want * 0.0006 / secs;
    assert!(
        (num(shown) - want).abs() <= slack,
        "{what}: shown {shown}, {count} over {secs} s is {want:.3}"
    );
}

fn status_generation(lab: &Lab) -> u64 {
    lab.nlbd.admin("status").unwrap()["generation"]
        .as_u64()
        .unwrap()
}

#[test]
fn top_shows_live_rates_and_sorts_filters_and_quits_on_keys() {
    if !have("tmux", "tmux") {
        return;
    }
    let mut lab = Lab::start(79, 1);
    // Seven frames to an address without a rule: passed to the host (SPEC R2.4).
    for i in 0..7 {
        lab.nic.send(&tcp(
            [198, 51, 100, 9],
            40000 + i,
            [203, 0, 113, 99],
            80,
            true,
        ));
    }
    let tmux = Tmux::start(lab.dir.path(), 200, 50);
    tmux.type_text(&format!(
        "{} top --socket {} --interval 3; echo \"exit status $?\"",
        nlb_system_tests::bin("nlbctl"),
        lab.socket()
    ));
    tmux.keys(&["Enter"]);

    // The first sample has no rates yet; traffic goes in right after a sample shows.
    let (k, _) = tmux.wait_screen("a sample", |s| sample(s).filter(|(n, _)| *n >= 1));
    let first = tmux.screen();
    assert!(first.contains("Rules (2)"), "{first}");
    let t = lab.burst();
    let (screen, secs) = tmux.wait_screen("the sample after the traffic", |s| {
        let (n, over) = sample(s)?;
        (n == k + 1).then(|| (s.to_string(), over))
    });
    let secs = secs.unwrap_or_else(|| panic!("no interval on the screen:\n{screen}"));
    assert!(
        (2.5..6.0).contains(&secs),
        "an interval of 3 s: {secs}\n{screen}"
    );

    // Rules: RULE VIP PROTO PORTS TARGET PKT/S BYTES/S PUNT/S DROP/S PACKETS.
    let web = row(&screen, "Rules", "web");
    assert_eq!(web[1..5], ["203.0.113.80", "TCP", "80", "web"], "{screen}");
    assert_rate(&web[5], t.web.packets, secs, "web packets/s");
    assert_rate(&web[6], t.web.bytes, secs, "web bytes/s");
    assert_eq!(web[7..], ["0.0", "0.0", t.web.packets.to_string().as_str()]);
    let dns = row(&screen, "Rules", "dns");
    assert_eq!(dns[1..5], ["203.0.113.53", "UDP", "53", "dns"], "{screen}");
    assert_rate(&dns[5], t.dns.packets, secs, "dns packets/s");
    assert_rate(&dns[6], t.dns.bytes, secs, "dns bytes/s");
    assert_eq!(dns[9], t.dns.packets.to_string());
    // VIPs: VIP RULES PKT/S BYTES/S PACKETS, the sums of their rules.
    let vip = row(&screen, "VIPs", "203.0.113.80");
    assert_eq!(vip[1], "web");
    assert_rate(&vip[2], t.web.packets, secs, "VIP packets/s");
    assert_eq!(vip[4], t.web.packets.to_string());
    // Backends: BACKEND POOL HEALTH WEIGHT IN-TABLES PKT/S BYTES/S PACKETS. The unhealthy b3
    // gets nothing; b1 and b2 share web's traffic; the unchecked dns pool's members share dns's.
    let b3 = row(&screen, "Backends", "b3");
    assert_eq!(
        b3[1..],
        ["web", "unhealthy", "not_weighted", "out", "0.0", "0.0", "0"]
    );
    let b1 = row(&screen, "Backends", "b1");
    assert_eq!(b1[1..5], ["web", "healthy", "not_weighted", "healthy"]);
    let b2 = row(&screen, "Backends", "b2");
    let sum = |a: &[String], b: &[String], i: usize| num(&a[i]) + num(&b[i]);
    let pair_slack = 0.11 + 0.001 * t.web.packets as f64;
    assert!(
        (sum(&b1, &b2, 5) - t.web.packets as f64 / secs).abs() <= pair_slack,
        "b1 + b2 packets/s\n{screen}"
    );
    assert_eq!(
        num(&b1[7]) + num(&b2[7]),
        t.web.packets as f64,
        "b1 + b2 packets\n{screen}"
    );
    let d1 = row(&screen, "Backends", "d1");
    let d2 = row(&screen, "Backends", "d2");
    assert_eq!(d1[1..5], ["dns", "unchecked", "-", "-"]);
    assert_eq!(num(&d1[7]) + num(&d2[7]), t.dns.packets as f64);
    // Pools: POOL SERVING MEMBERS HEALTHY.
    assert_eq!(row(&screen, "Pools", "web")[1..], ["web", "3", "2"]);
    // Reasons: REASON PKT/S PUNT/S DROP/S PACKETS PUNTS DROPS.
    let forwarded = row(&screen, "Reasons", "forwarded");
    assert_rate(
        &forwarded[1],
        t.web.packets + t.dns.packets,
        secs,
        "forwarded/s",
    );
    assert_eq!(forwarded[4], (t.web.packets + t.dns.packets).to_string());
    let no_rule = row(&screen, "Reasons", "no_rule");
    assert_eq!(no_rule[1..], ["0.0", "0.0", "0.0", "7", "0", "0"]);
    // The header: connections, new connections per second, verdict rates, generation.
    let new = screen
        .split("new ")
        .nth(1)
        .and_then(|s| s.split("/s").next())
        .unwrap();
    assert_rate(new, t.new_connections, secs, "new connections/s");
    let fwd = screen
        .split("forwarded ")
        .nth(1)
        .and_then(|s| s.split("/s").next())
        .unwrap();
    assert_rate(fwd, t.web.packets + t.dns.packets, secs, "forwarded/s");
    assert!(
        screen.contains(&format!("connections {}/16384 (0.2%)", t.new_connections)),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("generation {} (bank", status_generation(&lab))),
        "{screen}"
    );

    // Sorting: by packets (web 300 before dns 50), by name, reversed, cycled.
    tmux.keys(&["t"]);
    let s = tmux.wait_screen("sort by packets", |s| {
        s.contains("sort: packets ▼").then(|| s.to_string())
    });
    assert_eq!(order(&s, "Rules"), ["web", "dns"]);
    tmux.keys(&["n"]);
    let s = tmux.wait_screen("sort by name", |s| {
        s.contains("sort: name ▼").then(|| s.to_string())
    });
    assert_eq!(order(&s, "Rules"), ["dns", "web"]);
    assert_eq!(order(&s, "Backends"), ["b1", "b2", "b3", "d1", "d2"]);
    tmux.keys(&["r"]);
    let s = tmux.wait_screen("reversed", |s| {
        s.contains("sort: name ▲").then(|| s.to_string())
    });
    assert_eq!(order(&s, "Rules"), ["web", "dns"]);
    assert_eq!(order(&s, "Backends"), ["d2", "d1", "b3", "b2", "b1"]);
    tmux.keys(&["s"]);
    tmux.wait_screen("s cycles to pkt/s", |s| {
        s.contains("sort: pkt/s ▲").then_some(())
    });
    tmux.keys(&["r", "t"]);
    tmux.wait_screen("packets again", |s| {
        s.contains("sort: packets ▼").then_some(())
    });

    // Filtering: `/dns` Enter shows only what is named dns; Esc shows everything again; a
    // filter being typed and dropped with Esc leaves none.
    tmux.keys(&["/"]);
    tmux.type_text("DNS");
    tmux.keys(&["Enter"]);
    // Each wait takes the whole expected screen: tmux may capture a frame half drawn (the
    // header already new, the tables below not yet), so the tables are part of the condition
    // and a screen that never shows them fails the wait with the screen printed.
    tmux.wait_screen("the filter: dns's rule, VIP, pool and backends only", |s| {
        (s.contains("filter: DNS")
            && !s.contains("Enter keeps it")
            && order(s, "Rules") == ["dns"]
            && order(s, "VIPs") == ["203.0.113.53"]
            && order(s, "Pools") == ["dns"]
            && order(s, "Backends") == ["d1", "d2"])
        .then_some(())
    });
    tmux.keys(&["Escape"]);
    tmux.wait_screen("no filter: both rules again", |s| {
        (s.contains("filter: none") && order(s, "Rules") == ["web", "dns"]).then_some(())
    });
    tmux.keys(&["/"]);
    tmux.type_text("zz");
    tmux.wait_screen("typing", |s| s.contains("filter: zz").then_some(()));
    tmux.keys(&["Escape"]);
    tmux.wait_screen("typing dropped: no filter, both rules", |s| {
        (s.contains("filter: none") && order(s, "Rules") == ["web", "dns"]).then_some(())
    });

    // q quits with status 0 and gives the terminal back as it was: the live view is gone
    // (alternate screen left) and what is typed echoes and runs (raw mode left).
    tmux.keys(&["q"]);
    let s = tmux.wait_screen("exit", |s| {
        s.contains("exit status 0").then(|| s.to_string())
    });
    assert!(
        !s.contains("Rules ("),
        "the live view stayed on the screen:\n{s}"
    );
    tmux.type_text("echo typed-$((40+2))");
    tmux.keys(&["Enter"]);
    tmux.wait_screen("the shell", |s| {
        (s.contains("$ echo typed-$((40+2))") && s.contains("\ntyped-42")).then_some(())
    });
    // Ctrl-C quits as cleanly.
    tmux.type_text(&format!(
        "{} top --socket {} --interval 0.5; echo \"exit status $?\"",
        nlb_system_tests::bin("nlbctl"),
        lab.socket()
    ));
    tmux.keys(&["Enter"]);
    tmux.wait_screen("top again", |s| s.contains("Rules (2)").then_some(()));
    tmux.keys(&["C-c"]);
    tmux.wait_screen("exit after Ctrl-C", |s| {
        (s.matches("exit status 0").count() == 2 && !s.contains("Rules (")).then_some(())
    });
}

#[test]
fn top_once_json_reports_every_field() {
    let started = std::time::Instant::now();
    let mut lab = Lab::start(81, 2);
    for i in 0..7 {
        lab.nic.send(&tcp(
            [198, 51, 100, 9],
            40000 + i,
            [203, 0, 113, 99],
            80,
            true,
        ));
    }
    let t = lab.burst();

    // During the run, one packet every 5 ms on an established web connection: 200/s, paced
    // against the clock (a late send catches up).
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (stop, sent, nic) = (stop.clone(), sent.clone(), lab.nic.shared());
        std::thread::spawn(move || {
            let frame = tcp([198, 51, 100, 7], 10000, WEB, 80, false);
            let mut out = vec![0; 2048];
            let start = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let due = sent.load(Ordering::Relaxed) * 5;
                let now = start.elapsed().as_millis() as u64;
                if now < due {
                    std::thread::sleep(Duration::from_millis(due - now));
                    continue;
                }
                lock(&nic).receive(&frame, &mut out).unwrap();
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let o = nlbctl(&[
        "top",
        "--socket",
        lab.socket(),
        "--once",
        "-o",
        "json",
        "--interval",
        "2",
    ]);
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let paced = sent.load(Ordering::Relaxed);
    let status = lab.nlbd.admin("status").unwrap();

    let secs = v["interval_secs"].as_f64().unwrap();
    assert!((1.9..4.0).contains(&secs), "{v}");
    assert_eq!(v["source"], lab.socket());
    assert_eq!(
        v["device"],
        format!("sim:{}", lab.dir.path().join("nic.sock").display())
    );
    assert_eq!(v["profile"], "sim");
    assert_eq!(v["generation"], status["generation"]);
    assert_eq!(v["active_bank"], status["active_bank"]);
    assert_eq!(v["config_digest"], status["config_digest"]);
    assert_eq!(v["load_pending"], false);
    assert_eq!(v["sort"], "packets");
    assert_eq!(v["reverse"], false);
    assert_eq!(v["filter"], serde_json::Value::Null);

    // Rules, by the traffic: dns is still (rate exactly 0), web runs at the sender's pace.
    let find = |list: &str, key: &str, name: &str| -> serde_json::Value {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[key] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {list}: {v}"))
    };
    let dns = find("rules", "name", "dns");
    assert_eq!(dns["vip"], "203.0.113.53");
    assert_eq!(dns["protocol"], "UDP");
    assert_eq!(dns["ports"], serde_json::json!(["53"]));
    assert_eq!(dns["target"], "dns");
    assert_eq!(dns["packets"], t.dns.packets);
    assert_eq!(dns["bytes"], t.dns.bytes);
    assert_eq!(dns["bytes"], t.dns.packets * (14 + 20 + 8 + 100));
    for field in [
        "packets_per_sec",
        "bytes_per_sec",
        "punts_per_sec",
        "drops_per_sec",
    ] {
        assert_eq!(dns[field], 0.0, "dns {field}");
    }
    let web = find("rules", "name", "web");
    let web_packets = web["packets"].as_u64().unwrap();
    assert!(
        web_packets > t.web.packets && web_packets <= t.web.packets + paced,
        "web: {web_packets} of {} + {paced} paced",
        t.web.packets
    );
    // Every web frame is 54 bytes: Ethernet 14, IPv4 20, TCP 20.
    assert_eq!(web["bytes"].as_u64().unwrap(), web_packets * 54);
    let pps = web["packets_per_sec"].as_f64().unwrap();
    assert!((170.0..=230.0).contains(&pps), "200/s paced, shown {pps}");
    assert!((web["bytes_per_sec"].as_f64().unwrap() - pps * 54.0).abs() < 1e-6);
    assert_eq!(web["drops"], 0);
    assert_eq!(web["punts"], 0);
    // Sorted by packets per second: web first.
    assert_eq!(v["rules"][0]["name"], "web");

    // VIPs: their rules' sums.
    let vip = find("vips", "vip", "203.0.113.53");
    assert_eq!(vip["rules"], serde_json::json!(["dns"]));
    assert_eq!(vip["packets"], t.dns.packets);
    assert_eq!(vip["bytes"], t.dns.bytes);
    assert_eq!(vip["packets_per_sec"], 0.0);
    let vip = find("vips", "vip", "203.0.113.80");
    assert_eq!(vip["packets"], web_packets);
    assert_eq!(vip["packets_per_sec"], web["packets_per_sec"]);

    // Backends per (pool, backend): health from the checker, counters from the NIC.
    let backend = |pool: &str, name: &str| -> serde_json::Value {
        v["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["pool"] == pool && b["backend"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no ({pool}, {name}): {v}"))
    };
    for b in ["b1", "b2"] {
        let r = backend("web", b);
        assert_eq!(r["health"], "healthy");
        assert_eq!(r["weight"], "not_weighted");
        assert_eq!(r["healthy_in_tables"], true);
    }
    let b3 = backend("web", "b3");
    assert_eq!(b3["health"], "unhealthy");
    assert_eq!(b3["healthy_in_tables"], false);
    assert_eq!(b3["packets"], 0);
    assert_eq!(b3["packets_per_sec"], 0.0);
    let total = |names: &[&str], pool: &str, field: &str| -> u64 {
        names
            .iter()
            .map(|n| backend(pool, n)[field].as_u64().unwrap())
            .sum()
    };
    // The NIC's counter blocks are read one after another (rules, backends, reasons,
    // verdicts), so a paced packet may land between two reads: later blocks may count a few
    // more (one every 5 ms).
    let later = |n: u64, of: u64| (of..=of + 3).contains(&n);
    let web_backends = total(&["b1", "b2", "b3"], "web", "packets");
    assert!(
        later(web_backends, web_packets),
        "{web_backends} of {web_packets}"
    );
    assert_eq!(total(&["d1", "d2"], "dns", "packets"), t.dns.packets);
    assert_eq!(total(&["d1", "d2"], "dns", "bytes"), t.dns.bytes);
    for d in ["d1", "d2"] {
        let r = backend("dns", d);
        assert_eq!(r["health"], "unchecked");
        assert_eq!(r["weight"], "");
        assert_eq!(r["healthy_in_tables"], serde_json::Value::Null);
    }
    assert_eq!(v["backends"].as_array().unwrap().len(), 5);

    let pool = find("pools", "name", "web");
    assert_eq!(pool["members"], 3);
    assert_eq!(pool["healthy"], 2);
    assert_eq!(pool["serving"], "web");
    assert_eq!(pool["failed_over"], false);

    // The connection table: the sim profile holds 4096 buckets of 4 (hw/regmap.toml).
    let c = &v["connections"];
    assert_eq!(c["entries"], t.new_connections);
    assert_eq!(c["entries"], status["conntrack_entries"]);
    assert_eq!(c["capacity"], 4096 * 4);
    assert_eq!(
        c["occupancy_percent"].as_f64().unwrap(),
        100.0 * t.new_connections as f64 / 16384.0
    );
    assert_eq!(c["installed"], t.new_connections);
    assert_eq!(
        c["new_per_sec"], 0.0,
        "no connection was new during the run"
    );

    // Verdicts and reasons: everything sent to a VIP was forwarded, the 7 others passed.
    let verdict = |name: &str| find("verdicts", "name", name);
    let forwarded = verdict("FORWARD")["packets"].as_u64().unwrap();
    let reason_forwarded = find("reasons", "name", "FORWARDED")["packets"]
        .as_u64()
        .unwrap();
    assert!(
        later(reason_forwarded, web_packets + t.dns.packets) && later(forwarded, reason_forwarded),
        "rules {web_packets} + {}, reason {reason_forwarded}, verdict {forwarded}",
        t.dns.packets
    );
    assert_eq!(verdict("PASS")["packets"], 7);
    assert_eq!(verdict("PASS")["packets_per_sec"], 0.0);
    assert_eq!(verdict("DROP")["packets"], 0);
    assert_eq!(verdict("PUNT")["packets"], 0);
    let reasons: Vec<&str> = v["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        ["FORWARDED", "NO_RULE"],
        "only reasons that counted"
    );
    assert_eq!(find("reasons", "name", "NO_RULE")["packets"], 7);

    // Filter and sort for scripts: only what is named dns, by name, reversed.
    let o = nlbctl(&[
        "top",
        "--socket",
        lab.socket(),
        "--once",
        "-o",
        "json",
        "--interval",
        "0.2",
        "--filter",
        "DNS",
        "--sort",
        "name",
        "--reverse",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = |list: &str, key: &str| -> Vec<String> {
        f[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[key].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("rules", "name"), ["dns"]);
    assert_eq!(names("vips", "vip"), ["203.0.113.53"]);
    assert_eq!(names("backends", "backend"), ["d2", "d1"]);
    assert_eq!(names("pools", "name"), ["dns"]);
    assert_eq!(f["filter"], "DNS");
    assert_eq!(f["sort"], "name");
    assert_eq!(f["reverse"], true);

    // The text of --once is the live screen's.
    let o = nlbctl(&[
        "top",
        "--socket",
        lab.socket(),
        "--once",
        "--interval",
        "0.2",
    ]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(row(&text, "Rules", "dns")[9], t.dns.packets.to_string());

    // What top refuses: JSON without --once, the live view without a terminal, a bad interval.
    let o = nlbctl(&["top", "--socket", lab.socket(), "-o", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("add --once"));
    let o = nlbctl(&["top", "--socket", lab.socket()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("draws on a terminal"));
    let o = nlbctl(&["top", "--socket", lab.socket(), "--interval", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("outside 0.1 to 3600"));

    // The whole connection table, page by page (4 per request): the same connections in the
    // same order as one listing.
    let one = nlbctl(&["conntrack", "--socket", lab.socket(), "-o", "json"]);
    let paged = nlbctl(&[
        "conntrack",
        "--socket",
        lab.socket(),
        "-o",
        "json",
        "--all",
        "--page",
        "4",
    ]);
    assert!(
        paged.status.success(),
        "{}",
        String::from_utf8_lossy(&paged.stderr)
    );
    let mut one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    let mut paged: serde_json::Value = serde_json::from_slice(&paged.stdout).unwrap();
    assert_eq!(paged["entries"].as_array().unwrap().len(), 25);
    // Every connection was made by this test, so none is older than the test; the two
    // listings may straddle a second, so their ages are compared to that bound, not each other.
    let oldest = started.elapsed().as_secs() + 1;
    for listing in [&mut one, &mut paged] {
        for e in listing["entries"].as_array_mut().unwrap() {
            let age = e["age_secs"].as_u64().unwrap();
            assert!(age <= oldest, "{e} is older than this test ({oldest} s)");
            e.as_object_mut().unwrap().remove("age_secs");
        }
    }
    assert_eq!(paged["entries"], one["entries"]);
    assert_eq!(paged["total"], 25);
    assert!(paged.get("next").is_none(), "{paged}");
    // Not on a terminal: no progress bar on stderr.
    let o = nlbctl(&[
        "conntrack",
        "--socket",
        lab.socket(),
        "--all",
        "--page",
        "4",
    ]);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("25 of 16384 connections\n"));
}

/// The progress of `nlbctl load` and `nlbctl conntrack --all` on a terminal, and none when
/// stderr is not one.
#[test]
fn long_operations_show_progress_on_a_terminal_only() {
    if !have("tmux", "tmux") {
        return;
    }
    let mut lab = Lab::start(83, 3);
    lab.burst();
    let tmux = Tmux::start(lab.dir.path(), 160, 20);
    let nlbctl_bin = nlb_system_tests::bin("nlbctl");
    tmux.type_text(&format!(
        "{nlbctl_bin} conntrack --socket {} --all --page 3 | tail -n 1",
        lab.socket()
    ));
    tmux.keys(&["Enter"]);
    tmux.wait_screen("the listing's bar", |s| {
        (s.contains("listing  [########################################] 100% 25/25 connections")
            && s.contains("25 of 16384 connections"))
        .then_some(())
    });

    // A second NIC, empty: reading both banks back, then writing the whole configuration.
    let other = lab.dir.path().join("other.sock");
    let _nic = Nic::start(&other);
    let config = lab.dir.path().join("lb.yaml");
    let piped = nlbctl(&[
        "load",
        "--device",
        &format!("sim:{}", other.display()),
        config.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert!(
        piped.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&piped.stdout).unwrap();
    // Loaded once already: a load of the same configuration to the other bank writes it all
    // again (the other bank is still empty).
    tmux.type_text(&format!(
        "clear; {nlbctl_bin} load --device sim:{} {}",
        other.display(),
        config.display()
    ));
    tmux.keys(&["Enter"]);
    let p = nlb_hw::Profile::by_name("sim").unwrap();
    // Every table of both banks: VIP buckets x ways, rules, ACL (one per rule), pools, Maglev
    // slots, backends (hw/regmap.toml's sim profile).
    let entries =
        2 * (p.vip_buckets * p.vip_ways + 2 * p.rules + p.pools + p.maglev_slots + p.backends);
    assert_eq!(entries, 2 * (64 * 4 + 2 * 256 + 128 + 131072 + 4096));
    let changed = report["changed_entries"].as_u64().unwrap();
    let s = tmux.wait_screen("the load's bars", |s| {
        s.contains("entries changed").then(|| s.to_string())
    });
    assert!(
        s.contains(&format!(
            "reading  [########################################] 100% {entries}/{entries} entries"
        )),
        "{s}"
    );
    assert!(
        s.contains(&format!(
            "writing  [########################################] 100% {changed}/{changed} entries"
        )),
        "{s}"
    );
    assert!(s.contains(&format!("\n{changed} entries changed")), "{s}");
}

/// deploy/demo-live.sh, the newcomer's path to `nlbctl top` (docs/operations.md): the live
/// view shows the replayed traffic and the backends' health, and quitting stops everything
/// and removes its files.
#[test]
fn the_live_demo_shows_traffic_and_cleans_up() {
    if !have("tmux", "tmux") || !have("python3", "python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(dir.path(), 200, 50);
    let script = nlb_system_tests::bins::workspace().join("deploy/demo-live.sh");
    let bin = std::path::Path::new(nlb_system_tests::bin("nlbctl"))
        .parent()
        .unwrap();
    tmux.type_text(&format!(
        "TMPDIR={} NLB_BIN_DIR={} NLB_DEMO_RATE=500 NLB_DEMO_PORT={} NLB_DEMO_METRICS=127.0.0.1:0 {}; echo \"exit status $?\"",
        dir.path().display(),
        bin.display(),
        hc_port(5),
        script.display()
    ));
    tmux.keys(&["Enter"]);
    let s = tmux.wait_screen("traffic and health in the demo", |s| {
        let busy = rows(s, "Rules")
            .iter()
            .filter(|r| {
                r[0].starts_with("web-")
                    && r.len() > 5
                    && r[5].parse::<f64>().is_ok_and(|v| v > 0.0)
            })
            .count();
        let health = |b: &str| {
            rows(s, "Backends")
                .into_iter()
                .find(|r| r[0] == b)
                .map(|r| r[2].clone())
        };
        (busy == 2
            && health("web-1").as_deref() == Some("healthy")
            && health("web-2").as_deref() == Some("healthy")
            && health("web-3").as_deref() == Some("unhealthy")
            && health("dns-1").as_deref() == Some("unchecked"))
        .then(|| s.to_string())
    });
    assert!(s.contains("Rules (3)"), "{s}");
    let demo_dirs = || -> Vec<String> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("nlb-demo."))
            .collect()
    };
    let demo = demo_dirs();
    assert_eq!(demo.len(), 1, "{demo:?}");
    tmux.keys(&["q"]);
    tmux.wait_screen("the demo's end", |s| {
        s.contains("exit status 0").then_some(())
    });
    assert!(demo_dirs().is_empty(), "the demo left {demo:?}");
    // No process of the demo is left: none has its directory on its command line.
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&demo[0]) && !c.contains("tmux"))
        .collect();
    assert!(left.is_empty(), "left running: {left:?}");
}
