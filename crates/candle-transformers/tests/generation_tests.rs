use candle::{Device, Result, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};

#[test]
fn sample_with_zero_temperature() -> Result<()> {
    let mut logits_process = LogitsProcessor::new(1337, None, None);
    let logits = Tensor::new(&[0.1, 0.2, 0.3, 0.4], &Device::Cpu)?;
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 3);
    Ok(())
}

#[test]
fn sample_with_temperature() -> Result<()> {
    let mut logits_process = LogitsProcessor::new(42, Some(0.9), None);
    let logits = Tensor::new(&[0.1, 0.2, 0.3, 0.4], &Device::Cpu)?;
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 0);
    Ok(())
}

#[test]
fn sample_with_top_p() -> Result<()> {
    let mut logits_process = LogitsProcessor::new(42, Some(1.0), Some(0.5));
    let logits = Tensor::new(&[0.1, 0.2, 0.3, 0.4], &Device::Cpu)?;
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 2);
    Ok(())
}

#[test]
fn sample_as_weighted_index() -> Result<()> {
    use rand::distr::{weighted::WeightedIndex, Distribution};
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    for case in 0..40u64 {
        let len = rng.random_range(1..3000);
        // Some tokens masked, so that some probabilities are zero, the first or the last too.
        let logits: Vec<f32> = (0..len)
            .map(|_| match rng.random_range(0..4) {
                0 => f32::NEG_INFINITY,
                _ => rng.random_range(-10.0..10.0),
            })
            .map(|v| if case % 7 == 0 { v.max(0.0) } else { v })
            .collect();
        if logits.iter().all(|v| *v == f32::NEG_INFINITY) {
            continue;
        }
        let logits = Tensor::new(logits.as_slice(), &Device::Cpu)?;
        let temperature = [0.3, 0.8, 1.0, 1.7][case as usize % 4];
        let prs = candle_nn::ops::softmax_last_dim(&(&logits / temperature)?)?;
        let distr = WeightedIndex::new(prs.to_vec1::<f32>()?).unwrap();
        let sampling = Sampling::All { temperature };
        let mut logits_process = LogitsProcessor::from_sampling(case, sampling);
        let mut reference = rand::rngs::StdRng::seed_from_u64(case);
        for _ in 0..20 {
            let expected = distr.sample(&mut reference) as u32;
            assert_eq!(logits_process.sample(&logits)?, expected, "case {case}");
        }
    }
    Ok(())
}

/// Top-p as a full sort does it: a stable sort by descending probability, every token after the
/// one where the cumulative sum reaches `top_p` clamped to zero, and a draw over all tokens.
fn top_p_by_sorting(prs: &[f32], top_p: f32, rng: &mut rand::rngs::StdRng) -> u32 {
    use rand::distr::{weighted::WeightedIndex, Distribution};
    let mut prs = prs.to_vec();
    let mut order: Vec<usize> = (0..prs.len()).collect();
    order.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));
    let mut cumsum = 0f32;
    for i in order {
        if cumsum >= top_p {
            prs[i] = 0.0;
        } else {
            cumsum += prs[i];
        }
    }
    WeightedIndex::new(&prs).unwrap().sample(rng) as u32
}

#[test]
fn sample_with_top_p_as_a_full_sort() -> Result<()> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    for case in 0..60u64 {
        let len = rng.random_range(1..3000);
        // Logits on a coarse grid, so that many probabilities tie, across the boundary too; every
        // fifth case is flat, every fifth has one dominant token.
        let mut logits: Vec<f32> = (0..len)
            .map(|_| rng.random_range(-40..40) as f32 / 4.0)
            .collect();
        match case % 5 {
            3 => logits.fill(1.0),
            4 => logits[len / 2] = 30.0,
            _ => {}
        }
        let top_p = [0.1, 0.5, 0.9, 0.95, 0.99, 1.0 - f64::from(f32::EPSILON)][case as usize % 6];
        let logits = Tensor::new(logits.as_slice(), &Device::Cpu)?;
        let prs = candle_nn::ops::softmax_last_dim(&logits)?.to_vec1::<f32>()?;
        let sampling = Sampling::TopP {
            p: top_p,
            temperature: 1.0,
        };
        let mut logits_process = LogitsProcessor::from_sampling(case, sampling);
        let mut reference = rand::rngs::StdRng::seed_from_u64(case);
        for _ in 0..20 {
            let expected = top_p_by_sorting(&prs, top_p as f32, &mut reference);
            assert_eq!(logits_process.sample(&logits)?, expected, "case {case}");
        }
    }
    Ok(())
}

