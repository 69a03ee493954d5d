#!/usr/bin/env bash
# Synthesises every module of hw/rtl with Yosys (synth_xilinx, UltraScale+ family) and prints
# LUT / flip-flop / block-RAM estimates and the longest register-to-register path in logic
# levels, as the tables of docs/benchmarks.md ("Synthesis estimates"); the method is
# docs/synthesis.md.
#
# Usage: hw/scripts/synth.sh             all modules, also kept in target/synth/tables.md (over an hour
#                                        on a busy 2-core machine: the parser, the lookup and
#                                        the top take most of it)
#        hw/scripts/synth.sh nlb_regs    only these tops, print the table (doc untouched;
#                                        0.5-7 minutes a module, nlb_top about 30)
#        hw/scripts/synth.sh "nlb_mem_stage (u280 Maglev)"   only this configuration (a
#                                        label of the list below)
#        YOSYS=/path/to/yosys hw/scripts/synth.sh
#        SYNTH_DEEP=12 hw/scripts/synth.sh nlb_top   also list every register (and output
#                                        port) whose input is more than 12 levels deep, with a
#                                        path each (hw/scripts/deep_paths.py; needs python3); the
#                                        netlist is kept in target/synth/ to list them again
#
# Logic levels: cells on the longest combinational path between sequential elements (flip-flops,
# shift-register LUTs, block RAM), each LUT and each CARRY4 counting one, as Vivado counts
# them. -nowidelut keeps wide functions in LUT6 trees, so a level is a LUT6 level. Yosys maps
# carry chains to CARRY4 (4 bits each) where UltraScale+ has CARRY8: an n-bit chain is n/4
# levels here and n/8 in Vivado, on dedicated carry routing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rtl="$(cd "$here/../rtl" && pwd)"
top_dir="$(cd "$here/../.." && pwd)"
# The boards' modules (read with hw/rtl; the STARTUPE3 wrapper is Vivado's alone).
board_files="$(ls "$top_dir"/hw/boards/*/rtl/nlb_plugin_*.v 2>/dev/null | tr '\n' ' ')"
out="$top_dir/target/synth/tables.md"
yosys="${YOSYS:-yosys}"

if ! command -v "$yosys" >/dev/null 2>&1; then
    echo "synth.sh: $yosys not found (apt-get install yosys, or set YOSYS)" >&2
    exit 2
fi

