// Formal properties of nlb_parser's sideband (the table bank travels there), included inside
// the module under `ifdef FORMAL (so that they can name its registers) and proven by
// hw/scripts/formal.sh; docs/verification.md "Formal proofs" lists what is proven and how.
//
// A frame is the beats from the first one taken (s_axis_tvalid && s_axis_tready) after reset
// or after a beat with tlast, to its beat with tlast. Proven: exactly one descriptor per
// frame, 9 clocks after the clock that takes its last beat (m_valid then and only then), and
// its m_user is s_axis_tuser of the frame's first beat, whatever tuser the later beats carry
// (nlb_top puts ctrl.active_bank in tuser, so a bank flip inside a frame does not reach its
// descriptor). Nothing is assumed of the stream.
//
// The tracked frame is any one: f_pick (anyseq) chooses it at its first beat. parser_inv_*
// tie the frame and the sideband registers together, which makes the proof inductive.

localparam F_LATENCY = 9;

reg f_past_valid = 1'b0;
always @(posedge clk) begin
    f_past_valid <= 1'b1;
end
always @* begin
    if (!f_past_valid) begin
        assume(rst);
    end
end

wire f_beat = s_axis_tvalid && s_axis_tready;
wire f_last = f_beat && s_axis_tlast;
reg  f_in_frame = 1'b0;    // the first beat of a frame was taken, its last not yet

(* anyseq *) reg f_pick;   // track the frame starting with this beat
reg  f_started = 1'b0;     // a frame was picked (since reset)
reg  f_tracking = 1'b0;    // ... and its last beat is still to come
reg  [USER_WIDTH-1:0] f_user = {USER_WIDTH{1'b0}};
wire f_pick_now = f_beat && !f_in_frame && f_pick && !f_started;
// Clocks since a frame's last beat (bit k: k + 1 clocks ago), for every frame and for the
// tracked one.
reg  [F_LATENCY-1:0] f_ends = {F_LATENCY{1'b0}};
reg  [F_LATENCY-1:0] f_tracked_end = {F_LATENCY{1'b0}};

always @(posedge clk) begin
    if (f_beat) begin
        f_in_frame <= !s_axis_tlast;
    end
    if (f_pick_now) begin
        f_started <= 1'b1;
        f_user <= s_axis_tuser;
        f_tracking <= !s_axis_tlast;
    end else if (f_tracking && f_last) begin
        f_tracking <= 1'b0;
    end
    f_ends <= {f_ends[F_LATENCY-2:0], f_last};
    f_tracked_end <= {f_tracked_end[F_LATENCY-2:0], f_last && (f_tracking || f_pick_now)};
    if (rst) begin
        f_in_frame <= 1'b0;
        f_started <= 1'b0;
        f_tracking <= 1'b0;
        f_ends <= {F_LATENCY{1'b0}};
        f_tracked_end <= {F_LATENCY{1'b0}};
    end
end

always @* begin
    // One descriptor per frame, F_LATENCY clocks after its last beat, and none otherwise.
    parser_one_per_frame: assert(m_valid == f_ends[F_LATENCY-1]);
    // The tracked frame's descriptor carries the first beat's sideband.
    if (f_tracked_end[F_LATENCY-1]) begin
        parser_first_user: assert(m_user == f_user);
    end
end

`ifndef FORMAL_SPEC_ONLY
integer fu;
reg f_user_ok;
always @* begin
    parser_inv_frame: assert(f_in_frame == (beat_idx_reg != {BEAT_IDX_BITS{1'b0}}));
    if (!f_started) begin
        parser_inv_unstarted: assert(!f_tracking && f_tracked_end == {F_LATENCY{1'b0}});
    end
    if (f_tracking) begin
        parser_inv_tracking: assert(f_in_frame && user_reg == f_user);
    end
    // The tracked frame's sideband in the delay line (s1, then USER_STAGES more).
    f_user_ok = !f_tracked_end[0] || s1_user_reg == f_user;
    for (fu = 1; fu < F_LATENCY; fu = fu + 1) begin
        if (f_tracked_end[fu] && user_pipe_reg[(fu-1)*USER_WIDTH +: USER_WIDTH] != f_user) begin
            f_user_ok = 1'b0;
        end
    end
    parser_inv_user_pipe: assert(f_user_ok);
end
`endif

// Reachable (covers): a tracked frame of three beats whose later beats carry other sideband,
// its descriptor out.
reg f_other_user = 1'b0;
always @(posedge clk) begin
    if (f_tracking && f_beat && s_axis_tuser != f_user) begin
        f_other_user <= 1'b1;
    end
    if (rst) begin
        f_other_user <= 1'b0;
    end
end
always @* begin
    if (!rst) begin
        parser_cover_flip_in_frame: cover(f_tracked_end[F_LATENCY-1] && f_other_user);
    end
end
