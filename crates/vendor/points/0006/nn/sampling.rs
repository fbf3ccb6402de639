use candle::{Result, Tensor};

/// Sample according to the Gumbel-Softmax distribution.
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
        // `u` from the open interval (0, 1) at f32 resolution, so that the noise -ln(-ln(u))
        // is cut off only where its upper tail holds about 6e-8 of its mass (1.8e-7 on the
        // CPU): the CPU draws from [lo, up), CUDA from (lo, up] and Metal from [lo, up]. -ln(u)
        // is kept at 2^-24 or above, about its value at `up`, so that a `log` that rounds near
        // 1 (fast math) cannot make the noise infinite or NaN.
        let (lo, up) = (f32::MIN_POSITIVE as f64, 1.0 - f32::EPSILON as f64 / 2.0);
        let minus_ln_u = logits.rand_like(lo, up)?.log()?.neg()?;
        let minus_g = minus_ln_u.maximum(f32::EPSILON as f64 / 2.0)?.log()?;
        if temperature == 1.0 {
            let sampled = (logits - minus_g)?.argmax(dim)?;
            Ok(sampled)
        } else {
            let sampled = (logits + minus_g * (-temperature))?.argmax(dim)?;
            Ok(sampled)
        }
    }
}
