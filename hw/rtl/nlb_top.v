`resetall
`timescale 1ns / 1ps
`default_nettype none

// The NIC pipeline's top level: the AXI-Lite register file with the banked tables
// (nlb_regs), on its extension bus the connection table (nlb_conntrack), the counters
// (nlb_counters) and the configuration flash controller (nlb_spi_flash, its SPI pins are
// nlb_top's spi_*), and the received stream into the packet
// FIFO and, beside it, through the header parser (nlb_parser) and the lookup pipeline
// (nlb_lookup); the editor (nlb_editor) pairs each result with its frame and sends it on the
// transmit or punt stream or drops it; learn/teardown events go out on the event stream.
// Every packet's result (verdict, reason, rule, pool, backend, connection-table outcome, flow
// hash, event) also comes out on the m_res_* monitor port, in order.
//
// Admission: s_axis_rx_tready (a register) is high while the lookup's descriptor FIFO has room,
// the packet FIFO has room for a few more beats and fewer than MAX_IN_FLIGHT packets are
// between their first beat and the editor. The first beat of every frame latches
// ctrl.active_bank, ctrl.enable and ctrl.default_action for that packet. Frames up to
// (PKT_FIFO_DEPTH - 8) beats are supported (32 KiB by default; the NIC's MTU is 9000).
//
// Output streams: m_axis_tx (forwarded frames), m_axis_punt (punt header beat + the frame's
// first 9728 bytes), m_axis_event (one learn_event record per beat, the layout in the low 358
// bits; an event that finds EVENT_DEPTH events queued is dropped and m_event_dropped pulses).
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_top (
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
    s_axis_rx_tdata,
    s_axis_rx_tkeep,
    s_axis_rx_tvalid,
    s_axis_rx_tready,
    s_axis_rx_tlast,
    s_axis_inject_tdata,
    s_axis_inject_tkeep,
    s_axis_inject_tvalid,
    s_axis_inject_tready,
    s_axis_inject_tlast,
    s_axis_inject_tuser,
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
    m_axis_event_tdata,
    m_axis_event_tvalid,
    m_axis_event_tready,
    m_event_dropped,
    m_res_valid,
    m_res_inject,
    m_res_verdict,
    m_res_reason,
    m_res_bank,
    m_res_rule_valid,
    m_res_rule,
    m_res_pool_valid,
    m_res_pool,
    m_res_backend_valid,
    m_res_backend,
    m_res_key_valid,
    m_res_key,
    m_res_conntrack,
    m_res_ct_index,
    m_res_flow_hash,
    m_res_ip_id,
    m_res_len,
    m_res_out_len,
    m_res_event_valid,
    m_res_event,
    m_res_protocol,
    m_res_client,
    m_res_client_port,
    m_res_vip,
    m_res_vip_port,
    m_res_icmp,
    m_res_delivery,
    m_res_be_ipv6,
    m_res_be_addr,
    m_res_be_mac,
    m_res_ipv6,
    m_res_l3_offset,
    m_res_l3_end,
    m_res_tos,
    m_res_dont_fragment,
    m_mon_active_bank,
    m_mon_enable,
    m_mon_default_action,
    m_mon_packets_in_flight,
    m_mon_bank_in_use,
    m_mon_hit_set,
    m_mon_hit_set_index,
    m_mon_hit_read,
`ifdef NLB_SIM_HOOKS
    sim_cnt_preset_valid,
    sim_cnt_preset_kind,
    sim_cnt_preset_index,
    sim_cnt_preset_value,
`endif
    spi_sck,
    spi_cs_n,
    spi_mosi,
    spi_miso
);

`include "nlb_regmap.vh"

// ---- parameters -------------------------------------------------------------------------

// AXI-Stream data width (bits).
parameter DATA_WIDTH = 512;
// Capacity profile (fw_id.profile_id) and its table depths.
parameter PROFILE_ID = NLB_PROFILE_SIM_ID;
parameter VIP_BUCKETS = NLB_PROFILE_SIM_VIP_BUCKETS;
parameter VIP_WAYS = NLB_PROFILE_SIM_VIP_WAYS;
parameter RULES = NLB_PROFILE_SIM_RULES;
parameter POOLS = NLB_PROFILE_SIM_POOLS;
parameter MAGLEV_SLOTS = NLB_PROFILE_SIM_MAGLEV_SLOTS;
parameter BACKENDS = NLB_PROFILE_SIM_BACKENDS;
parameter CT_BUCKETS = NLB_PROFILE_SIM_CT_BUCKETS;
parameter CT_WAYS = NLB_PROFILE_SIM_CT_WAYS;
parameter QUEUE_DEPTH = NLB_PROFILE_SIM_QUEUE_DEPTH;
// fw_id words stamped by the build.
parameter [31:0] BUILD_ID = 32'd0;
parameter [31:0] GIT_HASH = 32'd0;
parameter [31:0] BOARD_ID = 32'h5100;
parameter [31:0] PART_ID = 32'd0;
// Packet FIFO beats (a power of two; holds whole frames while their lookup runs).
parameter PKT_FIFO_DEPTH = 512;
// Packets admitted and not yet through the editor.
parameter MAX_IN_FLIGHT = 48;
// Events queued for the event stream.
parameter EVENT_DEPTH = 64;

