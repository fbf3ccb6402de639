//! Logit Processing and Sampling
//!
//! Functionality for modeling sampling strategies and logits processing in text generation
//! with support for temperature-based sampling, top-k filtering, nucleus sampling (top-p),
//! and combinations thereof.
use candle::{DType, Error, Result, Tensor};
use rand::{distr::Distribution, Rng, SeedableRng};

/// How [`LogitsProcessor`] picks the next token.
///
/// A temperature below `1e-7`, zero and negative ones included, means greedy decoding: the
/// variant then picks the same token as [`Sampling::ArgMax`]. A `NaN` temperature, or one
/// beyond `f32::MAX`, is an error. `k = 0` disables top-k; `p` outside `(0, 1)` disables
/// top-p, and sampling with a `NaN` `p` is an error.
#[derive(Clone, PartialEq, Debug)]
pub enum Sampling {
    ArgMax,
    All {
        temperature: f64,
    },
    TopK {
        k: usize,
        temperature: f64,
    },
    TopP {
        p: f64,
        temperature: f64,
    },
    TopKThenTopP {
        k: usize,
        p: f64,
        temperature: f64,
    },
    /// The largest `logits / temperature` plus Gumbel noise, a draw from their softmax. On the
    /// CPU the noise comes from the processor's seeded generator, so equal seeds give equal
    /// tokens on one platform (the noise goes through the C library's `logf`). On other devices
    /// it stays on the device: the processor seeds the device's generator with its own seed at
    /// its first draw there, which makes a run reproducible as long as nothing else draws from
    /// that generator in between.
    GumbelSoftmax {
        temperature: f64,
    },
}

/// The lowest temperature that is sampled from, in every constructor. Dividing the logits by
/// zero, by a negative or by a value whose inverse overflows `f32` would give infinite or NaN
/// probabilities.
const MIN_SAMPLING_TEMPERATURE: f64 = 1e-7;

/// Whether `temperature` means greedy decoding. `NaN` does not.
fn is_greedy(temperature: f64) -> bool {
    temperature < MIN_SAMPLING_TEMPERATURE
}

/// The temperature to divide the logits by: `from_sampling` maps greedy ones to `ArgMax`, and
/// this keeps any other path from dividing by them.
fn sampling_temperature(temperature: f64) -> Result<f64> {
    if temperature.is_nan() {
        candle::bail!("temperature must be a number, got {temperature}")
    }
    // Beyond f32's range, `1 / temperature` rounds to zero in f32 and `-inf` logits become NaN.
    if temperature > f64::from(f32::MAX) {
        candle::bail!("temperature must be at most f32::MAX, got {temperature:e}")
    }
    if is_greedy(temperature) {
        candle::bail!(
            "temperature must be at least {MIN_SAMPLING_TEMPERATURE:e} to sample, got {temperature}"
        )
    }
    Ok(temperature)
}

fn check_top_p(p: f64) -> Result<f32> {
    if p.is_nan() {
        candle::bail!("top-p must be a number, got {p}")
    }
    Ok(p as f32)
}

/// Why no token can be taken from `logits` when they hold `NaN`, `+inf` or nothing but `-inf`,
/// or overflow `f32` once divided by `temperature`. Only read once sampling has failed, so that
/// logits that sample fine are not read twice.
fn logits_problem(
    logits: &Tensor,
    dtype: DType,
    temperature: Option<f64>,
) -> Result<Option<String>> {
    let values = logits.to_vec1::<f32>()?;
    let nan = values.iter().filter(|v| v.is_nan()).count();
    let inf = values.iter().filter(|v| **v == f32::INFINITY).count();
    let problem = if nan > 0 || inf > 0 {
        let hint = match dtype {
            DType::F16 => " (f16 overflows above 65504)",
            _ => "",
        };
        format!(
            "logits contain {nan} NaN and {inf} +inf values out of {}{hint}",
            values.len()
        )
    } else if values.iter().all(|v| *v == f32::NEG_INFINITY) {
        format!(
            "all {} logits are -inf: every token is masked",
            values.len()
        )
    } else if let Some(temperature) = temperature.filter(|t| {
        let largest = values
            .iter()
            .filter(|v| v.is_finite())
            .fold(0f32, |m, v| m.max(v.abs()));
        f64::from(largest) / t > f64::from(f32::MAX)
    }) {
        format!("logits / temperature overflow f32 at temperature {temperature}")
    } else {
        return Ok(None);
    };
    Ok(Some(problem))
}

