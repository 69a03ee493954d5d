`resetall
`timescale 1ns / 1ps
`default_nettype none

// Hit bits of the connection table: one bit per entry, set by the pipeline on a hit, read and
// cleared 32 at a time by the host (conntrack.hit_read).
//
// Each of the 32 lanes (entry index bits 4..0) is its own one-bit memory of ROWS rows, so a
// set writes one lane without a read. A read-and-clear of a row reads every lane in clock c0
// and writes zeros in c1 to the lanes that read 1; it serialises exactly against the sets:
// a set in c0 or before counts as before the read (the bit reads 1 and is cleared), a set in
// c1 or later as after it (the clear skips that lane, the bit stays set). Reads must be at
// least two clocks apart (the conntrack block issues one per register read).
module nlb_hit_bits #(
    // Rows of 32 entries (a power of two, >= 2).
    parameter ROWS = 512,
    // Row address bits (derived; do not override).
    parameter ROW_BITS = $clog2(ROWS)
) (
    input  wire                  clk,
    input  wire                  rst,

    // Pipeline: set the bit of entry set_index.
    input  wire                  set_en,
    input  wire [ROW_BITS+4:0]   set_index,

    // Host: read and clear row rc_row; rc_data is valid with rc_valid two clocks later.
    input  wire                  rc_en,
    input  wire [ROW_BITS-1:0]   rc_row,
    output wire                  rc_valid,
    output wire [31:0]           rc_data
);

initial begin
    if (ROWS < 2 || (1 << ROW_BITS) != ROWS) begin
        $error("nlb_hit_bits: ROWS (%0d) must be a power of two >= 2", ROWS);
        $finish;
    end
end

wire [ROW_BITS-1:0] set_row = set_index[ROW_BITS+4:5];
wire [4:0]          set_lane = set_index[4:0];

// c1 state: the row being cleared and the lanes set in c0.
reg                 c1_valid_reg = 1'b0;
reg [ROW_BITS-1:0]  c1_row_reg = {ROW_BITS{1'b0}};
reg [31:0]          c1_set_reg = 32'd0;
reg                 out_valid_reg = 1'b0;
reg [31:0]          out_data_reg = 32'd0;

// Lanes the pipeline sets in this clock in the row of a read (c0) or a clear (c1).
wire [31:0] set_onehot = 32'd1 << set_lane;
wire [31:0] set_c0 = (set_en && rc_en && set_row == rc_row) ? set_onehot : 32'd0;
wire [31:0] set_c1 = (set_en && c1_valid_reg && set_row == c1_row_reg) ? set_onehot : 32'd0;

wire [31:0] lane_q;
// Port B's address: the row being cleared in c1, else the row a read asks for.
wire [ROW_BITS-1:0] b_row = c1_valid_reg ? c1_row_reg : rc_row;
// What the read returns: the bits before c0 plus the sets of c0 (which count as before it).
wire [31:0] read_bits = lane_q | c1_set_reg;
wire [31:0] clear_lanes = read_bits & ~set_c1;

genvar l;
generate
    for (l = 0; l < 32; l = l + 1) begin : g_lane
        reg mem [0:ROWS-1];
        reg q_reg = 1'b0;
        integer i;
        initial begin
            for (i = 0; i < ROWS; i = i + 1) begin
                mem[i] = 1'b0;
            end
        end
        // Port A: pipeline sets.
        always @(posedge clk) begin
            if (set_en && set_lane == l) begin
                mem[set_row] <= 1'b1;
            end
        end
        // Port B: read in c0, clear in c1, on one address (reads are two clocks apart), so
        // each lane maps to a true-dual-port block RAM.
        always @(posedge clk) begin
            if (rc_en) begin
                q_reg <= mem[b_row];
            end
            if (c1_valid_reg && clear_lanes[l]) begin
                mem[b_row] <= 1'b0;
            end
        end
        assign lane_q[l] = q_reg;
    end
endgenerate

always @(posedge clk) begin
    c1_valid_reg <= rc_en;
    c1_row_reg <= rc_row;
    c1_set_reg <= set_c0;
    out_valid_reg <= c1_valid_reg;
    if (c1_valid_reg) begin
        out_data_reg <= read_bits;
    end
    if (rst) begin
        c1_valid_reg <= 1'b0;
        out_valid_reg <= 1'b0;
    end
end

assign rc_valid = out_valid_reg;
assign rc_data = out_data_reg;

endmodule

`resetall