localparam KEEP_WIDTH = DATA_WIDTH / 8;
// The inject header fields tuser carries: backend and pool, from bit 0.
localparam INJ_USER_W = NLB_INJECT_HEADER_POOL_LSB + NLB_INJECT_HEADER_POOL_W;
localparam LW = 17;
localparam CTIW = $clog2(CT_BUCKETS) + $clog2(CT_WAYS);
localparam VIP_ROW_BITS = $clog2(VIP_BUCKETS);
localparam RULE_ROW_BITS = $clog2(RULES);
localparam POOL_ROW_BITS = $clog2(POOLS);
localparam MAGLEV_ROW_BITS = $clog2(MAGLEV_SLOTS);
localparam BACKEND_ROW_BITS = $clog2(BACKENDS);
localparam CT_ROW_BITS = $clog2(CT_BUCKETS);

// ---- ports --------------------------------------------------------------------------------

input  wire                  clk;
input  wire                  rst;

input  wire [15:0]           s_axil_awaddr;
input  wire                  s_axil_awvalid;
output wire                  s_axil_awready;
input  wire [31:0]           s_axil_wdata;
input  wire [3:0]            s_axil_wstrb;
input  wire                  s_axil_wvalid;
output wire                  s_axil_wready;
output wire [1:0]            s_axil_bresp;
output wire                  s_axil_bvalid;
input  wire                  s_axil_bready;
input  wire [15:0]           s_axil_araddr;
input  wire                  s_axil_arvalid;
output wire                  s_axil_arready;
output wire [31:0]           s_axil_rdata;
output wire [1:0]            s_axil_rresp;
output wire                  s_axil_rvalid;
input  wire                  s_axil_rready;

// Received frames.
input  wire [DATA_WIDTH-1:0] s_axis_rx_tdata;
input  wire [KEEP_WIDTH-1:0] s_axis_rx_tkeep;
input  wire                  s_axis_rx_tvalid;
output wire                  s_axis_rx_tready;
input  wire                  s_axis_rx_tlast;

// Frames the host injects (docs/pipeline.md section 12): tuser of the first beat holds the
// inject header's backend and pool where the inject_header layout puts them (its first 28
// bits: the frame length is not carried, tlast ends the frame). They share the pipeline with
// received frames, taken frame by frame, alternating when both wait.
input  wire [DATA_WIDTH-1:0] s_axis_inject_tdata;
input  wire [KEEP_WIDTH-1:0] s_axis_inject_tkeep;
input  wire                  s_axis_inject_tvalid;
output wire                  s_axis_inject_tready;
input  wire                  s_axis_inject_tlast;
input  wire [INJ_USER_W-1:0] s_axis_inject_tuser;

// Forwarded frames.
output wire [DATA_WIDTH-1:0] m_axis_tx_tdata;
output wire [KEEP_WIDTH-1:0] m_axis_tx_tkeep;
output wire                  m_axis_tx_tvalid;
input  wire                  m_axis_tx_tready;
output wire                  m_axis_tx_tlast;

// Punted frames, each after its punt header beat.
output wire [DATA_WIDTH-1:0] m_axis_punt_tdata;
output wire [KEEP_WIDTH-1:0] m_axis_punt_tkeep;
output wire                  m_axis_punt_tvalid;
input  wire                  m_axis_punt_tready;
output wire                  m_axis_punt_tlast;

// Learn/teardown events (learn_event layout, words 0..11).
output wire [383:0]          m_axis_event_tdata;
output wire                  m_axis_event_tvalid;
input  wire                  m_axis_event_tready;
output wire                  m_event_dropped;

// Per-packet result monitor (nlb_lookup m_*).
output wire m_res_valid;
output wire m_res_inject;
output wire [1:0] m_res_verdict;
output wire [4:0] m_res_reason;
output wire m_res_bank;
output wire m_res_rule_valid;
output wire [11:0] m_res_rule;
output wire m_res_pool_valid;
output wire [11:0] m_res_pool;
output wire m_res_backend_valid;
output wire [15:0] m_res_backend;
output wire m_res_key_valid;
output wire [2:0] m_res_key;
output wire [1:0] m_res_conntrack;
output wire [CTIW-1:0] m_res_ct_index;
output wire [31:0] m_res_flow_hash;
output wire [31:0] m_res_ip_id;
output wire [LW-1:0] m_res_len;
output wire [17:0] m_res_out_len;
output wire m_res_event_valid;
output wire [1:0] m_res_event;
output wire [7:0] m_res_protocol;
output wire [127:0] m_res_client;
output wire [15:0] m_res_client_port;
output wire [127:0] m_res_vip;
output wire [15:0] m_res_vip_port;
output wire m_res_icmp;
output wire [1:0] m_res_delivery;
output wire m_res_be_ipv6;
output wire [127:0] m_res_be_addr;
output wire [47:0] m_res_be_mac;
output wire m_res_ipv6;
output wire [4:0] m_res_l3_offset;
output wire [LW-1:0] m_res_l3_end;
output wire [7:0] m_res_tos;
output wire m_res_dont_fragment;

