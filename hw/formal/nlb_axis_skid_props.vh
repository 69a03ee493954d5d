// Formal properties of nlb_axis_skid, included inside the module under `ifdef FORMAL (so that
// they can name its registers) and proven by hw/scripts/formal.sh; docs/verification.md
// "Formal proofs" lists what is proven and how.
//
// A beat ({tuser, tlast, tkeep, tdata}) enters on s_axis_tvalid && s_axis_tready and leaves on
// m_axis_tvalid && m_axis_tready. For every n, the n-th beat out must be the n-th beat in:
// f_idx is one arbitrary beat number (anyconst), its beat is recorded as it enters and must
// be what leaves under that number. Nothing is assumed of the source (it may drop tvalid or
// change the beat before it is taken: only taken beats count) or of the sink.
//
// skid_* assertions are the specification, stated at the ports; skid_inv_* say where the
// tracked beat sits, which makes the proof inductive (unbounded). The mutation checks
// (formal.sh --mutants) compile with FORMAL_SPEC_ONLY.

localparam F_CW = 3;

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
// Start in reset; reset may come again at any clock (the beat numbers restart with it).
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

(* anyconst *) reg [F_CW-1:0] f_idx;
reg [F_CW-1:0]       f_in = {F_CW{1'b0}};
reg [F_CW-1:0]       f_out = {F_CW{1'b0}};
reg [BEAT_WIDTH-1:0] f_beat;

wire                  f_s_beat = s_axis_tvalid && s_axis_tready;
wire                  f_m_beat = m_axis_tvalid && m_axis_tready;
wire [BEAT_WIDTH-1:0] f_m_data = {m_axis_tuser, m_axis_tlast, m_axis_tkeep, m_axis_tdata};
wire [F_CW-1:0]       f_inside = f_in - f_out;

always @(posedge clk) begin
    if (f_s_beat) begin
        f_in <= f_in + 1'b1;
        if (f_in == f_idx) begin
            f_beat <= s_beat;
        end
    end
    if (f_m_beat) begin
        f_out <= f_out + 1'b1;
    end
    if (rst) begin
        f_in <= {F_CW{1'b0}};
        f_out <= {F_CW{1'b0}};
    end
end

always @* begin
    // The tracked beat leaves as it entered: no loss, duplicate or reorder.
    if (f_m_beat && f_out == f_idx) begin
        skid_beat_order: assert(f_m_data == f_beat);
    end
    // No output without input; at most two beats held (output and skid registers).
    if (m_axis_tvalid) begin
        skid_no_phantom: assert(f_inside != {F_CW{1'b0}});
    end
    skid_capacity: assert(f_inside <= 2);
end

always @(posedge clk) begin
    if (f_past_valid && !$past(rst)) begin
        // Valid/ready: an offered beat stays offered, unchanged, until it is taken.
        if ($past(m_axis_tvalid && !m_axis_tready)) begin
            skid_hold: assert(m_axis_tvalid && f_m_data == $past(f_m_data));
        end
        // s_axis_tready (a register) is high exactly when fewer than two beats are held,
        // from the second clock after reset on.
        skid_ready: assert(s_axis_tready == (f_inside < 2));
    end
end

`ifndef FORMAL_SPEC_ONLY
wire [F_CW-1:0] f_pos = f_idx - f_out;  // the tracked beat's place: 0 output, 1 skid
always @* begin
    skid_inv_held: assert(f_inside == {2'b00, out_valid_reg} + {2'b00, skid_valid_reg}
        && (!skid_valid_reg || out_valid_reg));
    if (f_pos < f_inside) begin
        if (f_pos == {F_CW{1'b0}}) begin
            skid_inv_out: assert(out_beat_reg == f_beat);
        end else begin
            skid_inv_skid: assert(skid_beat_reg == f_beat);
        end
    end
end
`endif

// Reachable (covers): a beat caught in the skid register; a beat in and a beat out in the
// same clock with two held before; both registers drained after the skid register was used.
reg f_skid_used = 1'b0;
always @(posedge clk) begin
    if (f_inside == 2) begin
        f_skid_used <= 1'b1;
    end
    if (rst) begin
        f_skid_used <= 1'b0;
    end
end
always @* begin
    if (!rst) begin
        skid_cover_holding: cover(f_inside == 2 && s_axis_tvalid && !m_axis_tready);
        skid_cover_full_rate: cover(f_skid_used && f_inside == 1 && f_s_beat && f_m_beat);
        skid_cover_drained: cover(f_skid_used && f_inside == {F_CW{1'b0}});
    end
end
