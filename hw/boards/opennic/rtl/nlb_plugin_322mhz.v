`resetall
`timescale 1ns / 1ps
`default_nettype none

// nlb-offload in AMD's OpenNIC shell: the user plugin of the 322 MHz box (docs/boards.md).
// The shell's box_322mhz instantiates it (through plugin/box_322mhz/user_plugin_322mhz_inst.vh)
// with the ports below; everything runs on the CMAC's clock but for the register port
// (axil_aclk, 125 MHz) and the host DMA port (axis_aclk, 250 MHz).
//
// - MAC receive (s_axis_cmac_rx, no tready) passes a store-and-forward FIFO that takes every
//   beat and drops whole the frames the MAC marks bad on their last beat (bad FCS; counted in
//   rx_err_frames), so no such frame reaches the pipeline; good frames go on whole, one beat
//   per clock, into nlb_top's receive side, which takes every beat (docs/pipeline.md section
//   14.4). The cost is one frame's time of latency.
// - MAC transmit (m_axis_cmac_tx): forwarded frames and the host's own frames (from the
//   shell's transmit adapter, s_axis_adap_tx_322mhz), each through a store-and-forward FIFO
//   so tvalid never drops inside a frame, taken frame by frame, alternating when both wait.
// - Toward the host's network stack (m_axis_adap_rx_322mhz, no tready; the shell's receive
//   adapter and QDMA card-to-host stream): the frames the pipeline passes (PASS: not IP, no
//   rule with the default action PASS, everything while the pipeline is disabled), and the
//   frames it punts while the punt ring is not in use, without their punt header; taken frame
//   by frame, alternating when both wait, through a store-and-forward FIFO.
// - Learn/teardown events leave by the event ring only (the host DMA): on the card an event
//   with the ring not in use is lost, and counted (events_lost).
// - Injected frames come by the register window's inject queue of the host rings' design;
//   nlb_top's inject stream is idle here.
// - Registers: the box's 1 MiB window of BAR 2 (the shell's 0x200000) crosses to the CMAC
//   clock through nlb_axil_cdc. 0x00000-0x0FFFF: nlb_top's register map (hw/regmap.toml);
//   0x10000-0x100FF: this plugin's registers below; anything else answers DECERR.
// - Host DMA (m_axi_host_*, on axis_aclk): nlb_top's host-ring master crossed by nlb_axi_cdc,
//   for the QDMA's AXI-MM bridge slave; MSI-X requests on m_host_irq_* (docs/boards.md).
//
// Plugin registers (read-only; writes are accepted and ignored), at 0x10000 +
//   0x00 id             0x4E4C5031 ("NLP1")
//   0x04 config         bits 7:0 NUM_CMAC_PORT, bit 8 HOST_BRIDGE
//   0x08 rx_err_frames  frames the MAC marked bad (tuser_err on their last beat), dropped
//   0x0C host_tx_drops  host frames dropped (marked bad, or longer than 256 beats)
//   0x10 host_rx_drops  frames toward the host dropped (longer than 512 beats)
//   0x14 events_lost    events with no ring to go to
// Counters are 32 bits and wrap.
module nlb_plugin_322mhz #(
    // CMAC ports of the shell build (-num_cmac_port): 1.
    parameter NUM_CMAC_PORT = 1,
    // 1: the shell carries the host DMA port to the QDMA's AXI-MM bridge slave (m_axi_host_*,
    // m_host_irq_*; docs/boards.md). 0: an unchanged shell; the host rings' DMA is answered
    // DECERR inside the plugin (the rings count it as DMA_FAULT) and m_axi_host_*,
    // m_host_irq_* are idle.
    parameter HOST_BRIDGE = 1,
    // fw_id words stamped by the build (hw/boards/opennic/build.sh).
    parameter [31:0] BUILD_ID = 32'd0,
    parameter [31:0] GIT_HASH = 32'd0,
    parameter [31:0] BOARD_ID = 32'h0280,
    parameter [31:0] PART_ID = 32'h04B7D093
) (
    // Offsets in the box's 1 MiB window (the shell's crossbar takes its base off): bits 31:20
    // are 0.
    input  wire                         s_axil_awvalid,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [31:0]                  s_axil_awaddr,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                         s_axil_awready,
    input  wire                         s_axil_wvalid,
    input  wire [31:0]                  s_axil_wdata,
    output wire                         s_axil_wready,
    output wire                         s_axil_bvalid,
    output wire [1:0]                   s_axil_bresp,
    input  wire                         s_axil_bready,
    input  wire                         s_axil_arvalid,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [31:0]                  s_axil_araddr,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                         s_axil_arready,
    output wire                         s_axil_rvalid,
    output wire [31:0]                  s_axil_rdata,
    output wire [1:0]                   s_axil_rresp,
    input  wire                         s_axil_rready,

    input  wire [NUM_CMAC_PORT-1:0]     s_axis_adap_tx_322mhz_tvalid,
    input  wire [512*NUM_CMAC_PORT-1:0] s_axis_adap_tx_322mhz_tdata,
    input  wire [64*NUM_CMAC_PORT-1:0]  s_axis_adap_tx_322mhz_tkeep,
    input  wire [NUM_CMAC_PORT-1:0]     s_axis_adap_tx_322mhz_tlast,
    input  wire [NUM_CMAC_PORT-1:0]     s_axis_adap_tx_322mhz_tuser_err,
    output wire [NUM_CMAC_PORT-1:0]     s_axis_adap_tx_322mhz_tready,

    output wire [NUM_CMAC_PORT-1:0]     m_axis_adap_rx_322mhz_tvalid,
    output wire [512*NUM_CMAC_PORT-1:0] m_axis_adap_rx_322mhz_tdata,
    output wire [64*NUM_CMAC_PORT-1:0]  m_axis_adap_rx_322mhz_tkeep,
    output wire [NUM_CMAC_PORT-1:0]     m_axis_adap_rx_322mhz_tlast,
    output wire [NUM_CMAC_PORT-1:0]     m_axis_adap_rx_322mhz_tuser_err,

    output wire [NUM_CMAC_PORT-1:0]     m_axis_cmac_tx_tvalid,
    output wire [512*NUM_CMAC_PORT-1:0] m_axis_cmac_tx_tdata,
    output wire [64*NUM_CMAC_PORT-1:0]  m_axis_cmac_tx_tkeep,
    output wire [NUM_CMAC_PORT-1:0]     m_axis_cmac_tx_tlast,
    output wire [NUM_CMAC_PORT-1:0]     m_axis_cmac_tx_tuser_err,
    input  wire [NUM_CMAC_PORT-1:0]     m_axis_cmac_tx_tready,

    input  wire [NUM_CMAC_PORT-1:0]     s_axis_cmac_rx_tvalid,
    input  wire [512*NUM_CMAC_PORT-1:0] s_axis_cmac_rx_tdata,
    input  wire [64*NUM_CMAC_PORT-1:0]  s_axis_cmac_rx_tkeep,
    input  wire [NUM_CMAC_PORT-1:0]     s_axis_cmac_rx_tlast,
    input  wire [NUM_CMAC_PORT-1:0]     s_axis_cmac_rx_tuser_err,

    // The host rings' DMA master (axis_aclk): toward the QDMA's AXI-MM bridge slave.
    output wire [63:0]                  m_axi_host_awaddr,
    output wire [7:0]                   m_axi_host_awlen,
    output wire [2:0]                   m_axi_host_awsize,
    output wire [1:0]                   m_axi_host_awburst,
    output wire                         m_axi_host_awvalid,
    input  wire                         m_axi_host_awready,
    output wire [511:0]                 m_axi_host_wdata,
    output wire [63:0]                  m_axi_host_wstrb,
    output wire                         m_axi_host_wlast,
    output wire                         m_axi_host_wvalid,
    input  wire                         m_axi_host_wready,
    input  wire [1:0]                   m_axi_host_bresp,
    input  wire                         m_axi_host_bvalid,
    output wire                         m_axi_host_bready,
    output wire [63:0]                  m_axi_host_araddr,
    output wire [7:0]                   m_axi_host_arlen,
    output wire [2:0]                   m_axi_host_arsize,
    output wire [1:0]                   m_axi_host_arburst,
    output wire                         m_axi_host_arvalid,
    input  wire                         m_axi_host_arready,
    input  wire [511:0]                 m_axi_host_rdata,
    input  wire [1:0]                   m_axi_host_rresp,
    input  wire                         m_axi_host_rlast,
    input  wire                         m_axi_host_rvalid,
    output wire                         m_axi_host_rready,
    // MSI-X requests (axis_aclk): vector m_host_irq_vector while m_host_irq_valid, held until
    // m_host_irq_ready; requests of one ring made while one is pending are merged.
    output wire                         m_host_irq_valid,
    output wire [1:0]                   m_host_irq_vector,
    input  wire                         m_host_irq_ready,

    // SPI bus to the configuration flash (STARTUPE3 on the card: hw/boards/opennic/rtl).
    output wire                         spi_sck,
    output wire                         spi_cs_n,
    output wire                         spi_mosi,
    input  wire                         spi_miso,

    // The shell's reset pair for this module (axil_aclk): mod_rstn low asks for a reset,
    // mod_rst_done rises once every domain is out of it.
    input  wire                         mod_rstn,
    output wire                         mod_rst_done,

    input  wire                         axil_aclk,
    input  wire                         axis_aclk,
    input  wire [NUM_CMAC_PORT-1:0]     cmac_clk
);

`include "nlb_regmap.vh"

