`resetall
`timescale 1ns / 1ps
`default_nettype none

// SPI flash controller, the spi_flash register block: shifts 1 to 4 whole bytes per txrx
// access (SPI mode 0, most significant bit first), so software moves words, not pin edges.
//
// Registers (offsets inside the block's 4 KiB window; docs/regmap.md, docs/flashing.md):
// - TYPE, VERSION, NEXT: from nlb_regmap.vh.
// - ctrl: bit 0 drives chip select (spi_cs_n = ~bit 0); bits 15..8 = div, SCK = clk /
//   (2 * (div + 1)); bits 17..16 = bytes per txrx access - 1. Other bits read 0. Byte strobes
//   are honoured.
// - txrx: a write shifts out bytes n-1..0 of the written word (n from ctrl), the most
//   significant first, while shifting n bytes in; a read returns the bytes shifted in by the
//   last transfer, the last one in bits 7..0 (upper bytes 0). Strobes are ignored.
// - status: bit 0 a transfer is running.
// A write to ctrl or txrx, and a read of them, waits (no response) until the running transfer
// has finished, so software never polls status between transfers. Reads of the other
// registers are answered at once. Every access gets OKAY; holes read 0.
//
// MOSI changes on falling SCK edges (the first bit when the transfer starts), MISO is sampled
// on rising ones. One byte takes 16 * (div + 1) clocks.
//
// Ports are declared in the body (Verilog-2001 style) because the register offsets come from
// the regmap header, which has to be included inside the module.
module nlb_spi_flash (
    clk,
    rst,
    s_axil_awaddr,
    s_axil_awvalid,
    s_axil_awready,
    s_axil_wdata,
    s_axil_wstrb,
    s_axil_wvalid,
    s_axil_wready,
    s_axil_bresp,
    s_axil_bvalid,
    s_axil_bready,
    s_axil_araddr,
    s_axil_arvalid,
    s_axil_arready,
    s_axil_rdata,
    s_axil_rresp,
    s_axil_rvalid,
    s_axil_rready,
    spi_sck,
    spi_cs_n,
    spi_mosi,
    spi_miso
);

`include "nlb_regmap.vh"

// ---- parameters -------------------------------------------------------------------------

// AXI-Lite address width (12..31); only the low 12 bits (the block's window) are decoded.
parameter AXIL_ADDR_WIDTH = 16;
// ctrl.div after reset: 3 gives SCK = clk / 8 (31.25 MHz at 250 MHz).
parameter [7:0] RESET_DIV = 8'd3;

// ---- derived constants --------------------------------------------------------------------

localparam [11:0] OFF_TYPE = 12'h000;
localparam [11:0] OFF_VERSION = 12'h004;
localparam [11:0] OFF_NEXT = 12'h008;
localparam [31:0] OFF_CTRL_FULL = NLB_REG_SPI_FLASH_CTRL - NLB_BLK_SPI_FLASH_BASE;
localparam [31:0] OFF_TXRX_FULL = NLB_REG_SPI_FLASH_TXRX - NLB_BLK_SPI_FLASH_BASE;
localparam [31:0] OFF_STATUS_FULL = NLB_REG_SPI_FLASH_STATUS - NLB_BLK_SPI_FLASH_BASE;
localparam [11:0] OFF_CTRL = OFF_CTRL_FULL[11:0];
localparam [11:0] OFF_TXRX = OFF_TXRX_FULL[11:0];
localparam [11:0] OFF_STATUS = OFF_STATUS_FULL[11:0];

// Bits of ctrl that exist.
localparam [31:0] CTRL_MASK = 32'h0003_FF01;
localparam [31:0] CTRL_RESET = {16'd0, RESET_DIV, 8'd0};

localparam [1:0] RESP_OKAY = 2'b00;

initial begin
    if (AXIL_ADDR_WIDTH < 12 || AXIL_ADDR_WIDTH > 31) begin
        $error("nlb_spi_flash: AXIL_ADDR_WIDTH (%0d) must be 12..31", AXIL_ADDR_WIDTH);
        $finish;
    end
end

// ---- ports --------------------------------------------------------------------------------

input  wire                       clk;
input  wire                       rst;

// AXI-Lite slave. Only address bits 11..2 are looked at.
/* verilator lint_off UNUSEDSIGNAL */
input  wire [AXIL_ADDR_WIDTH-1:0] s_axil_awaddr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire                       s_axil_awvalid;
output wire                       s_axil_awready;
input  wire [31:0]                s_axil_wdata;
input  wire [3:0]                 s_axil_wstrb;
input  wire                       s_axil_wvalid;
output wire                       s_axil_wready;
output wire [1:0]                 s_axil_bresp;
output wire                       s_axil_bvalid;
input  wire                       s_axil_bready;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [AXIL_ADDR_WIDTH-1:0] s_axil_araddr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire                       s_axil_arvalid;
output wire                       s_axil_arready;
output wire [31:0]                s_axil_rdata;
output wire [1:0]                 s_axil_rresp;
output wire                       s_axil_rvalid;
input  wire                       s_axil_rready;

