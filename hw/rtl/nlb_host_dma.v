`resetall
`timescale 1ns / 1ps
`default_nettype none

// The host DMA engine (the dma block of docs/regmap.md, docs/pipeline.md section 15): the
// punt and event rings in host memory, carried by an AXI4 master toward the shell's PCIe
// DMA or bridge (a 512-bit AXI4 slave whose addresses are IOVAs, as OpenNIC's QDMA bridge
// and Corundum's DMA interface give them).
//
// What it does, per record, as the golden model's HostDma (firmware-sim/src/dma.rs) does:
// - an event (one learn_event beat from the pipeline's event queue): when the event ring is
//   in use (ctrl.enable, event_size.enable, a base set), one 64-byte write of the
//   event_record into slot dev mod size, if the host gave the NIC a slot (host != dev);
//   else the event is dropped and counted in the ring's drops;
// - a punted frame (punt header beat + the frame's first 9728 bytes): the punt descriptor
//   of slot dev is read (its 64-byte line, kept: a descriptor the host had posted when its
//   line was read is taken from it instead of being read again), the frame written into the
//   buffer it names (at most its len bytes and 9728; the buffer's IOVA must be 64-byte
//   aligned, else the slot fails with BAD_ENTRY), then the punt_cpl written over the slot;
//   no slot: dropped and counted;
// - the device's index moves only when the record's writes were all answered OKAY; a
//   refused transfer (BRESP/RRESP not OKAY) counts in faults and in the ring's errors
//   (DMA_FAULT, the slot), and the record is lost. A punt's completion is not waited for:
//   the next record starts meanwhile (a next punt in the slot after, its completion held
//   until the answer is in); a refused completion loses that next punt too (docs/
//   pipeline.md section 15.1);
// - the ring_wb record of every ring whose state changed is written to wb + 16 x ring when
//   the engine has nothing else to do, or after 16 completions without one;
// - interrupts (irq, one clock per MSI-X message, vector = ring): after a write-back, when
//   the ring's completions since its last interrupt reached irq.count (0 counts as 1); or
//   irq.usecs microseconds after the first of them.
// A record for a ring not in use goes out unchanged on m_punt / m_event (the register
// queues of the debugging path). The pipeline sees back-pressure only while a record is
// being written; an event that finds the event queue full is dropped there (s_event_dropped)
// and, while the event ring is in use, counted in its drops.
//
// - an injected frame (the inject ring, host to device): while the host has posted a
//   descriptor the engine has not taken (host != ii, the ring's next index to take) and the
//   inject queue behind m_inject has room for the largest frame beyond the beats already
//   promised to it (inject_pending), the descriptor of slot ii is read (its 64-byte line),
//   then the frame: its lines read in bursts within 4 KiB. A frame longer than 9728 bytes is
//   dropped and counted (drops); a frame address not 64-byte aligned fails the slot
//   (BAD_ENTRY); a refused read (DMA_FAULT) marks the frame's last beat m_inject_terr, so the
//   queue drops it whole. Either way the slot is consumed and dev moves on (the host may
//   reuse its buffer once dev passes it: the frame is in the NIC by then).
//   A descriptor line holds four slots: the line is kept, and a descriptor the host had
//   posted when its line was read is taken from it instead of being read again.
//   Frames overlap: once a frame's reads are issued the engine goes on to its next record,
//   and the receiver below sends each frame on as its lines come back (in order: one AXI
//   id), behind one beat that carries the descriptor's inject header. Up to IQ descriptors
//   are in flight, each a record in the receiver's queue; the receiver completes them in
//   ring order (dev moves by one per record), so a frame costs about its beats, not a read
//   round trip. A descriptor line is read only with no frame in flight (the line's answer
//   would queue behind their lines), and so is a punt's.
// Records of the pipeline (events, punts) and injected frames take turns, so neither starves.
//
// The command ring is run beside it (nlb_cmd_ring, which nlb_top gives the cmd_* registers):
// caps.rings reads 4 with CMD_RING = 1, else 3 and its registers read 0. That engine takes
// dma.ctrl.enable and dma.wb from here (dma_enable, dma_wb) and counts its refused transfers
// in dma.faults (s_cmd_fault).
//
// The engine never writes outside a slot the host gave it (slot dev mod size while
// dev != host), never beyond the buffer a punt slot names, and its index never passes the
// host's (hw/formal/nlb_host_dma_props.vh).
//
// Ports are declared in the body (Verilog-2001 style) because their widths come from the
// regmap header, which has to be included inside the module.
module nlb_host_dma (
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
    s_punt_tdata,
    s_punt_tkeep,
    s_punt_tvalid,
    s_punt_tready,
    s_punt_tlast,
    m_punt_tdata,
    m_punt_tkeep,
    m_punt_tvalid,
    m_punt_tready,
    m_punt_tlast,
    s_event_tdata,
    s_event_tvalid,
    s_event_tready,
    s_event_dropped,
    s_event_install,
    hw_learn,
    host_time,
    m_event_tdata,
    m_event_tvalid,
    m_event_tready,
    inject_room,
    inject_pending,
    m_inject_tdata,
    m_inject_tkeep,
    m_inject_tvalid,
    m_inject_tready,
    m_inject_tlast,
    m_inject_terr,
    m_axi_awaddr,
    m_axi_awlen,
    m_axi_awsize,
    m_axi_awburst,
    m_axi_awvalid,
    m_axi_awready,
    m_axi_wdata,
    m_axi_wstrb,
    m_axi_wlast,
    m_axi_wvalid,
    m_axi_wready,
    m_axi_bresp,
    m_axi_bvalid,
    m_axi_bready,
    m_axi_araddr,
    m_axi_arlen,
    m_axi_arsize,
    m_axi_arburst,
    m_axi_arvalid,
    m_axi_arready,
    m_axi_rdata,
    m_axi_rresp,
    m_axi_rlast,
    m_axi_rvalid,
    m_axi_rready,
    irq,
    dma_enable,
    dma_wb,
    s_cmd_fault
);

`include "nlb_regmap.vh"

// Clocks per microsecond (interrupt timers): 322 at the 100G MAC's clock.
parameter CLK_PER_US = 322;
// Completions after which the write-back goes out even while records keep coming.
parameter WB_EVERY = 16;
// The command ring runs beside this engine (nlb_cmd_ring): caps.rings = 4.
parameter CMD_RING = 0;
// Hardware learning in the pipeline (caps.hw_learn; ctrl.hw_learn is stored only with it).
parameter HW_LEARN = 0;
// Inject descriptors in flight at most (a power of two, at least 2): the receiver's records.
parameter INJECT_IN_FLIGHT = 4;

localparam [15:0] US_DIV = CLK_PER_US;
localparam [7:0]  WB_N = WB_EVERY;
localparam [3:0]  MAX_LOG2 = NLB_DMA_MAX_LOG2;
localparam [3:0]  RINGS_N = CMD_RING != 0 ? 4'd4 : 4'd3;
// The rings' indices in the arrays below (their ring enumeration values).
localparam [1:0]  RP = NLB_RING_PUNT;
localparam [1:0]  RE = NLB_RING_EVENT;
localparam [1:0]  RI = NLB_RING_INJECT;
localparam DW = 512;
localparam KW = 64;
localparam EW = 384;
localparam RINGS = 3;
// The inject header bits the inject stream's first beat carries (backend, pool, frame_len).
localparam IHW = NLB_INJECT_HEADER_WIDTH;