initial begin
    if (NUM_CMAC_PORT != 1 || (HOST_BRIDGE != 0 && HOST_BRIDGE != 1)) begin
        $error("nlb_plugin_322mhz: one CMAC port (build the shell with -num_cmac_port 1), HOST_BRIDGE 0 or 1");
        $finish;
    end
end

localparam DW = 512;
localparam KW = DW / 8;
// AXI responses.
localparam [1:0] RESP_OKAY = 2'b00;
localparam [1:0] RESP_DECERR = 2'b11;

wire clk = cmac_clk[0];

// ---- resets -------------------------------------------------------------------------------

wire rst_axis;
wire rst_axil;
wire rst;

nlb_reset_sync #(
    .DOMAINS(3)
) reset_inst (
    .ctrl_clk(axil_aclk),
    .req_rst_n(mod_rstn),
    .done(mod_rst_done),
    .clk({axis_aclk, axil_aclk, clk}),
    .rst({rst_axis, rst_axil, rst})
);

// ---- registers: the shell's register clock to the CMAC clock ------------------------------

wire [19:0] r_awaddr;
wire        r_awvalid;
wire        r_awready;
wire [31:0] r_wdata;
wire [3:0]  r_wstrb;
wire        r_wvalid;
wire        r_wready;
wire [1:0]  r_bresp;
wire        r_bvalid;
wire        r_bready;
wire [19:0] r_araddr;
wire        r_arvalid;
wire        r_arready;
wire [31:0] r_rdata;
wire [1:0]  r_rresp;
wire        r_rvalid;
wire        r_rready;

