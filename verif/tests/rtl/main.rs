//! The rtl tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod axis_skid;
mod bus;
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
mod harness;
mod hit_bits;
mod l3_csum;
mod lookup;
mod mul_const;
mod overlap;
mod parser;
mod performance;
mod queues;
mod regs;
mod spi_flash;
mod table_cmd;
mod table_mem;
