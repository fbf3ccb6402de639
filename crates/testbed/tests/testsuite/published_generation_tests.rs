//! Upstream's own generation tests, as published, on the published module (the `published`
//! point of crates/points): the copy behaves as the published crate does. The tests name the
//! module `candle_transformers::generation`; inside `generation_tests`, a module of that name
//! (which shadows the patched crate there) makes the path reach the published one.

mod generation_tests {
    pub(super) mod candle_transformers {
        pub use points::published::generation;
    }

    include!("../../../vendor/published-tests/generation_tests.rs");
}

/// The path the tests use reaches the published module: there, temperature 0 still fails.
#[test]
fn the_tests_reach_the_published_module() -> candle::Result<()> {
    use generation_tests::candle_transformers::generation::{LogitsProcessor, Sampling};
    let logits = candle::Tensor::new(&[0.1f32, 0.2, 0.7], &candle::Device::Cpu)?;
    let mut processor = LogitsProcessor::from_sampling(42, Sampling::All { temperature: 0.0 });
    assert!(processor.sample(&logits).is_err());
    Ok(())
}
