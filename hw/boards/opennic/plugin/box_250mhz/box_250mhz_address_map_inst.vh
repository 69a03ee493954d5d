// nlb-offload's plugin for AMD's OpenNIC shell (docs/boards.md): included by the shell's
// src/box_250mhz/box_250mhz.sv, inside that module, so the names below are the box's ports
// and wires (its register port s_axil_*, axil_aclk and internal_box_rstn).

wire        axil_nlb_awvalid;
wire [31:0] axil_nlb_awaddr;
wire        axil_nlb_awready;
wire        axil_nlb_wvalid;
wire [31:0] axil_nlb_wdata;
wire        axil_nlb_wready;
wire        axil_nlb_bvalid;
wire [1:0]  axil_nlb_bresp;
wire        axil_nlb_bready;
wire        axil_nlb_arvalid;
wire [31:0] axil_nlb_araddr;
wire        axil_nlb_arready;
wire        axil_nlb_rvalid;
wire [31:0] axil_nlb_rdata;
wire [1:0]  axil_nlb_rresp;
wire        axil_nlb_rready;

box_250mhz_address_map address_map_inst (
    .s_axil_awvalid      (s_axil_awvalid),
    .s_axil_awaddr       (s_axil_awaddr),
    .s_axil_awready      (s_axil_awready),
    .s_axil_wvalid       (s_axil_wvalid),
    .s_axil_wdata        (s_axil_wdata),
    .s_axil_wready       (s_axil_wready),
    .s_axil_bvalid       (s_axil_bvalid),
    .s_axil_bresp        (s_axil_bresp),
    .s_axil_bready       (s_axil_bready),
    .s_axil_arvalid      (s_axil_arvalid),
    .s_axil_araddr       (s_axil_araddr),
    .s_axil_arready      (s_axil_arready),
    .s_axil_rvalid       (s_axil_rvalid),
    .s_axil_rdata        (s_axil_rdata),
    .s_axil_rresp        (s_axil_rresp),
    .s_axil_rready       (s_axil_rready),
    .m_axil_nlb_awvalid  (axil_nlb_awvalid),
    .m_axil_nlb_awaddr   (axil_nlb_awaddr),
    .m_axil_nlb_awready  (axil_nlb_awready),
    .m_axil_nlb_wvalid   (axil_nlb_wvalid),
    .m_axil_nlb_wdata    (axil_nlb_wdata),
    .m_axil_nlb_wready   (axil_nlb_wready),
    .m_axil_nlb_bvalid   (axil_nlb_bvalid),
    .m_axil_nlb_bresp    (axil_nlb_bresp),
    .m_axil_nlb_bready   (axil_nlb_bready),
    .m_axil_nlb_arvalid  (axil_nlb_arvalid),
    .m_axil_nlb_araddr   (axil_nlb_araddr),
    .m_axil_nlb_arready  (axil_nlb_arready),
    .m_axil_nlb_rvalid   (axil_nlb_rvalid),
    .m_axil_nlb_rdata    (axil_nlb_rdata),
    .m_axil_nlb_rresp    (axil_nlb_rresp),
    .m_axil_nlb_rready   (axil_nlb_rready)
);