// Observation of control state for the tests of control changes under traffic
// (verif/tests/overlap.rs); nothing on the card uses them.
// - m_mon_active_bank, m_mon_enable, m_mon_default_action: what a first beat in this clock
//   latches (ctrl.active_bank, ctrl.enable, ctrl.default_action).
// - m_mon_packets_in_flight, m_mon_bank_in_use: ctrl.packets_in_flight and ctrl.bank_in_use
//   as the register file reads them in this clock.
// - m_mon_hit_set: the pipeline sets the hit bit of entry m_mon_hit_set_index in this clock.
// - m_mon_hit_read: a conntrack.hit_read reads (and clears) its row of hit bits in this clock
//   (nlb_hit_bits' c0: a set in this clock or before is in the read, a later one is not).
output wire m_mon_active_bank;
output wire m_mon_enable;
output wire m_mon_default_action;
output wire [31:0] m_mon_packets_in_flight;
output wire [1:0] m_mon_bank_in_use;
output wire m_mon_hit_set;
output wire [CTIW-1:0] m_mon_hit_set_index;
output wire m_mon_hit_read;

`ifdef NLB_SIM_HOOKS
// Simulation only (verif/build.rs defines NLB_SIM_HOOKS for the Verilated nlb_top; synthesis
// and the card never do): presets counter (kind = counter_kind, index) to {drops, punts,
// bytes, packets}, 64 bits each, so verif/tests/corners.rs can run traffic across 2^32 and
// 2^64. Held low, it does nothing.
input  wire sim_cnt_preset_valid;
input  wire [1:0] sim_cnt_preset_kind;
input  wire [15:0] sim_cnt_preset_index;
input  wire [255:0] sim_cnt_preset_value;
`endif

// SPI bus to the configuration flash (spi_flash block): on an UltraScale+ card the shell
// routes these through STARTUPE3 to the configuration flash; in simulation a flash model sits
// on them.
output wire spi_sck;
output wire spi_cs_n;
output wire spi_mosi;
input  wire spi_miso;

// ---- register file and tables -----------------------------------------------------------

wire                 ctrl_enable;
wire                 ctrl_active_bank;
/* verilator lint_off UNUSEDSIGNAL */ // (the generation is the loader's)
wire [31:0]          ctrl_generation;
/* verilator lint_on UNUSEDSIGNAL */
wire [47:0]          ctrl_local_mac;
wire [15:0]          ctrl_gue_port;
wire [31:0]          ctrl_outer_src_v4;
wire [5:0]           ctrl_outer_src_v4_len;
wire [127:0]         ctrl_outer_src_v6;
wire [127:0]         ctrl_outer_src_v6_mask;
wire                 ctrl_default_action;

wire                 ext_wr_req;
wire [31:0]          ext_wr_addr;
wire [31:0]          ext_wr_data;
wire [3:0]           ext_wr_strb;
wire                 ext_wr_ack;
wire                 ext_rd_req;
wire [31:0]          ext_rd_addr;
wire [31:0]          ext_rd_data;
wire                 ext_rd_ack;

wire                                  vip_rd_en, rule_rd_en, acl_rd_en, pool_rd_en;
wire                                  maglev_rd_en, backend_rd_en;
wire                                  vip_rd_bank, rule_rd_bank, acl_rd_bank, pool_rd_bank;
wire                                  maglev_rd_bank, backend_rd_bank;
wire [VIP_ROW_BITS-1:0]               vip_rd_row;
wire [RULE_ROW_BITS-1:0]              rule_rd_row;
wire [RULE_ROW_BITS-1:0]              acl_rd_row;
wire [POOL_ROW_BITS-1:0]              pool_rd_row;
wire [MAGLEV_ROW_BITS-1:0]            maglev_rd_row;
wire [BACKEND_ROW_BITS-1:0]           backend_rd_row;
wire [VIP_WAYS*NLB_VIP_ENTRY_WIDTH-1:0] vip_rd_data;
wire [NLB_RULE_ENTRY_WIDTH-1:0]       rule_rd_data;
wire [NLB_ACL_ENTRY_WIDTH-1:0]        acl_rd_data;
wire [NLB_POOL_ENTRY_WIDTH-1:0]       pool_rd_data;
wire [NLB_MAGLEV_SLOT_WIDTH-1:0]      maglev_rd_data;
wire [NLB_BACKEND_ENTRY_WIDTH-1:0]    backend_rd_data;
wire                                  ct_rd_en;
wire [CT_ROW_BITS-1:0]                ct_rd_row;
wire [CT_WAYS*NLB_CT_ENTRY_WIDTH-1:0] ct_rd_data;
wire                                  hit_set_en;
wire [CTIW-1:0]                       hit_set_index;

// Packets between the first beat and the result, per bank (ctrl.packets_in_flight,
// ctrl.bank_in_use).
reg  [15:0] in_flight_reg [0:1];
wire [31:0] stat_packets_in_flight = {15'd0, in_flight_reg[0]} + {15'd0, in_flight_reg[1]};
wire [1:0]  stat_bank_in_use = {in_flight_reg[1] != 16'd0, in_flight_reg[0] != 16'd0};
assign m_mon_packets_in_flight = stat_packets_in_flight;
assign m_mon_bank_in_use = stat_bank_in_use;
assign m_mon_hit_set = hit_set_en;
assign m_mon_hit_set_index = hit_set_index;

