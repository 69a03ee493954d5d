`resetall
`timescale 1ns / 1ps
`default_nettype none

// The header parser of docs/pipeline.md section 2: watches the received AXI-Stream, keeps the
// first 192 bytes of each frame (the header window) and its length, and emits one header
// descriptor per frame, LATENCY clocks after the frame's last beat (one per clock sustained).
//
// The parser never stalls and never holds data: it observes the beats its user accepts
// (s_axis_tvalid && s_axis_tready, both driven by the user), so the same beats can go into the
// packet FIFO. Frame byte i is tdata[8*i +: 8] of beat i / BEAT_BYTES; tkeep may be partial
// on the last beat only (contiguous from bit 0), as an Ethernet MAC delivers frames.
//
// Checks run in the documented order and the first failing one names the malformed reason
// (m_malformed, m_reason = enum reason). A frame that is neither IPv4 nor IPv6 gets m_not_ip.
// Otherwise the IP fields are valid; ports, TCP flags and the ICMP quote as docs/pipeline.md
// says. Fields of a descriptor whose parse failed are undefined.
//
// Stages (a register at the end of each):
//   0  collect: window beats, byte count; at tlast the window enters the pipeline
//   1  Ethernet: VLAN tags, EtherType; the window is re-based so the IP header is at byte 0
//   2  IP header: length/version checks, fields; IPv4 checksum words summed in groups
//   3-6 IPv6 extension headers, one per stage; IPv4 checksum folded and compared
//   7  layer 4: TCP/UDP ports and flags, ICMP type, the quoted IP header
//   8  the quote's ports; final reason
// The descriptor of a frame is on m_* 9 clocks after the clock edge that took its last beat.
module nlb_parser #(
    // AXI-Stream data width in bits (a divisor of the 1536-bit header window, >= 64).
    parameter DATA_WIDTH = 512,
    // tkeep width (one bit per byte; derived).
    parameter KEEP_WIDTH = DATA_WIDTH / 8,
    // Frame length counter width: frames up to 2^LEN_WIDTH-1 bytes are measured exactly (the
    // counter saturates beyond); 17 bits keep every IP length comparison exact.
    parameter LEN_WIDTH = 17,
    // Sideband width: s_axis_tuser of a frame's first beat comes out on m_user with its
    // descriptor (the pipeline latches the table bank there).
    parameter USER_WIDTH = 1
) (
    input  wire                  clk,
    input  wire                  rst,

    // The received stream, observed where the user accepts beats.
    input  wire [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire                  s_axis_tvalid,
    input  wire                  s_axis_tready,
    input  wire                  s_axis_tlast,
    input  wire [USER_WIDTH-1:0] s_axis_tuser,

    // Header descriptor, one per frame, in frame order.
    output wire                  m_valid,
    output wire [USER_WIDTH-1:0] m_user,         // s_axis_tuser of the frame's first beat
    output wire [LEN_WIDTH-1:0]  m_len,          // frame length L in bytes
    output wire                  m_malformed,    // a check failed: DROP m_reason
    output wire [4:0]            m_reason,       // enum reason (valid with m_malformed)
    output wire                  m_not_ip,       // neither IPv4 nor IPv6: PASS NOT_IP
    output wire                  m_ipv6,         // IP family
    output wire [1:0]            m_vlan_tags,
    output wire [4:0]            m_l3_offset,    // 14, 18 or 22
    output wire [LEN_WIDTH-1:0]  m_l3_end,       // end of the IP packet (padding follows)
    output wire [7:0]            m_l4_offset,    // upper-layer header offset
    output wire [7:0]            m_tos,          // IPv4 TOS / IPv6 traffic class
    output wire                  m_dont_fragment,
    output wire [7:0]            m_protocol,     // upper-layer protocol
    output wire [127:0]          m_src,          // IPv4 mapped to ::ffff:a.b.c.d
    output wire [127:0]          m_dst,
    output wire                  m_fragment,     // more-fragments set or offset != 0
    output wire [15:0]           m_frag_offset,  // in bytes
    output wire [31:0]           m_ip_id,
    output wire                  m_has_ports,
    output wire [15:0]           m_src_port,
    output wire [15:0]           m_dst_port,
    output wire [7:0]            m_tcp_flags,
    output wire                  m_icmp_error,
    output wire                  m_inner_valid,  // the ICMP error's quote is usable
    output wire [7:0]            m_inner_protocol,
    output wire [127:0]          m_inner_src,
    output wire [127:0]          m_inner_dst,
    output wire [15:0]           m_inner_src_port,
    output wire [15:0]           m_inner_dst_port
);

`include "nlb_regmap.vh"

// Bytes of the header window (docs/pipeline.md PARSE_WINDOW).
localparam WINDOW = 192;
localparam WINDOW_BITS = WINDOW * 8;
localparam BEAT_BYTES = DATA_WIDTH / 8;
localparam WINDOW_BEATS = WINDOW_BITS / DATA_WIDTH;
localparam BEAT_IDX_BITS = $clog2(WINDOW_BEATS + 1);
// The re-based window (IP header at byte 0) is padded with zeros to 256 bytes so that every
// variable index stays inside it.
localparam HBYTES = 320;
localparam HBITS = HBYTES * 8;

localparam [15:0] TPID_8021Q = 16'h8100;
localparam [15:0] TPID_8021AD = 16'h88A8;
localparam [15:0] ETHERTYPE_IPV4 = 16'h0800;
localparam [15:0] ETHERTYPE_IPV6 = 16'h86DD;
localparam [7:0] PROTO_ICMP = 8'd1;
localparam [7:0] PROTO_TCP = 8'd6;
localparam [7:0] PROTO_UDP = 8'd17;
localparam [7:0] PROTO_ICMPV6 = 8'd58;
localparam [7:0] PROTO_HOPOPT = 8'd0;
localparam [7:0] PROTO_ROUTING = 8'd43;
localparam [7:0] PROTO_FRAGMENT = 8'd44;
localparam [7:0] PROTO_DSTOPTS = 8'd60;

