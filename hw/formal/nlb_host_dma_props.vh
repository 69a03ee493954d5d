// Formal properties of nlb_host_dma, included inside the module under `ifdef FORMAL and proven
// by hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven.
//
// Every input is free (anyseq) but for what a well-behaved host and bus do: reset in the first
// clock; the host sets rings up (base, size, ctrl, write-back address) while the engine has no
// record in flight, and never takes back a slot it gave (a doorbell never lowers host - dev);
// buffers lie inside the IOVA space; the AXI slave answers only what it was asked (a write
// response only for a burst whose address it took, read data only for the read it took) and
// holds at most 1,023 writes unanswered. Stated on the engine's registers:
// - host_dma_no_pass: the device's index moves by one at a time and only past a slot the
//   host gave (host != dev before): the producer never passes the consumer;
// - host_dma_desc_once: a punt completes the slot whose descriptor it fetched (the index the
//   record started with), when its completion's response comes back OKAY (the engine goes
//   on to the next record meanwhile), so a descriptor is used once per lap of the ring;
// - host_dma_in_buffer: every frame beat written lies inside the buffer the descriptor
//   posted ([addr, addr + len)), and no burst crosses a 4 KiB boundary (host_dma_4k);
// - host_dma_in_slot: event and completion writes go to the slot at dev, inside the ring,
//   and only while the host gave that slot;
// - host_dma_punt_desc_posted: a punt's descriptor is the one its line held when read, for a
//   slot the host had posted by then (read anew, or taken from the kept line).
// The inject ring (host to device), whose descriptors the engine takes at ii (dev + the
// records in flight) and whose frames the receiver sends on in ring order:
// - host_dma_no_pass_inj: its index moves by one at a time and only past a descriptor the
//   host posted, and only once no record of an earlier slot is in flight;
// - host_dma_inj_desc: the descriptor read is the line of slot ii, while the host posted it;
// - host_dma_inj_in_frame: every read of a frame lies inside the lines of the frame its
//   descriptor names, and no read crosses a 4 KiB boundary (host_dma_4k_rd);
// - host_dma_line_alone: a descriptor line (inject or punt) is read with no other read in
//   flight, so its answer is the next beat; and the reads in flight are exactly the lines the
//   receiver still expects of its frames (host_dma_inv_rlines), so every beat it sends on
//   is its frame's;
// - host_dma_inj_beats: a frame goes out as exactly its beats (ceil(frame_len / 64), one for
//   an empty frame), behind one header beat carrying the header its record was queued with
//   (the descriptor's, host_dma_inj_desc_posted).

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end

