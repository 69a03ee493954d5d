`resetall
`timescale 1ns / 1ps
`default_nettype none

// One reset for several clock domains, as the clock-domain crossings ask (nlb_async_fifo:
// every side reset together, held until each has seen the other reset, released in any
// order). A reset request on the control clock (req_rst_n low for at least one clock, or the
// configuration of the device) holds `rst_req` for HOLD control clocks; each domain takes it
// through SYNC_STAGES flops of its own clock (ASYNC_REG) into its synchronous, active-high
// `rst[i]`. `done` rises SETTLE control clocks after `rst_req` fell, once every domain whose
// clock is at least as fast as the control clock has left reset.
//
// A domain's reset therefore lasts about HOLD control clocks in its own clock, so all domains
// are in reset together for most of it, whatever their clocks.
module nlb_reset_sync #(
    // Clock domains reset (each has its bit of clk and rst).
    parameter DOMAINS = 2,
    // Control clocks the request is held for (>= 4).
    parameter HOLD = 64,
    // Control clocks from the end of the request to `done`.
    parameter SETTLE = 8,
    parameter SYNC_STAGES = 3
) (
    // Control clock and its request (active low, synchronous to ctrl_clk).
    input  wire               ctrl_clk,
    input  wire               req_rst_n,
    // High once the reset is over.
    output wire               done,

    input  wire [DOMAINS-1:0] clk,
    output wire [DOMAINS-1:0] rst
);

localparam HW = $clog2(HOLD + SETTLE + 1);

initial begin
    if (HOLD < 4 || SYNC_STAGES < 2 || DOMAINS < 1) begin
        $error("nlb_reset_sync: HOLD >= 4, SYNC_STAGES >= 2, DOMAINS >= 1");
        $finish;
    end
end

// Counts down from HOLD + SETTLE after a request (and after configuration).
reg [HW-1:0] count_reg = HOLD[HW-1:0] + SETTLE[HW-1:0];
reg          rst_req_reg = 1'b1;
reg          done_reg = 1'b0;

always @(posedge ctrl_clk) begin
    if (!req_rst_n) begin
        count_reg <= HOLD[HW-1:0] + SETTLE[HW-1:0];
        rst_req_reg <= 1'b1;
        done_reg <= 1'b0;
    end else begin
        if (count_reg != {HW{1'b0}}) begin
            count_reg <= count_reg - 1'b1;
        end
        rst_req_reg <= count_reg > SETTLE[HW-1:0];
        done_reg <= count_reg == {HW{1'b0}};
    end
end

assign done = done_reg;

genvar i;
generate
    for (i = 0; i < DOMAINS; i = i + 1) begin : domain
        (* ASYNC_REG = "TRUE" *) reg [SYNC_STAGES-1:0] sync_reg = {SYNC_STAGES{1'b1}};
        always @(posedge clk[i]) begin
            sync_reg <= {sync_reg[SYNC_STAGES-2:0], rst_req_reg};
        end
        assign rst[i] = sync_reg[SYNC_STAGES-1];
    end
endgenerate

endmodule

`resetall
