// Formal properties of nlb_axi_mux2, included inside the module under `ifdef FORMAL and
// proven by hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven.
//
// The specification at the ports (axi_mux_*), with masters that keep the AXI4 rules (valid held
// until ready, wlast on each burst's last beat, bready and rready free) and a slave that answers
// only what it took, in order (no IDs):
// - the two masters never have transactions in flight at the same time, so every answer the
//   slave gives belongs to the one master that has any;
// - read beats reach only a master with a read burst in flight, write responses only a master
//   with a write in flight;
// - a write beat reaches the slave only for a write address it took whose burst is not yet
//   whole;
// - and the port is not kept from a master that asks: covered (the port changes hands while
//   both ask, both masters' transactions complete).
// axi_mux_inv_* tie the counters to what the ports showed (induction).

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

wire f_s0_ar = s0_arvalid && s0_arready;
wire f_s1_ar = s1_arvalid && s1_arready;
wire f_s0_aw = s0_awvalid && s0_awready;
wire f_s1_aw = s1_awvalid && s1_awready;
wire f_s0_rl = s0_rvalid && s0_rready && s0_rlast;
wire f_s1_rl = s1_rvalid && s1_rready && s1_rlast;
wire f_s0_b = s0_bvalid && s0_bready;
wire f_s1_b = s1_bvalid && s1_bready;
wire f_s0_wl = s0_wvalid && s0_wready && s0_wlast;
wire f_s1_wl = s1_wvalid && s1_wready && s1_wlast;
wire f_m_aw = m_awvalid && m_awready;
wire f_m_wl = m_wvalid && m_wready && m_wlast;
wire f_m_ar = m_arvalid && m_arready;
wire f_m_rl = m_rvalid && m_rready && m_rlast;
wire f_m_b = m_bvalid && m_bready;

// The masters: a valid held until taken.
always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst) begin
        if ($past(s0_awvalid && !s0_awready)) assume(s0_awvalid);
        if ($past(s1_awvalid && !s1_awready)) assume(s1_awvalid);
        if ($past(s0_arvalid && !s0_arready)) assume(s0_arvalid);
        if ($past(s1_arvalid && !s1_arready)) assume(s1_arvalid);
        if ($past(s0_wvalid && !s0_wready)) assume(s0_wvalid);
        if ($past(s1_wvalid && !s1_wready)) assume(s1_wvalid);
    end
end

// In flight per master (taken, not answered), and on the slave's side.
reg [3:0] f_rd0 = 4'd0, f_rd1 = 4'd0, f_wr0 = 4'd0, f_wr1 = 4'd0;
reg [3:0] f_wd0 = 4'd0, f_wd1 = 4'd0;        // writes whose burst is not whole yet
reg [3:0] f_m_rd = 4'd0, f_m_wr = 4'd0, f_m_wd = 4'd0;
always @(posedge clk) begin
    f_rd0 <= f_rd0 + {3'd0, f_s0_ar} - {3'd0, f_s0_rl};
    f_rd1 <= f_rd1 + {3'd0, f_s1_ar} - {3'd0, f_s1_rl};
    f_wr0 <= f_wr0 + {3'd0, f_s0_aw} - {3'd0, f_s0_b};
    f_wr1 <= f_wr1 + {3'd0, f_s1_aw} - {3'd0, f_s1_b};
    f_wd0 <= f_wd0 + {3'd0, f_s0_aw} - {3'd0, f_s0_wl};
    f_wd1 <= f_wd1 + {3'd0, f_s1_aw} - {3'd0, f_s1_wl};
    f_m_rd <= f_m_rd + {3'd0, f_m_ar} - {3'd0, f_m_rl};
    f_m_wr <= f_m_wr + {3'd0, f_m_aw} - {3'd0, f_m_b};
    f_m_wd <= f_m_wd + {3'd0, f_m_aw} - {3'd0, f_m_wl};
    if (rst) begin
        f_rd0 <= 4'd0;
        f_rd1 <= 4'd0;
        f_wr0 <= 4'd0;
        f_wr1 <= 4'd0;
        f_wd0 <= 4'd0;
        f_wd1 <= 4'd0;
        f_m_rd <= 4'd0;
        f_m_wr <= 4'd0;
        f_m_wd <= 4'd0;
    end
end

// The slave answers only what it took (a write once its burst is whole); the counts stay small.
always @* begin
    if (!rst) begin
        if (m_rvalid) assume(f_m_rd != 4'd0);
        if (m_bvalid) assume(f_m_wr != 4'd0 && f_m_wr > f_m_wd);
        assume(f_m_rd < 4'd6 && f_m_wr < 4'd6);
    end
end

always @* begin
    if (f_past_valid && !rst) begin
        // Never both masters in flight.
        axi_mux_one_master: assert((f_rd0 == 4'd0 && f_wr0 == 4'd0)
            || (f_rd1 == 4'd0 && f_wr1 == 4'd0));
        // Answers to a master that asked.
        if (s0_rvalid) axi_mux_r0_asked: assert(f_rd0 != 4'd0);
        if (s1_rvalid) axi_mux_r1_asked: assert(f_rd1 != 4'd0);
        if (s0_bvalid) axi_mux_b0_asked: assert(f_wr0 != 4'd0);
        if (s1_bvalid) axi_mux_b1_asked: assert(f_wr1 != 4'd0);
        // Write data only behind its address.
        if (m_wvalid) axi_mux_w_after_aw: assert(f_m_wd != 4'd0);
`ifndef FORMAL_SPEC_ONLY
        // The mux's counts are the owner's; the other master has nothing in flight.
        axi_mux_inv_rd: assert(rd_out_reg == {6'd0, owner_reg ? f_rd1 : f_rd0}
            && rd_out_reg == {6'd0, f_m_rd});
        axi_mux_inv_wr: assert(wr_out_reg == {6'd0, owner_reg ? f_wr1 : f_wr0}
            && wr_out_reg == {6'd0, f_m_wr});
        axi_mux_inv_wd: assert(w_due_reg == {6'd0, owner_reg ? f_wd1 : f_wd0}
            && w_due_reg == {6'd0, f_m_wd});
        axi_mux_inv_idle: assert(owner_reg ? (f_rd0 == 4'd0 && f_wr0 == 4'd0 && f_wd0 == 4'd0)
            : (f_rd1 == 4'd0 && f_wr1 == 4'd0 && f_wd1 == 4'd0));
        axi_mux_inv_wd_le: assert(f_m_wd <= f_m_wr);
`endif
    end
end

// Both masters are served while both keep asking.
reg f_hand0 = 1'b0, f_hand1 = 1'b0;
always @(posedge clk) begin
    if (f_s0_rl) f_hand0 <= 1'b1;
    if (f_s1_b) f_hand1 <= 1'b1;
    if (rst) begin
        f_hand0 <= 1'b0;
        f_hand1 <= 1'b0;
    end
end
always @* begin
    if (!rst) begin
        axi_mux_cover_both: cover(f_hand0 && f_hand1);
        axi_mux_cover_switch: cover(s0_arvalid && s1_awvalid && f_hand0 && f_hand1);
    end
end
