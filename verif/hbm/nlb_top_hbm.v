`resetall
`timescale 1ns / 1ps
`default_nettype none

// nlb_top with its table memories on HBM, for simulation: the connection table on 16
// pseudo-channels and the Maglev slots on 2 (256-bit AXI4 ports, as on a U280 or U55C), each
// table behind an nlb_hbm_model (latency with a tail, bandwidth, refresh, reordering,
// back-pressure). Its ports are nlb_top's without the memory ports, plus the models'
// configuration (hbm_cfg_*, shared; the Maglev model's seed is hbm_cfg_seed + 1, each read
// while rst is high) and statistics (hbm_ct_*, hbm_mg_*; hbm_hist_sel selects a latency bin of
// both histograms). The sim profile's tables; verif/build.rs builds it as the model `top_hbm`.
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_top_hbm (
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
    m_axis_pass_tdata,
    m_axis_pass_tkeep,
    m_axis_pass_tvalid,
    m_axis_pass_tready,
    m_axis_pass_tlast,
    m_axis_event_tdata,
    m_axis_event_tvalid,
    m_axis_event_tready,
    m_event_dropped,
    m_axi_dma_awaddr,
    m_axi_dma_awlen,
    m_axi_dma_awsize,
    m_axi_dma_awburst,
    m_axi_dma_awvalid,
    m_axi_dma_awready,
    m_axi_dma_wdata,
    m_axi_dma_wstrb,
    m_axi_dma_wlast,
    m_axi_dma_wvalid,
    m_axi_dma_wready,
    m_axi_dma_bresp,
    m_axi_dma_bvalid,
    m_axi_dma_bready,
    m_axi_dma_araddr,
    m_axi_dma_arlen,
    m_axi_dma_arsize,
    m_axi_dma_arburst,
    m_axi_dma_arvalid,
    m_axi_dma_arready,
    m_axi_dma_rdata,
    m_axi_dma_rresp,
    m_axi_dma_rlast,
    m_axi_dma_rvalid,
    m_axi_dma_rready,
    m_dma_irq,
    m_drop_valid,
    m_drop_reason,
    m_drop_seq,
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
    hbm_cfg_seed,
    hbm_cfg_lat_min,
    hbm_cfg_lat_spread,
    hbm_cfg_tail_per_mille,
    hbm_cfg_tail_max,
    hbm_cfg_ref_period,
    hbm_cfg_ref_stall,
    hbm_cfg_bw_per_mille,
    hbm_cfg_arready_drop_per_mille,
    hbm_ct_reads,
    hbm_ct_beats,
    hbm_ct_lat_sum,
    hbm_ct_lat_max,
    hbm_mg_reads,
    hbm_mg_beats,
    hbm_mg_lat_sum,
    hbm_mg_lat_max,
    hbm_hist_sel,
    hbm_ct_hist_count,
    hbm_mg_hist_count,
`ifdef NLB_SIM_HOOKS
    sim_cnt_preset_valid,
    sim_cnt_preset_kind,
    sim_cnt_preset_index,
    sim_cnt_preset_value,
    sim_inject_waits,
`endif
    spi_sck,
    spi_cs_n,
    spi_mosi,
    spi_miso
);

`include "nlb_regmap.vh"

// fw_id words stamped by the build.
parameter [31:0] BUILD_ID = 32'd0;
parameter [31:0] GIT_HASH = 32'd0;

localparam DATA_WIDTH = 512;
localparam KEEP_WIDTH = DATA_WIDTH / 8;
localparam INJ_USER_W = NLB_INJECT_HEADER_POOL_LSB + NLB_INJECT_HEADER_POOL_W;
localparam LW = 17;
localparam CTIW = $clog2(NLB_PROFILE_SIM_CT_BUCKETS) + $clog2(NLB_PROFILE_SIM_CT_WAYS);
// The memories: 16 + 4 pseudo-channels of 256 bits, 512 packets per memory stage.
localparam CT_CH = 16;
localparam MG_CH = 4;
localparam DW = 256;
localparam ADDR_W = 32;
localparam ID_W = 6;
// Beats per channel: 4096 buckets of 256 bytes over 16 channels; 2 x 131072 slots of 2 bytes
// over 4 channels.
localparam CT_WORDS = NLB_PROFILE_SIM_CT_BUCKETS / CT_CH * 8;
localparam MG_WORDS = 2 * NLB_PROFILE_SIM_MAGLEV_SLOTS / 16 / MG_CH;

