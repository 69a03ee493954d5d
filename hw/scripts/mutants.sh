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
# Not part of CI: each mutant rebuilds nlb_top's model (a minute or more on a 2-core machine;
# at -O1, see NLB_VERILATED_OPT below).
# The planted bugs never touch hw/rtl: the copy lives under target/mutants/.
#
# Usage: hw/scripts/mutants.sh                 every mutant (a baseline run first)
#        hw/scripts/mutants.sh --list          the mutants
#        hw/scripts/mutants.sh NAME...         some mutants (by name or block, e.g. lookup)
#        hw/scripts/mutants.sh --no-baseline   skip the unmutated run
# Output: one line per mutant (KILLED / SURVIVED / INVALID when it does not build, the tests
# that failed, seconds; also appended to target/mutants/results.txt), the kill rate per block
# and kind, logs in target/mutants/logs/<name>.log. Exit status 0 when every mutant was killed.
set -euo pipefail
cd "$(dirname "$0")/../.."

# name|block|kind|test filters (cargo test -p nlb-verif --test rtl -- <filters>)|file|what|sed
mutants=(
  # ---- nlb_lookup: hardware learning's order ----
  "learn_no_wait|lookup|queue|learning::|nlb_lookup.v|packets of a bucket slot leave the connection-table stage without waiting for the installs before them|s/    \&\& ((dq_dep_reg\[dq_head\] \&\& !rs_reg\[dq_seq\])/    \&\& ((1'b0 \&\& dq_dep_reg[dq_head] \&\& !rs_reg[dq_seq])/"
  # ---- nlb_lookup: table contents ----
  "vip_protocol|lookup|contents|contents:: lookup::|nlb_lookup.v|VIP compare ignores the protocol|s/&& vip_rd_data\[cw\*VW + NLB_VIP_ENTRY_PROTOCOL_LSB +: 8\] == c_vproto/\&\& 1'b1/"
  "vip_addr_word3|lookup|contents|contents:: lookup::|nlb_lookup.v|VIP compare ignores address word 3|s/vip_rd_data\[cw\*VW + NLB_VIP_ENTRY_ADDR_LSB +: 128\] == sc\[F_VIP +: 128\]/vip_rd_data[cw*VW + NLB_VIP_ENTRY_ADDR_LSB +: 96] == sc[F_VIP +: 96]/"
  "vip_valid|lookup|contents|contents:: lookup::|nlb_lookup.v|VIP compare ignores the valid bit|s/if (vip_rd_data\[cw\*VW + NLB_VIP_ENTRY_VALID_LSB\]/if (1'b1/"
  "vip_highest_way|lookup|contents|contents:: lookup::|nlb_lookup.v|the highest matching VIP way wins|s/for (cw = VIP_WAYS - 1; cw >= 0; cw = cw - 1)/for (cw = 0; cw < VIP_WAYS; cw = cw + 1)/"
  "slot_stops_at_invalid|lookup|contents|contents:: lookup::|nlb_lookup.v|slot priority breaks across an invalid slot|s/sl_match_low = lowest_one(sl_match);/sl_match_low = lowest_one(sl_match | ~sl_valid) \& sl_match;/"
  "slot_valid|lookup|contents|contents:: lookup::|nlb_lookup.v|port slot compare ignores the valid bit|s/c_way_smatch\[cs\] = c_slot\[NLB_PORT_SLOT_VALID_LSB\]/c_way_smatch[cs] = 1'b1/"
  "slot_hi_exclusive|lookup|contents|contents:: lookup::|nlb_lookup.v|port range's high end excluded|s/&& c_vport <= c_slot\[NLB_PORT_SLOT_PORT_HI_LSB/\&\& c_vport < c_slot[NLB_PORT_SLOT_PORT_HI_LSB/"
  "later_counts_invalid|lookup|contents|contents:: lookup::|nlb_lookup.v|a later fragment counts invalid slots|s/sl_valid\[sn\] = slot\[NLB_PORT_SLOT_VALID_LSB\];/sl_valid[sn] = 1'b1;/"
  "acl_prefix_one_short|lookup|contents|lookup:: differential::|nlb_lookup.v|an ACL prefix compares one bit fewer than its length|s/~(~128'd0 >> pfx_len)/~(~128'd0 >> (pfx_len - 8'd1))/"
  "acl_low_group_ignored|lookup|contents|lookup:: differential::|nlb_lookup.v|an ACL prefix's lowest eight address bits are not compared|s/g_pfx_differs\[pn\*ACL_GROUPS + pg\] = /g_pfx_differs[pn*ACL_GROUPS + pg] = pg == 0 ? 1'b0 : /"
  "ct_protocol|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the protocol|s/&& ct_e\[NLB_CT_ENTRY_PROTOCOL_LSB +: 8\] == x_in\[F_PROTO +: 8\]//"
  "ct_src_port|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the client port|s/&& ct_e\[NLB_CT_ENTRY_SRC_PORT_LSB +: 16\] == x_in\[F_CPORT +: 16\]//"
  "ct_dst_port|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the VIP port|s/&& ct_e\[NLB_CT_ENTRY_DST_PORT_LSB +: 16\] == x_in\[F_VPORT +: 16\]//"
  "ct_src_word3|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores client address word 3|s/ct_e\[NLB_CT_ENTRY_SRC_ADDR_LSB +: 128\] == x_in\[F_CLIENT +: 128\]/ct_e[NLB_CT_ENTRY_SRC_ADDR_LSB +: 96] == x_in[F_CLIENT +: 96]/"
  "ct_dst_word0|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores VIP address word 0|s/ct_e\[NLB_CT_ENTRY_DST_ADDR_LSB +: 128\] == x_in\[F_VIP +: 128\]/ct_e[NLB_CT_ENTRY_DST_ADDR_LSB + 32 +: 96] == x_in[F_VIP + 32 +: 96]/"
  "ct_valid|lookup|contents|contents:: lookup::|nlb_lookup.v|connection compare ignores the valid bit|s/if (ct_e\[NLB_CT_ENTRY_VALID_LSB\]/if (1'b1/"
  "ct_highest_way|lookup|contents|contents:: lookup::|nlb_lookup.v|the highest matching connection way wins (and the highest free way takes an install)|s/for (xw = CT_WAYS - 1; xw >= 0; xw = xw - 1)/for (xw = 0; xw < CT_WAYS; xw = xw + 1)/"
  "maglev_size_bit16|lookup|contents|contents:: lookup::|nlb_lookup.v|the Maglev size loses its top bit|s/nx\[15\]\[F_MSIZE +: MSW\] = p_size;/nx[15][F_MSIZE +: MSW] = p_size \& ~({{(MSW-1){1'b0}}, 1'b1} << 16);/"
  "maglev_range_off_by_one|lookup|contents|contents:: lookup::|nlb_lookup.v|the slot range check is one off (slot = depth passes)|s/sl\[F_MSLOT +: MSLOT_W\]} >= MAGLEV_SLOTS;/sl[F_MSLOT +: MSLOT_W]} > MAGLEV_SLOTS;/"
  "maglev_base_17bits|lookup|contents|contents:: lookup::|nlb_lookup.v|the Maglev base loses its bits above the memory|s/k_slot = {1'b0, sk\[F_MBASE +: MBW\]}/k_slot = {{(MSLOT_W-17){1'b0}}, sk[F_MBASE +: 17]}/"
  "rule_range|lookup|contents|contents:: lookup::|nlb_lookup.v|a rule id past the table aliases a rule|s/nx\[11\]\[F_RINR\] = {20'd0, e_rid} < RULES;/nx[11][F_RINR] = 1'b1;/"
  "pool_range|lookup|contents|contents:: lookup::|nlb_lookup.v|a pool id past the table aliases a pool|s/nx\[13\]\[F_PINR\] = {20'd0, g_pool} < POOLS;/nx[13][F_PINR] = 1'b1;/"
  "backend_range|lookup|contents|contents:: lookup::|nlb_lookup.v|a backend id past the table aliases a backend|s/bm_next\[F_BINR\] = {16'd0, m_be_id} < BACKENDS;/bm_next[F_BINR] = 1'b1;/"
  # ---- nlb_lookup: its descriptor FIFO ----
  "lookup_credit_past_room|lookup|queue|lookup::descriptor_fifo queues::|nlb_lookup.v|s_room gives credit the descriptor FIFO cannot hold|s/fifo_count} <= FIFO_DEPTH \/ 2 - 2;/fifo_count} <= FIFO_DEPTH - 2;/"
  # ---- nlb_regs: the AXI-Lite slave ----
  "regs_cmd_partial|regs|bus|bus::axi regs::|nlb_regs.v|table.cmd acts on a partial write|s/if (!(&w_strb_reg)) begin/if (1'b0) begin/"
  "regs_select_unstrobed|regs|bus|bus::axi regs::|nlb_regs.v|table.select ignores the byte strobes|s/merged = strobed(select_reg, w_data_reg, w_strb_reg);/merged = w_data_reg;/"
  "regs_data_unstrobed|regs|bus|bus::axi regs::|nlb_regs.v|the data window ignores the byte strobes|/data_next\[w\*32 +: 32\] = strobed/{n;s/w_strb_reg);/4'hf);/}"
  "regs_strobe_lanes|regs|bus|bus::axi regs::|nlb_regs.v|byte strobes applied to the mirrored byte lanes|s/strobed\[i\*8 +: 8\] = strb\[i\] ?/strobed[i*8 +: 8] = strb[3-i] ?/"
  "regs_ext_full_strobes|regs|bus|bus::axi regs::|nlb_regs.v|extension-bus writes lose their byte strobes (all four sent)|s/ext_wr_strb_reg <= w_strb_reg;/ext_wr_strb_reg <= 4'hf;/"
  "regs_write_past_held_b|regs|bus|bus::axi regs::|nlb_regs.v|a write executes while its predecessor's response is held|s/wire do_write = aw_full_reg && w_full_reg && !bvalid_reg &&/wire do_write = aw_full_reg \&\& w_full_reg \&\&/"
  "regs_addr_at_data|regs|bus|bus::axi regs::|nlb_regs.v|the write address is caught when the data arrives|/^    if (aw_take) begin$/{N;s/if (aw_take) begin\n        aw_word_reg/if (w_take) begin\n        aw_word_reg/}"
  "regs_read_past_held_r|regs|bus|bus::axi regs::|nlb_regs.v|a read overwrites a held read response|s/wire rd_slot = ar_full_reg && !ext_rwait_reg && (!rvalid_reg || s_axil_rready);/wire rd_slot = ar_full_reg \&\& !ext_rwait_reg;/"
  "regs_maglev_index_17|regs|contents|regs:: contents::|nlb_regs.v|the Maglev index range check sees 17 bits (an index past the table wraps)|s/w_cmd_in_range\[NLB_TABLE_MAGLEV\] = w_cmd_index < MAGLEV_SLOTS;/w_cmd_in_range[NLB_TABLE_MAGLEV] = w_cmd_index[16:0] < MAGLEV_SLOTS;/"
  "regs_select_table_bits|regs|contents|regs:: contents::|nlb_regs.v|table.select's table id loses its upper bits (an unknown table aliases one)|s/wire \[TABLE_SEL_W-1:0\] sel_table = select_reg\[NLB_REG_TABLE_SELECT_TABLE_LSB +: TABLE_SEL_W\];/wire [TABLE_SEL_W-1:0] sel_table = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, select_reg[NLB_REG_TABLE_SELECT_TABLE_LSB +: TABLE_ID_BITS]};/"
  # ---- nlb_table_cmd: the command word of table.cmd and conntrack.cmd ----
  "cmd_plain_any_index|table_cmd|contents|table_cmd:: regs:: bus:: conntrack::|nlb_table_cmd.v|WRITE and READ accept a nonzero index field|s/wire            cmd_plain = cmd_at_index == 32'd0;/wire            cmd_plain = 1'b1;/"
  "cmd_index_16|table_cmd|contents|table_cmd:: regs:: bus:: conntrack:: contents::|nlb_table_cmd.v|the index field loses its top 8 bits|s/(cmd_word & NLB_REG_TABLE_CMD_INDEX_MASK)/(cmd_word \& 32'h00ffff00)/"
  "cmd_op_3bits|table_cmd|contents|table_cmd:: regs:: bus:: conntrack::|nlb_table_cmd.v|the op field is decoded from its low 3 bits|s/wire \[OP_W-1:0\] cmd_op = cmd_word\[NLB_REG_TABLE_CMD_OP_LSB +: OP_W\];/wire [OP_W-1:0] cmd_op = {{(OP_W-3){1'b0}}, cmd_word[NLB_REG_TABLE_CMD_OP_LSB +: 3]};/"
  # ---- nlb_conntrack: its extension-bus slave and index range ----
  "ct_cmd_partial|conntrack|bus|bus::extension_bus_conntrack conntrack::|nlb_conntrack.v|conntrack.cmd acts on a partial write|s/if (!(&x_strb_reg)) begin/if (1'b0) begin/"
  "ct_index_unstrobed|conntrack|bus|bus::extension_bus_conntrack conntrack::|nlb_conntrack.v|conntrack.index ignores the byte strobes|s/wire \[31:0\] index_written = strobed(index_reg, ext_wr_data, ext_wr_strb);/wire [31:0] index_written = ext_wr_data;/"
  "ct_data_unstrobed|conntrack|bus|bus::extension_bus_conntrack conntrack::|nlb_conntrack.v|the conntrack data window ignores the byte strobes|/data_next\[dw\*32 +: 32\] = strobed/{n;s/x_strb_reg);/4'hf);/}"
  "ct_read_ahead_stale|conntrack|bus|conntrack:: cmd_ring::rtl_connection_writes|nlb_conntrack.v|the old entry read ahead ignores a write of that entry still on its way to memory|s/ob_fix_next = wo_reg \&\& wo_index_reg == at;/ob_fix_next = 1'b0;/"
  "ct_read_beside_write|conntrack|bus|bus::extension_bus_conntrack conntrack::|nlb_conntrack.v|a read requested in a write's clock is never answered|s/^    if (ext_rd_req) begin$/    if (ext_rd_req \&\& !ext_wr_req) begin/"
  "ct_index_wraps|conntrack|contents|conntrack:: bus::extension_bus_conntrack device::the_conntrack|nlb_conntrack.v|a command index past the table wraps into it|s/wire        cmd_index_ok = cmd_index < ENTRIES;/wire        cmd_index_ok = cmd_index[INDEX_BITS-1:0] < ENTRIES;/"
  "ct_hit_read_past_table|conntrack|contents|conntrack:: bus::extension_bus_conntrack device::the_conntrack|nlb_conntrack.v|hit_read past the table reads (and clears) a row of it|s/wire hit_in_range = index_reg < ENTRIES;/wire hit_in_range = 1'b1;/"
  # ---- nlb_counters: its extension-bus slave, select ranges, result FIFO ----
  "cnt_snapshot_partial|counters|bus|bus::extension_bus_counters counters::|nlb_counters.v|a snapshot acts on a partial write|s/wr_word == NLB_REG_COUNTERS_SNAPSHOT && &ext_wr_strb/wr_word == NLB_REG_COUNTERS_SNAPSHOT/"
  "cnt_select_unstrobed|counters|bus|bus::extension_bus_counters counters::|nlb_counters.v|counters.select ignores the byte strobes|s/select_reg <= strobed(select_reg, ext_wr_data, ext_wr_strb);/select_reg <= ext_wr_data;/"
  "cnt_unknown_family|counters|contents|counters:: bus::extension_bus_counters|nlb_counters.v|an unknown counter family latches another family's counter|s/default: sel_ok = 1'b0;/default: sel_ok = 1'b1;/"
  "cnt_index_16|counters|contents|counters:: bus::extension_bus_counters|nlb_counters.v|the select's index loses its top 8 bits (an index past the family aliases one)|s/wire \[31:0\]        sel_index32 = {{(32-INDEX_W){1'b0}}, sel_index};/wire [31:0]        sel_index32 = {16'd0, sel_index[15:0]};/"
  "cnt_room_ignores_fifo|counters|queue|queues:: counters::|nlb_counters.v|s_room never falls (the result FIFO can overflow)|s/room_reg <= rec_count < FIFO_DEPTH \/ 2;/room_reg <= 1'b1;/"
  # ---- nlb_spi_flash: its extension-bus slave ----
  "spi_txrx_partial|spi_flash|bus|bus::extension_bus_spi spi_flash::|nlb_spi_flash.v|a partial write of txrx starts a transfer|s/end else if (wr_addr_reg == NLB_REG_SPI_FLASH_TXRX && &wr_strb_reg) begin/end else if (wr_addr_reg == NLB_REG_SPI_FLASH_TXRX) begin/"
  "spi_ctrl_unstrobed|spi_flash|bus|bus::extension_bus_spi spi_flash::|nlb_spi_flash.v|ctrl ignores the byte strobes|s/ctrl_next = strobed(ctrl_reg, wr_data_reg, wr_strb_reg)/ctrl_next = wr_data_reg/"
  "spi_strobe_lanes|spi_flash|bus|bus::extension_bus_spi spi_flash::|nlb_spi_flash.v|byte strobes applied to the mirrored byte lanes|s/strobed\[i\*8 +: 8\] = strb\[i\] ?/strobed[i*8 +: 8] = strb[3-i] ?/"
  "spi_write_takes_read_addr|spi_flash|bus|bus::extension_bus_spi spi_flash::|nlb_spi_flash.v|a write requested beside a read takes the read's address|s/wr_addr_reg <= {ext_wr_addr\[31:2\], 2'b00};/wr_addr_reg <= ext_rd_req ? {ext_rd_addr[31:2], 2'b00} : {ext_wr_addr[31:2], 2'b00};/"
  # ---- nlb_fifo ----
  "fifo_write_when_full|fifo|queue|fifo:: queues::|nlb_fifo.v|a write when full overwrites the oldest word|s/wire wr = s_valid && !full;/wire wr = s_valid;/"
  "fifo_full_early|fifo|queue|fifo:: queues::|nlb_fifo.v|full one word early (a word of room lost)|s/wire full = (wr_ptr_reg ^ rd_ptr_reg) == {1'b1, {AW{1'b0}}};/wire full = wr_ptr_reg - rd_ptr_reg >= DEPTH - 1;/"
  "fifo_count_by_refill|fifo|queue|fifo:: queues::|nlb_fifo.v|count follows the memory's reads, not the output register's|s/count_reg <= count_reg + {{AW{1'b0}}, wr} - {{AW{1'b0}}, take};/count_reg <= count_reg + {{AW{1'b0}}, wr} - {{AW{1'b0}}, rd};/"
  # ---- the clock-domain crossings (a binary pointer crossing is not here: without
  # metastability a simulation cannot see it; the formal proof's mutation check catches it) ----
  "afifo_full_late|async_fifo|queue|async_fifo::|nlb_async_fifo.v|the dual-clock FIFO calls the memory full one word late (an unread word overwritten)|s/^    full_reg <= s_level_next == FULL_LEVEL;/    full_reg <= s_level_next == FULL_LEVEL + 1'b1;/"
  "afifo_read_unseen|async_fifo|queue|async_fifo::|nlb_async_fifo.v|the dual-clock FIFO reads one word beyond the writes it has seen|s/^wire          mem_empty = wr_seen_reg == rd_bin_reg;/wire          mem_empty = wr_seen_reg + 1'b1 == rd_bin_reg;/"
  "axil_cdc_resp_kind|axil_cdc|bus|axil_cdc::|nlb_axil_cdc.v|the AXI-Lite bridge takes a response's kind from the wrong bit|s/^wire resp_is_write = resp_m_data\[RESP_WIDTH-1\];/wire resp_is_write = resp_m_data[RESP_WIDTH-2];/"
  # ---- nlb_top: admission and the event FIFO ----
  "top_ext_read_by_write_addr|top|bus|bus::axi regs::|nlb_top.v|an extension-bus read goes to the block of the last write's address|s/wire ext_rd_cnt = in_block(ext_rd_addr,/wire ext_rd_cnt = in_block(ext_wr_addr,/"
  "top_event_depth_65|top|queue|queues::|nlb_top.v|the event FIFO queues EVENT_DEPTH + 1 events|s/        || (event_count == EVENT_DEPTH - 1 && event_write && !event_take);/        || 1'b0;/"
  "top_event_drop_flag|top|queue|queues::|nlb_top.v|m_event_dropped pulses while full, with or without an event|s/event_dropped_reg <= event_push && event_full;/event_dropped_reg <= event_full;/"
  "top_pkt_fifo_admission|top|queue|queues::|nlb_top.v|admission ignores the packet FIFO's fill|s/        < PKT_FIFO_DEPTH - RX_MAX_BEATS - 4;/        < PKT_FIFO_DEPTH - RX_MAX_BEATS - 4 || 1'b1;/"
  "top_in_flight_admission|top|queue|queues::|nlb_top.v|admission ignores the packets in flight|s/admitted_reg} < MAX_IN_FLIGHT - 2/admitted_reg} < MAX_IN_FLIGHT - 2 || 1'b1/"
  "top_counters_room|top|queue|queues::|nlb_top.v|admission ignores the counters' room|s/        && counters_room && lookup_room;/        \&\& lookup_room;/"
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
# The models' C++ at -O1 (verif/build.rs): nlb_top's model, rebuilt for every mutant, compiles
# in about half the time and simulates about 1.45 times slower than at -O2.
export NLB_VERILATED_OPT="${NLB_VERILATED_OPT:-1}"
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
    timeout 1800 env NLB_RTL_DIR="$rtl" cargo test -p nlb-verif --test rtl -- $filters \
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
invalid=0
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
    elif grep -q "could not compile\|error: failed to run custom build" "$log"; then
        # A mutant that does not build is no bug the tests caught: reported, not counted.
        result=INVALID
        invalid=$((invalid + 1))
        first="(build failed: $log)"
    else
        result=KILLED
        first=$(sed -n 's/^test \([^ ]*\) \.\.\. FAILED$/\1/p' "$log" | paste -sd, -)
        [ -n "$first" ] || first="(no test reported: $log)"
    fi
    line=$(printf '%-26s %-10s %-9s %-9s %6d s  %s -> %s' "$name" "$block" "$kind" "$result" \
        $((SECONDS - t0)) "$what" "$first")
    echo "$line"
    echo "$line" >>"$out/results.txt"
    [ "$result" = INVALID ] && continue
    key="$block/$kind"
    total[$key]=$(( ${total[$key]:-0} + 1 ))
    [ "$result" = KILLED ] && killed[$key]=$(( ${killed[$key]:-0} + 1 ))
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
echo "$(( SECONDS - start )) s in all; logs in $out/logs, one line per mutant in $out/results.txt"
[ "$invalid" = 0 ] || echo "$invalid mutants did not build (INVALID above): fix their sed expressions" >&2
[ "$fails" = 0 ] && [ "$invalid" = 0 ]
