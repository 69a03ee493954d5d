`resetall
`timescale 1ns / 1ps
`default_nettype none

// nlb-offload in AMD's OpenNIC shell: the user plugin of the 250 MHz box (docs/boards.md).
// The pipeline lives in the 322 MHz box; here the host's own frames pass between the QDMA
// streams and the shell's packet adapters, so the card stays the host's network interface:
//   QDMA host-to-card (s_axis_qdma_h2c)  -> transmit adapter (m_axis_adap_tx_250mhz), to CMAC 0;
//   receive adapter (s_axis_adap_rx_250mhz) -> QDMA card-to-host (m_axis_qdma_c2h), to PF 0.
// tuser as the shell defines it: size (bytes) and source pass through; the destination is a
// one-hot port (bit 6 + n: CMAC port n; bit n: physical function n).
// Each direction has a register slice (nlb_axis_skid); frames are never cut or dropped here.
//
// Registers (the box's window, the shell's 0x100000 of BAR 2), read-only:
//   0x0 id 0x4E4C5032 ("NLP2"); anything else reads 0; writes are accepted and ignored.
module nlb_plugin_250mhz #(
    parameter NUM_PHYS_FUNC = 1,
    parameter NUM_CMAC_PORT = 1
) (
    input  wire                         s_axil_awvalid,
    /* verilator lint_off UNUSEDSIGNAL */ // (the id register decodes few address bits)
    input  wire [31:0]                  s_axil_awaddr,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                         s_axil_awready,
    input  wire                         s_axil_wvalid,
    /* verilator lint_off UNUSEDSIGNAL */ // (no writable register)
    input  wire [31:0]                  s_axil_wdata,
    /* verilator lint_on UNUSEDSIGNAL */
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

    input  wire [NUM_PHYS_FUNC-1:0]     s_axis_qdma_h2c_tvalid,
    input  wire [512*NUM_PHYS_FUNC-1:0] s_axis_qdma_h2c_tdata,
    input  wire [64*NUM_PHYS_FUNC-1:0]  s_axis_qdma_h2c_tkeep,
    input  wire [NUM_PHYS_FUNC-1:0]     s_axis_qdma_h2c_tlast,
    input  wire [16*NUM_PHYS_FUNC-1:0]  s_axis_qdma_h2c_tuser_size,
    input  wire [16*NUM_PHYS_FUNC-1:0]  s_axis_qdma_h2c_tuser_src,
    /* verilator lint_off UNUSEDSIGNAL */ // (every host frame goes to CMAC port 0)
    input  wire [16*NUM_PHYS_FUNC-1:0]  s_axis_qdma_h2c_tuser_dst,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [NUM_PHYS_FUNC-1:0]     s_axis_qdma_h2c_tready,

    output wire [NUM_PHYS_FUNC-1:0]     m_axis_qdma_c2h_tvalid,
    output wire [512*NUM_PHYS_FUNC-1:0] m_axis_qdma_c2h_tdata,
    output wire [64*NUM_PHYS_FUNC-1:0]  m_axis_qdma_c2h_tkeep,
    output wire [NUM_PHYS_FUNC-1:0]     m_axis_qdma_c2h_tlast,
    output wire [16*NUM_PHYS_FUNC-1:0]  m_axis_qdma_c2h_tuser_size,
    output wire [16*NUM_PHYS_FUNC-1:0]  m_axis_qdma_c2h_tuser_src,
    output wire [16*NUM_PHYS_FUNC-1:0]  m_axis_qdma_c2h_tuser_dst,
    input  wire [NUM_PHYS_FUNC-1:0]     m_axis_qdma_c2h_tready,

    output wire [NUM_CMAC_PORT-1:0]     m_axis_adap_tx_250mhz_tvalid,
    output wire [512*NUM_CMAC_PORT-1:0] m_axis_adap_tx_250mhz_tdata,
    output wire [64*NUM_CMAC_PORT-1:0]  m_axis_adap_tx_250mhz_tkeep,
    output wire [NUM_CMAC_PORT-1:0]     m_axis_adap_tx_250mhz_tlast,
    output wire [16*NUM_CMAC_PORT-1:0]  m_axis_adap_tx_250mhz_tuser_size,
    output wire [16*NUM_CMAC_PORT-1:0]  m_axis_adap_tx_250mhz_tuser_src,
    output wire [16*NUM_CMAC_PORT-1:0]  m_axis_adap_tx_250mhz_tuser_dst,
    input  wire [NUM_CMAC_PORT-1:0]     m_axis_adap_tx_250mhz_tready,

    input  wire [NUM_CMAC_PORT-1:0]     s_axis_adap_rx_250mhz_tvalid,
    input  wire [512*NUM_CMAC_PORT-1:0] s_axis_adap_rx_250mhz_tdata,
    input  wire [64*NUM_CMAC_PORT-1:0]  s_axis_adap_rx_250mhz_tkeep,
    input  wire [NUM_CMAC_PORT-1:0]     s_axis_adap_rx_250mhz_tlast,
    input  wire [16*NUM_CMAC_PORT-1:0]  s_axis_adap_rx_250mhz_tuser_size,
    input  wire [16*NUM_CMAC_PORT-1:0]  s_axis_adap_rx_250mhz_tuser_src,
    /* verilator lint_off UNUSEDSIGNAL */ // (every received frame goes to PF 0)
    input  wire [16*NUM_CMAC_PORT-1:0]  s_axis_adap_rx_250mhz_tuser_dst,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [NUM_CMAC_PORT-1:0]     s_axis_adap_rx_250mhz_tready,

    // The shell's reset pair for this module (axil_aclk).
    input  wire                         mod_rstn,
    output wire                         mod_rst_done,

    input  wire                         axil_aclk,
    input  wire                         axis_aclk
);

initial begin
    if (NUM_PHYS_FUNC != 1 || NUM_CMAC_PORT != 1) begin
        $error("nlb_plugin_250mhz: one physical function and one CMAC port");
        $finish;
    end
end

wire rst_axil;
wire rst;

nlb_reset_sync #(
    .DOMAINS(2)
) reset_inst (
    .ctrl_clk(axil_aclk),
    .req_rst_n(mod_rstn),
    .done(mod_rst_done),
    .clk({axil_aclk, axis_aclk}),
    .rst({rst_axil, rst})
);

// ---- registers ----------------------------------------------------------------------------

reg        bvalid_reg = 1'b0;
reg        rvalid_reg = 1'b0;
reg [31:0] rdata_reg = 32'd0;
wire write = s_axil_awvalid && s_axil_wvalid && !bvalid_reg;
wire read = s_axil_arvalid && !rvalid_reg;

always @(posedge axil_aclk) begin
    if (write) begin
        bvalid_reg <= 1'b1;
    end else if (s_axil_bready) begin
        bvalid_reg <= 1'b0;
    end
    if (read) begin
        rvalid_reg <= 1'b1;
        rdata_reg <= s_axil_araddr[19:2] == 18'd0 ? 32'h4E4C_5032 : 32'd0;
    end else if (s_axil_rready) begin
        rvalid_reg <= 1'b0;
    end
    if (rst_axil) begin
        bvalid_reg <= 1'b0;
        rvalid_reg <= 1'b0;
    end
end

assign s_axil_awready = write;
assign s_axil_wready = write;
assign s_axil_bvalid = bvalid_reg;
assign s_axil_bresp = 2'b00;
assign s_axil_arready = read;
assign s_axil_rvalid = rvalid_reg;
assign s_axil_rdata = rdata_reg;
assign s_axil_rresp = 2'b00;

// ---- host frames --------------------------------------------------------------------------

wire [31:0] tx_user;
wire [31:0] rx_user;

nlb_axis_skid #(
    .DATA_WIDTH(512),
    .USER_WIDTH(32)
) tx_skid_inst (
    .clk(axis_aclk),
    .rst(rst),
    .s_axis_tdata(s_axis_qdma_h2c_tdata),
    .s_axis_tkeep(s_axis_qdma_h2c_tkeep),
    .s_axis_tvalid(s_axis_qdma_h2c_tvalid[0]),
    .s_axis_tready(s_axis_qdma_h2c_tready[0]),
    .s_axis_tlast(s_axis_qdma_h2c_tlast[0]),
    .s_axis_tuser({s_axis_qdma_h2c_tuser_src, s_axis_qdma_h2c_tuser_size}),
    .m_axis_tdata(m_axis_adap_tx_250mhz_tdata),
    .m_axis_tkeep(m_axis_adap_tx_250mhz_tkeep),
    .m_axis_tvalid(m_axis_adap_tx_250mhz_tvalid[0]),
    .m_axis_tready(m_axis_adap_tx_250mhz_tready[0]),
    .m_axis_tlast(m_axis_adap_tx_250mhz_tlast[0]),
    .m_axis_tuser(tx_user)
);

assign m_axis_adap_tx_250mhz_tuser_size = tx_user[15:0];
assign m_axis_adap_tx_250mhz_tuser_src = tx_user[31:16];
assign m_axis_adap_tx_250mhz_tuser_dst = 16'h0040;

nlb_axis_skid #(
    .DATA_WIDTH(512),
    .USER_WIDTH(32)
) rx_skid_inst (
    .clk(axis_aclk),
    .rst(rst),
    .s_axis_tdata(s_axis_adap_rx_250mhz_tdata),
    .s_axis_tkeep(s_axis_adap_rx_250mhz_tkeep),
    .s_axis_tvalid(s_axis_adap_rx_250mhz_tvalid[0]),
    .s_axis_tready(s_axis_adap_rx_250mhz_tready[0]),
    .s_axis_tlast(s_axis_adap_rx_250mhz_tlast[0]),
    .s_axis_tuser({s_axis_adap_rx_250mhz_tuser_src, s_axis_adap_rx_250mhz_tuser_size}),
    .m_axis_tdata(m_axis_qdma_c2h_tdata),
    .m_axis_tkeep(m_axis_qdma_c2h_tkeep),
    .m_axis_tvalid(m_axis_qdma_c2h_tvalid[0]),
    .m_axis_tready(m_axis_qdma_c2h_tready[0]),
    .m_axis_tlast(m_axis_qdma_c2h_tlast[0]),
    .m_axis_tuser(rx_user)
);

assign m_axis_qdma_c2h_tuser_size = rx_user[15:0];
assign m_axis_qdma_c2h_tuser_src = rx_user[31:16];
assign m_axis_qdma_c2h_tuser_dst = 16'h0001;

endmodule

`resetall
