`resetall
`timescale 1ns / 1ps
`default_nettype none

// The connection table's register block (docs/regmap.md "conntrack", one bank: connections
// outlive table loads) and hit bits. The table itself sits behind the lookup's connection-table
// memory stage (nlb_lookup, nlb_mem_stage; docs/pipeline.md section 14): this block's commands
// reach it through the stage's command port (ct_c_*: one entry read and one written at a time,
// the write acknowledged once the memory has it), the pipeline sets hit bits; the host reaches
// the block through nlb_regs' extension bus.
//
// Register behaviour (as the golden model's device):
// - index, data[0..31]: read/write (byte strobes honoured); status: bit 1 error.
// - cmd bits 7..0 name the command, bits 31..8 the entry of WRITE_AT/READ_AT (WRITE and READ
//   take the index register and need bits 31..8 zero; the *_AT forms leave their index in it).
//   WRITE: the entry = data words 0..11 is written (bits past the entry width ignored), the
//   valid count following the old entry's valid bit -> the new one; the data words 0..11 then
//   hold the entry as stored (bits past the width 0, as a READ leaves them), later words
//   untouched. An index beyond the table or an unknown command sets error and changes nothing;
//   a good command clears it. A command is acknowledged (AXI write response) once it is done, a
//   WRITE once every packet leaving the table's stage sees it (its write took the stage's
//   record, on its way to memory); a read of any register of the block is answered only after
//   every write before it is in memory.
// - hit_read: returns and clears the hit bits of entries index & ~31 .. +31 (0 beyond the
//   table); count: valid entries.
// Memory contents are not reset (the FPGA configures them to zero; a reboot reconfigures).
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_conntrack (
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
    ct_c_wr_req,
    ct_c_wr_index,
    ct_c_wr_entry,
    ct_c_wr_ack,
    ct_c_wr_take,
    ct_c_rd_req,
    ct_c_rd_index,
    ct_c_rd_ack,
    ct_c_rd_entry,
    hit_set_en,
    hit_set_index,
    learn_added,
    mon_hit_read
);

`include "nlb_regmap.vh"

// Buckets (a power of two).
parameter CT_BUCKETS = NLB_PROFILE_SIM_CT_BUCKETS;
// Ways per bucket (a power of two, >= 1).
parameter CT_WAYS = NLB_PROFILE_SIM_CT_WAYS;

localparam ROW_BITS = $clog2(CT_BUCKETS);
localparam WAY_BITS = $clog2(CT_WAYS);
localparam INDEX_BITS = ROW_BITS + WAY_BITS;
localparam ENTRIES = CT_BUCKETS * CT_WAYS;
localparam HIT_ROWS = ENTRIES / 32;
localparam W = NLB_CT_ENTRY_WIDTH;
localparam DATA_WORDS = NLB_REG_CONNTRACK_DATA_COUNT;
localparam DATA_WORD_BITS = $clog2(DATA_WORDS);
localparam ENTRY_WORDS = NLB_CT_ENTRY_WORDS;
localparam [31:0] DATA_BASE = NLB_REG_CONNTRACK_DATA;

initial begin
    if ((1 << ROW_BITS) != CT_BUCKETS || (1 << WAY_BITS) != CT_WAYS || ENTRIES < 64) begin
        $error("nlb_conntrack: CT_BUCKETS and CT_WAYS must be powers of two, >= 64 entries");
        $finish;
    end
    if (ENTRIES > (1 << NLB_REG_CONNTRACK_CMD_INDEX_W)) begin
        $error("nlb_conntrack: the cmd index field addresses at most 2^%0d entries",
            NLB_REG_CONNTRACK_CMD_INDEX_W);
        $finish;
    end
    if ((1 << DATA_WORD_BITS) != DATA_WORDS || DATA_BASE % (4 * DATA_WORDS) != 0) begin
        $error("nlb_conntrack: the data window must be 2^n words, aligned to its size");
        $finish;
    end
