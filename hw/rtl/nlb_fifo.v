`resetall
`timescale 1ns / 1ps
`default_nettype none

// Synchronous first-word-fall-through FIFO: DEPTH words of WIDTH bits in a memory read
// synchronously (block RAM or LUT RAM) into an output register. One word in and one out per
// clock; m_valid/m_data come straight from registers. The writer must not write when full
// (s_ready low); `count` (words stored, output register included) lets it plan ahead.
module nlb_fifo #(
    // Word width in bits.
    parameter WIDTH = 32,
    // Words in the memory (a power of two >= 2); the output register holds one more.
    parameter DEPTH = 512
) (
    input  wire                   clk,
    input  wire                   rst,

    input  wire [WIDTH-1:0]       s_data,
    input  wire                   s_valid,
    output wire                   s_ready,

    output wire [WIDTH-1:0]       m_data,
    output wire                   m_valid,
    input  wire                   m_ready,

    output wire [$clog2(DEPTH):0] count
);

localparam AW = $clog2(DEPTH);

initial begin
    if (DEPTH < 2 || (1 << AW) != DEPTH) begin
        $error("nlb_fifo: DEPTH (%0d) must be a power of two >= 2", DEPTH);
        $finish;
    end
end

reg [WIDTH-1:0] mem [0:DEPTH-1];
reg [AW:0]      wr_ptr_reg = {(AW+1){1'b0}};
reg [AW:0]      rd_ptr_reg = {(AW+1){1'b0}};
reg [WIDTH-1:0] out_reg = {WIDTH{1'b0}};
reg             out_valid_reg = 1'b0;
reg [AW:0]      count_reg = {(AW+1){1'b0}};

wire full = (wr_ptr_reg ^ rd_ptr_reg) == {1'b1, {AW{1'b0}}};
wire empty = wr_ptr_reg == rd_ptr_reg;
wire wr = s_valid && !full;
// Refill the output register when it is empty or being taken.
wire rd = !empty && (!out_valid_reg || m_ready);
wire take = out_valid_reg && m_ready;

always @(posedge clk) begin
    if (wr) begin
        mem[wr_ptr_reg[AW-1:0]] <= s_data;
        wr_ptr_reg <= wr_ptr_reg + 1'b1;
    end
    if (rd) begin
        out_reg <= mem[rd_ptr_reg[AW-1:0]];
        rd_ptr_reg <= rd_ptr_reg + 1'b1;
        out_valid_reg <= 1'b1;
    end else if (take) begin
        out_valid_reg <= 1'b0;
    end
    count_reg <= count_reg + {{AW{1'b0}}, wr} - {{AW{1'b0}}, take};
    if (rst) begin
        wr_ptr_reg <= {(AW+1){1'b0}};
        rd_ptr_reg <= {(AW+1){1'b0}};
        out_valid_reg <= 1'b0;
        count_reg <= {(AW+1){1'b0}};
    end
end

assign s_ready = !full;
assign m_data = out_reg;
assign m_valid = out_valid_reg;
assign count = count_reg;

`ifdef FORMAL
// Formal properties over this module's registers (hw/scripts/formal.sh).
`include "nlb_fifo_props.vh"
`endif

endmodule

`resetall
