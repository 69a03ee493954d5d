`resetall
`timescale 1ns / 1ps
`default_nettype none

// One family of packet counters: ENTRIES entries of four 64-bit values (packets, bytes,
// punts, drops) in a memory, updated by read-modify-write one operation per clock. An
// operation adds one packet (UPDATE), or reads the entry (READ) or reads and zeroes it
// (READ_CLEAR) for the host; the entry's value before the operation comes out on r_value
// with r_valid one clock later. Back-to-back operations on the same entry see each other's
// result (the previous write is forwarded), so no hit is lost.
module nlb_counter_bank #(
    // Entries (>= 2).
    parameter ENTRIES = 256,
    // Index bits (derived; do not override).
    parameter INDEX_BITS = $clog2(ENTRIES)
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  op_valid,
    input  wire [1:0]            op_kind,     // 0 UPDATE, 1 READ, 2 READ_CLEAR
    input  wire [INDEX_BITS-1:0] op_index,
    input  wire [15:0]           op_bytes,    // UPDATE: bytes of the packet
    input  wire                  op_punt,     // UPDATE: the packet was punted
    input  wire                  op_drop,     // UPDATE: the packet was dropped

    output wire                  r_valid,     // READ / READ_CLEAR done
    output wire [255:0]          r_value      // {drops, punts, bytes, packets}
);

localparam [1:0] OP_UPDATE = 2'd0;
localparam [1:0] OP_READ_CLEAR = 2'd2;

initial begin
    if (ENTRIES < 2 || INDEX_BITS != $clog2(ENTRIES)) begin
        $error("nlb_counter_bank: ENTRIES must be >= 2; INDEX_BITS is derived");
        $finish;
    end
end

reg [255:0] mem [0:ENTRIES-1];

integer i;
initial begin
    for (i = 0; i < ENTRIES; i = i + 1) begin
        mem[i] = 256'd0;
    end
end

// Stage 1: the entry read, the operation beside it.
reg                  s1_valid_reg = 1'b0;
reg [1:0]            s1_kind_reg = 2'd0;
reg [INDEX_BITS-1:0] s1_index_reg = {INDEX_BITS{1'b0}};
reg [15:0]           s1_bytes_reg = 16'd0;
reg                  s1_punt_reg = 1'b0;
reg                  s1_drop_reg = 1'b0;
reg [255:0]          q_reg = 256'd0;
// The last write, for an operation on the same entry right behind it.
reg                  fwd_valid_reg = 1'b0;
reg [INDEX_BITS-1:0] fwd_index_reg = {INDEX_BITS{1'b0}};
reg [255:0]          fwd_value_reg = 256'd0;
reg                  r_valid_reg = 1'b0;
reg [255:0]          r_value_reg = 256'd0;

wire [255:0] old = (fwd_valid_reg && fwd_index_reg == s1_index_reg) ? fwd_value_reg : q_reg;
wire [63:0]  packets = old[63:0] + 64'd1;
wire [63:0]  bytes = old[127:64] + {48'd0, s1_bytes_reg};
wire [63:0]  punts = old[191:128] + {63'd0, s1_punt_reg};
wire [63:0]  drops = old[255:192] + {63'd0, s1_drop_reg};
wire [255:0] new_value = s1_kind_reg == OP_UPDATE ? {drops, punts, bytes, packets} : 256'd0;
wire         writes = s1_valid_reg && (s1_kind_reg == OP_UPDATE || s1_kind_reg == OP_READ_CLEAR);

always @(posedge clk) begin
    if (op_valid) begin
        q_reg <= mem[op_index];
    end
    if (writes) begin
        mem[s1_index_reg] <= new_value;
    end
end

always @(posedge clk) begin
    s1_valid_reg <= op_valid;
    s1_kind_reg <= op_kind;
    s1_index_reg <= op_index;
    s1_bytes_reg <= op_bytes;
    s1_punt_reg <= op_punt;
    s1_drop_reg <= op_drop;
    fwd_valid_reg <= writes;
    fwd_index_reg <= s1_index_reg;
    fwd_value_reg <= new_value;
    r_valid_reg <= s1_valid_reg && s1_kind_reg != OP_UPDATE;
    r_value_reg <= old;
    if (rst) begin
        s1_valid_reg <= 1'b0;
        fwd_valid_reg <= 1'b0;
        r_valid_reg <= 1'b0;
    end
end

assign r_valid = r_valid_reg;
assign r_value = r_value_reg;

endmodule

`resetall
