//! The whole pipeline of `docs/pipeline.md` over one table bank, one frame at a time:
//! enable → parse → flow → lookups ([`crate::lookup`]) → action → event.
//!
//! [`process`] is a pure function of the bank, the NIC settings, the connection table and the
//! frame: it returns a [`PacketResult`] and writes the output frame; the caller (the reference
//! device, [`crate::device::RefDevice`]) applies the side effects (counters, hit bits, queues).
//! [`process_traced`] also reports every step.

use crate::action::{self, MAX_FRAME};
use crate::conntrack::{tuple5_key, ConnTable};
use crate::lookup::{self, CtOutcome, Packet};
use crate::parse::{self, proto, tcp_flags, IpHeaders, Parsed};
use crate::trace::{Flow, Fragment, NoTrace, Recorder, Step};
use nlb_hw::enums::{Delivery, Event, KeyType, Reason, Verdict};
use nlb_hw::layout::field_max;
use nlb_hw::layouts::{BackendEntry, InjectHeader, LearnEvent, PuntHeader};
use nlb_hw::{NicSettings, Tables};

/// Everything the pipeline decided about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketResult {
    /// Verdict.
    pub verdict: Verdict,
    /// Reason.
    pub reason: Reason,
    /// Table bank the packet latched.
    pub bank: u8,
    /// Matched rule id.
    pub rule: Option<u16>,
    /// Pool id of the rule (or of the inject header).
    pub pool: Option<u16>,
    /// Backend id chosen.
    pub backend: Option<u16>,
    /// Affinity key type, once backend selection was reached.
    pub key: Option<KeyType>,
    /// Connection-table outcome.
    pub conntrack: CtOutcome,
    /// Index of the connection-table entry that hit.
    pub ct_index: Option<u32>,
    /// Flow hash: TUPLE5 hash of the flow (TUPLE3 for fragments); for ICMP errors the hash of
    /// the quoted flow in client → VIP orientation. 0 for frames that are not IP.
    pub flow_hash: u32,
    /// IPv4 identification or IPv6 fragment identification.
    pub ip_id: u32,
    /// Received frame length in bytes.
    pub frame_len: usize,
    /// Bytes of the output frame (FORWARD only, else 0).
    pub out_len: usize,
    /// Learn or teardown event (FORWARD only).
    pub event: Option<LearnEvent>,
}

impl PacketResult {
    fn new(verdict: Verdict, reason: Reason, bank: u8, frame_len: usize) -> PacketResult {
        PacketResult {
            verdict,
            reason,
            bank,
            rule: None,
            pool: None,
            backend: None,
            key: None,
            conntrack: CtOutcome::None,
            ct_index: None,
            flow_hash: 0,
            ip_id: 0,
            frame_len,
            out_len: 0,
            event: None,
        }
    }

    /// The punt header of this packet (for the punt queue).
    pub fn punt_header(&self) -> PuntHeader {
        PuntHeader {
            reason: self.reason,
            verdict: self.verdict,
            bank: self.bank != 0,
            rule_valid: self.rule.is_some(),
            rule: self.rule.unwrap_or(0) & field_max(PuntHeader::RULE_WIDTH) as u16,
            flow_hash: self.flow_hash,
            frame_len: self
                .frame_len
                .min(field_max(PuntHeader::FRAME_LEN_WIDTH) as _) as u16,
            ip_id: self.ip_id,
        }
    }
}

/// What one packet sees: the bank it latched, the NIC settings, the connection table.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The latched table bank.
    pub tables: &'a Tables,
    /// Bank number (for punt headers).
    pub bank: u8,
    /// `ctrl` settings.
    pub settings: &'a NicSettings,
    /// `ctrl.enable`.
    pub enabled: bool,
    /// The connection table.
    pub conntrack: &'a ConnTable,
}

/// Why an output frame could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// The caller's buffer is smaller than the output frame.
    #[error("output buffer of {got} bytes is too small for a {needed}-byte frame (use action::MAX_FRAME)")]
    TooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
}

