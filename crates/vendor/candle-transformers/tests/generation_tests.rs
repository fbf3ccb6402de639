use candle::{Device, Result, Tensor};
use candle_transformers::generation::LogitsProcessor;

#[test]
fn sample_with_zero_temperature() -> Result<()> {
    let mut logits_process = LogitsProcessor::new(1337, None, None);
    let logits = Tensor::new(&[0.1, 0.2, 0.3, 0.4], &Device::Cpu)?;
    let token = logits_process.sample(&logits)?;
    assert_eq!(token, 3);
    Ok(())
}

#[test]
fn sample_with_zero_temperature_from_sampling() -> Result<()> {
    use candle_transformers::generation::Sampling;
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    // 4.0 / 1e-38 overflows f32, and dividing by -1.0 would favour the least likely token.
    for temperature in [0.0, -1.0, 1e-8, 1e-38] {
        for sampling in [
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
        ] {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
            assert_eq!(logits_process.sample(&logits)?, 1);
        }
    }
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
fn sample_with_no_token_to_sample() -> Result<()> {
    let mut logits_process = LogitsProcessor::new(42, Some(0.9), None);
    let logits = Tensor::new(&[0.1, f32::NAN, 0.3], &Device::Cpu)?;
    let err = logits_process.sample(&logits).unwrap_err().to_string();
    assert!(
        err.starts_with("logits contain 1 NaN and 0 +inf values out of 3"),
        "{err}"
    );
    Ok(())
}

#[test]
fn sample_with_logits_of_another_shape() -> Result<()> {
    let mut logits_process = LogitsProcessor::new(42, Some(0.9), None);
    let empty = Tensor::new(&[0f32; 0], &Device::Cpu)?;
    let scalar = Tensor::new(0.1f32, &Device::Cpu)?;
    let batch = Tensor::new(&[[0.1f32, 0.2]], &Device::Cpu)?;
    for (logits, shape) in [(empty, "[0]"), (scalar, "[]"), (batch, "[1, 2]")] {
        let err = logits_process.sample(&logits).unwrap_err().to_string();
        let message = format!("logits must be one value per token, got shape {shape}");
        assert!(err.starts_with(&message), "{err}");
    }
    Ok(())
}

/// The variants that sample from probabilities, and how many of the 4 tokens below each one
/// hands to `WeightedIndex`.
fn sampled(temperature: f64) -> [(candle_transformers::generation::Sampling, usize); 4] {
    use candle_transformers::generation::Sampling;
    [
        (Sampling::All { temperature }, 4),
        (Sampling::TopK { k: 2, temperature }, 2),
        (
            Sampling::TopP {
                p: 0.9,
                temperature,
            },
            4,
        ),
        (
            Sampling::TopKThenTopP {
                k: 2,
                p: 0.9,
                temperature,
            },
            2,
        ),
    ]
}

#[test]
fn sample_with_nan_inf_or_masked_logits() -> Result<()> {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let cases = [
        (
            [nan, 4.0, 2.0, 3.0],
            "logits contain 1 NaN and 0 +inf values out of 4",
        ),
        (
            [1.0, inf, 2.0, inf],
            "logits contain 0 NaN and 2 +inf values out of 4",
        ),
        ([-inf; 4], "all 4 logits are -inf: every token is masked"),
    ];
    for (values, message) in cases {
        let logits = Tensor::new(&values, &Device::Cpu)?;
        for (sampling, _) in sampled(1.0) {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling.clone());
            let err = logits_process.sample(&logits).unwrap_err().to_string();
            assert!(err.starts_with(message), "{sampling:?}: {err}");
        }
    }
    // 4e32 / 1e-6 overflows f32; 1 / 1e46 is 0 in f32, and -inf * 0 is NaN; -4e32 / 1e-6 is -inf.
    let cases = [
        (
            [1.0, 4e32, 2.0, 3.0],
            1e-6,
            "logits divided by the temperature 1e-6 hold 1 NaN or +inf values out of 4",
        ),
        (
            [1.0, -inf, -inf, 3.0],
            1e46,
            "logits divided by the temperature 1e46 hold 2 NaN or +inf values out of 4",
        ),
        (
            [-4e32; 4],
            1e-6,
            "all 4 logits are -inf once divided by the temperature 1e-6",
        ),
    ];
    for (values, temperature, message) in cases {
        let logits = Tensor::new(&values, &Device::Cpu)?;
        for (sampling, _) in sampled(temperature) {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling.clone());
            let err = logits_process.sample(&logits).unwrap_err().to_string();
            assert!(err.starts_with(message), "{sampling:?}: {err}");
        }
    }
    Ok(())
}

