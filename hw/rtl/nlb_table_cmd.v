`resetall
`timescale 1ns / 1ps
`default_nettype none

// Decodes a `cmd` write of the table window or the conntrack block (docs/regmap.md): bits 7..0
// name the command, bits 31..8 the entry of WRITE_AT / READ_AT; WRITE and READ take the index
// register and need bits 31..8 zero. Anything else is neither a write nor a read (the block
// reports an error). Combinational.
module nlb_table_cmd (
    cmd_word,
    index_reg,
    cmd_write,
    cmd_read,
    cmd_index
);

`include "nlb_regmap.vh"

input  wire [31:0] cmd_word;
input  wire [31:0] index_reg;
output wire        cmd_write;
output wire        cmd_read;
output wire [31:0] cmd_index;

localparam CMD_BITS = $bits(NLB_TABLE_CMD_WRITE);
localparam [7:0] CMD_WRITE = {{(8-CMD_BITS){1'b0}}, NLB_TABLE_CMD_WRITE};
localparam [7:0] CMD_READ = {{(8-CMD_BITS){1'b0}}, NLB_TABLE_CMD_READ};
localparam [7:0] CMD_WRITE_AT = {{(8-CMD_BITS){1'b0}}, NLB_TABLE_CMD_WRITE_AT};
localparam [7:0] CMD_READ_AT = {{(8-CMD_BITS){1'b0}}, NLB_TABLE_CMD_READ_AT};

wire [7:0] cmd_op = cmd_word[7:0];
wire       cmd_plain = cmd_word[31:8] == 24'd0;
wire       cmd_at = cmd_op == CMD_WRITE_AT || cmd_op == CMD_READ_AT;

assign cmd_write = (cmd_op == CMD_WRITE && cmd_plain) || cmd_op == CMD_WRITE_AT;
assign cmd_read = (cmd_op == CMD_READ && cmd_plain) || cmd_op == CMD_READ_AT;
assign cmd_index = cmd_at ? {8'd0, cmd_word[31:8]} : index_reg;

endmodule

`resetall