end

input  wire                      clk;
input  wire                      rst;

// Extension bus from nlb_regs (absolute byte addresses of this block; one access at a time
// per direction; *_ack pulses when it is done).
input  wire                      ext_wr_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]               ext_wr_addr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [31:0]               ext_wr_data;
input  wire [3:0]                ext_wr_strb;
output wire                      ext_wr_ack;
input  wire                      ext_rd_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]               ext_rd_addr;
/* verilator lint_on UNUSEDSIGNAL */
output wire [31:0]               ext_rd_data;
output wire                      ext_rd_ack;

// The table, through the lookup's connection-table stage: one request at a time.
output wire                      ct_c_wr_req;
output wire [INDEX_BITS-1:0]     ct_c_wr_index;
output wire [W-1:0]              ct_c_wr_entry;
input  wire                      ct_c_wr_ack;
// The write took the stage's write record: every packet leaving the stage from now on sees it.
input  wire                      ct_c_wr_take;
output wire                      ct_c_rd_req;
output wire [INDEX_BITS-1:0]     ct_c_rd_index;
input  wire                      ct_c_rd_ack;
input  wire [W-1:0]              ct_c_rd_entry;
// Pipeline: set a hit bit.
input  wire                      hit_set_en;
input  wire [INDEX_BITS-1:0]     hit_set_index;
// The pipeline installed a connection in a free way (hardware learning): one more valid entry.
input  wire                      learn_added;
// Observation (nlb_top's m_mon_hit_read): a hit_read reads and clears its row in this clock.
output wire                      mon_hit_read;

function [31:0] strobed(input [31:0] old, input [31:0] value, input [3:0] strb);
    integer i;
    begin
        for (i = 0; i < 4; i = i + 1) begin
            strobed[i*8 +: 8] = strb[i] ? value[i*8 +: 8] : old[i*8 +: 8];
        end
    end
endfunction

// ---- registers ----------------------------------------------------------------------------

