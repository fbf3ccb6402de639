//! What `bench-report` measured, as `target/bench-report.json` holds it: the one type that the
//! report writes and `cargo xtask pr` reads for each pull request's evidence.

use serde::{Deserialize, Serialize};

use super::stats::Paired;

/// The whole measurement: where and how it ran, each patch's step, the decode loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub machine: String,
    pub date: String,
    /// The workspace commit, with a note if the tree had uncommitted changes.
    pub commit: String,
    /// The published crates, as the pin names them.
    pub crate_label: String,
    pub model: String,
    pub vocab: u64,
    pub seed: u64,
    pub temperature: f64,
    /// Paired rounds per sampling comparison.
    pub rounds: usize,
    pub decode_tokens: u64,
    pub decode_rounds: usize,
    /// One per patch of the series, in order.
    pub patches: Vec<PatchStep>,
    /// The published point against the whole series in the decode loop, one per comparison;
    /// `None` where the model was not on disk.
    pub decode: Option<Vec<Decode>>,
}

impl Report {
    /// A report from its JSON, read by the rules of today: each row's instruction label weighed
    /// again, and a patch's decode loop kept only for what the patch makes faster per call, so
    /// that a report written before a rule changed reads as one written now.
    pub fn parse(json: &str) -> serde_json::Result<Report> {
        let mut report: Report = serde_json::from_str(json)?;
        for step in &mut report.patches {
            for row in &mut step.rows {
                row.paired.weigh(row.instructions);
            }
            let decode = std::mem::take(&mut step.decode);
            step.decode = decode
                .into_iter()
                .filter(|d| super::faster(step, &d.comparison))
                .collect();
        }
        Ok(report)
    }
}

/// One patch: its branch against the branch it builds on (or the published crates), per
/// comparison at the real vocabulary on the CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PatchStep {
    /// The patch's number, which is its point's name.
    pub patch: String,
    pub subject: String,
    /// The point it is measured against: `published`, or the number of the patch it builds on.
    pub before: String,
    pub rows: Vec<Step>,
    /// The decode loop, for the comparisons this patch makes faster per call; empty otherwise
    /// or without the model.
    pub decode: Vec<Decode>,
}

/// One comparison of a patch's step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub comparison: String,
    /// The median time of one call over the paired rounds, before and after, in nanoseconds.
    pub before_ns: f64,
    pub after_ns: f64,
    pub paired: Paired,
    /// After over before instructions per call, where callgrind counted them.
    pub instructions: Option<f64>,
}

/// One comparison in the decode loop, between two points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decode {
    pub comparison: String,
    pub before: String,
    pub after: String,
    /// The median milliseconds per token of each side.
    pub before_ms: f64,
    pub after_ms: f64,
    /// The median share of a token's time spent in `sample`, of each side.
    pub before_share: f64,
    pub after_share: f64,
    /// After over before per token.
    pub per_token: Paired,
    /// The same, counting only the sampler's time: a token's time before, less what the sampler
    /// saves, over the time before. The forward pass does the same work on both sides (one
    /// token at the same position), so this leaves its noise out.
    pub sampler_only: Paired,
}
