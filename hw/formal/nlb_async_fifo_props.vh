// Formal properties of nlb_async_fifo, included inside the module under `ifdef FORMAL and
// proven by hw/scripts/formal.sh (docs/verification.md "Formal proofs").
//
// Two clocks: the model is built with Yosys' clk2fflogic, so time advances in steps of a global
// clock (f_gclk) and s_clk and m_clk are free inputs: in any step either clock may rise, both,
// or neither, so every ratio, drift and pause (one clock stopped for any number of the other's
// edges) is covered. Registers of a domain change only at its rising edges. The pointer
// synchronisers' first flops see each bit of the other side's Gray pointer as it was in this
// step or the one before (f_wr_skew / f_rd_skew in the RTL: a bit changing at the sampling edge
// may be caught either way); with a binary pointer that yields pointers that never existed.
//
// Reset (the rule the module header documents): both resets rise in the same step (and start
// asserted), and neither falls before each side has had a reset edge after the other side's
// first one (so each side's synchronisers are cleared after the other's pointer went back to
// zero); they fall in any order. f_ok: that has happened since the last rise (the properties
// speak of states from there on; before it the FIFO is being reset).
//
// The tracked word: words entering on s_valid && s_ready (at s_clk edges) and leaving on
// m_valid && m_ready (at m_clk edges) are numbered since reset; f_idx is one arbitrary number
// (anyconst), its data is recorded as it enters, and whenever the word on m_data is that number
// it must carry that data: nothing lost, duplicated, reordered or changed, for every word. The
// counters wrap at 2^F_CW, more than the DEPTH + 1 words the FIFO can hold.
//
// afifo_* are the specification (at the ports, plus the pointer rules: Gray steps of one bit and
// a pointer difference within DEPTH); afifo_inv_* (under `ifndef FORMAL_SPEC_ONLY) tie the
// specification's bookkeeping to the registers and the synchronisers, which makes k-induction
// succeed. The mutation checks compile with FORMAL_SPEC_ONLY.

localparam F_CW = AW + 2;

(* gclk *) reg f_gclk;

// ---- the environment: resets ---------------------------------------------------------------
reg f_started = 1'b0;
reg f_s_rst_last = 1'b0;
reg f_m_rst_last = 1'b0;
// Toggles at every rise of the resets; each side copies it at its reset edges (f_*_gen), and
// at its reset edges after the other side's first one (f_*_gen2).
reg f_gen = 1'b0;
reg f_s_gen = 1'b0;
reg f_m_gen = 1'b0;
reg f_s_gen2 = 1'b0;
reg f_m_gen2 = 1'b0;
reg f_ok_last = 1'b0;

wire f_s_rise = s_rst && !f_s_rst_last;
wire f_m_rise = m_rst && !f_m_rst_last;
wire f_gen_now = f_gen ^ f_s_rise;
wire f_s_done = f_s_gen == f_gen_now;
wire f_m_done = f_m_gen == f_gen_now;
wire f_reset_done = f_s_gen2 == f_gen_now && f_m_gen2 == f_gen_now;
wire f_ok = f_ok_last && f_reset_done;

always @(posedge f_gclk) begin
    f_started <= 1'b1;
    f_s_rst_last <= s_rst;
    f_m_rst_last <= m_rst;
    f_gen <= f_gen_now;
    f_ok_last <= f_reset_done;
    f_wr_gray_last <= wr_gray_reg;
    f_rd_gray_last <= rd_gray_reg;
end
always @(posedge s_clk) begin
    if (s_rst) begin
        f_s_gen <= f_gen_now;
        if (f_m_done) begin
            f_s_gen2 <= f_gen_now;
        end
    end
end
always @(posedge m_clk) begin
    if (m_rst) begin
        f_m_gen <= f_gen_now;
        if (f_s_done) begin
            f_m_gen2 <= f_gen_now;
        end
    end
end

