#!/usr/bin/env bash
# Formal proofs of RTL blocks with Yosys and yosys-smtbmc (docs/verification.md "Formal
# proofs"). The properties live in hw/formal/<module>_props.vh, included by each module under
# `ifdef FORMAL.
#
# For each proof: Yosys writes an SMT-LIBv2 model of the block, then yosys-smtbmc runs
#   bmc        bounded model check from reset, DEPTH clocks (a failure is a real trace);
#   induction  k-induction of depth DEPTH (with the bmc pass: the properties hold in every
#              reachable state, unbounded);
#   cover      every cover statement reached within DEPTH clocks (the states the proof is
#              about are reachable, so the assumptions do not rule them out).
# Then the mutation checks: each plants a bug in a copy of the RTL (a sed expression) and
# runs bmc with the specification's assertions only (FORMAL_SPEC_ONLY: the inductive
# invariants off, so the bug must show at the block's ports); the bug must be caught, by the
# assertion named, with a counterexample trace. A mutation that no longer applies (the RTL
# changed) is an error too.
#
# Prints a table (block, property set, method, depth, result, seconds) and exits non-zero if
# anything fails. Traces and logs: target/formal/<proof>/ (NLB_FORMAL_DIR to move it):
# bmc.vcd / induction.vcd of a failure (for induction: the k clocks before the step that
# breaks a property, from a state that need not be reachable), cover<N>.vcd per cover.
#
# Usage: hw/scripts/formal.sh                     every proof, then every mutation check
#        hw/scripts/formal.sh --no-mutants         proofs only
#        hw/scripts/formal.sh --mutants            mutation checks only
#        hw/scripts/formal.sh fifo regs            only these proofs (and their mutations)
#        hw/scripts/formal.sh --list               the proofs and mutations
#        YOSYS=... YOSYS_SMTBMC=... NLB_FORMAL_TIMEOUT=seconds (per solver run; 1200: the
#                            host DMA engine's induction takes about 510 s alone on a core
#                            with Debian 12's z3)
#        NLB_Z3=path         the z3 to run; by default the pinned release that
#                            hw/scripts/fetch-z3.sh fetches (./test.sh runs it) when it is
#                            there, else the z3 on PATH (Debian's: about four times slower)
#        NLB_FORMAL_JOBS=n   solver runs at a time (the number of CPUs; the mutation checks
#                            run one at a time)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hw="$(cd "$here/.." && pwd)"
top_dir="$(cd "$hw/.." && pwd)"
out="${NLB_FORMAL_DIR:-$top_dir/target/formal}"
yosys="${YOSYS:-yosys}"
smtbmc="${YOSYS_SMTBMC:-yosys-smtbmc}"
limit="${NLB_FORMAL_TIMEOUT:-1200}"
# yosys-smtbmc runs the z3 it finds on PATH: put the chosen one first.
z3="${NLB_Z3:-}"
if [ -z "$z3" ] && [ -x "$top_dir/target/tools/z3-4.13.0/z3" ]; then
    z3="$top_dir/target/tools/z3-4.13.0/z3"
fi
if [ -n "$z3" ]; then
    if [ "$(basename "$z3")" != z3 ] || [ ! -x "$z3" ]; then
        echo "formal.sh: NLB_Z3 must name an executable called z3 (got '$z3')" >&2
        exit 2
    fi
    PATH="$(cd "$(dirname "$z3")" && pwd):$PATH"
    export PATH
fi

