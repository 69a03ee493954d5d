`resetall
`timescale 1ns / 1ps
`default_nettype none

// The command ring (the dma block's cmd_* registers, docs/pipeline.md section 15.2): table and
// connection-table commands the host posts in host memory, each over many entries, their data
// moved by DMA. As the golden model's run_commands (firmware-sim/src/device.rs) does:
// - while the ring is in use (dma.ctrl.enable, cmd_size.enable, a base set) and the host has
//   posted a command (host != dev), the cmd_desc of slot dev is read (one 64-byte line) and
//   run; then dev moves on, whatever became of it;
// - an unknown op or table, a count of 0, or a list HIT_READ: BAD_COMMAND; a HIT_READ index
//   not a multiple of 32: BAD_INDEX; a data address not 4-byte aligned: BAD_ENTRY; nothing
//   done;
// - TABLE_WRITE / CT_WRITE: the entries (or list records: the index word, then the entry)
//   read from host memory, in order, each written through the table or conntrack window as
//   the host would (select, data words, WRITE_AT, status; a connection's index is written
//   first, so conntrack reads its old entry while the words go, and its status is read once,
//   before the command completes, as conntrack posts its writes): an index beyond the table stops
//   the command (BAD_INDEX), an entry the table refuses too (BAD_ENTRY; the connection table:
//   BAD_INDEX); entries before it were done;
// - TABLE_READ / CT_READ: each entry read through the window (READ_AT, data words) and
//   written to host memory, after its index word for a list; HIT_READ: conntrack.index set
//   to each word's first entry and hit_read read (which clears the bits);
// - a refused transfer (RRESP/BRESP not OKAY) is DMA_FAULT, also counted in dma.faults
//   (s_fault): a refused read stops the command at the first entry one of whose words it
//   held; a refused write stops it at the next entry after its response came back (the
//   entries read meanwhile are lost; a HIT_READ has cleared their bits);
// - the ring_wb record (wb + 16 x 3) is written after a command when no other waits, or
//   after 16 in a row; MSI-X vector 3 moderated by count and time as the other rings.
//
// Range reads of the Maglev slots and the connection table (TABLE_READ of MAGLEV, CT_READ; not a
// list) whose index starts a memory row (16 slots; a bucket) and whose data starts a 64-byte
// line do not go through the windows: whole rows are read straight from the memory stages
// (nlb_mem_stage's bulk reads, up to RB_ROWS in flight, back in any order into a row buffer)
// and written out in order, a line at a time, the entries past the command's count left out
// by the byte strobes. The outcome is the windows' (the entries before the first index beyond
// the table done, then BAD_INDEX; a refused write: DMA_FAULT, the rows still in flight
// dropped). This is what an attach and a load's read-back use (docs/pipeline.md section 15.2).
// Range writes of the Maglev slots likewise (TABLE_WRITE of MAGLEV, not a list, from a memory
// row, a whole number of rows, data from a 64-byte line): each line of data read ahead is a
// row of 16 slots (the low 16 bits of each word, as the window takes them), written whole to
// the memory stage (recorded whole: packets in flight see the row before or after, never
// part of it), one row at a time; the outcome is the window's.
//
// The engine reaches the windows through an AXI-Lite master beside the host's (nlb_axil_arb2):
// while a command runs, the windows' select, index and data registers are the engine's (the
// host keeps off them while it uses the ring; docs/driver.md). Entry data is read ahead, up to
// RD_LINES 64-byte lines in flight; read results go out a line at a time, one write per line.
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_cmd_ring (
    clk,
    rst,
    ext_wr_req,
    ext_wr_addr,
    ext_wr_data,
    ext_wr_strb,
    ext_wr_ack,
    ext_rd_req,
    ext_rd_addr,
    ext_rd_data,
    ext_rd_ack,
    dma_enable,
    dma_wb,
    s_fault,
    irq,
    m_axil_awaddr,
    m_axil_awvalid,
    m_axil_awready,
    m_axil_wdata,
    m_axil_wstrb,
    m_axil_wvalid,
    m_axil_wready,
    m_axil_bresp,
    m_axil_bvalid,
    m_axil_bready,
    m_axil_araddr,
    m_axil_arvalid,
    m_axil_arready,
    m_axil_rdata,
    m_axil_rresp,
    m_axil_rvalid,
    m_axil_rready,
    m_axi_awaddr,
    m_axi_awlen,
    m_axi_awsize,
    m_axi_awburst,
    m_axi_awvalid,
    m_axi_awready,
    m_axi_wdata,
    m_axi_wstrb,
    m_axi_wlast,
    m_axi_wvalid,
    m_axi_wready,
    m_axi_bresp,
    m_axi_bvalid,
    m_axi_bready,
    m_axi_araddr,
    m_axi_arlen,
    m_axi_arsize,
    m_axi_arburst,
    m_axi_arvalid,
    m_axi_arready,
    m_axi_rdata,
    m_axi_rresp,
    m_axi_rlast,
    m_axi_rvalid,
    m_axi_rready,
    ct_b_rd_valid,
    ct_b_rd_row,
    ct_b_rd_ready,
    ct_b_rs_valid,
    ct_b_rs_row,
    ct_b_rs_data,
    mg_b_rd_valid,
    mg_b_rd_row,
    mg_b_rd_ready,
    mg_b_rs_valid,
    mg_b_rs_row,
    mg_b_rs_data,
    mg_b_wr_req,
    mg_b_wr_row,
    mg_b_wr_data,
    mg_b_wr_ack
);

`include "nlb_regmap.vh"

// The tables' depths in entries (the profile's, as nlb_regs has them).
parameter VIP_DEPTH = 1024;
parameter RULES = 256;
parameter POOLS = 256;
parameter MAGLEV_SLOTS = 65536;
parameter BACKENDS = 4096;
parameter CT_ENTRIES = 16384;
// Ways of a connection-table bucket (a memory row).
parameter CT_WAYS = 4;
// Clocks per microsecond (interrupt timers).
parameter CLK_PER_US = 322;
// Commands after which the write-back goes out even while more wait.
parameter WB_EVERY = 16;
// AXI-Lite address width of the register file.
parameter AXIL_ADDR_WIDTH = 16;

localparam DW = 512;
localparam KW = 64;
localparam AW = AXIL_ADDR_WIDTH;
localparam [15:0] US_DIV = CLK_PER_US;
localparam [7:0]  WB_N = WB_EVERY;
// Lines of entry data read ahead (the read-ahead buffer), and the longest burst.
localparam RD_LINES = 16;
localparam [4:0] RD_BURST = 5'd8;
localparam [31:0] WB_OFF = NLB_DMA_WB_STRIDE * NLB_RING_CMD;
// Range reads by rows (above): a connection-table row is CT_WAYS lanes of 384 bits (an entry's
// 12 words), a Maglev row 16 slots; the row buffer holds RB_ROWS rows in the host's words.
localparam CT_RB = $clog2(CT_ENTRIES / CT_WAYS);
localparam CT_WB = $clog2(CT_WAYS);
localparam CT_LANE_W = NLB_CT_ENTRY_WORDS * 32;
localparam CT_ROW_W = CT_WAYS * CT_LANE_W;
localparam MG_RB = $clog2(MAGLEV_SLOTS) - 3;
localparam MG_ROW_W = 16 * NLB_MAGLEV_SLOT_WIDTH;
// (A connection-table row fills whole lines: a multiple of 4 ways, checked below.)
localparam integer CT_LPR = CT_ROW_W / DW;
localparam RB_W = CT_ROW_W > DW ? CT_ROW_W : DW;
localparam LPR_MAX = RB_W / DW;
localparam RB_ROWS = 32;
localparam RBB = 5;
localparam [31:0] CT_WAY_MASK = CT_WAYS - 1;
localparam [3:0] CT_LPR4 = CT_LPR[3:0];
localparam [4:0] CT_WAYS5 = CT_WAYS;
localparam [8:0] CT_EW9 = NLB_CT_ENTRY_WORDS;