nlb_regs #(
    .PROFILE_ID(PROFILE_ID),
    .VIP_BUCKETS(VIP_BUCKETS),
    .VIP_WAYS(VIP_WAYS),
    .RULES(RULES),
    .POOLS(POOLS),
    .MAGLEV_SLOTS(MAGLEV_SLOTS),
    .BACKENDS(BACKENDS),
    .CT_BUCKETS(CT_BUCKETS),
    .CT_WAYS(CT_WAYS),
    .QUEUE_DEPTH(QUEUE_DEPTH),
    .BUILD_ID(BUILD_ID),
    .GIT_HASH(GIT_HASH),
    .BOARD_ID(BOARD_ID),
    .PART_ID(PART_ID)
) regs_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(s_axil_awaddr),
    .s_axil_awvalid(s_axil_awvalid),
    .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wstrb(s_axil_wstrb),
    .s_axil_wvalid(s_axil_wvalid),
    .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp),
    .s_axil_bvalid(s_axil_bvalid),
    .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr),
    .s_axil_arvalid(s_axil_arvalid),
    .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata),
    .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid),
    .s_axil_rready(s_axil_rready),
    .ctrl_enable(ctrl_enable),
    .ctrl_active_bank(ctrl_active_bank),
    .ctrl_generation(ctrl_generation),
    .ctrl_default_action(ctrl_default_action),
    .ctrl_local_mac(ctrl_local_mac),
    .ctrl_gue_port(ctrl_gue_port),
    .ctrl_outer_src_v4(ctrl_outer_src_v4),
    .ctrl_outer_src_v4_len(ctrl_outer_src_v4_len),
    .ctrl_outer_src_v6(ctrl_outer_src_v6),
    .ctrl_outer_src_v6_mask(ctrl_outer_src_v6_mask),
    .stat_packets_in_flight(stat_packets_in_flight),
    .stat_bank_in_use(stat_bank_in_use),
    .ext_wr_req(ext_wr_req),
    .ext_wr_addr(ext_wr_addr),
    .ext_wr_data(ext_wr_data),
    .ext_wr_strb(ext_wr_strb),
    .ext_wr_ack(ext_wr_ack),
    .ext_rd_req(ext_rd_req),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(ext_rd_data),
    .ext_rd_ack(ext_rd_ack),
    .vip_rd_en(vip_rd_en),
    .vip_rd_bank(vip_rd_bank),
    .vip_rd_row(vip_rd_row),
    .vip_rd_data(vip_rd_data),
    .rule_rd_en(rule_rd_en),
    .rule_rd_bank(rule_rd_bank),
    .rule_rd_row(rule_rd_row),
    .rule_rd_data(rule_rd_data),
    .acl_rd_en(acl_rd_en),
    .acl_rd_bank(acl_rd_bank),
    .acl_rd_row(acl_rd_row),
    .acl_rd_data(acl_rd_data),
    .pool_rd_en(pool_rd_en),
    .pool_rd_bank(pool_rd_bank),
    .pool_rd_row(pool_rd_row),
    .pool_rd_data(pool_rd_data),
    .maglev_rd_en(maglev_rd_en),
    .maglev_rd_bank(maglev_rd_bank),
    .maglev_rd_row(maglev_rd_row),
    .maglev_rd_data(maglev_rd_data),
    .backend_rd_en(backend_rd_en),
    .backend_rd_bank(backend_rd_bank),
    .backend_rd_row(backend_rd_row),
    .backend_rd_data(backend_rd_data)
);

// Extension bus: the conntrack, counters and spi_flash blocks, each over its span of the
// register space (anything else is answered with 0).
function in_block(input [31:0] a, input [31:0] base, input [31:0] span);
    in_block = a >= base && a < base + span;
endfunction
wire ext_wr_ct = in_block(ext_wr_addr, NLB_BLK_CONNTRACK_BASE, NLB_BLK_CONNTRACK_SPAN);
wire ext_rd_ct = in_block(ext_rd_addr, NLB_BLK_CONNTRACK_BASE, NLB_BLK_CONNTRACK_SPAN);
wire ext_wr_cnt = in_block(ext_wr_addr, NLB_BLK_COUNTERS_BASE, NLB_BLK_COUNTERS_SPAN);
wire ext_rd_cnt = in_block(ext_rd_addr, NLB_BLK_COUNTERS_BASE, NLB_BLK_COUNTERS_SPAN);
wire ext_wr_spi = in_block(ext_wr_addr, NLB_BLK_SPI_FLASH_BASE, NLB_BLK_SPI_FLASH_SPAN);
wire ext_rd_spi = in_block(ext_rd_addr, NLB_BLK_SPI_FLASH_BASE, NLB_BLK_SPI_FLASH_SPAN);
wire        ct_wr_ack;
wire        ct_rd_ack;
wire [31:0] ct_rd_data_w;
wire        cnt_wr_ack;
wire        cnt_rd_ack;
wire [31:0] cnt_rd_data_w;
wire        spi_wr_ack;
wire        spi_rd_ack;
wire [31:0] spi_rd_data_w;
reg         other_wr_ack_reg = 1'b0;
reg         other_rd_ack_reg = 1'b0;

