//! Properties of the patched sampler over random logits: lengths 1 to 49152, with and without
//! ties and `-inf` entries, every variant and parameter.

use candle::{Device, Result, Tensor};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use testbed::sampler::{Patched, Sampling};

/// A row of logits, described by a few numbers so that proptest shrinks those rather than
/// 49152 floats.
#[derive(Clone, Debug)]
struct Logits {
    len: usize,
    seed: u64,
    /// Values are uniform in [-scale, scale].
    scale: f32,
    /// Round to a few values, so that many tie.
    ties: bool,
    /// Share of `-inf` entries, in quarters; one entry always stays finite.
    masked_quarters: u32,
}

impl Logits {
    fn values(&self) -> Vec<f32> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let mut values: Vec<f32> = (0..self.len)
            .map(|_| {
                let value = rng.random_range(-self.scale..=self.scale);
                let value = if self.ties {
                    (value * 3.0 / self.scale).round() * self.scale / 3.0
                } else {
                    value
                };
                if rng.random_range(0..4) < self.masked_quarters {
                    f32::NEG_INFINITY
                } else {
                    value
                }
            })
            .collect();
        let keep = self.seed as usize % self.len;
        if values[keep] == f32::NEG_INFINITY {
            values[keep] = rng.random_range(-self.scale..=self.scale);
        }
        values
    }
}

fn logits() -> impl Strategy<Value = Logits> {
    (
        prop_oneof![1usize..64, 64usize..4096, 4096usize..=49152],
        any::<u64>(),
        prop_oneof![Just(1e-3f32), Just(1.0), Just(30.0), Just(1e4)],
        any::<bool>(),
        0u32..4,
    )
        .prop_map(|(len, seed, scale, ties, masked_quarters)| Logits {
            len,
            seed,
            scale,
            ties,
            masked_quarters,
        })
}

/// Every variant that has a temperature, with `temperature`, its k (0 disables top-k) and p
/// drawn too.
fn sampling(temperature: impl Strategy<Value = f64>) -> impl Strategy<Value = Sampling> {
    (
        1usize..6,
        prop_oneof![Just(0usize), 1usize..60_000],
        -0.2f64..1.2,
        temperature,
    )
        .prop_map(|(variant, k, p, temperature)| {
            testbed::sampler::all_samplings(temperature, k, p)[variant].clone()
        })
}

fn greedy_temperature() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        -1e3f64..0.0,
        0.0f64..1e-7,
    ]
}

/// Log-uniform from 1e-7, the smallest temperature sampled from, to 1e3.
fn sampled_temperature() -> impl Strategy<Value = f64> {
    (-7.0f64..3.0).prop_map(|exponent| 10f64.powf(exponent).max(1e-7))
}

fn sample(sampling: &Sampling, values: &[f32], seed: u64) -> Result<u32> {
    let tensor = Tensor::from_slice(values, values.len(), &Device::Cpu)?;
    Patched.from_sampling(seed, sampling).sample(&tensor)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// At a temperature that means greedy, every variant picks what `Tensor::argmax` picks, and
    /// that is a largest logit.
    #[test]
    fn greedy_temperatures_pick_the_argmax(logits in logits(), sampling in sampling(greedy_temperature()), seed: u64) {
        let values = logits.values();
        let tensor = Tensor::from_slice(&values, values.len(), &Device::Cpu).unwrap();
        let argmax = tensor.argmax(0).unwrap().to_scalar::<u32>().unwrap();
        let token = sample(&sampling, &values, seed).unwrap();
        let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        prop_assert_eq!(token, argmax);
        prop_assert_eq!(values[token as usize], max);
    }

    /// From temperature 1e-7 up, finite logits within ±1e4 (some masked with `-inf`, never all)
    /// always give a token, and never a masked one.
    #[test]
    fn sampled_temperatures_never_fail(logits in logits(), sampling in sampling(sampled_temperature()), seed: u64) {
        let values = logits.values();
        let token = sample(&sampling, &values, seed);
        prop_assert!(token.is_ok(), "{sampling:?}: {:?}", token.map_err(|e| testbed::sampler::message(&e)));
        let token = token.unwrap() as usize;
        prop_assert!(token < values.len());
        prop_assert!(values[token].is_finite(), "{sampling:?} picked masked token {token}");
    }
}
