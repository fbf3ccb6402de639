//! The README's workaround for the published crates, between the `README` markers below (the
//! xtask testsuite checks that the README shows these lines): it makes temperature 0 greedy
//! without any patch.

use anyhow::Result;
use candle::Device;
use testbed::fixture::Fixture;
use testbed::sampler::{all_samplings, Upstream, RAND_INVALID_WEIGHT};

// README begin
use candle_transformers::generation::Sampling::{self, *};
fn greedy_if_cold(sampling: Sampling) -> Sampling {
    let temperature = match sampling {
        ArgMax => return sampling,
        All { temperature } | TopK { temperature, .. } | TopP { temperature, .. } => temperature,
        TopKThenTopP { temperature, .. } | GumbelSoftmax { temperature } => temperature,
    };
    if temperature < 1e-7 {
        ArgMax
    } else {
        sampling
    }
}
// README end

/// On the published sampler and the real logits, temperature 0 fails with rand's error (all
/// but `GumbelSoftmax`); with the workaround, 0 and -1 give the greedy token.
#[test]
fn the_readme_workaround_makes_temperature_0_greedy_on_the_published_crates() -> Result<()> {
    let logits = Fixture::load()?.tensor(&Device::Cpu)?;
    let greedy = Upstream
        .from_sampling(42, &Sampling::ArgMax)
        .sample(&logits)?;
    for temperature in [0.0, -1.0] {
        for sampling in all_samplings(temperature, 40, 0.9) {
            let upstream = Upstream.from_sampling(42, &sampling).sample(&logits);
            let gumbel = matches!(sampling, Sampling::GumbelSoftmax { .. });
            if temperature == 0.0 && !gumbel && sampling != Sampling::ArgMax {
                let err = upstream.expect_err("upstream samples at temperature 0");
                assert!(
                    err.to_string().contains(RAND_INVALID_WEIGHT),
                    "{sampling:?}: {err}"
                );
            }
            let mut fixed = Upstream.from_sampling(42, &greedy_if_cold(sampling.clone()));
            assert_eq!(fixed.sample(&logits)?, greedy, "{sampling:?}");
        }
    }
    // A temperature that samples stays as it is.
    let warm = Sampling::TopK {
        k: 40,
        temperature: 0.7,
    };
    assert_eq!(greedy_if_cold(warm.clone()), warm);
    Ok(())
}