/// The token held by the 0-D `u32` tensor `token` and its logit, read back together: on a GPU
/// that is one transfer, as when only the token is read. Token ids below 2^24 are exact in f32.
fn token_and_logit(logits: &Tensor, token: &Tensor) -> Result<(u32, f32)> {
    let token = token.unsqueeze(0)?;
    let logit = logits.gather(&token, 0)?;
    let both = Tensor::cat(&[&token.to_dtype(DType::F32)?, &logit], 0)?.to_vec1::<f32>()?;
    Ok((both[0] as u32, both[1]))
}

/// An error unless a greedy pick's logit is a number above `-inf`: argmax answers with a `NaN`
/// (on the CPU, token 0 when the `NaN` comes first) or a `-inf` (every logit masked). `+inf`
/// counts as the largest logit.
fn check_greedy(token: u32, logit: f32) -> Result<u32> {
    if logit.is_nan() || logit == f32::NEG_INFINITY {
        candle::bail!("picked token {token} has logit {logit}")
    }
    Ok(token)
}

/// `softmax_last_dim(logits / temperature)` for logits on the CPU, computed in place on their
/// one copy to the host. The arithmetic is that of candle's CPU kernels (`affine`, then the max,
/// `exp`, the sum and the division of `softmax_last_dim`), with the same reductions, so the
/// probabilities are the same f32 values without two intermediate tensors and a second copy.
fn host_softmax(mut prs: Vec<f32>, temperature: f64) -> Vec<f32> {
    use candle::cpu::kernels::VecOps;
    if prs.is_empty() {
        return prs;
    }
    // `Tensor / f64` is `affine(1 / temperature, 0)`.
    let (mul, add) = ((1. / temperature) as f32, 0f32);
    prs.iter_mut().for_each(|v| *v = *v * mul + add);
    let mut max = f32::NEG_INFINITY;
    // SAFETY: both pointers are valid for `prs.len()` values, and `prs` is not empty.
    unsafe { f32::vec_reduce_max(prs.as_ptr(), &mut max, prs.len()) };
    prs.iter_mut().for_each(|v| *v = (*v - max).exp());
    let mut sum = 0f32;
    // SAFETY: as above.
    unsafe { f32::vec_reduce_sum(prs.as_ptr(), &mut sum, prs.len()) };
    prs.iter_mut().for_each(|v| *v /= sum);
    prs
}

/// The tokens that top-p sampling keeps, in index order, found without sorting the whole
/// vocabulary. The sort by descending probability (ties in index order) puts every token of
/// probability at least `(1 - top_p) / (2 * len)` before all others, and the others hold less
/// than `(1 - top_p) / 2` together, so the cumulative sum normally reaches `top_p` among the
/// former. Only those are sorted, and their f32 sum is taken in the order of the full sort.
/// `None` when the sum falls short of `top_p` there, or when a probability is not a number in
/// `[0, 1]`: the full sort decides then.
fn nucleus(prs: &[f32], top_p: f32) -> Option<Vec<usize>> {
    let floor = (1.0 - top_p) / (2 * prs.len()) as f32;
    // The bits of floats in [0, 1] are in the floats' order; `-0.0`, NaN and anything above 1
    // have larger bits than 1.0.
    let one = 1f32.to_bits();
    let mut candidates = Vec::new();
    for (index, p) in prs.iter().enumerate() {
        let bits = p.to_bits();
        if bits > one {
            return None;
        }
        if *p >= floor {
            // Ascending keys: descending probability, then ascending index.
            candidates.push((u64::from(one - bits) << 32) | index as u64);
        }
    }
    candidates.sort_unstable();
    let index = |key: &u64| *key as u32 as usize;
    let mut cumsum = 0f32;
    for (count, key) in candidates.iter().enumerate() {
        cumsum += prs[index(key)];
        if cumsum >= top_p {
            let mut kept: Vec<usize> = candidates[..=count].iter().map(index).collect();
            kept.sort_unstable();
            return Some(kept);
        }
    }
    None
}

