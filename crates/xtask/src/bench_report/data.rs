//! What `bench-report` measured, as `target/bench-report.json` holds it for `cargo xtask pr`.

use serde::{Deserialize, Serialize};

use super::stats::Paired;

/// Where and how it ran, the A/A pair, each patch's step, and the whole series' decode loop (if
/// the model was on disk).
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
    /// The short run (`bench-report --short`): the real vocabulary only, and no decode loop.
    #[serde(default)]
    pub short: bool,
    pub decode_tokens: u64,
    pub decode_rounds: usize,
    /// The A/A pair: the control against the published point, two builds of identical code,
    /// measured like a step. A report without it (written before it was measured) is refused,
    /// since its verdicts at the same instructions cannot be weighed.
    pub control: PatchStep,
    pub patches: Vec<PatchStep>,
    pub decode: Option<Vec<Decode>>,
}

impl Report {
    /// A report from its JSON, its instruction labels and decode loops read by today's rules.
    pub fn parse(json: &str) -> serde_json::Result<Report> {
        let mut report: Report = serde_json::from_str(json)?;
        // The pair itself is weighed against nothing, as `bench_report::steps` weighs it.
        for row in &mut report.control.rows {
            row.paired.weigh(row.instructions, None);
        }
        for step in &mut report.patches {
            for row in &mut step.rows {
                let control = report.control.paired(&row.comparison);
                row.paired.weigh(row.instructions, control);
            }
            let mut decode = std::mem::take(&mut step.decode);
            decode.retain(|d| super::faster(step, &d.comparison));
            step.decode = decode;
        }
        Ok(report)
    }
}

/// One patch against the point it builds on, with the decode loop where it makes one faster; or
/// the A/A pair, the control against the published point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PatchStep {
    /// The patch's number, or the control's name.
    pub patch: String,
    pub subject: String,
    /// The point it is measured against: `published`, or the number of the patch it builds on.
    pub before: String,
    pub rows: Vec<Step>,
    pub decode: Vec<Decode>,
}

impl PatchStep {
    /// The A/A pair, not measured yet: the control against the published point.
    pub fn control() -> PatchStep {
        PatchStep {
            patch: shared::CONTROL_POINT.to_string(),
            subject: "the published crates, built twice".to_string(),
            before: shared::PUBLISHED_POINT.to_string(),
            ..PatchStep::default()
        }
    }

    /// The paired ratio of `comparison`, if this step measured it.
    pub fn paired(&self, comparison: &str) -> Option<&Paired> {
        let row = self.rows.iter().find(|row| row.comparison == comparison);
        row.map(|row| &row.paired)
    }
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
