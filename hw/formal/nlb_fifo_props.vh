// Formal properties of nlb_fifo, included inside the module under `ifdef FORMAL (so that they
// can name its registers) and proven by hw/scripts/formal.sh; docs/verification.md "Formal
// proofs" lists what is proven and how.
//
// A beat enters on s_valid && s_ready and leaves on m_valid && m_ready. Counting both since
// reset, the FIFO is right when, for every n, the n-th beat out is the n-th beat in: nothing
// lost, duplicated or reordered. f_idx is one arbitrary beat number (anyconst: one proof covers
// every number); its data is recorded as it enters and must be what leaves under that number.
// The counters wrap at 2^F_CW, more than the DEPTH + 1 beats the FIFO can hold, so the beat
// numbered f_idx (mod 2^F_CW) is unambiguous while it is inside.
//
// The fifo_* assertions are the specification, stated at the ports; fifo_inv_* say where the
// tracked beat sits, which makes the proof inductive (unbounded). The mutation checks
// (formal.sh --mutants) compile with FORMAL_SPEC_ONLY, so a planted bug has to show at the
// ports to be caught.

localparam F_CW = AW + 2;

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
reg [F_CW-1:0]  f_in = {F_CW{1'b0}};
reg [F_CW-1:0]  f_out = {F_CW{1'b0}};
reg [WIDTH-1:0] f_data;

wire            f_s_beat = s_valid && s_ready;
wire            f_m_beat = m_valid && m_ready;
wire [F_CW-1:0] f_inside = f_in - f_out;
// Beats inside that are not on the output (in the memory).
wire [F_CW-1:0] f_queued = f_inside - {{(F_CW-1){1'b0}}, m_valid};

always @(posedge clk) begin
    if (f_s_beat) begin
        f_in <= f_in + 1'b1;
        if (f_in == f_idx) begin
            f_data <= s_data;
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
    // The tracked beat leaves with the data it entered with: no loss, duplicate or reorder.
    if (f_m_beat && f_out == f_idx) begin
        fifo_beat_order: assert(m_data == f_data);
    end
    // No output without input, never more inside than the memory and the output register.
    if (m_valid) begin
        fifo_no_phantom: assert(f_inside != {F_CW{1'b0}});
    end
    fifo_capacity: assert(f_inside <= DEPTH + 1);
    // `count` is the number of beats inside.
    fifo_count: assert(count == f_inside);
    // The writer is refused exactly when the memory is full.
    fifo_ready: assert(s_ready == (f_queued != DEPTH));
end

// Valid/ready: an offered beat stays offered, unchanged, until it is taken.
always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && $past(m_valid && !m_ready)) begin
        fifo_hold: assert(m_valid && m_data == $past(m_data));
    end
end

`ifndef FORMAL_SPEC_ONLY
wire [F_CW-1:0] f_pos = f_idx - f_out;  // the tracked beat's place in the queue
wire [AW:0]     f_mem_words = wr_ptr_reg - rd_ptr_reg;
// Its memory slot when it is not in the output register.
wire [AW:0]     f_slot = rd_ptr_reg + f_pos[AW:0] - {{AW{1'b0}}, out_valid_reg};
always @* begin
    fifo_inv_words: assert(f_mem_words <= DEPTH
        && f_inside == {1'b0, f_mem_words} + {{AW{1'b0}}, out_valid_reg});
    if (f_pos < f_inside) begin
        if (out_valid_reg && f_pos == {F_CW{1'b0}}) begin
            fifo_inv_out: assert(out_reg == f_data);
        end else begin
            fifo_inv_mem: assert(mem[f_slot[AW-1:0]] == f_data);
        end
    end
end
`endif

// Reachable (covers): full with the writer refused; a beat in and a beat out in the same clock
// one short of full; drained again after having been full (no reset between).
reg f_was_full = 1'b0;
always @(posedge clk) begin
    if (f_inside == DEPTH + 1) begin
        f_was_full <= 1'b1;
    end
    if (rst) begin
        f_was_full <= 1'b0;
    end
end
always @* begin
    if (!rst) begin
        fifo_cover_full: cover(f_inside == DEPTH + 1 && s_valid && !s_ready);
        fifo_cover_in_out: cover(f_inside == DEPTH && f_s_beat && f_m_beat);
        fifo_cover_drained: cover(f_was_full && f_inside == {F_CW{1'b0}});
    end
end
