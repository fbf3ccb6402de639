//! Logit Processing and Sampling
//!
//! Functionality for modeling sampling strategies and logits processing in text generation
//! with support for temperature-based sampling, top-k filtering, nucleus sampling (top-p),
//! and combinations thereof.
use candle::{DType, Error, Result, Tensor};
use rand::{distr::Distribution, SeedableRng};

/// How [`LogitsProcessor`] picks the next token. A `k` of 0 turns top-k off in `TopK` and
/// `TopKThenTopP`, as a `k` of at least the vocabulary size does. A `p` that is 0 or below, or 1
/// or above, once converted to `f32`, turns top-p off in `TopP` and `TopKThenTopP`.
#[derive(Clone, PartialEq, Debug)]
pub enum Sampling {
    ArgMax,
    All { temperature: f64 },
    TopK { k: usize, temperature: f64 },
    TopP { p: f64, temperature: f64 },
    TopKThenTopP { k: usize, p: f64, temperature: f64 },
    // On the CPU the Gumbel noise comes from the rng, elsewhere from the device's generator.
    GumbelSoftmax { temperature: f64 },
}

impl Sampling {
    /// The temperature of every variant that has one.
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
}

pub struct LogitsProcessor {
    rng: rand::rngs::StdRng,
    sampling: Sampling,
    /// Whether the probabilities being sampled went through the closure of `sample_f`.
    closure: bool,
}

impl LogitsProcessor {
    /// A temperature below 1e-7, zero and negative ones included, picks the most likely token,
    /// as `new` does.
    pub fn from_sampling(seed: u64, sampling: Sampling) -> Self {
        let temperature = match sampling {
            Sampling::ArgMax => None,
            Sampling::All { temperature }
            | Sampling::TopK { temperature, .. }
            | Sampling::TopP { temperature, .. }
            | Sampling::TopKThenTopP { temperature, .. }
            | Sampling::GumbelSoftmax { temperature } => Some(temperature),
        };
        let sampling = match temperature {
            Some(temperature) if temperature < 1e-7 => Sampling::ArgMax,
            _ => sampling,
        };
        let rng = rand::rngs::StdRng::seed_from_u64(seed);
        Self {
            rng,
            sampling,
            closure: false,
        }
    }

    pub fn new(seed: u64, temperature: Option<f64>, top_p: Option<f64>) -> Self {
        // `manual_filter` suggests `.filter(|&v| v >= 1e-7)`, but `f64` is only `PartialOrd`:
        // that drops `NaN` where the comparison below keeps it. Left as-is on purpose.
        #[allow(clippy::manual_filter)]
        let temperature = temperature.and_then(|v| if v < 1e-7 { None } else { Some(v) });
        let sampling = match temperature {
            None => Sampling::ArgMax,
            Some(temperature) => match top_p {
                None => Sampling::All { temperature },
                Some(p) => Sampling::TopP { p, temperature },
            },
        };
        Self::from_sampling(seed, sampling)
    }

    fn sample_argmax(&mut self, logits: Tensor) -> Result<u32> {
        let token = logits.argmax(candle::D::Minus1)?.to_scalar::<u32>()?;
        // candle's argmax keeps a NaN first logit, and token 0 when every logit is NaN or -inf:
        // only then is the winner read back, and on the CPU alone, where that costs no sync.
        if token == 0 && logits.device().is_cpu() {
            let first = logits.get(0)?.to_scalar::<f32>()?;
            if first.is_nan() {
                candle::bail!("logit 0 is NaN: greedy decoding has no token to pick")
            }
            if first == f32::NEG_INFINITY {
                candle::bail!(
                    "all {} logits are -inf or NaN: every token is masked",
                    logits.elem_count()
                )
            }
        }
        Ok(token)
    }

    fn sample_gumbel_softmax(&mut self, logits: &Tensor, temperature: f64) -> Result<u32> {
        // At a temperature of 0 or below `gumbel_softmax` takes the argmax.
        if logits.device().is_cpu() && temperature > 0.0 {
            return gumbel_argmax(&logits.to_vec1()?, temperature, &mut self.rng);
        }
        let sampled = candle_nn::sampling::gumbel_softmax(logits, temperature, candle::D::Minus1)?;
        sampled.to_scalar::<u32>()
    }

