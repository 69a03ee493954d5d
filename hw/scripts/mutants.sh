#!/usr/bin/env bash
# Mutation run of the RTL tests: plants one bug at a time in a copy of hw/rtl (a sed
# expression; one that no longer applies is an error, so the list cannot go stale quietly),
# builds the Verilator models from the copy (NLB_RTL_DIR; verif/build.rs recompiles only the
# models whose Verilated C++ changed), runs the tests that should catch that kind of bug, and
# reports the kill rate per block and per kind of bug:
#   contents  table contents the register map allows (compares, priorities, sizes, id ranges)
#   bus       bus behaviour (byte strobes, pipelined and overlapping AXI-Lite and
#             extension-bus accesses)
#   queue     queues and FIFOs at and past full (drops, flags, admission, order)
# Not part of CI: each mutant rebuilds nlb_top's model (minutes on a 2-core machine).
# The planted bugs never touch hw/rtl: the copy lives under target/mutants/.
#
# Usage: hw/scripts/mutants.sh                 every mutant (a baseline run first)
#        hw/scripts/mutants.sh --list          the mutants
#        hw/scripts/mutants.sh NAME...         some mutants (by name or block, e.g. lookup)
#        hw/scripts/mutants.sh --no-baseline   skip the unmutated run
# Output: one line per mutant (KILLED / SURVIVED, the test that failed first, seconds), the
# kill rate per block and kind, logs in target/mutants/logs/<name>.log. Exit status 0 when
# every mutant was killed.
set -euo pipefail
cd "$(dirname "$0")/../.."

