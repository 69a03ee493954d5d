`resetall
`timescale 1ns / 1ps
`default_nettype none

// The flow hash of hw/regmap.toml [hash]: CRC-32C over the 40-byte canonical key, then the
// murmur3 fmix32 finaliser; fully pipelined, one key per clock, LATENCY = 6 clocks.
//
// Key layout on s_key: canonical key byte 0 (key_type) in the top byte, byte 39 in bits 7..0,
// i.e. the natural concatenation {key_type, protocol, src_port, dst_port, 16'h0, src_addr,
// dst_addr} of docs/regmap.md "Flow hash". Every constant comes from nlb_regmap.vh.
//
// Stages (each ends in a register; logic levels are LUT6 estimates):
//   1  CRC XOR matrix, part 1: CRC_GROUPS partial results over KEY_BITS/CRC_GROUPS key bits
//      each (<= 40-input XOR, 3 levels)
//   2  CRC XOR matrix, part 2: XOR of the partials and the constant term; the first mix step
//      h ^= h >> 16 is linear too and is folded into the matrix (2 levels)
//   3  h * MIX_MUL1 as a carry-save Wallace tree (sum, carry) (about 6 levels)
//   4  sum + carry, then h ^= h >> 13 (one 32-bit carry chain + 1 level)
//   5  h * MIX_MUL2 as a carry-save Wallace tree
//   6  sum + carry, then h ^= h >> 16 = the flow hash
// The pipeline never stalls: m_valid follows s_valid exactly LATENCY clocks later; admission
// control belongs upstream. s_user travels with its key (a tag, a descriptor index).
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_flow_hash (
    clk,
    rst,
    s_key,
    s_user,
    s_valid,
    m_hash,
    m_user,
    m_valid
);

`include "nlb_regmap.vh"

// Width of the sideband carried alongside each key, bits (>= 1).
parameter USER_WIDTH = 1;

// Clocks from s_valid to m_valid.
localparam LATENCY = 6;
// Key width in bits.
localparam KEY_BITS = NLB_HASH_KEY_BYTES * 8;
// The key is split into this many groups for the first XOR stage.
localparam CRC_GROUPS = 8;
localparam GROUP_BITS = KEY_BITS / CRC_GROUPS;
// One row of the CRC matrix: KEY_BITS mask bits plus the constant term in the top bit.
localparam ROW_BITS = KEY_BITS + 1;

input  wire                  clk;
input  wire                  rst;
input  wire [KEY_BITS-1:0]   s_key;
input  wire [USER_WIDTH-1:0] s_user;
input  wire                  s_valid;
output wire [31:0]           m_hash;
output wire [USER_WIDTH-1:0] m_user;
output wire                  m_valid;

initial begin
    if (KEY_BITS % CRC_GROUPS != 0) begin
        $error("nlb_flow_hash: KEY_BITS (%0d) must split into %0d equal groups", KEY_BITS,
            CRC_GROUPS);
        $finish;
    end
    if (USER_WIDTH < 1) begin
        $error("nlb_flow_hash: USER_WIDTH must be at least 1");
        $finish;
    end
end

