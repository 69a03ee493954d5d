`resetall
`timescale 1ns / 1ps
`default_nettype none

// AXI4-Lite clock-domain crossing, one access at a time: the slave port (s_axil_*) on s_clk (the
// register clock), the master port (m_axil_*) on m_clk (the pipeline clock), any clock ratio.
//
// Built from two nlb_async_fifo (DEPTH 4): an access (kind, address, data, strobes) crosses in
// the request FIFO, its answer (kind, response, read data) comes back in the response FIFO.
// Every crossing is the FIFO's, whose proof (hw/formal/nlb_async_fifo_props.vh) covers any clock
// ratio, pauses and the reset rule; what is here is single-clock logic on each side. (A req/ack
// handshake with synchronised toggles would need its own crossing logic and proof, and would
// save only a few LUT-RAM words.) Register traffic is slow, so one access at a time: the slave
// side takes the next access only after the previous one's response was taken, and with a
// write and a read both waiting it alternates between them. A response can never be lost or
// doubled: each access sends exactly one request word and its response word is taken exactly
// once, into BVALID or RVALID, which are held until taken.
//
// Latency of an access: about SYNC_STAGES + 3 m_clk clocks to the master port, the slave's own
// time, then about SYNC_STAGES + 3 s_clk clocks back.
//
// AWREADY, WREADY and ARREADY come from registers (each channel has a holding register; AW and W
// may come in either order or together); BVALID/RVALID and their payload are registers.
//
// Reset (synchronous, active high, one per side): as nlb_async_fifo, s_rst and m_rst must be
// asserted together, both held until each side has had a clock edge after the other side's first
// reset edge, and released in any order. An access in flight at a reset is dropped; the master
// port's handshakes are abandoned (the slave behind it is reset with the same reset).
module nlb_axil_cdc #(
    // Address bits (as nlb_regs' AXIL_ADDR_WIDTH).
    parameter ADDR_WIDTH = 16,
    // Data bits (AXI4-Lite: 32 or 64).
    parameter DATA_WIDTH = 32,
    // Flops of each pointer synchroniser in the two FIFOs (>= 2).
    parameter SYNC_STAGES = 2
) (
    // Slave side: the register clock.
    input  wire                      s_clk,
    input  wire                      s_rst,
    input  wire [ADDR_WIDTH-1:0]     s_axil_awaddr,
    input  wire                      s_axil_awvalid,
    output wire                      s_axil_awready,
    input  wire [DATA_WIDTH-1:0]     s_axil_wdata,
    input  wire [DATA_WIDTH/8-1:0]   s_axil_wstrb,
    input  wire                      s_axil_wvalid,
    output wire                      s_axil_wready,
    output wire [1:0]                s_axil_bresp,
    output wire                      s_axil_bvalid,
    input  wire                      s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]     s_axil_araddr,
    input  wire                      s_axil_arvalid,
    output wire                      s_axil_arready,
    output wire [DATA_WIDTH-1:0]     s_axil_rdata,
    output wire [1:0]                s_axil_rresp,
    output wire                      s_axil_rvalid,
    input  wire                      s_axil_rready,

    // Master side: the pipeline clock.
    input  wire                      m_clk,
    input  wire                      m_rst,
    output wire [ADDR_WIDTH-1:0]     m_axil_awaddr,
    output wire                      m_axil_awvalid,
    input  wire                      m_axil_awready,
    output wire [DATA_WIDTH-1:0]     m_axil_wdata,
    output wire [DATA_WIDTH/8-1:0]   m_axil_wstrb,
    output wire                      m_axil_wvalid,
    input  wire                      m_axil_wready,
    input  wire [1:0]                m_axil_bresp,
    input  wire                      m_axil_bvalid,
    output wire                      m_axil_bready,
    output wire [ADDR_WIDTH-1:0]     m_axil_araddr,
    output wire                      m_axil_arvalid,
    input  wire                      m_axil_arready,
    input  wire [DATA_WIDTH-1:0]     m_axil_rdata,
    input  wire [1:0]                m_axil_rresp,
    input  wire                      m_axil_rvalid,
    output wire                      m_axil_rready
);

localparam STRB_WIDTH = DATA_WIDTH / 8;
// Request word: {write, address, data, strobes}; response word: {write, resp, read data}.
localparam REQ_WIDTH = 1 + ADDR_WIDTH + DATA_WIDTH + STRB_WIDTH;
localparam RESP_WIDTH = 1 + 2 + DATA_WIDTH;

initial begin
    if (DATA_WIDTH != 32 && DATA_WIDTH != 64) begin
        $error("nlb_axil_cdc: DATA_WIDTH (%0d) must be 32 or 64", DATA_WIDTH);
        $finish;
    end
end

// ---- the crossings --------------------------------------------------------------------------
wire [REQ_WIDTH-1:0]  req_s_data;
wire                  req_s_valid;
wire                  req_s_ready;
wire [REQ_WIDTH-1:0]  req_m_data;
wire                  req_m_valid;
wire                  req_m_ready;
wire [RESP_WIDTH-1:0] resp_s_data;
wire                  resp_s_valid;
wire                  resp_s_ready;
wire [RESP_WIDTH-1:0] resp_m_data;
wire                  resp_m_valid;
wire                  resp_m_ready;

// The fill levels are not needed: one access at a time never fills either FIFO.
/* verilator lint_off PINCONNECTEMPTY */
nlb_async_fifo #(
    .WIDTH(REQ_WIDTH),
    .DEPTH(4),
    .SYNC_STAGES(SYNC_STAGES)
) req_fifo_inst (
    .s_clk(s_clk),
    .s_rst(s_rst),
    .s_data(req_s_data),
    .s_valid(req_s_valid),
    .s_ready(req_s_ready),
    .s_level(),
    .m_clk(m_clk),
    .m_rst(m_rst),
    .m_data(req_m_data),
    .m_valid(req_m_valid),
    .m_ready(req_m_ready),
    .m_level()
);

nlb_async_fifo #(
    .WIDTH(RESP_WIDTH),
    .DEPTH(4),
    .SYNC_STAGES(SYNC_STAGES)
) resp_fifo_inst (
    .s_clk(m_clk),
    .s_rst(m_rst),
    .s_data(resp_s_data),
    .s_valid(resp_s_valid),
    .s_ready(resp_s_ready),
    .s_level(),
    .m_clk(s_clk),
    .m_rst(s_rst),
    .m_data(resp_m_data),
    .m_valid(resp_m_valid),
    .m_ready(resp_m_ready),
    .m_level()
);
/* verilator lint_on PINCONNECTEMPTY */

// ---- slave side (s_clk) ---------------------------------------------------------------------
reg                    aw_held_reg = 1'b0;
reg [ADDR_WIDTH-1:0]   awaddr_reg = {ADDR_WIDTH{1'b0}};
reg                    w_held_reg = 1'b0;
reg [DATA_WIDTH-1:0]   wdata_reg = {DATA_WIDTH{1'b0}};
reg [STRB_WIDTH-1:0]   wstrb_reg = {STRB_WIDTH{1'b0}};
reg                    ar_held_reg = 1'b0;
reg [ADDR_WIDTH-1:0]   araddr_reg = {ADDR_WIDTH{1'b0}};
// An access was sent and its response not yet taken by the master of s_axil.
reg                    busy_reg = 1'b0;
// With a write and a read both waiting, the read goes first if the last access was a write.
reg                    last_write_reg = 1'b0;
reg                    bvalid_reg = 1'b0;
reg                    rvalid_reg = 1'b0;
reg [1:0]              resp_reg = 2'b00;
reg [DATA_WIDTH-1:0]   rdata_reg = {DATA_WIDTH{1'b0}};

wire write_ready = aw_held_reg && w_held_reg;
wire send = !busy_reg && req_s_ready && (write_ready || ar_held_reg);
wire send_write = write_ready && !(ar_held_reg && last_write_reg);
wire resp_is_write = resp_m_data[RESP_WIDTH-1];

assign req_s_valid = send;
assign req_s_data = send_write ? {1'b1, awaddr_reg, wdata_reg, wstrb_reg}
                               : {1'b0, araddr_reg, {DATA_WIDTH{1'b0}}, {STRB_WIDTH{1'b0}}};
// One access at a time: its response word finds BVALID and RVALID low.
assign resp_m_ready = !bvalid_reg && !rvalid_reg;

always @(posedge s_clk) begin
    if (s_axil_awvalid && !aw_held_reg) begin
        aw_held_reg <= 1'b1;
        awaddr_reg <= s_axil_awaddr;
    end
    if (s_axil_wvalid && !w_held_reg) begin
        w_held_reg <= 1'b1;
        wdata_reg <= s_axil_wdata;
        wstrb_reg <= s_axil_wstrb;
    end
    if (s_axil_arvalid && !ar_held_reg) begin
        ar_held_reg <= 1'b1;
        araddr_reg <= s_axil_araddr;
    end
    if (send) begin
        busy_reg <= 1'b1;
        last_write_reg <= send_write;
        if (send_write) begin
            aw_held_reg <= 1'b0;
            w_held_reg <= 1'b0;
        end else begin
            ar_held_reg <= 1'b0;
        end
    end
    if (resp_m_valid && resp_m_ready) begin
        bvalid_reg <= resp_is_write;
        rvalid_reg <= !resp_is_write;
        resp_reg <= resp_m_data[DATA_WIDTH +: 2];
        rdata_reg <= resp_m_data[DATA_WIDTH-1:0];
    end
    if ((bvalid_reg && s_axil_bready) || (rvalid_reg && s_axil_rready)) begin
        bvalid_reg <= 1'b0;
        rvalid_reg <= 1'b0;
        busy_reg <= 1'b0;
    end
    if (s_rst) begin
        aw_held_reg <= 1'b0;
        w_held_reg <= 1'b0;
        ar_held_reg <= 1'b0;
        busy_reg <= 1'b0;
        last_write_reg <= 1'b0;
        bvalid_reg <= 1'b0;
        rvalid_reg <= 1'b0;
    end
end

assign s_axil_awready = !aw_held_reg;
assign s_axil_wready = !w_held_reg;
assign s_axil_arready = !ar_held_reg;
assign s_axil_bvalid = bvalid_reg;
assign s_axil_bresp = resp_reg;
assign s_axil_rvalid = rvalid_reg;
assign s_axil_rresp = resp_reg;
assign s_axil_rdata = rdata_reg;

// ---- master side (m_clk) --------------------------------------------------------------------
// An access taken from the request FIFO and not yet answered.
reg                    active_reg = 1'b0;
reg [ADDR_WIDTH-1:0]   addr_reg = {ADDR_WIDTH{1'b0}};
reg [DATA_WIDTH-1:0]   m_wdata_reg = {DATA_WIDTH{1'b0}};
reg [STRB_WIDTH-1:0]   m_wstrb_reg = {STRB_WIDTH{1'b0}};
reg                    awvalid_reg = 1'b0;
reg                    wvalid_reg = 1'b0;
reg                    arvalid_reg = 1'b0;
reg                    bready_reg = 1'b0;
reg                    rready_reg = 1'b0;

// The answer is taken only when the response FIFO has room (always: one access at a time).
wire b_take = m_axil_bvalid && bready_reg && resp_s_ready;
wire r_take = m_axil_rvalid && rready_reg && resp_s_ready;

assign req_m_ready = !active_reg;
assign resp_s_valid = b_take || r_take;
assign resp_s_data = b_take ? {1'b1, m_axil_bresp, {DATA_WIDTH{1'b0}}}
                            : {1'b0, m_axil_rresp, m_axil_rdata};

always @(posedge m_clk) begin
    if (awvalid_reg && m_axil_awready) begin
        awvalid_reg <= 1'b0;
    end
    if (wvalid_reg && m_axil_wready) begin
        wvalid_reg <= 1'b0;
    end
    if (arvalid_reg && m_axil_arready) begin
        arvalid_reg <= 1'b0;
    end
    if (b_take || r_take) begin
        active_reg <= 1'b0;
        bready_reg <= 1'b0;
        rready_reg <= 1'b0;
    end
    if (req_m_valid && !active_reg) begin
        active_reg <= 1'b1;
        addr_reg <= req_m_data[DATA_WIDTH + STRB_WIDTH +: ADDR_WIDTH];
        m_wdata_reg <= req_m_data[STRB_WIDTH +: DATA_WIDTH];
        m_wstrb_reg <= req_m_data[STRB_WIDTH-1:0];
        awvalid_reg <= req_m_data[REQ_WIDTH-1];
        wvalid_reg <= req_m_data[REQ_WIDTH-1];
        bready_reg <= req_m_data[REQ_WIDTH-1];
        arvalid_reg <= !req_m_data[REQ_WIDTH-1];
        rready_reg <= !req_m_data[REQ_WIDTH-1];
    end
    if (m_rst) begin
        active_reg <= 1'b0;
        awvalid_reg <= 1'b0;
        wvalid_reg <= 1'b0;
        arvalid_reg <= 1'b0;
        bready_reg <= 1'b0;
        rready_reg <= 1'b0;
    end
end

assign m_axil_awaddr = addr_reg;
assign m_axil_awvalid = awvalid_reg;
assign m_axil_wdata = m_wdata_reg;
assign m_axil_wstrb = m_wstrb_reg;
assign m_axil_wvalid = wvalid_reg;
assign m_axil_bready = bready_reg && resp_s_ready;
assign m_axil_araddr = addr_reg;
assign m_axil_arvalid = arvalid_reg;
assign m_axil_rready = rready_reg && resp_s_ready;

endmodule

`resetall
