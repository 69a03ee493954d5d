`resetall
`timescale 1ns / 1ps
`default_nettype none

// The shell's 250 MHz box as the plugin sees it: its parameters, ports and the two includes
// (the shell's reset generator for the box left out), for nlb_opennic_sim.
module nlb_sim_box_250mhz #(
    parameter NUM_PHYS_FUNC = 1,
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

    output wire          m_axis_adap_tx_250mhz_tvalid,
    output wire [511:0]  m_axis_adap_tx_250mhz_tdata,
    output wire [63:0]   m_axis_adap_tx_250mhz_tkeep,
    output wire          m_axis_adap_tx_250mhz_tlast,
    output wire [15:0]   m_axis_adap_tx_250mhz_tuser_size,
    output wire [15:0]   m_axis_adap_tx_250mhz_tuser_src,
    output wire [15:0]   m_axis_adap_tx_250mhz_tuser_dst,
    input  wire          m_axis_adap_tx_250mhz_tready,

    input  wire          s_axis_adap_rx_250mhz_tvalid,
    input  wire [511:0]  s_axis_adap_rx_250mhz_tdata,
    input  wire [63:0]   s_axis_adap_rx_250mhz_tkeep,
    input  wire          s_axis_adap_rx_250mhz_tlast,
    input  wire [15:0]   s_axis_adap_rx_250mhz_tuser_size,
    input  wire [15:0]   s_axis_adap_rx_250mhz_tuser_src,
    input  wire [15:0]   s_axis_adap_rx_250mhz_tuser_dst,
    output wire          s_axis_adap_rx_250mhz_tready,

    /* verilator lint_off UNUSEDSIGNAL */ // (the plugin is the box's module 0)
    input  wire [15:0]   mod_rstn,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [15:0]   mod_rst_done,

    input  wire          axil_aclk,
    input  wire          axis_aclk
);

`include "box_250mhz_address_map_inst.vh"
`include "user_plugin_250mhz_inst.vh"

endmodule

`resetall
