`resetall
`timescale 1ns / 1ps
`default_nettype none

// Dual-clock first-word-fall-through FIFO: words written in the s_clk domain are read in the
// m_clk domain, the two clocks unrelated (any ratio, either one may stop for a while).
//
// How it crosses: each side counts its words in a binary pointer (one bit more than the memory
// address) and keeps the Gray code of it in a register; only the Gray pointers cross, each
// through SYNC_STAGES flops (ASYNC_REG) of the other clock. A Gray pointer changes one bit per
// word, so a synchroniser that samples it mid-change sees the old or the new pointer, never a
// mix. Each side converts what it sees back to binary in a register and compares with its own
// pointer:
//   write side: s_level = words written - reads seen, an upper bound on the words in the
//               memory; s_ready (= !full) is registered and low exactly when s_level == DEPTH,
//               so a word is never written over one not yet read;
//   read side:  the memory is read only while the writes seen are ahead of the reads, into an
//               output register (m_valid/m_data registered, block RAM friendly); m_level =
//               writes seen - reads + the output register, a lower bound on the words held.
// Both bounds are conservative: a side learns of the other's progress SYNC_STAGES + 1 of its own
// clocks late (the synchroniser, then the binary conversion), never early. A word shows on
// m_valid SYNC_STAGES + 2 read clocks after the write clock that took it (with the output
// register free); room freed by a read shows on s_ready SYNC_STAGES + 2 write clocks later.
//
// Reset (synchronous, active high, one per domain): s_rst and m_rst must be applied together.
// Assert both at once, hold both until each side has had a clock edge after the other side's
// first reset edge (so that each side's synchronisers are cleared after the other's pointer went
// back to zero; in practice: one reset, synchronised into each domain, held for a few clocks of
// the slower one), then release them in either order. A reset clears the words held. Resetting
// one side while the other runs is not supported: the running side would see the other's
// pointer jump back to zero, several Gray bits at once, and could count words that are not
// there (or room that is not). The board layer resets every domain from one reset, so the FIFO
// has no reset synchroniser or busy handshake of its own (the proof assumes exactly this rule).
// Words offered in a clock with s_rst high are not taken.
module nlb_async_fifo #(
    // Word width in bits.
    parameter WIDTH = 32,
    // Words in the memory (a power of two >= 4); the read side's output register holds one more.
    parameter DEPTH = 16,
    // Flops of each pointer synchroniser (>= 2; 3 for clocks far above 300 MHz or an MTBF margin).
    parameter SYNC_STAGES = 2
) (
    // Write side.
    input  wire                   s_clk,
    input  wire                   s_rst,
    input  wire [WIDTH-1:0]       s_data,
    input  wire                   s_valid,
    output wire                   s_ready,
    // Words in the memory as the write side knows (an upper bound).
    output wire [$clog2(DEPTH):0] s_level,

    // Read side.
    input  wire                   m_clk,
    input  wire                   m_rst,
    output wire [WIDTH-1:0]       m_data,
    output wire                   m_valid,
    input  wire                   m_ready,
    // Words held (memory and output register) as the read side knows (a lower bound).
    output wire [$clog2(DEPTH):0] m_level
);

localparam AW = $clog2(DEPTH);
localparam PW = AW + 1;
// DEPTH as a pointer difference.
localparam [PW-1:0] FULL_LEVEL = {1'b1, {AW{1'b0}}};

initial begin
    if (DEPTH < 4 || (1 << AW) != DEPTH) begin
        $error("nlb_async_fifo: DEPTH (%0d) must be a power of two >= 4", DEPTH);
        $finish;
    end
    if (SYNC_STAGES < 2) begin
        $error("nlb_async_fifo: SYNC_STAGES (%0d) must be >= 2", SYNC_STAGES);
        $finish;
    end
end

function [PW-1:0] to_gray(input [PW-1:0] b);
    to_gray = b ^ (b >> 1);
endfunction

function [PW-1:0] from_gray(input [PW-1:0] g);
    integer i;
    begin
        from_gray[PW-1] = g[PW-1];
        for (i = PW - 2; i >= 0; i = i - 1) begin
            from_gray[i] = from_gray[i + 1] ^ g[i];
        end
    end
endfunction

reg [WIDTH-1:0] mem [0:DEPTH-1];

// ---- write side (s_clk) ---------------------------------------------------------------------
reg [PW-1:0] wr_bin_reg = {PW{1'b0}};
reg [PW-1:0] wr_gray_reg = {PW{1'b0}};
// The read pointer as the write side sees it: SYNC_STAGES Gray stages, then binary.
(* ASYNC_REG = "TRUE" *) reg [PW*SYNC_STAGES-1:0] rd_sync_reg = {(PW*SYNC_STAGES){1'b0}};
reg [PW-1:0] rd_seen_reg = {PW{1'b0}};
reg          full_reg = 1'b0;
reg [PW-1:0] s_level_reg = {PW{1'b0}};

wire          wr = s_valid && !full_reg;
wire [PW-1:0] wr_bin_next = wr_bin_reg + {{AW{1'b0}}, wr};
// The read pointer of the previous clock (conservative: a read seen now frees room next clock).
wire [PW-1:0] s_level_next = wr_bin_next - rd_seen_reg;

// ---- read side (m_clk) ----------------------------------------------------------------------
reg [PW-1:0]    rd_bin_reg = {PW{1'b0}};
reg [PW-1:0]    rd_gray_reg = {PW{1'b0}};
(* ASYNC_REG = "TRUE" *) reg [PW*SYNC_STAGES-1:0] wr_sync_reg = {(PW*SYNC_STAGES){1'b0}};
reg [PW-1:0]    wr_seen_reg = {PW{1'b0}};
reg [WIDTH-1:0] out_reg = {WIDTH{1'b0}};
reg             out_valid_reg = 1'b0;
reg [PW-1:0]    m_level_reg = {PW{1'b0}};

// Words in the memory the read side knows of (registers only).
wire          mem_empty = wr_seen_reg == rd_bin_reg;
// Refill the output register when it is empty or being taken.
wire          rd = !mem_empty && (!out_valid_reg || m_ready);
wire          out_valid_next = rd || (out_valid_reg && !m_ready);
wire [PW-1:0] rd_bin_next = rd_bin_reg + {{AW{1'b0}}, rd};
wire [PW-1:0] wr_seen_next = from_gray(wr_sync_reg[PW*SYNC_STAGES-1 -: PW]);
wire [PW-1:0] m_level_next = wr_seen_next - rd_bin_next + {{AW{1'b0}}, out_valid_next};

// What the first synchroniser flop of each side samples. In the formal proof each bit may be
// caught before or after a change in the same instant (hw/formal/nlb_async_fifo_props.vh);
// in hardware and simulation it is the Gray register itself.
`ifdef FORMAL
(* anyseq *) reg [PW-1:0] f_wr_skew;
(* anyseq *) reg [PW-1:0] f_rd_skew;
reg [PW-1:0] f_wr_gray_last = {PW{1'b0}};
reg [PW-1:0] f_rd_gray_last = {PW{1'b0}};
wire [PW-1:0] wr_gray_cross = (wr_gray_reg & ~f_wr_skew) | (f_wr_gray_last & f_wr_skew);
wire [PW-1:0] rd_gray_cross = (rd_gray_reg & ~f_rd_skew) | (f_rd_gray_last & f_rd_skew);
`else
wire [PW-1:0] wr_gray_cross = wr_gray_reg;
wire [PW-1:0] rd_gray_cross = rd_gray_reg;
`endif

always @(posedge s_clk) begin
    if (wr) begin
        mem[wr_bin_reg[AW-1:0]] <= s_data;
    end
    wr_bin_reg <= wr_bin_next;
    wr_gray_reg <= to_gray(wr_bin_next);
    rd_sync_reg <= {rd_sync_reg[PW*(SYNC_STAGES-1)-1:0], rd_gray_cross};
    rd_seen_reg <= from_gray(rd_sync_reg[PW*SYNC_STAGES-1 -: PW]);
    s_level_reg <= s_level_next;
    full_reg <= s_level_next == FULL_LEVEL;
    if (s_rst) begin
        wr_bin_reg <= {PW{1'b0}};
        wr_gray_reg <= {PW{1'b0}};
        rd_sync_reg <= {(PW*SYNC_STAGES){1'b0}};
        rd_seen_reg <= {PW{1'b0}};
        s_level_reg <= {PW{1'b0}};
        full_reg <= 1'b0;
    end
end

always @(posedge m_clk) begin
    if (rd) begin
        out_reg <= mem[rd_bin_reg[AW-1:0]];
    end
    rd_bin_reg <= rd_bin_next;
    rd_gray_reg <= to_gray(rd_bin_next);
    wr_sync_reg <= {wr_sync_reg[PW*(SYNC_STAGES-1)-1:0], wr_gray_cross};
    wr_seen_reg <= wr_seen_next;
    out_valid_reg <= out_valid_next;
    m_level_reg <= m_level_next;
    if (m_rst) begin
        rd_bin_reg <= {PW{1'b0}};
        rd_gray_reg <= {PW{1'b0}};
        wr_sync_reg <= {(PW*SYNC_STAGES){1'b0}};
        wr_seen_reg <= {PW{1'b0}};
        out_valid_reg <= 1'b0;
        m_level_reg <= {PW{1'b0}};
    end
end

assign s_ready = !full_reg;
assign s_level = s_level_reg;
assign m_data = out_reg;
assign m_valid = out_valid_reg;
assign m_level = m_level_reg;

`ifdef FORMAL
// Formal properties over this module's registers (hw/scripts/formal.sh).
`include "nlb_async_fifo_props.vh"
`endif

endmodule

`resetall
