#!/usr/bin/env bash
# The whole test suite of nlb-offload, from a clean checkout.
#
# Installs the system packages it needs when run as root (Verilator from Debian), then runs:
# rustfmt check, clippy (warnings are errors; the tools also with their Verilator engine), every
# workspace test (including the Verilator co-simulation in the verif crate), the tools' tests
# that need the Verilator engine, and `verilator --lint-only -Wall` over hw/rtl.
# With CI=true a missing tool is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '\n== %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------------
need=()
command -v verilator >/dev/null || need+=(verilator)
command -v curl >/dev/null || need+=(curl)
command -v ip >/dev/null || need+=(iproute2)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing: ${need[*]} (run as root to install them, or: sudo apt-get install -y ${need[*]})" >&2
    exit 1
  fi
fi
verilator --version

# --- Rust ------------------------------------------------------------------------------------
say "cargo fmt --all --check"
cargo fmt --all --check

say "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
say "cargo clippy -p nlb-tools --features rtl --all-targets -- -D warnings"
cargo clippy -p nlb-tools --features rtl --all-targets -- -D warnings

say "cargo test --workspace"
cargo test --workspace

# The tools built with the Verilator engine (`--engine rtl`): the same reports as the model, and
# the end-to-end test on real Linux networking with nlb-sim running the RTL.
say "cargo test -p nlb-tools --features rtl"
cargo test -p nlb-tools --features rtl --test sim_rtl --test e2e_rtl

# --- RTL lint --------------------------------------------------------------------------------
say "verilator --lint-only -Wall over hw/rtl"
hw/scripts/lint.sh

say "all checks passed"
