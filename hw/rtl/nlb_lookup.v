`resetall
`timescale 1ns / 1ps
`default_nettype none

// The lookup pipeline of docs/pipeline.md sections 3-10: from a parser descriptor to the
// packet's verdict, reason, rule, pool, backend, connection-table outcome, flow hash, output
// length and learn/teardown event. One packet per clock while the table memories keep up
// (docs/pipeline.md section 14); results in descriptor order.
//
// Descriptors wait in a FIFO (s_room says it can take FIFO_DEPTH/2 more); each issues into the
// pipeline. An ICMP error with a usable quote issues twice: first its forward reading (the
// "shadow": the quote as sent toward a VIP), then the packet with the reversed reading. At
// stage C the packet takes the shadow's VIP lookup and hashes when its own reading has no VIP
// entry (docs/pipeline.md section 3); the shadow's verdict is decided there (it reads nothing
// more) and it is dropped from the results.
//
// Front stages (a register after each; every on-chip table read is a stage of its own,
// RD_LATENCY = 2):
//   I   issue: early verdicts (disabled, malformed, not IP, ICMP without quote), the flow
//   1-6 flow hashes of the VIP, TUPLE5, TUPLE3, TUPLE2 and TUPLE1 keys (nlb_flow_hash)
//   A   VIP bucket read issued; B: wait
//   C   VIP ways compared (VIP protocol: the flow's for TCP/UDP, else 0); every way's port slots
//       compared with the VIP port (all NLB_VIP_ENTRY_SLOT_COUNT = 16 in parallel); the ICMP
//       reading
//   D   port slots matched (the matching way's, lowest wins)
//   E   rule and ACL reads issued; F: wait
//   G   rule valid, ACL prefixes compared, fragment punt (several rules); pool read issued
//   H   the ACL's verdict
//   I2  pool: TCP fragment punt (tracking pool), affinity key type and hash, trackable, SYN
//       (a miss without lookup) or a connection-table read
//   J1  Maglev index: partial products; J2: their sum
//   K   slot = base + index; L: slice empty or slot past the slot memory
// Memory stages (nlb_mem_stage; variable latency, in order):
//   CT  the connection-table bucket of the packets that read it (one burst); with hardware
//       learning a packet leaves it only after the installs it must see (docs/pipeline.md
//       section 15.3)
//   X0  the install records of its row merged into the bucket (nlb_ct_learn)
//   X1  the bucket's ways compared: hit or miss, the hit's index and backend; the way an
//       install would take
//   X2  NO_BACKEND for an empty or out-of-range slice (not on a hit); the Maglev read
//   MG  the Maglev slot's row (16 slots) of the packets that read it
// Back stages:
//   M   backend id (the hit's, the slot's, or an injected frame's), backend read issued; N:
//       output length for either backend family
//   O   backend valid, output length, TOO_BIG, event; hit bit set; hardware learning's
//       install (a record of nlb_ct_learn)
// The lookup issues a descriptor only while the connection-table stage has a slot for every
// packet between the issue and its exit (CT_SLOTS), and that stage lets a packet go only while
// the Maglev stage has room for it; nothing waits after the Maglev stage (the editor's job FIFO
// holds every admitted packet). With memories answering at once the front takes 20 clocks, the
// two stages about 7 each, the back 3. A packet's table reads all use the bank latched at its
// first beat (m_user of the parser: bit 0 bank, bit 1 enable, bit 2 default action = DROP, bit 3
// injected, bits 15..4 the inject header's pool, bits 31..16 its backend); the Maglev slot's
// bank is the top bit of its row.
//
// Injected frames (docs/pipeline.md section 12) skip the VIP, rule, ACL, connection-table and
// Maglev stages: parse errors drop them (not IP too), then the header's pool and backend must
// be valid, and the action runs with reason INJECTED; ctrl.enable does not apply.
//
// The memory stages' command ports serve the connection-table block (ct_c_*: entry index =
// bucket * CT_WAYS + way, a whole entry per write or read) and the table window's Maglev
// commands (mg_c_*: bank and slot, one slot per write or read); see nlb_mem_stage for how their
// writes are ordered against the packets in flight.
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_lookup (
    clk,
    rst,
    s_valid,
    s_user,
    s_len,
    s_malformed,
    s_reason,
    s_not_ip,
    s_ipv6,
    s_l3_offset,
    s_l3_end,
    s_tos,
    s_dont_fragment,
    s_protocol,
    s_src,
    s_dst,
    s_fragment,
    s_frag_offset,
    s_ip_id,
    s_src_port,
    s_dst_port,
    s_tcp_flags,
    s_icmp_error,
    s_inner_valid,
    s_inner_protocol,
    s_inner_src,
    s_inner_dst,
    s_inner_src_port,
    s_inner_dst_port,
    s_room,
    hw_learn,
    host_time,
    vip_rd_en,
    vip_rd_bank,
    vip_rd_row,
    vip_rd_data,
    rule_rd_en,
    rule_rd_bank,
    rule_rd_row,
    rule_rd_data,
    acl_rd_en,
    acl_rd_bank,
    acl_rd_row,
    acl_rd_data,
    pool_rd_en,
    pool_rd_bank,
    pool_rd_row,
    pool_rd_data,
    backend_rd_en,
    backend_rd_bank,
    backend_rd_row,
    backend_rd_data,
    ct_c_wr_req,
    ct_c_wr_index,
    ct_c_wr_entry,
    ct_c_wr_ack,
    ct_c_wr_take,
    ct_c_rd_req,
    ct_c_rd_index,
    ct_c_rd_ack,
    ct_c_rd_entry,
    mg_c_wr_req,
    mg_c_wr_bank,
    mg_c_wr_index,
    mg_c_wr_slot,
    mg_c_wr_ack,
    mg_c_rd_req,
    mg_c_rd_bank,
    mg_c_rd_index,
    mg_c_rd_ack,
    mg_c_rd_slot,
    ct_b_rd_valid,
    ct_b_rd_row,
    ct_b_rd_ready,
    ct_b_rs_valid,
    ct_b_rs_row,
    ct_b_rs_data,
    mg_b_rd_valid,
    mg_b_rd_row,
    mg_b_rd_ready,
    mg_b_rs_valid,
    mg_b_rs_row,
    mg_b_rs_data,
    mg_b_wr_req,
    mg_b_wr_row,
    mg_b_wr_data,
    mg_b_wr_ack,
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
    st_ct_read,
    st_ct_lat_valid,
    st_ct_lat,
    st_mg_read,
    st_mg_lat_valid,
    st_mg_lat,
    st_wait,
    hit_set_en,
    hit_set_index,
    m_valid,
    m_inject,
    m_verdict,
    m_reason,
    m_bank,
    m_rule_valid,
    m_rule,
    m_pool_valid,
    m_pool,
    m_backend_valid,
    m_backend,
    m_key_valid,
    m_key,
    m_conntrack,
    m_ct_index,
    m_flow_hash,
    m_ip_id,
    m_len,
    m_out_len,
    m_event_valid,
    m_event,
    m_event_installed,
    m_event_ct_index,
    learn_added,
    m_protocol,
    m_client,
    m_client_port,
    m_vip,
    m_vip_port,
    m_icmp,
    m_delivery,
    m_be_ipv6,
    m_be_addr,
    m_be_mac,
    m_ipv6,
    m_l3_offset,
    m_l3_end,
    m_tos,
    m_dont_fragment
);

`include "nlb_regmap.vh"

// ---- parameters -------------------------------------------------------------------------

