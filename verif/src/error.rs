//! Errors of the verification harness.

use std::path::PathBuf;

/// Why a simulation step or a harness call failed.
#[derive(Debug, thiserror::Error)]
pub enum VerifError {
    /// The Verilated model could not be constructed.
    #[error("the Verilated model {model} could not be constructed")]
    Construct {
        /// Model identifier.
        model: &'static str,
    },
    /// A port name the model does not have.
    #[error("model {model} has no port `{port}`")]
    NoSuchPort {
        /// Model identifier.
        model: &'static str,
        /// The name asked for.
        port: String,
    },
    /// An attempt to drive an output.
    #[error("port `{port}` of model {model} is an output and cannot be driven")]
    NotAnInput {
        /// Model identifier.
        model: &'static str,
        /// Port name.
        port: &'static str,
    },
    /// A value with the wrong number of words for a port.
    #[error("port `{port}` is {width} bits wide; {words} words were given")]
    Width {
        /// Port name.
        port: &'static str,
        /// Port width in bits.
        width: u32,
        /// Words given.
        words: usize,
    },
    /// The waveform file could not be written.
    #[error("cannot write the waveform {}: {why}", path.display())]
    Trace {
        /// Where it was to go.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A transaction did not finish in time.
    #[error("{what} did not complete within {cycles} clock cycles")]
    Timeout {
        /// The transaction.
        what: String,
        /// How long was waited.
        cycles: u64,
    },
    /// An AXI-Lite response other than OKAY.
    #[error("AXI-Lite {what} at {addr:#06x} answered response {resp:#b}")]
    AxiResponse {
        /// Read or write.
        what: &'static str,
        /// Byte address.
        addr: u32,
        /// BRESP/RRESP.
        resp: u32,
    },
    /// Setting the model up (loading tables or connections) failed.
    #[error("setting up the model failed: {0}")]
    Setup(String),
    /// The model broke a bus protocol an agent serves.
    #[error("bus protocol broken: {0}")]
    Protocol(String),
}
