`resetall
`timescale 1ns / 1ps
`default_nettype none

// SPI flash controller, the spi_flash register block: shifts 1 to 4 whole bytes per txrx
// access (SPI mode 0, most significant bit first), so software moves words, not pin edges.
// It sits on nlb_regs' extension bus (absolute byte addresses; nlb_regs answers the block's
// TYPE, VERSION and NEXT words and forwards the rest here), like the conntrack and counters
// blocks.
//
// Registers (docs/regmap.md, docs/flashing.md; fields from nlb_regmap.vh):
// - ctrl: cs drives chip select (spi_cs_n = ~cs); div gives SCK = clk / (2 * (div + 1));
//   bytes_m1 = bytes per txrx access - 1. Other bits read 0. Byte strobes are honoured.
// - txrx: a write shifts out bytes n-1..0 of the written word (n from ctrl), the most
//   significant first, while shifting n bytes in; a read returns the bytes shifted in by the
//   last transfer, the last one in bits 7..0 (upper bytes 0). Strobes are ignored.
// - status: busy while a transfer runs.
// A write to ctrl or txrx, and a read of them, waits (no ack) until the running transfer has
// finished; a read of them also waits for a write still waiting, so reads see the writes
// before them. Reads of the other registers are answered at once. Unknown offsets read 0 and
// ignore writes.
//
// MOSI changes on falling SCK edges (the first bit when the transfer starts), MISO is sampled
// on rising ones. One byte takes 16 * (div + 1) clocks.
//
// Ports are declared in the body (Verilog-2001 style) because the register offsets come from
// the regmap header, which has to be included inside the module.
module nlb_spi_flash (
    clk,
    rst,
    ext_wr_req,
    ext_wr_addr,
    ext_wr_data,
    ext_wr_strb,
    ext_wr_ack,
    ext_rd_req,
    ext_rd_addr,
    ext_rd_data,
    ext_rd_ack,
    spi_sck,
    spi_cs_n,
    spi_mosi,
    spi_miso
);

`include "nlb_regmap.vh"

// ---- parameters -------------------------------------------------------------------------

localparam DIV_W = NLB_REG_SPI_FLASH_CTRL_DIV_W;
localparam BYTES_W = NLB_REG_SPI_FLASH_CTRL_BYTES_M1_W;

// ctrl.div after reset (the regmap's: 3 gives SCK = clk / 8, 31.25 MHz at 250 MHz).
parameter [DIV_W-1:0] RESET_DIV =
    NLB_REG_SPI_FLASH_CTRL_RESET[NLB_REG_SPI_FLASH_CTRL_DIV_LSB +: DIV_W];

// ---- derived constants --------------------------------------------------------------------