input  wire          clk;
input  wire          rst;
// Extension bus: the cmd_* registers of the dma block (nlb_top routes them here).
input  wire          ext_wr_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]   ext_wr_addr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [31:0]   ext_wr_data;
input  wire [3:0]    ext_wr_strb;
output wire          ext_wr_ack;
input  wire          ext_rd_req;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [31:0]   ext_rd_addr;
/* verilator lint_on UNUSEDSIGNAL */
output wire [31:0]   ext_rd_data;
output wire          ext_rd_ack;
// dma.ctrl.enable and dma.wb (nlb_host_dma holds them); s_fault: one refused transfer, for
// dma.faults.
input  wire          dma_enable;
input  wire [63:0]   dma_wb;
output wire          s_fault;
// MSI-X vector 3: one clock per message.
output wire          irq;
// AXI-Lite master toward the register file (the table and conntrack windows).
output wire [AW-1:0] m_axil_awaddr;
output wire          m_axil_awvalid;
input  wire          m_axil_awready;
output wire [31:0]   m_axil_wdata;
output wire [3:0]    m_axil_wstrb;
output wire          m_axil_wvalid;
input  wire          m_axil_wready;
/* verilator lint_off UNUSEDSIGNAL */ // (the register file answers OKAY to everything)
input  wire [1:0]    m_axil_bresp;
/* verilator lint_on UNUSEDSIGNAL */
input  wire          m_axil_bvalid;
output wire          m_axil_bready;
output wire [AW-1:0] m_axil_araddr;
output wire          m_axil_arvalid;
input  wire          m_axil_arready;
input  wire [31:0]   m_axil_rdata;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [1:0]    m_axil_rresp;
/* verilator lint_on UNUSEDSIGNAL */
input  wire          m_axil_rvalid;
output wire          m_axil_rready;
// AXI4 master toward host memory (one id, 64-byte beats, INCR bursts within 4 KiB).
output wire [63:0]   m_axi_awaddr;
output wire [7:0]    m_axi_awlen;
output wire [2:0]    m_axi_awsize;
output wire [1:0]    m_axi_awburst;
output wire          m_axi_awvalid;
input  wire          m_axi_awready;
output wire [DW-1:0] m_axi_wdata;
output wire [KW-1:0] m_axi_wstrb;
output wire          m_axi_wlast;
output wire          m_axi_wvalid;
input  wire          m_axi_wready;
input  wire [1:0]    m_axi_bresp;
input  wire          m_axi_bvalid;
output wire          m_axi_bready;
output wire [63:0]   m_axi_araddr;
output wire [7:0]    m_axi_arlen;
output wire [2:0]    m_axi_arsize;
output wire [1:0]    m_axi_arburst;
output wire          m_axi_arvalid;
input  wire          m_axi_arready;
input  wire [DW-1:0] m_axi_rdata;
input  wire [1:0]    m_axi_rresp;
/* verilator lint_off UNUSEDSIGNAL */ // (beats are counted: rlast is not needed)
input  wire          m_axi_rlast;
/* verilator lint_on UNUSEDSIGNAL */
input  wire          m_axi_rvalid;
output wire          m_axi_rready;
// Bulk reads of the memory stages (nlb_lookup's ct_b_* / mg_b_*; nlb_mem_stage describes
// them): rows asked for, rows back in any order.
output wire                ct_b_rd_valid;
output wire [CT_RB-1:0]    ct_b_rd_row;
input  wire                ct_b_rd_ready;
input  wire                ct_b_rs_valid;
/* verilator lint_off UNUSEDSIGNAL */ // (a row's low bits name its buffer slot)
input  wire [CT_RB-1:0]    ct_b_rs_row;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [CT_ROW_W-1:0] ct_b_rs_data;
output wire                mg_b_rd_valid;
output wire [MG_RB-1:0]    mg_b_rd_row;
input  wire                mg_b_rd_ready;
input  wire                mg_b_rs_valid;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [MG_RB-1:0]    mg_b_rs_row;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [MG_ROW_W-1:0] mg_b_rs_data;
// Whole Maglev rows written (nlb_lookup's mg_b_wr_*): one at a time, acknowledged once the
// memory has the row.
output wire                mg_b_wr_req;
output wire [MG_RB-1:0]    mg_b_wr_row;
output wire [MG_ROW_W-1:0] mg_b_wr_data;
input  wire                mg_b_wr_ack;