// SPI bus to the configuration flash (through STARTUPE3 on UltraScale+).
output wire                       spi_sck;
output wire                       spi_cs_n;
output wire                       spi_mosi;
input  wire                       spi_miso;

// ---- helpers --------------------------------------------------------------------------------

// A register write with byte strobes applied to the register's current value.
function [31:0] strobed(input [31:0] old, input [31:0] value, input [3:0] strb);
    integer i;
    begin
        for (i = 0; i < 4; i = i + 1) begin
            strobed[i*8 +: 8] = strb[i] ? value[i*8 +: 8] : old[i*8 +: 8];
        end
    end
endfunction

// ---- state --------------------------------------------------------------------------------

// AXI-Lite write: AW and W caught independently in holding registers (ready from registers).
reg        aw_full_reg = 1'b0, aw_full_next;
reg [9:0]  aw_word_reg = 10'd0, aw_word_next;
reg        w_full_reg = 1'b0, w_full_next;
reg [31:0] w_data_reg = 32'd0, w_data_next;
reg [3:0]  w_strb_reg = 4'd0, w_strb_next;
reg        awready_reg = 1'b0, awready_next;
reg        wready_reg = 1'b0, wready_next;
reg        bvalid_reg = 1'b0, bvalid_next;

// AXI-Lite read.
reg        ar_full_reg = 1'b0, ar_full_next;
reg [9:0]  ar_word_reg = 10'd0, ar_word_next;
reg        arready_reg = 1'b0, arready_next;
reg        rvalid_reg = 1'b0, rvalid_next;
reg [31:0] rdata_reg = 32'd0, rdata_next;

// Registers.
reg [31:0] ctrl_reg = CTRL_RESET, ctrl_next;
reg [31:0] rx_reg = 32'd0, rx_next;

// Shift engine.
reg        busy_reg = 1'b0, busy_next;
reg        sck_reg = 1'b0, sck_next;
reg        mosi_reg = 1'b0, mosi_next;
reg [7:0]  half_cnt_reg = 8'd0, half_cnt_next;
reg [5:0]  bits_left_reg = 6'd0, bits_left_next;
reg [31:0] out_reg = 32'd0, out_next;
reg [31:0] in_reg = 32'd0, in_next;

assign s_axil_awready = awready_reg;
assign s_axil_wready = wready_reg;
assign s_axil_bresp = RESP_OKAY;
assign s_axil_bvalid = bvalid_reg;
assign s_axil_arready = arready_reg;
assign s_axil_rdata = rdata_reg;
assign s_axil_rresp = RESP_OKAY;
assign s_axil_rvalid = rvalid_reg;

assign spi_sck = sck_reg;
assign spi_cs_n = ~ctrl_reg[0];
assign spi_mosi = mosi_reg;

wire aw_take = s_axil_awvalid && awready_reg;
wire w_take = s_axil_wvalid && wready_reg;
wire ar_take = s_axil_arvalid && arready_reg;

