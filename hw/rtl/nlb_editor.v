`resetall
`timescale 1ns / 1ps
`default_nettype none

// The action stage (docs/pipeline.md section 9 and the punt queue of section 13): pairs each
// lookup result with its frame from the packet FIFO and
//   FORWARD L2_DSR: sends the frame with destination MAC = backend MAC, source MAC =
//                   ctrl.local_mac (tags and padding kept);
//   FORWARD IPIP/GUE: sends L2 header (tags kept, MACs rewritten, last EtherType = the outer
//                   family's) | outer IPv4/IPv6 header | [UDP] | the IP packet (padding
//                   dropped): a byte shifter inserts the 20/28/40/48 header bytes after the L2
//                   header; the outer IPv4 checksum and the GUE-over-IPv6 UDP checksum are
//                   computed here (the payload's share comes from nlb_l3_csum);
//   PUNT:          sends the punt header beat (punt_header layout in the low bits) and the
//                   frame's first 9728 bytes on the punt stream;
//   PASS:          sends the frame unchanged and whole on the pass stream (toward the host's
//                   network stack);
//   DROP:          discards the frame (counted elsewhere).
//
// Results enter a header-building pipeline (3 clocks, never stalls) and wait in a job FIFO
// (JOB_DEPTH; the top's admission control keeps it from filling). Frames arrive whole (every
// result comes after its frame's last beat). One output beat per clock: a one-beat frame per
// clock for L2_DSR, drops and punts of short frames; encapsulation adds up to 48 bytes, so a
// 64-byte frame takes two beats. tready of the three outputs comes from skid registers.
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_editor (
    clk,
    rst,
    s_res_valid,
    s_res_verdict,
    s_res_reason,
    s_res_bank,
    s_res_rule_valid,
    s_res_rule,
    s_res_flow_hash,
    s_res_ip_id,
    s_res_len,
    s_res_out_len,
    s_res_delivery,
    s_res_be_ipv6,
    s_res_be_addr,
    s_res_be_mac,
    s_res_ipv6,
    s_res_l3_offset,
    s_res_l3_end,
    s_res_tos,
    s_res_dont_fragment,
    s_csum_valid,
    s_csum,
    ctrl_local_mac,
    ctrl_gue_port,
    ctrl_outer_src_v4,
    ctrl_outer_src_v4_len,
    ctrl_outer_src_v6,
    ctrl_outer_src_v6_mask,
    s_frame_data,
    s_frame_keep,
    s_frame_last,
    s_frame_valid,
    s_frame_ready,
    m_axis_tx_tdata,
    m_axis_tx_tkeep,
    m_axis_tx_tvalid,
    m_axis_tx_tready,
    m_axis_tx_tlast,
    m_axis_punt_tdata,
    m_axis_punt_tkeep,
    m_axis_punt_tvalid,
    m_axis_punt_tready,
    m_axis_punt_tlast,
    m_axis_pass_tdata,
    m_axis_pass_tkeep,
    m_axis_pass_tvalid,
    m_axis_pass_tready,
    m_axis_pass_tlast,
    jobs,
    frame_done
);

`include "nlb_regmap.vh"

// Frame length width (nlb_parser's LEN_WIDTH).
parameter LEN_WIDTH = 17;
// Jobs waiting for their frame (a power of two).
parameter JOB_DEPTH = 64;

localparam LW = LEN_WIDTH;
localparam DW = 512;
localparam KW = 64;
localparam JOB_BITS = $clog2(JOB_DEPTH);
// Largest punted frame (docs/pipeline.md section 13): 9728 bytes = 152 beats.
localparam PUNT_BEATS = 152;

// What is done with a frame, one-hot: the edit state machine tests single bits of the job
// (a decode of an encoded kind in front of the pop and its counters was 13 levels in the
// OpenNIC plugin).
localparam KI_DROP = 0;
localparam KI_L2 = 1;
localparam KI_ENC = 2;
localparam KI_PUNT = 3;
localparam KI_PASS = 4;
localparam [4:0] K_DROP = 5'b00001 << KI_DROP;
localparam [4:0] K_L2 = 5'b00001 << KI_L2;
localparam [4:0] K_ENC = 5'b00001 << KI_ENC;
localparam [4:0] K_PUNT = 5'b00001 << KI_PUNT;
localparam [4:0] K_PASS = 5'b00001 << KI_PASS;

input  wire                 clk;
input  wire                 rst;

