`resetall
`timescale 1ns / 1ps
`default_nettype none

// Two AXI4 masters without IDs onto one port (the shell's PCIe DMA or bridge): the ring
// engine (s0, nlb_host_dma) and the command ring's engine (s1, nlb_cmd_ring).
//
// Without IDs the slave answers in order, so the port belongs to one master at a time: the
// owner issues as many transactions as it likes; when the other master asks (ARVALID or
// AWVALID), the owner's new addresses are held (after at most TURN of them since it took the
// port), and once its transactions are all answered (every read's last beat, every write's
// response) the port changes hands. The owner never
// waits on a new address to finish one already issued (a write's data follows its own
// address), so the hand-over always comes. W beats pass only for an address already taken,
// so no data reaches the slave ahead of its address or for the other master.
module nlb_axi_mux2 #(
    parameter DATA_WIDTH = 512,
    // Addresses a master may issue after taking the port while the other asks: a turn.
    parameter TURN = 8
) (
    input  wire                    clk,
    input  wire                    rst,

    input  wire [63:0]             s0_awaddr,
    input  wire [7:0]              s0_awlen,
    input  wire [2:0]              s0_awsize,
    input  wire [1:0]              s0_awburst,
    input  wire                    s0_awvalid,
    output wire                    s0_awready,
    input  wire [DATA_WIDTH-1:0]   s0_wdata,
    input  wire [DATA_WIDTH/8-1:0] s0_wstrb,
    input  wire                    s0_wlast,
    input  wire                    s0_wvalid,
    output wire                    s0_wready,
    output wire [1:0]              s0_bresp,
    output wire                    s0_bvalid,
    input  wire                    s0_bready,
    input  wire [63:0]             s0_araddr,
    input  wire [7:0]              s0_arlen,
    input  wire [2:0]              s0_arsize,
    input  wire [1:0]              s0_arburst,
    input  wire                    s0_arvalid,
    output wire                    s0_arready,
    output wire [DATA_WIDTH-1:0]   s0_rdata,
    output wire [1:0]              s0_rresp,
    output wire                    s0_rlast,
    output wire                    s0_rvalid,
    input  wire                    s0_rready,

    input  wire [63:0]             s1_awaddr,
    input  wire [7:0]              s1_awlen,
    input  wire [2:0]              s1_awsize,
    input  wire [1:0]              s1_awburst,
    input  wire                    s1_awvalid,
    output wire                    s1_awready,
    input  wire [DATA_WIDTH-1:0]   s1_wdata,
    input  wire [DATA_WIDTH/8-1:0] s1_wstrb,
    input  wire                    s1_wlast,
    input  wire                    s1_wvalid,
    output wire                    s1_wready,
    output wire [1:0]              s1_bresp,
    output wire                    s1_bvalid,
    input  wire                    s1_bready,
    input  wire [63:0]             s1_araddr,
    input  wire [7:0]              s1_arlen,
    input  wire [2:0]              s1_arsize,
    input  wire [1:0]              s1_arburst,
    input  wire                    s1_arvalid,
    output wire                    s1_arready,
    output wire [DATA_WIDTH-1:0]   s1_rdata,
    output wire [1:0]              s1_rresp,
    output wire                    s1_rlast,
    output wire                    s1_rvalid,
    input  wire                    s1_rready,

    output wire [63:0]             m_awaddr,
    output wire [7:0]              m_awlen,
    output wire [2:0]              m_awsize,
    output wire [1:0]              m_awburst,
    output wire                    m_awvalid,
    input  wire                    m_awready,
    output wire [DATA_WIDTH-1:0]   m_wdata,
    output wire [DATA_WIDTH/8-1:0] m_wstrb,
    output wire                    m_wlast,
    output wire                    m_wvalid,
    input  wire                    m_wready,
    input  wire [1:0]              m_bresp,
    input  wire                    m_bvalid,
    output wire                    m_bready,
    output wire [63:0]             m_araddr,
    output wire [7:0]              m_arlen,
    output wire [2:0]              m_arsize,
    output wire [1:0]              m_arburst,
    output wire                    m_arvalid,
    input  wire                    m_arready,
    input  wire [DATA_WIDTH-1:0]   m_rdata,
    input  wire [1:0]              m_rresp,
    input  wire                    m_rlast,
    input  wire                    m_rvalid,
    output wire                    m_rready
);

reg        owner_reg = 1'b0;
// Transactions of the owner not yet answered: reads (until their last beat) and writes (until
// their response); and writes whose data has not all passed yet.
reg [9:0]  rd_out_reg = 10'd0;
reg [9:0]  wr_out_reg = 10'd0;
reg [9:0]  w_due_reg = 10'd0;

// Addresses the owner may still issue while the other asks (a master that took the port
// because it asked has its address waiting: without a turn, both would only ever wait).
reg [7:0]  turn_reg = 8'd0;
localparam [7:0] TURN_N = TURN;

wire other_asks = owner_reg ? (s0_arvalid || s0_awvalid) : (s1_arvalid || s1_awvalid);
wire owner_asks = owner_reg ? (s1_arvalid || s1_awvalid) : (s0_arvalid || s0_awvalid);
// The owner may issue while the other does not ask or its turn lasts (and the counts have
// room).
wire issue_ok = (!other_asks || turn_reg != 8'd0) && !(&rd_out_reg) && !(&wr_out_reg);

assign m_awaddr = owner_reg ? s1_awaddr : s0_awaddr;
assign m_awlen = owner_reg ? s1_awlen : s0_awlen;
assign m_awsize = owner_reg ? s1_awsize : s0_awsize;
assign m_awburst = owner_reg ? s1_awburst : s0_awburst;
assign m_awvalid = issue_ok && (owner_reg ? s1_awvalid : s0_awvalid);
assign s0_awready = !owner_reg && issue_ok && m_awready;
assign s1_awready = owner_reg && issue_ok && m_awready;

wire w_ok = w_due_reg != 10'd0;
assign m_wdata = owner_reg ? s1_wdata : s0_wdata;
assign m_wstrb = owner_reg ? s1_wstrb : s0_wstrb;
assign m_wlast = owner_reg ? s1_wlast : s0_wlast;
assign m_wvalid = w_ok && (owner_reg ? s1_wvalid : s0_wvalid);
assign s0_wready = !owner_reg && w_ok && m_wready;
assign s1_wready = owner_reg && w_ok && m_wready;

assign s0_bresp = m_bresp;
assign s1_bresp = m_bresp;
assign s0_bvalid = !owner_reg && m_bvalid;
assign s1_bvalid = owner_reg && m_bvalid;
assign m_bready = owner_reg ? s1_bready : s0_bready;

assign m_araddr = owner_reg ? s1_araddr : s0_araddr;
assign m_arlen = owner_reg ? s1_arlen : s0_arlen;
assign m_arsize = owner_reg ? s1_arsize : s0_arsize;
assign m_arburst = owner_reg ? s1_arburst : s0_arburst;
assign m_arvalid = issue_ok && (owner_reg ? s1_arvalid : s0_arvalid);
assign s0_arready = !owner_reg && issue_ok && m_arready;
assign s1_arready = owner_reg && issue_ok && m_arready;

assign s0_rdata = m_rdata;
assign s1_rdata = m_rdata;
assign s0_rresp = m_rresp;
assign s1_rresp = m_rresp;
assign s0_rlast = m_rlast;
assign s1_rlast = m_rlast;
assign s0_rvalid = !owner_reg && m_rvalid;
assign s1_rvalid = owner_reg && m_rvalid;
assign m_rready = owner_reg ? s1_rready : s0_rready;

wire aw_hs = m_awvalid && m_awready;
wire w_last_hs = m_wvalid && m_wready && m_wlast;
wire b_hs = m_bvalid && m_bready;
wire ar_hs = m_arvalid && m_arready;
wire r_last_hs = m_rvalid && m_rready && m_rlast;

wire [9:0] rd_out_next = rd_out_reg + {9'd0, ar_hs} - {9'd0, r_last_hs};
wire [9:0] wr_out_next = wr_out_reg + {9'd0, aw_hs} - {9'd0, b_hs};

always @(posedge clk) begin
    rd_out_reg <= rd_out_next;
    wr_out_reg <= wr_out_next;
    w_due_reg <= w_due_reg + {9'd0, aw_hs} - {9'd0, w_last_hs};
    if ((aw_hs || ar_hs) && turn_reg != 8'd0) begin
        turn_reg <= turn_reg - 8'd1;
    end
    // Hand over once the owner's turn is used (or it has nothing to issue) and it has nothing
    // in flight (no address passes then while the other asks, so the counts only fall).
    if (other_asks && (turn_reg == 8'd0 || !owner_asks) && rd_out_next == 10'd0
            && wr_out_next == 10'd0 && !aw_hs && !ar_hs) begin
        owner_reg <= !owner_reg;
        turn_reg <= TURN_N;
    end
    if (rst) begin
        owner_reg <= 1'b0;
        turn_reg <= 8'd0;
        rd_out_reg <= 10'd0;
        wr_out_reg <= 10'd0;
        w_due_reg <= 10'd0;
    end
end

`ifdef FORMAL
// Formal properties: one master in flight, answers routed (hw/scripts/formal.sh).
`include "nlb_axi_mux2_props.vh"
`endif

endmodule

`resetall
