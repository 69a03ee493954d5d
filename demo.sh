#!/usr/bin/env bash
# The main job on the built-in simulated NIC: see README.md.
set -euo pipefail
cd "$(dirname "$0")"
cargo build -q --release -p nlb-hw
cargo run -q --release -p nlb-hw --bin nlb-regmap-gen -- --check
