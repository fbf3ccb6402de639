#[cfg(feature = "mkl")]
extern crate intel_mkl_src;

#[cfg(feature = "accelerate")]
extern crate accelerate_src;

use candle::{Device, Result, Tensor};

#[test]
fn gumbel_softmax_reaches_the_tail() -> Result<()> {
    // One logit at 10 and 1000 at 0: softmax gives the 1000 together 1000 / (1000 + e^10), 0.0434.
    // Noise below 7.2 never lifts a 0 above the 10, whose noise is at least -2.78.
    let mut logits = vec![0f32; 1001];
    logits[0] = 10.0;
    let logits = Tensor::new(logits.as_slice(), &Device::Cpu)?;
    let draws = 2000;
    let mut tail = 0;
    for _ in 0..draws {
        let token = candle_nn::sampling::gumbel_softmax(&logits, 1.0, 0)?.to_scalar::<u32>()?;
        if token != 0 {
            tail += 1;
        }
    }
    // The draws are not seeded: the bounds are the binomial mean, 86.9, plus or minus about 6
    // standard deviations (9.1 each), which a sampler of the softmax leaves once in 10^8 runs.
    assert!(
        (32..=142).contains(&tail),
        "{tail} of {draws} draws below the top logit, expected about 87"
    );
    Ok(())
}