#[test]
fn sample_with_top_k() -> Result<()> {
    let mut logits_process = LogitsProcessor::from_sampling(
        42,
        candle_transformers::generation::Sampling::TopK {
            k: 1,
            temperature: 1.0,
        },
    );
    let logits = Tensor::new(&[0.1, 0.2, 0.3, 0.4], &Device::Cpu)?;
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 3);
    let mut logits_process = LogitsProcessor::from_sampling(
        42,
        candle_transformers::generation::Sampling::TopK {
            k: 2,
            temperature: 1.0,
        },
    );
    let logits = Tensor::new(&[0.1, 0.2, 0.3, 0.4], &Device::Cpu)?;
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 3);
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 2);
    Ok(())
}

#[test]
fn sample_gumbel() -> Result<()> {
    let mut logits_process = LogitsProcessor::from_sampling(
        42,
        candle_transformers::generation::Sampling::GumbelSoftmax { temperature: 1.0 },
    );
    let logits = Tensor::new(&[-1.0, 0.0, 0.2, 1.0], &Device::Cpu)?;
    let sm = candle_nn::ops::softmax(&logits, 0)?.to_vec1::<f64>()?;
    let mut counts = vec![0f64; 4];
    let samples = 100000;
    for _ in 0..samples {
        let token = logits_process.sample(&logits)?;
        counts[token as usize] += 1f64 / samples as f64;
    }
    for i in 0..4 {
        if (counts[i] - sm[i]).abs() > 0.05 {
            panic!("pr mismatch {counts:?} {sm:?}");
        }
    }
    Ok(())
}

#[test]
fn sample_gumbel_with_seed() -> Result<()> {
    use rand::{Rng, SeedableRng};
    let values = [-1f32, 0.0, 0.2, 1.0];
    let logits = Tensor::new(&values, &Device::Cpu)?;
    let temperature = 0.7;
    let sample = |seed: u64| -> Result<Vec<u32>> {
        let sampling = Sampling::GumbelSoftmax { temperature };
        let mut logits_process = LogitsProcessor::from_sampling(seed, sampling);
        (0..100).map(|_| logits_process.sample(&logits)).collect()
    };
    let tokens = sample(42)?;
    assert_eq!(tokens, sample(42)?);
    assert_ne!(tokens, sample(43)?);
    // The largest logit / temperature - ln(-ln(u)), one u per logit from the seeded generator.
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for token in tokens {
        let keys = values.map(|logit| {
            let u: f32 = rng.sample(rand::distr::Open01);
            (f64::from(logit) / temperature) as f32 - (-u.ln()).ln()
        });
        let largest = (0..4).fold(0, |best, i| if keys[i] > keys[best] { i } else { best });
        assert_eq!(token, largest as u32);
    }
    Ok(())
}

/// Pearson's chi-square statistic of `counts` against `probs`, the tokens expected fewer than 5
/// times pooled into one class, and its degrees of freedom.
fn chi_square(counts: &[usize], probs: &[f64]) -> (f64, usize) {
    let draws = counts.iter().sum::<usize>() as f64;
    let (mut statistic, mut classes) = (0.0, 0);
    let (mut pooled_count, mut pooled_expected) = (0.0, 0.0);
    for (&count, &p) in counts.iter().zip(probs) {
        let expected = p * draws;
        if expected < 5.0 {
            pooled_count += count as f64;
            pooled_expected += expected;
        } else {
            statistic += (count as f64 - expected).powi(2) / expected;
            classes += 1;
        }
    }
    if pooled_expected > 0.0 {
        statistic += (pooled_count - pooled_expected).powi(2) / pooled_expected;
        classes += 1;
    }
    (statistic, classes - 1)
}

/// Fails unless `draws` Gumbel draws at `temperature` fit the softmax of `logits / temperature`
/// at the 0.001 level.
fn check_gumbel_frequencies(logits: &[f32], temperature: f64, draws: usize) -> Result<()> {
    // The chi-square distribution's 0.999 quantiles, for 1 to 7 degrees of freedom.
    const CRITICAL: [f64; 7] = [10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322];
    let tensor = Tensor::new(logits, &Device::Cpu)?;
    let probs = candle_nn::ops::softmax(&(&tensor / temperature)?, 0)?.to_vec1::<f32>()?;
    let probs: Vec<f64> = probs.into_iter().map(f64::from).collect();
    let sampling = Sampling::GumbelSoftmax { temperature };
    let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
    let mut counts = vec![0; logits.len()];
    for _ in 0..draws {
        counts[logits_process.sample(&tensor)? as usize] += 1;
    }
    let (statistic, freedom) = chi_square(&counts, &probs);
    assert!(
        statistic < CRITICAL[freedom - 1],
        "temperature {temperature}: chi-square {statistic} with {freedom} degrees of freedom"
    );
    Ok(())
}

