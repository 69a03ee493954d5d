`resetall
`timescale 1ns / 1ps
`default_nettype none

// The counters block (docs/regmap.md "counters", docs/pipeline.md section 11): per reason, per
// verdict, per rule and per backend, packets / bytes / punts / drops, counted from the lookup
// results; the host selects a counter, snapshots it (1) or snapshots and clears it (2) and
// reads the eight latched words, through nlb_regs' extension bus.
//
// Every result counts on its reason and verdict, on its rule when one matched, and on its
// backend when the verdict is FORWARD or DROP with a backend chosen (ids beyond a family's
// table are not counted). Results wait in a small FIFO (s_room falls when it is half full)
// and update the four families together, one result per clock; a snapshot takes a clock of its
// own ahead of them. Selecting an unknown family or an index beyond it latches zeros.
//
// Frames the receive side dropped for lack of room (s_drop_*, reason NO_ROOM_LOOKUP or
// NO_ROOM_BUFFER, docs/pipeline.md section 14.4) have no result: they count in banks of their
// own (per reason, and their share of the DROP verdict), so that they never wait for the
// results' banks that are short of room. A snapshot of one of those two reasons reads its
// drop bank; of the DROP verdict, the verdict bank plus the drops' share (added over two
// clocks).
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_counters (
    clk,
    rst,
    s_res_valid,
    s_res_verdict,
    s_res_reason,
    s_res_rule_valid,
    s_res_rule,
    s_res_backend_valid,
    s_res_backend,
    s_res_len,
    s_room,
    s_drop_valid,
    s_drop_reason,
    s_drop_len,
    ext_wr_req,
    ext_wr_addr,
    ext_wr_data,
    ext_wr_strb,
    ext_wr_ack,
    ext_rd_req,
    ext_rd_addr,
    ext_rd_data,
`ifdef NLB_SIM_HOOKS
    sim_cnt_preset_valid,
    sim_cnt_preset_kind,
    sim_cnt_preset_index,
    sim_cnt_preset_value,
`endif
    ext_rd_ack
);

`include "nlb_regmap.vh"

// Rule and backend counters (the profile's table depths).
parameter RULES = NLB_PROFILE_SIM_RULES;
parameter BACKENDS = NLB_PROFILE_SIM_BACKENDS;
// Frame length width (nlb_parser's LEN_WIDTH).
parameter LEN_WIDTH = 17;
// Results waiting to be counted (a power of two >= 16).
parameter FIFO_DEPTH = 32;

localparam REASONS = 32;
localparam VERDICTS = 4;
localparam RULE_BITS = $clog2(RULES);
localparam BACKEND_BITS = $clog2(BACKENDS);
localparam [1:0] OP_UPDATE = 2'd0;
localparam [1:0] OP_READ = 2'd1;
localparam [1:0] OP_READ_CLEAR = 2'd2;

input  wire                 clk;
input  wire                 rst;

input  wire                 s_res_valid;
input  wire [1:0]           s_res_verdict;
input  wire [4:0]           s_res_reason;
input  wire                 s_res_rule_valid;
input  wire [11:0]          s_res_rule;
input  wire                 s_res_backend_valid;
input  wire [15:0]          s_res_backend;
input  wire [LEN_WIDTH-1:0] s_res_len;
output wire                 s_room;

// A received frame dropped for lack of room: its reason (NO_ROOM_LOOKUP or NO_ROOM_BUFFER)
// and length, at most one per clock.
input  wire                 s_drop_valid;
input  wire [4:0]           s_drop_reason;
input  wire [LEN_WIDTH-1:0] s_drop_len;

input  wire                 ext_wr_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]          ext_wr_addr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [31:0]          ext_wr_data;
input  wire [3:0]           ext_wr_strb;
output wire                 ext_wr_ack;
input  wire                 ext_rd_req;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [31:0]          ext_rd_addr;
/* verilator lint_on UNUSEDSIGNAL */
output wire [31:0]          ext_rd_data;
output wire                 ext_rd_ack;

