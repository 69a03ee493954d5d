// Formal properties of nlb_regs' AXI-Lite slave, included inside the module under `ifdef
// FORMAL (so that they can name its registers) and proven by hw/scripts/formal.sh;
// docs/verification.md "Formal proofs" lists what is proven and how.
//
// Assumed (the master follows AXI-Lite, AMBA AXI A3.1.2 and A3.2.1): AWVALID, WVALID and
// ARVALID are low while reset is high; once high, each stays high with its payload unchanged
// until its handshake (unless reset comes). Nothing is assumed of BREADY and RREADY, nor of
// the extension bus's acknowledges (ext_wr_ack / ext_rd_ack may pulse at any clock). The
// Maglev memory stage (mg_c_*) acknowledges only a request it was given: one ack per request,
// in the request's clock or any later one (an HBM read has no bound on its latency).
//
// Proven (axil_* at the ports): every response answers a request (a write is an AW and a W
// handshake; a response is offered only while more requests than responses have been taken,
// so none without a request and none twice); BVALID and RVALID stay high, with RDATA, RRESP
// and BRESP unchanged, until taken; a request is answered within a bounded number of clocks
// unless it waits on the extension bus or the Maglev memory stage (so every request gets its
// response: exactly one).
// axil_inv_* tie the counts to the slave's registers, which makes the proof inductive.

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end

// ---- the master follows AXI-Lite --------------------------------------------------------
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
    if (rst) begin
        assume(!s_axil_awvalid && !s_axil_wvalid && !s_axil_arvalid);
    end
end
always @(posedge clk) begin
    if (f_past_valid && !$past(rst) && !rst) begin
        if ($past(s_axil_awvalid && !s_axil_awready)) begin
            assume(s_axil_awvalid && s_axil_awaddr == $past(s_axil_awaddr));
        end
        if ($past(s_axil_wvalid && !s_axil_wready)) begin
            assume(s_axil_wvalid && s_axil_wdata == $past(s_axil_wdata)
                && s_axil_wstrb == $past(s_axil_wstrb));
        end
        if ($past(s_axil_arvalid && !s_axil_arready)) begin
            assume(s_axil_arvalid && s_axil_araddr == $past(s_axil_araddr));
        end
    end
end

// ---- handshakes counted since reset ---------------------------------------------------------
localparam F_CW = 4;
// Clocks a request may wait for its response when it does not wait on the extension bus: a
// table command takes 3 + TABLE_RD_LATENCY (write, read back, the read latency, the window
// load), anything else 1.
localparam F_W_WAIT_MAX = 3 + TABLE_RD_LATENCY;
localparam F_R_WAIT_MAX = 1;

