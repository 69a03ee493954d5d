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
// m_sum (folded to 16 bits, 0 only when every byte is 0), 4 clocks after the clock edge that
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
// Beat counter width: frames up to 2^17 bytes.
localparam BW = 11;

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
// IPv4 total length at ip + 2, IPv6 payload length at ip + 4.
wire [15:0] v4_total = !t12 ? {`NLB_B(s_axis_tdata, 16), `NLB_B(s_axis_tdata, 17)}
    : !t16 ? {`NLB_B(s_axis_tdata, 20), `NLB_B(s_axis_tdata, 21)}
    : {`NLB_B(s_axis_tdata, 24), `NLB_B(s_axis_tdata, 25)};
wire [15:0] v6_plen = !t12 ? {`NLB_B(s_axis_tdata, 18), `NLB_B(s_axis_tdata, 19)}
    : !t16 ? {`NLB_B(s_axis_tdata, 22), `NLB_B(s_axis_tdata, 23)}
    : {`NLB_B(s_axis_tdata, 26), `NLB_B(s_axis_tdata, 27)};
wire [17:0] end_now = ethertype == 16'h86DD ? {13'd0, ip} + 18'd40 + {2'd0, v6_plen}
    : {13'd0, ip} + {2'd0, v4_total};

reg          first_reg = 1'b1;
reg [BW-1:0] idx_reg = {BW{1'b0}};
reg [4:0]    lo_reg = 5'd0;
reg [17:0]   hi_reg = 18'd0;

// ---- stage 1: the beat with its bounds --------------------------------------------------------

reg                  s1_valid_reg = 1'b0;
reg                  s1_last_reg = 1'b0;
reg [DATA_WIDTH-1:0] s1_data_reg = {DATA_WIDTH{1'b0}};
reg [BW-1:0]         s1_idx_reg = {BW{1'b0}};
reg [4:0]            s1_lo_reg = 5'd0;
reg [17:0]           s1_hi_reg = 18'd0;

always @(posedge clk) begin
    s1_valid_reg <= beat;
    if (beat) begin
        s1_last_reg <= s_axis_tlast;
        s1_data_reg <= s_axis_tdata;
        s1_idx_reg <= first_reg ? {BW{1'b0}} : idx_reg;
        s1_lo_reg <= first_reg ? ip : lo_reg;
        s1_hi_reg <= first_reg ? end_now : hi_reg;
        first_reg <= s_axis_tlast;
        if (first_reg) begin
            lo_reg <= ip;
            hi_reg <= end_now;
            idx_reg <= {{(BW-1){1'b0}}, 1'b1};
        end else if (idx_reg != {BW{1'b1}}) begin
            idx_reg <= idx_reg + 1'b1;
        end
    end
    if (rst) begin
        s1_valid_reg <= 1'b0;
        first_reg <= 1'b1;
    end
end

// ---- stage 2: bytes in_ip the bounds, summed in four groups ----------------------------------

// Offset of the beat's first byte, and the bounds relative to it.
wire [17:0] base = {1'b0, s1_idx_reg, 6'd0};
wire [18:0] rel_lo = {14'd0, s1_lo_reg} - {1'b0, base};
wire [18:0] rel_hi = {1'b0, s1_hi_reg} - {1'b0, base};

reg [BYTES-1:0] in_ip;
reg [19:0]      group [0:3];
reg [15:0]      word;
integer         j, g;
always @* begin
    for (j = 0; j < BYTES; j = j + 1) begin
        // lo <= j < hi, with the relative bounds possibly negative (bit 18 set) or large.
        in_ip[j] = (rel_lo[18] || {14'd0, rel_lo[17:0]} <= j) && !rel_hi[18]
            && {14'd0, rel_hi[17:0]} > j;
    end
    for (g = 0; g < 4; g = g + 1) begin
        group[g] = 20'd0;
        for (j = 0; j < WORDS / 4; j = j + 1) begin
            word = {in_ip[2*(g*(WORDS/4)+j)] ? `NLB_B(s1_data_reg, 2*(g*(WORDS/4)+j)) : 8'd0,
                in_ip[2*(g*(WORDS/4)+j)+1] ? `NLB_B(s1_data_reg, 2*(g*(WORDS/4)+j)+1) : 8'd0};
            group[g] = group[g] + {4'd0, word};
        end
    end
end

reg        s2_valid_reg = 1'b0;
reg        s2_last_reg = 1'b0;
reg        s2_first_reg = 1'b0;
reg [19:0] s2_group_reg [0:3];
integer    gi;
initial begin
    for (gi = 0; gi < 4; gi = gi + 1) begin
        s2_group_reg[gi] = 20'd0;
    end
end

always @(posedge clk) begin
    s2_valid_reg <= s1_valid_reg;
    s2_last_reg <= s1_last_reg;
    s2_first_reg <= s1_idx_reg == {BW{1'b0}};
    for (gi = 0; gi < 4; gi = gi + 1) begin
        s2_group_reg[gi] <= group[gi];
    end
    if (rst) begin
        s2_valid_reg <= 1'b0;
    end
end

// ---- stage 3: the beat's sum --------------------------------------------------------------

reg        s3_valid_reg = 1'b0;
reg        s3_last_reg = 1'b0;
reg        s3_first_reg = 1'b0;
reg [21:0] s3_sum_reg = 22'd0;

always @(posedge clk) begin
    s3_valid_reg <= s2_valid_reg;
    s3_last_reg <= s2_last_reg;
    s3_first_reg <= s2_first_reg;
    s3_sum_reg <= ({2'd0, s2_group_reg[0]} + {2'd0, s2_group_reg[1]})
        + ({2'd0, s2_group_reg[2]} + {2'd0, s2_group_reg[3]});
    if (rst) begin
        s3_valid_reg <= 1'b0;
    end
end

// ---- stage 4: accumulate; at the last beat fold and emit ----------------------------------

reg  [31:0] acc_reg = 32'd0;
wire [31:0] acc_now = (s3_first_reg ? 32'd0 : acc_reg) + {10'd0, s3_sum_reg};
wire [16:0] fold1 = {1'b0, acc_now[15:0]} + {1'b0, acc_now[31:16]};
wire [15:0] fold2 = fold1[15:0] + {15'd0, fold1[16]};

reg        out_valid_reg = 1'b0;
reg [15:0] out_sum_reg = 16'd0;

always @(posedge clk) begin
    out_valid_reg <= s3_valid_reg && s3_last_reg;
    if (s3_valid_reg) begin
        acc_reg <= acc_now;
        if (s3_last_reg) begin
            out_sum_reg <= fold2;
        end
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