// Lookup results (nlb_lookup m_*), one per frame, in frame order.
input  wire                 s_res_valid;
input  wire [1:0]           s_res_verdict;
input  wire [4:0]           s_res_reason;
input  wire                 s_res_bank;
input  wire                 s_res_rule_valid;
input  wire [11:0]          s_res_rule;
input  wire [31:0]          s_res_flow_hash;
input  wire [31:0]          s_res_ip_id;
input  wire [LW-1:0]        s_res_len;
input  wire [17:0]          s_res_out_len;
input  wire [1:0]           s_res_delivery;
input  wire                 s_res_be_ipv6;
input  wire [127:0]         s_res_be_addr;
input  wire [47:0]          s_res_be_mac;
input  wire                 s_res_ipv6;
input  wire [4:0]           s_res_l3_offset;
input  wire [LW-1:0]        s_res_l3_end;
input  wire [7:0]           s_res_tos;
input  wire                 s_res_dont_fragment;

// The IP packet's ones'-complement sum of each frame (nlb_l3_csum), in frame order.
input  wire                 s_csum_valid;
input  wire [15:0]          s_csum;

// ctrl settings.
input  wire [47:0]          ctrl_local_mac;
input  wire [15:0]          ctrl_gue_port;
input  wire [31:0]          ctrl_outer_src_v4;
input  wire [5:0]           ctrl_outer_src_v4_len;
input  wire [127:0]         ctrl_outer_src_v6;
// The prefix as a mask (its length's leading ones), registered in nlb_regs beside the length so
// that the stage-1 sum of the prefix words starts from registers.
input  wire [127:0]         ctrl_outer_src_v6_mask;

// Frames from the packet FIFO.
input  wire [DW-1:0]        s_frame_data;
input  wire [KW-1:0]        s_frame_keep;
input  wire                 s_frame_last;
input  wire                 s_frame_valid;
output wire                 s_frame_ready;

output wire [DW-1:0]        m_axis_tx_tdata;
output wire [KW-1:0]        m_axis_tx_tkeep;
output wire                 m_axis_tx_tvalid;
input  wire                 m_axis_tx_tready;
output wire                 m_axis_tx_tlast;

output wire [DW-1:0]        m_axis_punt_tdata;
output wire [KW-1:0]        m_axis_punt_tkeep;
output wire                 m_axis_punt_tvalid;
input  wire                 m_axis_punt_tready;
output wire                 m_axis_punt_tlast;

// PASS frames, unchanged.
output wire [DW-1:0]        m_axis_pass_tdata;
output wire [KW-1:0]        m_axis_pass_tkeep;
output wire                 m_axis_pass_tvalid;
input  wire                 m_axis_pass_tready;
output wire                 m_axis_pass_tlast;

// Jobs waiting (results whose frame is not done); a frame finished this clock.
output wire [JOB_BITS:0]    jobs;
output wire                 frame_done;

// ---- payload sums -------------------------------------------------------------------------

// Every frame's sum is in long before its result (6 clocks after the last beat against the
// parser's and the lookup's 30), so the head is always valid when a result takes it.
/* verilator lint_off UNUSEDSIGNAL */
wire        csum_valid;
/* verilator lint_on UNUSEDSIGNAL */
wire [15:0] csum_head;
/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(16),
    .DEPTH(JOB_DEPTH)
) csum_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(s_csum),
    .s_valid(s_csum_valid),
    .s_ready(),
    .m_data(csum_head),
    .m_valid(csum_valid),
    .m_ready(s_res_valid),
    .count()
);
/* verilator lint_on PINCONNECTEMPTY */

// ---- header builder, stage 1: fields ----------------------------------------------------------

function [31:0] mask32(input [5:0] len);
    mask32 = len == 6'd0 ? 32'd0 : ~(32'd0) << (6'd32 - len);
endfunction

reg         h1_valid_reg = 1'b0;
reg [4:0]   h1_kind_reg = K_DROP;
reg [101:0] h1_punt_reg = 102'd0;
reg [47:0]  h1_be_mac_reg = 48'd0;
reg [47:0]  h1_local_mac_reg = 48'd0;
reg [4:0]   h1_l3off_reg = 5'd0;
reg         h1_ov6_reg = 1'b0;
reg         h1_gue_reg = 1'b0;
reg [17:0]  h1_out_len_reg = 18'd0;
reg [7:0]   h1_tos_reg = 8'd0;
reg [15:0]  h1_l4_len_reg = 16'd0;
reg [15:0]  h1_id_reg = 16'd0;
reg         h1_df_reg = 1'b0;
reg [7:0]   h1_proto_reg = 8'd0;
reg [31:0]  h1_src4_reg = 32'd0;
reg [127:0] h1_src6_reg = 128'd0;
reg [127:0] h1_dst_reg = 128'd0;
reg [19:0]  h1_flow_reg = 20'd0;
reg [15:0]  h1_sport_reg = 16'd0;
reg [15:0]  h1_dport_reg = 16'd0;
// Partial checksum sums, so that stage 2 adds six operands at most (the 22-operand UDP sum in
// one clock was 17 logic levels in nlb_top): the destination's eight words, the UDP header's
// fields, the IPv4 header's fixed fields.
reg [18:0]  h1_dst_sum_reg = 19'd0;
reg [17:0]  h1_udp_fixed_reg = 18'd0;
reg [17:0]  h1_v4_fixed_reg = 18'd0;
// The outer IPv6 source's words 2..7: only the prefix reaches them (the flow hash is 32 bits).
reg [18:0]  h1_src6_hi_sum_reg = 19'd0;

