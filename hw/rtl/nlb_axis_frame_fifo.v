`resetall
`timescale 1ns / 1ps
`default_nettype none

// Store-and-forward frame FIFO (one clock): a frame is offered on m_axis only once its last
// beat is in, so m_axis_tvalid never drops inside a frame (what a 100G MAC's transmit side and
// a receive path without tready both require), and a frame is kept or dropped whole.
//
// Writes are tentative until the frame's last beat: the write pointer runs ahead of a commit
// pointer, and the read side sees only committed beats. A frame is dropped whole (the write
// pointer goes back to the commit pointer, m_drop pulses once) when:
//   - its last beat carries s_axis_tuser_err (a frame the source marks bad);
//   - it is longer than DEPTH beats (it could never be offered);
//   - DROP_WHEN_FULL = 1 and a beat finds the memory full (an input without tready: a frame
//     that does not fit is lost whole, never cut).
// A dropped frame's remaining beats are taken and discarded up to its last beat.
//
// DROP_WHEN_FULL = 0: s_axis_tready is low while the memory is full (back-pressure), except that
// a frame filling the whole memory is dropped rather than waited for. DROP_WHEN_FULL = 1:
// s_axis_tready is always 1.
module nlb_axis_frame_fifo #(
    parameter DATA_WIDTH = 512,
    // Beats of memory (a power of two >= 4): at least the longest frame to be kept.
    parameter DEPTH = 512,
    parameter DROP_WHEN_FULL = 0
) (
    input  wire                      clk,
    input  wire                      rst,

    input  wire [DATA_WIDTH-1:0]     s_axis_tdata,
    input  wire [DATA_WIDTH/8-1:0]   s_axis_tkeep,
    input  wire                      s_axis_tvalid,
    output wire                      s_axis_tready,
    input  wire                      s_axis_tlast,
    // Read with the last beat: the frame is bad and is dropped.
    input  wire                      s_axis_tuser_err,

    output wire [DATA_WIDTH-1:0]     m_axis_tdata,
    output wire [DATA_WIDTH/8-1:0]   m_axis_tkeep,
    output wire                      m_axis_tvalid,
    input  wire                      m_axis_tready,
    output wire                      m_axis_tlast,

    // One clock per frame dropped whole.
    output wire                      m_drop,
    // Beats held (committed or not, the output register included).
    output wire [$clog2(DEPTH):0]    level
);

localparam KW = DATA_WIDTH / 8;
localparam AW = $clog2(DEPTH);
localparam W = 1 + KW + DATA_WIDTH;

initial begin
    if (DEPTH < 4 || (1 << AW) != DEPTH || (DROP_WHEN_FULL != 0 && DROP_WHEN_FULL != 1)) begin
        $error("nlb_axis_frame_fifo: DEPTH a power of two >= 4, DROP_WHEN_FULL 0 or 1");
        $finish;
    end
end

reg [W-1:0]  mem [0:DEPTH-1];
reg [AW:0]   wr_ptr_reg = {(AW+1){1'b0}};
reg [AW:0]   commit_ptr_reg = {(AW+1){1'b0}};
reg [AW:0]   rd_ptr_reg = {(AW+1){1'b0}};
// The rest of a dropped frame is being discarded.
reg          discard_reg = 1'b0;
reg [W-1:0]  out_reg = {W{1'b0}};
reg          out_valid_reg = 1'b0;
reg          drop_reg = 1'b0;

wire [AW:0] used = wr_ptr_reg - rd_ptr_reg;
wire [AW:0] open_beats = wr_ptr_reg - commit_ptr_reg;
wire full = used[AW];
// The frame being written already fills the memory: it can never be offered.
wire too_long = open_beats[AW];

assign s_axis_tready = DROP_WHEN_FULL != 0 || !full || too_long || discard_reg;

wire beat = s_axis_tvalid && s_axis_tready;
wire store = beat && !discard_reg && !full;
// The frame in progress is dropped with this beat.
wire drop_now = beat && !discard_reg && (full || (s_axis_tlast && s_axis_tuser_err));
wire commit = store && s_axis_tlast && !s_axis_tuser_err;

wire rd = rd_ptr_reg != commit_ptr_reg && (!out_valid_reg || m_axis_tready);
wire take = out_valid_reg && m_axis_tready;

always @(posedge clk) begin
    drop_reg <= 1'b0;
    if (store) begin
        mem[wr_ptr_reg[AW-1:0]] <= {s_axis_tlast, s_axis_tkeep, s_axis_tdata};
        wr_ptr_reg <= wr_ptr_reg + 1'b1;
    end
    if (commit) begin
        commit_ptr_reg <= wr_ptr_reg + 1'b1;
    end
    if (drop_now) begin
        wr_ptr_reg <= commit_ptr_reg;
        discard_reg <= !s_axis_tlast;
        drop_reg <= 1'b1;
    end else if (beat && discard_reg && s_axis_tlast) begin
        discard_reg <= 1'b0;
    end
    if (rd) begin
        out_reg <= mem[rd_ptr_reg[AW-1:0]];
        rd_ptr_reg <= rd_ptr_reg + 1'b1;
        out_valid_reg <= 1'b1;
    end else if (take) begin
        out_valid_reg <= 1'b0;
    end
    if (rst) begin
        wr_ptr_reg <= {(AW+1){1'b0}};
        commit_ptr_reg <= {(AW+1){1'b0}};
        rd_ptr_reg <= {(AW+1){1'b0}};
        discard_reg <= 1'b0;
        out_valid_reg <= 1'b0;
        drop_reg <= 1'b0;
    end
end

assign {m_axis_tlast, m_axis_tkeep, m_axis_tdata} = out_reg;
assign m_axis_tvalid = out_valid_reg;
assign m_drop = drop_reg;
assign level = used + {{AW{1'b0}}, out_valid_reg};

`ifdef FORMAL
// Formal properties over this module's registers (hw/scripts/formal.sh).
`include "nlb_axis_frame_fifo_props.vh"
`endif

endmodule

`resetall
