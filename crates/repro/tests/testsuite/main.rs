//! The repro testsuite: every integration test of the crate, one module a file, in one binary
//! that links candle and the tokenizer once (`cargo test -p repro --test testsuite real_model::`
//! runs one module). A new file belongs here as a module: `cargo xtask check` fails on a second
//! test binary.

mod fixture_run;
mod help;
mod real_model;
mod tokenizer;
mod workaround;
