#!/usr/bin/env bash
# The main job on the built-in simulated NIC (no hardware needed):
#   compile a GCP-shaped configuration into table images, explain one flow, generate client
#   traffic, run it through the simulated NIC (the bit-exact golden model of the Verilog
#   pipeline), and show what the backends receive.
# Everything is written to ./demo-out/. See README.md.
set -euo pipefail
cd "$(dirname "$0")"
config=${1:-examples/web.yaml}
out=demo-out
mkdir -p "$out"

echo "== building nlbctl"
cargo build -q --release -p nlbctl
nlbctl="${CARGO_TARGET_DIR:-target}/release/nlbctl"

echo; echo "== nlbctl compile $config"
$nlbctl compile "$config" -o "$out/tables.img"

echo; echo "== nlbctl explain (where does one client connection go, and why)"
$nlbctl explain "$config" --src 198.51.100.7:40000 --dst 203.0.113.10:443 --proto tcp || true

echo; echo "== nlbctl traffic: client flows, a fragmented datagram, an ICMP error, noise"
$nlbctl traffic "$config" -o "$out/clients.pcap" --flows 16

echo; echo "== nlbctl sim: the simulated NIC executes the image"
$nlbctl sim --config "$out/tables.img" --pcap "$out/clients.pcap" \
  --out "$out/to-backends.pcap" --report "$out/report.jsonl"

echo; echo "== first lines of the per-packet report ($out/report.jsonl)"
head -n 5 "$out/report.jsonl"
if command -v tcpdump >/dev/null; then
  echo; echo "== what the backends receive ($out/to-backends.pcap, tcpdump -e)"
  # head stops reading after six lines and tcpdump then fails its write: not an error.
  tcpdump -nr "$out/to-backends.pcap" -e 2>/dev/null | head -n 6 || true
fi
