// nlb-offload's plugin for AMD's OpenNIC shell (docs/boards.md): included by the shell's
// src/box_250mhz/box_250mhz.sv, inside that module, after box_250mhz_address_map_inst.vh, so
// the names below are the box's ports and wires. The shell must be built with
// -use_phys_func 1 (its default): with 0 the box drives the QDMA streams itself.

localparam C_NUM_USER_BLOCK = 1;

// Reset pairs of the box not used by a module are done at once.
assign mod_rst_done[15:C_NUM_USER_BLOCK] = {(16-C_NUM_USER_BLOCK){1'b1}};

nlb_plugin_250mhz #(
    .NUM_PHYS_FUNC(NUM_PHYS_FUNC),
    .NUM_CMAC_PORT(NUM_CMAC_PORT)
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

    .m_axis_adap_tx_250mhz_tvalid(m_axis_adap_tx_250mhz_tvalid),
    .m_axis_adap_tx_250mhz_tdata(m_axis_adap_tx_250mhz_tdata),
    .m_axis_adap_tx_250mhz_tkeep(m_axis_adap_tx_250mhz_tkeep),
    .m_axis_adap_tx_250mhz_tlast(m_axis_adap_tx_250mhz_tlast),
    .m_axis_adap_tx_250mhz_tuser_size(m_axis_adap_tx_250mhz_tuser_size),
    .m_axis_adap_tx_250mhz_tuser_src(m_axis_adap_tx_250mhz_tuser_src),
    .m_axis_adap_tx_250mhz_tuser_dst(m_axis_adap_tx_250mhz_tuser_dst),
    .m_axis_adap_tx_250mhz_tready(m_axis_adap_tx_250mhz_tready),

    .s_axis_adap_rx_250mhz_tvalid(s_axis_adap_rx_250mhz_tvalid),
    .s_axis_adap_rx_250mhz_tdata(s_axis_adap_rx_250mhz_tdata),
    .s_axis_adap_rx_250mhz_tkeep(s_axis_adap_rx_250mhz_tkeep),
    .s_axis_adap_rx_250mhz_tlast(s_axis_adap_rx_250mhz_tlast),
    .s_axis_adap_rx_250mhz_tuser_size(s_axis_adap_rx_250mhz_tuser_size),
    .s_axis_adap_rx_250mhz_tuser_src(s_axis_adap_rx_250mhz_tuser_src),
    .s_axis_adap_rx_250mhz_tuser_dst(s_axis_adap_rx_250mhz_tuser_dst),
    .s_axis_adap_rx_250mhz_tready(s_axis_adap_rx_250mhz_tready),

    .mod_rstn(mod_rstn[0]),
    .mod_rst_done(mod_rst_done[0]),

    .axil_aclk(axil_aclk),
    .axis_aclk(axis_aclk)
);