#[test]
fn sample_gumbel_follows_the_softmax() -> Result<()> {
    let logits = [-1.0, 0.0, 0.2, 1.0, 2.0, 3.0, 4.0, 8.0];
    for temperature in [0.5, 1.0, 2.0] {
        check_gumbel_frequencies(&logits, temperature, 10_000)?;
    }
    // The softmax gives the 1000 zeros 1000 / (1000 + e^10) = 0.0434 together: noise that is
    // capped below 7 never lifts one of them above the 10.
    let mut logits = vec![0f32; 1001];
    logits[0] = 10.0;
    let tensor = Tensor::new(logits.as_slice(), &Device::Cpu)?;
    let sampling = Sampling::GumbelSoftmax { temperature: 1.0 };
    let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
    let mut counts = [0; 2];
    for _ in 0..10_000 {
        counts[usize::from(logits_process.sample(&tensor)? != 0)] += 1;
    }
    let tail = 1000.0 / (1000.0 + 10f64.exp());
    let (statistic, _) = chi_square(&counts, &[1.0 - tail, tail]);
    assert!(statistic < 10.828, "{counts:?}: chi-square {statistic}");
    Ok(())
}

/// Every variant that has a temperature, at `temperature`.
fn samplings(temperature: f64) -> [Sampling; 5] {
    [
        Sampling::All { temperature },
        Sampling::TopK { k: 2, temperature },
        Sampling::TopP {
            p: 0.9,
            temperature,
        },
        Sampling::TopKThenTopP {
            k: 2,
            p: 0.9,
            temperature,
        },
        Sampling::GumbelSoftmax { temperature },
    ]
}

#[test]
fn sample_with_zero_temperature_from_sampling() -> Result<()> {
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let argmax = logits.argmax(0)?.to_scalar::<u32>()?;
    assert_eq!(argmax, 1);
    for temperature in [0.0, -0.0] {
        for sampling in samplings(temperature) {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
            let token = logits_process.sample(&logits)?;
            assert_eq!(token, argmax);
        }
    }
    Ok(())
}

#[test]
fn sample_with_negative_temperature() -> Result<()> {
    // Dividing by a negative temperature would mostly pick token 0.
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    for temperature in [-1.0, f64::NEG_INFINITY] {
        for sampling in samplings(temperature) {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
            for _ in 0..10 {
                let token = logits_process.sample(&logits)?;
                assert_eq!(token, 1);
            }
        }
    }
    Ok(())
}

#[test]
fn sample_with_tiny_temperature() -> Result<()> {
    // 4.0 / 1e-38 overflows f32, so does 1.0 / f64::MIN_POSITIVE.
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    for temperature in [1e-8, 1e-38, f64::MIN_POSITIVE] {
        for sampling in samplings(temperature) {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
            let token = logits_process.sample(&logits)?;
            assert_eq!(token, 1);
        }
    }
    Ok(())
}

#[test]
fn sample_with_nan_temperature() -> Result<()> {
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    for sampling in samplings(f64::NAN) {
        let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
        let err = logits_process.sample(&logits).unwrap_err();
        assert!(err.to_string().contains("temperature"), "{err}");
    }
    Ok(())
}

#[test]
fn new_and_from_sampling_agree() -> Result<()> {
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    for temperature in [0.0, 1e-8, 0.5, 1.0] {
        let mut from_new = LogitsProcessor::new(42, Some(temperature), None);
        let mut from_sampling = LogitsProcessor::from_sampling(42, Sampling::All { temperature });
        for _ in 0..10 {
            assert_eq!(from_new.sample(&logits)?, from_sampling.sample(&logits)?);
        }
    }
    Ok(())
}

fn sample_error(sampling: Sampling, logits: &Tensor) -> String {
    let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
    logits_process.sample(logits).unwrap_err().to_string()
}

#[test]
fn sample_with_bad_temperature_or_top_p() -> Result<()> {
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    for sampling in samplings(f64::NAN) {
        let err = sample_error(sampling, &logits);
        assert!(
            err.starts_with("temperature must be a number, got NaN"),
            "{err}"
        );
    }
    for sampling in samplings(f64::INFINITY) {
        let err = sample_error(sampling, &logits);
        assert!(
            err.starts_with("temperature must be at most f32::MAX, got inf"),
            "{err}"
        );
    }
    let sampling = Sampling::TopP {
        p: f64::NAN,
        temperature: 1.0,
    };
    let err = sample_error(sampling, &logits);
    assert!(err.starts_with("top-p must be a number, got NaN"), "{err}");
    // A p that rounds to zero in f32 disables top-p rather than clamping every token.
    let sampling = Sampling::TopP {
        p: 1e-50,
        temperature: 1.0,
    };
    let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
    let mut same_process = LogitsProcessor::from_sampling(42, Sampling::All { temperature: 1.0 });
    assert_eq!(
        logits_process.sample(&logits)?,
        same_process.sample(&logits)?
    );
    Ok(())
}