// Widths of offset arithmetic: offsets plus an extension header length (up to 2048).
localparam OW = 13;
localparam [OW-1:0] WIN_END = WINDOW;
localparam [LEN_WIDTH-1:0] MAX_LEN = {LEN_WIDTH{1'b1}};

initial begin
    if (DATA_WIDTH < 64 || WINDOW_BITS % DATA_WIDTH != 0 || KEEP_WIDTH * 8 != DATA_WIDTH) begin
        $error("nlb_parser: DATA_WIDTH (%0d) must divide %0d and be at least 64", DATA_WIDTH,
            WINDOW_BITS);
        $finish;
    end
    if (LEN_WIDTH < 17 || LEN_WIDTH > 24) begin
        $error("nlb_parser: LEN_WIDTH must be 17..24");
        $finish;
    end
end

// ---- helpers ------------------------------------------------------------------------------

// Byte i of a little-endian byte vector (frame byte 0 in bits 7..0).
`define NLB_BYTE(v, i) v[(i)*8 +: 8]

// Big-endian 16, 32 and 128-bit fields at byte `at` of a byte vector. Macros, not functions:
// a function's vector argument is copied whole at every call in simulation (Verilator copied
// the 2560-bit header once per field, every clock); the logic is the same.
`define NLB_BE16(v, at) {`NLB_BYTE(v, (at)), `NLB_BYTE(v, (at) + 1)}
`define NLB_BE32(v, at) {`NLB_BE16(v, (at)), `NLB_BE16(v, (at) + 2)}
`define NLB_BE128(v, at) {`NLB_BE32(v, (at)), `NLB_BE32(v, (at) + 4), `NLB_BE32(v, (at) + 8), \
    `NLB_BE32(v, (at) + 12)}

function is_tpid(input [15:0] t);
    is_tpid = t == TPID_8021Q || t == TPID_8021AD;
endfunction

function is_ext(input [7:0] nh);
    is_ext = nh == PROTO_HOPOPT || nh == PROTO_ROUTING || nh == PROTO_DSTOPTS
        || nh == PROTO_FRAGMENT;
endfunction

function [LEN_WIDTH-1:0] widen_ow(input [OW-1:0] x);
    widen_ow = {{(LEN_WIDTH-OW){1'b0}}, x};
endfunction

// ---- stage 0: collect the window ---------------------------------------------------------

wire beat = s_axis_tvalid && s_axis_tready;

localparam BB_BITS = $clog2(BEAT_BYTES+1);

reg [WINDOW_BITS-1:0]   win_reg = {WINDOW_BITS{1'b0}};
reg [BEAT_IDX_BITS-1:0] beat_idx_reg = {BEAT_IDX_BITS{1'b0}};
// The frame length is summed one beat late: len_reg holds the bytes of the frame's beats
// before the previous one (saturating), pend_reg the previous beat's, so no add follows the
// count of tkeep in the clock that takes a beat (the count is the deepest logic behind the
// stream's tkeep, which nlb_top selects between two ports in front of it). The last beat's
// count is added in stage 1.
reg [LEN_WIDTH-1:0]     len_reg = {LEN_WIDTH{1'b0}};
reg [BB_BITS-1:0]       pend_reg = {BB_BITS{1'b0}};

// Bytes of this beat, and the beat with its unused bytes zeroed.
reg [BB_BITS-1:0]              beat_bytes;
reg [DATA_WIDTH-1:0]           beat_data;
integer b;
always @* begin
    beat_bytes = 0;
    for (b = 0; b < BEAT_BYTES; b = b + 1) begin
        beat_bytes = beat_bytes + {{($clog2(BEAT_BYTES+1)-1){1'b0}}, s_axis_tkeep[b]};
        beat_data[b*8 +: 8] = s_axis_tkeep[b] ? s_axis_tdata[b*8 +: 8] : 8'h00;
    end
end

// Bytes of the frame's beats before this one (saturating).
wire [LEN_WIDTH:0] len_sum = {1'b0, len_reg} + {{(LEN_WIDTH+1-BB_BITS){1'b0}}, pend_reg};
wire [LEN_WIDTH-1:0] len_now = len_sum[LEN_WIDTH] ? MAX_LEN : len_sum[LEN_WIDTH-1:0];

// The window with this beat merged in (beats past the window are not kept).
reg [WINDOW_BITS-1:0] win_now;
integer wb;
always @* begin
    win_now = win_reg;
    for (wb = 0; wb < WINDOW_BEATS; wb = wb + 1) begin
        if (beat_idx_reg == wb[BEAT_IDX_BITS-1:0]) begin
            win_now[wb*DATA_WIDTH +: DATA_WIDTH] = beat_data;
        end
    end
end

// The first beat's sideband (beat_idx_reg is 0 exactly on a frame's first beat).
reg  [USER_WIDTH-1:0] user_reg = {USER_WIDTH{1'b0}};
wire [USER_WIDTH-1:0] user_now = beat_idx_reg == {BEAT_IDX_BITS{1'b0}} ? s_axis_tuser : user_reg;

reg                   s1_valid_reg = 1'b0;
reg [WINDOW_BITS-1:0] s1_win_reg = {WINDOW_BITS{1'b0}};
// The sideband travels beside the stages (none of them stalls): 8 more registers after s1.
localparam USER_STAGES = 8;
reg [USER_WIDTH-1:0]  s1_user_reg = {USER_WIDTH{1'b0}};
reg [USER_STAGES*USER_WIDTH-1:0] user_pipe_reg = {USER_STAGES*USER_WIDTH{1'b0}};
// The frame length in two parts: the beats before the last (saturating) and the last one.
reg [LEN_WIDTH-1:0]   s1_len_base_reg = {LEN_WIDTH{1'b0}};
reg                   s1_base_small_reg = 1'b0;   // s1_len_base_reg < 32
reg [BB_BITS-1:0]     s1_last_bytes_reg = {BB_BITS{1'b0}};

always @(posedge clk) begin
    s1_valid_reg <= beat && s_axis_tlast;
    user_pipe_reg <= {user_pipe_reg[(USER_STAGES-1)*USER_WIDTH-1:0], s1_user_reg};
    if (beat) begin
        user_reg <= user_now;
        if (s_axis_tlast) begin
            s1_user_reg <= user_now;
            s1_win_reg <= win_now;
            s1_len_base_reg <= len_now;
            s1_base_small_reg <= len_now < 32;
            s1_last_bytes_reg <= beat_bytes;
            // The next frame starts with an empty window (bytes past L read as zero).
            win_reg <= {WINDOW_BITS{1'b0}};
            beat_idx_reg <= {BEAT_IDX_BITS{1'b0}};
            len_reg <= {LEN_WIDTH{1'b0}};
            pend_reg <= {BB_BITS{1'b0}};
        end else begin
            win_reg <= win_now;
            if (beat_idx_reg != WINDOW_BEATS[BEAT_IDX_BITS-1:0]) begin
                beat_idx_reg <= beat_idx_reg + 1'b1;
            end
            len_reg <= len_now;
            pend_reg <= beat_bytes;
        end
    end
    if (rst) begin
        s1_valid_reg <= 1'b0;
        win_reg <= {WINDOW_BITS{1'b0}};
        beat_idx_reg <= {BEAT_IDX_BITS{1'b0}};
        len_reg <= {LEN_WIDTH{1'b0}};
        pend_reg <= {BB_BITS{1'b0}};
    end
end

// ---- stage 1: Ethernet and VLAN tags -----------------------------------------------------

// The frame length L (saturating), registered for stage 2; the checks here compare L with
// 14, 18 and 22, for which only a base below 32 matters, so they need no 17-bit add.
localparam LOW_BITS = (BB_BITS > 5 ? BB_BITS : 5) + 1;
wire [LEN_WIDTH:0]   s1_len_sum = {1'b0, s1_len_base_reg}
    + {{(LEN_WIDTH+1-BB_BITS){1'b0}}, s1_last_bytes_reg};
wire [LEN_WIDTH-1:0] s1_len = s1_len_sum[LEN_WIDTH] ? MAX_LEN : s1_len_sum[LEN_WIDTH-1:0];
wire [LOW_BITS-1:0]  s1_len_low = {{(LOW_BITS-5){1'b0}}, s1_len_base_reg[4:0]}
    + {{(LOW_BITS-BB_BITS){1'b0}}, s1_last_bytes_reg};
wire                 len_below14 = s1_base_small_reg && s1_len_low < 14;
wire                 len_below18 = s1_base_small_reg && s1_len_low < 18;
wire                 len_below22 = s1_base_small_reg && s1_len_low < 22;

wire [15:0] et12 = {`NLB_BYTE(s1_win_reg, 12), `NLB_BYTE(s1_win_reg, 13)};
wire [15:0] et16 = {`NLB_BYTE(s1_win_reg, 16), `NLB_BYTE(s1_win_reg, 17)};
wire [15:0] et20 = {`NLB_BYTE(s1_win_reg, 20), `NLB_BYTE(s1_win_reg, 21)};

reg        l2_bad;
reg [4:0]  l2_reason;
reg [15:0] ethertype;
reg [1:0]  tags;
always @* begin
    l2_bad = 1'b0;
    l2_reason = NLB_REASON_RUNT;
    ethertype = et12;
    tags = 2'd0;
    if (len_below14) begin
        l2_bad = 1'b1;
        l2_reason = NLB_REASON_RUNT;
    end else if (is_tpid(et12)) begin
        if (len_below18) begin
            l2_bad = 1'b1;
            l2_reason = NLB_REASON_TRUNCATED_L2;
        end else if (is_tpid(et16)) begin
            if (len_below22) begin
                l2_bad = 1'b1;
                l2_reason = NLB_REASON_TRUNCATED_L2;
            end else if (is_tpid(et20)) begin
                l2_bad = 1'b1;
                l2_reason = NLB_REASON_TOO_MANY_VLANS;
            end else begin
                ethertype = et20;
                tags = 2'd2;
            end
        end else begin
            ethertype = et16;
            tags = 2'd1;
        end
    end
end

// The window re-based at the IP header (byte 0 = first IP byte), zero-padded.
wire [HBITS-1:0] win_padded = {{(HBITS-WINDOW_BITS){1'b0}}, s1_win_reg};
reg  [HBITS-1:0] rebased;
always @* begin
    case (tags)
        2'd0: rebased = win_padded >> (14*8);
        2'd1: rebased = win_padded >> (18*8);
        default: rebased = win_padded >> (22*8);
    endcase
end

reg                 s2_valid_reg = 1'b0;
reg [LEN_WIDTH-1:0] s2_len_reg = {LEN_WIDTH{1'b0}};
reg                 s2_bad_reg = 1'b0;
reg [4:0]           s2_reason_reg = 5'd0;
reg                 s2_not_ip_reg = 1'b0;
reg                 s2_v6_reg = 1'b0;
reg [1:0]           s2_tags_reg = 2'd0;
reg [HBITS-1:0]     s2_h_reg = {HBITS{1'b0}};
// Which 32-bit words of an IPv4 header are inside its IHL (word w when w < IHL), decided a
// stage ahead so that stage 2's checksum adds start from registers (13 levels in nlb_top).
reg [14:0]          s2_v4_word_in_reg = 15'd0;
reg [14:0]          v4_word_in;
integer             wi;
always @* begin
    for (wi = 0; wi < 15; wi = wi + 1) begin
        v4_word_in[wi] = wi < rebased[3:0];
    end
end

always @(posedge clk) begin
    s2_valid_reg <= s1_valid_reg;
    s2_len_reg <= s1_len;
    s2_bad_reg <= l2_bad;
    s2_reason_reg <= l2_reason;
    s2_not_ip_reg <= !l2_bad && ethertype != ETHERTYPE_IPV4 && ethertype != ETHERTYPE_IPV6;
    s2_v6_reg <= ethertype == ETHERTYPE_IPV6;
    s2_tags_reg <= tags;
    s2_h_reg <= rebased;
    s2_v4_word_in_reg <= v4_word_in;
    if (rst) begin
        s2_valid_reg <= 1'b0;
    end
end

// ---- stage 2: the IP header ----------------------------------------------------------------

wire [4:0] ip_off = s2_tags_reg == 2'd0 ? 5'd14 : s2_tags_reg == 2'd1 ? 5'd18 : 5'd22;
wire [LEN_WIDTH-1:0] ip_off_l = {{(LEN_WIDTH-5){1'b0}}, ip_off};
wire [3:0]  ip_ver = s2_h_reg[7:4];
wire [3:0]  ihl = s2_h_reg[3:0];
wire [5:0]  hl = {ihl, 2'b00};
wire [15:0] v4_total = `NLB_BE16(s2_h_reg, 2);
wire [15:0] v6_plen = `NLB_BE16(s2_h_reg, 4);
wire [LEN_WIDTH-1:0] v4_l3_end = ip_off_l + {{(LEN_WIDTH-16){1'b0}}, v4_total};
wire [LEN_WIDTH-1:0] v6_l3_end = ip_off_l + 40 + {{(LEN_WIDTH-16){1'b0}}, v6_plen};

// The length checks compare L with the IP offset plus a header field. Each is computed for the
// three IP offsets at once as the sign of one difference (a multi-operand add: one carry
// chain, not an add and then a compare) and selected by the tag count. No sum wraps: the
// offsets and fields are at most 22 + 40 + 65535 < 2^17.
localparam DW_ = LEN_WIDTH + 2;
function below(input [LEN_WIDTH-1:0] len, input [15:0] field, input [6:0] k);
    reg [DW_-1:0] d;
    begin
        // len < k + field
        d = {2'b00, len} - {{(DW_-16){1'b0}}, field} - {{(DW_-7){1'b0}}, k};
        below = d[DW_-1];
    end
endfunction
function by_tags(input [1:0] t, input a14, input a18, input a22);
    by_tags = t == 2'd0 ? a14 : t == 2'd1 ? a18 : a22;
endfunction
wire short_v4 = by_tags(s2_tags_reg, s2_len_reg < 34, s2_len_reg < 38, s2_len_reg < 42);
wire short_v6 = by_tags(s2_tags_reg, s2_len_reg < 54, s2_len_reg < 58, s2_len_reg < 62);
wire short_hl = by_tags(s2_tags_reg, below(s2_len_reg, {10'd0, hl}, 7'd14),
    below(s2_len_reg, {10'd0, hl}, 7'd18), below(s2_len_reg, {10'd0, hl}, 7'd22));
wire long_v4 = by_tags(s2_tags_reg, below(s2_len_reg, v4_total, 7'd14),
    below(s2_len_reg, v4_total, 7'd18), below(s2_len_reg, v4_total, 7'd22));
wire long_v6 = by_tags(s2_tags_reg, below(s2_len_reg, v6_plen, 7'd54),
    below(s2_len_reg, v6_plen, 7'd58), below(s2_len_reg, v6_plen, 7'd62));

// The IP header's checks, each a flag, in the order they are reported (the first that fails
// gives the reason): IP_CHK_SHORT (L < ip + 20, IPv6 ip + 40), IP_CHK_VERSION, IP_CHK_IHL
// (IPv4 IHL < 5), IP_CHK_SHORT_HL (L < ip + 4 * IHL), IP_CHK_LENGTH (l3_end > L, or an IPv4
// total length below its header). Stage 2 registers the flags and whether any is set; stage 3
// turns them into the reason: the priority of the checks after the length differences made
// the whole pipeline's longest path (13 levels in nlb_top).
localparam IP_CHK_SHORT = 0;
localparam IP_CHK_VERSION = 1;
localparam IP_CHK_IHL = 2;
localparam IP_CHK_SHORT_HL = 3;
localparam IP_CHK_LENGTH = 4;
wire [4:0] v4_checks = {v4_total < {10'd0, hl} || long_v4, short_hl, ihl < 4'd5,
    ip_ver != 4'd4, short_v4};
wire [4:0] v6_checks = {long_v6, 1'b0, 1'b0, ip_ver != 4'd6, short_v6};
wire [4:0] ip_checks = s2_v6_reg ? v6_checks : v4_checks;
wire       ip_bad = |ip_checks;

// The reason of the first check that fails (TRUNCATED_L3 when none does: not looked at then).
function [4:0] ip_reason_of(input [4:0] checks);
    begin
        if (checks[IP_CHK_SHORT]) begin
            ip_reason_of = NLB_REASON_TRUNCATED_L3;
        end else if (checks[IP_CHK_VERSION]) begin
            ip_reason_of = NLB_REASON_BAD_IP_VERSION;
        end else if (checks[IP_CHK_IHL]) begin
            ip_reason_of = NLB_REASON_BAD_IHL;
        end else if (checks[IP_CHK_SHORT_HL]) begin
            ip_reason_of = NLB_REASON_TRUNCATED_L3;
        end else if (checks[IP_CHK_LENGTH]) begin
            ip_reason_of = NLB_REASON_BAD_IP_LENGTH;
        end else begin
            ip_reason_of = NLB_REASON_TRUNCATED_L3;
        end
    end
endfunction

// IPv4 header checksum, part 1: the 32-bit words of the header (IHL of 15) in five groups
// of three, each the sum of its six 16-bit halves (words past IHL count as zero).
// The halves are masked first and each group is one six-operand add (one carry-save tree and
// one carry chain, not an add per word).
reg [18:0] csum_part [0:4];
reg [15:0] csum_half [0:29];
integer cg, cw;
always @* begin
    for (cw = 0; cw < 15; cw = cw + 1) begin
        csum_half[2*cw] = s2_v4_word_in_reg[cw] ? `NLB_BE16(s2_h_reg, 4*cw) : 16'd0;
        csum_half[2*cw + 1] = s2_v4_word_in_reg[cw] ? `NLB_BE16(s2_h_reg, 4*cw + 2) : 16'd0;
    end
    for (cg = 0; cg < 5; cg = cg + 1) begin
        csum_part[cg] = {3'd0, csum_half[6*cg]} + {3'd0, csum_half[6*cg + 1]}
            + {3'd0, csum_half[6*cg + 2]} + {3'd0, csum_half[6*cg + 3]}
            + {3'd0, csum_half[6*cg + 4]} + {3'd0, csum_half[6*cg + 5]};
    end
end

// Flags and fragment offset (bit 15 is reserved and not looked at).
/* verilator lint_off UNUSEDSIGNAL */
wire [15:0] v4_frag = `NLB_BE16(s2_h_reg, 6);
/* verilator lint_on UNUSEDSIGNAL */

// Window bytes after the fixed IPv6 header (only whole 8-byte blocks are used).
localparam [7:0] WIN_AFTER_V6 = WINDOW - 40;
/* verilator lint_off UNUSEDSIGNAL */
wire [7:0] win_left = WIN_AFTER_V6 - {3'd0, ip_off};
/* verilator lint_on UNUSEDSIGNAL */

// Stage-2 outputs, common to both families (IPv4 fields or IPv6 fields).
reg                 s3_valid_reg = 1'b0;
reg [LEN_WIDTH-1:0] s3_len_reg = {LEN_WIDTH{1'b0}};
reg                 s3_bad_reg = 1'b0;
// The L2 reason when L2 failed (s3_l2_bad_reg), else the IP checks' flags give it.
reg                 s3_l2_bad_reg = 1'b0;
reg [4:0]           s3_l2_reason_reg = 5'd0;
reg [4:0]           s3_ip_checks_reg = 5'd0;
wire [4:0]          s3_reason = s3_l2_bad_reg ? s3_l2_reason_reg : ip_reason_of(s3_ip_checks_reg);
reg                 s3_not_ip_reg = 1'b0;
reg                 s3_v6_reg = 1'b0;
reg [1:0]           s3_tags_reg = 2'd0;
reg [4:0]           s3_ip_off_reg = 5'd0;
reg [HBITS-1:0]     s3_h_reg = {HBITS{1'b0}};
reg [LEN_WIDTH-1:0] s3_l3_end_reg = {LEN_WIDTH{1'b0}};
reg [7:0]           s3_tos_reg = 8'd0;
reg                 s3_df_reg = 1'b0;
reg [127:0]         s3_src_reg = 128'd0;
reg [127:0]         s3_dst_reg = 128'd0;
reg [5:0]           s3_hl_reg = 6'd0;
reg [7:0]           s3_v4_proto_reg = 8'd0;
reg                 s3_v4_frag_reg = 1'b0;
reg [15:0]          s3_v4_foff_reg = 16'd0;
reg [15:0]          s3_v4_id_reg = 16'd0;
reg [18:0]          s3_csum_reg [0:4];
// IPv6 extension chain state: next header, absolute offset p, headers read, stopped.
reg [7:0]           s3_nh_reg = 8'd0;
reg [OW-1:0]        s3_p_reg = {OW{1'b0}};
// The same state in 8-byte units left before the end of the IPv6 payload and of the window
// (rounded down), so a stage compares the header length field with them directly.
reg [12:0]          s3_room8_reg = 13'd0;
reg [4:0]           s3_win8_reg = 5'd0;

integer ci;
initial begin
    for (ci = 0; ci < 5; ci = ci + 1) begin
        s3_csum_reg[ci] = 19'd0;
    end
end

always @(posedge clk) begin
    s3_valid_reg <= s2_valid_reg;
    s3_len_reg <= s2_len_reg;
    s3_bad_reg <= s2_bad_reg || (!s2_not_ip_reg && ip_bad);
    s3_l2_bad_reg <= s2_bad_reg;
    s3_l2_reason_reg <= s2_reason_reg;
    s3_ip_checks_reg <= ip_checks;
    s3_not_ip_reg <= !s2_bad_reg && s2_not_ip_reg;
    s3_v6_reg <= s2_v6_reg;
    s3_tags_reg <= s2_tags_reg;
    s3_ip_off_reg <= ip_off;
    s3_h_reg <= s2_h_reg;
    s3_l3_end_reg <= s2_v6_reg ? v6_l3_end : v4_l3_end;
    s3_tos_reg <= s2_v6_reg ? {s2_h_reg[3:0], s2_h_reg[15:12]} : s2_h_reg[15:8];
    s3_df_reg <= s2_v6_reg ? 1'b1 : v4_frag[14];
    s3_src_reg <= s2_v6_reg ? `NLB_BE128(s2_h_reg, 8) : {80'd0, 16'hFFFF, `NLB_BE32(s2_h_reg, 12)};
    s3_dst_reg <= s2_v6_reg ? `NLB_BE128(s2_h_reg, 24) : {80'd0, 16'hFFFF, `NLB_BE32(s2_h_reg, 16)};
    s3_hl_reg <= hl;
    s3_v4_proto_reg <= `NLB_BYTE(s2_h_reg, 9);
    s3_v4_frag_reg <= v4_frag[13] || v4_frag[12:0] != 13'd0;
    s3_v4_foff_reg <= {v4_frag[12:0], 3'b000};
    s3_v4_id_reg <= `NLB_BE16(s2_h_reg, 4);
    for (ci = 0; ci < 5; ci = ci + 1) begin
        s3_csum_reg[ci] <= csum_part[ci];
    end
    s3_nh_reg <= `NLB_BYTE(s2_h_reg, 6);
    s3_p_reg <= {{(OW-5){1'b0}}, ip_off} + 40;
    s3_room8_reg <= v6_plen[15:3];
    s3_win8_reg <= win_left[7:3];
    if (rst) begin
        s3_valid_reg <= 1'b0;
    end
end

// ---- stages 3-6: IPv6 extension headers (one per stage), IPv4 checksum --------------------
// Stage i (0-based) reads the chain state c_*[i] (i = 0: the stage-2 registers, else the
// registers r_*[i]) and computes n_*[i], registered into r_*[i+1]. Fields the chain does not
// touch travel in one packed vector.

localparam EXT_STAGES = 4;
localparam PW = LEN_WIDTH + 1 + 1 + 2 + 5 + HBITS + LEN_WIDTH + 8 + 1 + 128 + 128 + 6 + 8 + 1
    + 16 + 16;

wire [PW-1:0] pass_in = {s3_len_reg, s3_not_ip_reg, s3_v6_reg, s3_tags_reg, s3_ip_off_reg,
    s3_h_reg, s3_l3_end_reg, s3_tos_reg, s3_df_reg, s3_src_reg, s3_dst_reg, s3_hl_reg,
    s3_v4_proto_reg, s3_v4_frag_reg, s3_v4_foff_reg, s3_v4_id_reg};

// Registers after stage i-1 (index 1..EXT_STAGES).
// The pass vectors after stages 0..EXT_STAGES-2, and after the last stage in a plain register:
// stage 7 selects many fields of it, and a simulator copies a whole array element for every
// field selected from it (Verilator did, 2915 bits per field, every clock).
reg [PW-1:0]  r_pass [1:EXT_STAGES-1];
reg [PW-1:0]  r_pass_last = {PW{1'b0}};
reg           r_valid [1:EXT_STAGES];
reg           r_bad [1:EXT_STAGES];
reg [4:0]     r_reason [1:EXT_STAGES];
reg [7:0]     r_nh [1:EXT_STAGES];
reg [OW-1:0]  r_p [1:EXT_STAGES];
reg           r_stop [1:EXT_STAGES];      // the chain ended after a later fragment's header
reg           r_frag [1:EXT_STAGES];
reg [15:0]    r_foff [1:EXT_STAGES];
reg [31:0]    r_id [1:EXT_STAGES];
reg [4:0]     r_m [1:EXT_STAGES];         // 8-byte blocks read after the fixed header
reg [12:0]    r_room8 [1:EXT_STAGES];     // 8-byte blocks left in the payload (rounded down)
reg [4:0]     r_win8 [1:EXT_STAGES];      // 8-byte blocks left in the window (rounded down)
reg [21:0]    r_csum [1:EXT_STAGES];      // IPv4 checksum: one add or fold per stage
reg [19:0]    r_csum_b [1:EXT_STAGES];    // its second addend in stage 4
reg           r_csum_ok [1:EXT_STAGES];   // compared in stage 6

// Bounds stage 7 compares the upper-layer offset with, computed in stage 3 from registers and
// carried beside the chain (stage 7 then needs no add in front of a compare): the IPv4
// upper-layer offset, min(l3_end, 192), and l3_end - K for the byte counts K stage 7 checks
// (LEN_WIDTH + 1 bits, two's complement: the top bit is set when l3_end < K).
localparam SW = OW + OW + 4 * (LEN_WIDTH + 1);
wire [OW-1:0]        sd_v4_l4_in = {{(OW-5){1'b0}}, s3_ip_off_reg} + {{(OW-6){1'b0}}, s3_hl_reg};
wire [OW-1:0]        sd_limit_in = s3_l3_end_reg < widen_ow(WIN_END) ? s3_l3_end_reg[OW-1:0]
    : WIN_END;
wire [LEN_WIDTH:0]   sd_end_m8_in = {1'b0, s3_l3_end_reg} - 8;
wire [LEN_WIDTH:0]   sd_end_m20_in = {1'b0, s3_l3_end_reg} - 20;
wire [LEN_WIDTH:0]   sd_end_m28_in = {1'b0, s3_l3_end_reg} - 28;
wire [LEN_WIDTH:0]   sd_end_m48_in = {1'b0, s3_l3_end_reg} - 48;
reg  [SW-1:0]        r_side [1:EXT_STAGES];

// Inputs of stage i.
reg [PW-1:0]  c_pass [0:EXT_STAGES];
reg           c_valid [0:EXT_STAGES];
reg           c_bad [0:EXT_STAGES];
reg [4:0]     c_reason [0:EXT_STAGES];
reg [7:0]     c_nh [0:EXT_STAGES];
reg [OW-1:0]  c_p [0:EXT_STAGES];
reg           c_stop [0:EXT_STAGES];
reg           c_frag [0:EXT_STAGES];
reg [15:0]    c_foff [0:EXT_STAGES];
reg [31:0]    c_id [0:EXT_STAGES];
reg [4:0]     c_m [0:EXT_STAGES];
reg [12:0]    c_room8 [0:EXT_STAGES];
reg [4:0]     c_win8 [0:EXT_STAGES];
reg [21:0]    c_csum [0:EXT_STAGES];
reg [19:0]    c_csum_b [0:EXT_STAGES];
reg           c_csum_ok [0:EXT_STAGES];

// Outputs of stage i.
reg           n_bad [0:EXT_STAGES-1];
reg [4:0]     n_reason [0:EXT_STAGES-1];
reg [7:0]     n_nh [0:EXT_STAGES-1];
reg [OW-1:0]  n_p [0:EXT_STAGES-1];
reg           n_stop [0:EXT_STAGES-1];
reg           n_frag [0:EXT_STAGES-1];
reg [15:0]    n_foff [0:EXT_STAGES-1];
reg [31:0]    n_id [0:EXT_STAGES-1];
reg [4:0]     n_m [0:EXT_STAGES-1];
reg [12:0]    n_room8 [0:EXT_STAGES-1];
reg [4:0]     n_win8 [0:EXT_STAGES-1];
reg [21:0]    n_csum [0:EXT_STAGES-1];
reg [19:0]    n_csum_b [0:EXT_STAGES-1];
reg           n_csum_ok [0:EXT_STAGES-1];

integer xi;
initial begin
    for (xi = 1; xi < EXT_STAGES; xi = xi + 1) begin
        r_pass[xi] = {PW{1'b0}};
    end
    for (xi = 1; xi <= EXT_STAGES; xi = xi + 1) begin
        r_side[xi] = {SW{1'b0}};
        r_valid[xi] = 1'b0;
        r_bad[xi] = 1'b0;
        r_reason[xi] = 5'd0;
        r_nh[xi] = 8'd0;
        r_p[xi] = {OW{1'b0}};
        r_stop[xi] = 1'b0;
        r_frag[xi] = 1'b0;
        r_foff[xi] = 16'd0;
        r_id[xi] = 32'd0;
        r_m[xi] = 5'd0;
        r_room8[xi] = 13'd0;
        r_win8[xi] = 5'd0;
        r_csum[xi] = 22'd0;
        r_csum_b[xi] = 20'd0;
        r_csum_ok[xi] = 1'b0;
    end
end

// Fields of the packed pass vector the chain reads (LSB positions).
localparam P_L3_END = 8 + 1 + 128 + 128 + 6 + 8 + 1 + 16 + 16;
localparam P_H = P_L3_END + LEN_WIDTH;
localparam P_IP_OFF = P_H + HBITS;
localparam P_V6 = P_IP_OFF + 5 + 2;
localparam P_NOT_IP = P_V6 + 1;

// Per-stage temporaries. x_pass: the stage's pass vector (read once: see xo_pass); x_after:
// its header window after the 40-byte fixed IPv6 header.
reg [PW-1:0]    x_pass;
reg [HBITS-321:0] x_after;
reg [63:0]      x_blk;
// Fragment header word: offset and M flag (the two reserved bits are not looked at).
/* verilator lint_off UNUSEDSIGNAL */
reg [15:0]      x_fragw;
/* verilator lint_on UNUSEDSIGNAL */
// The header's length in 8-byte blocks minus one (0 for a fragment header).
reg [7:0]       x_hlen8;
reg             x_active;
reg             x_is_frag_hdr;
// Its first 8 bytes, then all of it, would pass the window's end / the payload's end:
// p + 8 > end when fewer than 8 bytes are left, p + 8 * (hlen8 + 1) > end when hlen8 is at
// least the whole blocks left (both are kept per stage, so no offset is added and compared).
reg             x_first_past_win;
reg             x_first_past_end;
reg             x_all_past_win;
reg             x_all_past_end;
reg             x_takes;
reg [16:0]      x_fold1;
integer         xs;

always @* begin
    c_pass[0] = pass_in;
    c_valid[0] = s3_valid_reg;
    c_bad[0] = s3_bad_reg;
    c_reason[0] = s3_reason;
    c_nh[0] = s3_nh_reg;
    c_p[0] = s3_p_reg;
    c_m[0] = 5'd0;
    c_room8[0] = s3_room8_reg;
    c_win8[0] = s3_win8_reg;
    c_stop[0] = 1'b0;
    c_frag[0] = 1'b0;
    c_foff[0] = 16'd0;
    c_id[0] = 32'd0;
    c_csum[0] = 22'd0;
    c_csum_b[0] = 20'd0;
    c_csum_ok[0] = 1'b0;
    for (xs = 1; xs < EXT_STAGES; xs = xs + 1) begin
        c_pass[xs] = r_pass[xs];
    end
    c_pass[EXT_STAGES] = r_pass_last;
    for (xs = 1; xs <= EXT_STAGES; xs = xs + 1) begin
        c_valid[xs] = r_valid[xs];
        c_bad[xs] = r_bad[xs];
        c_reason[xs] = r_reason[xs];
        c_nh[xs] = r_nh[xs];
        c_p[xs] = r_p[xs];
        c_m[xs] = r_m[xs];
        c_room8[xs] = r_room8[xs];
        c_win8[xs] = r_win8[xs];
        c_stop[xs] = r_stop[xs];
        c_frag[xs] = r_frag[xs];
        c_foff[xs] = r_foff[xs];
        c_id[xs] = r_id[xs];
        c_csum[xs] = r_csum[xs];
        c_csum_b[xs] = r_csum_b[xs];
        c_csum_ok[xs] = r_csum_ok[xs];
    end

    for (xs = 0; xs < EXT_STAGES; xs = xs + 1) begin
        // The extension header at p = ip + 40 + 8m: block m of 8 bytes after the fixed
        // header. m stays below 18 while the chain is inside the window.
        // (The fixed header's 40 bytes are cut off first, so the block index needs no add.)
        x_pass = c_pass[xs];
        x_after = x_pass[P_H + 320 +: HBITS - 320];
        x_blk = x_after[c_m[xs] * 64 +: 64];
        x_fragw = {x_blk[23:16], x_blk[31:24]};
        x_is_frag_hdr = c_nh[xs] == PROTO_FRAGMENT;
        x_hlen8 = x_is_frag_hdr ? 8'd0 : x_blk[15:8];
        x_active = x_pass[P_V6] && !x_pass[P_NOT_IP] && !c_bad[xs]
            && !c_stop[xs] && is_ext(c_nh[xs]);
        x_first_past_win = c_win8[xs] == 5'd0;
        x_first_past_end = c_room8[xs] == 13'd0;
        x_all_past_win = x_hlen8 >= {3'd0, c_win8[xs]};
        x_all_past_end = {5'd0, x_hlen8} >= c_room8[xs];
        x_takes = x_active && !x_first_past_win && !x_first_past_end && !x_all_past_win
            && !x_all_past_end;

        n_bad[xs] = c_bad[xs];
        n_reason[xs] = c_reason[xs];
        if (x_active) begin
            if (x_first_past_win) begin
                n_bad[xs] = 1'b1;
                n_reason[xs] = NLB_REASON_EXT_CHAIN_TOO_LONG;
            end else if (x_first_past_end) begin
                n_bad[xs] = 1'b1;
                n_reason[xs] = NLB_REASON_BAD_IP_LENGTH;
            end else if (x_all_past_win) begin
                n_bad[xs] = 1'b1;
                n_reason[xs] = NLB_REASON_EXT_CHAIN_TOO_LONG;
            end else if (x_all_past_end) begin
                n_bad[xs] = 1'b1;
                n_reason[xs] = NLB_REASON_BAD_IP_LENGTH;
            end
        end

        n_nh[xs] = x_takes ? x_blk[7:0] : c_nh[xs];
        n_p[xs] = x_takes ? c_p[xs] + {{(OW-11){1'b0}}, x_hlen8, 3'b000} + 8 : c_p[xs];
        n_m[xs] = x_takes ? c_m[xs] + x_hlen8[4:0] + 5'd1 : c_m[xs];
        n_room8[xs] = x_takes ? c_room8[xs] - {5'd0, x_hlen8} - 13'd1 : c_room8[xs];
        n_win8[xs] = x_takes ? c_win8[xs] - x_hlen8[4:0] - 5'd1 : c_win8[xs];

        // A fragment header is 8 bytes, so whether it is taken does not depend on the block
        // read (written out so that synthesis sees it).
        n_stop[xs] = c_stop[xs];
        n_frag[xs] = c_frag[xs];
        n_foff[xs] = c_foff[xs];
        n_id[xs] = c_id[xs];
        if (x_active && x_is_frag_hdr && !x_first_past_win && !x_first_past_end) begin
            // A later fragment header overwrites an earlier one; after one with a non-zero
            // offset the rest is payload.
            n_frag[xs] = x_fragw[15:3] != 13'd0 || x_fragw[0];
            n_foff[xs] = {x_fragw[15:3], 3'b000};
            n_id[xs] = {x_blk[39:32], x_blk[47:40], x_blk[55:48], x_blk[63:56]};
            n_stop[xs] = x_fragw[15:3] != 13'd0;
        end

        // IPv4 checksum, one step per stage: the five group sums in two parts, their sum,
        // the first fold, then the comparison (the second fold's carry is only the end
        // around carry, so the folded sum is 0xFFFF exactly when the first fold is 0xFFFF,
        // or 0x1FFFE).
        x_fold1 = {1'b0, c_csum[xs][15:0]} + {11'd0, c_csum[xs][21:16]};
        n_csum[xs] = c_csum[xs];
        n_csum_b[xs] = c_csum_b[xs];
        n_csum_ok[xs] = c_csum_ok[xs];
        if (xs == 0) begin
            n_csum[xs] = {3'd0, s3_csum_reg[0]} + {3'd0, s3_csum_reg[1]}
                + {3'd0, s3_csum_reg[2]};
            n_csum_b[xs] = {1'b0, s3_csum_reg[3]} + {1'b0, s3_csum_reg[4]};
        end else if (xs == 1) begin
            n_csum[xs] = c_csum[xs] + {2'd0, c_csum_b[xs]};
        end else if (xs == 2) begin
            n_csum[xs] = {5'd0, x_fold1};
        end else if (xs == 3) begin
            n_csum_ok[xs] = c_csum[xs][16] ? c_csum[xs][15:0] == 16'hFFFE
                : c_csum[xs][15:0] == 16'hFFFF;
        end
    end
end

always @(posedge clk) begin
    r_side[1] <= {sd_v4_l4_in, sd_limit_in, sd_end_m8_in, sd_end_m20_in, sd_end_m28_in,
        sd_end_m48_in};
    for (xi = 1; xi < EXT_STAGES; xi = xi + 1) begin
        r_side[xi+1] <= r_side[xi];
    end
    for (xi = 0; xi < EXT_STAGES - 1; xi = xi + 1) begin
        r_pass[xi+1] <= c_pass[xi];
    end
    r_pass_last <= c_pass[EXT_STAGES-1];
    for (xi = 0; xi < EXT_STAGES; xi = xi + 1) begin
        r_valid[xi+1] <= c_valid[xi];
        r_bad[xi+1] <= n_bad[xi];
        r_reason[xi+1] <= n_reason[xi];
        r_nh[xi+1] <= n_nh[xi];
        r_p[xi+1] <= n_p[xi];
        r_m[xi+1] <= n_m[xi];
        r_room8[xi+1] <= n_room8[xi];
        r_win8[xi+1] <= n_win8[xi];
        r_stop[xi+1] <= n_stop[xi];
        r_frag[xi+1] <= n_frag[xi];
        r_foff[xi+1] <= n_foff[xi];
        r_id[xi+1] <= n_id[xi];
        r_csum[xi+1] <= n_csum[xi];
        r_csum_b[xi+1] <= n_csum_b[xi];
        r_csum_ok[xi+1] <= n_csum_ok[xi];
    end
    if (rst) begin
        for (xi = 1; xi <= EXT_STAGES; xi = xi + 1) begin
            r_valid[xi] <= 1'b0;
        end
    end
end

// The last stage's state, unpacked.
localparam X = EXT_STAGES;
wire [LEN_WIDTH-1:0] xo_len;
wire                 xo_not_ip;
wire                 xo_v6;
wire [1:0]           xo_tags;
wire [4:0]           xo_ip_off;
wire [HBITS-1:0]     xo_h;
wire [LEN_WIDTH-1:0] xo_l3_end;
wire [7:0]           xo_tos;
wire                 xo_df;
wire [127:0]         xo_src;
wire [127:0]         xo_dst;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0 are zero: 4 * IHL)
wire [5:0]           xo_hl;
/* verilator lint_on UNUSEDSIGNAL */
wire [7:0]           xo_v4_proto;
wire                 xo_v4_frag;
wire [15:0]          xo_v4_foff;
wire [15:0]          xo_v4_id;
assign {xo_len, xo_not_ip, xo_v6, xo_tags, xo_ip_off, xo_h, xo_l3_end, xo_tos, xo_df, xo_src,
    xo_dst, xo_hl, xo_v4_proto, xo_v4_frag, xo_v4_foff, xo_v4_id} = r_pass_last;

// ---- stage 7: the upper-layer header -------------------------------------------------------

wire        v6 = xo_v6;
// Checks that end the network layer: IPv4 checksum, a fifth extension header.
wire        csum_bad = !v6 && !r_csum_ok[X];
wire        chain_too_long = v6 && !r_stop[X] && is_ext(r_nh[X]);
wire        net_bad = r_bad[X] || (!xo_not_ip && (csum_bad || chain_too_long));
wire [4:0]  net_reason = r_bad[X] ? r_reason[X]
    : csum_bad ? NLB_REASON_BAD_IP_CHECKSUM : NLB_REASON_EXT_CHAIN_TOO_LONG;

wire [7:0]    proto = v6 ? r_nh[X] : xo_v4_proto;
wire          frag = v6 ? r_frag[X] : xo_v4_frag;
wire [15:0]   foff = v6 ? r_foff[X] : xo_v4_foff;
wire [31:0]   ip_id = v6 ? r_id[X] : {16'd0, xo_v4_id};
wire          later = foff != 16'd0;
wire [OW-1:0]        sd_v4_l4;
wire [OW-1:0]        limit;      // min(l3_end, 192), the ICMP quote's end
wire [LEN_WIDTH:0]   end_m8;
wire [LEN_WIDTH:0]   end_m20;
wire [LEN_WIDTH:0]   end_m28;
wire [LEN_WIDTH:0]   end_m48;
assign {sd_v4_l4, limit, end_m8, end_m20, end_m28, end_m48} = r_side[X];
// Upper-layer offset: absolute, and in 4-byte words from the IP header. The latter comes from
// the chain's block count (IPv6: 40 + 8m bytes, m < 18) or the IHL, not from subtracting the
// IP offset from the absolute one, so the header selections below start right away.
wire [OW-1:0] l4 = v6 ? r_p[X] : sd_v4_l4;
wire [5:0]    l4_dw = v6 ? {r_m[X], 1'b0} + 6'd10 : {2'd0, xo_hl[5:2]};
// quote_dw = l4_dw + 2, each family's sum formed on its own (no add after the select).
wire [5:0]    quote_dw = v6 ? {r_m[X], 1'b0} + 6'd12 : {2'd0, xo_hl[5:2]} + 6'd2;
wire [LEN_WIDTH-1:0] l3_end = xo_l3_end;

wire is_tcp = proto == PROTO_TCP;
wire is_udp = proto == PROTO_UDP;
wire is_icmp = !frag && ((!v6 && proto == PROTO_ICMP) || (v6 && proto == PROTO_ICMPV6));

// l4 + K > l3_end, as l4 > l3_end - K (l4 stays below 256: the chain stops inside the window,
// so no sum here wraps and each form equals the one with the add).
function past_end(input [OW-1:0] at, input [LEN_WIDTH:0] end_m);
    past_end = end_m[LEN_WIDTH] || widen_ow(at) > end_m[LEN_WIDTH-1:0];
endfunction

// The 20 (TCP) or 8 (UDP) bytes at l4 pass the window's end (l4 + need > 192) or l3_end.
wire l4_past_win = is_tcp ? l4 > WIN_END - 20 : l4 > WIN_END - 8;
wire l4_past_end = is_tcp ? past_end(l4, end_m20) : past_end(l4, end_m8);

// 20 bytes at l4 (ports, flags, ICMP type) and the 40-byte quote after the ICMP header.
wire [31:0]  l4_word0 = xo_h[l4_dw * 32 +: 32];
wire [7:0]   l4_flags = xo_h[l4_dw * 32 + 13 * 8 +: 8];
// (Bytes 1-5 are not looked at: the IPv4 TOS, length and id, the IPv6 flow label and length.)
/* verilator lint_off UNUSEDSIGNAL */
wire [319:0] quote = xo_h[quote_dw * 32 +: 320];
/* verilator lint_on UNUSEDSIGNAL */

reg        l4_bad;
reg [4:0]  l4_reason;
reg        has_ports;
reg        icmp_err;
always @* begin
    l4_bad = 1'b0;
    l4_reason = NLB_REASON_TRUNCATED_L4;
    has_ports = 1'b0;
    icmp_err = 1'b0;
    if (!later) begin
        if (is_tcp || is_udp) begin
            if (l4_past_win) begin
                l4_bad = 1'b1;
                l4_reason = NLB_REASON_EXT_CHAIN_TOO_LONG;
            end else if (l4_past_end) begin
                l4_bad = 1'b1;
                l4_reason = NLB_REASON_TRUNCATED_L4;
            end else begin
                has_ports = 1'b1;
            end
        end else if (is_icmp && !(l4 > WIN_END - 8) && !past_end(l4, end_m8)) begin
            // (l4 + 8 <= limit)
            icmp_err = v6 ? (l4_word0[7:0] == 8'd1 || l4_word0[7:0] == 8'd2
                || l4_word0[7:0] == 8'd3) : (l4_word0[7:0] == 8'd3 || l4_word0[7:0] == 8'd11);
        end
    end
end

// The quoted IP header at q = l4 + 8, same family as the outer one; it fits when
// q + 40 (IPv6) or q + 20 (IPv4) <= limit.
wire [3:0]    q_ver = quote[7:4];
wire [3:0]    q_ihl = quote[3:0];
wire [12:0]   q_v4_foff = {quote[6*8 +: 5], quote[7*8 +: 8]};
wire          q_hdr_ok = v6 ? (!(l4 > WIN_END - 48) && !past_end(l4, end_m48) && q_ver == 4'd6)
    : (!(l4 > WIN_END - 28) && !past_end(l4, end_m28) && q_ver == 4'd4 && q_ihl >= 4'd5
        && q_v4_foff == 13'd0);
wire [7:0]    q_proto = v6 ? quote[6*8 +: 8] : quote[9*8 +: 8];

wire [127:0]  q_src = v6 ? `NLB_BE128(quote, 8) : {80'd0, 16'hFFFF, `NLB_BE32(quote, 12)};
wire [127:0]  q_dst = v6 ? `NLB_BE128(quote, 24) : {80'd0, 16'hFFFF, `NLB_BE32(quote, 16)};
// The quote's upper-layer header, absolute and in words relative to the IP header.
// Both are added in stage 8 from their parts: the quote's IHL comes out of a wide selection.
// q_l4 = q_l4_base + q_l4_hlen.
wire [OW-1:0] q_l4_base = v6 ? l4 + 48 : l4 + 8;
wire [5:0]    q_l4_hlen = v6 ? 6'd0 : {q_ihl, 2'b00};
// Below 64 words whenever it is used: quote_dw + q_l4_dw_add.
wire [3:0]    q_l4_dw_add = v6 ? 4'd10 : q_ihl;

reg                 s8_valid_reg = 1'b0;
reg [LEN_WIDTH-1:0] s8_len_reg = {LEN_WIDTH{1'b0}};
reg                 s8_bad_reg = 1'b0;
reg [4:0]           s8_reason_reg = 5'd0;
reg                 s8_not_ip_reg = 1'b0;
reg                 s8_v6_reg = 1'b0;
reg [1:0]           s8_tags_reg = 2'd0;
reg [4:0]           s8_ip_off_reg = 5'd0;
reg [LEN_WIDTH-1:0] s8_l3_end_reg = {LEN_WIDTH{1'b0}};
reg [7:0]           s8_l4_reg = 8'd0;
reg [7:0]           s8_tos_reg = 8'd0;
reg                 s8_df_reg = 1'b0;
reg [7:0]           s8_proto_reg = 8'd0;
reg [127:0]         s8_src_reg = 128'd0;
reg [127:0]         s8_dst_reg = 128'd0;
reg                 s8_frag_reg = 1'b0;
reg [15:0]          s8_foff_reg = 16'd0;
reg [31:0]          s8_ip_id_reg = 32'd0;
reg                 s8_has_ports_reg = 1'b0;
reg [15:0]          s8_sport_reg = 16'd0;
reg [15:0]          s8_dport_reg = 16'd0;
reg [7:0]           s8_flags_reg = 8'd0;
reg                 s8_icmp_err_reg = 1'b0;
reg                 s8_q_ok_reg = 1'b0;
reg [7:0]           s8_q_proto_reg = 8'd0;
reg [127:0]         s8_q_src_reg = 128'd0;
reg [127:0]         s8_q_dst_reg = 128'd0;
reg [OW-1:0]        s8_q_l4_base_reg = {OW{1'b0}};
reg [5:0]           s8_q_l4_hlen_reg = 6'd0;
reg [5:0]           s8_quote_dw_reg = 6'd0;
reg [3:0]           s8_q_l4_dw_add_reg = 4'd0;
reg [OW-1:0]        s8_limit_reg = {OW{1'b0}};
reg [HBITS-1:0]     s8_h_reg = {HBITS{1'b0}};

always @(posedge clk) begin
    s8_valid_reg <= r_valid[X];
    s8_len_reg <= xo_len;
    s8_bad_reg <= net_bad || (!xo_not_ip && l4_bad);
    s8_reason_reg <= net_bad ? net_reason : l4_reason;
    s8_not_ip_reg <= xo_not_ip;
    s8_v6_reg <= v6;
    s8_tags_reg <= xo_tags;
    s8_ip_off_reg <= xo_ip_off;
    s8_l3_end_reg <= l3_end;
    s8_l4_reg <= l4[7:0];
    s8_tos_reg <= xo_tos;
    s8_df_reg <= xo_df;
    s8_proto_reg <= proto;
    s8_src_reg <= xo_src;
    s8_dst_reg <= xo_dst;
    s8_frag_reg <= frag;
    s8_foff_reg <= foff;
    s8_ip_id_reg <= ip_id;
    s8_has_ports_reg <= has_ports;
    s8_sport_reg <= has_ports ? {l4_word0[7:0], l4_word0[15:8]} : 16'd0;
    s8_dport_reg <= has_ports ? {l4_word0[23:16], l4_word0[31:24]} : 16'd0;
    s8_flags_reg <= has_ports && is_tcp ? l4_flags : 8'd0;
    s8_icmp_err_reg <= icmp_err;
    s8_q_ok_reg <= q_hdr_ok && (q_proto == PROTO_TCP || q_proto == PROTO_UDP);
    s8_q_proto_reg <= q_proto;
    s8_q_src_reg <= q_src;
    s8_q_dst_reg <= q_dst;
    s8_q_l4_base_reg <= q_l4_base;
    s8_q_l4_hlen_reg <= q_l4_hlen;
    s8_quote_dw_reg <= quote_dw;
    s8_q_l4_dw_add_reg <= q_l4_dw_add;
    s8_limit_reg <= limit;
    s8_h_reg <= xo_h;
    if (rst) begin
        s8_valid_reg <= 1'b0;
    end
end

// ---- stage 8: the quote's ports ------------------------------------------------------------

wire [5:0]  q_l4_dw = s8_quote_dw_reg + {2'd0, s8_q_l4_dw_add_reg};
wire [31:0] q_ports = s8_h_reg[q_l4_dw * 32 +: 32];
// The quote's ports fit: q_l4 + 8 <= limit, as the sign of limit - base - hlen - 8 (one
// multi-operand add; the sums stay far below 2^OW, as before).
wire [OW+1:0] q_room = {2'b00, s8_limit_reg} - {2'b00, s8_q_l4_base_reg}
    - {{(OW-4){1'b0}}, s8_q_l4_hlen_reg} - 8;
wire        inner_ok = s8_icmp_err_reg && s8_q_ok_reg && !q_room[OW+1];

reg                 out_valid_reg = 1'b0;
reg [LEN_WIDTH-1:0] out_len_reg = {LEN_WIDTH{1'b0}};
reg                 out_malformed_reg = 1'b0;
reg [4:0]           out_reason_reg = 5'd0;
reg                 out_not_ip_reg = 1'b0;
reg                 out_v6_reg = 1'b0;
reg [1:0]           out_tags_reg = 2'd0;
reg [4:0]           out_l3_offset_reg = 5'd0;
reg [LEN_WIDTH-1:0] out_l3_end_reg = {LEN_WIDTH{1'b0}};
reg [7:0]           out_l4_reg = 8'd0;
reg [7:0]           out_tos_reg = 8'd0;
reg                 out_df_reg = 1'b0;
reg [7:0]           out_proto_reg = 8'd0;
reg [127:0]         out_src_reg = 128'd0;
reg [127:0]         out_dst_reg = 128'd0;
reg                 out_frag_reg = 1'b0;
reg [15:0]          out_foff_reg = 16'd0;
reg [31:0]          out_ip_id_reg = 32'd0;
reg                 out_has_ports_reg = 1'b0;
reg [15:0]          out_sport_reg = 16'd0;
reg [15:0]          out_dport_reg = 16'd0;
reg [7:0]           out_flags_reg = 8'd0;
reg                 out_icmp_err_reg = 1'b0;
reg                 out_inner_valid_reg = 1'b0;
reg [7:0]           out_q_proto_reg = 8'd0;
reg [127:0]         out_q_src_reg = 128'd0;
reg [127:0]         out_q_dst_reg = 128'd0;
reg [15:0]          out_q_sport_reg = 16'd0;
reg [15:0]          out_q_dport_reg = 16'd0;

always @(posedge clk) begin
    out_valid_reg <= s8_valid_reg;
    out_len_reg <= s8_len_reg;
    out_malformed_reg <= s8_bad_reg;
    out_reason_reg <= s8_reason_reg;
    out_not_ip_reg <= s8_not_ip_reg;
    out_v6_reg <= s8_v6_reg;
    out_tags_reg <= s8_tags_reg;
    out_l3_offset_reg <= s8_ip_off_reg;
    out_l3_end_reg <= s8_l3_end_reg;
    out_l4_reg <= s8_l4_reg;
    out_tos_reg <= s8_tos_reg;
    out_df_reg <= s8_df_reg;
    out_proto_reg <= s8_proto_reg;
    out_src_reg <= s8_src_reg;
    out_dst_reg <= s8_dst_reg;
    out_frag_reg <= s8_frag_reg;
    out_foff_reg <= s8_foff_reg;
    out_ip_id_reg <= s8_ip_id_reg;
    out_has_ports_reg <= s8_has_ports_reg;
    out_sport_reg <= s8_sport_reg;
    out_dport_reg <= s8_dport_reg;
    out_flags_reg <= s8_flags_reg;
    out_icmp_err_reg <= s8_icmp_err_reg;
    out_inner_valid_reg <= inner_ok;
    out_q_proto_reg <= inner_ok ? s8_q_proto_reg : 8'd0;
    out_q_src_reg <= inner_ok ? s8_q_src_reg : 128'd0;
    out_q_dst_reg <= inner_ok ? s8_q_dst_reg : 128'd0;
    out_q_sport_reg <= inner_ok ? {q_ports[7:0], q_ports[15:8]} : 16'd0;
    out_q_dport_reg <= inner_ok ? {q_ports[23:16], q_ports[31:24]} : 16'd0;
    if (rst) begin
        out_valid_reg <= 1'b0;
    end
end

assign m_valid = out_valid_reg;
assign m_user = user_pipe_reg[(USER_STAGES-1)*USER_WIDTH +: USER_WIDTH];
assign m_len = out_len_reg;
assign m_malformed = out_malformed_reg;
assign m_reason = out_reason_reg;
assign m_not_ip = out_not_ip_reg;
assign m_ipv6 = out_v6_reg;
assign m_vlan_tags = out_tags_reg;
assign m_l3_offset = out_l3_offset_reg;
assign m_l3_end = out_l3_end_reg;
assign m_l4_offset = out_l4_reg;
assign m_tos = out_tos_reg;
assign m_dont_fragment = out_df_reg;
assign m_protocol = out_proto_reg;
assign m_src = out_src_reg;
assign m_dst = out_dst_reg;
assign m_fragment = out_frag_reg;
assign m_frag_offset = out_foff_reg;
assign m_ip_id = out_ip_id_reg;
assign m_has_ports = out_has_ports_reg;
assign m_src_port = out_sport_reg;
assign m_dst_port = out_dport_reg;
assign m_tcp_flags = out_flags_reg;
assign m_icmp_error = out_icmp_err_reg;
assign m_inner_valid = out_inner_valid_reg;
assign m_inner_protocol = out_q_proto_reg;
assign m_inner_src = out_q_src_reg;
assign m_inner_dst = out_q_dst_reg;
assign m_inner_src_port = out_q_sport_reg;
assign m_inner_dst_port = out_q_dport_reg;

`undef NLB_BE128
`undef NLB_BE32
`undef NLB_BE16
`undef NLB_BYTE

`ifdef FORMAL
// Formal properties of the descriptor timing and sideband (hw/scripts/formal.sh).
`include "nlb_parser_props.vh"
`endif

endmodule

`resetall
