`resetall
`timescale 1ns / 1ps
`default_nettype none

// Two AXI-Lite masters onto one slave (the register file): the host's register window (s0)
// and the command ring's engine (s1, nlb_cmd_ring), which runs table and connection-table
// commands through the same windows the host would use.
//
// Writes and reads are arbitrated apart, one transaction at a time per direction: a master is
// granted on its AWVALID (ARVALID), its address and data pass once, and the grant ends with
// the response's handshake. When both ask, the one not served last goes first, so neither
// starves. A granted master's W passes only with its own AW, so data never reaches the slave
// under another master's address.
module nlb_axil_arb2 #(
    parameter ADDR_WIDTH = 16
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

// ---- writes -------------------------------------------------------------------------------

reg w_busy_reg = 1'b0;   // a write is granted
reg w_owner_reg = 1'b0;  // to this master
reg w_last_reg = 1'b0;   // the master served last
reg aw_sent_reg = 1'b0;  // its address passed
reg w_sent_reg = 1'b0;   // its data passed

wire w_pick = s0_awvalid && s1_awvalid ? !w_last_reg : s1_awvalid;

wire                  o_awvalid = w_owner_reg ? s1_awvalid : s0_awvalid;
wire                  o_wvalid = w_owner_reg ? s1_wvalid : s0_wvalid;
wire                  o_bready = w_owner_reg ? s1_bready : s0_bready;

assign m_awaddr = w_owner_reg ? s1_awaddr : s0_awaddr;
assign m_awvalid = w_busy_reg && !aw_sent_reg && o_awvalid;
assign m_wdata = w_owner_reg ? s1_wdata : s0_wdata;
assign m_wstrb = w_owner_reg ? s1_wstrb : s0_wstrb;
assign m_wvalid = w_busy_reg && !w_sent_reg && o_wvalid;
assign m_bready = w_busy_reg && aw_sent_reg && w_sent_reg && o_bready;

wire m_aw_hs = m_awvalid && m_awready;
wire m_w_hs = m_wvalid && m_wready;
wire m_b_hs = m_bvalid && m_bready;

assign s0_awready = !w_owner_reg && w_busy_reg && !aw_sent_reg && m_awready;
assign s1_awready = w_owner_reg && w_busy_reg && !aw_sent_reg && m_awready;
assign s0_wready = !w_owner_reg && w_busy_reg && !w_sent_reg && m_wready;
assign s1_wready = w_owner_reg && w_busy_reg && !w_sent_reg && m_wready;
wire   b_route = w_busy_reg && aw_sent_reg && w_sent_reg && m_bvalid;
assign s0_bvalid = !w_owner_reg && b_route;
assign s1_bvalid = w_owner_reg && b_route;
assign s0_bresp = m_bresp;
assign s1_bresp = m_bresp;

always @(posedge clk) begin
    if (!w_busy_reg) begin
        if (s0_awvalid || s1_awvalid) begin
            w_busy_reg <= 1'b1;
            w_owner_reg <= w_pick;
            aw_sent_reg <= 1'b0;
            w_sent_reg <= 1'b0;
        end
    end else begin
        if (m_aw_hs) begin
            aw_sent_reg <= 1'b1;
        end
        if (m_w_hs) begin
            w_sent_reg <= 1'b1;
        end
        if (m_b_hs) begin
            w_busy_reg <= 1'b0;
            w_last_reg <= w_owner_reg;
        end
    end
    if (rst) begin
        w_busy_reg <= 1'b0;
        w_owner_reg <= 1'b0;
        w_last_reg <= 1'b0;
        aw_sent_reg <= 1'b0;
        w_sent_reg <= 1'b0;
    end
end

// ---- reads --------------------------------------------------------------------------------

reg r_busy_reg = 1'b0;
reg r_owner_reg = 1'b0;
reg r_last_reg = 1'b0;
reg ar_sent_reg = 1'b0;

wire r_pick = s0_arvalid && s1_arvalid ? !r_last_reg : s1_arvalid;
wire o_arvalid = r_owner_reg ? s1_arvalid : s0_arvalid;
wire o_rready = r_owner_reg ? s1_rready : s0_rready;

assign m_araddr = r_owner_reg ? s1_araddr : s0_araddr;
assign m_arvalid = r_busy_reg && !ar_sent_reg && o_arvalid;
assign m_rready = r_busy_reg && ar_sent_reg && o_rready;

wire m_ar_hs = m_arvalid && m_arready;
wire m_r_hs = m_rvalid && m_rready;

assign s0_arready = !r_owner_reg && r_busy_reg && !ar_sent_reg && m_arready;
assign s1_arready = r_owner_reg && r_busy_reg && !ar_sent_reg && m_arready;
wire   r_route = r_busy_reg && ar_sent_reg && m_rvalid;
assign s0_rvalid = !r_owner_reg && r_route;
assign s1_rvalid = r_owner_reg && r_route;
assign s0_rdata = m_rdata;
assign s1_rdata = m_rdata;
assign s0_rresp = m_rresp;
assign s1_rresp = m_rresp;

always @(posedge clk) begin
    if (!r_busy_reg) begin
        if (s0_arvalid || s1_arvalid) begin
            r_busy_reg <= 1'b1;
            r_owner_reg <= r_pick;
            ar_sent_reg <= 1'b0;
        end
    end else begin
        if (m_ar_hs) begin
            ar_sent_reg <= 1'b1;
        end
        if (m_r_hs) begin
            r_busy_reg <= 1'b0;
            r_last_reg <= r_owner_reg;
        end
    end
    if (rst) begin
        r_busy_reg <= 1'b0;
        r_owner_reg <= 1'b0;
        r_last_reg <= 1'b0;
        ar_sent_reg <= 1'b0;
    end
end

endmodule

`resetall
