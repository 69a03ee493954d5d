// Formal properties of nlb_rx_drop, included inside the module under `ifdef FORMAL and proven
// by hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven.
//
// The stream has no ready: the source offers a beat (or not) in any clock, ends frames with
// s_last, and room is anything at all in every clock (anyseq inputs, nothing assumed). The
// specification, stated on the ports against a frame tracker of its own (f_*): every beat is
// consumed in its clock (there is no back-pressure to hold it); the first beat of a frame
// passes exactly when room is high then; every other beat of the frame passes exactly when its
// first beat did (a frame goes on whole or not at all: never cut); a drop is reported only at
// a first beat; a beat passes only when one is offered. rx_drop_inv_* tie the tracker to the
// module's registers (the proof is inductive).

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

reg f_in_frame = 1'b0;  // a frame's first beat went by, its last not yet
reg f_passing = 1'b0;   // ... and it passed

always @(posedge clk) begin
    if (s_valid) begin
        f_in_frame <= !s_last;
        if (!f_in_frame) begin
            f_passing <= room;
        end
    end
    if (rst) begin
        f_in_frame <= 1'b0;
        f_passing <= 1'b0;
    end
end

always @* begin
    if (!rst) begin
        rx_drop_valid_only: assert(!m_pass || s_valid);
        rx_drop_first: assert(m_first == (s_valid && !f_in_frame));
        if (s_valid && !f_in_frame) begin
            rx_drop_first_by_room: assert(m_pass == room && m_drop_first == !room);
        end
        if (s_valid && f_in_frame) begin
            rx_drop_whole_frame: assert(m_pass == f_passing && !m_drop_first);
        end
        // Every offered beat is consumed: passed or dropped, never held.
        rx_drop_consumed: assert(!s_valid || (m_pass != m_dropping));
    end
end

`ifndef FORMAL_SPEC_ONLY
always @* begin
    if (f_past_valid && !rst) begin
        rx_drop_inv_first: assert(first_reg == !f_in_frame);
        if (f_in_frame) begin
            rx_drop_inv_passing: assert(dropping_reg == !f_passing);
        end
    end
end
`endif

always @(posedge clk) begin
    if (f_past_valid && !rst && !$past(rst)) begin
        // A dropped frame of three beats, an admitted one, and one right behind another.
        cover(s_valid && s_last && f_in_frame && !f_passing && $past(s_valid && f_in_frame));
        cover(s_valid && s_last && f_in_frame && f_passing);
        cover(s_valid && !f_in_frame && $past(s_valid && s_last) && m_pass
            && !$past(m_pass));
    end
end
