// Formal properties of nlb_mem_stage, included inside the module under `ifdef FORMAL (so that
// they can name its registers) and proven by hw/scripts/formal.sh; docs/verification.md
// "Formal proofs" lists what is proven and how.
//
// Results in packet order: for every n, the n-th packet out (m_valid) carries the state and
// the read flag of the n-th packet in (s_valid), whatever the memory answers and when (every
// AXI input is free: ids, data, last, ready flags, in any clock, also ids that were never
// issued) and whatever the command engine asks (c_*, and the bulk reads b_*: free). f_idx is
// one arbitrary packet number (anyconst); its state is recorded as it enters. Assumed: the caller keeps to its
// credits (no packet enters while SLOTS packets are between entering and m_valid), as
// nlb_lookup's counts do. mem_stage_inv_* say where the tracked packet is (a slot, the RAM
// read register r1, the output register r2), which makes the proof inductive.
//
// The write record is freed: once a write has completed, it holds back later writes only until
// the packets already in the stage have left and its margin has run: with the stage empty, a
// counting record is free within 3 clocks (mem_stage_record_freed), whatever packets came and
// went meanwhile.

localparam F_CW = SB + 2;

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end

reg  [F_CW-1:0] f_in = {F_CW{1'b0}};   // packets in
reg  [F_CW-1:0] f_ret = {F_CW{1'b0}};  // packets that left the slots (head moves)
reg  [F_CW-1:0] f_out = {F_CW{1'b0}};  // packets out (m_valid)
(* anyconst *) reg [F_CW-1:0] f_idx;
wire [F_CW-1:0] f_inside = f_in - f_out;      // packets between entering and m_valid
reg  [STATE_W-1:0] f_state;
reg                f_read;

always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
    // The caller's credits.
    if (s_valid) begin
        assume(f_inside < SLOTS);
    end
end

always @(posedge clk) begin
    if (s_valid) begin
        f_in <= f_in + 1'b1;
        if (f_in == f_idx) begin
            f_state <= s_state;
            f_read <= s_read;
        end
    end
    if (retire) begin
        f_ret <= f_ret + 1'b1;
    end
    if (m_valid) begin
        f_out <= f_out + 1'b1;
    end
    if (rst) begin
        f_in <= {F_CW{1'b0}};
        f_ret <= {F_CW{1'b0}};
        f_out <= {F_CW{1'b0}};
    end
end

always @* begin
    if (!rst && f_past_valid) begin
        // The tracked packet leaves as it entered: no loss, duplicate or reorder.
        if (m_valid && f_out == f_idx) begin
            mem_stage_order: assert(m_state == f_state && m_read == f_read);
        end
        // Nothing leaves that did not enter.
        if (m_valid) begin
            mem_stage_no_phantom: assert(f_in != f_out);
        end
    end
end

// No read is lost: a burst's last beat taken completes its row, which waits in done_reg until
// it is drained (a channel takes beats in its drain clock, so a one-beat burst can complete in
// the clock the previous row is drained: its done must stay set).
reg [CHANNELS-1:0] f_completed = {CHANNELS{1'b0}};
always @(posedge clk) begin
    f_completed <= m_axi_rvalid & m_axi_rready & m_axi_rlast;
    if (rst) begin
        f_completed <= {CHANNELS{1'b0}};
    end
end
integer f_ch;
always @* begin
    if (!rst && f_past_valid) begin
        for (f_ch = 0; f_ch < CHANNELS; f_ch = f_ch + 1) begin
            if (f_completed[f_ch]) begin
                mem_stage_read_kept: assert(done_reg[f_ch]);
            end
        end
    end
end

wire [F_CW-1:0] f_held = f_in - f_ret;        // packets in the slots
wire [F_CW-1:0] f_piped = f_ret - f_out;      // in r1 / r2
wire [F_CW-1:0] f_pos = f_idx - f_ret;        // the tracked one's place among the slots
wire [SB-1:0]   f_slot = f_idx[SB-1:0];

// Clocks in a row the record has been counting with the stage empty.
reg [2:0] f_rec_empty = 3'd0;
always @(posedge clk) begin
    f_rec_empty <= rec_counting_reg && !occupied
        ? (f_rec_empty == 3'd7 ? 3'd7 : f_rec_empty + 3'd1) : 3'd0;
    if (rst) begin
        f_rec_empty <= 3'd0;
    end
end
always @* begin
    if (!rst && f_past_valid && rec_counting_reg) begin
        mem_stage_record_freed: assert(f_rec_empty <= 3'd2);
    end
end

`ifndef FORMAL_SPEC_ONLY
always @* begin
    if (!rst && f_past_valid) begin
        // The record: counting only after its write's response, and the recorded tail between
        // the head and the tail until the head has reached it.
        mem_stage_inv_rec_busy: assert((!rec_counting_reg || (rec_busy_reg
            && (w_state_reg == W_IDLE || w_state_reg == W_WAIT)))
            && (w_state_reg == W_IDLE || w_state_reg == W_WAIT
                || (rec_busy_reg && !rec_counting_reg)));
        if (rec_counting_reg && !rec_reached_reg) begin
            mem_stage_inv_rec_tail: assert(rec_tail_reg - head_reg <= tail_reg - head_reg
                && f_rec_empty == 3'd0);
        end
        if (rec_counting_reg && rec_reached_reg) begin
            mem_stage_inv_rec_margin: assert({1'b0, f_rec_empty} + {1'b0, rec_margin_reg}
                <= 3'd2);
        end
        if (rec_counting_reg && !rec_reached_reg) begin
            mem_stage_inv_rec_margin2: assert(rec_margin_reg == 2'd2);
        end
        mem_stage_inv_count: assert(f_inside <= SLOTS);
        mem_stage_inv_held: assert(f_held <= SLOTS && f_piped <= 2);
        mem_stage_inv_tail: assert(tail_reg == f_in[SB:0]);
        mem_stage_inv_head: assert(head_reg == f_ret[SB:0]);
        mem_stage_inv_pipe: assert(f_piped == {{(F_CW-2){1'b0}}, r1_valid_reg}
            + {{(F_CW-2){1'b0}}, r2_valid_reg});
        if (f_pos < f_held) begin
            mem_stage_inv_slot: assert(state_mem[f_slot] == f_state
                && read_reg[f_slot] == f_read);
        end
        if (r2_valid_reg && f_idx == f_out) begin
            mem_stage_inv_r2: assert(r2_state_reg == f_state && r2_read_reg == f_read);
        end
        if (r1_valid_reg && f_idx == f_ret - 1'b1) begin
            mem_stage_inv_r1: assert(r1_state_reg == f_state && r1_read_reg == f_read);
        end
    end
end
`endif

// Each bulk read taken (b_rd_valid while b_rd_ready) goes out on a memory port exactly once:
// the reads issued plus the one waiting are the reads taken.
reg [7:0] f_bk_taken = 8'd0;
reg [7:0] f_bk_issued = 8'd0;
always @(posedge clk) begin
    if (b_rd_valid && b_rd_ready) begin
        f_bk_taken <= f_bk_taken + 8'd1;
    end
    if (|bk_go) begin
        f_bk_issued <= f_bk_issued + 8'd1;
    end
    if (rst) begin
        f_bk_taken <= 8'd0;
        f_bk_issued <= 8'd0;
    end
end
always @* begin
    if (!rst && f_past_valid) begin
        mem_stage_bulk_once: assert(f_bk_issued + {7'd0, bk_pend_reg} == f_bk_taken);
    end
end

// Reachable: the tracked packet leaves after a packet that entered after it had its row back
// first (so reads came back out of order), with a read of its own.
reg f_later_done = 1'b0;
always @(posedge clk) begin
    if (((drain_e_pipe && drain_e_tag != f_slot) || (drain_o_pipe && drain_o_tag != f_slot))
            && f_pos < f_held && pend_reg[f_slot]) begin
        f_later_done <= 1'b1;
    end
    if (rst) begin
        f_later_done <= 1'b0;
    end
end
always @* begin
    if (!rst && f_past_valid) begin
        mem_stage_cover_out_of_order: cover(m_valid && f_out == f_idx && f_read
            && f_later_done);
    end
end
