`resetall
`timescale 1ns / 1ps
`default_nettype none

// A memory stage of the lookup (docs/pipeline.md section 14): packets enter in order, those
// that need a table row read it through CHANNELS AXI4 read ports (ids per channel, many reads
// in flight, responses in any order), and leave in the order they entered once their row is
// in. A write record orders the command engine's writes against the reads in flight: every
// packet leaving after a write was recorded sees the written entry in its row, whole.
//
// Packets: s_valid/s_state/s_read/s_row enter (one per clock at most; the caller keeps at most
// SLOTS packets in the stage: it counts what it sent and what left on m_valid). A packet leaves
// when it is the oldest, its row is in (or it needed none) and m_allow is high; m_valid/m_state/
// m_read/m_data come out 2 clocks after the clock it left (RAM read, then the merge into the
// output register).
// m_data is the row as read (entry e of the row at bits [e*LANE_W +: ENTRY_W]), the write
// record's entry in place when the record names the row; undefined when m_read is low.
//
// Memory: row r of the table is on channel r mod CHANNELS, at byte
// CH_BASE + c * CH_STRIDE + (r / CHANNELS) << ROW_SHIFT of its port, BEATS = ROW_W / DATA_W
// beats of DATA_W bits (INCR bursts of full-width beats: arsize / awsize = log2(DATA_W / 8),
// which the shell ties). The ports must not interleave the beats of two read bursts (rlast ends
// one before the next starts), as AXI4 slaves that do not interleave read data behave. Read
// ids 0 .. 2^ID_W - 2 belong to the pipeline; id 2^ID_W - 1 to the command engine's reads;
// writes use id 0: a command write alone, direct writes one after another, each channel
// answering its own in order.
//
// Command engine (c_*): one request at a time. A write stores c_wr_entry as entry c_wr_lane of
// row c_wr_row (one burst over the entry's LANE_W / 8 bytes, byte strobes; the bits of the lane
// past ENTRY_W are written 0) and acknowledges when the memory's write response came back; a
// read returns the whole row as the memory holds it. With FULL_WR and c_wr_full, the write
// stores c_wr_row_data as the whole row (one burst over every beat), recorded whole.
//
// Write record: a write first waits until the record is free, takes it (row, lane, entry), then
// goes out. The record is free again once the write's response is in and every packet that
// was in the stage then has left (and two clocks more: the merge reads the record one clock
// after a packet leaves). So a packet that leaves before the record is taken sees the memory
// before the write, and every packet that leaves after sees the written entry.
//
// Bulk reads (b_rd_* / b_rs_*; the command ring's range reads, nlb_cmd_ring): rows asked for
// one a clock at most (b_rd_ready while the request register is free), many in flight, each
// read with an id of the pipeline's pool (so a bulk read waits only for its channel's AR and an
// id, and takes every other turn at most when the channel's packets want it too). A row
// comes back on b_rs_valid / b_rs_row / b_rs_data for one clock, in any order: the taker never
// refuses it (it asks for no more rows than it has room for). Reads as the memory holds the
// row, as a command read.
//
// Direct writes (DIRECT_WR = 1; the connection table's hardware learning, nlb_ct_learn): l_wr_*
// writes an entry like the command engine but without the record (the writer orders its
// writes against the packets itself): l_wr_take pulses in the clock a write is taken, and
// l_wr_ack once per write, in the order taken, when its write response came back. Direct
// writes follow each other on the port without waiting for their responses (up to D_OUT of
// them answered later, each channel's in order; the responses are taken in the order the
// writes were sent, so a later channel's waits); a direct write starts only while no command
// write is on the port (one that waits for the record waits on), and a command write takes
// the record only while no direct write is out or unanswered and c_wr_hold is low (c_wr_take
// pulses in the clock it does). m_leave pulses in the clock a packet leaves (the head moves
// on).
//
// Statistics: st_read pulses per pipeline read (as its packet enters; each is issued once); st_lat_valid / st_lat give each
// pipeline read's latency in clocks (AR loaded to its last beat taken, modulo 2^16) when it is in;
// st_wait is high in a clock where a packet waits at the head for its row.
module nlb_mem_stage #(
    // Packet state carried through the stage (bits).
    parameter STATE_W = 64,
    // Global row index width.
    parameter ROW_BITS = 12,
    // Bits of a row (what one read returns): BEATS * DATA_W.
    parameter ROW_W = 1536,
    // Memory port data width (bits, a multiple of 8).
    parameter DATA_W = 256,
    // Channels (a power of two).
    parameter CHANNELS = 1,
    // AXI address width.
    parameter ADDR_W = 32,
    // AXI id width (>= 2).
    parameter ID_W = 6,
    // log2 of the bytes between two rows of a channel (rows are aligned to it).
    parameter ROW_SHIFT = 8,
    // First byte of channel 0's region, and the distance between channels' regions.
    parameter [ADDR_W-1:0] CH_BASE = {ADDR_W{1'b0}},
    parameter [ADDR_W-1:0] CH_STRIDE = {ADDR_W{1'b0}},
    // Bits from one entry of a row to the next (a multiple of 8), and the bits of an entry.
    parameter LANE_W = 384,
    parameter ENTRY_W = 365,
    // Packets the stage holds (a power of two >= 4).
    parameter SLOTS = 32,
    // A second, record-less writer (l_wr_*, c_wr_hold): 1 for the connection table with
    // hardware learning.
    parameter DIRECT_WR = 0,
    // Whole-row command writes (c_wr_full, c_wr_row_data): 1 for the Maglev slots (the command
    // ring's range writes).
    parameter FULL_WR = 0,
    // Entry index width within a row (derived; do not override).
    parameter LANE_BITS_P = (ROW_W / LANE_W) > 1 ? $clog2(ROW_W / LANE_W) : 1
) (
    input  wire                         clk,
    input  wire                         rst,

    // Packets in.
    input  wire                         s_valid,
    input  wire [STATE_W-1:0]           s_state,
    input  wire                         s_read,
    input  wire [ROW_BITS-1:0]          s_row,

    // Packets out, in order.
    input  wire                         m_allow,
    output wire                         m_valid,
    output wire [STATE_W-1:0]           m_state,
    output wire                         m_read,
    output wire [ROW_W-1:0]             m_data,
    output wire                         m_leave,

    // Command engine.
    input  wire                         c_wr_req,
    input  wire [ROW_BITS-1:0]          c_wr_row,
    input  wire [LANE_BITS_P-1:0]       c_wr_lane,
    input  wire [ENTRY_W-1:0]           c_wr_entry,
    /* verilator lint_off UNUSEDSIGNAL */ // (without FULL_WR)
    input  wire                         c_wr_full,
    input  wire [ROW_W-1:0]             c_wr_row_data,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                         c_wr_ack,
    input  wire                         c_rd_req,
    input  wire [ROW_BITS-1:0]          c_rd_row,
    output wire                         c_rd_ack,
    output wire [ROW_W-1:0]             c_rd_data,
    /* verilator lint_off UNUSEDSIGNAL */ // (without DIRECT_WR)
    input  wire                         c_wr_hold,
    output wire                         c_wr_take,

    // Bulk reads.
    input  wire                         b_rd_valid,
    input  wire [ROW_BITS-1:0]          b_rd_row,
    output wire                         b_rd_ready,
    output wire                         b_rs_valid,
    output wire [ROW_BITS-1:0]          b_rs_row,
    output wire [ROW_W-1:0]             b_rs_data,

    // Direct writer (DIRECT_WR).
    input  wire                         l_wr_req,
    output wire                         l_wr_take,
    input  wire [ROW_BITS-1:0]          l_wr_row,
    input  wire [LANE_BITS_P-1:0]       l_wr_lane,
    input  wire [ENTRY_W-1:0]           l_wr_entry,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                         l_wr_ack,

    // Statistics.
    output wire                         st_read,
    output wire                         st_lat_valid,
    output wire [15:0]                  st_lat,
    output wire                         st_wait,

    // AXI4 read and write ports, one per channel (channel c in the c-th slice of each vector).
    output wire [CHANNELS*ADDR_W-1:0]   m_axi_araddr,
    output wire [CHANNELS*ID_W-1:0]     m_axi_arid,
    output wire [CHANNELS*8-1:0]        m_axi_arlen,
    output wire [CHANNELS-1:0]          m_axi_arvalid,
    input  wire [CHANNELS-1:0]          m_axi_arready,
    input  wire [CHANNELS*DATA_W-1:0]   m_axi_rdata,
    input  wire [CHANNELS*ID_W-1:0]     m_axi_rid,
    input  wire [CHANNELS-1:0]          m_axi_rlast,
    input  wire [CHANNELS-1:0]          m_axi_rvalid,
    output wire [CHANNELS-1:0]          m_axi_rready,
    output wire [CHANNELS*ADDR_W-1:0]   m_axi_awaddr,
    output wire [CHANNELS*ID_W-1:0]     m_axi_awid,
    output wire [CHANNELS*8-1:0]        m_axi_awlen,
    output wire [CHANNELS-1:0]          m_axi_awvalid,
    input  wire [CHANNELS-1:0]          m_axi_awready,
    output wire [CHANNELS*DATA_W-1:0]   m_axi_wdata,
    output wire [CHANNELS*DATA_W/8-1:0] m_axi_wstrb,
    output wire [CHANNELS-1:0]          m_axi_wlast,
    output wire [CHANNELS-1:0]          m_axi_wvalid,
    input  wire [CHANNELS-1:0]          m_axi_wready,
    /* verilator lint_off UNUSEDSIGNAL */ // (one write at a time: the id is not needed)
    input  wire [CHANNELS*ID_W-1:0]     m_axi_bid,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [CHANNELS-1:0]          m_axi_bvalid,
    output wire [CHANNELS-1:0]          m_axi_bready
);

// Entries per row and their index width (derived; do not override).
localparam LANES = ROW_W / LANE_W;
localparam BEATS = ROW_W / DATA_W;
localparam BEAT_BITS = BEATS > 1 ? $clog2(BEATS) : 1;
localparam DB = DATA_W / 8;
localparam CH_BITS = CHANNELS > 1 ? $clog2(CHANNELS) : 1;
localparam SB = $clog2(SLOTS);
localparam IDS = 1 << ID_W;
localparam [ID_W-1:0] SIDE_ID = {ID_W{1'b1}};
// Row index bits within a channel.
localparam LROW_BITS = CHANNELS > 1 ? ROW_BITS - $clog2(CHANNELS) : ROW_BITS;
localparam integer BEATS_M1 = BEATS - 1;
localparam [7:0] ARLEN = BEATS_M1[7:0];

initial begin
    if (ROW_W % DATA_W != 0 || DATA_W % 8 != 0 || BEATS > 256) begin
        $error("nlb_mem_stage: ROW_W must be a multiple of DATA_W (at most 256 beats)");
        $finish;
    end
    if (LANE_W % 8 != 0 || ENTRY_W > LANE_W || LANES < 1 || LANES * LANE_W > ROW_W) begin
        $error("nlb_mem_stage: entries of ENTRY_W bits every LANE_W (bytes) within a row");
        $finish;
    end
    if (CHANNELS < 1 || (1 << $clog2(CHANNELS)) != CHANNELS || CHANNELS > (1 << ROW_BITS)) begin
        $error("nlb_mem_stage: CHANNELS must be a power of two, at most the rows");
        $finish;
    end
    if (SLOTS < 4 || (1 << SB) != SLOTS || ID_W < 2) begin
        $error("nlb_mem_stage: SLOTS must be a power of two >= 4, ID_W >= 2");
        $finish;
    end
    if ((1 << ROW_SHIFT) < DB * BEATS || ROW_SHIFT + LROW_BITS > ADDR_W) begin
        $error("nlb_mem_stage: a row must fit its ROW_SHIFT spacing and the address width");
        $finish;
    end
end

// The channel of a global row and its byte address (first beat) on that channel.
/* verilator lint_off UNUSEDSIGNAL */ // (the channel is the row's low bits)
function [CH_BITS-1:0] row_channel(input [ROW_BITS-1:0] r);
    row_channel = CHANNELS > 1 ? r[CH_BITS-1:0] : {CH_BITS{1'b0}};
endfunction
/* verilator lint_on UNUSEDSIGNAL */

// The beat of a row holding byte b (rows need not be a power of two of beats wide).
/* verilator lint_off UNUSEDSIGNAL */ // (the quotient is below BEATS)
function [BEAT_BITS-1:0] beat_of(input [31:0] b);
    reg [31:0] q;
    begin
        q = b / DB;
        beat_of = q[BEAT_BITS-1:0];
    end
endfunction
/* verilator lint_on UNUSEDSIGNAL */

function [ADDR_W-1:0] row_addr(input [ROW_BITS-1:0] r);
    reg [ADDR_W-1:0] local_row;
    reg [ADDR_W-1:0] c;
    begin
        local_row = {{(ADDR_W-LROW_BITS){1'b0}}, r[ROW_BITS-1 -: LROW_BITS]};
        c = {{(ADDR_W-CH_BITS){1'b0}}, row_channel(r)};
        row_addr = CH_BASE + c * CH_STRIDE + (local_row << ROW_SHIFT);
    end
endfunction

// ---- the slots --------------------------------------------------------------------------

reg  [SB:0]          tail_reg = {(SB+1){1'b0}};
reg  [SB:0]          head_reg = {(SB+1){1'b0}};
reg  [SLOTS-1:0]     pend_reg = {SLOTS{1'b0}};
reg  [STATE_W-1:0]   state_mem [0:SLOTS-1];
reg  [ROW_BITS-1:0]  row_mem [0:SLOTS-1];
reg  [SLOTS-1:0]     read_reg = {SLOTS{1'b0}};
// Rows of even slots and of odd slots in two memories, so two rows can be drained in one
// clock (below).
reg  [ROW_W-1:0]     data_even_mem [0:SLOTS/2-1];
reg  [ROW_W-1:0]     data_odd_mem [0:SLOTS/2-1];

wire [SB-1:0] tail = tail_reg[SB-1:0];
wire [SB-1:0] head = head_reg[SB-1:0];
wire          occupied = tail_reg != head_reg;
wire          retire = occupied && !pend_reg[head] && m_allow;

// The drains of completed reads into their slots (below): one into an even slot, one into an
// odd slot, in the same clock.
wire             drain_e_pipe;
wire [SB-1:0]    drain_e_tag;
wire [ROW_W-1:0] drain_e_data;
wire             drain_o_pipe;
wire [SB-1:0]    drain_o_tag;
wire [ROW_W-1:0] drain_o_data;

always @(posedge clk) begin
    if (s_valid) begin
        state_mem[tail] <= s_state;
        row_mem[tail] <= s_row;
        tail_reg <= tail_reg + 1'b1;
    end
    if (drain_e_pipe) begin
        data_even_mem[drain_e_tag[SB-1:1]] <= drain_e_data;
    end
    if (drain_o_pipe) begin
        data_odd_mem[drain_o_tag[SB-1:1]] <= drain_o_data;
    end
    if (retire) begin
        head_reg <= head_reg + 1'b1;
    end
    if (rst) begin
        tail_reg <= {(SB+1){1'b0}};
        head_reg <= {(SB+1){1'b0}};
    end
end

// pend: set when a packet that reads enters, cleared when its row is in. read: whether it
// read.
integer pi;
always @(posedge clk) begin
    for (pi = 0; pi < SLOTS; pi = pi + 1) begin
        if (s_valid && tail == pi[SB-1:0]) begin
            pend_reg[pi] <= s_read;
            read_reg[pi] <= s_read;
        end else if ((drain_e_pipe && drain_e_tag == pi[SB-1:0])
                || (drain_o_pipe && drain_o_tag == pi[SB-1:0])) begin
            pend_reg[pi] <= 1'b0;
        end
    end
    if (rst) begin
        pend_reg <= {SLOTS{1'b0}};
    end
end

assign st_wait = occupied && pend_reg[head];
assign m_leave = retire;

// ---- requests: in entry order, one queue per channel ------------------------------------------
// Each channel issues from its own queue, one read per clock, whatever the other channels do:
// a channel whose AR is refused or whose ids are all out stops only its own reads, and the
// channels together can issue more than a read per clock to catch up.

wire [CHANNELS-1:0]    rq_valid;
wire [CHANNELS-1:0]    rq_take;
wire [SB-1:0]          rq_tag [0:CHANNELS-1];
wire [ROW_BITS-1:0]    rq_row [0:CHANNELS-1];
wire [CH_BITS-1:0]     s_ch = row_channel(s_row);

genvar q;
generate
    for (q = 0; q < CHANNELS; q = q + 1) begin : g_rq
        wire [SB+ROW_BITS-1:0] rq_data;
        /* verilator lint_off PINCONNECTEMPTY */
        nlb_fifo #(
            .WIDTH(SB + ROW_BITS),
            .DEPTH(SLOTS)
        ) req_fifo_inst (
            .clk(clk),
            .rst(rst),
            .s_data({tail, s_row}),
            .s_valid(s_valid && s_read && s_ch == q),
            .s_ready(),
            .m_data(rq_data),
            .m_valid(rq_valid[q]),
            .m_ready(rq_take[q]),
            .count()
        );
        /* verilator lint_on PINCONNECTEMPTY */
        assign rq_tag[q] = rq_data[ROW_BITS +: SB];
        assign rq_row[q] = rq_data[ROW_BITS-1:0];
    end
endgenerate

// Free clock counter for latencies.
reg [15:0] now_reg = 16'd0;
reg [15:0] now_prev_reg = 16'd0;
always @(posedge clk) begin
    now_reg <= now_reg + 16'd1;
    now_prev_reg <= now_reg;
end

// The command engine's read, waiting for its channel's AR register.
reg                side_rd_pend_reg = 1'b0;
reg [ROW_BITS-1:0] side_rd_row_reg = {ROW_BITS{1'b0}};
wire [CH_BITS-1:0] side_ch = row_channel(side_rd_row_reg);

// Per channel: AR register, free ids, id -> slot table, read assembly, completed row.
reg  [CHANNELS-1:0]        ar_valid_reg = {CHANNELS{1'b0}};
reg  [ADDR_W-1:0]          ar_addr_reg [0:CHANNELS-1];
reg  [ID_W-1:0]            ar_id_reg [0:CHANNELS-1];
// Free ids: never used ones counted up by fresh_reg, returned ones in a queue per channel
// (a queue, not a bitmap with a priority encoder: the next id is in a register).
reg  [ID_W-1:0]            fresh_reg [0:CHANNELS-1];
reg  [ID_W-1:0]            ret_mem [0:CHANNELS*IDS-1];
reg  [ID_W:0]              ret_wr_reg [0:CHANNELS-1];
reg  [ID_W:0]              ret_rd_reg [0:CHANNELS-1];
wire [CHANNELS-1:0]        ret_valid;
wire [ID_W-1:0]            ret_id [0:CHANNELS-1];
reg  [SB-1:0]              id_tag_mem [0:CHANNELS*IDS-1];
// Whether an id's read is a bulk read, and its row.
reg                        id_bulk_mem [0:CHANNELS*IDS-1];
reg  [ROW_BITS-1:0]        id_row_mem [0:CHANNELS*IDS-1];
reg  [15:0]                id_t0_mem [0:CHANNELS*IDS-1];
reg  [ROW_W-1:0]           asm_reg [0:CHANNELS-1];
reg  [BEAT_BITS-1:0]       beat_reg [0:CHANNELS-1];
reg  [CHANNELS-1:0]        done_reg = {CHANNELS{1'b0}};
reg  [CHANNELS-1:0]        done_side_reg = {CHANNELS{1'b0}};
reg  [CHANNELS-1:0]        done_bulk_reg = {CHANNELS{1'b0}};
reg  [SB-1:0]              done_tag_reg [0:CHANNELS-1];
reg  [ROW_BITS-1:0]        done_row_reg [0:CHANNELS-1];

integer ci;
initial begin
    for (ci = 0; ci < CHANNELS; ci = ci + 1) begin
        ar_addr_reg[ci] = {ADDR_W{1'b0}};
        ar_id_reg[ci] = {ID_W{1'b0}};
        fresh_reg[ci] = {ID_W{1'b0}};
        ret_wr_reg[ci] = {(ID_W+1){1'b0}};
        ret_rd_reg[ci] = {(ID_W+1){1'b0}};
        asm_reg[ci] = {ROW_W{1'b0}};
        beat_reg[ci] = {BEAT_BITS{1'b0}};
        done_tag_reg[ci] = {SB{1'b0}};
        done_row_reg[ci] = {ROW_BITS{1'b0}};
    end
end

// The bulk read waiting for its channel's AR register and an id; bk_turn_reg: it has waited a
// clock (the channel's packets then let it go first).
reg                bk_pend_reg = 1'b0;
reg                bk_turn_reg = 1'b0;
reg [ROW_BITS-1:0] bk_row_reg = {ROW_BITS{1'b0}};
wire [CH_BITS-1:0] bk_ch = row_channel(bk_row_reg);
wire [CHANNELS-1:0] bk_go;
assign b_rd_ready = !bk_pend_reg;

// The command engine's read goes first on its channel.
wire            side_issue = side_rd_pend_reg
    && (!ar_valid_reg[side_ch] || m_axi_arready[side_ch]);
// Per channel: its queue's head issues when the AR register is free (or being taken) and an
// id is free.
wire [ID_W-1:0] rq_id [0:CHANNELS-1];
wire [CHANNELS-1:0] rq_fresh;
generate
    for (q = 0; q < CHANNELS; q = q + 1) begin : g_issue
        // Ids never used first (SIDE_ID is the command engine's), then returned ones.
        assign rq_fresh[q] = fresh_reg[q] != SIDE_ID;
        assign rq_id[q] = rq_fresh[q] ? fresh_reg[q] : ret_id[q];
        assign bk_go[q] = bk_pend_reg && bk_ch == q && (!ar_valid_reg[q] || m_axi_arready[q])
            && (rq_fresh[q] || ret_valid[q]) && !(side_issue && side_ch == q)
            && (bk_turn_reg || !rq_valid[q]);
        assign rq_take[q] = rq_valid[q] && (!ar_valid_reg[q] || m_axi_arready[q])
            && (rq_fresh[q] || ret_valid[q]) && !(side_issue && side_ch == q) && !bk_go[q];
        // The ids its completed reads returned (never more than IDS - 1 at once: never full).
        assign ret_valid[q] = ret_wr_reg[q] != ret_rd_reg[q];
        assign ret_id[q] = ret_mem[q*IDS + {{(32-ID_W){1'b0}}, ret_rd_reg[q][ID_W-1:0]}];
    end
endgenerate

// A pipeline read, counted as its packet enters (each is issued once, on its channel).
assign st_read = s_valid && s_read;

// Completed rows wait in done_reg. Two are drained per clock: one bound for an even slot (or
// the command engine's row, or a bulk row) and one bound for an odd slot, each round robin over the channels.
// A packet per clock needs a row per clock on average; with room for two, the rows that a
// latency spread bunches together are caught up with.
//
// Each drain's arbiter is one-hot and flat (a chain of comparisons over 16 channels was the
// stage's deepest path): the requests above the last winner (above_*_reg) go first, the
// lowest of them; without any, the lowest request. A drained row goes into the drain register
// (drain_*_reg) and lands in its slot the next clock.
wire [CHANNELS-1:0] req_e;
wire [CHANNELS-1:0] req_o;
reg  [CHANNELS-1:0] above_e_reg = {CHANNELS{1'b0}};
reg  [CHANNELS-1:0] above_o_reg = {CHANNELS{1'b0}};
genvar rc;
generate
    for (rc = 0; rc < CHANNELS; rc = rc + 1) begin : g_req
        assign req_e[rc] = done_reg[rc]
            && (done_side_reg[rc] || done_bulk_reg[rc] || !done_tag_reg[rc][0]);
        assign req_o[rc] = done_reg[rc] && !done_side_reg[rc] && !done_bulk_reg[rc]
            && done_tag_reg[rc][0];
    end
endgenerate

localparam [CHANNELS-1:0] CH_ONE = 1;

// The lowest set bit of x, one-hot; each bit from one reduction of the bits below it.
function automatic [CHANNELS-1:0] lowest_one(input [CHANNELS-1:0] x);
    integer i;
    begin
        lowest_one = {CHANNELS{1'b0}};
        for (i = 0; i < CHANNELS; i = i + 1) begin
            lowest_one[i] = x[i] && !(|(x & ((CH_ONE << i) - CH_ONE)));
        end
    end
endfunction

// Channels above the one-hot winner g (the next round starts above it).
function automatic [CHANNELS-1:0] above_of(input [CHANNELS-1:0] g);
    integer i;
    begin
        above_of = {CHANNELS{1'b0}};
        for (i = 1; i < CHANNELS; i = i + 1) begin
            above_of[i] = |(g & ((CH_ONE << i) - CH_ONE));
        end
    end
endfunction

// The index of a one-hot vector (0 when empty).
function automatic [CH_BITS-1:0] index_of(input [CHANNELS-1:0] g);
    integer i;
    integer k;
    reg [CHANNELS-1:0] m;
    begin
        index_of = {CH_BITS{1'b0}};
        for (k = 0; k < CH_BITS; k = k + 1) begin
            for (i = 0; i < CHANNELS; i = i + 1) begin
                m[i] = ((i >> k) & 1) == 1;
            end
            index_of[k] = |(g & m);
        end
    end
endfunction

wire [CHANNELS-1:0] hi_e = req_e & above_e_reg;
wire [CHANNELS-1:0] hi_o = req_o & above_o_reg;
wire [CHANNELS-1:0] grant_e = lowest_one(|hi_e ? hi_e : req_e);
wire [CHANNELS-1:0] grant_o = lowest_one(|hi_o ? hi_o : req_o);
wire                drain_e_any = |req_e;
wire                drain_o_any = |req_o;
wire [CH_BITS-1:0]  drain_e_ch = index_of(grant_e);
wire [CH_BITS-1:0]  drain_o_ch = index_of(grant_o);

// Channels drained this clock (at most two, never the same one twice: an even and an odd row).
wire [CHANNELS-1:0] drained = grant_e | grant_o;

// The drain registers: a drained row on its way into its slot.
reg              drain_e_pipe_reg = 1'b0;
reg [SB-1:0]     drain_e_tag_reg = {SB{1'b0}};
reg [ROW_W-1:0]  drain_e_data_reg = {ROW_W{1'b0}};
reg              drain_o_pipe_reg = 1'b0;
reg [SB-1:0]     drain_o_tag_reg = {SB{1'b0}};
reg [ROW_W-1:0]  drain_o_data_reg = {ROW_W{1'b0}};
// A bulk row drained: out on b_rs_* with the even drain's data register.
reg                b_rs_valid_reg = 1'b0;
reg [ROW_BITS-1:0] b_rs_row_reg = {ROW_BITS{1'b0}};
always @(posedge clk) begin
    drain_e_pipe_reg <= drain_e_any && !done_side_reg[drain_e_ch] && !done_bulk_reg[drain_e_ch];
    b_rs_valid_reg <= drain_e_any && done_bulk_reg[drain_e_ch];
    b_rs_row_reg <= done_row_reg[drain_e_ch];
    drain_e_tag_reg <= done_tag_reg[drain_e_ch];
    drain_e_data_reg <= asm_reg[drain_e_ch];
    drain_o_pipe_reg <= drain_o_any;
    drain_o_tag_reg <= done_tag_reg[drain_o_ch];
    drain_o_data_reg <= asm_reg[drain_o_ch];
    if (drain_e_any) begin
        above_e_reg <= above_of(grant_e);
    end
    if (drain_o_any) begin
        above_o_reg <= above_of(grant_o);
    end
    if (rst) begin
        drain_e_pipe_reg <= 1'b0;
        drain_o_pipe_reg <= 1'b0;
        b_rs_valid_reg <= 1'b0;
        above_e_reg <= {CHANNELS{1'b0}};
        above_o_reg <= {CHANNELS{1'b0}};
    end
end

assign drain_e_pipe = drain_e_pipe_reg;
assign drain_e_tag = drain_e_tag_reg;
assign drain_e_data = drain_e_data_reg;
assign drain_o_pipe = drain_o_pipe_reg;
assign drain_o_tag = drain_o_tag_reg;
assign drain_o_data = drain_o_data_reg;
assign b_rs_valid = b_rs_valid_reg;
assign b_rs_row = b_rs_row_reg;
assign b_rs_data = drain_e_data_reg;

reg              c_rd_ack_reg = 1'b0;
reg [ROW_W-1:0]  c_rd_data_reg = {ROW_W{1'b0}};
// A read's latency: its issue time caught with its last beat, subtracted a clock later.
reg              lat_t0_valid_reg = 1'b0;
reg [15:0]       lat_t0_reg = 16'd0;
reg              lat_valid_reg = 1'b0;
reg [15:0]       lat_reg = 16'd0;

integer c;
integer bt;
always @(posedge clk) begin
    c_rd_ack_reg <= 1'b0;
    lat_t0_valid_reg <= 1'b0;
    lat_valid_reg <= lat_t0_valid_reg;
    lat_reg <= now_prev_reg - lat_t0_reg;
    if (c_rd_req) begin
        side_rd_pend_reg <= 1'b1;
        side_rd_row_reg <= c_rd_row;
    end
    if (side_issue) begin
        side_rd_pend_reg <= 1'b0;
    end
    if (b_rd_valid && !bk_pend_reg) begin
        bk_pend_reg <= 1'b1;
        bk_row_reg <= b_rd_row;
    end
    if (|bk_go) begin
        bk_pend_reg <= 1'b0;
    end
    bk_turn_reg <= bk_pend_reg && !(|bk_go);
    for (c = 0; c < CHANNELS; c = c + 1) begin
        // AR register: taken, then refilled by the command engine's read or a request.
        if (m_axi_arready[c]) begin
            ar_valid_reg[c] <= 1'b0;
        end
        if (side_issue && side_ch == c[CH_BITS-1:0]) begin
            ar_valid_reg[c] <= 1'b1;
            ar_addr_reg[c] <= row_addr(side_rd_row_reg);
            ar_id_reg[c] <= SIDE_ID;
        end else if (rq_take[c] || bk_go[c]) begin
            // A packet's read or the bulk read (ids from one pool).
            ar_valid_reg[c] <= 1'b1;
            ar_addr_reg[c] <= row_addr(bk_go[c] ? bk_row_reg : rq_row[c]);
            ar_id_reg[c] <= rq_id[c];
            if (rq_fresh[c]) begin
                fresh_reg[c] <= fresh_reg[c] + 1'b1;
            end else begin
                ret_rd_reg[c] <= ret_rd_reg[c] + 1'b1;
            end
            id_tag_mem[c*IDS + {{(32-ID_W){1'b0}}, rq_id[c]}] <= rq_tag[c];
            id_bulk_mem[c*IDS + {{(32-ID_W){1'b0}}, rq_id[c]}] <= bk_go[c];
            id_row_mem[c*IDS + {{(32-ID_W){1'b0}}, rq_id[c]}] <= bk_row_reg;
            id_t0_mem[c*IDS + {{(32-ID_W){1'b0}}, rq_id[c]}] <= now_reg;
        end
        // A completed row drained this clock frees its channel. Before the read data below:
        // the channel takes beats in its drain clock, and a one-beat burst completes its row
        // in that same clock (its done must win over the drain's clear).
        if (drained[c]) begin
            done_reg[c] <= 1'b0;
        end
        // Read data: beats into the assembly register; the last completes the row. The drain
        // reads the assembly register this clock, before these beats land in it.
        if (m_axi_rvalid[c] && m_axi_rready[c]) begin
            // One compare per beat (a computed part-select index builds an adder).
            for (bt = 0; bt < BEATS; bt = bt + 1) begin
                if (beat_reg[c] == bt[BEAT_BITS-1:0]) begin
                    asm_reg[c][bt*DATA_W +: DATA_W] <= m_axi_rdata[c*DATA_W +: DATA_W];
                end
            end
            beat_reg[c] <= beat_reg[c] + 1'b1;
            if (m_axi_rlast[c]) begin
                beat_reg[c] <= {BEAT_BITS{1'b0}};
                done_reg[c] <= 1'b1;
                done_side_reg[c] <= m_axi_rid[c*ID_W +: ID_W] == SIDE_ID;
                done_bulk_reg[c] <= m_axi_rid[c*ID_W +: ID_W] != SIDE_ID
                    && id_bulk_mem[c*IDS + {{(32-ID_W){1'b0}}, m_axi_rid[c*ID_W +: ID_W]}];
                done_tag_reg[c] <= id_tag_mem[c*IDS + {{(32-ID_W){1'b0}},
                    m_axi_rid[c*ID_W +: ID_W]}];
                done_row_reg[c] <= id_row_mem[c*IDS + {{(32-ID_W){1'b0}},
                    m_axi_rid[c*ID_W +: ID_W]}];
                if (m_axi_rid[c*ID_W +: ID_W] != SIDE_ID) begin
                    ret_mem[c*IDS + {{(32-ID_W){1'b0}}, ret_wr_reg[c][ID_W-1:0]}] <=
                        m_axi_rid[c*ID_W +: ID_W];
                    ret_wr_reg[c] <= ret_wr_reg[c] + 1'b1;
                    // (Packets' reads only: a bulk read is no lookup's latency.)
                    lat_t0_valid_reg <= !id_bulk_mem[c*IDS + {{(32-ID_W){1'b0}},
                        m_axi_rid[c*ID_W +: ID_W]}];
                    lat_t0_reg <= id_t0_mem[c*IDS + {{(32-ID_W){1'b0}},
                        m_axi_rid[c*ID_W +: ID_W]}];
                end
            end
        end
    end
    if (drain_e_any && done_side_reg[drain_e_ch]) begin
        c_rd_ack_reg <= 1'b1;
        c_rd_data_reg <= asm_reg[drain_e_ch];
    end
    if (rst) begin
        side_rd_pend_reg <= 1'b0;
        bk_pend_reg <= 1'b0;
        bk_turn_reg <= 1'b0;
        ar_valid_reg <= {CHANNELS{1'b0}};
        done_reg <= {CHANNELS{1'b0}};
        for (c = 0; c < CHANNELS; c = c + 1) begin
            fresh_reg[c] <= {ID_W{1'b0}};
            ret_wr_reg[c] <= {(ID_W+1){1'b0}};
            ret_rd_reg[c] <= {(ID_W+1){1'b0}};
            beat_reg[c] <= {BEAT_BITS{1'b0}};
        end
    end
end

assign c_rd_ack = c_rd_ack_reg;
assign c_rd_data = c_rd_data_reg;
assign st_lat_valid = lat_valid_reg;
assign st_lat = lat_reg;

genvar g;
generate
    for (g = 0; g < CHANNELS; g = g + 1) begin : g_ch
        assign m_axi_araddr[g*ADDR_W +: ADDR_W] = ar_addr_reg[g];
        assign m_axi_arid[g*ID_W +: ID_W] = ar_id_reg[g];
        assign m_axi_arlen[g*8 +: 8] = ARLEN;
        assign m_axi_arvalid[g] = ar_valid_reg[g];
        // A completed row blocks its channel's read data until it is drained; the next burst's
        // beats come in from the drain clock on, so a channel completes one row per clock.
        assign m_axi_rready[g] = !done_reg[g] || drained[g];
    end
endgenerate

// ---- writes and the write record ---------------------------------------------------------

// The write's beats: the entry placed in its lane of a row, strobes over the lane's bytes.
localparam [2:0] W_IDLE = 3'd0;
localparam [2:0] W_WAIT = 3'd1;   // for the record
localparam [2:0] W_SEND = 3'd2;   // AW and W out
localparam [2:0] W_RESP = 3'd3;   // waiting for B

reg  [2:0]             w_state_reg = W_IDLE;
reg  [ROW_BITS-1:0]    w_row_reg = {ROW_BITS{1'b0}};
reg  [LANE_BITS_P-1:0] w_lane_reg = {LANE_BITS_P{1'b0}};
reg  [ENTRY_W-1:0]     w_entry_reg = {ENTRY_W{1'b0}};
reg                    w_full_reg = 1'b0;
reg  [ROW_W-1:0]       w_rdata_reg = {ROW_W{1'b0}};
reg                    aw_valid_reg = 1'b0;
reg                    w_valid_reg = 1'b0;
reg  [BEAT_BITS-1:0]   w_beat_reg = {BEAT_BITS{1'b0}};
reg                    c_wr_ack_reg = 1'b0;

// The record, and the packets that must leave before it is free.
reg                    rec_valid_reg = 1'b0;
reg                    rec_busy_reg = 1'b0;
reg                    rec_counting_reg = 1'b0;
// The tail when the write completed: every packet before it has left once the head is there
// (an equality of registers, no count to subtract from).
reg  [SB:0]            rec_tail_reg = {(SB+1){1'b0}};
// The head has reached it (later packets may move the head on during the margin).
reg                    rec_reached_reg = 1'b0;
reg  [1:0]             rec_margin_reg = 2'd0;
reg  [ROW_BITS-1:0]    rec_row_reg = {ROW_BITS{1'b0}};
reg  [LANE_BITS_P-1:0] rec_lane_reg = {LANE_BITS_P{1'b0}};
reg  [ENTRY_W-1:0]     rec_entry_reg = {ENTRY_W{1'b0}};
reg                    rec_full_reg = 1'b0;
reg  [ROW_W-1:0]       rec_rdata_reg = {ROW_W{1'b0}};

localparam LANE_BYTES = LANE_W / 8;

// The direct writer's registers (DIRECT_WR): its write is on the port (d_on); the writes past
// their beats and waiting for their responses, oldest first (their channels, a FIFO of D_OUT).
localparam D_OUT = 8;
localparam DOB = $clog2(D_OUT);
reg                    d_on_reg = 1'b0;
reg  [CH_BITS-1:0]     d_ch_mem [0:D_OUT-1];
reg  [DOB:0]           d_sent_reg = {(DOB+1){1'b0}};
reg  [DOB:0]           d_done_reg = {(DOB+1){1'b0}};
wire                   d_out = d_sent_reg != d_done_reg;
wire                   d_out_full = d_sent_reg - d_done_reg == D_OUT[DOB:0];
wire [CH_BITS-1:0]     d_head_ch = d_ch_mem[d_done_reg[DOB-1:0]];
reg                    l_wr_ack_reg = 1'b0;
reg  [ROW_BITS-1:0]    d_row_reg = {ROW_BITS{1'b0}};
reg  [LANE_BITS_P-1:0] d_lane_reg = {LANE_BITS_P{1'b0}};
reg  [ENTRY_W-1:0]     d_entry_reg = {ENTRY_W{1'b0}};

// The write on the port: the direct writer's while it is on, else the command engine's.
wire [ROW_BITS-1:0]    p_row = d_on_reg ? d_row_reg : w_row_reg;
wire [LANE_BITS_P-1:0] p_lane = d_on_reg ? d_lane_reg : w_lane_reg;
wire [ENTRY_W-1:0]     p_entry = d_on_reg ? d_entry_reg : w_entry_reg;

// The entry in its lane of the row, its byte strobes, and the beats the lane spans: one
// compare per lane against constants (a shift by a computed amount builds a barrel shifter).
reg  [ROW_W-1:0]     w_row_data;
reg  [ROW_W/8-1:0]   w_row_strb;
reg  [BEAT_BITS-1:0] w_first_beat;
reg  [BEAT_BITS-1:0] w_last_beat;
reg  [BEAT_BITS-1:0] l_first_beat;
integer              wl;
always @* begin
    w_row_data = {ROW_W{1'b0}};
    w_row_strb = {(ROW_W/8){1'b0}};
    w_first_beat = {BEAT_BITS{1'b0}};
    w_last_beat = {BEAT_BITS{1'b0}};
    l_first_beat = {BEAT_BITS{1'b0}};
    for (wl = 0; wl < LANES; wl = wl + 1) begin
        if (p_lane == wl[LANE_BITS_P-1:0]) begin
            w_row_data[wl*LANE_W +: ENTRY_W] = p_entry;
            w_row_strb[wl*LANE_BYTES +: LANE_BYTES] = {LANE_BYTES{1'b1}};
            w_first_beat = beat_of(wl * LANE_BYTES);
            w_last_beat = beat_of(wl * LANE_BYTES + LANE_BYTES - 1);
        end
        if (l_wr_lane == wl[LANE_BITS_P-1:0]) begin
            l_first_beat = beat_of(wl * LANE_BYTES);
        end
    end
    // A whole-row command write: every beat, every byte.
    if (FULL_WR != 0 && w_full_reg && !d_on_reg) begin
        w_row_data = w_rdata_reg;
        w_row_strb = {(ROW_W/8){1'b1}};
        w_first_beat = {BEAT_BITS{1'b0}};
        w_last_beat = beat_of(ROW_W / 8 - 1);
    end
end
wire [CH_BITS-1:0] w_ch = row_channel(p_row);
wire               w_beat_take = w_valid_reg && m_axi_wready[w_ch];
wire               w_is_last = w_beat_reg == w_last_beat;
wire               b_take = m_axi_bvalid[w_ch] && w_state_reg == W_RESP;
wire               d_b_take = m_axi_bvalid[d_head_ch] && d_out;
// A command write takes the record; a direct write starts (never both in a clock, never one
// while the other is on the port).
wire               c_take = w_state_reg == W_WAIT && !rec_busy_reg
    && (DIRECT_WR == 0 || (!c_wr_hold && !d_on_reg && !d_out));
wire               d_start = DIRECT_WR != 0 && l_wr_req && !d_on_reg && !d_out_full
    && (w_state_reg == W_IDLE || (w_state_reg == W_WAIT && !c_take));
// AW and W of the write on the port are done this clock.
wire               p_sent = (!aw_valid_reg || m_axi_awready[w_ch]) && (!w_valid_reg
    || (w_beat_take && w_is_last));

always @(posedge clk) begin
    c_wr_ack_reg <= 1'b0;
    l_wr_ack_reg <= 1'b0;
    case (w_state_reg)
        W_IDLE: begin
            if (c_wr_req) begin
                w_row_reg <= c_wr_row;
                w_lane_reg <= c_wr_lane;
                w_entry_reg <= c_wr_entry;
                w_full_reg <= FULL_WR != 0 && c_wr_full;
                w_rdata_reg <= c_wr_row_data;
                w_state_reg <= W_WAIT;
            end
        end
        W_WAIT: begin
            if (c_take) begin
                rec_valid_reg <= 1'b1;
                rec_busy_reg <= 1'b1;
                rec_row_reg <= w_row_reg;
                rec_lane_reg <= w_lane_reg;
                rec_entry_reg <= w_entry_reg;
                rec_full_reg <= w_full_reg;
                rec_rdata_reg <= w_rdata_reg;
                aw_valid_reg <= 1'b1;
                w_valid_reg <= 1'b1;
                w_beat_reg <= w_first_beat;
                w_state_reg <= W_SEND;
            end
        end
        W_SEND: begin
            if (p_sent) begin
                w_state_reg <= W_RESP;
            end
        end
        default: begin
            if (b_take) begin
                c_wr_ack_reg <= 1'b1;
                w_state_reg <= W_IDLE;
                // Every packet in the stage now must leave before the record is free.
                rec_counting_reg <= 1'b1;
                rec_tail_reg <= tail_reg;
                rec_reached_reg <= 1'b0;
                rec_margin_reg <= 2'd2;
            end
        end
    endcase
    // The write on the port (either writer's): its address, then its beats.
    if (w_state_reg == W_SEND || d_on_reg) begin
        if (aw_valid_reg && m_axi_awready[w_ch]) begin
            aw_valid_reg <= 1'b0;
        end
        if (w_beat_take) begin
            w_beat_reg <= w_beat_reg + 1'b1;
            if (w_is_last) begin
                w_valid_reg <= 1'b0;
            end
        end
    end
    // The direct writer: its write on the port while the command engine's is not.
    if (d_start) begin
        d_on_reg <= 1'b1;
        d_row_reg <= l_wr_row;
        d_lane_reg <= l_wr_lane;
        d_entry_reg <= l_wr_entry;
        aw_valid_reg <= 1'b1;
        w_valid_reg <= 1'b1;
        w_beat_reg <= l_first_beat;
    end
    if (d_on_reg && p_sent) begin
        d_on_reg <= 1'b0;
        d_ch_mem[d_sent_reg[DOB-1:0]] <= w_ch;
        d_sent_reg <= d_sent_reg + 1'b1;
    end
    if (d_b_take) begin
        d_done_reg <= d_done_reg + 1'b1;
        l_wr_ack_reg <= 1'b1;
    end
    // Once every packet that entered before the write has left: the margin, then free.
    if (rec_counting_reg && (rec_reached_reg || head_reg == rec_tail_reg)) begin
        rec_reached_reg <= 1'b1;
        if (rec_margin_reg != 2'd0) begin
            rec_margin_reg <= rec_margin_reg - 2'd1;
        end else begin
            rec_counting_reg <= 1'b0;
            rec_busy_reg <= 1'b0;
        end
    end
    if (rst) begin
        w_state_reg <= W_IDLE;
        aw_valid_reg <= 1'b0;
        w_valid_reg <= 1'b0;
        rec_valid_reg <= 1'b0;
        rec_busy_reg <= 1'b0;
        rec_counting_reg <= 1'b0;
        d_on_reg <= 1'b0;
        d_sent_reg <= {(DOB+1){1'b0}};
        d_done_reg <= {(DOB+1){1'b0}};
        l_wr_ack_reg <= 1'b0;
    end
end

assign c_wr_ack = c_wr_ack_reg;
assign c_wr_take = c_take;
assign l_wr_ack = l_wr_ack_reg;
assign l_wr_take = d_start;

// The beat being written: one compare per beat.
reg [DATA_W-1:0] w_beat_data;
reg [DB-1:0]     w_beat_strb;
integer          wb;
always @* begin
    w_beat_data = {DATA_W{1'b0}};
    w_beat_strb = {DB{1'b0}};
    for (wb = 0; wb < BEATS; wb = wb + 1) begin
        if (w_beat_reg == wb[BEAT_BITS-1:0]) begin
            w_beat_data = w_row_data[wb*DATA_W +: DATA_W];
            w_beat_strb = w_row_strb[wb*DB +: DB];
        end
    end
end

generate
    for (g = 0; g < CHANNELS; g = g + 1) begin : g_wch
        wire mine = w_ch == g;
        assign m_axi_awaddr[g*ADDR_W +: ADDR_W] = row_addr(p_row)
            + {{(ADDR_W-BEAT_BITS){1'b0}}, w_first_beat} * DB;
        assign m_axi_awid[g*ID_W +: ID_W] = {ID_W{1'b0}};
        assign m_axi_awlen[g*8 +: 8] = {{(8-BEAT_BITS){1'b0}}, w_last_beat - w_first_beat};
        assign m_axi_awvalid[g] = aw_valid_reg && mine;
        assign m_axi_wdata[g*DATA_W +: DATA_W] = w_beat_data;
        assign m_axi_wstrb[g*DB +: DB] = w_beat_strb;
        assign m_axi_wlast[g] = w_is_last;
        assign m_axi_wvalid[g] = w_valid_reg && mine;
        assign m_axi_bready[g] = (w_state_reg == W_RESP && mine) || (d_out && d_head_ch == g);
    end
endgenerate

// ---- leaving: RAM read, merge, output ------------------------------------------------------

reg                 r1_valid_reg = 1'b0;
reg [STATE_W-1:0]   r1_state_reg = {STATE_W{1'b0}};
reg [ROW_BITS-1:0]  r1_row_reg = {ROW_BITS{1'b0}};
reg                 r1_read_reg = 1'b0;
reg [ROW_W-1:0]     r1_data_reg = {ROW_W{1'b0}};
reg                 r2_valid_reg = 1'b0;
reg [STATE_W-1:0]   r2_state_reg = {STATE_W{1'b0}};
reg                 r2_read_reg = 1'b0;
reg [ROW_W-1:0]     r2_data_reg = {ROW_W{1'b0}};

// The record's entry in place of the row's (the lane's bits past ENTRY_W are left alone).
reg [ROW_W-1:0] merged;
integer         ml;
always @* begin
    merged = r1_data_reg;
    if (rec_valid_reg && r1_row_reg == rec_row_reg) begin
        for (ml = 0; ml < LANES; ml = ml + 1) begin
            if (rec_lane_reg == ml[LANE_BITS_P-1:0]) begin
                merged[ml*LANE_W +: ENTRY_W] = rec_entry_reg;
            end
        end
        if (FULL_WR != 0 && rec_full_reg) begin
            merged = rec_rdata_reg;
        end
    end
end

always @(posedge clk) begin
    r1_valid_reg <= retire;
    if (retire) begin
        r1_state_reg <= state_mem[head];
        r1_row_reg <= row_mem[head];
        r1_read_reg <= read_reg[head];
        r1_data_reg <= head[0] ? data_odd_mem[head[SB-1:1]] : data_even_mem[head[SB-1:1]];
    end
    r2_valid_reg <= r1_valid_reg;
    if (r1_valid_reg) begin
        r2_state_reg <= r1_state_reg;
        r2_read_reg <= r1_read_reg;
        r2_data_reg <= merged;
    end
    if (rst) begin
        r1_valid_reg <= 1'b0;
        r2_valid_reg <= 1'b0;
    end
end

assign m_valid = r2_valid_reg;
assign m_state = r2_state_reg;
assign m_read = r2_read_reg;
assign m_data = r2_data_reg;

`ifdef FORMAL
// Formal properties: packets out in the order they came in (hw/scripts/formal.sh).
`include "nlb_mem_stage_props.vh"
`endif

endmodule

`resetall
