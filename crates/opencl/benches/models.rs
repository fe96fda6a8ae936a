//! placeholder bench while the crate is being written.
fn main() {}
