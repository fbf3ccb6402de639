//! The committed benchmark report, `docs/report/`: its data (`bench-report.json`), which
//! `bench-report` writes and `pr` and `check` read, its Markdown and its forest plot.

use std::path::PathBuf;

use crate::project::Layout;

mod committed;
pub mod data;
pub mod forest;
pub mod render;
pub mod stats;

pub use committed::{committed, patch_hashes, staleness};
pub use data::{Report, Row};
pub use forest::{step_png, PNG};
pub(crate) use render::step_evidence;

/// The report's file in `docs/report/`, beside its data and pictures.
pub const MARKDOWN: &str = "bench-report.md";

/// Where `bench-report` writes what it measured as data, for `pr` and `check`.
pub fn data_path(layout: &Layout) -> PathBuf {
    layout.report_dir().join("bench-report.json")
}

/// `FULL_BENCH` as a literal, for `FULL_RUN`.
macro_rules! full_bench {
    () => {
        "cargo bench -- --noplot"
    };
}

/// The criterion run before a full report.
pub const FULL_BENCH: &str = full_bench!();

/// What measures every patch again, as the messages that ask for it say.
pub const FULL_RUN: &str = concat!(
    "`",
    full_bench!(),
    "`, then `cargo xtask bench-report --callgrind`"
);
