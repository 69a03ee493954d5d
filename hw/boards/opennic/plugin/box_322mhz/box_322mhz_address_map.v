`resetall
`timescale 1ns / 1ps
`default_nettype none

// The address map of the OpenNIC shell's 322 MHz box for nlb-offload: one slave,
// nlb_plugin_322mhz, over the box's whole 1 MiB window of BAR 2 (it decodes its own
// registers). The shell's build reads this file for every plugin; the box's
// box_322mhz_address_map_inst.vh puts it between the box's register port and the plugin.
module box_322mhz_address_map (
    input  wire        s_axil_awvalid,
    input  wire [31:0] s_axil_awaddr,
    output wire        s_axil_awready,
    input  wire        s_axil_wvalid,
    input  wire [31:0] s_axil_wdata,
    output wire        s_axil_wready,
    output wire        s_axil_bvalid,
    output wire [1:0]  s_axil_bresp,
    input  wire        s_axil_bready,
    input  wire        s_axil_arvalid,
    input  wire [31:0] s_axil_araddr,
    output wire        s_axil_arready,
    output wire        s_axil_rvalid,
    output wire [31:0] s_axil_rdata,
    output wire [1:0]  s_axil_rresp,
    input  wire        s_axil_rready,

    output wire        m_axil_nlb_awvalid,
    output wire [31:0] m_axil_nlb_awaddr,
    input  wire        m_axil_nlb_awready,
    output wire        m_axil_nlb_wvalid,
    output wire [31:0] m_axil_nlb_wdata,
    input  wire        m_axil_nlb_wready,
    input  wire        m_axil_nlb_bvalid,
    input  wire [1:0]  m_axil_nlb_bresp,
    output wire        m_axil_nlb_bready,
    output wire        m_axil_nlb_arvalid,
    output wire [31:0] m_axil_nlb_araddr,
    input  wire        m_axil_nlb_arready,
    input  wire        m_axil_nlb_rvalid,
    input  wire [31:0] m_axil_nlb_rdata,
    input  wire [1:0]  m_axil_nlb_rresp,
    output wire        m_axil_nlb_rready
);

// Offsets within the window (the shell's system crossbar has taken the box's base off).
assign m_axil_nlb_awvalid = s_axil_awvalid;
assign m_axil_nlb_awaddr = s_axil_awaddr;
assign s_axil_awready = m_axil_nlb_awready;
assign m_axil_nlb_wvalid = s_axil_wvalid;
assign m_axil_nlb_wdata = s_axil_wdata;
assign s_axil_wready = m_axil_nlb_wready;
assign s_axil_bvalid = m_axil_nlb_bvalid;
assign s_axil_bresp = m_axil_nlb_bresp;
assign m_axil_nlb_bready = s_axil_bready;
assign m_axil_nlb_arvalid = s_axil_arvalid;
assign m_axil_nlb_araddr = s_axil_araddr;
assign s_axil_arready = m_axil_nlb_arready;
assign s_axil_rvalid = m_axil_nlb_rvalid;
assign s_axil_rdata = m_axil_nlb_rdata;
assign s_axil_rresp = m_axil_nlb_rresp;
assign m_axil_nlb_rready = s_axil_rready;

endmodule

`resetall
