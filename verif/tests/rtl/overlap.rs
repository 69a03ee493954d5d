//! Control state changing while traffic flows through `nlb_top`, against the golden model.
//!
//! `differential.rs` changes control state only between bursts: banks flip while the pipeline
//! is idle, hit bits are read between traffic phases, connections are written before traffic.
//! Here a host program runs on the AXI-Lite port at random clocks while frames stream in with
//! random idle cycles and the transmit and punt streams see random back-pressure (with
//! stretches of near-total stall that fill the pipeline):
//!
//! - the active bank flips (and `enable`, `default_action` change) at random clocks; a loader
//!   waits on `ctrl.bank_in_use` as the driver's does (`driver/src/loader.rs`, `drain`), then
//!   rewrites entries of the inactive bank through the table window while the other bank
//!   serves, then flips back;
//! - `conntrack.hit_read` reads and clears hit words while traffic keeps hitting their entries;
//! - connection-table commands (install with the valid bit last, overwrite in place,
//!   invalidate, and bad index / bad command) over the 32 entries of one hit word, which the
//!   traffic's hot flows hit, each followed by reads of `status`, `count`, `index` and the data
//!   words (half the installs' two writes back to back, the reads after the second only: the
//!   second is answered while the first may still be on its way to memory).
//!
//! How the model is told what each packet saw (docs/verification.md, "Control changes under
//! traffic"): the golden model runs a packet atomically with an explicit context (`Context`:
//! tables, bank, enable, default action, connection table), so it expresses every overlap by
//! the context it is given:
//!
//! - **ctrl** (bank, enable, default action) is what the register holds in the clock of the
//!   packet's first beat (docs/pipeline.md §13, "Bank latch"): `nlb_top`'s `m_mon_*` ports show
//!   the value a first beat in that clock latches; a change of them must fall inside the
//!   AXI-Lite write that asked for it. The model gets that bank's tables as they were then.
//! - **connection table**: a command is atomic between two packets (§13, "Connection table");
//!   which packets come before it is not fixed by the spec, only bounded by time: a packet whose
//!   result came out before the command was issued saw the old entry, one whose first beat came
//!   after the command's response saw the new one. Packets in between may see either, but in
//!   packet order: the test runs the model with every version the packet may have seen and takes
//!   the earliest that gives the RTL's result, never going back to an earlier version.
//! - **hit bits**: a read takes the hit bits set up to its clock c0 (`m_mon_hit_read`,
//!   `nlb_hit_bits`: a set in c0 or before is in the read and cleared, one in c0 + 1 or later
//!   stays for the next read). Every set (`m_mon_hit_set`) must be the hit of a packet's result
//!   (same entry, inside that packet's first beat .. result). Each read must return exactly the
//!   entries hit since the previous read of its word, and a final read of every word after
//!   traffic returns the rest: every hit appears in exactly one read.
//! - **packets in flight**: at every clock, `ctrl.packets_in_flight` and `ctrl.bank_in_use` (as
//!   the register file reads them, `m_mon_packets_in_flight` / `m_mon_bank_in_use`) must equal
//!   the count of packets whose first beat came before this clock and whose result (or drop,
//!   `m_drop_valid`) did not, per the bank each latched: a bank reads free exactly in the clock
//!   after its last packet's result. Register reads of both (the loader's polls) must return a
//!   value the monitor showed during the read.
//! - **drops**: the receive side has no back-pressure (docs/pipeline.md §14.4); a received frame
//!   it has no room for (the output stalls) is dropped whole and reported; the test leaves it
//!   out of the model and counts it as the RTL does.
//!
//! The connection table and the Maglev slots are on the HBM model (`top_hbm`), so that commands
//! race reads that take 60-240 clocks and return out of order (docs/pipeline.md §14.3).
//!
//! Every packet's result, transmitted frame, punt and event is compared with the model's, in
//! order, and the counters, the connection count and every hit word at the end. Overlap bins
//! (where flips fall in a frame, with back-pressure, packets whose lookup spans a flip, drains,
//! hit reads racing a hit in c0 - 1, c0, c0 + 1, connection-table commands racing packets of
//! their entry) are printed; the test fails if one is never hit. `NLB_OVERLAP_CASES` (default 10)
//! cases of `NLB_OVERLAP_FRAMES` (default 6000) frames; `NLB_SEED` replays.

use firmware_sim::conntrack::ConnTable;
use firmware_sim::parse::{self, Parsed};
use firmware_sim::pipeline::{process, process_injected, Context, CtOutcome, PacketResult};
use firmware_sim::{CounterKind, Counters};
use nlb_hw::blocks::{conntrack, ctrl, table};
use nlb_hw::enums::{DefaultAction, Reason, TableCmd, Verdict};
use nlb_hw::layouts::{CtEntry, InjectHeader, LearnEvent};
use nlb_hw::{NicSettings, Profile, Tables};
use nlb_testkit::hex;
use nlb_verif::axil::Completion;
use nlb_verif::bench::{seed_from_env, trace_always, wave_path, Agent};
use nlb_verif::hbm::HbmConfig;
use nlb_verif::scenario::{flow_frame, Flow, Scenario};
use nlb_verif::top::{take_events, take_frames, take_punts, PuntedFrame, TopBench};
use nlb_verif::{Port, VerifError, Verilated};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Bytes of a punted frame the punt stream carries (the punt window, docs/pipeline.md 13).
const PUNT_BYTES: usize = 9728;
/// Clocks of waveform before a failure.
const WAVE_WINDOW: u64 = 600;
/// Entries per hit word (`hit_read` returns 32 bits).
const HIT_WORD: u32 = 32;
/// Beats of the parser's header window (192 bytes): a flip while fewer than this many beats
/// of a frame went in falls in its header.
const HEADER_BEATS: u32 = 3;

fn sim_profile() -> &'static Profile {
    Profile::by_name("sim").expect("the sim profile exists")
}

/// A failure: what differs and the clock it was seen in.
struct Mismatch(String, u64);

/// Coverage: bin name -> count.
use nlb_verif::coverage::{self, Bins};

fn bin(bins: &mut Bins, name: &str) {
    coverage::hit(bins, name);
}

/// The ctrl bits a first beat latches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Latched {
    bank: u8,
    enable: bool,
    drop: bool,
}

/// A first beat on the merged input (received or injected), with what it latched.
#[derive(Debug, Clone, Copy)]
struct FirstBeat {
    cycle: u64,
    injected: bool,
    ctrl: Latched,
}

/// Where the input stood in the clock a ctrl bit changed.
#[derive(Debug, Clone, Copy)]
struct CtrlChange {
    cycle: u64,
    from: Latched,
    to: Latched,
    /// Beats of the frame in progress taken before this clock (None: between frames).
    beats_in: Option<u32>,
    /// A first beat is taken in this clock (it latches the new value).
    first_beat_now: bool,
    /// A first beat was taken in the clock before (it latched the old value).
    first_beat_before: bool,
    /// The transmit or punt stream offered a beat that was not taken.
    out_stalled: bool,
    /// Admission closed: a beat offered on the inject input was not taken, or a received
    /// frame was dropped for lack of room (the receive input takes every beat).
    in_stalled: bool,
    /// Packets in flight per bank (the test's count) in this clock.
    in_flight: [u32; 2],
}

/// Watches `nlb_top` every clock: first beats and what they latch, ctrl changes, the packets
/// in flight per bank against the registers, hit-bit sets and hit reads.
struct Watch {
    rx_valid: Port,
    rx_last: Port,
    inj_valid: Port,
    inj_ready: Port,
    inj_last: Port,
    res_valid: Port,
    res_inject: Port,
    drop_valid: Port,
    drop_seq: Port,
    active_bank: Port,
    enable: Port,
    default_action: Port,
    packets_in_flight: Port,
    bank_in_use: Port,
    hit_set: Port,
    hit_set_index: Port,
    hit_read: Port,
    tx_valid: Port,
    tx_ready: Port,
    punt_valid: Port,
    punt_ready: Port,
    pass_valid: Port,
    pass_ready: Port,
    /// Beats of the frame in progress on the receive and the inject input (None: between
    /// frames).
    beats_in: Option<u32>,
    inj_beats_in: Option<u32>,
    last_first_beat: Option<u64>,
    ctrl: Option<Latched>,
    /// Banks latched by packets whose result has not come out, oldest first: received frames
    /// (with their number) and injected ones (results come in the order the frames pass the
    /// merge of the two, which an injected frame may enter ahead of received frames waiting in
    /// the receive queue).
    latched_rx: VecDeque<(u32, u8)>,
    latched_inj: VecDeque<u8>,
    rx_seq: u32,
    /// Packets in flight per bank as the test counts them (first beat before this clock,
    /// result not before it).
    expect: [u32; 2],
    first_beats: VecDeque<FirstBeat>,
    ctrl_changes: VecDeque<CtrlChange>,
    hit_sets: VecDeque<(u64, u32)>,
    hit_reads: VecDeque<u64>,
    /// (clock, packets_in_flight, bank_in_use word) whenever they change.
    stats: VecDeque<(u64, u32, u32)>,
    /// A bank whose last packet left while the other bank had packets in flight.
    drained_under_traffic: u64,
    errors: Vec<(String, u64)>,
}

impl Watch {
    fn new(sim: &Verilated) -> Result<Watch, VerifError> {
        Ok(Watch {
            rx_valid: sim.port("s_axis_rx_tvalid")?,
            rx_last: sim.port("s_axis_rx_tlast")?,
            inj_valid: sim.port("s_axis_inject_tvalid")?,
            inj_ready: sim.port("s_axis_inject_tready")?,
            inj_last: sim.port("s_axis_inject_tlast")?,
            res_valid: sim.port("m_res_valid")?,
            res_inject: sim.port("m_res_inject")?,
            drop_valid: sim.port("m_drop_valid")?,
            drop_seq: sim.port("m_drop_seq")?,
            active_bank: sim.port("m_mon_active_bank")?,
            enable: sim.port("m_mon_enable")?,
            default_action: sim.port("m_mon_default_action")?,
            packets_in_flight: sim.port("m_mon_packets_in_flight")?,
            bank_in_use: sim.port("m_mon_bank_in_use")?,
            hit_set: sim.port("m_mon_hit_set")?,
            hit_set_index: sim.port("m_mon_hit_set_index")?,
            hit_read: sim.port("m_mon_hit_read")?,
            tx_valid: sim.port("m_axis_tx_tvalid")?,
            tx_ready: sim.port("m_axis_tx_tready")?,
            punt_valid: sim.port("m_axis_punt_tvalid")?,
            punt_ready: sim.port("m_axis_punt_tready")?,
            pass_valid: sim.port("m_axis_pass_tvalid")?,
            pass_ready: sim.port("m_axis_pass_tready")?,
            beats_in: None,
            inj_beats_in: None,
            last_first_beat: None,
            ctrl: None,
            latched_rx: VecDeque::new(),
            latched_inj: VecDeque::new(),
            rx_seq: 0,
            expect: [0; 2],
            first_beats: VecDeque::new(),
            ctrl_changes: VecDeque::new(),
            hit_sets: VecDeque::new(),
            hit_reads: VecDeque::new(),
            stats: VecDeque::new(),
            drained_under_traffic: 0,
            errors: Vec::new(),
        })
    }

