//! Shared test support for the workspace's tests, `cargo repro` and the benches: the real model's
//! identity, the committed logits fixture, the upstream and patched samplers side by side, the
//! report's cases, and the device choice.

pub mod cases;
pub mod device;
pub mod fixture;
pub mod fuzz;
pub mod model;
pub mod sampler;

/// Prints a line to stderr that `cargo test` shows even for a passing test: the harness only
/// captures the `print!` family, not writes to the handle.
pub fn announce(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
