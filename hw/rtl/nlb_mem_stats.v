`resetall
`timescale 1ns / 1ps
`default_nettype none

// The mem block (docs/regmap.md "mem"): figures of the lookup's memory stages, read through
// nlb_regs' extension bus. Per table (connection table, Maglev slots): reads the pipeline
// issued, the sum of their latencies and the longest latency since the register was last
// read (reading clears it); and the clocks the lookup had a descriptor but no memory-stage
// slot. The 64-bit counts add into their low word and carry into the high word a clock later
// (a read of the high word may lag the low word by that clock); they wrap. Writes are ignored.
// The lookup's figures go through a register first (its latency is a subtraction, which the
// 32-bit sums would otherwise follow in the same clock): the counts lag the pipeline a clock.
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_mem_stats (
    clk,
    rst,
    st_ct_read,
    st_ct_lat_valid,
    st_ct_lat,
    st_mg_read,
    st_mg_lat_valid,
    st_mg_lat,
    st_wait,
    ext_wr_req,
    ext_wr_ack,
    ext_rd_req,
    ext_rd_addr,
    ext_rd_data,
    ext_rd_ack
);

`include "nlb_regmap.vh"

input  wire        clk;
input  wire        rst;
// From nlb_lookup.
input  wire        st_ct_read;
input  wire        st_ct_lat_valid;
input  wire [15:0] st_ct_lat;
input  wire        st_mg_read;
input  wire        st_mg_lat_valid;
input  wire [15:0] st_mg_lat;
input  wire        st_wait;
// Extension bus (absolute byte addresses of this block; one access at a time per direction).
input  wire        ext_wr_req;
output wire        ext_wr_ack;
input  wire        ext_rd_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0] ext_rd_addr;
/* verilator lint_on UNUSEDSIGNAL */
output wire [31:0] ext_rd_data;
output wire        ext_rd_ack;