always @(posedge clk) begin
    other_wr_ack_reg <= ext_wr_req && !ext_wr_ct && !ext_wr_cnt && !ext_wr_spi;
    other_rd_ack_reg <= ext_rd_req && !ext_rd_ct && !ext_rd_cnt && !ext_rd_spi;
    if (rst) begin
        other_wr_ack_reg <= 1'b0;
        other_rd_ack_reg <= 1'b0;
    end
end

assign ext_wr_ack = ct_wr_ack || cnt_wr_ack || spi_wr_ack || other_wr_ack_reg;
assign ext_rd_ack = ct_rd_ack || cnt_rd_ack || spi_rd_ack || other_rd_ack_reg;
assign ext_rd_data = ct_rd_ack ? ct_rd_data_w : cnt_rd_ack ? cnt_rd_data_w
    : spi_rd_ack ? spi_rd_data_w : 32'd0;

nlb_spi_flash spi_flash_inst (
    .clk(clk),
    .rst(rst),
    .ext_wr_req(ext_wr_req && ext_wr_spi),
    .ext_wr_addr(ext_wr_addr),
    .ext_wr_data(ext_wr_data),
    .ext_wr_strb(ext_wr_strb),
    .ext_wr_ack(spi_wr_ack),
    .ext_rd_req(ext_rd_req && ext_rd_spi),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(spi_rd_data_w),
    .ext_rd_ack(spi_rd_ack),
    .spi_sck(spi_sck),
    .spi_cs_n(spi_cs_n),
    .spi_mosi(spi_mosi),
    .spi_miso(spi_miso)
);

wire counters_room;

nlb_counters #(
    .RULES(RULES),
    .BACKENDS(BACKENDS),
    .LEN_WIDTH(LW)
) counters_inst (
    .clk(clk),
    .rst(rst),
    .s_res_valid(m_res_valid),
    .s_res_verdict(m_res_verdict),
    .s_res_reason(m_res_reason),
    .s_res_rule_valid(m_res_rule_valid),
    .s_res_rule(m_res_rule),
    .s_res_backend_valid(m_res_backend_valid),
    .s_res_backend(m_res_backend),
    .s_res_len(m_res_len),
    .s_room(counters_room),
    .ext_wr_req(ext_wr_req && ext_wr_cnt),
    .ext_wr_addr(ext_wr_addr),
    .ext_wr_data(ext_wr_data),
    .ext_wr_strb(ext_wr_strb),
    .ext_wr_ack(cnt_wr_ack),
    .ext_rd_req(ext_rd_req && ext_rd_cnt),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(cnt_rd_data_w),
`ifdef NLB_SIM_HOOKS
    .sim_cnt_preset_valid(sim_cnt_preset_valid),
    .sim_cnt_preset_kind(sim_cnt_preset_kind),
    .sim_cnt_preset_index(sim_cnt_preset_index),
    .sim_cnt_preset_value(sim_cnt_preset_value),
`endif
    .ext_rd_ack(cnt_rd_ack)
);

nlb_conntrack #(
    .CT_BUCKETS(CT_BUCKETS),
    .CT_WAYS(CT_WAYS)
) conntrack_inst (
    .clk(clk),
    .rst(rst),
    .ext_wr_req(ext_wr_req && ext_wr_ct),
    .ext_wr_addr(ext_wr_addr),
    .ext_wr_data(ext_wr_data),
    .ext_wr_strb(ext_wr_strb),
    .ext_wr_ack(ct_wr_ack),
    .ext_rd_req(ext_rd_req && ext_rd_ct),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(ct_rd_data_w),
    .ext_rd_ack(ct_rd_ack),
    .ct_rd_en(ct_rd_en),
    .ct_rd_row(ct_rd_row),
    .ct_rd_data(ct_rd_data),
    .hit_set_en(hit_set_en),
    .hit_set_index(hit_set_index),
    .mon_hit_read(m_mon_hit_read)
);

// ---- receive: admission, first-beat latch, parser ---------------------------------------

wire lookup_room;
wire [$clog2(PKT_FIFO_DEPTH):0] pkt_count;
reg  [7:0] admitted_reg = 8'd0;   // packets between the first beat and the editor
wire       frame_done;
reg  rx_ready_reg = 1'b0;
reg  rx_first_reg = 1'b1;   // the next beat starts a frame
reg  sel_inject_reg = 1'b0; // the frame in progress (or the next) comes from the inject port