always @* begin
    if (!f_started) begin
        assume(s_rst && m_rst);
    end else begin
        assume(f_s_rise == f_m_rise);
        if ((f_s_rst_last && !s_rst) || (f_m_rst_last && !m_rst)) begin
            assume(f_reset_done);
        end
    end
end

// ---- the tracked word --------------------------------------------------------------------------
(* anyconst *) reg [F_CW-1:0] f_idx;
reg [F_CW-1:0]  f_in = {F_CW{1'b0}};
reg [F_CW-1:0]  f_out = {F_CW{1'b0}};
reg [WIDTH-1:0] f_data;
// The reset sampled at each side's last edge.
reg             f_s_rst_q = 1'b1;
reg             f_m_rst_q = 1'b1;

always @(posedge s_clk) begin
    f_s_rst_q <= s_rst;
    if (s_valid && s_ready) begin
        f_in <= f_in + 1'b1;
        if (f_in == f_idx) begin
            f_data <= s_data;
        end
    end
    if (s_rst) begin
        f_in <= {F_CW{1'b0}};
    end
end
always @(posedge m_clk) begin
    f_m_rst_q <= m_rst;
    if (m_valid && m_ready) begin
        f_out <= f_out + 1'b1;
    end
    if (m_rst) begin
        f_out <= {F_CW{1'b0}};
    end
end

wire [F_CW-1:0] f_inside = f_in - f_out;
// Words in the memory (not on the output).
wire [F_CW-1:0] f_queued = f_inside - {{(F_CW-1){1'b0}}, m_valid};
wire [PW-1:0]   f_words = wr_bin_reg - rd_bin_reg;

always @* begin
    if (f_ok) begin
        // The word on the output is the one numbered f_out, with the data it entered with.
        if (m_valid && f_out == f_idx) begin
            afifo_order: assert(m_data == f_data);
        end
        // Never claims data that is not there.
        if (m_valid) begin
            afifo_no_phantom: assert(f_inside != {F_CW{1'b0}});
        end
        afifo_capacity: assert(f_inside <= DEPTH + 1);
        // Never claims room that is not there; full exactly when the level says so.
        if (s_ready) begin
            afifo_room: assert(f_queued < DEPTH);
        end
        afifo_full: assert(s_ready == (s_level != DEPTH));
        // Levels: the write side's an upper bound on the words in the memory, the read side's
        // a lower bound on the words held.
        afifo_s_level: assert(s_level <= DEPTH && {{(F_CW-PW){1'b0}}, s_level} >= f_queued);
        afifo_m_level: assert({{(F_CW-PW){1'b0}}, m_level} <= f_inside
            && m_level >= {{AW{1'b0}}, m_valid});
        // The pointers: never more than DEPTH apart; never a write when full or a read of an
        // empty memory.
        afifo_ptr_diff: assert(f_words <= DEPTH);
        if (wr && !s_rst) begin
            afifo_write_room: assert(f_words < DEPTH);
        end
        if (rd) begin
            afifo_read_word: assert(f_words != {PW{1'b0}});
        end
    end
    // Gray pointers change by one bit per update (a reset edge excepted).
    if (!f_s_rst_q && wr_gray_reg != f_wr_gray_last) begin
        afifo_gray_step_wr: assert($onehot(wr_gray_reg ^ f_wr_gray_last));
    end
    if (!f_m_rst_q && rd_gray_reg != f_rd_gray_last) begin
        afifo_gray_step_rd: assert($onehot(rd_gray_reg ^ f_rd_gray_last));
    end
end

// Valid/ready: an offered word stays offered, unchanged, until taken.
reg             f_m_held = 1'b0;
reg [WIDTH-1:0] f_m_held_data;
always @(posedge m_clk) begin
    f_m_held <= m_valid && !m_ready && !m_rst;
    f_m_held_data <= m_data;
end
always @* begin
    if (f_m_held) begin
        afifo_hold: assert(m_valid && m_data == f_m_held_data);
    end
end

`ifndef FORMAL_SPEC_ONLY
// Distances along each pointer's path, oldest view last. Write pointer into the read domain,
// counted ahead of the read pointer: the read pointer <= what the read side has converted <=
// the synchroniser's stages (older to newer) <= last step's write pointer <= the write pointer.
// Read pointer into the write domain, counted back from the write pointer likewise.
wire [PW-1:0] f_wr_last_bin = from_gray(f_wr_gray_last);
wire [PW-1:0] f_rd_last_bin = from_gray(f_rd_gray_last);
reg  [PW*SYNC_STAGES-1:0] f_wr_stage_ahead;
reg  [PW*SYNC_STAGES-1:0] f_rd_stage_back;
// Each stage no newer than the one before it.
reg                       f_stages_ordered;
integer f_i;
always @* begin
    f_stages_ordered = 1'b1;
    for (f_i = 0; f_i < SYNC_STAGES; f_i = f_i + 1) begin
        f_wr_stage_ahead[f_i*PW +: PW] = from_gray(wr_sync_reg[f_i*PW +: PW]) - rd_bin_reg;
        f_rd_stage_back[f_i*PW +: PW] = wr_bin_reg - from_gray(rd_sync_reg[f_i*PW +: PW]);
        if (f_i > 0) begin
            f_stages_ordered = f_stages_ordered
                && f_wr_stage_ahead[f_i*PW +: PW] <= f_wr_stage_ahead[(f_i-1)*PW +: PW]
                && f_rd_stage_back[f_i*PW +: PW] >= f_rd_stage_back[(f_i-1)*PW +: PW];
        end
    end
end
wire [F_CW-1:0] f_pos = f_idx - f_out;
wire [PW-1:0]   f_slot = rd_bin_reg + f_pos[PW-1:0] - {{AW{1'b0}}, out_valid_reg};

always @* begin
    afifo_inv_gray: assert(wr_gray_reg == to_gray(wr_bin_reg)
        && rd_gray_reg == to_gray(rd_bin_reg));
    afifo_inv_in: assert(f_in[PW-1:0] == wr_bin_reg);
    afifo_inv_out: assert(rd_bin_reg == f_out[PW-1:0] + {{AW{1'b0}}, out_valid_reg});
    afifo_inv_m_level: assert(m_level_reg
        == wr_seen_reg - rd_bin_reg + {{AW{1'b0}}, out_valid_reg});
    if (f_s_rst_q) begin
        afifo_inv_s_reset: assert(wr_bin_reg == {PW{1'b0}} && rd_sync_reg == {(PW*SYNC_STAGES){1'b0}}
            && rd_seen_reg == {PW{1'b0}} && s_level_reg == {PW{1'b0}} && !full_reg
            && f_in == {F_CW{1'b0}});
    end
    if (f_m_rst_q) begin
        afifo_inv_m_reset: assert(rd_bin_reg == {PW{1'b0}} && wr_sync_reg == {(PW*SYNC_STAGES){1'b0}}
            && wr_seen_reg == {PW{1'b0}} && !out_valid_reg && f_out == {F_CW{1'b0}});
    end
    // The reset bookkeeping: a side reset after the other is a side reset; before the first
    // step, everything as at power-up.
    afifo_inv_gens: assert((f_s_gen2 != f_gen_now || (f_s_done && f_m_done))
        && (f_m_gen2 != f_gen_now || (f_s_done && f_m_done)));
    if (!f_started) begin
        afifo_inv_start: assert(!f_s_rst_last && !f_m_rst_last && !f_gen && !f_s_gen && !f_m_gen
            && !f_s_gen2 && !f_m_gen2 && !f_ok_last && f_s_rst_q && f_m_rst_q);
    end
    // Once a side has had its reset edge, it stays in reset while its reset is held; neither
    // is released before both sides are done.
    if (f_started && !f_reset_done) begin
        afifo_inv_pending: assert(s_rst && m_rst);
    end
    if (f_s_done && s_rst) begin
        afifo_inv_held_s: assert(f_s_rst_q);
    end
    if (f_m_done && m_rst) begin
        afifo_inv_held_m: assert(f_m_rst_q);
    end
    if (f_ok) begin
        afifo_inv_inside: assert(f_inside
            == {{(F_CW-PW){1'b0}}, f_words} + {{(F_CW-1){1'b0}}, out_valid_reg});
        afifo_inv_wr_last: assert(f_wr_last_bin == wr_bin_reg
            || f_wr_last_bin == wr_bin_reg - 1'b1);
        afifo_inv_rd_last: assert(f_rd_last_bin == rd_bin_reg
            || f_rd_last_bin == rd_bin_reg - 1'b1);
        afifo_inv_wr_path: assert(wr_seen_reg - rd_bin_reg
                <= f_wr_stage_ahead[(SYNC_STAGES-1)*PW +: PW]
            && f_wr_stage_ahead[0 +: PW] <= f_wr_last_bin - rd_bin_reg
            && f_wr_last_bin - rd_bin_reg <= f_words);
        afifo_inv_rd_path: assert(wr_bin_reg - f_rd_last_bin >= f_words
            && f_rd_stage_back[0 +: PW] >= wr_bin_reg - f_rd_last_bin
            && f_rd_stage_back[(SYNC_STAGES-1)*PW +: PW] <= wr_bin_reg - rd_seen_reg
            && wr_bin_reg - rd_seen_reg <= s_level_reg
            && s_level_reg <= DEPTH
            && full_reg == (s_level_reg == DEPTH));
        afifo_inv_stages: assert(f_stages_ordered);
        if (f_pos < f_inside) begin
            if (out_valid_reg && f_pos == {F_CW{1'b0}}) begin
                afifo_inv_out_word: assert(out_reg == f_data);
            end else begin
                afifo_inv_mem_word: assert(mem[f_slot[AW-1:0]] == f_data);
            end
        end
    end
end
`endif

// ---- reachable (covers) ----------------------------------------------------------------------
// Full, the output register taken while full, drained after having been full; a write side
// running with the read clock stopped (and the reverse); words through after a reset that came
// with words held.
reg [1:0] f_s_alone = 2'd0;  // s_clk edges since the last m_clk edge (saturating)
reg [1:0] f_m_alone = 2'd0;
reg       f_was_full = 1'b0;
reg       f_reset_held_words = 1'b0;
reg       f_s_clk_last = 1'b0;
reg       f_m_clk_last = 1'b0;
wire      f_s_edge = s_clk && !f_s_clk_last;
wire      f_m_edge = m_clk && !f_m_clk_last;
always @(posedge f_gclk) begin
    f_s_clk_last <= s_clk;
    f_m_clk_last <= m_clk;
    if (f_m_edge) begin
        f_s_alone <= 2'd0;
    end else if (f_s_edge && f_s_alone != 2'd3) begin
        f_s_alone <= f_s_alone + 2'd1;
    end
    if (f_s_edge) begin
        f_m_alone <= 2'd0;
    end else if (f_m_edge && f_m_alone != 2'd3) begin
        f_m_alone <= f_m_alone + 2'd1;
    end
    if (f_ok && f_inside == DEPTH + 1) begin
        f_was_full <= 1'b1;
    end
    if (f_ok_last && f_s_rise && f_inside != {F_CW{1'b0}}) begin
        f_reset_held_words <= 1'b1;
    end
end
always @* begin
    if (f_ok && !s_rst && !m_rst) begin
        afifo_cover_full: cover(f_inside == DEPTH + 1 && s_valid && !s_ready);
        afifo_cover_take_full: cover(f_inside == DEPTH + 1 && m_ready);
        afifo_cover_drained: cover(f_was_full && f_inside == {F_CW{1'b0}});
        afifo_cover_write_alone: cover(f_s_alone == 2'd3 && s_valid && s_ready);
        afifo_cover_read_alone: cover(f_m_alone == 2'd3 && m_valid && m_ready);
        afifo_cover_after_reset: cover(f_reset_held_words && m_valid && m_ready);
    end
end
