//! Health-checker benchmark (being written): 10,000 backends probed every second.
fn main() {}
