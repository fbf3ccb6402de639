#[cfg(feature = "mkl")]
extern crate intel_mkl_src;

#[cfg(feature = "accelerate")]
extern crate accelerate_src;

use candle::{test_device, Device, Result, Tensor};

fn gumbel_softmax_reaches_the_tail(device: &Device) -> Result<()> {
    // One logit at 10 and 1000 at 0: softmax gives the 1000 together 1000 / (1000 + e^10), 0.0434.
    // Noise below 7, as `u` below 0.999 gave, never lifts a 0 above the 10.
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
    // The CPU generator cannot be seeded, so no device is: the bounds are the binomial mean,
    // 86.9, plus or minus 6 standard deviations (9.1 each), which a correct sampler leaves about
    // once in 10^8 runs.
    assert!(
        (32..=142).contains(&tail),
        "{tail} of {draws} draws below the top logit, expected about 87"
    );
    Ok(())
}

test_device!(
    gumbel_softmax_reaches_the_tail,
    gumbel_softmax_reaches_the_tail_cpu,
    gumbel_softmax_reaches_the_tail_gpu,
    gumbel_softmax_reaches_the_tail_metal
);
