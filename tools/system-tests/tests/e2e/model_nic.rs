//! End-to-end on real Linux networking with nlb-sim running the golden model: curl through
//! the VIP, direct server return, health checks taking a backend out, a long-lived connection
//! kept, fail open; a backend service over two zones whose NIC's zone fills, then spills; and
//! three NLB hosts announcing the VIP by BGP to a router running BIRD, sharing one
//! configuration in etcd, through a drain, an nlbd restart and the loss of a host under
//! long-lived connections (the scenarios are in `nlb_system_tests::lab`; topology and how to
//! run them: docs/e2e.md). Needs root; skips without it unless `CI` is set.

use nlb_system_tests::lab as common;

use common::Engine;

#[test]
fn curl_through_the_simulated_nic_with_health_checks_and_dsr() {
    if !common::should_run("cargo test -p nlb-system-tests --test e2e model_nic::") {
        return;
    }
    common::curl_through_the_simulated_nic_with_health_checks_and_dsr(Engine::Model);
}

#[test]
fn a_backend_service_fills_the_nics_zone_then_spills_to_the_other() {
    if !common::should_run("cargo test -p nlb-system-tests --test e2e model_nic::") {
        return;
    }
    common::backend_service_fills_the_near_zone_then_spills();
}

#[test]
fn a_bgp_fleet_drains_restarts_and_loses_a_host() {
    if !common::should_run("cargo test -p nlb-system-tests --test e2e model_nic::")
        || !common::have_etcd()
        || !common::have_bird()
    {
        return;
    }
    common::bgp_fleet_drains_restarts_and_loses_a_host();
}