reg [31:0]              index_reg = 32'd0, index_next;
reg                     error_reg = 1'b0, error_next;
reg [DATA_WORDS*32-1:0] data_reg = {DATA_WORDS*32{1'b0}}, data_next;
reg [31:0]              count_reg = 32'd0, count_next;
// A WRITE's change of the valid count, applied a clock after the old entry is seen (its valid
// bit comes through the memory's read path; the 32-bit add behind it was one clock too deep).
// The command answers at least two clocks later, so a read of `count` after it sees the change.
reg                     count_up_reg = 1'b0, count_up_next;
reg                     count_down_reg = 1'b0, count_down_next;

// Command engine. A READ reads the entry into the data words. A WRITE needs the old entry's
// valid bit (for the valid count), then posts its write: the stage latches the entry and index
// in the clock of the request, and the command is acknowledged once the write took the stage's
// write record (from then on every packet leaving the stage sees the new entry, §14.3 of
// docs/pipeline.md), while the write goes on to memory (wo_*). Reads of this block wait until
// no write is out (below), so a read after a command sees it done, as a PCIe read flushes the
// writes before it.
//
// The old entry is read ahead when the index register is written (the command ring writes a
// record's index before its data words): by the WRITE of that index its old entry is in and the
// command costs no memory round trip. A result so read ahead (ob_*) stands for the entry unless
// a write of the same index went out after the read did (the write's valid bit stands then), or
// the pipeline installed a connection meanwhile (the result is dropped and read again).
// One memory read at a time (ct_c_rd_*), one write at a time (ct_c_wr_*).
localparam [2:0] E_IDLE = 3'd0;
localparam [2:0] E_OLD = 3'd1;    // a WRITE: waiting for its old entry
localparam [2:0] E_POST = 3'd2;   // a WRITE: old entry known, waiting for the write port
localparam [2:0] E_READ = 3'd3;   // a READ: waiting for the port, then for its entry
localparam [2:0] E_TAKE = 3'd4;   // a WRITE posted: waiting for it to take the write record

localparam [1:0] OB_NONE = 2'd0;
localparam [1:0] OB_OUT = 2'd1;   // the old-entry read is out
localparam [1:0] OB_HELD = 2'd2;  // its result is held

reg [2:0]               eng_reg = E_IDLE, eng_next;
reg                     rd_req_reg = 1'b0, rd_req_next;
reg [INDEX_BITS-1:0]    rd_index_reg = {INDEX_BITS{1'b0}}, rd_index_next;
reg                     wr_req_reg = 1'b0, wr_req_next;
reg                     wr_ack_reg = 1'b0, wr_ack_next;
// The read out is a READ's (else the old-entry reader's).
reg                     rd_read_reg = 1'b0, rd_read_next;
// The old-entry reader: its index, state, result; a write of its index posted since its read
// went out (and that write's valid bit); an install by the pipeline since.
reg [1:0]               ob_reg = OB_NONE, ob_next;
reg [INDEX_BITS-1:0]    ob_index_reg = {INDEX_BITS{1'b0}}, ob_index_next;
reg                     ob_valid_reg = 1'b0, ob_valid_next;
reg                     ob_fix_reg = 1'b0, ob_fix_next;
reg                     ob_fix_valid_reg = 1'b0, ob_fix_valid_next;
reg                     ob_stale_reg = 1'b0, ob_stale_next;
// The WRITE's old valid bit, once known.
reg                     old_valid_reg = 1'b0, old_valid_next;
// The posted write: out until the stage acknowledges it; its index and valid bit.
reg                     wo_reg = 1'b0, wo_next;
reg [INDEX_BITS-1:0]    wo_index_reg = {INDEX_BITS{1'b0}}, wo_index_next;
reg                     wo_valid_reg = 1'b0, wo_valid_next;

wire [W-1:0] new_entry = data_reg[W-1:0];
wire         new_valid = new_entry[NLB_CT_ENTRY_VALID_LSB];
wire         ack_valid = ct_c_rd_entry[NLB_CT_ENTRY_VALID_LSB];

// An extension-bus write decoded as a cmd: its command, and the entry it addresses.
wire [31:0] cmd_word = strobed(32'd0, ext_wr_data, ext_wr_strb);
wire        cmd_write;
wire        cmd_read;
wire [31:0] cmd_index;

nlb_table_cmd cmd_inst (
    .cmd_word(cmd_word),
    .index_reg(index_reg),
    .cmd_write(cmd_write),
    .cmd_read(cmd_read),
    .cmd_index(cmd_index)
);
wire        cmd_index_ok = cmd_index < ENTRIES;


// A write is taken at its request and acted on a clock later, decoded: the decode and the
// index compare in front of the engine's next state were 13 levels in nlb_top. (index_reg does
// not change in between: only a write acted on changes it, and the next request waits for its
// ack.)
reg         x_req_reg = 1'b0;
reg  [31:2] x_addr_reg = 30'd0;
reg  [31:0] x_data_reg = 32'd0;
reg  [3:0]  x_strb_reg = 4'd0;
reg         x_cmd_write_reg = 1'b0;
reg         x_cmd_read_reg = 1'b0;
reg  [31:0] x_cmd_index_reg = 32'd0;
reg         x_cmd_index_ok_reg = 1'b0;
// An index write's value, and whether it names an entry (the read ahead's).
reg  [31:0] x_index_val_reg = 32'd0;
reg         x_index_ok_reg = 1'b0;
wire [31:0] index_written = strobed(index_reg, ext_wr_data, ext_wr_strb);
always @(posedge clk) begin
    x_req_reg <= ext_wr_req;
    if (ext_wr_req) begin
        x_addr_reg <= ext_wr_addr[31:2];
        x_data_reg <= ext_wr_data;
        x_strb_reg <= ext_wr_strb;
        x_cmd_write_reg <= cmd_write;
        x_cmd_read_reg <= cmd_read;
        x_cmd_index_reg <= cmd_index;
        x_cmd_index_ok_reg <= cmd_index_ok;
        x_index_val_reg <= index_written;
        x_index_ok_reg <= index_written < ENTRIES;
    end
    if (rst) begin
        x_req_reg <= 1'b0;
    end
end

wire        wr_in_data = x_addr_reg[31:DATA_WORD_BITS+2] == DATA_BASE[31:DATA_WORD_BITS+2];
wire [DATA_WORD_BITS-1:0] wr_word = x_addr_reg[DATA_WORD_BITS+1:2];
wire [31:0] wr_addr_w = {x_addr_reg, 2'b00};
wire [INDEX_BITS-1:0] index_now = index_reg[INDEX_BITS-1:0];

integer    dw;

// Start the old-entry reader on `at` (the port is free).
task ob_start(input [INDEX_BITS-1:0] at);
    begin
        rd_req_next = 1'b1;
        rd_index_next = at;
        rd_read_next = 1'b0;
        ob_next = OB_OUT;
        ob_index_next = at;
        ob_stale_next = 1'b0;
        // A write of this index still out may land before or after the read.
        ob_fix_next = wo_reg && wo_index_reg == at;
        ob_fix_valid_next = wo_valid_reg;
    end
endtask

always @* begin
    index_next = index_reg;
    error_next = error_reg;
    data_next = data_reg;
    count_up_next = 1'b0;
    count_down_next = 1'b0;
    count_next = count_reg + (count_up_reg ? 32'd1 : 32'd0) + (learn_added ? 32'd1 : 32'd0)
        - (count_down_reg ? 32'd1 : 32'd0);
    eng_next = eng_reg;
    rd_req_next = 1'b0;
    rd_index_next = rd_index_reg;
    rd_read_next = rd_read_reg;
    wr_req_next = 1'b0;
    wr_ack_next = 1'b0;
    ob_next = ob_reg;
    ob_index_next = ob_index_reg;
    ob_valid_next = ob_valid_reg;
    ob_fix_next = ob_fix_reg;
    ob_fix_valid_next = ob_fix_valid_reg;
    ob_stale_next = ob_stale_reg || learn_added;
    old_valid_next = old_valid_reg;
    wo_next = wo_reg && !ct_c_wr_ack;
    wo_index_next = wo_index_reg;
    wo_valid_next = wo_valid_reg;

    // Memory answers.
    if (ct_c_rd_ack && !rd_read_reg) begin
        ob_next = OB_HELD;
        ob_valid_next = ack_valid;
    end

    case (eng_reg)
        E_OLD: begin
            // The held result if it is this index's and still stands; else read it (once the
            // read out, if any, is in).
            if (ob_reg == OB_HELD && ob_index_reg == index_now && !ob_stale_reg) begin
                old_valid_next = ob_fix_reg ? ob_fix_valid_reg : ob_valid_reg;
                ob_next = OB_NONE;
                eng_next = E_POST;
            end else if (ob_reg != OB_OUT && !ct_c_rd_ack) begin
                ob_start(index_now);
            end
        end
        E_POST: begin
            // The write goes out once the one before is in; the data words then hold the
            // entry as stored (bits past its width 0).
            if (!wo_reg) begin
                wr_req_next = 1'b1;
                wo_next = 1'b1;
                wo_index_next = index_now;
                wo_valid_next = new_valid;
                count_down_next = old_valid_reg && !new_valid;
                count_up_next = !old_valid_reg && new_valid;
                if (ob_reg != OB_NONE && ob_index_reg == index_now) begin
                    ob_fix_next = 1'b1;
                    ob_fix_valid_next = new_valid;
                end
                data_next[ENTRY_WORDS*32-1:0] = {{(ENTRY_WORDS*32-W){1'b0}}, new_entry};
                eng_next = E_TAKE;
            end
        end
        E_TAKE: begin
            if (ct_c_wr_take) begin
                wr_ack_next = 1'b1;
                eng_next = E_IDLE;
            end
        end
        E_READ: begin
            // After every write out (the read sees them) and the reader's read.
            if (rd_read_reg) begin
                if (ct_c_rd_ack) begin
                    data_next[ENTRY_WORDS*32-1:0] = {{(ENTRY_WORDS*32-W){1'b0}}, ct_c_rd_entry};
                    rd_read_next = 1'b0;
                    wr_ack_next = 1'b1;
                    eng_next = E_IDLE;
                end
            end else if (!wo_reg && ob_reg != OB_OUT) begin
                rd_req_next = 1'b1;
                rd_index_next = index_now;
                rd_read_next = 1'b1;
            end
        end
        default: begin
        end
    endcase

    if (x_req_reg) begin
        case (wr_addr_w)
            NLB_REG_CONNTRACK_INDEX: begin
                index_next = x_index_val_reg;
                wr_ack_next = 1'b1;
                // Read the entry's old state ahead of a WRITE (the port free: nothing out).
                if (x_index_ok_reg && ob_reg != OB_OUT && !ct_c_rd_ack) begin
                    ob_start(x_index_val_reg[INDEX_BITS-1:0]);
                end
            end
            NLB_REG_CONNTRACK_CMD: begin
                // A command acts only on a write of all four bytes (the regmap's rule for
                // partial writes); any other is acknowledged and changes nothing.
                if (!(&x_strb_reg)) begin
                    wr_ack_next = 1'b1;
                end else if (x_cmd_index_ok_reg && (x_cmd_write_reg || x_cmd_read_reg)) begin
                    error_next = 1'b0;
                    index_next = x_cmd_index_reg;
                    eng_next = x_cmd_write_reg ? E_OLD : E_READ;
                end else begin
                    error_next = 1'b1;
                    wr_ack_next = 1'b1;
                end
            end
            default: begin
                for (dw = 0; dw < DATA_WORDS; dw = dw + 1) begin
                    if (wr_in_data && wr_word == dw[DATA_WORD_BITS-1:0]) begin
                        data_next[dw*32 +: 32] = strobed(data_reg[dw*32 +: 32], x_data_reg,
                            x_strb_reg);
                    end
                end
                wr_ack_next = 1'b1;
            end
        endcase
    end
end

always @(posedge clk) begin
    index_reg <= index_next;
    error_reg <= error_next;
    data_reg <= data_next;
    count_reg <= count_next;
    count_up_reg <= count_up_next;
    count_down_reg <= count_down_next;
    eng_reg <= eng_next;
    rd_req_reg <= rd_req_next;
    rd_index_reg <= rd_index_next;
    rd_read_reg <= rd_read_next;
    wr_req_reg <= wr_req_next;
    wr_ack_reg <= wr_ack_next;
    ob_reg <= ob_next;
    ob_index_reg <= ob_index_next;
    ob_valid_reg <= ob_valid_next;
    ob_fix_reg <= ob_fix_next;
    ob_fix_valid_reg <= ob_fix_valid_next;
    ob_stale_reg <= ob_stale_next;
    old_valid_reg <= old_valid_next;
    wo_reg <= wo_next;
    wo_index_reg <= wo_index_next;
    wo_valid_reg <= wo_valid_next;
    if (rst) begin
        index_reg <= 32'd0;
        error_reg <= 1'b0;
        data_reg <= {DATA_WORDS*32{1'b0}};
        count_reg <= 32'd0;
        count_up_reg <= 1'b0;
        count_down_reg <= 1'b0;
        eng_reg <= E_IDLE;
        rd_req_reg <= 1'b0;
        rd_read_reg <= 1'b0;
        wr_req_reg <= 1'b0;
        wr_ack_reg <= 1'b0;
        ob_reg <= OB_NONE;
        wo_reg <= 1'b0;
    end
end

assign ext_wr_ack = wr_ack_reg;

// ---- reads --------------------------------------------------------------------------------

// A read is taken at its request and answered once no command is running and no write is out
// (so it sees every command before it done).
reg         rq_reg = 1'b0;
reg  [31:2] rq_addr_reg = 30'd0;
wire        rd_free = eng_reg == E_IDLE && !wo_reg;

wire        rd_in_data = rq_addr_reg[31:DATA_WORD_BITS+2] == DATA_BASE[31:DATA_WORD_BITS+2];
wire [DATA_WORD_BITS-1:0] rd_word = rq_addr_reg[DATA_WORD_BITS+1:2];
wire [31:0] rd_addr_w = {rq_addr_reg, 2'b00};
wire        rd_go = rq_reg && rd_free;
wire        rd_hits = rd_go && rd_addr_w == NLB_REG_CONNTRACK_HIT_READ;

reg         rd_ack_reg = 1'b0;
reg [31:0]  rd_data_reg = 32'd0;
reg         hit_wait_reg = 1'b0;
reg [31:0]  rd_value;
integer     rw;

wire        hit_valid;
wire [31:0] hit_data;

// status: busy always reads 0 (a read waits until the commands before it are done).
reg [31:0] status_word;
always @* begin
    status_word = 32'd0;
    status_word[NLB_REG_CONNTRACK_STATUS_ERROR_LSB] = error_reg;
end

always @* begin
    rd_value = 32'd0;
    case (rd_addr_w)
        NLB_REG_CONNTRACK_INDEX:  rd_value = index_reg;
        NLB_REG_CONNTRACK_STATUS: rd_value = status_word;
        NLB_REG_CONNTRACK_COUNT:  rd_value = count_reg;
        default: begin
            for (rw = 0; rw < DATA_WORDS; rw = rw + 1) begin
                if (rd_in_data && rd_word == rw[DATA_WORD_BITS-1:0]) begin
                    rd_value = data_reg[rw*32 +: 32];
                end
            end
        end
    endcase
end

// hit_read beyond the table: no row to clear, reads 0.
wire hit_in_range = index_reg < ENTRIES;

always @(posedge clk) begin
    rd_ack_reg <= 1'b0;
    if (ext_rd_req) begin
        rq_reg <= 1'b1;
        rq_addr_reg <= ext_rd_addr[31:2];
    end
    if (rd_go) begin
        rq_reg <= 1'b0;
        if (rd_hits && hit_in_range) begin
            hit_wait_reg <= 1'b1;
        end else begin
            rd_ack_reg <= 1'b1;
            rd_data_reg <= rd_hits ? 32'd0 : rd_value;
        end
    end
    if (hit_wait_reg && hit_valid) begin
        hit_wait_reg <= 1'b0;
        rd_ack_reg <= 1'b1;
        rd_data_reg <= hit_data;
    end
    if (rst) begin
        rq_reg <= 1'b0;
        rd_ack_reg <= 1'b0;
        hit_wait_reg <= 1'b0;
    end
end

assign ext_rd_ack = rd_ack_reg;
assign ext_rd_data = rd_data_reg;

// ---- memories -----------------------------------------------------------------------------

assign ct_c_rd_req = rd_req_reg;
assign ct_c_rd_index = rd_index_reg;
assign ct_c_wr_req = wr_req_reg;
assign ct_c_wr_index = index_reg[INDEX_BITS-1:0];
assign ct_c_wr_entry = new_entry;

wire hit_read_en = rd_hits && hit_in_range;
assign mon_hit_read = hit_read_en;

nlb_hit_bits #(
    .ROWS(HIT_ROWS)
) hit_inst (
    .clk(clk),
    .rst(rst),
    .set_en(hit_set_en),
    .set_index(hit_set_index),
    .rc_en(hit_read_en),
    .rc_row(index_reg[INDEX_BITS-1:5]),
    .rc_valid(hit_valid),
    .rc_data(hit_data)
);


endmodule

`resetall
