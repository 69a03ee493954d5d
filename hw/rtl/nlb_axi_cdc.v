`resetall
`timescale 1ns / 1ps
`default_nettype none

// AXI4 bridge between two unrelated clocks: a master on s_clk (s_axi_*, e.g. nlb_host_dma on
// the pipeline clock) reaches a slave on m_clk (m_axi_*, e.g. the PCIe bridge on the host
// clock). Each of the five channels crosses in its own nlb_async_fifo, so the bridge keeps
// AXI's ordering (writes and reads each in order; nothing orders a read against a write, as on
// any AXI interconnect) and any number of bursts in flight, up to what the FIFOs hold. No ID,
// no cache, protection or QoS signals: the master issues one ID.
//
// A channel's word shows on the far side SYNC_STAGES + 2 far clocks after it was taken; a
// burst streams at the slower clock's rate once DATA_DEPTH covers the round trip of the
// pointers (about 2 x (SYNC_STAGES + 2) clocks: 16 words for two synchroniser flops).
//
// Reset: as nlb_async_fifo (both sides together, from one reset synchronised into each
// domain); transfers in flight are lost.
module nlb_axi_cdc #(
    parameter ADDR_WIDTH = 64,
    parameter DATA_WIDTH = 512,
    // Words of the address and write-response FIFOs (a power of two >= 4).
    parameter ADDR_DEPTH = 4,
    // Words of the write-data and read-data FIFOs (a power of two >= 4).
    parameter DATA_DEPTH = 16,
    parameter SYNC_STAGES = 2
) (
    input  wire                        s_clk,
    input  wire                        s_rst,
    input  wire [ADDR_WIDTH-1:0]       s_axi_awaddr,
    input  wire [7:0]                  s_axi_awlen,
    input  wire [2:0]                  s_axi_awsize,
    input  wire [1:0]                  s_axi_awburst,
    input  wire                        s_axi_awvalid,
    output wire                        s_axi_awready,
    input  wire [DATA_WIDTH-1:0]       s_axi_wdata,
    input  wire [DATA_WIDTH/8-1:0]     s_axi_wstrb,
    input  wire                        s_axi_wlast,
    input  wire                        s_axi_wvalid,
    output wire                        s_axi_wready,
    output wire [1:0]                  s_axi_bresp,
    output wire                        s_axi_bvalid,
    input  wire                        s_axi_bready,
    input  wire [ADDR_WIDTH-1:0]       s_axi_araddr,
    input  wire [7:0]                  s_axi_arlen,
    input  wire [2:0]                  s_axi_arsize,
    input  wire [1:0]                  s_axi_arburst,
    input  wire                        s_axi_arvalid,
    output wire                        s_axi_arready,
    output wire [DATA_WIDTH-1:0]       s_axi_rdata,
    output wire [1:0]                  s_axi_rresp,
    output wire                        s_axi_rlast,
    output wire                        s_axi_rvalid,
    input  wire                        s_axi_rready,

    input  wire                        m_clk,
    input  wire                        m_rst,
    output wire [ADDR_WIDTH-1:0]       m_axi_awaddr,
    output wire [7:0]                  m_axi_awlen,
    output wire [2:0]                  m_axi_awsize,
    output wire [1:0]                  m_axi_awburst,
    output wire                        m_axi_awvalid,
    input  wire                        m_axi_awready,
    output wire [DATA_WIDTH-1:0]       m_axi_wdata,
    output wire [DATA_WIDTH/8-1:0]     m_axi_wstrb,
    output wire                        m_axi_wlast,
    output wire                        m_axi_wvalid,
    input  wire                        m_axi_wready,
    input  wire [1:0]                  m_axi_bresp,
    input  wire                        m_axi_bvalid,
    output wire                        m_axi_bready,
    output wire [ADDR_WIDTH-1:0]       m_axi_araddr,
    output wire [7:0]                  m_axi_arlen,
    output wire [2:0]                  m_axi_arsize,
    output wire [1:0]                  m_axi_arburst,
    output wire                        m_axi_arvalid,
    input  wire                        m_axi_arready,
    input  wire [DATA_WIDTH-1:0]       m_axi_rdata,
    input  wire [1:0]                  m_axi_rresp,
    input  wire                        m_axi_rlast,
    input  wire                        m_axi_rvalid,
    output wire                        m_axi_rready
);

// The fill levels are not needed: valid and ready are all the channels use.
/* verilator lint_off PINCONNECTEMPTY */
// AW channel, s_clk to m_clk.
wire [ADDR_WIDTH+12:0] aw_out;
assign {m_axi_awaddr, m_axi_awlen, m_axi_awsize, m_axi_awburst} = aw_out;
nlb_async_fifo #(
    .WIDTH(ADDR_WIDTH + 13),
    .DEPTH(ADDR_DEPTH),
    .SYNC_STAGES(SYNC_STAGES)
) aw_fifo_inst (
    .s_clk(s_clk),
    .s_rst(s_rst),
    .s_data({s_axi_awaddr, s_axi_awlen, s_axi_awsize, s_axi_awburst}),
    .s_valid(s_axi_awvalid),
    .s_ready(s_axi_awready),
    .s_level(),
    .m_clk(m_clk),
    .m_rst(m_rst),
    .m_data(aw_out),
    .m_valid(m_axi_awvalid),
    .m_ready(m_axi_awready),
    .m_level()
);

// W channel, s_clk to m_clk.
wire [DATA_WIDTH+DATA_WIDTH/8:0] w_out;
assign {m_axi_wdata, m_axi_wstrb, m_axi_wlast} = w_out;
nlb_async_fifo #(
    .WIDTH(DATA_WIDTH + DATA_WIDTH / 8 + 1),
    .DEPTH(DATA_DEPTH),
    .SYNC_STAGES(SYNC_STAGES)
) w_fifo_inst (
    .s_clk(s_clk),
    .s_rst(s_rst),
    .s_data({s_axi_wdata, s_axi_wstrb, s_axi_wlast}),
    .s_valid(s_axi_wvalid),
    .s_ready(s_axi_wready),
    .s_level(),
    .m_clk(m_clk),
    .m_rst(m_rst),
    .m_data(w_out),
    .m_valid(m_axi_wvalid),
    .m_ready(m_axi_wready),
    .m_level()
);

// B channel, m_clk to s_clk.
wire [1:0] b_out;
assign {s_axi_bresp} = b_out;
nlb_async_fifo #(
    .WIDTH(2),
    .DEPTH(ADDR_DEPTH),
    .SYNC_STAGES(SYNC_STAGES)
) b_fifo_inst (
    .s_clk(m_clk),
    .s_rst(m_rst),
    .s_data({m_axi_bresp}),
    .s_valid(m_axi_bvalid),
    .s_ready(m_axi_bready),
    .s_level(),
    .m_clk(s_clk),
    .m_rst(s_rst),
    .m_data(b_out),
    .m_valid(s_axi_bvalid),
    .m_ready(s_axi_bready),
    .m_level()
);

// AR channel, s_clk to m_clk.
wire [ADDR_WIDTH+12:0] ar_out;
assign {m_axi_araddr, m_axi_arlen, m_axi_arsize, m_axi_arburst} = ar_out;
nlb_async_fifo #(
    .WIDTH(ADDR_WIDTH + 13),
    .DEPTH(ADDR_DEPTH),
    .SYNC_STAGES(SYNC_STAGES)
) ar_fifo_inst (
    .s_clk(s_clk),
    .s_rst(s_rst),
    .s_data({s_axi_araddr, s_axi_arlen, s_axi_arsize, s_axi_arburst}),
    .s_valid(s_axi_arvalid),
    .s_ready(s_axi_arready),
    .s_level(),
    .m_clk(m_clk),
    .m_rst(m_rst),
    .m_data(ar_out),
    .m_valid(m_axi_arvalid),
    .m_ready(m_axi_arready),
    .m_level()
);

// R channel, m_clk to s_clk.
wire [DATA_WIDTH+2:0] r_out;
assign {s_axi_rdata, s_axi_rresp, s_axi_rlast} = r_out;
nlb_async_fifo #(
    .WIDTH(DATA_WIDTH + 3),
    .DEPTH(DATA_DEPTH),
    .SYNC_STAGES(SYNC_STAGES)
) r_fifo_inst (
    .s_clk(m_clk),
    .s_rst(m_rst),
    .s_data({m_axi_rdata, m_axi_rresp, m_axi_rlast}),
    .s_valid(m_axi_rvalid),
    .s_ready(m_axi_rready),
    .s_level(),
    .m_clk(s_clk),
    .m_rst(s_rst),
    .m_data(r_out),
    .m_valid(s_axi_rvalid),
    .m_ready(s_axi_rready),
    .m_level()
);
/* verilator lint_on PINCONNECTEMPTY */

endmodule

`resetall