nlb_axil_cdc #(
    .ADDR_WIDTH(20)
) axil_cdc_inst (
    .s_clk(axil_aclk),
    .s_rst(rst_axil),
    .s_axil_awaddr(s_axil_awaddr[19:0]),
    .s_axil_awvalid(s_axil_awvalid),
    .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wstrb(4'hF),
    .s_axil_wvalid(s_axil_wvalid),
    .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp),
    .s_axil_bvalid(s_axil_bvalid),
    .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr[19:0]),
    .s_axil_arvalid(s_axil_arvalid),
    .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata),
    .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid),
    .s_axil_rready(s_axil_rready),
    .m_clk(clk),
    .m_rst(rst),
    .m_axil_awaddr(r_awaddr),
    .m_axil_awvalid(r_awvalid),
    .m_axil_awready(r_awready),
    .m_axil_wdata(r_wdata),
    .m_axil_wstrb(r_wstrb),
    .m_axil_wvalid(r_wvalid),
    .m_axil_wready(r_wready),
    .m_axil_bresp(r_bresp),
    .m_axil_bvalid(r_bvalid),
    .m_axil_bready(r_bready),
    .m_axil_araddr(r_araddr),
    .m_axil_arvalid(r_arvalid),
    .m_axil_arready(r_arready),
    .m_axil_rdata(r_rdata),
    .m_axil_rresp(r_rresp),
    .m_axil_rvalid(r_rvalid),
    .m_axil_rready(r_rready)
);

// The bridge has one access in flight at a time, so the address picks the slave and the
// responses need no steering: only the slave that took the access answers.
wire aw_to_top = r_awaddr[19:16] == 4'd0;
wire ar_to_top = r_araddr[19:16] == 4'd0;

wire        top_awready;
wire        top_wready;
wire [1:0]  top_bresp;
wire        top_bvalid;
wire        top_arready;
wire [31:0] top_rdata;
wire [1:0]  top_rresp;
wire        top_rvalid;

// This plugin's registers and the DECERR of the rest of the window: a write is taken when
// both its address and data are there, a read at once; one response at a time.
reg         own_bvalid_reg = 1'b0;
reg [1:0]   own_bresp_reg = 2'b00;
reg         own_rvalid_reg = 1'b0;
reg [1:0]   own_rresp_reg = 2'b00;
reg [31:0]  own_rdata_reg = 32'd0;
wire own_write = r_awvalid && r_wvalid && !aw_to_top && !own_bvalid_reg;
wire own_read = r_arvalid && !ar_to_top && !own_rvalid_reg;
wire aw_own_window = r_awaddr[19:8] == 12'h100;
wire ar_own_window = r_araddr[19:8] == 12'h100;

assign r_awready = aw_to_top ? top_awready : own_write;
assign r_wready = aw_to_top ? top_wready : own_write;
assign r_bvalid = top_bvalid || own_bvalid_reg;
assign r_bresp = own_bvalid_reg ? own_bresp_reg : top_bresp;
assign r_arready = ar_to_top ? top_arready : own_read;
assign r_rvalid = top_rvalid || own_rvalid_reg;
assign r_rresp = own_rvalid_reg ? own_rresp_reg : top_rresp;
assign r_rdata = own_rvalid_reg ? own_rdata_reg : top_rdata;

reg [31:0] rx_err_frames_reg = 32'd0;
reg [31:0] host_tx_drops_reg = 32'd0;
reg [31:0] host_rx_drops_reg = 32'd0;
reg [31:0] events_lost_reg = 32'd0;

always @(posedge clk) begin
    if (own_write) begin
        own_bvalid_reg <= 1'b1;
        own_bresp_reg <= aw_own_window ? RESP_OKAY : RESP_DECERR;
    end else if (r_bready) begin
        own_bvalid_reg <= 1'b0;
    end
    if (own_read) begin
        own_rvalid_reg <= 1'b1;
        own_rresp_reg <= ar_own_window ? RESP_OKAY : RESP_DECERR;
        case (r_araddr[7:0])
            8'h00: own_rdata_reg <= 32'h4E4C_5031;
            8'h04: own_rdata_reg <= {23'd0, HOST_BRIDGE[0], NUM_CMAC_PORT[7:0]};
            8'h08: own_rdata_reg <= rx_err_frames_reg;
            8'h0C: own_rdata_reg <= host_tx_drops_reg;
            8'h10: own_rdata_reg <= host_rx_drops_reg;
            8'h14: own_rdata_reg <= events_lost_reg;
            default: own_rdata_reg <= 32'd0;
        endcase
        if (!ar_own_window) begin
            own_rdata_reg <= 32'd0;
        end
    end else if (r_rready) begin
        own_rvalid_reg <= 1'b0;
    end
    if (rst) begin
        own_bvalid_reg <= 1'b0;
        own_rvalid_reg <= 1'b0;
    end
end

// ---- receive: whole frames, those the MAC marked bad dropped -----------------------------

wire [DW-1:0] rx_tdata;
wire [KW-1:0] rx_tkeep;
wire          rx_tvalid;
wire          rx_tlast;

