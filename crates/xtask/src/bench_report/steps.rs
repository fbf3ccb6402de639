//! The arithmetic of the report's steps: each point's rounds per call, the paired ratios of a
//! patch against the point it builds on, weighed against the A/A pair and the instruction counts.

use std::collections::BTreeMap;

use anyhow::Result;
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::report::data::{Step, StepRow};
use crate::report::stats::{median, parse_rounds, Paired, Verdict};
use crate::report::Row;

/// Each point's time of one call in every round, at the real vocabulary on the CPU, by point.
pub type PointRounds = BTreeMap<String, Vec<f64>>;

/// Each point's time of one call per round from `bench-driver pair`, less the points left out.
pub fn per_call(points: &[String], output: &str, calls: u64) -> Result<PointRounds> {
    let rounds = parse_rounds(output, points.len())?;
    let ran = |i: &usize| rounds.iter().all(|r| !r[*i].is_nan());
    let times = |i: usize| -> Vec<f64> { rounds.iter().map(|r| r[i] / calls as f64).collect() };
    Ok((0..points.len())
        .filter(ran)
        .map(|i| (points[i].clone(), times(i)))
        .collect())
}

/// Instructions per call that callgrind counted, by comparison and point.
pub type Counts = BTreeMap<(String, String), f64>;

/// After over before instructions per call in `comparison`, where callgrind counted both.
fn instruction_ratio(counts: &Counts, comparison: &str, before: &str, after: &str) -> Option<f64> {
    let count = |point: &str| counts.get(&(comparison.to_string(), point.to_string()));
    Some(count(after)? / count(before)?)
}

/// Fills the A/A pair's rows (`control`, from `Step::control`), then each patch's, for every
/// comparison that both its points could run, each weighed against the A/A pair's row.
pub fn steps(
    control: &mut Step,
    patches: &mut [Step],
    rounds: &BTreeMap<String, PointRounds>,
    counts: &Counts,
) {
    // The pair itself is weighed against nothing: its difference is what it shows.
    control.rows = step_rows(control, None, rounds, counts);
    for step in patches {
        step.rows = step_rows(step, Some(control), rounds, counts);
    }
}

/// The whole series against the published crates at the real vocabulary, from the same rounds
/// and counts as the steps and weighed the same way, as the forest plot's first panel.
pub fn whole_series(
    control: &Step,
    rounds: &BTreeMap<String, PointRounds>,
    counts: &Counts,
) -> Step {
    let mut whole = Step::new(SERIES_POINT, "the whole series", PUBLISHED_POINT);
    whole.rows = step_rows(&whole, Some(control), rounds, counts);
    whole
}

/// `step`'s rows, weighed against `control`'s where given.
fn step_rows(
    step: &Step,
    control: Option<&Step>,
    rounds: &BTreeMap<String, PointRounds>,
    counts: &Counts,
) -> Vec<StepRow> {
    rounds
        .iter()
        .filter_map(|(comparison, points)| {
            let (before, after) = (points.get(&step.before)?, points.get(&step.after)?);
            let instructions = instruction_ratio(counts, comparison, &step.before, &step.after);
            let mut paired = Paired::between(before, after);
            paired.weigh(instructions, control.and_then(|c| c.paired(comparison)));
            Some(StepRow {
                comparison: comparison.clone(),
                before_ns: median(before),
                after_ns: median(after),
                paired,
                instructions,
            })
        })
        .collect()
}

/// Whether `step` makes `comparison` faster per call, in time and not against the instruction
/// counts (at the same or more instructions the time is most likely where the code lands).
pub fn faster(step: &Step, comparison: &str) -> bool {
    let gain = |r: &StepRow| r.comparison == comparison && r.paired.verdict() == Verdict::Faster;
    step.rows.iter().any(|r| gain(r) && r.paired.work.is_none())
}

/// The points to decode with: the published point, the series and every faster step's sides.
pub fn decode_points(comparison: &str, steps: &[Step]) -> Vec<String> {
    let mut points = vec![PUBLISHED_POINT.to_string(), SERIES_POINT.to_string()];
    let faster_steps = steps.iter().filter(|step| faster(step, comparison));
    for point in faster_steps.flat_map(|step| [&step.before, &step.after]) {
        if !points.contains(point) {
            points.push(point.clone());
        }
    }
    points
}

/// Weighs each CPU row's verdict against the instruction counts, taken at the vocabulary
/// `real_vocab`: they weigh every vocabulary's, and the row at `real_vocab` shows them.
pub(super) fn weigh_rows(rows: &mut [Row], counts: &Counts, real_vocab: &str) {
    for row in rows.iter_mut().filter(|row| row.device == "cpu") {
        let ratio = instruction_ratio(counts, &row.comparison, PUBLISHED_POINT, SERIES_POINT);
        if row.vocab == real_vocab {
            row.instructions = ratio;
        }
        if let Some(paired) = &mut row.paired {
            paired.weigh(ratio, row.control.as_ref());
        }
    }
}