    /// Fails, saying what they hold, unless rand can draw from `weights`: NaN, negative and
    /// all-zero weights, which `WeightedIndex::new` refuses, and weights that sum to infinity, on
    /// which it panics.
    fn check_weights(weights: &[f32]) -> Result<()> {
        let sum = weights.iter().sum::<f32>();
        if sum.is_finite() && sum > 0.0 && weights.iter().all(|w| *w >= 0.0) {
            return Ok(());
        }
        let nan = weights.iter().filter(|w| w.is_nan()).count();
        let negative = weights.iter().filter(|w| **w < 0.0).count();
        candle::bail!(
            "cannot sample from the {} weights that `sample_f` hands to rand: they hold {nan} NaN \
             and {negative} negative values and sum to {sum}",
            weights.len()
        )
    }

    fn sample_multinomial(&mut self, prs: &Vec<f32>) -> Result<u32> {
        // Probabilities from softmax never sum to infinity; those left by the closure of
        // `sample_f` can, so only then are the weights handed to rand checked first.
        if self.closure {
            Self::check_weights(prs)?;
        }
        let distr = rand::distr::weighted::WeightedIndex::new(prs).map_err(|err| {
            let nan = prs.iter().filter(|p| p.is_nan()).count();
            let negative = prs.iter().filter(|p| **p < 0.0).count();
            let sum = prs.iter().sum::<f32>();
            Error::wrap(err).context(format!(
                "no token can be sampled from {} probabilities (NaN: {nan}, negative: \
                 {negative}, sum: {sum})",
                prs.len()
            ))
        })?;
        let next_token = distr.sample(&mut self.rng) as u32;
        Ok(next_token)
    }

