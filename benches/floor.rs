//! Each comparison's floor: what any implementation that returns the same tokens must compute,
//! written as plainly as it can be, on logits already on the host and with buffers reused, so
//! that the report can say how far each side is from it. The same tokens need the same f32
//! probabilities (`exp(logit / t - max) / sum`, so one `exp` per logit, the max and the sum) and,
//! for the weighted draw, their f32 total and prefix sums in index order.

use rand::distr::Distribution;
use rand::rngs::StdRng;
use rand::Rng;
use testbed::sampler::Sampling;

/// Reused between calls, as a tuned implementation would keep them.
#[derive(Default)]
pub struct Scratch {
    prs: Vec<f32>,
    keys: Vec<u64>,
}

/// Index of the largest value: one pass.
fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best
}

/// One pass for the max, one for `exp` and the sum, one for the division.
fn softmax(logits: &[f32], temperature: f32, prs: &mut Vec<f32>) {
    let scale = 1.0 / temperature;
    let max = logits
        .iter()
        .fold(f32::NEG_INFINITY, |m, v| m.max(v * scale));
    prs.clear();
    prs.extend(logits.iter().map(|v| (v * scale - max).exp()));
    let sum: f32 = prs.iter().sum();
    prs.iter_mut().for_each(|p| *p /= sum);
}

/// The weighted draw over `weights` in order: their total, one number, prefix sums up to it.
fn draw(weights: impl Iterator<Item = f32> + Clone, rng: &mut StdRng) -> usize {
    let total: f32 = weights.clone().sum();
    let chosen = rand::distr::Uniform::new(0.0, total)
        .expect("a positive total")
        .sample(rng);
    let mut prefix = 0.0;
    let mut last = 0;
    for (i, w) in weights.enumerate() {
        prefix += w;
        last = i;
        if prefix > chosen {
            break;
        }
    }
    last
}

/// The `k` largest of `prs`, by index, unordered: one selection pass.
fn top_k(prs: &[f32], k: usize, keys: &mut Vec<u64>) {
    keys.clear();
    let one = 1f32.to_bits();
    keys.extend(
        prs.iter()
            .enumerate()
            .map(|(i, p)| (u64::from(one - p.to_bits()) << 32) | i as u64),
    );
    if k < keys.len() {
        keys.select_nth_unstable(k);
        keys.truncate(k);
    }
}

/// The tokens of `keys` (sorted) until their cumulative probability reaches `p`.
fn nucleus(prs: &[f32], p: f32, keys: &mut Vec<u64>) {
    keys.sort_unstable();
    let mut cumsum = 0f32;
    let kept = keys
        .iter()
        .position(|key| {
            cumsum += prs[*key as u32 as usize];
            cumsum >= p
        })
        .map_or(keys.len(), |n| n + 1);
    keys.truncate(kept);
}

/// Candidates for the nucleus of `p`, sorted: the tokens above `(1 - p) / (2 len)`.
fn candidates(prs: &[f32], p: f32, keys: &mut Vec<u64>) {
    let floor = (1.0 - p) / (2 * prs.len()) as f32;
    let one = 1f32.to_bits();
    keys.clear();
    keys.extend(
        prs.iter()
            .enumerate()
            .filter(|(_, pr)| **pr >= floor)
            .map(|(i, pr)| (u64::from(one - pr.to_bits()) << 32) | i as u64),
    );
}

/// The draw over the tokens of `keys`, in index order.
fn draw_keys(prs: &[f32], keys: &mut [u64], rng: &mut StdRng) -> usize {
    keys.sort_unstable_by_key(|key| *key as u32);
    let index = draw(keys.iter().map(|key| prs[*key as u32 as usize]), rng);
    keys[index] as u32 as usize
}

/// The floor of `sampling` on `logits`.
pub fn sample(
    sampling: &Sampling,
    logits: &[f32],
    scratch: &mut Scratch,
    rng: &mut StdRng,
) -> usize {
    let Scratch { prs, keys } = scratch;
    match *sampling {
        Sampling::ArgMax => argmax(logits),
        Sampling::TopK { temperature, .. } if temperature < 1e-7 => argmax(logits),
        Sampling::All { temperature } => {
            softmax(logits, temperature as f32, prs);
            draw(prs.iter().copied(), rng)
        }
        Sampling::TopK { k, temperature } => {
            softmax(logits, temperature as f32, prs);
            top_k(prs, k, keys);
            draw_keys(prs, keys, rng)
        }
        Sampling::TopP { p, temperature } => {
            softmax(logits, temperature as f32, prs);
            candidates(prs, p as f32, keys);
            nucleus(prs, p as f32, keys);
            draw_keys(prs, keys, rng)
        }
        Sampling::TopKThenTopP { k, p, temperature } => {
            softmax(logits, temperature as f32, prs);
            top_k(prs, k, keys);
            nucleus(prs, p as f32, keys);
            draw_keys(prs, keys, rng)
        }
        Sampling::GumbelSoftmax { temperature } => {
            // Its own stream: at least one generator draw per logit and one pass; the
            // logarithms of the noise are left out, so this is below the true floor.
            let mut best = (0, f32::NEG_INFINITY);
            for (i, v) in logits.iter().enumerate() {
                let u: f32 = rng.sample(rand::distr::Open01);
                let key = v / temperature as f32 + u;
                if key > best.1 {
                    best = (i, key);
                }
            }
            best.0
        }
    }
}