# name|block|kind|test filters (cargo test -p nlb-verif --test rtl -- <filters>)|file|what|sed
mutants=(
  # ---- nlb_lookup: table contents ----
  "vip_protocol|lookup|contents|contents:: lookup::|nlb_lookup.v|VIP compare ignores the protocol|s/&& vip_rd_data\[cw\*VW + NLB_VIP_ENTRY_PROTOCOL_LSB +: 8\] == c_vproto/\&\& 1'b1/"
  "vip_addr_word3|lookup|contents|contents:: lookup::|nlb_lookup.v|VIP compare ignores address word 3|s/vip_rd_data\[cw\*VW + NLB_VIP_ENTRY_ADDR_LSB +: 128\] == sc\[F_VIP +: 128\]/vip_rd_data[cw*VW + NLB_VIP_ENTRY_ADDR_LSB +: 96] == sc[F_VIP +: 96]/"
  "vip_valid|lookup|contents|contents:: lookup::|nlb_lookup.v|VIP compare ignores the valid bit|s/if (vip_rd_data\[cw\*VW + NLB_VIP_ENTRY_VALID_LSB\]/if (1'b1/"
  "vip_highest_way|lookup|contents|contents:: lookup::|nlb_lookup.v|the highest matching VIP way wins|s/for (cw = VIP_WAYS - 1; cw >= 0; cw = cw - 1)/for (cw = 0; cw < VIP_WAYS; cw = cw + 1)/"
  "slot_stops_at_invalid|lookup|contents|contents:: lookup::|nlb_lookup.v|slot priority breaks across an invalid slot|s/sl_match_low = lowest_one(sl_match);/sl_match_low = lowest_one(sl_match | ~sl_valid) \& sl_match;/"
  "slot_valid|lookup|contents|contents:: lookup::|nlb_lookup.v|port slot compare ignores the valid bit|s/sl_match\[sn\] = slot\[NLB_PORT_SLOT_VALID_LSB\]/sl_match[sn] = 1'b1/"
  "slot_hi_exclusive|lookup|contents|contents:: lookup::|nlb_lookup.v|port range's high end excluded|s/&& d_vport_f <= slot\[NLB_PORT_SLOT_PORT_HI_LSB/\&\& d_vport_f < slot[NLB_PORT_SLOT_PORT_HI_LSB/"
  "later_counts_invalid|lookup|contents|contents:: lookup::|nlb_lookup.v|a later fragment counts invalid slots|s/sl_valid\[sn\] = slot\[NLB_PORT_SLOT_VALID_LSB\];/sl_valid[sn] = 1'b1;/"
  "ct_protocol|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the protocol|s/&& ct_e\[NLB_CT_ENTRY_PROTOCOL_LSB +: 8\] == sd\[F_PROTO +: 8\]//"
  "ct_src_port|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the client port|s/&& ct_e\[NLB_CT_ENTRY_SRC_PORT_LSB +: 16\] == sd\[F_CPORT +: 16\]//"
  "ct_dst_port|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the VIP port|s/&& ct_e\[NLB_CT_ENTRY_DST_PORT_LSB +: 16\] == sd\[F_VPORT +: 16\]//"
  "ct_src_word3|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores client address word 3|s/ct_e\[NLB_CT_ENTRY_SRC_ADDR_LSB +: 128\] == sd\[F_CLIENT +: 128\]/ct_e[NLB_CT_ENTRY_SRC_ADDR_LSB +: 96] == sd[F_CLIENT +: 96]/"
  "ct_dst_word0|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores VIP address word 0|s/ct_e\[NLB_CT_ENTRY_DST_ADDR_LSB +: 128\] == sd\[F_VIP +: 128\]/ct_e[NLB_CT_ENTRY_DST_ADDR_LSB + 32 +: 96] == sd[F_VIP + 32 +: 96]/"
  "ct_valid|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the valid bit|s/if (ct_e\[NLB_CT_ENTRY_VALID_LSB\]/if (1'b1/"
  "ct_highest_way|lookup|contents|contents:: lookup::|nlb_lookup.v|the highest matching connection way wins|s/for (sn = CT_WAYS - 1; sn >= 0; sn = sn - 1)/for (sn = 0; sn < CT_WAYS; sn = sn + 1)/"
  "maglev_size_bit16|lookup|contents|contents:: lookup::|nlb_lookup.v|the Maglev size loses its top bit|s/\* sj\[F_MSIZE +: 17\];/* {1'b0, sj[F_MSIZE +: 16]};/"
  "maglev_range_off_by_one|lookup|contents|contents:: lookup::|nlb_lookup.v|the slot range check is one off (slot = depth passes)|s/{7'd0, sl\[F_MSLOT +: 25\]} >= MAGLEV_SLOTS/{7'd0, sl[F_MSLOT +: 25]} > MAGLEV_SLOTS/"
  "maglev_base_17bits|lookup|contents|contents:: lookup::|nlb_lookup.v|the Maglev base loses its bits above the memory|s/wire \[24:0\]   k_slot = {1'b0, sk\[F_MBASE +: 24\]}/wire [24:0]   k_slot = {8'd0, sk[F_MBASE +: 17]}/"
  "rule_range|lookup|contents|contents:: lookup::|nlb_lookup.v|a rule id past the table aliases a rule|s/nx\[11\]\[F_RINR\] = {20'd0, e_rid} < RULES;/nx[11][F_RINR] = 1'b1;/"
  "pool_range|lookup|contents|contents:: lookup::|nlb_lookup.v|a pool id past the table aliases a pool|s/nx\[13\]\[F_PINR\] = {20'd0, g_pool} < POOLS;/nx[13][F_PINR] = 1'b1;/"
  "backend_range|lookup|contents|contents:: lookup::|nlb_lookup.v|a backend id past the table aliases a backend|s/nx\[19\]\[F_BINR\] = {16'd0, m_be_id} < BACKENDS;/nx[19][F_BINR] = 1'b1;/"
)

list=0
baseline=1
want=()
for a in "$@"; do
    case "$a" in
        --list) list=1 ;;
        --no-baseline) baseline=0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) want+=("$a") ;;
    esac
done

if [ "$list" = 1 ]; then
    for m in "${mutants[@]}"; do
        IFS='|' read -r n b k t f w _ <<<"$m"
        printf '%-26s %-10s %-9s %s (%s; tests: %s)\n' "$n" "$b" "$k" "$w" "$f" "$t"
    done
    exit 0
fi

