`resetall
`timescale 1ns / 1ps
`default_nettype none

// Decodes a `cmd` write of the table window or the conntrack block (docs/regmap.md, fields
// op and index): op names the command, index the entry of WRITE_AT / READ_AT; WRITE and READ
// take the index register and need the index field zero. Anything else is neither a write nor
// a read (the block reports an error). Combinational. The two blocks' cmd registers share one
// field layout (checked below).
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

localparam OP_W = NLB_REG_TABLE_CMD_OP_W;
localparam CMD_BITS = $bits(NLB_TABLE_CMD_WRITE);
localparam [OP_W-1:0] CMD_WRITE = {{(OP_W-CMD_BITS){1'b0}}, NLB_TABLE_CMD_WRITE};
localparam [OP_W-1:0] CMD_READ = {{(OP_W-CMD_BITS){1'b0}}, NLB_TABLE_CMD_READ};
localparam [OP_W-1:0] CMD_WRITE_AT = {{(OP_W-CMD_BITS){1'b0}}, NLB_TABLE_CMD_WRITE_AT};
localparam [OP_W-1:0] CMD_READ_AT = {{(OP_W-CMD_BITS){1'b0}}, NLB_TABLE_CMD_READ_AT};

initial begin
    if (NLB_REG_CONNTRACK_CMD_OP_LSB != NLB_REG_TABLE_CMD_OP_LSB
            || NLB_REG_CONNTRACK_CMD_OP_W != NLB_REG_TABLE_CMD_OP_W
            || NLB_REG_CONNTRACK_CMD_INDEX_LSB != NLB_REG_TABLE_CMD_INDEX_LSB
            || NLB_REG_CONNTRACK_CMD_INDEX_W != NLB_REG_TABLE_CMD_INDEX_W) begin
        $error("nlb_table_cmd: table.cmd and conntrack.cmd must share their fields");
        $finish;
    end
end

wire [OP_W-1:0] cmd_op = cmd_word[NLB_REG_TABLE_CMD_OP_LSB +: OP_W];
wire [31:0]     cmd_at_index = (cmd_word & NLB_REG_TABLE_CMD_INDEX_MASK)
                               >> NLB_REG_TABLE_CMD_INDEX_LSB;
wire            cmd_plain = cmd_at_index == 32'd0;
wire            cmd_at = cmd_op == CMD_WRITE_AT || cmd_op == CMD_READ_AT;

assign cmd_write = (cmd_op == CMD_WRITE && cmd_plain) || cmd_op == CMD_WRITE_AT;
assign cmd_read = (cmd_op == CMD_READ && cmd_plain) || cmd_op == CMD_READ_AT;
assign cmd_index = cmd_at ? cmd_at_index : index_reg;

endmodule

`resetall
