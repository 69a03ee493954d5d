`resetall
`timescale 1ns / 1ps
`default_nettype none

// Ones'-complement sum of each received frame's IP packet (bytes [l3_offset, l3_end), padding
// excluded), for the UDP checksum of GUE over IPv6 (docs/pipeline.md section 9), computed as
// the frame streams in. Bytes at even frame offsets are the high bytes of the 16-bit words;
// the encapsulation keeps the parity (it inserts an even number of bytes), so this is the
// payload's share of the checksum.
//
// Like nlb_parser it observes the beats its user accepts and never stalls. The IP bounds come
// from the first beat: up to two VLAN tags (802.1Q / 802.1ad), then the IPv4 total length or
// the IPv6 payload length; frames that are not IP sum to whatever the bounds give (the sum is
// only used for frames the parser accepted, whose bounds are the same). m_valid pulses, with
// m_sum (folded to 16 bits, 0 only when every byte is 0), 6 clocks after the clock edge that
// took the frame's last beat.
module nlb_l3_csum #(
    // AXI-Stream data width in bits (512: one beat holds the whole Ethernet/VLAN/IP header
    // start).
    parameter DATA_WIDTH = 512,
    // tkeep width (derived).
    parameter KEEP_WIDTH = DATA_WIDTH / 8
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire [DATA_WIDTH-1:0] s_axis_tdata,
    /* verilator lint_off UNUSEDSIGNAL */ // (frames past l3_end are excluded by position)
    input  wire [KEEP_WIDTH-1:0] s_axis_tkeep,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                  s_axis_tvalid,
    input  wire                  s_axis_tready,
    input  wire                  s_axis_tlast,

    output wire                  m_valid,
    output wire [15:0]           m_sum
);

localparam BYTES = DATA_WIDTH / 8;
localparam WORDS = BYTES / 2;

initial begin
    if (DATA_WIDTH != 512) begin
        $error("nlb_l3_csum: the header decode assumes 512-bit beats");
        $finish;
    end
end

`define NLB_B(v, i) v[(i)*8 +: 8]

wire beat = s_axis_tvalid && s_axis_tready;

// ---- first beat: the IP bounds ----------------------------------------------------------------

wire [15:0] et12 = {`NLB_B(s_axis_tdata, 12), `NLB_B(s_axis_tdata, 13)};
wire [15:0] et16 = {`NLB_B(s_axis_tdata, 16), `NLB_B(s_axis_tdata, 17)};
wire [15:0] et20 = {`NLB_B(s_axis_tdata, 20), `NLB_B(s_axis_tdata, 21)};
wire        t12 = et12 == 16'h8100 || et12 == 16'h88A8;
wire        t16 = et16 == 16'h8100 || et16 == 16'h88A8;
wire [4:0]  ip = !t12 ? 5'd14 : !t16 ? 5'd18 : 5'd22;
wire [15:0] ethertype = !t12 ? et12 : !t16 ? et16 : et20;
// end = ip + the IPv4 total length (at ip + 2), or ip + 40 + the IPv6 payload length (at
// ip + 4). The six candidate sums (three header positions by two families) are added beside
// the tag and EtherType compares and only selected after them: the input beat comes through
// nlb_top's receive/inject selection, so this stage keeps its adds off the compares' path.
wire [17:0] end_v4_14 = 18'd14 + {2'd0, `NLB_B(s_axis_tdata, 16), `NLB_B(s_axis_tdata, 17)};
wire [17:0] end_v4_18 = 18'd18 + {2'd0, `NLB_B(s_axis_tdata, 20), `NLB_B(s_axis_tdata, 21)};
wire [17:0] end_v4_22 = 18'd22 + {2'd0, `NLB_B(s_axis_tdata, 24), `NLB_B(s_axis_tdata, 25)};
wire [17:0] end_v6_14 = 18'd54 + {2'd0, `NLB_B(s_axis_tdata, 18), `NLB_B(s_axis_tdata, 19)};
wire [17:0] end_v6_18 = 18'd58 + {2'd0, `NLB_B(s_axis_tdata, 22), `NLB_B(s_axis_tdata, 23)};
wire [17:0] end_v6_22 = 18'd62 + {2'd0, `NLB_B(s_axis_tdata, 26), `NLB_B(s_axis_tdata, 27)};
wire        is_v6 = ethertype == 16'h86DD;
wire [17:0] end_now = !t12 ? (is_v6 ? end_v6_14 : end_v4_14)
    : !t16 ? (is_v6 ? end_v6_18 : end_v4_18)
    : (is_v6 ? end_v6_22 : end_v4_22);