wire [11:0] wr_off = {aw_word_reg, 2'b00};
wire [11:0] rd_off = {ar_word_reg, 2'b00};

// Accesses that must wait for a running transfer.
wire wr_waits = busy_reg && (wr_off == OFF_CTRL || wr_off == OFF_TXRX);
wire rd_waits = (rd_off == OFF_CTRL || rd_off == OFF_TXRX)
                && (busy_reg || aw_full_reg || w_full_reg);

wire wr_exec = aw_full_reg && w_full_reg && !bvalid_reg && !wr_waits;
wire rd_exec = ar_full_reg && !rvalid_reg && !rd_waits;

// Bytes per transfer - 1, and the written word left-aligned so its first byte is in 31..24.
wire [1:0]  width_m1 = ctrl_reg[17:16];
wire [31:0] tx_aligned = w_data_reg << {~width_m1, 3'b000};

// ---- next state -----------------------------------------------------------------------------

always @* begin
    aw_full_next = aw_full_reg;
    aw_word_next = aw_word_reg;
    w_full_next = w_full_reg;
    w_data_next = w_data_reg;
    w_strb_next = w_strb_reg;
    bvalid_next = bvalid_reg && !s_axil_bready;
    ar_full_next = ar_full_reg;
    ar_word_next = ar_word_reg;
    rvalid_next = rvalid_reg && !s_axil_rready;
    rdata_next = rdata_reg;
    ctrl_next = ctrl_reg;
    rx_next = rx_reg;
    busy_next = busy_reg;
    sck_next = sck_reg;
    mosi_next = mosi_reg;
    half_cnt_next = half_cnt_reg;
    bits_left_next = bits_left_reg;
    out_next = out_reg;
    in_next = in_reg;

    if (aw_take) begin
        aw_full_next = 1'b1;
        aw_word_next = s_axil_awaddr[11:2];
    end
    if (w_take) begin
        w_full_next = 1'b1;
        w_data_next = s_axil_wdata;
        w_strb_next = s_axil_wstrb;
    end
    if (ar_take) begin
        ar_full_next = 1'b1;
        ar_word_next = s_axil_araddr[11:2];
    end

    // The shift engine: half periods of div + 1 clocks; sample on rise, shift on fall.
    if (busy_reg) begin
        if (half_cnt_reg == ctrl_reg[15:8]) begin
            half_cnt_next = 8'd0;
            if (!sck_reg) begin
                sck_next = 1'b1;
                in_next = {in_reg[30:0], spi_miso};
            end else begin
                sck_next = 1'b0;
                bits_left_next = bits_left_reg - 6'd1;
                if (bits_left_reg == 6'd1) begin
                    busy_next = 1'b0;
                    rx_next = in_reg;
                end else begin
                    out_next = {out_reg[30:0], 1'b0};
                    mosi_next = out_reg[30];
                end
            end
        end else begin
            half_cnt_next = half_cnt_reg + 8'd1;
        end
    end

    if (wr_exec) begin
        aw_full_next = 1'b0;
        w_full_next = 1'b0;
        bvalid_next = 1'b1;
        if (wr_off == OFF_CTRL) begin
            ctrl_next = strobed(ctrl_reg, w_data_reg, w_strb_reg) & CTRL_MASK;
        end else if (wr_off == OFF_TXRX) begin
            busy_next = 1'b1;
            sck_next = 1'b0;
            half_cnt_next = 8'd0;
            bits_left_next = {1'b0, width_m1, 3'b000} + 6'd8;
            out_next = tx_aligned;
            mosi_next = tx_aligned[31];
            in_next = 32'd0;
        end
    end

    if (rd_exec) begin
        ar_full_next = 1'b0;
        rvalid_next = 1'b1;
        case (rd_off)
            OFF_TYPE: rdata_next = NLB_BLK_SPI_FLASH_TYPE;
            OFF_VERSION: rdata_next = NLB_BLK_SPI_FLASH_VERSION;
            OFF_NEXT: rdata_next = NLB_BLK_SPI_FLASH_NEXT;
            OFF_CTRL: rdata_next = ctrl_reg;
            OFF_TXRX: rdata_next = rx_reg;
            OFF_STATUS: rdata_next = {31'd0, busy_reg};
            default: rdata_next = 32'd0;
        endcase
    end

    // Take the next address or data only into an empty holding register.
    awready_next = !aw_full_next;
    wready_next = !w_full_next;
    arready_next = !ar_full_next;
end

// ---- registers ------------------------------------------------------------------------------

always @(posedge clk) begin
    aw_full_reg <= aw_full_next;
    aw_word_reg <= aw_word_next;
    w_full_reg <= w_full_next;
    w_data_reg <= w_data_next;
    w_strb_reg <= w_strb_next;
    awready_reg <= awready_next;
    wready_reg <= wready_next;
    bvalid_reg <= bvalid_next;
    ar_full_reg <= ar_full_next;
    ar_word_reg <= ar_word_next;
    arready_reg <= arready_next;
    rvalid_reg <= rvalid_next;
    rdata_reg <= rdata_next;
    ctrl_reg <= ctrl_next;
    rx_reg <= rx_next;
    busy_reg <= busy_next;
    sck_reg <= sck_next;
    mosi_reg <= mosi_next;
    half_cnt_reg <= half_cnt_next;
    bits_left_reg <= bits_left_next;
    out_reg <= out_next;
    in_reg <= in_next;

    if (rst) begin
        aw_full_reg <= 1'b0;
        w_full_reg <= 1'b0;
        awready_reg <= 1'b0;
        wready_reg <= 1'b0;
        bvalid_reg <= 1'b0;
        ar_full_reg <= 1'b0;
        arready_reg <= 1'b0;
        rvalid_reg <= 1'b0;
        ctrl_reg <= CTRL_RESET;
        rx_reg <= 32'd0;
        busy_reg <= 1'b0;
        sck_reg <= 1'b0;
        mosi_reg <= 1'b0;
        half_cnt_reg <= 8'd0;
        bits_left_reg <= 6'd0;
    end
end

endmodule

`resetall
