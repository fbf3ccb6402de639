//! What the criterion benches and `bench-driver` measure: logits at each vocabulary, comparisons.

use std::time::{Duration, Instant};

use candle::{Device, Result, Tensor};
use rand::{Rng, SeedableRng};
use shared::bench::{TOP_K, TOP_P};
use testbed::fixture::Fixture;
use testbed::sampler::{all_samplings, Implementation, Processor, Sampling};

/// SmolLM2 (the fixture itself), then Llama 2, Llama 3 and Qwen 2's vocabularies.
pub const VOCAB_SIZES: [usize; 4] = [49152, 32000, 128256, 151936];

pub mod floor;

/// The temperature every sampled variant runs at.
pub const TEMPERATURE: f64 = 0.8;
pub const SEED: u64 = 42;

/// One comparison: the sampling the published point (and its control) runs, and the one every
/// other point runs.
pub struct Comparison {
    pub group: &'static str,
    pub upstream: Sampling,
    pub patched: Sampling,
}

impl Comparison {
    /// The processor of the point called `name` (one of `points::NAMES`), seeded with `SEED`.
    /// The control is the published code, so it runs what the published point runs.
    pub fn processor(&self, name: &str) -> Option<Processor> {
        let sampling = match name {
            shared::PUBLISHED_POINT | shared::CONTROL_POINT => &self.upstream,
            _ => &self.patched,
        };
        Some(Implementation::point(name)?.from_sampling(SEED, sampling))
    }
}

/// A group per variant at `TEMPERATURE`, each side the same; then temperature 0, where upstream
/// fails, so patched `TopK` at temperature 0 is set against what it must cost: `ArgMax`.
pub fn comparisons() -> Vec<Comparison> {
    // Exhaustive, so that a new variant cannot go unnamed or be dropped.
    let group = |sampling: &Sampling| match sampling {
        Sampling::ArgMax => "argmax",
        Sampling::All { .. } => "all",
        Sampling::TopK { .. } => "top_k",
        Sampling::TopP { .. } => "top_p",
        Sampling::TopKThenTopP { .. } => "top_k_then_top_p",
        Sampling::GumbelSoftmax { .. } => "gumbel_softmax",
    };
    all_samplings(TEMPERATURE, TOP_K, TOP_P)
        .into_iter()
        .map(|sampling| Comparison {
            group: group(&sampling),
            upstream: sampling.clone(),
            patched: sampling,
        })
        .chain([Comparison {
            group: "temperature_0",
            upstream: Sampling::ArgMax,
            patched: Sampling::TopK {
                k: TOP_K,
                temperature: 0.0,
            },
        }])
        .collect()
}

/// Logits of `vocab` entries: the fixture's own, or values drawn from them with a fixed seed.
pub fn logits(fixture: &Fixture, vocab: usize, device: &Device) -> Result<Tensor> {
    if vocab == fixture.logits.len() {
        return fixture.tensor(device);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(vocab as u64);
    let values: Vec<f32> = (0..vocab)
        .map(|_| fixture.logits[rng.random_range(0..fixture.logits.len())])
        .collect();
    Tensor::from_slice(&values, vocab, device)
}

/// The time of `calls` calls of `sample`, the device synced before each reading of the clock.
pub fn time_calls(
    processor: &mut Processor,
    logits: &Tensor,
    device: &Device,
    calls: u64,
) -> Result<Duration> {
    device.synchronize()?;
    let start = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(processor.sample(logits)?);
    }
    device.synchronize()?;
    Ok(start.elapsed())
}
