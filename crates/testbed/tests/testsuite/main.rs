//! The testbed testsuite: every integration test of the crate, one module a file, in one binary
//! that links candle once (`cargo test -p testbed --test testsuite streams::` runs one module).
//! A new file belongs here as a module: `cargo xtask check` fails on a second test binary.

mod bad_inputs;
mod bug_report;
mod candle_generation_tests;
mod candle_nn_sampling_tests;
mod fixture;
mod fuzz_corpus;
mod properties;
mod published_generation_tests;
mod same_tokens;
mod streams;