    fn error(&mut self, what: String, cycle: u64) {
        if self.errors.len() < 8 {
            self.errors.push((what, cycle));
        }
    }
}

impl Agent for Watch {
    fn drive(&mut self, _sim: &mut Verilated, _rng: &mut StdRng) -> Result<(), VerifError> {
        Ok(())
    }

    fn observe(&mut self, sim: &mut Verilated) -> Result<(), VerifError> {
        let cycle = sim.cycle();
        // What the registers read in this clock, against the packets the test counts in
        // flight (first beat before this clock, result not before it).
        let in_flight = sim.get_u64(self.packets_in_flight)? as u32;
        let in_use = sim.get_u64(self.bank_in_use)? as u32;
        let want_use = ctrl::BankInUse {
            bank0: self.expect[0] > 0,
            bank1: self.expect[1] > 0,
        }
        .word();
        if in_flight != self.expect[0] + self.expect[1] || in_use != want_use {
            self.error(
                format!(
                    "packets_in_flight {in_flight} bank_in_use {in_use:#x}; the test counts {} \
                     on bank 0 and {} on bank 1 (bank_in_use {want_use:#x})",
                    self.expect[0], self.expect[1]
                ),
                cycle,
            );
        }
        if self.stats.back().map(|s| (s.1, s.2)) != Some((in_flight, in_use)) {
            self.stats.push_back((cycle, in_flight, in_use));
        }

        let now = Latched {
            bank: u8::from(sim.get_bit(self.active_bank)?),
            enable: sim.get_bit(self.enable)?,
            drop: DefaultAction::from_value(sim.get_u64(self.default_action)? as u32)
                == Some(DefaultAction::Drop),
        };
        // The receive port takes every beat offered.
        let rx = sim.get_bit(self.rx_valid)?;
        let inj = sim.get_bit(self.inj_valid)? && sim.get_bit(self.inj_ready)?;
        let rx_first = rx && self.beats_in.is_none();
        let inj_first = inj && self.inj_beats_in.is_none();
        let first_now = rx_first || inj_first;
        if let Some(from) = self.ctrl {
            if from != now {
                let out_stalled = (sim.get_bit(self.tx_valid)? && !sim.get_bit(self.tx_ready)?)
                    || (sim.get_bit(self.punt_valid)? && !sim.get_bit(self.punt_ready)?)
                    || (sim.get_bit(self.pass_valid)? && !sim.get_bit(self.pass_ready)?);
                // Admission closed: an injected beat waits, or a received frame is dropped
                // for lack of room.
                let in_stalled = (sim.get_bit(self.inj_valid)? && !sim.get_bit(self.inj_ready)?)
                    || sim.get_bit(self.drop_valid)?;
                self.ctrl_changes.push_back(CtrlChange {
                    cycle,
                    from,
                    to: now,
                    beats_in: self.beats_in.or(self.inj_beats_in),
                    first_beat_now: first_now,
                    first_beat_before: self.last_first_beat == Some(cycle.wrapping_sub(1)),
                    out_stalled,
                    in_stalled,
                    in_flight: self.expect,
                });
            }
        }
        self.ctrl = Some(now);

        // The two inputs are independent (received frames wait in a queue while an injected one
        // passes): each has its own frames, first beats and latches.
        for (taken, first, injected) in [(rx, rx_first, false), (inj, inj_first, true)] {
            if !taken {
                continue;
            }
            let last = sim.get_bit(if injected {
                self.inj_last
            } else {
                self.rx_last
            })?;
            if first {
                self.first_beats.push_back(FirstBeat {
                    cycle,
                    injected,
                    ctrl: now,
                });
                self.last_first_beat = Some(cycle);
                if injected {
                    self.latched_inj.push_back(now.bank);
                } else {
                    self.latched_rx.push_back((self.rx_seq, now.bank));
                    self.rx_seq = self.rx_seq.wrapping_add(1);
                }
                // Counts change at the coming edge: a first beat now is in flight from the
                // next clock on, a result now is not.
                self.expect[usize::from(now.bank)] += 1;
            }
            let count = if injected {
                &mut self.inj_beats_in
            } else {
                &mut self.beats_in
            };
            *count = if last {
                None
            } else {
                Some(count.unwrap_or(0) + 1)
            };
        }
        let mut left = Vec::new();
        if sim.get_bit(self.drop_valid)? {
            let seq = sim.get_u64(self.drop_seq)? as u32;
            match self.latched_rx.iter().position(|&(s, _)| s == seq) {
                Some(i) => {
                    let (_, b) = self.latched_rx.remove(i).expect("found");
                    left.push(b);
                }
                None => self.error(
                    format!("a drop of received frame {seq}, not in flight"),
                    cycle,
                ),
            }
        }
        if sim.get_bit(self.res_valid)? {
            let b = if sim.get_bit(self.res_inject)? {
                self.latched_inj.pop_front()
            } else {
                self.latched_rx.pop_front().map(|(_, b)| b)
            };
            match b {
                Some(b) => left.push(b),
                None => self.error("a result with no first beat before it".into(), cycle),
            }
        }
        for b in left {
            let b = usize::from(b);
            self.expect[b] -= 1;
            if self.expect[b] == 0 && self.expect[1 - b] > 0 {
                self.drained_under_traffic += 1;
            }
        }
        if sim.get_bit(self.hit_set)? {
            let index = sim.get_u64(self.hit_set_index)? as u32;
            self.hit_sets.push_back((cycle, index));
        }
        if sim.get_bit(self.hit_read)? {
            self.hit_reads.push_back(cycle);
        }
        Ok(())
    }
}

/// A frame waiting for its first beat, then in the pipeline until its result.
struct Packet {
    frame: Vec<u8>,
    inject: Option<InjectHeader>,
    /// Clock of the first beat and what it latched, with that bank's tables then.
    first: FirstBeat,
    tables: Rc<Tables>,
}

/// One connection-table command that changed the model's table: version `id` of the table
/// is the one after it.
struct CtVersion {
    id: u64,
    issued: u64,
    /// Clock its response was taken (None while it runs).
    done: Option<u64>,
    index: u32,
    old: CtEntry,
    new: CtEntry,
}

/// What a host access checks when it completes.
#[derive(Debug, Clone)]
enum Check {
    /// A data word or select write: later reads check its effect.
    Plain,
    /// ctrl.active_bank / enable / default_action write: the ctrl value after it.
    Ctrl(Latched),
    /// A poll of bank_in_use (`Some(bank)`: the loader waiting for `bank` to drain).
    BankInUse(Option<u8>),
    /// A poll of packets_in_flight.
    InFlight,
    /// table.cmd WRITE_AT of the loader.
    TableCmd,
    /// table.status after a loader write.
    TableStatus,
    /// conntrack.index written (hit reads or a WRITE follow).
    Index(u32),
    /// conntrack.hit_read.
    HitRead,
    /// conntrack.data word written by the host.
    CtData(usize, u32),
    /// conntrack.cmd.
    CtCmd(CtCmd),
    /// conntrack.status, count, index, data word after a command.
    CtStatus,
    CtCount,
    CtIndex,
    CtWord(usize),
}

/// A connection-table command as the reference sees it.
#[derive(Debug, Clone)]
struct CtCmd {
    /// Bin name of the command's kind.
    kind: &'static str,
    /// The raw cmd word.
    word: u32,
    /// What it does if good: (index, Some(entry) for a write / None for a read).
    action: Option<(u32, Option<CtEntry>)>,
}

/// One host access.
#[derive(Debug, Clone)]
struct HostOp {
    addr: u32,
    write: Option<u32>,
    check: Check,
}

impl HostOp {
    fn write(addr: u32, value: u32, check: Check) -> HostOp {
        HostOp {
            addr,
            write: Some(value),
            check,
        }
    }

    fn read(addr: u32, check: Check) -> HostOp {
        HostOp {
            addr,
            write: None,
            check,
        }
    }
}

/// The connection-table reference, from docs/regmap.md and docs/pipeline.md §13 (not from the
/// RTL): the entries written, the error bit of the last command, the index register, the data
/// words.
struct CtRef {
    entries: HashMap<u32, CtEntry>,
    error: bool,
    index: u32,
    data: [u32; conntrack::DATA_COUNT as usize],
    len: u32,
}

impl CtRef {
    fn entry(&self, index: u32) -> CtEntry {
        self.entries.get(&index).copied().unwrap_or_default()
    }

    fn count(&self) -> u32 {
        self.entries.values().filter(|e| e.valid).count() as u32
    }

    /// What a cmd word does: Some((index, write)) for a good command, None for one that sets
    /// the error bit (docs/pipeline.md §13 "Commands").
    fn decode(&self, word: u32) -> Option<(u32, bool)> {
        let op = TableCmd::from_value(conntrack::cmd::OP.get(word))?;
        let field = conntrack::cmd::INDEX.get(word);
        let (index, write) = match op {
            TableCmd::Write | TableCmd::Read if field != 0 => return None,
            TableCmd::Write => (self.index, true),
            TableCmd::Read => (self.index, false),
            TableCmd::WriteAt => (field, true),
            TableCmd::ReadAt => (field, false),
        };
        (index < self.len).then_some((index, write))
    }
}

