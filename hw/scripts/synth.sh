#!/usr/bin/env bash
# Synthesises every module of hw/rtl with Yosys (synth_xilinx, UltraScale+ family) and writes
# LUT / flip-flop / block-RAM estimates and the longest register-to-register path in logic
# levels to docs/synthesis.md.
#
# Usage: hw/scripts/synth.sh             all modules, rewrite docs/synthesis.md (over an hour
#                                        on a busy 2-core machine: the parser, the lookup and
#                                        the top take most of it)
#        hw/scripts/synth.sh nlb_regs    only these tops, print the table (doc untouched;
#                                        0.5-7 minutes a module, nlb_top about 30)
#        YOSYS=/path/to/yosys hw/scripts/synth.sh
#        SYNTH_DEEP=12 hw/scripts/synth.sh nlb_top   also list every register (and output
#                                        port) whose input is more than 12 levels deep, with a
#                                        path each (hw/scripts/deep_paths.py; needs python3)
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
doc="$top_dir/docs/synthesis.md"
yosys="${YOSYS:-yosys}"

if ! command -v "$yosys" >/dev/null 2>&1; then
    echo "synth.sh: $yosys not found (apt-get install yosys, or set YOSYS)" >&2
    exit 2
fi

# What to synthesise: "label|top|chparam arguments|what it is". Modules without an entry are
# synthesised once with their defaults.
configs=(
    "nlb_flow_hash|nlb_flow_hash||flow hash, 6-stage pipeline"
    "nlb_mul_const_csa (MIX_MUL1)|nlb_mul_const_csa|-set CONST 32'h85ebca6b|carry-save multiply by the first mix constant (combinational; inside stage 3 of the hash)"
    "nlb_axis_skid|nlb_axis_skid||512-bit AXI-Stream skid buffer"
    "nlb_table_mem (VIP shape)|nlb_table_mem|-set WIDTH 857 -set ROWS 64 -set LANES 4|VIP table of the sim profile: 2 banks x 64 buckets x 4 ways x 857 bits"
    "nlb_regs (sim profile)|nlb_regs||register file + every banked table of the sim profile"
    "nlb_parser|nlb_parser||header parser, 9 stages"
    "nlb_lookup (sim profile)|nlb_lookup||lookup pipeline: 5 flow hashes, 21 stages (table memories outside)"
    "nlb_editor|nlb_editor||action stage: header builder, job FIFO, byte shifter, two skid buffers"
    "nlb_counters (sim profile)|nlb_counters||counter families (rule 256, backend 4096 entries of 4 x 64 bit)"
    "nlb_conntrack (sim profile)|nlb_conntrack||connection table 4096 x 4 x 365 bit, hit bits, register block"
    "nlb_table_cmd|nlb_table_cmd||decode of a table/conntrack cmd word (combinational, inside nlb_regs and nlb_conntrack)"
    "nlb_spi_flash|nlb_spi_flash||SPI flash controller, the spi_flash block on nlb_regs' extension bus"
    "nlb_top (sim profile)|nlb_top||the whole pipeline with every table of the sim profile"
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
        IFS='|' read -r _ ctop _ _ <<<"$c"
        [ "$ctop" = "$top" ] && found=1
    done
    [ "$found" -eq 1 ] || configs+=("$top|$top||defaults")
done

rows=()
paths=()
for c in "${configs[@]}"; do
    IFS='|' read -r label top params what <<<"$c"
    wanted "$top" || continue
    tag="$(echo "$label" | tr -c 'A-Za-z0-9_\n' '_')"
    echo "synth: $label ..." >&2
    chparam=""
    [ -n "$params" ] && chparam="chparam $params $top;"
    json=""
    [ -n "${SYNTH_DEEP:-}" ] && json="write_json $work/$tag.json;"
    if ! "$yosys" -q -l "$work/$tag.log" -p "
        read_verilog -I$rtl $rtl/*.v;
        $chparam
        synth_xilinx -family xcup -flatten -noiopad -nowidelut -top $top;
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
        python3 "$here/deep_paths.py" "$work/$tag.json" "$top" "$SYNTH_DEEP" >&2
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
{
    cat <<'EOF'
<!-- Generated by hw/scripts/synth.sh; rerun it to refresh (over an hour on 2 busy cores). -->

# Synthesis estimates

Every module of `hw/rtl` is synthesised on its own by Yosys (`synth_xilinx -family xcup
-flatten -noiopad -nowidelut`, UltraScale+ cells), with the parameters listed below. These are
estimates for sizing and for spotting long paths early, not a place-and-route result: Yosys
0.23 maps carry chains to CARRY4, 4 bits a cell, where UltraScale+ has CARRY8 (a 64-bit carry
chain is 16 "levels" here but 8 in Vivado, and on dedicated carry routing, much faster than a
LUT level); it does not pack output registers into block RAM and knows nothing of routing.

**Logic levels** are the cells on the longest combinational path between two sequential
elements (flip-flops, shift-register LUTs, block RAM ports), each LUT6 and each CARRY4 counting
one, as Vivado reports them. The design rule is at most about 10 levels per pipeline stage,
which keeps 250 MHz (Corundum's core clock) to 322 MHz (the 100G MAC clock) credible on an
UltraScale+ part; 100GbE at 64-byte frames is 148.8 Mpps, so the pipeline's one packet per clock
at 250 MHz leaves headroom.

EOF
    echo "Yosys: \`$yosys_version\`; source commit \`$commit\`."
    echo
    echo "## Resources and depth"
    echo
    echo "$header"
    printf '%s\n' "${rows[@]}"
    echo
    echo "## Longest paths"
    echo
    echo "$path_header"
    printf '%s\n' "${paths[@]}"
    echo
    cat <<'EOF'
## Notes

- `nlb_flow_hash`: the deepest stages are the two carry-save-to-binary adds (one 32-bit carry
  chain plus the xorshift after it); the CRC XOR matrix is split over two stages and each
  multiply's Wallace tree has a stage of its own. Latency 6 clocks, one key per clock.
- `nlb_regs` at the `sim` profile holds both banks of every table: Maglev slots (2 × 131072 ×
  16 bit) are most of the block RAM. The `u280` profile puts Maglev slots and connections in
  HBM, so its BRAM figure would not come from this module; its other tables (VIP 4096 × 4 ×
  857 bit, rules, ACL 4096 × 1096 bit, pools, backends 65536 × 178 bit) are sized in
  `docs/regmap.md`.
- The VIP table at the `u280` profile: 2 banks × 4096 buckets × 4 ways × 857 bits (16 port
  slots per entry) = 28.1 Mbit, which belongs in UltraRAM (4K × 72 bit, true dual port on
  one clock): 12 URAM wide × 2 deep (the banks) per way, 96 of the U280's 960 URAM. With the
  former 4 slots (317 bits) it was 5 × 2 per way, 40 URAM. In RAMB36 it would take 860 of
  2016, so it is not meant for block RAM at that depth.
- The register file's flip-flops are mostly the 64-word table data window and the table
  memories' output registers (which Vivado would place inside the block RAMs).
- Both ports of a table memory read (the pipeline on A, the window on B), so each lane maps to
  true-dual-port block RAM at most 36 bits wide: an 857-bit VIP entry takes 24 RAMB36 per way
  however shallow the table (9 for the 317-bit entry of 4 slots, before the entry had 16). Tables of a few hundred entries (VIP, rules, pools at the `sim`
  profile) would fit distributed RAM better; that is a later optimisation.
EOF
} >"$doc"
echo "synth: wrote $doc" >&2