`ifdef NLB_SIM_HOOKS
// Simulation only (verif/tests/corners.rs; synthesis never defines NLB_SIM_HOOKS): presets
// counter (kind = counter_kind, index) to {drops, punts, bytes, packets}; an index beyond the
// family is ignored. The test presets only while no result is being counted.
input  wire                 sim_cnt_preset_valid;
input  wire [1:0]           sim_cnt_preset_kind;
input  wire [15:0]          sim_cnt_preset_index;
input  wire [255:0]         sim_cnt_preset_value;
wire [31:0] sim_idx32 = {16'd0, sim_cnt_preset_index};
wire [3:0]  sim_go;
assign sim_go[0] = sim_cnt_preset_valid && sim_cnt_preset_kind == NLB_COUNTER_KIND_RULE
    && sim_idx32 < RULES;
assign sim_go[1] = sim_cnt_preset_valid && sim_cnt_preset_kind == NLB_COUNTER_KIND_BACKEND
    && sim_idx32 < BACKENDS;
assign sim_go[2] = sim_cnt_preset_valid && sim_cnt_preset_kind == NLB_COUNTER_KIND_REASON
    && sim_idx32 < REASONS;
assign sim_go[3] = sim_cnt_preset_valid && sim_cnt_preset_kind == NLB_COUNTER_KIND_VERDICT
    && sim_idx32 < VERDICTS;
`endif

function [31:0] strobed(input [31:0] old, input [31:0] value, input [3:0] strb);
    integer k;
    begin
        for (k = 0; k < 4; k = k + 1) begin
            strobed[k*8 +: 8] = strb[k] ? value[k*8 +: 8] : old[k*8 +: 8];
        end
    end
endfunction

// ---- results waiting --------------------------------------------------------------------

// Per result: which families count it, the indices, bytes (saturated at 16 bits: frames
// are at most 16 KiB here), punt, drop.
localparam RW = 4 + 5 + 2 + RULE_BITS + BACKEND_BITS + 16 + 2;
wire in_rule = s_res_rule_valid && {20'd0, s_res_rule} < RULES;
wire in_backend = s_res_backend_valid && {16'd0, s_res_backend} < BACKENDS
    && (s_res_verdict == NLB_VERDICT_FORWARD || s_res_verdict == NLB_VERDICT_DROP);
wire [15:0] res_bytes = |s_res_len[LEN_WIDTH-1:16] ? 16'hFFFF : s_res_len[15:0];
wire [RW-1:0] rec_in = {in_backend, in_rule, 2'b11, s_res_reason, s_res_verdict,
    s_res_rule[RULE_BITS-1:0], s_res_backend[BACKEND_BITS-1:0], res_bytes,
    s_res_verdict == NLB_VERDICT_PUNT, s_res_verdict == NLB_VERDICT_DROP};

wire [RW-1:0] rec;
wire          rec_valid;
wire          rec_take;
wire [$clog2(FIFO_DEPTH):0] rec_count;

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(RW),
    .DEPTH(FIFO_DEPTH)
) rec_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(rec_in),
    .s_valid(s_res_valid),
    .s_ready(),
    .m_data(rec),
    .m_valid(rec_valid),
    .m_ready(rec_take),
    .count(rec_count)
);
/* verilator lint_on PINCONNECTEMPTY */

reg room_reg = 1'b0;
always @(posedge clk) begin
    room_reg <= rec_count < FIFO_DEPTH / 2;
    if (rst) begin
        room_reg <= 1'b0;
    end
end
assign s_room = room_reg;

wire                    r_backend_on, r_rule_on, r_reason_on, r_verdict_on;
wire [4:0]              r_reason;
wire [1:0]              r_verdict;
wire [RULE_BITS-1:0]    r_rule;
wire [BACKEND_BITS-1:0] r_backend;
wire [15:0]             r_bytes;
wire                    r_punt, r_drop;
assign {r_backend_on, r_rule_on, r_reason_on, r_verdict_on, r_reason, r_verdict, r_rule,
    r_backend, r_bytes, r_punt, r_drop} = rec;

// ---- registers ------------------------------------------------------------------------------

reg [31:0]  select_reg = 32'd0;
// A counter as the banks return it: packets, bytes, punts, drops, 64 bits each from bit 0.
localparam L_PACKETS = 0;
localparam L_BYTES = 64;
localparam L_PUNTS = 128;
localparam L_DROPS = 192;
reg [255:0] latch_reg = 256'd0;
reg         host_op_reg = 1'b0;    // a snapshot waits for its clock
reg [1:0]   host_kind_reg = OP_READ;
reg         host_wait_reg = 1'b0;  // a snapshot is in the banks
reg         wr_ack_reg = 1'b0;

