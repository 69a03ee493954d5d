#!/usr/bin/env bash
# Lints every module of hw/rtl with `verilator --lint-only -Wall`, each as its own top, plus
# the parameter sets the design and the tests use. Any warning fails the run.
#
# Usage: hw/scripts/lint.sh            (from anywhere in the checkout)
#        VERILATOR=/path/to/verilator hw/scripts/lint.sh
#        NLB_LINT_JOBS=n hw/scripts/lint.sh   (runs at a time; the number of CPUs by default)
#
# Waivers live in the RTL, one line at a time, as
#   /* verilator lint_off RULE */ ... /* verilator lint_on RULE */
# with a comment saying why; never as blanket -Wno-* flags here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rtl="$(cd "$here/../rtl" && pwd)"
verilator="${VERILATOR:-verilator}"

if ! command -v "$verilator" >/dev/null 2>&1; then
    echo "lint.sh: $verilator not found (apt-get install verilator, or set VERILATOR)" >&2
    exit 2
fi

# Extra parameter sets per module (besides the defaults): "module|-Gname=value ...".
extra=(
    "nlb_mul_const_csa|-GCONST=32'h85ebca6b"
    "nlb_mul_const_csa|-GCONST=32'hc2b2ae35"
    "nlb_mul_const_csa|-GCONST=32'hffffffff"
    "nlb_mul_const_csa|-GCONST=32'h00000000"
    "nlb_flow_hash|-GUSER_WIDTH=32"
    "nlb_host_dma|-GINJECT_IN_FLIGHT=2"
    "nlb_axis_skid|-GDATA_WIDTH=64 -GUSER_WIDTH=16"
    "nlb_table_mem|-GWIDTH=857 -GROWS=64 -GLANES=4"
    "nlb_table_mem|-GWIDTH=16 -GROWS=131072 -GOUTPUT_REG=0"
    "nlb_parser|-GDATA_WIDTH=256"
    "nlb_parser|-GDATA_WIDTH=64 -GLEN_WIDTH=20"
    "nlb_table_mem|-GWIDTH=365 -GROWS=4096 -GLANES=4 -GBANKS=1"
    "nlb_hit_bits|-GROWS=131072"
    "nlb_conntrack|-GCT_BUCKETS=16777216"
    # The memory stages as the lookup builds them: on chip, and HBM (u280: 16 + 4 channels).
    "nlb_mem_stage|-GROW_W=1536 -GDATA_W=1536 -GSLOTS=64"
    "nlb_mem_stage|-GROW_W=256 -GDATA_W=256 -GLANE_W=16 -GENTRY_W=16 -GROW_SHIFT=5 -GROW_BITS=14 -GFULL_WR=1"
    "nlb_mem_stage|-GCHANNELS=16 -GROW_BITS=24 -GSLOTS=512"
    "nlb_mem_stage|-GROW_W=256 -GDATA_W=256 -GLANE_W=16 -GENTRY_W=16 -GROW_SHIFT=5 -GROW_BITS=22 -GCHANNELS=4 -GSLOTS=512 -GFULL_WR=1"
    "nlb_mem_ram|-GDATA_W=256 -GROWS=16384 -GROW_SHIFT=5"
    "nlb_lookup|-GVIP_BUCKETS=4096 -GRULES=4096 -GPOOLS=2048 -GMAGLEV_SLOTS=33554432 -GBACKENDS=65536 -GCT_BUCKETS=16777216 -GCT_CHANNELS=16 -GCT_DATA_W=256 -GCT_SLOTS=512 -GMG_CHANNELS=4 -GMG_SLOTS=512 -GHW_LEARN=0"
    "nlb_top|-GPROFILE_ID=2 -GVIP_BUCKETS=4096 -GRULES=4096 -GPOOLS=2048 -GMAGLEV_SLOTS=33554432 -GBACKENDS=65536 -GCT_BUCKETS=16777216 -GQUEUE_DEPTH=4096 -GMEM_ONCHIP=0 -GCT_CHANNELS=16 -GCT_DATA_W=256 -GCT_SLOTS=512 -GMG_CHANNELS=4 -GMG_SLOTS=512 -GMAX_IN_FLIGHT=1024"
    # The Verilated top with the HBM model (verif/hbm): the sim profile's tables on HBM ports.
    "nlb_top|-GMEM_ONCHIP=0 -GCT_CHANNELS=16 -GCT_DATA_W=256 -GCT_SLOTS=512 -GMG_CHANNELS=4 -GMG_SLOTS=512 -GMAX_IN_FLIGHT=1024 -DNLB_SIM_HOOKS"
    "nlb_counters|-GRULES=4096 -GBACKENDS=65536"
    # The clock-domain crossings: the smallest FIFO with three synchroniser flops, a wide deep
    # one (a 512-bit stream crossing), the proof's; the AXI-Lite bridge at 64 bits.
    "nlb_async_fifo|-GWIDTH=8 -GDEPTH=4 -GSYNC_STAGES=3"
    "nlb_async_fifo|-GWIDTH=512 -GDEPTH=512"
    "nlb_async_fifo|-GWIDTH=4 -GDEPTH=4"
    "nlb_axil_cdc|-GDATA_WIDTH=64 -GADDR_WIDTH=32 -GSYNC_STAGES=3"
    "nlb_regs|-GTABLE_OUTPUT_REG=0"
    # The simulation-only counter preset hook (verif/build.rs defines it for the Verilated top).
    "nlb_counter_bank|-DNLB_SIM_HOOKS"
    "nlb_counters|-DNLB_SIM_HOOKS"
    "nlb_top|-DNLB_SIM_HOOKS"
    "nlb_regs|-GPROFILE_ID=2 -GVIP_BUCKETS=4096 -GRULES=4096 -GPOOLS=2048 -GMAGLEV_SLOTS=33554432 -GBACKENDS=65536 -GCT_BUCKETS=16777216 -GQUEUE_DEPTH=4096 -GCT_CHANNELS=16 -GMG_CHANNELS=4 -GMEM_SLOTS=512"
)

