`resetall
`timescale 1ns / 1ps
`default_nettype none

// The configuration flash of an UltraScale+ card, reached as the card wires it: its clock,
// chip select and data pins are the FPGA's dedicated configuration pins, which user logic
// drives only through the STARTUPE3 primitive (AMD UG570, "STARTUPE3"). nlb_top's SPI
// controller (nlb_spi_flash) talks single-bit SPI: DQ0 carries MOSI, DQ1 MISO, and DQ2/DQ3
// (write protect and hold on the Alveo cards' flash) are driven high.
//
// Only Vivado builds this file (hw/boards/opennic/plugin/build_box_322mhz.tcl, when the shell
// does not use STARTUPE3 itself; a device has one). The first three clocks on USRCCLKO after
// configuration do not reach the pin (UG570); nlb_spi_flash's first command starts long after.
module nlb_flash_startupe3 (
    input  wire spi_sck,
    input  wire spi_cs_n,
    input  wire spi_mosi,
    output wire spi_miso
);

// DQ1 is MISO; DQ0, DQ2 and DQ3 are driven, what they read back is not used.
/* verilator lint_off UNUSEDSIGNAL */
wire [3:0] di;
/* verilator lint_on UNUSEDSIGNAL */

// The configuration clocks, end of startup and program request are not used.
/* verilator lint_off PINCONNECTEMPTY */
STARTUPE3 #(
    .PROG_USR("FALSE"),
    .SIM_CCLK_FREQ(0.0)
) startupe3_inst (
    .CFGCLK(),
    .CFGMCLK(),
    .DI(di),
    .DO({1'b1, 1'b1, 1'b0, spi_mosi}),
    .DTS(4'b0010),
    .EOS(),
    .FCSBO(spi_cs_n),
    .FCSBTS(1'b0),
    .GSR(1'b0),
    .GTS(1'b0),
    .KEYCLEARB(1'b1),
    .PACK(1'b0),
    .PREQ(),
    .USRCCLKO(spi_sck),
    .USRCCLKTS(1'b0),
    .USRDONEO(1'b1),
    .USRDONETS(1'b1)
);

/* verilator lint_on PINCONNECTEMPTY */

assign spi_miso = di[1];

endmodule

`resetall