// ---- ports (as nlb_top's) --------------------------------------------------------------------------------

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
// Received frames: no tready, a beat is taken in every clock it is valid (tkeep all ones but on
// the last beat of a frame).
input  wire [DATA_WIDTH-1:0] s_axis_rx_tdata;
input  wire [KEEP_WIDTH-1:0] s_axis_rx_tkeep;
input  wire                  s_axis_rx_tvalid;
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

// PASS frames, unchanged.
output wire [DATA_WIDTH-1:0] m_axis_pass_tdata;
output wire [KEEP_WIDTH-1:0] m_axis_pass_tkeep;
output wire                  m_axis_pass_tvalid;
input  wire                  m_axis_pass_tready;
output wire                  m_axis_pass_tlast;

// Learn/teardown events (learn_event layout, words 0..11).
output wire [383:0]          m_axis_event_tdata;
output wire                  m_axis_event_tvalid;
input  wire                  m_axis_event_tready;
output wire                  m_event_dropped;
// The host rings' AXI4 master and MSI-X requests, as nlb_top has them.
output wire [63:0]           m_axi_dma_awaddr;
output wire [7:0]            m_axi_dma_awlen;
output wire [2:0]            m_axi_dma_awsize;
output wire [1:0]            m_axi_dma_awburst;
output wire                  m_axi_dma_awvalid;
input  wire                  m_axi_dma_awready;
output wire [511:0]          m_axi_dma_wdata;
output wire [63:0]           m_axi_dma_wstrb;
output wire                  m_axi_dma_wlast;
output wire                  m_axi_dma_wvalid;
input  wire                  m_axi_dma_wready;
input  wire [1:0]            m_axi_dma_bresp;
input  wire                  m_axi_dma_bvalid;
output wire                  m_axi_dma_bready;
output wire [63:0]           m_axi_dma_araddr;
output wire [7:0]            m_axi_dma_arlen;
output wire [2:0]            m_axi_dma_arsize;
output wire [1:0]            m_axi_dma_arburst;
output wire                  m_axi_dma_arvalid;
input  wire                  m_axi_dma_arready;
input  wire [511:0]          m_axi_dma_rdata;
input  wire [1:0]            m_axi_dma_rresp;
input  wire                  m_axi_dma_rlast;
input  wire                  m_axi_dma_rvalid;
output wire                  m_axi_dma_rready;
output wire [3:0]            m_dma_irq;