fn ended<R: Recorder>(
    mut res: PacketResult,
    verdict: Verdict,
    reason: Reason,
    rec: &mut R,
) -> PacketResult {
    res.verdict = verdict;
    res.reason = reason;
    rec.step(|| Step::Verdict { verdict, reason });
    res
}

/// The packet of a parsed frame as the lookups see it: itself, or the flow an ICMP error
/// quotes (§3). `None`: an ICMP error without a usable quote.
pub fn packet_of<R: Recorder>(t: &Tables, hdr: &IpHeaders, rec: &mut R) -> Option<Packet> {
    let flow = if hdr.icmp_error {
        let Some(quote) = hdr.icmp_inner else {
            rec.step(|| Step::IcmpQuote {
                quote: None,
                reading: None,
            });
            return None;
        };
        lookup::quoted_flow(t, &quote, rec)
    } else {
        Flow {
            protocol: hdr.protocol,
            client: hdr.src,
            client_port: hdr.src_port,
            vip: hdr.dst,
            vip_port: hdr.dst_port,
        }
    };
    let fragment = match (hdr.is_fragment, hdr.is_later_fragment()) {
        (false, _) => Fragment::No,
        (true, false) => Fragment::First,
        (true, true) => Fragment::Later,
    };
    Some(Packet {
        flow,
        fragment,
        icmp_error: hdr.icmp_error,
        tcp_flags: hdr.tcp_flags,
    })
}

/// The learn or teardown event of a FORWARDed packet (§10): only trackable packets that are
/// not ICMP errors; TCP with FIN or RST → `TEARDOWN` (hit or miss), else a miss → `LEARN`.
pub fn event(p: &Packet, res: &PacketResult, backend: u16) -> Option<LearnEvent> {
    if res.verdict != Verdict::Forward || res.conntrack == CtOutcome::None || p.icmp_error {
        return None;
    }
    let flow = &p.flow;
    let closing =
        flow.protocol == proto::TCP && p.tcp_flags & (tcp_flags::FIN | tcp_flags::RST) != 0;
    let event = if closing {
        Event::Teardown
    } else if res.conntrack == CtOutcome::Miss {
        Event::Learn
    } else {
        return None;
    };
    Some(LearnEvent {
        event,
        protocol: flow.protocol,
        src_port: flow.client_port,
        dst_port: flow.vip_port,
        src_addr: flow.client,
        dst_addr: flow.vip,
        backend,
        rule: res.rule.unwrap_or(0) & field_max(LearnEvent::RULE_WIDTH) as u16,
        flow_hash: res.flow_hash,
    })
}

/// One packet through the whole pipeline. `out` receives the output frame of a FORWARD
/// verdict.
pub fn process(
    ctx: &Context<'_>,
    frame: &[u8],
    out: &mut [u8],
) -> Result<PacketResult, OutputError> {
    process_traced(ctx, frame, out, &mut NoTrace)
}

