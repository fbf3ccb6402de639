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
        // The upper bound of `u` is the largest f32 below 1, so that the noise -ln(-ln(u)) is cut
        // off only in a tail that holds about 1e-7 of its mass.
        let (lo, up) = (f32::MIN_POSITIVE as f64, 1.0 - f32::EPSILON as f64 / 2.0);
        let minus_log_u = logits.rand_like(lo, up)?.log()?.neg()?;
        // Metal's fast-math `log` may round to 0 near 1, which would make the noise infinite.
        let minus_log_u = if logits.device().is_metal() {
            minus_log_u.maximum(f32::EPSILON as f64 / 2.0)?
        } else {
            minus_log_u
        };
        let minus_g = minus_log_u.log()?;
        if temperature == 1.0 {
            let sampled = (logits - minus_g)?.argmax(dim)?;
            Ok(sampled)
        } else {
            let sampled = (logits + minus_g * (-temperature))?.argmax(dim)?;
            Ok(sampled)
        }
    }
}
