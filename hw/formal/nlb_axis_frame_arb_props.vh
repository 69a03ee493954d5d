// Formal properties of nlb_axis_frame_arb, included inside the module under `ifdef FORMAL and
// proven by hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven.
//
// The specification at the ports (frame_arb_*), with sources that hold a beat until it is
// taken (AXI-Stream; assumed) and any sink:
// - every beat out is a beat taken from exactly one source, unchanged, in the same clock; no
//   source beat is taken without a beat out;
// - frames are not interleaved: between a frame's first beat and its last, beats are taken
//   from that frame's source only;
// - an offered beat is held until taken (the sources hold theirs);
// - between frames, with both sources newly waiting, the one that did not go last goes first
//   (a beat offered alone and not taken keeps its place).
// frame_arb_inv_* tie the arbiter's registers to what the ports showed (induction).

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

wire f_s0_beat = s0_axis_tvalid && s0_axis_tready;
wire f_s1_beat = s1_axis_tvalid && s1_axis_tready;
wire f_m_beat = m_axis_tvalid && m_axis_tready;

// The sources: a beat offered and not taken stays, unchanged.
always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst) begin
        if ($past(s0_axis_tvalid && !s0_axis_tready)) begin
            assume(s0_axis_tvalid && s0_axis_tdata == $past(s0_axis_tdata)
                && s0_axis_tkeep == $past(s0_axis_tkeep) && s0_axis_tlast == $past(s0_axis_tlast));
        end
        if ($past(s1_axis_tvalid && !s1_axis_tready)) begin
            assume(s1_axis_tvalid && s1_axis_tdata == $past(s1_axis_tdata)
                && s1_axis_tkeep == $past(s1_axis_tkeep) && s1_axis_tlast == $past(s1_axis_tlast));
        end
    end
end

// What the ports showed: inside a frame (a beat taken, its last not), whose, and the source
// of the last frame that ended.
reg f_in_frame = 1'b0;
reg f_src1 = 1'b0;
reg f_last1 = 1'b0;
// A beat was offered and not taken in the last clock, and its source.
reg f_offered = 1'b0;
reg f_offered1 = 1'b0;
always @(posedge clk) begin
    f_offered <= m_axis_tvalid && !m_axis_tready;
    f_offered1 <= m_axis_source;
    if (f_s0_beat || f_s1_beat) begin
        f_in_frame <= f_s0_beat ? !s0_axis_tlast : !s1_axis_tlast;
        f_src1 <= f_s1_beat;
        if (f_s0_beat ? s0_axis_tlast : s1_axis_tlast) begin
            f_last1 <= f_s1_beat;
        end
    end
    if (rst) begin
        f_in_frame <= 1'b0;
        f_src1 <= 1'b0;
        f_last1 <= 1'b0;
        f_offered <= 1'b0;
    end
end

always @* begin
    if (!rst) begin
        frame_arb_one_source: assert(!(f_s0_beat && f_s1_beat));
        frame_arb_beat_out: assert(f_m_beat == (f_s0_beat || f_s1_beat));
        if (f_s0_beat) begin
            frame_arb_data0: assert(m_axis_tdata == s0_axis_tdata && m_axis_tkeep == s0_axis_tkeep
                && m_axis_tlast == s0_axis_tlast && !m_axis_source);
        end
        if (f_s1_beat) begin
            frame_arb_data1: assert(m_axis_tdata == s1_axis_tdata && m_axis_tkeep == s1_axis_tkeep
                && m_axis_tlast == s1_axis_tlast && m_axis_source);
        end
        if (f_in_frame) begin
            frame_arb_no_interleave: assert(f_src1 ? !f_s0_beat : !f_s1_beat);
        end
        if (!f_in_frame && !f_offered && s0_axis_tvalid && s1_axis_tvalid && m_axis_tready) begin
            frame_arb_turns: assert(f_last1 ? f_s0_beat : f_s1_beat);
        end
    end
end

always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst && $past(m_axis_tvalid && !m_axis_tready)) begin
        frame_arb_hold: assert(m_axis_tvalid && m_axis_tdata == $past(m_axis_tdata)
            && m_axis_tkeep == $past(m_axis_tkeep) && m_axis_tlast == $past(m_axis_tlast));
    end
end

`ifndef FORMAL_SPEC_ONLY
always @* begin
    if (!rst) begin
        frame_arb_inv_lock: assert(lock_reg == (f_in_frame || f_offered));
        if (f_offered && f_in_frame) begin
            frame_arb_inv_offered_in_frame: assert(f_offered1 == f_src1);
        end
        if (f_offered) begin
            frame_arb_inv_offered: assert(grant1_reg == f_offered1);
        end else if (f_in_frame) begin
            frame_arb_inv_src: assert(grant1_reg == f_src1);
        end
        frame_arb_inv_last: assert(last1_reg == f_last1);
    end
end
`endif

// Reachable: a frame of each source, back to back, with both waiting.
always @* begin
    if (!rst) begin
        frame_arb_cover_turn: cover(!f_in_frame && f_last1 && s0_axis_tvalid && s1_axis_tvalid
            && f_s0_beat && s0_axis_tlast);
    end
end