// The merged stream into the parser, the payload sums and the packet FIFO.
wire [DATA_WIDTH-1:0] in_tdata = sel_inject_reg ? s_axis_inject_tdata : s_axis_rx_tdata;
wire [KEEP_WIDTH-1:0] in_tkeep = sel_inject_reg ? s_axis_inject_tkeep : s_axis_rx_tkeep;
wire                  in_tvalid = sel_inject_reg ? s_axis_inject_tvalid : s_axis_rx_tvalid;
wire                  in_tlast = sel_inject_reg ? s_axis_inject_tlast : s_axis_rx_tlast;
wire rx_beat = in_tvalid && rx_ready_reg;
wire rx_first = rx_beat && rx_first_reg;
// The first beat latches bank, enable, default action, and an injected frame's header.
// (nlb_lookup's s_user: bits 31..16 backend, 15..4 pool, 3 injected, 2..0 the ctrl bits.)
wire [INJ_USER_W-1:0] inj_header = sel_inject_reg ? s_axis_inject_tuser : {INJ_USER_W{1'b0}};
wire [31:0] rx_user = {
    inj_header[NLB_INJECT_HEADER_BACKEND_LSB +: NLB_INJECT_HEADER_BACKEND_W],
    inj_header[NLB_INJECT_HEADER_POOL_LSB +: NLB_INJECT_HEADER_POOL_W], sel_inject_reg,
    ctrl_default_action, ctrl_enable, ctrl_active_bank};
// Between frames, the other port takes its turn when it has a frame waiting.
wire at_boundary = rx_beat ? in_tlast : rx_first_reg;

always @(posedge clk) begin
    rx_ready_reg <= lookup_room && counters_room && pkt_count < PKT_FIFO_DEPTH - 8
        && admitted_reg < MAX_IN_FLIGHT;
    admitted_reg <= admitted_reg + {7'd0, rx_first} - {7'd0, frame_done};
    if (rx_beat) begin
        rx_first_reg <= in_tlast;
    end
    if (at_boundary) begin
        if (sel_inject_reg ? s_axis_rx_tvalid : s_axis_inject_tvalid) begin
            sel_inject_reg <= !sel_inject_reg;
        end
    end
    if (rst) begin
        rx_ready_reg <= 1'b0;
        rx_first_reg <= 1'b1;
        admitted_reg <= 8'd0;
        sel_inject_reg <= 1'b0;
    end
end

assign s_axis_rx_tready = rx_ready_reg && !sel_inject_reg;
assign m_mon_active_bank = ctrl_active_bank;
assign m_mon_enable = ctrl_enable;
assign m_mon_default_action = ctrl_default_action;
assign s_axis_inject_tready = rx_ready_reg && sel_inject_reg;

wire       pd_valid;
wire [31:0] pd_user;
wire [LW-1:0] pd_len;
wire pd_malformed;
wire [4:0] pd_reason;
wire pd_not_ip;
wire pd_ipv6;
wire [1:0] pd_vlan_tags;
wire [4:0] pd_l3_offset;
wire [LW-1:0] pd_l3_end;
wire [7:0] pd_l4_offset;
wire [7:0] pd_tos;
wire pd_dont_fragment;
wire [7:0] pd_protocol;
wire [127:0] pd_src;
wire [127:0] pd_dst;
wire pd_fragment;
wire [15:0] pd_frag_offset;
wire [31:0] pd_ip_id;
wire pd_has_ports;
wire [15:0] pd_src_port;
wire [15:0] pd_dst_port;
wire [7:0] pd_tcp_flags;
wire pd_icmp_error;
wire pd_inner_valid;
wire [7:0] pd_inner_protocol;
wire [127:0] pd_inner_src;
wire [127:0] pd_inner_dst;
wire [15:0] pd_inner_src_port;
wire [15:0] pd_inner_dst_port;

nlb_parser #(
    .DATA_WIDTH(DATA_WIDTH),
    .LEN_WIDTH(LW),
    .USER_WIDTH(32)
) parser_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(in_tdata),
    .s_axis_tkeep(in_tkeep),
    .s_axis_tvalid(in_tvalid),
    .s_axis_tready(rx_ready_reg),
    .s_axis_tlast(in_tlast),
    .s_axis_tuser(rx_user),
    .m_valid(pd_valid),
    .m_user(pd_user),
    .m_len(pd_len),
    .m_malformed(pd_malformed),
    .m_reason(pd_reason),
    .m_not_ip(pd_not_ip),
    .m_ipv6(pd_ipv6),
    .m_vlan_tags(pd_vlan_tags),
    .m_l3_offset(pd_l3_offset),
    .m_l3_end(pd_l3_end),
    .m_l4_offset(pd_l4_offset),
    .m_tos(pd_tos),
    .m_dont_fragment(pd_dont_fragment),
    .m_protocol(pd_protocol),
    .m_src(pd_src),
    .m_dst(pd_dst),
    .m_fragment(pd_fragment),
    .m_frag_offset(pd_frag_offset),
    .m_ip_id(pd_ip_id),
    .m_has_ports(pd_has_ports),
    .m_src_port(pd_src_port),
    .m_dst_port(pd_dst_port),
    .m_tcp_flags(pd_tcp_flags),
    .m_icmp_error(pd_icmp_error),
    .m_inner_valid(pd_inner_valid),
    .m_inner_protocol(pd_inner_protocol),
    .m_inner_src(pd_inner_src),
    .m_inner_dst(pd_inner_dst),
    .m_inner_src_port(pd_inner_src_port),
    .m_inner_dst_port(pd_inner_dst_port)
);

// The parser's layer-4 offset, tag count and port flag are not needed past it.
/* verilator lint_off UNUSEDSIGNAL */
wire unused_parser = |{pd_vlan_tags, pd_l4_offset, pd_has_ports};
/* verilator lint_on UNUSEDSIGNAL */

// ---- lookup -------------------------------------------------------------------------------

