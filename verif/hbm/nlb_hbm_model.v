`resetall
`timescale 1ns / 1ps
`default_nettype none

// Behavioural model of HBM pseudo-channels behind AXI4 slave ports, for simulation only
// (docs/verification.md "The HBM model"): CHANNELS independent channels, each with its own
// memory, read queue, latency, bandwidth and refresh. Not synthesisable as written (wide
// memories, loops over queues), and not meant to be.
//
// Reads: a channel takes a request (AR) while its queue has a free entry, it is not refreshing
// and a random back-pressure draw allows it. Each request gets a latency: cfg_lat_min plus a
// uniform draw in [0, cfg_lat_spread), plus, with probability cfg_tail_per_mille / 1000, a
// uniform draw in [0, cfg_tail_max) (the tail). A request is answered once its latency has
// passed, the lowest free queue entry first among those due, so requests of different ids on
// one channel come back out of order as their latencies differ, and channels are independent
// (out of order across channels). A burst's beats go out one per clock at most, no two bursts
// interleaved, each beat read from the memory when it is first offered and held until rready;
// a channel sends at most cfg_bw_per_mille / 1000 beats per clock on average (a token bucket
// of two beats), and none while refreshing.
//
// Refresh: every cfg_ref_period clocks a channel stops answering and taking requests for
// cfg_ref_stall clocks; channel c's refresh starts c * cfg_ref_period / CHANNELS clocks after
// channel 0's (the controllers refresh independently).
//
// Writes: one at a time per channel; each W beat is written under its strobes when taken; the
// response (B) follows after a latency drawn like a read's.
//
// Addresses: channel c's beat index is (addr - CH_BASE - c * CH_STRIDE) / (DATA_W / 8), kept
// modulo WORDS. Random draws come from one xorshift32 generator per channel seeded from
// cfg_seed and the channel number (cfg_seed is read while rst is high).
//
// Statistics: reads taken, beats sent (per channel), the sum and maximum of the read latencies
// (request taken to last beat taken, clocks), and a histogram of them in bins of 4 clocks
// (st_hist_sel selects a bin; bin 255 holds everything from 1020 clocks up).
// Simulation only: the model's own state is written with blocking assignments in its one
// always block (read before written where it matters), its outputs with non-blocking ones.
/* verilator lint_off BLKSEQ */
module nlb_hbm_model #(
    parameter CHANNELS = 16,
    parameter DATA_W = 256,
    parameter ADDR_W = 32,
    parameter ID_W = 6,
    // Beats of memory per channel (a power of two).
    parameter WORDS = 2048,
    // Reads a channel holds between taking and answering them.
    parameter QUEUE = 32,
    parameter [ADDR_W-1:0] CH_BASE = {ADDR_W{1'b0}},
    parameter [ADDR_W-1:0] CH_STRIDE = {ADDR_W{1'b0}}
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire [31:0]                  cfg_seed,
    input  wire [15:0]                  cfg_lat_min,
    input  wire [15:0]                  cfg_lat_spread,
    input  wire [9:0]                   cfg_tail_per_mille,
    input  wire [15:0]                  cfg_tail_max,
    input  wire [15:0]                  cfg_ref_period,
    input  wire [15:0]                  cfg_ref_stall,
    input  wire [10:0]                  cfg_bw_per_mille,
    input  wire [9:0]                   cfg_arready_drop_per_mille,

    input  wire [CHANNELS*ADDR_W-1:0]   s_axi_araddr,
    input  wire [CHANNELS*ID_W-1:0]     s_axi_arid,
    input  wire [CHANNELS*8-1:0]        s_axi_arlen,
    input  wire [CHANNELS-1:0]          s_axi_arvalid,
    output reg  [CHANNELS-1:0]          s_axi_arready,
    output reg  [CHANNELS*DATA_W-1:0]   s_axi_rdata,
    output reg  [CHANNELS*ID_W-1:0]     s_axi_rid,
    output reg  [CHANNELS-1:0]          s_axi_rlast,
    output reg  [CHANNELS-1:0]          s_axi_rvalid,
    input  wire [CHANNELS-1:0]          s_axi_rready,
    input  wire [CHANNELS*ADDR_W-1:0]   s_axi_awaddr,
    input  wire [CHANNELS*ID_W-1:0]     s_axi_awid,
    /* verilator lint_off UNUSEDSIGNAL */ // (a write burst ends with wlast)
    input  wire [CHANNELS*8-1:0]        s_axi_awlen,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [CHANNELS-1:0]          s_axi_awvalid,
    output reg  [CHANNELS-1:0]          s_axi_awready,
    input  wire [CHANNELS*DATA_W-1:0]   s_axi_wdata,
    input  wire [CHANNELS*DATA_W/8-1:0] s_axi_wstrb,
    input  wire [CHANNELS-1:0]          s_axi_wlast,
    input  wire [CHANNELS-1:0]          s_axi_wvalid,
    output reg  [CHANNELS-1:0]          s_axi_wready,
    output reg  [CHANNELS*ID_W-1:0]     s_axi_bid,
    output reg  [CHANNELS-1:0]          s_axi_bvalid,
    input  wire [CHANNELS-1:0]          s_axi_bready,

    output reg  [63:0]                  st_reads,
    output reg  [CHANNELS*32-1:0]       st_beats,
    output reg  [63:0]                  st_lat_sum,
    output reg  [31:0]                  st_lat_max,
    input  wire [7:0]                   st_hist_sel,
    output wire [31:0]                  st_hist_count
);

localparam DB = DATA_W / 8;
localparam DB_BITS = $clog2(DB);
localparam WORD_BITS = $clog2(WORDS);

reg [DATA_W-1:0] mem [0:CHANNELS*WORDS-1];

// Per channel and queue entry.
reg              q_valid [0:CHANNELS*QUEUE-1];
reg [ID_W-1:0]   q_id [0:CHANNELS*QUEUE-1];
reg [WORD_BITS-1:0] q_word [0:CHANNELS*QUEUE-1];
reg [7:0]        q_len [0:CHANNELS*QUEUE-1];
reg [31:0]       q_due [0:CHANNELS*QUEUE-1];
reg [31:0]       q_t0 [0:CHANNELS*QUEUE-1];

// Per channel: the burst being sent, generator, tokens, the write in progress.
reg              b_active [0:CHANNELS-1];
reg [31:0]       b_entry [0:CHANNELS-1];
reg [7:0]        b_beat [0:CHANNELS-1];
reg [31:0]       rng [0:CHANNELS-1];
reg [11:0]       tokens [0:CHANNELS-1];
reg              w_active [0:CHANNELS-1];
reg [WORD_BITS-1:0] w_word [0:CHANNELS-1];
reg [ID_W-1:0]   w_id [0:CHANNELS-1];
reg              bw_pending [0:CHANNELS-1];
reg [31:0]       b_due [0:CHANNELS-1];

reg [31:0]       hist [0:255];
reg [31:0]       now;
// The statistics as they add up within a clock (several channels may finish a read in one).
reg [63:0]       a_reads;
reg [63:0]       a_lat_sum;
reg [31:0]       a_lat_max;

assign st_hist_count = hist[st_hist_sel];

function [31:0] xorshift(input [31:0] x);
    reg [31:0] y;
    begin
        y = x ^ (x << 13);
        y = y ^ (y >> 17);
        xorshift = y ^ (y << 5);
    end
endfunction

// A latency drawn from the configured distribution, with the generator state after it.
function [63:0] draw_latency(input [31:0] r0);
    reg [31:0] r1, r2, r3, lat;
    begin
        r1 = xorshift(r0);
        r2 = xorshift(r1);
        r3 = xorshift(r2);
        lat = {16'd0, cfg_lat_min};
        if (cfg_lat_spread != 16'd0) begin
            lat = lat + (r1 % {16'd0, cfg_lat_spread});
        end
        if ((r2 % 32'd1000) < {22'd0, cfg_tail_per_mille} && cfg_tail_max != 16'd0) begin
            lat = lat + (r3 % {16'd0, cfg_tail_max});
        end
        draw_latency = {r3, lat};
    end
endfunction

/* verilator lint_off UNUSEDSIGNAL */ // (the byte in the beat; words past WORDS wrap)
function [WORD_BITS-1:0] word_of(input [ADDR_W-1:0] a, input integer c);
    reg [ADDR_W-1:0] off;
    begin
        off = a - CH_BASE - c[ADDR_W-1:0] * CH_STRIDE;
        word_of = off[DB_BITS +: WORD_BITS];
    end
endfunction
/* verilator lint_on UNUSEDSIGNAL */

function refreshing(input [31:0] t, input integer c);
    reg [31:0] phase;
    begin
        if (cfg_ref_period == 16'd0 || cfg_ref_stall == 16'd0) begin
            refreshing = 1'b0;
        end else begin
            phase = (t + (c[31:0] * {16'd0, cfg_ref_period}) / CHANNELS) % {16'd0, cfg_ref_period};
            refreshing = phase < {16'd0, cfg_ref_stall};
        end
    end
endfunction

integer c, e, k, found, freeq;
reg [63:0] d;
reg [31:0] lat;
reg [31:0] r;
reg        taken, last_taken, active, offer;
reg [DATA_W-1:0] wword;

initial begin
    for (k = 0; k < CHANNELS * WORDS; k = k + 1) begin
        mem[k] = {DATA_W{1'b0}};
    end
    for (k = 0; k < 256; k = k + 1) begin
        hist[k] = 32'd0;
    end
end

always @(posedge clk) begin
    if (rst) begin
        now = 32'd0;
        s_axi_arready <= {CHANNELS{1'b0}};
        s_axi_rvalid <= {CHANNELS{1'b0}};
        s_axi_rlast <= {CHANNELS{1'b0}};
        s_axi_awready <= {CHANNELS{1'b0}};
        s_axi_wready <= {CHANNELS{1'b0}};
        s_axi_bvalid <= {CHANNELS{1'b0}};
        st_reads <= 64'd0;
        st_beats <= {CHANNELS*32{1'b0}};
        st_lat_sum <= 64'd0;
        st_lat_max <= 32'd0;
        a_reads = 64'd0;
        a_lat_sum = 64'd0;
        a_lat_max = 32'd0;
        for (c = 0; c < CHANNELS; c = c + 1) begin
            b_active[c] = 1'b0;
            w_active[c] = 1'b0;
            bw_pending[c] = 1'b0;
            tokens[c] = 12'd0;
            rng[c] = xorshift(cfg_seed ^ (32'h9E3779B9 * (c + 1)) ^ 32'h1);
            for (e = 0; e < QUEUE; e = e + 1) begin
                q_valid[c*QUEUE + e] = 1'b0;
            end
        end
        for (k = 0; k < 256; k = k + 1) begin
            hist[k] = 32'd0;
        end
    end else begin
        now = now + 32'd1;
        for (c = 0; c < CHANNELS; c = c + 1) begin
            r = rng[c];
            // ---- read data ----
            taken = s_axi_rvalid[c] && s_axi_rready[c];
            last_taken = taken && s_axi_rlast[c];
            if (taken) begin
                st_beats[c*32 +: 32] <= st_beats[c*32 +: 32] + 32'd1;
            end
            if (last_taken) begin
                // The burst is done: its latency counts, its entry frees.
                lat = now - q_t0[b_entry[c]];
                a_lat_sum = a_lat_sum + {32'd0, lat};
                if (lat > a_lat_max) begin
                    a_lat_max = lat;
                end
                k = lat >= 32'd1020 ? 255 : lat / 4;
                hist[k] = hist[k] + 32'd1;
                q_valid[b_entry[c]] = 1'b0;
            end
            active = b_active[c] && !last_taken;
            // A beat may be offered when the output is free (or being taken), no refresh runs
            // and the bandwidth allows.
            offer = (!s_axi_rvalid[c] || taken) && !refreshing(now, c) && tokens[c] >= 12'd1000;
            if (taken) begin
                s_axi_rvalid[c] <= 1'b0;
            end
            if (offer && active) begin
                s_axi_rvalid[c] <= 1'b1;
                s_axi_rdata[c*DATA_W +: DATA_W] <= mem[c*WORDS
                    + ({{(32-WORD_BITS){1'b0}}, q_word[b_entry[c]]} + {24'd0, b_beat[c]}) % WORDS];
                s_axi_rid[c*ID_W +: ID_W] <= q_id[b_entry[c]];
                s_axi_rlast[c] <= b_beat[c] == q_len[b_entry[c]];
                b_beat[c] = b_beat[c] + 8'd1;
            end
            found = -1;
            if (offer && !active) begin
                // A due request starts its burst: the lowest entry due.
                for (e = QUEUE - 1; e >= 0; e = e - 1) begin
                    if (q_valid[c*QUEUE + e] && q_due[c*QUEUE + e] <= now
                            && !(last_taken && b_entry[c] == c*QUEUE + e)) begin
                        found = e;
                    end
                end
                if (found >= 0) begin
                    b_entry[c] = c*QUEUE + found;
                    b_beat[c] = 8'd1;
                    s_axi_rvalid[c] <= 1'b1;
                    s_axi_rdata[c*DATA_W +: DATA_W] <= mem[c*WORDS + {{(32-WORD_BITS){1'b0}}, q_word[c*QUEUE + found]}];
                    s_axi_rid[c*ID_W +: ID_W] <= q_id[c*QUEUE + found];
                    s_axi_rlast[c] <= q_len[c*QUEUE + found] == 8'd0;
                end
            end
            b_active[c] = active || found >= 0;
            if ((offer && active) || found >= 0) begin
                tokens[c] = tokens[c] + {1'b0, cfg_bw_per_mille} - 12'd1000;
            end else if (tokens[c] < 12'd2000) begin
                tokens[c] = tokens[c] + {1'b0, cfg_bw_per_mille};
            end

            // ---- read requests ----
            freeq = 0;
            found = -1;
            for (e = QUEUE - 1; e >= 0; e = e - 1) begin
                if (!q_valid[c*QUEUE + e]) begin
                    found = e;
                    freeq = freeq + 1;
                end
            end
            if (s_axi_arvalid[c] && s_axi_arready[c] && found >= 0) begin
                d = draw_latency(r);
                r = d[63:32];
                q_valid[c*QUEUE + found] = 1'b1;
                q_id[c*QUEUE + found] = s_axi_arid[c*ID_W +: ID_W];
                q_word[c*QUEUE + found] = word_of(s_axi_araddr[c*ADDR_W +: ADDR_W], c);
                q_len[c*QUEUE + found] = s_axi_arlen[c*8 +: 8];
                q_due[c*QUEUE + found] = now + d[31:0];
                q_t0[c*QUEUE + found] = now;
                a_reads = a_reads + 64'd1;
            end
            // arready for the next clock: a free entry besides the one taken now, no refresh,
            // the random draw.
            r = xorshift(r);
            s_axi_arready[c] <= freeq >= 2 && !refreshing(now + 32'd1, c)
                && (r % 32'd1000) >= {22'd0, cfg_arready_drop_per_mille};

            // ---- writes ----
            if (s_axi_awvalid[c] && s_axi_awready[c]) begin
                w_active[c] = 1'b1;
                w_word[c] = word_of(s_axi_awaddr[c*ADDR_W +: ADDR_W], c);
                w_id[c] = s_axi_awid[c*ID_W +: ID_W];
            end
            if (s_axi_wvalid[c] && s_axi_wready[c]) begin
                wword = mem[c*WORDS + {{(32-WORD_BITS){1'b0}}, w_word[c]}];
                for (k = 0; k < DB; k = k + 1) begin
                    if (s_axi_wstrb[c*DB + k]) begin
                        wword[k*8 +: 8] = s_axi_wdata[c*DATA_W + k*8 +: 8];
                    end
                end
                mem[c*WORDS + {{(32-WORD_BITS){1'b0}}, w_word[c]}] = wword;
                w_word[c] = w_word[c] + 1'b1;
                if (s_axi_wlast[c]) begin
                    w_active[c] = 1'b0;
                    bw_pending[c] = 1'b1;
                    d = draw_latency(r);
                    r = d[63:32];
                    b_due[c] = now + d[31:0];
                    s_axi_bid[c*ID_W +: ID_W] <= w_id[c];
                end
            end
            if (bw_pending[c] && b_due[c] <= now && !s_axi_bvalid[c]) begin
                s_axi_bvalid[c] <= 1'b1;
                bw_pending[c] = 1'b0;
            end
            if (s_axi_bvalid[c] && s_axi_bready[c]) begin
                s_axi_bvalid[c] <= 1'b0;
            end
            // One write at a time: AW is taken with no write or response pending; W beats
            // follow their AW.
            s_axi_awready[c] <= !w_active[c] && !bw_pending[c] && !s_axi_bvalid[c]
                && !(s_axi_awvalid[c] && s_axi_awready[c]);
            s_axi_wready[c] <= (w_active[c] || (s_axi_awvalid[c] && s_axi_awready[c]))
                && !(s_axi_wvalid[c] && s_axi_wready[c] && s_axi_wlast[c]);
            rng[c] = r;
        end
        st_reads <= a_reads;
        st_lat_sum <= a_lat_sum;
        st_lat_max <= a_lat_max;
    end
end

endmodule
/* verilator lint_on BLKSEQ */

`resetall
