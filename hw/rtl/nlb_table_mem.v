`resetall
`timescale 1ns / 1ps
`default_nettype none

// One banked lookup table: BANKS (two, or one for the connection table) banks of ROWS rows of LANES entries of WIDTH bits, inferred as
// block RAM. Port A (the pipeline) reads a whole row of one bank; port B (the register
// window) reads or writes one entry. Both ports have RD_LATENCY = 1 + OUTPUT_REG clocks of
// read latency.
//
// Entry index on port B = row * LANES + lane, as the regmap numbers the ways of a bucket (VIP
// table: index = bucket * vip_ways + way), so the pipeline sees every way of a bucket in one
// read. Each lane is its own memory, so a port-B write touches one lane only. Memory contents
// are not reset; they power up as the FPGA configures them (zero) and the loader writes every
// entry it relies on.
module nlb_table_mem #(
    // Entry width in bits.
    parameter WIDTH = 32,
    // Rows per bank (>= 2). The address space per bank is rounded up to a power of two.
    parameter ROWS = 256,
    // Entries per row (a power of two; 1 for plain tables).
    parameter LANES = 1,
    // 1: register the memory outputs (block-RAM output register, for timing); 0: do not.
    parameter OUTPUT_REG = 1,
    // Banks: 2 (table banks, selected per access) or 1 (a_bank and b_bank are ignored).
    parameter BANKS = 2,
    // Row address bits (derived; do not override).
    parameter ROW_BITS = $clog2(ROWS),
    // Lane select bits (derived; do not override).
    parameter LANE_BITS = $clog2(LANES)
) (
    input  wire                      clk,

    // Port A: the pipeline reads a row.
    input  wire                      a_en,
    /* verilator lint_off UNUSEDSIGNAL */ // (with BANKS = 1)
    input  wire                      a_bank,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [ROW_BITS-1:0]       a_row,
    output wire [LANES*WIDTH-1:0]    a_data,

    // Port B: the register window reads or writes one entry (index = row * LANES + lane).
    input  wire                      b_en,
    input  wire                      b_we,
    /* verilator lint_off UNUSEDSIGNAL */ // (with BANKS = 1)
    input  wire                      b_bank,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [ROW_BITS+LANE_BITS-1:0] b_index,
    input  wire [WIDTH-1:0]          b_wdata,
    output wire [WIDTH-1:0]          b_rdata
);

// Clocks from a_en/b_en to data.
localparam RD_LATENCY = 1 + OUTPUT_REG;
localparam WORDS = BANKS << ROW_BITS;
localparam ADDR_BITS = ROW_BITS + (BANKS > 1 ? 1 : 0);
// Lane select width, at least 1 so single-lane tables need no special wiring.
localparam LANE_SEL_BITS = LANE_BITS > 0 ? LANE_BITS : 1;

initial begin
    if (ROWS < 2) begin
        $error("nlb_table_mem: ROWS must be at least 2");
        $finish;
    end
    if (LANES < 1 || (1 << LANE_BITS) != LANES) begin
        $error("nlb_table_mem: LANES (%0d) must be a power of two", LANES);
        $finish;
    end
    if (ROW_BITS != $clog2(ROWS) || LANE_BITS != $clog2(LANES)) begin
        $error("nlb_table_mem: ROW_BITS and LANE_BITS are derived; do not override them");
        $finish;
    end
    if (BANKS != 1 && BANKS != 2) begin
        $error("nlb_table_mem: BANKS must be 1 or 2");
        $finish;
    end
    if (OUTPUT_REG != 0 && OUTPUT_REG != 1) begin
        $error("nlb_table_mem: OUTPUT_REG must be 0 or 1");
        $finish;
    end
end

wire [ROW_BITS-1:0]      b_row = b_index[LANE_BITS +: ROW_BITS];
// Memory addresses: {bank, row}, or the row alone with one bank.
wire [ADDR_BITS-1:0]     a_addr;
wire [ADDR_BITS-1:0]     b_addr;
generate
    if (BANKS > 1) begin : g_banked
        assign a_addr = {a_bank, a_row};
        assign b_addr = {b_bank, b_row};
    end else begin : g_single
        assign a_addr = a_row;
        assign b_addr = b_row;
    end
endgenerate
wire [LANE_SEL_BITS-1:0] b_lane;

// Lane of port B's read, delayed to match the data.
reg  [RD_LATENCY*LANE_SEL_BITS-1:0] b_lane_pipe_reg = {RD_LATENCY*LANE_SEL_BITS{1'b0}};
wire [LANE_SEL_BITS-1:0] b_lane_out = b_lane_pipe_reg[(RD_LATENCY-1)*LANE_SEL_BITS +: LANE_SEL_BITS];

generate
    if (LANES == 1) begin : g_one_lane
        assign b_lane = 1'b0;
    end else begin : g_lanes
        assign b_lane = b_index[LANE_BITS-1:0];
    end
    if (RD_LATENCY == 1) begin : g_lane_pipe1
        always @(posedge clk) begin
            b_lane_pipe_reg <= b_lane;
        end
    end else begin : g_lane_pipe
        always @(posedge clk) begin
            b_lane_pipe_reg <= {b_lane_pipe_reg[(RD_LATENCY-1)*LANE_SEL_BITS-1:0], b_lane};
        end
    end
endgenerate

wire [LANES*WIDTH-1:0] b_row_data;

genvar l;
generate
    for (l = 0; l < LANES; l = l + 1) begin : g_lane
        reg [WIDTH-1:0] mem [0:WORDS-1];
        reg [WIDTH-1:0] a_q_reg = {WIDTH{1'b0}};
        reg [WIDTH-1:0] b_q_reg = {WIDTH{1'b0}};
        localparam [LANE_SEL_BITS-1:0] LANE_ID = l;
        wire b_lane_hit = b_lane == LANE_ID;

        // Port B: read-first (a read in the write's clock returns the old entry).
        always @(posedge clk) begin
            if (b_en) begin
                if (b_we && b_lane_hit) begin
                    mem[b_addr] <= b_wdata;
                end
                b_q_reg <= mem[b_addr];
            end
        end

        // Port A: read only.
        always @(posedge clk) begin
            if (a_en) begin
                a_q_reg <= mem[a_addr];
            end
        end

        if (OUTPUT_REG != 0) begin : g_out_reg
            reg [WIDTH-1:0] a_out_reg = {WIDTH{1'b0}};
            reg [WIDTH-1:0] b_out_reg = {WIDTH{1'b0}};
            always @(posedge clk) begin
                a_out_reg <= a_q_reg;
                b_out_reg <= b_q_reg;
            end
            assign a_data[l*WIDTH +: WIDTH] = a_out_reg;
            assign b_row_data[l*WIDTH +: WIDTH] = b_out_reg;
        end else begin : g_no_out_reg
            assign a_data[l*WIDTH +: WIDTH] = a_q_reg;
            assign b_row_data[l*WIDTH +: WIDTH] = b_q_reg;
        end
    end
endgenerate

assign b_rdata = b_row_data[b_lane_out*WIDTH +: WIDTH];

endmodule

`resetall