initial begin
    if (VIP_DEPTH > 32'h0fff_ffff || MAGLEV_SLOTS > 32'h0fff_ffff || CT_ENTRIES > 32'h0fff_ffff)
    begin
        $error("nlb_cmd_ring: an entry index must fit the cmd register's index field");
        $finish;
    end
    if (CT_RB < RBB || MG_RB < RBB + 1 || (1 << CT_WB) != CT_WAYS || CT_WAYS % 4 != 0
            || CT_WAYS > 16) begin
        $error("nlb_cmd_ring: at least 32 rows per table (and bank), 4, 8 or 16 ways");
        $finish;
    end
end

`include "nlb_inc_if.vh"

// A register word with the write's byte strobes applied.
function [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
    integer b;
    begin
        for (b = 0; b < 4; b = b + 1) begin
            merge[8*b +: 8] = strb[b] ? data[8*b +: 8] : old[8*b +: 8];
        end
    end
endfunction

// ---- the ring's registers ------------------------------------------------------------------

reg [63:0] base_reg = 64'd0;
reg [3:0]  log2_reg = 4'd0;
reg        ren_reg = 1'b0;
reg [15:0] host_reg = 16'd0;
reg [15:0] dev_reg = 16'd0;
reg [31:0] errors_reg = 32'd0;
reg [15:0] err_slot_reg = 16'd0;
reg [7:0]  err_code_reg = 8'd0;
reg [31:0] irq_cfg_reg = 32'd0;
reg [15:0] pending_reg = 16'd0;
reg [15:0] elapsed_reg = 16'd0;
reg        dirty_reg = 1'b0;
reg [7:0]  since_wb_reg = 8'd0;
reg [15:0] us_div_reg = 16'd0;
reg        irq_reg = 1'b0;
reg        fault_reg = 1'b0;

wire [31:0] wr_word = {ext_wr_addr[31:2], 2'b00};
wire [31:0] rd_word = {ext_rd_addr[31:2], 2'b00};

`include "nlb_ring_mask.vh"

wire [31:0] size_word = ({28'd0, log2_reg} << NLB_REG_DMA_CMD_SIZE_LOG2_LSB)
                        | ({31'd0, ren_reg} << NLB_REG_DMA_CMD_SIZE_ENABLE_LSB);
wire [31:0] wr_size = merge(size_word, ext_wr_data, ext_wr_strb);
/* verilator lint_off UNUSEDSIGNAL */ // (the index is 16 bits)
wire [31:0] wr_host = merge({16'd0, host_reg}, ext_wr_data, ext_wr_strb);
wire [31:0] wr_base_lo = merge(base_reg[31:0], ext_wr_data, ext_wr_strb)
                         & NLB_REG_DMA_CMD_BASE_LO_DEFINED;
wire [31:0] wr_base_hi = merge(base_reg[63:32], ext_wr_data, ext_wr_strb);
/* verilator lint_on UNUSEDSIGNAL */

reg         base_nz_reg = 1'b0;     // base != 0, kept with each write of it
wire        usable = dma_enable && ren_reg && base_nz_reg;
wire        waiting = usable && host_reg != dev_reg;
wire [15:0] slot = dev_reg & ring_mask(log2_reg);
// The slot's IOVA, base + slot x 32: the low 21 bits (a slot's offset spans at most 20) summed
// a clock ahead (d_lo_reg, its carry in bit 21), the high bits only take that carry; the
// engine reads a descriptor only while that sum is fresh (nothing it depends on changed last
// clock). A 64-bit `+` would be 16 CARRY4 in a row.
reg  [21:0] d_lo_reg = 22'd0;
reg         d_fresh_reg = 1'b0;
/* verilator lint_off UNUSEDSIGNAL */ // (inc_if's top bits; bits 4..0: a descriptor's bytes)
wire [63:0] d_hi = inc_if({21'd0, base_reg[63:21]}, d_lo_reg[21]);
wire [63:0] desc_addr = {d_hi[42:0], d_lo_reg[20:0]};
/* verilator lint_on UNUSEDSIGNAL */

// ---- the engine ----------------------------------------------------------------------------

localparam [4:0] S_IDLE = 5'd0,
                 S_WB_W = 5'd1,    // write-back: AW and W
                 S_WB_B = 5'd2,    // write-back: its response
                 S_D_R = 5'd4,     // descriptor: the line
                 S_DEC = 5'd5,     // the descriptor checked
                 S_CHK = 5'd3,     // the descriptor line taken apart
                 S_LINES = 5'd18,  // lines to read: the words' span, rounded up
                 S_SPAN = 5'd22,   // ... and the read-ahead started
                 S_MUL_HI = 5'd23, // count x stride: a step's high half
                 S_LINES_HI = 5'd24, // ... the span's high half
                 S_MUL = 5'd6,     // words to read: count x stride, a bit a clock
                 S_SEL = 5'd7,     // table.select written
                 S_REC = 5'd8,     // a record starts
                 S_IDX = 5'd9,     // a list record's index word taken
                 S_WORD = 5'd10,   // write: a data word taken and written to the window
                 S_SKIP = 5'd11,   // list read: the record's room skipped in the read-ahead
                 S_RANGE = 5'd12,  // the index checked against the table
                 S_CMD = 5'd13,    // WRITE_AT / READ_AT written
                 S_STAT = 5'd14,   // status read (again while busy)
                 S_RDW = 5'd15,    // read: a data word read from the window
                 S_PUSH = 5'd16,   // read: the word into the line being written
                 S_HIDX = 5'd17,   // HIT_READ: conntrack.index written
                 S_NEXT = 5'd19,   // the record done
                 S_FLUSH = 5'd20,  // the last line out, every write answered, reads drained
                 S_DONE = 5'd21,   // dev moves on
                 S_BK0 = 5'd25,    // range read by rows: rows, first row, last row's entries
                 S_BK1 = 5'd26,    // ... the last row's lines and strobes
                 S_BULK = 5'd27,   // ... rows asked for, taken back, written out
                 S_BW0 = 5'd28,    // range write by rows: rows, first row, read-ahead
                 S_BWR = 5'd29,    // ... a line of data in, written as a row
                 S_CTI = 5'd30;    // connection write: conntrack.index first (read ahead)

reg [4:0]  state_reg = S_IDLE;

// The command in flight.
reg [2:0]  table_reg = 3'd0;
reg        bank_reg = 1'b0;
reg        list_reg = 1'b0;
reg [31:0] count_reg = 32'd0;
reg [31:0] left_reg = 32'd0;       // records not yet done (this one included)
reg        last_reg = 1'b0;         // left_reg == 1
reg [32:0] idx_reg = 33'd0;        // the record's entry index (HIT_READ: its word's first)
reg [63:0] addr_reg = 64'd0;
reg [5:0]  words_reg = 6'd0;       // entry words
reg [5:0]  w_reg = 6'd0;           // the record's word in hand
reg [2:0]  code_reg = 3'd0;        // its outcome so far
/* verilator lint_off UNUSEDSIGNAL */ // (bits 3..0: within the last line)
reg [37:0] total_reg = 38'd0;      // words to read (count x stride), then lines x 16 + 15
/* verilator lint_on UNUSEDSIGNAL */
reg [5:0]  mul_reg = 6'd0;         // the stride's bits still to multiply
reg        mul_c_reg = 1'b0;        // a step's carry out of its low half
reg [18:0] mul_hi_reg = 19'd0;      // a step's addend, high half
wire [19:0] mul_lo = {1'b0, total_reg[17:0], 1'b0}
                     + {1'b0, mul_reg[5] ? count_reg[18:0] : 19'd0};
wire [19:0] span_lo = {1'b0, total_reg[18:0]} + {15'd0, {1'b0, addr_reg[5:2]} + 5'd15};
reg [31:0] rword_reg = 32'd0;      // a word read from the window
reg [61:0] wp_reg = 62'd0;         // the next word's address in host memory, in words
/* verilator lint_off UNUSEDSIGNAL */ // (inc_if's top bits)
wire [63:0] wp_inc = inc_if({2'd0, wp_reg}, 1'b1);
/* verilator lint_on UNUSEDSIGNAL */

// The op's kind, decoded from the descriptor (registers: they steer the engine's paths).
reg  is_write = 1'b0;
reg  is_ct = 1'b0;
reg  is_hit = 1'b0;
reg  is_table = 1'b0;

// Entry words of each table.
function [5:0] table_words(input [2:0] t);
    case (t)
    NLB_TABLE_VIP: table_words = NLB_VIP_ENTRY_WORDS;
    NLB_TABLE_RULE: table_words = NLB_RULE_ENTRY_WORDS;
    NLB_TABLE_ACL: table_words = NLB_ACL_ENTRY_WORDS;
    NLB_TABLE_POOL: table_words = NLB_POOL_ENTRY_WORDS;
    NLB_TABLE_MAGLEV: table_words = NLB_MAGLEV_SLOT_WORDS;
    default: table_words = NLB_BACKEND_ENTRY_WORDS;
    endcase
endfunction

function [31:0] table_depth(input [2:0] t);
    case (t)
    NLB_TABLE_VIP: table_depth = VIP_DEPTH;
    NLB_TABLE_RULE, NLB_TABLE_ACL: table_depth = RULES;
    NLB_TABLE_POOL: table_depth = POOLS;
    NLB_TABLE_MAGLEV: table_depth = MAGLEV_SLOTS;
    default: table_depth = BACKENDS;
    endcase
endfunction

localparam [31:0] D_CT = CT_ENTRIES;
reg  [31:0] depth_reg = 32'd0;      // the command's table's entries
// The record's index is beyond its table: compared a clock after the index settles
// (range_ok_reg: the engine has been in S_RANGE since the clock before).
reg         beyond_reg = 1'b0;
reg         range_ok_reg = 1'b0;
reg         cti_ok_reg = 1'b0;      // ... in S_CTI since the clock before
// Connection writes were posted (conntrack answers a WRITE as it goes to memory): a status
// read before the command completes waits until they are in.
reg         sync_due_reg = 1'b0;
// The window the command goes through.
wire [AW-1:0] win_data = is_table ? NLB_REG_TABLE_DATA[AW-1:0] : NLB_REG_CONNTRACK_DATA[AW-1:0];
wire [AW-1:0] win_cmd = is_table ? NLB_REG_TABLE_CMD[AW-1:0] : NLB_REG_CONNTRACK_CMD[AW-1:0];
wire [AW-1:0] win_status = is_table ? NLB_REG_TABLE_STATUS[AW-1:0]
                                    : NLB_REG_CONNTRACK_STATUS[AW-1:0];

// ---- AXI-Lite master: one register access at a time ---------------------------------------

reg          al_aw_reg = 1'b0;
reg          al_w_reg = 1'b0;
reg          al_ar_reg = 1'b0;
reg          al_busy_reg = 1'b0;
reg [AW-1:0] al_addr_reg = {AW{1'b0}};
reg [31:0]   al_data_reg = 32'd0;
reg [31:0]   al_rdata_reg = 32'd0;

assign m_axil_awaddr = al_addr_reg;
assign m_axil_awvalid = al_aw_reg;
assign m_axil_wdata = al_data_reg;
assign m_axil_wstrb = 4'hf;
assign m_axil_wvalid = al_w_reg;
assign m_axil_bready = al_busy_reg && !al_aw_reg && !al_w_reg;
assign m_axil_araddr = al_addr_reg;
assign m_axil_arvalid = al_ar_reg;
assign m_axil_rready = al_busy_reg && !al_ar_reg;

task axl_write(input [AW-1:0] a, input [31:0] d);
    begin
        al_addr_reg <= a;
        al_data_reg <= d;
        al_aw_reg <= 1'b1;
        al_w_reg <= 1'b1;
        al_busy_reg <= 1'b1;
    end
endtask

task axl_read(input [AW-1:0] a);
    begin
        al_addr_reg <= a;
        al_ar_reg <= 1'b1;
        al_busy_reg <= 1'b1;
    end
endtask

// ---- the read-ahead: entry data from host memory, a word at a time -------------------------

reg [DW-1:0] rf_data [0:RD_LINES-1];
reg          rf_err [0:RD_LINES-1];
reg [3:0]    rf_wr_reg = 4'd0;
reg [3:0]    rf_rd_reg = 4'd0;
reg [4:0]    rf_count_reg = 5'd0;   // lines held
reg [4:0]    rd_fly_reg = 5'd0;     // lines requested, not yet arrived
reg [33:0]   rd_lines_reg = 34'd0;  // lines still to request
reg [63:0]   rd_line_reg = 64'd0;   // the next line to request
reg [3:0]    rw_reg = 4'd0;         // the next word of the head line

integer i;
initial begin
    for (i = 0; i < RD_LINES; i = i + 1) begin
        rf_data[i] = {DW{1'b0}};
        rf_err[i] = 1'b0;
    end
end

wire        rw_valid = rf_count_reg != 5'd0;
// The next word for the engine, taken out of the head line a clock ahead (wq_*): the engine's
// decisions rest on registers, not on the line and word multiplexers.
reg         wq_valid_reg = 1'b0;
reg  [31:0] wq_word_reg = 32'd0;
reg         wq_err_reg = 1'b0;
wire [DW-1:0] rf_head = rf_data[rf_rd_reg];
reg  [31:0] rw_word;
integer kr;
always @* begin
    rw_word = rf_head[31:0];
    for (kr = 1; kr < 16; kr = kr + 1) begin
        if (rw_reg == kr[3:0]) begin
            rw_word = rf_head[32*kr +: 32];
        end
    end
end
integer kw;  // (the push's loop: a variable of its own, the other is combinational)
wire        rw_err = rf_err[rf_rd_reg];
reg         rw_take;                // the engine takes the word in wq this clock
// (Refilled only while empty: a word every other clock at most, which the engine never
// outruns but when it skips a list read's room.)
wire        rw_refill = rw_valid && !wq_valid_reg && state_reg != S_BWR;

// The next read burst: at most RD_BURST lines, within the 4 KiB page, within what is left
// and what the buffer has room for. Decided a clock ahead (burst_reg, burst_ok_reg) and
// issued at most every other clock (rd_cool_reg), so that the decision always rests on the
// registers as the last burst left them; the buffer's room only grows meanwhile.
wire [6:0]  to_page = 7'd64 - {1'b0, rd_line_reg[11:6]};
wire [4:0]  room = 5'd16 - rf_count_reg - rd_fly_reg;
wire        rd_few = rd_lines_reg[33:3] == 31'd0;   // fewer than RD_BURST (8) lines left
reg  [4:0]  burst;
always @* begin
    burst = RD_BURST;
    if ({2'd0, burst} > to_page) begin
        burst = to_page[4:0];
    end
    if (rd_few && {1'b0, rd_lines_reg[3:0]} < burst) begin
        burst = {1'b0, rd_lines_reg[3:0]};
    end
end
reg  [4:0]  burst_reg = 5'd0;
reg         burst_ok_reg = 1'b0;
reg         rd_cool_reg = 1'b0;
wire        rd_issue = burst_ok_reg && !rd_cool_reg && !ar_valid_reg && state_reg != S_D_R
                       && rd_lines_reg != 34'd0;
// The line after the burst: within the page its offset grows; a burst to the page's end
// carries into the page number (an increment without a carry chain). The offset is summed a
// clock ahead, from what burst_reg and rd_line_reg will be when the burst goes: a burst never
// goes in the clock after rd_line_reg changed (rd_cool_reg after a burst, burst_ok_reg after a
// new start), so the sum is always the current one then.
reg  [6:0]  line_off_next_reg = 7'd0;
wire [6:0]  line_off_next = line_off_next_reg;
/* verilator lint_off UNUSEDSIGNAL */ // (inc_if's top bits)
wire [63:0] page_next = inc_if({12'd0, rd_line_reg[63:12]}, line_off_next[6]);
/* verilator lint_on UNUSEDSIGNAL */

// ---- the line written back: read results collected a line at a time -------------------------

reg [57:0]   wl_line_reg = 58'd0;   // its line (address bits 63..6)
reg [DW-1:0] wl_data_reg = {DW{1'b0}};
reg [KW-1:0] wl_strb_reg = {KW{1'b0}};
reg          wl_any_reg = 1'b0;
wire         wl_same = wl_line_reg == wp_reg[61:4];

// ---- AXI master ------------------------------------------------------------------------------

reg          aw_valid_reg = 1'b0;
reg [63:0]   aw_addr_reg = 64'd0;
reg          w_valid_reg = 1'b0;
reg [DW-1:0] w_data_reg = {DW{1'b0}};
reg [KW-1:0] w_strb_reg = {KW{1'b0}};
reg [9:0]    b_out_reg = 10'd0;
reg          b_err_reg = 1'b0;
reg          ar_valid_reg = 1'b0;
reg [63:0]   ar_addr_reg = 64'd0;
reg [7:0]    ar_len_reg = 8'd0;
reg          d_half_reg = 1'b0;     // the descriptor's half of its line

assign m_axi_awaddr = aw_addr_reg;
assign m_axi_awlen = 8'd0;
assign m_axi_awsize = 3'd6;
assign m_axi_awburst = 2'b01;
assign m_axi_awvalid = aw_valid_reg;
assign m_axi_wdata = w_data_reg;
assign m_axi_wstrb = w_strb_reg;
assign m_axi_wlast = 1'b1;
assign m_axi_wvalid = w_valid_reg;
assign m_axi_bready = 1'b1;
assign m_axi_araddr = ar_addr_reg;
assign m_axi_arlen = ar_len_reg;
assign m_axi_arsize = 3'd6;
assign m_axi_arburst = 2'b01;
assign m_axi_arvalid = ar_valid_reg;
assign m_axi_rready = 1'b1;

wire out_free = !aw_valid_reg && !w_valid_reg;
wire b_hs = m_axi_bvalid;
wire r_hs = m_axi_rvalid;

assign irq = irq_reg;
assign s_fault = fault_reg;

// ---- range reads by rows ---------------------------------------------------------------------

reg  [31:0]    bk_next_reg = 32'd0;     // the next row to ask for (within the table and bank)
reg  [31:0]    bk_depth_reg = 32'd0;    // the table's rows
reg  [31:0]    bk_left_reg = 32'd0;     // rows still to ask for
reg  [31:0]    bk_wleft_reg = 32'd0;    // rows still to write (the one taken next included)
reg            bk_beyond_reg = 1'b0;    // bk_next_reg is beyond the table (a clock late ...)
reg            bk_fresh_reg = 1'b0;     // ... and up to date: no row was asked for last clock
reg  [RBB-1:0] bk_row0_reg = {RBB{1'b0}};  // the first row's low bits: its buffer slot is 0
reg  [RBB-1:0] bk_head_reg = {RBB{1'b0}};  // the buffer slot of the next row to write
reg  [RBB:0]   bk_out_reg = {(RBB+1){1'b0}};  // rows asked for, not yet taken out of the buffer
reg  [4:0]     bk_lastn_reg = 5'd0;     // entries of the command's last row (1 .. a row's)
reg  [3:0]     bk_llast_reg = 4'd0;     // its lines
reg  [LPR_MAX*KW-1:0] bk_lstrb_reg = {(LPR_MAX*KW){1'b0}};  // its lines' byte strobes
reg            bk_wbusy_reg = 1'b0;     // a row in hand, being written
reg  [RB_W-1:0] bk_row_reg = {RB_W{1'b0}};
reg            bk_islast_reg = 1'b0;    // ... it is the command's last
reg  [3:0]     bk_line_reg = 4'd0;      // ... the line to write next
reg  [3:0]     bk_lines_reg = 4'd0;     // ... and its lines
reg  [57:0]    bk_wline_reg = 58'd0;    // the line address the next line goes to

// The row buffer: rows in the host's words, at slot (row - first row) mod RB_ROWS.
reg  [RB_W-1:0]    rb_mem [0:RB_ROWS-1];
reg  [RB_ROWS-1:0] rb_valid_reg = {RB_ROWS{1'b0}};

// A connection-table row in the host's words: each entry in its 12 words, the bits past the
// entry 0 (as conntrack.data reads); a Maglev row: a slot per word (as table.data reads).
function [RB_W-1:0] ct_host(input [CT_ROW_W-1:0] r);
    integer l;
    begin
        ct_host = {RB_W{1'b0}};
        for (l = 0; l < CT_WAYS; l = l + 1) begin
            ct_host[l*CT_LANE_W +: NLB_CT_ENTRY_WIDTH] = r[l*CT_LANE_W +: NLB_CT_ENTRY_WIDTH];
        end
    end
endfunction

function [RB_W-1:0] mg_host(input [MG_ROW_W-1:0] r);
    integer k;
    begin
        mg_host = {RB_W{1'b0}};
        for (k = 0; k < 16; k = k + 1) begin
            mg_host[32*k +: NLB_MAGLEV_SLOT_WIDTH] = r[k*NLB_MAGLEV_SLOT_WIDTH +: NLB_MAGLEV_SLOT_WIDTH];
        end
    end
endfunction

wire [RBB-1:0] rs_row_lo = is_ct ? ct_b_rs_row[RBB-1:0] : mg_b_rs_row[RBB-1:0];
wire           rs_valid = state_reg == S_BULK && (is_ct ? ct_b_rs_valid : mg_b_rs_valid);
wire [RBB-1:0] rs_slot = rs_row_lo - bk_row0_reg;
// A row is asked for while rows are left within the table, the buffer has room for it and no
// write was refused; at most every other clock (bk_fresh_reg).
wire           bk_ready = is_ct ? ct_b_rd_ready : mg_b_rd_ready;
wire           bk_issue = state_reg == S_BULK && bk_left_reg != 32'd0 && bk_fresh_reg
                          && !bk_beyond_reg && !bk_out_reg[RBB] && !b_err_reg && bk_ready;
// The next row in order is in the buffer and no row is in hand: it is taken.
wire           bk_take = state_reg == S_BULK && !bk_wbusy_reg && rb_valid_reg[bk_head_reg];

// Range writes by rows: the head line of the read-ahead written as a row, one at a time, while
// rows are left within the table (a line of a refused read stops the command: below).
reg                bw_busy_reg = 1'b0;  // a row written, its acknowledgement awaited
reg                bw_req_reg = 1'b0;
reg  [MG_RB-1:0]   bw_row_reg = {MG_RB{1'b0}};
reg  [MG_ROW_W-1:0] bw_data_reg = {MG_ROW_W{1'b0}};
wire               bw_pop = state_reg == S_BWR && !bw_busy_reg && bk_left_reg != 32'd0
                            && bk_fresh_reg && !bk_beyond_reg && rw_valid && !rw_err;
// A line of 16 words as a row of 16 slots (each word's low bits, as table.data takes them).
function [MG_ROW_W-1:0] mg_row(input [DW-1:0] line);
    integer k;
    begin
        for (k = 0; k < 16; k = k + 1) begin
            mg_row[k*NLB_MAGLEV_SLOT_WIDTH +: NLB_MAGLEV_SLOT_WIDTH] =
                line[32*k +: NLB_MAGLEV_SLOT_WIDTH];
        end
    end
endfunction
assign mg_b_wr_req = bw_req_reg;
assign mg_b_wr_row = bw_row_reg;
assign mg_b_wr_data = bw_data_reg;

assign ct_b_rd_valid = bk_issue && is_ct;
assign ct_b_rd_row = bk_next_reg[CT_RB-1:0];
assign mg_b_rd_valid = bk_issue && !is_ct;
assign mg_b_rd_row = {bank_reg, bk_next_reg[MG_RB-2:0]};

integer kb;
integer kx;  // (the main block's loop: a variable of its own)
always @(posedge clk) begin
    if (rs_valid) begin
        rb_mem[rs_slot] <= is_ct ? ct_host(ct_b_rs_data) : mg_host(mg_b_rs_data);
    end
    for (kb = 0; kb < RB_ROWS; kb = kb + 1) begin
        if (rs_valid && rs_slot == kb[RBB-1:0]) begin
            rb_valid_reg[kb] <= 1'b1;
        end else if (bk_take && bk_head_reg == kb[RBB-1:0]) begin
            rb_valid_reg[kb] <= 1'b0;
        end
    end
    if (rst) begin
        rb_valid_reg <= {RB_ROWS{1'b0}};
    end
end

// The last row's words (entries x 12, or x 1 for Maglev slots): its lines' strobes.
wire [8:0] bk_last_words = is_ct ? {4'd0, bk_lastn_reg} * CT_EW9 : {4'd0, bk_lastn_reg};
/* verilator lint_off UNUSEDSIGNAL */ // (at most 12 lines)
wire [8:0] bk_last_lines = (bk_last_words + 9'd15) >> 4;
/* verilator lint_on UNUSEDSIGNAL */
wire [3:0] bk_lpr = is_ct ? CT_LPR4 : 4'd1;
// The row in hand's line bk_line_reg, and its strobes.
reg  [DW-1:0] bk_line_data;
reg  [KW-1:0] bk_line_strb;
integer kl;
always @* begin
    bk_line_data = bk_row_reg[DW-1:0];
    bk_line_strb = bk_lstrb_reg[KW-1:0];
    for (kl = 1; kl < LPR_MAX; kl = kl + 1) begin
        if (bk_line_reg == kl[3:0]) begin
            bk_line_data = bk_row_reg[kl*DW +: DW];
            bk_line_strb = bk_lstrb_reg[kl*KW +: KW];
        end
    end
    if (!bk_islast_reg) begin
        bk_line_strb = {KW{1'b1}};
    end
end
/* verilator lint_off UNUSEDSIGNAL */ // (inc_if's top bits)
wire [63:0] bk_next_inc = inc_if({32'd0, bk_next_reg}, 1'b1);
wire [63:0] bk_wline_inc = inc_if({6'd0, bk_wline_reg}, 1'b1);
/* verilator lint_on UNUSEDSIGNAL */
// Rows in a command of `count` entries from a row's start, rows of 2^lg entries.
/* verilator lint_off UNUSEDSIGNAL */
wire [31:0] bk_lg_mask = is_ct ? CT_WAY_MASK : 32'd15;
wire [31:0] bk_rows_floor = is_ct ? count_reg >> CT_WB : count_reg >> 4;
wire [63:0] bk_rows = inc_if({32'd0, bk_rows_floor}, (count_reg & bk_lg_mask) != 32'd0);
/* verilator lint_on UNUSEDSIGNAL */

// The ring_wb record of the command ring.
wire [127:0] wb_rec = {8'd0, err_code_reg, err_slot_reg, errors_reg, 32'd0, 16'd0, dev_reg};

// The descriptor (its half of the line read), and whether that read was refused.
reg  [255:0] d_line = 256'd0;
reg          d_err_reg = 1'b0;
wire [7:0]  d_op = d_line[NLB_CMD_DESC_OP_LSB +: NLB_CMD_DESC_OP_W];
wire [7:0]  d_table = d_line[NLB_CMD_DESC_TABLE_LSB +: NLB_CMD_DESC_TABLE_W];

// A failure of the command in flight (dev still moves on: S_DONE).
task fail(input [2:0] code);
    begin
        errors_reg <= errors_reg + 32'd1;
        err_slot_reg <= slot;
        err_code_reg <= {5'd0, code};
        dirty_reg <= 1'b1;
        fault_reg <= code == NLB_DMA_ERROR_DMA_FAULT;
    end
endtask

// The command stops with `code` (NONE: done): the line in hand goes out, then S_FLUSH.
task stop(input [2:0] code);
    begin
        code_reg <= code;
        rd_lines_reg <= 34'd0;
        state_reg <= S_FLUSH;
    end
endtask

wire us_tick = us_div_reg == US_DIV - 16'd1;
wire [15:0] irq_count = irq_cfg_reg[NLB_REG_DMA_CMD_IRQ_COUNT_LSB +: NLB_REG_DMA_CMD_IRQ_COUNT_W]
                        == 8'd0 ? 16'd1
                        : {8'd0, irq_cfg_reg[NLB_REG_DMA_CMD_IRQ_COUNT_LSB
                                             +: NLB_REG_DMA_CMD_IRQ_COUNT_W]};
wire [15:0] irq_usecs = irq_cfg_reg[NLB_REG_DMA_CMD_IRQ_USECS_LSB +: NLB_REG_DMA_CMD_IRQ_USECS_W];
wire        irq_on = irq_cfg_reg[NLB_REG_DMA_CMD_IRQ_ENABLE_LSB];

// A record's first state: its index word (a list), its data words (a write), or its index
// checked (a read).
wire [4:0] rec_first = list_reg ? S_IDX : is_write ? (is_ct ? S_CTI : S_WORD) : S_RANGE;

// The record's words go to the window; a word of the read-ahead that a refused read filled
// stops the command.
wire word_bad = wq_valid_reg && wq_err_reg;

always @* begin
    rw_take = 1'b0;
    case (state_reg)
    S_IDX, S_SKIP: rw_take = wq_valid_reg && !wq_err_reg;
    S_WORD: rw_take = wq_valid_reg && !wq_err_reg && !al_busy_reg;
    default: rw_take = 1'b0;
    endcase
end

always @(posedge clk) begin
    irq_reg <= 1'b0;
    fault_reg <= 1'b0;
    us_div_reg <= us_tick ? 16'd0 : us_div_reg + 16'd1;
    d_lo_reg <= {1'b0, base_reg[20:0]} + {1'b0, slot, 5'd0};
    d_fresh_reg <= !ext_wr_req && state_reg != S_DONE;
    beyond_reg <= idx_reg[32] || idx_reg[31:0] >= depth_reg;
    range_ok_reg <= state_reg == S_RANGE;
    cti_ok_reg <= state_reg == S_CTI;

    // AXI-Lite handshakes.
    if (m_axil_awvalid && m_axil_awready) begin
        al_aw_reg <= 1'b0;
    end
    if (m_axil_wvalid && m_axil_wready) begin
        al_w_reg <= 1'b0;
    end
    if (m_axil_bvalid && m_axil_bready) begin
        al_busy_reg <= 1'b0;
    end
    if (m_axil_arvalid && m_axil_arready) begin
        al_ar_reg <= 1'b0;
    end
    if (m_axil_rvalid && m_axil_rready) begin
        al_busy_reg <= 1'b0;
        al_rdata_reg <= m_axil_rdata;
    end

    // AXI handshakes.
    if (aw_valid_reg && m_axi_awready) begin
        aw_valid_reg <= 1'b0;
    end
    if (w_valid_reg && m_axi_wready) begin
        w_valid_reg <= 1'b0;
    end
    if (ar_valid_reg && m_axi_arready) begin
        ar_valid_reg <= 1'b0;
    end
    b_out_reg <= b_out_reg + {9'd0, aw_valid_reg && m_axi_awready} - {9'd0, b_hs};

    // Range reads by rows: the rows asked for and the buffer's room.
    bk_fresh_reg <= !bk_issue && !bw_pop;
    bk_beyond_reg <= bk_next_reg >= bk_depth_reg;
    bk_out_reg <= bk_out_reg + {{RBB{1'b0}}, bk_issue} - {{RBB{1'b0}}, bk_take};
    if (bk_issue || bw_pop) begin
        bk_next_reg <= bk_next_inc[31:0];
        bk_left_reg <= bk_left_reg - 32'd1;
    end
    // Range writes by rows: a line taken from the read-ahead goes out as a row.
    bw_req_reg <= bw_pop;
    if (bw_pop) begin
        bw_busy_reg <= 1'b1;
        bw_row_reg <= {bank_reg, bk_next_reg[MG_RB-2:0]};
        bw_data_reg <= mg_row(rf_head);
        rf_rd_reg <= rf_rd_reg + 4'd1;
    end
    if (mg_b_wr_ack) begin
        bw_busy_reg <= 1'b0;
    end
    if (b_hs && m_axi_bresp != 2'b00) begin
        b_err_reg <= 1'b1;
    end

    // The read-ahead: bursts out, lines in (a descriptor's line is the engine's).
    burst_reg <= burst;
    line_off_next_reg <= {1'b0, rd_line_reg[11:6]} + {2'd0, burst};
    burst_ok_reg <= rd_lines_reg != 34'd0 && burst <= room;
    rd_cool_reg <= rd_issue;
    if (rd_issue) begin
        ar_valid_reg <= 1'b1;
        ar_addr_reg <= rd_line_reg;
        ar_len_reg <= {3'd0, burst_reg - 5'd1};
        rd_line_reg <= {page_next[51:0], line_off_next[5:0], 6'd0};
        rd_lines_reg <= rd_lines_reg - {29'd0, burst_reg};
    end
    // (The line of a descriptor is written too, into the slot after the last: the buffer is
    // empty then, and the slot is not counted. The write takes no decision of the engine.)
    if (r_hs) begin
        rf_data[rf_wr_reg] <= m_axi_rdata;
        rf_err[rf_wr_reg] <= m_axi_rresp != 2'b00;
    end
    if (r_hs && state_reg != S_D_R) begin
        rf_wr_reg <= rf_wr_reg + 4'd1;
    end
    if (rw_take) begin
        wq_valid_reg <= 1'b0;
    end
    if (rw_refill) begin
        wq_valid_reg <= 1'b1;
        wq_word_reg <= rw_word;
        wq_err_reg <= rw_err;
        rw_reg <= rw_reg + 4'd1;
        if (rw_reg == 4'd15) begin
            rf_rd_reg <= rf_rd_reg + 4'd1;
        end
    end
    rf_count_reg <= rf_count_reg + {4'd0, r_hs && state_reg != S_D_R}
        - {4'd0, rw_refill && rw_reg == 4'd15} - {4'd0, bw_pop};
    rd_fly_reg <= rd_fly_reg + (rd_issue ? burst_reg : 5'd0)
        - {4'd0, r_hs && state_reg != S_D_R};

    case (state_reg)
    S_IDLE: begin
        b_err_reg <= 1'b0;
        if (dirty_reg && (!waiting || since_wb_reg >= WB_N)) begin
            dirty_reg <= 1'b0;
            since_wb_reg <= 8'd0;
            aw_addr_reg <= dma_wb;
            w_data_reg <= {wb_rec, {(DW - 128){1'b0}}} >> (DW - 128 - 8 * WB_OFF);
            w_strb_reg <= {{16{1'b1}}, {(KW - 16){1'b0}}} >> (KW - 16 - WB_OFF);
            aw_valid_reg <= dma_wb != 64'd0;
            w_valid_reg <= dma_wb != 64'd0;
            state_reg <= S_WB_W;
        end else if (waiting && d_fresh_reg) begin
            ar_valid_reg <= 1'b1;
            ar_addr_reg <= {desc_addr[63:6], 6'd0};
            ar_len_reg <= 8'd0;
            d_half_reg <= desc_addr[5];
            state_reg <= S_D_R;
        end
    end
    S_WB_W: begin
        if (out_free) begin
            state_reg <= S_WB_B;
        end
    end
    S_WB_B: begin
        if (b_out_reg == 10'd0) begin
            fault_reg <= b_err_reg;
            if (irq_on && pending_reg != 16'd0 && pending_reg >= irq_count) begin
                pending_reg <= 16'd0;
                elapsed_reg <= 16'd0;
                irq_reg <= 1'b1;
            end
            state_reg <= S_IDLE;
        end
    end
    S_D_R: begin
        if (r_hs) begin
            d_line <= d_half_reg ? m_axi_rdata[511:256] : m_axi_rdata[255:0];
            d_err_reg <= m_axi_rresp != 2'b00;
            state_reg <= S_CHK;
        end
    end
    S_CHK: begin
        table_reg <= d_table[2:0];
        bank_reg <= d_line[NLB_CMD_DESC_BANK_LSB];
        list_reg <= d_line[NLB_CMD_DESC_LIST_LSB];
        count_reg <= d_line[NLB_CMD_DESC_COUNT_LSB +: 32];
        idx_reg <= {1'b0, d_line[NLB_CMD_DESC_INDEX_LSB +: 32]};
        addr_reg <= d_line[NLB_CMD_DESC_ADDR_LSB +: 64];
        left_reg <= d_line[NLB_CMD_DESC_COUNT_LSB +: 32];
        last_reg <= d_line[NLB_CMD_DESC_COUNT_LSB +: 32] == 32'd1;
        is_write <= d_op == {5'd0, NLB_DMA_CMD_TABLE_WRITE}
            || d_op == {5'd0, NLB_DMA_CMD_CT_WRITE};
        is_ct <= d_op == {5'd0, NLB_DMA_CMD_CT_WRITE} || d_op == {5'd0, NLB_DMA_CMD_CT_READ};
        is_hit <= d_op == {5'd0, NLB_DMA_CMD_HIT_READ};
        is_table <= d_op == {5'd0, NLB_DMA_CMD_TABLE_WRITE}
            || d_op == {5'd0, NLB_DMA_CMD_TABLE_READ};
        code_reg <= NLB_DMA_ERROR_NONE;
        if (d_err_reg) begin
            fail(NLB_DMA_ERROR_DMA_FAULT);
            state_reg <= S_DONE;
        end else if (d_op == 8'd0 || d_op > NLB_DMA_CMD_COUNT || d_table >= NLB_TABLE_COUNT
                || d_line[NLB_CMD_DESC_COUNT_LSB +: 32] == 32'd0
                || (d_op == {5'd0, NLB_DMA_CMD_HIT_READ} && d_line[NLB_CMD_DESC_LIST_LSB])) begin
            fail(NLB_DMA_ERROR_BAD_COMMAND);
            state_reg <= S_DONE;
        end else begin
            state_reg <= S_DEC;
        end
    end
    S_DEC: begin
        depth_reg <= is_table ? table_depth(table_reg) : D_CT;
        words_reg <= is_hit ? 6'd1 : is_ct ? NLB_CT_ENTRY_WORDS : table_words(table_reg);
        wp_reg <= addr_reg[63:2];
        total_reg <= 38'd0;
        mul_reg <= (is_hit ? 6'd1 : is_ct ? NLB_CT_ENTRY_WORDS : table_words(table_reg))
            + {5'd0, list_reg};
        if (is_hit && idx_reg[4:0] != 5'd0) begin
            fail(NLB_DMA_ERROR_BAD_INDEX);
            state_reg <= S_DONE;
        end else if (addr_reg[1:0] != 2'd0) begin
            fail(NLB_DMA_ERROR_BAD_ENTRY);
            state_reg <= S_DONE;
        end else if (is_write && is_table && !list_reg && table_reg == NLB_TABLE_MAGLEV
                && addr_reg[5:0] == 6'd0 && idx_reg[3:0] == 4'd0 && count_reg[3:0] == 4'd0) begin
            state_reg <= S_BW0;
        end else if (!is_write && !list_reg && !is_hit && addr_reg[5:0] == 6'd0
                && (is_ct ? (idx_reg[31:0] & CT_WAY_MASK) == 32'd0
                          : table_reg == NLB_TABLE_MAGLEV && idx_reg[3:0] == 4'd0)) begin
            state_reg <= S_BK0;
        end else begin
            state_reg <= S_MUL;
        end
    end
    S_MUL: begin
        // total = count x stride, shift and add from the stride's top bit; each step's add in
        // two halves over two clocks (S_MUL: the low 19 bits, S_MUL_HI: the high ones with the
        // carry), a 38-bit carry chain being too deep for one.
        total_reg[18:0] <= mul_lo[18:0];
        total_reg[37:19] <= total_reg[36:18];
        mul_c_reg <= mul_lo[19];
        mul_hi_reg <= mul_reg[5] ? {6'd0, count_reg[31:19]} : 19'd0;
        state_reg <= S_MUL_HI;
    end
    S_MUL_HI: begin
        total_reg[37:19] <= total_reg[37:19] + mul_hi_reg + {18'd0, mul_c_reg};
        mul_reg <= {mul_reg[4:0], 1'b0};
        w_reg <= w_reg + 6'd1;
        state_reg <= S_MUL;
        if (w_reg == 6'd5) begin
            w_reg <= 6'd0;
            state_reg <= S_LINES;
        end
    end
    S_LINES: begin
        // The words from the first line's start, plus 15: total_reg[37:4] lines; in two
        // halves as above (S_LINES_HI adds the carry).
        total_reg[18:0] <= span_lo[18:0];
        mul_c_reg <= span_lo[19];
        state_reg <= S_LINES_HI;
    end
    S_LINES_HI: begin
        total_reg[37:19] <= total_reg[37:19] + {18'd0, mul_c_reg};
        state_reg <= S_SPAN;
    end
    S_SPAN: begin
        // Only writes and list reads read entry data: whole lines from the one the data starts
        // in, its words taken from the data's first (the words before it skipped).
        if (is_write || (list_reg && !is_hit)) begin
            rd_line_reg <= {addr_reg[63:6], 6'd0};
            rd_lines_reg <= total_reg[37:4];
            rw_reg <= addr_reg[5:2];
        end
        if (is_table) begin
            axl_write(NLB_REG_TABLE_SELECT[AW-1:0],
                ({29'd0, table_reg} << NLB_REG_TABLE_SELECT_TABLE_LSB)
                | ({31'd0, bank_reg} << NLB_REG_TABLE_SELECT_BANK_LSB));
        end
        state_reg <= S_SEL;
    end
    S_SEL: begin
        if (!al_busy_reg) begin
            state_reg <= S_REC;
        end
    end
    S_REC: begin
        w_reg <= 6'd0;
        if (b_err_reg) begin
            stop(NLB_DMA_ERROR_DMA_FAULT);
        end else begin
            state_reg <= rec_first;
        end
    end
    S_IDX: begin
        if (word_bad) begin
            stop(NLB_DMA_ERROR_DMA_FAULT);
        end else if (rw_take) begin
            idx_reg <= {1'b0, wq_word_reg};
            wp_reg <= wp_inc[61:0];
            state_reg <= is_write ? (is_ct ? S_CTI : S_WORD) : S_SKIP;
        end
    end
    S_SKIP: begin
        // A list read's record: the room the engine fills, skipped in the read-ahead.
        if (word_bad) begin
            stop(NLB_DMA_ERROR_DMA_FAULT);
        end else if (rw_take) begin
            w_reg <= w_reg + 6'd1;
            if (w_reg + 6'd1 == words_reg) begin
                w_reg <= 6'd0;
                state_reg <= S_RANGE;
            end
        end
    end
    S_CTI: begin
        // A connection's index before its words: conntrack reads the old entry meanwhile, so
        // the WRITE_AT below waits for no memory read. (An index beyond the table is left to
        // S_RANGE.)
        if (!al_busy_reg && cti_ok_reg) begin
            if (!beyond_reg) begin
                axl_write(NLB_REG_CONNTRACK_INDEX[AW-1:0], idx_reg[31:0]);
            end
            state_reg <= S_WORD;
        end
    end
    S_WORD: begin
        if (word_bad && !al_busy_reg) begin
            stop(NLB_DMA_ERROR_DMA_FAULT);
        end else if (rw_take) begin
            axl_write(win_data + {{(AW - 8){1'b0}}, w_reg, 2'b00}, wq_word_reg);
            wp_reg <= wp_inc[61:0];
            w_reg <= w_reg + 6'd1;
            if (w_reg + 6'd1 == words_reg) begin
                w_reg <= 6'd0;
                state_reg <= S_RANGE;
            end
        end
    end
    S_RANGE: begin
        if (!al_busy_reg && range_ok_reg) begin
            if (beyond_reg) begin
                stop(NLB_DMA_ERROR_BAD_INDEX);
            end else if (is_hit) begin
                axl_write(NLB_REG_CONNTRACK_INDEX[AW-1:0], idx_reg[31:0]);
                state_reg <= S_HIDX;
            end else begin
                axl_write(win_cmd, ({29'd0, is_write ? NLB_TABLE_CMD_WRITE_AT
                                                     : NLB_TABLE_CMD_READ_AT}
                                    << NLB_REG_TABLE_CMD_OP_LSB)
                                   | (idx_reg[31:0] << NLB_REG_TABLE_CMD_INDEX_LSB));
                state_reg <= S_CMD;
            end
        end
    end
    S_CMD: begin
        // A read's index was checked above and its command's response comes once the data
        // words hold the entry: its words are read at once. A write's status says whether the
        // table took the entry.
        if (!al_busy_reg) begin
            if (is_write && is_ct) begin
                // Its status can only say a bad index, checked above; the write is posted.
                sync_due_reg <= 1'b1;
                state_reg <= S_NEXT;
            end else if (is_write) begin
                axl_read(win_status);
                state_reg <= S_STAT;
            end else begin
                axl_read(win_data);
                state_reg <= S_RDW;
            end
        end
    end
    S_STAT: begin
        // (A write's: the table refused the entry, or the connection table its index.)
        if (!al_busy_reg) begin
            if (al_rdata_reg[NLB_REG_TABLE_STATUS_BUSY_LSB]) begin
                axl_read(win_status);
            end else if (al_rdata_reg[NLB_REG_TABLE_STATUS_ERROR_LSB]) begin
                stop(is_table ? NLB_DMA_ERROR_BAD_ENTRY : NLB_DMA_ERROR_BAD_INDEX);
            end else begin
                state_reg <= S_NEXT;
            end
        end
    end
    S_RDW: begin
        // The word in; the next one asked for while this one goes into its line.
        if (!al_busy_reg) begin
            rword_reg <= al_rdata_reg;
            if (!is_hit && w_reg + 6'd1 != words_reg) begin
                axl_read(win_data + {{(AW - 8){1'b0}}, w_reg + 6'd1, 2'b00});
            end
            state_reg <= S_PUSH;
        end
    end
    S_PUSH: begin
        // Into the line being collected; a word of another line sends that one out first.
        if (!wl_any_reg || wl_same || out_free) begin
            if (wl_any_reg && !wl_same) begin
                aw_addr_reg <= {wl_line_reg, 6'd0};
                w_data_reg <= wl_data_reg;
                w_strb_reg <= wl_strb_reg;
                aw_valid_reg <= 1'b1;
                w_valid_reg <= 1'b1;
                wl_data_reg <= {DW{1'b0}};
                wl_strb_reg <= {KW{1'b0}};
            end
            wl_line_reg <= wp_reg[61:4];
            wl_any_reg <= 1'b1;
            for (kw = 0; kw < 16; kw = kw + 1) begin
                if (wp_reg[3:0] == kw[3:0]) begin
                    wl_data_reg[32*kw +: 32] <= rword_reg;
                    wl_strb_reg[4*kw +: 4] <= 4'hf;
                end
            end
            wp_reg <= wp_inc[61:0];
            w_reg <= w_reg + 6'd1;
            if (is_hit || w_reg + 6'd1 == words_reg) begin
                w_reg <= 6'd0;
                state_reg <= S_NEXT;
            end else begin
                state_reg <= S_RDW;
            end
        end
    end
    S_HIDX: begin
        if (!al_busy_reg) begin
            axl_read(NLB_REG_CONNTRACK_HIT_READ[AW-1:0]);
            state_reg <= S_RDW;
        end
    end
    S_NEXT: begin
        // The next record starts here (S_REC's work: a refused write seen stops it).
        left_reg <= left_reg - 32'd1;
        last_reg <= left_reg == 32'd2;
        idx_reg <= idx_reg + (is_hit ? 33'd32 : 33'd1);
        w_reg <= 6'd0;
        if (last_reg) begin
            stop(NLB_DMA_ERROR_NONE);
        end else if (b_err_reg) begin
            stop(NLB_DMA_ERROR_DMA_FAULT);
        end else begin
            state_reg <= rec_first;
        end
    end
    S_BK0: begin
        bk_next_reg <= is_ct ? idx_reg[31:0] >> CT_WB : idx_reg[31:0] >> 4;
        bk_row0_reg <= is_ct ? idx_reg[CT_WB +: RBB] : idx_reg[4 +: RBB];
        bk_depth_reg <= is_ct ? CT_ENTRIES / CT_WAYS : MAGLEV_SLOTS / 16;
        bk_left_reg <= bk_rows[31:0];
        bk_wleft_reg <= bk_rows[31:0];
        bk_lastn_reg <= (count_reg & bk_lg_mask) == 32'd0 ? (is_ct ? CT_WAYS5 : 5'd16)
                                                         : count_reg[4:0] & bk_lg_mask[4:0];
        bk_head_reg <= {RBB{1'b0}};
        bk_out_reg <= {(RBB+1){1'b0}};
        bk_wbusy_reg <= 1'b0;
        bk_wline_reg <= addr_reg[63:6];
        state_reg <= S_BK1;
    end
    S_BK1: begin
        for (kx = 0; kx < LPR_MAX * 16; kx = kx + 1) begin
            bk_lstrb_reg[4*kx +: 4] <= kx[8:0] < bk_last_words ? 4'hf : 4'h0;
        end
        bk_llast_reg <= bk_last_lines[3:0];
        state_reg <= S_BULK;
    end
    S_BW0: begin
        bk_next_reg <= idx_reg[31:0] >> 4;
        bk_depth_reg <= MAGLEV_SLOTS / 16;
        bk_left_reg <= count_reg >> 4;
        rd_line_reg <= {addr_reg[63:6], 6'd0};
        rd_lines_reg <= {6'd0, count_reg[31:4]};
        state_reg <= S_BWR;
    end
    S_BWR: begin
        // Done once every row is written; an index beyond the table or a line of a refused read
        // stops it (a row's data first, as entry by entry: its line's refusal first).
        if (!bw_busy_reg && !bw_req_reg) begin
            if (bk_left_reg == 32'd0) begin
                stop(NLB_DMA_ERROR_NONE);
            end else if (rw_valid && rw_err) begin
                stop(NLB_DMA_ERROR_DMA_FAULT);
            end else if (rw_valid && bk_fresh_reg && bk_beyond_reg) begin
                stop(NLB_DMA_ERROR_BAD_INDEX);
            end
        end
    end
    S_BULK: begin
        // The next row taken into hand, then its lines out one by one (dropped after a refused
        // write); done once no row is left to ask for (or the next is beyond the table, or a
        // write was refused) and every row asked for is written.
        if (bk_take) begin
            bk_row_reg <= rb_mem[bk_head_reg];
            bk_wbusy_reg <= 1'b1;
            bk_line_reg <= 4'd0;
            bk_islast_reg <= bk_wleft_reg == 32'd1;
            bk_lines_reg <= bk_wleft_reg == 32'd1 ? bk_llast_reg : bk_lpr;
            bk_head_reg <= bk_head_reg + 1'b1;
            bk_wleft_reg <= bk_wleft_reg - 32'd1;
        end else if (bk_wbusy_reg && (out_free || b_err_reg)) begin
            if (!b_err_reg) begin
                aw_addr_reg <= {bk_wline_reg, 6'd0};
                w_data_reg <= bk_line_data;
                w_strb_reg <= bk_line_strb;
                aw_valid_reg <= 1'b1;
                w_valid_reg <= 1'b1;
                bk_wline_reg <= bk_wline_inc[57:0];
            end
            bk_line_reg <= bk_line_reg + 4'd1;
            if (bk_line_reg + 4'd1 == bk_lines_reg) begin
                bk_wbusy_reg <= 1'b0;
            end
        end else if ((bk_left_reg == 32'd0 || (bk_fresh_reg && bk_beyond_reg) || b_err_reg)
                && bk_out_reg == {(RBB+1){1'b0}} && !bk_wbusy_reg) begin
            stop(b_err_reg ? NLB_DMA_ERROR_DMA_FAULT
                 : bk_left_reg != 32'd0 ? NLB_DMA_ERROR_BAD_INDEX : NLB_DMA_ERROR_NONE);
        end
    end
    S_FLUSH: begin
        // The line in hand out, then every write answered and every read burst drained.
        if (wl_any_reg) begin
            if (out_free) begin
                aw_addr_reg <= {wl_line_reg, 6'd0};
                w_data_reg <= wl_data_reg;
                w_strb_reg <= wl_strb_reg;
                aw_valid_reg <= 1'b1;
                w_valid_reg <= 1'b1;
                wl_data_reg <= {DW{1'b0}};
                wl_strb_reg <= {KW{1'b0}};
                wl_any_reg <= 1'b0;
            end
        end else if (sync_due_reg) begin
            if (!al_busy_reg) begin
                axl_read(NLB_REG_CONNTRACK_STATUS[AW-1:0]);
                sync_due_reg <= 1'b0;
            end
        end else if (out_free && b_out_reg == 10'd0 && rd_fly_reg == 5'd0 && !ar_valid_reg
                && !al_busy_reg) begin
            rf_count_reg <= 5'd0;
            rf_wr_reg <= 4'd0;
            rf_rd_reg <= 4'd0;
            rw_reg <= 4'd0;
            wq_valid_reg <= 1'b0;
            if (code_reg != NLB_DMA_ERROR_NONE) begin
                fail(code_reg);
            end else if (b_err_reg) begin
                fail(NLB_DMA_ERROR_DMA_FAULT);
            end
            state_reg <= S_DONE;
        end
    end
    S_DONE: begin
        dev_reg <= dev_reg + 16'd1;
        dirty_reg <= 1'b1;
        if (pending_reg != 16'hFFFF) begin
            pending_reg <= pending_reg + 16'd1;
        end
        since_wb_reg <= since_wb_reg == 8'hFF ? 8'hFF : since_wb_reg + 8'd1;
        state_reg <= S_IDLE;
    end
    default: state_reg <= S_IDLE;
    endcase

    // Moderation by time: irq.usecs after the first completion not yet signalled.
    if (us_tick && pending_reg != 16'd0 && state_reg != S_WB_B && irq_on && irq_usecs != 16'd0)
    begin
        if (elapsed_reg + 16'd1 >= irq_usecs) begin
            pending_reg <= 16'd0;
            elapsed_reg <= 16'd0;
            irq_reg <= 1'b1;
        end else begin
            elapsed_reg <= elapsed_reg + 16'd1;
        end
    end

    // Register writes (the ring is set up while no command runs).
    if (ext_wr_req) begin
        if (wr_word == NLB_REG_DMA_CMD_BASE_LO) begin
            base_reg[31:0] <= wr_base_lo;
            base_nz_reg <= wr_base_lo != 32'd0 || base_reg[63:32] != 32'd0;
        end
        if (wr_word == NLB_REG_DMA_CMD_BASE_HI) begin
            base_reg[63:32] <= wr_base_hi;
            base_nz_reg <= wr_base_hi != 32'd0 || base_reg[31:0] != 32'd0;
        end
        if (wr_word == NLB_REG_DMA_CMD_SIZE) begin
            log2_reg <= wr_size[NLB_REG_DMA_CMD_SIZE_LOG2_LSB +: NLB_REG_DMA_CMD_SIZE_LOG2_W];
            ren_reg <= wr_size[NLB_REG_DMA_CMD_SIZE_ENABLE_LSB];
            host_reg <= 16'd0;
            dev_reg <= 16'd0;
            errors_reg <= 32'd0;
            err_slot_reg <= 16'd0;
            err_code_reg <= 8'd0;
            pending_reg <= 16'd0;
            elapsed_reg <= 16'd0;
            dirty_reg <= 1'b0;
        end
        if (wr_word == NLB_REG_DMA_CMD_HOST) begin
            host_reg <= wr_host[NLB_REG_DMA_CMD_HOST_INDEX_LSB +: NLB_REG_DMA_CMD_HOST_INDEX_W];
        end
        if (wr_word == NLB_REG_DMA_CMD_IRQ) begin
            irq_cfg_reg <= merge(irq_cfg_reg, ext_wr_data, ext_wr_strb)
                & NLB_REG_DMA_CMD_IRQ_DEFINED;
        end
    end

    if (rst) begin
        state_reg <= S_IDLE;
        sync_due_reg <= 1'b0;
        base_reg <= 64'd0;
        base_nz_reg <= 1'b0;
        log2_reg <= 4'd0;
        ren_reg <= 1'b0;
        host_reg <= 16'd0;
        dev_reg <= 16'd0;
        errors_reg <= 32'd0;
        err_slot_reg <= 16'd0;
        err_code_reg <= 8'd0;
        irq_cfg_reg <= 32'd0;
        pending_reg <= 16'd0;
        elapsed_reg <= 16'd0;
        dirty_reg <= 1'b0;
        since_wb_reg <= 8'd0;
        us_div_reg <= 16'd0;
        irq_reg <= 1'b0;
        fault_reg <= 1'b0;
        al_aw_reg <= 1'b0;
        al_w_reg <= 1'b0;
        al_ar_reg <= 1'b0;
        al_busy_reg <= 1'b0;
        aw_valid_reg <= 1'b0;
        w_valid_reg <= 1'b0;
        ar_valid_reg <= 1'b0;
        b_out_reg <= 10'd0;
        b_err_reg <= 1'b0;
        rf_count_reg <= 5'd0;
        rf_wr_reg <= 4'd0;
        rf_rd_reg <= 4'd0;
        rd_fly_reg <= 5'd0;
        rd_lines_reg <= 34'd0;
        rw_reg <= 4'd0;
        wq_valid_reg <= 1'b0;
        wl_any_reg <= 1'b0;
        wl_strb_reg <= {KW{1'b0}};
        wl_data_reg <= {DW{1'b0}};
        w_reg <= 6'd0;
    end
end

// ---- register reads -------------------------------------------------------------------------

reg        rd_ack_reg = 1'b0;
reg [31:0] rd_data_reg = 32'd0;
reg        wr_ack_reg = 1'b0;
reg [31:0] rd_v;

always @* begin
    rd_v = 32'd0;
    case (rd_word)
    NLB_REG_DMA_CMD_BASE_LO: rd_v = base_reg[31:0];
    NLB_REG_DMA_CMD_BASE_HI: rd_v = base_reg[63:32];
    NLB_REG_DMA_CMD_SIZE: rd_v = size_word;
    NLB_REG_DMA_CMD_HOST: rd_v = {16'd0, host_reg};
    NLB_REG_DMA_CMD_DEV: rd_v = {16'd0, dev_reg};
    NLB_REG_DMA_CMD_IRQ: rd_v = irq_cfg_reg;
    default: rd_v = 32'd0;
    endcase
end

always @(posedge clk) begin
    rd_ack_reg <= ext_rd_req;
    wr_ack_reg <= ext_wr_req;
    if (ext_rd_req) begin
        rd_data_reg <= rd_v;
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