localparam KIND_W = NLB_REG_COUNTERS_SELECT_KIND_W;
localparam INDEX_W = NLB_REG_COUNTERS_SELECT_INDEX_W;
localparam KIND_BITS = $bits(NLB_COUNTER_KIND_RULE);
localparam [KIND_W-1:0] KIND_RULE = {{(KIND_W-KIND_BITS){1'b0}}, NLB_COUNTER_KIND_RULE};
localparam [KIND_W-1:0] KIND_BACKEND = {{(KIND_W-KIND_BITS){1'b0}}, NLB_COUNTER_KIND_BACKEND};
localparam [KIND_W-1:0] KIND_REASON = {{(KIND_W-KIND_BITS){1'b0}}, NLB_COUNTER_KIND_REASON};
localparam [KIND_W-1:0] KIND_VERDICT = {{(KIND_W-KIND_BITS){1'b0}}, NLB_COUNTER_KIND_VERDICT};
localparam SNAP_BITS = $bits(NLB_COUNTER_SNAPSHOT_LATCH);
localparam [31:0] SNAP_LATCH = {{(32-SNAP_BITS){1'b0}}, NLB_COUNTER_SNAPSHOT_LATCH};
localparam [31:0] SNAP_LATCH_CLEAR = {{(32-SNAP_BITS){1'b0}}, NLB_COUNTER_SNAPSHOT_LATCH_CLEAR};

wire [KIND_W-1:0]  sel_family = select_reg[NLB_REG_COUNTERS_SELECT_KIND_LSB +: KIND_W];
wire [INDEX_W-1:0] sel_index = select_reg[NLB_REG_COUNTERS_SELECT_INDEX_LSB +: INDEX_W];
wire [31:0]        sel_index32 = {{(32-INDEX_W){1'b0}}, sel_index};
reg                sel_ok;
always @* begin
    case (sel_family)
        KIND_RULE: sel_ok = sel_index32 < RULES;
        KIND_BACKEND: sel_ok = sel_index32 < BACKENDS;
        KIND_REASON: sel_ok = sel_index32 < NLB_REASON_COUNT;
        KIND_VERDICT: sel_ok = sel_index32 < NLB_VERDICT_COUNT;
        default: sel_ok = 1'b0;
    endcase
end

wire [31:0] wr_word = {ext_wr_addr[31:2], 2'b00};
wire [31:0] snap = strobed(32'd0, ext_wr_data, ext_wr_strb);

// The banks take the snapshot when it is waiting, else the oldest result.
wire host_go = host_op_reg;
assign rec_take = rec_valid && !host_go;

wire [3:0]   r_valid;
wire [255:0] r_value [0:3];
// The drop banks' values (0: per reason, 1: the DROP verdict's share).
wire [1:0]   d_valid;
wire [255:0] d_value [0:1];
localparam [INDEX_W-1:0] IDX_ROOM_LOOKUP = {{(INDEX_W-5){1'b0}}, NLB_REASON_NO_ROOM_LOOKUP};
localparam [INDEX_W-1:0] IDX_ROOM_BUFFER = {{(INDEX_W-5){1'b0}}, NLB_REASON_NO_ROOM_BUFFER};
localparam [INDEX_W-1:0] IDX_DROP = {{(INDEX_W-2){1'b0}}, NLB_VERDICT_DROP};
wire sel_drop_reason = sel_family == KIND_REASON
    && (sel_index == IDX_ROOM_LOOKUP || sel_index == IDX_ROOM_BUFFER);
wire sel_drop_verdict = sel_family == KIND_VERDICT && sel_index == IDX_DROP;
reg          la_go_reg = 1'b0;
reg [255:0]  la_main_reg = 256'd0;
reg [255:0]  la_extra_reg = 256'd0;
reg          lb_go_reg = 1'b0;
reg [131:0]  lb_lo_reg = 132'd0;
reg [255:0]  lb_main_hi_reg = 256'd0;
reg [255:0]  lb_extra_hi_reg = 256'd0;
integer      lf;

always @(posedge clk) begin
    wr_ack_reg <= 1'b0;
    if (host_go) begin
        host_op_reg <= 1'b0;
        host_wait_reg <= 1'b1;
    end
    // The selected bank's value plus the drops' share (zero but for the DROP verdict and
    // the two reasons of the receive side): low halves in one clock, high halves in the next.
    la_go_reg <= 1'b0;
    lb_go_reg <= 1'b0;
    if (host_wait_reg && |r_valid) begin
        host_wait_reg <= 1'b0;
        la_go_reg <= 1'b1;
        la_main_reg <= r_value[sel_family[1:0]];
        la_extra_reg <= sel_drop_reason ? d_value[0] : sel_drop_verdict ? d_value[1] : 256'd0;
    end
    if (la_go_reg) begin
        lb_go_reg <= 1'b1;
        for (lf = 0; lf < 4; lf = lf + 1) begin
            lb_lo_reg[lf*33 +: 33] <= {1'b0, la_main_reg[lf*64 +: 32]}
                + {1'b0, la_extra_reg[lf*64 +: 32]};
        end
        lb_main_hi_reg <= la_main_reg;
        lb_extra_hi_reg <= la_extra_reg;
    end
    if (lb_go_reg) begin
        for (lf = 0; lf < 4; lf = lf + 1) begin
            latch_reg[lf*64 +: 32] <= lb_lo_reg[lf*33 +: 32];
            latch_reg[lf*64 + 32 +: 32] <= lb_main_hi_reg[lf*64 + 32 +: 32]
                + lb_extra_hi_reg[lf*64 + 32 +: 32] + {31'd0, lb_lo_reg[lf*33 + 32]};
        end
        wr_ack_reg <= 1'b1;
    end
    if (ext_wr_req) begin
        if (wr_word == NLB_REG_COUNTERS_SELECT) begin
            select_reg <= strobed(select_reg, ext_wr_data, ext_wr_strb);
            wr_ack_reg <= 1'b1;
        end else if (wr_word == NLB_REG_COUNTERS_SNAPSHOT && &ext_wr_strb
                && (snap == SNAP_LATCH || snap == SNAP_LATCH_CLEAR)) begin
            if (sel_ok) begin
                host_op_reg <= 1'b1;
                host_kind_reg <= snap == SNAP_LATCH_CLEAR ? OP_READ_CLEAR : OP_READ;
            end else begin
                latch_reg <= 256'd0;
                wr_ack_reg <= 1'b1;
            end
        end else begin
            wr_ack_reg <= 1'b1;
        end
    end
    if (rst) begin
        select_reg <= 32'd0;
        latch_reg <= 256'd0;
        host_op_reg <= 1'b0;
        host_wait_reg <= 1'b0;
        wr_ack_reg <= 1'b0;
        la_go_reg <= 1'b0;
        lb_go_reg <= 1'b0;
    end
end

assign ext_wr_ack = wr_ack_reg;

reg        rd_ack_reg = 1'b0;
reg [31:0] rd_data_reg = 32'd0;
wire [31:0] rd_word = {ext_rd_addr[31:2], 2'b00};

always @(posedge clk) begin
    rd_ack_reg <= ext_rd_req;
    if (ext_rd_req) begin
        case (rd_word)
            NLB_REG_COUNTERS_SELECT:     rd_data_reg <= select_reg;
            NLB_REG_COUNTERS_PACKETS_LO:
                rd_data_reg <= latch_reg[L_PACKETS + NLB_REG_COUNTERS_PACKETS_LO_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_PACKETS_HI:
                rd_data_reg <= latch_reg[L_PACKETS + NLB_REG_COUNTERS_PACKETS_HI_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_BYTES_LO:
                rd_data_reg <= latch_reg[L_BYTES + NLB_REG_COUNTERS_BYTES_LO_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_BYTES_HI:
                rd_data_reg <= latch_reg[L_BYTES + NLB_REG_COUNTERS_BYTES_HI_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_PUNTS_LO:
                rd_data_reg <= latch_reg[L_PUNTS + NLB_REG_COUNTERS_PUNTS_LO_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_PUNTS_HI:
                rd_data_reg <= latch_reg[L_PUNTS + NLB_REG_COUNTERS_PUNTS_HI_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_DROPS_LO:
                rd_data_reg <= latch_reg[L_DROPS + NLB_REG_COUNTERS_DROPS_LO_WIDE_LSB +: 32];
            NLB_REG_COUNTERS_DROPS_HI:
                rd_data_reg <= latch_reg[L_DROPS + NLB_REG_COUNTERS_DROPS_HI_WIDE_LSB +: 32];
            default:                     rd_data_reg <= 32'd0;
        endcase
    end
    if (rst) begin
        rd_ack_reg <= 1'b0;
    end
end

assign ext_rd_ack = rd_ack_reg;
assign ext_rd_data = rd_data_reg;

// ---- the four families --------------------------------------------------------------------

wire       upd = rec_valid && !host_go;
wire [1:0] fam = sel_family[1:0];

nlb_counter_bank #(.ENTRIES(RULES)) rule_bank_inst (
    .clk(clk), .rst(rst),
    .op_valid(host_go ? fam == 2'd0 : upd && r_rule_on),
    .op_kind(host_go ? host_kind_reg : OP_UPDATE),
    .op_index(host_go ? sel_index[RULE_BITS-1:0] : r_rule),
    .op_count(1'b1), .op_bytes(r_bytes), .op_punt(r_punt), .op_drop(r_drop),
`ifdef NLB_SIM_HOOKS
    .sim_preset_valid(sim_go[0]), .sim_preset_index(sim_cnt_preset_index[RULE_BITS-1:0]),
    .sim_preset_value(sim_cnt_preset_value),
`endif
    .r_valid(r_valid[0]), .r_value(r_value[0])
);

nlb_counter_bank #(.ENTRIES(BACKENDS)) backend_bank_inst (
    .clk(clk), .rst(rst),
    .op_valid(host_go ? fam == 2'd1 : upd && r_backend_on),
    .op_kind(host_go ? host_kind_reg : OP_UPDATE),
    .op_index(host_go ? sel_index[BACKEND_BITS-1:0] : r_backend),
    .op_count(1'b1), .op_bytes(r_bytes), .op_punt(r_punt), .op_drop(r_drop),
`ifdef NLB_SIM_HOOKS
    .sim_preset_valid(sim_go[1]), .sim_preset_index(sim_cnt_preset_index[BACKEND_BITS-1:0]),
    .sim_preset_value(sim_cnt_preset_value),
`endif
    .r_valid(r_valid[1]), .r_value(r_value[1])
);

nlb_counter_bank #(.ENTRIES(REASONS)) reason_bank_inst (
    .clk(clk), .rst(rst),
    .op_valid(host_go ? fam == 2'd2 : upd && r_reason_on),
    .op_kind(host_go ? host_kind_reg : OP_UPDATE),
    .op_index(host_go ? sel_index[4:0] : r_reason),
    .op_count(1'b1), .op_bytes(r_bytes), .op_punt(r_punt), .op_drop(r_drop),
`ifdef NLB_SIM_HOOKS
    .sim_preset_valid(sim_go[2]), .sim_preset_index(sim_cnt_preset_index[4:0]),
    .sim_preset_value(sim_cnt_preset_value),
`endif
    .r_valid(r_valid[2]), .r_value(r_value[2])
);

nlb_counter_bank #(.ENTRIES(VERDICTS)) verdict_bank_inst (
    .clk(clk), .rst(rst),
    .op_valid(host_go ? fam == 2'd3 : upd && r_verdict_on),
    .op_kind(host_go ? host_kind_reg : OP_UPDATE),
    .op_index(host_go ? sel_index[1:0] : r_verdict),
    .op_count(1'b1), .op_bytes(r_bytes), .op_punt(r_punt), .op_drop(r_drop),
`ifdef NLB_SIM_HOOKS
    .sim_preset_valid(sim_go[3]), .sim_preset_index(sim_cnt_preset_index[1:0]),
    .sim_preset_value(sim_cnt_preset_value),
`endif
    .r_valid(r_valid[3]), .r_value(r_value[3])
);

// ---- frames dropped at the receive side -----------------------------------------------------

// Drops come at up to one a clock (a frame each), and a snapshot of a drop bank takes the
// banks' clock: so they are summed per reason (packets, bytes) and a sum goes into both drop
// banks in one update whenever the banks are free, the reasons in turn. A snapshot of a drop
// bank is at most one clock in two (each is an AXI-Lite write), so a sum holds a few drops;
// its counts cannot overflow (255 frames of at most 65,535 bytes fit).
wire        drop_banks_busy = host_go && (sel_drop_reason || sel_drop_verdict);
wire [15:0] drop_bytes = |s_drop_len[LEN_WIDTH-1:16] ? 16'hFFFF : s_drop_len[15:0];
wire        drop_in_buffer = s_drop_reason == NLB_REASON_NO_ROOM_BUFFER;
reg  [7:0]  acc_n_reg [0:1];
reg  [23:0] acc_b_reg [0:1];
reg         turn_reg = 1'b0;     // the reason flushed first when both wait
initial begin
    acc_n_reg[0] = 8'd0;
    acc_n_reg[1] = 8'd0;
    acc_b_reg[0] = 24'd0;
    acc_b_reg[1] = 24'd0;
end
wire [1:0] acc_some = {acc_n_reg[1] != 8'd0, acc_n_reg[0] != 8'd0};
// The sum flushed this clock (index 1: NO_ROOM_BUFFER).
wire       fl_go = !drop_banks_busy && |acc_some;
wire       fl_idx = acc_some[1] && (!acc_some[0] || turn_reg);
wire [7:0]  fl_n = acc_n_reg[fl_idx];
wire [23:0] fl_b = acc_b_reg[fl_idx];

integer ai;
always @(posedge clk) begin
    for (ai = 0; ai < 2; ai = ai + 1) begin
        // A flushed sum restarts from this clock's drop (if it has the same reason).
        if (fl_go && fl_idx == ai[0]) begin
            acc_n_reg[ai] <= {7'd0, s_drop_valid && drop_in_buffer == ai[0]};
            acc_b_reg[ai] <= s_drop_valid && drop_in_buffer == ai[0] ? {8'd0, drop_bytes} : 24'd0;
        end else if (s_drop_valid && drop_in_buffer == ai[0]) begin
            acc_n_reg[ai] <= acc_n_reg[ai] + 8'd1;
            acc_b_reg[ai] <= acc_b_reg[ai] + {8'd0, drop_bytes};
        end
    end
    if (fl_go) begin
        turn_reg <= !fl_idx;
    end
    if (rst) begin
        acc_n_reg[0] <= 8'd0;
        acc_n_reg[1] <= 8'd0;
        acc_b_reg[0] <= 24'd0;
        acc_b_reg[1] <= 24'd0;
        turn_reg <= 1'b0;
    end
end

nlb_counter_bank #(.ENTRIES(2), .COUNT_W(8), .BYTES_W(24)) drop_reason_bank_inst (
    .clk(clk), .rst(rst),
    .op_valid(drop_banks_busy ? sel_drop_reason : fl_go),
    .op_kind(drop_banks_busy ? host_kind_reg : OP_UPDATE),
    .op_index(drop_banks_busy ? sel_index == IDX_ROOM_BUFFER : fl_idx),
    .op_count(fl_n), .op_bytes(fl_b), .op_punt(1'b0), .op_drop(1'b1),
`ifdef NLB_SIM_HOOKS
    .sim_preset_valid(1'b0), .sim_preset_index(1'b0), .sim_preset_value(256'd0),
`endif
    .r_valid(d_valid[0]), .r_value(d_value[0])
);

nlb_counter_bank #(.ENTRIES(2), .COUNT_W(8), .BYTES_W(24)) drop_verdict_bank_inst (
    .clk(clk), .rst(rst),
    .op_valid(drop_banks_busy ? sel_drop_verdict : fl_go),
    .op_kind(drop_banks_busy ? host_kind_reg : OP_UPDATE),
    .op_index(1'b0),
    .op_count(fl_n), .op_bytes(fl_b), .op_punt(1'b0), .op_drop(1'b1),
`ifdef NLB_SIM_HOOKS
    .sim_preset_valid(1'b0), .sim_preset_index(1'b0), .sim_preset_value(256'd0),
`endif
    .r_valid(d_valid[1]), .r_value(d_value[1])
);

// The drop banks answer with the families' banks (same latency); their valid is not needed.
/* verilator lint_off UNUSEDSIGNAL */
wire unused_d_valid = |d_valid;
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