// Frames are at most 256 beats (16,383 bytes) and leave as fast as they come, so 512 beats
// always have room for the frame arriving (DROP_WHEN_FULL only keeps tready high).
/* verilator lint_off PINCONNECTEMPTY */
nlb_axis_frame_fifo #(
    .DATA_WIDTH(DW),
    .DEPTH(512),
    .DROP_WHEN_FULL(1)
) mac_rx_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_axis_cmac_rx_tdata[DW-1:0]),
    .s_axis_tkeep(s_axis_cmac_rx_tkeep[KW-1:0]),
    .s_axis_tvalid(s_axis_cmac_rx_tvalid[0]),
    .s_axis_tready(),
    .s_axis_tlast(s_axis_cmac_rx_tlast[0]),
    .s_axis_tuser_err(s_axis_cmac_rx_tuser_err[0]),
    .m_axis_tdata(rx_tdata),
    .m_axis_tkeep(rx_tkeep),
    .m_axis_tvalid(rx_tvalid),
    .m_axis_tready(1'b1),
    .m_axis_tlast(rx_tlast),
    .m_drop(),
    .level()
);
/* verilator lint_on PINCONNECTEMPTY */

// ---- the pipeline -------------------------------------------------------------------------

wire [DW-1:0] tx_tdata;
wire [KW-1:0] tx_tkeep;
wire          tx_tvalid;
wire          tx_tready;
wire          tx_tlast;
wire [DW-1:0] punt_tdata;
wire [KW-1:0] punt_tkeep;
wire          punt_tvalid;
wire          punt_tready;
wire          punt_tlast;
wire [DW-1:0] pass_tdata;
wire [KW-1:0] pass_tkeep;
wire          pass_tvalid;
wire          pass_tready;
wire          pass_tlast;
wire          event_tvalid;
wire [NLB_RING_COUNT-1:0] dma_irq;

wire [63:0] dma_awaddr;
wire [7:0]  dma_awlen;
wire [2:0]  dma_awsize;
wire [1:0]  dma_awburst;
wire        dma_awvalid;
wire        dma_awready;
wire [DW-1:0] dma_wdata;
wire [KW-1:0] dma_wstrb;
wire        dma_wlast;
wire        dma_wvalid;
wire        dma_wready;
wire [1:0]  dma_bresp;
wire        dma_bvalid;
wire        dma_bready;
wire [63:0] dma_araddr;
wire [7:0]  dma_arlen;
wire [2:0]  dma_arsize;
wire [1:0]  dma_arburst;
wire        dma_arvalid;
wire        dma_arready;
wire [DW-1:0] dma_rdata;
wire [1:0]  dma_rresp;
wire        dma_rlast;
wire        dma_rvalid;
wire        dma_rready;

