//! The workspace's tool: `cargo xtask <command>`. `main.rs` only dispatches; each command is a
//! module with a `run`.

pub mod bench_report;
pub mod branches;
pub mod check;
pub mod date;
pub mod expected;
pub mod flags;
pub mod format_patch;
pub mod fsutil;
pub mod git;
pub mod manifest;
pub mod metal;
pub mod patch_use;
pub mod pr;
pub mod project;
pub mod published;
pub mod series;
pub mod trees;
pub mod vendor;

/// The pin is read by `cargo repro` too: it lives in `shared`.
pub use shared::pin;
