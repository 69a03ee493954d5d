//! The RTL behind the driver's `Device` trait: the driver discovers it, attaches its loader
//! (reading both banks back through the table window) and loads a compiled example
//! configuration into it exactly as into hardware; the golden model's device (`nlb_driver::Sim`)
//! gets the same loads through the same loader. Then the same traffic goes through both:
//! every result, every transmitted frame, and what the host reads from the queues (punts and
//! learn events, popped through the registers) must agree.

use flowtable_compiler::{compile_file, CompileOptions, HealthState};
use nlb_driver::device::Device;
use nlb_driver::loader::{Loader, LoaderOptions};
use nlb_driver::{discover, Sim};
use nlb_hw::blocks::queues;
use nlb_verif::bench::seed_from_env;
use nlb_verif::device::RtlDevice;
use nlb_verif::scenario::Scenario;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::Path;

/// Pops every punt and learn event through the queue registers: (punt header + data words,
/// learn words).
fn drain_queues(dev: &mut dyn Device) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let mut punts = Vec::new();
    while dev.read32(queues::PUNT_STATUS).expect("status") & 0xffff != 0 {
        dev.write32(queues::PUNT_POP, 1).expect("pop");
        let len = dev.read32(queues::PUNT_LEN).expect("len");
        let mut w: Vec<u32> = (0..queues::PUNT_HEADER_COUNT)
            .map(|i| dev.read32(queues::PUNT_HEADER + 4 * i).expect("header"))
            .collect();
        w.push(len);
        w.extend(
            (0..len.div_ceil(4)).map(|i| dev.read32(queues::PUNT_DATA + 4 * i).expect("data")),
        );
        punts.push(w);
    }
    let mut learns = Vec::new();
    while dev.read32(queues::LEARN_STATUS).expect("status") & 0xffff != 0 {
        dev.write32(queues::LEARN_POP, 1).expect("pop");
        learns.push(
            (0..queues::LEARN_DATA_COUNT)
                .map(|i| dev.read32(queues::LEARN_DATA + 4 * i).expect("learn"))
                .collect(),
        );
    }
    (punts, learns)
}

#[test]
fn the_driver_loads_the_rtl_like_hardware_and_it_forwards_like_the_model() {
    let seed = seed_from_env(0xde71_0001);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rtl = RtlDevice::new(seed).expect("model thread");
    let info = discover(&mut rtl).expect("the RTL is discovered");
    assert_eq!(info.profile.name, "sim");
    let mut model = Sim::new(info.profile);

    let t0 = std::time::Instant::now();
    let mut rtl_loader =
        Loader::attach(&mut rtl, info.profile, LoaderOptions::default()).expect("attach");
    let mut model_loader =
        Loader::attach(&mut model, info.profile, LoaderOptions::default()).expect("attach");
    let attach_secs = t0.elapsed().as_secs_f64();

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut total = 0usize;
    for name in ["web.yaml", "ipv6.yaml", "udp-dns.yaml"] {
        let (_, compiled) = compile_file(
            &examples.join(name),
            &HealthState::default(),
            &CompileOptions::default(),
        )
        .expect("the example compiles");
        let r = rtl_loader
            .load(&mut rtl, &compiled.tables, &compiled.nic)
            .expect("load into the RTL");
        model_loader
            .load(&mut model, &compiled.tables, &compiled.nic)
            .expect("load into the model");
        let scenario = Scenario::from_tables(compiled.tables.clone(), &mut rng);
        let frames: Vec<Vec<u8>> = (0..400).map(|_| scenario.frame(&mut rng)).collect();
        let got = rtl.receive(frames.clone()).expect("RTL traffic");
        let mut out = vec![0u8; 16384];
        for (i, (f, g)) in frames.iter().zip(&got).enumerate() {
            let want = model.lock().receive(f, &mut out).expect("model traffic");
            assert_eq!(g.result, want, "{name}: packet {i} (bank {})", r.bank);
            assert_eq!(g.output, out[..want.out_len], "{name}: packet {i} output");
        }
        assert_eq!(got.len(), frames.len());
        let (rtl_q, model_q) = (drain_queues(&mut rtl), drain_queues(&mut model));
        assert_eq!(rtl_q, model_q, "{name}: punt and learn queues");
        total += frames.len();
    }
    eprintln!(
        "discover + attach (both banks read back through the window): {attach_secs:.1} s; \
         {total} packets compared"
    );
}