// A received frame dropped for lack of room (docs/pipeline.md section 14.4): reason
// (NO_ROOM_LOOKUP or NO_ROOM_BUFFER) and the frame's number among received frames.
output wire                  m_drop_valid;
output wire [4:0]            m_drop_reason;
output wire [31:0]           m_drop_seq;

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
// Clocks the host DMA engine offered the inject queue a beat it could not take (nlb_top).
output wire [31:0] sim_inject_waits;
`endif

// SPI bus to the configuration flash (spi_flash block): on an UltraScale+ card the shell
// routes these through STARTUPE3 to the configuration flash; in simulation a flash model sits
// on them.
output wire spi_sck;
output wire spi_cs_n;
output wire spi_mosi;
input  wire spi_miso;


input  wire [31:0]         hbm_cfg_seed;
input  wire [15:0]         hbm_cfg_lat_min;
input  wire [15:0]         hbm_cfg_lat_spread;
input  wire [9:0]          hbm_cfg_tail_per_mille;
input  wire [15:0]         hbm_cfg_tail_max;
input  wire [15:0]         hbm_cfg_ref_period;
input  wire [15:0]         hbm_cfg_ref_stall;
input  wire [10:0]         hbm_cfg_bw_per_mille;
input  wire [9:0]          hbm_cfg_arready_drop_per_mille;
output wire [63:0]         hbm_ct_reads;
output wire [CT_CH*32-1:0] hbm_ct_beats;
output wire [63:0]         hbm_ct_lat_sum;
output wire [31:0]         hbm_ct_lat_max;
output wire [63:0]         hbm_mg_reads;
output wire [MG_CH*32-1:0] hbm_mg_beats;
output wire [63:0]         hbm_mg_lat_sum;
output wire [31:0]         hbm_mg_lat_max;
input  wire [7:0]          hbm_hist_sel;
output wire [31:0]         hbm_ct_hist_count;
output wire [31:0]         hbm_mg_hist_count;

// ---- the memory ports ------------------------------------------------------------------------

wire [CT_CH*ADDR_W-1:0] ct_araddr, ct_awaddr;
wire [CT_CH*ID_W-1:0]   ct_arid, ct_rid, ct_awid, ct_bid;
wire [CT_CH*8-1:0]      ct_arlen, ct_awlen;
wire [CT_CH-1:0]        ct_arvalid, ct_arready, ct_rlast, ct_rvalid, ct_rready;
wire [CT_CH-1:0]        ct_awvalid, ct_awready, ct_wlast, ct_wvalid, ct_wready;
wire [CT_CH-1:0]        ct_bvalid, ct_bready;
wire [CT_CH*DW-1:0]     ct_rdata, ct_wdata;
wire [CT_CH*DW/8-1:0]   ct_wstrb;
wire [MG_CH*ADDR_W-1:0] mg_araddr, mg_awaddr;
wire [MG_CH*ID_W-1:0]   mg_arid, mg_rid, mg_awid, mg_bid;
wire [MG_CH*8-1:0]      mg_arlen, mg_awlen;
wire [MG_CH-1:0]        mg_arvalid, mg_arready, mg_rlast, mg_rvalid, mg_rready;
wire [MG_CH-1:0]        mg_awvalid, mg_awready, mg_wlast, mg_wvalid, mg_wready;
wire [MG_CH-1:0]        mg_bvalid, mg_bready;
wire [MG_CH*DW-1:0]     mg_rdata, mg_wdata;
wire [MG_CH*DW/8-1:0]   mg_wstrb;

nlb_top #(
    .BUILD_ID(BUILD_ID),
    .GIT_HASH(GIT_HASH),
    .MEM_ONCHIP(0),
    .CT_CHANNELS(CT_CH),
    .CT_DATA_W(DW),
    .CT_SLOTS(512),
    .MG_CHANNELS(MG_CH),
    .MG_DATA_W(DW),
    .MG_SLOTS(512),
    .MAX_IN_FLIGHT(1024),
    .ADDR_W(ADDR_W),
    .ID_W(ID_W)
) top_inst (
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
    .s_axis_rx_tdata(s_axis_rx_tdata),
    .s_axis_rx_tkeep(s_axis_rx_tkeep),
    .s_axis_rx_tvalid(s_axis_rx_tvalid),
    .s_axis_rx_tlast(s_axis_rx_tlast),
    .s_axis_inject_tdata(s_axis_inject_tdata),
    .s_axis_inject_tkeep(s_axis_inject_tkeep),
    .s_axis_inject_tvalid(s_axis_inject_tvalid),
    .s_axis_inject_tready(s_axis_inject_tready),
    .s_axis_inject_tlast(s_axis_inject_tlast),
    .s_axis_inject_tuser(s_axis_inject_tuser),
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
    .m_axis_pass_tdata(m_axis_pass_tdata),
    .m_axis_pass_tkeep(m_axis_pass_tkeep),
    .m_axis_pass_tvalid(m_axis_pass_tvalid),
    .m_axis_pass_tready(m_axis_pass_tready),
    .m_axis_pass_tlast(m_axis_pass_tlast),
    .m_axis_event_tdata(m_axis_event_tdata),
    .m_axis_event_tvalid(m_axis_event_tvalid),
    .m_axis_event_tready(m_axis_event_tready),
    .m_event_dropped(m_event_dropped),
    .m_axi_dma_awaddr(m_axi_dma_awaddr),
    .m_axi_dma_awlen(m_axi_dma_awlen),
    .m_axi_dma_awsize(m_axi_dma_awsize),
    .m_axi_dma_awburst(m_axi_dma_awburst),
    .m_axi_dma_awvalid(m_axi_dma_awvalid),
    .m_axi_dma_awready(m_axi_dma_awready),
    .m_axi_dma_wdata(m_axi_dma_wdata),
    .m_axi_dma_wstrb(m_axi_dma_wstrb),
    .m_axi_dma_wlast(m_axi_dma_wlast),
    .m_axi_dma_wvalid(m_axi_dma_wvalid),
    .m_axi_dma_wready(m_axi_dma_wready),
    .m_axi_dma_bresp(m_axi_dma_bresp),
    .m_axi_dma_bvalid(m_axi_dma_bvalid),
    .m_axi_dma_bready(m_axi_dma_bready),
    .m_axi_dma_araddr(m_axi_dma_araddr),
    .m_axi_dma_arlen(m_axi_dma_arlen),
    .m_axi_dma_arsize(m_axi_dma_arsize),
    .m_axi_dma_arburst(m_axi_dma_arburst),
    .m_axi_dma_arvalid(m_axi_dma_arvalid),
    .m_axi_dma_arready(m_axi_dma_arready),
    .m_axi_dma_rdata(m_axi_dma_rdata),
    .m_axi_dma_rresp(m_axi_dma_rresp),
    .m_axi_dma_rlast(m_axi_dma_rlast),
    .m_axi_dma_rvalid(m_axi_dma_rvalid),
    .m_axi_dma_rready(m_axi_dma_rready),
    .m_dma_irq(m_dma_irq),
    .m_drop_valid(m_drop_valid),
    .m_drop_reason(m_drop_reason),
    .m_drop_seq(m_drop_seq),
    .m_res_valid(m_res_valid),
    .m_res_inject(m_res_inject),
    .m_res_verdict(m_res_verdict),
    .m_res_reason(m_res_reason),
    .m_res_bank(m_res_bank),
    .m_res_rule_valid(m_res_rule_valid),
    .m_res_rule(m_res_rule),
    .m_res_pool_valid(m_res_pool_valid),
    .m_res_pool(m_res_pool),
    .m_res_backend_valid(m_res_backend_valid),
    .m_res_backend(m_res_backend),
    .m_res_key_valid(m_res_key_valid),
    .m_res_key(m_res_key),
    .m_res_conntrack(m_res_conntrack),
    .m_res_ct_index(m_res_ct_index),
    .m_res_flow_hash(m_res_flow_hash),
    .m_res_ip_id(m_res_ip_id),
    .m_res_len(m_res_len),
    .m_res_out_len(m_res_out_len),
    .m_res_event_valid(m_res_event_valid),
    .m_res_event(m_res_event),
    .m_res_protocol(m_res_protocol),
    .m_res_client(m_res_client),
    .m_res_client_port(m_res_client_port),
    .m_res_vip(m_res_vip),
    .m_res_vip_port(m_res_vip_port),
    .m_res_icmp(m_res_icmp),
    .m_res_delivery(m_res_delivery),
    .m_res_be_ipv6(m_res_be_ipv6),
    .m_res_be_addr(m_res_be_addr),
    .m_res_be_mac(m_res_be_mac),
    .m_res_ipv6(m_res_ipv6),
    .m_res_l3_offset(m_res_l3_offset),
    .m_res_l3_end(m_res_l3_end),
    .m_res_tos(m_res_tos),
    .m_res_dont_fragment(m_res_dont_fragment),
    .m_mon_active_bank(m_mon_active_bank),
    .m_mon_enable(m_mon_enable),
    .m_mon_default_action(m_mon_default_action),
    .m_mon_packets_in_flight(m_mon_packets_in_flight),
    .m_mon_bank_in_use(m_mon_bank_in_use),
    .m_mon_hit_set(m_mon_hit_set),
    .m_mon_hit_set_index(m_mon_hit_set_index),
    .m_mon_hit_read(m_mon_hit_read),
    .spi_sck(spi_sck),
    .spi_cs_n(spi_cs_n),
    .spi_mosi(spi_mosi),
    .spi_miso(spi_miso),
`ifdef NLB_SIM_HOOKS
    .sim_cnt_preset_valid(sim_cnt_preset_valid),
    .sim_cnt_preset_kind(sim_cnt_preset_kind),
    .sim_cnt_preset_index(sim_cnt_preset_index),
    .sim_cnt_preset_value(sim_cnt_preset_value),
    .sim_inject_waits(sim_inject_waits),
