`resetall
`timescale 1ns / 1ps
`default_nettype none

// AMD's OpenNIC shell around nlb-offload's plugin, for Verilator (verif/tests/rtl/board.rs;
// docs/boards.md): what the plugin sees of the shell, written from the shell's interface, not
// its code.
//   - nlb_sim_box_322mhz and nlb_sim_box_250mhz stand for the shell's box_322mhz and
//     box_250mhz: the same ports (with the host DMA ports of the changed shell), and inside them
//     the plugin's own include files, exactly as the shell's build includes them;
//   - BAR 2 (s_axil_*, on the register clock): the shell's system crossbar gives the 250 MHz
//     box 0x100000-0x1FFFFF and the 322 MHz box 0x200000-0x2FFFFF, each box seeing offsets from
//     its base; other addresses answer DECERR (the shell's own blocks are not modelled);
//   - the shell's packet adapters between the boxes: host frames from the 250 MHz box's
//     transmit side cross to the 322 MHz box (with tready), frames for the host cross from
//     the 322 MHz box's receive side (no tready) to the 250 MHz box; a beat that finds the
//     crossing full is lost and sets adap_rx_overflow (the shell's adapter drops there too).
// The MAC (s_axis_cmac_rx without tready, m_axis_cmac_tx), the QDMA streams and the host DMA
// port are the bench's.
// The shell here is the changed one that carries the host DMA port (NLB_QDMA_BRIDGE, defined
// by nlb_sim_box_322mhz.v).

module nlb_opennic_sim (
    input  wire          axil_aclk,
    input  wire          axis_aclk,
    input  wire          cmac_clk,

    // The shell's reset of the user modules (axil_aclk), and their answer.
    input  wire          mod_rstn,
    output wire          mod_rst_done,

    // BAR 2 of the card (byte offsets).
    input  wire          s_axil_awvalid,
    input  wire [31:0]   s_axil_awaddr,
    output wire          s_axil_awready,
    input  wire          s_axil_wvalid,
    input  wire [31:0]   s_axil_wdata,
    output wire          s_axil_wready,
    output wire          s_axil_bvalid,
    output wire [1:0]    s_axil_bresp,
    input  wire          s_axil_bready,
    input  wire          s_axil_arvalid,
    input  wire [31:0]   s_axil_araddr,
    output wire          s_axil_arready,
    output wire          s_axil_rvalid,
    output wire [31:0]   s_axil_rdata,
    output wire [1:0]    s_axil_rresp,
    input  wire          s_axil_rready,

    // The 100G MAC (cmac_clk).
    input  wire          s_axis_cmac_rx_tvalid,
    input  wire [511:0]  s_axis_cmac_rx_tdata,
    input  wire [63:0]   s_axis_cmac_rx_tkeep,
    input  wire          s_axis_cmac_rx_tlast,
    input  wire          s_axis_cmac_rx_tuser_err,
    output wire          m_axis_cmac_tx_tvalid,
    output wire [511:0]  m_axis_cmac_tx_tdata,
    output wire [63:0]   m_axis_cmac_tx_tkeep,
    output wire          m_axis_cmac_tx_tlast,
    output wire          m_axis_cmac_tx_tuser_err,
    input  wire          m_axis_cmac_tx_tready,

    // The QDMA's streams (axis_aclk).
    input  wire          s_axis_qdma_h2c_tvalid,
    input  wire [511:0]  s_axis_qdma_h2c_tdata,
    input  wire [63:0]   s_axis_qdma_h2c_tkeep,
    input  wire          s_axis_qdma_h2c_tlast,
    input  wire [15:0]   s_axis_qdma_h2c_tuser_size,
    input  wire [15:0]   s_axis_qdma_h2c_tuser_src,
    input  wire [15:0]   s_axis_qdma_h2c_tuser_dst,
    output wire          s_axis_qdma_h2c_tready,
    output wire          m_axis_qdma_c2h_tvalid,
    output wire [511:0]  m_axis_qdma_c2h_tdata,
    output wire [63:0]   m_axis_qdma_c2h_tkeep,
    output wire          m_axis_qdma_c2h_tlast,
    output wire [15:0]   m_axis_qdma_c2h_tuser_size,
    output wire [15:0]   m_axis_qdma_c2h_tuser_src,
    output wire [15:0]   m_axis_qdma_c2h_tuser_dst,
    input  wire          m_axis_qdma_c2h_tready,

    // The QDMA's AXI-MM bridge slave (axis_aclk) and its MSI-X requests.
    output wire [63:0]   m_axi_host_awaddr,
    output wire [7:0]    m_axi_host_awlen,
    output wire [2:0]    m_axi_host_awsize,
    output wire [1:0]    m_axi_host_awburst,
    output wire          m_axi_host_awvalid,
    input  wire          m_axi_host_awready,
    output wire [511:0]  m_axi_host_wdata,
    output wire [63:0]   m_axi_host_wstrb,
    output wire          m_axi_host_wlast,
    output wire          m_axi_host_wvalid,
    input  wire          m_axi_host_wready,
    input  wire [1:0]    m_axi_host_bresp,
    input  wire          m_axi_host_bvalid,
    output wire          m_axi_host_bready,
    output wire [63:0]   m_axi_host_araddr,
    output wire [7:0]    m_axi_host_arlen,
    output wire [2:0]    m_axi_host_arsize,
    output wire [1:0]    m_axi_host_arburst,
    output wire          m_axi_host_arvalid,
    input  wire          m_axi_host_arready,
    input  wire [511:0]  m_axi_host_rdata,
    input  wire [1:0]    m_axi_host_rresp,
    input  wire          m_axi_host_rlast,
    input  wire          m_axi_host_rvalid,
    output wire          m_axi_host_rready,
    output wire          m_host_irq_valid,
    output wire [1:0]    m_host_irq_vector,
    input  wire          m_host_irq_ready,
    // A frame beat toward the host was lost in the receive adapter (sticky).
    output wire          adap_rx_overflow
);

// ---- BAR 2: the shell's system crossbar ----------------------------------------------------

localparam [1:0] DECERR = 2'b11;

// The crossbar as the bench uses it: one access at a time (nlb_verif::axil::AxiLiteMaster).
// A write goes where its address points once both address and data are there.
wire [3:0] aw_box = s_axil_awaddr[23:20];
wire [3:0] ar_box = s_axil_araddr[23:20];
wire aw_250 = s_axil_awaddr[31:24] == 8'd0 && aw_box == 4'd1;
wire aw_322 = s_axil_awaddr[31:24] == 8'd0 && aw_box == 4'd2;
wire ar_250 = s_axil_araddr[31:24] == 8'd0 && ar_box == 4'd1;
wire ar_322 = s_axil_araddr[31:24] == 8'd0 && ar_box == 4'd2;
wire w_both = s_axil_awvalid && s_axil_wvalid;

wire        b250_awready, b250_wready, b250_bvalid, b250_arready, b250_rvalid;
wire [1:0]  b250_bresp, b250_rresp;
wire [31:0] b250_rdata;
wire        b322_awready, b322_wready, b322_bvalid, b322_arready, b322_rvalid;
wire [1:0]  b322_bresp, b322_rresp;
wire [31:0] b322_rdata;

reg bad_bvalid_reg = 1'b0;
reg bad_rvalid_reg = 1'b0;
wire bad_write = w_both && !aw_250 && !aw_322 && !bad_bvalid_reg;
wire bad_read = s_axil_arvalid && !ar_250 && !ar_322 && !bad_rvalid_reg;

always @(posedge axil_aclk) begin
    if (bad_write) begin
        bad_bvalid_reg <= 1'b1;
    end else if (s_axil_bready) begin
        bad_bvalid_reg <= 1'b0;
    end
    if (bad_read) begin
        bad_rvalid_reg <= 1'b1;
    end else if (s_axil_rready) begin
        bad_rvalid_reg <= 1'b0;
    end
end

assign s_axil_awready = aw_250 ? b250_awready && w_both : aw_322 ? b322_awready && w_both : bad_write;
assign s_axil_wready = aw_250 ? b250_wready && w_both : aw_322 ? b322_wready && w_both : bad_write;
assign s_axil_bvalid = b250_bvalid || b322_bvalid || bad_bvalid_reg;
assign s_axil_bresp = b250_bvalid ? b250_bresp : b322_bvalid ? b322_bresp : DECERR;
assign s_axil_arready = ar_250 ? b250_arready : ar_322 ? b322_arready : bad_read;
assign s_axil_rvalid = b250_rvalid || b322_rvalid || bad_rvalid_reg;
assign s_axil_rresp = b250_rvalid ? b250_rresp : b322_rvalid ? b322_rresp : DECERR;
assign s_axil_rdata = b250_rvalid ? b250_rdata : b322_rvalid ? b322_rdata : 32'd0;

// ---- the shell's packet adapters ---------------------------------------------------------

wire          tx250_tvalid, tx250_tlast, tx250_tready;
wire [511:0]  tx250_tdata;
wire [63:0]   tx250_tkeep;
wire          tx322_tvalid, tx322_tlast, tx322_tready;
wire [511:0]  tx322_tdata;
wire [63:0]   tx322_tkeep;
wire          rx322_tvalid, rx322_tlast;
wire [511:0]  rx322_tdata;
wire [63:0]   rx322_tkeep;
wire          rx250_tvalid, rx250_tlast, rx250_tready;
wire [511:0]  rx250_tdata;
wire [63:0]   rx250_tkeep;
wire          rx_room;
wire          rst_done_322, rst_done_250;
reg           overflow_reg = 1'b0;

// Each adapter side is reset with the box it serves (the boxes' own resets are internal).
/* verilator lint_off PINCONNECTEMPTY */
nlb_async_fifo #(
    .WIDTH(512 + 64 + 1),
    .DEPTH(64)
) tx_adapter_inst (
    .s_clk(axis_aclk),
    .s_rst(!rst_done_250),
    .s_data({tx250_tlast, tx250_tkeep, tx250_tdata}),
    .s_valid(tx250_tvalid),
    .s_ready(tx250_tready),
    .s_level(),
    .m_clk(cmac_clk),
    .m_rst(!rst_done_322),
    .m_data({tx322_tlast, tx322_tkeep, tx322_tdata}),
    .m_valid(tx322_tvalid),
    .m_ready(tx322_tready),
    .m_level()
);

nlb_async_fifo #(
    .WIDTH(512 + 64 + 1),
    .DEPTH(512)
) rx_adapter_inst (
    .s_clk(cmac_clk),
    .s_rst(!rst_done_322),
    .s_data({rx322_tlast, rx322_tkeep, rx322_tdata}),
    .s_valid(rx322_tvalid),
    .s_ready(rx_room),
    .s_level(),
    .m_clk(axis_aclk),
    .m_rst(!rst_done_250),
    .m_data({rx250_tlast, rx250_tkeep, rx250_tdata}),
    .m_valid(rx250_tvalid),
    .m_ready(rx250_tready),
    .m_level()
);
/* verilator lint_on PINCONNECTEMPTY */

always @(posedge cmac_clk) begin
    if (rx322_tvalid && !rx_room && rst_done_322) begin
        overflow_reg <= 1'b1;
    end
end

assign adap_rx_overflow = overflow_reg;

// ---- the boxes ------------------------------------------------------------------------------

/* verilator lint_off PINCONNECTEMPTY */
wire [7:0]  done_322;
wire [15:0] done_250;
wire        rx322_err;
wire [15:0] tx250_size, tx250_src, tx250_dst;

nlb_sim_box_322mhz box_322mhz_inst (
    .s_axil_awvalid(s_axil_awvalid && aw_322 && w_both),
    .s_axil_awaddr(s_axil_awaddr - 32'h0020_0000),
    .s_axil_awready(b322_awready),
    .s_axil_wvalid(s_axil_wvalid && aw_322 && w_both),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wready(b322_wready),
    .s_axil_bvalid(b322_bvalid),
    .s_axil_bresp(b322_bresp),
    .s_axil_bready(s_axil_bready),
    .s_axil_arvalid(s_axil_arvalid && ar_322),
    .s_axil_araddr(s_axil_araddr - 32'h0020_0000),
    .s_axil_arready(b322_arready),
    .s_axil_rvalid(b322_rvalid),
    .s_axil_rdata(b322_rdata),
    .s_axil_rresp(b322_rresp),
    .s_axil_rready(s_axil_rready),
    .s_axis_adap_tx_322mhz_tvalid(tx322_tvalid),
    .s_axis_adap_tx_322mhz_tdata(tx322_tdata),
    .s_axis_adap_tx_322mhz_tkeep(tx322_tkeep),
    .s_axis_adap_tx_322mhz_tlast(tx322_tlast),
    .s_axis_adap_tx_322mhz_tuser_err(1'b0),
    .s_axis_adap_tx_322mhz_tready(tx322_tready),
    .m_axis_adap_rx_322mhz_tvalid(rx322_tvalid),
    .m_axis_adap_rx_322mhz_tdata(rx322_tdata),
    .m_axis_adap_rx_322mhz_tkeep(rx322_tkeep),
    .m_axis_adap_rx_322mhz_tlast(rx322_tlast),
    .m_axis_adap_rx_322mhz_tuser_err(rx322_err),
    .m_axis_cmac_tx_tvalid(m_axis_cmac_tx_tvalid),
    .m_axis_cmac_tx_tdata(m_axis_cmac_tx_tdata),
    .m_axis_cmac_tx_tkeep(m_axis_cmac_tx_tkeep),
    .m_axis_cmac_tx_tlast(m_axis_cmac_tx_tlast),
    .m_axis_cmac_tx_tuser_err(m_axis_cmac_tx_tuser_err),
    .m_axis_cmac_tx_tready(m_axis_cmac_tx_tready),
    .s_axis_cmac_rx_tvalid(s_axis_cmac_rx_tvalid),
    .s_axis_cmac_rx_tdata(s_axis_cmac_rx_tdata),
    .s_axis_cmac_rx_tkeep(s_axis_cmac_rx_tkeep),
    .s_axis_cmac_rx_tlast(s_axis_cmac_rx_tlast),
    .s_axis_cmac_rx_tuser_err(s_axis_cmac_rx_tuser_err),
    .m_axi_host_awaddr(m_axi_host_awaddr),
    .m_axi_host_awlen(m_axi_host_awlen),
    .m_axi_host_awsize(m_axi_host_awsize),
    .m_axi_host_awburst(m_axi_host_awburst),
    .m_axi_host_awvalid(m_axi_host_awvalid),
    .m_axi_host_awready(m_axi_host_awready),
    .m_axi_host_wdata(m_axi_host_wdata),
    .m_axi_host_wstrb(m_axi_host_wstrb),
    .m_axi_host_wlast(m_axi_host_wlast),
    .m_axi_host_wvalid(m_axi_host_wvalid),
    .m_axi_host_wready(m_axi_host_wready),
    .m_axi_host_bresp(m_axi_host_bresp),
    .m_axi_host_bvalid(m_axi_host_bvalid),
    .m_axi_host_bready(m_axi_host_bready),
    .m_axi_host_araddr(m_axi_host_araddr),
    .m_axi_host_arlen(m_axi_host_arlen),
    .m_axi_host_arsize(m_axi_host_arsize),
    .m_axi_host_arburst(m_axi_host_arburst),
    .m_axi_host_arvalid(m_axi_host_arvalid),
    .m_axi_host_arready(m_axi_host_arready),
    .m_axi_host_rdata(m_axi_host_rdata),
    .m_axi_host_rresp(m_axi_host_rresp),
    .m_axi_host_rlast(m_axi_host_rlast),
    .m_axi_host_rvalid(m_axi_host_rvalid),
    .m_axi_host_rready(m_axi_host_rready),
    .m_host_irq_valid(m_host_irq_valid),
    .m_host_irq_vector(m_host_irq_vector),
    .m_host_irq_ready(m_host_irq_ready),
    .mod_rstn({7'h7F, mod_rstn}),
    .mod_rst_done(done_322),
    .axil_aclk(axil_aclk),
    .axis_aclk(axis_aclk),
    .cmac_clk(cmac_clk)
);

nlb_sim_box_250mhz box_250mhz_inst (
    .s_axil_awvalid(s_axil_awvalid && aw_250 && w_both),
    .s_axil_awaddr(s_axil_awaddr - 32'h0010_0000),
    .s_axil_awready(b250_awready),
    .s_axil_wvalid(s_axil_wvalid && aw_250 && w_both),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wready(b250_wready),
    .s_axil_bvalid(b250_bvalid),
    .s_axil_bresp(b250_bresp),
    .s_axil_bready(s_axil_bready),
    .s_axil_arvalid(s_axil_arvalid && ar_250),
    .s_axil_araddr(s_axil_araddr - 32'h0010_0000),
    .s_axil_arready(b250_arready),
    .s_axil_rvalid(b250_rvalid),
    .s_axil_rdata(b250_rdata),
    .s_axil_rresp(b250_rresp),
    .s_axil_rready(s_axil_rready),
    .s_axis_qdma_h2c_tvalid(s_axis_qdma_h2c_tvalid),
    .s_axis_qdma_h2c_tdata(s_axis_qdma_h2c_tdata),
    .s_axis_qdma_h2c_tkeep(s_axis_qdma_h2c_tkeep),
    .s_axis_qdma_h2c_tlast(s_axis_qdma_h2c_tlast),
    .s_axis_qdma_h2c_tuser_size(s_axis_qdma_h2c_tuser_size),
    .s_axis_qdma_h2c_tuser_src(s_axis_qdma_h2c_tuser_src),
    .s_axis_qdma_h2c_tuser_dst(s_axis_qdma_h2c_tuser_dst),
    .s_axis_qdma_h2c_tready(s_axis_qdma_h2c_tready),
    .m_axis_qdma_c2h_tvalid(m_axis_qdma_c2h_tvalid),
    .m_axis_qdma_c2h_tdata(m_axis_qdma_c2h_tdata),
    .m_axis_qdma_c2h_tkeep(m_axis_qdma_c2h_tkeep),
    .m_axis_qdma_c2h_tlast(m_axis_qdma_c2h_tlast),
    .m_axis_qdma_c2h_tuser_size(m_axis_qdma_c2h_tuser_size),
    .m_axis_qdma_c2h_tuser_src(m_axis_qdma_c2h_tuser_src),
    .m_axis_qdma_c2h_tuser_dst(m_axis_qdma_c2h_tuser_dst),
    .m_axis_qdma_c2h_tready(m_axis_qdma_c2h_tready),
    .m_axis_adap_tx_250mhz_tvalid(tx250_tvalid),
    .m_axis_adap_tx_250mhz_tdata(tx250_tdata),
    .m_axis_adap_tx_250mhz_tkeep(tx250_tkeep),
    .m_axis_adap_tx_250mhz_tlast(tx250_tlast),
    .m_axis_adap_tx_250mhz_tuser_size(tx250_size),
    .m_axis_adap_tx_250mhz_tuser_src(tx250_src),
    .m_axis_adap_tx_250mhz_tuser_dst(tx250_dst),
    .m_axis_adap_tx_250mhz_tready(tx250_tready),
    .s_axis_adap_rx_250mhz_tvalid(rx250_tvalid),
    .s_axis_adap_rx_250mhz_tdata(rx250_tdata),
    .s_axis_adap_rx_250mhz_tkeep(rx250_tkeep),
    .s_axis_adap_rx_250mhz_tlast(rx250_tlast),
    .s_axis_adap_rx_250mhz_tuser_size(16'd0),
    .s_axis_adap_rx_250mhz_tuser_src(16'h0040),
    .s_axis_adap_rx_250mhz_tuser_dst(16'h0001),
    .s_axis_adap_rx_250mhz_tready(rx250_tready),
    .mod_rstn({15'h7FFF, mod_rstn}),
    .mod_rst_done(done_250),
    .axil_aclk(axil_aclk),
    .axis_aclk(axis_aclk)
);
/* verilator lint_on PINCONNECTEMPTY */

assign rst_done_322 = done_322[0];
assign rst_done_250 = done_250[0];
assign mod_rst_done = &done_322 && &done_250;

// What the bench does not look at: the adapter's error flag toward the host (always 0 from
// the plugin) and the tuser words of host frames toward the MAC (their destination is checked
// by the plugin's own assignments).
/* verilator lint_off UNUSEDSIGNAL */
wire unused = ^{rx322_err, tx250_size, tx250_src, tx250_dst};
/* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