impl Sampling {
    fn temperature(&self) -> Option<f64> {
        match self {
            Self::ArgMax => None,
            Self::All { temperature }
            | Self::TopK { temperature, .. }
            | Self::TopP { temperature, .. }
            | Self::TopKThenTopP { temperature, .. }
            | Self::GumbelSoftmax { temperature } => Some(*temperature),
        }
    }

    /// `ArgMax` when the temperature means greedy decoding, `self` otherwise.
    fn or_argmax(self) -> Self {
        match self {
            Self::All { temperature }
            | Self::TopK { temperature, .. }
            | Self::TopP { temperature, .. }
            | Self::TopKThenTopP { temperature, .. }
            | Self::GumbelSoftmax { temperature }
                if is_greedy(temperature) =>
            {
                Self::ArgMax
            }
            sampling => sampling,
        }
    }
}

pub struct LogitsProcessor {
    rng: rand::rngs::StdRng,
    sampling: Sampling,
    seed: u64,
    /// Whether the processor has seeded a device's generator (Gumbel noise off the CPU).
    seeded_device: bool,
}

impl LogitsProcessor {
    /// A processor that samples with `sampling`, seeded with `seed`. A temperature below `1e-7`
    /// makes it greedy, as with [`LogitsProcessor::new`].
    pub fn from_sampling(seed: u64, sampling: Sampling) -> Self {
        let rng = rand::rngs::StdRng::seed_from_u64(seed);
        let sampling = sampling.or_argmax();
        Self {
            rng,
            sampling,
            seed,
            seeded_device: false,
        }
    }

    pub fn new(seed: u64, temperature: Option<f64>, top_p: Option<f64>) -> Self {
        // `manual_filter` suggests `.filter(|&v| v >= 1e-7)`, but `f64` is only `PartialOrd`:
        // that drops `NaN` where the comparison below keeps it. Left as-is on purpose.
        #[allow(clippy::manual_filter)]
        let temperature = temperature.and_then(|v| if is_greedy(v) { None } else { Some(v) });
        let sampling = match temperature {
            None => Sampling::ArgMax,
            Some(temperature) => match top_p {
                None => Sampling::All { temperature },
                Some(p) => Sampling::TopP { p, temperature },
            },
        };
        Self::from_sampling(seed, sampling)
    }

    fn sample_argmax(&mut self, logits: &Tensor) -> Result<u32> {
        let token = logits.argmax(candle::D::Minus1)?;
        if !logits.device().is_cpu() {
            let (token, logit) = token_and_logit(logits, &token)?;
            return check_greedy(token, logit);
        }
        // On the CPU, argmax skips a `NaN` after the first value and picks token 0 for a `NaN`
        // first or for all `-inf`: the logit is read only then, so that other tokens cost
        // nothing more.
        let token = token.to_scalar::<u32>()?;
        match token {
            0 => check_greedy(0, logits.get(0)?.to_scalar::<f32>()?),
            token => Ok(token),
        }
    }

    fn sample_gumbel_softmax(&mut self, logits: &Tensor, temperature: f64) -> Result<u32> {
        if !logits.device().is_cpu() {
            return self.sample_gumbel_softmax_on_device(logits, temperature);
        }
        // The largest `logit / temperature - ln(-ln(u))`, `u` uniform in (0, 1): one `u` per
        // logit from the processor's generator, and the logarithms only for logits that can
        // still win. `-ln(-ln(u))` is below 16.7 for every `u` that `Open01` draws in f32.
        const MAX_NOISE: f32 = 17.0;
        let logits = logits.to_vec1::<f32>()?;
        let mut picked = None;
        let mut best = f32::NEG_INFINITY;
        for (token, &logit) in logits.iter().enumerate() {
            let u: f32 = self.rng.sample(rand::distr::Open01);
            // In f64, so that `logit / temperature` overflows f32 exactly when it is too large.
            let scaled = (f64::from(logit) / temperature) as f32;
            if scaled + MAX_NOISE <= best {
                continue;
            }
            let key = scaled - (-u.ln()).ln();
            if key.is_nan() {
                candle::bail!("token {token} has logit {logit}")
            }
            if key > best {
                best = key;
                picked = Some(token);
            }
        }
        // As for the other sampling variants, a `+inf` logit is an error, and so are logits
        // that are all `-inf`.
        match picked {
            Some(token) if best.is_finite() => Ok(token as u32),
            Some(token) => candle::bail!("picked token {token} has logit {}", logits[token]),
            None => candle::bail!("no logit is above -inf"),
        }
    }

