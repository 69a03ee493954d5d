//! (crate being built up; see the issues)
