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
        // `u` between `f32::MIN_POSITIVE` and the largest f32 below 1, so that the noise
        // -ln(-ln(u)) is cut off only where its upper tail holds about 6e-8 of its mass (1.8e-7
        // on the CPU, whose `u` steps by 2^-23): the CPU draws from [lo, up), CUDA from (lo, up]
        // and Metal from [lo, up].
        let (lo, up) = (f32::MIN_POSITIVE as f64, 1.0 - f32::EPSILON as f64 / 2.0);
        let minus_ln_u = logits.rand_like(lo, up)?.log()?.neg()?;
        // Metal compiles candle's kernels with fast math, whose `log` may round to 0 near 1 and
        // make the noise infinite: -ln(u) is kept there at 2^-24 or above, about its value at
        // `up`. The CPU's `log`, and candle-kernels' CUDA `log`, compiled without fast math, are
        // below 0 for every `u` below 1.
        let minus_ln_u = if logits.device().is_metal() {
            minus_ln_u.maximum(f32::EPSILON as f64 / 2.0)?
        } else {
            minus_ln_u
        };
        let minus_g = minus_ln_u.log()?;
        if temperature == 1.0 {
            let sampled = (logits - minus_g)?.argmax(dim)?;
            Ok(sampled)
        } else {
            let sampled = (logits + minus_g * (-temperature))?.argmax(dim)?;
            Ok(sampled)
        }
    }
}
