`resetall
`timescale 1ns / 1ps
`default_nettype none

// The inject queue: frames the host DMA engine (nlb_host_dma) reads off the inject ring, held
// whole until the pipeline's inject port takes them (docs/pipeline.md section 15.2).
//
// The engine sends each frame as a beat carrying its inject header, then the frame's beats
// as host memory answers them; a frame whose read was refused comes with s_axis_terr on its
// last beat and is dropped here whole (the store-and-forward FIFO never offers a frame before
// its last beat is in). Out of the queue the header beat is taken off: its backend and pool
// go with every beat of the frame on m_axis_tuser, as the pipeline's inject port wants them.
//
// s_room tells the engine that a header beat and a frame of the largest size (9728 bytes)
// fit beside the s_pending beats it has promised already (frames it took and has not sent
// whole), so that once it takes a frame it never waits on the pipeline (which may itself be
// waiting for the engine to take a punted frame). It is registered: the engine takes a frame
// two clocks after its last promise at the earliest, when s_room has seen it.
module nlb_inject_queue #(
    // Beats of memory: a power of two, at least a largest frame and its header (154).
    parameter DEPTH = 512
) (
    clk,
    rst,
    s_axis_tdata,
    s_axis_tkeep,
    s_axis_tvalid,
    s_axis_tready,
    s_axis_tlast,
    s_axis_terr,
    s_room,
    s_pending,
    m_axis_tdata,
    m_axis_tkeep,
    m_axis_tvalid,
    m_axis_tready,
    m_axis_tlast,
    m_axis_tuser,
    m_drop
);

`include "nlb_regmap.vh"

localparam DW = 512;
localparam KW = 64;
localparam UW = NLB_INJECT_HEADER_POOL_LSB + NLB_INJECT_HEADER_POOL_W;
localparam LW = $clog2(DEPTH);
// A header beat and the beats of the largest frame.
localparam integer FRAME_BEATS = 1 + (NLB_DMA_FRAME_BYTES + 63) / 64;
localparam [LW:0] ROOM_LEVEL = DEPTH[LW:0] - FRAME_BEATS[LW:0];

input  wire          clk;
input  wire          rst;
input  wire [DW-1:0] s_axis_tdata;
input  wire [KW-1:0] s_axis_tkeep;
input  wire          s_axis_tvalid;
output wire          s_axis_tready;
input  wire          s_axis_tlast;
input  wire          s_axis_terr;
output wire          s_room;
input  wire [9:0]    s_pending;
output wire [DW-1:0] m_axis_tdata;
output wire [KW-1:0] m_axis_tkeep;
output wire          m_axis_tvalid;
input  wire          m_axis_tready;
output wire          m_axis_tlast;
output wire [UW-1:0] m_axis_tuser;
// One clock per frame dropped (its read refused).
output wire          m_drop;

initial begin
    if (DEPTH < FRAME_BEATS || (1 << LW) != DEPTH || DEPTH > 512) begin
        $error("nlb_inject_queue: DEPTH a power of two of %0d to 512 beats", FRAME_BEATS);
        $finish;
    end
end

wire [DW-1:0] q_tdata;
wire [KW-1:0] q_tkeep;
wire          q_tvalid;
wire          q_tready;
wire          q_tlast;
wire [LW:0]   level;

nlb_axis_frame_fifo #(
    .DATA_WIDTH(DW),
    .DEPTH(DEPTH),
    .DROP_WHEN_FULL(0)
) fifo_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_axis_tdata),
    .s_axis_tkeep(s_axis_tkeep),
    .s_axis_tvalid(s_axis_tvalid),
    .s_axis_tready(s_axis_tready),
    .s_axis_tlast(s_axis_tlast),
    .s_axis_tuser_err(s_axis_terr),
    .m_axis_tdata(q_tdata),
    .m_axis_tkeep(q_tkeep),
    .m_axis_tvalid(q_tvalid),
    .m_axis_tready(q_tready),
    .m_axis_tlast(q_tlast),
    .m_drop(m_drop),
    .level(level)
);

reg          room_reg = 1'b0;
// The beats held and those promised (not in the level until they are sent: from the clock
// they go in they are counted in the level and no longer promised).
wire [10:0]  promised = {{(10 - LW){1'b0}}, level} + {1'b0, s_pending};
// The frame at the head has had its header beat taken: its beats go out.
reg          in_frame_reg = 1'b0;
reg [UW-1:0] user_reg = {UW{1'b0}};

assign q_tready = in_frame_reg ? m_axis_tready : 1'b1;
assign m_axis_tdata = q_tdata;
assign m_axis_tkeep = q_tkeep;
assign m_axis_tvalid = q_tvalid && in_frame_reg;
assign m_axis_tlast = q_tlast;
assign m_axis_tuser = user_reg;
assign s_room = room_reg;

always @(posedge clk) begin
    room_reg <= promised <= {{(10 - LW){1'b0}}, ROOM_LEVEL};
    if (q_tvalid && q_tready) begin
        if (!in_frame_reg) begin
            user_reg <= q_tdata[UW-1:0];
            in_frame_reg <= 1'b1;
        end else if (q_tlast) begin
            in_frame_reg <= 1'b0;
        end
    end
    if (rst) begin
        room_reg <= 1'b0;
        in_frame_reg <= 1'b0;
    end
end

endmodule

`resetall