// The IP packet's length (below 2^16 for every frame that can be forwarded).
/* verilator lint_off UNUSEDSIGNAL */
wire [LW-1:0] ip_len = s_res_l3_end - {{(LW-5){1'b0}}, s_res_l3_offset};
/* verilator lint_on UNUSEDSIGNAL */
wire          res_gue = s_res_delivery == NLB_DELIVERY_GUE;
wire [13:0]   punt_len = s_res_len > 17'd16383 ? 14'd16383 : s_res_len[13:0];
wire [101:0]  punt_hdr = {s_res_ip_id, punt_len, s_res_flow_hash, s_res_rule_valid ? s_res_rule
    : 12'd0, s_res_rule_valid, s_res_bank, s_res_verdict, 3'd0, s_res_reason};

wire [127:0] src6_prefix = ctrl_outer_src_v6 & ctrl_outer_src_v6_mask;
wire [127:0] res_dst = s_res_be_ipv6 ? s_res_be_addr : {96'd0, s_res_be_addr[31:0]};
wire [15:0]  res_id = s_res_ipv6 ? 16'd0 : s_res_ip_id[15:0];
wire         res_df = s_res_ipv6 || s_res_dont_fragment;
wire [7:0]   res_proto = res_gue ? 8'd17 : s_res_ipv6 ? 8'd41 : 8'd4;
reg  [18:0]  res_dst_sum;
reg  [18:0]  src6_hi_sum;
// The destination's eight words go through four 3:2 levels to two, and one add: a chain of
// seven adds behind the lookup's result was 14 levels in nlb_top.
function [37:0] csa(input [18:0] a, input [18:0] b, input [18:0] c);
    csa = {(a & b | a & c | b & c) << 1, a ^ b ^ c};
endfunction
reg  [18:0]  dw [0:7];
reg  [37:0]  d1a, d1b, d2a, d2b, d3, d4;
integer      sw;
always @* begin
    for (sw = 0; sw < 8; sw = sw + 1) begin
        dw[sw] = {3'd0, res_dst[sw*16 +: 16]};
    end
    d1a = csa(dw[0], dw[1], dw[2]);
    d1b = csa(dw[3], dw[4], dw[5]);
    d2a = csa(d1a[18:0], d1a[37:19], d1b[18:0]);
    d2b = csa(d1b[37:19], dw[6], dw[7]);
    d3 = csa(d2a[18:0], d2a[37:19], d2b[18:0]);
    d4 = csa(d3[18:0], d3[37:19], d2b[37:19]);
    res_dst_sum = d4[18:0] + d4[37:19];
    src6_hi_sum = 19'd0;
    for (sw = 2; sw < 8; sw = sw + 1) begin
        src6_hi_sum = src6_hi_sum + {3'd0, src6_prefix[sw*16 +: 16]};
    end
end

always @(posedge clk) begin
    h1_valid_reg <= s_res_valid;
    if (s_res_valid) begin
        if (s_res_verdict == NLB_VERDICT_FORWARD) begin
            h1_kind_reg <= s_res_delivery == NLB_DELIVERY_L2_DSR ? K_L2 : K_ENC;
        end else if (s_res_verdict == NLB_VERDICT_PUNT) begin
            h1_kind_reg <= K_PUNT;
        end else if (s_res_verdict == NLB_VERDICT_PASS) begin
            h1_kind_reg <= K_PASS;
        end else begin
            h1_kind_reg <= K_DROP;
        end
        h1_punt_reg <= punt_hdr;
        h1_be_mac_reg <= s_res_be_mac;
        h1_local_mac_reg <= ctrl_local_mac;
        h1_l3off_reg <= s_res_l3_offset;
        h1_ov6_reg <= s_res_be_ipv6;
        h1_gue_reg <= res_gue;
        h1_out_len_reg <= s_res_out_len;
        h1_tos_reg <= s_res_tos;
        h1_l4_len_reg <= ip_len[15:0] + (res_gue ? 16'd8 : 16'd0);
        h1_id_reg <= res_id;
        h1_df_reg <= res_df;
        h1_proto_reg <= res_proto;
        h1_src4_reg <= (ctrl_outer_src_v4 & mask32(ctrl_outer_src_v4_len))
            | (s_res_flow_hash & ~mask32(ctrl_outer_src_v4_len));
        h1_src6_reg <= src6_prefix
            | ({96'd0, s_res_flow_hash} & ~ctrl_outer_src_v6_mask);
        h1_dst_reg <= res_dst;
        h1_flow_reg <= s_res_flow_hash[19:0];
        h1_sport_reg <= {2'b11, s_res_flow_hash[13:0]};
        h1_dport_reg <= ctrl_gue_port;
        h1_dst_sum_reg <= res_dst_sum;
        h1_src6_hi_sum_reg <= src6_hi_sum;
        // Next header 17, source port, destination port, payload sum.
        h1_udp_fixed_reg <= 18'd17 + {2'd0, 2'b11, s_res_flow_hash[13:0]} + {2'd0, ctrl_gue_port}
            + {2'd0, csum_head};
        // Version/IHL 0x45 with the TOS, flags with DF, TTL 64 with the protocol, identification,
        // and the 20 bytes of the header in the total length.
        h1_v4_fixed_reg <= {2'd0, 8'h45, s_res_tos} + {3'd0, res_df, 14'd0}
            + {2'd0, 8'd64, res_proto} + {2'd0, res_id} + 18'd20;
    end
    if (rst) begin
        h1_valid_reg <= 1'b0;
    end
end

// ---- header builder, stage 2: checksum sums ---------------------------------------------------

// The IPv4 header (an IPv4 destination's upper words are zero, so the eight-word sum is its
// two words). The total length l4 + 20 cannot pass 16 bits for a frame that is forwarded.
wire [19:0] v4_sum = {2'd0, h1_v4_fixed_reg} + {4'd0, h1_l4_len_reg}
    + {4'd0, h1_src4_reg[31:16]} + {4'd0, h1_src4_reg[15:0]} + {1'd0, h1_dst_sum_reg};
// RFC 8200 pseudo header (src, dst, length, next header 17), UDP header (its length is the
// pseudo header's), payload.
wire [20:0] udp_sum = {4'd0, h1_l4_len_reg, 1'b0} + {3'd0, h1_udp_fixed_reg}
    + {5'd0, h1_src6_reg[31:16]} + {5'd0, h1_src6_reg[15:0]} + {2'd0, h1_src6_hi_sum_reg}
    + {2'd0, h1_dst_sum_reg};

reg         h2_valid_reg = 1'b0;
reg [4:0]   h2_kind_reg = K_DROP;
reg [101:0] h2_punt_reg = 102'd0;
reg [47:0]  h2_be_mac_reg = 48'd0;
reg [47:0]  h2_local_mac_reg = 48'd0;
reg [4:0]   h2_l3off_reg = 5'd0;
reg         h2_ov6_reg = 1'b0;
reg         h2_gue_reg = 1'b0;
reg [17:0]  h2_out_len_reg = 18'd0;
reg [7:0]   h2_tos_reg = 8'd0;
reg [15:0]  h2_l4_len_reg = 16'd0;
reg [15:0]  h2_id_reg = 16'd0;
reg         h2_df_reg = 1'b0;
reg [7:0]   h2_proto_reg = 8'd0;
reg [31:0]  h2_src4_reg = 32'd0;
reg [127:0] h2_src6_reg = 128'd0;
reg [127:0] h2_dst_reg = 128'd0;
reg [19:0]  h2_flow_reg = 20'd0;
reg [15:0]  h2_sport_reg = 16'd0;
reg [15:0]  h2_dport_reg = 16'd0;
reg [19:0]  h2_v4_sum_reg = 20'd0;
reg [20:0]  h2_udp_sum_reg = 21'd0;

always @(posedge clk) begin
    h2_valid_reg <= h1_valid_reg;
    h2_kind_reg <= h1_kind_reg;
    h2_punt_reg <= h1_punt_reg;
    h2_be_mac_reg <= h1_be_mac_reg;
    h2_local_mac_reg <= h1_local_mac_reg;
    h2_l3off_reg <= h1_l3off_reg;
    h2_ov6_reg <= h1_ov6_reg;
    h2_gue_reg <= h1_gue_reg;
    h2_out_len_reg <= h1_out_len_reg;
    h2_tos_reg <= h1_tos_reg;
    h2_l4_len_reg <= h1_l4_len_reg;
    h2_id_reg <= h1_id_reg;
    h2_df_reg <= h1_df_reg;
    h2_proto_reg <= h1_proto_reg;
    h2_src4_reg <= h1_src4_reg;
    h2_src6_reg <= h1_src6_reg;
    h2_dst_reg <= h1_dst_reg;
    h2_flow_reg <= h1_flow_reg;
    h2_sport_reg <= h1_sport_reg;
    h2_dport_reg <= h1_dport_reg;
    h2_v4_sum_reg <= v4_sum;
    h2_udp_sum_reg <= udp_sum;
    if (rst) begin
        h2_valid_reg <= 1'b0;
    end
end

// ---- header builder, stage 3: fold, assemble, queue the job -----------------------------------

// The end-around carry is the first add's own carry out, so the sum plus one is added beside
// it and the carry picks (one carry chain instead of two in a row).
function [15:0] fold(input [20:0] s);
    reg [16:0] f1;
    reg [15:0] f1_plus1;
    begin
        f1 = {1'b0, s[15:0]} + {12'd0, s[20:16]};
        f1_plus1 = s[15:0] + {11'd0, s[20:16]} + 16'd1;
        fold = f1[16] ? f1_plus1 : f1[15:0];
    end
endfunction

wire [15:0] v4_csum = ~fold({1'b0, h2_v4_sum_reg});
wire [15:0] udp_c = ~fold(h2_udp_sum_reg);
// A UDP checksum that computes to 0 is sent as 0xFFFF. udp_c is 0 when the fold is 0xFFFF,
// which (the high part H = sum[20:16] is below 32) happens exactly when the low 16 bits
// are 0xFFFF - H: an equality on the register, beside the fold rather than after it.
wire        udp_c_zero = h2_udp_sum_reg[15:5] == 11'h7FF
    && h2_udp_sum_reg[4:0] == ~h2_udp_sum_reg[20:16];
wire [15:0] udp_csum = h2_ov6_reg ? (udp_c_zero ? 16'hFFFF : udp_c) : 16'd0;

wire [15:0] v4_total_h2 = h2_l4_len_reg + 16'd20;

// The outer header and UDP header, byte 0 in bits 7..0 (network order).
reg [383:0] hdr;
reg [5:0]   hsize;
reg [63:0]  udp_bytes;
integer     hb;
always @* begin
    hdr = 384'd0;
    udp_bytes = {udp_csum[7:0], udp_csum[15:8], h2_l4_len_reg[7:0], h2_l4_len_reg[15:8],
        h2_dport_reg[7:0], h2_dport_reg[15:8], h2_sport_reg[7:0], h2_sport_reg[15:8]};
    if (h2_ov6_reg) begin
        hdr[0 +: 8] = {4'h6, h2_tos_reg[7:4]};
        hdr[8 +: 8] = {h2_tos_reg[3:0], h2_flow_reg[19:16]};
        hdr[16 +: 8] = h2_flow_reg[15:8];
        hdr[24 +: 8] = h2_flow_reg[7:0];
        hdr[32 +: 8] = h2_l4_len_reg[15:8];
        hdr[40 +: 8] = h2_l4_len_reg[7:0];
        hdr[48 +: 8] = h2_proto_reg;
        hdr[56 +: 8] = 8'd64;
        for (hb = 0; hb < 16; hb = hb + 1) begin
            hdr[(8 + hb)*8 +: 8] = h2_src6_reg[(15 - hb)*8 +: 8];
            hdr[(24 + hb)*8 +: 8] = h2_dst_reg[(15 - hb)*8 +: 8];
        end
        hdr[40*8 +: 64] = udp_bytes;
        hsize = h2_gue_reg ? 6'd48 : 6'd40;
    end else begin
        hdr[0 +: 8] = 8'h45;
        hdr[8 +: 8] = h2_tos_reg;
        hdr[16 +: 8] = v4_total_h2[15:8];
        hdr[24 +: 8] = v4_total_h2[7:0];
        hdr[32 +: 8] = h2_id_reg[15:8];
        hdr[40 +: 8] = h2_id_reg[7:0];
        hdr[48 +: 8] = h2_df_reg ? 8'h40 : 8'h00;
        hdr[56 +: 8] = 8'h00;
        hdr[64 +: 8] = 8'd64;
        hdr[72 +: 8] = h2_proto_reg;
        hdr[80 +: 8] = v4_csum[15:8];
        hdr[88 +: 8] = v4_csum[7:0];
        for (hb = 0; hb < 4; hb = hb + 1) begin
            hdr[(12 + hb)*8 +: 8] = h2_src4_reg[(3 - hb)*8 +: 8];
            hdr[(16 + hb)*8 +: 8] = h2_dst_reg[(3 - hb)*8 +: 8];
        end
        hdr[20*8 +: 64] = udp_bytes;
        hsize = h2_gue_reg ? 6'd28 : 6'd20;
    end
end


// Job: kind, punt header, MACs, L2 length, outer family, header size, header, output length.
// pre_len = L2 length + header size, added here so that the edit stage only compares it;
// likewise whether the output fits in one beat (the edit stage's last-beat decision feeds the
// job FIFO's pop, so no compare may sit in front of it).
localparam JW = 5 + 102 + 48 + 48 + 5 + 1 + 6 + 7 + 384 + 1 + 18;
wire [6:0]    pre_len_in = {2'd0, h2_l3off_reg} + {1'd0, hsize};
wire          one_beat_in = h2_out_len_reg <= 18'd64;
wire [JW-1:0] job_in = {h2_kind_reg, h2_punt_reg, h2_be_mac_reg, h2_local_mac_reg, h2_l3off_reg,
    h2_ov6_reg, hsize, pre_len_in, hdr, one_beat_in, h2_out_len_reg};

wire [JW-1:0] job;
wire          job_valid;
wire          job_done;

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(JW),
    .DEPTH(JOB_DEPTH)
) job_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(job_in),
    .s_valid(h2_valid_reg),
    .s_ready(),
    .m_data(job),
    .m_valid(job_valid),
    .m_ready(job_done),
    .count(jobs)
);
/* verilator lint_on PINCONNECTEMPTY */

wire [4:0]   j_kind;
wire [101:0] j_punt;
wire [47:0]  j_be_mac;
wire [47:0]  j_local_mac;
wire [4:0]   j_l3off;
wire         j_ov6;
wire [5:0]   j_hsize;
wire [6:0]   j_pre_len;
wire [383:0] j_hdr;
wire         j_one_beat;   // j_out_len <= 64
wire [17:0]  j_out_len;
assign {j_kind, j_punt, j_be_mac, j_local_mac, j_l3off, j_ov6, j_hsize, j_pre_len, j_hdr,
    j_one_beat, j_out_len} = job;

// ---- the edit state machine ---------------------------------------------------------------

// Output beat number within the frame, the previous input beat (encapsulation), whether the
// frame's last input beat has been taken, and whether the output is complete (draining).
reg [7:0]    n_reg = 8'd0;
reg [DW-1:0] prev_reg = {DW{1'b0}};
reg          in_done_reg = 1'b0;
reg          drain_reg = 1'b0;

wire tx_ready;
wire punt_ready;
wire pass_ready;

// Encapsulation: output bytes 64n + j come from input byte 64n + j - H.
// (The shifts use the middle of the pair.)
/* verilator lint_off UNUSEDSIGNAL */
wire [2*DW-1:0] pair = {in_done_reg ? {DW{1'b0}} : s_frame_data, prev_reg};
/* verilator lint_on UNUSEDSIGNAL */
reg  [DW-1:0]   shifted;
always @* begin
    case (j_hsize)
        6'd20: shifted = pair[(64-20)*8 +: DW];
        6'd28: shifted = pair[(64-28)*8 +: DW];
        6'd40: shifted = pair[(64-40)*8 +: DW];
        default: shifted = pair[(64-48)*8 +: DW];
    endcase
end

// The first 128 output bytes of an encapsulated frame: MACs, the tags, the outer EtherType,
// the headers; pre_len = L2 length + header size.
reg [1023:0] pre;
reg [6:0]    pre_len;
reg [1023:0] hdr_at;
integer      pb;
always @* begin
    case (j_l3off)
        5'd14: hdr_at = {640'd0, j_hdr} << (14*8);
        5'd18: hdr_at = {640'd0, j_hdr} << (18*8);
        default: hdr_at = {640'd0, j_hdr} << (22*8);
    endcase
    pre = hdr_at;
    for (pb = 0; pb < 6; pb = pb + 1) begin
        pre[pb*8 +: 8] = j_be_mac[(5 - pb)*8 +: 8];
        pre[(6 + pb)*8 +: 8] = j_local_mac[(5 - pb)*8 +: 8];
    end
    for (pb = 12; pb < 20; pb = pb + 1) begin
        if (pb + 2 < j_l3off) begin
            pre[pb*8 +: 8] = s_frame_data[pb*8 +: 8];
        end
    end
    // The last EtherType, just before the IP header (a case on the three L2 lengths, like
    // hdr_at, rather than a computed bit index).
    case (j_l3off)
        5'd14: pre[12*8 +: 16] = j_ov6 ? 16'hDD86 : 16'h0008;
        5'd18: pre[16*8 +: 16] = j_ov6 ? 16'hDD86 : 16'h0008;
        default: pre[20*8 +: 16] = j_ov6 ? 16'hDD86 : 16'h0008;
    endcase
    pre_len = j_pre_len;
end

// Bytes from output beat n to the end: the job's output length at beat 0, then kept in a
// register (64 less per beat), so no subtraction sits in front of the keep comparisons; and
// whether they end in this beat (rem <= 64), from the job at beat 0, then from a register
// set with rem_reg, so no compare sits in front of the job FIFO's pop.
// The keep of a beat after the first is set with rem_reg too (rem_keep_reg), and whether the
// beat is the first (n_reg == 0) is a register: the compares in front of the output's keep were
// 13 levels through the skid buffer.
reg  [17:0] rem_reg = 18'd0;
reg         rem_last_reg = 1'b0;
reg  [KW-1:0] rem_keep_reg = {KW{1'b0}};
reg         first_reg = 1'b1;
wire [17:0] rem = first_reg ? j_out_len : rem_reg;
wire        enc_last = first_reg ? j_one_beat : rem_last_reg;
reg  [KW-1:0] enc_keep;
reg  [DW-1:0] enc_data;
integer       eb;
always @* begin
    for (eb = 0; eb < KW; eb = eb + 1) begin
        enc_keep[eb] = first_reg ? {11'd0, eb[6:0]} < j_out_len : rem_keep_reg[eb];
        if (n_reg == 8'd0 && eb < pre_len) begin
            enc_data[eb*8 +: 8] = pre[eb*8 +: 8];
        end else if (n_reg == 8'd1 && 64 + eb < pre_len) begin
            enc_data[eb*8 +: 8] = pre[(64 + eb)*8 +: 8];
        end else begin
            enc_data[eb*8 +: 8] = shifted[eb*8 +: 8];
        end
    end
end

// L2_DSR: the first beat gets the MACs.
reg [DW-1:0] l2_data;
integer      lb;
always @* begin
    l2_data = s_frame_data;
    if (n_reg == 8'd0) begin
        for (lb = 0; lb < 6; lb = lb + 1) begin
            l2_data[lb*8 +: 8] = j_be_mac[(5 - lb)*8 +: 8];
            l2_data[(6 + lb)*8 +: 8] = j_local_mac[(5 - lb)*8 +: 8];
        end
    end
end

reg          tx_valid;
reg [DW-1:0] tx_data;
reg [KW-1:0] tx_keep;
reg          tx_last;
reg          punt_valid;
reg [DW-1:0] punt_data;
reg [KW-1:0] punt_keep;
reg          punt_last;
reg          pass_valid;
reg          pop;
reg          finish;
reg [7:0]    n_next;
reg          in_done_next;
reg          drain_next;

always @* begin
    tx_valid = 1'b0;
    tx_data = l2_data;
    tx_keep = s_frame_keep;
    tx_last = s_frame_last;
    punt_valid = 1'b0;
    punt_data = s_frame_data;
    punt_keep = s_frame_keep;
    punt_last = s_frame_last;
    pass_valid = 1'b0;
    pop = 1'b0;
    finish = 1'b0;
    n_next = n_reg;
    in_done_next = in_done_reg;
    drain_next = drain_reg;

    if (job_valid) begin
        if (drain_reg || j_kind[KI_DROP]) begin
            // Discard the rest of the frame.
            if (s_frame_valid) begin
                pop = 1'b1;
                finish = s_frame_last;
            end
        end else if (j_kind[KI_PASS]) begin
            // Unchanged, beat for beat; n stays 0 (nothing is rewritten).
            if (s_frame_valid && pass_ready) begin
                pass_valid = 1'b1;
                pop = 1'b1;
                finish = s_frame_last;
            end
        end else if (j_kind[KI_L2]) begin
            if (s_frame_valid && tx_ready) begin
                tx_valid = 1'b1;
                pop = 1'b1;
                n_next = n_reg + 1'b1;
                finish = s_frame_last;
            end
        end else if (j_kind[KI_PUNT]) begin
            if (n_reg == 8'd0) begin
                if (punt_ready) begin
                    punt_valid = 1'b1;
                    punt_data = {{(DW-102){1'b0}}, j_punt};
                    punt_keep = {KW{1'b1}};
                    punt_last = 1'b0;
                    n_next = 8'd1;
                end
            end else if (s_frame_valid && punt_ready) begin
                punt_valid = 1'b1;
                punt_last = s_frame_last || n_reg == PUNT_BEATS;
                pop = 1'b1;
                n_next = n_reg + 1'b1;
                finish = s_frame_last;
                drain_next = !s_frame_last && n_reg == PUNT_BEATS;
            end
        end else begin
            // Encapsulation: output beat n takes input beat n while there is one.
            if (tx_ready && (in_done_reg || s_frame_valid)) begin
                tx_valid = 1'b1;
                tx_data = enc_data;
                tx_keep = enc_keep;
                tx_last = enc_last;
                n_next = n_reg + 1'b1;
                if (!in_done_reg) begin
                    pop = 1'b1;
                    in_done_next = s_frame_last;
                end
                if (enc_last) begin
                    if (in_done_reg || s_frame_last) begin
                        finish = 1'b1;
                    end else begin
                        drain_next = 1'b1;
                    end
                end
            end
        end
    end
    if (finish) begin
        n_next = 8'd0;
        in_done_next = 1'b0;
        drain_next = 1'b0;
    end
end

integer kb;
always @(posedge clk) begin
    n_reg <= n_next;
    first_reg <= n_next == 8'd0;
    // n only steps by one (or returns to 0, when rem_reg is not used).
    if (n_next != n_reg) begin
        rem_reg <= rem - 18'd64;
        rem_last_reg <= rem <= 18'd128;
        for (kb = 0; kb < KW; kb = kb + 1) begin
            rem_keep_reg[kb] <= {11'd0, kb[6:0]} + 18'd64 < rem;
        end
    end
    in_done_reg <= in_done_next;
    drain_reg <= drain_next;
    if (pop) begin
        prev_reg <= s_frame_data;
    end
    if (finish) begin
        prev_reg <= {DW{1'b0}};
    end
    if (rst) begin
        n_reg <= 8'd0;
        first_reg <= 1'b1;
        in_done_reg <= 1'b0;
        drain_reg <= 1'b0;
        prev_reg <= {DW{1'b0}};
    end
end

assign s_frame_ready = pop;
assign job_done = finish;
assign frame_done = finish;

// ---- outputs --------------------------------------------------------------------------------

/* verilator lint_off PINCONNECTEMPTY */
nlb_axis_skid #(
    .DATA_WIDTH(DW),
    .USER_WIDTH(1)
) tx_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(tx_data),
    .s_axis_tkeep(tx_keep),
    .s_axis_tvalid(tx_valid),
    .s_axis_tready(tx_ready),
    .s_axis_tlast(tx_last),
    .s_axis_tuser(1'b0),
    .m_axis_tdata(m_axis_tx_tdata),
    .m_axis_tkeep(m_axis_tx_tkeep),
    .m_axis_tvalid(m_axis_tx_tvalid),
    .m_axis_tready(m_axis_tx_tready),
    .m_axis_tlast(m_axis_tx_tlast),
    .m_axis_tuser()
);

nlb_axis_skid #(
    .DATA_WIDTH(DW),
    .USER_WIDTH(1)
) punt_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(punt_data),
    .s_axis_tkeep(punt_keep),
    .s_axis_tvalid(punt_valid),
    .s_axis_tready(punt_ready),
    .s_axis_tlast(punt_last),
    .s_axis_tuser(1'b0),
    .m_axis_tdata(m_axis_punt_tdata),
    .m_axis_tkeep(m_axis_punt_tkeep),
    .m_axis_tvalid(m_axis_punt_tvalid),
    .m_axis_tready(m_axis_punt_tready),
    .m_axis_tlast(m_axis_punt_tlast),
    .m_axis_tuser()
);

nlb_axis_skid #(
    .DATA_WIDTH(DW),
    .USER_WIDTH(1)
) pass_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_frame_data),
    .s_axis_tkeep(s_frame_keep),
    .s_axis_tvalid(pass_valid),
    .s_axis_tready(pass_ready),
    .s_axis_tlast(s_frame_last),
    .s_axis_tuser(1'b0),
    .m_axis_tdata(m_axis_pass_tdata),
    .m_axis_tkeep(m_axis_pass_tkeep),
    .m_axis_tvalid(m_axis_pass_tvalid),
    .m_axis_tready(m_axis_pass_tready),
    .m_axis_tlast(m_axis_pass_tlast),
    .m_axis_tuser()
);
/* verilator lint_on PINCONNECTEMPTY */

endmodule

`resetall