# What to synthesise: "label|top|chparam arguments|what it is[|noshare]". Modules without an
# entry are synthesised once with their defaults. "noshare" runs synth_xilinx without its
# `share` pass: at the production geometries `share` tries to merge the tens of read ports of
# the stages' id memories and runs for hours (its SAT search over activation patterns).
# Merging read ports only puts muxes in front of one port, so the levels without it are the
# design's own; the LUT count may be a little higher than with it.
configs=(
    "nlb_flow_hash|nlb_flow_hash||flow hash, 6-stage pipeline"
    "nlb_mul_const_csa (MIX_MUL1)|nlb_mul_const_csa|-set CONST 32'h85ebca6b|carry-save multiply by the first mix constant (combinational; inside stage 3 of the hash)"
    "nlb_axis_skid|nlb_axis_skid||512-bit AXI-Stream skid buffer"
    "nlb_table_mem (VIP shape)|nlb_table_mem|-set WIDTH 857 -set ROWS 64 -set LANES 4|VIP table of the sim profile: 2 banks x 64 buckets x 4 ways x 857 bits"
    "nlb_regs (sim profile)|nlb_regs||register file + every banked table of the sim profile"
    "nlb_parser|nlb_parser||header parser, 9 stages"
    "nlb_lookup (sim profile)|nlb_lookup||lookup pipeline: 5 flow hashes, 21 stages (table memories outside)"
    "nlb_editor|nlb_editor||action stage: header builder, job FIFO, byte shifter, three skid buffers (transmit, punt, pass)"
    "nlb_counters (sim profile)|nlb_counters||counter families (rule 256, backend 4096 entries of 4 x 64 bit)"
    "nlb_conntrack (sim profile)|nlb_conntrack||connection table 4096 x 4 x 365 bit, hit bits, register block"
    "nlb_table_cmd|nlb_table_cmd||decode of a table/conntrack cmd word (combinational, inside nlb_regs and nlb_conntrack)"
    "nlb_spi_flash|nlb_spi_flash||SPI flash controller, the spi_flash block on nlb_regs' extension bus"
    "nlb_top (sim profile)|nlb_top||the whole pipeline with every table of the sim profile"
    "nlb_mem_stage (u280 connections)|nlb_mem_stage|-set STATE_W 580 -set CHANNELS 16 -set ROW_BITS 24 -set SLOTS 512|connection-table stage: 16 HBM ports, 512 packets, 1536-bit rows, write record|noshare"
    "nlb_mem_stage (u280 Maglev)|nlb_mem_stage|-set STATE_W 580 -set ROW_W 256 -set DATA_W 256 -set LANE_W 16 -set ENTRY_W 16 -set ROW_SHIFT 5 -set ROW_BITS 22 -set CHANNELS 4 -set SLOTS 512 -set FULL_WR 1|Maglev stage: 4 HBM ports, 512 packets, 16-slot rows, whole-row writes"
    "nlb_cmd_ring (sim profile)|nlb_cmd_ring||command ring engine: descriptors, read-ahead, window commands, range reads by rows (32-row buffer)"
    "nlb_ct_learn (sim profile)|nlb_ct_learn|-set ROW_BITS 12|hardware learning's 64 install records: merge into a bucket, write order, freeing"
    "nlb_mem_ram (sim connections)|nlb_mem_ram||on-chip connection table behind its AXI4 port: 4096 rows of 1536 bits"
    "nlb_lookup (u280, HBM)|nlb_lookup|-set VIP_BUCKETS 4096 -set RULES 4096 -set POOLS 2048 -set MAGLEV_SLOTS 33554432 -set BACKENDS 65536 -set CT_BUCKETS 16777216 -set CT_CHANNELS 16 -set CT_DATA_W 256 -set CT_SLOTS 512 -set MG_CHANNELS 4 -set MG_SLOTS 512 -set HW_LEARN 0|lookup pipeline of the u280 profile with both memory stages on HBM ports (table memories outside)|noshare"
    "nlb_plugin_322mhz (OpenNIC)|nlb_plugin_322mhz||the OpenNIC shell's 322 MHz box module: nlb_top (sim profile), register and host-DMA clock crossings, receive, transmit and to-host frame FIFOs and arbiters (hw/boards/opennic)"
    "nlb_top (u280)|nlb_top|-set PROFILE_ID 2 -set VIP_BUCKETS 4096 -set RULES 4096 -set POOLS 2048 -set MAGLEV_SLOTS 33554432 -set BACKENDS 65536 -set CT_BUCKETS 16777216 -set QUEUE_DEPTH 4096 -set MEM_ONCHIP 0 -set CT_CHANNELS 16 -set CT_DATA_W 256 -set CT_SLOTS 512 -set MG_CHANNELS 4 -set MG_SLOTS 512 -set MAX_IN_FLIGHT 1024|the whole pipeline of the u280 profile: on-chip tables at their u280 sizes, connections and Maglev slots on HBM ports|noshare"
)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

only=("$@")
wanted() {
    [ "${#only[@]}" -eq 0 ] && return 0
    local t
    for t in "${only[@]}"; do [ "$t" = "$1" ] && return 0; done
    return 1
}

