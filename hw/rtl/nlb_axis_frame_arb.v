`resetall
`timescale 1ns / 1ps
`default_nettype none

// Two AXI-Stream sources onto one sink, a frame at a time: once a frame's first beat has gone,
// the sink belongs to that source until the frame's last beat; between frames the source that
// did not go last goes first when both are waiting (so neither starves the other).
//
// Combinational from input to output (a register slice belongs after it where timing asks):
// a waiting source is granted in the clock its first beat is offered.
module nlb_axis_frame_arb #(
    // tdata width in bits.
    parameter DATA_WIDTH = 512,
    // tkeep width: one bit per byte of tdata.
    parameter KEEP_WIDTH = (DATA_WIDTH + 7) / 8
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire [DATA_WIDTH-1:0] s0_axis_tdata,
    input  wire [KEEP_WIDTH-1:0] s0_axis_tkeep,
    input  wire                  s0_axis_tvalid,
    output wire                  s0_axis_tready,
    input  wire                  s0_axis_tlast,

    input  wire [DATA_WIDTH-1:0] s1_axis_tdata,
    input  wire [KEEP_WIDTH-1:0] s1_axis_tkeep,
    input  wire                  s1_axis_tvalid,
    output wire                  s1_axis_tready,
    input  wire                  s1_axis_tlast,

    output wire [DATA_WIDTH-1:0] m_axis_tdata,
    output wire [KEEP_WIDTH-1:0] m_axis_tkeep,
    output wire                  m_axis_tvalid,
    input  wire                  m_axis_tready,
    output wire                  m_axis_tlast,
    // The source of the beat on m_axis (0 or 1).
    output wire                  m_axis_source
);

// A source holds the sink: its frame has started, or its first beat was offered and not yet
// taken (an offered beat stays offered: the other source cannot take its place). Whose.
reg lock_reg = 1'b0;
reg grant1_reg = 1'b0;
// The source of the last frame finished.
reg last1_reg = 1'b0;

wire pick1 = s1_axis_tvalid && (!s0_axis_tvalid || !last1_reg);
wire grant1 = lock_reg ? grant1_reg : pick1;

assign m_axis_tdata = grant1 ? s1_axis_tdata : s0_axis_tdata;
assign m_axis_tkeep = grant1 ? s1_axis_tkeep : s0_axis_tkeep;
assign m_axis_tvalid = grant1 ? s1_axis_tvalid : s0_axis_tvalid;
assign m_axis_tlast = grant1 ? s1_axis_tlast : s0_axis_tlast;
assign m_axis_source = grant1;

assign s0_axis_tready = !grant1 && m_axis_tready;
assign s1_axis_tready = grant1 && m_axis_tready;

always @(posedge clk) begin
    if (m_axis_tvalid) begin
        lock_reg <= !(m_axis_tready && m_axis_tlast);
        grant1_reg <= grant1;
        if (m_axis_tready && m_axis_tlast) begin
            last1_reg <= grant1;
        end
    end
    if (rst) begin
        lock_reg <= 1'b0;
        grant1_reg <= 1'b0;
        last1_reg <= 1'b0;
    end
end

`ifdef FORMAL
`include "nlb_axis_frame_arb_props.vh"
`endif

endmodule

`resetall
