//! Shared test support for the workspace's tests, `cargo repro` and the benches.
