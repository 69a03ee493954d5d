`resetall
`timescale 1ns / 1ps
`default_nettype none

`define NLB_QDMA_BRIDGE

// The shell's 322 MHz box as the plugin sees it, for nlb_opennic_sim: its parameters, ports
// and the two includes, with the ports a shell changed for the host DMA path adds (NLB_QDMA_BRIDGE). The shell's own
// reset generator for the box is left out (box_rstn/box_rst_done are the shell's business).
module nlb_sim_box_322mhz #(
    parameter NUM_CMAC_PORT = 1
) (
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

    input  wire          s_axis_adap_tx_322mhz_tvalid,
    input  wire [511:0]  s_axis_adap_tx_322mhz_tdata,
    input  wire [63:0]   s_axis_adap_tx_322mhz_tkeep,
    input  wire          s_axis_adap_tx_322mhz_tlast,
    input  wire          s_axis_adap_tx_322mhz_tuser_err,
    output wire          s_axis_adap_tx_322mhz_tready,

    output wire          m_axis_adap_rx_322mhz_tvalid,
    output wire [511:0]  m_axis_adap_rx_322mhz_tdata,
    output wire [63:0]   m_axis_adap_rx_322mhz_tkeep,
    output wire          m_axis_adap_rx_322mhz_tlast,
    output wire          m_axis_adap_rx_322mhz_tuser_err,

    output wire          m_axis_cmac_tx_tvalid,
    output wire [511:0]  m_axis_cmac_tx_tdata,
    output wire [63:0]   m_axis_cmac_tx_tkeep,
    output wire          m_axis_cmac_tx_tlast,
    output wire          m_axis_cmac_tx_tuser_err,
    input  wire          m_axis_cmac_tx_tready,

    input  wire          s_axis_cmac_rx_tvalid,
    input  wire [511:0]  s_axis_cmac_rx_tdata,
    input  wire [63:0]   s_axis_cmac_rx_tkeep,
    input  wire          s_axis_cmac_rx_tlast,
    input  wire          s_axis_cmac_rx_tuser_err,

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

    /* verilator lint_off UNUSEDSIGNAL */ // (the plugin is the box's module 0)
    input  wire [7:0]    mod_rstn,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [7:0]    mod_rst_done,

    input  wire          axil_aclk,
    input  wire          axis_aclk,
    input  wire          cmac_clk
);

`include "box_322mhz_address_map_inst.vh"
`include "user_plugin_322mhz_inst.vh"

endmodule

`resetall