#[test]
fn sample_with_top_k_zero() -> Result<()> {
    // k = 0 disables top-k: the same tokens as sampling from every token.
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let pairs = [
        (
            Sampling::TopK {
                k: 0,
                temperature: 2.0,
            },
            Sampling::All { temperature: 2.0 },
        ),
        (
            Sampling::TopKThenTopP {
                k: 0,
                p: 0.9,
                temperature: 2.0,
            },
            Sampling::TopP {
                p: 0.9,
                temperature: 2.0,
            },
        ),
        (
            Sampling::TopKThenTopP {
                k: 0,
                p: 0.0,
                temperature: 2.0,
            },
            Sampling::All { temperature: 2.0 },
        ),
    ];
    for (sampling, same) in pairs {
        let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
        let mut same_process = LogitsProcessor::from_sampling(42, same);
        for _ in 0..20 {
            assert_eq!(
                logits_process.sample(&logits)?,
                same_process.sample(&logits)?
            );
        }
    }
    Ok(())
}

#[test]
fn sample_with_nan_or_inf_logits() -> Result<()> {
    // A NaN first is what argmax picks: token 0.
    let logits = Tensor::new(&[f32::NAN, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let mut all = samplings(1.0).to_vec();
    all.push(Sampling::ArgMax);
    for sampling in all {
        let err = sample_error(sampling, &logits);
        assert!(
            err.starts_with("logits contain 1 NaN and 0 +inf values out of 4"),
            "{err}"
        );
    }
    // +inf is the largest logit for ArgMax, but no probability for sampling.
    let logits = Tensor::new(&[1.0, f32::INFINITY, 2.0, 3.0], &Device::Cpu)?;
    let mut logits_process = LogitsProcessor::from_sampling(42, Sampling::ArgMax);
    assert_eq!(logits_process.sample(&logits)?, 1);
    for sampling in [
        Sampling::All { temperature: 1.0 },
        Sampling::GumbelSoftmax { temperature: 1.0 },
    ] {
        let err = sample_error(sampling, &logits);
        assert!(
            err.starts_with("logits contain 0 NaN and 1 +inf values out of 4"),
            "{err}"
        );
    }
    let logits = logits.to_dtype(candle::DType::F16)?;
    let err = sample_error(Sampling::All { temperature: 1.0 }, &logits);
    assert!(err.contains("(f16 overflows above 65504)"), "{err}");
    // Finite, but not once divided by the temperature.
    let logits = Tensor::new(&[1.0, 4e32, 2.0, 3.0], &Device::Cpu)?;
    let err = sample_error(Sampling::All { temperature: 1e-6 }, &logits);
    assert!(
        err.starts_with("logits / temperature overflow f32 at temperature 0.000001"),
        "{err}"
    );
    Ok(())
}

#[test]
fn sample_with_masked_logits() -> Result<()> {
    let logits = Tensor::new(&[f32::NEG_INFINITY; 4], &Device::Cpu)?;
    let mut all = samplings(1.0).to_vec();
    all.push(Sampling::ArgMax);
    for sampling in all {
        let err = sample_error(sampling, &logits);
        assert!(
            err.starts_with("all 4 logits are -inf: every token is masked"),
            "{err}"
        );
    }
    let logits = Tensor::new(
        &[f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY, 1.0],
        &Device::Cpu,
    )?;
    for sampling in samplings(1.0) {
        let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
        for _ in 0..20 {
            let token = logits_process.sample(&logits)?;
            assert!(token == 1 || token == 3);
        }
    }
    Ok(())
}

#[test]
fn sample_with_bad_logits_shape() -> Result<()> {
    let empty = Tensor::new(&[0f32; 0], &Device::Cpu)?;
    let scalar = Tensor::new(1f32, &Device::Cpu)?;
    let batch = Tensor::new(&[[1f32, 4.0, 2.0, 3.0]], &Device::Cpu)?;
    let mut all = samplings(1.0).to_vec();
    all.push(Sampling::ArgMax);
    for sampling in all {
        let err = sample_error(sampling.clone(), &empty);
        assert!(err.starts_with("logits are empty"), "{err}");
        let err = sample_error(sampling.clone(), &scalar);
        assert!(
            err.starts_with("logits must be one value per token (1-D), got shape []"),
            "{err}"
        );
        let err = sample_error(sampling, &batch);
        assert!(
            err.starts_with("logits must be one value per token (1-D), got shape [1, 4]"),
            "{err}"
        );
    }
    Ok(())
}