localparam [31:0] CTRL_RESET = {{(32-DIV_W){1'b0}}, RESET_DIV} << NLB_REG_SPI_FLASH_CTRL_DIV_LSB;

initial begin
    if (BYTES_W != 2) begin
        $error("nlb_spi_flash: the shift engine moves 1..4 bytes (ctrl.bytes_m1 of 2 bits)");
        $finish;
    end
end

// ---- ports --------------------------------------------------------------------------------

input  wire                       clk;
input  wire                       rst;

// Extension bus from nlb_regs (one access at a time per direction; *_ack pulses when done).
input  wire                       ext_wr_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]                ext_wr_addr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [31:0]                ext_wr_data;
input  wire [3:0]                 ext_wr_strb;
output wire                       ext_wr_ack;
input  wire                       ext_rd_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]                ext_rd_addr;
/* verilator lint_on UNUSEDSIGNAL */
output wire [31:0]                ext_rd_data;
output wire                       ext_rd_ack;

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

// ---- state ----------------------------------------------------------------------------------

// An access taken from the bus and not yet answered (address word aligned).
reg        wr_pend_reg = 1'b0, wr_pend_next;
reg [31:0] wr_addr_reg = 32'd0;
reg [31:0] wr_data_reg = 32'd0;
reg [3:0]  wr_strb_reg = 4'd0;
reg        wr_ack_reg = 1'b0, wr_ack_next;
reg        rd_pend_reg = 1'b0, rd_pend_next;
reg [31:0] rd_addr_reg = 32'd0;
reg        rd_ack_reg = 1'b0, rd_ack_next;
reg [31:0] rd_data_reg = 32'd0, rd_data_next;

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

assign ext_wr_ack = wr_ack_reg;
assign ext_rd_ack = rd_ack_reg;
assign ext_rd_data = rd_data_reg;

assign spi_sck = sck_reg;
assign spi_cs_n = ~ctrl_reg[NLB_REG_SPI_FLASH_CTRL_CS_LSB];
assign spi_mosi = mosi_reg;

// Accesses that must wait for a running transfer (reads of ctrl/txrx also for a waiting
// write, which comes first).
wire wr_stalls = wr_addr_reg == NLB_REG_SPI_FLASH_CTRL || wr_addr_reg == NLB_REG_SPI_FLASH_TXRX;
wire rd_stalls = rd_addr_reg == NLB_REG_SPI_FLASH_CTRL || rd_addr_reg == NLB_REG_SPI_FLASH_TXRX;
wire wr_exec = wr_pend_reg && !(busy_reg && wr_stalls);
wire rd_exec = rd_pend_reg && !(rd_stalls && (busy_reg || wr_pend_reg));

// The ctrl fields.
wire [DIV_W-1:0]   div = ctrl_reg[NLB_REG_SPI_FLASH_CTRL_DIV_LSB +: DIV_W];
wire [BYTES_W-1:0] width_m1 = ctrl_reg[NLB_REG_SPI_FLASH_CTRL_BYTES_M1_LSB +: BYTES_W];
// The written word left-aligned so its first byte (byte n-1) is in bits 31..24.
wire [31:0] tx_aligned = wr_data_reg << {~width_m1, 3'b000};

reg [31:0] status_word;
always @* begin
    status_word = 32'd0;
    status_word[NLB_REG_SPI_FLASH_STATUS_BUSY_LSB] = busy_reg;
end

// ---- next state -----------------------------------------------------------------------------

always @* begin
    wr_pend_next = wr_pend_reg;
    wr_ack_next = 1'b0;
    rd_pend_next = rd_pend_reg;
    rd_ack_next = 1'b0;
    rd_data_next = rd_data_reg;
    ctrl_next = ctrl_reg;
    rx_next = rx_reg;
    busy_next = busy_reg;
    sck_next = sck_reg;
    mosi_next = mosi_reg;
    half_cnt_next = half_cnt_reg;
    bits_left_next = bits_left_reg;
    out_next = out_reg;
    in_next = in_reg;

    // The shift engine: half periods of div + 1 clocks; sample on rise, shift on fall.
    if (busy_reg) begin
        if (half_cnt_reg == div) begin
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
        wr_pend_next = 1'b0;
        wr_ack_next = 1'b1;
        if (wr_addr_reg == NLB_REG_SPI_FLASH_CTRL) begin
            ctrl_next = strobed(ctrl_reg, wr_data_reg, wr_strb_reg) & NLB_REG_SPI_FLASH_CTRL_DEFINED;
        end else if (wr_addr_reg == NLB_REG_SPI_FLASH_TXRX && &wr_strb_reg) begin
            // A transfer starts only on a write of all four bytes (the regmap's rule for
            // writes that act).
            busy_next = 1'b1;
            sck_next = 1'b0;
            half_cnt_next = 8'd0;
            // (bytes_m1 + 1) * 8 bits.
            bits_left_next = {1'b0, width_m1, 3'b000} + 6'd8;
            out_next = tx_aligned;
            mosi_next = tx_aligned[31];
            in_next = 32'd0;
        end
    end

    if (rd_exec) begin
        rd_pend_next = 1'b0;
        rd_ack_next = 1'b1;
        case (rd_addr_reg)
            NLB_REG_SPI_FLASH_CTRL: rd_data_next = ctrl_reg;
            NLB_REG_SPI_FLASH_TXRX: rd_data_next = rx_reg;
            NLB_REG_SPI_FLASH_STATUS: rd_data_next = status_word;
            default: rd_data_next = 32'd0;
        endcase
    end

    // A new access (the bus sends one per direction at a time, after the last one's ack).
    if (ext_wr_req) begin
        wr_pend_next = 1'b1;
    end
    if (ext_rd_req) begin
        rd_pend_next = 1'b1;
    end
end

// ---- registers ------------------------------------------------------------------------------

always @(posedge clk) begin
    wr_pend_reg <= wr_pend_next;
    wr_ack_reg <= wr_ack_next;
    rd_pend_reg <= rd_pend_next;
    rd_ack_reg <= rd_ack_next;
    rd_data_reg <= rd_data_next;
    if (ext_wr_req) begin
        wr_addr_reg <= {ext_wr_addr[31:2], 2'b00};
        wr_data_reg <= ext_wr_data;
        wr_strb_reg <= ext_wr_strb;
    end
    if (ext_rd_req) begin
        rd_addr_reg <= {ext_rd_addr[31:2], 2'b00};
    end
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
        wr_pend_reg <= 1'b0;
        wr_ack_reg <= 1'b0;
        rd_pend_reg <= 1'b0;
        rd_ack_reg <= 1'b0;
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