fn pack(e: &CtEntry) -> [u32; CtEntry::WORDS] {
    let words = e.pack().expect("connection-table entries of the test pack");
    let mut out = [0u32; CtEntry::WORDS];
    out.copy_from_slice(&words[..CtEntry::WORDS]);
    out
}

/// One case's state.
struct Case<'b> {
    dut: TopBench,
    watch: Watch,
    rng: StdRng,
    profile: &'static Profile,
    bins: &'b mut Bins,
    banks: [Scenario; 2],
    tables: [Rc<Tables>; 2],
    settings: [NicSettings; 2],
    hot: Vec<Flow>,
    /// The hit word (32 entries) the connection-table commands and the hit reads work on.
    focus: u32,
    // Traffic.
    rx_queue: VecDeque<Vec<u8>>,
    inj_queue: VecDeque<(Vec<u8>, InjectHeader)>,
    /// Frames between their first beat and their result: received ones (with their number
    /// among received frames) and injected ones, each in order.
    in_flight_rx: VecDeque<(u32, Packet)>,
    in_flight_inj: VecDeque<Packet>,
    rx_seq: u32,
    dropped: usize,
    generated: usize,
    frames: usize,
    gap_until: u64,
    stall_until: u64,
    storm: bool,
    regime_until: u64,
    base_backpressure: f64,
    /// Clocks a bank flip became visible (for the packets whose lookup spans one).
    flips: VecDeque<u64>,
    // Connection table: the model's table at the newest version, the commands since the
    // oldest version a packet may still see, the version the last packet saw.
    ct: ConnTable,
    ct_log: VecDeque<CtVersion>,
    ct_latest: u64,
    ct_seen: u64,
    ct_ref: CtRef,
    /// Good writes (index, issued, done, kind) that packets still in the pipeline may overlap.
    recent_cmds: VecDeque<(u32, u64, Option<u64>, &'static str)>,
    /// Entries of the focus word hit last (commands favour them, to race their hits).
    recently_hit: VecDeque<u32>,
    // Hits: sets not yet matched with a result; per hit word, sets not yet read.
    unclaimed_hits: VecDeque<(u64, u32)>,
    unread_hits: HashMap<u32, Vec<(u64, u32)>>,
    // Host program.
    host: VecDeque<HostOp>,
    current: Option<(HostOp, u64)>,
    host_wait_until: u64,
    host_running: bool,
    // Outputs the model expects, in order.
    want_tx: VecDeque<(Vec<u8>, Vec<u8>)>,
    want_punt: VecDeque<PuntedFrame>,
    /// PASS frames: the frame as received (docs/pipeline.md section 9).
    want_pass: VecDeque<Vec<u8>>,
    want_events: VecDeque<LearnEvent>,
    counters: Counters,
    checked: usize,
    out: Vec<u8>,
    wave: Option<(std::path::PathBuf, u64)>,
}

/// Random ctrl settings (what the editor writes into encapsulated frames).
fn random_settings(rng: &mut StdRng) -> NicSettings {
    NicSettings {
        default_action: DefaultAction::Pass,
        local_mac: rng.random_range(0..1u64 << ctrl::local_mac::WIDTH),
        gue_port: rng.random(),
        outer_src_v4: rng.random(),
        outer_src_v4_len: rng.random_range(0..=32),
        outer_src_v6: rng.random(),
        outer_src_v6_len: rng.random_range(0..=128),
    }
}

/// Flows whose connection-table bucket lies in hit word `focus` and that some bank tracks (a
/// frame of them hits an entry the model holds), found by trying random flows to the banks'
/// VIPs.
fn hot_flows(
    banks: &[Scenario; 2],
    profile: &Profile,
    focus: u32,
    settings: &NicSettings,
    rng: &mut StdRng,
) -> Vec<Flow> {
    let ways = profile.ct_ways;
    let mut out: Vec<Flow> = Vec::new();
    let mut out_buf = vec![0u8; firmware_sim::action::MAX_FRAME];
    for _ in 0..400_000 {
        if out.len() >= 14 {
            break;
        }
        let Some(mut f) = banks[rng.random_range(0..2)].random_flow(rng) else {
            break;
        };
        if f.protocol == 6 || f.protocol == 17 {
            f.client_port = rng.random();
        }
        let bucket = nlb_reference::conntrack::bucket(&f.tuple5(), profile.ct_buckets);
        if bucket * ways / HIT_WORD != focus || out.contains(&f) {
            continue;
        }
        let mut ct = ConnTable::new(profile.ct_buckets, profile.ct_ways);
        if ct.write(bucket * ways, f.ct_entry(1, 1, 0)).is_err() {
            continue;
        }
        let tracked = (0..12).any(|_| {
            let frame = flow_frame(f, rng);
            banks.iter().enumerate().any(|(b, s)| {
                let ctx = Context {
                    tables: &s.tables,
                    bank: b as u8,
                    settings,
                    enabled: true,
                    conntrack: &ct,
                };
                matches!(process(&ctx, &frame, &mut out_buf), Ok(r) if r.conntrack == CtOutcome::Hit)
            })
        });
        if tracked {
            out.push(f);
        }
    }
    out
}

