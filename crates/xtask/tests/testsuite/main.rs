//! The xtask testsuite: every integration test of the crate, one module a file, in one binary
//! that links once, as cargo's own testsuite does (`cargo test -p xtask --test testsuite pr::`
//! runs one module). A new file belongs here as a module: `cargo xtask check` fails on a second
//! test binary.

mod bench_report;
mod budgets;
mod builds;
mod common;
mod docs;
mod help;
mod kept;
mod offline;
mod other_base;
mod patch_use;
mod pr;
mod pr_safety;
mod published;
mod report;
mod round_trip;
mod stack_life;
mod units;
mod vendor;
mod verify;
