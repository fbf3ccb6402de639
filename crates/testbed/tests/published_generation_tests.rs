//! Upstream's own generation tests, as published, on the published module (the `published`
//! point of crates/points): the copy behaves as the published crate does. The tests name the
//! module `candle_transformers::generation`; `extern crate self` makes that path this crate's
//! re-export of the published one rather than the patched dependency.

extern crate self as candle_transformers;

pub use points::published::generation;

#[path = "../../vendor/published-tests/generation_tests.rs"]
mod generation_tests;

/// The path the tests use reaches the published module: there, temperature 0 still fails.
#[test]
fn the_tests_reach_the_published_module() -> candle::Result<()> {
    use candle_transformers::generation::{LogitsProcessor, Sampling};
    let logits = candle::Tensor::new(&[0.1f32, 0.2, 0.7], &candle::Device::Cpu)?;
    let mut processor = LogitsProcessor::from_sampling(42, Sampling::All { temperature: 0.0 });
    assert!(processor.sample(&logits).is_err());
    Ok(())
}