failed=0
runs=0
root="$(cd "$rtl/../.." && pwd)"
board_dirs=()
# The runs go NLB_LINT_JOBS at a time (the number of CPUs); each writes its report to a file
# of its own, printed in order at the end.
jobs_max="${NLB_LINT_JOBS:-$(nproc 2>/dev/null || echo 2)}"
reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT

lint() {
    local top="$1"
    shift
    lint_file "$rtl/$top.v" "$@"
}

# lint_file FILE [ARGS...]: FILE's module (named like the file) as the top, hw/rtl (and the
# board folders, for hw/boards) on the search path.
lint_file() {
    local file="$1"
    shift
    local name top label out
    name="$(basename "$file")"
    top="${name%.*}"
    label="${file#"$root"/}${*:+ $*}"
    runs=$((runs + 1))
    local report="$reports/$runs"
    (
        if out="$("$verilator" --lint-only -Wall -I"$rtl" -y "$rtl" "${board_dirs[@]}" \
            --top-module "$top" "$@" "$file" 2>&1)" && [ -z "$out" ]; then
            echo "ok    $label" >"$report"
        else
            { echo "FAIL  $label"; echo "$out" | sed 's/^/      /'; } >"$report"
            : >"$report.failed"
        fi
    ) &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
        wait -n || true
    done
}

for file in "$rtl"/*.v "$rtl"/*.sv; do
    [ -e "$file" ] || continue
    name="$(basename "$file")"
    top="${name%.*}"
    # One module per file, named like the file.
    if ! grep -q "^module $top\b" "$file"; then
        echo "FAIL  $name: no 'module $top' (one module per file, named like the file)"
        failed=$((failed + 1))
        continue
    fi
    lint "$top"
    for e in "${extra[@]}"; do
        if [ "${e%%|*}" = "$top" ]; then
            # shellcheck disable=SC2086 # the parameter list is meant to split into arguments
            lint "$top" ${e#*|}
        fi
    done
done

# The boards (hw/boards/<board>/): the plugin's modules, the shell stand-ins of the Verilator
# bench and the plugin's own include files (through the stand-ins), with each folder of the
# board on the search path. lint-stubs/ declares the FPGA primitives Vivado supplies
# (STARTUPE3), so the modules that use them are linted too.
for board in "$root"/hw/boards/*/; do
    [ -d "$board" ] || continue
    board_dirs=()
    for d in "$board"rtl "$board"sim "$board"lint-stubs "$board"plugin/box_*; do
        [ -d "$d" ] && board_dirs+=(-y "$d" -I"$d")
    done
    for file in "$board"rtl/*.v "$board"sim/*.v "$board"plugin/box_*/*.v; do
        [ -e "$file" ] || continue
        top="$(basename "${file%.*}")"
        if ! grep -q "^module $top\b" "$file"; then
            echo "FAIL  ${file#"$root"/}: no 'module $top' (one module per file, named like the file)"
            failed=$((failed + 1))
            continue
        fi
        lint_file "$file"
    done
    # The 322 MHz plugin for an unchanged shell (no host DMA port).
    [ -e "$board"rtl/nlb_plugin_322mhz.v ] && lint_file "$board"rtl/nlb_plugin_322mhz.v -GHOST_BRIDGE=0
done

wait
for ((i = 1; i <= runs; i++)); do
    cat "$reports/$i"
    if [ -e "$reports/$i.failed" ]; then
        failed=$((failed + 1))
    fi
done
echo "lint: $runs runs, $failed failed ($("$verilator" --version))"
[ "$failed" -eq 0 ]