# ---- the proofs -----------------------------------------------------------------------------
# "name|block (module and parameters)|property set|top|RTL files|hierarchy arguments|
#  Yosys commands before prep|Yosys commands after prep|solver|bmc depth|induction depth|
#  cover depth[|bmc depth of its mutation checks, when they need more clocks than the proof's
#  base case]"
#
# The bmc run is the induction's base case, so its depth is at least the induction's (checked
# below); once the induction proves the properties for every reachable state, a deeper bmc
# adds nothing to the proof, only time (each clock about doubles it). Where a planted bug
# needs more clocks to show, its mutation checks keep the deeper bmc (the last field).
#
# Solver: z3 (4.13.0 from PyPI, hw/scripts/fetch-z3.sh, or Debian's 4.8.12), run by
# yosys-smtbmc with --unroll --noincr (a fresh solver per query, the model's functions
# unrolled): incrementally, or reading the define-fun model directly, Debian's z3 takes
# minutes on queries it answers from scratch in under a second. Debian's boolector (1.5) has
# no push/pop and fails on yosys-smtbmc's input; Debian's cvc5 (1.0.3) had not finished the
# host DMA engine's induction after 5 minutes (z3 4.13.0: 2 minutes); yosys-abc cannot read
# the model.
#
# Abstractions (cutpoint: the cut signal becomes a free input every clock, so the proof
# covers every value it could take, and more): nlb_regs' table memories (their read data) and
# its data window's next value; the lookup's flow hashes and table read data are inputs or cut
# (none of them can change which bank a read uses). docs/verification.md says what each
# proof covers and what it leaves out.
proofs=(
    "fifo4|nlb_fifo WIDTH=8 DEPTH=4|beats in order, none lost or made up; count; valid/ready|nlb_fifo|nlb_fifo|-chparam WIDTH 8 -chparam DEPTH 4|||z3|8|4|16|14"
    "fifo2|nlb_fifo WIDTH=8 DEPTH=2|beats in order, none lost or made up; count; valid/ready|nlb_fifo|nlb_fifo|-chparam WIDTH 8 -chparam DEPTH 2|||z3|10|4|12"
    "skid|nlb_axis_skid DATA_WIDTH=512|beats in order, none lost or made up; valid/ready; tready|nlb_axis_skid|nlb_axis_skid||||z3|6|4|10|10"
    "regs|nlb_regs (2-entry tables)|AXI-Lite slave: one response per request, held under back-pressure|nlb_regs|nlb_regs nlb_table_mem nlb_table_cmd|-chparam VIP_BUCKETS 2 -chparam RULES 2 -chparam POOLS 2 -chparam MAGLEV_SLOTS 2 -chparam BACKENDS 2|cutpoint t:*nlb_table_mem*; proc; cutpoint nlb_regs/w:data_next||z3|10|5|8"
    "parser|nlb_parser DATA_WIDTH=512 USER_WIDTH=32|one descriptor per frame, 9 clocks after tlast; m_user = first beat's tuser|nlb_parser|nlb_parser|-chparam DATA_WIDTH 512 -chparam USER_WIDTH 32|proc; delete -port nlb_parser/o:*|opt_clean -purge|z3|14|11|16"
    "mem_stage|nlb_mem_stage (1 channel of 3 ids, 4 slots, 8-bit rows)|packets out in the order in, with their state and read flag, whatever the memory answers|nlb_mem_stage|nlb_mem_stage nlb_fifo|-chparam STATE_W 3 -chparam ROW_BITS 2 -chparam ROW_W 8 -chparam DATA_W 8 -chparam CHANNELS 1 -chparam ADDR_W 8 -chparam ID_W 2 -chparam ROW_SHIFT 0 -chparam LANE_W 8 -chparam ENTRY_W 8 -chparam SLOTS 4|||z3|7|5|14|12"
    "rx_drop|nlb_rx_drop|every beat consumed; frames passed or dropped whole, at the first beat|nlb_rx_drop|nlb_rx_drop||||z3|12|3|12"
    "async_fifo|nlb_async_fifo WIDTH=4 DEPTH=4 SYNC_STAGES=2|two clocks: words in order, none lost or made up; full/empty/levels conservative; Gray steps|nlb_async_fifo|nlb_async_fifo|-chparam WIDTH 4 -chparam DEPTH 4 -chparam SYNC_STAGES 2||memory_map; opt_clean; clk2fflogic|z3|20|6|30"
    "async_fifo3|nlb_async_fifo WIDTH=2 DEPTH=8 SYNC_STAGES=3|two clocks, three synchroniser flops, 8 words (the same properties)|nlb_async_fifo|nlb_async_fifo|-chparam WIDTH 2 -chparam DEPTH 8 -chparam SYNC_STAGES 3||memory_map; opt_clean; clk2fflogic|z3|16|6|40"
    "frame_fifo|nlb_axis_frame_fifo DATA_WIDTH=8 DEPTH=4|frames offered whole: tvalid held from a frame's first beat to its last; beats held until taken; capacity|nlb_axis_frame_fifo|nlb_axis_frame_fifo|-chparam DATA_WIDTH 8 -chparam DEPTH 4|||z3|6|4|16|12"
    "frame_fifo_drop|nlb_axis_frame_fifo DATA_WIDTH=8 DEPTH=4 DROP_WHEN_FULL=1|the same, and tready always high (an input without tready)|nlb_axis_frame_fifo|nlb_axis_frame_fifo|-chparam DATA_WIDTH 8 -chparam DEPTH 4 -chparam DROP_WHEN_FULL 1|||z3|6|4|16|12"
    "axi_mux|nlb_axi_mux2 DATA_WIDTH=8 TURN=2|two AXI4 masters on one port: never both in flight, answers to the master that asked, write data behind its address|nlb_axi_mux2|nlb_axi_mux2|-chparam DATA_WIDTH 8 -chparam TURN 2|||z3|12|4|16"
    "err_slave|nlb_axi_err_slave DATA_WIDTH=8|AXI4 slave: one DECERR response per write address and whole burst, arlen + 1 read beats with rlast on the last; held; never stuck|nlb_axi_err_slave|nlb_axi_err_slave|-chparam DATA_WIDTH 8|||z3|12|3|20"
    "frame_arb|nlb_axis_frame_arb DATA_WIDTH=8|frames not interleaved; every beat out taken from one source, unchanged; offered beats held; turns between frames|nlb_axis_frame_arb|nlb_axis_frame_arb|-chparam DATA_WIDTH 8|||z3|8|3|10"
    "lookup|nlb_lookup (the sim profile, a 32-descriptor FIFO)|every front-stage table read of a descriptor from its bank; its bank into the memory stages|nlb_lookup|nlb_lookup nlb_flow_hash nlb_mul_const_csa nlb_mem_stage nlb_ct_learn nlb_fifo||cutpoint t:nlb_flow_hash; cutpoint t:*nlb_mem_stage*; cutpoint t:*nlb_ct_learn*; proc; cutpoint t:\$mul; delete -port nlb_lookup/o:*|memory_map; opt_clean -purge|z3|6|3|14|14"
    "host_dma|nlb_host_dma INJECT_IN_FLIGHT=2|producer never passes consumer; a descriptor used once; writes inside the posted buffer and slot, no burst across 4 KiB; inject frames in flight, read answers to whom asked|nlb_host_dma|nlb_host_dma|-chparam INJECT_IN_FLIGHT 2||memory_map; opt_clean|z3|6|3|18|12"
)

