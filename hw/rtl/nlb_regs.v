`resetall
`timescale 1ns / 1ps
`default_nettype none

// AXI-Lite register file of the NIC: the block list, the fw_id and ctrl blocks, and the table
// write window into the banked table memories (which it holds, with read ports for the
// pipeline, except the Maglev slots: those sit behind the lookup's Maglev memory stage, which
// the window reaches through mg_c_*, docs/pipeline.md section 14). Offsets, type/version words
// and layouts come from nlb_regmap.vh.
//
// Behaviour (docs/regmap.md; details the map leaves open are fixed here and in
// docs/verification.md):
// - Every block of the regmap answers TYPE, VERSION and NEXT. The other registers of the
//   conntrack, counters, spi_flash and mem blocks (each over its NLB_BLK_*_SPAN) are forwarded to
//   the extension bus (ext_*: one write and one read at a time, absolute byte addresses; the
//   access completes when the block pulses ext_*_ack, and the AXI response waits for it).
//   Blocks not implemented here or on the extension bus (reboot, queues) read 0 elsewhere and
//   ignore writes.
//   Holes and write-only registers read 0; writes to read-only registers are ignored. Every
//   access gets OKAY. Byte strobes are honoured; the low two address bits are ignored.
// - Registers keep only their fields' bits (the regmap's fields, NLB_REG_*_DEFINED) and read
//   0 elsewhere; outer_src_v4_len and outer_src_v6_len saturate at 32 and 128. Reset values
//   are the RESET_* parameters (nlb_hw::NicSettings::default(), checked by the verif tests).
// - table.cmd's op field names the command, its index field the entry of WRITE_AT/READ_AT
//   (WRITE and READ take the index register and need the index field zero). WRITE/WRITE_AT
//   store the entry's bits from data words 0..WORDS-1 (a Maglev slot: once the memory stage
//   acknowledges the write), then read the entry back from the memory into those
//   words, as READ/READ_AT do (bits past WIDTH read 0; later words are left alone): after a
//   write the window shows what the memory stores. The *_AT forms leave their index in the
//   index register. A bad table id, an index beyond the table's depth, an unknown command, or
//   a pool entry whose affinity or delivery is not a defined enum value sets status.error and
//   touches nothing (index included); a good command clears it. The write response of
//   table.cmd is held until the command has finished, so software never sees status.busy
//   unless it polls through the read channel meanwhile.
// - ctrl.packets_in_flight and ctrl.bank_in_use come from the pipeline (stat_* inputs).
//
// Pipeline read ports: <table>_rd_en/_bank/_row give <table>_rd_data TABLE_RD_LATENCY clocks
// later; the VIP table returns all VIP_WAYS ways of a bucket (way w in bits
// [w*NLB_VIP_ENTRY_WIDTH +: NLB_VIP_ENTRY_WIDTH]).
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_regs (
    clk,
    rst,
    s_axil_awaddr,
    s_axil_awvalid,
    s_axil_awready,
    s_axil_wdata,
    s_axil_wstrb,
    s_axil_wvalid,
    s_axil_wready,
    s_axil_bresp,
    s_axil_bvalid,
    s_axil_bready,
    s_axil_araddr,
    s_axil_arvalid,
    s_axil_arready,
    s_axil_rdata,
    s_axil_rresp,
    s_axil_rvalid,
    s_axil_rready,
    ctrl_enable,
    ctrl_active_bank,
    ctrl_generation,
    ctrl_default_action,
    ctrl_local_mac,
    ctrl_gue_port,
    ctrl_outer_src_v4,
    ctrl_outer_src_v4_len,
    ctrl_outer_src_v6,
    ctrl_outer_src_v6_mask,
    stat_packets_in_flight,
    stat_bank_in_use,
    ext_wr_req,
    ext_wr_addr,
    ext_wr_data,
    ext_wr_strb,
    ext_wr_ack,
    ext_rd_req,
    ext_rd_addr,
    ext_rd_data,
    ext_rd_ack,
    vip_rd_en,
    vip_rd_bank,
    vip_rd_row,
    vip_rd_data,
    rule_rd_en,
    rule_rd_bank,
    rule_rd_row,
    rule_rd_data,
    acl_rd_en,
    acl_rd_bank,
    acl_rd_row,
    acl_rd_data,
    pool_rd_en,
    pool_rd_bank,
    pool_rd_row,
    pool_rd_data,
    mg_c_wr_req,
    mg_c_wr_bank,
    mg_c_wr_index,
    mg_c_wr_slot,
    mg_c_wr_ack,
    mg_c_rd_req,
    mg_c_rd_bank,
    mg_c_rd_index,
    mg_c_rd_ack,
    mg_c_rd_slot,
    backend_rd_en,
    backend_rd_bank,
    backend_rd_row,
    backend_rd_data
);

`include "nlb_regmap.vh"

// ---- parameters -------------------------------------------------------------------------

// AXI-Lite address width: the register space is 2^AXIL_ADDR_WIDTH bytes (16..31).
parameter AXIL_ADDR_WIDTH = 16;
// Capacity profile reported in fw_id.profile_id; the depths below must be that profile's.
parameter PROFILE_ID = NLB_PROFILE_SIM_ID;
// VIP table buckets (rows of the VIP memory).
parameter VIP_BUCKETS = NLB_PROFILE_SIM_VIP_BUCKETS;
// VIP entries per bucket, read in parallel by the pipeline (a power of two).
parameter VIP_WAYS = NLB_PROFILE_SIM_VIP_WAYS;
// Rule descriptors (and ACL entries, one per rule).
parameter RULES = NLB_PROFILE_SIM_RULES;
// Pool descriptors.
parameter POOLS = NLB_PROFILE_SIM_POOLS;
// Maglev slot memory entries.
parameter MAGLEV_SLOTS = NLB_PROFILE_SIM_MAGLEV_SLOTS;
// Backend entries.
parameter BACKENDS = NLB_PROFILE_SIM_BACKENDS;
// Connection table buckets (reported only; the table is not in this module).
parameter CT_BUCKETS = NLB_PROFILE_SIM_CT_BUCKETS;
// Connection entries per bucket (reported only).
parameter CT_WAYS = NLB_PROFILE_SIM_CT_WAYS;
// Punt/learn/inject queue entries (reported only).
parameter QUEUE_DEPTH = NLB_PROFILE_SIM_QUEUE_DEPTH;
// HBM pseudo-channels of the connection table and of the Maglev slots (0: on chip), packets
// per memory stage (reported only).
parameter CT_CHANNELS = NLB_PROFILE_SIM_CT_CHANNELS;
parameter MG_CHANNELS = NLB_PROFILE_SIM_MAGLEV_CHANNELS;
parameter MEM_SLOTS = NLB_PROFILE_SIM_MEM_SLOTS;
// fw_id.build_id: build time, seconds since the Unix epoch (set by the build).
parameter [31:0] BUILD_ID = 32'd0;
// fw_id.git_hash: first 8 hex digits of the source commit (set by the build).
parameter [31:0] GIT_HASH = 32'd0;
// fw_id.board_id: 32'h0280 Alveo U280, 32'h5100 simulated (docs/regmap.md).
parameter [31:0] BOARD_ID = 32'h5100;
// fw_id.part_id: FPGA IDCODE without the revision nibble; 0 in simulation.
parameter [31:0] PART_ID = 32'd0;
// 1: table memories register their outputs (TABLE_RD_LATENCY = 2); 0: they do not (1).
parameter TABLE_OUTPUT_REG = 1;
// Reset values of ctrl registers that do not reset to 0 (nlb_hw::NicSettings::default()).
// Defaults: the regmap's reset values.
// ctrl.local_mac_hi/lo: a locally administered placeholder MAC.
// (local_mac_hi holds the bits above local_mac_lo's: NLB_REG_CTRL_LOCAL_MAC_*_WIDE_LSB.)
parameter [NLB_WIDE_CTRL_LOCAL_MAC_W-1:0] RESET_LOCAL_MAC = {
    NLB_REG_CTRL_LOCAL_MAC_HI_RESET[NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_LSB
        +: NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_W],
    NLB_REG_CTRL_LOCAL_MAC_LO_RESET};
