`resetall
`timescale 1ns / 1ps
`default_nettype none

// The NIC pipeline's top level: the AXI-Lite register file with the banked tables
// (nlb_regs), on its extension bus the connection table (nlb_conntrack), the counters
// (nlb_counters) and the configuration flash controller (nlb_spi_flash, its SPI pins are
// nlb_top's spi_*), and the received stream into the packet
// FIFO and, beside it, through the header parser (nlb_parser) and the lookup pipeline
// (nlb_lookup); the editor (nlb_editor) pairs each result with its frame and sends it on the
// transmit, punt or pass stream or drops it; learn/teardown events go out on the event stream.
// Every packet's result (verdict, reason, rule, pool, backend, connection-table outcome, flow
// hash, event) also comes out on the m_res_* monitor port, in order.
//
// The connection table and the Maglev slots sit behind the lookup's memory ports
// (docs/pipeline.md section 14): on-chip RAM (nlb_mem_ram) when MEM_ONCHIP, else nlb_top's
// m_axi_ct_* and m_axi_mg_* ports, one AXI4 port per HBM pseudo-channel.
//
// Receive side (docs/pipeline.md section 14.4): s_axis_rx has no tready; every beat is taken.
// The first beat of a frame latches ctrl.active_bank, ctrl.enable and ctrl.default_action as
// it arrives; the beats wait in a receive queue (RXQ_DEPTH beats) only while an injected frame
// passes. Frames leave the queue at one beat per clock and are admitted or dropped whole at
// their first beat: dropped (reason NO_ROOM_LOOKUP) when MAX_IN_FLIGHT packets are between
// their first beat and the editor or the counters cannot take more, dropped (NO_ROOM_BUFFER)
// when the packet FIFO has less room than a frame of RX_MAX_BEATS beats (16,383 bytes, the
// largest supported). A dropped frame's beats are discarded; it is counted (reason, DROP
// verdict, bytes) and shown on m_drop_* (in the clock after its first beat left the queue:
// its reason and its number among received frames, from 0 after reset). Injected frames (their
// port has a skid buffer, tready from a register) start between two frames while the admission
// has room and the receive queue is at most half full, so it never overflows. ctrl_* are
// latched, and ctrl.packets_in_flight counts a frame, from the clock its first beat is taken at
// its port (before the receive queue or the inject skid buffer).
//
// Output streams: m_axis_tx (forwarded frames), m_axis_punt (punt header beat + the frame's
// first 9728 bytes), m_axis_pass (PASS frames, unchanged: toward the host's network stack),
// m_axis_event (one learn_event record per beat, the layout in the low 358
// bits; an event that finds EVENT_DEPTH events queued is dropped and m_event_dropped pulses).
//
// Host rings: nlb_host_dma (punt, event and inject rings) and nlb_cmd_ring (the command ring,
// which runs its commands through the register file's windows: an AXI-Lite master beside the
// host's, nlb_axil_arb2) share the m_axi_dma_* port (nlb_axi_mux2).
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
    m_axi_ct_araddr,
    m_axi_ct_arid,
    m_axi_ct_arlen,
    m_axi_ct_arvalid,
    m_axi_ct_arready,
    m_axi_ct_rdata,
    m_axi_ct_rid,
    m_axi_ct_rlast,
    m_axi_ct_rvalid,
    m_axi_ct_rready,
    m_axi_ct_awaddr,
    m_axi_ct_awid,
    m_axi_ct_awlen,
    m_axi_ct_awvalid,
    m_axi_ct_awready,
    m_axi_ct_wdata,
    m_axi_ct_wstrb,
    m_axi_ct_wlast,
    m_axi_ct_wvalid,
    m_axi_ct_wready,
    m_axi_ct_bid,
    m_axi_ct_bvalid,
    m_axi_ct_bready,
    m_axi_mg_araddr,
    m_axi_mg_arid,
    m_axi_mg_arlen,
    m_axi_mg_arvalid,
    m_axi_mg_arready,
    m_axi_mg_rdata,
    m_axi_mg_rid,
    m_axi_mg_rlast,
    m_axi_mg_rvalid,
    m_axi_mg_rready,
    m_axi_mg_awaddr,
    m_axi_mg_awid,
    m_axi_mg_awlen,
    m_axi_mg_awvalid,
    m_axi_mg_awready,
    m_axi_mg_wdata,
    m_axi_mg_wstrb,
    m_axi_mg_wlast,
    m_axi_mg_wvalid,
    m_axi_mg_wready,
    m_axi_mg_bid,
    m_axi_mg_bvalid,
    m_axi_mg_bready,
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
parameter PKT_FIFO_DEPTH = 2048;
// Packets admitted and not yet through the editor (a power of two: the lookup's descriptor
// FIFO and the editor's job FIFO hold that many).
parameter MAX_IN_FLIGHT = 512;
// Receive queue beats (a power of two >= 2 x 256: half of it holds while an injected frame of
// up to 152 beats passes).
parameter RXQ_DEPTH = 512;
// Table memories (docs/pipeline.md section 14). MEM_ONCHIP = 1: block RAM behind the memory
// ports (one channel each; a connection-table row is one beat of CT_DATA_W = 1536 bits);
// 0: the ports are m_axi_ct_* / m_axi_mg_* (HBM pseudo-channels, 256-bit data). Channels, data
// widths and packets per memory stage per table; AXI address and id widths; each channel's
// region starts at *_CH_BASE + channel * *_CH_STRIDE.
parameter MEM_ONCHIP = 1;
// Hardware learning (docs/pipeline.md section 15.3, dma.caps.hw_learn), on chip and behind HBM.
parameter HW_LEARN = 1;
parameter CT_CHANNELS = 1;
parameter CT_DATA_W = 1536;
parameter CT_SLOTS = 64;
parameter MG_CHANNELS = 1;
parameter MG_DATA_W = 256;
parameter MG_SLOTS = 64;
parameter ADDR_W = 32;
parameter ID_W = 6;
parameter [ADDR_W-1:0] CT_CH_BASE = {ADDR_W{1'b0}};
parameter [ADDR_W-1:0] CT_CH_STRIDE = {ADDR_W{1'b0}};
parameter [ADDR_W-1:0] MG_CH_BASE = {ADDR_W{1'b0}};
parameter [ADDR_W-1:0] MG_CH_STRIDE = {ADDR_W{1'b0}};
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
// The largest frame received: 16,383 bytes (docs/pipeline.md section 14.4).
localparam RX_MAX_BEATS = 256;
localparam MIF_BITS = $clog2(MAX_IN_FLIGHT);
localparam RXQ_BITS = $clog2(RXQ_DEPTH);
// Memory rows (nlb_lookup): a connection-table bucket is 4 x 384 bits, 256 bytes apart; a
// Maglev row 16 slots, 32 bytes apart.
localparam CT_ROW_W = CT_WAYS * NLB_CT_ENTRY_WORDS * 32;
localparam MG_ROWS = 2 * MAGLEV_SLOTS / 16;

initial begin
    if (MEM_ONCHIP != 0 && (CT_CHANNELS != 1 || MG_CHANNELS != 1 || CT_DATA_W != CT_ROW_W
            || MG_DATA_W != 256)) begin
        $error("nlb_top: on-chip tables take one channel each, a row per beat");
        $finish;
    end
    if ((1 << MIF_BITS) != MAX_IN_FLIGHT || (1 << RXQ_BITS) != RXQ_DEPTH || RXQ_DEPTH < 512
            || PKT_FIFO_DEPTH < 2 * RX_MAX_BEATS) begin
        $error("nlb_top: MAX_IN_FLIGHT, RXQ_DEPTH (>= 512) powers of two; PKT_FIFO_DEPTH >= 512");
        $finish;
    end
end

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

// PASS frames (docs/pipeline.md section 9), unchanged and whole.
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

// The host rings (nlb_host_dma): an AXI4 master toward the shell's PCIe DMA or bridge,
// addresses are IOVAs; punted frames and events for rings in use go there instead of the
// two streams above. m_dma_irq: MSI-X requests, one clock per message, bit = vector.
output wire [63:0]            m_axi_dma_awaddr;
output wire [7:0]             m_axi_dma_awlen;
output wire [2:0]             m_axi_dma_awsize;
output wire [1:0]             m_axi_dma_awburst;
output wire                   m_axi_dma_awvalid;
input  wire                   m_axi_dma_awready;
output wire [DATA_WIDTH-1:0]  m_axi_dma_wdata;
output wire [KEEP_WIDTH-1:0]  m_axi_dma_wstrb;
output wire                   m_axi_dma_wlast;
output wire                   m_axi_dma_wvalid;
input  wire                   m_axi_dma_wready;
input  wire [1:0]             m_axi_dma_bresp;
input  wire                   m_axi_dma_bvalid;
output wire                   m_axi_dma_bready;
output wire [63:0]            m_axi_dma_araddr;
output wire [7:0]             m_axi_dma_arlen;
output wire [2:0]             m_axi_dma_arsize;
output wire [1:0]             m_axi_dma_arburst;
output wire                   m_axi_dma_arvalid;
input  wire                   m_axi_dma_arready;
input  wire [DATA_WIDTH-1:0]  m_axi_dma_rdata;
input  wire [1:0]             m_axi_dma_rresp;
input  wire                   m_axi_dma_rlast;
input  wire                   m_axi_dma_rvalid;
output wire                   m_axi_dma_rready;
output wire [NLB_RING_COUNT-1:0] m_dma_irq;

// The table memories (AXI4, one port per channel; nlb_mem_stage describes them). Unused, and
// driven 0, when MEM_ONCHIP.
/* verilator lint_off UNUSEDSIGNAL */ // (inputs unused with MEM_ONCHIP)
output wire [CT_CHANNELS*ADDR_W-1:0]      m_axi_ct_araddr;
output wire [CT_CHANNELS*ID_W-1:0]        m_axi_ct_arid;
output wire [CT_CHANNELS*8-1:0]           m_axi_ct_arlen;
output wire [CT_CHANNELS-1:0]             m_axi_ct_arvalid;
input  wire [CT_CHANNELS-1:0]             m_axi_ct_arready;
input  wire [CT_CHANNELS*CT_DATA_W-1:0]   m_axi_ct_rdata;
input  wire [CT_CHANNELS*ID_W-1:0]        m_axi_ct_rid;
input  wire [CT_CHANNELS-1:0]             m_axi_ct_rlast;
input  wire [CT_CHANNELS-1:0]             m_axi_ct_rvalid;
output wire [CT_CHANNELS-1:0]             m_axi_ct_rready;
output wire [CT_CHANNELS*ADDR_W-1:0]      m_axi_ct_awaddr;
output wire [CT_CHANNELS*ID_W-1:0]        m_axi_ct_awid;
output wire [CT_CHANNELS*8-1:0]           m_axi_ct_awlen;
output wire [CT_CHANNELS-1:0]             m_axi_ct_awvalid;
input  wire [CT_CHANNELS-1:0]             m_axi_ct_awready;
output wire [CT_CHANNELS*CT_DATA_W-1:0]   m_axi_ct_wdata;
output wire [CT_CHANNELS*CT_DATA_W/8-1:0] m_axi_ct_wstrb;
output wire [CT_CHANNELS-1:0]             m_axi_ct_wlast;
output wire [CT_CHANNELS-1:0]             m_axi_ct_wvalid;
input  wire [CT_CHANNELS-1:0]             m_axi_ct_wready;
input  wire [CT_CHANNELS*ID_W-1:0]        m_axi_ct_bid;
input  wire [CT_CHANNELS-1:0]             m_axi_ct_bvalid;
output wire [CT_CHANNELS-1:0]             m_axi_ct_bready;
output wire [MG_CHANNELS*ADDR_W-1:0]      m_axi_mg_araddr;
output wire [MG_CHANNELS*ID_W-1:0]        m_axi_mg_arid;
output wire [MG_CHANNELS*8-1:0]           m_axi_mg_arlen;
output wire [MG_CHANNELS-1:0]             m_axi_mg_arvalid;
input  wire [MG_CHANNELS-1:0]             m_axi_mg_arready;
input  wire [MG_CHANNELS*MG_DATA_W-1:0]   m_axi_mg_rdata;
input  wire [MG_CHANNELS*ID_W-1:0]        m_axi_mg_rid;
input  wire [MG_CHANNELS-1:0]             m_axi_mg_rlast;
input  wire [MG_CHANNELS-1:0]             m_axi_mg_rvalid;
output wire [MG_CHANNELS-1:0]             m_axi_mg_rready;
output wire [MG_CHANNELS*ADDR_W-1:0]      m_axi_mg_awaddr;
output wire [MG_CHANNELS*ID_W-1:0]        m_axi_mg_awid;
output wire [MG_CHANNELS*8-1:0]           m_axi_mg_awlen;
output wire [MG_CHANNELS-1:0]             m_axi_mg_awvalid;
input  wire [MG_CHANNELS-1:0]             m_axi_mg_awready;
output wire [MG_CHANNELS*MG_DATA_W-1:0]   m_axi_mg_wdata;
output wire [MG_CHANNELS*MG_DATA_W/8-1:0] m_axi_mg_wstrb;
output wire [MG_CHANNELS-1:0]             m_axi_mg_wlast;
output wire [MG_CHANNELS-1:0]             m_axi_mg_wvalid;
input  wire [MG_CHANNELS-1:0]             m_axi_mg_wready;
input  wire [MG_CHANNELS*ID_W-1:0]        m_axi_mg_bid;
input  wire [MG_CHANNELS-1:0]             m_axi_mg_bvalid;
output wire [MG_CHANNELS-1:0]             m_axi_mg_bready;
/* verilator lint_on UNUSEDSIGNAL */

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
// Clocks in which the host DMA engine offered the inject queue a beat it could not take (the
// engine promises itself room before it takes a frame, so tests/host_rings.rs expects 0).
output wire [31:0] sim_inject_waits;
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
// The pipeline's punt and event streams into the host DMA engine.
wire [DATA_WIDTH-1:0] pq_tdata;
wire [KEEP_WIDTH-1:0] pq_tkeep;
wire                  pq_tvalid;
wire                  pq_tready;
wire                  pq_tlast;
wire                  eq_valid;
wire                  eq_ready;
wire [31:0]          ext_wr_addr;
wire [31:0]          ext_wr_data;
wire [3:0]           ext_wr_strb;
wire                 ext_wr_ack;
wire                 ext_rd_req;
wire [31:0]          ext_rd_addr;
wire [31:0]          ext_rd_data;
wire                 ext_rd_ack;

wire                                  vip_rd_en, rule_rd_en, acl_rd_en, pool_rd_en;
wire                                  backend_rd_en;
wire                                  vip_rd_bank, rule_rd_bank, acl_rd_bank, pool_rd_bank;
wire                                  backend_rd_bank;
wire [VIP_ROW_BITS-1:0]               vip_rd_row;
wire [RULE_ROW_BITS-1:0]              rule_rd_row;
wire [RULE_ROW_BITS-1:0]              acl_rd_row;
wire [POOL_ROW_BITS-1:0]              pool_rd_row;
wire [BACKEND_ROW_BITS-1:0]           backend_rd_row;
wire [VIP_WAYS*NLB_VIP_ENTRY_WIDTH-1:0] vip_rd_data;
wire [NLB_RULE_ENTRY_WIDTH-1:0]       rule_rd_data;
wire [NLB_ACL_ENTRY_WIDTH-1:0]        acl_rd_data;
wire [NLB_POOL_ENTRY_WIDTH-1:0]       pool_rd_data;
wire [NLB_BACKEND_ENTRY_WIDTH-1:0]    backend_rd_data;
wire                                  hit_set_en;
wire [CTIW-1:0]                       hit_set_index;
// The memory stages' command ports: connection-table block and table window (Maglev).
wire                                  ct_c_wr_req, ct_c_wr_ack, ct_c_rd_req, ct_c_rd_ack;
wire                                  ct_c_wr_take;
wire [CTIW-1:0]                       ct_c_wr_index, ct_c_rd_index;
wire [NLB_CT_ENTRY_WIDTH-1:0]         ct_c_wr_entry, ct_c_rd_entry;
wire                                  mg_c_wr_req, mg_c_wr_ack, mg_c_rd_req, mg_c_rd_ack;
wire                                  mg_c_wr_bank, mg_c_rd_bank;
wire [MAGLEV_ROW_BITS-1:0]            mg_c_wr_index, mg_c_rd_index;
wire [NLB_MAGLEV_SLOT_WIDTH-1:0]      mg_c_wr_slot, mg_c_rd_slot;
// The memory stages' bulk reads: the command ring's range reads by rows.
wire                                  ct_b_rd_valid, ct_b_rd_ready, ct_b_rs_valid;
wire [$clog2(CT_BUCKETS)-1:0]         ct_b_rd_row, ct_b_rs_row;
wire [CT_ROW_W-1:0]                   ct_b_rs_data;
wire                                  mg_b_rd_valid, mg_b_rd_ready, mg_b_rs_valid;
wire [MAGLEV_ROW_BITS-4:0]            mg_b_rd_row, mg_b_rs_row;
wire [16*NLB_MAGLEV_SLOT_WIDTH-1:0]   mg_b_rs_data;
// ... and its range writes of whole Maglev rows.
wire                                  mg_b_wr_req, mg_b_wr_ack;
wire [MAGLEV_ROW_BITS-4:0]            mg_b_wr_row;
wire [16*NLB_MAGLEV_SLOT_WIDTH-1:0]   mg_b_wr_data;
// Memory-stage figures (the mem block).
wire                                  st_ct_read, st_ct_lat_valid, st_mg_read, st_mg_lat_valid;
wire [15:0]                           st_ct_lat, st_mg_lat;
wire                                  st_wait;

// Packets between the first beat and the result, per bank (ctrl.packets_in_flight,
// ctrl.bank_in_use).
reg  [15:0] in_flight_reg [0:1];
wire [31:0] stat_packets_in_flight = {15'd0, in_flight_reg[0]} + {15'd0, in_flight_reg[1]};
wire [1:0]  stat_bank_in_use = {in_flight_reg[1] != 16'd0, in_flight_reg[0] != 16'd0};
assign m_mon_packets_in_flight = stat_packets_in_flight;
assign m_mon_bank_in_use = stat_bank_in_use;
assign m_mon_hit_set = hit_set_en;
assign m_mon_hit_set_index = hit_set_index;

// The register file's AXI-Lite port: the host's, and the command ring's engine's beside it.
wire [15:0] ra_awaddr, ra_araddr, ce_awaddr, ce_araddr;
wire        ra_awvalid, ra_awready, ra_wvalid, ra_wready, ra_bvalid, ra_bready;
wire        ra_arvalid, ra_arready, ra_rvalid, ra_rready;
wire [31:0] ra_wdata, ra_rdata, ce_wdata, ce_rdata;
wire [3:0]  ra_wstrb, ce_wstrb;
wire [1:0]  ra_bresp, ra_rresp, ce_bresp, ce_rresp;
wire        ce_awvalid, ce_awready, ce_wvalid, ce_wready, ce_bvalid, ce_bready;
wire        ce_arvalid, ce_arready, ce_rvalid, ce_rready;

nlb_axil_arb2 #(
    .ADDR_WIDTH(16)
) axil_arb_inst (
    .clk(clk),
    .rst(rst),
    .s0_awaddr(s_axil_awaddr),
    .s0_awvalid(s_axil_awvalid),
    .s0_awready(s_axil_awready),
    .s0_wdata(s_axil_wdata),
    .s0_wstrb(s_axil_wstrb),
    .s0_wvalid(s_axil_wvalid),
    .s0_wready(s_axil_wready),
    .s0_bresp(s_axil_bresp),
    .s0_bvalid(s_axil_bvalid),
    .s0_bready(s_axil_bready),
    .s0_araddr(s_axil_araddr),
    .s0_arvalid(s_axil_arvalid),
    .s0_arready(s_axil_arready),
    .s0_rdata(s_axil_rdata),
    .s0_rresp(s_axil_rresp),
    .s0_rvalid(s_axil_rvalid),
    .s0_rready(s_axil_rready),
    .s1_awaddr(ce_awaddr),
    .s1_awvalid(ce_awvalid),
    .s1_awready(ce_awready),
    .s1_wdata(ce_wdata),
    .s1_wstrb(ce_wstrb),
    .s1_wvalid(ce_wvalid),
    .s1_wready(ce_wready),
    .s1_bresp(ce_bresp),
    .s1_bvalid(ce_bvalid),
    .s1_bready(ce_bready),
    .s1_araddr(ce_araddr),
    .s1_arvalid(ce_arvalid),
    .s1_arready(ce_arready),
    .s1_rdata(ce_rdata),
    .s1_rresp(ce_rresp),
    .s1_rvalid(ce_rvalid),
    .s1_rready(ce_rready),
    .m_awaddr(ra_awaddr),
    .m_awvalid(ra_awvalid),
    .m_awready(ra_awready),
    .m_wdata(ra_wdata),
    .m_wstrb(ra_wstrb),
    .m_wvalid(ra_wvalid),
    .m_wready(ra_wready),
    .m_bresp(ra_bresp),
    .m_bvalid(ra_bvalid),
    .m_bready(ra_bready),
    .m_araddr(ra_araddr),
    .m_arvalid(ra_arvalid),
    .m_arready(ra_arready),
    .m_rdata(ra_rdata),
    .m_rresp(ra_rresp),
    .m_rvalid(ra_rvalid),
    .m_rready(ra_rready)
);

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
    .CT_CHANNELS(MEM_ONCHIP ? 0 : CT_CHANNELS),
    .MG_CHANNELS(MEM_ONCHIP ? 0 : MG_CHANNELS),
    .MEM_SLOTS(CT_SLOTS),
    .BUILD_ID(BUILD_ID),
    .GIT_HASH(GIT_HASH),
    .BOARD_ID(BOARD_ID),
    .PART_ID(PART_ID)
) regs_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(ra_awaddr),
    .s_axil_awvalid(ra_awvalid),
    .s_axil_awready(ra_awready),
    .s_axil_wdata(ra_wdata),
    .s_axil_wstrb(ra_wstrb),
    .s_axil_wvalid(ra_wvalid),
    .s_axil_wready(ra_wready),
    .s_axil_bresp(ra_bresp),
    .s_axil_bvalid(ra_bvalid),
    .s_axil_bready(ra_bready),
    .s_axil_araddr(ra_araddr),
    .s_axil_arvalid(ra_arvalid),
    .s_axil_arready(ra_arready),
    .s_axil_rdata(ra_rdata),
    .s_axil_rresp(ra_rresp),
    .s_axil_rvalid(ra_rvalid),
    .s_axil_rready(ra_rready),
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
    .mg_c_wr_req(mg_c_wr_req),
    .mg_c_wr_bank(mg_c_wr_bank),
    .mg_c_wr_index(mg_c_wr_index),
    .mg_c_wr_slot(mg_c_wr_slot),
    .mg_c_wr_ack(mg_c_wr_ack),
    .mg_c_rd_req(mg_c_rd_req),
    .mg_c_rd_bank(mg_c_rd_bank),
    .mg_c_rd_index(mg_c_rd_index),
    .mg_c_rd_ack(mg_c_rd_ack),
    .mg_c_rd_slot(mg_c_rd_slot),
    .backend_rd_en(backend_rd_en),
    .backend_rd_bank(backend_rd_bank),
    .backend_rd_row(backend_rd_row),
    .backend_rd_data(backend_rd_data)
);

// Extension bus: the conntrack, counters, spi_flash, mem and dma blocks, each over its span of the
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
wire ext_wr_mem = in_block(ext_wr_addr, NLB_BLK_MEM_BASE, NLB_BLK_MEM_SPAN);
wire ext_rd_mem = in_block(ext_rd_addr, NLB_BLK_MEM_BASE, NLB_BLK_MEM_SPAN);
// The command ring's registers (cmd_base_lo .. cmd_irq) go to its engine.
localparam [31:0] CMD_REGS_SPAN = NLB_REG_DMA_CMD_IRQ + 32'd4 - NLB_REG_DMA_CMD_BASE_LO;
wire ext_wr_cmd = in_block(ext_wr_addr, NLB_REG_DMA_CMD_BASE_LO, CMD_REGS_SPAN);
wire ext_rd_cmd = in_block(ext_rd_addr, NLB_REG_DMA_CMD_BASE_LO, CMD_REGS_SPAN);
wire ext_wr_dma = in_block(ext_wr_addr, NLB_BLK_DMA_BASE, NLB_BLK_DMA_SPAN) && !ext_wr_cmd;
wire ext_rd_dma = in_block(ext_rd_addr, NLB_BLK_DMA_BASE, NLB_BLK_DMA_SPAN) && !ext_rd_cmd;
wire        dma_wr_ack;
wire        dma_rd_ack;
wire [31:0] dma_rd_data_w;
wire        cmd_wr_ack;
wire        cmd_rd_ack;
wire [31:0] cmd_rd_data_w;
wire        ct_wr_ack;
wire        ct_rd_ack;
wire [31:0] ct_rd_data_w;
wire        cnt_wr_ack;
wire        cnt_rd_ack;
wire [31:0] cnt_rd_data_w;
wire        spi_wr_ack;
wire        spi_rd_ack;
wire [31:0] spi_rd_data_w;
wire        mem_wr_ack;
wire        mem_rd_ack;
wire [31:0] mem_rd_data_w;
reg         other_wr_ack_reg = 1'b0;
reg         other_rd_ack_reg = 1'b0;

always @(posedge clk) begin
    other_wr_ack_reg <= ext_wr_req && !ext_wr_ct && !ext_wr_cnt && !ext_wr_spi && !ext_wr_mem
        && !ext_wr_dma && !ext_wr_cmd;
    other_rd_ack_reg <= ext_rd_req && !ext_rd_ct && !ext_rd_cnt && !ext_rd_spi && !ext_rd_mem
        && !ext_rd_dma && !ext_rd_cmd;
    if (rst) begin
        other_wr_ack_reg <= 1'b0;
        other_rd_ack_reg <= 1'b0;
    end
end

assign ext_wr_ack = ct_wr_ack || cnt_wr_ack || spi_wr_ack || mem_wr_ack || dma_wr_ack
    || cmd_wr_ack || other_wr_ack_reg;
assign ext_rd_ack = ct_rd_ack || cnt_rd_ack || spi_rd_ack || mem_rd_ack || dma_rd_ack
    || cmd_rd_ack || other_rd_ack_reg;
assign ext_rd_data = ct_rd_ack ? ct_rd_data_w : cnt_rd_ack ? cnt_rd_data_w
    : spi_rd_ack ? spi_rd_data_w : mem_rd_ack ? mem_rd_data_w
    : dma_rd_ack ? dma_rd_data_w : cmd_rd_ack ? cmd_rd_data_w : 32'd0;

nlb_mem_stats mem_stats_inst (
    .clk(clk),
    .rst(rst),
    .st_ct_read(st_ct_read),
    .st_ct_lat_valid(st_ct_lat_valid),
    .st_ct_lat(st_ct_lat),
    .st_mg_read(st_mg_read),
    .st_mg_lat_valid(st_mg_lat_valid),
    .st_mg_lat(st_mg_lat),
    .st_wait(st_wait),
    .ext_wr_req(ext_wr_req && ext_wr_mem),
    .ext_wr_ack(mem_wr_ack),
    .ext_rd_req(ext_rd_req && ext_rd_mem),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(mem_rd_data_w),
    .ext_rd_ack(mem_rd_ack)
);

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
    .s_drop_valid(drop_sum_valid_reg),
    .s_drop_reason(drop_sum_reason_reg),
    .s_drop_len(drop_sum_len_reg),
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

// Hardware learning: the host DMA engine's switch and time, and what an install did.
wire        dma_hw_learn;
wire [31:0] dma_host_time;
wire        learn_added;
wire        res_event_installed;
wire [CTIW-1:0] res_event_ct_index;

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
    .ct_c_wr_req(ct_c_wr_req),
    .ct_c_wr_index(ct_c_wr_index),
    .ct_c_wr_entry(ct_c_wr_entry),
    .ct_c_wr_ack(ct_c_wr_ack),
    .ct_c_wr_take(ct_c_wr_take),
    .ct_c_rd_req(ct_c_rd_req),
    .ct_c_rd_index(ct_c_rd_index),
    .ct_c_rd_ack(ct_c_rd_ack),
    .ct_c_rd_entry(ct_c_rd_entry),
    .hit_set_en(hit_set_en),
    .hit_set_index(hit_set_index),
    .learn_added(learn_added),
    .mon_hit_read(m_mon_hit_read)
);

// ---- receive: the receive queue, injected frames, admission ----------------------------

wire lookup_room;
wire [$clog2(PKT_FIFO_DEPTH):0] pkt_count;
wire       frame_done;

// Received beats, each with the ctrl bits its frame's first beat latches (docs/pipeline.md
// section 13: the bank latch), into the receive queue.
reg  rx_first_reg = 1'b1;   // the next received beat starts a frame
wire rx_first = s_axis_rx_tvalid && rx_first_reg;
wire [2:0] ctrl_now = {ctrl_default_action, ctrl_enable, ctrl_active_bank};
localparam RXQ_W = 3 + 1 + KEEP_WIDTH + DATA_WIDTH;
wire [RXQ_W-1:0] rxq_data;
wire             rxq_valid;
wire             rxq_take;
wire [RXQ_BITS:0] rxq_count;

always @(posedge clk) begin
    if (s_axis_rx_tvalid) begin
        rx_first_reg <= s_axis_rx_tlast;
    end
    if (rst) begin
        rx_first_reg <= 1'b1;
    end
end

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(RXQ_W),
    .DEPTH(RXQ_DEPTH)
) rxq_inst (
    .clk(clk),
    .rst(rst),
    .s_data({ctrl_now, s_axis_rx_tlast, s_axis_rx_tkeep, s_axis_rx_tdata}),
    .s_valid(s_axis_rx_tvalid),
    .s_ready(),
    .m_data(rxq_data),
    .m_valid(rxq_valid),
    .m_ready(rxq_take),
    .count(rxq_count)
);
/* verilator lint_on PINCONNECTEMPTY */

wire [2:0]            q_ctrl = rxq_data[RXQ_W-1 -: 3];
wire                  q_last = rxq_data[KEEP_WIDTH + DATA_WIDTH];
wire [KEEP_WIDTH-1:0] q_keep = rxq_data[DATA_WIDTH +: KEEP_WIDTH];
wire [DATA_WIDTH-1:0] q_data = rxq_data[DATA_WIDTH-1:0];

// Injected frames come from the inject ring (nlb_host_dma reads them from host memory into
// nlb_inject_queue) and from the s_axis_inject port (the register window's path); a frame
// arbiter takes a whole frame from one, then from the other.
wire [DATA_WIDTH-1:0] dij_tdata;    // engine -> queue: header beat, then the frame
wire [KEEP_WIDTH-1:0] dij_tkeep;
wire                  dij_tvalid;
wire                  dij_tready;
wire                  dij_tlast;
wire                  dij_terr;
wire                  dij_room;
wire [9:0]            dij_pending;  // beats the engine promised the queue, not yet sent
`ifdef NLB_SIM_HOOKS
reg  [31:0]           sim_inject_waits_reg = 32'd0;
always @(posedge clk) begin
    if (dij_tvalid && !dij_tready) begin
        sim_inject_waits_reg <= sim_inject_waits_reg + 32'd1;
    end
    if (rst) begin
        sim_inject_waits_reg <= 32'd0;
    end