out=target/mutants
mkdir -p "$out/logs"
export CARGO_TARGET_DIR="$PWD/$out/target"
# A fixed build stamp, so the models that do not change are not recompiled for a new time.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1700000000}"
rtl="$PWD/$out/rtl"
start=$SECONDS

selected() {
    local n=$1 b=$2
    [ "${#want[@]}" = 0 ] && return 0
    for w in "${want[@]}"; do [ "$w" = "$n" ] || [ "$w" = "$b" ] && return 0; done
    return 1
}

# Runs the tests named by $1 on the RTL in $rtl; the log in $2. Status of cargo test.
run_tests() {
    local filters=$1 log=$2
    # shellcheck disable=SC2086 # the filters are words
    timeout 3600 env NLB_RTL_DIR="$rtl" cargo test -p nlb-verif --test rtl -- $filters \
        >"$log" 2>&1
}

fresh_copy() {
    rm -rf "$rtl"
    cp -r hw/rtl "$rtl"
}

if [ "$baseline" = 1 ]; then
    # The unmutated RTL must pass every test the mutants use.
    filters=$(for m in "${mutants[@]}"; do
        IFS='|' read -r n b _ t _ _ _ <<<"$m"
        selected "$n" "$b" && echo "$t"
    done | tr ' ' '\n' | sort -u | tr '\n' ' ')
    fresh_copy
    t0=$SECONDS
    if ! run_tests "$filters" "$out/logs/baseline.log"; then
        echo "baseline: the unmutated RTL fails ($filters): $out/logs/baseline.log" >&2
        exit 2
    fi
    printf '%-26s %-10s %-9s %-9s %6d s  %s\n' baseline - - passed $((SECONDS - t0)) "$filters"
fi

declare -A total killed
fails=0
for m in "${mutants[@]}"; do
    IFS='|' read -r name block kind filters file what expr <<<"$m"
    selected "$name" "$block" || continue
    fresh_copy
    if ! sed -i "$expr" "$rtl/$file" 2>"$out/logs/$name.sed"; then
        echo "$name: the sed expression fails: $(cat "$out/logs/$name.sed")" >&2
        exit 2
    fi
    if cmp -s "hw/rtl/$file" "$rtl/$file"; then
        echo "$name: the sed expression changes nothing in $file (stale mutant)" >&2
        exit 2
    fi
    t0=$SECONDS
    log="$out/logs/$name.log"
    if run_tests "$filters" "$log"; then
        result=SURVIVED
        fails=$((fails + 1))
        first=-
    else
        result=KILLED
        first=$(sed -n 's/^test \([^ ]*\) \.\.\. FAILED$/\1/p' "$log" | head -1)
        if grep -q "could not compile\|error: failed to run custom build" "$log"; then
            first="(build failed: $log)"
        fi
        [ -n "$first" ] || first="(no test reported: $log)"
    fi
    key="$block/$kind"
    total[$key]=$(( ${total[$key]:-0} + 1 ))
    [ "$result" = KILLED ] && killed[$key]=$(( ${killed[$key]:-0} + 1 ))
    printf '%-26s %-10s %-9s %-9s %6d s  %s -> %s\n' "$name" "$block" "$kind" "$result" \
        $((SECONDS - t0)) "$what" "$first"
done

echo
echo "kill rate per block and kind:"
declare -A btotal bkilled
for key in $(printf '%s\n' "${!total[@]}" | sort); do
    b=${key%%/*}
    printf '  %-22s %3d / %-3d\n' "$key" "${killed[$key]:-0}" "${total[$key]}"
    btotal[$b]=$(( ${btotal[$b]:-0} + ${total[$key]} ))
    bkilled[$b]=$(( ${bkilled[$b]:-0} + ${killed[$key]:-0} ))
done
echo "kill rate per block:"
for b in $(printf '%s\n' "${!btotal[@]}" | sort); do
    printf '  %-22s %3d / %-3d (%d %%)\n' "$b" "${bkilled[$b]}" "${btotal[$b]}" \
        $(( 100 * ${bkilled[$b]} / ${btotal[$b]} ))
done
echo "$(( SECONDS - start )) s in all; logs in $out/logs"
[ "$fails" = 0 ]