`endif
    .m_axi_ct_araddr(ct_araddr),
    .m_axi_ct_arid(ct_arid),
    .m_axi_ct_arlen(ct_arlen),
    .m_axi_ct_arvalid(ct_arvalid),
    .m_axi_ct_arready(ct_arready),
    .m_axi_ct_rdata(ct_rdata),
    .m_axi_ct_rid(ct_rid),
    .m_axi_ct_rlast(ct_rlast),
    .m_axi_ct_rvalid(ct_rvalid),
    .m_axi_ct_rready(ct_rready),
    .m_axi_ct_awaddr(ct_awaddr),
    .m_axi_ct_awid(ct_awid),
    .m_axi_ct_awlen(ct_awlen),
    .m_axi_ct_awvalid(ct_awvalid),
    .m_axi_ct_awready(ct_awready),
    .m_axi_ct_wdata(ct_wdata),
    .m_axi_ct_wstrb(ct_wstrb),
    .m_axi_ct_wlast(ct_wlast),
    .m_axi_ct_wvalid(ct_wvalid),
    .m_axi_ct_wready(ct_wready),
    .m_axi_ct_bid(ct_bid),
    .m_axi_ct_bvalid(ct_bvalid),
    .m_axi_mg_araddr(mg_araddr),
    .m_axi_mg_arid(mg_arid),
    .m_axi_mg_arlen(mg_arlen),
    .m_axi_mg_arvalid(mg_arvalid),
    .m_axi_mg_arready(mg_arready),
    .m_axi_mg_rdata(mg_rdata),
    .m_axi_mg_rid(mg_rid),
    .m_axi_mg_rlast(mg_rlast),
    .m_axi_mg_rvalid(mg_rvalid),
    .m_axi_mg_rready(mg_rready),
    .m_axi_mg_awaddr(mg_awaddr),
    .m_axi_mg_awid(mg_awid),
    .m_axi_mg_awlen(mg_awlen),
    .m_axi_mg_awvalid(mg_awvalid),
    .m_axi_mg_awready(mg_awready),
    .m_axi_mg_wdata(mg_wdata),
    .m_axi_mg_wstrb(mg_wstrb),
    .m_axi_mg_wlast(mg_wlast),
    .m_axi_mg_wvalid(mg_wvalid),
    .m_axi_mg_wready(mg_wready),
    .m_axi_mg_bid(mg_bid),
    .m_axi_mg_bvalid(mg_bvalid),
    .m_axi_ct_bready(ct_bready),
    .m_axi_mg_bready(mg_bready)
);

nlb_hbm_model #(
    .CHANNELS(CT_CH),
    .DATA_W(DW),
    .ADDR_W(ADDR_W),
    .ID_W(ID_W),
    .WORDS(CT_WORDS),
    .QUEUE(64)
) ct_hbm_inst (
    .clk(clk),
    .rst(rst),
    .cfg_seed(hbm_cfg_seed),
    .cfg_lat_min(hbm_cfg_lat_min),
    .cfg_lat_spread(hbm_cfg_lat_spread),
    .cfg_tail_per_mille(hbm_cfg_tail_per_mille),
    .cfg_tail_max(hbm_cfg_tail_max),
    .cfg_ref_period(hbm_cfg_ref_period),
    .cfg_ref_stall(hbm_cfg_ref_stall),
    .cfg_bw_per_mille(hbm_cfg_bw_per_mille),
    .cfg_arready_drop_per_mille(hbm_cfg_arready_drop_per_mille),
    .s_axi_araddr(ct_araddr),
    .s_axi_arid(ct_arid),
    .s_axi_arlen(ct_arlen),
    .s_axi_arvalid(ct_arvalid),
    .s_axi_arready(ct_arready),
    .s_axi_rdata(ct_rdata),
    .s_axi_rid(ct_rid),
    .s_axi_rlast(ct_rlast),
    .s_axi_rvalid(ct_rvalid),
    .s_axi_rready(ct_rready),
    .s_axi_awaddr(ct_awaddr),
    .s_axi_awid(ct_awid),
    .s_axi_awlen(ct_awlen),
    .s_axi_awvalid(ct_awvalid),
    .s_axi_awready(ct_awready),
    .s_axi_wdata(ct_wdata),
    .s_axi_wstrb(ct_wstrb),
    .s_axi_wlast(ct_wlast),
    .s_axi_wvalid(ct_wvalid),
    .s_axi_wready(ct_wready),
    .s_axi_bid(ct_bid),
    .s_axi_bvalid(ct_bvalid),
    .s_axi_bready(ct_bready),
    .st_reads(hbm_ct_reads),
    .st_beats(hbm_ct_beats),
    .st_lat_sum(hbm_ct_lat_sum),
    .st_lat_max(hbm_ct_lat_max),
    .st_hist_sel(hbm_hist_sel),
    .st_hist_count(hbm_ct_hist_count)
);

nlb_hbm_model #(
    .CHANNELS(MG_CH),
    .DATA_W(DW),
    .ADDR_W(ADDR_W),
    .ID_W(ID_W),
    .WORDS(MG_WORDS),
    .QUEUE(64)
) mg_hbm_inst (
    .clk(clk),
    .rst(rst),
    .cfg_seed(hbm_cfg_seed + 32'd1),
    .cfg_lat_min(hbm_cfg_lat_min),
    .cfg_lat_spread(hbm_cfg_lat_spread),
    .cfg_tail_per_mille(hbm_cfg_tail_per_mille),
    .cfg_tail_max(hbm_cfg_tail_max),
    .cfg_ref_period(hbm_cfg_ref_period),
    .cfg_ref_stall(hbm_cfg_ref_stall),
    .cfg_bw_per_mille(hbm_cfg_bw_per_mille),
    .cfg_arready_drop_per_mille(hbm_cfg_arready_drop_per_mille),
    .s_axi_araddr(mg_araddr),
    .s_axi_arid(mg_arid),
    .s_axi_arlen(mg_arlen),
    .s_axi_arvalid(mg_arvalid),
    .s_axi_arready(mg_arready),
    .s_axi_rdata(mg_rdata),
    .s_axi_rid(mg_rid),
    .s_axi_rlast(mg_rlast),
    .s_axi_rvalid(mg_rvalid),
    .s_axi_rready(mg_rready),
    .s_axi_awaddr(mg_awaddr),
    .s_axi_awid(mg_awid),
    .s_axi_awlen(mg_awlen),
    .s_axi_awvalid(mg_awvalid),
    .s_axi_awready(mg_awready),
    .s_axi_wdata(mg_wdata),
    .s_axi_wstrb(mg_wstrb),
    .s_axi_wlast(mg_wlast),
    .s_axi_wvalid(mg_wvalid),
    .s_axi_wready(mg_wready),
    .s_axi_bid(mg_bid),
    .s_axi_bvalid(mg_bvalid),
    .s_axi_bready(mg_bready),
    .st_reads(hbm_mg_reads),
    .st_beats(hbm_mg_beats),
    .st_lat_sum(hbm_mg_lat_sum),
    .st_lat_max(hbm_mg_lat_max),
    .st_hist_sel(hbm_hist_sel),
    .st_hist_count(hbm_mg_hist_count)
);

endmodule

`resetall
