`resetall
`timescale 1ns / 1ps
`default_nettype none

// Whole-frame admission on a stream without back-pressure (docs/pipeline.md section 14.4):
// every beat offered is consumed; a frame is admitted or dropped at its first beat, by `room`
// in that clock, and every later beat of the frame follows the first (m_pass for an admitted
// frame's beats, none for a dropped one's). Combinational but for the frame state.
module nlb_rx_drop (
    input  wire clk,
    input  wire rst,

    // A beat of the stream this clock, and whether it ends its frame.
    input  wire s_valid,
    input  wire s_last,
    // The frame starting with this beat may be admitted (looked at on first beats only).
    input  wire room,

    // This beat goes on (its frame was admitted).
    output wire m_pass,
    // This beat starts a frame.
    output wire m_first,
    // This beat starts a frame that is dropped.
    output wire m_drop_first,
    // This beat belongs to a dropped frame.
    output wire m_dropping
);

reg first_reg = 1'b1;     // the next beat starts a frame
reg dropping_reg = 1'b0;  // the frame in progress is dropped

assign m_first = s_valid && first_reg;
assign m_dropping = s_valid && (first_reg ? !room : dropping_reg);
assign m_drop_first = m_first && !room;
assign m_pass = s_valid && !m_dropping;

always @(posedge clk) begin
    if (s_valid) begin
        first_reg <= s_last;
        if (first_reg) begin
            dropping_reg <= !room;
        end
    end
    if (rst) begin
        first_reg <= 1'b1;
        dropping_reg <= 1'b0;
    end
end

`ifdef FORMAL
// Formal properties: frames whole or not at all (hw/scripts/formal.sh).
`include "nlb_rx_drop_props.vh"
`endif

endmodule

`resetall
