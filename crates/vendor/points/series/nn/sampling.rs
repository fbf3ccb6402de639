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
        // On the CPU `u` stays below 1, as rand's `Uniform` leaves out its upper bound, and the
        // noise -ln(-ln(u)) reaches 15.9. A GPU keeps 0.999: there `u` can reach its upper bound,
        // and Metal's fast-math `log` may round to 0 near 1.
        let up = if logits.device().is_cpu() { 1.0 } else { 0.999 };
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
