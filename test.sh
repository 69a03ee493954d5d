#!/usr/bin/env bash
# The whole test suite of nlb-offload, from a clean checkout.
#
# Installs the system packages it needs when run as root (from Debian: Verilator, Yosys, z3,
# python3-pip, curl, iproute2, nftables, etcd-server and etcd-client (etcdctl) and bird2 (the
# fleet's tests), and for the operator tools' tests tmux, systemd, man-db, procps, prometheus),
# fetches the pinned z3 release the formal proofs prefer (hw/scripts/fetch-z3.sh), then runs:
# rustfmt check, clippy (warnings are errors; the tools also with their Verilator engine), every
# workspace test (including the Verilator co-simulation in the verif crate), the tools' tests
# that need the Verilator engine, `verilator --lint-only -Wall` over hw/rtl, and the formal
# proofs of hw/scripts/formal.sh (Yosys, yosys-smtbmc, z3).
# With CI=true a missing tool is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '\n== %s\n' "$*"; }
# Each step is timed; the times are printed at the end (the suite is held to 30 minutes from a
# clean clone on a 2-core machine, installs included).
start=$SECONDS
times=()
step() {
  local name=$1 t=$SECONDS
  shift
  say "$name"
  "$@"
  times+=("$(printf '%6d s  %s' $((SECONDS - t)) "$name")")
}

# --- system packages -------------------------------------------------------------------------
need=()
command -v verilator >/dev/null || need+=(verilator)
# The formal proofs (hw/scripts/formal.sh): Yosys (with yosys-smtbmc) and the z3 solver.
{ command -v yosys && command -v yosys-smtbmc; } >/dev/null || need+=(yosys)
command -v z3 >/dev/null || need+=(z3)
# pip fetches the pinned z3 release the proofs prefer (hw/scripts/fetch-z3.sh, below).
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v curl >/dev/null || need+=(curl)
command -v ip >/dev/null || need+=(iproute2)
# The Kubernetes end-to-end test (tools/system-tests/tests/e2e_kubernetes.rs): its kube-proxy-like agents
# program DNAT with the nft command.
command -v nft >/dev/null || need+=(nftables)
# The operator tools' tests: nlbctl top in tmux (tools/system-tests/tests/top.rs); the service units, man
# pages and completions (deploy.rs: systemd-analyze, man, /bin/kill of the units' reload);
# a real Prometheus against nlbd (monitoring.rs).
command -v tmux >/dev/null || need+=(tmux)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v man >/dev/null || need+=(man-db)
[ -x /bin/kill ] || need+=(procps)
# The fleet (tools/system-tests/tests/fleet.rs): a real etcd, and etcdctl to write what an operator
# might by hand and to set up etcd's authentication.
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
# The fleet on BGP (tools/system-tests/src/lab/fleet.rs): BIRD 2 in the router namespace.
{ command -v bird && command -v birdc; } >/dev/null || need+=(bird2)
lean=()
{ command -v prometheus && command -v promtool; } >/dev/null || lean+=(prometheus)
if ((${#need[@]} + ${#lean[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${need[*]} ${lean[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Installing starts no service (Debian's prometheus would serve on :9090): policy-rc.d
    # refuses every start while apt runs, unless the machine has its own policy already.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
      trap 'rm -f "$policy"' EXIT
    fi
    install_start=$SECONDS
    apt-get update -qq
    if ((${#need[@]})); then apt-get install -y -qq "${need[@]}" >/dev/null; fi
    # Prometheus without its recommended node exporter.
    if ((${#lean[@]})); then apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null; fi
    times+=("$(printf '%6d s  %s' $((SECONDS - install_start)) "apt-get install ${need[*]} ${lean[*]}")")
  else
    echo "missing: ${need[*]} ${lean[*]} (run as root to install them, or: sudo apt-get install -y ${need[*]} ${lean[*]})" >&2
    exit 1
  fi
fi
verilator --version
# The formal proofs' z3: the pinned release from PyPI, about four times faster than Debian 12's
# on the host DMA engine's proof; without it (no network, another architecture) the proofs run
# on Debian's z3 and take about 10 minutes more.
fetch_start=$SECONDS
if z3_path="$(hw/scripts/fetch-z3.sh)"; then
  echo "z3 for the formal proofs: $z3_path"
else
  echo "note: the pinned z3 could not be fetched; the formal proofs use $(command -v z3) (slower)" >&2
fi
times+=("$(printf '%6d s  %s' $((SECONDS - fetch_start)) "hw/scripts/fetch-z3.sh")")

# --- Rust ------------------------------------------------------------------------------------
# A build from clean gains nothing from incremental artefacts; they only double the disk used.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The Verilated models are compiled once and shared by clippy's build and the tests' (verif's
# build script keeps them in target/debug/verilated): they must come out the same, so the
# build id stamped into the RTL is the commit's time, not the time of each build.
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH
# The models without VCD tracing: their C++ compiles in half the time. A failing RTL test
# still names its seed; run it again alone (tracing is built by default) for its waveform.
export NLB_VERILATED_TRACE="${NLB_VERILATED_TRACE:-0}"
step "cargo fmt --all --check" cargo fmt --all --check

# One build of everything, with nlbctl and nlb-sim built with their Verilator engine (`--engine
# rtl`, feature `rtl`) so the system tests run them on the RTL too.
features=nlbctl/rtl,nlb-sim/rtl,nlb-system-tests/rtl
step "cargo clippy --workspace --all-targets --features $features -- -D warnings" \
  cargo clippy --workspace --all-targets --features "$features" -- -D warnings
# The two binaries as users build them by default (no Verilator engine).
step "cargo clippy -p nlbctl -p nlb-sim -- -D warnings" cargo clippy -p nlbctl -p nlb-sim -- -D warnings

step "cargo test --workspace --features $features" cargo test --workspace --features "$features"

# --- RTL lint and formal proofs --------------------------------------------------------------
# The proofs with their covers; the mutation checks (each a planted bug the proofs must catch,
# about 10 CPU-minutes) are a separate command: hw/scripts/formal.sh --mutants.
# The lint runs beside them at the lowest priority: the proofs' last minutes are one solver run
# (the host DMA engine's induction) on one core, and the lint takes the other.
lint_beside_formal() {
  local lint_log lint_pid formal_rc=0 lint_rc=0
  lint_log="$(mktemp)"
  NLB_LINT_JOBS=1 nice -n 19 hw/scripts/lint.sh >"$lint_log" 2>&1 &
  lint_pid=$!
  hw/scripts/formal.sh --no-mutants || formal_rc=$?
  wait "$lint_pid" || lint_rc=$?
  say "verilator --lint-only -Wall over hw/rtl (ran beside the proofs)"
  cat "$lint_log"
  rm -f "$lint_log"
  [ "$formal_rc" -eq 0 ] && [ "$lint_rc" -eq 0 ]
}
step "formal proofs (yosys-smtbmc, z3): hw/scripts/formal.sh --no-mutants; verilator --lint-only -Wall over hw/rtl beside them" lint_beside_formal

say "all checks passed in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
printf '%s\n' "${times[@]}"