/// [`process`], reporting every step to `rec`.
pub fn process_traced<R: Recorder>(
    ctx: &Context<'_>,
    frame: &[u8],
    out: &mut [u8],
    rec: &mut R,
) -> Result<PacketResult, OutputError> {
    let res = PacketResult::new(Verdict::Forward, Reason::Forwarded, ctx.bank, frame.len());
    if !ctx.enabled {
        rec.step(|| Step::Disabled);
        return Ok(ended(res, Verdict::Pass, Reason::PipelineDisabled, rec));
    }
    let parsed = parse::parse(frame);
    rec.step(|| Step::Parsed(parsed));
    let hdr = match parsed {
        Ok(Parsed::Ip(h)) => h,
        Ok(Parsed::NotIp) => return Ok(ended(res, Verdict::Pass, Reason::NotIp, rec)),
        Err(reason) => return Ok(ended(res, Verdict::Drop, reason, rec)),
    };
    let mut res = PacketResult {
        ip_id: hdr.ip_id,
        ..res
    };
    let t = ctx.tables;
    let Some(packet) = packet_of(t, &hdr, rec) else {
        let verdict = lookup::default_verdict(ctx.settings);
        return Ok(ended(res, verdict, Reason::IcmpNoFlow, rec));
    };
    let l = lookup::lookup(t, ctx.settings, Some(ctx.conntrack), &packet, rec);
    res.verdict = l.verdict;
    res.reason = l.reason;
    res.rule = l.rule;
    res.pool = l.pool;
    res.key = l.key;
    res.conntrack = l.conntrack;
    res.ct_index = l.ct_index;
    res.flow_hash = l.flow_hash;
    res.backend = l.backend;
    let Some((backend, delivery)) = l.target else {
        return Ok(res);
    };
    let mut res = emit(ctx, frame, &hdr, delivery, &backend, res, out, rec)?;
    if let Some(ev) = l.backend.and_then(|b| event(&packet, &res, b)) {
        rec.step(|| Step::Event(ev));
        res.event = Some(ev);
    }
    Ok(res)
}

/// The action stage (§9): size check, then the editor.
#[allow(clippy::too_many_arguments)]
fn emit<R: Recorder>(
    ctx: &Context<'_>,
    frame: &[u8],
    hdr: &IpHeaders,
    delivery: Delivery,
    backend: &BackendEntry,
    mut res: PacketResult,
    out: &mut [u8],
    rec: &mut R,
) -> Result<PacketResult, OutputError> {
    let needed = action::output_len(frame.len(), hdr, delivery, backend);
    let too_big = needed > MAX_FRAME;
    rec.step(|| Step::Action {
        delivery,
        out_len: needed,
        too_big,
    });
    if too_big {
        return Ok(ended(res, Verdict::Drop, Reason::TooBig, rec));
    }
    if out.len() < needed {
        return Err(OutputError::TooSmall {
            needed,
            got: out.len(),
        });
    }
    res.out_len = action::write_frame(
        frame,
        hdr,
        delivery,
        backend,
        ctx.settings,
        res.flow_hash,
        out,
    );
    res.verdict = Verdict::Forward;
    Ok(res)
}

/// A frame the host injected (inject queue, §12): straight to the action stage with the
/// header's backend and the pool's delivery (reason `INJECTED`). `ctrl.enable` does not apply.
pub fn process_injected(
    ctx: &Context<'_>,
    header: &InjectHeader,
    frame: &[u8],
    out: &mut [u8],
) -> Result<PacketResult, OutputError> {
    let rec = &mut NoTrace;
    let res = PacketResult::new(Verdict::Forward, Reason::Injected, ctx.bank, frame.len());
    let hdr = match parse::parse(frame) {
        Ok(Parsed::Ip(h)) => h,
        Ok(Parsed::NotIp) => return Ok(ended(res, Verdict::Drop, Reason::NotIp, rec)),
        Err(reason) => return Ok(ended(res, Verdict::Drop, reason, rec)),
    };
    let ty = if hdr.is_fragment {
        KeyType::Tuple3
    } else {
        KeyType::Tuple5
    };
    let mut res = PacketResult {
        ip_id: hdr.ip_id,
        flow_hash: tuple5_key(hdr.protocol, hdr.src, hdr.src_port, hdr.dst, hdr.dst_port)
            .with_type(ty)
            .hash(),
        pool: Some(header.pool),
        backend: Some(header.backend),
        ..res
    };
    let t = ctx.tables;
    let pool = t.pools.get(usize::from(header.pool)).filter(|p| p.valid);
    let backend = t
        .backends
        .get(usize::from(header.backend))
        .filter(|b| b.valid);
    let (Some(pool), Some(backend)) = (pool, backend) else {
        res.verdict = Verdict::Drop;
        res.reason = Reason::NoBackend;
        return Ok(res);
    };
    emit(ctx, frame, &hdr, pool.delivery, backend, res, out, rec)
}