nlb_lookup #(
    .LEN_WIDTH(LW),
    .VIP_BUCKETS(VIP_BUCKETS),
    .VIP_WAYS(VIP_WAYS),
    .RULES(RULES),
    .POOLS(POOLS),
    .MAGLEV_SLOTS(MAGLEV_SLOTS),
    .BACKENDS(BACKENDS),
    .CT_BUCKETS(CT_BUCKETS),
    .CT_WAYS(CT_WAYS)
) lookup_inst (
    .clk(clk),
    .rst(rst),
    .s_valid(pd_valid),
    .s_user(pd_user),
    .s_len(pd_len),
    .s_malformed(pd_malformed),
    .s_reason(pd_reason),
    .s_not_ip(pd_not_ip),
    .s_ipv6(pd_ipv6),
    .s_l3_offset(pd_l3_offset),
    .s_l3_end(pd_l3_end),
    .s_tos(pd_tos),
    .s_dont_fragment(pd_dont_fragment),
    .s_protocol(pd_protocol),
    .s_src(pd_src),
    .s_dst(pd_dst),
    .s_fragment(pd_fragment),
    .s_frag_offset(pd_frag_offset),
    .s_ip_id(pd_ip_id),
    .s_src_port(pd_src_port),
    .s_dst_port(pd_dst_port),
    .s_tcp_flags(pd_tcp_flags),
    .s_icmp_error(pd_icmp_error),
    .s_inner_valid(pd_inner_valid),
    .s_inner_protocol(pd_inner_protocol),
    .s_inner_src(pd_inner_src),
    .s_inner_dst(pd_inner_dst),
    .s_inner_src_port(pd_inner_src_port),
    .s_inner_dst_port(pd_inner_dst_port),
    .s_room(lookup_room),
    .vip_rd_en(vip_rd_en),
    .vip_rd_bank(vip_rd_bank),
    .vip_rd_row(vip_rd_row),
    .vip_rd_data(vip_rd_data),
    .rule_rd_en(rule_rd_en),
    .rule_rd_bank(rule_rd_bank),
    .rule_rd_row(rule_rd_row),
    .rule_rd_data(rule_rd_data),
    .acl_rd_en(acl_rd_en),
    .acl_rd_bank(acl_rd_bank),
    .acl_rd_row(acl_rd_row),
    .acl_rd_data(acl_rd_data),
    .pool_rd_en(pool_rd_en),
    .pool_rd_bank(pool_rd_bank),
    .pool_rd_row(pool_rd_row),
    .pool_rd_data(pool_rd_data),
    .maglev_rd_en(maglev_rd_en),
    .maglev_rd_bank(maglev_rd_bank),
    .maglev_rd_row(maglev_rd_row),
    .maglev_rd_data(maglev_rd_data),
    .backend_rd_en(backend_rd_en),
    .backend_rd_bank(backend_rd_bank),
    .backend_rd_row(backend_rd_row),
    .backend_rd_data(backend_rd_data),
    .ct_rd_en(ct_rd_en),
    .ct_rd_row(ct_rd_row),
    .ct_rd_data(ct_rd_data),
    .hit_set_en(hit_set_en),
    .hit_set_index(hit_set_index),
    .m_valid(m_res_valid),
    .m_inject(m_res_inject),
    .m_verdict(m_res_verdict),
    .m_reason(m_res_reason),
    .m_bank(m_res_bank),
    .m_rule_valid(m_res_rule_valid),
    .m_rule(m_res_rule),
    .m_pool_valid(m_res_pool_valid),
    .m_pool(m_res_pool),
    .m_backend_valid(m_res_backend_valid),
    .m_backend(m_res_backend),
    .m_key_valid(m_res_key_valid),
    .m_key(m_res_key),
    .m_conntrack(m_res_conntrack),
    .m_ct_index(m_res_ct_index),
    .m_flow_hash(m_res_flow_hash),
    .m_ip_id(m_res_ip_id),
    .m_len(m_res_len),
    .m_out_len(m_res_out_len),
    .m_event_valid(m_res_event_valid),
    .m_event(m_res_event),
    .m_protocol(m_res_protocol),
    .m_client(m_res_client),
    .m_client_port(m_res_client_port),
    .m_vip(m_res_vip),
    .m_vip_port(m_res_vip_port),
    .m_icmp(m_res_icmp),
    .m_delivery(m_res_delivery),
    .m_be_ipv6(m_res_be_ipv6),
    .m_be_addr(m_res_be_addr),
    .m_be_mac(m_res_be_mac),
    .m_ipv6(m_res_ipv6),
    .m_l3_offset(m_res_l3_offset),
    .m_l3_end(m_res_l3_end),
    .m_tos(m_res_tos),
    .m_dont_fragment(m_res_dont_fragment)
);

// ---- packet FIFO, payload sums, editor ------------------------------------------------------

wire [DATA_WIDTH-1:0] pf_data;
wire [KEEP_WIDTH-1:0] pf_keep;
wire                  pf_last;
wire                  pf_valid;
wire                  pf_ready;

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 1),
    .DEPTH(PKT_FIFO_DEPTH)
) pkt_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data({in_tlast, in_tkeep, in_tdata}),
    .s_valid(rx_beat),
    .s_ready(),
    .m_data({pf_last, pf_keep, pf_data}),
    .m_valid(pf_valid),
    .m_ready(pf_ready),
    .count(pkt_count)
);
/* verilator lint_on PINCONNECTEMPTY */

wire        csum_valid;
wire [15:0] csum;

