//! The daemon tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod bgp;
mod deploy;
mod flash_cli;
mod fleet;
mod kube_api;
mod monitoring;
mod nlb_sim;
mod nlb_sim_reload;
mod nlbd;
mod nlbd_config_dir;
mod service_policy;
mod top;