input  wire          clk;
input  wire          rst;
// Extension bus (absolute byte addresses of this block; one access at a time per direction).
input  wire          ext_wr_req;
/* verilator lint_off UNUSEDSIGNAL */ // (bits 1..0: registers are words)
input  wire [31:0]   ext_wr_addr;
/* verilator lint_on UNUSEDSIGNAL */
input  wire [31:0]   ext_wr_data;
input  wire [3:0]    ext_wr_strb;
output wire          ext_wr_ack;
input  wire          ext_rd_req;
/* verilator lint_off UNUSEDSIGNAL */
input  wire [31:0]   ext_rd_addr;
/* verilator lint_on UNUSEDSIGNAL */
output wire [31:0]   ext_rd_data;
output wire          ext_rd_ack;
// Punt stream from the pipeline (header beat, then the frame).
input  wire [DW-1:0] s_punt_tdata;
input  wire [KW-1:0] s_punt_tkeep;
input  wire          s_punt_tvalid;
output wire          s_punt_tready;
input  wire          s_punt_tlast;
// Punt records for the register queues (the punt ring not in use).
output wire [DW-1:0] m_punt_tdata;
output wire [KW-1:0] m_punt_tkeep;
output wire          m_punt_tvalid;
input  wire          m_punt_tready;
output wire          m_punt_tlast;
// Events from the pipeline's event queue; s_event_dropped: one dropped there (queue full).
input  wire [EW-1:0] s_event_tdata;
input  wire          s_event_tvalid;
output wire          s_event_tready;
input  wire          s_event_dropped;
// With each event: whether the NIC installed its connection, and where (the event record's
// `installed` and `ct_index`, from bit NLB_EVENT_RECORD_INSTALLED_LSB).
input  wire [NLB_EVENT_RECORD_WIDTH-NLB_EVENT_RECORD_INSTALLED_LSB-1:0] s_event_install;
// ctrl.hw_learn and host_time, for the pipeline.
output wire          hw_learn;
output wire [31:0]   host_time;
output wire [EW-1:0] m_event_tdata;
output wire          m_event_tvalid;
input  wire          m_event_tready;
// Injected frames toward the inject queue (nlb_inject_queue): a beat whose low IHW bits are
// the inject header, then the frame's beats; m_inject_terr with the last: drop the frame.
// inject_room: the queue has room for a header beat and a frame of 9728 bytes beyond the
// inject_pending beats the engine has promised it (frames taken and not yet sent whole), as
// seen a clock ago: the engine takes a frame only two clocks after the last one's promise.
input  wire          inject_room;
output wire [9:0]    inject_pending;
output wire [DW-1:0] m_inject_tdata;
output wire [KW-1:0] m_inject_tkeep;
output wire          m_inject_tvalid;
input  wire          m_inject_tready;
output wire          m_inject_tlast;
output wire          m_inject_terr;
// AXI4 master toward host memory (one id, 64-byte beats, INCR bursts within 4 KiB).
output wire [63:0]   m_axi_awaddr;
output wire [7:0]    m_axi_awlen;
output wire [2:0]    m_axi_awsize;
output wire [1:0]    m_axi_awburst;
output wire          m_axi_awvalid;
input  wire          m_axi_awready;
output wire [DW-1:0] m_axi_wdata;
output wire [KW-1:0] m_axi_wstrb;
output wire          m_axi_wlast;
output wire          m_axi_wvalid;
input  wire          m_axi_wready;
input  wire [1:0]    m_axi_bresp;
input  wire          m_axi_bvalid;
output wire          m_axi_bready;
output wire [63:0]   m_axi_araddr;
output wire [7:0]    m_axi_arlen;
output wire [2:0]    m_axi_arsize;
output wire [1:0]    m_axi_arburst;
output wire          m_axi_arvalid;
input  wire          m_axi_arready;
input  wire [DW-1:0] m_axi_rdata;
input  wire [1:0]    m_axi_rresp;
/* verilator lint_off UNUSEDSIGNAL */ // (beats are counted: rlast is not needed)
input  wire          m_axi_rlast;
/* verilator lint_on UNUSEDSIGNAL */
input  wire          m_axi_rvalid;
output wire          m_axi_rready;
// MSI-X requests: bit r pulses for one clock per message of vector r.
output wire [NLB_RING_COUNT-1:0] irq;
// For the command ring's engine: dma.ctrl.enable, dma.wb; a refused transfer of its own.
output wire          dma_enable;
output wire [63:0]   dma_wb;
input  wire          s_cmd_fault;

// ---- registers ----------------------------------------------------------------------------

localparam [31:0] RING_STRIDE = NLB_REG_DMA_EVENT_BASE_LO - NLB_REG_DMA_PUNT_BASE_LO;
localparam [31:0] FRAME_MAX = NLB_DMA_FRAME_BYTES;

reg        enable_reg = 1'b0;
reg        hw_learn_reg = 1'b0;
reg [31:0] host_time_reg = 32'd0;
reg [63:0] wb_reg = 64'd0;
reg [31:0] faults_reg = 32'd0;
// The command ring's refused transfers, counted apart (dma.faults reads the sum).
reg [31:0] cmd_faults_reg = 32'd0;

reg [63:0] base_reg [0:RINGS-1];
reg        base_nz_reg [0:RINGS-1];
reg [3:0]  log2_reg [0:RINGS-1];
reg        ren_reg [0:RINGS-1];
reg [15:0] host_reg [0:RINGS-1];
reg [15:0] dev_reg [0:RINGS-1];
reg [31:0] drops_reg [0:RINGS-1];
reg [31:0] errors_reg [0:RINGS-1];
reg [15:0] err_slot_reg [0:RINGS-1];
reg [7:0]  err_code_reg [0:RINGS-1];
reg [31:0] irq_cfg_reg [0:RINGS-1];
reg [15:0] pending_reg [0:RINGS-1];
reg [15:0] elapsed_reg [0:RINGS-1];
reg        dirty_reg [0:RINGS-1];

integer r;
initial begin
    for (r = 0; r < RINGS; r = r + 1) begin
        base_reg[r] = 64'd0;
        base_nz_reg[r] = 1'b0;
        log2_reg[r] = 4'd0;
        ren_reg[r] = 1'b0;
        host_reg[r] = 16'd0;
        dev_reg[r] = 16'd0;
        drops_reg[r] = 32'd0;
        errors_reg[r] = 32'd0;
        err_slot_reg[r] = 16'd0;
        err_code_reg[r] = 8'd0;
        irq_cfg_reg[r] = 32'd0;
        pending_reg[r] = 16'd0;
        elapsed_reg[r] = 16'd0;
        dirty_reg[r] = 1'b0;
    end
end

