use candle::{Result, Tensor};

/// Sample according to the Gumbel-Softmax distribution. The noise is capped at 15.5 on the CPU
/// and at 6.9 on other devices.
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
        // rand's `Uniform` never samples above its bound, so on the CPU -ln(u) stays above 0. A GPU
        // uses 0.999: Metal's default fast-math `log` may round to 0 near 1; CUDA is untested.
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
