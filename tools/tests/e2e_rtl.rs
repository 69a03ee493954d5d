//! End-to-end on real Linux networking with nlb-sim running the Verilator RTL
//! (`nlb-sim --engine rtl`, feature `rtl`): the same scenario as `e2e.rs` (in
//! `common/mod.rs`), every packet through `nlb_top` and every table, connection and counter
//! through its AXI-Lite registers, loaded by nlbd's driver as on a card. Needs root; skips
//! without it unless `CI` is set. See docs/e2e.md.
#![cfg(feature = "rtl")]

mod common;

use common::Engine;

#[test]
fn curl_through_the_rtl_nic_with_health_checks_and_dsr() {
    if !common::should_run("cargo test -p nlb-tools --features rtl --test e2e_rtl") {
        return;
    }
    common::curl_through_the_simulated_nic_with_health_checks_and_dsr(Engine::Rtl);
}