// A register word with the write's byte strobes applied.
function [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
    integer b;
    begin
        for (b = 0; b < 4; b = b + 1) begin
            merge[8*b +: 8] = strb[b] ? data[8*b +: 8] : old[8*b +: 8];
        end
    end
endfunction

wire [31:0] wr_word = {ext_wr_addr[31:2], 2'b00};
wire [31:0] rd_word = {ext_rd_addr[31:2], 2'b00};

// Ring r's register of offset `reg0` (the punt ring's) for a word address.
function is_ring_reg(input [31:0] a, input [31:0] reg0, input integer ring);
    is_ring_reg = a == reg0 + RING_STRIDE * ring;
endfunction

// ---- the ring state every record needs ----------------------------------------------------

`include "nlb_ring_mask.vh"

// base_nz_reg: the ring's base is not 0, kept with each write of the base (a 64-bit compare
// in front of every decision of the engine was three levels of its longest paths).
wire usable_punt = enable_reg && ren_reg[RP] && base_nz_reg[RP];
wire usable_event = enable_reg && ren_reg[RE] && base_nz_reg[RE];
// The punt ring's next record takes index pn_reg: dev, or dev + 1 while the completion of the
// punt before is on its way (cb_wait_reg).
wire [15:0] avail_punt = host_reg[RP] - pn_reg;
wire [15:0] avail_event = host_reg[RE] - dev_reg[RE];
wire [15:0] slot_punt = pn_reg & ring_mask(log2_reg[RP]);
wire [15:0] slot_event = dev_reg[RE] & ring_mask(log2_reg[RE]);
wire usable_inject = enable_reg && ren_reg[RI] && base_nz_reg[RI];
// The inject ring's next descriptor to take is ii_reg (dev + the records in flight).
wire [15:0] avail_inject = host_reg[RI] - ii_reg;
wire [15:0] slot_inject = ii_reg & ring_mask(log2_reg[RI]);
wire [15:0] ic_dev_off = ii_reg - ic_first_reg;
wire [15:0] pl_dev_off = pn_reg - pl_first_reg;

`include "nlb_inc_if.vh"

// A ring slot's IOVA, base + slot x 64, in two halves: the low 22 bits (a slot's offset spans
// at most 22) are summed a clock ahead into a register, from registers (`lo`, its carry in
// bit 22); the high 42 bits of the base only take that carry. The engine takes a record only
// while the sums ahead are fresh (lo_fresh_reg: nothing they depend on changed last clock).
/* verilator lint_off UNUSEDSIGNAL */ // (base's low bits are in lo; inc_if's top bits unused)
function [63:0] slot_iova(input [63:0] base, input [22:0] lo);
    reg [63:0] hi;
    begin
        hi = inc_if({22'd0, base[63:22]}, lo[22]);
        slot_iova = {hi[41:0], lo[21:0]};
    end
endfunction

// The IOVA 64 bytes on (a beat's): its bits above the beat's offset incremented.
function [63:0] next_beat(input [63:0] a);
    reg [63:0] hi;
    begin
        hi = inc_if({6'd0, a[63:6]}, 1'b1);
        next_beat = {hi[57:0], a[5:0]};
    end
endfunction

// The next 4 KiB boundary above a (a's page number incremented).
function [63:0] next_4k(input [63:0] a);
    reg [63:0] hi;
    begin
        hi = inc_if({12'd0, a[63:12]}, 1'b1);
        next_4k = {hi[51:0], 12'd0};
    end
endfunction
/* verilator lint_on UNUSEDSIGNAL */

// ---- the engine ---------------------------------------------------------------------------

localparam [4:0] S_IDLE = 5'd0,
                 S_EV_W = 5'd1,    // event: AW and W out
                 S_EV_B = 5'd2,    // event: its response
                 S_P_R = 5'd4,     // punt: descriptor
                 S_P_AW = 5'd5,    // punt: a burst's address
                 S_P_W = 5'd6,     // punt: the burst's beats, from the stream
                 S_P_REST = 5'd7,  // punt: the rest of the frame dropped, responses awaited
                 S_P_CW = 5'd8,    // punt: the completion's AW and W (its response awaited
                                   // beside the next record: cb_wait_reg)
                 S_DISCARD = 5'd10,// punt: the frame dropped (no slot, a failed slot)
                 S_WB_W = 5'd11,   // write-back: AW and W
                 S_WB_B = 5'd12,   // write-back: its response
                 S_I_DEC = 5'd3,   // inject: the descriptor decoded, its record queued
                 S_I_R = 5'd13,    // inject: descriptor
                 S_I_AR = 5'd15,   // inject: the frame's reads issued
                 S_P_HIT = 5'd16,  // punt: descriptor from the kept line
                 S_P_DEC = 5'd17;  // punt: the descriptor decoded

reg [4:0]  state_reg = S_IDLE;
// The punt stream: inside a record (after its header beat), and that record's route.
reg        p_in_rec_reg = 1'b0;
reg        p_pass_reg = 1'b0;
reg        p_last_seen_reg = 1'b0;
reg [NLB_PUNT_HEADER_WIDTH-1:0] p_hdr_reg = {NLB_PUNT_HEADER_WIDTH{1'b0}};
reg [15:0] p_slot_reg = 16'd0;
reg [63:0] p_addr_reg = 64'd0;      // the next beat's IOVA
reg [13:0] p_n_reg = 14'd0;         // bytes written (min(frame, buffer, 9728))
reg [8:0]  p_beats_reg = 9'd0;      // beats left to write
reg [6:0]  p_burst_reg = 7'd0;      // beats left in this burst
reg [6:0]  p_last_bytes_reg = 7'd0; // bytes of the last beat (1..64)
reg [15:0] e_slot_reg = 16'd0;
// The inject descriptor being taken (p_slot_reg, p_addr_reg and p_beats_reg serve it too:
// its slot, the next line to read, lines left to request).
reg [127:0] i_desc_reg = 128'd0;
// The inject ring's last descriptor line read (four slots), and which indices it holds that
// the host had posted when it was read: [ic_first_reg, ic_hi_reg) within the line. The host
// never rewrites a descriptor it posted until the NIC consumed it, so those may be used from
// here instead of being read again (a PCIe round trip per frame saved for three in four).
reg [DW-1:0] ic_line_reg = {DW{1'b0}};
reg        ic_valid_reg = 1'b0;
reg [15:0] ic_first_reg = 16'd0;
reg [15:0] ic_hi_reg = 16'd0;
// dev's descriptor is in the cached line, a clock ahead like the slot sums (lo_fresh_reg).
reg        ic_hit_reg = 1'b0;
// The punt ring's last descriptor line, kept as the inject ring's is ([pl_first_reg,
// pl_hi_reg): the slots the host had posted when it was read), and the descriptor of the punt
// in flight, from the line read or the kept one.
reg [DW-1:0] pl_line_reg = {DW{1'b0}};
reg        pl_valid_reg = 1'b0;
reg [15:0] pl_first_reg = 16'd0;
reg [15:0] pl_hi_reg = 16'd0;
reg        pl_hit_reg = 1'b0;
reg [127:0] p_desc_reg = 128'd0;
// ---- the inject ring's records in flight, and the receiver that sends their frames on ----
// The records the engine took from the inject ring and the receiver has not completed, in
// ring order: ii_reg = dev + the records queued. A record is a frame (its reads issued or
// being issued), or a descriptor that fails or drops with nothing read: it completes in its
// turn, so dev moves in ring order and only past slots whose frames are whole in the NIC.
localparam IQ = INJECT_IN_FLIGHT;
localparam IQW = $clog2(IQ);
localparam [1:0] K_FRAME = 2'd0,    // a frame: header beat, then its lines as they come
                 K_DROP = 2'd1,     // frame_len above 9728: dropped and counted
                 K_BAD = 2'd2,      // a frame address not 64-byte aligned: BAD_ENTRY
                 K_FAULT = 2'd3;    // the descriptor's read refused: DMA_FAULT
reg [1:0]  rq_kind [0:IQ-1];
reg [IHW-1:0] rq_hdr [0:IQ-1];
reg [15:0] rq_slot [0:IQ-1];
reg [IQW:0] rq_wr_reg = {(IQW+1){1'b0}};
reg [IQW:0] rq_rd_reg = {(IQW+1){1'b0}};
reg [15:0] ii_reg = 16'd0;
// Beats promised to the inject queue and not yet sent: a taken frame's header and lines.
reg [9:0]  i_pend_reg = 10'd0;
integer q;
initial begin
    if (IQ < 2 || (1 << IQW) != IQ) begin
        $error("nlb_host_dma: INJECT_IN_FLIGHT a power of two of at least 2");
        $finish;
    end
    for (q = 0; q < IQ; q = q + 1) begin
        rq_kind[q] = K_FRAME;
        rq_hdr[q] = {IHW{1'b0}};
        rq_slot[q] = 16'd0;
    end
end
wire [IQW:0] rq_count = rq_wr_reg - rq_rd_reg;
wire         rq_empty = rq_count == {(IQW+1){1'b0}};
wire         rq_full = rq_count[IQW];
wire [IQW-1:0] rq_head = rq_rd_reg[IQW-1:0];
// The receiver: idle, the head frame's header beat out, its beats out.
localparam [1:0] RX_IDLE = 2'd0, RX_H = 2'd1, RX_D = 2'd2;
reg [1:0]  rx_state_reg = RX_IDLE;
reg [IHW-1:0] i_hdr_reg = {IHW{1'b0}};
reg [15:0] i_slot_reg = 16'd0;
reg [6:0]  i_last_bytes_reg = 7'd0; // bytes of the frame's last beat (1..64; 0 if empty)
reg [8:0]  i_left_reg = 9'd0;       // beats still to go out (at least one: an empty frame's)
reg        i_empty_reg = 1'b0;      // frame_len 0: one beat, no byte, nothing read
reg        i_err_reg = 1'b0;        // a read of this frame was refused
// The receiver's completions count apart from the engine's (both may complete in a clock):
// its refused reads (dma.faults reads the sum) and its completions since the last write-back.
reg [31:0] i_faults_reg = 32'd0;
reg [7:0]  i_since_wb_reg = 8'd0;
reg        i_since_due_reg = WB_N == 8'd0;
// The pipeline's records (events, punts) took the last turn: an injected frame goes next.
reg        i_turn_reg = 1'b0;
// AXI
reg        aw_valid_reg = 1'b0;
reg [63:0] aw_addr_reg = 64'd0;
reg [7:0]  aw_len_reg = 8'd0;
reg        w_valid_reg = 1'b0;      // a beat of the engine's own (event, completion, write-back)
reg [DW-1:0] w_data_reg = {DW{1'b0}};
reg [KW-1:0] w_strb_reg = {KW{1'b0}};
reg        ar_valid_reg = 1'b0;
reg [63:0] ar_addr_reg = 64'd0;
reg [7:0]  ar_len_reg = 8'd0;
reg [9:0]  b_out_reg = 10'd0;       // write bursts awaiting their response
reg        b_err_reg = 1'b0;        // one of this record's responses was not OKAY
// A punt's completion is written and the engine goes on: the next record does not wait for
// its response (a PCIe round trip). cb_wait_reg: that response is the next one to come (the
// completion went out with no other write awaiting its response), for slot cb_slot_reg; dev
// moves when it comes back OKAY. pn_reg = dev + cb_wait_reg, the next punt's index. A refused
// completion takes pn_reg back to dev, and a punt taken meanwhile (for the slot after) is lost
// and counted as failed (p_lost_reg): the next punt retries the slot, as the model's does.
reg        cb_wait_reg = 1'b0;
reg [15:0] cb_slot_reg = 16'd0;
reg [15:0] pn_reg = 16'd0;
reg        p_lost_reg = 1'b0;
// Write-back
reg [RINGS-1:0] wb_rings_reg = {RINGS{1'b0}};
reg [7:0]  since_wb_reg = 8'd0;
// since_wb_reg >= WB_N, kept with every change of since_wb_reg: the compare sat in front of the
// event stream's ready, and the event queue's count behind it (13 levels in nlb_top).
reg        since_wb_due_reg = WB_N == 8'd0;
reg [NLB_RING_COUNT-1:0] irq_reg = {NLB_RING_COUNT{1'b0}};
reg [15:0] us_div_reg = 16'd0;
// The low halves of the slot addresses (slot_iova), a clock ahead: the event ring's next slot,
// the punt ring's next descriptor line and the line of the punt in flight (its completion).
reg [22:0] ev_lo_reg = 23'd0;
reg [22:0] pd_lo_reg = 23'd0;
reg [22:0] pc_lo_reg = 23'd0;
reg [22:0] id_lo_reg = 23'd0;       // the inject ring's next descriptor line
reg        lo_fresh_reg = 1'b0;
// Whether each ring is full (no slot given) or, for the inject ring, has a descriptor
// waiting, a clock ahead like the sums: exact whenever the engine takes a record
// (lo_fresh_reg; a completion clears it, and so does a doorbell).
reg        p_full_reg = 1'b0;
reg        e_full_reg = 1'b0;
reg        i_posted_reg = 1'b0;

wire aw_hs = m_axi_awvalid && m_axi_awready;
wire w_hs = m_axi_wvalid && m_axi_wready;
wire b_hs = m_axi_bvalid && m_axi_bready;
wire ar_hs = m_axi_arvalid && m_axi_arready;
wire r_hs = m_axi_rvalid && m_axi_rready;

// Punt stream routing: a header beat not yet routed waits for the engine (ring) or goes out.
wire p_head = s_punt_tvalid && !p_in_rec_reg;
wire p_route_pass = p_in_rec_reg ? p_pass_reg : !usable_punt;
wire p_pass_now = s_punt_tvalid && p_route_pass;

// The engine's choice in S_IDLE. An injected frame waits for room in the inject queue
// (inject_room), so neither the engine nor the receiver ever waits on the pipeline: the
// pipeline may itself be waiting for the engine to take a punt. A record whose descriptor
// line must be read waits until no frame is in flight (rq_empty): the receiver drains on its
// own. A punt waiting so keeps its turn (p_work), so injected frames cannot starve it.
wire dirty_any = dirty_reg[RP] || dirty_reg[RE] || dirty_reg[RI];
wire ev_work = s_event_tvalid && usable_event;
wire p_work = p_head && usable_punt;
wire p_line_ok = pl_hit_reg || p_full_reg || rq_empty;
wire i_work = usable_inject && i_posted_reg && inject_room && !rq_full
    && (ic_hit_reg || rq_empty);
wire i_first = i_work && (i_turn_reg || (!ev_work && !p_work));
wire wb_due = dirty_any && (since_wb_due_reg || i_since_due_reg
    || (!ev_work && !p_work && !i_work));
wire take_wb = state_reg == S_IDLE && wb_due;
wire take_ev = state_reg == S_IDLE && !wb_due && ev_work && !i_first && lo_fresh_reg;
wire take_p = state_reg == S_IDLE && !wb_due && !ev_work && p_work && !i_first
    && lo_fresh_reg && p_line_ok;
wire take_i = state_reg == S_IDLE && !wb_due && i_first && lo_fresh_reg;

// The punt stream's beats the engine takes.
wire p_data_take = state_reg == S_P_W && s_punt_tvalid && m_axi_wready;
wire p_drop_take = (state_reg == S_DISCARD || state_reg == S_P_REST)
    && s_punt_tvalid && !p_last_seen_reg;
wire p_taken = take_p || p_data_take || p_drop_take;

assign s_punt_tready = p_pass_now ? m_punt_tready : p_taken;
assign m_punt_tdata = s_punt_tdata;
assign m_punt_tkeep = s_punt_tkeep;
assign m_punt_tlast = s_punt_tlast;
assign m_punt_tvalid = p_pass_now;

assign m_event_tdata = s_event_tdata;
assign m_event_tvalid = s_event_tvalid && !usable_event;
assign s_event_tready = usable_event ? take_ev : m_event_tready;

// The descriptor of the punt in flight (S_P_DEC).
/* verilator lint_off UNUSEDSIGNAL */ // (the descriptor's reserved bits; n_w below 2^14)
wire [127:0] desc_w = p_desc_reg;
wire [63:0]  desc_addr = desc_w[NLB_PUNT_DESC_ADDR_LSB +: NLB_PUNT_DESC_ADDR_W];
wire [15:0]  desc_len = desc_w[NLB_PUNT_DESC_LEN_LSB +: NLB_PUNT_DESC_LEN_W];
wire [13:0]  hdr_len = p_hdr_reg[NLB_PUNT_HEADER_FRAME_LEN_LSB +: NLB_PUNT_HEADER_FRAME_LEN_W];
// The frame's bytes capped at FRAME_MAX, and their beats, a clock after the header is taken
// (the descriptor comes a clock after its read is issued at the earliest); then the bytes
// written are the least of that and the buffer's length.
reg  [15:0]  p_cap_reg = 16'd0;
reg  [8:0]   p_cap_beats_reg = 9'd0;
wire [15:0]  cap_w = {2'b00, hdr_len} < FRAME_MAX[15:0] ? {2'b00, hdr_len} : FRAME_MAX[15:0];
wire         desc_short = desc_len < p_cap_reg;
wire [15:0]  n_w = desc_short ? desc_len : p_cap_reg;
/* verilator lint_on UNUSEDSIGNAL */
wire [8:0]   n_beats = desc_short ? desc_len[14:6] + {8'd0, desc_len[5:0] != 6'd0}
    : p_cap_beats_reg;
// The inject descriptor being decoded (S_I_DEC), from the line read or the cached line.
/* verilator lint_off UNUSEDSIGNAL */ // (the descriptor's reserved bits)
wire [127:0] idesc_w = i_desc_reg;
/* verilator lint_on UNUSEDSIGNAL */
wire [63:0]  idesc_addr = idesc_w[NLB_INJECT_DESC_ADDR_LSB +: NLB_INJECT_DESC_ADDR_W];
wire [IHW-1:0] idesc_hdr = idesc_w[NLB_INJECT_DESC_HEADER_LSB +: IHW];
wire [13:0]  idesc_len = idesc_hdr[NLB_INJECT_HEADER_FRAME_LEN_LSB
    +: NLB_INJECT_HEADER_FRAME_LEN_W];
wire [8:0]   idesc_beats = idesc_len[14-1:6] + {8'd0, idesc_len[5:0] != 6'd0};
// Beats of the burst starting at p_addr_reg: up to the 4 KiB boundary.
wire [6:0]   to_4k = 7'd64 - {1'b0, p_addr_reg[11:6]};
wire [6:0]   burst_n = p_beats_reg < {2'b00, to_4k} ? p_beats_reg[6:0] : to_4k;

// The strobes of a beat's first `bytes` bytes: one compare with a constant per byte (a
// subtract of a shifted one is a 64-bit carry chain).
function [KW-1:0] keep_of(input [6:0] bytes);
    integer i;
    begin
        for (i = 0; i < KW; i = i + 1) begin
            keep_of[i] = {25'd0, bytes} > i;
        end
    end
endfunction

// The write-back line: ring r's ring_wb at byte 16 r.
function [127:0] wb_rec(input [1:0] ring);
    begin
        wb_rec = 128'd0;
        wb_rec[NLB_RING_WB_INDEX_LSB +: NLB_RING_WB_INDEX_W] = dev_reg[ring];
        wb_rec[NLB_RING_WB_DROPS_LSB +: NLB_RING_WB_DROPS_W] = drops_reg[ring];
        wb_rec[NLB_RING_WB_ERRORS_LSB +: NLB_RING_WB_ERRORS_W] = errors_reg[ring];
        wb_rec[NLB_RING_WB_ERROR_SLOT_LSB +: NLB_RING_WB_ERROR_SLOT_W] = err_slot_reg[ring];
        wb_rec[NLB_RING_WB_ERROR_CODE_LSB +: NLB_RING_WB_ERROR_CODE_W] = err_code_reg[ring];
    end
endfunction

wire [127:0] cpl_w = {{(128 - NLB_PUNT_CPL_RESERVED_LSB){1'b0}}, p_n_reg, p_hdr_reg};

assign m_axi_awaddr = aw_addr_reg;
assign m_axi_awlen = aw_len_reg;
assign m_axi_awsize = 3'd6;
assign m_axi_awburst = 2'b01;
assign m_axi_awvalid = aw_valid_reg;
assign m_axi_wdata = state_reg == S_P_W ? s_punt_tdata : w_data_reg;
assign m_axi_wstrb = state_reg == S_P_W
    ? (p_beats_reg == 9'd1 ? keep_of(p_last_bytes_reg) : {KW{1'b1}}) : w_strb_reg;
assign m_axi_wlast = state_reg == S_P_W ? p_burst_reg == 7'd1 : 1'b1;
assign m_axi_wvalid = state_reg == S_P_W ? s_punt_tvalid : w_valid_reg;
// A punt completion's response waits while a record completes or fails on its own (the ring
// counters take one update a clock).
assign m_axi_bready = !cb_wait_reg || !(state_reg == S_P_R || state_reg == S_P_DEC);
assign m_axi_araddr = ar_addr_reg;
assign m_axi_arlen = ar_len_reg;
assign m_axi_arsize = 3'd6;
assign m_axi_arburst = 2'b01;
assign m_axi_arvalid = ar_valid_reg;
// A descriptor line is read only with no frame in flight, so its answer is the next beat.
assign m_axi_rready = state_reg == S_P_R || state_reg == S_I_R
    || (rx_state_reg == RX_D && !i_empty_reg && m_inject_tready);

// The inject stream: the header beat, then the frame's beats as they are read (an empty
// frame's one beat with no byte).
wire i_data_out = rx_state_reg == RX_D && (i_empty_reg || m_axi_rvalid);
wire i_last = i_left_reg == 9'd1;
assign m_inject_tvalid = rx_state_reg == RX_H || i_data_out;
assign m_inject_tdata = rx_state_reg == RX_H ? {{(DW - IHW){1'b0}}, i_hdr_reg}
    : i_empty_reg ? {DW{1'b0}} : m_axi_rdata;
assign m_inject_tkeep = rx_state_reg == RX_H ? {KW{1'b1}}
    : i_last ? keep_of(i_last_bytes_reg) : {KW{1'b1}};
assign m_inject_tlast = rx_state_reg == RX_D && i_last;
assign m_inject_terr = i_err_reg || (!i_empty_reg && m_axi_rresp != 2'b00);
wire i_beat = rx_state_reg == RX_D && i_data_out && m_inject_tready;
assign inject_pending = i_pend_reg;
assign irq = irq_reg;

// The receiver's record at the head of its queue, and what it completes this clock: a record
// with nothing to send (drop, bad, fault) in the clock it reaches the head, a frame with its
// last beat.
wire [1:0]   rx_kind = rq_kind[rq_head];
wire         rx_quick = rx_state_reg == RX_IDLE && !rq_empty && rx_kind != K_FRAME;
wire         rx_frame_done = i_beat && i_last;
wire         rx_done = rx_quick || rx_frame_done;
wire         rx_fail = rx_quick ? rx_kind != K_DROP : rx_frame_done && m_inject_terr;
wire         rx_fault = rx_quick ? rx_kind == K_FAULT : rx_frame_done && m_inject_terr;
/* verilator lint_off UNUSEDSIGNAL */ // (the header's other fields)
wire [IHW-1:0] rx_hdr = rq_hdr[rq_head];
/* verilator lint_on UNUSEDSIGNAL */
wire [13:0]  rx_len = rx_hdr[NLB_INJECT_HEADER_FRAME_LEN_LSB +: NLB_INJECT_HEADER_FRAME_LEN_W];
// The inject descriptor's record (S_I_DEC) and the beats it promises the inject queue.
wire [1:0]   idesc_kind = {2'b00, idesc_len} > FRAME_MAX[15:0] ? K_DROP
    : idesc_addr[5:0] != 6'd0 ? K_BAD : K_FRAME;
wire [9:0]   idesc_promise = idesc_kind != K_FRAME ? 10'd0
    : idesc_len == 14'd0 ? 10'd2 : {1'b0, idesc_beats} + 10'd1;
wire us_tick = us_div_reg == US_DIV - 16'd1;
// Interrupts this clock, per ring: by count (a write-back answered) and by time.
reg [RINGS-1:0] irq_by_count;
reg [RINGS-1:0] irq_by_time;
integer m;
always @* begin
    for (m = 0; m < RINGS; m = m + 1) begin
        irq_by_count[m] = state_reg == S_WB_B && b_out_reg == 10'd0 && wb_rings_reg[m]
            && irq_cfg_reg[m][NLB_REG_DMA_PUNT_IRQ_ENABLE_LSB]
            && pending_reg[m] != 16'd0
            && pending_reg[m] >= max1(irq_cfg_reg[m][NLB_REG_DMA_PUNT_IRQ_COUNT_LSB
                +: NLB_REG_DMA_PUNT_IRQ_COUNT_W]);
        irq_by_time[m] = us_tick && pending_reg[m] != 16'd0 && state_reg != S_WB_B
            && irq_cfg_reg[m][NLB_REG_DMA_PUNT_IRQ_ENABLE_LSB]
            && irq_cfg_reg[m][NLB_REG_DMA_PUNT_IRQ_USECS_LSB +: NLB_REG_DMA_PUNT_IRQ_USECS_W]
                != 16'd0
            && elapsed_reg[m] + 16'd1 >= irq_cfg_reg[m][NLB_REG_DMA_PUNT_IRQ_USECS_LSB
                +: NLB_REG_DMA_PUNT_IRQ_USECS_W];
    end
end

// A failure of the record in flight on ring `ring`, slot `slot`.
task fail(input [1:0] ring, input [15:0] slot, input [7:0] code, input fault);
    begin
        errors_reg[ring] <= errors_reg[ring] + 32'd1;
        err_slot_reg[ring] <= slot;
        err_code_reg[ring] <= code;
        dirty_reg[ring] <= 1'b1;
        if (fault) begin
            faults_reg <= faults_reg + 32'd1;
        end
    end
endtask

// A record for the receiver: inject descriptor ii taken (the sums ahead are stale a clock).
task queue_record(input [1:0] kind, input [15:0] slot);
    begin
        rq_kind[rq_wr_reg[IQW-1:0]] <= kind;
        rq_slot[rq_wr_reg[IQW-1:0]] <= slot;
        rq_wr_reg <= rq_wr_reg + 1'b1;
        ii_reg <= ii_reg + 16'd1;
        lo_fresh_reg <= 1'b0;
    end
endtask

task complete(input [1:0] ring);
    begin
        dev_reg[ring] <= dev_reg[ring] + 16'd1;
        lo_fresh_reg <= 1'b0;
        dirty_reg[ring] <= 1'b1;
        if (pending_reg[ring] != 16'hFFFF) begin
            pending_reg[ring] <= pending_reg[ring] + 16'd1;
        end
        since_wb_reg <= since_wb_reg == 8'hFF ? 8'hFF : since_wb_reg + 8'd1;
        since_wb_due_reg <= {1'b0, since_wb_reg} + 9'd1 >= {1'b0, WB_N};
    end
endtask

// Written words of the registers with fields, the write's strobes applied.
reg [31:0] wr_ctrl;
reg [31:0] wr_size [0:RINGS-1];
reg [31:0] wr_host [0:RINGS-1];
reg [31:0] wr_base_lo [0:RINGS-1];
reg [31:0] wr_base_hi [0:RINGS-1];
always @* begin
    wr_ctrl = merge({30'd0, hw_learn_reg, enable_reg}, ext_wr_data, ext_wr_strb);
    for (r = 0; r < RINGS; r = r + 1) begin
        wr_base_lo[r] = merge(base_reg[r][31:0], ext_wr_data, ext_wr_strb)
            & NLB_REG_DMA_PUNT_BASE_LO_DEFINED;
        wr_base_hi[r] = merge(base_reg[r][63:32], ext_wr_data, ext_wr_strb);
        wr_size[r] = merge(size_word(r[1:0]), ext_wr_data, ext_wr_strb);
        wr_host[r] = merge({16'd0, host_reg[r]}, ext_wr_data, ext_wr_strb);
    end
end

// Events dropped this clock: the ring full, and the pipeline's queue full while the ring
// takes them.
wire ev_ring_full = take_ev && e_full_reg;
// Counted a clock later (the add behind the engine's decision was its longest path).
wire [1:0] drops_ev_inc = {1'b0, ev_ring_full} + {1'b0, s_event_dropped && usable_event};
reg  [1:0] drops_ev_inc_reg = 2'd0;

always @(posedge clk) begin
    irq_reg <= {NLB_RING_COUNT{1'b0}};
    us_div_reg <= us_tick ? 16'd0 : us_div_reg + 16'd1;
    ev_lo_reg <= {1'b0, base_reg[RE][21:0]} + {1'b0, slot_event, 6'd0};
    p_full_reg <= avail_punt == 16'd0;
    e_full_reg <= avail_event == 16'd0;
    p_cap_reg <= cap_w;
    p_cap_beats_reg <= cap_w[14:6] + {8'd0, cap_w[5:0] != 6'd0};
    pd_lo_reg <= {1'b0, base_reg[RP][21:0]} + {3'b000, slot_punt[15:2], 6'd0};
    pc_lo_reg <= {1'b0, base_reg[RP][21:0]} + {3'b000, p_slot_reg[15:2], 6'd0};
    id_lo_reg <= {1'b0, base_reg[RI][21:0]} + {3'b000, slot_inject[15:2], 6'd0};
    i_posted_reg <= avail_inject != 16'd0;
    ic_hit_reg <= ic_valid_reg && log2_reg[RI] >= 4'd2 && ic_dev_off < 16'd4
        && ic_dev_off < ic_hi_reg - ic_first_reg;
    pl_hit_reg <= pl_valid_reg && log2_reg[RP] >= 4'd2 && pl_dev_off < 16'd4
        && pl_dev_off < pl_hi_reg - pl_first_reg;
    // A completion (dev_reg) or a register write (a ring's base or size) makes them stale.
    lo_fresh_reg <= !ext_wr_req;
    if (aw_hs) begin
        aw_valid_reg <= 1'b0;
    end
    if (w_hs && state_reg != S_P_W) begin
        w_valid_reg <= 1'b0;
    end
    if (ar_hs) begin
        ar_valid_reg <= 1'b0;
    end
    b_out_reg <= b_out_reg + {9'd0, aw_hs} - {9'd0, b_hs};
    if (b_hs && m_axi_bresp != 2'b00 && !cb_wait_reg) begin
        b_err_reg <= 1'b1;
    end
    // The punt stream's record boundaries.
    if (s_punt_tvalid && s_punt_tready) begin
        if (!p_in_rec_reg) begin
            p_pass_reg <= !usable_punt;
        end
        p_in_rec_reg <= !s_punt_tlast;
        if (!p_pass_now) begin
            p_last_seen_reg <= s_punt_tlast;
        end
    end
    case (state_reg)
    S_IDLE: begin
        b_err_reg <= 1'b0;
        if (take_ev || take_p) begin
            i_turn_reg <= 1'b1;
        end
        if (take_wb) begin
            wb_rings_reg <= {dirty_reg[RI], dirty_reg[RE], dirty_reg[RP]};
            dirty_reg[RP] <= 1'b0;
            dirty_reg[RE] <= 1'b0;
            dirty_reg[RI] <= 1'b0;
            since_wb_reg <= 8'd0;
            since_wb_due_reg <= WB_N == 8'd0;
            i_since_wb_reg <= 8'd0;
            i_since_due_reg <= WB_N == 8'd0;
            aw_addr_reg <= wb_reg;
            aw_len_reg <= 8'd0;
            w_data_reg <= {{(DW - 384){1'b0}}, wb_rec(RI), wb_rec(RE), wb_rec(RP)};
            w_strb_reg <= {{(KW - 48){1'b0}}, {16{dirty_reg[RI]}}, {16{dirty_reg[RE]}},
                {16{dirty_reg[RP]}}};
            aw_valid_reg <= wb_reg != 64'd0;
            w_valid_reg <= wb_reg != 64'd0;
            state_reg <= S_WB_W;
        end else if (take_ev) begin
            if (!ev_ring_full) begin
                e_slot_reg <= slot_event;
                aw_addr_reg <= slot_iova(base_reg[RE], ev_lo_reg);
                aw_len_reg <= 8'd0;
                w_data_reg <= {{(DW - NLB_EVENT_RECORD_WIDTH){1'b0}}, s_event_install,
                    s_event_tdata[NLB_EVENT_RECORD_INSTALLED_LSB-1:0]};
                w_strb_reg <= {KW{1'b1}};
                aw_valid_reg <= 1'b1;
                w_valid_reg <= 1'b1;
                state_reg <= S_EV_W;
            end
        end else if (take_p) begin
            p_hdr_reg <= s_punt_tdata[NLB_PUNT_HEADER_WIDTH-1:0];
            p_slot_reg <= slot_punt;
            p_lost_reg <= 1'b0;
            p_last_seen_reg <= s_punt_tlast;
            if (p_full_reg) begin
                drops_reg[RP] <= drops_reg[RP] + 32'd1;
                dirty_reg[RP] <= 1'b1;
                state_reg <= S_DISCARD;
            end else if (pl_hit_reg) begin
                p_desc_reg <= pl_line_reg[{slot_punt[1:0], 7'd0} +: 128];
                state_reg <= S_P_HIT;
            end else begin
                ar_addr_reg <= slot_iova(base_reg[RP], pd_lo_reg);
                ar_len_reg <= 8'd0;
                ar_valid_reg <= 1'b1;
                pl_valid_reg <= 1'b0;
                pl_first_reg <= {pn_reg[15:2], 2'b00};
                pl_hi_reg <= host_reg[RP];
                state_reg <= S_P_R;
            end
        end else if (take_i) begin
            i_turn_reg <= 1'b0;
            p_slot_reg <= slot_inject;
            if (ic_hit_reg) begin
                i_desc_reg <= ic_line_reg[{slot_inject[1:0], 7'd0} +: 128];
                state_reg <= S_I_DEC;
            end else begin
                ar_addr_reg <= slot_iova(base_reg[RI], id_lo_reg);
                ar_len_reg <= 8'd0;
                ar_valid_reg <= 1'b1;
                ic_valid_reg <= 1'b0;
                ic_first_reg <= {ii_reg[15:2], 2'b00};
                ic_hi_reg <= host_reg[RI];
                state_reg <= S_I_R;
            end
        end
    end
    S_I_R: begin
        if (r_hs) begin
            if (m_axi_rresp != 2'b00) begin
                // The record fails in its turn (no frame is in flight: it is next).
                queue_record(K_FAULT, p_slot_reg);
                state_reg <= S_IDLE;
            end else begin
                i_desc_reg <= m_axi_rdata[{p_slot_reg[1:0], 7'd0} +: 128];
                ic_line_reg <= m_axi_rdata;
                ic_valid_reg <= 1'b1;
                state_reg <= S_I_DEC;
            end
        end
    end
    // The descriptor's record queued for the receiver; a frame's reads follow. The next record
    // is taken two clocks on at the earliest (lo_fresh_reg), when inject_room has seen this
    // one's promise.
    S_I_DEC: begin
        queue_record(idesc_kind, p_slot_reg);
        rq_hdr[rq_wr_reg[IQW-1:0]] <= idesc_hdr;
        p_addr_reg <= idesc_addr;
        p_beats_reg <= idesc_beats;
        state_reg <= idesc_kind == K_FRAME && idesc_len != 14'd0 ? S_I_AR : S_IDLE;
    end
    S_I_AR: begin
        // The frame's reads go out back to back, each up to a 4 KiB boundary; the engine goes
        // on once the last one's address is taken.
        if (!ar_valid_reg) begin
            if (p_beats_reg == 9'd0) begin
                state_reg <= S_IDLE;
            end else begin
                ar_addr_reg <= p_addr_reg;
                ar_len_reg <= {1'b0, burst_n - 7'd1};
                ar_valid_reg <= 1'b1;
                p_beats_reg <= p_beats_reg - {2'b00, burst_n};
                p_addr_reg <= next_4k(p_addr_reg);
            end
        end
    end
    S_EV_W: begin
        if (!aw_valid_reg && !w_valid_reg) begin
            state_reg <= S_EV_B;
        end
    end
    S_EV_B: begin
        if (b_out_reg == 10'd0) begin
            if (b_err_reg) begin
                fail(RE, e_slot_reg, {5'd0, NLB_DMA_ERROR_DMA_FAULT}, 1'b1);
            end else begin
                complete(RE);
            end
            state_reg <= S_IDLE;
        end
    end
    S_P_R: begin
        if (r_hs) begin
            if (m_axi_rresp != 2'b00) begin
                fail(RP, p_slot_reg, {5'd0, NLB_DMA_ERROR_DMA_FAULT}, 1'b1);
                state_reg <= S_DISCARD;
            end else begin
                p_desc_reg <= m_axi_rdata[{p_slot_reg[1:0], 7'd0} +: 128];
                pl_line_reg <= m_axi_rdata;
                pl_valid_reg <= 1'b1;
                state_reg <= S_P_DEC;
            end
        end
    end
    // A clock for the frame's capped length (p_cap_reg), which the read's latency gives.
    S_P_HIT: state_reg <= S_P_DEC;
    S_P_DEC: begin
        if (desc_addr[5:0] != 6'd0) begin
            fail(RP, p_slot_reg, {5'd0, NLB_DMA_ERROR_BAD_ENTRY}, 1'b0);
            state_reg <= S_DISCARD;
        end else begin
            p_addr_reg <= desc_addr;
            p_n_reg <= n_w[13:0];
            p_beats_reg <= n_beats;
            p_last_bytes_reg <= n_w[5:0] == 6'd0 ? 7'd64 : {1'b0, n_w[5:0]};
            state_reg <= S_P_AW;
        end
    end
    S_P_AW: begin
        if (p_beats_reg == 9'd0) begin
            state_reg <= S_P_REST;
        end else if (!aw_valid_reg) begin
            aw_addr_reg <= p_addr_reg;
            aw_len_reg <= {1'b0, burst_n - 7'd1};
            aw_valid_reg <= 1'b1;
            p_burst_reg <= burst_n;
            state_reg <= S_P_W;
        end
    end
    S_P_W: begin
        if (p_data_take) begin
            p_beats_reg <= p_beats_reg - 9'd1;
            p_burst_reg <= p_burst_reg - 7'd1;
            p_addr_reg <= next_beat(p_addr_reg);
            if (p_burst_reg == 7'd1) begin
                state_reg <= p_beats_reg == 9'd1 ? S_P_REST : S_P_AW;
            end
        end
    end
    S_P_REST: begin
        if ((p_last_seen_reg || (p_drop_take && s_punt_tlast)) && !aw_valid_reg
            && b_out_reg == 10'd0) begin
            if (b_err_reg || p_lost_reg) begin
                fail(RP, p_slot_reg, {5'd0, NLB_DMA_ERROR_DMA_FAULT}, b_err_reg);
                state_reg <= S_IDLE;
            end else begin
                cb_wait_reg <= 1'b1;
                cb_slot_reg <= p_slot_reg;
                pn_reg <= pn_reg + 16'd1;
                lo_fresh_reg <= 1'b0;
                aw_addr_reg <= slot_iova(base_reg[RP], pc_lo_reg);
                aw_len_reg <= 8'd0;
                w_data_reg <= {{(DW - 128){1'b0}}, cpl_w} << {p_slot_reg[1:0], 7'd0};
                w_strb_reg <= {{(KW - 16){1'b0}}, 16'hFFFF} << {p_slot_reg[1:0], 4'd0};
                aw_valid_reg <= 1'b1;
                w_valid_reg <= 1'b1;
                state_reg <= S_P_CW;
            end
        end
    end
    S_P_CW: begin
        if (!aw_valid_reg && !w_valid_reg) begin
            state_reg <= S_IDLE;
        end
    end
    S_DISCARD: begin
        if (p_last_seen_reg || (p_drop_take && s_punt_tlast)) begin
            state_reg <= S_IDLE;
        end
    end
    S_WB_W: begin
        if (!aw_valid_reg && !w_valid_reg) begin
            state_reg <= S_WB_B;
        end
    end
    S_WB_B: begin
        if (b_out_reg == 10'd0) begin
            if (b_err_reg) begin
                faults_reg <= faults_reg + 32'd1;
            end
            // Moderation by count, for the rings just written back.
            for (r = 0; r < RINGS; r = r + 1) begin
                if (irq_by_count[r]) begin
                    pending_reg[r] <= 16'd0;
                    elapsed_reg[r] <= 16'd0;
                    irq_reg[r] <= 1'b1;
                end
            end
            state_reg <= S_IDLE;
        end
    end
    default: state_reg <= S_IDLE;
    endcase

    // The punt completion's response. The engine takes it only in states that complete or fail
    // nothing of their own in the same clock (m_axi_bready); a write-back taken in the same
    // clock wrote the old index, so the ring stays dirty.
    if (cb_wait_reg && b_hs) begin
        cb_wait_reg <= 1'b0;
        lo_fresh_reg <= 1'b0;
        if (m_axi_bresp != 2'b00) begin
            fail(RP, cb_slot_reg, {5'd0, NLB_DMA_ERROR_DMA_FAULT}, 1'b1);
            pn_reg <= dev_reg[RP];
            p_lost_reg <= 1'b1;
        end else begin
            complete(RP);
            if (take_wb) begin
                since_wb_reg <= 8'd1;
                since_wb_due_reg <= WB_N <= 8'd1;
            end
        end
    end

    if (s_cmd_fault) begin
        cmd_faults_reg <= cmd_faults_reg + 32'd1;
    end

    drops_ev_inc_reg <= drops_ev_inc;
    drops_reg[RE] <= drops_reg[RE] + {30'd0, drops_ev_inc_reg};
    if (drops_ev_inc_reg != 2'd0) begin
        dirty_reg[RE] <= 1'b1;
    end

    // Moderation by time: irq.usecs after the first completion not yet signalled.
    for (r = 0; r < RINGS; r = r + 1) begin
        if (irq_by_time[r]) begin
            pending_reg[r] <= 16'd0;
            elapsed_reg[r] <= 16'd0;
            irq_reg[r] <= 1'b1;
        end else if (us_tick && pending_reg[r] != 16'd0 && state_reg != S_WB_B
            && irq_cfg_reg[r][NLB_REG_DMA_PUNT_IRQ_ENABLE_LSB]
            && irq_cfg_reg[r][NLB_REG_DMA_PUNT_IRQ_USECS_LSB +: NLB_REG_DMA_PUNT_IRQ_USECS_W]
                != 16'd0) begin
            elapsed_reg[r] <= elapsed_reg[r] + 16'd1;
        end
    end

    // The receiver: the record at the head of its queue. A frame's header beat, then its
    // beats as its lines come back; the record completes with its last beat (dev moves on),
    // a record with nothing to send in the clock it reaches the head. Its updates of the
    // inject ring come after the engine's, which never completes an inject record: a
    // write-back taken in the same clock wrote the old index, so the ring stays dirty; an
    // interrupt in the same clock signalled the completions before this one.
    i_pend_reg <= i_pend_reg + (state_reg == S_I_DEC ? idesc_promise : 10'd0)
        - {9'd0, m_inject_tvalid && m_inject_tready};
    case (rx_state_reg)
    RX_IDLE: begin
        if (!rq_empty && rx_kind == K_FRAME) begin
            i_hdr_reg <= rx_hdr;
            i_slot_reg <= rq_slot[rq_head];
            i_err_reg <= 1'b0;
            i_empty_reg <= rx_len == 14'd0;
            i_left_reg <= rx_len == 14'd0 ? 9'd1
                : rx_len[13:6] + {8'd0, rx_len[5:0] != 6'd0};
            i_last_bytes_reg <= rx_len[5:0] == 6'd0 && rx_len != 14'd0 ? 7'd64
                : {1'b0, rx_len[5:0]};
            rx_state_reg <= RX_H;
        end
    end
    RX_H: begin
        if (m_inject_tready) begin
            rx_state_reg <= RX_D;
        end
    end
    default: begin
        if (i_beat) begin
            i_left_reg <= i_left_reg - 9'd1;
            if (m_inject_terr) begin
                i_err_reg <= 1'b1;
            end
            if (i_last) begin
                rx_state_reg <= RX_IDLE;
            end
        end
    end
    endcase
    if (rx_done) begin
        rq_rd_reg <= rq_rd_reg + 1'b1;
        dev_reg[RI] <= dev_reg[RI] + 16'd1;
        dirty_reg[RI] <= 1'b1;
        // (the interrupt's decision picks between the sums, not in front of the add: it is
        // a compare deep already)
        pending_reg[RI] <= irq_by_count[RI] || irq_by_time[RI] ? 16'd1
            : pending_reg[RI] == 16'hFFFF ? 16'hFFFF : pending_reg[RI] + 16'd1;
        i_since_wb_reg <= take_wb ? 8'd1
            : i_since_wb_reg == 8'hFF ? 8'hFF : i_since_wb_reg + 8'd1;
        i_since_due_reg <= take_wb ? (WB_N <= 8'd1)
            : ({1'b0, i_since_wb_reg} + 9'd1 >= {1'b0, WB_N});
        if (rx_quick && rx_kind == K_DROP) begin
            drops_reg[RI] <= drops_reg[RI] + 32'd1;
        end
        if (rx_fail) begin
            errors_reg[RI] <= errors_reg[RI] + 32'd1;
            err_slot_reg[RI] <= rx_quick ? rq_slot[rq_head] : i_slot_reg;
            err_code_reg[RI] <= rx_quick && rx_kind == K_BAD ? {5'd0, NLB_DMA_ERROR_BAD_ENTRY}
                : {5'd0, NLB_DMA_ERROR_DMA_FAULT};
        end
        if (rx_fault) begin
            i_faults_reg <= i_faults_reg + 32'd1;
        end
    end

    // Register writes (a ring is set up while the engine has no record of it in flight).
    if (ext_wr_req) begin
        if (wr_word == NLB_REG_DMA_CTRL) begin
            enable_reg <= wr_ctrl[NLB_REG_DMA_CTRL_ENABLE_LSB];
            hw_learn_reg <= HW_LEARN != 0 && wr_ctrl[NLB_REG_DMA_CTRL_HW_LEARN_LSB];
        end
        // A ring set up anew: its kept descriptors are gone.
        if (wr_word == NLB_REG_DMA_CTRL || wr_word == NLB_REG_DMA_INJECT_BASE_LO
            || wr_word == NLB_REG_DMA_INJECT_BASE_HI || wr_word == NLB_REG_DMA_INJECT_SIZE) begin
            ic_valid_reg <= 1'b0;
        end
        if (wr_word == NLB_REG_DMA_CTRL || wr_word == NLB_REG_DMA_PUNT_BASE_LO
            || wr_word == NLB_REG_DMA_PUNT_BASE_HI || wr_word == NLB_REG_DMA_PUNT_SIZE) begin
            pl_valid_reg <= 1'b0;
        end
        if (wr_word == NLB_REG_DMA_HOST_TIME) begin
            host_time_reg <= merge(host_time_reg, ext_wr_data, ext_wr_strb);
        end
        if (wr_word == NLB_REG_DMA_WB_LO) begin
            wb_reg[31:0] <= merge(wb_reg[31:0], ext_wr_data, ext_wr_strb)
                & NLB_REG_DMA_WB_LO_DEFINED;
        end
        if (wr_word == NLB_REG_DMA_WB_HI) begin
            wb_reg[63:32] <= merge(wb_reg[63:32], ext_wr_data, ext_wr_strb);
        end
        for (r = 0; r < RINGS; r = r + 1) begin
            if (is_ring_reg(wr_word, NLB_REG_DMA_PUNT_BASE_LO, r)) begin
                base_reg[r][31:0] <= wr_base_lo[r];
                base_nz_reg[r] <= wr_base_lo[r] != 32'd0 || base_reg[r][63:32] != 32'd0;
            end
            if (is_ring_reg(wr_word, NLB_REG_DMA_PUNT_BASE_HI, r)) begin
                base_reg[r][63:32] <= wr_base_hi[r];
                base_nz_reg[r] <= wr_base_hi[r] != 32'd0 || base_reg[r][31:0] != 32'd0;
            end
            if (is_ring_reg(wr_word, NLB_REG_DMA_PUNT_SIZE, r)) begin
                // A write resets the ring (docs/regmap.md), its drops not yet counted too.
                if (r[1:0] == RE) begin
                    drops_ev_inc_reg <= 2'd0;
                end
                log2_reg[r] <= wr_size[r][NLB_REG_DMA_PUNT_SIZE_LOG2_LSB
                    +: NLB_REG_DMA_PUNT_SIZE_LOG2_W];
                ren_reg[r] <= wr_size[r][NLB_REG_DMA_PUNT_SIZE_ENABLE_LSB];
                host_reg[r] <= 16'd0;
                dev_reg[r] <= 16'd0;
                drops_reg[r] <= 32'd0;
                errors_reg[r] <= 32'd0;
                err_slot_reg[r] <= 16'd0;
                err_code_reg[r] <= 8'd0;
                pending_reg[r] <= 16'd0;
                elapsed_reg[r] <= 16'd0;
                dirty_reg[r] <= 1'b0;
                if (r[1:0] == RP) begin
                    pn_reg <= 16'd0;
                    cb_wait_reg <= 1'b0;
                    p_lost_reg <= 1'b0;
                end
                if (r[1:0] == RI) begin
                    ii_reg <= 16'd0;
                end
            end
            if (is_ring_reg(wr_word, NLB_REG_DMA_PUNT_HOST, r)) begin
                host_reg[r] <= wr_host[r][NLB_REG_DMA_PUNT_HOST_INDEX_LSB
                    +: NLB_REG_DMA_PUNT_HOST_INDEX_W];
            end
            if (is_ring_reg(wr_word, NLB_REG_DMA_PUNT_IRQ, r)) begin
                irq_cfg_reg[r] <= merge(irq_cfg_reg[r], ext_wr_data, ext_wr_strb)
                    & NLB_REG_DMA_PUNT_IRQ_DEFINED;
            end
        end
    end

    if (rst) begin
        state_reg <= S_IDLE;
        enable_reg <= 1'b0;
        hw_learn_reg <= 1'b0;
        host_time_reg <= 32'd0;
        wb_reg <= 64'd0;
        faults_reg <= 32'd0;
        cmd_faults_reg <= 32'd0;
        i_faults_reg <= 32'd0;
        i_since_wb_reg <= 8'd0;
        i_since_due_reg <= WB_N == 8'd0;
        rq_wr_reg <= {(IQW+1){1'b0}};
        rq_rd_reg <= {(IQW+1){1'b0}};
        ii_reg <= 16'd0;
        i_pend_reg <= 10'd0;
        rx_state_reg <= RX_IDLE;
        p_in_rec_reg <= 1'b0;
        p_pass_reg <= 1'b0;
        p_last_seen_reg <= 1'b0;
        aw_valid_reg <= 1'b0;
        w_valid_reg <= 1'b0;
        ar_valid_reg <= 1'b0;
        b_out_reg <= 10'd0;
        b_err_reg <= 1'b0;
        cb_wait_reg <= 1'b0;
        pn_reg <= 16'd0;
        p_lost_reg <= 1'b0;
        since_wb_reg <= 8'd0;
        since_wb_due_reg <= WB_N == 8'd0;
        irq_reg <= {NLB_RING_COUNT{1'b0}};
        us_div_reg <= 16'd0;
        lo_fresh_reg <= 1'b0;
        drops_ev_inc_reg <= 2'd0;
        i_turn_reg <= 1'b0;
        i_err_reg <= 1'b0;
        ic_valid_reg <= 1'b0;
        pl_valid_reg <= 1'b0;
        for (r = 0; r < RINGS; r = r + 1) begin
            base_reg[r] <= 64'd0;
            base_nz_reg[r] <= 1'b0;
            log2_reg[r] <= 4'd0;
            ren_reg[r] <= 1'b0;
            host_reg[r] <= 16'd0;
            dev_reg[r] <= 16'd0;
            drops_reg[r] <= 32'd0;
            errors_reg[r] <= 32'd0;
            err_slot_reg[r] <= 16'd0;
            err_code_reg[r] <= 8'd0;
            irq_cfg_reg[r] <= 32'd0;
            pending_reg[r] <= 16'd0;
            elapsed_reg[r] <= 16'd0;
            dirty_reg[r] <= 1'b0;
        end
    end
end

function [15:0] max1(input [7:0] c);
    max1 = c == 8'd0 ? 16'd1 : {8'd0, c};
endfunction

function [31:0] size_word(input [1:0] ring);
    begin
        size_word = 32'd0;
        size_word[NLB_REG_DMA_PUNT_SIZE_LOG2_LSB +: NLB_REG_DMA_PUNT_SIZE_LOG2_W] = log2_reg[ring];
        size_word[NLB_REG_DMA_PUNT_SIZE_ENABLE_LSB] = ren_reg[ring];
    end
endfunction

// ---- register reads -----------------------------------------------------------------------

reg        rd_ack_reg = 1'b0;
reg [31:0] rd_data_reg = 32'd0;
reg        wr_ack_reg = 1'b0;
reg [31:0] rd_v;

always @* begin
    rd_v = 32'd0;
    if (rd_word == NLB_REG_DMA_CAPS) begin
        rd_v[NLB_REG_DMA_CAPS_RINGS_LSB +: NLB_REG_DMA_CAPS_RINGS_W] = RINGS_N;
        rd_v[NLB_REG_DMA_CAPS_MAX_LOG2_LSB +: NLB_REG_DMA_CAPS_MAX_LOG2_W] = MAX_LOG2;
        rd_v[NLB_REG_DMA_CAPS_HW_LEARN_LSB] = HW_LEARN != 0;
    end
    if (rd_word == NLB_REG_DMA_CTRL) begin
        rd_v[NLB_REG_DMA_CTRL_ENABLE_LSB] = enable_reg;
        rd_v[NLB_REG_DMA_CTRL_HW_LEARN_LSB] = hw_learn_reg;
    end
    if (rd_word == NLB_REG_DMA_HOST_TIME) begin
        rd_v = host_time_reg;
    end
    if (rd_word == NLB_REG_DMA_WB_LO) begin
        rd_v = wb_reg[31:0];
    end
    if (rd_word == NLB_REG_DMA_WB_HI) begin
        rd_v = wb_reg[63:32];
    end
    if (rd_word == NLB_REG_DMA_FAULTS) begin
        rd_v = faults_reg + cmd_faults_reg + i_faults_reg;
    end
    for (r = 0; r < RINGS; r = r + 1) begin
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_BASE_LO, r)) begin
            rd_v = base_reg[r][31:0];
        end
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_BASE_HI, r)) begin
            rd_v = base_reg[r][63:32];
        end
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_SIZE, r)) begin
            rd_v = size_word(r[1:0]);
        end
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_HOST, r)) begin
            rd_v = {16'd0, host_reg[r]};
        end
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_DEV, r)) begin
            rd_v = {16'd0, dev_reg[r]};
        end
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_DROPS, r)) begin
            rd_v = drops_reg[r];
        end
        if (is_ring_reg(rd_word, NLB_REG_DMA_PUNT_IRQ, r)) begin
            rd_v = irq_cfg_reg[r];
        end
    end
end

always @(posedge clk) begin
    rd_ack_reg <= ext_rd_req;
    wr_ack_reg <= ext_wr_req;
    if (ext_rd_req) begin
        rd_data_reg <= rd_v;
    end
    if (rst) begin
        rd_ack_reg <= 1'b0;
        wr_ack_reg <= 1'b0;
    end
end

`ifdef FORMAL
// Formal properties: slots and buffers, producer and consumer (hw/scripts/formal.sh).
`include "nlb_host_dma_props.vh"
`endif

assign ext_rd_ack = rd_ack_reg;
assign ext_rd_data = rd_data_reg;
assign ext_wr_ack = wr_ack_reg;
assign dma_enable = enable_reg;
assign hw_learn = hw_learn_reg;
assign host_time = host_time_reg;
assign dma_wb = wb_reg;

endmodule

`resetall
