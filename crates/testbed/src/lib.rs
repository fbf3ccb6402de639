//! Shared test support for the workspace's tests, `cargo repro` and the benches: the real model's
//! identity, the committed logits fixture, the upstream and patched samplers side by side, the
//! report's cases, and the device choice.

pub mod cases;
pub mod device;
pub mod fixture;
pub mod fuzz;
pub mod model;
pub mod sampler;

use std::path::{Path, PathBuf};

/// The workspace's root, from this crate's manifest.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testbed sits two folders below the workspace root")
        .to_path_buf()
}

/// Cargo's target folder.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// Prints a line to stderr that `cargo test` shows even for a passing test: the harness only
/// captures the `print!` family, not writes to the handle.
pub fn announce(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
