//! `cargo xtask <command>`, a module with a `run` each; what the tests reach is `pub`.
#![warn(unreachable_pub)]

pub mod apply;
pub mod bench_report;
pub mod branches;
pub mod check;
mod expected;
pub mod flags;
pub mod format_patch;
mod fsutil;
pub mod git;
pub mod metal;
mod patches_dir;
pub mod pr;
pub mod project;
pub mod published;
pub mod record;
pub mod series;
mod template;
pub mod trees;
pub mod vendor;

/// The pin is read by `cargo repro` too: it lives in `shared`.
pub use shared::pin;