reg [F_CW-1:0] f_aw = {F_CW{1'b0}};
reg [F_CW-1:0] f_w = {F_CW{1'b0}};
reg [F_CW-1:0] f_b = {F_CW{1'b0}};
reg [F_CW-1:0] f_ar = {F_CW{1'b0}};
reg [F_CW-1:0] f_r = {F_CW{1'b0}};
// An extension-bus access after its request clock and before its acknowledge (seen at the
// ports; an acknowledge in the request's own clock ends it too).
reg            f_ext_w = 1'b0;
reg            f_ext_r = 1'b0;
wire           f_ext_w_wait = ext_wr_req || f_ext_w;
wire           f_ext_r_wait = ext_rd_req || f_ext_r;
// A Maglev slot access, from its request clock to its acknowledge, likewise.
reg            f_mg_w = 1'b0;
reg            f_mg_r = 1'b0;
wire           f_mg_w_wait = mg_c_wr_req || f_mg_w;
wire           f_mg_r_wait = mg_c_rd_req || f_mg_r;
wire           f_mg_wait = f_mg_w_wait || f_mg_r_wait;
// Clocks the oldest unanswered request has waited (extension-bus and Maglev waits excluded).
reg [3:0]      f_w_wait = 4'd0;
reg [3:0]      f_r_wait = 4'd0;

wire [F_CW-1:0] f_w_open_aw = f_aw - f_b;  // write addresses taken and not answered
wire [F_CW-1:0] f_w_open_w = f_w - f_b;    // write data taken and not answered
wire [F_CW-1:0] f_r_open = f_ar - f_r;     // reads taken and not answered
wire f_w_ready = f_w_open_aw != {F_CW{1'b0}} && f_w_open_w != {F_CW{1'b0}};
wire f_r_ready = f_r_open != {F_CW{1'b0}};

// ---- the Maglev memory stage acknowledges only what it was asked ---------------------------
always @* begin
    if (!f_mg_w_wait || rst) begin
        assume(!mg_c_wr_ack);
    end
    if (!f_mg_r_wait || rst) begin
        assume(!mg_c_rd_ack);
    end
end

always @(posedge clk) begin
    if (s_axil_awvalid && s_axil_awready) begin
        f_aw <= f_aw + 1'b1;
    end
    if (s_axil_wvalid && s_axil_wready) begin
        f_w <= f_w + 1'b1;
    end
    if (s_axil_bvalid && s_axil_bready) begin
        f_b <= f_b + 1'b1;
    end
    if (s_axil_arvalid && s_axil_arready) begin
        f_ar <= f_ar + 1'b1;
    end
    if (s_axil_rvalid && s_axil_rready) begin
        f_r <= f_r + 1'b1;
    end
    f_ext_w <= f_ext_w_wait && !ext_wr_ack;
    f_ext_r <= f_ext_r_wait && !ext_rd_ack;
    f_mg_w <= f_mg_w_wait && !mg_c_wr_ack;
    f_mg_r <= f_mg_r_wait && !mg_c_rd_ack;
    f_w_wait <= f_w_ready && !s_axil_bvalid && !f_ext_w_wait && !f_mg_wait
        ? f_w_wait + 1'b1 : 4'd0;
    f_r_wait <= f_r_ready && !s_axil_rvalid && !f_ext_r_wait ? f_r_wait + 1'b1 : 4'd0;
    if (rst) begin
        f_aw <= {F_CW{1'b0}};
        f_w <= {F_CW{1'b0}};
        f_b <= {F_CW{1'b0}};
        f_ar <= {F_CW{1'b0}};
        f_r <= {F_CW{1'b0}};
        f_ext_w <= 1'b0;
        f_ext_r <= 1'b0;
        f_mg_w <= 1'b0;
        f_mg_r <= 1'b0;
        f_w_wait <= 4'd0;
        f_r_wait <= 4'd0;
    end
end

// ---- the slave follows AXI-Lite ---------------------------------------------------------
always @* begin
    // A response only for a request taken and not yet answered (none spurious, none twice).
    if (s_axil_bvalid) begin
        axil_b_for_request: assert(f_w_ready);
    end
    if (s_axil_rvalid) begin
        axil_r_for_request: assert(f_r_ready);
    end
    // The slave takes at most two writes and two reads ahead of their responses (which also
    // keeps the counters from wrapping).
    axil_w_open: assert(f_w_open_aw <= 2 && f_w_open_w <= 2);
    axil_r_open: assert(f_r_open <= 2);
    // Every request is answered, within F_*_WAIT_MAX clocks of its own logic.
    axil_b_in_time: assert(f_w_wait <= F_W_WAIT_MAX);
    axil_r_in_time: assert(f_r_wait <= F_R_WAIT_MAX);
    // The only response code is OKAY.
    axil_resp_okay: assert(s_axil_bresp == 2'b00 && s_axil_rresp == 2'b00);
end

always @(posedge clk) begin
    // A response stays offered, unchanged, until it is taken.
    if (f_past_valid && !$past(rst)) begin
        if ($past(s_axil_bvalid && !s_axil_bready)) begin
            axil_b_hold: assert(s_axil_bvalid && s_axil_bresp == $past(s_axil_bresp));
        end
        if ($past(s_axil_rvalid && !s_axil_rready)) begin
            axil_r_hold: assert(s_axil_rvalid && s_axil_rdata == $past(s_axil_rdata)
                && s_axil_rresp == $past(s_axil_rresp));
        end
    end
end

`ifndef FORMAL_SPEC_ONLY
// ---- inductive invariants: the counts in the slave's registers ----------------------------
wire f_w_busy = bvalid_reg || busy_reg || ext_wbusy_reg;
always @* begin
    axil_inv_ready: assert(!(awready_reg && aw_full_reg) && !(wready_reg && w_full_reg)
        && !(arready_reg && ar_full_reg));
    axil_inv_w_stage: assert((bvalid_reg + busy_reg + ext_wbusy_reg) <= 1);
    axil_inv_w_count: assert(f_w_open_aw == aw_full_reg + f_w_busy
        && f_w_open_w == w_full_reg + f_w_busy);
    axil_inv_ext_w: assert(f_ext_w_wait == ext_wbusy_reg && (!ext_wr_req_reg || ext_wbusy_reg));
    axil_inv_r_count: assert(f_r_open == ar_full_reg + rvalid_reg);
    axil_inv_ext_r: assert(f_ext_r_wait == ext_rwait_reg && (!ext_rwait_reg || (ar_full_reg
        && !rvalid_reg)) && (!ext_rd_req_reg || ext_rwait_reg));
    // How long the request has waited, from the state of the slave.
    if (!busy_reg && !bvalid_reg && !ext_wbusy_reg) begin
        axil_inv_w_idle: assert(f_w_wait == 4'd0);
    end
    if (ext_wbusy_reg) begin
        axil_inv_w_ext: assert(f_w_wait <= 4'd1);
    end
    if (busy_reg && mem_en_reg != {TABLES{1'b0}}) begin
        axil_inv_w_mem: assert(f_w_wait <= (mem_we_reg ? 4'd1 : 4'd2));
    end
    if (busy_reg && rd_pipe_reg != {TABLE_RD_LATENCY{1'b0}}) begin
        axil_inv_w_pipe: assert(f_w_wait <= 4'd2 + rd_pipe_reg);
    end
    if (!rvalid_reg && !ext_rwait_reg) begin
        axil_inv_r_idle: assert(f_r_wait == 4'd0);
    end
    // The held command is a write or a read, never both (nlb_table_cmd decodes one op).
    axil_inv_cmd_op: assert(!(cmd_write && cmd_read));
    // The table command engine: idle, or one access on its way (on a Maglev command, one
    // request to the Maglev memory stage or one wait for its ack).
    if (!busy_reg) begin
        axil_inv_idle: assert(mem_en_reg == {TABLES{1'b0}} && !mem_we_reg && !readback_reg
            && rd_pipe_reg == {TABLE_RD_LATENCY{1'b0}} && !f_mg_wait);
    end else if (sel_maglev) begin
        axil_inv_mg_cmd: assert(sel_known && mem_en_reg == {TABLES{1'b0}} && !readback_reg
            && rd_pipe_reg == {TABLE_RD_LATENCY{1'b0}}
            && mg_wr_req_reg + f_mg_w + mg_rd_req_reg + f_mg_r == 1);
        axil_inv_w_mg: assert(f_w_wait <= 4'd1);
    end else begin
        axil_inv_cmd: assert(sel_known && (mem_en_reg == {TABLES{1'b0}} || mem_en_reg == sel_onehot)
            && (mem_en_reg != {TABLES{1'b0}}) + (rd_pipe_reg != {TABLE_RD_LATENCY{1'b0}}) == 1
            && $onehot0(rd_pipe_reg) && readback_reg == mem_we_reg
            && (!mem_we_reg || mem_en_reg != {TABLES{1'b0}}) && !f_mg_wait);
    end
end
`endif

// Reachable (covers): a write and a read answered while the master holds back the previous
// response; a table command answered; an extension-bus write answered; a Maglev slot written
// and read back through the memory stage.
always @* begin
    if (!rst) begin
        axil_cover_two_writes: cover(f_w_open_aw == 2 && f_w_open_w == 2 && s_axil_bvalid);
        axil_cover_two_reads: cover(f_r_open == 2 && s_axil_rvalid);
        axil_cover_table_cmd: cover(busy_reg && rd_done && mem_we_reg == 1'b0 && f_w_ready);
        axil_cover_ext_write: cover(f_ext_w && ext_wr_ack && s_axil_awvalid);
        axil_cover_maglev_write: cover(busy_reg && sel_maglev && f_mg_r && mg_c_rd_ack);
    end
end
