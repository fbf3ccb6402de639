//! The command line of `cargo xtask`; each command's options live beside its `run`.

use clap::Parser;

use crate::{bench_report, format_patch, pr, vendor};

/// The workspace's tool: vendors candle with patches/, checks it, measures it, and prepares
/// the upstream pull requests.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", disable_help_subcommand = true)]
pub enum Command {
    /// Download the pinned crates into cargo's cache and check their sha256, and fetch the
    /// fuzzer's dependencies, failing on a stale lock file (so the fuzzer builds offline).
    Fetch,
    /// Regenerate the generated folders (one per pinned crate, the upstream module, the
    /// published tests, the benches' points) from the published crates and patches/, pinning
    /// any crate newly listed in patches/upstream.toml.
    Vendor(vendor::Options),
    /// Fail unless those folders are exactly the published crates (+ patches/), every patch's
    /// index lines name the blobs the series gives, cargo builds each pinned crate from its
    /// folder, and the workspace builds each crate once (offline).
    Check,
    /// The whole series, each patch against the branch it builds on, and the decode loop, from
    /// `cargo bench`'s results and paired rounds, with verdicts and floors: writes the report
    /// that is committed, docs/report/bench-report.md, with its data and pictures.
    BenchReport(bench_report::Options),
    /// Make the upstream pull requests as a stack, one branch per patch in the clone, committed
    /// as the clone's git identity or --author, and write target/pr/<branch>/ (title, body,
    /// patch) for each.
    Pr(pr::Options),
    /// Clippy for aarch64-apple-darwin with `metal`, over the crates that have the feature
    /// (type-checked, not linked or run).
    MetalCheck,
    /// Write a branch's commits back into patches/ (after review comments).
    FormatPatch(format_patch::Options),
}