for p in "${proofs[@]}"; do
    IFS='|' read -r pname _ _ _ _ _ _ _ _ pbmc pind _ <<<"$p"
    if [ "$pbmc" -lt "$pind" ]; then
        echo "formal.sh: proof $pname: bmc depth $pbmc is below its induction depth $pind (the base case must cover it)" >&2
        exit 2
    fi
done

# ---- the mutation checks -------------------------------------------------------------------
# "name|proof[:bmc depth, when this bug needs more clocks to show than the proof's mutation
#  depth]|RTL file|assertions that must catch it (any of, space separated)|the bug|
#  sed expression (applied to a copy; last, so that it may contain |)"
mutants=(
    "frame_fifo_offer_open|frame_fifo|nlb_axis_frame_fifo.v|frame_fifo_no_bubble frame_fifo_capacity|offers a frame's beats before its last beat is in|s/^wire rd = rd_ptr_reg != commit_ptr_reg/wire rd = rd_ptr_reg != wr_ptr_reg/"
    "axi_mux_early_handover|axi_mux|nlb_axi_mux2.v|axi_mux_one_master axi_mux_r0_asked axi_mux_r1_asked|hands the port over with the owner's reads still in flight|s/^    if (other_asks \&\& (turn_reg == 8'd0 || !owner_asks) \&\& rd_out_next == 10'd0$/    if (other_asks \&\& (turn_reg == 8'd0 || !owner_asks)/"
    "axi_mux_w_before_aw|axi_mux|nlb_axi_mux2.v|axi_mux_w_after_aw|passes write data ahead of its address|s/^wire w_ok = w_due_reg != 10'd0;/wire w_ok = 1'b1;/"
    "err_slave_short_burst|err_slave|nlb_axi_err_slave.v|err_slave_r_for_request err_slave_ar_ready|ends a read burst one beat early|s/^        if (r_left_reg == 8'd0) begin/        if (r_left_reg <= 8'd1) begin/"
    "err_slave_b_before_data|err_slave|nlb_axi_err_slave.v|err_slave_b_for_request|answers a write address before its data burst is in|s/^wire b_issue = !bvalid_reg \&\& aw_count_reg != 3'd0 \&\& w_count_reg != 3'd0;/wire b_issue = !bvalid_reg \&\& aw_count_reg != 3'd0;/"
    "frame_arb_switch_mid_frame|frame_arb|nlb_axis_frame_arb.v|frame_arb_no_interleave|picks a source afresh at every beat (interleaves frames)|s/^wire grant1 = lock_reg ? grant1_reg : pick1;/wire grant1 = pick1;/"
    "frame_arb_unlock_on_offer|frame_arb|nlb_axis_frame_arb.v|frame_arb_hold frame_arb_no_interleave|locks only once a beat is taken (an offered beat can be replaced)|s/^        lock_reg <= !(m_axis_tready \&\& m_axis_tlast);/        lock_reg <= m_axis_tready \&\& !m_axis_tlast;/"
    "frame_arb_no_turns|frame_arb|nlb_axis_frame_arb.v|frame_arb_turns|always prefers source 1 between frames|s/^wire pick1 = s1_axis_tvalid \&\& (!s0_axis_tvalid || !last1_reg);/wire pick1 = s1_axis_tvalid;/"
    "frame_fifo_drop_keeps_ready|frame_fifo_drop|nlb_axis_frame_fifo.v|frame_fifo_no_backpressure|refuses beats when full although the input has no tready|s/^assign s_axis_tready = DROP_WHEN_FULL != 0 || /assign s_axis_tready = /"
    "fifo_ready_when_full|fifo4|nlb_fifo.v|fifo_ready|takes a beat while full and drops it|s/^assign s_ready = !full;/assign s_ready = 1'b1;/"
    "fifo_write_lost|fifo4|nlb_fifo.v|fifo_beat_order fifo_count|drops the beat written while a word is read|s/^    if (wr) begin/    if (wr \&\& !rd) begin/"
    "fifo_refill_on_stall|fifo4|nlb_fifo.v|fifo_hold fifo_beat_order|replaces the offered word while the sink stalls|s/^wire rd = !empty \&\& (!out_valid_reg || m_ready);/wire rd = !empty;/"
    "fifo_read_old_slot|fifo4|nlb_fifo.v|fifo_beat_order|reads the wrong slot (reorders beats)|s/out_reg <= mem\[rd_ptr_reg\[AW-1:0\]\];/out_reg <= mem[wr_ptr_reg[AW-1:0]];/"
    "fifo_valid_drops|fifo4|nlb_fifo.v|fifo_hold fifo_beat_order|drops m_valid before the word is taken|s/^    end else if (take) begin/    end else if (!m_ready) begin/"
    "fifo_count_on_read|fifo4|nlb_fifo.v|fifo_count|counts a refill of the output register as a beat out|s/- {{AW{1'b0}}, take};/- {{AW{1'b0}}, rd};/"
    "skid_lose_caught_beat|skid|nlb_axis_skid.v|skid_beat_order skid_capacity skid_ready|drops the skid beat instead of sending it|s/^        skid_valid_next = 1'b0;/        skid_valid_next = 1'b0; out_valid_next = 1'b0;/"
    "skid_ready_unregistered|skid|nlb_axis_skid.v|skid_ready skid_beat_order|stays ready with both registers full|s/^assign s_ready_next = m_axis_tready || /assign s_ready_next = 1'b1 || /"
    "skid_overwrite_output|skid|nlb_axis_skid.v|skid_hold skid_beat_order|loads the output register while the sink stalls|s/^        if (m_axis_tready || !out_valid_reg) begin/        if (1'b1) begin/"
    "skid_duplicate|skid|nlb_axis_skid.v|skid_no_phantom skid_beat_order|sends a beat that never came in|s/^        out_valid_next = skid_valid_reg;/        out_valid_next = 1'b1;/"
    "regs_double_b|regs|nlb_regs.v|axil_b_for_request|keeps BVALID after its handshake (a second response)|s/^    bvalid_next = bvalid_reg \&\& !s_axil_bready;/    bvalid_next = bvalid_reg;/"
    "regs_b_dropped|regs|nlb_regs.v|axil_b_hold|withdraws BVALID before BREADY|s/^    bvalid_next = bvalid_reg \&\& !s_axil_bready;/    bvalid_next = 1'b0;/"
    "regs_rdata_moves|regs|nlb_regs.v|axil_r_hold axil_r_open axil_r_for_request|overwrites RDATA while RREADY is low|s/^wire rd_slot = ar_full_reg \&\& !ext_rwait_reg \&\& (!rvalid_reg || s_axil_rready);/wire rd_slot = ar_full_reg \&\& !ext_rwait_reg;/"
    "parser_bank_live|parser|nlb_parser.v|parser_first_user|takes each beat's tuser (the live bank), not the first beat's|s/^wire \[USER_WIDTH-1:0\] user_now = beat_idx_reg == {BEAT_IDX_BITS{1'b0}} ? s_axis_tuser : user_reg;/wire [USER_WIDTH-1:0] user_now = s_axis_tuser;/"
    "parser_lost_descriptor|parser|nlb_parser.v|parser_one_per_frame|loses the descriptor of a frame right behind another|s/^    s1_valid_reg <= beat \&\& s_axis_tlast;/    s1_valid_reg <= beat \&\& s_axis_tlast \&\& !s1_valid_reg;/"
    "mem_stage_wrong_slot|mem_stage|nlb_mem_stage.v|mem_stage_order|reads the leaving packet's state from the newest slot|s/^        r1_state_reg <= state_mem\[head\];/        r1_state_reg <= state_mem[tail];/"
    "mem_stage_skip|mem_stage|nlb_mem_stage.v|mem_stage_order mem_stage_no_phantom|moves the head on twice for a packet that leaves|s/^        head_reg <= head_reg + 1'b1;/        head_reg <= head_reg + 2'd2;/"
    "mem_stage_drain_clears_new_row|mem_stage|nlb_mem_stage.v|mem_stage_read_kept|clears a row completed in its channel's drain clock (a one-beat read lost)|s/^                done_reg\[c\] <= 1'b1;/                done_reg[c] <= !drained[c];/"
    "mem_stage_record_stuck|mem_stage|nlb_mem_stage.v|mem_stage_record_freed|waits for the head to equal the recorded tail, which later packets may move it past (the record never frees)|s/^    if (rec_counting_reg \&\& (rec_reached_reg || head_reg == rec_tail_reg)) begin/    if (rec_counting_reg \&\& head_reg == rec_tail_reg) begin/"
    "mem_stage_bulk_again|mem_stage|nlb_mem_stage.v|mem_stage_bulk_once|keeps a bulk read waiting after it went out (it goes out again and again)|s/^    if (|bk_go) begin/    if (1'b0) begin/"
    "rx_drop_cuts_frames|rx_drop|nlb_rx_drop.v|rx_drop_whole_frame|decides every beat by the room of its clock (cuts frames)|s/^assign m_dropping = s_valid \&\& (first_reg ? !room : dropping_reg);/assign m_dropping = s_valid \&\& !room;/"
    "rx_drop_first_lost|rx_drop|nlb_rx_drop.v|rx_drop_first rx_drop_whole_frame rx_drop_first_by_room|loses track of where frames start|s/^        first_reg <= s_last;/        first_reg <= 1'b0;/"
    "host_dma_event_past_host|host_dma|nlb_host_dma.v|host_dma_no_pass_ev host_dma_in_slot|writes an event into a slot the host did not give|s/^            if (!ev_ring_full) begin/            if (1'b1) begin/"
    "host_dma_slot_mask|host_dma:14|nlb_ring_mask.vh|host_dma_in_slot host_dma_in_slot_cpl host_dma_no_pass host_dma_no_pass_ev|takes 2^log2 slots' worth of index bits (a ring's mask of slots, not of index bits)|s/^            ring_mask\[i\] = {28'd0, log2} > i;/            ring_mask[i] = (i >> log2) == 0;/"
    "host_dma_stale_slot|host_dma|nlb_host_dma.v|host_dma_in_slot|takes an event while its slot's address summed ahead is stale (the clock after a completion)|s/ \&\& ev_work \&\& !i_first \&\& lo_fresh_reg;/ \&\& ev_work \&\& !i_first;/"
    "host_dma_burst_4k|host_dma|nlb_host_dma.v|host_dma_4k host_dma_4k_rd|lets a frame's burst run across a 4 KiB boundary|s/^wire \[6:0\]   burst_n = .*/wire [6:0]   burst_n = p_beats_reg < 9'd64 ? p_beats_reg[6:0] : 7'd64;/"
    "host_dma_inject_unposted|host_dma|nlb_host_dma.v|host_dma_inj_desc host_dma_no_pass_inj|reads an inject descriptor the host did not post|s/^wire i_work = usable_inject \&\& i_posted_reg \&\& inject_room \&\& !rq_full/wire i_work = usable_inject \&\& inject_room \&\& !rq_full/"
    "host_dma_inject_cache_unposted|host_dma:16|nlb_host_dma.v|host_dma_inj_desc_posted|takes a descriptor from the cached line that the host had not posted when the line was read|s/^        \&\& ic_dev_off < ic_hi_reg - ic_first_reg;/        ;/"
    "host_dma_punt_cpl_unanswered|host_dma:14|nlb_host_dma.v|host_dma_desc_once host_dma_in_slot_cpl|moves the punt ring's index once the completion is written, before its answer|s/^    if (cb_wait_reg \&\& b_hs) begin/    if (cb_wait_reg) begin/"
    "host_dma_line_behind_frames|host_dma:16|nlb_host_dma.v|host_dma_line_alone|reads an inject descriptor line while frames' lines are still on their way (its answer would come behind theirs)|s/^    \&\& (ic_hit_reg || rq_empty);/    ;/"
    "host_dma_inject_extra_line|host_dma:14|nlb_host_dma.v|host_dma_inj_in_frame|reads one line past a frame whose length is a multiple of 64|s/^wire \[8:0\]   idesc_beats = .*/wire [8:0]   idesc_beats = idesc_len[14-1:6] + 9'd1;/"
    "afifo_binary_pointer|async_fifo|nlb_async_fifo.v|afifo_gray_step_wr afifo_gray_step_rd|synchronises the binary pointers (no Gray code)|s/^    to_gray = b ^ (b >> 1);/    to_gray = b;/; s/^            from_gray\[i\] = from_gray\[i + 1\] ^ g\[i\];/            from_gray[i] = g[i];/"
    "afifo_full_off_by_one|async_fifo|nlb_async_fifo.v|afifo_room afifo_full afifo_s_level afifo_ptr_diff afifo_order|calls the memory full one word late (overwrites an unread word)|s/^    full_reg <= s_level_next == FULL_LEVEL;/    full_reg <= s_level_next == FULL_LEVEL + 1'b1;/"
    "afifo_m_level_double|async_fifo|nlb_async_fifo.v|afifo_m_level|counts a word moved into the output register twice in m_level|s/^wire \[PW-1:0\] m_level_next = wr_seen_next - rd_bin_next /wire [PW-1:0] m_level_next = wr_seen_next - rd_bin_reg /"
    "afifo_stale_sync_after_reset|async_fifo:24|nlb_async_fifo.v|afifo_room afifo_full afifo_s_level afifo_ptr_diff afifo_order afifo_no_phantom|keeps the read pointer's synchroniser through a reset (the write side sees the old pointer)|s/^        rd_sync_reg <= {(PW\*SYNC_STAGES){1'b0}};/        rd_sync_reg <= rd_sync_reg;/"
    "lookup_vip_bank_head|lookup|nlb_lookup.v|lookup_vip_bank|reads the VIP table in the bank of the descriptor at the FIFO head|s/^assign vip_rd_bank = sa\[F_BANK\];/assign vip_rd_bank = d_bank;/"
    "lookup_rule_bank_live|lookup|nlb_lookup.v|lookup_rule_bank|reads the rule table in the bank of the descriptor written now|s/^assign rule_rd_bank = se\[F_BANK\];/assign rule_rd_bank = s_user[0];/"
)

