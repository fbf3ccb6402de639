use candle::{Result, Tensor};

/// The bounds of the uniform `u` behind the Gumbel noise `-ln(-ln(u))`: the open interval
/// (0, 1) at f32 resolution. No backend draws 0 or 1 (the CPU draws in `[lo, up)`, CUDA in
/// `(lo, up]`), so the noise is finite, and its tails are cut off only beyond about -4.5 and
/// 16, where they hold about 1e-7 of its mass.
const GUMBEL_UNIFORM_BOUNDS: (f64, f64) =
    (f32::MIN_POSITIVE as f64, 1.0 - f32::EPSILON as f64 / 2.0);

/// Sample according to the Gumbel-Softmax distribution: the index of the largest
/// `logits / temperature + g` along `dim`, with `g` Gumbel noise from the device's generator,
/// which is a draw from `softmax(logits / temperature)`.
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
        let (lo, up) = GUMBEL_UNIFORM_BOUNDS;
        let minus_g = logits.rand_like(lo, up)?.log()?.neg()?.log()?;
        if temperature == 1.0 {
            let sampled = (logits - minus_g)?.argmax(dim)?;
            Ok(sampled)
        } else {
            let sampled = (logits + minus_g * (-temperature))?.argmax(dim)?;
            Ok(sampled)
        }
    }
}
