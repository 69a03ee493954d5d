//! The rtl tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod async_fifo;
mod axi_cdc;
mod axil_cdc;
mod axis_skid;
mod board;
mod bus;
mod cmd_ring;
mod conntrack;
mod contents;
mod corners;
mod counter_bank;
mod counters;
mod device;
mod differential;
mod editor;
mod fifo;
mod flow_hash;
mod frame_fifo;
mod harness;
mod hit_bits;
mod host_rings;
mod l3_csum;
mod learning;
mod lookup;
mod mul_const;
mod overlap;
mod parser;
mod performance;
mod queues;
mod regs;
mod rx_no_stall;
mod spi_flash;
mod table_cmd;
mod table_mem;

/// A configuration of `examples/` compiled with every target healthy.
pub(crate) fn compiled_example(name: &str) -> flowtable_compiler::Compiled {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let (_, compiled) = flowtable_compiler::compile_file(
        &path,
        &flowtable_compiler::HealthState::default(),
        &flowtable_compiler::CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{} compiles: {e}", path.display()));
    compiled
}
