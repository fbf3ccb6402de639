//! Upstream's own `candle-transformers/tests/generation_tests.rs`, with the tests that the
//! patches add, run on the patched crate. Included from the vendored tree rather than built
//! there, so that `cargo test` does not compile every candle model's doctests.

#[path = "../../../vendor/candle-transformers/tests/generation_tests.rs"]
mod generation_tests;
