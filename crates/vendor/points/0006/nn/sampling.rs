use candle::{Result, Tensor};

/// Sample according to the Gumbel-Softmax distribution. A logit is never drawn when it lies more
/// than 18.4 times `temperature` below the largest on the CPU, 9.7 times on other devices.
pub fn gumbel_softmax<D: candle::shape::Dim>(
    logits: &Tensor,
    temperature: f64,
    dim: D,
) -> Result<Tensor> {
    if temperature <= 0.0 {
        logits.argmax(dim)
    } else {
        // Cast to f32, doing the Gumbel softmax in bf16 is a bit unstable.
        let logits = logits.to_dtype(candle::DType::F32)?;
        // rand's `Uniform` keeps `u` at most the largest f32 below 1, so -ln(u) > 0 on the CPU.
        // Other devices keep 0.999: Metal's fast-math `log` may not stay below 0 just below 1.
        let up = if logits.device().is_cpu() {
            1.0 - f32::EPSILON as f64 / 2.0
        } else {
            0.999
        };
        let minus_g = logits.rand_like(1e-7, up)?.log()?.neg()?.log()?;
        if temperature == 1.0 {
            let sampled = (logits - minus_g)?.argmax(dim)?;
            Ok(sampled)
        } else {
            let sampled = (logits + minus_g * (-temperature))?.argmax(dim)?;
            Ok(sampled)
        }
    }
}
