//! `nlbctl traffic` + `nlbctl sim` end to end: the report contract of docs/ and the forwarded
//! frames, checked with an independent decoder (etherparse) against the input frames.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

fn nlbctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nlbctl"))
        .args(args)
        .current_dir(crate::workspace())
        .output()
        .expect("nlbctl runs")
}

fn frames(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).unwrap();
    firmware_sim::pcap::read_frames(f)
        .unwrap()
        .into_iter()
        .map(|f| f.data)
        .collect()
}

#[test]
fn sim_reports_every_packet_and_forwards_them_unchanged_but_for_the_mac() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("in.pcap");
    let out = dir.path().join("out.pcap");
    let report = dir.path().join("report.jsonl");
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let o = nlbctl(&[
        "traffic",
        "examples/web.yaml",
        "-o",
        &p(&pcap),
        "--flows",
        "20",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = nlbctl(&[
        "sim",
        "--config",
        "examples/web.yaml",
        "--pcap",
        &p(&pcap),
        "--out",
        &p(&out),
        "--report",
        &p(&report),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let input = frames(&pcap);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&report)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), input.len(), "one report line per input packet");
    let keys: BTreeSet<&str> = [
        "index",
        "verdict",
        "reason",
        "rule",
        "pool",
        "backend",
        "key",
        "conntrack",
    ]
    .into();
    let backend_macs: BTreeMap<&str, [u8; 6]> = [
        ("web-1", [2, 0, 0, 0, 0, 0x11]),
        ("web-2", [2, 0, 0, 0, 0, 0x12]),
        ("web-3", [2, 0, 0, 0, 0, 0x13]),
    ]
    .into();
    let forwarded = frames(&out);
    let mut next_out = 0;
    // Per client flow (src port), the backend: every packet of a connection goes to one.
    let mut flow_backend: BTreeMap<(Vec<u8>, u16), String> = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let obj = line.as_object().unwrap();
        assert_eq!(
            obj.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            keys
        );
        assert_eq!(obj["index"], i);
        let verdict = obj["verdict"].as_str().unwrap();
        assert!(["forward", "punt", "drop", "pass"].contains(&verdict));
        let parsed = SlicedPacket::from_ethernet(&input[i]);
        if verdict != "forward" {
            continue;
        }
        let backend = obj["backend"].as_str().unwrap();
        assert_eq!(obj["pool"], "web-pool");
        let sent = &forwarded[next_out];
        next_out += 1;
        // L2 DSR (SPEC R8.1): destination MAC is the backend's, source MAC the NIC's, and
        // everything after the Ethernet header is the client's packet unchanged.
        assert_eq!(&sent[0..6], &backend_macs[backend]);
        assert_eq!(&sent[6..12], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&sent[12..], &input[i][12..]);
        if let Ok(SlicedPacket {
            net: Some(NetSlice::Ipv4(ip)),
            transport: Some(TransportSlice::Tcp(tcp)),
            ..
        }) = parsed
        {
            let key = (ip.header().source().to_vec(), tcp.source_port());
            let prev = flow_backend
                .entry(key)
                .or_insert_with(|| backend.to_string());
            assert_eq!(prev, backend, "packet {i} of a connection moved");
        }
    }
    assert_eq!(
        next_out,
        forwarded.len(),
        "every forwarded frame is in --out"
    );
    let reasons: BTreeSet<&str> = lines
        .iter()
        .map(|l| l["reason"].as_str().unwrap())
        .collect();
    for r in [
        "forwarded",
        "not_ip",
        "no_rule",
        "icmp_error_forwarded",
        "truncated_l3",
    ] {
        assert!(reasons.contains(r), "traffic covers {r}: {reasons:?}");
    }
    // Later packets of a flow hit the connection table the simulator learned.
    assert!(lines.iter().any(|l| l["conntrack"] == "hit"));
}

#[test]
fn sim_without_learning_never_hits_and_bad_pcap_is_a_user_error() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("in.pcap");
    let report = dir.path().join("r.jsonl");
    let p = |x: &Path| x.to_str().unwrap().to_string();
    assert!(
        nlbctl(&["traffic", "examples/udp-dns.yaml", "-o", &p(&pcap)])
            .status
            .success()
    );
    let o = nlbctl(&[
        "sim",
        "--config",
        "examples/udp-dns.yaml",
        "--pcap",
        &p(&pcap),
        "--report",
        &p(&report),
        "--no-learn",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(!text.contains("\"hit\""));
    // UDP fragments of one datagram reach one backend (SPEC R4.2); fragments are found in the
    // input by an independent decoder.
    let input = frames(&pcap);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut frag_backends = BTreeSet::new();
    for (i, frame) in input.iter().enumerate() {
        let ip = etherparse::Ethernet2Slice::from_slice_without_fcs(frame)
            .ok()
            .and_then(|e| etherparse::Ipv4HeaderSlice::from_slice(e.payload_slice()).ok());
        if let Some(ip) = ip {
            if ip.more_fragments() || ip.fragments_offset().value() != 0 {
                assert_eq!(lines[i]["verdict"], "forward");
                assert_eq!(lines[i]["key"], "3tuple");
                frag_backends.insert(lines[i]["backend"].as_str().unwrap().to_string());
            }
        }
    }
    assert_eq!(frag_backends.len(), 1, "{frag_backends:?}");

    std::fs::write(&pcap, b"this is not a pcap file").unwrap();
    let o = nlbctl(&[
        "sim",
        "--config",
        "examples/udp-dns.yaml",
        "--pcap",
        &p(&pcap),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("in.pcap"), "names the file: {err}");
    let o = nlbctl(&[
        "sim",
        "--config",
        "examples/udp-dns.yaml",
        "--pcap",
        &p(&pcap),
        "--engine",
        "rtl",
    ]);
    assert_eq!(o.status.code(), Some(1));
}
