//! What `bench-report` measured, as `target/bench-report.json` holds it for `cargo xtask pr`.

use serde::{Deserialize, Serialize};

use super::stats::Paired;

/// Where and how it ran, each patch's step, and the whole series' decode loop (if the model was on
/// disk).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub machine: String,
    pub date: String,
    /// The workspace commit, with a note if the tree had uncommitted changes.
    pub commit: String,
    pub crate_label: String,
    pub model: String,
    pub vocab: u64,
    pub seed: u64,
    pub temperature: f64,
    /// Paired rounds per sampling comparison.
    pub rounds: usize,
    pub decode_tokens: u64,
    pub decode_rounds: usize,
    pub patches: Vec<PatchStep>,
    pub decode: Option<Vec<Decode>>,
}

impl Report {
    /// A report from its JSON, its instruction labels and decode loops read by today's rules.
    pub fn parse(json: &str) -> serde_json::Result<Report> {
        let mut report: Report = serde_json::from_str(json)?;
        for step in &mut report.patches {
            for row in &mut step.rows {
                row.paired.weigh(row.instructions);
            }
            let mut decode = std::mem::take(&mut step.decode);
            decode.retain(|d| super::faster(step, &d.comparison));
            step.decode = decode;
        }
        Ok(report)
    }
}

/// One patch against the point it builds on, with the decode loop where it makes one faster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PatchStep {
    pub patch: String,
    pub subject: String,
    /// The point it is measured against: `published`, or the number of the patch it builds on.
    pub before: String,
    pub rows: Vec<Step>,
    pub decode: Vec<Decode>,
}

/// One comparison of a patch's step: median times, and after over before in time and instructions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub comparison: String,
    pub before_ns: f64,
    pub after_ns: f64,
    pub paired: Paired,
    pub instructions: Option<f64>,
}

/// One comparison in the decode loop: each side's ms per token and `sample`'s share of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decode {
    pub comparison: String,
    pub before: String,
    pub after: String,
    pub before_ms: f64,
    pub after_ms: f64,
    pub before_share: f64,
    pub after_share: f64,
    pub per_token: Paired,
    /// Before less what the sampler saves, over before: the forward pass's noise left out.
    pub sampler_only: Paired,
}