reg first_reg = 1'b1;

// ---- stage 1: the beat with its bounds --------------------------------------------------------

// The bounds relative to the beat's first byte: the IP start matters only in the first beat
// (later beats start past it), the end moves 64 bytes closer with every beat, so it is kept
// relative (a subtraction of a constant per beat instead of one of the beat's offset).
reg                  s1_valid_reg = 1'b0;
reg                  s1_last_reg = 1'b0;
reg                  s1_first_reg = 1'b0;
reg [DATA_WIDTH-1:0] s1_data_reg = {DATA_WIDTH{1'b0}};
reg [4:0]            s1_lo_reg = 5'd0;
// Two's complement, negative past the end; frames up to 2^17 bytes keep it in range.
reg [18:0]           s1_rel_hi_reg = 19'd0;

always @(posedge clk) begin
    s1_valid_reg <= beat;
    if (beat) begin
        s1_last_reg <= s_axis_tlast;
        s1_first_reg <= first_reg;
        s1_data_reg <= s_axis_tdata;
        s1_lo_reg <= ip;
        s1_rel_hi_reg <= first_reg ? {1'b0, end_now} : s1_rel_hi_reg - 19'd64;
        first_reg <= s_axis_tlast;
    end
    if (rst) begin
        s1_valid_reg <= 1'b0;
        first_reg <= 1'b1;
    end
end

// ---- stage 2: the bytes outside the bounds zeroed ------------------------------------------

// lo <= j (first beat only) and j < hi; hi is relative to the beat, negative (bit 18) or
// large. The comparison with each constant j is written on the low six bits plus "any higher
// bit" so that it maps to a couple of LUTs, not a carry chain per byte.
wire            past_end = s1_rel_hi_reg[18];
wire            beyond_beat = |s1_rel_hi_reg[17:6];
reg [BYTES-1:0] in_ip;
reg [DATA_WIDTH-1:0] masked;
integer         j, g;
always @* begin
    for (j = 0; j < BYTES; j = j + 1) begin
        in_ip[j] = (!s1_first_reg || {27'd0, s1_lo_reg} <= j) && !past_end
            && (beyond_beat || {26'd0, s1_rel_hi_reg[5:0]} > j);
        masked[j*8 +: 8] = in_ip[j] ? `NLB_B(s1_data_reg, j) : 8'd0;
    end
end

reg                  s2_valid_reg = 1'b0;
reg                  s2_last_reg = 1'b0;
reg                  s2_first_reg = 1'b0;
reg [DATA_WIDTH-1:0] s2_data_reg = {DATA_WIDTH{1'b0}};

always @(posedge clk) begin
    s2_valid_reg <= s1_valid_reg;
    s2_last_reg <= s1_last_reg;
    s2_first_reg <= s1_first_reg;
    s2_data_reg <= masked;
    if (rst) begin
        s2_valid_reg <= 1'b0;
    end
end

// ---- stage 3: the words summed in eight groups ----------------------------------------------

localparam GROUPS = 8;
localparam GROUP_WORDS = WORDS / GROUPS;

reg [17:0] group [0:GROUPS-1];
always @* begin
    for (g = 0; g < GROUPS; g = g + 1) begin
        group[g] = 18'd0;
        for (j = 0; j < GROUP_WORDS; j = j + 1) begin
            group[g] = group[g] + {2'd0, `NLB_B(s2_data_reg, 2*(g*GROUP_WORDS+j)),
                `NLB_B(s2_data_reg, 2*(g*GROUP_WORDS+j)+1)};
        end
    end
end

reg        s3_valid_reg = 1'b0;
reg        s3_last_reg = 1'b0;
reg        s3_first_reg = 1'b0;
reg [17:0] s3_group_reg [0:GROUPS-1];
integer    gi;
initial begin
    for (gi = 0; gi < GROUPS; gi = gi + 1) begin
        s3_group_reg[gi] = 18'd0;
    end
end

always @(posedge clk) begin
    s3_valid_reg <= s2_valid_reg;
    s3_last_reg <= s2_last_reg;
    s3_first_reg <= s2_first_reg;
    for (gi = 0; gi < GROUPS; gi = gi + 1) begin
        s3_group_reg[gi] <= group[gi];
    end
    if (rst) begin
        s3_valid_reg <= 1'b0;
    end
end

// ---- stage 4: the beat's sum, in carry-save form -------------------------------------------

// Four explicit 3:2 levels take the eight group sums to two, and stage 5's add takes the two
// (an eight-operand add here became 13 logic levels in nlb_top). No carry is lost at 22 bits:
// every partial value is at most the beat's sum, below 2^21.
function [43:0] csa(input [21:0] a, input [21:0] b, input [21:0] c);
    csa = {(a & b | a & c | b & c) << 1, a ^ b ^ c};
endfunction

reg        s4_valid_reg = 1'b0;
reg        s4_last_reg = 1'b0;
reg        s4_first_reg = 1'b0;
reg [21:0] s4_sum_reg = 22'd0;
reg [21:0] s4_carry_reg = 22'd0;
reg [21:0] grp [0:GROUPS-1];
reg [43:0] l1a, l1b, l2a, l2b, l3, beat_sum;

always @* begin
    for (gi = 0; gi < GROUPS; gi = gi + 1) begin
        grp[gi] = {4'd0, s3_group_reg[gi]};
    end
    l1a = csa(grp[0], grp[1], grp[2]);
    l1b = csa(grp[3], grp[4], grp[5]);
    l2a = csa(l1a[21:0], l1a[43:22], l1b[21:0]);
    l2b = csa(l1b[43:22], grp[6], grp[7]);
    l3 = csa(l2a[21:0], l2a[43:22], l2b[21:0]);
    beat_sum = csa(l3[21:0], l3[43:22], l2b[43:22]);
end

always @(posedge clk) begin
    s4_valid_reg <= s3_valid_reg;
    s4_last_reg <= s3_last_reg;
    s4_first_reg <= s3_first_reg;
    s4_sum_reg <= beat_sum[21:0];
    s4_carry_reg <= beat_sum[43:22];
    if (rst) begin
        s4_valid_reg <= 1'b0;
    end
end

// ---- stage 5: accumulate; at the last beat keep the frame's sum -----------------------------

reg  [31:0] acc_reg = 32'd0;
wire [31:0] acc_now = (s4_first_reg ? 32'd0 : acc_reg) + {10'd0, s4_sum_reg}
    + {10'd0, s4_carry_reg};

reg        s5_done_reg = 1'b0;
reg [31:0] s5_total_reg = 32'd0;

always @(posedge clk) begin
    s5_done_reg <= s4_valid_reg && s4_last_reg;
    if (s4_valid_reg) begin
        acc_reg <= acc_now;
        if (s4_last_reg) begin
            s5_total_reg <= acc_now;
        end
    end
    if (rst) begin
        s5_done_reg <= 1'b0;
    end
end

// ---- stage 6: fold to 16 bits and emit ------------------------------------------------------

// The end-around carry of the fold is its own carry out, so both results are added side by
// side and the carry picks one (one carry chain instead of two in a row).
wire [16:0] fold = {1'b0, s5_total_reg[15:0]} + {1'b0, s5_total_reg[31:16]};
wire [15:0] fold_plus1 = s5_total_reg[15:0] + s5_total_reg[31:16] + 16'd1;

reg        out_valid_reg = 1'b0;
reg [15:0] out_sum_reg = 16'd0;

always @(posedge clk) begin
    out_valid_reg <= s5_done_reg;
    if (s5_done_reg) begin
        out_sum_reg <= fold[16] ? fold_plus1 : fold[15:0];
    end
    if (rst) begin
        out_valid_reg <= 1'b0;
    end
end

assign m_valid = out_valid_reg;
assign m_sum = out_sum_reg;

`undef NLB_B

endmodule

`resetall
