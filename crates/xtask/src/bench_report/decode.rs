//! The decode loop as `bench-driver decode` timed it, and what its rounds give between two points.

use anyhow::{Context, Result};

use crate::report::data::Decode;
use crate::report::stats::{median, Paired};

/// One comparison's decode loop as `bench-driver decode` timed it: per round, each point's total
/// time and its sampler's time, in ns, for `tokens` tokens, two columns per point in `points`'
/// order.
#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    pub comparison: String,
    pub points: Vec<String>,
    pub tokens: u64,
    pub rounds: Vec<Vec<f64>>,
}

impl Loop {
    /// `point`'s rounds in the order they ran: (ms per token, the sampler's ms per token).
    pub fn per_token(&self, point: &str) -> Result<Vec<(f64, f64)>> {
        let i = self.points.iter().position(|p| p == point);
        let i = 2 * i.with_context(|| format!("the decode loop did not run the point {point}"))?;
        let ms = |ns: f64| ns / self.tokens as f64 / 1e6;
        Ok(self
            .rounds
            .iter()
            .map(|r| (ms(r[i]), ms(r[i + 1])))
            .collect())
    }

    /// The decode loop between two of its points: each side's median ms per token and the
    /// sampler's median share of it, and the paired ratios per token.
    pub fn between(&self, before: &str, after: &str) -> Result<Decode> {
        let (b, a) = (self.per_token(before)?, self.per_token(after)?);
        let tokens = |side: &[(f64, f64)]| -> Vec<f64> { side.iter().map(|r| r.0).collect() };
        let share = |side: &[(f64, f64)]| median(side.iter().map(|(ms, sampler)| sampler / ms));
        // A token's time before, less what the sampler saves.
        let sides = b.iter().zip(&a);
        let sampler_only: Vec<f64> = sides.map(|(b, a)| b.0 - (b.1 - a.1)).collect();
        Ok(Decode {
            comparison: self.comparison.clone(),
            before: before.to_string(),
            after: after.to_string(),
            before_ms: median(b.iter().map(|r| r.0)),
            after_ms: median(a.iter().map(|r| r.0)),
            before_share: share(&b),
            after_share: share(&a),
            per_token: Paired::between(&tokens(&b), &tokens(&a)),
            sampler_only: Paired::between(&tokens(&b), &sampler_only),
        })
    }
}
