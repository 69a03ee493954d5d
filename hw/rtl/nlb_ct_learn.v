`resetall
`timescale 1ns / 1ps
`default_nettype none

// Hardware learning's install records (docs/pipeline.md section 15.3): the connections the
// lookup installs itself, from the clock it decides each install (stage O) until no packet can
// still carry a read of the connection table from before the install reached memory.
//
// An install takes a record (a_*: row, way and the whole entry). Records go to the memory in the
// order they were taken through the connection-table stage's direct write port (w_*: w_take
// as the port takes one, w_ack as each one's write response is back, in the same order; the
// port takes the next before the last is answered). Until then, and afterwards until every packet
// that entered that stage before the write response has passed the merge (the counts e_cnt of
// packets entered, x_cnt of packets merged), a record is merged into the bucket of every packet
// of its row (q_*: the ways holding a record, and the low MERGE_W bits of each, the part of an
// entry the lookup compares and uses). A newer record of the same row and way takes the older
// one's place in the merge, as does a command write to that entry once the stage merges it
// (h_take: the command took the stage's record; a clock later the stage merges it into the
// packets then at this merge, which see the command's entry from then on).
//
// The lookup installs only while a record is free (`used` below RECS); an install decided
// while none is, it leaves to the host (docs/pipeline.md section 15.3). h_pending says a record of row
// h_row has not reached memory yet: a command write to that row waits for it, so the memory
// ends with the newer of the two.
module nlb_ct_learn #(
    parameter ROW_BITS = 10,
    parameter WAY_BITS = 2,
    parameter WAYS = 4,
    parameter ENTRY_W = 365,
    // Bits of an entry merged into the packets' buckets (its low bits: valid .. backend).
    parameter MERGE_W = 313,
    // Records (a power of two).
    parameter RECS = 64,
    // Width of the packet counts.
    parameter CNT_W = 16
) (
    input  wire                     clk,
    input  wire                     rst,

    // An install (stage O).
    input  wire                     a_valid,
    input  wire [ROW_BITS-1:0]      a_row,
    input  wire [WAY_BITS-1:0]      a_way,
    input  wire [ENTRY_W-1:0]       a_entry,

    // The connection-table stage's direct write port.
    output wire                     w_req,
    output wire [ROW_BITS-1:0]      w_row,
    output wire [WAY_BITS-1:0]      w_lane,
    output wire [ENTRY_W-1:0]       w_entry,
    input  wire                     w_take,
    input  wire                     w_ack,

    // Packets that entered the connection-table stage, and that passed the merge.
    input  wire [CNT_W-1:0]         e_cnt,
    input  wire [CNT_W-1:0]         x_cnt,

    // The merge: the bucket of row q_row.
    input  wire [ROW_BITS-1:0]      q_row,
    output wire [WAYS-1:0]          q_hit,
    output wire [WAYS*MERGE_W-1:0]  q_entry,

    // Command writes.
    input  wire [ROW_BITS-1:0]      h_row,
    input  wire [WAY_BITS-1:0]      h_way,
    input  wire                     h_take,
    output wire                     h_pending,

    output wire [$clog2(RECS):0]    used
);

localparam RB = $clog2(RECS);

initial begin
    if ((1 << RB) != RECS || RECS < 2 || MERGE_W > ENTRY_W || (1 << WAY_BITS) != WAYS) begin
        $error("nlb_ct_learn: RECS a power of two >= 2, MERGE_W <= ENTRY_W, WAYS = 2^WAY_BITS");
        $finish;
    end
end

// Records in the order taken: [free, write) in memory and waiting for the packets that read
// before, [write, sent) on their way to memory, [sent, take) not sent yet.
reg  [RB:0]          take_reg = {(RB+1){1'b0}};
reg  [RB:0]          sent_reg = {(RB+1){1'b0}};
reg  [RB:0]          write_reg = {(RB+1){1'b0}};
reg  [RB:0]          free_reg = {(RB+1){1'b0}};
reg  [RECS-1:0]      live_reg = {RECS{1'b0}};
reg  [RECS-1:0]      landed_reg = {RECS{1'b0}};
// The record is the newest for its row and way (it is merged).
reg  [RECS-1:0]      apply_reg = {RECS{1'b0}};
reg  [ROW_BITS-1:0]  row_mem [0:RECS-1];
reg  [WAY_BITS-1:0]  way_mem [0:RECS-1];
reg  [ENTRY_W-1:0]   entry_mem [0:RECS-1];
// e_cnt when the write response came back.
reg  [CNT_W-1:0]     tail_mem [0:RECS-1];
reg                  h_take_d_reg = 1'b0;
reg  [ROW_BITS-1:0]  h_row_d_reg = {ROW_BITS{1'b0}};
reg  [WAY_BITS-1:0]  h_way_d_reg = {WAY_BITS{1'b0}};

wire [RB-1:0] take_i = take_reg[RB-1:0];
wire [RB-1:0] write_i = write_reg[RB-1:0];
wire [RB-1:0] sent_i = sent_reg[RB-1:0];
wire [RB-1:0] free_i = free_reg[RB-1:0];
// Records in use, counted (a register: `full` gates every record's enables).
reg  [RB:0]   used_reg = {(RB+1){1'b0}};
wire          full = used_reg[RB];
wire          unsent = sent_reg != take_reg;
// The oldest record in memory is free once x_cnt has reached its tail (counts modulo 2^CNT_W;
// the packets in flight are far fewer than 2^(CNT_W-1)). Found a clock ahead (the tail's read
// and the subtract), so a record is freed at most every other clock: the clock after a
// release looks at a record that may have moved on.
wire [CNT_W-1:0] to_tail = x_cnt - tail_mem[free_i];
reg           release_reg = 1'b0;
wire          release_oldest = release_reg;

integer i;
always @(posedge clk) begin
    h_take_d_reg <= h_take;
    h_row_d_reg <= h_row;
    h_way_d_reg <= h_way;
    // Per record, one compare of its number with each pointer (a bit written at a computed
    // index builds a shifter).
    for (i = 0; i < RECS; i = i + 1) begin
        // A newer record of the row and way, or a command's entry merged from now on, takes
        // the record's place in the merge.
        if ((a_valid && !full && row_mem[i] == a_row && way_mem[i] == a_way)
                || (h_take_d_reg && row_mem[i] == h_row_d_reg && way_mem[i] == h_way_d_reg)) begin
            apply_reg[i] <= 1'b0;
        end
        if (w_ack && write_i == i[RB-1:0]) begin
            landed_reg[i] <= 1'b1;
        end
        if (release_oldest && free_i == i[RB-1:0]) begin
            live_reg[i] <= 1'b0;
            apply_reg[i] <= 1'b0;
        end
        if (a_valid && !full && take_i == i[RB-1:0]) begin
            row_mem[i] <= a_row;
            way_mem[i] <= a_way;
            live_reg[i] <= 1'b1;
            landed_reg[i] <= 1'b0;
            apply_reg[i] <= 1'b1;
        end
    end
    if (a_valid && !full) begin
        entry_mem[take_i] <= a_entry;
        take_reg <= take_reg + 1'b1;
    end
    if (w_take) begin
        sent_reg <= sent_reg + 1'b1;
    end
    if (w_ack) begin
        tail_mem[write_i] <= e_cnt;
        write_reg <= write_reg + 1'b1;
    end
    release_reg <= !release_reg && free_reg != write_reg && !to_tail[CNT_W-1];
    used_reg <= used_reg + {{RB{1'b0}}, a_valid && !full} - {{RB{1'b0}}, release_oldest};
    if (release_oldest) begin
        free_reg <= free_reg + 1'b1;
    end
    if (rst) begin
        take_reg <= {(RB+1){1'b0}};
        sent_reg <= {(RB+1){1'b0}};
        write_reg <= {(RB+1){1'b0}};
        free_reg <= {(RB+1){1'b0}};
        live_reg <= {RECS{1'b0}};
        landed_reg <= {RECS{1'b0}};
        apply_reg <= {RECS{1'b0}};
        h_take_d_reg <= 1'b0;
        release_reg <= 1'b0;
        used_reg <= {(RB+1){1'b0}};
    end
end

assign w_req = unsent;
assign w_row = row_mem[sent_i];
assign w_lane = way_mem[sent_i];
assign w_entry = entry_mem[sent_i];
assign used = used_reg;

// The merge: at most one applied record per row and way (a newer one clears the older's
// flag). Per way, the matching record's number (one-hot, then encoded), then its entry: the
// entries are a memory read at five places (the ways and the write), distributed RAM, not a
// 64-way OR of every entry.
reg [WAYS-1:0]         hit_c;
reg [RB-1:0]           sel_c [0:WAYS-1];
reg                    pending_c;
integer                r;
integer                w;
always @* begin
    hit_c = {WAYS{1'b0}};
    pending_c = 1'b0;
    for (w = 0; w < WAYS; w = w + 1) begin
        sel_c[w] = {RB{1'b0}};
    end
    for (r = 0; r < RECS; r = r + 1) begin
        for (w = 0; w < WAYS; w = w + 1) begin
            if (apply_reg[r] && row_mem[r] == q_row && way_mem[r] == w[WAY_BITS-1:0]) begin
                hit_c[w] = 1'b1;
                sel_c[w] = sel_c[w] | r[RB-1:0];
            end
        end
        if (live_reg[r] && !landed_reg[r] && row_mem[r] == h_row) begin
            pending_c = 1'b1;
        end
    end
end

reg [WAYS*MERGE_W-1:0] entry_c;
integer                m;
always @* begin
    for (m = 0; m < WAYS; m = m + 1) begin
        entry_c[m*MERGE_W +: MERGE_W] = entry_mem[sel_c[m]][MERGE_W-1:0];
    end
end

assign q_hit = hit_c;
assign q_entry = entry_c;
assign h_pending = pending_c;

endmodule

`resetall
