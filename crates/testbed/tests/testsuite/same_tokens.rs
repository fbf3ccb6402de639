//! The speed patches change no token: top-p without sorting the whole vocabulary (0008) gives,
//! for the same seed, upstream's tokens, on the real logits and on logits built to break them.
//!
//! `cargo test` draws `SAME_TOKENS_DRAWS` tokens per setting (default 100: upstream's top-p
//! takes about 2 ms a draw here); `SAME_TOKENS_DRAWS=10000 cargo test -p testbed --test testsuite same_tokens::` runs
//! the full grid.

use candle::{DType, Device, Result, Tensor};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use testbed::fixture::Fixture;
use testbed::sampler::{Implementation, Sampling};

fn draws() -> usize {
    std::env::var("SAME_TOKENS_DRAWS")
        .ok()
        .map(|value| value.parse().expect("SAME_TOKENS_DRAWS: a number of draws"))
        .unwrap_or(100)
}

/// `draws` tokens of each implementation from seed `seed`; fails naming the first difference.
fn same_tokens(sampling: &Sampling, logits: &Tensor, seed: u64, draws: usize) -> Result<()> {
    let [upstream, patched] =
        Implementation::BOTH.map(|i| i.from_sampling(seed, sampling).stream(logits, draws));
    let (upstream, patched) = (upstream?, patched?);
    if let Some(draw) = upstream.iter().zip(&patched).position(|(u, p)| u != p) {
        panic!(
            "{sampling:?}, seed {seed}: draw {draw} differs: upstream {}, patched {}",
            upstream[draw], patched[draw]
        );
    }
    Ok(())
}

const TEMPERATURES: [f64; 4] = [0.2, 0.7, 1.0, 1.5];
const PS: [f64; 4] = [0.5, 0.9, 0.95, 0.99];

#[test]
fn top_p_samples_upstreams_tokens_on_real_logits() -> Result<()> {
    let logits = Fixture::load()?.tensor(&Device::Cpu)?;
    for (seed, (temperature, p)) in TEMPERATURES
        .iter()
        .flat_map(|t| PS.iter().map(move |p| (*t, *p)))
        .enumerate()
    {
        same_tokens(
            &Sampling::TopP { p, temperature },
            &logits,
            seed as u64,
            draws(),
        )?;
    }
    Ok(())
}

#[test]
fn top_k_then_top_p_samples_upstreams_tokens_on_real_logits() -> Result<()> {
    let logits = Fixture::load()?.tensor(&Device::Cpu)?;
    let vocab = logits.dim(0)?;
    for k in [1, 40, vocab] {
        for (seed, (temperature, p)) in TEMPERATURES
            .iter()
            .flat_map(|t| PS.iter().map(move |p| (*t, *p)))
            .enumerate()
        {
            let sampling = Sampling::TopKThenTopP { k, p, temperature };
            same_tokens(&sampling, &logits, seed as u64, draws())?;
        }
    }
    Ok(())
}

/// The speed patches change the draw (0007) and the probabilities (0008) of every variant that
/// samples: `All` and `TopK` over the same temperatures, with k in {1, 40, the vocabulary}.
#[test]
fn all_and_top_k_sample_upstreams_tokens_on_real_logits() -> Result<()> {
    let logits = Fixture::load()?.tensor(&Device::Cpu)?;
    let vocab = logits.dim(0)?;
    for (seed, temperature) in TEMPERATURES.into_iter().enumerate() {
        same_tokens(
            &Sampling::All { temperature },
            &logits,
            seed as u64,
            draws(),
        )?;
        for k in [1, 40, vocab] {
            let sampling = Sampling::TopK { k, temperature };
            same_tokens(&sampling, &logits, seed as u64, draws())?;
        }
    }
    Ok(())
}

/// Logits built to break a nucleus found without a full sort.
#[derive(Clone, Debug)]
enum Shape {
    /// Uniform in [-scale, scale], rounded to bf16: many ties.
    Bf16 { scale: f32 },
    /// `tied` tokens share the top logit, the rest lie below: with `p` inside the group's
    /// mass, the boundary falls between tied tokens.
    TiedTop { tied: usize, gap: f32 },
    /// One token far above the others.
    Dominant { lead: f32 },
    /// Every logit equal.
    Flat,
}

fn values(shape: &Shape, len: usize, seed: u64) -> Result<Vec<f32>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut uniform =
        |scale: f32| -> Vec<f32> { (0..len).map(|_| rng.random_range(-scale..=scale)).collect() };
    Ok(match *shape {
        Shape::Bf16 { scale } => {
            let values = Tensor::new(uniform(scale).as_slice(), &Device::Cpu)?;
            values
                .to_dtype(DType::BF16)?
                .to_dtype(DType::F32)?
                .to_vec1()?
        }
        Shape::TiedTop { tied, gap } => {
            let mut values = uniform(1.0);
            for (i, value) in values.iter_mut().enumerate() {
                *value = if i % (len / tied.min(len)).max(1) == 0 {
                    gap
                } else {
                    *value
                };
            }
            values
        }
        Shape::Dominant { lead } => {
            let mut values = uniform(3.0);
            values[seed as usize % len] = lead;
            values
        }
        Shape::Flat => vec![0.5; len],
    })
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        prop_oneof![Just(1f32), Just(8.0), Just(40.0)].prop_map(|scale| Shape::Bf16 { scale }),
        (2usize..200, prop_oneof![Just(2f32), Just(6.0), Just(12.0)])
            .prop_map(|(tied, gap)| Shape::TiedTop { tied, gap }),
        prop_oneof![Just(10f32), Just(30.0)].prop_map(|lead| Shape::Dominant { lead }),
        Just(Shape::Flat),
    ]
}

/// p anywhere in (0, 1), and at the f32 values next to 0 and 1.
fn top_p() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.01f64..0.999,
        Just(f64::from(f32::from_bits(1))),
        Just(f64::from(f32::MIN_POSITIVE)),
        Just(1.0 - f64::from(f32::EPSILON) / 2.0),
        Just(1.0 - f64::from(f32::EPSILON)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn top_p_samples_upstreams_tokens(
        shape in shape(),
        len in prop_oneof![1usize..64, 64usize..5000, 5000usize..=200_000],
        logits_seed: u64,
        p in top_p(),
        temperature in prop_oneof![Just(0.3f64), Just(1.0), Just(2.0)],
        // From 1: upstream's k = 0 fails, where the series disables top-k (0003).
        k in prop_oneof![1usize..100, Just(usize::MAX)],
        seed: u64,
    ) {
        let values = values(&shape, len, logits_seed)?;
        let logits = Tensor::new(values.as_slice(), &Device::Cpu)?;
        same_tokens(&Sampling::TopP { p, temperature }, &logits, seed, 3)?;
        same_tokens(&Sampling::TopKThenTopP { k, p, temperature }, &logits, seed, 3)?;
    }
}
