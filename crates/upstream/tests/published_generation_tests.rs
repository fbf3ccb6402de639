//! Upstream's own generation tests, as published, on the unpatched module: the copy behaves as
//! the published crate does.

extern crate upstream as candle_transformers;

#[path = "../published-tests/generation_tests.rs"]
mod generation_tests;
