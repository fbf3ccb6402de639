#[cfg(feature = "mkl")]
extern crate intel_mkl_src;

#[cfg(feature = "accelerate")]
extern crate accelerate_src;

use candle::{test_device, Device, Result, Tensor};

fn gumbel_softmax_reaches_the_tail(device: &Device) -> Result<()> {
    // One logit at 10 and 1000 at 0: softmax gives the 1000 together 1000 / (1000 + e^10), 0.0434,
    // and the noise's cap at 13.9 leaves them 0.0425. A cap below 7.2 never lifts a 0 above the
    // 10, whose noise is at least -2.78.
    let mut logits = vec![0f32; 1001];
    logits[0] = 10.0;
    let logits = Tensor::new(logits.as_slice(), device)?;
    let draws = 2000;
    let mut tail = 0;
    for _ in 0..draws {
        let token = candle_nn::sampling::gumbel_softmax(&logits, 1.0, 0)?.to_scalar::<u32>()?;
        if token != 0 {
            tail += 1;
        }
    }
    // The draws are not seeded: the bounds are the binomial mean, 85.0, plus or minus 6 standard
    // deviations (9.0 each), which this sampler leaves about once in 70 million runs.
    assert!(
        (31..=139).contains(&tail),
        "{tail} of {draws} draws below the top logit, expected about 85"
    );
    Ok(())
}

test_device!(
    gumbel_softmax_reaches_the_tail,
    gumbel_softmax_reaches_the_tail_cpu,
    gumbel_softmax_reaches_the_tail_gpu,
    gumbel_softmax_reaches_the_tail_metal
);
