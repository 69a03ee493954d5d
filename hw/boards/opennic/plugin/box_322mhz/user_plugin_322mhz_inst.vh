// nlb-offload's plugin for AMD's OpenNIC shell (docs/boards.md): included by the shell's
// src/box_322mhz/box_322mhz.sv, inside that module, after box_322mhz_address_map_inst.vh, so
// the names below are the box's ports and wires.
//
// Defines the build may set (hw/boards/opennic/build.sh):
//   NLB_QDMA_BRIDGE  the shell was changed to carry the host DMA port (docs/boards.md): the box
//                    has the ports axis_aclk, m_axi_host_* and m_host_irq_*;
//   NLB_STARTUPE3    the plugin owns the STARTUPE3 primitive and so the configuration flash.
`include "nlb_build_params.vh"

localparam C_NUM_USER_BLOCK = 1;

// Reset pairs of the box not used by a module are done at once.
assign mod_rst_done[7:C_NUM_USER_BLOCK] = {(8-C_NUM_USER_BLOCK){1'b1}};

wire nlb_spi_sck;
wire nlb_spi_cs_n;
wire nlb_spi_mosi;
wire nlb_spi_miso;

`ifdef NLB_STARTUPE3
nlb_flash_startupe3 nlb_flash_inst (
    .spi_sck(nlb_spi_sck),
    .spi_cs_n(nlb_spi_cs_n),
    .spi_mosi(nlb_spi_mosi),
    .spi_miso(nlb_spi_miso)
);
`else
// No flash: reads see an idle bus (all ones), and `nlbctl flash` reports the flash missing.
assign nlb_spi_miso = 1'b1;
/* verilator lint_off UNUSEDSIGNAL */
wire nlb_spi_unused = ^{nlb_spi_sck, nlb_spi_cs_n, nlb_spi_mosi};
/* verilator lint_on UNUSEDSIGNAL */
`endif


nlb_plugin_322mhz #(
    .NUM_CMAC_PORT(NUM_CMAC_PORT),
`ifdef NLB_QDMA_BRIDGE
    .HOST_BRIDGE(1),
`else
    .HOST_BRIDGE(0),
`endif
    .BUILD_ID(NLB_BUILD_ID),
    .GIT_HASH(NLB_GIT_HASH),
    .BOARD_ID(NLB_BOARD_ID),
    .PART_ID(NLB_PART_ID)
) nlb_plugin_inst (
    .s_axil_awvalid(axil_nlb_awvalid),
    .s_axil_awaddr(axil_nlb_awaddr),
    .s_axil_awready(axil_nlb_awready),
    .s_axil_wvalid(axil_nlb_wvalid),
    .s_axil_wdata(axil_nlb_wdata),
    .s_axil_wready(axil_nlb_wready),
    .s_axil_bvalid(axil_nlb_bvalid),
    .s_axil_bresp(axil_nlb_bresp),
    .s_axil_bready(axil_nlb_bready),
    .s_axil_arvalid(axil_nlb_arvalid),
    .s_axil_araddr(axil_nlb_araddr),
    .s_axil_arready(axil_nlb_arready),
    .s_axil_rvalid(axil_nlb_rvalid),
    .s_axil_rdata(axil_nlb_rdata),
    .s_axil_rresp(axil_nlb_rresp),
    .s_axil_rready(axil_nlb_rready),

    .s_axis_adap_tx_322mhz_tvalid(s_axis_adap_tx_322mhz_tvalid),
    .s_axis_adap_tx_322mhz_tdata(s_axis_adap_tx_322mhz_tdata),
    .s_axis_adap_tx_322mhz_tkeep(s_axis_adap_tx_322mhz_tkeep),
    .s_axis_adap_tx_322mhz_tlast(s_axis_adap_tx_322mhz_tlast),
    .s_axis_adap_tx_322mhz_tuser_err(s_axis_adap_tx_322mhz_tuser_err),
    .s_axis_adap_tx_322mhz_tready(s_axis_adap_tx_322mhz_tready),

    .m_axis_adap_rx_322mhz_tvalid(m_axis_adap_rx_322mhz_tvalid),
    .m_axis_adap_rx_322mhz_tdata(m_axis_adap_rx_322mhz_tdata),
    .m_axis_adap_rx_322mhz_tkeep(m_axis_adap_rx_322mhz_tkeep),
    .m_axis_adap_rx_322mhz_tlast(m_axis_adap_rx_322mhz_tlast),
    .m_axis_adap_rx_322mhz_tuser_err(m_axis_adap_rx_322mhz_tuser_err),

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

`ifdef NLB_QDMA_BRIDGE
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
    .axis_aclk(axis_aclk),
`else
    .m_axi_host_awaddr(),
    .m_axi_host_awlen(),
    .m_axi_host_awsize(),
    .m_axi_host_awburst(),
    .m_axi_host_awvalid(),
    .m_axi_host_awready(1'b0),
    .m_axi_host_wdata(),
    .m_axi_host_wstrb(),
    .m_axi_host_wlast(),
    .m_axi_host_wvalid(),
    .m_axi_host_wready(1'b0),
    .m_axi_host_bresp(2'd0),
    .m_axi_host_bvalid(1'b0),
    .m_axi_host_bready(),
    .m_axi_host_araddr(),
    .m_axi_host_arlen(),
    .m_axi_host_arsize(),
    .m_axi_host_arburst(),
    .m_axi_host_arvalid(),
    .m_axi_host_arready(1'b0),
    .m_axi_host_rdata(512'd0),
    .m_axi_host_rresp(2'd0),
    .m_axi_host_rlast(1'b0),
    .m_axi_host_rvalid(1'b0),
    .m_axi_host_rready(),
    .m_host_irq_valid(),
    .m_host_irq_vector(),
    .m_host_irq_ready(1'b0),
    .axis_aclk(axil_aclk),
`endif

    .spi_sck(nlb_spi_sck),
    .spi_cs_n(nlb_spi_cs_n),
    .spi_mosi(nlb_spi_mosi),
    .spi_miso(nlb_spi_miso),

    .mod_rstn(mod_rstn[0]),
    .mod_rst_done(mod_rst_done[0]),

    .axil_aclk(axil_aclk),
    .cmac_clk(cmac_clk)
);
