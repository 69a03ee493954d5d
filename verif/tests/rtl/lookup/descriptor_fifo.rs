//! `nlb_lookup`'s descriptor FIFO filled as far as its contract allows: `s_room` high says the
//! FIFO "can take FIFO_DEPTH/2 more" (nlb_lookup.v), so a producer that sees it high may send
//! 16 descriptors whatever `s_room` does next (nlb_top's parser has descriptors in flight when
//! admission closes). The producer here uses every such credit, one descriptor per clock, with
//! bursts of ICMP errors with a usable quote (each takes two issue slots, so the FIFO fills
//! while they arrive one per clock); nothing may be lost, reordered or duplicated: every
//! result equals the model's, in order (the bench's `Run` checks each).

use super::*;

/// Descriptors `s_room` high allows (FIFO_DEPTH / 2 of the block's default).
const CREDIT: u32 = 16;

/// An ICMP error quoting a flow of `s` (forward or reversed reading).
fn icmp_error(g: &mut StdRng, s: &Scenario) -> Desc {
    let f = s.random_flow(g).unwrap_or(Flow {
        protocol: TCP,
        client: mapped(0x0c00_0001),
        client_port: 1,
        vip: mapped(0x0b00_0001),
        vip_port: 80,
    });
    let f = Flow {
        protocol: if f.protocol == UDP { UDP } else { TCP },
        ..f
    };
    let mut h = headers(g, &f, 96);
    let reversed = g.random_bool(0.5);
    h.protocol = if is_mapped(f.vip) { 1 } else { 58 };
    h.has_ports = false;
    h.src_port = 0;
    h.dst_port = 0;
    h.tcp_flags = 0;
    h.icmp_error = true;
    h.icmp_inner = Some(if reversed {
        InnerFlow {
            protocol: f.protocol,
            src: f.vip,
            dst: f.client,
            src_port: f.vip_port,
            dst_port: f.client_port,
        }
    } else {
        InnerFlow {
            protocol: f.protocol,
            src: f.client,
            dst: f.vip,
            src_port: f.client_port,
            dst_port: f.vip_port,
        }
    });
    h.src = if is_mapped(f.vip) {
        mapped(0x0909_0909)
    } else {
        0x2001_0db8_0909_0000_0000_0000_0000_0009
    };
    h.dst = if reversed { f.client } else { f.vip };
    ip_desc(g, h, "ICMP error (two issue slots)")
}

#[test]
fn descriptor_fifo_takes_every_credit_s_room_gives() {
    let seed = seed_from_env(0xd35c_0001);
    let p = profile();
    let mut rng = StdRng::seed_from_u64(seed);
    let s0 = Scenario::random(p, &mut rng);
    let s1 = Scenario::random(p, &mut rng);
    let mut ct = ConnTable::new(p.ct_buckets, p.ct_ways);
    for s in [&s0, &s1] {
        for (i, e) in s.conntrack(p, &mut rng) {
            ct.write(i, e).expect("an index inside the table");
        }
    }
    let mut sim = Verilated::new::<Lookup>().expect("model");
    sim.reset(2).expect("reset");
    let mut settings = [NicSettings::default(), NicSettings::default()];
    settings[1].default_action = DefaultAction::Drop;
    let mut r = Run {
        inputs: Inputs::new(&sim),
        outputs: Outputs::new(&sim),
        mem: Memories::new(&sim, [s0.tables.clone(), s1.tables.clone()], ct),
        hit_en: sim.port("hit_set_en").expect("port"),
        hit_index: sim.port("hit_set_index").expect("port"),
        room: sim.port("s_room").expect("port"),
        sim,
        settings,
        rng: StdRng::seed_from_u64(seed ^ 0xd35c),
        clock: 0,
        flight: VecDeque::new(),
        hit_prev: None,
        bins: Bins::new(),
        seed,
        prev_bank: None,
    };
    r.idle(4);
    let mut credit = 0u32;
    let mut max_flight = 0usize;
    let mut after_low = 0u32;
    let mut most_after_low = 0u32;
    let n = 6000;
    let mut k = 0;
    let mut pending: Option<Desc> = None;
    while k < n {
        let room = r.sim.get_bit(r.room).expect("s_room");
        if room {
            credit = CREDIT;
            after_low = 0;
        }
        if pending.is_none() {
            // Bursts of ICMP errors, now and then other packets; pauses now and then.
            let burst = (k / 200) % 3 != 2;
            let s = if rng.random_bool(0.5) { &s0 } else { &s1 };
            let mut d = if burst || rng.random_bool(0.3) {
                icmp_error(&mut rng, s)
            } else {
                let frame = s.frame(&mut rng);
                Desc {
                    bank: 0,
                    enable: true,
                    default_drop: false,
                    inject: None,
                    len: frame.len(),
                    parsed: parse::parse(&frame),
                    what: "scenario traffic",
                }
            };
            ctrl_bits(&mut rng, &mut d);
            d.enable = true;
            pending = Some(d);
        }
        let offer = credit > 0 && !rng.random_bool(0.02);
        let d = pending.as_ref().filter(|_| offer).cloned();
        if r.step_offer(d.as_ref()) {
            credit -= 1;
            k += 1;
            pending = None;
            // Sent from the last clock s_room was high on (that clock's included).
            after_low += 1;
            most_after_low = most_after_low.max(after_low);
        }
        max_flight = max_flight.max(r.flight.len());
    }
    r.drain();
    // The producer used a whole credit (the FIFO then held its most).
    assert_eq!(
        most_after_low, CREDIT,
        "descriptors sent from the last clock s_room was high, at most (seed {seed:#x})"
    );
    eprintln!("descriptors in flight at most: {max_flight}");
}
