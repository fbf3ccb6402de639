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