# ---- options --------------------------------------------------------------------------------
run_proofs=1
run_mutants=1
only=()
for arg in "$@"; do
    case "$arg" in
        --no-mutants) run_mutants=0 ;;
        --mutants) run_proofs=0 ;;
        --list)
            for p in "${proofs[@]}"; do IFS='|' read -r n b s _ <<<"$p"; printf 'proof   %-8s %s: %s\n' "$n" "$b" "$s"; done
            for m in "${mutants[@]}"; do IFS='|' read -r n p _ _ w _ <<<"$m"; printf 'mutant  %-24s (%s) %s\n' "$n" "$p" "$w"; done
            exit 0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "formal.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
        *) only+=("$arg") ;;
    esac
done
for o in "${only[@]}"; do
    found=0
    for p in "${proofs[@]}"; do [ "${p%%|*}" = "$o" ] && found=1; done
    if [ "$found" = 0 ]; then
        echo "formal.sh: no proof named '$o' (see --list)" >&2
        exit 2
    fi
done
selected() {
    [ "${#only[@]}" -eq 0 ] && return 0
    local o
    for o in "${only[@]}"; do [ "$o" = "$1" ] && return 0; done
    return 1
}

need_tool() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "formal.sh: $1 not found (apt-get install $2)" >&2
        exit 2
    fi
}
need_tool "$yosys" yosys
need_tool "$smtbmc" yosys
for p in "${proofs[@]}"; do
    IFS='|' read -r _ _ _ _ _ _ _ _ solver _ <<<"$p"
    need_tool "$solver" "$solver"