    fn sample_gumbel_softmax_on_device(
        &mut self,
        logits: &Tensor,
        temperature: f64,
    ) -> Result<u32> {
        if !self.seeded_device {
            logits.device().set_seed(self.seed)?;
            self.seeded_device = true;
        }
        let sampled = candle_nn::sampling::gumbel_softmax(logits, temperature, candle::D::Minus1)?;
        // As on the CPU, a `+inf` logit is an error, and so is a `NaN` or `-inf` one.
        let (token, logit) = token_and_logit(logits, &sampled)?;
        if !logit.is_finite() {
            candle::bail!("picked token {token} has logit {logit}")
        }
        Ok(token)
    }

    fn sample_multinomial(&mut self, prs: &Vec<f32>) -> Result<u32> {
        // `WeightedIndex`'s draw without its vector of prefix sums: the same total, summed in
        // index order; the same `Uniform(0, total)` number; and the first token whose prefix
        // sum is above it, summed again up to there. Weights it would refuse go to it, for its
        // error.
        let total = prs
            .iter()
            .try_fold(0f32, |total, &p| (p >= 0.0).then_some(total + p));
        if let Some(total) = total.filter(|t| t.is_finite() && *t > 0.0) {
            let chosen = rand::distr::Uniform::new(0.0, total)
                .map_err(|err| Error::Msg(format!("cannot sample: {err}")).bt())?
                .sample(&mut self.rng);
            let mut prefix = 0f32;
            for (token, &p) in prs[..prs.len() - 1].iter().enumerate() {
                prefix += p;
                if prefix > chosen {
                    return Ok(token as u32);
                }
            }
            return Ok(prs.len() as u32 - 1);
        }
        let distr = rand::distr::weighted::WeightedIndex::new(prs).map_err(|err| {
            Error::Msg(format!("cannot sample from the probabilities: {err}")).bt()
        })?;
        let next_token = distr.sample(&mut self.rng) as u32;
        Ok(next_token)
    }

