`resetall
`timescale 1ns / 1ps
`default_nettype none

// AXI-Stream register slice with a skid buffer: every output, s_axis_tready included, comes
// straight from a register, so it cuts all combinational paths between the two sides at full
// throughput (one beat per clock) and one clock of latency.
//
// s_axis_tready is registered, so when the sink stalls the source may already be presenting the
// next beat; that beat is caught in the skid register and sent first when the sink resumes.
module nlb_axis_skid #(
    // tdata width in bits.
    parameter DATA_WIDTH = 512,
    // tkeep width: one bit per byte of tdata.
    parameter KEEP_WIDTH = (DATA_WIDTH + 7) / 8,
    // tuser width in bits (>= 1; tie to zero when unused).
    parameter USER_WIDTH = 1
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire                  s_axis_tvalid,
    output wire                  s_axis_tready,
    input  wire                  s_axis_tlast,
    input  wire [USER_WIDTH-1:0] s_axis_tuser,

    output wire [DATA_WIDTH-1:0] m_axis_tdata,
    output wire [KEEP_WIDTH-1:0] m_axis_tkeep,
    output wire                  m_axis_tvalid,
    input  wire                  m_axis_tready,
    output wire                  m_axis_tlast,
    output wire [USER_WIDTH-1:0] m_axis_tuser
);

// One beat: {tuser, tlast, tkeep, tdata}.
localparam BEAT_WIDTH = DATA_WIDTH + KEEP_WIDTH + 1 + USER_WIDTH;

initial begin
    if (DATA_WIDTH < 1 || KEEP_WIDTH < 1 || USER_WIDTH < 1) begin
        $error("nlb_axis_skid: DATA_WIDTH, KEEP_WIDTH and USER_WIDTH must be at least 1");
        $finish;
    end
end

wire [BEAT_WIDTH-1:0] s_beat = {s_axis_tuser, s_axis_tlast, s_axis_tkeep, s_axis_tdata};

// Output register and skid register; datapath is not reset, only the valid flags.
reg [BEAT_WIDTH-1:0] out_beat_reg = {BEAT_WIDTH{1'b0}};
reg [BEAT_WIDTH-1:0] skid_beat_reg = {BEAT_WIDTH{1'b0}};
reg                  out_valid_reg = 1'b0, out_valid_next;
reg                  skid_valid_reg = 1'b0, skid_valid_next;
reg                  s_ready_reg = 1'b0;
wire                 s_ready_next;

reg load_out_from_input;
reg load_out_from_skid;
reg load_skid_from_input;

// Ready for the next clock when the skid register stays empty: it is empty now and either the
// output moves on, or the output register is free, or nothing arrives this clock.
assign s_ready_next = m_axis_tready || (!skid_valid_reg && (!out_valid_reg || !s_axis_tvalid));

always @* begin
    out_valid_next = out_valid_reg;
    skid_valid_next = skid_valid_reg;
    load_out_from_input = 1'b0;
    load_out_from_skid = 1'b0;
    load_skid_from_input = 1'b0;

    if (s_ready_reg) begin
        // The skid register is empty: the input beat goes to the output register if it is free
        // or draining this clock, otherwise it is caught in the skid register.
        if (m_axis_tready || !out_valid_reg) begin
            out_valid_next = s_axis_tvalid;
            load_out_from_input = 1'b1;
        end else begin
            skid_valid_next = s_axis_tvalid;
            load_skid_from_input = 1'b1;
        end
    end else if (m_axis_tready) begin
        // Input is held off; the skid beat moves to the output.
        out_valid_next = skid_valid_reg;
        skid_valid_next = 1'b0;
        load_out_from_skid = 1'b1;
    end
end

always @(posedge clk) begin
    out_valid_reg <= out_valid_next;
    skid_valid_reg <= skid_valid_next;
    s_ready_reg <= s_ready_next;

    if (load_out_from_input) begin
        out_beat_reg <= s_beat;
    end else if (load_out_from_skid) begin
        out_beat_reg <= skid_beat_reg;
    end
    if (load_skid_from_input) begin
        skid_beat_reg <= s_beat;
    end

    if (rst) begin
        out_valid_reg <= 1'b0;
        skid_valid_reg <= 1'b0;
        s_ready_reg <= 1'b0;
    end
end

assign s_axis_tready = s_ready_reg;
assign {m_axis_tuser, m_axis_tlast, m_axis_tkeep, m_axis_tdata} = out_beat_reg;
assign m_axis_tvalid = out_valid_reg;

`ifdef FORMAL
// Formal properties over this module's registers (hw/scripts/formal.sh).
`include "nlb_axis_skid_props.vh"
`endif

endmodule

`resetall