// Frame length width (as nlb_parser's LEN_WIDTH).
parameter LEN_WIDTH = 17;
// Table depths (the profile's; as nlb_regs and nlb_conntrack are built with).
parameter VIP_BUCKETS = NLB_PROFILE_SIM_VIP_BUCKETS;
parameter VIP_WAYS = NLB_PROFILE_SIM_VIP_WAYS;
parameter RULES = NLB_PROFILE_SIM_RULES;
parameter POOLS = NLB_PROFILE_SIM_POOLS;
parameter MAGLEV_SLOTS = NLB_PROFILE_SIM_MAGLEV_SLOTS;
parameter BACKENDS = NLB_PROFILE_SIM_BACKENDS;
parameter CT_BUCKETS = NLB_PROFILE_SIM_CT_BUCKETS;
parameter CT_WAYS = NLB_PROFILE_SIM_CT_WAYS;
// Read latency of every on-chip table memory (nlb_table_mem with its output register).
parameter RD_LATENCY = 2;
// Descriptor FIFO entries (a power of two >= 32: the parser may have 10 in flight when
// s_room falls).
parameter FIFO_DEPTH = 32;
// Memory ports (docs/pipeline.md section 14). Connection table: channels, data width (a row
// of CT_ROW_W = 1536 bits is CT_ROW_W / CT_DATA_W beats), packets its stage holds; Maglev
// slots likewise (a row is 16 slots, 256 bits). AXI address and id widths; each channel's
// region starts at *_CH_BASE + channel * *_CH_STRIDE.
parameter CT_CHANNELS = 1;
parameter CT_DATA_W = 1536;
parameter CT_SLOTS = 64;
parameter MG_CHANNELS = 1;
parameter MG_DATA_W = 256;
parameter MG_SLOTS = 64;
// Hardware learning (docs/pipeline.md section 15.3): 1 builds it (the install records of
// nlb_ct_learn, LEARN_RECS of them, and the ordering at the connection-table stage's exit).
parameter HW_LEARN = 1;
parameter LEARN_RECS = 64;
parameter ADDR_W = 32;
parameter ID_W = 6;
parameter [ADDR_W-1:0] CT_CH_BASE = {ADDR_W{1'b0}};
parameter [ADDR_W-1:0] CT_CH_STRIDE = {ADDR_W{1'b0}};
parameter [ADDR_W-1:0] MG_CH_BASE = {ADDR_W{1'b0}};
parameter [ADDR_W-1:0] MG_CH_STRIDE = {ADDR_W{1'b0}};

// ---- derived constants --------------------------------------------------------------------

localparam LW = LEN_WIDTH;
localparam VIP_ROW_BITS = $clog2(VIP_BUCKETS);
localparam RULE_ROW_BITS = $clog2(RULES);
localparam POOL_ROW_BITS = $clog2(POOLS);
localparam MAGLEV_ROW_BITS = $clog2(MAGLEV_SLOTS);
localparam BACKEND_ROW_BITS = $clog2(BACKENDS);
localparam CT_ROW_BITS = $clog2(CT_BUCKETS);
localparam CT_WAY_BITS = $clog2(CT_WAYS);
localparam CTIW = CT_ROW_BITS + CT_WAY_BITS;
localparam VW = NLB_VIP_ENTRY_WIDTH;
localparam CW = NLB_CT_ENTRY_WIDTH;
localparam FIFO_BITS = $clog2(FIFO_DEPTH);
// Port-range slots of a VIP entry, all compared in parallel in stage D.
localparam SLOTS = NLB_VIP_ENTRY_SLOT_COUNT;
// Largest frame sent (docs/pipeline.md section 9).
localparam [17:0] MAX_FRAME = 18'd9018;
// Memory rows: a connection-table bucket (its ways 48 bytes apart, 256 bytes between rows);
// 16 Maglev slots of 16 bits (32 bytes), the bank in the row index's top bit.
localparam CT_LANE_W = NLB_CT_ENTRY_WORDS * 32;
localparam CT_ROW_W = CT_WAYS * CT_LANE_W;
localparam CT_ROW_SHIFT = 8;
localparam MG_W = NLB_MAGLEV_SLOT_WIDTH;
localparam MG_ROW_W = 256;
localparam MG_ROW_SHIFT = 5;
localparam MG_LANE_BITS = 4;
localparam MG_ROW_BITS = MAGLEV_ROW_BITS + 1 - MG_LANE_BITS;
// Pool fields of the Maglev slice, and the slot (base + index, one bit of carry).
localparam MBW = NLB_POOL_ENTRY_MAGLEV_BASE_W;
localparam MSW = NLB_POOL_ENTRY_MAGLEV_SIZE_W;
localparam MSLOT_W = MBW + 1;
// The multiply's halves of the slice size.
localparam MS_LO = MSW / 2;
localparam MS_HI = MSW - MS_LO;

localparam [1:0] V_FORWARD = NLB_VERDICT_FORWARD;
localparam [1:0] V_PUNT = NLB_VERDICT_PUNT;
localparam [1:0] V_DROP = NLB_VERDICT_DROP;
localparam [1:0] V_PASS = NLB_VERDICT_PASS;
localparam [1:0] CT_NONE = 2'd0;
localparam [1:0] CT_HIT = 2'd1;
localparam [1:0] CT_MISS = 2'd2;
localparam [7:0] PROTO_TCP = 8'd6;
localparam [7:0] PROTO_UDP = 8'd17;

initial begin
    if (RD_LATENCY != 2) begin
        $error("nlb_lookup: the stages are laid out for table memories of read latency 2");
        $finish;
    end
    if ((1 << VIP_ROW_BITS) != VIP_BUCKETS || (1 << CT_ROW_BITS) != CT_BUCKETS
            || (1 << CT_WAY_BITS) != CT_WAYS || (1 << MAGLEV_ROW_BITS) != MAGLEV_SLOTS
            || MAGLEV_SLOTS < 16) begin
        $error("nlb_lookup: VIP_BUCKETS, CT_BUCKETS, CT_WAYS, MAGLEV_SLOTS (>= 16) must be powers of two");
        $finish;
    end
    if (FIFO_DEPTH < 32 || (1 << FIFO_BITS) != FIFO_DEPTH) begin
        $error("nlb_lookup: FIFO_DEPTH must be a power of two >= 32");
        $finish;
    end
    if (RULE_ROW_BITS > 12 || POOL_ROW_BITS > 12 || BACKEND_ROW_BITS > 16
            || MAGLEV_ROW_BITS > MBW) begin
        $error("nlb_lookup: a table is deeper than its id field can address");
        $finish;
    end
    if (CT_SLOTS < 8 || MG_SLOTS < 8 || MG_W * 16 != MG_ROW_W) begin
        $error("nlb_lookup: memory stages need 8 slots or more; a Maglev row is 16 slots");
        $finish;
    end
end

// ---- ports --------------------------------------------------------------------------------
// ---- ports --------------------------------------------------------------------------------

input  wire                  clk;
input  wire                  rst;

// Parser descriptor (nlb_parser m_*; fields as documented there).
input  wire                  s_valid;
input  wire [31:0]           s_user;
input  wire [LW-1:0]         s_len;
input  wire                  s_malformed;
input  wire [4:0]            s_reason;
input  wire                  s_not_ip;
input  wire                  s_ipv6;
input  wire [4:0]            s_l3_offset;
input  wire [LW-1:0]         s_l3_end;
input  wire [7:0]            s_tos;
input  wire                  s_dont_fragment;
input  wire [7:0]            s_protocol;
input  wire [127:0]          s_src;
input  wire [127:0]          s_dst;
input  wire                  s_fragment;
input  wire [15:0]           s_frag_offset;
input  wire [31:0]           s_ip_id;
input  wire [15:0]           s_src_port;
input  wire [15:0]           s_dst_port;
input  wire [7:0]            s_tcp_flags;
input  wire                  s_icmp_error;
input  wire                  s_inner_valid;
input  wire [7:0]            s_inner_protocol;
input  wire [127:0]          s_inner_src;
input  wire [127:0]          s_inner_dst;
input  wire [15:0]           s_inner_src_port;
input  wire [15:0]           s_inner_dst_port;
// The FIFO can take FIFO_DEPTH/2 more descriptors (registered).
output wire                  s_room;

// Hardware learning (dma.ctrl.hw_learn, with HW_LEARN) and the timestamp of what it installs
// (dma.host_time).
input  wire                  hw_learn;
input  wire [31:0]           host_time;

// Table read ports (nlb_regs): data RD_LATENCY clocks after the enable.
output wire                               vip_rd_en;
output wire                               vip_rd_bank;
output wire [VIP_ROW_BITS-1:0]            vip_rd_row;
input  wire [VIP_WAYS*VW-1:0]             vip_rd_data;
output wire                               rule_rd_en;
output wire                               rule_rd_bank;
output wire [RULE_ROW_BITS-1:0]           rule_rd_row;
input  wire [NLB_RULE_ENTRY_WIDTH-1:0]    rule_rd_data;
output wire                               acl_rd_en;
output wire                               acl_rd_bank;
output wire [RULE_ROW_BITS-1:0]           acl_rd_row;
input  wire [NLB_ACL_ENTRY_WIDTH-1:0]     acl_rd_data;
output wire                               pool_rd_en;
output wire                               pool_rd_bank;
output wire [POOL_ROW_BITS-1:0]           pool_rd_row;
input  wire [NLB_POOL_ENTRY_WIDTH-1:0]    pool_rd_data;
output wire                               backend_rd_en;
output wire                               backend_rd_bank;
output wire [BACKEND_ROW_BITS-1:0]        backend_rd_row;
input  wire [NLB_BACKEND_ENTRY_WIDTH-1:0] backend_rd_data;

// Connection-table commands (nlb_conntrack): a write and a read at a time; a write stores
// the entry (ct_c_wr_take when it took the stage's write record: packets leaving after see it;
// ct_c_wr_ack when the memory has it), a read returns the entry the memory holds.
input  wire                               ct_c_wr_req;
input  wire [CTIW-1:0]                    ct_c_wr_index;
input  wire [CW-1:0]                      ct_c_wr_entry;
output wire                               ct_c_wr_ack;
output wire                               ct_c_wr_take;
input  wire                               ct_c_rd_req;
input  wire [CTIW-1:0]                    ct_c_rd_index;
output wire                               ct_c_rd_ack;
output wire [CW-1:0]                      ct_c_rd_entry;

// Maglev slot commands (nlb_regs' table window), likewise.
input  wire                               mg_c_wr_req;
input  wire                               mg_c_wr_bank;
input  wire [MAGLEV_ROW_BITS-1:0]         mg_c_wr_index;
input  wire [MG_W-1:0]                    mg_c_wr_slot;
output wire                               mg_c_wr_ack;
input  wire                               mg_c_rd_req;
input  wire                               mg_c_rd_bank;
input  wire [MAGLEV_ROW_BITS-1:0]         mg_c_rd_index;
output wire                               mg_c_rd_ack;
output wire [MG_W-1:0]                    mg_c_rd_slot;

// Bulk reads of whole rows (the command ring's range reads; nlb_mem_stage's b_rd_* / b_rs_*):
// a connection-table row is a bucket (CT_WAYS lanes of CT_LANE_W bits), a Maglev row is
// {bank, slot / 16}: 16 slots of MG_W bits.
input  wire                               ct_b_rd_valid;
input  wire [CT_ROW_BITS-1:0]             ct_b_rd_row;
output wire                               ct_b_rd_ready;
output wire                               ct_b_rs_valid;
output wire [CT_ROW_BITS-1:0]             ct_b_rs_row;
output wire [CT_ROW_W-1:0]                ct_b_rs_data;
input  wire                               mg_b_rd_valid;
input  wire [MG_ROW_BITS-1:0]             mg_b_rd_row;
output wire                               mg_b_rd_ready;
output wire                               mg_b_rs_valid;
output wire [MG_ROW_BITS-1:0]             mg_b_rs_row;
output wire [MG_ROW_W-1:0]                mg_b_rs_data;
// Whole Maglev rows written (the command ring's range writes): one at a time, like
// mg_c_wr_*, and never at once with them (the ring's engine holds the table window while it
// writes).
input  wire                               mg_b_wr_req;
input  wire [MG_ROW_BITS-1:0]             mg_b_wr_row;
input  wire [MG_ROW_W-1:0]                mg_b_wr_data;
output wire                               mg_b_wr_ack;

// The memory ports (AXI4; nlb_mem_stage describes them): connection table, Maglev slots.
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

// Statistics (the mem block): a pipeline read issued, a read's latency when it is in (clocks),
// per table; st_wait: a descriptor waits for a memory-stage slot this clock.
output wire                               st_ct_read;
output wire                               st_ct_lat_valid;
output wire [15:0]                        st_ct_lat;
output wire                               st_mg_read;
output wire                               st_mg_lat_valid;
output wire [15:0]                        st_mg_lat;
output wire                               st_wait;

// Hit bits (nlb_conntrack).
output wire                               hit_set_en;
output wire [CTIW-1:0]                    hit_set_index;

// Result, one per descriptor, in order (docs/pipeline.md PacketResult; fields that do not
// apply are 0).
output wire                  m_valid;
output wire                  m_inject;         // an injected frame
output wire [1:0]            m_verdict;        // enum verdict
output wire [4:0]            m_reason;         // enum reason
output wire                  m_bank;
output wire                  m_rule_valid;
output wire [11:0]           m_rule;
output wire                  m_pool_valid;
output wire [11:0]           m_pool;
output wire                  m_backend_valid;
output wire [15:0]           m_backend;
output wire                  m_key_valid;
output wire [2:0]            m_key;            // enum key_type
output wire [1:0]            m_conntrack;      // 0 none, 1 hit, 2 miss
output wire [CTIW-1:0]       m_ct_index;       // with m_conntrack = hit
output wire [31:0]           m_flow_hash;
output wire [31:0]           m_ip_id;
output wire [LW-1:0]         m_len;
output wire [17:0]           m_out_len;        // FORWARD: bytes of the output frame
output wire                  m_event_valid;
output wire [1:0]            m_event;          // enum event
output wire                  m_event_installed; // LEARN: the NIC installed the connection
output wire [CTIW-1:0]       m_event_ct_index;  // ... at this entry
output wire                  learn_added;       // an install took a free way (nlb_conntrack's count)
output wire [7:0]            m_protocol;       // the flow (client -> VIP)
output wire [127:0]          m_client;
output wire [15:0]           m_client_port;
output wire [127:0]          m_vip;
output wire [15:0]           m_vip_port;
output wire                  m_icmp;           // an ICMP error forwarded with its flow
output wire [1:0]            m_delivery;       // enum delivery (FORWARD)
output wire                  m_be_ipv6;        // backend entry (FORWARD)
output wire [127:0]          m_be_addr;
output wire [47:0]           m_be_mac;
output wire                  m_ipv6;           // the packet's IP headers, for the editor
output wire [4:0]            m_l3_offset;
output wire [LW-1:0]         m_l3_end;
output wire [7:0]            m_tos;
output wire                  m_dont_fragment;


// ---- pipeline state -----------------------------------------------------------------------
// One packed vector per stage; F_x / W_x are the field positions. The fields below SWA are
// what the memory stages carry (the packet's state past stage L); then come the front stages'
// own (F_DDROP to F_PROD), then those set after the Maglev stage (from F_BINR).

localparam F_INJ = 0;
localparam W_INJ = 1; // an injected frame
localparam F_SHADOW = F_INJ + W_INJ;
localparam W_SHADOW = 1; // the forward reading of an ICMP error (not a packet; decided at stage C, dropped from the results)
localparam F_REAL = F_SHADOW + W_SHADOW;
localparam W_REAL = 1; // the packet slot of an ICMP error with a usable quote (its shadow is one ahead)
localparam F_ICMP = F_REAL + W_REAL;
localparam W_ICMP = 1; // an ICMP error with a usable quote
localparam F_DONE = F_ICMP + W_ICMP;
localparam W_DONE = 1; // the verdict is decided
localparam F_VERDICT = F_DONE + W_DONE;
localparam W_VERDICT = 2; // enum verdict
localparam F_REASON = F_VERDICT + W_VERDICT;
localparam W_REASON = 5; // enum reason
localparam F_BANK = F_REASON + W_REASON;
localparam W_BANK = 1; // latched table bank
localparam F_LEN = F_BANK + W_BANK;
localparam W_LEN = LW; // frame length
localparam F_V6 = F_LEN + W_LEN;
localparam W_V6 = 1; // IPv6
localparam F_L3OFF = F_V6 + W_V6;
localparam W_L3OFF = 5; // IP header offset
localparam F_L3END = F_L3OFF + W_L3OFF;
localparam W_L3END = LW; // end of the IP packet
localparam F_TOS = F_L3END + W_L3END;
localparam W_TOS = 8; // TOS / traffic class
localparam F_DF = F_TOS + W_TOS;
localparam W_DF = 1; // IPv4 DF (1 for IPv6)
localparam F_IPID = F_DF + W_DF;
localparam W_IPID = 32; // IP identification (0 unless parsed)
localparam F_PROTO = F_IPID + W_IPID;
localparam W_PROTO = 8; // flow protocol
localparam F_CLIENT = F_PROTO + W_PROTO;
localparam W_CLIENT = 128; // flow client address
localparam F_CPORT = F_CLIENT + W_CLIENT;
localparam W_CPORT = 16; // flow client port
localparam F_VIP = F_CPORT + W_CPORT;
localparam W_VIP = 128; // flow VIP
localparam F_VPORT = F_VIP + W_VIP;
localparam W_VPORT = 16; // flow VIP port
localparam F_TCPF = F_VPORT + W_VPORT;
localparam W_TCPF = 8; // TCP flags
localparam F_H5 = F_TCPF + W_TCPF;
localparam W_H5 = 32; // hash of the TUPLE5 key
localparam F_FHASH = F_H5 + W_H5;
localparam W_FHASH = 32; // flow hash (H5, H3 for fragments; 0 before the flow is known)
localparam F_RULEV = F_FHASH + W_FHASH;
localparam W_RULEV = 1; // a rule matched
localparam F_RULE = F_RULEV + W_RULEV;
localparam W_RULE = 12; // rule id
localparam F_POOLV = F_RULE + W_RULE;
localparam W_POOLV = 1; // pool reported
localparam F_POOL = F_POOLV + W_POOLV;
localparam W_POOL = 12; // pool id
localparam F_KEYV = F_POOL + W_POOL;
localparam W_KEYV = 1; // affinity key type reported
localparam F_KEY = F_KEYV + W_KEYV;
localparam W_KEY = 3; // enum key_type
localparam F_CT = F_KEY + W_KEY;
localparam W_CT = 2; // conntrack outcome: 0 none, 1 hit, 2 miss (stage X1 for the packets that read the table)
localparam F_CTRD = F_CT + W_CT;
localparam W_CTRD = 1; // the packet reads the connection table
localparam F_CTHIT = F_CTRD + W_CTRD;
localparam W_CTHIT = 1; // a valid entry of the bucket holds the flow
localparam F_CTIDX = F_CTHIT + W_CTHIT;
localparam W_CTIDX = CTIW; // its index
localparam F_CTBE = F_CTIDX + W_CTIDX;
localparam W_CTBE = 16; // its backend
localparam F_DELIV = F_CTBE + W_CTBE;
localparam W_DELIV = 2; // enum delivery
localparam F_MSLOT = F_DELIV + W_DELIV;
localparam W_MSLOT = MSLOT_W; // Maglev slot (base + index)
localparam F_MBAD = F_MSLOT + W_MSLOT;
localparam W_MBAD = 1; // the slice is empty or the slot is past the slot memory
localparam F_SYNO = F_MBAD + W_MBAD;
localparam W_SYNO = 1; // a SYN without ACK that reads the bucket only to learn (a miss whatever it holds)
localparam F_PC = F_SYNO + W_SYNO;
localparam W_PC = 1; // may install its connection (hardware learning on, trackable, not ICMP, not FIN/RST)
localparam F_LOK = F_PC + W_PC;
localparam W_LOK = 1; // the bucket has a way for the flow (its own entry, else a free one; stage X1)
localparam F_LWAY = F_LOK + W_LOK;
localparam W_LWAY = CT_WAY_BITS; // that way
localparam F_LNEW = F_LWAY + W_LWAY;
localparam W_LNEW = 1; // that way is a free one (an install adds a connection)
localparam F_BEV = F_LNEW + W_LNEW;
localparam W_BEV = 1; // backend reported
localparam F_BE = F_BEV + W_BEV;
localparam W_BE = 16; // backend id
localparam SWA = F_BE + W_BE;
localparam F_DDROP = F_BE + W_BE;
localparam W_DDROP = 1; // ctrl.default_action = DROP, latched
localparam F_FRAG = F_DDROP + W_DDROP;
localparam W_FRAG = 1; // a fragment (and not an ICMP error)
localparam F_LATER = F_FRAG + W_FRAG;
localparam W_LATER = 1; // a later fragment (no ports)
localparam F_PORTLESS = F_LATER + W_LATER;
localparam W_PORTLESS = 1; // neither TCP nor UDP: ports 0, VIP protocol 0 (docs/pipeline.md section 3)
localparam F_H3 = F_PORTLESS + W_PORTLESS;
localparam W_H3 = 32; // hash of the TUPLE3 key
localparam F_H2 = F_H3 + W_H3;
localparam W_H2 = 32; // hash of the TUPLE2 key
localparam F_H1 = F_H2 + W_H2;
localparam W_H1 = 32; // hash of the TUPLE1 key
localparam F_VHIT = F_H1 + W_H1;
localparam W_VHIT = 1; // the VIP table has an entry for (VIP protocol, VIP)
localparam F_SLOTS = F_VHIT + W_VHIT;
localparam W_SLOTS = SLOTS * NLB_PORT_SLOT_WIDTH; // its port slots
localparam F_RID = F_SLOTS + W_SLOTS;
localparam W_RID = 12; // rule id from the port slot
localparam F_SEVERAL = F_RID + W_RID;
localparam W_SEVERAL = 1; // the VIP entry has two or more valid slots
localparam F_RINR = F_SEVERAL + W_SEVERAL;
localparam W_RINR = 1; // rule id inside the rule table
localparam F_PINR = F_RINR + W_RINR;
localparam W_PINR = 1; // pool id inside the pool table
localparam F_MBASE = F_PINR + W_PINR;
localparam W_MBASE = MBW; // Maglev slice base
localparam F_MSIZE = F_MBASE + W_MBASE;
localparam W_MSIZE = MSW; // Maglev slice size
localparam F_AHASH = F_MSIZE + W_MSIZE;
localparam W_AHASH = 32; // hash of the affinity key
localparam F_PLO = F_AHASH + W_AHASH;
localparam W_PLO = 32 + MS_LO; // AHASH * MSIZE's low half
localparam F_PHI = F_PLO + W_PLO;
localparam W_PHI = 32 + MS_HI; // AHASH * MSIZE's high half
localparam F_PROD = F_PHI + W_PHI;
localparam W_PROD = 32 + MSW; // AHASH * MSIZE
localparam F_BINR = F_PROD + W_PROD;
localparam W_BINR = 1; // backend id inside the backend table
localparam F_BV6 = F_BINR + W_BINR;
localparam W_BV6 = 1; // backend is IPv6
localparam F_BADDR = F_BV6 + W_BV6;
localparam W_BADDR = 128; // backend address
localparam F_BMAC = F_BADDR + W_BADDR;
localparam W_BMAC = 48; // backend MAC
localparam F_OUTLEN = F_BMAC + W_BMAC;
localparam W_OUTLEN = 18; // output frame length (FORWARD)
localparam F_EVV = F_OUTLEN + W_OUTLEN;
localparam W_EVV = 1; // an event goes out
localparam F_EVK = F_EVV + W_EVV;
localparam W_EVK = 2; // enum event
localparam F_OLEN4 = F_EVK + W_EVK;
localparam W_OLEN4 = 18; // output frame length if the backend is IPv4 (from stage N)
localparam F_OLEN6 = F_OLEN4 + W_OLEN4;
localparam W_OLEN6 = 18; // output frame length if the backend is IPv6 (from stage N)
localparam F_BIG4 = F_OLEN6 + W_OLEN6;
localparam W_BIG4 = 1; // F_OLEN4 is over MAX_FRAME
localparam F_BIG6 = F_BIG4 + W_BIG4;
localparam W_BIG6 = 1; // F_OLEN6 is over MAX_FRAME
localparam F_SMATCH = F_BIG6 + W_BIG6;
localparam W_SMATCH = SLOTS; // which port slots hold the VIP port (from stage C)
localparam F_ACLCHK = F_SMATCH + W_SMATCH;
localparam W_ACLCHK = 1; // the rule's ACL decides in stage H (set in stage G)
localparam F_LINST = F_ACLCHK + W_ACLCHK;
localparam W_LINST = 1; // the NIC installed the connection (stage O, hardware learning)
localparam SW = F_LINST + W_LINST;

// ---- descriptor FIFO --------------------------------------------------------------------

localparam DW = 32 + LW + 1 + 5 + 1 + 1 + 5 + LW + 8 + 1 + 8 + 128 + 128 + 1 + 16 + 32 + 16
    + 16 + 8 + 1 + 1 + 8 + 128 + 128 + 16 + 16;

wire [DW-1:0] s_desc = {s_user, s_len, s_malformed, s_reason, s_not_ip, s_ipv6, s_l3_offset,
    s_l3_end, s_tos, s_dont_fragment, s_protocol, s_src, s_dst, s_fragment, s_frag_offset,
    s_ip_id, s_src_port, s_dst_port, s_tcp_flags, s_icmp_error, s_inner_valid,
    s_inner_protocol, s_inner_src, s_inner_dst, s_inner_src_port, s_inner_dst_port};

reg [DW-1:0]      fifo_mem [0:FIFO_DEPTH-1];
reg [FIFO_BITS:0] wr_ptr_reg = {(FIFO_BITS+1){1'b0}};
reg [FIFO_BITS:0] rd_ptr_reg = {(FIFO_BITS+1){1'b0}};
reg               room_reg = 1'b0;
reg               phase_reg = 1'b0;   // the head's shadow has issued

wire [FIFO_BITS:0] fifo_count = wr_ptr_reg - rd_ptr_reg;
wire               fifo_nonempty = wr_ptr_reg != rd_ptr_reg;
wire [DW-1:0]      head = fifo_mem[rd_ptr_reg[FIFO_BITS-1:0]];

wire [31:0]    d_user;
wire [LW-1:0]  d_len;
wire           d_malformed;
wire [4:0]     d_reason;
wire           d_not_ip;
wire           d_ipv6;
wire [4:0]     d_l3_offset;
wire [LW-1:0]  d_l3_end;
wire [7:0]     d_tos;
wire           d_df;
wire [7:0]     d_protocol;
wire [127:0]   d_src;
wire [127:0]   d_dst;
wire           d_fragment;
wire [15:0]    d_frag_offset;
wire [31:0]    d_ip_id;
wire [15:0]    d_sport;
wire [15:0]    d_dport;
wire [7:0]     d_tcp_flags;
wire           d_icmp_error;
wire           d_inner_valid;
wire [7:0]     d_q_proto;
wire [127:0]   d_q_src;
wire [127:0]   d_q_dst;
wire [15:0]    d_q_sport;
wire [15:0]    d_q_dport;
assign {d_user, d_len, d_malformed, d_reason, d_not_ip, d_ipv6, d_l3_offset, d_l3_end, d_tos,
    d_df, d_protocol, d_src, d_dst, d_fragment, d_frag_offset, d_ip_id, d_sport, d_dport,
    d_tcp_flags, d_icmp_error, d_inner_valid, d_q_proto, d_q_src, d_q_dst, d_q_sport,
    d_q_dport} = head;

wire d_bank = d_user[0];
wire d_enable = d_user[1];
wire d_ddrop = d_user[2];
wire d_inject = d_user[3];
wire [11:0] d_inj_pool = d_user[15:4];
wire [15:0] d_inj_backend = d_user[31:16];
wire d_parsed = (d_enable || d_inject) && !d_malformed && !d_not_ip;
// An ICMP error with a usable quote issues twice (shadow, then the packet).
wire d_two = d_parsed && !d_inject && d_icmp_error && d_inner_valid;
// A descriptor issues only while the connection-table stage has a slot for it (credits:
// packets issued that have not left that stage; the count misses the issues of the last two
// clocks, so two slots spare). An ICMP error's shadow issues only with room for its packet too,
// which issues in the next clock whatever the room then: the two stay next to each other
// through the stages.
reg  [$clog2(CT_SLOTS):0] ct_cnt_reg = {($clog2(CT_SLOTS)+1){1'b0}};
wire ct_room = {{(31-$clog2(CT_SLOTS)){1'b0}}, ct_cnt_reg} < CT_SLOTS - 2;
wire ct_room_two = {{(31-$clog2(CT_SLOTS)){1'b0}}, ct_cnt_reg} < CT_SLOTS - 3;
wire issue = fifo_nonempty && (phase_reg || (d_two ? ct_room_two : ct_room));
wire issue_shadow = issue && d_two && !phase_reg;
wire pop = issue && !issue_shadow;

always @(posedge clk) begin
    if (s_valid) begin
        fifo_mem[wr_ptr_reg[FIFO_BITS-1:0]] <= s_desc;
        wr_ptr_reg <= wr_ptr_reg + 1'b1;
    end
    if (pop) begin
        rd_ptr_reg <= rd_ptr_reg + 1'b1;
    end
    phase_reg <= issue_shadow;
    room_reg <= {{(31-FIFO_BITS){1'b0}}, fifo_count} <= FIFO_DEPTH / 2 - 2;
    if (rst) begin
        wr_ptr_reg <= {(FIFO_BITS+1){1'b0}};
        rd_ptr_reg <= {(FIFO_BITS+1){1'b0}};
        phase_reg <= 1'b0;
        room_reg <= 1'b0;
    end
end

assign s_room = room_reg;

// ---- stage I: issue ---------------------------------------------------------------------

reg [SW-1:0] iss;
always @* begin
    iss = {SW{1'b0}};
    iss[F_SHADOW] = issue_shadow;
    iss[F_REAL] = d_two && phase_reg;
    iss[F_ICMP] = d_two;
    iss[F_BANK] = d_bank;
    iss[F_DDROP] = d_ddrop;
    iss[F_LEN +: W_LEN] = d_len;
    iss[F_V6] = d_ipv6;
    iss[F_L3OFF +: W_L3OFF] = d_l3_offset;
    iss[F_L3END +: W_L3END] = d_l3_end;
    iss[F_TOS +: W_TOS] = d_tos;
    iss[F_DF] = d_df;
    iss[F_IPID +: W_IPID] = d_parsed ? d_ip_id : 32'd0;
    iss[F_TCPF +: W_TCPF] = d_tcp_flags;
    iss[F_FRAG] = d_fragment && !d_two;
    iss[F_LATER] = d_frag_offset != 16'd0 && !d_two;
    // Only TCP and UDP carry ports; a quote is always one of them (nlb_parser), so only a
    // packet's own protocol is compared (beside the flow mux, not after it).
    iss[F_PORTLESS] = !d_two && d_protocol != PROTO_TCP && d_protocol != PROTO_UDP;
    if (!d_two) begin
        iss[F_PROTO +: W_PROTO] = d_protocol;
        iss[F_CLIENT +: W_CLIENT] = d_src;
        iss[F_CPORT +: W_CPORT] = d_sport;
        iss[F_VIP +: W_VIP] = d_dst;
        iss[F_VPORT +: W_VPORT] = d_dport;
    end else if (!phase_reg) begin
        // Shadow: the quote read as a packet the client sent toward a VIP.
        iss[F_PROTO +: W_PROTO] = d_q_proto;
        iss[F_CLIENT +: W_CLIENT] = d_q_src;
        iss[F_CPORT +: W_CPORT] = d_q_sport;
        iss[F_VIP +: W_VIP] = d_q_dst;
        iss[F_VPORT +: W_VPORT] = d_q_dport;
    end else begin
        // The packet: the quote reversed (a packet sent from a VIP), the usual case.
        iss[F_PROTO +: W_PROTO] = d_q_proto;
        iss[F_CLIENT +: W_CLIENT] = d_q_dst;
        iss[F_CPORT +: W_CPORT] = d_q_dport;
        iss[F_VIP +: W_VIP] = d_q_src;
        iss[F_VPORT +: W_VPORT] = d_q_sport;
    end
    iss[F_INJ] = d_inject;
    if (d_inject && d_parsed) begin
        // The inject header names pool and backend (reported even when invalid).
        iss[F_POOLV] = 1'b1;
        iss[F_POOL +: W_POOL] = d_inj_pool;
        iss[F_BEV] = 1'b1;
        iss[F_BE +: W_BE] = d_inj_backend;
    end
    // Verdicts known before any lookup.
    if (d_inject) begin
        if (d_malformed) begin
            iss[F_DONE] = 1'b1;
            iss[F_VERDICT +: W_VERDICT] = V_DROP;
            iss[F_REASON +: W_REASON] = d_reason;
        end else if (d_not_ip) begin
            iss[F_DONE] = 1'b1;
            iss[F_VERDICT +: W_VERDICT] = V_DROP;
            iss[F_REASON +: W_REASON] = NLB_REASON_NOT_IP;
        end
    end else if (!d_enable) begin
        iss[F_DONE] = 1'b1;
        iss[F_VERDICT +: W_VERDICT] = V_PASS;
        iss[F_REASON +: W_REASON] = NLB_REASON_PIPELINE_DISABLED;
    end else if (d_malformed) begin
        iss[F_DONE] = 1'b1;
        iss[F_VERDICT +: W_VERDICT] = V_DROP;
        iss[F_REASON +: W_REASON] = d_reason;
    end else if (d_not_ip) begin
        iss[F_DONE] = 1'b1;
        iss[F_VERDICT +: W_VERDICT] = V_PASS;
        iss[F_REASON +: W_REASON] = NLB_REASON_NOT_IP;
    end else if (d_icmp_error && !d_inner_valid) begin
        iss[F_DONE] = 1'b1;
        iss[F_VERDICT +: W_VERDICT] = d_ddrop ? V_DROP : V_PASS;
        iss[F_REASON +: W_REASON] = NLB_REASON_ICMP_NO_FLOW;
    end
end

// Front stages: registers 0 (issue) to NF (after stage L).
localparam NF = 19;
localparam NST = NF;
reg [SW-1:0] st_reg [0:NST];
reg          vl_reg [0:NST];
reg [SW-1:0] nx [1:NST];

integer si;
initial begin
    for (si = 0; si <= NST; si = si + 1) begin
        st_reg[si] = {SW{1'b0}};
        vl_reg[si] = 1'b0;
    end
end

// ---- stages 1-6: flow hashes -------------------------------------------------------------

// The key fields of the issued state (the rest of it waits in the delay line).
/* verilator lint_off UNUSEDSIGNAL */
wire [SW-1:0] s0 = st_reg[0];
/* verilator lint_on UNUSEDSIGNAL */
wire [7:0]    k_proto = s0[F_PROTO +: W_PROTO];
wire [127:0]  k_client = s0[F_CLIENT +: W_CLIENT];
wire [127:0]  k_vip = s0[F_VIP +: W_VIP];
wire [15:0]   k_cport = s0[F_CPORT +: W_CPORT];
wire [15:0]   k_vport = s0[F_VPORT +: W_VPORT];
// The VIP protocol: the flow's for TCP and UDP, 0 (an L3_DEFAULT rule's entry) for the rest.
wire [7:0]    k_vproto = s0[F_PORTLESS] ? 8'd0 : k_proto;

// Canonical keys (docs/regmap.md "Flow hash"): {type, protocol, src port, dst port, 0, src,
// dst}, unused fields 0.
wire [319:0] key_vip = {8'd0, k_vproto, 48'd0, 128'd0, k_vip};
wire [319:0] key_t5 = {8'd5, k_proto, k_cport, k_vport, 16'd0, k_client, k_vip};
wire [319:0] key_t3 = {8'd3, k_proto, 48'd0, k_client, k_vip};
wire [319:0] key_t2 = {8'd2, 8'd0, 48'd0, k_client, k_vip};
wire [319:0] key_t1 = {8'd1, 8'd0, 48'd0, k_client, 128'd0};

// The VIP bucket takes the top bits of its hash.
/* verilator lint_off UNUSEDSIGNAL */
wire [31:0] hash_vip;
/* verilator lint_on UNUSEDSIGNAL */
wire [31:0] hash_t5, hash_t3, hash_t2, hash_t1;
/* verilator lint_off PINCONNECTEMPTY */
nlb_flow_hash hash_vip_inst (.clk(clk), .rst(rst), .s_key(key_vip), .s_user(1'b0),
    .s_valid(vl_reg[0]), .m_hash(hash_vip), .m_user(), .m_valid());
nlb_flow_hash hash_t5_inst (.clk(clk), .rst(rst), .s_key(key_t5), .s_user(1'b0),
    .s_valid(vl_reg[0]), .m_hash(hash_t5), .m_user(), .m_valid());
nlb_flow_hash hash_t3_inst (.clk(clk), .rst(rst), .s_key(key_t3), .s_user(1'b0),
    .s_valid(vl_reg[0]), .m_hash(hash_t3), .m_user(), .m_valid());
nlb_flow_hash hash_t2_inst (.clk(clk), .rst(rst), .s_key(key_t2), .s_user(1'b0),
    .s_valid(vl_reg[0]), .m_hash(hash_t2), .m_user(), .m_valid());
nlb_flow_hash hash_t1_inst (.clk(clk), .rst(rst), .s_key(key_t1), .s_user(1'b0),
    .s_valid(vl_reg[0]), .m_hash(hash_t1), .m_user(), .m_valid());
/* verilator lint_on PINCONNECTEMPTY */

// ---- stage A (6): hashes in; VIP bucket read ---------------------------------------------

wire [SW-1:0] sa = st_reg[6];
wire [31:0]   a_h5 = hash_t5;
wire [31:0]   a_h3 = hash_t3;
wire          a_frag = sa[F_FRAG];

always @* begin
    nx[7] = sa;
    nx[7][F_H5 +: 32] = hash_t5;
    nx[7][F_H3 +: 32] = hash_t3;
    nx[7][F_H2 +: 32] = hash_t2;
    nx[7][F_H1 +: 32] = hash_t1;
    if (!sa[F_DONE]) begin
        nx[7][F_FHASH +: 32] = a_frag ? a_h3 : a_h5;
    end
end

assign vip_rd_en = vl_reg[6];
assign vip_rd_bank = sa[F_BANK];
assign vip_rd_row = hash_vip[31 -: VIP_ROW_BITS];

// ---- stage B (7): wait ---------------------------------------------------------------------

always @* begin
    nx[8] = st_reg[7];
end

// ---- stage C (8): VIP ways; the ICMP reading ------------------------------------------------

wire [SW-1:0] sc = st_reg[8];
wire [SW-1:0] sc_alt = st_reg[9];      // for a packet of two issues: its shadow

// The VIP protocol looked up (as k_vproto at issue).
wire [7:0]   c_vproto = sc[F_PORTLESS] ? 8'd0 : sc[F_PROTO +: 8];
wire [15:0]  c_vport = sc[F_VPORT +: 16];
reg          c_hit;
// The matching entry (its slots are kept; valid, protocol and address were compared).
/* verilator lint_off UNUSEDSIGNAL */
reg [VW-1:0] c_entry;
/* verilator lint_on UNUSEDSIGNAL */
// Which of the matching entry's port slots hold the VIP port. Every way's slots are compared
// here, beside the way's own compare, so stage D starts from these bits: the 16-bit range
// compares and the lowest match in one clock were the whole pipeline's deepest path.
reg [SLOTS-1:0] c_smatch;
reg [SLOTS-1:0] c_way_smatch;
reg [NLB_PORT_SLOT_WIDTH-1:0] c_slot;
integer      cw;
integer      cs;
always @* begin
    c_hit = 1'b0;
    c_entry = {VW{1'b0}};
    c_smatch = {SLOTS{1'b0}};
    for (cw = VIP_WAYS - 1; cw >= 0; cw = cw - 1) begin
        for (cs = 0; cs < SLOTS; cs = cs + 1) begin
            c_slot = vip_rd_data[cw*VW + NLB_VIP_ENTRY_SLOT_LSB + cs*NLB_PORT_SLOT_WIDTH
                +: NLB_PORT_SLOT_WIDTH];
            c_way_smatch[cs] = c_slot[NLB_PORT_SLOT_VALID_LSB]
                && c_slot[NLB_PORT_SLOT_PORT_LO_LSB +: 16] <= c_vport
                && c_vport <= c_slot[NLB_PORT_SLOT_PORT_HI_LSB +: 16];
        end
        if (vip_rd_data[cw*VW + NLB_VIP_ENTRY_VALID_LSB]
                && vip_rd_data[cw*VW + NLB_VIP_ENTRY_PROTOCOL_LSB +: 8] == c_vproto
                && vip_rd_data[cw*VW + NLB_VIP_ENTRY_ADDR_LSB +: 128] == sc[F_VIP +: 128]) begin
            c_hit = 1'b1;
            c_entry = vip_rd_data[cw*VW +: VW];
            c_smatch = c_way_smatch;
        end
    end
end

always @* begin
    nx[9] = sc;
    nx[9][F_VHIT] = c_hit;
    nx[9][F_SLOTS +: W_SLOTS] = c_entry[NLB_VIP_ENTRY_SLOT_LSB +: W_SLOTS];
    nx[9][F_SMATCH +: W_SMATCH] = c_smatch;
    if (sc[F_REAL] && !c_hit) begin
        // No VIP entry for the reversed reading: the forward reading decides (its VIP lookup
        // and hashes are the shadow's, one stage ahead).
        nx[9][F_PROTO +: W_PROTO] = sc_alt[F_PROTO +: W_PROTO];
        nx[9][F_PORTLESS] = sc_alt[F_PORTLESS];
        nx[9][F_CLIENT +: W_CLIENT] = sc_alt[F_CLIENT +: W_CLIENT];
        nx[9][F_CPORT +: W_CPORT] = sc_alt[F_CPORT +: W_CPORT];
        nx[9][F_VIP +: W_VIP] = sc_alt[F_VIP +: W_VIP];
        nx[9][F_VPORT +: W_VPORT] = sc_alt[F_VPORT +: W_VPORT];
        nx[9][F_H5 +: 32] = sc_alt[F_H5 +: 32];
        nx[9][F_H3 +: 32] = sc_alt[F_H3 +: 32];
        nx[9][F_H2 +: 32] = sc_alt[F_H2 +: 32];
        nx[9][F_H1 +: 32] = sc_alt[F_H1 +: 32];
        nx[9][F_FHASH +: 32] = sc_alt[F_FHASH +: 32];
        nx[9][F_VHIT] = sc_alt[F_VHIT];
        nx[9][F_SLOTS +: W_SLOTS] = sc_alt[F_SLOTS +: W_SLOTS];
        nx[9][F_SMATCH +: W_SMATCH] = sc_alt[F_SMATCH +: W_SMATCH];
    end
    if (sc[F_SHADOW]) begin
        nx[9][F_DONE] = 1'b1;
    end
end

// ---- stage D (9): port slots -------------------------------------------------------------------

wire [SW-1:0] sd = st_reg[9];

// The port slots were compared in stage C (F_SMATCH): sl_match / sl_valid hold one bit per
// slot, the lowest set bit of each is isolated (a prefix OR, no carry chain) and selects its
// slot's rule by AND-OR. That is the documented "lowest matching slot" for any table contents
// (compiled ranges of a VIP are disjoint, so at most one matches), at a depth that grows with
// log2 of the slot count rather than with the count, as a priority chain would.
function [SLOTS-1:0] lowest_one(input [SLOTS-1:0] v);
    integer li;
    reg     seen;
    begin
        seen = 1'b0;
        for (li = 0; li < SLOTS; li = li + 1) begin
            lowest_one[li] = v[li] && !seen;
            seen = seen || v[li];
        end
    end
endfunction

reg [SLOTS-1:0] sl_valid;
reg [SLOTS-1:0] sl_match;
reg [SLOTS-1:0] sl_match_low;
reg [SLOTS-1:0] sl_valid_low;
reg [11:0]      sl_rule;
reg             sl_found;
reg             sl_any;
reg             sl_several;
reg [11:0]      sl_first_rule;
reg [NLB_PORT_SLOT_WIDTH-1:0] slot;
integer         sn;
always @* begin
    for (sn = 0; sn < SLOTS; sn = sn + 1) begin
        slot = sd[F_SLOTS + sn*NLB_PORT_SLOT_WIDTH +: NLB_PORT_SLOT_WIDTH];
        sl_valid[sn] = slot[NLB_PORT_SLOT_VALID_LSB];
    end
    sl_match = sd[F_SMATCH +: W_SMATCH];
    sl_match_low = lowest_one(sl_match);
    sl_valid_low = lowest_one(sl_valid);
    sl_found = |sl_match;
    sl_any = |sl_valid;
    // Two or more valid slots: a valid one besides the lowest.
    sl_several = |(sl_valid & ~sl_valid_low);
    sl_rule = 12'd0;
    sl_first_rule = 12'd0;
    for (sn = 0; sn < SLOTS; sn = sn + 1) begin
        slot = sd[F_SLOTS + sn*NLB_PORT_SLOT_WIDTH +: NLB_PORT_SLOT_WIDTH];
        sl_rule = sl_rule | ({12{sl_match_low[sn]}} & slot[NLB_PORT_SLOT_RULE_LSB +: 12]);
        sl_first_rule = sl_first_rule
            | ({12{sl_valid_low[sn]}} & slot[NLB_PORT_SLOT_RULE_LSB +: 12]);
    end
end

// Unmatched (docs/pipeline.md section 1): default action, NO_RULE or ICMP_NO_FLOW, no rule.
function [SW-1:0] unmatched(input [SW-1:0] s);
    begin
        unmatched = s;
        unmatched[F_DONE] = 1'b1;
        unmatched[F_VERDICT +: W_VERDICT] = s[F_DDROP] ? V_DROP : V_PASS;
        unmatched[F_REASON +: W_REASON] = s[F_ICMP] ? NLB_REASON_ICMP_NO_FLOW
            : NLB_REASON_NO_RULE;
        unmatched[F_RULEV] = 1'b0;
        unmatched[F_POOLV] = 1'b0;
    end
endfunction

function [SW-1:0] ended(input [SW-1:0] s, input [1:0] verdict, input [4:0] reason);
    begin
        ended = s;
        ended[F_DONE] = 1'b1;
        ended[F_VERDICT +: W_VERDICT] = verdict;
        ended[F_REASON +: W_REASON] = reason;
    end
endfunction

always @* begin
    nx[10] = sd;
    nx[10][F_SEVERAL] = sl_several;
    if (!sd[F_DONE] && !sd[F_INJ]) begin
        if (!sd[F_VHIT]) begin
            nx[10] = unmatched(nx[10]);
        end else if (sd[F_LATER]) begin
            // A later fragment has no ports (SPEC R4.3): one rule decides, several need the
            // host.
            if (sl_several) begin
                nx[10] = ended(nx[10], V_PUNT, NLB_REASON_FRAGMENT_NEEDS_STATE);
            end else if (sl_any) begin
                nx[10][F_RID +: 12] = sl_first_rule;
            end else begin
                nx[10] = unmatched(nx[10]);
            end
        end else if (sl_found) begin
            nx[10][F_RID +: 12] = sl_rule;
        end else begin
            nx[10] = unmatched(nx[10]);
        end
    end
end

// ---- stage E (10): rule and ACL reads ------------------------------------------------------

wire [SW-1:0] se = st_reg[10];
wire [11:0]   e_rid = se[F_RID +: 12];

always @* begin
    nx[11] = se;
    nx[11][F_RINR] = {20'd0, e_rid} < RULES;
end

assign rule_rd_en = vl_reg[10];
assign rule_rd_bank = se[F_BANK];
assign rule_rd_row = e_rid[RULE_ROW_BITS-1:0];
assign acl_rd_en = vl_reg[10];
assign acl_rd_bank = se[F_BANK];
assign acl_rd_row = e_rid[RULE_ROW_BITS-1:0];

// ---- stage F (11): wait --------------------------------------------------------------------

always @* begin
    nx[12] = st_reg[11];
end

// ---- stage G (12): rule, ACL, fragment punt; pool read ----------------------------------

wire [SW-1:0] sg = st_reg[12];
wire          g_rule_valid = rule_rd_data[NLB_RULE_ENTRY_VALID_LSB];
wire          g_acl_enabled = rule_rd_data[NLB_RULE_ENTRY_ACL_ENABLED_LSB];
// The pool: the rule's, or an injected frame's header's.
wire [11:0]   g_pool = sg[F_INJ] ? sg[F_POOL +: 12]
    : rule_rd_data[NLB_RULE_ENTRY_POOL_LSB +: 12];
wire [127:0]  g_client = sg[F_CLIENT +: 128];

// The client lies in one valid prefix (length 0 matches all; lengths past 128 match none).
// The check takes two clocks: here each prefix's masked difference is OR-ed in 16 groups of 8
// bits (and whether the prefix is usable), into registers beside stage H's state; stage H
// finishes the OR and decides. The mask is all ones shifted right by the length, inverted: the
// top `length` bits, with no subtraction in front of the shift.
localparam ACL_PC = NLB_ACL_ENTRY_PREFIX_COUNT;
localparam ACL_GROUPS = 16;
localparam ACL_GROUP_W = 128 / ACL_GROUPS;
reg [ACL_PC-1:0]            g_pfx_usable;
reg [ACL_PC*ACL_GROUPS-1:0] g_pfx_differs;
reg [NLB_ACL_PREFIX_WIDTH-1:0]  pfx;
reg [7:0]                       pfx_len;
reg [127:0]                     pfx_diff;
integer                         pn;
integer                         pg;
always @* begin
    for (pn = 0; pn < ACL_PC; pn = pn + 1) begin
        pfx = acl_rd_data[NLB_ACL_ENTRY_PREFIX_LSB + pn*NLB_ACL_PREFIX_WIDTH
            +: NLB_ACL_PREFIX_WIDTH];
        pfx_len = pfx[NLB_ACL_PREFIX_PREFIX_LEN_LSB +: 8];
        g_pfx_usable[pn] = pfx[NLB_ACL_PREFIX_VALID_LSB] && pfx_len <= 8'd128;
        pfx_diff = (g_client ^ pfx[NLB_ACL_PREFIX_ADDR_LSB +: 128]) & ~(~128'd0 >> pfx_len);
        for (pg = 0; pg < ACL_GROUPS; pg = pg + 1) begin
            g_pfx_differs[pn*ACL_GROUPS + pg] = |pfx_diff[pg*ACL_GROUP_W +: ACL_GROUP_W];
        end
    end
end

always @* begin
    nx[13] = sg;
    nx[13][F_PINR] = {20'd0, g_pool} < POOLS;
    nx[13][F_ACLCHK] = 1'b0;
    if (!sg[F_DONE] && !sg[F_INJ]) begin
        if (!sg[F_RINR] || !g_rule_valid) begin
            nx[13] = unmatched(nx[13]);
        end else begin
            nx[13][F_RULEV] = 1'b1;
            nx[13][F_RULE +: 12] = sg[F_RID +: 12];
            // A denial (stage H) outranks what follows.
            nx[13][F_ACLCHK] = g_acl_enabled;
            if (sg[F_FRAG] && sg[F_SEVERAL]) begin
                // Fragments on a VIP with several rules go to the host, first ones with
                // their rule (SPEC R4.3).
                nx[13] = ended(nx[13], V_PUNT, NLB_REASON_FRAGMENT_NEEDS_STATE);
            end else begin
                nx[13][F_POOLV] = 1'b1;
                nx[13][F_POOL +: 12] = g_pool;
            end
        end
    end
end

assign pool_rd_en = vl_reg[12];
assign pool_rd_bank = sg[F_BANK];
assign pool_rd_row = g_pool[POOL_ROW_BITS-1:0];

// ---- stage H (13): the ACL's verdict -------------------------------------------------------

wire [SW-1:0] sh = st_reg[13];
reg [ACL_PC-1:0]            h_pfx_usable_reg;
reg [ACL_PC*ACL_GROUPS-1:0] h_pfx_differs_reg;
always @(posedge clk) begin
    h_pfx_usable_reg <= g_pfx_usable;
    h_pfx_differs_reg <= g_pfx_differs;
end

reg     h_allowed;
integer hn;
always @* begin
    h_allowed = 1'b0;
    for (hn = 0; hn < ACL_PC; hn = hn + 1) begin
        if (h_pfx_usable_reg[hn] && !(|h_pfx_differs_reg[hn*ACL_GROUPS +: ACL_GROUPS])) begin
            h_allowed = 1'b1;
        end
    end
end

always @* begin
    nx[14] = sh;
    if (sh[F_ACLCHK] && !h_allowed) begin
        nx[14] = ended(nx[14], V_DROP, NLB_REASON_ACL_DENIED);
        nx[14][F_POOLV] = 1'b0;
    end
end

// ---- stage I2 (14): pool, keys, connection-table read --------------------------------------

wire [SW-1:0] si2 = st_reg[14];
wire          p_valid = pool_rd_data[NLB_POOL_ENTRY_VALID_LSB];
wire [2:0]    p_affinity = pool_rd_data[NLB_POOL_ENTRY_AFFINITY_LSB +: 3];
wire [1:0]    p_delivery = pool_rd_data[NLB_POOL_ENTRY_DELIVERY_LSB +: 2];
wire [MBW-1:0] p_base = pool_rd_data[NLB_POOL_ENTRY_MAGLEV_BASE_LSB +: MBW];
wire [MSW-1:0] p_size = pool_rd_data[NLB_POOL_ENTRY_MAGLEV_SIZE_LSB +: MSW];
wire          p_track = pool_rd_data[NLB_POOL_ENTRY_TRACK_LSB];
wire          i_frag = si2[F_FRAG];
wire          i_portless = si2[F_PORTLESS];
wire [7:0]    i_proto = si2[F_PROTO +: 8];
wire [7:0]    i_flags = si2[F_TCPF +: 8];

reg [2:0]  i_key;
reg [31:0] i_ahash;
always @* begin
    case (p_affinity)
        NLB_AFFINITY_NONE, NLB_AFFINITY_CLIENT_IP_PORT_PROTO: begin
            // Fragments and portless flows take the 3-tuple (docs/pipeline.md section 6).
            i_key = (i_frag || i_portless) ? NLB_KEY_TYPE_TUPLE3 : NLB_KEY_TYPE_TUPLE5;
        end
        NLB_AFFINITY_CLIENT_IP_PROTO: i_key = NLB_KEY_TYPE_TUPLE3;
        NLB_AFFINITY_CLIENT_IP: i_key = NLB_KEY_TYPE_TUPLE2;
        default: i_key = NLB_KEY_TYPE_TUPLE1;
    endcase
    case (i_key)
        NLB_KEY_TYPE_TUPLE5: i_ahash = si2[F_H5 +: 32];
        NLB_KEY_TYPE_TUPLE3: i_ahash = si2[F_H3 +: 32];
        NLB_KEY_TYPE_TUPLE2: i_ahash = si2[F_H2 +: 32];
        default: i_ahash = si2[F_H1 +: 32];
    endcase
end

// Any protocol is tracked (a portless flow by its protocol and addresses, ports 0).
wire i_trackable = p_track && !i_frag;
// A TCP fragment of a tracking pool may belong to an established connection whose backend is
// not what the fragment key hashes to: the host sends it the connection's way (SPEC R4.1).
// Injected frames are the host's own decisions and never punted.
wire i_tcp_frag_punt = p_track && i_frag && i_proto == PROTO_TCP && !si2[F_INJ];
// A TCP SYN without ACK always selects anew (not for ICMP errors).
wire i_syn_only = !si2[F_ICMP] && i_proto == PROTO_TCP && (i_flags & 8'h12) == 8'h02;
// With hardware learning every trackable packet reads its bucket: a SYN too, for the way its
// install takes (its own entry, else the lowest free one). Those that may install (a LEARN
// needs a miss, a FORWARD, and neither an ICMP error nor a FIN or RST) order the packets of
// their bucket behind them at the connection-table stage's exit.
wire i_learn = HW_LEARN != 0 && hw_learn;
wire i_closing = i_proto == PROTO_TCP && (i_flags & 8'h05) != 8'h00;

always @* begin
    nx[15] = si2;
    if (!si2[F_DONE]) begin
        if (!si2[F_PINR] || !p_valid) begin
            nx[15] = ended(nx[15], V_DROP, NLB_REASON_NO_BACKEND);
        end else if (i_tcp_frag_punt) begin
            nx[15] = ended(nx[15], V_PUNT, NLB_REASON_FRAGMENT_NEEDS_STATE);
        end else begin
            nx[15][F_KEYV] = !si2[F_INJ];
            nx[15][F_KEY +: 3] = si2[F_INJ] ? 3'd0 : i_key;
            nx[15][F_AHASH +: 32] = i_ahash;
            nx[15][F_DELIV +: 2] = p_delivery;
            nx[15][F_MBASE +: MBW] = p_base;
            nx[15][F_MSIZE +: MSW] = p_size;
            if (i_trackable && !si2[F_INJ]) begin
                // A SYN is a miss without lookup; the others read the bucket (stage X1 says
                // hit or miss).
                nx[15][F_CT +: 2] = CT_MISS;
                nx[15][F_CTRD] = !i_syn_only || i_learn;
                nx[15][F_SYNO] = i_syn_only && i_learn;
                nx[15][F_PC] = i_learn && !si2[F_ICMP] && !i_closing;
            end
        end
    end
end

// ---- stage J1 (15): Maglev index, partial products --------------------------------------------

// index(h, M) = (h * M) >> 32 with M up to 2^MSW - 1: two products of 32 x MSW/2 bits here, their
// sum in J2, so that neither stage holds a whole 32 x 24 multiply.
wire [SW-1:0] sj1 = st_reg[15];
always @* begin
    nx[16] = sj1;
    nx[16][F_PLO +: W_PLO] = sj1[F_AHASH +: 32] * sj1[F_MSIZE +: MS_LO];
    nx[16][F_PHI +: W_PHI] = sj1[F_AHASH +: 32] * sj1[F_MSIZE + MS_LO +: MS_HI];
end

// ---- stage J2 (16): Maglev index, the sum ------------------------------------------------------

wire [SW-1:0] sj2 = st_reg[16];
always @* begin
    nx[17] = sj2;
    nx[17][F_PROD +: W_PROD] = {{MS_HI{1'b0}}, sj2[F_PLO +: W_PLO]}
        + {sj2[F_PHI +: W_PHI], {MS_LO{1'b0}}};
end

// ---- stage K (17): Maglev slot ----------------------------------------------------------------

wire [SW-1:0]        sk = st_reg[17];
wire [MSLOT_W-1:0]   k_slot = {1'b0, sk[F_MBASE +: MBW]}
    + {{(MSLOT_W-MSW){1'b0}}, sk[F_PROD + 32 +: MSW]};

always @* begin
    nx[18] = sk;
    nx[18][F_MSLOT +: MSLOT_W] = k_slot;
end

// ---- stage L (18): slot range -------------------------------------------------------------------

// The slot's range check waits a stage after its add, so neither stage holds an add and a
// comparison in a row; the verdict waits for the connection table's outcome (stage X2).
wire [SW-1:0] sl = st_reg[18];

always @* begin
    nx[19] = sl;
    nx[19][F_MBAD] = sl[F_MSIZE +: MSW] == {MSW{1'b0}}
        || {{(32-MSLOT_W){1'b0}}, sl[F_MSLOT +: MSLOT_W]} >= MAGLEV_SLOTS;
end

// ---- the front's pipeline registers -------------------------------------------------------------

integer pi;
always @(posedge clk) begin
    st_reg[0] <= iss;
    vl_reg[0] <= issue;
    for (pi = 1; pi <= NST; pi = pi + 1) begin
        if (pi <= 6) begin
            st_reg[pi] <= st_reg[pi-1];
        end else begin
            st_reg[pi] <= nx[pi];
        end
        vl_reg[pi] <= vl_reg[pi-1];
    end
    if (rst) begin
        for (pi = 0; pi <= NST; pi = pi + 1) begin
            vl_reg[pi] <= 1'b0;
        end
    end
end

// ---- stage CT: the connection-table bucket -------------------------------------------------------

wire [SW-1:0] sf = st_reg[NF];
// Credits of the Maglev stage: packets out of the connection-table stage that have not left
// the Maglev stage. The connection-table stage has up to 2 packets between letting one go and
// showing it, and the count lags a clock: 4 slots spare.
reg  [$clog2(MG_SLOTS):0] mg_cnt_reg = {($clog2(MG_SLOTS)+1){1'b0}};
wire mg_room = {{(31-$clog2(MG_SLOTS)){1'b0}}, mg_cnt_reg} < MG_SLOTS - 4;

// Hardware learning at the stage's exit (below): whether the head may leave, the command
// write's hold, and the install records' direct writes.
wire               ct_allow;
wire               ct_leave;
wire               ct_c_wr_hold;
wire               lw_req;
wire [CT_ROW_BITS-1:0] lw_row;
wire [CT_WAY_BITS-1:0] lw_lane;
wire [CW-1:0]      lw_entry;
/* verilator lint_off UNUSEDSIGNAL */ // (without HW_LEARN)
wire               lw_take;
wire               lw_ack;
/* verilator lint_on UNUSEDSIGNAL */

wire               ct_m_valid;
wire [SWA-1:0]     ct_m_state;
/* verilator lint_off UNUSEDSIGNAL */ // (the read flag is in the state: F_CTRD)
wire               ct_m_read;
/* verilator lint_on UNUSEDSIGNAL */
wire [CT_ROW_W-1:0] ct_m_data;
wire [CT_ROW_W-1:0] ct_c_row;
wire               ct_c_rd_ack_w;
reg  [CT_WAY_BITS-1:0] ct_c_way_reg = {CT_WAY_BITS{1'b0}};

/* verilator lint_off PINCONNECTEMPTY */ // (the lookup's own wait count is st_wait)
nlb_mem_stage #(
    .STATE_W(SWA),
    .ROW_BITS(CT_ROW_BITS),
    .ROW_W(CT_ROW_W),
    .DATA_W(CT_DATA_W),
    .CHANNELS(CT_CHANNELS),
    .ADDR_W(ADDR_W),
    .ID_W(ID_W),
    .ROW_SHIFT(CT_ROW_SHIFT),
    .CH_BASE(CT_CH_BASE),
    .CH_STRIDE(CT_CH_STRIDE),
    .LANE_W(CT_LANE_W),
    .ENTRY_W(CW),
    .SLOTS(CT_SLOTS),
    .DIRECT_WR(HW_LEARN),
    .FULL_WR(0)
) ct_stage_inst (
    .clk(clk),
    .rst(rst),
    .s_valid(vl_reg[NF]),
    .s_state(sf[SWA-1:0]),
    .s_read(sf[F_CTRD] && !sf[F_DONE]),
    .s_row(sf[F_H5 + 31 -: CT_ROW_BITS]),
    .m_allow(ct_allow),
    .m_valid(ct_m_valid),
    .m_state(ct_m_state),
    .m_read(ct_m_read),
    .m_data(ct_m_data),
    .m_leave(ct_leave),
    .c_wr_hold(ct_c_wr_hold),
    .c_wr_take(ct_c_wr_take),
    .l_wr_req(lw_req),
    .l_wr_take(lw_take),
    .l_wr_row(lw_row),
    .l_wr_lane(lw_lane),
    .l_wr_entry(lw_entry),
    .l_wr_ack(lw_ack),
    .c_wr_req(ct_c_wr_req),
    .c_wr_row(ct_c_wr_index[CTIW-1 -: CT_ROW_BITS]),
    .c_wr_lane(ct_c_wr_index[CT_WAY_BITS-1:0]),
    .c_wr_entry(ct_c_wr_entry),
    .c_wr_full(1'b0),
    .c_wr_row_data({CT_ROW_W{1'b0}}),
    .c_wr_ack(ct_c_wr_ack),
    .c_rd_req(ct_c_rd_req),
    .c_rd_row(ct_c_rd_index[CTIW-1 -: CT_ROW_BITS]),
    .c_rd_ack(ct_c_rd_ack_w),
    .c_rd_data(ct_c_row),
    .b_rd_valid(ct_b_rd_valid),
    .b_rd_row(ct_b_rd_row),
    .b_rd_ready(ct_b_rd_ready),
    .b_rs_valid(ct_b_rs_valid),
    .b_rs_row(ct_b_rs_row),
    .b_rs_data(ct_b_rs_data),
    .st_read(st_ct_read),
    .st_lat_valid(st_ct_lat_valid),
    .st_lat(st_ct_lat),
    .st_wait(),
    .m_axi_araddr(m_axi_ct_araddr),
    .m_axi_arid(m_axi_ct_arid),
    .m_axi_arlen(m_axi_ct_arlen),
    .m_axi_arvalid(m_axi_ct_arvalid),
    .m_axi_arready(m_axi_ct_arready),
    .m_axi_rdata(m_axi_ct_rdata),
    .m_axi_rid(m_axi_ct_rid),
    .m_axi_rlast(m_axi_ct_rlast),
    .m_axi_rvalid(m_axi_ct_rvalid),
    .m_axi_rready(m_axi_ct_rready),
    .m_axi_awaddr(m_axi_ct_awaddr),
    .m_axi_awid(m_axi_ct_awid),
    .m_axi_awlen(m_axi_ct_awlen),
    .m_axi_awvalid(m_axi_ct_awvalid),
    .m_axi_awready(m_axi_ct_awready),
    .m_axi_wdata(m_axi_ct_wdata),
    .m_axi_wstrb(m_axi_ct_wstrb),
    .m_axi_wlast(m_axi_ct_wlast),
    .m_axi_wvalid(m_axi_ct_wvalid),
    .m_axi_wready(m_axi_ct_wready),
    .m_axi_bid(m_axi_ct_bid),
    .m_axi_bvalid(m_axi_ct_bvalid),
    .m_axi_bready(m_axi_ct_bready)
);
/* verilator lint_on PINCONNECTEMPTY */

// A command read returns the bucket; the entry is the way it named.
always @(posedge clk) begin
    if (ct_c_rd_req) begin
        ct_c_way_reg <= ct_c_rd_index[CT_WAY_BITS-1:0];
    end
end
assign ct_c_rd_ack = ct_c_rd_ack_w;
assign ct_c_rd_entry = ct_c_row[{{(32-CT_WAY_BITS){1'b0}}, ct_c_way_reg}*CT_LANE_W +: CW];

// ---- hardware learning: which packet sees which install (docs/pipeline.md section 15.3) -------
//
// A packet that may install its connection (F_PC) decides at stage O, from the bucket it saw
// at stage X1: so every packet of the same bucket behind it must see the install, and no
// install or command write may change that bucket between its X1 and its O. Hence:
// - Packets are numbered as they enter the connection-table stage. Each bucket slot (the row's
//   low bits) remembers its latest entrant that may install; a packet that reads the table
//   leaves the stage only once that one is settled: a hit at stage X1 (it installs nothing),
//   else decided at stage O (o_cnt), where its install took a record of nlb_ct_learn, merged
//   from then on into every bucket of its row at stage X0. (That entrant left the stage only
//   once the one before it in the slot was settled, and so on.)
// - A command write to the table takes the stage's record only while no packet that may
//   install is between the stage's exit and stage O, and no install of its row is still on its
//   way to memory (ct_c_wr_hold); while it waits, packets that may install stay in the stage.
//   So it lands after the installs before it and before those after it.
// - Nothing waits for a record: an install decided while every record is in use is not made
//   (lr_full); its LEARN says installed = 0 and the host installs it, as for a full bucket.
//   A record lives for about a table write and the stage's depth, so only a flood of new
//   connections faster than the table memory takes writes finds them all in use.
localparam LS_BITS = CT_ROW_BITS < 10 ? CT_ROW_BITS : 10;
localparam LSLOTS = 1 << LS_BITS;
localparam CT_SB = $clog2(CT_SLOTS);
localparam LCNT_W = 16;
localparam MERGE_W = NLB_CT_ENTRY_BACKEND_LSB + 16;

// Packets entered the stage, merged at X0, and decided at stage O.
reg  [LCNT_W-1:0] e_cnt_reg = {LCNT_W{1'b0}};
reg  [LCNT_W-1:0] x_cnt_reg = {LCNT_W{1'b0}};
reg  [LCNT_W-1:0] o_cnt_reg = {LCNT_W{1'b0}};
// Install records in use (all of them: lr_full).
wire [$clog2(LEARN_RECS):0] lr_used;
wire              lr_full = lr_used[$clog2(LEARN_RECS)];

// Whether packet number `seq` has been decided at stage O (counts modulo 2^LCNT_W; far fewer
// packets are in flight).
function passed(input [LCNT_W-1:0] seq, input [LCNT_W-1:0] done);
    reg [LCNT_W-1:0] d;
    begin
        d = done - seq - {{(LCNT_W-1){1'b0}}, 1'b1};
        passed = !d[LCNT_W-1];
    end
endfunction

// A bucket's slot: the low bits of its row (the row is the top CT_ROW_BITS of H5).
wire [LS_BITS-1:0] sf_slot = sf[F_H5 + 32 - CT_ROW_BITS +: LS_BITS];
wire               sf_reads = vl_reg[NF] && sf[F_CTRD] && !sf[F_DONE];
wire               sf_pc = sf_reads && sf[F_PC];

// The latest entrant of each slot that may install.
reg  [LSLOTS-1:0]  lc_valid_reg = {LSLOTS{1'b0}};
reg  [LCNT_W-1:0]  lc_seq_mem [0:LSLOTS-1];
// Settled packets by number modulo RS: set when stage O decides a packet or stage X1 finds a
// packet that may install a hit (it installs nothing), cleared as the next packet of that
// number enters. Fewer than RS packets are between the stage's entry and stage O, so a
// packet waited for is never confused with a later one (and the head's check is one bit, not
// a compare of counts).
localparam RS_BITS = $clog2(CT_SLOTS + MG_SLOTS) + 1;
localparam RS = 1 << RS_BITS;
reg  [RS-1:0]      rs_reg = {RS{1'b0}};
// Stage X1's settled hit (set with that stage, below); its number is the count of packets
// merged at X0 so far, less one (it was merged in the clock before).
wire               er_set;
wire [RS_BITS-1:0] er_seq = x_cnt_reg[RS_BITS-1:0] - 1'b1;
// The slot's latest entrant, read a stage ahead (stage L) and passed on from the packet
// entering now when it is of the same slot (the memory's read is not in the entry's path).
wire [LS_BITS-1:0] l_slot = st_reg[NF-1][F_H5 + 32 - CT_ROW_BITS +: LS_BITS];
reg  [LCNT_W-1:0]  lc_at_reg = {LCNT_W{1'b0}};
reg                lc_v_reg = 1'b0;
wire [LCNT_W-1:0]  lc_at = lc_at_reg;
wire               sf_dep = sf_reads && lc_v_reg && !passed(lc_at, o_cnt_reg)
    && !rs_reg[lc_at[RS_BITS-1:0]];

// Per packet in the stage, in its order (pushed as it enters, popped as it leaves): what it
// waits for.
reg  [CT_SB:0]     dq_tail_reg = {(CT_SB+1){1'b0}};
reg  [CT_SB:0]     dq_head_reg = {(CT_SB+1){1'b0}};
reg  [CT_SLOTS-1:0] dq_dep_reg = {CT_SLOTS{1'b0}};
reg  [CT_SLOTS-1:0] dq_pc_reg = {CT_SLOTS{1'b0}};
// (registers, not distributed RAM: their write data comes through lc_seq_mem's read; one
// vector, read by a compare per entry)
reg  [CT_SLOTS*RS_BITS-1:0] dq_seq_reg = {(CT_SLOTS*RS_BITS){1'b0}};
wire [CT_SB-1:0]   dq_head = dq_head_reg[CT_SB-1:0];
wire [CT_SB-1:0]   dq_tail = dq_tail_reg[CT_SB-1:0];

// The command write waiting for the stage's record, and its slot.
reg                host_wait_reg = 1'b0;
/* verilator lint_off UNUSEDSIGNAL */ // (the whole row and the way go to nlb_ct_learn)
reg  [CT_ROW_BITS-1:0] host_row_reg = {CT_ROW_BITS{1'b0}};
reg  [CT_WAY_BITS-1:0] host_way_reg = {CT_WAY_BITS{1'b0}};
/* verilator lint_on UNUSEDSIGNAL */
// Packets that may install, out of the stage and not yet decided: the count, and a leave not
// yet in it (the add is a clock behind the leave; the hold looks at both).
reg  [15:0]        ex_cnt_reg = 16'd0;
reg                ex_inc_reg = 1'b0;
reg                ex_dec_reg = 1'b0;
wire               lr_pending;

reg  [RS_BITS-1:0] dq_seq;
integer            dqi;
always @* begin
    dq_seq = {RS_BITS{1'b0}};
    for (dqi = 0; dqi < CT_SLOTS; dqi = dqi + 1) begin
        if (dq_head == dqi[CT_SB-1:0]) begin
            dq_seq = dq_seq_reg[dqi*RS_BITS +: RS_BITS];
        end
    end
end
wire head_waits = HW_LEARN != 0
    && ((dq_dep_reg[dq_head] && !rs_reg[dq_seq])
        || (host_wait_reg && dq_pc_reg[dq_head]));
assign ct_allow = mg_room && !head_waits;
assign ct_c_wr_hold = HW_LEARN != 0 && (lr_pending || ex_cnt_reg != 16'd0 || ex_inc_reg);

// Stage O's decision (below): an install, and every packet that may install decided.
wire               o_decided;
wire               o_pc;

integer lsi;
always @(posedge clk) begin
    if (vl_reg[NF]) begin
        e_cnt_reg <= e_cnt_reg + 1'b1;
        dq_tail_reg <= dq_tail_reg + 1'b1;
    end
    // Per entry, one compare with the tail (a bit written at a computed index builds a
    // shifter).
    for (lsi = 0; lsi < CT_SLOTS; lsi = lsi + 1) begin
        if (vl_reg[NF] && dq_tail == lsi[CT_SB-1:0]) begin
            dq_dep_reg[lsi] <= sf_dep;
            dq_pc_reg[lsi] <= sf_pc;
            dq_seq_reg[lsi*RS_BITS +: RS_BITS] <= lc_at[RS_BITS-1:0];
        end
    end
    if (ct_leave) begin
        dq_head_reg <= dq_head_reg + 1'b1;
    end
    if (ct_m_valid) begin
        x_cnt_reg <= x_cnt_reg + 1'b1;
    end
    if (o_decided) begin
        o_cnt_reg <= o_cnt_reg + 1'b1;
    end
    // The slot's latest entrant that may install. A number kept long enough to come round
    // again (2^LCNT_W packets later) cannot make a packet wait for nothing: the wait is also on
    // that number's settled bit (rs_reg), which is set unless a packet of that number is in
    // flight, and such a packet entered before the waiting one.
    for (lsi = 0; lsi < LSLOTS; lsi = lsi + 1) begin
        if (sf_pc && sf_slot == lsi[LS_BITS-1:0]) begin
            lc_valid_reg[lsi] <= 1'b1;
        end
    end
    lc_at_reg <= sf_pc && sf_slot == l_slot ? e_cnt_reg : lc_seq_mem[l_slot];
    lc_v_reg <= (sf_pc && sf_slot == l_slot) || lc_valid_reg[l_slot];
    if (sf_pc) begin
        lc_seq_mem[sf_slot] <= e_cnt_reg;
    end
    for (lsi = 0; lsi < RS; lsi = lsi + 1) begin
        if (vl_reg[NF] && e_cnt_reg[RS_BITS-1:0] == lsi[RS_BITS-1:0]) begin
            rs_reg[lsi] <= 1'b0;
        end
        if ((o_decided && o_cnt_reg[RS_BITS-1:0] == lsi[RS_BITS-1:0])
                || (er_set && er_seq == lsi[RS_BITS-1:0])) begin
            rs_reg[lsi] <= 1'b1;
        end
    end
    ex_inc_reg <= ct_leave && dq_pc_reg[dq_head];
    ex_dec_reg <= o_decided && o_pc;
    ex_cnt_reg <= ex_cnt_reg + {15'd0, ex_inc_reg} - {15'd0, ex_dec_reg};
    if (ct_c_wr_req) begin
        host_wait_reg <= 1'b1;
        host_row_reg <= ct_c_wr_index[CTIW-1 -: CT_ROW_BITS];
        host_way_reg <= ct_c_wr_index[CT_WAY_BITS-1:0];
    end
    if (ct_c_wr_take) begin
        host_wait_reg <= 1'b0;
    end
    if (rst) begin
        e_cnt_reg <= {LCNT_W{1'b0}};
        x_cnt_reg <= {LCNT_W{1'b0}};
        o_cnt_reg <= {LCNT_W{1'b0}};
        lc_valid_reg <= {LSLOTS{1'b0}};
        rs_reg <= {RS{1'b0}};
        dq_tail_reg <= {(CT_SB+1){1'b0}};
        dq_head_reg <= {(CT_SB+1){1'b0}};
        host_wait_reg <= 1'b0;
        ex_cnt_reg <= 16'd0;
        ex_inc_reg <= 1'b0;
        ex_dec_reg <= 1'b0;
    end
end

// Stage O's install (below), and the records.
wire                   o_install;
/* verilator lint_off UNUSEDSIGNAL */ // (without HW_LEARN)
wire [CT_ROW_BITS-1:0] o_row;
wire [CT_WAY_BITS-1:0] o_way;
wire [CW-1:0]          o_entry;
wire [CT_ROW_BITS-1:0] x0_row_in = ct_m_state[F_H5 + 31 -: CT_ROW_BITS];
/* verilator lint_on UNUSEDSIGNAL */
wire [CT_WAYS-1:0]     lr_hit;
wire [CT_WAYS*MERGE_W-1:0] lr_entry;

generate
    if (HW_LEARN != 0) begin : g_learn
        nlb_ct_learn #(
            .ROW_BITS(CT_ROW_BITS),
            .WAY_BITS(CT_WAY_BITS),
            .WAYS(CT_WAYS),
            .ENTRY_W(CW),
            .MERGE_W(MERGE_W),
            .RECS(LEARN_RECS),
            .CNT_W(LCNT_W)
        ) learn_inst (
            .clk(clk),
            .rst(rst),
            .a_valid(o_install),
            .a_row(o_row),
            .a_way(o_way),
            .a_entry(o_entry),
            .w_req(lw_req),
            .w_take(lw_take),
            .w_row(lw_row),
            .w_lane(lw_lane),
            .w_entry(lw_entry),
            .w_ack(lw_ack),
            .e_cnt(e_cnt_reg),
            .x_cnt(x_cnt_reg),
            .q_row(x0_row_in),
            .q_hit(lr_hit),
            .q_entry(lr_entry),
            .h_row(host_row_reg),
            .h_way(host_way_reg),
            .h_take(ct_c_wr_take),
            .h_pending(lr_pending),
            .used(lr_used)
        );
    end else begin : g_no_learn
        assign lw_req = 1'b0;
        assign lw_row = {CT_ROW_BITS{1'b0}};
        assign lw_lane = {CT_WAY_BITS{1'b0}};
        assign lw_entry = {CW{1'b0}};
        assign lr_hit = {CT_WAYS{1'b0}};
        assign lr_entry = {(CT_WAYS*MERGE_W){1'b0}};
        assign lr_pending = 1'b0;
        assign lr_used = {($clog2(LEARN_RECS)+1){1'b0}};
    end
endgenerate

// ---- stage X0: the install records merged into the bucket ------------------------------------

reg [SWA-1:0]      x0_state_reg = {SWA{1'b0}};
reg [CT_ROW_W-1:0] x0_data_reg = {CT_ROW_W{1'b0}};
reg                x0_valid_reg = 1'b0;
reg [CT_ROW_W-1:0] x0_merged;
integer            x0w;
always @* begin
    x0_merged = ct_m_data;
    for (x0w = 0; x0w < CT_WAYS; x0w = x0w + 1) begin
        if (lr_hit[x0w]) begin
            x0_merged[x0w*CT_LANE_W +: MERGE_W] = lr_entry[x0w*MERGE_W +: MERGE_W];
        end
    end
end
always @(posedge clk) begin
    x0_valid_reg <= ct_m_valid;
    x0_state_reg <= ct_m_state;
    x0_data_reg <= x0_merged;
    if (rst) begin
        x0_valid_reg <= 1'b0;
    end
end

// ---- stage X1: the bucket's ways ----------------------------------------------------------------

// The lowest valid way holding the flow (client -> VIP) hits; rule, flags and timestamp are
// not compared (docs/pipeline.md section 7).
wire [SW-1:0] x_in = {{(SW-SWA){1'b0}}, x0_state_reg};
reg             ct_hit;
reg [CT_WAY_BITS-1:0] ct_way;
reg [15:0]      ct_backend;
reg [CW-1:0]    ct_e;
// The lowest free way (an install's place when the flow has no entry).
reg             ct_free;
reg [CT_WAY_BITS-1:0] ct_free_way;
integer         xw;
always @* begin
    ct_hit = 1'b0;
    ct_way = {CT_WAY_BITS{1'b0}};
    ct_backend = 16'd0;
    ct_free = 1'b0;
    ct_free_way = {CT_WAY_BITS{1'b0}};
    for (xw = CT_WAYS - 1; xw >= 0; xw = xw - 1) begin
        ct_e = x0_data_reg[xw*CT_LANE_W +: CW];
        if (!ct_e[NLB_CT_ENTRY_VALID_LSB]) begin
            ct_free = 1'b1;
            ct_free_way = xw[CT_WAY_BITS-1:0];
        end
        if (ct_e[NLB_CT_ENTRY_VALID_LSB]
                && ct_e[NLB_CT_ENTRY_PROTOCOL_LSB +: 8] == x_in[F_PROTO +: 8]
                && ct_e[NLB_CT_ENTRY_SRC_PORT_LSB +: 16] == x_in[F_CPORT +: 16]
                && ct_e[NLB_CT_ENTRY_DST_PORT_LSB +: 16] == x_in[F_VPORT +: 16]
                && ct_e[NLB_CT_ENTRY_SRC_ADDR_LSB +: 128] == x_in[F_CLIENT +: 128]
                && ct_e[NLB_CT_ENTRY_DST_ADDR_LSB +: 128] == x_in[F_VIP +: 128]) begin
            ct_hit = 1'b1;
            ct_way = xw[CT_WAY_BITS-1:0];
            ct_backend = ct_e[NLB_CT_ENTRY_BACKEND_LSB +: 16];
        end
    end
end

// Hardware learning: a packet that may install and hits installs nothing; the packets of its
// slot behind it need not wait for its decision (its number is the count of packets merged
// at X0 so far, less one: it was merged in the clock before).
assign er_set = HW_LEARN != 0 && x0_valid_reg && x_in[F_PC] && x_in[F_CTRD] && !x_in[F_DONE]
    && ct_hit && !x_in[F_SYNO];

reg [SW-1:0] x1_reg = {SW{1'b0}};
reg          x1_valid_reg = 1'b0;
reg [SW-1:0] x1_next;
always @* begin
    x1_next = x_in;
    if (x_in[F_CTRD] && !x_in[F_DONE]) begin
        // A SYN reads only for its install: a miss whatever the bucket holds.
        x1_next[F_CTHIT] = ct_hit && !x_in[F_SYNO];
        x1_next[F_CTIDX +: CTIW] = {x_in[F_H5 + 31 -: CT_ROW_BITS], ct_way};
        x1_next[F_CTBE +: 16] = ct_backend;
        x1_next[F_CT +: 2] = ct_hit && !x_in[F_SYNO] ? CT_HIT : CT_MISS;
        // An install's way: the flow's own entry, else the lowest free way.
        x1_next[F_LOK] = ct_hit || ct_free;
        x1_next[F_LWAY +: CT_WAY_BITS] = ct_hit ? ct_way : ct_free_way;
        x1_next[F_LNEW] = !ct_hit && ct_free;
    end
end

// ---- stage X2: the slice's range; the Maglev read -------------------------------------------------

wire [SW-1:0] x1 = x1_reg;
reg  [SW-1:0] x2_reg = {SW{1'b0}};
reg           x2_valid_reg = 1'b0;
reg  [SW-1:0] x2_next;
always @* begin
    x2_next = x1;
    if (!x1[F_DONE] && x1[F_CT +: 2] != CT_HIT && !x1[F_INJ] && x1[F_MBAD]) begin
        x2_next = ended(x2_next, V_DROP, NLB_REASON_NO_BACKEND);
    end
end

wire [SW-1:0] x2 = x2_reg;
// Undecided packets that did not hit read their slot: global slot {bank, slot}, 16 to a row.
wire          x2_mg_read = !x2[F_DONE] && x2[F_CT +: 2] != CT_HIT && !x2[F_INJ];
wire [MG_ROW_BITS-1:0] x2_row = {x2[F_BANK], x2[F_MSLOT + MG_LANE_BITS +: MAGLEV_ROW_BITS - MG_LANE_BITS]};

always @(posedge clk) begin
    x1_valid_reg <= x0_valid_reg;
    x1_reg <= x1_next;
    x2_valid_reg <= x1_valid_reg;
    x2_reg <= x2_next;
    if (rst) begin
        x1_valid_reg <= 1'b0;
        x2_valid_reg <= 1'b0;
    end
end

// ---- stage MG: the Maglev slot's row -----------------------------------------------------------

wire               mg_m_valid;
wire [SWA-1:0]     mg_m_state;
/* verilator lint_off UNUSEDSIGNAL */ // (whether it read follows from the state)
wire               mg_m_read;
/* verilator lint_on UNUSEDSIGNAL */
wire [MG_ROW_W-1:0] mg_m_data;
wire [MG_ROW_W-1:0] mg_c_row;
reg  [MG_LANE_BITS-1:0] mg_c_lane_reg = {MG_LANE_BITS{1'b0}};
wire [MAGLEV_ROW_BITS:0] mg_c_wr_g = {mg_c_wr_bank, mg_c_wr_index};
// The stage's write acknowledged to the writer that asked (the window or the ring's engine).
wire               mg_wr_ack_w;
reg                mg_wr_bulk_reg = 1'b0;
always @(posedge clk) begin
    if (mg_c_wr_req || mg_b_wr_req) begin
        mg_wr_bulk_reg <= mg_b_wr_req;
    end
end
assign mg_c_wr_ack = mg_wr_ack_w && !mg_wr_bulk_reg;
assign mg_b_wr_ack = mg_wr_ack_w && mg_wr_bulk_reg;
wire [MAGLEV_ROW_BITS:0] mg_c_rd_g = {mg_c_rd_bank, mg_c_rd_index};

/* verilator lint_off PINCONNECTEMPTY */
nlb_mem_stage #(
    .STATE_W(SWA),
    .ROW_BITS(MG_ROW_BITS),
    .ROW_W(MG_ROW_W),
    .DATA_W(MG_DATA_W),
    .CHANNELS(MG_CHANNELS),
    .ADDR_W(ADDR_W),
    .ID_W(ID_W),
    .ROW_SHIFT(MG_ROW_SHIFT),
    .CH_BASE(MG_CH_BASE),
    .CH_STRIDE(MG_CH_STRIDE),
    .LANE_W(MG_W),
    .ENTRY_W(MG_W),
    .SLOTS(MG_SLOTS),
    .DIRECT_WR(0),
    .FULL_WR(1)
) mg_stage_inst (
    .clk(clk),
    .rst(rst),
    .s_valid(x2_valid_reg),
    .s_state(x2[SWA-1:0]),
    .s_read(x2_mg_read),
    .s_row(x2_row),
    .m_allow(1'b1),
    .m_valid(mg_m_valid),
    .m_state(mg_m_state),
    .m_read(mg_m_read),
    .m_data(mg_m_data),
    .m_leave(),
    .c_wr_hold(1'b0),
    .c_wr_take(),
    .l_wr_req(1'b0),
    .l_wr_take(),
    .l_wr_row({MG_ROW_BITS{1'b0}}),
    .l_wr_lane({MG_LANE_BITS{1'b0}}),
    .l_wr_entry({MG_W{1'b0}}),
    .l_wr_ack(),
    .c_wr_req(mg_c_wr_req || mg_b_wr_req),
    .c_wr_row(mg_b_wr_req ? mg_b_wr_row : mg_c_wr_g[MAGLEV_ROW_BITS -: MG_ROW_BITS]),
    .c_wr_lane(mg_c_wr_g[MG_LANE_BITS-1:0]),
    .c_wr_entry(mg_c_wr_slot),
    .c_wr_full(mg_b_wr_req),
    .c_wr_row_data(mg_b_wr_data),
    .c_wr_ack(mg_wr_ack_w),
    .c_rd_req(mg_c_rd_req),
    .c_rd_row(mg_c_rd_g[MAGLEV_ROW_BITS -: MG_ROW_BITS]),
    .c_rd_ack(mg_c_rd_ack),
    .c_rd_data(mg_c_row),
    .b_rd_valid(mg_b_rd_valid),
    .b_rd_row(mg_b_rd_row),
    .b_rd_ready(mg_b_rd_ready),
    .b_rs_valid(mg_b_rs_valid),
    .b_rs_row(mg_b_rs_row),
    .b_rs_data(mg_b_rs_data),
    .st_read(st_mg_read),
    .st_lat_valid(st_mg_lat_valid),
    .st_lat(st_mg_lat),
    .st_wait(),
    .m_axi_araddr(m_axi_mg_araddr),
    .m_axi_arid(m_axi_mg_arid),
    .m_axi_arlen(m_axi_mg_arlen),
    .m_axi_arvalid(m_axi_mg_arvalid),
    .m_axi_arready(m_axi_mg_arready),
    .m_axi_rdata(m_axi_mg_rdata),
    .m_axi_rid(m_axi_mg_rid),
    .m_axi_rlast(m_axi_mg_rlast),
    .m_axi_rvalid(m_axi_mg_rvalid),
    .m_axi_rready(m_axi_mg_rready),
    .m_axi_awaddr(m_axi_mg_awaddr),
    .m_axi_awid(m_axi_mg_awid),
    .m_axi_awlen(m_axi_mg_awlen),
    .m_axi_awvalid(m_axi_mg_awvalid),
    .m_axi_awready(m_axi_mg_awready),
    .m_axi_wdata(m_axi_mg_wdata),
    .m_axi_wstrb(m_axi_mg_wstrb),
    .m_axi_wlast(m_axi_mg_wlast),
    .m_axi_wvalid(m_axi_mg_wvalid),
    .m_axi_wready(m_axi_mg_wready),
    .m_axi_bid(m_axi_mg_bid),
    .m_axi_bvalid(m_axi_mg_bvalid),
    .m_axi_bready(m_axi_mg_bready)
);
/* verilator lint_on PINCONNECTEMPTY */

always @(posedge clk) begin
    if (mg_c_rd_req) begin
        mg_c_lane_reg <= mg_c_rd_g[MG_LANE_BITS-1:0];
    end
end
assign mg_c_rd_slot = mg_c_row[{{(32-MG_LANE_BITS){1'b0}}, mg_c_lane_reg}*MG_W +: MG_W];

// Credits: issued -> out of the connection-table stage; out of it -> out of the Maglev stage.
// The connection-table credit count adds a clock's issue and leave a clock later, from
// registers: `issue` comes from a decode of the descriptor FIFO's distributed-RAM read, and the
// count's add behind it was 15 levels (also when the next count was selected among the count
// plus and minus one: synthesis shares the two adds behind one operand mux).
reg ct_in_reg = 1'b0;
reg ct_out_reg = 1'b0;
always @(posedge clk) begin
    ct_in_reg <= issue;
    ct_out_reg <= ct_m_valid;
    ct_cnt_reg <= ct_cnt_reg + {{$clog2(CT_SLOTS){1'b0}}, ct_in_reg}
        - {{$clog2(CT_SLOTS){1'b0}}, ct_out_reg};
    mg_cnt_reg <= mg_cnt_reg + {{$clog2(MG_SLOTS){1'b0}}, ct_m_valid}
        - {{$clog2(MG_SLOTS){1'b0}}, mg_m_valid};
    if (rst) begin
        ct_in_reg <= 1'b0;
        ct_out_reg <= 1'b0;
        ct_cnt_reg <= {($clog2(CT_SLOTS)+1){1'b0}};
        mg_cnt_reg <= {($clog2(MG_SLOTS)+1){1'b0}};
    end
end

assign st_wait = fifo_nonempty && !ct_room;

// ---- stage M: backend id; backend read ------------------------------------------------------------

wire [SW-1:0] sm = {{(SW-SWA){1'b0}}, mg_m_state};
wire [MG_LANE_BITS-1:0] m_lane = sm[F_MSLOT +: MG_LANE_BITS];
wire [15:0]   m_be_id = sm[F_INJ] ? sm[F_BE +: 16] : sm[F_CT +: 2] == CT_HIT
    ? sm[F_CTBE +: 16]
    : mg_m_data[{{(32-MG_LANE_BITS){1'b0}}, m_lane}*MG_W + NLB_MAGLEV_SLOT_BACKEND_LSB +: 16];

reg [SW-1:0] bm_reg = {SW{1'b0}};
reg          bm_valid_reg = 1'b0;
reg [SW-1:0] bm_next;
always @* begin
    bm_next = sm;
    bm_next[F_BINR] = {16'd0, m_be_id} < BACKENDS;
    if (!sm[F_DONE]) begin
        bm_next[F_BEV] = 1'b1;
        bm_next[F_BE +: 16] = m_be_id;
    end
end

assign backend_rd_en = mg_m_valid;
assign backend_rd_bank = sm[F_BANK];
assign backend_rd_row = m_be_id[BACKEND_ROW_BITS-1:0];

// ---- stage N: output length for either backend family -------------------------------------

// Both candidates and their size checks are ready before the backend entry says which family
// it is, so stage O only selects.
wire [SW-1:0] sn2 = bm_reg;
wire [1:0]    n_deliv = sn2[F_DELIV +: 2];
wire [17:0]   n_l2_len = {{(18-LW){1'b0}}, sn2[F_LEN +: LW]};
wire [17:0]   n_l3_end = {{(18-LW){1'b0}}, sn2[F_L3END +: LW]};
wire          n_l2 = n_deliv == NLB_DELIVERY_L2_DSR;
wire          n_gue = n_deliv == NLB_DELIVERY_GUE;
// Outer headers: IPv4 20 or IPv6 40 bytes, and 8 of UDP for GUE; one add per length, and the
// size checks compare l3_end with constants rather than the sums.
wire [17:0]   n_add4 = n_gue ? 18'd28 : 18'd20;
wire [17:0]   n_add6 = n_gue ? 18'd48 : 18'd40;
wire [17:0]   n_olen4 = n_l2 ? n_l2_len : n_l3_end + n_add4;
wire [17:0]   n_olen6 = n_l2 ? n_l2_len : n_l3_end + n_add6;
wire          n_l2_big = n_l2_len > MAX_FRAME;

reg [SW-1:0] bn_reg = {SW{1'b0}};
reg          bn_valid_reg = 1'b0;
reg [SW-1:0] bn_next;
always @* begin
    bn_next = sn2;
    bn_next[F_OLEN4 +: 18] = n_olen4;
    bn_next[F_OLEN6 +: 18] = n_olen6;
    bn_next[F_BIG4] = n_l2 ? n_l2_big
        : n_gue ? n_l3_end > MAX_FRAME - 18'd28 : n_l3_end > MAX_FRAME - 18'd20;
    bn_next[F_BIG6] = n_l2 ? n_l2_big
        : n_gue ? n_l3_end > MAX_FRAME - 18'd48 : n_l3_end > MAX_FRAME - 18'd40;
end

// ---- stage O: backend, output length, event -----------------------------------------------

wire [SW-1:0] so = bn_reg;
wire          o_valid = backend_rd_data[NLB_BACKEND_ENTRY_VALID_LSB];
wire          o_v6 = backend_rd_data[NLB_BACKEND_ENTRY_IS_IPV6_LSB];
wire [17:0]   o_out_len = o_v6 ? so[F_OLEN6 +: 18] : so[F_OLEN4 +: 18];
wire          o_too_big = o_v6 ? so[F_BIG6] : so[F_BIG4];
wire [7:0]    o_proto = so[F_PROTO +: 8];
wire          o_closing = o_proto == PROTO_TCP && (so[F_TCPF +: 8] & 8'h05) != 8'h00;

reg [SW-1:0] bo_reg = {SW{1'b0}};
reg          bo_valid_reg = 1'b0;
reg [SW-1:0] bo_next;
always @* begin
    bo_next = so;
    if (!so[F_DONE]) begin
        if (!so[F_BINR] || !o_valid) begin
            bo_next = ended(bo_next, V_DROP, NLB_REASON_NO_BACKEND);
        end else if (o_too_big) begin
            bo_next = ended(bo_next, V_DROP, NLB_REASON_TOO_BIG);
        end else begin
            bo_next = ended(bo_next, V_FORWARD, so[F_INJ] ? NLB_REASON_INJECTED
                : so[F_ICMP] ? NLB_REASON_ICMP_ERROR_FORWARDED : NLB_REASON_FORWARDED);
            bo_next[F_OUTLEN +: 18] = o_out_len;
            bo_next[F_BV6] = o_v6;
            bo_next[F_BADDR +: 128] = backend_rd_data[NLB_BACKEND_ENTRY_ADDR_LSB +: 128];
            bo_next[F_BMAC +: 48] = backend_rd_data[NLB_BACKEND_ENTRY_MAC_LSB +: 48];
            // Events (section 10): forwarded trackable packets, not ICMP errors.
            if (so[F_CT +: 2] != CT_NONE && !so[F_ICMP]) begin
                if (o_closing) begin
                    bo_next[F_EVV] = 1'b1;
                    bo_next[F_EVK +: 2] = NLB_EVENT_TEARDOWN;
                end else if (so[F_CT +: 2] == CT_MISS) begin
                    bo_next[F_EVV] = 1'b1;
                    bo_next[F_EVK +: 2] = NLB_EVENT_LEARN;
                    // Hardware learning: the NIC installs it where stage X1 found room,
                    // when it has a record for the install.
                    bo_next[F_LINST] = so[F_PC] && so[F_LOK] && !lr_full;
                end
            end
        end
    end
end

// Hardware learning: the install (a record of nlb_ct_learn from the next clock on), and every
// packet that may install decided (the packets behind it in its bucket may leave the
// connection-table stage).
wire [CT_ROW_BITS-1:0] o_row_w = so[F_H5 + 31 -: CT_ROW_BITS];
assign o_decided = bn_valid_reg;
assign o_pc = so[F_PC];
assign o_install = bn_valid_reg && bo_next[F_LINST];
assign o_row = o_row_w;
assign o_way = so[F_LWAY +: CT_WAY_BITS];
reg [CW-1:0] o_entry_c;
always @* begin
    o_entry_c = {CW{1'b0}};
    o_entry_c[NLB_CT_ENTRY_VALID_LSB] = 1'b1;
    o_entry_c[NLB_CT_ENTRY_PROTOCOL_LSB +: 8] = so[F_PROTO +: 8];
    o_entry_c[NLB_CT_ENTRY_SRC_PORT_LSB +: 16] = so[F_CPORT +: 16];
    o_entry_c[NLB_CT_ENTRY_DST_PORT_LSB +: 16] = so[F_VPORT +: 16];
    o_entry_c[NLB_CT_ENTRY_SRC_ADDR_LSB +: 128] = so[F_CLIENT +: 128];
    o_entry_c[NLB_CT_ENTRY_DST_ADDR_LSB +: 128] = so[F_VIP +: 128];
    o_entry_c[NLB_CT_ENTRY_BACKEND_LSB +: 16] = so[F_BE +: 16];
    o_entry_c[NLB_CT_ENTRY_RULE_LSB +: 12] = so[F_RULEV] ? so[F_RULE +: 12] : 12'd0;
    o_entry_c[NLB_CT_ENTRY_TIMESTAMP_LSB +: 32] = host_time;
end
assign o_entry = o_entry_c;
assign learn_added = o_install && so[F_LNEW];

// A hit marks the entry whatever the verdict after it.
assign hit_set_en = bn_valid_reg && !so[F_SHADOW] && so[F_CT +: 2] == CT_HIT;
assign hit_set_index = so[F_CTIDX +: CTIW];

// ---- the back's registers ----------------------------------------------------------------

always @(posedge clk) begin
    bm_valid_reg <= mg_m_valid;
    bm_reg <= bm_next;
    bn_valid_reg <= bm_valid_reg;
    bn_reg <= bn_next;
    bo_valid_reg <= bn_valid_reg;
    bo_reg <= bo_next;
    if (rst) begin
        bm_valid_reg <= 1'b0;
        bn_valid_reg <= 1'b0;
        bo_valid_reg <= 1'b0;
    end
end

// ---- result -------------------------------------------------------------------------------

wire [SW-1:0] r = bo_reg;

assign m_valid = bo_valid_reg && !r[F_SHADOW];
assign m_inject = r[F_INJ];
assign m_verdict = r[F_VERDICT +: 2];
assign m_reason = r[F_REASON +: 5];
assign m_bank = r[F_BANK];
assign m_rule_valid = r[F_RULEV];
assign m_rule = r[F_RULEV] ? r[F_RULE +: 12] : 12'd0;
assign m_pool_valid = r[F_POOLV];
assign m_pool = r[F_POOLV] ? r[F_POOL +: 12] : 12'd0;
assign m_backend_valid = r[F_BEV];
assign m_backend = r[F_BEV] ? r[F_BE +: 16] : 16'd0;
assign m_key_valid = r[F_KEYV];
assign m_key = r[F_KEYV] ? r[F_KEY +: 3] : 3'd0;
assign m_conntrack = r[F_CT +: 2];
assign m_ct_index = r[F_CT +: 2] == CT_HIT ? r[F_CTIDX +: CTIW] : {CTIW{1'b0}};
assign m_flow_hash = r[F_FHASH +: 32];
assign m_ip_id = r[F_IPID +: 32];
assign m_len = r[F_LEN +: LW];
assign m_out_len = r[F_VERDICT +: 2] == V_FORWARD ? r[F_OUTLEN +: 18] : 18'd0;
assign m_event_valid = r[F_EVV];
assign m_event = r[F_EVK +: 2];
assign m_event_installed = r[F_LINST];
assign m_event_ct_index = r[F_LINST] ? {r[F_H5 + 31 -: CT_ROW_BITS], r[F_LWAY +: CT_WAY_BITS]}
    : {CTIW{1'b0}};
assign m_protocol = r[F_PROTO +: 8];
assign m_client = r[F_CLIENT +: 128];
assign m_client_port = r[F_CPORT +: 16];
assign m_vip = r[F_VIP +: 128];
assign m_vip_port = r[F_VPORT +: 16];
assign m_icmp = r[F_ICMP];
assign m_delivery = r[F_DELIV +: 2];
assign m_be_ipv6 = r[F_BV6];
assign m_be_addr = r[F_BADDR +: 128];
assign m_be_mac = r[F_BMAC +: 48];
assign m_ipv6 = r[F_V6];
assign m_l3_offset = r[F_L3OFF +: 5];
assign m_l3_end = r[F_L3END +: LW];
assign m_tos = r[F_TOS +: 8];
assign m_dont_fragment = r[F_DF];

`ifdef FORMAL
// Formal properties of the per-packet table bank (hw/scripts/formal.sh).
`include "nlb_lookup_props.vh"
`endif

endmodule

`resetall
