#!/usr/bin/env bash
# nlbctl top on the simulated NIC: no hardware, no root (docs/operations.md).
#
#   deploy/demo-live.sh
#
# Starts, in a temporary directory: two small HTTP servers on loopback as the health checks of
# two of the three web backends (the third stays unhealthy), nlb-sim replaying client traffic
# from `nlbctl traffic` in a loop, and nlbd managing it with its metrics on 127.0.0.1:9470;
# then runs `nlbctl top` on nlbd's admin socket. Quit top with q: everything stops and the
# directory is removed.
#
# Environment: NLB_BIN_DIR (built binaries; default: cargo build --release), NLB_DEMO_RATE
# (frames per second, default 2000), NLB_DEMO_PORT (health-check port, default 18080),
# NLB_DEMO_METRICS (nlbd's --metrics-addr, default 127.0.0.1:9470), NLB_TOP_ARGS (more
# arguments for nlbctl top).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${NLB_BIN_DIR:-}
if [ -z "$bin" ]; then
  echo "== building nlbctl, nlbd and nlb-sim (release)"
  cargo build -q --release -p nlbctl -p nlbd -p nlb-sim
  bin=${CARGO_TARGET_DIR:-target}/release
fi
rate=${NLB_DEMO_RATE:-2000}
port=${NLB_DEMO_PORT:-18080}
metrics=${NLB_DEMO_METRICS:-127.0.0.1:9470}

dir=$(mktemp -d "${TMPDIR:-/tmp}/nlb-demo.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat > "$dir/lb.yaml" <<EOF
# The demo: a web VIP (HTTP and HTTPS) on a checked pool of three, a DNS VIP on a pool without
# a check. Backends' health checks go to loopback addresses where this script runs servers.
forwardingRules:
  - {name: web-http, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '80', target: web}
  - {name: web-https, IPAddress: 203.0.113.10, IPProtocol: TCP, portRange: '443', target: web}
  - {name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}
targetPools:
  - {name: web, region: europe-west1, instances: [web-1, web-2, web-3], healthChecks: [web-check]}
  - {name: dns, region: europe-west1, instances: [dns-1, dns-2]}
instances:
  - {name: web-1, ip: 127.0.0.11, zone: europe-west1-b, mac: '02:00:00:00:00:11'}
  - {name: web-2, ip: 127.0.0.12, zone: europe-west1-c, mac: '02:00:00:00:00:12'}
  - {name: web-3, ip: 127.0.0.13, zone: europe-west1-d, mac: '02:00:00:00:00:13'}
  - {name: dns-1, ip: 192.0.2.21, zone: europe-west1-b, mac: '02:00:00:00:00:21'}
  - {name: dns-2, ip: 192.0.2.22, zone: europe-west1-c, mac: '02:00:00:00:00:22'}
httpHealthChecks:
  - {name: web-check, port: $port, requestPath: /, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 2}
EOF

mkdir "$dir/www"
for ip in 127.0.0.11 127.0.0.12; do
  python3 -m http.server --bind "$ip" --directory "$dir/www" "$port" >/dev/null 2>&1 &
  pids+=($!)
done
"$bin/nlbctl" traffic "$dir/lb.yaml" -o "$dir/clients.pcap" --flows 100 >/dev/null
"$bin/nlb-sim" --socket "$dir/nic.sock" --pcap "$dir/clients.pcap" --loop --rate "$rate" \
  --wait-enable 2>"$dir/nlb-sim.log" &
pids+=($!)
waitfor() { # waitfor PATH WHAT LOG
  for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done
  echo "demo-live.sh: $2 did not start:" >&2
  cat "$3" >&2
  exit 1
}
waitfor "$dir/nic.sock" nlb-sim "$dir/nlb-sim.log"
"$bin/nlbd" --config "$dir/lb.yaml" --device "sim:$dir/nic.sock" --admin-socket "$dir/nlbd.sock" \
  --metrics-addr "$metrics" 2>"$dir/nlbd.log" &
pids+=($!)
waitfor "$dir/nlbd.sock" nlbd "$dir/nlbd.log"
echo "demo files in $dir (nlbd.log, nlb-sim.log, lb.yaml); metrics on $metrics"
# shellcheck disable=SC2086 # NLB_TOP_ARGS is split into arguments on purpose
"$bin/nlbctl" top --socket "$dir/nlbd.sock" ${NLB_TOP_ARGS:-}