# Every module gets at least its default configuration.
for file in "$rtl"/*.v "$rtl"/*.sv; do
    [ -e "$file" ] || continue
    top="$(basename "${file%.*}")"
    found=0
    for c in "${configs[@]}"; do
        IFS='|' read -r _ ctop _ _ _ <<<"$c"
        [ "$ctop" = "$top" ] && found=1
    done
    [ "$found" -eq 1 ] || configs+=("$top|$top||defaults")
done

rows=()
paths=()
for c in "${configs[@]}"; do
    IFS='|' read -r label top params what mode <<<"$c"
    wanted "$top" || wanted "$label" || continue
    tag="$(echo "$label" | tr -c 'A-Za-z0-9_\n' '_')"
    echo "synth: $label ..." >&2
    chparam=""
    [ -n "$params" ] && chparam="chparam $params $top;"
    json=""
    [ -n "${SYNTH_DEEP:-}" ] && json="write_json $work/$tag.json;"
    synth_opts="-family xcup -flatten -noiopad -nowidelut -top $top"
    synth="synth_xilinx $synth_opts;"
    if [ "${mode:-}" = "noshare" ]; then
        # synth_xilinx's own steps, its "coarse" step without `share`.
        synth="synth_xilinx $synth_opts -run begin:coarse;
            techmap -map +/cmp2lut.v -map +/cmp2lcu.v -D LUT_WIDTH=6; alumacc; opt;
            memory -nomap; opt_clean;
            synth_xilinx $synth_opts -run map_memory:;"
    fi
    if ! "$yosys" -q -l "$work/$tag.log" -p "
        read_verilog -DNLB_SYNTH_ESTIMATE -I$rtl $rtl/*.v $board_files;
        $chparam
        $synth
        tee -q -o $work/$tag.stat stat;
        tee -q -o $work/$tag.ltp ltp w:* t:* %u t:FD* %d t:SRL* %d t:RAMB* %d t:BUFG* %d;
        $json
    " >/dev/null 2>&1; then
        echo "synth.sh: Yosys failed on $label; see the log:" >&2
        tail -20 "$work/$tag.log" >&2
        exit 1
    fi
    row="$(awk -v label="$label" '
        $1 ~ /^LUT[1-6]$/ { lut += $2 }
        $1 ~ /^SRL/ { srl += $2 }
        $1 ~ /^RAM(32|64|128|256)/ { lutram += $2 }
        $1 ~ /^FD[RSCP]E$/ { ff += $2 }
        $1 == "RAMB36E2" { b36 += $2 }
        $1 == "RAMB18E2" { b18 += $2 }
        $1 ~ /^CARRY/ { carry += $2 }
        $1 ~ /^DSP/ { dsp += $2 }
        END {
            printf "| %s | %d | %d | %d | %g | %d |", label, lut + srl + lutram, ff, carry,
                b36 + b18 / 2, dsp
        }' "$work/$tag.stat")"
    levels="$(awk '
        /Longest topological path/ { match($0, /length=-?[0-9]+/); n = substr($0, RSTART + 7, RLENGTH - 7) }
        /^ +[0-9]+: / {
            sig = $2; if ($3 ~ /^\[/) sig = sig " " $3
            if (first == "") first = sig
            last = sig
            if ($0 ~ /carry[48]/) carry++; else if ($0 ~ /\(via /) lut++
        }
        END {
            # Yosys marks source names with a backslash; others are its own nets.
            if (last !~ /^\\/) last = "(a register input)"
            gsub(/\\/, "", first); gsub(/\\/, "", last)
            printf "%d|%d|%d|%s|%s", n, lut, carry, first, last
        }' "$work/$tag.ltp")"
    IFS='|' read -r n lut carry from to <<<"$levels"
    if [ -n "${SYNTH_DEEP:-}" ]; then
        # A failure here must not lose the run's figures (printed below).
        python3 "$here/deep_paths.py" "$work/$tag.json" "$top" "$SYNTH_DEEP" >&2 \
            || echo "synth.sh: the deep-path listing failed for $label" >&2
        # Kept, to list the paths again without another run (DEEP_FULL=1 prints them whole).
        mkdir -p "$top_dir/target/synth"
        cp "$work/$tag.json" "$top_dir/target/synth/$tag.json"
        echo "synth.sh: netlist kept: hw/scripts/deep_paths.py target/synth/$tag.json $top $SYNTH_DEEP" >&2
    fi
    rows+=("$row $n |")
    paths+=("| $label | $n | $lut LUT + $carry CARRY4 | \`$from\` → \`$to\` | $what |")
done

header="| module | LUT (incl. SRL/LUTRAM) | FF | CARRY4 | BRAM (36 Kb) | DSP | logic levels |
|---|---:|---:|---:|---:|---:|---:|"
path_header="| module | levels | made of | longest path (start → end) | what |
|---|---:|---|---|---|"

if [ "${#only[@]}" -gt 0 ]; then
    echo "$header"
    printf '%s\n' "${rows[@]}"
    echo
    echo "$path_header"
    printf '%s\n' "${paths[@]}"
    exit 0
fi

yosys_version="$("$yosys" -V | head -1)"
commit="$(git -C "$top_dir" rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
mkdir -p "$(dirname "$out")"
{
    echo "Yosys: \`$yosys_version\`; source commit \`$commit\`; $(date -u +%Y-%m-%d)."
    echo
    echo "$header"
    printf '%s\n' "${rows[@]}"
    echo
    echo "$path_header"
    printf '%s\n' "${paths[@]}"
} | tee "$out"
echo "synth: wrote $out (copy the rows into docs/benchmarks.md, 'Synthesis estimates', with the date)" >&2