impl<'b> Case<'b> {
    fn setup(
        seed: u64,
        frames: usize,
        bins: &'b mut Bins,
        wave: Option<(std::path::PathBuf, u64)>,
    ) -> Result<Case<'b>, VerifError> {
        let profile = sim_profile();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut banks = [
            Scenario::random(profile, &mut rng),
            Scenario::random(profile, &mut rng),
        ];
        let settings = random_settings(&mut rng);
        let focus = rng.random_range(0..profile.ct_entries() / HIT_WORD);
        let hot = hot_flows(&banks, profile, focus, &settings, &mut rng);
        // The banks' own hot flows, plus these, repeat in their traffic.
        for s in banks.iter_mut() {
            s.hot.extend(hot.iter().copied());
        }
        let rx_idle = rng.random_range(0.0..0.4);
        let base_backpressure = rng.random_range(0.0..0.4);
        // The initial tables load on a quick memory; traffic and the host program's commands
        // run on the realistic one.
        let hbm = HbmConfig::realistic(seed as u32);
        let mut dut = TopBench::with_memory(
            Some(&HbmConfig::quick(seed as u32)),
            seed,
            None,
            rx_idle,
            base_backpressure,
            0.2,
        )?;
        dut.events.backpressure = rng.random_range(0.0..0.3);
        if let Some((path, 0)) = &wave {
            dut.bench.sim.trace_to(path)?;
        }
        dut.write_settings(&settings)?;
        dut.load_bank(0, &banks[0].tables)?;
        dut.load_bank(1, &banks[1].tables)?;
        let mut ct = ConnTable::new(profile.ct_buckets, profile.ct_ways);
        let mut ct_ref = CtRef {
            entries: HashMap::new(),
            error: false,
            index: 0,
            data: [0; conntrack::DATA_COUNT as usize],
            len: profile.ct_entries(),
        };
        for s in &banks {
            for (index, e) in s.conntrack(profile, &mut rng) {
                if index / HIT_WORD == focus {
                    continue; // the command sequences own these entries
                }
                dut.write_ct(index, &e)?;
                ct.write(index, e)
                    .map_err(|e| VerifError::Setup(format!("model conntrack: {e}")))?;
                ct_ref.entries.insert(index, e);
                ct_ref.index = index;
                ct_ref.data[..CtEntry::WORDS].copy_from_slice(&pack(&e));
            }
        }
        // A few connections of the hot flows in the focus word to start with.
        for f in hot.iter().take(6) {
            let bucket = nlb_reference::conntrack::bucket(&f.tuple5(), profile.ct_buckets);
            let index = bucket * profile.ct_ways + rng.random_range(0..profile.ct_ways);
            if ct_ref.entry(index).valid {
                continue;
            }
            let e = f.ct_entry(rng.random_range(0..48), rng.random_range(0..32), 7);
            dut.write_ct(index, &e)?;
            ct.write(index, e)
                .map_err(|e| VerifError::Setup(format!("model conntrack: {e}")))?;
            ct_ref.entries.insert(index, e);
            ct_ref.index = index;
            ct_ref.data[..CtEntry::WORDS].copy_from_slice(&pack(&e));
        }
        dut.write32(ctrl::ENABLE, ctrl::Enable { enable: true }.word())?;
        dut.set_hbm(&hbm)?;
        let mut drop = settings;
        drop.default_action = DefaultAction::Drop;
        let watch = Watch::new(&dut.bench.sim)?;
        let tables = [
            Rc::new(banks[0].tables.clone()),
            Rc::new(banks[1].tables.clone()),
        ];
        Ok(Case {
            dut,
            watch,
            rng,
            profile,
            bins,
            banks,
            tables,
            settings: [settings, drop],
            hot,
            focus,
            rx_queue: VecDeque::new(),
            inj_queue: VecDeque::new(),
            in_flight_rx: VecDeque::new(),
            in_flight_inj: VecDeque::new(),
            rx_seq: 0,
            dropped: 0,
            generated: 0,
            frames,
            gap_until: 0,
            stall_until: 0,
            storm: false,
            regime_until: 0,
            base_backpressure,
            flips: VecDeque::new(),
            ct,
            ct_log: VecDeque::new(),
            ct_latest: 0,
            ct_seen: 0,
            ct_ref,
            recent_cmds: VecDeque::new(),
            recently_hit: VecDeque::new(),
            unclaimed_hits: VecDeque::new(),
            unread_hits: HashMap::new(),
            host: VecDeque::new(),
            current: None,
            host_wait_until: 0,
            host_running: true,
            want_tx: VecDeque::new(),
            want_punt: VecDeque::new(),
            want_pass: VecDeque::new(),
            want_events: VecDeque::new(),
            counters: Counters::new(profile),
            checked: 0,
            out: vec![0u8; firmware_sim::action::MAX_FRAME],
            wave,
        })
    }

    fn cycle(&self) -> u64 {
        self.dut.bench.sim.cycle()
    }

    fn fail<T>(&self, what: String) -> Result<Result<T, Mismatch>, VerifError> {
        Ok(Err(Mismatch(what, self.cycle())))
    }

    /// One clock with every agent and the watch.
    fn step(&mut self) -> Result<(), VerifError> {
        if let Some((path, from)) = &self.wave {
            if *from > 0
                && self.dut.bench.sim.cycle() == *from
                && self.dut.bench.sim.trace_path().is_none()
            {
                let path = path.clone();
                self.dut.bench.sim.trace_to(&path)?;
            }
        }
        let d = &mut self.dut;
        d.bench.step(&mut [
            &mut d.axil,
            &mut d.rx,
            &mut d.inject,
            &mut d.mon,
            &mut d.tx,
            &mut d.punt,
            &mut d.pass,
            &mut d.events,
            &mut self.watch,
        ])
    }

    // ---- traffic ---------------------------------------------------------------------------

    fn feed(&mut self) {
        let now = self.cycle();
        // Stretches of near-total output stall fill the pipeline, so flips meet back-pressure
        // and a full packet FIFO.
        if now >= self.stall_until {
            let bp = if self.rng.random_bool(0.0005) {
                self.stall_until = now + self.rng.random_range(200..2500);
                0.97
            } else {
                self.base_backpressure
            };
            self.dut.tx.backpressure = bp;
            self.dut.punt.backpressure = bp;
            self.dut.pass.backpressure = bp;
        }
        if self.generated >= self.frames || now < self.gap_until {
            return;
        }
        if self.dut.rx.pending() + self.dut.inject.pending() > 2 {
            return;
        }
        if self.rng.random_bool(0.01) {
            // A pause: the pipeline drains and both banks go idle.
            self.gap_until = now + self.rng.random_range(20..400);
            return;
        }
        if now >= self.regime_until {
            // Stretches of hit storms (mostly plain frames of the hot flows, whose entries
            // the commands and hit reads work on) between stretches of mixed traffic.
            self.storm = self.rng.random_bool(0.5);
            self.regime_until = now + self.rng.random_range(500..3000);
        }
        self.generated += 1;
        let roll = self.rng.random_range(0..100);
        if self.storm && roll < 85 && !self.hot.is_empty() {
            let frame = self.plain_hot_frame();
            self.dut.send(&frame);
            self.rx_queue.push_back(frame);
            return;
        }
        let s = &self.banks[self.rng.random_range(0..2)];
        if roll < 5 {
            let frame = s.frame(&mut self.rng);
            let header = InjectHeader {
                backend: if self.rng.random_bool(0.9) {
                    self.rng.random_range(0..56)
                } else {
                    self.rng.random()
                },
                pool: self.rng.random_range(0..24),
                frame_len: frame.len().min(0x3fff) as u16,
            };
            self.dut.inject(&frame, header.backend, header.pool);
            self.inj_queue.push_back((frame, header));
        } else {
            let frame = if roll < 50 && !self.hot.is_empty() {
                let f = self.hot[self.rng.random_range(0..self.hot.len())];
                flow_frame(f, &mut self.rng)
            } else {
                s.frame(&mut self.rng)
            };
            self.dut.send(&frame);
            self.rx_queue.push_back(frame);
        }
    }

    /// A frame of a hot flow that looks the connection table up: whole (no fragment), no
    /// ICMP error, not a TCP SYN alone, short (a few tries of `flow_frame`).
    fn plain_hot_frame(&mut self) -> Vec<u8> {
        let f = self.hot[self.rng.random_range(0..self.hot.len())];
        let mut frame = flow_frame(f, &mut self.rng);
        for _ in 0..12 {
            if let Ok(Parsed::Ip(h)) = parse::parse(&frame) {
                let syn_only = h.protocol == 6 && h.tcp_flags == parse::tcp_flags::SYN;
                if !h.is_fragment && !h.icmp_error && !syn_only && frame.len() <= 256 {
                    break;
                }
            }
            frame = flow_frame(f, &mut self.rng);
        }
        frame
    }

    // ---- host program ----------------------------------------------------------------------

    /// Picks the next host action when the last one is done.
    fn plan(&mut self) {
        let now = self.cycle();
        if !self.host_running
            || !self.host.is_empty()
            || self.current.is_some()
            || now < self.host_wait_until
        {
            return;
        }
        let cur = self.watch.ctrl.unwrap_or(Latched {
            bank: 0,
            enable: true,
            drop: false,
        });
        match self.rng.random_range(0..100) {
            0..=21 => {
                // A bare flip.
                self.host.push_back(HostOp::write(
                    ctrl::ACTIVE_BANK,
                    ctrl::ActiveBank {
                        bank: cur.bank == 0,
                    }
                    .word(),
                    Check::Ctrl(Latched {
                        bank: 1 - cur.bank,
                        ..cur
                    }),
                ));
            }
            22..=31 => {
                // A load as the driver's loader does it: wait until the inactive bank
                // drains, rewrite entries of it, flip to it.
                self.host.push_back(HostOp::read(
                    ctrl::BANK_IN_USE,
                    Check::BankInUse(Some(1 - cur.bank)),
                ));
            }
            32..=37 => {
                // enable / default action; the pipeline is disabled only briefly.
                let next = if !cur.enable || self.rng.random_bool(0.3) {
                    Latched {
                        enable: !cur.enable,
                        ..cur
                    }
                } else {
                    Latched {
                        drop: !cur.drop,
                        ..cur
                    }
                };
                let op = if next.enable != cur.enable {
                    HostOp::write(
                        ctrl::ENABLE,
                        ctrl::Enable {
                            enable: next.enable,
                        }
                        .word(),
                        Check::Ctrl(next),
                    )
                } else {
                    HostOp::write(
                        ctrl::DEFAULT_ACTION,
                        ctrl::DefaultAction {
                            action: if next.drop {
                                DefaultAction::Drop
                            } else {
                                DefaultAction::Pass
                            },
                        }
                        .word(),
                        Check::Ctrl(next),
                    )
                };
                self.host.push_back(op);
            }
            38..=59 => self.plan_hit_reads(),
            60..=91 => self.plan_ct_command(),
            _ => {
                let check = if self.rng.random_bool(0.5) {
                    HostOp::read(ctrl::PACKETS_IN_FLIGHT, Check::InFlight)
                } else {
                    HostOp::read(ctrl::BANK_IN_USE, Check::BankInUse(None))
                };
                for _ in 0..self.rng.random_range(1..6) {
                    self.host.push_back(check.clone());
                }
            }
        }
    }

    fn plan_hit_reads(&mut self) {
        let entries = self.profile.ct_entries();
        let index = match self.rng.random_range(0..20) {
            0 => entries + self.rng.random_range(0..1000), // beyond the table: reads 0
            1..=3 => self.rng.random_range(0..entries),
            _ => self.focus * HIT_WORD + self.rng.random_range(0..HIT_WORD),
        };
        self.host
            .push_back(HostOp::write(conntrack::INDEX, index, Check::Index(index)));
        for _ in 0..self.rng.random_range(1..8) {
            self.host
                .push_back(HostOp::read(conntrack::HIT_READ, Check::HitRead));
        }
    }

    /// An entry of the focus word for a command: mostly in the bucket of one of the hot flows.
    fn focus_entry(&mut self) -> (u32, CtEntry) {
        let ways = self.profile.ct_ways;
        let index = self.focus * HIT_WORD + self.rng.random_range(0..HIT_WORD);
        let bucket = index / ways;
        let mine: Vec<Flow> = self
            .hot
            .iter()
            .copied()
            .filter(|f| {
                nlb_reference::conntrack::bucket(&f.tuple5(), self.profile.ct_buckets) == bucket
            })
            .collect();
        let flow = if !mine.is_empty() && self.rng.random_bool(0.85) {
            mine[self.rng.random_range(0..mine.len())]
        } else if !self.hot.is_empty() {
            // A flow of another bucket: never found here.
            self.hot[self.rng.random_range(0..self.hot.len())]
        } else {
            Flow {
                protocol: 17,
                client: self.rng.random(),
                client_port: self.rng.random(),
                vip: self.rng.random(),
                vip_port: self.rng.random(),
            }
        };
        let backend = if self.rng.random_bool(0.9) {
            self.rng.random_range(0..48)
        } else {
            self.rng.random()
        };
        let e = flow.ct_entry(backend, self.rng.random_range(0..32), self.rng.random());
        (index, e)
    }

    /// Queues one connection-table command sequence as the host does it, with the reads that
    /// check it: `status` and `count` after every command, now and then `index` and the data
    /// words.
    fn plan_ct_command(&mut self) {
        // Everything earlier has completed: the reference is the device's state.
        let mut window = self.ct_ref.data;
        let len = self.ct_ref.len;
        let at = |op: TableCmd, index: u32| {
            conntrack::Cmd { op, index }
                .word()
                .expect("command indices of the test fit the field")
        };
        let mut valid_in_focus: Vec<u32> = (0..HIT_WORD)
            .map(|k| self.focus * HIT_WORD + k)
            .filter(|i| self.ct_ref.entry(*i).valid)
            .collect();
        // Mostly an entry traffic is hitting now, so the command races its hits.
        let hit: Vec<u32> = self
            .recently_hit
            .iter()
            .copied()
            .filter(|i| self.ct_ref.entry(*i).valid)
            .collect();
        if !hit.is_empty() && self.rng.random_bool(0.8) {
            valid_in_focus = hit;
        }
        let roll = self.rng.random_range(0..100);
        // (words the window must hold, word 0 before the command, the command)
        let mut cmds: Vec<([u32; CtEntry::WORDS], u32, CtCmd)> = Vec::new();
        let mut pre: Vec<HostOp> = Vec::new();
        match roll {
            0..=34 => {
                // Install with the valid bit last: every word with valid clear, WRITE_AT,
                // then word 0 with valid set, WRITE_AT (driver/src/conntrack.rs).
                let (index, e) = self.focus_entry();
                let kind = if self.ct_ref.entry(index).valid {
                    "install over a valid entry (valid cleared first)"
                } else {
                    "install into a free entry"
                };
                let cleared = CtEntry { valid: false, ..e };
                let words = pack(&e);
                let first = pack(&cleared)[0];
                let word = at(TableCmd::WriteAt, index);
                cmds.push((
                    words,
                    first,
                    CtCmd {
                        kind,
                        word,
                        action: Some((index, Some(cleared))),
                    },
                ));
                cmds.push((
                    words,
                    words[0],
                    CtCmd {
                        kind: "install: valid set",
                        word,
                        action: Some((index, Some(e))),
                    },
                ));
            }
            35..=54 if !valid_in_focus.is_empty() => {
                // Overwrite in place, the entry valid throughout: a new backend (the host
                // moving a connection) or new flags and timestamp (a teardown mark).
                let index = valid_in_focus[self.rng.random_range(0..valid_in_focus.len())];
                let mut e = self.ct_ref.entry(index);
                let kind = if self.rng.random_bool(0.6) {
                    e.backend = self.rng.random_range(0..48);
                    "overwrite in place: new backend"
                } else {
                    e.flags ^= 1;
                    e.timestamp = self.rng.random();
                    "overwrite in place: flags and timestamp"
                };
                let words = pack(&e);
                cmds.push((
                    words,
                    words[0],
                    CtCmd {
                        kind,
                        word: at(TableCmd::WriteAt, index),
                        action: Some((index, Some(e))),
                    },
                ));
            }
            35..=74 => {
                // Invalidate: valid cleared, the other words as they are.
                let free: Vec<u32> = (0..HIT_WORD)
                    .map(|k| self.focus * HIT_WORD + k)
                    .filter(|i| !self.ct_ref.entry(*i).valid)
                    .collect();
                let index = if !valid_in_focus.is_empty()
                    && (free.is_empty() || self.rng.random_bool(0.6))
                {
                    valid_in_focus[self.rng.random_range(0..valid_in_focus.len())]
                } else {
                    free[self.rng.random_range(0..free.len())]
                };
                let old = self.ct_ref.entry(index);
                let kind = if old.valid {
                    "invalidate a valid entry"
                } else {
                    "invalidate a free entry"
                };
                let e = CtEntry {
                    valid: false,
                    ..old
                };
                let words = pack(&e);
                cmds.push((
                    words,
                    words[0],
                    CtCmd {
                        kind,
                        word: at(TableCmd::WriteAt, index),
                        action: Some((index, Some(e))),
                    },
                ));
            }
            75..=81 => {
                // READ_AT, or READ of the index register's entry.
                let index = self.focus * HIT_WORD + self.rng.random_range(0..HIT_WORD);
                let (kind, word) = if self.rng.random_bool(0.5) {
                    ("read at", at(TableCmd::ReadAt, index))
                } else {
                    pre.push(HostOp::write(conntrack::INDEX, index, Check::Index(index)));
                    ("read at the index register", at(TableCmd::Read, 0))
                };
                self.host.extend(pre.drain(..));
                self.host.push_back(HostOp::write(
                    conntrack::CMD,
                    word,
                    Check::CtCmd(CtCmd {
                        kind,
                        word,
                        action: Some((index, None)),
                    }),
                ));
                self.plan_ct_checks();
                return;
            }
            82..=87 => {
                // WRITE of the entry the index register names.
                let (index, e) = self.focus_entry();
                pre.push(HostOp::write(conntrack::INDEX, index, Check::Index(index)));
                let e = if self.rng.random_bool(0.5) {
                    e
                } else {
                    CtEntry { valid: false, ..e }
                };
                let words = pack(&e);
                let kind = "write at the index register";
                cmds.push((
                    words,
                    words[0],
                    CtCmd {
                        kind,
                        word: at(TableCmd::Write, 0),
                        action: Some((index, Some(e))),
                    },
                ));
            }
            88..=93 => {
                // WRITE_AT of an index past the table: an error, nothing changes.
                let (_, e) = self.focus_entry();
                let words = pack(&e);
                let index = self.rng.random_range(len..=conntrack::cmd::INDEX.max());
                let kind = "bad index";
                cmds.push((
                    words,
                    words[0],
                    CtCmd {
                        kind,
                        word: at(TableCmd::WriteAt, index),
                        action: None,
                    },
                ));
            }
            _ => {
                // An undefined op, or WRITE / READ with a nonzero index field.
                let (_, e) = self.focus_entry();
                let words = pack(&e);
                let index = self.focus * HIT_WORD;
                let word = match self.rng.random_range(0..3) {
                    0 => {
                        let op = [0u32, 5, 0x80, 0xff][self.rng.random_range(0..4)];
                        conntrack::cmd::OP.put(op).unwrap_or(0)
                            | conntrack::cmd::INDEX.put(index).unwrap_or(0)
                    }
                    1 => at(TableCmd::Write, index.max(1)),
                    _ => at(TableCmd::Read, index.max(1)),
                };
                let kind = "bad command";
                cmds.push((
                    words,
                    words[0],
                    CtCmd {
                        kind,
                        word,
                        action: None,
                    },
                ));
            }
        }
        self.host.extend(pre);
        // Half the time a group's commands go back to back, their status read only after the
        // last (as the command ring writes connections): the block answers a write once it
        // took the stage's write record, while the one before may still be on its way to
        // memory, and a packet received after that answer must see it.
        let back_to_back = cmds.len() > 1 && self.rng.random_bool(0.5);
        let n = cmds.len();
        for (k, (words, first, mut cmd)) in cmds.into_iter().enumerate() {
            if back_to_back && k + 1 == n {
                cmd.kind = "install: valid set right behind the first write";
            }
            for (k, w) in words.iter().enumerate().skip(1) {
                if window[k] != *w {
                    let addr = conntrack::DATA + 4 * k as u32;
                    self.host
                        .push_back(HostOp::write(addr, *w, Check::CtData(k, *w)));
                    window[k] = *w;
                }
            }
            if window[0] != first {
                self.host.push_back(HostOp::write(
                    conntrack::DATA,
                    first,
                    Check::CtData(0, first),
                ));
                window[0] = first;
            }
            // After a good write the window holds the stored entry: what it held.
            self.host
                .push_back(HostOp::write(conntrack::CMD, cmd.word, Check::CtCmd(cmd)));
            if !back_to_back || k + 1 == n {
                self.plan_ct_checks();
            }
        }
    }

    /// Reads after a command: status and count always, index and data words now and then.
    fn plan_ct_checks(&mut self) {
        self.host
            .push_back(HostOp::read(conntrack::STATUS, Check::CtStatus));
        self.host
            .push_back(HostOp::read(conntrack::COUNT, Check::CtCount));
        if self.rng.random_bool(0.3) {
            self.host
                .push_back(HostOp::read(conntrack::INDEX, Check::CtIndex));
        }
        if self.rng.random_bool(0.2) {
            for k in 0..CtEntry::WORDS {
                self.host.push_back(HostOp::read(
                    conntrack::DATA + 4 * k as u32,
                    Check::CtWord(k),
                ));
            }
        }
    }

    /// The loader found `bank` drained: rewrites some of its entries (from another random
    /// bank) through the table window, then flips to it.
    fn plan_rewrite(&mut self, bank: u8) {
        let fresh = Scenario::random(self.profile, &mut self.rng);
        let mut tables = (*self.tables[usize::from(bank)]).clone();
        let diff = tables.diff(&fresh.tables);
        let n = self.rng.random_range(1..8).min(diff.len());
        for _ in 0..n {
            let (t, index) = diff[self.rng.random_range(0..diff.len())];
            let Ok(words) = fresh.tables.read_entry(t, index) else {
                continue;
            };
            if tables.write_entry(t, index, &words).is_err() {
                continue;
            }
            for (i, w) in words.iter().enumerate() {
                self.host
                    .push_back(HostOp::write(table::DATA + 4 * i as u32, *w, Check::Plain));
            }
            let select = table::Select {
                table: t,
                bank: bank == 1,
            };
            self.host
                .push_back(HostOp::write(table::SELECT, select.word(), Check::Plain));
            let cmd = table::Cmd {
                op: TableCmd::WriteAt,
                index,
            }
            .word()
            .expect("table indices fit the command");
            self.host
                .push_back(HostOp::write(table::CMD, cmd, Check::TableCmd));
            self.host
                .push_back(HostOp::read(table::STATUS, Check::TableStatus));
        }
        // Packets latching this bank from now on (after the flip) see the new entries; none
        // is in flight on it (the loader just saw it drained, and the watch checks that
        // against the test's own count every clock).
        self.tables[usize::from(bank)] = Rc::new(tables);
        let cur = self.watch.ctrl.unwrap_or(Latched {
            bank: 1 - bank,
            enable: true,
            drop: false,
        });
        self.host.push_back(HostOp::write(
            ctrl::ACTIVE_BANK,
            ctrl::ActiveBank { bank: bank == 1 }.word(),
            Check::Ctrl(Latched { bank, ..cur }),
        ));
    }

    /// Starts the next host access when the master is free.
    fn issue(&mut self) {
        let now = self.cycle();
        if self.current.is_some() || !self.dut.axil.is_idle() || now < self.host_wait_until {
            return;
        }
        let Some(op) = self.host.pop_front() else {
            return;
        };
        if let Check::CtCmd(cmd) = &op.check {
            // A good write changes the table at some clock before its response: from now on
            // packets may see the new entry (a new version of the model's table).
            if let Some((index, true)) = self.ct_ref.decode(cmd.word) {
                let new = CtEntry::unpack(&self.ct_ref.data[..CtEntry::WORDS]).unwrap_or_default();
                let old = self.ct.entry(index).copied().unwrap_or_default();
                self.ct_latest += 1;
                self.ct_log.push_back(CtVersion {
                    id: self.ct_latest,
                    issued: now,
                    done: None,
                    index,
                    old,
                    new,
                });
                // In range: decode checked it.
                let _ = self.ct.write(index, new);
                self.recent_cmds.push_back((index, now, None, cmd.kind));
            }
        }
        match op.write {
            Some(v) => self.dut.axil.queue_write(op.addr, v),
            None => self.dut.axil.queue_read(op.addr),
        }
        self.current = Some((op, now));
    }

    /// Whether a register read value was on the watch's monitor at some clock of [from, to].
    fn stat_seen(&self, from: u64, to: u64, pick: impl Fn(u32, u32) -> u32, value: u32) -> bool {
        let stats = &self.watch.stats;
        // The entry in effect at `from`, then every change up to `to`.
        let start = stats.iter().rposition(|s| s.0 <= from).unwrap_or(0);
        stats
            .iter()
            .skip(start)
            .take_while(|s| s.0 <= to)
            .any(|s| pick(s.1, s.2) == value)
    }

    /// A host access finished.
    fn on_completion(
        &mut self,
        c: Completion,
        done: u64,
    ) -> Result<Result<(), Mismatch>, VerifError> {
        let Some((op, issued)) = self.current.take() else {
            return self.fail(format!("an AXI-Lite response with no access: {c:?}"));
        };
        let data = match (c, op.write) {
            (Completion::Write { resp: 0, .. }, Some(_)) => 0,
            (Completion::Read { resp: 0, data, .. }, None) => data,
            _ => return self.fail(format!("access {op:?}: response {c:?}")),
        };
        // Ctrl changes and hit reads must belong to the access that asked for them.
        let changes: Vec<CtrlChange> = self.watch.ctrl_changes.drain(..).collect();
        let pulses: Vec<u64> = self.watch.hit_reads.drain(..).collect();
        let wants_change = matches!(&op.check, Check::Ctrl(_));
        let hit_read = matches!(&op.check, Check::HitRead);
        if !wants_change && !changes.is_empty() {
            return self.fail(format!(
                "ctrl changed at clock {} with no write to it ({op:?})",
                changes[0].cycle
            ));
        }
        if !hit_read && !pulses.is_empty() {
            return self.fail(format!(
                "a hit word was read at clock {} with no hit_read ({op:?})",
                pulses[0]
            ));
        }
        if self.host.is_empty() {
            self.host_wait_until = done + self.rng.random_range(0..40);
        }
        match op.check {
            Check::Plain | Check::TableCmd | Check::CtData(..) => {
                if let Check::CtData(k, w) = op.check {
                    self.ct_ref.data[k] = w;
                }
                if matches!(op.check, Check::TableCmd) {
                    let active = self.watch.ctrl.map_or(0, |c| c.bank);
                    if self.watch.expect[usize::from(active)] > 0 {
                        bin(
                            self.bins,
                            "loader x inactive bank written while the active one serves",
                        );
                    }
                }
            }
            Check::Index(i) => self.ct_ref.index = i,
            Check::TableStatus => {
                if data != 0 {
                    return self.fail(format!("table window status {data:#x} after a write"));
                }
            }
            Check::Ctrl(want) => {
                if changes.len() > 1 {
                    return self.fail(format!(
                        "one ctrl write changed ctrl {} times",
                        changes.len()
                    ));
                }
                if self.watch.ctrl != Some(want) {
                    return self.fail(format!(
                        "ctrl after the write ({op:?}) is {:?}, not {want:?}",
                        self.watch.ctrl
                    ));
                }
                for ch in changes {
                    if ch.cycle <= issued || ch.cycle > done || ch.to != want {
                        return self.fail(format!(
                            "ctrl changed to {:?} at clock {}, outside the write of {want:?} \
                             (clocks {issued}..={done})",
                            ch.to, ch.cycle
                        ));
                    }
                    self.ctrl_bins(&ch);
                }
            }
            Check::BankInUse(loader) => {
                if !self.stat_seen(issued, done, |_, u| u, data) {
                    return self.fail(format!(
                        "bank_in_use read {data:#x}, a value the monitor never showed in clocks \
                         {issued}..={done}"
                    ));
                }
                if let Some(bank) = loader {
                    let in_use = ctrl::BankInUse::from_word(data);
                    let busy = if bank == 0 {
                        in_use.bank0
                    } else {
                        in_use.bank1
                    };
                    if busy {
                        bin(self.bins, "loader x waited for the old bank to drain");
                        self.host_wait_until = done + self.rng.random_range(0..20);
                        self.host.push_front(HostOp::read(
                            ctrl::BANK_IN_USE,
                            Check::BankInUse(Some(bank)),
                        ));
                    } else {
                        self.plan_rewrite(bank);
                        self.host_wait_until = done;
                    }
                }
            }
            Check::InFlight => {
                if !self.stat_seen(issued, done, |n, _| n, data) {
                    return self.fail(format!(
                        "packets_in_flight read {data}, a value the monitor never showed in \
                         clocks {issued}..={done}"
                    ));
                }
            }
            Check::HitRead => return self.on_hit_read(issued, done, data, &pulses),
            Check::CtCmd(cmd) => return self.on_ct_cmd(cmd, done),
            Check::CtStatus => {
                let want = conntrack::Status {
                    busy: false,
                    error: self.ct_ref.error,
                }
                .word();
                if data != want {
                    return self.fail(format!("conntrack status {data:#x}, reference {want:#x}"));
                }
            }
            Check::CtCount => {
                let want = self.ct_ref.count();
                if data != want || want != self.ct.valid_count() {
                    return self.fail(format!(
                        "conntrack count {data}, reference {want} (model {})",
                        self.ct.valid_count()
                    ));
                }
            }
            Check::CtIndex => {
                if data != self.ct_ref.index {
                    return self.fail(format!(
                        "conntrack index {data}, reference {}",
                        self.ct_ref.index
                    ));
                }
            }
            Check::CtWord(k) => {
                if data != self.ct_ref.data[k] {
                    return self.fail(format!(
                        "conntrack data word {k} {data:#010x}, reference {:#010x}",
                        self.ct_ref.data[k]
                    ));
                }
            }
        }
        // Stat history older than this access is no longer needed (accesses are in order).
        while self.watch.stats.len() > 1 && self.watch.stats[1].0 <= done {
            self.watch.stats.pop_front();
        }
        Ok(Ok(()))
    }

    fn ctrl_bins(&mut self, ch: &CtrlChange) {
        let bins = &mut *self.bins;
        let busy = ch.in_flight[0] + ch.in_flight[1] > 0;
        if ch.from.bank != ch.to.bank {
            self.flips.push_back(ch.cycle);
            bin(bins, "flip");
            if ch.first_beat_now {
                bin(
                    bins,
                    "flip x in the clock of a first beat (it latches the new bank)",
                );
            }
            if ch.first_beat_before {
                bin(
                    bins,
                    "flip x in the clock after a first beat (it latched the old bank)",
                );
            }
            match ch.beats_in {
                None => bin(bins, "flip x between frames"),
                Some(n) if n < HEADER_BEATS => bin(bins, "flip x during a frame's header beats"),
                Some(_) => bin(bins, "flip x during a frame's payload beats"),
            }
            if ch.out_stalled {
                bin(bins, "flip x output back-pressure");
            }
            if ch.in_stalled {
                bin(bins, "flip x admission closed");
            }
            if ch.in_flight[usize::from(ch.from.bank)] > 0 {
                bin(bins, "flip x packets of the old bank in flight");
            }
        }
        if ch.from.enable != ch.to.enable && busy {
            bin(bins, "ctrl x enable switched with packets in flight");
        }
        if ch.from.drop != ch.to.drop && busy {
            bin(
                bins,
                "ctrl x default action switched with packets in flight",
            );
        }
    }

    /// A hit_read completed: exactly the entries of its word hit since the previous read of
    /// the word, up to its clock c0.
    fn on_hit_read(
        &mut self,
        issued: u64,
        done: u64,
        data: u32,
        pulses: &[u64],
    ) -> Result<Result<(), Mismatch>, VerifError> {
        let index = self.ct_ref.index;
        if index >= self.ct_ref.len {
            bin(self.bins, "hit read x index beyond the table");
            if data != 0 || !pulses.is_empty() {
                return self.fail(format!(
                    "hit_read with index {index} (beyond the table) read {data:#x} and cleared \
                     {} words",
                    pulses.len()
                ));
            }
            return Ok(Ok(()));
        }
        let [c0] = pulses else {
            return self.fail(format!(
                "hit_read of entry {index}: {} reads of the hit word in clocks {issued}..={done}",
                pulses.len()
            ));
        };
        let c0 = *c0;
        if c0 < issued || c0 > done {
            return self.fail(format!(
                "hit_read read its word at clock {c0}, outside the access ({issued}..={done})"
            ));
        }
        let word = index / HIT_WORD;
        let sets = self.unread_hits.remove(&word).unwrap_or_default();
        let mut want = 0u32;
        let mut later = Vec::new();
        for &(s, lane) in &sets {
            if s <= c0 {
                want |= 1u32 << lane;
            } else {
                later.push((s, lane));
            }
        }
        for (d, name) in [
            (-1i64, "hit read x a hit on its word in c0 - 1"),
            (0, "hit read x a hit on its word in c0"),
            (1, "hit read x a hit on its word in c0 + 1"),
        ] {
            if sets.iter().any(|&(s, _)| s as i64 == c0 as i64 + d) {
                bin(self.bins, name);
            }
        }
        if later
            .iter()
            .any(|&(s, lane)| s == c0 + 1 && want & (1u32 << lane) != 0)
        {
            bin(
                self.bins,
                "hit read x an entry it returns hit again in c0 + 1",
            );
        }
        if want != 0 {
            bin(self.bins, "hit read x returned hits");
        }
        if !later.is_empty() {
            self.unread_hits.insert(word, later);
        }
        if data != want {
            return self.fail(format!(
                "hit_read of entries {}..{} (read in clock {c0}): RTL {data:#010x}, hits since \
                 the previous read {want:#010x} (sets of the word: {sets:?})",
                word * HIT_WORD,
                word * HIT_WORD + HIT_WORD - 1
            ));
        }
        Ok(Ok(()))
    }

    /// A conntrack command completed: the reference follows it (docs/pipeline.md §13).
    fn on_ct_cmd(&mut self, cmd: CtCmd, done: u64) -> Result<Result<(), Mismatch>, VerifError> {
        bin(self.bins, &format!("conntrack x {}", cmd.kind));
        let decoded = self.ct_ref.decode(cmd.word);
        match (decoded, cmd.action) {
            (None, None) => self.ct_ref.error = true,
            (Some((index, write)), Some((planned, entry))) if index == planned => {
                self.ct_ref.error = false;
                self.ct_ref.index = index;
                if write {
                    let stored =
                        CtEntry::unpack(&self.ct_ref.data[..CtEntry::WORDS]).unwrap_or_default();
                    if entry != Some(stored) {
                        return self.fail(format!(
                            "test bug: the data words hold {stored:?}, the plan wrote {entry:?}"
                        ));
                    }
                    self.ct_ref.entries.insert(index, stored);
                    // Its model version (gone if a packet already saw it, and every one
                    // after, while it ran).
                    let running = self.ct_log.iter_mut().find(|v| v.done.is_none());
                    match running {
                        Some(v) if v.index == index => v.done = Some(done),
                        Some(v) => {
                            let other = v.index;
                            return self.fail(format!(
                                "test bug: the running write is of entry {other}, not {index}"
                            ));
                        }
                        None => {}
                    }
                    if let Some(c) = self.recent_cmds.iter_mut().find(|c| c.2.is_none()) {
                        c.2 = Some(done);
                    }
                }
                let e = self.ct_ref.entry(index);
                self.ct_ref.data[..CtEntry::WORDS].copy_from_slice(&pack(&e));
            }
            (d, a) => {
                return self.fail(format!(
                    "test bug: command {:#010x} decodes to {d:?}, planned {a:?}",
                    cmd.word
                ))
            }
        }
        Ok(Ok(()))
    }
}

