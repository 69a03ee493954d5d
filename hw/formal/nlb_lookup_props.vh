// Formal properties of nlb_lookup's table bank, included inside the module under `ifdef
// FORMAL (so that they can name its registers) and proven by hw/scripts/formal.sh;
// docs/verification.md "Formal proofs" lists what is proven and how.
//
// The bank a packet uses is latched at its first beat (nlb_top puts ctrl.active_bank in the
// parser's tuser there; the parser keeps the first beat's tuser for the descriptor, s_user
// here) and travels with the descriptor through this pipeline. Proven: every on-chip table read
// issued for a descriptor in the front stages (VIP; rule and ACL; pool), the shadow issue of an
// ICMP error included, uses the bank in that descriptor's s_user[0], whatever the other
// descriptors carry (the bank may flip between any two); the packet's VIP data taken from its
// shadow comes from the same descriptor; and the state the descriptor enters the memory stages
// with carries that bank. The memory stages (nlb_mem_stage, cut here: their outputs are free)
// carry the state through unchanged (a bench of its own, lookup.rs, and the tests of the whole
// pipeline); after them the Maglev row's bank bit, the backend read's bank and m_bank are that
// state's F_BANK by construction.
//
// The tracked descriptor is any one: f_pick (anyseq) chooses it as it is written, so one
// proof covers every descriptor. Assumed: the writer never writes into a full descriptor
// FIFO (nlb_top admits frames only while s_room is high; that is tested, not proven here).
// lookup_inv_* say where the tracked descriptor is (FIFO slot, pipeline stages), which makes
// the proof inductive (unbounded).

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end

wire [FIFO_BITS:0] f_count = wr_ptr_reg - rd_ptr_reg;
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
    if (s_valid) begin
        assume(f_count != FIFO_DEPTH);
    end
end