    /// top-p sampling (or "nucleus sampling") samples from the smallest set of tokens that exceed
    /// probability top_p. This way we never sample tokens that have very low probabilities and are
    /// less likely to go "off the rails".
    fn sample_topp(&mut self, prs: &mut Vec<f32>, top_p: f32) -> Result<u32> {
        if prs.len() <= u32::MAX as usize {
            if let Some(kept) = nucleus(prs, top_p) {
                // In index order, the kept probabilities have the prefix sums and the total of
                // the clamped vector below, since adding zero changes no sum: the same draw.
                let kept_prs = kept.iter().map(|&i| prs[i]).collect::<Vec<_>>();
                let index = self.sample_multinomial(&kept_prs)?;
                return Ok(kept[index as usize] as u32);
            }
        }
        let mut argsort_indices = (0..prs.len()).collect::<Vec<_>>();

        // Sort by descending probability.
        argsort_indices.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));

        // Clamp smaller probabilities to zero.
        let mut cumsum = 0.;
        for index in &argsort_indices {
            if cumsum >= top_p {
                prs[*index] = 0.0;
            } else {
                cumsum += prs[*index];
            }
        }
        // Sample with clamped probabilities.
        self.sample_multinomial(prs)
    }

    // top-k sampling samples from the k tokens with the largest probabilities; k = 0 disables it.
    fn sample_topk(&mut self, prs: &mut Vec<f32>, top_k: usize) -> Result<u32> {
        if top_k == 0 || top_k >= prs.len() {
            self.sample_multinomial(prs)
        } else {
            let mut argsort_indices = (0..prs.len()).collect::<Vec<_>>();
            let (indices, _, _) =
                argsort_indices.select_nth_unstable_by(top_k, |&i, &j| prs[j].total_cmp(&prs[i]));
            let prs = indices.iter().map(|&i| prs[i]).collect::<Vec<_>>();
            let index = self.sample_multinomial(&prs)?;
            Ok(indices[index as usize] as u32)
        }
    }

    // top-k sampling samples from the k tokens with the largest probabilities.
    // then top-p sampling.
    fn sample_topk_topp(&mut self, prs: &mut Vec<f32>, top_k: usize, top_p: f32) -> Result<u32> {
        if top_k == 0 || top_k >= prs.len() {
            if top_p <= 0.0 {
                // `sample_topp` would clamp every token: top-p is disabled, as for `TopP`.
                self.sample_multinomial(prs)
            } else {
                self.sample_topp(prs, top_p)
            }
        } else {
            let mut argsort_indices = (0..prs.len()).collect::<Vec<_>>();
            let (indices, _, _) =
                argsort_indices.select_nth_unstable_by(top_k, |&i, &j| prs[j].total_cmp(&prs[i]));
            let mut prs = indices.iter().map(|&i| prs[i]).collect::<Vec<_>>();
            let sum_p = prs.iter().sum::<f32>();
            let index = if top_p <= 0.0 || top_p >= sum_p {
                self.sample_multinomial(&prs)?
            } else {
                self.sample_topp(&mut prs, top_p)?
            };
            Ok(indices[index as usize] as u32)
        }
    }

    pub fn sample(&mut self, logits: &Tensor) -> Result<u32> {
        self.sample_f(logits, |_| {})
    }

    pub fn sample_f(&mut self, logits: &Tensor, f: impl FnOnce(&mut [f32])) -> Result<u32> {
        match logits.dims() {
            [0] => candle::bail!("logits are empty: there is no token to sample"),
            [_] => {}
            dims => candle::bail!("logits must be one value per token (1-D), got shape {dims:?}"),
        }
        let dtype = logits.dtype();
        let logits = logits.to_dtype(DType::F32)?;
        self.sample_f32(&logits, f).map_err(|err| {
            match logits_problem(&logits, dtype, self.sampling.temperature()) {
                Ok(Some(problem)) => Error::Msg(problem).bt(),
                _ => err,
            }
        })
    }

    fn sample_f32(&mut self, logits: &Tensor, f: impl FnOnce(&mut [f32])) -> Result<u32> {
        let prs = |temperature: f64| -> Result<Vec<f32>> {
            let temperature = sampling_temperature(temperature)?;
            let mut prs = if logits.device().is_cpu() {
                host_softmax(logits.to_vec1()?, temperature)
            } else {
                let logits = (logits / temperature)?;
                candle_nn::ops::softmax_last_dim(&logits)?.to_vec1()?
            };
            f(&mut prs);
            Ok(prs)
        };

        let next_token = match &self.sampling {
            Sampling::ArgMax => self.sample_argmax(logits)?,
            Sampling::GumbelSoftmax { temperature } => {
                self.sample_gumbel_softmax(logits, sampling_temperature(*temperature)?)?
            }
            Sampling::All { temperature } => {
                let prs = prs(*temperature)?;
                self.sample_multinomial(&prs)?
            }
            Sampling::TopP { p, temperature } => {
                let top_p = check_top_p(*p)?;
                let mut prs = prs(*temperature)?;
                if top_p <= 0.0 || top_p >= 1.0 {
                    // simply sample from the predicted probability distribution
                    self.sample_multinomial(&prs)?
                } else {
                    // top-p (nucleus) sampling, clamping the least likely tokens to zero
                    self.sample_topp(&mut prs, top_p)?
                }
            }
            Sampling::TopK { k, temperature } => {
                let mut prs = prs(*temperature)?;
                self.sample_topk(&mut prs, *k)?
            }
            Sampling::TopKThenTopP { k, p, temperature } => {
                let top_p = check_top_p(*p)?;
                let mut prs = prs(*temperature)?;
                self.sample_topk_topp(&mut prs, *k, top_p)?
            }
        };
        Ok(next_token)
    }
}
