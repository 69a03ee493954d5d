//! The compiler tests of this crate, one test binary (each module was once a binary of its own;
//! one binary links the crate and its dependencies once).

mod backend_services;
mod capacity;
mod compile;
mod determinism;
mod explain;
mod gcloud;
mod image;
mod kube_scale_digest;
mod kubernetes;
mod maglev;
mod maglev_pinned;
mod passthrough;
mod service_compile;
mod service_explain;
mod service_lb_policy;
mod service_runtime;
mod validation;
