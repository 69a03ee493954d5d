`resetall
`timescale 1ns / 1ps
`default_nettype none

// One family of packet counters: ENTRIES entries of four 64-bit values (packets, bytes,
// punts, drops), updated by read-modify-write one operation per clock. An operation adds
// op_count packets (UPDATE; their bytes, and as punts or drops when flagged), or reads the
// entry (READ) or reads and zeroes it (READ_CLEAR) for the host;
// the entry's value before the operation comes out on r_value with r_valid three clocks later
// (as the other blocks count: an operation presented in clock c is taken into stage 1 by the
// edge ending c, into stage 2 by the next, into the result register by the third, so r_valid
// is high in clock c + 3).
//
// Each 64-bit add is split in two 32-bit halves so that no stage holds a 64-bit carry chain:
// the low halves live in one memory, read with the operation and written in stage 1; the
// carries out of them are registered and the high halves, in a second memory read in stage 1,
// are added and written in stage 2. Back-to-back operations on the same entry see each other's
// result in both halves (the previous write of each half is forwarded), so no hit is lost and a
// read returns the low and high halves of the same moment.
module nlb_counter_bank #(
    // Entries (>= 2).
    parameter ENTRIES = 256,
    // Widths of an update's packet count and bytes (a family counting one packet per
    // operation ties op_count to 1).
    parameter COUNT_W = 1,
    parameter BYTES_W = 16,
    // Index bits (derived; do not override).
    parameter INDEX_BITS = $clog2(ENTRIES)
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  op_valid,
    input  wire [1:0]            op_kind,     // 0 UPDATE, 1 READ, 2 READ_CLEAR
    input  wire [INDEX_BITS-1:0] op_index,
    input  wire [COUNT_W-1:0]    op_count,    // UPDATE: packets
    input  wire [BYTES_W-1:0]    op_bytes,    // UPDATE: their bytes
    input  wire                  op_punt,     // UPDATE: they were punted
    input  wire                  op_drop,     // UPDATE: they were dropped
`ifdef NLB_SIM_HOOKS
    // Simulation only (verif/tests/corners.rs; synthesis never defines NLB_SIM_HOOKS): sets
    // entry sim_preset_index to sim_preset_value ({drops, punts, bytes, packets}) so that a
    // test can run traffic across 2^32 and 2^64 without 2^32 packets. The test presets only
    // while no operation is in the bank.
    input  wire                  sim_preset_valid,
    input  wire [INDEX_BITS-1:0] sim_preset_index,
    input  wire [255:0]          sim_preset_value,
`endif

    output wire                  r_valid,     // READ / READ_CLEAR done
    output wire [255:0]          r_value      // {drops, punts, bytes, packets}
);

localparam [1:0] OP_UPDATE = 2'd0;
localparam [1:0] OP_READ_CLEAR = 2'd2;

initial begin
    if (ENTRIES < 2 || INDEX_BITS != $clog2(ENTRIES) || COUNT_W < 1 || COUNT_W > 16
            || BYTES_W < 1 || BYTES_W > 31) begin
        $error("nlb_counter_bank: ENTRIES >= 2 (INDEX_BITS derived), COUNT_W 1..16, BYTES_W 1..31");
        $finish;
    end
end

// {drops, punts, bytes, packets}, 32 bits each: the low halves and the high halves.
reg [127:0] mem_lo [0:ENTRIES-1];
reg [127:0] mem_hi [0:ENTRIES-1];

// Counters start at zero (block RAM and UltraRAM come up zeroed on the card). The synthesis
// estimates (hw/scripts/synth.sh) leave the loop out: Yosys unrolls it entry by entry, which at
// the u280 profile's 65,536 backends takes it longer than the rest of nlb_top, for contents
// alone, no logic.
`ifndef NLB_SYNTH_ESTIMATE
integer i;
initial begin
    for (i = 0; i < ENTRIES; i = i + 1) begin
        mem_lo[i] = 128'd0;
        mem_hi[i] = 128'd0;
    end