// Five 64-bit counts: 0 ct reads, 1 ct latency sum, 2 maglev reads, 3 maglev latency sum,
// 4 wait clocks.
localparam N = 5;
reg [31:0] lo_reg [0:N-1];
reg [31:0] hi_reg [0:N-1];
reg [N-1:0] carry_reg = {N{1'b0}};
reg [15:0] ct_max_reg = 16'd0;
reg [15:0] mg_max_reg = 16'd0;

reg        ct_read_reg = 1'b0;
reg        ct_lat_valid_reg = 1'b0;
reg [15:0] ct_lat_reg = 16'd0;
reg        mg_read_reg = 1'b0;
reg        mg_lat_valid_reg = 1'b0;
reg [15:0] mg_lat_reg = 16'd0;
reg        wait_reg = 1'b0;

wire [31:0] inc [0:N-1];
assign inc[0] = {31'd0, ct_read_reg};
assign inc[1] = ct_lat_valid_reg ? {16'd0, ct_lat_reg} : 32'd0;
assign inc[2] = {31'd0, mg_read_reg};
assign inc[3] = mg_lat_valid_reg ? {16'd0, mg_lat_reg} : 32'd0;
assign inc[4] = {31'd0, wait_reg};

integer k;
initial begin
    for (k = 0; k < N; k = k + 1) begin
        lo_reg[k] = 32'd0;
        hi_reg[k] = 32'd0;
    end
end

wire [31:0] rd_word = {ext_rd_addr[31:2], 2'b00};
wire        rd_ct_max = ext_rd_req && rd_word == NLB_REG_MEM_CT_LATENCY_MAX;
wire        rd_mg_max = ext_rd_req && rd_word == NLB_REG_MEM_MAGLEV_LATENCY_MAX;

wire [32:0] sum [0:N-1];
genvar g;
generate
    for (g = 0; g < N; g = g + 1) begin : g_sum
        assign sum[g] = {1'b0, lo_reg[g]} + {1'b0, inc[g]};
    end
endgenerate

always @(posedge clk) begin
    ct_read_reg <= st_ct_read;
    ct_lat_valid_reg <= st_ct_lat_valid;
    ct_lat_reg <= st_ct_lat;
    mg_read_reg <= st_mg_read;
    mg_lat_valid_reg <= st_mg_lat_valid;
    mg_lat_reg <= st_mg_lat;
    wait_reg <= st_wait;
    for (k = 0; k < N; k = k + 1) begin
        lo_reg[k] <= sum[k][31:0];
        carry_reg[k] <= sum[k][32];
        hi_reg[k] <= hi_reg[k] + {31'd0, carry_reg[k]};
    end
    // The maximum since the last read: a read returns it and restarts from this clock's.
    if (rd_ct_max) begin
        ct_max_reg <= ct_lat_valid_reg ? ct_lat_reg : 16'd0;
    end else if (ct_lat_valid_reg && ct_lat_reg > ct_max_reg) begin
        ct_max_reg <= ct_lat_reg;
    end
    if (rd_mg_max) begin
        mg_max_reg <= mg_lat_valid_reg ? mg_lat_reg : 16'd0;
    end else if (mg_lat_valid_reg && mg_lat_reg > mg_max_reg) begin
        mg_max_reg <= mg_lat_reg;
    end
    if (rst) begin
        ct_read_reg <= 1'b0;
        ct_lat_valid_reg <= 1'b0;
        mg_read_reg <= 1'b0;
        mg_lat_valid_reg <= 1'b0;
        wait_reg <= 1'b0;
        for (k = 0; k < N; k = k + 1) begin
            lo_reg[k] <= 32'd0;
            hi_reg[k] <= 32'd0;
        end
        carry_reg <= {N{1'b0}};
        ct_max_reg <= 16'd0;
        mg_max_reg <= 16'd0;
    end
end

reg        rd_ack_reg = 1'b0;
reg [31:0] rd_data_reg = 32'd0;
reg        wr_ack_reg = 1'b0;

always @(posedge clk) begin
    rd_ack_reg <= ext_rd_req;
    wr_ack_reg <= ext_wr_req;
    if (ext_rd_req) begin
        case (rd_word)
            NLB_REG_MEM_CT_READS_LO:            rd_data_reg <= lo_reg[0];
            NLB_REG_MEM_CT_READS_HI:            rd_data_reg <= hi_reg[0];
            NLB_REG_MEM_CT_LATENCY_SUM_LO:      rd_data_reg <= lo_reg[1];
            NLB_REG_MEM_CT_LATENCY_SUM_HI:      rd_data_reg <= hi_reg[1];
            NLB_REG_MEM_CT_LATENCY_MAX:         rd_data_reg <= {16'd0, ct_max_reg};
            NLB_REG_MEM_MAGLEV_READS_LO:        rd_data_reg <= lo_reg[2];
            NLB_REG_MEM_MAGLEV_READS_HI:        rd_data_reg <= hi_reg[2];
            NLB_REG_MEM_MAGLEV_LATENCY_SUM_LO:  rd_data_reg <= lo_reg[3];
            NLB_REG_MEM_MAGLEV_LATENCY_SUM_HI:  rd_data_reg <= hi_reg[3];
            NLB_REG_MEM_MAGLEV_LATENCY_MAX:     rd_data_reg <= {16'd0, mg_max_reg};
            NLB_REG_MEM_WAIT_CLOCKS_LO:         rd_data_reg <= lo_reg[4];
            NLB_REG_MEM_WAIT_CLOCKS_HI:         rd_data_reg <= hi_reg[4];
            default:                            rd_data_reg <= 32'd0;
        endcase
    end
    if (rst) begin
        rd_ack_reg <= 1'b0;
        wr_ack_reg <= 1'b0;
    end
end

assign ext_rd_ack = rd_ack_reg;
assign ext_rd_data = rd_data_reg;
assign ext_wr_ack = wr_ack_reg;

endmodule

`resetall
