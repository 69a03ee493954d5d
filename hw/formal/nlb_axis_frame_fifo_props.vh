// Formal properties of nlb_axis_frame_fifo, included inside the module under `ifdef FORMAL and
// proven by hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven.
//
// The specification at the ports (frame_fifo_*):
// - once a frame's first beat is offered, m_axis_tvalid stays high until its last beat is
//   taken (a frame is offered only whole: what the CMAC's transmit side and an output without
//   tready need), and an offered beat is held unchanged until taken;
// - with DROP_WHEN_FULL, s_axis_tready is always high;
// - no output beat that was not written, never more held than the memory and the output
//   register.
// The frame_fifo_inv_* assertions make the proof inductive: the committed part of the memory
// ends with a last beat, and a non-last beat on the output always has a committed successor.

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

// The output is inside a frame: a beat of it was taken, its last not yet.
reg f_out_in_frame = 1'b0;
always @(posedge clk) begin
    if (m_axis_tvalid && m_axis_tready) begin
        f_out_in_frame <= !m_axis_tlast;
    end
    if (rst) begin
        f_out_in_frame <= 1'b0;
    end
end

always @* begin
    if (!rst) begin
        frame_fifo_no_bubble: assert(!f_out_in_frame || m_axis_tvalid);
        if (DROP_WHEN_FULL != 0) begin
            frame_fifo_no_backpressure: assert(s_axis_tready);
        end
        frame_fifo_capacity: assert(level <= DEPTH + 1);
    end
end

always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst && $past(m_axis_tvalid && !m_axis_tready)) begin
        frame_fifo_hold: assert(m_axis_tvalid && m_axis_tdata == $past(m_axis_tdata)
            && m_axis_tkeep == $past(m_axis_tkeep) && m_axis_tlast == $past(m_axis_tlast));
    end
end

`ifndef FORMAL_SPEC_ONLY
// Pointer distances, modulo 2 x DEPTH as the pointers count.
wire [AW:0] f_before_commit = commit_ptr_reg - 1'b1;
wire [AW:0] f_committed = commit_ptr_reg - rd_ptr_reg;
always @* begin
    if (!rst) begin
        frame_fifo_inv_used: assert(used <= DEPTH);
        // The commit point lies between the read and the write pointers.
        frame_fifo_inv_committed: assert(f_committed <= used);
        // The beat before the commit point is a frame's last beat, whenever one is committed
        // and not yet read.
        if (commit_ptr_reg != rd_ptr_reg) begin
            frame_fifo_inv_last: assert(mem[f_before_commit[AW-1:0]][W-1]);
        end
        // A non-last beat on the output has its next beat committed in the memory.
        if (out_valid_reg && !out_reg[W-1]) begin
            frame_fifo_inv_next: assert(commit_ptr_reg != rd_ptr_reg);
        end
    end
end
`endif

// Reachable: a whole frame out after the memory was full; a frame dropped.
always @* begin
    if (!rst) begin
        frame_fifo_cover_full_out: cover(level == DEPTH + 1 && m_axis_tvalid && m_axis_tready
            && m_axis_tlast);
        frame_fifo_cover_drop: cover(m_drop);
    end
end