nlb_l3_csum #(
    .DATA_WIDTH(DATA_WIDTH)
) csum_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(in_tdata),
    .s_axis_tkeep(in_tkeep),
    .s_axis_tvalid(in_tvalid),
    .s_axis_tready(rx_ready_reg),
    .s_axis_tlast(in_tlast),
    .m_valid(csum_valid),
    .m_sum(csum)
);

/* verilator lint_off PINCONNECTEMPTY */
nlb_editor #(
    .LEN_WIDTH(LW)
) editor_inst (
    .clk(clk),
    .rst(rst),
    .s_res_valid(m_res_valid),
    .s_res_verdict(m_res_verdict),
    .s_res_reason(m_res_reason),
    .s_res_bank(m_res_bank),
    .s_res_rule_valid(m_res_rule_valid),
    .s_res_rule(m_res_rule),
    .s_res_flow_hash(m_res_flow_hash),
    .s_res_ip_id(m_res_ip_id),
    .s_res_len(m_res_len),
    .s_res_out_len(m_res_out_len),
    .s_res_delivery(m_res_delivery),
    .s_res_be_ipv6(m_res_be_ipv6),
    .s_res_be_addr(m_res_be_addr),
    .s_res_be_mac(m_res_be_mac),
    .s_res_ipv6(m_res_ipv6),
    .s_res_l3_offset(m_res_l3_offset),
    .s_res_l3_end(m_res_l3_end),
    .s_res_tos(m_res_tos),
    .s_res_dont_fragment(m_res_dont_fragment),
    .s_csum_valid(csum_valid),
    .s_csum(csum),
    .ctrl_local_mac(ctrl_local_mac),
    .ctrl_gue_port(ctrl_gue_port),
    .ctrl_outer_src_v4(ctrl_outer_src_v4),
    .ctrl_outer_src_v4_len(ctrl_outer_src_v4_len),
    .ctrl_outer_src_v6(ctrl_outer_src_v6),
    .ctrl_outer_src_v6_mask(ctrl_outer_src_v6_mask),
    .s_frame_data(pf_data),
    .s_frame_keep(pf_keep),
    .s_frame_last(pf_last),
    .s_frame_valid(pf_valid),
    .s_frame_ready(pf_ready),
    .m_axis_tx_tdata(m_axis_tx_tdata),
    .m_axis_tx_tkeep(m_axis_tx_tkeep),
    .m_axis_tx_tvalid(m_axis_tx_tvalid),
    .m_axis_tx_tready(m_axis_tx_tready),
    .m_axis_tx_tlast(m_axis_tx_tlast),
    .m_axis_punt_tdata(m_axis_punt_tdata),
    .m_axis_punt_tkeep(m_axis_punt_tkeep),
    .m_axis_punt_tvalid(m_axis_punt_tvalid),
    .m_axis_punt_tready(m_axis_punt_tready),
    .m_axis_punt_tlast(m_axis_punt_tlast),
    .jobs(),
    .frame_done(frame_done)
);
/* verilator lint_on PINCONNECTEMPTY */

// ---- events -----------------------------------------------------------------------------------

// learn_event: event, protocol, src port (client), dst port (VIP), src addr, dst addr,
// backend, rule, flow hash, from bit 0 up.
wire [NLB_LEARN_EVENT_WIDTH-1:0] event_rec = {m_res_flow_hash, m_res_rule, m_res_backend,
    m_res_vip, m_res_client, m_res_vip_port, m_res_client_port, m_res_protocol, m_res_event};
wire [$clog2(EVENT_DEPTH):0] event_count;
wire                         event_push = m_res_valid && m_res_event_valid;
wire                         event_full = event_count >= EVENT_DEPTH;
reg                          event_dropped_reg = 1'b0;
wire [NLB_LEARN_EVENT_WIDTH-1:0] event_out;

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(NLB_LEARN_EVENT_WIDTH),
    .DEPTH(EVENT_DEPTH)
) event_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(event_rec),
    .s_valid(event_push && !event_full),
    .s_ready(),
    .m_data(event_out),
    .m_valid(m_axis_event_tvalid),
    .m_ready(m_axis_event_tready),
    .count(event_count)
);
/* verilator lint_on PINCONNECTEMPTY */

always @(posedge clk) begin
    event_dropped_reg <= event_push && event_full;
    if (rst) begin
        event_dropped_reg <= 1'b0;
    end
end

assign m_axis_event_tdata = {{(384-NLB_LEARN_EVENT_WIDTH){1'b0}}, event_out};
assign m_event_dropped = event_dropped_reg;

// ---- packets in flight --------------------------------------------------------------------

integer fb;
initial begin
    for (fb = 0; fb < 2; fb = fb + 1) begin
        in_flight_reg[fb] = 16'd0;
    end
end

always @(posedge clk) begin
    for (fb = 0; fb < 2; fb = fb + 1) begin
        in_flight_reg[fb] <= in_flight_reg[fb]
            + {15'd0, rx_first && ctrl_active_bank == fb[0]}
            - {15'd0, m_res_valid && m_res_bank == fb[0]};
    end
    if (rst) begin
        for (fb = 0; fb < 2; fb = fb + 1) begin
            in_flight_reg[fb] <= 16'd0;
        end
    end
end

endmodule

`resetall
