//! The tests that the patches add to candle-nn (`candle-nn/tests/sampling.rs`), run on the
//! patched crate. Included from the vendored tree, as the generation tests are.

#[path = "../../../vendor/candle-nn/tests/sampling.rs"]
mod sampling;