done
need_tool timeout coreutils

# ---- running ----------------------------------------------------------------------------------
rows=()
failures=0
started=$SECONDS

row() { # block set method depth result seconds
    rows+=("$(printf '%-30s | %-58s | %-9s | %5s | %-34s | %7s' "$@")")
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Yosys: the SMT2 model of one proof. $1 proof line, $2 directory, $3 RTL directory, $4 extra
# read_verilog defines.
build_model() {
    local name block set top files params extra solver
    IFS='|' read -r name block set top files params extra post solver _ <<<"$1"
    local dir="$2" rtl_dir="$3" defines="$4" paths=() f
    for f in $files; do paths+=("$rtl_dir/$f.v"); done
    mkdir -p "$dir"
    "$yosys" -q -l "$dir/yosys.log" -p "
        read_verilog -defer -sv -formal $defines -I$hw/formal -I$rtl_dir ${paths[*]};
        hierarchy -check -top $top $params;
        $extra;
        prep -top $top;
        $post;
        async2sync;
        dffunmap;
        write_smt2 -wires $dir/model.smt2" >/dev/null 2>&1
}

# yosys-smtbmc: $1 solver, $2 log, then its arguments. Sets smt_status (PASSED, FAILED,
# TIMEOUT, ERROR) and smt_failed (assertion names).
smt() {
    local solver="$1" log="$2" rc=0
    shift 2
    timeout "$limit" "$smtbmc" -s "$solver" --unroll --noincr "$@" >"$log" 2>&1 || rc=$?
    # smtbmc draws a progress spinner (backspaces) while the solver works: keep its messages.
    sed -n "s/.*\(##  .*\)/\1/p" "$log" >"$log.txt"
    smt_failed="$(sed -n 's/.*Assert failed in [^:]*: \([^ ]*\).*/\1/p' "$log.txt" | sort -u | tr '\n' ' ')"
    if [ "$rc" = 124 ]; then
        smt_status=TIMEOUT
    elif grep -q 'Status: PASSED' "$log.txt"; then
        smt_status=PASSED
    elif grep -q 'Status: FAILED' "$log.txt"; then
        smt_status=FAILED
    else
        smt_status=ERROR
    fi
}

# A proof's checks as jobs, NLB_FORMAL_JOBS at a time (the number of CPUs unless set): first
# every selected proof's model, then every bmc, induction and cover run, the longest (the
# host DMA engine's and the lookup's, last in the list) first. Each job writes its table row
# to a file of its proof's directory; the rows are printed in the list's order.
njobs="${NLB_FORMAL_JOBS:-$(nproc 2>/dev/null || echo 1)}"
slot() { while [ "$(jobs -rp | wc -l)" -ge "$njobs" ]; do wait -n || true; done; }
# One row into a file: $1 file, then the row's fields.
row_file() { local f="$1"; shift; printf '%-30s | %-58s | %-9s | %5s | %-34s | %7s\n' "$@" >"$f"; }

# Job: the model of proof $1 into its directory; an empty model.smt2 is not left behind on failure.
model_job() {
    local p="$1" name block set dir t0
    IFS='|' read -r name block set _ _ _ _ _ solver _ <<<"$p"
    dir="$out/$name"
    t0="$(now)"
    if build_model "$p" "$dir" "$hw/rtl" ""; then
        row_file "$dir/row.0" "$block" "$set" "model" "" "ok ($solver)" "$(since "$t0")"
    else
        rm -f "$dir/model.smt2"
        row_file "$dir/row.0" "$block" "$set" "model" "" "ERROR (Yosys: $dir/yosys.log)" "$(since "$t0")"
        echo 1 >"$dir/failed.0"
    fi
}

# Job: check $2 (bmc, induction, cover) of proof $1 on its model.
check_job() {
    local p="$1" method="$2" name block set solver bmc_depth ind_depth cover_depth dir t0 result
    local k depth flags vcd
    IFS='|' read -r name block set _ _ _ _ _ solver bmc_depth ind_depth cover_depth _ <<<"$p"
    dir="$out/$name"
    case "$method" in
        bmc) k=1; depth="$bmc_depth"; flags=(-t "$depth"); vcd=bmc.vcd ;;
        induction) k=2; depth="$ind_depth"; flags=(-i -t "$depth"); vcd=induction.vcd ;;
        cover) k=3; depth="$cover_depth"; flags=(-c -t "$depth"); vcd='cover%.vcd' ;;
    esac
    t0="$(now)"
    smt "$solver" "$dir/$method.log" "${flags[@]}" --dump-vcd "$dir/$vcd" "$dir/model.smt2"
    result="$smt_status"
    case "$method/$smt_status" in
        induction/PASSED) result="PROVEN (unbounded)" ;;
        cover/PASSED)
            result="all $(grep -c 'Reached cover statement' "$dir/cover.log.txt" || true) reached" ;;
        cover/FAILED)
            result="UNREACHED: $(sed -n 's/.*Unreached cover statement at \([^ ]*\).*/\1/p' \
                "$dir/cover.log.txt" | tr '\n' ' ')" ;;
        */FAILED) result="FAILED: $smt_failed($vcd)" ;;
    esac
    [ "$smt_status" = PASSED ] || echo 1 >"$dir/failed.$k"
    row_file "$dir/row.$k" "$block" "$set" "$method" "$depth" "$result" "$(since "$t0")"
}