#[test]
fn sample_f_with_probabilities_that_cannot_be_sampled() -> Result<()> {
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    type Edit = fn(&mut [f32]);
    // What each edit leaves in the `n` probabilities handed to rand (top-p hands it all of them,
    // the clamped ones as zeros).
    type Held = fn(usize) -> String;
    let edits: [(Edit, Held); 4] = [
        (
            |prs| prs[1] = f32::INFINITY,
            |_| "0 NaN and 0 negative values and sum to inf".to_string(),
        ),
        (
            |prs| prs.fill(f32::NAN),
            |n| format!("{n} NaN and 0 negative values and sum to NaN"),
        ),
        (
            |prs| prs.fill(-1.0),
            |n| format!("0 NaN and {n} negative values and sum to -{n}"),
        ),
        (
            |prs| prs.fill(0.0),
            |_| "0 NaN and 0 negative values and sum to 0".to_string(),
        ),
    ];
    for (sampling, n) in sampled(1.0) {
        for (edit, held) in edits {
            let mut logits_process = LogitsProcessor::from_sampling(42, sampling.clone());
            let err = logits_process
                .sample_f(&logits, edit)
                .unwrap_err()
                .to_string();
            let expected = "cannot sample from the ";
            assert!(err.starts_with(expected), "{sampling:?}: {err}");
            assert!(
                err.contains(" weights that `sample_f` hands to rand: they hold "),
                "{err}"
            );
            assert!(err.contains(&held(n)), "{sampling:?}: {err}");
        }
    }
    Ok(())
}

#[test]
fn sample_f_with_values_that_are_not_sampled_from() -> Result<()> {
    use candle_transformers::generation::Sampling;
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let top_k = Sampling::TopK {
        k: 2,
        temperature: 1.0,
    };
    let top_p = Sampling::TopP {
        p: 0.5,
        temperature: 1.0,
    };
    // Token 0 is the least likely: top-k with k = 2 and top-p with p = 0.5 leave it out, whatever
    // it holds, and sample as without the closure.
    for sampling in [top_k, top_p.clone()] {
        let mut edited = LogitsProcessor::from_sampling(42, sampling.clone());
        let mut unedited = LogitsProcessor::from_sampling(42, sampling.clone());
        for _ in 0..10 {
            let token = edited.sample_f(&logits, |prs| prs[0] = -1.0)?;
            assert_eq!(token, unedited.sample(&logits)?, "{sampling:?}");
        }
    }
    // Top-p keeps the first of two tokens that reach p on their own, and clamps the second to 0.
    let mut edited = LogitsProcessor::from_sampling(42, top_p);
    for _ in 0..10 {
        assert_eq!(edited.sample_f(&logits, |prs| prs[..2].fill(f32::MAX))?, 0);
    }
    Ok(())
}