end
assign sim_inject_waits = sim_inject_waits_reg;
`endif
wire [DATA_WIDTH-1:0] rq_tdata;     // queue -> arbiter
wire [KEEP_WIDTH-1:0] rq_tkeep;
wire                  rq_tvalid;
wire                  rq_tready;
wire                  rq_tlast;
wire [INJ_USER_W-1:0] rq_tuser;
wire [DATA_WIDTH-1:0] ia_tdata;     // arbiter -> skid buffer
wire [KEEP_WIDTH-1:0] ia_tkeep;
wire                  ia_tvalid;
wire                  ia_tready;
wire                  ia_tlast;
wire [INJ_USER_W-1:0] ia_tuser;

/* verilator lint_off PINCONNECTEMPTY */
nlb_inject_queue inject_queue_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(dij_tdata),
    .s_axis_tkeep(dij_tkeep),
    .s_axis_tvalid(dij_tvalid),
    .s_axis_tready(dij_tready),
    .s_axis_tlast(dij_tlast),
    .s_axis_terr(dij_terr),
    .s_room(dij_room),
    .s_pending(dij_pending),
    .m_axis_tdata(rq_tdata),
    .m_axis_tkeep(rq_tkeep),
    .m_axis_tvalid(rq_tvalid),
    .m_axis_tready(rq_tready),
    .m_axis_tlast(rq_tlast),
    .m_axis_tuser(rq_tuser),
    // (a dropped frame is counted in the inject ring's errors)
    .m_drop()
);

nlb_axis_frame_arb #(
    .DATA_WIDTH(INJ_USER_W + DATA_WIDTH),
    .KEEP_WIDTH(KEEP_WIDTH)
) inject_arb_inst (
    .clk(clk),
    .rst(rst),
    .s0_axis_tdata({rq_tuser, rq_tdata}),
    .s0_axis_tkeep(rq_tkeep),
    .s0_axis_tvalid(rq_tvalid),
    .s0_axis_tready(rq_tready),
    .s0_axis_tlast(rq_tlast),
    .s1_axis_tdata({s_axis_inject_tuser, s_axis_inject_tdata}),
    .s1_axis_tkeep(s_axis_inject_tkeep),
    .s1_axis_tvalid(s_axis_inject_tvalid),
    .s1_axis_tready(s_axis_inject_tready),
    .s1_axis_tlast(s_axis_inject_tlast),
    .m_axis_tdata({ia_tuser, ia_tdata}),
    .m_axis_tkeep(ia_tkeep),
    .m_axis_tvalid(ia_tvalid),
    .m_axis_tready(ia_tready),
    .m_axis_tlast(ia_tlast),
    .m_axis_source()
);
/* verilator lint_on PINCONNECTEMPTY */

// Injected frames through a skid buffer (tready from a register), each beat with the ctrl bits
// as the port takes it (the first beat's are the frame's, as for received frames).
wire [DATA_WIDTH-1:0] ij_tdata;
wire [KEEP_WIDTH-1:0] ij_tkeep;
wire                  ij_tvalid;
wire                  ij_tready;
wire                  ij_tlast;
wire [INJ_USER_W-1:0] ij_tuser;
wire [2:0]            ij_ctrl;
reg                   inj_first_reg = 1'b1;   // the next beat the inject port takes starts a frame
wire                  inj_port_first = ia_tvalid && ia_tready && inj_first_reg;

always @(posedge clk) begin
    if (ia_tvalid && ia_tready) begin
        inj_first_reg <= ia_tlast;
    end
    if (rst) begin
        inj_first_reg <= 1'b1;
    end
end

nlb_axis_skid #(
    .DATA_WIDTH(DATA_WIDTH),
    .USER_WIDTH(INJ_USER_W + 3)
) inject_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(ia_tdata),
    .s_axis_tkeep(ia_tkeep),
    .s_axis_tvalid(ia_tvalid),
    .s_axis_tready(ia_tready),
    .s_axis_tlast(ia_tlast),
    .s_axis_tuser({ctrl_now, ia_tuser}),
    .m_axis_tdata(ij_tdata),
    .m_axis_tkeep(ij_tkeep),
    .m_axis_tvalid(ij_tvalid),
    .m_axis_tready(ij_tready),
    .m_axis_tlast(ij_tlast),
    .m_axis_tuser({ij_ctrl, ij_tuser})
);

// Admission (registered): room in the lookup (packets in flight, counters) and in the packet
// FIFO for a frame of the largest size (a beat a clock comes in: the registered count lags one).
reg  [MIF_BITS:0] admitted_reg = {(MIF_BITS+1){1'b0}};  // admitted, not through the editor
reg               room_lookup_reg = 1'b0;
reg               room_buffer_reg = 1'b0;
reg               in_frame_reg = 1'b0;   // a frame is passing the merge point
reg               sel_inject_reg = 1'b0; // it is an injected one
reg               prefer_inject_reg = 1'b0;
reg  [31:0]       rx_seq_reg = 32'd0;    // received frames that left the queue

wire admit_ok = room_lookup_reg && room_buffer_reg;
// At a frame boundary: an injected frame may start while the admission has room and the
// receive queue is at most half full; the two ports alternate when both have a frame.
reg  rxq_half_reg = 1'b1;  // the receive queue is at most half full (a clock late)
wire inj_can = ij_tvalid && admit_ok && rxq_half_reg;
wire start_inj = !in_frame_reg && inj_can && (!rxq_valid || prefer_inject_reg);
wire start_rx = !in_frame_reg && rxq_valid && !start_inj;
wire cont_inj = in_frame_reg && sel_inject_reg;
wire cont_rx = in_frame_reg && !sel_inject_reg;
// This clock's beat at the merge point.
wire beat_inj = (start_inj || cont_inj) && ij_tvalid;
wire beat_rx = (start_rx || cont_rx) && rxq_valid;
wire beat = beat_inj || beat_rx;
wire beat_last = beat_inj ? ij_tlast : q_last;
assign ij_tready = start_inj || cont_inj;
assign rxq_take = start_rx || cont_rx;
// A received frame without room is dropped at its first beat, whole (nlb_rx_drop).
wire drop_now;
wire dropping;
wire rx_pass;
/* verilator lint_off PINCONNECTEMPTY */
nlb_rx_drop rx_drop_inst (
    .clk(clk),
    .rst(rst),
    .s_valid(beat_rx),
    .s_last(q_last),
    .room(admit_ok),
    .m_pass(rx_pass),
    .m_first(),
    .m_drop_first(drop_now),
    .m_dropping(dropping)
);
/* verilator lint_on PINCONNECTEMPTY */
wire [4:0] drop_reason = !room_lookup_reg ? NLB_REASON_NO_ROOM_LOOKUP : NLB_REASON_NO_ROOM_BUFFER;
wire admit_now = (start_rx && admit_ok) || (start_inj && ij_tvalid);

// The merged stream into the parser, the payload sums and the packet FIFO, from a register
// (the selection and admission logic stays out of the parser's first stage).
wire [DATA_WIDTH-1:0] mg_tdata = beat_inj ? ij_tdata : q_data;
wire [KEEP_WIDTH-1:0] mg_tkeep = beat_inj ? ij_tkeep : q_keep;
wire                  mg_tvalid = beat_inj || rx_pass;
reg  [DATA_WIDTH-1:0] in_tdata = {DATA_WIDTH{1'b0}};
reg  [KEEP_WIDTH-1:0] in_tkeep = {KEEP_WIDTH{1'b0}};
reg                   in_tvalid = 1'b0;
reg                   in_tlast = 1'b0;
reg  [31:0]           rx_user = 32'd0;
// The first beat's sideband (nlb_lookup's s_user: bits 31..16 backend, 15..4 pool, 3 injected,
// 2..0 the ctrl bits): each frame's ctrl as its port took its first beat.
wire [INJ_USER_W-1:0] inj_header = beat_inj ? ij_tuser : {INJ_USER_W{1'b0}};
wire [2:0] first_ctrl = beat_inj ? ij_ctrl : q_ctrl;
wire [31:0] mg_user = {
    inj_header[NLB_INJECT_HEADER_BACKEND_LSB +: NLB_INJECT_HEADER_BACKEND_W],
    inj_header[NLB_INJECT_HEADER_POOL_LSB +: NLB_INJECT_HEADER_POOL_W], beat_inj, first_ctrl};

always @(posedge clk) begin
    in_tvalid <= mg_tvalid;
    in_tdata <= mg_tdata;
    in_tkeep <= mg_tkeep;
    in_tlast <= beat_last;
    rx_user <= mg_user;
    if (rst) begin
        in_tvalid <= 1'b0;
    end
end

// Dropped frames: the monitor in the next clock; the counters once the length is known.
reg        drop_valid_reg = 1'b0;
reg [4:0]  drop_reason_reg = 5'd0;
reg [31:0] drop_seq_reg = 32'd0;
reg        drop_bank_reg = 1'b0;
reg [4:0]  drop_frame_reason_reg = 5'd0;
reg [LW-1:0] drop_len_reg = {LW{1'b0}};
reg        drop_cnt_valid_reg = 1'b0;
reg [4:0]  drop_cnt_reason_reg = 5'd0;
reg [LW-1:0] drop_cnt_base_reg = {LW{1'b0}};
reg [KEEP_WIDTH-1:0] drop_cnt_keep_reg = {KEEP_WIDTH{1'b0}};
// The last beat's bytes. tkeep is contiguous from bit 0, so they are where its ones end: the
// position of the last one, encoded (a sum of the 64 bits was a tree of adds).
function [6:0] keep_bytes(input [KEEP_WIDTH-1:0] k);
    integer b;
    reg [KEEP_WIDTH:0] kk;
    reg [6:0] count;  // b + 1, the bytes up to and including byte b
    begin
        keep_bytes = 7'd0;
        kk = {1'b0, k};
        count = 7'd1;
        for (b = 0; b < KEEP_WIDTH; b = b + 1) begin
            if (kk[b] && !kk[b+1]) begin
                keep_bytes = keep_bytes | count;
            end
            count = count + 7'd1;
        end
    end
endfunction
// The dropped frame's length into a register before the counters (whose drop sums add it).
wire [LW-1:0] drop_cnt_len = drop_cnt_base_reg + {{(LW-7){1'b0}}, keep_bytes(drop_cnt_keep_reg)};
reg           drop_sum_valid_reg = 1'b0;
reg [4:0]     drop_sum_reason_reg = 5'd0;
reg [LW-1:0]  drop_sum_len_reg = {LW{1'b0}};
// The length of the dropped frame so far, this beat's full 64 bytes included.
wire [LW-1:0] drop_len_so_far = (drop_now ? {LW{1'b0}} : drop_len_reg);

always @(posedge clk) begin
    room_lookup_reg <= {{(31-MIF_BITS){1'b0}}, admitted_reg} < MAX_IN_FLIGHT - 2
        && counters_room && lookup_room;
    room_buffer_reg <= {{(31-$clog2(PKT_FIFO_DEPTH)){1'b0}}, pkt_count}
        < PKT_FIFO_DEPTH - RX_MAX_BEATS - 4;
    // (A clock late, and a beat a clock comes in: one beat of margin.)
    rxq_half_reg <= rxq_count < RXQ_DEPTH / 2;
    admitted_reg <= admitted_reg + {{MIF_BITS{1'b0}}, admit_now}
        - {{MIF_BITS{1'b0}}, frame_done};
    if (beat) begin
        in_frame_reg <= !beat_last;
        if (start_inj || start_rx) begin
            sel_inject_reg <= start_inj;
            prefer_inject_reg <= start_rx;
        end
    end
    if (start_rx && rxq_valid) begin
        rx_seq_reg <= rx_seq_reg + 32'd1;
    end
    drop_valid_reg <= drop_now;
    if (drop_now) begin
        drop_reason_reg <= drop_reason;
        drop_seq_reg <= rx_seq_reg;
        drop_bank_reg <= q_ctrl[0];
        drop_frame_reason_reg <= drop_reason;
    end
    if (dropping) begin
        drop_len_reg <= drop_len_so_far + {{(LW-7){1'b0}}, 7'd64};
    end
    drop_cnt_valid_reg <= dropping && beat_last;
    drop_sum_valid_reg <= drop_cnt_valid_reg;
    drop_sum_reason_reg <= drop_cnt_reason_reg;
    drop_sum_len_reg <= drop_cnt_len;
    if (dropping && beat_last) begin
        drop_cnt_reason_reg <= drop_now ? drop_reason : drop_frame_reason_reg;
        drop_cnt_base_reg <= drop_len_so_far;
        drop_cnt_keep_reg <= q_keep;
    end
    if (rst) begin
        room_lookup_reg <= 1'b0;
        room_buffer_reg <= 1'b0;
        admitted_reg <= {(MIF_BITS+1){1'b0}};
        in_frame_reg <= 1'b0;
        sel_inject_reg <= 1'b0;
        prefer_inject_reg <= 1'b0;
        rx_seq_reg <= 32'd0;
        drop_valid_reg <= 1'b0;
        drop_cnt_valid_reg <= 1'b0;
        drop_sum_valid_reg <= 1'b0;
    end
end

assign m_drop_valid = drop_valid_reg;
assign m_drop_reason = drop_reason_reg;
assign m_drop_seq = drop_seq_reg;
assign m_mon_active_bank = ctrl_active_bank;
assign m_mon_enable = ctrl_enable;
assign m_mon_default_action = ctrl_default_action;

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
    .s_axis_tready(1'b1),
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
    .CT_WAYS(CT_WAYS),
    .FIFO_DEPTH(MAX_IN_FLIGHT),
    .CT_CHANNELS(CT_CHANNELS),
    .CT_DATA_W(CT_DATA_W),
    .CT_SLOTS(CT_SLOTS),
    .MG_CHANNELS(MG_CHANNELS),
    .MG_DATA_W(MG_DATA_W),
    .MG_SLOTS(MG_SLOTS),
    .ADDR_W(ADDR_W),
    .ID_W(ID_W),
    .CT_CH_BASE(CT_CH_BASE),
    .CT_CH_STRIDE(CT_CH_STRIDE),
    .MG_CH_BASE(MG_CH_BASE),
    .MG_CH_STRIDE(MG_CH_STRIDE),
    .HW_LEARN(HW_LEARN)
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
    .hw_learn(dma_hw_learn),
    .host_time(dma_host_time),
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
    .backend_rd_en(backend_rd_en),
    .backend_rd_bank(backend_rd_bank),
    .backend_rd_row(backend_rd_row),
    .backend_rd_data(backend_rd_data),
    .ct_c_wr_req(ct_c_wr_req),
    .ct_c_wr_index(ct_c_wr_index),
    .ct_c_wr_entry(ct_c_wr_entry),
    .ct_c_wr_ack(ct_c_wr_ack),
    .ct_c_wr_take(ct_c_wr_take),
    .ct_c_rd_req(ct_c_rd_req),
    .ct_c_rd_index(ct_c_rd_index),
    .ct_c_rd_ack(ct_c_rd_ack),
    .ct_c_rd_entry(ct_c_rd_entry),
    .mg_c_wr_req(mg_c_wr_req),
    .mg_c_wr_bank(mg_c_wr_bank),
    .mg_c_wr_index(mg_c_wr_index),
    .mg_c_wr_slot(mg_c_wr_slot),
    .mg_c_wr_ack(mg_c_wr_ack),
    .mg_c_rd_req(mg_c_rd_req),
    .mg_c_rd_bank(mg_c_rd_bank),
    .mg_c_rd_index(mg_c_rd_index),
    .mg_c_rd_ack(mg_c_rd_ack),
    .mg_c_rd_slot(mg_c_rd_slot),
    .ct_b_rd_valid(ct_b_rd_valid),
    .ct_b_rd_row(ct_b_rd_row),
    .ct_b_rd_ready(ct_b_rd_ready),
    .ct_b_rs_valid(ct_b_rs_valid),
    .ct_b_rs_row(ct_b_rs_row),
    .ct_b_rs_data(ct_b_rs_data),
    .mg_b_rd_valid(mg_b_rd_valid),
    .mg_b_rd_row(mg_b_rd_row),
    .mg_b_rd_ready(mg_b_rd_ready),
    .mg_b_rs_valid(mg_b_rs_valid),
    .mg_b_rs_row(mg_b_rs_row),
    .mg_b_rs_data(mg_b_rs_data),
    .mg_b_wr_req(mg_b_wr_req),
    .mg_b_wr_row(mg_b_wr_row),
    .mg_b_wr_data(mg_b_wr_data),
    .mg_b_wr_ack(mg_b_wr_ack),
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
    .m_axi_ct_bready(ct_bready),
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
    .m_axi_mg_bready(mg_bready),
    .st_ct_read(st_ct_read),
    .st_ct_lat_valid(st_ct_lat_valid),
    .st_ct_lat(st_ct_lat),
    .st_mg_read(st_mg_read),
    .st_mg_lat_valid(st_mg_lat_valid),
    .st_mg_lat(st_mg_lat),
    .st_wait(st_wait),
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
    .m_event_installed(res_event_installed),
    .m_event_ct_index(res_event_ct_index),
    .learn_added(learn_added),
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

// ---- table memories: on chip, or the HBM ports ------------------------------------------------

wire [CT_CHANNELS*ADDR_W-1:0]      ct_araddr, ct_awaddr;
wire [CT_CHANNELS*ID_W-1:0]        ct_arid, ct_rid, ct_awid, ct_bid;
wire [CT_CHANNELS*8-1:0]           ct_arlen, ct_awlen;
wire [CT_CHANNELS-1:0]             ct_arvalid, ct_arready, ct_rlast, ct_rvalid, ct_rready;
wire [CT_CHANNELS-1:0]             ct_awvalid, ct_awready, ct_wlast, ct_wvalid, ct_wready;
wire [CT_CHANNELS-1:0]             ct_bvalid, ct_bready;
wire [CT_CHANNELS*CT_DATA_W-1:0]   ct_rdata, ct_wdata;
wire [CT_CHANNELS*CT_DATA_W/8-1:0] ct_wstrb;
wire [MG_CHANNELS*ADDR_W-1:0]      mg_araddr, mg_awaddr;
wire [MG_CHANNELS*ID_W-1:0]        mg_arid, mg_rid, mg_awid, mg_bid;
wire [MG_CHANNELS*8-1:0]           mg_arlen, mg_awlen;
wire [MG_CHANNELS-1:0]             mg_arvalid, mg_arready, mg_rlast, mg_rvalid, mg_rready;
wire [MG_CHANNELS-1:0]             mg_awvalid, mg_awready, mg_wlast, mg_wvalid, mg_wready;
wire [MG_CHANNELS-1:0]             mg_bvalid, mg_bready;
wire [MG_CHANNELS*MG_DATA_W-1:0]   mg_rdata, mg_wdata;
wire [MG_CHANNELS*MG_DATA_W/8-1:0] mg_wstrb;

generate
    if (MEM_ONCHIP != 0) begin : g_onchip
        nlb_mem_ram #(
            .DATA_W(CT_DATA_W),
            .ROWS(CT_BUCKETS),
            .ADDR_W(ADDR_W),
            .ID_W(ID_W),
            .ROW_SHIFT(8)
        ) ct_ram_inst (
            .clk(clk),
            .rst(rst),
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
            .s_axi_bready(ct_bready)
        );
        nlb_mem_ram #(
            .DATA_W(MG_DATA_W),
            .ROWS(MG_ROWS),
            .ADDR_W(ADDR_W),
            .ID_W(ID_W),
            .ROW_SHIFT(5)
        ) mg_ram_inst (
            .clk(clk),
            .rst(rst),
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
            .s_axi_bready(mg_bready)
        );
        assign m_axi_ct_araddr = {CT_CHANNELS*ADDR_W{1'b0}};
        assign m_axi_ct_arid = {CT_CHANNELS*ID_W{1'b0}};
        assign m_axi_ct_arlen = {CT_CHANNELS*8{1'b0}};
        assign m_axi_ct_arvalid = {CT_CHANNELS{1'b0}};
        assign m_axi_ct_rready = {CT_CHANNELS{1'b0}};
        assign m_axi_ct_awaddr = {CT_CHANNELS*ADDR_W{1'b0}};
        assign m_axi_ct_awid = {CT_CHANNELS*ID_W{1'b0}};
        assign m_axi_ct_awlen = {CT_CHANNELS*8{1'b0}};
        assign m_axi_ct_awvalid = {CT_CHANNELS{1'b0}};
        assign m_axi_ct_wdata = {CT_CHANNELS*CT_DATA_W{1'b0}};
        assign m_axi_ct_wstrb = {CT_CHANNELS*CT_DATA_W/8{1'b0}};
        assign m_axi_ct_wlast = {CT_CHANNELS{1'b0}};
        assign m_axi_ct_wvalid = {CT_CHANNELS{1'b0}};
        assign m_axi_ct_bready = {CT_CHANNELS{1'b0}};
        assign m_axi_mg_araddr = {MG_CHANNELS*ADDR_W{1'b0}};
        assign m_axi_mg_arid = {MG_CHANNELS*ID_W{1'b0}};
        assign m_axi_mg_arlen = {MG_CHANNELS*8{1'b0}};
        assign m_axi_mg_arvalid = {MG_CHANNELS{1'b0}};
        assign m_axi_mg_rready = {MG_CHANNELS{1'b0}};
        assign m_axi_mg_awaddr = {MG_CHANNELS*ADDR_W{1'b0}};
        assign m_axi_mg_awid = {MG_CHANNELS*ID_W{1'b0}};
        assign m_axi_mg_awlen = {MG_CHANNELS*8{1'b0}};
        assign m_axi_mg_awvalid = {MG_CHANNELS{1'b0}};
        assign m_axi_mg_wdata = {MG_CHANNELS*MG_DATA_W{1'b0}};
        assign m_axi_mg_wstrb = {MG_CHANNELS*MG_DATA_W/8{1'b0}};
        assign m_axi_mg_wlast = {MG_CHANNELS{1'b0}};
        assign m_axi_mg_wvalid = {MG_CHANNELS{1'b0}};
        assign m_axi_mg_bready = {MG_CHANNELS{1'b0}};
    end else begin : g_ports
        assign m_axi_ct_araddr = ct_araddr;
        assign m_axi_ct_arid = ct_arid;
        assign m_axi_ct_arlen = ct_arlen;
        assign m_axi_ct_arvalid = ct_arvalid;
        assign ct_arready = m_axi_ct_arready;
        assign ct_rdata = m_axi_ct_rdata;
        assign ct_rid = m_axi_ct_rid;
        assign ct_rlast = m_axi_ct_rlast;
        assign ct_rvalid = m_axi_ct_rvalid;
        assign m_axi_ct_rready = ct_rready;
        assign m_axi_ct_awaddr = ct_awaddr;
        assign m_axi_ct_awid = ct_awid;
        assign m_axi_ct_awlen = ct_awlen;
        assign m_axi_ct_awvalid = ct_awvalid;
        assign ct_awready = m_axi_ct_awready;
        assign m_axi_ct_wdata = ct_wdata;
        assign m_axi_ct_wstrb = ct_wstrb;
        assign m_axi_ct_wlast = ct_wlast;
        assign m_axi_ct_wvalid = ct_wvalid;
        assign ct_wready = m_axi_ct_wready;
        assign ct_bid = m_axi_ct_bid;
        assign ct_bvalid = m_axi_ct_bvalid;
        assign m_axi_ct_bready = ct_bready;
        assign m_axi_mg_araddr = mg_araddr;
        assign m_axi_mg_arid = mg_arid;
        assign m_axi_mg_arlen = mg_arlen;
        assign m_axi_mg_arvalid = mg_arvalid;
        assign mg_arready = m_axi_mg_arready;
        assign mg_rdata = m_axi_mg_rdata;
        assign mg_rid = m_axi_mg_rid;
        assign mg_rlast = m_axi_mg_rlast;
        assign mg_rvalid = m_axi_mg_rvalid;
        assign m_axi_mg_rready = mg_rready;
        assign m_axi_mg_awaddr = mg_awaddr;
        assign m_axi_mg_awid = mg_awid;
        assign m_axi_mg_awlen = mg_awlen;
        assign m_axi_mg_awvalid = mg_awvalid;
        assign mg_awready = m_axi_mg_awready;
        assign m_axi_mg_wdata = mg_wdata;
        assign m_axi_mg_wstrb = mg_wstrb;
        assign m_axi_mg_wlast = mg_wlast;
        assign m_axi_mg_wvalid = mg_wvalid;
        assign mg_wready = m_axi_mg_wready;
        assign mg_bid = m_axi_mg_bid;
        assign mg_bvalid = m_axi_mg_bvalid;
        assign m_axi_mg_bready = mg_bready;
    end
endgenerate

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
    .s_valid(in_tvalid),
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
    .s_axis_tready(1'b1),
    .s_axis_tlast(in_tlast),
    .m_valid(csum_valid),
    .m_sum(csum)
);

/* verilator lint_off PINCONNECTEMPTY */
nlb_editor #(
    .LEN_WIDTH(LW),
    .JOB_DEPTH(MAX_IN_FLIGHT)
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
    .m_axis_punt_tdata(pq_tdata),
    .m_axis_punt_tkeep(pq_tkeep),
    .m_axis_punt_tvalid(pq_tvalid),
    .m_axis_punt_tready(pq_tready),
    .m_axis_punt_tlast(pq_tlast),
    .m_axis_pass_tdata(m_axis_pass_tdata),
    .m_axis_pass_tkeep(m_axis_pass_tkeep),
    .m_axis_pass_tvalid(m_axis_pass_tvalid),
    .m_axis_pass_tready(m_axis_pass_tready),
    .m_axis_pass_tlast(m_axis_pass_tlast),
    .jobs(),
    .frame_done(frame_done)
);
/* verilator lint_on PINCONNECTEMPTY */

// ---- events -----------------------------------------------------------------------------------

// learn_event: event, protocol, src port (client), dst port (VIP), src addr, dst addr,
// backend, rule, flow hash, from bit 0 up.
// Then, as the event ring's record has them, whether the NIC installed the connection and where.
localparam EVQ_W = NLB_LEARN_EVENT_WIDTH + 1 + NLB_EVENT_RECORD_CT_INDEX_W;
wire [EVQ_W-1:0] event_rec = {{(NLB_EVENT_RECORD_CT_INDEX_W-CTIW){1'b0}}, res_event_ct_index,
    res_event_installed, m_res_flow_hash, m_res_rule, m_res_backend,
    m_res_vip, m_res_client, m_res_vip_port, m_res_client_port, m_res_protocol, m_res_event};
wire [$clog2(EVENT_DEPTH):0] event_count;
wire                         event_push = m_res_valid && m_res_event_valid;
// The queue holds EVENT_DEPTH events (the FIFO's output register is one of them). Whether it
// is full is kept in a register, equal to `event_count >= EVENT_DEPTH` in every clock, and
// found from compares of the count with constants: a compare of the count in front of the
// FIFO's own add was 13 levels.
reg                          event_full = 1'b0;
wire                         event_write = event_push && !event_full;
wire                         event_take = eq_valid && eq_ready;
reg                          event_dropped_reg = 1'b0;
wire [EVQ_W-1:0] event_out;

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(EVQ_W),
    .DEPTH(EVENT_DEPTH)
) event_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_data(event_rec),
    .s_valid(event_write),
    .s_ready(),
    .m_data(event_out),
    .m_valid(eq_valid),
    .m_ready(eq_ready),
    .count(event_count)
);
/* verilator lint_on PINCONNECTEMPTY */

always @(posedge clk) begin
    event_dropped_reg <= event_push && event_full;
    event_full <= event_count > EVENT_DEPTH
        || (event_count == EVENT_DEPTH && (event_write || !event_take))
        || (event_count == EVENT_DEPTH - 1 && event_write && !event_take);
    if (rst) begin
        event_dropped_reg <= 1'b0;
        event_full <= 1'b0;
    end
end

assign m_event_dropped = event_dropped_reg;

// ---- the host rings -----------------------------------------------------------------------

// The ring engine (s0) and the command ring's (s1) onto the one DMA port.
wire [63:0]           hd_awaddr, hd_araddr, ce_m_awaddr, ce_m_araddr;
wire [7:0]            hd_awlen, hd_arlen, ce_m_awlen, ce_m_arlen;
wire [2:0]            hd_awsize, hd_arsize, ce_m_awsize, ce_m_arsize;
wire [1:0]            hd_awburst, hd_arburst, ce_m_awburst, ce_m_arburst;
wire                  hd_awvalid, hd_awready, hd_wlast, hd_wvalid, hd_wready;
wire                  hd_bvalid, hd_bready, hd_arvalid, hd_arready, hd_rlast, hd_rvalid, hd_rready;
wire                  ce_m_awvalid, ce_m_awready, ce_m_wlast, ce_m_wvalid, ce_m_wready;
wire                  ce_m_bvalid, ce_m_bready, ce_m_arvalid, ce_m_arready;
wire                  ce_m_rlast, ce_m_rvalid, ce_m_rready;
wire [DATA_WIDTH-1:0] hd_wdata, hd_rdata, ce_m_wdata, ce_m_rdata;
wire [KEEP_WIDTH-1:0] hd_wstrb, ce_m_wstrb;
wire [1:0]            hd_bresp, hd_rresp, ce_m_bresp, ce_m_rresp;
wire [NLB_RING_COUNT-1:0] hd_irq;
wire                  ce_irq;
wire                  dma_enable;
wire [63:0]           dma_wb;
wire                  cmd_fault;

nlb_host_dma #(
    .CMD_RING(1),
    .HW_LEARN(HW_LEARN)
) host_dma_inst (
    .clk(clk),
    .rst(rst),
    .ext_wr_req(ext_wr_req && ext_wr_dma),
    .ext_wr_addr(ext_wr_addr),
    .ext_wr_data(ext_wr_data),
    .ext_wr_strb(ext_wr_strb),
    .ext_wr_ack(dma_wr_ack),
    .ext_rd_req(ext_rd_req && ext_rd_dma),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(dma_rd_data_w),
    .ext_rd_ack(dma_rd_ack),
    .s_punt_tdata(pq_tdata),
    .s_punt_tkeep(pq_tkeep),
    .s_punt_tvalid(pq_tvalid),
    .s_punt_tready(pq_tready),
    .s_punt_tlast(pq_tlast),
    .m_punt_tdata(m_axis_punt_tdata),
    .m_punt_tkeep(m_axis_punt_tkeep),
    .m_punt_tvalid(m_axis_punt_tvalid),
    .m_punt_tready(m_axis_punt_tready),
    .m_punt_tlast(m_axis_punt_tlast),
    .s_event_tdata({{(384-NLB_LEARN_EVENT_WIDTH){1'b0}}, event_out[NLB_LEARN_EVENT_WIDTH-1:0]}),
    .s_event_install(event_out[EVQ_W-1:NLB_LEARN_EVENT_WIDTH]),
    .hw_learn(dma_hw_learn),
    .host_time(dma_host_time),
    .s_event_tvalid(eq_valid),
    .s_event_tready(eq_ready),
    .s_event_dropped(event_dropped_reg),
    .m_event_tdata(m_axis_event_tdata),
    .m_event_tvalid(m_axis_event_tvalid),
    .m_event_tready(m_axis_event_tready),
    .inject_room(dij_room),
    .inject_pending(dij_pending),
    .m_inject_tdata(dij_tdata),
    .m_inject_tkeep(dij_tkeep),
    .m_inject_tvalid(dij_tvalid),
    .m_inject_tready(dij_tready),
    .m_inject_tlast(dij_tlast),
    .m_inject_terr(dij_terr),
    .m_axi_awaddr(hd_awaddr),
    .m_axi_awlen(hd_awlen),
    .m_axi_awsize(hd_awsize),
    .m_axi_awburst(hd_awburst),
    .m_axi_awvalid(hd_awvalid),
    .m_axi_awready(hd_awready),
    .m_axi_wdata(hd_wdata),
    .m_axi_wstrb(hd_wstrb),
    .m_axi_wlast(hd_wlast),
    .m_axi_wvalid(hd_wvalid),
    .m_axi_wready(hd_wready),
    .m_axi_bresp(hd_bresp),
    .m_axi_bvalid(hd_bvalid),
    .m_axi_bready(hd_bready),
    .m_axi_araddr(hd_araddr),
    .m_axi_arlen(hd_arlen),
    .m_axi_arsize(hd_arsize),
    .m_axi_arburst(hd_arburst),
    .m_axi_arvalid(hd_arvalid),
    .m_axi_arready(hd_arready),
    .m_axi_rdata(hd_rdata),
    .m_axi_rresp(hd_rresp),
    .m_axi_rlast(hd_rlast),
    .m_axi_rvalid(hd_rvalid),
    .m_axi_rready(hd_rready),
    .irq(hd_irq),
    .dma_enable(dma_enable),
    .dma_wb(dma_wb),
    .s_cmd_fault(cmd_fault)
);

nlb_cmd_ring #(
    .VIP_DEPTH(VIP_BUCKETS * VIP_WAYS),
    .RULES(RULES),
    .POOLS(POOLS),
    .MAGLEV_SLOTS(MAGLEV_SLOTS),
    .BACKENDS(BACKENDS),
    .CT_ENTRIES(CT_BUCKETS * CT_WAYS),
    .CT_WAYS(CT_WAYS)
) cmd_ring_inst (
    .clk(clk),
    .rst(rst),
    .ext_wr_req(ext_wr_req && ext_wr_cmd),
    .ext_wr_addr(ext_wr_addr),
    .ext_wr_data(ext_wr_data),
    .ext_wr_strb(ext_wr_strb),
    .ext_wr_ack(cmd_wr_ack),
    .ext_rd_req(ext_rd_req && ext_rd_cmd),
    .ext_rd_addr(ext_rd_addr),
    .ext_rd_data(cmd_rd_data_w),
    .ext_rd_ack(cmd_rd_ack),
    .dma_enable(dma_enable),
    .dma_wb(dma_wb),
    .s_fault(cmd_fault),
    .irq(ce_irq),
    .m_axil_awaddr(ce_awaddr),
    .m_axil_awvalid(ce_awvalid),
    .m_axil_awready(ce_awready),
    .m_axil_wdata(ce_wdata),
    .m_axil_wstrb(ce_wstrb),
    .m_axil_wvalid(ce_wvalid),
    .m_axil_wready(ce_wready),
    .m_axil_bresp(ce_bresp),
    .m_axil_bvalid(ce_bvalid),
    .m_axil_bready(ce_bready),
    .m_axil_araddr(ce_araddr),
    .m_axil_arvalid(ce_arvalid),
    .m_axil_arready(ce_arready),
    .m_axil_rdata(ce_rdata),
    .m_axil_rresp(ce_rresp),
    .m_axil_rvalid(ce_rvalid),
    .m_axil_rready(ce_rready),
    .m_axi_awaddr(ce_m_awaddr),
    .m_axi_awlen(ce_m_awlen),
    .m_axi_awsize(ce_m_awsize),
    .m_axi_awburst(ce_m_awburst),
    .m_axi_awvalid(ce_m_awvalid),
    .m_axi_awready(ce_m_awready),
    .m_axi_wdata(ce_m_wdata),
    .m_axi_wstrb(ce_m_wstrb),
    .m_axi_wlast(ce_m_wlast),
    .m_axi_wvalid(ce_m_wvalid),
    .m_axi_wready(ce_m_wready),
    .m_axi_bresp(ce_m_bresp),
    .m_axi_bvalid(ce_m_bvalid),
    .m_axi_bready(ce_m_bready),
    .m_axi_araddr(ce_m_araddr),
    .m_axi_arlen(ce_m_arlen),
    .m_axi_arsize(ce_m_arsize),
    .m_axi_arburst(ce_m_arburst),
    .m_axi_arvalid(ce_m_arvalid),
    .m_axi_arready(ce_m_arready),
    .m_axi_rdata(ce_m_rdata),
    .m_axi_rresp(ce_m_rresp),
    .m_axi_rlast(ce_m_rlast),
    .m_axi_rvalid(ce_m_rvalid),
    .m_axi_rready(ce_m_rready),
    .ct_b_rd_valid(ct_b_rd_valid),
    .ct_b_rd_row(ct_b_rd_row),
    .ct_b_rd_ready(ct_b_rd_ready),
    .ct_b_rs_valid(ct_b_rs_valid),
    .ct_b_rs_row(ct_b_rs_row),
    .ct_b_rs_data(ct_b_rs_data),
    .mg_b_rd_valid(mg_b_rd_valid),
    .mg_b_rd_row(mg_b_rd_row),
    .mg_b_rd_ready(mg_b_rd_ready),
    .mg_b_rs_valid(mg_b_rs_valid),
    .mg_b_rs_row(mg_b_rs_row),
    .mg_b_rs_data(mg_b_rs_data),
    .mg_b_wr_req(mg_b_wr_req),
    .mg_b_wr_row(mg_b_wr_row),
    .mg_b_wr_data(mg_b_wr_data),
    .mg_b_wr_ack(mg_b_wr_ack)
);

assign m_dma_irq = hd_irq | ({{(NLB_RING_COUNT-1){1'b0}}, ce_irq} << NLB_RING_CMD);

nlb_axi_mux2 #(
    .DATA_WIDTH(DATA_WIDTH)
) dma_mux_inst (
    .clk(clk),
    .rst(rst),
    .s0_awaddr(hd_awaddr),
    .s0_awlen(hd_awlen),
    .s0_awsize(hd_awsize),
    .s0_awburst(hd_awburst),
    .s0_awvalid(hd_awvalid),
    .s0_awready(hd_awready),
    .s0_wdata(hd_wdata),
    .s0_wstrb(hd_wstrb),
    .s0_wlast(hd_wlast),
    .s0_wvalid(hd_wvalid),
    .s0_wready(hd_wready),
    .s0_bresp(hd_bresp),
    .s0_bvalid(hd_bvalid),
    .s0_bready(hd_bready),
    .s0_araddr(hd_araddr),
    .s0_arlen(hd_arlen),
    .s0_arsize(hd_arsize),
    .s0_arburst(hd_arburst),
    .s0_arvalid(hd_arvalid),
    .s0_arready(hd_arready),
    .s0_rdata(hd_rdata),
    .s0_rresp(hd_rresp),
    .s0_rlast(hd_rlast),
    .s0_rvalid(hd_rvalid),
    .s0_rready(hd_rready),
    .s1_awaddr(ce_m_awaddr),
    .s1_awlen(ce_m_awlen),
    .s1_awsize(ce_m_awsize),
    .s1_awburst(ce_m_awburst),
    .s1_awvalid(ce_m_awvalid),
    .s1_awready(ce_m_awready),
    .s1_wdata(ce_m_wdata),
    .s1_wstrb(ce_m_wstrb),
    .s1_wlast(ce_m_wlast),
    .s1_wvalid(ce_m_wvalid),
    .s1_wready(ce_m_wready),
    .s1_bresp(ce_m_bresp),
    .s1_bvalid(ce_m_bvalid),
    .s1_bready(ce_m_bready),
    .s1_araddr(ce_m_araddr),
    .s1_arlen(ce_m_arlen),
    .s1_arsize(ce_m_arsize),
    .s1_arburst(ce_m_arburst),
    .s1_arvalid(ce_m_arvalid),
    .s1_arready(ce_m_arready),
    .s1_rdata(ce_m_rdata),
    .s1_rresp(ce_m_rresp),
    .s1_rlast(ce_m_rlast),
    .s1_rvalid(ce_m_rvalid),
    .s1_rready(ce_m_rready),
    .m_awaddr(m_axi_dma_awaddr),
    .m_awlen(m_axi_dma_awlen),
    .m_awsize(m_axi_dma_awsize),
    .m_awburst(m_axi_dma_awburst),
    .m_awvalid(m_axi_dma_awvalid),
    .m_awready(m_axi_dma_awready),
    .m_wdata(m_axi_dma_wdata),
    .m_wstrb(m_axi_dma_wstrb),
    .m_wlast(m_axi_dma_wlast),
    .m_wvalid(m_axi_dma_wvalid),
    .m_wready(m_axi_dma_wready),
    .m_bresp(m_axi_dma_bresp),
    .m_bvalid(m_axi_dma_bvalid),
    .m_bready(m_axi_dma_bready),
    .m_araddr(m_axi_dma_araddr),
    .m_arlen(m_axi_dma_arlen),
    .m_arsize(m_axi_dma_arsize),
    .m_arburst(m_axi_dma_arburst),
    .m_arvalid(m_axi_dma_arvalid),
    .m_arready(m_axi_dma_arready),
    .m_rdata(m_axi_dma_rdata),
    .m_rresp(m_axi_dma_rresp),
    .m_rlast(m_axi_dma_rlast),
    .m_rvalid(m_axi_dma_rvalid),
    .m_rready(m_axi_dma_rready)
);

// ---- packets in flight --------------------------------------------------------------------

integer fb;
initial begin
    for (fb = 0; fb < 2; fb = fb + 1) begin
        in_flight_reg[fb] = 16'd0;
    end
end

always @(posedge clk) begin
    // From the first beat (as its port takes it) to the result, or to the drop.
    for (fb = 0; fb < 2; fb = fb + 1) begin
        in_flight_reg[fb] <= in_flight_reg[fb]
            + {15'd0, rx_first && ctrl_active_bank == fb[0]}
            + {15'd0, inj_port_first && ctrl_active_bank == fb[0]}
            - {15'd0, m_res_valid && m_res_bank == fb[0]}
            - {15'd0, drop_valid_reg && drop_bank_reg == fb[0]};
    end
    if (rst) begin
        for (fb = 0; fb < 2; fb = fb + 1) begin
            in_flight_reg[fb] <= 16'd0;
        end
    end
end

endmodule

`resetall