if [ "$run_proofs" = 1 ]; then
    chosen=()
    for p in "${proofs[@]}"; do selected "${p%%|*}" && chosen+=("$p"); done
    for p in "${chosen[@]}"; do
        rm -rf "${out:?}/${p%%|*}"
        mkdir -p "$out/${p%%|*}"
        slot
        model_job "$p" &
    done
    wait
    for ((i = ${#chosen[@]} - 1; i >= 0; i--)); do
        p="${chosen[$i]}"
        [ -s "$out/${p%%|*}/model.smt2" ] || continue
        for method in bmc induction cover; do
            slot
            check_job "$p" "$method" &
        done
    done
    wait
    for p in "${chosen[@]}"; do
        for k in 0 1 2 3; do
            f="$out/${p%%|*}/row.$k"
            [ -f "$f" ] && rows+=("$(cat "$f")")
            [ -f "$out/${p%%|*}/failed.$k" ] && failures=$((failures + 1))
        done
    done
fi

if [ "$run_mutants" = 1 ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    for m in "${mutants[@]}"; do
        IFS='|' read -r mname proof file expect what expr <<<"$m"
        own_depth=""
        if [[ "$proof" == *:* ]]; then
            own_depth="${proof#*:}"
            proof="${proof%%:*}"
        fi
        selected "$proof" || continue
        pline=""
        for p in "${proofs[@]}"; do [ "${p%%|*}" = "$proof" ] && pline="$p"; done
        IFS='|' read -r _ block _ _ _ _ _ _ solver bmc_depth _ _ mutant_depth <<<"$pline"
        bmc_depth="${own_depth:-${mutant_depth:-$bmc_depth}}"
        dir="$out/mutant-$mname"
        rm -rf "$dir" "$tmp/rtl"
        cp -r "$hw/rtl" "$tmp/rtl"
        t0="$(now)"
        if ! sed -i "$expr" "$tmp/rtl/$file" 2>"$tmp/sed.err"; then
            row "$block" "mutant $mname: $what" "bmc" "$bmc_depth" "ERROR: sed $(head -c 60 "$tmp/sed.err")" "$(since "$t0")"
            failures=$((failures + 1))
            continue
        fi
        if cmp -s "$hw/rtl/$file" "$tmp/rtl/$file"; then
            row "$block" "mutant $mname: $what" "bmc" "$bmc_depth" "STALE: sed changed nothing" "$(since "$t0")"
            failures=$((failures + 1))
            continue
        fi
        mkdir -p "$dir"
        diff -u "$hw/rtl/$file" "$tmp/rtl/$file" >"$dir/mutation.diff" || true
        if ! build_model "$pline" "$dir" "$tmp/rtl" "-DFORMAL_SPEC_ONLY"; then
            row "$block" "mutant $mname: $what" "model" "" "ERROR (Yosys: $dir/yosys.log)" "$(since "$t0")"
            failures=$((failures + 1))
            continue
        fi
        smt "$solver" "$dir/bmc.log" -t "$bmc_depth" --dump-vcd "$dir/bmc.vcd" "$dir/model.smt2"
        caught=""
        for e in $expect; do
            case " $smt_failed" in *" $e "*) caught="$caught$e " ;; esac
        done
        if [ "$smt_status" = FAILED ] && [ -n "$caught" ] && [ -s "$dir/bmc.vcd" ]; then
            result="caught: ${caught% } (trace)"
        elif [ "$smt_status" = FAILED ]; then
            result="WRONG: ${smt_failed% }"
            failures=$((failures + 1))
        else
            result="MISSED ($smt_status)"
            failures=$((failures + 1))
        fi
        row "$block" "mutant $mname: $what" "bmc" "$bmc_depth" "$result" "$(since "$t0")"
    done
fi

printf '\n%-30s | %-58s | %-9s | %5s | %-34s | %7s\n' block "property set" method depth result seconds
printf '%s\n' "$(printf '%.0s-' {1..160})"
printf '%s\n' "${rows[@]}"
echo
echo "formal: ${#rows[@]} checks, $failures failed in $((SECONDS - started)) s (yosys $("$yosys" -V | awk '{print $2}'), $(z3 --version) at $(command -v z3); traces and logs in $out)"
[ "$failures" -eq 0 ]