(* anyseq *) reg    f_pick;                  // track the descriptor written now
reg                 f_started = 1'b0;        // a descriptor was picked (since reset)
reg                 f_bank = 1'b0;           // the tracked descriptor's bank
reg                 f_queued = 1'b0;         // ... it is in the descriptor FIFO
reg [FIFO_BITS:0]   f_slot = {(FIFO_BITS+1){1'b0}};  // ... in this slot
reg [NST:0]         f_mark = {(NST+1){1'b0}};  // stage k holds an issue of it

wire f_at_head = f_queued && rd_ptr_reg == f_slot;

integer fk;
always @(posedge clk) begin
    if (s_valid && f_pick && !f_started) begin
        f_started <= 1'b1;
        f_bank <= s_user[0];
        f_queued <= 1'b1;
        f_slot <= wr_ptr_reg;
    end
    if (pop && f_at_head) begin
        f_queued <= 1'b0;
    end
    f_mark[0] <= issue && f_at_head;
    for (fk = 1; fk <= NST; fk = fk + 1) begin
        f_mark[fk] <= f_mark[fk-1];
    end
    if (rst) begin
        f_started <= 1'b0;
        f_queued <= 1'b0;
        f_mark <= {(NST+1){1'b0}};
    end
end

always @* begin
    // Every table read of the tracked descriptor uses its bank.
    if (vip_rd_en && f_mark[6]) begin
        lookup_vip_bank: assert(vip_rd_bank == f_bank);
    end
    if (rule_rd_en && f_mark[10]) begin
        lookup_rule_bank: assert(rule_rd_bank == f_bank);
    end
    if (acl_rd_en && f_mark[10]) begin
        lookup_acl_bank: assert(acl_rd_bank == f_bank);
    end
    if (pool_rd_en && f_mark[12]) begin
        lookup_pool_bank: assert(pool_rd_bank == f_bank);
    end
    // At stage C the packet of an ICMP error may take its shadow's VIP data (one stage
    // ahead): that shadow is an issue of the same descriptor, so its read used the same bank.
    if (vl_reg[8] && f_mark[8] && sc[F_REAL]) begin
        lookup_shadow_same: assert(f_mark[9] && vl_reg[9] && sc_alt[F_SHADOW]);
    end
    if (vl_reg[8] && !f_mark[8] && sc[F_REAL]) begin
        lookup_shadow_other: assert(!f_mark[9]);
    end
    // It enters the memory stages with its bank (the Maglev row's bank bit, the backend
    // read's bank and m_bank, which ctrl.packets_in_flight per bank counts down, come from it).
    if (vl_reg[NF] && f_mark[NF]) begin
        lookup_stage_bank: assert(sf[F_BANK] == f_bank);
    end
end

`ifndef FORMAL_SPEC_ONLY
wire [FIFO_BITS:0] f_head_dist = f_slot - rd_ptr_reg;
wire [DW-1:0]      f_slot_desc = fifo_mem[f_slot[FIFO_BITS-1:0]];
wire [NST:0]       f_mark_low = f_mark & ~(f_mark - 1'b1);  // its lowest set bit
always @* begin
    lookup_inv_count: assert(f_count <= FIFO_DEPTH);
    // (The descriptor's top 32 bits are its s_user; bit 0 is the bank.)
    if (f_queued) begin
        lookup_inv_queued: assert(f_head_dist < f_count
            && f_slot_desc[DW-32] == f_bank);
    end
    // The tracked descriptor is issued at most twice, its shadow then its packet (ICMP
    // errors with a quote), so at most two stages hold it, next to each other; while it is
    // queued, only its shadow can have issued (stage 0).
    if (!f_started) begin
        lookup_inv_unstarted: assert(!f_queued && f_mark == {(NST+1){1'b0}});
    end
    lookup_inv_marks: assert(f_mark == f_mark_low || f_mark == (f_mark_low | (f_mark_low << 1)));
    if (f_queued) begin
        lookup_inv_queued_marks: assert(f_mark[NST:1] == {NST{1'b0}}
            && (!f_mark[0] || (phase_reg && f_at_head)));
    end
    // A shadow issue is followed by its packet's issue, from the same head.
    if (phase_reg) begin
        lookup_inv_phase: assert(vl_reg[0] && st_reg[0][F_SHADOW] && fifo_nonempty
            && f_mark[0] == f_at_head);
    end
end
// Each stage: an issue of the tracked descriptor carries its bank; up to stage C, the packet
// issue of an ICMP error has its shadow one stage ahead.
integer fi;
reg f_stages_ok, f_pairs_ok;
always @* begin
    f_stages_ok = 1'b1;
    f_pairs_ok = 1'b1;
    for (fi = 0; fi <= NST; fi = fi + 1) begin
        if (f_mark[fi] && !(vl_reg[fi] && st_reg[fi][F_BANK] == f_bank)) begin
            f_stages_ok = 1'b0;
        end
    end
    for (fi = 1; fi <= NST; fi = fi + 1) begin
        if (f_mark[fi] && st_reg[fi][F_SHADOW] && !(f_mark[fi-1] && st_reg[fi-1][F_REAL])) begin
            f_pairs_ok = 1'b0;
        end
    end
    for (fi = 0; fi < 8; fi = fi + 1) begin
        if (vl_reg[fi] && st_reg[fi][F_REAL] && !(vl_reg[fi+1] && st_reg[fi+1][F_SHADOW]
                && f_mark[fi] == f_mark[fi+1])) begin
            f_pairs_ok = 1'b0;
        end
    end
    lookup_inv_stage: assert(f_stages_ok);
    lookup_inv_pair: assert(f_pairs_ok);
end
`endif

// Reachable (covers): the tracked descriptor's rule and ACL reads (stage E) after a descriptor
// with the other bank was written behind it; the packet of an ICMP error reaches stage C
// behind its shadow, likewise. (The later stages are as reachable, only deeper: the cover
// depth is kept to what CI affords.)
reg f_other_bank_seen = 1'b0;
always @(posedge clk) begin
    if (s_valid && f_queued && s_user[0] != f_bank) begin
        f_other_bank_seen <= 1'b1;
    end
    if (rst) begin
        f_other_bank_seen <= 1'b0;
    end
end
always @* begin
    if (!rst) begin
        lookup_cover_flip: cover(rule_rd_en && f_mark[10] && f_other_bank_seen);
        lookup_cover_shadow: cover(vl_reg[8] && f_mark[8] && sc[F_REAL] && f_other_bank_seen);
    end
end
