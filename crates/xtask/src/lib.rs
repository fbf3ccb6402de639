//! `cargo xtask <command>`, a module with a `run` each; what the tests reach is `pub`.
#![warn(unreachable_pub)]

// The commands, and the command line.
pub mod bench_report;
pub mod check;
pub mod fetch;
pub mod flags;
pub mod format_patch;
pub mod metal;
pub mod pr;
pub mod vendor;

// What the commands share: the series and how it goes onto a tree, the clone's record, the
// published crates, the committed benchmark report, and the workspace, git and files.
pub mod apply;
pub mod cherry_pick;
pub mod cmd;
mod cross;
mod expected;
mod fsutil;
pub mod git;
mod patches_dir;
pub mod project;
pub mod published;
pub mod record;
pub mod report;
pub mod series;
mod template;
pub mod trees;

/// The pin is read by `cargo repro` too: it lives in `shared`.
pub use shared::pin;