/// Runs the model on a packet with the connection table at version `v` (the commands after
/// it undone, then redone).
fn run_model(
    ct: &mut ConnTable,
    log: &VecDeque<CtVersion>,
    v: u64,
    p: &Packet,
    settings: &[NicSettings; 2],
    out: &mut [u8],
) -> Result<PacketResult, VerifError> {
    for e in log.iter().rev().filter(|e| e.id > v) {
        let _ = ct.write(e.index, e.old);
    }
    let ctx = Context {
        tables: &p.tables,
        bank: p.first.ctrl.bank,
        settings: &settings[usize::from(p.first.ctrl.drop)],
        enabled: p.first.ctrl.enable,
        conntrack: ct,
    };
    let r = match &p.inject {
        Some(h) => process_injected(&ctx, h, &p.frame, out),
        None => process(&ctx, &p.frame, out),
    };
    for e in log.iter().filter(|e| e.id > v) {
        let _ = ct.write(e.index, e.new);
    }
    r.map_err(|e| VerifError::Setup(format!("model: {e}")))
}

impl Case<'_> {
    /// First beats taken: the frames they start enter the pipeline with what they latched.
    fn on_first_beats(&mut self) -> Result<Result<(), Mismatch>, VerifError> {
        while let Some(fb) = self.watch.first_beats.pop_front() {
            let (frame, inject) = if fb.injected {
                match self.inj_queue.pop_front() {
                    Some((f, h)) => (f, Some(h)),
                    None => {
                        return self.fail("a first beat on the inject port with no frame".into())
                    }
                }
            } else {
                match self.rx_queue.pop_front() {
                    Some(f) => (f, None),
                    None => {
                        return self.fail("a first beat on the receive port with no frame".into())
                    }
                }
            };
            let p = Packet {
                frame,
                inject,
                first: fb,
                tables: Rc::clone(&self.tables[usize::from(fb.ctrl.bank)]),
            };
            if fb.injected {
                self.in_flight_inj.push_back(p);
            } else {
                self.in_flight_rx.push_back((self.rx_seq, p));
                self.rx_seq = self.rx_seq.wrapping_add(1);
            }
        }
        Ok(Ok(()))
    }

    /// A result: the model's for the ctrl the packet latched, that bank's tables then, and a
    /// version of the connection table the packet may have seen.
    fn on_result(
        &mut self,
        cycle: u64,
        is_inj: bool,
        r: PacketResult,
    ) -> Result<Result<(), Mismatch>, VerifError> {
        let p = if is_inj {
            self.in_flight_inj.pop_front()
        } else {
            self.in_flight_rx.pop_front().map(|(_, p)| p)
        };
        let Some(p) = p else {
            return self.fail("a result with no packet in the pipeline".into());
        };
        let n = self.checked;
        if p.first.injected != is_inj {
            return self.fail(format!(
                "packet #{n}: result for an {} frame, the frame was {}",
                if is_inj { "injected" } else { "received" },
                if p.first.injected {
                    "injected"
                } else {
                    "received"
                }
            ));
        }
        let f = p.first.cycle;
        // Versions the packet may have seen: from the newest whose successor was not done
        // before its first beat, to the newest issued by its result; never one older than
        // the previous packet saw.
        let base = self.ct_seen;
        let at = |log: &VecDeque<CtVersion>, id: u64| -> Option<(u64, Option<u64>)> {
            log.get((id - base - 1) as usize)
                .map(|v| (v.issued, v.done))
        };
        let mut lo = self.ct_seen;
        while let Some((_, Some(d))) = at(&self.ct_log, lo + 1) {
            if d < f {
                lo += 1;
            } else {
                break;
            }
        }
        let mut hi = lo;
        while let Some((issued, _)) = at(&self.ct_log, hi + 1) {
            if issued <= cycle {
                hi += 1;
            } else {
                break;
            }
        }
        let mut tried: Vec<(u64, PacketResult)> = Vec::new();
        let mut chosen = None;
        for v in lo..=hi {
            let m = run_model(
                &mut self.ct,
                &self.ct_log,
                v,
                &p,
                &self.settings,
                &mut self.out,
            )?;
            if chosen.is_none() && m == r {
                chosen = Some((v, self.out[..m.out_len].to_vec()));
            }
            tried.push((v, m));
        }
        let Some((v, out)) = chosen else {
            let models: Vec<String> = tried
                .iter()
                .map(|(v, m)| format!("\n  model (connection table version {v}) {m:?}"))
                .collect();
            return self.fail(format!(
                "packet #{n} ({} bytes, {}, first beat clock {f}, latched {:?}) {}\n  RTL   {r:?}{}",
                p.frame.len(),
                if is_inj { "injected" } else { "received" },
                p.first.ctrl,
                hex(&p.frame),
                models.concat()
            ));
        };
        if hi > lo && tried.iter().any(|(_, m)| *m != tried[0].1) {
            bin(
                self.bins,
                "conntrack x a packet raced a command that changes its result",
            );
            bin(
                self.bins,
                if v == lo {
                    "conntrack x a raced packet saw the entry before the command"
                } else {
                    "conntrack x a raced packet saw the entry after the command"
                },
            );
        }
        self.ct_seen = v;
        while self.ct_log.front().is_some_and(|e| e.id <= v) {
            self.ct_log.pop_front();
        }

        // Its hit bit: set inside the packet's time in the pipeline, on its entry.
        while self
            .recent_cmds
            .front()
            .is_some_and(|c| c.2.is_some_and(|d| d < f))
        {
            self.recent_cmds.pop_front();
        }
        if r.conntrack == CtOutcome::Hit {
            let index = r.ct_index.unwrap_or(u32::MAX);
            // A hit on an entry whose write overlapped the packet's lookup.
            if let Some(&(_, _, _, kind)) = self
                .recent_cmds
                .iter()
                .rev()
                .find(|&&(i, issued, _, _)| i == index && issued <= cycle)
            {
                bin(
                    self.bins,
                    &format!("conntrack x a packet hit the entry during: {kind}"),
                );
            }
            match self.unclaimed_hits.pop_front() {
                Some((s, i)) if i == index && s >= f && s <= cycle => {}
                other => {
                    return self.fail(format!(
                        "packet #{n} hit entry {index} (clocks {f}..={cycle}); the hit bit set \
                         next is {other:?}"
                    ))
                }
            }
        }
        // A set no later packet can claim (each claims one inside its own time in the
        // pipeline, in order).
        if let Some(&(s, i)) = self.unclaimed_hits.front() {
            let oldest = [
                self.in_flight_rx.front().map(|(_, q)| q.first.cycle),
                self.in_flight_inj.front().map(|q| q.first.cycle),
            ]
            .into_iter()
            .flatten()
            .min();
            if oldest.is_none_or(|c| c > s) {
                return self.fail(format!(
                    "hit bit of entry {i} set at clock {s} with no packet hitting it"
                ));
            }
        }

        // Bins: lookups in flight across a flip.
        while self.flips.front().is_some_and(|&t| t <= f) {
            self.flips.pop_front();
        }
        if self.flips.front().is_some_and(|&t| t <= cycle) {
            bin(self.bins, "packet x its lookup spans a bank flip");
            if is_inj {
                bin(self.bins, "packet x injected, its lookup spans a bank flip");
            }
            if r.verdict == Verdict::Forward {
                bin(
                    self.bins,
                    "packet x forwarded, its lookup spans a bank flip",
                );
            }
        }

        self.counters.record(&r);
        match r.verdict {
            Verdict::Forward => self.want_tx.push_back((out, p.frame.clone())),
            Verdict::Punt => self.want_punt.push_back(PuntedFrame {
                header: r.punt_header(),
                frame: p.frame[..p.frame.len().min(PUNT_BYTES)].to_vec(),
            }),
            Verdict::Pass => self.want_pass.push_back(p.frame.clone()),
            Verdict::Drop => {}
        }
        if let Some(ev) = r.event {
            self.want_events.push_back(ev);
        }
        self.checked += 1;
        Ok(Ok(()))
    }

    /// Frames, punts and events that came out, against the model's in order.
    fn on_outputs(&mut self) -> Result<Result<(), Mismatch>, VerifError> {
        let mut beats = self.dut.tx.take();
        self.dut.tx_pending.append(&mut beats);
        for got in take_frames(&mut self.dut.tx_pending) {
            match self.want_tx.pop_front() {
                Some((want, _)) if want == got => {}
                Some((want, frame)) => {
                    return self.fail(format!(
                        "transmitted frame of {}\n  RTL   {}\n  model {}",
                        hex(&frame),
                        hex(&got),
                        hex(&want)
                    ))
                }
                None => {
                    return self.fail(format!(
                        "a transmitted frame the model did not send: {}",
                        hex(&got)
                    ))
                }
            }
        }
        let mut beats = self.dut.punt.take();
        self.dut.punt_pending.append(&mut beats);
        for got in take_punts(&mut self.dut.punt_pending)? {
            let want = self.want_punt.pop_front();
            if want.as_ref() != Some(&got) {
                return self.fail(format!("punt\n  RTL   {got:?}\n  model {want:?}"));
            }
        }
        let mut beats = self.dut.pass.take();
        self.dut.pass_pending.append(&mut beats);
        for got in take_frames(&mut self.dut.pass_pending) {
            let want = self.want_pass.pop_front();
            if want.as_ref() != Some(&got) {
                return self.fail(format!(
                    "passed frame\n  RTL   {}\n  sent  {}",
                    hex(&got),
                    want.map_or("(none)".into(), |w| hex(&w))
                ));
            }
        }
        let mut beats = self.dut.events.take();
        for got in take_events(&mut beats)? {
            let want = self.want_events.pop_front();
            if want != Some(got) {
                return self.fail(format!("event\n  RTL   {got:?}\n  model {want:?}"));
            }
        }
        Ok(Ok(()))
    }

    /// Everything the last clock showed.
    fn after_step(&mut self) -> Result<Result<(), Mismatch>, VerifError> {
        if let Some((what, cycle)) = self.watch.errors.first() {
            return Ok(Err(Mismatch(what.clone(), *cycle)));
        }
        for (s, i) in self.watch.hit_sets.drain(..) {
            if i / HIT_WORD == self.focus {
                if self.recently_hit.len() == 16 {
                    self.recently_hit.pop_front();
                }
                self.recently_hit.push_back(i);
            }
            self.unclaimed_hits.push_back((s, i));
            self.unread_hits
                .entry(i / HIT_WORD)
                .or_default()
                .push((s, i % HIT_WORD));
        }
        if let Err(m) = self.on_first_beats()? {
            return Ok(Err(m));
        }
        // Received frames dropped for lack of room: out of the model, counted as the RTL does.
        while let Some(d) = self.dut.mon.drops.pop_front() {
            let Some(i) = self.in_flight_rx.iter().position(|(s, _)| *s == d.seq) else {
                return self.fail(format!("a drop of received frame {}, not in flight", d.seq));
            };
            let (_, p) = self.in_flight_rx.remove(i).expect("found");
            self.counters.record(&PacketResult::new(
                Verdict::Drop,
                d.reason,
                p.first.ctrl.bank,
                p.frame.len(),
            ));
            self.dropped += 1;
            bin(self.bins, &format!("dropped x {}", d.reason.name()));
        }
        while let Some((cycle, is_inj, r)) = self.dut.mon.results.pop_front() {
            if let Err(m) = self.on_result(cycle, is_inj, r)? {
                return Ok(Err(m));
            }
        }
        while let Some((c, done)) = self.dut.axil.pop_completion_timed() {
            if let Err(m) = self.on_completion(c, done)? {
                return Ok(Err(m));
            }
        }
        self.on_outputs()
    }

    /// The case: traffic and the host program until every frame's result and output is in,
    /// then the final reads.
    fn run(&mut self) -> Result<Result<usize, Mismatch>, VerifError> {
        let limit = self.cycle() + 2000 * self.frames as u64 + 100_000;
        loop {
            self.feed();
            let traffic_done = self.generated >= self.frames
                && self.rx_queue.is_empty()
                && self.inj_queue.is_empty()
                && self.in_flight_rx.is_empty()
                && self.in_flight_inj.is_empty();
            if traffic_done {
                self.host_running = false;
            }
            self.plan();
            self.issue();
            self.step()?;
            if let Err(m) = self.after_step()? {
                return Ok(Err(m));
            }
            let outputs_done = self.want_tx.is_empty()
                && self.want_punt.is_empty()
                && self.want_pass.is_empty()
                && self.want_events.is_empty();
            if traffic_done && outputs_done && self.host.is_empty() && self.current.is_none() {
                break;
            }
            if self.cycle() > limit {
                return self.fail(format!(
                    "not finished by clock {limit}: {} of {} frames sent, {} in the pipeline, \
                     {} frames / {} punts / {} passed frames / {} events expected, host {} queued",
                    self.generated,
                    self.frames,
                    self.in_flight_rx.len() + self.in_flight_inj.len(),
                    self.want_tx.len(),
                    self.want_punt.len(),
                    self.want_pass.len(),
                    self.want_events.len(),
                    self.host.len()
                ));
            }
        }
        if let Some(&(s, i)) = self.unclaimed_hits.front() {
            return self.fail(format!(
                "hit bit of entry {i} set at clock {s} with no packet hitting it"
            ));
        }
        if !self.dut.mon.violations.is_empty() {
            return self.fail(format!("result bus: {:?}", self.dut.mon.violations));
        }
        for sink in [
            &self.dut.tx,
            &self.dut.punt,
            &self.dut.pass,
            &self.dut.events,
        ] {
            if !sink.violations().is_empty() {
                return self.fail(format!("stream rules: {:?}", sink.violations()));
            }
        }
        if self.watch.drained_under_traffic > 0 {
            *self
                .bins
                .entry("drain x a bank emptied while the other had packets in flight".into())
                .or_default() += self.watch.drained_under_traffic;
        }
        self.final_reads()
    }

    /// After traffic: the counters, the connection count and every hit word (each entry hit
    /// since its word's last read, and nothing else).
    fn final_reads(&mut self) -> Result<Result<usize, Mismatch>, VerifError> {
        let profile = self.profile;
        let mut idx: Vec<(CounterKind, u32)> = Vec::new();
        idx.extend((0..Reason::ALL.len() as u32).map(|i| (CounterKind::Reason, i)));
        idx.extend((0..4).map(|i| (CounterKind::Verdict, i)));
        idx.extend((0..36).map(|i| (CounterKind::Rule, i)));
        idx.extend((0..52).map(|i| (CounterKind::Backend, i)));
        for (kind, i) in idx {
            let got = self.dut.read_counter(kind, i, false)?;
            let want = self.counters.get(kind, i);
            if got != want {
                return self.fail(format!("counter {kind:?} {i}: RTL {got:?}, model {want:?}"));
            }
        }
        let count = self.dut.read32(conntrack::COUNT)?;
        if count != self.ct_ref.count() {
            return self.fail(format!(
                "conntrack count {count}, reference {}",
                self.ct_ref.count()
            ));
        }
        for word in 0..profile.ct_entries() / HIT_WORD {
            let lane = self.rng.random_range(0..HIT_WORD);
            self.dut.write32(conntrack::INDEX, word * HIT_WORD + lane)?;
            let rtl = self.dut.read32(conntrack::HIT_READ)?;
            let want = self
                .unread_hits
                .remove(&word)
                .unwrap_or_default()
                .iter()
                .fold(0u32, |w, &(_, lane)| w | 1u32 << lane);
            let again = self.dut.read32(conntrack::HIT_READ)?;
            if rtl != want || again != 0 {
                return self.fail(format!(
                    "final read of hit word {word}: RTL {rtl:#010x} (then {again:#x}), unread \
                     hits {want:#010x}"
                ));
            }
        }
        if !self.dut.axil.violations().is_empty() {
            return self.fail(format!("AXI-Lite: {:?}", self.dut.axil.violations()));
        }
        Ok(Ok(self.checked))
    }
}

