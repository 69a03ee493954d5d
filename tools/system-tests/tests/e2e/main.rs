//! End to end on real Linux networking: namespaces, veths, nlb-sim on AF_PACKET, nlbd, real
//! backends and clients (docs/e2e.md). Needs root; without it the tests say so and pass, except
//! under CI=true, where they fail.

mod kubernetes;
mod model_nic;
mod rtl_nic;
