//! Each comparison's floor: the passes that any implementation returning the same tokens must
//! make (the same f32 probabilities, then one cumulative pass for the draw; top-k adds a
//! selection, top-p a pass and a sort of its few candidates), on logits already on the host.

use rand::distr::Uniform;
use rand::rngs::StdRng;
use rand::Rng;
use testbed::sampler::Sampling;

/// Reused between calls, as a tuned implementation would keep them.
#[derive(Default)]
pub struct Scratch {
    prs: Vec<f32>,
    keys: Vec<u64>,
    weights: Vec<f32>,
}

/// A token's sort key: ascending keys are descending probabilities (`p` in [0, 1], whose bits
/// are in its order), ties in index order.
fn key(token: usize, p: f32) -> u64 {
    (u64::from(1f32.to_bits() - p.to_bits()) << 32) | token as u64
}

fn token(key: u64) -> usize {
    key as u32 as usize
}

/// The largest value, over 8 lanes so that the pass vectorises.
fn max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.max(*v);
        }
    }
    rest.iter()
        .chain(&lanes)
        .fold(f32::NEG_INFINITY, |m, v| m.max(*v))
}

/// `exp(logit / t - max)` into `prs`, and their sum as candle's softmax takes it (its SIMD
/// reduction where the CPU has AVX2), since the same tokens need the same f32 sum.
fn exps(logits: &[f32], temperature: f32, prs: &mut Vec<f32>) -> f32 {
    let scale = 1.0 / temperature;
    let top = max(logits) * scale;
    prs.clear();
    prs.extend(logits.iter().map(|v| (v * scale - top).exp()));
    let mut sum = 0f32;
    // SAFETY: `prs` holds `prs.len()` values, and `sum` one.
    unsafe { candle::cpu::kernels::VecOps::vec_reduce_sum(prs.as_ptr(), &mut sum, prs.len()) };
    sum
}

/// The weighted draw's floor: the f32 total in index order, which fixes the random number;
/// dividing by the softmax's sum and finding the token under the number are left out.
fn draw(weights: &[f32], rng: &mut StdRng) -> usize {
    let total: f32 = weights.iter().sum();
    let chosen: f32 = rng.sample(Uniform::new(0.0, total).expect("a positive total"));
    chosen.to_bits() as usize % weights.len()
}

/// The weighted draw's floor over the tokens of `keys`, in index order.
fn draw_keys(prs: &[f32], keys: &mut [u64], weights: &mut Vec<f32>, rng: &mut StdRng) -> usize {
    keys.sort_unstable_by_key(|key| token(*key));
    weights.clear();
    weights.extend(keys.iter().map(|key| prs[token(*key)]));
    token(keys[draw(weights, rng)])
}

/// The `k` largest of `prs`, unordered: one selection pass.
fn top_k(prs: &[f32], k: usize, keys: &mut Vec<u64>) {
    keys.clear();
    keys.extend(prs.iter().enumerate().map(|(i, p)| key(i, *p)));
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
            cumsum += prs[token(*key)];
            cumsum >= p
        })
        .map_or(keys.len(), |n| n + 1);
    keys.truncate(kept);
}

pub fn sample(
    sampling: &Sampling,
    logits: &[f32],
    scratch: &mut Scratch,
    rng: &mut StdRng,
) -> usize {
    let Scratch { prs, keys, weights } = scratch;
    match *sampling {
        Sampling::ArgMax => {
            let top = max(logits);
            logits.iter().position(|v| *v == top).unwrap_or(0)
        }
        Sampling::All { temperature } => {
            std::hint::black_box(exps(logits, temperature as f32, prs));
            draw(prs, rng)
        }
        Sampling::TopK { k, temperature } => {
            std::hint::black_box(exps(logits, temperature as f32, prs));
            top_k(prs, k, keys);
            draw_keys(prs, keys, weights, rng)
        }
        Sampling::TopP { p, temperature } => {
            let sum = exps(logits, temperature as f32, prs);
            // The nucleus's candidates: the tokens above `(sum - p sum) / (2 len)`.
            let mass = p as f32 * sum;
            let floor = (sum - mass) / (2 * prs.len()) as f32;
            keys.clear();
            let above = prs.iter().enumerate().filter(|(_, p)| **p >= floor);
            keys.extend(above.map(|(i, p)| key(i, *p)));
            nucleus(prs, mass, keys);
            draw_keys(prs, keys, weights, rng)
        }
        Sampling::TopKThenTopP { k, p, temperature } => {
            let sum = exps(logits, temperature as f32, prs);
            top_k(prs, k, keys);
            nucleus(prs, p as f32 * sum, keys);
            draw_keys(prs, keys, weights, rng)
        }
        Sampling::GumbelSoftmax { temperature } => {
            // Its own stream: at least one generator draw per logit and one pass; the
            // logarithms of the noise are left out, so this is below the true floor.
            let mut best = (0, f32::NEG_INFINITY);
            for (i, v) in logits.iter().enumerate() {
                let u: f32 = rng.sample(rand::distr::Open01);
                let noisy = v / temperature as f32 + u;
                if noisy > best.1 {
                    best = (i, noisy);
                }
            }
            best.0
        }
    }
}