// The CRC is affine over GF(2): crc = M * key + c. Run the bit-serial reflected CRC once at
// elaboration on symbolic bits: every state bit is a row (which key bits it is the XOR of,
// plus the constant). Key byte i (i = 0 first) sits at s_key[KEY_BITS-1-8*i -: 8] and is fed
// LSB first, as the reflected CRC does. Then apply xorout and h ^= h >> MIX_SHIFT1.
function [32*ROW_BITS-1:0] crc_mix_matrix(input integer dummy);
    reg [32*ROW_BITS-1:0] st;
    reg [ROW_BITS-1:0] fb;
    integer i, j;
    begin
        for (j = 0; j < 32; j = j + 1) begin
            st[j*ROW_BITS +: ROW_BITS] = {NLB_HASH_CRC_INIT[j], {KEY_BITS{1'b0}}};
        end
        for (i = 0; i < KEY_BITS + 0 * dummy; i = i + 1) begin
            fb = st[0 +: ROW_BITS];
            fb[KEY_BITS - 8*(i/8 + 1) + i%8] = !fb[KEY_BITS - 8*(i/8 + 1) + i%8];
            st = st >> ROW_BITS;
            for (j = 0; j < 32; j = j + 1) begin
                if (NLB_HASH_CRC_POLY_REFLECTED[j]) begin
                    st[j*ROW_BITS +: ROW_BITS] = st[j*ROW_BITS +: ROW_BITS] ^ fb;
                end
            end
        end
        for (j = 0; j < 32; j = j + 1) begin
            st[j*ROW_BITS + KEY_BITS] = st[j*ROW_BITS + KEY_BITS] ^ NLB_HASH_CRC_XOROUT[j];
        end
        // h ^= h >> MIX_SHIFT1: low bits first, each reads a higher, still unmixed bit.
        for (j = 0; j + NLB_HASH_MIX_SHIFT1 < 32; j = j + 1) begin
            st[j*ROW_BITS +: ROW_BITS] = st[j*ROW_BITS +: ROW_BITS]
                ^ st[(j + NLB_HASH_MIX_SHIFT1)*ROW_BITS +: ROW_BITS];
        end
        crc_mix_matrix = st;
    end
endfunction

localparam [32*ROW_BITS-1:0] MATRIX = crc_mix_matrix(0);

genvar g, j;

// ---- stage 1: partial XORs per key group ------------------------------------------------
reg  [CRC_GROUPS*32-1:0] part_reg = {CRC_GROUPS*32{1'b0}};
wire [CRC_GROUPS*32-1:0] part_next;

generate
    for (g = 0; g < CRC_GROUPS; g = g + 1) begin : g_group
        for (j = 0; j < 32; j = j + 1) begin : g_bit
            assign part_next[g*32 + j] = ^(s_key[g*GROUP_BITS +: GROUP_BITS]
                & MATRIX[j*ROW_BITS + g*GROUP_BITS +: GROUP_BITS]);
        end
    end
endgenerate

// ---- stage 2: XOR of the partials + constant = crc with the first mix step ---------------
reg  [31:0] mix1_reg = 32'd0;
wire [31:0] mix1_next;

generate
    for (j = 0; j < 32; j = j + 1) begin : g_fold
        wire [CRC_GROUPS-1:0] column;
        for (g = 0; g < CRC_GROUPS; g = g + 1) begin : g_col
            assign column[g] = part_reg[g*32 + j];
        end
        assign mix1_next[j] = (^column) ^ MATRIX[j*ROW_BITS + KEY_BITS];
    end
endgenerate

// ---- stage 3: h * MIX_MUL1, carry-save --------------------------------------------------
reg  [31:0] mul1_sum_reg = 32'd0;
reg  [31:0] mul1_carry_reg = 32'd0;
wire [31:0] mul1_sum_next;
wire [31:0] mul1_carry_next;

nlb_mul_const_csa #(
    .WIDTH(32),
    .CONST(NLB_HASH_MIX_MUL1)
) mul1_inst (
    .x(mix1_reg),
    .sum(mul1_sum_next),
    .carry(mul1_carry_next)
);

// ---- stage 4: resolve the carries, h ^= h >> MIX_SHIFT2 ----------------------------------
reg  [31:0] mix2_reg = 32'd0;
wire [31:0] mul1_product = mul1_sum_reg + mul1_carry_reg;
wire [31:0] mix2_next = mul1_product ^ (mul1_product >> NLB_HASH_MIX_SHIFT2);

// ---- stage 5: h * MIX_MUL2, carry-save --------------------------------------------------
reg  [31:0] mul2_sum_reg = 32'd0;
reg  [31:0] mul2_carry_reg = 32'd0;
wire [31:0] mul2_sum_next;
wire [31:0] mul2_carry_next;

nlb_mul_const_csa #(
    .WIDTH(32),
    .CONST(NLB_HASH_MIX_MUL2)
) mul2_inst (
    .x(mix2_reg),
    .sum(mul2_sum_next),
    .carry(mul2_carry_next)
);

// ---- stage 6: resolve the carries, h ^= h >> MIX_SHIFT3 ----------------------------------
reg  [31:0] hash_reg = 32'd0;
wire [31:0] mul2_product = mul2_sum_reg + mul2_carry_reg;
wire [31:0] hash_next = mul2_product ^ (mul2_product >> NLB_HASH_MIX_SHIFT3);

// ---- valid and sideband shift registers ---------------------------------------------------
reg [LATENCY-1:0]            valid_pipe_reg = {LATENCY{1'b0}};
reg [LATENCY*USER_WIDTH-1:0] user_pipe_reg = {LATENCY*USER_WIDTH{1'b0}};

always @(posedge clk) begin
    part_reg <= part_next;
    mix1_reg <= mix1_next;
    mul1_sum_reg <= mul1_sum_next;
    mul1_carry_reg <= mul1_carry_next;
    mix2_reg <= mix2_next;
    mul2_sum_reg <= mul2_sum_next;
    mul2_carry_reg <= mul2_carry_next;
    hash_reg <= hash_next;

    valid_pipe_reg <= {valid_pipe_reg[LATENCY-2:0], s_valid};
    user_pipe_reg <= {user_pipe_reg[(LATENCY-1)*USER_WIDTH-1:0], s_user};

    if (rst) begin
        valid_pipe_reg <= {LATENCY{1'b0}};
    end
end

assign m_hash = hash_reg;
assign m_user = user_pipe_reg[(LATENCY-1)*USER_WIDTH +: USER_WIDTH];
assign m_valid = valid_pipe_reg[LATENCY-1];

endmodule

`resetall
