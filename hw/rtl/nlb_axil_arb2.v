`resetall
`timescale 1ns / 1ps
`default_nettype none

// Two AXI-Lite masters onto one slave (the register file): the host's register window (s0)
// and the command ring's engine (s1, nlb_cmd_ring), which runs table and connection-table
// commands through the same windows the host would use.
//
// Writes and reads are arbitrated apart. Each direction belongs to one master at a time, which
// may have several accesses in flight (the slave answers in order): a write's data may pass
// before its address, a next write while a response is held, as the master sends them. When
// the other master asks (AWVALID or WVALID; ARVALID), the owner's new accesses are held after
// at most TURN of them since it took the direction, the halves of a write it has begun still
// pass, and once every access of the owner is answered the direction changes hands.
module nlb_axil_arb2 #(
    parameter ADDR_WIDTH = 16,
    // New accesses a master may start after taking a direction while the other asks.
    parameter TURN = 4
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire [ADDR_WIDTH-1:0] s0_awaddr,
    input  wire                  s0_awvalid,
    output wire                  s0_awready,
    input  wire [31:0]           s0_wdata,
    input  wire [3:0]            s0_wstrb,
    input  wire                  s0_wvalid,
    output wire                  s0_wready,
    output wire [1:0]            s0_bresp,
    output wire                  s0_bvalid,
    input  wire                  s0_bready,
    input  wire [ADDR_WIDTH-1:0] s0_araddr,
    input  wire                  s0_arvalid,
    output wire                  s0_arready,
    output wire [31:0]           s0_rdata,
    output wire [1:0]            s0_rresp,
    output wire                  s0_rvalid,
    input  wire                  s0_rready,

    input  wire [ADDR_WIDTH-1:0] s1_awaddr,
    input  wire                  s1_awvalid,
    output wire                  s1_awready,
    input  wire [31:0]           s1_wdata,
    input  wire [3:0]            s1_wstrb,
    input  wire                  s1_wvalid,
    output wire                  s1_wready,
    output wire [1:0]            s1_bresp,
    output wire                  s1_bvalid,
    input  wire                  s1_bready,
    input  wire [ADDR_WIDTH-1:0] s1_araddr,
    input  wire                  s1_arvalid,
    output wire                  s1_arready,
    output wire [31:0]           s1_rdata,
    output wire [1:0]            s1_rresp,
    output wire                  s1_rvalid,
    input  wire                  s1_rready,

    output wire [ADDR_WIDTH-1:0] m_awaddr,
    output wire                  m_awvalid,
    input  wire                  m_awready,
    output wire [31:0]           m_wdata,
    output wire [3:0]            m_wstrb,
    output wire                  m_wvalid,
    input  wire                  m_wready,
    input  wire [1:0]            m_bresp,
    input  wire                  m_bvalid,
    output wire                  m_bready,
    output wire [ADDR_WIDTH-1:0] m_araddr,
    output wire                  m_arvalid,
    input  wire                  m_arready,
    input  wire [31:0]           m_rdata,
    input  wire [1:0]            m_rresp,
    input  wire                  m_rvalid,
    output wire                  m_rready
);

localparam [3:0] TURN_N = TURN;

// ---- writes -------------------------------------------------------------------------------

reg       w_owner_reg = 1'b0;
reg [3:0] aw_cnt_reg = 4'd0;   // addresses passed, not yet answered
reg [3:0] w_cnt_reg = 4'd0;    // data passed, not yet answered
reg [3:0] w_turn_reg = 4'd0;

wire w_other_asks = w_owner_reg ? (s0_awvalid || s0_wvalid) : (s1_awvalid || s1_wvalid);
wire w_owner_asks = w_owner_reg ? (s1_awvalid || s1_wvalid) : (s0_awvalid || s0_wvalid);
wire w_new_ok = (!w_other_asks || w_turn_reg != 4'd0) && aw_cnt_reg != 4'hf
    && w_cnt_reg != 4'hf;
// An address completes a write whose data passed first, and data one whose address did:
// those always pass; a half that starts a write passes only while new writes may.
wire aw_ok = aw_cnt_reg < w_cnt_reg || w_new_ok;
wire w_ok = w_cnt_reg < aw_cnt_reg || w_new_ok;

assign m_awaddr = w_owner_reg ? s1_awaddr : s0_awaddr;
assign m_awvalid = aw_ok && (w_owner_reg ? s1_awvalid : s0_awvalid);
assign s0_awready = !w_owner_reg && aw_ok && m_awready;
assign s1_awready = w_owner_reg && aw_ok && m_awready;
assign m_wdata = w_owner_reg ? s1_wdata : s0_wdata;
assign m_wstrb = w_owner_reg ? s1_wstrb : s0_wstrb;
assign m_wvalid = w_ok && (w_owner_reg ? s1_wvalid : s0_wvalid);
assign s0_wready = !w_owner_reg && w_ok && m_wready;
assign s1_wready = w_owner_reg && w_ok && m_wready;
assign s0_bvalid = !w_owner_reg && m_bvalid;
assign s1_bvalid = w_owner_reg && m_bvalid;
assign s0_bresp = m_bresp;
assign s1_bresp = m_bresp;
assign m_bready = w_owner_reg ? s1_bready : s0_bready;

wire m_aw_hs = m_awvalid && m_awready;
wire m_w_hs = m_wvalid && m_wready;
wire m_b_hs = m_bvalid && m_bready;
wire [3:0] aw_cnt_next = aw_cnt_reg + {3'd0, m_aw_hs} - {3'd0, m_b_hs};
wire [3:0] w_cnt_next = w_cnt_reg + {3'd0, m_w_hs} - {3'd0, m_b_hs};
// A half that starts a write (the other half not yet passed) uses the turn.
wire w_starts = (m_aw_hs && aw_cnt_reg >= w_cnt_reg) || (m_w_hs && w_cnt_reg >= aw_cnt_reg);

always @(posedge clk) begin
    aw_cnt_reg <= aw_cnt_next;
    w_cnt_reg <= w_cnt_next;
    if (w_starts && w_turn_reg != 4'd0) begin
        w_turn_reg <= w_turn_reg - 4'd1;
    end
    if (w_other_asks && (w_turn_reg == 4'd0 || !w_owner_asks) && aw_cnt_next == 4'd0
            && w_cnt_next == 4'd0 && !m_aw_hs && !m_w_hs) begin
        w_owner_reg <= !w_owner_reg;
        w_turn_reg <= TURN_N;
    end
    if (rst) begin
        w_owner_reg <= 1'b0;
        aw_cnt_reg <= 4'd0;
        w_cnt_reg <= 4'd0;
        w_turn_reg <= 4'd0;
    end
end

// ---- reads --------------------------------------------------------------------------------

reg       r_owner_reg = 1'b0;
reg [3:0] ar_cnt_reg = 4'd0;
reg [3:0] r_turn_reg = 4'd0;

wire r_other_asks = r_owner_reg ? s0_arvalid : s1_arvalid;
wire r_owner_asks = r_owner_reg ? s1_arvalid : s0_arvalid;
wire ar_ok = (!r_other_asks || r_turn_reg != 4'd0) && ar_cnt_reg != 4'hf;

assign m_araddr = r_owner_reg ? s1_araddr : s0_araddr;
assign m_arvalid = ar_ok && (r_owner_reg ? s1_arvalid : s0_arvalid);
assign s0_arready = !r_owner_reg && ar_ok && m_arready;
assign s1_arready = r_owner_reg && ar_ok && m_arready;
assign s0_rvalid = !r_owner_reg && m_rvalid;
assign s1_rvalid = r_owner_reg && m_rvalid;
assign s0_rdata = m_rdata;
assign s1_rdata = m_rdata;
assign s0_rresp = m_rresp;
assign s1_rresp = m_rresp;
assign m_rready = r_owner_reg ? s1_rready : s0_rready;

wire m_ar_hs = m_arvalid && m_arready;
wire m_r_hs = m_rvalid && m_rready;
wire [3:0] ar_cnt_next = ar_cnt_reg + {3'd0, m_ar_hs} - {3'd0, m_r_hs};

always @(posedge clk) begin
    ar_cnt_reg <= ar_cnt_next;
    if (m_ar_hs && r_turn_reg != 4'd0) begin
        r_turn_reg <= r_turn_reg - 4'd1;
    end
    if (r_other_asks && (r_turn_reg == 4'd0 || !r_owner_asks) && ar_cnt_next == 4'd0
            && !m_ar_hs) begin
        r_owner_reg <= !r_owner_reg;
        r_turn_reg <= TURN_N;
    end
    if (rst) begin
        r_owner_reg <= 1'b0;
        ar_cnt_reg <= 4'd0;
        r_turn_reg <= 4'd0;
    end
end

endmodule

`resetall
