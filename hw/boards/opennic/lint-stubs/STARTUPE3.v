`resetall
`timescale 1ns / 1ps
`default_nettype none

// Lint only (hw/scripts/lint.sh): the ports of AMD's STARTUPE3 primitive (UltraScale+
// configuration interface, UG974), so Verilator can check the modules that instantiate it.
// Vivado supplies the real primitive; nothing here is simulated or built.
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
module STARTUPE3 #(
    parameter PROG_USR = "FALSE",
    parameter real SIM_CCLK_FREQ = 0.0
) (
    output wire       CFGCLK,
    output wire       CFGMCLK,
    output wire [3:0] DI,
    input  wire [3:0] DO,
    input  wire [3:0] DTS,
    output wire       EOS,
    input  wire       FCSBO,
    input  wire       FCSBTS,
    input  wire       GSR,
    input  wire       GTS,
    input  wire       KEYCLEARB,
    input  wire       PACK,
    output wire       PREQ,
    input  wire       USRCCLKO,
    input  wire       USRCCLKTS,
    input  wire       USRDONEO,
    input  wire       USRDONETS
);
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */

assign CFGCLK = 1'b0;
assign CFGMCLK = 1'b0;
assign DI = 4'd0;
assign EOS = 1'b1;
assign PREQ = 1'b0;

endmodule

`resetall