// Outputs nothing on the card uses: the result and control monitors, the drop report, the
// event stream's data and the table-memory ports of the on-chip profile.
/* verilator lint_off PINCONNECTEMPTY */
nlb_top #(
    .BUILD_ID(BUILD_ID),
    .GIT_HASH(GIT_HASH),
    .BOARD_ID(BOARD_ID),
    .PART_ID(PART_ID)
) top_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(r_awaddr[15:0]),
    .s_axil_awvalid(r_awvalid && aw_to_top),
    .s_axil_awready(top_awready),
    .s_axil_wdata(r_wdata),
    .s_axil_wstrb(r_wstrb),
    .s_axil_wvalid(r_wvalid && aw_to_top),
    .s_axil_wready(top_wready),
    .s_axil_bresp(top_bresp),
    .s_axil_bvalid(top_bvalid),
    .s_axil_bready(r_bready),
    .s_axil_araddr(r_araddr[15:0]),
    .s_axil_arvalid(r_arvalid && ar_to_top),
    .s_axil_arready(top_arready),
    .s_axil_rdata(top_rdata),
    .s_axil_rresp(top_rresp),
    .s_axil_rvalid(top_rvalid),
    .s_axil_rready(r_rready),
    .s_axis_rx_tdata(rx_tdata),
    .s_axis_rx_tkeep(rx_tkeep),
    .s_axis_rx_tvalid(rx_tvalid),
    .s_axis_rx_tlast(rx_tlast),
    .s_axis_inject_tdata({DW{1'b0}}),
    .s_axis_inject_tkeep({KW{1'b0}}),
    .s_axis_inject_tvalid(1'b0),
    .s_axis_inject_tready(),
    .s_axis_inject_tlast(1'b0),
    .s_axis_inject_tuser({(NLB_INJECT_HEADER_POOL_LSB + NLB_INJECT_HEADER_POOL_W){1'b0}}),
    .m_axis_tx_tdata(tx_tdata),
    .m_axis_tx_tkeep(tx_tkeep),
    .m_axis_tx_tvalid(tx_tvalid),
    .m_axis_tx_tready(tx_tready),
    .m_axis_tx_tlast(tx_tlast),
    .m_axis_punt_tdata(punt_tdata),
    .m_axis_punt_tkeep(punt_tkeep),
    .m_axis_punt_tvalid(punt_tvalid),
    .m_axis_punt_tready(punt_tready),
    .m_axis_punt_tlast(punt_tlast),
    .m_axis_pass_tdata(pass_tdata),
    .m_axis_pass_tkeep(pass_tkeep),
    .m_axis_pass_tvalid(pass_tvalid),
    .m_axis_pass_tready(pass_tready),
    .m_axis_pass_tlast(pass_tlast),
    .m_axis_event_tdata(),
    .m_axis_event_tvalid(event_tvalid),
    .m_axis_event_tready(1'b1),
    .m_event_dropped(),
    .m_axi_dma_awaddr(dma_awaddr),
    .m_axi_dma_awlen(dma_awlen),
    .m_axi_dma_awsize(dma_awsize),
    .m_axi_dma_awburst(dma_awburst),
    .m_axi_dma_awvalid(dma_awvalid),
    .m_axi_dma_awready(dma_awready),
    .m_axi_dma_wdata(dma_wdata),
    .m_axi_dma_wstrb(dma_wstrb),
    .m_axi_dma_wlast(dma_wlast),
    .m_axi_dma_wvalid(dma_wvalid),
    .m_axi_dma_wready(dma_wready),
    .m_axi_dma_bresp(dma_bresp),
    .m_axi_dma_bvalid(dma_bvalid),
    .m_axi_dma_bready(dma_bready),
    .m_axi_dma_araddr(dma_araddr),
    .m_axi_dma_arlen(dma_arlen),
    .m_axi_dma_arsize(dma_arsize),
    .m_axi_dma_arburst(dma_arburst),
    .m_axi_dma_arvalid(dma_arvalid),
    .m_axi_dma_arready(dma_arready),
    .m_axi_dma_rdata(dma_rdata),
    .m_axi_dma_rresp(dma_rresp),
    .m_axi_dma_rlast(dma_rlast),
    .m_axi_dma_rvalid(dma_rvalid),
    .m_axi_dma_rready(dma_rready),
    .m_dma_irq(dma_irq),
    .m_axi_ct_araddr(),
    .m_axi_ct_arid(),
    .m_axi_ct_arlen(),
    .m_axi_ct_arvalid(),
    .m_axi_ct_arready(1'b0),
    .m_axi_ct_rdata({1536{1'b0}}),
    .m_axi_ct_rid(6'd0),
    .m_axi_ct_rlast(1'b0),
    .m_axi_ct_rvalid(1'b0),
    .m_axi_ct_rready(),
    .m_axi_ct_awaddr(),
    .m_axi_ct_awid(),
    .m_axi_ct_awlen(),
    .m_axi_ct_awvalid(),
    .m_axi_ct_awready(1'b0),
    .m_axi_ct_wdata(),
    .m_axi_ct_wstrb(),
    .m_axi_ct_wlast(),
    .m_axi_ct_wvalid(),
    .m_axi_ct_wready(1'b0),
    .m_axi_ct_bid(6'd0),
    .m_axi_ct_bvalid(1'b0),
    .m_axi_ct_bready(),
    .m_axi_mg_araddr(),
    .m_axi_mg_arid(),
    .m_axi_mg_arlen(),
    .m_axi_mg_arvalid(),
    .m_axi_mg_arready(1'b0),
    .m_axi_mg_rdata({256{1'b0}}),
    .m_axi_mg_rid(6'd0),
    .m_axi_mg_rlast(1'b0),
    .m_axi_mg_rvalid(1'b0),
    .m_axi_mg_rready(),
    .m_axi_mg_awaddr(),
    .m_axi_mg_awid(),
    .m_axi_mg_awlen(),
    .m_axi_mg_awvalid(),
    .m_axi_mg_awready(1'b0),
    .m_axi_mg_wdata(),
    .m_axi_mg_wstrb(),
    .m_axi_mg_wlast(),
    .m_axi_mg_wvalid(),
    .m_axi_mg_wready(1'b0),
    .m_axi_mg_bid(6'd0),
    .m_axi_mg_bvalid(1'b0),
    .m_axi_mg_bready(),
    .m_drop_valid(),
    .m_drop_reason(),
    .m_drop_seq(),
    .m_res_valid(),
    .m_res_inject(),
    .m_res_verdict(),
    .m_res_reason(),
    .m_res_bank(),
    .m_res_rule_valid(),
    .m_res_rule(),
    .m_res_pool_valid(),
    .m_res_pool(),
    .m_res_backend_valid(),
    .m_res_backend(),
    .m_res_key_valid(),
    .m_res_key(),
    .m_res_conntrack(),
    .m_res_ct_index(),
    .m_res_flow_hash(),
    .m_res_ip_id(),
    .m_res_len(),
    .m_res_out_len(),
    .m_res_event_valid(),
    .m_res_event(),
    .m_res_protocol(),
    .m_res_client(),
    .m_res_client_port(),
    .m_res_vip(),
    .m_res_vip_port(),
    .m_res_icmp(),
    .m_res_delivery(),
    .m_res_be_ipv6(),
    .m_res_be_addr(),
    .m_res_be_mac(),
    .m_res_ipv6(),
    .m_res_l3_offset(),
    .m_res_l3_end(),
    .m_res_tos(),
    .m_res_dont_fragment(),
    .m_mon_active_bank(),
    .m_mon_enable(),
    .m_mon_default_action(),
    .m_mon_packets_in_flight(),
    .m_mon_bank_in_use(),
    .m_mon_hit_set(),
    .m_mon_hit_set_index(),
    .m_mon_hit_read(),
`ifdef NLB_SIM_HOOKS
    .sim_cnt_preset_valid(1'b0),
    .sim_cnt_preset_kind(2'd0),
    .sim_cnt_preset_index(16'd0),
    .sim_cnt_preset_value(256'd0),
    .sim_inject_waits(),
`endif
    .spi_sck(spi_sck),
    .spi_cs_n(spi_cs_n),
    .spi_mosi(spi_mosi),
    .spi_miso(spi_miso)
);
/* verilator lint_on PINCONNECTEMPTY */

// ---- transmit: forwarded frames and the host's frames to the MAC --------------------------

wire [DW-1:0] fwd_tdata;
wire [KW-1:0] fwd_tkeep;
wire          fwd_tvalid;
wire          fwd_tready;
wire          fwd_tlast;
wire [DW-1:0] host_tdata;
wire [KW-1:0] host_tkeep;
wire          host_tvalid;
wire          host_tready;
wire          host_tlast;
wire          host_tx_drop;
wire          host_rx_drop;

// Forwarded frames are at most 256 beats (16,383 bytes): 512 hold one while the next arrives.
/* verilator lint_off PINCONNECTEMPTY */
nlb_axis_frame_fifo #(
    .DATA_WIDTH(DW),
    .DEPTH(512)
) fwd_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(tx_tdata),
    .s_axis_tkeep(tx_tkeep),
    .s_axis_tvalid(tx_tvalid),
    .s_axis_tready(tx_tready),
    .s_axis_tlast(tx_tlast),
    .s_axis_tuser_err(1'b0),
    .m_axis_tdata(fwd_tdata),
    .m_axis_tkeep(fwd_tkeep),
    .m_axis_tvalid(fwd_tvalid),
    .m_axis_tready(fwd_tready),
    .m_axis_tlast(fwd_tlast),
    .m_drop(),
    .level()
);

// The shell's frames are at most its max_pkt_len (9,600 bytes: 150 beats).
nlb_axis_frame_fifo #(
    .DATA_WIDTH(DW),
    .DEPTH(256)
) host_tx_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_axis_adap_tx_322mhz_tdata[DW-1:0]),
    .s_axis_tkeep(s_axis_adap_tx_322mhz_tkeep[KW-1:0]),
    .s_axis_tvalid(s_axis_adap_tx_322mhz_tvalid[0]),
    .s_axis_tready(s_axis_adap_tx_322mhz_tready[0]),
    .s_axis_tlast(s_axis_adap_tx_322mhz_tlast[0]),
    .s_axis_tuser_err(s_axis_adap_tx_322mhz_tuser_err[0]),
    .m_axis_tdata(host_tdata),
    .m_axis_tkeep(host_tkeep),
    .m_axis_tvalid(host_tvalid),
    .m_axis_tready(host_tready),
    .m_axis_tlast(host_tlast),
    .m_drop(host_tx_drop),
    .level()
);
/* verilator lint_on PINCONNECTEMPTY */

// A frame, once started, has the MAC to itself until its last beat; between frames the source
// that did not go last goes first.
wire [DW-1:0] mac_tdata;
wire [KW-1:0] mac_tkeep;
wire          mac_tvalid;
wire          mac_tlast;
wire          mac_tready;

/* verilator lint_off PINCONNECTEMPTY */
nlb_axis_frame_arb #(
    .DATA_WIDTH(DW)
) mac_tx_arb_inst (
    .clk(clk),
    .rst(rst),
    .s0_axis_tdata(fwd_tdata),
    .s0_axis_tkeep(fwd_tkeep),
    .s0_axis_tvalid(fwd_tvalid),
    .s0_axis_tready(fwd_tready),
    .s0_axis_tlast(fwd_tlast),
    .s1_axis_tdata(host_tdata),
    .s1_axis_tkeep(host_tkeep),
    .s1_axis_tvalid(host_tvalid),
    .s1_axis_tready(host_tready),
    .s1_axis_tlast(host_tlast),
    .m_axis_tdata(mac_tdata),
    .m_axis_tkeep(mac_tkeep),
    .m_axis_tvalid(mac_tvalid),
    .m_axis_tready(mac_tready),
    .m_axis_tlast(mac_tlast),
    .m_axis_source()
);
/* verilator lint_on PINCONNECTEMPTY */

// A register slice toward the MAC (its tready can drop anywhere; tvalid does not, since both
// FIFOs hold whole frames and the arbiter changes source only between frames).
nlb_axis_skid #(
    .DATA_WIDTH(DW)
) mac_tx_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(mac_tdata),
    .s_axis_tkeep(mac_tkeep),
    .s_axis_tvalid(mac_tvalid),
    .s_axis_tready(mac_tready),
    .s_axis_tlast(mac_tlast),
    .s_axis_tuser(1'b0),
    .m_axis_tdata(m_axis_cmac_tx_tdata[DW-1:0]),
    .m_axis_tkeep(m_axis_cmac_tx_tkeep[KW-1:0]),
    .m_axis_tvalid(m_axis_cmac_tx_tvalid[0]),
    .m_axis_tready(m_axis_cmac_tx_tready[0]),
    .m_axis_tlast(m_axis_cmac_tx_tlast[0]),
    .m_axis_tuser(m_axis_cmac_tx_tuser_err[0])
);

// ---- toward the host's network stack: passed frames, and punted frames without their header ---

// The first beat of each punted frame is its punt header (docs/pipeline.md section 13).
reg punt_header_reg = 1'b1;
wire punt_body_ready;
assign punt_tready = punt_header_reg || punt_body_ready;

always @(posedge clk) begin
    if (punt_tvalid && punt_tready) begin
        punt_header_reg <= punt_tlast;
    end
    if (rst) begin
        punt_header_reg <= 1'b1;
    end
end

// The editor sends one frame at a time, so holding the FIFO's input for a frame until its last
// beat never waits on the other stream.
wire [DW-1:0] to_host_tdata;
wire [KW-1:0] to_host_tkeep;
wire          to_host_tvalid;
wire          to_host_tready;
wire          to_host_tlast;

/* verilator lint_off PINCONNECTEMPTY */
nlb_axis_frame_arb #(
    .DATA_WIDTH(DW)
) host_rx_arb_inst (
    .clk(clk),
    .rst(rst),
    .s0_axis_tdata(pass_tdata),
    .s0_axis_tkeep(pass_tkeep),
    .s0_axis_tvalid(pass_tvalid),
    .s0_axis_tready(pass_tready),
    .s0_axis_tlast(pass_tlast),
    .s1_axis_tdata(punt_tdata),
    .s1_axis_tkeep(punt_tkeep),
    .s1_axis_tvalid(punt_tvalid && !punt_header_reg),
    .s1_axis_tready(punt_body_ready),
    .s1_axis_tlast(punt_tlast),
    .m_axis_tdata(to_host_tdata),
    .m_axis_tkeep(to_host_tkeep),
    .m_axis_tvalid(to_host_tvalid),
    .m_axis_tready(to_host_tready),
    .m_axis_tlast(to_host_tlast),
    .m_axis_source()
);

nlb_axis_frame_fifo #(
    .DATA_WIDTH(DW),
    .DEPTH(512)
) host_rx_fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(to_host_tdata),
    .s_axis_tkeep(to_host_tkeep),
    .s_axis_tvalid(to_host_tvalid),
    .s_axis_tready(to_host_tready),
    .s_axis_tlast(to_host_tlast),
    .s_axis_tuser_err(1'b0),
    .m_axis_tdata(m_axis_adap_rx_322mhz_tdata[DW-1:0]),
    .m_axis_tkeep(m_axis_adap_rx_322mhz_tkeep[KW-1:0]),
    .m_axis_tvalid(m_axis_adap_rx_322mhz_tvalid[0]),
    .m_axis_tready(1'b1),
    .m_axis_tlast(m_axis_adap_rx_322mhz_tlast[0]),
    .m_drop(host_rx_drop),
    .level()
);
/* verilator lint_on PINCONNECTEMPTY */

assign m_axis_adap_rx_322mhz_tuser_err[0] = 1'b0;

// ---- counters -----------------------------------------------------------------------------

always @(posedge clk) begin
    if (s_axis_cmac_rx_tvalid[0] && s_axis_cmac_rx_tlast[0] && s_axis_cmac_rx_tuser_err[0]) begin
        rx_err_frames_reg <= rx_err_frames_reg + 1'b1;
    end
    if (host_tx_drop) begin
        host_tx_drops_reg <= host_tx_drops_reg + 1'b1;
    end
    if (host_rx_drop) begin
        host_rx_drops_reg <= host_rx_drops_reg + 1'b1;
    end
    if (event_tvalid) begin
        events_lost_reg <= events_lost_reg + 1'b1;
    end
    if (rst) begin
        rx_err_frames_reg <= 32'd0;
        host_tx_drops_reg <= 32'd0;
        host_rx_drops_reg <= 32'd0;
        events_lost_reg <= 32'd0;
    end
end

// ---- host DMA: the CMAC clock to the host clock -------------------------------------------

generate
if (HOST_BRIDGE != 0) begin : bridge
nlb_axi_cdc #(
    .ADDR_WIDTH(64),
    .DATA_WIDTH(DW)
) dma_cdc_inst (
    .s_clk(clk),
    .s_rst(rst),
    .s_axi_awaddr(dma_awaddr),
    .s_axi_awlen(dma_awlen),
    .s_axi_awsize(dma_awsize),
    .s_axi_awburst(dma_awburst),
    .s_axi_awvalid(dma_awvalid),
    .s_axi_awready(dma_awready),
    .s_axi_wdata(dma_wdata),
    .s_axi_wstrb(dma_wstrb),
    .s_axi_wlast(dma_wlast),
    .s_axi_wvalid(dma_wvalid),
    .s_axi_wready(dma_wready),
    .s_axi_bresp(dma_bresp),
    .s_axi_bvalid(dma_bvalid),
    .s_axi_bready(dma_bready),
    .s_axi_araddr(dma_araddr),
    .s_axi_arlen(dma_arlen),
    .s_axi_arsize(dma_arsize),
    .s_axi_arburst(dma_arburst),
    .s_axi_arvalid(dma_arvalid),
    .s_axi_arready(dma_arready),
    .s_axi_rdata(dma_rdata),
    .s_axi_rresp(dma_rresp),
    .s_axi_rlast(dma_rlast),
    .s_axi_rvalid(dma_rvalid),
    .s_axi_rready(dma_rready),
    .m_clk(axis_aclk),
    .m_rst(rst_axis),
    .m_axi_awaddr(m_axi_host_awaddr),
    .m_axi_awlen(m_axi_host_awlen),
    .m_axi_awsize(m_axi_host_awsize),
    .m_axi_awburst(m_axi_host_awburst),
    .m_axi_awvalid(m_axi_host_awvalid),
    .m_axi_awready(m_axi_host_awready),
    .m_axi_wdata(m_axi_host_wdata),
    .m_axi_wstrb(m_axi_host_wstrb),
    .m_axi_wlast(m_axi_host_wlast),
    .m_axi_wvalid(m_axi_host_wvalid),
    .m_axi_wready(m_axi_host_wready),
    .m_axi_bresp(m_axi_host_bresp),
    .m_axi_bvalid(m_axi_host_bvalid),
    .m_axi_bready(m_axi_host_bready),
    .m_axi_araddr(m_axi_host_araddr),
    .m_axi_arlen(m_axi_host_arlen),
    .m_axi_arsize(m_axi_host_arsize),
    .m_axi_arburst(m_axi_host_arburst),
    .m_axi_arvalid(m_axi_host_arvalid),
    .m_axi_arready(m_axi_host_arready),
    .m_axi_rdata(m_axi_host_rdata),
    .m_axi_rresp(m_axi_host_rresp),
    .m_axi_rlast(m_axi_host_rlast),
    .m_axi_rvalid(m_axi_host_rvalid),
    .m_axi_rready(m_axi_host_rready)
);

// MSI-X requests: one pulse per request in the CMAC domain, merged per ring while the crossing
// is busy, then one vector at a time on the host clock.
reg [NLB_RING_COUNT-1:0] irq_pending_reg = {NLB_RING_COUNT{1'b0}};
wire irq_s_ready;
wire [NLB_RING_COUNT-1:0] irq_m_bits;
wire irq_m_valid;
wire irq_m_ready;
wire irq_send = irq_pending_reg != {NLB_RING_COUNT{1'b0}} && irq_s_ready;

always @(posedge clk) begin
    irq_pending_reg <= (irq_send ? {NLB_RING_COUNT{1'b0}} : irq_pending_reg) | dma_irq;
    if (rst) begin
        irq_pending_reg <= {NLB_RING_COUNT{1'b0}};
    end
end

/* verilator lint_off PINCONNECTEMPTY */
nlb_async_fifo #(
    .WIDTH(NLB_RING_COUNT),
    .DEPTH(4)
) irq_fifo_inst (
    .s_clk(clk),
    .s_rst(rst),
    .s_data(irq_pending_reg),
    .s_valid(irq_send),
    .s_ready(irq_s_ready),
    .s_level(),
    .m_clk(axis_aclk),
    .m_rst(rst_axis),
    .m_data(irq_m_bits),
    .m_valid(irq_m_valid),
    .m_ready(irq_m_ready),
    .m_level()
);
/* verilator lint_on PINCONNECTEMPTY */

// On the host clock: the word's rings are requested one at a time, lowest first.
reg [NLB_RING_COUNT-1:0] irq_left_reg = {NLB_RING_COUNT{1'b0}};
wire [NLB_RING_COUNT-1:0] irq_now = irq_left_reg != {NLB_RING_COUNT{1'b0}} ? irq_left_reg
    : (irq_m_valid ? irq_m_bits : {NLB_RING_COUNT{1'b0}});
// The lowest ring set in irq_now, and irq_now without it.
wire [NLB_RING_COUNT-1:0] irq_lowest = irq_now & (~irq_now + 1'b1);
reg [1:0] irq_vector;
integer iv;
always @(*) begin
    irq_vector = 2'd0;
    for (iv = NLB_RING_COUNT - 1; iv >= 0; iv = iv - 1) begin
        if (irq_lowest[iv]) begin
            irq_vector = iv[1:0];
        end
    end
end

assign irq_m_ready = irq_left_reg == {NLB_RING_COUNT{1'b0}};
assign m_host_irq_valid = irq_now != {NLB_RING_COUNT{1'b0}};
assign m_host_irq_vector = irq_vector;

always @(posedge axis_aclk) begin
    if (irq_left_reg == {NLB_RING_COUNT{1'b0}} && irq_m_valid) begin
        irq_left_reg <= irq_m_bits;
    end
    if (m_host_irq_valid && m_host_irq_ready) begin
        irq_left_reg <= irq_now & ~irq_lowest;
    end
    if (rst_axis) begin
        irq_left_reg <= {NLB_RING_COUNT{1'b0}};
    end
end

end else begin : no_bridge
    nlb_axi_err_slave #(
        .DATA_WIDTH(DW)
    ) dma_err_inst (
        .clk(clk),
        .rst(rst),
        .s_axi_awvalid(dma_awvalid),
        .s_axi_awready(dma_awready),
        .s_axi_wvalid(dma_wvalid),
        .s_axi_wready(dma_wready),
        .s_axi_wlast(dma_wlast),
        .s_axi_bresp(dma_bresp),
        .s_axi_bvalid(dma_bvalid),
        .s_axi_bready(dma_bready),
        .s_axi_arlen(dma_arlen),
        .s_axi_arvalid(dma_arvalid),
        .s_axi_arready(dma_arready),
        .s_axi_rdata(dma_rdata),
        .s_axi_rresp(dma_rresp),
        .s_axi_rlast(dma_rlast),
        .s_axi_rvalid(dma_rvalid),
        .s_axi_rready(dma_rready)
    );
    assign m_axi_host_awaddr = 64'd0;
    assign m_axi_host_awlen = 8'd0;
    assign m_axi_host_awsize = 3'd0;
    assign m_axi_host_awburst = 2'd0;
    assign m_axi_host_awvalid = 1'b0;
    assign m_axi_host_wdata = {DW{1'b0}};
    assign m_axi_host_wstrb = {KW{1'b0}};
    assign m_axi_host_wlast = 1'b0;
    assign m_axi_host_wvalid = 1'b0;
    assign m_axi_host_bready = 1'b0;
    assign m_axi_host_araddr = 64'd0;
    assign m_axi_host_arlen = 8'd0;
    assign m_axi_host_arsize = 3'd0;
    assign m_axi_host_arburst = 2'd0;
    assign m_axi_host_arvalid = 1'b0;
    assign m_axi_host_rready = 1'b0;
    assign m_host_irq_valid = 1'b0;
    assign m_host_irq_vector = 2'd0;
    // What the refused DMA leaves unread: the host port's inputs, the addresses and data.
    /* verilator lint_off UNUSEDSIGNAL */
    wire unused = ^{m_axi_host_awready, m_axi_host_wready, m_axi_host_bresp, m_axi_host_bvalid,
        m_axi_host_arready, m_axi_host_rdata, m_axi_host_rresp, m_axi_host_rlast,
        m_axi_host_rvalid, m_host_irq_ready, rst_axis, dma_irq, dma_awaddr, dma_awlen,
        dma_awsize, dma_awburst, dma_wdata, dma_wstrb, dma_araddr, dma_arsize, dma_arburst};
    /* verilator lint_on UNUSEDSIGNAL */
end
endgenerate

endmodule

`resetall