    /// The tokens that `sample_topp` keeps, in index order, found without sorting the whole
    /// vocabulary: every token of probability at least `(1 - top_p) / (2 * len)` comes before all
    /// others in its sort, and the others hold less than `(1 - top_p) / 2` together, so the
    /// cumulative sum reaches `top_p` among the former when the probabilities sum to 1. `None`
    /// when it falls short there (from rounding, from what `sample_f`'s closure did, or because
    /// `prs` is the top k of `TopKThenTopP`, which sum to less than 1), when a probability is
    /// NaN, or when `top_p` is not in (0, 1): the full sort decides then.
    fn nucleus(prs: &[f32], top_p: f32) -> Option<Vec<usize>> {
        if !(top_p > 0.0 && top_p < 1.0) {
            return None;
        }
        let floor = (1.0 - top_p) / (2 * prs.len()) as f32;
        let mut candidates = Vec::new();
        for (index, p) in prs.iter().enumerate() {
            if p.is_nan() {
                return None;
            }
            if *p >= floor {
                candidates.push(index);
            }
        }
        // The order of the full sort: descending probability, ties in index order.
        candidates.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));
        let mut cumsum = 0f32;
        for (count, &index) in candidates.iter().enumerate() {
            cumsum += prs[index];
            if cumsum >= top_p {
                candidates.truncate(count + 1);
                candidates.sort_unstable();
                return Some(candidates);
            }
        }
        None
    }

    /// top-p sampling (or "nucleus sampling") samples from the smallest set of tokens that exceed
    /// probability top_p. This way we never sample tokens that have very low probabilities and are
    /// less likely to go "off the rails".
    fn sample_topp(&mut self, prs: &mut Vec<f32>, top_p: f32) -> Result<u32> {
        if let Some(kept) = Self::nucleus(prs, top_p) {
            // rand 0.9's `WeightedIndex` sums its weights in index order, and the zeros of the
            // clamped tokens below add nothing: the kept ones alone give the same draw.
            let kept_prs = kept.iter().map(|&i| prs[i]).collect::<Vec<_>>();
            let index = self.sample_multinomial(&kept_prs)?;
            return Ok(kept[index as usize] as u32);
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

    // top-k sampling samples from the k tokens with the largest probabilities; k = 0 keeps all.
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
    // then top-p sampling; k = 0 keeps all.
    fn sample_topk_topp(&mut self, prs: &mut Vec<f32>, top_k: usize, top_p: f32) -> Result<u32> {
        if top_k == 0 || top_k >= prs.len() {
            self.sample_topp_or_all(prs, top_p)
        } else {
            let mut argsort_indices = (0..prs.len()).collect::<Vec<_>>();
            let (indices, _, _) =
                argsort_indices.select_nth_unstable_by(top_k, |&i, &j| prs[j].total_cmp(&prs[i]));
            let mut prs = indices.iter().map(|&i| prs[i]).collect::<Vec<_>>();
            let sum_p = prs.iter().sum::<f32>();
            let index = if top_p <= 0.0 || top_p >= 1.0 || top_p >= sum_p {
                self.sample_multinomial(&prs)?
            } else {
                self.sample_topp(&mut prs, top_p)?
            };
            Ok(indices[index as usize] as u32)
        }
    }

    fn sample_topp_or_all(&mut self, prs: &mut Vec<f32>, top_p: f32) -> Result<u32> {
        if top_p <= 0.0 || top_p >= 1.0 {
            // simply sample from the predicted probability distribution
            self.sample_multinomial(prs)
        } else {
            // top-p (nucleus) sampling, clamping the least likely tokens to zero
            self.sample_topp(prs, top_p)
        }
    }

    pub fn sample(&mut self, logits: &Tensor) -> Result<u32> {
        self.sample_with(logits, false, |_| {})
    }

    pub fn sample_f(&mut self, logits: &Tensor, f: impl FnOnce(&mut [f32])) -> Result<u32> {
        self.sample_with(logits, true, f)
    }

    /// What makes `logits` impossible to sample from at `temperature`, if anything: NaN or `+inf`
    /// logits, logits that are all `-inf`, or logits that `1 / temperature` in f32 turns into
    /// NaN or `+inf`, or all into `-inf`.
    fn logits_problem(logits: &Tensor, temperature: f64) -> Result<Option<String>> {
        let logits = logits.to_dtype(DType::F32)?.to_vec1::<f32>()?;
        let len = logits.len();
        let nan = logits.iter().filter(|v| v.is_nan()).count();
        let inf = logits.iter().filter(|v| **v == f32::INFINITY).count();
        if nan > 0 || inf > 0 {
            return Ok(Some(format!(
                "logits contain {nan} NaN and {inf} +inf values out of {len}"
            )));
        }
        if logits.iter().all(|v| *v == f32::NEG_INFINITY) {
            return Ok(Some(format!(
                "all {len} logits are -inf: every token is masked"
            )));
        }
        // `logits / temperature` multiplies by `1 / temperature` in f32.
        let scale = (1.0 / temperature) as f32;
        let scaled = logits.iter().map(|v| v * scale);
        let not_finite = scaled
            .clone()
            .filter(|v| v.is_nan() || *v == f32::INFINITY)
            .count();
        if not_finite > 0 {
            return Ok(Some(format!(
                "logits divided by the temperature {temperature:e} hold {not_finite} NaN or +inf \
                 values out of {len}"
            )));
        }
        if scaled.into_iter().all(|v| v == f32::NEG_INFINITY) {
            return Ok(Some(format!(
                "all {len} logits are -inf once divided by the temperature {temperature:e}"
            )));
        }
        Ok(None)
    }

    /// The error of a sample that failed, saying what the logits hold when no token can be
    /// sampled from them at the temperature. The logits are read again only here, once sampling
    /// has failed.
    fn explain(&self, logits: &Tensor, err: Error) -> Error {
        let temperature = match self.sampling.temperature() {
            Some(temperature) if !temperature.is_nan() => temperature,
            _ => return err,
        };
        if let Sampling::GumbelSoftmax { .. } = self.sampling {
            return err;
        }
        match Self::logits_problem(logits, temperature) {
            Ok(Some(problem)) => Error::msg(problem),
            _ => err,
        }
    }

    /// `sample_f`, where `closure` says whether `f` can change the probabilities.
    fn sample_with(
        &mut self,
        logits: &Tensor,
        closure: bool,
        f: impl FnOnce(&mut [f32]),
    ) -> Result<u32> {
        if logits.rank() != 1 || logits.elem_count() == 0 {
            candle::bail!(
                "logits must be one value per token, got shape {:?}",
                logits.dims()
            )
        }
        if let Some(temperature) = self.sampling.temperature().filter(|t| t.is_nan()) {
            candle::bail!("temperature must be a number, got {temperature}")
        }
        if let Sampling::TopP { p, .. } | Sampling::TopKThenTopP { p, .. } = self.sampling {
            if p.is_nan() {
                candle::bail!("top-p must be a number, got {p}")
            }
        }
        self.closure = closure;
        self.next_token(logits, f)
            .map_err(|err| self.explain(logits, err))
    }

    fn next_token(&mut self, logits: &Tensor, f: impl FnOnce(&mut [f32])) -> Result<u32> {
        let logits = logits.to_dtype(DType::F32)?;
        let prs = |temperature: f64| -> Result<Vec<f32>> {
            let logits = (&logits / temperature)?;
            let prs = candle_nn::ops::softmax_last_dim(&logits)?;
            let mut prs = prs.to_vec1()?;
            f(&mut prs);
            Ok(prs)
        };

        let next_token = match &self.sampling {
            Sampling::ArgMax => self.sample_argmax(logits)?,
            Sampling::GumbelSoftmax { temperature } => {
                self.sample_gumbel_softmax(&logits, *temperature)?
            }
            Sampling::All { temperature } => {
                let prs = prs(*temperature)?;
                self.sample_multinomial(&prs)?
            }
            Sampling::TopP { p, temperature } => {
                let mut prs = prs(*temperature)?;
                self.sample_topp_or_all(&mut prs, *p as f32)?
            }
            Sampling::TopK { k, temperature } => {
                let mut prs = prs(*temperature)?;
                self.sample_topk(&mut prs, *k)?
            }
            Sampling::TopKThenTopP { k, p, temperature } => {
                let mut prs = prs(*temperature)?;
                self.sample_topk_topp(&mut prs, *k, *p as f32)?
            }
        };
        Ok(next_token)
    }
}

/// The token with the largest `logit / temperature - ln(-ln(u))`, with one `u` per logit drawn
/// from `rng` in (0, 1): a draw from `softmax(logits / temperature)`. The Gumbel noise
/// `-ln(-ln(u))` is below 17 for every `u` that `Open01` draws in f32, so its logarithms are only
/// computed for the logits that can still win.
fn gumbel_argmax(logits: &[f32], temperature: f64, rng: &mut rand::rngs::StdRng) -> Result<u32> {
    const MAX_NOISE: f32 = 17.0;
    let mut best: Option<(usize, f32)> = None;
    for (token, &logit) in logits.iter().enumerate() {
        let u: f32 = rand::distr::Open01.sample(rng);
        // In f64, since the temperature may be too small for f32.
        let scaled = (f64::from(logit) / temperature) as f32;
        if best.is_some_and(|(_, largest)| scaled + MAX_NOISE <= largest) {
            continue;
        }
        let key = scaled - (-u.ln()).ln();
        if key.is_nan() {
            candle::bail!("logit {token} is NaN: no token can be sampled")
        }
        if best.is_none_or(|(_, largest)| key > largest) {
            best = Some((token, key));
        }
    }
    match best {
        Some((token, key)) if key.is_finite() => Ok(token as u32),
        Some((token, key)) if key > 0.0 => candle::bail!(
            "logit {token} is {}, which divided by the temperature {temperature:e} is +inf: no \
             token can be sampled",
            logits[token]
        ),
        _ => candle::bail!(
            "all {} logits are -inf: every token is masked",
            logits.len()
        ),
    }
}
