#!/usr/bin/env bash
# Builds nlb-offload into AMD's OpenNIC shell for an Alveo card: the bitstream (.bit) that
# `nlbctl flash` loads and the configuration-flash image (.mcs). docs/boards.md walks through
# the whole way from a card in a server to traffic.
#
# Usage: hw/boards/opennic/build.sh BOARD [options]
#   BOARD            au250 | au280 | au55c
#   --shell DIR      an OpenNIC shell checkout (default: $OPENNIC_SHELL)
#   --out DIR        where the plugin copy and the logs go (default: build/opennic-BOARD in this
#                    checkout); Vivado's results stay in the shell's build/ folder
#   --jobs N         Vivado jobs (default: the number of CPUs)
#   --host-bridge    the shell was changed to carry the host DMA port to the QDMA's AXI-MM
#                    bridge (docs/boards.md); without it the host rings' DMA is refused inside
#                    the plugin and the rings report DMA faults
#   --startupe3      the plugin owns the STARTUPE3 primitive, so `nlbctl flash` reaches the
#                    configuration flash; leave it off for shells that use STARTUPE3 themselves
#   --dry-run        check the board, the shell checkout and Vivado, write the plugin copy, print
#                    the Vivado command, and stop
#
# Needs: Vivado (a version the shell supports, on PATH), the shell's checkout, git.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hw="$(cd "$here/../.." && pwd)"
repo="$(cd "$hw/.." && pwd)"

die() {
    echo "build.sh: $*" >&2
    exit 2
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

board=""
shell="${OPENNIC_SHELL:-}"
out=""
jobs="$(nproc 2>/dev/null || echo 4)"
bridge=0
startupe3=0
dry=0
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help) usage 0 ;;
        --shell) shell="${2:?--shell needs a folder}"; shift 2 ;;
        --out) out="${2:?--out needs a folder}"; shift 2 ;;
        --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
        --host-bridge) bridge=1; shift ;;
        --startupe3) startupe3=1; shift ;;
        --dry-run) dry=1; shift ;;
        -*) die "unknown option $1 (see --help)" ;;
        *)
            [ -z "$board" ] || die "one board only (got $board and $1)"
            board="$1"
            shift
            ;;
    esac
done

# The boards: fw_id.board_id (hw/regmap.toml) and the FPGA's IDCODE without its revision, which
# `nlbctl flash` compares with the bitstream's.
case "$board" in
    au250) board_id=0x0250; part_id=0x04B57093; part=xcu250 ;;
    au280) board_id=0x0280; part_id=0x04B7D093; part=xcu280 ;;
    au55c) board_id=0x055C; part_id=0x04B7D093; part=xcu55c ;;
    "") usage 2 ;;
    *) die "unknown board '$board': au250, au280 or au55c" ;;
esac
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a positive number, not '$jobs'"

[ -n "$shell" ] || die "no OpenNIC shell checkout: give --shell DIR or set OPENNIC_SHELL (git clone https://github.com/Xilinx/open-nic-shell)"
[ -f "$shell/script/build.tcl" ] || die "$shell is not an OpenNIC shell checkout (no script/build.tcl)"
[ -f "$shell/script/board_settings/$board.tcl" ] || die "the shell at $shell has no board '$board' (script/board_settings/$board.tcl)"
shell="$(cd "$shell" && pwd)"
if [ "$bridge" = 1 ] && ! grep -q "m_axi_host_awaddr" "$shell/src/box_322mhz/box_322mhz.sv"; then
    die "--host-bridge: the shell's src/box_322mhz/box_322mhz.sv has no m_axi_host_* ports; change the shell first (docs/boards.md, \"The host DMA path\")"
fi

# The plugin copy: the checked-in plugin folder with the build's stamps and paths.
out="${out:-$repo/build/opennic-$board}"
plugin="$out/plugin"
rm -rf "$plugin"
mkdir -p "$out"
cp -r "$here/plugin" "$plugin"
git_hash="$(git -C "$repo" rev-parse --short=8 HEAD 2>/dev/null || echo 00000000)"
build_id="$(date +%s)"
cat > "$plugin/box_322mhz/nlb_build_params.vh" <<EOF
// Written by hw/boards/opennic/build.sh for $board at $(date -u +%Y-%m-%dT%H:%M:%SZ).
localparam [31:0] NLB_BUILD_ID = 32'd$build_id;
localparam [31:0] NLB_GIT_HASH = 32'h$git_hash;
localparam [31:0] NLB_BOARD_ID = 32'h${board_id#0x};
localparam [31:0] NLB_PART_ID = 32'h${part_id#0x};
EOF
defines=()
[ "$bridge" = 1 ] && defines+=(NLB_QDMA_BRIDGE)
[ "$startupe3" = 1 ] && defines+=(NLB_STARTUPE3)
cat > "$plugin/nlb_build.tcl" <<EOF
# Written by hw/boards/opennic/build.sh: where nlb-offload's hw/ is, and the plugin's defines.
set nlb_hw_dir {$hw}
set nlb_defines {${defines[*]}}
EOF

tag="nlb"
cmd=(vivado -mode batch -source build.tcl -tclargs
    -board "$board" -tag "$tag" -user_plugin "$plugin" -jobs "$jobs"
    -num_cmac_port 1 -num_phys_func 1 -use_phys_func 1 -max_pkt_len 9600
    -impl 1 -post_impl 1 -overwrite 1 -rebuild 1)
results="$shell/build/${board}_$tag/open_nic_shell/open_nic_shell.runs/impl_1"

echo "board     $board ($part, board id $board_id, IDCODE $part_id)"
echo "shell     $shell"
echo "plugin    $plugin (commit $git_hash; defines: ${defines[*]:-none})"
echo "command   (cd $shell/script && ${cmd[*]})"
echo "results   $results/open_nic_shell.bit and .mcs"

if [ "$dry" = 1 ]; then
    exit 0
fi

command -v vivado >/dev/null || die "vivado is not on PATH (source the settings64.sh of a Vivado the shell supports)"
version="$(vivado -version 2>/dev/null | sed -n 's/^Vivado v\([0-9.]*\).*/\1/p' | head -1)"
echo "vivado    ${version:-unknown version}"

log="$out/vivado.log"
echo "building (hours, not minutes); log: $log"
(cd "$shell/script" && "${cmd[@]}") > "$log" 2>&1 || die "Vivado failed; the end of $log says why"
for f in "$results/open_nic_shell.bit" "$results/open_nic_shell.mcs"; do
    [ -f "$f" ] || die "Vivado finished without $f; see $log"
done
cp "$results/open_nic_shell.bit" "$out/nlb-offload-$board.bit"
cp "$results/open_nic_shell.mcs" "$out/nlb-offload-$board.mcs"
echo "done: $out/nlb-offload-$board.bit (nlbctl flash takes it) and $out/nlb-offload-$board.mcs"
