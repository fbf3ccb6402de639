//! What `bench-report` measured, as `docs/report/bench-report.json` holds it for `cargo xtask pr`
//! and `cargo xtask check`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stats::Paired;

/// The version of the report's JSON that this `bench-report` writes, and the only one it reads.
/// A row's weighing against instructions and the A/A pair is stored when the report is written;
/// its verdict follows from the stored interval by the rules of this version.
pub const VERSION: u32 = 1;

/// Where and how it ran, the A/A pair, each patch's step, and the whole series' decode loop (if
/// the model was on disk).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `VERSION` when this `bench-report` wrote it; a report written by another is not read.
    #[serde(default)]
    pub version: u32,
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
    pub short: bool,
    /// The commands that measured it, in order.
    pub commands: Vec<String>,
    /// The sha256 of each patch file it measured, by number: a patch changed since has no numbers
    /// here.
    pub patch_hashes: BTreeMap<String, String>,
    /// The steps that `keep_current` took out, by patch number: not written, never read.
    #[serde(skip)]
    pub stale: Vec<String>,
    pub decode_tokens: u64,
    pub decode_rounds: usize,
    /// The A/A pair: the control against the published point, two builds of identical code,
    /// measured like a step. A report without it (written before it was measured) is refused,
    /// since its verdicts at the same instructions cannot be weighed.
    pub control: Step,
    pub patches: Vec<Step>,
    pub decode: Option<Vec<Decode>>,
}

impl Report {
    /// The patches of `current` (number to the sha256 of its file) that this report did not
    /// measure as they are now, and the numbers it measured that are gone.
    pub fn changed(&self, current: &BTreeMap<String, String>) -> Vec<String> {
        let numbers = current.keys().chain(self.patch_hashes.keys());
        let numbers: std::collections::BTreeSet<&String> = numbers.collect();
        let differs = |n: &&String| current.get(*n) != self.patch_hashes.get(*n);
        numbers.into_iter().filter(differs).cloned().collect()
    }

    /// Takes out every step whose patch, or a patch it builds on, is not what this report
    /// measured, and records them in `stale`: no number from other contents reaches a body.
    pub fn keep_current(&mut self, current: &BTreeMap<String, String>) {
        let mut changed = self.changed(current);
        // A patch builds on one with a lower number, so one pass in order sees every ancestor.
        for step in &self.patches {
            if changed.contains(&step.before) && !changed.contains(&step.after) {
                changed.push(step.after.clone());
            }
        }
        let (kept, stale): (Vec<Step>, Vec<Step>) = std::mem::take(&mut self.patches)
            .into_iter()
            .partition(|step| !changed.contains(&step.after));
        self.patches = kept;
        self.stale = stale.into_iter().map(|step| step.after).collect();
    }

    /// A report from its JSON, as `bench-report` judged it: one of another version is refused.
    pub fn parse(json: &str) -> anyhow::Result<Report> {
        let report: Report = serde_json::from_str(json)?;
        anyhow::ensure!(
            report.version == VERSION,
            "its version is {}, and this bench-report writes {VERSION}",
            report.version
        );
        Ok(report)
    }
}

/// One patch against the point it builds on, with the decode loop where it makes one faster; or
/// the A/A pair, the control against the published point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The point it measures: a patch's number, `control` or `series`.
    #[serde(rename = "patch")]
    pub after: String,
    pub subject: String,
    /// The point it is measured against: `published`, or the number of the patch it builds on.
    pub before: String,
    pub rows: Vec<StepRow>,
    pub decode: Vec<Decode>,
}

impl Step {
    /// The step of `after` over `before`, not measured yet.
    pub fn new(after: &str, subject: &str, before: &str) -> Step {
        let [after, subject, before] = [after, subject, before].map(String::from);
        Step {
            after,
            subject,
            before,
            ..Step::default()
        }
    }

    /// The A/A pair, not measured yet: the control against the published point.
    pub fn control() -> Step {
        let subject = "the published crates, built twice";
        Step::new(shared::CONTROL_POINT, subject, shared::PUBLISHED_POINT)
    }

    /// The paired ratio of `comparison`, if this step measured it.
    pub fn paired(&self, comparison: &str) -> Option<&Paired> {
        let row = self.rows.iter().find(|row| row.comparison == comparison);
        row.map(|row| &row.paired)
    }
}

/// One comparison of a patch's step: median times, and after over before in time and instructions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
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

/// One comparison at one vocabulary, as the report's first table shows it (the JSON does not keep
/// it): criterion's medians, series over published, and the A/A pair, control over published.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub device: String,
    pub comparison: String,
    pub vocab: String,
    pub published_ns: f64,
    pub series_ns: f64,
    pub floor_ns: Option<f64>,
    pub paired: Option<Paired>,
    pub control: Option<Paired>,
    pub instructions: Option<f64>,
}