// ctrl.gue_port.
parameter [NLB_REG_CTRL_GUE_PORT_PORT_W-1:0] RESET_GUE_PORT =
    NLB_REG_CTRL_GUE_PORT_RESET[NLB_REG_CTRL_GUE_PORT_PORT_LSB +: NLB_REG_CTRL_GUE_PORT_PORT_W];
// ctrl.outer_src_v4_len (0..32).
parameter [NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_W-1:0] RESET_OUTER_SRC_V4_LEN =
    NLB_REG_CTRL_OUTER_SRC_V4_LEN_RESET[NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_LSB
        +: NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_W];
// ctrl.outer_src_v6_len (0..128).
parameter [NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_W-1:0] RESET_OUTER_SRC_V6_LEN =
    NLB_REG_CTRL_OUTER_SRC_V6_LEN_RESET[NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_LSB
        +: NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_W];

// ---- derived constants --------------------------------------------------------------------

// Pipeline read latency of every table.
localparam TABLE_RD_LATENCY = 1 + TABLE_OUTPUT_REG;

localparam VIP_ROW_BITS = $clog2(VIP_BUCKETS);
localparam VIP_WAY_BITS = $clog2(VIP_WAYS);
localparam RULE_ROW_BITS = $clog2(RULES);
localparam POOL_ROW_BITS = $clog2(POOLS);
localparam MAGLEV_ROW_BITS = $clog2(MAGLEV_SLOTS);
localparam BACKEND_ROW_BITS = $clog2(BACKENDS);

// Entries per bank, as the window indexes them.
localparam VIP_DEPTH = VIP_BUCKETS * VIP_WAYS;

localparam DEFAULT_ACTION_BITS = $bits(NLB_DEFAULT_ACTION_DROP);
localparam DATA_WORDS = NLB_REG_TABLE_DATA_COUNT;
localparam DATA_BITS = DATA_WORDS * 32;
localparam DATA_WORD_BITS = $clog2(DATA_WORDS);
localparam [31:0] DATA_BASE = NLB_REG_TABLE_DATA;

// Entries the table.cmd index field addresses.
localparam CMD_ENTRIES = 1 << NLB_REG_TABLE_CMD_INDEX_W;

