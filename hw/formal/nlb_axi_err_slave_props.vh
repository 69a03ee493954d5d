// Formal properties of nlb_axi_err_slave, included inside the module under `ifdef FORMAL and
// proven by hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven.
//
// The specification at the ports (err_slave_*), with a master that keeps the AXI4 rules
// (assumed: valid held until ready, arlen held with arvalid, bready and rready free):
// - a write response only for a write address and a whole write burst both taken and not yet
//   answered, DECERR, held until taken; one is offered in the clock after both are there and
//   no response is waiting (the master never waits for nothing);
// - read beats only for a taken read address: exactly arlen + 1 of them, rlast on the last
//   one only, DECERR, held until taken; the next address is taken once the burst is done;
// - write addresses and write beats are refused only while 7 of them wait for a response.
// err_slave_inv_* tie the counters to what the ports showed (induction).

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

wire f_aw = s_axi_awvalid && s_axi_awready;
wire f_w_last = s_axi_wvalid && s_axi_wready && s_axi_wlast;
wire f_b = s_axi_bvalid && s_axi_bready;
wire f_ar = s_axi_arvalid && s_axi_arready;
wire f_r = s_axi_rvalid && s_axi_rready;

// The master: a valid held until taken, the read address with it.
always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst) begin
        if ($past(s_axi_awvalid && !s_axi_awready)) begin
            assume(s_axi_awvalid);
        end
        if ($past(s_axi_wvalid && !s_axi_wready)) begin
            assume(s_axi_wvalid && s_axi_wlast == $past(s_axi_wlast));
        end
        if ($past(s_axi_arvalid && !s_axi_arready)) begin
            assume(s_axi_arvalid && s_axi_arlen == $past(s_axi_arlen));
        end
    end
end

// Taken and not yet answered: write addresses, whole write bursts; the read burst's beats
// left (0: none in progress).
reg [3:0] f_aw_open = 4'd0;
reg [3:0] f_w_open = 4'd0;
reg [8:0] f_r_left = 9'd0;
reg [7:0] f_r_len = 8'd0;
always @(posedge clk) begin
    f_aw_open <= f_aw_open + {3'd0, f_aw} - {3'd0, f_b};
    f_w_open <= f_w_open + {3'd0, f_w_last} - {3'd0, f_b};
    if (f_ar) begin
        f_r_left <= {1'b0, s_axi_arlen} + 9'd1;
        f_r_len <= s_axi_arlen;
    end else if (f_r) begin
        f_r_left <= f_r_left - 9'd1;
    end
    if (rst) begin
        f_aw_open <= 4'd0;
        f_w_open <= 4'd0;
        f_r_left <= 9'd0;
    end
end

always @* begin
    if (!rst) begin
        if (s_axi_bvalid) begin
            err_slave_b_for_request: assert(f_aw_open != 4'd0 && f_w_open != 4'd0
                && s_axi_bresp == 2'b11);
        end
        if (s_axi_rvalid) begin
            err_slave_r_for_request: assert(f_r_left != 9'd0 && s_axi_rresp == 2'b11
                && s_axi_rlast == (f_r_left == 9'd1));
        end
        if (f_ar) begin
            err_slave_ar_after_burst: assert(f_r_left == 9'd0);
        end
        err_slave_aw_room: assert(s_axi_awready || f_aw_open >= 4'd7);
        err_slave_w_room: assert(s_axi_wready || f_w_open >= 4'd7);
        err_slave_ar_ready: assert(s_axi_arready == (f_r_left == 9'd0));
    end
end

always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst) begin
        if ($past(s_axi_bvalid && !s_axi_bready)) begin
            err_slave_b_hold: assert(s_axi_bvalid);
        end
        if ($past(s_axi_rvalid && !s_axi_rready)) begin
            err_slave_r_hold: assert(s_axi_rvalid && s_axi_rlast == $past(s_axi_rlast));
        end
        // Both there and no response waiting: the response comes in the next clock.
        if ($past(!s_axi_bvalid && f_aw_open != 4'd0 && f_w_open != 4'd0)) begin
            err_slave_b_answers: assert(s_axi_bvalid);
        end
    end
end

`ifndef FORMAL_SPEC_ONLY
always @* begin
    if (!rst) begin
        err_slave_inv_aw: assert({1'b0, aw_count_reg} + {3'd0, bvalid_reg} == f_aw_open);
        err_slave_inv_w: assert({1'b0, w_count_reg} + {3'd0, bvalid_reg} == f_w_open);
        err_slave_inv_r: assert(f_r_left == (r_busy_reg ? {1'b0, r_left_reg} + 9'd1 : 9'd0));
    end
end
`endif

// Reachable: seven write addresses waiting (the address channel refused); the last beat of a
// three-beat read burst taken.
always @* begin
    if (!rst) begin
        err_slave_cover_aw_full: cover(!s_axi_awready && s_axi_awvalid);
        err_slave_cover_r_last: cover(f_r && s_axi_rlast && f_r_len == 8'd2);
    end
end
