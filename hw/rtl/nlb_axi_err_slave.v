`resetall
`timescale 1ns / 1ps
`default_nettype none

// An AXI4 slave that refuses everything: each write burst is taken whole and answered DECERR,
// each read burst answered with arlen + 1 beats of zeros, DECERR. It ends a master's port where
// nothing is behind it (a board build without the host DMA path), so the master sees an error
// and goes on, instead of waiting for an answer that never comes.
module nlb_axi_err_slave #(
    parameter DATA_WIDTH = 512
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  s_axi_awvalid,
    output wire                  s_axi_awready,
    input  wire                  s_axi_wvalid,
    output wire                  s_axi_wready,
    input  wire                  s_axi_wlast,
    output wire [1:0]            s_axi_bresp,
    output wire                  s_axi_bvalid,
    input  wire                  s_axi_bready,
    input  wire [7:0]            s_axi_arlen,
    input  wire                  s_axi_arvalid,
    output wire                  s_axi_arready,
    output wire [DATA_WIDTH-1:0] s_axi_rdata,
    output wire [1:0]            s_axi_rresp,
    output wire                  s_axi_rlast,
    output wire                  s_axi_rvalid,
    input  wire                  s_axi_rready
);

localparam [1:0] DECERR = 2'b11;

// Write addresses and whole write bursts taken and not yet answered (at most 7 each).
reg [2:0] aw_count_reg = 3'd0;
reg [2:0] w_count_reg = 3'd0;
reg       bvalid_reg = 1'b0;
reg       r_busy_reg = 1'b0;
reg [7:0] r_left_reg = 8'd0;

wire aw_take = s_axi_awvalid && aw_count_reg != 3'd7;
wire w_room = w_count_reg != 3'd7;
wire w_done = s_axi_wvalid && w_room && s_axi_wlast;
wire b_issue = !bvalid_reg && aw_count_reg != 3'd0 && w_count_reg != 3'd0;
wire b_done = bvalid_reg && s_axi_bready;
wire ar_take = s_axi_arvalid && !r_busy_reg;
wire r_beat = r_busy_reg && s_axi_rready;

always @(posedge clk) begin
    aw_count_reg <= aw_count_reg + {2'd0, aw_take} - {2'd0, b_issue};
    w_count_reg <= w_count_reg + {2'd0, w_done} - {2'd0, b_issue};
    if (b_issue) begin
        bvalid_reg <= 1'b1;
    end else if (b_done) begin
        bvalid_reg <= 1'b0;
    end
    if (ar_take) begin
        r_busy_reg <= 1'b1;
        r_left_reg <= s_axi_arlen;
    end else if (r_beat) begin
        r_left_reg <= r_left_reg - 1'b1;
        if (r_left_reg == 8'd0) begin
            r_busy_reg <= 1'b0;
        end
    end
    if (rst) begin
        aw_count_reg <= 3'd0;
        w_count_reg <= 3'd0;
        bvalid_reg <= 1'b0;
        r_busy_reg <= 1'b0;
        r_left_reg <= 8'd0;
    end
end

assign s_axi_awready = aw_count_reg != 3'd7;
assign s_axi_wready = w_room;
assign s_axi_bresp = DECERR;
assign s_axi_bvalid = bvalid_reg;
assign s_axi_arready = !r_busy_reg;
assign s_axi_rdata = {DATA_WIDTH{1'b0}};
assign s_axi_rresp = DECERR;
assign s_axi_rlast = r_left_reg == 8'd0;
assign s_axi_rvalid = r_busy_reg;

`ifdef FORMAL
`include "nlb_axi_err_slave_props.vh"
`endif

endmodule

`resetall
