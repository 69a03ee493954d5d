`resetall
`timescale 1ns / 1ps
`default_nettype none

// On-chip table memory behind an AXI4 slave port (read and write), the zero-latency case of
// the HBM ports of docs/pipeline.md section 14: ROWS words of DATA_W bits in block RAM, word i
// at byte address i << ROW_SHIFT (the address's other bits are ignored). A read burst returns
// its beats from consecutive words, the first three clocks after the request is taken, one beat
// per clock while rready is high; reads are taken while the output queue has room, so a
// stalled rready holds the port without losing a beat. A write burst stores each beat under its
// byte strobes as it arrives (words consecutive from awaddr); the response follows the last
// beat. One write at a time; reads and writes run side by side (a read of the word a write
// stores in the same clock returns the old word). Memory contents are not reset (they power up
// as the FPGA configures them: zero).
module nlb_mem_ram #(
    // Data width (bits, a multiple of 8).
    parameter DATA_W = 1536,
    // Words.
    parameter ROWS = 4096,
    // AXI address and id widths.
    parameter ADDR_W = 32,
    parameter ID_W = 6,
    // log2 of the bytes between two words' addresses.
    parameter ROW_SHIFT = 8
) (
    input  wire                clk,
    input  wire                rst,

    /* verilator lint_off UNUSEDSIGNAL */ // (bits above the word index and below ROW_SHIFT)
    input  wire [ADDR_W-1:0]   s_axi_araddr,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [ID_W-1:0]     s_axi_arid,
    input  wire [7:0]          s_axi_arlen,
    input  wire                s_axi_arvalid,
    output wire                s_axi_arready,
    output wire [DATA_W-1:0]   s_axi_rdata,
    output wire [ID_W-1:0]     s_axi_rid,
    output wire                s_axi_rlast,
    output wire                s_axi_rvalid,
    input  wire                s_axi_rready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ADDR_W-1:0]   s_axi_awaddr,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [ID_W-1:0]     s_axi_awid,
    /* verilator lint_off UNUSEDSIGNAL */ // (the burst ends with wlast)
    input  wire [7:0]          s_axi_awlen,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                s_axi_awvalid,
    output wire                s_axi_awready,
    input  wire [DATA_W-1:0]   s_axi_wdata,
    input  wire [DATA_W/8-1:0] s_axi_wstrb,
    input  wire                s_axi_wlast,
    input  wire                s_axi_wvalid,
    output wire                s_axi_wready,
    output wire [ID_W-1:0]     s_axi_bid,
    output wire                s_axi_bvalid,
    input  wire                s_axi_bready
);

localparam AW = $clog2(ROWS);
localparam BYTES = DATA_W / 8;

initial begin
    if (DATA_W % 8 != 0 || ROWS < 2 || (1 << AW) != ROWS || ROW_SHIFT + AW > ADDR_W) begin
        $error("nlb_mem_ram: DATA_W a multiple of 8, ROWS a power of two within the address");
        $finish;
    end
end

// The words, one memory per byte lane (byte-enable writes).

// ---- reads: a burst counter, the RAM, an output queue --------------------------------------

reg            rb_active_reg = 1'b0;
reg [AW-1:0]   rb_addr_reg = {AW{1'b0}};
reg [7:0]      rb_left_reg = 8'd0;
reg [ID_W-1:0] rb_id_reg = {ID_W{1'b0}};
// Beats in the RAM read and in the output queue.
reg            p_valid_reg = 1'b0;
reg [ID_W-1:0] p_id_reg = {ID_W{1'b0}};
reg            p_last_reg = 1'b0;
reg [DATA_W-1:0] p_data_reg = {DATA_W{1'b0}};
wire [4:0]     q_count;
wire           q_ready;

// A beat is read when the queue will have room for it (the beat in the RAM read counted).
wire room = q_count + {4'd0, p_valid_reg} < 5'd7;
wire rd_beat = rb_active_reg && room;
// A burst is taken when none runs or the running one reads its last beat now.
wire ar_ready = !rb_active_reg || (rd_beat && rb_left_reg == 8'd0);
assign s_axi_arready = ar_ready;

always @(posedge clk) begin
    p_valid_reg <= rd_beat;
    if (rd_beat) begin
        p_id_reg <= rb_id_reg;
        p_last_reg <= rb_left_reg == 8'd0;
        rb_addr_reg <= rb_addr_reg + 1'b1;
        rb_left_reg <= rb_left_reg - 8'd1;
        if (rb_left_reg == 8'd0) begin
            rb_active_reg <= 1'b0;
        end
    end
    if (s_axi_arvalid && ar_ready) begin
        rb_active_reg <= 1'b1;
        rb_addr_reg <= s_axi_araddr[ROW_SHIFT +: AW];
        rb_left_reg <= s_axi_arlen;
        rb_id_reg <= s_axi_arid;
    end
    if (rst) begin
        rb_active_reg <= 1'b0;
        p_valid_reg <= 1'b0;
    end
end

/* verilator lint_off PINCONNECTEMPTY */
nlb_fifo #(
    .WIDTH(DATA_W + ID_W + 1),
    .DEPTH(8)
) rq_inst (
    .clk(clk),
    .rst(rst),
    .s_data({p_last_reg, p_id_reg, p_data_reg}),
    .s_valid(p_valid_reg),
    .s_ready(q_ready),
    .m_data({s_axi_rlast, s_axi_rid, s_axi_rdata}),
    .m_valid(s_axi_rvalid),
    .m_ready(s_axi_rready),
    .count(q_count[3:0])
);
/* verilator lint_on PINCONNECTEMPTY */
assign q_count[4] = 1'b0;

// The queue never fills: a beat is read only with room for it.
/* verilator lint_off UNUSEDSIGNAL */
wire unused_q_ready = q_ready;
/* verilator lint_on UNUSEDSIGNAL */

// ---- writes --------------------------------------------------------------------------------

reg            aw_held_reg = 1'b0;
reg [AW-1:0]   wb_addr_reg = {AW{1'b0}};
reg [ID_W-1:0] wb_id_reg = {ID_W{1'b0}};
reg            b_valid_reg = 1'b0;

assign s_axi_awready = !aw_held_reg && !b_valid_reg;
assign s_axi_wready = aw_held_reg;
wire   w_beat = s_axi_wvalid && aw_held_reg;

genvar gb;
generate
    for (gb = 0; gb < BYTES; gb = gb + 1) begin : g_byte
        reg [7:0] mem [0:ROWS-1];
        always @(posedge clk) begin
            if (w_beat && s_axi_wstrb[gb]) begin
                mem[wb_addr_reg] <= s_axi_wdata[gb*8 +: 8];
            end
            if (rd_beat) begin
                p_data_reg[gb*8 +: 8] <= mem[rb_addr_reg];
            end
        end
    end
endgenerate

always @(posedge clk) begin
    if (s_axi_awvalid && s_axi_awready) begin
        aw_held_reg <= 1'b1;
        wb_addr_reg <= s_axi_awaddr[ROW_SHIFT +: AW];
        wb_id_reg <= s_axi_awid;
    end
    if (w_beat) begin
        wb_addr_reg <= wb_addr_reg + 1'b1;
        if (s_axi_wlast) begin
            aw_held_reg <= 1'b0;
            b_valid_reg <= 1'b1;
        end
    end
    if (b_valid_reg && s_axi_bready) begin
        b_valid_reg <= 1'b0;
    end
    if (rst) begin
        aw_held_reg <= 1'b0;
        b_valid_reg <= 1'b0;
    end
end

assign s_axi_bid = wb_id_reg;
assign s_axi_bvalid = b_valid_reg;

endmodule

`resetall