// Register writes of a ring's setup (size, base) or the engine's (ctrl, wb) come while the
// engine is idle and starts nothing; doorbells may come at any time but never lower host - dev.
wire [31:0] f_w = {ext_wr_addr[31:2], 2'b00};
wire f_setup_wr = ext_wr_req && (f_w == NLB_REG_DMA_CTRL || f_w == NLB_REG_DMA_WB_LO
    || f_w == NLB_REG_DMA_WB_HI
    || f_w == NLB_REG_DMA_PUNT_BASE_LO || f_w == NLB_REG_DMA_PUNT_BASE_HI
    || f_w == NLB_REG_DMA_PUNT_SIZE
    || f_w == NLB_REG_DMA_EVENT_BASE_LO || f_w == NLB_REG_DMA_EVENT_BASE_HI
    || f_w == NLB_REG_DMA_EVENT_SIZE
    || f_w == NLB_REG_DMA_INJECT_BASE_LO || f_w == NLB_REG_DMA_INJECT_BASE_HI
    || f_w == NLB_REG_DMA_INJECT_SIZE);
wire f_size_wr_p = ext_wr_req && f_w == NLB_REG_DMA_PUNT_SIZE;
wire f_size_wr_e = ext_wr_req && f_w == NLB_REG_DMA_EVENT_SIZE;
wire f_size_wr_i = ext_wr_req && f_w == NLB_REG_DMA_INJECT_SIZE;
wire [15:0] f_new_host_i = wr_host[RI][NLB_REG_DMA_PUNT_HOST_INDEX_LSB
    +: NLB_REG_DMA_PUNT_HOST_INDEX_W];
// Read beats asked for and not yet answered (the slave answers only what it was asked).
reg [9:0] f_rbeats = 10'd0;
always @(posedge clk) begin
    f_rbeats <= f_rbeats + (ar_hs ? {2'b00, m_axi_arlen} + 10'd1 : 10'd0) - {9'd0, r_hs};
    if (rst) begin
        f_rbeats <= 10'd0;
    end
end
wire [15:0] f_new_host_p = wr_host[RP][NLB_REG_DMA_PUNT_HOST_INDEX_LSB
    +: NLB_REG_DMA_PUNT_HOST_INDEX_W];
// Slots the host gave the punt ring and the NIC has not completed.
wire [15:0] f_avail_p = host_reg[RP] - dev_reg[RP];
wire [15:0] f_new_host_e = wr_host[RE][NLB_REG_DMA_PUNT_HOST_INDEX_LSB
    +: NLB_REG_DMA_PUNT_HOST_INDEX_W];
// Descriptors the host posted on the inject ring and the NIC has not completed.
wire [15:0] f_avail_i = host_reg[RI] - dev_reg[RI];

always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
    if (f_setup_wr) begin
        assume(state_reg == S_IDLE && b_out_reg == 10'd0 && !take_p && !take_ev && !take_wb
            && !take_i && rq_empty);
    end
    if (ext_wr_req && f_w == NLB_REG_DMA_PUNT_HOST) begin
        // The host gives at most a ring's worth of slots ahead of the NIC.
        assume(f_new_host_p - dev_reg[RP] >= f_avail_p
            && {1'b0, f_new_host_p - dev_reg[RP]} <= (17'd1 << log2_reg[RP]));
    end
    if (ext_wr_req && f_w == NLB_REG_DMA_EVENT_HOST) begin
        assume(f_new_host_e - dev_reg[RE] >= avail_event);
    end
    if (ext_wr_req && f_w == NLB_REG_DMA_INJECT_HOST) begin
        // The host posts at most a ring's worth of descriptors ahead of the NIC.
        assume(f_new_host_i - dev_reg[RI] >= f_avail_i
            && {1'b0, f_new_host_i - dev_reg[RI]} <= (17'd1 << log2_reg[RI]));
    end
    if (m_axi_bvalid) begin
        assume(b_out_reg != 10'd0);
    end
    // It holds at most 1,023 writes without answering them (the engine's count does not wrap).
    if (b_out_reg == 10'd1023) begin
        assume(!m_axi_awready);
    end
    if (m_axi_rvalid) begin
        assume(f_rbeats != 10'd0);
    end
    if (m_axi_rvalid && state_reg == S_P_R) begin
        // A posted buffer lies inside the IOVA space (it does not wrap past 2^64), in every
        // slot of the line.
        assume(f_pnowrap(m_axi_rdata[127:0]) && f_pnowrap(m_axi_rdata[255:128])
            && f_pnowrap(m_axi_rdata[383:256]) && f_pnowrap(m_axi_rdata[511:384]));
    end
    if (m_axi_rvalid && state_reg == S_I_R) begin
        // So does a frame to inject, in every slot of the line.
        assume(f_nowrap(m_axi_rdata[127:0]) && f_nowrap(m_axi_rdata[255:128])
            && f_nowrap(m_axi_rdata[383:256]) && f_nowrap(m_axi_rdata[511:384]));
    end
end

// A punt descriptor whose buffer ends inside the IOVA space.
function f_pnowrap(input [127:0] d);
    f_pnowrap = {1'b0, d[NLB_PUNT_DESC_ADDR_LSB +: 64]}
        + {49'd0, d[NLB_PUNT_DESC_LEN_LSB +: NLB_PUNT_DESC_LEN_W]} <= {1'b1, 64'd0};
endfunction

// An inject descriptor whose frame's lines end inside the IOVA space.
function f_nowrap(input [127:0] d);
    reg [13:0] len;
    reg [14:0] up;
    begin
        len = d[NLB_INJECT_DESC_HEADER_LSB + NLB_INJECT_HEADER_FRAME_LEN_LSB
            +: NLB_INJECT_HEADER_FRAME_LEN_W];
        up = {1'b0, len} + 15'd63;
        f_nowrap = {1'b0, d[NLB_INJECT_DESC_ADDR_LSB +: 64]} + {50'd0, up[14:6], 6'd0}
            <= {1'b1, 64'd0};
    end
endfunction

// The record in flight: the index it started at, and the buffer its descriptor posted. A punt
// starts at the index after the one whose completion is on its way (f_cwait: the completion's
// address taken, its response not yet back; f_cidx its index), else at dev.
reg [15:0] f_idx = 16'd0;
reg [63:0] f_buf = 64'd0;
reg [15:0] f_len = 16'd0;
reg        f_cwait = 1'b0;
reg [15:0] f_cidx = 16'd0;
wire       f_cissued = f_cwait || (state_reg == S_P_CW && aw_valid_reg);
wire [15:0] f_pnext = dev_reg[RP] + {15'd0, f_cissued};
always @(posedge clk) begin
    if (take_p) begin
        f_idx <= f_pnext;
    end
    if (aw_hs && state_reg == S_P_CW) begin
        f_cwait <= 1'b1;
        f_cidx <= f_idx;
    end
    if (f_cwait && b_hs) begin
        f_cwait <= 1'b0;
    end
    if (rst) begin
        f_cwait <= 1'b0;
    end
    if (take_ev && !ev_ring_full) begin
        f_idx <= dev_reg[RE];
    end
    if (state_reg == S_P_DEC) begin
        f_buf <= desc_addr;
        f_len <= desc_len;
    end
end

// The frame whose reads the engine issues: its descriptor's address and lines (f_ilines).
reg [63:0] f_iaddr = 64'd0;
reg [8:0]  f_ilines = 9'd0;
reg [13:0] f_ilen = 14'd0;
wire [14:0] f_len_up = {1'b0, idesc_len} + 15'd63;
always @(posedge clk) begin
    if (state_reg == S_I_DEC) begin
        f_iaddr <= idesc_addr;
        // Lines by definition, ceil(len / 64) (not the RTL's idesc_beats).
        f_ilines <= f_len_up[14:6];
        f_ilen <= idesc_len;
    end
end
// Lines of a frame of `len` bytes, and the beats it goes out as (one for an empty frame).
function [8:0] f_lines(input [13:0] len);
    reg [14:0] up;
    begin
        up = {1'b0, len} + 15'd63;
        f_lines = up[14:6];
    end
endfunction
function [8:0] f_beats(input [13:0] len);
    f_beats = len == 14'd0 ? 9'd1 : f_lines(len);
endfunction
/* verilator lint_off UNUSEDSIGNAL */
function [13:0] f_len_of(input [IHW-1:0] hdr);
    f_len_of = hdr[NLB_INJECT_HEADER_FRAME_LEN_LSB +: NLB_INJECT_HEADER_FRAME_LEN_W];
endfunction
/* verilator lint_on UNUSEDSIGNAL */
// The receiver's frame: beats sent after its header beat, and the beats it goes out as.
reg [8:0]  f_isent = 9'd0;
always @(posedge clk) begin
    if (rx_state_reg == RX_IDLE) begin
        f_isent <= 9'd0;
    end
    if (i_beat) begin
        f_isent <= f_isent + 9'd1;
    end
end
wire [13:0] f_rxlen = f_len_of(i_hdr_reg);
wire [8:0] f_ibeats = f_beats(f_rxlen);
// Lines the receiver still expects: of its frame on its way out, and of the frames queued
// behind it; and the lines asked for or about to be (in flight, in the read address held,
// not yet asked for by the engine).
wire [IQW:0] f_iq = IQ;
// f_qlen_ok: every frame queued is at most 9728 bytes.
reg  [11:0] f_expect;
reg         f_qlen_ok;
reg  [IQW:0] f_k;
integer f_q;
always @* begin
    f_expect = 12'd0;
    f_qlen_ok = 1'b1;
    for (f_q = 0; f_q < IQ; f_q = f_q + 1) begin
        f_k = rq_rd_reg + f_q[IQW:0];
        if (f_q[IQW:0] < rq_count && rq_kind[f_k[IQW-1:0]] == K_FRAME) begin
            if ({2'b00, f_len_of(rq_hdr[f_k[IQW-1:0]])} > FRAME_MAX[15:0]) begin
                f_qlen_ok = 1'b0;
            end
            if (f_q == 0 && rx_state_reg == RX_D) begin
                f_expect = f_expect + (i_empty_reg ? 12'd0 : {3'd0, i_left_reg});
            end else begin
                f_expect = f_expect + {3'd0, f_lines(f_len_of(rq_hdr[f_k[IQW-1:0]]))};
            end
        end
    end
end
wire [11:0] f_asked = {2'b00, f_rbeats} + (ar_valid_reg ? {4'd0, ar_len_reg} + 12'd1 : 12'd0)
    + (state_reg == S_I_AR ? {3'd0, p_beats_reg} : 12'd0);

// The inject ring's last descriptor line: the indices of its four slots from f_lfirst, the
// host's index when its read was issued (what the host had posted by then), what it held.
reg          f_lvalid = 1'b0;
reg [15:0]   f_lfirst = 16'd0;
reg [15:0]   f_lhost = 16'd0;
reg [511:0]  f_ldata = 512'd0;
wire [15:0]  f_ldev = ii_reg - f_lfirst;
always @(posedge clk) begin
    if (take_i && !(f_lvalid && log2_reg[RI] >= 4'd2 && f_ldev < 16'd4
            && f_ldev < f_lhost - f_lfirst)) begin
        f_lvalid <= 1'b0;
        f_lfirst <= {ii_reg[15:2], 2'b00};
        f_lhost <= host_reg[RI];
    end
    if (state_reg == S_I_R && r_hs && m_axi_rresp == 2'b00) begin
        f_lvalid <= 1'b1;
        f_ldata <= m_axi_rdata;
    end
    if (ext_wr_req && (f_w == NLB_REG_DMA_CTRL || f_w == NLB_REG_DMA_INJECT_BASE_LO
            || f_w == NLB_REG_DMA_INJECT_BASE_HI || f_w == NLB_REG_DMA_INJECT_SIZE)) begin
        f_lvalid <= 1'b0;
    end
    if (rst) begin
        f_lvalid <= 1'b0;
    end
end
wire [15:0] f_mask_i = (16'd1 << log2_reg[RI]) - 16'd1;

// The punt ring's last descriptor line, as the inject ring's above.
reg          f_pvalid = 1'b0;
reg [15:0]   f_pfirst = 16'd0;
reg [15:0]   f_phost = 16'd0;
reg [511:0]  f_pdata = 512'd0;
wire [15:0]  f_pdev = f_pnext - f_pfirst;
wire [15:0]  f_rslot = f_idx & f_mask_p;
wire [15:0]  f_rdev = f_idx - f_pfirst;
// dev's slot is in the line and was posted when the line was read; the RTL takes it from the
// kept line only in rings of four slots or more (f_pkept).
wire         f_pposted = f_pvalid && f_pdev < 16'd4 && f_pdev < f_phost - f_pfirst;
wire         f_pkept = f_pposted && log2_reg[RP] >= 4'd2;
always @(posedge clk) begin
    if (take_p && !p_full_reg && !f_pkept) begin
        f_pvalid <= 1'b0;
        f_pfirst <= {f_pnext[15:2], 2'b00};
        f_phost <= host_reg[RP];
    end
    if (state_reg == S_P_R && r_hs && m_axi_rresp == 2'b00) begin
        f_pvalid <= 1'b1;
        f_pdata <= m_axi_rdata;
    end
    if (ext_wr_req && (f_w == NLB_REG_DMA_CTRL || f_w == NLB_REG_DMA_PUNT_BASE_LO
            || f_w == NLB_REG_DMA_PUNT_BASE_HI || f_w == NLB_REG_DMA_PUNT_SIZE)) begin
        f_pvalid <= 1'b0;
    end
    if (rst) begin
        f_pvalid <= 1'b0;
    end
end
wire [15:0] f_islot = ii_reg & f_mask_i;

// The rings' index masks by their definition, 2^log2 - 1 (not the RTL's ring_mask, so that a
// mistake in it shows).
wire [15:0] f_mask_p = (16'd1 << log2_reg[RP]) - 16'd1;
wire [15:0] f_mask_e = (16'd1 << log2_reg[RE]) - 16'd1;
wire f_punt_pre = state_reg == S_P_R || state_reg == S_P_HIT || state_reg == S_P_DEC
    || state_reg == S_P_AW || state_reg == S_P_W || state_reg == S_P_REST;
wire f_punt_busy = f_punt_pre || state_reg == S_P_CW;
wire f_ev_busy = state_reg == S_EV_W || state_reg == S_EV_B;
// Bytes of the beat offered now and where it ends in the buffer.
wire [64:0] f_beat_end = {1'b0, p_addr_reg} + (p_beats_reg == 9'd1
    ? {58'd0, p_last_bytes_reg} : 65'd64);

always @* begin
    if (f_past_valid && !rst) begin
        if (state_reg == S_P_W && m_axi_wvalid && m_axi_wstrb != {KW{1'b0}}) begin
            host_dma_in_buffer: assert(p_addr_reg >= f_buf
                && f_beat_end <= {1'b0, f_buf} + {49'd0, f_len});
        end
        if (m_axi_awvalid) begin
            host_dma_4k: assert({2'b00, m_axi_awaddr[11:6]} + {1'b0, m_axi_awlen[6:0]} <= 8'd63
                && m_axi_awlen[7] == 1'b0);
        end
        if (m_axi_awvalid && state_reg == S_EV_W) begin
            host_dma_in_slot: assert(m_axi_awaddr == base_reg[RE]
                + {42'd0, dev_reg[RE] & f_mask_e, 6'd0} && avail_event != 16'd0);
        end
        if (m_axi_awvalid && state_reg == S_P_CW) begin
            host_dma_in_slot_cpl: assert(m_axi_awaddr == base_reg[RP]
                + {42'd0, (dev_reg[RP] & f_mask_p) >> 2, 6'd0} && f_avail_p != 16'd0
                && !f_cwait);
        end
        if (m_axi_arvalid) begin
            host_dma_4k_rd: assert({2'b00, m_axi_araddr[11:6]} + {1'b0, m_axi_arlen[6:0]}
                <= 8'd63 && m_axi_arlen[7] == 1'b0);
        end
        if (m_axi_arvalid && state_reg == S_I_R) begin
            host_dma_inj_desc: assert(m_axi_araddr == base_reg[RI]
                + {42'd0, (ii_reg & f_mask_i) >> 2, 6'd0} && avail_inject != 16'd0
                && m_axi_arlen == 8'd0);
        end
        if (state_reg == S_P_R || state_reg == S_I_R) begin
            host_dma_line_alone: assert(rq_empty && f_asked == 12'd1);
        end
        if (m_axi_arvalid && state_reg == S_I_AR) begin
            host_dma_inj_in_frame: assert(m_axi_araddr >= f_iaddr
                && {1'b0, m_axi_araddr} + {49'd0, m_axi_arlen, 6'd0} + 65'd64
                    <= {1'b0, f_iaddr} + {50'd0, f_ilines, 6'd0});
        end
        if (state_reg == S_P_DEC) begin
            host_dma_punt_desc_posted: assert(f_pvalid && f_rdev < 16'd4
                && f_rdev < f_phost - f_pfirst
                && p_desc_reg == f_pdata[{f_rslot[1:0], 7'd0} +: 128]);
        end
        if (state_reg == S_I_DEC) begin
            host_dma_inj_desc_posted: assert(f_lvalid && f_ldev < 16'd4
                && f_ldev < f_lhost - f_lfirst
                && i_desc_reg == f_ldata[{f_islot[1:0], 7'd0} +: 128]);
        end
        if (m_inject_tvalid && m_inject_tlast) begin
            host_dma_inj_beats: assert(f_isent + 9'd1 == f_ibeats);
        end
        if (m_inject_tvalid && rx_state_reg == RX_D) begin
            host_dma_inj_beats_max: assert(f_isent < f_ibeats);
        end
        if (m_inject_tvalid && rx_state_reg == RX_H) begin
            host_dma_inj_header: assert(!rq_empty && m_inject_tdata[IHW-1:0] == rq_hdr[rq_head]
                && rq_kind[rq_head] == K_FRAME && f_isent == 9'd0);
        end
    end
end

always @(posedge clk) begin
    if (f_past_valid && !rst && !$past(rst)) begin
        if (!$past(f_size_wr_p) && dev_reg[RP] != $past(dev_reg[RP])) begin
            host_dma_no_pass: assert($past(f_avail_p) != 16'd0
                && dev_reg[RP] == $past(dev_reg[RP]) + 16'd1);
            host_dma_desc_once: assert($past(dev_reg[RP]) == $past(f_cidx)
                && $past(f_cwait) && $past(b_hs) && $past(m_axi_bresp) == 2'b00);
        end
        if (!$past(f_size_wr_e) && dev_reg[RE] != $past(dev_reg[RE])) begin
            host_dma_no_pass_ev: assert($past(avail_event) != 16'd0
                && dev_reg[RE] == $past(dev_reg[RE]) + 16'd1);
        end
        if (!$past(f_size_wr_i) && dev_reg[RI] != $past(dev_reg[RI])) begin
            host_dma_no_pass_inj: assert($past(f_avail_i) != 16'd0
                && dev_reg[RI] == $past(dev_reg[RI]) + 16'd1 && $past(rx_done)
                && $past(!rq_empty));
        end
    end
end

`ifndef FORMAL_SPEC_ONLY
// Inductive invariants: what the engine's registers hold in each state.
always @* begin
    if (f_past_valid && !rst) begin
        host_dma_inv_wb_due: assert(since_wb_due_reg == (since_wb_reg >= WB_N));
        // The punt ring's next index and the completion on its way.
        host_dma_inv_pn: assert(pn_reg == f_pnext && cb_wait_reg == f_cissued
            && (!f_cwait || b_out_reg != 10'd0)
            && (!f_cissued || (f_cidx == dev_reg[RP] || (state_reg == S_P_CW && aw_valid_reg))
                && cb_slot_reg == (dev_reg[RP] & f_mask_p) && f_avail_p != 16'd0));
        if (f_punt_pre) begin
            // The record's slot: the next one, or (lost with a refused completion) the one
            // after dev.
            host_dma_inv_pslot: assert(p_slot_reg == (f_idx & f_mask_p)
                && f_idx - dev_reg[RP] < f_avail_p
                && (p_lost_reg ? f_idx == dev_reg[RP] + 16'd1 && !f_cissued
                    : f_idx == f_pnext));
        end
        if (state_reg == S_P_CW) begin
            // Its response may come back while the write's beat is still on its way.
            host_dma_inv_pcw: assert(p_slot_reg == (f_idx & f_mask_p)
                && (aw_valid_reg ? f_idx == dev_reg[RP] && cb_wait_reg && !f_cwait && !p_lost_reg
                        && b_out_reg == 10'd0
                    : f_cwait ? f_idx == dev_reg[RP] && f_cidx == f_idx && !p_lost_reg
                    : p_lost_reg ? f_idx == dev_reg[RP] : f_idx + 16'd1 == dev_reg[RP]));
        end
        if (f_ev_busy) begin
            host_dma_inv_eslot: assert(avail_event != 16'd0 && f_idx == dev_reg[RE]);
        end
        if (state_reg == S_P_AW || state_reg == S_P_W) begin
            host_dma_inv_room: assert(p_addr_reg >= f_buf && {2'b00, p_n_reg} <= f_len
                && {18'd0, p_n_reg} <= FRAME_MAX
                && {1'b0, f_buf} + {49'd0, f_len} <= {1'b1, 64'd0}
                && f_buf[5:0] == 6'd0 && p_addr_reg[5:0] == 6'd0
                && p_last_bytes_reg != 7'd0 && p_last_bytes_reg <= 7'd64
                && (p_beats_reg == 9'd0 ? p_n_reg == 14'd0 && state_reg == S_P_AW
                    : {1'b0, p_addr_reg} + {50'd0, p_beats_reg, 6'd0}
                        - {58'd0, 7'd64 - p_last_bytes_reg}
                        == {1'b0, f_buf} + {51'd0, p_n_reg}));
        end
        if (state_reg == S_P_W) begin
            host_dma_inv_burst: assert(p_burst_reg != 7'd0
                && {2'b00, p_burst_reg} <= p_beats_reg
                && p_burst_reg <= 7'd64
                && {2'b00, p_addr_reg[11:6]} + {1'b0, p_burst_reg} <= 8'd64);
        end
        if (aw_valid_reg) begin
            host_dma_inv_aw: assert({2'b00, aw_addr_reg[11:6]} + {1'b0, aw_len_reg[6:0]} <= 8'd63
                && !aw_len_reg[7] && (state_reg == S_EV_W || state_reg == S_P_AW
                || state_reg == S_P_W || state_reg == S_P_REST || state_reg == S_P_CW
                || state_reg == S_WB_W));
            if (state_reg == S_EV_W || state_reg == S_P_CW || state_reg == S_WB_W) begin
                host_dma_inv_aw1: assert(aw_len_reg == 8'd0);
            end
        end
        // The cached descriptor line is the last one read, and the hit flag summed ahead is
        // exact whenever the engine may take a record.
        host_dma_inv_ivalid: assert(ic_valid_reg == f_lvalid
            && {1'b0, f_avail_i} <= (17'd1 << log2_reg[RI]));
        if (ic_valid_reg || state_reg == S_I_R) begin
            host_dma_inv_iwhich: assert(ic_first_reg == f_lfirst && ic_hi_reg == f_lhost);
        end
        if (ic_valid_reg) begin
            host_dma_inv_icache: assert(ic_line_reg == f_ldata
                && ic_first_reg == f_lfirst && ic_hi_reg == f_lhost
                && f_nowrap(ic_line_reg[127:0]) && f_nowrap(ic_line_reg[255:128])
                && f_nowrap(ic_line_reg[383:256]) && f_nowrap(ic_line_reg[511:384]));
        end
        if (lo_fresh_reg && state_reg == S_IDLE) begin
            host_dma_inv_ihit: assert(ic_hit_reg == (ic_valid_reg && log2_reg[RI] >= 4'd2
                && f_ldev < 16'd4 && f_ldev < f_lhost - f_lfirst));
        end
        if (state_reg == S_I_R) begin
            host_dma_inv_iline: assert(!ic_valid_reg && !f_lvalid
                && f_lfirst == {ii_reg[15:2], 2'b00} && f_lhost - ii_reg != 16'd0
                && f_lhost - ii_reg <= avail_inject);
        end
        if (state_reg == S_I_DEC) begin
            host_dma_inv_idec: assert(avail_inject != 16'd0 && !rq_full
                && p_slot_reg == (ii_reg & f_mask_i) && f_nowrap(i_desc_reg));
        end
        // Reads asked for are the lines the receiver expects, and a descriptor line's; a read
        // address is held only while the engine issues it.
        host_dma_inv_rlines: assert(f_expect
            + (state_reg == S_P_R || state_reg == S_I_R ? 12'd1 : 12'd0) == f_asked
            && (!ar_valid_reg || state_reg == S_P_R || state_reg == S_I_R
                || state_reg == S_I_AR));
        if (state_reg == S_P_R || state_reg == S_I_R) begin
            host_dma_inv_rd1: assert(!ar_valid_reg || ar_len_reg == 8'd0);
        end
        if (state_reg == S_I_R) begin
            host_dma_inv_islot: assert(avail_inject != 16'd0 && !rq_full
                && p_slot_reg == (ii_reg & f_mask_i));
            if (ar_valid_reg) begin
                host_dma_inv_idesc_ar: assert(ar_addr_reg == base_reg[RI]
                    + {44'd0, p_slot_reg[15:2], 6'd0});
            end
        end
        // The records in flight: as many as ii is ahead of dev, no more than the host posted.
        host_dma_inv_records: assert(rq_count <= f_iq
            && {{(15 - IQW){1'b0}}, rq_count} == ii_reg - dev_reg[RI] && ii_reg - dev_reg[RI] <= f_avail_i
            && rx_state_reg != 2'd3 && (rx_state_reg == RX_IDLE || !rq_empty));
        host_dma_inv_qframe: assert(f_qlen_ok);
        // The frame whose reads the engine issues.
        if (state_reg == S_I_AR) begin
            host_dma_inv_iframe: assert(f_ilen <= FRAME_MAX[13:0] && f_ilen != 14'd0
                && f_iaddr[5:0] == 6'd0 && f_ilines == f_lines(f_ilen)
                && {1'b0, f_iaddr} + {50'd0, f_ilines, 6'd0} <= {1'b1, 64'd0}
                && p_beats_reg <= f_ilines
                && (p_beats_reg == 9'd0 || {1'b0, p_addr_reg} + {50'd0, p_beats_reg, 6'd0}
                    == {1'b0, f_iaddr} + {50'd0, f_ilines, 6'd0})
                && (p_beats_reg == 9'd0 || p_beats_reg == f_ilines
                    || p_addr_reg[11:0] == 12'd0)
                && (p_beats_reg != f_ilines || (p_addr_reg == f_iaddr && !ar_valid_reg)));
            if (ar_valid_reg) begin
                host_dma_inv_iar: assert(ar_addr_reg >= f_iaddr && !ar_len_reg[7]
                    && {2'b00, ar_addr_reg[11:6]} + {1'b0, ar_len_reg[6:0]} <= 8'd63
                    && {1'b0, ar_addr_reg} + {49'd0, ar_len_reg, 6'd0} + 65'd64
                        == (p_beats_reg == 9'd0 ? {1'b0, f_iaddr} + {50'd0, f_ilines, 6'd0}
                            : {1'b0, p_addr_reg}));
            end
        end
        // The receiver's frame: the head record's, its beats counted.
        if (rx_state_reg == RX_H || rx_state_reg == RX_D) begin
            host_dma_inv_rx: assert(rq_kind[rq_head] == K_FRAME && i_hdr_reg == rq_hdr[rq_head]
                && i_empty_reg == (f_rxlen == 14'd0) && i_left_reg != 9'd0
                && {2'b00, f_rxlen} <= FRAME_MAX[15:0] && i_left_reg <= f_ibeats
                && f_isent + i_left_reg == f_ibeats
                && i_last_bytes_reg == (f_rxlen == 14'd0 ? 7'd0
                    : f_rxlen[5:0] == 6'd0 ? 7'd64 : {1'b0, f_rxlen[5:0]}));
        end
        if (rx_state_reg == RX_H) begin
            host_dma_inv_rxh: assert(f_isent == 9'd0);
        end
        // The slot addresses' low halves summed a clock ahead (slot_iova).
        if (lo_fresh_reg) begin
            host_dma_inv_lo: assert(
                ev_lo_reg == {1'b0, base_reg[RE][21:0]} + {1'b0, dev_reg[RE] & f_mask_e, 6'd0}
                && pd_lo_reg == {1'b0, base_reg[RP][21:0]}
                    + {3'b000, (f_pnext & f_mask_p) >> 2, 6'd0}
                && p_full_reg == (host_reg[RP] == f_pnext)
                && e_full_reg == (host_reg[RE] == dev_reg[RE])
                && id_lo_reg == {1'b0, base_reg[RI][21:0]}
                    + {3'b000, (ii_reg & f_mask_i) >> 2, 6'd0}
                && i_posted_reg == (host_reg[RI] != ii_reg));
        end
        // The punt ring's kept line, as the inject ring's.
        host_dma_inv_pvalid: assert(pl_valid_reg == f_pvalid
            && {1'b0, f_avail_p} <= (17'd1 << log2_reg[RP]));
        if (pl_valid_reg || state_reg == S_P_R) begin
            host_dma_inv_pwhich: assert(pl_first_reg == f_pfirst && pl_hi_reg == f_phost);
        end
        if (pl_valid_reg) begin
            host_dma_inv_pcache: assert(pl_line_reg == f_pdata
                && f_pnowrap(pl_line_reg[127:0]) && f_pnowrap(pl_line_reg[255:128])
                && f_pnowrap(pl_line_reg[383:256]) && f_pnowrap(pl_line_reg[511:384]));
        end
        if (lo_fresh_reg && state_reg == S_IDLE) begin
            host_dma_inv_phit: assert(pl_hit_reg == f_pkept);
        end
        if (state_reg == S_P_R) begin
            host_dma_inv_pline: assert(!pl_valid_reg && !f_pvalid
                && f_pfirst == {f_idx[15:2], 2'b00} && f_phost - f_idx != 16'd0
                && f_phost - f_idx <= host_reg[RP] - f_idx);
        end
        if (state_reg == S_P_HIT || state_reg == S_P_DEC) begin
            host_dma_inv_pdec: assert(f_pvalid && f_rdev < 16'd4 && f_rdev < f_phost - f_pfirst
                && f_pnowrap(p_desc_reg)
                && p_desc_reg == f_pdata[{f_rslot[1:0], 7'd0} +: 128]);
        end
        if (f_punt_busy && state_reg != S_P_R && state_reg != S_P_HIT) begin
            host_dma_inv_pc_lo: assert(
                pc_lo_reg == {1'b0, base_reg[RP][21:0]} + {3'b000, p_slot_reg[15:2], 6'd0});
        end
        if (state_reg == S_EV_W) begin
            host_dma_inv_ev_aw: assert(!aw_valid_reg || aw_addr_reg == base_reg[RE]
                + {42'd0, dev_reg[RE] & f_mask_e, 6'd0});
        end
        if (state_reg == S_P_CW) begin
            host_dma_inv_cpl_aw: assert(!aw_valid_reg || aw_addr_reg == base_reg[RP]
                + {44'd0, p_slot_reg[15:2], 6'd0});
        end
    end
end
`endif

always @(posedge clk) begin
    if (f_past_valid && !rst && !$past(rst)) begin
        // A frame written in two bursts, a punt completed, an event completed.
        cover(state_reg == S_P_AW && $past(state_reg) == S_P_W && p_beats_reg != 9'd0);
        cover(dev_reg[RP] != $past(dev_reg[RP]) && !$past(f_size_wr_p));
        cover(dev_reg[RE] != $past(dev_reg[RE]) && !$past(f_size_wr_e));
        // An injected frame's last beat out; a frame's lines coming in while the next frame's
        // reads are issued.
        cover(m_inject_tvalid && m_inject_tready && m_inject_tlast && !i_empty_reg);
        cover(i_beat && !i_empty_reg && state_reg == S_I_AR && m_axi_arvalid);
    end
end