/// Runs one case; on a mismatch replays it with a waveform and panics with what is needed to
/// reproduce it.
fn check(seed: u64, frames: usize, bins: &mut Bins) -> usize {
    let name = "overlap";
    let wave = wave_path(name, seed);
    let first = {
        let mut case = Case::setup(
            seed,
            frames,
            bins,
            trace_always().then(|| (wave.clone(), 0)),
        )
        .expect("simulation harness");
        case.run().expect("simulation harness")
    };
    match first {
        Ok(n) => n,
        Err(Mismatch(what, cycle)) => {
            let from = cycle.saturating_sub(WAVE_WINDOW).max(1);
            let mut scratch = Bins::new();
            let replay = Case::setup(seed, frames, &mut scratch, Some((wave.clone(), from)))
                .and_then(|mut c| c.run());
            panic!(
                "{name}: clock {cycle}: {what}\n  seed {seed:#x} (rerun with NLB_SEED={seed:#x} \
                 NLB_OVERLAP_CASES=1 NLB_OVERLAP_FRAMES={frames}); waveform of clocks \
                 {from}..={cycle}: {} ({})",
                wave.display(),
                if replay.is_ok() {
                    "written"
                } else {
                    "replay failed"
                }
            );
        }
    }
}

/// The overlap bins every CI run must hit.
fn required_bins() -> Vec<&'static str> {
    vec![
        "flip x in the clock of a first beat (it latches the new bank)",
        "flip x in the clock after a first beat (it latched the old bank)",
        "flip x between frames",
        "flip x during a frame's header beats",
        "flip x during a frame's payload beats",
        "flip x output back-pressure",
        "flip x admission closed",
        "flip x packets of the old bank in flight",
        "packet x its lookup spans a bank flip",
        "packet x injected, its lookup spans a bank flip",
        "packet x forwarded, its lookup spans a bank flip",
        "drain x a bank emptied while the other had packets in flight",
        "loader x waited for the old bank to drain",
        "loader x inactive bank written while the active one serves",
        "ctrl x enable switched with packets in flight",
        "ctrl x default action switched with packets in flight",
        "hit read x a hit on its word in c0 - 1",
        "hit read x a hit on its word in c0",
        "hit read x a hit on its word in c0 + 1",
        "hit read x an entry it returns hit again in c0 + 1",
        "hit read x returned hits",
        "hit read x index beyond the table",
        "conntrack x install into a free entry",
        "conntrack x install over a valid entry (valid cleared first)",
        "conntrack x install: valid set",
        "conntrack x install: valid set right behind the first write",
        "conntrack x overwrite in place: new backend",
        "conntrack x overwrite in place: flags and timestamp",
        "conntrack x invalidate a valid entry",
        "conntrack x invalidate a free entry",
        "conntrack x read at",
        "conntrack x read at the index register",
        "conntrack x write at the index register",
        "conntrack x bad index",
        "conntrack x bad command",
        "conntrack x a packet hit the entry during: overwrite in place: new backend",
        "conntrack x a packet hit the entry during: invalidate a valid entry",
        "conntrack x a packet raced a command that changes its result",
        "conntrack x a raced packet saw the entry before the command",
        "conntrack x a raced packet saw the entry after the command",
    ]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn control_changes_under_traffic_match_the_model() {
    let first_seed = seed_from_env(0x0e71_0001);
    let cases = env_usize("NLB_OVERLAP_CASES", 10).max(1);
    let frames = env_usize("NLB_OVERLAP_FRAMES", 6000).max(1);
    let mut bins = Bins::new();
    let mut packets = 0usize;
    let start = std::time::Instant::now();
    for c in 0..cases as u64 {
        let seed = first_seed.wrapping_add(c);
        eprintln!("case seed {seed:#x}");
        packets += check(seed, frames, &mut bins);
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!("{packets} packets in {cases} cases, {secs:.1} s");
    coverage::print(&bins, "overlap bins");
    let context = format!("first seed {first_seed:#x}");
    coverage::assert_hit(&bins, required_bins(), "overlap bins", &context);
}