end
`endif

wire op_writes = op_valid && (op_kind == OP_UPDATE || op_kind == OP_READ_CLEAR);

// Stage 1: the low halves read, the operation beside it; the low halves added and written.
reg                  s1_valid_reg = 1'b0;
reg                  s1_writes_reg = 1'b0;
reg                  s1_update_reg = 1'b0;
reg [INDEX_BITS-1:0] s1_index_reg = {INDEX_BITS{1'b0}};
reg [COUNT_W-1:0]    s1_count_reg = {COUNT_W{1'b0}};
reg [BYTES_W-1:0]    s1_bytes_reg = {BYTES_W{1'b0}};
reg                  s1_punt_reg = 1'b0;
reg                  s1_drop_reg = 1'b0;
reg [127:0]          q_lo_reg = 128'd0;
// The operation ahead (now in stage 2) wrote the same entry's low halves after the read:
// compared a clock early so that stage 1 only selects.
reg                  s1_fwd_reg = 1'b0;
reg [127:0]          fwd_lo_reg = 128'd0;

// Stage 2: the high halves read, the carries beside them; the high halves added and written.
reg                  s2_valid_reg = 1'b0;
reg                  s2_writes_reg = 1'b0;
reg                  s2_update_reg = 1'b0;
reg [INDEX_BITS-1:0] s2_index_reg = {INDEX_BITS{1'b0}};
reg [3:0]            s2_carry_reg = 4'd0;
reg [127:0]          s2_old_lo_reg = 128'd0;
reg [127:0]          q_hi_reg = 128'd0;
reg                  s2_fwd_reg = 1'b0;
reg [127:0]          fwd_hi_reg = 128'd0;

reg                  r_valid_reg = 1'b0;
reg [255:0]          r_value_reg = 256'd0;

wire [127:0] old_lo = s1_fwd_reg ? fwd_lo_reg : q_lo_reg;
wire [32:0]  count33 = {{(33-COUNT_W){1'b0}}, s1_count_reg};
wire [32:0]  packets_lo = {1'b0, old_lo[31:0]} + count33;
wire [32:0]  bytes_lo = {1'b0, old_lo[63:32]} + {{(33-BYTES_W){1'b0}}, s1_bytes_reg};
wire [32:0]  punts_lo = {1'b0, old_lo[95:64]} + (s1_punt_reg ? count33 : 33'd0);
wire [32:0]  drops_lo = {1'b0, old_lo[127:96]} + (s1_drop_reg ? count33 : 33'd0);
wire [127:0] new_lo = s1_update_reg
    ? {drops_lo[31:0], punts_lo[31:0], bytes_lo[31:0], packets_lo[31:0]} : 128'd0;
wire [3:0]   carry = s1_update_reg ? {drops_lo[32], punts_lo[32], bytes_lo[32], packets_lo[32]}
    : 4'd0;

wire [127:0] old_hi = s2_fwd_reg ? fwd_hi_reg : q_hi_reg;
wire [31:0]  packets_hi = old_hi[31:0] + {31'd0, s2_carry_reg[0]};
wire [31:0]  bytes_hi = old_hi[63:32] + {31'd0, s2_carry_reg[1]};
wire [31:0]  punts_hi = old_hi[95:64] + {31'd0, s2_carry_reg[2]};
wire [31:0]  drops_hi = old_hi[127:96] + {31'd0, s2_carry_reg[3]};
wire [127:0] new_hi = s2_update_reg ? {drops_hi, punts_hi, bytes_hi, packets_hi} : 128'd0;

always @(posedge clk) begin
    if (op_valid) begin
        q_lo_reg <= mem_lo[op_index];
    end
    if (s1_writes_reg) begin
        mem_lo[s1_index_reg] <= new_lo;
    end
`ifdef NLB_SIM_HOOKS
    if (sim_preset_valid) begin
        mem_lo[sim_preset_index] <= {sim_preset_value[192 +: 32], sim_preset_value[128 +: 32],
            sim_preset_value[64 +: 32], sim_preset_value[0 +: 32]};
    end
`endif
end

always @(posedge clk) begin
    if (s1_valid_reg) begin
        q_hi_reg <= mem_hi[s1_index_reg];
    end
    if (s2_writes_reg) begin
        mem_hi[s2_index_reg] <= new_hi;
    end
`ifdef NLB_SIM_HOOKS
    if (sim_preset_valid) begin
        mem_hi[sim_preset_index] <= {sim_preset_value[224 +: 32], sim_preset_value[160 +: 32],
            sim_preset_value[96 +: 32], sim_preset_value[32 +: 32]};
    end
`endif
end

always @(posedge clk) begin
    s1_valid_reg <= op_valid;
    s1_writes_reg <= op_writes;
    s1_update_reg <= op_kind == OP_UPDATE;
    s1_index_reg <= op_index;
    s1_count_reg <= op_count;
    s1_bytes_reg <= op_bytes;
    s1_punt_reg <= op_punt;
    s1_drop_reg <= op_drop;
    s1_fwd_reg <= s1_writes_reg && s1_index_reg == op_index;
    fwd_lo_reg <= new_lo;

    s2_valid_reg <= s1_valid_reg;
    s2_writes_reg <= s1_writes_reg;
    s2_update_reg <= s1_update_reg;
    s2_index_reg <= s1_index_reg;
    s2_carry_reg <= carry;
    s2_old_lo_reg <= old_lo;
    s2_fwd_reg <= s2_writes_reg && s2_index_reg == s1_index_reg;
    fwd_hi_reg <= new_hi;

    r_valid_reg <= s2_valid_reg && !s2_update_reg;
    r_value_reg <= {old_hi[127:96], s2_old_lo_reg[127:96], old_hi[95:64], s2_old_lo_reg[95:64],
        old_hi[63:32], s2_old_lo_reg[63:32], old_hi[31:0], s2_old_lo_reg[31:0]};
    if (rst) begin
        s1_valid_reg <= 1'b0;
        s1_writes_reg <= 1'b0;
        s1_fwd_reg <= 1'b0;
        s2_valid_reg <= 1'b0;
        s2_writes_reg <= 1'b0;
        s2_fwd_reg <= 1'b0;
        r_valid_reg <= 1'b0;
    end
end

assign r_valid = r_valid_reg;
assign r_value = r_value_reg;

endmodule

`resetall