// Table ids, widened to the register that holds them.
localparam TABLE_ID_BITS = $bits(NLB_TABLE_VIP);
localparam [TABLE_SEL_W-1:0] TABLE_VIP = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, NLB_TABLE_VIP};
localparam [TABLE_SEL_W-1:0] TABLE_RULE = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, NLB_TABLE_RULE};
localparam [TABLE_SEL_W-1:0] TABLE_ACL = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, NLB_TABLE_ACL};
localparam [TABLE_SEL_W-1:0] TABLE_POOL = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, NLB_TABLE_POOL};
localparam [TABLE_SEL_W-1:0] TABLE_MAGLEV = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, NLB_TABLE_MAGLEV};
localparam [TABLE_SEL_W-1:0] TABLE_BACKEND = {{(TABLE_SEL_W-TABLE_ID_BITS){1'b0}}, NLB_TABLE_BACKEND};

// Field widths of the ctrl registers with fields.
localparam MAC_HI_W = NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_W;
localparam GUE_W = NLB_REG_CTRL_GUE_PORT_PORT_W;
localparam V4_LEN_W = NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_W;
localparam V6_LEN_W = NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_W;
// Prefix lengths saturate at the address width.
localparam [31:0] V4_LEN_MAX = 32;
localparam [31:0] V6_LEN_MAX = 128;

// table.select: the table id field (widened to TABLE_SEL_W above) and the bank bit.
localparam TABLE_SEL_W = NLB_REG_TABLE_SELECT_TABLE_W;

initial begin
    if (AXIL_ADDR_WIDTH < 16 || AXIL_ADDR_WIDTH > 31) begin
        $error("nlb_regs: AXIL_ADDR_WIDTH (%0d) must be 16..31", AXIL_ADDR_WIDTH);
        $finish;
    end
    if ((1 << VIP_WAY_BITS) != VIP_WAYS) begin
        $error("nlb_regs: VIP_WAYS (%0d) must be a power of two", VIP_WAYS);
        $finish;
    end
    if (VIP_BUCKETS < 2 || RULES < 2 || POOLS < 2 || MAGLEV_SLOTS < 2 || BACKENDS < 2) begin
        $error("nlb_regs: every table needs at least two entries");
        $finish;
    end
    if (NLB_VIP_ENTRY_WIDTH > DATA_BITS || NLB_RULE_ENTRY_WIDTH > DATA_BITS
            || NLB_ACL_ENTRY_WIDTH > DATA_BITS || NLB_POOL_ENTRY_WIDTH > DATA_BITS
            || NLB_MAGLEV_SLOT_WIDTH > DATA_BITS || NLB_BACKEND_ENTRY_WIDTH > DATA_BITS) begin
        $error("nlb_regs: a table entry is wider than the data window");
        $finish;
    end
    if ((1 << DATA_WORD_BITS) != DATA_WORDS
            || NLB_REG_TABLE_DATA % (4 * DATA_WORDS) != 0) begin
        $error("nlb_regs: the table data window must be 2^n words, aligned to its size");
        $finish;
    end
    if (VIP_DEPTH > CMD_ENTRIES || RULES > CMD_ENTRIES || POOLS > CMD_ENTRIES
            || MAGLEV_SLOTS > CMD_ENTRIES || BACKENDS > CMD_ENTRIES) begin
        $error("nlb_regs: the table.cmd index field addresses at most %0d entries per table",
            CMD_ENTRIES);
        $finish;
    end
    if (TABLE_OUTPUT_REG != 0 && TABLE_OUTPUT_REG != 1) begin
        $error("nlb_regs: TABLE_OUTPUT_REG must be 0 or 1");
        $finish;
    end
end

// ---- ports --------------------------------------------------------------------------------

input  wire                       clk;
input  wire                       rst;

// AXI-Lite slave (no AxPROT: every access is treated alike). Registers are words: the low
// two address bits are not looked at.
/* verilator lint_off UNUSEDSIGNAL */
input  wire [AXIL_ADDR_WIDTH-1:0] s_axil_awaddr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire                       s_axil_awvalid;
output wire                       s_axil_awready;
input  wire [31:0]                s_axil_wdata;
input  wire [3:0]                 s_axil_wstrb;
input  wire                       s_axil_wvalid;
output wire                       s_axil_wready;
output wire [1:0]                 s_axil_bresp;
output wire                       s_axil_bvalid;
input  wire                       s_axil_bready;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [AXIL_ADDR_WIDTH-1:0] s_axil_araddr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire                       s_axil_arvalid;
output wire                       s_axil_arready;
output wire [31:0]                s_axil_rdata;
output wire [1:0]                 s_axil_rresp;
output wire                       s_axil_rvalid;
input  wire                       s_axil_rready;

// ctrl block, to the pipeline.
output wire                           ctrl_enable;
output wire                           ctrl_active_bank;
output wire [31:0]                    ctrl_generation;
output wire [DEFAULT_ACTION_BITS-1:0] ctrl_default_action;
output wire [NLB_WIDE_CTRL_LOCAL_MAC_W-1:0] ctrl_local_mac;
output wire [GUE_W-1:0]               ctrl_gue_port;
output wire [31:0]                    ctrl_outer_src_v4;
output wire [V4_LEN_W-1:0]            ctrl_outer_src_v4_len;
output wire [NLB_WIDE_CTRL_OUTER_SRC_V6_W-1:0] ctrl_outer_src_v6;
// The outer IPv6 prefix as a mask (ctrl.outer_src_v6_len leading ones), not the length: the
// editor sums the prefix words in the clock a result arrives, and a decode of the length in
// front of that sum was nlb_top's longest path (16 levels). The mask is written in the same
// clock as the length, so no packet sees one without the other.
output wire [127:0]                   ctrl_outer_src_v6_mask;

// ctrl block, from the pipeline.
input  wire [31:0]                stat_packets_in_flight;
input  wire [1:0]                 stat_bank_in_use;

// Extension bus: the conntrack, counters and spi_flash blocks.
output wire                       ext_wr_req;
output wire [31:0]                ext_wr_addr;
output wire [31:0]                ext_wr_data;
output wire [3:0]                 ext_wr_strb;
input  wire                       ext_wr_ack;
output wire                       ext_rd_req;
output wire [31:0]                ext_rd_addr;
input  wire [31:0]                ext_rd_data;
input  wire                       ext_rd_ack;

// Table read ports for the pipeline.
input  wire                                  vip_rd_en;
input  wire                                  vip_rd_bank;
input  wire [VIP_ROW_BITS-1:0]               vip_rd_row;
output wire [VIP_WAYS*NLB_VIP_ENTRY_WIDTH-1:0] vip_rd_data;
input  wire                                  rule_rd_en;
input  wire                                  rule_rd_bank;
input  wire [RULE_ROW_BITS-1:0]              rule_rd_row;
output wire [NLB_RULE_ENTRY_WIDTH-1:0]       rule_rd_data;
input  wire                                  acl_rd_en;
input  wire                                  acl_rd_bank;
input  wire [RULE_ROW_BITS-1:0]              acl_rd_row;
output wire [NLB_ACL_ENTRY_WIDTH-1:0]        acl_rd_data;
input  wire                                  pool_rd_en;
input  wire                                  pool_rd_bank;
input  wire [POOL_ROW_BITS-1:0]              pool_rd_row;
output wire [NLB_POOL_ENTRY_WIDTH-1:0]       pool_rd_data;
input  wire                                  backend_rd_en;
input  wire                                  backend_rd_bank;
input  wire [BACKEND_ROW_BITS-1:0]           backend_rd_row;
output wire [NLB_BACKEND_ENTRY_WIDTH-1:0]    backend_rd_data;

// The Maglev slots, through the lookup's Maglev memory stage (one request at a time, each
// acknowledged: a write once the memory has it, a read with the slot).
output wire                                  mg_c_wr_req;
output wire                                  mg_c_wr_bank;
output wire [MAGLEV_ROW_BITS-1:0]            mg_c_wr_index;
output wire [NLB_MAGLEV_SLOT_WIDTH-1:0]      mg_c_wr_slot;
input  wire                                  mg_c_wr_ack;
output wire                                  mg_c_rd_req;
output wire                                  mg_c_rd_bank;
output wire [MAGLEV_ROW_BITS-1:0]            mg_c_rd_index;
input  wire                                  mg_c_rd_ack;
input  wire [NLB_MAGLEV_SLOT_WIDTH-1:0]      mg_c_rd_slot;

// ---- helpers --------------------------------------------------------------------------------

// A register write with byte strobes applied to the register's current value.
function [31:0] strobed(input [31:0] old, input [31:0] value, input [3:0] strb);
    integer i;
    begin
        for (i = 0; i < 4; i = i + 1) begin
            strobed[i*8 +: 8] = strb[i] ? value[i*8 +: 8] : old[i*8 +: 8];
        end
    end
endfunction

// len leading ones of 128 (len is at most 128: the register saturates): a constant shifted,
// so each bit is a function of the length alone.
function [127:0] v6_prefix_mask(input [V6_LEN_W-1:0] len);
    v6_prefix_mask = ~(~(128'd0) >> len);
endfunction

// ---- AXI-Lite write channel -------------------------------------------------------------
// AW and W are caught independently in holding registers (ready straight from registers);
// a write executes once both are held and no response or table command is outstanding.

localparam [1:0] RESP_OKAY = 2'b00;

reg                       aw_full_reg = 1'b0, aw_full_next;
reg [AXIL_ADDR_WIDTH-3:0] aw_word_reg = {(AXIL_ADDR_WIDTH-2){1'b0}};
reg                       w_full_reg = 1'b0, w_full_next;
reg [31:0]                w_data_reg = 32'd0;
reg [3:0]                 w_strb_reg = 4'd0;
reg                       awready_reg = 1'b0;
reg                       wready_reg = 1'b0;
reg                       bvalid_reg = 1'b0, bvalid_next;

wire aw_take = s_axil_awvalid && awready_reg;
wire w_take = s_axil_wvalid && wready_reg;

// Byte address of the held write, word aligned, widened to compare with the regmap offsets.
wire [31:0] wr_addr = {{(32-AXIL_ADDR_WIDTH){1'b0}}, aw_word_reg, 2'b00};

// ---- registers of the implemented blocks ------------------------------------------------

reg                           enable_reg = 1'b0, enable_next;
reg                           active_bank_reg = 1'b0, active_bank_next;
reg [31:0]                    generation_reg = 32'd0, generation_next;
reg [DEFAULT_ACTION_BITS-1:0] default_action_reg = {DEFAULT_ACTION_BITS{1'b0}};
reg [DEFAULT_ACTION_BITS-1:0] default_action_next;
// The MAC's two registers, in the wide value local_mac.
localparam MAC_LO_AT = NLB_REG_CTRL_LOCAL_MAC_LO_WIDE_LSB;
localparam MAC_HI_AT = NLB_REG_CTRL_LOCAL_MAC_HI_WIDE_LSB;
reg [31:0]                    local_mac_lo_reg = RESET_LOCAL_MAC[MAC_LO_AT +: 32], local_mac_lo_next;
reg [MAC_HI_W-1:0]            local_mac_hi_reg = RESET_LOCAL_MAC[MAC_HI_AT +: MAC_HI_W];
reg [MAC_HI_W-1:0]            local_mac_hi_next;
reg [GUE_W-1:0]               gue_port_reg = RESET_GUE_PORT, gue_port_next;
reg [31:0]                    outer_src_v4_reg = 32'd0, outer_src_v4_next;
reg [V4_LEN_W-1:0]            outer_src_v4_len_reg = RESET_OUTER_SRC_V4_LEN, outer_src_v4_len_next;
reg [NLB_WIDE_CTRL_OUTER_SRC_V6_W-1:0] outer_src_v6_reg = {NLB_WIDE_CTRL_OUTER_SRC_V6_W{1'b0}};
reg [NLB_WIDE_CTRL_OUTER_SRC_V6_W-1:0] outer_src_v6_next;
reg [V6_LEN_W-1:0]            outer_src_v6_len_reg = RESET_OUTER_SRC_V6_LEN, outer_src_v6_len_next;
reg [127:0]                   outer_src_v6_mask_reg = v6_prefix_mask(RESET_OUTER_SRC_V6_LEN);
// The outer IPv6 prefix's four registers, in the wide value outer_src_v6.
localparam V6_0_AT = NLB_REG_CTRL_OUTER_SRC_V6_0_WIDE_LSB;
localparam V6_1_AT = NLB_REG_CTRL_OUTER_SRC_V6_1_WIDE_LSB;
localparam V6_2_AT = NLB_REG_CTRL_OUTER_SRC_V6_2_WIDE_LSB;
localparam V6_3_AT = NLB_REG_CTRL_OUTER_SRC_V6_3_WIDE_LSB;

// table.select keeps its defined bits (the table id and the bank).
reg [31:0]                    select_reg = 32'd0, select_next;
reg [31:0]                    index_reg = 32'd0, index_next;
reg                           error_reg = 1'b0, error_next;
reg [DATA_BITS-1:0]           data_reg = {DATA_BITS{1'b0}}, data_next;

// ---- table command engine ----------------------------------------------------------------

localparam TABLES = 6;
localparam [TABLES-1:0] MAGLEV_BIT = 1 << NLB_TABLE_MAGLEV;

// One-hot port-B enable per table (bit = enum table value), write flag, the read-back that
// follows a write, and a shift register marking when a read's data arrives.
reg [TABLES-1:0]           mem_en_reg = {TABLES{1'b0}}, mem_en_next;
reg                        mem_we_reg = 1'b0, mem_we_next;
reg                        readback_reg = 1'b0, readback_next;
reg                        busy_reg = 1'b0, busy_next;
reg [TABLE_RD_LATENCY-1:0] rd_pipe_reg = {TABLE_RD_LATENCY{1'b0}};
// A Maglev command: the slot's write request, then its read (the read-back of a write).
reg                        mg_wr_req_reg = 1'b0, mg_wr_req_next;
reg                        mg_rd_req_reg = 1'b0, mg_rd_req_next;

// The held write decoded as a table.cmd: its command, and the entry it addresses. It is
// decoded as W is caught, a clock ahead, so that the decode is off the path from the held
// write to the table enables. index_reg is the same then as when the write executes: only an
// executed write changes it, and W is caught after the previous write executed.
wire [31:0] w_cmd_word = strobed(32'd0, s_axil_wdata, s_axil_wstrb);
wire        w_cmd_write;
wire        w_cmd_read;
wire [31:0] w_cmd_index;
reg         cmd_write = 1'b0;
reg         cmd_read = 1'b0;
reg  [31:0] cmd_index = 32'd0;
// Whether cmd_index is inside each table (bit NLB_TABLE_*), compared as W is caught too: the
// 32-bit compares in front of the table enables were the register file's deepest path.
reg  [TABLES-1:0] cmd_in_range = {TABLES{1'b0}};
reg  [TABLES-1:0] w_cmd_in_range;

nlb_table_cmd cmd_inst (
    .cmd_word(w_cmd_word),
    .index_reg(index_reg),
    .cmd_write(w_cmd_write),
    .cmd_read(w_cmd_read),
    .cmd_index(w_cmd_index)
);

always @* begin
    w_cmd_in_range = {TABLES{1'b0}};
    w_cmd_in_range[NLB_TABLE_VIP] = w_cmd_index < VIP_DEPTH;
    w_cmd_in_range[NLB_TABLE_RULE] = w_cmd_index < RULES;
    w_cmd_in_range[NLB_TABLE_ACL] = w_cmd_index < RULES;
    w_cmd_in_range[NLB_TABLE_POOL] = w_cmd_index < POOLS;
    w_cmd_in_range[NLB_TABLE_MAGLEV] = w_cmd_index < MAGLEV_SLOTS;
    w_cmd_in_range[NLB_TABLE_BACKEND] = w_cmd_index < BACKENDS;
end

wire [TABLE_SEL_W-1:0] sel_table = select_reg[NLB_REG_TABLE_SELECT_TABLE_LSB +: TABLE_SEL_W];
wire                   sel_bank = select_reg[NLB_REG_TABLE_SELECT_BANK_LSB];

// The words of the registers with fields: each field in place, the other bits 0. Reads return
// them; a write merges its strobed bytes into them and keeps the fields.
reg [31:0] enable_word, active_bank_word, default_action_word, local_mac_hi_word;
reg [31:0] gue_port_word, v4_len_word, v6_len_word, bank_in_use_word, status_word;
always @* begin
    enable_word = 32'd0;
    enable_word[NLB_REG_CTRL_ENABLE_ENABLE_LSB] = enable_reg;
    active_bank_word = 32'd0;
    active_bank_word[NLB_REG_CTRL_ACTIVE_BANK_BANK_LSB] = active_bank_reg;
    default_action_word = 32'd0;
    default_action_word[NLB_REG_CTRL_DEFAULT_ACTION_ACTION_LSB +: DEFAULT_ACTION_BITS] =
        default_action_reg;
    local_mac_hi_word = 32'd0;
    local_mac_hi_word[NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_LSB +: MAC_HI_W] = local_mac_hi_reg;
    gue_port_word = 32'd0;
    gue_port_word[NLB_REG_CTRL_GUE_PORT_PORT_LSB +: GUE_W] = gue_port_reg;
    v4_len_word = 32'd0;
    v4_len_word[NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_LSB +: V4_LEN_W] = outer_src_v4_len_reg;
    v6_len_word = 32'd0;
    v6_len_word[NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_LSB +: V6_LEN_W] = outer_src_v6_len_reg;
    bank_in_use_word = 32'd0;
    bank_in_use_word[NLB_REG_CTRL_BANK_IN_USE_BANK0_LSB] = stat_bank_in_use[0];
    bank_in_use_word[NLB_REG_CTRL_BANK_IN_USE_BANK1_LSB] = stat_bank_in_use[1];
    status_word = 32'd0;
    status_word[NLB_REG_TABLE_STATUS_BUSY_LSB] = busy_reg;
    status_word[NLB_REG_TABLE_STATUS_ERROR_LSB] = error_reg;
end

wire [NLB_VIP_ENTRY_WIDTH-1:0]     vip_b_rdata;
wire [NLB_RULE_ENTRY_WIDTH-1:0]    rule_b_rdata;
wire [NLB_ACL_ENTRY_WIDTH-1:0]     acl_b_rdata;
wire [NLB_POOL_ENTRY_WIDTH-1:0]    pool_b_rdata;
wire [NLB_MAGLEV_SLOT_WIDTH-1:0]   maglev_b_rdata = mg_c_rd_slot;
wire [NLB_BACKEND_ENTRY_WIDTH-1:0] backend_b_rdata;

// Which table the window addresses, and whether the command's index is inside it.
reg       sel_known;
reg       sel_in_range;
reg [TABLES-1:0] sel_onehot;
// The addressed entry after a read, zero-extended to the window, and the words it covers.
reg [DATA_BITS-1:0] sel_rdata;
reg [DATA_BITS-1:0] sel_rmask;
// The entry in the window is one the table can hold (defined enum values).
reg       sel_entry_ok;

localparam AFF_W = NLB_POOL_ENTRY_AFFINITY_W;
localparam DEL_W = NLB_POOL_ENTRY_DELIVERY_W;
wire [AFF_W-1:0] win_affinity = data_reg[NLB_POOL_ENTRY_AFFINITY_LSB +: AFF_W];
wire [DEL_W-1:0] win_delivery = data_reg[NLB_POOL_ENTRY_DELIVERY_LSB +: DEL_W];
wire win_affinity_ok = win_affinity == NLB_AFFINITY_NONE
    || win_affinity == NLB_AFFINITY_CLIENT_IP
    || win_affinity == NLB_AFFINITY_CLIENT_IP_PROTO
    || win_affinity == NLB_AFFINITY_CLIENT_IP_PORT_PROTO
    || win_affinity == NLB_AFFINITY_CLIENT_IP_NO_DESTINATION;
wire win_delivery_ok = win_delivery == NLB_DELIVERY_L2_DSR
    || win_delivery == NLB_DELIVERY_IPIP
    || win_delivery == NLB_DELIVERY_GUE;

always @* begin
    sel_known = 1'b1;
    sel_in_range = 1'b0;
    sel_onehot = {TABLES{1'b0}};
    sel_rdata = {DATA_BITS{1'b0}};
    sel_rmask = {DATA_BITS{1'b0}};
    sel_entry_ok = 1'b1;
    case (sel_table)
        TABLE_VIP: begin
            sel_in_range = cmd_in_range[NLB_TABLE_VIP];
            sel_onehot[NLB_TABLE_VIP] = 1'b1;
            sel_rdata[NLB_VIP_ENTRY_WIDTH-1:0] = vip_b_rdata;
            sel_rmask[NLB_VIP_ENTRY_WORDS*32-1:0] = {NLB_VIP_ENTRY_WORDS*32{1'b1}};
        end
        TABLE_RULE: begin
            sel_in_range = cmd_in_range[NLB_TABLE_RULE];
            sel_onehot[NLB_TABLE_RULE] = 1'b1;
            sel_rdata[NLB_RULE_ENTRY_WIDTH-1:0] = rule_b_rdata;
            sel_rmask[NLB_RULE_ENTRY_WORDS*32-1:0] = {NLB_RULE_ENTRY_WORDS*32{1'b1}};
        end
        TABLE_ACL: begin
            sel_in_range = cmd_in_range[NLB_TABLE_ACL];
            sel_onehot[NLB_TABLE_ACL] = 1'b1;
            sel_rdata[NLB_ACL_ENTRY_WIDTH-1:0] = acl_b_rdata;
            sel_rmask[NLB_ACL_ENTRY_WORDS*32-1:0] = {NLB_ACL_ENTRY_WORDS*32{1'b1}};
        end
        TABLE_POOL: begin
            sel_in_range = cmd_in_range[NLB_TABLE_POOL];
            sel_onehot[NLB_TABLE_POOL] = 1'b1;
            sel_rdata[NLB_POOL_ENTRY_WIDTH-1:0] = pool_b_rdata;
            sel_rmask[NLB_POOL_ENTRY_WORDS*32-1:0] = {NLB_POOL_ENTRY_WORDS*32{1'b1}};
            sel_entry_ok = win_affinity_ok && win_delivery_ok;
        end
        TABLE_MAGLEV: begin
            sel_in_range = cmd_in_range[NLB_TABLE_MAGLEV];
            sel_onehot[NLB_TABLE_MAGLEV] = 1'b1;
            sel_rdata[NLB_MAGLEV_SLOT_WIDTH-1:0] = maglev_b_rdata;
            sel_rmask[NLB_MAGLEV_SLOT_WORDS*32-1:0] = {NLB_MAGLEV_SLOT_WORDS*32{1'b1}};
        end
        TABLE_BACKEND: begin
            sel_in_range = cmd_in_range[NLB_TABLE_BACKEND];
            sel_onehot[NLB_TABLE_BACKEND] = 1'b1;
            sel_rdata[NLB_BACKEND_ENTRY_WIDTH-1:0] = backend_b_rdata;
            sel_rmask[NLB_BACKEND_ENTRY_WORDS*32-1:0] = {NLB_BACKEND_ENTRY_WORDS*32{1'b1}};
        end
        default: begin
            sel_known = 1'b0;
        end
    endcase
end

// ---- write execution ---------------------------------------------------------------------

// An extension-bus write in progress (its response waits for ext_wr_ack).
reg         ext_wbusy_reg = 1'b0, ext_wbusy_next;
reg         ext_wr_req_reg = 1'b0, ext_wr_req_next;
reg [31:0]  ext_wr_addr_reg = 32'd0;
reg [31:0]  ext_wr_data_reg = 32'd0;
reg [3:0]   ext_wr_strb_reg = 4'd0;

// Whether a word address belongs to the extension bus: the conntrack, counters, dma and
// spi_flash blocks past their header words (which this module answers).
function in_block(input [31:0] a, input [31:0] base, input [31:0] span);
    in_block = a >= base + NLB_BLK_HEADER_BYTES && a < base + span;
endfunction

function is_ext(input [31:0] a);
    is_ext = in_block(a, NLB_BLK_CONNTRACK_BASE, NLB_BLK_CONNTRACK_SPAN)
        || in_block(a, NLB_BLK_COUNTERS_BASE, NLB_BLK_COUNTERS_SPAN)
        || in_block(a, NLB_BLK_DMA_BASE, NLB_BLK_DMA_SPAN)
        || in_block(a, NLB_BLK_SPI_FLASH_BASE, NLB_BLK_SPI_FLASH_SPAN)
        || in_block(a, NLB_BLK_MEM_BASE, NLB_BLK_MEM_SPAN);
endfunction

wire wr_ext = is_ext(wr_addr);
wire do_write = aw_full_reg && w_full_reg && !bvalid_reg && !busy_reg && !ext_wbusy_reg;
wire rd_done = rd_pipe_reg[TABLE_RD_LATENCY-1];

// The data window is aligned to its power-of-two size (checked above), so an address is in
// it when its upper bits match, and its low bits give the word: no subtraction.
wire        wr_in_data = wr_addr[31:DATA_WORD_BITS+2] == DATA_BASE[31:DATA_WORD_BITS+2];
wire [DATA_WORD_BITS-1:0] wr_data_word = wr_addr[DATA_WORD_BITS+1:2];

// The held write merged with the addressed register under the byte strobes.
reg [31:0] merged;
integer    w;

// The window's command is on the Maglev slots (through the Maglev memory stage).
wire sel_maglev = (sel_onehot & MAGLEV_BIT) != {TABLES{1'b0}};

always @* begin
    aw_full_next = aw_full_reg;
    w_full_next = w_full_reg;
    bvalid_next = bvalid_reg && !s_axil_bready;

    enable_next = enable_reg;
    active_bank_next = active_bank_reg;
    generation_next = generation_reg;
    default_action_next = default_action_reg;
    local_mac_lo_next = local_mac_lo_reg;
    local_mac_hi_next = local_mac_hi_reg;
    gue_port_next = gue_port_reg;
    outer_src_v4_next = outer_src_v4_reg;
    outer_src_v4_len_next = outer_src_v4_len_reg;
    outer_src_v6_next = outer_src_v6_reg;
    outer_src_v6_len_next = outer_src_v6_len_reg;
    select_next = select_reg;
    index_next = index_reg;
    error_next = error_reg;
    data_next = data_reg;

    mem_en_next = {TABLES{1'b0}};
    mem_we_next = 1'b0;
    readback_next = 1'b0;
    mg_wr_req_next = 1'b0;
    mg_rd_req_next = 1'b0;
    busy_next = busy_reg;
    merged = 32'd0;
    ext_wbusy_next = ext_wbusy_reg;
    ext_wr_req_next = 1'b0;

    if (ext_wbusy_reg && ext_wr_ack) begin
        ext_wbusy_next = 1'b0;
        bvalid_next = 1'b1;
    end

    if (aw_take) begin
        aw_full_next = 1'b1;
    end
    if (w_take) begin
        w_full_next = 1'b1;
    end

    // A write was stored: read the entry back (the window registers are still).
    if (readback_reg) begin
        mem_en_next = sel_onehot & ~MAGLEV_BIT;
    end
    // A Maglev slot written: read it back. (The memory stage's acks count only while the
    // command in progress is a Maglev one: they answer its requests.)
    if (busy_reg && sel_maglev && mg_c_wr_ack) begin
        mg_rd_req_next = 1'b1;
    end

    // A table read finishing: load the window and release the held response.
    if (busy_reg && (rd_done || (sel_maglev && mg_c_rd_ack))) begin
        data_next = (data_reg & ~sel_rmask) | sel_rdata;
        busy_next = 1'b0;
        bvalid_next = 1'b1;
    end

    if (do_write && wr_ext) begin
        aw_full_next = 1'b0;
        w_full_next = 1'b0;
        ext_wbusy_next = 1'b1;
        ext_wr_req_next = 1'b1;
    end else if (do_write) begin
        aw_full_next = 1'b0;
        w_full_next = 1'b0;
        bvalid_next = 1'b1;

        case (wr_addr)
            NLB_REG_CTRL_ENABLE: begin
                merged = strobed(enable_word, w_data_reg, w_strb_reg);
                enable_next = merged[NLB_REG_CTRL_ENABLE_ENABLE_LSB];
            end
            NLB_REG_CTRL_ACTIVE_BANK: begin
                merged = strobed(active_bank_word, w_data_reg, w_strb_reg);
                active_bank_next = merged[NLB_REG_CTRL_ACTIVE_BANK_BANK_LSB];
            end
            NLB_REG_CTRL_GENERATION: begin
                merged = strobed(generation_reg, w_data_reg, w_strb_reg);
                generation_next = merged;
            end
            NLB_REG_CTRL_DEFAULT_ACTION: begin
                merged = strobed(default_action_word, w_data_reg, w_strb_reg);
                default_action_next =
                    merged[NLB_REG_CTRL_DEFAULT_ACTION_ACTION_LSB +: DEFAULT_ACTION_BITS];
            end
            NLB_REG_CTRL_LOCAL_MAC_LO: begin
                merged = strobed(local_mac_lo_reg, w_data_reg, w_strb_reg);
                local_mac_lo_next = merged;
            end
            NLB_REG_CTRL_LOCAL_MAC_HI: begin
                merged = strobed(local_mac_hi_word, w_data_reg, w_strb_reg);
                local_mac_hi_next = merged[NLB_REG_CTRL_LOCAL_MAC_HI_MAC_HI_LSB +: MAC_HI_W];
            end
            NLB_REG_CTRL_GUE_PORT: begin
                merged = strobed(gue_port_word, w_data_reg, w_strb_reg);
                gue_port_next = merged[NLB_REG_CTRL_GUE_PORT_PORT_LSB +: GUE_W];
            end
            NLB_REG_CTRL_OUTER_SRC_V4: begin
                merged = strobed(outer_src_v4_reg, w_data_reg, w_strb_reg);
                outer_src_v4_next = merged;
            end
            NLB_REG_CTRL_OUTER_SRC_V4_LEN: begin
                merged = strobed(v4_len_word, w_data_reg, w_strb_reg);
                outer_src_v4_len_next = merged > V4_LEN_MAX ? V4_LEN_MAX[V4_LEN_W-1:0]
                    : merged[NLB_REG_CTRL_OUTER_SRC_V4_LEN_LEN_LSB +: V4_LEN_W];
            end
            NLB_REG_CTRL_OUTER_SRC_V6_0: begin
                outer_src_v6_next[V6_0_AT +: 32] = strobed(outer_src_v6_reg[V6_0_AT +: 32],
                    w_data_reg, w_strb_reg);
            end
            NLB_REG_CTRL_OUTER_SRC_V6_1: begin
                outer_src_v6_next[V6_1_AT +: 32] = strobed(outer_src_v6_reg[V6_1_AT +: 32],
                    w_data_reg, w_strb_reg);
            end
            NLB_REG_CTRL_OUTER_SRC_V6_2: begin
                outer_src_v6_next[V6_2_AT +: 32] = strobed(outer_src_v6_reg[V6_2_AT +: 32],
                    w_data_reg, w_strb_reg);
            end
            NLB_REG_CTRL_OUTER_SRC_V6_3: begin
                outer_src_v6_next[V6_3_AT +: 32] = strobed(outer_src_v6_reg[V6_3_AT +: 32],
                    w_data_reg, w_strb_reg);
            end
            NLB_REG_CTRL_OUTER_SRC_V6_LEN: begin
                merged = strobed(v6_len_word, w_data_reg, w_strb_reg);
                outer_src_v6_len_next = merged > V6_LEN_MAX ? V6_LEN_MAX[V6_LEN_W-1:0]
                    : merged[NLB_REG_CTRL_OUTER_SRC_V6_LEN_LEN_LSB +: V6_LEN_W];
            end
            NLB_REG_TABLE_SELECT: begin
                merged = strobed(select_reg, w_data_reg, w_strb_reg);
                select_next = merged & NLB_REG_TABLE_SELECT_DEFINED;
            end
            NLB_REG_TABLE_INDEX: begin
                merged = strobed(index_reg, w_data_reg, w_strb_reg);
                index_next = merged;
            end
            NLB_REG_TABLE_CMD: begin
                // A command acts only on a write of all four bytes (the regmap's rule for
                // partial writes); any other leaves everything as it is.
                if (!(&w_strb_reg)) begin
                    error_next = error_reg;
                end else if (sel_known && sel_in_range
                        && ((cmd_write && sel_entry_ok) || cmd_read)) begin
                    error_next = 1'b0;
                    index_next = cmd_index;
                    mem_en_next = sel_onehot & ~MAGLEV_BIT;
                    mem_we_next = cmd_write;
                    readback_next = cmd_write && !sel_onehot[NLB_TABLE_MAGLEV];
                    mg_wr_req_next = cmd_write && sel_onehot[NLB_TABLE_MAGLEV];
                    mg_rd_req_next = cmd_read && sel_onehot[NLB_TABLE_MAGLEV];
                    // Respond when the entry (read, or read back) is in the window.
                    busy_next = 1'b1;
                    bvalid_next = 1'b0;
                end else begin
                    error_next = 1'b1;
                end
            end
            default: begin
                // Constant selects: a variable one would be lowered to index arithmetic.
                for (w = 0; w < DATA_WORDS; w = w + 1) begin
                    if (wr_in_data && wr_data_word == w[DATA_WORD_BITS-1:0]) begin
                        data_next[w*32 +: 32] = strobed(data_reg[w*32 +: 32], w_data_reg,
                            w_strb_reg);
                    end
                end
            end
        endcase
    end
end

always @(posedge clk) begin
    aw_full_reg <= aw_full_next;
    w_full_reg <= w_full_next;
    awready_reg <= !aw_full_next;
    wready_reg <= !w_full_next;
    bvalid_reg <= bvalid_next;
    if (aw_take) begin
        aw_word_reg <= s_axil_awaddr[AXIL_ADDR_WIDTH-1:2];
    end
    if (w_take) begin
        w_data_reg <= s_axil_wdata;
        w_strb_reg <= s_axil_wstrb;
        cmd_write <= w_cmd_write;
        cmd_read <= w_cmd_read;
        cmd_index <= w_cmd_index;
        cmd_in_range <= w_cmd_in_range;
    end

    enable_reg <= enable_next;
    active_bank_reg <= active_bank_next;
    generation_reg <= generation_next;
    default_action_reg <= default_action_next;
    local_mac_lo_reg <= local_mac_lo_next;
    local_mac_hi_reg <= local_mac_hi_next;
    gue_port_reg <= gue_port_next;
    outer_src_v4_reg <= outer_src_v4_next;
    outer_src_v4_len_reg <= outer_src_v4_len_next;
    outer_src_v6_reg <= outer_src_v6_next;
    outer_src_v6_len_reg <= outer_src_v6_len_next;
    outer_src_v6_mask_reg <= v6_prefix_mask(outer_src_v6_len_next);
    select_reg <= select_next;
    index_reg <= index_next;
    error_reg <= error_next;
    data_reg <= data_next;

    mem_en_reg <= mem_en_next;
    mem_we_reg <= mem_we_next;
    readback_reg <= readback_next;
    mg_wr_req_reg <= mg_wr_req_next;
    mg_rd_req_reg <= mg_rd_req_next;
    busy_reg <= busy_next;
    ext_wbusy_reg <= ext_wbusy_next;
    ext_wr_req_reg <= ext_wr_req_next;
    if (ext_wr_req_next) begin
        ext_wr_addr_reg <= wr_addr;
        ext_wr_data_reg <= w_data_reg;
        ext_wr_strb_reg <= w_strb_reg;
    end
    rd_pipe_reg <= rd_pipe_reg << 1;
    rd_pipe_reg[0] <= |mem_en_reg && !mem_we_reg;

    if (rst) begin
        aw_full_reg <= 1'b0;
        w_full_reg <= 1'b0;
        awready_reg <= 1'b0;
        wready_reg <= 1'b0;
        bvalid_reg <= 1'b0;
        enable_reg <= 1'b0;
        active_bank_reg <= 1'b0;
        generation_reg <= 32'd0;
        default_action_reg <= {DEFAULT_ACTION_BITS{1'b0}};
        local_mac_lo_reg <= RESET_LOCAL_MAC[MAC_LO_AT +: 32];
        local_mac_hi_reg <= RESET_LOCAL_MAC[MAC_HI_AT +: MAC_HI_W];
        gue_port_reg <= RESET_GUE_PORT;
        outer_src_v4_reg <= 32'd0;
        outer_src_v4_len_reg <= RESET_OUTER_SRC_V4_LEN;
        outer_src_v6_reg <= {NLB_WIDE_CTRL_OUTER_SRC_V6_W{1'b0}};
        outer_src_v6_len_reg <= RESET_OUTER_SRC_V6_LEN;
        outer_src_v6_mask_reg <= v6_prefix_mask(RESET_OUTER_SRC_V6_LEN);
        select_reg <= 32'd0;
        index_reg <= 32'd0;
        error_reg <= 1'b0;
        // The data window is software-visible state, so it is reset too.
        data_reg <= {DATA_BITS{1'b0}};
        mem_en_reg <= {TABLES{1'b0}};
        mem_we_reg <= 1'b0;
        readback_reg <= 1'b0;
        mg_wr_req_reg <= 1'b0;
        mg_rd_req_reg <= 1'b0;
        busy_reg <= 1'b0;
        ext_wbusy_reg <= 1'b0;
        ext_wr_req_reg <= 1'b0;
        rd_pipe_reg <= {TABLE_RD_LATENCY{1'b0}};
    end
end

assign s_axil_awready = awready_reg;
assign s_axil_wready = wready_reg;
assign s_axil_bresp = RESP_OKAY;
assign ext_wr_req = ext_wr_req_reg;
assign ext_wr_addr = ext_wr_addr_reg;
assign ext_wr_data = ext_wr_data_reg;
assign ext_wr_strb = ext_wr_strb_reg;
assign s_axil_bvalid = bvalid_reg;

// ---- AXI-Lite read channel ----------------------------------------------------------------
// AR is caught in a holding register; the next clock decodes it into rdata_reg.

reg                       ar_full_reg = 1'b0, ar_full_next;
reg [AXIL_ADDR_WIDTH-3:0] ar_word_reg = {(AXIL_ADDR_WIDTH-2){1'b0}};
reg                       arready_reg = 1'b0;
reg                       rvalid_reg = 1'b0, rvalid_next;
reg [31:0]                rdata_reg = 32'd0, rdata_next;

reg                       ext_rwait_reg = 1'b0, ext_rwait_next;
reg                       ext_rd_req_reg = 1'b0, ext_rd_req_next;

wire ar_take = s_axil_arvalid && arready_reg;
// A held read proceeds when the response register is free; an extension-bus read then waits
// for its data (the address stays held).
wire rd_slot = ar_full_reg && !ext_rwait_reg && (!rvalid_reg || s_axil_rready);

wire [31:0] rd_addr = {{(32-AXIL_ADDR_WIDTH){1'b0}}, ar_word_reg, 2'b00};
wire        rd_ext = is_ext(rd_addr);
wire        do_read = rd_slot && !rd_ext;
wire        rd_in_data = rd_addr[31:DATA_WORD_BITS+2] == DATA_BASE[31:DATA_WORD_BITS+2];
wire [DATA_WORD_BITS-1:0] rd_data_word = rd_addr[DATA_WORD_BITS+1:2];

reg [31:0] rd_value;
integer    r;

always @* begin
    case (rd_addr)
        // Block list: every block of the regmap.
        NLB_REG_FW_ID_TYPE:          rd_value = NLB_BLK_FW_ID_TYPE;
        NLB_REG_FW_ID_VERSION:       rd_value = NLB_BLK_FW_ID_VERSION;
        NLB_REG_FW_ID_NEXT:          rd_value = NLB_BLK_FW_ID_NEXT;
        NLB_REG_CTRL_TYPE:           rd_value = NLB_BLK_CTRL_TYPE;
        NLB_REG_CTRL_VERSION:        rd_value = NLB_BLK_CTRL_VERSION;
        NLB_REG_CTRL_NEXT:           rd_value = NLB_BLK_CTRL_NEXT;
        NLB_REG_TABLE_TYPE:          rd_value = NLB_BLK_TABLE_TYPE;
        NLB_REG_TABLE_VERSION:       rd_value = NLB_BLK_TABLE_VERSION;
        NLB_REG_TABLE_NEXT:          rd_value = NLB_BLK_TABLE_NEXT;
        NLB_REG_CONNTRACK_TYPE:      rd_value = NLB_BLK_CONNTRACK_TYPE;
        NLB_REG_CONNTRACK_VERSION:   rd_value = NLB_BLK_CONNTRACK_VERSION;
        NLB_REG_CONNTRACK_NEXT:      rd_value = NLB_BLK_CONNTRACK_NEXT;
        NLB_REG_COUNTERS_TYPE:       rd_value = NLB_BLK_COUNTERS_TYPE;
        NLB_REG_COUNTERS_VERSION:    rd_value = NLB_BLK_COUNTERS_VERSION;
        NLB_REG_COUNTERS_NEXT:       rd_value = NLB_BLK_COUNTERS_NEXT;
        NLB_REG_DMA_TYPE:            rd_value = NLB_BLK_DMA_TYPE;
        NLB_REG_DMA_VERSION:         rd_value = NLB_BLK_DMA_VERSION;
        NLB_REG_DMA_NEXT:            rd_value = NLB_BLK_DMA_NEXT;
        NLB_REG_SPI_FLASH_TYPE:      rd_value = NLB_BLK_SPI_FLASH_TYPE;
        NLB_REG_SPI_FLASH_VERSION:   rd_value = NLB_BLK_SPI_FLASH_VERSION;
        NLB_REG_SPI_FLASH_NEXT:      rd_value = NLB_BLK_SPI_FLASH_NEXT;
        NLB_REG_REBOOT_TYPE:         rd_value = NLB_BLK_REBOOT_TYPE;
        NLB_REG_REBOOT_VERSION:      rd_value = NLB_BLK_REBOOT_VERSION;
        NLB_REG_REBOOT_NEXT:         rd_value = NLB_BLK_REBOOT_NEXT;
        NLB_REG_QUEUES_TYPE:         rd_value = NLB_BLK_QUEUES_TYPE;
        NLB_REG_QUEUES_VERSION:      rd_value = NLB_BLK_QUEUES_VERSION;
        NLB_REG_QUEUES_NEXT:         rd_value = NLB_BLK_QUEUES_NEXT;
        NLB_REG_MEM_TYPE:            rd_value = NLB_BLK_MEM_TYPE;
        NLB_REG_MEM_VERSION:         rd_value = NLB_BLK_MEM_VERSION;
        NLB_REG_MEM_NEXT:            rd_value = NLB_BLK_MEM_NEXT;

        // fw_id
        NLB_REG_FW_ID_DESIGN_VERSION:  rd_value = NLB_DESIGN_VERSION;
        NLB_REG_FW_ID_REGMAP_VERSION:  rd_value = NLB_REGMAP_VERSION;
        NLB_REG_FW_ID_BUILD_ID:        rd_value = BUILD_ID;
        NLB_REG_FW_ID_GIT_HASH:        rd_value = GIT_HASH;
        NLB_REG_FW_ID_BOARD_ID:        rd_value = BOARD_ID;
        NLB_REG_FW_ID_PART_ID:         rd_value = PART_ID;
        NLB_REG_FW_ID_PROFILE_ID:      rd_value = PROFILE_ID;
        NLB_REG_FW_ID_CAP_VIP_BUCKETS: rd_value = VIP_BUCKETS;
        NLB_REG_FW_ID_CAP_VIP_WAYS:    rd_value = VIP_WAYS;
        NLB_REG_FW_ID_CAP_RULES:       rd_value = RULES;
        NLB_REG_FW_ID_CAP_POOLS:       rd_value = POOLS;
        NLB_REG_FW_ID_CAP_MAGLEV_SLOTS: rd_value = MAGLEV_SLOTS;
        NLB_REG_FW_ID_CAP_BACKENDS:    rd_value = BACKENDS;
        NLB_REG_FW_ID_CAP_CT_BUCKETS:  rd_value = CT_BUCKETS;
        NLB_REG_FW_ID_CAP_CT_WAYS:     rd_value = CT_WAYS;
        NLB_REG_FW_ID_CAP_QUEUE_DEPTH: rd_value = QUEUE_DEPTH;
        NLB_REG_FW_ID_CAP_CT_CHANNELS: rd_value = CT_CHANNELS;
        NLB_REG_FW_ID_CAP_MAGLEV_CHANNELS: rd_value = MG_CHANNELS;
        NLB_REG_FW_ID_CAP_MEM_SLOTS:   rd_value = MEM_SLOTS;

        // ctrl
        NLB_REG_CTRL_ENABLE:           rd_value = enable_word;
        NLB_REG_CTRL_ACTIVE_BANK:      rd_value = active_bank_word;
        NLB_REG_CTRL_GENERATION:       rd_value = generation_reg;
        NLB_REG_CTRL_DEFAULT_ACTION:   rd_value = default_action_word;
        NLB_REG_CTRL_LOCAL_MAC_LO:     rd_value = local_mac_lo_reg;
        NLB_REG_CTRL_LOCAL_MAC_HI:     rd_value = local_mac_hi_word;
        NLB_REG_CTRL_GUE_PORT:         rd_value = gue_port_word;
        NLB_REG_CTRL_OUTER_SRC_V4:     rd_value = outer_src_v4_reg;
        NLB_REG_CTRL_OUTER_SRC_V4_LEN: rd_value = v4_len_word;
        NLB_REG_CTRL_OUTER_SRC_V6_0:   rd_value = outer_src_v6_reg[V6_0_AT +: 32];
        NLB_REG_CTRL_OUTER_SRC_V6_1:   rd_value = outer_src_v6_reg[V6_1_AT +: 32];
        NLB_REG_CTRL_OUTER_SRC_V6_2:   rd_value = outer_src_v6_reg[V6_2_AT +: 32];
        NLB_REG_CTRL_OUTER_SRC_V6_3:   rd_value = outer_src_v6_reg[V6_3_AT +: 32];
        NLB_REG_CTRL_OUTER_SRC_V6_LEN: rd_value = v6_len_word;
        NLB_REG_CTRL_PACKETS_IN_FLIGHT: rd_value = stat_packets_in_flight;
        NLB_REG_CTRL_BANK_IN_USE:      rd_value = bank_in_use_word;

        // table
        NLB_REG_TABLE_SELECT:          rd_value = select_reg;
        NLB_REG_TABLE_INDEX:           rd_value = index_reg;
        NLB_REG_TABLE_STATUS:          rd_value = status_word;

        default: begin
            rd_value = 32'd0;
            for (r = 0; r < DATA_WORDS; r = r + 1) begin
                if (rd_in_data && rd_data_word == r[DATA_WORD_BITS-1:0]) begin
                    rd_value = data_reg[r*32 +: 32];
                end
            end
        end
    endcase
end

always @* begin
    ar_full_next = ar_full_reg;
    rvalid_next = rvalid_reg && !s_axil_rready;
    rdata_next = rdata_reg;
    ext_rwait_next = ext_rwait_reg;
    ext_rd_req_next = 1'b0;

    if (ar_take) begin
        ar_full_next = 1'b1;
    end
    if (do_read) begin
        ar_full_next = 1'b0;
        rvalid_next = 1'b1;
        rdata_next = rd_value;
    end
    if (rd_slot && rd_ext) begin
        ext_rwait_next = 1'b1;
        ext_rd_req_next = 1'b1;
    end
    if (ext_rwait_reg && ext_rd_ack) begin
        ext_rwait_next = 1'b0;
        ar_full_next = 1'b0;
        rvalid_next = 1'b1;
        rdata_next = ext_rd_data;
    end
end

always @(posedge clk) begin
    ar_full_reg <= ar_full_next;
    arready_reg <= !ar_full_next;
    rvalid_reg <= rvalid_next;
    rdata_reg <= rdata_next;
    ext_rwait_reg <= ext_rwait_next;
    ext_rd_req_reg <= ext_rd_req_next;
    if (ar_take) begin
        ar_word_reg <= s_axil_araddr[AXIL_ADDR_WIDTH-1:2];
    end

    if (rst) begin
        ar_full_reg <= 1'b0;
        arready_reg <= 1'b0;
        rvalid_reg <= 1'b0;
        ext_rwait_reg <= 1'b0;
        ext_rd_req_reg <= 1'b0;
    end
end

assign s_axil_arready = arready_reg;
assign s_axil_rdata = rdata_reg;
assign s_axil_rresp = RESP_OKAY;
assign s_axil_rvalid = rvalid_reg;
assign ext_rd_req = ext_rd_req_reg;
assign ext_rd_addr = rd_addr;

// ---- ctrl outputs -----------------------------------------------------------------------

assign ctrl_enable = enable_reg;
assign ctrl_active_bank = active_bank_reg;
assign ctrl_generation = generation_reg;
assign ctrl_default_action = default_action_reg;
// The wide value from its registers (local_mac_lo below local_mac_hi).
reg [NLB_WIDE_CTRL_LOCAL_MAC_W-1:0] local_mac_wide;
always @* begin
    local_mac_wide = {NLB_WIDE_CTRL_LOCAL_MAC_W{1'b0}};
    local_mac_wide[MAC_LO_AT +: 32] = local_mac_lo_reg;
    local_mac_wide[MAC_HI_AT +: MAC_HI_W] = local_mac_hi_reg;
end
assign ctrl_local_mac = local_mac_wide;
assign ctrl_gue_port = gue_port_reg;
assign ctrl_outer_src_v4 = outer_src_v4_reg;
assign ctrl_outer_src_v4_len = outer_src_v4_len_reg;
assign ctrl_outer_src_v6 = outer_src_v6_reg;
assign ctrl_outer_src_v6_mask = outer_src_v6_mask_reg;

// ---- table memories ----------------------------------------------------------------------
// Port B of every table is driven from registers: the enable from the command engine, the
// bank, index and entry from the window registers, which stay still while a command runs.

nlb_table_mem #(
    .WIDTH(NLB_VIP_ENTRY_WIDTH),
    .ROWS(VIP_BUCKETS),
    .LANES(VIP_WAYS),
    .OUTPUT_REG(TABLE_OUTPUT_REG)
) vip_mem_inst (
    .clk(clk),
    .a_en(vip_rd_en),
    .a_bank(vip_rd_bank),
    .a_row(vip_rd_row),
    .a_data(vip_rd_data),
    .b_en(mem_en_reg[NLB_TABLE_VIP]),
    .b_we(mem_we_reg),
    .b_bank(sel_bank),
    .b_index(index_reg[VIP_ROW_BITS+VIP_WAY_BITS-1:0]),
    .b_wdata(data_reg[NLB_VIP_ENTRY_WIDTH-1:0]),
    .b_rdata(vip_b_rdata)
);

nlb_table_mem #(
    .WIDTH(NLB_RULE_ENTRY_WIDTH),
    .ROWS(RULES),
    .LANES(1),
    .OUTPUT_REG(TABLE_OUTPUT_REG)
) rule_mem_inst (
    .clk(clk),
    .a_en(rule_rd_en),
    .a_bank(rule_rd_bank),
    .a_row(rule_rd_row),
    .a_data(rule_rd_data),
    .b_en(mem_en_reg[NLB_TABLE_RULE]),
    .b_we(mem_we_reg),
    .b_bank(sel_bank),
    .b_index(index_reg[RULE_ROW_BITS-1:0]),
    .b_wdata(data_reg[NLB_RULE_ENTRY_WIDTH-1:0]),
    .b_rdata(rule_b_rdata)
);

nlb_table_mem #(
    .WIDTH(NLB_ACL_ENTRY_WIDTH),
    .ROWS(RULES),
    .LANES(1),
    .OUTPUT_REG(TABLE_OUTPUT_REG)
) acl_mem_inst (
    .clk(clk),
    .a_en(acl_rd_en),
    .a_bank(acl_rd_bank),
    .a_row(acl_rd_row),
    .a_data(acl_rd_data),
    .b_en(mem_en_reg[NLB_TABLE_ACL]),
    .b_we(mem_we_reg),
    .b_bank(sel_bank),
    .b_index(index_reg[RULE_ROW_BITS-1:0]),
    .b_wdata(data_reg[NLB_ACL_ENTRY_WIDTH-1:0]),
    .b_rdata(acl_b_rdata)
);

nlb_table_mem #(
    .WIDTH(NLB_POOL_ENTRY_WIDTH),
    .ROWS(POOLS),
    .LANES(1),
    .OUTPUT_REG(TABLE_OUTPUT_REG)
) pool_mem_inst (
    .clk(clk),
    .a_en(pool_rd_en),
    .a_bank(pool_rd_bank),
    .a_row(pool_rd_row),
    .a_data(pool_rd_data),
    .b_en(mem_en_reg[NLB_TABLE_POOL]),
    .b_we(mem_we_reg),
    .b_bank(sel_bank),
    .b_index(index_reg[POOL_ROW_BITS-1:0]),
    .b_wdata(data_reg[NLB_POOL_ENTRY_WIDTH-1:0]),
    .b_rdata(pool_b_rdata)
);

// Maglev slots: the command's requests; bank, index and slot come from the window registers,
// which stay still while a command runs.
assign mg_c_wr_req = mg_wr_req_reg;
assign mg_c_wr_bank = sel_bank;
assign mg_c_wr_index = index_reg[MAGLEV_ROW_BITS-1:0];
assign mg_c_wr_slot = data_reg[NLB_MAGLEV_SLOT_WIDTH-1:0];
assign mg_c_rd_req = mg_rd_req_reg;
assign mg_c_rd_bank = sel_bank;
assign mg_c_rd_index = index_reg[MAGLEV_ROW_BITS-1:0];

nlb_table_mem #(
    .WIDTH(NLB_BACKEND_ENTRY_WIDTH),
    .ROWS(BACKENDS),
    .LANES(1),
    .OUTPUT_REG(TABLE_OUTPUT_REG)
) backend_mem_inst (
    .clk(clk),
    .a_en(backend_rd_en),
    .a_bank(backend_rd_bank),
    .a_row(backend_rd_row),
    .a_data(backend_rd_data),
    .b_en(mem_en_reg[NLB_TABLE_BACKEND]),
    .b_we(mem_we_reg),
    .b_bank(sel_bank),
    .b_index(index_reg[BACKEND_ROW_BITS-1:0]),
    .b_wdata(data_reg[NLB_BACKEND_ENTRY_WIDTH-1:0]),
    .b_rdata(backend_b_rdata)
);

`ifdef FORMAL
// Formal properties of the AXI-Lite slave (hw/scripts/formal.sh).
`include "nlb_regs_props.vh"
`endif

endmodule

`resetall