/// Every variant that has a temperature, at `temperature`.
fn samplings(temperature: f64) -> [candle_transformers::generation::Sampling; 5] {
    use candle_transformers::generation::Sampling;
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
fn sample_with_nan_temperature_or_top_p() -> Result<()> {
    use candle_transformers::generation::Sampling;
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let mut processors: Vec<LogitsProcessor> = samplings(f64::NAN)
        .into_iter()
        .map(|sampling| LogitsProcessor::from_sampling(42, sampling))
        .collect();
    // `new` keeps a NaN temperature rather than decoding greedily.
    processors.push(LogitsProcessor::new(42, Some(f64::NAN), None));
    for mut logits_process in processors {
        let err = logits_process.sample(&logits).unwrap_err().to_string();
        assert!(
            err.starts_with("temperature must be a number, got NaN"),
            "{err}"
        );
    }
    for sampling in [
        Sampling::TopP {
            p: f64::NAN,
            temperature: 1.0,
        },
        Sampling::TopKThenTopP {
            k: 2,
            p: f64::NAN,
            temperature: 1.0,
        },
    ] {
        let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
        let err = logits_process.sample(&logits).unwrap_err().to_string();
        assert!(err.starts_with("top-p must be a number, got NaN"), "{err}");
    }
    Ok(())
}

#[test]
fn sample_argmax_with_nan_or_masked_logits() -> Result<()> {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let cases = [
        (
            [nan, 4.0, 2.0, 3.0],
            "logit 0 is NaN: greedy decoding has no token to pick",
        ),
        (
            [nan; 4],
            "logit 0 is NaN: greedy decoding has no token to pick",
        ),
        (
            [-inf; 4],
            "all 4 logits are -inf or NaN: every token is masked",
        ),
    ];
    for (values, message) in cases {
        let logits = Tensor::new(&values, &Device::Cpu)?;
        let mut logits_process = LogitsProcessor::new(42, None, None);
        let err = logits_process.sample(&logits).unwrap_err().to_string();
        assert!(err.starts_with(message), "{err}");
    }
    // Token 0 wins on its own merits, and a NaN elsewhere is not the winner's business.
    let mut logits_process = LogitsProcessor::new(42, None, None);
    let logits = Tensor::new(&[4.0, nan, 2.0, -inf], &Device::Cpu)?;
    assert_eq!(logits_process.sample(&logits)?, 0);
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

/// `TopKThenTopP` with `top_p` in (0, 1), as a full sort samples it: the k largest, then top-p over
/// them by a full sort unless they hold less than `top_p` together.
fn top_k_top_p_by_sorting(prs: &[f32], k: usize, top_p: f32, rng: &mut rand::rngs::StdRng) -> u32 {
    use rand::distr::{weighted::WeightedIndex, Distribution};
    if k >= prs.len() {
        return top_p_by_sorting(prs, top_p, rng);
    }
    let mut order: Vec<usize> = (0..prs.len()).collect();
    let (order, _, _) = order.select_nth_unstable_by(k, |&i, &j| prs[j].total_cmp(&prs[i]));
    let top: Vec<f32> = order.iter().map(|&i| prs[i]).collect();
    let index = if top_p >= top.iter().sum::<f32>() {
        WeightedIndex::new(&top).unwrap().sample(rng) as u32
    } else {
        top_p_by_sorting(&top, top_p, rng)
    };
    order[index as usize] as u32
}

#[test]
fn sample_with_top_p_as_a_full_sort() -> Result<()> {
    use candle_transformers::generation::Sampling;
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    for case in 0..60u64 {
        let len = rng.random_range(1..3000);
        // Logits on a coarse grid, so that many probabilities tie; every fifth case is flat, every
        // fifth has one dominant token.
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
        // `TopKThenTopP` applies top-p to its top k, which sum to at most 1.
        let k = rng.random_range(1..=len);
        let sampling = Sampling::TopKThenTopP {
            k,
            p: top_p,
            temperature: 1.0,
        };
        let mut logits_process = LogitsProcessor::from_sampling(case, sampling);
        let mut reference = rand::rngs::StdRng::seed_from_u64(case);
        for _ in 0..20 {
            let expected = top_k_top_p_by_sorting(&prs, k, top_p as f32, &mut reference);
            assert_eq!(
                logits_process.sample(&logits)?,
                expected,
                "case {case}, k {k}"
            );
        }
    }
    Ok(())
}

#[test]
fn sample_with_top_k_zero() -> Result<()> {
    use candle_transformers::generation::Sampling::{All, TopK, TopKThenTopP, TopP};
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let (temperature, p) = (1.0, 0.9);
    // k = 0 keeps every token: the same draws as without top-k, for the same seed.
    let pairs = [
        (TopK { k: 0, temperature }, All { temperature }),
        (
            TopKThenTopP {
                k: 0,
                p,
                temperature,
            },
            TopP { p, temperature },
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
fn sample_with_top_k_or_top_p_off() -> Result<()> {
    use candle_transformers::generation::Sampling::{All, TopK, TopKThenTopP, TopP};
    let logits = Tensor::new(&[1.0, 4.0, 2.0, 3.0], &Device::Cpu)?;
    let temperature = 2.0;
    let all = All { temperature };
    let top_p = TopP {
        p: 0.9,
        temperature,
    };
    // Each pair draws the same tokens from the same seed.
    let pairs = [
        (TopK { k: 0, temperature }, all.clone()),
        (
            TopKThenTopP {
                k: 0,
                p: 0.9,
                temperature,
            },
            top_p,
        ),
        (
            TopKThenTopP {
                k: 0,
                p: 0.0,
                temperature,
            },
            all.clone(),
        ),
        (
            TopKThenTopP {
                k: 4,
                p: 1.0,
                temperature,
            },
            all.clone(),
        ),
        // Below the vocabulary too, where the top k's f32 sum may round above 1 (here, doubled,
        // it is about 1.8, and 1.0 kept the top 2).
        (
            TopKThenTopP {
                k: 3,
                p: 1.0,
                temperature,
            },
            TopK { k: 3, temperature },
        ),
        // 1 - 2^-26 is 1.0 in f32, 1e-50 is 0.0.
        (
            TopP {
                p: 1.0 - 2f64.powi(-26),
                temperature,
            },
            all.clone(),
        ),
        (
            TopP {
                p: 1e-50,
                temperature,
            },
            all,
        ),
    ];
    for (sampling, same) in pairs {
        let mut logits_process = LogitsProcessor::from_sampling(42, sampling.clone());
        let mut same_process = LogitsProcessor::from_sampling(42, same);
        for _ in 0..20 {
            // Doubled probabilities sum to 2: a top-p of 1 that was still applied would cut off
            // the tokens after the f32 sum reached 1.
            let double = |prs: &mut [f32]| prs.iter_mut().for_each(|p| *p *= 2.0);
            let token = logits_process.sample_f(&logits, double)?;
            assert_eq!(
                token,
                same_process.sample_f(&logits, double)?,
                "{sampling:?}"
            );
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
    use candle_transformers::generation::Sampling;
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

#[test]
fn sample_gumbel_follows_the_softmax() -> Result<()> {
    use candle_transformers::generation::Sampling;
    // The chi-square distribution's 0.999 quantiles, for 1 to 7 degrees of freedom.
    const CRITICAL: [f64; 7] = [10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322];
    // One logit at 10 and 1000 at 0 too: the softmax gives the 1000 together
    // 1000 / (1000 + e^10) = 0.0434, and noise capped below 7 would never lift one above the 10.
    let mut tail = vec![0f32; 1001];
    tail[0] = 10.0;
    let cases = [
        (vec![-1.0, 0.0, 0.2, 1.0, 2.0, 3.0, 4.0, 8.0], 0.5),
        (vec![-1.0, 0.0, 0.2, 1.0, 2.0, 3.0, 4.0, 8.0], 1.0),
        (vec![-1.0, 0.0, 0.2, 1.0, 2.0, 3.0, 4.0, 8.0], 2.0),
        (tail, 1.0),
    ];
    for (logits, temperature) in cases {
        let tensor = Tensor::new(logits.as_slice(), &Device::Cpu)?;
        let probs = candle_nn::ops::softmax(&(&tensor / temperature)?, 0)?.to_vec1::<f32>()?;
        let probs: Vec<f64> = probs.into_iter().map(f64::from).collect();
        let sampling = Sampling::GumbelSoftmax { temperature };
        let mut logits_process = LogitsProcessor::from_sampling(42, sampling);
        let mut counts = vec![0; logits.len()];
        for _ in 0..10_000 {
            counts[logits_process.sample(&tensor)? as usize] += 1;
        }
        let (statistic, freedom) = chi_square(&counts, &probs);
        assert!(
            statistic < CRITICAL[freedom - 1],
            "temperature {temperature}: chi-square {statistic} with {freedom} degrees of freedom"
        );
    }
    Ok(())
}
